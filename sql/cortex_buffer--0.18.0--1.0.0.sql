-- cortex_buffer 0.18.0 -> 1.0.0: the first stable release, and the start of the SQL history
-- (the one upgrade script shipped: 0.18.0 is the last 0.x release; UPDATING.md says how to come
-- from an earlier one).
--   * Retention is one path for both storage layouts: in the partitioned one (partition_events())
--     the same rows go as in the plain one, and a partition goes whole only when every file it
--     holds goes. Only the cleanup's comment changes; no table, function or data does.
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '1.0.0'" to load this file. \quit

COMMENT ON FUNCTION cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision) IS
'Applies the retention policy (docs/operations.md#retention): deletes job directories of jobs terminal for longer than post_terminal (cortex_buffer.keep_failed_for for failed ones, when longer) and of orphans whose newest file is older than post_terminal, files older than max_file_age (except those a live job''s recovery plan reads), index rows of files gone for cortex_buffer.gone_retention, and per-job rows of jobs gone or terminal past cortex_buffer.job_rows_retention. One row per action: delete_dir, delete_file, delete_rows, drop_partition, keep or error. Index rows go in the calling transaction; files are unlinked when it commits. In the partitioned layout (partition_events()) the same rules decide and the same rows go, but a partition of event and corrupt_line all of whose files go (or that no file holds any more) is dropped whole instead of deleted row by row; each call also makes the partitions ahead of new files. Never follows symbolic links; locks no job row; refuses when most job ids are unknown to the job table (max_unknown_ratio). dry_run changes nothing and returns the same rows.';

-- Who may do what (docs/operations.md#privileges): every grant and revoke of the extension's objects is
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
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_held TO cortex_buffer_definer;
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
GRANT SELECT ON cortex_buffer.pushed_file, cortex_buffer.pushed_held, cortex_buffer.push_confirmation TO cortex_buffer_operator;
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
