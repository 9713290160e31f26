-- The background worker's SQL face: waking it, its figures, and the indexer at a glance.
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes every indexer process for an immediate walk of the files it owns. Returns false, with a NOTICE saying why, when no enabled worker is running. Reads no file. Granted to cortex_buffer_control_plane and cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.indexer_worker() IS
'Each indexer process''s figures from shared memory, one row per process (cortex_buffer.workers): number, pid, state, how it learns of changes and how many directories it watches, files it tracks, last pass and its duration, passes, last walk of everything it owns and how many, events indexed and files failed since the server started.';


-- What the indexer is doing: the worker's figures and totals over session_file.
CREATE VIEW cortex_buffer.indexer_status AS
SELECT w.worker_pid, w.worker_state, w.last_pass_at, w.last_pass_ms, w.passes,
       f.files_tracked, f.files_gone, f.bytes_indexed, f.bytes_pending, f.events_indexed, f.corrupt_lines,
       f.files_pending_tail, f.files_untrusted, f.files_failing, f.files_quarantined, f.last_error, f.last_error_at,
       a.worker_errors, w.watch_mode, w.watches, w.last_rescan_at, a.workers
  FROM cortex_buffer.indexer_worker() AS w,
       (SELECT coalesce(pg_catalog.sum(errors), 0)::pg_catalog.int8 AS worker_errors,
               pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'worker', worker, 'pid', worker_pid, 'state', worker_state, 'watch_mode', watch_mode,
                   'files', files, 'passes', passes, 'last_pass_at', last_pass_at, 'last_pass_ms', last_pass_ms,
                   'rescans', rescans, 'events_indexed', events_indexed, 'errors', errors) ORDER BY worker) AS workers
          FROM cortex_buffer.indexer_worker()) AS a,
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
          FROM cortex_buffer.session_file) AS f
 WHERE w.worker OPERATOR(pg_catalog.=) 1;
COMMENT ON VIEW cortex_buffer.indexer_status IS
'The indexer at a glance: the first worker''s state, last pass and how it learns of changes, every worker in workers, files tracked, bytes indexed and pending (lag), events and corrupt lines indexed, files with a pending tail, untrusted, failing or quarantined, the latest error. Granted to pg_monitor and cortex_buffer_operator.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_pid IS 'The first worker''s pid (NULL when not running); every worker is in workers.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_state IS 'indexing, waiting, disabled, not running or not preloaded.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_at IS 'When the first worker''s last pass started (a pass looks at the directories that changed, or walks everything).';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_ms IS 'How long it took.';
COMMENT ON COLUMN cortex_buffer.indexer_status.passes IS 'The first worker''s passes since the server started.';
COMMENT ON COLUMN cortex_buffer.indexer_status.watch_mode IS 'How the first worker learns of changes: notify (the kernel says), poll (cortex_buffer.watch = poll), poll (fallback) (watches could not be set: see the log), starting.';
COMMENT ON COLUMN cortex_buffer.indexer_status.watches IS 'Directories watched for changes.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_rescan_at IS 'When the first worker last walked the whole sessions directory: at start, after lost events, every 5 minutes, and at each poll in poll mode.';
COMMENT ON COLUMN cortex_buffer.indexer_status.workers IS 'Every indexer process (cortex_buffer.workers): worker, pid, state, watch_mode, files, passes, last_pass_at, last_pass_ms, rescans, events_indexed, errors.';
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
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_errors IS 'Files the workers failed to index since the server started.';

