-- write_checkpoint(job_id, doc, expected_checkpoint_id, allow_step_regression): writes, fencing, every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0301', '0193a8b2-0000-7000-8000-0000000f03a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0302', '0193a8b2-0000-7000-8000-0000000f03a1', 'WAITING_FOR_APPROVAL'),
    ('0193a8b2-0000-7000-8000-0000000f0303', '0193a8b2-0000-7000-8000-0000000f03a1', 'COMPLETED'),
    ('0193a8b2-0000-7000-8000-0000000f0304', '0193a8b2-0000-7000-8000-0000000f03a1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f0305', '0193a8b2-0000-7000-8000-0000000f03a1', 'RUNNING');
-- The first checkpoint, with its own id and step: the identity, the unsigned CRC, the canonical size.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f03c1", "step_index": 0, "state": {"done": ["search"]}}');
-- The document is stored as given; the job row's CRC column (integer) holds the bit pattern.
SELECT checkpoint, checkpoint_crc FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f0301';
-- No step_index: the current step + 1. No checkpoint_id: a generated UUIDv7.
SELECT checkpoint_id IS NOT NULL AS has_id, substr(checkpoint_id::text, 15, 1) AS uuid_version, step_index, crc, size_bytes
  FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301', '{"state": "two"}',
                                      expected_checkpoint_id => '0193a8b2-0000-7000-8000-0000000f03c1');
-- An equal step (a step re-run after a crash) is allowed; an upper-case id is recorded as a UUID.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193A8B2-0000-7000-8000-0000000F03C3", "step_index": 1}');
-- Fenced on the current checkpoint (the upper-case id compares as the same UUID).
SELECT checkpoint_id, step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f03c4", "step_index": 2}', '0193a8b2-0000-7000-8000-0000000f03c3');
-- A stale writer fenced on an older checkpoint: 55006, nothing written.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"step_index": 3}', '0193a8b2-0000-7000-8000-0000000f03c1');
\echo :LAST_ERROR_SQLSTATE
-- A lower step than the current one: 55006 ...
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301', '{"step_index": 1}');
\echo :LAST_ERROR_SQLSTATE
-- ... unless the caller rolls back on purpose.
SELECT checkpoint_id, step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f03c5", "step_index": 1}', allow_step_regression => true);
-- NULL expected_checkpoint_id skips fencing; NULL allow_step_regression is false.
SELECT checkpoint_id, step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f03c6", "step_index": 1}', NULL, NULL);
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301', '{"step_index": 0}', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
-- A job with no checkpoint matches no expected id.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304',
    '{"step_index": 0}', '0193a8b2-0000-7000-8000-0000000f03c1');
\echo :LAST_ERROR_SQLSTATE
-- Every accepted write is in checkpoint_history, in order.
SELECT CASE WHEN checkpoint_id::text LIKE '0193a8b2-0000-7000-8000-0000000f03%' THEN checkpoint_id::text ELSE 'generated' END AS checkpoint_id,
       step_index, crc, size_bytes
  FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0301' ORDER BY history_id;
-- History is trimmed to cortex_buffer.checkpoint_history_keep entries per job.
SET cortex_buffer.checkpoint_history_keep = 2;
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0305', '{"n": 1}');
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0305', '{"n": 2}');
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0305', '{"n": 3}');
SELECT step_index, doc FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0305' ORDER BY history_id;
RESET cortex_buffer.checkpoint_history_keep;
-- Not RUNNING: 55000.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0302', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0303', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
-- No such job: P0002.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f03ff', '{"step_index": 0}');
\echo :LAST_ERROR_SQLSTATE
-- NULL job_id or doc: 22004.
SELECT * FROM cortex_buffer.write_checkpoint(NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', NULL);
\echo :LAST_ERROR_SQLSTATE
-- doc is not an object: 22023.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '[1, 2]');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '"state"');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '42');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', 'null');
\echo :LAST_ERROR_SQLSTATE
-- step_index is not an integer 0 … 2147483647: 22023.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": -1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": 1.5}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": "3"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": 2147483648}');
\echo :LAST_ERROR_SQLSTATE
-- A whole number written as 2.0 is an integer, as JavaScript reads it.
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": 2.0}');
-- The last step there is; then the next one would exceed it: 22023.
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"step_index": 2147483647}');
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"state": "next"}');
\echo :LAST_ERROR_SQLSTATE
-- checkpoint_id is not a UUID: 22P02.
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"checkpoint_id": "nope"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"checkpoint_id": 42}');
\echo :LAST_ERROR_SQLSTATE
-- A null checkpoint_id or step_index counts as absent.
SELECT checkpoint_id IS NOT NULL AS has_id, step_index
  FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"checkpoint_id": null, "step_index": 2147483647}');
SELECT checkpoint_id IS NOT NULL AS has_id, step_index
  FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0305', '{"step_index": null}');
-- Larger than cortex_buffer.checkpoint_max_bytes: 54000; exactly at the limit is accepted.
SET cortex_buffer.checkpoint_max_bytes = 16;
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0304', '{"state": "too long"}');
\echo :LAST_ERROR_SQLSTATE
SELECT length(cortex_buffer.canonical_json('{"s":"01234567"}')) AS canonical_bytes;
SELECT step_index, size_bytes FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0305', '{"s":"01234567"}');
RESET cortex_buffer.checkpoint_max_bytes;
-- A non-superuser may not raise the limit.
SELECT cortex_buffer.job_token('0193a8b2-0000-7000-8000-0000000f0301') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SET cortex_buffer.checkpoint_max_bytes = 1000000;
\echo :LAST_ERROR_SQLSTATE
-- The agent role may write; a role without the grant may not (42501).
SELECT checkpoint_id, step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f03c7", "step_index": 2}');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0301', '{"step_index": 3}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f03%';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f03%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f03%';
