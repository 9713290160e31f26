// The session writer's bytes, in a directory of its own (no database): the dialects' lines,
// one line per write, the newline after a predecessor's cut line, rollover, flush bookkeeping.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";

import { SessionWriter, inputHash } from "@cortex-buffer/client";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "cortex-writer-"));
after(() => fs.rmSync(root, { recursive: true, force: true }));
const JOB = "0193A8B2-0000-7000-8000-0000000000AA";
const job = JOB.toLowerCase();
const now = () => new Date("2026-12-06T10:00:00.000Z");

const lines = (file: string): Array<Record<string, unknown>> =>
  fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

test("cortex-plane: the shipped envelope, call ids, keys, hashes and markers in data", () => {
  const dir = fs.mkdtempSync(path.join(root, "plane-"));
  const w = SessionWriter.open({ dir, jobId: JOB, agentId: "agent-1", sessionId: "s-1", podName: "pod-a", now, durability: "none" });
  w.sessionStart();
  w.checkpointLoaded({ checkpoint_id: null, step_index: null });
  const call = w.toolStart("charge", { usd: 5 }, { idempotencyKey: "a".repeat(64), callId: "c-1" });
  w.toolResult(call, { success: false, result: { code: "card_declined" } });
  w.checkpointWritten("0193a8b2-0000-7000-8000-0000000000c1", 0);
  w.event("LLM_REQUEST", { model: "m" });
  w.close();
  assert.equal(w.relpath, `${job}/session-001.jsonl`);
  const ls = lines(w.file);
  assert.deepEqual(ls[0], { version: "1.0", timestamp: "2026-12-06T10:00:00.000Z", jobId: job, sessionId: "s-1", agentId: "agent-1", sequence: 0, type: "SESSION_START", data: { podName: "pod-a" } });
  assert.deepEqual(ls.map((l) => [l.sequence, l.type]), [
    [0, "SESSION_START"],
    [1, "CHECKPOINT_LOADED"],
    [2, "TOOL_CALL"],
    [3, "TOOL_RESULT"],
    [4, "CHECKPOINT"],
    [5, "LLM_REQUEST"],
  ]);
  assert.deepEqual(ls[2]?.data, { type: "tool_use", toolCallId: "c-1", toolName: "charge", toolInput: { usd: 5 }, inputHash: inputHash({ usd: 5 }), idempotencyKey: "a".repeat(64) });
  assert.deepEqual(ls[3]?.data, { type: "tool_result", toolCallId: "c-1", toolName: "charge", output: { code: "card_declined" }, isError: true });
  assert.deepEqual(ls[4]?.data, { checkpointId: "0193a8b2-0000-7000-8000-0000000000c1", stepIndex: 0 });
  assert.equal(w.size, fs.statSync(w.file).size);
  assert.deepEqual(fs.readdirSync(w.jobDir), ["session-001.jsonl"], "no temporary file left");
});

test("cortex-spike: the flat snake_case lines", () => {
  const dir = fs.mkdtempSync(path.join(root, "spike-"));
  const w = SessionWriter.open({ dir, jobId: JOB, sessionId: "s-1", dialect: "cortex-spike", now, durability: "none" });
  w.sessionStart();
  w.checkpointLoaded(null);
  const call = w.toolStart("search", { q: "x" }, { idempotencyKey: "b".repeat(64), callId: "i-1" });
  w.toolResult(call, { result: "3 hits" });
  w.checkpointWritten("0193a8b2-0000-7000-8000-0000000000c1", 2);
  w.close();
  const ls = lines(w.file);
  assert.deepEqual(ls[2], {
    type: "TOOL_START",
    timestamp: "2026-12-06T10:00:00.000Z",
    job_id: job,
    session_id: "s-1",
    seq: 2,
    invocation_id: "i-1",
    tool_name: "search",
    input: { q: "x" },
    input_hash: inputHash({ q: "x" }),
    idempotency_key: "b".repeat(64),
  });
  assert.deepEqual([ls[3]?.type, ls[3]?.invocation_id, ls[3]?.success, ls[3]?.result_summary], ["TOOL_RESULT", "i-1", true, "3 hits"]);
  assert.deepEqual([ls[4]?.type, ls[4]?.checkpoint_id, ls[4]?.step_index], ["CHECKPOINT_WRITTEN", "0193a8b2-0000-7000-8000-0000000000c1", 2]);
  assert.deepEqual([ls[1]?.type, ls[1]?.checkpoint_id, ls[1]?.step_index], ["CHECKPOINT_LOADED", null, null]);
});

test("a new writer continues the latest file, after a newline when its predecessor was cut", () => {
  const dir = fs.mkdtempSync(path.join(root, "cut-"));
  const w1 = SessionWriter.open({ dir, jobId: JOB, durability: "none" });
  w1.sessionStart();
  w1.toolStart("t", {});
  w1.close();
  fs.appendFileSync(w1.file, '{"version":"1.0","timestamp":"2026-12-0'); // killed mid-write
  const w2 = SessionWriter.open({ dir, jobId: JOB, durability: "none" });
  assert.equal(w2.file, w1.file);
  w2.sessionStart();
  w2.close();
  const raw = fs.readFileSync(w1.file, "utf8").split("\n");
  assert.equal(raw[2], '{"version":"1.0","timestamp":"2026-12-0', "the cut line stays a line of its own");
  assert.equal((JSON.parse(raw[3] ?? "{}") as { sequence: number }).sequence, 0, "the next writer starts at 0");
  assert.equal(w2.size, fs.statSync(w1.file).size);
  const w3 = SessionWriter.open({ dir, jobId: JOB, continueLatest: false, durability: "none" });
  w3.sessionStart();
  w3.close();
  assert.equal(path.basename(w3.file), "session-002.jsonl");
});

test("rollover starts the next file at sequence 0 with the key checkpoint loaded", () => {
  const dir = fs.mkdtempSync(path.join(root, "roll-"));
  const w = SessionWriter.open({ dir, jobId: JOB, rolloverBytes: 500, durability: "none" });
  w.sessionStart();
  w.checkpointLoaded({ checkpoint_id: "c0", step_index: 0 });
  for (let i = 0; i < 6; i++) w.toolResult(w.toolStart("t", { i }), { result: i });
  w.checkpointWritten("c1", 1);
  for (let i = 0; i < 4; i++) w.toolResult(w.toolStart("u", { i }), { result: i });
  w.close();
  const files = fs.readdirSync(w.jobDir).sort();
  assert.ok(files.length >= 4, files.join(" "));
  let lastLoaded: unknown = null;
  for (const [n, f] of files.entries()) {
    const ls = lines(path.join(w.jobDir, f));
    assert.deepEqual(ls.map((l) => l.sequence), ls.map((_, i) => i), `${f} numbers its lines from 0`);
    if (n > 0) assert.equal(ls[0]?.type, "CHECKPOINT_LOADED", `${f} starts with the checkpoint its calls are keyed under`);
    for (const l of ls) if (l.type === "CHECKPOINT_LOADED" || l.type === "CHECKPOINT") lastLoaded = (l.data as { checkpointId: string }).checkpointId;
    assert.ok(fs.statSync(path.join(w.jobDir, f)).size <= 500 || ls.length <= 2, `${f}: a line goes to a full file only as its first`);
  }
  assert.equal(lastLoaded, "c1");
  assert.deepEqual(
    w.pendingFlush().map((p) => p.relpath),
    files.map((f) => `${job}/${f}`),
  );
  for (const p of w.pendingFlush()) w.markFlushed(p.relpath, p.size);
  assert.deepEqual(w.pendingFlush(), []);
});
