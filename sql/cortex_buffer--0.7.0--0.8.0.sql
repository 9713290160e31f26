-- cortex_buffer 0.7.0 -> 0.8.0: the indexer at fleet scale. The worker learns of changes from the
-- kernel (cortex_buffer.watch, rescan_interval), indexes changed files in batches that share a
-- transaction, and may run as several processes (cortex_buffer.workers): indexer_worker() has a
-- row per process and indexer_status shows each. An unchanged file's session_file row is never
-- rewritten any more (last_seen's comment says so).
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.8.0'" to load this file. \quit

-- Room on each page for the row updates every indexing makes (HOT updates); rows written from
-- now on get it.
ALTER TABLE cortex_buffer.session_file SET (fillfactor = 50);

DROP VIEW cortex_buffer.indexer_status;
DROP FUNCTION cortex_buffer.indexer_worker();
CREATE FUNCTION cortex_buffer."indexer_worker"() RETURNS TABLE (
	"worker" INT,
	"worker_pid" INT,
	"worker_state" TEXT,
	"watch_mode" TEXT,
	"watches" bigint,
	"files" bigint,
	"last_pass_at" timestamp with time zone,
	"last_pass_ms" double precision,
	"passes" bigint,
	"last_rescan_at" timestamp with time zone,
	"rescans" bigint,
	"events_indexed" bigint,
	"errors" bigint
)
STRICT VOLATILE
LANGUAGE c
AS 'MODULE_PATHNAME', 'indexer_worker_wrapper';
COMMENT ON FUNCTION cortex_buffer.index_now() IS
'Wakes every indexer process for an immediate walk of the files it owns. Returns false, with a NOTICE saying why, when no enabled worker is running. Reads no file. Granted to cortex_buffer_control_plane and cortex_buffer_operator.';
COMMENT ON FUNCTION cortex_buffer.indexer_worker() IS
'Each indexer process''s figures from shared memory, one row per process (cortex_buffer.workers): number, pid, state, how it learns of changes and how many directories it watches, files it tracks, last pass and its duration, passes, last walk of everything it owns and how many, events indexed and files failed since the server started.';



-- What the indexer is doing: the worker's figures and totals over session_file.
CREATE VIEW cortex_buffer.indexer_status AS
SELECT w.worker_pid, w.worker_state, w.last_pass_at, w.last_pass_ms, w.passes,
       f.files_tracked, f.files_gone, f.bytes_indexed, f.bytes_pending, f.events_indexed, f.corrupt_lines,
       f.files_pending_tail, f.files_untrusted, f.files_failing, f.files_quarantined, f.last_error, f.last_error_at,
       a.worker_errors, w.watch_mode, w.watches, w.last_rescan_at, a.workers
  FROM cortex_buffer.indexer_worker() AS w,
       (SELECT coalesce(pg_catalog.sum(errors), 0)::pg_catalog.int8 AS worker_errors,
               pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'worker', worker, 'pid', worker_pid, 'state', worker_state, 'watch_mode', watch_mode,
                   'files', files, 'passes', passes, 'last_pass_at', last_pass_at, 'last_pass_ms', last_pass_ms,
                   'rescans', rescans, 'events_indexed', events_indexed, 'errors', errors) ORDER BY worker) AS workers
          FROM cortex_buffer.indexer_worker()) AS a,
       (SELECT pg_catalog.count(*) FILTER (WHERE gone_at IS NULL) AS files_tracked,
               pg_catalog.count(*) FILTER (WHERE gone_at IS NOT NULL) AS files_gone,
               coalesce(pg_catalog.sum(indexed_offset), 0)::pg_catalog.int8 AS bytes_indexed,
               coalesce(pg_catalog.sum(greatest(size_bytes OPERATOR(pg_catalog.-) indexed_offset, 0))
                        FILTER (WHERE gone_at IS NULL), 0)::pg_catalog.int8 AS bytes_pending,
               coalesce(pg_catalog.sum(valid_lines), 0)::pg_catalog.int8 AS events_indexed,
               coalesce(pg_catalog.sum(corrupt_lines), 0)::pg_catalog.int8 AS corrupt_lines,
               pg_catalog.count(*) FILTER (WHERE tail_pending AND gone_at IS NULL) AS files_pending_tail,
               pg_catalog.count(*) FILTER (WHERE NOT trusted AND generation OPERATOR(pg_catalog.>) 0) AS files_untrusted,
               pg_catalog.count(*) FILTER (WHERE failures OPERATOR(pg_catalog.>) 0) AS files_failing,
               pg_catalog.count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS files_quarantined,
               (pg_catalog.array_agg(last_error ORDER BY last_error_at DESC) FILTER (WHERE last_error IS NOT NULL))[1] AS last_error,
               pg_catalog.max(last_error_at) AS last_error_at
          FROM cortex_buffer.session_file) AS f
 WHERE w.worker OPERATOR(pg_catalog.=) 1;
COMMENT ON VIEW cortex_buffer.indexer_status IS
'The indexer at a glance: the first worker''s state, last pass and how it learns of changes, every worker in workers, files tracked, bytes indexed and pending (lag), events and corrupt lines indexed, files with a pending tail, untrusted, failing or quarantined, the latest error. Granted to pg_monitor and cortex_buffer_operator.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_pid IS 'The first worker''s pid (NULL when not running); every worker is in workers.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_state IS 'indexing, waiting, disabled, not running or not preloaded.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_at IS 'When the first worker''s last pass started (a pass looks at the directories that changed, or walks everything).';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_pass_ms IS 'How long it took.';
COMMENT ON COLUMN cortex_buffer.indexer_status.passes IS 'The first worker''s passes since the server started.';
COMMENT ON COLUMN cortex_buffer.indexer_status.watch_mode IS 'How the first worker learns of changes: notify (the kernel says), poll (cortex_buffer.watch = poll), poll (fallback) (watches could not be set: see the log), starting.';
COMMENT ON COLUMN cortex_buffer.indexer_status.watches IS 'Directories watched for changes.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_rescan_at IS 'When the first worker last walked the whole sessions directory: at start, after lost events, every cortex_buffer.rescan_interval, and at each poll in poll mode.';
COMMENT ON COLUMN cortex_buffer.indexer_status.workers IS 'Every indexer process (cortex_buffer.workers): worker, pid, state, watch_mode, files, passes, last_pass_at, last_pass_ms, rescans, events_indexed, errors.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_tracked IS 'Session files present.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_gone IS 'Session files deleted (their rows are kept).';
COMMENT ON COLUMN cortex_buffer.indexer_status.bytes_indexed IS 'Bytes indexed, over all files.';
COMMENT ON COLUMN cortex_buffer.indexer_status.bytes_pending IS 'Bytes discovered but not indexed yet (the lag).';
COMMENT ON COLUMN cortex_buffer.indexer_status.events_indexed IS 'Events indexed.';
COMMENT ON COLUMN cortex_buffer.indexer_status.corrupt_lines IS 'Corrupt lines recorded (truncated tails included).';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_pending_tail IS 'Files whose last line waits for a newline or the settle period.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_untrusted IS 'Files not trusted for recovery (corruption ratio over the limit).';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_failing IS 'Files whose last indexing attempt failed.';
COMMENT ON COLUMN cortex_buffer.indexer_status.files_quarantined IS 'Files left alone after repeated failures.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_error IS 'The most recent indexing error.';
COMMENT ON COLUMN cortex_buffer.indexer_status.last_error_at IS 'When it happened.';
COMMENT ON COLUMN cortex_buffer.indexer_status.worker_errors IS 'Files the workers failed to index since the server started.';


COMMENT ON COLUMN cortex_buffer.session_file.last_seen IS 'Last pass that saw the file change (new, grown, replaced or back). An unchanged file''s row is never rewritten, so that idle work does not grow with the files; indexer_status.last_rescan_at says when the worker last walked them all.';

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
