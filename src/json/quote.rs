//! String quoting exactly as ECMAScript `JSON.stringify` (QuoteJSONString) does it.
//!
//! Only `"`, `\` and the C0 control characters are escaped; `/`, DEL, U+2028/U+2029 and all
//! non-ASCII text are written raw. Control characters without a short escape use lowercase
//! `\u00xx`, as V8 does.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string literal (with the surrounding quotes).
pub fn write_js_string(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut clean_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte matched above is ASCII, so `i` is a char boundary.
        out.push_str(&s[clean_from..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        } else {
            out.push_str(escape);
        }
        clean_from = i + 1;
    }
    out.push_str(&s[clean_from..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::write_js_string;

    fn q(s: &str) -> String {
        let mut out = String::new();
        write_js_string(s, &mut out);
        out
    }

    #[test]
    fn escapes_quote_and_backslash() {
        assert_eq!(q(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn short_escapes_for_the_five_named_controls() {
        assert_eq!(q("\u{8}\u{c}\n\r\t"), r#""\b\f\n\r\t""#);
    }

    #[test]
    fn other_controls_use_lowercase_unicode_escapes() {
        assert_eq!(q("\u{0}\u{1}\u{1f}\u{b}"), r#""\u0000\u0001\u001f\u000b""#);
    }

    #[test]
    fn leaves_slash_del_line_separators_and_non_ascii_raw() {
        assert_eq!(q("a/b\u{7f}\u{2028}\u{2029}é日本🎉"), "\"a/b\u{7f}\u{2028}\u{2029}é日本🎉\"");
    }

    #[test]
    fn empty_string() {
        assert_eq!(q(""), r#""""#);
    }
}
