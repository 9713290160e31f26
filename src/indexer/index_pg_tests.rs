//! `#[pg_test]`s of event indexing through `index_sessions(dir)`: every dialect, exactly once
//! on re-runs and appends, tails, generations, corrupt and hostile lines, quarantine,
//! `file_integrity()` and `indexer_status`.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{one, run, sqlstate_of, TempRoot};

    const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";
    const SPIKE: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143022Z_pod-abc12.jsonl";

    fn spike_line(seq: i64, t: &str, extra: &str) -> String {
        format!(
            r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{JOB}","session_id":"s1","seq":{seq}{extra}}}"#,
            seq % 60
        )
    }

    /// Runs index_sessions over the root; returns "events/corrupt" added for `file`.
    fn index(root: &TempRoot, file: &str) -> String {
        one(&format!(
            "SELECT coalesce(string_agg(events_added || '/' || corrupt_added, ','), 'none')
               FROM cortex_buffer.index_sessions('{}') WHERE path = '{}'",
            root.dir(),
            root.path(file)
        ))
    }

    fn file_row(root: &TempRoot, file: &str, cols: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', {cols}) FROM cortex_buffer.session_file WHERE path = '{}'",
            root.path(file)
        ))
    }

    fn count(table: &str, root: &TempRoot, file: &str) -> i64 {
        Spi::get_one::<i64>(&format!(
            "SELECT count(*) FROM cortex_buffer.{table} t JOIN cortex_buffer.session_file f USING (file_id)
              WHERE f.path = '{}'",
            root.path(file)
        ))
        .ok()
        .flatten()
        .unwrap_or(-1)
    }

    #[pg_test]
    fn a_spike_file_is_indexed_once_and_appends_add_only_the_new_lines() {
        run("SET cortex_buffer.settle_period = '1h'");
        let root = TempRoot::new("ix-append");
        let lines: Vec<String> = vec![
            spike_line(0, "SESSION_START", r#","buffer_schema_version":1,"agent_id":"a1""#),
            spike_line(1, "TOOL_START", r#","invocation_id":"inv_1","tool_name":"web_search","step_index":0"#),
            spike_line(2, "TOOL_RESULT", r#","invocation_id":"inv_1","tool_name":"web_search","success":true"#),
        ];
        root.put(SPIKE, format!("{}\n", lines.join("\n")));
        assert_eq!(index(&root, SPIKE), "3/0");
        assert_eq!(index(&root, SPIKE), "0/0", "nothing new: nothing added");
        assert_eq!(
            one(&format!(
                "SELECT string_agg(concat_ws(':', line_no, type, seq, invocation_id, success, job_id, payload->>'session_id'), ',' ORDER BY byte_offset)
                   FROM cortex_buffer.event WHERE job_id = '{JOB}'"
            )),
            format!("1:SESSION_START:0:{JOB}:s1,2:TOOL_START:1:inv_1:{JOB}:s1,3:TOOL_RESULT:2:inv_1:t:{JOB}:s1")
        );
        root.append(
            SPIKE,
            format!("{}\n\n", spike_line(3, "CHECKPOINT_WRITTEN", r#","checkpoint_id":"c1","step_index":0"#)),
        );
        assert_eq!(index(&root, SPIKE), "1/0");
        assert_eq!(count("event", &root, SPIKE), 4);
        assert_eq!(
            file_row(&root, SPIKE, "total_lines, valid_lines, corrupt_lines, blank_lines, tail_state, generation, schema_version, session_start_seen"),
            "5 4 0 1 complete 1 1 t"
        );
        // The offsets are the lines' starts, and the file's offset is its size.
        let size = std::fs::metadata(root.path(SPIKE)).map(|m| m.len()).unwrap_or(0);
        assert_eq!(file_row(&root, SPIKE, "indexed_offset"), size.to_string());
        let first_len = lines[0].len() + 1;
        assert_eq!(
            one(&format!("SELECT byte_offset::text FROM cortex_buffer.event WHERE job_id = '{JOB}' AND line_no = 2")),
            first_len.to_string()
        );
    }

    #[pg_test]
    fn a_pending_tail_waits_then_counts_and_a_continued_tail_is_judged_afresh() {
        let root = TempRoot::new("ix-tail");
        root.put(SPIKE, format!("{}\n{}", spike_line(0, "A", ""), &spike_line(1, "B", "")[..30]));
        run("SET cortex_buffer.settle_period = '1h'");
        assert_eq!(index(&root, SPIKE), "1/0");
        assert_eq!(file_row(&root, SPIKE, "tail_state, tail_pending"), "pending t");
        run("SET cortex_buffer.settle_period = 0");
        assert_eq!(index(&root, SPIKE), "0/1", "settled: the cut line is the truncated tail");
        assert_eq!(file_row(&root, SPIKE, "tail_state, corrupt_lines, tail_unterminated"), "truncated 1 t");
        // A new writer appends whole lines right after the cut one: scanBuffer sees the cut
        // line and the first new line as one corrupt line (interior now), then the next event;
        // the file is re-indexed to match. The new writer's first line, whole after the cut, is
        // indexed as the event it is as well (a crash cut), without changing the counts.
        root.append(SPIKE, format!("{}\n{}\n", spike_line(0, "SESSION_START", ""), spike_line(1, "D", "")));
        assert_eq!(index(&root, SPIKE), "3/1");
        assert_eq!(
            file_row(
                &root,
                SPIKE,
                "generation, total_lines, valid_lines, corrupt_lines, tail_state, tail_unterminated"
            ),
            "2 3 2 1 complete f"
        );
        assert_eq!(file_row(&root, SPIKE, "crash_cut_lines, trusted"), "1 t");
        assert_eq!(count("corrupt_line", &root, SPIKE), 1);
        assert_eq!(count("event", &root, SPIKE), 3);
        let salvaged = spike_line(0, "A", "").len() + 1 + 30;
        assert_eq!(
            one(&format!("SELECT byte_offset || ' ' || type FROM cortex_buffer.event WHERE job_id = '{JOB}' AND seq = 0 ORDER BY byte_offset DESC LIMIT 1")),
            format!("{salvaged} SESSION_START")
        );
    }

    #[pg_test]
    fn an_unterminated_last_line_that_parses_is_indexed_after_the_settle_period() {
        let root = TempRoot::new("ix-last");
        root.put(SPIKE, format!("{}\n{}", spike_line(0, "A", ""), spike_line(1, "B", "")));
        run("SET cortex_buffer.settle_period = 0");
        assert_eq!(index(&root, SPIKE), "2/0");
        assert_eq!(file_row(&root, SPIKE, "tail_state, tail_unterminated, valid_lines"), "complete t 2");
        // A truncated line whose writer comes back and finishes it becomes an event.
        let cut = TempRoot::new("ix-finish");
        let b = spike_line(1, "B", "");
        cut.put(SPIKE, format!("{}\n{}", spike_line(0, "A", ""), &b[..25]));
        assert_eq!(index(&cut, SPIKE), "1/1");
        cut.append(SPIKE, format!("{}\n{}\n", &b[25..], spike_line(2, "C", "")));
        assert_eq!(index(&cut, SPIKE), "3/0");
        assert_eq!(file_row(&cut, SPIKE, "generation, valid_lines, corrupt_lines, tail_state"), "2 3 0 complete");
    }

    #[pg_test]
    fn a_replaced_or_shrunk_file_is_reindexed_as_a_new_generation() {
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("ix-gen");
        root.put(SPIKE, format!("{}\n{}\n", spike_line(0, "A", ""), spike_line(1, "B", "")));
        assert_eq!(index(&root, SPIKE), "2/0");
        // Replaced by a new file (new inode) with one line.
        std::fs::remove_file(root.path(SPIKE)).unwrap_or_else(|e| panic!("{e}"));
        root.put(SPIKE, format!("{}\n", spike_line(0, "Z", "")));
        assert_eq!(index(&root, SPIKE), "1/0");
        assert_eq!(file_row(&root, SPIKE, "generation, valid_lines"), "2 1");
        assert_eq!(
            one(&format!(
                "SELECT string_agg(type, ',') FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{}'",
                root.path(SPIKE)
            )),
            "Z"
        );
        // Rewritten in place with other first bytes (same inode, same size or larger).
        std::fs::write(root.path(SPIKE), format!("{}\n{}\n", spike_line(0, "Y", ""), spike_line(1, "X", "")))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(index(&root, SPIKE), "2/0");
        assert_eq!(file_row(&root, SPIKE, "generation"), "3");
    }

    #[pg_test]
    fn every_dialect_is_normalised() {
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("ix-dialects");
        let plane = "0193a900-2222-7abc-8def-00000000b002/session-001.jsonl";
        root.put(
            plane,
            concat!(
                r#"{"version":"1.0","timestamp":"2026-03-01T09:00:04.420Z","jobId":"0193a900-2222-7abc-8def-00000000b002","sessionId":"s","agentId":"a","sequence":3,"type":"TOOL_CALL","data":{"toolCallId":"toolu_01A","toolName":"read_file"}}"#,
                "\n",
                r#"{"version":"1.0","timestamp":"2026-03-01T09:00:04.400Z","jobId":"0193a900-2222-7abc-8def-00000000b002","sequence":2,"type":"LLM_RESPONSE","data":{"tokenUsage":{"inputTokens":1200,"outputTokens":310,"cacheReadTokens":0,"cacheCreationTokens":900}}}"#,
                "\n"
            ),
        );
        let claude = "-home-demo/5b3c1f0e-8d2a-4e6b-9f10-2a3b4c5d6e7f.jsonl";
        root.put(
            claude,
            concat!(
                r#"{"type":"assistant","timestamp":"2025-07-01T10:00:00.000Z","sessionId":"5b3c1f0e-8d2a-4e6b-9f10-2a3b4c5d6e7f","requestId":"req_1","message":{"id":"msg_1","content":[{"type":"tool_use","id":"toolu_9","name":"Bash","input":{}}],"usage":{"input_tokens":3,"output_tokens":9,"cache_creation_input_tokens":500,"cache_read_input_tokens":7000}}}"#,
                "\n[1,2]\n"
            ),
        );
        let wink = "wink-run-1/trace.jsonl";
        root.put(wink, "{\"__type__\":\"ToolInvoked\",\"__seq__\":1,\"__ts__\":\"2026-03-03T12:00:01Z\"}\n");
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
        let rows = one(
            "SELECT string_agg(concat_ws('|', f.dialect, e.type, e.seq, e.invocation_id, e.tool_name, e.input_tokens,
                                          e.cache_write_tokens, e.request_id, e.ts AT TIME ZONE 'UTC'), ';' ORDER BY f.path, e.byte_offset)
               FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)",
        );
        assert_eq!(
            rows,
            "claude-code|assistant|toolu_9|Bash|3|500|req_1|2025-07-01 10:00:00;\
             cortex-plane|TOOL_CALL|3|toolu_01A|read_file|2026-03-01 09:00:04.42;\
             cortex-plane|LLM_RESPONSE|2|1200|900|2026-03-01 09:00:04.4;\
             wink-log|ToolInvoked|1|2026-03-03 12:00:01"
        );
        assert_eq!(count("corrupt_line", &root, claude), 1, "a JSON array is not a Claude Code event");
        assert_eq!(file_row(&root, plane, "seq_resets, seq_gaps"), "1 0", "3 then 2 is a reset");
    }

    #[pg_test]
    fn hostile_lines_are_recorded_not_fatal() {
        run("SET cortex_buffer.settle_period = 0");
        run("SET cortex_buffer.max_line_bytes = '16kB'");
        let root = TempRoot::new("ix-hostile");
        let mut body = Vec::new();
        body.extend_from_slice(spike_line(0, "A", "").as_bytes());
        body.extend_from_slice(b"\n\xff\xfe garbage \x00\n");
        body.extend_from_slice(br#"{"type":"N","timestamp":"t","x":"\u0000"}"#);
        body.push(b'\n');
        body.extend_from_slice(br#"{"type":"S","timestamp":"t","x":"\ud800"}"#);
        body.push(b'\n');
        body.extend_from_slice(
            format!("{{\"type\":\"D\",\"timestamp\":\"t\",\"x\":{}1{}}}\n", "[".repeat(5000), "]".repeat(5000))
                .as_bytes(),
        );
        body.extend_from_slice(b"{\"type\":\"E\",\"timestamp\":\"t\",\"x\":1e400}\n");
        // Longer than max_line_bytes: an event all the same (it is valid JSON); the next one,
        // cut, is corrupt.
        body.extend_from_slice(
            format!("{{\"type\":\"L\",\"timestamp\":\"t\",\"x\":\"{}\"}}\n", "y".repeat(20_000)).as_bytes(),
        );
        body.extend_from_slice(
            format!("{{\"type\":\"M\",\"timestamp\":\"t\",\"x\":\"{}\n", "z".repeat(20_000)).as_bytes(),
        );
        body.extend_from_slice("\u{feff}{\"type\":\"BOM\",\"timestamp\":\"t\"}\u{a0}\n".as_bytes());
        body.extend_from_slice(b"{\"type\":\"T\",\"timestamp\":\"t\",\"x\":\"\xff\"}\n");
        root.put(SPIKE, &body);
        assert_eq!(index(&root, SPIKE), "8/2");
        assert_eq!(
            one(&format!(
                "SELECT string_agg(type || ':' || (payload IS NULL)::text || ':' || coalesce(payload_problem, '-'), ',' ORDER BY byte_offset)
                   FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{}'",
                root.path(SPIKE)
            )),
            "A:false:-,N:true:jsonb cannot store \\u0000,S:true:jsonb cannot store a lone surrogate escape,\
             D:true:nested deeper than jsonb is trusted with (1000 levels),E:false:-,L:false:-,BOM:false:-"
                .to_owned()
                + ",T:false:invalid UTF-8 replaced by U+FFFD"
        );
        assert_eq!(
            one(&format!(
                "SELECT string_agg(line_no || ':' || left(reason, 14), ',' ORDER BY line_no) FROM cortex_buffer.corrupt_line c
                   JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{}'",
                root.path(SPIKE)
            )),
            "2:not valid JSON,8:line of 20033 "
        );
        // The invalid UTF-8 preview is readable text.
        assert!(one("SELECT preview FROM cortex_buffer.corrupt_line WHERE line_no = 2").contains('\u{fffd}'));
    }

    #[pg_test]
    fn an_unreadable_file_fails_is_counted_and_is_quarantined() {
        use std::os::unix::fs::PermissionsExt;
        run("SET cortex_buffer.settle_period = 0");
        run("SET cortex_buffer.quarantine_after = 2");
        let root = TempRoot::new("ix-quarantine");
        root.put(SPIKE, format!("{}\n", spike_line(0, "A", "")));
        let good = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T150000Z_pod-b.jsonl";
        root.put(good, format!("{}\n", spike_line(0, "B", "")));
        std::fs::set_permissions(root.path(SPIKE), std::fs::Permissions::from_mode(0o000))
            .unwrap_or_else(|e| panic!("{e}"));
        let detail = || {
            one(&format!(
                "SELECT string_agg(coalesce(detail, '-'), ' | ' ORDER BY action) FROM cortex_buffer.index_sessions('{}') WHERE path = '{}'",
                root.dir(),
                root.path(SPIKE)
            ))
        };
        let first = detail();
        assert!(first.contains("indexing failed:") && first.contains("Permission denied"), "first failure: {first}");
        assert_eq!(count("event", &root, good), 1, "the other file was indexed");
        assert!(detail().contains("now quarantined"));
        assert_eq!(file_row(&root, SPIKE, "failures, quarantined_at IS NOT NULL"), "2 t");
        assert!(!detail().contains("indexing failed"), "quarantined: left alone");
        assert_eq!(one("SELECT files_quarantined::text FROM cortex_buffer.indexer_status"), "1");
        std::fs::set_permissions(root.path(SPIKE), std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        // An operator clears the quarantine: the file is indexed again.
        run(&format!(
            "UPDATE cortex_buffer.session_file SET quarantined_at = NULL, failures = 0 WHERE path = '{}'",
            root.path(SPIKE)
        ));
        assert_eq!(index(&root, SPIKE), "1/0");
    }

    #[pg_test]
    fn file_integrity_judges_the_current_bytes_like_scan_buffer() {
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("ix-integrity");
        root.put(
            SPIKE,
            format!(
                "{}\n{{bad\n\n{}\n{{\"type\":\"X\"}}\n{}\n{{\"type\":\"T",
                spike_line(0, "A", ""),
                spike_line(1, "B", ""),
                spike_line(5, "C", "")
            ),
        );
        let fi = one(&format!(
            "SELECT concat_ws(' ', total_lines, valid_lines, corrupt_lines, blank_lines, tail_truncated, tail_pending,
                               round(corruption_ratio::numeric, 3), severity, trusted, seq_gaps, seq_resets, dialect, seq_first_missing)
               FROM cortex_buffer.file_integrity('{}')",
            root.path(SPIKE)
        ));
        assert_eq!(fi, "7 3 2 1 t f 0.333 corrupt_interior f 1 0 cortex-spike 2");
        // Indexing stores the same verdict.
        index(&root, SPIKE);
        assert_eq!(
            file_row(&root, SPIKE, "total_lines, valid_lines, corrupt_lines - last_failed_parse::int, blank_lines, tail_state, round(corruption_ratio::numeric, 3), trusted"),
            "7 3 2 1 truncated 0.333 f"
        );
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.file_integrity('relative/x.jsonl')").0, "22023");
        assert_eq!(
            one(&format!(
                "SELECT severity || ' ' || trusted FROM cortex_buffer.file_integrity('{}')",
                root.path("missing/x.jsonl")
            )),
            "unreadable false"
        );
        run("CREATE ROLE cb_reader2 NOLOGIN; GRANT pg_read_server_files TO cb_reader2");
        run("SET ROLE cb_reader2");
        let outside = sqlstate_of("SELECT * FROM cortex_buffer.file_integrity('/etc/passwd')").0;
        run("RESET ROLE");
        assert_eq!(outside, "42501");
    }

    #[pg_test]
    fn indexer_status_sums_up_the_files() {
        run("SET cortex_buffer.settle_period = '1h'");
        let root = TempRoot::new("ix-status");
        root.put(SPIKE, format!("{}\n{{bad\n{}", spike_line(0, "A", ""), spike_line(1, "B", "")));
        index(&root, SPIKE);
        assert_eq!(
            one("SELECT concat_ws(' ', worker_state, files_tracked, events_indexed, corrupt_lines, files_pending_tail, bytes_pending > 0) FROM cortex_buffer.indexer_status"),
            // The test cluster preloads the library with the worker disabled.
            "disabled 1 1 1 1 t"
        );
    }

    #[pg_test]
    fn a_jobs_latest_session_file_is_chosen_numerically() {
        let root = TempRoot::new("ix-order");
        for n in ["998", "999", "1000"] {
            root.put(&format!("{JOB}/session-{n}.jsonl"), "");
        }
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
        let latest = |order: &str| {
            one(&format!(
                "SELECT substr(path, length(path) - 17) FROM cortex_buffer.session_file WHERE job_dir = '{JOB}' ORDER BY {order} LIMIT 1"
            ))
        };
        assert_eq!(latest("session_ordinal DESC"), "session-1000.jsonl");
        // The control plane's lexicographic sort would resume from session-999.
        assert_eq!(latest("path DESC"), "/session-999.jsonl");
    }

    /// PostgreSQL's own `jsonb_in` bytes for `text`, without the varlena header (read while
    /// the SPI connection that produced the datum is still open).
    fn postgres_jsonb(text: &str) -> Vec<u8> {
        Spi::connect(|client| {
            let rows =
                client.select("SELECT $1::jsonb", None, &[text.into()]).unwrap_or_else(|e| panic!("{text}: {e}"));
            let doc: crate::pg::jsonb::RawJsonb =
                rows.first().get_one().unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("NULL for {text}"));
            let mut bytes = Vec::new();
            doc.with_payload(|p| bytes.extend_from_slice(p));
            bytes
        })
    }

    #[pg_test]
    fn indexer_jsonb_bytes_and_recoverys_printed_text_are_exactly_postgres_own() {
        let mut docs: Vec<String> = include_str!("../../crates/core/src/spend/testdata/claude_code_usage.jsonl")
            .lines()
            .map(str::to_owned)
            .collect();
        for d in [
            "0",
            "-0",
            "-0.00",
            "1.50",
            "1e400",
            "-2.5E-300",
            "1e-70",
            "123456789012345678901234567890.123456789",
            "0.0001",
            "1E+5",
            "100",
            "10000",
            "9999",
            "0.1",
            "-1e63",
            "1e252",
            "1e253",
            "1e-383",
            "\"\"",
            "\"é\\n\\u00e9\\ud83d\\ude00\"",
            "true",
            "false",
            "null",
            "[]",
            "{}",
            "[[[]]]",
            "{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}}}",
            "{\"b\":1,\"a\":2,\"aa\":3,\"a\":4,\"\":5}",
            "[1,\"2\",true,null,2.50,{},[]]",
        ] {
            docs.push(d.to_owned());
        }
        docs.push(format!("[{}]", (0..100).map(|i| format!("{i}.5")).collect::<Vec<_>>().join(",")));
        docs.push(format!(
            "{{{}}}",
            (0..70).map(|i| format!("\"k{i}\":\"{}\"", "v".repeat(i))).collect::<Vec<_>>().join(",")
        ));
        // Random documents from a small grammar.
        let mut seed: u64 = 0x1234_5678_9abc_def1;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        fn gen(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> String {
            match if depth > 4 { next(5) } else { next(8) } {
                0 => "null".into(),
                1 => {
                    if next(2) == 0 {
                        "true".into()
                    } else {
                        "false".into()
                    }
                }
                2 => format!(
                    "{}{}.{}e{}",
                    if next(2) == 0 { "-" } else { "" },
                    next(100_000),
                    next(1000),
                    next(40) as i64 - 20
                ),
                3 => format!("{}", next(1 << 40)),
                4 => format!("\"s{}\\t\\\"é{}\"", next(1000), "x".repeat(next(40) as usize)),
                5 | 6 => format!("[{}]", (0..next(40)).map(|_| gen(next, depth + 1)).collect::<Vec<_>>().join(",")),
                _ => format!(
                    "{{{}}}",
                    (0..next(40))
                        .map(|_| format!("\"k{}\":{}", next(30), gen(next, depth + 1)))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }
        }
        for _ in 0..400 {
            docs.push(gen(&mut next, 0));
        }
        let mut differ = Vec::new();
        let mut printed_differ = Vec::new();
        for d in &docs {
            let mut ours = Vec::new();
            cortex_buffer_core::json::jsonb_write::to_jsonb(d, &mut ours).unwrap_or_else(|e| panic!("{d}: {e:?}"));
            let theirs = postgres_jsonb(d);
            if ours[4..] != theirs[..] {
                differ.push(d.clone());
            }
            // Recovery prints stored lines itself (`jsonb_text`): the text is jsonb_out's.
            let mut printed = String::new();
            let root = cortex_buffer_core::json::jsonb_format::Jsonb::root(&theirs).unwrap_or_else(|e| panic!("{e:?}"));
            cortex_buffer_core::json::jsonb_text::write_value(root, &mut printed).unwrap_or_else(|e| panic!("{e:?}"));
            let jsonb_out =
                Spi::get_one_with_args::<String>("SELECT $1::pg_catalog.jsonb::pg_catalog.text", &[d.as_str().into()])
                    .unwrap_or_else(|e| panic!("{e}"))
                    .unwrap_or_default();
            if printed != jsonb_out {
                printed_differ.push((printed, jsonb_out));
            }
        }
        assert!(differ.is_empty(), "{} of {} differ, e.g. {:?}", differ.len(), docs.len(), differ.first());
        assert!(
            printed_differ.is_empty(),
            "{} of {} print differently, e.g. {:?}",
            printed_differ.len(),
            docs.len(),
            printed_differ.first()
        );
    }

    #[pg_test]
    fn a_transaction_of_many_small_recordings_holds_a_bounded_number_of_new_path_locks() {
        // Three recordings in one transaction, of 32, 32 and 1 new files: the first two take a
        // lock of each path's own (64, the budget), the third its shared key instead. In a
        // subtransaction rolled back at once: the shared key held exclusively would make other
        // tests' new files on it busy (this cluster runs them side by side).
        let own_locks = "SELECT count(*)::pg_catalog.text FROM pg_catalog.pg_locks
                          WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()
                            AND classid::pg_catalog.int4 = pg_catalog.hashtext('cortex_buffer session_file path')";
        let exclusive_keys = "SELECT count(*)::pg_catalog.text FROM pg_catalog.pg_locks
                               WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND mode = 'ExclusiveLock'
                                 AND classid::pg_catalog.int4 = pg_catalog.hashtext('cortex_buffer session_file')";
        let roots: Vec<(TempRoot, usize)> = [("a", 32), ("b", 32), ("c", 1)]
            .into_iter()
            .map(|(volume, files)| {
                let root = TempRoot::new(&format!("ix-own-locks-{volume}"));
                for j in 0..files {
                    root.put(&format!("job-{j}/session-001.jsonl"), format!("{}\n", spike_line(0, "A", "")));
                }
                (root, files)
            })
            .collect();
        let seen = crate::pg::xact::rolled_back(|| {
            let mut seen = Vec::new();
            for (root, _) in &roots {
                seen.push(one(&format!(
                    "SELECT (count(*) FILTER (WHERE action = 'new'))::text FROM cortex_buffer.index_sessions('{}')",
                    root.dir()
                )));
                seen.push(one(own_locks));
            }
            seen.push(one(exclusive_keys));
            Ok(seen)
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen, vec!["32", "32", "32", "64", "1", "64", "1"], "new files, own locks after each; shared keys");
        assert_eq!(one(own_locks), "0", "the rollback let them go");
    }

    #[pg_test]
    fn a_trigger_on_event_is_honoured_by_inserting_through_sql() {
        run("SET cortex_buffer.settle_period = 0");
        run("CREATE TABLE public.seen (line_no bigint, payload_type text, by_role text)");
        run("CREATE FUNCTION public.note_event() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO public.seen VALUES (NEW.line_no, NEW.payload->>'type', current_user); RETURN NEW; END $$");
        run(
            "CREATE TRIGGER note AFTER INSERT ON cortex_buffer.event FOR EACH ROW EXECUTE FUNCTION public.note_event()",
        );
        let root = TempRoot::new("ix-trigger");
        root.put(SPIKE, format!("{}\n{}\nnot json\n", spike_line(0, "A", ""), spike_line(1, "B", r#","x":1.50"#)));
        // The trigger runs as cortex_buffer_definer, never as a superuser: without a grant of
        // its own it may not write its table, and the file fails as an INSERT would.
        let refused = one(&format!(
            "SELECT detail FROM cortex_buffer.index_sessions('{}') WHERE path = '{}'",
            root.dir(),
            root.path(SPIKE)
        ));
        assert!(refused.contains("permission denied for table seen"), "{refused}");
        run("GRANT INSERT ON public.seen TO cortex_buffer_definer");
        assert_eq!(index(&root, SPIKE), "2/1");
        assert_eq!(one("SELECT string_agg(DISTINCT by_role, ',') FROM public.seen"), "cortex_buffer_definer");
        assert_eq!(
            one("SELECT string_agg(line_no || ':' || payload_type, ',' ORDER BY line_no) FROM public.seen"),
            "1:A,2:B"
        );
        // The SQL path stores the same payload bytes: numbers keep their scale.
        assert_eq!(
            one(&format!("SELECT payload->>'x' FROM cortex_buffer.event WHERE job_id = '{JOB}' AND line_no = 2")),
            "1.50"
        );
    }

    #[pg_test]
    fn job_events_returns_a_jobs_events_in_session_and_file_order() {
        run("SET cortex_buffer.settle_period = 0");
        let root = TempRoot::new("ix-job-events");
        // Two sessions of the job (the second sorts after the first numerically) and another job.
        root.put(
            &format!("{JOB}/session-10.jsonl"),
            format!("{}\n{}\n", spike_line(0, "C", ""), spike_line(1, "D", "")),
        );
        root.put(
            &format!("{JOB}/session-9.jsonl"),
            format!("{}\n{}\n", spike_line(0, "A", ""), spike_line(1, "B", "")),
        );
        root.put("0193a8b2-7c41-7d2e-9f00-000000000999/session-1.jsonl", format!("{}\n", spike_line(0, "X", "")));
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
        assert_eq!(
            one(&format!("SELECT string_agg(type, '' ORDER BY NULL) FROM cortex_buffer.job_events('{JOB}')")),
            "ABCD"
        );
        assert_eq!(
            one(&format!("SELECT string_agg(type, '') FROM cortex_buffer.job_events('{JOB}', '2026-02-23T14:30:01Z')")),
            "BD",
            "events at or after the time"
        );
        assert_eq!(one("SELECT count(*)::text FROM cortex_buffer.job_events(gen_random_uuid())"), "0");
    }

    /// The plan of `query`, one line of EXPLAIN output per line.
    fn plan(query: &str) -> String {
        let mut lines = Vec::new();
        Spi::connect(|client| {
            let rows = client.select(&format!("EXPLAIN (COSTS OFF) {query}"), None, &[]).ok()?;
            for row in rows {
                lines.push(row.get::<String>(1).ok().flatten().unwrap_or_default());
            }
            Some(())
        });
        lines.join("\n")
    }

    #[pg_test]
    fn the_recovery_lookups_are_served_by_indexes() {
        // Sequential scans priced out: on a near-empty table the planner would pick them, and
        // what is checked is that an index exists for each lookup, not the cost model.
        run("SET enable_seqscan = off");
        let by_file_offset = plan("SELECT * FROM cortex_buffer.event WHERE file_id = 1 AND byte_offset > 100");
        assert!(by_file_offset.contains("event_pkey"), "{by_file_offset}");
        let by_invocation = plan("SELECT * FROM cortex_buffer.event WHERE invocation_id = 'toolu_01'");
        assert!(by_invocation.contains("event_invocation_idx"), "{by_invocation}");
        // job_events() is a definer function (never inlined): its own query is planned here.
        run("DO $$ BEGIN EXECUTE 'PREPARE job_events_body(uuid, timestamptz) AS ' || regexp_replace(regexp_replace(
                substring((SELECT prosrc FROM pg_proc WHERE oid = 'cortex_buffer.job_events(uuid, timestamptz)'::regprocedure)
                          FROM 'RETURN QUERY(.*);\\s*END'),
                '\\mjob\\M', '$1', 'g'), '\\msince\\M', '$2', 'g'); END $$");
        let job_events = plan(&format!("EXECUTE job_events_body('{JOB}', now())"));
        run("DEALLOCATE job_events_body");
        assert!(job_events.contains("session_file_job_order_idx") && job_events.contains("event_pkey"), "{job_events}");
    }
}
