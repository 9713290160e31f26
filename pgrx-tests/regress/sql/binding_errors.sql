-- The job-table errors every job function raises: 22023 (not schema-qualified, or temporary), 42P01 (no such
-- table), 42P16 (the column contract, every difference listed), and 42501 for a non-superuser setting job_table.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
CREATE SCHEMA regress_binding_errors;
CREATE TABLE regress_binding_errors.job (id uuid PRIMARY KEY, agent_id uuid, status text, checkpoint text, attempt bigint);
-- Not schema-qualified: 22023.
SET cortex_buffer.job_table = 'job';
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.verify_checkpoints();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.reaper_index_sql();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.idle_paused_jobs();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f2d01', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f2d01', 'claude-haiku-4-5-20251001', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f2d01', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.settle_usage('0193a8b2-0000-7000-8000-0000000f2dff', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
SELECT item, ok, detail FROM cortex_buffer.check_binding() WHERE item = 'job_table';
-- A temporary table: 22023 (a caller's temporary table could stand in for the real one).
CREATE TEMP TABLE job (id uuid PRIMARY KEY);
SET cortex_buffer.job_table = 'pg_temp.job';
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE pg_temp.job;
-- No such table: 42P01.
SET cortex_buffer.job_table = 'regress_binding_errors.nothing';
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.verify_checkpoints();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.reaper_index_sql();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.idle_paused_jobs();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f2d01', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f2d01', 'claude-haiku-4-5-20251001', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f2d01', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.settle_usage('0193a8b2-0000-7000-8000-0000000f2dff', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
SELECT item, ok, detail FROM cortex_buffer.check_binding() WHERE item = 'job_table';
-- A table that does not meet the column contract: 42P16, every difference in the DETAIL.
SET cortex_buffer.job_table = 'regress_binding_errors.job';
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.verify_checkpoints();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.heartbeat('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reap_zombies();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.reaper_index_sql();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.idle_paused_jobs();
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f2d01', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.retry_decision('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f2d01', 'claude-haiku-4-5-20251001', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f2d01', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.settle_usage('0193a8b2-0000-7000-8000-0000000f2dff', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f2d01');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
SELECT item, ok, detail FROM cortex_buffer.check_binding() WHERE item = 'job_table';
RESET cortex_buffer.job_table;
-- Functions that do not use the job table are not affected by a bad binding.
SET cortex_buffer.job_table = 'regress_binding_errors.nothing';
SELECT cortex_buffer.admit_job('0193a8b2-0000-7000-8000-0000000f2da1', '0193a8b2-0000-7000-8000-0000000f2d02') AS admitted,
       (SELECT state FROM cortex_buffer.circuit_state('0193a8b2-0000-7000-8000-0000000f2da1')) AS state,
       cortex_buffer.checkpoint_crc('{}') AS crc;
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f2da1', 10);
RESET cortex_buffer.job_table;
-- Only a superuser may set job_table (42501).
SET ROLE regress_operator;
SET cortex_buffer.job_table = 'public.job';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DROP SCHEMA regress_binding_errors CASCADE;
DELETE FROM cortex_buffer.agent_budget WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f2da1';
DELETE FROM cortex_buffer.circuit_admission WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f2da1';
DELETE FROM cortex_buffer.circuit WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f2da1';
