//! The control plane's canonical checkpoint serialisation: `JSON.stringify` of the value with
//! object keys sorted recursively (`Object.keys(o).sort()` re-inserted into a fresh object).
//!
//! Re-inserting sorted keys into a JavaScript object does not keep them in sorted order:
//! ECMAScript's OrdinaryOwnPropertyKeys lists array-index keys ("0".."4294967294" in canonical
//! form) first in ascending numeric order, then the remaining string keys in insertion order,
//! which is the UTF-16 code-unit order of `Array.prototype.sort`. Duplicate keys cannot survive
//! `JSON.parse` (the last value wins), so they are resolved the same way here.

use std::cmp::Ordering;

use super::number::write_js_number;
use super::quote::write_js_string;
use super::value::JsValue;

/// The canonical JSON text of `value`.
pub fn canonical_json(value: &JsValue) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Appends the canonical JSON text of `value` to `out`.
///
/// Iterative (explicit stack) so that hostile nesting depth cannot overflow the thread stack.
pub fn write_canonical(value: &JsValue, out: &mut String) {
    enum Step<'a> {
        Value(&'a JsValue),
        Raw(&'static str),
        Key(&'a str),
    }
    let mut stack: Vec<Step<'_>> = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Raw(s) => out.push_str(s),
            Step::Key(k) => {
                write_js_string(k, out);
                out.push(':');
            }
            Step::Value(v) => match v {
                JsValue::Null => out.push_str("null"),
                JsValue::Bool(true) => out.push_str("true"),
                JsValue::Bool(false) => out.push_str("false"),
                JsValue::Number(n) => write_js_number(*n, out),
                JsValue::String(s) => write_js_string(s, out),
                JsValue::Array(items) => {
                    out.push('[');
                    stack.push(Step::Raw("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Raw(","));
                        }
                    }
                }
                JsValue::Object(members) => {
                    out.push('{');
                    stack.push(Step::Raw("}"));
                    let ordered = js_property_order(members);
                    for (i, (key, member)) in ordered.into_iter().enumerate().rev() {
                        stack.push(Step::Value(member));
                        stack.push(Step::Key(key));
                        if i > 0 {
                            stack.push(Step::Raw(","));
                        }
                    }
                }
            },
        }
    }
}

/// The members of an object in the order `JSON.stringify` emits them after the control plane's
/// key sort, with duplicate keys resolved to their last value.
fn js_property_order(members: &[(String, JsValue)]) -> Vec<(&str, &JsValue)> {
    let mut ordered: Vec<(&str, &JsValue)> = Vec::with_capacity(members.len());
    ordered.extend(members.iter().map(|(k, v)| (k.as_str(), v)));
    // Stable sort keeps duplicates in source order, so the last one of a run is the winner.
    ordered.sort_by(|a, b| compare_property_keys(a.0, b.0));
    ordered.dedup_by(|later, earlier| {
        if later.0 == earlier.0 {
            // `dedup_by` keeps `earlier`; move the later (winning) value into it.
            earlier.1 = later.1;
            true
        } else {
            false
        }
    });
    ordered
}

/// Property order of an object whose keys were inserted in UTF-16 sorted order.
pub fn compare_property_keys(a: &str, b: &str) -> Ordering {
    match (array_index(a), array_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => compare_utf16(a, b),
    }
}

/// `Array.prototype.sort`'s default comparison: UTF-16 code units, not code points.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    // Byte order equals UTF-16 order unless a supplementary character meets a BMP character at
    // or above U+E000, which is rare; take the cheap path when neither string has such bytes.
    if a.is_ascii() || b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The value of `key` if it is an ECMAScript array index: the canonical decimal form of an
/// integer in 0 ..= 2^32 - 2.
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let value: u64 = key.parse().ok()?;
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
