-- Spend: exact costs, idempotent usage, budgets and reservations, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT cortex_buffer.llm_cost('{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000}', 'claude-sonnet-4-5-20250929');
SELECT cortex_buffer.llm_cost('{"tokenUsage": {"inputTokens": 1000, "outputTokens": 10, "cacheReadTokens": 500}}', 'claude-haiku-4-5-20251001');
SELECT cortex_buffer.llm_cost('{"input_tokens": 1}', 'gpt-unknown');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": 1}', 'claude-sonnet-4-5-20250929', '2020-01-01');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": -1}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": 1, "inputTokens": 2}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"foo": 1}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": 9007199254740992}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"cache_creation_input_tokens": 10, "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 3}}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-0000000000a3', 'RUNNING');
SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-00000000e001', 'claude-sonnet-4-5-20250929', '{"input_tokens": 1000, "output_tokens": 100}', 'req-1');
SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-00000000e001', 'claude-sonnet-4-5-20250929', '{"input_tokens": 1000, "output_tokens": 100}', 'req-1');
SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-00000000ffff', 'claude-sonnet-4-5-20250929', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-00000000e001', NULL, '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_id, max_input_tokens_per_job, max_cost_usd_per_job FROM cortex_buffer.set_budget('00000000-0000-4000-8000-0000000000a3', 5000, 1.00);
SELECT * FROM cortex_buffer.set_budget('00000000-0000-4000-8000-0000000000a3', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_token_budget('00000000-0000-4000-8000-00000000e001');
SELECT * FROM cortex_buffer.check_token_budget('00000000-0000-4000-8000-00000000ffff');
\echo :LAST_ERROR_SQLSTATE
SELECT reservation_id IS NULL AS refused, allowed, reason FROM cortex_buffer.reserve_budget('00000000-0000-4000-8000-00000000e001', '{"input_tokens": 9000}', 'claude-sonnet-4-5-20250929');
SELECT * FROM cortex_buffer.settle_usage('00000000-0000-4000-8000-000000000000', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.release_reservation('00000000-0000-4000-8000-000000000000');
\echo :LAST_ERROR_SQLSTATE
-- Seeded prices cannot be changed.
UPDATE cortex_buffer.model_price SET input_per_mtok = 0 WHERE model = 'claude-sonnet-4-5-20250929';
\echo :LAST_ERROR_SQLSTATE
