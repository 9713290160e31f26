-- cortex_buffer 0.15.0 -> 0.16.0: security, third pass (issue 38).
--   * A push source proves it is the source with a token of its own, presented with every call
--     (source_token, the last argument of append_session_bytes, append_session_batch,
--     pushed_offsets and confirm_pushed): a login shared by many shippers no longer lets one act
--     as another. push_source.login may be NULL (any pusher with the token); token_generation
--     counts revocations; token_salt (random per row) keeps a source dropped and registered again
--     from taking back its old tokens.
--   * register_push_source(), push_source_token(), revoke_push_source_token() and
--     drop_push_source(): the control plane registers a pod's source at dispatch, with its job,
--     and gets its token, without creating a login.
-- The four push functions are dropped and created again with the new argument (a shipper of
-- 0.15.0 calls them without a token and is refused with a HINT saying what to pass).
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.16.0'" to load this file. \quit

ALTER TABLE cortex_buffer.push_source ALTER COLUMN login DROP NOT NULL;
ALTER TABLE cortex_buffer.push_source
    ADD COLUMN token_generation integer NOT NULL DEFAULT 1 CHECK (token_generation OPERATOR(pg_catalog.>=) 1);
-- A volatile default: each existing source gets a salt of its own (the table is rewritten; it
-- holds a row per source).
ALTER TABLE cortex_buffer.push_source ADD COLUMN token_salt uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();
COMMENT ON TABLE cortex_buffer.push_source IS
'Push ingestion''s sources: a node or pod that ships session files with append_session_bytes, proving it is the source with the source''s token (push_source_token) on every call, and optionally the login that alone may push as it. Registered by the operator, or by the control plane at dispatch (register_push_source; docs/operations.md: Push ingestion).';
COMMENT ON COLUMN cortex_buffer.push_source.login IS 'The role that alone may push as this source (a member of it may too), besides presenting its token; NULL: any role with cortex_buffer_pusher that presents the token.';
COMMENT ON COLUMN cortex_buffer.push_source.token_generation IS 'The generation of the source''s token: revoke_push_source_token counts it up, and every token issued before stops working.';
COMMENT ON COLUMN cortex_buffer.push_source.token_salt IS 'Random, drawn when the row is made and under every token''s MAC: a source dropped and registered again under the same name never takes back a token issued before.';

DROP FUNCTION cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint);
CREATE FUNCTION cortex_buffer.append_session_bytes(
    source text, relpath text, start_offset bigint, chunk bytea, file_identity text,
    "final" boolean DEFAULT false, file_size bigint DEFAULT NULL, source_token text DEFAULT NULL)
RETURNS TABLE (committed_offset bigint, events_added bigint, corrupt_added bigint, action text)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'append_session_bytes_wrapper';
COMMENT ON FUNCTION cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text) IS
'Appends a chunk of a session file a shipper read on another node (source, relpath <job_id>/<file>.jsonl, start_offset, chunk, file_identity, and source_token, the source''s token, which proves the caller is the source), exactly once and with the tailer''s rules: a chunk starting before the committed offset is applied from there on, one starting after what the server has is refused (55000, expected offset in the DETAIL); the unterminated tail is held until a later chunk ends it or final => true judges it; a new identity under a relpath is a new file after the earlier ones. file_size reports the file''s size. Returns committed_offset, events_added, corrupt_added and action (new, appended, held, replayed, reindex, failed, quarantined). Granted to cortex_buffer_pusher.';

DROP FUNCTION cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[]);
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

DROP FUNCTION cortex_buffer.pushed_offsets(text);
CREATE FUNCTION cortex_buffer."pushed_offsets"(
	"source" TEXT, /* Option < & str > */
	"source_token" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"relpath" TEXT,  /* String */
	"file_identity" TEXT,  /* String */
	"committed_offset" bigint,  /* i64 */
	"held_bytes" bigint,  /* i64 */
	"head_len" bigint,  /* i64 */
	"head_crc" bigint,  /* i64 */
	"reported_size" bigint,  /* Option < i64 > */
	"pushed_at" timestamp with time zone  /* Option < pgrx :: datum :: TimestampWithTimeZone > */
)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pushed_offsets_wrapper';
COMMENT ON FUNCTION cortex_buffer.pushed_offsets(text, text) IS
'Where a shipper resumes (with its source''s token, source_token): each file its source pushed last, with its identity, the committed offset, the bytes held after it, the length and CRC-32 of the file''s first bytes as the server has them (to tell a rewritten file), and the last reported size. Granted to cortex_buffer_pusher.';

DROP FUNCTION cortex_buffer.confirm_pushed(text, interval);
CREATE FUNCTION cortex_buffer."confirm_pushed"(
	"source" TEXT, /* Option < & str > */
	"as_of" interval DEFAULT '0 seconds', /* Option < pgrx :: datum :: Interval > */
	"source_token" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS timestamp with time zone /* Option < TimestampWithTimeZone > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'confirm_pushed_wrapper';
COMMENT ON FUNCTION cortex_buffer.confirm_pushed(text, interval, text) IS
'A shipper''s word (with its source''s token, source_token), while idle, that every file its source ships had been pushed whole as_of ago (when its look at the files began): one row per source in push_confirmation, never moved back. recovery_plan trusts a pushed file''s bytes as complete only when its source confirmed after the job''s previous attempt was superseded; otherwise the plan is stale (remote_unconfirmed). Returns the recorded confirmation time. Granted to cortex_buffer_pusher.';

CREATE FUNCTION cortex_buffer."register_push_source"(
	"source" TEXT, /* Option < & str > */
	"job_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"all_jobs" bool DEFAULT NULL, /* Option < bool > */
	"login" TEXT DEFAULT NULL, /* Option < & str > */
	"note" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* String */
VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'register_push_source_wrapper';

CREATE FUNCTION cortex_buffer."push_source_token"(
	"source" TEXT /* & str */
) RETURNS TEXT /* String */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'push_source_token_wrapper';

CREATE FUNCTION cortex_buffer."revoke_push_source_token"(
	"source" TEXT /* & str */
) RETURNS TEXT /* String */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'revoke_push_source_token_wrapper';

CREATE FUNCTION cortex_buffer."drop_push_source"(
	"source" TEXT /* & str */
) RETURNS bool /* bool */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'drop_push_source_wrapper';

COMMENT ON FUNCTION cortex_buffer.register_push_source(text, uuid, boolean, text, text) IS
'Registers a push source, or updates it (all_jobs, login and note, each when given), grants it job_id when given, and returns its token: what its shipper passes as source_token with every call (--source-token). No login is needed: with login NULL any role with cortex_buffer_pusher that presents the token pushes as the source; a login restricts it to that role''s members as well. For the control plane at dispatch, and operators.';
COMMENT ON FUNCTION cortex_buffer.push_source_token(text) IS
'The current token of a push source (the same until revoked, or until the source is dropped). For the control plane (pods'' own sources: never one trusted with every job) and operators.';
COMMENT ON FUNCTION cortex_buffer.revoke_push_source_token(text) IS
'Revokes every token of a push source issued so far (its generation counts up) and returns the new one. For the control plane (pods'' own sources) and operators.';
COMMENT ON FUNCTION cortex_buffer.drop_push_source(text) IS
'Drops a push source with its grants, its last confirmation and every token issued for it (a source registered again under the name has new ones; its pushed files stay): true when it was there. For a sidecar''s source once its job is terminal: a later attempt''s plan trusts the source''s files only after a confirmation, which a dropped source cannot give. For the control plane and operators.';

-- Who may do what (README: Privileges): every grant and revoke of the extension's objects is
-- here. Runs last in a fresh install; the upgrade scripts set the same.
--
-- First, every object's privileges go back to its owner's alone (and PUBLIC's USAGE of the
-- types, PostgreSQL's default): whatever ALTER DEFAULT PRIVILEGES the installing role has set
-- (for itself, or for PUBLIC, on tables, sequences, functions or types) added nothing that the
-- grants below do not give. The schema's own USAGE is PUBLIC's (sql/bootstrap.sql).
DO $reset$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass) AS obj, a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'm', 'p', 'f'])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('SEQUENCE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'S' AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure), a.grantee
          FROM pg_catalog.pg_proc p,
               pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TYPE %s', t.oid::pg_catalog.regtype), a.grantee
          FROM pg_catalog.pg_type t, pg_catalog.aclexplode(t.typacl) a
         WHERE t.typnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) t.typowner AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', o.obj,
            CASE WHEN o.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE o.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$reset$;

-- cortex_buffer_definer (NOLOGIN, not a superuser, no members) is the role the extension's
-- own writes run as: the functions switch to it for their statements on these tables, exactly
-- as a SECURITY DEFINER function owned by it would, and the background worker runs its
-- transactions as it. Statements on the bound job table run as the caller.
GRANT SELECT, INSERT, UPDATE, DELETE ON
    cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.circuit_config TO cortex_buffer_definer;
GRANT USAGE ON SEQUENCE cortex_buffer.checkpoint_history_seq, cortex_buffer.crash_seq, cortex_buffer.usage_ledger_seq,
      cortex_buffer.session_file_seq, cortex_buffer.checkpoint_mark_seq TO cortex_buffer_definer;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.checkpoint_mark TO cortex_buffer_definer;
-- The job-token secret: the definer role alone reads it (and makes it, on first use).
GRANT SELECT, INSERT ON cortex_buffer.job_token_key TO cortex_buffer_definer;
-- Push ingestion: the definer role keeps the pushed files and reads the operator's mapping.
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_file, cortex_buffer.push_confirmation TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_definer;
-- register_push_source, revoke_push_source_token and drop_push_source write the mapping as the
-- definer role, once they checked that a fleet role called them.
GRANT INSERT, UPDATE, DELETE ON cortex_buffer.push_source TO cortex_buffer_definer;
GRANT INSERT ON cortex_buffer.push_grant TO cortex_buffer_definer;
-- The partitioned layout: the indexer makes partitions ahead of new files, cleanup drops them
-- (both functions run as the extension's owner and touch nothing but those partitions).
GRANT SELECT ON cortex_buffer.event_partitioning TO cortex_buffer_definer;
GRANT EXECUTE ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint), cortex_buffer.event_partition_drop(regclass)
  TO cortex_buffer_definer;
-- job_events runs as the definer role (its owner) and asks authorize_job first.
GRANT EXECUTE ON FUNCTION cortex_buffer.authorize_job(uuid) TO cortex_buffer_definer;

-- Functions: PUBLIC keeps only the pure ones (checkpoint_crc, canonical_json, llm_cost,
-- call_idempotency_key, session_file_refusal) and indexer_worker (the worker's figures). The
-- reset above took EXECUTE from PUBLIC on every function: these get it back.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.checkpoint_crc(jsonb), cortex_buffer.canonical_json(jsonb),
    cortex_buffer.llm_cost(jsonb, text, timestamptz),
    cortex_buffer.call_idempotency_key(uuid, jsonb, integer, text, jsonb),
    cortex_buffer.session_file_refusal(boolean, integer, bigint, bigint, boolean, boolean, boolean, double precision),
    cortex_buffer.indexer_worker()
  TO PUBLIC;
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
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text),
    cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text),
    cortex_buffer.pushed_offsets(text, text), cortex_buffer.await_pushed(uuid, text, bigint, interval),
    cortex_buffer.confirm_pushed(text, interval, text), cortex_buffer.await_sources(uuid, interval),
    cortex_buffer.register_push_source(text, uuid, boolean, text, text), cortex_buffer.push_source_token(text),
    cortex_buffer.revoke_push_source_token(text), cortex_buffer.drop_push_source(text),
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report(), cortex_buffer.oversized_day_start(bigint, timestamptz)
  FROM PUBLIC;

-- Prices are reference data: everyone may read them (llm_cost() runs with the caller's
-- rights). The indexer's status is for monitoring and operators.
GRANT SELECT ON cortex_buffer.model_price TO PUBLIC;
REVOKE ALL ON cortex_buffer.indexer_status FROM PUBLIC;
GRANT SELECT ON cortex_buffer.indexer_status TO pg_monitor, cortex_buffer_operator;

-- cortex_buffer_agent_call (NOLOGIN, no members) is the role an agent's call runs as once its
-- job token checks out: it reads what the lookups read and writes the job table's agent columns.
-- It cannot read the token secret or write the extension's tables (those statements switch to
-- the definer role, as everyone's do), so a bound table's triggers, which run as this role during
-- an agent's call, gain nothing the agent's functions do not already do.
GRANT SELECT, UPDATE (heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count)
    ON cortex_buffer.job TO cortex_buffer_agent_call;
GRANT SELECT ON
    cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome, cortex_buffer.job_usage,
    cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_agent_call;

-- The agent: its own job's heartbeat, checkpoints, spend, recovery, timeline, state and events,
-- and nothing else. Each of these functions checks the session's job token (cortex_buffer.job_token)
-- against the job it is asked about, and then runs as cortex_buffer_agent_call: the agent role
-- holds no privilege on any table, the job table included.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.heartbeat(uuid), cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean),
    cortex_buffer.read_checkpoint(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.check_token_budget(uuid), cortex_buffer.reserve_budget(uuid, jsonb, text),
    cortex_buffer.settle_usage(uuid, jsonb, text), cortex_buffer.release_reservation(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid),
    cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid), cortex_buffer.job_timeline(uuid),
    cortex_buffer.job_usage_from_buffer(uuid), cortex_buffer.log_entries(text, text, integer, bigint, bigint),
    cortex_buffer.check_log_snapshot(text, bigint, bigint, text), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval), cortex_buffer.await_sources(uuid, interval)
  TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now(), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text),
    cortex_buffer.agent_state(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval), cortex_buffer.await_sources(uuid, interval)
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.job_usage,
    cortex_buffer.session_file, cortex_buffer.event
    TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_control_plane;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_control_plane;

-- The operator: budgets, prices, breaker configuration, file inspection and transcripts.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.verify_checkpoints(),
    cortex_buffer.reaper_index_sql(), cortex_buffer.index_sessions(text), cortex_buffer.file_integrity(text),
    cortex_buffer.index_now(), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_operator;
-- Retention deletes files as the database's operating-system user: the operator's alone
-- (and superusers'). It reads the bound job table as its caller.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report()
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash,
    cortex_buffer.job_wait, cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_operator;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_operator;

-- Push ingestion's mapping is the operator's to edit; the control plane registers a pod's
-- sidecar source and grants it its job at dispatch (and removes both when the job ends).
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.pushed_file, cortex_buffer.push_confirmation TO cortex_buffer_operator;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.push_grant TO cortex_buffer_control_plane;
-- A pod's own source only: never one trusted with every job (all_jobs stays false). No DELETE:
-- drop_push_source removes a pod's source, and refuses an operator's node source.
GRANT SELECT, INSERT (source, login, note) ON cortex_buffer.push_source TO cortex_buffer_control_plane;
-- Sources and their tokens through functions (register_push_source refuses all_jobs to all but
-- operators): what a shipper presents with every call.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.register_push_source(text, uuid, boolean, text, text), cortex_buffer.push_source_token(text),
    cortex_buffer.revoke_push_source_token(text), cortex_buffer.drop_push_source(text)
  TO cortex_buffer_control_plane, cortex_buffer_operator;

-- The pusher (a shipper's login): pushes and reads its own sources' offsets, nothing else, each
-- call with the source's token. Every statement it causes runs as the definer role once its
-- source, token and job check out.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint, text),
    cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text),
    cortex_buffer.pushed_offsets(text, text), cortex_buffer.confirm_pushed(text, interval, text)
  TO cortex_buffer_pusher;

-- The partitioned layout (partition_events()): each partition of event and corrupt_line has its
-- parent's grants, which the reset above took away (the indexer writes into the partitions
-- directly, as cortex_buffer_definer).
SELECT cortex_buffer.copy_table_grants(i.inhparent::pg_catalog.regclass, i.inhrelid::pg_catalog.regclass)
  FROM pg_catalog.pg_inherits i
 WHERE i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                   'cortex_buffer.corrupt_line'::pg_catalog.regclass]);
