#!/usr/bin/env bash
# The reliability suite: one command that attacks cortex_buffer from every side and prints what
# held, as one table.
#
#   R1  SIGKILLs of the worker and of backends running index_sessions(), recovery's catch-up
#       and append_session_batch, while 8 writers append and pause mid-line
#   R2  pg_ctl stop -m immediate during ingestion, then amcheck and verify_heapam
#   R3  a streaming standby after ingestion with kills: same rows, same checksum, amcheck
#   R4  fuzzing of the parser, dialect detection, jsonb writer and canonical JSON, and the
#       corpus replayed against jsonb_in (a cluster) and JSON.parse (Node)
#   R5  the hostile-file catalogue
#   R6  isolation specs (pg_isolation_regress)
#   R7  privileges: roles without grants, path escapes, the definer switch, the three roles;
#       tenants: session ids, refusals and retention against names another tenant chose
#   R8  SIGKILLs of a pod deciding skip, verify or run (the client example's module) against a
#       ledger of side effects, tearing lines of 64 KiB and more, while the control plane
#       stores checkpoints with its own UPDATE
#
# Sizes: the default is the short setting CI runs (scripts/test.sh calls this script);
# CORTEX_RELIABILITY=full sets the full one (README: the minutes of each). Any single size can
# be set by its own variable (CORTEX_R1_KILLS, ...), which wins over both.
# Exits non-zero when any row failed: a loss, a duplicate, a panic, a crash, a diff.
#
# Usage: bash scripts/reliability.sh [--installed] [R1 R2 ...]
#   --installed   the extension is already installed from this checkout (scripts/test.sh);
#                 otherwise it is built and installed first.
#   R<n> ...      only these rows.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

installed=0
rows=()
for arg in "$@"; do
    case "${arg}" in
        --installed) installed=1 ;;
        R[1-8]) rows+=("${arg}") ;;
        *) die "unknown argument: ${arg} (usage: bash scripts/reliability.sh [--installed] [R1 ... R8])" ;;
    esac
done
[ "${#rows[@]}" -gt 0 ] || rows=(R1 R2 R3 R4 R5 R6 R7 R8)

MODE="${CORTEX_RELIABILITY:-short}"
case "${MODE}" in
    short) ;;
    full)
        # The issue's figures and beyond; each variable set by hand still wins.
        export CORTEX_R1_KILLS="${CORTEX_R1_KILLS:-300}"
        export CORTEX_R2_STOPS="${CORTEX_R2_STOPS:-100}"
        export CORTEX_R3_KILLS="${CORTEX_R3_KILLS:-40}"
        export CORTEX_R3_STOPS="${CORTEX_R3_STOPS:-10}"
        export CORTEX_FUZZ_SECONDS="${CORTEX_FUZZ_SECONDS:-120}"
        export CORTEX_FUZZ_SAVE="${CORTEX_FUZZ_SAVE:-10000}"
        export CORTEX_FUZZ_REPLAY_MAX="${CORTEX_FUZZ_REPLAY_MAX:-0}"
        export CORTEX_R5_LINE_MB="${CORTEX_R5_LINE_MB:-100}"
        export CORTEX_R5_TINY_FILES="${CORTEX_R5_TINY_FILES:-100000}"
        export CORTEX_R5_RENAMES="${CORTEX_R5_RENAMES:-20000}"
        export CORTEX_R5_GROW_MS="${CORTEX_R5_GROW_MS:-30000}"
        export CORTEX_R5_MIDREAD_MB="${CORTEX_R5_MIDREAD_MB:-200}"
        export CORTEX_R5_HOLE_GB="${CORTEX_R5_HOLE_GB:-1024}"
        export CORTEX_R5_GARBAGE_MB="${CORTEX_R5_GARBAGE_MB:-16}"
        export CORTEX_R5_FULL_MB="${CORTEX_R5_FULL_MB:-32}"
        export CORTEX_R8_KILLS="${CORTEX_R8_KILLS:-500}"
        ;;
    *) die "CORTEX_RELIABILITY must be short or full, not ${MODE}" ;;
esac

ensure_toolchain
ensure_node_example
if [ "${installed}" = 0 ]; then
    # shellcheck disable=SC2119 # a debug build, as the end-to-end suite runs
    install_extension
fi
say "building the shipper (R1 pushes through it)"
cargo build -q -p cortex_buffer_ship

WORK="$(work_dir)/reliability"
rm -rf "${WORK}"
mkdir -p "${WORK}/e2e"
REPORT="${WORK}/report.tsv"
: >"${REPORT}"
export CORTEX_RELIABILITY_REPORT="${REPORT}"
export CORTEX_E2E_DIR="${WORK}/e2e"
STATUS="${WORK}/status.tsv"
: >"${STATUS}"

# run_row ROW WHAT COMMAND...: runs one row's command, keeps its output in ${WORK}/ROW.log and
# records whether it held and how long it took.
run_row() {
    local row="$1" what="$2" started rc=0
    shift 2
    say "${row}: ${what}"
    started="$(date +%s)"
    "$@" >"${WORK}/${row}.log" 2>&1 || rc=$?
    local took=$(($(date +%s) - started))
    if [ "${rc}" = 0 ]; then
        printf '%s\theld\t%s\n' "${row}" "${took}" >>"${STATUS}"
    else
        printf '%s\tFAILED (exit %s; %s)\t%s\n' "${row}" "${rc}" "${WORK}/${row}.log" "${took}" >>"${STATUS}"
        tail -n 60 "${WORK}/${row}.log" >&2
    fi
}

e2e() { (cd pgrx-tests && cargo test --features reliability --test "$@" -- --nocapture --test-threads=1); }
r7() { e2e privileges && e2e tenants; }

for row in "${rows[@]}"; do
    case "${row}" in
        R1) run_row R1 "SIGKILLs of every indexing process" e2e reliability_kills ;;
        R2) run_row R2 "immediate stops, amcheck, verify_heapam" e2e reliability_stops r2_ ;;
        R3) run_row R3 "a streaming standby after kills" e2e reliability_stops r3_ ;;
        R4) run_row R4 "fuzzing and the corpus against jsonb_in and JSON.parse" bash scripts/fuzz.sh ;;
        R5) run_row R5 "the hostile-file catalogue" e2e hostile_catalogue ;;
        R6) run_row R6 "isolation specs" bash scripts/isolation.sh ;;
        R7) run_row R7 "privileges, and tenants against each other" r7 ;;
        R8) run_row R8 "SIGKILLs of a pod deciding and running calls" e2e recovery_kills ;;
    esac
done

if python3 - "${STATUS}" "${REPORT}" "${MODE}" <<'PY'
import sys
status_path, report_path, mode = sys.argv[1:]
proves = {
    "R1": "no line lost or doubled when any indexing process is SIGKILLed",
    "R2": "no line lost or doubled through immediate stops; indexes and heaps verify",
    "R3": "a standby holds exactly the primary's index",
    "R4": "no input panics; the jsonb writer equals jsonb_in; the parser agrees with JSON.parse",
    "R5": "no file stops the worker or holds back the other files",
    "R6": "the concurrency guarantees hold in fixed interleavings",
    "R7": "every role can do its job and nothing more; no tenant reaches another through names it chooses",
    "R8": "no call runs twice under different keys or is lost when pods are SIGKILLed mid-write",
}
figures = {}
for line in open(report_path, encoding="utf-8"):
    row, what, fig = (line.rstrip("\n").split("\t") + ["", ""])[:3]
    figures.setdefault(row, []).append(f"{what}: {fig}")
print(f"\n| row | what it proves | figures ({mode} setting) | result | s |")
print("|---|---|---|---|---|")
failed = False
for line in open(status_path, encoding="utf-8"):
    row, result, took = line.rstrip("\n").split("\t")
    failed |= result != "held"
    fig = "<br>".join(figures.get(row, [])) or "(none reported)"
    print(f"| {row} | {proves.get(row, '')} | {fig} | {result} | {took} |")
sys.exit(1 if failed else 0)
PY
then
    say "reliability: every row held (figures above; logs in ${WORK})"
else
    die "reliability: a row failed (above; its log is named in the table)"
fi
