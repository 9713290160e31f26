// The idempotency key of a tool call, computed the way the control plane computes it in
// TypeScript before it makes the call (docs/agent.md: the formula), with its own canonical
// JSON and CRC (canonical.mjs). recovery_plan reports the same key for the call after a crash,
// and cortex_buffer.call_idempotency_key() computes it in SQL.
//
//   sha256_hex("cortex_buffer/call/v2\n" + jobId + "\n" + checkpointRef + "\n" + callOrdinal
//              + "\n" + toolName + "\n" + inputHash)
//   checkpointRef = "crc:" + crc32(canonicalJson(checkpoint))  ("-" without a checkpoint)
//   inputHash     = sha256_hex(canonicalJson(toolInput ?? null))
//
// As a command: one JSON array per stdin line, [jobId, checkpoint|null, callOrdinal, toolName,
// toolInput|null]; prints one key per line.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import { canonicalJson, crc32 } from "./canonical.mjs";

const sha256 = (text) => createHash("sha256").update(Buffer.from(text, "utf8")).digest("hex");

export function checkpointRef(checkpoint) {
  if (checkpoint === null || checkpoint === undefined) return "-";
  return `crc:${crc32(Buffer.from(canonicalJson(checkpoint), "utf8"))}`;
}

export function callIdempotencyKey(jobId, checkpoint, callOrdinal, toolName, toolInput) {
  const inputHash = sha256(canonicalJson(toolInput ?? null));
  return sha256(
    ["cortex_buffer/call/v2", jobId.toLowerCase(), checkpointRef(checkpoint), String(callOrdinal), toolName ?? "", inputHash].join("\n"),
  );
}

function main() {
  const out = [];
  for (const line of readFileSync(0, "utf8").split("\n")) {
    if (line === "") continue;
    const [job, checkpoint, ordinal, tool, input] = JSON.parse(line);
    out.push(callIdempotencyKey(job, checkpoint, ordinal, tool, input));
  }
  process.stdout.write(out.join("\n") + "\n");
}

if (import.meta.url === `file://${process.argv[1]}`) main();
