#!/usr/bin/env bash
# Runs benchmarks on two builds in one run: a base commit's and the working tree's.
#   bash scripts/bench_compare.sh <base commit> [benchmark ...]
# (default benchmarks: indexer fleet push retention recovery checkpoint liveness)
#
# Each build is packaged once (cargo pgrx package, release, and the shipper) under
# .work/compare/<name>/, then installed (its library unlinked first, as every install here does)
# before each of its runs. Both builds run the working tree's bench/<name>.sh, so both do the
# same work. The runs alternate BENCH_COMPARE_PAIRS times (default 1), and which build goes first
# alternates by pair and by benchmark (the first benchmark: base, head; the second: head, base;
# ...), so that a drift of the machine over the run favours neither.
#
# What it prints, per benchmark: each key figure of the base and the head (median over the
# runs) and head/base as a cost: above 1 the head is slower (for a throughput or a
# "higher is better" ratio the quotient is inverted). The cost is taken pair by pair (a pair's two
# runs follow each other, so the machine is the same for both) and the median of the pairs'
# costs printed, with their range. The key figures are the extension's own
# times and its ratios against the SQL baselines each benchmark measures in the same run; the
# benchmarks' sizes come from their own variables (BENCH_ROUNDS, FLEET_LINES, ...).
# The installed build at the end is the head's.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

base="${1:-}"
[ -n "${base}" ] || die "usage: bash scripts/bench_compare.sh <base commit> [benchmark ...]"
base_rev="$(git rev-parse --verify "${base}^{commit}")" || die "no commit ${base}"
shift
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(indexer fleet push retention recovery checkpoint liveness)
for b in "${benches[@]}"; do
    [ -f "bench/${b}.sh" ] || die "no benchmark bench/${b}.sh"
done
pairs="${BENCH_COMPARE_PAIRS:-1}"

ensure_toolchain
COMPARE="$(work_dir)/compare"
mkdir -p "${COMPARE}"

# package <name> <source tree> <target dir>: the extension's files as they install, and the shipper.
package() {
    local name="$1" src="$2" target="$3" out="${COMPARE}/$1"
    say "packaging ${name} (release)"
    rm -rf "${out}"
    mkdir -p "${out}"
    (cd "${src}" && CARGO_TARGET_DIR="${target}" cargo pgrx package --pg-config "${PG_CONFIG}" --out-dir "${out}/root" >&2)
    (cd "${src}" && CARGO_TARGET_DIR="${target}" cargo build --release -p cortex_buffer_ship >&2)
    install -m 755 "${target}/release/cortex-buffer-ship" "${out}/cortex-buffer-ship"
    for f in "${src}"/sql/released/cortex_buffer--*.sql "${src}"/sql/cortex_buffer--*--*.sql; do
        [ -e "$f" ] || continue
        install -m 644 "$f" "${out}/root$("${PG_CONFIG}" --sharedir)/extension/"
    done
}

src_base="${COMPARE}/src-${base_rev:0:12}"
if [ ! -d "${src_base}" ]; then
    git worktree prune
    git worktree add --detach "${src_base}" "${base_rev}" >&2
fi
package base "${src_base}" "${COMPARE}/target-base"
package head "${REPO_ROOT}" "${REPO_ROOT}/target"

# use <name>: installs that build's files in place of whatever is installed.
use() {
    unlink_installed_library
    rm -f "$("${PG_CONFIG}" --sharedir)"/extension/cortex_buffer*
    cp -a "${COMPARE}/$1/root/." /
}

# Per benchmark: "label regex|field|direction" (lower: a cost; higher: a throughput or a
# higher-is-better ratio). field: the number's position among the line's numbers (1 = first).
# The last figures of a benchmark are its SQL baselines' own times (COPY, DELETE, hand SQL, plain
# SQL, the hand reaper, heartbeats without the index, a fleet role's calls): the same statements
# on both builds, so their cost measures the machine's noise over the same pairs (an A/A test)
# against which to read the others.
figures() {
    case "$1" in
        indexer) printf '%s\n' '^index_sessions\(\):|1|lower' '^indexer vs COPY of rows:|1|higher' \
            '^indexer vs COPY raw jsonb:|1|higher' '^append \+ index_now\(\):|1|lower' \
            '^COPY of the same rows:|1|lower' '^COPY of raw lines \(jsonb\):|1|lower' ;;
        fleet) printf '%s\n' '^1 worker\(s\), [0-9]+ directories of 1 file:|4|higher' \
            '^1 worker\(s\), [0-9]+ directories of 10 files:|4|higher' \
            '^2 worker\(s\), [0-9]+ directories of 1 file:|4|higher' ;;
        push) printf '%s\n' 'shippers vs COPY of the raw lines|2|higher' '^one append_session_bytes call per file vs COPY|1|higher' \
            '^time of a round:|2|lower' '^time of a round:|3|lower' '^duplicate-chunk storm|1|lower' \
            '^WAL per pushed byte:|1|lower' '^100 one-byte pushes|3|lower' '^append-to-pushed p50|2|lower' ;;
        retention) printf '%s\n' '^cleanup_session_buffers\(\):|1|lower' '^ratio rolled-back run / DELETE:|1|lower' \
            '^ratio cleanup / DELETE:|1|lower' '^DELETE \.\.\. WHERE file_id IN|1|lower' ;;
        recovery) printf '%s\n' '^recovery_plan p50 among|3|lower' '^ratio recovery_plan / hand SQL \(p50, 2M\):|3|lower' \
            '^ratio recovery_plan / hand SQL \(p50, 20k\):|3|lower' '^catch-up, nothing new:|1|lower' \
            '^job_timeline:|1|lower' '^ratio job_timeline / job_events:|1|lower' \
            '^hand among [0-9]{6,} events|2|lower' '^SELECT \* FROM job_events:|1|lower' ;;
        checkpoint) printf '%s\n' '^write_checkpoint +[0-9]|1|lower' '^ratio write_checkpoint / plain SQL|1|lower' \
            '^ratio with 3 files|6|lower' '^plain_sql +[0-9]|1|lower' '^parse_only +[0-9]|1|lower' ;;
        liveness) printf '%s\n' '^among +1 000 000 jobs:|4|lower' '^ratio reap_zombies / hand SQL \(1M\):|2|lower' \
            '^ratio 1M / 10k:|3|lower' '^with the partial index on heartbeat_at:|1|higher' \
            '^hand reaper among +1 000 000 jobs:|4|lower' '^without it:|1|higher' ;;
        # The lines read "<call> baseline (0.6.0 path) N/s agent with token N/s time ratio R": the
        # baseline (a fleet role, no token) is the A/A figure.
        authority) printf '%s\n' '^fleet_heartbeat |5|lower' '^fleet_write_checkpoint |5|lower' \
            '^hot_heartbeat |5|lower' '^hot_write_checkpoint |5|lower' '^fleet_heartbeat +baseline|3|higher' \
            '^hot_write_checkpoint +baseline|3|higher' ;;
        *) printf '%s\n' 'ratio|1|lower' ;;
    esac
}

LOGS="${COMPARE}/logs"
rm -rf "${LOGS}"
mkdir -p "${LOGS}"
nth=0
for b in "${benches[@]}"; do
    # Which build runs first alternates by pair and by benchmark, so that a drift of the machine
    # over the run favours neither.
    nth=$((nth + 1))
    order=()
    for p in $(seq 1 "${pairs}"); do
        if [ $(((p + nth) % 2)) = 0 ]; then order+=(base head); else order+=(head base); fi
    done
    n=0
    for side in "${order[@]}"; do
        n=$((n + 1))
        say "${b}: ${side} (run ${n} of ${#order[@]})"
        use "${side}"
        CORTEX_BENCH_INSTALLED=1 CORTEX_BENCH_SHIP="${COMPARE}/${side}/cortex-buffer-ship" \
            bash scripts/bench.sh "${b}" >"${LOGS}/${b}.${side}.${n}" 2>"${LOGS}/${b}.${side}.${n}.err" ||
            die "${b} failed on ${side}: ${LOGS}/${b}.${side}.${n}.err"
    done
done
use head

echo
echo "== ${base_rev:0:12} (base) against the working tree at $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + changes') (head), ${pairs} pair(s) of runs =="
printf '%-12s %-58s %12s %12s %8s %10s\n' benchmark figure base head cost "pairs' range"
for b in "${benches[@]}"; do
    figures "$b" | python3 "${REPO_ROOT}/scripts/bench_figures.py" "$b" "${LOGS}"
done
echo "base, head: medians over the runs. cost: the median of the pairs' costs, each pair's runs one after the other; head/base for a time or a cost ratio, base/head for a throughput or a higher-is-better ratio; above 1 the head is slower"
