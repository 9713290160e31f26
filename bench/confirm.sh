# shellcheck shell=bash
# What a shipper's idle confirmations cost (confirm_pushed: a source's word that every file it
# ships was pushed whole; recovery trusts a pushed file only after one). Sourced by
# scripts/bench.sh (release build).
#
# One shipper ships CONFIRM_FILES (default 10 000) job directories of one file. Once everything
# is pushed it idles for CONFIRM_SECONDS (default 60), measured twice in the same run, in
# alternating order: with --confirm-every 0 (no confirmations: the baseline) and with the
# default --confirm-every 1000. Per idle minute, for each: the shipper's CPU, the CPU of its
# server backend, and the WAL the cluster wrote. Durability on (fsync, full_page_writes).

NFILES="${CONFIRM_FILES:-10000}"
SECS="${CONFIRM_SECONDS:-60}"
NODE="${BENCH}/confirm-node"
cargo build --release -p cortex_buffer_ship >&2
SHIP="${REPO_ROOT}/target/release/cortex-buffer-ship"

# Autovacuum off: the windows measure the shipper, not a vacuum the pushes left behind.
bench_psql -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET full_page_writes = on" \
    -c "ALTER SYSTEM SET listen_addresses = '127.0.0.1'" -c "ALTER SYSTEM SET autovacuum = off" >/dev/null
sed -i '1i host all bench_shipper 127.0.0.1/32 scram-sha-256' "${PGDATA}/pg_hba.conf"
pg "${BIN}/pg_ctl" restart -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
bench_psql -c "CREATE EXTENSION cortex_buffer" -c "CREATE ROLE bench_shipper LOGIN PASSWORD 'bench'" \
    -c "GRANT cortex_buffer_pusher TO bench_shipper" \
    -c "INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('idle-node', 'bench_shipper', true)" >/dev/null
CB_SHIP_SOURCE_TOKEN="$(bench_psql -c "SELECT cortex_buffer.push_source_token('idle-node')")"
export CB_SHIP_SOURCE_TOKEN
DSN="host=127.0.0.1 port=${PORT} user=bench_shipper password=bench dbname=postgres"

echo "confirm: writing ${NFILES} job directories" >&2
python3 - "${NODE}" "${NFILES}" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    job = f"0193a8b2-7c41-7d2e-9f00-{i:012d}"
    os.makedirs(f"{root}/{job}", exist_ok=True)
    with open(f"{root}/{job}/session-001.jsonl", "w") as f:
        f.write(f'{{"type":"SESSION_START","timestamp":"2026-02-23T15:00:00.000Z","job_id":"{job}","seq":0}}\n')
PY

SHIP_PID=""
stop_shipper() { [ -z "${SHIP_PID}" ] || { kill "${SHIP_PID}" 2>/dev/null || true; wait "${SHIP_PID}" 2>/dev/null || true; }; SHIP_PID=""; }
trap 'stop_shipper; pg "${BIN}/pg_ctl" stop -m fast -D "${PGDATA}" >/dev/null 2>&1 || true' EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in clock ticks
HZ="$(getconf CLK_TCK)"

# idle EVERY_MS: starts a shipper, waits until every file is pushed, then measures SECS idle:
# prints "shipper_cpu_pct backend_cpu_pct wal_bytes_per_min confirmations".
idle() {
    "${SHIP}" --settle 0 --report-every 3600 --confirm-every "$1" --sessions-dir "${NODE}" \
        --source idle-node --dsn "${DSN}" 2>>"${BENCH}/ship.log" &
    SHIP_PID=$!
    bench_psql -c "DO \$\$ BEGIN FOR i IN 1..6000 LOOP
                     EXIT WHEN (SELECT count(*) FROM cortex_buffer.pushed_file) >= ${NFILES};
                     PERFORM pg_catalog.pg_sleep(0.05); END LOOP; END \$\$" >/dev/null
    sleep 3 # the last pushes' rounds end
    # What the pushes left to do (vacuum, a checkpoint's full-page images) happens now, not in
    # the window: it would be WAL that confirmations did not write.
    bench_psql -c "VACUUM (ANALYZE)" -c "CHECKPOINT" >/dev/null
    local backend c0 w0 s0 b0 c1 w1 s1 b1
    backend="$(bench_psql -c "SELECT pid FROM pg_stat_activity WHERE usename = 'bench_shipper' LIMIT 1")"
    c0="$(bench_psql -c "SELECT coalesce(sum(confirmations), 0) FROM cortex_buffer.push_confirmation")"
    w0="$(bench_psql -c "SELECT pg_current_wal_lsn()")"
    s0="$(ticks "${SHIP_PID}")"; b0="$(ticks "${backend}")"
    sleep "${SECS}"
    s1="$(ticks "${SHIP_PID}")"; b1="$(ticks "${backend}")"
    w1="$(bench_psql -c "SELECT pg_current_wal_lsn()")"
    c1="$(bench_psql -c "SELECT coalesce(sum(confirmations), 0) FROM cortex_buffer.push_confirmation")"
    local wal
    wal="$(bench_psql -c "SELECT pg_wal_lsn_diff('${w1}', '${w0}')")"
    stop_shipper
    awk -v s=$((s1 - s0)) -v b=$((b1 - b0)) -v w="${wal}" -v c=$((c1 - c0)) -v hz="${HZ}" -v t="${SECS}" \
        'BEGIN { printf "%.3f %.3f %.0f %d\n", 100 * s / hz / t, 100 * b / hz / t, w * 60 / t, c }'
}

declare -A res
for order in "0 1000" "1000 0"; do
    for every in ${order}; do
        echo "confirm: idle ${SECS} s with --confirm-every ${every}" >&2
        res[${every}]+="$(idle "${every}")"$'\n'
    done
done
med() { printf '%s' "${res[$1]}" | awk -v k="$2" '{print $k}' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo
echo "== idle confirmations: one shipper, ${NFILES} files pushed, ${SECS} s idle, median of 2 =="
printf '%-34s %14s %14s\n' "" "no confirm" "every 1 s"
printf '%-34s %14s %14s\n' "shipper CPU (% of a core)" "$(med 0 1)" "$(med 1000 1)"
printf '%-34s %14s %14s\n' "its server backend CPU (% of a core)" "$(med 0 2)" "$(med 1000 2)"
printf '%-34s %14s %14s\n' "WAL per idle minute (bytes)" "$(med 0 3)" "$(med 1000 3)"
printf '%-34s %14s %14s\n' "confirmations in the window" "$(med 0 4)" "$(med 1000 4)"
awk -v a="$(med 1000 3)" -v b="$(med 0 3)" -v n="$(med 1000 4)" -v t="${SECS}" \
    'BEGIN { printf "\nWAL per confirmation: %.0f bytes (one row per source, whatever the number of files)\n", (a - b) * t / 60 / (n > 0 ? n : 1) }'
