-- job_sessions: each job's session files as recovery sees them (a view with the caller's rights).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
SELECT job_id, regexp_replace(path, '^.*/', '') AS file, dialect, session_ordinal, generation, total_lines, valid_lines,
       corrupt_lines, round(corruption_ratio::numeric, 4) AS ratio, trusted, tail_state, unindexed_bytes, gone_at, quarantined_at,
       seq_gaps, seq_resets, foreign_job_lines, last_event_type, last_event_at, last_seq, agent_state, agent_state_confidence,
       recovery_refusal
  FROM cortex_buffer.job_sessions ORDER BY job_id, path;
-- Only files in a job directory (a transcript's project and the LOG slices are not jobs).
SELECT count(*) AS files_without_job FROM cortex_buffer.job_sessions WHERE job_id IS NULL;
-- recovery_refusal follows the index (simulated; rolled back).
BEGIN;
UPDATE cortex_buffer.session_file SET quarantined_at = '2026-01-01 00:00:00+00' WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
UPDATE cortex_buffer.session_file SET trusted = false WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
UPDATE cortex_buffer.session_file SET gone_at = '2026-01-01 00:00:00+00', indexed_offset = indexed_offset - 1
 WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SELECT job_id, quarantined_at, gone_at, unindexed_bytes, recovery_refusal FROM cortex_buffer.job_sessions ORDER BY job_id;
ROLLBACK;
-- The control plane and the operator may read it; the agent and strangers may not (42501).
SET ROLE regress_control_plane;
SELECT count(*) AS as_control_plane FROM cortex_buffer.job_sessions;
RESET ROLE;
SET ROLE regress_operator;
SELECT count(*) AS as_operator FROM cortex_buffer.job_sessions;
RESET ROLE;
SET ROLE regress_agent;
SELECT count(*) FROM cortex_buffer.job_sessions;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT count(*) FROM cortex_buffer.job_sessions;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
