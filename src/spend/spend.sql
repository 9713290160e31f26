-- Prices are reference data: everyone may read them (llm_cost() runs with the caller's rights).
GRANT SELECT ON cortex_buffer.model_price TO PUBLIC;

-- The price cache's invalidation trigger (its function is Rust), and comments on the spend
-- objects (the tables come from schema.sql, the functions from sql.rs).
CREATE TRIGGER model_price_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cortex_buffer.model_price
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_buffer.model_price_changed();
COMMENT ON FUNCTION cortex_buffer.model_price_changed() IS
'Trigger: invalidates every session''s cached prices when model_price changes (at commit).';
COMMENT ON TRIGGER model_price_changed ON cortex_buffer.model_price IS
'Price changes reach every session''s price cache from its next transaction.';

COMMENT ON TABLE cortex_buffer.model_price IS
'LLM prices in USD per million tokens, by exact model name and the time they took effect; llm_cost() and record_usage() use the newest row whose effective_from is not after the call. Rows shipped with cortex_buffer (seeded) are fixed; operators add rows (kept by pg_dump).';
COMMENT ON COLUMN cortex_buffer.model_price.model IS 'Model name as the API reports it (exact match, e.g. claude-sonnet-4-5-20250929).';
COMMENT ON COLUMN cortex_buffer.model_price.effective_from IS 'When this price took effect; it applies until a later row for the model.';
COMMENT ON COLUMN cortex_buffer.model_price.input_per_mtok IS 'USD per million uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.model_price.output_per_mtok IS 'USD per million output tokens.';
COMMENT ON COLUMN cortex_buffer.model_price.cache_write_per_mtok IS 'USD per million tokens written to the 5-minute cache (the default lifetime).';
COMMENT ON COLUMN cortex_buffer.model_price.cache_write_1h_per_mtok IS 'USD per million tokens written to the 1-hour cache (Anthropic: 2 x input).';
COMMENT ON COLUMN cortex_buffer.model_price.cache_read_per_mtok IS 'USD per million tokens read from the cache.';
COMMENT ON COLUMN cortex_buffer.model_price.source IS 'Where the price comes from.';
COMMENT ON COLUMN cortex_buffer.model_price.seeded IS 'Shipped with cortex_buffer: cannot be changed or deleted, and not dumped (CREATE EXTENSION inserts it).';
COMMENT ON CONSTRAINT model_price_sane ON cortex_buffer.model_price IS
'Prices are finite, non-negative, below 1 000 000 and have at most 12 decimals, so costs stay exact in 18 decimals.';
COMMENT ON FUNCTION cortex_buffer.model_price_protect_seeded() IS 'Refuses changes to seeded prices (insert a newer row instead).';
COMMENT ON TRIGGER model_price_protect_seeded ON cortex_buffer.model_price IS 'Seeded prices are fixed: a price change is a new row with a later effective_from.';

COMMENT ON TABLE cortex_buffer.agent_budget IS
'Per-job limits by agent (Spike #34 token budget): a job may make LLM calls while what it used is below each limit. NULL is unlimited, 0 allows nothing; agents without a row are unlimited. Set with set_budget(); kept by pg_dump.';
COMMENT ON COLUMN cortex_buffer.agent_budget.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.agent_budget.max_input_tokens_per_job IS 'Most input tokens (uncached input + cache writes + cache reads) one job may use, over all its attempts; NULL unlimited.';
COMMENT ON COLUMN cortex_buffer.agent_budget.max_cost_usd_per_job IS 'Most USD one job may spend, over all its attempts; NULL unlimited.';
COMMENT ON COLUMN cortex_buffer.agent_budget.updated_at IS 'Last change.';

COMMENT ON TABLE cortex_buffer.job_usage IS
'Exact running totals per job (all attempts), written by record_usage() and settle_usage(). The bound job table''s tokens_in, tokens_out, cost_usd and llm_call_count mirror them, rounded and clamped to their column types.';
COMMENT ON COLUMN cortex_buffer.job_usage.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.job_usage.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.job_usage.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_write_tokens IS 'Tokens written to the cache (both lifetimes).';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_write_1h_tokens IS 'The part of cache_write_tokens written to the 1-hour cache.';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_read_tokens IS 'Tokens read from the cache.';
COMMENT ON COLUMN cortex_buffer.job_usage.cost_usd IS 'Exact cost in USD (never rounded).';
COMMENT ON COLUMN cortex_buffer.job_usage.llm_calls IS 'Calls counted.';
COMMENT ON COLUMN cortex_buffer.job_usage.first_used_at IS 'Earliest call time recorded.';
COMMENT ON COLUMN cortex_buffer.job_usage.last_used_at IS 'Latest call time recorded.';

COMMENT ON SEQUENCE cortex_buffer.usage_ledger_seq IS 'Ids of usage_ledger rows (larger is newer).';
COMMENT ON TABLE cortex_buffer.usage_ledger IS
'Every LLM call counted, with its tokens and exact cost; (job_id, request_id) is unique, which makes record_usage() idempotent per request id. job_usage is the sum of these rows.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.usage_id IS 'Record order.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.request_id IS 'The caller''s id for the call (e.g. the API''s request id); a repeat is not counted again. NULL: never de-duplicated.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.model IS 'The model priced.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.used_at IS 'When the call was made (the price in force then applies).';
COMMENT ON COLUMN cortex_buffer.usage_ledger.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_write_tokens IS 'Cache writes, both lifetimes.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_write_1h_tokens IS 'The 1-hour part of cache_write_tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_read_tokens IS 'Cache reads.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cost_usd IS 'Exact cost in USD.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.reservation_id IS 'The reservation settle_usage() closed with this call, if any.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.recorded_at IS 'When it was recorded.';
COMMENT ON CONSTRAINT usage_ledger_request_key ON cortex_buffer.usage_ledger IS 'A request id is counted once per job.';

COMMENT ON TABLE cortex_buffer.budget_reservation IS
'Budget held by reserve_budget() for calls in flight: open until settled, released or expired (cortex_buffer.reservation_timeout); closed rows are kept a day so a late or repeated settle_usage() still finds them, then deleted by later reservations.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.reservation_id IS 'The reservation.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.job_id IS 'The job whose budget it holds.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.agent_id IS 'The job''s agent.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.model IS 'The model the call uses (settle_usage() prices the actual usage with it).';
COMMENT ON COLUMN cortex_buffer.budget_reservation.input_tokens IS 'Estimated input tokens held (uncached input + cache writes + cache reads).';
COMMENT ON COLUMN cortex_buffer.budget_reservation.cost_usd IS 'Estimated cost held, exact.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.reserved_at IS 'When it was made.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.expires_at IS 'When it stops holding budget if neither settled nor released.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.settled_at IS 'When settle_usage() recorded its call.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.released_at IS 'When release_reservation() gave it back.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.forget_at IS 'When the row may be deleted.';
COMMENT ON INDEX cortex_buffer.budget_reservation_open_idx IS 'A job''s open reservations.';
COMMENT ON INDEX cortex_buffer.budget_reservation_forget_idx IS 'Closed and expired reservations due for deletion.';

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
