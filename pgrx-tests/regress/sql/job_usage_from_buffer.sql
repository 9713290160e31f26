-- job_usage_from_buffer(job_id): a job's usage from its session files, next to what record_usage recorded.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000fa001', '0193a8b2-0000-7000-8000-0000000f23a1', 'RUNNING');
-- The shipped writer's two LLM_RESPONSE events (data.tokenUsage), nothing recorded: all of it unrecorded.
SELECT * FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
-- The pod recorded the first call before it died: the difference is the second.
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000fa001', 'claude-sonnet-4-5-20250929',
       '{"input_tokens": 1200, "output_tokens": 300}', 'req-1');
SELECT responses, recorded_calls, recorded_input_tokens, recorded_output_tokens, recorded_cost_usd, unrecorded
  FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
-- A spike session whose model has no price (from its LLM_REQUEST): the cost is unknown, not an error.
SELECT responses, input_tokens, output_tokens, cost_usd, models, unpriced_responses, unrecorded
  FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fb001');
-- A job without LLM_RESPONSE events, and one without files: zeros.
SELECT responses, cost_usd, models, recorded_calls, unrecorded FROM cortex_buffer.job_usage_from_buffer('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
SELECT responses, cost_usd, models, recorded_calls FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000f23ff');
-- Strict: NULL returns no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.job_usage_from_buffer(NULL);
-- The agent, the control plane and the operator may ask; strangers may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000fa001') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT responses AS as_agent FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT responses AS as_control_plane FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
RESET ROLE;
SET ROLE regress_operator;
SELECT responses AS as_operator FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.job_usage_from_buffer('0193a8b2-0000-7000-8000-0000000fa001');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.usage_ledger WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
DELETE FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
DELETE FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000fa001';
