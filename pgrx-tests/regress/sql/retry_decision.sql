-- retry_decision(job_id): every row of the retry rules, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, max_attempts) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0c01', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 1, 3),   -- no crash record
    ('0193a8b2-0000-7000-8000-0000000f0c02', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 3, 3),   -- attempts used up
    ('0193a8b2-0000-7000-8000-0000000f0c03', '0193a8b2-0000-7000-8000-0000000f0ca2', 'FAILED', 1, 3),   -- budget exhausted
    ('0193a8b2-0000-7000-8000-0000000f0c04', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 2, 10),  -- drained
    ('0193a8b2-0000-7000-8000-0000000f0c05', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 3, 10),  -- the same error three times
    ('0193a8b2-0000-7000-8000-0000000f0c06', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 2, 10),  -- OOM twice
    ('0193a8b2-0000-7000-8000-0000000f0c07', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 2, 10),  -- OOM after another failure
    ('0193a8b2-0000-7000-8000-0000000f0c08', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 1, 10),  -- 1 failure
    ('0193a8b2-0000-7000-8000-0000000f0c09', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 2, 10),  -- 2 failures
    ('0193a8b2-0000-7000-8000-0000000f0c0a', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 3, 10),  -- 3 failures
    ('0193a8b2-0000-7000-8000-0000000f0c0b', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 4, 10),  -- 4 failures
    ('0193a8b2-0000-7000-8000-0000000f0c0c', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 5, 10),  -- 5 failures
    ('0193a8b2-0000-7000-8000-0000000f0c0d', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 3, 10),  -- a drain between failures
    ('0193a8b2-0000-7000-8000-0000000f0c0e', '0193a8b2-0000-7000-8000-0000000f0ca1', 'FAILED', 3, 10),  -- zombies carry no message
    ('0193a8b2-0000-7000-8000-0000000f0c0f', '0193a8b2-0000-7000-8000-0000000f0ca1', 'RUNNING', 1, 3); -- still running
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f0ca2', 0);
SELECT count(cortex_buffer.record_crash(j::uuid, e, m)) AS crashes FROM (VALUES
    ('0193a8b2-0000-7000-8000-0000000f0c02', 1, 'boom'),
    ('0193a8b2-0000-7000-8000-0000000f0c03', 1, 'boom'),
    ('0193a8b2-0000-7000-8000-0000000f0c04', 1, 'boom'), ('0193a8b2-0000-7000-8000-0000000f0c04', 143, 'SIGTERM'),
    ('0193a8b2-0000-7000-8000-0000000f0c05', 1, 'same'), ('0193a8b2-0000-7000-8000-0000000f0c05', 1, 'same'), ('0193a8b2-0000-7000-8000-0000000f0c05', 1, 'same'),
    ('0193a8b2-0000-7000-8000-0000000f0c06', 137, 'OOMKilled'), ('0193a8b2-0000-7000-8000-0000000f0c06', 137, 'OOMKilled'),
    ('0193a8b2-0000-7000-8000-0000000f0c07', 1, 'boom'), ('0193a8b2-0000-7000-8000-0000000f0c07', 137, 'OOMKilled'),
    ('0193a8b2-0000-7000-8000-0000000f0c08', 1, 'e1'),
    ('0193a8b2-0000-7000-8000-0000000f0c09', 1, 'e1'), ('0193a8b2-0000-7000-8000-0000000f0c09', 1, 'e2'),
    ('0193a8b2-0000-7000-8000-0000000f0c0a', 1, 'e1'), ('0193a8b2-0000-7000-8000-0000000f0c0a', 1, 'e2'), ('0193a8b2-0000-7000-8000-0000000f0c0a', 1, 'e3'),
    ('0193a8b2-0000-7000-8000-0000000f0c0b', 1, 'e1'), ('0193a8b2-0000-7000-8000-0000000f0c0b', 1, 'e2'), ('0193a8b2-0000-7000-8000-0000000f0c0b', 1, 'e3'),
    ('0193a8b2-0000-7000-8000-0000000f0c0b', 1, 'e4'),
    ('0193a8b2-0000-7000-8000-0000000f0c0c', 1, 'e1'), ('0193a8b2-0000-7000-8000-0000000f0c0c', 1, 'e2'), ('0193a8b2-0000-7000-8000-0000000f0c0c', 1, 'e3'),
    ('0193a8b2-0000-7000-8000-0000000f0c0c', 1, 'e4'), ('0193a8b2-0000-7000-8000-0000000f0c0c', 1, 'e5'),
    ('0193a8b2-0000-7000-8000-0000000f0c0d', 1, 'same'), ('0193a8b2-0000-7000-8000-0000000f0c0d', 143, 'SIGTERM'), ('0193a8b2-0000-7000-8000-0000000f0c0d', 1, 'same'),
    ('0193a8b2-0000-7000-8000-0000000f0c0d', 1, 'same')) AS c(j, e, m);
-- Zombies, as the reaper records them (no exit code, no message).
INSERT INTO cortex_buffer.crash (job_id, agent_id, attempt, reason) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0c0e', '0193a8b2-0000-7000-8000-0000000f0ca1', 1, 'zombie'),
    ('0193a8b2-0000-7000-8000-0000000f0c0e', '0193a8b2-0000-7000-8000-0000000f0ca1', 2, 'zombie'),
    ('0193a8b2-0000-7000-8000-0000000f0c0e', '0193a8b2-0000-7000-8000-0000000f0ca1', 3, 'zombie');
SELECT j.id, j.attempt, j.max_attempts, d.*
  FROM cortex_buffer.job j, LATERAL cortex_buffer.retry_decision(j.id) d
 WHERE j.id::text LIKE '0193a8b2-0000-7000-8000-0000000f0c%' ORDER BY j.id;
-- It decides; it changes nothing.
SELECT count(*) FILTER (WHERE status <> 'FAILED') AS changed FROM cortex_buffer.job
 WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f0c%' AND id <> '0193a8b2-0000-7000-8000-0000000f0c0f';
-- Strict: a NULL job_id returns no row. No such job: P0002.
SELECT count(*) AS rows_for_null FROM cortex_buffer.retry_decision(NULL);
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f0cff');
\echo :LAST_ERROR_SQLSTATE
-- The control plane may ask; the agent may not (42501).
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f0c06');
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f0c06');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0c%';
DELETE FROM cortex_buffer.crash WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0c%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f0c%';
