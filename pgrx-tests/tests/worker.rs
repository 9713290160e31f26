//! The background worker's life: presence, discovery, reload, shutdown, crash restart and
//! hostile directories, each against a real cluster with cortex_buffer preloaded.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{kill, wait_for, Cluster, WORKER};

const SPIKE_LINE: &str = "{\"type\":\"SESSION_START\",\"timestamp\":\"2026-02-23T14:30:22Z\",\"job_id\":\"j\",\"session_id\":\"s\",\"seq\":0}\n";

#[test]
fn worker_shows_in_pg_stat_activity_soon_after_start() {
    let c = Cluster::new("presence", &["cortex_buffer.poll_interval = 200"]);
    let t = Instant::now();
    c.start();
    let waited = wait_for(Duration::from_secs(5), || c.worker_pid().is_some());
    assert!(waited.is_some(), "worker not in pg_stat_activity 5 s after start:\n{}", c.log_tail());
    eprintln!("worker visible {:?} after pg_ctl start", t.elapsed());
    let app = c.psql(&format!("SELECT application_name FROM pg_stat_activity WHERE backend_type = '{WORKER}'"));
    assert_eq!(app, WORKER);
    // No extension yet: the worker says so (once in the log, and as its activity).
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().contains("extension not installed")).is_some());
    c.create_extension();
    assert!(
        wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some(),
        "activity after CREATE EXTENSION: {:?}",
        c.worker_activity()
    );
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(c.log_count("is not installed in database"), 1, "a lasting condition is logged once:\n{}", c.log_tail());
    assert_eq!(c.log_count("resumed indexing"), 1);
}

#[test]
fn files_are_discovered_within_two_poll_intervals_and_disabling_stops_discovery() {
    let poll = Duration::from_millis(500);
    let c = Cluster::new("discovery", &["cortex_buffer.poll_interval = 500"]);
    c.start();
    c.create_extension();
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());

    let t = Instant::now();
    c.put("job-1/session_20260223T143022Z_pod-a.jsonl", SPIKE_LINE);
    let found = wait_for(4 * poll, || c.files_recorded("/job-1/session_20260223T143022Z_pod-a.jsonl") == 1);
    let took = found.unwrap_or_else(|| panic!("file not discovered:\n{}", c.log_tail()));
    eprintln!("discovered after {:?} (poll interval {poll:?})", t.elapsed());
    assert!(took <= 2 * poll, "discovery took {took:?}, more than two poll intervals");
    assert_eq!(
        c.psql("SELECT job_dir || ' ' || dialect || ' ' || size_bytes FROM cortex_buffer.session_file"),
        format!("job-1 cortex-spike {}", SPIKE_LINE.len())
    );

    c.set_and_reload("cortex_buffer.worker_enabled", "off");
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("disabled")).is_some());
    c.put("job-2/session-001.jsonl", "{}\n");
    std::thread::sleep(3 * poll);
    assert_eq!(c.files_recorded("/job-2/session-001.jsonl"), 0, "a disabled worker must not discover files");
    let (out, notices) = c.psql_with_notices("postgres", "SELECT cortex_buffer.index_now()");
    assert_eq!(out, "f");
    assert!(notices.contains("disabled"), "{notices}");
    assert!(c.worker_pid().is_some(), "a disabled worker idles; it does not exit (exit 0 would never be restarted)");

    c.set_and_reload("cortex_buffer.worker_enabled", "on");
    assert!(wait_for(4 * poll, || c.files_recorded("/job-2/session-001.jsonl") == 1).is_some(), "{}", c.log_tail());
}

#[test]
fn index_now_wakes_a_worker_with_a_long_poll_interval() {
    let c = Cluster::new("wake", &["cortex_buffer.poll_interval = 600000"]);
    c.start();
    c.create_extension();
    // The first pass runs at start-up or after CREATE EXTENSION is noticed; nudge it once.
    assert_eq!(c.psql("SELECT cortex_buffer.index_now()"), "t");
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());
    c.put("job/session-001.jsonl", "{}\n");
    let t = Instant::now();
    assert_eq!(c.psql("SELECT cortex_buffer.index_now()"), "t");
    let took = wait_for(Duration::from_secs(5), || c.files_recorded("/job/session-001.jsonl") == 1);
    assert!(took.is_some(), "index_now() did not trigger a pass:\n{}", c.log_tail());
    eprintln!("index_now() to visible: {:?}", t.elapsed());
}

#[test]
fn fast_shutdown_is_prompt_with_the_worker_running() {
    let c = Cluster::new("shutdown", &["cortex_buffer.poll_interval = 1000"]);
    c.start();
    c.create_extension();
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());
    let took = c.stop("fast");
    eprintln!("pg_ctl stop -m fast took {took:?}");
    assert!(took < Duration::from_secs(5), "fast shutdown took {took:?}");
    assert!(c.log_text().contains("cortex_buffer indexer stopping on request"));
}

#[test]
fn a_killed_worker_is_restarted_and_discovery_continues() {
    let c = Cluster::new("sigkill", &["cortex_buffer.poll_interval = 200"]);
    c.start();
    c.create_extension();
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());
    let old = c.worker_pid().unwrap_or_else(|| panic!("no worker"));
    kill(old, "KILL");
    // SIGKILL of any backend makes the postmaster reinitialise the whole cluster (crash
    // recovery); the worker comes back with it.
    let back = wait_for(Duration::from_secs(30), || c.worker_pid().is_some_and(|p| p != old));
    assert!(back.is_some(), "worker did not come back after SIGKILL:\n{}", c.log_tail());
    eprintln!(
        "SIGKILL of worker {old}: the postmaster reinitialised the cluster (\"terminating any other active server processes\") and the worker was back after {:?}",
        back.unwrap_or_default()
    );
    assert!(c.log_text().contains("terminated by signal 9"), "{}", c.log_tail());
    c.put("job/after-crash.jsonl", "{}\n");
    assert!(
        wait_for(Duration::from_secs(10), || c.files_recorded("/job/after-crash.jsonl") == 1).is_some(),
        "{}",
        c.log_tail()
    );
}

#[test]
fn unreadable_directories_and_unstatable_files_are_logged_and_skipped() {
    let c = Cluster::new("hostile", &["cortex_buffer.poll_interval = 200"]);
    c.put("locked/session-001.jsonl", "{}\n");
    c.put("noexec/session-001.jsonl", "{}\n");
    c.put("fine/session-001.jsonl", "{}\n");
    // The server runs as postgres: mode 000 hides a directory completely, mode 444 lists its
    // names but makes every stat fail.
    fs::set_permissions(c.sessions.join("locked"), fs::Permissions::from_mode(0o000)).expect("chmod");
    fs::set_permissions(c.sessions.join("noexec"), fs::Permissions::from_mode(0o444)).expect("chmod");
    c.start();
    c.create_extension();
    assert!(
        wait_for(Duration::from_secs(5), || c.files_recorded("/fine/session-001.jsonl") == 1).is_some(),
        "{}",
        c.log_tail()
    );
    assert!(wait_for(Duration::from_secs(5), || c.log_count("skipping") >= 2).is_some(), "{}", c.log_tail());
    let log = c.log_text();
    assert!(log.contains("/locked\": could not open directory: Permission denied"), "{log}");
    assert!(log.contains("/noexec/session-001.jsonl\": could not stat: Permission denied"), "{log}");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(c.log_count("/locked\": could not open directory"), 1, "logged once, not every poll");
    assert!(c.worker_pid().is_some(), "the worker survives");
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.session_file"), "1");

    // Once readable again, the files are picked up.
    fs::set_permissions(c.sessions.join("locked"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::set_permissions(c.sessions.join("noexec"), fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(
        wait_for(Duration::from_secs(5), || c.files_recorded("session-001.jsonl") == 3).is_some(),
        "{}",
        c.log_tail()
    );
}

#[test]
fn a_missing_sessions_dir_is_waited_for_and_logged_once() {
    let c = Cluster::new("nodir", &["cortex_buffer.poll_interval = 200"]);
    c.start();
    c.create_extension();
    let missing = c.base.join("not-yet");
    c.set_and_reload("cortex_buffer.sessions_dir", &missing.display().to_string());
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().contains("could not access sessions directory"))
        .is_some());
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(c.log_count("could not access sessions directory"), 1, "{}", c.log_tail());
    fs::create_dir_all(missing.join("job")).expect("mkdir");
    fs::write(missing.join("job/a.jsonl"), "{}\n").expect("write");
    assert!(
        wait_for(Duration::from_secs(5), || c.files_recorded("/not-yet/job/a.jsonl") == 1).is_some(),
        "{}",
        c.log_tail()
    );
}

#[test]
fn a_missing_database_is_retried_with_a_delay_not_a_tight_loop() {
    let c = Cluster::new("nodb", &["cortex_buffer.database = 'no_such_db'"]);
    c.start();
    std::thread::sleep(Duration::from_secs(12));
    let failures = c.log_count("database \"no_such_db\" does not exist");
    assert!(
        (1..=2).contains(&failures),
        "expected 1-2 connection failures in 12 s with a 10 s restart delay, got {failures}:\n{}",
        c.log_tail()
    );
    // Creating the database (and the extension in it) lets the next restart succeed.
    c.psql("CREATE DATABASE no_such_db");
    c.try_psql("no_such_db", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    assert!(wait_for(Duration::from_secs(15), || c.worker_pid().is_some()).is_some(), "{}", c.log_tail());
}

#[test]
fn a_pass_that_keeps_failing_on_the_catalogue_is_logged_once_and_resumed_once() {
    let c = Cluster::new("catfail", &["cortex_buffer.poll_interval = 200"]);
    c.start();
    c.create_extension();
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());
    let resumed = c.log_count("resumed indexing");
    // Every pass now fails on the catalogue, while the readiness check (the version) passes.
    c.psql("ALTER TABLE cortex_buffer.session_file RENAME COLUMN dialect TO dialect_elsewhere");
    c.put("job/a.jsonl", "{}\n");
    assert!(
        wait_for(Duration::from_secs(5), || c.log_count("could not read its catalogue") > 0).is_some(),
        "{}",
        c.log_tail()
    );
    // The first try fails recording the file, the next ones reading the catalogue (another
    // message: logged once more). Then about 15 tries at this poll_interval log nothing, and
    // the condition is never logged as ended.
    std::thread::sleep(Duration::from_secs(1));
    let logged = c.log_count("could not read its catalogue");
    assert!(logged <= 2, "{}", c.log_tail());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.log_count("could not read its catalogue"), logged, "{}", c.log_tail());
    assert_eq!(c.log_count("resumed indexing"), resumed, "{}", c.log_tail());
    c.psql("ALTER TABLE cortex_buffer.session_file RENAME COLUMN dialect_elsewhere TO dialect");
    assert!(wait_for(Duration::from_secs(5), || c.files_recorded("/job/a.jsonl") == 1).is_some(), "{}", c.log_tail());
    // Said once the step that recorded the file has ended, a moment after its commit.
    assert!(
        wait_for(Duration::from_secs(5), || c.log_count("resumed indexing") > resumed).is_some(),
        "{}",
        c.log_tail()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.log_count("resumed indexing"), resumed + 1, "{}", c.log_tail());
}

#[test]
fn a_version_mismatch_is_waited_for_and_logged_once() {
    let c = Cluster::new("version", &["cortex_buffer.poll_interval = 200"]);
    c.start();
    c.create_extension();
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().starts_with("idle:")).is_some());
    // Simulate a library newer than the installed SQL (as after installing a new build
    // without ALTER EXTENSION UPDATE).
    c.psql("UPDATE pg_extension SET extversion = '0.0.1' WHERE extname = 'cortex_buffer'");
    assert!(wait_for(Duration::from_secs(5), || c.worker_activity().contains("differs from library")).is_some());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(c.log_count("ALTER EXTENSION cortex_buffer UPDATE"), 1, "{}", c.log_tail());
    c.put("job/late.jsonl", "{}\n");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(c.files_recorded("/job/late.jsonl"), 0, "nothing is indexed while versions differ");
    c.psql(
        "UPDATE pg_extension SET extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'cortex_buffer') \
          WHERE extname = 'cortex_buffer'",
    );
    assert!(
        wait_for(Duration::from_secs(5), || c.files_recorded("/job/late.jsonl") == 1).is_some(),
        "{}",
        c.log_tail()
    );
}

#[test]
fn without_preloading_there_is_no_worker_and_index_now_says_so() {
    let c = Cluster::with_preload("nopreload", false, &[]);
    c.start();
    c.create_extension();
    let (out, notices) = c.psql_with_notices("postgres", "SELECT cortex_buffer.index_now()");
    assert_eq!(out, "f");
    assert!(notices.contains("shared_preload_libraries"), "{notices}");
    // The SQL function works regardless.
    c.put("job/session-001.jsonl", "{}\n");
    assert_eq!(c.psql("SELECT action FROM cortex_buffer.index_sessions()"), "new");
}

#[test]
fn a_standby_waits_for_promotion_and_then_indexes() {
    let primary = Cluster::new("primary", &["cortex_buffer.poll_interval = 200"]);
    primary.start();
    primary.create_extension();
    let standby = Cluster::standby_of(&primary, "standby");
    standby.start();
    assert!(
        wait_for(Duration::from_secs(10), || standby.worker_activity().contains("in recovery")).is_some(),
        "standby worker activity: {:?}\n{}",
        standby.worker_activity(),
        standby.log_tail()
    );
    standby.put("job/on-standby.jsonl", "{}\n");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(standby.log_count("the server is in recovery"), 1, "logged once:\n{}", standby.log_tail());
    assert_eq!(standby.files_recorded("/job/on-standby.jsonl"), 0, "a standby cannot write; it must not try");
    assert_eq!(standby.log_count("ERROR"), 0, "{}", standby.log_tail());

    standby.psql("SELECT pg_promote()");
    assert!(
        wait_for(Duration::from_secs(10), || standby.files_recorded("/job/on-standby.jsonl") == 1).is_some(),
        "after promotion the worker indexes:\n{}",
        standby.log_tail()
    );
}

#[test]
fn no_database_setting_stops_the_worker() {
    let c = Cluster::new("pinned", &["cortex_buffer.poll_interval = 100"]);
    c.start();
    c.create_extension();
    // What a non-superuser database owner can set for every session of the database.
    c.psql("CREATE ROLE owner_role LOGIN; ALTER DATABASE postgres OWNER TO owner_role");
    for setting in [
        "default_transaction_read_only = on",
        "statement_timeout = '1ms'",
        "lock_timeout = '1ms'",
        "default_transaction_isolation = 'serializable'",
        "idle_in_transaction_session_timeout = '1ms'",
        "DateStyle = 'SQL, DMY'",
        "search_path = public",
    ] {
        let undo = "SET default_transaction_read_only = off; SET statement_timeout = 0; SET lock_timeout = 0";
        c.psql_session("postgres", &[undo, "SET ROLE owner_role", &format!("ALTER DATABASE postgres SET {setting}")])
            .unwrap_or_else(|e| panic!("{setting}: {e}"));
    }
    // The settings apply to sessions that start now: restart the worker's. (This test's own
    // sessions undo them first.)
    c.stop("fast");
    c.start();
    let q = |sql: &str| {
        c.try_psql(
            "postgres",
            &format!(
                "SET statement_timeout = 0; SET lock_timeout = 0; SET default_transaction_read_only = off;
                 SET idle_in_transaction_session_timeout = 0; {sql}"
            ),
        )
    };
    let idle = wait_for(Duration::from_secs(10), || {
        q(&format!("SELECT query FROM pg_stat_activity WHERE backend_type = '{WORKER}'"))
            .is_ok_and(|a| a.starts_with("idle:"))
    });
    assert!(idle.is_some(), "{}", c.log_tail());
    c.put("job/session-001.jsonl", SPIKE_LINE);
    let indexed =
        wait_for(Duration::from_secs(10), || q("SELECT count(*) FROM cortex_buffer.event").is_ok_and(|n| n == "1"));
    assert!(indexed.is_some(), "the worker did not index under the database's settings:\n{}", c.log_tail());
    std::thread::sleep(Duration::from_millis(500));
    let complaints =
        c.log_text().lines().filter(|l| l.contains("cortex_buffer indexer") && l.contains("WARNING")).count();
    assert_eq!(complaints, 0, "{}", c.log_tail());
}
