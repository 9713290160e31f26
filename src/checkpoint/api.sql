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
