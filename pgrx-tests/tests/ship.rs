//! Push ingestion end to end: the `cortex-buffer-ship` binary against a real cluster on
//! loopback, as a node's shipper runs. The cluster's worker tails the same directory the
//! shipper pushes, so every file is indexed twice, once by each path, and the two must agree
//! row for row.
//!
//! `CORTEX_SHIP_KILLS` (default 10; 50 by hand) sets how many times the shipper is killed with
//! SIGKILL while 8 files grow; the database is restarted twice during the same run.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cortex_buffer_e2e::{wait_for, Cluster, Rng};

const AGENT: &str = "0193a8b2-0000-7000-8000-00000000a9e2";

/// The shipper binary the workspace builds (scripts/test.sh builds it first).
fn ship_bin() -> PathBuf {
    std::env::var("CORTEX_SHIP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cortex-buffer-ship"))
}

fn cluster(name: &str) -> Cluster {
    let c = Cluster::new(
        name,
        &[
            "listen_addresses = '127.0.0.1'",
            "cortex_buffer.settle_period = '1s'",
            "password_encryption = 'scram-sha-256'",
        ],
    );
    // Loopback TCP for the shipper, with a password, as a remote node connects.
    let hba = c.pgdata.join("pg_hba.conf");
    let mut text = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    text = format!("host all shipper 127.0.0.1/32 scram-sha-256\n{text}");
    std::fs::write(&hba, text).expect("write pg_hba.conf");
    c.start();
    c.create_extension();
    c.psql("CREATE ROLE shipper LOGIN PASSWORD 'ship-secret'");
    c.psql("GRANT cortex_buffer_pusher TO shipper");
    c
}

fn dsn(c: &Cluster) -> String {
    format!("host=127.0.0.1 port={} user=shipper password=ship-secret dbname=postgres", c.port)
}

/// The source's token, as the control plane gets it for the shipper (registering the source,
/// with no login and no grant yet, if a test starts its shipper first).
fn source_token(c: &Cluster, source: &str) -> String {
    c.psql(&format!(
        "INSERT INTO cortex_buffer.push_source (source) VALUES ('{source}') ON CONFLICT DO NOTHING;
         SELECT cortex_buffer.push_source_token('{source}')"
    ))
}

fn shipper(c: &Cluster, dir: &Path, source: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(ship_bin());
    cmd.env("CB_SHIP_SOURCE_TOKEN", source_token(c, source));
    cmd.args(["--sessions-dir", &dir.display().to_string(), "--source", source, "--dsn", &dsn(c)])
        .args(["--poll-interval", "50", "--report-every", "5"])
        .args(extra);
    cmd
}

fn start_shipper(c: &Cluster, dir: &Path, source: &str, extra: &[&str]) -> Child {
    shipper(c, dir, source, extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (build it: cargo build -p cortex_buffer_ship)", ship_bin().display()))
}

/// A running shipper, SIGKILLed and reaped when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the shipper with `--once` to its end; panics with its log when it fails.
fn ship_once(c: &Cluster, dir: &Path, source: &str, extra: &[&str]) {
    let out = shipper(c, dir, source, extra).arg("--once").output().expect("run the shipper");
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn job_id(n: u64) -> String {
    format!("0193a8b2-7c41-7d2e-9f00-{n:012}")
}

/// A line the way a spike writer writes one, unique by (file, n).
fn line(job: &str, file: usize, n: u64) -> String {
    format!(
        r#"{{"type":"TOOL_START","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{job}","session_id":"s{file}","seq":{n},"tool_name":"web_search","input_summary":"file {file} line {n} ünïcödé"}}"#
    )
}

/// Per relpath: "count md5" of its rows (offset, line and payload), by each path.
fn digests(c: &Cluster, prefix: &str) -> Vec<(String, String)> {
    let out = c.psql(&format!(
        "SELECT regexp_replace(f.path, '^.*/([^/]+/[^/]+)$', '\\1') || ' ' || count(e.*) || ' '
                || md5(string_agg(e.byte_offset || ':' || e.line_no || ':' || e.payload::text, ',' ORDER BY e.byte_offset))
           FROM cortex_buffer.session_file f JOIN cortex_buffer.event e USING (file_id)
          WHERE f.path LIKE '{prefix}%' GROUP BY f.path ORDER BY 1"
    ));
    out.lines().filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned()))).collect()
}

#[test]
fn the_shipper_killed_and_the_database_restarted_lose_and_repeat_no_line() {
    let kills: usize = std::env::var("CORTEX_SHIP_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = std::env::var("CORTEX_SHIP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(19);
    eprintln!("ship kill loop: {kills} kills, seed {seed}");
    let c = cluster("ship-kill");
    c.psql("INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('node-k', 'shipper', true)");
    let dir = c.sessions.clone();

    // 8 writers append lines, each written in two parts with a pause between (a pod killed
    // there leaves half a line, which the next part completes).
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (stop, written, dir) = (stop.clone(), written.clone(), dir.clone());
            std::thread::spawn(move || {
                let job = job_id(w as u64);
                let path = dir.join(&job).join(format!("session_20260223T1430{w:02}Z_pod-{w}.jsonl"));
                std::fs::create_dir_all(path.parent().expect("job dir")).expect("mkdir");
                let mut rng = Rng::new(seed ^ (w as u64 + 1));
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let text = format!("{}\n", line(&job, w, n));
                    let cut = 1 + rng.below(text.len() - 1);
                    let mut f = OpenOptions::new().create(true).append(true).open(&path).expect("open");
                    f.write_all(&text.as_bytes()[..cut]).expect("write");
                    std::thread::sleep(rng.millis_below(15));
                    f.write_all(&text.as_bytes()[cut..]).expect("write");
                    n += 1;
                    written.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(rng.millis_below(10));
                }
                n
            })
        })
        .collect();

    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut restarts = 0;
    for k in 0..kills {
        let mut child = start_shipper(&c, &dir, "node-k", &["--chunk-bytes", "700", "--batch", "4", "--settle", "60"]);
        std::thread::sleep(Duration::from_millis(50) + rng.millis_below(250));
        child.kill().expect("SIGKILL the shipper");
        let _ = child.wait();
        // The database goes down twice along the way, with the shipper running against it.
        if (k == kills / 3 || k == 2 * kills / 3) && restarts < 2 {
            let mut child = start_shipper(&c, &dir, "node-k", &["--chunk-bytes", "700", "--settle", "60"]);
            std::thread::sleep(Duration::from_millis(100));
            c.stop("fast");
            std::thread::sleep(Duration::from_millis(200));
            c.start();
            restarts += 1;
            std::thread::sleep(Duration::from_millis(300));
            child.kill().expect("SIGKILL the shipper");
            let _ = child.wait();
        }
    }
    stop.store(true, Ordering::SeqCst);
    let lines: Vec<u64> = writers.into_iter().map(|h| h.join().expect("writer")).collect();
    let total: u64 = lines.iter().sum();
    // Everything written is complete now: push the rest (final once settled) and let the
    // worker index its own copy.
    ship_once(&c, &dir, "node-k", &["--settle", "0"]);
    let indexed = |prefix: &str| -> u64 {
        c.psql(&format!(
            "SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file WHERE path LIKE '{prefix}%'"
        ))
        .parse()
        .unwrap_or(0)
    };
    let tailed_prefix = format!("{}/", dir.display());
    wait_for(Duration::from_secs(60), || indexed(&tailed_prefix) >= total)
        .unwrap_or_else(|| panic!("the worker indexed {} of {total} lines", indexed(&tailed_prefix)));
    let pushed = indexed("push:/");
    let dupes = c.psql(
        "SELECT count(*) FROM (SELECT payload FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
          WHERE f.path LIKE 'push:/%' GROUP BY payload HAVING count(*) > 1) d",
    );
    eprintln!(
        "ship kill loop: {kills} kills, {restarts} database restarts, {total} lines written, {pushed} pushed lines indexed, {dupes} duplicates, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(restarts, 2.min(kills), "the database was restarted");
    assert_eq!(pushed, total, "every complete line pushed once");
    assert_eq!(dupes, "0", "no line twice");
    assert_eq!(
        c.psql("SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE 'push:/%'"),
        "8",
        "one file per writer: no file was started twice"
    );
    let pushed = digests(&c, "push:/");
    let tailed = digests(&c, &tailed_prefix);
    assert_eq!(pushed.len(), 8);
    assert_eq!(pushed, tailed, "the pushed rows are the tailed rows, offset for offset");
}

#[test]
fn a_shipper_outside_its_grant_is_refused_and_resumes_once_granted() {
    let c = cluster("ship-grant");
    c.psql("INSERT INTO cortex_buffer.push_source (source, login) VALUES ('pod-g', 'shipper')");
    let node = tempdir("ship-grant-node");
    let job = job_id(77);
    std::fs::create_dir_all(node.join(&job)).expect("mkdir");
    std::fs::write(node.join(&job).join("session-001.jsonl"), format!("{}\n", line(&job, 0, 0))).expect("write");
    ship_once(&c, &node, "pod-g", &["--settle", "0"]);
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE 'push:/%'"), "0");
    c.psql(&format!("INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('pod-g', '{job}')"));
    ship_once(&c, &node, "pod-g", &["--settle", "0"]);
    assert_eq!(c.psql("SELECT sum(valid_lines) FROM cortex_buffer.session_file WHERE path LIKE 'push:/%'"), "1");
    // The login cannot read what it pushed, or anything else.
    let denied = Command::new("runuser")
        .args(["-u", "postgres", "--", "psql", "-X", "-A", "-t", "-d"])
        .arg(format!("{} sslmode=disable", dsn(&c)))
        .args(["-c", "SELECT count(*) FROM cortex_buffer.event"])
        .output()
        .expect("psql");
    assert!(String::from_utf8_lossy(&denied.stderr).contains("permission denied"), "{denied:?}");
    let _ = std::fs::remove_dir_all(&node);
}

fn tempdir(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("cb-e2e-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("mkdir");
    p
}

/// One pod's writer: the control plane's BufferWriter, through Node (pgrx-tests/oracle).
fn node_write(dir: &Path, job: &str, session: &str, first_seq: u64, events: &[Value], cut: Option<usize>) -> u64 {
    let mut cmd = Command::new("node");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/writer.mjs")).arg(dir).args([
        job,
        AGENT,
        session,
        &first_seq.to_string(),
        "0",
    ]);
    if let Some(n) = cut {
        cmd.arg(n.to_string());
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("node is required");
    let input = serde_json::to_string(events).unwrap_or_default();
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("feed node");
    let out = child.wait_with_output().expect("node output");
    assert!(out.status.success(), "writer.mjs failed");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(first_seq)
}

fn call(tool: &str, input: Value) -> Value {
    json!({"type": "tool_use", "toolName": tool, "toolInput": input})
}

fn result(tool: &str, output: &str) -> Value {
    json!({"type": "tool_result", "toolName": tool, "output": output, "isError": false})
}

#[test]
fn a_job_tailed_on_one_node_and_shipped_from_another_recovers_across_both() {
    let c = cluster("ship-mixed");
    let job = job_id(4242);
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at) VALUES ('{job}', '{AGENT}', 'RUNNING', now())"
    ));
    c.psql(&format!(
        "INSERT INTO cortex_buffer.push_source (source, login) VALUES ('node-2', 'shipper');
         INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('node-2', '{job}')"
    ));
    // Pod 1 runs on the database's node: its volume is tailed. It checkpoints step 1, sends an
    // email, and dies.
    c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"));
    node_write(
        &c.sessions,
        &job,
        "s1",
        0,
        &[call("send_email", json!({"to": "a@example.com"})), result("send_email", "sent")],
        None,
    );
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    // Pod 2 is rescheduled on another node: it starts at session-001.jsonl again, in its own
    // volume, shipped. It charges a card and dies mid-line.
    let node2 = tempdir("ship-mixed-node2");
    node_write(
        &node2,
        &job,
        "s2",
        0,
        &[call("read_file", json!({"p": "x"})), result("read_file", "X"), call("charge_card", json!({"amount": 5}))],
        Some(30),
    );
    ship_once(&c, &node2, "node-2", &["--settle", "60"]);
    let plan: Value = cortex_buffer_e2e::pods::plan(&c, &job);
    let sessions: Vec<String> = plan["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["path"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(sessions.len(), 2, "{plan}");
    assert!(!sessions[0].starts_with("push:"), "the tailed file first (it appeared first): {sessions:?}");
    assert!(sessions[1].starts_with("push:/"), "{sessions:?}");
    assert_eq!(plan["sessions"][1]["pushed"]["source"], json!("node-2"));
    let tools = |key: &str| -> Vec<String> {
        plan[key].as_array().into_iter().flatten().map(|e| e["tool_name"].as_str().unwrap_or("").to_owned()).collect()
    };
    assert_eq!(tools("completed"), ["send_email", "read_file"], "{plan}");
    assert_eq!(plan["fresh"]["stale"], json!(false), "{plan}");
    // The cut line is held, not committed: the shipper reported the whole file, so nothing is
    // unpushed, and the plan does not claim the cut call is done.
    assert_eq!(plan["sessions"][1]["pushed"]["unpushed_bytes"], json!(0), "{plan}");
    assert!(!tools("completed").contains(&"charge_card".to_owned()));
    let _ = std::fs::remove_dir_all(&node2);
}

#[test]
fn a_source_over_its_rate_limit_is_refused_and_the_shipper_catches_up() {
    let c = Cluster::new("ship-rate", &["cortex_buffer.push_rate_limit = '4kB'", "listen_addresses = '127.0.0.1'"]);
    c.start();
    c.create_extension();
    let job = job_id(5150);
    c.psql(&format!(
        "INSERT INTO cortex_buffer.push_source (source, login) VALUES ('rated', current_user);
         INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('rated', '{job}')"
    ));
    // 3 kB, then 3 kB more in the same second: over 4 kB/s, refused with 53400 and a HINT.
    let chunk = |start: usize| {
        format!(
            "SELECT action FROM cortex_buffer.append_session_bytes('rated', '{job}/session-001.jsonl', {start},
                    convert_to(repeat('{{\"type\":\"X\",\"pad\":\"{}\"}}' || E'\\n', 1), 'UTF8'), 'id')",
            "p".repeat(3000)
        )
    };
    // Five 3 kB pushes in quick succession: at least two fall in one second, and the second of
    // those is refused (the same chunk again: a replay counts against the limit too).
    let outcomes: Vec<Result<String, String>> = (0..5).map(|_| c.try_psql("postgres", &chunk(0))).collect();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    let refused = outcomes.iter().filter_map(|o| o.as_ref().err()).collect::<Vec<_>>();
    assert!(!refused.is_empty(), "{outcomes:?}");
    assert!(refused.iter().all(|e| e.contains("push_rate_limit") && e.contains("HINT")), "{refused:?}");
    // The shipper backs off and gets everything through, a second at a time.
    let node = tempdir("ship-rate-node");
    std::fs::create_dir_all(node.join(&job)).expect("mkdir");
    let lines: String = (0..40).map(|n| format!("{}\n", line(&job, 1, n))).collect();
    std::fs::write(node.join(&job).join("session-002.jsonl"), &lines).expect("write");
    let out = Command::new(ship_bin())
        .env("CB_SHIP_SOURCE_TOKEN", source_token(&c, "rated"))
        .args(["--sessions-dir", &node.display().to_string(), "--source", "rated", "--once", "--settle", "0"])
        .args([
            "--chunk-bytes",
            "2000",
            "--dsn",
            &format!("host={} port={} user=postgres dbname=postgres", c.socket_dir.display(), c.port),
        ])
        .output()
        .expect("run the shipper");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pushed = c.psql(&format!(
        "SELECT valid_lines FROM cortex_buffer.session_file WHERE path = 'push:/{job}/session-002.jsonl'"
    ));
    // --once stops after a walk sends nothing; a refused push counts as sent, so it may take
    // more than one run: run it until the file is complete.
    let mut pushed: i64 = pushed.parse().unwrap_or(0);
    for _ in 0..20 {
        if pushed == 40 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        let out = Command::new(ship_bin())
            .env("CB_SHIP_SOURCE_TOKEN", source_token(&c, "rated"))
            .args(["--sessions-dir", &node.display().to_string(), "--source", "rated", "--once", "--settle", "0"])
            .args([
                "--chunk-bytes",
                "2000",
                "--dsn",
                &format!("host={} port={} user=postgres dbname=postgres", c.socket_dir.display(), c.port),
            ])
            .output()
            .expect("run the shipper");
        assert!(out.status.success());
        pushed = c
            .psql(&format!(
                "SELECT valid_lines FROM cortex_buffer.session_file WHERE path = 'push:/{job}/session-002.jsonl'"
            ))
            .parse()
            .unwrap_or(0);
    }
    assert_eq!(pushed, 40, "every line got through, at the source's pace");
    let _ = std::fs::remove_dir_all(&node);
}

#[test]
fn a_file_rewritten_in_place_while_shipped_becomes_a_new_file() {
    let c = cluster("ship-rewrite");
    c.psql("INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('node-r', 'shipper', true)");
    let node = tempdir("ship-rewrite-node");
    let job = job_id(808);
    std::fs::create_dir_all(node.join(&job)).expect("mkdir");
    let path = node.join(&job).join("session-001.jsonl");
    let old: String = (0..5).map(|n| format!("{}\n", line(&job, 1, n))).collect();
    std::fs::write(&path, &old).expect("write");
    // Killed when the test ends, failed or not: a panic must not leave a shipper running.
    let child = KillOnDrop(start_shipper(&c, &node, "node-r", &["--watch", "poll", "--settle", "60"]));
    let pushed = |suffix: &str| -> String {
        c.psql(&format!(
            "SELECT coalesce(string_agg(valid_lines::text || '/' || corrupt_lines, ',' ORDER BY path), '')
               FROM cortex_buffer.session_file WHERE path LIKE 'push:/{job}/session-001.jsonl{suffix}'"
        ))
    };
    wait_for(Duration::from_secs(20), || pushed("") == "5/0").unwrap_or_else(|| panic!("first file: {}", pushed("")));
    // The pod's volume is reused: the file is overwritten from its first byte, in place (same
    // inode, never shorter than before), with another session's lines, more of them.
    let new: String = (0..12).map(|n| format!("{}\n", line(&job, 2, n))).collect();
    {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new().write(true).open(&path).expect("open");
        f.write_all_at(new.as_bytes(), 0).expect("overwrite");
    }
    wait_for(Duration::from_secs(20), || pushed("#%") == "12/0")
        .unwrap_or_else(|| panic!("the rewrite is a new file: {} / {}", pushed(""), pushed("#%")));
    drop(child);
    assert_eq!(pushed(""), "5/0", "the first file kept its own lines, nothing of the rewrite");
    let tail = c.psql(&format!(
        "SELECT string_agg(e.payload->>'session_id', ',' ORDER BY e.byte_offset) FROM cortex_buffer.event e
           JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path LIKE 'push:/{job}/session-001.jsonl#%'"
    ));
    assert_eq!(tail, ["s2"; 12].join(","), "the new file is the rewrite, from its first byte");
    let _ = std::fs::remove_dir_all(&node);
}

#[test]
fn concurrent_first_pushes_of_one_file_start_it_once() {
    let c = Cluster::new("ship-race", &[]);
    c.start();
    c.create_extension();
    let job = job_id(9090);
    c.psql(&format!(
        "INSERT INTO cortex_buffer.push_source (source, login) VALUES ('race', current_user);
         INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('race', '{job}')"
    ));
    // Two shippers for one node (a rollout overlaps the old pod and the new): each round, four
    // sessions send the same first chunk of a new file at once.
    for round in 0..8 {
        let push = format!(
            "SELECT action FROM cortex_buffer.append_session_bytes('race', '{job}/session-{round:03}.jsonl', 0,
                    convert_to('{}' || E'\\n{}\\n', 'UTF8'), 'same-identity')",
            line(&job, round, 0),
            line(&job, round, 1)
        );
        let outcomes = cortex_buffer_e2e::psql_concurrently(&c, "postgres", vec![push; 4]);
        assert!(outcomes.iter().all(Result::is_ok), "round {round}: {outcomes:?}");
    }
    assert_eq!(
        c.psql(&format!(
            "SELECT count(*) || ' files, ' || sum(valid_lines) || ' lines, ' || count(*) FILTER (WHERE path LIKE '%#%') || ' renumbered'
               FROM cortex_buffer.session_file WHERE path LIKE 'push:/{job}/%'"
        )),
        "8 files, 16 lines, 0 renumbered",
        "each file started once, its lines indexed once"
    );
    assert_eq!(c.psql(&format!("SELECT count(*) FROM cortex_buffer.pushed_file WHERE job_id = '{job}'")), "8");
}

#[test]
fn a_shipper_pushes_one_call_per_file_to_a_server_without_the_batch_function() {
    // A DaemonSet updated before the server: an older server has no append_session_batch
    // (here hidden by a rename, with everything else current).
    let c = cluster("ship-old");
    const BATCH: &str =
        "cortex_buffer.append_session_batch(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text)";
    c.psql(&format!("ALTER FUNCTION {BATCH} RENAME TO append_session_batch_hidden"));
    c.psql("INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('pod-o', 'shipper', true)");
    let node = tempdir("ship-old-node");
    let write = |job: &str, n: u64| {
        std::fs::create_dir_all(node.join(job)).expect("mkdir");
        let text: String = (0..n).map(|i| format!("{}\n", line(job, 0, i))).collect();
        std::fs::write(node.join(job).join("session-001.jsonl"), text).expect("write");
    };
    let run = || {
        let out = shipper(&c, &node, "pod-o", &["--settle", "0"]).arg("--once").output().expect("run the shipper");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for j in 0..3 {
        write(&job_id(300 + j), 5);
    }
    let (code, log) = run();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("no append_session_batch"), "{log}");
    assert_eq!(c.psql("SELECT sum(valid_lines) FROM cortex_buffer.session_file WHERE path LIKE 'push:/%'"), "15");
    // With the function back, the shipper sends batches; the files go on where they stood.
    c.psql("ALTER FUNCTION cortex_buffer.append_session_batch_hidden(text, text[], bigint[], bytea[], text[], boolean[], bigint[], text) RENAME TO append_session_batch");
    for j in 0..3 {
        write(&job_id(300 + j), 8);
    }
    let (code, log) = run();
    assert!(code == Some(0) && !log.contains("no append_session_batch"), "{log}");
    assert_eq!(c.psql("SELECT sum(valid_lines) FROM cortex_buffer.session_file WHERE path LIKE 'push:/%'"), "24");
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.event"), "24");
    assert_eq!(c.psql("SELECT sum(pushes) > 0 FROM cortex_buffer.pushed_file"), "t");
    // A server that refuses the session itself (here: where files stand) ends --once with 1,
    // promptly, instead of asking again and again.
    c.psql("REVOKE EXECUTE ON FUNCTION cortex_buffer.pushed_offsets(text, text) FROM cortex_buffer_pusher");
    let started = std::time::Instant::now();
    let (code, log) = run();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("refused; asking again later") && log.contains("42501"), "{log}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&node);
}

/// Sends `sig` (STOP, CONT) to a running shipper.
fn signal(child: &Child, sig: &str) {
    let ok =
        Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {}", child.id());
}

fn plan_of(c: &Cluster, job: &str) -> Value {
    cortex_buffer_e2e::pods::plan(c, job)
}

/// The tools of a plan's entries under `key` (completed, in_flight, verify).
fn tools_in(plan: &Value, key: &str) -> Vec<String> {
    plan[key].as_array().into_iter().flatten().map(|e| e["tool_name"].as_str().unwrap_or("").to_owned()).collect()
}

/// A job of this test, RUNNING since now, that `source` may push.
fn pushed_job(c: &Cluster, n: u64, source: &str) -> String {
    let job = job_id(n);
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at) VALUES ('{job}', '{AGENT}', 'RUNNING', now());
         INSERT INTO cortex_buffer.push_source (source, login) VALUES ('{source}', 'shipper') ON CONFLICT DO NOTHING;
         INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('{source}', '{job}')"
    ));
    job
}

/// The pod died and the control plane marked its attempt failed: the attempt is superseded.
fn fail(c: &Cluster, job: &str) {
    c.psql(&format!("UPDATE cortex_buffer.job SET status = 'FAILED' WHERE id = '{job}'"));
}

/// The pod's bounded wait for its predecessor's source. A server from before confirmations
/// (0.15.0) has none to wait for: true at once, so these tests run against it unchanged, and
/// fail there on what it gets wrong, not on a missing function.
fn await_sources(c: &Cluster, job: &str, timeout: &str) -> bool {
    if c.psql("SELECT to_regprocedure('cortex_buffer.await_sources(uuid,interval)') IS NULL") == "t" {
        return true;
    }
    c.psql(&format!("SELECT cortex_buffer.await_sources('{job}', '{timeout}')")) == "t"
}

/// A node dies while its shipper is behind: the server lacks a finished call it cannot see,
/// and a dead node reports nothing. The plan says `stale` (remote_unconfirmed) until the source
/// confirms after the attempt was superseded, and is exact after; the pod's bounded wait
/// (await_sources) times out while the shipper is paused and returns true once it confirms.
/// Then the same with the shipper killed, and started again.
#[test]
fn a_shipper_behind_when_its_pod_dies_leaves_the_plan_stale_until_it_confirms() {
    let c = cluster("ship-behind");
    let job = pushed_job(&c, 5151, "node-3");
    let node = tempdir("ship-behind-node3");
    let args = ["--confirm-every", "100", "--settle", "60"];
    let ship = KillOnDrop(start_shipper(&c, &node, "node-3", &args));
    let seq =
        node_write(&node, &job, "s1", 0, &[call("send_email", json!({"to": "a"})), result("send_email", "sent")], None);
    let caught_up = wait_for(Duration::from_secs(30), || {
        let p = plan_of(&c, &job);
        p["fresh"]["stale"] == json!(false) && tools_in(&p, "completed") == ["send_email"]
    });
    assert!(caught_up.is_some(), "{}", plan_of(&c, &job));

    // Paused: the pod charges a card (finished), and dies before the shipper pushes it.
    signal(&ship.0, "STOP");
    let seq = node_write(
        &node,
        &job,
        "s1",
        seq,
        &[call("charge_card", json!({"amount": 5})), result("charge_card", "ok")],
        None,
    );
    fail(&c, &job);
    let p = plan_of(&c, &job);
    assert_eq!(p["fresh"]["stale"], json!(true), "{p}");
    assert_eq!(p["fresh"]["reason"], json!("remote_unconfirmed"), "{p}");
    assert!(p["fresh"]["detail"].as_str().unwrap_or("").contains("node-3"), "{p}");
    assert!(!await_sources(&c, &job, "300 ms"), "the wait must time out while the shipper is stopped");
    // Resumed: it pushes the call, confirms, and the plan is exact.
    signal(&ship.0, "CONT");
    assert!(await_sources(&c, &job, "20 s"), "the shipper confirmed in time");
    let p = plan_of(&c, &job);
    assert_eq!(p["fresh"]["stale"], json!(false), "{p}");
    assert_eq!(tools_in(&p, "completed"), ["send_email", "charge_card"], "{p}");

    // The next attempt runs on the same node; its shipper is killed with it, behind.
    for s in ["RETRYING", "SCHEDULED"] {
        c.psql(&format!("UPDATE cortex_buffer.job SET status = '{s}' WHERE id = '{job}'"));
    }
    c.psql(&format!(
        "UPDATE cortex_buffer.job SET status = 'RUNNING', attempt = attempt + 1, started_at = now() WHERE id = '{job}'"
    ));
    drop(ship);
    node_write(&node, &job, "s2", seq, &[call("read_file", json!({"p": "y"})), result("read_file", "Y")], None);
    fail(&c, &job);
    let p = plan_of(&c, &job);
    assert_eq!(p["fresh"]["reason"], json!("remote_unconfirmed"), "{p}");
    assert!(!tools_in(&p, "completed").contains(&"read_file".to_owned()));
    assert!(!await_sources(&c, &job, "200 ms"));
    let _ship = KillOnDrop(start_shipper(&c, &node, "node-3", &args));
    assert!(await_sources(&c, &job, "20 s"), "the restarted shipper confirmed in time");
    let p = plan_of(&c, &job);
    assert_eq!(p["fresh"]["stale"], json!(false), "{p}");
    assert_eq!(tools_in(&p, "completed"), ["send_email", "charge_card", "read_file"], "{p}");
    let _ = std::fs::remove_dir_all(&node);
}

/// A checkpoint stored while the shipper is behind is marked at what the server had, not at
/// what the file held: a call finished before the checkpoint but not pushed yet lies past that
/// mark. The plan must not take the mark as the checkpoint's place (the call would come back
/// as done after the checkpoint, and the next calls' keys would shift): it places the
/// checkpoint by its time, and what it cannot place goes to verify. With the pod's flush first
/// (await_pushed), the mark is the file's own and the plan exact.
#[test]
fn a_checkpoint_stored_while_the_shipper_is_behind_is_not_taken_past_what_was_pushed() {
    let c = cluster("ship-mark-behind");
    let node = tempdir("ship-mark-behind-node4");
    let args = ["--confirm-every", "100", "--settle", "60"];
    let ship = KillOnDrop(start_shipper(&c, &node, "node-4", &args));
    for (n, flush) in [(6161u64, false), (6262, true)] {
        let job = pushed_job(&c, n, "node-4");
        let rel = format!("{job}/session-001.jsonl");
        let seq = node_write(&node, &job, "s1", 0, &[call("search", json!({"q": 1})), result("search", "r1")], None);
        let size = std::fs::metadata(node.join(&rel)).map(|m| m.len()).unwrap_or(0);
        let have = || {
            c.psql(&format!(
                "SELECT coalesce(max(f.indexed_offset + p.held_len), 0) FROM cortex_buffer.pushed_file p
                   JOIN cortex_buffer.session_file f USING (file_id) WHERE p.job_id = '{job}'"
            ))
        };
        assert!(wait_for(Duration::from_secs(30), || have() == size.to_string()).is_some(), "not pushed");
        assert!(wait_for(Duration::from_secs(30), || await_sources(&c, &job, "0")).is_some());
        if !flush {
            signal(&ship.0, "STOP");
        }
        let seq = node_write(
            &node,
            &job,
            "s1",
            seq,
            &[call("book_flight", json!({"to": "OSL"})), result("book_flight", "ok")],
            None,
        );
        if flush {
            let size = std::fs::metadata(node.join(&rel)).map(|m| m.len()).unwrap_or(0);
            assert_eq!(c.psql(&format!("SELECT cortex_buffer.await_pushed('{job}', '{rel}', {size}, '20 s')")), "t");
        }
        c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"));
        std::thread::sleep(Duration::from_millis(20));
        node_write(&node, &job, "s1", seq, &[call("send_sms", json!({"to": "b"})), result("send_sms", "ok")], None);
        if !flush {
            signal(&ship.0, "CONT");
        }
        fail(&c, &job);
        assert!(await_sources(&c, &job, "20 s"), "confirmed after the attempt ended");
        let p = plan_of(&c, &job);
        assert_eq!(p["fresh"]["stale"], json!(false), "{p}");
        let done = tools_in(&p, "completed");
        let verify = tools_in(&p, "verify");
        // Before the checkpoint: never reported as done after it.
        assert!(!done.contains(&"book_flight".to_owned()) && !done.contains(&"search".to_owned()), "{p}");
        // After it: done, or checked; never dropped.
        assert!(done.contains(&"send_sms".to_owned()) || verify.contains(&"send_sms".to_owned()), "{p}");
        if flush {
            assert_eq!(p["marker"]["kind"], json!("high_water_mark"), "the flushed mark places the checkpoint: {p}");
            assert_eq!(done, ["send_sms"], "{p}");
            assert!(verify.is_empty(), "{p}");
        } else {
            assert_ne!(p["marker"]["kind"], json!("high_water_mark"), "a mark of a shipper behind places nothing: {p}");
        }
    }
    let _ = std::fs::remove_dir_all(&node);
}

/// Pod 1 ran on the database's node (its file tailed), pod 2 on another (pushed): both files
/// are session-001.jsonl. A checkpoint pod 2 stored is marked in both; each file takes its own
/// entry (by origin, not by name), so the plan reads the pushed file from its own mark.
#[test]
fn a_tailed_and_a_pushed_file_of_the_same_name_never_stand_for_each_other() {
    let c = cluster("ship-names");
    let job = pushed_job(&c, 7171, "node-5");
    let rel = format!("{job}/session-001.jsonl");
    // Pod 1, tailed: two finished calls, then it dies.
    node_write(
        &c.sessions,
        &job,
        "s1",
        0,
        &[
            call("search", json!({"q": 1})),
            result("search", "r1"),
            call("search", json!({"q": 2})),
            result("search", "r2"),
        ],
        None,
    );
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    // Pod 2, on node 5: a call, a flush and a checkpoint, one more call, and it dies.
    let node = tempdir("ship-names-node5");
    let seq = node_write(&node, &job, "s2", 0, &[call("read_file", json!({"p": "x"})), result("read_file", "X")], None);
    ship_once(&c, &node, "node-5", &["--settle", "60"]);
    let size = std::fs::metadata(node.join(&rel)).map(|m| m.len()).unwrap_or(0);
    assert_eq!(c.psql(&format!("SELECT cortex_buffer.await_pushed('{job}', '{rel}', {size}, '5 s')")), "t");
    c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 2}}')"));
    node_write(&node, &job, "s2", seq, &[call("charge_card", json!({"amount": 7})), result("charge_card", "ok")], None);
    fail(&c, &job);
    ship_once(&c, &node, "node-5", &["--settle", "60"]);
    let p = plan_of(&c, &job);
    assert_eq!(p["fresh"]["stale"], json!(false), "{p}");
    assert_eq!(tools_in(&p, "completed"), ["charge_card"], "{p}");
    assert!(tools_in(&p, "verify").is_empty(), "{p}");
    let _ = std::fs::remove_dir_all(&node);
}
