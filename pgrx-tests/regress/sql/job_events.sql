-- job_events(job, since): a job's events in order across its session files.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- The spike fixture job: its events in file order (the corrupt last line is no event).
SELECT line_no, byte_offset, type, seq, invocation_id, tool_name, checkpoint_id, success
  FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
-- Only those at or after since.
SELECT line_no, type, ts FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '2026-02-23 14:30:04+00');
-- The shipped writer's events (no call ids; tokens in the event's columns).
SELECT line_no, type, seq, tool_name, input_tokens, output_tokens, cache_read_tokens, payload->'data'->>'type' AS data_type
  FROM cortex_buffer.job_events('0193a8b2-0000-7000-8000-0000000fa001');
-- A line naming another job than its directory's is never this job's (nor the other's).
SELECT line_no, type, session_id, seq, invocation_id FROM cortex_buffer.job_events('0193a8b2-0000-7000-8000-0000000fb001');
SELECT foreign_job_lines FROM cortex_buffer.session_file WHERE job_id = '0193a8b2-0000-7000-8000-0000000fb001';
SELECT count(*) AS forged_events FROM cortex_buffer.job_events('0193a8b2-0000-7000-8000-0000000fb0ff');
-- A job without session files, and a NULL job: no rows.
SELECT count(*) AS events FROM cortex_buffer.job_events('0193a8b2-0000-7000-8000-0000000f1dff');
SELECT count(*) AS events FROM cortex_buffer.job_events(NULL);
-- The agent, the control plane and the operator may read them; strangers may not (42501).
SELECT cortex_buffer.job_token('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT count(*) AS as_agent FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_control_plane;
SELECT count(*) AS as_control_plane FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
RESET ROLE;
SET ROLE regress_operator;
SELECT count(*) AS as_operator FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
RESET ROLE;
SET ROLE regress_stranger;
SELECT count(*) FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
