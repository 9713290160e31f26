//! The last lines of a file read straight from its bytes (a transcript the index does not hold
//! yet, or the bytes after its indexed offset). Pure: the shell reads the bytes.
//!
//! A line counts once terminated by `\n`. The last line counts without a newline too when it
//! parses as a complete JSON object: copies of transcripts often lose their final newline, and
//! a line cut mid-write does not parse.

use crate::json::parse::{js_trim, parse, Kind};

/// One complete line: where it starts and its text (invalid UTF-8 replaced by U+FFFD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailLine {
    pub byte_offset: i64,
    /// Lines of the chunk before this one (blank ones included), from its first complete line.
    pub line_index: i64,
    pub text: String,
}

/// The complete lines of `chunk`, the file's bytes from `start`. When `start` is not known to
/// begin a line, the first (partial) line is dropped. `at_eof`: the chunk ends at the file's
/// end, so an unterminated last line is judged as above.
pub fn lines_of(chunk: &[u8], start: i64, starts_a_line: bool, at_eof: bool) -> Vec<TailLine> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut index = 0i64;
    if !starts_a_line {
        match memchr::memchr(b'\n', chunk) {
            Some(nl) => pos = nl + 1,
            None => return out,
        }
    }
    while pos < chunk.len() {
        let rest = chunk.get(pos..).unwrap_or_default();
        match memchr::memchr(b'\n', rest) {
            Some(nl) => {
                let line = rest.get(..nl).unwrap_or_default();
                let text = String::from_utf8_lossy(line);
                if !js_trim(&text).is_empty() {
                    out.push(TailLine { byte_offset: start + pos as i64, line_index: index, text: text.into_owned() });
                }
                pos += nl + 1;
                index += 1;
            }
            None => {
                let text = String::from_utf8_lossy(rest).into_owned();
                let complete = parse(js_trim(&text)).is_ok_and(|p| p.root.kind == Kind::Object);
                if at_eof && complete {
                    out.push(TailLine { byte_offset: start + pos as i64, line_index: index, text });
                }
                break;
            }
        }
    }
    out
}

/// The `timestamp` a cut line carries (a writer killed mid-append usually got past the
/// envelope's first fields): the first `"timestamp":"…"` in `bytes`, if it is whole and parses.
/// The pod's clock stamped it just before the write that the file's mtime records.
pub fn stamped_at(bytes: &[u8]) -> Option<i64> {
    const KEY: &[u8] = b"\"timestamp\":\"";
    let at = memchr::memmem::find(bytes, KEY)? + KEY.len();
    let rest = bytes.get(at..)?;
    let end = memchr::memchr(b'"', rest)?;
    let text = std::str::from_utf8(rest.get(..end)?).ok()?;
    crate::indexer::timestamp::parse_timestamp(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cut_line_tells_when_it_was_stamped() {
        let cut = br#"{"version":"1.0","timestamp":"2026-03-01T09:00:05.250Z","jobId":"j","ty"#;
        assert_eq!(stamped_at(cut), crate::indexer::timestamp::parse_timestamp("2026-03-01T09:00:05.250Z"));
        assert_eq!(stamped_at(br#"{"version":"1.0","timestamp":"2026-03-01T09:0"#), None, "cut inside it");
        assert_eq!(stamped_at(b"{\"version\":\"1."), None);
    }

    use super::*;

    #[test]
    fn complete_lines_and_a_final_object() {
        let bytes = b"{\"a\":1}\n\n{\"b\":2}\n{\"c\":3}";
        let l = lines_of(bytes, 100, true, true);
        assert_eq!(
            l.iter().map(|l| (l.byte_offset, l.text.as_str())).collect::<Vec<_>>(),
            [(100, "{\"a\":1}"), (109, "{\"b\":2}"), (117, "{\"c\":3}")]
        );
        // Not at the end of the file: the last line may still grow.
        assert_eq!(lines_of(bytes, 0, true, false).len(), 2);
        // Cut mid-write: does not parse, does not count.
        assert_eq!(lines_of(b"{\"a\":1}\n{\"b\":", 0, true, true).len(), 1);
        // Mid-line start: the partial first line is dropped.
        let l = lines_of(b"tail of a line\n{\"x\":1}\n", 50, false, true);
        assert_eq!(l.iter().map(|l| l.byte_offset).collect::<Vec<_>>(), [65]);
        assert!(lines_of(b"no newline at all", 5, false, true).is_empty());
    }
}
