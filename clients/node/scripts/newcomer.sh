#!/bin/sh
# The newcomer's check: build the client, pack it, install the tarball into a temporary copy of
# examples/newcomer (with npm install, as a user would), and run it against a real cluster.
#
#   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... CORTEX_SESSIONS_DIR=... sh scripts/newcomer.sh
#
# PGDATABASE must have the extension; PGUSER must be able to create the agent login
# (CORTEX_AGENT_USER, default cortex_client_agent) and act as the control plane.
# CORTEX_SESSIONS_OWNER (uid:gid) owns the session files; run as root, it defaults to the
# postgres OS user's, so the server can read them.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
: "${PGHOST:?set PGHOST}" "${PGDATABASE:?set PGDATABASE}" "${CORTEX_SESSIONS_DIR:?set CORTEX_SESSIONS_DIR}"
if [ -z "${CORTEX_SESSIONS_OWNER:-}" ] && [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
    CORTEX_SESSIONS_OWNER="$(id -u postgres):$(id -g postgres)"
    export CORTEX_SESSIONS_OWNER
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run build
# The tarball sits two directories above the example, as its package.json expects.
npm pack --pack-destination "$tmp"
mkdir -p "$tmp/examples"
cp -R examples/newcomer "$tmp/examples/newcomer"
rm -rf "$tmp/examples/newcomer/node_modules" "$tmp/examples/newcomer/package-lock.json"

cd "$tmp/examples/newcomer"
npm install --no-audit --no-fund
node newcomer.mjs
