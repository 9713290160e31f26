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
