// JSON.parse as the control plane applies it to a session file's lines, as an oracle for the
// fuzz replay (tests/fuzz_replay.rs): the file is read as the control plane reads it
// (fs.readFileSync(path, "utf8"): invalid UTF-8 becomes U+FFFD), split on "\n", each line
// trimmed (String.prototype.trim) and given to JSON.parse.
//
// Arguments: session file paths. stdout: one line per line of each file:
// "<path>\t<line_no>\t<verdict>\t<canonical as hex UTF-8>", where verdict is blank, refused,
// object, array, string, number, boolean or null, and the canonical text (the control plane's
// checkpoint serialisation, canonical.mjs) is given for accepted lines ("-" otherwise; "!<error>"
// when JSON.stringify throws, as it does for nesting some thousands of levels deep).
import { readFileSync } from "node:fs";

import { canonicalJson } from "./canonical.mjs";

const out = [];
for (const path of process.argv.slice(2)) {
  const lines = readFileSync(path, "utf8").split("\n");
  // The piece after the last newline is empty for a file that ends with one.
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  lines.forEach((line, i) => {
    const text = line.trim();
    let verdict = "blank";
    let canonical = "-";
    if (text !== "") {
      let value;
      try {
        value = JSON.parse(text);
        verdict = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
      } catch {
        verdict = "refused";
      }
      if (verdict !== "refused") {
        // JSON.stringify recurses: thousands of levels overflow its stack (the parse did not).
        try {
          canonical = Buffer.from(canonicalJson(value), "utf8").toString("hex") || "-";
        } catch (e) {
          canonical = "!" + e.name;
        }
      }
    }
    out.push(`${path}\t${i + 1}\t${verdict}\t${canonical}`);
  });
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
