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
