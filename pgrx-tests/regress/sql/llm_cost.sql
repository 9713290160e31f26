-- llm_cost(usage, model, at): exact cost at the price in force, every usage spelling, every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The seed design's example: 15 000 in, 2 150 out, 8 000 cache writes on Sonnet 4.5 (not rounded).
SELECT cortex_buffer.llm_cost('{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000}',
                              'claude-sonnet-4-5-20250929');
-- Anthropic's spelling, with the cache-write breakdown by lifetime; and the same wrapped in a Claude Code message.
SELECT cortex_buffer.llm_cost('{"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 3000,
                                "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}}',
                              'claude-sonnet-4-5-20250929') AS anthropic,
       cortex_buffer.llm_cost('{"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 100,
                                "cache_creation_input_tokens": 3000, "cache_creation":
                                {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}}}',
                              'claude-sonnet-4-5-20250929') AS wrapped;
-- Cache writes without a breakdown are 5-minute writes.
SELECT cortex_buffer.llm_cost('{"cache_creation_input_tokens": 1000000}', 'claude-sonnet-4-5-20250929') AS five_minute,
       cortex_buffer.llm_cost('{"cache_creation_input_tokens": 1000000, "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1000000}}',
                              'claude-sonnet-4-5-20250929') AS one_hour;
-- The control plane's spelling, wrapped or at the top level.
SELECT cortex_buffer.llm_cost('{"tokenUsage": {"inputTokens": 1000, "outputTokens": 10, "cacheReadTokens": 500, "cacheCreationTokens": 100}}',
                              'claude-haiku-4-5-20251001') AS wrapped,
       cortex_buffer.llm_cost('{"inputTokens": 1000, "outputTokens": 10, "cacheReadTokens": 500, "cacheCreationTokens": 100}',
                              'claude-haiku-4-5-20251001') AS top_level;
-- Two spellings that agree; 15000.0 is 15000; null is absent; other keys are ignored.
SELECT cortex_buffer.llm_cost('{"input_tokens": 15000.0, "inputTokens": 15000, "output_tokens": null, "model": "x", "service_tier": "standard"}',
                              'claude-sonnet-4-5-20250929');
-- Never rounded: one token.
SELECT cortex_buffer.llm_cost('{"cache_read_tokens": 1}', 'claude-haiku-4-5-20251001') AS one_cache_read;
-- The price in force at the call's time: a new row with a later effective_from applies from then on.
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-10', '2025-01-01', 1, 2, 0, 0, 0), ('regress-model-10', '2026-01-01', 10, 20, 0, 0, 0);
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'regress-model-10', '2025-06-01') AS in_2025,
       cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'regress-model-10', '2026-01-01') AS from_2026;
-- No price (names match exactly), or none in force at that time: 42704, with the INSERT to run.
SELECT cortex_buffer.llm_cost('{"input_tokens": 1}', 'Claude-Sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": 1}', 'regress-model-10', '2024-12-31 23:59:59+00');
\echo :LAST_ERROR_SQLSTATE
-- Not an object, or no counts: 22023.
SELECT cortex_buffer.llm_cost('[1]', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('"1000 tokens"', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"usage": {"foo": 1}}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
-- A negative, fractional or non-numeric count: 22023.
SELECT cortex_buffer.llm_cost('{"output_tokens": -5}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": 1.5}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"input_tokens": "10"}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.llm_cost('{"tokenUsage": {"inputTokens": true}}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
-- Two spellings of one count disagree: 22023.
SELECT cortex_buffer.llm_cost('{"cache_read_tokens": 1, "cache_read_input_tokens": 2}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
-- The breakdown does not add up: 22023.
SELECT cortex_buffer.llm_cost('{"cache_creation_input_tokens": 10, "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 3}}',
                              'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
-- A count above 2^53 - 1: 22003 (2^53 - 1 itself is fine).
SELECT cortex_buffer.llm_cost('{"output_tokens": 9007199254740991}', 'claude-sonnet-4-5-20250929') AS largest;
SELECT cortex_buffer.llm_cost('{"output_tokens": 9007199254740992}', 'claude-sonnet-4-5-20250929');
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.llm_cost(NULL, 'claude-sonnet-4-5-20250929') IS NULL AS null_usage,
       cortex_buffer.llm_cost('{"input_tokens": 1}', NULL) IS NULL AS null_model,
       cortex_buffer.llm_cost('{"input_tokens": 1}', 'claude-sonnet-4-5-20250929', NULL) IS NULL AS null_at;
-- PUBLIC may call it (and read model_price), but not change prices.
SET ROLE regress_stranger;
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-opus-4-1-20250805') AS as_stranger;
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-10', '2027-01-01', 1, 1, 1, 1, 1);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.model_price WHERE model = 'regress-model-10';
