// The idempotency key of a tool call, computed the way the control plane computes it in
// JavaScript before it makes the call (docs/agent.md: the formula; examples/node/keys.mjs).
// recovery_plan reports the same key for the call after a crash, and
// cortex_buffer.call_idempotency_key() computes it in SQL.
//
//   sha256_hex("cortex_buffer/call/v3\n" + jobId + "\n" + checkpointRef + "\n" + callOrdinal
//              + "\n" + toolName + "\n" + inputHash)
//   checkpointRef = "crc:" + crc32(canonicalJson(checkpoint))  ("-" without a checkpoint)
//   inputHash     = sha256_hex(canonicalJson(toolInput ?? null))
//
// As a command: one JSON array per stdin line, [jobId, checkpoint|null, callOrdinal, toolName,
// toolInput|null]; prints one key per line.
import { readFileSync } from "node:fs";

// The client example's implementation is the one under test: a user copies it.
import { callIdempotencyKey } from "../../examples/node/keys.mjs";

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
