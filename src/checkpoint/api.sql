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
