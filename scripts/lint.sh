#!/usr/bin/env bash
# The lint gate .ci/run runs before the tests: formatting, clippy with warnings as errors,
# the committed install script, the docs' tables and SQL, ShellCheck, and released SQL scripts
# that never change. Installs shellcheck if missing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_toolchain

say "cargo fmt --check (the workspace and the end-to-end crate)"
cargo fmt --all --check
(cd pgrx-tests && cargo fmt --check)

say "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
(cd pgrx-tests && cargo clippy --features reliability --all-targets -- -D warnings)

say "the committed install script is what the code generates (sql/install/)"
bash scripts/schema.sh

say "the newest upgrade script ends with sql/privileges.sql, so upgrades grant exactly what installs do"
newest_upgrade="$(find sql -maxdepth 1 -name 'cortex_buffer--*--*.sql' | sort -V | tail -1)"
python3 - "${newest_upgrade}" <<'PY' || die "${newest_upgrade} must end with sql/privileges.sql, verbatim: copy it there"
import sys
sys.exit(0 if open(sys.argv[1]).read().endswith(open("sql/privileges.sql").read()) else 1)
PY

say "docs: tables, the error table against the code, the SQL blocks' golden files"
python3 scripts/check_docs.py

say "shellcheck scripts/ bench/ .ci/run"
shellcheck -x scripts/*.sh bench/*.sh .ci/run

say "released SQL scripts are unchanged (sql/released/SHA256SUMS)"
(cd sql && sha256sum --quiet --check released/SHA256SUMS) || die "a released SQL script changed: released scripts never change; put the change in the next version's upgrade script"
# Every released script must be listed: the install scripts kept for upgrade tests, and every
# upgrade script that does not lead to the version being developed.
CURRENT="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
for f in sql/released/cortex_buffer--*.sql sql/cortex_buffer--*--*.sql; do
    case "$f" in *"--${CURRENT}.sql") continue ;; esac
    grep -q " ${f#sql/}\$" sql/released/SHA256SUMS || die "$f is released but not in sql/released/SHA256SUMS (CONTRIBUTING.md: shipping a version)"
done

say "the client and the schemas carry the extension's version (CONTRIBUTING.md, Compatibility)"
for f in clients/node/package.json schemas/package.json clients/node/examples/newcomer/package.json; do
    grep -q "\"version\": \"${CURRENT}\"" "$f" || die "$f does not say version ${CURRENT} (Cargo.toml's)"
done
grep -q "cortex-buffer-client-${CURRENT}.tgz" clients/node/examples/newcomer/package.json ||
    die "clients/node/examples/newcomer/package.json does not install the client's ${CURRENT} tarball"

say "lint passed"
