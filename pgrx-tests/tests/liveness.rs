//! Liveness under concurrency, against real clusters: many reapers over many zombies (on both
//! job-table bindings), and many callers racing for a half-open breaker's single canary slot.

use cortex_buffer_e2e::{psql_concurrently, Cluster, CONTROL_PLANE_FIXTURE};

#[test]
fn eight_reapers_over_a_thousand_zombies_reap_each_exactly_once_on_both_bindings() {
    let c = Cluster::new("reapers", &["cortex_buffer.worker_enabled = off", "max_connections = 40"]);
    c.start();
    c.create_extension();
    c.psql(CONTROL_PLANE_FIXTURE);
    c.psql("CREATE DATABASE cp_bound");
    c.try_psql("cp_bound", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("cp_bound", CONTROL_PLANE_FIXTURE).unwrap_or_else(|e| panic!("{e}"));
    c.psql("ALTER DATABASE cp_bound SET cortex_buffer.job_table = 'cp.job'");
    // The control plane's table gets the reaper's index the documented way.
    let ddl = c.try_psql("cp_bound", "SELECT cortex_buffer.reaper_index_sql()").unwrap_or_default();
    c.try_psql("cp_bound", &ddl).unwrap_or_else(|e| panic!("{ddl}: {e}"));

    for (db, table, agent) in [
        ("postgres", "cortex_buffer.job", "gen_random_uuid()"),
        ("cp_bound", "cp.job", "(SELECT id FROM cp.agent LIMIT 1)"),
    ] {
        if table == "cp.job" {
            c.try_psql(db, "INSERT INTO cp.agent DEFAULT VALUES").unwrap_or_else(|e| panic!("{e}"));
        }
        c.try_psql(
            db,
            &format!(
                "INSERT INTO {table} (agent_id, status, payload, attempt, heartbeat_at)
                 SELECT {agent}, 'RUNNING', '{{}}', 1, now() - interval '10 minutes' - g * interval '1 millisecond'
                   FROM generate_series(1, 1000) g"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // Each reaper takes at most 100 per call and loops until nothing is left.
        let reaper = "DO $$ DECLARE n int; total int := 0; BEGIN
                          LOOP
                              SELECT count(*) INTO n FROM cortex_buffer.reap_zombies('5 minutes', 100);
                              EXIT WHEN n = 0;
                              total := total + n;
                          END LOOP;
                          RAISE NOTICE 'reaped %', total;
                      END $$";
        let outcomes = psql_concurrently(&c, db, vec![reaper.to_owned(); 8]);
        for o in &outcomes {
            assert!(o.is_ok(), "{table}: a reaper failed (transition error?): {o:?}");
        }
        let statuses = c
            .try_psql(db, &format!("SELECT string_agg(status::text || '=' || n, ',' ORDER BY status::text) FROM (SELECT status, count(*) n FROM {table} GROUP BY status) s"))
            .unwrap_or_default();
        assert_eq!(statuses, "RETRYING=1000", "{table}");
        let crashes = c
            .try_psql(
                db,
                "SELECT count(*) || ' ' || count(DISTINCT job_id) FROM cortex_buffer.crash WHERE reason = 'zombie'",
            )
            .unwrap_or_default();
        assert_eq!(crashes, "1000 1000", "{table}: every zombie reaped exactly once");
        c.try_psql(db, "TRUNCATE cortex_buffer.crash").unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn twenty_callers_racing_for_a_half_open_breaker_admit_exactly_one_canary() {
    let c = Cluster::new("canary", &["cortex_buffer.worker_enabled = off", "max_connections = 40"]);
    c.start();
    c.create_extension();
    let agent = "0193a8b0-1111-7abc-8def-0123456789ab";
    // Trip the breaker, then let its cooldown pass.
    for _ in 0..3 {
        c.psql(&format!("SELECT cortex_buffer.record_outcome('{agent}', gen_random_uuid(), false)"));
    }
    assert_eq!(c.psql(&format!("SELECT state FROM cortex_buffer.circuit_state('{agent}')")), "open");
    c.psql(&format!("UPDATE cortex_buffer.circuit SET open_until = now() WHERE agent_id = '{agent}'"));
    let callers: Vec<String> = (0..20)
        .map(|_| format!("SELECT pg_sleep(0.3); SELECT cortex_buffer.admit_job('{agent}', gen_random_uuid())"))
        .collect();
    let outcomes = psql_concurrently(&c, "postgres", callers);
    let admitted = outcomes.iter().filter(|o| o.as_ref().is_ok_and(|s| s.ends_with('t'))).count();
    let refused = outcomes.iter().filter(|o| o.as_ref().is_ok_and(|s| s.ends_with('f'))).count();
    assert_eq!((admitted, refused), (1, 19), "{outcomes:?}");
    assert_eq!(
        c.psql(&format!("SELECT count(*) FROM cortex_buffer.circuit_admission WHERE agent_id = '{agent}' AND canary")),
        "1"
    );
}
