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
