//! Retention inside one transaction (a `#[pg_test]` always rolls back, so the files stay: what
//! happens after a commit is tested end to end in `pgrx-tests/tests/retention.rs`): the
//! arguments' errors, the refusals, the rows a dry run and a real run return, and the index
//! rows a real run deletes before its commit.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{error_of, new_job_with, one, run, sqlstate_of};

    const SESSIONS: &str = "/tmp/cortex_buffer-pgtest-sessions";

    fn line(job: &str, seq: i64) -> String {
        format!(
            r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{job}","session_id":"s","seq":{seq},"buffer_schema_version":1}}"#,
            seq % 60
        ) + "\n"
    }

    /// Sets a file's modification time `days` days back.
    fn age(path: &str, days: u64) {
        let f = std::fs::File::options().append(true).open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
        f.set_modified(t).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The actions on paths under `prefix`, as `action path rows_deleted`.
    fn actions(prefix: &str, args: &str) -> Vec<String> {
        let text = one(&format!(
            "SELECT coalesce(string_agg(action || ' ' || replace(path, '{prefix}/', '') || ' ' || rows_deleted, E'\\n'
                                        ORDER BY path, action), '')
               FROM cortex_buffer.cleanup_session_buffers({args})
              WHERE path LIKE '{prefix}/%'"
        ));
        text.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
    }

    #[pg_test]
    fn arguments_out_of_range_are_refused_with_a_hint() {
        for (args, what) in [
            ("post_terminal => '-1 hour'", "post_terminal"),
            ("max_file_age => '-1 day'", "max_file_age"),
            ("max_dirs => 0", "max_dirs"),
            ("max_unknown_ratio => 1.5", "max_unknown_ratio"),
        ] {
            let sql = format!("SELECT * FROM cortex_buffer.cleanup_session_buffers({args})");
            let (state, hint, _) = error_of(&sql).unwrap_or_else(|| panic!("{args} was accepted"));
            assert_eq!(state, "22023", "{args}");
            assert!(
                hint.is_some_and(|h| h.contains(what) || h.contains("directories") || h.contains("share")),
                "{args}"
            );
        }
    }

    #[pg_test]
    fn inside_a_subtransaction_it_refuses_except_for_a_dry_run() {
        let sql = "DO $$ BEGIN PERFORM * FROM cortex_buffer.cleanup_session_buffers(max_unknown_ratio => 1);
                   EXCEPTION WHEN division_by_zero THEN NULL; END $$";
        let (state, hint, _) = error_of(sql).unwrap_or_else(|| panic!("ran in a subtransaction"));
        assert_eq!(state, "55000");
        assert!(hint.unwrap_or_default().contains("subtransaction"));
        run(
            "DO $$ BEGIN PERFORM * FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1);
             EXCEPTION WHEN division_by_zero THEN NULL; END $$",
        );
    }

    #[pg_test]
    fn only_the_operator_and_superusers_may_call_it() {
        run("CREATE ROLE cb_retention_nobody");
        run("CREATE ROLE cb_retention_op IN ROLE cortex_buffer_operator");
        run("SET ROLE cb_retention_nobody");
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.cleanup_session_buffers(dry_run => true)").0, "42501");
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.storage_report()").0, "42501");
        run("RESET ROLE");
        run("SET ROLE cb_retention_op");
        run(
            "SELECT count(*)::text FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1)",
        );
        run("RESET ROLE");
    }

    #[pg_test]
    fn a_job_table_the_caller_cannot_read_is_refused_with_a_hint() {
        run(crate::testing::CONTROL_PLANE_FIXTURE);
        run("CREATE ROLE cb_retention_op2 IN ROLE cortex_buffer_operator");
        run("SET cortex_buffer.job_table = 'cp.job'");
        run("GRANT USAGE ON SCHEMA cp TO cb_retention_op2");
        run("SET ROLE cb_retention_op2");
        let (state, hint, _) = error_of("SELECT * FROM cortex_buffer.cleanup_session_buffers(dry_run => true)")
            .unwrap_or_else(|| panic!("an unreadable job table was accepted"));
        run("RESET ROLE");
        run("RESET cortex_buffer.job_table");
        assert_eq!(state, "42501");
        assert!(hint.unwrap_or_default().contains("GRANT SELECT ON cp.job"));
    }

    #[pg_test]
    fn most_job_ids_unknown_to_the_job_table_means_the_wrong_table() {
        // Six job directories whose jobs are in no job table.
        let ids: Vec<String> = (0..6).map(|_| one("SELECT gen_random_uuid()::text")).collect();
        for id in &ids {
            let p = format!("{SESSIONS}/{id}/session-001.jsonl");
            std::fs::create_dir_all(format!("{SESSIONS}/{id}")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(&p, line(id, 0)).unwrap_or_else(|e| panic!("{e}"));
        }
        // Not indexed: the directories' names are job ids enough for the check.
        let (state, hint, detail) = error_of("SELECT * FROM cortex_buffer.cleanup_session_buffers(dry_run => true)")
            .unwrap_or_else(|| panic!("six unknown jobs out of six were taken as orphans"));
        assert_eq!(state, "55000");
        assert!(hint.unwrap_or_default().contains("max_unknown_ratio"));
        assert!(detail.unwrap_or_default().contains("nothing was deleted"));
        // Overridden, they are orphans: young ones are kept and said so.
        let rows = one(&format!(
            "SELECT count(*)::text FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1)
              WHERE action = 'keep' AND reason LIKE 'orphan kept%' AND path = ANY (ARRAY['{}'])",
            ids.iter().map(|i| format!("{SESSIONS}/{i}")).collect::<Vec<_>>().join("','")
        ));
        assert_eq!(rows, "6");
        for id in &ids {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{id}"));
        }
    }

    #[pg_test]
    fn only_ids_the_control_plane_vouched_for_judge_the_table() {
        let dir = |id: &str| {
            std::fs::create_dir_all(format!("{SESSIONS}/{id}")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(format!("{SESSIONS}/{id}/session-001.jsonl"), line(id, 0)).unwrap_or_else(|e| panic!("{e}"));
        };
        // One job the table knows, beside five made-up ids (a pusher's, or anyone's directories):
        // nothing vouches for them, so they cannot trip the check.
        let real = new_job_with("cortex_buffer.job", "RUNNING", "heartbeat_at", "now()");
        dir(&real);
        let made_up: Vec<String> = (0..5).map(|_| one("SELECT gen_random_uuid()::text")).collect();
        made_up.iter().for_each(|id| dir(id));
        let dry = "SELECT count(*)::text FROM cortex_buffer.cleanup_session_buffers(dry_run => true)";
        assert_ne!(sqlstate_of(dry).0, "55000", "five made-up ids beside a known job halted the cleanup");
        // Ids with rows of the extension's (crashes here) that the table lacks: the wrong table.
        for id in &made_up {
            run(&format!("INSERT INTO cortex_buffer.crash (job_id, attempt, reason) VALUES ('{id}', 1, 'crash')"));
        }
        let (state, _, _) =
            error_of(dry).unwrap_or_else(|| panic!("five vouched-for ids unknown to the table were orphans"));
        assert_eq!(state, "55000");
        for id in made_up.iter().chain([&real]) {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{id}"));
        }
    }

    #[pg_test]
    fn a_dry_run_and_a_real_run_return_the_same_rows_and_the_real_one_deletes_the_index_rows_first() {
        // Jobs: one completed two days ago, one running with an old file, one pending with an
        // old and a new file.
        let done = new_job_with(
            "cortex_buffer.job",
            "COMPLETED",
            "completed_at, updated_at",
            "now() - interval '2 days', now() - interval '2 days'",
        );
        let running = new_job_with("cortex_buffer.job", "RUNNING", "started_at, heartbeat_at", "now(), now()");
        let pending = new_job_with("cortex_buffer.job", "PENDING", "updated_at", "now()");
        let mut paths = Vec::new();
        for (job, files) in [(&done, 2), (&running, 1), (&pending, 2)] {
            std::fs::create_dir_all(format!("{SESSIONS}/{job}")).unwrap_or_else(|e| panic!("{e}"));
            for n in 1..=files {
                let p = format!("{SESSIONS}/{job}/session-00{n}.jsonl");
                std::fs::write(&p, line(job, 0) + &line(job, 1)).unwrap_or_else(|e| panic!("{e}"));
                paths.push(p);
            }
        }
        // Each job's own directory indexed by its catch-up (never the whole shared test volume:
        // other tests' files there belong to their transactions).
        for job in [&done, &running, &pending] {
            run(&format!("SELECT cortex_buffer.recovery_plan('{job}')"));
        }
        for p in &paths {
            if !p.ends_with("session-002.jsonl") {
                age(p, 10);
            }
        }
        let args = "max_unknown_ratio => 1";
        let dry: Vec<String> = actions(SESSIONS, &format!("dry_run => true, {args}"))
            .into_iter()
            .filter(|l| [&done, &running, &pending].iter().any(|j| l.contains(j.as_str())))
            .collect();
        let expected = vec![
            format!("delete_dir {done} 6"),
            format!("delete_file {pending}/session-001.jsonl 3"),
            format!("keep {running}/session-001.jsonl 0"),
        ];
        let mut sorted_expected = expected.clone();
        sorted_expected.sort();
        let mut sorted_dry = dry.clone();
        sorted_dry.sort();
        assert_eq!(sorted_dry, sorted_expected, "the dry run");
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM cortex_buffer.session_file WHERE job_dir = '{done}'")),
            "2"
        );
        let real: Vec<String> = actions(SESSIONS, args)
            .into_iter()
            .filter(|l| [&done, &running, &pending].iter().any(|j| l.contains(j.as_str())))
            .collect();
        let mut sorted_real = real.clone();
        sorted_real.sort();
        assert_eq!(sorted_real, sorted_expected, "the real run returns what the dry run said");
        // The index rows are gone in this transaction; the files wait for its commit (which a
        // pg_test never reaches).
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM cortex_buffer.session_file WHERE job_dir = '{done}'")),
            "0"
        );
        assert_eq!(
            one(&format!(
                "SELECT count(*)::text FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
                  WHERE f.path = '{SESSIONS}/{pending}/session-001.jsonl'"
            )),
            "0"
        );
        assert!(std::path::Path::new(&format!("{SESSIONS}/{done}/session-001.jsonl")).exists());
        let report =
            one("SELECT count(*)::text FROM cortex_buffer.storage_report() WHERE job_state IN ('RUNNING', 'PENDING') AND files > 0");
        assert!(report.parse::<i64>().unwrap_or(0) >= 2, "{report}");
        for job in [&done, &running, &pending] {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{job}"));
        }
    }

    /// A job that will run again keeps the buffer its next pod recovers from, however old:
    /// SCHEDULED (the next attempt, admitted but not started) and PENDING with an attempt behind
    /// it (re-queued). A PENDING job that never ran has no such pod: its old file goes.
    #[pg_test]
    fn jobs_that_will_run_again_keep_the_buffer_their_next_pod_reads() {
        let scheduled =
            new_job_with("cortex_buffer.job", "SCHEDULED", "attempt, updated_at", "1, now() - interval '8 days'");
        let requeued =
            new_job_with("cortex_buffer.job", "PENDING", "attempt, updated_at", "2, now() - interval '8 days'");
        let never_ran =
            new_job_with("cortex_buffer.job", "PENDING", "attempt, updated_at", "0, now() - interval '8 days'");
        let jobs = [&scheduled, &requeued, &never_ran];
        for job in jobs {
            std::fs::create_dir_all(format!("{SESSIONS}/{job}")).unwrap_or_else(|e| panic!("{e}"));
            let p = format!("{SESSIONS}/{job}/session-001.jsonl");
            std::fs::write(&p, line(job, 0) + &line(job, 1)).unwrap_or_else(|e| panic!("{e}"));
            run(&format!("SELECT cortex_buffer.recovery_plan('{job}')"));
            age(&p, 8);
        }
        let acted: Vec<String> = actions(SESSIONS, "dry_run => true, max_unknown_ratio => 1")
            .into_iter()
            .filter(|l| jobs.iter().any(|j| l.contains(j.as_str())))
            .collect();
        let mut expected = vec![
            format!("delete_file {never_ran}/session-001.jsonl 3"),
            format!("keep {requeued}/session-001.jsonl 0"),
            format!("keep {scheduled}/session-001.jsonl 0"),
        ];
        expected.sort();
        let mut acted_sorted = acted.clone();
        acted_sorted.sort();
        assert_eq!(acted_sorted, expected);
        let reason = one(&format!(
            "SELECT reason FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1)
              WHERE path = '{SESSIONS}/{scheduled}/session-001.jsonl'"
        ));
        assert!(reason.contains("recovery plan reads it"), "{reason}");
        for job in jobs {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{job}"));
        }
    }

    /// A session file of `lines` events of about `each` bytes, stamped `ts` (ISO 8601).
    fn big_file(job: &str, ts: &str, lines: usize, each: usize, first_seq: usize) -> String {
        let filler = "x".repeat(each);
        (0..lines)
            .map(|n| {
                format!(
                    r#"{{"type":"TOOL_RESULT","timestamp":"{ts}","job_id":"{job}","session_id":"s","seq":{},"result_summary":"{filler}"}}"#,
                    first_seq + n
                ) + "\n"
            })
            .collect::<String>()
    }

    #[pg_test]
    fn oversized_buffers_lists_files_over_the_limit_and_those_about_to_cross_it() {
        let over = new_job_with("cortex_buffer.job", "RUNNING", "started_at", "now()");
        let fast = new_job_with("cortex_buffer.job", "RUNNING", "started_at", "now()");
        let iso = |ago: &str| {
            one(&format!(
                "SELECT to_char(now() AT TIME ZONE 'UTC' - interval '{ago}', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
            ))
        };
        // 11 MB, written two days ago but for its last 1 MB: over the 10 MB limit, slow.
        let p_over = format!("{SESSIONS}/{over}/session-001.jsonl");
        std::fs::create_dir_all(format!("{SESSIONS}/{over}")).unwrap_or_else(|e| panic!("{e}"));
        let old = big_file(&over, &iso("2 days"), 100, 100_000, 0);
        let new = big_file(&over, &iso("1 hour"), 10, 100_000, 100);
        std::fs::write(&p_over, old + &new).unwrap_or_else(|e| panic!("{e}"));
        // 3 MB in the last ten minutes: under the limit, and over it within the hour.
        let p_fast = format!("{SESSIONS}/{fast}/session-001.jsonl");
        std::fs::create_dir_all(format!("{SESSIONS}/{fast}")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&p_fast, big_file(&fast, &iso("10 minutes"), 30, 100_000, 0)).unwrap_or_else(|e| panic!("{e}"));
        for job in [&over, &fast] {
            run(&format!("SELECT cortex_buffer.recovery_plan('{job}')"));
        }
        let row = |path: &str| {
            one(&format!(
                "SELECT kind || ' ' || over_limit || ' ' || crosses_within_hour || ' ' || (growth_bytes_per_hour / 100000)
                   FROM cortex_buffer.oversized_buffers WHERE path = '{path}'"
            ))
        };
        // The slow one grew about 1 MB in the last day: some 10 lines of 100 kB over 24 hours.
        let slow = row(&p_over);
        assert!(slow.starts_with("file true false "), "{slow}");
        let rate: i64 = slow.rsplit(' ').next().and_then(|r| r.parse().ok()).unwrap_or(-1);
        assert!((0..=1).contains(&rate), "{slow}: about 0.4 lines of 100 kB an hour");
        // The fast one: 3 MB in 10 minutes is 18 MB an hour.
        let quick = row(&p_fast);
        assert!(quick.starts_with("file false true "), "{quick}");
        let rate: i64 = quick.rsplit(' ').next().and_then(|r| r.parse().ok()).unwrap_or(-1);
        assert!((150..=200).contains(&rate), "{quick}: about 180 lines of 100 kB an hour");
        let hours = one(&format!(
            "SELECT round(hours_to_limit::numeric, 1)::text FROM cortex_buffer.oversized_buffers WHERE path = '{p_fast}'"
        ));
        assert!(["0.4", "0.3", "0.5"].contains(&hours.as_str()), "{hours}");
        // Neither directory is over 50 MB, nor on its way there within the hour.
        assert_eq!(
            one(&format!(
                "SELECT count(*)::text FROM cortex_buffer.oversized_buffers WHERE kind = 'job_dir' AND path IN ('{over}', '{fast}')"
            )),
            "0"
        );
        for job in [&over, &fast] {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{job}"));
        }
    }

    #[pg_test]
    fn a_job_table_with_row_level_security_for_the_caller_is_refused() {
        run(crate::testing::CONTROL_PLANE_FIXTURE);
        run("CREATE ROLE cb_retention_rls IN ROLE cortex_buffer_operator");
        run("GRANT USAGE ON SCHEMA cp TO cb_retention_rls");
        run("GRANT SELECT ON cp.job TO cb_retention_rls");
        run("ALTER TABLE cp.job ENABLE ROW LEVEL SECURITY");
        run("CREATE POLICY only_some ON cp.job FOR SELECT USING (false)");
        run("SET cortex_buffer.job_table = 'cp.job'");
        run("SET ROLE cb_retention_rls");
        let (state, hint, _) = error_of("SELECT * FROM cortex_buffer.cleanup_session_buffers(dry_run => true)")
            .unwrap_or_else(|| panic!("hidden jobs would look orphaned"));
        run("RESET ROLE");
        run("RESET cortex_buffer.job_table");
        assert_eq!(state, "42501");
        assert!(hint.unwrap_or_default().contains("BYPASSRLS"));
    }

    #[pg_test]
    fn rows_of_gone_files_are_deleted_after_gone_retention_and_a_call_looks_at_a_bounded_number() {
        // 150 rows of files gone for 8 days (gone_retention is 7), of a directory with no job.
        run(&format!(
            "INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, gone_at)
             SELECT '{SESSIONS}/retention-gone/f' || g || '.jsonl', 'retention-gone', 1, now() - interval '9 days', 1, g,
                    now() - interval '8 days'
               FROM generate_series(1, 150) g"
        ));
        // And one gone only yesterday: kept.
        run(&format!(
            "INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, gone_at)
             VALUES ('{SESSIONS}/retention-gone/young.jsonl', 'retention-gone', 1, now(), 1, 999, now() - interval '1 day')"
        ));
        let count = |max_dirs: i32| {
            one(&format!(
                "SELECT count(*)::text FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_dirs => {max_dirs},
                                                                                 max_unknown_ratio => 1)
                  WHERE action = 'delete_file' AND path LIKE '%/retention-gone/%'
                    AND reason LIKE 'the file is gone, for longer than cortex_buffer.gone_retention (7 days)'"
            ))
        };
        // max_dirs 1 looks at 100 such rows at most (other tests' rows may take some of them).
        let bounded: i64 = count(1).parse().unwrap_or(-1);
        assert!((0..=100).contains(&bounded), "{bounded}");
        assert_eq!(count(1000), "150");
        assert_eq!(
            one("SELECT count(*)::text FROM cortex_buffer.cleanup_session_buffers(max_unknown_ratio => 1)
                  WHERE path LIKE '%/retention-gone/%'"),
            "150"
        );
        assert_eq!(
            one("SELECT string_agg(regexp_replace(path, '^.*/', ''), ',')
                   FROM cortex_buffer.session_file WHERE job_dir = 'retention-gone'"),
            "young.jsonl"
        );
    }
}
