-- set_budget(agent_id, max_input_tokens_per_job, max_cost_usd_per_job): limits per job, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- Both limits.
BEGIN;
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job, updated_at = now() AS updated_now
  FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', 50000, 0.50);
COMMIT;
-- Setting again replaces both: NULL is unlimited.
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, 2);
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1');
-- 0 allows nothing; an exact decimal with 18 decimals is kept exactly.
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a2', 0, 0);
SELECT max_cost_usd_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a3', NULL, 0.123456789012345678);
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.agent_budget
 WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f12%' ORDER BY agent_id;
-- A negative limit: 22023.
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, -0.01);
\echo :LAST_ERROR_SQLSTATE
-- A cost that is not a finite decimal: 22023.
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, 'Infinity');
\echo :LAST_ERROR_SQLSTATE
-- More than 18 decimals, or too many digits for exact arithmetic: 22003.
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, 0.0000000000000000001);
\echo :LAST_ERROR_SQLSTATE
-- (terse: this one fails the table's CHECK instead, whose DETAIL names the time and carries a Rust backtrace)
\set VERBOSITY terse
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a1', NULL, 10000000000000000000);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- Just below 10^19 is accepted.
SELECT max_cost_usd_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a5', NULL, 9999999999999999999.999999999999999999);
-- NULL agent_id: 22004.
SELECT * FROM cortex_buffer.set_budget(NULL, 1000);
\echo :LAST_ERROR_SQLSTATE
-- The refused calls changed nothing.
SELECT max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.agent_budget WHERE agent_id = '0193a8b2-0000-7000-8000-0000000f12a1';
-- The operator may set budgets; the agent and the control plane may not (42501), nor write agent_budget.
SET ROLE regress_operator;
SELECT agent_id, max_input_tokens_per_job FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a4', 10);
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a4', 1000000);
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.agent_budget SET max_input_tokens_per_job = NULL;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f12a4', 1000000);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f12%';
