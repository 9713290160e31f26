-- The session indexer: a pass, integrity, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT regexp_replace(path, '^.*/', '') AS file, job_dir, dialect, action, detail, events_added, corrupt_added
  FROM cortex_buffer.index_sessions() ORDER BY path;
SELECT regexp_replace(path, '^.*/', '') AS file, dialect, valid_lines, corrupt_lines, tail_state, seq_gaps, trusted
  FROM cortex_buffer.session_file ORDER BY path;
SELECT line_no, reason, preview FROM cortex_buffer.corrupt_line ORDER BY file_id, line_no;
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl');
SELECT total_lines, severity FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/no-such-job/session-001.jsonl');
SELECT * FROM cortex_buffer.file_integrity('relative/session-001.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.index_sessions('relative/path');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.index_sessions('/nonexistent/cortex_buffer');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.index_now();
SELECT worker_state, files_tracked, events_indexed, corrupt_lines, files_untrusted FROM cortex_buffer.indexer_status;
SELECT type, seq, invocation_id FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
