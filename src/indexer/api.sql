-- The indexer's functions: comments of those sql.rs and status_sql.rs define, and job_events.
-- Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.index_sessions(text) IS
'One synchronous pass of the background worker''s own code over cortex_buffer.sessions_dir, or over dir (superusers only): discovers session files and indexes their new lines into event and corrupt_line (each file in a subtransaction of its own). Returns each file found, gone or skipped, with the action taken, events and corrupt lines added, and indexing notes. Granted to cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.file_integrity(text) IS
'Judges a session file''s current bytes as the control plane''s scanBuffer does (lossy UTF-8, JavaScript trimming and JSON.parse, type and timestamp keys for the cortex dialects) and reports lines, truncated or pending tail, corruption ratio, severity (none, truncated_tail, corrupt_interior, unreadable), trust for recovery and seq gaps. Indexes nothing. Paths are opened beneath sessions_dir; files elsewhere: superusers only. Granted to cortex_buffer_operator.';
-- A job's events in order, through its session files: session_file's job index finds the files,
-- and a file's events are contiguous in event's primary key, so the order needs no sort of the
-- job's rows by time (and event needs no index by job and time: `since` filters the job's
-- rows). Only lines that do not name another job than their directory's count as the job's. It
-- runs as the definer role (which reads the index) after authorize_job: a pod reads its own
-- job's events.
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM cortex_buffer.authorize_job(job);
    RETURN QUERY
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id OPERATOR(pg_catalog.=) f.file_id
     WHERE f.job_id OPERATOR(pg_catalog.=) job
       AND (e.job_id IS NULL OR e.job_id OPERATOR(pg_catalog.=) f.job_id)
       AND (since IS NULL OR e.ts OPERATOR(pg_catalog.>=) since)
     ORDER BY f.session_ordinal NULLS FIRST, f.first_seen, f.path COLLATE "C", e.byte_offset;
END
$$;
ALTER FUNCTION cortex_buffer.job_events(uuid, timestamptz) OWNER TO cortex_buffer_definer;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by (session_ordinal, first_seen, path), then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. Fleet roles read any job''s; an agent session its own job''s (authorize_job). Runs as cortex_buffer_definer.';
COMMENT ON FUNCTION cortex_buffer.clear_quarantine(text) IS
'Lets the indexer try a quarantined session file again: clears session_file.quarantined_at, failures and last_error. True when the file was quarantined, false when it was not. index_sessions() and the per-job lookups retry it at once; the worker within cortex_buffer''s catalogue refresh (a minute). Path: session_file.path, or relative to sessions_dir.';
