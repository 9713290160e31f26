//! pg_cron (Debian's postgresql-15-cron, pg_cron 1.4) running the documented schedules for
//! real, every minute: the reaper turns a zombie into RETRYING, the cleanup deletes a terminal
//! job's directory, and cron.job_run_details records both runs as succeeded.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

#[test]
fn pg_cron_runs_the_reaper_and_the_cleanup_every_minute() {
    let c = Cluster::new(
        "cron",
        &[
            "shared_preload_libraries = 'cortex_buffer,pg_cron'",
            "cron.database_name = 'postgres'",
            "cortex_buffer.worker_enabled = off",
        ],
    );
    // pg_cron connects to the server like a client: over the cluster's own socket.
    let conf = c.pgdata.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
    text.push_str(&format!("cron.host = '{}'\n", c.socket_dir.display()));
    std::fs::write(&conf, text).unwrap_or_else(|e| panic!("{e}"));
    c.start();
    c.create_extension();
    c.psql("CREATE EXTENSION pg_cron");
    let zombie = c.psql(
        "INSERT INTO cortex_buffer.job (agent_id, status, attempt, started_at, heartbeat_at)
         VALUES (gen_random_uuid(), 'RUNNING', 1, now() - interval '1 hour', now() - interval '10 minutes') RETURNING id",
    );
    let done = c.psql(
        "INSERT INTO cortex_buffer.job (agent_id, status, completed_at)
         VALUES (gen_random_uuid(), 'COMPLETED', now() - interval '2 days') RETURNING id",
    );
    c.put(
        &format!("{done}/session-001.jsonl"),
        &format!(
            r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{done}","session_id":"s","seq":0}}"#
        ),
    );
    // The server deletes the directory: it must be the server's to delete.
    let dir = c.sessions.join(&done);
    let _ = std::process::Command::new("chown").args(["-R", "postgres:postgres"]).arg(&c.sessions).status();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    c.psql("SELECT cortex_buffer.index_sessions()");
    // The schedules of docs/operations.md (Retention), every minute here.
    c.psql("SELECT cron.schedule('cortex-reaper', '* * * * *', $$SELECT count(*) FROM cortex_buffer.reap_zombies()$$)");
    c.psql(
        "SELECT cron.schedule('cortex-cleanup', '* * * * *', $$SELECT count(*) FROM cortex_buffer.cleanup_session_buffers()$$)",
    );
    let runs = || {
        c.try_psql(
            "postgres",
            "SELECT string_agg(DISTINCT j.jobname || ':' || d.status, ',' ORDER BY j.jobname || ':' || d.status)
               FROM cron.job_run_details d JOIN cron.job j USING (jobid) WHERE d.status IN ('succeeded', 'failed')",
        )
        .unwrap_or_default()
    };
    assert!(
        wait_for(Duration::from_secs(150), || runs().contains("cortex-cleanup:succeeded")
            && runs().contains("cortex-reaper:succeeded"))
        .is_some(),
        "pg_cron did not run both schedules: {}\n{}",
        runs(),
        c.try_psql("postgres", "SELECT jobid, status, return_message FROM cron.job_run_details").unwrap_or_default()
    );
    assert!(!runs().contains(":failed"), "a scheduled run failed: {}", runs());
    assert_eq!(c.psql(&format!("SELECT status FROM cortex_buffer.job WHERE id = '{zombie}'")), "RETRYING");
    assert_eq!(c.psql(&format!("SELECT error->>'reason' FROM cortex_buffer.job WHERE id = '{zombie}'")), "zombie");
    assert!(!dir.exists(), "the terminal job's directory is still there");
    assert_eq!(c.psql(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir = '{done}'")), "0");
    let message = c.psql(
        "SELECT d.return_message FROM cron.job_run_details d JOIN cron.job j USING (jobid)
          WHERE j.jobname = 'cortex-cleanup' AND d.status = 'succeeded' ORDER BY d.runid LIMIT 1",
    );
    assert_eq!(message, "1 row", "the first cleanup returned its one count row");
}
