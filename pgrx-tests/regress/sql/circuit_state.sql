-- circuit_state(agent_id): closed, open, half_open; the window; circuit_config and its CHECKs.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- An agent never seen: closed, no failures.
SELECT * FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
-- Failures within the window are counted (default threshold 3).
SELECT count(cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0fa1', j::uuid)) AS admitted FROM (VALUES
    ('0193a8b2-0000-7000-8000-0000000f0f01'), ('0193a8b2-0000-7000-8000-0000000f0f02'), ('0193a8b2-0000-7000-8000-0000000f0f03')) AS v(j);
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0fa1', '0193a8b2-0000-7000-8000-0000000f0f01', false);
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0fa1', '0193a8b2-0000-7000-8000-0000000f0f02', false);
SELECT * FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
-- A failure older than the window (15 minutes) no longer counts.
UPDATE cortex_buffer.circuit_outcome SET recorded_at = now() - interval '16 minutes'
 WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0fa1' AND job_id = '0193a8b2-0000-7000-8000-0000000f0f01';
SELECT state, failures_in_window FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
-- An operator's config for this agent: a wider window counts it again; the threshold trips it.
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold, failure_window, cooldown)
VALUES ('0193a8b2-0000-7000-8000-0000000f0fa1', 2, '1 hour', '2 hours');
SELECT state, failures_in_window FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
SELECT state, failures_in_window, open_until > now() + interval '119 minutes' AS open_two_hours
  FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0fa1', '0193a8b2-0000-7000-8000-0000000f0f03', false);
SELECT state, failures_in_window, open_until IS NOT NULL AS has_open_until FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
-- After the cooldown: half_open (open_until is still reported).
UPDATE cortex_buffer.circuit SET open_until = '2000-01-01 00:00:00+00' WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0fa1';
SELECT * FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
-- circuit_config rejects parameters that are not positive: PostgreSQL's own 23514.
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa2', 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_window) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa2', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.circuit_config (agent_id, cooldown) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa2', '-1 minute');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.circuit_config (agent_id, canary_lease) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa2', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL in, no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.circuit_state(NULL);
-- The operator writes circuit_config but may not read the breaker; the agent may do neither (42501).
SET ROLE regress_operator;
INSERT INTO cortex_buffer.circuit_config (agent_id) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa3');
SELECT * FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.circuit SET open = false;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
INSERT INTO cortex_buffer.circuit_config (agent_id) VALUES ('0193a8b2-0000-7000-8000-0000000f0fa4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
SELECT state FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f0fa1');
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.circuit_admission WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0f%';
DELETE FROM cortex_buffer.circuit_outcome WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0f%';
DELETE FROM cortex_buffer.circuit WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0f%';
DELETE FROM cortex_buffer.circuit_config WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0f%';
