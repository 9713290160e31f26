/**
 * What an agent pod calls (docs/agent.md), typed and with its errors mapped: present the job
 * token, `authorize_job`, `recovery_plan`, `heartbeat` (and a loop), fenced `write_checkpoint`,
 * `read_checkpoint`, the budget and usage calls, and, for pods whose session files are pushed,
 * `await_sources` and `await_pushed`.
 *
 * **The job token** is presented as docs/agent.md prescribes for what sits between the pod and
 * the server (`tokenScope`):
 *
 * - `'transaction'` (the default; safe behind any pooler, PgBouncer in `pool_mode = transaction`
 *   included): every call is its own transaction on one connection,
 *   `BEGIN; SELECT set_config('cortex_buffer.job_token', $1, true); <the call>; COMMIT`, so the
 *   token never outlives the transaction and never stays on a server connection the next client
 *   gets. {@link Pod.transaction} groups several calls in one such transaction.
 * - `'session'` (the pod's own connections, or its own `pg.Pool`, or a session pooler that resets
 *   connections with `DISCARD ALL`): `set_config('cortex_buffer.job_token', $1, false)` once per
 *   connection, before its first call. Never use it behind a transaction pooler.
 *
 * Either way the token is a bind parameter, never in a statement's text (`pg_stat_activity`).
 * A pod without a token (a fleet role: the control plane, an operator) passes none.
 *
 * @module
 */
import { randomUUID } from "node:crypto";

import { BudgetExhaustedError, SupersededPodError, TokenRefusedError, toCortexError } from "./errors.js";
import type { RecoveryPlan } from "./plan.js";
import { assertPlanV3 } from "./plan.js";
import type { Queryable } from "./queryable.js";
import { inTransaction, withConnection } from "./queryable.js";
import type { ResumeOptions } from "./resume.js";
import { Resumer } from "./resume.js";
import type { SessionWriter } from "./session-writer.js";

export type TokenScope = "transaction" | "session";

export interface PodOptions {
  jobId: string;
  /** The job token (`CORTEX_JOB_TOKEN`); none for a fleet role. */
  token?: string | undefined;
  /** How the token is presented: per transaction (default, pooler-safe) or once per connection. */
  tokenScope?: TokenScope;
}

/** `read_checkpoint`'s row. */
export interface StoredCheckpoint {
  /** `current`; `history` when the current one fails its CRC (with a WARNING); `none` for a job never checkpointed. */
  source: "current" | "history" | "none";
  checkpoint_id: string | null;
  step_index: number | null;
  doc: Record<string, unknown> | null;
  crc: number | null;
  crc_ok: boolean | null;
  detail: string | null;
}

/** `write_checkpoint`'s row. */
export interface WrittenCheckpoint {
  checkpoint_id: string;
  step_index: number;
  /** CRC-32 of the canonical JSON, unsigned. */
  crc: number;
  size_bytes: number;
  /** `crc:<crc>`: what the pod's next calls are keyed under. */
  ref: `crc:${number}`;
}

/** A checkpoint document: a JSON object, with its own `checkpoint_id` (a UUID) and `step_index`. */
export interface CheckpointDoc {
  checkpoint_id?: string;
  step_index?: number;
  [key: string]: unknown;
}

/** `check_token_budget`'s row. */
export interface BudgetCheck {
  allowed: boolean;
  /** `no_budget`, `within_budget`, `cost_budget_exhausted`, `input_token_budget_exhausted`. */
  reason: string;
  input_tokens: number;
  max_input_tokens: number | null;
  /** Exact decimal, as text. */
  cost_usd: string;
  max_cost_usd: string | null;
}

/** `reserve_budget`'s row. */
export interface Reservation {
  reservation_id: string | null;
  allowed: boolean;
  reason: string;
}

/** The job's running totals (`record_usage`, `settle_usage`). */
export interface UsageTotals {
  input_tokens: number;
  output_tokens: number;
  cache_write_tokens: number;
  cache_read_tokens: number;
  /** Exact decimal, as text (never rounded). */
  cost_usd: string;
  llm_calls: number;
  /** The request id was counted before: the totals did not change. */
  duplicate: boolean;
}

/** Any usage spelling cortex_buffer accepts (docs/api.md, Spend rules), as the API returned it. */
export type Usage = Record<string, unknown>;

export interface RecoveryPlanOptions {
  /** Plan against this checkpoint id instead of the job's current one. */
  checkpointId?: string;
  /** Default true: only a marker of the expected checkpoint anchors the plan. */
  matchCheckpoint?: boolean;
  /**
   * Ask again this many times while the plan is stale (default 4, 200 ms × n apart): docs/agent.md
   * says ask again, and verify if it stays stale.
   */
  staleRetries?: number;
  /**
   * Before planning, wait at most this long for the sources that pushed the job's files to
   * confirm them (`await_sources`): for a pod whose previous attempt may have run on another node.
   */
  awaitSourcesMs?: number;
}

export interface CheckpointOptions {
  /** Log the marker in this writer once stored, and flush its pushed files first. */
  writer?: SessionWriter;
  /** Tell this resumer that the pod's next calls are keyed under the new checkpoint. */
  resumer?: Resumer;
  /**
   * The writer's files are pushed by a shipper: `await_pushed` each file to the size written
   * before storing the checkpoint, at most this long per file (default: not pushed, no flush).
   */
  flushTimeoutMs?: number;
  allowStepRegression?: boolean;
}

/** Why a heartbeat loop ended. */
export interface HeartbeatStop {
  /**
   * `not_running`: heartbeat returned false (reaped, cancelled or finished; another pod may own
   * the job). `superseded`: the job was dispatched again (42501). `token_refused`: the token was
   * refused otherwise. `aborted`: the signal given to the loop. `stopped`: `stop()`. `error`:
   * `maxErrors` calls in a row failed.
   */
  reason: "not_running" | "superseded" | "token_refused" | "aborted" | "stopped" | "error" | "silent";
  beats: number;
  error?: unknown;
}

export interface HeartbeatOptions {
  /** Default 30 s: well inside the reaper's `stale_after` (5 minutes). */
  intervalMs?: number;
  /** Stops the loop (`reason: 'aborted'`). */
  signal?: AbortSignal;
  /** Consecutive failed calls (a lost connection) before the loop gives up. Default 3. */
  maxErrors?: number;
  /**
   * The longest the loop goes without a heartbeat the server took before it gives up
   * (`reason: 'silent'`), however the calls fail or hang (a half-open connection can hang a call
   * for many minutes). Keep it below the reaper's `stale_after` (5 minutes by default), so that
   * the pod stops before it is reaped and a successor starts. Default 4 × `intervalMs`, at most
   * 2 minutes.
   */
  maxSilenceMs?: number;
  /** Called once, when the loop ends. */
  onStop?: (stop: HeartbeatStop) => void;
}

/**
 * A heartbeat loop: beats at once, then every `intervalMs`, until heartbeat returns false, the
 * token is refused, the signal aborts, or {@link HeartbeatLoop.stop}. `stopped` resolves with
 * why; `signal` aborts when the loop ends for any reason but `stop()`, so the pod's work can
 * listen to it and stop with it.
 */
export class HeartbeatLoop {
  /** Resolves once the loop has ended, with why. */
  readonly stopped: Promise<HeartbeatStop>;
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private done = false;
  private beats = 0;
  private errors = 0;
  private lastBeat = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  private resolve!: (s: HeartbeatStop) => void;
  private readonly onAbort = (): void => this.finish({ reason: "aborted", beats: this.beats });

  constructor(
    private readonly pod: Pod,
    private readonly opts: HeartbeatOptions = {},
  ) {
    this.stopped = new Promise((r) => (this.resolve = r));
    if (opts.signal?.aborted) {
      this.finish({ reason: "aborted", beats: 0 });
      return;
    }
    opts.signal?.addEventListener("abort", this.onAbort, { once: true });
    // A hung call never fails: the watchdog ends the loop when no beat succeeded for too long.
    const silence = opts.maxSilenceMs ?? Math.min(4 * (opts.intervalMs ?? 30_000), 120_000);
    this.watchdog = setInterval(() => {
      if (Date.now() - this.lastBeat > silence) this.finish({ reason: "silent", beats: this.beats });
    }, Math.max(50, Math.min(silence / 4, 5_000)));
    this.watchdog.unref?.();
    void this.beat();
  }

  /** Aborted when the loop ends (reason: the {@link HeartbeatStop}), except by `stop()`. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Ends the loop (`reason: 'stopped'`). */
  stop(): void {
    this.finish({ reason: "stopped", beats: this.beats });
  }

  private async beat(): Promise<void> {
    if (this.done) return;
    try {
      const ok = await this.pod.heartbeat();
      if (this.done) return;
      this.beats += 1;
      this.errors = 0;
      this.lastBeat = Date.now();
      if (!ok) return this.finish({ reason: "not_running", beats: this.beats });
    } catch (e) {
      if (this.done) return;
      if (e instanceof SupersededPodError) return this.finish({ reason: "superseded", beats: this.beats, error: e });
      if (e instanceof TokenRefusedError) return this.finish({ reason: "token_refused", beats: this.beats, error: e });
      this.errors += 1;
      if (this.errors >= (this.opts.maxErrors ?? 3)) return this.finish({ reason: "error", beats: this.beats, error: e });
    }
    this.timer = setTimeout(() => void this.beat(), this.opts.intervalMs ?? 30_000);
  }

  private finish(stop: HeartbeatStop): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    this.opts.signal?.removeEventListener("abort", this.onAbort);
    if (stop.reason !== "stopped") this.controller.abort(stop);
    try {
      this.opts.onStop?.(stop);
    } finally {
      this.resolve(stop);
    }
  }
}

const toNum = (v: unknown): number => (typeof v === "number" ? v : Number(v));
const toNumOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : toNum(v));
const toStrOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const interval = (ms: number): string => `${Math.max(0, Math.round(ms))} milliseconds`;

function usageTotals(r: Record<string, unknown>): UsageTotals {
  return {
    input_tokens: toNum(r.input_tokens),
    output_tokens: toNum(r.output_tokens),
    cache_write_tokens: toNum(r.cache_write_tokens),
    cache_read_tokens: toNum(r.cache_read_tokens),
    cost_usd: String(r.cost_usd),
    llm_calls: toNum(r.llm_calls),
    duplicate: Boolean(r.duplicate),
  };
}

/**
 * One pod, one job: the calls of docs/agent.md over a `pg.Pool` or a `pg.Client` whose login
 * role holds `cortex_buffer_agent`. Every method maps errors to the classes of `errors.ts`.
 *
 * ```ts
 * const pod = new Pod(pool, { jobId: env.jobId, token: env.jobToken });
 * await pod.authorize();
 * const plan = await pod.recoveryPlan();
 * const resumer = pod.resume(plan, { firstAttempt: env.attempt === 1, writer });
 * const beat = pod.startHeartbeat({ signal });
 * ...
 * await pod.checkpoint({ step_index: step, state }, { writer, resumer });
 * ```
 */
export class Pod {
  readonly jobId: string;
  readonly tokenScope: TokenScope;
  private readonly db: Queryable;
  private readonly token: string | undefined;
  /** Set inside {@link Pod.transaction}: the connection of the open transaction. */
  private readonly tx: Queryable | undefined;
  /** Inside {@link Pod.transaction}: what a stored checkpoint does once the transaction commits. */
  private readonly afterCommit: Array<() => void> = [];
  private readonly presented = new WeakSet<object>();
  private fenceId: string | null = null;
  private fenceKnown = false;

  /** @param tx internal: the connection of an open {@link Pod.transaction}. */
  constructor(db: Queryable, options: PodOptions, tx?: Queryable) {
    this.db = db;
    this.jobId = options.jobId.toLowerCase();
    this.token = options.token || undefined;
    this.tokenScope = options.tokenScope ?? "transaction";
    this.tx = tx;
  }

  /**
   * The checkpoint id the next {@link Pod.checkpoint} is fenced on: the plan's checkpoint (set by
   * {@link Pod.recoveryPlan}), then the id of the pod's own previous write. `null`: none (a first
   * run; `write_checkpoint` cannot fence on "no checkpoint yet").
   */
  get fence(): string | null {
    return this.fenceId;
  }

  /** Sets the fence by hand (a pod that planned elsewhere). */
  setFence(checkpointId: string | null): void {
    this.fenceId = checkpointId;
    this.fenceKnown = true;
  }

  // --- plumbing ---------------------------------------------------------------------------

  /** Runs SQL as this pod: the token presented per the scope, errors mapped. */
  private async sql<R = Record<string, unknown>>(operation: string, text: string, values: unknown[]): Promise<R[]> {
    try {
      return await this.scoped(async (c) => (await c.query(text, values)).rows as R[]);
    } catch (e) {
      throw toCortexError(e, operation);
    }
  }

  private async scoped<T>(work: (c: Queryable) => Promise<T>): Promise<T> {
    if (this.tx) return work(this.tx);
    if (!this.token) return work(this.db);
    if (this.tokenScope === "session") {
      return withConnection(this.db, async (c) => {
        if (!this.presented.has(c)) {
          await c.query("SELECT pg_catalog.set_config('cortex_buffer.job_token', $1, false)", [this.token]);
          this.presented.add(c);
        }
        return work(c);
      });
    }
    return inTransaction(this.db, async (c) => {
      await c.query("SELECT pg_catalog.set_config('cortex_buffer.job_token', $1, true)", [this.token]);
      return work(c);
    });
  }

  /**
   * Runs several calls in one transaction (the token presented once, for it only): e.g. record
   * usage and store the checkpoint atomically. `work` gets a Pod bound to that transaction.
   */
  async transaction<T>(work: (tx: Pod) => Promise<T>): Promise<T> {
    if (this.tx) return work(this);
    const run = async (c: Queryable): Promise<T> => {
      if (this.token) {
        await c.query(`SELECT pg_catalog.set_config('cortex_buffer.job_token', $1, ${this.tokenScope === "transaction"})`, [this.token]);
      }
      inner = new Pod(this.db, { jobId: this.jobId, token: this.token, tokenScope: this.tokenScope }, c);
      if (this.fenceKnown) inner.setFence(this.fenceId);
      return work(inner);
    };
    let inner: Pod | undefined;
    let out: T;
    try {
      out = await inTransaction(this.db, run);
    } catch (e) {
      throw toCortexError(e, "transaction");
    }
    // Only once the transaction committed: a checkpoint it stored moves the fence, keys the
    // resumer's next calls and writes its marker (rolled back, it stored nothing).
    if (inner?.fenceKnown) this.setFence(inner.fenceId);
    for (const step of inner?.afterCommit ?? []) step();
    return out;
  }

  // --- authority ----------------------------------------------------------------------------

  /**
   * `authorize_job(job_id)`: checks the token once at start. Throws {@link SupersededPodError}
   * (an earlier attempt's token: stop, exit 0) or {@link TokenRefusedError} (exit non-zero).
   */
  async authorize(): Promise<true> {
    await this.sql("authorize_job", "SELECT cortex_buffer.authorize_job($1) AS ok", [this.jobId]);
    return true;
  }

  // --- recovery -----------------------------------------------------------------------------

  /** `await_sources(job_id, timeout)`: true once every source that pushed the job's files confirmed them. */
  async awaitSources(timeoutMs = 10_000): Promise<boolean> {
    const [r] = await this.sql<{ ok: boolean }>("await_sources", "SELECT cortex_buffer.await_sources($1, $2::interval) AS ok", [this.jobId, interval(timeoutMs)]);
    return Boolean(r?.ok);
  }

  /**
   * `recovery_plan(job_id)`, asked again while stale (`staleRetries`), after an optional
   * `await_sources`. Sets the checkpoint fence to the plan's checkpoint. A `fail_job` plan is
   * returned as an answer (check `action`); {@link Pod.resume} throws on it.
   */
  async recoveryPlan(options: RecoveryPlanOptions = {}): Promise<RecoveryPlan> {
    if (options.awaitSourcesMs !== undefined) await this.awaitSources(options.awaitSourcesMs);
    const retries = options.staleRetries ?? 4;
    let plan: RecoveryPlan;
    for (let attempt = 0; ; attempt++) {
      const [r] = await this.sql<{ plan: unknown }>(
        "recovery_plan",
        "SELECT cortex_buffer.recovery_plan($1, $2::uuid, $3) AS plan",
        [this.jobId, options.checkpointId ?? null, options.matchCheckpoint ?? true],
      );
      plan = assertPlanV3(r?.plan);
      if (!plan.fresh.stale || attempt >= retries) break;
      await new Promise((res) => setTimeout(res, 200 * (attempt + 1)));
    }
    this.setFence(plan.checkpoint.checkpoint_id);
    return plan;
  }

  /** The {@link Resumer} of a plan (see resume.ts for the rules, `checkpoint_only` and stale plans). */
  resume(plan: RecoveryPlan, options: ResumeOptions = {}): Resumer {
    return new Resumer(plan, options);
  }

  // --- liveness -----------------------------------------------------------------------------

  /** `heartbeat(job_id)`: false means stop (reaped, cancelled or finished). */
  async heartbeat(): Promise<boolean> {
    const [r] = await this.sql<{ ok: boolean }>("heartbeat", "SELECT cortex_buffer.heartbeat($1) AS ok", [this.jobId]);
    return Boolean(r?.ok);
  }

  /** Starts a {@link HeartbeatLoop}. */
  startHeartbeat(options: HeartbeatOptions = {}): HeartbeatLoop {
    return new HeartbeatLoop(this, options);
  }

  // --- checkpoints --------------------------------------------------------------------------

  /** `read_checkpoint(job_id)`. Throws {@link CheckpointCorruptError} (`XX001`) when none passes its CRC. */
  async readCheckpoint(): Promise<StoredCheckpoint> {
    const [r] = await this.sql<Record<string, unknown>>("read_checkpoint", "SELECT * FROM cortex_buffer.read_checkpoint($1)", [this.jobId]);
    if (!r) throw new TypeError("read_checkpoint returned no row");
    return {
      source: r.source as StoredCheckpoint["source"],
      checkpoint_id: toStrOrNull(r.checkpoint_id),
      step_index: toNumOrNull(r.step_index),
      doc: (r.doc as Record<string, unknown> | null) ?? null,
      crc: toNumOrNull(r.crc),
      crc_ok: (r.crc_ok as boolean | null) ?? null,
      detail: toStrOrNull(r.detail),
    };
  }

  /**
   * `write_checkpoint(job_id, doc, expected_checkpoint_id, allow_step_regression)`, fenced on
   * `expectedCheckpointId` (`null` skips fencing). Throws {@link SupersededPodError} (`55006`:
   * another writer won, nothing written; or `42501`: dispatched again) and
   * {@link JobNotRunningError} (`55000`): stop, do not retry. Call it in READ COMMITTED.
   */
  async writeCheckpoint(
    doc: CheckpointDoc,
    { expectedCheckpointId, allowStepRegression = false }: { expectedCheckpointId: string | null; allowStepRegression?: boolean },
  ): Promise<WrittenCheckpoint> {
    const [r] = await this.sql<Record<string, unknown>>(
      "write_checkpoint",
      "SELECT * FROM cortex_buffer.write_checkpoint($1, $2::jsonb, $3::uuid, $4)",
      [this.jobId, JSON.stringify(doc), expectedCheckpointId, allowStepRegression],
    );
    if (!r) throw new TypeError("write_checkpoint returned no row");
    const crc = toNum(r.crc);
    return { checkpoint_id: String(r.checkpoint_id), step_index: toNum(r.step_index), crc, size_bytes: toNum(r.size_bytes), ref: `crc:${crc}` };
  }

  /**
   * A fenced checkpoint, the way docs/agent.md says: flush the pushed session files first (when
   * `flushTimeoutMs` is given: `await_pushed` of every file the writer wrote to, at the size it
   * reached), write the checkpoint fenced on {@link Pod.fence} (gives the document a
   * `checkpoint_id` if it has none), then move the fence to it, tell the resumer its next calls
   * are keyed under it, and write the marker in the session file.
   *
   * A flush that returns false (the shipper is behind) does not stop the checkpoint (the plan
   * then places it by its time). Returns what was stored and whether every flush succeeded.
   */
  async checkpoint(doc: CheckpointDoc, options: CheckpointOptions = {}): Promise<WrittenCheckpoint & { flushed: boolean }> {
    const { writer, resumer, flushTimeoutMs, allowStepRegression } = options;
    let flushed = true;
    if (writer && flushTimeoutMs !== undefined) flushed = await this.flush(writer, flushTimeoutMs);
    const full: CheckpointDoc = { checkpoint_id: randomUUID(), ...doc };
    const written = await this.writeCheckpoint(full, { expectedCheckpointId: this.fenceId, allowStepRegression: allowStepRegression ?? false });
    this.setFence(written.checkpoint_id);
    const stored = (): void => {
      resumer?.stored(written.ref);
      writer?.checkpointWritten(written.checkpoint_id, written.step_index);
    };
    // Inside Pod.transaction, the resumer and the marker wait for its commit.
    if (this.tx) this.afterCommit.push(stored);
    else stored();
    return { ...written, flushed };
  }

  // --- pushed pods --------------------------------------------------------------------------

  /**
   * `await_pushed(job_id, relpath, size, timeout)`: the flush before a checkpoint, for a pod
   * whose files a shipper pushes. True once the server has `relpath` up to `size` bytes.
   */
  async awaitPushed(relpath: string, size: number, timeoutMs = 5_000): Promise<boolean> {
    const [r] = await this.sql<{ ok: boolean }>(
      "await_pushed",
      "SELECT cortex_buffer.await_pushed($1, $2, $3, $4::interval) AS ok",
      [this.jobId, relpath, size, interval(timeoutMs)],
    );
    return Boolean(r?.ok);
  }

  /** `await_pushed` of every file the writer wrote to since its last flush. True when all were. */
  async flush(writer: SessionWriter, timeoutMs = 5_000): Promise<boolean> {
    let all = true;
    for (const { relpath, size } of writer.pendingFlush()) {
      if (await this.awaitPushed(relpath, size, timeoutMs)) writer.markFlushed(relpath, size);
      else all = false;
    }
    return all;
  }

  // --- spend --------------------------------------------------------------------------------

  /** `check_token_budget(job_id)`: the answer as it is (`allowed` false: do not make the call). */
  async checkTokenBudget(): Promise<BudgetCheck> {
    const [r] = await this.sql<Record<string, unknown>>("check_token_budget", "SELECT * FROM cortex_buffer.check_token_budget($1)", [this.jobId]);
    if (!r) throw new TypeError("check_token_budget returned no row");
    return {
      allowed: Boolean(r.allowed),
      reason: String(r.reason),
      input_tokens: toNum(r.input_tokens),
      max_input_tokens: toNumOrNull(r.max_input_tokens),
      cost_usd: String(r.cost_usd),
      max_cost_usd: toStrOrNull(r.max_cost_usd),
    };
  }

  /** `check_token_budget`, throwing {@link BudgetExhaustedError} when the call is not allowed. */
  async requireBudget(): Promise<BudgetCheck> {
    const check = await this.checkTokenBudget();
    if (!check.allowed) throw new BudgetExhaustedError("check_token_budget", { reason: check.reason, answer: check });
    return check;
  }

  /**
   * `record_usage(job_id, model, usage, request_id, at)`: one call's usage, counted once per
   * `(job_id, request_id)`, so retrying is safe. Pass the API's request id.
   */
  async recordUsage(model: string, usage: Usage, { requestId, at }: { requestId?: string; at?: Date } = {}): Promise<UsageTotals> {
    const [r] = await this.sql<Record<string, unknown>>(
      "record_usage",
      "SELECT * FROM cortex_buffer.record_usage($1, $2, $3::jsonb, $4, coalesce($5::timestamptz, now()))",
      [this.jobId, model, JSON.stringify(usage), requestId ?? null, at?.toISOString() ?? null],
    );
    if (!r) throw new TypeError("record_usage returned no row");
    return usageTotals(r);
  }

  /**
   * `reserve_budget(job_id, estimate, model)`: holds the estimate against the budget. Throws
   * {@link BudgetExhaustedError} when refused, unless `throwIfRefused: false` (then check `allowed`).
   */
  async reserveBudget(estimate: Usage, model: string, { throwIfRefused = true }: { throwIfRefused?: boolean } = {}): Promise<Reservation> {
    const [r] = await this.sql<Record<string, unknown>>("reserve_budget", "SELECT * FROM cortex_buffer.reserve_budget($1, $2::jsonb, $3)", [
      this.jobId,
      JSON.stringify(estimate),
      model,
    ]);
    if (!r) throw new TypeError("reserve_budget returned no row");
    const res: Reservation = { reservation_id: toStrOrNull(r.reservation_id), allowed: Boolean(r.allowed), reason: String(r.reason) };
    if (!res.allowed && throwIfRefused) throw new BudgetExhaustedError("reserve_budget", { reason: res.reason, answer: res });
    return res;
  }

  /** `settle_usage(reservation_id, actual_usage, request_id)`: records what was used, closes the reservation. */
  async settleUsage(reservationId: string, actual: Usage, requestId?: string): Promise<UsageTotals> {
    const [r] = await this.sql<Record<string, unknown>>("settle_usage", "SELECT * FROM cortex_buffer.settle_usage($1, $2::jsonb, $3)", [
      reservationId,
      JSON.stringify(actual),
      requestId ?? null,
    ]);
    if (!r) throw new TypeError("settle_usage returned no row");
    return usageTotals(r);
  }

  /** `release_reservation(reservation_id)`: the call was never made. False when already closed. */
  async releaseReservation(reservationId: string): Promise<boolean> {
    const [r] = await this.sql<{ ok: boolean }>("release_reservation", "SELECT cortex_buffer.release_reservation($1) AS ok", [reservationId]);
    return Boolean(r?.ok);
  }
}
