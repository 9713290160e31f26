//! Recovery at the seams between the pieces, each case with the control plane's own writer code
//! run in Node (`oracle/writer.mjs`) and the client example's decisions
//! (`examples/node/pod-start.mjs`, which uses `decide.mjs`):
//!
//! 1. a checkpoint the control plane stores while a line is being written, or while a call is
//!    open: the call is verified, never dropped;
//! 2. keys across a checkpoint stored during a call: the key the pod sent;
//! 3. a second crash within one step: the example matches the plan's entries, and a plan that
//!    proves nothing after the checkpoint is verified, not run;
//! 4. inputs jsonb cannot store, or nested deep: the key of the input written;
//! 5. an operator's log tools between checkpoint and plan: copytruncate, delete and recreate,
//!    renames. A file whose marked bytes are gone never anchors the plan silently.
//!
//! Each of these came back wrong from 0.13.0 (issue 36), with `mode = buffer` and no anomaly.

use std::path::PathBuf;

use serde_json::{json, Value};

use cortex_buffer_e2e::pods::{
    call, calls, completed, list, new_job, node_key, node_keys, pair, plan, pod_start, pod_start_raw, result, s, text,
    Pod,
};
use cortex_buffer_e2e::{Cluster, Rng};

fn cluster(name: &str) -> Cluster {
    let c = Cluster::new(name, &["cortex_buffer.settle_period = '60s'"]);
    c.start();
    c.create_extension();
    c
}

/// The control plane's own checkpoint write: a plain `UPDATE` of the job row (the trigger
/// records its high-water mark).
fn control_plane_stores(c: &Cluster, job: &str, doc: &Value) {
    c.psql(&format!(
        "UPDATE cortex_buffer.job SET checkpoint = '{doc}',
                checkpoint_crc = cortex_buffer.checkpoint_crc('{doc}')::bigint::bit(32)::int WHERE id = '{job}'"
    ));
}

/// The pod's own checkpoint write (`write_checkpoint`): its next calls are keyed under it.
fn pod_stores(c: &Cluster, job: &str, doc: &Value) {
    c.psql(&format!("SELECT crc FROM cortex_buffer.write_checkpoint('{job}', '{doc}')"));
}

fn doc(step: i64) -> Value {
    json!({"step_index": step, "state": {"done": step}})
}

fn crc_of(c: &Cluster, doc: &Value) -> String {
    c.psql(&format!("SELECT cortex_buffer.checkpoint_crc('{doc}')"))
}

/// The one entry of `list` for `tool`, or a failure that shows the plan.
fn entry<'a>(p: &'a Value, list_name: &str, tool: &str) -> &'a Value {
    list(p, list_name)
        .into_iter()
        .find(|e| e["tool_name"] == tool)
        .unwrap_or_else(|| panic!("no {tool} in {list_name}: {p}"))
}

fn tools(p: &Value, list_name: &str) -> Vec<String> {
    list(p, list_name).iter().map(|e| s(e, "tool_name")).collect()
}

fn actions(lines: &[Vec<String>]) -> Vec<(&str, &str)> {
    lines.iter().map(|l| (l.first().map_or("", String::as_str), l.get(1).map_or("", String::as_str))).collect()
}

#[test]
fn a_call_open_at_the_checkpoint_or_cut_by_its_mark_is_verified_not_dropped() {
    let c = cluster("seam-open");
    let mut rng = Rng::new(361);

    // (a) The control plane stores its checkpoint while the pod is appending a 256 KiB call
    // line: the mark falls inside the line. The pod dies before the result.
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write(&[call("read_file", json!({"p": "a"})), result("read_file", "A")], None);
    let big = json!({"usd": 5, "memo": "m".repeat(256 * 1024)});
    pod.write_around(&[call("charge_card", big.clone())], 100_000, || control_plane_stores(&c, &job, &doc(1)));
    let inside = c.psql(&format!(
        "SELECT (files->0->>'line_start')::bigint < (files->0->>'size')::bigint
           FROM cortex_buffer.checkpoint_mark WHERE job_id = '{job}' AND source = 'trigger'"
    ));
    assert_eq!(inside, "t", "the mark fell inside the line, and says where the line began");
    let p = plan(&c, &job);
    assert_eq!((p["mode"].as_str(), p["reason"].as_str()), (Some("buffer"), Some("high_water_mark")), "{p}");
    assert!(completed(&p).is_empty(), "read_file finished before the checkpoint: {p}");
    assert!(list(&p, "in_flight").is_empty(), "{p}");
    let v = entry(&p, "verify", "charge_card");
    assert_eq!(v["reason"], "straddles_anchor", "{p}");
    // Keyed as the pod keyed it: it resumed from no checkpoint and stored none itself.
    assert_eq!(v["idempotency_key"], json!(node_key(&job, &Value::Null, 1, "charge_card", &big)), "{p}");

    // (b) The call line was whole before the control plane's UPDATE; no result ever came.
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write(
        &[call("read_file", json!({"p": "a"})), result("read_file", "A"), call("charge_card", json!({"usd": 5}))],
        None,
    );
    control_plane_stores(&c, &job, &doc(1));
    let p = plan(&c, &job);
    assert!(completed(&p).is_empty(), "{p}");
    let v = entry(&p, "verify", "charge_card");
    assert_eq!(v["reason"], "open_at_anchor", "{p}");
    // Its key is the one the pod sent; its place in the replay from a checkpoint the control
    // plane stored is open (that state may hold it: a pod may have found it done).
    assert_ne!(v["key_status"], "unknown", "{p}");
    assert_eq!(v["idempotency_key"], json!(node_key(&job, &Value::Null, 1, "charge_card", &json!({"usd": 5}))));

    // (c) The same call, finished after the checkpoint: verified too, with its result.
    pod.write(&[result("charge_card", "charged")], None);
    let p = plan(&c, &job);
    assert!(completed(&p).is_empty(), "{p}");
    let v = entry(&p, "verify", "charge_card");
    assert_eq!(v["reason"], "started_before_anchor", "{p}");
    assert_eq!(v["results"][0]["result"], "charged", "{p}");

    // The example client verifies it (by its key), and runs what comes after.
    let planned = json!([{"tool": "charge_card", "input": {"usd": 5}}, {"tool": "deploy", "input": {}}]);
    let lines = pod_start(&c, &job, &planned, false);
    assert_eq!(actions(&lines), [("verify", "charge_card"), ("run", "deploy")], "{lines:?}");
}

#[test]
fn a_call_keeps_the_key_its_pod_sent_across_a_checkpoint_stored_during_it() {
    let c = cluster("seam-keys");
    let mut rng = Rng::new(362);
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write(&[call("read_file", json!({"p": "a"})), result("read_file", "A")], None);
    // The pod stores C1 itself: its next calls are keyed under C1.
    let c1 = doc(1);
    pod_stores(&c, &job, &c1);
    let email = json!({"to": "a@example.com"});
    pod.write(&[call("send_email", email.clone())], None);
    // The control plane stores C2 while the call runs; its result comes after.
    control_plane_stores(&c, &job, &json!({"step_index": 1, "state": {"done": 1, "note": "cp"}}));
    pod.write(&[result("send_email", "sent"), call("send_email", email.clone())], None);
    let p = plan(&c, &job);
    assert_eq!(p["reason"], "high_water_mark", "{p}");
    let first = entry(&p, "verify", "send_email").clone();
    assert_eq!(first["reason"], "started_before_anchor", "{p}");
    assert_eq!(first["idempotency_key"], json!(node_key(&job, &c1, 1, "send_email", &email)), "{p}");
    assert_eq!(first["checkpoint_ref"], json!(format!("crc:{}", crc_of(&c, &c1))), "{p}");
    // The second send of the same input is the second since C1: not the first since C2.
    let second = entry(&p, "in_flight", "send_email").clone();
    assert_eq!(second["idempotency_key"], json!(node_key(&job, &c1, 2, "send_email", &email)), "{p}");
    assert_eq!((first["replay_ordinal"].as_i64(), second["replay_ordinal"].as_i64()), (Some(1), Some(2)), "{p}");

    // A pod resuming from C2 replays both sends: each is verified by the key its writer sent.
    let planned = json!([{"tool": "send_email", "input": email}, {"tool": "send_email", "input": email}]);
    let lines = pod_start(&c, &job, &planned, false);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (l, sent) in lines.iter().zip([&first, &second]) {
        assert_eq!(l.first().map(String::as_str), Some("verify"), "{lines:?}");
        assert!(l.iter().any(|w| *w == s(sent, "idempotency_key")), "{lines:?} names {}", sent["idempotency_key"]);
    }
}

#[test]
fn the_example_matches_the_plan_after_a_second_crash_in_one_step() {
    let c = cluster("seam-example");
    let mut rng = Rng::new(363);
    let job = new_job(&c, &mut rng);
    control_plane_stores(&c, &job, &doc(0));
    let step = |extra: &[Value]| {
        let mut v = vec![
            json!({"tool": "read_file", "input": {"p": "x"}}),
            json!({"tool": "send_email", "input": {"to": "a"}}),
            json!({"tool": "charge_card", "input": {"usd": 9}}),
        ];
        v.extend_from_slice(extra);
        Value::Array(v)
    };
    // Pod 1 asks for its plan: a checkpoint and no session file yet, so the plan proves nothing
    // after the checkpoint and every call is verified by content. Nothing ran: it runs two calls
    // and dies.
    let lines = pod_start(&c, &job, &step(&[]), false);
    assert!(lines.iter().all(|l| l.first().map(String::as_str) == Some("verify")), "{lines:?}");
    assert!(lines.iter().all(|l| l.last().map(String::as_str) == Some("by_content")), "{lines:?}");
    let mut pod1 = Pod::new(&c, &job, "s1", 0);
    pod1.write(
        &[
            text("resuming"),
            call("read_file", json!({"p": "x"})),
            result("read_file", "X"),
            call("send_email", json!({"to": "a"})),
            result("send_email", "sent"),
        ],
        None,
    );
    // Pod 2, the same step from the same checkpoint: skips both, runs charge_card, starts
    // deploy, dies.
    let lines = pod_start(&c, &job, &step(&[]), false);
    assert_eq!(actions(&lines), [("skip", "read_file"), ("skip", "send_email"), ("run", "charge_card")], "{lines:?}");
    let charge_key = lines.get(2).and_then(|l| l.get(2)).cloned().unwrap_or_default();
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(
        &[
            text("resuming"),
            call("charge_card", json!({"usd": 9})),
            result("charge_card", "ok"),
            call("deploy", json!({})),
        ],
        None,
    );
    // Pod 3: three skips, deploy verified, notify run.
    let extra = [json!({"tool": "deploy", "input": {}}), json!({"tool": "notify", "input": {"c": 1}})];
    let lines = pod_start(&c, &job, &step(&extra), false);
    assert_eq!(
        actions(&lines),
        [
            ("skip", "read_file"),
            ("skip", "send_email"),
            ("skip", "charge_card"),
            ("verify", "deploy"),
            ("run", "notify")
        ],
        "{lines:?}"
    );
    // The plan names charge_card by the key pod 2 ran it with.
    let p = plan(&c, &job);
    assert_eq!(entry(&p, "completed", "charge_card")["idempotency_key"], json!(charge_key), "{p}");
}

#[test]
fn a_plan_that_proves_nothing_after_the_checkpoint_is_verified_except_on_a_first_run() {
    let c = cluster("seam-modes");
    let mut rng = Rng::new(364);
    let planned = json!([{"tool": "send_email", "input": {"to": "a"}}]);
    // A checkpoint, and no session file: checkpoint_only. Whatever the step does again may
    // have run: verified by content.
    let job = new_job(&c, &mut rng);
    control_plane_stores(&c, &job, &doc(2));
    let lines = pod_start(&c, &job, &planned, false);
    let first = lines.first().cloned().unwrap_or_default();
    assert_eq!(
        (first.first().map(String::as_str), first.last().map(String::as_str)),
        (Some("verify"), Some("by_content"))
    );
    // No checkpoint, no file: on the job's first attempt nothing can have run.
    let job = new_job(&c, &mut rng);
    assert_eq!(actions(&pod_start(&c, &job, &planned, true)), [("run", "send_email")]);
    // On a later attempt, an earlier pod may have run it without writing a line.
    assert_eq!(actions(&pod_start(&c, &job, &planned, false)), [("verify", "send_email")]);
}

#[test]
fn inputs_jsonb_cannot_hold_are_keyed_as_the_writer_wrote_them() {
    let c = cluster("seam-inputs");
    let mut rng = Rng::new(365);
    let job = new_job(&c, &mut rng);
    let c1 = doc(0);
    pod_stores(&c, &job, &c1);
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    // An emoji cut by .slice (a lone surrogate), a NUL, and 1 000 nested arrays: valid JSON as
    // JSON.stringify writes it; jsonb stores none of the first two.
    let inputs = [r#"{"text":"cut \ud83d"}"#.to_owned(), r#"{"text":"a\u0000b"}"#.to_owned(), deep];
    let names = ["note_surrogate", "note_nul", "deep"];
    let mut events = Vec::new();
    for (tool, input) in names.iter().zip(&inputs) {
        events.push(format!(r#"{{"type":"tool_use","toolName":"{tool}","toolInput":{input}}}"#));
        if *tool != "deep" {
            events.push(format!(r#"{{"type":"tool_result","toolName":"{tool}","output":"ok","isError":false}}"#));
        }
    }
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write_raw(&format!("[{}]", events.join(",")), None);
    let cases: Vec<String> = names.iter().zip(&inputs).map(|(t, i)| format!(r#"["{job}",{c1},1,"{t}",{i}]"#)).collect();
    let keys = node_keys(&cases);
    let p = plan(&c, &job);
    assert_eq!(tools(&p, "completed"), ["note_surrogate", "note_nul"], "{p}");
    for (tool, key) in names.iter().zip(&keys) {
        let e = list(&p, "completed")
            .into_iter()
            .chain(list(&p, "in_flight"))
            .find(|e| e["tool_name"] == *tool)
            .unwrap_or_else(|| panic!("no {tool}: {p}"));
        assert_eq!(e["idempotency_key"], json!(key), "{tool}: {e}");
    }
    // The example finds them by the same hash: it skips the two finished calls.
    let planned = format!(
        r#"[{{"tool":"note_surrogate","input":{}}},{{"tool":"note_nul","input":{}}},{{"tool":"deep","input":{}}}]"#,
        inputs[0], inputs[1], inputs[2]
    );
    let lines = pod_start_raw(&c, &job, &planned, false);
    assert_eq!(actions(&lines), [("skip", "note_surrogate"), ("skip", "note_nul"), ("verify", "deep")], "{lines:?}");
    // The same emoji whole is another input: not skipped.
    let other = r#"[{"tool":"note_surrogate","input":{"text":"cut \ud83d\ude00"}}]"#;
    assert_eq!(actions(&pod_start_raw(&c, &job, other, false)).first(), Some(&("run", "note_surrogate")));
}

/// The job's directory.
fn dir_of(c: &Cluster, job: &str) -> PathBuf {
    c.sessions.join(job)
}

/// A life up to the operator's touch: read_file finished before the checkpoint, send_email
/// after it, the index up to date.
fn before_the_operator<'c>(c: &'c Cluster, rng: &mut Rng) -> (String, Pod<'c>) {
    let job = new_job(c, rng);
    let mut pod = Pod::new(c, &job, "s1", 0);
    pod.write(&[text("start"), call("read_file", json!({"p": "a"})), result("read_file", "A")], None);
    control_plane_stores(c, &job, &doc(1));
    pod.write(&[call("send_email", json!({"to": "b"})), result("send_email", "sent")], None);
    let p = plan(c, &job);
    assert_eq!(completed(&p), [pair("send_email", "sent")], "{p}");
    (job, pod)
}

/// What a plan may say after an operator touched the files: read_file is never completed;
/// send_email, finished after the checkpoint, is listed, or the plan says it cannot prove
/// anything after the checkpoint. The example never runs send_email again unasked.
fn never_silently_wrong(c: &Cluster, job: &str, what: &str) -> Value {
    let p = plan(c, job);
    assert!(!tools(&p, "completed").contains(&"read_file".to_owned()), "{what}: {p}");
    let listed = ["completed", "in_flight", "verify"].iter().any(|l| tools(&p, l).contains(&"send_email".to_owned()));
    assert!(listed || (p["mode"] == "checkpoint_only" && p["reason"] == "bytes_missing"), "{what}: {p}");
    let planned = json!([{"tool": "send_email", "input": {"to": "b"}}, {"tool": "deploy", "input": {}}]);
    let lines = pod_start(c, job, &planned, false);
    assert_ne!(actions(&lines).first().map(|a| a.0), Some("run"), "{what}: {lines:?}\n{p}");
    p
}

fn mode(p: &Value) -> (Option<&str>, Option<&str>) {
    (p["mode"].as_str(), p["reason"].as_str())
}

#[test]
fn files_an_operator_touched_never_anchor_the_plan_silently() {
    let c = cluster("seam-operator");
    let mut rng = Rng::new(366);

    // logrotate's copytruncate: the bytes are copied to .1 (not a session file) and the file
    // cut to 0 under the writer, which goes on writing.
    let (job, mut pod) = before_the_operator(&c, &mut rng);
    let file = dir_of(&c, &job).join("session-001.jsonl");
    std::fs::copy(&file, file.with_extension("jsonl.1")).expect("copy");
    std::fs::OpenOptions::new().write(true).open(&file).and_then(|f| f.set_len(0)).expect("truncate");
    pod.write(&[call("charge_card", json!({"usd": 1}))], None);
    let p = never_silently_wrong(&c, &job, "copytruncate");
    assert_eq!(mode(&p), (Some("checkpoint_only"), Some("bytes_missing")), "{p}");

    // Deleted and created again (ext4 reuses a freed inode at once: the same identity).
    let (job, _) = before_the_operator(&c, &mut rng);
    let file = dir_of(&c, &job).join("session-001.jsonl");
    std::fs::remove_file(&file).expect("remove");
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(&[text("resuming"), call("charge_card", json!({"usd": 1}))], None);
    let p = never_silently_wrong(&c, &job, "recreate");
    assert_eq!(mode(&p), (Some("checkpoint_only"), Some("bytes_missing")), "{p}");

    // Renamed to .jsonl.1 (logrotate's create mode): not a session file any more.
    let (job, _) = before_the_operator(&c, &mut rng);
    let file = dir_of(&c, &job).join("session-001.jsonl");
    std::fs::rename(&file, file.with_extension("jsonl.1")).expect("rename");
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(&[text("resuming"), call("charge_card", json!({"usd": 1}))], None);
    let p = never_silently_wrong(&c, &job, "rename to .jsonl.1");
    assert_eq!(mode(&p), (Some("checkpoint_only"), Some("bytes_missing")), "{p}");

    // Renamed to another .jsonl name: the same file, followed by its identity and bytes, and
    // read from the mark. The new session-001.jsonl is all after the checkpoint.
    let (job, _) = before_the_operator(&c, &mut rng);
    let file = dir_of(&c, &job).join("session-001.jsonl");
    std::fs::rename(&file, dir_of(&c, &job).join("rotated-20261128.jsonl")).expect("rename");
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(&[text("resuming"), call("charge_card", json!({"usd": 1}))], None);
    let p = never_silently_wrong(&c, &job, "rename to .jsonl");
    assert_eq!(mode(&p), (Some("buffer"), Some("high_water_mark")), "{p}");
    assert_eq!(completed(&p), [pair("send_email", "sent")], "{p}");
    assert_eq!(calls(&p, "in_flight"), [pair("charge_card", r#"{"usd":1}"#)], "{p}");
    assert!(list(&p, "anomalies").iter().any(|a| a["kind"] == "file_renamed"), "{p}");
}
