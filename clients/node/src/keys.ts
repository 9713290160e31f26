/**
 * The idempotency key of a tool call: cortex_buffer's `call_idempotency_key` (call/v3,
 * docs/api.md, Recovery plans), what a pod computes before it makes a call and sends with it,
 * and what `recovery_plan` reports for the same call after a crash. A port of
 * `examples/node/keys.mjs`, byte for byte the same results:
 *
 * ```text
 * sha256_hex("cortex_buffer/call/v3\n" + jobId + "\n" + checkpointRef + "\n" + callOrdinal
 *            + "\n" + toolName + "\n" + inputHash)
 * checkpointRef = "crc:" + CRC-32 of the checkpoint's canonical JSON   ("-" without one)
 * inputHash     = sha256_hex(canonical JSON of the tool input, or of null)
 * callOrdinal   = the call's rank (from 1) among the calls with the same tool and input in this
 *                 writer's replay since that checkpoint
 * ```
 *
 * Canonical JSON is `JSON.stringify` with object keys sorted recursively; the CRC is
 * CRC-32/IEEE over its UTF-8 bytes: the control plane's own checkpoint CRC.
 *
 * @module
 */
import { createHash } from "node:crypto";

const CRC32_TABLE = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let c = i;
  for (let j = 0; j < 8; j++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  CRC32_TABLE[i] = c;
}

/** CRC-32 (IEEE) of some bytes, unsigned. */
export function crc32(buf: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of buf) crc = (CRC32_TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function sortedReplacer(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const sorted: Record<string, unknown> = {};
    const obj = value as Record<string, unknown>;
    for (const k of Object.keys(obj).sort()) sorted[k] = obj[k];
    return sorted;
  }
  return value;
}

/**
 * `JSON.stringify` with object keys sorted recursively: the text the checkpoint CRC and the
 * input hash cover (cortex_buffer's `canonical_json`).
 */
export function canonicalJson(value: unknown): string {
  // JSON.stringify(undefined) is undefined; the callers hash `?? null` first, as keys.mjs does.
  return JSON.stringify(value, sortedReplacer) as string;
}

const sha256 = (text: string): string => createHash("sha256").update(Buffer.from(text, "utf8")).digest("hex");

/** A checkpoint reference as `recovery_plan` spells it: `crc:<unsigned CRC-32>`, or `-`. */
export type CheckpointRef = `crc:${number}` | "-";

/** The reference of a checkpoint document: `crc:` and its CRC, `-` for none. */
export function checkpointRef(checkpoint: unknown): CheckpointRef {
  if (checkpoint === null || checkpoint === undefined) return "-";
  return `crc:${crc32(Buffer.from(canonicalJson(checkpoint), "utf8"))}`;
}

/** The hex SHA-256 of a tool input's canonical JSON: `recovery_plan`'s `input_hash`. */
export function inputHash(toolInput: unknown): string {
  return sha256(canonicalJson(toolInput ?? null));
}

/** The key from a checkpoint reference (`crc:<n>` or `-`, `recovery_plan`'s `checkpoint.ref`). */
export function callKey(
  jobId: string,
  ref: string,
  callOrdinal: number,
  toolName: string | null | undefined,
  hash: string,
): string {
  return sha256(["cortex_buffer/call/v3", jobId.toLowerCase(), ref, String(callOrdinal), toolName ?? "", hash].join("\n"));
}

/**
 * The key from the checkpoint document itself (`null`: none), as `call_idempotency_key(job_id,
 * checkpoint, call_ordinal, tool_name, tool_input)` computes it in SQL.
 */
export function callIdempotencyKey(
  jobId: string,
  checkpoint: unknown,
  callOrdinal: number,
  toolName: string | null | undefined,
  toolInput: unknown,
): string {
  return callKey(jobId, checkpointRef(checkpoint), callOrdinal, toolName, inputHash(toolInput));
}
