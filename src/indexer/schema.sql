-- Session files found under cortex_buffer.sessions_dir by the discovery rule, with where
-- indexing stands and each file's integrity. Created here in its final shape; the released
-- upgrade scripts (sql/) carry the steps by which older installs reached it.
CREATE SEQUENCE cortex_buffer.session_file_seq;
CREATE TABLE cortex_buffer.session_file (
    file_id            bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.session_file_seq'::pg_catalog.regclass),
    path               text NOT NULL UNIQUE CHECK (path OPERATOR(pg_catalog.~~) '/%' OR path OPERATOR(pg_catalog.~~) 'push:/%'),
    job_dir            text NOT NULL,
    dialect            text CHECK (dialect OPERATOR(pg_catalog.=) ANY (ARRAY['cortex-spike', 'cortex-plane', 'claude-code', 'wink-log'])),
    size_bytes         bigint NOT NULL CHECK (size_bytes OPERATOR(pg_catalog.>=) 0),
    mtime              timestamptz NOT NULL,
    device             bigint NOT NULL,
    inode              bigint NOT NULL,
    first_seen         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_seen          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    gone_at            timestamptz,
    job_id             uuid,
    session_ordinal    bigint,
    indexed_offset     bigint NOT NULL DEFAULT 0 CHECK (indexed_offset OPERATOR(pg_catalog.>=) 0),
    indexed_lines      bigint NOT NULL DEFAULT 0 CHECK (indexed_lines OPERATOR(pg_catalog.>=) 0),
    generation         integer NOT NULL DEFAULT 0,
    indexed_device     bigint,
    indexed_inode      bigint,
    indexed_mtime      timestamptz,
    fingerprint_len    integer NOT NULL DEFAULT 0,
    fingerprint        bigint NOT NULL DEFAULT 0,
    indexed_dialect    text,
    tail_unterminated  boolean NOT NULL DEFAULT false,
    tail_pending       boolean NOT NULL DEFAULT false,
    total_lines        bigint NOT NULL DEFAULT 0,
    valid_lines        bigint NOT NULL DEFAULT 0,
    corrupt_lines      bigint NOT NULL DEFAULT 0,
    blank_lines        bigint NOT NULL DEFAULT 0,
    last_failed_parse  boolean NOT NULL DEFAULT false,
    last_seq           bigint,
    seq_gaps           bigint NOT NULL DEFAULT 0,
    seq_first_missing  bigint,
    seq_resets         bigint NOT NULL DEFAULT 0,
    first_ts           timestamptz,
    last_ts            timestamptz,
    session_start_seen boolean NOT NULL DEFAULT false,
    session_end_seen   boolean NOT NULL DEFAULT false,
    schema_version     text,
    foreign_job_lines  bigint NOT NULL DEFAULT 0,
    trusted            boolean NOT NULL DEFAULT true,
    indexed_at         timestamptz,
    failures           integer NOT NULL DEFAULT 0,
    last_error         text,
    last_error_at      timestamptz,
    quarantined_at     timestamptz,
    tail_state         text GENERATED ALWAYS AS (
        CASE WHEN tail_pending THEN 'pending' WHEN last_failed_parse THEN 'truncated' ELSE 'complete' END) STORED,
    corruption_ratio   double precision GENERATED ALWAYS AS (
        CASE WHEN valid_lines OPERATOR(pg_catalog.+) corrupt_lines OPERATOR(pg_catalog.=) 0 THEN 0
             ELSE (corrupt_lines OPERATOR(pg_catalog.-) last_failed_parse::pg_catalog.int4)::pg_catalog.float8
                  OPERATOR(pg_catalog./) (valid_lines OPERATOR(pg_catalog.+) corrupt_lines) END) STORED,
    crash_cut_lines    bigint NOT NULL DEFAULT 0,
    cut_pending        boolean NOT NULL DEFAULT false,
    replaced_at        timestamptz,
    replaced_device    bigint,
    replaced_inode     bigint,
    replaced_size      bigint
)
-- Every indexing of a file updates its row, and no updated column is indexed: room left on
-- each page lets those updates stay on the page (HOT), with no index entry per update.
WITH (fillfactor = 50);
ALTER SEQUENCE cortex_buffer.session_file_seq OWNED BY cortex_buffer.session_file.file_id;
CREATE INDEX session_file_job_dir_idx ON cortex_buffer.session_file (job_dir);
CREATE INDEX session_file_name_idx ON cortex_buffer.session_file (pg_catalog."right"(path, 43));
-- A job's files (and through them its events, in order): the job is the file's directory.
CREATE INDEX session_file_job_order_idx ON cortex_buffer.session_file (job_id, session_ordinal);

-- Transcripts: no PUBLIC access (the schema's default), dumped with the data.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file_seq', '');

COMMENT ON SEQUENCE cortex_buffer.session_file_seq IS 'Ids of session_file rows.';
COMMENT ON TABLE cortex_buffer.session_file IS
'One row per session file the discovery rule selects under cortex_buffer.sessions_dir (kept after the file is deleted, with gone_at set). Written by the background worker and index_sessions().';
COMMENT ON COLUMN cortex_buffer.session_file.file_id IS 'Surrogate key referenced by the event tables.';
COMMENT ON COLUMN cortex_buffer.session_file.path IS 'Absolute path: the canonical sessions_dir joined with the components below it; for a pushed file (append_session_bytes), push:/<relpath>, with #n after the first file pushed under that relpath.';
COMMENT ON COLUMN cortex_buffer.session_file.job_dir IS 'First directory below sessions_dir: the job id (cortex dialects) or the Claude Code project directory.';
COMMENT ON COLUMN cortex_buffer.session_file.dialect IS 'cortex-spike, cortex-plane, claude-code or wink-log, from the file''s first parseable line, else its name; NULL until either tells.';
COMMENT ON COLUMN cortex_buffer.session_file.size_bytes IS 'File size at the last pass that recorded a change.';
COMMENT ON COLUMN cortex_buffer.session_file.mtime IS 'File modification time at the last pass that recorded a change.';
COMMENT ON COLUMN cortex_buffer.session_file.crash_cut_lines IS 'Corrupt lines that are crash artefacts: a line cut by a writer''s crash and directly followed by a new writer (its first line on the same line, a sequence that starts again, or a SESSION_START). Counted in corrupt_lines, as scanBuffer counts them; recovery does not hold them against the file''s trust.';
COMMENT ON COLUMN cortex_buffer.session_file.replaced_at IS 'When the index last dropped this path''s indexed bytes because they were no longer in the file (replaced by another file, shrunk, its first bytes rewritten: a rotation by copytruncate or by rename, a deletion and a new file), so recovery knows what it can no longer read. NULL if never.';
COMMENT ON COLUMN cortex_buffer.session_file.replaced_device IS 'The dropped file''s device (replaced_at): a file the index still holds under another name with this identity holds those bytes.';
COMMENT ON COLUMN cortex_buffer.session_file.replaced_inode IS 'The dropped file''s inode (replaced_at).';
COMMENT ON COLUMN cortex_buffer.session_file.replaced_size IS 'How many bytes of it the index had read when it dropped them (replaced_at).';
COMMENT ON COLUMN cortex_buffer.session_file.cut_pending IS 'The last non-blank line indexed failed to parse and the next event will tell whether it was a crash cut.';
COMMENT ON COLUMN cortex_buffer.session_file.device IS 'st_dev of the file (unsigned 64-bit value stored as its bigint bit pattern).';
COMMENT ON COLUMN cortex_buffer.session_file.inode IS 'st_ino of the file (unsigned 64-bit value stored as its bigint bit pattern); with device, the file''s identity.';
COMMENT ON COLUMN cortex_buffer.session_file.first_seen IS 'When a pass first recorded this path.';
COMMENT ON COLUMN cortex_buffer.session_file.last_seen IS 'Last pass that saw the file change (new, grown, replaced or back). An unchanged file''s row is never rewritten, so that idle work does not grow with the files; indexer_status.last_rescan_at says when the worker last walked them all.';
COMMENT ON COLUMN cortex_buffer.session_file.gone_at IS 'When a pass found the file deleted; NULL while it exists. Rows are kept until retention removes them.';
COMMENT ON COLUMN cortex_buffer.session_file.job_id IS 'The job: job_dir when it is a UUID (the cortex dialects'' layout, <sessions_dir>/<job_id>/<file>). The job a file''s events are taken for; a line naming another job is counted in foreign_job_lines instead.';
COMMENT ON COLUMN cortex_buffer.session_file.session_ordinal IS 'Order of the file among its job''s sessions, compared as a number: NNN of session-NNN.jsonl, or the start time (Unix seconds) of session_<YYYYMMDDTHHMMSSZ>_<pod>.jsonl (session-1000 comes after session-999).';
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
COMMENT ON COLUMN cortex_buffer.session_file.seq_resets IS 'Drops or repeats in seq (a new writer restarted the count; a writer never repeats one).';
COMMENT ON COLUMN cortex_buffer.session_file.first_ts IS 'Earliest event timestamp.';
COMMENT ON COLUMN cortex_buffer.session_file.last_ts IS 'Latest event timestamp.';
COMMENT ON COLUMN cortex_buffer.session_file.session_start_seen IS 'A SESSION_START event was indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.session_end_seen IS 'A SESSION_END event was indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.schema_version IS 'The first schema version a line gave (buffer_schema_version, version).';
COMMENT ON COLUMN cortex_buffer.session_file.foreign_job_lines IS 'Events whose own job id is not this file''s job directory''s: never taken as the directory''s job (an agent that can write into another job''s directory cannot speak for that job).';
COMMENT ON COLUMN cortex_buffer.session_file.trusted IS 'Trusted for recovery when last indexed: corruption_ratio <= 0.10 and the file is readable.';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_at IS 'When the file was last indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.failures IS 'Consecutive failed indexing attempts (committed separately, so a file cannot crash-loop the worker).';
COMMENT ON COLUMN cortex_buffer.session_file.last_error IS 'Why the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.last_error_at IS 'When the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.quarantined_at IS 'Set after 5 failures in a row: the file is left alone until replaced, or until an operator clears this column and failures.';
COMMENT ON COLUMN cortex_buffer.session_file.tail_state IS 'complete, pending (waiting for a newline or the settle period) or truncated (the last non-blank line does not parse).';
COMMENT ON COLUMN cortex_buffer.session_file.corruption_ratio IS 'Corrupt lines (the truncated tail not counted) over non-blank lines.';
COMMENT ON INDEX cortex_buffer.session_file_job_dir_idx IS 'Looks up a job''s session files.';
COMMENT ON INDEX cortex_buffer.session_file_name_idx IS 'Finds a Claude Code transcript by its session id (<project>/<id>.jsonl: the last 43 characters of its path).';
COMMENT ON INDEX cortex_buffer.session_file_job_order_idx IS 'A job''s session files in order (the latest first with ORDER BY session_ordinal DESC); with event''s primary key, a job''s events by file and offset (job_events()).';

-- Event indexing: the events and corrupt lines themselves.

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
-- No (job_id, ts) index (0.12.0 had one): every read of the extension finds a job's events
-- through session_file's job index and this primary key (job_events(job, since)), and that
-- index cost a seventh of the time of every ingest (one more insertion per line, page splits).
CREATE INDEX event_invocation_idx ON cortex_buffer.event (invocation_id) WHERE invocation_id IS NOT NULL;
-- Recovery's markers: a file's last checkpoint marker and first CHECKPOINT_LOADED in one probe
-- each, however long the file (only these lines have entries).
CREATE INDEX event_marker_idx ON cortex_buffer.event (file_id, byte_offset)
    WHERE type OPERATOR(pg_catalog.=) ANY (ARRAY['CHECKPOINT_WRITTEN', 'CHECKPOINT', 'CHECKPOINT_LOADED']);

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
CREATE FUNCTION cortex_buffer.session_file_delete_rows() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
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
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.corrupt_line', '');


COMMENT ON TABLE cortex_buffer.event IS
'One row per session-file line that is an event (cortex dialects: an object with type and timestamp; Claude Code and wink: an object), with dialect-normalised columns and the line as jsonb. Written by the indexer exactly once per (file_id, byte_offset).';
COMMENT ON COLUMN cortex_buffer.event.file_id IS 'The session file (session_file.file_id; deleting that row deletes this one).';
COMMENT ON COLUMN cortex_buffer.event.byte_offset IS 'Where the line starts in the file (events are keyed by offset: a writer restart reuses seq numbers).';
COMMENT ON COLUMN cortex_buffer.event.line_no IS 'Line number in the file, from 1.';
COMMENT ON COLUMN cortex_buffer.event.type IS 'Event type as written (type, or __type__ for wink logs).';
COMMENT ON COLUMN cortex_buffer.event.ts IS 'The event''s timestamp (timestamp or __ts__), if it is an ISO 8601 time.';
COMMENT ON COLUMN cortex_buffer.event.job_id IS 'The job the line itself names (job_id / jobId), never taken from its directory; see session_file.job_id and foreign_job_lines.';
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
COMMENT ON COLUMN cortex_buffer.event.payload IS 'The whole line as jsonb; NULL when it is not stored (see payload_problem).';
COMMENT ON COLUMN cortex_buffer.event.payload_problem IS 'Why payload is NULL, or how it differs from the line''s bytes: jsonb cannot store it (\u0000, a lone surrogate, nesting deeper than 1000, a number beyond numeric), converting it would take more than 64 MiB, or invalid UTF-8 replaced by U+FFFD. Reasons are joined with "; ".';
COMMENT ON INDEX cortex_buffer.event_marker_idx IS 'Checkpoint markers and loads by file and offset: recovery_plan finds a file''s last marker and first CHECKPOINT_LOADED with one probe each.';
COMMENT ON INDEX cortex_buffer.event_invocation_idx IS 'Finds a tool invocation''s start and result (byte-wise collation: ids are compared, never sorted for people).';

COMMENT ON TABLE cortex_buffer.corrupt_line IS
'One row per session-file line that is not an event: unparseable (the truncated tail among them), valid JSON that does not qualify, or longer than cortex_buffer.max_line_bytes and not an event whose reduction fits (a longer line that is an event is an event, its payload the reduction).';
COMMENT ON COLUMN cortex_buffer.corrupt_line.file_id IS 'The session file.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.byte_offset IS 'Where the line starts.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.line_no IS 'Line number, from 1.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.preview IS 'The first 200 characters (invalid UTF-8 shown as U+FFFD).';
COMMENT ON COLUMN cortex_buffer.corrupt_line.reason IS 'Why the line is not an event.';
