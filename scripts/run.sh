#!/usr/bin/env bash
# The main job on an embedded default: build and install cortex_buffer, start a private
# cluster with the background worker preloaded, feed it the sample session files in
# examples/sessions/, and show in psql what the worker recorded. Safe to run again: it reuses
# the cluster (restarting it so the fresh build is loaded) and the files already indexed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

PORT="${CORTEX_DEMO_PORT:-54329}"
ensure_toolchain
# What users run: an optimised build (the tests build whichever they need).
install_extension --release
say "building the shipper (cortex-buffer-ship, release)"
cargo build --release -p cortex_buffer_ship
SHIP="${REPO_ROOT}/target/release/cortex-buffer-ship"

DEMO="$(work_dir)/demo"
PGDATA="${DEMO}/data"
RUN="${DEMO}/run"
SESSIONS="${DEMO}/sessions"
BIN="$("${PG_CONFIG}" --bindir)"
mkdir -p "${DEMO}" "${RUN}" "${SESSIONS}"
chmod 755 "${DEMO}" "${SESSIONS}"
chown postgres "${RUN}"

pg() { runuser -u postgres -- "$@"; }
psql_demo() { pg "${BIN}/psql" -X -h "${RUN}" -p "${PORT}" -d postgres -v ON_ERROR_STOP=1 "$@"; }

if [ ! -s "${PGDATA}/PG_VERSION" ]; then
    say "creating a private cluster in ${PGDATA}"
    mkdir -p "${PGDATA}"
    chown postgres "${PGDATA}"
    pg "${BIN}/initdb" -A trust -E UTF8 --locale=C.UTF-8 -D "${PGDATA}" >/dev/null
    cat >>"${PGDATA}/postgresql.conf" <<CONF

# cortex_buffer demo
port = ${PORT}
listen_addresses = ''
unix_socket_directories = '${RUN}'
shared_preload_libraries = 'cortex_buffer'
cortex_buffer.sessions_dir = '${SESSIONS}'
cortex_buffer.poll_interval = 500
CONF
fi

if pg "${BIN}/pg_ctl" status -D "${PGDATA}" >/dev/null 2>&1; then
    say "restarting the cluster to load the fresh build"
    pg "${BIN}/pg_ctl" restart -w -m fast -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
else
    say "starting the cluster (port ${PORT}, socket in ${RUN})"
    pg "${BIN}/pg_ctl" start -w -D "${PGDATA}" -l "${RUN}/postgres.log" >/dev/null
fi

psql_demo -q <<'SQL'
CREATE EXTENSION IF NOT EXISTS cortex_buffer;
DO $$
DECLARE wanted text := (SELECT default_version FROM pg_available_extensions WHERE name = 'cortex_buffer');
BEGIN
    IF (SELECT extversion FROM pg_extension WHERE extname = 'cortex_buffer') <> wanted THEN
        EXECUTE format('ALTER EXTENSION cortex_buffer UPDATE TO %L', wanted);
    END IF;
END $$;
-- A short settle period so the sample with a crash-cut last line is judged within a second.
ALTER SYSTEM SET cortex_buffer.settle_period = '1s';
SELECT pg_reload_conf();
SQL

say "feeding sample session files into ${SESSIONS}"
cp -R examples/sessions/. "${SESSIONS}/"
chmod -R a+rX "${SESSIONS}"
psql_demo -qAt -c "SELECT cortex_buffer.index_now()" >/dev/null

expected=$(find examples/sessions -name '*.jsonl' | wc -l)
for _ in $(seq 1 100); do
    state=$(psql_demo -qAt -c "SELECT files_tracked >= ${expected} AND bytes_pending = 0 AND files_pending_tail = 0 FROM cortex_buffer.indexer_status")
    [ "${state}" = t ] && break
    sleep 0.2
done

# Another node's pod, whose volume this server cannot see: its shipper pushes it over SQL.
PUSHED_JOB=0193a900-4444-7abc-8def-00000000c003
psql_demo -q <<SQL
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'demo_shipper') THEN CREATE ROLE demo_shipper LOGIN; END IF;
END \$\$;
GRANT cortex_buffer_pusher TO demo_shipper;
DO \$\$ BEGIN PERFORM cortex_buffer.register_push_source('node-7', '${PUSHED_JOB}', note => 'the demo''s other node'); END \$\$;
DELETE FROM cortex_buffer.job WHERE id = '${PUSHED_JOB}';
INSERT INTO cortex_buffer.job (id, agent_id, status, payload)
VALUES ('${PUSHED_JOB}', '0193a8b0-1111-7abc-8def-0123456789ab', 'RUNNING', '{"task": "pay invoices"}');
SQL
say "shipping examples/pushed/ as node-7 (cortex-buffer-ship --once)"
NODE7="${DEMO}/node-7"
# Copied once: a copy made again would be other files (other inodes), pushed as new ones.
[ -d "${NODE7}" ] || cp -R examples/pushed "${NODE7}"
# The source's token proves the shipper is node-7 (whatever login it uses).
CB_SHIP_SOURCE_TOKEN="$(psql_demo -qAt -c "SELECT cortex_buffer.push_source_token('node-7')")" \
"${SHIP}" --once --sessions-dir "${NODE7}" --source node-7 --settle 3600 --report-every 3600 \
    --dsn "host=${RUN} port=${PORT} user=demo_shipper dbname=postgres" 2>"${DEMO}/ship.log" \
    || { cat "${DEMO}/ship.log"; die "the shipper failed"; }

psql_demo <<'SQL'
\echo
\echo '--- the background worker, as pg_stat_activity shows it'
SELECT pid, backend_type, application_name, state, query AS activity
  FROM pg_stat_activity WHERE backend_type = 'cortex_buffer indexer';
\echo '--- session files the worker discovered (cortex_buffer.session_file)'
SELECT file_id, job_dir, regexp_replace(path, '^.*/', '') AS file, dialect, size_bytes,
       to_char(mtime, 'YYYY-MM-DD HH24:MI:SS') AS mtime, gone_at IS NOT NULL AS gone
  FROM cortex_buffer.session_file ORDER BY path;
\echo '--- files per dialect'
SELECT dialect, count(*) AS files, sum(size_bytes) AS bytes
  FROM cortex_buffer.session_file GROUP BY dialect ORDER BY dialect;
\echo '--- what the indexer made of each file (its integrity is what the control plane''s scanBuffer reports)'
SELECT regexp_replace(path, '^.*/', '') AS file, dialect, generation AS gen, valid_lines AS events,
       corrupt_lines - last_failed_parse::int AS corrupt, blank_lines AS blank, tail_state, seq_gaps, seq_resets, trusted
  FROM cortex_buffer.session_file WHERE gone_at IS NULL ORDER BY path;
\echo '--- a few indexed events, normalised across dialects (cortex_buffer.event)'
SELECT DISTINCT ON (f.dialect) f.dialect, e.line_no, e.type, e.ts, e.invocation_id, e.tool_name, e.input_tokens, left(e.payload::text, 60) AS payload
  FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
 ORDER BY f.dialect, e.invocation_id IS NULL, e.line_no;
\echo '--- corrupt lines (the crash-cut last line of the first pod is the truncated tail)'
SELECT regexp_replace(f.path, '^.*/', '') AS file, c.line_no, c.reason, left(c.preview, 50) AS preview
  FROM cortex_buffer.corrupt_line c JOIN cortex_buffer.session_file f USING (file_id) ORDER BY f.path, c.line_no;
\echo '--- the indexer at a glance (cortex_buffer.indexer_status)'
SELECT worker_state, files_tracked, events_indexed, corrupt_lines, bytes_indexed, bytes_pending, files_untrusted, last_pass_ms
  FROM cortex_buffer.indexer_status;
\echo '--- the first pod checkpointed step 0 as 0193a8b2-8b00-...-c0 (its CHECKPOINT_WRITTEN marker is in its session file)'
\set QUIET on
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id IN ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a900-2222-7abc-8def-00000000b002');
DELETE FROM cortex_buffer.job WHERE id IN ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a900-2222-7abc-8def-00000000b002');
INSERT INTO cortex_buffer.job (id, agent_id, status, payload)
VALUES ('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '0193a8b0-1111-7abc-8def-0123456789ab', 'RUNNING', '{"task": "release notes"}'),
       ('0193a900-2222-7abc-8def-00000000b002', '0193a8b0-1111-7abc-8def-0123456789ab', 'RUNNING', '{"task": "summarise a file"}');
\set QUIET off
SELECT checkpoint_id AS first_checkpoint, step_index, crc FROM cortex_buffer.write_checkpoint('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f',
    '{"checkpoint_id": "0193a8b2-8b00-7000-8000-0000000000c0", "step_index": 0, "state": {"searched": true}}') \gset
\echo '--- recovery at pod start: one call (recovery_plan). Two pods crashed after that checkpoint; both count.'
SELECT p->>'action' AS action, p->'checkpoint'->>'resume_step' AS resume_step, p->>'mode' AS mode, p->>'reason' AS reason,
       p->'marker'->>'kind' AS marker, jsonb_array_length(p->'sessions') AS sessions, p->'notes' AS notes
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
\echo '(skip these: finished after the checkpoint, with their results)'
SELECT c.key, c.tool_name, c.success, c.result, c.start_session
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p,
       jsonb_to_recordset(p->'completed') AS c(key text, tool_name text, success boolean, result text, start_session text);
\echo '(verify these before repeating them: started, no result; ask the external system with the idempotency key)'
SELECT c.key, c.tool_name, c.input, left(c.idempotency_key, 16) || '...' AS idempotency_key, c.writer_crashed
  FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p,
       jsonb_to_recordset(p->'in_flight') AS c(key text, tool_name text, input text, idempotency_key text, writer_crashed boolean);
\echo '(the whole plan, as the agent receives it)'
SELECT jsonb_pretty(cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') - 'events_after_marker' - 'sessions') AS plan;
\echo '--- a job of the shipped writer (no call ids): calls pair by order and tool name (the buffer view, match_checkpoint => false)'
SELECT p->>'reason' AS reason, p->'marker'->>'kind' AS marker, p->'marker'->>'session' AS marker_in,
       (SELECT string_agg(a->>'kind' || ': ' || (a->>'detail'), '; ') FROM jsonb_array_elements(p->'anomalies') a) AS anomalies
  FROM cortex_buffer.recovery_plan('0193a900-2222-7abc-8def-00000000b002', match_checkpoint => false) p;
SELECT e.seq, e.type, e.session FROM cortex_buffer.recovery_plan('0193a900-2222-7abc-8def-00000000b002', match_checkpoint => false) p,
       jsonb_to_recordset(p->'events_after_marker') AS e(seq int, type text, session text);
\echo '--- the story of the job (job_timeline): events, gaps, corrupt lines and the records of the database'
SELECT to_char(at, 'HH24:MI:SS.MS') AS at, source, kind, session, line_no, seq, left(detail, 60) AS detail
  FROM cortex_buffer.job_timeline('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo '--- the session files of each job (job_sessions) and the files recovery will not use (untrusted_session_files)'
SELECT job_id, regexp_replace(path, '^.*/', '') AS file, dialect, valid_lines, tail_state, last_event_type, agent_state, recovery_refusal
  FROM cortex_buffer.job_sessions ORDER BY job_id, session_ordinal;
SELECT reason, path FROM cortex_buffer.untrusted_session_files;
\echo '--- a Claude Code transcript: what its agent is doing, its usage (sub-agents apart), its tool calls'
SELECT regexp_replace(f.path, '^.*/', '') AS file, s.state, s.confidence, s.rule, s.decided_by_line, s.detail
  FROM cortex_buffer.session_file f, cortex_buffer.agent_state(f.path) s WHERE f.dialect = 'claude-code' ORDER BY f.path;
SELECT regexp_replace(path, '^.*/', '') AS file, subagent, model, responses, input_tokens, output_tokens, cost_usd
  FROM cortex_buffer.session_usage('-home-demo-work-project/5b3c1f0e-8d2a-4e6b-9f10-2a3b4c5d6e7f.jsonl');
SELECT p->>'reason' AS reason, jsonb_array_length(p->'completed') AS completed, jsonb_array_length(p->'in_flight') AS in_flight
  FROM cortex_buffer.session_recovery('5b3c1f0e-8d2a-4e6b-9f10-2a3b4c5d6e7f'::uuid) p;
\echo '--- usage the buffer saw vs what record_usage recorded (nothing yet: all of it is unrecorded)'
SELECT responses, input_tokens, output_tokens, cost_usd, recorded_calls, unrecorded FROM cortex_buffer.job_usage_from_buffer('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo '--- a LOG-slice file: its last two entries, and whether a snapshot taken after entry 1 still agrees'
SELECT seq, entry_type, entry FROM cortex_buffer.log_entries('wink-run-1/trace.jsonl', last_n => 2);
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('wink-run-1/trace.jsonl', 1, 2);
\echo '--- checkpoints: the next step fenced on the first checkpoint, a stale writer refused, the read-back'
SELECT * FROM cortex_buffer.write_checkpoint(
    '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '{"step_index": 1, "state": {"searched": true, "emailed": true}}', :'first_checkpoint');
\set ON_ERROR_STOP 0
\echo '(a second pod still holding the first checkpoint as its fencing token is refused:)'
SELECT * FROM cortex_buffer.write_checkpoint(
    '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '{"step_index": 1, "state": {"stale": true}}', :'first_checkpoint');
\set ON_ERROR_STOP 1
SELECT source, checkpoint_id, step_index, crc, crc_ok, doc FROM cortex_buffer.read_checkpoint('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo '(the buffer is now from an older checkpoint cycle: recovery falls back to the checkpoint alone)'
SELECT p->>'mode' AS mode, p->>'reason' AS reason, p->>'detail' AS detail FROM cortex_buffer.recovery_plan('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') p;
\echo '--- liveness: a pod that stopped beating 10 minutes ago is reaped and scheduled for retry'
\set QUIET on
DELETE FROM cortex_buffer.crash WHERE job_id = '0193a8b2-9999-7d2e-9f00-5a1b2c3d4e5f';
DELETE FROM cortex_buffer.job WHERE id = '0193a8b2-9999-7d2e-9f00-5a1b2c3d4e5f';
INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at, payload)
VALUES ('0193a8b2-9999-7d2e-9f00-5a1b2c3d4e5f', '0193a8b0-1111-7abc-8def-0123456789ab', 'RUNNING', 1,
        now() - interval '10 minutes', '{"task": "triage inbox"}');
\set QUIET off
SELECT cortex_buffer.heartbeat('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f') AS live_pod_may_continue;
SELECT job_id, attempt, new_status, retry_after FROM cortex_buffer.reap_zombies('5 minutes');
SELECT cortex_buffer.heartbeat('0193a8b2-9999-7d2e-9f00-5a1b2c3d4e5f') AS reaped_pod_may_continue;
SELECT status, error->>'reason' AS reason, error->>'stale_for' AS stale_for
  FROM cortex_buffer.job WHERE id = '0193a8b2-9999-7d2e-9f00-5a1b2c3d4e5f';
SELECT * FROM cortex_buffer.circuit_state('0193a8b0-1111-7abc-8def-0123456789ab');
\echo '--- spend: the seed example costs exactly $0.10725; a request id is counted once; budgets and reservations'
SELECT cortex_buffer.llm_cost('{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000}',
                              'claude-sonnet-4-5-20250929') AS seed_example_usd;
\set QUIET on
DELETE FROM cortex_buffer.usage_ledger WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
DELETE FROM cortex_buffer.job_usage WHERE job_id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
\set QUIET off
SELECT * FROM cortex_buffer.record_usage('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', 'claude-sonnet-4-5-20250929',
    '{"input_tokens": 8, "output_tokens": 477, "cache_creation_input_tokens": 1683, "cache_read_input_tokens": 70793}', 'req_011CQ');
SELECT * FROM cortex_buffer.record_usage('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', 'claude-sonnet-4-5-20250929',
    '{"input_tokens": 8, "output_tokens": 477, "cache_creation_input_tokens": 1683, "cache_read_input_tokens": 70793}', 'req_011CQ');
SELECT max_input_tokens_per_job, max_cost_usd_per_job
  FROM cortex_buffer.set_budget('0193a8b0-1111-7abc-8def-0123456789ab', 200000, 1.00);
SELECT * FROM cortex_buffer.check_token_budget('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f');
\echo '(a call estimated at 150 000 input tokens does not fit in what is left:)'
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '{"input_tokens": 150000}', 'claude-sonnet-4-5-20250929');
SELECT * FROM cortex_buffer.reserve_budget('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f', '{"input_tokens": 50000}', 'claude-sonnet-4-5-20250929') \gset
SELECT input_tokens, cost_usd, llm_calls FROM cortex_buffer.settle_usage(:'reservation_id', '{"input_tokens": 41000, "output_tokens": 900}', 'req_011CR');
SELECT cost_usd, tokens_in, tokens_out, llm_call_count FROM cortex_buffer.job WHERE id = '0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f';
\echo '--- push ingestion: a file shipped from node-7 (its unterminated last line is held until it settles)'
SELECT p.relpath, p.source, f.dialect, f.indexed_offset AS committed, p.held_len AS held, f.valid_lines AS events
  FROM cortex_buffer.pushed_file p JOIN cortex_buffer.session_file f USING (file_id);
SELECT p->>'action' AS action, jsonb_path_query_array(p, '$.completed[*].tool_name') AS completed,
       p->'sessions'->0->'pushed' AS shipper_report
  FROM cortex_buffer.recovery_plan('0193a900-4444-7abc-8def-00000000c003') p;
\echo '--- retention: what the volume and the index hold, and what a cleanup would delete were every file old (a dry run)'
SELECT job_state, age, files, bytes, index_rows, next_cleanup_files FROM cortex_buffer.storage_report() ORDER BY job_state, age;
SELECT action, regexp_replace(path, '^.*/', '') AS path, job_status, left(reason, 70) AS reason
  FROM cortex_buffer.cleanup_session_buffers(max_file_age => '0', dry_run => true, max_unknown_ratio => 1)
 WHERE action <> 'delete_rows' ORDER BY action, path;
SELECT kind, regexp_replace(path, '^.*/', '') AS path, size_bytes, growth_bytes_per_hour, over_limit
  FROM cortex_buffer.oversized_buffers;
\echo '--- checkpoint CRC, byte-compatible with the control plane (golden values 3624485329, 2745614147, 286895505)'
SELECT doc, cortex_buffer.canonical_json(doc::jsonb) AS canonical, cortex_buffer.checkpoint_crc(doc::jsonb) AS crc
  FROM (VALUES ('{"hello":"world"}'), ('{}'), ('{"step":1}'), ('{"b":[1.0,2.5e21],"10":true,"9":null}')) v(doc);
SQL

cat <<DONE

The cluster keeps running. Connect with:
  runuser -u postgres -- ${BIN}/psql -h ${RUN} -p ${PORT} -d postgres
Drop more files into ${SESSIONS}/<job>/<file>.jsonl and they show up within a poll interval.
Stop it with:
  runuser -u postgres -- ${BIN}/pg_ctl stop -D ${PGDATA}
DONE
