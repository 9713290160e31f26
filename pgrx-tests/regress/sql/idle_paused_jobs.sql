-- idle_paused_jobs(idle_after): jobs waiting for approval longer than idle_after, oldest first.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, updated_at) VALUES
    -- waiting since long ago (its updated_at)
    ('0193a8b2-0000-7000-8000-0000000f0a01', '0193a8b2-0000-7000-8000-0000000f0aa1', 'WAITING_FOR_APPROVAL', '2000-01-01 02:00:00+00'),
    -- first seen waiting by heartbeat() even earlier (job_wait), though its updated_at is recent
    ('0193a8b2-0000-7000-8000-0000000f0a02', '0193a8b2-0000-7000-8000-0000000f0aa1', 'WAITING_FOR_APPROVAL', now()),
    -- waiting since just now
    ('0193a8b2-0000-7000-8000-0000000f0a03', '0193a8b2-0000-7000-8000-0000000f0aa1', 'WAITING_FOR_APPROVAL', now()),
    -- running again, with a stale first-seen time left behind
    ('0193a8b2-0000-7000-8000-0000000f0a04', '0193a8b2-0000-7000-8000-0000000f0aa1', 'RUNNING', '2000-01-01 00:00:00+00');
INSERT INTO cortex_buffer.job_wait (job_id, waiting_since) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0a02', '2000-01-01 01:00:00+00'),
    ('0193a8b2-0000-7000-8000-0000000f0a04', '2000-01-01 00:00:00+00');
SELECT job_id, agent_id, waiting_since FROM cortex_buffer.idle_paused_jobs('30 minutes')
 WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0aa1';
-- The first-seen time of the job no longer waiting is forgotten.
SELECT job_id FROM cortex_buffer.job_wait WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0a%' ORDER BY job_id;
-- NULL takes the default (30 minutes).
SELECT job_id FROM cortex_buffer.idle_paused_jobs(NULL) WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0aa1';
SELECT job_id FROM cortex_buffer.idle_paused_jobs() WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0aa1';
-- idle_after not positive: 22023.
SELECT * FROM cortex_buffer.idle_paused_jobs('0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.idle_paused_jobs('-1 hour');
\echo :LAST_ERROR_SQLSTATE
-- The control plane may ask; the agent may not (42501).
SET ROLE regress_control_plane;
SELECT job_id FROM cortex_buffer.idle_paused_jobs('1 hour') WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0aa1';
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.idle_paused_jobs();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.job_wait WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0a%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f0a%';
