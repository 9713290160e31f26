// One pod of the recovery kill loop (pgrx-tests/tests/recovery_kills.rs): a job's step of tool
// calls, run the way the control plane's pod runs it, and killed at any moment.
//
//   node pod.mjs <sessionsDir> <jobId> <agentId> <workDir> <scriptSeed> <calls> <firstAttempt 0|1>
//
// - It asks recovery_plan with its job's token (CORTEX_JOB_TOKEN), as an agent login, and
//   resumes from the plan's checkpoint: its state says how many calls are done.
// - It writes its session file with the control plane's own writer (writer.mjs: BufferWriter,
//   writeEventToBuffer), its first line a text line (a line its predecessor's crash cut
//   swallows the next line's start). Lines of 64 KiB and more are appended in 16 KiB parts, a
//   millisecond apart: a slow volume, where a kill tears them.
// - Each call is decided by examples/node/decide.mjs: skip, run, or verify against the ledger
//   (<workDir>/ledger.jsonl), the external system: an effect per key, executed once per key
//   (the system dedupes by idempotency key). Verify asks by the call's own keys; by content
//   (here: which call an effect was) when the decision says so or a maybe-key was executed.
// - It reports its progress (calls done) to the control plane (table public.pod_progress) under
//   an advisory lock held from its result line to the report: the control plane
//   (control_plane.mjs) stores a checkpoint only under the same lock, so a checkpoint covers
//   exactly what finished before it.
// - Now and then it stores its own checkpoint (write_checkpoint) between calls.
//
// Exit 0: the step is done. Exit 5: a key named another call (the plan misnamed a call).
import { appendFileSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

import { Decider } from "../../examples/node/decide.mjs";
import { BufferWriter } from "./writer.mjs";

const require = createRequire(new URL("../../examples/node/package.json", import.meta.url));
const pg = require("pg");

const [sessionsDir, job, agent, workDir, seedText, callsText, firstText] = process.argv.slice(2);
const CHUNK = 16 * 1024;
const BIG = Number(process.env.CORTEX_KILL_BIG_BYTES ?? 512 * 1024);

// The step's calls, the same for every pod of the job: repeats of one tool and input are
// common (what the ordinals must count), and a quarter carry 64 KiB or more.
function mulberry(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const script = mulberry(Number(seedText));
const below = (r, n) => Math.floor(r() * n);
const TOOLS = ["read_file", "send_email", "charge_card"];
const calls = [];
for (let i = 0; i < Number(callsText); i++) {
  const tool = TOOLS[below(script, TOOLS.length)];
  const input = { n: below(script, 2) };
  if (below(script, 4) === 0) input.pad = "p".repeat(65536 + below(script, Math.max(1, BIG - 65536)));
  calls.push({ tool, input, bigResult: tool === "read_file" && below(script, 3) === 0 });
}

const nap = new Int32Array(new SharedArrayBuffer(4));
const sleep = (ms) => Atomics.wait(nap, 0, 0, ms);

function append(file, line) {
  const bytes = Buffer.from(line);
  if (bytes.length < 65536) {
    appendFileSync(file, bytes);
    return;
  }
  for (let at = 0; at < bytes.length; at += CHUNK) {
    appendFileSync(file, bytes.subarray(at, at + CHUNK));
    sleep(1);
  }
}

// The ledger: one line per effect, fsynced before the pod goes on.
const ledgerPath = join(workDir, "ledger.jsonl");
const executed = new Map();
if (existsSync(ledgerPath)) {
  for (const line of readFileSync(ledgerPath, "utf8").split("\n")) {
    if (!line) continue;
    try {
      const e = JSON.parse(line);
      if (!executed.has(e.key)) executed.set(e.key, e.call);
    } catch {
      // A line the kill cut: that effect did not happen.
    }
  }
}
function execute(key, call) {
  if (executed.has(key)) return;
  const fd = openSync(ledgerPath, "a");
  writeSync(fd, JSON.stringify({ key, call }) + "\n");
  fsyncSync(fd);
  closeSync(fd);
  executed.set(key, call);
}
const log = (o) => appendFileSync(join(workDir, "decisions.jsonl"), JSON.stringify({ pid: process.pid, ...o }) + "\n");

const client = new pg.Client();
await client.connect();
await client.query("SELECT pg_catalog.set_config('cortex_buffer.job_token', $1, false)", [process.env.CORTEX_JOB_TOKEN]);
let plan;
for (let attempt = 1; ; attempt++) {
  const { rows } = await client.query("SELECT cortex_buffer.recovery_plan($1) AS p", [job]);
  plan = rows[0].p;
  if (!plan.fresh.stale || attempt === 10) break;
  sleep(50 * attempt);
}
if (plan.action === "fail_job") {
  console.error(`fail_job: ${plan.checkpoint.detail}`);
  process.exit(3);
}
log({ plan: { mode: plan.mode, reason: plan.reason, ref: plan.checkpoint.ref, stale: plan.fresh.stale } });
const done = plan.checkpoint?.step_index ?? 0;
const decider = new Decider(plan, { firstAttempt: firstText === "1" });
const writer = new BufferWriter(sessionsDir, job, agent, `pod-${process.pid}`, 0);
append(writer.file, writer.line("LLM_RESPONSE", { type: "text", content: `resuming at ${done}` }));

async function report(n) {
  await client.query("UPDATE public.pod_progress SET done = GREATEST(done, $2) WHERE job = $1", [job, n]);
}
const LOCK = "SELECT pg_catalog.pg_advisory_lock(36, pg_catalog.hashtext($1))";
const UNLOCK = "SELECT pg_catalog.pg_advisory_unlock(36, pg_catalog.hashtext($1))";

for (let i = done; i < calls.length; i++) {
  const c = calls[i];
  if (i > done && Math.random() < 0.1) {
    // The pod stores its own checkpoint: everything before call i is done.
    try {
      const doc = { step_index: i, state: { done: i } };
      const { rows } = await client.query("SELECT crc FROM cortex_buffer.write_checkpoint($1, $2::jsonb)", [job, doc]);
      decider.stored(`crc:${rows[0].crc}`);
      log({ i, stored: rows[0].crc });
    } catch (e) {
      // The control plane stored a later step already (the fence): nothing was stored.
      log({ i, store_refused: e.code });
    }
  }
  const d = decider.decide(c.tool, c.input);
  log({ i, action: d.action, key: d.key, keys: d.keys, maybe: d.maybe, byContent: d.byContent, why: d.why });
  let run = d.action === "run";
  if (d.action === "verify") {
    const wrong = d.keys.filter((k) => executed.has(k) && executed.get(k) !== i);
    if (wrong.length > 0) {
      console.error(`call ${i}: key ${wrong[0]} is call ${executed.get(wrong[0])}'s`);
      process.exit(5);
    }
    const byKey = d.keys.some((k) => executed.has(k));
    const ask = d.byContent || d.maybe.some((k) => executed.has(k));
    run = !(byKey || (ask && [...executed.values()].includes(i)));
  }
  if (run) {
    append(writer.file, writer.line("TOOL_CALL", { type: "tool_use", toolName: c.tool, toolInput: c.input }));
    sleep(Math.floor(Math.random() * 15));
    execute(d.key, i);
    sleep(Math.floor(Math.random() * 15));
  }
  await client.query(LOCK, [job]);
  if (run) {
    const output = c.bigResult ? "r".repeat(65536 + Math.floor(Math.random() * 65536)) : `ok ${i}`;
    append(writer.file, writer.line("TOOL_RESULT", { type: "tool_result", toolName: c.tool, output, isError: false }));
  }
  await report(i + 1);
  await client.query(UNLOCK, [job]);
}
await client.end();
console.log("done");
