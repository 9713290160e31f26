/**
 * The control plane's side of a pod's start (docs/control-plane.md): admission through the
 * agent's circuit breaker (`admit_job`), the job token of the attempt (`job_token`), the pod's
 * push source and its token (`register_push_source`, `push_source_token`), and what goes into
 * the pod's environment ({@link PodEnv}). Plus the few other control-plane calls a dispatcher
 * makes around it (outcomes, crashes, budgets). Run these as a role holding
 * `cortex_buffer_control_plane` (a fleet role: no token needed).
 *
 * The token and the source token are secrets: hand them to the pod in a secret of its own
 * (`CORTEX_JOB_TOKEN`, `CB_SHIP_SOURCE_TOKEN`), never in a job's payload or a log.
 *
 * @module
 */
import { randomUUID } from "node:crypto";

import { toCortexError } from "./errors.js";
import type { Queryable } from "./queryable.js";
import { inTransaction } from "./queryable.js";

/** What a pod needs in its environment. */
export interface PodEnv {
  jobId: string;
  /** The token of the job's current attempt (`cbjt1.<job id>.<attempt>.<mac>`): a secret. */
  jobToken: string;
  /** The attempt the token names: `1` is the job's first pod (nothing can have run before it). */
  attempt: number;
  /** For a pod whose session files its own sidecar shipper pushes: its source and the source's token (a secret). */
  pushSource?: { source: string; token: string };
}

/** The environment variable names {@link podEnvToVars} and {@link podEnvFromVars} use. */
export const POD_ENV_VARS = {
  jobId: "CORTEX_JOB_ID",
  jobToken: "CORTEX_JOB_TOKEN",
  attempt: "CORTEX_JOB_ATTEMPT",
  source: "CB_SHIP_SOURCE",
  sourceToken: "CB_SHIP_SOURCE_TOKEN",
} as const;

/** The pod's environment variables (`CORTEX_JOB_ID`, `CORTEX_JOB_TOKEN`, `CORTEX_JOB_ATTEMPT`, and `CB_SHIP_SOURCE`, `CB_SHIP_SOURCE_TOKEN` for a pushed pod). */
export function podEnvToVars(env: PodEnv): Record<string, string> {
  const vars: Record<string, string> = {
    [POD_ENV_VARS.jobId]: env.jobId,
    [POD_ENV_VARS.jobToken]: env.jobToken,
    [POD_ENV_VARS.attempt]: String(env.attempt),
  };
  if (env.pushSource) {
    vars[POD_ENV_VARS.source] = env.pushSource.source;
    vars[POD_ENV_VARS.sourceToken] = env.pushSource.token;
  }
  return vars;
}

/**
 * The {@link PodEnv} from a pod's environment (`process.env` by default). The job id and the
 * attempt default to what the token names; `CORTEX_BUFFER_JOB_TOKEN` (examples/k8s) is read when
 * `CORTEX_JOB_TOKEN` is not set.
 */
export function podEnvFromVars(vars: Record<string, string | undefined> = process.env): PodEnv {
  const jobToken = vars[POD_ENV_VARS.jobToken] ?? vars.CORTEX_BUFFER_JOB_TOKEN;
  if (!jobToken) throw new TypeError(`${POD_ENV_VARS.jobToken} is not set`);
  const named = parseJobToken(jobToken);
  const jobId = vars[POD_ENV_VARS.jobId] ?? named?.jobId;
  if (!jobId) throw new TypeError(`${POD_ENV_VARS.jobId} is not set`);
  const attemptText = vars[POD_ENV_VARS.attempt];
  const attempt = attemptText ? Number(attemptText) : (named?.attempt ?? NaN);
  const env: PodEnv = { jobId, jobToken, attempt };
  const source = vars[POD_ENV_VARS.source];
  const token = vars[POD_ENV_VARS.sourceToken];
  if (source && token) env.pushSource = { source, token };
  return env;
}

/** The job id and attempt a job token names (`cbjt1.<job id>.<attempt>.<mac>`), or null. */
export function parseJobToken(token: string): { jobId: string; attempt: number } | null {
  const m = /^cbjt1\.([0-9a-f-]{36})\.(\d+)\.[0-9a-f]{64}$/.exec(token);
  return m ? { jobId: m[1] as string, attempt: Number(m[2]) } : null;
}

async function one<R>(db: Queryable, operation: string, text: string, values: unknown[]): Promise<R> {
  try {
    const { rows } = await db.query(text, values);
    if (rows.length === 0) throw new TypeError(`${operation} returned no row`);
    return rows[0] as R;
  } catch (e) {
    throw toCortexError(e, operation);
  }
}

/** Quotes a schema-qualified name such as `cortex_buffer.job` or `public.job`. */
function quoteQualified(name: string): string {
  return name
    .split(".")
    .map((part) => (part.startsWith('"') && part.endsWith('"') ? part : `"${part.replace(/"/g, '""')}"`))
    .join(".");
}

/** The job table cortex_buffer is bound to (`cortex_buffer.job_table`), quoted. */
export async function jobTable(db: Queryable): Promise<string> {
  const r = await one<{ t: string }>(db, "job_table", "SELECT pg_catalog.current_setting('cortex_buffer.job_table') AS t", []);
  return quoteQualified(r.t);
}

/** `admit_job(agent_id, job_id)`: false while the agent's circuit breaker is open. */
export async function admitJob(db: Queryable, agentId: string, jobId: string): Promise<boolean> {
  return (await one<{ ok: boolean }>(db, "admit_job", "SELECT cortex_buffer.admit_job($1, $2) AS ok", [agentId, jobId])).ok;
}

/** `job_token(job_id)`: the token of the job's current attempt. The same job and attempt always give the same token. */
export async function jobToken(db: Queryable, jobId: string): Promise<string> {
  return (await one<{ t: string }>(db, "job_token", "SELECT cortex_buffer.job_token($1) AS t", [jobId])).t;
}

/** `register_push_source(source, job_id)`: registers (or reuses) a pod's source, grants it the job, returns its token. */
export async function registerPushSource(db: Queryable, source: string, jobId: string): Promise<string> {
  return (await one<{ t: string }>(db, "register_push_source", "SELECT cortex_buffer.register_push_source($1, $2) AS t", [source, jobId])).t;
}

/** `push_source_token(source)`: the source's current token. */
export async function pushSourceToken(db: Queryable, source: string): Promise<string> {
  return (await one<{ t: string }>(db, "push_source_token", "SELECT cortex_buffer.push_source_token($1) AS t", [source])).t;
}

/** `drop_push_source(source)`: once the job has ended. True when it was there. */
export async function dropPushSource(db: Queryable, source: string): Promise<boolean> {
  return (await one<{ ok: boolean }>(db, "drop_push_source", "SELECT cortex_buffer.drop_push_source($1) AS ok", [source])).ok;
}

/** `record_outcome(agent_id, job_id, success)`: the breaker afterwards. */
export async function recordOutcome(
  db: Queryable,
  agentId: string,
  jobId: string,
  success: boolean,
): Promise<{ state: string; failures_in_window: number; open_until: Date | null }> {
  return one(db, "record_outcome", "SELECT * FROM cortex_buffer.record_outcome($1, $2, $3)", [agentId, jobId, success]);
}

/** `record_crash(job_id, exit_code, error_message)` then `retry_decision(job_id)`: a pod exited non-zero. */
export async function recordCrash(
  db: Queryable,
  jobId: string,
  exitCode: number,
  errorMessage: string,
): Promise<{ crashId: number; retry: boolean; reason: string; strategy: string; delay: unknown }> {
  const c = await one<{ id: string }>(db, "record_crash", "SELECT cortex_buffer.record_crash($1, $2, $3) AS id", [jobId, exitCode, errorMessage]);
  const d = await one<{ retry: boolean; reason: string; strategy: string; delay: unknown }>(db, "retry_decision", "SELECT * FROM cortex_buffer.retry_decision($1)", [jobId]);
  return { crashId: Number(c.id), ...d };
}

/** `set_budget(agent_id, max_input_tokens_per_job, max_cost_usd_per_job)` (an operator's call): NULL unlimited, 0 nothing. */
export async function setBudget(db: Queryable, agentId: string, maxInputTokensPerJob: number | null, maxCostUsdPerJob: string | number | null): Promise<void> {
  await one(db, "set_budget", "SELECT * FROM cortex_buffer.set_budget($1, $2, $3::numeric)", [agentId, maxInputTokensPerJob, maxCostUsdPerJob === null ? null : String(maxCostUsdPerJob)]);
}

/** `call_idempotency_key(...)` computed by the server (the client's own `callIdempotencyKey` gives the same). */
export async function serverCallIdempotencyKey(db: Queryable, jobId: string, checkpoint: unknown, callOrdinal: number, toolName: string, toolInput: unknown): Promise<string> {
  return (
    await one<{ k: string }>(db, "call_idempotency_key", "SELECT cortex_buffer.call_idempotency_key($1, $2::jsonb, $3, $4, $5::jsonb) AS k", [
      jobId,
      checkpoint === null || checkpoint === undefined ? null : JSON.stringify(checkpoint),
      callOrdinal,
      toolName,
      toolInput === undefined ? null : JSON.stringify(toolInput),
    ])
  ).k;
}

/**
 * Inserts a `PENDING` job into the bound job table (for the default `cortex_buffer.job` and
 * tables like it; the control plane creates its jobs itself). Returns its id.
 */
export async function createJob(db: Queryable, { agentId, jobId = randomUUID(), maxAttempts = 3 }: { agentId: string; jobId?: string; maxAttempts?: number }): Promise<string> {
  const table = await jobTable(db);
  await one(db, "create_job", `INSERT INTO ${table} (id, agent_id, max_attempts) VALUES ($1, $2, $3) RETURNING id`, [jobId, agentId, maxAttempts]);
  return jobId;
}

export interface DispatchOptions {
  jobId: string;
  /** The job's agent (read from the job table when not given). */
  agentId?: string;
  /** Register this source for the pod's sidecar shipper and put its token in the env. */
  pushSource?: string;
  /**
   * Also count the attempt up, as the control plane's dispatcher does at `SCHEDULED → RUNNING`
   * (`PENDING`/`RETRYING` → `SCHEDULED` → `RUNNING`, `attempt + 1`, `started_at`, `heartbeat_at`;
   * a `RUNNING` job is dispatched again: its previous pod is superseded). Default false: the
   * control plane has already done it, and the token is issued after that update.
   */
  startAttempt?: boolean;
}

export type DispatchResult =
  | { admitted: false; jobId: string; agentId: string }
  | { admitted: true; jobId: string; agentId: string; env: PodEnv };

/**
 * Dispatches a job to a pod: `admit_job` (false while the agent's breaker is open: nothing else
 * is done), then, in one transaction, the attempt (with `startAttempt`), `job_token` and the push
 * source (with `pushSource`). Returns the {@link PodEnv} to hand to the pod.
 */
export async function dispatch(db: Queryable, options: DispatchOptions): Promise<DispatchResult> {
  const { jobId } = options;
  let agentId = options.agentId;
  if (!agentId) {
    const table = await jobTable(db);
    agentId = (await one<{ a: string }>(db, "dispatch", `SELECT agent_id AS a FROM ${table} WHERE id = $1`, [jobId])).a;
  }
  if (!(await admitJob(db, agentId, jobId))) return { admitted: false, jobId, agentId };
  const env = await inTransaction(db, async (c) => {
    if (options.startAttempt) await startAttempt(c, jobId);
    return mintPodEnv(c, { jobId, ...(options.pushSource ? { pushSource: options.pushSource } : {}) });
  });
  return { admitted: true, jobId, agentId, env };
}

/** Counts the job's attempt up and moves it to RUNNING (see {@link DispatchOptions.startAttempt}). Returns the new attempt. */
export async function startAttempt(db: Queryable, jobId: string): Promise<number> {
  const table = await jobTable(db);
  await one(db, "start_attempt", `SELECT id FROM ${table} WHERE id = $1 FOR UPDATE`, [jobId]);
  try {
    await db.query(`UPDATE ${table} SET status = 'SCHEDULED' WHERE id = $1 AND status::text IN ('PENDING', 'RETRYING')`, [jobId]);
  } catch (e) {
    throw toCortexError(e, "start_attempt");
  }
  const r = await one<{ attempt: number }>(
    db,
    "start_attempt",
    `UPDATE ${table} SET status = 'RUNNING', attempt = attempt + 1, started_at = now(), heartbeat_at = now()
      WHERE id = $1 AND status::text IN ('SCHEDULED', 'RUNNING') RETURNING attempt`,
    [jobId],
  );
  return Number(r.attempt);
}

/**
 * The pod's environment for the job's current attempt: its token, and the push source's token
 * (registered with the job) when asked. A launcher that runs after the dispatch (a task enqueued
 * without secrets in its payload) calls it again: the same attempt gives the same tokens.
 * `expectAttempt` refuses (a `RangeError`) when the job has been dispatched again since.
 */
export async function mintPodEnv(db: Queryable, { jobId, pushSource, expectAttempt }: { jobId: string; pushSource?: string; expectAttempt?: number }): Promise<PodEnv> {
  const token = await jobToken(db, jobId);
  const named = parseJobToken(token);
  if (!named) throw new TypeError("job_token returned an unexpected token format");
  if (expectAttempt !== undefined && named.attempt !== expectAttempt) {
    throw new RangeError(`job ${jobId} is at attempt ${named.attempt}, not ${expectAttempt}: it was dispatched again`);
  }
  const env: PodEnv = { jobId: jobId.toLowerCase(), jobToken: token, attempt: named.attempt };
  if (pushSource) env.pushSource = { source: pushSource, token: await registerPushSource(db, pushSource, jobId) };
  return env;
}
