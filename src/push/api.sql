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
