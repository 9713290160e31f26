#!/usr/bin/env bash
# Runs one benchmark (bench/<name>.sh) against a private cluster with a release build:
#   bash scripts/bench.sh checkpoint
# Every benchmark measures cortex_buffer and its baseline in the same run and prints ratios;
# absolute times on shared machines are noise. Not part of the test command.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

name="${1:-}"
if [ -z "${name}" ] || [ ! -f "bench/${name}.sh" ]; then
    die "usage: bash scripts/bench.sh <$(find bench -name '*.sh' -printf '%f\n' | sed 's/\.sh$//' | sort | paste -sd '|')>"
fi

ensure_toolchain
# scripts/bench_compare.sh installs each build it compares itself.
[ -n "${CORTEX_BENCH_INSTALLED:-}" ] || install_extension --release

BENCH="$(work_dir)/bench"
BIN="$("${PG_CONFIG}" --bindir)"
export PGDATA="${BENCH}/data" RUN="${BENCH}/run" BIN PORT="${CORTEX_BENCH_PORT:-54339}"
# A test server: benchmarks turn test knobs (catch_up), settings only there (src/pg/guc.rs).
export CORTEX_BUFFER_TESTING=1
pg() { runuser -u postgres -- "$@"; }
if pg "${BIN}/pg_ctl" status -D "${PGDATA}" >/dev/null 2>&1; then
    pg "${BIN}/pg_ctl" stop -m fast -D "${PGDATA}" >/dev/null
fi
rm -rf "${BENCH}"
mkdir -p "${PGDATA}" "${RUN}"
chown postgres "${PGDATA}" "${RUN}"
pg "${BIN}/initdb" -A trust -E UTF8 --locale=C.UTF-8 -D "${PGDATA}" >/dev/null
cat >>"${PGDATA}/postgresql.conf" <<CONF
port = ${PORT}
listen_addresses = ''
unix_socket_directories = '${RUN}'
shared_preload_libraries = 'cortex_buffer'
cortex_buffer.worker_enabled = off
cortex_buffer.sessions_dir = '${BENCH}/sessions'
# Measure CPU work, not the disk: both sides of every ratio run with the same settings.
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 512MB
max_wal_size = 4GB
CONF
pg "${BIN}/pg_ctl" start -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
trap 'pg "${BIN}/pg_ctl" stop -m fast -D "${PGDATA}" >/dev/null 2>&1 || true' EXIT

export BENCH
bench_psql() { pg "${BIN}/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "${RUN}" -p "${PORT}" -d postgres "$@"; }
# pgbench_tps <seconds> <script file> [pgbench args...]: transactions per second of one client.
pgbench_tps() {
    local secs="$1" file="$2" out tps
    shift 2
    out="$(pg "${BIN}/pgbench" -n -M prepared -c "${BENCH_CLIENTS:-1}" -j "${BENCH_CLIENTS:-1}" -T "${secs}" \
        -h "${RUN}" -p "${PORT}" "$@" -f "${file}" postgres 2>&1)" || true
    tps="$(printf '%s\n' "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
    if [ -z "$tps" ] || grep -q "client [0-9]* aborted" <<<"$out"; then
        printf '%s\n' "$out" | grep -v "^\(pgbench\|transaction type\|scaling\|query mode\|number of\)" >&2
        die "pgbench failed on ${file}"
    fi
    printf '%s\n' "$tps"
}
export -f pg bench_psql pgbench_tps
# shellcheck source=/dev/null
source "bench/${name}.sh"
