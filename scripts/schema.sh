#!/usr/bin/env bash
# The SQL surface, reviewable without a build: sql/install/cortex_buffer--<version>.sql is the
# install script `cargo pgrx schema` generates for the current version, committed, so every
# change to the SQL surface shows in a diff. Without arguments, checks that the committed file
# is what the code generates (the lint gate runs this); with --accept, writes it.
# scripts/schema_normal.py sorts the generator's blocks (their order is not stable) and drops
# its "-- src/<file>:<line>" tags (they move with every edit).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_toolchain
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
COMMITTED="sql/install/cortex_buffer--${VERSION}.sql"
GENERATED="$(work_dir)/schema-${VERSION}.sql"

cargo pgrx schema "pg${PG_MAJOR}" --pg-config "${PG_CONFIG}" -o "${GENERATED}.raw" >/dev/null
python3 scripts/schema_normal.py "${GENERATED}.raw" >"${GENERATED}"

if [ "${1:-}" = "--accept" ]; then
    mkdir -p sql/install
    find sql/install -name 'cortex_buffer--*.sql' ! -name "cortex_buffer--${VERSION}.sql" -delete
    cp "${GENERATED}" "${COMMITTED}"
    say "wrote ${COMMITTED} (review with git diff)"
    exit 0
fi

others="$(find sql/install -name 'cortex_buffer--*.sql' ! -name "cortex_buffer--${VERSION}.sql" 2>/dev/null || true)"
[ -z "${others}" ] || die "sql/install/ holds another version's script (${others}): only the current version's belongs there (bash scripts/schema.sh --accept)"
[ -f "${COMMITTED}" ] || die "${COMMITTED} is missing: run bash scripts/schema.sh --accept and commit it"
if ! diff -u "${COMMITTED}" "${GENERATED}" >"${GENERATED}.diff"; then
    head -80 "${GENERATED}.diff"
    die "the SQL surface changed but ${COMMITTED} did not (diff above): run bash scripts/schema.sh --accept, review and commit it"
fi
say "${COMMITTED} is the install script the code generates"
