#!/usr/bin/env bash
# Runs every test: the pure crates' unit tests (plain cargo test), the #[pg_test]s (one
# `cargo pgrx test`), pgspot over the install and upgrade scripts, the golden-file SQL tests
# (pg_regress), then the end-to-end suite in pgrx-tests/ against private clusters with the
# library preloaded, the reliability suite (scripts/reliability.sh) in its short setting, and
# the Debian packages (scripts/test_package.sh).
# Installs whatever is missing first. Safe to run again.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_toolchain
WORK="$(work_dir)"

say "pure-core, watch and ship crates (plain cargo test, no PostgreSQL)"
cargo test -p cortex_buffer_core -p cortex_buffer_watch -p cortex_buffer_ship

say "unit tests and #[pg_test]s"
PGTEST_DIR="${WORK}/pgrx-test"
mkdir -p "${PGTEST_DIR}"
chown postgres "${PGTEST_DIR}"
# The answers the tests keep (plans, agent_state and job_timeline rows) for the schema check.
rm -rf "${PGTEST_DIR}/data/answers" "${WORK}/answers"
unlink_installed_library
cargo pgrx test "pg${PG_MAJOR}" --runas postgres --pgdata "${PGTEST_DIR}/data"

# `cargo pgrx test` installed a build with the test-only schema; the end-to-end suite runs the
# real one.
# shellcheck disable=SC2119 # a debug build: the end-to-end suite needs no optimisation
install_extension

say "pgspot over the install and upgrade scripts"
ensure_pgspot
CURRENT="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
EXTDIR="$("${PG_CONFIG}" --sharedir)/extension"
# The current version's install script and the upgrade to it: no warnings at all.
pgspot "${EXTDIR}/cortex_buffer--${CURRENT}.sql" sql/cortex_buffer--*--"${CURRENT}".sql | tee "${WORK}/pgspot.txt"
if grep -Eq "(Errors|Warnings|Unknown): [1-9]" "${WORK}/pgspot.txt"; then die "pgspot found problems (above)"; fi
# Released upgrade scripts never change; what pgspot says of them is explained in UPDATING.md.
for f in sql/cortex_buffer--*--*.sql; do
    case "$f" in *"--${CURRENT}.sql") continue ;; esac
    printf '%s: %s\n' "$f" "$(pgspot --summary-only "$f" | tail -1)"
done

say "golden-file SQL tests (pg_regress: pgrx-tests/regress/)"
bash scripts/regress.sh

say "end-to-end tests (pgrx-tests/)"
ensure_node_example
# The client example's decision rules, case by case (the end-to-end suite runs them on real plans).
(cd examples/node && node --test)
# The shipper the push tests run (pgrx-tests/tests/ship.rs, ship_tls.rs).
cargo build -p cortex_buffer_ship
E2E_DIR="${WORK}/e2e"
rm -rf "${E2E_DIR}"
mkdir -p "${E2E_DIR}"
# The TypeScript client, packed once (graphile.rs installs the tarball; node_client.rs runs the
# client's own tests and a newcomer's project, which build clients/node/ themselves).
rm -rf "${WORK}/client" && mkdir -p "${WORK}/client"
(cd clients/node && npm pack --silent --pack-destination "${WORK}/client" >/dev/null)
CORTEX_CLIENT_TARBALL="$(find "${WORK}/client" -name '*.tgz' | head -1)"
export CORTEX_CLIENT_TARBALL
(cd pgrx-tests && CORTEX_E2E_DIR="${E2E_DIR}" CORTEX_ANSWERS_DIR="${WORK}/answers" cargo test -- --test-threads="${CORTEX_E2E_THREADS:-3}")

say "JSON Schemas (schemas/): every answer the tests kept validates; the client's generated types are current"
(cd schemas && node --test test/ && node gen-types.mjs --check)
node schemas/validate.mjs "${PGTEST_DIR}/data/answers"
node schemas/validate.mjs "${WORK}/answers"

# The worker's suites again in poll mode (cortex_buffer.watch = poll: a network volume), so the
# polling path keeps every guarantee the notify path has. (watch.rs tests notification itself.)
say "end-to-end worker suites in poll mode (CORTEX_E2E_WATCH=poll)"
(cd pgrx-tests && CORTEX_E2E_WATCH=poll CORTEX_E2E_DIR="${E2E_DIR}" cargo test \
    --test worker --test exactly_once --test indexer --test hostile --test recovery_pod \
    -- --test-threads="${CORTEX_E2E_THREADS:-3}")

# R1-R8 with their short setting: kills, immediate stops, a standby, fuzzing, the hostile-file
# catalogue, isolation specs, privileges, SIGKILLed pods deciding; one table of figures
# (CORTEX_RELIABILITY=full by hand).
say "reliability suite, short setting (scripts/reliability.sh)"
bash scripts/reliability.sh --installed

# Last, since it takes away the source install: the Debian packages built, installed on a
# system cleared of that install, the golden files run against them, and removed cleanly.
say "Debian packages (scripts/test_package.sh)"
bash scripts/test_package.sh

say "all tests passed"
