//! The indexer at fleet scale: discovery from the kernel's change notification (no polling),
//! a lost-event rescan, the polling fallback, batches with a failing file, and several indexer
//! processes, each against a real cluster with cortex_buffer preloaded.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cortex_buffer_e2e::{kill, wait_for, Cluster};

/// A settings line that turns polling off for the test's length: only notification (or a
/// rescan) can find anything.
const NO_POLLING: [&str; 3] =
    ["cortex_buffer.watch = notify", "cortex_buffer.poll_interval = 3600000", "cortex_buffer.rescan_interval = 3600"];

fn spike(seq: u64) -> String {
    format!(
        "{{\"type\":\"TOOL_CALL\",\"timestamp\":\"2026-02-23T14:30:22Z\",\"job_id\":\"j\",\"session_id\":\"s\",\"seq\":{seq},\"tool\":\"bash\"}}\n"
    )
}

fn events_of(c: &Cluster, rel: &str) -> i64 {
    c.try_psql(
        "postgres",
        &format!(
            "SELECT count(*) FROM cortex_buffer.event JOIN cortex_buffer.session_file USING (file_id) WHERE path = '{}'",
            c.sessions.join(rel).display()
        ),
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(-1)
}

fn watching(c: &Cluster) -> String {
    c.try_psql("postgres", "SELECT watch_mode FROM cortex_buffer.indexer_status").unwrap_or_default()
}

fn start_watching(c: &Cluster) {
    c.start();
    c.create_extension();
    let up = wait_for(Duration::from_secs(20), || watching(c) == "notify" && c.worker_activity().starts_with("idle:"));
    assert!(up.is_some(), "not watching: {:?}\n{}", watching(c), c.log_tail());
}

#[test]
fn changes_are_found_without_polling_new_directories_old_files_and_replaced_files() {
    let c = Cluster::new("watch-discovery", &NO_POLLING);
    c.put("job-old/session-001.jsonl", &spike(0));
    start_watching(&c);
    assert_eq!(events_of(&c, "job-old/session-001.jsonl"), 1, "the start-up walk indexes what is there");
    let passes = |c: &Cluster| c.psql("SELECT passes FROM cortex_buffer.indexer_status");
    let rescans = c.psql("SELECT w->>'rescans' FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w");

    // A new job directory and its file, found without any poll or index_now().
    c.put("job-new/session-001.jsonl", &spike(0));
    let found = wait_for(Duration::from_secs(5), || events_of(&c, "job-new/session-001.jsonl") == 1);
    eprintln!("new directory's line visible after {found:?}");
    assert!(found.is_some(), "{}", c.log_tail());

    // An append to a file untouched for an hour.
    let old = c.sessions.join("job-old/session-001.jsonl");
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    fs::File::options().write(true).open(&old).and_then(|f| f.set_modified(hour_ago)).expect("backdate");
    let before = passes(&c);
    fs::OpenOptions::new().append(true).open(&old).and_then(|mut f| f.write_all(spike(1).as_bytes())).expect("append");
    let found = wait_for(Duration::from_secs(5), || events_of(&c, "job-old/session-001.jsonl") == 2);
    assert!(found.is_some(), "{}", c.log_tail());
    assert_ne!(passes(&c), before);

    // Deleted and recreated: a new file, a new generation.
    // (Other first bytes: a file system may give the new file the old one's inode, and then
    // only its bytes tell it apart.)
    fs::remove_file(&old).expect("remove");
    c.put("job-old/session-001.jsonl", &(spike(10) + &spike(11) + &spike(12)));
    let regenerated = wait_for(Duration::from_secs(5), || {
        c.psql(&format!(
            "SELECT generation || ' ' || valid_lines FROM cortex_buffer.session_file WHERE path = '{}'",
            old.display()
        )) == "2 3"
    });
    assert!(regenerated.is_some(), "{}", c.psql("SELECT row_to_json(f) FROM cortex_buffer.session_file f"));
    assert_eq!(events_of(&c, "job-old/session-001.jsonl"), 3);

    // A deleted file is gone.
    fs::remove_file(c.sessions.join("job-new/session-001.jsonl")).expect("remove");
    let gone = wait_for(Duration::from_secs(5), || {
        c.files_recorded("/job-new/session-001.jsonl") == 1
            && c.psql("SELECT count(*) FROM cortex_buffer.session_file WHERE gone_at IS NOT NULL") == "1"
    });
    assert!(gone.is_some(), "{}", c.log_tail());

    // All of it without another walk of the volume.
    assert_eq!(
        c.psql("SELECT w->>'rescans' FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w"),
        rescans,
        "no rescan was needed"
    );
}

#[test]
fn a_tail_waiting_to_settle_is_indexed_when_it_settles_without_polling() {
    let mut conf = NO_POLLING.to_vec();
    conf.push("cortex_buffer.settle_period = 500");
    let c = Cluster::new("watch-settle", &conf);
    start_watching(&c);
    let line = spike(0);
    c.put("job/session-001.jsonl", line.trim_end());
    // The unterminated line is held, then judged when it has been quiet for the settle period:
    // its own timer, not a poll, brings it back. (Judged: its line is counted. A row only
    // discovered, not yet indexed, has tail_pending false too.)
    let judged = wait_for(Duration::from_secs(5), || {
        c.psql(
            "SELECT NOT tail_pending AND total_lines = 1 FROM cortex_buffer.session_file
              WHERE path LIKE '%/job/session-001.jsonl'",
        ) == "t"
    });
    assert!(judged.is_some(), "{}", c.psql("SELECT row_to_json(f) FROM cortex_buffer.session_file f"));
    assert_eq!(events_of(&c, "job/session-001.jsonl"), 1, "a settled tail that parses is an event");
}

#[test]
fn a_burst_that_overflows_the_kernel_queue_is_followed_by_a_rescan_and_nothing_is_missed() {
    let c = Cluster::new("watch-overflow", &NO_POLLING);
    start_watching(&c);
    let pid = c.worker_pid().expect("worker");
    let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    // Stopped, the worker reads nothing: each new file queues at least a create, a write and a
    // close, so this many files overflow the queue.
    let files = limit / 2 + 100;
    // The directory first, and watched, so that every file in it raises events.
    let dir = c.sessions.join("burst");
    fs::create_dir_all(&dir).expect("dir");
    let watched =
        wait_for(Duration::from_secs(5), || c.psql("SELECT watches FROM cortex_buffer.indexer_status") == "2");
    assert!(watched.is_some(), "{}", c.log_tail());
    kill(pid, "STOP");
    for i in 0..files {
        fs::write(dir.join(format!("s-{i:05}.jsonl")), spike(0)).expect("write");
    }
    kill(pid, "CONT");
    let all = wait_for(Duration::from_secs(300), || {
        c.psql("SELECT count(*) FROM cortex_buffer.event JOIN cortex_buffer.session_file USING (file_id) WHERE job_dir = 'burst'")
            == files.to_string()
    });
    assert!(all.is_some(), "{}\n{}", c.psql("SELECT row_to_json(s) FROM cortex_buffer.indexer_status s"), c.log_tail());
    // The walk the lost events call for comes at most every 10 s after the last one.
    let walked = wait_for(Duration::from_secs(30), || {
        c.log_count("walking the whole sessions directory: the kernel's event queue overflowed") == 1
    });
    assert!(walked.is_some(), "{}", c.log_tail());
    assert_eq!(
        c.log_count("walking the whole sessions directory: the kernel's event queue overflowed"),
        1,
        "{}",
        c.log_tail()
    );
    assert_eq!(watching(&c), "notify", "an overflow is no reason to stop watching");
}

#[test]
fn the_watch_mode_follows_a_reload_and_polling_still_finds_files() {
    let c = Cluster::new("watch-reload", &["cortex_buffer.poll_interval = 200"]);
    start_watching(&c);
    c.set_and_reload("cortex_buffer.watch", "poll");
    assert!(wait_for(Duration::from_secs(10), || watching(&c) == "poll").is_some(), "{}", c.log_tail());
    c.put("job/session-001.jsonl", &spike(0));
    assert!(wait_for(Duration::from_secs(5), || events_of(&c, "job/session-001.jsonl") == 1).is_some());
    c.set_and_reload("cortex_buffer.watch", "auto");
    assert!(wait_for(Duration::from_secs(10), || watching(&c) == "notify").is_some(), "{}", c.log_tail());
    c.put("job/session-002.jsonl", &spike(0));
    assert!(wait_for(Duration::from_secs(5), || events_of(&c, "job/session-002.jsonl") == 1).is_some());
}

#[test]
fn a_failing_file_in_a_batch_does_not_keep_the_others_from_committing() {
    let c = Cluster::new("watch-batch", &NO_POLLING);
    start_watching(&c);
    let pid = c.worker_pid().expect("worker");
    kill(pid, "STOP");
    // Forty lines each: the batch is big enough to be read by one thread for all its files.
    let body: String = (0..40).map(spike).collect();
    for i in 0..20 {
        c.put(&format!("job/s-{i:02}.jsonl"), &body);
    }
    // Unreadable for the server's user: opening it fails inside the batch.
    let bad = c.sessions.join("job/s-07.jsonl");
    fs::set_permissions(&bad, fs::Permissions::from_mode(0o000)).expect("chmod");
    kill(pid, "CONT");
    let done = wait_for(Duration::from_secs(20), || {
        c.psql("SELECT count(*) FILTER (WHERE valid_lines = 40) || ' ' || count(*) FILTER (WHERE failures > 0) FROM cortex_buffer.session_file")
            == "19 1"
    });
    assert!(
        done.is_some(),
        "{}\n{}",
        c.psql("SELECT path, valid_lines, failures FROM cortex_buffer.session_file"),
        c.log_tail()
    );
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.event"), "760");
    // Readable again: its retry timer brings it back, without a poll.
    fs::set_permissions(&bad, fs::Permissions::from_mode(0o644)).expect("chmod");
    c.set_and_reload("cortex_buffer.poll_interval", "300");
    let retried = wait_for(Duration::from_secs(20), || c.psql("SELECT count(*) FROM cortex_buffer.event") == "800");
    assert!(retried.is_some(), "{}", c.log_tail());
}

#[test]
fn two_workers_split_the_directories_and_each_shows_in_the_status() {
    let mut conf = NO_POLLING.to_vec();
    conf.push("cortex_buffer.workers = 2");
    let c = Cluster::new("watch-two", &conf);
    start_watching(&c);
    let procs = wait_for(Duration::from_secs(10), || {
        c.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cortex_buffer indexer'") == "2"
    });
    assert!(procs.is_some(), "{}", c.log_tail());
    assert_eq!(
        c.psql("SELECT string_agg(application_name, ',' ORDER BY application_name) FROM pg_stat_activity WHERE backend_type = 'cortex_buffer indexer'"),
        "cortex_buffer indexer,cortex_buffer indexer 2"
    );
    for j in 0..40 {
        c.put(&format!("job-{j:02}/session-001.jsonl"), &(spike(0) + &spike(1)));
    }
    let all = wait_for(Duration::from_secs(20), || c.psql("SELECT count(*) FROM cortex_buffer.event") == "80");
    assert!(all.is_some(), "{}\n{}", c.psql("SELECT workers FROM cortex_buffer.indexer_status"), c.log_tail());
    let split = c.psql(
        "SELECT string_agg((w->>'worker') || ':' || (w->>'watch_mode') || ':' || ((w->>'events_indexed')::int > 0), ' ' ORDER BY w->>'worker')
           FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w",
    );
    assert_eq!(split, "1:notify:true 2:handed by worker 1:true", "each indexed its own share");
    assert_eq!(c.psql("SELECT count(*) FROM cortex_buffer.indexer_worker()"), "2");
    // index_now() wakes both.
    assert_eq!(c.psql("SELECT cortex_buffer.index_now()"), "t");
}
