#!/usr/bin/env bash
# Golden-file SQL tests (pg_regress, as pg_graphql and ParadeDB run theirs): each
# pgrx-tests/regress/sql/<name>.sql runs in psql against a temporary cluster with the library
# preloaded, and its output must equal pgrx-tests/regress/expected/<name>.out to the byte: the
# results, and the ERROR, DETAIL, HINT, NOTICE and WARNING lines a user sees.
# Expects the extension installed (scripts/test.sh installs it first).
# CORTEX_REGRESS_ACCEPT=1 copies the results over the expected files (review the diff!).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

PG_REGRESS="$("${PG_CONFIG}" --pkglibdir)/pgxs/src/test/regress/pg_regress"
[ -x "${PG_REGRESS}" ] || die "pg_regress not found at ${PG_REGRESS} (package postgresql-server-dev-${PG_MAJOR})"
WORK="$(work_dir)/regress"
SESSIONS=/tmp/cortex_buffer-regress/sessions
# The sessions path is fixed (messages in the expected files name it), so two runs at once, from
# two checkouts, would trample each other's files: take turns.
exec 9>/tmp/cortex_buffer-regress.lock
flock 9
rm -rf "${WORK}" /tmp/cortex_buffer-regress
mkdir -p "${WORK}" "${SESSIONS}"
cp -R pgrx-tests/regress/sessions/. "${SESSIONS}/"
cp -R pgrx-tests/regress/sql pgrx-tests/regress/expected pgrx-tests/regress/schedule pgrx-tests/regress/regress.conf "${WORK}/"
chown -R postgres "${WORK}" /tmp/cortex_buffer-regress

status=0
runuser -u postgres -- "${PG_REGRESS}" \
    --temp-instance="${WORK}/instance" --temp-config="${WORK}/regress.conf" \
    --bindir="$("${PG_CONFIG}" --bindir)" --inputdir="${WORK}" --outputdir="${WORK}" \
    --schedule="${WORK}/schedule" --encoding=UTF8 --no-locale --port="${CORTEX_REGRESS_PORT:-54341}" || status=$?
if [ "${CORTEX_REGRESS_ACCEPT:-0}" = 1 ]; then
    for f in "${WORK}"/results/*.out; do cp "$f" "pgrx-tests/regress/expected/$(basename "$f")"; done
    say "accepted the results into pgrx-tests/regress/expected/ (review with git diff)"
    exit 0
fi
if [ "${status}" != 0 ]; then
    [ -f "${WORK}/regression.diffs" ] && cat "${WORK}/regression.diffs"
    die "golden-file tests differ (above; results in ${WORK}/results)"
fi
