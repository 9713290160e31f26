/**
 * What a pod does with each tool call it is about to make again after a crash, from its
 * recovery plan (docs/agent.md): skip it, run it, or verify it first. A typed port of
 * `examples/node/decide.mjs`, with the same rules and the same keys.
 *
 * The pod walks its replay from the checkpoint the plan resumes from and asks
 * {@link Resumer.decide} for each call in order, every call, whatever it decides; when it
 * stores a checkpoint itself it says so with {@link Resumer.stored}: its next calls are keyed
 * under that checkpoint.
 *
 * - **skip**: the plan holds this very call (same tool, same input, same place in the replay)
 *   finished: reuse `result`, run nothing.
 * - **run**: nothing says it ran: run it, sending `key` as its idempotency key.
 * - **verify**: it may have run. Ask the external system before running it: by each of `keys`
 *   (this call's own keys: its writer's, and the one this pod would send; any found means it
 *   ran); when `byContent`, or when any of `maybe` is found (keys of some attempt that may be
 *   this call or another one with the same tool and input), ask about the call itself (its
 *   content, its effect), since a key alone cannot tell; then run it with `key` if it did not run.
 *
 * The rules never guess: a call the plan cannot place or name is verified, never skipped.
 *
 * **`checkpoint_only` plans** read nothing after the checkpoint: every call is verified by
 * content (`why` is the plan's `reason`), except on the job's very first attempt with no
 * checkpoint (`firstAttempt` and `action = first_run`), where nothing can have run.
 *
 * **Stale plans** (`fresh.stale`): the plan could not bring the job's files up to date, so its
 * lists may miss calls. The docs say: ask again, and if it stays stale, verify.
 * {@link Pod.recoveryPlan} asks again a few times by itself. What a Resumer does with a plan that
 * is still stale is the `onStale` option: `'verify'` (the default) treats it as
 * `checkpoint_only`, every call verified by content (`why: 'stale_plan'`), its lists never used
 * to skip; `'throw'` makes the constructor throw {@link StalePlanError}, for a pod that would
 * rather wait (for a shipper's confirmation, say) than ask every external system.
 *
 * @module
 */
import { CheckpointCorruptError, StalePlanError } from "./errors.js";
import { callKey, inputHash } from "./keys.js";
import type { CompletedCall, PlanEntry, RecoveryPlan, VerifyReason, CheckpointOnlyReason } from "./plan.js";
import { planEntries } from "./plan.js";
import type { SessionWriter, ToolCallHandle } from "./session-writer.js";

/** Why a call is verified. */
export type VerifyWhy =
  | VerifyReason
  | CheckpointOnlyReason
  | "in_flight"
  | "unplaced"
  | "stale_plan"
  | (string & {});

/** Skip: the plan holds this call finished. */
export interface SkipDecision {
  action: "skip";
  /** The key its writer sent (the pod's own when the plan names none). */
  key: string;
  /** The plan's `result`: text (JSON text for a non-string output), cut at `recovery_value_bytes`. */
  result: string | null;
  entry: CompletedCall;
}

/** Run: nothing says it ran. Send `key` as its idempotency key. */
export interface RunDecision {
  action: "run";
  key: string;
}

/** Verify: it may have run. Ask before running it (with `key`) again. */
export interface VerifyDecision {
  action: "verify";
  /** The key this pod sends if it runs the call. */
  key: string;
  /** This call's own keys (its writer's and this pod's): any found means it ran. */
  keys: string[];
  /** Keys of attempts that may be this call or another with the same tool and input. */
  maybe: string[];
  /** Ask by the call's content too: a key alone cannot tell. */
  byContent: boolean;
  why: VerifyWhy;
  /** The plan entries that may be this call (at its place in the replay, or unplaced). */
  entries: PlanEntry[];
}

export type Decision = SkipDecision | RunDecision | VerifyDecision;

export interface ResumeOptions {
  /**
   * This is the job's first pod (its first attempt, `PodEnv.attempt === 1`, Graphile Worker's
   * `attempts === 1`): nothing ran before it.
   */
  firstAttempt?: boolean;
  /**
   * Verify every call that may have run by its content too (a job whose pods ran before an update
   * that changed the keys' formula: UPDATING.md).
   */
  byContent?: boolean;
  /** What a stale plan gives: decisions that verify every call (default), or a {@link StalePlanError}. */
  onStale?: "verify" | "throw";
  /** A session writer: {@link Resumer.call} logs the calls it runs in it. */
  writer?: SessionWriter;
}

/**
 * What the external system says about a call to verify. Say `ran: true` only when it is proven:
 * one of `decision.keys` was found, or (when `decision.byContent`, or one of `decision.maybe`
 * was found: that key may be another call's with the same tool and input) the call's own
 * content or effect was. A `maybe` key alone is not proof: the call is then settled in the
 * session file and every later pod skips it.
 */
export type VerifyOutcome = { ran: true; result?: unknown } | { ran: false };

export interface CallHandlers<T> {
  /** Makes the call, sending `key` as its idempotency key. */
  run: (key: string) => Promise<T>;
  /**
   * Asks the external system whether the call happened (by `decision.keys`, `decision.maybe`,
   * and by content when `decision.byContent`). Required when the plan may hold the call: without
   * it a verify decision throws.
   */
  verify?: (decision: VerifyDecision) => Promise<VerifyOutcome>;
  /**
   * Whether an error `run` threw proves the call had no effect (a validation error the system
   * returned, say). Then a failed result is written and the next plan skips the call, replaying
   * the failure; otherwise (the default: a timeout, a reset connection) nothing is written, the
   * call stays open, and the next pod verifies it.
   */
  definiteFailure?: (error: unknown) => boolean;
}

export type CallOutcome<T> =
  | { action: "skip"; key: string; result: string | null; success: boolean | null; resultTruncated: boolean }
  | { action: "run"; key: string; result: T; verified?: VerifyDecision }
  | { action: "verified"; key: string; result: unknown; decision: VerifyDecision };

/**
 * One per pod: decides each call of its replay in order. See the module's documentation for
 * the rules, `checkpoint_only` and stale plans.
 */
export class Resumer {
  readonly plan: RecoveryPlan;
  readonly jobId: string;
  readonly firstAttempt: boolean;
  private readonly forceContent: boolean;
  private readonly readBuffer: boolean;
  private readonly writer: SessionWriter | undefined;
  private keyRef: string;
  /** Calls so far per tool and input: in the replay from the plan's checkpoint (replay_ordinal). */
  private readonly inPlan = new Map<string, number>();
  /** ... and since the checkpoint this pod keys under (call_ordinal). */
  private readonly inKey = new Map<string, number>();
  private readonly entries: PlanEntry[];

  /**
   * @throws {CheckpointCorruptError} for a `fail_job` plan: do not resume.
   * @throws {StalePlanError} for a stale plan with `onStale: 'throw'`.
   */
  constructor(plan: RecoveryPlan, { firstAttempt = false, byContent = false, onStale = "verify", writer }: ResumeOptions = {}) {
    if (plan.action === "fail_job") {
      throw new CheckpointCorruptError(`recovery_plan: fail_job: ${plan.checkpoint.detail ?? plan.detail ?? "no checkpoint passes its CRC"}`, {
        operation: "recovery_plan",
        detail: plan.checkpoint.detail ?? undefined,
      });
    }
    if (plan.fresh?.stale && onStale === "throw") throw new StalePlanError(plan.fresh.reason, plan.fresh.detail, plan);
    this.plan = plan;
    this.jobId = plan.job_id;
    this.firstAttempt = firstAttempt;
    this.forceContent = byContent;
    this.writer = writer;
    this.keyRef = plan.checkpoint?.ref ?? "-";
    this.readBuffer = plan.mode === "buffer" && !plan.fresh?.stale;
    this.entries = plan.mode === "buffer" ? planEntries(plan) : [];
  }

  /** The checkpoint reference this pod's keys are named by now (`crc:<n>` or `-`). */
  get keyCheckpointRef(): string {
    return this.keyRef;
  }

  /** The pod stored a checkpoint itself (`write_checkpoint`): `ref` is `crc:` + its CRC. */
  stored(ref: string): void {
    this.keyRef = ref;
    this.inKey.clear();
  }

  /** The decision for the pod's next call of its replay. Call it for every call, in order. */
  decide(tool: string, input: unknown): Decision {
    const hash = inputHash(input);
    const id = `${tool}\n${hash}`;
    const ordinalPlan = bump(this.inPlan, id);
    const ordinalKey = bump(this.inKey, id);
    const key = callKey(this.jobId, this.keyRef, ordinalKey, tool, hash);
    if (!this.readBuffer) {
      // The job's first attempt, with no checkpoint: nothing can have run, unless the plan is
      // stale (the server could not see the files: a restarted container of the same attempt
      // may have written some).
      if (this.firstAttempt && this.plan.action === "first_run" && !this.plan.fresh?.stale) return { action: "run", key };
      return { action: "verify", key, keys: [key], maybe: [], byContent: true, why: this.plan.fresh?.stale ? "stale_plan" : this.plan.reason, entries: [] };
    }
    const same = (e: PlanEntry): boolean => e.tool_name === tool && e.input_hash === hash;
    const exact = this.entries.filter((e) => same(e) && e.replay_ordinal === ordinalPlan);
    const done = exact.find((e): e is PlanEntry & { list: "completed" } => e.list === "completed");
    if (done) return { action: "skip", key: done.idempotency_key ?? key, result: done.result, entry: done };

    const keys = new Set<string>([key]);
    const maybe = new Set<string>();
    const candidates: PlanEntry[] = [...exact];
    let byContent = false;
    let mayHaveRun = exact.length > 0;
    const first = exact[0];
    let why: VerifyWhy | undefined = first ? (first.list === "verify" ? first.reason : "in_flight") : undefined;
    for (const e of exact) {
      // A key the pod wrote that the formula does not give (call_ordinal NULL): the plan cannot
      // vouch it is this call's own, so finding it proves nothing by itself.
      if (e.idempotency_key && e.key_status === "written" && e.call_ordinal == null) maybe.add(e.idempotency_key);
      else if (e.idempotency_key) keys.add(e.idempotency_key);
      else if (e.key_candidates.length === 0) byContent = true;
      else for (const c of e.key_candidates) maybe.add(c.idempotency_key);
    }
    // Attempts the plan could not place in the replay: any of them may be this call.
    for (const e of this.entries.filter((e) => same(e) && e.replay_ordinal == null)) {
      const reason = e.list === "verify" ? e.reason : undefined;
      const before = maybe.size;
      if (e.key_candidates.length === 0) {
        candidates.push(e);
        mayHaveRun = true;
        byContent = true;
        why ??= reason ?? "unplaced";
        if (e.idempotency_key) maybe.add(e.idempotency_key); // a key it was sent with, place unknown
      }
      for (const c of e.key_candidates) {
        if (c.replay_ordinal == null || c.replay_ordinal === ordinalPlan) {
          mayHaveRun = true;
          maybe.add(c.idempotency_key);
          why ??= reason ?? "key_ambiguous";
        }
      }
      if (maybe.size > before && !candidates.includes(e)) candidates.push(e);
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
    return { action: "verify", key, keys: [...keys], maybe: [...maybe], byContent: byContent || this.forceContent, why: why ?? "in_flight", entries: candidates };
  }

  /** Plan entries none of the pod's calls matched so far: calls the agent no longer makes (look at them). */
  unmatched(): PlanEntry[] {
    return this.entries.filter((e) => {
      const n = this.inPlan.get(`${e.tool_name}\n${e.input_hash}`) ?? 0;
      return e.replay_ordinal != null && e.replay_ordinal > n;
    });
  }

  /**
   * Decides the call and acts on the decision: a skip returns the plan's result; a verify asks
   * `handlers.verify`, and runs the call only if it did not happen; a run runs it. Every call it
   * runs is logged in the session writer given to the constructor (TOOL_START with the call's
   * key before, TOOL_RESULT after), so that the next pod's plan knows it; so is a call verified
   * as done (with the result the external system gave), so that the next plan knows this pod
   * got past it. Skipped calls are not logged: the plan holds them already.
   */
  async call<T>(tool: string, input: unknown, handlers: CallHandlers<T>): Promise<CallOutcome<T>> {
    const d = this.decide(tool, input);
    if (d.action === "skip") {
      return { action: "skip", key: d.key, result: d.result, success: d.entry.success ?? null, resultTruncated: d.entry.result_truncated ?? false };
    }
    let verified: VerifyDecision | undefined;
    if (d.action === "verify") {
      if (!handlers.verify) throw new TypeError(`${tool}: the plan says this call may have run (${d.why}); pass a verify handler`);
      const outcome = await handlers.verify(d);
      if (outcome.ran) {
        this.settle(tool, input, d, outcome.result);
        return { action: "verified", key: d.key, result: outcome.result, decision: d };
      }
      verified = d;
    }
    const handle: ToolCallHandle | undefined = this.writer?.toolStart(tool, input, { idempotencyKey: d.key });
    let result: T;
    try {
      result = await handlers.run(d.key);
    } catch (e) {
      // A failure is written only when it proves the call had no effect: a result means
      // "finished" to recovery, and the next plan would skip the call.
      if (handle && handlers.definiteFailure?.(e)) {
        this.writer?.toolResult(handle, { success: false, result: e instanceof Error ? e.message : String(e) });
      }
      throw e;
    }
    if (handle) this.writer?.toolResult(handle, { success: true, result });
    return verified ? { action: "run", key: d.key, result, verified } : { action: "run", key: d.key, result };
  }

  /**
   * Records in the session file that a call verified as done is settled, with what the external
   * system said, so that the next plan knows it: when the plan names the one open call it is by
   * id, a TOOL_RESULT with that id (ids pair across writers: the predecessor's call is then
   * finished); otherwise a TOOL_START and TOOL_RESULT of this pod's own.
   */
  private settle(tool: string, input: unknown, d: VerifyDecision, result: unknown): void {
    if (!this.writer) return;
    const open = d.entries.filter((e) => e.key_source === "id" && (e.list === "in_flight" || (e.list === "verify" && e.results.length === 0)));
    if (open.length === 1 && d.entries.length === 1 && open[0]) {
      this.writer.toolResult({ callId: open[0].key, tool }, { success: true, result: result ?? null });
      return;
    }
    const h = this.writer.toolStart(tool, input, { idempotencyKey: d.key });
    this.writer.toolResult(h, { success: true, result: result ?? null });
  }
}

/** Builds the {@link Resumer} of a plan: `resume(plan, { firstAttempt: env.attempt === 1 })`. */
export function resume(plan: RecoveryPlan, options: ResumeOptions = {}): Resumer {
  return new Resumer(plan, options);
}

function bump(map: Map<string, number>, id: string): number {
  const n = (map.get(id) ?? 0) + 1;
  map.set(id, n);
  return n;
}
