// Rollover: the writer starts session-002, -003, … (never renames or truncates), and
// recovery_plan stays exact across the files: every finished call after the checkpoint in
// completed with the key its pod sent, the open one in flight, nothing in verify, no lost events.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { after, describe, test } from "node:test";

import { Pod, checkPlan } from "@cortex-buffer/client";

import { FakeExternalSystem, agentPool, closeAdmin, newDispatchedJob, redispatch, teardown, writer } from "./helpers.js";

after(async () => {
  await teardown();
  await closeAdmin();
});

for (const dialect of ["cortex-plane", "cortex-spike"] as const) {
  describe(`rollover (${dialect})`, () => {
    test("the plan is exact across several files, and after a second pod rolls over too", async () => {
      const ext = new FakeExternalSystem();
      const { jobId, env } = await newDispatchedJob();
      const pool = await agentPool();
      const pod = new Pod(pool, { jobId, token: env.jobToken });
      const plan = await pod.recoveryPlan();
      const w = writer(jobId, { dialect, rolloverBytes: 900 });
      w.sessionStart();
      w.checkpointLoaded(null);
      const r = pod.resume(plan, { firstAttempt: true, writer: w });
      await r.call("prep", {}, { run: async (k) => ext.run("prep", {}, k, "ok") });
      await pod.checkpoint({ step_index: 0 }, { writer: w, resumer: r });
      const keys = new Map<string, string>();
      for (let i = 1; i <= 6; i++) {
        const out = await r.call("fetch", { page: i }, { run: async (k) => ext.run("fetch", { page: i }, k, `page ${i}`) });
        keys.set(`fetch ${i}`, out.key);
      }
      let openKey = "";
      void r.call("pay", { usd: 9 }, { run: (k) => ((openKey = k), ext.run("pay", { usd: 9 }, k, "paid"), new Promise<never>(() => {})) });
      w.close();
      await pool.end();
      const files = fs.readdirSync(w.jobDir).filter((f) => f.endsWith(".jsonl")).sort();
      assert.ok(files.length >= 3, `rolled over: ${files.join(" ")}`);
      assert.deepEqual(files, files.map((_, i) => `session-${String(i + 1).padStart(3, "0")}.jsonl`));

      const env2 = await redispatch(jobId);
      const pool2 = await agentPool();
      const pod2 = new Pod(pool2, { jobId, token: env2.jobToken });
      const plan2 = await pod2.recoveryPlan();
      assert.deepEqual(checkPlan(plan2, { strict: true }), []);
      assert.equal(plan2.mode, "buffer");
      assert.deepEqual(plan2.lost_events, []);
      assert.deepEqual(plan2.verify, [], JSON.stringify(plan2.verify));
      assert.deepEqual(
        plan2.completed.map((c) => [c.tool_name, c.result, c.idempotency_key]),
        [1, 2, 3, 4, 5, 6].map((i) => ["fetch", `page ${i}`, keys.get(`fetch ${i}`)]),
      );
      assert.deepEqual(plan2.in_flight.map((c) => [c.tool_name, c.idempotency_key]), [["pay", openKey]]);
      assert.ok(plan2.sessions.length >= 3 && plan2.sessions.every((s) => s.integrity.trusted));

      // Pod 2 replays, rolls over again, stores a checkpoint, and dies mid-call; pod 3 is exact too.
      const w2 = writer(jobId, { dialect, rolloverBytes: 900 });
      w2.sessionStart();
      w2.checkpointLoaded(plan2.checkpoint);
      const r2 = pod2.resume(plan2, { firstAttempt: false, writer: w2 });
      const verify = async (d: { keys: string[]; maybe: string[] }) => ext.lookup([...d.keys, ...d.maybe]);
      for (let i = 1; i <= 6; i++) {
        const out = await r2.call("fetch", { page: i }, { run: async (k) => ext.run("fetch", { page: i }, k, "again"), verify });
        assert.equal(out.action, "skip");
      }
      assert.equal((await r2.call("pay", { usd: 9 }, { run: async (k) => ext.run("pay", { usd: 9 }, k, "again"), verify })).action, "verified");
      await pod2.checkpoint({ step_index: 1 }, { writer: w2, resumer: r2 });
      const keys2: string[] = [];
      for (let i = 1; i <= 5; i++) keys2.push((await r2.call("mail", { n: i }, { run: async (k) => ext.run("mail", { n: i }, k, `m${i}`) })).key);
      w2.close();
      await pool2.end();

      const pod3 = new Pod(await agentPool(), { jobId, token: (await redispatch(jobId)).jobToken });
      const plan3 = await pod3.recoveryPlan();
      assert.deepEqual(checkPlan(plan3, { strict: true }), []);
      assert.equal(plan3.action === "resume" && plan3.checkpoint.step_index, 1);
      assert.deepEqual(plan3.verify, [], JSON.stringify(plan3.verify));
      assert.deepEqual(plan3.in_flight, []);
      assert.deepEqual(
        plan3.completed.map((c) => [c.tool_name, c.result, c.idempotency_key]),
        [1, 2, 3, 4, 5].map((i) => ["mail", `m${i}`, keys2[i - 1]]),
      );
      assert.ok([...ext.effects.values()].every((n) => n === 1), "nothing ran twice");
    });
  });
}
