-- recovery_plan(job_id, checkpoint_id, match_checkpoint): both phases, every documented reason, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- Plans name times and ids that change from run to run (written_at, recorded_at, file_id): shown without them.
CREATE FUNCTION pg_temp.shown(p jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT jsonb_pretty(p
        || jsonb_build_object('checkpoint', CASE WHEN jsonb_typeof(p->'checkpoint') = 'object' THEN (p->'checkpoint') - 'written_at' ELSE p->'checkpoint' END)
        || jsonb_build_object('marker', CASE WHEN jsonb_typeof(p->'marker') = 'object' THEN (p->'marker') - 'recorded_at' - 'checkpoint_written_at' ELSE p->'marker' END)
        || jsonb_build_object('sessions', (SELECT coalesce(jsonb_agg(s - 'file_id' ORDER BY o), '[]')
                                             FROM jsonb_array_elements(p->'sessions') WITH ORDINALITY AS e(s, o))))
$$;
-- The spike fixture job (a marker for checkpoint …c1, an email sent, a card charge in flight), checkpointed at …c1.
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '00000000-0000-4000-8000-0000000000a4', 'RUNNING')
ON CONFLICT (id) DO NOTHING;
DO $$
BEGIN
    IF (SELECT checkpoint IS NULL FROM cortex_buffer.job WHERE id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') THEN
        PERFORM cortex_buffer.write_checkpoint('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f',
            '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000000c1", "step_index": 0}');
    END IF;
END $$;
-- The whole plan: resume at step 1, skip send_email, verify charge_card; one event lost.
SELECT pg_temp.shown(cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f')) AS plan;
-- Without matching, the last marker is taken as it is: marker_unverified.
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->'completed'->0->>'key' AS completed, p->'in_flight'->0->>'key' AS in_flight
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', match_checkpoint => false) p;
-- A pod that expects another checkpoint (the docs: no buffer, marker_mismatch).
SELECT p->>'expected_checkpoint_id' AS expected, p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a8b2-0000-7000-8000-0000000000c9') p;
-- ... and without its high-water mark (rolled back).
BEGIN;
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a8b2-0000-7000-8000-0000000000c9') p;
-- The job's checkpoint has no id to compare the marker with: checkpoint_without_id.
UPDATE cortex_buffer.job SET checkpoint = '{"step_index": 0}', checkpoint_crc = cortex_buffer.checkpoint_crc('{"step_index": 0}')::bit(32)::int
 WHERE id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SELECT p->>'action' AS action, p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
-- No checkpoint at all: first_run; the marker names one the job does not have.
UPDATE cortex_buffer.job SET checkpoint = NULL, checkpoint_crc = NULL WHERE id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SELECT p->>'action' AS action, p->'checkpoint' AS checkpoint, p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
-- Files recovery will not read (each simulated in the index, then read only so nothing
-- re-indexes them; rolled back): quarantined, untrusted, of an unknown generation, gone short.
BEGIN;
UPDATE cortex_buffer.session_file SET quarantined_at = '2026-01-01 00:00:00+00' WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SET LOCAL transaction_read_only = on;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail, p->'notes' AS notes, p->'fresh' AS fresh
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
BEGIN;
UPDATE cortex_buffer.session_file SET trusted = false WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SET LOCAL transaction_read_only = on;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 0 WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SET LOCAL transaction_read_only = on;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 1, gone_at = '2026-01-01 00:00:00+00', indexed_offset = indexed_offset - 10
 WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
SET LOCAL transaction_read_only = on;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
-- A read-only transaction cannot catch up: the plan says it is stale.
BEGIN READ ONLY;
SELECT p->>'reason' AS reason, p->'fresh' AS fresh, p->'notes' AS notes FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
ROLLBACK;
-- The shipped writer's job (no call ids, no markers), never checkpointed: every writer of every file, paired by order.
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000fa001', '0193a8b2-0000-7000-8000-0000000f1ea1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000fb001', '0193a8b2-0000-7000-8000-0000000f1ea1', 'RUNNING'),
    ('0193a8b2-0000-7000-8000-0000000f1e01', '0193a8b2-0000-7000-8000-0000000f1ea1', 'RUNNING');
SELECT pg_temp.shown(cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fa001')) AS plan;
-- The key a pod computes before the call is the key the plan reports after the crash.
SELECT p->'in_flight'->0->>'idempotency_key' = cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000fa001', NULL,
           (p->'in_flight'->0->>'call_ordinal')::int, 'send_email', '{"to": "ops"}') AS same_key,
       p->'in_flight'->0->>'input_hash' = encode(sha256(convert_to(cortex_buffer.canonical_json('{"to": "ops"}'), 'UTF8')), 'hex') AS same_input_hash
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fa001') p;
-- Checkpointed now: the high-water mark records the file's size, so nothing of it is after the checkpoint.
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000fa001', '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000f1ec1", "step_index": 3}');
SELECT p->>'action' AS action, p->'checkpoint'->>'resume_step' AS resume_step, p->>'mode' AS mode, p->>'reason' AS reason,
       p->'marker'->>'kind' AS marker, jsonb_array_length(p->'completed') AS completed, jsonb_array_length(p->'in_flight') AS in_flight
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fa001') p;
-- Without the mark (a checkpoint from before marks existed): placed by the clocks against the checkpoint's write time.
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
UPDATE cortex_buffer.checkpoint_history SET created_at = '2000-01-01 00:00:00+00' WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
SET cortex_buffer.recovery_clock_skew = 1000;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->'marker'->>'kind' AS marker, p->'clock'->'assumed_skew_ms' AS assumed_skew_ms,
       p->'clock'->>'checkpoint_written_at' AS written_at, p->'notes' AS notes,
       (SELECT jsonb_agg(c->>'tool_name') FROM jsonb_array_elements(p->'completed') c) AS completed,
       (SELECT jsonb_agg(c->>'tool_name') FROM jsonb_array_elements(p->'in_flight') c) AS in_flight
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fa001') p;
RESET cortex_buffer.recovery_clock_skew;
-- ... and with no write time either: checkpoint_time_unknown.
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000fa001';
SELECT p->>'action' AS action, p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fa001') p;
-- A spike writer's job without markers, never checkpointed: the latest writer of the latest file (the
-- restarted writer's segment); the line that names another job is never used.
SELECT pg_temp.shown(cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fb001')) AS plan;
-- Without matching: every writer of the latest file (the crashed writer's open call, a writer restart).
SELECT p->>'reason' AS reason, p->'marker'->>'kind' AS marker,
       (SELECT jsonb_agg(jsonb_build_object('key', c->>'key', 'success', c->'success', 'result', c->>'result')) FROM jsonb_array_elements(p->'completed') c) AS completed,
       (SELECT jsonb_agg(jsonb_build_object('key', c->>'key', 'writer_crashed', c->'writer_crashed')) FROM jsonb_array_elements(p->'in_flight') c) AS in_flight,
       (SELECT jsonb_agg(a->>'kind') FROM jsonb_array_elements(p->'anomalies') a) AS anomalies, p->'notes' AS notes
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fb001', match_checkpoint => false) p;
-- Checkpointed: its high-water mark; without it, a spike writer that lost its markers: no_marker.
SELECT step_index FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000fb001', '{"step_index": 0}');
SELECT p->>'action' AS action, p->>'mode' AS mode, p->>'reason' AS reason FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fb001') p;
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
SELECT p->>'action' AS action, p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fb001') p;
-- Checkpoints that all fail their CRC: fail_job (an answer here, not XX001).
UPDATE cortex_buffer.job SET checkpoint_crc = 1 WHERE id = '0193a8b2-0000-7000-8000-0000000fb001';
UPDATE cortex_buffer.checkpoint_history SET crc = 1 WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
SELECT p->>'action' AS action, p->'checkpoint'->>'source' AS source, p->'checkpoint'->>'crc_ok' AS crc_ok, p->>'mode' AS mode,
       p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000fb001') p;
-- A job without session files.
SELECT p->>'action' AS action, p->'checkpoint'->>'resume_step' AS resume_step, p->>'mode' AS mode, p->>'reason' AS reason,
       p->>'detail' AS detail, p->'sessions' AS sessions
  FROM cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f1e01') p;
-- NULL job_id or match_checkpoint: 22004.
SELECT cortex_buffer.recovery_plan(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f1e01', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
-- No such job: P0002.
SELECT cortex_buffer.recovery_plan('0193a8b2-0000-7000-8000-0000000f1eff');
\echo :LAST_ERROR_SQLSTATE
-- The agent, the control plane and the operator may ask; strangers may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT p->>'reason' AS as_agent FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT p->>'reason' AS as_control_plane FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
RESET ROLE;
SET ROLE regress_operator;
SELECT p->>'reason' AS as_operator FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
RESET ROLE;
SET ROLE regress_stranger;
SELECT cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up (the spike fixture job stays, checkpointed at …c1, as the other files expect it).
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id IN ('0193a8b2-0000-7000-8000-0000000fa001', '0193a8b2-0000-7000-8000-0000000fb001', '0193a8b2-0000-7000-8000-0000000f1e01');
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id IN ('0193a8b2-0000-7000-8000-0000000fa001', '0193a8b2-0000-7000-8000-0000000fb001', '0193a8b2-0000-7000-8000-0000000f1e01');
DELETE FROM cortex_buffer.job WHERE id IN ('0193a8b2-0000-7000-8000-0000000fa001', '0193a8b2-0000-7000-8000-0000000fb001', '0193a8b2-0000-7000-8000-0000000f1e01');
