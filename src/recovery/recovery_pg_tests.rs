//! Recovery lookups against a real index: every branch of the decision tree and every reason,
//! on files written the way the spike's writer and the shipped control plane's writer write
//! them; pairing; the other lookups; errors; and the statements' plans.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;
    use serde_json::Value;

    use crate::testing::{assert_fails, keep_answer, keep_rows, new_job, one, run, TempRoot};

    /// A session file as the spike's writer writes it: `SESSION_START` (seq 0), then
    /// `CHECKPOINT_LOADED`, then whatever the pod does; flat snake_case, one seq per event.
    struct Spike {
        job: String,
        session: String,
        seq: i64,
        second: i64,
        text: String,
    }

    impl Spike {
        fn new(job: &str, pod: &str, loaded: Option<&str>) -> Spike {
            let mut s =
                Spike { job: job.into(), session: format!("sess-{pod}"), seq: 0, second: 0, text: String::new() };
            s.event("SESSION_START", &format!(r#""buffer_schema_version":1,"agent_id":"a","pod_name":"{pod}""#));
            let cp = loaded.map_or("null".to_owned(), |c| format!("\"{c}\""));
            s.event("CHECKPOINT_LOADED", &format!(r#""checkpoint_id":{cp},"step_index":null"#));
            s
        }

        fn event(&mut self, t: &str, extra: &str) -> &mut Spike {
            let comma = if extra.is_empty() { "" } else { "," };
            self.text.push_str(&format!(
                r#"{{"type":"{t}","timestamp":"2026-02-23T14:{:02}:{:02}.000Z","job_id":"{}","session_id":"{}","seq":{}{comma}{extra}}}"#,
                30 + self.second / 60,
                self.second % 60,
                self.job,
                self.session,
                self.seq
            ));
            self.text.push('\n');
            self.seq += 1;
            self.second += 1;
            self
        }

        fn start(&mut self, id: &str, tool: &str) -> &mut Spike {
            self.event(
                "TOOL_START",
                &format!(
                    r#""invocation_id":"{id}","tool_name":"{tool}","input_hash":"h-{id}","input_summary":"in-{id}""#
                ),
            )
        }

        fn result(&mut self, id: &str, tool: &str, ok: bool) -> &mut Spike {
            self.event(
                "TOOL_RESULT",
                &format!(r#""invocation_id":"{id}","tool_name":"{tool}","success":{ok},"duration_ms":5,"result_summary":"out-{id}""#),
            )
        }

        fn written(&mut self, cp: Option<&str>, step: i64) -> &mut Spike {
            let cp = cp.map_or("null".to_owned(), |c| format!("\"{c}\""));
            self.event("CHECKPOINT_WRITTEN", &format!(r#""checkpoint_id":{cp},"step_index":{step}"#))
        }

        /// Events the crash lost before they reached the disk.
        fn lose(&mut self, n: i64) -> &mut Spike {
            self.seq += n;
            self
        }
    }

    /// A file as the shipped control plane writes it (`BufferWriter.append` of
    /// `writeEventToBuffer`): camelCase, `data` = the backend's OutputEvent, no call ids, never
    /// a CHECKPOINT; every new writer appends to session-001.jsonl from sequence 0.
    struct Shipped {
        job: String,
        seq: i64,
        text: String,
    }

    impl Shipped {
        fn new(job: &str) -> Shipped {
            Shipped { job: job.into(), seq: 0, text: String::new() }
        }

        fn event(&mut self, at: &str, t: &str, data: &str) -> &mut Shipped {
            self.text.push_str(&format!(
                r#"{{"version":"1.0","timestamp":"{at}","jobId":"{}","sessionId":"","agentId":"ag","type":"{t}","data":{data},"sequence":{}}}"#,
                self.job, self.seq
            ));
            self.text.push('\n');
            self.seq += 1;
            self
        }

        fn call(&mut self, at: &str, tool: &str, input: &str) -> &mut Shipped {
            self.event(
                at,
                "TOOL_CALL",
                &format!(r#"{{"type":"tool_use","timestamp":"{at}","toolName":"{tool}","toolInput":{input}}}"#),
            )
        }

        fn result(&mut self, at: &str, tool: &str, output: &str, error: bool) -> &mut Shipped {
            self.event(
                at,
                "TOOL_RESULT",
                &format!(r#"{{"type":"tool_result","timestamp":"{at}","toolName":"{tool}","output":{output},"isError":{error}}}"#),
            )
        }

        fn restart(&mut self) -> &mut Shipped {
            self.seq = 0;
            self
        }
    }

    const C1: &str = "0193a8b2-0000-7000-8000-0000000000c1";
    const C2: &str = "0193a8b2-0000-7000-8000-0000000000c2";

    fn index(root: &TempRoot) {
        run("SET cortex_buffer.settle_period = 0");
        run(&format!("SELECT count(*) FROM cortex_buffer.index_sessions('{}')", root.dir()));
    }

    /// Drops the job's high-water marks: what the plan sees of a checkpoint stored where the
    /// database could not see the job's files. These tests' files live outside sessions_dir, and
    /// whether its root exists (the tests running alongside create it) must not decide whether a
    /// mark of "no files yet" anchors them.
    fn forget_marks(job: &str) {
        run(&format!("DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '{job}'"));
    }

    fn checkpoint(job: &str, id: &str, step: i64) {
        run(&format!("SELECT * FROM cortex_buffer.write_checkpoint('{job}', '{{\"checkpoint_id\":\"{id}\",\"step_index\":{step}}}')"));
    }

    /// A plan (recovery_plan or session_recovery), kept for the schema check.
    fn plan_of(sql: &str) -> Value {
        let text = one(&format!("SELECT ({sql})::text"));
        let kind = if sql.contains("session_recovery") { "session_recovery" } else { "recovery_plan" };
        keep_answer(kind, &text);
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn plan(job: &str) -> Value {
        plan_of(&format!("cortex_buffer.recovery_plan('{job}')"))
    }

    fn keys(v: &Value, list: &str) -> Vec<String> {
        v[list]
            .as_array()
            .map(|a| a.iter().map(|c| c["key"].as_str().unwrap_or("").to_owned()).collect())
            .unwrap_or_default()
    }

    fn kinds(v: &Value) -> Vec<String> {
        v["anomalies"]
            .as_array()
            .map(|a| a.iter().map(|c| c["kind"].as_str().unwrap_or("").to_owned()).collect())
            .unwrap_or_default()
    }

    fn reason(v: &Value) -> (&str, &str) {
        (v["mode"].as_str().unwrap_or(""), v["reason"].as_str().unwrap_or(""))
    }

    fn spike_job(root: &TempRoot) -> String {
        let job = new_job("cortex_buffer.job", "RUNNING");
        std::fs::create_dir_all(root.0.join(&job)).unwrap_or_default();
        job
    }

    /// The one-statement `read_across_start` answers what the three lookups it replaces answer,
    /// from every line of a file three writers wrote (one crashed mid-call, one went past it).
    #[pg_test]
    fn read_across_start_in_one_lookup_is_the_three_lookups() {
        use crate::recovery::index::IndexProbe;
        use cortex_buffer_core::recovery::choose::{LoadedAt, MarkerAt, Probe};
        /// The primitive lookups only: `read_across_start` is the trait's stepwise default.
        struct Stepwise<'a, 'b, 'c>(&'a mut IndexProbe<'b, 'c>);
        impl Probe for Stepwise<'_, '_, '_> {
            fn last_marker(&mut self, s: usize) -> Result<Option<MarkerAt>, CbError> {
                self.0.last_marker(s)
            }
            fn first_loaded(&mut self, s: usize) -> Result<Option<LoadedAt>, CbError> {
                self.0.first_loaded(s)
            }
            fn tool_event_before(&mut self, s: usize, o: i64) -> Result<bool, CbError> {
                self.0.tool_event_before(s, o)
            }
            fn last_offset_before(&mut self, s: usize, t: i64) -> Result<Option<i64>, CbError> {
                self.0.last_offset_before(s, t)
            }
            fn writer_start(&mut self, s: usize, o: i64) -> Result<i64, CbError> {
                self.0.writer_start(s, o)
            }
            fn last_call_before(&mut self, s: usize, o: i64) -> Result<Option<i64>, CbError> {
                self.0.last_call_before(s, o)
            }
        }
        use cortex_buffer_core::error::CbError;
        let root = TempRoot::new("rp-across");
        let job = spike_job(&root);
        let mut text = String::new();
        let mut w1 = Spike::new(&job, "p1", None);
        w1.start("a1", "search").result("a1", "search", true).start("a2", "charge");
        text.push_str(&w1.text);
        let mut w2 = Spike::new(&job, "p2", None);
        w2.start("b1", "charge").result("b1", "charge", true).start("b2", "email").result("b2", "email", true);
        text.push_str(&w2.text);
        let mut w3 = Spike::new(&job, "p3", None);
        w3.start("c1", "search");
        text.push_str(&w3.text);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &text);
        index(&root);
        let file_id: i64 = one(&format!("SELECT file_id::text FROM cortex_buffer.session_file WHERE job_id = '{job}'"))
            .parse()
            .unwrap_or(0);
        let mut offsets: Vec<i64> = vec![0, 1];
        let mut at = 0i64;
        for line in text.lines() {
            at += line.len() as i64 + 1;
            offsets.extend([at - 1, at, at + 1]);
        }
        let mut differ = Vec::new();
        let mut starts = std::collections::BTreeSet::new();
        crate::pg::planner::with_index_scans(|| {
            Spi::connect(|client| {
                let mut probe = IndexProbe { client, file_ids: vec![file_id] };
                for &o in &offsets {
                    let one_lookup = probe.read_across_start(0, o);
                    let stepwise = Stepwise(&mut probe).read_across_start(0, o);
                    let (one_lookup, stepwise) = (one_lookup.map_err(|e| e.message), stepwise.map_err(|e| e.message));
                    if one_lookup != stepwise {
                        differ.push((o, one_lookup.clone(), stepwise));
                    }
                    starts.insert(one_lookup.unwrap_or(-1));
                }
                Ok::<(), CbError>(())
            })
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(differ.is_empty(), "{differ:?}");
        // The answers cover the file's start and the second writer's (the third went past
        // nothing before its own call, so a later anchor reads from the second writer's start).
        assert!(starts.len() >= 2, "{starts:?}");
    }

    #[pg_test]
    fn a_first_run_that_crashed_skips_what_it_finished() {
        let root = TempRoot::new("rp-first");
        let job = spike_job(&root);
        let mut s = Spike::new(&job, "p1", None);
        s.start("i1", "search").result("i1", "search", true).start("i2", "charge");
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(p["action"], "first_run");
        assert_eq!(p["checkpoint"]["resume_step"], 0);
        assert_eq!(reason(&p), ("buffer", "no_checkpoint"));
        assert_eq!(p["marker"]["kind"], "writer_start");
        assert_eq!(keys(&p, "completed"), ["i1"]);
        assert_eq!(p["completed"][0]["result"], "out-i1");
        assert_eq!(p["completed"][0]["success"], true);
        assert_eq!(keys(&p, "in_flight"), ["i2"]);
        assert_eq!(p["in_flight"][0]["input"], "in-i2");
        assert_eq!(p["in_flight"][0]["idempotency_key"].as_str().map(str::len), Some(64));
        // The same call gets the same key on every call of the function.
        assert_eq!(plan(&job)["in_flight"][0]["idempotency_key"], p["in_flight"][0]["idempotency_key"]);
    }

    #[pg_test]
    fn after_the_matching_marker_with_a_crash_truncated_tail_and_lost_events() {
        let root = TempRoot::new("rp-marker");
        let job = spike_job(&root);
        checkpoint(&job, C1, 3);
        let mut s = Spike::new(&job, "p1", None);
        s.start("i0", "search").result("i0", "search", true).written(Some(C1), 3);
        s.start("i1", "search").result("i1", "search", false).lose(2).start("i2", "email");
        let body = format!("{}{{\"type\":\"TOOL_RESULT\",\"timest", s.text);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), body);
        index(&root);
        let p = plan(&job);
        assert_eq!(p["action"], "resume");
        assert_eq!(p["checkpoint"]["resume_step"], 4);
        assert_eq!(p["checkpoint"]["source"], "current");
        assert_eq!(reason(&p), ("buffer", "marker_matched"));
        assert_eq!(
            (p["marker"]["kind"].as_str(), p["marker"]["checkpoint_id"].as_str()),
            (Some("checkpoint_written"), Some(C1))
        );
        assert_eq!(keys(&p, "completed"), ["i1"], "i0 finished before the marker: the checkpoint covers it");
        assert_eq!(p["completed"][0]["success"], false);
        assert_eq!(keys(&p, "in_flight"), ["i2"]);
        assert_eq!(p["lost_events"][0]["missing"], 2);
        assert_eq!(p["sessions"][0]["integrity"]["tail_state"], "truncated");
        let events: Vec<&str> = p["events_after_marker"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["type"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(events, ["TOOL_START", "TOOL_RESULT", "TOOL_START"]);
    }

    /// A pod that writes the key it sends with each call (`idempotency_key` in its start line)
    /// gets that key back, as written, whatever its own numbering; a key that is not one (not 64
    /// lower-case hex digits) is ignored and the key is derived.
    #[pg_test]
    fn keys_the_pod_wrote_come_back_as_written() {
        let root = TempRoot::new("rp-written");
        let job = spike_job(&root);
        checkpoint(&job, C1, 3);
        let own = "0f".repeat(32);
        let mut s = Spike::new(&job, "p1", None);
        s.written(Some(C1), 3);
        let start = |s: &mut Spike, id: &str, key: &str| {
            let extra = format!(
                r#""invocation_id":"{id}","tool_name":"charge","input_hash":"h-charge","idempotency_key":"{key}""#
            );
            s.event("TOOL_START", &extra);
        };
        start(&mut s, "i1", &own);
        s.result("i1", "charge", true);
        start(&mut s, "i2", "NOT-A-KEY");
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), s.text.clone());
        index(&root);
        let p = plan(&job);
        assert_eq!(reason(&p), ("buffer", "marker_matched"));
        let done = &p["completed"][0];
        assert_eq!((done["key"].as_str(), done["key_status"].as_str()), (Some("i1"), Some("written")));
        assert_eq!(done["idempotency_key"].as_str(), Some(own.as_str()));
        assert_eq!(done["replay_ordinal"], 1);
        let open = &p["in_flight"][0];
        assert_eq!((open["key"].as_str(), open["key_status"].as_str()), (Some("i2"), Some("derived")));
        // The second charge since the checkpoint, by the formula.
        assert_eq!((open["call_ordinal"].as_i64(), open["replay_ordinal"].as_i64()), (Some(2), Some(2)));
        let derived = open["idempotency_key"].as_str().unwrap_or("");
        assert!(derived.len() == 64 && derived != own, "{derived}");
    }

    #[pg_test]
    fn a_marker_of_another_checkpoint_or_none_gives_checkpoint_only() {
        let root = TempRoot::new("rp-mismatch");
        let job = spike_job(&root);
        checkpoint(&job, C1, 1);
        checkpoint(&job, C2, 2);
        forget_marks(&job);
        let mut s = Spike::new(&job, "p1", None);
        s.written(Some(C1), 1).start("i1", "t").result("i1", "t", true);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(reason(&p), ("checkpoint_only", "marker_mismatch"));
        assert_eq!(p["completed"].as_array().map(Vec::len), Some(0));
        // The checkpoint the caller resumed from, given explicitly, matches.
        let p = plan_of(&format!("cortex_buffer.recovery_plan('{job}', '{C1}')"));
        assert_eq!((reason(&p), keys(&p, "completed")), (("buffer", "marker_matched"), vec!["i1".to_owned()]));
        // Without matching: the buffer's own view.
        let p = plan_of(&format!("cortex_buffer.recovery_plan('{job}', match_checkpoint => false)"));
        assert_eq!(reason(&p), ("buffer", "marker_unverified"));
        // A marker without an id.
        let mut t = Spike::new(&job, "p2", Some(C2));
        t.written(None, 2);
        root.put(&format!("{job}/session_20260223T143100Z_p2.jsonl"), &t.text);
        index(&root);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "marker_without_id"));
    }

    #[pg_test]
    fn a_lost_marker_and_no_session_files() {
        let root = TempRoot::new("rp-nomarker");
        let job = spike_job(&root);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "no_session_files"));
        checkpoint(&job, C1, 1);
        forget_marks(&job);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "no_session_files"));
        // The pod crashed after the PostgreSQL write, before appending the marker.
        let mut s = Spike::new(&job, "p1", None);
        s.start("i1", "t").result("i1", "t", true);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "no_marker"));
    }

    #[pg_test]
    fn two_crashed_sessions_after_one_checkpoint_both_count() {
        let root = TempRoot::new("rp-chain");
        let job = spike_job(&root);
        checkpoint(&job, C1, 5);
        let mut a = Spike::new(&job, "p1", None);
        a.written(Some(C1), 5).start("a1", "t").result("a1", "t", true).start("a2", "t");
        let mut b = Spike::new(&job, "p2", Some(C1));
        b.start("b1", "t").result("b1", "t", true).start("b2", "t");
        let mut c = Spike::new(&job, "p3", Some(C1));
        c.start("c1", "u").result("c1", "u", true);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &a.text);
        root.put(&format!("{job}/session_20260223T150000Z_p2.jsonl"), &b.text);
        root.put(&format!("{job}/session_20260223T160000Z_p3.jsonl"), &c.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(reason(&p), ("buffer", "marker_matched"));
        assert_eq!(p["sessions"].as_array().map(Vec::len), Some(3));
        assert_eq!(keys(&p, "completed"), ["a1", "b1", "c1"]);
        assert_eq!(keys(&p, "in_flight"), ["a2", "b2"]);
        assert!(p["in_flight"].as_array().is_some_and(|a| a.iter().all(|c| c["writer_crashed"] == true)));
        assert!(kinds(&p).is_empty(), "{:?}", p["anomalies"]);

        // A later pod that loaded another checkpoint ends the chain.
        let mut d = Spike::new(&job, "p4", Some(C2));
        d.start("d1", "t").result("d1", "t", true);
        root.put(&format!("{job}/session_20260223T170000Z_p4.jsonl"), &d.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(kinds(&p), ["chain_broken"]);
        assert_eq!(keys(&p, "completed"), ["a1", "b1", "c1"], "nothing from the file that broke the chain on");
        assert!(p["notes"].as_array().is_some_and(|n| n.iter().any(|x| x == "chain_broken")));
    }

    #[pg_test]
    fn calls_that_straddle_the_marker_or_repeat_are_anomalies() {
        let root = TempRoot::new("rp-anomalies");
        let job = spike_job(&root);
        checkpoint(&job, C1, 1);
        let mut s = Spike::new(&job, "p1", None);
        s.start("early", "t").written(Some(C1), 1).result("early", "t", true);
        s.start("x", "t").result("x", "t", true).result("x", "t", true).result("ghost", "t", true);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(keys(&p, "completed"), ["x"], "a call started before the marker is not a skip");
        // The plan reads back to the call's start: it is verified, with its result, for what it is.
        assert_eq!(keys(&p, "verify"), ["early", "ghost"], "{p}");
        assert_eq!(p["verify"][0]["reason"], "started_before_anchor", "{p}");
        assert_eq!(p["verify"][0]["results"].as_array().map(Vec::len), Some(1), "{p}");
        assert_eq!(kinds(&p), ["duplicate_result", "result_without_start"]);
    }

    #[pg_test]
    fn files_recovery_must_not_use() {
        let root = TempRoot::new("rp-unusable");
        let job = spike_job(&root);
        checkpoint(&job, C1, 1);
        let mut s = Spike::new(&job, "p1", None);
        s.written(Some(C1), 1).start("i1", "t").result("i1", "t", true);
        let file = format!("{job}/session_20260223T143000Z_p1.jsonl");
        root.put(&file, format!("{}not json\nnot json either\n{}", s.text, "{\"type\":\"X\",\"timestamp\":\"t\"}\n"));
        index(&root);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "file_untrusted"));
        assert_eq!(
            one(&format!("SELECT reason FROM cortex_buffer.untrusted_session_files WHERE job_id = '{job}'")),
            "file_untrusted"
        );

        // Rewritten shorter: the index dropped the bytes after the marker it had read, and
        // nothing holds them any more. They might have been calls: nothing after the checkpoint
        // is proven.
        root.put(&file, &s.text);
        index(&root);
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "bytes_missing"));

        let job = spike_job(&root);
        checkpoint(&job, C1, 1);
        let mut s = Spike::new(&job, "p1", None);
        s.written(Some(C1), 1).start("i1", "t").result("i1", "t", true);
        let file = format!("{job}/session_20260223T143000Z_p1.jsonl");
        root.put(&file, &s.text);
        index(&root);
        assert_eq!(reason(&plan(&job)), ("buffer", "marker_matched"));
        let path = root.path(&file);
        run(&format!("UPDATE cortex_buffer.session_file SET quarantined_at = now() WHERE path = '{path}'"));
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "quarantined"));
        run(&format!(
            "UPDATE cortex_buffer.session_file SET quarantined_at = NULL, generation = 0 WHERE path = '{path}'"
        ));
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "not_indexed"));
        // Deleted once fully indexed: the index still has it all.
        run(&format!("UPDATE cortex_buffer.session_file SET generation = 1, gone_at = now() WHERE path = '{path}'"));
        assert_eq!(reason(&plan(&job)), ("buffer", "marker_matched"));
        // Deleted before the index held all of it.
        run(&format!("UPDATE cortex_buffer.session_file SET size_bytes = size_bytes + 100 WHERE path = '{path}'"));
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "file_gone"));
    }

    #[pg_test]
    fn a_checkpoint_that_fails_its_crc_fails_the_job() {
        let job = new_job("cortex_buffer.job", "RUNNING");
        run(&format!("UPDATE cortex_buffer.job SET checkpoint = '{{\"step_index\": 1}}', checkpoint_crc = 12345 WHERE id = '{job}'"));
        let p = plan(&job);
        assert_eq!(p["action"], "fail_job");
        assert_eq!(reason(&p), ("checkpoint_only", "checkpoint_invalid"));
        assert_eq!(p["checkpoint"]["source"], "invalid");
        assert!(p["checkpoint"]["detail"].as_str().is_some_and(|d| d.contains("CRC")));
        assert_eq!(p["checkpoint"]["resume_step"], Value::Null);
    }

    #[pg_test]
    fn a_checkpoint_without_an_id_cannot_be_matched() {
        let root = TempRoot::new("rp-noid");
        let job = spike_job(&root);
        // The control plane wrote the checkpoint itself, without a checkpoint_id.
        let doc = r#"{"step_index": 2}"#;
        run(&format!("UPDATE cortex_buffer.job SET checkpoint = '{doc}', checkpoint_crc = cortex_buffer.checkpoint_crc('{doc}')::bigint::bit(32)::int WHERE id = '{job}'"));
        forget_marks(&job);
        let mut s = Spike::new(&job, "p1", None);
        s.written(Some(C1), 2);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        let p = plan(&job);
        assert_eq!(p["checkpoint"]["resume_step"], 3);
        assert_eq!(reason(&p), ("checkpoint_only", "checkpoint_without_id"));
    }

    /// The shipped writer never writes a marker: the plan anchors on the checkpoint's write
    /// time, in the latest writer segment, and pairs calls by order and tool name.
    #[pg_test]
    fn shipped_files_anchor_on_the_checkpoint_time_and_pair_by_order() {
        let root = TempRoot::new("rp-shipped");
        let job = spike_job(&root);
        checkpoint(&job, C1, 1);
        let at = |secs: i64| {
            one(&format!("SELECT to_char((now() + make_interval(secs => {secs})) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"))
        };
        let mut w = Shipped::new(&job);
        w.call(&at(-60), "read", r#"{"path":"old"}"#).result(&at(-59), "read", r#""old""#, false);
        w.call(&at(8), "read", r#"{"path":"a"}"#);
        w.call(&at(9), "read", r#"{"path":"b"}"#);
        w.call(&at(10), "exec", r#"{"cmd":"ls"}"#);
        w.result(&at(11), "read", r#""A""#, false).result(&at(12), "exec", r#"{"rc":1}"#, true).result(
            &at(13),
            "read",
            r#""B""#,
            false,
        );
        w.call(&at(14), "read", r#"{"path":"c"}"#);
        // The file was written by a pod whose clock agrees with the server's: its mtime is
        // its last line's time (the clock evidence the fallback measures the pod by).
        let put = |w: &Shipped, last: i64| {
            root.put(&format!("{job}/session-001.jsonl"), &w.text);
            let when = std::time::SystemTime::now() + std::time::Duration::from_secs(u64::try_from(last).unwrap_or(0));
            std::fs::File::options()
                .write(true)
                .open(root.path(&format!("{job}/session-001.jsonl")))
                .and_then(|f| f.set_modified(when))
                .unwrap_or_else(|e| panic!("{e}"));
        };
        put(&w, 14);
        index(&root);
        let p = plan(&job);
        assert_eq!(reason(&p), ("buffer", "checkpoint_time"));
        assert_eq!(p["marker"]["kind"], "checkpoint_time");
        assert_eq!(p["marker"]["clock_skew_ms"], 5000);
        assert!(p["notes"].as_array().is_some_and(|n| n.iter().any(|x| x == "time_anchored")));
        let done: Vec<(String, i64, String)> = p["completed"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        (
                            c["tool_name"].as_str().unwrap_or("").to_owned(),
                            c["tool_ordinal"].as_i64().unwrap_or(0),
                            c["result"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Two reads were open when the first result came: order cannot tell which it closed, so
        // neither is skipped; both are verified with both results. The exec pairs.
        assert_eq!(done, [("exec".into(), 1, r#"{"rc":1}"#.into())], "{p}");
        // A result or input longer than recovery_value_bytes (a test knob: 4 096 bytes in
        // production) is cut at a character boundary and flagged.
        run("SET cortex_buffer.recovery_value_bytes = 2");
        let cut = plan(&job);
        run("RESET cortex_buffer.recovery_value_bytes");
        assert_eq!(cut["completed"][0]["result"], r#"{""#);
        assert_eq!(cut["completed"][0]["result_truncated"], true);
        assert_eq!(cut["in_flight"][0]["input"], r#"{""#, "{cut}");
        assert_eq!(cut["in_flight"][0]["input_truncated"], true);
        assert_eq!(p["completed"][0]["result_truncated"], false);
        assert!(p["completed"]
            .as_array()
            .is_some_and(|a| a.iter().all(|c| c["paired_by"] == "order" && c["key_source"] == "derived")));
        assert_eq!(p["completed"][0]["key"].as_str().map(|k| k.starts_with("session-001.jsonl@")), Some(true));
        let verify: Vec<(String, String, usize)> = p["verify"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        (
                            c["tool_name"].as_str().unwrap_or("").to_owned(),
                            c["reason"].as_str().unwrap_or("").to_owned(),
                            c["results"].as_array().map_or(0, Vec::len),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            verify,
            [("read".into(), "ambiguous_pairing".into(), 2), ("read".into(), "ambiguous_pairing".into(), 2)]
        );
        // The input hash is SHA-256 of canonical_json(toolInput): an agent can compute it.
        let hash =
            one(r#"SELECT encode(sha256(convert_to(cortex_buffer.canonical_json('{"path":"a"}'), 'UTF8')), 'hex')"#);
        assert_eq!(p["verify"][0]["input_hash"], hash.as_str());
        assert_eq!(
            (p["in_flight"][0]["tool_name"].as_str(), p["in_flight"][0]["tool_ordinal"].as_i64()),
            (Some("read"), Some(3))
        );

        // A restarted writer appends to the same file from sequence 0: every writer after the
        // checkpoint counts, and the crashed writer's open call is never completed by the new
        // writer's result: it stays in flight, its writer crashed.
        w.restart();
        w.result(&at(15), "read", r#""C?""#, false).call(&at(16), "read", r#"{"path":"d"}"#);
        put(&w, 16);
        index(&root);
        let p = plan(&job);
        assert_eq!(keys(&p, "completed").len(), 1, "{p}");
        let open: Vec<(bool, i64)> = p["in_flight"]
            .as_array()
            .map(|a| a.iter().map(|c| (c["writer_crashed"] == true, c["call_ordinal"].as_i64().unwrap_or(0))).collect())
            .unwrap_or_default();
        // The crashed writer's read of c is the first read of c since the checkpoint it stored.
        assert_eq!(open, [(true, 1)], "{p}");
        assert_eq!(p["in_flight"][0]["checkpoint_ref"], p["checkpoint"]["ref"], "{p}");
        // The new writer's read of d: its first line is a result whose start is not in the
        // plan (a read of any input, d's too), so d's may be the first or the second read of d:
        // verified, with both keys.
        let d = p["verify"].as_array().and_then(|a| a.iter().find(|c| c["input"] == r#"{"path":"d"}"#)).cloned();
        let d = d.unwrap_or_else(|| panic!("read d is not verified: {p}"));
        assert_eq!((d["reason"].as_str(), d["key_status"].as_str()), (Some("key_ambiguous"), Some("ambiguous")), "{p}");
        let ordinals: Vec<i64> = d["key_candidates"]
            .as_array()
            .map(|a| a.iter().filter_map(|k| k["call_ordinal"].as_i64()).collect())
            .unwrap_or_default();
        assert_eq!(ordinals, [1, 2], "{p}");
        assert_eq!(kinds(&p), ["ambiguous_pairing", "seq_reset", "result_without_start"]);

        // Without matching: every event of the latest file (the control plane's own view).
        let p = plan_of(&format!("cortex_buffer.recovery_plan('{job}', match_checkpoint => false)"));
        assert_eq!(reason(&p), ("buffer", "latest_file"));
        assert_eq!(p["events_after_marker"].as_array().map(Vec::len), Some(11));
        // Read from the file's start, the calls keyed under the checkpoint the pod stored have
        // no place in that replay: each is verified with its one key, the crashed read of c too.
        let c = p["verify"].as_array().and_then(|a| a.iter().find(|c| c["input"] == r#"{"path":"c"}"#)).cloned();
        let c = c.unwrap_or_else(|| panic!("read c is not verified: {p}"));
        assert_eq!((c["writer_crashed"].as_bool(), c["key_status"].as_str()), (Some(true), Some("ambiguous")), "{p}");
        assert_eq!(c["key_candidates"][0]["checkpoint_ref"], p["checkpoint"]["ref"], "{p}");
    }

    #[pg_test]
    fn shipped_files_without_a_checkpoint_time() {
        let root = TempRoot::new("rp-shipped-notime");
        let job = spike_job(&root);
        let doc = format!(r#"{{"checkpoint_id": "{C1}", "step_index": 0}}"#);
        run(&format!("UPDATE cortex_buffer.job SET checkpoint = '{doc}', checkpoint_crc = cortex_buffer.checkpoint_crc('{doc}')::bigint::bit(32)::int WHERE id = '{job}'"));
        let mut w = Shipped::new(&job);
        w.call("2026-01-01T00:00:00.000Z", "read", "{}");
        root.put(&format!("{job}/session-001.jsonl"), &w.text);
        index(&root);
        // The control plane's own UPDATE fired the checkpoint trigger: its mark gives the time
        // (the job's directory is not under sessions_dir here, so it anchors nothing else).
        let p = plan(&job);
        assert_eq!(reason(&p), ("buffer", "checkpoint_time"));
        assert!(p["checkpoint"]["written_at"].is_string(), "{p}");
        // A checkpoint from before marks existed, with no history row: no time at all.
        run(&format!("DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '{job}'"));
        assert_eq!(reason(&plan(&job)), ("checkpoint_only", "checkpoint_time_unknown"));
        // No checkpoint at all: every writer of the shipped file.
        let other = spike_job(&root);
        let mut w = Shipped::new(&other);
        w.call("2026-01-01T00:00:00.000Z", "read", "{}").restart().call(
            "2026-01-01T00:01:00.000Z",
            "read",
            r#"{"x":1}"#,
        );
        root.put(&format!("{other}/session-001.jsonl"), &w.text);
        index(&root);
        let p = plan(&other);
        assert_eq!(reason(&p), ("buffer", "no_checkpoint"));
        assert_eq!(p["in_flight"].as_array().map(Vec::len), Some(2));
        assert_eq!(p["marker"]["kind"], "file_start");
    }

    #[pg_test]
    fn claude_code_transcripts_pair_every_block() {
        let root = TempRoot::new("rp-claude");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pgrx-tests/fixtures/claude-code");
        let f = "claude-code-log/-Users-dain-workspace-JSSoundRecorder/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl";
        let bytes = std::fs::read(fixtures.join(f)).unwrap_or_default();
        root.put("proj/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl", &bytes);
        // Cut just before the results of the three tool_use lines of one response (204-206).
        let cut: String = String::from_utf8_lossy(&bytes).split_inclusive('\n').take(206).collect();
        root.put("proj/11111111-2222-4333-8444-555555555555.jsonl", cut);
        index(&root);
        let whole = plan_of(&format!(
            "cortex_buffer.session_recovery('{}')",
            root.path("proj/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl")
        ));
        assert_eq!(reason(&whole), ("buffer", "transcript"));
        assert_eq!(whole["session_id"], "7acd37a8-2745-4b58-a8a9-46164b22ad9e");
        let results: usize = String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "user")
            .map(|v| {
                v["message"]["content"]
                    .as_array()
                    .map_or(0, |a| a.iter().filter(|b| b["type"] == "tool_result").count())
            })
            .sum();
        assert_eq!(whole["completed"].as_array().map(Vec::len), Some(results), "every tool_result block pairs");
        assert_eq!(whole["in_flight"].as_array().map(Vec::len), Some(0));
        let cut = plan_of("cortex_buffer.session_recovery('11111111-2222-4333-8444-555555555555'::uuid)");
        let open: Vec<String> = cut["in_flight"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["tool_name"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        assert_eq!(open, ["Edit", "Edit", "TodoWrite"]);
        assert_eq!(
            one("SELECT state || '/' || confidence FROM cortex_buffer.agent_state('11111111-2222-4333-8444-555555555555'::uuid)"),
            "acting/confirmed"
        );
    }

    #[pg_test]
    fn agent_state_reads_the_tail_the_index_does_not_hold_yet() {
        let root = TempRoot::at("/tmp/cortex_buffer-pgtest-sessions");
        let prompt =
            r#"{"type":"user","message":{"role":"user","content":"go"},"timestamp":"2026-01-01T00:00:00.000Z"}"#;
        let tool = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}],"stop_reason":null},"timestamp":"2026-01-01T00:00:01.000Z"}"#;
        let result = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"timestamp":"2026-01-01T00:00:02.000Z"}"#;
        root.put("p/aaaaaaaa-0000-4000-8000-000000000001.jsonl", format!("{prompt}\n{tool}\n"));
        index(&root);
        let state = || {
            keep_rows(
                "agent_state",
                "SELECT * FROM cortex_buffer.agent_state('p/aaaaaaaa-0000-4000-8000-000000000001.jsonl')",
            );
            one("SELECT state || '/' || decided_by_line FROM cortex_buffer.agent_state('p/aaaaaaaa-0000-4000-8000-000000000001.jsonl')")
        };
        assert_eq!(state(), "acting/2");
        // A result line without its newline, not indexed yet: it parses, so it counts.
        root.append("p/aaaaaaaa-0000-4000-8000-000000000001.jsonl", result);
        run(&format!(
            "UPDATE cortex_buffer.session_file SET size_bytes = size_bytes + {} WHERE path LIKE '%aaaaaaaa-0000%'",
            result.len()
        ));
        assert_eq!(state(), "thinking/3");
        // A file the index has never seen: read from disk.
        root.put("p/bbbbbbbb-0000-4000-8000-000000000002.jsonl", format!("{prompt}\n{tool}"));
        assert_eq!(
            one("SELECT state || '/' || decided_by_line FROM cortex_buffer.agent_state('p/bbbbbbbb-0000-4000-8000-000000000002.jsonl')"),
            "acting/2"
        );
        // An empty file: nothing tells.
        root.put("p/cccccccc-0000-4000-8000-000000000003.jsonl", "");
        keep_rows(
            "agent_state",
            "SELECT * FROM cortex_buffer.agent_state('p/cccccccc-0000-4000-8000-000000000003.jsonl')",
        );
        assert_eq!(one("SELECT state || '/' || confidence FROM cortex_buffer.agent_state('p/cccccccc-0000-4000-8000-000000000003.jsonl')"), "idle/inferred");
    }

    #[pg_test]
    fn usage_from_transcripts_and_from_a_jobs_buffer() {
        let root = TempRoot::new("rp-usage");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pgrx-tests/fixtures/claude-code");
        let main = "claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1";
        root.put(
            "proj/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
            std::fs::read(fixtures.join(format!("{main}.jsonl"))).unwrap_or_default(),
        );
        for sub in ["agent-a36efb2a1231c41e2.jsonl", "agent-a4ca7529859c158c2.jsonl"] {
            root.put(
                &format!("proj/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/{sub}"),
                std::fs::read(fixtures.join(format!("{main}/subagents/{sub}"))).unwrap_or_default(),
            );
        }
        let priced = "claude-code-log/-Users-dain-workspace-JSSoundRecorder/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl";
        root.put(
            "rec/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl",
            std::fs::read(fixtures.join(priced)).unwrap_or_default(),
        );
        index(&root);
        let rows = one(&format!(
            "SELECT string_agg(subagent::text || ':' || coalesce(model, '-') || ':' || (cost_usd IS NULL)::text, ',' ORDER BY path COLLATE \"C\")
               FROM cortex_buffer.session_usage('{}')",
            root.path("proj/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")
        ));
        assert_eq!(
            rows, "false:claude-opus-4-7:true,true:claude-opus-4-7:true,true:claude-opus-4-7:true",
            "sub-agents apart; no price, no cost"
        );
        let same = one(&format!(
            "SELECT ((SELECT cost_usd FROM cortex_buffer.session_usage('{}')) = (SELECT sum(cortex_buffer.llm_cost(u, 'claude-sonnet-4-5-20250929')) FROM (
                 SELECT DISTINCT ON (payload #>> '{{message,id}}', request_id) payload #> '{{message,usage}}' AS u
                   FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
                  WHERE f.path = '{}' AND e.type = 'assistant' AND payload #> '{{message,usage}}' IS NOT NULL
                  ORDER BY payload #>> '{{message,id}}', request_id,
                           coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_write_tokens, 0) + coalesce(cache_read_tokens, 0) DESC) r))::text",
            root.path("rec/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl"),
            root.path("rec/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl")
        ));
        assert_eq!(same, "true", "one count per (message.id, requestId), the largest copy, priced exactly");

        // A job's buffer against what record_usage recorded.
        let job = spike_job(&root);
        let mut s = Spike::new(&job, "p1", None);
        for i in 0..3 {
            s.event("LLM_REQUEST", r#""model":"claude-sonnet-4-5-20250929","step_index":0"#);
            s.event(
                "LLM_RESPONSE",
                &format!(
                    r#""step_index":0,"prompt_tokens":{},"completion_tokens":100,"finish_reason":"tool_use""#,
                    1000 * (i + 1)
                ),
            );
        }
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        run(&format!("SELECT * FROM cortex_buffer.record_usage('{job}', 'claude-sonnet-4-5-20250929', '{{\"input_tokens\":1000,\"output_tokens\":100}}', 'r1')"));
        let got = one(&format!(
            "SELECT concat_ws('|', responses, input_tokens, output_tokens, recorded_calls, unrecorded->>'input_tokens', unrecorded->>'responses',
                              cost_usd = cortex_buffer.llm_cost('{{\"input_tokens\":6000,\"output_tokens\":300}}', 'claude-sonnet-4-5-20250929'),
                              (unrecorded->>'cost_usd')::numeric = cost_usd - recorded_cost_usd)
               FROM cortex_buffer.job_usage_from_buffer('{job}')"
        ));
        assert_eq!(got, "3|6000|300|1|5000|2|t|t");
    }

    #[pg_test]
    fn log_slice_entries_and_snapshots() {
        let root = TempRoot::new("rp-log");
        let mut text = String::new();
        for seq in 1..=6 {
            let t = if seq % 2 == 0 { "m:B" } else { "m:A" };
            text.push_str(&format!(
                r#"{{"__type__":"{t}","name":"n{seq}","__seq__":{seq},"__ts__":"2025-01-15T10:30:0{seq}.000+00:00"}}"#
            ));
            text.push('\n');
        }
        root.put("logs/tools.jsonl", &text);
        index(&root);
        let path = root.path("logs/tools.jsonl");
        assert_eq!(
            one(&format!("SELECT string_agg(seq::text, ',') FROM cortex_buffer.log_entries('{path}')")),
            "1,2,3,4,5,6"
        );
        assert_eq!(
            one(&format!("SELECT string_agg(seq::text, ',') FROM cortex_buffer.log_entries('{path}', 'm:A', 2)")),
            "3,5"
        );
        assert_eq!(one(&format!("SELECT string_agg(seq::text, ',') FROM cortex_buffer.log_entries('{path}', start_seq => 2, end_seq => 4)")), "2,3");
        assert_eq!(
            one(&format!("SELECT entry::text FROM cortex_buffer.log_entries('{path}', last_n => 1)")),
            r#"{"name": "n6"}"#
        );
        let check = |last: &str, count: i64, t: &str| {
            one(&format!("SELECT agrees::text || ':' || reason FROM cortex_buffer.check_log_snapshot('{path}', {last}, {count}{t})"))
        };
        assert_eq!(check("4", 4, ""), "true:agrees");
        assert_eq!(check("5", 3, ", 'm:A'"), "true:agrees");
        assert_eq!(check("4", 3, ""), "false:count_mismatch");
        assert_eq!(check("9", 9, ""), "false:fewer_entries");
        assert_eq!(check("9", 2, ""), "false:last_seq_missing");
        // Rewritten below the snapshot's last entry.
        root.put("logs/tools.jsonl", text.replace("\"__seq__\":2", "\"__seq__\":7"));
        index(&root);
        assert_eq!(check("4", 4, ""), "false:seq_not_increasing");
        assert_fails(&format!("SELECT * FROM cortex_buffer.check_log_snapshot('{path}', 1, NULL)"), "22004");
        assert_fails(&format!("SELECT * FROM cortex_buffer.log_entries('{path}', last_n => -1)"), "22023");
        assert_fails("SELECT * FROM cortex_buffer.log_entries('/nowhere/x.jsonl')", "58P01");
    }

    #[pg_test]
    fn job_timeline_tells_the_whole_story() {
        let root = TempRoot::new("rp-timeline");
        let job = spike_job(&root);
        let agent = one(&format!("SELECT agent_id::text FROM cortex_buffer.job WHERE id = '{job}'"));
        run(&format!("SELECT cortex_buffer.admit_job('{agent}', '{job}')"));
        checkpoint(&job, C1, 0);
        run(&format!("SELECT * FROM cortex_buffer.record_usage('{job}', 'claude-sonnet-4-5-20250929', '{{\"input_tokens\":10}}', 'r1')"));
        run(&format!("SELECT cortex_buffer.record_crash('{job}', 137, 'OOMKilled')"));
        let mut s = Spike::new(&job, "p1", None);
        s.start("i1", "t").lose(1).result("i1", "t", true);
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), format!("{}garbage\n", s.text));
        index(&root);
        let sources = one(&format!(
            "SELECT string_agg(DISTINCT source, ',' ORDER BY source) FROM cortex_buffer.job_timeline('{job}')"
        ));
        assert_eq!(sources, "checkpoint_history,circuit_admission,corrupt_line,crash,event,gap,usage");
        keep_rows("job_timeline", &format!("SELECT * FROM cortex_buffer.job_timeline('{job}')"));
        let events = one(&format!("SELECT string_agg(kind, ',' ORDER BY n) FROM cortex_buffer.job_timeline('{job}') WITH ORDINALITY t(at, source, kind, session, line_no, byte_offset, seq, detail, n) WHERE source IN ('event', 'gap', 'corrupt_line')"));
        assert_eq!(events, "SESSION_START,CHECKPOINT_LOADED,TOOL_START,lost_events,TOOL_RESULT,corrupt_line");
        assert_eq!(one("SELECT count(*)::text FROM cortex_buffer.job_timeline(gen_random_uuid())"), "0");
    }

    #[pg_test]
    fn errors_say_why_with_a_hint() {
        let root = TempRoot::new("rp-errors");
        root.put("logs/x.jsonl", "{\"a\":1}\n");
        index(&root);
        assert_fails("SELECT cortex_buffer.recovery_plan(NULL)", "22004");
        assert_fails("SELECT cortex_buffer.recovery_plan(gen_random_uuid())", "P0002");
        assert_fails(&format!("SELECT cortex_buffer.session_recovery('{}')", root.path("logs/x.jsonl")), "22023");
        assert_fails("SELECT cortex_buffer.session_recovery('/no/such/file.jsonl')", "58P01");
        assert_fails("SELECT cortex_buffer.session_recovery(gen_random_uuid())", "58P01");
        assert_fails("SELECT * FROM cortex_buffer.agent_state('../etc/passwd')", "22023");
        assert_fails("SELECT * FROM cortex_buffer.session_usage('/no/such/file.jsonl')", "58P01");
        let path = root.path("logs/x.jsonl");
        run(&format!("UPDATE cortex_buffer.session_file SET generation = 0 WHERE path = '{path}'"));
        assert_fails(&format!("SELECT * FROM cortex_buffer.log_entries('{path}')"), "55000");
        // A non-superuser reads no file outside sessions_dir.
        run("CREATE ROLE rp_op NOLOGIN; GRANT cortex_buffer_operator TO rp_op");
        run("SET ROLE rp_op");
        assert_fails("SELECT * FROM cortex_buffer.agent_state('/etc/hostname')", "42501");
        run("RESET ROLE");
    }

    #[pg_test]
    fn the_views_show_job_sessions_and_refused_files() {
        let root = TempRoot::new("rp-views");
        let job = spike_job(&root);
        let mut s = Spike::new(&job, "p1", None);
        s.start("i1", "t");
        root.put(&format!("{job}/session_20260223T143000Z_p1.jsonl"), &s.text);
        index(&root);
        assert_eq!(
            one(&format!("SELECT concat_ws('|', last_event_type, agent_state, agent_state_confidence, coalesce(recovery_refusal, '-')) FROM cortex_buffer.job_sessions WHERE job_id = '{job}'")),
            "TOOL_START|acting|confirmed|-"
        );
        assert_eq!(one("SELECT count(*)::text FROM cortex_buffer.untrusted_session_files"), "0");
        assert_eq!(
            one("SELECT cortex_buffer.session_file_refusal(false, 1, 10, 10, false, false, false, 0.5)"),
            "file_untrusted"
        );
    }

    /// Every statement recovery runs is an index lookup: none reads `event` sequentially, so a
    /// plan's cost follows the events of the sessions involved, not the table.
    #[pg_test]
    fn every_recovery_statement_is_an_index_lookup() {
        use crate::recovery::index::*;
        run("SET enable_seqscan = off; SET enable_bitmapscan = off");
        let statements = [
            ("int8, text[]", LAST_MARKER_SQL.to_owned(), "1, '{CHECKPOINT_WRITTEN,CHECKPOINT}'"),
            ("int8, text[]", FIRST_LOADED_SQL.to_owned(), "1, '{CHECKPOINT_LOADED}'"),
            ("int8, int8, text[]", TOOL_BEFORE_SQL.to_owned(), "1, 100, '{TOOL_START,TOOL_CALL,TOOL_RESULT}'"),
            ("int8, timestamptz", LAST_BEFORE_SQL.to_owned(), "1, now()"),
            ("int8, int8, text[]", LAST_CALL_BEFORE_SQL.to_owned(), "1, 100, '{TOOL_START,TOOL_CALL}'"),
            ("int8, int8", LAST_EVENT_BEFORE_SQL.to_owned(), "1, 100"),
            ("int8, int8", WRITER_START_SQL.to_owned(), "1, 100"),
            ("int8, int8, text[]", READ_ACROSS_START_SQL.to_owned(), "1, 100, '{TOOL_START,TOOL_CALL}'"),
            (
                "int8, int8, int8, text[]",
                events_sql(Payload::Facts(cortex_buffer_core::indexer::dialect::Dialect::CortexPlane)),
                "1, 0, 500, '{TOOL_CALL}'",
            ),
            ("uuid", crate::checkpoint::marks::LOOKUP_SQL.to_owned(), "gen_random_uuid()"),
            ("uuid", crate::recovery::anchors::HISTORY_SQL.to_owned(), "gen_random_uuid()"),
            ("text, int8, int8, int8[]", STARTED_BEFORE_SQL.to_owned(), "'i', 1, 100, '{2,3}'"),
            ("int8, int8, int8, text[]", events_sql(Payload::For(&PAIRING_TYPES)), "1, 0, 500, '{TOOL_START}'"),
            ("int8, int8, int8, text[]", events_sql(Payload::Usage), "1, 0, 500, '{}'"),
            ("int8, int8, int8, text[]", events_before_sql(), "1, 100, 128, '{user}'"),
            ("uuid", job_files_sql(), "gen_random_uuid()"),
            ("uuid, uuid", CHECKPOINT_TIME_SQL.to_owned(), "gen_random_uuid(), gen_random_uuid()"),
            // The catalogue, as a per-job call reads it: the catch-up's load and its moved-root
            // check, the transcript lookups, the pushed files' sources and the crash record.
            ("text, text", crate::indexer::catalog_store::LOAD_JOB_SQL.to_owned(), "'/s/j/', 'j'"),
            ("int8, text, int8, text", crate::indexer::moved_root::job_candidates_sql(), "0, '/s/', 1000, 'j'"),
            ("text, text", transcript_paths_sql(), "gen_random_uuid()::text, NULL"),
            ("text, text", transcript_paths_sql(), "gen_random_uuid()::text, '/s/j/'"),
            ("text, text", crate::recovery::transcript::subagent_files_sql(), "'/s/p/x/subagents/', 'p'"),
            ("uuid", crate::push::confirm::JOB_SOURCES_SQL.to_owned(), "gen_random_uuid()"),
            ("uuid", crate::push::confirm::LAST_CRASH_SQL.to_owned(), "gen_random_uuid()"),
        ];
        // Which index a statement on session_file must use: a scan of another one (the primary
        // key in file_id order, the path's btree) would walk the whole catalogue.
        let catalogue_index = |sql: &str| -> Option<&'static str> {
            if !sql.contains("cortex_buffer.session_file") {
                None
            } else if sql.contains("right(path, 43)") {
                Some("session_file_name_idx")
            } else if sql.contains("job_dir OPERATOR(pg_catalog.=) $") {
                Some("session_file_job_dir_idx")
            } else if sql.contains("job_id OPERATOR(pg_catalog.=) $1")
                && sql.contains("FROM cortex_buffer.session_file")
            {
                Some("session_file_job_order_idx")
            } else {
                None
            }
        };
        for (types, sql, args) in statements {
            run(&format!("PREPARE rp_stmt({types}) AS {sql}"));
            let plan = Spi::connect(|c| {
                c.select(&format!("EXPLAIN (COSTS OFF) EXECUTE rp_stmt({args})"), None, &[])
                    .map(|rows| rows.filter_map(|r| r.get::<String>(1).ok().flatten()).collect::<Vec<_>>().join("\n"))
            })
            .unwrap_or_default();
            run("DEALLOCATE rp_stmt");
            assert!(!plan.contains("Seq Scan"), "{sql}\n{plan}");
            if let Some(index) = catalogue_index(&sql) {
                assert!(plan.contains(index), "{sql} must read session_file through {index}:\n{plan}");
            }
            if sql == LAST_MARKER_SQL || sql == FIRST_LOADED_SQL {
                assert!(plan.contains("event_marker_idx"), "markers come from their partial index:\n{plan}");
            }
        }
    }

    /// Every real transcript, indexed: agent_state() from the index says what replaying the
    /// file's own bytes says (the core's tests prove the rules on every cut of these files),
    /// and session_usage() counts the responses the core counts.
    #[pg_test]
    fn every_real_transcript_through_the_index() {
        use cortex_buffer_core::recovery::agent_state::{is_subagent_file, Tracker};
        use cortex_buffer_core::recovery::usage::Tally;
        let root = TempRoot::new("rp-fixtures");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pgrx-tests/fixtures/claude-code");
        let mut files = Vec::new();
        let mut dirs = vec![fixtures.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut placed = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let bytes = std::fs::read(f).unwrap_or_default();
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            // Keep the discovery layout: <project>/<name>.jsonl, or a sub-agent's
            // <project>/<session>/subagents/agent-*.jsonl.
            let rel = if f.parent().is_some_and(|p| p.ends_with("subagents")) {
                let session = f
                    .parent()
                    .and_then(|p| p.parent())
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned());
                format!("proj-{i}/{}/subagents/{name}", session.unwrap_or_default())
            } else {
                format!("proj-{i}/{name}")
            };
            root.put(&rel, &bytes);
            placed.push((rel, bytes));
        }
        index(&root);
        assert!(placed.len() >= 20);
        for (rel, bytes) in &placed {
            let text = String::from_utf8_lossy(bytes);
            let mut tracker = Tracker::new(is_subagent_file(rel));
            let mut tally = Tally::new(Some(cortex_buffer_core::indexer::dialect::Dialect::ClaudeCode));
            let mut offset = 0i64;
            for (n, line) in text.split('\n').enumerate() {
                tracker.feed(n as i64 + 1, offset, line);
                if let Ok(p) = cortex_buffer_core::json::parse::parse(line) {
                    let cols = cortex_buffer_core::indexer::normalize::columns(
                        &p,
                        Some(cortex_buffer_core::indexer::dialect::Dialect::ClaudeCode),
                    );
                    let row = cortex_buffer_core::recovery::line::Row {
                        event_type: cols.event_type.as_deref(),
                        request_id: cols.request_id.as_deref(),
                        payload: Some(line),
                        ..Default::default()
                    };
                    tally.feed(&row, cortex_buffer_core::spend::usage::Usage::default());
                }
                offset += line.len() as i64 + 1;
            }
            let v = tracker.verdict();
            let want = format!(
                "{}/{}/{}",
                v.state.label(),
                v.confidence.label(),
                v.line_no.map_or("-".to_owned(), |l| l.to_string())
            );
            let got = one(&format!(
                "SELECT state || '/' || confidence || '/' || coalesce(decided_by_line::text, '-') FROM cortex_buffer.agent_state('{}')",
                root.path(rel)
            ));
            assert_eq!(got, want, "{rel}");
            keep_rows("agent_state", &format!("SELECT * FROM cortex_buffer.agent_state('{}')", root.path(rel)));
            let responses = one(&format!(
                "SELECT coalesce(sum(responses), 0)::text FROM cortex_buffer.session_usage('{}') WHERE path = '{}'",
                root.path(rel),
                root.path(rel)
            ));
            assert_eq!(responses, tally.responses().len().to_string(), "{rel}");
        }
    }
}
