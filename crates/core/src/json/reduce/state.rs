//! A reducer's state as bytes, kept between the pieces of a line that arrive in separate calls
//! (push ingestion keeps it in `pushed_file`, each piece in its own transaction). Pure.
//!
//! Format 1, field by field (integers are unsigned LEB128 in their shortest form; `bytes` is a
//! length, then that many bytes):
//!
//! ```text
//! "CBR" 1                          the tag, then the format's version
//! max_string head max_memory       the limits
//! bytes                            the character the last piece cut (0 to 3 bytes)
//! fed read                         bytes fed; bytes of decoded text read
//! expect                           a byte: where the grammar stands
//! scalar                           a byte: 0 none; 1 string, then key (0/1) and escape;
//!                                  2 number, then its state; 3 literal, then its word and matched
//! scalar_start scalar_len
//! flags                            a byte: the scalar cut, cuttable; values cut, containers cut;
//!                                  too large; lossy
//! depth
//! n, n × u64 LE                    the nesting bits
//! n, n × (out_start, in_start)     the containers being written, each as the step from the
//!                                  one before (the first from 0): small numbers
//! collapsed                        a byte: 0 none; 1, then level and in_start
//! bytes                            the output
//! failed                           a byte: 0 none; 1 invalid, then at and what (a byte: its place
//!                                  in `Problem::ALL`); 2 too large; 3 unknown, then at
//! CRC-32 of all the above, u32 LE
//! ```
//!
//! `what` is saved as its place in a fixed table, so a line found invalid before a save is
//! reported after it with the same text. Vectors' capacities are not saved: a reducer read back
//! holds its vectors' lengths and grows them as the original would, within the same budgets, so
//! it never holds more than the original.
//!
//! Reading trusts nothing: the CRC refuses a damaged value, the tag and version a foreign one;
//! every length is checked against the bytes left before anything is allocated (what is read
//! is O(its bytes)); integers not in their shortest form, unknown tags and flags and trailing
//! bytes are refused (a state reads back from exactly one value); and the state must be one the
//! reducer could be in (`consistent`), so it goes on exactly as the original.

use super::{Collapsed, Escape, Expect, Frame, Limits, Num, Problem, Reducer, Scalar, Unreduced};
use crate::json::utf8_stream::Utf8Stream;

/// What a saved state starts with: its tag, then the format's version.
const TAG: &[u8] = b"CBR";
const VERSION: u8 = 1;

/// The values of each enum in the order that numbers them in the format: append only.
const EXPECTS: [Expect; 8] = [
    Expect::Lead,
    Expect::Value,
    Expect::ValueOrClose,
    Expect::KeyOrClose,
    Expect::Key,
    Expect::Colon,
    Expect::CommaOrClose,
    Expect::Trail,
];
const ESCAPES: [Escape; 6] =
    [Escape::None, Escape::Backslash, Escape::Hex(0), Escape::Hex(1), Escape::Hex(2), Escape::Hex(3)];
const NUMS: [Num; 9] =
    [Num::Start, Num::Minus, Num::Zero, Num::Int, Num::Dot, Num::Frac, Num::E, Num::ExpSign, Num::Exp];
/// The words a literal can be: read back as these statics.
const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// The bits of the flags byte.
const SCALAR_CUT: u8 = 1;
const SCALAR_CUTTABLE: u8 = 2;
const CUT_VALUES: u8 = 4;
const CUT_CONTAINERS: u8 = 8;
const TOO_LARGE: u8 = 16;
const LOSSY: u8 = 32;
const FLAGS: u8 = SCALAR_CUT | SCALAR_CUTTABLE | CUT_VALUES | CUT_CONTAINERS | TOO_LARGE | LOSSY;

/// The tags of `failed`.
const NOT_FAILED: u8 = 0;
const INVALID: u8 = 1;
const TOO_LARGE_FAILURE: u8 = 2;
const UNKNOWN: u8 = 3;

impl Reducer {
    /// The reducer's whole state as bytes, to be kept between the pieces of a line that arrive
    /// in separate calls (push ingestion keeps it in pushed_file).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(96 + self.out.len() + self.objects.len() * 8 + self.frames.len() * 6));
        w.raw(TAG);
        w.byte(VERSION);
        self.write_to(&mut w);
        let crc = crc32fast::hash(&w.0);
        w.raw(&crc.to_le_bytes());
        w.0
    }

    /// A reducer from `to_bytes`' output; `None` for anything else (a damaged or foreign value,
    /// another format version): the caller then treats the line as unknown.
    pub fn from_bytes(bytes: &[u8]) -> Option<Reducer> {
        let (body, crc) = bytes.split_last_chunk::<4>()?;
        if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
            return None;
        }
        let mut r = Reader(body);
        if r.take(TAG.len())? != TAG || r.byte()? != VERSION {
            return None;
        }
        let reducer = r.reducer()?;
        (r.0.is_empty() && reducer.consistent()).then_some(reducer)
    }

    /// Every field, in the format's order (`Reader::reducer` reads them back).
    fn write_to(&self, w: &mut Writer) {
        w.size(self.limits.max_string);
        w.size(self.limits.head);
        w.size(self.limits.max_memory);
        w.bytes(self.utf8.pending());
        w.uint(self.fed);
        w.uint(self.read);
        w.byte(tag_in(&EXPECTS, &self.expect));
        w.scalar(self.scalar);
        w.size(self.scalar_start);
        w.uint(self.scalar_len);
        w.byte(self.flags());
        w.size(self.depth);
        w.size(self.objects.len());
        for word in &self.objects {
            w.raw(&word.to_le_bytes());
        }
        w.frames(&self.frames);
        w.collapsed(self.collapsed);
        w.bytes(&self.out);
        w.failed(self.failed);
    }

    fn flags(&self) -> u8 {
        [
            (self.scalar_cut, SCALAR_CUT),
            (self.scalar_cuttable, SCALAR_CUTTABLE),
            (self.cut_values, CUT_VALUES),
            (self.cut_containers, CUT_CONTAINERS),
            (self.too_large, TOO_LARGE),
            (self.utf8.replaced(), LOSSY),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |flags, (_, bit)| flags | bit)
    }

    /// Whether a state read back is one the reducer could be in: what its code relies on holds,
    /// so it goes on exactly as the original would, and within the original's memory.
    fn consistent(&self) -> bool {
        self.within_budgets()
            && self.nesting_consistent()
            && self.frames_consistent()
            && self.scalar_consistent()
            && self.failure_consistent()
    }

    /// Each vector within the share of `max_memory` the reducer gives it (`room`,
    /// `room_for_frame`, `grow_objects` never let one grow past it), and the scalar's start
    /// within the output's (it was the output's length once).
    fn within_budgets(&self) -> bool {
        let limits = self.limits;
        self.out.len() <= limits.out_budget()
            && self.scalar_start <= limits.out_budget()
            && self.frames.len() <= limits.frames_budget()
            && self.objects.len() <= limits.objects_budget()
    }

    /// Where the grammar stands agrees with the nesting: a bit for every open level, nothing
    /// but white space around the root, a key only in an object, a value list's first value or
    /// `]` only in an array, a scalar only where one begins.
    fn nesting_consistent(&self) -> bool {
        let inside = self.depth > 0;
        let object = self.innermost_is_object();
        let expect_fits = match self.expect {
            Expect::Lead | Expect::Trail => !inside && self.scalar.is_none(),
            Expect::Value => true,
            Expect::ValueOrClose => inside && !object,
            Expect::KeyOrClose | Expect::Key | Expect::Colon => inside && object,
            Expect::CommaOrClose => inside,
        };
        let scalar_fits = match self.scalar {
            None => true,
            Some(Scalar::Str { key: true, .. }) => matches!(self.expect, Expect::KeyOrClose | Expect::Key),
            Some(_) => matches!(self.expect, Expect::Value | Expect::ValueOrClose),
        };
        self.depth <= self.objects.len().saturating_mul(64) && expect_fits && scalar_fits
    }

    /// The containers being written: one per open level while writing, those outside the
    /// collapsed one while it is only validated (`overflow` never collapses the root), none once
    /// there is no summary (nor any output); each at its bracket in the output, in order, and
    /// before the collapsed one; all at text already read.
    fn frames_consistent(&self) -> bool {
        let written_levels = match (self.too_large, self.collapsed) {
            (true, _) => 0,
            (false, None) => self.depth,
            (false, Some(c)) => c.level,
        };
        let collapsed_fits = self.collapsed.is_none_or(|c| {
            (1..self.depth).contains(&c.level)
                && c.in_start < self.read
                && self.frames.last().is_none_or(|f| f.in_start < c.in_start)
        });
        let in_order = self.frames.windows(2).all(|pair| match pair {
            [outer, inner] => outer.out_start < inner.out_start && outer.in_start < inner.in_start,
            _ => false,
        });
        let at_brackets = self.frames.iter().enumerate().all(|(level, f)| {
            let bracket = if self.is_object(level) { b'{' } else { b'[' };
            self.out.get(f.out_start) == Some(&bracket) && f.in_start < self.read
        });
        self.frames.len() == written_levels
            && (!self.too_large || self.out.is_empty())
            && collapsed_fits
            && in_order
            && at_brackets
    }

    /// The string or number being read: cuttable exactly inside the root, cut only then and
    /// once longer than `max_string`; while it is written the output ends with it: its quote,
    /// then its text, or once cut a head of it (a number: nothing).
    fn scalar_consistent(&self) -> bool {
        let (quote, cut_keeps) = match self.scalar {
            Some(Scalar::Str { .. }) => (1, self.limits.head),
            Some(Scalar::Num(_)) => (0, 0),
            Some(Scalar::Lit { word, matched }) => return matched < word.len(),
            None => return true,
        };
        let cut_fits = !self.scalar_cut
            || (self.scalar_cuttable && self.cut_values && self.scalar_len > self.limits.max_string as u64);
        if self.scalar_cuttable != (self.depth > 0) || !cut_fits {
            return false;
        }
        // Writing stops for good within a scalar (collapsing or giving up): then its output
        // was cut back and the fields are never used again.
        if !self.writing() {
            return true;
        }
        let opened = quote == 0 || self.out.get(self.scalar_start) == Some(&b'"');
        let written = self.scalar_start.checked_add(quote).and_then(|text| self.out.len().checked_sub(text));
        let text_fits = match written {
            Some(n) if self.scalar_cut => n <= cut_keeps,
            Some(n) => n as u64 == self.scalar_len,
            None => false,
        };
        opened && text_fits
    }

    /// A failure where the reducer records it: invalid text already read, unknown where the
    /// reading stopped, too large only without a summary.
    fn failure_consistent(&self) -> bool {
        match self.failed {
            None => true,
            Some(Unreduced::Invalid { at, .. }) => at <= self.read,
            Some(Unreduced::TooLarge) => self.too_large,
            Some(Unreduced::Unknown { at }) => at == self.read,
        }
    }
}

/// The place of `value` in `table`, as the byte that names it. A value the table lacks (none
/// does) gets a byte no table has: the state then does not read back, and its line is unknown,
/// never misread.
fn tag_in<T: PartialEq>(table: &[T], value: &T) -> u8 {
    table.iter().position(|t| t == value).and_then(|i| u8::try_from(i).ok()).unwrap_or(u8::MAX)
}

struct Writer(Vec<u8>);

impl Writer {
    fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// LEB128: seven bits a byte, low first, the top bit set on all but the last.
    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v & 0x7f) as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn size(&mut self, v: usize) {
        self.uint(v as u64);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.size(bytes.len());
        self.raw(bytes);
    }

    fn scalar(&mut self, scalar: Option<Scalar>) {
        match scalar {
            None => self.byte(0),
            Some(Scalar::Str { key, escape }) => {
                self.byte(1);
                self.byte(u8::from(key));
                self.byte(tag_in(&ESCAPES, &escape));
            }
            Some(Scalar::Num(n)) => {
                self.byte(2);
                self.byte(tag_in(&NUMS, &n));
            }
            Some(Scalar::Lit { word, matched }) => {
                self.byte(3);
                self.byte(tag_in(&LITERALS, &word));
                self.size(matched);
            }
        }
    }

    /// Each frame as the step from the one before: frames are in increasing order (a state
    /// where they are not would not read back).
    fn frames(&mut self, frames: &[Frame]) {
        self.size(frames.len());
        let mut before = Frame { out_start: 0, in_start: 0 };
        for f in frames {
            self.size(f.out_start.saturating_sub(before.out_start));
            self.uint(f.in_start.saturating_sub(before.in_start));
            before = *f;
        }
    }

    fn collapsed(&mut self, collapsed: Option<Collapsed>) {
        match collapsed {
            None => self.byte(0),
            Some(c) => {
                self.byte(1);
                self.size(c.level);
                self.uint(c.in_start);
            }
        }
    }

    fn failed(&mut self, failed: Option<Unreduced>) {
        match failed {
            None => self.byte(NOT_FAILED),
            Some(Unreduced::Invalid { at, what }) => {
                self.byte(INVALID);
                self.uint(at);
                self.byte(tag_in(&Problem::ALL.map(Problem::what), &what));
            }
            Some(Unreduced::TooLarge) => self.byte(TOO_LARGE_FAILURE),
            Some(Unreduced::Unknown { at }) => {
                self.byte(UNKNOWN);
                self.uint(at);
            }
        }
    }
}

/// What is left to read; every read checks it first.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn word(&mut self) -> Option<u64> {
        let (word, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*word))
    }

    fn flag(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// The value `table` names by the next byte.
    fn pick<T: Copy>(&mut self, table: &[T]) -> Option<T> {
        table.get(usize::from(self.byte()?)).copied()
    }

    /// LEB128 in its shortest form only (a longer form of the same number would not write back
    /// to the same bytes), and within 64 bits.
    fn uint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return None;
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return (b != 0 || shift == 0).then_some(v);
            }
        }
        None
    }

    fn size(&mut self) -> Option<usize> {
        usize::try_from(self.uint()?).ok()
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.size()?;
        self.take(n)
    }

    /// A count of items each at least `min_bytes` long: no more than the bytes left could hold,
    /// so that what is allocated for them is bounded by the input.
    fn count(&mut self, min_bytes: usize) -> Option<usize> {
        let n = self.size()?;
        (n <= self.0.len() / min_bytes).then_some(n)
    }

    /// Every field, in the order `Reducer::write_to` writes them.
    fn reducer(&mut self) -> Option<Reducer> {
        let max_string = self.size()?;
        let head = self.size()?;
        let limits = Limits { max_string, head, max_memory: self.size()? };
        let pending = self.bytes()?;
        let fed = self.uint()?;
        let read = self.uint()?;
        let expect = self.pick(&EXPECTS)?;
        let scalar = self.scalar()?;
        let scalar_start = self.size()?;
        let scalar_len = self.uint()?;
        let flags = self.byte()?;
        if flags & !FLAGS != 0 {
            return None;
        }
        let on = |bit: u8| flags & bit != 0;
        let depth = self.size()?;
        let objects = self.objects()?;
        let frames = self.frames()?;
        let collapsed = self.collapsed()?;
        let out = self.bytes()?.to_vec();
        let failed = self.failed()?;
        Some(Reducer {
            limits,
            utf8: Utf8Stream::resumed(pending, on(LOSSY))?,
            fed,
            read,
            expect,
            scalar,
            scalar_start,
            scalar_len,
            scalar_cut: on(SCALAR_CUT),
            scalar_cuttable: on(SCALAR_CUTTABLE),
            depth,
            objects,
            frames,
            collapsed,
            out,
            cut_values: on(CUT_VALUES),
            cut_containers: on(CUT_CONTAINERS),
            too_large: on(TOO_LARGE),
            failed,
        })
    }

    fn scalar(&mut self) -> Option<Option<Scalar>> {
        let scalar = match self.byte()? {
            0 => return Some(None),
            1 => {
                let key = self.flag()?;
                Scalar::Str { key, escape: self.pick(&ESCAPES)? }
            }
            2 => Scalar::Num(self.pick(&NUMS)?),
            3 => {
                let word = self.pick(&LITERALS)?;
                Scalar::Lit { word, matched: self.size()? }
            }
            _ => return None,
        };
        Some(Some(scalar))
    }

    fn objects(&mut self) -> Option<Vec<u64>> {
        let n = self.count(8)?;
        let mut objects = Vec::with_capacity(n);
        for _ in 0..n {
            objects.push(self.word()?);
        }
        Some(objects)
    }

    fn frames(&mut self) -> Option<Vec<Frame>> {
        let n = self.count(2)?;
        let mut frames = Vec::with_capacity(n);
        let mut before = Frame { out_start: 0, in_start: 0 };
        for _ in 0..n {
            let out_start = before.out_start.checked_add(self.size()?)?;
            let in_start = before.in_start.checked_add(self.uint()?)?;
            before = Frame { out_start, in_start };
            frames.push(before);
        }
        Some(frames)
    }

    fn collapsed(&mut self) -> Option<Option<Collapsed>> {
        if !self.flag()? {
            return Some(None);
        }
        let level = self.size()?;
        Some(Some(Collapsed { level, in_start: self.uint()? }))
    }

    fn failed(&mut self) -> Option<Option<Unreduced>> {
        let failed = match self.byte()? {
            NOT_FAILED => return Some(None),
            INVALID => {
                let at = self.uint()?;
                Unreduced::Invalid { at, what: Problem::ALL.get(usize::from(self.byte()?))?.what() }
            }
            TOO_LARGE_FAILURE => Unreduced::TooLarge,
            UNKNOWN => Unreduced::Unknown { at: self.uint()? },
            _ => return None,
        };
        Some(Some(failed))
    }
}
