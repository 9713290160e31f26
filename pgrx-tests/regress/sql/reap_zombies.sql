-- reap_zombies(stale_after, max_jobs): stale RUNNING jobs to RETRYING or DEAD_LETTER, the error record, every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, max_attempts, heartbeat_at, started_at, updated_at, error) VALUES
    -- stale, retries left, no error yet
    ('0193a8b2-0000-7000-8000-0000000f0801', '0193a8b2-0000-7000-8000-0000000f08a1', 'RUNNING', 1, 3, '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', NULL),
    -- stale, on its last attempt, with an error object of its own
    ('0193a8b2-0000-7000-8000-0000000f0802', '0193a8b2-0000-7000-8000-0000000f08a1', 'RUNNING', 3, 3, '2000-01-01 00:01:00+00', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '{"code": "E1"}'),
    -- never beat, started long ago, with an error that is not an object
    ('0193a8b2-0000-7000-8000-0000000f0803', '0193a8b2-0000-7000-8000-0000000f08a1', 'RUNNING', 1, 3, NULL, '2000-01-01 00:02:00+00', '2000-01-01 00:02:00+00', '"plain text"'),
    -- beating
    ('0193a8b2-0000-7000-8000-0000000f0804', '0193a8b2-0000-7000-8000-0000000f08a1', 'RUNNING', 1, 3, now(), now(), now(), NULL),
    -- never beat, but started just now
    ('0193a8b2-0000-7000-8000-0000000f0805', '0193a8b2-0000-7000-8000-0000000f08a1', 'RUNNING', 1, 3, NULL, now(), now(), NULL),
    -- stale but not RUNNING
    ('0193a8b2-0000-7000-8000-0000000f0806', '0193a8b2-0000-7000-8000-0000000f08a1', 'WAITING_FOR_APPROVAL', 1, 3, '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', NULL),
    -- stale, of an agent whose budget allows nothing
    ('0193a8b2-0000-7000-8000-0000000f0807', '0193a8b2-0000-7000-8000-0000000f08a2', 'RUNNING', 1, 3, '2000-01-01 00:03:00+00', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', NULL);
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f08a2', 0);
-- At most max_jobs, oldest heartbeat first; max_jobs 0 reaps nothing.
SELECT * FROM cortex_buffer.reap_zombies('1 day', 0);
SELECT job_id, agent_id, attempt, new_status, retry_after, last_heartbeat FROM cortex_buffer.reap_zombies('1 day', 1);
-- The rest (the job that never beat is placed by its start).
SELECT job_id, agent_id, attempt, new_status, retry_after, last_heartbeat FROM cortex_buffer.reap_zombies('1 day');
-- Nothing stale is left.
SELECT count(*) AS reaped_again FROM cortex_buffer.reap_zombies('1 day');
-- The jobs: FAILED then RETRYING or DEAD_LETTER (with completed_at); attempt untouched; the reason merged into error.
SELECT id, status, attempt, completed_at IS NOT NULL AS completed, error->>'reason' AS reason, error->'attempt' AS error_attempt,
       error->'retry_decision' AS decision, error->'previous' AS previous, error->>'code' AS own_code,
       error ? 'last_heartbeat' AND error ? 'stale_for' AND error ? 'reaped_at' AS has_times
  FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f08%' ORDER BY id;
-- Each reaped job has a zombie crash record.
SELECT job_id, agent_id, attempt, reason, exit_code, error_message FROM cortex_buffer.crash
 WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f08%' ORDER BY job_id;
-- NULL arguments take their defaults ('5 minutes', 1000).
SELECT count(*) AS reaped FROM cortex_buffer.reap_zombies(NULL, NULL);
-- stale_after not positive, max_jobs negative: 22023.
SELECT * FROM cortex_buffer.reap_zombies('0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies('-5 minutes');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies('5 minutes', -1);
\echo :LAST_ERROR_SQLSTATE
-- The control plane may reap; the agent and the operator may not (42501).
SET ROLE regress_control_plane;
SELECT count(*) AS reaped FROM cortex_buffer.reap_zombies('1 day');
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.reap_zombies();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_operator;
SELECT * FROM cortex_buffer.reap_zombies();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f08%';
DELETE FROM cortex_buffer.crash WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f08%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f08%';
