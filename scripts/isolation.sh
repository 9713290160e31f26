#!/usr/bin/env bash
# Isolation specs (PostgreSQL's own isolationtester, driven by pg_isolation_regress): each
# pgrx-tests/isolation/specs/<name>.spec runs fixed interleavings of two or three sessions against
# a private cluster with the library preloaded, and the output (results, errors, which step
# waited) must equal pgrx-tests/isolation/expected/<name>.out to the byte.
# Expects the extension installed (scripts/test.sh installs it first).
# CORTEX_ISOLATION_ACCEPT=1 copies the results over the expected files (review the diff!).
# CORTEX_ISOLATION_PORT picks the port (default 54351; the socket lives in a private directory,
# the cluster listens on no TCP address). With CORTEX_RELIABILITY_REPORT set, one line for the
# reliability table is appended to that file.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

PGXS_ISOLATION="$("${PG_CONFIG}" --pkglibdir)/pgxs/src/test/isolation"
PG_ISOLATION_REGRESS="${PGXS_ISOLATION}/pg_isolation_regress"
if [ ! -x "${PG_ISOLATION_REGRESS}" ] || [ ! -x "${PGXS_ISOLATION}/isolationtester" ]; then
    die "pg_isolation_regress or isolationtester not found in ${PGXS_ISOLATION} (package postgresql-server-dev-${PG_MAJOR})"
fi
BINDIR="$("${PG_CONFIG}" --bindir)"
WORK="$(work_dir)/isolation"
DATA="${WORK}/data"
SOCK="${WORK}/socket"
SESSIONS="${WORK}/sessions"
PORT="${CORTEX_ISOLATION_PORT:-54351}"
started=$(date +%s)

# One run at a time per work directory (the cluster and its sessions directory are shared).
mkdir -p "${WORK}"
exec 9>"${WORK}.lock"
flock 9

pg() { runuser -u postgres -- "$@"; }

stop_cluster() {
    if [ -f "${DATA}/postmaster.pid" ]; then
        pg "${BINDIR}/pg_ctl" -D "${DATA}" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

# The cluster: made once, kept between runs (initdb is the slow part); its settings are
# rewritten every run. A cluster an interrupted run left running is stopped first.
stop_cluster
if [ ! -f "${DATA}/PG_VERSION" ]; then
    say "initdb ${DATA}"
    rm -rf "${DATA}"
    mkdir -p "${DATA}"
    chown postgres "${WORK}" "${DATA}"
    pg "${BINDIR}/initdb" -D "${DATA}" -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null
    echo "include 'isolation.conf'" >>"${DATA}/postgresql.conf"
fi
rm -rf "${SESSIONS}" "${SOCK}" "${WORK}/output" "${WORK}/input"
mkdir -p "${SESSIONS}" "${SOCK}" "${WORK}/output" "${WORK}/input"
cat >"${DATA}/isolation.conf" <<EOF
# Written by scripts/isolation.sh on every run.
listen_addresses = ''
unix_socket_directories = '${SOCK}'
port = ${PORT}
shared_preload_libraries = 'cortex_buffer'
cortex_buffer.sessions_dir = '${SESSIONS}'
# The worker stays idle: the specs run the indexer's pass themselves (index_sessions(), the
# worker's own code), so who indexes when is fixed by the permutation, not by a timer.
cortex_buffer.worker_enabled = off
cortex_buffer.settle_period = 0
timezone = 'UTC'
max_connections = 40
fsync = off
log_min_messages = warning
EOF
cp -R pgrx-tests/isolation/specs pgrx-tests/isolation/expected "${WORK}/input/"
chown -R postgres "${DATA}" "${SESSIONS}" "${SOCK}" "${WORK}/output" "${WORK}/input"
chmod 700 "${DATA}"

trap stop_cluster EXIT
pg "${BINDIR}/pg_ctl" -D "${DATA}" -l "${WORK}/server.log" -w start >/dev/null \
    || { tail -n 30 "${WORK}/server.log" >&2; die "the isolation cluster did not start (log above)"; }

specs=()
for f in pgrx-tests/isolation/specs/*.spec; do
    [ -e "$f" ] && specs+=("$(basename "$f" .spec)")
done
((${#specs[@]})) || die "no specs in pgrx-tests/isolation/specs"
for t in "${specs[@]}"; do
    if [ ! -f "pgrx-tests/isolation/expected/${t}.out" ]; then
        # pg_isolation_regress stops at a missing expected file: an empty one lets the first
        # accepting run write it.
        [ "${CORTEX_ISOLATION_ACCEPT:-0}" = 1 ] || die "no expected output for ${t} (run with CORTEX_ISOLATION_ACCEPT=1 and review it)"
        : >"${WORK}/input/expected/${t}.out"
        chown postgres "${WORK}/input/expected/${t}.out"
    fi
done
say "running ${#specs[@]} isolation specs"

status=0
pg env PGTZ=UTC "${PG_ISOLATION_REGRESS}" \
    --bindir="${BINDIR}" --inputdir="${WORK}/input" --outputdir="${WORK}/output" \
    --host="${SOCK}" --port="${PORT}" --user=postgres \
    "${specs[@]}" || status=$?

if [ "${CORTEX_ISOLATION_ACCEPT:-0}" = 1 ]; then
    mkdir -p pgrx-tests/isolation/expected
    for f in "${WORK}"/output/results/*.out; do cp "$f" "pgrx-tests/isolation/expected/$(basename "$f")"; done
    say "accepted the results into pgrx-tests/isolation/expected/ (review with git diff)"
    exit 0
fi
if [ "${status}" != 0 ]; then
    [ -f "${WORK}/output/regression.diffs" ] && cat "${WORK}/output/regression.diffs"
    die "isolation specs differ (above; results in ${WORK}/output/results, server log ${WORK}/server.log)"
fi

permutations=$(cat pgrx-tests/isolation/expected/*.out | grep -c '^starting permutation:' || true)
line="$(printf 'R6\tisolation specs\t%d specs, %d permutations, all matched (%ds)' \
    "${#specs[@]}" "${permutations}" "$(($(date +%s) - started))")"
say "${line//$'\t'/ | }"
if [ -n "${CORTEX_RELIABILITY_REPORT:-}" ]; then
    printf '%s\n' "${line}" >>"${CORTEX_RELIABILITY_REPORT}"
fi
