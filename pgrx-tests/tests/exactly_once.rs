//! Exactly once under crashes: writers append to session files (sometimes pausing mid-line)
//! while the worker indexes them; the worker is SIGKILLed at random moments many times, and the
//! cluster is separately stopped with `-m immediate`. At the end every complete line is indexed
//! exactly once: per file, the event count, the number of distinct offsets and the sum of the
//! offsets equal what the writers wrote.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{wait_for, Cluster, Rng};

const FILES: usize = 4;

/// What a writer wrote to one file: each line's offset.
#[derive(Default)]
struct Written {
    offsets: Vec<u64>,
}

fn rel(i: usize) -> String {
    format!("0193a8b2-7c41-7d2e-9f00-00000000000{i}/session_20260223T1430{:02}Z_pod-{i}.jsonl", i)
}

/// Appends lines to every file until `stop`, in chunks that sometimes end mid-line.
fn writer(root: std::path::PathBuf, seed: u64, stop: Arc<AtomicBool>) -> Vec<Written> {
    let mut rng = Rng::new(seed);
    let mut files: Vec<(std::fs::File, u64)> = (0..FILES)
        .map(|i| {
            let p = root.join(rel(i));
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            (std::fs::OpenOptions::new().create(true).append(true).open(p).expect("open"), 0)
        })
        .collect();
    let mut written: Vec<Written> = (0..FILES).map(|_| Written::default()).collect();
    let mut seq = [0u64; FILES];
    while !stop.load(Ordering::Relaxed) {
        let i = rng.below(FILES);
        let (file, size) = &mut files[i];
        let line = format!(
            "{{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-02-23T14:30:22.000Z\",\"job_id\":\"0193a8b2-7c41-7d2e-9f00-00000000000{i}\",\"seq\":{},\"pad\":\"{}\"}}\n",
            seq[i],
            "x".repeat(rng.below(200))
        );
        seq[i] += 1;
        written[i].offsets.push(*size);
        let bytes = line.as_bytes();
        if rng.below(8) == 0 {
            // A write that stops mid-line; the rest follows shortly (now and then after the
            // settle period, so the cut line is judged and later re-judged whole).
            let cut = 1 + rng.below(bytes.len() - 1);
            file.write_all(&bytes[..cut]).expect("write");
            std::thread::sleep(if rng.below(10) == 0 { Duration::from_millis(400) } else { rng.millis_below(30) });
            file.write_all(&bytes[cut..]).expect("write");
        } else {
            file.write_all(bytes).expect("write");
        }
        *size += bytes.len() as u64;
        std::thread::sleep(rng.millis_below(4));
    }
    written
}

fn wait_running(c: &Cluster) {
    let up = wait_for(Duration::from_secs(60), || c.worker_pid().is_some());
    assert!(up.is_some(), "worker did not come back:\n{}", c.log_tail());
}

#[test]
fn every_line_is_indexed_exactly_once_through_kills_and_immediate_shutdowns() {
    kill_loop("exactly-once", &[], "CORTEX_CRASH_KILLS", 10);
}

/// The same with two indexer processes, either of which may be killed, and files in batches.
#[test]
fn every_line_is_indexed_exactly_once_with_two_workers_through_kills() {
    kill_loop("exactly-once-2w", &["cortex_buffer.workers = 2"], "CORTEX_CRASH_KILLS_2W", 6);
}

fn kill_loop(name: &str, extra: &[&str], kills_var: &str, default_kills: u64) {
    let mut conf =
        vec!["cortex_buffer.poll_interval = 50", "cortex_buffer.settle_period = 200", "cortex_buffer.batch_rows = 7"];
    conf.extend_from_slice(extra);
    let c = Cluster::new(name, &conf);
    c.start();
    c.create_extension();
    wait_running(&c);
    let seed: u64 = std::env::var("CORTEX_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0dd_ba11);
    let kills: u64 = std::env::var(kills_var).ok().and_then(|s| s.parse().ok()).unwrap_or(default_kills);
    let stop = Arc::new(AtomicBool::new(false));
    let root = c.sessions.clone();
    let flag = Arc::clone(&stop);
    let appender = std::thread::spawn(move || writer(root, seed, flag));

    let mut rng = Rng::new(seed.rotate_left(17));
    let started = Instant::now();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(100) + rng.millis_below(700));
        let pids = c.worker_pids();
        if let Some(pid) = pids.get(rng.below(pids.len().max(1))) {
            // The worker may be restarting already; a failed kill is fine.
            let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
        // The postmaster treats a killed backend as a crash: it reinitialises the cluster.
        std::thread::sleep(Duration::from_millis(200));
        wait_running(&c);
        assert!(started.elapsed() < Duration::from_secs(600), "kill {k} took too long");
    }
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200) + rng.millis_below(600));
        c.stop("immediate");
        c.start();
        wait_running(&c);
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let written = appender.join().expect("writer");

    c.psql("SELECT cortex_buffer.index_now()");
    let total: usize = written.iter().map(|w| w.offsets.len()).sum();
    let caught_up = wait_for(Duration::from_secs(60), || {
        c.try_psql("postgres", "SELECT bytes_pending || ' ' || files_pending_tail || ' ' || events_indexed FROM cortex_buffer.indexer_status")
            .is_ok_and(|s| s == format!("0 0 {total}"))
    });
    assert!(
        caught_up.is_some(),
        "not caught up: {}\n{}",
        c.psql("SELECT row_to_json(s) FROM cortex_buffer.indexer_status s"),
        c.log_tail()
    );

    for (i, w) in written.iter().enumerate() {
        let want = format!("{} {} {} 0", w.offsets.len(), w.offsets.len(), w.offsets.iter().sum::<u64>());
        let got = c.psql(&format!(
            "SELECT count(*) || ' ' || count(DISTINCT byte_offset) || ' ' || coalesce(sum(byte_offset), 0) || ' ' ||
                    (SELECT count(*) FROM cortex_buffer.corrupt_line k WHERE k.file_id = f.file_id)
               FROM cortex_buffer.session_file f LEFT JOIN cortex_buffer.event e USING (file_id)
              WHERE f.path = '{}' GROUP BY f.file_id",
            c.sessions.join(rel(i)).display()
        ));
        assert_eq!(got, want, "file {i}: events, distinct offsets, offset sum, corrupt lines");
    }
    let shape = c.psql(
        "SELECT sum(valid_lines) || ' lines, generations up to ' || max(generation) FROM cortex_buffer.session_file",
    );
    eprintln!("exactly once held over {shape}");
    assert!(total > 200, "too little written to mean anything: {total}");
    // The worker really was killed and restarted each time.
    assert!(c.log_count("terminated by signal 9") >= kills as usize, "{}", c.log_tail());
}
