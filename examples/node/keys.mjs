// The idempotency key of a tool call (cortex_buffer's call_idempotency_key, docs/agent.md):
// what a pod computes before it makes a call and sends with it, and what recovery_plan reports
// for the same call after a crash.
//
//   sha256_hex("cortex_buffer/call/v3\n" + jobId + "\n" + checkpointRef + "\n" + callOrdinal
//              + "\n" + toolName + "\n" + inputHash)
//   checkpointRef = "crc:" + CRC-32 of the checkpoint's canonical JSON  ("-" without one)
//   inputHash     = sha256_hex(canonical JSON of the tool input, or of null)
//   callOrdinal   = the call's rank (from 1) among the calls with the same tool and input in
//                   this writer's replay since that checkpoint: the one it resumed from, or the
//                   last one it stored itself (every call of the replay counts: skipped,
//                   verified or run; checkpoints others store change nothing)
//
// Canonical JSON is JSON.stringify with object keys sorted recursively; the CRC is CRC-32/IEEE
// over its UTF-8 bytes: the control plane's own checkpoint CRC.
import { createHash } from "node:crypto";

const CRC32_TABLE = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let c = i;
  for (let j = 0; j < 8; j++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  CRC32_TABLE[i] = c;
}

export function crc32(buf) {
  let crc = 0xffffffff;
  for (const byte of buf) crc = CRC32_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function sortedReplacer(_key, value) {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const sorted = {};
    for (const k of Object.keys(value).sort()) sorted[k] = value[k];
    return sorted;
  }
  return value;
}

export function canonicalJson(value) {
  return JSON.stringify(value, sortedReplacer);
}

const sha256 = (text) => createHash("sha256").update(Buffer.from(text, "utf8")).digest("hex");

export function checkpointRef(checkpoint) {
  if (checkpoint === null || checkpoint === undefined) return "-";
  return `crc:${crc32(Buffer.from(canonicalJson(checkpoint), "utf8"))}`;
}

// The hex SHA-256 of a tool input's canonical JSON: recovery_plan's input_hash.
export function inputHash(toolInput) {
  return sha256(canonicalJson(toolInput ?? null));
}

// The key from a checkpoint reference ("crc:<n>" or "-", recovery_plan's checkpoint.ref).
export function callKey(jobId, ref, callOrdinal, toolName, hash) {
  return sha256(["cortex_buffer/call/v3", jobId.toLowerCase(), ref, String(callOrdinal), toolName ?? "", hash].join("\n"));
}

export function callIdempotencyKey(jobId, checkpoint, callOrdinal, toolName, toolInput) {
  return callKey(jobId, checkpointRef(checkpoint), callOrdinal, toolName, inputHash(toolInput));
}
