-- Recovery lookups: a plan, a transcript, agent state, usage, LOG slices, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '00000000-0000-4000-8000-0000000000a4', 'RUNNING');
SELECT p->>'action' AS action, p->'checkpoint'->>'resume_step' AS resume_step, p->>'mode' AS mode, p->>'reason' AS reason
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f',
    '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000000c1", "step_index": 0}');
SELECT jsonb_pretty(cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f')
       - 'checkpoint' - 'sessions' - 'events_after_marker' - 'detail') AS plan;
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a8b2-0000-7000-8000-0000000000c9') p;
SELECT cortex_buffer.recovery_plan(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.recovery_plan('00000000-0000-4000-8000-00000000ffff');
\echo :LAST_ERROR_SQLSTATE
SELECT at IS NOT NULL AS timed, source, kind, session, line_no, seq, detail FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
SELECT state, confidence, decided_by_line, rule, detail FROM cortex_buffer.agent_state('proj/11111111-2222-4333-8444-555555555555.jsonl');
SELECT state, confidence, rule FROM cortex_buffer.agent_state('11111111-2222-4333-8444-555555555555'::uuid);
SELECT state, confidence, rule, detail FROM cortex_buffer.agent_state('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl');
SELECT * FROM cortex_buffer.agent_state('../etc/passwd');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.agent_state('00000000-0000-4000-8000-000000000000'::uuid);
\echo :LAST_ERROR_SQLSTATE
SELECT state, confidence, detail FROM cortex_buffer.agent_state('proj/no-such-file.jsonl');
SELECT p->>'reason' AS reason, p->>'session_id' AS session_id, p->'in_flight'->0->>'tool_name' AS in_flight
  FROM cortex_buffer.session_recovery('proj/11111111-2222-4333-8444-555555555555.jsonl') p;
SELECT cortex_buffer.session_recovery('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.session_recovery('proj/nothing.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT regexp_replace(path, '^.*/', '') AS file, subagent, model, responses, input_tokens, output_tokens, cache_read_input_tokens, cost_usd
  FROM cortex_buffer.session_usage('proj/11111111-2222-4333-8444-555555555555.jsonl');
SELECT * FROM cortex_buffer.job_usage_from_buffer('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
SELECT seq, entry_type, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', 'm:ToolInvoked', 1);
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl', last_n => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.log_entries(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agrees, reason, detail, entries, entries_through_last_seq FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 1);
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 9, 2);
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT regexp_replace(path, '^.*/', '') AS file, last_event_type, agent_state, agent_state_confidence, recovery_refusal FROM cortex_buffer.job_sessions;
SELECT count(*) AS refused_files FROM cortex_buffer.untrusted_session_files;
SELECT cortex_buffer.session_file_refusal(false, 1, 10, 10, false, false, false, 0.5);
