//! Hostile files do not stop the worker: invalid UTF-8, NUL bytes, 100 000-deep nesting, a
//! line far over the cap, a FIFO, a device, a symlink out of sessions_dir, a directory without
//! read permission, an unreadable file (quarantined after repeated failures) and files removed
//! while being indexed. Each is recorded or skipped with a log line; the worker keeps its pid
//! and indexes the good file completely.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";

fn event(i: usize) -> String {
    format!(r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:22.000Z","job_id":"{JOB}","seq":{i}}}"#)
}

#[test]
fn hostile_files_are_recorded_or_skipped_and_the_worker_carries_on() {
    let c = Cluster::new(
        "hostile",
        &[
            "cortex_buffer.poll_interval = 100",
            "cortex_buffer.settle_period = 100",
            "cortex_buffer.max_line_bytes = '1MB'",
            "cortex_buffer.quarantine_after = 3",
        ],
    );
    c.start();
    c.create_extension();
    let first_pid = wait_for(Duration::from_secs(30), || c.worker_pid().is_some()).and_then(|_| c.worker_pid());

    // The bad file: every kind of hostile line between good ones.
    let mut bad: Vec<u8> = Vec::new();
    let mut push = |b: &[u8]| {
        bad.extend_from_slice(b);
        bad.push(b'\n');
    };
    push(event(0).as_bytes());
    push(b"\xff\xfe\xfd not utf-8 at all \xc3\x28");
    push(b"{\"type\":\"X\",\"timestamp\":\"t\",\"nul\":\"a\x00b\"}");
    push(b"\x00\x00\x00\x00");
    push(
        format!("{{\"type\":\"DEEP\",\"timestamp\":\"t\",\"x\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000))
            .as_bytes(),
    );
    push(format!("{{\"type\":\"HUGE\",\"timestamp\":\"t\",\"x\":\"{}\"}}", "y".repeat(3 << 20)).as_bytes());
    push(b"{\"type\":\"UTF8\",\"timestamp\":\"\xff\"}");
    push(event(1).as_bytes());
    let bad_len = bad.len();
    let sessions = c.sessions.clone();
    let put = |rel: &str, body: &[u8]| {
        let p = sessions.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, body).expect("write");
    };
    put(&format!("{JOB}/session-001.jsonl"), &bad);

    // The good file.
    let good: String = (0..1000).map(|i| event(i) + "\n").collect();
    put(&format!("{JOB}/session-002.jsonl"), good.as_bytes());

    // Things that are not regular files, or not ours to read.
    let weird = c.sessions.join("weird");
    std::fs::create_dir_all(&weird).expect("mkdir");
    assert!(Command::new("mkfifo").arg(weird.join("fifo.jsonl")).status().expect("mkfifo").success());
    assert!(Command::new("mknod")
        .arg(weird.join("null.jsonl"))
        .args(["c", "1", "3"])
        .status()
        .expect("mknod")
        .success());
    std::os::unix::fs::symlink("/etc/passwd", weird.join("escape.jsonl")).expect("symlink");
    let locked = c.sessions.join("locked");
    std::fs::create_dir_all(&locked).expect("mkdir");
    std::fs::write(locked.join("hidden.jsonl"), event(0) + "\n").expect("write");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    put("denied/session-001.jsonl", (event(0) + "\n").as_bytes());
    std::fs::set_permissions(c.sessions.join("denied/session-001.jsonl"), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");

    // Files that come and go while the worker runs.
    for round in 0..20 {
        for k in 0..10 {
            put(&format!("churn/session-{round}{k}.jsonl"), good.as_bytes());
        }
        std::thread::sleep(Duration::from_millis(30));
        for k in 0..10 {
            let _ = std::fs::remove_file(c.sessions.join(format!("churn/session-{round}{k}.jsonl")));
        }
    }

    let done = wait_for(Duration::from_secs(60), || {
        c.try_psql(
            "postgres",
            &format!(
                "SELECT (SELECT valid_lines FROM cortex_buffer.session_file WHERE path LIKE '%/{JOB}/session-002.jsonl') || ' ' ||
                        (SELECT indexed_offset FROM cortex_buffer.session_file WHERE path LIKE '%/{JOB}/session-001.jsonl') || ' ' ||
                        (SELECT files_quarantined FROM cortex_buffer.indexer_status)"
            ),
        )
        .is_ok_and(|s| s == format!("1000 {bad_len} 1"))
    });
    assert!(
        done.is_some(),
        "{}\n{}",
        c.psql("SELECT row_to_json(s) FROM cortex_buffer.indexer_status s"),
        c.log_tail()
    );
    assert_eq!(c.worker_pid(), first_pid, "the worker never crashed or restarted");

    // What the bad file holds: events for the lines that qualify, corrupt lines for the rest.
    let events = c.psql(&format!(
        "SELECT string_agg(e.line_no || ':' || e.type || ':' || coalesce(e.payload_problem, 'stored'), ',' ORDER BY e.line_no)
           FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path LIKE '%/{JOB}/session-001.jsonl'"
    ));
    // The 3 MB line is valid JSON and an event: stored with its string cut (never held whole).
    assert_eq!(events, "1:TOOL_RESULT:stored,5:DEEP:nested deeper than jsonb is trusted with (1000 levels),\
                        6:HUGE:line of 3145766 bytes is longer than cortex_buffer.max_line_bytes (1048576): strings longer than 65536 bytes were truncated,\
                        7:UTF8:invalid UTF-8 replaced by U+FFFD,8:TOOL_RESULT:stored");
    let corrupt = c.psql(&format!(
        "SELECT string_agg(c.line_no || ':' || split_part(c.reason, ' ', 1), ',' ORDER BY c.line_no)
           FROM cortex_buffer.corrupt_line c JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path LIKE '%/{JOB}/session-001.jsonl'"
    ));
    assert_eq!(corrupt, "2:not,3:not,4:not");

    // Skipped entries were logged (once each), not indexed.
    for needle in ["fifo.jsonl", "null.jsonl", "escape.jsonl", "locked"] {
        assert!(c.log_count(needle) >= 1, "no log line about {needle}:\n{}", c.log_tail());
    }
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE '%/weird/%'"), "0");
    assert!(c.log_count("quarantined") >= 1);
    // Churned files are gone (at the latest one pass after their deletion), and nothing of
    // theirs is half-indexed.
    let all_gone = wait_for(Duration::from_secs(10), || {
        c.try_psql(
            "postgres",
            "SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE '%/churn/%' AND gone_at IS NULL",
        )
        .is_ok_and(|n| n == "0")
    });
    assert!(all_gone.is_some(), "churned files still present");
    assert_eq!(
        c.psql(
            "SELECT count(*) FROM cortex_buffer.session_file f
              WHERE path LIKE '%/churn/%' AND valid_lines <> (SELECT count(*) FROM cortex_buffer.event e WHERE e.file_id = f.file_id)"
        ),
        "0"
    );
}

#[test]
fn huge_sparse_files_and_devices_cost_nothing_and_stay_cancellable() {
    let c = Cluster::new("sparse", &["cortex_buffer.worker_enabled = off", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    // A 1 TiB file that holds a line at its start and one at its end, and nothing between: the
    // file system stores a few kilobytes.
    let path = c.sessions.join(format!("{JOB}/session-001.jsonl"));
    std::fs::create_dir_all(path.parent().expect("job dir")).expect("mkdir");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(format!("{}\n", event(0)).as_bytes()).expect("write");
        f.seek(SeekFrom::Start((1u64 << 40) - 200)).expect("seek");
        f.write_all(format!("\n{}\n", event(1)).as_bytes()).expect("write");
    }
    let p = path.display().to_string();
    let t = std::time::Instant::now();
    let out = c.psql(&format!(
        "SET statement_timeout = '5s'; SELECT total_lines || ' ' || valid_lines || ' ' || corrupt_lines FROM cortex_buffer.file_integrity('{p}')"
    ));
    let took = t.elapsed();
    eprintln!("file_integrity of a 1 TiB sparse file: {took:?} ({out})");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The line of zeros between is one over-long corrupt line, read by skipping its holes.
    assert_eq!(out, "3 2 1");
    let t = std::time::Instant::now();
    let state = c.psql(&format!("SET statement_timeout = '5s'; SELECT state FROM cortex_buffer.agent_state('{p}')"));
    eprintln!("agent_state of it: {:?} ({state})", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(2));
    // The indexer reads it the same way.
    let t = std::time::Instant::now();
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    assert!(t.elapsed() < Duration::from_secs(5), "index_sessions took {:?}", t.elapsed());
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.event"), "2");

    // A file with no holes and no newline, far over the line cap: the scan stops at its bound,
    // and a statement timeout stops it sooner.
    let big = c.sessions.join(format!("{JOB}/session-002.jsonl"));
    std::fs::write(&big, vec![b'x'; 600 << 20]).expect("write 600 MB");
    let p2 = big.display().to_string();
    let t = std::time::Instant::now();
    let r = c.try_psql(
        "postgres",
        // (A 600 MB scan for a newline takes tens of milliseconds from the page cache: the
        // timeout must be shorter than that for the test to mean anything.)
        &format!("SET statement_timeout = '5ms'; SELECT * FROM cortex_buffer.file_integrity('{p2}')"),
    );
    assert!(r.as_ref().err().is_some_and(|e| e.contains("statement timeout")), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "cancelled after {:?}", t.elapsed());

    // A device node in a job directory is refused without its driver's open ever running.
    let dev = c.sessions.join(format!("{JOB}/tty.jsonl"));
    let made = Command::new("mknod").arg(&dev).args(["c", "5", "0"]).status().is_ok_and(|s| s.success());
    if made {
        let (out, notices) = c.psql_with_notices(
            "postgres",
            &format!("SELECT severity FROM cortex_buffer.file_integrity('{}')", dev.display()),
        );
        assert_eq!(out, "unreadable");
        assert!(notices.contains("not a regular file"), "{notices}");
    } else {
        eprintln!("mknod is not allowed on this file system: the device case is skipped");
    }
}

#[test]
fn one_jobs_volume_does_not_hold_back_another_jobs_lines() {
    let c = Cluster::new(
        "fairness",
        &[
            "cortex_buffer.poll_interval = 100",
            "cortex_buffer.settle_period = 0",
            "cortex_buffer.pass_dir_bytes = '2MB'",
        ],
    );
    c.start();
    c.create_extension();
    // A job that dumps 80 MB of valid lines at once: many passes' worth.
    let flood = c.sessions.join("0193a8b2-0000-7000-8000-00000000f10d/session-001.jsonl");
    std::fs::create_dir_all(flood.parent().expect("dir")).expect("mkdir");
    let line = format!("{}\n", event(0));
    let lines = (80 << 20) / line.len();
    std::fs::write(&flood, line.repeat(lines)).expect("write the flood");
    c.psql("SELECT cortex_buffer.index_now()");
    std::thread::sleep(Duration::from_millis(500));
    // Another job's line, while the flood is being indexed.
    let t = std::time::Instant::now();
    c.put(&format!("{JOB}/session-001.jsonl"), &format!("{}\n", event(7)));
    let seen = wait_for(Duration::from_secs(20), || {
        c.psql(&format!(
            "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir = '{JOB}'"
        )) == "1"
    });
    let flood_done =
        c.psql("SELECT indexed_offset = size_bytes FROM cortex_buffer.session_file WHERE path LIKE '%f10d/%'");
    eprintln!(
        "another job's line visible after {:?} while the 80 MB flood was indexed (flood finished: {flood_done})",
        t.elapsed()
    );
    assert!(seen.is_some_and(|d| d < Duration::from_secs(5)), "{:?}\n{}", seen, c.log_tail());
    assert_eq!(flood_done, "f", "the flood was still being indexed: the test measured fairness, not speed");
}

#[test]
fn sparse_files_arriving_every_second_do_not_hold_back_another_jobs_lines() {
    let c = Cluster::new("sparse-stream", &["cortex_buffer.poll_interval = 100", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    // One job's volume gains a 32 GiB sparse file every second (a line at its start and one at
    // its end; a few kilobytes on disk), as in issue 22's attack.
    let noisy = c.sessions.join("0193a8b2-0000-7000-8000-00000000f5a5");
    std::fs::create_dir_all(&noisy).expect("mkdir");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (noisy, stop) = (noisy.clone(), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            use std::io::{Seek, SeekFrom, Write};
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let mut f = std::fs::File::create(noisy.join(format!("session-{n:03}.jsonl"))).expect("create");
                f.write_all(format!("{}\n", event(0)).as_bytes()).expect("write");
                f.seek(SeekFrom::Start((32u64 << 30) - 200)).expect("seek");
                f.write_all(format!("\n{}\n", event(1)).as_bytes()).expect("write");
                std::thread::sleep(Duration::from_secs(1));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    // Another job's lines, appended one a second while the sparse files keep coming.
    let mut worst = Duration::ZERO;
    for i in 0..5 {
        let rel = format!("{JOB}/session-001.jsonl");
        if i == 0 {
            c.put(&rel, &format!("{}\n", event(i)));
        } else {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(c.sessions.join(&rel)).expect("open to append");
            f.write_all(format!("{}\n", event(i)).as_bytes()).expect("append");
        }
        let seen = wait_for(Duration::from_secs(20), || {
            c.psql(&format!(
                "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir = '{JOB}'"
            )) == (i + 1).to_string()
        });
        worst = worst.max(seen.unwrap_or(Duration::MAX));
        std::thread::sleep(Duration::from_millis(700));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let files = writer.join().expect("writer");
    let read = c.psql(
        "SELECT count(*) || ' files, ' || coalesce(sum(valid_lines), 0) || ' lines' FROM cortex_buffer.session_file WHERE job_dir = '0193a8b2-0000-7000-8000-00000000f5a5'",
    );
    eprintln!(
        "{files} sparse files of 32 GiB arrived ({read} indexed); another job's line visible within {worst:?} at worst"
    );
    assert!(worst < Duration::from_secs(2), "worst {worst:?}\n{}", c.log_tail());
}
