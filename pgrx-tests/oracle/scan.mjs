// The control plane's buffer scan (Spike #31, "Corruption Handling"), shared by the oracles.
//
// scanBufferFile is the control plane's own function, unchanged apart from the `objectsOnly`
// switch: with it, every JSON object is an event (the rule for Claude Code and wink files).

export function scanBufferFile(content, objectsOnly = false) {
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

