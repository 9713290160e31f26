-- session_usage(path): a transcript's usage and its sub-agents', per file and model, each response once.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- One response.
SELECT regexp_replace(path, '^.*/', '') AS file, subagent, model, responses, input_tokens, output_tokens,
       cache_creation_input_tokens, cache_read_input_tokens, cost_usd
  FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
-- Two responses (one written as two lines, counted once, the larger copy) and a sub-agent's file on its own row,
-- whose model has no price: cost NULL, not an error.
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, subagent, model, responses, input_tokens, output_tokens,
       cache_creation_input_tokens, cache_read_input_tokens, cost_usd
  FROM cortex_buffer.session_usage('proj/22222222-2222-4222-8222-222222222222.jsonl');
-- A transcript without responses: one row of zeros.
SELECT regexp_replace(path, '^.*/', '') AS file, subagent, model, responses, input_tokens, cost_usd
  FROM cortex_buffer.session_usage('/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl');
-- A cortex file's LLM_RESPONSE events count too.
SELECT regexp_replace(path, '^.*/', '') AS file, model, responses, input_tokens, output_tokens, cache_read_input_tokens, cost_usd
  FROM cortex_buffer.session_usage('0193a8b2-0000-7000-8000-0000000fa001/session-001.jsonl');
-- Not in the index: 58P01.
SELECT * FROM cortex_buffer.session_usage('proj/nothing.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- A relative path with . or .. components: 22023.
SELECT * FROM cortex_buffer.session_usage('proj/../proj/11111111-2222-4333-8444-555555555555.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- Discovered but not indexed yet (simulated, then read only so nothing indexes it; rolled back): 55000.
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 0, indexed_offset = 0
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/11111111-2222-4333-8444-555555555555.jsonl';
SET LOCAL transaction_read_only = on;
SELECT * FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL returns no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.session_usage(NULL);
-- The control plane and the operator may ask; the agent may not (42501).
SET ROLE regress_control_plane;
SELECT responses, cost_usd FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
RESET ROLE;
SET ROLE regress_operator;
SELECT responses, cost_usd FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
