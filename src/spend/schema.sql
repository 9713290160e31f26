-- Spend: model prices, per-agent budgets, exact per-job totals, the ledger of counted calls and
-- budget reservations.

-- Prices in USD per million tokens, by model and the time they took effect (the price in force
-- at a call's time applies). Rows cortex_buffer ships are `seeded`: they are fixed (a changed
-- price is a new row with a later effective_from) and left out of pg_dump, which would
-- otherwise restore them on top of the ones CREATE EXTENSION inserts.
CREATE TABLE cortex_buffer.model_price (
    model                   text NOT NULL CHECK (model OPERATOR(pg_catalog.<>) ''),
    effective_from          timestamptz NOT NULL,
    input_per_mtok          numeric NOT NULL,
    output_per_mtok         numeric NOT NULL,
    cache_write_per_mtok    numeric NOT NULL,
    cache_write_1h_per_mtok numeric NOT NULL,
    cache_read_per_mtok     numeric NOT NULL,
    source                  text,
    seeded                  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (model, effective_from),
    -- Finite, non-negative, below a million dollars per million tokens, at most 12 decimals:
    -- keeps every cost exact in 18 decimals.
    CONSTRAINT model_price_sane CHECK (
        input_per_mtok OPERATOR(pg_catalog.>=) 0 AND input_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(input_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        output_per_mtok OPERATOR(pg_catalog.>=) 0 AND output_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(output_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_write_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_write_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_write_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_write_1h_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_write_1h_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_write_1h_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_read_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_read_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_read_per_mtok) OPERATOR(pg_catalog.<=) 12)
);

-- Anthropic list prices (seed design, "Token Accounting Formulas", 2025-11-16, plus the other
-- models Claude Code transcripts name), in force from each model's release date; 1-hour cache
-- writes cost 2 x input.
INSERT INTO cortex_buffer.model_price
    (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok, source, seeded)
VALUES
    ('claude-sonnet-4-5-20250929', '2025-09-29 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-opus-4-1-20250805', '2025-08-05 00:00:00+00', 15.00, 75.00, 18.75, 30.00, 1.50, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-3-5-sonnet-20241022', '2024-10-22 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-sonnet-4-20250514', '2025-05-14 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price', true),
    ('claude-opus-4-5-20251101', '2025-11-01 00:00:00+00', 5.00, 25.00, 6.25, 10.00, 0.50, 'Anthropic list price', true),
    ('claude-haiku-4-5-20251001', '2025-10-01 00:00:00+00', 1.00, 5.00, 1.25, 2.00, 0.10, 'Anthropic list price', true);

CREATE FUNCTION cortex_buffer.model_price_protect_seeded() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.seeded THEN
        RAISE EXCEPTION 'price of % from % is shipped with cortex_buffer and cannot be changed', OLD.model, OLD.effective_from
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Insert a new row for the model with a later effective_from; it applies to usage from then on.';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER model_price_protect_seeded BEFORE UPDATE OR DELETE ON cortex_buffer.model_price
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.model_price_protect_seeded();
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.model_price', 'WHERE NOT seeded');

-- Per-job limits by agent (Spike #34); NULL is unlimited, 0 allows nothing. Operator-edited.
CREATE TABLE cortex_buffer.agent_budget (
    agent_id                 uuid PRIMARY KEY,
    max_input_tokens_per_job bigint CHECK (max_input_tokens_per_job OPERATOR(pg_catalog.>=) 0),
    max_cost_usd_per_job     numeric CHECK (max_cost_usd_per_job OPERATOR(pg_catalog.>=) 0
                                            AND max_cost_usd_per_job OPERATOR(pg_catalog.<) 10000000000000000000
                                            AND pg_catalog.scale(max_cost_usd_per_job) OPERATOR(pg_catalog.<=) 18),
    updated_at               timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.agent_budget', '');

-- Exact running totals per job (the bound job table's tokens_in/tokens_out/cost_usd/
-- llm_call_count mirror them, rounded and clamped to their types).
CREATE TABLE cortex_buffer.job_usage (
    job_id                uuid PRIMARY KEY,
    input_tokens          bigint NOT NULL DEFAULT 0,
    output_tokens         bigint NOT NULL DEFAULT 0,
    cache_write_tokens    bigint NOT NULL DEFAULT 0,
    cache_write_1h_tokens bigint NOT NULL DEFAULT 0,
    cache_read_tokens     bigint NOT NULL DEFAULT 0,
    cost_usd              numeric NOT NULL DEFAULT 0,
    llm_calls             bigint NOT NULL DEFAULT 0,
    first_used_at         timestamptz,
    last_used_at          timestamptz
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job_usage', '');

-- Every counted call; (job_id, request_id) is unique, so a repeated request counts once.
CREATE SEQUENCE cortex_buffer.usage_ledger_seq;
CREATE TABLE cortex_buffer.usage_ledger (
    usage_id              bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.usage_ledger_seq'::pg_catalog.regclass),
    job_id                uuid NOT NULL,
    request_id            text,
    model                 text NOT NULL,
    used_at               timestamptz NOT NULL,
    input_tokens          bigint NOT NULL,
    output_tokens         bigint NOT NULL,
    cache_write_tokens    bigint NOT NULL,
    cache_write_1h_tokens bigint NOT NULL,
    cache_read_tokens     bigint NOT NULL,
    cost_usd              numeric NOT NULL,
    reservation_id        uuid,
    recorded_at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT usage_ledger_request_key UNIQUE (job_id, request_id)
);
ALTER SEQUENCE cortex_buffer.usage_ledger_seq OWNED BY cortex_buffer.usage_ledger.usage_id;
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.usage_ledger', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.usage_ledger_seq', '');

-- Budget held for calls in flight. Open while neither settled nor released and not expired;
-- kept a day after that so a late or repeated settle_usage still finds it.
CREATE TABLE cortex_buffer.budget_reservation (
    reservation_id uuid PRIMARY KEY,
    job_id         uuid NOT NULL,
    agent_id       uuid NOT NULL,
    model          text NOT NULL,
    input_tokens   bigint NOT NULL,
    cost_usd       numeric NOT NULL,
    reserved_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    released_at    timestamptz,
    forget_at      timestamptz NOT NULL
);
CREATE INDEX budget_reservation_open_idx ON cortex_buffer.budget_reservation (job_id)
    WHERE settled_at IS NULL AND released_at IS NULL;
CREATE INDEX budget_reservation_forget_idx ON cortex_buffer.budget_reservation (forget_at);

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
