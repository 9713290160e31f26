-- verify_checkpoints(): every current and history checkpoint whose CRC does not match its document.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0501', '0193a8b2-0000-7000-8000-0000000f05a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0502', '0193a8b2-0000-7000-8000-0000000f05a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0503', '0193a8b2-0000-7000-8000-0000000f05a1', 'RUNNING');
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0501',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f05c1", "step_index": 0}');
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0502',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f05c2", "step_index": 0}');
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0502',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f05c3", "step_index": 1}');
-- Every checkpoint verifies: nothing to report for these jobs.
SELECT count(*) AS mismatches FROM cortex_buffer.verify_checkpoints() WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%';
-- A damaged CRC on a job row, a document changed behind the CRC, a damaged history entry, and a
-- control-plane checkpoint stored with its CRC negated.
UPDATE cortex_buffer.job SET checkpoint_crc = 12345 WHERE id = '0193a8b2-0000-7000-8000-0000000f0501';
UPDATE cortex_buffer.job SET checkpoint = '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f05c3", "step_index": 2}'
 WHERE id = '0193a8b2-0000-7000-8000-0000000f0502';
UPDATE cortex_buffer.checkpoint_history SET doc = '{"tampered": true}'
 WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0502' AND checkpoint_id = '0193a8b2-0000-7000-8000-0000000f05c2';
UPDATE cortex_buffer.job SET checkpoint = '{"step_index": 0}', checkpoint_crc = 1 WHERE id = '0193a8b2-0000-7000-8000-0000000f0503';
SELECT job_id, source, history_id IS NOT NULL AS has_history_id, checkpoint_id, step_index, stored_crc, computed_crc, detail
  FROM cortex_buffer.verify_checkpoints() WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%'
 ORDER BY job_id, source;
-- A checkpoint stored without a CRC.
UPDATE cortex_buffer.job SET checkpoint_crc = NULL WHERE id = '0193a8b2-0000-7000-8000-0000000f0503';
SELECT job_id, source, stored_crc, computed_crc, detail
  FROM cortex_buffer.verify_checkpoints() WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0503';
-- The signed and unsigned forms of one CRC both verify.
UPDATE cortex_buffer.job SET checkpoint = '{"hello":"world"}', checkpoint_crc = -670481967 WHERE id = '0193a8b2-0000-7000-8000-0000000f0503';
SELECT count(*) AS mismatches FROM cortex_buffer.verify_checkpoints() WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0503';
-- The operator may scrub; the agent may not (42501).
SET ROLE regress_operator;
SELECT count(*) AS mismatches FROM cortex_buffer.verify_checkpoints() WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%';
RESET ROLE;
SET ROLE regress_agent;
SELECT count(*) FROM cortex_buffer.verify_checkpoints();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f05%';
