# shellcheck shell=bash
# Retention: cleanup_session_buffers() over a volume of BENCH_RETENTION_DIRS job directories
# (default 10 000) of BENCH_RETENTION_FILES files each (10: 100 000 files) and
# BENCH_RETENTION_LINES index rows per file (10: 1 000 000 event rows), every job COMPLETED two
# days ago, so that everything goes. Sourced by scripts/bench.sh.
#
# Each round builds the same volume and index twice and measures, in the same run:
# 1. cleanup_session_buffers(max_dirs => all): decides, locks, deletes the index rows, commits
#    and unlinks every file and directory; while it runs another session updates every job row
#    in a loop with lock_timeout = 1s (the cleanup must never block it; the same load runs
#    during the baseline, so that both sides of each ratio share the machine alike);
# 2. the baseline: one plain DELETE FROM session_file WHERE file_id IN (...) of the same rows
#    (its trigger deletes their events), then rm -r of the directories, timed apart.
# 3. the same cleanup rolled back: everything but its commit and the unlinks, which is the work
#    the DELETE baseline does (target <= 1.5x the DELETE).
# The whole cleanup also unlinks the files: it is compared with DELETE + rm -r as well.

ROUNDS="${BENCH_ROUNDS:-3}"
DIRS="${BENCH_RETENTION_DIRS:-10000}"
FILES="${BENCH_RETENTION_FILES:-10}"
LINES="${BENCH_RETENTION_LINES:-10}"
SESS="${BENCH}/sessions"

bench_psql -c "CREATE EXTENSION cortex_buffer"
bench_psql -c "CREATE TABLE bench_jobs AS SELECT gen_random_uuid() AS id FROM generate_series(1, ${DIRS})"
bench_psql -c "INSERT INTO cortex_buffer.job (id, agent_id, status, completed_at)
               SELECT id, gen_random_uuid(), 'COMPLETED', now() - interval '2 days' FROM bench_jobs"
bench_psql -At -c "SELECT id FROM bench_jobs" >"${BENCH}/jobs.txt"

# build: the files (one short line each, old mtimes) and the index rows, as the indexer would
# have left them: each file's counters included (the cleanup reports rows from them), and the
# events in the order a fleet writes them, a line of every file, then the next line of every
# file (ORDER BY, so that the layout never depends on the plan): one file's rows lie on as many
# heap pages as it has lines.
build() {
    rm -rf "${SESS}"
    python3 - "${SESS}" "${BENCH}/jobs.txt" "${FILES}" <<'PY'
import os, sys, time
root, jobs, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
old = time.time() - 2 * 86400
os.makedirs(root, exist_ok=True)
for job in open(jobs).read().split():
    d = os.path.join(root, job)
    os.mkdir(d)
    for n in range(1, files + 1):
        p = os.path.join(d, "session-%03d.jsonl" % n)
        with open(p, "w") as f:
            f.write('{"type":"SESSION_START","timestamp":"2026-02-23T14:30:00.000Z","seq":0}\n')
        os.utime(p, (old, old))
PY
    chown -R postgres "${SESS}"
    bench_psql >/dev/null <<SQL
TRUNCATE cortex_buffer.session_file, cortex_buffer.pushed_file CASCADE;
INSERT INTO cortex_buffer.session_file (path, job_dir, job_id, size_bytes, mtime, device, inode, indexed_offset,
                                        valid_lines, total_lines)
SELECT '${SESS}/' || j.id || '/session-' || lpad(n::text, 3, '0') || '.jsonl', j.id::text, j.id, 74,
       now() - interval '2 days', 1, row_number() OVER (), 74, ${LINES}, ${LINES}
  FROM bench_jobs j, generate_series(1, ${FILES}) n;
INSERT INTO cortex_buffer.event (file_id, byte_offset, line_no, type, ts, job_id, seq, payload)
SELECT f.file_id, (l - 1) * 74, l, 'TOOL_START', now(), f.job_id, l, '{"type":"TOOL_START"}'
  FROM cortex_buffer.session_file f, generate_series(1, ${LINES}) l
 ORDER BY l, f.file_id;
VACUUM ANALYZE cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line;
CHECKPOINT;
SQL
    # Written back before anything is timed: both sides then start from the same clean cache.
    sync
}

rows() { bench_psql -c "SELECT (SELECT count(*) FROM cortex_buffer.session_file) + (SELECT count(*) FROM cortex_buffer.event)"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# Every job row updated, over and over, with lock_timeout = 1s, while each side runs: the
# cleanup must never block it, and both sides of every ratio run under the same load.
start_updates() {
    stop="${BENCH}/stop-updates"
    rm -f "$stop"
    (
        n=0 b=0
        while [ ! -e "$stop" ]; do
            if bench_psql -c "SET lock_timeout = '1s'; UPDATE cortex_buffer.job SET priority = priority" >/dev/null 2>&1; then
                n=$((n + 1))
            else
                b=$((b + 1))
            fi
            # Light enough not to slow what is measured: every row, twice a second.
            sleep 0.5
        done
        echo "$n $b" >"${BENCH}/updates"
    ) &
    updater=$!
}
# stop_updates cleanup|baseline: only the cleanup's side is reported (the DELETE locks no job row).
stop_updates() {
    touch "$stop"
    wait "$updater"
    read -r n b <"${BENCH}/updates"
    if [ "$1" = cleanup ]; then
        round_updates=$((round_updates + n)) round_blocked=$((round_blocked + b))
        updates=$((updates + n)) blocked=$((blocked + b))
    fi
}

cleanup_ms="" dry_ms="" rb_ms="" delete_ms="" rm_ms="" blocked=0 updates=0
expected=$(( DIRS * FILES * (LINES + 1) ))
for r in $(seq 1 "${ROUNDS}"); do
    round_updates=0 round_blocked=0
    build
    [ "$(rows)" = "${expected}" ] || die "round $r: the index holds $(rows) rows, not ${expected}"
    start_updates
    t=$(date +%s%N)
    bench_psql -c "SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(max_dirs => ${DIRS}, dry_run => true)" >/dev/null 2>&1
    dry=$(ms_since "$t")
    dry_ms+="${dry}"$'\n'
    # The same run rolled back: everything but the commit and the unlinks (the files stay).
    t=$(date +%s%N)
    bench_psql -c "BEGIN" -c "SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(max_dirs => ${DIRS})" -c "ROLLBACK" >/dev/null 2>&1
    rb=$(ms_since "$t")
    rb_ms+="${rb}"$'\n'
    t=$(date +%s%N)
    out="$(bench_psql -c "SELECT count(*) || ' ' || coalesce(sum(rows_deleted), 0) FROM cortex_buffer.cleanup_session_buffers(max_dirs => ${DIRS}) WHERE action = 'delete_dir'" 2>/dev/null)"
    c=$(ms_since "$t")
    stop_updates cleanup
    [ "$out" = "${DIRS} ${expected}" ] || die "round $r: the cleanup reported '${out}', not '${DIRS} ${expected}'"
    [ "$(rows)" = 0 ] || die "round $r: $(rows) index rows left"
    [ -z "$(ls -A "${SESS}")" ] || die "round $r: directories left in ${SESS}"
    cleanup_ms+="${c}"$'\n'

    build
    start_updates
    t=$(date +%s%N)
    bench_psql -c "DELETE FROM cortex_buffer.session_file WHERE file_id IN (SELECT file_id FROM cortex_buffer.session_file)" >/dev/null 2>&1
    d=$(ms_since "$t")
    [ "$(rows)" = 0 ] || die "round $r: the baseline left $(rows) rows"
    t=$(date +%s%N)
    find "${SESS}" -mindepth 1 -maxdepth 1 -exec rm -r {} +
    m=$(ms_since "$t")
    stop_updates baseline
    delete_ms+="${d}"$'\n' rm_ms+="${m}"$'\n'
    printf '  round %d: dry run %6d ms   rolled back %6d ms   cleanup %6d ms   DELETE %6d ms   rm -r %6d ms   job-table updates meanwhile %d (blocked %d)\n' \
        "$r" "$dry" "$rb" "$c" "$d" "$m" "$round_updates" "$round_blocked" >&2
done
cm="$(printf '%s' "$cleanup_ms" | median)"
dm="$(printf '%s' "$delete_ms" | median)"
rmm="$(printf '%s' "$rm_ms" | median)"
drm="$(printf '%s' "$dry_ms" | median)"
rbm="$(printf '%s' "$rb_ms" | median)"

echo
echo "== cleanup_session_buffers: ${DIRS} job directories, $((DIRS * FILES)) files, $((DIRS * FILES * LINES)) events; median of ${ROUNDS} =="
printf 'cleanup_session_buffers():            %8d ms (index rows deleted: %d per round, as reported)\n' "$cm" "$expected"
printf '  its dry run (walk, decide, lock, count): %5d ms\n' "$drm"
printf '  the run rolled back (all but the unlinks): %5d ms\n' "$rbm"
printf 'DELETE ... WHERE file_id IN (...):    %8d ms\n' "$dm"
printf 'rm -r of the same directories:        %8d ms\n' "$rmm"
awk -v c="$cm" -v d="$dm" -v m="$rmm" -v rb="$rbm" 'BEGIN {
    printf "ratio rolled-back run / DELETE:       %8.2f  (the index work against the plain DELETE; target <= 1.5)\n", rb / d
    printf "ratio cleanup / DELETE:               %8.2f  (the whole cleanup, files included)\n", c / d
    printf "ratio cleanup / (DELETE + rm -r):     %8.2f\n", c / (d + m) }'
echo "UPDATEs of every job row during the cleanups: ${updates}, blocked (lock_timeout 1s): ${blocked}"
