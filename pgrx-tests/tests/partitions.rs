//! The partitioned layout end to end, where transactions commit: the worker indexes new files
//! into the partitions it makes; a committed cleanup deletes a finished job's directory and its
//! rows, and drops the partition whole when the directory held every file of its span;
//! recovery keeps working across the conversion; and pg_partman (Debian's
//! postgresql-15-partman) makes the partitions ahead, with the same names, which the indexer
//! writes straight into.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use cortex_buffer_e2e::{wait_for, Cluster};

fn line(job: &str, seq: i64) -> String {
    format!(
        r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{job}","session_id":"s","seq":{seq},"buffer_schema_version":1}}"#,
        seq % 60
    ) + "\n"
}

fn chown_postgres(path: &Path) {
    let out =
        Command::new("chown").args(["-R", "postgres:postgres"]).arg(path).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
}

fn age(path: &Path, days: u64) {
    let f = fs::File::options().append(true).open(path).unwrap_or_else(|e| panic!("{e}"));
    f.set_modified(SystemTime::now() - Duration::from_secs(days * 86_400 + 60)).unwrap_or_else(|e| panic!("{e}"));
}

/// A job in `status` with one session file of three events; returns its id.
fn job_with_file(c: &Cluster, status: &str, cols: &str, vals: &str) -> String {
    let id = c.psql(&format!(
        "INSERT INTO cortex_buffer.job (agent_id, status{cols}) VALUES (gen_random_uuid(), '{status}'{vals}) RETURNING id"
    ));
    c.put(&format!("{id}/session-001.jsonl"), &(line(&id, 0) + &line(&id, 1) + &line(&id, 2)));
    chown_postgres(&c.sessions);
    id
}

fn events_of(c: &Cluster, job: &str) -> String {
    c.psql(&format!(
        "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_id = '{job}'"
    ))
}

fn leaves(c: &Cluster, parent: &str) -> Vec<String> {
    c.psql(&format!(
        "SELECT string_agg(inhrelid::regclass::text, ',' ORDER BY inhrelid::regclass::text) FROM pg_inherits
          WHERE inhparent = 'cortex_buffer.{parent}'::regclass"
    ))
    .split(',')
    .filter(|s| !s.is_empty())
    .map(str::to_owned)
    .collect()
}

#[test]
fn the_worker_fills_the_partitions_and_a_committed_cleanup_drops_one_whole() {
    let c = Cluster::new("partitions", &["cortex_buffer.poll_interval = 100", "cortex_buffer.watch = poll"]);
    c.start();
    c.create_extension();
    // One job indexed before the conversion: its rows move, and its plan reads them after.
    let before = job_with_file(&c, "RUNNING", ", started_at, heartbeat_at", ", now(), now()");
    assert!(wait_for(Duration::from_secs(30), || events_of(&c, &before) == "3").is_some(), "indexed before");
    let plan_before = c.psql(&format!("SELECT cortex_buffer.recovery_plan('{before}') - 'fresh' - 'planned_at'"));
    let (out, notices) = c.psql_with_notices("postgres", "SELECT count(*) FROM cortex_buffer.partition_events(10, 1)");
    assert!(out.parse::<i64>().unwrap_or(0) >= 4, "{out}");
    assert!(notices.contains("partition_events: cortex_buffer.event_p0"), "progress: {notices}");
    assert_eq!(events_of(&c, &before), "3");
    assert_eq!(
        c.psql(&format!("SELECT cortex_buffer.recovery_plan('{before}') - 'fresh' - 'planned_at'")),
        plan_before
    );

    // Files numbered past the partitions made: the worker makes theirs and writes into them.
    c.psql("SELECT setval('cortex_buffer.session_file_seq', 95)");
    let done = job_with_file(
        &c,
        "COMPLETED",
        ", completed_at, updated_at",
        ", now() - interval '10 days', now() - interval '10 days'",
    );
    assert!(wait_for(Duration::from_secs(30), || events_of(&c, &done) == "3").is_some(), "the worker indexed it");
    let id: i64 =
        c.psql(&format!("SELECT file_id FROM cortex_buffer.session_file WHERE job_id = '{done}'")).parse().unwrap_or(0);
    assert_eq!(id / 10, 9, "file id {id}");
    assert_eq!(
        c.psql(&format!("SELECT DISTINCT tableoid::regclass::text FROM cortex_buffer.event WHERE file_id = {id}")),
        "cortex_buffer.event_p90"
    );
    assert!(leaves(&c, "corrupt_line").contains(&"cortex_buffer.corrupt_line_p90".to_owned()));
    // Close its span, age its file, and let the cleanup run for real (committed).
    c.psql("SELECT setval('cortex_buffer.session_file_seq', 120)");
    let file = c.sessions.join(&done).join("session-001.jsonl");
    age(&file, 10);
    c.psql(&format!("UPDATE cortex_buffer.session_file SET mtime = now() - interval '10 days' WHERE file_id = {id}"));
    let report = c.psql(
        "SELECT string_agg(action || ' ' || path || ' ' || rows_deleted, E'\\n' ORDER BY path)
           FROM cortex_buffer.cleanup_session_buffers() WHERE action IN ('delete_dir', 'drop_partition')",
    );
    // Its rows (3 events and its session_file row) are the directory's, as in the plain layout;
    // its span [90, 100) held only this file, so the partition goes whole instead of row by row.
    assert!(report.contains(&format!("delete_dir {}/{done} 4", c.sessions.display())), "{report}");
    assert!(report.contains("drop_partition cortex_buffer.event_p90 0"), "{report}");
    assert!(!c.sessions.join(&done).exists(), "the directory is unlinked at the commit");
    assert!(!leaves(&c, "event").contains(&"cortex_buffer.event_p90".to_owned()));
    assert!(!leaves(&c, "corrupt_line").contains(&"cortex_buffer.corrupt_line_p90".to_owned()));
    assert_eq!(c.psql(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE file_id = {id}")), "0");
    // The live job's partition stays, and so do its rows; partitions stand ready above 121.
    assert_eq!(events_of(&c, &before), "3");
    assert!(leaves(&c, "event").contains(&"cortex_buffer.event_p130".to_owned()), "{:?}", leaves(&c, "event"));
    assert!(c.worker_pid().is_some(), "the worker is still up");
}

#[test]
fn pg_partman_makes_the_partitions_ahead_and_the_indexer_writes_into_them() {
    let c = Cluster::new("partman", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    c.psql("CREATE SCHEMA partman");
    c.psql("CREATE EXTENSION pg_partman SCHEMA partman");
    c.psql("SELECT count(*) FROM cortex_buffer.partition_events(10, 0)");
    // As docs/operations.md (Partitioned events) says.
    c.psql("SELECT partman.create_parent('cortex_buffer.event', 'file_id', 'native', '10', p_premake := 4)");
    c.psql("SELECT partman.create_parent('cortex_buffer.corrupt_line', 'file_id', 'native', '10', p_premake := 4)");
    c.psql(
        "UPDATE partman.part_config SET inherit_privileges = true, retention = NULL
          WHERE parent_table IN ('cortex_buffer.event', 'cortex_buffer.corrupt_line')",
    );
    c.psql("SELECT partman.reapply_privileges('cortex_buffer.event')");
    c.psql("SELECT partman.reapply_privileges('cortex_buffer.corrupt_line')");
    c.psql("SELECT partman.run_maintenance()");
    let made = leaves(&c, "event");
    assert!(made.contains(&"cortex_buffer.event_p30".to_owned()), "{made:?}");
    // A file numbered into a partition pg_partman made: its rows go straight into it.
    c.psql("SELECT setval('cortex_buffer.session_file_seq', 32)");
    let job = job_with_file(&c, "RUNNING", ", started_at, heartbeat_at", ", now(), now()");
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    assert_eq!(events_of(&c, &job), "3");
    assert_eq!(
        c.psql(&format!(
            "SELECT DISTINCT e.tableoid::regclass::text FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
              WHERE f.job_id = '{job}'"
        )),
        "cortex_buffer.event_p30"
    );
    assert_eq!(
        c.psql("SELECT has_table_privilege('cortex_buffer_definer', 'cortex_buffer.event_p30', 'INSERT')"),
        "t",
        "inherit_privileges gives the indexer's role the parent's grants"
    );
}
