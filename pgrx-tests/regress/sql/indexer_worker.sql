-- indexer_worker(): the background worker's figures from shared memory (PUBLIC).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- Disabled (cortex_buffer.worker_enabled = off): connected, idle, no passes.
SELECT worker_pid IS NOT NULL AS has_pid, worker_state, last_pass_at, last_pass_ms, passes, events_indexed, errors
  FROM cortex_buffer.indexer_worker();
-- index_sessions() runs in the caller's session, not the worker's: the figures do not move.
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
SELECT passes, events_indexed, errors FROM cortex_buffer.indexer_worker();
-- The worker is the backend pg_stat_activity names cortex_buffer indexer.
SELECT w.worker_pid = a.pid AS same_pid, a.application_name
  FROM cortex_buffer.indexer_worker() w JOIN pg_stat_activity a ON a.backend_type = 'cortex_buffer indexer';
-- PUBLIC may call it.
SET ROLE regress_stranger;
SELECT worker_state, passes FROM cortex_buffer.indexer_worker();
RESET ROLE;
