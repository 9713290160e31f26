//! What one line is: blank, an event, or corrupt — exactly as the control plane's `scanBuffer`
//! judges it for the cortex dialects (docs/design.md §Line and file rules). Pure.
//!
//! The line's bytes are decoded as UTF-8 with invalid sequences replaced by U+FFFD, trimmed of
//! JavaScript white space (BOM and NBSP included), and parsed with `JSON.parse`'s rules. A cortex
//! line is an event when it is an object with `type` and `timestamp` keys; a Claude Code or
//! wink line when it is an object. Whether a parse failure is the file's truncated tail or an
//! interior corrupt line depends on what follows it, so that is decided per file
//! ([`super::integrity`]).

use std::borrow::Cow;

use crate::json::parse::{js_trim, parse, Kind, Parsed};

/// Characters of a corrupt line kept as its preview.
pub const PREVIEW_CHARS: usize = 200;

/// Which lines count as events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// Cortex dialects: an object with `type` and `timestamp` keys (`scanBuffer`).
    Cortex,
    /// Claude Code, wink and not-yet-identified files: any object.
    Object,
}

// `Event` is large (the parser's member slots) but a verdict is returned by value once per line
// and matched at once: boxing it would cost an allocation per line on the indexer's hot path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Verdict<'a> {
    Blank,
    Event(Parsed<'a>),
    /// Valid JSON that is not an event: corrupt wherever it stands.
    NotAnEvent(&'static str),
    /// `JSON.parse` would throw: the truncated tail if only blank lines follow, else corrupt.
    Unparseable(String),
}

/// The line's text as `scanBuffer` sees it (before trimming): borrowed when the bytes are valid
/// UTF-8, owned (invalid sequences replaced by U+FFFD) only when they are not.
pub fn decode(bytes: &[u8]) -> Cow<'_, str> {
    // Valid lines (nearly all) take the fast validator; only invalid ones pay for repairing.
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Judges one decoded line.
pub fn judge(text: &str, rules: Rules) -> Verdict<'_> {
    let trimmed = js_trim(text);
    if trimmed.is_empty() {
        return Verdict::Blank;
    }
    match parse(trimmed) {
        Err(e) => Verdict::Unparseable(format!("not valid JSON: {} at character {}", e.what, e.at)),
        Ok(p) if p.root.kind != Kind::Object => Verdict::NotAnEvent(match p.root.kind {
            Kind::Array => "a JSON array, not an object",
            Kind::String => "a JSON string, not an object",
            Kind::Number => "a JSON number, not an object",
            Kind::Bool => "a JSON boolean, not an object",
            _ => "JSON null, not an object",
        }),
        Ok(p) => match rules {
            Rules::Cortex if !p.has("type") && !p.has("timestamp") => {
                Verdict::NotAnEvent("an object without \"type\" and \"timestamp\"")
            }
            Rules::Cortex if !p.has("type") => Verdict::NotAnEvent("an object without \"type\""),
            Rules::Cortex if !p.has("timestamp") => Verdict::NotAnEvent("an object without \"timestamp\""),
            _ => Verdict::Event(p),
        },
    }
}

/// The first [`PREVIEW_CHARS`] characters of a line, for `corrupt_line.preview`, with NUL
/// bytes shown as U+FFFD (`text` cannot hold them).
pub fn preview(text: &str) -> String {
    let head = match text.char_indices().nth(PREVIEW_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    head.replace('\0', "\u{fffd}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(line: &[u8], rules: Rules) -> &'static str {
        let text = decode(line);
        match judge(&text, rules) {
            Verdict::Blank => "blank",
            Verdict::Event(_) => "event",
            Verdict::NotAnEvent(_) => "not an event",
            Verdict::Unparseable(_) => "unparseable",
        }
    }

    #[test]
    fn cortex_lines_need_type_and_timestamp() {
        let c = Rules::Cortex;
        assert_eq!(verdict(br#"{"type":"X","timestamp":"t"}"#, c), "event");
        // Values do not matter, only the keys (`"type" in parsed`).
        assert_eq!(verdict(br#"{"type":null,"timestamp":0}"#, c), "event");
        assert_eq!(verdict(br#"{"type":"X"}"#, c), "not an event");
        assert_eq!(verdict(br#"{"timestamp":"t"}"#, c), "not an event");
        assert_eq!(verdict(br#"[{"type":"X","timestamp":"t"}]"#, c), "not an event");
        assert_eq!(verdict(b"null", c), "not an event");
        assert_eq!(verdict(b"42", c), "not an event");
        assert_eq!(verdict(br#"{"type":"X","timestamp":"t""#, c), "unparseable");
        // Other dialects take any object.
        assert_eq!(verdict(br#"{"type":"X"}"#, Rules::Object), "event");
        assert_eq!(verdict(b"[]", Rules::Object), "not an event");
    }

    #[test]
    fn javascript_trimming_and_lossy_decoding() {
        let c = Rules::Cortex;
        assert_eq!(verdict(b"   \t\r", c), "blank");
        assert_eq!(verdict("\u{feff}\u{a0}".as_bytes(), c), "blank");
        assert_eq!(verdict("\u{feff}{\"type\":1,\"timestamp\":2}\u{a0}\r".as_bytes(), c), "event");
        // Invalid UTF-8 inside a string becomes U+FFFD: still valid JSON.
        assert_eq!(verdict(b"{\"type\":\"\xff\xfe\",\"timestamp\":1}", c), "event");
        // ... outside a string it is garbage.
        assert_eq!(verdict(b"{\"type\":1,\"timestamp\":2}\xff", c), "unparseable");
        // A NUL byte is a control character: JSON.parse refuses it.
        assert_eq!(verdict(b"{\"type\":\"a\x00b\",\"timestamp\":1}", c), "unparseable");
        assert_eq!(verdict(br#"{"type":"X","timestamp":1e400}"#, c), "event");
        assert_eq!(verdict(br#"{"type":"\ud800","timestamp":1}"#, c), "event");
    }

    #[test]
    fn previews_are_two_hundred_characters() {
        let long = "é".repeat(300);
        assert_eq!(preview(&long).chars().count(), PREVIEW_CHARS);
        assert_eq!(preview("short"), "short");
        assert_eq!(preview("a\0b"), "a\u{fffd}b");
    }
}
