//! The control plane's canonical checkpoint serialisation: `JSON.stringify` of the value with
//! object keys sorted recursively (`Object.keys(o).sort()` re-inserted into a fresh object).
//!
//! Re-inserting sorted keys into a JavaScript object does not keep them in sorted order:
//! ECMAScript's OrdinaryOwnPropertyKeys lists array-index keys ("0".."4294967294" in canonical
//! form) first in ascending numeric order, then the remaining string keys in insertion order,
//! which is the UTF-16 code-unit order of `Array.prototype.sort`. Duplicate keys cannot survive
//! `JSON.parse` (the last value wins), so they are resolved the same way here. A `__proto__`
//! key does not survive the re-insertion (it sets the prototype), so it is left out here too.

use std::cmp::Ordering;

use super::node::{JsonNode, Kind};
use super::number::write_js_number;
use super::quote::write_js_string;
use super::value::JsValue;

/// The canonical JSON text of `value`.
pub fn canonical_json(value: &JsValue) -> String {
    let mut out = String::new();
    match write_canonical(value, &mut out) {
        Ok(()) => out,
        Err(never) => match never {},
    }
}

/// A container being written: its children in output order, and how many are done.
struct Frame<'a, N> {
    children: Vec<(Option<&'a str>, N)>,
    next: usize,
    object: bool,
}

/// Appends the canonical JSON text of `root` to `out`.
///
/// Iterative (explicit stack) so that nesting depth costs heap, not thread stack; child vectors
/// are recycled so a document costs few allocations beyond the output.
pub fn write_canonical<'a, N: JsonNode<'a>>(root: N, out: &mut String) -> Result<(), N::Error> {
    let mut stack: Vec<Frame<'a, N>> = Vec::new();
    let mut spare: Vec<Vec<(Option<&'a str>, N)>> = Vec::new();
    let mut pending = Some(root);
    loop {
        if let Some(node) = pending.take() {
            match node.kind()? {
                Kind::Null => out.push_str("null"),
                Kind::Bool(true) => out.push_str("true"),
                Kind::Bool(false) => out.push_str("false"),
                Kind::Number(n) => write_js_number(n, out),
                Kind::String(s) => write_js_string(s, out),
                kind @ (Kind::Array | Kind::Object) => {
                    let object = kind == Kind::Object;
                    let mut children = spare.pop().unwrap_or_default();
                    node.children(&mut children)?;
                    if object {
                        js_property_order(&mut children);
                    }
                    out.push(if object { '{' } else { '[' });
                    stack.push(Frame { children, next: 0, object });
                }
            }
        }
        let Some(frame) = stack.last_mut() else { return Ok(()) };
        if frame.next < frame.children.len() {
            if frame.next > 0 {
                out.push(',');
            }
            let (key, child) = frame.children[frame.next];
            frame.next += 1;
            if let Some(k) = key {
                write_js_string(k, out);
                out.push(':');
            }
            pending = Some(child);
        } else {
            out.push(if frame.object { '}' } else { ']' });
            if let Some(mut done) = stack.pop().map(|f| f.children) {
                done.clear();
                spare.push(done);
            }
        }
    }
}

/// Puts an object's members in the order `JSON.stringify` emits them after the control plane's
/// key sort, keeping only the last value of a repeated key (as `JSON.parse` does).
fn js_property_order<N>(members: &mut Vec<(Option<&str>, N)>) {
    let kept = order_members(members, |m| m.0.map_or(&b""[..], str::as_bytes));
    members.truncate(kept);
}

/// Puts an object's members in the order `JSON.stringify` emits them after the control plane's
/// key sort: the members to write are moved to the front, in order, and their count returned.
/// Of a repeated key only the last value is kept (as `JSON.parse` does); `__proto__` is left
/// out. `key` gives a member's key as WTF-8 (UTF-8 in which a lone surrogate, which a
/// JavaScript string may hold, is written as its three-byte sequence `ED A0..BF xx`).
pub(crate) fn order_members<'k, T>(members: &mut [T], key: impl Fn(&T) -> &'k [u8]) -> usize {
    // Stable sorts keep repeated keys in source order, so the last of a run is the winner.
    // Array-index keys are rare; when there are none the order is plain UTF-16 order.
    if members.iter().any(|m| key(m).first().is_some_and(u8::is_ascii_digit)) {
        members.sort_by(|a, b| compare_property_keys_wtf8(key(a), key(b)));
    } else {
        members.sort_by(|a, b| compare_wtf8(key(a), key(b)));
    }
    let mut write = 0;
    for read in 0..members.len() {
        if write > 0 && key(&members[write - 1]) == key(&members[read]) {
            members.swap(write - 1, read);
        } else {
            members.swap(write, read);
            write += 1;
        }
    }
    // The control plane copies each key into a fresh object (`sorted[k] = value[k]`); for the
    // key "__proto__" that assignment sets the object's prototype instead of adding a property,
    // so the key never reaches its text (nor its CRC).
    let mut kept = 0;
    for read in 0..write {
        if key(&members[read]) != b"__proto__" {
            members.swap(kept, read);
            kept += 1;
        }
    }
    kept
}

/// Property order of an object whose keys were inserted in UTF-16 sorted order.
pub fn compare_property_keys(a: &str, b: &str) -> Ordering {
    compare_property_keys_wtf8(a.as_bytes(), b.as_bytes())
}

/// [`compare_property_keys`] of WTF-8 keys.
fn compare_property_keys_wtf8(a: &[u8], b: &[u8]) -> Ordering {
    match (array_index_of(a), array_index_of(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => compare_wtf8(a, b),
    }
}

/// `Array.prototype.sort`'s default comparison: UTF-16 code units, not code points.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    compare_wtf8(a.as_bytes(), b.as_bytes())
}

/// [`compare_utf16`] of WTF-8 strings (which may hold lone surrogates).
///
/// UTF-8 byte order is code-point order, which differs from UTF-16 order where a supplementary
/// character (a surrogate pair in UTF-16) meets a BMP character at or above U+E000 or a lone
/// surrogate. So compare bytes, and code units only from the character where the strings first
/// differ (usually the first unit compared decides).
pub fn compare_wtf8(x: &[u8], y: &[u8]) -> Ordering {
    let Some(i) = x.iter().zip(y).position(|(p, q)| p != q) else {
        return x.len().cmp(&y.len());
    };
    let (p, q) = (x.get(i).copied().unwrap_or(0), y.get(i).copied().unwrap_or(0));
    if p < 0x80 && q < 0x80 {
        return p.cmp(&q);
    }
    // Back up to the start of the character holding the first difference: the strings agree
    // before `i`, so it starts at the same place in both.
    let mut start = i;
    while start > 0 && x.get(start).is_some_and(|b| (b & 0xC0) == 0x80) {
        start -= 1;
    }
    Utf16Units::of(x.get(start..).unwrap_or(&[])).cmp(Utf16Units::of(y.get(start..).unwrap_or(&[])))
}

/// The UTF-16 code units of a WTF-8 string.
struct Utf16Units<'a> {
    bytes: &'a [u8],
    /// The low half of a surrogate pair still to yield.
    low: Option<u16>,
}

impl Utf16Units<'_> {
    fn of(bytes: &[u8]) -> Utf16Units<'_> {
        Utf16Units { bytes, low: None }
    }
}

impl Iterator for Utf16Units<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if let Some(low) = self.low.take() {
            return Some(low);
        }
        let (&lead, rest) = self.bytes.split_first()?;
        let (len, init) = match lead {
            0x00..=0x7F => (0, u32::from(lead)),
            0xC0..=0xDF => (1, u32::from(lead & 0x1F)),
            0xE0..=0xEF => (2, u32::from(lead & 0x0F)),
            _ => (3, u32::from(lead & 0x07)),
        };
        let cont = rest.get(..len).unwrap_or(rest);
        self.bytes = rest.get(cont.len()..).unwrap_or(&[]);
        let c = cont.iter().fold(init, |c, b| (c << 6) | u32::from(b & 0x3F));
        if c >= 0x1_0000 {
            let c = c - 0x1_0000;
            self.low = Some(0xDC00 | (c & 0x3FF) as u16);
            Some(0xD800 | ((c >> 10) & 0x3FF) as u16)
        } else {
            Some(c as u16)
        }
    }
}

/// The value of `key` if it is an ECMAScript array index: the canonical decimal form of an
/// integer in 0 ..= 2^32 - 2.
pub fn array_index(key: &str) -> Option<u32> {
    array_index_of(key.as_bytes())
}

fn array_index_of(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return None;
    }
    let value = bytes.iter().fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
    if value <= 4_294_967_294 {
        u32::try_from(value).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JsValue::*;

    fn obj(members: &[(&str, JsValue)]) -> JsValue {
        JsValue::object(members.iter().map(|(k, v)| (*k, v.clone())))
    }

    #[test]
    fn sorts_keys_recursively() {
        let v = obj(&[("b", Number(1.0)), ("a", obj(&[("z", Null), ("y", Bool(true))]))]);
        assert_eq!(canonical_json(&v), r#"{"a":{"y":true,"z":null},"b":1}"#);
    }

    #[test]
    fn array_index_keys_come_first_in_numeric_order() {
        let v = obj(&[
            ("b", Null),
            ("10", Null),
            ("9", Null),
            ("a", Null),
            ("01", Null),
            ("4294967294", Null),
            ("4294967295", Null),
            ("-1", Null),
        ]);
        // "01", "-1" and 2^32-1 are not array indices: they sort as strings after the indices.
        assert_eq!(
            canonical_json(&v),
            r#"{"9":null,"10":null,"4294967294":null,"-1":null,"01":null,"4294967295":null,"a":null,"b":null}"#
        );
    }

    #[test]
    fn string_keys_sort_by_utf16_code_units() {
        // U+FF5E (BMP, above the surrogate range) sorts after U+1F600 in UTF-16 (D83D DE00)
        // although its code point is smaller.
        let v = obj(&[("\u{ff5e}", Number(1.0)), ("\u{1f600}", Number(2.0)), ("z", Number(3.0))]);
        assert_eq!(canonical_json(&v), "{\"z\":3,\"\u{1f600}\":2,\"\u{ff5e}\":1}");
    }

    #[test]
    fn utf16_order_agrees_with_javascript_on_tricky_pairs() {
        use std::cmp::Ordering::*;
        // (a, b, JavaScript's a < b ? Less : Greater)
        let cases = [
            ("a", "b", Less),
            ("ab", "a", Greater),
            ("\u{ff5e}", "\u{1f600}", Greater),
            ("\u{e000}", "\u{10000}", Greater),
            ("\u{d7ff}", "\u{10000}", Less),
            ("x\u{1f600}", "x\u{1f601}", Less),
            ("\u{1f600}a", "\u{1f600}b", Less),
            ("é", "e", Greater),
            ("日本", "日", Greater),
            ("\u{fffd}", "\u{1f600}", Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_utf16(a, b), want, "{a:?} vs {b:?}");
            assert_eq!(compare_utf16(a, b), a.encode_utf16().cmp(b.encode_utf16()), "{a:?} vs {b:?}");
            assert_eq!(compare_utf16(b, a), want.reverse());
        }
    }

    /// WTF-8 of UTF-16 code units: pairs as their character, lone surrogates as three bytes.
    fn wtf8(units: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in char::decode_utf16(units.iter().copied()) {
            match r {
                Ok(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                Err(e) => {
                    let u = e.unpaired_surrogate();
                    out.extend_from_slice(&[
                        0xE0 | (u >> 12) as u8,
                        0x80 | ((u >> 6) & 0x3F) as u8,
                        0x80 | (u & 0x3F) as u8,
                    ]);
                }
            }
        }
        out
    }

    #[test]
    fn wtf8_order_is_code_unit_order_with_lone_surrogates() {
        let units: [&[u16]; 14] = [
            &[],
            &[0x61],
            &[0xD800],
            &[0xD83D],
            &[0xD83D, 0x78],
            &[0xD83D, 0xDE00],
            &[0xD83D, 0xDE00, 0x61],
            &[0xD83D, 0xE000],
            &[0xD83D, 0xFFFF],
            &[0xDC00],
            &[0xDC00, 0xD800],
            &[0xE000],
            &[0xFFFF],
            &[0xDBFF, 0xDFFF],
        ];
        for a in units {
            for b in units {
                assert_eq!(compare_wtf8(&wtf8(a), &wtf8(b)), a.cmp(b), "{a:x?} vs {b:x?}");
                assert_eq!(wtf8(a) == wtf8(b), a == b);
            }
        }
    }

    #[test]
    fn a_proto_key_is_left_out_as_the_control_planes_reinsertion_drops_it() {
        let v = obj(&[("b", JsValue::Number(2.0)), ("__proto__", JsValue::Number(1.0))]);
        assert_eq!(canonical_json(&v), r#"{"b":2}"#);
        let nested = obj(&[("x", obj(&[("__proto__", obj(&[("a", JsValue::Null)])), ("c", JsValue::Bool(true))]))]);
        assert_eq!(canonical_json(&nested), r#"{"x":{"c":true}}"#);
        // Only the exact key: look-alikes stay.
        let alike = obj(&[("__proto", JsValue::Null), ("__PROTO__", JsValue::Null)]);
        assert_eq!(canonical_json(&alike), r#"{"__PROTO__":null,"__proto":null}"#);
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let v = obj(&[("a", Number(1.0)), ("b", Number(2.0)), ("a", Number(3.0))]);
        assert_eq!(canonical_json(&v), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn arrays_keep_their_order_and_nest() {
        let v = Array(vec![Number(3.0), obj(&[("b", Null), ("a", Null)]), Array(vec![]), obj(&[])]);
        assert_eq!(canonical_json(&v), r#"[3,{"a":null,"b":null},[],{}]"#);
    }

    #[test]
    fn scalars_at_top_level() {
        assert_eq!(canonical_json(&Null), "null");
        assert_eq!(canonical_json(&Bool(false)), "false");
        assert_eq!(canonical_json(&Number(1.5e21)), "1.5e+21");
        assert_eq!(canonical_json(&String("x\u{2028}".into())), "\"x\u{2028}\"");
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let mut v = Null;
        for _ in 0..200_000 {
            v = Array(vec![v]);
        }
        let text = canonical_json(&v);
        assert_eq!(text.len(), 200_000 * 2 + 4);
        // Dropping a deep tree recursively would overflow too; unwind it iteratively.
        let mut cur = v;
        while let Array(mut items) = cur {
            cur = items.pop().unwrap_or(Null);
        }
    }

    #[test]
    fn array_index_recognises_only_canonical_u32_below_max() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("4294967294"), Some(4_294_967_294));
        assert_eq!(array_index("4294967295"), None);
        assert_eq!(array_index("00"), None);
        assert_eq!(array_index("1e3"), None);
        assert_eq!(array_index(""), None);
        assert_eq!(array_index("+1"), None);
        assert_eq!(array_index("99999999999"), None);
    }
}
