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

DROP FUNCTION cortex_buffer.job_events(uuid, timestamptz);
CREATE FUNCTION cortex_buffer.job_events(job uuid, since timestamptz DEFAULT NULL)
RETURNS SETOF cortex_buffer.event LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.*
      FROM cortex_buffer.session_file f
      JOIN cortex_buffer.event e ON e.file_id OPERATOR(pg_catalog.=) f.file_id
     WHERE f.job_id OPERATOR(pg_catalog.=) job
       AND (e.job_id IS NULL OR e.job_id OPERATOR(pg_catalog.=) f.job_id)
       AND (since IS NULL OR e.ts OPERATOR(pg_catalog.>=) since)
     ORDER BY f.session_ordinal NULLS FIRST, f.file_id, e.byte_offset
$$;
ALTER FUNCTION cortex_buffer.job_events(uuid, timestamptz) OWNER TO cortex_buffer_definer;
COMMENT ON FUNCTION cortex_buffer.job_events(uuid, timestamptz) IS
'A job''s events (optionally those at or after since), in order: session files by session_ordinal, then byte offset; lines naming another job than their directory''s are left out. Uses session_file''s job index and event''s primary key. Runs as cortex_buffer_definer: callers need EXECUTE only (granted to cortex_buffer_agent and cortex_buffer_operator).';

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
    cortex_buffer.file_integrity(text), cortex_buffer.job_events(uuid, timestamptz)
  FROM PUBLIC;

-- The agent: its own job's heartbeat, checkpoints, spend and recovery.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.heartbeat(uuid), cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean),
    cortex_buffer.read_checkpoint(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.check_token_budget(uuid), cortex_buffer.reserve_budget(uuid, jsonb, text),
    cortex_buffer.settle_usage(uuid, jsonb, text), cortex_buffer.release_reservation(uuid),
    cortex_buffer.job_events(uuid, timestamptz)
  TO cortex_buffer_agent;
GRANT SELECT, UPDATE (heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count)
    ON cortex_buffer.job TO cortex_buffer_agent;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.job_usage, cortex_buffer.agent_budget
    TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now()
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;

-- The operator: budgets, prices, breaker configuration, file inspection and transcripts.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.verify_checkpoints(),
    cortex_buffer.reaper_index_sql(), cortex_buffer.index_sessions(text), cortex_buffer.file_integrity(text),
    cortex_buffer.index_now(), cortex_buffer.job_events(uuid, timestamptz)
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
