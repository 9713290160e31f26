//! The indexer under an operator's changes to `cortex_buffer.event`, and under interrupts, on
//! a real cluster with the background worker:
//!
//! - after `ALTER TABLE cortex_buffer.event ALTER seq TYPE numeric` (an int8 datum read as a
//!   pointer killed the backend before 0.6.0) the worker indexes correct values, and neither it
//!   nor the postmaster restarts;
//! - `pg_cancel_backend()` stops a long `index_sessions()` within a moment, with SQLSTATE 57014,
//!   and nothing of it is kept.

use std::time::{Duration, Instant};

use cortex_buffer_e2e::{psql_concurrently, wait_for, Cluster};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";

fn line(seq: u64) -> String {
    format!(
        r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{JOB}","seq":{seq},"step_index":1}}"#
    )
}

#[test]
fn a_changed_column_type_never_crashes_the_server() {
    let c = Cluster::new("alter-type", &["cortex_buffer.poll_interval = 100", "cortex_buffer.settle_period = 100"]);
    c.start();
    c.create_extension();
    let started = c.psql("SELECT pg_postmaster_start_time()");
    let worker = wait_for(Duration::from_secs(30), || c.worker_pid().is_some()).and_then(|_| c.worker_pid());
    assert!(worker.is_some(), "{}", c.log_tail());
    // (job_sessions reads seq: a type change drops the view first.)
    c.psql("ALTER EXTENSION cortex_buffer DROP VIEW cortex_buffer.job_sessions; DROP VIEW cortex_buffer.job_sessions");
    c.psql("ALTER TABLE cortex_buffer.event ALTER COLUMN seq TYPE numeric, ALTER COLUMN step_index TYPE bigint, ALTER COLUMN payload TYPE json");
    let body: String = (0..500).map(|i| line(i) + "\n").collect();
    c.put(&format!("{JOB}/session-001.jsonl"), &body);
    let done = wait_for(Duration::from_secs(30), || {
        c.try_psql("postgres", "SELECT count(*) FROM cortex_buffer.event").is_ok_and(|n| n == "500")
    });
    assert!(done.is_some(), "{}", c.log_tail());
    assert_eq!(
        c.psql("SELECT sum(seq) || ' ' || pg_typeof(sum(seq)) || ' ' || min(step_index) || ' ' || count(*) FILTER (WHERE payload->>'type' = 'TOOL_RESULT') FROM cortex_buffer.event"),
        "124750 numeric 1 500"
    );
    assert_eq!(c.psql("SELECT pg_postmaster_start_time()"), started, "the postmaster reinitialised the cluster");
    assert_eq!(c.worker_pid(), worker, "the worker restarted");
    assert_eq!(c.log_count("terminated by signal"), 0, "{}", c.log_tail());
}

#[test]
fn pg_cancel_backend_stops_a_long_index_sessions() {
    let c = Cluster::new("cancel", &["cortex_buffer.worker_enabled = off", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    // Enough lines that indexing takes several seconds.
    for k in 0..4 {
        let body: String = (0..100_000).map(|i| line(i) + "\n").collect();
        c.put(&format!("{JOB}/session-00{k}.jsonl"), &body);
    }
    let long = format!(
        "SET application_name = 'long_index'; SELECT count(*) FROM cortex_buffer.index_sessions('{}')",
        c.sessions.display()
    );
    let canceller = "DO $$ BEGIN
            FOR i IN 1..400 LOOP
                PERFORM pg_sleep(0.05);
                EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'long_index' AND state = 'active');
            END LOOP;
            PERFORM pg_sleep(0.5);
            PERFORM pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'long_index';
        END $$"
        .to_owned();
    let t = Instant::now();
    let results = psql_concurrently(&c, "postgres", vec![long, canceller]);
    let took = t.elapsed();
    let err = results[0].as_ref().err().cloned().unwrap_or_default();
    assert!(err.contains("57014") && err.contains("canceling statement due to user request"), "{results:?}");
    assert!(results[1].is_ok(), "{results:?}");
    assert!(took < Duration::from_secs(8), "the cancel took effect only after {took:?}");
    assert_eq!(
        c.psql("SELECT count(*) || ' ' || coalesce(sum(failures), 0) FROM cortex_buffer.session_file"),
        "0 0",
        "the cancelled statement left nothing behind and counted no failure"
    );
    // Indexing again completes.
    assert_eq!(
        c.psql(&format!("SELECT sum(events_added) FROM cortex_buffer.index_sessions('{}')", c.sessions.display())),
        "400000"
    );
}

#[test]
fn a_statement_timeout_interrupts_index_sessions_on_either_insert_path() {
    let c = Cluster::new("timeout", &["cortex_buffer.worker_enabled = off", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    let body: String = (0..300_000).map(|i| line(i) + "\n").collect();
    c.put(&format!("{JOB}/session-001.jsonl"), &body);
    let index = format!("SELECT sum(events_added) FROM cortex_buffer.index_sessions('{}')", c.sessions.display());
    for path in ["direct", "sql"] {
        if path == "sql" {
            c.psql(
                "CREATE FUNCTION public.pass_through() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            );
            c.psql("CREATE TRIGGER pass_through BEFORE INSERT ON cortex_buffer.event FOR EACH ROW EXECUTE FUNCTION public.pass_through()");
        }
        let t = Instant::now();
        let err = c.psql_session("postgres", &["SET statement_timeout = '300ms'", &index]).err().unwrap_or_default();
        assert!(err.contains("canceling statement due to statement timeout"), "{path}: {err}");
        assert!(t.elapsed() < Duration::from_secs(5), "{path}: the timeout took effect after {:?}", t.elapsed());
        assert_eq!(
            c.psql(
                "SELECT count(*) || ' ' || (SELECT count(*) FROM cortex_buffer.event) FROM cortex_buffer.session_file"
            ),
            "0 0",
            "{path}: nothing of the interrupted statement is kept"
        );
    }
    // Without the timeout the same statement completes, through SQL now.
    assert_eq!(c.psql(&index), "300000");
}
