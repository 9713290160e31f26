// The decision rules, case by case: examples/node/decide.test.mjs ported (the same cases, the
// same expectations), plus the Resumer's own additions (onStale, fail_job). No database.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CheckpointCorruptError, Resumer, StalePlanError, callKey, inputHash, resume } from "@cortex-buffer/client";
import type { RecoveryPlan } from "@cortex-buffer/client";

const JOB = "0193a8b2-0000-7000-8000-000000000001";
const REF = "crc:42";

function entry(tool: string, input: unknown, replay: number | null, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const hash = inputHash(input);
  return {
    tool_name: tool,
    input_hash: hash,
    replay_ordinal: replay,
    call_ordinal: replay,
    checkpoint_ref: REF,
    idempotency_key: callKey(JOB, REF, replay ?? 0, tool, hash),
    key_status: "derived",
    key_candidates: [],
    ...extra,
  };
}

// The plans of decide.test.mjs: only what the rules read. Cast, as the original is untyped.
function plan(lists: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): RecoveryPlan {
  return {
    job_id: JOB,
    action: "resume",
    mode: "buffer",
    reason: "high_water_mark",
    fresh: { stale: false },
    checkpoint: { ref: REF },
    completed: [],
    in_flight: [],
    verify: [],
    ...lists,
    ...extra,
  } as unknown as RecoveryPlan;
}

test("a completed call at its exact place is skipped, a repeat of it is not", () => {
  const d = new Resumer(plan({ completed: [{ ...entry("send", { to: "a" }, 1), result: "sent" }] }));
  const first = d.decide("send", { to: "a" });
  assert.equal(first.action, "skip");
  assert.equal(first.action === "skip" && first.result, "sent");
  // The second send of the same input is another call: nothing says it ran.
  const second = d.decide("send", { to: "a" });
  assert.equal(second.action, "run");
  assert.equal(second.key, callKey(JOB, REF, 2, "send", inputHash({ to: "a" })));
});

test("a call in flight is verified by its writer's key and by the pod's own", () => {
  const e = { ...entry("charge", { usd: 5 }, 1), checkpoint_ref: "crc:7", idempotency_key: "sent-under-c7" };
  const d = new Resumer(plan({ in_flight: [e] }));
  const v = d.decide("charge", { usd: 5 });
  assert.equal(v.action, "verify");
  if (v.action !== "verify") return;
  assert.deepEqual(new Set(v.keys), new Set(["sent-under-c7", v.key]));
  assert.equal(v.byContent, false);
  assert.equal(v.why, "in_flight");
});

test("an ambiguous key is asked by every candidate, and by content when one is found", () => {
  const e = entry("charge", { usd: 5 }, null, {
    idempotency_key: null,
    key_status: "ambiguous",
    reason: "key_ambiguous",
    key_candidates: [
      { replay_ordinal: 1, call_ordinal: 1, checkpoint_ref: REF, idempotency_key: "k1" },
      { replay_ordinal: 2, call_ordinal: 2, checkpoint_ref: REF, idempotency_key: "k2" },
    ],
  });
  const d = new Resumer(plan({ verify: [e] }));
  const v = d.decide("charge", { usd: 5 });
  assert.equal(v.action, "verify");
  assert.deepEqual(v.action === "verify" && v.maybe, ["k1"], "only the candidate of this place");
  const v2 = d.decide("charge", { usd: 5 });
  assert.deepEqual(v2.action === "verify" && v2.maybe, ["k2"]);
});

test("a call whose key nothing gives, or whose input is unknown, is verified by content", () => {
  const unknown = entry("charge", { usd: 5 }, null, { idempotency_key: null, key_status: "unknown", reason: "key_unknown" });
  const u = new Resumer(plan({ verify: [unknown] })).decide("charge", { usd: 5 });
  assert.equal(u.action === "verify" && u.byContent, true);
  const noInput = { ...entry("charge", {}, null), input_hash: null, idempotency_key: null, key_status: "unknown" };
  const d = new Resumer(plan({ verify: [noInput] }));
  const v = d.decide("charge", { usd: 1 });
  assert.equal(v.action, "verify");
  assert.equal(v.action === "verify" && v.byContent, true);
  assert.equal(d.decide("other_tool", {}).action, "run", "another tool is not that call");
});

test("checkpoint_only and stale plans verify by content, except a first run's first attempt", () => {
  const only = plan({}, { mode: "checkpoint_only", reason: "bytes_missing" });
  const v = new Resumer(only).decide("send", {});
  assert.deepEqual(v.action === "verify" && [v.action, v.byContent, v.why], ["verify", true, "bytes_missing"]);
  const stale = plan({ completed: [entry("send", {}, 1)] }, { fresh: { stale: true } });
  assert.equal(new Resumer(stale).decide("send", {}).action, "verify", "a stale plan's skips are not trusted");
  const first = plan({}, { mode: "checkpoint_only", reason: "no_session_files", action: "first_run", checkpoint: { ref: "-" } });
  assert.equal(new Resumer(first, { firstAttempt: true }).decide("send", {}).action, "run");
  assert.equal(new Resumer(first, { firstAttempt: false }).decide("send", {}).action, "verify");
});

test("a checkpoint the pod stores starts its key count again, not the plan's places", () => {
  const d = new Resumer(plan({ completed: [entry("read", { p: 1 }, 2)] }));
  assert.equal(d.decide("read", { p: 1 }).action, "run");
  d.stored("crc:9");
  const second = d.decide("read", { p: 1 });
  assert.equal(second.action, "skip", "the plan's 2nd read of p=1");
  const third = d.decide("read", { p: 1 });
  assert.equal(third.key, callKey(JOB, "crc:9", 2, "read", inputHash({ p: 1 })), "2nd since crc:9");
});

test("byContent verifies every call that may have run by its content", () => {
  const d = new Resumer(plan({ in_flight: [entry("charge", { usd: 5 }, 1)] }), { byContent: true });
  const v = d.decide("charge", { usd: 5 });
  assert.equal(v.action === "verify" && v.byContent, true);
});

test("entries no call matched are reported", () => {
  const d = new Resumer(plan({ completed: [entry("a", {}, 1)], in_flight: [entry("b", {}, 1)] }));
  d.decide("a", {});
  assert.deepEqual(
    d.unmatched().map((e) => [e.list, e.tool_name]),
    [["in_flight", "b"]],
  );
});

// --- beyond decide.mjs ---------------------------------------------------------------------

test("onStale: 'throw' refuses a stale plan with StalePlanError; 'verify' (the default) verifies", () => {
  const stale = plan({ completed: [entry("send", {}, 1)] }, { fresh: { stale: true, reason: "remote_unconfirmed", detail: "not confirmed" } });
  assert.throws(
    () => resume(stale, { onStale: "throw" }),
    (e: unknown) => e instanceof StalePlanError && e.reason === "remote_unconfirmed" && e.plan === stale,
  );
  const v = resume(stale).decide("send", {});
  assert.deepEqual(v.action === "verify" && [v.byContent, v.why], [true, "stale_plan"]);
});

test("a fail_job plan cannot be resumed", () => {
  const failed = plan({}, { action: "fail_job", mode: "checkpoint_only", reason: "checkpoint_invalid", checkpoint: { ref: "-", detail: "no CRC passes" } });
  assert.throws(() => resume(failed), CheckpointCorruptError);
});

test("call() skips, verifies through the handler, and runs with the key", async () => {
  const inFlight = entry("charge", { usd: 5 }, 1);
  const d = new Resumer(plan({ completed: [{ ...entry("send", {}, 1), result: "sent" }], in_flight: [inFlight] }));
  const ran: string[] = [];
  const skip = await d.call("send", {}, { run: async (k) => void ran.push(k) });
  assert.deepEqual(skip, {
    action: "skip",
    key: (entry("send", {}, 1) as { idempotency_key: string }).idempotency_key,
    result: "sent",
    success: null,
    resultTruncated: false,
  });
  const verified = await d.call("charge", { usd: 5 }, { run: async (k) => void ran.push(k), verify: async () => ({ ran: true, result: "ch_1" }) });
  assert.equal(verified.action, "verified");
  const fresh = await d.call("charge", { usd: 6 }, { run: async (k) => (ran.push(k), "ch_2") });
  assert.equal(fresh.action, "run");
  assert.deepEqual(ran, [fresh.key]);
  const again = new Resumer(plan({ in_flight: [inFlight] }));
  await assert.rejects(again.call("charge", { usd: 5 }, { run: async () => 1 }), /pass a verify handler/);
  assert.deepEqual(ran, [fresh.key], "nothing ran");
});

test("a run that throws leaves the call open unless the failure is definite", async () => {
  const lines: string[] = [];
  const writer = {
    toolStart: (tool: string) => (lines.push(`start ${tool}`), { callId: `c${lines.length}`, tool }),
    toolResult: (_h: unknown, r: { success: boolean }) => void lines.push(`result ${r.success}`),
  };
  const d = new Resumer(plan({}), { writer: writer as never });
  const timeout = new Error("timeout");
  await assert.rejects(d.call("charge", { usd: 1 }, { run: async () => { throw timeout; } }), /timeout/);
  assert.deepEqual(lines, ["start charge"], "a timeout proves nothing: no result, the next pod verifies");
  const refused = new Error("card declined");
  await assert.rejects(
    d.call("charge", { usd: 2 }, { run: async () => { throw refused; }, definiteFailure: (e) => e === refused }),
    /declined/,
  );
  assert.deepEqual(lines, ["start charge", "start charge", "result false"]);
});
