-- cortex_buffer 0.5.0 -> 0.6.0: indexer fixes (NUL never in text, the direct heap path only
-- on the table as shipped, memory per line bounded, lossy UTF-8 recorded), and the privilege
-- model: pinned search paths, the cortex_buffer_definer role for the extension's own writes, the
-- three roles an operator grants, job isolation of transcripts.
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.6.0'" to load this file. \quit

-- The roles (cluster-wide: created only when missing, never dropped; see the README's
-- Privileges). cortex_buffer_definer is the role the extension's own writes run as: it must
-- not be able to log in, be a superuser, or have members.
DO $$
DECLARE
    r record;
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['cortex_buffer_definer', 'cortex_buffer_agent', 'cortex_buffer_control_plane',
                                     'cortex_buffer_operator'] LOOP
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
END
$$;


-- Lines that name another job than their directory's are counted, and never taken as the
-- directory's job; event.job_id is what the line itself names.
ALTER TABLE cortex_buffer.session_file ADD COLUMN foreign_job_lines bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN cortex_buffer.session_file.foreign_job_lines IS 'Events whose own job id is not this file''s job directory''s: never taken as the directory''s job (an agent that can write into another job''s directory cannot speak for that job).';
COMMENT ON COLUMN cortex_buffer.session_file.job_id IS 'The job: job_dir when it is a UUID (the cortex dialects'' layout, <sessions_dir>/<job_id>/<file>). The job a file''s events are taken for; a line naming another job is counted in foreign_job_lines instead.';
COMMENT ON COLUMN cortex_buffer.event.job_id IS 'The job the line itself names (job_id / jobId), never taken from its directory; see session_file.job_id and foreign_job_lines.';
COMMENT ON COLUMN cortex_buffer.event.payload IS 'The whole line as jsonb; NULL when it is not stored (see payload_problem).';
COMMENT ON COLUMN cortex_buffer.event.payload_problem IS 'Why payload is NULL, or how it differs from the line''s bytes: jsonb cannot store it (\u0000, a lone surrogate, nesting deeper than 1000, a number beyond numeric), converting it would take more than cortex_buffer.max_line_memory, or invalid UTF-8 replaced by U+FFFD. Reasons are joined with "; ".';

-- Trigger functions run under a pinned search path.
ALTER FUNCTION cortex_buffer.job_set_updated_at() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cortex_buffer.job_validate_transition() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cortex_buffer.model_price_protect_seeded() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cortex_buffer.session_file_delete_rows() SET search_path = pg_catalog, pg_temp;

-- The file-reading functions run with the caller's rights now (their writes switch to
-- cortex_buffer_definer), and belong to the operator role, not to pg_read_server_files.
ALTER FUNCTION cortex_buffer.index_sessions(text) SECURITY INVOKER;
ALTER FUNCTION cortex_buffer.file_integrity(text) SECURITY INVOKER;
REVOKE ALL ON FUNCTION cortex_buffer.index_sessions(text), cortex_buffer.index_now(), cortex_buffer.file_integrity(text)
    FROM pg_read_server_files;
COMMENT ON FUNCTION cortex_buffer.index_sessions(text) IS
'One synchronous pass of the background worker''s own code over cortex_buffer.sessions_dir, or over dir (superusers only): discovers session files and indexes their new lines into event and corrupt_line (each file in a subtransaction of its own). Returns each file found, gone or skipped, with the action taken, events and corrupt lines added, and indexing notes. Granted to cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes the background worker for an immediate pass. Returns false, with a NOTICE saying why, when no enabled worker is running. Reads no file. Granted to cortex_buffer_control_plane and cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.file_integrity(text) IS
'Judges a session file''s current bytes as the control plane''s scanBuffer does (lossy UTF-8, JavaScript trimming and JSON.parse, type and timestamp keys for the cortex dialects) and reports lines, truncated or pending tail, corruption ratio, severity (none, truncated_tail, corrupt_interior, unreadable), trust for recovery and seq gaps. Indexes nothing. Paths are opened beneath sessions_dir; files elsewhere: superusers only. Granted to cortex_buffer_operator.';
REVOKE ALL ON cortex_buffer.indexer_status FROM pg_read_server_files;
GRANT SELECT ON cortex_buffer.indexer_status TO cortex_buffer_operator;
COMMENT ON VIEW cortex_buffer.indexer_status IS
'The indexer at a glance: worker state and last pass, files tracked, bytes indexed and pending (lag), events and corrupt lines indexed, files with a pending tail, untrusted, failing or quarantined, the latest error. Granted to pg_monitor and cortex_buffer_operator.';


-- The recovery lookups (README: Recovery plans). Recovery finds a file's markers through their
-- own partial index.
CREATE INDEX event_marker_idx ON cortex_buffer.event (file_id, byte_offset)
    WHERE type OPERATOR(pg_catalog.=) ANY (ARRAY['CHECKPOINT_WRITTEN', 'CHECKPOINT', 'CHECKPOINT_LOADED']);
COMMENT ON INDEX cortex_buffer.event_marker_idx IS 'Checkpoint markers and loads by file and offset: recovery_plan finds a file''s last marker and first CHECKPOINT_LOADED with one probe each.';
COMMENT ON COLUMN cortex_buffer.session_file.seq_resets IS 'Drops or repeats in seq (a new writer restarted the count; a writer never repeats one).';

-- job_events() runs with the caller's rights like every lookup over the index, and orders a
-- job's files as recovery does: (session_ordinal, path).
DROP FUNCTION cortex_buffer.job_events(uuid, timestamptz);
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id OPERATOR(pg_catalog.=) f.file_id
     WHERE f.job_id OPERATOR(pg_catalog.=) job
       AND (e.job_id IS NULL OR e.job_id OPERATOR(pg_catalog.=) f.job_id)
       AND (since IS NULL OR e.ts OPERATOR(pg_catalog.>=) since)
     ORDER BY f.session_ordinal NULLS FIRST, f.path COLLATE "C", e.byte_offset
$$;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by (session_ordinal, path), then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. The caller''s rights (SELECT on session_file and event).';

-- cortex_buffer::recovery::sql::agent_state
CREATE FUNCTION cortex_buffer."agent_state"(
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
-- cortex_buffer::recovery::sql::agent_state
CREATE FUNCTION cortex_buffer."agent_state"(
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
-- cortex_buffer::recovery::sql::check_log_snapshot
CREATE FUNCTION cortex_buffer."check_log_snapshot"(
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
-- cortex_buffer::recovery::sql::job_timeline
CREATE FUNCTION cortex_buffer."job_timeline"(
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
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'job_timeline_wrapper';
-- cortex_buffer::recovery::sql::job_usage_from_buffer
CREATE FUNCTION cortex_buffer."job_usage_from_buffer"(
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
-- cortex_buffer::recovery::sql::log_entries
CREATE FUNCTION cortex_buffer."log_entries"(
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
-- cortex_buffer::recovery::sql::recovery_plan
CREATE FUNCTION cortex_buffer."recovery_plan"(
	"job_id" uuid, /* Option < Uuid > */
	"checkpoint_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"match_checkpoint" bool DEFAULT true /* Option < bool > */
) RETURNS jsonb /* RawJsonb */
STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recovery_plan_wrapper';
-- cortex_buffer::recovery::sql::session_file_refusal
CREATE FUNCTION cortex_buffer."session_file_refusal"(
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
-- cortex_buffer::recovery::sql::session_recovery
CREATE FUNCTION cortex_buffer."session_recovery"(
	"path" TEXT /* & str */
) RETURNS jsonb /* RawJsonb */
STRICT STABLE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_recovery_wrapper';
-- cortex_buffer::recovery::sql::session_recovery
CREATE FUNCTION cortex_buffer."session_recovery"(
	"session_id" uuid /* Uuid */
) RETURNS jsonb /* RawJsonb */
STRICT STABLE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_recovery_by_id_wrapper';
-- cortex_buffer::recovery::sql::session_usage
CREATE FUNCTION cortex_buffer."session_usage"(
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
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'session_usage_wrapper';

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
'One call at pod start (Spike #31 Question 6, extended): phase 1 the checkpoint by read_checkpoint''s rules (action first_run, resume or fail_job, resume_step), phase 2 the session buffer after the checkpoint''s marker: completed tool calls with their results (the skip list), calls in flight with an idempotency key each, lost events, anomalies, and why (mode buffer or checkpoint_only, reason from a closed list). Reads the index in the caller''s rights. See the README: Recovery plans.';
COMMENT ON FUNCTION cortex_buffer.session_recovery(text) IS
'A Claude Code transcript''s recovery plan (the keys of recovery_plan): every tool call of the transcript, paired by tool_use id over every content block. Path: session_file.path, or relative to sessions_dir. Reads the index.';
COMMENT ON FUNCTION cortex_buffer.session_recovery(uuid) IS
'session_recovery(path) for the transcript of a Claude Code session id.';
COMMENT ON FUNCTION cortex_buffer.agent_state(text) IS
'What the agent of a session file is doing: idle, acting, thinking or unknown; confirmed or inferred; the line that decided and the rule (README: Agent state). Reads the index, and the file''s bytes the index does not hold yet (files outside sessions_dir: superusers only).';
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
COMMENT ON COLUMN cortex_buffer.job_sessions.trusted IS 'Within cortex_buffer.max_corruption_ratio.';
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

-- Who may do what (as sql/privileges.sql does for a fresh install).
GRANT SELECT, INSERT, UPDATE, DELETE ON
    cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.circuit_config TO cortex_buffer_definer;
GRANT USAGE ON SEQUENCE cortex_buffer.checkpoint_history_seq, cortex_buffer.crash_seq, cortex_buffer.usage_ledger_seq,
      cortex_buffer.session_file_seq TO cortex_buffer_definer;

-- Functions: PUBLIC keeps only the pure ones (checkpoint_crc, canonical_json, llm_cost) and
-- indexer_worker (the worker's figures).
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
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text)
  FROM PUBLIC;

-- The agent: its own job's heartbeat, checkpoints, spend and recovery. The recovery lookups run
-- with the caller's rights: they read the index (session_file, event).
GRANT EXECUTE ON FUNCTION
    cortex_buffer.heartbeat(uuid), cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean),
    cortex_buffer.read_checkpoint(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.check_token_budget(uuid), cortex_buffer.reserve_budget(uuid, jsonb, text),
    cortex_buffer.settle_usage(uuid, jsonb, text), cortex_buffer.release_reservation(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid),
    cortex_buffer.job_usage_from_buffer(uuid), cortex_buffer.log_entries(text, text, integer, bigint, bigint),
    cortex_buffer.check_log_snapshot(text, bigint, bigint, text)
  TO cortex_buffer_agent;
GRANT SELECT, UPDATE (heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count)
    ON cortex_buffer.job TO cortex_buffer_agent;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.job_usage, cortex_buffer.agent_budget,
    cortex_buffer.session_file, cortex_buffer.event
    TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now(), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text),
    cortex_buffer.agent_state(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.job_events(uuid, timestamptz)
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.job_usage, cortex_buffer.session_file, cortex_buffer.event
    TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files TO cortex_buffer_control_plane;

-- The operator: budgets, prices, breaker configuration, file inspection and transcripts.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.verify_checkpoints(),
    cortex_buffer.reaper_index_sql(), cortex_buffer.index_sessions(text), cortex_buffer.file_integrity(text),
    cortex_buffer.index_now(), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text)
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files TO cortex_buffer_operator;
