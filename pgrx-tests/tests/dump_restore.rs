//! pg_dump and pg_restore keep everything an operator or the control plane wrote: jobs,
//! checkpoint history, crashes, breaker settings, prices they added, budgets and usage; and
//! the prices cortex_buffer ships are restored once (by CREATE EXTENSION), not twice.

use cortex_buffer_e2e::Cluster;

/// Row counts and content digests of every table whose data pg_dump keeps.
const DATA_FINGERPRINT: &str = "
SELECT string_agg(t || ' ' || n || ' ' || d, E'\\n' ORDER BY t) FROM (
  SELECT 'job' t, count(*) n, md5(string_agg(id::text || status || coalesce(checkpoint::text, ''), ',' ORDER BY id)) d FROM cortex_buffer.job
  UNION ALL SELECT 'checkpoint_history', count(*), md5(string_agg(checkpoint_id::text || crc, ',' ORDER BY history_id)) FROM cortex_buffer.checkpoint_history
  UNION ALL SELECT 'crash', count(*), md5(string_agg(job_id::text || coalesce(exit_code, -1), ',' ORDER BY crash_id)) FROM cortex_buffer.crash
  UNION ALL SELECT 'circuit_config', count(*), md5(string_agg(agent_id::text || failure_threshold, ',' ORDER BY agent_id)) FROM cortex_buffer.circuit_config
  UNION ALL SELECT 'model_price', count(*), md5(string_agg(model || effective_from || input_per_mtok || seeded, ',' ORDER BY model, effective_from)) FROM cortex_buffer.model_price
  UNION ALL SELECT 'agent_budget', count(*), md5(string_agg(agent_id::text || coalesce(max_cost_usd_per_job::text, '-'), ',' ORDER BY agent_id)) FROM cortex_buffer.agent_budget
  UNION ALL SELECT 'job_usage', count(*), md5(string_agg(job_id::text || cost_usd || llm_calls, ',' ORDER BY job_id)) FROM cortex_buffer.job_usage
  UNION ALL SELECT 'usage_ledger', count(*), md5(string_agg(usage_id || coalesce(request_id, '-') || cost_usd, ',' ORDER BY usage_id)) FROM cortex_buffer.usage_ledger
) f";

#[test]
fn a_dump_restores_into_a_new_database_with_every_row_once() {
    let c = Cluster::new("dump", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    c.psql(
        "INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
             ('00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-0000000000aa', 'RUNNING');
         SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-000000000001', '{\"step_index\": 0}');
         SELECT * FROM cortex_buffer.write_checkpoint('00000000-0000-4000-8000-000000000001', '{\"step_index\": 1}');
         SELECT cortex_buffer.record_crash('00000000-0000-4000-8000-000000000001', 137, 'OOMKilled');
         INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('00000000-0000-4000-8000-0000000000aa', 5);
         INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok,
                                                cache_write_1h_per_mtok, cache_read_per_mtok, source)
             VALUES ('acme-1', '2026-01-01', 1, 2, 1.25, 2, 0.1, 'operator');
         SELECT cortex_buffer.set_budget('00000000-0000-4000-8000-0000000000aa', 100000, 2.5);
         SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-000000000001', 'acme-1', '{\"input_tokens\": 7}', 'r1');
         SELECT * FROM cortex_buffer.record_usage('00000000-0000-4000-8000-000000000001', 'claude-sonnet-4-5-20250929', '{\"output_tokens\": 7}', 'r2');",
    );
    let before = c.psql(DATA_FINGERPRINT);
    assert!(before.contains("model_price 7 "), "six seeded prices and the operator's:\n{before}");

    let dump = c.base.join("dump.pgdump");
    std::fs::write(&dump, b"").unwrap_or_else(|e| panic!("{e}"));
    let _ = std::process::Command::new("chown").arg("postgres").arg(&dump).status();
    let dump_path = dump.to_string_lossy().into_owned();
    c.client_tool("pg_dump", &["-d", "postgres", "-Fc", "-f", &dump_path]).unwrap_or_else(|e| panic!("pg_dump: {e}"));
    c.psql("CREATE DATABASE restored");
    // --exit-on-error: a duplicate seeded price (or any other conflict) fails the test.
    c.client_tool("pg_restore", &["-d", "restored", "--exit-on-error", &dump_path])
        .unwrap_or_else(|e| panic!("pg_restore: {e}"));
    let after = c.try_psql("restored", DATA_FINGERPRINT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after, before, "restored data differs");

    // The restored database works: sequences continue after the restored rows.
    let next = c
        .try_psql(
            "restored",
            "SELECT (cortex_buffer.record_crash('00000000-0000-4000-8000-000000000001', 1, 'x')
                     > (SELECT max(crash_id) FROM cortex_buffer.crash WHERE exit_code = 137))::text",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(next, "true");
}
