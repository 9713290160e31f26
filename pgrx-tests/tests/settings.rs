//! The settings a server has: in production exactly the twenty of docs/operations.md#settings,
//! and none of the test knobs (a leftover in postgresql.conf is a WARNING at start, `SET` of one
//! an error, and the knob's constant applies); in a test server the knobs are settings too.

use std::fs;
use std::path::Path;

use cortex_buffer_e2e::Cluster;

/// The settings docs/operations.md#settings lists, by name.
fn documented() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = text.find("\n## Settings\n").expect("docs/operations.md has ## Settings");
    let section = &text[start..];
    let end = section[1..].find("\n## ").map_or(section.len(), |i| i + 1);
    let mut names: Vec<String> = section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `cortex_buffer."))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("cortex_buffer.{n}"))
        .collect();
    names.sort();
    names
}

/// The server's `cortex_buffer.*` settings: pg_settings', and the job token (a secret
/// pg_settings does not show).
fn settings_of(c: &Cluster) -> Vec<String> {
    let listed =
        c.psql("SELECT string_agg(name, ' ' ORDER BY name) FROM pg_settings WHERE name LIKE 'cortex\\_buffer.%'");
    let mut names: Vec<String> = listed.split(' ').map(str::to_owned).collect();
    assert_eq!(c.psql("SELECT current_setting('cortex_buffer.job_token') = ''"), "t");
    names.push("cortex_buffer.job_token".to_owned());
    names.sort();
    names
}

#[test]
fn a_production_server_has_the_twenty_documented_settings_and_no_test_knob() {
    let c = Cluster::new(
        "settings-production",
        &["cortex_buffer.worker_enabled = off", "cortex_buffer.batch_rows = 7", "cortex_buffer.oversized_dir = '1MB'"],
    )
    .production();
    c.start();
    let want = documented();
    assert_eq!(want.len(), 20, "{want:?}");
    assert_eq!(settings_of(&c), want);
    // Settings of earlier versions, left in postgresql.conf: a WARNING at start, not a failure.
    let log = c.log_text();
    for gone in ["cortex_buffer.batch_rows", "cortex_buffer.oversized_dir"] {
        assert!(
            log.contains(&format!("invalid configuration parameter name \"{gone}\"")),
            "no warning for {gone}:\n{log}"
        );
    }
    // SET of one is an error; the knob's constant applies (a chunk over 4 MiB is refused).
    let refused = c.try_psql("postgres", "SET cortex_buffer.push_max_chunk = '1kB'").err().unwrap_or_default();
    assert!(refused.contains("cortex_buffer.push_max_chunk"), "{refused}");
    c.psql("CREATE EXTENSION cortex_buffer");
    let over = c
        .try_psql(
            "postgres",
            "SELECT * FROM cortex_buffer.append_session_bytes('n', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0,
                    ('\\x' || repeat('41', 4 * 1024 * 1024 + 1))::bytea, 'i')",
        )
        .err()
        .unwrap_or_default();
    assert!(over.contains("more than the 4096 kB a push takes"), "{over}");
}

#[test]
fn a_test_server_has_the_knobs_as_settings_too() {
    let c = Cluster::new("settings-testing", &["cortex_buffer.worker_enabled = off", "cortex_buffer.batch_rows = 7"]);
    c.start();
    assert_eq!(c.psql("SHOW cortex_buffer.batch_rows"), "7");
    let names = settings_of(&c);
    for knob in ["cortex_buffer.catch_up", "cortex_buffer.push_max_chunk", "cortex_buffer.quarantine_after"] {
        assert!(names.iter().any(|n| n == knob), "{knob} in {names:?}");
    }
    assert!(!names.iter().any(|n| n == "cortex_buffer.oversized_dir"), "oversized_dir is gone everywhere");
}
