// What a pod does with each tool call it is about to make again after a crash, from its
// recovery_plan (docs/agent.md): skip it, run it, or verify it first. The pod walks its replay
// from the checkpoint the plan resumes from and asks `decide(tool, input)` for each call in
// order, every call, whatever it decides; when it stores a checkpoint itself it says so with
// `stored(ref)`: its next calls are keyed under that checkpoint.
//
//   skip    the plan holds this very call (same tool, same input, same place in the replay)
//           finished: reuse `result`, run nothing.
//   run     nothing says it ran: run it, sending `key` as its idempotency key.
//   verify  it may have run. Ask the external system before running it:
//             - by each of `keys`: those are this call's own keys (its writer's, and the one
//               this pod would send); any found means it ran;
//             - when `byContent`, or when any of `maybe` is found (keys of some attempt that
//               may be this call or another one with the same tool and input): ask about the
//               call itself (its content, its effect), since a key alone cannot tell;
//           then run it with `key` if it did not run.
//
// The rules never guess: a call the plan cannot place or name is verified, never skipped; a
// plan that read nothing after the checkpoint (mode checkpoint_only, or a stale index)
// verifies every call by content, except on the job's very first attempt with no checkpoint,
// where nothing can have run.
import { callKey, inputHash } from "./keys.mjs";

export class Decider {
  // plan: recovery_plan's JSON. firstAttempt: this is the job's first pod (Graphile Worker's
  // attempts === 1): nothing ran before it. byContent: verify every call that may have run by
  // its content too (a job whose pods ran before an update that changed the keys' formula:
  // UPDATING.md).
  constructor(plan, { firstAttempt = false, byContent = false } = {}) {
    this.plan = plan;
    this.forceContent = byContent;
    this.job = plan.job_id;
    this.firstAttempt = firstAttempt;
    this.keyRef = plan.checkpoint?.ref ?? "-";
    this.readBuffer = plan.mode === "buffer" && !plan.fresh?.stale;
    // Calls so far, per tool and input: in the replay from the plan's checkpoint (the plan's
    // replay_ordinal), and since the checkpoint this pod keys under (its call_ordinal).
    this.inPlan = new Map();
    this.inKey = new Map();
    this.entries = plan.mode === "buffer" ? [...plan.completed, ...plan.in_flight, ...plan.verify] : [];
  }

  // The pod stored a checkpoint itself (write_checkpoint): ref is "crc:" + its CRC.
  stored(ref) {
    this.keyRef = ref;
    this.inKey.clear();
  }

  decide(tool, input) {
    const hash = inputHash(input);
    const id = `${tool}\n${hash}`;
    const ordinalPlan = bump(this.inPlan, id);
    const ordinalKey = bump(this.inKey, id);
    const key = callKey(this.job, this.keyRef, ordinalKey, tool, hash);
    if (!this.readBuffer) {
      if (this.firstAttempt && this.plan.action === "first_run") return { action: "run", key };
      return { action: "verify", key, keys: [key], maybe: [], byContent: true, why: this.plan.fresh?.stale ? "stale_plan" : this.plan.reason };
    }
    const same = (e) => e.tool_name === tool && e.input_hash === hash;
    const exact = this.entries.filter((e) => same(e) && e.replay_ordinal === ordinalPlan);
    const done = exact.find((e) => this.plan.completed.includes(e));
    if (done) return { action: "skip", key: done.idempotency_key ?? key, result: done.result, entry: done };

    const keys = new Set([key]);
    const maybe = new Set();
    let byContent = false;
    let mayHaveRun = exact.length > 0;
    let why = exact[0]?.reason ?? (exact.length ? "in_flight" : undefined);
    for (const e of exact) {
      if (e.idempotency_key) keys.add(e.idempotency_key);
      else if (e.key_candidates.length === 0) byContent = true;
      else for (const c of e.key_candidates) maybe.add(c.idempotency_key);
    }
    // Attempts the plan could not place in the replay: any of them may be this call.
    for (const e of this.entries.filter((e) => same(e) && e.replay_ordinal == null)) {
      if (e.key_candidates.length === 0) {
        mayHaveRun = true;
        byContent = true;
        why ??= e.reason ?? "unplaced";
      }
      for (const c of e.key_candidates) {
        if (c.replay_ordinal == null || c.replay_ordinal === ordinalPlan) {
          mayHaveRun = true;
          maybe.add(c.idempotency_key);
          why ??= e.reason ?? "key_ambiguous";
        }
      }
    }
    // A call of this tool (or of an unknown tool) whose input the index could not read may be
    // this one.
    if (this.entries.some((e) => e.input_hash == null && (e.tool_name == null || e.tool_name === tool))) {
      mayHaveRun = true;
      byContent = true;
      why ??= "input_unknown";
    }
    for (const k of keys) maybe.delete(k);
    if (!mayHaveRun) return { action: "run", key };
    return { action: "verify", key, keys: [...keys], maybe: [...maybe], byContent: byContent || this.forceContent, why };
  }

  // Plan entries none of the pod's calls matched so far: calls the agent no longer makes.
  unmatched() {
    return this.entries.filter((e) => {
      const n = this.inPlan.get(`${e.tool_name}\n${e.input_hash}`) ?? 0;
      return e.replay_ordinal != null && e.replay_ordinal > n;
    });
  }
}

function bump(map, id) {
  const n = (map.get(id) ?? 0) + 1;
  map.set(id, n);
  return n;
}
