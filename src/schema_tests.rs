//! Schema-wide checks that hold for every capability: documented objects.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Every table, view, index, function and column in the schema has a COMMENT (DESIGN.md:
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

    /// The grants the README's *Privileges* section lists, verbatim, for `cb_plane`.
    const README_GRANTS: &str = "GRANT SELECT, UPDATE ON cortex_buffer.job TO cb_plane;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.checkpoint_history, cortex_buffer.job_wait TO cb_plane;
GRANT SELECT, INSERT ON cortex_buffer.crash, cortex_buffer.usage_ledger TO cb_plane;
GRANT USAGE ON SEQUENCE cortex_buffer.checkpoint_history_seq, cortex_buffer.crash_seq,
      cortex_buffer.usage_ledger_seq TO cb_plane;
GRANT SELECT ON cortex_buffer.circuit_config, cortex_buffer.agent_budget TO cb_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job_usage TO cb_plane;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit, cortex_buffer.circuit_admission,
      cortex_buffer.circuit_outcome, cortex_buffer.budget_reservation TO cb_plane;";

    /// Every job, liveness and spend function works for a role with exactly the documented
    /// grants, and none for a role without them.
    #[pg_test]
    fn the_documented_grants_suffice_and_a_role_without_them_is_refused() {
        use crate::testing::{new_job, new_job_with, one, run, sqlstate_of};

        let readme = include_str!("../README.md").replace("control_plane;", "cb_plane;");
        assert!(readme.contains(README_GRANTS), "the README's grants changed: update README_GRANTS");
        run("CREATE ROLE cb_plane NOLOGIN; CREATE ROLE cb_stranger NOLOGIN");
        run(README_GRANTS);
        let job = new_job("cortex_buffer.job", "RUNNING");
        let stale = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now() - interval '1 hour'");
        let paused = new_job("cortex_buffer.job", "WAITING_FOR_APPROVAL");
        let agent = one(&format!("SELECT agent_id::text FROM cortex_buffer.job WHERE id = '{job}'"));
        // Budgets are the operator's (INSERT, UPDATE on agent_budget).
        run(&format!("SELECT cortex_buffer.set_budget('{agent}', 1000000, 10)"));
        let sonnet = "claude-sonnet-4-5-20250929";
        let usage = r#"{"input_tokens": 1000}"#;

        run("SET ROLE cb_plane");
        let reservation = one(&format!(
            "SELECT reservation_id::text FROM cortex_buffer.reserve_budget('{job}', '{usage}', '{sonnet}')"
        ));
        let calls = [
            format!("SELECT cortex_buffer.heartbeat('{job}')::text"),
            format!("SELECT cortex_buffer.heartbeat('{paused}')::text"),
            format!("SELECT step_index::text FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"),
            format!("SELECT source FROM cortex_buffer.read_checkpoint('{job}')"),
            "SELECT count(*)::text FROM cortex_buffer.verify_checkpoints()".to_owned(),
            format!("SELECT (cortex_buffer.record_crash('{job}', 137, 'OOMKilled') > 0)::text"),
            format!("SELECT strategy FROM cortex_buffer.retry_decision('{job}')"),
            "SELECT string_agg(new_status, ',') FROM cortex_buffer.reap_zombies('5 minutes')".to_owned(),
            "SELECT count(*)::text FROM cortex_buffer.idle_paused_jobs('1 hour')".to_owned(),
            format!("SELECT cortex_buffer.admit_job('{agent}', '{job}')::text"),
            format!("SELECT state FROM cortex_buffer.record_outcome('{agent}', '{job}', false)"),
            format!("SELECT state FROM cortex_buffer.circuit_state('{agent}')"),
            format!("SELECT cortex_buffer.llm_cost('{usage}', '{sonnet}')::text"),
            format!("SELECT llm_calls::text FROM cortex_buffer.record_usage('{job}', '{sonnet}', '{usage}', 'r1')"),
            format!("SELECT reason FROM cortex_buffer.check_token_budget('{job}')"),
            format!("SELECT reason FROM cortex_buffer.reserve_budget('{job}', '{usage}', '{sonnet}')"),
            format!("SELECT llm_calls::text FROM cortex_buffer.settle_usage('{reservation}', '{usage}')"),
            format!("SELECT cortex_buffer.release_reservation('{reservation}')::text"),
        ];
        let got: Vec<String> = calls.iter().map(|c| one(c)).collect();
        run("RESET ROLE");
        assert_eq!(
            got,
            [
                "true",
                "true",
                "1",
                "current",
                "0",
                "true",
                "reduced_footprint",
                "RETRYING",
                "0",
                "true",
                "closed",
                "closed",
                "0.003",
                "1",
                "within_budget",
                "within_budget",
                "2",
                "false"
            ]
        );
        assert_eq!(one(&format!("SELECT status::text FROM cortex_buffer.job WHERE id = '{stale}'")), "RETRYING");
        assert_eq!(
            sqlstate_of(&format!("SET ROLE cb_plane; SELECT cortex_buffer.set_budget('{agent}', 1)")).0,
            "42501"
        );
        run("RESET ROLE");

        run("SET ROLE cb_stranger");
        for c in &calls {
            let (state, _) = sqlstate_of(c);
            // Prices are reference data: model_price is readable by everyone.
            let expected = if c.contains("llm_cost") { "00000" } else { "42501" };
            assert_eq!(state, expected, "{c} without grants");
        }
        run("RESET ROLE");
    }
}
