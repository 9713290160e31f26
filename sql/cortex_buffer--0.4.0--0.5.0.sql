-- cortex_buffer 0.4.0 -> 0.5.0: the session indexer (events, corrupt lines, per-file integrity,
-- file_integrity(), indexer_status); index_sessions() now indexes and reports what it added.
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.5.0'" to load this file. \quit

-- Event indexing: what session_file records about each file's indexing and integrity, the
-- events and corrupt lines themselves.

-- session_file is now data pg_dump must keep (events reference it), and an identity column's
-- sequence cannot be dumped with an extension: use a sequence of our own.
ALTER TABLE cortex_buffer.session_file ALTER COLUMN file_id DROP IDENTITY;
CREATE SEQUENCE cortex_buffer.session_file_seq OWNED BY cortex_buffer.session_file.file_id;
SELECT pg_catalog.setval('cortex_buffer.session_file_seq', coalesce(max(file_id), 0) + 1, false)
  FROM cortex_buffer.session_file;
ALTER TABLE cortex_buffer.session_file ALTER COLUMN file_id SET DEFAULT nextval('cortex_buffer.session_file_seq');
COMMENT ON SEQUENCE cortex_buffer.session_file_seq IS 'Ids of session_file rows.';

ALTER TABLE cortex_buffer.session_file
    ADD COLUMN indexed_offset     bigint NOT NULL DEFAULT 0 CHECK (indexed_offset >= 0),
    ADD COLUMN indexed_lines      bigint NOT NULL DEFAULT 0 CHECK (indexed_lines >= 0),
    ADD COLUMN generation         integer NOT NULL DEFAULT 0,
    ADD COLUMN indexed_device     bigint,
    ADD COLUMN indexed_inode      bigint,
    ADD COLUMN indexed_mtime      timestamptz,
    ADD COLUMN fingerprint_len    integer NOT NULL DEFAULT 0,
    ADD COLUMN fingerprint        bigint NOT NULL DEFAULT 0,
    ADD COLUMN indexed_dialect    text,
    ADD COLUMN tail_unterminated  boolean NOT NULL DEFAULT false,
    ADD COLUMN tail_pending       boolean NOT NULL DEFAULT false,
    ADD COLUMN total_lines        bigint NOT NULL DEFAULT 0,
    ADD COLUMN valid_lines        bigint NOT NULL DEFAULT 0,
    ADD COLUMN corrupt_lines      bigint NOT NULL DEFAULT 0,
    ADD COLUMN blank_lines        bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_failed_parse  boolean NOT NULL DEFAULT false,
    ADD COLUMN last_seq           bigint,
    ADD COLUMN seq_gaps           bigint NOT NULL DEFAULT 0,
    ADD COLUMN seq_first_missing  bigint,
    ADD COLUMN seq_resets         bigint NOT NULL DEFAULT 0,
    ADD COLUMN first_ts           timestamptz,
    ADD COLUMN last_ts            timestamptz,
    ADD COLUMN session_start_seen boolean NOT NULL DEFAULT false,
    ADD COLUMN session_end_seen   boolean NOT NULL DEFAULT false,
    ADD COLUMN schema_version     text,
    ADD COLUMN trusted            boolean NOT NULL DEFAULT true,
    ADD COLUMN indexed_at         timestamptz,
    ADD COLUMN failures           integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error         text,
    ADD COLUMN last_error_at      timestamptz,
    ADD COLUMN quarantined_at     timestamptz;
-- A job's files (and through them its events, in order): the job is the file's directory.
ALTER TABLE cortex_buffer.session_file ADD COLUMN job_id uuid, ADD COLUMN session_ordinal bigint;
UPDATE cortex_buffer.session_file SET job_id = job_dir::uuid
 WHERE job_dir ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
CREATE INDEX session_file_job_order_idx ON cortex_buffer.session_file (job_id, session_ordinal);
ALTER TABLE cortex_buffer.session_file
    ADD COLUMN tail_state text GENERATED ALWAYS AS (
        CASE WHEN tail_pending THEN 'pending' WHEN last_failed_parse THEN 'truncated' ELSE 'complete' END) STORED,
    ADD COLUMN corruption_ratio double precision GENERATED ALWAYS AS (
        CASE WHEN valid_lines + corrupt_lines = 0 THEN 0
             ELSE (corrupt_lines - last_failed_parse::int)::double precision / (valid_lines + corrupt_lines) END) STORED;

-- One row per line that is an event. Rows of a file beyond its indexed_offset never exist once
-- an indexing transaction commits.
CREATE TABLE cortex_buffer.event (
    file_id            bigint NOT NULL,
    byte_offset        bigint NOT NULL,
    line_no            bigint NOT NULL,
    type               text,
    ts                 timestamptz,
    job_id             uuid,
    session_id         text,
    agent_id           text,
    seq                bigint,
    step_index         integer,
    invocation_id      text COLLATE "C",
    tool_name          text,
    checkpoint_id      text,
    success            boolean,
    input_tokens       bigint,
    output_tokens      bigint,
    cache_write_tokens bigint,
    cache_read_tokens  bigint,
    request_id         text,
    payload            jsonb,
    payload_problem    text,
    PRIMARY KEY (file_id, byte_offset)
);
CREATE INDEX event_job_ts_idx ON cortex_buffer.event (job_id, ts);
CREATE INDEX event_invocation_idx ON cortex_buffer.event (invocation_id) WHERE invocation_id IS NOT NULL;

CREATE TABLE cortex_buffer.corrupt_line (
    file_id     bigint NOT NULL,
    byte_offset bigint NOT NULL,
    line_no     bigint NOT NULL,
    preview     text NOT NULL,
    reason      text NOT NULL,
    PRIMARY KEY (file_id, byte_offset)
);

-- Deleting a session_file row deletes its events and corrupt lines. (A trigger, not foreign
-- keys: a foreign key would check every one of the millions of inserted rows.)
CREATE FUNCTION cortex_buffer.session_file_delete_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM cortex_buffer.event e USING old_rows o WHERE e.file_id = o.file_id;
    DELETE FROM cortex_buffer.corrupt_line c USING old_rows o WHERE c.file_id = o.file_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER session_file_delete_rows AFTER DELETE ON cortex_buffer.session_file
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_buffer.session_file_delete_rows();
COMMENT ON FUNCTION cortex_buffer.session_file_delete_rows() IS 'Trigger: deletes the events and corrupt lines of deleted session_file rows.';
COMMENT ON TRIGGER session_file_delete_rows ON cortex_buffer.session_file IS 'A deleted session file takes its events and corrupt lines with it.';

-- Transcripts: no PUBLIC access (the schema's default), dumped with the data.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file_seq', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.corrupt_line', '');

COMMENT ON COLUMN cortex_buffer.session_file.indexed_offset IS 'Bytes indexed: every event and corrupt line before this offset is in the tables (changed in the same transaction as they are).';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_lines IS 'Lines indexed (the next line''s number is one more).';
COMMENT ON COLUMN cortex_buffer.session_file.generation IS '0 until first indexed; incremented each time the file is re-indexed from byte 0 (replaced, shrunk, rewritten, dialect identified, unterminated last line continued).';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_device IS 'st_dev when indexed (bit pattern).';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_inode IS 'st_ino when indexed (bit pattern); a different file at the path starts a new generation.';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_mtime IS 'Modification time when last indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.fingerprint_len IS 'How many leading bytes the fingerprint covers (up to 4096).';
COMMENT ON COLUMN cortex_buffer.session_file.fingerprint IS 'CRC-32 of the first fingerprint_len bytes; a change means the file was rewritten.';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_dialect IS 'The dialect whose rules judged the indexed lines.';
COMMENT ON COLUMN cortex_buffer.session_file.tail_unterminated IS 'The last indexed line had no newline (judged after the settle period); more bytes make the file re-indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.tail_pending IS 'Bytes after indexed_offset wait for a newline or the settle period.';
COMMENT ON COLUMN cortex_buffer.session_file.total_lines IS 'Lines indexed: valid + corrupt + blank.';
COMMENT ON COLUMN cortex_buffer.session_file.valid_lines IS 'Lines that are events.';
COMMENT ON COLUMN cortex_buffer.session_file.corrupt_lines IS 'Lines that are not events, the truncated tail included (scanBuffer''s corruptedLines is this minus last_failed_parse).';
COMMENT ON COLUMN cortex_buffer.session_file.blank_lines IS 'Lines that are empty after JavaScript trimming.';
COMMENT ON COLUMN cortex_buffer.session_file.last_failed_parse IS 'The last non-blank line does not parse: the truncated tail (scanBuffer''s lastLineTruncated).';
COMMENT ON COLUMN cortex_buffer.session_file.last_seq IS 'seq of the last event that had one.';
COMMENT ON COLUMN cortex_buffer.session_file.seq_gaps IS 'Jumps upwards in seq (lost events).';
COMMENT ON COLUMN cortex_buffer.session_file.seq_first_missing IS 'The first seq missing at the first gap.';
COMMENT ON COLUMN cortex_buffer.session_file.seq_resets IS 'Drops in seq (a new writer restarted the count).';
COMMENT ON COLUMN cortex_buffer.session_file.first_ts IS 'Earliest event timestamp.';
COMMENT ON COLUMN cortex_buffer.session_file.last_ts IS 'Latest event timestamp.';
COMMENT ON COLUMN cortex_buffer.session_file.session_start_seen IS 'A SESSION_START event was indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.session_end_seen IS 'A SESSION_END event was indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.schema_version IS 'The first schema version a line gave (buffer_schema_version, version).';
COMMENT ON COLUMN cortex_buffer.session_file.trusted IS 'Trusted for recovery when last indexed: corruption_ratio <= cortex_buffer.max_corruption_ratio and the file is readable.';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_at IS 'When the file was last indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.failures IS 'Consecutive failed indexing attempts (committed separately, so a file cannot crash-loop the worker).';
COMMENT ON COLUMN cortex_buffer.session_file.last_error IS 'Why the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.last_error_at IS 'When the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.quarantined_at IS 'Set after cortex_buffer.quarantine_after failures: the file is left alone until replaced, or until an operator clears this column and failures.';
COMMENT ON COLUMN cortex_buffer.session_file.session_ordinal IS 'Order of the file among its job''s sessions, compared as a number: NNN of session-NNN.jsonl, or the start time (Unix seconds) of session_<YYYYMMDDTHHMMSSZ>_<pod>.jsonl (session-1000 comes after session-999).';
COMMENT ON COLUMN cortex_buffer.session_file.job_id IS 'The job: job_dir when it is a UUID (the cortex dialects'' layout, <sessions_dir>/<job_id>/<file>).';
COMMENT ON INDEX cortex_buffer.session_file_job_order_idx IS 'A job''s session files in order (the latest first with ORDER BY session_ordinal DESC); with event''s primary key, a job''s events by file and offset (job_events()).';
COMMENT ON COLUMN cortex_buffer.session_file.tail_state IS 'complete, pending (waiting for a newline or the settle period) or truncated (the last non-blank line does not parse).';
COMMENT ON COLUMN cortex_buffer.session_file.corruption_ratio IS 'Corrupt lines (the truncated tail not counted) over non-blank lines.';

COMMENT ON TABLE cortex_buffer.event IS
'One row per session-file line that is an event (cortex dialects: an object with type and timestamp; Claude Code and wink: an object), with dialect-normalised columns and the line as jsonb. Written by the indexer exactly once per (file_id, byte_offset).';
COMMENT ON COLUMN cortex_buffer.event.file_id IS 'The session file (session_file.file_id; deleting that row deletes this one).';
COMMENT ON COLUMN cortex_buffer.event.byte_offset IS 'Where the line starts in the file (events are keyed by offset: a writer restart reuses seq numbers).';
COMMENT ON COLUMN cortex_buffer.event.line_no IS 'Line number in the file, from 1.';
COMMENT ON COLUMN cortex_buffer.event.type IS 'Event type as written (type, or __type__ for wink logs).';
COMMENT ON COLUMN cortex_buffer.event.ts IS 'The event''s timestamp (timestamp or __ts__), if it is an ISO 8601 time.';
COMMENT ON COLUMN cortex_buffer.event.job_id IS 'job_id / jobId of the line, else the file''s job directory when that is a UUID.';
COMMENT ON COLUMN cortex_buffer.event.session_id IS 'session_id / sessionId.';
COMMENT ON COLUMN cortex_buffer.event.agent_id IS 'agent_id / agentId.';
COMMENT ON COLUMN cortex_buffer.event.seq IS 'seq / sequence / __seq__.';
COMMENT ON COLUMN cortex_buffer.event.step_index IS 'step_index / data.stepIndex.';
COMMENT ON COLUMN cortex_buffer.event.invocation_id IS 'Tool invocation: invocation_id, data.toolCallId, or the first tool_use id / tool_result tool_use_id of a Claude Code message.';
COMMENT ON COLUMN cortex_buffer.event.tool_name IS 'tool_name / data.toolName / tool_use name.';
COMMENT ON COLUMN cortex_buffer.event.checkpoint_id IS 'checkpoint_id / data.checkpointId.';
COMMENT ON COLUMN cortex_buffer.event.success IS 'Tool outcome: success, not data.isError, not tool_result.is_error.';
COMMENT ON COLUMN cortex_buffer.event.input_tokens IS 'Uncached input tokens (prompt_tokens, tokenUsage, message.usage).';
COMMENT ON COLUMN cortex_buffer.event.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.event.cache_write_tokens IS 'Cache-write tokens.';
COMMENT ON COLUMN cortex_buffer.event.cache_read_tokens IS 'Cache-read tokens.';
COMMENT ON COLUMN cortex_buffer.event.request_id IS 'Claude Code requestId (lines of one API response share it).';
COMMENT ON COLUMN cortex_buffer.event.payload IS 'The whole line; NULL when jsonb cannot store it (see payload_problem).';
COMMENT ON COLUMN cortex_buffer.event.payload_problem IS 'Why payload is NULL: \u0000, a lone surrogate, nesting deeper than 1000, a number beyond numeric.';
COMMENT ON INDEX cortex_buffer.event_job_ts_idx IS 'A job''s events by time (WHERE job_id = ... AND ts > ...).';
COMMENT ON INDEX cortex_buffer.event_invocation_idx IS 'Finds a tool invocation''s start and result (byte-wise collation: ids are compared, never sorted for people).';

COMMENT ON TABLE cortex_buffer.corrupt_line IS
'One row per session-file line that is not an event: unparseable (the truncated tail among them), valid JSON that does not qualify, or longer than cortex_buffer.max_line_bytes.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.file_id IS 'The session file.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.byte_offset IS 'Where the line starts.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.line_no IS 'Line number, from 1.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.preview IS 'The first 200 characters (invalid UTF-8 shown as U+FFFD).';
COMMENT ON COLUMN cortex_buffer.corrupt_line.reason IS 'Why the line is not an event.';

-- index_sessions() returns two more columns: a new result type needs a new function.
DROP FUNCTION cortex_buffer.index_sessions(text);

CREATE  FUNCTION "index_sessions"(
	"dir" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"job_dir" TEXT,  /* Option < String > */
	"dialect" TEXT,  /* Option < String > */
	"size_bytes" bigint,  /* Option < i64 > */
	"action" TEXT,  /* String */
	"detail" TEXT,  /* Option < String > */
	"events_added" bigint,  /* i64 */
	"corrupt_added" bigint  /* i64 */
)
VOLATILE SECURITY DEFINER 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'index_sessions_and_events_wrapper';

CREATE  FUNCTION "file_integrity"(
	"path" TEXT /* & str */
) RETURNS TABLE (
	"total_lines" bigint,  /* i64 */
	"valid_lines" bigint,  /* i64 */
	"corrupt_lines" bigint,  /* i64 */
	"blank_lines" bigint,  /* i64 */
	"tail_truncated" bool,  /* bool */
	"tail_pending" bool,  /* bool */
	"corruption_ratio" double precision,  /* f64 */
	"severity" TEXT,  /* String */
	"trusted" bool,  /* bool */
	"seq_gaps" bigint,  /* i64 */
	"seq_resets" bigint,  /* i64 */
	"dialect" TEXT,  /* Option < String > */
	"seq_first_missing" bigint,  /* Option < i64 > */
	"first_ts" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_ts" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE SECURITY DEFINER
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'file_integrity_wrapper';

CREATE  FUNCTION "indexer_worker"() RETURNS TABLE (
	"worker_pid" INT,  /* Option < i32 > */
	"worker_state" TEXT,  /* String */
	"last_pass_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_pass_ms" double precision,  /* Option < f64 > */
	"passes" bigint,  /* i64 */
	"events_indexed" bigint,  /* i64 */
	"errors" bigint  /* i64 */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'indexer_worker_wrapper';

-- Functions that read server files: not for PUBLIC. pg_read_server_files is the built-in role
-- for exactly this kind of access.
REVOKE ALL ON FUNCTION cortex_buffer.index_sessions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cortex_buffer.index_sessions(text) TO pg_read_server_files;
REVOKE ALL ON FUNCTION cortex_buffer.index_now() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cortex_buffer.index_now() TO pg_read_server_files;

COMMENT ON FUNCTION cortex_buffer.index_sessions(text) IS
'One synchronous pass of the background worker''s own code over cortex_buffer.sessions_dir, or over dir (superusers only): discovers session files and indexes their new lines into event and corrupt_line (each file in a subtransaction of its own). Returns each file found, gone or skipped, with the action taken, events and corrupt lines added, and indexing notes. Granted to pg_read_server_files.';
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes the background worker for an immediate pass. Returns false, with a NOTICE saying why, when no enabled worker is running. Granted to pg_read_server_files.';

REVOKE ALL ON FUNCTION cortex_buffer.file_integrity(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cortex_buffer.file_integrity(text) TO pg_read_server_files;
COMMENT ON FUNCTION cortex_buffer.file_integrity(text) IS
'Judges a session file''s current bytes as the control plane''s scanBuffer does (lossy UTF-8, JavaScript trimming and JSON.parse, type and timestamp keys for the cortex dialects) and reports lines, truncated or pending tail, corruption ratio, severity (none, truncated_tail, corrupt_interior, unreadable), trust for recovery and seq gaps. Indexes nothing. Files outside sessions_dir: superusers only. Granted to pg_read_server_files.';
COMMENT ON FUNCTION cortex_buffer.indexer_worker() IS
'The background worker''s figures from shared memory: pid, state, last pass and its duration, passes, events indexed and files failed since the server started.';

-- What the indexer is doing: the worker's figures and totals over session_file.
CREATE VIEW cortex_buffer.indexer_status AS
SELECT w.worker_pid, w.worker_state, w.last_pass_at, w.last_pass_ms, w.passes,
       f.files_tracked, f.files_gone, f.bytes_indexed, f.bytes_pending, f.events_indexed, f.corrupt_lines,
       f.files_pending_tail, f.files_untrusted, f.files_failing, f.files_quarantined, f.last_error, f.last_error_at,
       w.errors AS worker_errors
  FROM cortex_buffer.indexer_worker() AS w,
       (SELECT count(*) FILTER (WHERE gone_at IS NULL) AS files_tracked,
               count(*) FILTER (WHERE gone_at IS NOT NULL) AS files_gone,
               coalesce(sum(indexed_offset), 0)::bigint AS bytes_indexed,
               coalesce(sum(greatest(size_bytes - indexed_offset, 0)) FILTER (WHERE gone_at IS NULL), 0)::bigint AS bytes_pending,
               coalesce(sum(valid_lines), 0)::bigint AS events_indexed,
               coalesce(sum(corrupt_lines), 0)::bigint AS corrupt_lines,
               count(*) FILTER (WHERE tail_pending AND gone_at IS NULL) AS files_pending_tail,
               count(*) FILTER (WHERE NOT trusted AND generation > 0) AS files_untrusted,
               count(*) FILTER (WHERE failures > 0) AS files_failing,
               count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS files_quarantined,
               (array_agg(last_error ORDER BY last_error_at DESC) FILTER (WHERE last_error IS NOT NULL))[1] AS last_error,
               max(last_error_at) AS last_error_at
          FROM cortex_buffer.session_file) AS f;
REVOKE ALL ON cortex_buffer.indexer_status FROM PUBLIC;
GRANT SELECT ON cortex_buffer.indexer_status TO pg_monitor, pg_read_server_files;
COMMENT ON VIEW cortex_buffer.indexer_status IS
'The indexer at a glance: worker state and last pass, files tracked, bytes indexed and pending (lag), events and corrupt lines indexed, files with a pending tail, untrusted, failing or quarantined, the latest error. Granted to pg_monitor and pg_read_server_files.';
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

-- A job's events in order, through its session files: the recovery lookup. (event has no
-- index on job_id: every event row would pay for it; a job's files are few and their events
-- are contiguous in event's primary key.)
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id = f.file_id
     WHERE f.job_id = job AND (since IS NULL OR e.ts >= since)
     ORDER BY f.session_ordinal NULLS FIRST, f.file_id, e.byte_offset
$$;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by session_ordinal, then byte offset. Uses session_file''s job index and event''s primary key. Needs SELECT on session_file and event.';
