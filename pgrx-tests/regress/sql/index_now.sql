-- index_now(): wakes the background worker; false with a NOTICE (and a HINT) when it is disabled.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The test cluster preloads the library with cortex_buffer.worker_enabled = off.
SHOW cortex_buffer.worker_enabled;
SELECT cortex_buffer.index_now();
-- It reads no file and indexes nothing.
SELECT count(*) FILTER (WHERE indexed_at > now()) AS indexed_now FROM cortex_buffer.session_file;
-- The control plane and the operator may call it; the agent and strangers may not (42501).
SET ROLE regress_control_plane;
SELECT cortex_buffer.index_now() AS as_control_plane;
RESET ROLE;
SET ROLE regress_operator;
SELECT cortex_buffer.index_now() AS as_operator;
RESET ROLE;
SET ROLE regress_agent;
SELECT cortex_buffer.index_now();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT cortex_buffer.index_now();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- worker_enabled is set in postgresql.conf and reloaded, not SET (sighup).
SET cortex_buffer.worker_enabled = on;
\echo :LAST_ERROR_SQLSTATE
