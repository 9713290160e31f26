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

/// The top-level members the indexer reads: what judging a line needs (`type`, `timestamp`) and
/// every dialect's normalised columns. Only these are recorded while parsing, each in a slot of
/// its own (the last occurrence wins, as in JavaScript), so a line with millions of members
/// costs no memory per member; any other member is found by [`Value::get`], which streams.
pub const KEYS: [&str; 26] = [
    "type",
    "timestamp",
    "job_id",
    "session_id",
    "agent_id",
    "seq",
    "step_index",
    "invocation_id",
    "tool_name",
    "checkpoint_id",
    "success",
    "prompt_tokens",
    "completion_tokens",
    "buffer_schema_version",
    "jobId",
    "sessionId",
    "agentId",
    "sequence",
    "version",
    "data",
    "requestId",
    "message",
    "__type__",
    "__ts__",
    "__seq__",
    "uuid",
];

/// The longest name in [`KEYS`]; an escaped key whose raw text is over six times longer (`\uXXXX`
/// per character) cannot be one of them and is never unescaped.
const LONGEST_KEY: usize = 21;

/// The slot of `key` in [`KEYS`].
fn slot(key: &str) -> Option<usize> {
    Some(match key {
        "type" => 0,
        "timestamp" => 1,
        "job_id" => 2,
        "session_id" => 3,
        "agent_id" => 4,
        "seq" => 5,
        "step_index" => 6,
        "invocation_id" => 7,
        "tool_name" => 8,
        "checkpoint_id" => 9,
        "success" => 10,
        "prompt_tokens" => 11,
        "completion_tokens" => 12,
        "buffer_schema_version" => 13,
        "jobId" => 14,
        "sessionId" => 15,
        "agentId" => 16,
        "sequence" => 17,
        "version" => 18,
        "data" => 19,
        "requestId" => 20,
        "message" => 21,
        "__type__" => 22,
        "__ts__" => 23,
        "__seq__" => 24,
        "uuid" => 25,
        _ => return None,
    })
}

/// A line that `JSON.parse` accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub root: Value<'a>,
    /// The root object's members named in [`KEYS`], last occurrence winning.
    slots: [Option<Value<'a>>; KEYS.len()],
    pub jsonb_problem: Option<JsonbProblem>,
    /// Values and object keys in the document: what converting it to `jsonb` costs.
    pub tokens: u64,
}

impl<'a> Parsed<'a> {
    /// The root object's member `key` (the last one, as in JavaScript).
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        match slot(key) {
            Some(i) => self.slots.get(i).copied().flatten(),
            None => self.root.get(key),
        }
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
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

    /// A value starting with `c` where one is expected: a container opened (pushed on
    /// `stack`), or a scalar or empty array read whole (its kind).
    #[inline(always)]
    fn value(&mut self, c: u8, expect: &mut Expect, stack: &mut Vec<bool>) -> Result<Option<Kind>, SyntaxError> {
        let kind = match c {
            b'{' => {
                stack.push(true);
                self.pos += 1;
                *expect = Expect::KeyOrClose;
                return Ok(None);
            }
            b'[' => {
                stack.push(false);
                self.pos += 1;
                *expect = Expect::ValueOrClose;
                return Ok(None);
            }
            b']' if *expect == Expect::ValueOrClose => {
                stack.pop();
                self.pos += 1;
                Kind::Array
            }
            b'"' => {
                self.string()?;
                Kind::String
            }
            b'-' | b'0'..=b'9' => {
                self.number()?;
                Kind::Number
            }
            b't' => {
                self.literal(b"true")?;
                Kind::Bool
            }
            b'f' => {
                self.literal(b"false")?;
                Kind::Bool
            }
            b'n' => {
                self.literal(b"null")?;
                Kind::Null
            }
            _ => return Err(self.err("unexpected character")),
        };
        Ok(Some(kind))
    }

    /// After a value: `c` is a comma (the next member or element expected) or the close of the
    /// innermost container (its kind).
    #[inline(always)]
    fn comma_or_close(
        &mut self,
        c: u8,
        expect: &mut Expect,
        stack: &mut Vec<bool>,
    ) -> Result<Option<Kind>, SyntaxError> {
        let object = stack.last().copied().unwrap_or(false);
        match c {
            b',' => {
                self.pos += 1;
                *expect = if object { Expect::Key } else { Expect::Value };
                Ok(None)
            }
            b'}' if object => {
                stack.pop();
                self.pos += 1;
                Ok(Some(Kind::Object))
            }
            b']' if !object => {
                stack.pop();
                self.pos += 1;
                Ok(Some(Kind::Array))
            }
            _ => Err(self.err("expected ',' or a closing bracket")),
        }
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

/// Parses `text` (one trimmed line) as `JSON.parse` would. Memory: one byte per open container
/// and a fixed set of member slots, whatever the line holds.
pub fn parse(text: &str) -> Result<Parsed<'_>, SyntaxError> {
    let mut s = Scanner { b: text.as_bytes(), pos: 0, problem: None };
    // The open containers: true for an object.
    let mut stack: Vec<bool> = Vec::new();
    let mut expect = Expect::Value;
    let mut slots: [Option<Value<'_>>; KEYS.len()] = [None; KEYS.len()];
    let mut tokens: u64 = 0;
    let root: Value<'_>;
    // The slot of the pending top-level key, if it is one of KEYS.
    let mut key: Option<usize> = None;
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
                if c != b']' {
                    tokens += 1;
                }
                ended = s.value(c, &mut expect, &mut stack)?;
                if stack.len() > JSONB_MAX_DEPTH {
                    s.note(JsonbProblem::TooDeep);
                }
            }
            Expect::KeyOrClose | Expect::Key => {
                if c == b'"' {
                    let start = s.pos;
                    let escaped = s.string()?;
                    tokens += 1;
                    if stack.len() == 1 {
                        let raw = text.get(start + 1..s.pos - 1).unwrap_or("");
                        key = if !escaped {
                            slot(raw)
                        } else if raw.len() <= 6 * LONGEST_KEY {
                            slot(&unescape(raw))
                        } else {
                            None
                        };
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
            Expect::CommaOrClose => ended = s.comma_or_close(c, &mut expect, &mut stack)?,
        }
        if let Some(kind) = ended {
            // A container that just closed started at `value_start` only if it is the root or
            // a top-level member; scalars always start there.
            let value = Value { kind, text: text.get(value_start.min(s.pos)..s.pos).unwrap_or("") };
            if stack.is_empty() {
                root = Value { kind, text: text.get(..s.pos).unwrap_or("") };
                break;
            }
            if stack.len() == 1 && stack[0] {
                if let Some(i) = key.take() {
                    if let Some(place) = slots.get_mut(i) {
                        *place = Some(value);
                    }
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
    Ok(Parsed { root, slots, jsonb_problem: s.problem, tokens })
}

/// The text of a string's contents (without quotes) with escapes resolved; lone surrogates
/// become U+FFFD.
pub fn unescape_str(raw: &str) -> String {
    unescape(raw)
}

fn unescape(raw: &str) -> String {
    let mut out = Vec::with_capacity(raw.len());
    unescape_into(raw, &mut out);
    // Only whole characters were pushed.
    String::from_utf8(out).unwrap_or_default()
}

fn push_char(c: char, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// Appends the UTF-8 of a string's contents (without quotes, validated) with escapes resolved;
/// lone surrogates become U+FFFD. Allocates nothing beyond `out`.
pub fn unescape_into(raw: &str, out: &mut Vec<u8>) {
    unescape_to(raw, out, false);
}

/// Appends the WTF-8 of a string's contents (without quotes, validated) with escapes resolved:
/// the JavaScript string `JSON.parse` makes of it, exactly. A surrogate escape pairs with an
/// escaped low surrogate right after it, as in [`unescape_into`]; a lone one is kept as its
/// three-byte sequence (`ED A0..BF xx`), which no UTF-8 text holds.
pub fn unescape_wtf8_into(raw: &str, out: &mut Vec<u8>) {
    unescape_to(raw, out, true);
}

fn unescape_to(raw: &str, out: &mut Vec<u8>, keep_lone: bool) {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let Some(skip) = memchr::memchr(b'\\', &b[i..]) else {
            out.extend_from_slice(&b[i..]);
            return;
        };
        out.extend_from_slice(&b[i..i + skip]);
        i += skip;
        match b.get(i + 1).copied() {
            Some(b'u') => {
                let unit = b.get(i + 2..).and_then(hex4).unwrap_or(0xFFFD);
                i += 6;
                let c = match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate pairs only with an escaped low one right after it.
                        let low = (b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u'))
                            .then(|| b.get(i + 2..).and_then(hex4))
                            .flatten()
                            .filter(|l| (0xDC00..=0xDFFF).contains(l));
                        match low {
                            Some(low) => {
                                i += 6;
                                char::from_u32(0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00))
                            }
                            None => None,
                        }
                    }
                    _ => char::from_u32(u32::from(unit)),
                };
                match c {
                    Some(c) => push_char(c, out),
                    // A lone surrogate: its generalised UTF-8 (WTF-8) form.
                    None if keep_lone => out.extend_from_slice(&[
                        0xE0 | (unit >> 12) as u8,
                        0x80 | ((unit >> 6) & 0x3F) as u8,
                        0x80 | (unit & 0x3F) as u8,
                    ]),
                    None => push_char(char::REPLACEMENT_CHARACTER, out),
                }
            }
            e => {
                out.push(match e {
                    Some(b'b') => 8,
                    Some(b'f') => 12,
                    Some(b'n') => b'\n',
                    Some(b'r') => b'\r',
                    Some(b't') => b'\t',
                    Some(other) => other,
                    None => b'\\',
                });
                i += 2;
            }
        }
    }
}

/// The byte after a validated string that starts at `at` (its opening quote).
pub(super) fn string_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while let Some(k) = b.get(i..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) {
        i += k;
        if b[i] == b'"' {
            return i + 1;
        }
        i += 2;
    }
    b.len()
}

/// The byte after the validated value that starts at `at`.
fn value_end(b: &[u8], at: usize) -> usize {
    match b.get(at) {
        Some(b'"') => string_end(b, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&c) = b.get(i) {
                match c {
                    b'"' => {
                        i = string_end(b, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            b.len()
        }
        _ => {
            let mut i = at;
            while b.get(i).is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                i += 1;
            }
            i
        }
    }
}

fn kind_at(b: &[u8], at: usize) -> Kind {
    match b.get(at) {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(b'"') => Kind::String,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'n') => Kind::Null,
        _ => Kind::Number,
    }
}

pub(super) fn skip_ws_at(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| is_ws(*c)) {
        i += 1;
    }
    i
}

/// A container's children, read lazily from its validated text: no allocation per child.
#[derive(Debug, Clone)]
pub struct Children<'a> {
    text: &'a str,
    /// Where the next child (or its separator) starts; `text.len()` when done.
    pos: usize,
    object: bool,
}

impl<'a> Children<'a> {
    fn of(v: &Value<'a>) -> Children<'a> {
        let object = v.kind == Kind::Object;
        let pos = if object || v.kind == Kind::Array { 1 } else { v.text.len() };
        Children { text: v.text, pos, object }
    }

    /// The next child: its raw key text (objects; escapes unresolved) and whether the key has
    /// escapes, and its value.
    fn next_raw(&mut self) -> Option<(Option<(&'a str, bool)>, Value<'a>)> {
        let b = self.text.as_bytes();
        let mut i = skip_ws_at(b, self.pos);
        if b.get(i) == Some(&b',') {
            i = skip_ws_at(b, i + 1);
        }
        if matches!(b.get(i), None | Some(b'}' | b']')) {
            self.pos = b.len();
            return None;
        }
        let mut key = None;
        if self.object {
            let end = string_end(b, i);
            let raw = self.text.get(i + 1..end.saturating_sub(1)).unwrap_or("");
            key = Some((raw, memchr::memchr(b'\\', raw.as_bytes()).is_some()));
            i = skip_ws_at(b, end);
            // ':'
            i = skip_ws_at(b, i + 1);
        }
        let end = value_end(b, i);
        let value = Value { kind: kind_at(b, i), text: self.text.get(i..end).unwrap_or("") };
        self.pos = end;
        Some((key, value))
    }
}

/// An object's members: key (escapes resolved) and value, in written order, duplicates
/// included.
impl<'a> Iterator for Children<'a> {
    type Item = (Cow<'a, str>, Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = self.next_raw()?;
        let key = match key {
            None => Cow::Borrowed(""),
            Some((raw, false)) => Cow::Borrowed(raw),
            Some((raw, true)) => Cow::Owned(unescape(raw)),
        };
        Some((key, value))
    }
}

/// Whether a raw key (escapes unresolved) names `key`.
fn key_is(raw: &str, escaped: bool, key: &str) -> bool {
    if escaped {
        raw.len() <= 6 * key.len() && unescape(raw) == key
    } else {
        raw == key
    }
}

impl<'a> Value<'a> {
    /// The text between a string's quotes (escapes unresolved).
    fn raw_string(&self) -> &'a str {
        self.text.get(1..self.text.len().saturating_sub(1)).unwrap_or("")
    }

    /// A string's contents with escapes resolved (`None` for other kinds).
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        if self.kind != Kind::String {
            return None;
        }
        let raw = self.raw_string();
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

    /// An object's members, read lazily (none for other kinds).
    pub fn members(&self) -> Children<'a> {
        Children::of(&Value {
            kind: if self.kind == Kind::Object { Kind::Object } else { Kind::Null },
            text: self.text,
        })
    }

    /// An object's member `key` (the last one, as in JavaScript); one pass, no allocation.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        let [found] = self.pick([key]);
        found
    }

    /// Several members of an object in one pass over it (the last occurrence of each).
    pub fn pick<const N: usize>(&self, keys: [&str; N]) -> [Option<Value<'a>>; N] {
        let mut out = [None; N];
        if self.kind != Kind::Object {
            return out;
        }
        let mut children = Children::of(self);
        while let Some((Some((raw, escaped)), value)) = children.next_raw() {
            for (k, slot) in keys.iter().zip(out.iter_mut()) {
                if key_is(raw, escaped, k) {
                    *slot = Some(value);
                }
            }
        }
        out
    }

    /// An array's items, read lazily (none for other kinds).
    pub fn items(&self) -> impl Iterator<Item = Value<'a>> {
        let mut children = Children::of(&Value {
            kind: if self.kind == Kind::Array { Kind::Array } else { Kind::Null },
            text: self.text,
        });
        std::iter::from_fn(move || children.next_raw().map(|(_, v)| v))
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
            Kind::String => K::String(self.raw_string()),
            Kind::Array => K::Array,
            Kind::Object => K::Object,
        })
    }

    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Self::Error> {
        let mut children = Children::of(&self);
        while let Some((key, value)) = children.next_raw() {
            // A key written with escapes matches no plain name.
            out.push((key.map(|(raw, escaped)| if escaped { "" } else { raw }), value));
        }
        Ok(())
    }
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
    fn records_the_known_top_level_members_and_finds_the_others_by_streaming() {
        let p = ok(r#"{"type": "TOOL_RESULT", "seq": 12, "data": {"x": [1, 2]}, "ok": true, "n": null, "e\u0041": 1}"#);
        assert_eq!(p.root.kind, Kind::Object);
        let keys: Vec<String> = p.root.members().map(|(k, _)| k.into_owned()).collect();
        assert_eq!(keys, ["type", "seq", "data", "ok", "n", "eA"]);
        assert_eq!(p.get("type").and_then(|v| v.as_str()).as_deref(), Some("TOOL_RESULT"));
        assert_eq!(p.get("seq").and_then(|v| v.as_i64()), Some(12));
        assert_eq!(p.get("data").map(|v| v.text), Some(r#"{"x": [1, 2]}"#));
        assert_eq!(p.get("data").and_then(|d| d.get("x")).map(|x| x.items().count()), Some(2));
        // Keys outside KEYS are read from the text.
        assert_eq!(p.get("ok").and_then(|v| v.as_bool()), Some(true));
        assert_eq!(p.get("n").map(|v| v.kind), Some(Kind::Null));
        assert_eq!(p.get("eA").and_then(|v| v.as_i64()), Some(1));
        assert!(!p.has("missing"));
        // The last duplicate wins, as in JavaScript, for recorded and streamed keys alike.
        assert_eq!(ok(r#"{"a":1,"a":2}"#).get("a").and_then(|v| v.as_i64()), Some(2));
        assert_eq!(ok(r#"{"seq":1,"seq":2}"#).get("seq").and_then(|v| v.as_i64()), Some(2));
        // An escaped spelling of a known key is that key.
        assert_eq!(
            ok(r#"{"typ\u0065":"X","\u0074imestamp":1}"#).get("type").and_then(|v| v.as_str()).as_deref(),
            Some("X")
        );
        assert!(ok(r#"{"\u0074imestamp":1}"#).has("timestamp"));
        // Only objects have members.
        assert_eq!(ok("[1]").get("type"), None);
        assert_eq!(ok("[1]").root.members().count(), 0);
    }

    #[test]
    fn every_known_key_has_its_own_slot() {
        for (i, k) in KEYS.iter().enumerate() {
            assert_eq!(slot(k), Some(i), "{k}");
            assert!(k.len() <= LONGEST_KEY, "{k}");
        }
        assert_eq!(slot("nope"), None);
    }

    #[test]
    fn counts_values_and_keys() {
        assert_eq!(ok("1").tokens, 1);
        assert_eq!(ok("[]").tokens, 1);
        assert_eq!(ok("[1,2,[3]]").tokens, 5);
        assert_eq!(ok(r#"{"a":{"b":null},"c":[]}"#).tokens, 7);
    }

    #[test]
    fn memory_does_not_grow_with_the_number_of_members() {
        // A million members (duplicates of a known key and distinct unknown keys) are parsed
        // with no per-member storage: the result is the same size whatever the line holds.
        let dup = format!("{{{}\"type\":\"last\"}}", "\"type\":1,".repeat(500_000));
        let p = ok(&dup);
        assert_eq!(p.get("type").and_then(|v| v.as_str()).as_deref(), Some("last"));
        assert_eq!(p.tokens, 1 + 2 * 500_001);
        let distinct: String = (0..500_000).map(|i| format!("\"k{i}\":{i},")).collect();
        let text = format!("{{{distinct}\"type\":\"x\"}}");
        let p = ok(&text);
        assert_eq!(p.get("k499999").and_then(|v| v.as_i64()), Some(499_999));
        assert_eq!(std::mem::size_of_val(&p), std::mem::size_of::<Parsed<'_>>());
    }

    #[test]
    fn picks_several_members_in_one_pass() {
        let v = ok(r#"{"a":1,"b":{"c":[{"d":"}"}]},"a":"x\"y","e":null}"#).root;
        let [a, b, e, z] = v.pick(["a", "b", "e", "z"]);
        assert_eq!(a.and_then(|a| a.as_str()).as_deref(), Some("x\"y"));
        assert_eq!(b.map(|b| b.text), Some(r#"{"c":[{"d":"}"}]}"#));
        assert_eq!(e.map(|e| e.kind), Some(Kind::Null));
        assert_eq!(z, None);
    }

    #[test]
    fn reads_array_items_of_every_kind() {
        let p = ok(r#"{"c": [ {"type": "tool_use", "id": "t1"}, "s,]", [1, [2]], 3 , true, null ]}"#);
        let items: Vec<Value<'_>> = p.get("c").map(|c| c.items().collect()).unwrap_or_default();
        let kinds: Vec<Kind> = items.iter().map(|v| v.kind).collect();
        assert_eq!(kinds, [Kind::Object, Kind::String, Kind::Array, Kind::Number, Kind::Bool, Kind::Null]);
        assert_eq!(items[0].get("id").and_then(|v| v.as_str()).as_deref(), Some("t1"));
        assert_eq!(items[1].as_str().as_deref(), Some("s,]"));
        assert_eq!(items[2].text, "[1, [2]]");
        assert_eq!(ok("{\"c\": []}").get("c").map(|c| c.items().count()), Some(0));
        assert_eq!(ok("{\"c\": [ ]}").get("c").map(|c| c.items().count()), Some(0));
        assert_eq!(ok("\"s\"").root.items().count(), 0);
    }

    #[test]
    fn unescapes_strings_like_javascript() {
        let v = ok(r#""a\"b\\c\/d\u00e9\ud83d\ude00\n""#).root;
        assert_eq!(v.as_str().as_deref(), Some("a\"b\\c/dé😀\n"));
        assert_eq!(ok(r#""\ud800x""#).root.as_str().as_deref(), Some("\u{fffd}x"));
        assert_eq!(ok(r#""\udc00\ud800""#).root.as_str().as_deref(), Some("\u{fffd}\u{fffd}"));
        assert_eq!(ok(r#""\ud800\ud83d\ude00""#).root.as_str().as_deref(), Some("\u{fffd}😀"));
        assert_eq!(ok(r#""\u0000""#).root.as_str().as_deref(), Some("\0"));
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
        assert_eq!(ok(&objects).root.members().count(), 1);
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
