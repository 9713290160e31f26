# shellcheck shell=bash
# record_usage(), check_token_budget() and llm_cost() calls per second from 1 and from 8 sessions, each
# against the same work written as plain SQL (one statement each, prepared, on tables of the
# same shape with the same trigger), measured back to back in every round. Sourced by
# scripts/bench.sh.
#
# The plain-SQL record is what a careful hand-written version does: look up the price, compute
# the cost with numeric arithmetic from the usage's fields (one spelling only), lock the job,
# insert the ledger row once per request id, upsert the totals and mirror them into the job row.

ROUNDS="${BENCH_ROUNDS:-5}"
SECS="${BENCH_SECONDS:-4}"
JOBS=1000
USAGE='{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_input_tokens": 8000, "cache_read_input_tokens": 40000}'

bench_psql <<SQL
CREATE EXTENSION cortex_buffer;
INSERT INTO cortex_buffer.job (id, agent_id, status)
SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       ('00000000-0000-4000-9000-' || lpad((g % 100)::text, 12, '0'))::uuid, 'RUNNING'
  FROM generate_series(1, ${JOBS}) g;
INSERT INTO cortex_buffer.agent_budget (agent_id, max_input_tokens_per_job, max_cost_usd_per_job)
SELECT DISTINCT agent_id, 1000000000000, 1000000 FROM cortex_buffer.job;
-- The baseline's tables: same columns, indexes and updated_at trigger.
CREATE TABLE bench_job (LIKE cortex_buffer.job INCLUDING ALL);
CREATE TRIGGER bench_job_set_updated_at BEFORE UPDATE ON bench_job
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.job_set_updated_at();
INSERT INTO bench_job SELECT * FROM cortex_buffer.job;
CREATE TABLE bench_ledger (LIKE cortex_buffer.usage_ledger INCLUDING ALL);
CREATE TABLE bench_usage (LIKE cortex_buffer.job_usage INCLUDING ALL);
-- Every job has usage already, so checks read real rows.
SELECT count(*) FROM cortex_buffer.job j,
       LATERAL cortex_buffer.record_usage(j.id, 'claude-sonnet-4-5-20250929', '${USAGE}', 'warm-up');
INSERT INTO bench_usage SELECT * FROM cortex_buffer.job_usage;
INSERT INTO bench_ledger SELECT * FROM cortex_buffer.usage_ledger;
VACUUM ANALYZE;
SQL

W="${BENCH}/scripts"
mkdir -p "$W"
job_expr="('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid"
cat >"$W/record_cortex.sql" <<S
\set n random(1, ${JOBS})
\set r random(1, 2000000000)
SELECT * FROM cortex_buffer.record_usage(${job_expr}, 'claude-sonnet-4-5-20250929', '${USAGE}', 'r' || :client_id || '-' || :r);
S
cat >"$W/record_plain.sql" <<S
\set n random(1, ${JOBS})
\set r random(1, 2000000000)
WITH p AS (
    SELECT input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_read_per_mtok
      FROM cortex_buffer.model_price
     WHERE model = 'claude-sonnet-4-5-20250929' AND effective_from <= now()
     ORDER BY effective_from DESC LIMIT 1
), c AS (
    SELECT u, ((u->>'input_tokens')::numeric * input_per_mtok + (u->>'output_tokens')::numeric * output_per_mtok
               + (u->>'cache_creation_input_tokens')::numeric * cache_write_per_mtok
               + (u->>'cache_read_input_tokens')::numeric * cache_read_per_mtok) * 0.000001 AS cost
      FROM p, (SELECT '${USAGE}'::jsonb AS u) x
), j AS (
    SELECT id FROM bench_job WHERE id = ${job_expr} FOR NO KEY UPDATE
), counted AS (
    INSERT INTO bench_ledger (job_id, request_id, model, used_at, input_tokens, output_tokens, cache_write_tokens,
                              cache_write_1h_tokens, cache_read_tokens, cost_usd)
    SELECT j.id, 'r' || :client_id || '-' || :r, 'claude-sonnet-4-5-20250929', now(), (u->>'input_tokens')::int8,
           (u->>'output_tokens')::int8, (u->>'cache_creation_input_tokens')::int8, 0, (u->>'cache_read_input_tokens')::int8, cost
      FROM j, c
    ON CONFLICT (job_id, request_id) DO NOTHING
    RETURNING *
), totals AS (
    INSERT INTO bench_usage AS t (job_id, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
                                  cache_read_tokens, cost_usd, llm_calls, first_used_at, last_used_at)
    SELECT job_id, input_tokens, output_tokens, cache_write_tokens, 0, cache_read_tokens, cost_usd, 1, used_at, used_at
      FROM counted
    ON CONFLICT (job_id) DO UPDATE SET
        input_tokens = t.input_tokens + excluded.input_tokens,
        output_tokens = t.output_tokens + excluded.output_tokens,
        cache_write_tokens = t.cache_write_tokens + excluded.cache_write_tokens,
        cache_read_tokens = t.cache_read_tokens + excluded.cache_read_tokens,
        cost_usd = t.cost_usd + excluded.cost_usd,
        llm_calls = t.llm_calls + 1,
        last_used_at = greatest(t.last_used_at, excluded.last_used_at)
    RETURNING t.*
), mirrored AS (
    UPDATE bench_job AS b SET tokens_in = least(t.input_tokens + t.cache_write_tokens + t.cache_read_tokens, 2147483647),
                              tokens_out = least(t.output_tokens, 2147483647),
                              cost_usd = least(round(t.cost_usd, 6), 999999.999999),
                              llm_call_count = least(t.llm_calls, 2147483647)
      FROM totals AS t WHERE b.id = t.job_id
)
SELECT input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, llm_calls FROM totals;
S
cat >"$W/cost_cortex.sql" <<S
SELECT cortex_buffer.llm_cost('${USAGE}', 'claude-sonnet-4-5-20250929');
S
cat >"$W/cost_plain.sql" <<S
SELECT ((u->>'input_tokens')::numeric * input_per_mtok + (u->>'output_tokens')::numeric * output_per_mtok
        + (u->>'cache_creation_input_tokens')::numeric * cache_write_per_mtok
        + (u->>'cache_read_input_tokens')::numeric * cache_read_per_mtok) * 0.000001
  FROM (SELECT '${USAGE}'::jsonb AS u) x,
       LATERAL (SELECT * FROM cortex_buffer.model_price
                 WHERE model = 'claude-sonnet-4-5-20250929' AND effective_from <= now()
                 ORDER BY effective_from DESC LIMIT 1) p;
S
cat >"$W/check_cortex.sql" <<S
\set n random(1, ${JOBS})
SELECT * FROM cortex_buffer.check_token_budget(${job_expr});
S
cat >"$W/check_plain.sql" <<S
\set n random(1, ${JOBS})
SELECT (a.max_cost_usd_per_job IS NULL OR coalesce(u.cost_usd, 0) < a.max_cost_usd_per_job)
       AND (a.max_input_tokens_per_job IS NULL
            OR coalesce(u.input_tokens + u.cache_write_tokens + u.cache_read_tokens, 0) < a.max_input_tokens_per_job) AS allowed,
       coalesce(u.input_tokens + u.cache_write_tokens + u.cache_read_tokens, 0), a.max_input_tokens_per_job,
       coalesce(u.cost_usd, 0), a.max_cost_usd_per_job
  FROM bench_job j
  LEFT JOIN bench_usage u ON u.job_id = j.id
  LEFT JOIN cortex_buffer.agent_budget a ON a.agent_id = j.agent_id
 WHERE j.id = ${job_expr};
S
chmod -R a+rX "$W"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A tps ratio
echo "spend: ${ROUNDS} rounds of ${SECS} s per variant; cortex_buffer and plain SQL back to back" >&2
for r in $(seq 1 "${ROUNDS}"); do
    for clients in 1 8; do
        for op in record check cost; do
            c="$(BENCH_CLIENTS=$clients pgbench_tps "${SECS}" "$W/${op}_cortex.sql")"
            p="$(BENCH_CLIENTS=$clients pgbench_tps "${SECS}" "$W/${op}_plain.sql")"
            tps[$op.$clients.cortex]+="${c}"$'\n'
            tps[$op.$clients.plain]+="${p}"$'\n'
            ratio[$op.$clients]+="$(awk -v c="$c" -v p="$p" 'BEGIN { print c / p }')"$'\n'
            printf '  round %d: %-6s %d session(s): cortex_buffer %8.0f/s  plain SQL %8.0f/s\n' "$r" "$op" "$clients" "$c" "$p" >&2
        done
    done
done

# Totals stay exact under the load: the ledger adds up to job_usage.
exact="$(bench_psql -c "SELECT bool_and(u.cost_usd = l.cost AND u.llm_calls = l.calls)
                          FROM cortex_buffer.job_usage u
                          JOIN (SELECT job_id, sum(cost_usd) cost, count(*) calls FROM cortex_buffer.usage_ledger GROUP BY job_id) l
                            USING (job_id)")"

echo
echo "== spend: calls per second, median of ${ROUNDS} rounds (${JOBS} jobs, random job per call) =="
printf '%-22s %10s %10s %8s %s\n' "" "cortex" "plain SQL" "ratio" "(ratio spread)"
for op in record check cost; do
    for clients in 1 8; do
        case "$op" in record) name=record_usage ;; check) name=check_token_budget ;; *) name=llm_cost ;; esac
        c="$(printf '%s' "${tps[$op.$clients.cortex]}" | median)"
        p="$(printf '%s' "${tps[$op.$clients.plain]}" | median)"
        m="$(printf '%s' "${ratio[$op.$clients]}" | median)"
        lo="$(printf '%s' "${ratio[$op.$clients]}" | sort -g | head -1)"
        hi="$(printf '%s' "${ratio[$op.$clients]}" | sort -g | tail -1)"
        printf '%-18s x%-3d %10.0f %10.0f %8.2f (%.2f-%.2f)\n' "$name" "$clients" "$c" "$p" "$m" "$lo" "$hi"
    done
done
for op in record check; do
    c1="$(printf '%s' "${tps[$op.1.cortex]}" | median)"
    c8="$(printf '%s' "${tps[$op.8.cortex]}" | median)"
    awk -v a="$c1" -v b="$c8" -v op="$op" 'BEGIN { printf "%s: 8 sessions give %.2fx the calls/s of 1 (2 cores here)\n", op, b / a }'
done
echo "ledger sums equal job_usage totals after the run: ${exact}"
