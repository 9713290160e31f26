-- record_usage(job_id, model, usage, request_id, at): running totals, idempotency, the job row's columns, refusals.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f1101', '0193a8b2-0000-7000-8000-0000000f11a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1102', '0193a8b2-0000-7000-8000-0000000f11a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1103', '0193a8b2-0000-7000-8000-0000000f11a1', 'COMPLETED');
-- The first call: the running totals.
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929',
                                         '{"input_tokens": 12000, "output_tokens": 800}', 'req-1');
-- The same request again (a retried HTTP call): counted once, totals unchanged; the first one wins.
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929',
                                         '{"input_tokens": 99999}', 'req-1');
-- Another request with cache traffic (input_tokens stays uncached input).
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929',
                                         '{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 30000}', 'req-2');
-- A NULL request_id is never de-duplicated.
SELECT llm_calls, duplicate FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-haiku-4-5-20251001', '{"output_tokens": 1}');
SELECT llm_calls, duplicate FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-haiku-4-5-20251001', '{"output_tokens": 1}', NULL);
-- The exact totals, and the job row's columns kept in step (tokens_in = input + cache write + cache read; cost_usd rounded to 6 decimals).
SELECT input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, cost_usd, llm_calls
  FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1101';
SELECT tokens_in, tokens_out, cost_usd, llm_call_count FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f1101';
-- The ledger: one row per counted call.
SELECT request_id, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd
  FROM cortex_buffer.usage_ledger WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1101' ORDER BY usage_id;
-- Priced at the call's time: the at argument (NULL is now).
SELECT cost_usd FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1102', 'claude-sonnet-4-5-20250929',
                                                '{"input_tokens": 1000000}', 'req-at', at => '2025-10-01 00:00:00+00');
SELECT cost_usd FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1102', 'claude-sonnet-4-5-20250929',
                                                '{"input_tokens": 1000000}', 'req-null-at', NULL);
SELECT cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1102', 'claude-sonnet-4-5-20250929',
                                  '{"input_tokens": 1}', 'req-early', at => '2020-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
-- Totals beyond what the job row's columns hold are clamped there (integer, numeric(12,6)); job_usage keeps them exact.
SELECT input_tokens, output_tokens, cost_usd FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1102', 'claude-opus-4-1-20250805',
                                         '{"input_tokens": 3000000000, "output_tokens": 9007199254740991}', 'req-huge');
SELECT tokens_in, tokens_out, cost_usd, llm_call_count FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f1102';
-- Any status may record (a finished job's late usage still counts).
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1103', 'claude-haiku-4-5-20251001', '{"input_tokens": 1}');
-- NULL job_id, model or usage: 22004.
SELECT * FROM cortex_buffer.record_usage(NULL, 'claude-sonnet-4-5-20250929', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', NULL, '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929', NULL);
\echo :LAST_ERROR_SQLSTATE
-- A model without a price: 42704. A usage llm_cost refuses: 22023, 22003.
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'gpt-unknown', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929', '{"input_tokens": -1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-sonnet-4-5-20250929', '{"input_tokens": 9007199254740992}');
\echo :LAST_ERROR_SQLSTATE
-- No such job: P0002.
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f11ff', 'claude-sonnet-4-5-20250929', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
-- Nothing was counted by the refused calls.
SELECT llm_calls FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1101';
-- The agent may record; the control plane and strangers may not (42501), nor write job_usage themselves.
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f1101') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT llm_calls, duplicate FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-haiku-4-5-20251001', '{"output_tokens": 1}', 'req-agent');
UPDATE cortex_buffer.job_usage SET cost_usd = 0 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1101';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-haiku-4-5-20251001', '{"output_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1101', 'claude-haiku-4-5-20251001', '{"output_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.usage_ledger WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f11%';
DELETE FROM cortex_buffer.job_usage WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f11%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f11%';
