-- check_binding(): what cortex_buffer checks about the bound job table, and the statement that fixes each missing item.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- cortex_buffer.job: everything in place.
SELECT * FROM cortex_buffer.check_binding();
-- A bound table that meets the contract but has neither the reaper's index nor the checkpoint trigger.
CREATE SCHEMA regress_check_binding;
CREATE TABLE regress_check_binding.job (
    id uuid PRIMARY KEY, agent_id uuid NOT NULL, status text NOT NULL, checkpoint jsonb, checkpoint_crc integer,
    attempt integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL DEFAULT 3, heartbeat_at timestamptz,
    started_at timestamptz, completed_at timestamptz, updated_at timestamptz NOT NULL DEFAULT now(), error jsonb);
SET cortex_buffer.job_table = 'regress_check_binding.job';
SELECT * FROM cortex_buffer.check_binding();
-- A table that does not meet the contract: the job_table row carries the error's message and its HINT (no error).
SET cortex_buffer.job_table = 'regress_check_binding.nothing';
SELECT * FROM cortex_buffer.check_binding();
SET cortex_buffer.job_table = 'job';
SELECT * FROM cortex_buffer.check_binding();
CREATE TABLE regress_check_binding.wrong (id uuid PRIMARY KEY, status text);
SET cortex_buffer.job_table = 'regress_check_binding.wrong';
SELECT item, ok, detail, fix FROM cortex_buffer.check_binding();
RESET cortex_buffer.job_table;
DROP SCHEMA regress_check_binding CASCADE;
-- The operator may check; the control plane and the agent may not (42501).
SET ROLE regress_operator;
SELECT item, ok FROM cortex_buffer.check_binding();
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.check_binding();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.check_binding();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
