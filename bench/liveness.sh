# shellcheck shell=bash
# Zombie reaper and heartbeat costs. Sourced by scripts/bench.sh.
#
# 1. reap_zombies() with 100 stale jobs among 10 000 jobs vs among 1 000 000, same run: the
#    reaper walks the partial index on heartbeat_at WHERE status = 'RUNNING', so its cost should
#    follow the stale jobs, not the table (target ratio <= 1.5). Each round also reaps 100 stale
#    jobs by hand (the same transitions in plain SQL, in a session of its own, just before or
#    after): this machine has slow spells that last seconds and slow every statement alike, so
#    the reaper is read against the hand reaper of its own round.
# 2. heartbeat() calls per second on a job table with that index and on one without it: an
#    indexed heartbeat_at makes every beat a non-HOT update.

ROUNDS="${BENCH_ROUNDS:-7}"
SECS="${BENCH_SECONDS:-4}"

bench_psql -c "CREATE EXTENSION cortex_buffer"
for n in 10000 1000000; do
    db="jobs_${n}"
    bench_psql -c "CREATE DATABASE ${db}"
    pg "${BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "${RUN}" -p "${PORT}" -d "${db}" <<SQL
CREATE EXTENSION cortex_buffer;
-- 99% finished jobs, 1% running with fresh heartbeats: the shape of a long-lived control plane.
INSERT INTO cortex_buffer.job (agent_id, status, heartbeat_at, completed_at)
SELECT gen_random_uuid(),
       CASE WHEN g % 100 = 0 THEN 'RUNNING' ELSE 'COMPLETED' END::cortex_buffer.job_status,
       now() - (g % 30) * interval '1 second',
       CASE WHEN g % 100 = 0 THEN NULL ELSE now() END
  FROM generate_series(1, ${n} - 100) g;
VACUUM ANALYZE cortex_buffer.job;
SQL
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
STALE="INSERT INTO cortex_buffer.job (agent_id, status, heartbeat_at)
SELECT gen_random_uuid(), 'RUNNING', now() - interval '10 minutes' FROM generate_series(1, 100);"
REAP="SELECT count(*) FROM cortex_buffer.reap_zombies('5 minutes', 1000);"
# By hand: lock the stale jobs, record each as a crash, mark them FAILED with a reason, then
# RETRYING (the transition trigger wants the two steps), as reap_zombies does.
HAND="BEGIN;
WITH z AS (SELECT id, agent_id, attempt FROM cortex_buffer.job
            WHERE status = 'RUNNING' AND heartbeat_at < now() - interval '5 minutes'
            ORDER BY heartbeat_at LIMIT 1000 FOR UPDATE SKIP LOCKED),
     c AS (INSERT INTO cortex_buffer.crash (job_id, agent_id, attempt, reason)
           SELECT id, agent_id, attempt, 'zombie' FROM z),
     f AS (UPDATE cortex_buffer.job j
              SET status = 'FAILED',
                  error = jsonb_build_object('reason', 'zombie', 'last_heartbeat', j.heartbeat_at, 'attempt', j.attempt)
             FROM z WHERE j.id = z.id RETURNING j.id)
SELECT array_agg(id)::text AS ids FROM f \\gset
UPDATE cortex_buffer.job SET status = 'RETRYING' WHERE id = ANY (:'ids'::uuid[]);
COMMIT;"
# timed <db> <statements>: 100 stale jobs made, then the statements timed in a fresh session
# (as cron runs the reaper); prints the sum of their times in ms.
timed() {
    printf '%s\n\\timing on\n%s\n' "${STALE}" "$2" |
        pg "${BIN}/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "${RUN}" -p "${PORT}" -d "$1" |
        sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk '{ s += $1 } END { printf "%.3f", s }'
}
reaped_all() {
    local left
    left="$(pg "${BIN}/psql" -X -q -A -t -h "${RUN}" -p "${PORT}" -d "$1" -c \
        "SELECT count(*) FROM cortex_buffer.job WHERE status = 'RUNNING' AND heartbeat_at < now() - interval '5 minutes'")"
    [ "$left" = 0 ] || die "$2: ${left} stale jobs left in $1"
}
declare -A reap_ms hand_ms per_round
echo "reaper: ${ROUNDS} rounds; each inserts 100 jobs whose heartbeat is 10 minutes old and reaps them, with reap_zombies() and by hand" >&2
for r in $(seq 1 "${ROUNDS}"); do
    for n in 10000 1000000; do
        # Which goes first alternates by round.
        if [ $((r % 2)) = 1 ]; then
            ms="$(timed "jobs_${n}" "${REAP}")"; reaped_all "jobs_${n}" "reap_zombies"
            hand="$(timed "jobs_${n}" "${HAND}")"; reaped_all "jobs_${n}" "the hand reaper"
        else
            hand="$(timed "jobs_${n}" "${HAND}")"; reaped_all "jobs_${n}" "the hand reaper"
            ms="$(timed "jobs_${n}" "${REAP}")"; reaped_all "jobs_${n}" "reap_zombies"
        fi
        reap_ms[$n]+="${ms}"$'\n'
        hand_ms[$n]+="${hand}"$'\n'
        per_round[$n]+="$(awk -v a="$ms" -v b="$hand" 'BEGIN { printf "%.4f", a / b }')"$'\n'
        printf '  round %d: %7d jobs  %8.2f ms, by hand %8.2f ms\n' "$r" "$n" "$ms" "$hand" >&2
    done
done
small="$(printf '%s' "${reap_ms[10000]}" | median)"
large="$(printf '%s' "${reap_ms[1000000]}" | median)"
hand_large="$(printf '%s' "${hand_ms[1000000]}" | median)"
vs_hand_small="$(printf '%s' "${per_round[10000]}" | median)"
vs_hand_large="$(printf '%s' "${per_round[1000000]}" | median)"

# Heartbeats: two copies of the job table bound in turn, one with the reaper's index.
bench_psql <<'SQL'
CREATE TABLE beat_indexed (LIKE cortex_buffer.job INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE beat_indexed ADD PRIMARY KEY (id);
CREATE INDEX ON beat_indexed (heartbeat_at) WHERE status = 'RUNNING';
CREATE TABLE beat_plain (LIKE beat_indexed INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE beat_plain ADD PRIMARY KEY (id);
INSERT INTO beat_indexed (id, agent_id, status)
SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, gen_random_uuid(), 'RUNNING' FROM generate_series(1, 1000) g;
INSERT INTO beat_plain SELECT * FROM beat_indexed;
VACUUM ANALYZE beat_indexed, beat_plain;
SQL
W="${BENCH}/scripts"
mkdir -p "$W"
cat >"$W/heartbeat.sql" <<'S'
\set n random(1, 1000)
SELECT cortex_buffer.heartbeat(('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid);
S
chmod -R a+rX "$W"
declare -A beats
for r in $(seq 1 "${ROUNDS}"); do
    for t in beat_indexed beat_plain; do
        tps="$(PGOPTIONS="-c cortex_buffer.job_table=public.${t}" pgbench_tps "${SECS}" "$W/heartbeat.sql")"
        beats[$t]+="${tps}"$'\n'
        printf '  round %d: heartbeat on %-13s %8.0f/s\n' "$r" "$t" "$tps" >&2
    done
done
hot="$(bench_psql -c "SELECT string_agg(relname || ' ' || round(100.0 * n_tup_hot_upd / greatest(n_tup_upd, 1)) || '%', ', ' ORDER BY relname) FROM pg_stat_user_tables WHERE relname LIKE 'beat_%'")"
bi="$(printf '%s' "${beats[beat_indexed]}" | median)"
bp="$(printf '%s' "${beats[beat_plain]}" | median)"

echo
echo "== zombie reaper: 100 stale jobs, median of ${ROUNDS} =="
printf 'among     10 000 jobs: %8.2f ms\n' "$small"
printf 'among  1 000 000 jobs: %8.2f ms\n' "$large"
awk -v s="$small" -v l="$large" 'BEGIN { printf "ratio 1M / 10k:        %8.3f  (target <= 1.5: the cost follows the stale jobs, not the table)\n", l / s }'
printf 'hand reaper among  1 000 000 jobs: %8.2f ms\n' "$hand_large"
printf 'ratio reap_zombies / hand SQL (10k): %6.3f  (median of the rounds'"'"' ratios)\n' "$vs_hand_small"
printf 'ratio reap_zombies / hand SQL (1M):  %6.3f  (median of the rounds'"'"' ratios)\n' "$vs_hand_large"
echo
echo "== heartbeat(), 1 client, median of ${ROUNDS} =="
printf 'with the partial index on heartbeat_at: %8.0f calls/s\n' "$bi"
printf 'without it:                             %8.0f calls/s\n' "$bp"
awk -v i="$bi" -v p="$bp" 'BEGIN { printf "the index costs %.1f%% of heartbeat throughput\n", 100 * (1 - i / p) }'
echo "HOT updates: ${hot}"
