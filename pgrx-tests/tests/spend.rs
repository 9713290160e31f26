//! Spend under concurrency, against real clusters and on both job-table bindings: a request
//! recorded from many sessions counts once, concurrent recordings add up exactly, and 16
//! sessions reserving and settling against a small budget never overspend beyond what their
//! calls exceeded their estimates by, and are refused only when the budget (counting open
//! reservations) is used up.

use cortex_buffer_e2e::{psql_concurrently, Cluster, CONTROL_PLANE_FIXTURE};

const SONNET: &str = "claude-sonnet-4-5-20250929";

/// A cluster with the extension in `postgres` (cortex_buffer.job) and in `cp_bound` (bound to
/// the control plane's own table).
fn cluster(name: &str) -> Cluster {
    let c = Cluster::new(name, &["cortex_buffer.worker_enabled = off", "max_connections = 60"]);
    c.start();
    c.create_extension();
    c.psql("CREATE DATABASE cp_bound");
    c.try_psql("cp_bound", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("cp_bound", CONTROL_PLANE_FIXTURE).unwrap_or_else(|e| panic!("{e}"));
    c.psql("ALTER DATABASE cp_bound SET cortex_buffer.job_table = 'cp.job'");
    c
}

const BINDINGS: [(&str, &str); 2] = [("postgres", "cortex_buffer.job"), ("cp_bound", "cp.job")];

/// A RUNNING job in `table`; returns (job id, agent id).
fn new_job(c: &Cluster, db: &str, table: &str) -> (String, String) {
    let agent = if table == "cp.job" {
        c.try_psql(db, "INSERT INTO cp.agent DEFAULT VALUES RETURNING id").unwrap_or_else(|e| panic!("{e}"))
    } else {
        c.try_psql(db, "SELECT gen_random_uuid()").unwrap_or_else(|e| panic!("{e}"))
    };
    let job = c
        .try_psql(
            db,
            &format!(
                "INSERT INTO {table} (agent_id, status, payload) VALUES ('{agent}', 'RUNNING', '{{}}') RETURNING id"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    (job, agent)
}

fn q(c: &Cluster, db: &str, sql: &str) -> String {
    c.try_psql(db, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn a_request_recorded_from_eight_sessions_ten_times_each_counts_once_and_distinct_ones_add_up() {
    let c = cluster("spend-idempotent");
    let usage = r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_input_tokens": 8000, "cache_read_input_tokens": 1}"#;
    for (db, table) in BINDINGS {
        let (job, _) = new_job(&c, db, table);
        // Each call in its own transaction, so the sessions really race on the ledger.
        let same = format!(
            "DO $$ BEGIN FOR i IN 1..10 LOOP
                 PERFORM * FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{usage}', 'req_same');
                 COMMIT;
             END LOOP; END $$"
        );
        for o in psql_concurrently(&c, db, vec![same; 8]) {
            assert!(o.is_ok(), "{table}: {o:?}");
        }
        assert_eq!(
            q(&c, db, &format!("SELECT concat_ws(' ', input_tokens, cost_usd, llm_calls) FROM cortex_buffer.job_usage WHERE job_id = '{job}'")),
            "15000 0.1072503 1",
            "{table}: counted once"
        );
        assert_eq!(q(&c, db, &format!("SELECT count(*) FROM cortex_buffer.usage_ledger WHERE job_id = '{job}'")), "1");
        assert_eq!(
            q(&c, db, &format!("SELECT concat_ws(' ', tokens_in, tokens_out, cost_usd, llm_call_count) FROM {table} WHERE id = '{job}'")),
            "23001 2150 0.107250 1"
        );

        // 8 sessions x 25 distinct requests: 200 calls, exact totals, mirror in step.
        let (job, _) = new_job(&c, db, table);
        let distinct: Vec<String> = (0..8)
            .map(|s| {
                format!(
                    "DO $$ BEGIN FOR i IN 1..25 LOOP
                         PERFORM * FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{usage}', 's{s}-' || i);
                         COMMIT;
                     END LOOP; END $$"
                )
            })
            .collect();
        for o in psql_concurrently(&c, db, distinct) {
            assert!(o.is_ok(), "{table}: {o:?}");
        }
        assert_eq!(
            q(&c, db, &format!("SELECT concat_ws(' ', input_tokens, cache_read_tokens, trim_scale(cost_usd), llm_calls) FROM cortex_buffer.job_usage WHERE job_id = '{job}'")),
            "3000000 200 21.45006 200"
        );
        assert_eq!(
            q(
                &c,
                db,
                &format!("SELECT concat_ws(' ', tokens_in, cost_usd, llm_call_count) FROM {table} WHERE id = '{job}'")
            ),
            "4600200 21.450060 200"
        );
        assert_eq!(
            q(&c, db, &format!("SELECT (sum(cost_usd) = (SELECT cost_usd FROM cortex_buffer.job_usage WHERE job_id = '{job}'))::text FROM cortex_buffer.usage_ledger WHERE job_id = '{job}'")),
            "true",
            "the totals are the ledger's sum"
        );
    }
}

/// One session's loop: reserve; log the verdict together with what was used and held at that
/// moment; commit; settle with the actual usage if admitted. The log insert runs in the
/// reservation's own transaction, which still holds the job's usage-row lock, so no other
/// reservation or settlement can have changed the figures in between.
fn reserve_settle_loop(job: &str, session: usize, rounds: usize, estimate: u64, extra: &str) -> String {
    format!(
        "DO $$
         DECLARE r record; actual bigint;
         BEGIN
             FOR i IN 1..{rounds} LOOP
                 SELECT * INTO r FROM cortex_buffer.reserve_budget('{job}', '{{\"input_tokens\": {estimate}}}', '{SONNET}');
                 INSERT INTO attempt_log (job_id, session, round, allowed, reason, used_tokens, used_cost, held_tokens, held_cost)
                 SELECT '{job}', {session}, i, r.allowed, r.reason,
                        coalesce((SELECT input_tokens + cache_write_tokens + cache_read_tokens FROM cortex_buffer.job_usage WHERE job_id = '{job}'), 0),
                        coalesce((SELECT cost_usd FROM cortex_buffer.job_usage WHERE job_id = '{job}'), 0),
                        coalesce(sum(b.input_tokens), 0), coalesce(sum(b.cost_usd), 0)
                   FROM cortex_buffer.budget_reservation b
                  WHERE b.job_id = '{job}' AND b.settled_at IS NULL AND b.released_at IS NULL AND b.expires_at > now()
                    AND b.reservation_id IS DISTINCT FROM r.reservation_id;
                 COMMIT;
                 IF r.allowed THEN
                     actual := {estimate} + {extra};
                     INSERT INTO settle_log VALUES ('{job}', {session}, i, {estimate}, actual);
                     PERFORM * FROM cortex_buffer.settle_usage(r.reservation_id, jsonb_build_object('input_tokens', actual), 's{session}-' || i);
                     COMMIT;
                 END IF;
             END LOOP;
         END $$"
    )
}

fn prepare_logs(c: &Cluster, db: &str) {
    q(
        c,
        db,
        "CREATE TABLE IF NOT EXISTS attempt_log (job_id uuid, session int, round int, allowed bool, reason text,
             used_tokens bigint, used_cost numeric, held_tokens bigint, held_cost numeric);
         CREATE TABLE IF NOT EXISTS settle_log (job_id uuid, session int, round int, estimate bigint, actual bigint)",
    );
}

/// Checks every logged verdict against the rule, given the figures at that moment: admitted
/// only if used + held + estimate <= limit (and used + held < limit); refused only otherwise.
fn assert_every_verdict_follows_the_rule(
    c: &Cluster,
    db: &str,
    job: &str,
    estimate: u64,
    token_limit: Option<u64>,
    cost_limit: Option<&str>,
) {
    let est_cost = format!("({estimate} * 3.00 * 0.000001)");
    let fits = match (token_limit, cost_limit) {
        (Some(l), None) => {
            format!("(used_tokens + held_tokens < {l} AND used_tokens + held_tokens + {estimate} <= {l})")
        }
        (None, Some(l)) => format!("(used_cost + held_cost < {l} AND used_cost + held_cost + {est_cost} <= {l})"),
        _ => unreachable!("one limit at a time"),
    };
    let wrong = q(
        c,
        db,
        &format!(
            "SELECT count(*) FILTER (WHERE allowed <> {fits}) || ' of ' || count(*) || ' ('
                    || count(*) FILTER (WHERE allowed) || ' admitted)'
               FROM attempt_log WHERE job_id = '{job}'"
        ),
    );
    assert!(wrong.starts_with("0 of "), "verdicts against the rule: {wrong}");
    let refused = q(c, db, &format!("SELECT count(*) FROM attempt_log WHERE job_id = '{job}' AND NOT allowed"));
    assert_ne!(refused, "0", "the budget was never reached: the test proves nothing");
}

#[test]
fn sixteen_sessions_reserving_and_settling_never_overspend_and_are_refused_only_when_the_budget_is_used_up() {
    let c = cluster("spend-reservations");
    for (db, table) in BINDINGS {
        prepare_logs(&c, db);

        // 1. Token limit, actual = estimate: settled spend ends at the limit exactly.
        let (job, agent) = new_job(&c, db, table);
        q(&c, db, &format!("SELECT cortex_buffer.set_budget('{agent}', 50000)"));
        let scripts = (0..16).map(|s| reserve_settle_loop(&job, s, 8, 1000, "0")).collect();
        for o in psql_concurrently(&c, db, scripts) {
            assert!(o.is_ok(), "{table}: {o:?}");
        }
        assert_every_verdict_follows_the_rule(&c, db, &job, 1000, Some(50000), None);
        assert_eq!(
            q(&c, db, &format!("SELECT concat_ws(' ', input_tokens, llm_calls) FROM cortex_buffer.job_usage WHERE job_id = '{job}'")),
            "50000 50",
            "{table}: exactly the budget, not one call more"
        );

        // 2. Cost limit, actual = estimate: $0.15 at $0.003 a call is 50 calls.
        let (job, agent) = new_job(&c, db, table);
        q(&c, db, &format!("SELECT cortex_buffer.set_budget('{agent}', NULL, 0.15)"));
        let scripts = (0..16).map(|s| reserve_settle_loop(&job, s, 8, 1000, "0")).collect();
        for o in psql_concurrently(&c, db, scripts) {
            assert!(o.is_ok(), "{table}: {o:?}");
        }
        assert_every_verdict_follows_the_rule(&c, db, &job, 1000, None, Some("0.15"));
        assert_eq!(
            q(&c, db, &format!("SELECT concat_ws(' ', (cost_usd = 0.15)::text, llm_calls) FROM cortex_buffer.job_usage WHERE job_id = '{job}'")),
            "true 50"
        );

        // 3. Calls that spend more than estimated: overspend is bounded by the excess of the
        //    admitted calls (each exceeds its estimate by 0, 100 or 200 tokens).
        let (job, agent) = new_job(&c, db, table);
        q(&c, db, &format!("SELECT cortex_buffer.set_budget('{agent}', 50000)"));
        let scripts = (0..16).map(|s| reserve_settle_loop(&job, s, 8, 1000, "(i % 3) * 100")).collect();
        for o in psql_concurrently(&c, db, scripts) {
            assert!(o.is_ok(), "{table}: {o:?}");
        }
        assert_every_verdict_follows_the_rule(&c, db, &job, 1000, Some(50000), None);
        let bound = q(
            &c,
            db,
            &format!(
                "SELECT concat_ws(' ', u.input_tokens, 50000 + s.excess, (u.input_tokens <= 50000 + s.excess)::text)
                   FROM cortex_buffer.job_usage u,
                        (SELECT sum(greatest(actual - estimate, 0)) AS excess FROM settle_log WHERE job_id = '{job}') s
                  WHERE u.job_id = '{job}'"
            ),
        );
        assert!(bound.ends_with(" true"), "{table}: spent, bound: {bound}");
    }
}

#[test]
fn a_committed_price_change_reaches_a_session_that_cached_the_old_price() {
    let c = cluster("spend-price-cache");
    c.psql(
        "INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok,
             cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
         VALUES ('acme-1', '2020-01-01', 1, 1, 1, 1, 1)",
    );
    let cost = "SELECT cortex_buffer.llm_cost('{\"input_tokens\": 1000000}', 'acme-1')";
    let session = {
        let c = &c;
        std::thread::scope(|s| {
            let reader = s.spawn(move || c.psql_session("postgres", &[cost, "SELECT pg_sleep(1.5)", cost, cost]));
            std::thread::sleep(std::time::Duration::from_millis(500));
            // Another session changes the price in a transaction that rolls back, then for real.
            c.psql("BEGIN; UPDATE cortex_buffer.model_price SET input_per_mtok = 7 WHERE model = 'acme-1'; ROLLBACK");
            c.psql("UPDATE cortex_buffer.model_price SET input_per_mtok = 2 WHERE model = 'acme-1'");
            reader.join().unwrap_or_else(|_| Err("reader panicked".into()))
        })
    };
    let lines: Vec<String> =
        session.unwrap_or_else(|e| panic!("{e}")).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    assert_eq!(lines, ["1", "2", "2"], "the cached price of the first call, then the committed change");
}
