-- Checkpoints: CRC, canonical JSON, writes, fencing, reads and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT cortex_buffer.checkpoint_crc('{"hello":"world"}'), cortex_buffer.checkpoint_crc('{}'), cortex_buffer.checkpoint_crc('{"step":1}');
SELECT cortex_buffer.canonical_json('{"b":[1.0,2.5e21],"10":true,"9":null,"a":"x/\u2028"}');
SELECT cortex_buffer.checkpoint_crc(NULL) IS NULL AS null_in_null_out;
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('00000000-0000-4000-8000-00000000c001', '00000000-0000-4000-8000-0000000000a1', 'RUNNING'),
    ('00000000-0000-4000-8000-00000000c002', '00000000-0000-4000-8000-0000000000a1', 'FAILED');
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001',
    '{"checkpoint_id": "00000000-0000-7000-8000-0000000000c1", "step_index": 0, "state": {"n": 1}}');
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001',
    '{"checkpoint_id": "00000000-0000-7000-8000-0000000000c2", "step_index": 1}', '00000000-0000-7000-8000-0000000000c1');
-- A stale writer, fenced on the first checkpoint.
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001',
    '{"checkpoint_id": "00000000-0000-7000-8000-0000000000c3", "step_index": 1}', '00000000-0000-7000-8000-0000000000c1');
\echo :LAST_ERROR_SQLSTATE
-- A lower step than the current one.
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c002', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000ffff', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint(NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', '[1, 2]');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', '{"step_index": -1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', '{"checkpoint_id": "nope"}');
\echo :LAST_ERROR_SQLSTATE
SET cortex_buffer.checkpoint_max_bytes = 16;
SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-00000000c001', '{"step_index": 2, "state": "too long"}');
\echo :LAST_ERROR_SQLSTATE
RESET cortex_buffer.checkpoint_max_bytes;
SELECT source, checkpoint_id, step_index, crc, crc_ok, detail FROM cortex_buffer.read_checkpoint('00000000-0000-4000-8000-00000000c001');
SELECT * FROM cortex_buffer.read_checkpoint('00000000-0000-4000-8000-00000000ffff');
\echo :LAST_ERROR_SQLSTATE
-- The job row's checkpoint corrupted: the newest valid history entry, with a WARNING.
UPDATE cortex_buffer.job SET checkpoint_crc = 12345 WHERE id = '00000000-0000-4000-8000-00000000c001';
UPDATE cortex_buffer.checkpoint_history SET created_at = '2026-02-23 14:30:00+00' WHERE job_id = '00000000-0000-4000-8000-00000000c001';
SELECT source, checkpoint_id, step_index, crc_ok FROM cortex_buffer.read_checkpoint('00000000-0000-4000-8000-00000000c001');
SELECT job_id, source, checkpoint_id, stored_crc, computed_crc, detail FROM cortex_buffer.verify_checkpoints();
-- Nothing verifies at all.
UPDATE cortex_buffer.checkpoint_history SET crc = 1 WHERE job_id = '00000000-0000-4000-8000-00000000c001';
SELECT * FROM cortex_buffer.read_checkpoint('00000000-0000-4000-8000-00000000c001');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS mismatches FROM cortex_buffer.verify_checkpoints();
