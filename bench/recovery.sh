# shellcheck shell=bash
# recovery_plan() at pod start, and job_timeline(). Sourced by scripts/bench.sh.
#
# The job: a 1 kB checkpoint, one spike session file with 102 events before the checkpoint's
# marker and 50 after it (25 tool calls started, 24 finished, one LLM request). It is indexed
# among other jobs' events: 20 000 in all in one database, 2 000 000 in another
# (BENCH_LARGE_EVENTS). Measured server-side, per call, in the same run:
#
#   recovery_plan   SELECT cortex_buffer.recovery_plan(job)     (phase 1 + phase 2, as jsonb)
#   hand SQL        the same rows by hand: latest file, last marker, the events after it, and
#                   the calls among them (starts left-joined to results: completed and in flight)
#   hand + read     hand SQL plus read_checkpoint(job) (what phase 1 costs by itself)
#   job_timeline    a 10 000-event job's timeline, against SELECT * FROM job_events(job)
#   catch-up        a shipped-writer job under sessions_dir (60 events, a checkpoint's
#                   high-water mark after 30): recovery_plan with its call-time catch-up and
#                   nothing new, against the same plan with cortex_buffer.catch_up off (the
#                   index as the worker left it: what 0.6.0's plan read); and with 10 new lines
#                   appended before each call
#
# Targets: recovery_plan among 2M / among 20k <= 1.2 (the cost follows the job's events, not
# the table); recovery_plan / hand SQL <= 2; p50 under 1 ms; catch-up with nothing new /
# without catch-up <= 1.3.

ROUNDS="${BENCH_ROUNDS:-5}"
CALLS="${BENCH_CALLS:-2000}"
LARGE="${BENCH_LARGE_EVENTS:-2000000}"
SMALL=20000
JOB=0193a8b2-7c41-7d2e-9f00-00000000b001
BIGJOB=0193a8b2-7c41-7d2e-9f00-00000000b002
CUJOB=0193a8b2-7c41-7d2e-9f00-00000000b003
C1=0193a8b2-0000-7000-8000-0000000000c1

# The job's session file, as the spike writer writes it.
spike_file() {
    local job="$1" before="$2" after_pairs="$3" t=0 seq=0
    line() {
        printf '{"type":"%s","timestamp":"2026-02-23T%02d:%02d:%02d.000Z","job_id":"%s","session_id":"s1","seq":%d%s}\n' \
            "$1" $((10 + t / 3600)) $(((t / 60) % 60)) $((t % 60)) "$job" "$seq" "$2"
        t=$((t + 1)); seq=$((seq + 1))
    }
    line SESSION_START ',"buffer_schema_version":1,"agent_id":"a","pod_name":"p1"'
    line CHECKPOINT_LOADED ',"checkpoint_id":null,"step_index":null'
    for i in $(seq 1 $((before / 2))); do
        line TOOL_START ",\"invocation_id\":\"b$i\",\"tool_name\":\"search\",\"input_hash\":\"$(printf '%064d' "$i")\",\"input_summary\":\"query $i\""
        line TOOL_RESULT ",\"invocation_id\":\"b$i\",\"tool_name\":\"search\",\"success\":true,\"duration_ms\":12,\"result_summary\":\"$i results for query $i\""
    done
    [ -n "${4:-}" ] && line CHECKPOINT_WRITTEN ",\"checkpoint_id\":\"$4\",\"step_index\":0"
    for i in $(seq 1 "$after_pairs"); do
        line TOOL_START ",\"invocation_id\":\"a$i\",\"tool_name\":\"fetch\",\"input_hash\":\"$(printf '%064d' "$i")\",\"input_summary\":\"url $i\""
        [ "$i" -lt "$after_pairs" ] && line TOOL_RESULT ",\"invocation_id\":\"a$i\",\"tool_name\":\"fetch\",\"success\":true,\"duration_ms\":40,\"result_summary\":\"page $i: $(printf 'x%.0s' $(seq 1 60))\""
    done
    line LLM_REQUEST ',"model":"claude-sonnet-4-5-20250929","step_index":1'
}

setup_db() {
    local db="$1" total="$2" dir="${BENCH}/sessions-$1"
    bench_psql -c "CREATE DATABASE ${db}"
    mkdir -p "${dir}/${JOB}" "${dir}/${BIGJOB}"
    spike_file "${JOB}" 100 25 "${C1}" >"${dir}/${JOB}/session_20260223T100000Z_p1.jsonl"
    spike_file "${BIGJOB}" 9998 0 >"${dir}/${BIGJOB}/session_20260223T100000Z_p1.jsonl"
    chown -R postgres "${dir}"
    pg "${BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "${RUN}" -p "${PORT}" -d "${db}" <<SQL >/dev/null
CREATE EXTENSION cortex_buffer;
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('${JOB}', gen_random_uuid(), 'RUNNING'), ('${BIGJOB}', gen_random_uuid(), 'RUNNING');
SELECT * FROM cortex_buffer.write_checkpoint('${JOB}', jsonb_build_object('checkpoint_id', '${C1}', 'step_index', 0,
    'memory', (SELECT string_agg(md5(g::text), ' ') FROM generate_series(1, 29) g)));
SET cortex_buffer.settle_period = 0;
SELECT count(*) FROM cortex_buffer.index_sessions('${dir}');
-- Other jobs' events: files of 200 events each, as the indexer stores them.
INSERT INTO cortex_buffer.session_file (path, job_dir, dialect, size_bytes, mtime, device, inode, job_id, session_ordinal,
                                        generation, indexed_offset, indexed_lines, total_lines, valid_lines)
SELECT '/filler/' || j || '/session-001.jsonl', j::text, 'cortex-spike', 60000, now(), 1, f, j, 1, 1, 60000, 200, 200, 200
  FROM (SELECT f, gen_random_uuid() AS j FROM generate_series(1, (${total} - 10154 + 199) / 200) f) jobs;
INSERT INTO cortex_buffer.event (file_id, byte_offset, line_no, type, ts, job_id, session_id, seq, invocation_id, tool_name,
                                 success, payload)
SELECT sf.file_id, g * 300, g + 1, CASE WHEN g % 2 = 0 THEN 'TOOL_START' ELSE 'TOOL_RESULT' END,
       now() - (200 - g) * interval '1 second', sf.job_id, 's', g, sf.file_id || '-' || (g / 2), 'tool',
       CASE WHEN g % 2 = 1 THEN true END,
       jsonb_build_object('type', 'TOOL_RESULT', 'seq', g, 'result_summary', md5(sf.file_id::text || g) || md5(g::text))
  FROM cortex_buffer.session_file sf, generate_series(0, 199) g
 WHERE sf.path LIKE '/filler/%';
VACUUM ANALYZE;
CREATE FUNCTION lat_plan(job uuid, n int) RETURNS float8[] LANGUAGE plpgsql AS \$\$
DECLARE t timestamptz; out float8[] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        t := clock_timestamp();
        PERFORM cortex_buffer.recovery_plan(job);
        out := out || extract(epoch FROM clock_timestamp() - t) * 1e6;
    END LOOP;
    RETURN out;
END \$\$;
CREATE FUNCTION lat_hand(job uuid, n int, with_read boolean) RETURNS float8[] LANGUAGE plpgsql AS \$\$
DECLARE t timestamptz; out float8[] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        t := clock_timestamp();
        IF with_read THEN PERFORM * FROM cortex_buffer.read_checkpoint(job); END IF;
        -- The plan's rows: the calls after the marker with their results (completed and in
        -- flight), and the events after the marker.
        PERFORM * FROM (
            WITH f AS (SELECT file_id FROM cortex_buffer.session_file WHERE job_id = job ORDER BY session_ordinal DESC LIMIT 1),
                 m AS (SELECT e.file_id, e.byte_offset AS off FROM cortex_buffer.event e JOIN f USING (file_id)
                        WHERE e.type = 'CHECKPOINT_WRITTEN' ORDER BY e.byte_offset DESC LIMIT 1),
                 ev AS MATERIALIZED (SELECT e.* FROM cortex_buffer.event e JOIN m ON e.file_id = m.file_id AND e.byte_offset > m.off),
                 calls AS (SELECT s.invocation_id, s.tool_name, r.success, r.payload->>'result_summary' AS result,
                                  s.payload->>'input_summary' AS input, s.payload->>'input_hash' AS input_hash, s.ts AS started_at,
                                  r.ts AS finished_at, s.byte_offset AS start_offset, r.byte_offset AS result_offset
                             FROM ev s LEFT JOIN ev r ON r.invocation_id = s.invocation_id AND r.type = 'TOOL_RESULT'
                            WHERE s.type = 'TOOL_START'),
                 evs AS (SELECT seq, type, byte_offset FROM ev ORDER BY byte_offset)
            SELECT (SELECT jsonb_agg(c) FROM calls c) AS calls, (SELECT jsonb_agg(e) FROM evs e) AS events) q;
        out := out || extract(epoch FROM clock_timestamp() - t) * 1e6;
    END LOOP;
    RETURN out;
END \$\$;
CREATE FUNCTION lat_timeline(job uuid, n int, timeline boolean) RETURNS float8[] LANGUAGE plpgsql AS \$\$
DECLARE t timestamptz; out float8[] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        t := clock_timestamp();
        IF timeline THEN PERFORM count(detail) FROM cortex_buffer.job_timeline(job);
        ELSE PERFORM count(payload) FROM cortex_buffer.job_events(job); END IF;
        out := out || extract(epoch FROM clock_timestamp() - t) * 1e6;
    END LOOP;
    RETURN out;
END \$\$;
SQL
}

echo "recovery: building ${SMALL} and ${LARGE} indexed events" >&2
setup_db rec_small "${SMALL}"
setup_db rec_large "${LARGE}"
q() { pg "${BIN}/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "${RUN}" -p "${PORT}" -d "$1" -c "$2"; }
for db in rec_small rec_large; do
    [ "$(q "$db" "SELECT count(*) >= ${SMALL} FROM cortex_buffer.event")" = t ] || die "$db: events missing"
    shape="$(q "$db" "SELECT concat_ws(' ', p->>'reason', jsonb_array_length(p->'completed'), jsonb_array_length(p->'in_flight'),
                                        jsonb_array_length(p->'events_after_marker')) FROM cortex_buffer.recovery_plan('${JOB}') p")"
    [ "$shape" = "marker_matched 24 1 50" ] || die "$db: unexpected plan: $shape"
done
echo "recovery: $(q rec_large "SELECT count(*) FROM cortex_buffer.event") events in rec_large; plan: 24 completed, 1 in flight, 50 events after the marker" >&2

pct() { q "$1" "SELECT round(percentile_cont($2) WITHIN GROUP (ORDER BY x)::numeric, 1) FROM unnest($3) x"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A p50 p99
for r in $(seq 1 "${ROUNDS}"); do
    for db in rec_small rec_large; do
        for v in plan hand hand_read; do
            case $v in
                plan) call="lat_plan('${JOB}', ${CALLS})" ;;
                hand) call="lat_hand('${JOB}', ${CALLS}, false)" ;;
                hand_read) call="lat_hand('${JOB}', ${CALLS}, true)" ;;
            esac
            q "$db" "SELECT ${call}" >/dev/null  # warm
            out="$(q "$db" "WITH l AS (SELECT ${call} AS a) SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 1) || ' ' ||
                                   round(percentile_cont(0.99) WITHIN GROUP (ORDER BY x)::numeric, 1) FROM l, unnest(l.a) x")"
            p50["$db.$v"]+="${out% *}"$'\n'
            p99["$db.$v"]+="${out#* }"$'\n'
            printf '  round %d: %-9s %-9s p50 %7s us  p99 %7s us\n' "$r" "$db" "$v" "${out% *}" "${out#* }" >&2
        done
    done
done
m() { printf '%s' "${p50[$1]}" | median; }
m99() { printf '%s' "${p99[$1]}" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo
echo "== recovery_plan: 1 kB checkpoint, 50 events after the marker; ${CALLS} calls per round, median of ${ROUNDS} rounds =="
printf '%-34s %12s %12s\n' "" "p50 (us)" "p99 (us)"
for db in rec_small rec_large; do
    for v in plan hand hand_read; do
        printf '%-34s %12s %12s\n' "${v} among $(q "$db" "SELECT count(*) FROM cortex_buffer.event") events" "$(m "$db.$v")" "$(m99 "$db.$v")"
    done
done
files() { q "$1" "SELECT count(*) FROM cortex_buffer.session_file"; }
echo "ratio among ${LARGE} / among ${SMALL} (p50): $(ratio "$(m rec_large.plan)" "$(m rec_small.plan)")  (target <= 1.2; catalogue $(files rec_small) -> $(files rec_large) files)"
echo "ratio recovery_plan / hand SQL (p50, 2M):   $(ratio "$(m rec_large.plan)" "$(m rec_large.hand)")  (target <= 2)"
echo "ratio recovery_plan / hand SQL (p50, 20k):  $(ratio "$(m rec_small.plan)" "$(m rec_small.hand)")"
echo "ratio recovery_plan / hand SQL + read_checkpoint: $(ratio "$(m rec_large.plan)" "$(m rec_large.hand_read)")"
echo "recovery_plan p50 among ${LARGE}: $(m rec_large.plan) us (aim: under 1000)"

# Catch-up: a shipped-writer job in sessions_dir itself, with a high-water mark.
shipped_lines() {
    local from="$1" n="$2" i
    for i in $(seq "$from" $((from + n - 1))); do
        if [ $((i % 2)) = 0 ]; then
            printf '{"version":"1.0","timestamp":"2026-11-25T10:00:00.000Z","jobId":"%s","sessionId":"s","agentId":"a","type":"TOOL_CALL","data":{"type":"tool_use","toolName":"fetch","toolInput":{"url":"u%d"}},"sequence":%d}\n' "${CUJOB}" "$i" "$i"
        else
            printf '{"version":"1.0","timestamp":"2026-11-25T10:00:00.000Z","jobId":"%s","sessionId":"s","agentId":"a","type":"TOOL_RESULT","data":{"type":"tool_result","toolName":"fetch","output":"page %d","isError":false},"sequence":%d}\n' "${CUJOB}" "$i" "$i"
        fi
    done
}
CUFILE="${BENCH}/sessions/${CUJOB}/session-001.jsonl"
mkdir -p "$(dirname "${CUFILE}")"
shipped_lines 0 30 >"${CUFILE}"
chown -R postgres "${BENCH}/sessions"
q rec_large "INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('${CUJOB}', gen_random_uuid(), 'RUNNING')" >/dev/null
q rec_large "SELECT count(*) FROM cortex_buffer.index_sessions()" >/dev/null
q rec_large "SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('${CUJOB}', '{\"step_index\": 1}')" >/dev/null
shipped_lines 30 30 >>"${CUFILE}"
q rec_large "SELECT count(*) FROM cortex_buffer.index_sessions()" >/dev/null
cu_shape="$(q rec_large "SELECT p->>'reason' || ' ' || jsonb_array_length(p->'completed') FROM cortex_buffer.recovery_plan('${CUJOB}') p")"
[ "${cu_shape}" = "high_water_mark 15" ] || die "catch-up job: unexpected plan: ${cu_shape}"
declare -A cu
next=60
for r in $(seq 1 "${ROUNDS}"); do
    for v in on off; do
        call="lat_plan('${CUJOB}', ${CALLS})"
        q rec_large "SET cortex_buffer.catch_up = ${v}; SELECT ${call}" >/dev/null
        out="$(q rec_large "SET cortex_buffer.catch_up = ${v}; WITH l AS (SELECT ${call} AS a)
                            SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 1) FROM l, unnest(l.a) x")"
        cu[$v]+="${out##*$'\n'}"$'\n'
    done
    # 10 new lines before each call: what a pod's plan finds right after its predecessor died.
    samples=""
    for _ in $(seq 1 50); do
        shipped_lines "${next}" 10 >>"${CUFILE}"
        next=$((next + 10))
        samples+="$(q rec_large "SELECT (lat_plan('${CUJOB}', 1))[1]")"$'\n'
    done
    cu[new]+="$(printf '%s' "${samples}" | median)"$'\n'
    printf '  round %d: catch-up on %s us, off %s us, 10 new lines %s us\n' "$r" \
        "$(printf '%s' "${cu[on]}" | tail -1)" "$(printf '%s' "${cu[off]}" | tail -1)" "$(printf '%s' "${cu[new]}" | tail -1)" >&2
done
cu_on="$(printf '%s' "${cu[on]}" | median)"
cu_off="$(printf '%s' "${cu[off]}" | median)"
cu_new="$(printf '%s' "${cu[new]}" | median)"
echo
echo "== recovery_plan's call-time catch-up: a shipped-writer job in sessions_dir, median of ${ROUNDS} rounds =="
echo "catch-up, nothing new:   ${cu_on} us"
echo "catch-up off:            ${cu_off} us"
echo "catch-up of 10 new lines: ${cu_new} us"
echo "ratio catch-up (nothing new) / without catch-up: $(ratio "${cu_on}" "${cu_off}")  (target <= 1.3)"
echo "ratio catch-up of 10 new lines / nothing new:    $(ratio "${cu_new}" "${cu_on}")"

declare -A tl
for r in $(seq 1 "${ROUNDS}"); do
    for v in true false; do
        out="$(q rec_large "WITH l AS (SELECT lat_timeline('${BIGJOB}', 5, ${v}) AS a) SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 0) FROM l, unnest(l.a) x")"
        tl[$v]+="${out}"$'\n'
    done
done
ev="$(q rec_large "SELECT count(*) FROM cortex_buffer.job_events('${BIGJOB}')")"
t_ms="$(awk -v u="$(printf '%s' "${tl[true]}" | median)" 'BEGIN {printf "%.1f", u / 1000}')"
e_ms="$(awk -v u="$(printf '%s' "${tl[false]}" | median)" 'BEGIN {printf "%.1f", u / 1000}')"
echo
echo "== job_timeline: a ${ev}-event job among ${LARGE}, median of ${ROUNDS} rounds =="
echo "job_timeline:            ${t_ms} ms  ($(awk -v t="$t_ms" -v n="$ev" 'BEGIN {printf "%.2f", t * 1000 / n}') us per event)"
echo "SELECT * FROM job_events: ${e_ms} ms"
echo "ratio job_timeline / job_events: $(ratio "$t_ms" "$e_ms")"
