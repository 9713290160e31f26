//! Pods as the control plane runs them, for the recovery tests: session files written by its
//! own writer code (`oracle/writer.mjs`: BufferWriter and writeEventToBuffer, run in Node), jobs
//! as its dispatcher leaves them, plans read as a pod reads them, and keys computed by the
//! client example's own formula (`oracle/call_key.mjs`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::{Cluster, Rng};

pub const AGENT: &str = "0193a8b2-0000-7000-8000-00000000a9e1";

fn oracle(file: &str) -> String {
    format!("{}/oracle/{file}", env!("CARGO_MANIFEST_DIR"))
}

pub fn uuid(rng: &mut Rng) -> String {
    let h = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
    format!("{}-{}-4{}-8{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// A job in `RUNNING`, as the dispatcher leaves it.
pub fn new_job(c: &Cluster, rng: &mut Rng) -> String {
    let job = uuid(rng);
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at) VALUES ('{job}', '{AGENT}', 'RUNNING', now())"
    ));
    job
}

/// One pod's writer: the control plane's BufferWriter, through Node.
pub struct Pod<'c> {
    c: &'c Cluster,
    pub job: String,
    session: String,
    pub seq: u64,
    skew_ms: i64,
}

impl<'c> Pod<'c> {
    pub fn new(c: &'c Cluster, job: &str, session: &str, skew_ms: i64) -> Pod<'c> {
        Pod { c, job: job.to_owned(), session: session.to_owned(), seq: 0, skew_ms }
    }

    fn command(&self, cut: Option<usize>, pause: Option<&Path>) -> Command {
        let mut cmd = Command::new("node");
        cmd.arg(oracle("writer.mjs")).arg(&self.c.sessions).args([
            &self.job,
            AGENT,
            &self.session,
            &self.seq.to_string(),
            &self.skew_ms.to_string(),
        ]);
        if let Some(n) = cut {
            cmd.arg(n.to_string());
        }
        if let Some(p) = pause {
            cmd.arg(p);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        cmd
    }

    /// Writes `events` (backend OutputEvents); with `cut`, the last one only that many bytes.
    pub fn write(&mut self, events: &[Value], cut: Option<usize>) {
        self.write_raw(&serde_json::to_string(events).unwrap_or_default(), cut);
    }

    /// Writes the events of a JSON array given as text (for inputs serde_json cannot hold: a
    /// lone surrogate, which JSON.parse reads and JSON.stringify writes back as its escape).
    pub fn write_raw(&mut self, events: &str, cut: Option<usize>) {
        let mut child =
            self.command(cut, None).spawn().unwrap_or_else(|e| panic!("node is required for the pod tests: {e}"));
        child.stdin.take().expect("stdin").write_all(events.as_bytes()).expect("feed node");
        let out = child.wait_with_output().expect("node output");
        assert!(out.status.success(), "writer.mjs failed");
        self.seq = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(self.seq);
    }

    /// Writes `events`, the last one in two parts: its first `at` bytes, then `meanwhile()`
    /// (while the line is half-written, as a large append is when something looks at the file),
    /// then the rest.
    pub fn write_around(&mut self, events: &[Value], at: usize, meanwhile: impl FnOnce()) {
        let pause = self.c.base.join(format!("pause-{}-{}", self.job, self.seq));
        let mut child = self
            .command(Some(at), Some(&pause))
            .spawn()
            .unwrap_or_else(|e| panic!("node is required for the pod tests: {e}"));
        let input = serde_json::to_string(events).unwrap_or_default();
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("feed node");
        let paused = pause.with_extension("paused");
        let waited = crate::wait_for(Duration::from_secs(30), || paused.exists());
        assert!(waited.is_some(), "writer.mjs never paused");
        meanwhile();
        std::fs::write(pause.with_extension("go"), b"").expect("release the writer");
        let out = child.wait_with_output().expect("node output");
        assert!(out.status.success(), "writer.mjs failed");
        self.seq = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(self.seq);
    }
}

pub fn call(tool: &str, input: Value) -> Value {
    json!({"type": "tool_use", "toolName": tool, "toolInput": input})
}

pub fn result(tool: &str, output: &str) -> Value {
    json!({"type": "tool_result", "toolName": tool, "output": output, "isError": false})
}

pub fn text(t: &str) -> Value {
    json!({"type": "text", "content": t})
}

/// The job's recovery plan, as a superuser asks for it (no resume is recorded).
pub fn plan(c: &Cluster, job: &str) -> Value {
    let text = c.psql(&format!("SELECT cortex_buffer.recovery_plan('{job}')"));
    crate::keep_answer("recovery_plan", &text);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

pub fn list<'a>(p: &'a Value, key: &str) -> Vec<&'a Value> {
    p[key].as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

pub fn s(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

pub fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

/// `(tool, result)` of the skip list.
pub fn completed(p: &Value) -> Vec<(String, String)> {
    list(p, "completed").iter().map(|e| (s(e, "tool_name"), s(e, "result"))).collect()
}

/// `(tool, input)` of the in-flight or verify list.
pub fn calls(p: &Value, key: &str) -> Vec<(String, String)> {
    list(p, key).iter().map(|e| (s(e, "tool_name"), s(e, "input"))).collect()
}

/// The key the control plane computes in TypeScript (oracle/call_key.mjs).
pub fn node_key(job: &str, checkpoint: &Value, ordinal: u32, tool: &str, input: &Value) -> String {
    node_keys(&[json!([job, checkpoint, ordinal, tool, input]).to_string()]).pop().unwrap_or_default()
}

/// Keys of `[job, checkpoint, ordinal, tool, input]` arrays given as JSON text, one per line.
pub fn node_keys(cases: &[String]) -> Vec<String> {
    let mut child = Command::new("node")
        .arg(oracle("call_key.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let input: String = cases.iter().map(|c| c.clone() + "\n").collect();
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("feed node");
    let out = child.wait_with_output().expect("node output");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// A login for pods: a member of cortex_buffer_agent that presents its job's token.
pub fn pod_login(c: &Cluster) {
    c.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pod_login') THEN CREATE ROLE pod_login LOGIN; END IF; END $$; GRANT cortex_buffer_agent TO pod_login");
}

/// Runs `examples/node/pod-start.mjs` for `job` with `planned` calls, as a pod: its login, its
/// job's token. Returns its lines, each split into words.
pub fn pod_start(c: &Cluster, job: &str, planned: &Value, first_attempt: bool) -> Vec<Vec<String>> {
    pod_start_raw(c, job, &planned.to_string(), first_attempt)
}

/// [`pod_start`] with the planned calls as JSON text (inputs serde_json cannot hold).
pub fn pod_start_raw(c: &Cluster, job: &str, planned: &str, first_attempt: bool) -> Vec<Vec<String>> {
    pod_login(c);
    let file = c.base.join(format!("planned-{job}.json"));
    std::fs::write(&file, planned).expect("write planned calls");
    let token = c.psql(&format!("SELECT cortex_buffer.job_token('{job}')"));
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/node/pod-start.mjs");
    let out = Command::new("node")
        .arg(example)
        .arg(job)
        .arg(&file)
        .env("PGHOST", &c.socket_dir)
        .env("PGPORT", c.port.to_string())
        .env("PGDATABASE", "postgres")
        .env("PGUSER", "pod_login")
        .env("CORTEX_JOB_TOKEN", token.trim())
        .env("CORTEX_FIRST_ATTEMPT", if first_attempt { "1" } else { "0" })
        .output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() || out.status.code() == Some(2), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    text.lines().map(|l| l.split(' ').map(str::to_owned).collect()).collect()
}
