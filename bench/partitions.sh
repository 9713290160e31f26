# shellcheck shell=bash
# The partitioned layout (partition_events()) against the plain tables, in the same run, on the
# same rows: what the storage layout is decided by (docs/design.md, Storage layout). Sourced by
# scripts/bench.sh.
#
# The index: BENCH_PARTITION_ROWS event rows (default 10 000 000) in BENCH_PARTITION_FILES
# session files (default 10 000) that are gone and older than every retention period, plus one
# live job whose session file (a spike-dialect buffer of 200 events with tool calls, some in
# flight) its recovery plan reads. Measured on each layout:
#
#   recovery_plan   the live job's plan, server-side, BENCH_CALLS calls per round (median of
#                   BENCH_ROUNDS rounds) (target: partitioned / plain <= 1.2)
#   retention       cleanup_session_buffers() removing the gone files' rows, by the same step on
#                   both layouts: on the plain tables it deletes them (its DELETE, through
#                   event's primary key); on the partitioned ones, where every file of a
#                   partition goes, it drops the partition (files_per_partition = files / 10, so
#                   ten partitions of a million rows each by default). Both start from vacuumed,
#                   analysed tables written back to disk.
#   partial         the same, with every other file gone only a day ago (kept by gone_retention):
#                   no partition goes whole, so both layouts delete the rows
#   ingest          index_sessions() indexing BENCH_PARTITION_INGEST_FILES new files (default
#                   1 000) of 100 cortex-spike lines each, into each layout (the partitioned one
#                   makes the partitions the new files need)
#   conversion      partition_events() over the same rows (what converting an installation
#                   costs, for the operator's planning)

ROWS="${BENCH_PARTITION_ROWS:-10000000}"
FILES="${BENCH_PARTITION_FILES:-10000}"
ROUNDS="${BENCH_ROUNDS:-5}"
INGEST_FILES="${BENCH_PARTITION_INGEST_FILES:-1000}"
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

# build [partial]: the gone files' rows, numbered from the start of a fresh span of ids (in the
# partitioned layout, into partitions made for them first); with "partial", every other file
# went only a day ago.
build() {
    local recent=0
    [ "${1:-}" = partial ] && recent=1
    bench_psql >/dev/null <<SQL
SELECT setval('cortex_buffer.session_file_seq',
              ((SELECT last_value FROM cortex_buffer.session_file_seq) / ${PER_PARTITION} + 2) * ${PER_PARTITION} - 1);
SELECT count(cortex_buffer.event_partition_create(lo, lo + ${PER_PARTITION}))
  FROM (SELECT (SELECT last_value + 1 FROM cortex_buffer.session_file_seq) + ${PER_PARTITION} * k AS lo
          FROM generate_series(0, ${FILES} / ${PER_PARTITION}) k) s
 WHERE (SELECT relkind FROM pg_class WHERE oid = 'cortex_buffer.event'::regclass) = 'p';
INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, indexed_offset, gone_at,
                                        valid_lines, total_lines)
SELECT '${SESS}/gone/session-' || n || '.jsonl', 'gone', 0, now() - interval '30 days', 1, n, 0,
       CASE WHEN ${recent} = 1 AND n % 2 = 0 THEN now() - interval '1 day' ELSE now() - interval '30 days' END,
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

# ingest: index_sessions() of a new corpus (new job directories, ingest-<uuid>); prints its ms. The corpus is
# made before the clock starts, and removed (files and rows) after.
ingest() {
    local t ms
    python3 - "${SESS}" "${INGEST_FILES}" <<'PY'
import json, os, sys, uuid
root, files = sys.argv[1], int(sys.argv[2])
for _ in range(files):
    job = str(uuid.uuid4())
    os.makedirs(os.path.join(root, "ingest-" + job))
    with open(os.path.join(root, "ingest-" + job, "session-001.jsonl"), "w") as f:
        for seq in range(100):
            kind = ("TOOL_START", "TOOL_RESULT")[seq % 2]
            f.write(json.dumps({"type": kind, "timestamp": "2026-02-23T10:00:%02d.000Z" % (seq % 60), "job_id": job,
                                "session_id": "s", "seq": seq, "invocation_id": "c%d" % (seq // 2),
                                "tool_name": "search", "input_summary": "query %d" % seq}) + "\n")
PY
    chown -R postgres "${SESS}"
    bench_psql -c "CHECKPOINT" >/dev/null
    sync
    t=$(date +%s%N)
    bench_psql -c "SELECT count(*) FROM cortex_buffer.index_sessions()" >/dev/null
    ms=$(ms_since "$t")
    local n
    n=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path LIKE '${SESS}/ingest-%'")
    [ "$n" = $((INGEST_FILES * 100)) ] || die "the ingest indexed ${n} events, not $((INGEST_FILES * 100))"
    rm -rf "${SESS}"/ingest-*
    bench_psql -c "DELETE FROM cortex_buffer.session_file WHERE path LIKE '${SESS}/ingest-%'" >/dev/null
    echo "$ms"
}

# The plain tables.
bench_psql -c "SELECT cortex_buffer.recovery_plan('${JOB}')" >/dev/null
build
live=$(bench_psql -c "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_id = '${JOB}'")
[ "$(events)" = $((ROWS / FILES * FILES + live)) ] || die "the plain index holds $(events) events"
plain_us=$(plan_rounds)
read -r delete_ms delete_rows <<<"$(cleanup)"
[ "$(events)" = "${live}" ] || die "the plain cleanup left $(events) events"
plain_ingest_ms=$(ingest)
build partial
read -r plain_partial_ms plain_partial_rows <<<"$(cleanup)"
[ "$(events)" = $((ROWS / FILES * FILES / 2 + live)) ] || die "the plain partial cleanup left $(events) events"
bench_psql -c "DELETE FROM cortex_buffer.session_file WHERE job_dir = 'gone'" >/dev/null

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
part_ingest_ms=$(ingest)
build partial
bench_psql -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
read -r part_partial_ms part_partial_rows <<<"$(cleanup)"
[ "$(events)" = $((ROWS / FILES * FILES / 2 + live)) ] || die "the partitioned partial cleanup left $(events) events"

echo
echo "== partitioned layout: ${ROWS} events in ${FILES} gone files, ${PER_PARTITION} files per partition; recovery_plan of a live job (${live} events), median of ${ROUNDS} rounds of ${CALLS} calls =="
printf 'recovery_plan, plain tables:          %8.1f us per call\n' "${plain_us}"
printf 'recovery_plan, partitioned:           %8.1f us per call\n' "${part_us}"
printf 'retention, plain (rows deleted):      %8d ms (%d index rows, as reported)\n' "${delete_ms}" "${delete_rows}"
printf 'retention, partitioned (spans dropped): %6d ms (%d rows, as reported; %d partitions of event left)\n' "${drop_ms}" "${drop_rows}" "${dropped}"
printf 'retention of half of each span, plain:       %8d ms (%d rows)\n' "${plain_partial_ms}" "${plain_partial_rows}"
printf 'retention of half of each span, partitioned: %8d ms (%d rows)\n' "${part_partial_ms}" "${part_partial_rows}"
printf 'ingest of %d files of 100 lines, plain:       %8d ms\n' "${INGEST_FILES}" "${plain_ingest_ms}"
printf 'ingest of %d files of 100 lines, partitioned: %8d ms\n' "${INGEST_FILES}" "${part_ingest_ms}"
printf 'partition_events() conversion:        %8d ms (%d partitions made)\n' "${convert_ms}" "${parts}"
awk -v p="${plain_us}" -v q="${part_us}" -v d="${delete_ms}" -v r="${drop_ms}" -v pp="${plain_partial_ms}" -v qp="${part_partial_ms}" \
    -v pi="${plain_ingest_ms}" -v qi="${part_ingest_ms}" 'BEGIN {
    printf "ratio recovery_plan partitioned / plain: %6.2f  (target <= 1.2)\n", q / p
    printf "ratio retention partitioned / plain:     %6.3f  (%.0fx faster: whole spans dropped)\n", r / d, d / r
    printf "ratio partial retention partitioned / plain: %6.2f  (both delete rows)\n", qp / pp
    printf "ratio ingest partitioned / plain:        %6.2f\n", qi / pi }'
