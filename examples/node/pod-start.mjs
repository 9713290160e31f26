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
// CORTEX_FIRST_ATTEMPT=1 says this is the job's first pod (nothing can have run before it).
// Prints one line per decision:
//   skip <tool> <key> <result> | run <tool> <key>
//   verify <tool> <key> <why> [by_content] [<another key of this call>...] [maybe:<key>...]
// then `unmatched <list> <tool> <key>` for any plan entry none of the planned calls matched (a
// call the agent no longer makes: look at it), and exits 2 when the job must fail.
import { readFileSync } from "node:fs";

import pg from "pg";

import { Decider } from "./decide.mjs";

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

// One decision per planned call, in order (decide.mjs has the rules). The keys are named by
// the checkpoint the plan resumes from (plan.checkpoint.ref) and each call's rank among the
// calls with the same tool and input since it.
const decider = new Decider(plan, { firstAttempt: process.env.CORTEX_FIRST_ATTEMPT === "1" });
for (const call of planned) {
  const d = decider.decide(call.tool, call.input);
  if (d.action === "skip") console.log(`skip ${call.tool} ${d.key} ${d.result ?? ""}`);
  else if (d.action === "run") console.log(`run ${call.tool} ${d.key}`);
  else {
    const also = [...d.keys.filter((k) => k !== d.key), ...d.maybe.map((k) => `maybe:${k}`)];
    console.log(`verify ${call.tool} ${d.key} ${d.why}${d.byContent ? " by_content" : ""}${also.length ? ` ${also.join(" ")}` : ""}`);
  }
}
for (const e of decider.unmatched()) {
  const list = plan.completed.includes(e) ? "completed" : plan.in_flight.includes(e) ? "in_flight" : "verify";
  console.log(`unmatched ${list} ${e.tool_name} ${e.idempotency_key ?? "-"}`);
}
await client.end();
