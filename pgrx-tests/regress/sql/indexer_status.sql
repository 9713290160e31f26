-- indexer_status: the indexer at a glance (the worker's figures and totals over session_file).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
SELECT worker_pid IS NOT NULL AS has_pid, worker_state, last_pass_at, last_pass_ms, passes, files_tracked, files_gone,
       bytes_indexed, bytes_pending, events_indexed, corrupt_lines, files_pending_tail, files_untrusted, files_failing,
       files_quarantined, last_error, last_error_at, worker_errors
  FROM cortex_buffer.indexer_status;
-- The totals are those of session_file.
SELECT (SELECT files_tracked FROM cortex_buffer.indexer_status) = count(*) FILTER (WHERE gone_at IS NULL) AS files_match,
       (SELECT events_indexed FROM cortex_buffer.indexer_status) = sum(valid_lines) AS events_match,
       (SELECT bytes_indexed FROM cortex_buffer.indexer_status) = sum(indexed_offset) AS bytes_match
  FROM cortex_buffer.session_file;
-- A failing, a quarantined, an untrusted, a gone and a half-indexed file (simulated, then rolled back).
BEGIN;
UPDATE cortex_buffer.session_file SET failures = 2, last_error = 'older error', last_error_at = '2026-01-01 00:00:00+00'
 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
UPDATE cortex_buffer.session_file SET failures = 5, last_error = 'permission denied', last_error_at = '2026-01-02 00:00:00+00',
       quarantined_at = '2026-01-02 00:00:00+00'
 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/snapshots.jsonl';
UPDATE cortex_buffer.session_file SET trusted = false
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl';
UPDATE cortex_buffer.session_file SET gone_at = '2026-01-03 00:00:00+00'
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/22222222-2222-4222-8222-222222222222/subagents/agent-a1.jsonl';
UPDATE cortex_buffer.session_file SET indexed_offset = indexed_offset - 100, tail_pending = true
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/22222222-2222-4222-8222-222222222222.jsonl';
SELECT files_tracked, files_gone, bytes_pending, files_pending_tail, files_untrusted, files_failing, files_quarantined,
       last_error, last_error_at
  FROM cortex_buffer.indexer_status;
ROLLBACK;
-- The operator and pg_monitor may read it; the agent, the control plane and strangers may not (42501).
CREATE ROLE regress_monitor NOLOGIN;
GRANT pg_monitor TO regress_monitor;
SET ROLE regress_monitor;
SELECT worker_state, files_tracked FROM cortex_buffer.indexer_status;
RESET ROLE;
SET ROLE regress_operator;
SELECT worker_state, files_tracked FROM cortex_buffer.indexer_status;
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.indexer_status;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.indexer_status;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.indexer_status;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_monitor;
