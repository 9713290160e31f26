// What an agent pod does at start with cortex_buffer (docs/agent.md), as a runnable program:
// one recovery_plan call, then, for each tool call the agent is about to make again from the
// checkpoint, whether to skip it (it finished: reuse its result), verify it (it may have run:
// ask the external system with its idempotency key before repeating it) or run it.
//
//   node pod-start.mjs <job id> <planned calls>.json
//
// The planned calls are the ones the agent's next steps make, in order, from the checkpoint it
// resumes from: [{"tool": "send_email", "input": {...}}, ...]. The connection comes from the
// usual PG* environment variables; a pod logging in with the agent role presents its job's
// token (issued by the control plane with cortex_buffer.job_token(job_id)) from CORTEX_JOB_TOKEN.
// Prints one line per decision:
//   skip <tool> <key> <result> | verify <tool> <key> <why> | run <tool> <key>
// then `unmatched <list> <tool> <key>` for any plan entry none of the planned calls matched (a
// call the agent no longer makes: look at it), and exits 2 when the job must fail.
import { readFileSync } from "node:fs";

import pg from "pg";

import { callIdempotencyKey } from "./keys.mjs";

const [job, plannedFile] = process.argv.slice(2);
if (!job || !plannedFile) {
  console.error("usage: node pod-start.mjs <job id> <planned calls>.json");
  process.exit(64);
}
const planned = JSON.parse(readFileSync(plannedFile, "utf8"));
const client = new pg.Client();
await client.connect();
// The job token, once per session, as a parameter: a literal SET would show it in
// pg_stat_activity. Control-plane and operator logins need none.
if (process.env.CORTEX_JOB_TOKEN) {
  await client.query("SELECT pg_catalog.set_config('cortex_buffer.job_token', $1, false)", [process.env.CORTEX_JOB_TOKEN]);
}

// The plan: fresh.stale means the index could not be brought up to date (a file held by
// another indexer, a read-only standby): ask again rather than act on less than the files say.
let plan;
for (let attempt = 1; ; attempt++) {
  const { rows } = await client.query("SELECT cortex_buffer.recovery_plan($1) AS p", [job]);
  plan = rows[0].p;
  if (!plan.fresh.stale || attempt === 5) break;
  await new Promise((r) => setTimeout(r, 200 * attempt));
}
if (plan.action === "fail_job") {
  console.log(`fail ${plan.checkpoint.detail}`);
  await client.end();
  process.exit(2);
}
if (plan.fresh.stale) console.log(`stale ${plan.fresh.detail}: every call below is verified`);

// The checkpoint the pod resumes from: its keys name it by its CRC.
const { rows } = await client.query("SELECT doc FROM cortex_buffer.read_checkpoint($1)", [job]);
const checkpoint = rows[0]?.doc ?? null;

const byKey = (entries) => new Map(entries.filter((e) => e.idempotency_key).map((e) => [e.idempotency_key, e]));
const completed = byKey(plan.completed);
const toVerify = byKey([...plan.in_flight, ...plan.verify]);
// A result whose start line was lost has no key: any call of its tool is verified.
const startLost = new Set(plan.verify.filter((e) => !e.idempotency_key).map((e) => e.tool_name));
const used = new Set();

planned.forEach((call, i) => {
  const key = callIdempotencyKey(job, checkpoint, i + 1, call.tool, call.input);
  used.add(key);
  if (plan.fresh.stale) {
    console.log(`verify ${call.tool} ${key} stale_plan`);
  } else if (completed.has(key)) {
    console.log(`skip ${call.tool} ${key} ${completed.get(key).result ?? ""}`);
  } else if (toVerify.has(key)) {
    const e = toVerify.get(key);
    console.log(`verify ${call.tool} ${key} ${e.reason ?? (e.writer_crashed ? "writer_crashed" : "in_flight")}`);
  } else if (startLost.has(call.tool)) {
    console.log(`verify ${call.tool} ${key} start_lost`);
  } else {
    console.log(`run ${call.tool} ${key}`);
  }
});
for (const [list, entries] of [["completed", plan.completed], ["in_flight", plan.in_flight], ["verify", plan.verify]]) {
  for (const e of entries) {
    if (e.idempotency_key && !used.has(e.idempotency_key)) console.log(`unmatched ${list} ${e.tool_name} ${e.idempotency_key}`);
  }
}
await client.end();
