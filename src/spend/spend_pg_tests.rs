//! `#[pg_test]`s of prices, costs, usage recording, budgets and reservations; the job-table
//! ones run on cortex_buffer.job and on the control plane's own table.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{assert_fails, new_job, new_job_with, one, run, sqlstate_of, with_each_binding};

    const SONNET: &str = "claude-sonnet-4-5-20250929";

    fn cost(usage: &str, model: &str) -> String {
        one(&format!("SELECT cortex_buffer.llm_cost('{usage}', '{model}')::text"))
    }

    #[pg_test]
    fn llm_cost_is_exact_for_every_spelling() {
        // The seed's own example: $0.10725 exactly (the seed rounds it to $0.11).
        let seed = r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000}"#;
        assert_eq!(cost(seed, SONNET), "0.10725");
        for usage in [
            r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_input_tokens": 8000, "cache_read_input_tokens": 0}"#,
            r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_input_tokens": 8000,
                "cache_creation": {"ephemeral_5m_input_tokens": 8000, "ephemeral_1h_input_tokens": 0}}"#,
            r#"{"tokenUsage": {"inputTokens": 15000, "outputTokens": 2150, "cacheCreationTokens": 8000, "cacheReadTokens": 0}}"#,
        ] {
            assert_eq!(cost(usage, SONNET), "0.10725", "{usage}");
        }
        // 1-hour cache writes at 2 x input: 8000 x 6.00 / 1e6 = 0.048 instead of 0.03.
        let hour = r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_input_tokens": 8000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 8000}}"#;
        assert_eq!(cost(hour, SONNET), "0.12525");
        assert_eq!(cost(seed, "claude-opus-4-1-20250805"), "0.53625");
        assert_eq!(one(&format!("SELECT pg_typeof(cortex_buffer.llm_cost('{seed}', '{SONNET}'))::text")), "numeric");
        assert_eq!(one(&format!("SELECT coalesce(cortex_buffer.llm_cost(NULL, '{SONNET}')::text, 'null')")), "null");
    }

    #[pg_test]
    fn llm_cost_of_every_real_claude_code_usage_matches_postgres_numeric_arithmetic() {
        let fixture = include_str!("../../crates/core/src/spend/testdata/claude_code_usage.jsonl");
        let mismatches = Spi::get_one_with_args::<i64>(
            "WITH u AS (SELECT line::jsonb AS u FROM unnest(string_to_array(rtrim($1, E'\\n'), E'\\n')) AS line)
             SELECT count(*) FILTER (WHERE cortex_buffer.llm_cost(u, 'claude-sonnet-4-5-20250929') IS DISTINCT FROM
                    ((u->>'input_tokens')::numeric * 3.00 + (u->>'output_tokens')::numeric * 15.00
                     + coalesce((u->'cache_creation'->>'ephemeral_5m_input_tokens')::numeric,
                                (u->>'cache_creation_input_tokens')::numeric) * 3.75
                     + coalesce((u->'cache_creation'->>'ephemeral_1h_input_tokens')::numeric, 0) * 6.00
                     + (u->>'cache_read_input_tokens')::numeric * 0.30) * 0.000001)
                    + 1000000 * (count(*) <> 347)::int
               FROM u",
            &[fixture.into()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mismatches, Some(0));
    }

    #[pg_test]
    fn the_price_in_force_at_the_calls_time_applies() {
        run("INSERT INTO cortex_buffer.model_price
                 (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
             VALUES ('acme-1', '2026-01-01', 1, 2, 1.25, 2, 0.1), ('acme-1', '2026-06-01', 0.5, 1, 0.625, 1, 0.05)");
        let at = |t: &str| {
            one(&format!("SELECT cortex_buffer.llm_cost('{{\"input_tokens\": 1000000, \"output_tokens\": 1000}}', 'acme-1', '{t}')::text"))
        };
        assert_eq!(at("2026-03-01"), "1.002");
        assert_eq!(at("2026-06-01"), "0.501", "a price applies from its effective_from on");
        assert_eq!(at("2027-01-01"), "0.501");
        let (state, hint) =
            sqlstate_of("SELECT cortex_buffer.llm_cost('{\"input_tokens\": 1}', 'acme-1', '2025-12-31')");
        assert_eq!(state, "42704", "before the first price");
        assert!(hint.is_some_and(|h| h.contains("cortex_buffer.model_price")));
        // Seeded prices are fixed; operators' own rows are theirs to change.
        run("UPDATE cortex_buffer.model_price SET input_per_mtok = 0.4 WHERE model = 'acme-1' AND effective_from = '2026-06-01'");
        assert_fails(
            &format!("UPDATE cortex_buffer.model_price SET input_per_mtok = 1 WHERE model = '{SONNET}'"),
            "55000",
        );
        assert_fails(&format!("DELETE FROM cortex_buffer.model_price WHERE model = '{SONNET}'"), "55000");
        assert_eq!(
            sqlstate_of("INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok) VALUES ('bad', now(), -1, 0, 0, 0, 0)").0,
            "23514"
        );
    }

    #[pg_test]
    fn the_price_cache_follows_changes_made_in_the_same_transaction() {
        let acme = || {
            let (state, _) = sqlstate_of("SELECT cortex_buffer.llm_cost('{\"input_tokens\": 1000000}', 'acme-2')");
            if state == "00000" {
                one("SELECT cortex_buffer.llm_cost('{\"input_tokens\": 1000000}', 'acme-2')::text")
            } else {
                state
            }
        };
        assert_eq!(acme(), "42704");
        run("INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok)
             VALUES ('acme-2', '2020-01-01', 1.5, 0, 0, 0, 0)");
        assert_eq!(acme(), "1.5", "an unknown model is not cached as unknown forever");
        run("UPDATE cortex_buffer.model_price SET input_per_mtok = 2.5 WHERE model = 'acme-2'");
        assert_eq!(acme(), "2.5");
        run("DELETE FROM cortex_buffer.model_price WHERE model = 'acme-2'");
        assert_eq!(acme(), "42704");
    }

    #[pg_test]
    fn llm_cost_refuses_bad_usage_and_unknown_models() {
        let (state, hint) = sqlstate_of("SELECT cortex_buffer.llm_cost('{\"input_tokens\": 1}', 'claude-sonnet-4-5')");
        assert_eq!(state, "42704", "names match exactly");
        assert!(hint.is_some_and(|h| h.contains("INSERT INTO cortex_buffer.model_price")));
        for bad in [
            r#"{"input_tokens": -1}"#,
            r#"{"input_tokens": 1.5}"#,
            r#"{"input_tokens": "12"}"#,
            r#"[1]"#,
            r#"{}"#,
            r#"{"cache_creation_input_tokens": 10, "cache_creation": {"ephemeral_5m_input_tokens": 9}}"#,
        ] {
            assert_fails(&format!("SELECT cortex_buffer.llm_cost('{bad}', '{SONNET}')"), "22023");
        }
        assert_fails(&format!("SELECT cortex_buffer.llm_cost('{{\"input_tokens\": 1e17}}', '{SONNET}')"), "22003");
    }

    fn record(job: &str, usage: &str, request: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, llm_calls, duplicate::text)
               FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{usage}', {request})"
        ))
    }

    #[pg_test]
    fn record_usage_keeps_exact_totals_and_counts_a_request_once() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let call = r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000, "cache_read_tokens": 1}"#;
            assert_eq!(record(&job, call, "'req_1'"), "15000 2150 8000 1 0.1072503 1 false");
            for _ in 0..9 {
                assert_eq!(record(&job, call, "'req_1'"), "15000 2150 8000 1 0.1072503 1 true");
            }
            assert_eq!(record(&job, call, "'req_2'"), "30000 4300 16000 2 0.2145006 2 false");
            // Without a request id every call counts.
            assert_eq!(record(&job, call, "NULL"), "45000 6450 24000 3 0.3217509 3 false");
            assert_eq!(record(&job, call, "NULL"), "60000 8600 32000 4 0.4290012 4 false");
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.usage_ledger WHERE job_id = '{job}'")),
                "4"
            );
            // The control plane's own columns follow: all input tokens, the rounded cost.
            assert_eq!(
                one(&format!(
                    "SELECT concat_ws(' ', tokens_in, tokens_out, cost_usd, llm_call_count) FROM {table} WHERE id = '{job}'"
                )),
                "92004 8600 0.429001 4"
            );
            assert_eq!(
                one(&format!("SELECT cost_usd::text FROM cortex_buffer.job_usage WHERE job_id = '{job}'")),
                "0.4290012",
                "our own total is exact"
            );
        });
    }

    #[pg_test]
    fn record_usage_prices_at_the_calls_time_and_clamps_the_bound_columns() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let (state, _) = sqlstate_of(&format!(
                "SELECT * FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{{\"input_tokens\": 1}}', 'r', '2025-01-01')"
            ));
            assert_eq!(state, "42704", "Sonnet 4.5 had no price before its release");
            // 3 x 2^31 tokens: exact in job_usage, clamped in the integer column.
            let big = r#"{"input_tokens": 6442450944}"#;
            assert_eq!(record(&job, big, "'big'"), "6442450944 0 0 0 19327.352832 1 false");
            assert_eq!(
                one(&format!("SELECT concat_ws(' ', tokens_in, cost_usd) FROM {table} WHERE id = '{job}'")),
                "2147483647 19327.352832"
            );
        });
    }

    #[pg_test]
    fn record_usage_errors_say_what_is_wrong() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.record_usage(gen_random_uuid(), '{SONNET}', '{{\"input_tokens\": 1}}')"),
                "P0002",
            );
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.record_usage(NULL, '{SONNET}', '{{\"input_tokens\": 1}}')"),
                "22004",
            );
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.record_usage('{job}', NULL, '{{\"input_tokens\": 1}}')"),
                "22004",
            );
            assert_fails(&format!("SELECT * FROM cortex_buffer.record_usage('{job}', '{SONNET}', NULL)"), "22004");
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.record_usage('{job}', 'nope', '{{\"input_tokens\": 1}}')"),
                "42704",
            );
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{{\"input_tokens\": -3}}')"),
                "22023",
            );
            // Nothing was counted by the failed calls.
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.usage_ledger WHERE job_id = '{job}'")),
                "0"
            );
            // NULL `at` is now.
            assert_eq!(
                one(&format!(
                    "SELECT duplicate::text FROM cortex_buffer.record_usage('{job}', '{SONNET}', '{{\"input_tokens\": 1}}', NULL, NULL)"
                )),
                "false"
            );
        });
    }

    fn budget(job: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', allowed::text, reason, input_tokens, coalesce(max_input_tokens::text, '-'), cost_usd,
                              coalesce(max_cost_usd::text, '-'))
               FROM cortex_buffer.check_token_budget('{job}')"
        ))
    }

    fn agent_of(table: &str, job: &str) -> String {
        one(&format!("SELECT agent_id::text FROM {table} WHERE id = '{job}'"))
    }

    #[pg_test]
    fn budgets_are_exhausted_when_used_reaches_the_limit() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let agent = agent_of(table, &job);
            assert_eq!(budget(&job), "true no_budget 0 - 0 -");
            // 1000 input + 500 cache write + 500 cache read = 2000 budget input tokens;
            // $0.003 + $0.0015 + $0.001875 + $0.00015 = $0.006525.
            let call = r#"{"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 500}"#;
            record(&job, call, "'a'");
            assert_eq!(
                one(&format!("SELECT concat_ws(' ', max_input_tokens_per_job, max_cost_usd_per_job) FROM cortex_buffer.set_budget('{agent}', 4000, 1.00)")),
                "4000 1"
            );
            assert_eq!(budget(&job), "true within_budget 2000 4000 0.006525 1");
            record(&job, call, "'b'");
            assert_eq!(budget(&job), "false input_token_budget_exhausted 4000 4000 0.01305 1", "used = limit");
            run(&format!("SELECT cortex_buffer.set_budget('{agent}', NULL, 0.01305)"));
            assert_eq!(budget(&job), "false cost_budget_exhausted 4000 - 0.01305 0.01305");
            run(&format!("SELECT cortex_buffer.set_budget('{agent}', NULL, NULL)"));
            assert_eq!(budget(&job), "true no_budget 4000 - 0.01305 -");
            // 0 allows nothing, even to a job that never called.
            let fresh = new_job(table, "RUNNING");
            run(&format!("SELECT cortex_buffer.set_budget('{}', 0)", agent_of(table, &fresh)));
            assert_eq!(budget(&fresh), "false input_token_budget_exhausted 0 0 0 -");

            assert_fails(&format!("SELECT * FROM cortex_buffer.set_budget('{agent}', -1)"), "22023");
            assert_fails(&format!("SELECT * FROM cortex_buffer.set_budget('{agent}', NULL, -0.01)"), "22023");
            assert_fails("SELECT * FROM cortex_buffer.set_budget(NULL, 5)", "22004");
            assert_fails("SELECT * FROM cortex_buffer.check_token_budget(gen_random_uuid())", "P0002");
        });
    }

    #[pg_test]
    fn an_exhausted_budget_stops_retries_and_dead_letters_zombies() {
        with_each_binding(|table| {
            let job = new_job_with(table, "RUNNING", "attempt, heartbeat_at", "1, now() - interval '1 hour'");
            let agent = agent_of(table, &job);
            let decision = || {
                one(&format!("SELECT concat_ws(' ', retry::text, reason) FROM cortex_buffer.retry_decision('{job}')"))
            };
            assert_eq!(decision(), "true retry");
            record(&job, r#"{"input_tokens": 200000, "output_tokens": 20000}"#, "'x'");
            // $0.60 + $0.30 = $0.90 used.
            run(&format!("SELECT cortex_buffer.set_budget('{agent}', 500000, 0.900001)"));
            assert_eq!(decision(), "true retry");
            run(&format!("SELECT cortex_buffer.set_budget('{agent}', 500000, 0.90)"));
            assert_eq!(decision(), "false token_budget_exhausted", "used = limit is exhausted");
            let reaped = one(&format!(
                "SELECT string_agg(new_status, ',') FROM cortex_buffer.reap_zombies() WHERE job_id = '{job}'"
            ));
            assert_eq!(reaped, "DEAD_LETTER");
            assert_eq!(
                one(&format!("SELECT error->'retry_decision'->>'reason' FROM {table} WHERE id = '{job}'")),
                "token_budget_exhausted"
            );
        });
    }

    fn reserve(job: &str, usage: &str) -> (String, String) {
        let row = one(&format!(
            "SELECT concat_ws(' ', coalesce(reservation_id::text, '-'), allowed::text, reason)
               FROM cortex_buffer.reserve_budget('{job}', '{usage}', '{SONNET}')"
        ));
        let mut parts = row.splitn(2, ' ');
        (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned())
    }

    fn settle(reservation: &str, usage: &str, request: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', input_tokens, cost_usd, llm_calls, duplicate::text)
               FROM cortex_buffer.settle_usage('{reservation}', '{usage}', {request})"
        ))
    }

    const THOUSAND_IN: &str = r#"{"input_tokens": 1000}"#;

    #[pg_test]
    fn reservations_hold_budget_until_settled_released_or_expired() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            let agent = agent_of(table, &job);
            run(&format!("SELECT cortex_buffer.set_budget('{agent}', 3000)"));
            let (a, verdict) = reserve(&job, THOUSAND_IN);
            assert_eq!(verdict, "true within_budget");
            let (b, _) = reserve(&job, THOUSAND_IN);
            let (c, _) = reserve(&job, THOUSAND_IN);
            assert_eq!(
                reserve(&job, r#"{"input_tokens": 1}"#),
                ("-".to_owned(), "false input_token_budget_exhausted".to_owned())
            );
            // Nothing is used yet: the plain check still allows; reservations are what holds.
            assert_eq!(budget(&job), "true within_budget 0 3000 0 -");

            assert_eq!(settle(&a, r#"{"input_tokens": 400}"#, "'req-a'"), "400 0.0012 1 false");
            assert_eq!(settle(&a, r#"{"input_tokens": 400}"#, "'req-a'"), "400 0.0012 1 true", "settling again");
            // 400 used + 2000 held: 600 left.
            assert_eq!(reserve(&job, r#"{"input_tokens": 601}"#).1, "false input_token_budget_insufficient");
            let (d, verdict) = reserve(&job, r#"{"input_tokens": 600}"#);
            assert_eq!(verdict, "true within_budget");

            assert_eq!(one(&format!("SELECT cortex_buffer.release_reservation('{b}')::text")), "true");
            assert_eq!(one(&format!("SELECT cortex_buffer.release_reservation('{b}')::text")), "false");
            assert_eq!(one(&format!("SELECT cortex_buffer.release_reservation('{a}')::text")), "false", "settled");
            // An expired reservation holds nothing, and its call can still be settled.
            run(&format!(
                "UPDATE cortex_buffer.budget_reservation SET expires_at = now() - interval '1 second' WHERE reservation_id = '{c}'"
            ));
            let (e, verdict) = reserve(&job, r#"{"input_tokens": 2000}"#);
            assert_eq!(verdict, "true within_budget", "400 used + 600 held + 2000 = 3000");
            assert_eq!(settle(&c, THOUSAND_IN, "NULL"), "1400 0.0042 2 false");
            assert_eq!(settle(&d, r#"{"input_tokens": 600}"#, "NULL"), "2000 0.006 3 false");
            assert_eq!(settle(&e, r#"{"input_tokens": 2500}"#, "NULL"), "4500 0.0135 4 false", "actual above estimate");
            assert_eq!(budget(&job), "false input_token_budget_exhausted 4500 3000 0.0135 -");
            assert_eq!(
                one(&format!("SELECT count(*)::text FROM cortex_buffer.usage_ledger WHERE job_id = '{job}' AND reservation_id IS NOT NULL")),
                "4"
            );
        });
    }

    #[pg_test]
    fn reservation_errors_say_what_is_wrong() {
        with_each_binding(|table| {
            let job = new_job(table, "RUNNING");
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.reserve_budget(gen_random_uuid(), '{THOUSAND_IN}', '{SONNET}')"),
                "P0002",
            );
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.reserve_budget('{job}', '{THOUSAND_IN}', 'nope')"),
                "42704",
            );
            assert_fails(
                &format!(
                    "SELECT * FROM cortex_buffer.reserve_budget('{job}', '{{\"input_tokens\": 0.5}}', '{SONNET}')"
                ),
                "22023",
            );
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.settle_usage(gen_random_uuid(), '{THOUSAND_IN}')"),
                "P0002",
            );
            assert_fails(&format!("SELECT * FROM cortex_buffer.settle_usage(NULL, '{THOUSAND_IN}')"), "22004");
            assert_fails("SELECT cortex_buffer.release_reservation(gen_random_uuid())", "P0002");
            let (r, _) = reserve(&job, THOUSAND_IN);
            assert_fails(
                &format!("SELECT * FROM cortex_buffer.settle_usage('{r}', '{{\"input_tokens\": -1}}')"),
                "22023",
            );
            assert_eq!(settle(&r, THOUSAND_IN, "NULL"), "1000 0.003 1 false", "a failed settle left it open");
        });
    }

    #[pg_test]
    fn old_reservations_are_deleted_by_later_ones() {
        let job = new_job("cortex_buffer.job", "RUNNING");
        let (r, _) = reserve(&job, THOUSAND_IN);
        run(&format!(
            "UPDATE cortex_buffer.budget_reservation SET forget_at = now() - interval '1 second' WHERE reservation_id = '{r}'"
        ));
        reserve(&job, THOUSAND_IN);
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM cortex_buffer.budget_reservation WHERE reservation_id = '{r}'")),
            "0"
        );
        run("SET LOCAL cortex_buffer.reservation_timeout = '30min'");
        let (long, _) = reserve(&job, THOUSAND_IN);
        assert_eq!(
            one(&format!("SELECT (expires_at = now() + interval '30 minutes')::text FROM cortex_buffer.budget_reservation WHERE reservation_id = '{long}'")),
            "true"
        );
    }
}
