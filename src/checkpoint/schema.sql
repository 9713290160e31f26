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
