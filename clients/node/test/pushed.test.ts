// A pod whose session files a sidecar shipper pushes: the push source registered at dispatch,
// the flush before each checkpoint (await_pushed), the bounded wait for the previous attempt's
// source before planning (await_sources), and the stale plan in between. The shipper is played
// by the test (append_session_bytes and confirm_pushed with the source's token), on files the pod
// writes in a directory of its own, which the server does not tail.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";

import { Pod, StalePlanError, checkPlan, dropPushSource } from "@cortex-buffer/client";
import type { PodEnv } from "@cortex-buffer/client";

import { FakeExternalSystem, admin, agentPool, closeAdmin, newDispatchedJob, redispatch, sleep, teardown } from "./helpers.js";

const localDir = fs.mkdtempSync(path.join(os.tmpdir(), "cortex-pushed-"));
after(async () => {
  await teardown();
  await closeAdmin();
  fs.rmSync(localDir, { recursive: true, force: true });
});

/** A shipper that pushes every new byte of the job's local files, 4 kB at a time. */
class FakeShipper {
  private readonly sent = new Map<string, number>();
  constructor(private readonly env: PodEnv) {}
  async push(): Promise<void> {
    const src = this.env.pushSource;
    if (!src) throw new Error("no push source");
    const dir = path.join(localDir, this.env.jobId);
    for (const name of fs.readdirSync(dir).filter((f) => /^session-\d+\.jsonl$/.test(f)).sort()) {
      const relpath = `${this.env.jobId}/${name}`;
      const file = path.join(dir, name);
      const bytes = fs.readFileSync(file);
      const st = fs.statSync(file);
      let from = this.sent.get(relpath) ?? 0;
      while (from < bytes.length) {
        const chunk = bytes.subarray(from, Math.min(bytes.length, from + 4096));
        await admin.query("SELECT * FROM cortex_buffer.append_session_bytes($1, $2, $3, $4, $5, false, $6, $7)", [
          src.source,
          relpath,
          from,
          chunk,
          `${st.dev}:${st.ino}:x`,
          bytes.length,
          src.token,
        ]);
        from += chunk.length;
      }
      this.sent.set(relpath, from);
    }
  }
  async confirm(): Promise<void> {
    const src = this.env.pushSource;
    if (!src) throw new Error("no push source");
    await admin.query("SELECT cortex_buffer.confirm_pushed($1, source_token => $2)", [src.source, src.token]);
  }
}

test("flush before checkpoint, wait for sources before planning, stale until confirmed", async () => {
  const ext = new FakeExternalSystem();
  const source = `pod-${Math.random().toString(36).slice(2, 10)}`;
  const { jobId, env } = await newDispatchedJob({ pushSource: source });
  assert.equal(env.pushSource?.source, source);
  const shipper = new FakeShipper(env);

  const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
  const plan = await pod.recoveryPlan({ awaitSourcesMs: 200 });
  const { SessionWriter } = await import("@cortex-buffer/client");
  const w = SessionWriter.open({ dir: localDir, jobId });
  w.sessionStart();
  w.checkpointLoaded(null);
  const r = pod.resume(plan, { firstAttempt: true, writer: w });
  await r.call("fetch_invoice", { id: "INV-118" }, { run: async (k) => ext.run("fetch_invoice", { id: "INV-118" }, k, "420 EUR") });
  assert.deepEqual(w.pendingFlush(), [{ relpath: `${jobId}/session-001.jsonl`, size: w.size }]);

  // The shipper is behind: the flush waits for it, then the checkpoint is stored.
  const started = Date.now();
  const shipping = sleep(300).then(() => shipper.push());
  const cp = await pod.checkpoint({ step_index: 0 }, { writer: w, resumer: r, flushTimeoutMs: 3000 });
  await shipping;
  assert.equal(cp.flushed, true);
  assert.ok(Date.now() - started >= 250, "the flush waited for the shipper");
  assert.deepEqual(w.pendingFlush(), [{ relpath: `${jobId}/session-001.jsonl`, size: w.size }], "the marker came after the flush");
  // With nobody shipping, the flush gives up and the checkpoint is stored anyway.
  const lonely = await pod.checkpoint({ step_index: 1 }, { writer: w, resumer: r, flushTimeoutMs: 100 });
  assert.equal(lonely.flushed, false);

  let payKey = "";
  void r.call("pay_invoice", { id: "INV-118" }, { run: (k) => ((payKey = k), ext.run("pay_invoice", { id: "INV-118" }, k, "paid"), new Promise<never>(() => {})) });
  w.close();
  await shipper.push();

  // The pod is rescheduled; its previous attempt's source has not confirmed since.
  const env2 = await redispatch(jobId, { pushSource: source });
  const pod2 = new Pod(await agentPool(), { jobId, token: env2.jobToken });
  assert.equal(await pod2.awaitSources(200), false);
  const stale = await pod2.recoveryPlan({ staleRetries: 0 });
  assert.deepEqual(checkPlan(stale, { strict: true }), []);
  assert.equal(stale.fresh.stale, true);
  assert.equal(stale.fresh.reason, "remote_unconfirmed");
  assert.ok(stale.sessions[0]?.pushed?.source === source);
  assert.throws(() => pod2.resume(stale, { onStale: "throw" }), (e: unknown) => e instanceof StalePlanError && e.reason === "remote_unconfirmed");
  const cautious = pod2.resume(stale);
  const d = cautious.decide("pay_invoice", { id: "INV-118" });
  assert.deepEqual(d.action === "verify" && [d.byContent, d.why], [true, "stale_plan"]);

  // The shipper confirms; the bounded wait returns true, the plan is fresh and exact.
  const confirming = sleep(200).then(() => shipper.confirm());
  assert.equal(await pod2.awaitSources(3000), true);
  await confirming;
  const plan2 = await pod2.recoveryPlan({ awaitSourcesMs: 1000 });
  assert.equal(plan2.fresh.stale, false);
  assert.deepEqual(plan2.in_flight.map((e) => [e.tool_name, e.idempotency_key]), [["pay_invoice", payKey]]);
  const r2 = pod2.resume(plan2, { firstAttempt: env2.attempt === 1 });
  const v = r2.decide("pay_invoice", { id: "INV-118" });
  assert.ok(v.action === "verify" && v.keys.includes(payKey) && !v.byContent);
  assert.equal(await dropPushSource(admin, source), true);
});
