-- read_checkpoint(job_id): current, history (with a WARNING), none, XX001, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0401', '0193a8b2-0000-7000-8000-0000000f04a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0402', '0193a8b2-0000-7000-8000-0000000f04a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0403', '0193a8b2-0000-7000-8000-0000000f04a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0404', '0193a8b2-0000-7000-8000-0000000f04a1', 'COMPLETED');
-- The fallback's WARNING names checkpoint_history ids: start them at a fixed number (restored at the end).
SELECT last_value AS history_last_value, is_called AS history_is_called FROM cortex_buffer.checkpoint_history_seq \gset
SELECT setval('cortex_buffer.checkpoint_history_seq', 4000) AS history_ids_after;
-- A job never checkpointed: source none, nothing else.
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
-- After write_checkpoint: the current checkpoint, verified.
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0401',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f04c1", "step_index": 0, "state": {"n": 1}}');
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0401',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f04c2", "step_index": 1, "state": {"n": 2}}');
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
-- A checkpoint the control plane wrote itself (plain UPDATE, its signed CRC): the document's own identity.
UPDATE cortex_buffer.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f04c9", "step_index": 7}',
       checkpoint_crc = cortex_buffer.checkpoint_crc('{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f04c9", "step_index": 7}')::bit(32)::int
 WHERE id = '0193a8b2-0000-7000-8000-0000000f0402';
SELECT source, checkpoint_id, step_index, crc, crc_ok, detail FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0402');
-- ... one without identity of its own: verified, no id, no step.
UPDATE cortex_buffer.job SET checkpoint = '{"state": "plain"}',
       checkpoint_crc = cortex_buffer.checkpoint_crc('{"state": "plain"}')::bit(32)::int
 WHERE id = '0193a8b2-0000-7000-8000-0000000f0402';
SELECT source, checkpoint_id, step_index, doc, crc_ok, detail FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0402');
-- ... one stored without a CRC.
UPDATE cortex_buffer.job SET checkpoint = '{"state": "no crc"}', checkpoint_crc = NULL WHERE id = '0193a8b2-0000-7000-8000-0000000f0403';
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0403');
\echo :LAST_ERROR_SQLSTATE
-- The job row's checkpoint damaged: the newest history entry that verifies, with a WARNING.
UPDATE cortex_buffer.checkpoint_history SET created_at = '2026-03-02 09:00:00+00' WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0401';
UPDATE cortex_buffer.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f04c2", "step_index": 1, "state": {"n": 99}}'
 WHERE id = '0193a8b2-0000-7000-8000-0000000f0401';
SELECT detail FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
SELECT source, checkpoint_id, step_index, doc, crc, crc_ok FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
-- The newest history entry damaged too: the one before it.
UPDATE cortex_buffer.checkpoint_history SET crc = 1
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0401' AND checkpoint_id = '0193a8b2-0000-7000-8000-0000000f04c2';
SELECT source, checkpoint_id, step_index, doc, crc_ok FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
-- Nothing verifies: XX001 (fail the job).
UPDATE cortex_buffer.checkpoint_history SET crc = 2
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0401' AND checkpoint_id = '0193a8b2-0000-7000-8000-0000000f04c1';
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0401');
\echo :LAST_ERROR_SQLSTATE
-- A finished job's checkpoint is still read (only writes need RUNNING).
UPDATE cortex_buffer.job SET checkpoint = '{"step_index": 3}', checkpoint_crc = cortex_buffer.checkpoint_crc('{"step_index": 3}')::bit(32)::int
 WHERE id = '0193a8b2-0000-7000-8000-0000000f0404';
SELECT source, step_index, crc_ok FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0404');
-- Strict: a NULL job_id returns no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.read_checkpoint(NULL);
-- No such job: P0002.
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f04ff');
\echo :LAST_ERROR_SQLSTATE
-- The agent may read; the control plane and strangers may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f0404') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT source, step_index FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0404');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0404');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.read_checkpoint('0193a8b2-0000-7000-8000-0000000f0404');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f04%';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f04%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f04%';
SELECT setval('cortex_buffer.checkpoint_history_seq', :history_last_value, :'history_is_called'::boolean) AS restored \gset
