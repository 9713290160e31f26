# shellcheck shell=bash
# Push ingestion. Sourced by scripts/bench.sh (release build); every figure with durability on
# (fsync, full_page_writes and the COPY's synchronous_commit at their defaults; the shipper
# sets synchronous_commit = off for its own session, as it does by default).
#
# 1. Throughput: PUSH_LINES (default 100 000) cortex-spike lines in PUSH_FILES (default 1 000)
#    job directories of one file, split over PUSH_SHIPPERS (default 16) node directories, each
#    with its own shipper (its own source and connection, on loopback TCP). The shippers run as
#    a DaemonSet's do: started once, connected, and warmed by one unmeasured round; every round
#    brings a corpus of new jobs (no job or path of an earlier round). Timed from the moment the
#    files appear in the node directories until every line is indexed, against COPY of the same
#    raw lines into a bare jsonb table in the same round (target >= 0.7x). Median of
#    PUSH_ROUNDS (default 3).
# 2. Duplicate-chunk storm: the same, every batch sent twice (CB_SHIP_REPEAT=2): its time over
#    the time without the storm, same round (target <= 1.2x).
#    And the batch function's gain: the same pushes as one append_session_bytes call per file
#    (CB_SHIP_PER_FILE=1, what a shipper sends a server older than 0.12.0), same round.
#    Each variant has its own PUSH_SHIPPERS shippers, all started at the beginning; those of the other
#    variants idle while one is measured.
# 3. The flush window under load: while the shippers push a second corpus, an agent appends a
#    line to its own file and calls await_pushed() for it, PUSH_SAMPLES (default 50) times: the
#    time from the append until await_pushed returns true, p50 and p99 (and a trivial query's
#    round trip in the same run, which that time includes).
# WAL bytes per pushed byte (the shippers' rounds, and COPY's), and the WAL of 100 one-byte
# pushes after a 1 MiB line with no newline yet (the held tail is kept as pieces: each push adds
# one of about its own bytes).

LINES="${PUSH_LINES:-100000}"
NFILES="${PUSH_FILES:-1000}"
SHIPPERS="${PUSH_SHIPPERS:-16}"
[ "${NFILES}" -ge "${SHIPPERS}" ] || die "PUSH_FILES (${NFILES}) must be at least PUSH_SHIPPERS (${SHIPPERS})"
ROUNDS="${PUSH_ROUNDS:-3}"
SAMPLES="${PUSH_SAMPLES:-50}"
GEN="${REPO_ROOT}/bench/fleet_gen.py"
DATA="${BENCH}/push-data"
NODES="${BENCH}/nodes"
mkdir -p "${DATA}"
chown postgres "${DATA}"

# scripts/bench_compare.sh names the shipper built with the extension it compares.
if [ -z "${CORTEX_BENCH_SHIP:-}" ]; then
    cargo build --release -p cortex_buffer_ship >&2
fi
SHIP="${CORTEX_BENCH_SHIP:-${REPO_ROOT}/target/release/cortex-buffer-ship}"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms_of() { sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }
now_ms() { date +%s%3N; }

# Durability on; loopback TCP with a password for the shippers, as remote nodes connect.
bench_psql -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "ALTER SYSTEM SET full_page_writes = on" -c "ALTER SYSTEM SET listen_addresses = '127.0.0.1'" \
    -c "ALTER SYSTEM SET max_connections = $(( 3 * SHIPPERS + 20 ))" >/dev/null
sed -i '1i host all bench_shipper 127.0.0.1/32 scram-sha-256' "${PGDATA}/pg_hba.conf"
pg "${BIN}/pg_ctl" restart -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
bench_psql -c "CREATE EXTENSION cortex_buffer" -c "CREATE TABLE raw_lines (doc jsonb)" \
    -c "CREATE ROLE bench_shipper LOGIN PASSWORD 'bench'" -c "GRANT cortex_buffer_pusher TO bench_shipper" >/dev/null
DSN="host=127.0.0.1 port=${PORT} user=bench_shipper password=bench dbname=postgres"

# Each round's corpus: its own series of job ids, so that no job directory or path of an
# earlier round comes again (a long-running shipper has seen those, and the database is emptied
# between rounds).
corpus() { # $1 = series (0-255); prints its directory
    local dir="${DATA}/corpus-$1"
    if [ ! -d "${dir}" ]; then
        python3 "${GEN}" corpus "${dir}.tmp" "${NFILES}" 1 "${LINES}" "$1"
        mv "${dir}.tmp" "${dir}"
        chown -R postgres "${dir}"
    fi
    printf '%s\n' "${dir}"
}
python3 "${GEN}" corpus "${DATA}/corpus" "${NFILES}" 1 "${LINES}"
find "${DATA}/corpus" -name '*.jsonl' -print0 | sort -z | xargs -0 cat > "${DATA}/corpus.jsonl"
chown -R postgres "${DATA}"

SHIP_PIDS=()
# start_set NAME [ENV...]: PUSH_SHIPPERS shippers, sources NAME-1..N, each on its node directory
# ${NODES}/NAME-n, each with a one-line warm-up file pushed before this returns.
start_set() {
    local name="$1" s dir before token
    shift
    before=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.pushed_file")
    for s in $(seq 1 "${SHIPPERS}"); do
        # Each source's own token, passed with every call (one login for all the shippers).
        token="$(bench_psql -c "SELECT cortex_buffer.register_push_source('${name}-$s', all_jobs => true, login => 'bench_shipper')")"
        dir="${NODES}/${name}-$s/0193a8b2-7c41-7d2e-9f00-99999999$(printf '%04d' "$s")"
        mkdir -p "${dir}"
        printf '{"type":"SESSION_START","timestamp":"2026-02-23T15:00:00.000Z","job_id":"x","seq":0}\n' \
            > "${dir}/session-001.jsonl"
        env CB_SHIP_SOURCE_TOKEN="${token}" "$@" "${SHIP}" --settle 0 --batch 32 --poll-interval 1000 --report-every 3600 \
            --sessions-dir "${NODES}/${name}-$s" --source "${name}-$s" --dsn "${DSN}" 2>>"${BENCH}/ship.log" &
        SHIP_PIDS+=($!)
    done
    bench_psql -c "DO \$\$ BEGIN FOR i IN 1..3000 LOOP
                     EXIT WHEN (SELECT count(*) FROM cortex_buffer.pushed_file) >= ${before} + ${SHIPPERS};
                     PERFORM pg_catalog.pg_sleep(0.01); END LOOP; END \$\$" >/dev/null
}
stop_shippers() {
    if [ "${#SHIP_PIDS[@]}" -gt 0 ]; then
        kill "${SHIP_PIDS[@]}" 2>/dev/null || true
        wait "${SHIP_PIDS[@]}" 2>/dev/null || true
    fi
    SHIP_PIDS=()
    rm -rf "${NODES}"
}
# A failure leaves no shipper behind (they would retry against the next cluster on this port).
trap 'stop_shippers; pg "${BIN}/pg_ctl" stop -m fast -D "${PGDATA}" >/dev/null 2>&1 || true' EXIT
stage() { # $1 = corpus dir, $2 = set: its job directories moved to ${NODES}/stage-<set>-N, round-robin
    local i=0 d
    for d in "$1"/*/; do
        local n=$(( i % SHIPPERS + 1 ))
        mkdir -p "${NODES}/stage-$2-$n"
        mv "$d" "${NODES}/stage-$2-$n/"
        i=$(( i + 1 ))
    done
    rmdir "$1"
}
lines_in() { bench_psql -c "SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file"; }
# ship_round SET SERIES: prints the ms from the files' arrival in the set's node directories
# until every line is indexed; then removes them again (the shippers forget them).
ship_round() {
    local set="$1" series="$2" base t0 t1 s wal
    stage "$(corpus "${series}")" "${set}"
    base=$(lines_in)
    wal=$(bench_psql -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
    t0=$(now_ms)
    for s in $(seq 1 "${SHIPPERS}"); do mv "${NODES}/stage-${set}-$s"/* "${NODES}/${set}-$s/"; done
    bench_psql -c "DO \$\$ BEGIN FOR i IN 1..60000 LOOP
                     EXIT WHEN (SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file) >= ${base} + ${LINES};
                     PERFORM pg_catalog.pg_sleep(0.01); END LOOP; END \$\$" >/dev/null
    t1=$(now_ms)
    # A storm's second sendings may still be under way: the round ends when no shipper has run
    # a statement for 200 ms (else one could land after the next round's TRUNCATE).
    # (pg_stat_activity is read once per transaction unless its snapshot is cleared.)
    bench_psql -c "DO \$\$ DECLARE quiet int := 0; BEGIN FOR i IN 1..6000 LOOP
                     PERFORM pg_catalog.pg_stat_clear_snapshot();
                     IF EXISTS (SELECT FROM pg_catalog.pg_stat_activity
                                 WHERE application_name = 'cortex-buffer-ship' AND state <> 'idle')
                     THEN quiet := 0; ELSE quiet := quiet + 1; END IF;
                     IF quiet >= 20 THEN RETURN; END IF;
                     PERFORM pg_catalog.pg_sleep(0.01); END LOOP;
                     RAISE EXCEPTION 'the shippers were still pushing 60 s after the round'; END \$\$" >/dev/null
    # The round's WAL, for WAL bytes per pushed byte (every sending's, a storm's second ones too).
    bench_psql -c "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '${wal}')" >"${BENCH}/wal-${set}"
    for s in $(seq 1 "${SHIPPERS}"); do
        find "${NODES}/${set}-$s" -mindepth 1 -maxdepth 1 -name "0193a8b2-7c41-7d2e-$(printf '%04x' $(( 0x9F00 + series )))-*" \
            -exec rm -rf {} +
        rmdir "${NODES}/stage-${set}-$s"
    done
    echo $(( t1 - t0 ))
}

reset() {
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file CASCADE" \
        -c "TRUNCATE raw_lines" -c "CHECKPOINT" >/dev/null
}

check_all() { # every line once
    local n
    n=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event")
    [ "$n" = "${LINES}" ] || die "pushed ${n} events, expected ${LINES}"
}

copy_ms() {
    local wal
    bench_psql -c "CHECKPOINT" >/dev/null
    wal=$(bench_psql -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
    bench_psql <<SQL | ms_of
\timing on
COPY raw_lines (doc) FROM '${DATA}/corpus.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
SQL
    bench_psql -c "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '${wal}')" >"${BENCH}/wal-copy"
}
CORPUS_BYTES=$(stat -c %s "${DATA}/corpus.jsonl")

start_set p CB_SHIP_REPEAT=1
start_set s CB_SHIP_REPEAT=2
start_set f CB_SHIP_PER_FILE=1
# Warm-up: one unmeasured round per set (series 1-3), as a DaemonSet's shippers have pushed
# before; the measured rounds use series 4 on.
series=1
for set in p s f; do reset; ship_round "${set}" "${series}" >/dev/null; series=$(( series + 1 )); done
ratios=(); storms=(); gains=(); wals=(); copy_wals=(); per_file=(); shippers_ms=(); per_file_ms=()
for r in $(seq 1 "${ROUNDS}"); do
    reset
    tp=$(ship_round p "${series}"); series=$(( series + 1 ))
    check_all
    wals+=("$(awk -v w="$(cat "${BENCH}/wal-p")" -v b="${CORPUS_BYTES}" 'BEGIN { print w / b }')")
    tc=$(copy_ms)
    copy_wals+=("$(awk -v w="$(cat "${BENCH}/wal-copy")" -v b="${CORPUS_BYTES}" 'BEGIN { print w / b }')")
    reset
    ts=$(ship_round s "${series}"); series=$(( series + 1 ))
    check_all
    reset
    tf=$(ship_round f "${series}"); series=$(( series + 1 ))
    check_all
    printf '  round %d: %d shippers %8.1f ms   storm (every batch twice) %8.1f ms   one call per file %8.1f ms   COPY raw jsonb %8.1f ms\n' \
        "$r" "${SHIPPERS}" "$tp" "$ts" "$tf" "$tc" >&2
    ratios+=("$(awk -v p="$tp" -v c="$tc" 'BEGIN { print c / p }')")
    storms+=("$(awk -v p="$tp" -v s="$ts" 'BEGIN { print s / p }')")
    gains+=("$(awk -v p="$tp" -v f="$tf" 'BEGIN { print f / p }')")
    per_file+=("$(awk -v f="$tf" -v c="$tc" 'BEGIN { print c / f }')")
    shippers_ms+=("$tp") per_file_ms+=("$tf")
done
stop_shippers
ratio=$(printf '%s\n' "${ratios[@]}" | median)
ratio_spread=$(printf '%s\n' "${ratios[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
storm=$(printf '%s\n' "${storms[@]}" | median)
storm_spread=$(printf '%s\n' "${storms[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
wal_per_byte=$(printf '%s\n' "${wals[@]}" | median)
copy_wal_per_byte=$(printf '%s\n' "${copy_wals[@]}" | median)
gain=$(printf '%s\n' "${gains[@]}" | median)
gain_spread=$(printf '%s\n' "${gains[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')

# --- 3. the flush window under load -------------------------------------------------------------
reset
start_set node
AGENT_JOB=0193a8b2-7c41-7d2e-9f00-777777777777
AGENT_DIR="${NODES}/node-1/${AGENT_JOB}"
mkdir -p "${AGENT_DIR}"
AGENT_FILE="${AGENT_DIR}/session-001.jsonl"
agent_line() { printf '{"type":"TOOL_START","timestamp":"2026-02-23T15:00:00.000Z","job_id":"%s","seq":%d}\n' "${AGENT_JOB}" "$1"; }
agent_line 0 > "${AGENT_FILE}"
# The corpus again, arriving while the agent samples, keeps the shippers busy.
stage "$(corpus "${series}")" node
for s in $(seq 1 "${SHIPPERS}"); do mv "${NODES}/stage-node-$s"/* "${NODES}/node-$s/"; done
windows=(); trips=()
for n in $(seq 1 "${SAMPLES}"); do
    t0=$(date +%s%N)
    agent_line "$n" >> "${AGENT_FILE}"
    size=$(stat -c %s "${AGENT_FILE}")
    ok=$(bench_psql -c "SELECT cortex_buffer.await_pushed('${AGENT_JOB}', '${AGENT_JOB}/session-001.jsonl', ${size}, '10 s')")
    t1=$(date +%s%N)
    [ "$ok" = t ] || die "await_pushed timed out"
    windows+=("$(( (t1 - t0) / 1000 ))")
    t2=$(date +%s%N); bench_psql -c "SELECT 1" >/dev/null; t3=$(date +%s%N)
    trips+=("$(( (t3 - t2) / 1000 ))")
    sleep 0.02
done
load_done=$(bench_psql -c "SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file WHERE job_id <> '${AGENT_JOB}'")
stop_shippers
pct() { printf '%s\n' "$@" | sort -n | awk -v p="$P" '{a[NR]=$1} END {i=int(NR*p/100+0.5); if(i<1)i=1; if(i>NR)i=NR; printf "%.1f", a[i]/1000}'; }
w50=$(P=50 pct "${windows[@]}"); w99=$(P=99 pct "${windows[@]}")
r50=$(P=50 pct "${trips[@]}")

# --- 4. a push's writes against its bytes behind a long held line ------------------------------
# A line of about 1 MiB with no newline yet (under the default 1 MiB cap, so held whole), then 100
# one-byte pushes, each its own call and transaction: their WAL, against the bytes pushed.
HELD_JOB=0193a8b2-7c41-7d2e-9f00-666666666666
bench_psql -c "SELECT cortex_buffer.register_push_source('bench-held', all_jobs => true)" >/dev/null
held_push() { # $1 = start offset, $2 = SQL bytea expression
    bench_psql -c "SELECT action FROM cortex_buffer.append_session_bytes('bench-held', '${HELD_JOB}/session-001.jsonl', $1, $2, '1:1:h')" >/dev/null
}
held_line="convert_to('{\"type\":\"X\",\"job_id\":\"${HELD_JOB}\"}' || chr(10) || '{\"type\":\"TOOL_RESULT\",\"text\":\"' || repeat('a', 1048000), 'UTF8')"
held_push 0 "${held_line}"
held_at=$(bench_psql -c "SELECT f.indexed_offset + p.held_len FROM cortex_buffer.pushed_file p JOIN cortex_buffer.session_file f USING (file_id) WHERE p.job_id = '${HELD_JOB}'")
held_wal=$(bench_psql -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
for n in $(seq 0 99); do held_push $(( held_at + n )) "'\\x62'::bytea"; done
held_wal=$(bench_psql -c "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '${held_wal}')")

echo
echo "== push ingestion: ${LINES} cortex-spike lines in ${NFILES} files over ${SHIPPERS} shippers on loopback TCP, release build, fsync=on, full_page_writes=on; median of ${ROUNDS} rounds =="
printf '%d shippers vs COPY of the raw lines into a bare jsonb table: %.2fx (spread %s; target >= 0.7x; higher is better)\n' "${SHIPPERS}" "${ratio}" "${ratio_spread}"
printf 'duplicate-chunk storm (every batch twice) vs none: %.2fx the time (spread %s; target <= 1.2x)\n' "${storm}" "${storm_spread}"
printf 'append_session_batch vs one append_session_bytes call per file: %.2fx the throughput (spread %s; higher is better)\n' "${gain}" "${gain_spread}"
printf 'one append_session_bytes call per file vs COPY of the raw lines: %.2fx (higher is better)\n' "$(printf '%s\n' "${per_file[@]}" | median)"
printf 'time of a round: %s shippers %.1f ms, one call per file %.1f ms (medians)\n' "${SHIPPERS}" \
    "$(printf '%s\n' "${shippers_ms[@]}" | median)" "$(printf '%s\n' "${per_file_ms[@]}" | median)"
printf 'WAL per pushed byte: %.2f (COPY of the raw lines: %.2f)\n' "${wal_per_byte}" "${copy_wal_per_byte}"
printf '100 one-byte pushes after a 1 MiB unterminated line: %d bytes of WAL, %.0f per pushed byte (target < 1 MB)\n' "${held_wal}" "$(( held_wal / 100 ))"
echo
echo "== the flush window under load: append, then await_pushed() until the server has it (${SAMPLES} samples, the shippers pushing ${LINES} more lines meanwhile) =="
echo "append-to-pushed p50 ${w50} ms, p99 ${w99} ms (of which a psql connection and query: p50 ${r50} ms); load lines indexed meanwhile: ${load_done} of $(( LINES + SHIPPERS ))"
