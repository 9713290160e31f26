// The control plane's checkpoint serialisation and CRC, as its code does it: JSON.parse, then
// JSON.stringify with a replacer that re-inserts object keys in Object.keys().sort() order, then
// CRC-32 (IEEE, table-driven) over the UTF-8 bytes. Used as the oracle for cortex_buffer.
//
// stdin: one JSON string literal per line, holding one document's text.
// stdout: one line per document: "<md5 of canonical text> <crc>".
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

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

// The control plane's canonical text of a parsed value.
export function canonicalJson(value) {
  return JSON.stringify(value, sortedReplacer);
}

function main() {
  const out = [];
  for (const line of readFileSync(0, "utf8").split("\n")) {
    if (line === "") continue;
    const text = JSON.parse(line);
    const bytes = Buffer.from(canonicalJson(JSON.parse(text)), "utf8");
    out.push(`${createHash("md5").update(bytes).digest("hex")} ${crc32(bytes)}`);
  }
  process.stdout.write(out.join("\n") + "\n");
}

if (import.meta.url === `file://${process.argv[1]}`) main();
