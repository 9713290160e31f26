# shellcheck shell=bash
# The indexer at fleet scale. Sourced by scripts/bench.sh (release build). Unlike the other
# benchmarks, every figure here is taken with durability on (fsync, synchronous_commit and
# full_page_writes at their defaults): a fleet's volume is not a lab's.
#
# 1. Many small files: FLEET_LINES (default 100 000) cortex-spike lines, indexed by the worker
#    from the moment it is enabled until indexer_status counts every line, vs COPY of the raw
#    lines into a bare one-column jsonb table, in the same run (targets: >= 0.9x with one
#    worker; two workers >= 1.3x one worker). Two layouts: FLEET_FILES (default 1 000) job
#    directories of one file each, and FLEET_FILES directories of 10 files each. Median of
#    FLEET_ROUNDS (default 3) rounds. With them, what bounds them on this machine, in the same
#    run: the machine's busy cores while indexing (two workers can at best take the rest), and
#    the 10-file layout's best case, the 1-file time plus the catalogue rows alone for the 9 files
#    more per directory (catalogue_floor).
# 2. Append-to-visible latency without index_now(): FLEET_SAMPLES (default 1 000) lines appended
#    over 50 files, 50 a second; commit time of the event row (track_commit_timestamp) minus the
#    append time written in the line. p50, p99 (target p50 <= 50 ms).
# 3. Fleet load: FLEET_LOAD_FILES (default 1 000) files each receive one line a second for
#    FLEET_LOAD_SECONDS (default 60): lag p50/p99 and the worker's CPU over the window.
# 4. Idle CPU of the worker over 10 000 and FLEET_IDLE_BIG (default 100 000) tracked files, one
#    job directory each, in notify mode over FLEET_IDLE_SECONDS (default 600: the window takes in
#    the periodic rescan, every 300 s by default), and in poll mode (1 s poll) over
#    FLEET_POLL_SECONDS (default 60). Target < 0.5 % of one core in notify mode. In notify mode a
#    window of FLEET_IDLE_BASE_SECONDS (default 120) comes first, to tell the walks' cost apart.

# FLEET_PARTS picks sections (default all): ingest latency load idle.
PARTS=" ${FLEET_PARTS:-ingest latency load idle} "
part() { [[ "${PARTS}" == *" $1 "* ]]; }
LINES="${FLEET_LINES:-100000}"
NFILES="${FLEET_FILES:-1000}"
ROUNDS="${FLEET_ROUNDS:-3}"
SAMPLES="${FLEET_SAMPLES:-1000}"
LOAD_FILES="${FLEET_LOAD_FILES:-1000}"
LOAD_SECONDS="${FLEET_LOAD_SECONDS:-60}"
IDLE_BIG="${FLEET_IDLE_BIG:-100000}"
IDLE_SECONDS="${FLEET_IDLE_SECONDS:-600}"
POLL_SECONDS="${FLEET_POLL_SECONDS:-60}"
IDLE_BASE_SECONDS="${FLEET_IDLE_BASE_SECONDS:-120}"
SESSIONS="${BENCH}/sessions"
DATA="${BENCH}/data-files"
GEN="${REPO_ROOT}/bench/fleet_gen.py"
mkdir -p "${SESSIONS}" "${DATA}"
chown postgres "${SESSIONS}" "${DATA}"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms_of() { sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }
now_ms() { date +%s%3N; }
hz=$(getconf CLK_TCK)
# Turns the workers off and waits until each says so (a pass under way finishes first), so that
# what follows (TRUNCATE) never meets a worker's transaction.
disable_workers() {
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = off" -c "SELECT pg_reload_conf()" >/dev/null
    bench_psql -c "DO \$\$ BEGIN
                     FOR i IN 1..3000 LOOP
                       EXIT WHEN NOT EXISTS (SELECT FROM cortex_buffer.indexer_worker() WHERE worker_state <> 'disabled');
                       PERFORM pg_catalog.pg_sleep(0.01);
                     END LOOP; END \$\$" >/dev/null
}
restart() { pg "${BIN}/pg_ctl" restart -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null; }
worker_pids() { bench_psql -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type = 'cortex_buffer indexer'"; }
# CPU ticks (user + system) of the given pids.
ticks() { local t=0 p; for p in "$@"; do t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done; echo "$t"; }
pct() { awk -v a="$1" -v b="$2" -v s="$3" -v hz="$hz" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / s }'; }

# Durability on, commit timestamps for the latency figures.
bench_psql -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "ALTER SYSTEM SET full_page_writes = on" -c "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
restart
bench_psql -c "CREATE EXTENSION cortex_buffer" -c "CREATE TABLE raw_lines (doc jsonb)" >/dev/null
durability="fsync=$(bench_psql -c 'SHOW fsync'), synchronous_commit=$(bench_psql -c 'SHOW synchronous_commit') (the worker pins off: rows and offsets commit together), full_page_writes=$(bench_psql -c 'SHOW full_page_writes')"

# --- 1. many small files ---------------------------------------------------------------------
set_workers() {
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.workers = $1" -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = off" >/dev/null
    restart
}
# Busy and idle jiffies of the whole machine, all CPUs.
machine_jiffies() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat; }
ingest_round() { # $1 = layout dir; prints "index_ms copy_ms busy_cores" (the machine's, while indexing)
    local corpus="$1"
    disable_workers
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file, raw_lines CASCADE" >/dev/null
    rm -rf "${SESSIONS}"
    cp -a "${corpus}" "${SESSIONS}"
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.sessions_dir = '${SESSIONS}'" -c "CHECKPOINT" >/dev/null
    local t0 t1 n e0
    # The workers' own count of events indexed (shared memory, counted when a pass ends): what
    # the waiting session looks at, since summing session_file every 10 ms would take CPU from
    # the very workers it times. The rows are counted once they are done.
    e0=$(bench_psql -c "SELECT coalesce(sum(events_indexed), 0) FROM cortex_buffer.indexer_worker()")
    local b0 i0 b1 i1
    read -r b0 i0 < <(machine_jiffies)
    t0=$(now_ms)
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
    # One session waits, looking every 10 ms (a new psql per look would take CPU from the worker).
    bench_psql -c "DO \$\$ BEGIN
                     FOR i IN 1..90000 LOOP
                       EXIT WHEN (SELECT coalesce(sum(events_indexed), 0) FROM cortex_buffer.indexer_worker()) >= ${e0} + ${LINES};
                       PERFORM pg_catalog.pg_sleep(0.01);
                     END LOOP; END \$\$" >/dev/null
    t1=$(now_ms)
    read -r b1 i1 < <(machine_jiffies)
    n=$(bench_psql -c "SELECT coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file")
    [ "$n" -ge "${LINES}" ] || die "indexing stalled at ${n} of ${LINES} lines"
    [ "$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event")" = "${LINES}" ] || die "event rows differ from lines"
    bench_psql -c "CHECKPOINT" >/dev/null
    local tc
    tc=$(bench_psql <<SQL | ms_of
\timing on
COPY raw_lines (doc) FROM '${DATA}/$(basename "${corpus}").jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
SQL
)
    echo "$(( t1 - t0 )) ${tc} $(awk -v b="$(( b1 - b0 ))" -v i="$(( i1 - i0 ))" -v n="$(nproc)" 'BEGIN { printf "%.2f", (b + i > 0) ? n * b / (b + i) : 0 }')"
}

# The floor the catalogue alone sets under the 10-file layout, for $1 session_file rows (the
# 10-file layout's, under another prefix), in a transaction that is rolled back, with
# synchronous_commit off as the worker pins it. Prints two times in ms:
#  - "pass": the rows inserted with the columns discovery writes, then given the state indexing
#    records, one statement each, as a pass runs them (over generate_series, not the pass's
#    unnested arrays, so a lower bound on what the pass pays);
#  - "copy": the same rows, already finished, written by COPY: the cheapest way to write them,
#    a floor for any design that keeps one catalogue row per file.
catalogue_floor() {
    local rows="${DATA}/catalogue-floor.copy" cols
    cols=$(bench_psql -c "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
                           WHERE attrelid = 'cortex_buffer.session_file'::regclass AND attnum > 0
                             AND NOT attisdropped AND attgenerated = ''")
    bench_psql <<SQL | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | paste -sd' ' | awk '{print $1 + $2, $3}'
BEGIN;
SET LOCAL synchronous_commit = off;
\timing on
INSERT INTO cortex_buffer.session_file (path, job_dir, dialect, size_bytes, mtime, device, inode, session_ordinal, job_id)
SELECT '/floor/' || j || '/session_20260223T143022Z_pod-' || (i % 10) || '.jsonl', j, 'cortex-spike', 3000,
       pg_catalog.now(), 2049, i, 1771857022, j::uuid
  FROM pg_catalog.generate_series(1, $1) AS i,
       LATERAL (SELECT '0193a8b2-7c41-7d2e-8fff-' || pg_catalog.lpad((i / 10)::text, 12, '0') AS j) AS d;
UPDATE cortex_buffer.session_file
   SET indexed_offset = 3000, indexed_lines = 10, generation = 1, indexed_device = device,
       indexed_inode = inode, indexed_mtime = mtime, fingerprint_len = 3000, fingerprint = inode,
       indexed_dialect = dialect, tail_unterminated = false, tail_pending = false, total_lines = 10,
       valid_lines = 10, corrupt_lines = 0, blank_lines = 0, last_failed_parse = false, last_seq = 9,
       seq_gaps = 0, seq_first_missing = NULL, seq_resets = 0, first_ts = mtime, last_ts = mtime,
       session_start_seen = false, session_end_seen = false, schema_version = NULL,
       foreign_job_lines = 0, crash_cut_lines = 0, cut_pending = false, trusted = true,
       indexed_at = pg_catalog.now(), failures = 0, last_error = NULL, last_error_at = NULL,
       quarantined_at = NULL
 WHERE pg_catalog.starts_with(path, '/floor/');
\timing off
COPY (SELECT ${cols} FROM cortex_buffer.session_file WHERE pg_catalog.starts_with(path, '/floor/')) TO '${rows}';
ROLLBACK;
BEGIN;
SET LOCAL synchronous_commit = off;
\timing on
COPY cortex_buffer.session_file (${cols}) FROM '${rows}';
\timing off
ROLLBACK;
SQL
}

# The 10-file layout's best ratio to COPY: $1 the 1-file layout's ms, $2 COPY's ms, $3 the ms
# of the catalogue rows of the 10-file layout, of which 9 in 10 are files the 1-file one lacks.
best_case() { awk -v i="$1" -v c="$2" -v f="$3" 'BEGIN { print c / (i + f * 0.9) }'; }

declare -A ratio spreads busies
ceil_pass=() ceil_copy=()
if part ingest; then
for layout in one 10; do
    corpus="${DATA}/corpus-${layout}"
    per_dir=1
    [ "$layout" = 10 ] && per_dir=10
    python3 "${GEN}" corpus "${corpus}" "${NFILES}" "${per_dir}" "${LINES}"
    find "${corpus}" -name '*.jsonl' -print0 | sort -z | xargs -0 cat > "${DATA}/corpus-${layout}.jsonl"
    chown -R postgres "${corpus}" "${DATA}"
done
for workers in 1 2; do
    set_workers "$workers"
    for layout in one 10; do
        rs=()
        for r in $(seq 1 "${ROUNDS}"); do
            read -r ti tc busy < <(ingest_round "${DATA}/corpus-${layout}")
            rs+=("$(awk -v i="$ti" -v c="$tc" 'BEGIN { print c / i }')")
            busies["$workers-$layout"]+="${busy} "
            printf '  %d worker(s), layout %s, round %d: worker %8.1f ms   COPY raw jsonb %8.1f ms   machine busy %s of %d cores\n' "$workers" "$layout" "$r" "$ti" "$tc" "$busy" "$(nproc)" >&2
            if [ "$workers" = 1 ] && [ "$layout" = one ]; then
                # What the 10-file layout could reach at best: this round's 1-file time, plus the
                # catalogue alone for its 9 files more per directory.
                disable_workers
                read -r cf_pass cf_copy < <(catalogue_floor $(( NFILES * 10 )))
                ceil_pass+=("$(best_case "$ti" "$tc" "$cf_pass")")
                ceil_copy+=("$(best_case "$ti" "$tc" "$cf_copy")")
                printf '  catalogue alone, %d rows: %8.1f ms as a pass writes them, %8.1f ms by COPY\n' $(( NFILES * 10 )) "$cf_pass" "$cf_copy" >&2
            fi
        done
        ratio["$workers-$layout"]=$(printf '%s\n' "${rs[@]}" | median)
        spreads["$workers-$layout"]=$(printf '%s\n' "${rs[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
    done
done

fi

# --- 2. latency and 3. fleet load (one worker, notify) ----------------------------------------
if part latency || part load; then
set_workers 1
bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file CASCADE" >/dev/null
rm -rf "${SESSIONS}"; mkdir -p "${SESSIONS}"; chown postgres "${SESSIONS}"
bench_psql -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
sleep 2
lag_of() { # $1 = marker
    bench_psql -c "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric(10,1) || ' ' ||
                          percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric(10,1) || ' ' || count(*)
                     FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000
                                  - (payload->>'appended_us')::numeric / 1000 AS ms
                             FROM cortex_buffer.event WHERE payload->>'marker' = '$1') l"
}
if part latency; then
python3 "${GEN}" append "${SESSIONS}" latency 50 "${SAMPLES}" 50
sleep 2
lat=$(lag_of latency)
mode=$(bench_psql -c "SELECT watch_mode FROM cortex_buffer.indexer_status")

fi
if part load; then
read -ra pids <<<"$(worker_pids)"
python3 "${GEN}" append "${SESSIONS}" load "${LOAD_FILES}" $(( LOAD_FILES * LOAD_SECONDS )) "${LOAD_FILES}" &
writer=$!
sleep 1
c0=$(ticks "${pids[@]}"); s0=$(now_ms)
wait "$writer"
c1=$(ticks "${pids[@]}"); s1=$(now_ms)
sleep 2
load_lag=$(lag_of load)
load_cpu=$(pct "$c0" "$c1" "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print (b - a) / 1000 }')")

fi
fi

# --- 4. idle ---------------------------------------------------------------------------------
rescans() { bench_psql -c "SELECT coalesce(sum((w->>'rescans')::int), 0) FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w"; }
# $1 = files, $2 = watch mode, $3 = seconds; prints "cpu% rescans base% base_rescans walk_s": the
# worker's CPU over the window and the periodic rescans (walks) in it; in notify mode first a
# window of FLEET_IDLE_BASE_SECONDS right after indexing, mostly without a walk ("base"), and the
# CPU seconds each walk of the main window cost beyond the base rate ("-" in poll mode).
idle() {
    local files="$1" mode="$2" secs="$3" tree="${DATA}/idle-$1"
    disable_workers
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file CASCADE" >/dev/null
    [ -d "$tree" ] || { python3 "${GEN}" idle "$tree" "$files"; chown -R postgres "$tree"; }
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.sessions_dir = '${tree}'" -c "ALTER SYSTEM SET cortex_buffer.watch = '${mode}'" \
        -c "ALTER SYSTEM SET cortex_buffer.poll_interval = '1s'" -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = on" \
        -c "SELECT pg_reload_conf()" >/dev/null
    local n=0
    for _ in $(seq 1 1800); do
        n=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.session_file WHERE generation > 0")
        [ "$n" -ge "$files" ] && break
        sleep 1
    done
    [ "$n" -ge "$files" ] || die "only ${n} of ${files} idle files indexed"
    sleep 5
    local p a b r0 r1 base="- -" walk="-"
    read -ra p <<<"$(worker_pids)"
    if [ "$mode" = notify ]; then
        r0=$(rescans); a=$(ticks "${p[@]}"); sleep "${IDLE_BASE_SECONDS}"; b=$(ticks "${p[@]}"); r1=$(rescans)
        base="$(pct "$a" "$b" "${IDLE_BASE_SECONDS}") $(( r1 - r0 ))"
    fi
    r0=$(rescans); a=$(ticks "${p[@]}"); sleep "$secs"; b=$(ticks "${p[@]}"); r1=$(rescans)
    if [ "$mode" = notify ] && [ $(( r1 - r0 )) -gt 0 ]; then
        walk=$(awk -v t="$(( b - a ))" -v r="${base%% *}" -v s="$secs" -v n="$(( r1 - r0 ))" -v hz="$hz" \
            'BEGIN { printf "%.2f", (t / hz - r / 100 * s) / n }')
    fi
    echo "$(pct "$a" "$b" "$secs") $(( r1 - r0 )) ${base} ${walk}"
}
if part idle; then
echo "idle: ${IDLE_SECONDS} s windows in notify mode, ${POLL_SECONDS} s in poll mode" >&2
read -r idle_n10 resc_n10 base_n10 bresc_n10 walk_n10 < <(idle 10000 notify "${IDLE_SECONDS}")
read -r idle_p10 _ < <(idle 10000 poll "${POLL_SECONDS}")
read -r idle_nbig resc_nbig base_nbig bresc_nbig walk_nbig < <(idle "${IDLE_BIG}" notify "${IDLE_SECONDS}")
read -r idle_pbig _ < <(idle "${IDLE_BIG}" poll "${POLL_SECONDS}")

fi
if part ingest; then
    echo
    echo "== many small files: ${LINES} cortex-spike lines, release build, ${durability}; median of ${ROUNDS} rounds =="
    echo "ratio = COPY of the raw lines into a bare jsonb table / the worker indexing them (higher is better)"
    for workers in 1 2; do
        printf '%d worker(s), %d directories of 1 file:    %.2fx (spread %s)\n' "$workers" "${NFILES}" "${ratio[$workers-one]}" "${spreads[$workers-one]}"
        printf '%d worker(s), %d directories of 10 files:  %.2fx (spread %s)\n' "$workers" "${NFILES}" "${ratio[$workers-10]}" "${spreads[$workers-10]}"
    done
    awk -v p="$(printf '%s\n' "${ceil_pass[@]}" | median)" -v c="$(printf '%s\n' "${ceil_copy[@]}" | median)" -v n="${NFILES}" \
        'BEGIN { printf "1 worker, %d directories of 10 files, at best (the 1-file time plus the catalogue alone for 9 files more per directory): %.2fx as a pass writes it, %.2fx with its rows written by COPY\n", n, p, c }'
    for layout in one 10; do
        b1=$(tr ' ' '\n' <<<"${busies[1-$layout]}" | grep . | median)
        b2=$(tr ' ' '\n' <<<"${busies[2-$layout]}" | grep . | median)
        awk -v l="$layout" -v a="$b1" -v b="$b2" -v n="$(nproc)" 'BEGIN { printf "machine busy while indexing, layout %s: %.2f of %d cores with 1 worker, %.2f with 2; 2 against 1 at best: %.2fx\n", l, a, n, b, (a > 0) ? n / a : 0 }'
    done
    awk -v a="${ratio[1-one]}" -v b="${ratio[2-one]}" -v c="${ratio[1-10]}" -v d="${ratio[2-10]}" \
        'BEGIN { printf "2 workers vs 1: %.2fx (1 file per directory), %.2fx (10 files per directory); target >= 1.3x\n", b / a, d / c }'
fi
if part latency; then
    echo
    echo "== append-to-visible latency without index_now(), ${mode} mode, ms: p50 p99 samples =="
    echo "${lat}   (target p50 <= 50)"
fi
if part load; then
    echo
    echo "== fleet load: ${LOAD_FILES} files, one line a second each, ${LOAD_SECONDS} s =="
    echo "lag ms p50 p99 samples: ${load_lag}; worker CPU ${load_cpu}% of one core"
fi
if part idle; then
    echo
    echo "== idle worker, one job directory per file =="
    echo "10000 files, notify, ${IDLE_SECONDS} s: ${idle_n10}% of one core (${resc_n10} periodic rescans in the window); target < 0.5"
    echo "${IDLE_BIG} files, notify, ${IDLE_SECONDS} s: ${idle_nbig}% of one core (${resc_nbig} periodic rescans in the window); target < 0.5"
    echo "  before the windows, ${IDLE_BASE_SECONDS} s right after indexing: ${base_n10}% (10000 files, ${bresc_n10} rescans), ${base_nbig}% (${IDLE_BIG} files, ${bresc_nbig} rescans) of one core"
    echo "  each periodic rescan (walk) of the windows beyond that rate: ${walk_n10} s of CPU (10000 files), ${walk_nbig} s (${IDLE_BIG} files)"
    echo "10000 files, poll (1 s), ${POLL_SECONDS} s: ${idle_p10}% of one core"
    echo "${IDLE_BIG} files, poll (1 s), ${POLL_SECONDS} s: ${idle_pbig}% of one core"
fi
