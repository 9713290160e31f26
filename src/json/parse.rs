//! A JSON parser with ECMAScript `JSON.parse` acceptance, for session-file lines. Pure.
//!
//! It accepts exactly what `JSON.parse` accepts: any nesting depth (the parser is iterative:
//! 100 000 nested arrays cost memory, not stack), numbers of any magnitude (`1e400` is
//! Infinity, still valid), lone surrogate escapes, duplicate keys (the last one wins). It builds
//! no tree: it validates the text, records the members of a top-level object as spans of the
//! text, and notes why PostgreSQL's `jsonb` could not store the value (`\u0000`, lone
//! surrogates, very deep nesting, numbers beyond `numeric`), so such lines are indexed with a
//! NULL payload instead of failing the insert.
//!
//! Values are read lazily from their spans ([`Value::members`], [`Value::items`],
//! [`Value::as_str`], [`Value::as_f64`]); the spans were validated, so reading them cannot fail.

use std::borrow::Cow;

use super::quote::next_escape;

/// Nesting PostgreSQL's (recursive) JSON parser is trusted with; deeper lines keep a NULL
/// payload. Its real limit depends on `max_stack_depth`; this stays well inside the default.
pub const JSONB_MAX_DEPTH: usize = 1000;

/// `numeric` holds at most 131 072 digits before the decimal point and 16 383 after it.
const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
const NUMERIC_MAX_FRAC_DIGITS: i64 = 16_383;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// A validated value: its kind and its exact text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    pub kind: Kind,
    pub text: &'a str,
}

/// Why a value `JSON.parse` accepts cannot be stored as `jsonb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonbProblem {
    NulEscape,
    LoneSurrogate,
    TooDeep,
    NumberOutOfRange,
}

impl JsonbProblem {
    pub fn describe(self) -> &'static str {
        match self {
            JsonbProblem::NulEscape => "jsonb cannot store \\u0000",
            JsonbProblem::LoneSurrogate => "jsonb cannot store a lone surrogate escape",
            JsonbProblem::TooDeep => "nested deeper than jsonb is trusted with (1000 levels)",
            JsonbProblem::NumberOutOfRange => "a number beyond the range of jsonb's numeric",
        }
    }
}

/// A line that `JSON.parse` accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub root: Value<'a>,
    /// The root object's members in order (duplicates included); empty for other roots.
    pub members: Vec<(Cow<'a, str>, Value<'a>)>,
    pub jsonb_problem: Option<JsonbProblem>,
}

impl<'a> Parsed<'a> {
    /// The root object's member `key` (the last one, as in JavaScript).
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    pub fn has(&self, key: &str) -> bool {
        self.members.iter().any(|(k, _)| k == key)
    }
}

/// Where and why `JSON.parse` would throw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    pub at: usize,
    pub what: &'static str,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    Key,
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    CommaOrClose,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex4(b: &[u8]) -> Option<u16> {
    let mut v: u16 = 0;
    for &c in b.get(..4)? {
        let d = (c as char).to_digit(16)?;
        v = (v << 4) | d as u16;
    }
    Some(v)
}

struct Scanner<'a> {
    b: &'a [u8],
    pos: usize,
    problem: Option<JsonbProblem>,
}

impl<'a> Scanner<'a> {
    fn err(&self, what: &'static str) -> SyntaxError {
        SyntaxError { at: self.pos, what }
    }

    fn note(&mut self, p: JsonbProblem) {
        self.problem.get_or_insert(p);
    }

    fn skip_ws(&mut self) {
        while self.pos < self.b.len() && is_ws(self.b[self.pos]) {
            self.pos += 1;
        }
    }

    /// A string starting at `self.pos` (the opening quote); returns whether it had escapes.
    fn string(&mut self) -> Result<bool, SyntaxError> {
        self.pos += 1;
        let mut escaped = false;
        // A high surrogate escape waiting for its low half.
        let mut pending_high = false;
        loop {
            let Some(skip) = next_escape(&self.b[self.pos..]) else {
                self.pos = self.b.len();
                return Err(self.err("unterminated string"));
            };
            if skip > 0 && pending_high {
                self.note(JsonbProblem::LoneSurrogate);
                pending_high = false;
            }
            self.pos += skip;
            match self.b[self.pos] {
                b'"' => {
                    if pending_high {
                        self.note(JsonbProblem::LoneSurrogate);
                    }
                    self.pos += 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    let e = *self.b.get(self.pos + 1).ok_or_else(|| self.err("unterminated escape"))?;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            if pending_high {
                                self.note(JsonbProblem::LoneSurrogate);
                                pending_high = false;
                            }
                            self.pos += 2;
                        }
                        b'u' => {
                            let unit = hex4(&self.b[self.pos + 2..]).ok_or_else(|| self.err("bad \\u escape"))?;
                            self.pos += 6;
                            match unit {
                                0 => self.note(JsonbProblem::NulEscape),
                                0xD800..=0xDBFF => {
                                    if pending_high {
                                        self.note(JsonbProblem::LoneSurrogate);
                                    }
                                    pending_high = true;
                                    continue;
                                }
                                0xDC00..=0xDFFF if !pending_high => self.note(JsonbProblem::LoneSurrogate),
                                _ => {}
                            }
                            if pending_high && !(0xDC00..=0xDFFF).contains(&unit) {
                                self.note(JsonbProblem::LoneSurrogate);
                            }
                            pending_high = false;
                        }
                        _ => return Err(self.err("bad escape")),
                    }
                }
                _ => return Err(self.err("control character in string")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<(), SyntaxError> {
        if self.b[self.pos] == b'-' {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 {
            return Err(self.err("bad number"));
        }
        if int_digits > 1 && self.b[int_start] == b'0' {
            return Err(self.err("leading zero"));
        }
        let mut frac_digits = 0;
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            frac_digits = self.digits();
            if frac_digits == 0 {
                return Err(self.err("bad fraction"));
            }
        }
        let mut exp: i64 = 0;
        if matches!(self.b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            let negative = match self.b.get(self.pos) {
                Some(b'-') => {
                    self.pos += 1;
                    true
                }
                Some(b'+') => {
                    self.pos += 1;
                    false
                }
                _ => false,
            };
            let start = self.pos;
            if self.digits() == 0 {
                return Err(self.err("bad exponent"));
            }
            for &d in &self.b[start..self.pos] {
                exp = exp.saturating_mul(10).saturating_add(i64::from(d - b'0'));
            }
            if negative {
                exp = -exp;
            }
        }
        let int_len = i64::try_from(int_digits).unwrap_or(i64::MAX);
        let frac_len = i64::try_from(frac_digits).unwrap_or(i64::MAX);
        if int_len.saturating_add(exp) > NUMERIC_MAX_INT_DIGITS
            || frac_len.saturating_sub(exp) > NUMERIC_MAX_FRAC_DIGITS
        {
            self.note(JsonbProblem::NumberOutOfRange);
        }
        Ok(())
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), SyntaxError> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("bad literal"))
        }
    }
}

/// Parses `text` (one trimmed line) as `JSON.parse` would.
pub fn parse(text: &str) -> Result<Parsed<'_>, SyntaxError> {
    let mut s = Scanner { b: text.as_bytes(), pos: 0, problem: None };
    // The open containers: true for an object.
    let mut stack: Vec<bool> = Vec::new();
    let mut expect = Expect::Value;
    let mut members: Vec<(Cow<'_, str>, Value<'_>)> = Vec::with_capacity(16);
    let root: Value<'_>;
    // The pending top-level key and where its value starts.
    let mut key: Option<(usize, usize, bool)> = None;
    let mut value_start = 0;

    loop {
        s.skip_ws();
        let Some(&c) = s.b.get(s.pos) else {
            return Err(s.err("unexpected end"));
        };
        // Set when a value (scalar or container) has just ended.
        let mut ended: Option<Kind> = None;
        match expect {
            Expect::Value | Expect::ValueOrClose => {
                // Only the root and the root object's members need their start.
                if stack.is_empty() || (stack.len() == 1 && stack[0]) {
                    value_start = s.pos;
                }
                match c {
                    b'{' => {
                        stack.push(true);
                        s.pos += 1;
                        expect = Expect::KeyOrClose;
                    }
                    b'[' => {
                        stack.push(false);
                        s.pos += 1;
                        expect = Expect::ValueOrClose;
                    }
                    b']' if expect == Expect::ValueOrClose => {
                        stack.pop();
                        s.pos += 1;
                        ended = Some(Kind::Array);
                    }
                    b'"' => {
                        s.string()?;
                        ended = Some(Kind::String);
                    }
                    b'-' | b'0'..=b'9' => {
                        s.number()?;
                        ended = Some(Kind::Number);
                    }
                    b't' => {
                        s.literal(b"true")?;
                        ended = Some(Kind::Bool);
                    }
                    b'f' => {
                        s.literal(b"false")?;
                        ended = Some(Kind::Bool);
                    }
                    b'n' => {
                        s.literal(b"null")?;
                        ended = Some(Kind::Null);
                    }
                    _ => return Err(s.err("unexpected character")),
                }
                if stack.len() > JSONB_MAX_DEPTH {
                    s.note(JsonbProblem::TooDeep);
                }
            }
            Expect::KeyOrClose | Expect::Key => {
                if c == b'"' {
                    let start = s.pos;
                    let escaped = s.string()?;
                    if stack.len() == 1 {
                        key = Some((start, s.pos, escaped));
                    }
                    expect = Expect::Colon;
                } else if c == b'}' && expect == Expect::KeyOrClose {
                    stack.pop();
                    s.pos += 1;
                    ended = Some(Kind::Object);
                } else {
                    return Err(s.err("expected a key"));
                }
            }
            Expect::Colon => {
                if c != b':' {
                    return Err(s.err("expected ':'"));
                }
                s.pos += 1;
                expect = Expect::Value;
            }
            Expect::CommaOrClose => {
                let object = stack.last().copied().unwrap_or(false);
                match c {
                    b',' => {
                        s.pos += 1;
                        expect = if object { Expect::Key } else { Expect::Value };
                    }
                    b'}' if object => {
                        stack.pop();
                        s.pos += 1;
                        ended = Some(Kind::Object);
                    }
                    b']' if !object => {
                        stack.pop();
                        s.pos += 1;
                        ended = Some(Kind::Array);
                    }
                    _ => return Err(s.err("expected ',' or a closing bracket")),
                }
            }
        }
        if let Some(kind) = ended {
            // A container that just closed started at `value_start` only if it is the root or
            // a top-level member; scalars always start there.
            let value = Value { kind, text: &text[value_start.min(s.pos)..s.pos] };
            if stack.is_empty() {
                root = Value { kind, text: &text[..s.pos] };
                break;
            }
            if stack.len() == 1 && stack[0] {
                if let Some((ks, ke, escaped)) = key.take() {
                    let raw = &text[ks + 1..ke - 1];
                    let k = if escaped { Cow::Owned(unescape(raw)) } else { Cow::Borrowed(raw) };
                    members.push((k, value));
                }
            }
            expect = Expect::CommaOrClose;
        }
    }
    s.skip_ws();
    if s.pos != s.b.len() {
        return Err(s.err("unexpected text after the value"));
    }
    // Leading white space is not part of the root's text.
    let root = Value { kind: root.kind, text: root.text.trim_start_matches([' ', '\t', '\n', '\r']) };
    Ok(Parsed { root, members, jsonb_problem: s.problem })
}

/// The text of a string's contents (without quotes) with escapes resolved; lone surrogates
/// become U+FFFD.
pub fn unescape_str(raw: &str) -> String {
    unescape(raw)
}

fn unescape(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut units: Vec<u16> = Vec::new();
    let mut i = 0;
    let mut clean = 0;
    let flush_units = |units: &mut Vec<u16>, out: &mut String| {
        if !units.is_empty() {
            out.extend(char::decode_utf16(units.drain(..)).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)));
        }
    };
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if clean < i {
            flush_units(&mut units, &mut out);
            out.push_str(&raw[clean..i]);
        }
        let e = b.get(i + 1).copied().unwrap_or(b'\\');
        if e == b'u' {
            units.push(hex4(&b[i + 2..]).unwrap_or(0xFFFD));
            i += 6;
        } else {
            flush_units(&mut units, &mut out);
            out.push(match e {
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                other => other as char,
            });
            i += 2;
        }
        clean = i;
    }
    flush_units(&mut units, &mut out);
    out.push_str(&raw[clean.min(raw.len())..]);
    out
}

impl<'a> Value<'a> {
    /// A string's contents with escapes resolved (`None` for other kinds).
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        if self.kind != Kind::String {
            return None;
        }
        let raw = &self.text[1..self.text.len() - 1];
        Some(if raw.contains('\\') { Cow::Owned(unescape(raw)) } else { Cow::Borrowed(raw) })
    }

    /// A number as JavaScript reads it (a double; `1e400` is infinity).
    pub fn as_f64(&self) -> Option<f64> {
        if self.kind != Kind::Number {
            return None;
        }
        self.text.parse::<f64>().ok()
    }

    /// A number that is a whole value in the `i64` range.
    pub fn as_i64(&self) -> Option<i64> {
        let x = self.as_f64()?;
        (x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_991.0).then_some(x as i64)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match (self.kind, self.text) {
            (Kind::Bool, "true") => Some(true),
            (Kind::Bool, _) => Some(false),
            _ => None,
        }
    }

    /// An object's members (empty for other kinds).
    pub fn members(&self) -> Vec<(Cow<'a, str>, Value<'a>)> {
        if self.kind != Kind::Object {
            return Vec::new();
        }
        parse(self.text).map(|p| p.members).unwrap_or_default()
    }

    /// An object's member `key` (the last one).
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members().into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// An array's items (empty for other kinds).
    pub fn items(&self) -> Vec<Value<'a>> {
        if self.kind != Kind::Array {
            return Vec::new();
        }
        // Wrap as an object member to reuse the top-level span recording: parse the items by
        // scanning the array with a depth counter over the validated text.
        items_of(self.text)
    }
}

/// Validated values are JSON nodes too (so the usage reader works on indexed lines). Strings
/// are given as written, escapes unresolved, and keys written with escapes as an empty name:
/// callers look up plain ASCII names and read numbers.
impl<'a> super::node::JsonNode<'a> for Value<'a> {
    type Error = std::convert::Infallible;

    fn kind(self) -> Result<super::node::Kind<'a>, Self::Error> {
        use super::node::Kind as K;
        Ok(match self.kind {
            Kind::Null => K::Null,
            Kind::Bool => K::Bool(self.text == "true"),
            Kind::Number => K::Number(self.as_f64().unwrap_or(f64::NAN)),
            Kind::String => K::String(&self.text[1..self.text.len() - 1]),
            Kind::Array => K::Array,
            Kind::Object => K::Object,
        })
    }

    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Self::Error> {
        match self.kind {
            Kind::Array => out.extend(self.items().into_iter().map(|v| (None, v))),
            Kind::Object => {
                let members = self.members();
                out.extend(members.into_iter().map(|(k, v)| {
                    let raw: &'a str = match k {
                        Cow::Borrowed(b) => b,
                        // A key written with escapes matches no plain name.
                        Cow::Owned(_) => "",
                    };
                    (Some(raw), v)
                }));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The items of a validated array's text.
fn items_of<'a>(text: &'a str) -> Vec<Value<'a>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let mut start: Option<usize> = None;
    let push = |out: &mut Vec<Value<'a>>, s: usize, e: usize| {
        let t = text[s..e].trim_matches([' ', '\t', '\n', '\r']);
        if !t.is_empty() {
            if let Ok(p) = parse(t) {
                out.push(p.root);
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                if depth == 1 && start.is_none() {
                    start = Some(i);
                }
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth == 2 && start.is_none() {
                    start = Some(i);
                }
            }
            b']' | b'}' => {
                if depth == 1 {
                    if let Some(s) = start.take() {
                        push(&mut out, s, i);
                    }
                }
                depth = depth.saturating_sub(1);
            }
            b',' if depth == 1 => {
                if let Some(s) = start.take() {
                    push(&mut out, s, i);
                }
            }
            c if depth == 1 && start.is_none() && !is_ws(c) => start = Some(i),
            _ => {}
        }
        i += 1;
    }
    out
}

/// ECMAScript white space and line terminators (what `String.prototype.trim` removes).
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Parsed<'_> {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    #[test]
    fn accepts_what_json_parse_accepts() {
        for text in [
            "{}",
            "[]",
            "0",
            "-0",
            "1e400",
            "-1E-400",
            "1.5e+3",
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
        ] {
            ok(text);
        }
    }

    #[test]
    fn refuses_what_json_parse_refuses() {
        for text in [
            "",
            " ",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "[1,]",
            "[,1]",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "--1",
            "NaN",
            "Infinity",
            "tru",
            "nul",
            "'a'",
            "\"a",
            "\"\\x\"",
            "\"\\u12\"",
            "\"tab\there\"",
            "{} {}",
            "[1] x",
            "{\"a\":1}}",
            "[1]]",
            "{'a':1}",
            "\u{feff}{}",
            "{\"a\":1\u{a0}}",
        ] {
            assert!(parse(text).is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn records_the_top_level_members_as_spans() {
        let p = ok(r#"{"type": "TOOL_RESULT", "seq": 12, "data": {"x": [1, 2]}, "ok": true, "n": null, "e\u0041": 1}"#);
        assert_eq!(p.root.kind, Kind::Object);
        let keys: Vec<&str> = p.members.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["type", "seq", "data", "ok", "n", "eA"]);
        assert_eq!(p.get("type").and_then(|v| v.as_str()).as_deref(), Some("TOOL_RESULT"));
        assert_eq!(p.get("seq").and_then(|v| v.as_i64()), Some(12));
        assert_eq!(p.get("data").map(|v| v.text), Some(r#"{"x": [1, 2]}"#));
        assert_eq!(p.get("data").and_then(|d| d.get("x")).map(|x| x.items().len()), Some(2));
        assert_eq!(p.get("ok").and_then(|v| v.as_bool()), Some(true));
        assert_eq!(p.get("n").map(|v| v.kind), Some(Kind::Null));
        // The last duplicate wins, as in JavaScript.
        assert_eq!(ok(r#"{"a":1,"a":2}"#).get("a").and_then(|v| v.as_i64()), Some(2));
    }

    #[test]
    fn reads_array_items_of_every_kind() {
        let p = ok(r#"{"c": [ {"type": "tool_use", "id": "t1"}, "s,]", [1, [2]], 3 , true, null ]}"#);
        let items = p.get("c").map(|c| c.items()).unwrap_or_default();
        let kinds: Vec<Kind> = items.iter().map(|v| v.kind).collect();
        assert_eq!(kinds, [Kind::Object, Kind::String, Kind::Array, Kind::Number, Kind::Bool, Kind::Null]);
        assert_eq!(items[0].get("id").and_then(|v| v.as_str()).as_deref(), Some("t1"));
        assert_eq!(items[1].as_str().as_deref(), Some("s,]"));
        assert!(ok("{\"c\": []}").get("c").map(|c| c.items()).unwrap_or_default().is_empty());
    }

    #[test]
    fn unescapes_strings_like_javascript() {
        let v = ok(r#""a\"b\\c\/d\u00e9\ud83d\ude00\n""#).root;
        assert_eq!(v.as_str().as_deref(), Some("a\"b\\c/dé😀\n"));
        assert_eq!(ok(r#""\ud800x""#).root.as_str().as_deref(), Some("\u{fffd}x"));
    }

    #[test]
    fn notes_what_jsonb_cannot_store() {
        assert_eq!(ok(r#"{"a":"\u0000"}"#).jsonb_problem, Some(JsonbProblem::NulEscape));
        for lone in [r#""\ud800""#, r#""\udc00""#, r#""\ud800\ud800""#, r#""\ud800x""#, r#""\ud800\n""#] {
            assert_eq!(ok(lone).jsonb_problem, Some(JsonbProblem::LoneSurrogate), "{lone}");
        }
        assert_eq!(ok(r#""\ud83d\ude00""#).jsonb_problem, None);
        assert_eq!(ok("1e400").jsonb_problem, None);
        assert_eq!(ok("1e200000").jsonb_problem, Some(JsonbProblem::NumberOutOfRange));
        assert_eq!(ok("1e-20000").jsonb_problem, Some(JsonbProblem::NumberOutOfRange));
        let deep = format!("{}{}", "[".repeat(JSONB_MAX_DEPTH + 1), "]".repeat(JSONB_MAX_DEPTH + 1));
        assert_eq!(ok(&deep).jsonb_problem, Some(JsonbProblem::TooDeep));
        let fine = format!("{}{}", "[".repeat(JSONB_MAX_DEPTH), "]".repeat(JSONB_MAX_DEPTH));
        assert_eq!(ok(&fine).jsonb_problem, None);
    }

    #[test]
    fn a_hundred_thousand_levels_parse_without_recursion() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(ok(&deep).root.kind, Kind::Array);
        let unclosed = "[".repeat(100_000);
        assert!(parse(&unclosed).is_err());
        let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
        assert_eq!(ok(&objects).members.len(), 1);
    }

    /// Random token soup: acceptance must match serde_json's (a strict RFC 8259 parser) on
    /// everything serde_json can judge (no surrogate escapes, shallow nesting), and parsing must
    /// never panic on anything.
    #[test]
    fn acceptance_matches_a_reference_parser_on_random_input() {
        const TOKENS: &[&str] = &[
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            " ",
            "\"a\"",
            "\"\\n\"",
            "\"\\u00e9\"",
            "1",
            "-0",
            "0.5",
            "1e5",
            "01",
            "1.",
            "true",
            "false",
            "null",
            "nul",
            "\"",
            "\\",
            "x",
            "\t",
            "é",
            "\"k\":",
            "-",
            "e",
            "+",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut agreed = 0;
        for _ in 0..200_000 {
            let n = (next() % 12) as usize + 1;
            let text: String = (0..n).map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize]).collect();
            let ours = parse(&text).is_ok();
            let reference = match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(_) => true,
                // serde_json refuses numbers beyond f64 (JSON.parse reads them as Infinity):
                // it cannot judge these.
                Err(e) if e.to_string().contains("number out of range") => continue,
                Err(_) => false,
            };
            assert_eq!(ours, reference, "{text:?}");
            agreed += usize::from(ours);
        }
        assert!(agreed > 1000, "too few valid samples ({agreed}) to mean anything");
    }

    #[test]
    fn trims_javascript_white_space() {
        assert_eq!(js_trim("\u{feff}\u{a0} {} \r\u{2028}\u{3000}"), "{}");
        // NEL (U+0085) is not JavaScript white space.
        assert_eq!(js_trim("\u{85}{}"), "\u{85}{}");
    }
}
