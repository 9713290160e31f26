//! Retention end to end, where transactions commit and files really go: a constructed volume
//! cleaned first as a dry run (nothing changes) and then for real (exactly the reported actions
//! happen, and the index stays consistent with the disk), with a concurrent UPDATE of every job
//! row never blocked; then a cleanup killed at each of its steps.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use cortex_buffer_e2e::{kill, wait_for, Cluster};

fn line(job: &str, seq: i64) -> String {
    format!(
        r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{job}","session_id":"s","seq":{seq},"buffer_schema_version":1}}"#,
        seq % 60
    ) + "\n"
}

fn write(path: &Path, body: &[u8], days_old: u64) {
    fs::create_dir_all(path.parent().unwrap_or(Path::new("/"))).unwrap_or_else(|e| panic!("{e}"));
    fs::write(path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = fs::File::options().append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
    f.set_modified(SystemTime::now() - Duration::from_secs(days_old * 86_400 + 60)).unwrap_or_else(|e| panic!("{e}"));
}

fn chown_postgres(path: &Path) {
    let out =
        Command::new("chown").args(["-R", "postgres:postgres"]).arg(path).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
}

/// Inserts a job and returns its id.
fn job(c: &Cluster, status: &str, cols: &str, vals: &str) -> String {
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (agent_id, status{cols}) VALUES (gen_random_uuid(), '{status}'{vals}) RETURNING id"
    ))
}

/// A job with a session file `days_old` days old and one written now.
fn job_dir(c: &Cluster, status: &str, cols: &str, vals: &str, old_files: u64) -> String {
    let id = job(c, status, cols, vals);
    for n in 1..=old_files {
        write(
            &c.sessions.join(&id).join(format!("session-00{n}.jsonl")),
            (line(&id, 0) + &line(&id, 1)).as_bytes(),
            10,
        );
    }
    write(&c.sessions.join(&id).join("session-009.jsonl"), line(&id, 0).as_bytes(), 0);
    id
}

/// A live job whose two files are both old: its plan reads at least the newer one.
fn live_dir(c: &Cluster, status: &str, cols: &str, vals: &str) -> String {
    let id = job(c, status, cols, vals);
    for n in 1..=2 {
        write(
            &c.sessions.join(&id).join(format!("session-00{n}.jsonl")),
            (line(&id, 0) + &line(&id, 1)).as_bytes(),
            10,
        );
    }
    id
}

/// The paths a job's recovery plan reads now.
fn plan_paths(c: &Cluster, job: &str) -> Vec<String> {
    c.psql(&format!("SELECT jsonb_array_elements(cortex_buffer.recovery_plan('{job}') -> 'sessions') ->> 'path'"))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every entry under `root` (not following links) with its size.
fn tree(root: &Path) -> BTreeSet<(Vec<u8>, u64)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let meta = fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("{e}"));
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.insert((p.as_os_str().as_bytes().to_vec(), if meta.is_file() { meta.len() } else { 0 }));
        }
    }
    out
}

fn index_rows(c: &Cluster) -> i64 {
    c.psql(
        "SELECT (SELECT count(*) FROM cortex_buffer.session_file) + (SELECT count(*) FROM cortex_buffer.event)
              + (SELECT count(*) FROM cortex_buffer.corrupt_line)",
    )
    .parse()
    .unwrap_or(-1)
}

/// Rows of the index whose file should be on disk but is not: what no cleanup may leave.
fn rows_without_files(c: &Cluster) -> Vec<String> {
    c.psql("SELECT path FROM cortex_buffer.session_file WHERE gone_at IS NULL AND path NOT LIKE 'push:/%'")
        .lines()
        .filter(|p| fs::symlink_metadata(p).is_err())
        .map(str::to_owned)
        .collect()
}

const COLUMNS: &str = "action || '|' || path || '|' || coalesce(job_status, '') || '|' || bytes || '|' || files || '|' || rows_deleted || '|' || reason";

#[test]
fn a_constructed_tree_is_cleaned_exactly_as_its_dry_run_said() {
    let c = Cluster::new("retention-tree", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let days_ago = |d: u32| format!("now() - interval '{d} days'");
    let done_old = job_dir(&c, "COMPLETED", ", completed_at", &format!(", {}", days_ago(2)), 1);
    let done_new = job_dir(&c, "COMPLETED", ", completed_at", ", now() - interval '1 hour'", 1);
    let dead = job_dir(&c, "DEAD_LETTER", ", updated_at, attempt", &format!(", {}, 3", days_ago(4)), 1);
    let failed_final =
        job_dir(&c, "FAILED", ", completed_at, attempt, max_attempts", &format!(", {}, 3, 3", days_ago(2)), 1);
    let timed_out =
        job_dir(&c, "TIMED_OUT", ", completed_at, attempt, max_attempts", &format!(", {}, 3, 3", days_ago(5)), 1);
    let failed_retry = job_dir(&c, "FAILED", ", completed_at, attempt, max_attempts", ", now(), 1, 3", 1);
    let pending = job_dir(&c, "PENDING", "", "", 1);
    let scheduled = job_dir(&c, "SCHEDULED", "", "", 1);
    let running = live_dir(&c, "RUNNING", ", started_at, heartbeat_at", ", now(), now()");
    let waiting = live_dir(&c, "WAITING_FOR_APPROVAL", ", started_at", ", now()");
    let retrying = live_dir(&c, "RETRYING", ", attempt", ", 1");
    let busy = job_dir(&c, "COMPLETED", ", completed_at", &format!(", {}", days_ago(3)), 1);
    let locked = job_dir(&c, "COMPLETED", ", completed_at", &format!(", {}", days_ago(3)), 1);
    // Orphans: job ids with no row, one old (with a link out of the volume and one to a live
    // job's directory) and one young.
    let outside = c.base.join("outside");
    write(&outside.join("precious.jsonl"), b"{}\n", 30);
    let orphan_old = c.psql("SELECT gen_random_uuid()");
    write(&c.sessions.join(&orphan_old).join("session-001.jsonl"), line(&orphan_old, 0).as_bytes(), 2);
    symlink(&outside, c.sessions.join(&orphan_old).join("escape")).unwrap_or_else(|e| panic!("{e}"));
    symlink(c.sessions.join(&running), c.sessions.join(&orphan_old).join("inside")).unwrap_or_else(|e| panic!("{e}"));
    let orphan_young = c.psql("SELECT gen_random_uuid()");
    write(&c.sessions.join(&orphan_young).join("session-001.jsonl"), line(&orphan_young, 0).as_bytes(), 0);
    // A top-level link named like a job, to a terminal job's directory: never followed.
    let link_name = c.psql("SELECT gen_random_uuid()");
    symlink(c.sessions.join(&done_new), c.sessions.join(&link_name)).unwrap_or_else(|e| panic!("{e}"));
    // A Claude Code project: only max_file_age applies; one file name is not UTF-8.
    let project = c.sessions.join("-home-user-proj");
    let odd = project.join(OsStr::from_bytes(b"old-\xff.jsonl"));
    write(&odd, b"{}\n", 9);
    write(&project.join("0b4f6f3e-5d2c-4c38-9d8e-2c1a3c4b5d6e.jsonl"), b"{\"type\":\"user\"}\n", 0);
    chown_postgres(&c.sessions);
    // A terminal job's subdirectory the server may not write: its deletion is an error row.
    write(&c.sessions.join(&locked).join("subagents/agent-1.jsonl"), line(&locked, 0).as_bytes(), 10);
    let out = Command::new("chown").args(["-R", "root:root"]).arg(c.sessions.join(&locked).join("subagents")).output();
    assert!(out.is_ok_and(|o| o.status.success()));

    c.psql("SELECT cortex_buffer.index_sessions()");
    // A file being indexed: its row locked as the indexer locks it, for the two runs below.
    let t = Tree {
        done_old,
        done_new,
        dead,
        failed_final,
        timed_out,
        failed_retry,
        pending,
        scheduled,
        running,
        waiting,
        retrying,
        busy,
        locked,
        orphan_old,
        orphan_young,
        link_name,
        outside,
        odd,
    };
    std::thread::scope(|scope| cleaned(scope, &c, &t));
}

struct Tree {
    done_old: String,
    done_new: String,
    dead: String,
    failed_final: String,
    timed_out: String,
    failed_retry: String,
    pending: String,
    scheduled: String,
    running: String,
    waiting: String,
    retrying: String,
    busy: String,
    locked: String,
    orphan_old: String,
    orphan_young: String,
    link_name: String,
    outside: PathBuf,
    odd: PathBuf,
}

fn cleaned<'s>(scope: &'s std::thread::Scope<'s, '_>, c: &'s Cluster, t: &'s Tree) {
    let Tree {
        done_old,
        done_new,
        dead,
        failed_final,
        timed_out,
        failed_retry,
        pending,
        scheduled,
        running,
        waiting,
        retrying,
        busy,
        locked,
        orphan_old,
        orphan_young,
        link_name,
        outside,
        odd,
    } = t;
    let holder = scope.spawn(move || {
        c.try_psql(
            "postgres",
            &format!(
                "BEGIN; SELECT 1 FROM cortex_buffer.session_file WHERE job_dir = '{busy}' FOR UPDATE; SELECT pg_sleep(8); COMMIT;"
            ),
        )
    });
    assert!(
        wait_for(Duration::from_secs(10), || c.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(8)%' AND state = 'active' AND pid <> pg_backend_pid()"
        ) == "1")
        .is_some(),
        "the lock holder did not start"
    );

    let plans: Vec<Vec<String>> = [running, waiting, retrying].iter().map(|j| plan_paths(c, j)).collect();
    let before_tree = tree(&c.base);
    let before_rows = index_rows(c);
    let dry = c.psql(&format!(
        "SELECT {COLUMNS} FROM cortex_buffer.cleanup_session_buffers(dry_run => true) ORDER BY path, action"
    ));
    assert_eq!(tree(&c.base), before_tree, "the dry run changed the volume");
    assert_eq!(index_rows(c), before_rows, "the dry run changed the index");

    // The real run, in a transaction kept open for two seconds while every job row is updated
    // by another session with a lock timeout: the cleanup locks no job row.
    let runner = scope.spawn(move || {
        c.try_psql(
            "postgres",
            "BEGIN; CREATE TABLE cleanup_result AS SELECT * FROM cortex_buffer.cleanup_session_buffers();
             SELECT pg_sleep(2); COMMIT;",
        )
    });
    assert!(
        wait_for(Duration::from_secs(10), || c.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%CREATE TABLE cleanup_result%' AND wait_event = 'PgSleep'"
        ) == "1")
        .is_some(),
        "the cleanup did not reach its sleep"
    );
    c.psql("BEGIN; SET LOCAL lock_timeout = '500ms'; UPDATE cortex_buffer.job SET priority = priority; ROLLBACK;");
    runner.join().unwrap_or_else(|_| panic!("runner")).unwrap_or_else(|e| panic!("cleanup: {e}"));
    let real = c.psql(&format!("SELECT {COLUMNS} FROM cleanup_result ORDER BY path, action"));
    assert_eq!(real, dry, "the real run did what its dry run said");

    let row = |action: &str, path: &str| -> Option<Vec<String>> {
        real.lines()
            .map(|l| l.split('|').map(str::to_owned).collect::<Vec<_>>())
            .find(|f| f.first().map(String::as_str) == Some(action) && f.get(1).map(String::as_str) == Some(path))
    };
    let s = |rel: &str| c.sessions.join(rel).display().to_string();
    for gone in [done_old, dead, timed_out, orphan_old] {
        assert!(row("delete_dir", &s(gone)).is_some(), "{gone}: no delete_dir in\n{real}");
        assert!(fs::symlink_metadata(c.sessions.join(gone)).is_err(), "{gone} is still there");
    }
    assert!(outside.join("precious.jsonl").exists(), "a link's target outside the volume was deleted");
    assert!(c.sessions.join(running).join("session-002.jsonl").exists(), "a link's target inside was deleted");
    for (id, reason) in [
        (&done_new, "older than max_file_age"),
        (&failed_final, "older than max_file_age"),
        (&pending, "older than max_file_age"),
        (&scheduled, "older than max_file_age"),
    ] {
        let old = format!("{id}/session-001.jsonl");
        let r = row("delete_file", &s(&old)).unwrap_or_else(|| panic!("{old}: no delete_file in\n{real}"));
        assert!(r.get(6).is_some_and(|x| x.contains(reason)), "{r:?}");
        assert!(!c.sessions.join(&old).exists(), "{old} is still there");
        assert!(c.sessions.join(id).join("session-009.jsonl").exists(), "{id}'s young file went");
    }
    // A failed job with a retry left recovers at its next attempt: its old file is kept if a plan
    // of it reads it (or cannot say), deleted otherwise, like a live job's.
    let f = s(&format!("{failed_retry}/session-001.jsonl"));
    match (row("keep", &f), row("delete_file", &f)) {
        (Some(r), None) => assert!(r.get(6).is_some_and(|x| x.contains("recovery plan")), "{r:?}"),
        (None, Some(_)) => assert!(!Path::new(&f).exists()),
        other => panic!("{f}: {other:?} in\n{real}"),
    }
    // A failed job with no retry left is kept for keep_failed_for (3 days) after it ended: the
    // one that ended 2 days ago lost only its old file above; the one timed out 5 days ago went
    // whole.
    // A live job keeps every file its recovery plan reads (its newest at least), however old; a
    // file it deletes is one no plan of it reads.
    for (live, plan) in [running, waiting, retrying].iter().zip(&plans) {
        let newest = s(&format!("{live}/session-002.jsonl"));
        assert!(plan.contains(&newest), "{live}: the plan does not read its newest file: {plan:?}");
        for n in 1..=2 {
            let f = s(&format!("{live}/session-00{n}.jsonl"));
            if plan.contains(&f) {
                let r = row("keep", &f).unwrap_or_else(|| panic!("{f}: read by the plan, not kept, in\n{real}"));
                assert!(r.get(6).is_some_and(|x| x.contains("recovery plan")), "{r:?}");
                assert!(Path::new(&f).exists());
            } else if row("delete_file", &f).is_some() {
                assert!(!Path::new(&f).exists());
            } else {
                assert!(row("keep", &f).is_some(), "{f}: neither kept nor deleted in\n{real}");
            }
        }
    }
    assert!(row("keep", &s(orphan_young)).is_some_and(|r| r.get(6).is_some_and(|x| x.contains("orphan kept"))));
    assert!(row("keep", &s(link_name)).is_some_and(|r| r.get(6).is_some_and(|x| x.contains("symbolic link"))));
    assert!(fs::symlink_metadata(c.sessions.join(link_name)).is_ok());
    assert!(c.sessions.join(done_new).join("session-009.jsonl").exists());
    assert!(row("keep", &s(busy)).is_some_and(|r| r.get(6).is_some_and(|x| x.contains("being indexed"))));
    assert!(c.sessions.join(busy).exists());
    assert!(row("error", &s(locked)).is_some_and(|r| r.get(6).is_some_and(|x| x.contains("permission denied"))));
    assert!(c.sessions.join(locked).join("session-009.jsonl").exists(), "a directory that cannot go is left whole");
    let odd_shown = odd.to_string_lossy().into_owned();
    assert!(row("delete_file", &odd_shown).is_some(), "the non-UTF-8 name: {odd_shown} not in\n{real}");
    assert!(fs::symlink_metadata(odd).is_err());

    // The index lost exactly the rows reported, and keeps no row of a deleted file.
    let reported: i64 = real
        .lines()
        .filter(|l| l.starts_with("delete_dir|") || l.starts_with("delete_file|"))
        .filter_map(|l| l.split('|').nth(5).and_then(|n| n.parse::<i64>().ok()))
        .sum();
    assert!(reported > 0);
    assert_eq!(index_rows(c), before_rows - reported, "index rows: before {before_rows}, reported {reported}");
    assert_eq!(rows_without_files(c), Vec::<String>::new());

    // Once the indexer lets go, the next run deletes the busy directory, and nothing else new.
    holder.join().unwrap_or_else(|_| panic!("holder")).unwrap_or_else(|e| panic!("{e}"));
    let again = c.psql(&format!(
        "SELECT {COLUMNS} FROM cortex_buffer.cleanup_session_buffers() WHERE action IN ('delete_dir', 'delete_file') ORDER BY path"
    ));
    assert!(again.starts_with(&format!("delete_dir|{}|COMPLETED|", s(busy))), "{again}");
    assert_eq!(again.lines().filter(|l| l.starts_with("delete_")).count(), 1, "{again}");
    assert!(fs::symlink_metadata(c.sessions.join(busy)).is_err());
    assert_eq!(rows_without_files(c), Vec::<String>::new());
    // The root-owned directory is left for the operator; the test cleans it.
    let _ = fs::remove_dir_all(c.sessions.join(locked));
}

#[test]
fn a_cleanup_killed_at_any_step_leaves_no_trusted_row_for_a_deleted_file_and_the_next_run_finishes() {
    let c = Cluster::new("retention-kill", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    for step in ["decided", "rows_deleted", "committed", "unlinking"] {
        let a = job_dir(&c, "COMPLETED", ", completed_at", ", now() - interval '2 days'", 2);
        let b = job_dir(&c, "COMPLETED", ", completed_at", ", now() - interval '2 days'", 2);
        let p = job_dir(&c, "PENDING", "", "", 1);
        chown_postgres(&c.sessions);
        c.psql("SELECT cortex_buffer.index_sessions()");
        let rows_before = index_rows(&c);
        std::thread::scope(|scope| {
            let c = &c;
            let runner = scope.spawn(move || {
            c.try_psql(
                "postgres",
                &format!(
                    "SET cortex_buffer.cleanup_pause_at = '{step}'; SELECT count(*) FROM cortex_buffer.cleanup_session_buffers()"
                ),
            )
        });
            let pid = || {
                c.try_psql(
                "postgres",
                "SELECT pid FROM pg_stat_activity WHERE query LIKE '%cleanup_session_buffers()%' AND pid <> pg_backend_pid()",
            )
            .unwrap_or_default()
            };
            assert!(wait_for(Duration::from_secs(10), || !pid().is_empty()).is_some(), "{step}: no cleanup backend");
            // The run takes milliseconds; the pause holds it for a minute.
            std::thread::sleep(Duration::from_millis(1500));
            let victim: i32 =
                pid().lines().next().and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("{step}: pid"));
            kill(victim, "KILL");
            let _ = runner.join();
        });
        assert!(
            wait_for(Duration::from_secs(60), || c.try_psql("postgres", "SELECT 1").is_ok()).is_some(),
            "{step}: the server did not come back"
        );
        let a_exists = c.sessions.join(&a).exists();
        let b_exists = c.sessions.join(&b).exists();
        let p_exists = c.sessions.join(&p).join("session-001.jsonl").exists();
        let rows_now = index_rows(&c);
        match step {
            "decided" | "rows_deleted" => {
                assert!(a_exists && b_exists && p_exists, "{step}: a file went before the commit");
                assert_eq!(rows_now, rows_before, "{step}: rows went without a commit");
            }
            "committed" => {
                assert!(a_exists && b_exists && p_exists, "{step}: a file went before the pause");
                assert!(rows_now < rows_before, "{step}: the commit did not delete the rows");
            }
            _ => {
                let done = [a_exists, b_exists, p_exists].iter().filter(|e| !**e).count();
                assert_eq!(done, 1, "{step}: exactly the first deletion happened ({a_exists} {b_exists} {p_exists})");
                assert!(rows_now < rows_before);
            }
        }
        assert_eq!(rows_without_files(&c), Vec::<String>::new(), "{step}: trusted rows of deleted files");
        // The next run finishes the work, whatever the kill left.
        c.psql("SELECT count(*) FROM cortex_buffer.cleanup_session_buffers()");
        assert!(!c.sessions.join(&a).exists() && !c.sessions.join(&b).exists(), "{step}: the next run left files");
        assert!(!c.sessions.join(&p).join("session-001.jsonl").exists());
        assert!(c.sessions.join(&p).join("session-009.jsonl").exists());
        assert_eq!(rows_without_files(&c), Vec::<String>::new(), "{step}");
        assert_eq!(
            c.psql(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir IN ('{a}', '{b}')")),
            "0",
            "{step}"
        );
    }
}

#[test]
fn the_worker_warns_once_when_a_file_crosses_oversized_file() {
    let c = Cluster::new(
        "retention-oversized",
        &["cortex_buffer.oversized_file = '2kB'", "cortex_buffer.poll_interval = 100"],
    );
    c.start();
    c.create_extension();
    let id = c.psql("SELECT gen_random_uuid()");
    let rel = format!("{id}/session-001.jsonl");
    let grow = |seq: i64| {
        let body = format!(
            r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{id}","session_id":"s","seq":{seq},"result_summary":"{}"}}"#,
            "x".repeat(900)
        ) + "\n";
        let path = c.sessions.join(&rel);
        fs::create_dir_all(path.parent().unwrap_or(Path::new("/"))).unwrap_or_else(|e| panic!("{e}"));
        let mut f = fs::OpenOptions::new().create(true).append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut f, body.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    };
    let indexed = |lines: i64| {
        wait_for(Duration::from_secs(20), || {
            c.psql(&format!(
                "SELECT coalesce(max(indexed_lines), 0) FROM cortex_buffer.session_file WHERE job_dir = '{id}'"
            )) == lines.to_string()
        })
        .is_some()
    };
    let needle = "has grown past cortex_buffer.oversized_file";
    grow(0);
    assert!(indexed(1));
    assert_eq!(c.log_count(needle), 0, "under the limit");
    grow(1);
    grow(2);
    assert!(indexed(3));
    assert!(wait_for(Duration::from_secs(5), || c.log_count(needle) == 1).is_some(), "{}", c.log_tail());
    grow(3);
    assert!(indexed(4));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.log_count(needle), 1, "warned again for a file already over the limit");
}

#[test]
fn a_cleanup_in_a_prepared_transaction_is_refused_and_deletes_nothing() {
    let c =
        Cluster::new("retention-prepared", &["cortex_buffer.worker_enabled = off", "max_prepared_transactions = 2"]);
    c.start();
    c.create_extension();
    let a = job_dir(&c, "COMPLETED", ", completed_at", ", now() - interval '2 days'", 1);
    chown_postgres(&c.sessions);
    c.psql("SELECT cortex_buffer.index_sessions()");
    let rows = index_rows(&c);
    let out = c.try_psql(
        "postgres",
        "BEGIN; SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(); PREPARE TRANSACTION 'cleanup';",
    );
    assert!(out.as_ref().is_err_and(|e| e.contains("PREPARE TRANSACTION")), "{out:?}");
    assert_eq!(c.psql("SELECT count(*) FROM pg_prepared_xacts"), "0");
    assert!(c.sessions.join(&a).join("session-001.jsonl").exists());
    assert_eq!(index_rows(&c), rows);
    // A later commit in the same session deletes nothing of it either.
    c.psql("SELECT 1");
    assert!(c.sessions.join(&a).join("session-001.jsonl").exists());
}

/// One pod's writer: the control plane's own BufferWriter (oracle/writer.mjs) run in Node.
fn pod_writes(c: &Cluster, job: &str, agent: &str, session: &str, first_seq: u64, events: &serde_json::Value) -> u64 {
    use std::io::Write as _;
    let mut child = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/writer.mjs"))
        .arg(&c.sessions)
        .args([job, agent, session, &first_seq.to_string(), "0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let input = events.to_string();
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "writer.mjs failed");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(first_seq)
}

/// A recovery plan without what changes from one call to the next (when it was made, how fresh).
fn stable_plan(c: &Cluster, job: &str) -> serde_json::Value {
    let text = c.psql(&format!("SELECT cortex_buffer.recovery_plan('{job}') - 'fresh' - 'generated_at'"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_job_waiting_past_max_file_age_keeps_what_its_pod_will_resume_from() {
    use serde_json::json;
    let c = Cluster::new("retention-pod", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let agent = "0193a8b2-0000-7000-8000-00000000a9e1";
    let job = c.psql(&format!(
        "INSERT INTO cortex_buffer.job (agent_id, status, started_at) VALUES ('{agent}', 'RUNNING', now()) RETURNING id"
    ));
    // Pod 1: works, checkpoints, sends an email, starts charging a card and dies. Pod 2 resumes
    // from the checkpoint (the same file, sequence 0 again) and waits for approval.
    let next = pod_writes(
        &c,
        &job,
        agent,
        "s1",
        0,
        &json!([{"type": "text", "content": "plan"},
                {"type": "tool_use", "toolName": "read_file", "toolInput": {"p": "a"}},
                {"type": "tool_result", "toolName": "read_file", "output": "A", "isError": false}]),
    );
    c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 3}}')"));
    pod_writes(
        &c,
        &job,
        agent,
        "s1",
        next,
        &json!([{"type": "tool_use", "toolName": "send_email", "toolInput": {"to": "x"}},
                {"type": "tool_result", "toolName": "send_email", "output": "sent", "isError": false},
                {"type": "tool_use", "toolName": "charge_card", "toolInput": {"usd": 5}}]),
    );
    pod_writes(&c, &job, agent, "s2", 0, &json!([{"type": "text", "content": "resuming"}]));
    c.psql(&format!("UPDATE cortex_buffer.job SET status = 'WAITING_FOR_APPROVAL' WHERE id = '{job}'"));
    // A week and a day later (the file's mtime).
    let file = c.sessions.join(&job).join("session-001.jsonl");
    let old = fs::File::options().append(true).open(&file).unwrap_or_else(|e| panic!("{e}"));
    old.set_modified(SystemTime::now() - Duration::from_secs(8 * 86_400)).unwrap_or_else(|e| panic!("{e}"));
    chown_postgres(&c.sessions);
    let before = stable_plan(&c, &job);
    assert_eq!(before["completed"][0]["tool_name"], "send_email", "{before}");
    assert_eq!(before["in_flight"][0]["tool_name"], "charge_card", "{before}");

    let rows = c.psql(&format!(
        "SELECT {COLUMNS} FROM cortex_buffer.cleanup_session_buffers() WHERE path LIKE '%{job}%' ORDER BY path"
    ));
    assert!(rows.starts_with("keep|"), "{rows}");
    assert!(file.exists(), "the file the waiting job's pod resumes from was deleted:\n{rows}");
    // Recovery says after the cleanup exactly what it said before.
    assert_eq!(stable_plan(&c, &job), before);
}

/// A job that will run again keeps the buffer its next pod resumes from, however old: one
/// reaped and rescheduled (SCHEDULED, its next attempt admitted and not started), and one put
/// back in the queue (PENDING with an attempt behind it). The next pod's plan is what it was.
#[test]
fn a_requeued_job_keeps_the_buffer_its_next_pod_resumes_from() {
    use serde_json::json;
    let c = Cluster::new("retention-requeued", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let agent = "0193a8b2-0000-7000-8000-00000000a9e3";
    let scheduled = c.psql(&format!(
        "INSERT INTO cortex_buffer.job (agent_id, status, attempt, started_at) VALUES ('{agent}', 'RUNNING', 1, now()) RETURNING id"
    ));
    let pending = c.psql(&format!(
        "INSERT INTO cortex_buffer.job (agent_id, status, attempt, started_at) VALUES ('{agent}', 'RUNNING', 2, now()) RETURNING id"
    ));
    let mut before = Vec::new();
    for job in [&scheduled, &pending] {
        let next = pod_writes(
            &c,
            job,
            agent,
            "s1",
            0,
            &json!([{"type": "tool_use", "toolName": "read_file", "toolInput": {"p": "a"}},
                    {"type": "tool_result", "toolName": "read_file", "output": "A", "isError": false}]),
        );
        c.psql(&format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1}}')"));
        pod_writes(
            &c,
            job,
            agent,
            "s1",
            next,
            &json!([{"type": "tool_use", "toolName": "send_email", "toolInput": {"to": "x"}},
                    {"type": "tool_result", "toolName": "send_email", "output": "sent", "isError": false}]),
        );
        // The pod died; the control plane fails the attempt and retries it.
        for s in ["FAILED", "RETRYING", "SCHEDULED"] {
            c.psql(&format!("UPDATE cortex_buffer.job SET status = '{s}' WHERE id = '{job}'"));
        }
        let file = c.sessions.join(job).join("session-001.jsonl");
        let f = fs::File::options().append(true).open(&file).unwrap_or_else(|e| panic!("{e}"));
        f.set_modified(SystemTime::now() - Duration::from_secs(8 * 86_400)).unwrap_or_else(|e| panic!("{e}"));
        let plan = stable_plan(&c, job);
        assert_eq!(plan["completed"][0]["tool_name"], "send_email", "{plan}");
        before.push(plan);
    }
    // The second goes back to the queue: PENDING, with two attempts behind it.
    c.psql("ALTER TABLE cortex_buffer.job DISABLE TRIGGER job_validate_transition");
    c.psql(&format!("UPDATE cortex_buffer.job SET status = 'PENDING' WHERE id = '{pending}'"));
    c.psql("ALTER TABLE cortex_buffer.job ENABLE TRIGGER job_validate_transition");
    chown_postgres(&c.sessions);
    let rows = c.psql(&format!(
        "SELECT {COLUMNS} FROM cortex_buffer.cleanup_session_buffers(max_unknown_ratio => 1)
          WHERE path LIKE '%{scheduled}%' OR path LIKE '%{pending}%' ORDER BY path"
    ));
    for (job, plan) in [&scheduled, &pending].into_iter().zip(&before) {
        let file = c.sessions.join(job).join("session-001.jsonl");
        assert!(file.exists(), "{job}: the file its next pod resumes from was deleted:\n{rows}");
        assert_eq!(&stable_plan(&c, job), plan, "{job}: its next pod's plan changed");
    }
}

#[test]
fn a_dry_run_leaves_no_lock_and_no_row_behind_in_its_transaction() {
    let c = Cluster::new("retention-dry", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let done = job_dir(&c, "COMPLETED", ", completed_at", ", now() - interval '2 days'", 1);
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    // A live job, not indexed yet, whose plan catches its directory up: the dry run's catch-up
    // is undone too.
    let live = live_dir(&c, "RUNNING", ", started_at, heartbeat_at", ", now(), now()");
    chown_postgres(&c.sessions);
    std::thread::scope(|scope| {
        let held = scope.spawn(|| {
            c.try_psql(
                "postgres",
                "BEGIN; SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(dry_run => true);
                 SELECT pg_sleep(3); COMMIT;",
            )
        });
        assert!(
            wait_for(Duration::from_secs(10), || c.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%dry_run => true%'"
            ) == "1")
            .is_some(),
            "the dry run did not reach its sleep"
        );
        // Its transaction is still open: the rows it would delete are not locked any more.
        let locked = c.try_psql(
            "postgres",
            &format!(
                "SELECT count(*) FROM (SELECT 1 FROM cortex_buffer.session_file WHERE job_dir = '{done}' FOR UPDATE NOWAIT) s"
            ),
        );
        assert_eq!(locked.as_deref(), Ok("2"), "{locked:?}");
        held.join().unwrap_or_else(|_| panic!("dry run")).unwrap_or_else(|e| panic!("{e}"));
    });
    // The live job's catch-up happened inside the dry run, and was rolled back with it.
    assert_eq!(c.psql(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir = '{live}'")), "0");
}
