-- check_token_budget(job_id): allowed or not, and why, before an LLM call.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f1301', '0193a8b2-0000-7000-8000-0000000f13a1', 'RUNNING'),  -- agent without a budget
    ('0193a8b2-0000-7000-8000-0000000f1302', '0193a8b2-0000-7000-8000-0000000f13a2', 'RUNNING'),  -- 10 000 tokens, $1
    ('0193a8b2-0000-7000-8000-0000000f1303', '0193a8b2-0000-7000-8000-0000000f13a2', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1304', '0193a8b2-0000-7000-8000-0000000f13a2', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1305', '0193a8b2-0000-7000-8000-0000000f13a3', 'RUNNING');  -- 0 allows nothing
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f13a2', 10000, 1);
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f13a3', 0, 0);
-- No budget: allowed, no limits.
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1301');
-- Nothing used yet: within budget.
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1302');
-- Input tokens for budgets are input + cache write + cache read.
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1302', 'claude-haiku-4-5-20251001',
       '{"input_tokens": 1000, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 3000}');
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1302');
-- Exactly at the token limit: exhausted (used >= limit).
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1302', 'claude-haiku-4-5-20251001', '{"input_tokens": 4000}');
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1302');
-- Over the cost limit (and not the token limit): cost_budget_exhausted.
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1303', 'claude-opus-4-1-20250805', '{"output_tokens": 20000}');
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1303');
-- Over both: the cost is checked first.
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1304', 'claude-opus-4-1-20250805', '{"input_tokens": 70000}');
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1304');
-- A limit of 0 allows nothing, even before the first call.
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1305');
-- Strict: NULL returns no row. No such job: P0002.
SELECT count(*) AS rows_for_null FROM cortex_buffer.check_token_budget(NULL);
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f13ff');
\echo :LAST_ERROR_SQLSTATE
-- The agent may check; the control plane may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f1302') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT allowed, reason FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1302');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-0000-7000-8000-0000000f1302');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f13%';
DELETE FROM cortex_buffer.usage_ledger WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f13%';
DELETE FROM cortex_buffer.job_usage WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f13%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f13%';
