//! `#[pg_test]`s of per-job authority: the attacks of issue 22 (one agent login acting on every
//! job), each refused, and what stays allowed.

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{new_job, new_job_with, one, run, sqlstate_of, TempRoot};

    const SESSIONS: &str = "/tmp/cortex_buffer-pgtest-sessions";

    fn roles() {
        run("DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pod_login') THEN CREATE ROLE pod_login NOLOGIN; END IF;
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dispatcher') THEN CREATE ROLE dispatcher NOLOGIN; END IF;
             END $$");
        run("GRANT cortex_buffer_agent TO pod_login; GRANT cortex_buffer_control_plane TO dispatcher");
    }

    /// `sql` as `role` with `token` set (or none): its SQLSTATE and HINT.
    fn as_pod(token: Option<&str>, sql: &str) -> (String, Option<String>) {
        match token {
            Some(t) => run(&format!("SET cortex_buffer.job_token = '{t}'")),
            None => run("RESET cortex_buffer.job_token"),
        }
        run("SET ROLE pod_login");
        let got = sqlstate_of(sql);
        run("RESET ROLE");
        run("RESET cortex_buffer.job_token");
        got
    }

    fn token_of(job: &str) -> String {
        one(&format!("SELECT cortex_buffer.job_token('{job}')"))
    }

    /// Every per-job function, for `job` (`file` is one of its session files).
    fn per_job_calls(job: &str, file: &str) -> Vec<String> {
        vec![
            format!("SELECT cortex_buffer.heartbeat('{job}')"),
            format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 9999}}')"),
            format!("SELECT * FROM cortex_buffer.read_checkpoint('{job}')"),
            format!("SELECT * FROM cortex_buffer.record_usage('{job}', 'claude-sonnet-4-5-20250929', '{{\"input_tokens\": 1000000000}}')"),
            format!("SELECT * FROM cortex_buffer.check_token_budget('{job}')"),
            format!("SELECT * FROM cortex_buffer.reserve_budget('{job}', '{{\"input_tokens\": 10}}', 'claude-sonnet-4-5-20250929')"),
            format!("SELECT count(*) FROM cortex_buffer.job_events('{job}')"),
            format!("SELECT cortex_buffer.recovery_plan('{job}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_timeline('{job}')"),
            format!("SELECT * FROM cortex_buffer.job_usage_from_buffer('{job}')"),
            format!("SELECT cortex_buffer.authorize_job('{job}')"),
            format!("SELECT count(*) FROM cortex_buffer.log_entries('{file}')"),
            format!("SELECT * FROM cortex_buffer.check_log_snapshot('{file}', NULL, 0)"),
            format!("SELECT * FROM cortex_buffer.agent_state('{file}')"),
            format!("SELECT cortex_buffer.session_recovery('{file}')"),
        ]
    }

    #[pg_test]
    fn a_pod_acts_on_its_own_job_and_on_no_other() {
        roles();
        run("SET cortex_buffer.settle_period = 0");
        let a = new_job("cortex_buffer.job", "RUNNING");
        let b = new_job("cortex_buffer.job", "RUNNING");
        let root = TempRoot::at(SESSIONS);
        root.put(
            &format!("{a}/session-1.jsonl"),
            "{\"type\":\"A\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"seq\":0}\n",
        );
        root.put(
            &format!("{b}/session-1.jsonl"),
            "{\"type\":\"B\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"seq\":0}\n",
        );
        run("SELECT count(*) FROM cortex_buffer.index_sessions()");
        run(&format!("SELECT * FROM cortex_buffer.write_checkpoint('{b}', '{{\"step_index\": 1}}')"));
        let b_before = one(&format!(
            "SELECT concat_ws('|', checkpoint::text, tokens_in, cost_usd, heartbeat_at) FROM cortex_buffer.job WHERE id = '{b}'"
        ));
        let token_a = token_of(&a);

        // With A's token: all of A's calls work.
        for sql in per_job_calls(&a, &root.path(&format!("{a}/session-1.jsonl"))) {
            // session_recovery() takes Claude Code transcripts: past authority, this cortex
            // session file is refused for what it is (22023), as for any caller.
            let want = if sql.contains("session_recovery") { "22023" } else { "00000" };
            assert_eq!(as_pod(Some(&token_a), &sql).0, want, "A's pod on A: {sql}");
        }
        // ... and none of B's: 42501 with a HINT, and B is as it was.
        for sql in per_job_calls(&b, &root.path(&format!("{b}/session-1.jsonl"))) {
            let (state, hint) = as_pod(Some(&token_a), &sql);
            assert_eq!(state, "42501", "A's pod on B: {sql}");
            assert!(hint.is_some_and(|h| !h.is_empty()), "no HINT: {sql}");
        }
        let b_after = one(&format!(
            "SELECT concat_ws('|', checkpoint::text, tokens_in, cost_usd, heartbeat_at) FROM cortex_buffer.job WHERE id = '{b}'"
        ));
        assert_eq!(b_before, b_after, "B's row changed under A's token");
        // Without a token nothing is allowed, and the HINT says how to get one.
        for sql in per_job_calls(&a, &root.path(&format!("{a}/session-1.jsonl"))) {
            let (state, hint) = as_pod(None, &sql);
            assert_eq!(state, "42501", "no token: {sql}");
            assert!(hint.unwrap_or_default().contains("job_token"), "{sql}");
        }
        // B's reservation cannot be settled or released with A's token: for A's session it is not
        // there (P0002, naming no job).
        let reservation =
            one(&format!("SELECT reservation_id::text FROM cortex_buffer.reserve_budget('{b}', '{{\"input_tokens\": 10}}', 'claude-sonnet-4-5-20250929')"));
        for sql in [
            format!("SELECT * FROM cortex_buffer.settle_usage('{reservation}', '{{\"input_tokens\": 10}}')"),
            format!("SELECT cortex_buffer.release_reservation('{reservation}')"),
        ] {
            assert_eq!(as_pod(Some(&token_a), &sql).0, "P0002", "{sql}");
        }
        // A link in A's volume to B's file is neither read nor indexed as A's.
        std::os::unix::fs::symlink("../".to_owned() + &b + "/session-1.jsonl", root.path(&format!("{a}/stolen.jsonl")))
            .unwrap_or_else(|e| panic!("{e}"));
        run("SELECT count(*) FROM cortex_buffer.index_sessions()");
        assert_eq!(one("SELECT count(*)::text FROM cortex_buffer.session_file WHERE path LIKE '%/stolen.jsonl'"), "0");
        for sql in [
            format!("SELECT count(*) FROM cortex_buffer.log_entries('{}')", root.path(&format!("{a}/stolen.jsonl"))),
            format!("SELECT * FROM cortex_buffer.agent_state('{}')", root.path(&format!("{a}/stolen.jsonl"))),
        ] {
            assert_ne!(as_pod(Some(&token_a), &sql).0, "00000", "{sql}");
        }
        assert_eq!(one(&format!("SELECT count(*)::text FROM cortex_buffer.job_events('{a}') WHERE type = 'B'")), "0");
        assert_eq!(
            as_pod(Some(&token_of(&b)), &format!("SELECT cortex_buffer.release_reservation('{reservation}')")).0,
            "00000"
        );
        // The pod reads no table directly, and cannot set a heartbeat.
        for sql in [
            "SELECT count(*) FROM cortex_buffer.job".to_owned(),
            "SELECT count(*) FROM cortex_buffer.event".to_owned(),
            "SELECT count(*) FROM cortex_buffer.session_file".to_owned(),
            "SELECT count(*) FROM cortex_buffer.job_token_key".to_owned(),
            format!("UPDATE cortex_buffer.job SET heartbeat_at = 'infinity' WHERE id = '{a}'"),
            format!("SELECT cortex_buffer.job_token('{a}')"),
        ] {
            assert_eq!(as_pod(Some(&token_a), &sql).0, "42501", "{sql}");
        }
    }

    #[pg_test]
    fn a_token_is_good_for_one_attempt_and_only_as_issued() {
        roles();
        let a = new_job("cortex_buffer.job", "RUNNING");
        let token = token_of(&a);
        assert!(token.starts_with(&format!("cbjt1.{a}.0.")), "{token}");
        assert_eq!(token_of(&a), token, "the same attempt gets the same token");
        let beat = format!("SELECT cortex_buffer.heartbeat('{a}')");
        assert_eq!(as_pod(Some(&token), &beat).0, "00000");
        // Altered: the MAC, or the attempt under it.
        let last = token.chars().last().unwrap_or('0');
        let forged = format!("{}{}", &token[..token.len() - 1], if last == '0' { '1' } else { '0' });
        let (state, hint) = as_pod(Some(&forged), &beat);
        assert_eq!(state, "42501");
        assert!(hint.unwrap_or_default().contains("altered"));
        assert_eq!(as_pod(Some(&token.replace(".0.", ".1.")), &beat).0, "42501");
        assert_eq!(as_pod(Some("not a token"), &beat).0, "42501");
        // Dispatched again: the old pod's token is refused, the new one works.
        run(&format!("UPDATE cortex_buffer.job SET attempt = attempt + 1 WHERE id = '{a}'"));
        let (state, hint) = as_pod(Some(&token), &beat);
        assert_eq!(state, "42501");
        assert!(hint.unwrap_or_default().contains("superseded"));
        let fresh = token_of(&a);
        assert_ne!(fresh, token);
        assert_eq!(as_pod(Some(&fresh), &beat).0, "00000");
        // A new secret revokes every token issued under the old one.
        run("DELETE FROM cortex_buffer.job_token_key");
        assert_eq!(as_pod(Some(&fresh), &beat).0, "42501");
        assert_eq!(as_pod(Some(&token_of(&a)), &beat).0, "00000");
        // Only fleet roles issue tokens; they act without one.
        run("SET ROLE dispatcher");
        let (state, _) = sqlstate_of(&format!("SELECT cortex_buffer.job_token('{a}')"));
        let (recovery, _) = sqlstate_of(&format!("SELECT cortex_buffer.recovery_plan('{a}')"));
        run("RESET ROLE");
        assert_eq!((state.as_str(), recovery.as_str()), ("00000", "00000"));
        assert_eq!(sqlstate_of("SELECT cortex_buffer.job_token(gen_random_uuid())").0, "P0002");
    }

    #[pg_test]
    fn a_heartbeat_in_the_future_does_not_hide_a_job_from_the_reaper() {
        let forever = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "'infinity'");
        let tomorrow = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now() + interval '1 day'");
        let fresh = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now()");
        let slight = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now() + interval '1 minute'");
        run("SELECT count(*) FROM cortex_buffer.reap_zombies('5 minutes')");
        let status = |j: &str| one(&format!("SELECT status::text FROM cortex_buffer.job WHERE id = '{j}'"));
        assert_eq!(status(&forever), "RETRYING");
        assert_eq!(status(&tomorrow), "RETRYING");
        assert_eq!(status(&fresh), "RUNNING");
        assert_eq!(status(&slight), "RUNNING", "within the allowance (a clock step)");
        assert_eq!(
            one(&format!("SELECT (error->>'heartbeat_in_future') || ' ' || coalesce(error->>'stale_for', 'null') FROM cortex_buffer.job WHERE id = '{forever}'")),
            "true null"
        );
    }

    #[pg_test]
    fn the_job_tables_triggers_run_as_the_agent_call_role_which_cannot_read_the_secret() {
        roles();
        let a = new_job("cortex_buffer.job", "RUNNING");
        run("CREATE TABLE public.spied (who text, secret text)");
        run("GRANT INSERT ON public.spied TO PUBLIC");
        run("CREATE FUNCTION public.spy() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 BEGIN
                     INSERT INTO public.spied SELECT current_user, encode(secret, 'hex') FROM cortex_buffer.job_token_key;
                 EXCEPTION WHEN insufficient_privilege THEN
                     INSERT INTO public.spied VALUES (current_user, 'denied');
                 END;
                 RETURN NEW;
             END $$");
        run("CREATE TRIGGER spy BEFORE UPDATE ON cortex_buffer.job FOR EACH ROW EXECUTE FUNCTION public.spy()");
        assert_eq!(as_pod(Some(&token_of(&a)), &format!("SELECT cortex_buffer.heartbeat('{a}')")).0, "00000");
        assert_eq!(
            one("SELECT string_agg(who || ' ' || secret, ',') FROM public.spied"),
            "cortex_buffer_agent_call denied"
        );
    }
}
