-- The default job table's triggers: the control plane's transition rules (P0001) and updated_at.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, updated_at) VALUES
    ('0193a8b2-0000-7000-8000-0000000f2b01', '0193a8b2-0000-7000-8000-0000000f2ba1', 'PENDING', '2000-01-01 00:00:00+00');
-- Every allowed transition, along one job's life: PENDING → SCHEDULED → RUNNING → WAITING_FOR_APPROVAL → RUNNING
-- → FAILED → RETRYING → SCHEDULED → RUNNING → TIMED_OUT → DEAD_LETTER.
UPDATE cortex_buffer.job SET status = 'SCHEDULED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'RUNNING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'WAITING_FOR_APPROVAL' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'RUNNING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'FAILED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'RETRYING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'SCHEDULED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'RUNNING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
UPDATE cortex_buffer.job SET status = 'TIMED_OUT' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
-- updated_at moves on every update (the trigger sets it to now()).
BEGIN;
UPDATE cortex_buffer.job SET status = 'DEAD_LETTER' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
SELECT status, updated_at = now() AS updated_now FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
COMMIT;
-- The other allowed transitions.
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f2b05', '0193a8b2-0000-7000-8000-0000000f2ba1', 'PENDING'),
    ('0193a8b2-0000-7000-8000-0000000f2b06', '0193a8b2-0000-7000-8000-0000000f2ba1', 'SCHEDULED'),
    ('0193a8b2-0000-7000-8000-0000000f2b07', '0193a8b2-0000-7000-8000-0000000f2ba1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f2b08', '0193a8b2-0000-7000-8000-0000000f2ba1', 'WAITING_FOR_APPROVAL'),
    ('0193a8b2-0000-7000-8000-0000000f2b09', '0193a8b2-0000-7000-8000-0000000f2ba1', 'WAITING_FOR_APPROVAL');
UPDATE cortex_buffer.job SET status = 'FAILED' WHERE id IN ('0193a8b2-0000-7000-8000-0000000f2b05', '0193a8b2-0000-7000-8000-0000000f2b06',
                                                            '0193a8b2-0000-7000-8000-0000000f2b08');
UPDATE cortex_buffer.job SET status = 'DEAD_LETTER' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b05';
UPDATE cortex_buffer.job SET status = 'COMPLETED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b07';
UPDATE cortex_buffer.job SET status = 'TIMED_OUT' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b09';
UPDATE cortex_buffer.job SET status = 'RETRYING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b09';
UPDATE cortex_buffer.job SET status = 'DEAD_LETTER' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b09';
SELECT id, status FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f2b0_' AND id > '0193a8b2-0000-7000-8000-0000000f2b04' ORDER BY id;
-- The same status again is no transition.
UPDATE cortex_buffer.job SET status = 'DEAD_LETTER' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
-- Forbidden: P0001, with the control plane's own message and the allowed list as HINT.
UPDATE cortex_buffer.job SET status = 'RUNNING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b01';
\echo :LAST_ERROR_SQLSTATE
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f2b02', '0193a8b2-0000-7000-8000-0000000f2ba1', 'COMPLETED'),
    ('0193a8b2-0000-7000-8000-0000000f2b03', '0193a8b2-0000-7000-8000-0000000f2ba1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f2b04', '0193a8b2-0000-7000-8000-0000000f2ba1', 'PENDING');
UPDATE cortex_buffer.job SET status = 'FAILED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b02';
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.job SET status = 'RETRYING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b03';
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.job SET status = 'RUNNING' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b04';
\echo :LAST_ERROR_SQLSTATE
-- An invalid status is the enum's own error.
UPDATE cortex_buffer.job SET status = 'PAUSED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b04';
\echo :LAST_ERROR_SQLSTATE
-- The agent may update no column (its calls write through the functions, for its own job); the
-- control plane may update the status.
SET ROLE regress_agent;
UPDATE cortex_buffer.job SET status = 'SCHEDULED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b04';
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.job SET heartbeat_at = '2000-01-01 00:00:00+00' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b03';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
UPDATE cortex_buffer.job SET status = 'SCHEDULED' WHERE id = '0193a8b2-0000-7000-8000-0000000f2b04';
RESET ROLE;
SELECT id, status FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f2b%' ORDER BY id;
-- Clean up.
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f2b%';
