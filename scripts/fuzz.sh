#!/usr/bin/env bash
# R4 of the reliability suite: fuzzing, then the corpus replayed against PostgreSQL and Node.
#
# 1. crates/core/tests/fuzz.rs fuzzes the line parser, dialect detection, the jsonb writer and
#    canonical JSON for CORTEX_FUZZ_SECONDS per target (default here 10; the full setting 120),
#    optimised (about 30 times the executions of a debug build), and keeps a sample of what it
#    generated (CORTEX_FUZZ_SAVE per target) beside the seeds of crates/core/fuzz-corpus/.
# 2. pgrx-tests/tests/fuzz_replay.rs replays seeds and sample, in batches, through the indexer
#    and compares every line with jsonb_in (a cluster) and JSON.parse (Node).
# Expects the extension installed (scripts/reliability.sh and scripts/test.sh install it).
# CORTEX_FUZZ_SEED repeats a run (default: fixed in the short setting, the clock in the full one).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_toolchain
export CORTEX_FUZZ_SECONDS="${CORTEX_FUZZ_SECONDS:-10}"
if [ "${CORTEX_RELIABILITY:-short}" = short ]; then
    export CORTEX_FUZZ_SEED="${CORTEX_FUZZ_SEED:-20261126}"
fi
export CORTEX_FUZZ_CORPUS_OUT="${CORTEX_FUZZ_CORPUS_OUT:-$(work_dir)/fuzz-corpus}"
rm -rf "${CORTEX_FUZZ_CORPUS_OUT}"
export CORTEX_E2E_DIR="${CORTEX_E2E_DIR:-$(work_dir)/e2e}"
mkdir -p "${CORTEX_E2E_DIR}"

say "fuzzing the core: ${CORTEX_FUZZ_SECONDS} s per target"
CARGO_TARGET_DIR="${REPO_ROOT}/target/fuzz" CARGO_PROFILE_DEV_OPT_LEVEL=2 \
    cargo test -p cortex_buffer_core --test fuzz -- --nocapture

say "replaying the corpus against jsonb_in and JSON.parse"
(cd pgrx-tests && cargo test --features reliability --test fuzz_replay -- --nocapture)
