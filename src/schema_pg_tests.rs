//! Schema-wide checks that hold for every capability: documented objects.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Every table, view, index, function and column in the schema has a COMMENT (docs/design.md:
    /// operators read them with \d+ and \df+).
    #[pg_test]
    fn every_object_in_the_schema_is_commented() {
        let missing = Spi::get_one::<String>(
            "SELECT string_agg(what, ', ' ORDER BY what) FROM (
                 SELECT format('%s %s', CASE c.relkind WHEN 'i' THEN 'index' WHEN 'v' THEN 'view' ELSE 'table' END, c.relname) AS what
                   FROM pg_class c
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace
                    AND c.relkind IN ('r', 'v', 'm', 'p')
                    AND obj_description(c.oid, 'pg_class') IS NULL
                 UNION ALL
                 SELECT format('index %s', c.relname)
                   FROM pg_class c
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind = 'i'
                    AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid)
                    AND obj_description(c.oid, 'pg_class') IS NULL
                 UNION ALL
                 SELECT format('column %s.%s', c.relname, a.attname)
                   FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
                    AND col_description(c.oid, a.attnum) IS NULL
                 UNION ALL
                 SELECT format('function %s', p.oid::regprocedure)
                   FROM pg_proc p
                  WHERE p.pronamespace = 'cortex_buffer'::regnamespace
                    AND obj_description(p.oid, 'pg_proc') IS NULL
                 UNION ALL
                 SELECT 'schema cortex_buffer'
                  WHERE obj_description('cortex_buffer'::regnamespace, 'pg_namespace') IS NULL
             ) m",
        );
        assert_eq!(missing.ok().flatten(), None, "objects without COMMENT");
    }

    /// docs/install.md#grant-the-roles grants the roles to login roles; these lines are in it
    /// verbatim.
    const DOC_GRANTS: &str = "GRANT cortex_buffer_agent TO agent_app;
GRANT cortex_buffer_control_plane TO control_plane_app;
GRANT cortex_buffer_operator TO operator_app;";

    /// Runs `sql` as `role` and returns its SQLSTATE ("00000" when it worked).
    fn as_role(role: &str, sql: &str) -> String {
        use crate::testing::{run, sqlstate_of};
        run(&format!("SET ROLE {role}"));
        let (state, _) = sqlstate_of(sql);
        run("RESET ROLE");
        state
    }

    /// Each role does its whole job with exactly the grants docs/install.md gives it, and cannot do
    /// the next role's: the agent not the control plane's, the control plane not the
    /// operator's, the operator not the agent's. A role with no grants can do none of it.
    #[pg_test]
    fn each_role_does_its_job_and_not_the_next_ones() {
        use crate::testing::{new_job, new_job_with, one, run, spend_calls, TempRoot};

        assert!(
            include_str!("../docs/install.md").contains(DOC_GRANTS),
            "docs/install.md's grants changed: update DOC_GRANTS"
        );
        run("CREATE ROLE agent_app NOLOGIN; CREATE ROLE control_plane_app NOLOGIN; CREATE ROLE operator_app NOLOGIN");
        run("CREATE ROLE stranger NOLOGIN");
        run(DOC_GRANTS);
        run("SET cortex_buffer.settle_period = 0");
        // The cluster's sessions_dir (lib.rs: pg_test): a non-superuser indexes only there.
        let root = TempRoot::at("/tmp/cortex_buffer-pgtest-sessions");
        let job = new_job("cortex_buffer.job", "RUNNING");
        root.put(&format!("{job}/session-001.jsonl"), "{\"type\":\"A\",\"timestamp\":\"t\"}\n");
        let stale = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now() - interval '1 hour'");
        let paused = new_job("cortex_buffer.job", "WAITING_FOR_APPROVAL");
        let agent = one(&format!("SELECT agent_id::text FROM cortex_buffer.job WHERE id = '{job}'"));
        let sonnet = "claude-sonnet-4-5-20250929";
        let usage = r#"{"input_tokens": 1000}"#;
        let file = root.path(&format!("{job}/session-001.jsonl"));

        // The operator: budgets, prices, breaker configuration, files and transcripts.
        let operator_job = [
            format!("SELECT cortex_buffer.set_budget('{agent}', 1000000, 10)"),
            "INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok) VALUES ('m-test', now(), 1, 2, 3, 4, 5)".to_owned(),
            format!("INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('{agent}', 5)"),
            "SELECT count(*) FROM cortex_buffer.index_sessions()".to_owned(),
            format!("SELECT * FROM cortex_buffer.file_integrity('{file}')"),
            "SELECT count(*) FROM cortex_buffer.event".to_owned(),
            "SELECT count(*) FROM cortex_buffer.verify_checkpoints()".to_owned(),
            "SELECT cortex_buffer.reaper_index_sql()".to_owned(),
            "SELECT * FROM cortex_buffer.indexer_status".to_owned(),
            format!("SELECT count(*) FROM cortex_buffer.job_timeline('{job}')"),
            "SELECT count(*) FROM cortex_buffer.untrusted_session_files".to_owned(),
            "SELECT count(*) FROM cortex_buffer.corrupt_line".to_owned(),
        ];
        // The agent: its job's heartbeat, checkpoints, spend and recovery, with the job's token
        // (set below, for the whole session).
        let agent_job: Vec<String> = [
            format!("SELECT cortex_buffer.heartbeat('{job}')"),
            format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"),
            format!("SELECT * FROM cortex_buffer.read_checkpoint('{job}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_events('{job}')"),
            format!("SELECT cortex_buffer.recovery_plan('{job}')"),
            format!("SELECT * FROM cortex_buffer.job_usage_from_buffer('{job}')"),
            format!("SELECT count(*) FROM cortex_buffer.log_entries('{file}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_timeline('{job}')"),
            format!("SELECT cortex_buffer.authorize_job('{job}')"),
        ]
        .into_iter()
        .chain(spend_calls(&job))
        .collect();
        // The control plane: dispatching, reaping, retry decisions, breaker admission.
        let control_plane_job = [
            "INSERT INTO cortex_buffer.job (agent_id) VALUES (gen_random_uuid())".to_owned(),
            format!("SELECT cortex_buffer.record_crash('{job}', 137, 'OOMKilled')"),
            format!("SELECT * FROM cortex_buffer.retry_decision('{job}')"),
            "SELECT * FROM cortex_buffer.reap_zombies('5 minutes')".to_owned(),
            "SELECT * FROM cortex_buffer.idle_paused_jobs('1 hour')".to_owned(),
            format!("SELECT cortex_buffer.admit_job('{agent}', '{job}')"),
            format!("SELECT * FROM cortex_buffer.record_outcome('{agent}', '{job}', false)"),
            format!("SELECT * FROM cortex_buffer.circuit_state('{agent}')"),
            "SELECT cortex_buffer.index_now()".to_owned(),
            format!("SELECT * FROM cortex_buffer.agent_state('{file}')"),
            "SELECT count(*) FROM cortex_buffer.job_sessions".to_owned(),
            format!("SELECT cortex_buffer.job_token('{paused}')"),
        ];
        // What more than one role does (reading a job's recovery and events).
        let shared = [
            "count(*) FROM cortex_buffer.event",
            "index_now",
            "recovery_plan",
            "job_events",
            "job_usage_from_buffer",
            "agent_state",
            "job_sessions",
            "log_entries",
            "untrusted_session_files",
            "job_timeline",
            "authorize_job",
        ];
        let own = |s: &String| !shared.iter().any(|x| s.contains(x));
        let token = one(&format!("SELECT cortex_buffer.job_token('{job}')"));
        run(&format!("SET cortex_buffer.job_token = '{token}'"));
        for (role, work) in [
            ("operator_app", &operator_job[..]),
            ("agent_app", &agent_job[..]),
            ("control_plane_app", &control_plane_job[..]),
        ] {
            for sql in work.iter() {
                assert_eq!(as_role(role, sql), "00000", "{role} must be able to: {sql}");
            }
        }
        assert_eq!(one(&format!("SELECT status::text FROM cortex_buffer.job WHERE id = '{stale}'")), "RETRYING");
        assert_eq!(one(&format!("SELECT llm_calls::text FROM cortex_buffer.job_usage WHERE job_id = '{job}'")), "2");

        // Nobody does the next role's job, nor writes the controls it is governed by.
        let not_the_agent = control_plane_job.iter().filter(|s| own(s)).cloned().chain([
            format!("UPDATE cortex_buffer.job_usage SET cost_usd = 0 WHERE job_id = '{job}'"),
            format!("INSERT INTO cortex_buffer.crash (job_id, reason) VALUES ('{job}', 'crash')"),
            format!("DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'"),
            format!("UPDATE cortex_buffer.circuit SET open = false WHERE agent_id = '{agent}'"),
            "SELECT count(*) FROM cortex_buffer.corrupt_line".to_owned(),
            "DELETE FROM cortex_buffer.event".to_owned(),
            format!("UPDATE cortex_buffer.job SET status = 'COMPLETED' WHERE id = '{job}'"),
            // 0.6.0's direct grants are gone: every read and write goes through a function.
            format!("UPDATE cortex_buffer.job SET heartbeat_at = 'infinity' WHERE id = '{job}'"),
            "SELECT count(*) FROM cortex_buffer.job".to_owned(),
            "SELECT count(*) FROM cortex_buffer.event".to_owned(),
            "SELECT count(*) FROM cortex_buffer.session_file".to_owned(),
            "SELECT count(*) FROM cortex_buffer.job_token_key".to_owned(),
            // Its token is for its own job only.
            format!("SELECT cortex_buffer.heartbeat('{paused}')"),
            format!("SELECT cortex_buffer.job_token('{job}')"),
        ]);
        let not_the_control_plane = operator_job.iter().filter(|s| own(s)).cloned().chain([
            format!("UPDATE cortex_buffer.job_usage SET cost_usd = 0 WHERE job_id = '{job}'"),
            format!("UPDATE cortex_buffer.circuit SET open = false WHERE agent_id = '{agent}'"),
            format!("INSERT INTO cortex_buffer.crash (job_id, reason) VALUES ('{job}', 'crash')"),
        ]);
        let not_the_operator = agent_job.iter().filter(|s| own(s)).cloned().chain([
            format!("UPDATE cortex_buffer.job_usage SET cost_usd = 0 WHERE job_id = '{job}'"),
            format!("UPDATE cortex_buffer.circuit SET open = false WHERE agent_id = '{agent}'"),
            format!("DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'"),
        ]);
        for (role, refused) in [
            ("agent_app", not_the_agent.collect::<Vec<_>>()),
            ("control_plane_app", not_the_control_plane.collect()),
            ("operator_app", not_the_operator.collect()),
        ] {
            for sql in refused {
                assert_eq!(as_role(role, &sql), "42501", "{role} must not be able to: {sql}");
            }
        }
        for sql in operator_job.iter().chain(&agent_job).chain(&control_plane_job) {
            assert_eq!(as_role("stranger", sql), "42501", "a role without grants: {sql}");
        }
        // Pure functions and prices are everyone's.
        for sql in [
            "SELECT cortex_buffer.checkpoint_crc('{}')".to_owned(),
            format!("SELECT cortex_buffer.llm_cost('{usage}', '{sonnet}')"),
            "SELECT count(*) FROM cortex_buffer.model_price".to_owned(),
        ] {
            assert_eq!(as_role("stranger", &sql), "00000", "{sql}");
        }
    }
}
