//! Reliability R1: SIGKILLs during ingestion, of every process that indexes.
//!
//! 8 writers (`writers.rs`) append to their own job's session file, one line in eight in two
//! parts with a pause between (a pod killed there leaves half a line, which the next part
//! completes), now and then past the settle period (so a cut line is judged as a tail, and
//! later re-judged whole). Four kinds of process index those files at once, every one of them
//! through the one indexing pass:
//! - the background worker, tailing `sessions_dir`;
//! - a session looping `index_sessions()`;
//! - a session looping `recovery_plan(job)`, whose catch-up indexes the job's files at call time;
//! - the shipper (`cortex-buffer-ship`), pushing the same directory with `append_session_batch`.
//!
//! At random moments one of them is SIGKILLed: the worker, or the backend of a session running
//! one of the three calls, found in `pg_stat_activity`. (The postmaster takes a killed backend
//! for a crash and reinitialises the cluster, so every process dies with it; the shipper and the
//! loops reconnect.) At the end, for each file and each of its two copies (tailed and pushed),
//! the rows must equal the lines written: as many events as lines, distinct offsets and seqs,
//! the sum of the offsets, no corrupt line.
//!
//! `CORTEX_R1_KILLS` (default 100, about 2 minutes; the full setting is 300) sets the kills,
//! `CORTEX_R1_SEED` the seed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_buffer_e2e::writers::{assert_exactly_once, assert_exactly_once_as, file_name, WriterOptions, Writers};
use cortex_buffer_e2e::{env_size, report, wait_for, Cluster, Rng};

const WRITERS: usize = 8;

/// The shipper binary the workspace builds (scripts/test.sh and scripts/reliability.sh build it).
fn ship_bin() -> PathBuf {
    std::env::var("CORTEX_SHIP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cortex-buffer-ship"))
}

/// Runs `sql` in one session over and over until `stop` (a killed session just starts again).
fn looping(c: &Cluster, sql: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let mut cmd = c.psql_command("postgres");
    for _ in 0..20 {
        cmd.args(["-c", &sql]);
    }
    std::thread::spawn(move || {
        let mut ok = 0;
        while !stop.load(Ordering::SeqCst) {
            match cmd.stdout(Stdio::null()).stderr(Stdio::null()).status() {
                Ok(s) if s.success() => ok += 1,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        ok
    })
}

/// The pid of a backend now running a statement that contains `needle`.
fn backend_running(c: &Cluster, needle: &str) -> Option<i32> {
    c.try_psql(
        "postgres",
        &format!(
            "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()
                AND backend_type = 'client backend' AND query LIKE '%{needle}%' LIMIT 1"
        ),
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a kill is aimed at: the worker, or a backend running one of the three calls.
const TARGETS: [(&str, &str); 4] = [
    ("worker", ""),
    ("index_sessions", "index_sessions("),
    ("catch-up", "recovery_plan("),
    // append_session_batch (the shipper) and append_session_bytes alike.
    ("push", "append_session_"),
];

#[test]
fn sigkills_of_every_indexing_process_lose_and_repeat_no_line() {
    let kills = env_size("CORTEX_R1_KILLS", 100);
    let seed = env_size("CORTEX_R1_SEED", 0x5eed_0001);
    let c = Cluster::new(
        "r1-kills",
        &[
            "listen_addresses = '127.0.0.1'",
            "cortex_buffer.poll_interval = 50",
            "cortex_buffer.settle_period = 200",
            "cortex_buffer.batch_rows = 7",
        ],
    );
    let hba = c.pgdata.join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(&hba, format!("host all shipper 127.0.0.1/32 trust\n{text}")).expect("pg_hba.conf");
    c.start();
    c.create_extension();
    c.psql(
        "CREATE ROLE shipper LOGIN; GRANT cortex_buffer_pusher TO shipper;
         INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('node-r1', 'shipper', true)",
    );
    for k in 0..WRITERS {
        c.psql(&format!(
            "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at)
             VALUES ('{}', '0193a8b2-0000-7000-8000-00000000a9e3', 'RUNNING', now())",
            file_name(k).0
        ));
    }
    assert!(wait_for(Duration::from_secs(60), || c.worker_pid().is_some()).is_some(), "{}", c.log_tail());

    let stop = Arc::new(AtomicBool::new(false));
    // 8 writers, each line in two parts one time in eight, one pause in ten past the settle period.
    let writers = Writers::start(&c.sessions, WriterOptions { gap_ms: 8, ..WriterOptions::new(WRITERS, 1, seed) });
    let loops = [
        looping(&c, "SELECT count(*) FROM cortex_buffer.index_sessions()".into(), stop.clone()),
        looping(
            &c,
            format!(
                "SELECT count(*) FROM cortex_buffer.job j, cortex_buffer.recovery_plan(j.id) WHERE j.id::text LIKE '{}%'",
                &file_name(0).0[..24]
            ),
            stop.clone(),
        ),
    ];
    let dsn = format!("host=127.0.0.1 port={} user=shipper dbname=postgres", c.port);
    let ship_token = c.psql("SELECT cortex_buffer.push_source_token('node-r1')");
    let shipper = |extra: &[&str]| {
        let mut cmd = Command::new(ship_bin());
        cmd.env("CB_SHIP_SOURCE_TOKEN", &ship_token);
        cmd.args(["--sessions-dir", &c.sessions.display().to_string(), "--source", "node-r1", "--dsn", &dsn])
            .args(["--poll-interval", "50", "--chunk-bytes", "700", "--settle", "60"])
            .args(extra);
        cmd
    };
    let ship =
        KillOnDrop(
            shipper(&[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap_or_else(|e| {
                panic!("{}: {e} (build it: cargo build -p cortex_buffer_ship)", ship_bin().display())
            }),
        );

    let mut rng = Rng::new(seed.rotate_left(23));
    let mut killed = [0u64; TARGETS.len()];
    let started = Instant::now();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(100) + rng.millis_below(600));
        let aim = rng.below(TARGETS.len());
        let worker_before = c.worker_pid();
        // A call is between statements now and then: look for it a little while, else kill the
        // worker (always there).
        let found = (aim > 0)
            .then(|| {
                let mut pid = None;
                wait_for(Duration::from_millis(400), || {
                    pid = backend_running(&c, TARGETS[aim].1);
                    pid.is_some()
                });
                pid.map(|p| (aim, p))
            })
            .flatten()
            .or_else(|| c.worker_pid().map(|p| (0, p)));
        let crashes_before = c.log_count("terminated by signal 9");
        let mut landed = false;
        if let Some((target, pid)) = found {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            // What landed is what the postmaster reports: a backend may have ended its session
            // meanwhile (a zombie takes the signal and nothing happens). Then it reinitialises
            // the cluster, and the next kill waits for the killed process gone and a new worker
            // up, so it never lands on a process already being shut down.
            let gone = |pid: i32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
            let _ = wait_for(Duration::from_secs(10), || gone(pid));
            landed =
                wait_for(Duration::from_secs(3), || c.log_count("terminated by signal 9") > crashes_before).is_some();
            if landed {
                killed[target] += 1;
            }
        }
        let up =
            wait_for(Duration::from_secs(60), || c.worker_pid().is_some_and(|w| !landed || Some(w) != worker_before));
        assert!(up.is_some(), "kill {k}: the worker did not come back:\n{}", c.log_tail());
        assert!(started.elapsed() < Duration::from_secs(1200), "kill {k} took too long");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let written = writers.finish();
    let calls: Vec<u64> = loops.into_iter().map(|h| h.join().expect("loop")).collect();
    drop(ship);
    let total: u64 = written.iter().map(|w| w.lines()).sum();

    // Every line is complete now: the shipper sends the rest, and the worker catches up.
    let out = shipper(&["--once", "--settle", "0"]).output().expect("run the shipper");
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));
    c.psql("SELECT cortex_buffer.index_now()");
    let lines_in = |prefix: &str| -> u64 {
        c.try_psql(
            "postgres",
            &format!(
                "SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file WHERE path LIKE '{prefix}%'"
            ),
        )
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
    };
    let tailed = format!("{}/", c.sessions.display());
    let caught_up = wait_for(Duration::from_secs(90), || lines_in(&tailed) >= total && lines_in("push:/") >= total);
    assert!(
        caught_up.is_some(),
        "not caught up: {} tailed and {} pushed of {total}\n{}",
        lines_in(&tailed),
        lines_in("push:/"),
        c.log_tail()
    );

    // Per file and copy: events, distinct offsets, the offsets' sum, distinct seqs, no corrupt line.
    let tailed = assert_exactly_once(&c, &written);
    let pushed = assert_exactly_once_as(&c, &written, |w| format!("push:/{}", w.rel));
    let duplicates = tailed.duplicates + pushed.duplicates;
    let total_kills: u64 = killed.iter().sum();
    assert!(total_kills >= kills * 9 / 10, "too few kills landed: {killed:?} of {kills}");
    assert!(c.log_count("terminated by signal 9") as u64 >= total_kills, "{}", c.log_tail());
    assert!(killed[1] + killed[2] + killed[3] > 0, "no backend was killed, only the worker: {killed:?}");
    assert!(total > 500, "too little written to mean anything: {total}");
    report(
        "R1",
        "SIGKILL during ingestion",
        &format!(
            "{total_kills} kills (worker {}, index_sessions {}, catch-up {}, push {}), {WRITERS} writers, {total} lines written, \
             {} rows tailed, {} rows pushed, {duplicates} duplicates, {} loop calls completed, {:.0} s",
            killed[0],
            killed[1],
            killed[2],
            killed[3],
            tailed.rows,
            pushed.rows,
            calls.iter().sum::<u64>(),
            started.elapsed().as_secs_f64()
        ),
    );
}
