//! `#[pg_test]`s of heartbeats, the reaper, idle paused jobs, crash records, retry decisions and
//! the circuit breaker; the job-table ones run on cortex_buffer.job and on the control plane's
//! own table (its transition trigger in place). Timestamps are placed in the past, never slept.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{assert_fails, new_job, new_job_with, one, run, with_each_binding};

    fn status(table: &str, job: &str) -> String {
        one(&format!("SELECT status::text FROM {table} WHERE id = '{job}'"))
    }

    #[pg_test]
    fn heartbeat_says_whether_the_agent_may_continue() {
        with_each_binding(|table| {
            let running = new_job(table, "RUNNING");
            assert_eq!(one(&format!("SELECT cortex_buffer.heartbeat('{running}')::text")), "true");
            assert_eq!(
                one(&format!("SELECT (heartbeat_at = now())::text FROM {table} WHERE id = '{running}'")),
                "true"
            );
            for s in ["PENDING", "SCHEDULED", "COMPLETED", "FAILED", "RETRYING", "DEAD_LETTER", "TIMED_OUT"] {
                let job = new_job(table, s);
                assert_eq!(one(&format!("SELECT cortex_buffer.heartbeat('{job}')::text")), "false", "{s}");
                assert_eq!(
                    one(&format!("SELECT (heartbeat_at IS NULL)::text FROM {table} WHERE id = '{job}'")),
                    "true"
                );
            }
            assert_eq!(one("SELECT cortex_buffer.heartbeat(gen_random_uuid())::text"), "false");
            assert_eq!(one("SELECT coalesce(cortex_buffer.heartbeat(NULL)::text, 'null')"), "null");
        });
    }

    #[pg_test]
    fn a_paused_job_keeps_beating_and_its_wait_is_remembered_until_it_runs_again() {
        with_each_binding(|table| {
            let job = new_job(table, "WAITING_FOR_APPROVAL");
            assert_eq!(one(&format!("SELECT cortex_buffer.heartbeat('{job}')::text")), "true");
            let first = one(&format!("SELECT waiting_since::text FROM cortex_buffer.job_wait WHERE job_id = '{job}'"));
            assert!(!first.is_empty());
            // Later beats keep the first-seen time.
            run(&format!(
                "UPDATE cortex_buffer.job_wait SET waiting_since = now() - interval '2 hours' WHERE job_id = '{job}'"
            ));
            assert_eq!(one(&format!("SELECT cortex_buffer.heartbeat('{job}')::text")), "true");
            assert_eq!(one(&format!("SELECT (waiting_since = now() - interval '2 hours')::text FROM cortex_buffer.job_wait WHERE job_id = '{job}'")), "true");
            // Approved: running again, the record goes.
            run(&format!("UPDATE {table} SET status = 'RUNNING' WHERE id = '{job}'"));
            assert_eq!(one(&format!("SELECT cortex_buffer.heartbeat('{job}')::text")), "true");
            assert_eq!(one(&format!("SELECT count(*)::text FROM cortex_buffer.job_wait WHERE job_id = '{job}'")), "0");
        });
    }

    fn reap(args: &str) -> Vec<String> {
        let rows = one(&format!(
            "SELECT coalesce(string_agg(job_id || ' ' || new_status || ' ' || coalesce(retry_after::text, '-'), ',' ORDER BY job_id), '')
               FROM cortex_buffer.reap_zombies({args})"
        ));
        rows.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }

    #[pg_test]
    fn the_reaper_takes_exactly_the_stale_running_jobs() {
        with_each_binding(|table| {
            let ago = |m: i32| format!("now() - interval '{m} minutes'");
            let stale = new_job_with(table, "RUNNING", "heartbeat_at, attempt", &format!("{}, 1", ago(10)));
            let fresh = new_job_with(table, "RUNNING", "heartbeat_at", &ago(1));
            let silent_old =
                new_job_with(table, "RUNNING", "started_at, updated_at", &format!("{}, {}", ago(10), ago(10)));
            let silent_young =
                new_job_with(table, "RUNNING", "started_at, updated_at", &format!("{}, {}", ago(1), ago(1)));
            let silent_but_updated =
                new_job_with(table, "RUNNING", "started_at, updated_at", &format!("{}, {}", ago(10), ago(1)));
            let paused = new_job_with(table, "WAITING_FOR_APPROVAL", "heartbeat_at", &ago(60));
            let done = new_job_with(table, "COMPLETED", "heartbeat_at", &ago(60));
            let exhausted =
                new_job_with(table, "RUNNING", "heartbeat_at, attempt, max_attempts", &format!("{}, 3, 3", ago(10)));

            let mut got = reap("stale_after => '5 minutes'");
            got.sort();
            let mut want = vec![
                format!("{stale} RETRYING 00:00:05"),
                format!("{silent_old} RETRYING 00:00:05"),
                format!("{exhausted} DEAD_LETTER -"),
            ];
            want.sort();
            assert_eq!(got, want, "{table}");
            for (job, s) in [
                (&fresh, "RUNNING"),
                (&silent_young, "RUNNING"),
                (&silent_but_updated, "RUNNING"),
                (&paused, "WAITING_FOR_APPROVAL"),
                (&done, "COMPLETED"),
                (&stale, "RETRYING"),
                (&exhausted, "DEAD_LETTER"),
            ] {
                assert_eq!(status(table, job), s, "{table} {job}");
            }
            assert_eq!(
                one(&format!("SELECT (completed_at IS NOT NULL)::text FROM {table} WHERE id = '{exhausted}'")),
                "true"
            );
            let err = one(&format!(
                "SELECT (error->>'reason') || ' ' || (error ? 'stale_for') || ' ' || (error->'retry_decision'->>'reason') || ' ' || (error->>'attempt')
                   FROM {table} WHERE id = '{stale}'"
            ));
            assert_eq!(err, "zombie true retry 1");
            assert_eq!(
                one(&format!("SELECT string_agg(reason, ',') FROM cortex_buffer.crash WHERE job_id = '{stale}'")),
                "zombie"
            );
            // Reaped jobs are not reaped again.
            assert!(reap("'5 minutes'").is_empty());
        });
    }

    #[pg_test]
    fn the_reaper_merges_into_existing_errors_and_honours_max_jobs() {
        with_each_binding(|table| {
            let old = "now() - interval '1 hour'";
            let a = new_job_with(table, "RUNNING", "heartbeat_at, error", &format!("{old}, '{{\"code\": 42}}'"));
            let b = new_job_with(
                table,
                "RUNNING",
                "heartbeat_at, error",
                &format!("{old} + interval '1 second', '\"boom\"'"),
            );
            assert_eq!(reap("'5 minutes', 1").len(), 1, "max_jobs limits one call");
            assert_eq!(reap("'5 minutes', 1").len(), 1);
            assert_eq!(
                one(&format!("SELECT (error->>'code') || ' ' || (error->>'reason') FROM {table} WHERE id = '{a}'")),
                "42 zombie"
            );
            assert_eq!(
                one(&format!("SELECT (error->>'previous') || ' ' || (error->>'reason') FROM {table} WHERE id = '{b}'")),
                "boom zombie"
            );
            assert_fails("SELECT * FROM cortex_buffer.reap_zombies('-1 minute')", "22023");
            assert_fails("SELECT * FROM cortex_buffer.reap_zombies('1 minute', -5)", "22023");
        });
    }

    #[pg_test]
    fn a_job_reaped_again_and_again_backs_off_then_dead_letters() {
        with_each_binding(|table| {
            let job = new_job_with(
                table,
                "RUNNING",
                "heartbeat_at, attempt, max_attempts",
                "now() - interval '1 hour', 1, 10",
            );
            let mut delays = Vec::new();
            for attempt in 1..=5 {
                let r = reap("'5 minutes'");
                delays.push(r[0].split(' ').skip(1).collect::<Vec<_>>().join(" "));
                if attempt < 5 {
                    // The dispatcher runs it again (RETRYING → SCHEDULED → RUNNING, attempt + 1).
                    run(&format!("UPDATE {table} SET status = 'SCHEDULED' WHERE id = '{job}'"));
                    run(&format!("UPDATE {table} SET status = 'RUNNING', attempt = attempt + 1, heartbeat_at = now() - interval '1 hour' WHERE id = '{job}'"));
                }
            }
            assert_eq!(
                delays,
                vec![
                    "RETRYING 00:00:05",
                    "RETRYING 00:01:00",
                    "RETRYING 00:05:00",
                    "RETRYING 00:30:00",
                    "DEAD_LETTER -"
                ]
            );
        });
    }

    #[pg_test]
    fn the_reaper_index_statement_names_the_bound_table() {
        with_each_binding(|table| {
            let sql = one("SELECT cortex_buffer.reaper_index_sql()");
            assert!(sql.starts_with("CREATE INDEX CONCURRENTLY IF NOT EXISTS"), "{sql}");
            assert!(sql.contains(&format!("ON {table}")), "{sql}");
            assert!(sql.ends_with("(heartbeat_at) WHERE status OPERATOR(pg_catalog.=) 'RUNNING'"), "{sql}");
        });
        // cortex_buffer.job has the index, and the reaper's query uses it.
        assert_eq!(
            one("SELECT indexdef FROM pg_indexes WHERE indexname = 'job_running_heartbeat_idx'"),
            "CREATE INDEX job_running_heartbeat_idx ON cortex_buffer.job USING btree (heartbeat_at) WHERE (status = 'RUNNING'::cortex_buffer.job_status)"
        );
    }

    #[pg_test]
    fn idle_paused_jobs_measure_from_the_first_beat_seen_waiting() {
        with_each_binding(|table| {
            let long_ago = new_job(table, "WAITING_FOR_APPROVAL");
            run(&format!("INSERT INTO cortex_buffer.job_wait VALUES ('{long_ago}', now() - interval '2 hours')"));
            // Beats move updated_at, but not the recorded wait.
            run(&format!("SELECT cortex_buffer.heartbeat('{long_ago}')"));
            let never_beat = new_job_with(table, "WAITING_FOR_APPROVAL", "updated_at", "now() - interval '45 minutes'");
            let recent = new_job(table, "WAITING_FOR_APPROVAL");
            run(&format!("SELECT cortex_buffer.heartbeat('{recent}')"));
            let resumed = new_job(table, "RUNNING");
            run(&format!("INSERT INTO cortex_buffer.job_wait VALUES ('{resumed}', now() - interval '3 hours')"));

            let got = one(&format!(
                "SELECT string_agg(job_id::text, ',' ORDER BY waiting_since) FROM cortex_buffer.idle_paused_jobs()
                  WHERE job_id IN ('{long_ago}', '{never_beat}', '{recent}', '{resumed}')"
            ));
            assert_eq!(got, format!("{long_ago},{never_beat}"), "{table}");
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.idle_paused_jobs('1 hour') WHERE job_id IN ('{long_ago}', '{never_beat}')")),
                "1"
            );
            // The record of a job that is no longer waiting was dropped.
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.job_wait WHERE job_id = '{resumed}'")),
                "0"
            );
            assert_fails("SELECT * FROM cortex_buffer.idle_paused_jobs('0')", "22023");
        });
    }

    fn decision(job: &str) -> String {
        one(&format!("SELECT retry || ' ' || reason || ' ' || strategy || ' ' || coalesce(delay::text, '-') FROM cortex_buffer.retry_decision('{job}')"))
    }

    fn crash(job: &str, code: &str, msg: &str) {
        run(&format!("SELECT cortex_buffer.record_crash('{job}', {code}, {msg})"));
    }

    #[pg_test]
    fn retry_decisions_follow_spike_34() {
        with_each_binding(|table| {
            let fresh = new_job_with(table, "FAILED", "attempt", "1");
            assert_eq!(decision(&fresh), "true retry escalating_backoff 00:00:05");

            let drained = new_job_with(table, "FAILED", "attempt", "1");
            crash(&drained, "143", "'SIGTERM'");
            assert_eq!(decision(&drained), "true drained immediate 00:00:00");

            let same = new_job_with(table, "FAILED", "attempt, max_attempts", "3, 5");
            for _ in 0..3 {
                crash(&same, "1", "'TypeError: x is undefined'");
            }
            assert_eq!(decision(&same), "false deterministic_crash none -");

            let oom = new_job_with(table, "FAILED", "attempt", "1");
            crash(&oom, "137", "'OOMKilled'");
            assert_eq!(decision(&oom), "true retry reduced_footprint 00:00:05");
            run(&format!("UPDATE {table} SET attempt = 2 WHERE id = '{oom}'"));
            crash(&oom, "137", "'OOMKilled at step 4'");
            assert_eq!(decision(&oom), "false persistent_oom none -");

            let spent = new_job_with(table, "FAILED", "attempt, max_attempts", "3, 3");
            crash(&spent, "1", "'boom'");
            assert_eq!(decision(&spent), "false max_attempts none -");

            // A crash record carries the job's attempt and agent, and everything reported.
            let rich = new_job_with(table, "FAILED", "attempt", "2");
            let id = one(&format!(
                "SELECT cortex_buffer.record_crash('{rich}', 1, 'boom', 'EXECUTING', 7, 'web_search', '{{\"input\": 100}}')::text"
            ));
            assert_eq!(
                one(&format!("SELECT attempt || ' ' || reason || ' ' || lifecycle_state || ' ' || step_index || ' ' || last_tool || ' ' || (tokens->>'input') || ' ' || (agent_id IS NOT NULL) FROM cortex_buffer.crash WHERE crash_id = {id}")),
                "2 crash EXECUTING 7 web_search 100 true"
            );
        });
        assert_fails("SELECT cortex_buffer.record_crash(gen_random_uuid(), 1, 'x')", "P0002");
        assert_fails("SELECT cortex_buffer.record_crash(NULL, 1, 'x')", "22004");
        assert_fails("SELECT * FROM cortex_buffer.retry_decision(gen_random_uuid())", "P0002");
    }

    fn state(agent: &str) -> String {
        one(&format!("SELECT state || ' ' || failures_in_window || ' ' || (open_until IS NOT NULL) FROM cortex_buffer.circuit_state('{agent}')"))
    }

    fn admit(agent: &str, job: &str) -> bool {
        one(&format!("SELECT cortex_buffer.admit_job('{agent}', '{job}')::text")) == "true"
    }

    fn outcome(agent: &str, job: &str, ok: bool) -> String {
        one(&format!("SELECT state FROM cortex_buffer.record_outcome('{agent}', '{job}', {ok})"))
    }

    fn uuid() -> String {
        one("SELECT gen_random_uuid()::text")
    }

    /// Moves the agent's cooldown (and any canary lease) into the past.
    fn cool_down(agent: &str) {
        run(&format!(
            "UPDATE cortex_buffer.circuit SET open_until = now() - interval '1 second' WHERE agent_id = '{agent}'"
        ));
    }

    #[pg_test]
    fn three_failures_open_the_breaker_and_one_canary_decides() {
        let agent = uuid();
        assert_eq!(state(&agent), "closed 0 false");
        let jobs: Vec<String> = (0..4).map(|_| uuid()).collect();
        for j in &jobs {
            assert!(admit(&agent, j));
        }
        assert_eq!(outcome(&agent, &jobs[0], false), "closed");
        assert_eq!(outcome(&agent, &jobs[1], true), "closed");
        assert_eq!(outcome(&agent, &jobs[2], false), "closed");
        assert_eq!(outcome(&agent, &jobs[3], false), "open");
        assert_eq!(state(&agent), "open 3 true");
        assert!(!admit(&agent, &uuid()), "open: nothing is admitted");

        cool_down(&agent);
        assert_eq!(state(&agent).split(' ').next(), Some("half_open"));
        let canary = uuid();
        assert!(admit(&agent, &canary));
        assert!(!admit(&agent, &uuid()), "exactly one canary");
        assert!(admit(&agent, &canary), "asking again for the canary is idempotent");
        assert_eq!(outcome(&agent, &canary, true), "closed");
        assert!(admit(&agent, &uuid()));
        assert_eq!(one(&format!("SELECT trips::text FROM cortex_buffer.circuit WHERE agent_id = '{agent}'")), "1");
    }

    #[pg_test]
    fn a_failed_canary_reopens_and_late_outcomes_change_nothing() {
        let agent = uuid();
        run(&format!("INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('{agent}', 1)"));
        let before_trip = uuid();
        let tripper = uuid();
        assert!(admit(&agent, &before_trip));
        assert!(admit(&agent, &tripper));
        assert_eq!(outcome(&agent, &tripper, false), "open", "per-agent threshold of 1");

        cool_down(&agent);
        let canary = uuid();
        assert!(admit(&agent, &canary));
        // A job admitted before the trip reports late: neither success nor failure decides.
        assert_eq!(outcome(&agent, &before_trip, true), "half_open");
        assert_eq!(outcome(&agent, &canary, false), "open");
        assert_eq!(one(&format!("SELECT trips::text FROM cortex_buffer.circuit WHERE agent_id = '{agent}'")), "2");
    }

    #[pg_test]
    fn an_unreported_canary_is_replaced_after_its_lease() {
        let agent = uuid();
        let jobs: Vec<String> = (0..3).map(|_| uuid()).collect();
        for j in &jobs {
            admit(&agent, j);
            outcome(&agent, j, false);
        }
        cool_down(&agent);
        let silent = uuid();
        assert!(admit(&agent, &silent));
        let next = uuid();
        assert!(!admit(&agent, &next));
        run(&format!("UPDATE cortex_buffer.circuit SET canary_lease_until = now() - interval '1 second' WHERE agent_id = '{agent}'"));
        assert!(admit(&agent, &next), "the lease ran out: a new canary");
        assert_eq!(outcome(&agent, &silent, true), "half_open", "the replaced canary no longer decides");
        assert_eq!(outcome(&agent, &next, true), "closed");
    }

    #[pg_test]
    fn failures_of_jobs_admitted_before_the_breaker_closed_do_not_trip_it_again() {
        let agent = uuid();
        let old: Vec<String> = (0..3).map(|_| uuid()).collect();
        for j in &old {
            assert!(admit(&agent, j));
        }
        // These were admitted an hour ago; the breaker closed (again) since.
        run(&format!("UPDATE cortex_buffer.circuit_admission SET admitted_at = now() - interval '1 hour' WHERE agent_id = '{agent}'"));
        run(&format!(
            "UPDATE cortex_buffer.circuit SET closed_since = now() - interval '30 minutes' WHERE agent_id = '{agent}'"
        ));
        for j in &old {
            assert_eq!(outcome(&agent, j, false), "closed");
        }
        assert_eq!(state(&agent), "closed 0 false");
    }

    #[pg_test]
    fn outcomes_of_jobs_never_admitted_through_admit_job_still_count() {
        let agent = uuid();
        for _ in 0..2 {
            assert_eq!(outcome(&agent, &uuid(), false), "closed");
        }
        assert_eq!(outcome(&agent, &uuid(), false), "open");
    }

    #[pg_test]
    fn failures_outside_the_window_do_not_count() {
        let agent = uuid();
        for _ in 0..2 {
            let j = uuid();
            admit(&agent, &j);
            outcome(&agent, &j, false);
        }
        run(&format!("UPDATE cortex_buffer.circuit_outcome SET recorded_at = now() - interval '16 minutes' WHERE agent_id = '{agent}'"));
        let j = uuid();
        admit(&agent, &j);
        assert_eq!(outcome(&agent, &j, false), "closed", "only one failure is within 15 minutes");
        assert_eq!(state(&agent), "closed 1 false");
    }
}
