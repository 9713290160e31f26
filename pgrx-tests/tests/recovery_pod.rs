//! Recovery as a pod lives it: session files written by the control plane's own writer code
//! (`oracle/writer.mjs`, its BufferWriter and writeEventToBuffer, run in Node), checkpoints
//! written with `write_checkpoint` or by the control plane's own `UPDATE`, the worker running
//! with its default poll, and `recovery_plan` called at once, the way a pod calls it when it
//! starts after a crash. Each case asserts the exact skip, in-flight and verify lists.
//!
//! `CORTEX_POD_TRIALS` (default 100) sets the append-then-plan trials of the index-lag case.

use std::time::Duration;

use serde_json::{json, Value};

use cortex_buffer_e2e::pods::{
    call, calls, completed, list, new_job, node_key, node_keys, pair, plan, pod_start, result, text, uuid, Pod, AGENT,
};
use cortex_buffer_e2e::{Cluster, Rng};

fn cluster(name: &str) -> Cluster {
    let c = Cluster::new(name, &["cortex_buffer.settle_period = '60s'"]);
    c.start();
    c.create_extension();
    c
}

/// The checkpoint a pod writes with `write_checkpoint`.
fn checkpoint(c: &Cluster, job: &str, step: i64) -> Value {
    let doc = json!({"step_index": step, "state": {"done": step}});
    c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{doc}')"));
    doc
}

#[test]
fn a_plan_at_pod_start_knows_the_call_that_just_finished() {
    let c = cluster("pod-lag");
    let mut rng = Rng::new(std::env::var("CORTEX_POD_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(16));
    let trials: usize = std::env::var("CORTEX_POD_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut misses = Vec::new();
    for trial in 0..trials {
        // Half the jobs are new to the worker (a directory it has not discovered yet).
        let job = new_job(&c, &mut rng);
        let mut pod = Pod::new(&c, &job, "s1", 0);
        if trial % 2 == 0 {
            pod.write(&[text("planning")], None);
            c.psql("SELECT pg_sleep(0.05)");
        }
        checkpoint(&c, &job, 1);
        let to = format!("user{trial}@example.com");
        pod.write(&[call("send_email", json!({"to": to})), result("send_email", "sent")], None);
        // The pod dies; its successor asks at once.
        let p = plan(&c, &job);
        if completed(&p) != [pair("send_email", "sent")] || p["fresh"]["stale"] != json!(false) {
            misses.push(format!("trial {trial}: {}", p));
        }
    }
    assert!(misses.is_empty(), "{} of {trials} plans missed the finished call:\n{}", misses.len(), misses.join("\n"));
    eprintln!("index lag: {trials} append-then-plan trials, 0 misses");
}

#[test]
fn restarts_in_one_file_keep_every_writer_after_the_checkpoint() {
    let c = cluster("pod-restarts");
    let mut rng = Rng::new(2);
    let job = new_job(&c, &mut rng);
    // Pod 1 checkpoints, finishes send_email, starts charge_card and dies.
    let mut pod1 = Pod::new(&c, &job, "s1", 0);
    pod1.write(&[text("plan"), call("read_file", json!({"p": "a"})), result("read_file", "A")], None);
    let doc = checkpoint(&c, &job, 3);
    pod1.write(
        &[call("send_email", json!({"to": "x"})), result("send_email", "sent"), call("charge_card", json!({"usd": 5}))],
        None,
    );
    // Pod 2 resumes from the same checkpoint (sequence 0 again, same file) and dies after a line.
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(&[text("resuming")], None);
    // Pod 3 asks.
    let p = plan(&c, &job);
    assert_eq!(p["reason"], "high_water_mark", "{p}");
    assert_eq!(completed(&p), [pair("send_email", "sent")], "{p}");
    assert_eq!(calls(&p, "in_flight"), [pair("charge_card", r#"{"usd":5}"#)], "{p}");
    assert_eq!(list(&p, "in_flight")[0]["writer_crashed"], true);
    assert!(list(&p, "verify").is_empty(), "{p}");
    // The in-flight call's key is what pod 1 computed before making it (its 1st charge_card of
    // that input since the checkpoint it stored), in the control plane's own TypeScript formula.
    let key = node_key(&job, &doc, 1, "charge_card", &json!({"usd": 5}));
    assert_eq!(list(&p, "in_flight")[0]["idempotency_key"], json!(key), "{p}");
}

#[test]
fn later_files_without_checkpoint_loaded_belong_to_the_plan() {
    let c = cluster("pod-files");
    let mut rng = Rng::new(3);
    let job = new_job(&c, &mut rng);
    let id = uuid(&mut rng);
    c.psql(&format!(
        "SELECT cortex_buffer.write_checkpoint('{job}', '{}')",
        json!({"checkpoint_id": id, "step_index": 1})
    ));
    // An older writer that wrote CHECKPOINT markers, and files per session.
    let line = |seq: u64, t: &str, data: Value| {
        json!({"version": "1.0", "timestamp": "2026-11-25T10:00:00.000Z", "jobId": job, "sessionId": "s", "agentId": AGENT,
               "type": t, "data": data, "sequence": seq})
        .to_string()
            + "\n"
    };
    let first = [
        line(0, "TOOL_CALL", json!({"toolName": "read_file", "toolInput": {}})),
        line(1, "TOOL_RESULT", json!({"toolName": "read_file", "output": "r"})),
        line(2, "CHECKPOINT", json!({"checkpointId": id})),
        line(3, "TOOL_CALL", json!({"toolName": "send_email", "toolInput": {"to": "a"}})),
        line(4, "TOOL_RESULT", json!({"toolName": "send_email", "output": "sent"})),
    ]
    .concat();
    c.put(&format!("{job}/session-001.jsonl"), &first);
    let second = [
        line(0, "TOOL_CALL", json!({"toolName": "charge_card", "toolInput": {"usd": 1}})),
        line(1, "TOOL_RESULT", json!({"toolName": "charge_card", "output": "ok"})),
        line(2, "TOOL_CALL", json!({"toolName": "deploy", "toolInput": {}})),
    ]
    .concat();
    c.put(&format!("{job}/session-002.jsonl"), &second);
    let p = plan(&c, &job);
    assert_eq!(p["reason"], "marker_matched", "{p}");
    assert_eq!(completed(&p), [pair("send_email", "sent"), pair("charge_card", "ok")], "{p}");
    assert_eq!(calls(&p, "in_flight"), [pair("deploy", "{}")], "{p}");
    assert!(list(&p, "anomalies").iter().all(|a| a["kind"] != "chain_broken"), "{p}");
}

#[test]
fn a_result_that_order_cannot_place_is_verified_not_skipped() {
    let c = cluster("pod-ambiguous");
    let mut rng = Rng::new(4);
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    checkpoint(&c, &job, 0);
    pod.write(
        &[call("send_email", json!({"to": "a"})), call("send_email", json!({"to": "b"})), result("send_email", "sent")],
        None,
    );
    let p = plan(&c, &job);
    assert!(completed(&p).is_empty(), "{p}");
    assert!(calls(&p, "in_flight").is_empty(), "{p}");
    assert_eq!(calls(&p, "verify"), [pair("send_email", r#"{"to":"a"}"#), pair("send_email", r#"{"to":"b"}"#)], "{p}");
    for v in list(&p, "verify") {
        assert_eq!(v["reason"], "ambiguous_pairing");
        assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{p}");
    }
    assert!(list(&p, "anomalies").iter().any(|a| a["kind"] == "ambiguous_pairing"), "{p}");
}

/// Case 5: a pod whose clock is `skew_ms` off the server's. A call finishes before the
/// checkpoint, one after it, one is in flight when the pod dies mid-line.
fn skewed_pod(c: &Cluster, rng: &mut Rng, skew_ms: i64, keep_mark: bool) -> Value {
    let job = new_job(c, rng);
    let mut pod = Pod::new(c, &job, "s1", skew_ms);
    pod.write(&[call("read_file", json!({"p": "before"})), result("read_file", "old")], None);
    std::thread::sleep(Duration::from_millis(1300));
    checkpoint(c, &job, 2);
    if !keep_mark {
        // A checkpoint stored before marks existed: only its history row's time is known.
        c.psql(&format!("DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '{job}'"));
    }
    std::thread::sleep(Duration::from_millis(1300));
    pod.write(
        &[call("send_email", json!({"to": "after"})), result("send_email", "sent"), call("charge_card", json!({}))],
        None,
    );
    // Killed while appending the next line.
    pod.write(&[text("never finished")], Some(60));
    plan(c, &job)
}

#[test]
fn a_pod_clock_that_is_off_neither_skips_nor_drops_a_call() {
    let c = cluster("pod-clocks");
    let mut rng = Rng::new(5);
    for keep_mark in [true, false] {
        for skew in [-60, -10, -3, 0, 3, 10, 60] {
            let p = skewed_pod(&c, &mut rng, skew * 1000, keep_mark);
            let want_reason = if keep_mark { "high_water_mark" } else { "checkpoint_time" };
            assert_eq!(p["reason"], want_reason, "skew {skew} s: {p}");
            let done = completed(&p);
            let open = calls(&p, "in_flight");
            let verify = calls(&p, "verify");
            let all: Vec<String> =
                done.iter().chain(open.iter()).chain(verify.iter()).map(|(t, _)| t.clone()).collect();
            // Never a wrong skip, never a dropped call, never an omitted in-flight call.
            assert!(!all.contains(&"read_file".to_owned()), "skew {skew} s, mark {keep_mark}: {p}");
            assert!(all.contains(&"send_email".to_owned()), "skew {skew} s, mark {keep_mark}: {p}");
            assert!(!open.iter().chain(verify.iter()).any(|(t, _)| t == "read_file"));
            assert!(
                open.contains(&pair("charge_card", "{}")) || verify.contains(&pair("charge_card", "{}")),
                "skew {skew} s, mark {keep_mark}: {p}"
            );
            // With 1.3 s on either side of the checkpoint, the measured clock settles all three.
            assert_eq!(done, [pair("send_email", "sent")], "skew {skew} s, mark {keep_mark}: {p}");
            assert_eq!(open, [pair("charge_card", "{}")], "skew {skew} s, mark {keep_mark}: {p}");
        }
    }
}

#[test]
fn crash_cut_lines_do_not_make_the_file_untrusted() {
    let c = cluster("pod-cuts");
    let mut rng = Rng::new(6);
    let job = new_job(&c, &mut rng);
    checkpoint(&c, &job, 0);
    // Three pods, two killed mid-line: 13 lines, 2 of them cut (15 %).
    let mut pod1 = Pod::new(&c, &job, "s1", 0);
    pod1.write(&[call("a", json!({})), result("a", "1"), text("x"), call("b", json!({})), result("b", "2")], None);
    pod1.write(&[text("cut")], Some(25));
    let mut pod2 = Pod::new(&c, &job, "s2", 0);
    pod2.write(&[text("resume"), call("c", json!({})), result("c", "3"), text("y")], None);
    pod2.write(&[text("cut")], Some(40));
    let mut pod3 = Pod::new(&c, &job, "s3", 0);
    pod3.write(&[text("resume"), call("d", json!({}))], None);
    let p = plan(&c, &job);
    assert_eq!(p["mode"], "buffer", "{p}");
    let file = &list(&p, "sessions")[0]["integrity"];
    assert_eq!(file["corrupt_lines"], 2, "{p}");
    assert_eq!(file["trusted"], true, "{p}");
    assert_eq!(completed(&p), [pair("a", "1"), pair("b", "2"), pair("c", "3")], "{p}");
    assert_eq!(calls(&p, "in_flight"), [pair("d", "{}")], "{p}");
}

#[test]
fn a_checkpoint_the_control_plane_wrote_itself_anchors_the_plan() {
    let c = cluster("pod-cp-update");
    let mut rng = Rng::new(7);
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write(&[call("read_file", json!({})), result("read_file", "r")], None);
    // The control plane's own write: a plain UPDATE of the job row, CRC as it stores it.
    let doc = json!({"step_index": 4, "messages": ["m"]});
    c.psql(&format!(
        "UPDATE cortex_buffer.job SET checkpoint = '{doc}',
                checkpoint_crc = cortex_buffer.checkpoint_crc('{doc}')::bigint::bit(32)::int WHERE id = '{job}'"
    ));
    pod.write(
        &[call("send_email", json!({"to": "z"})), result("send_email", "sent"), call("charge_card", json!({}))],
        None,
    );
    let p = plan(&c, &job);
    assert_eq!(p["reason"], "high_water_mark", "{p}");
    assert_eq!(p["checkpoint"]["step_index"], 4);
    assert_eq!(completed(&p), [pair("send_email", "sent")], "{p}");
    assert_eq!(calls(&p, "in_flight"), [pair("charge_card", "{}")], "{p}");
    // Stored by the control plane during the pod's work: the pod resumed from none and stored
    // none itself, so its calls are keyed under no checkpoint ("-"), charge_card({}) its first.
    let key = node_key(&job, &Value::Null, 1, "charge_card", &json!({}));
    assert_eq!(list(&p, "in_flight")[0]["idempotency_key"], json!(key), "{p}");
}

#[test]
fn the_sql_key_function_and_the_control_planes_formula_agree() {
    let c = cluster("pod-keys");
    let mut rng = Rng::new(8);
    let tools = ["send_email", "charge_card", "read_file", "", "ünïcode"];
    let mut cases = Vec::new();
    for i in 0..200 {
        let job = uuid(&mut rng);
        let checkpoint =
            if i % 5 == 0 { Value::Null } else { json!({"step_index": rng.below(50), "b": [1.5, "x"], "a": {"z": i}}) };
        let input = if i % 7 == 0 {
            Value::Null
        } else {
            json!({"n": rng.below(1000), "s": "\u{2028}\"q\"", "k": [true, null, 1e21]})
        };
        cases.push(json!([job, checkpoint, 1 + rng.below(9), rng.pick(&tools), input]));
    }
    let theirs = node_keys(&cases.iter().map(Value::to_string).collect::<Vec<_>>());
    let sql: Vec<String> = cases
        .iter()
        .map(|c| {
            let lit = |v: &Value| {
                if v.is_null() {
                    "NULL".to_owned()
                } else {
                    format!("'{}'::jsonb", v.to_string().replace('\'', "''"))
                }
            };
            format!(
                "SELECT cortex_buffer.call_idempotency_key('{}', {}, {}, '{}', {})",
                c[0].as_str().unwrap_or_default(),
                lit(&c[1]),
                c[2],
                c[3].as_str().unwrap_or_default(),
                lit(&c[4])
            )
        })
        .collect();
    let ours: Vec<String> = c.psql(&sql.join(";\n")).lines().map(str::to_owned).collect();
    assert_eq!(ours.len(), cases.len());
    assert_eq!(ours, theirs);
}

#[test]
fn the_node_client_example_skips_verifies_and_runs_as_the_plan_says() {
    let c = cluster("pod-example");
    let mut rng = Rng::new(9);
    let job = new_job(&c, &mut rng);
    let mut pod = Pod::new(&c, &job, "s1", 0);
    pod.write(&[call("read_file", json!({"p": "spec"})), result("read_file", "spec")], None);
    checkpoint(&c, &job, 1);
    pod.write(
        &[call("send_email", json!({"to": "a"})), result("send_email", "sent"), call("charge_card", json!({"usd": 9}))],
        None,
    );
    // The pod dies; the next one replays its step from the checkpoint.
    let planned = json!([
        {"tool": "send_email", "input": {"to": "a"}},
        {"tool": "charge_card", "input": {"usd": 9}},
        {"tool": "deploy", "input": {}}
    ]);
    // It runs as a pod does: an agent login that presents the job's token.
    let decisions: Vec<(String, String)> = pod_start(&c, &job, &planned, false)
        .into_iter()
        .map(|l| (l.first().cloned().unwrap_or_default(), l.get(1).cloned().unwrap_or_default()))
        .collect();
    let text = format!("{decisions:?}");
    assert_eq!(decisions, [pair("skip", "send_email"), pair("verify", "charge_card"), pair("run", "deploy")], "{text}");
}
