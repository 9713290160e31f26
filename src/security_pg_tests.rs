//! `#[pg_test]`s of the security rules (docs/operations.md#privileges): no function resolves an operator
//! or function through a search path someone else controls, file reads reveal nothing outside
//! `sessions_dir`, superuser-only cases are refused inside security-restricted operations, and
//! a job's lines are never taken from another job's directory.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{new_job, new_job_with, one, run, spend_calls, sqlstate_of, TempRoot};

    const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";
    const OTHER_JOB: &str = "0193a8b2-7c41-7d2e-9f00-000000000002";

    /// Overloads a role that can create objects in `public` could plant, each recording who
    /// ran it: the operators and functions the extension's statements use with argument types
    /// that have no exact match in pg_catalog, and some that do (which win when public comes
    /// first in the path).
    const CANARIES: &str = r#"
        CREATE TABLE public.canary (who text, what text);
        GRANT INSERT ON public.canary TO PUBLIC;
        CREATE FUNCTION public.canary_mul_num_int(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, '*(numeric,integer)'); RETURN $1 OPERATOR(pg_catalog.*) $2; END $$;
        CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.canary_mul_num_int);
        CREATE FUNCTION public.canary_mul_int8_iv(bigint, interval) RETURNS interval LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, '*(bigint,interval)'); RETURN $1 OPERATOR(pg_catalog.*) $2; END $$;
        CREATE OPERATOR public.* (LEFTARG = bigint, RIGHTARG = interval, FUNCTION = public.canary_mul_int8_iv);
        CREATE FUNCTION public.canary_eq_status(cortex_buffer.job_status, cortex_buffer.job_status) RETURNS boolean LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, '=(job_status)'); RETURN $1::text OPERATOR(pg_catalog.=) $2::text; END $$;
        CREATE OPERATOR public.= (LEFTARG = cortex_buffer.job_status, RIGHTARG = cortex_buffer.job_status, FUNCTION = public.canary_eq_status);
        CREATE FUNCTION public.canary_eq_uuid(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, '=(uuid)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
        CREATE OPERATOR public.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = public.canary_eq_uuid);
        CREATE FUNCTION public.canary_eq_int8(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, '=(bigint)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
        CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.canary_eq_int8);
        CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, 'unnest(bigint[])'); RETURN QUERY SELECT pg_catalog.unnest($1); END $$;
        CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, 'now()'); RETURN pg_catalog.now(); END $$;
        CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, 'nextval(text)'); RETURN pg_catalog.nextval($1); END $$;
        CREATE FUNCTION public.starts_with(text, text) RETURNS boolean LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO public.canary VALUES (current_user, 'starts_with'); RETURN pg_catalog.starts_with($1, $2); END $$;
    "#;

    /// With a path that puts `public` first (as the database owner can with ALTER DATABASE ...
    /// SET), every function of the extension, and the indexer, run without calling any of the
    /// overloads.
    #[pg_test]
    fn public_overloads_are_never_called_whatever_the_search_path() {
        run(CANARIES);
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("canary");
        let line = |seq: u32, t: &str| {
            format!(
                r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:0{seq}.000Z","job_id":"{JOB}","seq":{seq},"invocation_id":"i{seq}"}}"#
            )
        };
        root.put(
            &format!("{JOB}/session-001.jsonl"),
            format!("{}\n{}\nnot json\n", line(0, "TOOL_START"), line(1, "TOOL_RESULT")),
        );
        let job = new_job("cortex_buffer.job", "RUNNING");
        let stale = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now() - interval '1 hour'");
        let paused = new_job("cortex_buffer.job", "WAITING_FOR_APPROVAL");
        let agent = one(&format!("SELECT agent_id::text FROM cortex_buffer.job WHERE id = '{job}'"));
        let usage = r#"{"input_tokens": 10, "output_tokens": 5}"#;
        let sonnet = "claude-sonnet-4-5-20250929";
        run("SET search_path = public, pg_catalog");
        let calls = [
            format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()),
            format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()),
            format!("SELECT * FROM cortex_buffer.file_integrity('{}')", root.path(&format!("{JOB}/session-001.jsonl"))),
            format!("SELECT count(*) FROM cortex_buffer.job_events('{JOB}')"),
            "SELECT count(*) FROM cortex_buffer.indexer_status".to_owned(),
            format!("SELECT cortex_buffer.heartbeat('{job}')"),
            format!("SELECT cortex_buffer.heartbeat('{paused}')"),
            format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"),
            format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', jsonb_build_object('step_index', 2, 'pad', repeat('x', 5000)))"),
            format!("SELECT * FROM cortex_buffer.read_checkpoint('{job}')"),
            "SELECT count(*) FROM cortex_buffer.verify_checkpoints()".to_owned(),
            format!("SELECT cortex_buffer.record_crash('{job}', 137, 'OOMKilled')"),
            format!("SELECT * FROM cortex_buffer.retry_decision('{job}')"),
            "SELECT count(*) FROM cortex_buffer.reap_zombies('5 minutes')".to_owned(),
            "SELECT count(*) FROM cortex_buffer.idle_paused_jobs('1 second')".to_owned(),
            format!("SELECT cortex_buffer.admit_job('{agent}', '{job}')"),
            format!("SELECT * FROM cortex_buffer.record_outcome('{agent}', '{job}', false)"),
            format!("SELECT * FROM cortex_buffer.circuit_state('{agent}')"),
            format!("SELECT cortex_buffer.llm_cost('{usage}', '{sonnet}')"),
            format!("SELECT * FROM cortex_buffer.set_budget('{agent}', 1000000, 10)"),
        ];
        for sql in calls.iter().chain(&spend_calls(&job)) {
            let (state, _) = sqlstate_of(sql);
            assert_eq!(state, "00000", "{sql}");
        }
        run("RESET search_path");
        assert_eq!(one(&format!("SELECT status::text FROM cortex_buffer.job WHERE id = '{stale}'")), "RETRYING");
        assert_eq!(one(&format!("SELECT count(*)::text FROM cortex_buffer.job_events('{JOB}')")), "2");
        assert_eq!(
            one("SELECT coalesce(string_agg(DISTINCT who || ' ran ' || what, '; '), 'nothing') FROM public.canary"),
            "nothing"
        );
    }

    /// A non-superuser learns nothing about a path outside sessions_dir: whether the target
    /// exists, is readable, or is reached through `..` or a link, the answer is the same 42501,
    /// given before the file system is touched.
    #[pg_test]
    fn file_integrity_is_no_oracle_for_files_outside_sessions_dir() {
        let dir = "/tmp/cortex_buffer-pgtest-sessions";
        let root = TempRoot::at(dir);
        root.put(&format!("{JOB}/session-001.jsonl"), "{\"type\":\"A\",\"timestamp\":\"t\"}\n");
        std::os::unix::fs::symlink("/etc/passwd", root.0.join(format!("{JOB}/escape.jsonl")))
            .unwrap_or_else(|e| panic!("{e}"));
        run("CREATE ROLE cb_inspector NOLOGIN; GRANT cortex_buffer_operator TO cb_inspector; SET ROLE cb_inspector");
        let answers: Vec<(String, Option<String>)> = [
            format!("{dir}/../../etc/passwd"),
            format!("{dir}/../../no/such/file"),
            format!("{dir}/{JOB}/../../../etc/shadow"),
            format!("{dir}/{JOB}/escape.jsonl"),
            "/etc/passwd".to_owned(),
            "/no/such/file".to_owned(),
        ]
        .iter()
        .map(|p| sqlstate_of(&format!("SELECT * FROM cortex_buffer.file_integrity('{p}')")))
        .collect();
        // Inside, the file is judged.
        let inside =
            sqlstate_of(&format!("SELECT * FROM cortex_buffer.file_integrity('{dir}/{JOB}/session-001.jsonl')"));
        run("RESET ROLE");
        for (state, hint) in &answers {
            assert_eq!(state, "42501");
            assert_eq!(hint.as_deref(), answers[0].1.as_deref(), "every refusal reads the same");
        }
        assert_eq!(inside.0, "00000");
        // Superusers may look anywhere.
        assert_eq!(one("SELECT severity FROM cortex_buffer.file_integrity('/etc/passwd')"), "corrupt_interior");
    }

    /// A materialized view over index_sessions(dir) owned by a non-superuser: refreshing it
    /// (even by a superuser) runs as its owner inside a security-restricted operation, and is
    /// refused.
    #[pg_test]
    fn a_materialized_view_refresh_cannot_borrow_a_superusers_rights() {
        run("CREATE ROLE cb_mallory NOLOGIN; GRANT cortex_buffer_operator TO cb_mallory; GRANT CREATE ON SCHEMA public TO cb_mallory");
        run("SET ROLE cb_mallory");
        run("CREATE MATERIALIZED VIEW public.mallory AS SELECT * FROM cortex_buffer.index_sessions('/etc') WITH NO DATA");
        run("RESET ROLE");
        let (state, hint) = sqlstate_of("REFRESH MATERIALIZED VIEW public.mallory");
        assert_eq!(state, "42501");
        assert!(hint.is_some_and(|h| h.contains("without arguments")));
        // An expression index's owner code during a superuser's ANALYZE is refused the same way.
        run("SET ROLE cb_mallory");
        run("CREATE TABLE public.mallory_t (x int)");
        run("CREATE FUNCTION public.mallory_f(int) RETURNS bigint IMMUTABLE LANGUAGE sql AS $$ SELECT count(*) FROM cortex_buffer.index_sessions('/etc') $$");
        run("RESET ROLE");
        run("INSERT INTO public.mallory_t VALUES (1)");
        let (state, _) = sqlstate_of("CREATE INDEX ON public.mallory_t (public.mallory_f(x))");
        assert_eq!(state, "42501", "index build runs the owner's function as its owner");
    }

    /// A line naming another job than its directory's is counted and never taken as either
    /// job's: an agent cannot inject events into another job's recovery.
    #[pg_test]
    fn lines_claiming_another_job_are_not_that_jobs() {
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("isolation");
        let line =
            |job: &str, t: &str| format!(r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:00Z","job_id":"{job}"}}"#);
        // In JOB's directory: one of its own lines, one claiming OTHER_JOB, one naming nobody.
        root.put(
            &format!("{JOB}/session_20260223T143022Z_pod-a.jsonl"),
            format!(
                "{}\n{}\n{}\n",
                line(JOB, "MINE"),
                line(OTHER_JOB, "FORGED"),
                r#"{"type":"PLAIN","timestamp":"t"}"#
            ),
        );
        root.put(
            &format!("{OTHER_JOB}/session_20260223T143022Z_pod-b.jsonl"),
            format!("{}\n", line(OTHER_JOB, "REAL")),
        );
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
        assert_eq!(one(&format!("SELECT string_agg(type, ',') FROM cortex_buffer.job_events('{JOB}')")), "MINE,PLAIN");
        assert_eq!(one(&format!("SELECT string_agg(type, ',') FROM cortex_buffer.job_events('{OTHER_JOB}')")), "REAL");
        assert_eq!(
            one(&format!(
                "SELECT foreign_job_lines || ' ' || valid_lines FROM cortex_buffer.session_file WHERE job_id = '{JOB}'"
            )),
            "1 3"
        );
        // The line keeps the job it named, and its directory's job is the file's.
        assert_eq!(
            one(&format!(
                "SELECT job_id::text FROM cortex_buffer.event WHERE type = 'FORGED' AND job_id = '{OTHER_JOB}'"
            )),
            OTHER_JOB
        );
        assert_eq!(one("SELECT count(*)::text FROM cortex_buffer.event WHERE type = 'PLAIN' AND job_id IS NULL"), "1");
    }

    #[pg_test]
    fn no_rust_backtrace_reaches_an_error() {
        // _PG_init turned captured backtraces off, whatever the environment says.
        assert_eq!(std::env::var("RUST_LIB_BACKTRACE").as_deref(), Ok("0"));
        let bt = std::backtrace::Backtrace::capture();
        assert_ne!(bt.status(), std::backtrace::BacktraceStatus::Captured);
    }
}
