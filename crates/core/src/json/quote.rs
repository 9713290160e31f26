//! String quoting exactly as ECMAScript `JSON.stringify` (QuoteJSONString) does it.
//!
//! Only `"`, `\` and the C0 control characters are escaped; `/`, DEL, U+2028/U+2029 and all
//! non-ASCII text are written raw. Control characters without a short escape use lowercase
//! `\u00xx`, as V8 does.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes that `JSON.stringify` escapes: `"`, `\` and the C0 controls.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The index of the first byte that must be escaped, scanning eight bytes at a time.
pub(crate) fn next_escape(bytes: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut at = 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let w = u64::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]]);
        // A byte below 0x20, or equal to '"' or '\\' (the classic "has zero byte" trick on
        // w - 0x20.., w ^ '"'.. and w ^ '\\'..; false positives are re-checked below).
        let below = w.wrapping_sub(LO * 0x20) & !w & HI;
        let quote = (w ^ (LO * u64::from(b'"'))).wrapping_sub(LO) & !(w ^ (LO * u64::from(b'"'))) & HI;
        let slash = (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO) & !(w ^ (LO * u64::from(b'\\'))) & HI;
        if below | quote | slash != 0 {
            if let Some(p) = chunk.iter().position(|&b| NEEDS_ESCAPE[usize::from(b)]) {
                return Some(at + p);
            }
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| NEEDS_ESCAPE[usize::from(b)]).map(|p| at + p)
}

/// Appends `s` as a JSON string literal (with the surrounding quotes).
pub fn write_js_string(s: &str, out: &mut String) {
    out.push('"');
    push_escaped(s, out);
    out.push('"');
}

/// Appends a WTF-8 string as a JSON string literal, as `JSON.stringify` writes the JavaScript
/// string it stands for: like [`write_js_string`], and each lone surrogate (held as its
/// three-byte sequence `ED A0..BF xx`) as a lower-case `\udxxx` escape, as ES2019's well-formed
/// `JSON.stringify` writes it.
pub fn write_js_wtf8_string(s: &[u8], out: &mut String) {
    out.push('"');
    let mut rest = s;
    loop {
        // Valid UTF-8 never holds ED followed by A0..BF: those three bytes are a surrogate.
        let lone = memchr::memchr_iter(0xED, rest).find(|&i| rest.get(i + 1).is_some_and(|b| *b >= 0xA0));
        let clean = rest.get(..lone.unwrap_or(rest.len())).unwrap_or(rest);
        match std::str::from_utf8(clean) {
            Ok(text) => push_escaped(text, out),
            // Not WTF-8 (never the case for unescaped JSON text): write what can be read.
            Err(_) => push_escaped(&String::from_utf8_lossy(clean), out),
        }
        let Some(at) = lone else { break };
        let unit = match rest.get(at..at + 3) {
            Some(&[a, b, c]) => (u16::from(a & 0x0F) << 12) | (u16::from(b & 0x3F) << 6) | u16::from(c & 0x3F),
            _ => 0xFFFD,
        };
        out.push_str("\\u");
        for shift in [12, 8, 4, 0] {
            out.push(char::from(HEX[usize::from((unit >> shift) & 0x0F)]));
        }
        rest = rest.get(at + 3..).unwrap_or(&[]);
    }
    out.push('"');
}

/// Appends `s` with the characters `JSON.stringify` escapes escaped (no quotes).
fn push_escaped(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    let mut clean_from = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Most strings need no escaping at all: run to the next byte that does.
        match next_escape(&bytes[i..]) {
            None => break,
            Some(skip) => i += skip,
        }
        let b = bytes[i];
        // Every escaped byte is ASCII, so `i` is a char boundary.
        out.push_str(&s[clean_from..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0f)]));
            }
        }
        i += 1;
        clean_from = i;
    }
    out.push_str(&s[clean_from..]);
}

#[cfg(test)]
mod tests {
    use super::{next_escape, write_js_string};

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
    fn the_word_at_a_time_scan_finds_every_escape_at_every_position() {
        for len in 0..40 {
            for pos in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                    let mut bytes = vec![b'a'; len];
                    // High bytes (UTF-8 continuation and lead bytes) must not confuse the scan.
                    if pos > 0 {
                        bytes[pos - 1] = 0xC3;
                    }
                    if pos + 1 < len {
                        bytes[pos + 1] = 0xA9;
                    }
                    bytes[pos] = special;
                    assert_eq!(next_escape(&bytes), Some(pos), "len {len} pos {pos} byte {special:#x}");
                }
            }
            let clean: Vec<u8> = "é日😀a/\u{7f}".bytes().cycle().take(len).collect();
            assert_eq!(next_escape(&clean), None, "len {len}");
        }
    }

    #[test]
    fn empty_string() {
        assert_eq!(q(""), r#""""#);
    }
}
