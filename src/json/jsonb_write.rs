//! Writing PostgreSQL's binary `jsonb` (`utils/jsonb.h`, `jsonb_util.c`) from JSON text. Pure.
//!
//! The indexer has already validated every line; handing PostgreSQL the text to parse again
//! (`::jsonb`) was a quarter of the cost of indexing. This builds the same bytes `jsonb_in`
//! builds — object keys ordered by length then bytes with the last duplicate kept, JEntries with
//! an offset every 32 entries, numerics and containers aligned to 4 bytes, numbers in
//! `numeric`'s own format (short form when it fits) — so the result is exactly what
//! PostgreSQL would store; the `#[pg_test]`s compare the bytes.
//!
//! Only call this on text [`super::parse::parse`] accepted without a `jsonb_problem`.

use std::borrow::Cow;

use super::jsonb_layout::{
    JB_FARRAY, JB_FOBJECT, JB_FSCALAR, JB_OFFSET_STRIDE, JENTRY_HAS_OFF, JENTRY_ISBOOL_FALSE, JENTRY_ISBOOL_TRUE,
    JENTRY_ISCONTAINER, JENTRY_ISNULL, JENTRY_ISNUMERIC, JENTRY_ISSTRING, JENTRY_OFFLENMASK, JENTRY_TYPEMASK,
};

/// The largest length or offset a JEntry can hold.
const MAX_OFFLEN: usize = JENTRY_OFFLENMASK as usize;

/// Why a value could not be written (the caller stores a NULL payload instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

enum Node<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

struct Reader<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.pos < self.b.len() && matches!(self.b[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    /// A string at the opening quote; escapes resolved (the text was validated).
    fn string(&mut self) -> Cow<'a, str> {
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        while i < self.b.len() {
            match self.b[i] {
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                b'"' => break,
                _ => i += 1,
            }
        }
        self.pos = (i + 1).min(self.b.len());
        let raw = &self.text[start..i.min(self.text.len())];
        if escaped {
            Cow::Owned(super::parse::unescape_str(raw))
        } else {
            Cow::Borrowed(raw)
        }
    }

    fn value(&mut self) -> Node<'a> {
        self.ws();
        match self.b.get(self.pos).copied() {
            Some(b'{') => {
                self.pos += 1;
                let mut members = Vec::new();
                loop {
                    self.ws();
                    match self.b.get(self.pos) {
                        Some(b'}') | None => {
                            self.pos += 1;
                            break;
                        }
                        Some(b',') => self.pos += 1,
                        _ => {
                            let key = self.string();
                            self.ws();
                            self.pos += 1; // ':'
                            let v = self.value();
                            members.push((key, v));
                        }
                    }
                }
                Node::Object(members)
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    match self.b.get(self.pos) {
                        Some(b']') | None => {
                            self.pos += 1;
                            break;
                        }
                        Some(b',') => self.pos += 1,
                        _ => items.push(self.value()),
                    }
                }
                Node::Array(items)
            }
            Some(b'"') => Node::String(self.string()),
            Some(b't') => {
                self.pos += 4;
                Node::Bool(true)
            }
            Some(b'f') => {
                self.pos += 5;
                Node::Bool(false)
            }
            Some(b'n') => {
                self.pos += 4;
                Node::Null
            }
            _ => {
                let start = self.pos;
                while self.pos < self.b.len()
                    && matches!(self.b[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.pos += 1;
                }
                Node::Number(&self.text[start..self.pos])
            }
        }
    }
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

/// Writes `node`; returns its JEntry (type and length).
fn write(node: &Node<'_>, buf: &mut Vec<u8>) -> Result<u32, TooLarge> {
    let jentry = |kind: u32, len: usize| -> Result<u32, TooLarge> {
        if len > MAX_OFFLEN {
            return Err(TooLarge);
        }
        Ok(kind | len as u32)
    };
    match node {
        Node::Null => Ok(JENTRY_ISNULL),
        Node::Bool(true) => Ok(JENTRY_ISBOOL_TRUE),
        Node::Bool(false) => Ok(JENTRY_ISBOOL_FALSE),
        Node::String(s) => {
            buf.extend_from_slice(s.as_bytes());
            jentry(JENTRY_ISSTRING, s.len())
        }
        Node::Number(n) => {
            let padding = pad(buf);
            let start = buf.len();
            numeric_bytes(n, buf);
            jentry(JENTRY_ISNUMERIC, padding + buf.len() - start)
        }
        Node::Array(items) => {
            let base = buf.len();
            write_container(buf, JB_FARRAY, items.len(), |buf, out| {
                for item in items {
                    out.push(write(item, buf)?);
                }
                Ok(())
            })?;
            jentry(JENTRY_ISCONTAINER, buf.len() - base)
        }
        Node::Object(members) => {
            let base = buf.len();
            let pairs = unique_sorted(members);
            write_container(buf, JB_FOBJECT, pairs.len(), |buf, out| {
                for (k, _) in &pairs {
                    buf.extend_from_slice(k.as_bytes());
                    out.push(jentry(JENTRY_ISSTRING, k.len())?);
                }
                for (_, v) in &pairs {
                    out.push(write(v, buf)?);
                }
                Ok(())
            })?;
            jentry(JENTRY_ISCONTAINER, buf.len() - base)
        }
    }
}

/// Object members as jsonb orders them: by key length, then bytes; of equal keys, the last.
fn unique_sorted<'n, 'a>(members: &'n [(Cow<'a, str>, Node<'a>)]) -> Vec<(&'n str, &'n Node<'a>)> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&x, &y| {
        let (a, b) = (members[x].0.as_bytes(), members[y].0.as_bytes());
        a.len().cmp(&b.len()).then_with(|| a.cmp(b)).then_with(|| y.cmp(&x))
    });
    order.dedup_by(|later, earlier| members[*later].0 == members[*earlier].0);
    order.into_iter().map(|i| (members[i].0.as_ref(), &members[i].1)).collect()
}

/// A container: padding, header, JEntries (filled in by `children`, which appends each child's
/// data and returns its JEntry), lengths turned into offsets every `JB_OFFSET_STRIDE` entries.
fn write_container(
    buf: &mut Vec<u8>,
    flags: u32,
    count: usize,
    children: impl FnOnce(&mut Vec<u8>, &mut Vec<u32>) -> Result<(), TooLarge>,
) -> Result<(), TooLarge> {
    if count > 0x0FFF_FFFF {
        return Err(TooLarge);
    }
    pad(buf);
    buf.extend_from_slice(&(count as u32 | flags).to_ne_bytes());
    let n = if flags & JB_FOBJECT != 0 { count * 2 } else { count };
    let jentries_at = buf.len();
    buf.resize(jentries_at + 4 * n, 0);
    let mut entries = Vec::with_capacity(n);
    children(buf, &mut entries)?;
    let mut total: usize = 0;
    for (i, e) in entries.iter().enumerate() {
        let len = (e & JENTRY_OFFLENMASK) as usize;
        total += len;
        if total > MAX_OFFLEN {
            return Err(TooLarge);
        }
        let stored = if i % JB_OFFSET_STRIDE == 0 { (e & JENTRY_TYPEMASK) | total as u32 | JENTRY_HAS_OFF } else { *e };
        buf[jentries_at + 4 * i..jentries_at + 4 * i + 4].copy_from_slice(&stored.to_ne_bytes());
    }
    Ok(())
}

/// The `jsonb` varlena (4-byte header included) for validated JSON `text`.
pub fn to_jsonb(text: &str, out: &mut Vec<u8>) -> Result<(), TooLarge> {
    let root = Reader { text, b: text.as_bytes(), pos: 0 }.value();
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    match root {
        Node::Array(_) | Node::Object(_) => {
            write(&root, out)?;
        }
        scalar => {
            // A scalar document is a one-element array flagged "raw scalar".
            write_container(out, JB_FARRAY | JB_FSCALAR, 1, |buf, entries| {
                entries.push(write(&scalar, buf)?);
                Ok(())
            })?;
        }
    }
    let total = out.len() - start;
    if total > 0x3FFF_FFFF {
        return Err(TooLarge);
    }
    out[start..start + 4].copy_from_slice(&((total as u32) << 2).to_ne_bytes());
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
}
