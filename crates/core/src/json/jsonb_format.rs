//! PostgreSQL's binary `jsonb` format (`utils/jsonb.h`), read directly in Rust.
//!
//! Reading the bytes ourselves instead of calling `JsonbIteratorNext` per token avoids an FFI
//! guard (a `sigsetjmp`) per token, a `palloc`'d `JsonbValue` per scalar and a text round trip
//! per number: canonicalising a 50 kB checkpoint is several times faster. Every access is
//! bounds-checked; malformed input is an error, never a panic.
//!
//! Layout: a container is a `uint32` header (count and flags) followed by one `JEntry` per child
//! (objects: all keys, then all values), then the children's data. A `JEntry` holds a type and
//! either the child's length or, every `JB_OFFSET_STRIDE` entries, its end offset. Numerics and
//! nested containers start at the next 4-byte boundary (the padding counts in the length).

use super::node::{JsonNode, Kind};

use super::jsonb_layout::{
    JB_CMASK, JB_FARRAY, JB_FOBJECT, JB_FSCALAR, JENTRY_HAS_OFF, JENTRY_ISBOOL_FALSE, JENTRY_ISBOOL_TRUE,
    JENTRY_ISCONTAINER, JENTRY_ISNULL, JENTRY_ISNUMERIC, JENTRY_ISSTRING, JENTRY_OFFLENMASK, JENTRY_TYPEMASK,
};

/// Why bytes are not a valid jsonb value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// A jsonb value: a container, or a scalar stored inside one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jsonb<'a> {
    Container(Container<'a>),
    String(&'a [u8]),
    /// A `numeric` varlena (with its header).
    Numeric(&'a [u8]),
    Bool(bool),
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Container<'a> {
    bytes: &'a [u8],
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, Malformed> {
    let b = bytes.get(at..at + 4).ok_or(Malformed("truncated container"))?;
    Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

impl<'a> Jsonb<'a> {
    /// The document whose root container starts at `bytes[0]` (just after the varlena header).
    /// A scalar document (a one-element container flagged scalar) yields the scalar itself.
    pub fn root(bytes: &'a [u8]) -> Result<Jsonb<'a>, Malformed> {
        let c = Container { bytes };
        let header = read_u32(bytes, 0)?;
        if header & JB_FSCALAR != 0 {
            let mut out = Vec::with_capacity(1);
            c.entries(&mut out)?;
            return out.pop().ok_or(Malformed("scalar container without a value"));
        }
        Ok(Jsonb::Container(c))
    }
}

impl<'a> Container<'a> {
    fn header(&self) -> Result<u32, Malformed> {
        read_u32(self.bytes, 0)
    }

    pub fn is_object(&self) -> bool {
        self.header().is_ok_and(|h| h & JB_FOBJECT != 0)
    }

    pub fn is_array(&self) -> bool {
        self.header().is_ok_and(|h| h & JB_FARRAY != 0)
    }

    /// Calls `each(i, child)` for every child in stored order (for objects: the keys, then the
    /// values), computing offsets in one pass.
    fn for_each_entry(&self, mut each: impl FnMut(usize, Jsonb<'a>) -> Result<(), Malformed>) -> Result<(), Malformed> {
        let header = self.header()?;
        let count = usize::try_from(header & JB_CMASK).map_err(|_| Malformed("count"))?;
        let n = if header & JB_FOBJECT != 0 { count.checked_mul(2).ok_or(Malformed("count"))? } else { count };
        let data_start = n.checked_mul(4).and_then(|x| x.checked_add(4)).ok_or(Malformed("count"))?;
        let jentries = self.bytes.get(4..data_start).ok_or(Malformed("children past the end"))?;
        let data = self.bytes.get(data_start..).ok_or(Malformed("children past the end"))?;
        let mut offset = 0usize;
        for (i, je) in jentries.chunks_exact(4).enumerate() {
            let je = u32::from_ne_bytes([je[0], je[1], je[2], je[3]]);
            let field = usize::try_from(je & JENTRY_OFFLENMASK).map_err(|_| Malformed("offset"))?;
            let end =
                if je & JENTRY_HAS_OFF != 0 { field } else { offset.checked_add(field).ok_or(Malformed("length"))? };
            let raw = data.get(offset..end).ok_or(Malformed("child past the end"))?;
            let aligned = || -> Result<&'a [u8], Malformed> {
                let pad = (4 - offset % 4) % 4;
                raw.get(pad..).ok_or(Malformed("misaligned child"))
            };
            each(
                i,
                match je & JENTRY_TYPEMASK {
                    JENTRY_ISSTRING => Jsonb::String(raw),
                    JENTRY_ISNUMERIC => Jsonb::Numeric(aligned()?),
                    JENTRY_ISBOOL_FALSE => Jsonb::Bool(false),
                    JENTRY_ISBOOL_TRUE => Jsonb::Bool(true),
                    JENTRY_ISNULL => Jsonb::Null,
                    JENTRY_ISCONTAINER => Jsonb::Container(Container { bytes: aligned()? }),
                    _ => return Err(Malformed("unknown entry type")),
                },
            )?;
            offset = end;
        }
        Ok(())
    }

    /// The values of `keys` in this object, in one pass over its entries without allocating
    /// for the entries: `out[i]` is the value of `keys[i]` (`None` when the object lacks it, and
    /// for all when this is an array). `out` is as long as `keys`.
    pub fn pick_into(&self, keys: &[&str], out: &mut [Option<Jsonb<'a>>]) -> Result<(), Malformed> {
        out.iter_mut().for_each(|o| *o = None);
        if !self.is_object() {
            return Ok(());
        }
        let pairs = usize::try_from(self.header()? & JB_CMASK).map_err(|_| Malformed("count"))?;
        // For each wanted key, the index of the pair holding it (on the stack for a few keys).
        let mut few = [None; 8];
        let mut many = Vec::new();
        let pair_of: &mut [Option<usize>] = if keys.len() <= few.len() {
            few.get_mut(..keys.len()).unwrap_or_default()
        } else {
            many.resize(keys.len(), None);
            &mut many
        };
        self.for_each_entry(|i, child| {
            if i < pairs {
                let Jsonb::String(key) = child else { return Err(Malformed("object key is not a string")) };
                for (want, slot) in keys.iter().zip(pair_of.iter_mut()) {
                    if want.as_bytes() == key {
                        *slot = Some(i);
                    }
                }
            } else {
                for (slot, o) in pair_of.iter().zip(out.iter_mut()) {
                    if *slot == Some(i - pairs) {
                        *o = Some(child);
                    }
                }
            }
            Ok(())
        })
    }

    /// Every child in stored order (for objects: the keys, then the values).
    pub fn entries(&self, out: &mut Vec<Jsonb<'a>>) -> Result<(), Malformed> {
        self.for_each_entry(|_, child| {
            out.push(child);
            Ok(())
        })
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, Malformed> {
    std::str::from_utf8(bytes).map_err(|_| Malformed("string is not UTF-8"))
}

impl<'a> JsonNode<'a> for Jsonb<'a> {
    type Error = Malformed;

    fn kind(self) -> Result<Kind<'a>, Malformed> {
        Ok(match self {
            Jsonb::Null => Kind::Null,
            Jsonb::Bool(b) => Kind::Bool(b),
            Jsonb::String(s) => Kind::String(utf8(s)?),
            Jsonb::Numeric(n) => Kind::Number(numeric_to_f64(n)?),
            Jsonb::Container(c) if c.is_object() => Kind::Object,
            Jsonb::Container(_) => Kind::Array,
        })
    }

    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Malformed> {
        let Jsonb::Container(c) = self else { return Ok(()) };
        let base = out.len();
        if c.is_object() {
            // The first half of the entries are the keys, the second half the values in the
            // same order: push each key with a placeholder, then fill in its value.
            let pairs = usize::try_from(c.header()? & JB_CMASK).map_err(|_| Malformed("count"))?;
            out.reserve(pairs);
            c.for_each_entry(|i, child| {
                if i < pairs {
                    let Jsonb::String(key) = child else { return Err(Malformed("object key is not a string")) };
                    out.push((Some(utf8(key)?), Jsonb::Null));
                } else if let Some(slot) = out.get_mut(base + i - pairs) {
                    slot.1 = child;
                }
                Ok(())
            })
        } else {
            c.for_each_entry(|_, child| {
                out.push((None, child));
                Ok(())
            })
        }
    }
}

/// A `numeric` varlena taken apart: a special value's `numeric_out` text, or the sign, the
/// weight (of the first base-10000 digit), the display scale and the digits' bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericParts<'a> {
    Special(&'static str),
    Finite { negative: bool, weight: i32, dscale: u16, digits: &'a [u8] },
}

/// Reads a `numeric` varlena's header (`utils/adt/numeric.c`: short and long formats).
pub fn numeric_parts(varlena: &[u8]) -> Result<NumericParts<'_>, Malformed> {
    const NUMERIC_SIGN_MASK: u16 = 0xC000;
    const NUMERIC_NEG: u16 = 0x4000;
    const NUMERIC_SHORT: u16 = 0x8000;
    const NUMERIC_SPECIAL: u16 = 0xC000;
    const NUMERIC_NAN: u16 = 0xC000;
    const NUMERIC_PINF: u16 = 0xD000;
    const NUMERIC_NINF: u16 = 0xF000;
    const NUMERIC_SHORT_SIGN_MASK: u16 = 0x2000;
    const NUMERIC_SHORT_DSCALE_MASK: u16 = 0x1F80;
    const NUMERIC_SHORT_DSCALE_SHIFT: u16 = 7;
    const NUMERIC_SHORT_WEIGHT_SIGN_MASK: u16 = 0x0040;
    const NUMERIC_SHORT_WEIGHT_MASK: u16 = 0x003F;
    const NUMERIC_DSCALE_MASK: u16 = 0x3FFF;

    let first = *varlena.first().ok_or(Malformed("empty numeric"))?;
    // Little- and big-endian varlena headers differ; Postgres uses the platform's. A 1-byte
    // header has its low bit set (little-endian) and holds the total length in the other bits.
    let (total, payload_start) = if cfg!(target_endian = "little") && first & 0x01 == 0x01 {
        (usize::from(first >> 1), 1)
    } else {
        (usize::try_from(read_u32(varlena, 0)? >> 2).map_err(|_| Malformed("numeric length"))?, 4)
    };
    let payload = varlena.get(payload_start..total).ok_or(Malformed("numeric past the end"))?;
    let u16_at = |i: usize| -> Result<u16, Malformed> {
        payload.get(i..i + 2).map(|b| u16::from_ne_bytes([b[0], b[1]])).ok_or(Malformed("numeric header"))
    };
    let header = u16_at(0)?;
    let (negative, weight, dscale, digits_at) = match header & NUMERIC_SIGN_MASK {
        NUMERIC_SPECIAL => {
            return Ok(NumericParts::Special(match header & 0xF000 {
                NUMERIC_PINF => "Infinity",
                NUMERIC_NINF => "-Infinity",
                _ if header == NUMERIC_NAN => "NaN",
                _ => return Err(Malformed("numeric special value")),
            }));
        }
        NUMERIC_SHORT => {
            let magnitude = i32::from(header & NUMERIC_SHORT_WEIGHT_MASK);
            let weight = if header & NUMERIC_SHORT_WEIGHT_SIGN_MASK != 0 { magnitude - 64 } else { magnitude };
            let dscale = (header & NUMERIC_SHORT_DSCALE_MASK) >> NUMERIC_SHORT_DSCALE_SHIFT;
            (header & NUMERIC_SHORT_SIGN_MASK != 0, weight, dscale, 2)
        }
        sign => (sign == NUMERIC_NEG, i32::from(u16_at(2)? as i16), header & NUMERIC_DSCALE_MASK, 4),
    };
    let digits = payload.get(digits_at..).ok_or(Malformed("numeric digits"))?;
    Ok(NumericParts::Finite { negative, weight, dscale, digits: digits.get(..digits.len() / 2 * 2).unwrap_or(&[]) })
}

/// Converts a `numeric` varlena to the double JavaScript's `JSON.parse` would produce from its
/// decimal text: correctly rounded, ±Infinity beyond the double range, ±0 below it.
pub fn numeric_to_f64(varlena: &[u8]) -> Result<f64, Malformed> {
    let (negative, weight, digit_bytes) = match numeric_parts(varlena)? {
        NumericParts::Special("Infinity") => return Ok(f64::INFINITY),
        NumericParts::Special("-Infinity") => return Ok(f64::NEG_INFINITY),
        NumericParts::Special(_) => return Ok(f64::NAN),
        NumericParts::Finite { negative, weight, digits, .. } => (negative, weight, digits),
    };
    let ndigits = digit_bytes.len() / 2;
    // value = 0.d0 d1 ... (base 10000) * 10000^(weight + 1)
    let digit = |i: usize| u16::from_ne_bytes([digit_bytes[2 * i], digit_bytes[2 * i + 1]]);
    if ndigits == 0 {
        return Ok(if negative { -0.0 } else { 0.0 });
    }
    // Exact integers below 2^53 need no decimal parsing.
    let exp4 = weight + 1 - i32::try_from(ndigits).map_err(|_| Malformed("numeric digits"))?;
    if ndigits <= 4 && (0..=3).contains(&exp4) {
        let mut v: Option<u64> = Some(0);
        for i in 0..ndigits {
            v = v.and_then(|v| v.checked_mul(10_000)).and_then(|v| v.checked_add(u64::from(digit(i))));
        }
        for _ in 0..exp4 {
            v = v.and_then(|v| v.checked_mul(10_000));
        }
        if let Some(v) = v.filter(|v| *v < (1 << 53)) {
            let f = v as f64;
            return Ok(if negative { -f } else { f });
        }
    }
    // Decimal text for Rust's correctly rounded parser: "[-]DDDD...DDDDe<exp>".
    let mut text = String::with_capacity(ndigits * 4 + 16);
    if negative {
        text.push('-');
    }
    for i in 0..ndigits {
        let d = digit(i);
        if d > 9999 {
            return Err(Malformed("numeric digit out of range"));
        }
        for div in [1000, 100, 10, 1] {
            text.push(char::from(b'0' + ((d / div) % 10) as u8));
        }
    }
    text.push('e');
    if exp4 < 0 {
        text.push('-');
    }
    super::number::push_u64(&mut text, u64::from(exp4.unsigned_abs()) * 4);
    text.parse::<f64>().map_err(|_| Malformed("numeric text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le32(v: u32) -> [u8; 4] {
        v.to_ne_bytes()
    }

    /// A 4-byte-header numeric with the long format.
    fn long_numeric(negative: bool, weight: i16, digits: &[u16]) -> Vec<u8> {
        let mut payload = Vec::new();
        payload.extend((if negative { 0x4000u16 } else { 0 }).to_ne_bytes());
        payload.extend(weight.to_ne_bytes());
        for d in digits {
            payload.extend(d.to_ne_bytes());
        }
        let total = u32::try_from(4 + payload.len()).unwrap_or(0);
        let mut v = le32(total << 2).to_vec();
        v.extend(payload);
        v
    }

    /// A 1-byte-header numeric with the short format.
    fn short_numeric(negative: bool, weight: i8, digits: &[u16]) -> Vec<u8> {
        let w = if weight < 0 { 0x0040 | ((weight as i32 + 64) as u16 & 0x3F) } else { weight as u16 & 0x3F };
        let header = 0x8000u16 | if negative { 0x2000 } else { 0 } | w;
        let mut payload = header.to_ne_bytes().to_vec();
        for d in digits {
            payload.extend(d.to_ne_bytes());
        }
        let total = u8::try_from(1 + payload.len()).unwrap_or(0);
        let mut v = vec![(total << 1) | 1];
        v.extend(payload);
        v
    }

    #[test]
    fn numerics_convert_exactly_like_parsing_their_decimal_text() {
        assert_eq!(numeric_to_f64(&long_numeric(false, 0, &[123, 4500])), Ok(123.45));
        assert_eq!(numeric_to_f64(&long_numeric(true, 0, &[7])), Ok(-7.0));
        assert_eq!(
            numeric_to_f64(&long_numeric(false, 4, &[1234, 5678, 9012, 3456, 7890])),
            Ok(12345678901234567890.0)
        );
        assert_eq!(numeric_to_f64(&long_numeric(false, -1, &[1000])), Ok(0.1));
        assert_eq!(numeric_to_f64(&long_numeric(false, 100, &[1])), Ok(f64::INFINITY), "1e400");
        assert_eq!(numeric_to_f64(&long_numeric(false, -101, &[1])), Ok(0.0), "1e-404");
        assert_eq!(numeric_to_f64(&long_numeric(false, 0, &[])), Ok(0.0));
        assert_eq!(numeric_to_f64(&short_numeric(false, 0, &[42])), Ok(42.0));
        assert_eq!(numeric_to_f64(&short_numeric(true, -2, &[1500])), Ok(-0.000015));
        assert_eq!(numeric_to_f64(&short_numeric(false, 1, &[1, 5000])), Ok(15000.0));
        // Four digit groups scaled by 10000^3 overflow u64: the exact path must step aside.
        assert_eq!(
            numeric_to_f64(&long_numeric(false, 6, &[9999, 9999, 9999, 9999])),
            Ok("9999999999999999e12".parse::<f64>().unwrap_or(f64::NAN))
        );
        assert_eq!(numeric_to_f64(&long_numeric(false, 3, &[9007, 1992, 5474, 993])), Ok(9007199254740993.0));
    }

    #[test]
    fn special_numerics() {
        let special = |h: u16| {
            let mut v = le32(6 << 2).to_vec();
            v.extend(h.to_ne_bytes());
            v
        };
        assert!(numeric_to_f64(&special(0xC000)).is_ok_and(f64::is_nan));
        assert_eq!(numeric_to_f64(&special(0xD000)), Ok(f64::INFINITY));
        assert_eq!(numeric_to_f64(&special(0xF000)), Ok(f64::NEG_INFINITY));
    }

    #[test]
    fn malformed_bytes_are_errors_not_panics() {
        assert!(numeric_to_f64(&[]).is_err());
        assert!(numeric_to_f64(&[0xff, 0xff]).is_err());
        assert!(numeric_to_f64(&long_numeric(false, 0, &[10_000, 1, 2, 3, 4, 5])).is_err());
        assert!(Jsonb::root(&[]).is_err());
        assert!(Jsonb::root(&[1, 0]).is_err());
        // An object claiming 1000 pairs in 8 bytes.
        let lying = [le32(0x2000_0000 | 1000), le32(0)].concat();
        let root = Jsonb::root(&lying).unwrap_or(Jsonb::Null);
        let mut out = Vec::new();
        assert!(root.children(&mut out).is_err());
        // Fuzz-ish: every prefix and a byte-flipped copy of a valid container fail cleanly.
        let valid = object_ab();
        for cut in 0..valid.len() {
            let _ = Jsonb::root(&valid[..cut]).and_then(|r| {
                let mut v = Vec::new();
                r.children(&mut v)
            });
        }
        for i in 0..valid.len() {
            let mut bad = valid.clone();
            bad[i] ^= 0xA5;
            if let Ok(r) = Jsonb::root(&bad) {
                let mut v = Vec::new();
                if r.children(&mut v).is_ok() {
                    for (_, c) in v {
                        let _ = c.kind();
                    }
                }
            }
        }
    }

    /// {"a": 1, "b": "xy"} as jsonb lays it out.
    fn object_ab() -> Vec<u8> {
        let num = short_numeric(false, 0, &[1]);
        // data: "a" "b" <pad to 4> numeric "xy"
        let mut data = b"ab".to_vec();
        data.extend([0, 0]);
        data.extend(&num);
        let num_end = data.len();
        data.extend(b"xy");
        let mut v = le32(0x2000_0000 | 2).to_vec();
        v.extend(le32(1)); // key "a", length 1
        v.extend(le32(1)); // key "b", length 1
        v.extend(le32(0x1000_0000 | u32::try_from(num_end - 2).unwrap_or(0))); // numeric, incl. padding
        v.extend(le32(2)); // "xy"
        v.extend(data);
        v
    }

    #[test]
    fn a_hand_built_object_reads_back() {
        let bytes = object_ab();
        let root = Jsonb::root(&bytes).unwrap_or(Jsonb::Null);
        assert_eq!(root.kind(), Ok(Kind::Object));
        let mut children = Vec::new();
        assert!(root.children(&mut children).is_ok());
        let kinds: Vec<(Option<&str>, Result<Kind, Malformed>)> =
            children.iter().map(|(k, v)| (*k, v.kind())).collect();
        assert_eq!(kinds, vec![(Some("a"), Ok(Kind::Number(1.0))), (Some("b"), Ok(Kind::String("xy")))]);
    }
}
