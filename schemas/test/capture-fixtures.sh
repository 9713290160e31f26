#!/usr/bin/env bash
# Captures real answers of a running cortex_buffer into schemas/test/fixtures/ (named by the
# prefix rule of validate.mjs: <schema>-<case>.json). Not run by the tests: run it by hand
# against a cluster whose worker is started with cortex_buffer.sessions_dir = $SESSIONS, then
# review the diff and `npm test`.
#
#   PSQL='psql -h /path/to/socketdir -p 54329 -U postgres' SESSIONS=/path/to/sessions_dir \
#     DB=schemas_dev OWNER=postgres bash test/capture-fixtures.sh [out_dir]
#
# It makes a database of its own ($DB, dropped first), job directories named by fresh UUIDs
# under $SESSIONS (owned by $OWNER, the server's OS user), removed at the end unless KEEP=1,
# and touches nothing else.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$here/fixtures}
PSQL=${PSQL:?set PSQL to a psql command line for a superuser}
SESSIONS=${SESSIONS:?set SESSIONS to the cluster\'s cortex_buffer.sessions_dir}
DB=${DB:-schemas_dev}
OWNER=${OWNER:-postgres}
VERSION=${VERSION:-}
REPO=$(cd "$here/../.." && pwd)

uuid() { cat /proc/sys/kernel/random/uuid; }
q() { $PSQL -d "$DB" -v ON_ERROR_STOP=1 -X -qAt "$@"; }
# line TEXT FILE: appends one line (with its newline) in one write.
line() { printf '%s\n' "$1" >>"$2"; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%3NZ; }
# save NAME: one JSON document per stdin line; one line is NAME.json, several NAME-<n>.json.
save() {
    node --input-type=module -e '
        import { writeFileSync } from "node:fs";
        const [out, name] = process.argv.slice(1);
        let text = ""; for await (const c of process.stdin) text += c;
        const docs = text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
        if (docs.length === 0) { console.error(`capture: ${name}: no answer`); process.exit(1); }
        docs.forEach((d, i) => writeFileSync(`${out}/${docs.length === 1 ? name : `${name}-${i + 1}`}.json`, JSON.stringify(d, null, 2) + "\n"));
        console.error(`capture: ${name}: ${docs.length}`);
    ' "$OUT" "$1"
}

mkdir -p "$OUT"
rm -f "$OUT"/*.json
$PSQL -d postgres -X -q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
if [ -n "$VERSION" ]; then q -c "CREATE EXTENSION cortex_buffer VERSION '$VERSION'"; else q -c "CREATE EXTENSION cortex_buffer"; fi
q -c "SELECT 'extension ' || extversion FROM pg_extension WHERE extname = 'cortex_buffer'" >&2

AGENT=$(uuid)
job() { # job ID [attempt]: a RUNNING job row
    q -c "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, started_at) VALUES ('$1', '$AGENT', 'RUNNING', ${2:-1}, now())"
}
plan() { q -c "SELECT cortex_buffer.recovery_plan($1)"; }
spike() { # spike TYPE SEQ TS JOB SESSION EXTRA -> a cortex-spike line
    printf '{"type":"%s","timestamp":"%s","job_id":"%s","session_id":"%s","seq":%s%s}' "$1" "$3" "$4" "$5" "$2" "$6"
}
plane() { # plane TYPE SEQ TS JOB DATA -> a cortex-plane (shipped writer) line
    printf '{"version":"1.0","timestamp":"%s","jobId":"%s","sessionId":"%s","agentId":"%s","sequence":%s,"type":"%s","data":%s}' "$3" "$4" "$SESSION_ID" "$AGENT" "$2" "$1" "$5"
}
SESSION_ID=$(uuid)
MADE=$(mktemp)
newdir() { local d=$SESSIONS/$1; mkdir -p "$d"; echo "$d" >>"$MADE"; echo "$d"; }
# The directories made are removed at the end (KEEP=1 keeps them, to look at them).
cleanup() { if [ "${KEEP:-0}" != 1 ]; then xargs -r -d '\n' rm -rf -- <"$MADE"; fi; rm -f "$MADE"; }
trap cleanup EXIT
own() { chown -R "$OWNER" "$@"; }

# --- 1. A first run: no checkpoint, no session file --------------------------------------
J_FIRST=$(uuid)
job "$J_FIRST" 1
plan "'$J_FIRST'" | save recovery_plan-first-run-no-files

# --- 2. The spike writer: a marker, two pods, a lost event, a cut line --------------------
J_SPIKE=$(uuid)
C1=$(uuid)
D=$(newdir "$J_SPIKE")
FA=$D/session_20261206T060000Z_pod-a.jsonl
FB=$D/session_20261206T061000Z_pod-b.jsonl
KEY_EMAIL=$(printf 'send_email once' | sha256sum | cut -c1-64)
line "$(spike SESSION_START 0 2026-12-06T06:00:00.000Z "$J_SPIKE" s1 ',"buffer_schema_version":1,"agent_id":"a","pod_name":"pod-a"')" "$FA"
line "$(spike CHECKPOINT_LOADED 1 2026-12-06T06:00:00.100Z "$J_SPIKE" s1 ',"checkpoint_id":null,"step_index":null')" "$FA"
line "$(spike LLM_REQUEST 2 2026-12-06T06:00:00.200Z "$J_SPIKE" s1 ',"model":"claude-sonnet-4-5-20250929"')" "$FA"
line "$(spike LLM_RESPONSE 3 2026-12-06T06:00:00.900Z "$J_SPIKE" s1 ',"model":"claude-sonnet-4-5-20250929","prompt_tokens":1200,"completion_tokens":80,"finish_reason":"tool_use"')" "$FA"
line "$(spike TOOL_START 4 2026-12-06T06:00:01.000Z "$J_SPIKE" s1 ',"invocation_id":"inv-search","tool_name":"web_search","input":{"q":"postgres"},"input_summary":"q=postgres"')" "$FA"
line "$(spike TOOL_RESULT 5 2026-12-06T06:00:02.000Z "$J_SPIKE" s1 ',"invocation_id":"inv-search","tool_name":"web_search","success":true,"result_summary":"5 results"')" "$FA"
q -c "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt) VALUES ('$J_SPIKE', '$AGENT', 'RUNNING', 2)"
own "$D"
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_SPIKE', '{\"checkpoint_id\": \"$C1\", \"step_index\": 0, \"state\": {\"done\": [\"search\"], \"notes\": null}}')" >/dev/null
line "$(spike CHECKPOINT_WRITTEN 6 2026-12-06T06:00:03.000Z "$J_SPIKE" s1 ",\"checkpoint_id\":\"$C1\",\"step_index\":0")" "$FA"
line "$(spike TOOL_START 7 2026-12-06T06:00:04.000Z "$J_SPIKE" s1 ",\"invocation_id\":\"inv-email\",\"tool_name\":\"send_email\",\"input\":{\"to\":\"ops\"},\"input_summary\":\"to=ops\",\"idempotency_key\":\"$KEY_EMAIL\"")" "$FA"
line "$(spike TOOL_RESULT 8 2026-12-06T06:00:05.000Z "$J_SPIKE" s1 ',"invocation_id":"inv-email","tool_name":"send_email","success":true,"result_summary":"sent"')" "$FA"
# seq 9 is lost
line "$(spike TOOL_START 10 2026-12-06T06:00:06.000Z "$J_SPIKE" s1 ',"invocation_id":"inv-charge","tool_name":"charge_card","input":{"amount":42,"currency":"USD"},"input_summary":"42 USD"')" "$FA"
line "$(spike TOOL_RESULT 11 2026-12-06T06:00:07.000Z "$J_SPIKE" s1 ',"invocation_id":"inv-orphan","tool_name":"fetch_page","success":false,"result_summary":"timeout"')" "$FA"
line "$(spike TOOL_RESULT 12 2026-12-06T06:00:07.500Z "$J_SPIKE" s1 ',"invocation_id":"inv-email","tool_name":"send_email","success":true,"result_summary":"sent again"')" "$FA"
printf '%s' "{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-12-06T06:00:08.000Z\",\"job_id\":\"$J_SPIKE\",\"sess" >>"$FA"
line "" "$FA"
line "$(spike SESSION_START 0 2026-12-06T06:10:00.000Z "$J_SPIKE" s2 ',"buffer_schema_version":1,"agent_id":"a","pod_name":"pod-b"')" "$FB"
line "$(spike CHECKPOINT_LOADED 1 2026-12-06T06:10:00.100Z "$J_SPIKE" s2 ",\"checkpoint_id\":\"$C1\",\"step_index\":0")" "$FB"
line "$(spike TOOL_START 2 2026-12-06T06:10:01.000Z "$J_SPIKE" s2 ',"invocation_id":"inv-lookup","tool_name":"lookup","input_hash":"a3c90e3b7448d23d9eacebd0ebf15cae100e21f9b2c688f3f9d238edcd26d67f","input_summary":"id=7"')" "$FB"
line "$(spike APPROVAL_REQUESTED 3 2026-12-06T06:10:02.000Z "$J_SPIKE" s2 ',"reason":"refund over limit"')" "$FB"
line "$(spike STATE_TRANSITION 4 2026-12-06T06:10:02.100Z "$J_SPIKE" s2 ',"from":"RUNNING","to":"WAITING_FOR_APPROVAL"')" "$FB"
line "$(spike ERROR 5 2026-12-06T06:10:02.200Z "$J_SPIKE" s2 ',"error_code":"E_RATE","message":"rate limited"')" "$FB"
own "$D"
plan "'$J_SPIKE'" | save recovery_plan-marker-matched
plan "'$J_SPIKE', '$(uuid)'" | save recovery_plan-marker-mismatch
plan "'$J_SPIKE', match_checkpoint => false" | save recovery_plan-marker-unverified
q -c "SELECT doc FROM cortex_buffer.read_checkpoint('$J_SPIKE')" | save checkpoint_document-spike
q -c "SELECT doc FROM cortex_buffer.checkpoint_history WHERE job_id = '$J_SPIKE'" | save checkpoint_document-history
q -c "SELECT files FROM cortex_buffer.checkpoint_mark WHERE job_id = '$J_SPIKE' ORDER BY mark_id" | save checkpoint_mark_files-spike
q -c "SELECT payload FROM cortex_buffer.job_events('$J_SPIKE') WHERE payload IS NOT NULL" | save event_payload_cortex_spike-job
q -c "SELECT unrecorded FROM cortex_buffer.job_usage_from_buffer('$J_SPIKE')" | save job_usage_unrecorded-spike
# stale: a line the index does not hold, and no catch-up
line "$(spike TOOL_RESULT 6 2026-12-06T06:10:03.000Z "$J_SPIKE" s2 ',"invocation_id":"inv-lookup","tool_name":"lookup","success":true,"result_summary":"found"')" "$FB"
own "$D"
q -c "SET cortex_buffer.catch_up = off" -c "SELECT cortex_buffer.recovery_plan('$J_SPIKE')" | save recovery_plan-stale-not-caught-up

# --- 3. A first run with a session file: no checkpoint ----------------------------------
J_NOCP=$(uuid)
D=$(newdir "$J_NOCP")
F=$D/session_20261206T070000Z_pod-c.jsonl
line "$(spike SESSION_START 0 2026-12-06T07:00:00.000Z "$J_NOCP" s1 ',"pod_name":"pod-c"')" "$F"
line "$(spike CHECKPOINT_LOADED 1 2026-12-06T07:00:00.100Z "$J_NOCP" s1 ',"checkpoint_id":null,"step_index":null')" "$F"
line "$(spike TOOL_START 2 2026-12-06T07:00:01.000Z "$J_NOCP" s1 ',"invocation_id":"i1","tool_name":"read_file","input":{"path":"a.txt"}')" "$F"
line "$(spike TOOL_RESULT 3 2026-12-06T07:00:01.500Z "$J_NOCP" s1 ',"invocation_id":"i1","tool_name":"read_file","success":true,"result_summary":"12 lines"')" "$F"
line "$(spike TOOL_START 4 2026-12-06T07:00:02.000Z "$J_NOCP" s1 ',"invocation_id":"i2","tool_name":"write_file","input":{"path":"b.txt","text":"hi"}')" "$F"
# a line over cortex_buffer.max_line_bytes (1 MiB by default): stored with its long string cut
BIG=$(head -c 1200000 /dev/zero | tr '\0' 'x')
line "$(spike TOOL_START 5 2026-12-06T07:00:03.000Z "$J_NOCP" s1 ",\"invocation_id\":\"i3\",\"tool_name\":\"upload\",\"input_summary\":\"$BIG\"")" "$F"
own "$D"
job "$J_NOCP" 1
plan "'$J_NOCP'" | save recovery_plan-first-run-no-checkpoint
q -c "SELECT payload FROM cortex_buffer.job_events('$J_NOCP') WHERE payload_problem IS NOT NULL" | save event_payload_cortex_spike-truncated

# --- 4. A spike writer whose marker is lost: no_marker, latest_file ----------------------
J_NOMARK=$(uuid)
job "$J_NOMARK" 1
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_NOMARK', '{\"step_index\": 3}')" >/dev/null
q -c "DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '$J_NOMARK'"
D=$(newdir "$J_NOMARK")
F=$D/session_20261206T080000Z_pod-d.jsonl
line "$(spike SESSION_START 0 2026-12-06T08:00:00.000Z "$J_NOMARK" s1 '')" "$F"
line "$(spike TOOL_START 1 2026-12-06T08:00:01.000Z "$J_NOMARK" s1 ',"invocation_id":"n1","tool_name":"search","input_summary":"q=x"')" "$F"
line "$(spike TOOL_RESULT 2 2026-12-06T08:00:02.000Z "$J_NOMARK" s1 ',"invocation_id":"n1","tool_name":"search","success":true,"result_summary":"ok"')" "$F"
own "$D"
plan "'$J_NOMARK'" | save recovery_plan-no-marker
plan "'$J_NOMARK', match_checkpoint => false" | save recovery_plan-latest-file

# --- 5. An untrusted file ------------------------------------------------------------------
J_UNTRUSTED=$(uuid)
job "$J_UNTRUSTED" 1
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_UNTRUSTED', '{\"checkpoint_id\": \"$(uuid)\", \"step_index\": 0}')" >/dev/null
D=$(newdir "$J_UNTRUSTED")
F=$D/session_20261206T090000Z_pod-e.jsonl
line "$(spike SESSION_START 0 2026-12-06T09:00:00.000Z "$J_UNTRUSTED" s1 '')" "$F"
line 'not json at all' "$F"
line '{"broken": ' "$F"
line "$(spike TOOL_START 1 2026-12-06T09:00:01.000Z "$J_UNTRUSTED" s1 ',"invocation_id":"u1","tool_name":"search"')" "$F"
line '{"no_type": true}' "$F"
own "$D"
plan "'$J_UNTRUSTED'" | save recovery_plan-file-untrusted

# --- 6. Checkpoints that all fail their CRC --------------------------------------------------
J_FAIL=$(uuid)
job "$J_FAIL" 1
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_FAIL', '{\"checkpoint_id\": \"$(uuid)\", \"step_index\": 2}')" >/dev/null
q -c "UPDATE cortex_buffer.job SET checkpoint_crc = 12345 WHERE id = '$J_FAIL'" \
  -c "UPDATE cortex_buffer.checkpoint_history SET crc = 1 WHERE job_id = '$J_FAIL'"
q -c "SET client_min_messages = error" -c "SELECT cortex_buffer.recovery_plan('$J_FAIL')" | save recovery_plan-fail-job

# --- 7. The shipped writer: a high-water mark, order pairing, an ambiguity group ---------
J_PLANE=$(uuid)
job "$J_PLANE" 1
D=$(newdir "$J_PLANE")
F=$D/session-001.jsonl
KEY_CHARGE=$(printf 'charge once' | sha256sum | cut -c1-64)
line "$(plane SESSION_START 0 2026-12-06T10:00:00.000Z "$J_PLANE" '{"podName":"agent-pod-x1"}')" "$F"
line "$(plane LLM_REQUEST 1 2026-12-06T10:00:00.050Z "$J_PLANE" '{"model":"claude-sonnet-4-5-20250929","messageCount":1}')" "$F"
line "$(plane LLM_RESPONSE 2 2026-12-06T10:00:04.400Z "$J_PLANE" '{"tokenUsage":{"inputTokens":1200,"outputTokens":310,"cacheReadTokens":0,"cacheCreationTokens":900},"stopReason":"tool_use"}')" "$F"
line "$(plane TOOL_CALL 3 2026-12-06T10:00:04.420Z "$J_PLANE" '{"type":"tool_use","toolName":"read_file","toolInput":{"path":"README.md"}}')" "$F"
line "$(plane TOOL_RESULT 4 2026-12-06T10:00:04.480Z "$J_PLANE" '{"type":"tool_result","toolName":"read_file","output":"# Project","isError":false}')" "$F"
own "$D"
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_PLANE', '{\"checkpoint_id\": \"$(uuid)\", \"step_index\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"go\"}]}')" >/dev/null
line "$(plane TOOL_CALL 5 2026-12-06T10:00:05.000Z "$J_PLANE" '{"type":"tool_use","toolName":"search","toolInput":{"q":"a"}}')" "$F"
line "$(plane TOOL_CALL 6 2026-12-06T10:00:05.010Z "$J_PLANE" '{"type":"tool_use","toolName":"search","toolInput":{"q":"b"}}')" "$F"
line "$(plane TOOL_RESULT 7 2026-12-06T10:00:05.500Z "$J_PLANE" '{"type":"tool_result","toolName":"search","output":{"hits":3},"isError":false}')" "$F"
line "$(plane TOOL_CALL 8 2026-12-06T10:00:06.000Z "$J_PLANE" '{"type":"tool_use","toolName":"read_file","toolInput":{"path":"b.md"}}')" "$F"
line "$(plane TOOL_RESULT 9 2026-12-06T10:00:06.100Z "$J_PLANE" '{"type":"tool_result","toolName":"read_file","output":"# B","isError":false}')" "$F"
line "$(plane TOOL_CALL 10 2026-12-06T10:00:07.000Z "$J_PLANE" "{\"type\":\"tool_use\",\"toolName\":\"charge_card\",\"toolInput\":{\"amount\":42},\"idempotencyKey\":\"$KEY_CHARGE\"}")" "$F"
line "$(plane LLM_RESPONSE 11 2026-12-06T10:00:08.000Z "$J_PLANE" '{"tokenUsage":{"inputTokens":800,"outputTokens":120,"costUsd":0.0042,"cacheReadTokens":900,"cacheCreationTokens":0}}')" "$F"
line "$(plane ERROR 12 2026-12-06T10:00:08.500Z "$J_PLANE" '{"message":"tool timed out","code":"TIMEOUT"}')" "$F"
own "$D"
q -c "SELECT count(*) FROM cortex_buffer.record_usage('$J_PLANE', 'claude-sonnet-4-5-20250929', '{\"input_tokens\": 1200, \"output_tokens\": 310, \"cache_creation_input_tokens\": 900}', 'req-1')" >/dev/null
plan "'$J_PLANE'" | save recovery_plan-high-water-mark
q -c "SELECT files FROM cortex_buffer.checkpoint_mark WHERE job_id = '$J_PLANE' ORDER BY mark_id" | save checkpoint_mark_files-plane
q -c "SELECT unrecorded FROM cortex_buffer.job_usage_from_buffer('$J_PLANE')" | save job_usage_unrecorded-plane
q -c "SELECT payload FROM cortex_buffer.job_events('$J_PLANE') WHERE payload IS NOT NULL" | save event_payload_cortex_plane-job

# --- 7b. The shipped writer restarted in the same file, after a crash ----------------------
J_RESTART=$(uuid)
job "$J_RESTART" 2
D=$(newdir "$J_RESTART")
F=$D/session-001.jsonl
line "$(plane TOOL_CALL 0 2026-12-06T10:30:00.000Z "$J_RESTART" '{"type":"tool_use","toolName":"deploy","toolInput":{"env":"prod"}}')" "$F"
line "$(plane TOOL_CALL 1 2026-12-06T10:30:01.000Z "$J_RESTART" '{"type":"tool_use","toolName":"notify","toolInput":{"to":"ops"}}')" "$F"
line "$(plane TOOL_RESULT 2 2026-12-06T10:30:02.000Z "$J_RESTART" '{"type":"tool_result","toolName":"notify","output":"a\u0000b","isError":false}')" "$F"
printf '%s' "$(plane TOOL_RESULT 3 2026-12-06T10:30:03.000Z "$J_RESTART" '{"type":"tool_result","toolName":"dep')" >>"$F"
line "$(plane TOOL_CALL 0 2026-12-06T10:40:00.000Z "$J_RESTART" '{"type":"tool_use","toolName":"deploy","toolInput":{"env":"prod"}}')" "$F"
line "$(plane TOOL_RESULT 1 2026-12-06T10:40:05.000Z "$J_RESTART" '{"type":"tool_result","toolName":"deploy","output":"deployed","isError":false}')" "$F"
own "$D"
plan "'$J_RESTART'" | save recovery_plan-writer-restarted

# --- 8. The shipped writer, placed by the checkpoint's time ---------------------------------
J_TIME=$(uuid)
job "$J_TIME" 1
D=$(newdir "$J_TIME")
F=$D/session-001.jsonl
now=$(date +%s)
line "$(plane TOOL_CALL 0 "$(iso $((now - 120)))" "$J_TIME" '{"type":"tool_use","toolName":"search","toolInput":{"q":"early"}}')" "$F"
line "$(plane TOOL_RESULT 1 "$(iso $((now - 119)))" "$J_TIME" '{"type":"tool_result","toolName":"search","output":"early hits","isError":false}')" "$F"
own "$D"
q -c "SELECT count(*) FROM cortex_buffer.write_checkpoint('$J_TIME', '{\"step_index\": 0}')" >/dev/null
q -c "DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '$J_TIME'"
sleep 3
now=$(date +%s)
line "$(plane TOOL_CALL 2 "$(iso $((now - 3)))" "$J_TIME" '{"type":"tool_use","toolName":"fetch","toolInput":{"url":"https://example.com"}}')" "$F"
line "$(plane TOOL_RESULT 3 "$(iso $((now - 3)))" "$J_TIME" '{"type":"tool_result","toolName":"fetch","output":"200","isError":false}')" "$F"
line "$(plane TOOL_CALL 4 "$(iso "$now")" "$J_TIME" '{"type":"tool_use","toolName":"write_file","toolInput":{"path":"out.txt"}}')" "$F"
own "$D"
plan "'$J_TIME'" | save recovery_plan-checkpoint-time

# --- 9. Pushed files: unconfirmed (stale), then confirmed ------------------------------------
J_PUSH=$(uuid)
job "$J_PUSH" 1
SRC=schemas-dev-$(uuid | cut -c1-8)
TOKEN=$(q -c "SELECT cortex_buffer.register_push_source('$SRC', '$J_PUSH')")
P1=$(plane SESSION_START 0 2026-12-06T11:00:00.000Z "$J_PUSH" '{"podName":"remote-1"}')
P2=$(plane TOOL_CALL 1 2026-12-06T11:00:01.000Z "$J_PUSH" '{"type":"tool_use","toolName":"deploy","toolInput":{"env":"staging"}}')
CHUNK="$P1"$'\n'"$P2"$'\n'
SIZE=$(printf '%s' "$CHUNK" | wc -c)
q -c "SELECT action FROM cortex_buffer.append_session_bytes('$SRC', '$J_PUSH/session-001.jsonl', 0, convert_to(\$c\$$CHUNK\$c\$, 'UTF8'), '2049:77:abcd', file_size => $SIZE, source_token => '$TOKEN')" >&2
# a new attempt starts: the source has not confirmed since
q -c "UPDATE cortex_buffer.job SET attempt = attempt + 1, started_at = now() WHERE id = '$J_PUSH'"
plan "'$J_PUSH'" | save recovery_plan-pushed-unconfirmed
q -c "SELECT action FROM cortex_buffer.append_session_bytes('$SRC', '$J_PUSH/session-001.jsonl', $SIZE, '\\x'::bytea, '2049:77:abcd', file_size => $((SIZE + 40)), source_token => '$TOKEN')" >&2
plan "'$J_PUSH'" | save recovery_plan-pushed-unpushed-bytes
CHUNK=$(plane TOOL_RESULT 2 2026-12-06T11:00:02.000Z "$J_PUSH" '{"type":"tool_result","toolName":"deploy","output":"ok","isError":false}')$'\n'
q -c "SELECT action FROM cortex_buffer.append_session_bytes('$SRC', '$J_PUSH/session-001.jsonl', $SIZE, convert_to(\$c\$$CHUNK\$c\$, 'UTF8'), '2049:77:abcd', final => true, file_size => $((SIZE + ${#CHUNK})), source_token => '$TOKEN')" >&2
q -c "SELECT cortex_buffer.confirm_pushed('$SRC', source_token => '$TOKEN') IS NOT NULL" >&2
plan "'$J_PUSH'" | save recovery_plan-pushed-confirmed
q -c "SELECT cortex_buffer.drop_push_source('$SRC')" >&2

# --- 10. Claude Code transcripts: session_recovery, payloads, usage ------------------------
PROJ=-schemas-dev-$(uuid | cut -c1-8)
D=$(newdir "$PROJ")
CC=$REPO/pgrx-tests/fixtures/claude-code/claude-code-log
cp "$CC/-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl" "$D/"
cp -r "$CC/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1" "$CC/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl" "$D/"
cp "$CC/-Users-dain-workspace-claude-code-log-sample/326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl" "$D/"
cp "$CC/-Users-dain-workspace-JSSoundRecorder/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl" "$D/"
cp "$REPO/pgrx-tests/regress/sessions/proj/11111111-2222-4333-8444-555555555555.jsonl" "$D/"
own "$D"
q -c "SELECT cortex_buffer.session_recovery('$PROJ/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl')" | save session_recovery-transcript
q -c "SELECT cortex_buffer.session_recovery('$PROJ/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl')" | save session_recovery-with-subagents
q -c "SELECT cortex_buffer.session_recovery('11111111-2222-4333-8444-555555555555'::uuid)" | save session_recovery-by-session-id
# one payload of each line type (and of each content block type) the transcripts hold
q -c "SELECT DISTINCT ON (e.type, coalesce(e.payload->'message'->'content'->0->>'type', ''), e.payload->'message'->>'role', e.payload ? 'toolUseResult') e.payload
        FROM cortex_buffer.session_file f JOIN cortex_buffer.event e USING (file_id)
       WHERE f.job_dir = '$PROJ' AND e.payload IS NOT NULL
       ORDER BY e.type, coalesce(e.payload->'message'->'content'->0->>'type', ''), e.payload->'message'->>'role', e.payload ? 'toolUseResult', f.path, e.byte_offset" \
  | save event_payload_claude_code-line

# --- 11. LOG-slice files --------------------------------------------------------------------
LOGS=schemas-dev-logs-$(uuid | cut -c1-8)
D=$(newdir "$LOGS")
cp "$REPO/examples/sessions/wink-run-1/trace.jsonl" "$D/trace.jsonl"
cp "$REPO/pgrx-tests/regress/sessions/logs/snapshots.jsonl" "$D/snapshots.jsonl"
line '{"kind":"note","text":"a dataclass dump without the LOG keys"}' "$D/trace.jsonl"
own "$D"
q -c "SELECT count(*) FROM cortex_buffer.index_sessions()" >/dev/null
q -c "SELECT entry FROM cortex_buffer.log_entries('$LOGS/trace.jsonl') WHERE entry IS NOT NULL" | save log_entry-trace
q -c "SELECT entry FROM cortex_buffer.log_entries('$LOGS/snapshots.jsonl', last_n => 3) WHERE entry IS NOT NULL" | save log_entry-snapshots
q -c "SELECT e.payload FROM cortex_buffer.session_file f JOIN cortex_buffer.event e USING (file_id)
       WHERE f.job_dir = '$LOGS' AND e.payload IS NOT NULL ORDER BY f.path, e.byte_offset LIMIT 6" | save event_payload_wink_log-line

# --- 12. The reaper's record in job.error, a crash's tokens -----------------------------------
J_Z1=$(uuid); J_Z2=$(uuid); J_Z3=$(uuid)
q -c "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at, updated_at, error) VALUES
        ('$J_Z1', '$AGENT', 'RUNNING', 1, now() - interval '2 hours', now() - interval '2 hours', NULL),
        ('$J_Z2', '$AGENT', 'RUNNING', 3, now() - interval '2 hours', now() - interval '2 hours', '\"connection reset\"'),
        ('$J_Z3', '$AGENT', 'RUNNING', 1, 'infinity', now(), '{\"code\": \"E_LAST\", \"message\": \"from the control plane\"}')"
q -c "SELECT count(*) FROM cortex_buffer.reap_zombies('1 hour')" >/dev/null
q -c "SELECT error FROM cortex_buffer.job WHERE id IN ('$J_Z1', '$J_Z2', '$J_Z3') ORDER BY attempt, heartbeat_at" | save reaped_job_error-zombie
q -c "SELECT cortex_buffer.record_crash('$J_PLANE', 137, 'OOMKilled', 'executing', 0, 'search', '{\"input_tokens\": 2000, \"output_tokens\": 430}')" >/dev/null
q -c "SELECT tokens FROM cortex_buffer.crash WHERE tokens IS NOT NULL" | save crash_tokens-usage

# --- 13. The indexer at a glance ------------------------------------------------------------
q -c "SELECT workers FROM cortex_buffer.indexer_status" | save indexer_status_workers-one

echo "capture: done" >&2
