-- untrusted_session_files: the session files recovery will not read, and why (a view with the caller's rights).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- Every fixture is readable.
SELECT count(*) AS refused FROM cortex_buffer.untrusted_session_files;
-- One file for each reason (simulated in the index; rolled back).
BEGIN;
UPDATE cortex_buffer.session_file SET failures = 5, last_error = 'simulated', last_error_at = '2026-01-01 00:00:00+00',
       quarantined_at = '2026-01-01 00:00:00+00'
 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
UPDATE cortex_buffer.session_file SET generation = 0, indexed_offset = 0
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl';
UPDATE cortex_buffer.session_file SET trusted = false WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/snapshots.jsonl';
UPDATE cortex_buffer.session_file SET gone_at = '2026-01-02 00:00:00+00', indexed_offset = indexed_offset - 100
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
SELECT reason, job_id, regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, dialect,
       round(corruption_ratio::numeric, 4) AS ratio, corrupt_lines, valid_lines, unindexed_bytes, failures, last_error, gone_at,
       quarantined_at, indexed_at IS NOT NULL AS indexed
  FROM cortex_buffer.untrusted_session_files ORDER BY path;
ROLLBACK;
-- The control plane and the operator may read it; the agent and strangers may not (42501).
SET ROLE regress_control_plane;
SELECT count(*) AS as_control_plane FROM cortex_buffer.untrusted_session_files;
RESET ROLE;
SET ROLE regress_operator;
SELECT count(*) AS as_operator FROM cortex_buffer.untrusted_session_files;
RESET ROLE;
SET ROLE regress_agent;
SELECT count(*) FROM cortex_buffer.untrusted_session_files;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT count(*) FROM cortex_buffer.untrusted_session_files;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
