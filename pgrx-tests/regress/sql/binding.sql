-- Binding to another job table: every problem of the contract, listed at once.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
CREATE SCHEMA app;
CREATE TABLE app.job (id uuid PRIMARY KEY, agent_id text, status text);
SET cortex_buffer.job_table = 'app.job';
SELECT * FROM cortex_buffer.read_checkpoint('00000000-0000-4000-8000-00000000c001');
\echo :LAST_ERROR_SQLSTATE
SET cortex_buffer.job_table = 'app.nothing';
SELECT cortex_buffer.heartbeat('00000000-0000-4000-8000-00000000c001');
\echo :LAST_ERROR_SQLSTATE
SET cortex_buffer.job_table = 'job';
SELECT cortex_buffer.heartbeat('00000000-0000-4000-8000-00000000c001');
\echo :LAST_ERROR_SQLSTATE
RESET cortex_buffer.job_table;
DROP SCHEMA app CASCADE;
