/**
 * Typed errors. Every database call of this package goes through {@link toCortexError}, which
 * maps a PostgreSQL error (its SQLSTATE and cortex_buffer's HINT, docs/operations.md, Errors) to
 * one of the classes below; errors without a SQLSTATE (a refused connection, a socket closed)
 * are passed through unchanged.
 *
 * | class | SQLSTATE / source | HINT starts with | what the pod does |
 * |---|---|---|---|
 * | {@link SupersededPodError} `dispatched_again` | `42501` | `The job was dispatched again` | stop at once, exit 0, report no failure |
 * | {@link SupersededPodError} `fence_lost` | `55006` (`write_checkpoint`) | `Another writer checkpointed this job` | stop; do not retry the write |
 * | {@link SupersededPodError} `step_regression` | `55006` (`write_checkpoint`) | `A newer step was already checkpointed` | stop (or pass `allowStepRegression` on purpose) |
 * | {@link JobNotRunningError} | `55000` (`write_checkpoint`) | `Only the process running the job may checkpoint` | stop (reaped or finished) |
 * | {@link TokenRefusedError} | `42501` | the other token HINTs (no token, not a token, altered/revoked, another job's, a file outside the job) | exit non-zero and report it |
 * | {@link CheckpointCorruptError} | `XX001` (`read_checkpoint`), or a `fail_job` plan | `Fail the job` | fail the job |
 * | {@link NotFoundError} | `P0002` | — | no such job, reservation or push source |
 * | {@link BudgetExhaustedError} | client side: `allowed = false` from `check_token_budget` / `reserve_budget` | — | do not make the LLM call |
 * | {@link StalePlanError} | client side: a plan with `fresh.stale` and `onStale: 'throw'` | — | ask again, or resume verifying everything |
 * | {@link CortexBufferError} | any other SQLSTATE | — | see `sqlstate`, `hint`, `detail` |
 *
 * @module
 */

/** Why a pod's work is superseded. */
export type SupersededKind = "dispatched_again" | "fence_lost" | "step_regression";

/** Why a job token was refused (other than the job having been dispatched again). */
export type TokenRefusedKind =
  | "no_token"
  | "not_a_token"
  | "does_not_verify"
  | "other_job"
  | "file_outside_job"
  | "unknown";

/** What {@link CortexBufferError} carries from the server's error. */
export interface CortexBufferErrorFields {
  /** The SQLSTATE (`undefined` for a client-side error). */
  sqlstate?: string | undefined;
  /** cortex_buffer's HINT (every error it raises has one; PostgreSQL's own have none). */
  hint?: string | undefined;
  detail?: string | undefined;
  /** The SQL function (or client operation) that failed, e.g. `write_checkpoint`. */
  operation?: string | undefined;
  cause?: unknown;
}

/** The base class: an error of a cortex_buffer call, with the server's SQLSTATE, HINT and DETAIL. */
export class CortexBufferError extends Error {
  readonly sqlstate: string | undefined;
  readonly hint: string | undefined;
  readonly detail: string | undefined;
  readonly operation: string | undefined;

  constructor(message: string, fields: CortexBufferErrorFields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = new.target.name;
    this.sqlstate = fields.sqlstate;
    this.hint = fields.hint;
    this.detail = fields.detail;
    this.operation = fields.operation;
  }
}

/**
 * This pod's work is superseded: the job was dispatched again (`42501`, its token names an
 * earlier attempt), or another writer won the checkpoint fence (`55006`). Stop at once: no more
 * tool calls, no checkpoint, and exit without reporting a failure (a crash recorded now would
 * count against the new attempt).
 */
export class SupersededPodError extends CortexBufferError {
  readonly kind: SupersededKind;
  constructor(kind: SupersededKind, message: string, fields: CortexBufferErrorFields = {}) {
    super(message, fields);
    this.kind = kind;
  }
}

/** `write_checkpoint` refused because the job is no longer `RUNNING` (`55000`): reaped or finished. Stop. */
export class JobNotRunningError extends CortexBufferError {}

/**
 * The session's job token was refused (`42501`) for another reason than a new attempt: no token,
 * not a token, one that does not verify (altered, another installation's, revoked), another
 * job's, or a file outside the job's directory. A bug in the pod or in how it got its token:
 * exit non-zero and report it.
 */
export class TokenRefusedError extends CortexBufferError {
  readonly kind: TokenRefusedKind;
  constructor(kind: TokenRefusedKind, message: string, fields: CortexBufferErrorFields = {}) {
    super(message, fields);
    this.kind = kind;
  }
}

/** Checkpoints exist but none passes its CRC (`XX001`, or a plan whose `action` is `fail_job`): fail the job. */
export class CheckpointCorruptError extends CortexBufferError {}

/** `P0002`: no such job (in the bound job table), reservation or push source. */
export class NotFoundError extends CortexBufferError {}

/** What the budget check answered when it refused. */
export interface BudgetRefusal {
  /** `cost_budget_exhausted`, `input_token_budget_exhausted`, `cost_budget_insufficient`, `input_token_budget_insufficient`, … */
  reason: string;
  /** The row the server returned. */
  answer: unknown;
}

/**
 * The job's budget does not allow the LLM call: `check_token_budget` or `reserve_budget` answered
 * `allowed = false`. cortex_buffer raises no error for this (it is an answer, not a SQLSTATE):
 * the client raises it from the answer, so `sqlstate` is `undefined`.
 */
export class BudgetExhaustedError extends CortexBufferError {
  readonly reason: string;
  readonly answer: unknown;
  constructor(operation: string, refusal: BudgetRefusal) {
    super(`${operation}: the job's budget does not allow the call (${refusal.reason})`, { operation });
    this.reason = refusal.reason;
    this.answer = refusal.answer;
  }
}

/**
 * A recovery plan is stale (`fresh.stale`: the job's files could not be brought up to date, or a
 * pushed file's source has not confirmed it since the previous attempt). Raised by
 * {@link Resumer} when built with `onStale: 'throw'`, so the pod can ask again.
 */
export class StalePlanError extends CortexBufferError {
  /** `fresh.reason`: `remote_unconfirmed`, `unpushed_bytes`, `not_caught_up`. */
  readonly reason: string | null;
  readonly plan: unknown;
  constructor(reason: string | null, detail: string | null, plan: unknown) {
    super(`the recovery plan is stale (${reason ?? "unknown reason"})${detail ? `: ${detail}` : ""}`, {
      operation: "recovery_plan",
      detail: detail ?? undefined,
    });
    this.reason = reason;
    this.plan = plan;
  }
}

interface PgErrorLike {
  code?: unknown;
  message?: unknown;
  hint?: unknown;
  detail?: unknown;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** Whether an error is a PostgreSQL error with a SQLSTATE (node-postgres' `DatabaseError`). */
export function isDatabaseError(e: unknown): e is Error & { code: string; hint?: string; detail?: string } {
  return e instanceof Error && typeof (e as PgErrorLike).code === "string" && SQLSTATE.test((e as PgErrorLike).code as string);
}

const TOKEN_HINTS: ReadonlyArray<[string, TokenRefusedKind]> = [
  ["The control plane issues the token", "no_token"],
  ["Set cortex_buffer.job_token", "not_a_token"],
  ["The token was altered", "does_not_verify"],
  ["A pod may act on its own job only", "other_job"],
  ["A pod may read its own job's session files only", "file_outside_job"],
  ["An agent session reads its own job's session files only", "file_outside_job"],
];

/**
 * Maps an error of a call to its typed class (see the module's table). Already typed errors
 * and errors without a SQLSTATE are returned unchanged.
 */
export function toCortexError(e: unknown, operation: string): unknown {
  if (e instanceof CortexBufferError || !isDatabaseError(e)) return e;
  const sqlstate = e.code;
  const hint = typeof e.hint === "string" ? e.hint : undefined;
  const detail = typeof e.detail === "string" ? e.detail : undefined;
  const fields: CortexBufferErrorFields = { sqlstate, hint, detail, operation, cause: e };
  const message = `${operation}: ${e.message}`;
  switch (sqlstate) {
    case "42501": {
      if (hint?.startsWith("The job was dispatched again")) return new SupersededPodError("dispatched_again", message, fields);
      for (const [prefix, kind] of TOKEN_HINTS) if (hint?.startsWith(prefix)) return new TokenRefusedError(kind, message, fields);
      // PostgreSQL's own 42501 (no EXECUTE, no SELECT) and the other privilege errors.
      return new CortexBufferError(message, fields);
    }
    case "55006":
      return new SupersededPodError(hint?.startsWith("A newer step") ? "step_regression" : "fence_lost", message, fields);
    case "55000":
      if (hint?.startsWith("Only the process running the job")) return new JobNotRunningError(message, fields);
      return new CortexBufferError(message, fields);
    case "XX001":
      return new CheckpointCorruptError(message, fields);
    case "P0002":
      return new NotFoundError(message, fields);
    default:
      return new CortexBufferError(message, fields);
  }
}

/**
 * Whether an error means "this pod must stop now and exit without reporting a failure": its
 * work is superseded, or the job is no longer running.
 */
export function isStopSignal(e: unknown): e is SupersededPodError | JobNotRunningError {
  return e instanceof SupersededPodError || e instanceof JobNotRunningError;
}
