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
#    FLEET_ROUNDS (default 3) rounds.
# 2. Append-to-visible latency without index_now(): FLEET_SAMPLES (default 1 000) lines appended
#    over 50 files, 50 a second; commit time of the event row (track_commit_timestamp) minus the
#    append time written in the line. p50, p99 (target p50 <= 50 ms).
# 3. Fleet load: FLEET_LOAD_FILES (default 1 000) files each receive one line a second for
#    FLEET_LOAD_SECONDS (default 60): lag p50/p99 and the worker's CPU over the window.
# 4. Idle CPU of the worker over 10 000 and FLEET_IDLE_BIG (default 100 000) tracked files, one
#    job directory each, in notify mode over FLEET_IDLE_SECONDS (default 600: the window takes in
#    the periodic rescan, every 300 s by default), and in poll mode (1 s poll) over
#    FLEET_POLL_SECONDS (default 60). Target < 0.5 % of one core in notify mode.

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
ingest_round() { # $1 = layout dir; prints "index_ms copy_ms"
    local corpus="$1"
    disable_workers
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file, raw_lines" >/dev/null
    rm -rf "${SESSIONS}"
    cp -a "${corpus}" "${SESSIONS}"
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.sessions_dir = '${SESSIONS}'" -c "CHECKPOINT" >/dev/null
    local t0 t1 n e0
    # The workers' own count of events indexed (shared memory, counted when a pass ends): what
    # the waiting session looks at, since summing session_file every 10 ms would take CPU from
    # the very workers it times. The rows are counted once they are done.
    e0=$(bench_psql -c "SELECT coalesce(sum(events_indexed), 0) FROM cortex_buffer.indexer_worker()")
    t0=$(now_ms)
    bench_psql -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
    # One session waits, looking every 10 ms (a new psql per look would take CPU from the worker).
    bench_psql -c "DO \$\$ BEGIN
                     FOR i IN 1..90000 LOOP
                       EXIT WHEN (SELECT coalesce(sum(events_indexed), 0) FROM cortex_buffer.indexer_worker()) >= ${e0} + ${LINES};
                       PERFORM pg_catalog.pg_sleep(0.01);
                     END LOOP; END \$\$" >/dev/null
    t1=$(now_ms)
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
    echo "$(( t1 - t0 )) ${tc}"
}

declare -A ratio spreads
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
            read -r ti tc < <(ingest_round "${DATA}/corpus-${layout}")
            rs+=("$(awk -v i="$ti" -v c="$tc" 'BEGIN { print c / i }')")
            printf '  %d worker(s), layout %s, round %d: worker %8.1f ms   COPY raw jsonb %8.1f ms\n' "$workers" "$layout" "$r" "$ti" "$tc" >&2
        done
        ratio["$workers-$layout"]=$(printf '%s\n' "${rs[@]}" | median)
        spreads["$workers-$layout"]=$(printf '%s\n' "${rs[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
    done
done

fi

# --- 2. latency and 3. fleet load (one worker, notify) ----------------------------------------
if part latency || part load; then
set_workers 1
bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file" >/dev/null
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
idle() { # $1 = files, $2 = watch mode, $3 = seconds; prints "cpu% passes rescans"
    local files="$1" mode="$2" secs="$3" tree="${DATA}/idle-$1"
    disable_workers
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file" >/dev/null
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
    local p a b r0 r1
    read -ra p <<<"$(worker_pids)"
    r0=$(bench_psql -c "SELECT coalesce(sum((w->>'rescans')::int), 0) FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w")
    a=$(ticks "${p[@]}"); sleep "$secs"; b=$(ticks "${p[@]}")
    r1=$(bench_psql -c "SELECT coalesce(sum((w->>'rescans')::int), 0) FROM cortex_buffer.indexer_status, jsonb_array_elements(workers) w")
    echo "$(pct "$a" "$b" "$secs") $(( r1 - r0 ))"
}
if part idle; then
echo "idle: ${IDLE_SECONDS} s windows in notify mode, ${POLL_SECONDS} s in poll mode" >&2
read -r idle_n10 resc_n10 < <(idle 10000 notify "${IDLE_SECONDS}")
read -r idle_p10 _ < <(idle 10000 poll "${POLL_SECONDS}")
read -r idle_nbig resc_nbig < <(idle "${IDLE_BIG}" notify "${IDLE_SECONDS}")
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
    echo "10000 files, poll (1 s), ${POLL_SECONDS} s: ${idle_p10}% of one core"
    echo "${IDLE_BIG} files, poll (1 s), ${POLL_SECONDS} s: ${idle_pbig}% of one core"
fi
