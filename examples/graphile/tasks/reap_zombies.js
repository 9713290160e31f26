// Reaps zombie jobs, then re-enqueues each one the retry rules sent to RETRYING, at
// now() + retry_after. Moving the job from RETRYING to SCHEDULED is the control plane's own
// step; "run_agent_job" stands for its task that dispatches a job. DEAD_LETTER jobs are left.
module.exports = async (_payload, helpers) => {
  const { rows } = await helpers.query(
    `SELECT job_id, agent_id, new_status, now() + retry_after AS run_at
       FROM cortex_buffer.reap_zombies()`,
  );
  for (const job of rows) {
    if (job.new_status !== 'RETRYING') continue; // DEAD_LETTER: no more attempts
    await helpers.addJob('run_agent_job', { jobId: job.job_id }, {
      runAt: job.run_at,
      jobKey: `agent-job:${job.job_id}`,
    });
  }
  if (rows.length > 0) helpers.logger.info(`reaped ${rows.length} zombie job(s)`);
};
