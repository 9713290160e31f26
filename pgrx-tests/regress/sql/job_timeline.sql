-- job_timeline(job_id): a job's events, gaps, restarts and corrupt lines, with the database's records among them.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- The spike fixture job: a lost event, a corrupt last line, its checkpoint.
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '00000000-0000-4000-8000-0000000000a4', 'RUNNING')
ON CONFLICT (id) DO NOTHING;
DO $$
BEGIN
    IF (SELECT checkpoint IS NULL FROM cortex_buffer.job WHERE id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') THEN
        PERFORM cortex_buffer.write_checkpoint('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f',
            '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000000c1", "step_index": 0}');
    END IF;
END $$;
SELECT at IS NOT NULL AS timed, source, kind, session, line_no, byte_offset, seq, detail
  FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
-- A job with every kind of database record: a checkpoint, usage, a breaker admission and outcome, a crash, the reaper.
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at) VALUES
    ('0193a8b2-0000-7000-8000-0000000fb001', '0193a8b2-0000-7000-8000-0000000f21a1', 'RUNNING', 1, '2000-01-01 00:00:00+00');
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000fb001', '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f21c1", "step_index": 0}');
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000fb001', 'claude-haiku-4-5-20251001', '{"input_tokens": 500, "output_tokens": 50}', 'req-1');
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f21a1', '0193a8b2-0000-7000-8000-0000000fb001') AS admitted;
-- (an admission shows until its outcome is reported)
SELECT source, kind, detail FROM cortex_buffer.job_timeline('0193a8b2-0000-7000-8000-0000000fb001') WHERE source = 'circuit_admission';
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f21a1', '0193a8b2-0000-7000-8000-0000000fb001', false);
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000fb001', 137, 'OOMKilled') > 0 AS recorded;
UPDATE cortex_buffer.job SET heartbeat_at = '2000-01-01 00:00:00+00' WHERE id = '0193a8b2-0000-7000-8000-0000000fb001';
SELECT job_id, new_status FROM cortex_buffer.reap_zombies('1 day');
SELECT at IS NOT NULL AS timed, source, kind, session, line_no, seq, detail
  FROM cortex_buffer.job_timeline('0193a8b2-0000-7000-8000-0000000fb001');
-- A job with no files and no records: nothing. Strict: NULL returns no row.
SELECT count(*) AS rows FROM cortex_buffer.job_timeline('0193a8b2-0000-7000-8000-0000000f21ff');
SELECT count(*) AS rows_for_null FROM cortex_buffer.job_timeline(NULL);
-- The operator may read it; the agent its own job's (with the job's token) but no other's; the control
-- plane may not (42501).
SET ROLE regress_operator;
SELECT count(*) AS as_operator FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
RESET ROLE;
SET ROLE regress_control_plane;
SELECT count(*) FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT cortex_buffer.job_token('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT count(*) FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
SELECT count(*) FROM cortex_buffer.job_timeline('0193a8b2-0000-7000-8000-0000000fb001');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET cortex_buffer.job_token;
-- Clean up.
DELETE FROM cortex_buffer.circuit_admission WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f21a1';
DELETE FROM cortex_buffer.circuit_outcome WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f21a1';
DELETE FROM cortex_buffer.circuit WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f21a1';
DELETE FROM cortex_buffer.crash WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
DELETE FROM cortex_buffer.usage_ledger WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
DELETE FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
DELETE FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000fb001';
