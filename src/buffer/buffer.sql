-- Grants of these functions: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.index_sessions(text) IS
'One synchronous pass of the background worker''s own code over cortex_buffer.sessions_dir, or over dir (superusers only): discovers session files and indexes their new lines into event and corrupt_line (each file in a subtransaction of its own). Returns each file found, gone or skipped, with the action taken, events and corrupt lines added, and indexing notes. Granted to cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes the background worker for an immediate pass. Returns false, with a NOTICE saying why, when no enabled worker is running. Reads no file. Granted to cortex_buffer_control_plane and cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.file_integrity(text) IS
'Judges a session file''s current bytes as the control plane''s scanBuffer does (lossy UTF-8, JavaScript trimming and JSON.parse, type and timestamp keys for the cortex dialects) and reports lines, truncated or pending tail, corruption ratio, severity (none, truncated_tail, corrupt_interior, unreadable), trust for recovery and seq gaps. Indexes nothing. Paths are opened beneath sessions_dir; files elsewhere: superusers only. Granted to cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.indexer_worker() IS
'The background worker''s figures from shared memory: pid, state, last pass and its duration, passes, events indexed and files failed since the server started.';

-- What the indexer is doing: the worker's figures and totals over session_file.
CREATE VIEW cortex_buffer.indexer_status AS
SELECT w.worker_pid, w.worker_state, w.last_pass_at, w.last_pass_ms, w.passes,
       f.files_tracked, f.files_gone, f.bytes_indexed, f.bytes_pending, f.events_indexed, f.corrupt_lines,
       f.files_pending_tail, f.files_untrusted, f.files_failing, f.files_quarantined, f.last_error, f.last_error_at,
       w.errors AS worker_errors
  FROM cortex_buffer.indexer_worker() AS w,
       (SELECT pg_catalog.count(*) FILTER (WHERE gone_at IS NULL) AS files_tracked,
               pg_catalog.count(*) FILTER (WHERE gone_at IS NOT NULL) AS files_gone,
               coalesce(pg_catalog.sum(indexed_offset), 0)::pg_catalog.int8 AS bytes_indexed,
               coalesce(pg_catalog.sum(greatest(size_bytes OPERATOR(pg_catalog.-) indexed_offset, 0))
                        FILTER (WHERE gone_at IS NULL), 0)::pg_catalog.int8 AS bytes_pending,
               coalesce(pg_catalog.sum(valid_lines), 0)::pg_catalog.int8 AS events_indexed,
               coalesce(pg_catalog.sum(corrupt_lines), 0)::pg_catalog.int8 AS corrupt_lines,
               pg_catalog.count(*) FILTER (WHERE tail_pending AND gone_at IS NULL) AS files_pending_tail,
               pg_catalog.count(*) FILTER (WHERE NOT trusted AND generation OPERATOR(pg_catalog.>) 0) AS files_untrusted,
               pg_catalog.count(*) FILTER (WHERE failures OPERATOR(pg_catalog.>) 0) AS files_failing,
               pg_catalog.count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS files_quarantined,
               (pg_catalog.array_agg(last_error ORDER BY last_error_at DESC) FILTER (WHERE last_error IS NOT NULL))[1] AS last_error,
               pg_catalog.max(last_error_at) AS last_error_at
          FROM cortex_buffer.session_file) AS f;
REVOKE ALL ON cortex_buffer.indexer_status FROM PUBLIC;
GRANT SELECT ON cortex_buffer.indexer_status TO pg_monitor, cortex_buffer_operator;
COMMENT ON VIEW cortex_buffer.indexer_status IS
'The indexer at a glance: worker state and last pass, files tracked, bytes indexed and pending (lag), events and corrupt lines indexed, files with a pending tail, untrusted, failing or quarantined, the latest error. Granted to pg_monitor and cortex_buffer_operator.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_pid IS 'The worker''s pid (NULL when not running).';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_state IS 'indexing, waiting, disabled, not running or not preloaded.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_at IS 'When the worker''s last pass started.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_ms IS 'How long it took.';
COMMENT ON COLUMN cortex_buffer.indexer_status.passes IS 'Passes since the server started.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_tracked IS 'Session files present.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_gone IS 'Session files deleted (their rows are kept).';
COMMENT ON COLUMN cortex_buffer.indexer_status.bytes_indexed IS 'Bytes indexed, over all files.';
COMMENT ON COLUMN cortex_buffer.indexer_status.bytes_pending IS 'Bytes discovered but not indexed yet (the lag).';
COMMENT ON COLUMN cortex_buffer.indexer_status.events_indexed IS 'Events indexed.';
COMMENT ON COLUMN cortex_buffer.indexer_status.corrupt_lines IS 'Corrupt lines recorded (truncated tails included).';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_pending_tail IS 'Files whose last line waits for a newline or the settle period.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_untrusted IS 'Files not trusted for recovery (corruption ratio over the limit).';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_failing IS 'Files whose last indexing attempt failed.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_quarantined IS 'Files left alone after repeated failures.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_error IS 'The most recent indexing error.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_error_at IS 'When it happened.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_errors IS 'Files the worker failed to index since the server started.';

-- A job's events in order, through its session files. (event has no index on job_id: every
-- event row would pay for it; a job's files are few and their events are contiguous in event's
-- primary key.) The caller's rights: SELECT on session_file and event. Only lines that do not
-- name another job than their directory's count as the job's.
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id OPERATOR(pg_catalog.=) f.file_id
     WHERE f.job_id OPERATOR(pg_catalog.=) job
       AND (e.job_id IS NULL OR e.job_id OPERATOR(pg_catalog.=) f.job_id)
       AND (since IS NULL OR e.ts OPERATOR(pg_catalog.>=) since)
     ORDER BY f.session_ordinal NULLS FIRST, f.path COLLATE "C", e.byte_offset
$$;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by (session_ordinal, path), then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. The caller''s rights (SELECT on session_file and event).';
