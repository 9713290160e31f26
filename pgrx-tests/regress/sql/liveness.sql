-- Liveness: heartbeats, the reaper, crashes, retry decisions, the breaker.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at) VALUES
    ('00000000-0000-4000-8000-00000000d001', '00000000-0000-4000-8000-0000000000a2', 'RUNNING', 1, now()),
    ('00000000-0000-4000-8000-00000000d002', '00000000-0000-4000-8000-0000000000a2', 'RUNNING', 1, now() - interval '1 hour');
SELECT cortex_buffer.heartbeat('00000000-0000-4000-8000-00000000d001') AS beats, cortex_buffer.heartbeat('00000000-0000-4000-8000-00000000ffff') AS unknown_job;
SELECT job_id, attempt, new_status, retry_after FROM cortex_buffer.reap_zombies('5 minutes');
SELECT cortex_buffer.heartbeat('00000000-0000-4000-8000-00000000d002') AS reaped_may_continue;
SELECT * FROM cortex_buffer.reap_zombies('-5 minutes');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies('5 minutes', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.idle_paused_jobs('0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('00000000-0000-4000-8000-00000000d001', 137, 'OOMKilled') > 0 AS recorded;
SELECT cortex_buffer.record_crash(NULL, 137, 'OOMKilled');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('00000000-0000-4000-8000-00000000ffff', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.retry_decision('00000000-0000-4000-8000-00000000d001');
SELECT * FROM cortex_buffer.retry_decision('00000000-0000-4000-8000-00000000ffff');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.admit_job('00000000-0000-4000-8000-0000000000a2', '00000000-0000-4000-8000-00000000d001');
SELECT state, failures_in_window FROM cortex_buffer.record_outcome('00000000-0000-4000-8000-0000000000a2', '00000000-0000-4000-8000-00000000d001', false);
SELECT state, failures_in_window, open_until IS NULL AS closed FROM cortex_buffer.circuit_state('00000000-0000-4000-8000-0000000000a2');
-- A transition the control plane forbids.
UPDATE cortex_buffer.job SET status = 'PENDING' WHERE id = '00000000-0000-4000-8000-00000000d001';
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('00000000-0000-4000-8000-0000000000a2', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.reaper_index_sql();
