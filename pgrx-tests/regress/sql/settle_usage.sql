-- settle_usage(reservation_id, actual_usage, request_id): records the reserved call once and closes the reservation.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f1501', '0193a8b2-0000-7000-8000-0000000f15a1', 'RUNNING');
SELECT reservation_id AS r1 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1501',
       '{"input_tokens": 20000, "output_tokens": 1000}', 'claude-sonnet-4-5-20250929') \gset
-- What the call really used, priced with the reserved model: the job's running totals.
SELECT * FROM cortex_buffer.settle_usage(:'r1', '{"input_tokens": 18500, "output_tokens": 1200}', 'req-1');
SELECT settled_at IS NOT NULL AS settled, released_at IS NULL AS not_released, forget_at - settled_at AS kept_for
  FROM cortex_buffer.budget_reservation WHERE reservation_id = :'r1';
SELECT request_id, model, input_tokens, output_tokens, reservation_id = :'r1' AS of_reservation
  FROM cortex_buffer.usage_ledger WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1501';
-- Settling again: the totals, duplicate true, nothing added.
SELECT * FROM cortex_buffer.settle_usage(:'r1', '{"input_tokens": 1}', 'req-1');
-- A request id already counted by record_usage is counted once.
SELECT reservation_id AS r2 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1501', '{"input_tokens": 1}', 'claude-sonnet-4-5-20250929') \gset
SELECT * FROM cortex_buffer.settle_usage(:'r2', '{"input_tokens": 1}', 'req-1');
-- An expired reservation still settles, with a NOTICE.
SELECT reservation_id AS r3 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1501', '{"input_tokens": 1}', 'claude-sonnet-4-5-20250929') \gset
-- (given a fixed id, as the NOTICE names it)
UPDATE cortex_buffer.budget_reservation SET reservation_id = '0193a8b2-0000-7000-8000-0000000f15e3', expires_at = '2000-01-01 00:00:00+00'
 WHERE reservation_id = :'r3';
SELECT input_tokens, llm_calls, duplicate FROM cortex_buffer.settle_usage('0193a8b2-0000-7000-8000-0000000f15e3', '{"input_tokens": 100}');
-- A released reservation (the call was made after all) still records.
SELECT reservation_id AS r4 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1501', '{"input_tokens": 1}', 'claude-sonnet-4-5-20250929') \gset
SELECT cortex_buffer.release_reservation(:'r4') AS released;
SELECT input_tokens, llm_calls, duplicate FROM cortex_buffer.settle_usage(:'r4', '{"input_tokens": 1000}');
-- NULL reservation_id or actual_usage: 22004.
SELECT * FROM cortex_buffer.settle_usage(NULL, '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.settle_usage(:'r1', NULL);
\echo :LAST_ERROR_SQLSTATE
-- A usage llm_cost refuses: 22023, 22003.
SELECT reservation_id AS r5 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1501', '{"input_tokens": 1}', 'claude-sonnet-4-5-20250929') \gset
SELECT * FROM cortex_buffer.settle_usage(:'r5', '{"input_tokens": "many"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.settle_usage(:'r5', '{"input_tokens": 1e16}');
\echo :LAST_ERROR_SQLSTATE
-- No such reservation: P0002.
SELECT * FROM cortex_buffer.settle_usage('0193a8b2-0000-7000-8000-0000000f15ff', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
-- The agent may settle; the control plane may not (42501).
SELECT cortex_buffer.job_token(job_id) AS job_token FROM cortex_buffer.budget_reservation WHERE reservation_id = :'r5' \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT input_tokens, llm_calls, duplicate FROM cortex_buffer.settle_usage(:'r5', '{"input_tokens": 1}');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.settle_usage(:'r5', '{"input_tokens": 1}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.budget_reservation WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f15%';
DELETE FROM cortex_buffer.usage_ledger WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f15%';
DELETE FROM cortex_buffer.job_usage WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f15%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f15%';
