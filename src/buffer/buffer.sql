-- Functions that read server files: not for PUBLIC. pg_read_server_files is the built-in role
-- for exactly this kind of access.
REVOKE ALL ON FUNCTION cortex_buffer.index_sessions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cortex_buffer.index_sessions(text) TO pg_read_server_files;
REVOKE ALL ON FUNCTION cortex_buffer.index_now() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cortex_buffer.index_now() TO pg_read_server_files;

COMMENT ON FUNCTION cortex_buffer.index_sessions(text) IS
'One synchronous discovery pass (the background worker''s own code) over cortex_buffer.sessions_dir, or over dir (superusers only). Returns each session file found, gone or skipped, with the action taken. Granted to pg_read_server_files.';
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes the background worker for an immediate pass. Returns false, with a NOTICE saying why, when no enabled worker is running. Granted to pg_read_server_files.';
