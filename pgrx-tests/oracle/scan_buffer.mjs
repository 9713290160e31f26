// The control plane's buffer scan, as an oracle for cortex_buffer's line judging.
//
// scanBufferFile (scan.mjs) is the control plane's own function (Spike #31, "Corruption
// Handling"), unchanged; the file is read as the control plane reads it: fs.readFileSync(path, "utf8"),
// which replaces invalid UTF-8 with U+FFFD. Reads one path per line on stdin and prints one
// line per path: "<path>\t<events>\t<corruptedLines>\t<lastLineTruncated>".
import { readFileSync } from "node:fs";

import { scanBufferFile } from "./scan.mjs";

// With --objects, every JSON object is an event (the rule for Claude Code and wink files);
// everything else is the control plane's code as written.
const objectsOnly = process.argv.includes("--objects");

const paths = readFileSync(0, "utf8").split("\n").filter((p) => p !== "");
for (const path of paths) {
  const r = scanBufferFile(readFileSync(path, "utf8"), objectsOnly);
  console.log([path, r.events.length, r.corruptedLines, r.lastLineTruncated].join("\t"));
}
