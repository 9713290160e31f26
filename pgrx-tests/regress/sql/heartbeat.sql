-- heartbeat(job_id): true while RUNNING or WAITING_FOR_APPROVAL, false otherwise (the agent must stop).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, heartbeat_at) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0701', '0193a8b2-0000-7000-8000-0000000f07a1', 'RUNNING', '2000-01-01 00:00:00+00'),
    ('0193a8b2-0000-7000-8000-0000000f0702', '0193a8b2-0000-7000-8000-0000000f07a1', 'WAITING_FOR_APPROVAL', NULL),
    ('0193a8b2-0000-7000-8000-0000000f0703', '0193a8b2-0000-7000-8000-0000000f07a1', 'COMPLETED', '2000-01-01 00:00:00+00'),
    ('0193a8b2-0000-7000-8000-0000000f0704', '0193a8b2-0000-7000-8000-0000000f07a1', 'FAILED', '2000-01-01 00:00:00+00'),
    ('0193a8b2-0000-7000-8000-0000000f0705', '0193a8b2-0000-7000-8000-0000000f07a1', 'PENDING', NULL),
    ('0193a8b2-0000-7000-8000-0000000f0706', '0193a8b2-0000-7000-8000-0000000f07a1', 'DEAD_LETTER', NULL),
    ('0193a8b2-0000-7000-8000-0000000f0707', '0193a8b2-0000-7000-8000-0000000f07a1', 'RETRYING', NULL);
-- A running job beats: true, and heartbeat_at is now.
BEGIN;
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0701') AS keep_going;
SELECT heartbeat_at = now() AS beat_now FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f0701';
COMMIT;
-- A job waiting for approval beats too, and its first beat records when it was first seen waiting.
BEGIN;
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0702') AS keep_going;
SELECT waiting_since = now() AS first_seen_now FROM cortex_buffer.job_wait WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0702';
COMMIT;
UPDATE cortex_buffer.job_wait SET waiting_since = '2000-01-01 00:00:00+00' WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0702';
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0702') AS keep_going;
SELECT waiting_since FROM cortex_buffer.job_wait WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0702';
-- Finished, failed, not yet running, dead or awaiting retry: false, and nothing is written.
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0703') AS completed,
       cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0704') AS failed,
       cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0705') AS pending,
       cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0706') AS dead_letter,
       cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0707') AS retrying;
SELECT id, heartbeat_at FROM cortex_buffer.job
 WHERE id IN ('0193a8b2-0000-7000-8000-0000000f0703', '0193a8b2-0000-7000-8000-0000000f0704', '0193a8b2-0000-7000-8000-0000000f0705')
 ORDER BY id;
-- A job that does not exist: false, not P0002.
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f07ff') AS unknown_job;
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.heartbeat(NULL) IS NULL AS null_in_null_out;
-- The agent may beat; the control plane and strangers may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f0701') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0701') AS as_agent;
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0701');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f0701');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.job_wait WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f07%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f07%';
