//! Binary `jsonb` printed as PostgreSQL's `jsonb_out` prints it (`JsonbToCString` without
//! indentation): `{"k": v, "k2": v2}`, `[a, b]`, strings escaped as `escape_json` (and
//! `JSON.stringify`) escape them, numbers as `numeric_out` writes them. Pure.
//!
//! Recovery reads only a few members of each stored line; printing those here from the bytes
//! SPI hands over costs a fraction of having PostgreSQL print every whole payload as text.
//! A `#[pg_test]` compares the output with `jsonb_out`'s, byte for byte.

use super::jsonb_format::{Jsonb, Malformed};
use super::node::JsonNode;
use super::quote::write_js_string;

/// Appends `v` as `jsonb_out` would print it.
pub fn write_value(v: Jsonb<'_>, out: &mut String) -> Result<(), Malformed> {
    write_at(v, out, 0)
}

/// Nesting the printer follows: what a stored payload can hold (the parser's limit), with room.
const MAX_DEPTH: usize = 2 * super::parse::JSONB_MAX_DEPTH;

fn write_at(v: Jsonb<'_>, out: &mut String, depth: usize) -> Result<(), Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed("nested too deep"));
    }
    match v {
        Jsonb::Null => out.push_str("null"),
        Jsonb::Bool(true) => out.push_str("true"),
        Jsonb::Bool(false) => out.push_str("false"),
        // PostgreSQL's `escape_json` escapes exactly what `JSON.stringify` does (`"`, `\` and
        // the C0 controls, lowercase `\u00xx`): the same function writes both.
        Jsonb::String(s) => write_js_string(std::str::from_utf8(s).map_err(|_| Malformed("string is not UTF-8"))?, out),
        Jsonb::Numeric(n) => numeric_text(n, out)?,
        Jsonb::Container(c) => {
            let object = c.is_object();
            let mut children = Vec::new();
            v.children(&mut children)?;
            out.push(if object { '{' } else { '[' });
            for (i, (key, child)) in children.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if let Some(k) = key {
                    write_js_string(k, out);
                    out.push_str(": ");
                }
                write_at(child, out, depth + 1)?;
            }
            out.push(if object { '}' } else { ']' });
        }
    }
    Ok(())
}

/// Appends the first `n` (at most four) of a base-10000 digit's four decimal digits.
fn push_four(out: &mut String, dig: u16, n: usize) {
    for div in [1000, 100, 10, 1].into_iter().take(n) {
        out.push(char::from(b'0' + ((dig / div) % 10) as u8));
    }
}

/// The values of `keys` in object `v` (all `None` when `v` is not an object), in one pass.
pub fn pick<'a>(v: Jsonb<'a>, keys: &[&str]) -> Result<Vec<Option<Jsonb<'a>>>, Malformed> {
    let mut out = vec![None; keys.len()];
    if let Jsonb::Container(c) = v {
        c.pick_into(keys, &mut out)?;
    }
    Ok(out)
}

/// The value of `key` in object `v` (`None` when `v` is not an object or has no such member).
pub fn member<'a>(v: Jsonb<'a>, key: &str) -> Result<Option<Jsonb<'a>>, Malformed> {
    Ok(pick(v, &[key])?.pop().flatten())
}

/// A `numeric` varlena as `numeric_out` writes it: the sign, the integer digits (at least one),
/// then exactly `dscale` fraction digits.
pub fn numeric_text(varlena: &[u8], out: &mut String) -> Result<(), Malformed> {
    let n = super::jsonb_format::numeric_parts(varlena)?;
    let (negative, weight, dscale, digits) = match n {
        super::jsonb_format::NumericParts::Special(s) => {
            out.push_str(s);
            return Ok(());
        }
        super::jsonb_format::NumericParts::Finite { negative, weight, dscale, digits } => {
            (negative, weight, dscale, digits)
        }
    };
    let digit = |i: i64| -> u16 {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(2 * i..2 * i + 2))
            .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]))
    };
    if negative {
        out.push('-');
    }
    let weight = i64::from(weight);
    if weight < 0 {
        out.push('0');
    } else {
        for d in 0..=weight {
            let dig = digit(d);
            if dig > 9999 {
                return Err(Malformed("numeric digit out of range"));
            }
            if d == 0 {
                super::number::push_u64(out, u64::from(dig));
            } else {
                push_four(out, dig, 4);
            }
        }
    }
    if dscale > 0 {
        out.push('.');
        let mut left = usize::from(dscale);
        let mut d = weight + 1;
        while left > 0 {
            let dig = digit(d);
            if dig > 9999 {
                return Err(Malformed("numeric digit out of range"));
            }
            let take = left.min(4);
            push_four(out, dig, take);
            left -= take;
            d += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::jsonb_write::to_jsonb;

    /// `text` stored as jsonb (the same bytes `jsonb_in` builds) and printed back.
    fn printed(text: &str) -> String {
        let mut bytes = Vec::new();
        to_jsonb(text, &mut bytes).unwrap_or_else(|e| panic!("{e:?}"));
        // to_jsonb writes the varlena header first.
        let root = Jsonb::root(bytes.get(4..).unwrap_or(&[])).unwrap_or_else(|e| panic!("{e:?}"));
        let mut out = String::new();
        write_value(root, &mut out).unwrap_or_else(|e| panic!("{e:?}"));
        out
    }

    #[test]
    fn prints_as_jsonb_out() {
        // What PostgreSQL 15 prints for each (SELECT 'doc'::jsonb).
        for (doc, want) in [
            (r#"{"b":1,"a":[true,false,null],"cc":{}}"#, r#"{"a": [true, false, null], "b": 1, "cc": {}}"#),
            (r#"[]"#, "[]"),
            (r#""x""#, r#""x""#),
            (r#"{"a":1,"a":2}"#, r#"{"a": 2}"#),
            ("\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\/é\\u00e9\\ud83d\\ude00\u{7f}\"", "\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\/éé😀\u{7f}\""),
            ("[0, -0, 1.50, -1.5e3, 1e-7, 12345678901234567890, 0.000, 100000000, 1e20, 9999.9999]",
             "[0, 0, 1.50, -1500, 0.0000001, 12345678901234567890, 0.000, 100000000, 100000000000000000000, 9999.9999]"),
            ("[1.0e2, 123.456e-2, 0.1, 10001, 10000.00001]", "[100, 1.23456, 0.1, 10001, 10000.00001]"),
        ] {
            assert_eq!(printed(doc), want, "{doc}");
        }
    }

    #[test]
    fn finds_members() {
        let mut bytes = Vec::new();
        to_jsonb(r#"{"type":"t","data":{"x":[1]}}"#, &mut bytes).unwrap_or_else(|e| panic!("{e:?}"));
        let root = Jsonb::root(bytes.get(4..).unwrap_or(&[])).unwrap_or_else(|e| panic!("{e:?}"));
        let data = member(root, "data").ok().flatten();
        let x = data.and_then(|d| member(d, "x").ok().flatten());
        let mut out = String::new();
        write_value(x.unwrap_or(Jsonb::Null), &mut out).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out, "[1]");
        assert_eq!(member(root, "nope"), Ok(None));
    }
}
