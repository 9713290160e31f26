// The Graphile Worker tasks, called with a fake helpers object against the real database.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, test } from "node:test";

import { createJob, mintPodEnv } from "@cortex-buffer/client";
import { cleanupSessionBuffers, dispatchWithToken, makeDispatchTask, reapZombies } from "@cortex-buffer/client/graphile";
import type { GraphileTask } from "@cortex-buffer/client/graphile";

import { admin, closeAdmin, fakeHelpers, teardown } from "./helpers.js";

after(async () => {
  await teardown();
  await closeAdmin();
});

async function staleRunningJob(maxAttempts: number, attempt: number): Promise<string> {
  const id = randomUUID();
  await admin.query(
    `INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, max_attempts, started_at, heartbeat_at, updated_at)
     VALUES ($1, $2, 'RUNNING', $3, $4, now() - interval '1 hour', now() - interval '10 minutes', now() - interval '10 minutes')`,
    [id, randomUUID(), attempt, maxAttempts],
  );
  return id;
}

test("the reaper reaps and re-enqueues RETRYING jobs after retry_after; dead letters are left", async () => {
  const retrying = await staleRunningJob(3, 1);
  const dead = await staleRunningJob(1, 1);
  const helpers = fakeHelpers();
  const before = Date.now();
  const reaped = await reapZombies(helpers);
  const mine = new Map(reaped.filter((j) => j.job_id === retrying || j.job_id === dead).map((j) => [j.job_id, j]));
  assert.equal(mine.get(retrying)?.new_status, "RETRYING");
  assert.equal(mine.get(dead)?.new_status, "DEAD_LETTER");
  const enqueued = helpers.jobs.filter((j) => (j.payload as { jobId: string }).jobId === retrying);
  assert.equal(enqueued.length, 1);
  const spec = enqueued[0]?.spec as { runAt: Date; jobKey: string };
  assert.equal(enqueued[0]?.identifier, "run_agent_job");
  assert.equal(spec.jobKey, `agent-job:${retrying}`);
  assert.ok(spec.runAt instanceof Date && spec.runAt.getTime() >= before, "at now() + retry_after");
  assert.equal(helpers.jobs.filter((j) => (j.payload as { jobId: string }).jobId === dead).length, 0);
  const { rows } = await admin.query("SELECT id, status::text, error->>'reason' AS reason FROM cortex_buffer.job WHERE id IN ($1, $2) ORDER BY status", [retrying, dead]);
  assert.deepEqual(rows.map((r) => [r.status, r.reason]).sort(), [["DEAD_LETTER", "zombie"], ["RETRYING", "zombie"]]);
  assert.ok(helpers.logs.some((l) => /reaped \d+ zombie job/.test(l)));

  // The task files' default exports have Graphile Worker's shape: (payload, helpers) => Promise.
  const again = await staleRunningJob(3, 1);
  const task = (await import("@cortex-buffer/client/tasks/reap_zombies.js")).default as GraphileTask<unknown>;
  const h2 = fakeHelpers();
  await task({}, h2);
  assert.ok(h2.jobs.some((j) => (j.payload as { jobId: string }).jobId === again));
});

test("the cleanup: one dry-run call, its actions logged and summed", async () => {
  const helpers = fakeHelpers();
  // A dry run (this database shares its sessions directory with others: never delete in a test).
  const summary = await cleanupSessionBuffers(helpers, { dryRun: true, maxUnknownRatio: 1 });
  assert.equal(summary.calls, 1);
  assert.ok(helpers.logs.some((l) => l.startsWith("info: cleanup call 1 (dry run):")));
  for (const [action, v] of Object.entries(summary.actions)) {
    assert.ok(["delete_dir", "delete_file", "delete_rows", "drop_partition", "keep", "error"].includes(action), action);
    assert.ok(v.actions > 0);
  }
  const task = (await import("@cortex-buffer/client/tasks/cleanup_session_buffers.js")).default as GraphileTask<unknown>;
  const h2 = fakeHelpers();
  await task({ dryRun: true, maxUnknownRatio: 1 }, h2);
  assert.equal(h2.logs.filter((l) => l.includes("cleanup call")).length, 1);
});

test("dispatchWithToken admits, mints the token, registers the source, launches and enqueues without secrets", async () => {
  const agentId = randomUUID();
  const jobId = await createJob(admin, { agentId });
  const helpers = fakeHelpers();
  const launched: unknown[] = [];
  const source = `pod-${jobId.slice(0, 8)}`;
  const r = await dispatchWithToken({ jobId, startAttempt: true, pushSource: source }, helpers, {
    launchPod: async (env) => void launched.push(env),
    enqueue: "run_agent_pod",
  });
  assert.equal(r.admitted, true);
  if (!r.admitted) return;
  assert.deepEqual(launched, [r.env]);
  assert.equal(r.env.attempt, 1);
  assert.equal(helpers.jobs.length, 1);
  const job = helpers.jobs[0];
  assert.deepEqual(job?.payload, { jobId, attempt: 1, pushSource: source });
  assert.ok(!JSON.stringify(job).includes(r.env.jobToken) && !JSON.stringify(job).includes(r.env.pushSource?.token ?? "#"), "no secret in the payload");
  // The launcher mints the same env again from the payload.
  assert.deepEqual(await mintPodEnv(admin, { jobId, expectAttempt: 1, pushSource: source }), r.env);

  // An open breaker: nothing issued, the dispatch is enqueued again for later.
  const a2 = randomUUID();
  await admin.query("INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ($1, 1)", [a2]);
  const j1 = await createJob(admin, { agentId: a2 });
  await makeDispatchTask()({ jobId: j1, startAttempt: true }, fakeHelpers());
  await admin.query("SELECT * FROM cortex_buffer.record_outcome($1, $2, false)", [a2, j1]);
  const j2 = await createJob(admin, { agentId: a2 });
  const h2 = fakeHelpers();
  const refused = await dispatchWithToken({ jobId: j2, startAttempt: true }, h2, { retryAdmissionAfterMs: 5000 });
  assert.equal(refused.admitted, false);
  assert.equal(h2.jobs[0]?.identifier, "dispatch_with_token");
  assert.ok(h2.logs.some((l) => l.startsWith("warn:")));
  await admin.query("SELECT cortex_buffer.drop_push_source($1)", [source]);
});
