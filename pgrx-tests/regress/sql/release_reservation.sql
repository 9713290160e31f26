-- release_reservation(reservation_id): gives the budget back for a call never made.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f1601', '0193a8b2-0000-7000-8000-0000000f16a1', 'RUNNING');
SELECT agent_id FROM cortex_buffer.set_budget('0193a8b2-0000-7000-8000-0000000f16a1', 1000);
SELECT reservation_id AS r1 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1601', '{"input_tokens": 1000}', 'claude-haiku-4-5-20251001') \gset
-- The budget is held ...
SELECT allowed, reason FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1601', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001');
-- ... until released: true, and the budget is free again.
SELECT cortex_buffer.release_reservation(:'r1') AS released;
SELECT released_at IS NOT NULL AS released, settled_at IS NULL AS not_settled FROM cortex_buffer.budget_reservation WHERE reservation_id = :'r1';
SELECT reservation_id AS r2 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1601', '{"input_tokens": 1000}', 'claude-haiku-4-5-20251001') \gset
SELECT :'r2' <> :'r1' AS a_new_reservation;
-- Released again: false.
SELECT cortex_buffer.release_reservation(:'r1') AS released_again;
-- A settled reservation: false (its usage stays recorded).
SELECT llm_calls FROM cortex_buffer.settle_usage(:'r2', '{"input_tokens": 10}');
SELECT cortex_buffer.release_reservation(:'r2') AS released_settled;
SELECT llm_calls FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1601';
-- No such reservation: P0002. Strict: NULL in, NULL out.
SELECT cortex_buffer.release_reservation('0193a8b2-0000-7000-8000-0000000f16ff');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.release_reservation(NULL) IS NULL AS null_in_null_out;
-- The agent may release; the control plane and strangers may not (42501).
SELECT reservation_id AS r3 FROM cortex_buffer.reserve_budget('0193a8b2-0000-7000-8000-0000000f1601', '{"input_tokens": 1}', 'claude-haiku-4-5-20251001') \gset
SET ROLE regress_control_plane;
SELECT cortex_buffer.release_reservation(:'r3');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT cortex_buffer.release_reservation(:'r3');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT cortex_buffer.job_token(job_id) AS job_token FROM cortex_buffer.budget_reservation WHERE reservation_id = :'r3' \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT cortex_buffer.release_reservation(:'r3') AS released_by_agent;
RESET ROLE;
RESET cortex_buffer.job_token;
-- Clean up.
DELETE FROM cortex_buffer.budget_reservation WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f16%';
DELETE FROM cortex_buffer.agent_budget WHERE agent_id::text LIKE '0193a8b2-0000-7000-8000-0000000f16%';
DELETE FROM cortex_buffer.usage_ledger WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f16%';
DELETE FROM cortex_buffer.job_usage WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f16%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f16%';
