//! `#[pg_test]`s of write_checkpoint, read_checkpoint and verify_checkpoints, each run against
//! cortex_buffer.job and against the control plane's own table (trigger in place).

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{assert_fails, new_job, one, run, sqlstate_of, with_each_binding};

    fn write(job: &str, doc: &str) -> String {
        one(&format!(
            "SELECT w.checkpoint_id::text || ' ' || w.step_index || ' ' || w.crc || ' ' || w.size_bytes
               FROM cortex_buffer.write_checkpoint('{job}', '{doc}') w"
        ))
    }

    fn write_expecting(job: &str, doc: &str, expected: &str) -> String {
        format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', '{doc}', '{expected}')")
    }

    fn field(s: &str, i: usize) -> String {
        s.split(' ').nth(i).unwrap_or_default().to_owned()
    }

    #[pg_test]
    fn write_then_read_round_trips_on_both_tables() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let doc = r#"{"step_index": 0, "state": {"b": [1.0, 2.5e21], "a": "é\u2028"}, "10": true, "9": null}"#;
            let w = write(&job, doc);
            let (id, step, crc, size) = (field(&w, 0), field(&w, 1), field(&w, 2), field(&w, 3));
            assert_eq!(step, "0");
            assert_eq!(crc, one(&format!("SELECT cortex_buffer.checkpoint_crc('{doc}')::text")));
            assert_eq!(size, one(&format!("SELECT octet_length(cortex_buffer.canonical_json('{doc}'))::text")));
            assert_eq!(&id[14..15], "7", "a generated checkpoint id is a UUIDv7: {id}");

            let r = one(&format!(
                "SELECT r.source || ' ' || r.checkpoint_id || ' ' || r.step_index || ' ' || r.crc || ' ' || r.crc_ok || ' ' || (r.doc = '{doc}'::jsonb)
                   FROM cortex_buffer.read_checkpoint('{job}') r"
            ));
            assert_eq!(r, format!("current {id} 0 {crc} true true"), "{table}");
            // The job row holds the document and the CRC's signed 32-bit bit pattern.
            let stored =
                one(&format!("SELECT (checkpoint_crc::bigint & 4294967295)::text FROM {table} WHERE id = '{job}'"));
            assert_eq!(stored, crc);
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                "1"
            );
        });
    }

    #[pg_test]
    fn large_checkpoints_round_trip_and_trim_like_small_ones() {
        // Above 2 kB the write shares one compressed copy between history and the job row.
        with_each_binding(|table| {
            run("SET cortex_buffer.checkpoint_history_keep = 3");
            let job = new_job(table, "RUNNING");
            let big = |i: i32| {
                format!(
                    r#"{{"step_index": {i}, "log": [{}]}}"#,
                    (0..200)
                        .map(|k| format!(r#"{{"k": {k}, "v": "line {k} of step {i} é"}}"#))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            };
            for i in 0..5 {
                let w = write(&job, &big(i));
                assert_eq!(field(&w, 1), i.to_string());
            }
            let doc = big(4);
            let r = one(&format!(
                "SELECT r.source || ' ' || r.step_index || ' ' || (r.doc = '{doc}'::jsonb) || ' ' || (r.crc = cortex_buffer.checkpoint_crc('{doc}'))
                   FROM cortex_buffer.read_checkpoint('{job}') r"
            ));
            assert_eq!(r, "current 4 true true", "{table}");
            assert_eq!(
                one(&format!("SELECT (checkpoint = '{doc}'::jsonb)::text || ' ' || pg_column_size(checkpoint) FROM {table} WHERE id = '{job}'"))
                    .split(' ')
                    .next()
                    .unwrap_or_default(),
                "true"
            );
            assert_eq!(
                one(&format!("SELECT string_agg(step_index::text, ',' ORDER BY history_id) FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                "2,3,4"
            );
            // Compressed once, into history (lz4 where the server has it), and copied as is.
            let method = one(
                "SELECT CASE WHEN 'lz4' = ANY (enumvals) THEN 'lz4' ELSE 'pglz' END FROM pg_settings WHERE name = 'default_toast_compression'",
            );
            assert_eq!(
                one(&format!("SELECT pg_column_compression(checkpoint) FROM {table} WHERE id = '{job}'")),
                method,
                "{table}"
            );
            assert_eq!(
                one(&format!("SELECT string_agg(DISTINCT pg_column_compression(doc), ',') FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                method
            );
            // Falling back works the same for large documents.
            run(&format!("UPDATE {table} SET checkpoint_crc = checkpoint_crc # 1 WHERE id = '{job}'"));
            assert_eq!(
                one(&format!("SELECT source || ' ' || step_index FROM cortex_buffer.read_checkpoint('{job}')")),
                "history 4"
            );
            run("RESET cortex_buffer.checkpoint_history_keep");
        });
    }

    #[pg_test]
    fn the_documents_own_identity_is_used_and_steps_advance() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let own = "0193a8b2-8b00-7000-8000-0000000000c0";
            let w = write(&job, &format!(r#"{{"checkpoint_id": "{own}", "step_index": 4}}"#));
            assert_eq!((field(&w, 0), field(&w, 1)), (own.to_owned(), "4".to_owned()));
            let next = write(&job, r#"{"x": 1}"#);
            assert_eq!(field(&next, 1), "5", "without step_index the next step is recorded");
            let rerun = write(&job, r#"{"step_index": 5, "x": 2}"#);
            assert_eq!(field(&rerun, 1), "5", "an equal step (a re-run after a crash) is allowed");
            assert_fails(&format!("SELECT cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 3}}')"), "55006");
            let back = one(&format!(
                "SELECT step_index::text FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 3}}', allow_step_regression => true)"
            ));
            assert_eq!(back, "3");
        });
    }

    #[pg_test]
    fn a_stale_expected_checkpoint_id_is_fenced_and_nothing_is_written() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let first = field(&write(&job, r#"{"n": 1}"#), 0);
            let second = one(&format!(
                "SELECT checkpoint_id::text FROM cortex_buffer.write_checkpoint('{job}', '{{\"n\": 2}}', '{first}')"
            ));
            let (state, hint) = sqlstate_of(&write_expecting(&job, r#"{"n": 3}"#, &first));
            assert_eq!(state, "55006", "{table}");
            assert_ne!(state, "40001");
            assert!(hint.is_some_and(|h| h.contains("Another writer")));
            assert_eq!(one(&format!("SELECT checkpoint->>'n' FROM {table} WHERE id = '{job}'")), "2");
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                "2"
            );
            assert_eq!(one(&format!("SELECT checkpoint_id::text FROM cortex_buffer.read_checkpoint('{job}')")), second);
            // A job with no checkpoint yet cannot match any expected id.
            let fresh = new_job(table, "RUNNING");
            assert_fails(&write_expecting(&fresh, "{}", &first), "55006");
        });
    }

    #[pg_test]
    fn writes_are_refused_unless_running_and_bad_input_has_its_own_sqlstate() {
        with_each_binding(|table| {
            for status in ["PENDING", "WAITING_FOR_APPROVAL", "FAILED", "COMPLETED"] {
                let job = new_job(table, status);
                assert_fails(&format!("SELECT cortex_buffer.write_checkpoint('{job}', '{{}}')"), "55000");
            }
            let job = new_job(table, "RUNNING");
            let w = |doc: &str| format!("SELECT cortex_buffer.write_checkpoint('{job}', '{doc}')");
            assert_fails(
                &format!("SELECT cortex_buffer.write_checkpoint('{}', '{{}}')", "00000000-0000-0000-0000-000000000001"),
                "P0002",
            );
            assert_fails(&w("[1, 2]"), "22023");
            assert_fails(&w("\"text\""), "22023");
            assert_fails(&w(r#"{"checkpoint_id": "not-a-uuid"}"#), "22P02");
            assert_fails(&w(r#"{"checkpoint_id": 12}"#), "22P02");
            assert_fails(&w(r#"{"step_index": -1}"#), "22023");
            assert_fails(&w(r#"{"step_index": 1.5}"#), "22023");
            assert_fails(&w(r#"{"step_index": "2"}"#), "22023");
            assert_fails("SELECT cortex_buffer.write_checkpoint(NULL, '{}')", "22004");
            assert_fails(&format!("SELECT cortex_buffer.write_checkpoint('{job}', NULL)"), "22004");
            run("SET cortex_buffer.checkpoint_max_bytes = 20");
            assert_fails(&w(r#"{"state": "more than twenty bytes"}"#), "54000");
            assert_eq!(sqlstate_of(&w(r#"{"s": "short"}"#)).0, "00000", "{{\"s\":\"short\"}} is 13 bytes");
            run("RESET cortex_buffer.checkpoint_max_bytes");
            // Nothing above left a trace except the one successful write.
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                "1"
            );
        });
    }

    #[pg_test]
    fn a_corrupt_current_checkpoint_falls_back_to_history_and_total_corruption_is_xx001() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            write(&job, r#"{"step_index": 0, "v": "a"}"#);
            let b = write(&job, r#"{"step_index": 1, "v": "b"}"#);
            // Corrupt the document behind the CRC's back.
            run(&format!(
                "UPDATE {table} SET checkpoint = jsonb_set(checkpoint, '{{v}}', '\"tampered\"') WHERE id = '{job}'"
            ));
            let r = one(&format!(
                "SELECT r.source || ' ' || r.checkpoint_id || ' ' || r.step_index || ' ' || (r.doc->>'v') || ' ' || r.crc_ok || ' ' || (r.detail LIKE 'current checkpoint: stored CRC%')
                   FROM cortex_buffer.read_checkpoint('{job}') r"
            ));
            assert_eq!(r, format!("history {} 1 b false true", field(&b, 0)), "{table}");

            // Corrupt only the stored CRC instead.
            run(&format!("UPDATE {table} SET checkpoint = '{{\"step_index\": 1, \"v\": \"b\"}}', checkpoint_crc = checkpoint_crc # 1 WHERE id = '{job}'"));
            assert_eq!(one(&format!("SELECT source FROM cortex_buffer.read_checkpoint('{job}')")), "history");

            // Corrupt every copy: the caller must fail the job.
            run(&format!(
                "UPDATE cortex_buffer.checkpoint_history SET crc = (crc + 1) % 4294967296 WHERE job_id = '{job}'"
            ));
            let (state, hint) = sqlstate_of(&format!("SELECT * FROM cortex_buffer.read_checkpoint('{job}')"));
            assert_eq!(state, "XX001");
            assert!(hint.is_some_and(|h| h.contains("Fail the job")));
        });
    }

    #[pg_test]
    fn never_checkpointed_jobs_read_as_none_and_unknown_jobs_fail() {
        with_each_binding(|table| {
            let job = new_job(table, "PENDING");
            let r = one(&format!(
                "SELECT source || ' ' || coalesce(checkpoint_id::text, '-') || ' ' || coalesce(crc_ok::text, '-') FROM cortex_buffer.read_checkpoint('{job}')"
            ));
            assert_eq!(r, "none - -");
            assert_fails(
                "SELECT * FROM cortex_buffer.read_checkpoint('00000000-0000-0000-0000-000000000001')",
                "P0002",
            );
        });
    }

    #[pg_test]
    fn a_checkpoint_the_control_plane_wrote_itself_is_identified_by_its_own_members() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let id = "0193a8b2-8b00-7000-8000-0000000000d7";
            let doc = format!(r#"{{"checkpoint_id": "{id}", "step_index": 7, "s": 1}}"#);
            // As the control plane stores it: the signed 32-bit pattern in an integer column.
            run(&format!(
                "UPDATE {table} SET checkpoint = '{doc}', checkpoint_crc = (cortex_buffer.checkpoint_crc('{doc}') - CASE WHEN cortex_buffer.checkpoint_crc('{doc}') > 2147483647 THEN 4294967296 ELSE 0 END)::int WHERE id = '{job}'"
            ));
            assert_eq!(one(&format!("SELECT source || ' ' || checkpoint_id || ' ' || step_index FROM cortex_buffer.read_checkpoint('{job}')")), format!("current {id} 7"));
            let next = one(&format!(
                "SELECT step_index::text FROM cortex_buffer.write_checkpoint('{job}', '{{\"s\": 2}}', '{id}')"
            ));
            assert_eq!(next, "8");
        });
    }

    #[pg_test]
    fn history_keeps_the_newest_n_per_job() {
        with_each_binding(|table| {
            run("SET cortex_buffer.checkpoint_history_keep = 3");
            let job = new_job(table, "RUNNING");
            let other = new_job(table, "RUNNING");
            write(&other, r#"{"o": 1}"#);
            for i in 0..6 {
                write(&job, &format!(r#"{{"i": {i}}}"#));
            }
            assert_eq!(
                one(&format!("SELECT string_agg(doc->>'i', ',' ORDER BY history_id) FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'")),
                "3,4,5"
            );
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.checkpoint_history WHERE job_id = '{other}'")),
                "1"
            );
            run("RESET cortex_buffer.checkpoint_history_keep");
        });
    }

    #[pg_test]
    fn verify_checkpoints_reports_exactly_the_corrupt_ones() {
        with_each_binding(|table| {
            let good = new_job(table, "RUNNING");
            let bad = new_job(table, "RUNNING");
            write(&good, r#"{"g": 1}"#);
            write(&bad, r#"{"b": 1}"#);
            write(&bad, r#"{"b": 2}"#);
            run(&format!("UPDATE {table} SET checkpoint = '{{\"b\": 99}}' WHERE id = '{bad}'"));
            run(&format!(
                "UPDATE cortex_buffer.checkpoint_history SET doc = '{{\"b\": -1}}' WHERE job_id = '{bad}' AND doc->>'b' = '1'"
            ));
            let found = one(&format!(
                "SELECT string_agg(source || ':' || coalesce(step_index::text, '-'), ',' ORDER BY source)
                   FROM cortex_buffer.verify_checkpoints() WHERE job_id IN ('{good}', '{bad}')"
            ));
            assert_eq!(found, "current:-,history:0", "{table}");
        });
    }

    #[pg_test]
    fn binding_errors_name_the_table_and_every_problem() {
        run("SET cortex_buffer.job_table = 'public.no_such_job'");
        assert_fails("SELECT * FROM cortex_buffer.read_checkpoint(gen_random_uuid())", "42P01");
        run("CREATE TABLE public.thin_job (id uuid PRIMARY KEY, status text, checkpoint jsonb)");
        run("SET cortex_buffer.job_table = 'public.thin_job'");
        assert_fails("SELECT * FROM cortex_buffer.read_checkpoint(gen_random_uuid())", "42P16");
        run("RESET cortex_buffer.job_table");
    }

    #[pg_test]
    fn a_table_with_text_status_and_bigint_crc_binds_and_stores_unsigned_crcs() {
        run(
            "CREATE TABLE public.alt_job (id uuid PRIMARY KEY, agent_id uuid NOT NULL, status text NOT NULL,
                checkpoint jsonb, checkpoint_crc bigint, attempt int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 3,
                heartbeat_at timestamptz, started_at timestamptz, completed_at timestamptz, updated_at timestamptz, error jsonb)",
        );
        run("SET cortex_buffer.job_table = 'public.alt_job'");
        let job = one(
            "INSERT INTO public.alt_job VALUES (gen_random_uuid(), gen_random_uuid(), 'RUNNING') RETURNING id::text",
        );
        // {"hello":"world"} has CRC 3624485329, above 2^31: stored unsigned in a bigint column.
        write(&job, r#"{"hello": "world"}"#);
        assert_eq!(one(&format!("SELECT checkpoint_crc::text FROM public.alt_job WHERE id = '{job}'")), "3624485329");
        assert_eq!(one(&format!("SELECT source FROM cortex_buffer.read_checkpoint('{job}')")), "current");
        // The signed form is accepted too.
        run(&format!("UPDATE public.alt_job SET checkpoint_crc = -670481967 WHERE id = '{job}'"));
        assert_eq!(
            one(&format!("SELECT source || ' ' || crc FROM cortex_buffer.read_checkpoint('{job}')")),
            "current 3624485329"
        );
        run("RESET cortex_buffer.job_table");
    }

    #[pg_test]
    fn the_control_plane_trigger_is_untouched_and_still_enforced() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            write(&job, "{}");
            let (state, _) = sqlstate_of(&format!("UPDATE {table} SET status = 'RETRYING' WHERE id = '{job}'"));
            assert_eq!(state, "P0001", "RUNNING → RETRYING is refused by the transition trigger on {table}");
            run(&format!("UPDATE {table} SET status = 'FAILED' WHERE id = '{job}'"));
        });
        // cortex_buffer added nothing to the control plane's table.
        assert_eq!(
            one("SELECT count(*)::text FROM pg_trigger WHERE tgrelid = 'cp.job'::regclass AND NOT tgisinternal"),
            "2"
        );
    }
}
