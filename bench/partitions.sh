# shellcheck shell=bash
# The partitioned layout (partition_events()) against the plain tables, in the same run, on the
# same rows. Sourced by scripts/bench.sh.
#
# The index: BENCH_PARTITION_ROWS event rows (default 10 000 000) in BENCH_PARTITION_FILES
# session files (default 10 000) that are gone and older than every retention period, plus one
# live job whose session file (a spike-dialect buffer of 200 events with tool calls, some in
# flight) its recovery plan reads. Measured:
#
#   recovery_plan   the live job's plan, server-side, BENCH_CALLS calls per round (median of
#                   BENCH_ROUNDS rounds), on the plain tables and then on the partitioned ones
#                   (target: partitioned / plain <= 1.2)
#   retention       cleanup_session_buffers() removing the gone files' rows: on the plain
#                   tables it deletes them row by row (its DELETE, through event's primary key);
#                   on the partitioned ones it drops their partitions (files_per_partition =
#                   files / 10, so ten partitions of a million rows each by default). Both
#                   start from vacuumed, analysed tables written back to disk.
#   conversion      partition_events() over the same rows (what converting an installation
#                   costs, for the operator's planning)

ROWS="${BENCH_PARTITION_ROWS:-10000000}"
FILES="${BENCH_PARTITION_FILES:-10000}"
ROUNDS="${BENCH_ROUNDS:-5}"
CALLS="${BENCH_CALLS:-500}"
PER_PARTITION=$((FILES / 10))
JOB=0193a8b2-7c41-7d2e-9f00-00000000e001
SESS="${BENCH}/sessions"

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

bench_psql -c "CREATE EXTENSION cortex_buffer"
bench_psql -c "INSERT INTO cortex_buffer.job (id, agent_id, status, started_at, heartbeat_at)
               VALUES ('${JOB}', gen_random_uuid(), 'RUNNING', now(), now())"
# The live job's buffer, as the spike writer writes it: 90 calls finished, 10 in flight.
mkdir -p "${SESS}/${JOB}"
python3 - "${SESS}/${JOB}/session-001.jsonl" "${JOB}" <<'PY'
import json, sys
path, job = sys.argv[1], sys.argv[2]
seq = 0
with open(path, "w") as f:
    def line(kind, **more):
        global seq
        f.write(json.dumps({"type": kind, "timestamp": "2026-02-23T10:%02d:%02d.000Z" % (seq // 60 % 60, seq % 60),
                            "job_id": job, "session_id": "s1", "seq": seq, **more}) + "\n")
        seq += 1
    line("SESSION_START", buffer_schema_version=1, agent_id="a", pod_name="p1")
    for i in range(100):
        line("TOOL_START", invocation_id="c%d" % i, tool_name="search", input_hash="%064d" % i, input_summary="query %d" % i)
        if i < 90:
            line("TOOL_RESULT", invocation_id="c%d" % i, tool_name="search", success=True, duration_ms=12,
                 result_summary="%d results" % i)
PY
chown -R postgres "${SESS}"
bench_psql >/dev/null <<'SQL'
CREATE FUNCTION bench_plan_us(job uuid, calls int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. calls LOOP
        PERFORM cortex_buffer.recovery_plan(job);
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / calls;
END $$;
SQL

# The gone files' rows, numbered from the start of a fresh span of ids.
build() {
    bench_psql >/dev/null <<SQL
SELECT setval('cortex_buffer.session_file_seq',
              ((SELECT last_value FROM cortex_buffer.session_file_seq) / ${PER_PARTITION} + 2) * ${PER_PARTITION} - 1);
INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, indexed_offset, gone_at,
                                        valid_lines, total_lines)
SELECT '${SESS}/gone/session-' || n || '.jsonl', 'gone', 0, now() - interval '30 days', 1, n, 0, now() - interval '30 days',
       ${ROWS} / ${FILES}, ${ROWS} / ${FILES}
  FROM generate_series(1, ${FILES}) n;
INSERT INTO cortex_buffer.event (file_id, byte_offset, line_no, type, ts, seq, invocation_id, payload)
SELECT f.file_id, (l - 1) * 120, l, 'TOOL_RESULT', now() - interval '30 days', l, 'i' || f.file_id || '-' || l,
       '{"type":"TOOL_RESULT","success":true,"result_summary":"ok"}'
  FROM cortex_buffer.session_file f, generate_series(1, ${ROWS} / ${FILES}) l
 WHERE f.job_dir = 'gone';
VACUUM ANALYZE;
CHECKPOINT;
SQL
    sync
}

events() { bench_psql -c "SELECT count(*) FROM cortex_buffer.event"; }

plan_rounds() {
    local out=""
    for _ in $(seq 1 "${ROUNDS}"); do
        out+="$(bench_psql -c "SELECT round(bench_plan_us('${JOB}', ${CALLS})::numeric, 1)")"$'\n'
    done
    printf '%s' "$out" | median
}

cleanup() {
    local t out
    t=$(date +%s%N)
    out="$(bench_psql -c "SELECT coalesce(sum(rows_deleted), 0) FROM cortex_buffer.cleanup_session_buffers(max_dirs => ${FILES})" 2>/dev/null)"
    echo "$(ms_since "$t") ${out}"
}

# The plain tables.
bench_psql -c "SELECT cortex_buffer.recovery_plan('${JOB}')" >/dev/null
build
live=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_id = '${JOB}'")
[ "$(events)" = $((ROWS / FILES * FILES + live)) ] || die "the plain index holds $(events) events"
plain_us=$(plan_rounds)
read -r delete_ms delete_rows <<<"$(cleanup)"
[ "$(events)" = "${live}" ] || die "the plain cleanup left $(events) events"

# The same rows again, converted, then the partitioned layout.
build
t=$(date +%s%N)
parts=$(bench_psql -c "SET client_min_messages = warning; SELECT count(*) FROM cortex_buffer.partition_events(${PER_PARTITION}, 2)")
convert_ms=$(ms_since "$t")
# As the plain tables were measured: vacuumed, analysed, written back.
bench_psql -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
sync
[ "$(events)" = $((ROWS / FILES * FILES + live)) ] || die "the conversion left $(events) events"
part_us=$(plan_rounds)
read -r drop_ms drop_rows <<<"$(cleanup)"
[ "$(events)" = "${live}" ] || die "the partitioned cleanup left $(events) events"
dropped=$(bench_psql -c "SELECT count(*) FROM pg_inherits WHERE inhparent = 'cortex_buffer.event'::regclass")

echo
echo "== partitioned layout: ${ROWS} events in ${FILES} gone files, ${PER_PARTITION} files per partition; recovery_plan of a live job (${live} events), median of ${ROUNDS} rounds of ${CALLS} calls =="
printf 'recovery_plan, plain tables:          %8.1f us per call\n' "${plain_us}"
printf 'recovery_plan, partitioned:           %8.1f us per call\n' "${part_us}"
printf 'retention by row deletion:            %8d ms (%d index rows deleted, as reported)\n' "${delete_ms}" "${delete_rows}"
printf 'retention by partition drop:          %8d ms (%d rows, as reported; %d partitions of event left)\n' "${drop_ms}" "${drop_rows}" "${dropped}"
printf 'partition_events() conversion:        %8d ms (%d partitions made)\n' "${convert_ms}" "${parts}"
awk -v p="${plain_us}" -v q="${part_us}" -v d="${delete_ms}" -v r="${drop_ms}" 'BEGIN {
    printf "ratio recovery_plan partitioned / plain: %6.2f  (target <= 1.2)\n", q / p
    printf "ratio partition drop / row deletion:     %6.3f  (%.0fx faster)\n", r / d, d / r }'
