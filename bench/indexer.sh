# shellcheck shell=bash
# The session indexer. Sourced by scripts/bench.sh.
#
# 1. Throughput, on one generated corpus of cortex-spike files (BENCH_LINES lines, default
#    100 000): index_sessions() indexing it from scratch vs
#      (a) COPY of the very rows it produced (normalised columns + payload) into a table of the
#          same shape and indexes as cortex_buffer.event (target: indexer >= 1.0x), and
#      (b) COPY of the raw lines into a bare one-column jsonb table (target >= 0.7x),
#    back to back in each round; lines/s, MB/s and the median ratio of the rounds.
# 2. Append-to-visible latency: a line appended to a session file, then index_now(); the
#    latency is the commit time of its event row (track_commit_timestamp) minus the append
#    time written in the line. p50 and p95 (target p50 <= 250 ms). Also with a 100 ms poll and
#    no index_now().
# 3. The worker's CPU while idle over 10 000 tracked files (default 1 s poll).

ROUNDS="${BENCH_ROUNDS:-5}"
LINES="${BENCH_LINES:-100000}"
FILES=50
IDLE_FILES="${BENCH_IDLE_FILES:-10000}"
SESSIONS="${BENCH}/sessions"
DATA="${BENCH}/data-files"
mkdir -p "${SESSIONS}" "${DATA}"
chown postgres "${SESSIONS}" "${DATA}"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms_of() { sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }

bench_psql -c "ALTER SYSTEM SET track_commit_timestamp = on"
pg "${BIN}/pg_ctl" restart -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
bench_psql -c "CREATE EXTENSION cortex_buffer"

# The corpus: FILES spike files of realistic lines (~300 bytes; the fields each event type
# carries in the spike's schema), written by the server.
per_file=$(( LINES / FILES ))
echo "generating ${LINES} lines in ${FILES} files" >&2
for f in $(seq 1 "${FILES}"); do
    job="$(printf '0193a8b2-7c41-7d2e-9f00-%012d' "$f")"
    mkdir -p "${SESSIONS}/${job}"
    chown postgres "${SESSIONS}/${job}"
    bench_psql -c "COPY (
        SELECT (json_build_object(
                   'type', t,
                   'timestamp', to_char(timestamptz '2026-02-23 14:30:22+00' + g * interval '17 milliseconds', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                   'job_id', '${job}', 'session_id', '0193a8b2-7c50-7000-8000-00000000a001', 'seq', g, 'step_index', g / 5)::jsonb
                || CASE t
                     WHEN 'LLM_REQUEST' THEN json_build_object('model', 'claude-sonnet-4-5-20250929', 'message_count', 2 + g / 5)::jsonb
                     WHEN 'LLM_RESPONSE' THEN json_build_object('prompt_tokens', 1000 + g % 5000, 'completion_tokens', 100 + g % 900,
                                                                 'finish_reason', 'tool_use', 'duration_ms', 900 + g % 4000)::jsonb
                     WHEN 'TOOL_START' THEN json_build_object('invocation_id', 'inv_' || lpad((g / 5)::text, 6, '0'), 'tool_name', 'web_search',
                                                               'input_summary', 'query number ' || g || ' about release notes and changelogs')::jsonb
                     WHEN 'TOOL_RESULT' THEN json_build_object('invocation_id', 'inv_' || lpad((g / 5)::text, 6, '0'), 'tool_name', 'web_search',
                                                                'success', g % 7 <> 0,
                                                                'result_summary', 'Found ' || (g % 13) || ' results for query number ' || g || ' about release notes')::jsonb
                     ELSE json_build_object('checkpoint_id', '0193a8b2-8b00-7000-8000-' || lpad(g::text, 12, '0'))::jsonb
                   END)::text
          FROM generate_series(0, ${per_file} - 1) g,
               LATERAL (SELECT (ARRAY['LLM_REQUEST','LLM_RESPONSE','TOOL_START','TOOL_RESULT','CHECKPOINT_WRITTEN'])[1 + g % 5] AS t) x
    ) TO '${SESSIONS}/${job}/session_20260223T143022Z_pod-$f.jsonl'"
done
cat "${SESSIONS}"/*/*.jsonl > "${DATA}/corpus.jsonl"
chown postgres "${DATA}/corpus.jsonl"
total_lines=$(wc -l < "${DATA}/corpus.jsonl")
total_bytes=$(stat -c %s "${DATA}/corpus.jsonl")

bench_psql <<'SQL'
CREATE TABLE event_copy (LIKE cortex_buffer.event INCLUDING ALL);
CREATE TABLE raw_lines (doc jsonb);
SQL

declare -a t_index t_rows t_raw r_rows r_raw
echo "throughput: ${ROUNDS} rounds over ${total_lines} lines, $(( total_bytes / 1048576 )) MB" >&2
for r in $(seq 1 "${ROUNDS}"); do
    bench_psql -c "TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line, cortex_buffer.session_file, cortex_buffer.pushed_file, event_copy, raw_lines CASCADE" >/dev/null
    bench_psql -c "CHECKPOINT" >/dev/null
    ti=$(bench_psql -v ON_ERROR_STOP=1 <<SQL | ms_of
\timing on
SELECT sum(events_added) FROM cortex_buffer.index_sessions('${SESSIONS}');
SQL
)
    if [ "$r" = 1 ]; then
        n=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event")
        [ "$n" = "$total_lines" ] || die "indexed ${n} of ${total_lines} lines"
        bench_psql -c "COPY (SELECT * FROM cortex_buffer.event ORDER BY file_id, byte_offset) TO '${DATA}/rows.copy'"
    fi
    bench_psql -c "CHECKPOINT" >/dev/null
    tr=$(bench_psql <<SQL | ms_of
\timing on
COPY event_copy FROM '${DATA}/rows.copy';
SQL
)
    bench_psql -c "CHECKPOINT" >/dev/null
    tw=$(bench_psql <<SQL | ms_of
\timing on
COPY raw_lines (doc) FROM '${DATA}/corpus.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
SQL
)
    t_index+=("$ti"); t_rows+=("$tr"); t_raw+=("$tw")
    r_rows+=("$(awk -v i="$ti" -v c="$tr" 'BEGIN { print c / i }')")
    r_raw+=("$(awk -v i="$ti" -v c="$tw" 'BEGIN { print c / i }')")
    printf '  round %d: index_sessions %8.1f ms   COPY rows %8.1f ms   COPY raw jsonb %8.1f ms\n' "$r" "$ti" "$tr" "$tw" >&2
done
mi=$(printf '%s\n' "${t_index[@]}" | median)
mr=$(printf '%s\n' "${t_rows[@]}" | median)
mw=$(printf '%s\n' "${t_raw[@]}" | median)
rr=$(printf '%s\n' "${r_rows[@]}" | median)
rw=$(printf '%s\n' "${r_raw[@]}" | median)
spread() { printf '%s\n' "$@" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }

# Latency: the worker indexes while lines are appended.
bench_psql -c "ALTER SYSTEM SET cortex_buffer.worker_enabled = on" -c "ALTER SYSTEM SET cortex_buffer.settle_period = 0" \
    -c "SELECT pg_reload_conf()" >/dev/null
lat_file="${SESSIONS}/0193a8b2-7c41-7d2e-9f00-000000000001/session_20260223T143022Z_pod-1.jsonl"
latency() { # $1 = label, $2 = use index_now (1/0), $3 = count
    local marker="$1" wake="$2" n="$3"
    for i in $(seq 1 "$n"); do
        printf '{"type":"LAT","timestamp":"2026-02-23T15:00:00.000Z","seq":%d,"marker":"%s","appended_us":%s}\n' \
            "$i" "$marker" "$(date +%s%6N)" >> "${lat_file}"
        [ "$wake" = 1 ] && bench_psql -c "SELECT cortex_buffer.index_now()" >/dev/null
        sleep 0.15
    done
    sleep 1.5
    bench_psql -c "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric(10,1) || ' ' ||
                          percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric(10,1) || ' ' || count(*)
                     FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000
                                  - (payload->>'appended_us')::numeric / 1000 AS ms
                             FROM cortex_buffer.event WHERE type = 'LAT' AND payload->>'marker' = '${marker}') l"
}
sleep 2
lat_now=$(latency wake 1 40)
bench_psql -c "ALTER SYSTEM SET cortex_buffer.poll_interval = 100" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
lat_poll=$(latency poll 0 40)

# Idle CPU over many tracked files.
bench_psql -c "ALTER SYSTEM SET cortex_buffer.poll_interval = 1000" -c "SELECT pg_reload_conf()" >/dev/null
echo "creating ${IDLE_FILES} small session files for the idle measurement" >&2
for d in $(seq 1 $(( IDLE_FILES / 10 ))); do
    dir="${SESSIONS}/idle-$d"
    mkdir -p "$dir"
    for k in $(seq 1 10); do echo '{"type":"X","timestamp":"2026-01-01T00:00:00Z"}' > "$dir/session-$k.jsonl"; done
done
chown -R postgres "${SESSIONS}"
bench_psql -c "SELECT cortex_buffer.index_now()" >/dev/null
for _ in $(seq 1 120); do
    tracked=$(bench_psql -c "SELECT files_tracked - (SELECT count(*) FROM cortex_buffer.session_file WHERE generation > 0) FROM cortex_buffer.indexer_status")
    [ "$tracked" = 0 ] && [ "$(bench_psql -c "SELECT count(*) FROM cortex_buffer.session_file")" -ge "${IDLE_FILES}" ] && break
    sleep 1
done
sleep 3
pid=$(bench_psql -c "SELECT worker_pid FROM cortex_buffer.indexer_status")
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks); sleep 10; t1=$(ticks)
idle_pct=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / 10 }')
pass_ms=$(bench_psql -c "SELECT round(last_pass_ms::numeric, 1) FROM cortex_buffer.indexer_status")
files_now=$(bench_psql -c "SELECT files_tracked FROM cortex_buffer.indexer_status")

echo
echo "== indexer throughput: ${total_lines} cortex-spike lines, $(awk -v b="$total_bytes" 'BEGIN{printf "%.1f", b/1048576}') MB, ${FILES} files, median of ${ROUNDS} rounds =="
awk -v l="$total_lines" -v b="$total_bytes" -v t="$mi" 'BEGIN { printf "index_sessions():          %8.1f ms  %9.0f lines/s  %6.1f MB/s\n", t, l / t * 1000, b / 1048576 / t * 1000 }'
awk -v l="$total_lines" -v b="$total_bytes" -v t="$mr" 'BEGIN { printf "COPY of the same rows:     %8.1f ms  %9.0f lines/s  %6.1f MB/s\n", t, l / t * 1000, b / 1048576 / t * 1000 }'
awk -v l="$total_lines" -v b="$total_bytes" -v t="$mw" 'BEGIN { printf "COPY of raw lines (jsonb): %8.1f ms  %9.0f lines/s  %6.1f MB/s\n", t, l / t * 1000, b / 1048576 / t * 1000 }'
printf 'indexer vs COPY of rows:   %.2fx (spread %s; target >= 1.0)\n' "$rr" "$(spread "${r_rows[@]}")"
printf 'indexer vs COPY raw jsonb: %.2fx (spread %s; target >= 0.7)\n' "$rw" "$(spread "${r_raw[@]}")"
echo
echo "== append-to-visible latency (commit of the event row - append), ms: p50 p95 samples =="
echo "append + index_now():      ${lat_now}   (target p50 <= 250)"
echo "100 ms poll, no wake-up:   ${lat_poll}"
echo
echo "== idle worker over ${files_now} tracked files, 1 s poll =="
echo "CPU: ${idle_pct}% of one core over 10 s; last pass ${pass_ms} ms"
