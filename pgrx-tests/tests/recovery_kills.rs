//! Reliability R8: SIGKILLs of a pod while it decides, writes and runs, with the control plane
//! storing checkpoints at the same time.
//!
//! Each job is a step of tool calls (`oracle/pod.mjs`: repeats of one tool and input, a quarter
//! of the calls 64 KiB to 512 KiB, some results as large, appended in parts so a kill tears
//! them). A pod asks `recovery_plan` with its job's token, decides each call with the client
//! example's module (`examples/node/decide.mjs`), runs it against a ledger of side effects (the
//! external system: one effect per idempotency key), writes its session file with the control
//! plane's own writer, and stores a checkpoint itself now and then. The control plane
//! (`oracle/control_plane.mjs`) stores the pod's reported progress with a plain `UPDATE` of the
//! job row, at moments of its own: mid-line, mid-call. Pods are SIGKILLed at random moments,
//! then one runs to the end of the step.
//!
//! Over every job: no call ran under two keys, none was lost, and no key named another call.
//!
//! `CORTEX_R8_KILLS` (default 100) sets the kills, `CORTEX_R8_CALLS` the calls per job (10),
//! `CORTEX_R8_SEED` the seed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use cortex_buffer_e2e::pods::{new_job, pod_login, AGENT};
use cortex_buffer_e2e::{env_size, report, Cluster, Rng};

/// Kills per job before one pod is let run to the end of the step.
const KILLS_PER_JOB: u64 = 6;

fn oracle(file: &str) -> String {
    format!("{}/oracle/{file}", env!("CARGO_MANIFEST_DIR"))
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn node(c: &Cluster, script: &str, user: &str) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(oracle(script))
        .env("PGHOST", &c.socket_dir)
        .env("PGPORT", c.port.to_string())
        .env("PGDATABASE", "postgres")
        .env("PGUSER", user)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Per call of the job: the keys its effects ran under, from the ledger.
fn ledger(work: &Path, calls: usize) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); calls];
    let text = std::fs::read_to_string(work.join("ledger.jsonl")).unwrap_or_default();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        let (Some(key), Some(call)) = (v["key"].as_str(), v["call"].as_u64()) else { continue };
        if let Some(keys) = usize::try_from(call).ok().and_then(|c| out.get_mut(c)) {
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_owned());
            }
        }
    }
    out
}

/// Lines of the job's session file that are not whole JSON, and how many of those are 64 KiB
/// or longer: what the kills tore.
fn torn_lines(c: &Cluster, job: &str) -> (usize, usize) {
    let bytes = std::fs::read(c.sessions.join(job).join("session-001.jsonl")).unwrap_or_default();
    let torn: Vec<&[u8]> =
        bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty() && serde_json::from_slice::<Value>(l).is_err()).collect();
    (torn.len(), torn.iter().filter(|l| l.len() >= 65536).count())
}

#[derive(Default)]
struct Tally {
    jobs: u64,
    kills: u64,
    pods: u64,
    torn: usize,
    torn_big: usize,
    decisions: std::collections::BTreeMap<String, u64>,
    plans_checkpoint_only: u64,
    plans: u64,
}

impl Tally {
    fn read_decisions(&mut self, work: &Path) {
        let text = std::fs::read_to_string(work.join("decisions.jsonl")).unwrap_or_default();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
            if let Some(a) = v["action"].as_str() {
                *self.decisions.entry(a.to_owned()).or_default() += 1;
            }
            if v["plan"].is_object() {
                self.plans += 1;
                if v["plan"]["mode"] == "checkpoint_only" {
                    self.plans_checkpoint_only += 1;
                }
            }
        }
    }
}

#[test]
fn sigkilled_pods_never_run_a_call_twice_or_lose_one() {
    let kills = env_size("CORTEX_R8_KILLS", 100);
    let calls = usize::try_from(env_size("CORTEX_R8_CALLS", 10)).unwrap_or(10);
    let mut rng = Rng::new(env_size("CORTEX_R8_SEED", 0x5eed_0008));
    let c = Cluster::new("r8-pod-kills", &["cortex_buffer.settle_period = '60s'"]);
    c.start();
    c.create_extension();
    pod_login(&c);
    c.psql(
        "CREATE TABLE public.pod_progress (job uuid PRIMARY KEY, done int NOT NULL);
         GRANT SELECT, UPDATE ON public.pod_progress TO pod_login",
    );
    let started = Instant::now();
    let mut t = Tally::default();
    let mut failures = Vec::new();
    while t.kills < kills {
        let job = new_job(&c, &mut rng);
        t.jobs += 1;
        c.psql(&format!("INSERT INTO public.pod_progress VALUES ('{job}', 0)"));
        let work = c.base.join(format!("r8-{job}"));
        std::fs::create_dir_all(&work).expect("work dir");
        let token = c.psql(&format!("SELECT cortex_buffer.job_token('{job}')"));
        let control_plane = KillOnDrop(node(&c, "control_plane.mjs", "postgres").arg(&job).spawn().expect("node"));
        let seed = rng.next_u64() % 1_000_000;
        let mut job_kills = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            t.pods += 1;
            let mut pod = node(&c, "pod.mjs", "pod_login");
            pod.args([c.sessions.display().to_string(), job.clone(), AGENT.to_owned(), work.display().to_string()])
                .args([seed.to_string(), calls.to_string(), if attempt == 1 { "1" } else { "0" }.to_owned()])
                .env("CORTEX_JOB_TOKEN", token.trim());
            let mut child = pod.spawn().expect("node");
            if job_kills < KILLS_PER_JOB && t.kills < kills {
                // Node starts and plans in about 0.2 s here; then a call takes tens of ms.
                std::thread::sleep(rng.millis_below(700) + Duration::from_millis(100));
                if child.try_wait().ok().flatten().is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                    job_kills += 1;
                    t.kills += 1;
                    continue;
                }
            }
            let out = child.wait_with_output().expect("pod output");
            match out.status.code() {
                Some(0) => break,
                code => {
                    failures.push(format!(
                        "job {job}, pod {attempt}: exit {code:?}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                    if code == Some(5) || attempt > 40 {
                        break;
                    }
                }
            }
        }
        drop(control_plane);
        let keys = ledger(&work, calls);
        for (i, k) in keys.iter().enumerate() {
            if k.is_empty() {
                failures.push(format!("job {job}: call {i} never ran ({})", work.display()));
            }
            if k.len() > 1 {
                failures.push(format!("job {job}: call {i} ran under {} keys ({})", k.len(), work.display()));
            }
        }
        let (torn, big) = torn_lines(&c, &job);
        t.torn += torn;
        t.torn_big += big;
        t.read_decisions(&work);
        if !failures.is_empty() {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    assert!(failures.is_empty(), "{}\n(CORTEX_E2E_KEEP=1 keeps the ledgers and files)", failures.join("\n"));
    let decided: Vec<String> = t.decisions.iter().map(|(a, n)| format!("{n} {a}")).collect();
    report(
        "R8",
        "pod SIGKILLs with the control plane's UPDATEs",
        &format!(
            "{} kills over {} jobs of {calls} calls ({} pods, {:.0} s); {} torn lines, {} of them >= 64 KiB; decisions: {}; {} of {} plans checkpoint_only; 0 calls run twice, 0 lost, 0 misnamed",
            t.kills,
            t.jobs,
            t.pods,
            secs,
            t.torn,
            t.torn_big,
            decided.join(", "),
            t.plans_checkpoint_only,
            t.plans
        ),
    );
}
