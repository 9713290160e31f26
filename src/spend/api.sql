-- Spend's functions: the price cache's invalidation trigger (its function is Rust, so it comes
-- after schema.sql) and the comments of the functions sql.rs defines. Grants: sql/privileges.sql.
CREATE TRIGGER model_price_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cortex_buffer.model_price
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_buffer.model_price_changed();
COMMENT ON FUNCTION cortex_buffer.model_price_changed() IS
'Trigger: invalidates every session''s cached prices when model_price changes (at commit).';
COMMENT ON TRIGGER model_price_changed ON cortex_buffer.model_price IS
'Price changes reach every session''s price cache from its next transaction.';

COMMENT ON FUNCTION cortex_buffer.llm_cost(jsonb, text, timestamptz) IS
'Exact USD cost of one call''s usage (seed, Anthropic/Claude Code or the control plane''s tokenUsage spelling; the cache_creation breakdown prices 5-minute and 1-hour cache writes) with the model''s price in force at "at". Never rounded.';
COMMENT ON FUNCTION cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz) IS
'Adds one LLM call''s tokens, exact cost and a call count to the job''s totals, atomically and once per (job_id, request_id) (duplicate = true for a repeat); returns the running totals. Keeps the bound job table''s tokens_in/tokens_out/cost_usd/llm_call_count in step.';
COMMENT ON FUNCTION cortex_buffer.set_budget(uuid, bigint, numeric) IS
'Sets an agent''s per-job limits on input tokens (input + cache write + cache read) and USD; NULL is unlimited, 0 allows nothing. Returns the stored row.';
COMMENT ON FUNCTION cortex_buffer.check_token_budget(uuid) IS
'Whether the job may make its next LLM call: not allowed once used >= limit (cost checked first). Reason: no_budget, within_budget, cost_budget_exhausted or input_token_budget_exhausted.';
COMMENT ON FUNCTION cortex_buffer.reserve_budget(uuid, jsonb, text) IS
'Before a call: admits it (returning a reservation to settle) only while used + open reservations + this estimate stays within the job''s limits, so concurrent callers cannot overspend by more than their calls exceed their estimates. Refusal reasons add cost_budget_insufficient and input_token_budget_insufficient (the estimate does not fit).';
COMMENT ON FUNCTION cortex_buffer.settle_usage(uuid, jsonb, text) IS
'After a reserved call: records its actual usage like record_usage() (priced with the reserved model) and closes the reservation; settling again returns the totals with duplicate = true.';
COMMENT ON FUNCTION cortex_buffer.release_reservation(uuid) IS
'Gives back a reservation whose call was never made; false if it was already settled or released.';
