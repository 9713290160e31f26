//! Parity with the control plane's own `recoverFromBuffer` (oracle/recovery.mjs): on generated
//! job directories written the way the shipped writer writes them (camelCase lines, restarts
//! that append to session-001.jsonl from sequence 0, the odd CHECKPOINT event, later session
//! files, crash-truncated tails, a corrupt line now and then), `recovery_plan(job,
//! match_checkpoint => false)` lists in `events_after_marker` exactly the events the control
//! plane would recover: the events after the last CHECKPOINT of the latest file, or all of its
//! events when it has none.
//!
//! Parity holds where the two agree by design: settled files (no pending tail), fewer than
//! 1 000 sessions (the control plane sorts names as strings), and plans that read the latest
//! file only. A plan that follows a marker into an earlier file (the control plane never looks
//! there) is counted and skipped; most plans are compared.
//!
//! Then, with the job's checkpoint set to the one its markers name (as the control plane
//! would have written it), `recovery_plan(job)` with its defaults never knows less: every event
//! `recoverFromBuffer` replays from the latest file is in the plan, or the plan refuses and
//! says why.
//!
//! `CORTEX_RECOVERY_JOBS` (default 150) and `CORTEX_RECOVERY_SEED` scale and vary the run.

use std::io::Write;
use std::process::{Command, Stdio};

use cortex_buffer_e2e::{Cluster, Rng};

fn uuid(rng: &mut Rng) -> String {
    let h = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
    format!("{}-{}-4{}-8{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// One session file's bytes, as the shipped writer appends them (with `restarts` new writers).
fn session_file(rng: &mut Rng, job: &str, checkpoint: &str) -> String {
    let mut out = String::new();
    let mut seq = 0u64;
    let tools = ["read_file", "exec", "web_search"];
    let n = rng.below(40);
    for i in 0..n {
        let at = format!("2026-03-01T09:{:02}:{:02}.{:03}Z", (i / 60) % 60, i % 60, rng.below(1000));
        let tool = rng.pick(&tools);
        let (t, data) = match rng.below(20) {
            0..=5 => (
                "TOOL_CALL",
                format!(r#"{{"type":"tool_use","timestamp":"{at}","toolName":"{tool}","toolInput":{{"n":{i}}}}}"#),
            ),
            6..=11 => (
                "TOOL_RESULT",
                format!(
                    r#"{{"type":"tool_result","timestamp":"{at}","toolName":"{tool}","output":"r{i}","isError":false}}"#
                ),
            ),
            12..=14 => ("LLM_RESPONSE", format!(r#"{{"type":"text","timestamp":"{at}","content":"t{i}"}}"#)),
            15 => (
                "LLM_RESPONSE",
                format!(r#"{{"type":"usage","timestamp":"{at}","tokenUsage":{{"inputTokens":10,"outputTokens":2}}}}"#),
            ),
            16 => ("CHECKPOINT", format!(r#"{{"checkpointId":"{checkpoint}"}}"#)),
            17 => (
                "ERROR",
                format!(r#"{{"type":"error","timestamp":"{at}","message":"m","classification":"transient"}}"#),
            ),
            18 => {
                // A crash and a new writer appending to the same file.
                seq = 0;
                ("SESSION_END", format!(r#"{{"type":"complete","timestamp":"{at}","result":null}}"#))
            }
            _ => {
                if rng.below(4) == 0 {
                    out.push_str("{\"version\":\"1.0\",\"garbage\n");
                }
                continue;
            }
        };
        out.push_str(&format!(
            r#"{{"version":"1.0","timestamp":"{at}","jobId":"{job}","sessionId":"","agentId":"ag","type":"{t}","data":{data},"sequence":{seq}}}"#
        ));
        out.push('\n');
        seq += 1;
    }
    if rng.below(5) == 0 {
        // Killed mid-append.
        out.push_str(r#"{"version":"1.0","timestamp":"2026-03-01T10:00:00.000Z","jobId":"#);
    }
    out
}

#[test]
fn events_after_marker_match_the_control_planes_recover_from_buffer() {
    let c = Cluster::new("recovery-parity", &["cortex_buffer.worker_enabled = off", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    let seed: u64 = std::env::var("CORTEX_RECOVERY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0ec0_4e41);
    let jobs: usize = std::env::var("CORTEX_RECOVERY_JOBS").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    let mut checkpoints = Vec::new();
    for _ in 0..jobs {
        let job = uuid(&mut rng);
        let checkpoint = uuid(&mut rng);
        let files = 1 + rng.below(3);
        let mut marked = false;
        for k in 1..=files {
            let text = session_file(&mut rng, &job, &checkpoint);
            marked |= text.contains("\"CHECKPOINT\"");
            c.put(&format!("{job}/session-{k:03}.jsonl"), &text);
        }
        ids.push(job);
        checkpoints.push(marked.then_some(checkpoint));
    }
    let values: Vec<String> = ids.iter().map(|j| format!("('{j}', gen_random_uuid())")).collect();
    c.psql(&format!("INSERT INTO cortex_buffer.job (id, agent_id) VALUES {}", values.join(",")));
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");

    let dirs: Vec<String> = ids.iter().map(|j| c.sessions.join(j).display().to_string()).collect();
    let mut node = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/recovery.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node is required for the oracle test: {e}"));
    node.stdin.take().expect("stdin").write_all(dirs.join("\n").as_bytes()).expect("feed node");
    let out = node.wait_with_output().expect("node output");
    assert!(out.status.success(), "node failed");
    let theirs: std::collections::HashMap<String, (String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            (f.len() == 3).then(|| (f[0].to_owned(), (f[1].to_owned(), f[2].to_owned())))
        })
        .collect();

    let (mut compared, mut elsewhere, mut differ) = (0, 0, Vec::new());
    for (job, dir) in ids.iter().zip(&dirs) {
        let (latest, want) = theirs.get(dir).cloned().unwrap_or_default();
        let ours = c.psql(&format!(
            "SELECT (SELECT coalesce(string_agg(s->>'file', ','), '') FROM jsonb_array_elements(p->'sessions') s WHERE s->>'read_from' IS NOT NULL)
                    || E'\\t' || (SELECT coalesce(jsonb_agg(jsonb_build_array((e->>'seq')::int, e->>'type', (e->>'byte_offset')::int)), '[]')::text
                                   FROM jsonb_array_elements(p->'events_after_marker') e)
               FROM cortex_buffer.recovery_plan('{job}', match_checkpoint => false) p"
        ));
        let (read, events) = ours.split_once('\t').unwrap_or_default();
        if read != latest {
            elsewhere += 1;
            continue;
        }
        compared += 1;
        let want: serde_json::Value = serde_json::from_str(&want).unwrap_or_default();
        let got: serde_json::Value = serde_json::from_str(events).unwrap_or_default();
        if want != got {
            differ.push(format!("{job} ({latest}):\n  recoverFromBuffer {want}\n  recovery_plan     {got}"));
        }
    }
    assert!(differ.is_empty(), "{} of {compared} plans differ (seed {seed}):\n{}", differ.len(), differ.join("\n"));
    eprintln!("recoverFromBuffer parity: {compared} plans equal, {elsewhere} read an earlier file's marker or refused an untrusted file (not compared)");
    assert!(compared * 10 >= jobs * 6, "only {compared} of {jobs} plans could be compared");

    // The plan a pod gets (matching its checkpoint) never knows less than recoverFromBuffer.
    for (job, checkpoint) in ids.iter().zip(&checkpoints) {
        if let Some(cp) = checkpoint {
            let doc = format!(r#"{{"checkpoint_id":"{cp}","step_index":1}}"#);
            c.psql(&format!(
                "UPDATE cortex_buffer.job SET checkpoint = '{doc}',
                        checkpoint_crc = cortex_buffer.checkpoint_crc('{doc}')::bigint::bit(32)::int WHERE id = '{job}'"
            ));
        }
    }
    let (mut superset, mut refused, mut less) = (0, 0, Vec::new());
    for (job, dir) in ids.iter().zip(&dirs) {
        let (latest, want) = theirs.get(dir).cloned().unwrap_or_default();
        let want: Vec<serde_json::Value> = serde_json::from_str(&want).unwrap_or_default();
        let ours = c.psql(&format!(
            "SELECT p->>'mode' || E'\\t' || (SELECT coalesce(jsonb_agg(jsonb_build_array((e->>'seq')::int, e->>'type', (e->>'byte_offset')::int)), '[]')::text
                                   FROM jsonb_array_elements(p->'events_after_marker') e WHERE e->>'session' = '{latest}')
               FROM cortex_buffer.recovery_plan('{job}') p"
        ));
        let (mode, events) = ours.split_once('\t').unwrap_or_default();
        if mode == "checkpoint_only" {
            refused += 1;
            continue;
        }
        let got: Vec<serde_json::Value> = serde_json::from_str(events).unwrap_or_default();
        let missing: Vec<&serde_json::Value> = want.iter().filter(|e| !got.contains(e)).collect();
        if missing.is_empty() {
            superset += 1;
        } else {
            less.push(format!("{job} ({latest}): the plan lacks {missing:?}"));
        }
    }
    assert!(
        less.is_empty(),
        "{} plans know less than recoverFromBuffer (seed {seed}):\n{}",
        less.len(),
        less.join("\n")
    );
    eprintln!(
        "never less than recoverFromBuffer: {superset} plans hold every event it replays, {refused} refuse and say why"
    );
    assert!(superset * 10 >= jobs * 8, "only {superset} of {jobs} plans could be checked");
}
