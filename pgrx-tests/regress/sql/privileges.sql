-- Who may do what: refusals a role without the grant sees.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET ROLE regress_stranger;
SELECT cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM cortex_buffer.event;
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.checkpoint_crc('{}');
RESET ROLE;
SELECT cortex_buffer.job_token('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') AS job_token \gset
SET cortex_buffer.job_token = :'job_token';
SET ROLE regress_agent;
SELECT p->>'reason' AS reason FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
SELECT * FROM cortex_buffer.index_sessions('/tmp');
\echo :LAST_ERROR_SQLSTATE
UPDATE cortex_buffer.job_usage SET cost_usd = 0;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET cortex_buffer.job_token;
SET ROLE regress_operator;
SELECT * FROM cortex_buffer.index_sessions('/tmp');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.file_integrity('/etc/hostname');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.agent_state('/etc/hostname');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
