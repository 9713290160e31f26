/**
 * The recovery plan (`recovery_plan(job_id)`, plan_version 3), typed: a discriminated union over
 * `action` (`first_run`, `resume`, `fail_job`) and `mode` (`buffer`, `checkpoint_only`), with the
 * entries of `completed`, `in_flight` and `verify` typed by list. The types follow docs/api.md
 * (Recovery plans, the table of keys) and the answers of a real 0.16.0 server; the test suite
 * checks every plan it gets against {@link checkPlan} in strict mode, so a key or an enumerated
 * value the types do not know fails a test.
 *
 * @module
 */
import type { CheckpointRef } from "./keys.js";

export type PlanAction = "first_run" | "resume" | "fail_job";
export type PlanMode = "buffer" | "checkpoint_only";

/** Why the plan could read the session buffer after the checkpoint. */
export type BufferReason =
  | "marker_matched"
  | "marker_unverified"
  | "high_water_mark"
  | "checkpoint_time"
  | "no_checkpoint"
  | "latest_file"
  | "transcript";

/** Why it could not: resume from the checkpoint alone and verify every side effect after it. */
export type CheckpointOnlyReason =
  | "checkpoint_invalid"
  | "no_session_files"
  | "file_gone"
  | "file_untrusted"
  | "quarantined"
  | "not_indexed"
  | "no_marker"
  | "marker_mismatch"
  | "marker_without_id"
  | "checkpoint_without_id"
  | "checkpoint_time_unknown"
  | "bytes_missing";

/** Why a call is in `verify`. Nothing in `verify` is safe to skip. */
export type VerifyReason =
  | "ambiguous_pairing"
  | "uncertain_time"
  | "started_before_anchor"
  | "finished_before_anchor"
  | "open_at_anchor"
  | "straddles_anchor"
  | "start_lost"
  | "input_unknown"
  | "key_ambiguous"
  | "key_unknown";

export type PlanNote =
  | "stale"
  | "chain_broken"
  | "tail_pending"
  | "index_behind"
  | "lost_events"
  | "payload_missing"
  | "writer_restarted"
  | "time_anchored"
  | "verify";

export type AnomalyKind =
  | "result_without_start"
  | "started_before_marker"
  | "duplicate_result"
  | "duplicate_start"
  | "seq_reset"
  | "chain_broken"
  | "payload_missing"
  | "ambiguous_pairing"
  | "file_replaced"
  | "file_renamed";

export type MarkerKind =
  | "checkpoint_written"
  | "checkpoint"
  | "high_water_mark"
  | "checkpoint_time"
  | "writer_start"
  | "file_start";

/** `fresh.reason` when stale. */
export type StaleReason = "remote_unconfirmed" | "unpushed_bytes" | "not_caught_up";

/**
 * `written`: the key the pod wrote in its TOOL_START line (servers after 0.16.0, docs/writing-sessions.md);
 * `derived`: one place, one key; `ambiguous`: see `key_candidates`; `unknown`: nothing gives it.
 */
export type KeyStatus = "written" | "derived" | "ambiguous" | "unknown";

/** Phase 1: the checkpoint, by `read_checkpoint`'s rules. */
export interface PlanCheckpointBase {
  /** The checkpoint's CRC as a key reference, `-` for none. */
  ref: CheckpointRef;
  written_at: string | null;
  detail: string | null;
}

/** A first run: the job has never been checkpointed. */
export interface NoCheckpoint extends PlanCheckpointBase {
  source: "none";
  checkpoint_id: null;
  step_index: null;
  resume_step: 0;
  crc_ok: null;
  ref: "-";
}

/** A checkpoint that verifies: the current one, or the newest history entry that does. */
export interface ValidCheckpoint extends PlanCheckpointBase {
  source: "current" | "history";
  /** NULL for a checkpoint the control plane stored without an id of its own. */
  checkpoint_id: string | null;
  step_index: number | null;
  /** `step_index + 1`: where the pod starts. */
  resume_step: number;
  crc_ok: boolean;
}

/** Checkpoints exist but none passes its CRC. */
export interface InvalidCheckpoint extends PlanCheckpointBase {
  source: "invalid";
  checkpoint_id: string | null;
  step_index: number | null;
  resume_step: number | null;
  crc_ok: boolean | null;
}

export type PlanCheckpoint = NoCheckpoint | ValidCheckpoint | InvalidCheckpoint;

export interface PlanFreshness {
  /** The job's files were brought up to date at call time. */
  caught_up: boolean;
  /** Ask again; if it stays stale, verify (docs/agent.md). */
  stale: boolean;
  reason: StaleReason | null;
  detail: string | null;
  /** Bytes of the plan's files the index does not hold. */
  unindexed_bytes: number;
}

export interface PlanMarker {
  kind: MarkerKind;
  checkpoint_id: string | null;
  session: string | null;
  byte_offset: number | null;
  line_no: number | null;
  seq: number | null;
  ts: string | null;
  /** `high_water_mark`: when the mark was recorded. */
  recorded_at?: string | null;
  /** `checkpoint_time`: the checkpoint's write time and the assumed clock skew. */
  checkpoint_written_at?: string | null;
  clock_skew_ms?: number | null;
}

export interface FileIntegrity {
  total_lines: number;
  valid_lines: number;
  corrupt_lines: number;
  corruption_ratio: number;
  /** `complete`, `pending`, `truncated`, … */
  tail_state: string;
  seq_gaps: number;
  seq_resets: number;
  foreign_job_lines: number;
  trusted: boolean;
}

/** What the plan knows of a pushed file's shipper. */
export interface PushedState {
  source: string;
  reported_size: number | null;
  reported_at: string | null;
  held_bytes: number;
  unpushed_bytes: number;
  confirmed_at: string | null;
}

export interface PlanSession {
  path: string;
  /** Relative to the job directory. */
  file: string;
  file_id: number;
  generation: number;
  session_ordinal: number | null;
  dialect: string | null;
  /** NULL: not read. */
  read_from: number | null;
  integrity: FileIntegrity;
  tail_pending: boolean;
  unindexed_bytes: number;
  gone: boolean;
  quarantined: boolean;
  /** Present for a pushed file. */
  pushed?: PushedState;
}

export interface KeyCandidate {
  replay_ordinal: number | null;
  call_ordinal: number | null;
  checkpoint_ref: string | null;
  idempotency_key: string;
}

/** The keys every entry carries (NULL where unknown, as for `start_lost`). */
export interface CallKeys {
  /** The call's id, or `<file>@<byte offset of its start>`. */
  key: string;
  key_source: "id" | "derived";
  tool_name: string | null;
  /** Its rank among its writer's calls of the tool. */
  tool_ordinal: number | null;
  /** SHA-256 of the input's canonical JSON as the writer wrote it; NULL when unreadable. */
  input_hash: string | null;
  /** Its rank among the calls with its tool and input in the replay from the plan's checkpoint. */
  replay_ordinal: number | null;
  call_ordinal: number | null;
  checkpoint_ref: string | null;
  /** The key its writer sent. */
  idempotency_key: string | null;
  key_status: KeyStatus;
  key_candidates: KeyCandidate[];
  started_at: string | null;
  start_session: string | null;
  start_offset: number | null;
}

/** A finished call after the checkpoint: skip it, using its result. */
export interface CompletedCall extends CallKeys {
  success: boolean | null;
  /** `result_summary`, the shipped `output` (JSON text when not a string), cut at `recovery_value_bytes`. */
  result: string | null;
  result_truncated: boolean;
  finished_at: string | null;
  result_session: string | null;
  result_offset: number | null;
  paired_by: "id" | "order";
}

/** A call started with no result: ask the external system by its key before repeating it. */
export interface InFlightCall extends CallKeys {
  /** The input as text (JSON), cut. */
  input: string | null;
  input_truncated: boolean;
  /** A later writer exists: this one died with the call open. */
  writer_crashed: boolean;
}

export interface VerifyResult {
  success: boolean | null;
  result: string | null;
  result_truncated: boolean;
  finished_at: string | null;
  result_session: string | null;
  result_offset: number | null;
}

/** A call the bytes cannot settle: treat like an in-flight call, with `results` as evidence. */
export interface VerifyCall extends CallKeys {
  input: string | null;
  input_truncated: boolean;
  reason: VerifyReason;
  writer_crashed: boolean;
  results: VerifyResult[];
}

export interface LostEvents {
  session: string;
  byte_offset: number | null;
  after_seq: number | null;
  next_seq: number | null;
  missing: number | null;
}

export interface Anomaly {
  kind: AnomalyKind;
  session: string | null;
  byte_offset: number | null;
  key: string | null;
  tool_name: string | null;
  detail: string | null;
}

export interface EventAfterMarker {
  seq: number | null;
  type: string | null;
  byte_offset: number;
  session: string;
}

export interface PlanClock {
  checkpoint_written_at: string;
  assumed_skew_ms: number;
  segments: Array<{
    segment: number;
    session: string;
    offset_ms_low: number | null;
    offset_ms_high: number | null;
    offset_from: "mtime" | "assumed";
  }>;
  uncertain: Array<{ session: string; from_offset: number; to_offset: number }>;
}

/** What every plan holds. */
export interface PlanCommon {
  plan_version: 3;
  job_id: string;
  expected_checkpoint_id: string | null;
  match_checkpoint: boolean;
  detail: string | null;
  fresh: PlanFreshness;
  marker: PlanMarker | null;
  sessions: PlanSession[];
  completed: CompletedCall[];
  in_flight: InFlightCall[];
  verify: VerifyCall[];
  lost_events: LostEvents[];
  anomalies: Anomaly[];
  events_after_marker: EventAfterMarker[];
  clock: PlanClock | null;
  notes: PlanNote[];
}

/** The session files after the checkpoint could be read: the lists apply. */
export interface BufferModePart {
  mode: "buffer";
  reason: BufferReason;
}

/**
 * They could not (`reason` says why): resume from the checkpoint alone and treat every side
 * effect after it as unknown. The lists are empty.
 */
export interface CheckpointOnlyModePart {
  mode: "checkpoint_only";
  reason: CheckpointOnlyReason;
  completed: [];
  in_flight: [];
  verify: [];
}

export interface FirstRunPart {
  action: "first_run";
  checkpoint: NoCheckpoint;
}

export interface ResumePart {
  action: "resume";
  checkpoint: ValidCheckpoint;
}

/** No checkpoint passes its CRC: do not resume; exit non-zero and report why. */
export interface FailJobPlan extends PlanCommon {
  action: "fail_job";
  mode: "checkpoint_only";
  reason: "checkpoint_invalid";
  checkpoint: InvalidCheckpoint;
  completed: [];
  in_flight: [];
  verify: [];
}

export type FirstRunBufferPlan = PlanCommon & FirstRunPart & BufferModePart;
export type FirstRunCheckpointOnlyPlan = PlanCommon & FirstRunPart & CheckpointOnlyModePart;
export type ResumeBufferPlan = PlanCommon & ResumePart & BufferModePart;
export type ResumeCheckpointOnlyPlan = PlanCommon & ResumePart & CheckpointOnlyModePart;

/**
 * A recovery plan: narrow it on `action` and `mode`.
 *
 * ```ts
 * if (plan.action === "fail_job") process.exit(1);
 * if (plan.mode === "buffer") for (const c of plan.completed) ...; // the skip list
 * const step = plan.checkpoint.resume_step;                        // 0 on a first run
 * ```
 */
export type RecoveryPlan =
  | FirstRunBufferPlan
  | FirstRunCheckpointOnlyPlan
  | ResumeBufferPlan
  | ResumeCheckpointOnlyPlan
  | FailJobPlan;

/** An entry of one of the plan's three lists, tagged with its list. */
export type PlanEntry =
  | ({ list: "completed" } & CompletedCall)
  | ({ list: "in_flight" } & InFlightCall)
  | ({ list: "verify" } & VerifyCall);

/** Every entry of the plan's lists, tagged with the list it is in (empty unless `mode` is `buffer`). */
export function planEntries(plan: RecoveryPlan): PlanEntry[] {
  return [
    ...plan.completed.map((e) => ({ list: "completed" as const, ...e })),
    ...plan.in_flight.map((e) => ({ list: "in_flight" as const, ...e })),
    ...plan.verify.map((e) => ({ list: "verify" as const, ...e })),
  ];
}

// ---------------------------------------------------------------------------------------------
// Checking an answer against the types.

type Check = (v: unknown, path: string, out: string[], strict: boolean) => void;

const typeOf = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);
const str: Check = (v, p, out) => void (typeof v !== "string" && out.push(`${p}: expected string, got ${typeOf(v)}`));
const num: Check = (v, p, out) => void (typeof v !== "number" && out.push(`${p}: expected number, got ${typeOf(v)}`));
const bool: Check = (v, p, out) => void (typeof v !== "boolean" && out.push(`${p}: expected boolean, got ${typeOf(v)}`));
const nullable =
  (c: Check): Check =>
  (v, p, out, s) =>
    v === null ? undefined : c(v, p, out, s);
const oneOf =
  (values: readonly unknown[]): Check =>
  (v, p, out) =>
    void (!values.includes(v) && out.push(`${p}: ${JSON.stringify(v)} is not one of ${values.map((x) => JSON.stringify(x)).join(", ")}`));
const arrayOf =
  (c: Check): Check =>
  (v, p, out, s) => {
    if (!Array.isArray(v)) return void out.push(`${p}: expected array, got ${typeOf(v)}`);
    v.forEach((x, i) => c(x, `${p}[${i}]`, out, s));
  };
const obj =
  (fields: Record<string, Check>, optional: Record<string, Check> = {}): Check =>
  (v, p, out, s) => {
    if (typeOf(v) !== "object") return void out.push(`${p}: expected object, got ${typeOf(v)}`);
    const o = v as Record<string, unknown>;
    for (const [k, c] of Object.entries(fields)) {
      if (!(k in o)) out.push(`${p}.${k}: missing`);
      else c(o[k], `${p}.${k}`, out, s);
    }
    for (const [k, c] of Object.entries(optional)) if (k in o) c(o[k], `${p}.${k}`, out, s);
    if (s) for (const k of Object.keys(o)) if (!(k in fields) && !(k in optional)) out.push(`${p}.${k}: not in the types`);
  };

const BUFFER_REASONS: readonly BufferReason[] = ["marker_matched", "marker_unverified", "high_water_mark", "checkpoint_time", "no_checkpoint", "latest_file", "transcript"];
const CHECKPOINT_ONLY_REASONS: readonly CheckpointOnlyReason[] = ["checkpoint_invalid", "no_session_files", "file_gone", "file_untrusted", "quarantined", "not_indexed", "no_marker", "marker_mismatch", "marker_without_id", "checkpoint_without_id", "checkpoint_time_unknown", "bytes_missing"];
const VERIFY_REASONS: readonly VerifyReason[] = ["ambiguous_pairing", "uncertain_time", "started_before_anchor", "finished_before_anchor", "open_at_anchor", "straddles_anchor", "start_lost", "input_unknown", "key_ambiguous", "key_unknown"];
const NOTES: readonly PlanNote[] = ["stale", "chain_broken", "tail_pending", "index_behind", "lost_events", "payload_missing", "writer_restarted", "time_anchored", "verify"];
const ANOMALIES: readonly AnomalyKind[] = ["result_without_start", "started_before_marker", "duplicate_result", "duplicate_start", "seq_reset", "chain_broken", "payload_missing", "ambiguous_pairing", "file_replaced", "file_renamed"];
const MARKERS: readonly MarkerKind[] = ["checkpoint_written", "checkpoint", "high_water_mark", "checkpoint_time", "writer_start", "file_start"];

const ref: Check = (v, p, out) => void (!(v === "-" || (typeof v === "string" && /^crc:\d+$/.test(v))) && out.push(`${p}: ${JSON.stringify(v)} is not a checkpoint ref`));

const keyFields: Record<string, Check> = {
  key: str,
  key_source: oneOf(["id", "derived"]),
  tool_name: nullable(str),
  tool_ordinal: nullable(num),
  input_hash: nullable(str),
  replay_ordinal: nullable(num),
  call_ordinal: nullable(num),
  checkpoint_ref: nullable(str),
  idempotency_key: nullable(str),
  key_status: oneOf(["written", "derived", "ambiguous", "unknown"]),
  key_candidates: arrayOf(obj({ replay_ordinal: nullable(num), call_ordinal: nullable(num), checkpoint_ref: nullable(str), idempotency_key: str })),
  started_at: nullable(str),
  start_session: nullable(str),
  start_offset: nullable(num),
};
const resultFields: Record<string, Check> = {
  success: nullable(bool),
  result: nullable(str),
  result_truncated: bool,
  finished_at: nullable(str),
  result_session: nullable(str),
  result_offset: nullable(num),
};
const completed = obj({ ...keyFields, ...resultFields, paired_by: oneOf(["id", "order"]) });
const inFlight = obj({ ...keyFields, input: nullable(str), input_truncated: bool, writer_crashed: bool });
const verify = obj({
  ...keyFields,
  input: nullable(str),
  input_truncated: bool,
  reason: oneOf(VERIFY_REASONS),
  writer_crashed: bool,
  results: arrayOf(obj(resultFields)),
});
const checkpoint = obj({
  source: oneOf(["current", "history", "none", "invalid"]),
  checkpoint_id: nullable(str),
  step_index: nullable(num),
  resume_step: nullable(num),
  crc_ok: nullable(bool),
  ref,
  written_at: nullable(str),
  detail: nullable(str),
});
const session = obj(
  {
    path: str,
    file: str,
    file_id: num,
    generation: num,
    session_ordinal: nullable(num),
    dialect: nullable(str),
    read_from: nullable(num),
    integrity: obj({
      total_lines: num,
      valid_lines: num,
      corrupt_lines: num,
      corruption_ratio: num,
      tail_state: str,
      seq_gaps: num,
      seq_resets: num,
      foreign_job_lines: num,
      trusted: bool,
    }),
    tail_pending: bool,
    unindexed_bytes: num,
    gone: bool,
    quarantined: bool,
  },
  {
    pushed: obj({
      source: str,
      reported_size: nullable(num),
      reported_at: nullable(str),
      held_bytes: num,
      unpushed_bytes: num,
      confirmed_at: nullable(str),
    }),
  },
);
const planCheck = obj({
  plan_version: oneOf([3]),
  job_id: str,
  expected_checkpoint_id: nullable(str),
  match_checkpoint: bool,
  action: oneOf(["first_run", "resume", "fail_job"]),
  checkpoint,
  mode: oneOf(["buffer", "checkpoint_only"]),
  reason: oneOf([...BUFFER_REASONS, ...CHECKPOINT_ONLY_REASONS]),
  detail: nullable(str),
  fresh: obj({ caught_up: bool, stale: bool, reason: nullable(oneOf(["remote_unconfirmed", "unpushed_bytes", "not_caught_up"])), detail: nullable(str), unindexed_bytes: num }),
  marker: nullable(
    obj(
      { kind: oneOf(MARKERS), checkpoint_id: nullable(str), session: nullable(str), byte_offset: nullable(num), line_no: nullable(num), seq: nullable(num), ts: nullable(str) },
      { recorded_at: nullable(str), checkpoint_written_at: nullable(str), clock_skew_ms: nullable(num) },
    ),
  ),
  sessions: arrayOf(session),
  completed: arrayOf(completed),
  in_flight: arrayOf(inFlight),
  verify: arrayOf(verify),
  lost_events: arrayOf(obj({ session: str, byte_offset: nullable(num), after_seq: nullable(num), next_seq: nullable(num), missing: nullable(num) })),
  anomalies: arrayOf(obj({ kind: oneOf(ANOMALIES), session: nullable(str), byte_offset: nullable(num), key: nullable(str), tool_name: nullable(str), detail: nullable(str) })),
  events_after_marker: arrayOf(obj({ seq: nullable(num), type: nullable(str), byte_offset: num, session: str })),
  clock: nullable(
    obj({
      checkpoint_written_at: str,
      assumed_skew_ms: num,
      segments: arrayOf(obj({ segment: num, session: str, offset_ms_low: nullable(num), offset_ms_high: nullable(num), offset_from: oneOf(["mtime", "assumed"]) })),
      uncertain: arrayOf(obj({ session: str, from_offset: num, to_offset: num })),
    }),
  ),
  notes: arrayOf(oneOf(NOTES)),
});

/**
 * Checks a `recovery_plan` answer against the types: returns the differences (empty: it is a
 * {@link RecoveryPlan}). `strict` also reports keys the types do not declare; without it, only
 * missing keys, wrong types, unknown enumerated values and broken invariants (a
 * `checkpoint_only` plan with entries, an action whose checkpoint does not fit it) count.
 */
export function checkPlan(value: unknown, { strict = false }: { strict?: boolean } = {}): string[] {
  const out: string[] = [];
  planCheck(value, "plan", out, strict);
  if (out.length > 0) return out;
  const p = value as RecoveryPlan;
  if ((BUFFER_REASONS as readonly string[]).includes(p.reason) !== (p.mode === "buffer")) out.push(`plan.reason: ${p.reason} is not a reason of mode ${p.mode}`);
  if (p.mode === "checkpoint_only" && p.completed.length + p.in_flight.length + p.verify.length > 0) out.push("plan: a checkpoint_only plan with entries");
  const c = p.checkpoint;
  if (p.action === "first_run" && !(c.source === "none" && c.ref === "-" && c.resume_step === 0)) out.push("plan.checkpoint: a first run's checkpoint is not none");
  if (p.action === "resume" && !(c.source === "current" || c.source === "history")) out.push(`plan.checkpoint: a resume from source ${c.source}`);
  if (p.action === "fail_job" && !(c.source === "invalid" && p.mode === "checkpoint_only")) out.push("plan: fail_job without an invalid checkpoint");
  return out;
}

/** Narrows a `recovery_plan` answer to {@link RecoveryPlan}, or throws listing what does not fit. */
export function asRecoveryPlan(value: unknown, options: { strict?: boolean } = {}): RecoveryPlan {
  const problems = checkPlan(value, options);
  if (problems.length > 0) throw new TypeError(`not a recovery plan (v3):\n  ${problems.slice(0, 20).join("\n  ")}`);
  return value as RecoveryPlan;
}

/**
 * The light check {@link Pod.recoveryPlan} makes on every answer: the plan version this client
 * understands and the fields resuming relies on. Unknown enumerated values pass (a newer server
 * may add reasons and notes); {@link checkPlan} is the full check.
 */
export function assertPlanV3(value: unknown): RecoveryPlan {
  const p = value as Partial<Record<keyof PlanCommon | "action" | "mode" | "checkpoint", unknown>> | null;
  const problems: string[] = [];
  if (p === null || typeof p !== "object") problems.push("not an object");
  else {
    if (p.plan_version !== 3) problems.push(`plan_version ${JSON.stringify(p.plan_version)} (this client reads 3)`);
    if (p.action !== "first_run" && p.action !== "resume" && p.action !== "fail_job") problems.push(`action ${JSON.stringify(p.action)}`);
    if (p.mode !== "buffer" && p.mode !== "checkpoint_only") problems.push(`mode ${JSON.stringify(p.mode)}`);
    if (p.checkpoint === null || typeof p.checkpoint !== "object") problems.push("no checkpoint");
    for (const k of ["completed", "in_flight", "verify", "notes"] as const) if (!Array.isArray(p[k])) problems.push(`${k} is not an array`);
    if (p.fresh === null || typeof p.fresh !== "object") problems.push("no fresh");
  }
  if (problems.length > 0) throw new TypeError(`not a recovery plan (v3): ${problems.join("; ")}`);
  return value as RecoveryPlan;
}
