-- Session files found under cortex_buffer.sessions_dir by the discovery rule.
CREATE TABLE cortex_buffer.session_file (
    file_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path       text NOT NULL UNIQUE CHECK (path LIKE '/%'),
    job_dir    text NOT NULL,
    dialect    text CHECK (dialect IN ('cortex-spike', 'cortex-plane', 'claude-code', 'wink-log')),
    size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
    mtime      timestamptz NOT NULL,
    device     bigint NOT NULL,
    inode      bigint NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now(),
    gone_at    timestamptz
);
CREATE INDEX session_file_job_dir_idx ON cortex_buffer.session_file (job_dir);

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
COMMENT ON INDEX cortex_buffer.session_file_job_dir_idx IS 'Looks up a job''s session files.';
