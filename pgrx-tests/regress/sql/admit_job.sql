-- admit_job(agent_id, job_id): the breaker's gate while closed, open and half open (one canary).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('0193a8b2-0000-7000-8000-0000000f0da1', 1);
-- Closed: every job is admitted (and recorded); the job need not be in the job table.
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d01') AS admitted;
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d02') AS admitted;
SELECT job_id, agent_id, canary FROM cortex_buffer.circuit_admission WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0da1' ORDER BY job_id;
-- One failure trips this agent's breaker (threshold 1): open, nothing is admitted.
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d01', false);
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d03') AS admitted;
-- The cooldown over (moved into the past): half open, the first job asking becomes the canary.
UPDATE cortex_buffer.circuit SET open_until = now() - interval '1 second' WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0da1';
SELECT state FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0da1');
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d04') AS canary;
-- Asking again for the canary stays true; every other job is refused.
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d04') AS canary_again,
       cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d05') AS other_job;
SELECT job_id, canary FROM cortex_buffer.circuit_admission WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0d04';
-- A canary that has not reported within its lease is replaced by the next job that asks.
UPDATE cortex_buffer.circuit SET canary_lease_until = now() - interval '1 second' WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0da1';
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d06') AS new_canary;
SELECT canary_job_id FROM cortex_buffer.circuit WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0da1';
-- The canary's success closes the breaker: everyone is admitted again.
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d06', true);
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d07') AS admitted;
-- An agent without a config row gets the defaults: closed.
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da2', '0193a8b2-0000-7000-8000-0000000f0d08') AS admitted;
-- Strict: NULL in, NULL out (and nothing recorded).
SELECT cortex_buffer.admit_job(NULL, '0193a8b2-0000-7000-8000-0000000f0d09') IS NULL AS null_agent,
       cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', NULL) IS NULL AS null_job;
-- The control plane may admit; the agent and the operator may not (42501).
SET ROLE regress_control_plane;
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d0a') AS admitted;
RESET ROLE;
SET ROLE regress_agent;
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d0b');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_operator;
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0da1', '0193a8b2-0000-7000-8000-0000000f0d0b');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.circuit_admission WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0d%';
DELETE FROM cortex_buffer.circuit_outcome WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0d%';
DELETE FROM cortex_buffer.circuit WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0d%';
DELETE FROM cortex_buffer.circuit_config WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0d%';
