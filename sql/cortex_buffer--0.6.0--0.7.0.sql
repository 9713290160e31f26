-- cortex_buffer 0.6.0 -> 0.7.0: recovery an agent can act on blindly. Checkpoints' high-water
-- marks (checkpoint_mark, recorded by write_checkpoint and by the checkpoint_marked trigger), the
-- per-job lookups catching their files up at call time (so they are volatile now), crash-cut
-- lines counted apart, the v2 idempotency key (call_idempotency_key), the binding check and its
-- trigger, clear_quarantine, and per-job authority for agent pods (job_token, authorize_job,
-- job_token_key): the agent role keeps no table privilege, and every grant is reset to exactly
-- sql/privileges.sql's.
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.7.0'" to load this file. \quit

-- The role an agent's call runs as once its job token checks out (see sql/privileges.sql):
-- created when missing, with the same rules as the install's roles.
DO $$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'cortex_buffer_agent_call') THEN
        CREATE ROLE cortex_buffer_agent_call NOLOGIN;
    END IF;
    SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication INTO r
      FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'cortex_buffer_agent_call';
    IF r.rolcanlogin OR r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication THEN
        RAISE EXCEPTION 'role % exists with LOGIN or other attributes cortex_buffer''s roles must not have', 'cortex_buffer_agent_call'
            USING ERRCODE = '42501',
                  HINT = 'cortex_buffer''s roles are privilege containers: ALTER ROLE cortex_buffer_agent_call NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION, then install again; grant the role to login roles instead.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
                WHERE roleid OPERATOR(pg_catalog.=) 'cortex_buffer_agent_call'::pg_catalog.regrole) THEN
        RAISE EXCEPTION 'role cortex_buffer_agent_call has members'
            USING ERRCODE = '42501',
                  HINT = 'Nobody may act as cortex_buffer_agent_call: REVOKE cortex_buffer_agent_call FROM each member, then install again.';
    END IF;
END
$$;

-- Crash artefacts: a line a writer's crash cut, directly followed by a new writer. Rows indexed
-- before this version count none (until their file is indexed again).
ALTER TABLE cortex_buffer.session_file
    ADD COLUMN crash_cut_lines bigint NOT NULL DEFAULT 0,
    ADD COLUMN cut_pending boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN cortex_buffer.session_file.crash_cut_lines IS 'Corrupt lines that are crash artefacts: a line cut by a writer''s crash and directly followed by a new writer (its first line on the same line, a sequence that starts again, or a SESSION_START). Counted in corrupt_lines, as scanBuffer counts them; recovery does not hold them against the file''s trust.';
COMMENT ON COLUMN cortex_buffer.session_file.cut_pending IS 'The last non-blank line indexed failed to parse and the next event will tell whether it was a crash cut.';

-- Every checkpoint's high-water mark: the job's session files (identity and size) at the
-- instant the checkpoint was stored. The shipped writer appends synchronously, so every byte
-- after these sizes was written after the checkpoint: recovery anchors marker-less files here
-- without comparing clocks. Recorded by write_checkpoint, and by the checkpoint_marked trigger
-- for checkpoints written by a plain UPDATE of the job table.
CREATE SEQUENCE cortex_buffer.checkpoint_mark_seq;
CREATE TABLE cortex_buffer.checkpoint_mark (
    mark_id       bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.checkpoint_mark_seq'::pg_catalog.regclass),
    job_id        uuid NOT NULL,
    crc           bigint NOT NULL CHECK (crc OPERATOR(pg_catalog.>=) 0 AND crc OPERATOR(pg_catalog.<=) 4294967295),
    checkpoint_id uuid,
    recorded_at   timestamptz NOT NULL,
    source        text NOT NULL CHECK (source OPERATOR(pg_catalog.=) ANY (ARRAY['write_checkpoint', 'trigger'])),
    dir_visible   boolean NOT NULL,
    files         jsonb NOT NULL
);
ALTER SEQUENCE cortex_buffer.checkpoint_mark_seq OWNED BY cortex_buffer.checkpoint_mark.mark_id;
CREATE INDEX checkpoint_mark_job_idx ON cortex_buffer.checkpoint_mark (job_id, crc, mark_id DESC);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_mark', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.checkpoint_mark_seq', '');

COMMENT ON SEQUENCE cortex_buffer.checkpoint_mark_seq IS 'Ids of checkpoint_mark rows (newer rows have larger ids).';
COMMENT ON TABLE cortex_buffer.checkpoint_mark IS
'Each stored checkpoint''s high-water mark: the job''s session files and their sizes at that instant (newest cortex_buffer.checkpoint_history_keep per job). recovery_plan reads a file without checkpoint markers from its size here, since the writer appends synchronously.';
COMMENT ON INDEX cortex_buffer.checkpoint_mark_job_idx IS 'A job''s marks for a checkpoint (by CRC), newest first.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.mark_id IS 'Record order (larger is newer).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.crc IS 'CRC-32 of the checkpoint''s canonical JSON, unsigned: the checkpoint the mark belongs to.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.checkpoint_id IS 'The checkpoint''s id when known (write_checkpoint''s, or the document''s own).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.recorded_at IS 'When the files were looked at (the database server''s clock).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.source IS 'write_checkpoint, or trigger (a plain UPDATE of the job table''s checkpoint column).';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.dir_visible IS 'Whether cortex_buffer.sessions_dir and the job''s directory in it could be read (a directory that did not exist yet had no files); a mark without it anchors nothing but the time.';
COMMENT ON COLUMN cortex_buffer.checkpoint_mark.files IS 'The job directory''s session files: [{"file": path relative to the job directory, "device", "inode", "size"}].';

-- The lookups that catch a job's files up at call time write the index: volatile.
ALTER FUNCTION cortex_buffer.recovery_plan(uuid, uuid, boolean) VOLATILE;
ALTER FUNCTION cortex_buffer.session_recovery(text) VOLATILE;
ALTER FUNCTION cortex_buffer.session_recovery(uuid) VOLATILE;
ALTER FUNCTION cortex_buffer.job_timeline(uuid) VOLATILE;
ALTER FUNCTION cortex_buffer.session_usage(text) VOLATILE;
COMMENT ON FUNCTION cortex_buffer.recovery_plan(uuid, uuid, boolean) IS
'One call at pod start (Spike #31 Question 6, extended). First brings the job''s session files up to date (a catch-up of its directory, exactly once, as cortex_buffer_definer; fresh.stale says when it could not). Phase 1: the checkpoint by read_checkpoint''s rules (action first_run, resume or fail_job, resume_step). Phase 2: the buffer after the checkpoint (its marker, its high-water mark, or, failing both, its write time): completed tool calls with their results (skip them), calls in flight and calls the bytes cannot settle (verify them), each with the idempotency key call_idempotency_key() computes, lost events, anomalies, and why (mode buffer or checkpoint_only, reason from a closed list). See docs/api.md.';

CREATE FUNCTION cortex_buffer."call_idempotency_key"(
	"job_id" uuid, /* Option < Uuid > */
	"checkpoint" jsonb, /* Option < RawJsonb > */
	"call_ordinal" INT, /* Option < i32 > */
	"tool_name" TEXT, /* Option < & str > */
	"tool_input" jsonb /* Option < RawJsonb > */
) RETURNS TEXT /* String */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'call_idempotency_key_wrapper';

CREATE FUNCTION cortex_buffer."check_binding"() RETURNS TABLE (
	"item" TEXT,  /* String */
	"ok" bool,  /* bool */
	"detail" TEXT,  /* String */
	"fix" TEXT  /* Option < String > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'check_binding_wrapper';

CREATE FUNCTION cortex_buffer."install_checkpoint_trigger"() RETURNS TEXT /* String */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'install_checkpoint_trigger_wrapper';

CREATE FUNCTION cortex_buffer."clear_quarantine"(
	"path" TEXT /* & str */
) RETURNS bool /* bool */
STRICT VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'clear_quarantine_wrapper';

CREATE FUNCTION cortex_buffer."checkpoint_marked"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'checkpoint_marked_wrapper';

COMMENT ON FUNCTION cortex_buffer.call_idempotency_key(uuid, jsonb, integer, text, jsonb) IS
'The idempotency key of a tool call, as recovery_plan reports it and as the agent computes it before the call: lower-case hex SHA-256 of "cortex_buffer/call/v2\n" || job_id || "\n" || checkpoint_ref || "\n" || call_ordinal || "\n" || tool_name || "\n" || input_hash, where checkpoint_ref is "crc:" || checkpoint_crc(checkpoint) ("-" for NULL), call_ordinal the call''s rank (from 1) among its writer''s tool calls since that checkpoint, tool_name '''' for NULL, and input_hash the hex SHA-256 of canonical_json(tool_input) (of null for NULL).';

-- Checkpoints the control plane writes itself (a plain UPDATE of job.checkpoint) get their
-- high-water mark here; write_checkpoint records its own. A bound table gets the same trigger
-- from install_checkpoint_trigger().
CREATE TRIGGER checkpoint_marked AFTER UPDATE OF checkpoint ON cortex_buffer.job
    FOR EACH ROW WHEN (NEW.checkpoint IS NOT NULL AND (OLD.checkpoint IS NULL OR NOT NEW.checkpoint OPERATOR(pg_catalog.=) OLD.checkpoint))
    EXECUTE FUNCTION cortex_buffer.checkpoint_marked();
COMMENT ON FUNCTION cortex_buffer.checkpoint_marked() IS
'Trigger function: records the high-water mark (cortex_buffer.checkpoint_mark) of a checkpoint written by a plain UPDATE of a job table''s checkpoint column: the job''s session files and their sizes at that instant.';
COMMENT ON TRIGGER checkpoint_marked ON cortex_buffer.job IS
'Checkpoints written without write_checkpoint get a high-water mark too, so recovery_plan can place the session files after them without clocks.';

COMMENT ON FUNCTION cortex_buffer.check_binding() IS
'What cortex_buffer checks about the job table cortex_buffer.job_table names: job_table (the column contract), reaper_index (an index serving reap_zombies), checkpoint_trigger (checkpoints written by a plain UPDATE get a high-water mark), agent_grants (cortex_buffer_agent_call, which agents'' calls run as, may read the table and write its agent columns). ok, what was found, and the statement that fixes a missing piece.';
COMMENT ON FUNCTION cortex_buffer.install_checkpoint_trigger() IS
'Puts the checkpoint_marked trigger (named cortex_buffer_checkpoint_marked) on the bound job table, once: checkpoints the control plane writes with a plain UPDATE then get their high-water mark. Runs with the caller''s rights: the table''s owner, or a superuser.';

COMMENT ON FUNCTION cortex_buffer.clear_quarantine(text) IS
'Lets the indexer try a quarantined session file again: clears session_file.quarantined_at, failures and last_error. True when the file was quarantined, false when it was not. index_sessions() and the per-job lookups retry it at once; the worker within cortex_buffer''s catalogue refresh (a minute). Path: session_file.path, or relative to sessions_dir.';

-- Per-job authority: the secret job tokens are MACs under, the function that issues them, the
-- check a pod (and job_events) runs; job_events now runs as the definer role after that check.
CREATE TABLE cortex_buffer.job_token_key (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret     bytea NOT NULL CHECK (pg_catalog.octet_length(secret) OPERATOR(pg_catalog.>=) 32),
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job_token_key', '');
COMMENT ON TABLE cortex_buffer.job_token_key IS
'The installation''s job-token secret (one row, made by the first job_token() call): job tokens are HMAC-SHA256 under it. Only cortex_buffer_definer reads it. Deleting the row (a superuser) revokes every token issued; the next job_token() makes a new secret.';
COMMENT ON COLUMN cortex_buffer.job_token_key.one IS 'Always true: the table holds one row.';
COMMENT ON COLUMN cortex_buffer.job_token_key.secret IS '32 bytes from the server''s strong random source.';
COMMENT ON COLUMN cortex_buffer.job_token_key.created_at IS 'When the secret was made.';

CREATE FUNCTION cortex_buffer."job_token"(
	"job_id" uuid /* pgrx :: Uuid */
) RETURNS TEXT /* String */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'job_token_wrapper';

CREATE FUNCTION cortex_buffer."authorize_job"(
	"job_id" uuid /* pgrx :: Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'authorize_job_wrapper';

COMMENT ON FUNCTION cortex_buffer.job_token(uuid) IS
'The job token of a job''s current attempt: cbjt1.<job id>.<attempt>.<HMAC-SHA256, hex>. The control plane issues it when it dispatches the job; the pod presents it once per session with set_config(''cortex_buffer.job_token'', $1, false), the token passed as a parameter (a literal SET shows the token in pg_stat_activity), and may then act on that job (and no other) until the job is dispatched again. Control plane and operator only.';
COMMENT ON FUNCTION cortex_buffer.authorize_job(uuid) IS
'True when this session may act on the job: a superuser, a control-plane or operator role, or a session whose cortex_buffer.job_token is the token of the job''s current attempt; 42501 with a HINT otherwise. A pod can call it once at start to check its token; job_events calls it.';

-- Replaced by drop and create (CREATE OR REPLACE could take over a function someone else made).
DROP FUNCTION cortex_buffer.job_events(uuid, timestamptz);
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM cortex_buffer.authorize_job(job);
    RETURN QUERY
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id OPERATOR(pg_catalog.=) f.file_id
     WHERE f.job_id OPERATOR(pg_catalog.=) job
       AND (e.job_id IS NULL OR e.job_id OPERATOR(pg_catalog.=) f.job_id)
       AND (since IS NULL OR e.ts OPERATOR(pg_catalog.>=) since)
     ORDER BY f.session_ordinal NULLS FIRST, f.path COLLATE "C", e.byte_offset;
END
$$;
ALTER FUNCTION cortex_buffer.job_events(uuid, timestamptz) OWNER TO cortex_buffer_definer;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by (session_ordinal, path), then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. Fleet roles read any job''s; an agent session its own job''s (authorize_job). Runs as cortex_buffer_definer.';

-- Every object's privileges, exactly as sql/privileges.sql sets them in a fresh install:
-- first reset to the owner's alone (undoing what default privileges added), then granted.
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
                 ELSE pg_catalog.quote_ident(o.grantee::pg_catalog.regrole::pg_catalog.text) END);
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
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
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
    cortex_buffer.check_log_snapshot(text, bigint, bigint, text), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now(), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text),
    cortex_buffer.agent_state(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.job_usage,
    cortex_buffer.session_file, cortex_buffer.event
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
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash,
    cortex_buffer.job_wait, cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files TO cortex_buffer_operator;
