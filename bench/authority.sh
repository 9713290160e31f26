# shellcheck shell=bash
# Per-job authority's cost on an agent's hottest calls. Sourced by scripts/bench.sh.
#
# heartbeat() and write_checkpoint() by an agent session that presents its job token (checked on
# every call against the job's current attempt, then run as cortex_buffer_agent_call), against the same
# calls by a control-plane session, which acts without a token with its own rights: 0.6.0's
# path, in the same binary. Same cluster, rounds interleaved; the ratio is the agent's time per
# call over the baseline's (target <= 1.15). Two shapes:
# - fleet: each transaction is one call for a random job of 1 000 (the token of that job set in
#   the same transaction; the baseline runs the identical statements), the way many pods spread
#   their calls;
# - one hot row: one job called back to back, thousands of times a second, where the check's fixed
#   cost (the secret read as the definer role, the MAC, the role switch) weighs most: the token's
#   attempt is compared on the row the call locks anyway.

ROUNDS="${BENCH_ROUNDS:-7}"
SECS="${BENCH_SECONDS:-4}"
JOB="00000000-0000-4000-8000-00000000a001"

bench_psql <<SQL
CREATE EXTENSION cortex_buffer;
CREATE ROLE bench_pod LOGIN;
GRANT cortex_buffer_agent TO bench_pod;
-- The baseline: a fleet role (control plane) that may also call the agent's functions.
CREATE ROLE bench_plane LOGIN;
GRANT cortex_buffer_control_plane, cortex_buffer_agent TO bench_plane;
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('${JOB}', gen_random_uuid(), 'RUNNING');
INSERT INTO cortex_buffer.job (id, agent_id, status)
SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, gen_random_uuid(), 'RUNNING' FROM generate_series(1, 1000) g;
-- What the control plane would hand each pod: its job and token (readable by both bench roles).
CREATE TABLE bench_token AS
SELECT g AS n, ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid AS job,
       cortex_buffer.job_token(('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid) AS token
  FROM generate_series(1, 1000) g;
CREATE UNIQUE INDEX ON bench_token (n);
GRANT SELECT ON bench_token TO bench_pod, bench_plane;
VACUUM ANALYZE cortex_buffer.job, bench_token;
SQL
token="$(bench_psql -c "SELECT cortex_buffer.job_token('${JOB}')")"

W="${BENCH}/scripts"
mkdir -p "$W"
cat >"$W/hot_heartbeat.sql" <<S
SELECT cortex_buffer.heartbeat('${JOB}');
S
cat >"$W/hot_checkpoint.sql" <<S
\set s random(1, 1000000)
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('${JOB}', ('{"step_index": ' || :s || ', "state": {"done": ["search", "email"]}}')::jsonb, allow_step_regression => true);
S
cat >"$W/fleet_heartbeat.sql" <<'S'
\set n random(1, 1000)
SELECT job, token FROM bench_token WHERE n = :n \gset
SELECT pg_catalog.set_config('cortex_buffer.job_token', :token, false), cortex_buffer.heartbeat(:job);
S
cat >"$W/fleet_checkpoint.sql" <<'S'
\set n random(1, 1000)
\set s random(1, 1000000)
SELECT job, token FROM bench_token WHERE n = :n \gset
SELECT pg_catalog.set_config('cortex_buffer.job_token', :token, false);
SELECT checkpoint_id FROM cortex_buffer.write_checkpoint(:job, ('{"step_index": ' || :s || ', "state": {"done": ["search", "email"]}}')::jsonb, allow_step_regression => true);
S
chmod -R a+rX "$W"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A tps
for r in $(seq 1 "${ROUNDS}"); do
    for call in fleet_heartbeat fleet_checkpoint hot_heartbeat hot_checkpoint; do
        plane="$(pgbench_tps "${SECS}" "$W/${call}.sql" -U bench_plane)"
        pod="$(PGOPTIONS="-c cortex_buffer.job_token=${token}" pgbench_tps "${SECS}" "$W/${call}.sql" -U bench_pod)"
        tps[${call}_plane]+="${plane}"$'\n'
        tps[${call}_pod]+="${pod}"$'\n'
        printf '  round %d: %-16s control plane %8.0f/s   agent with token %8.0f/s\n' "$r" "$call" "$plane" "$pod" >&2
    done
done

echo
echo "== per-job authority: 1 client, median of ${ROUNDS} rounds of ${SECS} s =="
for call in fleet_heartbeat fleet_checkpoint hot_heartbeat hot_checkpoint; do
    p="$(printf '%s' "${tps[${call}_plane]}" | median)"
    a="$(printf '%s' "${tps[${call}_pod]}" | median)"
    name="${call/checkpoint/write_checkpoint}"
    awk -v n="$name" -v p="$p" -v a="$a" 'BEGIN {
        printf "%-22s baseline (0.6.0 path) %8.0f/s  agent with token %8.0f/s  time ratio %.3f  (target <= 1.15)\n", n, p, a, p / a }'
done
