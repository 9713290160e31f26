-- Retention's functions (sql.rs defines them): their comments; and the oversized_buffers view.
-- Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision) IS
'Applies the retention policy (docs/operations.md#retention): deletes job directories of jobs terminal for longer than post_terminal (cortex_buffer.keep_failed_for for failed ones, when longer) and of orphans whose newest file is older than post_terminal, files older than max_file_age (except those a live job''s recovery plan reads), index rows of files gone for cortex_buffer.gone_retention, and per-job rows of jobs gone or terminal past cortex_buffer.job_rows_retention. One row per action: delete_dir, delete_file, delete_rows, drop_partition, keep or error. Index rows go in the calling transaction; files are unlinked when it commits. In the partitioned layout (partition_events()) the same rules decide and the same rows go, but a partition of event and corrupt_line all of whose files go (or that no file holds any more) is dropped whole instead of deleted row by row; each call also makes the partitions ahead of new files. Never follows symbolic links; locks no job row; refuses when most job ids are unknown to the job table (max_unknown_ratio). dry_run changes nothing and returns the same rows.';
COMMENT ON FUNCTION cortex_buffer.storage_report() IS
'Session files in the index by job state (the job''s status, orphan, or not a job) and age bucket (by mtime): files, bytes on disk, index rows, and the same three that cleanup_session_buffers() with its defaults would free now (its dry run).';

-- Where a file's bytes of the last day start: the newest event older than `since`, found by
-- walking the file's events backwards by offset (event_pkey). A function, not a subquery of the
-- view, so that the view holds no dependency on event's columns (an operator may change their
-- types; the indexer then inserts through SQL).
CREATE FUNCTION cortex_buffer.oversized_day_start(file_id bigint, since timestamptz) RETURNS bigint
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.byte_offset FROM cortex_buffer.event e
     WHERE e.file_id OPERATOR(pg_catalog.=) $1 AND e.ts OPERATOR(pg_catalog.<) $2
     ORDER BY e.byte_offset DESC LIMIT 1
$$;
COMMENT ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) IS
'oversized_buffers'' helper: the byte offset of the file''s newest event stamped before since (NULL: none), where its recent bytes start.';

-- Session buffers over cortex_buffer.oversized_file (per file) or five times it (per job
-- directory: a job's sessions together), and those that will be within the hour at their rate of the last day.
-- Candidates first (a quarter of a limit or more, present files), so that the rate's index
-- probe runs for few files: the newest event older than a day, found by walking the file's
-- events backwards by offset (event_pkey), marks where the last day's bytes start.
CREATE VIEW cortex_buffer.oversized_buffers WITH (security_invoker = true) AS
WITH lim AS (
    SELECT pg_catalog.pg_size_bytes(pg_catalog.current_setting('cortex_buffer.oversized_file')) AS file_limit,
           pg_catalog.pg_size_bytes(pg_catalog.current_setting('cortex_buffer.oversized_file')) OPERATOR(pg_catalog.*) 5 AS dir_limit,
           pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 day' AS day_ago
), dirs AS (
    SELECT f.job_dir, pg_catalog.sum(f.size_bytes) AS dir_bytes
      FROM cortex_buffer.session_file f WHERE f.gone_at IS NULL GROUP BY f.job_dir
), cand AS (
    SELECT f.file_id, f.path, f.job_dir, f.job_id, f.size_bytes, f.first_ts, f.first_seen, f.mtime
      FROM cortex_buffer.session_file f JOIN dirs d USING (job_dir), lim
     WHERE f.gone_at IS NULL
       AND (f.size_bytes OPERATOR(pg_catalog.*) 4 OPERATOR(pg_catalog.>=) lim.file_limit
            OR d.dir_bytes OPERATOR(pg_catalog.*) 4 OPERATOR(pg_catalog.>=) lim.dir_limit)
), rated AS (
    SELECT c.*, lim.file_limit, lim.dir_limit,
           -- Bytes written in the last day, and over how long: since the newest event older
           -- than a day, else since the file began (its first event, else when it was found).
           -- A file not modified for a day grew by nothing, whatever its events' times say.
           CASE WHEN c.mtime OPERATOR(pg_catalog.<) lim.day_ago THEN 0
                ELSE GREATEST(c.size_bytes OPERATOR(pg_catalog.-) COALESCE(o.byte_offset, 0), 0) END AS day_bytes,
           GREATEST(EXTRACT(epoch FROM pg_catalog.now() OPERATOR(pg_catalog.-)
                        GREATEST(COALESCE(c.first_ts, c.first_seen), lim.day_ago)), 60) AS day_seconds
      FROM cand c CROSS JOIN lim
      LEFT JOIN LATERAL (SELECT cortex_buffer.oversized_day_start(c.file_id, lim.day_ago) AS byte_offset) o ON true
), per_file AS (
    SELECT 'file'::pg_catalog.text AS kind, r.path, r.job_id, r.size_bytes, r.file_limit AS limit_bytes,
           (r.day_bytes OPERATOR(pg_catalog.*) 3600 OPERATOR(pg_catalog./) r.day_seconds)::pg_catalog.int8 AS growth_bytes_per_hour
      FROM rated r
), per_dir AS (
    SELECT 'job_dir'::pg_catalog.text AS kind, pg_catalog.min(r.job_dir) AS path,
           pg_catalog.min(r.job_id::pg_catalog.text)::pg_catalog.uuid AS job_id,
           d.dir_bytes::pg_catalog.int8 AS size_bytes, pg_catalog.min(r.dir_limit) AS limit_bytes,
           pg_catalog.sum(r.day_bytes OPERATOR(pg_catalog.*) 3600 OPERATOR(pg_catalog./) r.day_seconds)::pg_catalog.int8 AS growth_bytes_per_hour
      FROM rated r JOIN dirs d USING (job_dir)
     GROUP BY r.job_dir, d.dir_bytes
)
SELECT b.kind, b.path, b.job_id, b.size_bytes, b.limit_bytes, b.growth_bytes_per_hour,
       b.size_bytes OPERATOR(pg_catalog.>) b.limit_bytes AS over_limit,
       b.size_bytes OPERATOR(pg_catalog.<=) b.limit_bytes
           AND b.size_bytes OPERATOR(pg_catalog.+) b.growth_bytes_per_hour OPERATOR(pg_catalog.>) b.limit_bytes AS crosses_within_hour,
       CASE WHEN b.size_bytes OPERATOR(pg_catalog.<=) b.limit_bytes AND b.growth_bytes_per_hour OPERATOR(pg_catalog.>) 0
            THEN ((b.limit_bytes OPERATOR(pg_catalog.-) b.size_bytes)::pg_catalog.float8
                  OPERATOR(pg_catalog./) b.growth_bytes_per_hour::pg_catalog.float8) END AS hours_to_limit
  FROM (SELECT * FROM per_file UNION ALL SELECT * FROM per_dir) b
 WHERE b.size_bytes OPERATOR(pg_catalog.>) b.limit_bytes
    OR b.size_bytes OPERATOR(pg_catalog.+) b.growth_bytes_per_hour OPERATOR(pg_catalog.>) b.limit_bytes;

COMMENT ON VIEW cortex_buffer.oversized_buffers IS
'Session files over cortex_buffer.oversized_file and job directories over five times it (kind file or job_dir), and those that will cross their limit within the hour at their growth rate of the last day (from the index: the bytes after the newest event older than a day). Present files only; pushed files count towards their job directory.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.kind IS 'file, or job_dir (every file of one job directory, pushed ones included).';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.path IS 'The file''s session_file.path, or the job directory''s name.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.job_id IS 'The job, when the directory is named by one.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.size_bytes IS 'Bytes now (session_file.size_bytes, summed for a directory).';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.limit_bytes IS 'cortex_buffer.oversized_file, or five times it for a job directory, in bytes.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.growth_bytes_per_hour IS 'Bytes written over the last day (or since the file began, if later), per hour.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.over_limit IS 'Larger than the limit now.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.crosses_within_hour IS 'Not over the limit yet, but will be within the hour at growth_bytes_per_hour.';
COMMENT ON COLUMN cortex_buffer.oversized_buffers.hours_to_limit IS 'Hours until the limit at that rate (NULL when over it already, or not growing).';
