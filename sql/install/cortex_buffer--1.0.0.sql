-- cortex_buffer's install script as `cargo pgrx schema` generates it, blocks sorted and
-- source line tags dropped (scripts/schema.sh): review changes to the SQL surface here.

/* <begin connected objects> */
-- Every checkpoint write_checkpoint accepted (newest cortex_buffer.checkpoint_history_keep per
-- job): the fallback when the job row's checkpoint fails its CRC, and the record of identities.
CREATE SEQUENCE cortex_buffer.checkpoint_history_seq;
CREATE TABLE cortex_buffer.checkpoint_history (
    history_id    bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.checkpoint_history_seq'::pg_catalog.regclass),
    job_id        uuid NOT NULL,
    checkpoint_id uuid NOT NULL,
    step_index    integer NOT NULL CHECK (step_index OPERATOR(pg_catalog.>=) 0),
    doc           jsonb NOT NULL,
    crc           bigint NOT NULL CHECK (crc OPERATOR(pg_catalog.>=) 0 AND crc OPERATOR(pg_catalog.<=) 4294967295),
    size_bytes    integer NOT NULL CHECK (size_bytes OPERATOR(pg_catalog.>=) 0),
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
ALTER SEQUENCE cortex_buffer.checkpoint_history_seq OWNED BY cortex_buffer.checkpoint_history.history_id;
CREATE INDEX checkpoint_history_job_idx ON cortex_buffer.checkpoint_history (job_id, history_id DESC);
-- A document large enough to compress is compressed once, into this table, and the job row
-- copies the compressed value (src/checkpoint/store.rs). With lz4 where the server was built
-- with it: pglz, PostgreSQL's default, costs about as much as everything else a write does (see
-- bench/checkpoint.sh). A value keeps the method it was compressed with wherever it is copied.
DO $lz4$
BEGIN
    IF 'lz4' OPERATOR(pg_catalog.=) ANY (SELECT pg_catalog.unnest(s.enumvals) FROM pg_catalog.pg_settings s
                                          WHERE s.name OPERATOR(pg_catalog.=) 'default_toast_compression') THEN
        ALTER TABLE cortex_buffer.checkpoint_history ALTER COLUMN doc SET COMPRESSION lz4;
    END IF;
END
$lz4$;
-- Checkpoints are data: pg_dump keeps them (and the sequence, so restored ids do not collide).
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_history', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_history_seq', '');

COMMENT ON SEQUENCE cortex_buffer.checkpoint_history_seq IS 'Ids of checkpoint_history rows (newer rows have larger ids).';
COMMENT ON TABLE cortex_buffer.checkpoint_history IS
'Checkpoints accepted by write_checkpoint, newest cortex_buffer.checkpoint_history_keep per job. read_checkpoint falls back to the newest entry that passes its CRC.';
COMMENT ON INDEX cortex_buffer.checkpoint_history_job_idx IS 'A job''s history, newest first.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.history_id IS 'Write order (larger is newer).';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.job_id IS 'The job (in the table cortex_buffer.job_table named at write time).';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.checkpoint_id IS 'The checkpoint''s id: the document''s own checkpoint_id, else a generated UUIDv7.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.step_index IS 'The step the checkpoint completes.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.doc IS 'The checkpoint document as written.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.crc IS 'CRC-32 of canonical_json(doc), unsigned.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.size_bytes IS 'Bytes of canonical JSON.';
COMMENT ON COLUMN cortex_buffer.checkpoint_history.created_at IS 'Time of the writing transaction.';

-- Every checkpoint's high-water mark: the job's session files (identity and size) at the
-- instant the checkpoint was stored. The shipped writer appends synchronously, so every byte
-- after these sizes was written after the checkpoint: recovery anchors marker-less files here
-- without comparing clocks. Recorded by write_checkpoint, and by the checkpoint_marked trigger
-- for checkpoints written by a plain UPDATE of the job table.
CREATE SEQUENCE cortex_buffer.checkpoint_mark_seq;
CREATE TABLE cortex_buffer.checkpoint_mark (
    mark_id       bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.checkpoint_mark_seq'::pg_catalog.regclass),
    job_id        uuid NOT NULL,
    crc           bigint CHECK (crc OPERATOR(pg_catalog.>=) 0 AND crc OPERATOR(pg_catalog.<=) 4294967295),
    checkpoint_id uuid,
    recorded_at   timestamptz NOT NULL,
    source        text NOT NULL CHECK (source OPERATOR(pg_catalog.=) ANY (ARRAY['write_checkpoint', 'trigger', 'resume'])),
    dir_visible   boolean NOT NULL,
    files         jsonb NOT NULL
);
ALTER SEQUENCE cortex_buffer.checkpoint_mark_seq OWNED BY cortex_buffer.checkpoint_mark.mark_id;
CREATE INDEX checkpoint_mark_job_idx ON cortex_buffer.checkpoint_mark (job_id, crc, mark_id DESC);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_mark', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_mark_seq', '');

COMMENT ON SEQUENCE cortex_buffer.checkpoint_mark_seq IS 'Ids of checkpoint_mark rows (newer rows have larger ids).';
COMMENT ON TABLE cortex_buffer.checkpoint_mark IS
'Each stored checkpoint''s high-water mark: the job''s session files, their sizes and fingerprints at that instant; and each pod''s resume (the checkpoint its recovery_plan gave it, and the files then). The newest cortex_buffer.checkpoint_history_keep of each kind per job. recovery_plan places the files after a checkpoint by its mark, and tells from the marks and resumes which checkpoint each writer keyed its calls under.';
COMMENT ON INDEX cortex_buffer.checkpoint_mark_job_idx IS 'A job''s marks, by checkpoint (CRC), newest first.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.mark_id IS 'Record order (larger is newer).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.crc IS 'CRC-32 of the checkpoint''s canonical JSON, unsigned: the checkpoint the mark belongs to, or that the resuming pod was given (NULL: none).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.checkpoint_id IS 'The checkpoint''s id when known (write_checkpoint''s, or the document''s own).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.recorded_at IS 'When the files were looked at (the database server''s clock).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.source IS 'write_checkpoint (the pod stored it: its next calls are keyed under it), trigger (a plain UPDATE of the job table''s checkpoint column), or resume (a pod''s recovery_plan, with its job token: the checkpoint it resumed from).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.dir_visible IS 'Whether cortex_buffer.sessions_dir and the job''s directory in it could be read (a directory that did not exist yet had no files); a mark without it anchors nothing but the time.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.files IS 'The job''s session files then: [{"file": path relative to the job directory, "device", "inode", "size", "pushed_by" (a pushed file''s source), "head_len", "head_crc" (CRC-32 of its first bytes), "tail_len", "tail_crc" (of the bytes just before size), "line_start" (where the line holding the mark began; size when the mark fell between lines; NULL when it began more than 8 MiB before)}].';
/* </end connected objects> */

/* <begin connected objects> */
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
/* </end connected objects> */

/* <begin connected objects> */
-- The default job table: the control plane's job table (its migrations 001, 005, 007, 008 and
-- 025) in the cortex_buffer schema, with the same transition rules. A superuser can bind the
-- functions to another table with cortex_buffer.job_table instead.
CREATE TYPE cortex_buffer.job_status AS ENUM (
    'PENDING', 'SCHEDULED', 'RUNNING', 'WAITING_FOR_APPROVAL', 'COMPLETED',
    'FAILED', 'TIMED_OUT', 'RETRYING', 'DEAD_LETTER'
);
COMMENT ON TYPE cortex_buffer.job_status IS 'The nine job states of the control plane''s job state machine.';

CREATE TABLE cortex_buffer.job (
    id                  uuid PRIMARY KEY DEFAULT pg_catalog.gen_random_uuid(),
    agent_id            uuid NOT NULL,
    session_id          uuid,
    status              cortex_buffer.job_status NOT NULL DEFAULT 'PENDING',
    priority            integer NOT NULL DEFAULT 0,
    payload             jsonb NOT NULL DEFAULT '{}',
    result              jsonb,
    checkpoint          jsonb,
    checkpoint_crc      integer,
    error               jsonb,
    attempt             integer NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL DEFAULT 3,
    timeout_seconds     integer NOT NULL DEFAULT 300,
    created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at          timestamptz,
    completed_at        timestamptz,
    heartbeat_at        timestamptz,
    approval_expires_at timestamptz,
    tokens_in           integer NOT NULL DEFAULT 0,
    tokens_out          integer NOT NULL DEFAULT 0,
    cost_usd            numeric(12, 6) NOT NULL DEFAULT 0,
    tool_call_count     integer NOT NULL DEFAULT 0,
    llm_call_count      integer NOT NULL DEFAULT 0,
    parent_job_id       uuid REFERENCES cortex_buffer.job (id) ON DELETE SET NULL,
    delegation_depth    integer NOT NULL DEFAULT 0
);
CREATE INDEX job_agent_idx ON cortex_buffer.job (agent_id);
-- Jobs are data, not configuration: pg_dump must keep them.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job', '');

CREATE FUNCTION cortex_buffer.job_set_updated_at() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER job_set_updated_at BEFORE UPDATE ON cortex_buffer.job
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.job_set_updated_at();

-- Exactly the control plane's validate_job_transition rules (and its message and SQLSTATE
-- P0001), so code written against one table behaves the same on the other.
CREATE FUNCTION cortex_buffer.job_validate_transition() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    IF NOT (
        (OLD.status = 'PENDING'              AND NEW.status IN ('SCHEDULED', 'FAILED')) OR
        (OLD.status = 'SCHEDULED'            AND NEW.status IN ('RUNNING', 'FAILED')) OR
        (OLD.status = 'RUNNING'              AND NEW.status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'WAITING_FOR_APPROVAL')) OR
        (OLD.status = 'WAITING_FOR_APPROVAL' AND NEW.status IN ('RUNNING', 'FAILED', 'TIMED_OUT')) OR
        (OLD.status = 'FAILED'               AND NEW.status IN ('RETRYING', 'DEAD_LETTER')) OR
        (OLD.status = 'TIMED_OUT'            AND NEW.status IN ('RETRYING', 'DEAD_LETTER')) OR
        (OLD.status = 'RETRYING'             AND NEW.status IN ('SCHEDULED', 'DEAD_LETTER'))
    ) THEN
        RAISE EXCEPTION 'Invalid job transition: % → %', OLD.status, NEW.status
            USING HINT = 'Allowed: PENDING→SCHEDULED|FAILED, SCHEDULED→RUNNING|FAILED, RUNNING→WAITING_FOR_APPROVAL|COMPLETED|FAILED|TIMED_OUT, WAITING_FOR_APPROVAL→RUNNING|FAILED|TIMED_OUT, FAILED|TIMED_OUT→RETRYING|DEAD_LETTER, RETRYING→SCHEDULED|DEAD_LETTER.';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER job_validate_transition BEFORE UPDATE OF status ON cortex_buffer.job
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.job_validate_transition();

COMMENT ON FUNCTION cortex_buffer.job_set_updated_at() IS 'Trigger function: keeps job.updated_at at the time of the last UPDATE.';
COMMENT ON FUNCTION cortex_buffer.job_validate_transition() IS 'Trigger function: enforces the control plane''s job state transitions.';
COMMENT ON TABLE cortex_buffer.job IS
'The default job table (cortex_buffer.job_table): the control plane''s job columns and transition rules. Dumped by pg_dump.';
COMMENT ON INDEX cortex_buffer.job_agent_idx IS 'Jobs of an agent (circuit breaker, budgets).';
COMMENT ON COLUMN cortex_buffer.job.id IS 'Job id.';
COMMENT ON COLUMN cortex_buffer.job.agent_id IS 'The agent running the job.';
COMMENT ON COLUMN cortex_buffer.job.session_id IS 'The user session the job belongs to, if any.';
COMMENT ON COLUMN cortex_buffer.job.status IS 'State machine state; transitions are checked by job_validate_transition.';
COMMENT ON COLUMN cortex_buffer.job.priority IS 'Queue priority (higher first).';
COMMENT ON COLUMN cortex_buffer.job.payload IS 'The job''s input.';
COMMENT ON COLUMN cortex_buffer.job.result IS 'The job''s output once completed.';
COMMENT ON COLUMN cortex_buffer.job.checkpoint IS 'Current checkpoint document (written by write_checkpoint or the control plane).';
COMMENT ON COLUMN cortex_buffer.job.checkpoint_crc IS 'CRC-32 of the checkpoint''s canonical JSON, stored as its signed 32-bit bit pattern.';
COMMENT ON COLUMN cortex_buffer.job.error IS 'Last error, as JSON.';
COMMENT ON COLUMN cortex_buffer.job.attempt IS 'Attempts started; incremented by the dispatcher at SCHEDULED→RUNNING.';
COMMENT ON COLUMN cortex_buffer.job.max_attempts IS 'Hard limit on attempts.';
COMMENT ON COLUMN cortex_buffer.job.timeout_seconds IS 'Per-attempt timeout.';
COMMENT ON COLUMN cortex_buffer.job.created_at IS 'When the job was created.';
COMMENT ON COLUMN cortex_buffer.job.updated_at IS 'Last UPDATE of the row (maintained by job_set_updated_at).';
COMMENT ON COLUMN cortex_buffer.job.started_at IS 'When the current attempt started running.';
COMMENT ON COLUMN cortex_buffer.job.completed_at IS 'When the job reached a terminal state.';
COMMENT ON COLUMN cortex_buffer.job.heartbeat_at IS 'Last heartbeat of the process running the job.';
COMMENT ON COLUMN cortex_buffer.job.approval_expires_at IS 'Deadline of a pending approval.';
COMMENT ON COLUMN cortex_buffer.job.tokens_in IS 'Input tokens used so far.';
COMMENT ON COLUMN cortex_buffer.job.tokens_out IS 'Output tokens used so far.';
COMMENT ON COLUMN cortex_buffer.job.cost_usd IS 'Cost so far, rounded to 6 decimals (exact totals are kept separately).';
COMMENT ON COLUMN cortex_buffer.job.tool_call_count IS 'Tool calls so far.';
COMMENT ON COLUMN cortex_buffer.job.llm_call_count IS 'LLM calls so far.';
COMMENT ON COLUMN cortex_buffer.job.parent_job_id IS 'The job that delegated this one.';
COMMENT ON COLUMN cortex_buffer.job.delegation_depth IS 'Depth in the delegation tree (0 for top-level jobs).';

-- The secret job tokens are MACs under (job_token()). One row, made on first use; readable by
-- the definer role alone. Dumped, so that a restore keeps the tokens in flight valid.
CREATE TABLE cortex_buffer.job_token_key (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret     bytea NOT NULL CHECK (pg_catalog.octet_length(secret) OPERATOR(pg_catalog.>=) 32),
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job_token_key', '');
COMMENT ON TABLE cortex_buffer.job_token_key IS
'The installation''s job-token secret (one row, made by the first job_token() call): job tokens are HMAC-SHA256 under it. Only cortex_buffer_definer reads it. Deleting the row (a superuser) revokes every token issued; the next job_token() makes a new secret.';
COMMENT ON COLUMN cortex_buffer.job_token_key.one IS 'Always true: the table holds one row.';
COMMENT ON COLUMN cortex_buffer.job_token_key.secret IS '32 bytes from the server''s strong random source.';
COMMENT ON COLUMN cortex_buffer.job_token_key.created_at IS 'When the secret was made.';
/* </end connected objects> */

/* <begin connected objects> */
-- bootstrap
-- Runs first in every fresh install of cortex_buffer.
DO $$
DECLARE
    owner_name name;
    leftovers bigint;
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION 'cortex_buffer requires a UTF8 database; this one is %', pg_catalog.getdatabaseencoding()
            USING ERRCODE = '22021',
                  HINT = 'Create the database with ENCODING ''UTF8'' (checkpoint CRCs and session files are UTF-8).';
    END IF;

    -- The control file names the schema, so CREATE EXTENSION adopts a schema that already
    -- exists. One somebody else created first could hold functions (a cortex_buffer.nextval(text),
    -- say) that the extension's objects would bind to and run with its rights: install only into
    -- a schema the installing role owns and that holds nothing yet.
    SELECT r.rolname INTO owner_name
      FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE n.nspname OPERATOR(pg_catalog.=) 'cortex_buffer';
    IF owner_name OPERATOR(pg_catalog.<>) CURRENT_USER THEN
        RAISE EXCEPTION 'schema cortex_buffer already exists and belongs to role %', owner_name
            USING ERRCODE = '42P06',
                  HINT = 'Drop the schema (or have its owner drop it) and run CREATE EXTENSION cortex_buffer again: the extension creates its schema itself.';
    END IF;
    SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
         -- (types of their own: not a table's row type, not an array type)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_type
                                  WHERE typnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
                                    AND typrelid OPERATOR(pg_catalog.=) 0 AND typcategory OPERATOR(pg_catalog.<>) 'A')
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_operator WHERE oprnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
      INTO leftovers;
    IF leftovers OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'schema cortex_buffer already holds % object(s)', leftovers
            USING ERRCODE = '42P06',
                  HINT = 'Install into a new schema: drop cortex_buffer (after moving anything you need out of it) and run CREATE EXTENSION cortex_buffer again.';
    END IF;
END
$$;

-- The roles (cluster-wide: created only when missing, never dropped; see
-- docs/operations.md#privileges). cortex_buffer_definer is the role the extension's own writes run as: it must
-- not be able to log in, be a superuser, or have members.
DO $$
DECLARE
    r record;
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['cortex_buffer_definer', 'cortex_buffer_agent_call', 'cortex_buffer_agent',
                                     'cortex_buffer_control_plane', 'cortex_buffer_operator', 'cortex_buffer_pusher'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) role_name) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', role_name);
        END IF;
        SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication INTO r
          FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) role_name;
        IF r.rolcanlogin OR r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication THEN
            RAISE EXCEPTION 'role % exists with LOGIN or other attributes cortex_buffer''s roles must not have', role_name
                USING ERRCODE = '42501',
                      HINT = pg_catalog.format('cortex_buffer''s roles are privilege containers: ALTER ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION, then install again; grant the role to login roles instead.', role_name);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
                WHERE roleid OPERATOR(pg_catalog.=) 'cortex_buffer_definer'::pg_catalog.regrole) THEN
        RAISE EXCEPTION 'role cortex_buffer_definer has members'
            USING ERRCODE = '42501',
                  HINT = 'Nobody may act as cortex_buffer_definer: REVOKE cortex_buffer_definer FROM each member, then install again.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
                WHERE roleid OPERATOR(pg_catalog.=) 'cortex_buffer_agent_call'::pg_catalog.regrole) THEN
        RAISE EXCEPTION 'role cortex_buffer_agent_call has members'
            USING ERRCODE = '42501',
                  HINT = 'Nobody may act as cortex_buffer_agent_call: REVOKE cortex_buffer_agent_call FROM each member, then install again.';
    END IF;
END
$$;

COMMENT ON SCHEMA cortex_buffer IS
'cortex_buffer: CRC-validated checkpoints, job liveness, spend accounting and indexed agent session buffers.';
-- Anyone may see the schema; tables and functions carry their own privileges.
GRANT USAGE ON SCHEMA cortex_buffer TO PUBLIC;
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::call_idempotency_key
CREATE  FUNCTION "call_idempotency_key"(
	"job_id" uuid, /* Option < Uuid > */
	"checkpoint" jsonb, /* Option < RawJsonb > */
	"call_ordinal" INT, /* Option < i32 > */
	"tool_name" TEXT, /* Option < & str > */
	"tool_input" jsonb /* Option < RawJsonb > */
) RETURNS TEXT /* String */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'call_idempotency_key_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::canonical_json
CREATE  FUNCTION "canonical_json"(
	"doc" jsonb /* RawJsonb */
) RETURNS TEXT /* String */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'canonical_json_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::checkpoint_crc
CREATE  FUNCTION "checkpoint_crc"(
	"doc" jsonb /* RawJsonb */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'checkpoint_crc_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::checkpoint_marked
CREATE FUNCTION "checkpoint_marked"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'checkpoint_marked_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::read_checkpoint
CREATE  FUNCTION "read_checkpoint"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"source" TEXT,  /* String */
	"checkpoint_id" uuid,  /* Option < Uuid > */
	"step_index" INT,  /* Option < i32 > */
	"doc" jsonb,  /* Option < RawJsonb > */
	"crc" bigint,  /* Option < i64 > */
	"crc_ok" bool,  /* Option < bool > */
	"detail" TEXT  /* Option < String > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'read_checkpoint_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::verify_checkpoints
CREATE  FUNCTION "verify_checkpoints"() RETURNS TABLE (
	"job_id" uuid,  /* Uuid */
	"source" TEXT,  /* String */
	"history_id" bigint,  /* Option < i64 > */
	"checkpoint_id" uuid,  /* Option < Uuid > */
	"step_index" INT,  /* Option < i32 > */
	"stored_crc" bigint,  /* Option < i64 > */
	"computed_crc" bigint,  /* Option < i64 > */
	"detail" TEXT  /* String */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'verify_checkpoints_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::checkpoint::sql::write_checkpoint
CREATE  FUNCTION "write_checkpoint"(
	"job_id" uuid, /* Option < Uuid > */
	"doc" jsonb, /* Option < RawJsonb > */
	"expected_checkpoint_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"allow_step_regression" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"checkpoint_id" uuid,  /* Uuid */
	"step_index" INT,  /* i32 */
	"crc" bigint,  /* i64 */
	"size_bytes" INT  /* i32 */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'write_checkpoint_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::indexer::sql::clear_quarantine
CREATE  FUNCTION "clear_quarantine"(
	"path" TEXT /* & str */
) RETURNS bool /* bool */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'clear_quarantine_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::indexer::sql::index_sessions
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
VOLATILE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'index_sessions_and_events_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::indexer::status_sql::file_integrity
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
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'file_integrity_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::job::sql::authorize_job
CREATE  FUNCTION "authorize_job"(
	"job_id" uuid /* pgrx :: Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'authorize_job_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::job::sql::check_binding
CREATE  FUNCTION "check_binding"() RETURNS TABLE (
	"item" TEXT,  /* String */
	"ok" bool,  /* bool */
	"detail" TEXT,  /* String */
	"fix" TEXT  /* Option < String > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'check_binding_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::job::sql::install_checkpoint_trigger
CREATE  FUNCTION "install_checkpoint_trigger"() RETURNS TEXT /* String */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'install_checkpoint_trigger_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::job::sql::job_token
CREATE  FUNCTION "job_token"(
	"job_id" uuid /* pgrx :: Uuid */
) RETURNS TEXT /* String */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'job_token_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::admit_job
CREATE  FUNCTION "admit_job"(
	"agent_id" uuid, /* Uuid */
	"job_id" uuid /* Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'admit_job_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::circuit_state
CREATE  FUNCTION "circuit_state"(
	"agent_id" uuid /* Uuid */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"failures_in_window" INT,  /* i32 */
	"open_until" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'circuit_state_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::heartbeat
CREATE  FUNCTION "heartbeat"(
	"job_id" uuid /* Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'heartbeat_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::idle_paused_jobs
CREATE  FUNCTION "idle_paused_jobs"(
	"idle_after" interval DEFAULT '30 minutes' /* Option < Interval > */
) RETURNS TABLE (
	"job_id" uuid,  /* Uuid */
	"agent_id" uuid,  /* Uuid */
	"waiting_since" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'idle_paused_jobs_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::reap_zombies
CREATE  FUNCTION "reap_zombies"(
	"stale_after" interval DEFAULT '5 minutes', /* Option < Interval > */
	"max_jobs" INT DEFAULT 1000 /* Option < i32 > */
) RETURNS TABLE (
	"job_id" uuid,  /* Uuid */
	"agent_id" uuid,  /* Uuid */
	"attempt" INT,  /* i32 */
	"new_status" TEXT,  /* String */
	"retry_after" interval,  /* Option < Interval > */
	"last_heartbeat" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reap_zombies_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::reaper_index_sql
CREATE  FUNCTION "reaper_index_sql"() RETURNS TEXT /* String */
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reaper_index_sql_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::record_crash
CREATE  FUNCTION "record_crash"(
	"job_id" uuid, /* Option < Uuid > */
	"exit_code" INT, /* Option < i32 > */
	"error_message" TEXT, /* Option < String > */
	"lifecycle_state" TEXT DEFAULT NULL, /* Option < String > */
	"step_index" INT DEFAULT NULL, /* Option < i32 > */
	"last_tool" TEXT DEFAULT NULL, /* Option < String > */
	"tokens" jsonb DEFAULT NULL /* Option < RawJsonb > */
) RETURNS bigint /* i64 */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_crash_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::record_outcome
CREATE  FUNCTION "record_outcome"(
	"agent_id" uuid, /* Uuid */
	"job_id" uuid, /* Uuid */
	"success" bool /* bool */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"failures_in_window" INT,  /* i32 */
	"open_until" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_outcome_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::liveness::sql::retry_decision
CREATE  FUNCTION "retry_decision"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"retry" bool,  /* bool */
	"reason" TEXT,  /* String */
	"strategy" TEXT,  /* String */
	"delay" interval  /* Option < Interval > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'retry_decision_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::confirm::await_sources
CREATE  FUNCTION "await_sources"(
	"job_id" uuid, /* Option < Uuid > */
	"timeout" interval DEFAULT '5 seconds' /* Option < pgrx :: datum :: Interval > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_sources_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::confirm::confirm_pushed
CREATE  FUNCTION "confirm_pushed"(
	"source" TEXT, /* Option < & str > */
	"as_of" interval DEFAULT '0 seconds', /* Option < pgrx :: datum :: Interval > */
	"source_token" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS timestamp with time zone /* Option < TimestampWithTimeZone > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'confirm_pushed_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sources::drop_push_source
CREATE  FUNCTION "drop_push_source"(
	"source" TEXT /* & str */
) RETURNS bool /* bool */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'drop_push_source_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sources::push_source_token
CREATE  FUNCTION "push_source_token"(
	"source" TEXT /* & str */
) RETURNS TEXT /* String */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'push_source_token_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sources::register_push_source
CREATE  FUNCTION "register_push_source"(
	"source" TEXT, /* Option < & str > */
	"job_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"all_jobs" bool DEFAULT NULL, /* Option < bool > */
	"login" TEXT DEFAULT NULL, /* Option < & str > */
	"note" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* String */
VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'register_push_source_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sources::revoke_push_source_token
CREATE  FUNCTION "revoke_push_source_token"(
	"source" TEXT /* & str */
) RETURNS TEXT /* String */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'revoke_push_source_token_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sql::append_session_batch
-- Skipped due to `#[pgrx(sql = false)]`
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sql::append_session_bytes
-- Skipped due to `#[pgrx(sql = false)]`
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sql::await_pushed
CREATE  FUNCTION "await_pushed"(
	"job_id" uuid, /* Option < Uuid > */
	"relpath" TEXT, /* Option < & str > */
	"size" bigint, /* Option < i64 > */
	"timeout" interval DEFAULT '5 seconds' /* Option < pgrx :: datum :: Interval > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_pushed_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::push::sql::pushed_offsets
CREATE  FUNCTION "pushed_offsets"(
	"source" TEXT, /* Option < & str > */
	"source_token" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"relpath" TEXT,  /* String */
	"file_identity" TEXT,  /* String */
	"committed_offset" bigint,  /* i64 */
	"held_bytes" bigint,  /* i64 */
	"head_len" bigint,  /* i64 */
	"head_crc" bigint,  /* i64 */
	"reported_size" bigint,  /* Option < i64 > */
	"pushed_at" timestamp with time zone  /* Option < pgrx :: datum :: TimestampWithTimeZone > */
)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pushed_offsets_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::agent_state
CREATE  FUNCTION "agent_state"(
	"path" TEXT /* & str */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"confidence" TEXT,  /* String */
	"decided_by_line" bigint,  /* Option < i64 > */
	"decided_by_offset" bigint,  /* Option < i64 > */
	"since" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"detail" TEXT,  /* String */
	"rule" TEXT  /* String */
)
STRICT VOLATILE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'agent_state_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::agent_state
CREATE  FUNCTION "agent_state"(
	"session_id" uuid /* Uuid */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"confidence" TEXT,  /* String */
	"decided_by_line" bigint,  /* Option < i64 > */
	"decided_by_offset" bigint,  /* Option < i64 > */
	"since" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"detail" TEXT,  /* String */
	"rule" TEXT  /* String */
)
STRICT VOLATILE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'agent_state_by_id_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::check_log_snapshot
CREATE  FUNCTION "check_log_snapshot"(
	"path" TEXT, /* Option < & str > */
	"last_seq" bigint, /* Option < i64 > */
	"entry_count" bigint, /* Option < i64 > */
	"entry_type" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"agrees" bool,  /* bool */
	"reason" TEXT,  /* String */
	"detail" TEXT,  /* String */
	"entries" bigint,  /* i64 */
	"entries_through_last_seq" bigint,  /* Option < i64 > */
	"max_seq" bigint,  /* Option < i64 > */
	"generation" INT,  /* i32 */
	"unindexed_bytes" bigint  /* i64 */
)
STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'check_log_snapshot_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::job_timeline
CREATE  FUNCTION "job_timeline"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"source" TEXT,  /* String */
	"kind" TEXT,  /* String */
	"session" TEXT,  /* Option < String > */
	"line_no" bigint,  /* Option < i64 > */
	"byte_offset" bigint,  /* Option < i64 > */
	"seq" bigint,  /* Option < i64 > */
	"detail" TEXT  /* Option < String > */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'job_timeline_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::job_usage_from_buffer
CREATE  FUNCTION "job_usage_from_buffer"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"responses" bigint,  /* i64 */
	"input_tokens" bigint,  /* i64 */
	"output_tokens" bigint,  /* i64 */
	"cache_creation_input_tokens" bigint,  /* i64 */
	"cache_read_input_tokens" bigint,  /* i64 */
	"cost_usd" NUMERIC,  /* Option < AnyNumeric > */
	"models" TEXT[],  /* Vec < String > */
	"unpriced_responses" bigint,  /* i64 */
	"recorded_calls" bigint,  /* i64 */
	"recorded_input_tokens" bigint,  /* i64 */
	"recorded_output_tokens" bigint,  /* i64 */
	"recorded_cost_usd" NUMERIC,  /* Option < AnyNumeric > */
	"unrecorded" jsonb  /* RawJsonb */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'job_usage_from_buffer_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::log_entries
CREATE  FUNCTION "log_entries"(
	"path" TEXT, /* Option < & str > */
	"entry_type" TEXT DEFAULT NULL, /* Option < & str > */
	"last_n" INT DEFAULT NULL, /* Option < i32 > */
	"start_seq" bigint DEFAULT NULL, /* Option < i64 > */
	"end_seq" bigint DEFAULT NULL /* Option < i64 > */
) RETURNS TABLE (
	"seq" bigint,  /* Option < i64 > */
	"entry_type" TEXT,  /* Option < String > */
	"ts" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"line_no" bigint,  /* i64 */
	"byte_offset" bigint,  /* i64 */
	"entry" jsonb  /* Option < RawJsonb > */
)
STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'log_entries_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::recovery_plan
CREATE  FUNCTION "recovery_plan"(
	"job_id" uuid, /* Option < Uuid > */
	"checkpoint_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"match_checkpoint" bool DEFAULT true /* Option < bool > */
) RETURNS jsonb /* RawJsonb */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recovery_plan_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::session_file_refusal
CREATE  FUNCTION "session_file_refusal"(
	"quarantined" bool, /* bool */
	"generation" INT, /* i32 */
	"size_bytes" bigint, /* i64 */
	"indexed_offset" bigint, /* i64 */
	"trusted" bool, /* bool */
	"gone" bool, /* bool */
	"tail_pending" bool, /* bool */
	"corruption_ratio" double precision /* f64 */
) RETURNS TEXT /* Option < String > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_file_refusal_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::session_recovery
CREATE  FUNCTION "session_recovery"(
	"path" TEXT /* & str */
) RETURNS jsonb /* RawJsonb */
STRICT VOLATILE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_recovery_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::session_recovery
CREATE  FUNCTION "session_recovery"(
	"session_id" uuid /* Uuid */
) RETURNS jsonb /* RawJsonb */
STRICT VOLATILE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_recovery_by_id_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::recovery::sql::session_usage
CREATE  FUNCTION "session_usage"(
	"path" TEXT /* & str */
) RETURNS TABLE (
	"path" TEXT,  /* String */
	"subagent" bool,  /* bool */
	"model" TEXT,  /* Option < String > */
	"responses" bigint,  /* i64 */
	"input_tokens" bigint,  /* i64 */
	"output_tokens" bigint,  /* i64 */
	"cache_creation_input_tokens" bigint,  /* i64 */
	"cache_read_input_tokens" bigint,  /* i64 */
	"cost_usd" NUMERIC  /* Option < AnyNumeric > */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_usage_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::retention::sql::cleanup_session_buffers
CREATE  FUNCTION "cleanup_session_buffers"(
	"post_terminal" interval DEFAULT '24 hours', /* Option < Interval > */
	"max_file_age" interval DEFAULT '7 days', /* Option < Interval > */
	"dry_run" bool DEFAULT false, /* Option < bool > */
	"max_dirs" INT DEFAULT NULL, /* Option < i32 > */
	"max_unknown_ratio" double precision DEFAULT 0.5 /* Option < f64 > */
) RETURNS TABLE (
	"action" TEXT,  /* String */
	"path" TEXT,  /* String */
	"job_id" uuid,  /* Option < Uuid > */
	"job_status" TEXT,  /* Option < String > */
	"bytes" bigint,  /* i64 */
	"files" INT,  /* i32 */
	"rows_deleted" bigint,  /* i64 */
	"reason" TEXT  /* String */
)
VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'cleanup_session_buffers_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::retention::sql::storage_report
CREATE  FUNCTION "storage_report"() RETURNS TABLE (
	"job_state" TEXT,  /* String */
	"age" TEXT,  /* String */
	"files" bigint,  /* i64 */
	"bytes" bigint,  /* i64 */
	"index_rows" bigint,  /* i64 */
	"next_cleanup_files" bigint,  /* i64 */
	"next_cleanup_bytes" bigint,  /* i64 */
	"next_cleanup_rows" bigint  /* i64 */
)
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'storage_report_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::price_cache::model_price_changed
CREATE FUNCTION "model_price_changed"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'model_price_changed_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::check_token_budget
CREATE  FUNCTION "check_token_budget"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"allowed" bool,  /* bool */
	"reason" TEXT,  /* String */
	"input_tokens" bigint,  /* i64 */
	"max_input_tokens" bigint,  /* Option < i64 > */
	"cost_usd" NUMERIC,  /* AnyNumeric */
	"max_cost_usd" NUMERIC  /* Option < AnyNumeric > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'check_token_budget_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::llm_cost
CREATE  FUNCTION "llm_cost"(
	"usage" jsonb, /* RawJsonb */
	"model" TEXT, /* & str */
	"at" timestamp with time zone DEFAULT pg_catalog.now() /* TimestampWithTimeZone */
) RETURNS NUMERIC /* AnyNumeric */
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'llm_cost_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::record_usage
CREATE  FUNCTION "record_usage"(
	"job_id" uuid, /* Option < Uuid > */
	"model" TEXT, /* Option < & str > */
	"usage" jsonb, /* Option < RawJsonb > */
	"request_id" TEXT DEFAULT NULL, /* Option < & str > */
	"at" timestamp with time zone DEFAULT pg_catalog.now() /* Option < TimestampWithTimeZone > */
) RETURNS TABLE (
	"input_tokens" bigint,  /* i64 */
	"output_tokens" bigint,  /* i64 */
	"cache_write_tokens" bigint,  /* i64 */
	"cache_read_tokens" bigint,  /* i64 */
	"cost_usd" NUMERIC,  /* AnyNumeric */
	"llm_calls" bigint,  /* i64 */
	"duplicate" bool  /* bool */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_usage_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::release_reservation
CREATE  FUNCTION "release_reservation"(
	"reservation_id" uuid /* Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'release_reservation_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::reserve_budget
CREATE  FUNCTION "reserve_budget"(
	"job_id" uuid, /* Uuid */
	"estimated_usage" jsonb, /* RawJsonb */
	"model" TEXT /* & str */
) RETURNS TABLE (
	"reservation_id" uuid,  /* Option < Uuid > */
	"allowed" bool,  /* bool */
	"reason" TEXT  /* String */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reserve_budget_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::set_budget
CREATE  FUNCTION "set_budget"(
	"agent_id" uuid, /* Option < Uuid > */
	"max_input_tokens_per_job" bigint DEFAULT NULL, /* Option < i64 > */
	"max_cost_usd_per_job" NUMERIC DEFAULT NULL /* Option < AnyNumeric > */
) RETURNS TABLE (
	"agent_id" uuid,  /* Uuid */
	"max_input_tokens_per_job" bigint,  /* Option < i64 > */
	"max_cost_usd_per_job" NUMERIC,  /* Option < AnyNumeric > */
	"updated_at" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_budget_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::spend::sql::settle_usage
CREATE  FUNCTION "settle_usage"(
	"reservation_id" uuid, /* Option < Uuid > */
	"actual_usage" jsonb, /* Option < RawJsonb > */
	"request_id" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"input_tokens" bigint,  /* i64 */
	"output_tokens" bigint,  /* i64 */
	"cache_write_tokens" bigint,  /* i64 */
	"cache_read_tokens" bigint,  /* i64 */
	"cost_usd" NUMERIC,  /* AnyNumeric */
	"llm_calls" bigint,  /* i64 */
	"duplicate" bool  /* bool */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'settle_usage_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::worker::sql::index_now
CREATE  FUNCTION "index_now"() RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'index_now_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- cortex_buffer::worker::sql::indexer_worker
CREATE  FUNCTION "indexer_worker"() RETURNS TABLE (
	"worker" INT,  /* i32 */
	"worker_pid" INT,  /* Option < i32 > */
	"worker_state" TEXT,  /* String */
	"watch_mode" TEXT,  /* String */
	"watches" bigint,  /* i64 */
	"files" bigint,  /* i64 */
	"last_pass_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_pass_ms" double precision,  /* Option < f64 > */
	"passes" bigint,  /* i64 */
	"last_rescan_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"rescans" bigint,  /* i64 */
	"events_indexed" bigint,  /* i64 */
	"errors" bigint  /* i64 */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'indexer_worker_wrapper';
/* </end connected objects> */

/* <begin connected objects> */
-- finalize
-- Who may do what (docs/operations.md#privileges): every grant and revoke of the extension's objects is
-- here. Runs last in a fresh install; the upgrade scripts set the same.
--
-- First, every object's privileges go back to its owner's alone (and PUBLIC's USAGE of the
-- types, PostgreSQL's default): whatever ALTER DEFAULT PRIVILEGES the installing role has set
-- (for itself, or for PUBLIC, on tables, sequences, functions or types) added nothing that the
-- grants below do not give. The schema's own USAGE is PUBLIC's (sql/bootstrap.sql).
DO $reset$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass) AS obj, a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'm', 'p', 'f'])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('SEQUENCE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'S' AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure), a.grantee
          FROM pg_catalog.pg_proc p,
               pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TYPE %s', t.oid::pg_catalog.regtype), a.grantee
          FROM pg_catalog.pg_type t, pg_catalog.aclexplode(t.typacl) a
         WHERE t.typnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) t.typowner AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', o.obj,
            CASE WHEN o.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE o.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$reset$;

-- cortex_buffer_definer (NOLOGIN, not a superuser, no members) is the role the extension's
-- own writes run as: the functions switch to it for their statements on these tables, exactly
-- as a SECURITY DEFINER function owned by it would, and the background worker runs its
-- transactions as it. Statements on the bound job table run as the caller.
GRANT SELECT, INSERT, UPDATE, DELETE ON
    cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.circuit_config TO cortex_buffer_definer;
GRANT USAGE ON SEQUENCE cortex_buffer.checkpoint_history_seq, cortex_buffer.crash_seq, cortex_buffer.usage_ledger_seq,
      cortex_buffer.session_file_seq, cortex_buffer.checkpoint_mark_seq TO cortex_buffer_definer;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.checkpoint_mark TO cortex_buffer_definer;
-- The job-token secret: the definer role alone reads it (and makes it, on first use).
GRANT SELECT, INSERT ON cortex_buffer.job_token_key TO cortex_buffer_definer;
-- Push ingestion: the definer role keeps the pushed files and reads the operator's mapping.
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_file, cortex_buffer.push_confirmation TO cortex_buffer_definer;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_held TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_definer;
-- register_push_source, revoke_push_source_token and drop_push_source write the mapping as the
-- definer role, once they checked that a fleet role called them.
GRANT INSERT, UPDATE, DELETE ON cortex_buffer.push_source TO cortex_buffer_definer;
GRANT INSERT ON cortex_buffer.push_grant TO cortex_buffer_definer;
-- The partitioned layout: the indexer makes partitions ahead of new files, cleanup drops them
-- (both functions run as the extension's owner and touch nothing but those partitions).
GRANT SELECT ON cortex_buffer.event_partitioning TO cortex_buffer_definer;
GRANT EXECUTE ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint), cortex_buffer.event_partition_drop(regclass)
  TO cortex_buffer_definer;
-- job_events runs as the definer role (its owner) and asks authorize_job first.
GRANT EXECUTE ON FUNCTION cortex_buffer.authorize_job(uuid) TO cortex_buffer_definer;

-- Functions: PUBLIC keeps only the pure ones (checkpoint_crc, canonical_json, llm_cost,
-- call_idempotency_key, session_file_refusal) and indexer_worker (the worker's figures). The
-- reset above took EXECUTE from PUBLIC on every function: these get it back.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.checkpoint_crc(jsonb), cortex_buffer.canonical_json(jsonb),
    cortex_buffer.llm_cost(jsonb, text, timestamptz),
    cortex_buffer.call_idempotency_key(uuid, jsonb, integer, text, jsonb),
    cortex_buffer.session_file_refusal(boolean, integer, bigint, bigint, boolean, boolean, boolean, double precision),
    cortex_buffer.indexer_worker()
  TO PUBLIC;
REVOKE ALL ON FUNCTION
    cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean), cortex_buffer.read_checkpoint(uuid),
    cortex_buffer.verify_checkpoints(), cortex_buffer.heartbeat(uuid), cortex_buffer.reap_zombies(interval, integer),
    cortex_buffer.reaper_index_sql(), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.check_token_budget(uuid),
    cortex_buffer.reserve_budget(uuid, jsonb, text), cortex_buffer.settle_usage(uuid, jsonb, text),
    cortex_buffer.release_reservation(uuid), cortex_buffer.index_sessions(text), cortex_buffer.index_now(),
    cortex_buffer.file_integrity(text), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text),
    cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text),
    cortex_buffer.pushed_offsets(text, text), cortex_buffer.await_pushed(uuid, text, bigint, interval),
    cortex_buffer.confirm_pushed(text, interval, text), cortex_buffer.await_sources(uuid, interval),
    cortex_buffer.register_push_source(text, uuid, boolean, text, text), cortex_buffer.push_source_token(text),
    cortex_buffer.revoke_push_source_token(text), cortex_buffer.drop_push_source(text),
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report(), cortex_buffer.oversized_day_start(bigint, timestamptz)
  FROM PUBLIC;

-- Prices are reference data: everyone may read them (llm_cost() runs with the caller's
-- rights). The indexer's status is for monitoring and operators.
GRANT SELECT ON cortex_buffer.model_price TO PUBLIC;
REVOKE ALL ON cortex_buffer.indexer_status FROM PUBLIC;
GRANT SELECT ON cortex_buffer.indexer_status TO pg_monitor, cortex_buffer_operator;

-- cortex_buffer_agent_call (NOLOGIN, no members) is the role an agent's call runs as once its
-- job token checks out: it reads what the lookups read and writes the job table's agent columns.
-- It cannot read the token secret or write the extension's tables (those statements switch to
-- the definer role, as everyone's do), so a bound table's triggers, which run as this role during
-- an agent's call, gain nothing the agent's functions do not already do.
GRANT SELECT, UPDATE (heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count)
    ON cortex_buffer.job TO cortex_buffer_agent_call;
GRANT SELECT ON
    cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome, cortex_buffer.job_usage,
    cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_agent_call;

-- The agent: its own job's heartbeat, checkpoints, spend, recovery, timeline, state and events,
-- and nothing else. Each of these functions checks the session's job token (cortex_buffer.job_token)
-- against the job it is asked about, and then runs as cortex_buffer_agent_call: the agent role
-- holds no privilege on any table, the job table included.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.heartbeat(uuid), cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean),
    cortex_buffer.read_checkpoint(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.check_token_budget(uuid), cortex_buffer.reserve_budget(uuid, jsonb, text),
    cortex_buffer.settle_usage(uuid, jsonb, text), cortex_buffer.release_reservation(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid),
    cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid), cortex_buffer.job_timeline(uuid),
    cortex_buffer.job_usage_from_buffer(uuid), cortex_buffer.log_entries(text, text, integer, bigint, bigint),
    cortex_buffer.check_log_snapshot(text, bigint, bigint, text), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval), cortex_buffer.await_sources(uuid, interval)
  TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now(), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text),
    cortex_buffer.agent_state(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval), cortex_buffer.await_sources(uuid, interval)
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.job_usage,
    cortex_buffer.session_file, cortex_buffer.event
    TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_control_plane;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_control_plane;

-- The operator: budgets, prices, breaker configuration, file inspection and transcripts.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.verify_checkpoints(),
    cortex_buffer.reaper_index_sql(), cortex_buffer.index_sessions(text), cortex_buffer.file_integrity(text),
    cortex_buffer.index_now(), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_operator;
-- Retention deletes files as the database's operating-system user: the operator's alone
-- (and superusers'). It reads the bound job table as its caller.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report()
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash,
    cortex_buffer.job_wait, cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_operator;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_operator;

-- Push ingestion's mapping is the operator's to edit; the control plane registers a pod's
-- sidecar source and grants it its job at dispatch (and removes both when the job ends).
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.pushed_file, cortex_buffer.pushed_held, cortex_buffer.push_confirmation TO cortex_buffer_operator;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.push_grant TO cortex_buffer_control_plane;
-- A pod's own source only: never one trusted with every job (all_jobs stays false). No DELETE:
-- drop_push_source removes a pod's source, and refuses an operator's node source.
GRANT SELECT, INSERT (source, login, note) ON cortex_buffer.push_source TO cortex_buffer_control_plane;
-- Sources and their tokens through functions (register_push_source refuses all_jobs to all but
-- operators): what a shipper presents with every call.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.register_push_source(text, uuid, boolean, text, text), cortex_buffer.push_source_token(text),
    cortex_buffer.revoke_push_source_token(text), cortex_buffer.drop_push_source(text)
  TO cortex_buffer_control_plane, cortex_buffer_operator;

-- The pusher (a shipper's login): pushes and reads its own sources' offsets, nothing else, each
-- call with the source's token. Every statement it causes runs as the definer role once its
-- source, token and job check out.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text),
    cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text),
    cortex_buffer.pushed_offsets(text, text), cortex_buffer.confirm_pushed(text, interval, text)
  TO cortex_buffer_pusher;

-- The partitioned layout (partition_events()): each partition of event and corrupt_line has its
-- parent's grants, which the reset above took away (the indexer writes into the partitions
-- directly, as cortex_buffer_definer).
SELECT cortex_buffer.copy_table_grants(i.inhparent::pg_catalog.regclass, i.inhrelid::pg_catalog.regclass)
  FROM pg_catalog.pg_inherits i
 WHERE i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                   'cortex_buffer.corrupt_line'::pg_catalog.regclass]);
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   checkpoint_crc
--   canonical_json
--   write_checkpoint
--   read_checkpoint
--   verify_checkpoints
--   checkpoint_marked
--   call_idempotency_key
--   checkpoint_schema
--   job_schema

-- Checkpoints' functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.checkpoint_crc(jsonb) IS
'CRC-32 (IEEE) of canonical_json(doc): byte-compatible with the control plane''s checkpoint CRC. Unsigned 0..4294967295; the control plane''s integer column stores the same bit pattern signed.';
COMMENT ON FUNCTION cortex_buffer.canonical_json(jsonb) IS
'JavaScript JSON.stringify of doc with object keys sorted recursively (array-index keys first, numerically), numbers printed as JavaScript prints them: the text the checkpoint CRC covers.';
COMMENT ON FUNCTION cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean) IS
'Writes a checkpoint for a RUNNING job: validates doc (a JSON object of at most cortex_buffer.checkpoint_max_bytes canonical bytes; checkpoint_id must be a UUID, step_index an integer >= 0), refuses a stale expected_checkpoint_id or a lower step (SQLSTATE 55006), then in the caller''s transaction updates the job row''s checkpoint and checkpoint_crc and appends checkpoint_history.';
COMMENT ON FUNCTION cortex_buffer.read_checkpoint(uuid) IS
'The job''s checkpoint after CRC verification: source current, or history (newest entry that verifies, with a WARNING and detail) when the current one fails, or none for a job never checkpointed. Raises XX001 when checkpoints exist but none verifies.';
COMMENT ON FUNCTION cortex_buffer.verify_checkpoints() IS
'Scrubs every current checkpoint of the bound job table and every checkpoint_history entry; returns those whose CRC does not match.';
COMMENT ON FUNCTION cortex_buffer.call_idempotency_key(uuid, jsonb, integer, text, jsonb) IS
'The idempotency key of a tool call, as recovery_plan reports it and as the agent computes it before the call: lower-case hex SHA-256 of "cortex_buffer/call/v3\n" || job_id || "\n" || checkpoint_ref || "\n" || call_ordinal || "\n" || tool_name || "\n" || input_hash, where checkpoint_ref is "crc:" || checkpoint_crc(checkpoint) ("-" for NULL) of the checkpoint the writer resumed from or last stored itself, call_ordinal the call''s rank (from 1) among the calls with the same tool and input in its replay since that checkpoint, tool_name '''' for NULL, and input_hash the hex SHA-256 of canonical_json(tool_input) (of null for NULL).';

-- Checkpoints the control plane writes itself (a plain UPDATE of job.checkpoint) get their
-- high-water mark here; write_checkpoint records its own. A bound table gets the same trigger
-- from install_checkpoint_trigger().
-- The condition compares the CRCs before the documents: comparing two large documents
-- detoasts both (src/job/binding.rs, CHECKPOINT_TRIGGER_WHEN, is the same condition).
CREATE TRIGGER checkpoint_marked AFTER UPDATE OF checkpoint ON cortex_buffer.job
    FOR EACH ROW WHEN (NEW.checkpoint IS NOT NULL AND (OLD.checkpoint IS NULL
        OR (OLD.checkpoint_crc IS NULL) OPERATOR(pg_catalog.<>) (NEW.checkpoint_crc IS NULL)
        OR OLD.checkpoint_crc OPERATOR(pg_catalog.<>) NEW.checkpoint_crc
        OR NOT NEW.checkpoint OPERATOR(pg_catalog.=) OLD.checkpoint))
    EXECUTE FUNCTION cortex_buffer.checkpoint_marked();
COMMENT ON FUNCTION cortex_buffer.checkpoint_marked() IS
'Trigger function: records the high-water mark (cortex_buffer.checkpoint_mark) of a checkpoint written by a plain UPDATE of a job table''s checkpoint column: the job''s session files and their sizes at that instant.';
COMMENT ON TRIGGER checkpoint_marked ON cortex_buffer.job IS
'Checkpoints written without write_checkpoint get a high-water mark too, so recovery_plan can place the session files after them without clocks.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   indexer_schema

-- Push ingestion: session files shipped over SQL from nodes whose volumes the server cannot
-- see (append_session_bytes). An operator says which sources a login may push as and which
-- jobs each source may write; every pushed file gets a session_file row (its path push:/<relpath>,
-- so the tailer never meets it) and a pushed_file row with what the server holds of it.

-- The sources (a node or a pod that ships) and the login each belongs to. Operator-edited.
CREATE TABLE cortex_buffer.push_source (
    source     text PRIMARY KEY CHECK (source OPERATOR(pg_catalog.~) '^[A-Za-z0-9._:-]{1,128}$'),
    login      name,
    all_jobs   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    note       text,
    token_generation integer NOT NULL DEFAULT 1 CHECK (token_generation OPERATOR(pg_catalog.>=) 1),
    token_salt uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.push_source', '');

-- The jobs each source may write. Operator-edited (or the control plane's, at dispatch).
CREATE TABLE cortex_buffer.push_grant (
    source     text NOT NULL REFERENCES cortex_buffer.push_source (source) ON DELETE CASCADE ON UPDATE CASCADE,
    job_id     uuid NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (source, job_id)
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.push_grant', '');

-- Every pushed file. A file is its job, its relpath and its identity; a file pushed under a
-- relpath that already has files (a rescheduled pod starts at session-001 again, or the file
-- was rewritten) is a new one, numbered after them, and never erases their rows.
CREATE TABLE cortex_buffer.pushed_file (
    file_id         bigint PRIMARY KEY REFERENCES cortex_buffer.session_file (file_id) ON DELETE CASCADE,
    job_id          uuid NOT NULL,
    relpath         text NOT NULL,
    n               integer NOT NULL CHECK (n OPERATOR(pg_catalog.>=) 1),
    identity        text NOT NULL,
    first_source    text NOT NULL,
    source          text NOT NULL,
    dialect_decided boolean NOT NULL DEFAULT false,
    head            bytea NOT NULL DEFAULT '\x'::pg_catalog.bytea,
    held_len        bigint NOT NULL DEFAULT 0 CHECK (held_len OPERATOR(pg_catalog.>=) 0),
    reported_size   bigint CHECK (reported_size OPERATOR(pg_catalog.>=) 0),
    reported_at     timestamptz,
    pushed_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    pushes          bigint NOT NULL DEFAULT 0,
    flushed_size    bigint CHECK (flushed_size OPERATOR(pg_catalog.>=) 0),
    held_reduction  bytea,
    UNIQUE (job_id, relpath, n)
)
-- Every push updates its file's row; no updated column is indexed: keep the updates HOT.
WITH (fillfactor = 70);
CREATE INDEX pushed_file_identity_idx ON cortex_buffer.pushed_file (job_id, relpath, identity);
CREATE INDEX pushed_file_source_idx ON cortex_buffer.pushed_file (source);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.pushed_file', '');

COMMENT ON TABLE cortex_buffer.push_source IS
'Push ingestion''s sources: a node or pod that ships session files with append_session_bytes, proving it is the source with the source''s token (push_source_token) on every call, and optionally the login that alone may push as it. Registered by the operator, or by the control plane at dispatch (register_push_source; docs/operations.md: Push ingestion).';
COMMENT ON COLUMN cortex_buffer.push_source.source IS 'The source''s name, as the shipper passes it (1 to 128 letters, digits, ".", "_", ":", "-").';
COMMENT ON COLUMN cortex_buffer.push_source.login IS 'The role that alone may push as this source (a member of it may too), besides presenting its token; NULL: any role with cortex_buffer_pusher that presents the token.';
COMMENT ON COLUMN cortex_buffer.push_source.token_generation IS 'The generation of the source''s token: revoke_push_source_token counts it up, and every token issued before stops working.';
COMMENT ON COLUMN cortex_buffer.push_source.token_salt IS 'Random, drawn when the row is made and under every token''s MAC: a source dropped and registered again under the same name never takes back a token issued before.';
COMMENT ON COLUMN cortex_buffer.push_source.all_jobs IS 'The source may write any job''s files (a node''s shipper trusted with every pod on it); otherwise only the jobs in push_grant.';
COMMENT ON COLUMN cortex_buffer.push_source.created_at IS 'When the source was added.';
COMMENT ON COLUMN cortex_buffer.push_source.note IS 'Free text for the operator.';
COMMENT ON TABLE cortex_buffer.push_grant IS
'The jobs each push source may write (a pod''s shipper: its own job). Edited by the operator or the control plane at dispatch.';
COMMENT ON COLUMN cortex_buffer.push_grant.source IS 'The source.';
COMMENT ON COLUMN cortex_buffer.push_grant.job_id IS 'A job whose files the source may push.';
COMMENT ON COLUMN cortex_buffer.push_grant.granted_at IS 'When the grant was made.';
COMMENT ON TABLE cortex_buffer.pushed_file IS
'What the server holds of each pushed session file beyond its session_file row: its key (job, relpath, identity, n), the length of the unterminated tail held between chunks (its bytes are in pushed_held), and the shipper''s last report.';
COMMENT ON COLUMN cortex_buffer.pushed_file.file_id IS 'The file''s session_file row (path push:/<relpath>, and #n after the first).';
COMMENT ON COLUMN cortex_buffer.pushed_file.job_id IS 'The job: the relpath''s first component.';
COMMENT ON COLUMN cortex_buffer.pushed_file.relpath IS 'The file''s path below its node''s sessions directory (<job_id>/session-001.jsonl).';
COMMENT ON COLUMN cortex_buffer.pushed_file.n IS 'The n-th file pushed under this relpath for this job: another identity (a rescheduled pod''s file), or a rewrite.';
COMMENT ON COLUMN cortex_buffer.pushed_file.identity IS 'The shipper''s file identity (device:inode:fingerprint).';
COMMENT ON COLUMN cortex_buffer.pushed_file.first_source IS 'The source that pushed the file first.';
COMMENT ON COLUMN cortex_buffer.pushed_file.source IS 'The source that pushed it last.';
COMMENT ON COLUMN cortex_buffer.pushed_file.dialect_decided IS 'The dialect is decided (a complete line that is an object came, or 256 KiB without one, or the end of the file); until then every byte is held.';
COMMENT ON COLUMN cortex_buffer.pushed_file.head IS 'The file''s first bytes (up to 1024): a chunk that repeats them differently is a rewrite, not a replay.';
COMMENT ON COLUMN cortex_buffer.pushed_file.held_len IS 'How many bytes after indexed_offset the server has: the next chunk may start anywhere up to indexed_offset + held_len.';
COMMENT ON COLUMN cortex_buffer.pushed_file.reported_size IS 'The file''s size as the shipper last reported it; more than indexed_offset + held_len means bytes not pushed yet.';
COMMENT ON COLUMN cortex_buffer.pushed_file.reported_at IS 'When the shipper last reported the size (the server''s clock).';
COMMENT ON COLUMN cortex_buffer.pushed_file.flushed_size IS 'The size the pod last flushed the file to (await_pushed returned true): its writer''s own word that the file was that long. A checkpoint''s high-water mark taken while the server had exactly that many bytes is the file''s own; otherwise only a lower bound (a shipper may be behind).';
COMMENT ON COLUMN cortex_buffer.pushed_file.held_reduction IS 'When the held tail is a line longer than max_line_bytes: the state of the reducer that has seen every byte of it (bounded by its share of max_line_memory, however long the line), which the next push goes on from; the line is judged from its reduction when it ends, as the tailer judges it.';
COMMENT ON COLUMN cortex_buffer.pushed_file.pushed_at IS 'When the last push arrived.';
COMMENT ON COLUMN cortex_buffer.pushed_file.pushes IS 'Pushes received, replays included.';
COMMENT ON INDEX cortex_buffer.pushed_file_identity_idx IS 'Finds the file a push continues.';
COMMENT ON INDEX cortex_buffer.pushed_file_source_idx IS 'A source''s files, for pushed_offsets().';

-- The bytes of each pushed file's held tail (pushed_file.held_len counts them all): the
-- unterminated tail after indexed_offset, whole up to the line cap, else its first 1024 bytes
-- (and pushed_file.held_reduction). Kept as pieces, each from its start to the next one's, so
-- that a push that only adds to the tail writes a piece of about its own bytes instead of the
-- whole tail again; each piece is kept larger than all after it together (a tail has at most
-- log2 of its length pieces). Keyed (a table in a publication needs a replica identity to
-- delete from): a push deletes the pieces from its cut on but the one its new piece overwrites.
CREATE TABLE cortex_buffer.pushed_held (
    file_id bigint NOT NULL REFERENCES cortex_buffer.pushed_file (file_id) ON DELETE CASCADE,
    at      bigint NOT NULL CHECK (at OPERATOR(pg_catalog.>=) 0),
    bytes   bytea NOT NULL,
    PRIMARY KEY (file_id, at)
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.pushed_held', '');
COMMENT ON TABLE cortex_buffer.pushed_held IS
'The bytes of each pushed file''s held tail (the unterminated tail after indexed_offset, whole up to the line cap, else its first 1024 bytes), as pieces: a push that only adds to the tail writes a piece of about its own bytes.';
COMMENT ON COLUMN cortex_buffer.pushed_held.file_id IS 'The pushed file.';
COMMENT ON COLUMN cortex_buffer.pushed_held.at IS 'Where the piece starts in the held tail (0: at indexed_offset); it runs to the next piece''s start.';
COMMENT ON COLUMN cortex_buffer.pushed_held.bytes IS 'The piece''s bytes.';

-- Each source's word that it is caught up: every file it ships was pushed up to the size it had
-- at confirmed_at. A pushed file is fresh for a recovery plan only when its source confirmed
-- after the job's previous attempt was superseded (the server cannot look at another node's
-- disk, and a dead node reports nothing). Written by confirm_pushed(), one row per source.
CREATE TABLE cortex_buffer.push_confirmation (
    source        text PRIMARY KEY REFERENCES cortex_buffer.push_source (source) ON DELETE CASCADE ON UPDATE CASCADE,
    confirmed_at  timestamptz NOT NULL,
    confirmations bigint NOT NULL DEFAULT 1
)
-- Updated about once a second per idle source (the shipper's default); no updated column is indexed.
WITH (fillfactor = 50);
COMMENT ON TABLE cortex_buffer.push_confirmation IS
'Each push source''s last confirmation (confirm_pushed()): every file it ships had been pushed up to its size at confirmed_at. recovery_plan trusts a pushed file''s bytes as complete only when its source confirmed after the job''s previous attempt was superseded; otherwise the plan is stale (remote_unconfirmed).';
COMMENT ON COLUMN cortex_buffer.push_confirmation.source IS 'The source.';
COMMENT ON COLUMN cortex_buffer.push_confirmation.confirmed_at IS 'The instant (the server''s clock, less the as_of the shipper passed) at which every file of the source had been pushed whole.';
COMMENT ON COLUMN cortex_buffer.push_confirmation.confirmations IS 'Confirmations received.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   indexer_schema

-- The opt-in partitioned layout of event and corrupt_line (docs/operations.md: Partitioned
-- events): both tables partitioned by ranges of file_id, so that retention drops whole spans of
-- files instead of deleting their rows one by one. Files are numbered in discovery order, so a
-- span of ids is a span of time, and every lookup (which names its files) prunes to the spans
-- that hold them.

-- Present once partition_events() has converted the tables: how wide a span is and how many are
-- made ahead of the files.
CREATE TABLE cortex_buffer.event_partitioning (
    one                 boolean PRIMARY KEY DEFAULT true CHECK (one),
    files_per_partition bigint NOT NULL CHECK (files_per_partition OPERATOR(pg_catalog.>) 0),
    premake             integer NOT NULL CHECK (premake OPERATOR(pg_catalog.>=) 0),
    partitioned_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event_partitioning', '');
COMMENT ON TABLE cortex_buffer.event_partitioning IS
'The partitioned layout''s settings, one row once cortex_buffer.partition_events() has converted event and corrupt_line (no row: the tables are not partitioned).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.one IS 'Always true: the table holds at most one row.';
COMMENT ON COLUMN cortex_buffer.event_partitioning.files_per_partition IS 'File ids per partition: a partition of event and of corrupt_line holds the rows of file ids [n × files_per_partition, (n + 1) × files_per_partition).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.premake IS 'Partitions kept ready above the highest file id (the indexer and cleanup_session_buffers() make them).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.partitioned_at IS 'When partition_events() converted the tables.';

-- Gives `target` the grants `source` has (its owner's own aside): a partition its parent's, a
-- converted table the plain one's. Internal; PUBLIC may not call it.
CREATE FUNCTION cortex_buffer.copy_table_grants(source regclass, target regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee, a.privilege_type
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) source AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege_type, target,
            CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$$;
COMMENT ON FUNCTION cortex_buffer.copy_table_grants(regclass, regclass) IS
'Internal (the partitioned layout): grants target every privilege source grants to roles other than its owner.';

-- Makes the partitions of event and corrupt_line for file ids [from_file_id, to_file_id), empty,
-- each created alone and attached (ATTACH takes a SHARE UPDATE EXCLUSIVE lock on the parent, so
-- readers and inserts into other partitions go on), with the parent's grants. Runs as the
-- extension's owner: only it may attach partitions to the extension's tables, and only
-- cortex_buffer_definer (the indexer's role) may call it.
CREATE FUNCTION cortex_buffer.event_partition_create(from_file_id bigint, to_file_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    leaf text;
    made boolean := false;
BEGIN
    IF from_file_id IS NULL OR to_file_id IS NULL OR from_file_id OPERATOR(pg_catalog.>=) to_file_id THEN
        RAISE EXCEPTION 'event_partition_create: the span [%, %) is empty', from_file_id, to_file_id
            USING ERRCODE = '22023', HINT = 'Pass from_file_id < to_file_id.';
    END IF;
    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        IF (SELECT c.relkind FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass)
           OPERATOR(pg_catalog.<>) 'p' THEN
            RAISE EXCEPTION 'cortex_buffer.% is not partitioned', parent
                USING ERRCODE = '55000', HINT = 'Convert the tables first: SELECT * FROM cortex_buffer.partition_events();';
        END IF;
        leaf := pg_catalog.format('%s_p%s', parent, from_file_id);
        -- Two transactions that need the same span make it once: the second waits for the
        -- first to end, then finds the partition.
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('cortex_buffer partition ' OPERATOR(pg_catalog.||) leaf, 0));
        IF pg_catalog.to_regclass(pg_catalog.format('cortex_buffer.%I', leaf)) IS NOT NULL THEN
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_inherits i
                                   WHERE i.inhrelid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass
                                     AND i.inhparent OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
            RAISE EXCEPTION 'cortex_buffer.% exists but is not a partition of cortex_buffer.%', leaf, parent
                USING ERRCODE = '55000', HINT = 'Attach it (ALTER TABLE ... ATTACH PARTITION), or rename or drop it, so that the span can be made.';
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
            leaf, parent);
        PERFORM cortex_buffer.copy_table_grants(pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass,
                                                pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
            parent, leaf, from_file_id, to_file_id);
        made := true;
    END LOOP;
    RETURN made;
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint) IS
'Internal (the indexer and cleanup_session_buffers() call it as cortex_buffer_definer): makes the empty partitions event_p<from_file_id> and corrupt_line_p<from_file_id> for file ids [from_file_id, to_file_id), with the parent''s grants. True when it made one.';

-- Drops one partition of event or corrupt_line (retention has decided that every file of its
-- span qualifies). Refuses anything that is not a plain partition of those two tables.
CREATE FUNCTION cortex_buffer.event_partition_drop(leaf regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE i.inhrelid OPERATOR(pg_catalog.=) leaf
           AND i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                             'cortex_buffer.corrupt_line'::pg_catalog.regclass])
           AND c.relkind OPERATOR(pg_catalog.=) 'r') THEN
        RAISE EXCEPTION '% is not a partition of cortex_buffer.event or cortex_buffer.corrupt_line', leaf
            USING ERRCODE = '42809', HINT = 'Only retention drops partitions, through cleanup_session_buffers().';
    END IF;
    EXECUTE pg_catalog.format('DROP TABLE %s', leaf);
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_drop(regclass) IS
'Internal (cleanup_session_buffers() calls it as cortex_buffer_definer): drops a partition of event or corrupt_line whose span of files retention has released.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   indexer_schema
--   index_now
--   indexer_worker

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
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   indexer_schema
--   job_api
--   index_sessions_and_events
--   status_sql::file_integrity
--   clear_quarantine

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
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   indexer_schema
--   sql::cleanup_session_buffers
--   sql::storage_report

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
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   job_schema

-- Job liveness: crash records, when paused jobs were first seen waiting, and the per-agent
-- circuit breaker.

-- Every crash the control plane records, and every zombie the reaper finds (retry decisions
-- read this history). Data: pg_dump keeps it.
CREATE SEQUENCE cortex_buffer.crash_seq;
CREATE TABLE cortex_buffer.crash (
    crash_id        bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.crash_seq'::pg_catalog.regclass),
    job_id          uuid NOT NULL,
    agent_id        uuid,
    attempt         integer,
    reason          text NOT NULL CHECK (reason OPERATOR(pg_catalog.=) ANY (ARRAY['crash', 'zombie'])),
    exit_code       integer,
    error_message   text,
    lifecycle_state text,
    step_index      integer,
    last_tool       text,
    tokens          jsonb,
    recorded_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
);
ALTER SEQUENCE cortex_buffer.crash_seq OWNED BY cortex_buffer.crash.crash_id;
CREATE INDEX crash_job_idx ON cortex_buffer.crash (job_id, crash_id);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.crash', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.crash_seq', '');

-- When heartbeat() first saw a job in WAITING_FOR_APPROVAL (updated_at moves on every beat).
CREATE TABLE cortex_buffer.job_wait (
    job_id        uuid PRIMARY KEY,
    waiting_since timestamptz NOT NULL
);

-- Circuit breaker parameters per agent; agents without a row use the defaults below.
-- Operator-edited: pg_dump keeps it.
CREATE TABLE cortex_buffer.circuit_config (
    agent_id          uuid PRIMARY KEY,
    failure_threshold integer NOT NULL DEFAULT 3 CHECK (failure_threshold OPERATOR(pg_catalog.>) 0),
    failure_window    interval NOT NULL DEFAULT '15 minutes' CHECK (failure_window OPERATOR(pg_catalog.>) '0'),
    cooldown          interval NOT NULL DEFAULT '30 minutes' CHECK (cooldown OPERATOR(pg_catalog.>) '0'),
    canary_lease      interval NOT NULL DEFAULT '10 minutes' CHECK (canary_lease OPERATOR(pg_catalog.>) '0')
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit_config', '');

-- Breaker state per agent ("half-open" is an open breaker past open_until).
CREATE TABLE cortex_buffer.circuit (
    agent_id           uuid PRIMARY KEY,
    open               boolean NOT NULL DEFAULT false,
    closed_since       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    open_until         timestamptz,
    canary_job_id      uuid,
    canary_lease_until timestamptz,
    trips              integer NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit', '');

-- Jobs admit_job let through, until their outcome is recorded.
CREATE TABLE cortex_buffer.circuit_admission (
    job_id      uuid PRIMARY KEY,
    agent_id    uuid NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    canary      boolean NOT NULL DEFAULT false
);

-- Recent outcomes (kept for the failure window); `counted` ones can trip the breaker.
CREATE TABLE cortex_buffer.circuit_outcome (
    outcome_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id    uuid NOT NULL,
    job_id      uuid NOT NULL,
    success     boolean NOT NULL,
    counted     boolean NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX circuit_outcome_agent_idx ON cortex_buffer.circuit_outcome (agent_id, recorded_at);

-- The zombie reaper's index: only RUNNING jobs, ordered by heartbeat, so its cost follows the
-- number of stale jobs, not the table. reap_zombies() uses this exact predicate.
CREATE INDEX job_running_heartbeat_idx ON cortex_buffer.job (heartbeat_at) WHERE status OPERATOR(pg_catalog.=) 'RUNNING';
-- idle_paused_jobs(): only paused jobs.
CREATE INDEX job_waiting_idx ON cortex_buffer.job (updated_at) WHERE status OPERATOR(pg_catalog.=) 'WAITING_FOR_APPROVAL';

COMMENT ON SEQUENCE cortex_buffer.crash_seq IS 'Ids of crash rows (larger is newer).';
COMMENT ON TABLE cortex_buffer.crash IS
'Crashes recorded by record_crash() and zombies found by reap_zombies(), oldest first per job: the history retry_decision() classifies.';
COMMENT ON INDEX cortex_buffer.crash_job_idx IS 'A job''s crash history in order.';
COMMENT ON COLUMN cortex_buffer.crash.crash_id IS 'Record order.';
COMMENT ON COLUMN cortex_buffer.crash.job_id IS 'The job that crashed.';
COMMENT ON COLUMN cortex_buffer.crash.agent_id IS 'The job''s agent when recorded.';
COMMENT ON COLUMN cortex_buffer.crash.attempt IS 'The job''s attempt when recorded.';
COMMENT ON COLUMN cortex_buffer.crash.reason IS 'crash (reported by the control plane) or zombie (found by the reaper: no heartbeat).';
COMMENT ON COLUMN cortex_buffer.crash.exit_code IS 'Process exit code: 137 OOM kill, 143 clean drain (SIGTERM), 1 unhandled exception; NULL for zombies.';
COMMENT ON COLUMN cortex_buffer.crash.error_message IS 'The error message; equal messages on 3 consecutive failures make a deterministic crash. NULL for zombies.';
COMMENT ON COLUMN cortex_buffer.crash.lifecycle_state IS 'The agent''s lifecycle state at the crash (BOOTING, HYDRATING, READY, EXECUTING, DRAINING...).';
COMMENT ON COLUMN cortex_buffer.crash.step_index IS 'The step executing when it crashed.';
COMMENT ON COLUMN cortex_buffer.crash.last_tool IS 'The last tool called before the crash.';
COMMENT ON COLUMN cortex_buffer.crash.tokens IS 'Tokens consumed in the crashed attempt, as reported.';
COMMENT ON COLUMN cortex_buffer.crash.recorded_at IS 'When it was recorded.';
COMMENT ON TABLE cortex_buffer.job_wait IS
'When heartbeat() first saw a job WAITING_FOR_APPROVAL; idle_paused_jobs() measures idleness from it (updated_at moves on every heartbeat).';
COMMENT ON COLUMN cortex_buffer.job_wait.job_id IS 'The paused job.';
COMMENT ON COLUMN cortex_buffer.job_wait.waiting_since IS 'First heartbeat seen while waiting.';
COMMENT ON TABLE cortex_buffer.circuit_config IS
'Per-agent circuit breaker parameters (agents without a row use the column defaults: 3 failures in 15 minutes open it for 30 minutes; a canary has 10 minutes to report). Dumped by pg_dump.';
COMMENT ON COLUMN cortex_buffer.circuit_config.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit_config.failure_threshold IS 'Failures within failure_window that open the breaker.';
COMMENT ON COLUMN cortex_buffer.circuit_config.failure_window IS 'How far back failures are counted.';
COMMENT ON COLUMN cortex_buffer.circuit_config.cooldown IS 'How long the breaker stays open before one canary job is admitted.';
COMMENT ON COLUMN cortex_buffer.circuit_config.canary_lease IS 'How long a canary may run without reporting before another job replaces it.';
COMMENT ON TABLE cortex_buffer.circuit IS 'Circuit breaker state per agent (rows appear on first use).';
COMMENT ON COLUMN cortex_buffer.circuit.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit.open IS 'Tripped; half-open once now() >= open_until.';
COMMENT ON COLUMN cortex_buffer.circuit.closed_since IS 'When the breaker last closed: failures of jobs admitted before this do not count.';
COMMENT ON COLUMN cortex_buffer.circuit.open_until IS 'End of the cooldown.';
COMMENT ON COLUMN cortex_buffer.circuit.canary_job_id IS 'The one job admitted while half-open; only its outcome closes or re-opens the breaker.';
COMMENT ON COLUMN cortex_buffer.circuit.canary_lease_until IS 'When an unreported canary may be replaced.';
COMMENT ON COLUMN cortex_buffer.circuit.trips IS 'How many times the breaker opened.';
COMMENT ON COLUMN cortex_buffer.circuit.updated_at IS 'Last change.';
COMMENT ON TABLE cortex_buffer.circuit_admission IS 'Jobs admitted by admit_job(), until record_outcome() reports them.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.job_id IS 'The admitted job.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.agent_id IS 'Its agent.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.admitted_at IS 'When it was admitted.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.canary IS 'Admitted as the half-open canary.';
COMMENT ON TABLE cortex_buffer.circuit_outcome IS 'Outcomes reported by record_outcome(), kept for the failure window.';
COMMENT ON INDEX cortex_buffer.circuit_outcome_agent_idx IS 'Counts an agent''s failures in the window.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.outcome_id IS 'Report order.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.success IS 'Whether the job succeeded.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.counted IS 'A failure reported while closed by a job admitted since the breaker last closed: it counts towards a trip.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.recorded_at IS 'When it was reported.';
COMMENT ON INDEX cortex_buffer.job_running_heartbeat_idx IS 'The zombie reaper''s index: RUNNING jobs by heartbeat (makes heartbeats non-HOT updates; docs/control-plane.md#the-reapers-index).';
COMMENT ON INDEX cortex_buffer.job_waiting_idx IS 'Paused jobs, for idle_paused_jobs().';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   job_schema

-- Spend: model prices, per-agent budgets, exact per-job totals, the ledger of counted calls and
-- budget reservations.

-- Prices in USD per million tokens, by model and the time they took effect (the price in force
-- at a call's time applies). Rows cortex_buffer ships are `seeded`: they are fixed (a changed
-- price is a new row with a later effective_from) and left out of pg_dump, which would
-- otherwise restore them on top of the ones CREATE EXTENSION inserts.
CREATE TABLE cortex_buffer.model_price (
    model                   text NOT NULL CHECK (model OPERATOR(pg_catalog.<>) ''),
    effective_from          timestamptz NOT NULL,
    input_per_mtok          numeric NOT NULL,
    output_per_mtok         numeric NOT NULL,
    cache_write_per_mtok    numeric NOT NULL,
    cache_write_1h_per_mtok numeric NOT NULL,
    cache_read_per_mtok     numeric NOT NULL,
    source                  text,
    seeded                  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (model, effective_from),
    -- Finite, non-negative, below a million dollars per million tokens, at most 12 decimals:
    -- keeps every cost exact in 18 decimals.
    CONSTRAINT model_price_sane CHECK (
        input_per_mtok OPERATOR(pg_catalog.>=) 0 AND input_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(input_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        output_per_mtok OPERATOR(pg_catalog.>=) 0 AND output_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(output_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_write_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_write_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_write_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_write_1h_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_write_1h_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_write_1h_per_mtok) OPERATOR(pg_catalog.<=) 12 AND
        cache_read_per_mtok OPERATOR(pg_catalog.>=) 0 AND cache_read_per_mtok OPERATOR(pg_catalog.<) 1000000
        AND pg_catalog.scale(cache_read_per_mtok) OPERATOR(pg_catalog.<=) 12)
);

-- Anthropic list prices (seed design, "Token Accounting Formulas", 2025-11-16, plus the other
-- models Claude Code transcripts name), in force from each model's release date; 1-hour cache
-- writes cost 2 x input.
INSERT INTO cortex_buffer.model_price
    (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok, source, seeded)
VALUES
    ('claude-sonnet-4-5-20250929', '2025-09-29 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-opus-4-1-20250805', '2025-08-05 00:00:00+00', 15.00, 75.00, 18.75, 30.00, 1.50, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-3-5-sonnet-20241022', '2024-10-22 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price (seed design, 2025-11-16)', true),
    ('claude-sonnet-4-20250514', '2025-05-14 00:00:00+00', 3.00, 15.00, 3.75, 6.00, 0.30, 'Anthropic list price', true),
    ('claude-opus-4-5-20251101', '2025-11-01 00:00:00+00', 5.00, 25.00, 6.25, 10.00, 0.50, 'Anthropic list price', true),
    ('claude-haiku-4-5-20251001', '2025-10-01 00:00:00+00', 1.00, 5.00, 1.25, 2.00, 0.10, 'Anthropic list price', true);

CREATE FUNCTION cortex_buffer.model_price_protect_seeded() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.seeded THEN
        RAISE EXCEPTION 'price of % from % is shipped with cortex_buffer and cannot be changed', OLD.model, OLD.effective_from
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Insert a new row for the model with a later effective_from; it applies to usage from then on.';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER model_price_protect_seeded BEFORE UPDATE OR DELETE ON cortex_buffer.model_price
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.model_price_protect_seeded();
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.model_price', 'WHERE NOT seeded');

-- Per-job limits by agent (Spike #34); NULL is unlimited, 0 allows nothing. Operator-edited.
CREATE TABLE cortex_buffer.agent_budget (
    agent_id                 uuid PRIMARY KEY,
    max_input_tokens_per_job bigint CHECK (max_input_tokens_per_job OPERATOR(pg_catalog.>=) 0),
    max_cost_usd_per_job     numeric CHECK (max_cost_usd_per_job OPERATOR(pg_catalog.>=) 0
                                            AND max_cost_usd_per_job OPERATOR(pg_catalog.<) 10000000000000000000
                                            AND pg_catalog.scale(max_cost_usd_per_job) OPERATOR(pg_catalog.<=) 18),
    updated_at               timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.agent_budget', '');

-- Exact running totals per job (the bound job table's tokens_in/tokens_out/cost_usd/
-- llm_call_count mirror them, rounded and clamped to their types).
CREATE TABLE cortex_buffer.job_usage (
    job_id                uuid PRIMARY KEY,
    input_tokens          bigint NOT NULL DEFAULT 0,
    output_tokens         bigint NOT NULL DEFAULT 0,
    cache_write_tokens    bigint NOT NULL DEFAULT 0,
    cache_write_1h_tokens bigint NOT NULL DEFAULT 0,
    cache_read_tokens     bigint NOT NULL DEFAULT 0,
    cost_usd              numeric NOT NULL DEFAULT 0,
    llm_calls             bigint NOT NULL DEFAULT 0,
    first_used_at         timestamptz,
    last_used_at          timestamptz
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job_usage', '');

-- Every counted call; (job_id, request_id) is unique, so a repeated request counts once.
CREATE SEQUENCE cortex_buffer.usage_ledger_seq;
CREATE TABLE cortex_buffer.usage_ledger (
    usage_id              bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.usage_ledger_seq'::pg_catalog.regclass),
    job_id                uuid NOT NULL,
    request_id            text,
    model                 text NOT NULL,
    used_at               timestamptz NOT NULL,
    input_tokens          bigint NOT NULL,
    output_tokens         bigint NOT NULL,
    cache_write_tokens    bigint NOT NULL,
    cache_write_1h_tokens bigint NOT NULL,
    cache_read_tokens     bigint NOT NULL,
    cost_usd              numeric NOT NULL,
    reservation_id        uuid,
    recorded_at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT usage_ledger_request_key UNIQUE (job_id, request_id)
);
ALTER SEQUENCE cortex_buffer.usage_ledger_seq OWNED BY cortex_buffer.usage_ledger.usage_id;
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.usage_ledger', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.usage_ledger_seq', '');

-- Budget held for calls in flight. Open while neither settled nor released and not expired;
-- kept a day after that so a late or repeated settle_usage still finds it.
CREATE TABLE cortex_buffer.budget_reservation (
    reservation_id uuid PRIMARY KEY,
    job_id         uuid NOT NULL,
    agent_id       uuid NOT NULL,
    model          text NOT NULL,
    input_tokens   bigint NOT NULL,
    cost_usd       numeric NOT NULL,
    reserved_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    released_at    timestamptz,
    forget_at      timestamptz NOT NULL
);
CREATE INDEX budget_reservation_open_idx ON cortex_buffer.budget_reservation (job_id)
    WHERE settled_at IS NULL AND released_at IS NULL;
CREATE INDEX budget_reservation_forget_idx ON cortex_buffer.budget_reservation (forget_at);

COMMENT ON TABLE cortex_buffer.model_price IS
'LLM prices in USD per million tokens, by exact model name and the time they took effect; llm_cost() and record_usage() use the newest row whose effective_from is not after the call. Rows shipped with cortex_buffer (seeded) are fixed; operators add rows (kept by pg_dump).';
COMMENT ON COLUMN cortex_buffer.model_price.model IS 'Model name as the API reports it (exact match, e.g. claude-sonnet-4-5-20250929).';
COMMENT ON COLUMN cortex_buffer.model_price.effective_from IS 'When this price took effect; it applies until a later row for the model.';
COMMENT ON COLUMN cortex_buffer.model_price.input_per_mtok IS 'USD per million uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.model_price.output_per_mtok IS 'USD per million output tokens.';
COMMENT ON COLUMN cortex_buffer.model_price.cache_write_per_mtok IS 'USD per million tokens written to the 5-minute cache (the default lifetime).';
COMMENT ON COLUMN cortex_buffer.model_price.cache_write_1h_per_mtok IS 'USD per million tokens written to the 1-hour cache (Anthropic: 2 x input).';
COMMENT ON COLUMN cortex_buffer.model_price.cache_read_per_mtok IS 'USD per million tokens read from the cache.';
COMMENT ON COLUMN cortex_buffer.model_price.source IS 'Where the price comes from.';
COMMENT ON COLUMN cortex_buffer.model_price.seeded IS 'Shipped with cortex_buffer: cannot be changed or deleted, and not dumped (CREATE EXTENSION inserts it).';
COMMENT ON CONSTRAINT model_price_sane ON cortex_buffer.model_price IS
'Prices are finite, non-negative, below 1 000 000 and have at most 12 decimals, so costs stay exact in 18 decimals.';
COMMENT ON FUNCTION cortex_buffer.model_price_protect_seeded() IS 'Refuses changes to seeded prices (insert a newer row instead).';
COMMENT ON TRIGGER model_price_protect_seeded ON cortex_buffer.model_price IS 'Seeded prices are fixed: a price change is a new row with a later effective_from.';

COMMENT ON TABLE cortex_buffer.agent_budget IS
'Per-job limits by agent (Spike #34 token budget): a job may make LLM calls while what it used is below each limit. NULL is unlimited, 0 allows nothing; agents without a row are unlimited. Set with set_budget(); kept by pg_dump.';
COMMENT ON COLUMN cortex_buffer.agent_budget.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.agent_budget.max_input_tokens_per_job IS 'Most input tokens (uncached input + cache writes + cache reads) one job may use, over all its attempts; NULL unlimited.';
COMMENT ON COLUMN cortex_buffer.agent_budget.max_cost_usd_per_job IS 'Most USD one job may spend, over all its attempts; NULL unlimited.';
COMMENT ON COLUMN cortex_buffer.agent_budget.updated_at IS 'Last change.';

COMMENT ON TABLE cortex_buffer.job_usage IS
'Exact running totals per job (all attempts), written by record_usage() and settle_usage(). The bound job table''s tokens_in, tokens_out, cost_usd and llm_call_count mirror them, rounded and clamped to their column types.';
COMMENT ON COLUMN cortex_buffer.job_usage.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.job_usage.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.job_usage.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_write_tokens IS 'Tokens written to the cache (both lifetimes).';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_write_1h_tokens IS 'The part of cache_write_tokens written to the 1-hour cache.';
COMMENT ON COLUMN cortex_buffer.job_usage.cache_read_tokens IS 'Tokens read from the cache.';
COMMENT ON COLUMN cortex_buffer.job_usage.cost_usd IS 'Exact cost in USD (never rounded).';
COMMENT ON COLUMN cortex_buffer.job_usage.llm_calls IS 'Calls counted.';
COMMENT ON COLUMN cortex_buffer.job_usage.first_used_at IS 'Earliest call time recorded.';
COMMENT ON COLUMN cortex_buffer.job_usage.last_used_at IS 'Latest call time recorded.';

COMMENT ON SEQUENCE cortex_buffer.usage_ledger_seq IS 'Ids of usage_ledger rows (larger is newer).';
COMMENT ON TABLE cortex_buffer.usage_ledger IS
'Every LLM call counted, with its tokens and exact cost; (job_id, request_id) is unique, which makes record_usage() idempotent per request id. job_usage is the sum of these rows.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.usage_id IS 'Record order.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.request_id IS 'The caller''s id for the call (e.g. the API''s request id); a repeat is not counted again. NULL: never de-duplicated.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.model IS 'The model priced.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.used_at IS 'When the call was made (the price in force then applies).';
COMMENT ON COLUMN cortex_buffer.usage_ledger.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_write_tokens IS 'Cache writes, both lifetimes.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_write_1h_tokens IS 'The 1-hour part of cache_write_tokens.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cache_read_tokens IS 'Cache reads.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.cost_usd IS 'Exact cost in USD.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.reservation_id IS 'The reservation settle_usage() closed with this call, if any.';
COMMENT ON COLUMN cortex_buffer.usage_ledger.recorded_at IS 'When it was recorded.';
COMMENT ON CONSTRAINT usage_ledger_request_key ON cortex_buffer.usage_ledger IS 'A request id is counted once per job.';

COMMENT ON TABLE cortex_buffer.budget_reservation IS
'Budget held by reserve_budget() for calls in flight: open until settled, released or expired (cortex_buffer.reservation_timeout); closed rows are kept a day so a late or repeated settle_usage() still finds them, then deleted by later reservations.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.reservation_id IS 'The reservation.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.job_id IS 'The job whose budget it holds.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.agent_id IS 'The job''s agent.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.model IS 'The model the call uses (settle_usage() prices the actual usage with it).';
COMMENT ON COLUMN cortex_buffer.budget_reservation.input_tokens IS 'Estimated input tokens held (uncached input + cache writes + cache reads).';
COMMENT ON COLUMN cortex_buffer.budget_reservation.cost_usd IS 'Estimated cost held, exact.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.reserved_at IS 'When it was made.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.expires_at IS 'When it stops holding budget if neither settled nor released.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.settled_at IS 'When settle_usage() recorded its call.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.released_at IS 'When release_reservation() gave it back.';
COMMENT ON COLUMN cortex_buffer.budget_reservation.forget_at IS 'When the row may be deleted.';
COMMENT ON INDEX cortex_buffer.budget_reservation_open_idx IS 'A job''s open reservations.';
COMMENT ON INDEX cortex_buffer.budget_reservation_forget_idx IS 'Closed and expired reservations due for deletion.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   job_schema
--   check_binding
--   install_checkpoint_trigger
--   job_token
--   authorize_job

-- The binding's functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.check_binding() IS
'What cortex_buffer checks about the job table cortex_buffer.job_table names: job_table (the column contract), reaper_index (an index serving reap_zombies), checkpoint_trigger (checkpoints written by a plain UPDATE get a high-water mark), agent_grants (cortex_buffer_agent_call, which agents'' calls run as, may read the table and write its agent columns). ok, what was found, and the statement that fixes a missing piece.';
COMMENT ON FUNCTION cortex_buffer.install_checkpoint_trigger() IS
'Puts the checkpoint_marked trigger (named cortex_buffer_checkpoint_marked) on the bound job table, once, or replaces the form an older release installed: checkpoints the control plane writes with a plain UPDATE then get their high-water mark. The trigger compares the CRCs before the documents. Runs with the caller''s rights: the table''s owner, or a superuser.';
COMMENT ON FUNCTION cortex_buffer.job_token(uuid) IS
'The job token of a job''s current attempt: cbjt1.<job id>.<attempt>.<HMAC-SHA256, hex>. The control plane issues it when it dispatches the job; the pod presents it once per session with set_config(''cortex_buffer.job_token'', $1, false), the token passed as a parameter (a literal SET shows the token in pg_stat_activity), and may then act on that job (and no other) until the job is dispatched again. Control plane and operator only.';
COMMENT ON FUNCTION cortex_buffer.authorize_job(uuid) IS
'True when this session may act on the job: a superuser, a control-plane or operator role, or a session whose cortex_buffer.job_token is the token of the job''s current attempt; 42501 with a HINT otherwise. A pod can call it once at start to check its token; job_events calls it.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   liveness_schema
--   heartbeat
--   reap_zombies
--   reaper_index_sql
--   idle_paused_jobs
--   record_crash
--   retry_decision
--   admit_job
--   record_outcome
--   circuit_state

-- Liveness's functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.heartbeat(uuid) IS
'Sets heartbeat_at = now() while the job is RUNNING or WAITING_FOR_APPROVAL and returns true; returns false otherwise (reaped, cancelled or finished: the agent must stop).';
COMMENT ON FUNCTION cortex_buffer.reap_zombies(interval, integer) IS
'Finds RUNNING jobs whose heartbeat is older than stale_after (or that never beat and started or were updated longer ago), and moves each RUNNING -> FAILED -> RETRYING or DEAD_LETTER by retry_decision, merging {reason: zombie, ...} into error and recording a zombie crash. Rows are claimed FOR UPDATE SKIP LOCKED: concurrent callers reap each job once. retry_after is the backoff to re-enqueue with.';
COMMENT ON FUNCTION cortex_buffer.reaper_index_sql() IS
'The CREATE INDEX CONCURRENTLY statement for the reaper''s partial index (heartbeat_at WHERE status = ''RUNNING'') on the bound job table; cortex_buffer.job has it already.';
COMMENT ON FUNCTION cortex_buffer.idle_paused_jobs(interval) IS
'Jobs WAITING_FOR_APPROVAL for longer than idle_after, measured from when heartbeat() first saw them waiting (else updated_at): their pods can be scaled to zero.';
COMMENT ON FUNCTION cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb) IS
'Appends a crash of the job''s current attempt to cortex_buffer.crash (exit 137 = OOM, 143 = clean drain); returns its crash_id.';
COMMENT ON FUNCTION cortex_buffer.retry_decision(uuid) IS
'Spike #34 retry decision: max_attempts (hard stop), token_budget_exhausted, drained (exit 143: immediate), deterministic_crash (same error 3x), persistent_oom, else retry with reduced_footprint (last exit 137) or escalating_backoff; delays 5s, 60s, 300s, 1800s, then dead letter.';
COMMENT ON FUNCTION cortex_buffer.admit_job(uuid, uuid) IS
'Circuit breaker: true while the agent''s breaker is closed; while open, false until the cooldown ends, then true for exactly one canary job (replaced if it does not report within its lease).';
COMMENT ON FUNCTION cortex_buffer.record_outcome(uuid, uuid, boolean) IS
'Reports a job''s outcome to the agent''s circuit breaker (3 failures in 15 minutes open it for 30 by default; only the canary''s outcome closes or re-opens it); returns the breaker''s state.';
COMMENT ON FUNCTION cortex_buffer.circuit_state(uuid) IS
'The agent''s circuit breaker: state (closed, open, half_open), counted failures in the window, and the end of the cooldown while open.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   partition_schema
--   recovery_api

-- partition_events(): converts an installation's event and corrupt_line to the partitioned
-- layout, in one transaction, with a NOTICE per partition filled. Grants: none (superusers
-- only: it changes the extension's own tables).
CREATE FUNCTION cortex_buffer.partition_events(files_per_partition bigint DEFAULT 10000, premake integer DEFAULT 4)
RETURNS TABLE (partition text, from_file_id bigint, to_file_id bigint, rows_moved bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    old text;
    rel pg_catalog.regclass;
    o record;
    g record;
    views record;
    saved_views text[] := ARRAY[]::text[];
    defs text[];
    comments text[];
    first_id bigint;
    next_id bigint;
    lo bigint;
    spans bigint;
    n bigint;
    done bigint;
    leaf text;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'partition_events() may be called by superusers only'
            USING ERRCODE = '42501', HINT = 'It rebuilds the extension''s own tables; ask the database''s administrator.';
    END IF;
    IF files_per_partition IS NULL OR files_per_partition OPERATOR(pg_catalog.<) 1 OR premake IS NULL
       OR premake OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'partition_events: files_per_partition must be at least 1 and premake at least 0 (got %, %)',
            files_per_partition, premake
            USING ERRCODE = '22023', HINT = 'The default, 10000 files per partition, suits a fleet that starts thousands of sessions a day.';
    END IF;
    IF (SELECT c.relkind FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'cortex_buffer.event'::pg_catalog.regclass) OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'cortex_buffer.event is already partitioned'
            USING ERRCODE = '55000', HINT = 'Nothing to do: cortex_buffer.event_partitioning holds its settings, and cleanup_session_buffers() makes and drops its partitions.';
    END IF;
    -- Nothing is indexed or read while the rows move. (session_file is not locked: a file
    -- numbered meanwhile has its partition made before its rows come, after the commit; the
    -- indexer makes sure of it before each file it reads. Locking session_file as well would let
    -- a transaction that holds it and then waits for event deadlock.)
    LOCK TABLE cortex_buffer.event, cortex_buffer.corrupt_line IN ACCESS EXCLUSIVE MODE;
    SELECT s.last_value OPERATOR(pg_catalog.+) (CASE WHEN s.is_called THEN 1 ELSE 0 END)
      INTO next_id FROM cortex_buffer.session_file_seq s;
    -- Every row must land in a span: the lowest and highest ids of all three tables count (rows
    -- whose session file is gone included).
    first_id := LEAST((SELECT pg_catalog.min(f.file_id) FROM cortex_buffer.session_file f),
                      (SELECT pg_catalog.min(e.file_id) FROM cortex_buffer.event e),
                      (SELECT pg_catalog.min(c.file_id) FROM cortex_buffer.corrupt_line c));
    first_id := COALESCE(first_id, next_id);
    next_id := GREATEST(next_id,
                        (SELECT pg_catalog.max(e.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.event e),
                        (SELECT pg_catalog.max(c.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.corrupt_line c));
    first_id := first_id OPERATOR(pg_catalog.-) (first_id OPERATOR(pg_catalog.%) files_per_partition);
    spans := (next_id OPERATOR(pg_catalog.-) first_id) OPERATOR(pg_catalog./) files_per_partition
             OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.+) premake;

    -- Views over the tables are re-pointed at the new ones (their text names the tables).
    FOR views IN
        SELECT DISTINCT r.ev_class AS oid
          FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                            'cortex_buffer.corrupt_line'::pg_catalog.regclass])
    LOOP
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('CREATE OR REPLACE VIEW %s %s AS %s',
            views.oid::pg_catalog.regclass,
            (SELECT 'WITH (' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(c.reloptions, ', ') OPERATOR(pg_catalog.||) ')'
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) views.oid AND c.reloptions IS NOT NULL),
            pg_catalog.pg_get_viewdef(views.oid));
    END LOOP;

    -- So are functions of the tables' row types (job_events returns SETOF event): made again as
    -- they are, with their owner, grants, comment and membership.
    FOR o IN
        SELECT p.oid, p.oid::pg_catalog.regprocedure::pg_catalog.text AS sig, pg_catalog.pg_get_functiondef(p.oid) AS def,
               p.proowner::pg_catalog.regrole::pg_catalog.text AS owner, p.proacl,
               pg_catalog.obj_description(p.oid, 'pg_proc') AS note
          FROM pg_catalog.pg_proc p
         WHERE EXISTS (SELECT FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                                     'cortex_buffer.corrupt_line'::pg_catalog.regclass])
                          AND (c.reltype OPERATOR(pg_catalog.=) p.prorettype
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (p.proargtypes::pg_catalog.oid[])
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (COALESCE(p.proallargtypes, ARRAY[]::pg_catalog.oid[]))))
    LOOP
        saved_views := saved_views
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) pg_catalog.format('DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) o.def
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER FUNCTION %s OWNER TO %s', o.sig, o.owner)
            OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON FUNCTION %s IS %L', o.sig, o.note)
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD FUNCTION %s', o.sig);
        IF o.proacl IS NOT NULL THEN
            saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', o.sig);
            FOR g IN SELECT a.grantee FROM pg_catalog.aclexplode(o.proacl) a
                      WHERE a.grantee OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) o.oid) LOOP
                saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', o.sig,
                    CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                         ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
            END LOOP;
        END IF;
    END LOOP;

    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        old := parent OPERATOR(pg_catalog.||) '_unpartitioned';
        rel := pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass;
        -- The constraints and indexes as they are, to make again on the new table.
        defs := ARRAY(
            SELECT pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I %s', parent, c.conname,
                                     pg_catalog.pg_get_constraintdef(c.oid))
              FROM pg_catalog.pg_constraint c
             WHERE c.conrelid OPERATOR(pg_catalog.=) rel AND c.contype OPERATOR(pg_catalog.=) ANY (ARRAY['p', 'u', 'c'])
            UNION ALL
            SELECT pg_catalog.pg_get_indexdef(i.indexrelid)
              FROM pg_catalog.pg_index i
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid OPERATOR(pg_catalog.=) i.indexrelid));
        comments := ARRAY(
            SELECT pg_catalog.format('COMMENT ON INDEX cortex_buffer.%I IS %L', ic.relname,
                                     pg_catalog.obj_description(ic.oid, 'pg_class'))
              FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND pg_catalog.obj_description(ic.oid, 'pg_class') IS NOT NULL);
        comments := comments OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON TABLE cortex_buffer.%I IS %L', parent,
                                                               pg_catalog.obj_description(rel, 'pg_class'));
        -- Free the names.
        FOR o IN SELECT ic.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
                  WHERE i.indrelid OPERATOR(pg_catalog.=) rel LOOP
            EXECUTE pg_catalog.format('ALTER INDEX cortex_buffer.%I RENAME TO %I', o.relname,
                                      pg_catalog.left(o.relname, 40) OPERATOR(pg_catalog.||) '_unpartitioned');
        END LOOP;
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I RENAME TO %I', parent, old);
        EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE (file_id)',
                                  parent, old);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I OWNER TO %s', parent,
                                  (SELECT c.relowner::pg_catalog.regrole::pg_catalog.text FROM pg_catalog.pg_class c
                                    WHERE c.oid OPERATOR(pg_catalog.=) rel));
        PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
        FOR n IN 1 .. pg_catalog.array_length(defs, 1) LOOP
            EXECUTE defs[n];
        END LOOP;
        FOR n IN 1 .. pg_catalog.array_length(comments, 1) LOOP
            EXECUTE comments[n];
        END LOOP;

        -- Each span is filled while it stands alone, then attached: its indexes are built once,
        -- and the CHECK constraint spares ATTACH its scan.
        done := 0;
        FOR n IN 0 .. spans OPERATOR(pg_catalog.-) 1 LOOP
            lo := first_id OPERATOR(pg_catalog.+) (n OPERATOR(pg_catalog.*) files_per_partition);
            leaf := pg_catalog.format('%s_p%s', parent, lo);
            EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
                                      leaf, parent);
            EXECUTE pg_catalog.format('INSERT INTO cortex_buffer.%I SELECT * FROM cortex_buffer.%I
                                        WHERE file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s',
                                      leaf, old, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            GET DIAGNOSTICS rows_moved = ROW_COUNT;
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I CHECK (file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s)',
                                      leaf, leaf OPERATOR(pg_catalog.||) '_span', lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
                                      parent, leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I DROP CONSTRAINT %I', leaf, leaf OPERATOR(pg_catalog.||) '_span');
            done := done OPERATOR(pg_catalog.+) rows_moved;
            RAISE NOTICE 'partition_events: cortex_buffer.% (file ids % to %): % rows; partition % of % for %, % rows moved so far',
                leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition OPERATOR(pg_catalog.-) 1, rows_moved,
                n OPERATOR(pg_catalog.+) 1, spans, parent, done;
            partition := 'cortex_buffer.' OPERATOR(pg_catalog.||) leaf;
            from_file_id := lo;
            to_file_id := lo OPERATOR(pg_catalog.+) files_per_partition;
            RETURN NEXT;
        END LOOP;
        -- Anything the spans missed would be lost: there must be nothing.
        EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM cortex_buffer.%I', old) INTO n;
        IF n OPERATOR(pg_catalog.<>) done THEN
            RAISE EXCEPTION 'partition_events: % rows of cortex_buffer.% but % moved', n, old, done
                USING ERRCODE = 'XX000', HINT = 'Nothing was changed (the transaction is rolled back). Rows whose file_id is outside every session file''s span: check cortex_buffer.session_file_seq.';
        END IF;
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD TABLE cortex_buffer.%I', parent);
    END LOOP;
    -- The views and functions first (they still hold the old tables), then the old tables go.
    FOR n IN 1 .. COALESCE(pg_catalog.array_length(saved_views, 1), 0) LOOP
        EXECUTE saved_views[n];
    END LOOP;
    INSERT INTO cortex_buffer.event_partitioning (files_per_partition, premake)
    VALUES (partition_events.files_per_partition, partition_events.premake);
END
$$;
COMMENT ON FUNCTION cortex_buffer.partition_events(bigint, integer) IS
'Converts event and corrupt_line to the partitioned layout (docs/operations.md: Partitioned events): range partitions of files_per_partition file ids each, premake of them ready above the highest id; the rows move in one transaction that locks both tables, with a NOTICE per partition. Returns the partitions made. Superusers only; refuses (55000) when the tables are partitioned already.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   push_schema
--   confirm_pushed
--   await_sources


COMMENT ON FUNCTION cortex_buffer.confirm_pushed(text, interval, text) IS
'A shipper''s word (with its source''s token, source_token), while idle, that every file its source ships had been pushed whole as_of ago (when its look at the files began): one row per source in push_confirmation, never moved back. recovery_plan trusts a pushed file''s bytes as complete only when its source confirmed after the job''s previous attempt was superseded; otherwise the plan is stale (remote_unconfirmed). Returns the recorded confirmation time. Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.await_sources(uuid, interval) IS
'The pod''s bounded wait before it plans: waits (at most timeout) until every source that pushed the job''s files has confirmed them (confirm_pushed) after the job''s previous attempt was superseded; true once they all have (or the job has no pushed file), false when the time ran out (recovery_plan then says stale, remote_unconfirmed). Checks the job token like every per-job function. Granted to cortex_buffer_agent and cortex_buffer_control_plane.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   push_schema
--   pushed_offsets
--   await_pushed

-- Push ingestion's SQL face: the declarations of append_session_bytes (its argument "final" is a
-- Rust keyword, which pgrx would spell r#final) and append_session_batch (it sets plan_cache_mode,
-- which pgrx cannot declare), and the comments on its functions (the tables are in schema.sql).
CREATE FUNCTION cortex_buffer.append_session_bytes(
    source text, relpath text, start_offset bigint, chunk bytea, file_identity text,
    "final" boolean DEFAULT false, file_size bigint DEFAULT NULL, source_token text DEFAULT NULL)
RETURNS TABLE (committed_offset bigint, events_added bigint, corrupt_added bigint, action text)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'append_session_bytes_wrapper';
COMMENT ON FUNCTION cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text) IS
'Appends a chunk of a session file a shipper read on another node (source, relpath <job_id>/<file>.jsonl, start_offset, chunk, file_identity, and source_token, the source''s token, which proves the caller is the source), exactly once and with the tailer''s rules: a chunk starting before the committed offset is applied from there on, one starting after what the server has is refused (55000, expected offset in the DETAIL); the unterminated tail is held until a later chunk ends it or final => true judges it; a new identity under a relpath is a new file after the earlier ones. file_size reports the file''s size. Returns committed_offset, events_added, corrupt_added and action (new, appended, held, replayed, reindex, failed, quarantined). Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.pushed_offsets(text, text) IS
'Where a shipper resumes (with its source''s token, source_token): each file its source pushed last, with its identity, the committed offset, the bytes held after it, the length and CRC-32 of the file''s first bytes as the server has them (to tell a rewritten file), and the last reported size. Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.await_pushed(uuid, text, bigint, interval) IS
'The agent''s flush before a checkpoint: waits (at most timeout) until the server has the job''s pushed file relpath up to size bytes; true once it has (and keeps size as the pod''s word in pushed_file.flushed_size: a checkpoint stored next is marked at the file''s own size), false when the time ran out. Checks the job token like every per-job function. Granted to cortex_buffer_agent and cortex_buffer_control_plane.';
-- append_session_batch runs its statements with generic plans (plan_cache_mode): a shipper's
-- connection runs each a few times a second, on arrays whose plan does not depend on their
-- values, and planning each execution anew was a twentieth of the server's time under 16
-- shippers.
CREATE FUNCTION cortex_buffer.append_session_batch(
    source text, relpaths text[], start_offsets bigint[], chunks bytea[], file_identities text[],
    finals boolean[] DEFAULT NULL, file_sizes bigint[] DEFAULT NULL, source_token text DEFAULT NULL)
RETURNS TABLE (ord integer, committed_offset bigint, events_added bigint, corrupt_added bigint, action text)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
SET plan_cache_mode TO force_generic_plan
LANGUAGE c AS 'MODULE_PATHNAME', 'append_session_batch_wrapper';
COMMENT ON FUNCTION cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text) IS
'A shipper''s pushes in one call (with its source''s token, source_token): element i of relpaths, start_offsets, chunks, file_identities, finals and file_sizes (the last two may be NULL: not final, no size) is one push of append_session_bytes, applied with its rules and outcomes, in the arrays'' order, in the caller''s transaction (all apply or none). At most 1000 pushes (54000). Returns one row per push: ord (its position, from 1), committed_offset, events_added, corrupt_added and action. Granted to cortex_buffer_pusher.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   push_schema
--   register_push_source
--   push_source_token
--   revoke_push_source_token
--   drop_push_source


COMMENT ON FUNCTION cortex_buffer.register_push_source(text, uuid, boolean, text, text) IS
'Registers a push source, or updates it (all_jobs, login and note, each when given), grants it job_id when given, and returns its token: what its shipper passes as source_token with every call (--source-token). No login is needed: with login NULL any role with cortex_buffer_pusher that presents the token pushes as the source; a login restricts it to that role''s members as well. For the control plane at dispatch, and operators.';
COMMENT ON FUNCTION cortex_buffer.push_source_token(text) IS
'The current token of a push source (the same until revoked, or until the source is dropped). For the control plane (pods'' own sources: never one trusted with every job) and operators.';
COMMENT ON FUNCTION cortex_buffer.revoke_push_source_token(text) IS
'Revokes every token of a push source issued so far (its generation counts up) and returns the new one. For the control plane (pods'' own sources) and operators.';
COMMENT ON FUNCTION cortex_buffer.drop_push_source(text) IS
'Drops a push source with its grants, its last confirmation and every token issued for it (a source registered again under the name has new ones; its pushed files stay): true when it was there. For a sidecar''s source once its job is terminal: a later attempt''s plan trusts the source''s files only after a confirmation, which a dropped source cannot give. For the control plane and operators.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   recovery_plan
--   session_recovery
--   session_recovery_by_id
--   agent_state
--   agent_state_by_id
--   job_timeline
--   session_usage
--   job_usage_from_buffer
--   log_entries
--   check_log_snapshot
--   session_file_refusal
--   indexer_api
--   indexer_schema

-- Recovery lookups: the views operators read, and what every function is for.

-- A job's session files as recovery sees them. A view with the caller's rights
-- (security_invoker): reading it takes SELECT on session_file and event.
CREATE VIEW cortex_buffer.job_sessions WITH (security_invoker = true) AS
SELECT f.job_id, f.path, f.dialect, f.session_ordinal, f.generation,
       f.total_lines, f.valid_lines, f.corrupt_lines, f.corruption_ratio, f.trusted, f.tail_state,
       GREATEST(f.size_bytes OPERATOR(pg_catalog.-) f.indexed_offset, 0) AS unindexed_bytes,
       f.gone_at, f.quarantined_at, f.seq_gaps, f.seq_resets, f.foreign_job_lines,
       e.type AS last_event_type, e.ts AS last_event_at, e.seq AS last_seq,
       s.state AS agent_state, s.confidence AS agent_state_confidence,
       cortex_buffer.session_file_refusal(f.quarantined_at IS NOT NULL, f.generation, f.size_bytes, f.indexed_offset,
                                          f.trusted, f.gone_at IS NOT NULL, f.tail_pending, f.corruption_ratio) AS recovery_refusal
  FROM cortex_buffer.session_file f
  LEFT JOIN LATERAL (SELECT ev.type, ev.ts, ev.seq FROM cortex_buffer.event ev
                      WHERE ev.file_id OPERATOR(pg_catalog.=) f.file_id
                      ORDER BY ev.byte_offset DESC LIMIT 1) e ON true
  LEFT JOIN LATERAL cortex_buffer.agent_state(f.path) s ON true
 WHERE f.job_id IS NOT NULL;

-- Files recovery will not read, and why (the decision tree's own rule).
CREATE VIEW cortex_buffer.untrusted_session_files WITH (security_invoker = true) AS
SELECT r.reason, f.job_id, f.path, f.dialect, f.corruption_ratio, f.corrupt_lines, f.valid_lines,
       GREATEST(f.size_bytes OPERATOR(pg_catalog.-) f.indexed_offset, 0) AS unindexed_bytes,
       f.failures, f.last_error, f.gone_at, f.quarantined_at, f.indexed_at
  FROM cortex_buffer.session_file f,
       LATERAL (SELECT cortex_buffer.session_file_refusal(f.quarantined_at IS NOT NULL, f.generation, f.size_bytes, f.indexed_offset,
                                                          f.trusted, f.gone_at IS NOT NULL, f.tail_pending, f.corruption_ratio) AS reason) r
 WHERE r.reason IS NOT NULL;

COMMENT ON FUNCTION cortex_buffer.recovery_plan(uuid, uuid, boolean) IS
'One call at pod start (Spike #31 Question 6, extended). First brings the job''s session files up to date (a catch-up of its directory, exactly once, as cortex_buffer_definer; fresh.stale says when it could not). Phase 1: the checkpoint by read_checkpoint''s rules (action first_run, resume or fail_job, resume_step). Phase 2: the buffer after the checkpoint (its marker, its high-water mark, or, failing both, its write time; the checkpoint covers only what finished before it): completed tool calls with their results (skip them), calls in flight and calls the bytes cannot settle (verify them), each with the idempotency key its writer sent (call_idempotency_key()) and its place in the replay, or the candidates, lost events, anomalies, and why (mode buffer or checkpoint_only, reason from a closed list). Called by a pod with its job token, it records the pod''s resume. See docs/api.md.';
COMMENT ON FUNCTION cortex_buffer.session_recovery(text) IS
'A Claude Code transcript''s recovery plan (the keys of recovery_plan): every tool call of the transcript, paired by tool_use id over every content block. Path: session_file.path, or relative to sessions_dir. Reads the index.';
COMMENT ON FUNCTION cortex_buffer.session_recovery(uuid) IS
'session_recovery(path) for the transcript of a Claude Code session id.';
COMMENT ON FUNCTION cortex_buffer.agent_state(text) IS
'What the agent of a session file is doing: idle, acting, thinking or unknown; confirmed or inferred; the line that decided and the rule (docs/api.md#agent-state-rules). Reads the index, and the file''s bytes the index does not hold yet (files outside sessions_dir: superusers only).';
COMMENT ON FUNCTION cortex_buffer.agent_state(uuid) IS
'agent_state(path) for the transcript of a Claude Code session id.';
COMMENT ON FUNCTION cortex_buffer.job_timeline(uuid) IS
'A job''s story for psql: every event across its sessions in order (file, line, offset), lost events, writer restarts and corrupt lines, with checkpoint writes, crashes, reaper actions, usage records and breaker admissions and outcomes placed among them by time. source says where each row comes from.';
COMMENT ON FUNCTION cortex_buffer.session_usage(text) IS
'Token usage of a transcript and of its sub-agents'' files, per file and model: each Claude Code response once per (message.id, requestId), the largest copy, no <synthetic> lines, no progress-embedded usage; cost at model_price (NULL for a model without a price).';
COMMENT ON FUNCTION cortex_buffer.job_usage_from_buffer(uuid) IS
'A job''s usage from its session files (LLM_RESPONSE token fields; the shipped writer''s data.tokenUsage), priced at model_price, next to what record_usage recorded; unrecorded is the difference (the usage of a pod that died before recording it).';
COMMENT ON FUNCTION cortex_buffer.log_entries(text, text, integer, bigint, bigint) IS
'A LOG-slice file''s entries oldest first, as the index holds them (the database-side scan_log and reload_logs): optionally one __type__, seq in [start_seq, end_seq), the last last_n. entry is the line without __type__, __seq__ and __ts__.';
COMMENT ON FUNCTION cortex_buffer.check_log_snapshot(text, bigint, bigint, text) IS
'Whether a LOG-slice snapshot''s file reference (last_seq, entry_count, optionally of one __type__) still agrees with the file: the entry with last_seq is there once, entry_count entries lead up to it, __seq__ rises up to it and no corrupt line lies below it. reason says why not: last_seq_missing, last_seq_repeated, seq_not_increasing, corrupt_below, count_mismatch, fewer_entries.';
COMMENT ON FUNCTION cortex_buffer.session_file_refusal(boolean, integer, bigint, bigint, boolean, boolean, boolean, double precision) IS
'Why recovery will not read a session file, from its session_file columns: quarantined, not_indexed, file_untrusted, file_gone; NULL when it will. The rule recovery_plan applies.';
COMMENT ON VIEW cortex_buffer.job_sessions IS
'Each job''s session files: integrity, tail state, unindexed bytes, last event, agent state, and why recovery would refuse the file. Caller''s rights (SELECT on session_file and event).';
COMMENT ON COLUMN cortex_buffer.job_sessions.job_id IS 'The job (its directory).';
COMMENT ON COLUMN cortex_buffer.job_sessions.path IS 'The session file.';
COMMENT ON COLUMN cortex_buffer.job_sessions.dialect IS 'cortex-spike or cortex-plane (or another dialect written into a job directory).';
COMMENT ON COLUMN cortex_buffer.job_sessions.session_ordinal IS 'Order among the job''s sessions (numeric).';
COMMENT ON COLUMN cortex_buffer.job_sessions.generation IS 'Times indexed from byte 0.';
COMMENT ON COLUMN cortex_buffer.job_sessions.total_lines IS 'Lines indexed.';
COMMENT ON COLUMN cortex_buffer.job_sessions.valid_lines IS 'Events.';
COMMENT ON COLUMN cortex_buffer.job_sessions.corrupt_lines IS 'Lines that are not events.';
COMMENT ON COLUMN cortex_buffer.job_sessions.corruption_ratio IS 'Corrupt over non-blank lines (truncated tail not counted).';
COMMENT ON COLUMN cortex_buffer.job_sessions.trusted IS 'Corruption ratio within 0.10 (the file is trusted for recovery).';
COMMENT ON COLUMN cortex_buffer.job_sessions.tail_state IS 'complete, pending or truncated.';
COMMENT ON COLUMN cortex_buffer.job_sessions.unindexed_bytes IS 'Bytes the index does not hold yet.';
COMMENT ON COLUMN cortex_buffer.job_sessions.gone_at IS 'When the file was found deleted.';
COMMENT ON COLUMN cortex_buffer.job_sessions.quarantined_at IS 'When the indexer gave up on it.';
COMMENT ON COLUMN cortex_buffer.job_sessions.seq_gaps IS 'Jumps upwards in seq (lost events).';
COMMENT ON COLUMN cortex_buffer.job_sessions.seq_resets IS 'Writer restarts.';
COMMENT ON COLUMN cortex_buffer.job_sessions.foreign_job_lines IS 'Lines naming another job.';
COMMENT ON COLUMN cortex_buffer.job_sessions.last_event_type IS 'Type of the file''s last indexed event.';
COMMENT ON COLUMN cortex_buffer.job_sessions.last_event_at IS 'Its timestamp.';
COMMENT ON COLUMN cortex_buffer.job_sessions.last_seq IS 'Its seq.';
COMMENT ON COLUMN cortex_buffer.job_sessions.agent_state IS 'agent_state(path): idle, acting, thinking or unknown.';
COMMENT ON COLUMN cortex_buffer.job_sessions.agent_state_confidence IS 'confirmed or inferred.';
COMMENT ON COLUMN cortex_buffer.job_sessions.recovery_refusal IS 'Why recovery_plan would not read the file (NULL: it would).';
COMMENT ON VIEW cortex_buffer.untrusted_session_files IS
'Session files recovery will not read, and why (reason: quarantined, not_indexed, file_untrusted, file_gone), with the figures behind it. Caller''s rights (SELECT on session_file).';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.reason IS 'quarantined, not_indexed, file_untrusted or file_gone (the plan''s reason when it meets the file).';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.job_id IS 'The job, for files in a job directory.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.path IS 'The session file.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.dialect IS 'Its dialect.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.corruption_ratio IS 'Corrupt over non-blank lines.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.corrupt_lines IS 'Lines that are not events.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.valid_lines IS 'Events.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.unindexed_bytes IS 'Bytes the index does not hold (for a deleted file: never will).';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.failures IS 'Consecutive failed indexing attempts.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.last_error IS 'Why the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.gone_at IS 'When the file was found deleted.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.quarantined_at IS 'When the indexer gave up on it.';
COMMENT ON COLUMN cortex_buffer.untrusted_session_files.indexed_at IS 'When it was last indexed.';
/* </end connected objects> */

/* <begin connected objects> */
-- requires:
--   spend_schema
--   price_cache::model_price_changed
--   llm_cost
--   record_usage
--   set_budget
--   check_token_budget
--   reserve_budget
--   settle_usage
--   release_reservation

-- Spend's functions: the price cache's invalidation trigger (its function is Rust, so it comes
-- after schema.sql) and the comments of the functions sql.rs defines. Grants: sql/privileges.sql.
CREATE TRIGGER model_price_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cortex_buffer.model_price
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_buffer.model_price_changed();
COMMENT ON FUNCTION cortex_buffer.model_price_changed() IS
'Trigger: invalidates every session''s cached prices when model_price changes (at commit).';
COMMENT ON TRIGGER model_price_changed ON cortex_buffer.model_price IS
'Price changes reach every session''s price cache from its next transaction.';

COMMENT ON FUNCTION cortex_buffer.llm_cost(jsonb, text, timestamptz) IS
'Exact USD cost of one call''s usage (seed, Anthropic/Claude Code or the control plane''s tokenUsage spelling; the cache_creation breakdown prices 5-minute and 1-hour cache writes) with the model''s price in force at "at". Never rounded.';
COMMENT ON FUNCTION cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz) IS
'Adds one LLM call''s tokens, exact cost and a call count to the job''s totals, atomically and once per (job_id, request_id) (duplicate = true for a repeat); returns the running totals. Keeps the bound job table''s tokens_in/tokens_out/cost_usd/llm_call_count in step.';
COMMENT ON FUNCTION cortex_buffer.set_budget(uuid, bigint, numeric) IS
'Sets an agent''s per-job limits on input tokens (input + cache write + cache read) and USD; NULL is unlimited, 0 allows nothing. Returns the stored row.';
COMMENT ON FUNCTION cortex_buffer.check_token_budget(uuid) IS
'Whether the job may make its next LLM call: not allowed once used >= limit (cost checked first). Reason: no_budget, within_budget, cost_budget_exhausted or input_token_budget_exhausted.';
COMMENT ON FUNCTION cortex_buffer.reserve_budget(uuid, jsonb, text) IS
'Before a call: admits it (returning a reservation to settle) only while used + open reservations + this estimate stays within the job''s limits, so concurrent callers cannot overspend by more than their calls exceed their estimates. Refusal reasons add cost_budget_insufficient and input_token_budget_insufficient (the estimate does not fit).';
COMMENT ON FUNCTION cortex_buffer.settle_usage(uuid, jsonb, text) IS
'After a reserved call: records its actual usage like record_usage() (priced with the reserved model) and closes the reservation; settling again returns the totals with duplicate = true.';
COMMENT ON FUNCTION cortex_buffer.release_reservation(uuid) IS
'Gives back a reservation whose call was never made; false if it was already settled or released.';
/* </end connected objects> */

/* <begin connected objects> */
/*
This file is auto generated by pgrx.

The ordering of items is not stable, it is driven by a dependency graph.
*/
/* </end connected objects> */
