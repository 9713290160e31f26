// The control plane's buffer scan, as an oracle for cortex_buffer's line judging.
//
// scanBufferFile is the control plane's own function (Spike #31, "Corruption Handling"),
// unchanged; the file is read as the control plane reads it: fs.readFileSync(path, "utf8"),
// which replaces invalid UTF-8 with U+FFFD. Reads one path per line on stdin and prints one
// line per path: "<path>\t<events>\t<corruptedLines>\t<lastLineTruncated>".
import { readFileSync } from "node:fs";

// With --objects, every JSON object is an event (the rule for Claude Code and wink files);
// everything else is the control plane's code as written.
const objectsOnly = process.argv.includes("--objects");

function scanBufferFile(content) {
  const lines = content.split("\n");
  const events = [];
  let corruptedLines = 0;
  let lastLineTruncated = false;

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "") continue; // Skip empty lines (including trailing newline)

    try {
      const parsed = JSON.parse(line);

      // Minimal structural validation: must be an object with type and timestamp.
      if (
        parsed !== null &&
        typeof parsed === "object" &&
        !Array.isArray(parsed) &&
        (objectsOnly || ("type" in parsed && "timestamp" in parsed))
      ) {
        events.push(parsed);
      } else {
        corruptedLines++;
      }
    } catch {
      // JSON parse failure. If this is the last non-empty line,
      // it's likely a truncated write (crash mid-append).
      const isLastLine = lines.slice(i + 1).every((l) => l.trim() === "");
      if (isLastLine) {
        lastLineTruncated = true;
      } else {
        corruptedLines++;
      }
    }
  }

  return { events, corruptedLines, lastLineTruncated };
}

const paths = readFileSync(0, "utf8").split("\n").filter((p) => p !== "");
for (const path of paths) {
  const r = scanBufferFile(readFileSync(path, "utf8"));
  console.log([path, r.events.length, r.corruptedLines, r.lastLineTruncated].join("\t"));
}
