// A pod killed mid-call, and the next pod resuming: the finished call is skipped, the open one
// verified with the key its predecessor sent, nothing runs twice. In both writer dialects, on
// the cluster, through the session writer and recovery_plan.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { Pod, checkPlan, planEntries } from "@cortex-buffer/client";
import type { Decision, PodEnv, RecoveryPlan, SessionDialect } from "@cortex-buffer/client";

import { FakeExternalSystem, agentPool, closeAdmin, newDispatchedJob, redispatch, teardown, writer } from "./helpers.js";

after(async () => {
  await teardown();
  await closeAdmin();
});

function assertPlan(plan: RecoveryPlan): void {
  assert.deepEqual(checkPlan(plan, { strict: true }), [], "the plan fits the types");
}

/** Starts a pod: token, plan, writer, resumer, as docs/agent.md orders them. */
async function startPod(jobId: string, env: PodEnv, dialect: SessionDialect) {
  const pool = await agentPool();
  const pod = new Pod(pool, { jobId, token: env.jobToken });
  await pod.authorize();
  const plan = await pod.recoveryPlan(); // before the pod writes any line of its own
  assertPlan(plan);
  const w = writer(jobId, { dialect });
  w.sessionStart();
  w.checkpointLoaded(plan.action === "fail_job" ? null : plan.checkpoint);
  const resumer = pod.resume(plan, { firstAttempt: env.attempt === 1, writer: w });
  return { pool, pod, plan, w, resumer };
}

for (const dialect of ["cortex-plane", "cortex-spike"] as const) {
  describe(`resume after a pod killed mid-call (${dialect})`, () => {
    test("the finished call is skipped, the open one verified with its key, nothing runs twice", async () => {
      const ext = new FakeExternalSystem();
      const { jobId, env } = await newDispatchedJob();

      // Pod 1: step 0 searches, checkpoints; step 1 sends an email, then starts a charge and dies.
      const p1 = await startPod(jobId, env, dialect);
      assert.equal(p1.plan.action, "first_run");
      const search = await p1.resumer.call("search", { q: "rust" }, { run: async (k) => ext.run("search", { q: "rust" }, k, "3 hits") });
      assert.equal(search.action, "run");
      await p1.pod.checkpoint({ step_index: 0, state: { hits: 3 } }, { writer: p1.w, resumer: p1.resumer });
      const email = await p1.resumer.call("send_email", { to: "ops" }, { run: async (k) => ext.run("send_email", { to: "ops" }, k, "sent 5521") });
      let chargeKey = "";
      void p1.resumer.call("charge", { usd: 42 }, {
        run: (k) => {
          chargeKey = k;
          ext.run("charge", { usd: 42 }, k, "ch_1"); // the provider got it...
          return new Promise<never>(() => {}); // ...and the pod died before the answer came
        },
      });
      assert.ok(chargeKey, "TOOL_START was written and the call made");
      p1.w.close();
      await p1.pool.end(); // the pod's connections drop

      // Pod 2: the control plane dispatches the job again.
      const env2 = await redispatch(jobId);
      const p2 = await startPod(jobId, env2, dialect);
      const plan = p2.plan;
      assert.equal(plan.action, "resume");
      assert.equal(plan.mode, "buffer");
      if (plan.action !== "resume" || plan.mode !== "buffer") return;
      assert.equal(plan.checkpoint.resume_step, 1);
      assert.equal(plan.reason, "marker_matched");
      assert.deepEqual(
        plan.completed.map((c) => [c.tool_name, c.result, c.idempotency_key]),
        [["send_email", "sent 5521", email.key]],
      );
      assert.deepEqual(
        plan.in_flight.map((c) => [c.tool_name, c.idempotency_key, c.input]),
        [["charge", chargeKey, JSON.stringify({ usd: 42 })]],
      );
      assert.deepEqual(plan.verify, []);

      // Pod 2 replays step 1: send_email, charge; then a new call.
      const decisions: Decision[] = [];
      const replay = async (tool: string, input: unknown, result: unknown) =>
        p2.resumer.call(tool, input, {
          run: async (k) => ext.run(tool, input, k, result),
          verify: async (d) => (decisions.push(d), ext.lookup([...d.keys, ...d.maybe])),
        });
      const e2 = await replay("send_email", { to: "ops" }, "sent again?!");
      assert.deepEqual(e2, { action: "skip", key: email.key, result: "sent 5521", success: true, resultTruncated: false });
      const c2 = await replay("charge", { usd: 42 }, "ch_2");
      assert.equal(c2.action, "verified");
      assert.equal(decisions[0]?.action === "verify" && decisions[0].keys.includes(chargeKey), true, "verified by the key pod 1 sent");
      assert.equal(c2.action === "verified" && c2.result, "ch_1");
      const r2 = await replay("receipt", { usd: 42 }, "mailed");
      assert.equal(r2.action, "run");
      assert.deepEqual(p2.resumer.unmatched(), []);

      // Nothing ran twice.
      assert.deepEqual([...ext.effects.values()], [1, 1, 1, 1]);
      p2.w.close();
    });
  });
}

describe("a first run that crashes twice (no checkpoint)", () => {
  test("cortex-plane: the third pod's plan still holds the first pod's calls; nothing runs twice", async () => {
    const ext = new FakeExternalSystem();
    const { jobId, env } = await newDispatchedJob();
    const p1 = await startPod(jobId, env, "cortex-plane");
    await p1.resumer.call("a", { n: 1 }, { run: async (k) => ext.run("a", { n: 1 }, k, "ra") });
    void p1.resumer.call("b", { n: 2 }, { run: (k) => (ext.run("b", { n: 2 }, k, "rb"), new Promise<never>(() => {})) });
    p1.w.close();
    await p1.pool.end();

    const p2 = await startPod(jobId, await redispatch(jobId), "cortex-plane");
    const verify = async (d: Decision & { action: "verify" }) => ext.lookup([...d.keys, ...d.maybe]);
    assert.equal((await p2.resumer.call("a", { n: 1 }, { run: async (k) => ext.run("a", { n: 1 }, k, "x"), verify })).action, "skip");
    assert.equal((await p2.resumer.call("b", { n: 2 }, { run: async (k) => ext.run("b", { n: 2 }, k, "x"), verify })).action, "verified");
    void p2.resumer.call("c", { n: 3 }, { run: (k) => (ext.run("c", { n: 3 }, k, "rc"), new Promise<never>(() => {})) });
    p2.w.close();
    await p2.pool.end();

    const p3 = await startPod(jobId, await redispatch(jobId), "cortex-plane");
    assert.equal(p3.plan.action, "first_run");
    const seen = planEntries(p3.plan).map((e) => `${e.list}:${e.tool_name}`);
    assert.ok(seen.includes("completed:a"), `the first pod's finished call is still in the plan: ${seen.join(" ")}`);
    for (const [tool, input] of [["a", { n: 1 }], ["b", { n: 2 }], ["c", { n: 3 }]] as const) {
      const out = await p3.resumer.call(tool, input, { run: async (k) => ext.run(tool, input, k, "again"), verify });
      assert.notEqual(out.action, "run", `${tool} is not run again`);
    }
    assert.deepEqual([...ext.effects.values()], [1, 1, 1]);
    p3.w.close();
  });

  test("cortex-spike: the server reads only the latest writer, so the first pod's finished call is gone (why cortex-plane is the default)", async () => {
    const ext = new FakeExternalSystem();
    const { jobId, env } = await newDispatchedJob();
    const p1 = await startPod(jobId, env, "cortex-spike");
    await p1.resumer.call("a", { n: 1 }, { run: async (k) => ext.run("a", { n: 1 }, k, "ra") });
    p1.w.close();
    await p1.pool.end();
    const p2 = await startPod(jobId, await redispatch(jobId), "cortex-spike");
    assert.deepEqual(p2.plan.completed.map((c) => c.tool_name), ["a"], "the second pod's plan has it");
    p2.w.close();
    await p2.pool.end(); // pod 2 died before its replay reached a: it wrote SESSION_START only
    const p3 = await startPod(jobId, await redispatch(jobId), "cortex-spike");
    assert.deepEqual(planEntries(p3.plan), [], "recovery_plan's no-checkpoint rule for the spike dialect: the latest writer segment only");
    assert.equal(p3.resumer.decide("a", { n: 1 }).action, "run", "so a Resumer would run it again");
    p3.w.close();
  });
});
