// Shared by the tests: the cluster (PGHOST, PGPORT, PGUSER, PGDATABASE: a role that may create
// roles and act as the control plane; the database has the extension), the sessions directory
// (CORTEX_SESSIONS_DIR: the cluster's cortex_buffer.sessions_dir), the agent login the pods use
// (CORTEX_AGENT_USER, default cortex_client_agent, created and granted cortex_buffer_agent if
// missing), and the owner to give session files (CORTEX_SESSIONS_OWNER, a user name or uid:gid;
// when the tests run as root it defaults to the OS user "postgres").
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

import pg from "pg";

import { SessionWriter, createJob, dispatch } from "@cortex-buffer/client";
import type { PodEnv, SessionWriterOptions } from "@cortex-buffer/client";
import type { GraphileHelpers } from "@cortex-buffer/client/graphile";

export const SESSIONS_DIR = process.env.CORTEX_SESSIONS_DIR ?? "";
export const AGENT_USER = process.env.CORTEX_AGENT_USER ?? "cortex_client_agent";

if (!SESSIONS_DIR) throw new Error("set CORTEX_SESSIONS_DIR to the cluster's cortex_buffer.sessions_dir");

function resolveOwner(): { uid: number; gid: number } | undefined {
  const spec = process.env.CORTEX_SESSIONS_OWNER ?? (process.getuid?.() === 0 ? "postgres" : "");
  if (!spec) return undefined;
  const m = /^(\d+):(\d+)$/.exec(spec);
  if (m) return { uid: Number(m[1]), gid: Number(m[2]) };
  try {
    return {
      uid: Number(execFileSync("id", ["-u", spec], { encoding: "utf8" }).trim()),
      gid: Number(execFileSync("id", ["-g", spec], { encoding: "utf8" }).trim()),
    };
  } catch {
    return undefined;
  }
}
export const OWNER = resolveOwner();

/** The control plane's pool (PG* env vars). */
export const admin = new pg.Pool({ max: 4 });

let agentReady: Promise<void> | undefined;
/** Makes sure the agent login exists and holds cortex_buffer_agent. */
export function ensureAgentRole(): Promise<void> {
  agentReady ??= (async () => {
    const { rows } = await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [AGENT_USER]);
    if (rows.length === 0) await admin.query(`CREATE ROLE ${pg.escapeIdentifier(AGENT_USER)} LOGIN`);
    const { rows: m } = await admin.query("SELECT pg_has_role($1, 'cortex_buffer_agent', 'MEMBER') AS m", [AGENT_USER]);
    if (!m[0].m) await admin.query(`GRANT cortex_buffer_agent TO ${pg.escapeIdentifier(AGENT_USER)}`);
  })();
  return agentReady;
}

const opened: Array<pg.Pool | pg.Client> = [];
const dirs: string[] = [];

/** A pool of the pod's login (a pod's own client-side pool). */
export async function agentPool(max = 2): Promise<pg.Pool> {
  await ensureAgentRole();
  const pool = new pg.Pool({ user: AGENT_USER, max, ...(process.env.CORTEX_AGENT_PASSWORD ? { password: process.env.CORTEX_AGENT_PASSWORD } : {}) });
  pool.on("error", () => {}); // a pod's connection dropped on purpose
  opened.push(pool);
  return pool;
}

/** One connection of the pod's login. */
export async function agentClient(): Promise<pg.Client> {
  await ensureAgentRole();
  const c = new pg.Client({ user: AGENT_USER, ...(process.env.CORTEX_AGENT_PASSWORD ? { password: process.env.CORTEX_AGENT_PASSWORD } : {}) });
  c.on("error", () => {});
  await c.connect();
  opened.push(c);
  return c;
}

/** A new job (fresh ids), dispatched: its first attempt's env. */
export async function newDispatchedJob(options: { pushSource?: string } = {}): Promise<{ jobId: string; agentId: string; env: PodEnv }> {
  const agentId = randomUUID();
  const jobId = await createJob(admin, { agentId });
  dirs.push(path.join(SESSIONS_DIR, jobId));
  const r = await dispatch(admin, { jobId, agentId, startAttempt: true, ...options });
  if (!r.admitted) throw new Error("not admitted");
  return { jobId, agentId, env: r.env };
}

/** Dispatches the job again: a new attempt, a new token; the previous pod is superseded. */
export async function redispatch(jobId: string, options: { pushSource?: string } = {}): Promise<PodEnv> {
  const r = await dispatch(admin, { jobId, startAttempt: true, ...options });
  if (!r.admitted) throw new Error("not admitted");
  return r.env;
}

/** A session writer in the cluster's sessions directory, owned as the server needs. */
export function writer(jobId: string, options: Partial<SessionWriterOptions> = {}): SessionWriter {
  return SessionWriter.open({ dir: SESSIONS_DIR, jobId, ...(OWNER ? { owner: OWNER } : {}), ...options });
}

/** A job directory (for tests that write files by hand). */
export function jobDir(jobId: string): string {
  const d = path.join(SESSIONS_DIR, jobId);
  if (!fs.existsSync(d)) {
    fs.mkdirSync(d);
    if (OWNER) fs.chownSync(d, OWNER.uid, OWNER.gid);
  }
  if (!dirs.includes(d)) dirs.push(d);
  return d;
}

/** Appends raw bytes to a file in a job directory (a writer's crash, a cut line). */
export function appendRaw(file: string, text: string): void {
  fs.appendFileSync(file, text);
  if (OWNER) fs.chownSync(file, OWNER.uid, OWNER.gid);
}

/**
 * An external system that remembers what ran, by idempotency key: what the tests' tools act on.
 * `effects` counts how many times each call's effect happened (by content).
 */
export class FakeExternalSystem {
  readonly byKey = new Map<string, unknown>();
  readonly effects = new Map<string, number>();
  run(tool: string, input: unknown, key: string, result: unknown): unknown {
    if (this.byKey.has(key)) return this.byKey.get(key); // the provider's own idempotency
    this.byKey.set(key, result);
    const what = `${tool} ${JSON.stringify(input)}`;
    this.effects.set(what, (this.effects.get(what) ?? 0) + 1);
    return result;
  }
  lookup(keys: string[]): { ran: true; result: unknown } | { ran: false } {
    for (const k of keys) if (this.byKey.has(k)) return { ran: true, result: this.byKey.get(k) };
    return { ran: false };
  }
}

/** A Graphile Worker helpers object over the admin pool, recording addJob calls and logs. */
export function fakeHelpers(): GraphileHelpers & { jobs: Array<{ identifier: string; payload: unknown; spec: unknown }>; logs: string[] } {
  const jobs: Array<{ identifier: string; payload: unknown; spec: unknown }> = [];
  const logs: string[] = [];
  const log = (level: string) => (m: string) => void logs.push(`${level}: ${m}`);
  return {
    jobs,
    logs,
    query: (text, values) => admin.query(text, values),
    withPgClient: async (cb) => {
      const c = await admin.connect();
      try {
        return await cb(c);
      } finally {
        c.release();
      }
    },
    addJob: async (identifier, payload, spec) => {
      jobs.push({ identifier, payload, spec });
      return { id: jobs.length };
    },
    logger: { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") },
  };
}

/** Ends what the tests opened, and removes their job directories (CORTEX_KEEP_FILES=1 keeps them). */
export async function teardown(): Promise<void> {
  for (const c of opened.splice(0)) await c.end().catch(() => {});
  if (process.env.CORTEX_KEEP_FILES !== "1") for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}

export async function closeAdmin(): Promise<void> {
  await admin.end();
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
