-- reaper_index_sql(): the reaper's partial index for the bound job table; reap_zombies' NOTICE without it.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- cortex_buffer.job has the index already.
SELECT cortex_buffer.reaper_index_sql();
SELECT indexdef FROM pg_indexes WHERE schemaname = 'cortex_buffer' AND indexname = 'job_running_heartbeat_idx';
-- A bound table without it: the statement names that table, and reap_zombies says so once per session.
CREATE SCHEMA regress_reaper;
CREATE TABLE regress_reaper.job (
    id uuid PRIMARY KEY, agent_id uuid NOT NULL, status text NOT NULL, checkpoint jsonb, checkpoint_crc bigint,
    attempt integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL DEFAULT 3, heartbeat_at timestamptz,
    started_at timestamptz, completed_at timestamptz, updated_at timestamptz NOT NULL DEFAULT now(), error jsonb);
SET cortex_buffer.job_table = 'regress_reaper.job';
SELECT cortex_buffer.reaper_index_sql();
SELECT count(*) AS reaped FROM cortex_buffer.reap_zombies('1 day');
SELECT count(*) AS reaped_again FROM cortex_buffer.reap_zombies('1 day');
-- Run the statement (it builds the index concurrently, outside a transaction block).
SELECT cortex_buffer.reaper_index_sql() \gexec
SELECT indexname FROM pg_indexes WHERE schemaname = 'regress_reaper' ORDER BY indexname;
SELECT item, ok, fix FROM cortex_buffer.check_binding() WHERE item = 'reaper_index';
RESET cortex_buffer.job_table;
DROP SCHEMA regress_reaper CASCADE;
-- The operator may ask for it; the control plane may not (42501).
SET ROLE regress_operator;
SELECT cortex_buffer.reaper_index_sql() AS as_operator;
RESET ROLE;
SET ROLE regress_control_plane;
SELECT cortex_buffer.reaper_index_sql();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
