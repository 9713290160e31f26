-- reserve_budget(job_id, estimated_usage, model): admitted while the estimate fits, held until settled or released.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f1401', '0193a8b2-0000-7000-8000-0000000f14a1', 'RUNNING'),  -- no budget
    ('0193a8b2-0000-7000-8000-0000000f1402', '0193a8b2-0000-7000-8000-0000000f14a2', 'RUNNING'),  -- 50 000 tokens, $0.50
    ('0193a8b2-0000-7000-8000-0000000f1403', '0193a8b2-0000-7000-8000-0000000f14a2', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1404', '0193a8b2-0000-7000-8000-0000000f14a2', 'RUNNING');
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f14a2', 50000, 0.50);
-- No budget: admitted (the reservation id is random: shown as present or not).
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1401', '{"input_tokens": 1000000}', 'claude-sonnet-4-5-20250929');
-- Within budget: admitted, and the estimate is held (its budget tokens and exact cost, for reservation_timeout).
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 20000, "output_tokens": 1000}', 'claude-sonnet-4-5-20250929');
SELECT model, input_tokens, cost_usd, expires_at - reserved_at AS holds_for, forget_at - expires_at AS kept_after,
       settled_at IS NULL AND released_at IS NULL AS open
  FROM cortex_buffer.budget_reservation WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1402';
-- Open reservations count: a second estimate that fits alone but not beside the first.
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 30001}', 'claude-haiku-4-5-20251001');
-- ... one that fits exactly (used + held + estimate = the limit).
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 30000}', 'claude-haiku-4-5-20251001');
-- ... and now nothing more: the held tokens reach the limit.
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
-- The cost does not fit: cost_budget_insufficient.
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1403', '{"output_tokens": 40000}', 'claude-sonnet-4-5-20250929');
-- Used up by recorded usage: cost_budget_exhausted, then input_token_budget_exhausted.
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1403', 'claude-opus-4-1-20250805', '{"output_tokens": 10000}');
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1403', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
SELECT llm_calls FROM cortex_buffer.record_usage('0193a8b2-0000-7000-8000-0000000f1404', 'claude-haiku-4-5-20251001', '{"cache_read_input_tokens": 50000}');
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1404', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
-- A refused reservation holds nothing.
SELECT count(*) AS held FROM cortex_buffer.budget_reservation WHERE job_id IN ('0193a8b2-0000-7000-8000-0000000f1403', '0193a8b2-0000-7000-8000-0000000f1404');
-- An expired reservation holds nothing any more.
UPDATE cortex_buffer.budget_reservation SET expires_at = '2000-01-01 00:00:00+00' WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1402';
SELECT reservation_id IS NOT NULL AS reserved, allowed, reason
  FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 40000}', 'claude-haiku-4-5-20251001');
-- cortex_buffer.reservation_timeout (any role may set it) sets how long a reservation holds.
SET cortex_buffer.reservation_timeout = 60;
SELECT reservation_id AS rid FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1401', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001') \gset
SELECT expires_at - reserved_at AS holds_for FROM cortex_buffer.budget_reservation WHERE reservation_id = :'rid';
RESET cortex_buffer.reservation_timeout;
-- A reservation closed more than a day ago is deleted by a later reserve_budget call.
SELECT cortex_buffer.release_reservation(:'rid') AS released;
UPDATE cortex_buffer.budget_reservation SET forget_at = '2000-01-02 00:00:00+00' WHERE reservation_id = :'rid';
SELECT allowed FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1401', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
SELECT count(*) AS still_there FROM cortex_buffer.budget_reservation WHERE reservation_id = :'rid';
-- The usage and price errors of llm_cost: 42704, 22023, 22003.
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 1}', 'gpt-unknown');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', '{"input_tokens": 9007199254740992}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
-- No such job: P0002. Strict: a NULL argument returns no row.
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f14ff', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_for_null FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1402', NULL, 'claude-haiku-4-5-20251001');
-- The agent may reserve; the control plane may not (42501), nor write budget_reservation.
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f1401') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT allowed, reason FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1401', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
DELETE FROM cortex_buffer.budget_reservation;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1401', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.budget_reservation WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f14%';
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f14%';
DELETE FROM cortex_buffer.usage_ledger WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f14%';
DELETE FROM cortex_buffer.job_usage WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f14%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f14%';
