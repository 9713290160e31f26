-- record_crash(job_id, exit_code, error_message, ...): a crash of the job's current attempt.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0b01', '0193a8b2-0000-7000-8000-0000000f0ba1', 'FAILED', 2);
-- Returns the new crash_id.
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0b01', 137, 'OOMKilled') > 0 AS recorded;
-- Every argument kept, with the job's attempt and agent.
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0b01', 1, 'TypeError: x is undefined',
       lifecycle_state => 'EXECUTING', step_index => 4, last_tool => 'web_search', tokens => '{"input_tokens": 1200}') > 0 AS recorded;
-- Exit code and message may be unknown.
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0b01', NULL, NULL) > 0 AS recorded;
SELECT job_id, agent_id, attempt, reason, exit_code, error_message, lifecycle_state, step_index, last_tool, tokens
  FROM cortex_buffer.crash WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0b01' ORDER BY crash_id;
-- crash_ids increase.
SELECT count(*) AS crashes, max(crash_id) - min(crash_id) AS id_span FROM cortex_buffer.crash WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0b01';
-- NULL job_id: 22004. No such job: P0002.
SELECT cortex_buffer.record_crash(NULL, 137, 'OOMKilled');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0bff', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
-- The control plane may record; the agent may not (42501), nor insert into crash itself.
SET ROLE regress_control_plane;
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0b01', 143, 'SIGTERM') > 0 AS recorded;
INSERT INTO cortex_buffer.crash (job_id, reason) VALUES ('0193a8b2-0000-7000-8000-0000000f0b01', 'crash');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT cortex_buffer.record_crash('0193a8b2-0000-7000-8000-0000000f0b01', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.crash WHERE job_id::text LIKE '0193a8b2-0000-7000-8000-0000000f0b%';
DELETE FROM cortex_buffer.job WHERE id::text LIKE '0193a8b2-0000-7000-8000-0000000f0b%';
