// The control plane's buffer recovery (packages/shared/src/buffer/recovery.ts,
// recoverFromBuffer), restated as an oracle for recovery_plan(match_checkpoint => false).
//
// Its rules: among the job directory's `session-*.jsonl` files, sorted as strings, take the
// last one; judge it with scanBuffer; the events after its last CHECKPOINT event are the ones
// to recover, or all of its events when it has none. Reads one job directory per line on stdin
// and prints "<dir>\t<file>\t<JSON list of [sequence, type, byte offset]>" per directory; the
// byte offset of each event's line is counted on the raw bytes (a newline is never part of a
// UTF-8 sequence, so splitting before decoding finds the same lines).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { scanBufferFile } from "./scan.mjs";

function latestSessionFile(dir) {
  if (!existsSync(dir)) return null;
  const names = readdirSync(dir).filter((n) => n.startsWith("session-") && n.endsWith(".jsonl"));
  names.sort();
  return names.length === 0 ? null : names[names.length - 1];
}

// The byte offset of every line that scanBuffer keeps as an event, in order.
function eventOffsets(bytes) {
  const offsets = [];
  let start = 0;
  while (start <= bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    const line = bytes.subarray(start, end).toString("utf8");
    if (scanBufferFile(line).events.length === 1) offsets.push(start);
    start = end + 1;
  }
  return offsets;
}

const dirs = readFileSync(0, "utf8").split("\n").filter((d) => d !== "");
for (const dir of dirs) {
  const name = latestSessionFile(dir);
  if (name === null) {
    console.log([dir, "", "[]"].join("\t"));
    continue;
  }
  const bytes = readFileSync(join(dir, name));
  const { events } = scanBufferFile(bytes.toString("utf8"));
  const offsets = eventOffsets(bytes);
  let marker = -1;
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === "CHECKPOINT") {
      marker = i;
      break;
    }
  }
  const after = [];
  for (let i = marker + 1; i < events.length; i++) {
    after.push([events[i].sequence ?? null, events[i].type, offsets[i] ?? null]);
  }
  console.log([dir, name, JSON.stringify(after)].join("\t"));
}
