-- model_price: seeded prices are fixed (55000), new rows take effect at once, and the CHECKs (23514).
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok, seeded
  FROM cortex_buffer.model_price WHERE seeded ORDER BY model;
-- A seeded price cannot be changed or deleted.
UPDATE cortex_buffer.model_price SET input_per_mtok = 0 WHERE model = 'claude-haiku-4-5-20251001';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM cortex_buffer.model_price WHERE model = 'claude-haiku-4-5-20251001';
\echo :LAST_ERROR_SQLSTATE
-- A price change is a new row with a later effective_from: usage from then on is priced with it, at once
-- (the session's price cache is invalidated by the table's trigger).
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-haiku-4-5-20251001', '2026-06-01') AS before_change;
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok, source)
VALUES ('claude-haiku-4-5-20251001', '2026-05-01', 0.8, 4, 1, 1.6, 0.08, 'regress');
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-haiku-4-5-20251001', '2026-06-01') AS after_change,
       cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-haiku-4-5-20251001', '2026-04-30') AS before_it_took_effect;
-- A row of one's own may be changed and deleted.
UPDATE cortex_buffer.model_price SET input_per_mtok = 0.5 WHERE model = 'claude-haiku-4-5-20251001' AND source = 'regress';
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-haiku-4-5-20251001', '2026-06-01') AS after_update;
DELETE FROM cortex_buffer.model_price WHERE model = 'claude-haiku-4-5-20251001' AND source = 'regress';
SELECT cortex_buffer.llm_cost('{"input_tokens": 1000000}', 'claude-haiku-4-5-20251001', '2026-06-01') AS after_delete;
-- The CHECKs: a negative price, one not below 10^6, more than 12 decimals, an empty model name (PostgreSQL's own 23514).
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-2c', '2025-01-01', -1, 0, 0, 0, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-2c', '2025-01-01', 0, 1000000, 0, 0, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-2c', '2025-01-01', 0, 0, 0, 0, 0.0000000000001);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('', '2025-01-01', 0, 0, 0, 0, 0);
\echo :LAST_ERROR_SQLSTATE
-- The operator may add prices; everyone may read them; the agent and the control plane may not write them (42501).
SET ROLE regress_operator;
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-2c', '2025-01-01', 1, 2, 3, 4, 0.5);
UPDATE cortex_buffer.model_price SET input_per_mtok = 0 WHERE model = 'claude-opus-4-1-20250805';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT count(*) AS seeded_prices FROM cortex_buffer.model_price WHERE seeded;
INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
VALUES ('regress-model-2c', '2026-01-01', 1, 2, 3, 4, 0.5);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
DELETE FROM cortex_buffer.model_price WHERE model = 'regress-model-2c';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.model_price WHERE model = 'regress-model-2c';
