-- record_outcome(agent_id, job_id, success): what counts, tripping, the canary's verdict.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('0193a8b2-0000-7000-8000-0000000f0ea1', 2);
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0ea1', j::uuid) AS admitted FROM (VALUES
    ('0193a8b2-0000-7000-8000-0000000f0e01'), ('0193a8b2-0000-7000-8000-0000000f0e02'),
    ('0193a8b2-0000-7000-8000-0000000f0e03'), ('0193a8b2-0000-7000-8000-0000000f0e04')) AS v(j);
-- A success: closed, no failures.
SELECT * FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e01', true);
-- A failure counts.
SELECT * FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e02', false);
-- The second counted failure trips it: open until the cooldown ends.
SELECT state, failures_in_window, open_until > now() + interval '29 minutes' AS cooling_down_30_minutes
  FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e03', false);
-- A late outcome of a job admitted before the trip changes nothing.
SELECT state, failures_in_window FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e04', false);
SELECT job_id, success, counted FROM cortex_buffer.circuit_outcome WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0ea1' ORDER BY outcome_id;
-- Half open: the canary fails, so the breaker opens for another cooldown.
UPDATE cortex_buffer.circuit SET open_until = now() - interval '1 second' WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0ea1';
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e05') AS canary;
SELECT state, open_until > now() AS cooling_down
  FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e05', false);
SELECT trips FROM cortex_buffer.circuit WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0ea1';
-- Half open again: another job's outcome does not decide; the canary's success closes it.
UPDATE cortex_buffer.circuit SET open_until = now() - interval '1 second' WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0ea1';
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e06') AS canary;
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e07', true);
SELECT state, failures_in_window, open_until FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e06', true);
-- A job admitted since the breaker closed fails: the docs say failures from before the close no
-- longer count, so one failure should leave it closed (threshold 2).
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e08') AS admitted;
SELECT state, failures_in_window FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e08', false);
-- The failure of a job never admitted through admit_job is counted too (threshold 1 here).
INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('0193a8b2-0000-7000-8000-0000000f0ea3', 1);
SELECT state, failures_in_window, open_until IS NOT NULL AS has_open_until
  FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea3', '0193a8b2-0000-7000-8000-0000000f0e09', false);
SELECT job_id, success, counted FROM cortex_buffer.circuit_outcome WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f0ea3';
-- Strict: NULL in, no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e08', NULL);
-- The control plane may report; the agent may not (42501).
SET ROLE regress_control_plane;
SELECT state FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea2', '0193a8b2-0000-7000-8000-0000000f0e0a', true);
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.record_outcome('0193a8b2-0000-7000-8000-0000000f0ea1', '0193a8b2-0000-7000-8000-0000000f0e0a', true);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.circuit_admission WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0e%';
DELETE FROM cortex_buffer.circuit_outcome WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0e%';
DELETE FROM cortex_buffer.circuit WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0e%';
DELETE FROM cortex_buffer.circuit_config WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0e%';
