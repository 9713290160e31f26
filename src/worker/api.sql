-- The background worker's SQL face: waking it, its figures, and the indexer at a glance.
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes the background worker for an immediate pass. Returns false, with a NOTICE saying why, when no enabled worker is running. Reads no file. Granted to cortex_buffer_control_plane and cortex_buffer_operator.';
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

