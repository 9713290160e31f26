-- Session files found under cortex_buffer.sessions_dir by the discovery rule, with where
-- indexing stands and each file's integrity. Created here in its final shape; the released
-- upgrade scripts (sql/) carry the steps by which older installs reached it.
CREATE SEQUENCE cortex_buffer.session_file_seq;
CREATE TABLE cortex_buffer.session_file (
    file_id            bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.session_file_seq'::pg_catalog.regclass),
    path               text NOT NULL UNIQUE CHECK (path OPERATOR(pg_catalog.~~) '/%'),
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
                  OPERATOR(pg_catalog./) (valid_lines OPERATOR(pg_catalog.+) corrupt_lines) END) STORED
);
ALTER SEQUENCE cortex_buffer.session_file_seq OWNED BY cortex_buffer.session_file.file_id;
CREATE INDEX session_file_job_dir_idx ON cortex_buffer.session_file (job_dir);
-- A job's files (and through them its events, in order): the job is the file's directory.
CREATE INDEX session_file_job_order_idx ON cortex_buffer.session_file (job_id, session_ordinal);

-- Transcripts: no PUBLIC access (the schema's default), dumped with the data.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.session_file_seq', '');

COMMENT ON SEQUENCE cortex_buffer.session_file_seq IS 'Ids of session_file rows.';
COMMENT ON TABLE cortex_buffer.session_file IS
'One row per session file the discovery rule selects under cortex_buffer.sessions_dir (kept after the file is deleted, with gone_at set). Written by the background worker and index_sessions().';
COMMENT ON COLUMN cortex_buffer.session_file.file_id IS 'Surrogate key referenced by the event tables.';
COMMENT ON COLUMN cortex_buffer.session_file.path IS 'Absolute path: the canonical sessions_dir joined with the components below it.';
COMMENT ON COLUMN cortex_buffer.session_file.job_dir IS 'First directory below sessions_dir: the job id (cortex dialects) or the Claude Code project directory.';
COMMENT ON COLUMN cortex_buffer.session_file.dialect IS 'cortex-spike, cortex-plane, claude-code or wink-log, from the file''s first parseable line, else its name; NULL until either tells.';
COMMENT ON COLUMN cortex_buffer.session_file.size_bytes IS 'File size at the last pass that recorded a change.';
COMMENT ON COLUMN cortex_buffer.session_file.mtime IS 'File modification time at the last pass that recorded a change.';
COMMENT ON COLUMN cortex_buffer.session_file.device IS 'st_dev of the file (unsigned 64-bit value stored as its bigint bit pattern).';
COMMENT ON COLUMN cortex_buffer.session_file.inode IS 'st_ino of the file (unsigned 64-bit value stored as its bigint bit pattern); with device, the file''s identity.';
COMMENT ON COLUMN cortex_buffer.session_file.first_seen IS 'When a pass first recorded this path.';
COMMENT ON COLUMN cortex_buffer.session_file.last_seen IS 'Last pass that saw the file: rewritten on every change, and at least every 5 minutes while unchanged (idle passes write nothing).';
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
COMMENT ON COLUMN cortex_buffer.session_file.trusted IS 'Trusted for recovery when last indexed: corruption_ratio <= cortex_buffer.max_corruption_ratio and the file is readable.';
COMMENT ON COLUMN cortex_buffer.session_file.indexed_at IS 'When the file was last indexed.';
COMMENT ON COLUMN cortex_buffer.session_file.failures IS 'Consecutive failed indexing attempts (committed separately, so a file cannot crash-loop the worker).';
COMMENT ON COLUMN cortex_buffer.session_file.last_error IS 'Why the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.last_error_at IS 'When the last attempt failed.';
COMMENT ON COLUMN cortex_buffer.session_file.quarantined_at IS 'Set after cortex_buffer.quarantine_after failures: the file is left alone until replaced, or until an operator clears this column and failures.';
COMMENT ON COLUMN cortex_buffer.session_file.tail_state IS 'complete, pending (waiting for a newline or the settle period) or truncated (the last non-blank line does not parse).';
COMMENT ON COLUMN cortex_buffer.session_file.corruption_ratio IS 'Corrupt lines (the truncated tail not counted) over non-blank lines.';
COMMENT ON INDEX cortex_buffer.session_file_job_dir_idx IS 'Looks up a job''s session files.';
COMMENT ON INDEX cortex_buffer.session_file_job_order_idx IS 'A job''s session files in order (the latest first with ORDER BY session_ordinal DESC); with event''s primary key, a job''s events by file and offset (job_events()).';
