// The pod's life on a real cluster: dispatch → token → heartbeat loop → fenced checkpoints → a
// superseded pod is refused; the token's scopes; the errors, each provoked and mapped.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, test } from "node:test";

import {
  BudgetExhaustedError,
  CheckpointCorruptError,
  CortexBufferError,
  JobNotRunningError,
  NotFoundError,
  Pod,
  SupersededPodError,
  TokenRefusedError,
  dispatch,
  createJob,
  isStopSignal,
  podEnvFromVars,
  podEnvToVars,
  setBudget,
} from "@cortex-buffer/client";

import { admin, agentClient, agentPool, closeAdmin, newDispatchedJob, redispatch, sleep, teardown } from "./helpers.js";

after(async () => {
  await teardown();
  await closeAdmin();
});

const MODEL = "claude-sonnet-4-5-20250929";

describe("dispatch", () => {
  test("admits, counts the attempt up, issues the token and the pod env", async () => {
    const { jobId, env } = await newDispatchedJob({ pushSource: `pod-${randomUUID().slice(0, 8)}` });
    assert.equal(env.jobId, jobId);
    assert.equal(env.attempt, 1);
    assert.match(env.jobToken, new RegExp(`^cbjt1\\.${jobId}\\.1\\.[0-9a-f]{64}$`));
    assert.match(env.pushSource?.token ?? "", /^cbst1\./);
    const vars = podEnvToVars(env);
    assert.deepEqual(Object.keys(vars).sort(), ["CB_SHIP_SOURCE", "CB_SHIP_SOURCE_TOKEN", "CORTEX_JOB_ATTEMPT", "CORTEX_JOB_ID", "CORTEX_JOB_TOKEN"]);
    assert.deepEqual(podEnvFromVars(vars), env);
    const { rows } = await admin.query("SELECT status::text, attempt FROM cortex_buffer.job WHERE id = $1", [jobId]);
    assert.deepEqual(rows[0], { status: "RUNNING", attempt: 1 });
    const again = await redispatch(jobId);
    assert.equal(again.attempt, 2);
    assert.notEqual(again.jobToken, env.jobToken);
  });

  test("an open circuit breaker refuses the job and issues nothing", async () => {
    const agentId = randomUUID();
    await admin.query("INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ($1, 1)", [agentId]);
    const first = await createJob(admin, { agentId });
    assert.equal((await dispatch(admin, { jobId: first, startAttempt: true })).admitted, true);
    await admin.query("SELECT * FROM cortex_buffer.record_outcome($1, $2, false)", [agentId, first]);
    const second = await createJob(admin, { agentId });
    const r = await dispatch(admin, { jobId: second, startAttempt: true });
    assert.deepEqual(r, { admitted: false, jobId: second, agentId });
    const { rows } = await admin.query("SELECT attempt FROM cortex_buffer.job WHERE id = $1", [second]);
    assert.equal(rows[0].attempt, 0);
  });
});

describe("the pod", () => {
  test("token → authorize → heartbeat loop → fenced checkpoints; the superseded pod is refused", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    assert.equal(await pod.authorize(), true);
    const plan = await pod.recoveryPlan();
    assert.equal(plan.action, "first_run");
    assert.equal(pod.fence, null);

    const stops: string[] = [];
    const loop = pod.startHeartbeat({ intervalMs: 50, onStop: (s) => stops.push(s.reason) });
    const c1 = await pod.checkpoint({ step_index: 0, state: { done: ["a"] } });
    assert.equal(pod.fence, c1.checkpoint_id);
    const c2 = await pod.checkpoint({ step_index: 1, state: { done: ["a", "b"] } });
    assert.equal(c2.step_index, 1);
    assert.match(c2.ref, /^crc:\d+$/);
    const read = await pod.readCheckpoint();
    assert.deepEqual([read.source, read.checkpoint_id, read.step_index, read.crc_ok], ["current", c2.checkpoint_id, 1, true]);

    // A second writer that also started from c1 loses the fence: 55006, nothing written.
    await assert.rejects(
      pod.writeCheckpoint({ step_index: 2 }, { expectedCheckpointId: c1.checkpoint_id }),
      (e: unknown) => e instanceof SupersededPodError && e.kind === "fence_lost" && e.sqlstate === "55006" && (e.hint ?? "").startsWith("Another writer"),
    );
    await assert.rejects(
      pod.writeCheckpoint({ step_index: 0 }, { expectedCheckpointId: c2.checkpoint_id }),
      (e: unknown) => e instanceof SupersededPodError && e.kind === "step_regression",
    );
    await sleep(120);
    assert.ok(stops.length === 0, "the loop beats while the pod owns the job");

    // The control plane dispatches the job again: the old pod's calls are refused.
    const env2 = await redispatch(jobId);
    const stop = await loop.stopped;
    assert.equal(stop.reason, "superseded");
    assert.ok(stop.error instanceof SupersededPodError && stop.error.kind === "dispatched_again");
    assert.ok(loop.signal.aborted, "the loop's signal tells the pod's work to stop");
    assert.deepEqual(stops, ["superseded"]);
    await assert.rejects(pod.checkpoint({ step_index: 2 }), (e: unknown) => {
      assert.ok(e instanceof SupersededPodError);
      assert.equal(e.kind, "dispatched_again");
      assert.equal(e.sqlstate, "42501");
      assert.ok(e.hint?.startsWith("The job was dispatched again"));
      assert.ok(isStopSignal(e));
      return true;
    });

    // The new pod resumes from c2 and fences on it.
    const pod2 = new Pod(await agentPool(), { jobId, token: env2.jobToken });
    const plan2 = await pod2.recoveryPlan();
    assert.equal(plan2.action, "resume");
    assert.equal(pod2.fence, c2.checkpoint_id);
    const c3 = await pod2.checkpoint({ step_index: 2 });
    assert.equal(c3.step_index, 2);
  });

  test("the loop stops when heartbeat returns false (reaped) and on an AbortSignal", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    const ac = new AbortController();
    const aborted = pod.startHeartbeat({ intervalMs: 30, signal: ac.signal });
    await sleep(80);
    ac.abort();
    const a = await aborted.stopped;
    assert.equal(a.reason, "aborted");
    assert.ok(a.beats >= 1);

    const loop = pod.startHeartbeat({ intervalMs: 30 });
    await sleep(60);
    await admin.query("UPDATE cortex_buffer.job SET status = 'FAILED' WHERE id = $1", [jobId]);
    const s = await loop.stopped;
    assert.equal(s.reason, "not_running");
    assert.equal(await pod.heartbeat(), false);
    await assert.rejects(pod.checkpoint({ step_index: 0 }), (e: unknown) => e instanceof JobNotRunningError && e.sqlstate === "55000" && isStopSignal(e));

    const manual = pod.startHeartbeat({ intervalMs: 1000 });
    manual.stop();
    assert.equal((await manual.stopped).reason, "stopped");
    assert.equal(manual.signal.aborted, false);
  });

  test("transaction scope leaves no token on the connection; session scope presents it once", async () => {
    const { jobId, env } = await newDispatchedJob();
    const client = await agentClient();
    const pod = new Pod(client, { jobId, token: env.jobToken });
    // Calls sharing one pg.Client take turns: none runs outside its own transaction.
    const results = await Promise.all([pod.heartbeat(), pod.heartbeat(), pod.checkTokenBudget(), pod.heartbeat()]);
    assert.equal(results[0], true);
    const { rows } = await client.query("SELECT coalesce(current_setting('cortex_buffer.job_token', true), '') AS t");
    assert.equal(rows[0].t, "", "a transaction-scoped token ends with its transaction");
    await assert.rejects(client.query("SELECT cortex_buffer.heartbeat($1)", [jobId]), /no job token/);

    const pool = await agentPool(1);
    const sessionPod = new Pod(pool, { jobId, token: env.jobToken, tokenScope: "session" });
    assert.equal(await sessionPod.heartbeat(), true);
    const { rows: r2 } = await pool.query("SELECT current_setting('cortex_buffer.job_token', true) = $1 AS kept", [env.jobToken]);
    assert.equal(r2[0].kept, true, "a session-scoped token stays on the pod's own connection");

    // Several calls in one transaction.
    const out = await pod.transaction(async (tx) => {
      const beat = await tx.heartbeat();
      const cp = await tx.checkpoint({ step_index: 0 });
      return { beat, cp };
    });
    assert.equal(out.beat, true);
    assert.equal(pod.fence, out.cp.checkpoint_id);
  });

  test("spend: usage, reservations and budget exhaustion", async () => {
    const { jobId, agentId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    await setBudget(admin, agentId, 10_000, null);
    assert.equal((await pod.requireBudget()).reason, "within_budget");
    const r = await pod.reserveBudget({ input_tokens: 4000, output_tokens: 100 }, MODEL);
    assert.ok(r.allowed && r.reservation_id);
    await assert.rejects(
      pod.reserveBudget({ input_tokens: 7000 }, MODEL),
      (e: unknown) => e instanceof BudgetExhaustedError && e.reason === "input_token_budget_insufficient" && e.sqlstate === undefined,
    );
    const settled = await pod.settleUsage(r.reservation_id as string, { input_tokens: 3500, output_tokens: 80 }, "req-1");
    assert.deepEqual([settled.input_tokens, settled.output_tokens, settled.llm_calls, settled.duplicate], [3500, 80, 1, false]);
    const again = await pod.settleUsage(r.reservation_id as string, { input_tokens: 3500, output_tokens: 80 }, "req-1");
    assert.equal(again.duplicate, true);
    const total = await pod.recordUsage(MODEL, { input_tokens: 7000, output_tokens: 10 }, { requestId: "req-2" });
    assert.equal(total.input_tokens, 10_500);
    assert.equal((await pod.recordUsage(MODEL, { input_tokens: 7000, output_tokens: 10 }, { requestId: "req-2" })).duplicate, true);
    const check = await pod.checkTokenBudget();
    assert.deepEqual([check.allowed, check.reason, check.input_tokens, check.max_input_tokens], [false, "input_token_budget_exhausted", 10_500, 10_000]);
    await assert.rejects(pod.requireBudget(), (e: unknown) => e instanceof BudgetExhaustedError && e.reason === "input_token_budget_exhausted");
    const refused = await pod.reserveBudget({ input_tokens: 1 }, MODEL, { throwIfRefused: false });
    assert.deepEqual(refused, { reservation_id: null, allowed: false, reason: "input_token_budget_exhausted" });
    await assert.rejects(pod.settleUsage(randomUUID(), { input_tokens: 1 }), (e: unknown) => e instanceof NotFoundError && e.sqlstate === "P0002");
    const small = await pod.reserveBudget({ input_tokens: 0, output_tokens: 1 }, MODEL, { throwIfRefused: false });
    assert.equal(small.allowed, false, "used ≥ limit refuses even an estimate of nothing");
    await assert.rejects(pod.recordUsage("no-such-model", { input_tokens: 1 }), (e: unknown) => e instanceof CortexBufferError && e.sqlstate === "42704");
    await assert.rejects(pod.recordUsage(MODEL, { nothing: 1 }), (e: unknown) => e instanceof CortexBufferError && e.sqlstate === "22023" && !!e.hint);
  });
});

describe("errors, provoked", () => {
  test("token refusals by kind", async () => {
    const { jobId, env } = await newDispatchedJob();
    const pool = await agentPool();
    const kinds: Array<[string | undefined, string]> = [
      [undefined, "no_token"],
      ["hello", "not_a_token"],
      [env.jobToken.slice(0, -1) + (env.jobToken.endsWith("0") ? "1" : "0"), "does_not_verify"],
    ];
    for (const [token, kind] of kinds) {
      const pod = new Pod(pool, { jobId, token });
      await assert.rejects(pod.authorize(), (e: unknown) => e instanceof TokenRefusedError && e.kind === kind && e.sqlstate === "42501" && !isStopSignal(e), kind);
    }
    const other = new Pod(pool, { jobId: randomUUID(), token: env.jobToken });
    await assert.rejects(other.heartbeat(), (e: unknown) => e instanceof TokenRefusedError && e.kind === "other_job");
  });

  test("an unknown job (P0002) and checkpoints that all fail their CRC (XX001, fail_job)", async () => {
    const fleet = new Pod(admin, { jobId: randomUUID() });
    await assert.rejects(fleet.readCheckpoint(), NotFoundError);
    await assert.rejects(fleet.recoveryPlan(), NotFoundError);
    const { jobId, env } = await newDispatchedJob();
    const pod = new Pod(await agentPool(), { jobId, token: env.jobToken });
    await pod.recoveryPlan();
    await pod.checkpoint({ step_index: 0 });
    await admin.query("UPDATE cortex_buffer.job SET checkpoint_crc = 12345 WHERE id = $1", [jobId]);
    await admin.query("UPDATE cortex_buffer.checkpoint_history SET crc = 12345 WHERE job_id = $1", [jobId]);
    await assert.rejects(pod.readCheckpoint(), (e: unknown) => e instanceof CheckpointCorruptError && e.sqlstate === "XX001");
    const plan = await pod.recoveryPlan();
    assert.equal(plan.action, "fail_job");
    assert.throws(() => pod.resume(plan), CheckpointCorruptError);
  });
});
