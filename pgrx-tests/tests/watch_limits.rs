//! The kernel's watch limit, lowered for the length of one test (a file of its own, so that no
//! other test of this binary runs meanwhile; test binaries run one after the other): `auto`
//! falls back to polling, says so once in the log (with a HINT) and in `indexer_status`, keeps
//! indexing, and goes back to notification when the limit allows it.

use std::fs;
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

const LIMIT: &str = "/proc/sys/fs/inotify/max_user_watches";

/// Restores the limit, whatever happens.
struct Restore(String);
impl Drop for Restore {
    fn drop(&mut self) {
        let _ = fs::write(LIMIT, &self.0);
    }
}

#[test]
fn auto_falls_back_to_polling_when_watches_run_out_and_comes_back_when_they_do_not() {
    let Ok(old) = fs::read_to_string(LIMIT) else {
        eprintln!("skipped: {LIMIT} is not readable here");
        return;
    };
    let c = Cluster::new("watch-limits", &["cortex_buffer.poll_interval = 200", "cortex_buffer.rescan_interval = 2"]);
    for j in 0..50 {
        c.put(&format!("job-{j:02}/session-001.jsonl"), "{\"__type__\":\"X\"}\n");
    }
    if fs::write(LIMIT, "20").is_err() {
        eprintln!("skipped: {LIMIT} is not writable here");
        return;
    }
    let restore = Restore(old);
    c.start();
    c.create_extension();
    let status =
        |c: &Cluster| c.try_psql("postgres", "SELECT watch_mode FROM cortex_buffer.indexer_status").unwrap_or_default();
    let fell_back = wait_for(Duration::from_secs(20), || status(&c) == "poll (fallback)");
    assert!(fell_back.is_some(), "{:?}\n{}", status(&c), c.log_tail());
    assert_eq!(c.log_count("polling every cortex_buffer.poll_interval instead of watching"), 1, "{}", c.log_tail());
    assert_eq!(c.log_count("fs.inotify.max_user_watches"), 1);
    // Polling indexes everything meanwhile, new files included.
    c.put("job-new/session-001.jsonl", "{\"__type__\":\"X\"}\n");
    let all = wait_for(Duration::from_secs(20), || c.psql("SELECT count(*) FROM cortex_buffer.event") == "51");
    assert!(all.is_some(), "{}", c.log_tail());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.log_count("polling every cortex_buffer.poll_interval instead of watching"), 1, "said once");

    // The limit raised: at the next try (rescan_interval) it watches again.
    drop(restore);
    let back = wait_for(Duration::from_secs(20), || status(&c) == "notify");
    assert!(back.is_some(), "{}", c.log_tail());
    assert_eq!(c.log_count("change notification works again"), 1);
}
