//! Writing PostgreSQL's binary `jsonb` (`utils/jsonb.h`, `jsonb_util.c`) from JSON text. Pure.
//!
//! The indexer has already validated every line; handing PostgreSQL the text to parse again
//! (`::jsonb`) was a quarter of the cost of indexing. This builds the same bytes `jsonb_in`
//! builds — object keys ordered by length then bytes with the last duplicate kept, JEntries with
//! an offset every 32 entries, numerics and containers aligned to 4 bytes, numbers in
//! `numeric`'s own format (short form when it fits) — so the result is exactly what
//! PostgreSQL would store; the `#[pg_test]`s compare the bytes.
//!
//! Memory is bounded and known in advance: the text is first read into a flat list of 16-byte
//! nodes (one per value or key, reserved exactly from the token count the parser reports),
//! then written with a scratch list of object members; [`working_memory`] is an upper bound of
//! everything converting one document allocates, so a caller can refuse a document before
//! allocating anything for it.
//!
//! Only call this on text [`super::parse::parse`] accepted without a `jsonb_problem`.

use super::jsonb_layout::{
    JB_FARRAY, JB_FOBJECT, JB_FSCALAR, JB_OFFSET_STRIDE, JENTRY_HAS_OFF, JENTRY_ISBOOL_FALSE, JENTRY_ISBOOL_TRUE,
    JENTRY_ISCONTAINER, JENTRY_ISNULL, JENTRY_ISNUMERIC, JENTRY_ISSTRING, JENTRY_OFFLENMASK, JENTRY_TYPEMASK,
};
use super::parse::{skip_ws_at, string_end, unescape_into, JSONB_MAX_DEPTH};

/// The largest length or offset a JEntry can hold.
const MAX_OFFLEN: usize = JENTRY_OFFLENMASK as usize;

/// Why a value could not be written (the caller stores a NULL payload instead): larger than
/// `jsonb` can hold, or nested deeper than it is trusted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// An upper bound, in bytes, of what converting a validated document of `len` bytes holding
/// `tokens` values and keys allocates: the nodes (16 bytes per token), the object-member scratch
/// (at most 40 bytes per key once grown), the unescaped keys (at most twice the text once
/// grown) and the `jsonb` itself (at most the text plus 24 bytes per token: a JEntry, alignment
/// and a numeric's headers).
pub fn working_memory(len: usize, tokens: u64) -> u64 {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    len.saturating_mul(3).saturating_add(tokens.saturating_mul(80)).saturating_add(4096)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Null,
    True,
    False,
    Number,
    String,
    Array,
    Object,
}

/// One value or key: where its text is and, for containers, where its subtree ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    /// Strings: the first byte after the opening quote.
    pub(crate) start: u32,
    /// Strings: the bytes between the quotes; numbers: the number's text.
    pub(crate) len: u32,
    /// The index after this node's subtree (its next sibling).
    pub(crate) end: u32,
    pub(crate) kind: NodeKind,
    /// A string with escapes to resolve.
    pub(crate) escaped: bool,
}

/// A JSON document as its text and the nodes of its values in preorder, as
/// [`super::writer::JsonWriter`] records them while it writes: converting it to `jsonb`
/// ([`document_to_jsonb`]) reads the text once, with no parsing.
#[derive(Debug, Default)]
pub struct Document {
    pub text: String,
    pub(crate) nodes: Vec<Node>,
    /// The text outgrew what a node can address (4 GiB): it cannot be converted.
    pub(crate) too_large: bool,
}

/// An object member while its object is written.
#[derive(Debug, Clone, Copy)]
struct Member {
    /// The key's bytes: in the text, or in the unescaped-key buffer.
    key_at: u32,
    key_len: u32,
    key_unescaped: bool,
    value: u32,
    /// Written order (the last duplicate wins).
    order: u32,
}

/// Buffers reused from one document to the next (a sink keeps one); they are shrunk after a
/// large document so its peak is not held.
#[derive(Debug, Default)]
pub struct Scratch {
    nodes: Vec<Node>,
    members: Vec<Member>,
    keys: Vec<u8>,
}

/// Above this many bytes a scratch buffer is released after use.
const KEEP_SCRATCH_BYTES: usize = 1 << 20;

impl Scratch {
    fn release_large(&mut self) {
        if self.nodes.capacity() * std::mem::size_of::<Node>() > KEEP_SCRATCH_BYTES {
            self.nodes = Vec::new();
        }
        if self.members.capacity() * std::mem::size_of::<Member>() > KEEP_SCRATCH_BYTES {
            self.members = Vec::new();
        }
        if self.keys.capacity() > KEEP_SCRATCH_BYTES {
            self.keys = Vec::new();
        }
    }
}

fn u32_of(v: usize) -> Result<u32, TooLarge> {
    u32::try_from(v).map_err(|_| TooLarge)
}

/// Reads validated `text` into `nodes` (preorder; containers know where their subtree ends).
fn read_nodes(text: &[u8], nodes: &mut Vec<Node>) -> Result<(), TooLarge> {
    u32_of(text.len())?;
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    loop {
        i = skip_ws_at(text, i);
        let Some(&c) = text.get(i) else { break };
        let index = nodes.len();
        let scalar = |kind, start: usize, len: usize, escaped| -> Result<Node, TooLarge> {
            Ok(Node { start: u32_of(start)?, len: u32_of(len)?, end: u32_of(index + 1)?, kind, escaped })
        };
        match c {
            b',' | b':' => i += 1,
            b'}' | b']' => {
                if let Some(o) = open.pop() {
                    let end = u32_of(nodes.len())?;
                    if let Some(n) = nodes.get_mut(o) {
                        n.end = end;
                    }
                }
                i += 1;
            }
            b'{' | b'[' => {
                if open.len() > JSONB_MAX_DEPTH {
                    return Err(TooLarge);
                }
                open.push(index);
                let kind = if c == b'{' { NodeKind::Object } else { NodeKind::Array };
                nodes.push(scalar(kind, i, 0, false)?);
                i += 1;
            }
            b'"' => {
                let end = string_end(text, i);
                let inner = text.get(i + 1..end.saturating_sub(1)).unwrap_or(&[]);
                nodes.push(scalar(NodeKind::String, i + 1, inner.len(), memchr::memchr(b'\\', inner).is_some())?);
                i = end;
            }
            b't' => {
                nodes.push(scalar(NodeKind::True, i, 4, false)?);
                i += 4;
            }
            b'f' => {
                nodes.push(scalar(NodeKind::False, i, 5, false)?);
                i += 5;
            }
            b'n' => {
                nodes.push(scalar(NodeKind::Null, i, 4, false)?);
                i += 4;
            }
            _ => {
                let start = i;
                while text.get(i).is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
                    i += 1;
                }
                if i == start {
                    // Not validated JSON: never loop forever on it.
                    return Err(TooLarge);
                }
                nodes.push(scalar(NodeKind::Number, start, i - start, false)?);
            }
        }
    }
    Ok(())
}

fn pad(buf: &mut Vec<u8>) -> usize {
    let padding = (4 - buf.len() % 4) % 4;
    buf.resize(buf.len() + padding, 0);
    padding
}

/// `numeric_in`'s result for a JSON number, as a varlena with a 4-byte header.
pub fn numeric_bytes(text: &str, out: &mut Vec<u8>) {
    const DEC_DIGITS: i64 = 4;
    let b = text.as_bytes();
    let mut i = 0;
    let negative = b.first() == Some(&b'-');
    if negative {
        i = 1;
    }
    let mut digits: Vec<u8> = Vec::with_capacity(b.len());
    let mut dweight: i64 = -1;
    let mut dscale: i64 = 0;
    let mut after_point = false;
    while i < b.len() {
        match b[i] {
            d @ b'0'..=b'9' => {
                digits.push(d - b'0');
                if after_point {
                    dscale += 1;
                } else {
                    dweight += 1;
                }
            }
            b'.' => after_point = true,
            _ => break,
        }
        i += 1;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let exp: i64 = text[i + 1..].parse().unwrap_or(0);
        dweight += exp;
        dscale = (dscale - exp).max(0);
    }
    // To base 10000: `offset` zeroes align the first decimal digit in its group.
    let weight =
        if dweight >= 0 { (dweight + DEC_DIGITS) / DEC_DIGITS - 1 } else { -((-dweight - 1) / DEC_DIGITS + 1) };
    let offset = (weight + 1) * DEC_DIGITS - (dweight + 1);
    let ddigits = digits.len() as i64;
    let ndigits = (ddigits + offset + DEC_DIGITS - 1) / DEC_DIGITS;
    let digit_at = |k: i64| -> u16 {
        let idx = k - offset;
        if idx >= 0 && idx < ddigits {
            u16::from(digits[idx as usize])
        } else {
            0
        }
    };
    let mut groups: Vec<u16> = (0..ndigits)
        .map(|g| {
            let k = g * DEC_DIGITS;
            ((digit_at(k) * 10 + digit_at(k + 1)) * 10 + digit_at(k + 2)) * 10 + digit_at(k + 3)
        })
        .collect();
    // make_result: strip leading and trailing zero groups; zero is positive with weight 0.
    let mut weight = weight;
    let lead = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..lead);
    weight -= lead as i64;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    let negative = negative && !groups.is_empty();
    if groups.is_empty() {
        weight = 0;
    }
    let short = dscale <= 63 && (-64..=63).contains(&weight);
    let len = if short { 6 } else { 8 } + 2 * groups.len();
    out.extend_from_slice(&((len as u32) << 2).to_ne_bytes());
    if short {
        let header: u16 = 0x8000
            | if negative { 0x2000 } else { 0 }
            | ((dscale as u16) << 7)
            | if weight < 0 { 0x0040 } else { 0 }
            | ((weight as u16) & 0x003F);
        out.extend_from_slice(&header.to_ne_bytes());
    } else {
        let sign_dscale: u16 = if negative { 0x4000 } else { 0 } | ((dscale as u16) & 0x3FFF);
        out.extend_from_slice(&sign_dscale.to_ne_bytes());
        out.extend_from_slice(&(weight as i16).to_ne_bytes());
    }
    for g in groups {
        out.extend_from_slice(&g.to_ne_bytes());
    }
}

/// Writes nodes as jsonb into `out`.
struct Writer<'w> {
    text: &'w [u8],
    nodes: &'w [Node],
    members: &'w mut Vec<Member>,
    keys: &'w mut Vec<u8>,
    out: &'w mut Vec<u8>,
}

fn jentry(kind: u32, len: usize) -> Result<u32, TooLarge> {
    if len > MAX_OFFLEN {
        return Err(TooLarge);
    }
    Ok(kind | len as u32)
}

/// A node's text (a string's without its quotes).
fn raw<'t>(text: &'t [u8], n: &Node) -> &'t [u8] {
    let at = n.start as usize;
    text.get(at..at + n.len as usize).unwrap_or(&[])
}

/// A member's key bytes.
fn key_of<'k>(text: &'k [u8], keys: &'k [u8], m: &Member) -> &'k [u8] {
    let (at, len) = (m.key_at as usize, m.key_len as usize);
    let from = if m.key_unescaped { keys } else { text };
    from.get(at..at + len).unwrap_or(&[])
}

impl Writer<'_> {
    fn node(&self, i: usize) -> Result<Node, TooLarge> {
        self.nodes.get(i).copied().ok_or(TooLarge)
    }

    /// Writes node `i` (and its subtree); returns its JEntry (type and length).
    fn write(&mut self, i: usize) -> Result<u32, TooLarge> {
        let n = self.node(i)?;
        match n.kind {
            NodeKind::Null => Ok(JENTRY_ISNULL),
            NodeKind::True => Ok(JENTRY_ISBOOL_TRUE),
            NodeKind::False => Ok(JENTRY_ISBOOL_FALSE),
            NodeKind::String => {
                let start = self.out.len();
                let bytes = raw(self.text, &n);
                if n.escaped {
                    unescape_into(std::str::from_utf8(bytes).map_err(|_| TooLarge)?, self.out);
                } else {
                    self.out.extend_from_slice(bytes);
                }
                jentry(JENTRY_ISSTRING, self.out.len() - start)
            }
            NodeKind::Number => {
                let padding = pad(self.out);
                let start = self.out.len();
                numeric_bytes(std::str::from_utf8(raw(self.text, &n)).map_err(|_| TooLarge)?, self.out);
                jentry(JENTRY_ISNUMERIC, padding + self.out.len() - start)
            }
            NodeKind::Array => {
                let base = self.out.len();
                let mut count = 0;
                let mut child = i + 1;
                while child < n.end as usize {
                    count += 1;
                    child = self.node(child)?.end as usize;
                }
                let jentries = self.begin_container(JB_FARRAY, count)?;
                let mut child = i + 1;
                let mut total = 0;
                for k in 0..count {
                    let e = self.write(child)?;
                    self.set_jentry(jentries, k, e, &mut total)?;
                    child = self.node(child)?.end as usize;
                }
                jentry(JENTRY_ISCONTAINER, self.out.len() - base)
            }
            NodeKind::Object => {
                let base = self.out.len();
                let first = self.members.len();
                let keys_mark = self.keys.len();
                let mut child = i + 1;
                let mut order = 0u32;
                while child < n.end as usize {
                    let key = self.node(child)?;
                    let value = child + 1;
                    let (key_at, key_unescaped) = if key.escaped {
                        let at = self.keys.len();
                        unescape_into(std::str::from_utf8(raw(self.text, &key)).map_err(|_| TooLarge)?, self.keys);
                        (at, true)
                    } else {
                        (key.start as usize, false)
                    };
                    let key_len = if key_unescaped { self.keys.len() - key_at } else { key.len as usize };
                    self.members.push(Member {
                        key_at: u32_of(key_at)?,
                        key_len: u32_of(key_len)?,
                        key_unescaped,
                        value: u32_of(value)?,
                        order,
                    });
                    order = order.wrapping_add(1);
                    child = self.node(value)?.end as usize;
                }
                // jsonb's order: by key length, then bytes; of equal keys the last one written.
                let (text, keys) = (self.text, &**self.keys);
                let mine = self.members.get_mut(first..).unwrap_or(&mut []);
                mine.sort_unstable_by(|x, y| {
                    let (a, b) = (key_of(text, keys, x), key_of(text, keys, y));
                    a.len().cmp(&b.len()).then_with(|| a.cmp(b)).then_with(|| y.order.cmp(&x.order))
                });
                let mut kept = 0;
                for r in 0..mine.len() {
                    if kept > 0 && key_of(text, keys, &mine[kept - 1]) == key_of(text, keys, &mine[r]) {
                        continue;
                    }
                    mine[kept] = mine[r];
                    kept += 1;
                }
                self.members.truncate(first + kept);
                let jentries = self.begin_container(JB_FOBJECT, kept)?;
                let mut total = 0;
                for k in 0..kept {
                    let m = self.members.get(first + k).copied().ok_or(TooLarge)?;
                    let start = self.out.len();
                    let bytes = key_of(self.text, &self.keys[..], &m);
                    self.out.extend_from_slice(bytes);
                    let e = jentry(JENTRY_ISSTRING, self.out.len() - start)?;
                    self.set_jentry(jentries, k, e, &mut total)?;
                }
                for k in 0..kept {
                    let m = self.members.get(first + k).copied().ok_or(TooLarge)?;
                    let e = self.write(m.value as usize)?;
                    self.set_jentry(jentries, kept + k, e, &mut total)?;
                }
                self.members.truncate(first);
                self.keys.truncate(keys_mark);
                jentry(JENTRY_ISCONTAINER, self.out.len() - base)
            }
        }
    }

    /// Pads, writes a container header for `count` children and reserves their JEntries (two
    /// per member for objects); returns where the JEntries start.
    fn begin_container(&mut self, flags: u32, count: usize) -> Result<usize, TooLarge> {
        if count > 0x0FFF_FFFF {
            return Err(TooLarge);
        }
        pad(self.out);
        self.out.extend_from_slice(&(count as u32 | flags).to_ne_bytes());
        let n = if flags & JB_FOBJECT != 0 { count * 2 } else { count };
        let at = self.out.len();
        self.out.resize(at + 4 * n, 0);
        Ok(at)
    }

    /// Stores entry `k` of a container: its length, or every `JB_OFFSET_STRIDE` entries the end
    /// offset of its data (`total` accumulates the lengths).
    fn set_jentry(&mut self, jentries: usize, k: usize, e: u32, total: &mut usize) -> Result<(), TooLarge> {
        *total += (e & JENTRY_OFFLENMASK) as usize;
        if *total > MAX_OFFLEN {
            return Err(TooLarge);
        }
        let stored =
            if k.is_multiple_of(JB_OFFSET_STRIDE) { (e & JENTRY_TYPEMASK) | *total as u32 | JENTRY_HAS_OFF } else { e };
        let at = jentries + 4 * k;
        self.out.get_mut(at..at + 4).ok_or(TooLarge)?.copy_from_slice(&stored.to_ne_bytes());
        Ok(())
    }
}

/// The `jsonb` varlena (4-byte header included) for validated JSON `text`, appended to `out`.
pub fn to_jsonb(text: &str, out: &mut Vec<u8>) -> Result<(), TooLarge> {
    to_jsonb_with(text, 0, out, &mut Scratch::default())
}

/// [`to_jsonb`] with reusable buffers; `tokens` (the parser's count, or 0 when unknown) sizes
/// the node list exactly. On error `out` is left as it was.
pub fn to_jsonb_with(text: &str, tokens: u64, out: &mut Vec<u8>, scratch: &mut Scratch) -> Result<(), TooLarge> {
    let start = out.len();
    let result = write_document(text, tokens, out, scratch);
    scratch.nodes.clear();
    scratch.members.clear();
    scratch.keys.clear();
    scratch.release_large();
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_document(text: &str, tokens: u64, out: &mut Vec<u8>, scratch: &mut Scratch) -> Result<(), TooLarge> {
    let bytes = text.as_bytes();
    scratch.nodes.clear();
    if let Ok(t) = usize::try_from(tokens) {
        scratch.nodes.reserve_exact(t);
    }
    read_nodes(bytes, &mut scratch.nodes)?;
    let Scratch { nodes, members, keys, .. } = scratch;
    write_nodes(bytes, nodes, members, keys, out)
}

/// The `jsonb` varlena (4-byte header included) of a document a [`super::writer::JsonWriter`]
/// wrote, from the nodes it recorded (no parsing), appended to `out`; on error `out` is left as
/// it was. The bytes are [`to_jsonb`]'s of the same text.
pub fn document_to_jsonb(doc: &Document, out: &mut Vec<u8>) -> Result<(), TooLarge> {
    if doc.too_large || !structured(&doc.nodes) {
        return Err(TooLarge);
    }
    let start = out.len();
    let (mut members, mut keys) = (Vec::new(), Vec::new());
    let result = write_nodes(doc.text.as_bytes(), &doc.nodes, &mut members, &mut keys, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Whether `nodes` are one document: a single root, every container's children running exactly
/// to its end, an object's as key (a string) and value pairs. What a writer's misuse (a key
/// without a value, a value without a key, two roots) would break, caught before writing.
fn structured(nodes: &[Node]) -> bool {
    let at = |n: &Node| n.end as usize;
    if nodes.first().map(at) != Some(nodes.len()) {
        return false;
    }
    for (i, n) in nodes.iter().enumerate() {
        let end = at(n);
        if end <= i || end > nodes.len() {
            return false;
        }
        let object = match n.kind {
            NodeKind::Object => true,
            NodeKind::Array => false,
            _ => {
                if end != i + 1 {
                    return false;
                }
                continue;
            }
        };
        let mut c = i + 1;
        while c < end {
            if object {
                match nodes.get(c) {
                    Some(k) if k.kind == NodeKind::String && at(k) == c + 1 && c + 1 < end => c += 1,
                    _ => return false,
                }
            }
            match nodes.get(c).map(at) {
                Some(next) if next > c => c = next,
                _ => return false,
            }
        }
        if c != end {
            return false;
        }
    }
    true
}

/// Writes the document `nodes` describe (over `bytes`) as a `jsonb` varlena.
fn write_nodes(
    bytes: &[u8],
    nodes: &[Node],
    members: &mut Vec<Member>,
    keys: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), TooLarge> {
    u32_of(bytes.len())?;
    // The jsonb is at most the text plus 24 bytes per node: reserve it once.
    out.reserve(bytes.len().saturating_add(nodes.len().saturating_mul(24)).saturating_add(16));
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut w = Writer { text: bytes, nodes, members, keys, out };
    let root = w.node(0)?;
    if matches!(root.kind, NodeKind::Array | NodeKind::Object) {
        w.write(0)?;
    } else {
        // A scalar document is a one-element array flagged "raw scalar".
        let jentries = w.begin_container(JB_FARRAY | JB_FSCALAR, 1)?;
        let e = w.write(0)?;
        w.set_jentry(jentries, 0, e, &mut 0)?;
    }
    let total = out.len() - start;
    if total > 0x3FFF_FFFF {
        return Err(TooLarge);
    }
    out.get_mut(start..start + 4).ok_or(TooLarge)?.copy_from_slice(&((total as u32) << 2).to_ne_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::jsonb_format::{numeric_to_f64, Jsonb};
    use crate::json::node::{member, JsonNode, Kind};

    fn jsonb(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        to_jsonb(text, &mut out).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        out
    }

    fn numeric(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        numeric_bytes(text, &mut out);
        out
    }

    #[test]
    fn numerics_match_numeric_in() {
        // Bytes as PostgreSQL 15 stores them (little-endian): 4-byte varlena header, then the
        // short header (sign, dscale << 7, weight) and base-10000 digits.
        assert_eq!(numeric("0"), [24, 0, 0, 0, 0x00, 0x80]);
        assert_eq!(numeric("-0.00"), [24, 0, 0, 0, 0x00, 0x81]);
        assert_eq!(numeric("1"), [32, 0, 0, 0, 0x00, 0x80, 1, 0]);
        assert_eq!(numeric("-12345.678"), [48, 0, 0, 0, 0x81, 0xA1, 1, 0, 0x29, 0x09, 0x7C, 0x1A]);
        assert_eq!(numeric("1.50"), [40, 0, 0, 0, 0x00, 0x81, 1, 0, 0x88, 0x13]);
        // Long form: a weight beyond 63 groups, or more than 63 decimals.
        let big = numeric("1e400");
        assert_eq!(&big[4..8], &[0x00, 0x00, 100, 0]);
        let tiny = numeric("1e-70");
        assert_eq!(u16::from_ne_bytes([tiny[4], tiny[5]]) & 0x3FFF, 70);
        for text in
            ["0", "1", "-1", "3.14159", "1e400", "-2.5e-300", "12345678901234567890", "0.0001", "1E+5", "100", "1e-70"]
        {
            let expected: f64 = text.parse().unwrap_or(f64::NAN);
            assert_eq!(numeric_to_f64(&numeric(text)), Ok(expected), "{text}");
        }
    }

    #[test]
    fn round_trips_through_the_reader() {
        let doc = r#"{"b": [1, 2.5, "x", null, true, false, {"z": {}}], "a": "é\n", "bb": -0.00, "a": "last", "": []}"#;
        let bytes = jsonb(doc);
        let root = Jsonb::root(&bytes[4..]).unwrap_or_else(|e| panic!("{e:?}"));
        let keys: Vec<&str> = {
            let mut out = Vec::new();
            root.children(&mut out).unwrap_or_else(|e| panic!("{e:?}"));
            out.into_iter().filter_map(|(k, _)| k).collect()
        };
        assert_eq!(keys, ["", "a", "b", "bb"], "ordered by length then bytes, last duplicate kept");
        let a = member(root, "a").ok().flatten().map(|v| v.kind());
        assert_eq!(a, Some(Ok(Kind::String("last"))));
        let b = member(root, "b").ok().flatten().unwrap_or(Jsonb::Null);
        let mut items = Vec::new();
        b.children(&mut items).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(items.len(), 7);
        assert_eq!(items[1].1.kind(), Ok(Kind::Number(2.5)));
        // Scalars become a raw-scalar array; the reader unwraps them.
        assert_eq!(Jsonb::root(&jsonb("\"s\"")[4..]).map(|r| r.kind()), Ok(Ok(Kind::String("s"))));
        assert_eq!(Jsonb::root(&jsonb("42")[4..]).map(|r| r.kind()), Ok(Ok(Kind::Number(42.0))));
    }

    #[test]
    fn long_containers_store_an_offset_every_32_entries() {
        let doc = format!("[{}]", (0..100).map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(","));
        let bytes = jsonb(&doc);
        let root = Jsonb::root(&bytes[4..]).unwrap_or_else(|e| panic!("{e:?}"));
        let mut items = Vec::new();
        root.children(&mut items).unwrap_or_else(|e| panic!("{e:?}"));
        let texts: Vec<Kind<'_>> = items.iter().filter_map(|(_, v)| v.kind().ok()).collect();
        assert_eq!(texts.len(), 100);
        assert_eq!(texts[99], Kind::String("99"));
        let je =
            |i: usize| u32::from_ne_bytes([bytes[8 + 4 * i], bytes[9 + 4 * i], bytes[10 + 4 * i], bytes[11 + 4 * i]]);
        assert!(je(0) & JENTRY_HAS_OFF != 0 && je(32) & JENTRY_HAS_OFF != 0 && je(1) & JENTRY_HAS_OFF == 0);
    }

    fn canonical_of_jsonb(bytes: &[u8]) -> String {
        let root = Jsonb::root(&bytes[4..]).unwrap_or_else(|e| panic!("{e:?}"));
        let mut out = String::new();
        crate::json::write_canonical(root, &mut out).unwrap_or_else(|e| panic!("{e:?}"));
        out
    }

    /// Random documents (nesting, duplicate and escaped keys, escapes, numbers of every shape)
    /// read back from the bytes written equal what serde_json reads from the text.
    #[test]
    fn random_documents_round_trip() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        fn value(depth: u32, next: &mut dyn FnMut(u64) -> u64) -> String {
            const KEYS: &[&str] = &["a", "b", "ab", "", "\\u0061", "é", "\\n", "long_key_name", "10", "9"];
            const STRINGS: &[&str] = &["", "x", "\\\"q\\\"", "\\\\", "\\u00e9\\ud83d\\ude00", "tab\\there", "ü"];
            const NUMBERS: &[&str] =
                &["0", "-0", "1", "-12.5", "1e10", "1.5E-7", "123456789012345678901234567890", "0.000100"];
            match if depth > 4 { next(4) } else { next(6) } {
                0 => NUMBERS[next(NUMBERS.len() as u64) as usize].to_owned(),
                1 => format!("\"{}\"", STRINGS[next(STRINGS.len() as u64) as usize]),
                2 => ["true", "false", "null"][next(3) as usize].to_owned(),
                3 => format!("\"s{}\"", next(1000)),
                4 => {
                    let n = next(5);
                    let items: Vec<String> = (0..n).map(|_| value(depth + 1, next)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => {
                    let n = next(6);
                    let members: Vec<String> = (0..n)
                        .map(|_| format!("\"{}\" : {}", KEYS[next(KEYS.len() as u64) as usize], value(depth + 1, next)))
                        .collect();
                    format!("{{ {} }}", members.join(", "))
                }
            }
        }
        let mut scratch = Scratch::default();
        for _ in 0..3000 {
            let text = value(0, &mut next);
            let parsed = crate::json::parse::parse(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            let mut out = Vec::new();
            to_jsonb_with(&text, parsed.tokens, &mut out, &mut scratch).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            let expected: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let mut want = String::new();
            crate::json::write_canonical(&expected, &mut want).unwrap_or_else(|e| match e {});
            assert_eq!(canonical_of_jsonb(&out), want, "{text}");
            assert_eq!(u32::from_ne_bytes([out[0], out[1], out[2], out[3]]) as usize >> 2, out.len());
        }
    }

    /// What converting a document allocates stays under `working_memory`, for the shapes that
    /// cost the most per byte of text.
    #[test]
    fn working_memory_bounds_what_conversion_allocates() {
        let small_numbers = format!("[{}]", vec!["1"; 200_000].join(","));
        let many_keys: String =
            format!("{{{}}}", (0..50_000).map(|i| format!("\"k{i}\":{i}")).collect::<Vec<_>>().join(","));
        let escaped_keys: String =
            format!("{{{}}}", (0..20_000).map(|i| format!("\"\\u006b{i}\":[]")).collect::<Vec<_>>().join(","));
        let deep = format!("{}1{}", "[{\"a\":".repeat(499), "}]".repeat(499));
        let nested_objects = format!("[{}]", vec!["{\"a\":{\"b\":{}}}"; 20_000].join(","));
        let long_string = format!("[\"{}\"]", "y\\n".repeat(100_000));
        for text in [small_numbers, many_keys, escaped_keys, deep, nested_objects, long_string] {
            let parsed = crate::json::parse::parse(&text).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(parsed.jsonb_problem, None);
            let mut scratch = Scratch::default();
            let mut out = Vec::new();
            write_document(&text, parsed.tokens, &mut out, &mut scratch).unwrap_or_else(|e| panic!("{e:?}"));
            let used = scratch.nodes.capacity() * std::mem::size_of::<Node>()
                + scratch.members.capacity() * std::mem::size_of::<Member>()
                + scratch.keys.capacity()
                + out.capacity();
            let bound = working_memory(text.len(), parsed.tokens);
            assert!(used as u64 <= bound, "{} bytes of text: used {used}, bound {bound}", text.len());
            assert_eq!(scratch.nodes.len() as u64, parsed.tokens, "one node per value and key");
        }
    }

    #[test]
    fn deeper_than_jsonb_is_trusted_with_is_refused_not_recursed() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let mut out = vec![7u8];
        assert_eq!(to_jsonb(&deep, &mut out), Err(TooLarge));
        assert_eq!(out, [7], "nothing is left behind on error");
    }
}
