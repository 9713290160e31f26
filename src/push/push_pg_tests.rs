//! `#[pg_test]`s of push ingestion: the tailer's own cases through `append_session_bytes`
//! (parity with `index_sessions()` on the same bytes, replays, gaps, overlaps, split lines and
//! characters, the settled tail, a new identity, a rewrite, hostile chunks, quarantine), its
//! limits and errors, the source mapping, `pushed_offsets`, `await_pushed`, and recovery on
//! pushed files.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{error_of, one, run, TempRoot};

    const JOB: &str = "0193a8b2-7c41-7d2e-9f00-00000000f001";

    /// The single value `sql` (a whole SELECT) returns, as text.
    fn val(sql: &str) -> String {
        one(&format!("SELECT ({sql})::text"))
    }

    fn rel(name: &str) -> String {
        format!("{JOB}/{name}")
    }

    fn line(seq: i64, t: &str, extra: &str) -> String {
        format!(
            r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{JOB}","session_id":"s1","seq":{seq}{extra}}}"#,
            seq % 60
        )
    }

    fn setup() {
        run("INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('node-a', current_user, false)");
        run(&format!("INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('node-a', '{JOB}')"));
    }

    /// One push; "committed events corrupt action".
    fn push(relpath: &str, start: usize, chunk: &[u8], identity: &str, last: bool) -> String {
        one(&format!(
            "SELECT concat_ws(' ', committed_offset, events_added, corrupt_added, action)
               FROM cortex_buffer.append_session_bytes('node-a', '{relpath}', {start}, '\\x{}'::bytea, '{identity}', {last})",
            hex(chunk)
        ))
    }

    /// [`push`] with a reported file size.
    fn push_sized(
        relpath: &str,
        start: usize,
        chunk: &[u8],
        identity: &str,
        last: bool,
        size: Option<usize>,
    ) -> String {
        one(&format!(
            "SELECT concat_ws(' ', committed_offset, events_added, corrupt_added, action)
               FROM cortex_buffer.append_session_bytes('node-a', '{relpath}', {start}, '\\x{}'::bytea, '{identity}', {last}, {})",
            hex(chunk),
            size.map_or("NULL".to_owned(), |s| s.to_string())
        ))
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The rows of a file as "offset:line:type" and corrupt rows as "offset:line:!reason".
    fn rows_of(path: &str) -> String {
        one(&format!(
            "SELECT string_agg(r, ',' ORDER BY o) FROM (
               SELECT e.byte_offset o, e.byte_offset || ':' || e.line_no || ':' || coalesce(e.type, '') || ':' || md5(coalesce(e.payload::text, '')) r
                 FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{path}'
               UNION ALL
               SELECT c.byte_offset, c.byte_offset || ':' || c.line_no || ':!' || c.reason
                 FROM cortex_buffer.corrupt_line c JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{path}') x"
        ))
    }

    fn integrity_of(path: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', indexed_offset, indexed_lines, total_lines, valid_lines, corrupt_lines, blank_lines,
                              last_failed_parse, seq_gaps, seq_resets, tail_state, trusted, dialect)
               FROM cortex_buffer.session_file WHERE path = '{path}'"
        ))
    }

    #[pg_test]
    fn pushed_chunks_give_the_rows_and_integrity_index_sessions_gives_the_same_bytes() {
        setup();
        // Valid lines, a blank one, corrupt ones, a seq gap, invalid UTF-8, a split multi-byte
        // character, and a crash-cut tail.
        let mut data = Vec::new();
        for s in 0..40 {
            if s == 7 {
                data.extend_from_slice(b"{\"type\":\"TOOL_START\",\"cut\n");
            } else if s == 11 {
                data.extend_from_slice(b"   \n");
            } else if s == 13 {
                data.extend_from_slice(b"{\"bad\":\"\xff\xfe\"}\n");
            } else {
                let seq = if s > 20 { s + 3 } else { s };
                data.extend_from_slice(line(seq, "TOOL_START", r#","tool_name":"é€😀""#).as_bytes());
                data.push(b'\n');
            }
        }
        data.extend_from_slice(b"{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026");
        let name = "session_20260223T143022Z_pod-a.jsonl";
        let root = TempRoot::new("push-parity");
        root.put(&rel(name), &data);
        run("SET cortex_buffer.settle_period = 0");
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
        let tailed = root.path(&rel(name));

        // Pushed in odd chunks (one cuts 😀 in half), resent from the committed offset after
        // each, and the rest sent final, as a shipper does once the file has settled.
        let mut at = 0;
        for step in [5usize, 250, 3, 700, 1, 1200] {
            let to = (at + step).min(data.len());
            let out = push(&rel(name), at, &data[at..to], "1:2:abc", false);
            let committed: usize = out.split(' ').next().and_then(|c| c.parse().ok()).unwrap_or(0);
            assert!(committed <= to, "{out}");
            at = to;
        }
        push(&rel(name), at, &data[at..], "1:2:abc", false);
        let committed: usize =
            val(&format!("SELECT indexed_offset FROM cortex_buffer.session_file WHERE path = 'push:/{}'", rel(name)))
                .parse()
                .unwrap_or(0);
        assert!(committed < data.len(), "the unterminated tail is not committed before final");
        let out = push(&rel(name), committed, &data[committed..], "1:2:abc", true);
        assert!(out.starts_with(&format!("{} ", data.len())), "{out}");

        let pushed = format!("push:/{}", rel(name));
        assert_eq!(rows_of(&pushed), rows_of(&tailed), "the same rows");
        assert_eq!(integrity_of(&pushed), integrity_of(&tailed), "the same integrity");
    }

    #[pg_test]
    fn replays_overlaps_and_gaps_follow_the_committed_offset() {
        setup();
        let name = rel("session-001.jsonl");
        let a = format!("{}\n{}\n", line(0, "TOOL_START", ""), line(1, "TOOL_RESULT", ""));
        let out = push(&name, 0, a.as_bytes(), "9:9:x", false);
        assert_eq!(out, format!("{} 2 0 new", a.len()));
        // The same chunk again: nothing changes.
        assert_eq!(push(&name, 0, a.as_bytes(), "9:9:x", false), format!("{} 0 0 replayed", a.len()));
        // A chunk overlapping the committed offset: only its new part counts.
        let b = format!("{}\n", line(2, "TOOL_START", ""));
        let both = format!("{a}{b}");
        assert_eq!(push(&name, 10, &both.as_bytes()[10..], "9:9:x", false), format!("{} 1 0 appended", both.len()));
        // A chunk after the end of what the server has: refused, with the offset to send from.
        let (state, hint, detail) = error_of(&format!(
            "SELECT * FROM cortex_buffer.append_session_bytes('node-a', '{name}', {}, '\\x7b7d0a', '9:9:x')",
            both.len() + 5
        ))
        .unwrap_or_default();
        assert_eq!(state, "55000");
        assert_eq!(detail.as_deref(), Some(format!("expected offset: {}", both.len()).as_str()));
        assert!(hint.unwrap_or_default().contains("pushed_offsets"));
        assert_eq!(val(&format!("SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = 'push:/{name}'")), "3");
        // Where the shipper resumes.
        assert_eq!(
            one("SELECT concat_ws(' ', relpath, file_identity, committed_offset, held_bytes, head_len) FROM cortex_buffer.pushed_offsets('node-a')"),
            format!("{name} 9:9:x {} 0 {}", both.len(), both.len())
        );
    }

    #[pg_test]
    fn a_line_longer_than_a_chunk_is_held_until_its_newline() {
        setup();
        let name = rel("session-002.jsonl");
        let l = format!("{}\n", line(0, "LLM_RESPONSE", &format!(r#","text":"{}""#, "ü".repeat(3000))));
        let bytes = l.as_bytes();
        let mut at = 0;
        let mut outs = Vec::new();
        while at < bytes.len() {
            let to = (at + 1000).min(bytes.len());
            outs.push(push(&name, at, &bytes[at..to], "7:7:y", false));
            at = to;
        }
        assert!(outs[..outs.len() - 1].iter().all(|o| o.starts_with("0 0 0 ")), "{outs:?}");
        assert_eq!(outs.last().map(String::as_str), Some(format!("{} 1 0 appended", bytes.len()).as_str()));
        assert_eq!(val(&format!("SELECT held_len FROM cortex_buffer.pushed_file WHERE relpath = '{name}'")), "0");
    }

    /// A line longer than max_line_bytes that is an event streams across pushes: the server
    /// keeps its first bytes and its reducer's state (bounded by its share of max_line_memory), never the line, and indexes
    /// at its end the event the tailer indexes from the same bytes; the push path and
    /// index_sessions() of the same file give the same rows.
    #[pg_test]
    fn an_over_long_event_streams_across_pushes_as_its_reduction() {
        setup();
        run("SET cortex_buffer.max_line_bytes = 4096");
        let name = rel("session-003.jsonl");
        let big =
            line(1, "TOOL_RESULT", &format!(r#","invocation_id":"i1","result_summary":"{}""#, "ë".repeat(150_000)));
        let data =
            format!("{}\n{big}\n{}\n", line(0, "TOOL_START", r#","invocation_id":"i1""#), line(2, "LLM_REQUEST", ""));
        let bytes = data.as_bytes();
        let mut at = 0;
        let mut states = Vec::new();
        while at < bytes.len() {
            let to = (at + 7_000).min(bytes.len());
            push(&name, at, &bytes[at..to], "8:8:z", false);
            states.push(val(&format!(
                "SELECT coalesce(octet_length(held_reduction), 0) FROM cortex_buffer.pushed_file WHERE relpath = '{name}'"
            )));
            at = to;
        }
        // While the line streamed, its state was kept, and stayed small; once it ended, none.
        let sizes: Vec<i64> = states.iter().map(|s| s.parse().unwrap_or(-1)).collect();
        assert!(sizes.iter().any(|n| *n > 0), "{sizes:?}");
        assert!(sizes.iter().all(|n| (0..64 * 1024).contains(n)), "{sizes:?}");
        assert_eq!(sizes.last(), Some(&0));
        let path = format!("push:/{name}");
        assert_eq!(
            val(&format!(
                "SELECT concat_ws(' ', total_lines, valid_lines, corrupt_lines, trusted) FROM cortex_buffer.session_file WHERE path = '{path}'"
            )),
            "3 3 0 t",
            "three events, nothing corrupt, the file trusted"
        );
        assert_eq!(
            val(&format!(
                "SELECT e.payload_problem FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
                  WHERE f.path = '{path}' AND e.type = 'TOOL_RESULT'"
            )),
            format!(
                "line of {} bytes is longer than cortex_buffer.max_line_bytes (4096): strings longer than 65536 bytes were truncated",
                big.len()
            )
        );
        // The tailer, on the same bytes.
        let root = TempRoot::new("push-oversized");
        root.put(&format!("{JOB}/session-003.jsonl"), bytes);
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.0.display()));
        let tailed = format!("{}/{JOB}/session-003.jsonl", root.0.display());
        assert_eq!(rows_of(&path), rows_of(&tailed));
        run("RESET cortex_buffer.max_line_bytes");
    }

    /// WAL bytes written since `lsn`.
    fn wal_since(lsn: &str) -> i64 {
        val(&format!("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '{lsn}')")).parse().unwrap_or(i64::MAX)
    }

    /// 100 one-byte pushes after a line of about 1 MiB with no newline yet write about their own
    /// bytes: the held tail is kept as pieces, and each push adds one (before 0.18.0 each
    /// rewrote the whole tail: 115 MB of WAL). Held whole (under the line cap) and over the cap
    /// (its first bytes and its reducer's state), and the line, once it ends, indexed as the
    /// tailer indexes the same bytes.
    #[pg_test]
    fn one_byte_pushes_after_a_long_unterminated_line_write_about_their_bytes() {
        setup();
        for (name, cap, text) in
            [("session-041.jsonl", 1 << 20, (1 << 20) - 400), ("session-042.jsonl", 1 << 19, (1 << 20) - 400)]
        {
            run(&format!("SET cortex_buffer.max_line_bytes = {cap}"));
            let relpath = rel(name);
            let mut data = format!("{}\n", line(0, "TOOL_START", r#","invocation_id":"i1""#)).into_bytes();
            let long =
                line(1, "TOOL_RESULT", &format!(r#","invocation_id":"i1","result_summary":"{}"#, "a".repeat(text)));
            data.extend_from_slice(long.as_bytes());
            push(&relpath, 0, &data, "9:9:w", false);
            let lsn = val("SELECT pg_current_wal_insert_lsn()");
            for _ in 0..100 {
                push(&relpath, data.len(), b"b", "9:9:w", false);
                data.push(b'b');
            }
            let wal = wal_since(&lsn);
            let pieces = val(&format!(
                "SELECT count(*) FROM cortex_buffer.pushed_held h JOIN cortex_buffer.pushed_file p USING (file_id) WHERE p.relpath = '{relpath}'"
            ));
            pgrx::log!("{name}: 100 one-byte pushes after a {} byte line (cap {cap}) wrote {wal} bytes of WAL, {pieces} pieces", long.len());
            assert!(wal < 1_000_000, "{name}: {wal} bytes of WAL, {pieces} pieces");
            let held = val(&format!(
                "SELECT concat_ws(' ', p.held_len, octet_length((SELECT string_agg(bytes, ''::bytea ORDER BY at) FROM cortex_buffer.pushed_held h WHERE h.file_id = p.file_id)))
                   FROM cortex_buffer.pushed_file p WHERE p.relpath = '{relpath}'"
            ));
            let whole = long.len() + 100;
            let kept = if whole <= cap { whole } else { 1024 };
            assert_eq!(held, format!("{whole} {kept}"), "{name}: held length and kept bytes");
            let end = data.len();
            data.extend_from_slice(format!("\"}}\n{}\n", line(2, "LLM_REQUEST", "")).as_bytes());
            assert_eq!(push(&relpath, end, &data[end..], "9:9:w", false), format!("{} 2 0 appended", data.len()));
            assert_eq!(val(&format!("SELECT count(*) FROM cortex_buffer.pushed_held h JOIN cortex_buffer.pushed_file p USING (file_id) WHERE p.relpath = '{relpath}'")), "0");
            let root = TempRoot::new("push-held-pieces");
            root.put(&format!("{JOB}/{name}"), &data);
            run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.0.display()));
            assert_eq!(rows_of(&format!("push:/{relpath}")), rows_of(&format!("{}/{JOB}/{name}", root.0.display())));
        }
        run("RESET cortex_buffer.max_line_bytes");
    }

    /// Sequential scans of the push's tables in this transaction so far.
    fn seq_scans() -> String {
        val("SELECT string_agg(relname || ' ' || seq_scan, ', ' ORDER BY relname) FROM pg_stat_xact_user_tables
              WHERE schemaname = 'cortex_buffer' AND relname IN ('pushed_file', 'pushed_held', 'session_file')")
    }

    /// A push finds its file's rows by key however many files there are: its statements keep the
    /// generic plans made on the first push, when the tables were small, and those plans must
    /// not read whole tables (a generic plan left free hash-joined the batch to sequential scans
    /// of all three, so every push read every pushed file's rows).
    #[pg_test]
    fn a_push_reads_its_own_files_rows_not_whole_tables() {
        setup();
        // The first pushes, whose plans the rest keep, meet almost empty tables.
        for n in 0..40 {
            let mut data = format!("{}\n", line(0, "TOOL_START", r#","invocation_id":"i1""#)).into_bytes();
            data.extend_from_slice(br#"{"type":"LLM_REQ"#);
            push(&rel(&format!("session-{n:03}.jsonl")), 0, &data, "9:9:s", false);
        }
        let before = seq_scans();
        // A new file, a held tail ended, a replay, a new identity under a known relpath.
        let first = format!("{}\n", line(0, "TOOL_START", r#","invocation_id":"i1""#));
        assert_eq!(
            push(&rel("session-900.jsonl"), 0, first.as_bytes(), "9:9:s", false),
            format!("{} 1 0 new", first.len())
        );
        let end = format!("UEST\",\"timestamp\":\"2026-02-23T14:30:01.000Z\",\"job_id\":\"{JOB}\",\"session_id\":\"s1\",\"seq\":1}}\n");
        let at = first.len() + r#"{"type":"LLM_REQ"#.len();
        assert_eq!(
            push(&rel("session-007.jsonl"), at, end.as_bytes(), "9:9:s", false),
            format!("{} 1 0 appended", at + end.len())
        );
        push(&rel("session-007.jsonl"), 0, first.as_bytes(), "9:9:s", false);
        push(&rel("session-008.jsonl"), 0, first.as_bytes(), "9:9:t", false);
        assert_eq!(seq_scans(), before, "sequential scans of the push's tables by these four pushes");
    }

    /// A call whose input an over-long line's reduction cut is keyed from the line itself when
    /// the file holds it whole within max_line_memory (a tailed file), and verified
    /// (`input_unknown`) when it does not (a pushed file: the server kept only the reduction).
    #[pg_test]
    fn a_cut_input_is_hashed_from_the_file_when_it_can_be_and_verified_when_not() {
        setup();
        run("SET cortex_buffer.max_line_bytes = 4096");
        let tailed_job = "0193a8b2-7c41-7d2e-9f00-00000000f0aa";
        for job in [JOB, tailed_job] {
            run(&format!(
                "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at) VALUES ('{job}', gen_random_uuid(), 'RUNNING', now() - interval '1 minute')"
            ));
        }
        let input = format!(r#"{{"path":"/tmp/a.txt","content":"{}"}}"#, "z".repeat(100_000));
        let call = |job: &str| {
            format!(
                r#"{{"version":"1.0","timestamp":"2026-02-23T14:30:00.000Z","jobId":"{job}","sessionId":"s","agentId":"a","type":"TOOL_CALL","data":{{"type":"tool_use","toolName":"write_file","toolInput":{input}}},"sequence":0}}"#
            ) + "\n"
        };
        let want = val(&format!(
            "SELECT encode(sha256(convert_to(cortex_buffer.canonical_json('{input}'::jsonb), 'UTF8')), 'hex')"
        ));
        // Tailed: read back from the file.
        let root = TempRoot::new("push-cut-input");
        root.put(&format!("{tailed_job}/session-001.jsonl"), call(tailed_job));
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.0.display()));
        let plan =
            |job: &str, path: &str| one(&format!("SELECT cortex_buffer.recovery_plan('{job}') #>> '{{{path}}}'"));
        assert_eq!(plan(tailed_job, "in_flight,0,tool_name"), "write_file");
        assert_eq!(plan(tailed_job, "in_flight,0,input_hash"), want);
        // Pushed: only the reduction is on the server.
        let name = rel("session-001.jsonl");
        let line = call(JOB);
        push(&name, 0, line.as_bytes(), "9:9:w", true);
        run("SELECT cortex_buffer.confirm_pushed('node-a')");
        assert_eq!(plan(JOB, "verify,0,tool_name"), "write_file");
        assert_eq!(plan(JOB, "verify,0,reason"), "input_unknown");
        assert_eq!(plan(JOB, "in_flight"), "[]");
        run("RESET cortex_buffer.max_line_bytes");
    }

    #[pg_test]
    fn a_new_identity_under_the_same_relpath_is_a_new_file_and_erases_nothing() {
        setup();
        let name = rel("session-001.jsonl");
        let first = format!("{}\n{}\n", line(0, "SESSION_START", ""), line(1, "TOOL_START", r#","tool_name":"a""#));
        push(&name, 0, first.as_bytes(), "1:100:aa", false);
        // A rescheduled pod on another node starts at session-001 again: another file.
        let second = format!("{}\n", line(0, "SESSION_START", ""));
        assert_eq!(push(&name, 0, second.as_bytes(), "2:555:bb", false), format!("{} 1 0 new", second.len()));
        assert_eq!(
            one(&format!(
                "SELECT string_agg(f.path || '=' || f.valid_lines, ' ' ORDER BY p.n) FROM cortex_buffer.pushed_file p
                   JOIN cortex_buffer.session_file f USING (file_id) WHERE p.relpath = '{name}'"
            )),
            format!("push:/{name}=2 push:/{name}#000002=1")
        );
        // The first pod's file can still be continued (its shipper catching up).
        let more = format!("{first}{}\n", line(2, "TOOL_RESULT", r#","tool_name":"a""#));
        assert!(push(&name, first.len(), &more.as_bytes()[first.len()..], "1:100:aa", false).ends_with("1 0 appended"));
        // A rewritten file (same identity, other first bytes) is a new file too.
        let rewritten = format!("{}\n", line(0, "SESSION_START", r#","agent_id":"other""#));
        assert!(push(&name, 0, rewritten.as_bytes(), "1:100:aa", false).ends_with(" new"));
        assert_eq!(val(&format!("SELECT count(*) FROM cortex_buffer.pushed_file WHERE relpath = '{name}'")), "3");
        // Every file's rows are there: 3 + 1 + 1.
        assert_eq!(
            val(&format!("SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.pushed_file p USING (file_id) WHERE p.relpath = '{name}'")),
            "5"
        );
    }

    #[pg_test]
    fn hostile_chunks_are_judged_as_the_tailer_judges_them() {
        setup();
        let name = rel("session-003.jsonl");
        let mut junk: Vec<u8> = (0u8..=255).cycle().take(5000).collect();
        junk.extend_from_slice(b"\n\0\0\0\n{}{}\n");
        junk.extend_from_slice(line(1, "TOOL_START", "").as_bytes());
        junk.push(b'\n');
        let out = push(&name, 0, &junk, "3:3:z", true);
        assert!(out.starts_with(&format!("{} ", junk.len())), "{out}");
        // A session file of the cortex layout is judged by the cortex rules once it has an
        // object; everything before is corrupt, nothing crashed.
        assert_eq!(
            val(&format!("SELECT valid_lines FROM cortex_buffer.session_file WHERE path = 'push:/{name}'")),
            "1"
        );
    }

    #[pg_test]
    fn a_failing_file_is_counted_and_quarantined_while_others_go_on() {
        setup();
        run("SET cortex_buffer.quarantine_after = 2");
        // A trigger that refuses one kind of line stands for an insert that fails.
        run("CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.type = 'POISON' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$");
        run(
            "CREATE TRIGGER refuse BEFORE INSERT ON cortex_buffer.event FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse()",
        );
        let bad = rel("session-004.jsonl");
        let poison = format!("{}\n", line(0, "POISON", ""));
        assert!(push(&bad, 0, poison.as_bytes(), "4:4:p", false).ends_with(" failed"));
        assert!(push(&bad, 0, poison.as_bytes(), "4:4:p", false).ends_with(" failed"));
        assert!(push(&bad, 0, poison.as_bytes(), "4:4:p", false).ends_with(" quarantined"));
        let good = rel("session-005.jsonl");
        let fine = format!("{}\n", line(0, "TOOL_START", ""));
        assert!(push(&good, 0, fine.as_bytes(), "5:5:q", false).ends_with("1 0 new"));
        run("DROP TRIGGER refuse ON cortex_buffer.event");
    }

    #[pg_test]
    fn arguments_limits_and_the_source_mapping_are_checked() {
        setup();
        let call = |args: &str| {
            error_of(&format!("SELECT * FROM cortex_buffer.append_session_bytes({args})"))
                .map(|e| e.0)
                .unwrap_or_default()
        };
        let ok_rel = rel("session-006.jsonl");
        assert_eq!(call(&format!("NULL, '{ok_rel}', 0, '\\x', 'i'")), "22004");
        assert_eq!(call(&format!("'node-a', '{ok_rel}', 0, NULL, 'i'")), "22004");
        assert_eq!(call("'node-a', '../etc/passwd', 0, '\\x', 'i'"), "22023");
        assert_eq!(call(&format!("'node-a', '/{ok_rel}', 0, '\\x', 'i'")), "22023");
        assert_eq!(call("'node-a', 'not-a-job/session-001.jsonl', 0, '\\x', 'i'"), "22023");
        assert_eq!(call(&format!("'node-a', '{ok_rel}', -1, '\\x', 'i'")), "22023");
        assert_eq!(call(&format!("'bad source', '{ok_rel}', 0, '\\x', 'i'")), "22023");
        assert_eq!(call(&format!("'node-a', '{ok_rel}', 0, '\\x', 'has space'")), "22023");
        run("SET cortex_buffer.push_max_chunk = '1kB'");
        assert_eq!(call(&format!("'node-a', '{ok_rel}', 0, ('\\x' || repeat('41', 2000))::bytea, 'i'")), "54000");
        run("RESET cortex_buffer.push_max_chunk");
        // The mapping: an unknown source, a job the source may not write, a login that is not
        // the source's.
        assert_eq!(call(&format!("'node-z', '{ok_rel}', 0, '\\x', 'i'")), "42501");
        let other = "0193a8b2-7c41-7d2e-9f00-00000000f0ff/session-001.jsonl";
        assert_eq!(call(&format!("'node-a', '{other}', 0, '\\x', 'i'")), "42501");
        run("CREATE ROLE push_tester NOLOGIN");
        run("GRANT cortex_buffer_pusher TO push_tester");
        run("SET ROLE push_tester");
        assert_eq!(call(&format!("'node-a', '{ok_rel}', 0, '\\x7b7d0a', 'i'")), "42501", "node-a is the test user's");
        assert_eq!(
            error_of("SELECT * FROM cortex_buffer.pushed_offsets('node-a')").map(|e| e.0).unwrap_or_default(),
            "42501"
        );
        assert_eq!(error_of("SELECT * FROM cortex_buffer.pushed_file").map(|e| e.0).unwrap_or_default(), "42501");
        assert_eq!(error_of("SELECT * FROM cortex_buffer.event").map(|e| e.0).unwrap_or_default(), "42501");
        run("RESET ROLE");
        run("INSERT INTO cortex_buffer.push_source (source, login) VALUES ('pod-7', 'push_tester')");
        run(&format!("INSERT INTO cortex_buffer.push_grant VALUES ('pod-7', '{JOB}')"));
        let token = one("SELECT cortex_buffer.push_source_token('pod-7')");
        run("SET ROLE push_tester");
        let l = format!("{}\n", line(0, "TOOL_START", ""));
        let push = format!(
            "SELECT action FROM cortex_buffer.append_session_bytes('pod-7', '{ok_rel}', 0, '\\x{}'::bytea, 'i', source_token => '{token}')",
            hex(l.as_bytes())
        );
        // Its login alone is not enough: the source's token is what proves the caller is pod-7.
        assert_eq!(
            error_of(&push.replace(&format!(", source_token => '{token}'"), "")).map(|e| e.0).as_deref(),
            Some("42501")
        );
        assert_eq!(one(&push), "new");
        assert_eq!(val(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('pod-7', '{token}')")), "1");
        run("RESET ROLE");
    }

    #[pg_test]
    fn a_plan_reads_pushed_files_and_is_stale_while_bytes_are_not_pushed() {
        setup();
        run(&format!(
            "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at) VALUES ('{JOB}', gen_random_uuid(), 'RUNNING', now() - interval '1 minute')"
        ));
        let name = rel("session-001.jsonl");
        let data = format!(
            "{}\n{}\n",
            line(0, "CHECKPOINT_LOADED", r#","checkpoint_id":null,"step_index":0"#),
            line(1, "TOOL_START", r#","invocation_id":"i1","tool_name":"send_email""#)
        );
        push(&name, 0, data.as_bytes(), "1:1:c", false);
        let plan = |path: &str| one(&format!("SELECT cortex_buffer.recovery_plan('{JOB}') #>> '{{{path}}}'"));
        // No word from the source since the attempt started: the node may hold more.
        assert_eq!(plan("fresh,stale"), "true");
        assert_eq!(plan("fresh,reason"), "remote_unconfirmed");
        run("SELECT cortex_buffer.confirm_pushed('node-a')");
        assert_eq!(plan("fresh,stale"), "false");
        assert_eq!(plan("fresh,reason"), "");
        assert_eq!(plan("sessions,0,pushed,source"), "node-a");
        assert_eq!(plan("sessions,0,pushed,unpushed_bytes"), "0");
        // The shipper reports the file longer than what it pushed: the plan says stale.
        one(&format!(
            "SELECT action FROM cortex_buffer.append_session_bytes('node-a', '{name}', 0, '\\x'::bytea, '1:1:c', false, {})",
            data.len() + 40
        ));
        assert_eq!(plan("fresh,stale"), "true");
        assert!(plan("fresh,detail").contains("40 bytes"), "{}", plan("fresh,detail"));
        // The agent's flush: the server has the first bytes, not the 40 more.
        assert_eq!(val(&format!("SELECT cortex_buffer.await_pushed('{JOB}', '{name}', {}, '0')", data.len())), "true");
        assert_eq!(
            val(&format!("SELECT cortex_buffer.await_pushed('{JOB}', '{name}', {}, '20 ms')", data.len() + 40)),
            "false"
        );
    }
    /// A pushed file is complete for a plan only when its source confirmed after the previous
    /// attempt was superseded: the node may have died with its shipper behind, and a dead node
    /// says nothing. Confirmations before that (or never) leave the plan stale, with what it
    /// knows and since when; await_sources() is the pod's bounded wait for them.
    #[pg_test]
    fn a_pushed_file_needs_a_confirmation_after_the_previous_attempt_was_superseded() {
        setup();
        // The previous attempt was reaped 1 minute ago (a crash record), the job waits to run
        // again.
        run(&format!(
            "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, updated_at) VALUES ('{JOB}', gen_random_uuid(), 'RETRYING', 1, now() - interval '1 minute')"
        ));
        run(&format!(
            "INSERT INTO cortex_buffer.crash (job_id, attempt, reason, recorded_at) VALUES ('{JOB}', 1, 'zombie', now() - interval '50 seconds')"
        ));
        let name = rel("session-001.jsonl");
        let data = format!("{}\n", line(0, "TOOL_START", r#","invocation_id":"i1","tool_name":"pay""#));
        push(&name, 0, data.as_bytes(), "1:1:c", false);
        let plan = |path: &str| one(&format!("SELECT cortex_buffer.recovery_plan('{JOB}') #>> '{{{path}}}'"));
        assert_eq!(plan("fresh,reason"), "remote_unconfirmed");
        assert!(plan("fresh,detail").contains("last confirmation: never"), "{}", plan("fresh,detail"));
        assert_eq!(plan("sessions,0,pushed,confirmed_at"), "");
        // A confirmation dated before the crash record does not cover what the pod wrote after.
        run("SELECT cortex_buffer.confirm_pushed('node-a', '55 seconds')");
        assert_eq!(plan("fresh,reason"), "remote_unconfirmed");
        assert!(!plan("fresh,detail").contains("never"), "{}", plan("fresh,detail"));
        assert_ne!(plan("sessions,0,pushed,confirmed_at"), "");
        assert_eq!(val(&format!("SELECT cortex_buffer.await_sources('{JOB}', '30 ms')")), "false");
        // One after it: the plan is exact, and the wait returns at once.
        run("SELECT cortex_buffer.confirm_pushed('node-a', '10 seconds')");
        assert_eq!(plan("fresh,stale"), "false");
        assert_eq!(val(&format!("SELECT cortex_buffer.await_sources('{JOB}', '0')")), "true");
        // A confirmation never moves back.
        let at = val("SELECT confirmed_at FROM cortex_buffer.push_confirmation WHERE source = 'node-a'");
        run("SELECT cortex_buffer.confirm_pushed('node-a', '59 minutes')");
        assert_eq!(val("SELECT confirmed_at FROM cortex_buffer.push_confirmation WHERE source = 'node-a'"), at);
        assert_eq!(val("SELECT confirmations FROM cortex_buffer.push_confirmation WHERE source = 'node-a'"), "3");
        // A job with no pushed file has nothing to wait for.
        let other = crate::testing::new_job_with("cortex_buffer.job", "RUNNING", "started_at", "now()");
        assert_eq!(val(&format!("SELECT cortex_buffer.await_sources('{other}', '0')")), "true");
    }

    #[pg_test]
    fn confirm_pushed_and_await_sources_check_their_arguments_and_the_source() {
        setup();
        for (sql, state) in [
            ("SELECT cortex_buffer.confirm_pushed(NULL)", "22004"),
            ("SELECT cortex_buffer.confirm_pushed('bad source!')", "22023"),
            ("SELECT cortex_buffer.confirm_pushed('node-a', '-1 second')", "22023"),
            ("SELECT cortex_buffer.confirm_pushed('node-a', '2 hours')", "22023"),
            ("SELECT cortex_buffer.confirm_pushed('no-such-source')", "42501"),
            ("SELECT cortex_buffer.await_sources(NULL)", "22004"),
            ("SELECT cortex_buffer.await_sources(gen_random_uuid(), '2 hours')", "22023"),
        ] {
            let (got, hint, _) = error_of(sql).unwrap_or_else(|| panic!("{sql} succeeded"));
            assert_eq!(got, state, "{sql}");
            assert!(hint.is_some_and(|h| !h.is_empty()), "{sql} has no HINT");
        }
        // Another login may not confirm for the source: its word is the source's.
        run("CREATE ROLE cb_other_pusher NOLOGIN IN ROLE cortex_buffer_pusher");
        run("SET ROLE cb_other_pusher");
        let refused = error_of("SELECT cortex_buffer.confirm_pushed('node-a')");
        run("RESET ROLE");
        assert_eq!(refused.map(|e| e.0).as_deref(), Some("42501"));
    }

    /// One push of a test: relpath, start offset, chunk, identity, final, reported size.
    type TestPush = (String, usize, Vec<u8>, String, bool, Option<usize>);

    /// One batch call; "committed events corrupt action" per push, in order, joined by "|".
    fn push_batch(pushes: &[TestPush]) -> String {
        let arr = |f: &dyn Fn(&TestPush) -> String| pushes.iter().map(f).collect::<Vec<String>>().join(", ");
        one(&format!(
            "SELECT string_agg(concat_ws(' ', committed_offset, events_added, corrupt_added, action), '|' ORDER BY ord)
               FROM cortex_buffer.append_session_batch('node-a', ARRAY[{}], ARRAY[{}]::bigint[], ARRAY[{}]::bytea[],
                                                       ARRAY[{}], ARRAY[{}], ARRAY[{}]::bigint[])",
            arr(&|p| format!("'{}'", p.0)),
            arr(&|p| p.1.to_string()),
            arr(&|p| format!("'\\x{}'", hex(&p.2))),
            arr(&|p| format!("'{}'", p.3)),
            arr(&|p| p.4.to_string()),
            arr(&|p| p.5.map_or("NULL".to_owned(), |s| s.to_string())),
        ))
    }

    /// The five files of the batch parity test: corrupt and blank lines, multi-byte characters,
    /// a line longer than most chunks, a seq gap, an unterminated last line.
    fn parity_files() -> Vec<(String, Vec<u8>)> {
        (0..5)
            .map(|f| {
                let mut data = Vec::new();
                for s in 0..30i64 {
                    match (f, s) {
                        (1, 4) => data.extend_from_slice(b"{\"type\":\"TOOL_START\",\"cut\n   \n"),
                        (2, _) => data.extend_from_slice(line(s, "TOOL_START", r#","tool_name":"é€😀""#).as_bytes()),
                        (3, 9) => data.extend_from_slice(
                            line(s, "LLM_RESPONSE", &format!(r#","text":"{}""#, "x".repeat(3000))).as_bytes(),
                        ),
                        (4, _) => data.extend_from_slice(line(s * 2, "TOOL_RESULT", "").as_bytes()),
                        _ => data.extend_from_slice(line(s, "TOOL_START", "").as_bytes()),
                    }
                    data.push(b'\n');
                }
                if f == 4 {
                    data.extend_from_slice(b"{\"type\":\"TOOL_START\",\"timestamp\":\"2026");
                }
                (rel(&format!("session-{:03}.jsonl", 10 + f)), data)
            })
            .collect()
    }

    /// Pushes the parity files in rounds, as a shipper does (each file from its committed offset,
    /// some from before it, in chunks of odd sizes), with `send` for each round's pushes; each
    /// round's outcomes, then every file's rows and integrity.
    fn parity_rounds(send: &dyn Fn(&[TestPush]) -> Vec<String>) -> Vec<String> {
        let files = parity_files();
        let mut committed = vec![0usize; files.len()];
        let mut seen = Vec::new();
        let sizes = [1usize, 17, 160, 900, 3100, 40];
        for round in 0..12usize {
            let last = round == 11;
            let mut pushes = Vec::new();
            for (f, (name, data)) in files.iter().enumerate() {
                if !last && (round + f) % 4 == 3 {
                    continue; // not every file in every batch
                }
                let back = [0usize, 7, 0, committed[f]][(round + f) % 4].min(committed[f]);
                let start = committed[f] - back;
                let to = if last { data.len() } else { (start + sizes[(round * 3 + f) % sizes.len()]).min(data.len()) };
                // Some pushes report the file's size, as a shipper does.
                let size = (f < 2 && round % 3 == 0).then_some(data.len());
                pushes.push((name.clone(), start, data[start..to].to_vec(), format!("{f}:1:p"), last, size));
                if round == 5 && f == 0 {
                    // The same relpath twice in one batch: the one-by-one path.
                    pushes.push((name.clone(), start, data[start..to].to_vec(), format!("{f}:1:p"), false, None));
                }
            }
            let outs = send(&pushes);
            assert_eq!(outs.len(), pushes.len(), "{outs:?}");
            for (p, out) in pushes.iter().zip(&outs) {
                let f = files.iter().position(|(n, _)| *n == p.0).unwrap_or(0);
                committed[f] = out.split(' ').next().and_then(|c| c.parse().ok()).unwrap_or(committed[f]);
            }
            seen.push(format!("round {round}: {}", outs.join("|")));
        }
        // A file rewritten in place (other first bytes, same identity), with a replay of another:
        // the one-by-one path starts a new file after the rewritten one.
        let (name0, data0) = &files[0];
        let rewrite = vec![
            (
                files[2].0.clone(),
                0,
                format!("{}\n", line(0, "SESSION_START", "")).into_bytes(),
                "2:1:p".to_owned(),
                false,
                None,
            ),
            (name0.clone(), 0, data0.clone(), "0:1:p".to_owned(), true, Some(data0.len())),
        ];
        seen.push(format!("rewrite: {}", send(&rewrite).join("|")));
        let paths = one(&format!(
            "SELECT string_agg(path, ' ' ORDER BY path) FROM cortex_buffer.session_file WHERE path LIKE 'push:/{JOB}/session-01%'"
        ));
        for path in paths.split(' ') {
            seen.push(format!("{path}: {} / {}", rows_of(path), integrity_of(path)));
        }
        // What only a pushed file has, and the size and dialect its session_file row records.
        seen.push(one(&format!(
            "SELECT string_agg(concat_ws(' ', p.relpath, p.n, md5(p.head),
                                         (SELECT md5(string_agg(h.bytes, ''::bytea ORDER BY h.at)) FROM cortex_buffer.pushed_held h WHERE h.file_id = p.file_id),
                                         p.held_len, p.reported_size,
                                         p.pushes, p.dialect_decided, f.size_bytes, f.dialect), ' | ' ORDER BY p.relpath, p.n)
               FROM cortex_buffer.pushed_file p JOIN cortex_buffer.session_file f USING (file_id)
              WHERE p.job_id = '{JOB}'"
        )));
        seen
    }

    #[pg_test]
    fn a_batch_gives_the_outcomes_rows_and_integrity_of_its_pushes_sent_one_by_one() {
        setup();
        run("SET cortex_buffer.max_line_bytes = 2048");
        let shared_before = crate::push::apply::shared_batches();
        // The batch, rolled back afterwards; then the same pushes one by one.
        let batched = crate::pg::xact::rolled_back(|| {
            Ok(parity_rounds(&|pushes| push_batch(pushes).split('|').map(str::to_owned).collect()))
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let shared = crate::push::apply::shared_batches() - shared_before;
        let single = parity_rounds(&|pushes| {
            pushes
                .iter()
                .map(|(r, start, chunk, id, last, size)| push_sized(r, *start, chunk, id, *last, *size))
                .collect()
        });
        for (b, s) in batched.iter().zip(&single) {
            assert_eq!(b, s);
        }
        assert_eq!(batched.len(), single.len());
        // Every round took the shared path but round 5 (a relpath twice) and the rewrite, which
        // went one by one, with the same outcomes.
        assert_eq!(shared, 11, "batches on the shared path");
        assert!(single.iter().any(|r| r.contains("replayed")) && single.iter().any(|r| r.contains("appended")));
        assert!(single.iter().any(|r| r.contains("#000002: 0:1:SESSION_START")), "{single:?}");
    }

    #[pg_test]
    fn a_batch_checks_its_arrays_and_applies_all_its_pushes_or_none() {
        setup();
        let call = |args: &str| {
            error_of(&format!("SELECT * FROM cortex_buffer.append_session_batch({args})"))
                .map(|e| e.0)
                .unwrap_or_default()
        };
        let (a, b) = (rel("session-020.jsonl"), rel("session-021.jsonl"));
        let ok = format!("ARRAY['{a}', '{b}'], ARRAY[0, 0]::bigint[], ARRAY['\\x', '\\x']::bytea[], ARRAY['i', 'j']");
        assert_eq!(call(&format!("NULL, {ok}")), "22004");
        assert_eq!(
            call(&format!(
                "'node-a', ARRAY['{a}', NULL], ARRAY[0, 0]::bigint[], ARRAY['\\x', '\\x']::bytea[], ARRAY['i', 'j']"
            )),
            "22004"
        );
        assert_eq!(
            call(&format!(
                "'node-a', ARRAY['{a}', '{b}'], ARRAY[0]::bigint[], ARRAY['\\x', '\\x']::bytea[], ARRAY['i', 'j']"
            )),
            "22023"
        );
        assert_eq!(call(&format!("'node-a', {ok}, ARRAY[true]")), "22023");
        assert_eq!(call(&format!("'node-a', ARRAY['{a}', '../x.jsonl'], ARRAY[0, 0]::bigint[], ARRAY['\\x', '\\x']::bytea[], ARRAY['i', 'j']")), "22023");
        let many = format!(
            "'node-a', array_fill('{a}'::text, ARRAY[1001]), array_fill(0::bigint, ARRAY[1001]), array_fill('\\x'::bytea, ARRAY[1001]), array_fill('i'::text, ARRAY[1001])"
        );
        assert_eq!(call(&many), "54000");
        assert_eq!(call(&format!("'node-z', {ok}")), "42501");
        // An empty batch is no way around the source's checks (nor its rate limit).
        assert_eq!(call("'node-z', '{}', '{}', '{}', '{}'"), "42501");
        assert_eq!(call("'bad source', '{}', '{}', '{}', '{}'"), "22023");
        let other = "0193a8b2-7c41-7d2e-9f00-00000000f0ff/session-001.jsonl";
        assert_eq!(call(&format!("'node-a', ARRAY['{a}', '{other}'], ARRAY[0, 0]::bigint[], ARRAY['\\x', '\\x']::bytea[], ARRAY['i', 'j']")), "42501");
        // The second push starts past what the server has: the whole batch is refused with the
        // expected offset, and the first push's file is not there either.
        let l = format!("{}\n", line(0, "TOOL_START", ""));
        let (state, _, detail) = error_of(&format!(
            "SELECT * FROM cortex_buffer.append_session_batch('node-a', ARRAY['{a}', '{b}'], ARRAY[0, 5]::bigint[],
                      ARRAY['\\x{0}', '\\x{0}']::bytea[], ARRAY['i', 'j'])",
            hex(l.as_bytes())
        ))
        .unwrap_or_default();
        assert_eq!((state.as_str(), detail.as_deref()), ("55000", Some("expected offset: 0")));
        assert_eq!(val("SELECT count(*) FROM cortex_buffer.pushed_file"), "0");
        // Defaults: not final, no size (an empty chunk of a new file is a replay, as alone); an
        // empty batch returns nothing.
        assert_eq!(
            push_batch(&[
                (a.clone(), 0, l.clone().into_bytes(), "i".into(), false, None),
                (b.clone(), 0, Vec::new(), "j".into(), false, None)
            ]),
            format!("{} 1 0 new|0 0 0 replayed", l.len())
        );
        assert_eq!(
            val("SELECT count(*) FROM cortex_buffer.append_session_batch('node-a', '{}', '{}', '{}', '{}')"),
            "0"
        );
    }
    #[pg_test]
    fn sources_are_registered_with_tokens_that_can_be_revoked_and_dropped() {
        // Registered at dispatch, with its job: the token names the source.
        let t1 = one(&format!("SELECT cortex_buffer.register_push_source('pod-r', '{JOB}')"));
        assert!(t1.starts_with("cbst1.1.") && t1.ends_with(".pod-r"), "{t1}");
        assert_eq!(one("SELECT cortex_buffer.push_source_token('pod-r')"), t1, "the same until revoked");
        assert_eq!(
            val(&format!("SELECT concat_ws('|', login IS NULL, all_jobs, (SELECT count(*) FROM cortex_buffer.push_grant g WHERE g.source = s.source AND g.job_id = '{JOB}')) FROM cortex_buffer.push_source s WHERE source = 'pod-r'")),
            "t|f|1"
        );
        // Registering again (another job) keeps the token and adds the grant.
        let other = "0193a8b2-7c41-7d2e-9f00-00000000f0aa";
        assert_eq!(one(&format!("SELECT cortex_buffer.register_push_source('pod-r', '{other}', note => 'again')")), t1);
        assert_eq!(val("SELECT count(*) FROM cortex_buffer.push_grant WHERE source = 'pod-r'"), "2");
        // Revoked: a new generation; the old token is refused, the new one works.
        let t2 = one("SELECT cortex_buffer.revoke_push_source_token('pod-r')");
        assert!(t2.starts_with("cbst1.2.") && t2 != t1, "{t2}");
        run("CREATE ROLE cb_src_pusher NOLOGIN IN ROLE cortex_buffer_pusher");
        run("SET ROLE cb_src_pusher");
        let old = error_of(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('pod-r', '{t1}')"));
        let new = val(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('pod-r', '{t2}')"));
        let wrong = error_of(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('node-a', '{t2}')"));
        run("RESET ROLE");
        let (state, hint, _) = old.unwrap_or_else(|| panic!("a revoked token was accepted"));
        assert_eq!(state, "42501");
        assert!(hint.unwrap_or_default().contains("push_source_token"));
        assert_eq!(new, "0");
        assert_eq!(wrong.map(|e| e.0).as_deref(), Some("42501"), "pod-r's token is not node-a's");
        // Dropped: true once, then false; its tokens die with it, even when the name comes back.
        assert_eq!(one("SELECT cortex_buffer.drop_push_source('pod-r')::text"), "true");
        assert_eq!(one("SELECT cortex_buffer.drop_push_source('pod-r')::text"), "false");
        assert_eq!(val("SELECT count(*) FROM cortex_buffer.push_grant WHERE source = 'pod-r'"), "0");
        let again = one("SELECT cortex_buffer.register_push_source('pod-r')");
        assert!(again != t1 && again != t2, "a source registered again takes back no token");
        run("SET ROLE cb_src_pusher");
        let old_again = error_of(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('pod-r', '{t1}')"));
        run("RESET ROLE");
        assert_eq!(old_again.map(|e| e.0).as_deref(), Some("42501"));
        // The error paths, each with a HINT.
        for (sql, state) in [
            ("SELECT cortex_buffer.register_push_source(NULL)", "22004"),
            ("SELECT cortex_buffer.register_push_source('bad name')", "22023"),
            ("SELECT cortex_buffer.register_push_source('pod-s', login => 'no_such_role_here')", "42704"),
            ("SELECT cortex_buffer.push_source_token('pod-gone')", "P0002"),
            ("SELECT cortex_buffer.push_source_token('bad name')", "22023"),
            ("SELECT cortex_buffer.revoke_push_source_token('pod-gone')", "P0002"),
            ("SELECT cortex_buffer.drop_push_source('bad/name')", "22023"),
        ] {
            let (got, hint, _) = error_of(sql).unwrap_or_else(|| panic!("{sql} succeeded"));
            assert_eq!(got, state, "{sql}");
            assert!(hint.is_some_and(|h| !h.is_empty()), "{sql} has no HINT");
        }
        // The control plane registers pods' sources, never one trusted with every job, nor
        // changes one an operator trusted so; and a role that is neither may not register.
        run("CREATE ROLE cb_src_cp NOLOGIN IN ROLE cortex_buffer_control_plane");
        run("CREATE ROLE cb_src_nobody NOLOGIN");
        run("INSERT INTO cortex_buffer.push_source (source, all_jobs) VALUES ('node-all', true)");
        run("SET ROLE cb_src_cp");
        let pod = one("SELECT cortex_buffer.register_push_source('pod-cp')");
        let all_jobs = error_of("SELECT cortex_buffer.register_push_source('pod-cp2', all_jobs => true)");
        let take_over = error_of("SELECT cortex_buffer.register_push_source('node-all')");
        let node_token = ["push_source_token", "revoke_push_source_token", "drop_push_source"]
            .map(|f| error_of(&format!("SELECT cortex_buffer.{f}('node-all')")).map(|e| e.0));
        run("RESET ROLE");
        assert_eq!(node_token, [Some("42501".to_owned()), Some("42501".to_owned()), Some("42501".to_owned())]);
        // A pod's source an operator makes trusted with every job takes a new salt: the token the
        // pod held does not carry that trust.
        let pod_token = one("SELECT cortex_buffer.push_source_token('pod-cp')");
        let promoted = one("SELECT cortex_buffer.register_push_source('pod-cp', all_jobs => true)");
        assert_ne!(promoted, pod_token);
        run("SET ROLE cb_src_pusher");
        let stale = error_of(&format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('pod-cp', '{pod_token}')"));
        run("RESET ROLE");
        assert_eq!(stale.map(|e| e.0).as_deref(), Some("42501"));
        run("SET ROLE cb_src_nobody");
        let nobody = error_of("SELECT cortex_buffer.push_source_token('pod-cp')");
        run("RESET ROLE");
        assert!(pod.ends_with(".pod-cp"));
        assert_eq!(all_jobs.map(|e| e.0).as_deref(), Some("42501"));
        assert_eq!(take_over.map(|e| e.0).as_deref(), Some("42501"));
        assert_eq!(val("SELECT all_jobs::text FROM cortex_buffer.push_source WHERE source = 'node-all'"), "true");
        assert_eq!(nobody.map(|e| e.0).as_deref(), Some("42501"));
    }
}
