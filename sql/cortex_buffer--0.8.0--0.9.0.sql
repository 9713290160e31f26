-- cortex_buffer 0.8.0 -> 0.9.0: push ingestion. Agents on nodes whose volumes the server cannot
-- see ship their session files over SQL: append_session_bytes applies each chunk exactly once
-- with the tailer's rules, pushed_offsets tells a shipper where to resume, await_pushed is the
-- agent's flush before a checkpoint. Sources and the jobs they may write are an operator's
-- mapping (push_source, push_grant); pushed files get session_file rows (push:/<relpath>) and
-- pushed_file rows; a new role, cortex_buffer_pusher. job_events orders files of the same
-- ordinal by first_seen (a rescheduled pod pushes session-001.jsonl again).
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.9.0'" to load this file. \quit

-- The pusher role (cluster-wide: created only when missing, never dropped), checked as
-- CREATE EXTENSION checks the others.
DO $$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'cortex_buffer_pusher') THEN
        CREATE ROLE cortex_buffer_pusher NOLOGIN;
    END IF;
    SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication INTO r
      FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'cortex_buffer_pusher';
    IF r.rolcanlogin OR r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication THEN
        RAISE EXCEPTION 'role cortex_buffer_pusher exists with LOGIN or other attributes cortex_buffer''s roles must not have'
            USING ERRCODE = '42501',
                  HINT = 'cortex_buffer''s roles are privilege containers: ALTER ROLE cortex_buffer_pusher NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION, then update again; grant the role to login roles instead.';
    END IF;
END
$$;

-- Pushed files are recorded under push:/<relpath>.
ALTER TABLE cortex_buffer.session_file DROP CONSTRAINT session_file_path_check;
ALTER TABLE cortex_buffer.session_file ADD CONSTRAINT session_file_path_check
    CHECK (path OPERATOR(pg_catalog.~~) '/%' OR path OPERATOR(pg_catalog.~~) 'push:/%');
COMMENT ON COLUMN cortex_buffer.session_file.path IS 'Absolute path: the canonical sessions_dir joined with the components below it; for a pushed file (append_session_bytes), push:/<relpath>, with #n after the first file pushed under that relpath.';

-- Push ingestion: session files shipped over SQL from nodes whose volumes the server cannot
-- see (append_session_bytes). An operator says which sources a login may push as and which
-- jobs each source may write; every pushed file gets a session_file row (its path push:/<relpath>,
-- so the tailer never meets it) and a pushed_file row with what the server holds of it.

-- The sources (a node or a pod that ships) and the login each belongs to. Operator-edited.
CREATE TABLE cortex_buffer.push_source (
    source     text PRIMARY KEY CHECK (source OPERATOR(pg_catalog.~) '^[A-Za-z0-9._:-]{1,128}$'),
    login      name NOT NULL,
    all_jobs   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    note       text
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
    held            bytea NOT NULL DEFAULT '\x'::pg_catalog.bytea,
    held_len        bigint NOT NULL DEFAULT 0 CHECK (held_len OPERATOR(pg_catalog.>=) 0),
    reported_size   bigint CHECK (reported_size OPERATOR(pg_catalog.>=) 0),
    reported_at     timestamptz,
    pushed_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    pushes          bigint NOT NULL DEFAULT 0,
    UNIQUE (job_id, relpath, n)
)
-- Every push updates its file's row; no updated column is indexed: keep the updates HOT.
WITH (fillfactor = 70);
CREATE INDEX pushed_file_identity_idx ON cortex_buffer.pushed_file (job_id, relpath, identity);
CREATE INDEX pushed_file_source_idx ON cortex_buffer.pushed_file (source);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.pushed_file', '');

COMMENT ON TABLE cortex_buffer.push_source IS
'Push ingestion''s sources: a node or pod that ships session files with append_session_bytes, and the login that may push as it. Edited by the operator (docs/operations.md: Push ingestion).';
COMMENT ON COLUMN cortex_buffer.push_source.source IS 'The source''s name, as the shipper passes it (1 to 128 letters, digits, ".", "_", ":", "-").';
COMMENT ON COLUMN cortex_buffer.push_source.login IS 'The role that may push as this source (a member of it may too).';
COMMENT ON COLUMN cortex_buffer.push_source.all_jobs IS 'The source may write any job''s files (a node''s shipper trusted with every pod on it); otherwise only the jobs in push_grant.';
COMMENT ON COLUMN cortex_buffer.push_source.created_at IS 'When the source was added.';
COMMENT ON COLUMN cortex_buffer.push_source.note IS 'Free text for the operator.';
COMMENT ON TABLE cortex_buffer.push_grant IS
'The jobs each push source may write (a pod''s shipper: its own job). Edited by the operator or the control plane at dispatch.';
COMMENT ON COLUMN cortex_buffer.push_grant.source IS 'The source.';
COMMENT ON COLUMN cortex_buffer.push_grant.job_id IS 'A job whose files the source may push.';
COMMENT ON COLUMN cortex_buffer.push_grant.granted_at IS 'When the grant was made.';
COMMENT ON TABLE cortex_buffer.pushed_file IS
'What the server holds of each pushed session file beyond its session_file row: its key (job, relpath, identity, n), the unterminated tail held between chunks, and the shipper''s last report.';
COMMENT ON COLUMN cortex_buffer.pushed_file.file_id IS 'The file''s session_file row (path push:/<relpath>, and #n after the first).';
COMMENT ON COLUMN cortex_buffer.pushed_file.job_id IS 'The job: the relpath''s first component.';
COMMENT ON COLUMN cortex_buffer.pushed_file.relpath IS 'The file''s path below its node''s sessions directory (<job_id>/session-001.jsonl).';
COMMENT ON COLUMN cortex_buffer.pushed_file.n IS 'The n-th file pushed under this relpath for this job: another identity (a rescheduled pod''s file), or a rewrite.';
COMMENT ON COLUMN cortex_buffer.pushed_file.identity IS 'The shipper''s file identity (device:inode:fingerprint).';
COMMENT ON COLUMN cortex_buffer.pushed_file.first_source IS 'The source that pushed the file first.';
COMMENT ON COLUMN cortex_buffer.pushed_file.source IS 'The source that pushed it last.';
COMMENT ON COLUMN cortex_buffer.pushed_file.dialect_decided IS 'The dialect is decided (a complete line that is an object came, or 256 KiB without one, or the end of the file); until then every byte is held.';
COMMENT ON COLUMN cortex_buffer.pushed_file.head IS 'The file''s first bytes (up to 1024): a chunk that repeats them differently is a rewrite, not a replay.';
COMMENT ON COLUMN cortex_buffer.pushed_file.held IS 'The bytes after indexed_offset the server holds: the unterminated tail, whole up to the line cap, else its first 1024 bytes.';
COMMENT ON COLUMN cortex_buffer.pushed_file.held_len IS 'How many bytes after indexed_offset the server has: the next chunk may start anywhere up to indexed_offset + held_len.';
COMMENT ON COLUMN cortex_buffer.pushed_file.reported_size IS 'The file''s size as the shipper last reported it; more than indexed_offset + held_len means bytes not pushed yet.';
COMMENT ON COLUMN cortex_buffer.pushed_file.reported_at IS 'When the shipper last reported the size (the server''s clock).';
COMMENT ON COLUMN cortex_buffer.pushed_file.pushed_at IS 'When the last push arrived.';
COMMENT ON COLUMN cortex_buffer.pushed_file.pushes IS 'Pushes received, replays included.';
COMMENT ON INDEX cortex_buffer.pushed_file_identity_idx IS 'Finds the file a push continues.';
COMMENT ON INDEX cortex_buffer.pushed_file_source_idx IS 'A source''s files, for pushed_offsets().';

CREATE FUNCTION cortex_buffer."pushed_offsets"(
	"source" TEXT /* Option < & str > */
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

CREATE FUNCTION cortex_buffer."await_pushed"(
	"job_id" uuid, /* Option < Uuid > */
	"relpath" TEXT, /* Option < & str > */
	"size" bigint, /* Option < i64 > */
	"timeout" interval DEFAULT '5 seconds' /* Option < pgrx :: datum :: Interval > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_pushed_wrapper';

-- Push ingestion's SQL face: append_session_bytes' declaration (its argument "final" is a Rust
-- keyword, which pgrx would spell r#final) and the comments on its functions (the tables are in
-- schema.sql).
CREATE FUNCTION cortex_buffer.append_session_bytes(
    source text, relpath text, start_offset bigint, chunk bytea, file_identity text,
    "final" boolean DEFAULT false, file_size bigint DEFAULT NULL)
RETURNS TABLE (committed_offset bigint, events_added bigint, corrupt_added bigint, action text)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'append_session_bytes_wrapper';
COMMENT ON FUNCTION cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint) IS
'Appends a chunk of a session file a shipper read on another node (source, relpath <job_id>/<file>.jsonl, start_offset, chunk, file_identity), exactly once and with the tailer''s rules: a chunk starting before the committed offset is applied from there on, one starting after what the server has is refused (55000, expected offset in the DETAIL); the unterminated tail is held until a later chunk ends it or final => true judges it; a new identity under a relpath is a new file after the earlier ones. file_size reports the file''s size. Returns committed_offset, events_added, corrupt_added and action (new, appended, held, replayed, reindex, failed, quarantined). Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.pushed_offsets(text) IS
'Where a shipper resumes: each file its source pushed last, with its identity, the committed offset, the bytes held after it, the length and CRC-32 of the file''s first bytes as the server has them (to tell a rewritten file), and the last reported size. Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.await_pushed(uuid, text, bigint, interval) IS
'The agent''s flush before a checkpoint: waits (at most timeout) until the server has the job''s pushed file relpath up to size bytes; true once it has, false when the time ran out. Checks the job token like every per-job function. Granted to cortex_buffer_agent and cortex_buffer_control_plane.';

-- job_events: files of the same ordinal in the order they appeared. Dropped and created, not
-- replaced (pgspot PS002).
DROP FUNCTION cortex_buffer.job_events(uuid, timestamptz);
-- A job's events in order, through its session files: session_file's job index finds the files,
-- and a file's events are contiguous in event's primary key, so the order needs no sort of the
-- job's rows by time (event_job_ts_idx serves ad-hoc "events of job J after T" queries). Only
-- lines that do not name another job than their directory's count as the job's. It runs as the
-- definer role (which reads the index) after authorize_job: a pod reads its own job's events.
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
     ORDER BY f.session_ordinal NULLS FIRST, f.first_seen, f.path COLLATE "C", e.byte_offset;
END
$$;
ALTER FUNCTION cortex_buffer.job_events(uuid, timestamptz) OWNER TO cortex_buffer_definer;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by (session_ordinal, first_seen, path), then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. Fleet roles read any job''s; an agent session its own job''s (authorize_job). Runs as cortex_buffer_definer.';

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
-- Push ingestion: the definer role keeps the pushed files and reads the operator's mapping.
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_file TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_definer;
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
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint),
    cortex_buffer.pushed_offsets(text), cortex_buffer.await_pushed(uuid, text, bigint, interval)
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
    cortex_buffer.await_pushed(uuid, text, bigint, interval)
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
    cortex_buffer.await_pushed(uuid, text, bigint, interval)
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

-- Push ingestion's mapping is the operator's to edit; the control plane registers a pod's
-- sidecar source and grants it its job at dispatch (and removes both when the job ends).
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.pushed_file TO cortex_buffer_operator;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.push_grant TO cortex_buffer_control_plane;
-- A pod's own source only: never one trusted with every job (all_jobs stays false).
GRANT SELECT, DELETE, INSERT (source, login, note) ON cortex_buffer.push_source TO cortex_buffer_control_plane;

-- The pusher (a shipper's login): pushes and reads its own sources' offsets, nothing else. Every
-- statement it causes runs as the definer role once its source and job check out.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint),
    cortex_buffer.pushed_offsets(text)
  TO cortex_buffer_pusher;
