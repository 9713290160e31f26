-- session_recovery(path) and session_recovery(session_id): a Claude Code transcript's plan, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
CREATE FUNCTION pg_temp.shown(p jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT jsonb_pretty(p || jsonb_build_object('sessions', (SELECT coalesce(jsonb_agg(s - 'file_id' ORDER BY o), '[]')
                                                            FROM jsonb_array_elements(p->'sessions') WITH ORDINALITY AS e(s, o))))
$$;
-- A transcript whose Read call finished: resume, no checkpoint, reason transcript; the call is completed, paired by id.
SELECT pg_temp.shown(cortex_buffer.session_recovery('proj/22222222-2222-4222-8222-222222222222.jsonl')) AS plan;
-- By session id, the same plan.
SELECT cortex_buffer.session_recovery('22222222-2222-4222-8222-222222222222'::uuid) - 'fresh'
     = cortex_buffer.session_recovery('proj/22222222-2222-4222-8222-222222222222.jsonl') - 'fresh' AS same_plan;
-- A call in flight (the Bash call of the first transcript), and a transcript with no call at all.
SELECT p->>'session_id' AS session_id, p->>'action' AS action, p->>'reason' AS reason,
       (SELECT jsonb_agg(jsonb_build_object('key', c->>'key', 'tool_name', c->>'tool_name', 'input', c->>'input')) FROM jsonb_array_elements(p->'in_flight') c) AS in_flight,
       jsonb_array_length(p->'completed') AS completed
  FROM cortex_buffer.session_recovery('11111111-2222-4333-8444-555555555555'::uuid) p;
SELECT p->>'reason' AS reason, p->'completed' AS completed, p->'in_flight' AS in_flight, p->'verify' AS verify, p->'notes' AS notes
  FROM cortex_buffer.session_recovery('/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl') p;
-- A sub-agent's transcript.
SELECT p->>'reason' AS reason, p->>'session_id' AS session_id, jsonb_array_length(p->'completed') AS completed
  FROM cortex_buffer.session_recovery('proj/22222222-2222-4222-8222-222222222222/subagents/agent-a1.jsonl') p;
-- Not a Claude Code transcript: 22023.
SELECT cortex_buffer.session_recovery('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.session_recovery('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- A relative path with . or .. components, or an empty one: 22023.
SELECT cortex_buffer.session_recovery('proj/../proj/11111111-2222-4333-8444-555555555555.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.session_recovery('');
\echo :LAST_ERROR_SQLSTATE
-- Not in the index: 58P01 (by path, and by session id).
SELECT cortex_buffer.session_recovery('proj/nothing.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.session_recovery('00000000-0000-4000-8000-000000000000'::uuid);
\echo :LAST_ERROR_SQLSTATE
-- Discovered but not indexed yet (simulated, then read only so nothing indexes it; rolled back): 55000.
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 0, indexed_offset = 0
 WHERE path = '/tmp/cortex_buffer-regress/sessions/proj/11111111-2222-4333-8444-555555555555.jsonl';
SET LOCAL transaction_read_only = on;
SELECT cortex_buffer.session_recovery('proj/11111111-2222-4333-8444-555555555555.jsonl');
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.session_recovery(NULL::text) IS NULL AS null_path, cortex_buffer.session_recovery(NULL::uuid) IS NULL AS null_id;
-- The control plane and the operator may ask; the agent only about its own job's files (this transcript
-- is in no job's directory: 42501); strangers not at all (42501).
SET ROLE regress_agent;
SELECT p->>'reason' AS as_agent FROM cortex_buffer.session_recovery('proj/11111111-2222-4333-8444-555555555555.jsonl') p;
RESET ROLE;
SET ROLE regress_control_plane;
SELECT p->>'reason' AS as_control_plane FROM cortex_buffer.session_recovery('11111111-2222-4333-8444-555555555555'::uuid) p;
RESET ROLE;
SET ROLE regress_operator;
SELECT p->>'reason' AS as_operator FROM cortex_buffer.session_recovery('proj/11111111-2222-4333-8444-555555555555.jsonl') p;
RESET ROLE;
SET ROLE regress_stranger;
SELECT cortex_buffer.session_recovery('proj/11111111-2222-4333-8444-555555555555.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.session_recovery('11111111-2222-4333-8444-555555555555'::uuid);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
