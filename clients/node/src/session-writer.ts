/**
 * A pod's session file writer: `<dir>/<job id>/session-NNN.jsonl`, the files cortex_buffer
 * indexes (docs/design.md, JSONL dialects; docs/api.md, Session files) and recovery plans are
 * made from.
 *
 * **Dialect.** The default, `cortex-plane`, is the shipped control plane's writer's layout
 * (`{"version":"1.0","timestamp","jobId","sessionId","agentId","sequence","type","data"}`, as in
 * `examples/sessions/0193a900-…/session-001.jsonl`), with what the shipped writer lacks added in
 * `data`: a call id on every call and result, the idempotency key the pod sends, the input hash,
 * and checkpoint markers. `cortex-spike` writes the spike's flat snake_case lines
 * (`invocation_id`, `idempotency_key`, `input_hash`, `seq`, `TOOL_START`, `CHECKPOINT_WRITTEN`).
 * Both carry the same facts; they differ in one rule of `recovery_plan` (docs/api.md, Recovery
 * plans, Phase 2, step 6): for a job with **no checkpoint**, a plan reads every writer of every
 * file of the shipped dialect, but only the latest writer segment of the latest file of the
 * spike's. A spike-dialect pod that crashes on a first run after its predecessor crashed too
 * (or after a rollover) therefore hides its predecessors' finished calls from the next plan,
 * which would run them again. Use `cortex-spike` only for pods that checkpoint before their
 * first tool call.
 *
 * | fact | `cortex-plane` (default) | `cortex-spike` |
 * |---|---|---|
 * | sequence number | `sequence` | `seq` |
 * | call started | `TOOL_CALL`, `data.{toolCallId, toolName, toolInput, idempotencyKey, inputHash}` | `TOOL_START`, `invocation_id, tool_name, input, input_hash, idempotency_key` |
 * | call finished | `TOOL_RESULT`, `data.{toolCallId, toolName, output, isError}` | `TOOL_RESULT`, `invocation_id, tool_name, success, result_summary` |
 * | checkpoint stored | `CHECKPOINT`, `data.{checkpointId, stepIndex}` | `CHECKPOINT_WRITTEN`, `checkpoint_id, step_index` |
 * | checkpoint loaded | `CHECKPOINT_LOADED`, `data.{checkpointId, stepIndex}` | `CHECKPOINT_LOADED`, `checkpoint_id, step_index` |
 *
 * The idempotency key is written where cortex_buffer will read it (`data.idempotencyKey`,
 * `idempotency_key`); 0.17.0 reports it as written (`key_status: "written"`).
 *
 * **Durability.** The file is opened with `O_APPEND` and every line is one `write(2)` of the
 * whole line with its newline (`fs.writeSync`), so lines of one writer never interleave and a
 * crash of the pod (SIGKILL, OOM kill) leaves at most one cut last line. The next writer that
 * continues the file starts with a newline in the same write as its first line: the cut line
 * stays a line of its own, followed by a new writer (`sequence` 0, `SESSION_START`), which the
 * indexer counts as a *crash cut*, not held against the file's trust. A machine crash can lose
 * what the page cache held: by default the writer `fdatasync`s after each call's start and each
 * checkpoint marker (`durability: 'calls'`), so a call the pod made is never missing from its
 * file; `'lines'` syncs every line, `'none'` never.
 *
 * **New files** appear with their first line already in them (written to a temporary name
 * that no discovery rule selects, then hard-linked into place): a file the indexer saw empty
 * would get its dialect from its name, for good.
 *
 * **Rollover** only ever starts the next `session-NNN.jsonl` in the job directory, never renames
 * or truncates: when a line would take the file past `rolloverBytes`, the writer starts
 * `session-<NNN+1>.jsonl` with `sequence` 0 and, if it knows one, a `CHECKPOINT_LOADED` of the
 * checkpoint its calls are keyed under, then goes on. A new writer (a new pod) continues the
 * latest file of the job directory (`continueLatest`, as the shipped writer does), or starts the
 * next one.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

import { inputHash } from "./keys.js";

export type SessionDialect = "cortex-plane" | "cortex-spike";

export interface SessionWriterOptions {
  /**
   * The sessions directory: the server's `cortex_buffer.sessions_dir` when the server tails the
   * pod's volume, or the pod's own volume that a shipper pushes.
   */
  dir: string;
  jobId: string;
  agentId?: string;
  /** The session's id (a UUID per pod by default). */
  sessionId?: string;
  /** Written in `SESSION_START`. */
  podName?: string;
  /** Default `cortex-plane`; see the module's documentation before choosing `cortex-spike`. */
  dialect?: SessionDialect;
  /** Start the next file when a line would take the file past this size. Default 64 MiB. */
  rolloverBytes?: number;
  /** Continue the latest `session-NNN.jsonl` of the job directory (default) or start the next one. */
  continueLatest?: boolean;
  /** `fdatasync` after each call start and marker (`calls`, default), after every line, or never. */
  durability?: "calls" | "lines" | "none";
  /** Give new directories and files this owner (the server's OS user must be able to read them). */
  owner?: { uid: number; gid: number };
  /** Mode of new files (default 0o644) and directories (default 0o755). */
  fileMode?: number;
  dirMode?: number;
  /** The clock for `timestamp` (tests). */
  now?: () => Date;
}

/** A call the writer logged as started: pass it to {@link SessionWriter.toolResult}. */
export interface ToolCallHandle {
  readonly callId: string;
  readonly tool: string;
  readonly idempotencyKey: string | undefined;
  readonly file: string;
  readonly offset: number;
}

/** A checkpoint as the writer records it loaded or stored. */
export interface CheckpointMark {
  checkpoint_id: string | null;
  step_index: number | null;
}

/** A file with bytes an `await_pushed` has not covered yet. */
export interface PendingFlush {
  /** `<job id>/session-NNN.jsonl`, what `await_pushed` takes. */
  relpath: string;
  size: number;
}

const FILE_RE = /^session-(\d+)\.jsonl$/;
const DEFAULT_ROLLOVER = 64 * 1024 * 1024;

const fileName = (n: number): string => `session-${String(n).padStart(3, "0")}.jsonl`;

/**
 * Writes one pod's session lines. Synchronous by design: each method returns once its line is
 * written (and synced, per `durability`). See the module's documentation for the format, the
 * durability and the rollover rules.
 */
export class SessionWriter {
  readonly jobId: string;
  readonly sessionId: string;
  readonly dialect: SessionDialect;
  readonly jobDir: string;
  private readonly opts: SessionWriterOptions;
  private readonly rolloverBytes: number;
  private fileNo: number;
  private fd: number | null = null;
  private fileSize = 0;
  private seqNo = 0;
  private linesHere = 0;
  private pendingNewline = false;
  private loaded: CheckpointMark | undefined;
  private readonly flushed = new Map<string, number>();
  private readonly sizes = new Map<string, number>();
  private closed = false;

  private constructor(opts: SessionWriterOptions) {
    this.opts = opts;
    this.jobId = opts.jobId.toLowerCase();
    this.sessionId = opts.sessionId ?? randomUUID();
    this.dialect = opts.dialect ?? "cortex-plane";
    this.rolloverBytes = opts.rolloverBytes ?? DEFAULT_ROLLOVER;
    this.jobDir = path.join(opts.dir, this.jobId);
    this.ensureDir();
    const latest = this.latestFileNo();
    this.fileNo = latest ?? 1;
    if (latest !== null && (opts.continueLatest ?? true)) {
      const st = fs.statSync(this.file);
      if (st.size >= this.rolloverBytes) this.fileNo = latest + 1;
      else this.continueFile(st.size);
    } else if (latest !== null) {
      this.fileNo = latest + 1;
    }
    this.sizes.set(this.relpath, this.fileSize);
  }

  /** Opens the writer of a pod (creates the job directory if needed; a new file appears with its first line). */
  static open(opts: SessionWriterOptions): SessionWriter {
    return new SessionWriter(opts);
  }

  /** The absolute path of the file being written. */
  get file(): string {
    return path.join(this.jobDir, fileName(this.fileNo));
  }

  /** `<job id>/session-NNN.jsonl`: the relpath a shipper pushes it under, for `await_pushed`. */
  get relpath(): string {
    return `${this.jobId}/${fileName(this.fileNo)}`;
  }

  /** The file's size: what every writer wrote to it, as far as this one knows. */
  get size(): number {
    return this.fileSize;
  }

  /** The sequence number of the next line. */
  get seq(): number {
    return this.seqNo;
  }

  /** The checkpoint the writer's calls are keyed under (the last loaded or stored), if known. */
  get keyCheckpoint(): CheckpointMark | undefined {
    return this.loaded;
  }

  /** `SESSION_START`: the first line of a pod's session. */
  sessionStart(extra: Record<string, unknown> = {}): void {
    if (this.dialect === "cortex-plane") this.write("SESSION_START", { ...(this.opts.podName ? { podName: this.opts.podName } : {}), ...extra });
    else
      this.write("SESSION_START", {
        buffer_schema_version: 1,
        ...(this.opts.agentId ? { agent_id: this.opts.agentId } : {}),
        ...(this.opts.podName ? { pod_name: this.opts.podName } : {}),
        ...extra,
      });
  }

  /**
   * `CHECKPOINT_LOADED`: the checkpoint this pod resumed from (its plan's `checkpoint`; `null`
   * for none). Write it after `SESSION_START`, before the first call.
   */
  checkpointLoaded(checkpoint: CheckpointMark | null): void {
    const mark = { checkpoint_id: checkpoint?.checkpoint_id ?? null, step_index: checkpoint?.step_index ?? null };
    this.write("CHECKPOINT_LOADED", this.markFields(mark));
    this.loaded = mark;
  }

  /**
   * The call's start, before the call is made: its id, tool, input, input hash and the
   * idempotency key the pod sends with it. Synced (per `durability`) before it returns.
   */
  toolStart(tool: string, input: unknown, { idempotencyKey, callId = randomUUID() }: { idempotencyKey?: string; callId?: string } = {}): ToolCallHandle {
    const hash = inputHash(input);
    const offset = this.write(
      this.dialect === "cortex-plane" ? "TOOL_CALL" : "TOOL_START",
      this.dialect === "cortex-plane"
        ? {
            type: "tool_use",
            toolCallId: callId,
            toolName: tool,
            ...(input === undefined ? {} : { toolInput: input }),
            inputHash: hash,
            ...(idempotencyKey ? { idempotencyKey } : {}),
          }
        : {
            invocation_id: callId,
            tool_name: tool,
            ...(input === undefined ? {} : { input }),
            input_hash: hash,
            ...(idempotencyKey ? { idempotency_key: idempotencyKey } : {}),
          },
      this.opts.durability !== "none",
    );
    return { callId, tool, idempotencyKey, file: this.file, offset };
  }

  /** The call's result (`success` false: it failed; `result` is its output, any JSON value). */
  toolResult(call: Pick<ToolCallHandle, "callId" | "tool">, { success = true, result }: { success?: boolean; result?: unknown } = {}): void {
    this.write(
      "TOOL_RESULT",
      this.dialect === "cortex-plane"
        ? { type: "tool_result", toolCallId: call.callId, toolName: call.tool, output: result ?? null, isError: !success }
        : { invocation_id: call.callId, tool_name: call.tool, success, result_summary: result ?? null },
    );
  }

  /**
   * The checkpoint marker, once `write_checkpoint` has stored it (`Pod.checkpoint` writes it):
   * the pod's calls after it are keyed under it.
   */
  checkpointWritten(checkpointId: string, stepIndex: number | null): void {
    const mark = { checkpoint_id: checkpointId, step_index: stepIndex };
    // A file rolled over for this very line starts with the checkpoint loaded before it.
    this.write(this.dialect === "cortex-plane" ? "CHECKPOINT" : "CHECKPOINT_WRITTEN", this.markFields(mark), this.opts.durability !== "none");
    this.loaded = mark;
  }

  /**
   * Any other event (`LLM_REQUEST`, `LLM_RESPONSE`, `ERROR`, …), its fields in the dialect's place
   * (`data` for `cortex-plane`, the line itself for `cortex-spike`).
   */
  event(type: string, fields: Record<string, unknown> = {}): void {
    this.write(type, fields);
  }

  /** Files this writer wrote to with bytes the last flush did not cover (for `await_pushed`). */
  pendingFlush(): PendingFlush[] {
    const out: PendingFlush[] = [];
    for (const [relpath, size] of this.sizes) if ((this.flushed.get(relpath) ?? -1) < size) out.push({ relpath, size });
    return out;
  }

  /** Records that the server has `relpath` up to `size` (an `await_pushed` returned true). */
  markFlushed(relpath: string, size: number): void {
    this.flushed.set(relpath, Math.max(size, this.flushed.get(relpath) ?? 0));
  }

  /** Closes the file. The writer cannot write after this. */
  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    this.closed = true;
  }

  // -------------------------------------------------------------------------------------------

  private markFields(mark: CheckpointMark): Record<string, unknown> {
    return this.dialect === "cortex-plane"
      ? { checkpointId: mark.checkpoint_id, stepIndex: mark.step_index }
      : { checkpoint_id: mark.checkpoint_id, step_index: mark.step_index };
  }

  private line(type: string, fields: Record<string, unknown>): string {
    const timestamp = (this.opts.now?.() ?? new Date()).toISOString();
    const seq = this.seqNo;
    const obj =
      this.dialect === "cortex-plane"
        ? {
            version: "1.0",
            timestamp,
            jobId: this.jobId,
            sessionId: this.sessionId,
            ...(this.opts.agentId ? { agentId: this.opts.agentId } : {}),
            sequence: seq,
            type,
            data: fields,
          }
        : { type, timestamp, job_id: this.jobId, session_id: this.sessionId, seq, ...fields };
    return `${JSON.stringify(obj)}\n`;
  }

  /** Writes one line; returns its byte offset. */
  private write(type: string, fields: Record<string, unknown>, sync = false): number {
    if (this.closed) throw new Error("the session writer is closed");
    let text = this.line(type, fields);
    if (this.linesHere > 0 && this.fileSize + Buffer.byteLength(text) > this.rolloverBytes) {
      // A CHECKPOINT_LOADED line is itself what a rolled file starts with.
      this.rollover(type !== "CHECKPOINT_LOADED");
      text = this.line(type, fields);
    }
    const offset = this.append(text);
    if (sync || this.opts.durability === "lines") this.sync();
    return offset;
  }

  private rollover(loadedFirst = true): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    this.fileNo += 1;
    this.fileSize = 0;
    this.seqNo = 0;
    this.linesHere = 0;
    this.pendingNewline = false;
    this.sizes.set(this.relpath, 0);
    if (this.loaded && loadedFirst) this.append(this.line("CHECKPOINT_LOADED", this.markFields(this.loaded)));
  }

  /** One write of the whole line (with the newline a cut predecessor needs). */
  private append(line: string): number {
    const bytes = Buffer.from(this.pendingNewline ? `\n${line}` : line, "utf8");
    let offset = this.fileSize + (this.pendingNewline ? 1 : 0);
    if (this.fd === null && !fs.existsSync(this.file)) {
      this.create(bytes);
      offset = 0;
    } else {
      if (this.fd === null) {
        // The file appeared since (another writer): continue it.
        this.continueFile(fs.statSync(this.file).size);
        return this.append(line);
      }
      let done = fs.writeSync(this.fd, bytes);
      // A regular file takes the whole write unless the disk is full; finish a short one.
      while (done < bytes.length) done += fs.writeSync(this.fd, bytes, done);
    }
    this.fileSize += bytes.length;
    this.pendingNewline = false;
    this.seqNo += 1;
    this.linesHere += 1;
    this.sizes.set(this.relpath, this.fileSize);
    return offset;
  }

  /** A new file, with its first line in it from the start. */
  private create(first: Buffer): void {
    const target = this.file;
    const tmp = path.join(this.jobDir, `.${fileName(this.fileNo)}.${process.pid}.${randomUUID()}.tmp`);
    fs.writeFileSync(tmp, first, { mode: this.opts.fileMode ?? 0o644, flag: "wx" });
    try {
      if (this.opts.owner) fs.chownSync(tmp, this.opts.owner.uid, this.opts.owner.gid);
      if (this.opts.durability !== "none") {
        const t = fs.openSync(tmp, "r");
        fs.fdatasyncSync(t);
        fs.closeSync(t);
      }
      fs.linkSync(tmp, target);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    this.fd = fs.openSync(target, "a");
    if (this.opts.durability !== "none") this.syncDir();
  }

  private continueFile(size: number): void {
    this.fd = fs.openSync(this.file, "a");
    this.fileSize = size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      const r = fs.openSync(this.file, "r");
      try {
        fs.readSync(r, last, 0, 1, size - 1);
      } finally {
        fs.closeSync(r);
      }
      this.pendingNewline = last[0] !== 0x0a;
    }
  }

  private sync(): void {
    if (this.fd !== null) fs.fdatasyncSync(this.fd);
  }

  private syncDir(): void {
    try {
      const d = fs.openSync(this.jobDir, "r");
      try {
        fs.fsyncSync(d);
      } finally {
        fs.closeSync(d);
      }
    } catch {
      // Some file systems refuse fsync on a directory: the file itself is synced.
    }
  }

  private ensureDir(): void {
    if (!fs.existsSync(this.jobDir)) {
      fs.mkdirSync(this.jobDir, { recursive: true, mode: this.opts.dirMode ?? 0o755 });
      if (this.opts.owner) fs.chownSync(this.jobDir, this.opts.owner.uid, this.opts.owner.gid);
    }
  }

  private latestFileNo(): number | null {
    let max: number | null = null;
    for (const name of fs.readdirSync(this.jobDir)) {
      const m = FILE_RE.exec(name);
      if (m) max = Math.max(max ?? 0, Number(m[1]));
    }
    return max;
  }
}
