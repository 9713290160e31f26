-- The extension, and the roles the privilege tests grant.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
CREATE EXTENSION cortex_buffer;
SELECT extversion FROM pg_extension WHERE extname = 'cortex_buffer';
CREATE ROLE regress_agent NOLOGIN;
CREATE ROLE regress_operator NOLOGIN;
CREATE ROLE regress_stranger NOLOGIN;
CREATE ROLE regress_control_plane NOLOGIN;
GRANT cortex_buffer_agent TO regress_agent;
GRANT cortex_buffer_operator TO regress_operator;
GRANT cortex_buffer_control_plane TO regress_control_plane;
-- Installing into a schema someone prepared is refused (DROP EXTENSION leaves the schema,
-- empty and the installer's, which a new install accepts).
DROP EXTENSION cortex_buffer;
CREATE TABLE cortex_buffer.squatter (x int);
CREATE EXTENSION cortex_buffer;
DROP SCHEMA cortex_buffer CASCADE;
CREATE EXTENSION cortex_buffer;
