//! A time-boxed fuzz loop on stable Rust: proptest's strategies generate the inputs and its
//! value trees shrink a failing one; a panic is a finding like a failed check.
//!
//! Environment: `CORTEX_FUZZ_SECONDS` (per target; default 2 in a plain `cargo test`, 10 from
//! scripts/fuzz.sh, 120 in the full setting), `CORTEX_FUZZ_SEED` (default: from
//! the clock, printed so a run can be repeated), `CORTEX_FUZZ_SAVE` (generated inputs kept per
//! target for the replay; default 2000), `CORTEX_FUZZ_CORPUS_OUT` (where they go), and
//! `CORTEX_RELIABILITY_REPORT` (the reliability suite's figures file).

use std::cell::Cell;
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, Instant};

use proptest::strategy::{BoxedStrategy, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::corpus;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Silences the panic message of a checked input (it is reported as a finding instead).
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                default(info);
            }
        }));
    });
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}

/// Runs `check` on `v`; a panic is an error carrying its message.
fn run<T>(check: &dyn Fn(&T) -> Result<(), String>, v: &T) -> Result<(), String> {
    QUIET.with(|q| q.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| check(v)));
    QUIET.with(|q| q.set(false));
    match r {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panic: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        )),
    }
}

/// The first words of a failure: findings with the same are one finding.
fn class(msg: &str) -> String {
    msg.split([':', '(', '\n']).next().unwrap_or(msg).chars().take(60).collect()
}

pub struct Outcome {
    pub target: &'static str,
    pub executions: u64,
    pub findings: Vec<String>,
    pub saved: usize,
    pub seed: u64,
}

impl Outcome {
    /// Prints the figures, fails on any finding, then records the reliability line.
    pub fn finish(self) {
        let figures = format!("{} executions, {} findings", self.executions, self.findings.len());
        eprintln!(
            "[R4] fuzz {}: {figures} (seed {}, {} inputs saved to {})",
            self.target,
            self.seed,
            self.saved,
            corpus::scratch_dir().display()
        );
        assert!(self.findings.is_empty(), "fuzz {}: findings:\n{}", self.target, self.findings.join("\n\n"));
        assert!(self.executions > 0, "fuzz {}: nothing ran", self.target);
        if let Ok(path) = std::env::var("CORTEX_RELIABILITY_REPORT") {
            let line = format!("R4\tfuzz {}\t{figures}\n", self.target);
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            std::io::Write::write_all(&mut f, line.as_bytes()).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
    }
}

/// Fuzzes `check` with inputs from `strategy` for the time budget. `bytes` gives an input's
/// line(s) for the corpus (`None`: nothing to save).
pub fn fuzz<T: Debug + Clone>(
    target: &'static str,
    strategy: BoxedStrategy<T>,
    bytes: &dyn Fn(&T) -> Option<Vec<u8>>,
    check: &dyn Fn(&T) -> Result<(), String>,
) -> Outcome {
    install_quiet_hook();
    let budget = Duration::from_secs(env_u64("CORTEX_FUZZ_SECONDS", 2));
    let keep = usize::try_from(env_u64("CORTEX_FUZZ_SAVE", 2000)).unwrap_or(2000);
    let seed = env_u64(
        "CORTEX_FUZZ_SEED",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1),
    );
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, b) in target.bytes().enumerate() {
        key[8 + i % 24] ^= b;
    }
    // A time-boxed loop draws far more inputs than a proptest run: its filters' rejects add up
    // over the whole loop, so the per-run limits (65 536 by default) would end a long budget
    // with "Too many local rejects".
    let config = Config { max_local_rejects: u32::MAX, max_global_rejects: u32::MAX, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    // A reservoir sample of the generated inputs, for the replay.
    let mut saved: Vec<Vec<u8>> = Vec::new();
    let mut pick = seed | 1;
    let mut executions = 0u64;
    let mut findings: Vec<String> = Vec::new();
    let mut classes: Vec<String> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget && findings.len() < 5 {
        let mut tree = match strategy.new_tree(&mut runner) {
            Ok(t) => t,
            Err(e) => panic!("{target}: generator failed: {e}"),
        };
        let value = tree.current();
        executions += 1;
        if let Some(b) = bytes(&value) {
            pick ^= pick << 13;
            pick ^= pick >> 7;
            pick ^= pick << 17;
            if saved.len() < keep {
                saved.push(b);
            } else if let Some(slot) = saved.get_mut((pick % executions) as usize) {
                *slot = b;
            }
        }
        let Err(first) = run(check, &value) else { continue };
        // Shrink: simplify while it still fails, step back when it passes.
        let (mut worst, mut msg) = (value, first);
        let shrink_until = Instant::now() + Duration::from_secs(30);
        let mut steps = 0;
        if tree.simplify() {
            while steps < 5000 && Instant::now() < shrink_until {
                steps += 1;
                let v = tree.current();
                match run(check, &v) {
                    Err(m) => {
                        worst = v;
                        msg = m;
                        if !tree.simplify() {
                            break;
                        }
                    }
                    Ok(()) => {
                        if !tree.complicate() {
                            break;
                        }
                    }
                }
            }
        }
        let c = class(&msg);
        if classes.contains(&c) {
            continue;
        }
        classes.push(c);
        let mut report = format!("{target}: {msg}\n  input (shrunk in {steps} steps): {worst:?}");
        if let Some(b) = bytes(&worst) {
            report.push_str(&format!("\n  hex: {}", corpus::to_hex(&b)));
            let name = format!("{target}-{}-{}", seed, findings.len());
            for dir in [corpus::repository_dir().join("found"), corpus::scratch_dir()] {
                match corpus::write_hex(&dir, &name, &format!("{target}: {}", class(&msg)), std::slice::from_ref(&b)) {
                    Ok(p) => report.push_str(&format!("\n  saved: {}", p.display())),
                    Err(e) => report.push_str(&format!("\n  not saved in {}: {e}", dir.display())),
                }
            }
        }
        eprintln!("[R4] finding: {report}");
        findings.push(report);
    }
    let n = saved.len();
    if n > 0 {
        let header = format!("{target}: {n} of {executions} generated inputs, seed {seed}");
        if let Err(e) = corpus::write_hex(&corpus::scratch_dir(), target, &header, &saved) {
            eprintln!("[R4] could not save the generated inputs: {e}");
        }
    }
    Outcome { target, executions, findings, saved: n, seed }
}
