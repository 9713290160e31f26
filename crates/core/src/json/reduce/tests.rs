//! The reducer against the line path: the same acceptance for the same bytes, however they are
//! cut into pieces; output that always parses and says the same as the line when nothing was
//! cut; memory within its limit.

use super::*;
use crate::indexer::judge::decode;
use crate::json::canonical_text::canonical_text;
use crate::json::parse::{js_trim, parse, Kind};

mod state;

/// Limits under which nothing is ever cut.
fn roomy() -> Limits {
    Limits::new(usize::MAX, HEAD_BYTES, usize::MAX)
}

/// Limits under which nearly everything is.
fn tight() -> Limits {
    Limits::new(8, 4, 1024)
}

/// What the line path (`decode`, `js_trim`, `parse`) makes of the bytes: the canonical text of
/// the document, or `None` when it does not parse.
fn line_path(bytes: &[u8]) -> Option<(String, Kind)> {
    let text = decode(bytes);
    parse(js_trim(&text)).ok().map(|p| (canonical_text(p.root), p.root.kind))
}

/// Reduces `bytes` cut at `cuts` (ascending positions), checking memory after every piece.
fn reduce_cut(bytes: &[u8], cuts: &[usize], limits: Limits) -> Result<Reduced, Unreduced> {
    let mut r = Reducer::new(limits);
    let mut from = 0;
    for &to in cuts.iter().chain([bytes.len()].iter()) {
        let to = to.clamp(from, bytes.len());
        r.feed(&bytes[from..to]);
        assert!(r.held_bytes() <= limits.max_memory, "held {} > {}", r.held_bytes(), limits.max_memory);
        from = to;
    }
    r.finish()
}

/// Checks one reduction of `bytes` against the line path; returns it.
fn agree(bytes: &[u8], cuts: &[usize], limits: Limits) -> Result<Reduced, Unreduced> {
    let want = line_path(bytes);
    let got = reduce_cut(bytes, cuts, limits);
    match (&want, &got) {
        (None, Err(Unreduced::Invalid { .. } | Unreduced::TooLarge)) => {}
        (None, other) => panic!("{bytes:?} cut at {cuts:?}: the line path refuses it, the reducer gives {other:?}"),
        (Some(_), Err(Unreduced::TooLarge)) => {}
        (Some(_), Err(e)) => panic!("{bytes:?} cut at {cuts:?}: the line path accepts it, the reducer says {e:?}"),
        (Some((canonical, kind)), Ok(r)) => {
            let p = parse(&r.text).unwrap_or_else(|e| panic!("{bytes:?}: reduced {:?} does not parse: {e:?}", r.text));
            assert_eq!(p.root.kind, *kind, "{bytes:?}: the root's kind");
            if !r.truncated() {
                assert_eq!(canonical_text(p.root), *canonical, "{bytes:?} cut at {cuts:?}: reduced {:?}", r.text);
            }
            assert_eq!(r.lossy, std::str::from_utf8(bytes).is_err(), "{bytes:?}: lossy");
            assert_eq!(r.original_len, bytes.len() as u64);
            assert_eq!(r.text, js_trim(&r.text), "no white space around the reduced text");
        }
    }
    got
}

/// Every two-piece cut, every one-byte-piece cut, and the whole.
fn agree_every_cut(bytes: &[u8], limits: Limits) {
    let whole = agree(bytes, &[], limits);
    for at in 0..=bytes.len() {
        assert_eq!(agree(bytes, &[at], limits), whole, "{bytes:?} cut at {at}");
    }
    let ones: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(agree(bytes, &ones, limits), whole, "{bytes:?} in one-byte pieces");
}

const ACCEPTED: &[&str] = &[
    "{}",
    "[]",
    "0",
    "-0",
    "1e400",
    "-1E-400",
    "1.5e+3",
    "0.5E7",
    "\"\"",
    "true",
    "false",
    "null",
    " {\"a\" : [1, {\"b\": null}, \"x\"] } ",
    "{\"a\":1,\"a\":2}",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"",
    "[\r1\t]",
    "\"é ☃ 😀\"",
    "\u{feff}{\"type\":1,\"timestamp\":2}\u{a0}\r",
    "\u{feff}\u{a0}\u{2028}[1,2]\u{3000} \u{2029}",
    "[1,[2,[3,[4,{\"x\":[]}]]]]",
    "{\"\":\"\",\"a\":{\"\":{}}}",
    "[0,-1,10,1.25,-0.0e-0,1E+2]",
    "[true,false,null]",
    "{\"type\":\"X\",\"timestamp\":\"t\",\"pad\":\"\\ud83d\\ude00\"}",
];

const REFUSED: &[&str] = &[
    "",
    " ",
    "\u{feff}\u{a0}",
    "{",
    "{\"a\"}",
    "{\"a\":}",
    "{\"a\":1,}",
    "[1,]",
    "[,1]",
    "01",
    "-01",
    "1.",
    "1.e1",
    ".5",
    "+1",
    "1e",
    "1e+",
    "-",
    "--1",
    "NaN",
    "Infinity",
    "tru",
    "nul",
    "truex",
    "nulll",
    "'a'",
    "\"a",
    "\"\\x\"",
    "\"\\u12\"",
    "\"\\u12g4\"",
    "\"tab\there\"",
    "{} {}",
    "[1] x",
    "{\"a\":1}}",
    "[1]]",
    "{'a':1}",
    "[1\u{a0}]",
    "{\"a\":1\u{a0}}",
    "\u{85}{}",
    "[1}",
    "{\"a\":1]",
    "{1:2}",
    "[\"a\":1]",
];

#[test]
fn accepts_exactly_what_the_line_path_accepts_wherever_it_is_cut() {
    for text in ACCEPTED {
        assert!(line_path(text.as_bytes()).is_some(), "{text:?}");
        for limits in [roomy(), tight()] {
            agree_every_cut(text.as_bytes(), limits);
        }
        assert!(reduce(text.as_bytes(), roomy()).is_ok(), "{text:?}");
    }
    for text in REFUSED {
        assert!(line_path(text.as_bytes()).is_none(), "{text:?}");
        for limits in [roomy(), tight()] {
            agree_every_cut(text.as_bytes(), limits);
        }
    }
}

#[test]
fn invalid_utf8_is_replaced_as_the_line_path_replaces_it() {
    for bytes in [
        b"{\"type\":\"\xff\xfe\",\"timestamp\":1}".as_slice(),
        b"{\"type\":1,\"timestamp\":2}\xff",
        b"\xff{}",
        b"\xef\xbb\xbf{}",
        b"[\"\xe0\x80\xaf\",\"\xf0\x90\x80\"]",
        b"[\"\xf0\x90\x80\"",
        b"\"\xed\xa0\x80\"",
        b"{\"\xc3\":1}",
    ] {
        agree_every_cut(bytes, roomy());
        agree_every_cut(bytes, tight());
    }
    let r = reduce(b"{\"a\":\"\xff\"}", roomy()).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((r.text.as_str(), r.lossy), ("{\"a\":\"\u{fffd}\"}", true));
}

#[test]
fn any_depth_without_recursion() {
    let n = 100_000;
    let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
    let r = reduce(deep.as_bytes(), roomy()).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, deep);
    assert!(matches!(reduce("[".repeat(n).as_bytes(), roomy()), Err(Unreduced::Invalid { .. })));
    let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    assert_eq!(reduce(objects.as_bytes(), roomy()).map(|r| r.text.len()), Ok(objects.len()));
    // Under a small limit, deep nesting is collapsed or too large, never a panic or an overrun.
    let limits = Limits::new(64, 16, 4096);
    assert!(matches!(agree(deep.as_bytes(), &[1000, 5000], limits), Err(Unreduced::TooLarge)));
    let mixed = format!("{{\"type\":\"x\",\"deep\":{}{}}}", "[".repeat(3000), "]".repeat(3000));
    let r = agree(mixed.as_bytes(), &[17, 2000], limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_containers && r.text.starts_with("{\"type\":\"x\",\"deep\":"), "{}", r.text);
}

/// A small generator of JSON documents (with white space, escapes, every kind), and of broken
/// ones (a byte changed, dropped or cut off).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn ws(&mut self, out: &mut String) {
        if self.below(4) == 0 {
            out.push_str(self.pick(&[" ", "\t", "\r\n ", "  "]));
        }
    }

    fn value(&mut self, depth: usize, out: &mut String) {
        let kind = if depth > 4 { self.below(4) } else { self.below(7) };
        match kind {
            0 => out.push_str(self.pick(&["0", "-1", "12.5e-3", "1E400", "-0.0", "123456789012345678901234567890"])),
            1 => out.push_str(self.pick(&["true", "false", "null"])),
            2 | 3 => {
                out.push('"');
                for _ in 0..self.below(6) {
                    const PARTS: &[&str] =
                        &["a", "é", "😀", "\\n", "\\\"", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\u0000", "/", "xyz"];
                    out.push_str(self.pick(PARTS));
                }
                out.push('"');
            }
            4 | 5 => {
                out.push('[');
                let n = self.below(4);
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ws(out);
                    self.value(depth + 1, out);
                    self.ws(out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                let n = self.below(4);
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ws(out);
                    out.push_str(self.pick(&["\"type\"", "\"a\"", "\"\"", "\"k\\u0065y\"", "\"é\""]));
                    self.ws(out);
                    out.push(':');
                    self.ws(out);
                    self.value(depth + 1, out);
                }
                self.ws(out);
                out.push('}');
            }
        }
    }

    fn document(&mut self) -> Vec<u8> {
        let mut text = String::new();
        if self.below(5) == 0 {
            text.push_str(self.pick(&["\u{feff}", " ", "\u{a0}", "\u{2028}"]));
        }
        self.value(0, &mut text);
        if self.below(5) == 0 {
            text.push_str(self.pick(&[" ", "\u{3000}", "\r", "\u{85}", "x"]));
        }
        let mut bytes = text.into_bytes();
        match self.below(6) {
            0 if !bytes.is_empty() => {
                let at = self.below(bytes.len());
                bytes[at] = *b"{}[]\",:0e-.\\u\xff\x00 ".get(self.below(18)).unwrap_or(&b'x');
            }
            1 if !bytes.is_empty() => {
                let at = self.below(bytes.len());
                bytes.remove(at);
            }
            2 => {
                let at = self.below(bytes.len() + 1);
                bytes.truncate(at);
            }
            _ => {}
        }
        bytes
    }
}

#[test]
fn random_documents_agree_cut_anywhere() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut valid, mut cut) = (0, 0);
    for round in 0..6000 {
        let doc = g.document();
        let limits = if round % 2 == 0 { roomy() } else { Limits::new(8 + g.below(24), g.below(12), 1024) };
        if doc.len() <= 40 {
            agree_every_cut(&doc, limits);
        } else {
            let mut cuts: Vec<usize> = (0..g.below(6)).map(|_| g.below(doc.len() + 1)).collect();
            cuts.sort_unstable();
            let whole = agree(&doc, &[], limits);
            assert_eq!(agree(&doc, &cuts, limits), whole, "{doc:?} cut at {cuts:?}");
        }
        if let Ok(r) = reduce(&doc, limits) {
            valid += 1;
            cut += usize::from(r.truncated());
        }
    }
    assert!(valid > 1500 && cut > 100, "too few samples to mean anything: {valid} valid, {cut} cut");
}

fn member<'a>(text: &'a str, path: &[&str]) -> Option<crate::json::parse::Value<'a>> {
    let p = parse(text).ok()?;
    let mut v = p.root;
    for k in path {
        v = v.get(k)?;
    }
    Some(v)
}

#[test]
fn long_strings_become_a_sentinel_with_their_length_and_head() {
    let body = "line of output\\n".repeat(20_000);
    let line =
        format!("{{\"type\":\"TOOL_RESULT\",\"timestamp\":\"t\",\"data\":{{\"output\":\"{body}\",\"ok\":true}}}}");
    let limits = Limits::for_line_memory(64 << 20);
    let r = reduce(line.as_bytes(), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_values && !r.cut_containers);
    assert!(r.text.len() < 2 * HEAD_BYTES, "{}", r.text.len());
    let sentinel = member(&r.text, &["data", "output", TRUNCATED_KEY]).unwrap_or_else(|| panic!("{}", r.text));
    assert_eq!(sentinel.get("bytes").and_then(|b| b.as_i64()), Some(body.len() as i64));
    let head = sentinel.get("head").map(|h| h.text).unwrap_or_default();
    let head = head.get(1..head.len() - 1).unwrap_or_default();
    assert!(body.starts_with(head) && head.len() <= HEAD_BYTES && head.len() > HEAD_BYTES - 16, "{head:?}");
    assert!(head.ends_with("\\n"), "cut after a whole escape: {head:?}");
    assert_eq!(member(&r.text, &["data", "ok"]).and_then(|v| v.as_bool()), Some(true));
    assert_eq!(member(&r.text, &["type"]).and_then(|v| v.as_str()).as_deref(), Some("TOOL_RESULT"));
    assert!(holds_truncation(&r.text));
}

#[test]
fn heads_are_cut_on_character_escape_and_pair_boundaries() {
    let limits = Limits::new(64, 16, 4096);
    for unit in ["é", "日", "😀", "\\n", "\\u00e9", "\\ud83d\\ude00", "a\\ud83d\\ude00", "ab\\\"", "\\ud800x"] {
        for lead in 0..4 {
            let body = format!("{}{}", "a".repeat(lead), unit.repeat(40));
            let line = format!("[\"{body}\"]");
            let r = agree(line.as_bytes(), &[7, 30], limits).unwrap_or_else(|e| panic!("{e:?}"));
            let head = parse(&r.text)
                .ok()
                .and_then(|p| p.root.items().next())
                .and_then(|s| s.get(TRUNCATED_KEY))
                .and_then(|s| s.get("head"))
                .map(|h| h.text.trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("{}", r.text));
            assert!(body.starts_with(&head) && head.len() <= 16 && head.len() > 16 - 12, "{unit}: {head:?}");
            // A pair is never split: the head has no lone surrogate the body did not have.
            let lone = |s: &str| parse(&format!("\"{s}\"")).ok().and_then(|p| p.jsonb_problem).is_some();
            assert_eq!(lone(&head), unit.contains("\\ud800"), "{unit}: {head:?}");
        }
    }
}

#[test]
fn long_keys_and_numbers_are_cut_and_the_root_is_not() {
    let limits = Limits::new(16, 8, 4096);
    let key = "k".repeat(40);
    let r = reduce(format!("{{\"{key}\":1,\"short\":2}}").as_bytes(), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, "{\"cortex_buffer:truncated(40 bytes):kkkkkkkk\":1,\"short\":2}");
    let r = reduce(format!("[1{},2]", "0".repeat(30)).as_bytes(), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, "[{\"cortex_buffer:truncated\":{\"bytes\":31}},2]");
    assert!(r.cut_values);
    // The root is never replaced: it is kept whole while it fits, else there is no summary.
    let root = format!("\"{}\"", "s".repeat(100));
    assert_eq!(reduce(root.as_bytes(), limits).map(|r| r.text), Ok(root.clone()));
    let huge = format!("\"{}\"", "s".repeat(5000));
    assert_eq!(reduce(huge.as_bytes(), limits), Err(Unreduced::TooLarge));
    assert_eq!(reduce("9".repeat(5000).as_bytes(), limits), Err(Unreduced::TooLarge));
    // ... and it is still validated to the end.
    assert!(matches!(reduce(format!("{huge} x").as_bytes(), limits), Err(Unreduced::Invalid { .. })));
}

#[test]
fn containers_that_do_not_fit_are_collapsed_to_their_length() {
    let numbers = vec!["1"; 100_000].join(",");
    let line = format!(
        "{{\"type\":\"assistant\",\"timestamp\":\"t\",\"message\":{{\"usage\":{{\"input_tokens\":5}},\"content\":[{numbers}]}},\"after\":1}}"
    );
    let limits = Limits::new(1024, 64, 16 * 1024);
    let r = agree(line.as_bytes(), &[100, 65_536, 131_072], limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_containers && !r.cut_values);
    assert_eq!(
        member(&r.text, &["message", "content", TRUNCATED_KEY, "bytes"]).and_then(|b| b.as_i64()),
        Some(numbers.len() as i64 + 2)
    );
    assert_eq!(member(&r.text, &["message", "usage", "input_tokens"]).and_then(|v| v.as_i64()), Some(5));
    assert_eq!(member(&r.text, &["after"]).and_then(|v| v.as_i64()), Some(1));
    // A root that is itself too large has no summary; it is still validated.
    let flat =
        format!("{{\"type\":\"x\",{}\"z\":0}}", (0..10_000).map(|i| format!("\"k{i}\":{i},")).collect::<String>());
    assert_eq!(agree(flat.as_bytes(), &[4096], limits), Err(Unreduced::TooLarge));
    assert!(matches!(reduce(format!("{flat},").as_bytes(), limits), Err(Unreduced::Invalid { .. })));
}

/// A line of `len` bytes, made on the fly in 64 KiB pieces: an event whose result is one string
/// of text with escapes.
fn feed_huge_line(r: &mut Reducer, len: usize, limits: Limits) -> usize {
    feed_huge_line_between(r, len, limits, &mut |_| {})
}

/// `feed_huge_line`, calling `between` after each piece.
fn feed_huge_line_between(r: &mut Reducer, len: usize, limits: Limits, between: &mut dyn FnMut(&mut Reducer)) -> usize {
    let open = b"{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"data\":{\"output\":\"";
    let close = b"\",\"usage\":{\"output_tokens\":7}}}";
    let unit = b"drwxr-xr-x  2 agent agent 4096 Jan  1 00:00 a directory with a \\\"quoted\\\" name \\u00e9\\n";
    let mut piece = Vec::with_capacity(64 * 1024);
    while piece.len() + unit.len() <= 64 * 1024 {
        piece.extend_from_slice(unit);
    }
    let mut peak = 0;
    r.feed(open);
    let mut sent = open.len();
    while sent + piece.len() + close.len() <= len {
        r.feed(&piece);
        sent += piece.len();
        between(r);
        peak = peak.max(r.held_bytes());
        assert!(r.held_bytes() <= limits.max_memory);
    }
    r.feed(close);
    peak
}

#[test]
fn a_hundred_megabyte_line_is_reduced_in_bounded_memory() {
    let limits = Limits::for_line_memory(64 << 20);
    assert_eq!(limits.max_memory, 1 << 20);
    let mut r = Reducer::new(limits);
    let peak = feed_huge_line(&mut r, 100 << 20, limits);
    let reduced = r.finish().unwrap_or_else(|e| panic!("{e:?}"));
    assert!(reduced.original_len > 99 << 20);
    // The string is buffered up to 64 KiB before it is known to be cut.
    assert!(peak <= 2 * MAX_STRING_BYTES + 8192, "peak {peak} bytes held for a 100 MB line");
    assert!(reduced.text.len() < 2 * HEAD_BYTES, "{} bytes", reduced.text.len());
    assert_eq!(member(&reduced.text, &["data", "usage", "output_tokens"]).and_then(|v| v.as_i64()), Some(7));
    let bytes = member(&reduced.text, &["data", "output", TRUNCATED_KEY, "bytes"]).and_then(|v| v.as_i64());
    assert!(bytes.is_some_and(|b| b > 99 << 20), "{bytes:?}");
}

#[test]
fn bytes_stepped_over_make_the_line_unknown() {
    let mut r = Reducer::new(roomy());
    r.feed(b"{\"a\":\"");
    r.skip(0);
    assert!(!r.failed());
    r.skip(4096);
    assert!(r.failed());
    r.feed(b"\"}");
    assert_eq!(r.finish(), Err(Unreduced::Unknown { at: 6 }));
}

#[test]
fn the_sentinel_is_recognised_in_any_value_that_holds_it() {
    assert!(holds_truncation("{\"cortex_buffer:truncated\":{\"bytes\":3}}"));
    assert!(holds_truncation("[1, {\"x\": {\"cortex_buffer:truncated\": {\"bytes\": 3, \"head\": \"a\"}}}]"));
    assert!(holds_truncation("{\"cortex_buffer:truncated(70000 bytes):kkk\":1}"));
    assert!(!holds_truncation("{\"path\":\"/tmp/x\",\"n\":1}"));
    assert!(!holds_truncation("\"cortex_buffer\""));
}

#[test]
fn limits_follow_the_line_memory() {
    let l = Limits::for_line_memory(64 << 20);
    assert_eq!((l.max_string, l.head, l.max_memory), (MAX_STRING_BYTES, HEAD_BYTES, 1 << 20));
    let small = Limits::for_line_memory(1 << 20);
    assert_eq!((small.max_string, small.head, small.max_memory), (2048, HEAD_BYTES, 16 * 1024));
    // The reduced text converts within max_line_memory: 43 bytes of working memory per byte.
    for mem in [1u64 << 20, 64 << 20, 16 << 30] {
        let l = Limits::for_line_memory(mem);
        let len = l.max_memory;
        let tokens = (len as u64).div_ceil(2);
        assert!(crate::json::jsonb_write::working_memory(len, tokens) <= mem, "{mem}");
    }
}

/// A long run of a scalar's text that crosses the output's budget collapses the same container
/// whether it arrives whole or in pieces (a fuzz finding: written whole, it overflowed short of
/// the budget and collapsed the outer container instead of the inner one).
#[test]
fn a_run_that_crosses_the_budget_collapses_the_same_container_however_it_is_cut() {
    let limits = tight();
    // The inner object's share of the output at the overflow moves across the quarter that
    // decides which container is collapsed; the long string at its end crosses the budget.
    let mut collapsed_inner = 0;
    for (outer_len, inner_len, odd) in (150..200).flat_map(|o| (30..70).flat_map(move |i| [(o, i, ""), (o, i, "a")])) {
        let outer: String = (0..outer_len).map(|i| format!("{},", i % 10)).collect();
        let inner: String = (0..inner_len).map(|i| format!("{},", i % 10)).collect();
        let line = format!(
            "{{\"type\":\"x\",\"data\":{{\"q\":[{outer}0],\"p\":\"{odd}\",\"r\":{{\"n\":[{inner}0],\"s\":-1e-16383}}}}}}"
        );
        let whole = reduce(line.as_bytes(), limits);
        let ones: Vec<usize> = (1..line.len()).collect();
        assert_eq!(reduce_cut(line.as_bytes(), &ones, limits), whole, "{line} in one-byte pieces");
        if whole.as_ref().is_ok_and(|r| member(&r.text, &["data", "r", TRUNCATED_KEY]).is_some()) {
            collapsed_inner += 1;
        }
    }
    assert!(collapsed_inner > 0, "some case collapses the inner object");
}

/// The fuzz finding itself (crates/core/fuzz-corpus/found/reducer-20261126-0.hex), under the
/// tight limits it was found with, in every piece size the fuzzer draws.
#[test]
fn the_fuzz_finding_reduces_the_same_in_any_pieces() {
    let line: &[u8] = b"{\"type\":\"0 A \\uAAaa\",\"timestamp\":\"2026-02-23T14:30:22.123Z\",\"uuid\":\"u\",\"data\":{\"job_id\":-0,\"message\":\"a\",\"4294967294\":\"\xf0\x90\x80\x80_ a\\u0000\",\"0\":\"a\\u0000 A_\",\"\\ua00a\" : 0.000001,\"agent_id\":{\"version\" : 1e400,\"\\\"\":1e9999999999999999999999,\"\\u0000\" : -1e400,\"\xf0\x90\x80\x80_ aaAa-A-aa aA_- _A0-a0\\\"\\\"\":-1e-16383}}}";
    let whole = reduce(line, tight());
    assert!(whole.is_ok(), "{whole:?}");
    for piece in 1..64 {
        let cuts: Vec<usize> = (piece..line.len()).step_by(piece).collect();
        assert_eq!(agree(line, &cuts, tight()), whole, "pieces of {piece}");
    }
}

/// A cut that falls inside a surrogate pair's low half leaves no lone high half in the head.
#[test]
fn a_head_never_ends_in_a_high_half_whose_low_half_was_cut_off() {
    for lead in 0..16 {
        let limits = Limits::new(16, 16, 4096);
        let body = format!("{}{}", "a".repeat(lead), "\\ud83d\\ude00".repeat(4));
        let line = format!("[\"{body}\"]");
        let r = agree(line.as_bytes(), &[], limits).unwrap_or_else(|e| panic!("{e:?}"));
        let head = member(&r.text, &["0", TRUNCATED_KEY, "head"]).map(|h| h.text.trim_matches('"').to_owned());
        let head = head.or_else(|| {
            parse(&r.text)
                .ok()
                .and_then(|p| p.root.items().next())
                .and_then(|s| s.get(TRUNCATED_KEY))
                .and_then(|s| s.get("head"))
                .map(|h| h.text.trim_matches('"').to_owned())
        });
        let head = head.unwrap_or_else(|| panic!("{}", r.text));
        let lone = parse(&format!("\"{head}\"")).ok().and_then(|p| p.jsonb_problem).is_some();
        assert!(!lone && body.starts_with(&head), "lead {lead}: {head:?}");
    }
}
