// The plan's types against real answers: every kind of plan the tests can provoke is checked
// with checkPlan in strict mode (a key or value the types do not declare fails) and narrowed.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as path from "node:path";
import { after, describe, test } from "node:test";

import { Pod, asRecoveryPlan, checkPlan, planEntries, resume } from "@cortex-buffer/client";
import type { RecoveryPlan } from "@cortex-buffer/client";

import { admin, agentPool, appendRaw, closeAdmin, jobDir, newDispatchedJob, redispatch, teardown, writer } from "./helpers.js";

after(async () => {
  await teardown();
  await closeAdmin();
});

function strict(plan: unknown): RecoveryPlan {
  assert.deepEqual(checkPlan(plan, { strict: true }), [], JSON.stringify(plan, null, 1));
  return asRecoveryPlan(plan, { strict: true });
}

describe("recovery plans, real", () => {
  test("a first run with no files: first_run, checkpoint_only, no_session_files", async () => {
    const { jobId, env } = await newDispatchedJob();
    const plan = strict(await new Pod(await agentPool(), { jobId, token: env.jobToken }).recoveryPlan());
    assert.equal(plan.action, "first_run");
    assert.equal(plan.mode, "checkpoint_only");
    if (plan.action === "first_run") {
      assert.equal(plan.checkpoint.ref, "-");
      assert.equal(plan.checkpoint.resume_step, 0);
    }
    if (plan.mode === "checkpoint_only") assert.equal(plan.reason, "no_session_files");
    // On the first attempt nothing can have run: every call runs.
    assert.equal(resume(plan, { firstAttempt: true }).decide("t", {}).action, "run");
    assert.equal(resume(plan, { firstAttempt: false }).decide("t", {}).action, "verify");
  });

  test("a first run with files: buffer, no_checkpoint; a resume: marker_matched; high_water_mark without a marker", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    await pod.recoveryPlan();
    const w = writer(jobId);
    w.sessionStart();
    w.checkpointLoaded(null);
    const call = w.toolStart("read", { p: "a" });
    w.toolResult(call, { result: { lines: 3 } });
    w.toolStart("write", { p: "b" });
    const first = strict(await pod.recoveryPlan());
    assert.equal(first.action, "first_run");
    assert.equal(first.mode === "buffer" && first.reason, "no_checkpoint");
    assert.deepEqual(first.completed.map((c) => [c.tool_name, c.result, c.paired_by, c.key]), [["read", '{"lines":3}', "id", call.callId]]);
    assert.deepEqual(first.in_flight.map((c) => [c.tool_name, c.writer_crashed]), [["write", false]]);

    await pod.checkpoint({ step_index: 0 }, { writer: w });
    w.toolResult({ callId: "nope", tool: "ghost" }, { success: false, result: "?" });
    const marked = strict(await pod.recoveryPlan());
    assert.equal(marked.action, "resume");
    assert.equal(marked.mode === "buffer" && marked.reason, "marker_matched");
    assert.equal(marked.marker?.kind, w.dialect === "cortex-plane" ? "checkpoint" : "checkpoint_written");
    // The call still open when the pod stored its checkpoint, and a result whose start is not in the file.
    assert.deepEqual(marked.verify.map((v) => [v.reason, v.tool_name, v.results[0]?.success]), [
      ["open_at_anchor", "write", undefined],
      ["start_lost", "ghost", false],
    ]);
    assert.ok(marked.anomalies.some((a) => a.kind === "result_without_start"));

    // A checkpoint stored without a marker line: its high-water mark places it.
    await pod.writeCheckpoint({ step_index: 1 }, { expectedCheckpointId: pod.fence });
    const hwm = strict(await new Pod(admin, { jobId }).recoveryPlan());
    assert.equal(hwm.mode === "buffer" && hwm.reason, "high_water_mark");
    assert.equal(hwm.marker?.kind, "high_water_mark");
    assert.equal(typeof hwm.marker?.recorded_at, "string");
    w.close();
  });

  test("checkpoint_only when the marker is another checkpoint's", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    const w = writer(jobId);
    w.sessionStart();
    await pod.recoveryPlan();
    await pod.checkpoint({ step_index: 0 }, { writer: w });
    w.close();
    const plan = strict(await pod.recoveryPlan({ checkpointId: randomUUID() }));
    assert.equal(plan.mode, "checkpoint_only");
    if (plan.mode === "checkpoint_only") {
      assert.ok(["marker_mismatch", "no_marker"].includes(plan.reason), plan.reason);
      assert.deepEqual([plan.completed, plan.in_flight, plan.verify], [[], [], []]);
    }
    const v = resume(plan).decide("t", {});
    assert.deepEqual(v.action === "verify" && [v.byContent, v.why], [true, plan.reason]);
  });

  test("ambiguous pairing: the shipped writer's lines without call ids", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    await pod.recoveryPlan();
    await pod.checkpoint({ step_index: 0 });
    const line = (seq: number, type: string, data: unknown) =>
      `${JSON.stringify({ version: "1.0", timestamp: new Date().toISOString(), jobId, sessionId: "s", agentId: "a", sequence: seq, type, data })}\n`;
    appendRaw(
      path.join(jobDir(jobId), "session-001.jsonl"),
      line(0, "TOOL_CALL", { type: "tool_use", toolName: "X", toolInput: { a: 1 } }) +
        line(1, "TOOL_CALL", { type: "tool_use", toolName: "X", toolInput: { a: 2 } }) +
        line(2, "TOOL_RESULT", { type: "tool_result", toolName: "X", output: "one", isError: false }),
    );
    const plan = strict(await pod.recoveryPlan());
    assert.deepEqual(plan.verify.map((v) => [v.reason, v.key_status, v.results.length]), [
      ["ambiguous_pairing", "ambiguous", 1],
      ["ambiguous_pairing", "ambiguous", 1],
    ]);
    assert.ok(plan.verify.every((v) => v.key_candidates.length > 0));
    assert.deepEqual(planEntries(plan).map((e) => e.list), ["verify", "verify"]);
    const d = resume(plan).decide("X", { a: 1 });
    assert.equal(d.action, "verify");
    assert.ok(d.action === "verify" && d.maybe.length > 0, "asked by the candidates");
  });

  test("a stale plan (a REPEATABLE READ snapshot cannot catch up)", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    await pod.recoveryPlan();
    const w = writer(jobId);
    w.sessionStart();
    w.toolStart("t", {});
    w.close();
    await redispatch(jobId);
    const c = await admin.connect();
    try {
      await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      const { rows } = await c.query("SELECT cortex_buffer.recovery_plan($1) AS p", [jobId]);
      await c.query("ROLLBACK");
      const plan = strict(rows[0].p);
      assert.equal(plan.fresh.stale, true);
      assert.equal(plan.fresh.reason, "not_caught_up");
      assert.ok(plan.notes.includes("stale"));
      assert.throws(() => resume(plan, { onStale: "throw" }), /stale/);
      const v = resume(plan).decide("t", {});
      assert.deepEqual(v.action === "verify" && [v.byContent, v.why], [true, "stale_plan"]);
    } finally {
      c.release();
    }
  });
});

test("the plans captured from a cluster in schemas/test/fixtures fit the types too", async (t) => {
  const fs = await import("node:fs");
  const { fileURLToPath } = await import("node:url");
  const dir = fileURLToPath(new URL("../../../../schemas/test/fixtures/", import.meta.url));
  if (!fs.existsSync(dir)) return t.skip("no schemas/test/fixtures beside this package");
  const files = fs.readdirSync(dir).filter((f) => f.startsWith("recovery_plan"));
  for (const f of files) assert.deepEqual(checkPlan(JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")), { strict: true }), [], f);
});
