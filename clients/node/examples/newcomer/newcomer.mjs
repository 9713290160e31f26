// A newcomer's tour of @cortex-buffer/client (scripts/newcomer.sh): dispatch a job with its token,
// kill its pod mid-call, resume in the next pod. Env: PG* (the control plane; the database has the
// extension), CORTEX_SESSIONS_DIR, and optionally CORTEX_SESSIONS_OWNER (uid:gid), CORTEX_AGENT_USER.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import pg from "pg";
import { Pod, SessionWriter, createJob, dispatch } from "@cortex-buffer/client";

const agent = process.env.CORTEX_AGENT_USER ?? "cortex_client_agent";
const [uid, gid] = (process.env.CORTEX_SESSIONS_OWNER ?? "").split(":").map(Number);
const owner = uid >= 0 && gid >= 0 ? { uid, gid } : undefined;
const dir = process.env.CORTEX_SESSIONS_DIR;
const controlPlane = new pg.Pool();
await controlPlane.query(`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${agent}')
  THEN CREATE ROLE "${agent}" LOGIN; END IF; END $$; GRANT cortex_buffer_agent TO "${agent}"`);
const jobId = await createJob(controlPlane, { agentId: randomUUID() });

const provider = new Map(); // the outside world: idempotency key -> what happened
const effects = []; // every side effect that really happened
const tool = (name) => async (key) => (effects.push(name), provider.set(key, `${name} done`), `${name} done`);
const verify = async (d) => { // proof only: a key of this very call (d.maybe: ask about the call itself)
  const key = d.keys.find((k) => provider.has(k));
  return key ? { ran: true, result: provider.get(key) } : { ran: false };
};
async function startPod() {
  const { env } = await dispatch(controlPlane, { jobId, startAttempt: true }); // admit, attempt + 1, token
  const pool = new pg.Pool({ user: agent });
  const pod = new Pod(pool, { jobId, token: env.jobToken }); // token per transaction: pooler-safe
  await pod.authorize();
  const plan = await pod.recoveryPlan(); // before the pod writes a line of its own
  const writer = SessionWriter.open({ dir, jobId, owner });
  writer.sessionStart();
  writer.checkpointLoaded(plan.checkpoint);
  return { pool, pod, plan, writer, resumer: pod.resume(plan, { firstAttempt: env.attempt === 1, writer }) };
}
// Pod 1: step 0 searches and checkpoints; step 1 emails, then starts a charge and is killed.
const p1 = await startPod();
await p1.resumer.call("search", { q: "INV-118" }, { run: tool("search") });
await p1.pod.checkpoint({ step_index: 0, state: { invoice: "INV-118" } }, { writer: p1.writer, resumer: p1.resumer });
await p1.resumer.call("send_email", { to: "ops" }, { run: tool("send_email") });
let chargeKey;
p1.resumer.call("charge", { usd: 42 }, { run: (key) => (tool("charge")((chargeKey = key)), new Promise(() => {})) });
p1.writer.close(); // killed: its TOOL_START is written, its TOOL_RESULT never will be
await p1.pool.end(); // and its connections are gone
// Pod 2: dispatched again, resumes at step 1.
const p2 = await startPod();
assert.equal(p2.plan.checkpoint.resume_step, 1);
const email = await p2.resumer.call("send_email", { to: "ops" }, { run: tool("send_email"), verify });
assert.equal(email.action, "skip", "the finished call is skipped");
const charge = await p2.resumer.call("charge", { usd: 42 }, { run: tool("charge"), verify });
assert.equal(charge.action, "verified", "the open call is verified...");
assert.ok(charge.decision.keys.includes(chargeKey), "...with the key the dead pod sent");
await p2.resumer.call("send_receipt", { usd: 42 }, { run: tool("send_receipt"), verify });
assert.deepEqual(effects, ["search", "send_email", "charge", "send_receipt"], "nothing ran twice");
console.log(`ok: job ${jobId}: email ${email.action}, charge ${charge.action} by key ${chargeKey.slice(0, 12)}…, effects ${effects.join(", ")}`);
p2.writer.close();
await p2.pool.end();
await controlPlane.end();
rmSync(`${dir}/${jobId}`, { recursive: true, force: true });
