//! The canonical JSON (see [`super::canonical`]) of validated JSON text, exactly as the control
//! plane's JavaScript computes it from the same text: `JSON.stringify(JSON.parse(text),
//! sortedReplacer)`.
//!
//! [`super::canonical::write_canonical`] serialises trees whose strings are Rust strings; text
//! can say more than those hold. A lone surrogate escape (`"\ud83d"`, an emoji cut in half) is
//! one UTF-16 code unit of a JavaScript string, which `JSON.stringify` writes back as the escape
//! and sorts, as a key, by that unit; here strings and keys are resolved to WTF-8, which holds
//! such units, and written and ordered by their code units. Nesting has no limit: the writer
//! walks the text with an explicit stack, and a table of where each container closes lets it
//! skip a member's value without reading it again, so 100 000 nested levels cost heap, not
//! thread stack, and time in proportion to the text.
//!
//! Memory: the table (two offsets per container), the members of the objects being written
//! (one entry per member of each open object), their keys that have escapes, and the output
//! not yet flushed.

use super::canonical::order_members;
use super::number::write_js_number;
use super::parse::{skip_ws_at, string_end, unescape_wtf8_into, Kind, Value};
use super::quote::{write_js_string, write_js_wtf8_string};

/// How much output is gathered before it is handed to the caller's sink.
const CHUNK: usize = 64 * 1024;

/// The canonical JSON text of a validated value.
pub fn canonical_text(v: Value<'_>) -> String {
    let mut out = String::new();
    write_canonical_text(v, &mut out, |_| {});
    out
}

/// Appends the canonical JSON text of a validated value to `out`, calling `flush(out)` whenever
/// `out` holds at least 64 KiB and once at the end; `flush` may drain `out` (to stream the text
/// into a hash without holding it all).
pub fn write_canonical_text(v: Value<'_>, out: &mut String, mut flush: impl FnMut(&mut String)) {
    let text = v.text.as_bytes();
    let mut w =
        Writer { src: v.text, text, closes: closes(text), members: Vec::new(), keys: Vec::new(), scratch: Vec::new() };
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending = Some(0);
    loop {
        if let Some(at) = pending.take() {
            match text.get(at) {
                Some(b'{') => {
                    let (first, keys_mark) = (w.members.len(), w.keys.len());
                    w.read_members(at);
                    let (text, keys) = (w.text, &w.keys);
                    let mine = w.members.get_mut(first..).unwrap_or(&mut []);
                    let kept = order_members(mine, |m| m.key(text, keys));
                    w.members.truncate(first + kept);
                    out.push('{');
                    stack.push(Frame::Object { first, next: first, keys_mark });
                }
                Some(b'[') => {
                    out.push('[');
                    stack.push(Frame::Array { at: at + 1, first: true });
                }
                Some(b'"') => w.write_string(at, out),
                Some(b't') => out.push_str("true"),
                Some(b'f') => out.push_str("false"),
                Some(b'n') => out.push_str("null"),
                _ => {
                    let number = Value { kind: Kind::Number, text: v.text.get(at..w.value_end(at)).unwrap_or("") };
                    write_js_number(number.as_f64().unwrap_or(f64::NAN), out);
                }
            }
            if out.len() >= CHUNK {
                flush(out);
            }
        }
        let Some(frame) = stack.last_mut() else { break };
        match frame {
            Frame::Array { at, first } => {
                let mut i = skip_ws_at(text, *at);
                if text.get(i) == Some(&b',') {
                    i = skip_ws_at(text, i + 1);
                }
                if matches!(text.get(i), None | Some(b']')) {
                    out.push(']');
                    stack.pop();
                } else {
                    if !*first {
                        out.push(',');
                    }
                    *first = false;
                    // Always forward, even on text that was never validated.
                    *at = w.value_end(i).max(i + 1);
                    pending = Some(i);
                }
            }
            Frame::Object { first, next, keys_mark } => match w.members.get(*next).copied() {
                Some(m) => {
                    if *next > *first {
                        out.push(',');
                    }
                    *next += 1;
                    write_js_wtf8_string(m.key(text, &w.keys), out);
                    out.push(':');
                    pending = Some(m.value);
                }
                None => {
                    out.push('}');
                    w.members.truncate(*first);
                    w.keys.truncate(*keys_mark);
                    stack.pop();
                }
            },
        }
    }
    flush(out);
}

/// A container being written.
enum Frame {
    /// Where its next item (or the `,` or `]` before it) starts; whether none is written yet.
    Array { at: usize, first: bool },
    /// Its members to write are `members[next..]` (its own start at `first`); its escaped keys
    /// are in `keys` from `keys_mark` on.
    Object { first: usize, next: usize, keys_mark: usize },
}

/// An object member: its key (in the text, or resolved in the key buffer) and its value's offset.
#[derive(Debug, Clone, Copy)]
struct Member {
    key_at: usize,
    key_len: usize,
    resolved: bool,
    value: usize,
}

impl Member {
    /// The key as WTF-8.
    fn key<'k>(&self, text: &'k [u8], keys: &'k [u8]) -> &'k [u8] {
        let from = if self.resolved { keys } else { text };
        from.get(self.key_at..self.key_at + self.key_len).unwrap_or(&[])
    }
}

struct Writer<'t> {
    src: &'t str,
    text: &'t [u8],
    /// Each container's opening and closing offsets, by opening offset.
    closes: Vec<(usize, usize)>,
    /// The members of the objects being written, innermost last.
    members: Vec<Member>,
    /// Their keys written with escapes, resolved to WTF-8.
    keys: Vec<u8>,
    /// A string value's contents, resolved.
    scratch: Vec<u8>,
}

/// Where each container of validated `text` closes, in order of where it opens.
fn closes(text: &[u8]) -> Vec<(usize, usize)> {
    let mut closes = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    while let Some(&c) = text.get(i) {
        match c {
            b'"' => {
                i = string_end(text, i);
                continue;
            }
            b'{' | b'[' => {
                open.push(closes.len());
                closes.push((i, text.len()));
            }
            b'}' | b']' => {
                if let Some(pair) = open.pop().and_then(|k| closes.get_mut(k)) {
                    pair.1 = i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    closes
}

impl Writer<'_> {
    /// The offset just after the value starting at `at`.
    fn value_end(&self, at: usize) -> usize {
        match self.text.get(at) {
            Some(b'"') => string_end(self.text, at),
            Some(b'{' | b'[') => match self.closes.binary_search_by_key(&at, |p| p.0) {
                Ok(k) => self.closes.get(k).map_or(self.text.len(), |p| p.1 + 1),
                Err(_) => self.text.len(),
            },
            _ => {
                let mut i = at;
                while self.text.get(i).is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                {
                    i += 1;
                }
                i
            }
        }
    }

    /// Pushes the members of the object opening at `at` onto `members`, in written order.
    fn read_members(&mut self, at: usize) {
        let text = self.text;
        let mut i = at + 1;
        loop {
            i = skip_ws_at(text, i);
            if text.get(i) == Some(&b',') {
                i = skip_ws_at(text, i + 1);
            }
            if text.get(i) != Some(&b'"') {
                return;
            }
            let end = string_end(text, i);
            let raw = self.src.get(i + 1..end.saturating_sub(1)).unwrap_or("");
            let member = if memchr::memchr(b'\\', raw.as_bytes()).is_some() {
                let key_at = self.keys.len();
                unescape_wtf8_into(raw, &mut self.keys);
                Member { key_at, key_len: self.keys.len() - key_at, resolved: true, value: 0 }
            } else {
                Member { key_at: i + 1, key_len: raw.len(), resolved: false, value: 0 }
            };
            // Past the ':'.
            let value = skip_ws_at(text, skip_ws_at(text, end) + 1);
            self.members.push(Member { value, ..member });
            i = self.value_end(value);
        }
    }

    /// Writes the string starting at `at` as `JSON.stringify` writes the string `JSON.parse`
    /// makes of it.
    fn write_string(&mut self, at: usize, out: &mut String) {
        let end = string_end(self.text, at);
        let raw = self.src.get(at + 1..end.saturating_sub(1)).unwrap_or("");
        if memchr::memchr(b'\\', raw.as_bytes()).is_none() {
            // Validated text without escapes holds nothing `JSON.stringify` escapes.
            write_js_string(raw, out);
            return;
        }
        self.scratch.clear();
        unescape_wtf8_into(raw, &mut self.scratch);
        write_js_wtf8_string(&self.scratch, out);
    }
}

#[cfg(test)]
mod tests {
    //! Expected texts are Node 20's, from the repository root, with
    //!
    //! ```sh
    //! canon() { node --input-type=module -e 'import {canonicalJson} from "./examples/node/keys.mjs"; const t = canonicalJson(JSON.parse(process.argv[1])); console.log(t)' "$1"; }
    //! ```
    //!
    //! (`JSON.stringify` with `keys.mjs`'s sorted replacer): each is noted as `canon '<text>'`.

    use super::*;
    use crate::json::parse::parse;

    fn canon(text: &str) -> String {
        canonical_text(parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}")).root)
    }

    #[test]
    fn lone_surrogates_are_written_back_as_lower_case_escapes() {
        // canon '"\ud83d"'  →  "\ud83d"
        assert_eq!(canon(r#""\ud83d""#), r#""\ud83d""#);
        // canon '"a\uD83Db"'  →  "a\ud83db"
        assert_eq!(canon(r#""a\uD83Db""#), r#""a\ud83db""#);
        // canon '"\ude00x"'  →  "\ude00x"
        assert_eq!(canon(r#""\ude00x""#), r#""\ude00x""#);
        // A low half before a high one pairs with nothing: canon '"\ude00\ud83d"'  →  "\ude00\ud83d"
        assert_eq!(canon(r#""\ude00\ud83d""#), r#""\ude00\ud83d""#);
    }

    #[test]
    fn paired_surrogate_escapes_are_the_character() {
        // canon '"\ud83d\ude00"'  →  "😀"; canon '"\uD83D\uDE00"'  →  "😀"
        assert_eq!(canon(r#""\ud83d\ude00""#), "\"😀\"");
        assert_eq!(canon(r#""\uD83D\uDE00""#), "\"😀\"");
        // canon '"\ud800\ud83d\ude00"'  →  "\ud800😀"
        assert_eq!(canon(r#""\ud800\ud83d\ude00""#), "\"\\ud800😀\"");
    }

    #[test]
    fn keys_with_lone_surrogates_sort_by_code_units() {
        // canon '{"\uffff":1,"\ud83d\ude00":2,"\ud800":3,"\udc00":4,"\ud83d":5,"\ud83dx":6,"\ue000":7,"\ud83d\ue000":8}'
        //   →  {"\ud800":3,"\ud83d":5,"\ud83dx":6,"😀":2,"\ud83d<U+E000>":8,"\udc00":4,"<U+E000>":7,"<U+FFFF>":1}
        // D800 < D83D < D83D 0078 < D83D DE00 < D83D E000 < DC00 < E000 < FFFF: a lone high
        // surrogate followed by U+E000 sorts after the pair that starts with it.
        let text =
            r#"{"\uffff":1,"\ud83d\ude00":2,"\ud800":3,"\udc00":4,"\ud83d":5,"\ud83dx":6,"\ue000":7,"\ud83d\ue000":8}"#;
        assert_eq!(
            canon(text),
            "{\"\\ud800\":3,\"\\ud83d\":5,\"\\ud83dx\":6,\"😀\":2,\"\\ud83d\u{e000}\":8,\"\\udc00\":4,\"\u{e000}\":7,\"\u{ffff}\":1}"
        );
        // Spelled in either case, a lone surrogate is one key (the last value wins):
        // canon '{"a":1,"b":2,"a":3,"\u0061":4,"\ud800":1,"\uD800":2}'  →  {"a":4,"b":2,"\ud800":2}
        assert_eq!(canon(r#"{"a":1,"b":2,"a":3,"\u0061":4,"\ud800":1,"\uD800":2}"#), r#"{"a":4,"b":2,"\ud800":2}"#);
    }

    #[test]
    fn nul_and_other_controls_are_escaped_as_javascript_does() {
        // canon '"\u0000\u001f\b\f\n\r\t\"\\\/\u007f\u2028"'  →  "\u0000\u001f\b\f\n\r\t\"\\/<DEL><U+2028>"
        assert_eq!(
            canon(r#""\u0000\u001f\b\f\n\r\t\"\\\/\u007f\u2028""#),
            "\"\\u0000\\u001f\\b\\f\\n\\r\\t\\\"\\\\/\u{7f}\u{2028}\""
        );
        // canon '{"\u0000":"\u0000","\u0001":1}'  →  {"\u0000":"\u0000","\u0001":1}
        assert_eq!(canon(r#"{"\u0000":"\u0000","\u0001":1}"#), r#"{"\u0000":"\u0000","\u0001":1}"#);
    }

    #[test]
    fn proto_duplicates_and_array_indices_follow_javascript() {
        // canon '{"__proto__":{"a":1},"b":2,"\u005f_proto__":3}'  →  {"b":2}
        assert_eq!(canon(r#"{"__proto__":{"a":1},"b":2,"\u005f_proto__":3}"#), r#"{"b":2}"#);
        // canon '{"b":0,"10":1,"9":2,"01":3,"4294967294":4,"4294967295":5,"-1":6,"\u0031":7}'
        //   →  {"1":7,"9":2,"10":1,"4294967294":4,"-1":6,"01":3,"4294967295":5,"b":0}
        assert_eq!(
            canon(r#"{"b":0,"10":1,"9":2,"01":3,"4294967294":4,"4294967295":5,"-1":6,"\u0031":7}"#),
            r#"{"1":7,"9":2,"10":1,"4294967294":4,"-1":6,"01":3,"4294967295":5,"b":0}"#
        );
        // Members of nested objects and arrays, and white space anywhere: canon ' { "b" : [ { "y" : 1 , "x" : { } } , [ ] ] , "a" : null } '
        //   →  {"a":null,"b":[{"x":{},"y":1},[]]}
        assert_eq!(
            canon(r#" { "b" : [ { "y" : 1 , "x" : { } } , [ ] ] , "a" : null } "#),
            r#"{"a":null,"b":[{"x":{},"y":1},[]]}"#
        );
    }

    #[test]
    fn numbers_are_written_from_the_double_json_parse_reads() {
        // canon '[1.0,1e21,-0,1e400,-1e400,5e-324,1e-7,0.1,123456789012345678901234567890,1284054217024512.25]'
        //   →  [1,1e+21,0,null,null,5e-324,1e-7,0.1,1.2345678901234568e+29,1284054217024512.2]
        assert_eq!(
            canon("[1.0,1e21,-0,1e400,-1e400,5e-324,1e-7,0.1,123456789012345678901234567890,1284054217024512.25]"),
            "[1,1e+21,0,null,null,5e-324,1e-7,0.1,1.2345678901234568e+29,1284054217024512.2]"
        );
        // canon '1e400'  →  null; canon '[-0]'  →  [0]
        assert_eq!(canon("1e400"), "null");
        assert_eq!(canon("-0"), "0");
    }

    #[test]
    fn two_hundred_thousand_levels_cost_no_stack() {
        // Objects whose keys must be reordered, around arrays: 200 000 levels on a test thread's
        // 2 MiB stack. The expected text follows from the cases above; its hash is in keys.rs.
        let n = 100_000;
        let text =
            format!("{}{}\"\\ud800\"{}{}", "{\"z\":1,\"a\":".repeat(n), "[".repeat(n), "]".repeat(n), "}".repeat(n));
        let want =
            format!("{}{}\"\\ud800\"{}{}", "{\"a\":".repeat(n), "[".repeat(n), "]".repeat(n), ",\"z\":1}".repeat(n));
        let started = std::time::Instant::now();
        let got = canon(&text);
        // Linear, not quadratic, in the depth (generous for an unoptimised build on a busy host).
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(got == want, "the deep text differs");
    }

    #[test]
    fn streams_in_chunks() {
        let text = format!("[{}0]", "\"\\ud83d\",".repeat(50_000));
        let (mut chunks, mut all) = (0, String::new());
        let mut out = String::new();
        write_canonical_text(parse(&text).unwrap_or_else(|e| panic!("{e:?}")).root, &mut out, |chunk| {
            chunks += 1;
            all.push_str(chunk);
            chunk.clear();
        });
        assert!(chunks > 1, "{chunks}");
        assert_eq!(all, text);
    }
}
