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
