-- agent_state(path) and agent_state(session_id): what a transcript's agent is doing, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- A tool call without a result: acting; a turn ended by end_turn: idle; a prompt just taken in: thinking.
SELECT f AS transcript, s.*
  FROM (VALUES ('proj/11111111-2222-4333-8444-555555555555.jsonl'), ('proj/22222222-2222-4222-8222-222222222222.jsonl'),
               ('proj/33333333-3333-4333-8333-333333333333.jsonl'),
               ('proj/22222222-2222-4222-8222-222222222222/subagents/agent-a1.jsonl')) AS v(f),
       LATERAL cortex_buffer.agent_state(f) s;
-- By session id.
SELECT id, s.state, s.confidence, s.rule
  FROM (VALUES ('11111111-2222-4333-8444-555555555555'::uuid), ('22222222-2222-4222-8222-222222222222'::uuid),
               ('33333333-3333-4333-8333-333333333333'::uuid)) AS v(id),
       LATERAL cortex_buffer.agent_state(id) s;
-- The cortex dialects: from their last event.
SELECT regexp_replace(f, '^.*/', '') AS file, s.state, s.confidence, s.decided_by_line, s.since, s.rule, s.detail
  FROM (VALUES ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl'),
               ('0193a8b2-0000-7000-8000-0000000fa001/session-001.jsonl'),
               ('0193a8b2-0000-7000-8000-0000000fb001/session_20260301T110000Z_pod-b.jsonl'),
               ('logs/tools.jsonl')) AS v(f),
       LATERAL cortex_buffer.agent_state(f) s;
-- A file not in the index is read from its tail; one that cannot be read is unknown, with a NOTICE.
SELECT state, confidence, rule, detail FROM cortex_buffer.agent_state(current_setting('data_directory') || '/PG_VERSION');
SELECT state, confidence, detail FROM cortex_buffer.agent_state('proj/no-such-file.jsonl');
-- A relative path with . or .. components, or an empty one: 22023.
SELECT * FROM cortex_buffer.agent_state('../etc/passwd');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.agent_state('proj/./11111111-2222-4333-8444-555555555555.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.agent_state('');
\echo :LAST_ERROR_SQLSTATE
-- No transcript of that session id in the index: 58P01.
SELECT * FROM cortex_buffer.agent_state('00000000-0000-4000-8000-000000000000'::uuid);
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL returns no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.agent_state(NULL::text);
-- The control plane and the operator may ask, about files below sessions_dir (42501 elsewhere, when the
-- index does not hold them); the agent only about its own job's files (this transcript is in no job's
-- directory) and strangers not at all (42501).
SET ROLE regress_control_plane;
SELECT state, rule FROM cortex_buffer.agent_state('proj/22222222-2222-4222-8222-222222222222.jsonl');
SELECT * FROM cortex_buffer.agent_state('/etc/hostname');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_operator;
SELECT state, rule FROM cortex_buffer.agent_state('33333333-3333-4333-8333-333333333333'::uuid);
SELECT * FROM cortex_buffer.agent_state('/tmp/cortex_buffer-regress/sessions/../../../etc/hostname');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.agent_state('proj/22222222-2222-4222-8222-222222222222.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.agent_state('22222222-2222-4222-8222-222222222222'::uuid);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
