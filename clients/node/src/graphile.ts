/**
 * Graphile Worker tasks for the control plane (`@cortex-buffer/client/graphile`): the zombie
 * reaper, the retention cleanup, and the dispatch that issues the pod's token. Typed against a
 * minimal local interface of Graphile Worker's helpers ({@link GraphileHelpers}), so
 * graphile-worker is not a dependency of this package.
 *
 * In a Graphile Worker tasks directory (0.16), one file per task re-exports a task:
 *
 * ```js
 * // tasks/reap_zombies.js
 * export { reapZombiesTask as default } from "@cortex-buffer/client/graphile";
 * // tasks/cleanup_session_buffers.js
 * export { cleanupSessionBuffersTask as default } from "@cortex-buffer/client/graphile";
 * ```
 *
 * with the crontab of examples/graphile/crontab (`* * * * * reap_zombies`,
 * `0 3 * * * cleanup_session_buffers`). The package's own `tasks/` directory holds these files.
 *
 * @module
 */
import type { DispatchResult, PodEnv } from "./dispatch.js";
import { dispatch } from "./dispatch.js";
import { toCortexError } from "./errors.js";
import type { Queryable } from "./queryable.js";

/** Graphile Worker's logger, as far as the tasks use it. */
export interface GraphileLogger {
  debug(message: string, meta?: unknown): void;
  info(message: string, meta?: unknown): void;
  warn(message: string, meta?: unknown): void;
  error(message: string, meta?: unknown): void;
}

/** What the tasks use of Graphile Worker's `JobHelpers`. */
export interface GraphileHelpers {
  query: Queryable["query"];
  withPgClient<T>(callback: (client: Queryable) => Promise<T>): Promise<T>;
  addJob(identifier: string, payload?: unknown, spec?: { runAt?: Date; jobKey?: string; maxAttempts?: number; queueName?: string }): Promise<unknown>;
  logger: GraphileLogger;
}

/** A Graphile Worker task: the default export of a file in its tasks directory. */
export type GraphileTask<P = unknown> = (payload: P, helpers: GraphileHelpers) => Promise<void>;

// --- the reaper ---------------------------------------------------------------------------------

export interface ReapOptions {
  /** The control plane's task that dispatches a job (default `run_agent_job`). */
  task?: string;
  /** The Graphile job key of a re-enqueued job (default `agent-job:<job id>`). */
  jobKey?: (jobId: string) => string;
  /** `reap_zombies`' `stale_after` (an interval, default `5 minutes`). */
  staleAfter?: string;
  /** `reap_zombies`' `max_jobs` (default 1000). */
  maxJobs?: number;
}

/** A job the reaper moved out of `RUNNING`. */
export interface ReapedJob {
  job_id: string;
  agent_id: string;
  attempt: number;
  new_status: "RETRYING" | "DEAD_LETTER" | string;
  /** `now() + retry_after`; null for a dead letter. */
  run_at: Date | null;
}

/**
 * `reap_zombies()`, then re-enqueues each job it sent to `RETRYING` at `now() + retry_after`
 * under its job key; `DEAD_LETTER` jobs are left alone (examples/graphile/tasks/reap_zombies.js).
 * Moving the job from `RETRYING` to `SCHEDULED` is the dispatching task's own step.
 */
export async function reapZombies(helpers: GraphileHelpers, options: ReapOptions = {}): Promise<ReapedJob[]> {
  const task = options.task ?? "run_agent_job";
  const jobKey = options.jobKey ?? ((id: string) => `agent-job:${id}`);
  let rows: ReapedJob[];
  try {
    ({ rows } = await helpers.query(
      `SELECT job_id, agent_id, attempt, new_status, now() + retry_after AS run_at
         FROM cortex_buffer.reap_zombies($1::interval, $2)`,
      [options.staleAfter ?? null, options.maxJobs ?? null],
    ));
  } catch (e) {
    throw toCortexError(e, "reap_zombies");
  }
  for (const job of rows) {
    if (job.new_status !== "RETRYING") continue; // DEAD_LETTER: no more attempts
    await helpers.addJob(task, { jobId: job.job_id }, { runAt: job.run_at ?? new Date(), jobKey: jobKey(job.job_id) });
  }
  if (rows.length > 0) helpers.logger.info(`reaped ${rows.length} zombie job(s)`);
  return rows;
}

/** The reaper as a task (its payload may carry `staleAfter` and `maxJobs`). */
export function makeReapZombiesTask(options: ReapOptions = {}): GraphileTask<Partial<Pick<ReapOptions, "staleAfter" | "maxJobs">> | null | undefined> {
  return async (payload, helpers) => {
    await reapZombies(helpers, { ...options, ...(payload ?? {}) });
  };
}

/** The reaper with its defaults: `tasks/reap_zombies.js`. */
export const reapZombiesTask: GraphileTask<unknown> = makeReapZombiesTask() as GraphileTask<unknown>;

// --- the cleanup --------------------------------------------------------------------------------

export interface CleanupOptions {
  /** `post_terminal` (default `24 hours`). */
  postTerminal?: string;
  /** `max_file_age` (default `7 days`). */
  maxFileAge?: string;
  /** Change nothing, report what would be done (one call). */
  dryRun?: boolean;
  /** `max_dirs` per call (default 1 000). */
  maxDirs?: number;
  /** `max_unknown_ratio` (default 0.5). */
  maxUnknownRatio?: number;
  /** At most this many calls (default 100). */
  maxCalls?: number;
}

export interface CleanupSummary {
  calls: number;
  /** Per action (`delete_dir`, `delete_file`, `delete_rows`, `drop_partition`, `keep`, `error`), over every call. */
  actions: Record<string, { actions: number; bytes: number }>;
}

/**
 * `cleanup_session_buffers()`, called again while a call deleted anything (each call is its own
 * transaction and deletes from at most `cleanup_max_dirs` directories), logging each call's
 * actions (examples/graphile/tasks/cleanup_session_buffers.js). A dry run makes one call. The
 * login needs `cortex_buffer_operator` (and SELECT on the job table).
 */
export async function cleanupSessionBuffers(helpers: GraphileHelpers, options: CleanupOptions = {}): Promise<CleanupSummary> {
  const args: string[] = [];
  const values: unknown[] = [];
  const arg = (name: string, value: unknown, cast: string): void => {
    if (value === undefined) return;
    values.push(value);
    args.push(`${name} => $${values.length}::${cast}`);
  };
  arg("post_terminal", options.postTerminal, "interval");
  arg("max_file_age", options.maxFileAge, "interval");
  arg("dry_run", options.dryRun, "boolean");
  arg("max_dirs", options.maxDirs, "int");
  arg("max_unknown_ratio", options.maxUnknownRatio, "float8");
  const summary: CleanupSummary = { calls: 0, actions: {} };
  const maxCalls = options.dryRun ? 1 : (options.maxCalls ?? 100);
  for (let call = 1; call <= maxCalls; call++) {
    let rows: Array<{ action: string; actions: number; bytes: string | number }>;
    try {
      ({ rows } = await helpers.query(
        `SELECT action, count(*)::int AS actions, coalesce(sum(bytes), 0)::bigint AS bytes
           FROM cortex_buffer.cleanup_session_buffers(${args.join(", ")})
          GROUP BY action ORDER BY action`,
        values,
      ));
    } catch (e) {
      throw toCortexError(e, "cleanup_session_buffers");
    }
    summary.calls = call;
    for (const r of rows) {
      const a = (summary.actions[r.action] ??= { actions: 0, bytes: 0 });
      a.actions += r.actions;
      a.bytes += Number(r.bytes);
    }
    const text = rows.map((r) => `${r.action}=${r.actions}`).join(" ");
    helpers.logger.info(`cleanup call ${call}${options.dryRun ? " (dry run)" : ""}: ${text || "nothing to do"}`);
    for (const r of rows) if (r.action === "error") helpers.logger.warn(`cleanup: ${r.actions} error row(s); see the function's rows`);
    if (!rows.some((r) => r.action === "delete_dir" || r.action === "delete_file")) break;
  }
  return summary;
}

/** The cleanup as a task (its payload may carry {@link CleanupOptions}). */
export function makeCleanupSessionBuffersTask(options: CleanupOptions = {}): GraphileTask<CleanupOptions | null | undefined> {
  return async (payload, helpers) => {
    await cleanupSessionBuffers(helpers, { ...options, ...(payload ?? {}) });
  };
}

/** The cleanup with its defaults: `tasks/cleanup_session_buffers.js`. */
export const cleanupSessionBuffersTask: GraphileTask<unknown> = makeCleanupSessionBuffersTask() as GraphileTask<unknown>;

// --- dispatch -----------------------------------------------------------------------------------

/** The payload of a dispatch: the job, and what the dispatcher should do. */
export interface DispatchPayload {
  jobId: string;
  agentId?: string;
  /** Register this source for the pod's sidecar shipper. */
  pushSource?: string;
  /** Count the attempt up and move the job to RUNNING (see `dispatch`'s `startAttempt`). */
  startAttempt?: boolean;
}

export interface DispatchTaskOptions {
  /**
   * Starts the pod with its environment (creates its Secret and its Pod, say). The env holds the
   * job token (and the source token): keep it out of logs and job payloads.
   */
  launchPod?: (env: PodEnv, helpers: GraphileHelpers) => Promise<void>;
  /**
   * Enqueues this task to start the pod, with a payload that holds no secret
   * (`{ jobId, attempt, pushSource? }`): the launcher mints the same tokens again with
   * `mintPodEnv(db, { jobId, expectAttempt: attempt, pushSource })`.
   */
  enqueue?: string;
  /** When the agent's breaker is open, dispatch again after this long (default: 60 s; 0: do not). */
  retryAdmissionAfterMs?: number;
  /** This dispatch task's own identifier, to re-enqueue it (default `dispatch_with_token`). */
  self?: string;
}

/**
 * Dispatches a job: `admit_job`, `job_token` (after counting the attempt up, with
 * `startAttempt`), `register_push_source` when asked; then starts the pod (`launchPod`) and/or
 * enqueues its launcher (`enqueue`, without secrets in the payload), and returns the result with
 * the pod's env. When the breaker refuses the job, it is dispatched again later
 * (`retryAdmissionAfterMs`).
 */
export async function dispatchWithToken(payload: DispatchPayload, helpers: GraphileHelpers, options: DispatchTaskOptions = {}): Promise<DispatchResult> {
  const result = await helpers.withPgClient((client) =>
    dispatch(client, {
      jobId: payload.jobId,
      ...(payload.agentId ? { agentId: payload.agentId } : {}),
      ...(payload.pushSource ? { pushSource: payload.pushSource } : {}),
      ...(payload.startAttempt ? { startAttempt: true } : {}),
    }),
  );
  if (!result.admitted) {
    const after = options.retryAdmissionAfterMs ?? 60_000;
    helpers.logger.warn(`job ${payload.jobId}: agent ${result.agentId}'s circuit breaker is open${after > 0 ? `; dispatching again in ${after} ms` : ""}`);
    if (after > 0) {
      await helpers.addJob(options.self ?? "dispatch_with_token", payload, { runAt: new Date(Date.now() + after), jobKey: `dispatch:${payload.jobId}` });
    }
    return result;
  }
  const { env } = result;
  helpers.logger.info(`job ${env.jobId}: attempt ${env.attempt} dispatched${env.pushSource ? ` (push source ${env.pushSource.source})` : ""}`);
  if (options.launchPod) await options.launchPod(env, helpers);
  if (options.enqueue) {
    await helpers.addJob(
      options.enqueue,
      { jobId: env.jobId, attempt: env.attempt, ...(env.pushSource ? { pushSource: env.pushSource.source } : {}) },
      { jobKey: `pod:${env.jobId}:${env.attempt}` },
    );
  }
  return result;
}

/** The dispatch as a task. */
export function makeDispatchTask(options: DispatchTaskOptions = {}): GraphileTask<DispatchPayload> {
  return async (payload, helpers) => {
    await dispatchWithToken(payload, helpers, options);
  };
}

/** The dispatch with its defaults (enqueues `run_agent_pod`): `tasks/dispatch_with_token.js`. */
export const dispatchWithTokenTask: GraphileTask<DispatchPayload> = makeDispatchTask({ enqueue: "run_agent_pod" });
