-- install_checkpoint_trigger(): the trigger that records high-water marks for checkpoints written by a plain UPDATE.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- cortex_buffer.job has it already.
SELECT cortex_buffer.install_checkpoint_trigger();
-- A bound table without it: created once; a second call changes nothing.
CREATE SCHEMA regress_trigger;
CREATE TABLE regress_trigger.job (
    id uuid PRIMARY KEY, agent_id uuid NOT NULL, status text NOT NULL, checkpoint jsonb, checkpoint_crc integer,
    attempt integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL DEFAULT 3, heartbeat_at timestamptz,
    started_at timestamptz, completed_at timestamptz, updated_at timestamptz NOT NULL DEFAULT now(), error jsonb);
INSERT INTO regress_trigger.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f2a01', '0193a8b2-0000-7000-8000-0000000f2aa1', 'RUNNING');
SET cortex_buffer.job_table = 'regress_trigger.job';
-- Before it: a plain UPDATE of the checkpoint records no mark.
UPDATE regress_trigger.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac1", "step_index": 0}',
       checkpoint_crc = cortex_buffer.checkpoint_crc('{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac1", "step_index": 0}')::bit(32)::int;
SELECT count(*) AS marks FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01';
SELECT cortex_buffer.install_checkpoint_trigger();
SELECT cortex_buffer.install_checkpoint_trigger();
SELECT tgname, tgfoid::regproc AS function, pg_get_triggerdef(oid) LIKE '%AFTER UPDATE OF checkpoint%' AS after_update_of_checkpoint
  FROM pg_trigger WHERE tgrelid = 'regress_trigger.job'::regclass AND NOT tgisinternal;
SELECT item, ok, fix FROM cortex_buffer.check_binding() WHERE item = 'checkpoint_trigger';
-- Now a plain UPDATE records the mark (source trigger), and write_checkpoint records its own (the trigger stays quiet).
UPDATE regress_trigger.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac2", "step_index": 1}',
       checkpoint_crc = cortex_buffer.checkpoint_crc('{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac2", "step_index": 1}')::bit(32)::int;
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f2a01',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac3", "step_index": 2}');
SELECT source, checkpoint_id, crc, dir_visible, files FROM cortex_buffer.checkpoint_mark
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01' ORDER BY mark_id;
SELECT cortex_buffer.checkpoint_crc('{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac2", "step_index": 1}') AS crc_of_update,
       cortex_buffer.checkpoint_crc('{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac3", "step_index": 2}') AS crc_of_write;
-- The same document stored again (same CRC) records nothing; another document under the same CRC
-- (the control plane updated the checkpoint and not its CRC) does.
UPDATE regress_trigger.job SET checkpoint = checkpoint;
SELECT count(*) AS marks FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01';
UPDATE regress_trigger.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac4", "step_index": 3}';
SELECT source, checkpoint_id FROM cortex_buffer.checkpoint_mark
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01' ORDER BY mark_id DESC LIMIT 1;
-- A trigger an older release installed (its condition compared the documents first) is replaced.
CREATE OR REPLACE TRIGGER cortex_buffer_checkpoint_marked AFTER UPDATE OF checkpoint ON regress_trigger.job FOR EACH ROW
    WHEN (NEW.checkpoint IS NOT NULL AND (OLD.checkpoint IS NULL OR NOT NEW.checkpoint OPERATOR(pg_catalog.=) OLD.checkpoint))
    EXECUTE FUNCTION cortex_buffer.checkpoint_marked();
SELECT cortex_buffer.install_checkpoint_trigger();
SELECT cortex_buffer.install_checkpoint_trigger();
SELECT pg_get_triggerdef(oid) LIKE '%checkpoint_crc%' AS compares_crcs_first
  FROM pg_trigger WHERE tgrelid = 'regress_trigger.job'::regclass AND tgname = 'cortex_buffer_checkpoint_marked';
-- An UPDATE that does not change the checkpoint, or sets it NULL, records nothing.
UPDATE regress_trigger.job SET status = 'COMPLETED';
UPDATE regress_trigger.job SET checkpoint = NULL, checkpoint_crc = NULL;
SELECT count(*) AS marks FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01';
-- The operator is granted it, but PostgreSQL must let it create the trigger: 42501 without the table's
-- TRIGGER privilege ...
CREATE TABLE regress_trigger.job2 (LIKE regress_trigger.job);
GRANT USAGE ON SCHEMA regress_trigger TO regress_operator;
GRANT SELECT ON regress_trigger.job2 TO regress_operator;
SET cortex_buffer.job_table = 'regress_trigger.job2';
SET ROLE regress_operator;
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- ... and with it, the operator (granted EXECUTE on the trigger function) installs it, once.
GRANT TRIGGER ON regress_trigger.job2 TO regress_operator;
SET ROLE regress_operator;
SELECT cortex_buffer.install_checkpoint_trigger();
SELECT cortex_buffer.install_checkpoint_trigger();
RESET ROLE;
SELECT has_function_privilege('regress_operator', 'cortex_buffer.checkpoint_marked()', 'EXECUTE') AS operator_may_execute_trigger_function,
       has_function_privilege('regress_control_plane', 'cortex_buffer.checkpoint_marked()', 'EXECUTE') AS control_plane_may,
       has_function_privilege('regress_agent', 'cortex_buffer.checkpoint_marked()', 'EXECUTE') AS agent_may;
-- The function attached to a table that is not the bound job table records nothing: a copy with an
-- id and a checkpoint cannot forge another job's mark.
CREATE TABLE regress_trigger.decoy (id uuid PRIMARY KEY, checkpoint jsonb);
CREATE TRIGGER decoy_marked AFTER INSERT OR UPDATE OF checkpoint ON regress_trigger.decoy
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.checkpoint_marked();
INSERT INTO regress_trigger.decoy VALUES ('0193a8b2-0000-7000-8000-0000000f2a01', '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2ac9", "step_index": 9}');
UPDATE regress_trigger.decoy SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f2aca", "step_index": 10}';
SELECT count(*) AS forged_marks FROM cortex_buffer.checkpoint_mark
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01' AND checkpoint_id IN ('0193a8b2-0000-7000-8000-0000000f2ac9', '0193a8b2-0000-7000-8000-0000000f2aca');
-- The job-table errors: 42P01, 22023, 42P16.
SET cortex_buffer.job_table = 'regress_trigger.nothing';
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
SET cortex_buffer.job_table = 'job';
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE regress_trigger.wrong (id uuid PRIMARY KEY);
SET cortex_buffer.job_table = 'regress_trigger.wrong';
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
RESET cortex_buffer.job_table;
-- The control plane and the agent may not call it (42501).
SET ROLE regress_control_plane;
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT cortex_buffer.install_checkpoint_trigger();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000f2a01';
REVOKE ALL ON SCHEMA regress_trigger FROM regress_operator;
REVOKE ALL ON regress_trigger.job2 FROM regress_operator;
DROP SCHEMA regress_trigger CASCADE;
