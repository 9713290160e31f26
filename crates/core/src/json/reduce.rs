//! Reducing a line too long to hold to a summary that fits, while it streams past. Pure.
//!
//! A session line longer than `cortex_buffer.max_line_bytes` is usually ordinary: a tool result
//! holding a file, an image in base64, a long command's output. The line reader cannot hold it,
//! but it can show it, piece by piece, to a [`Reducer`], which
//!
//! - validates it with exactly the acceptance of the line path: the bytes decoded as UTF-8 with
//!   invalid sequences replaced by U+FFFD ([`super::utf8_stream`], as `indexer::judge::decode`),
//!   JavaScript white space trimmed at both ends (`js_trim`, the BOM included), then
//!   `JSON.parse`'s grammar ([`super::parse::parse`]): any depth, lone surrogate escapes,
//!   numbers of any size. So whether a line is JSON never depends on its length;
//! - writes a reduced copy of the document: the same document, compact (no white space between
//!   tokens), except that every string, number or key inside the root whose text (between the
//!   quotes, escapes as written) is longer than [`Limits::max_string`] is replaced. A value
//!   becomes the sentinel object
//!
//!   ```text
//!   {"cortex_buffer:truncated":{"bytes":<its length>,"head":"<its first ~1 KiB>"}}
//!   ```
//!
//!   (a number has no head), and a key becomes the string
//!   `"cortex_buffer:truncated(<its length> bytes):<its first ~1 KiB>"`. A head is cut on a
//!   character and escape boundary, never between the halves of a surrogate pair, so it is
//!   valid JSON and says what the text said.
//!
//! Memory is bounded by [`Limits::max_memory`], whatever the line holds: the reduced text, the
//! output position of each open container it is writing (two words each) and one bit per level
//! of nesting. When the next byte of output would not fit, the innermost open container that
//! holds at least a quarter of the output (never the root) is cut back to where it began, its
//! remaining content is only validated, and when it closes it is written as
//! `{"cortex_buffer:truncated":{"bytes":<its length>}}`. When no container qualifies (the root
//! itself is what is large, or it is a scalar), the line is [`Unreduced::TooLarge`]: the caller
//! treats it as it treated every over-long line before. The root is never replaced, so a
//! reduced line has the kind and the top-level keys of the line: it judges as the line would.
//!
//! Resuming: a reducer is plain owned data (`Clone`), O(`max_memory`), and holds nothing of the
//! input but a character cut between two pieces; a caller that sees a line in several passes
//! keeps it between them, in memory or as bytes ([`Reducer::to_bytes`], [`Reducer::from_bytes`]:
//! for push ingestion, whose pieces of a line arrive in separate transactions). The line reader
//! does not: it reduces a line in the one pass that reads it whole. Bytes it steps over without
//! reading ([`Reducer::skip`]: a sparse file's hole, or what push ingestion did not keep of a
//! line that spans pushes) make the line [`Unreduced::Unknown`]: a hole reads as zeros, which no
//! JSON text holds.

use super::parse::is_js_space;
use super::quote::next_escape;
use super::utf8_stream::Utf8Stream;

/// The key of the sentinel object that stands for a value that was cut.
pub const TRUNCATED_KEY: &str = "cortex_buffer:truncated";

/// Strings and numbers longer than this (bytes between the quotes, escapes as written) are cut.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// How much of a cut string is kept.
pub const HEAD_BYTES: usize = 1024;

/// The share of `cortex_buffer.max_line_memory` a reduction may hold: 1/64, so that converting
/// the reduced text to `jsonb` (at most 3 bytes per byte and 80 per value, `working_memory`,
/// with at most one value per two bytes: 43 bytes per byte) fits in `max_line_memory` too.
pub const LINE_MEMORY_SHARE: u64 = 64;

/// What a reduction may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Strings, numbers and keys inside the root longer than this are cut.
    pub max_string: usize,
    /// How much of a cut string or key is kept (at most `max_string`).
    pub head: usize,
    /// The most memory the reducer holds: its output and its stacks.
    pub max_memory: usize,
}

impl Limits {
    /// Limits as given, made consistent: a head no longer than what is cut, and room for a few
    /// sentinels.
    pub fn new(max_string: usize, head: usize, max_memory: usize) -> Limits {
        let max_memory = max_memory.max(1024);
        let max_string = max_string.clamp(8, max_memory / 4);
        Limits { max_string, head: head.min(max_string), max_memory }
    }

    /// The output's share of the memory: half.
    fn out_budget(self) -> usize {
        self.max_memory / 2
    }

    /// The open containers' frames' share: a quarter, in frames.
    fn frames_budget(self) -> usize {
        self.max_memory / 4 / FRAME_BYTES
    }

    /// The nesting bits' share: a quarter, in words.
    fn objects_budget(self) -> usize {
        self.max_memory / 4 / 8
    }

    /// The limits for a line under `cortex_buffer.max_line_memory`: 1/64 of it
    /// ([`LINE_MEMORY_SHARE`]), strings cut over 64 KiB (less when that is more than an eighth
    /// of the memory) to their first KiB.
    pub fn for_line_memory(max_line_memory: u64) -> Limits {
        let max_memory = usize::try_from(max_line_memory / LINE_MEMORY_SHARE).unwrap_or(usize::MAX).max(16 * 1024);
        Limits::new(MAX_STRING_BYTES.min(max_memory / 8), HEAD_BYTES, max_memory)
    }
}

/// A reduced line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduced {
    /// The reduced document: valid JSON, compact, with no white space around it.
    pub text: String,
    /// Strings, numbers or keys longer than `max_string` were cut.
    pub cut_values: bool,
    /// Containers that did not fit were replaced by their length.
    pub cut_containers: bool,
    /// Invalid UTF-8 was replaced by U+FFFD (as the line path's `decode` does).
    pub lossy: bool,
    /// The bytes fed: the line's length.
    pub original_len: u64,
}

impl Reduced {
    /// Whether the text says less than the line.
    pub fn truncated(&self) -> bool {
        self.cut_values || self.cut_containers
    }
}

/// Why a line has no reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreduced {
    /// `JSON.parse` would throw; `at` counts bytes of the decoded text.
    Invalid { at: u64, what: &'static str },
    /// Valid, but no summary fits in the memory allowed.
    TooLarge,
    /// Bytes of it were stepped over unread, at `at`.
    Unknown { at: u64 },
}

/// Why a line is not JSON: each `what` of [`Unreduced::Invalid`], named so that a reducer's
/// saved state ([`Reducer::to_bytes`]) can say which one it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    UnexpectedEnd,
    TextAfterValue,
    UnexpectedCharacter,
    ExpectedKey,
    ExpectedColon,
    ExpectedCommaOrClose,
    ControlCharacter,
    BadEscape,
    BadHexEscape,
    BadNumber,
    BadLiteral,
}

impl Problem {
    /// Every problem. A saved state names one by its place here: append only.
    const ALL: [Problem; 11] = [
        Problem::UnexpectedEnd,
        Problem::TextAfterValue,
        Problem::UnexpectedCharacter,
        Problem::ExpectedKey,
        Problem::ExpectedColon,
        Problem::ExpectedCommaOrClose,
        Problem::ControlCharacter,
        Problem::BadEscape,
        Problem::BadHexEscape,
        Problem::BadNumber,
        Problem::BadLiteral,
    ];

    fn what(self) -> &'static str {
        match self {
            Problem::UnexpectedEnd => "unexpected end",
            Problem::TextAfterValue => "unexpected text after the value",
            Problem::UnexpectedCharacter => "unexpected character",
            Problem::ExpectedKey => "expected a key",
            Problem::ExpectedColon => "expected ':'",
            Problem::ExpectedCommaOrClose => "expected ',' or a closing bracket",
            Problem::ControlCharacter => "control character in string",
            Problem::BadEscape => "bad escape",
            Problem::BadHexEscape => "bad \\u escape",
            Problem::BadNumber => "bad number",
            Problem::BadLiteral => "bad literal",
        }
    }
}

/// Whether JSON text holds something a reducer cut: its sentinel key, or a key it cut (both
/// written `"cortex_buffer:truncated…`). Any string that starts with that name counts too (it
/// cannot be told apart without parsing); callers use this to distrust a value, the safe side.
pub fn holds_truncation(text: &str) -> bool {
    // Built once: a recovery plan asks this of every line it reads.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"cortex_buffer:truncated"));
    FINDER.find(text.as_bytes()).is_some()
}

/// Reduces a whole text (tests and callers that hold it anyway).
pub fn reduce(bytes: &[u8], limits: Limits) -> Result<Reduced, Unreduced> {
    let mut r = Reducer::new(limits);
    r.feed(bytes);
    r.finish()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Before the root: JavaScript white space.
    Lead,
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    Key,
    Colon,
    /// After a value inside a container.
    CommaOrClose,
    /// After the root: JavaScript white space only.
    Trail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After a backslash.
    Backslash,
    /// After `\u` and this many hex digits.
    Hex(u8),
}

/// Where in a number's grammar the last byte left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Start,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ExpSign,
    Exp,
}

impl Num {
    fn next(self, c: u8) -> Option<Num> {
        Some(match (self, c) {
            (Num::Start, b'-') => Num::Minus,
            (Num::Start | Num::Minus, b'0') => Num::Zero,
            (Num::Start | Num::Minus, b'1'..=b'9') | (Num::Int, b'0'..=b'9') => Num::Int,
            (Num::Zero | Num::Int, b'.') => Num::Dot,
            (Num::Dot | Num::Frac, b'0'..=b'9') => Num::Frac,
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::E,
            (Num::E, b'+' | b'-') => Num::ExpSign,
            (Num::E | Num::ExpSign | Num::Exp, b'0'..=b'9') => Num::Exp,
            _ => return None,
        })
    }

    /// Whether a number may end here.
    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }
}

/// A scalar being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    Str { key: bool, escape: Escape },
    Num(Num),
    Lit { word: &'static [u8], matched: usize },
}

/// An open container that is being written.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Where its bracket is in the output.
    out_start: usize,
    /// Where its bracket is in the decoded text.
    in_start: u64,
}

const FRAME_BYTES: usize = std::mem::size_of::<Frame>();

/// The container whose content is only validated: its level and where it began.
#[derive(Debug, Clone, Copy)]
struct Collapsed {
    level: usize,
    in_start: u64,
}

/// A streaming reducer: [`feed`](Reducer::feed) it a line's bytes in pieces, then
/// [`finish`](Reducer::finish).
#[derive(Debug, Clone)]
pub struct Reducer {
    limits: Limits,
    utf8: Utf8Stream,
    /// Bytes fed, before decoding.
    fed: u64,
    /// Bytes of decoded text read.
    read: u64,
    expect: Expect,
    scalar: Option<Scalar>,
    /// The scalar being written: where it starts in the output (its quote, for strings), how
    /// long its text is so far, whether it was cut, whether it may be (not the root).
    scalar_start: usize,
    scalar_len: u64,
    scalar_cut: bool,
    scalar_cuttable: bool,
    /// Open containers, and one bit per level: set for an object.
    depth: usize,
    objects: Vec<u64>,
    /// The open containers being written, outermost first (`frames.len() == depth` while
    /// writing).
    frames: Vec<Frame>,
    collapsed: Option<Collapsed>,
    out: Vec<u8>,
    cut_values: bool,
    cut_containers: bool,
    too_large: bool,
    failed: Option<Unreduced>,
}

impl Reducer {
    pub fn new(limits: Limits) -> Reducer {
        Reducer {
            limits,
            utf8: Utf8Stream::new(),
            fed: 0,
            read: 0,
            expect: Expect::Lead,
            scalar: None,
            scalar_start: 0,
            scalar_len: 0,
            scalar_cut: false,
            scalar_cuttable: false,
            depth: 0,
            objects: Vec::new(),
            frames: Vec::new(),
            collapsed: None,
            out: Vec::new(),
            cut_values: false,
            cut_containers: false,
            too_large: false,
            failed: None,
        }
    }

    /// The next bytes of the line.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.fed = self.fed.saturating_add(bytes.len() as u64);
        if self.failed.is_some() {
            return;
        }
        let mut utf8 = std::mem::take(&mut self.utf8);
        utf8.push(bytes, &mut |text| self.eat(text));
        self.utf8 = utf8;
    }

    /// `n` bytes of the line that were not read (a hole): the line is unknown.
    pub fn skip(&mut self, n: u64) {
        self.fed = self.fed.saturating_add(n);
        if n > 0 && self.failed.is_none() {
            self.failed = Some(Unreduced::Unknown { at: self.read });
        }
    }

    /// Whether the line is already known to have no reduction: invalid, unknown, or nested
    /// deeper than its nesting bits may follow (a line merely too large to summarise is still
    /// validated to the end, and known only at [`finish`](Reducer::finish)).
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Memory held: what [`Limits::max_memory`] bounds.
    pub fn held_bytes(&self) -> usize {
        self.out.capacity() + self.frames.capacity() * FRAME_BYTES + self.objects.capacity() * 8
    }

    /// The end of the line.
    pub fn finish(mut self) -> Result<Reduced, Unreduced> {
        let mut utf8 = std::mem::take(&mut self.utf8);
        if self.failed.is_none() {
            utf8.finish(&mut |text| self.eat(text));
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        match self.scalar {
            Some(Scalar::Num(n)) if n.complete() => self.end_number(),
            Some(_) => return Err(Unreduced::Invalid { at: self.read, what: Problem::UnexpectedEnd.what() }),
            None => {}
        }
        if self.expect != Expect::Trail {
            return Err(Unreduced::Invalid { at: self.read, what: Problem::UnexpectedEnd.what() });
        }
        if self.too_large {
            return Err(Unreduced::TooLarge);
        }
        // Only whole characters were written, and heads are cut on character boundaries.
        let text = String::from_utf8(self.out).map_err(|_| Unreduced::TooLarge)?;
        Ok(Reduced {
            text,
            cut_values: self.cut_values,
            cut_containers: self.cut_containers,
            lossy: utf8.replaced(),
            original_len: self.fed,
        })
    }

    /// Reads decoded text (whole characters).
    fn eat(&mut self, text: &str) {
        let mut i = 0;
        while i < text.len() && self.failed.is_none() {
            i = self.step(text, i);
        }
        self.read = self.read.saturating_add(text.len() as u64);
    }

    fn fail(&mut self, i: usize, problem: Problem) {
        let at = self.read.saturating_add(i as u64);
        self.failed.get_or_insert(Unreduced::Invalid { at, what: problem.what() });
    }

    /// Reads from `text[i..]` (a character boundary); returns where to go on.
    fn step(&mut self, text: &str, i: usize) -> usize {
        let b = text.as_bytes();
        if let Some(scalar) = self.scalar {
            return match scalar {
                Scalar::Str { key, escape } => self.string_step(b, i, key, escape),
                Scalar::Num(n) => self.number_step(b, i, n),
                Scalar::Lit { word, matched } => self.literal_step(b, i, word, matched),
            };
        }
        let Some(&c) = b.get(i) else { return b.len() };
        if matches!(self.expect, Expect::Lead | Expect::Trail) {
            return match text.get(i..).and_then(|t| t.chars().next()) {
                Some(ch) if is_js_space(ch) => i + ch.len_utf8(),
                _ if self.expect == Expect::Trail => {
                    self.fail(i, Problem::TextAfterValue);
                    b.len()
                }
                _ => {
                    self.expect = Expect::Value;
                    i
                }
            };
        }
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            let run = b.get(i..).unwrap_or_default().iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
            return i + run.count();
        }
        match self.expect {
            Expect::Value | Expect::ValueOrClose => match c {
                b'{' => self.open(true, i),
                b'[' => self.open(false, i),
                b']' if self.expect == Expect::ValueOrClose => self.close(i),
                b'"' => self.begin_string(false),
                b'-' | b'0'..=b'9' => {
                    self.begin_scalar(Scalar::Num(Num::Start));
                    return i;
                }
                b't' | b'f' | b'n' => {
                    let word: &'static [u8] = match c {
                        b't' => b"true",
                        b'f' => b"false",
                        _ => b"null",
                    };
                    self.scalar = Some(Scalar::Lit { word, matched: 0 });
                    return i;
                }
                _ => self.fail(i, Problem::UnexpectedCharacter),
            },
            Expect::KeyOrClose | Expect::Key => match c {
                b'"' => self.begin_string(true),
                b'}' if self.expect == Expect::KeyOrClose => self.close(i),
                _ => self.fail(i, Problem::ExpectedKey),
            },
            Expect::Colon => {
                if c == b':' {
                    self.write(b":");
                    self.expect = Expect::Value;
                } else {
                    self.fail(i, Problem::ExpectedColon);
                }
            }
            Expect::CommaOrClose => {
                let object = self.innermost_is_object();
                match c {
                    b',' => {
                        self.write(b",");
                        self.expect = if object { Expect::Key } else { Expect::Value };
                    }
                    b'}' if object => self.close(i),
                    b']' if !object => self.close(i),
                    _ => self.fail(i, Problem::ExpectedCommaOrClose),
                }
            }
            Expect::Lead | Expect::Trail => {}
        }
        i + 1
    }

    fn begin_scalar(&mut self, scalar: Scalar) {
        self.scalar = Some(scalar);
        self.scalar_start = self.out.len();
        self.scalar_len = 0;
        self.scalar_cut = false;
        self.scalar_cuttable = self.depth > 0;
    }

    fn begin_string(&mut self, key: bool) {
        self.begin_scalar(Scalar::Str { key, escape: Escape::None });
        self.write(b"\"");
    }

    fn string_step(&mut self, b: &[u8], i: usize, key: bool, escape: Escape) -> usize {
        let Some(&c) = b.get(i) else { return b.len() };
        let escape_now = |this: &mut Reducer, escape| this.scalar = Some(Scalar::Str { key, escape });
        match escape {
            Escape::None => {
                let rest = b.get(i..).unwrap_or_default();
                let Some(k) = next_escape(rest) else {
                    self.scalar_bytes(rest);
                    return b.len();
                };
                self.scalar_bytes(rest.get(..k).unwrap_or_default());
                match rest.get(k) {
                    Some(b'"') => self.end_string(key),
                    Some(b'\\') => {
                        self.scalar_bytes(b"\\");
                        escape_now(self, Escape::Backslash);
                    }
                    _ => {
                        self.fail(i + k, Problem::ControlCharacter);
                        return b.len();
                    }
                }
                i + k + 1
            }
            Escape::Backslash => {
                match c {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => escape_now(self, Escape::None),
                    b'u' => escape_now(self, Escape::Hex(0)),
                    _ => {
                        self.fail(i, Problem::BadEscape);
                        return b.len();
                    }
                }
                self.scalar_bytes(&[c]);
                i + 1
            }
            Escape::Hex(n) => {
                if !c.is_ascii_hexdigit() {
                    self.fail(i, Problem::BadHexEscape);
                    return b.len();
                }
                escape_now(self, if n >= 3 { Escape::None } else { Escape::Hex(n + 1) });
                self.scalar_bytes(&[c]);
                i + 1
            }
        }
    }

    fn end_string(&mut self, key: bool) {
        self.scalar = None;
        if self.writing() {
            if self.scalar_cut {
                let n = self.scalar_len;
                if key {
                    self.insert(self.scalar_start + 1, format!("{TRUNCATED_KEY}({n} bytes):").as_bytes());
                    self.write(b"\"");
                } else {
                    self.insert(
                        self.scalar_start,
                        format!("{{\"{TRUNCATED_KEY}\":{{\"bytes\":{n},\"head\":").as_bytes(),
                    );
                    self.write(b"\"}}");
                }
            } else {
                self.write(b"\"");
            }
        }
        if key {
            self.expect = Expect::Colon;
        } else {
            self.ended();
        }
    }

    fn number_step(&mut self, b: &[u8], i: usize, mut n: Num) -> usize {
        let mut j = i;
        while let Some(next) = b.get(j).and_then(|&c| n.next(c)) {
            n = next;
            j += 1;
        }
        self.scalar_bytes(b.get(i..j).unwrap_or_default());
        if j < b.len() {
            // The byte at `j` does not continue the number: it ends here, and `j` is read next.
            if n.complete() {
                self.end_number();
            } else {
                self.fail(j, Problem::BadNumber);
            }
        } else {
            self.scalar = Some(Scalar::Num(n));
        }
        j
    }

    fn end_number(&mut self) {
        self.scalar = None;
        if self.writing() && self.scalar_cut {
            let n = self.scalar_len;
            self.write(format!("{{\"{TRUNCATED_KEY}\":{{\"bytes\":{n}}}}}").as_bytes());
        }
        self.ended();
    }

    fn literal_step(&mut self, b: &[u8], i: usize, word: &'static [u8], mut matched: usize) -> usize {
        let mut j = i;
        while let (Some(&want), Some(&c)) = (word.get(matched), b.get(j)) {
            if c != want {
                self.fail(j, Problem::BadLiteral);
                return b.len();
            }
            matched += 1;
            j += 1;
        }
        if matched < word.len() {
            self.scalar = Some(Scalar::Lit { word, matched });
        } else {
            self.scalar = None;
            self.write(word);
            self.ended();
        }
        j
    }

    /// A run of a scalar's text (between a string's quotes, or a number's): written while it
    /// is short, cut once it is longer than `max_string` (inside the root only).
    fn scalar_bytes(&mut self, bytes: &[u8]) {
        let before = self.scalar_len;
        self.scalar_len = before.saturating_add(bytes.len() as u64);
        if !self.writing() || self.scalar_cut {
            return;
        }
        if !self.scalar_cuttable {
            self.write_run(bytes);
            return;
        }
        let max = self.limits.max_string as u64;
        // One byte past the limit is enough to know it is cut.
        let room = usize::try_from(max.saturating_add(1).saturating_sub(before)).unwrap_or(usize::MAX);
        self.write_run(bytes.get(..room.min(bytes.len())).unwrap_or(bytes));
        if self.scalar_len > max && self.writing() {
            self.cut_scalar();
        }
    }

    /// Cuts the scalar being written: a string to its quote and head, a number to nothing.
    fn cut_scalar(&mut self) {
        self.scalar_cut = true;
        self.cut_values = true;
        let keep = match self.scalar {
            Some(Scalar::Str { .. }) => {
                let body = self.out.get(self.scalar_start + 1..).unwrap_or_default();
                self.scalar_start + 1 + head_end(body, self.limits.head)
            }
            _ => self.scalar_start,
        };
        self.out.truncate(keep);
    }

    fn open(&mut self, object: bool, i: usize) {
        let level = self.depth;
        let (word, bit) = (level / 64, 1u64 << (level % 64));
        if self.objects.len() <= word && !self.grow_objects() {
            return;
        }
        if let Some(w) = self.objects.get_mut(word) {
            *w = if object { *w | bit } else { *w & !bit };
        }
        self.depth += 1;
        if self.writing() {
            let start = self.out.len();
            if self.room_for_frame() {
                self.write(if object { b"{" } else { b"[" });
                if self.writing() {
                    self.frames.push(Frame { out_start: start, in_start: self.read.saturating_add(i as u64) });
                }
            }
        }
        self.expect = if object { Expect::KeyOrClose } else { Expect::ValueOrClose };
    }

    fn close(&mut self, i: usize) {
        let level = self.depth.saturating_sub(1);
        self.write(if self.innermost_is_object() { b"}" } else { b"]" });
        if self.writing() {
            self.frames.pop();
        } else if let Some(c) = self.collapsed.filter(|c| c.level == level) {
            // The container whose content was only validated ends: it is written as its length.
            self.collapsed = None;
            let n = self.read.saturating_add(i as u64 + 1).saturating_sub(c.in_start);
            self.write(format!("{{\"{TRUNCATED_KEY}\":{{\"bytes\":{n}}}}}").as_bytes());
        }
        self.depth = level;
        self.ended();
    }

    fn ended(&mut self) {
        self.expect = if self.depth == 0 { Expect::Trail } else { Expect::CommaOrClose };
    }

    fn innermost_is_object(&self) -> bool {
        self.is_object(self.depth.saturating_sub(1))
    }

    /// Whether the container at `level` (0: the root) is an object.
    fn is_object(&self, level: usize) -> bool {
        self.objects.get(level / 64).is_some_and(|w| w & (1u64 << (level % 64)) != 0)
    }

    fn writing(&self) -> bool {
        !self.too_large && self.collapsed.is_none()
    }

    /// Room for `n` more bytes of output, within its share of the memory; when there is none,
    /// a container is collapsed (or the reduction given up) and nothing is written.
    fn room(&mut self, n: usize) -> bool {
        if !self.writing() {
            return false;
        }
        let (len, cap, budget) = (self.out.len(), self.out.capacity(), self.limits.out_budget());
        if len.saturating_add(n) > budget {
            self.overflow();
            return false;
        }
        if cap - len < n {
            let want = cap.saturating_mul(2).max(len + n).max(256).min(budget);
            self.out.reserve_exact(want - len);
        }
        true
    }

    /// Room for one more open container's frame, within its share of the memory.
    fn room_for_frame(&mut self) -> bool {
        let (len, cap) = (self.frames.len(), self.frames.capacity());
        if len < cap {
            return true;
        }
        let budget = self.limits.frames_budget();
        if len >= budget {
            self.overflow();
            return false;
        }
        self.frames.reserve_exact(cap.saturating_mul(2).max(8).min(budget) - len);
        true
    }

    /// One more word of nesting bits, within its share of the memory; when they do not fit, the
    /// line is too deep to summarise (and to follow: validation stops).
    fn grow_objects(&mut self) -> bool {
        let (len, cap) = (self.objects.len(), self.objects.capacity());
        if len == cap {
            let budget = self.limits.objects_budget();
            if len >= budget {
                self.give_up();
                self.failed.get_or_insert(Unreduced::TooLarge);
                return false;
            }
            self.objects.reserve_exact(cap.saturating_mul(2).max(8).min(budget) - len);
        }
        self.objects.push(0);
        true
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.room(bytes.len()) {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Writes a run of a scalar's text as if byte by byte: what fits, then the overflow at the
    /// budget's edge. The run's length depends on how the line was cut into pieces, so the
    /// overflow must not: its choice of container depends on the output's length when it
    /// happens, which is then always the budget (a fuzz finding: a run written whole
    /// overflowed short of the budget and collapsed another container than the same bytes
    /// written in pieces).
    fn write_run(&mut self, bytes: &[u8]) {
        if !self.writing() {
            return;
        }
        let fit = self.limits.out_budget().saturating_sub(self.out.len());
        match bytes.get(..fit) {
            Some(head) if head.len() < bytes.len() => {
                self.write(head);
                if self.writing() {
                    self.overflow();
                }
            }
            _ => self.write(bytes),
        }
    }

    fn insert(&mut self, at: usize, bytes: &[u8]) {
        if self.room(bytes.len()) {
            self.out.extend_from_slice(bytes);
            if let Some(tail) = self.out.get_mut(at..) {
                tail.rotate_right(bytes.len());
            }
        }
    }

    /// The output is full: collapse the innermost open container (not the root) that holds at
    /// least a quarter of it, or give up.
    fn overflow(&mut self) {
        let total = self.out.len();
        let pick = self
            .frames
            .iter()
            .enumerate()
            .skip(1)
            .rev()
            .find(|(_, f)| total.saturating_sub(f.out_start) >= total / 4)
            .map(|(level, f)| (level, *f));
        match pick {
            Some((level, f)) => {
                self.out.truncate(f.out_start);
                self.frames.truncate(level);
                self.collapsed = Some(Collapsed { level, in_start: f.in_start });
                self.cut_containers = true;
            }
            None => self.give_up(),
        }
    }

    /// No summary fits: keep validating, write nothing more, free what was written.
    fn give_up(&mut self) {
        self.too_large = true;
        self.out = Vec::new();
        self.frames = Vec::new();
    }
}

/// Where to cut a string's text (between its quotes, escapes as written) to keep at most
/// `limit` bytes: on a character boundary, after a whole escape, and never between the two
/// escapes of a surrogate pair.
fn head_end(body: &[u8], limit: usize) -> usize {
    let mut i = 0;
    while let Some(&c) = body.get(i) {
        let width = if c == b'\\' {
            if body.get(i + 1) == Some(&b'u') {
                let unit = body.get(i + 2..i + 6).and_then(hex4);
                let low = body.get(i + 6..i + 8) == Some(b"\\u".as_slice())
                    && body.get(i + 8..i + 12).and_then(hex4).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
                let high = unit.is_some_and(|u| (0xD800..=0xDBFF).contains(&u));
                if high && (low || body.len() < i + 12) {
                    // A pair, or a high half whose follower the cut body no longer shows:
                    // kept whole or not at all.
                    12
                } else {
                    6
                }
            } else {
                2
            }
        } else {
            match c {
                0xF0..=0xFF => 4,
                0xE0..=0xEF => 3,
                0xC0..=0xDF => 2,
                _ => 1,
            }
        };
        if i + width > limit || i + width > body.len() {
            break;
        }
        i += width;
    }
    i
}

fn hex4(b: &[u8]) -> Option<u16> {
    let mut v: u16 = 0;
    for &c in b.get(..4)? {
        v = (v << 4) | u16::try_from((c as char).to_digit(16)?).ok()?;
    }
    Some(v)
}

mod state;

#[cfg(test)]
mod tests;
