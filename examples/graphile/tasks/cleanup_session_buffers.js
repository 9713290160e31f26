// Applies cortex_buffer's retention policy (docs/operations.md, Retention). Each call is its
// own transaction and deletes from at most cortex_buffer.cleanup_max_dirs directories, so a
// first cleanup of a long-grown volume runs as several short calls: call again while one
// deleted anything. The login needs cortex_buffer_operator (and SELECT on the job table).
module.exports = async (_payload, helpers) => {
  for (let call = 1; call <= 100; call++) {
    const { rows } = await helpers.query(
      `SELECT action, count(*)::int AS actions, coalesce(sum(bytes), 0)::bigint AS bytes
         FROM cortex_buffer.cleanup_session_buffers()
        GROUP BY action ORDER BY action`,
    );
    const summary = rows.map((r) => `${r.action}=${r.actions}`).join(' ');
    helpers.logger.info(`cleanup call ${call}: ${summary || 'nothing to do'}`);
    for (const r of rows) {
      if (r.action === 'error') helpers.logger.warn(`cleanup: ${r.actions} error row(s); see the function's rows`);
    }
    const deleted = rows.filter((r) => r.action === 'delete_dir' || r.action === 'delete_file');
    if (deleted.length === 0) break;
  }
};
