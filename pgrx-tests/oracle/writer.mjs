// The shipped control plane's session-buffer writer, restated so tests write files the way a pod
// does: its BufferWriter (packages/shared/src/buffer/writer.ts) and writeEventToBuffer
// (agent-execute.ts), which stores the backend's OutputEvent as `data`
// (packages/shared/src/backends/types.ts). docs/design.md §Interoperability facts.
//
// - Every writer (every pod that runs the job) appends to <dir>/<jobId>/session-001.jsonl and
//   counts `sequence` from 0: a restarted job continues the same file with a sequence reset.
// - Each event is one appendFileSync of JSON.stringify(event) + "\n"; `timestamp` is the pod's
//   clock when the event is written.
// - `data` carries no call id: a TOOL_RESULT names its tool, not its call.
//
// As a command, it is one writer's life (or the part of it between two checkpoints):
//   node writer.mjs <sessionsDir> <jobId> <agentId> <sessionId> <firstSequence> <clockOffsetMs> [cutBytes [pauseFile]]
// reads a JSON array of backend OutputEvents on stdin and writes each through writeEventToBuffer.
// With cutBytes, the last event's line is written only that far: the pod was killed mid-append.
// With pauseFile too, the line is written whole, in two parts: after the first cutBytes it
// creates <pauseFile>.paused and waits for <pauseFile>.go (one append of a large line, seen
// half-way by whatever looks at the file then: a checkpoint's high-water mark).
// Prints the next sequence number (what the same writer would use next).
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class BufferWriter {
  constructor(sessionsDir, jobId, agentId, sessionId, sequence = 0, clock = () => new Date()) {
    this.dir = join(sessionsDir, jobId);
    mkdirSync(this.dir, { recursive: true });
    this.file = join(this.dir, "session-001.jsonl");
    this.jobId = jobId;
    this.agentId = agentId;
    this.sessionId = sessionId;
    this.sequence = sequence;
    this.clock = clock;
  }

  line(type, data) {
    const event = {
      version: "1.0",
      timestamp: this.clock().toISOString(),
      jobId: this.jobId,
      sessionId: this.sessionId,
      agentId: this.agentId,
      type,
      data,
      sequence: this.sequence++,
    };
    return JSON.stringify(event) + "\n";
  }

  append(type, data) {
    appendFileSync(this.file, this.line(type, data), { encoding: "utf-8" });
  }
}

// agent-execute.ts: the backend's event type decides the buffer event type; anything else is
// written as an LLM_RESPONSE (the mapping's default).
const BUFFER_TYPE = {
  tool_use: "TOOL_CALL",
  tool_result: "TOOL_RESULT",
  text: "LLM_RESPONSE",
  error: "ERROR",
  complete: "SESSION_END",
};

export function writeEventToBuffer(writer, outputEvent) {
  writer.append(BUFFER_TYPE[outputEvent.type] ?? "LLM_RESPONSE", outputEvent);
}

function main() {
  const [sessionsDir, jobId, agentId, sessionId, first, offset, cut, pause] = process.argv.slice(2);
  const offsetMs = Number(offset ?? 0);
  const clock = () => new Date(Date.now() + offsetMs);
  const writer = new BufferWriter(sessionsDir, jobId, agentId, sessionId, Number(first ?? 0), clock);
  let chunks = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (c) => (chunks += c));
  process.stdin.on("end", () => {
    const events = JSON.parse(chunks || "[]");
    events.forEach((e, i) => {
      // The backend stamps its event with the pod's clock too.
      const outputEvent = { ...e, timestamp: clock().toISOString() };
      if (cut !== undefined && i === events.length - 1) {
        const line = writer.line(BUFFER_TYPE[outputEvent.type] ?? "LLM_RESPONSE", outputEvent);
        const bytes = Buffer.from(line);
        appendFileSync(writer.file, bytes.subarray(0, Number(cut)));
        if (pause !== undefined) {
          writeFileSync(`${pause}.paused`, "");
          const nap = new Int32Array(new SharedArrayBuffer(4));
          while (!existsSync(`${pause}.go`)) Atomics.wait(nap, 0, 0, 5);
          appendFileSync(writer.file, bytes.subarray(Number(cut)));
        }
      } else {
        writeEventToBuffer(writer, outputEvent);
      }
    });
    process.stdout.write(String(writer.sequence));
  });
}

if (import.meta.url === `file://${process.argv[1]}`) main();
