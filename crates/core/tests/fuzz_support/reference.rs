//! Independent references the fuzz targets are compared with: a recursive `JSON.parse`
//! (ECMA-262 §25.5.1) that keeps strings as UTF-16 code units, as JavaScript does, and the
//! control plane's canonical serialisation written from the specification (`Object.keys().sort()`
//! re-inserted, `JSON.stringify`, `Number::toString`), not from the core's code.

use std::cmp::Ordering;

use cortex_buffer_core::json::JsValue;

/// A value as `JSON.parse` builds it.
#[derive(Debug, Clone, PartialEq)]
pub enum R {
    Null,
    Bool(bool),
    /// The double and the number's source text.
    Num(f64, String),
    /// UTF-16 code units (lone surrogates kept, as in JavaScript).
    Str(Vec<u16>),
    Arr(Vec<R>),
    /// Members in source order, duplicates included.
    Obj(Vec<(Vec<u16>, R)>),
}

/// What the core's parser notes about a document `jsonb` cannot store.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Problems {
    pub nul: bool,
    pub lone_surrogate: bool,
    pub too_deep: bool,
    pub number_out_of_range: bool,
}

impl Problems {
    pub fn any(&self) -> bool {
        self.nul || self.lone_surrogate || self.too_deep || self.number_out_of_range
    }
}

/// A document `JSON.parse` accepted.
#[derive(Debug)]
pub struct Doc {
    pub value: R,
    pub problems: Problems,
    /// Values and keys.
    pub tokens: u64,
    /// For a root object: each member's unescaped key and its value's span in the text.
    pub root_members: Vec<(Vec<u16>, std::ops::Range<usize>)>,
}

/// The nesting PostgreSQL's jsonb is trusted with (`parse::JSONB_MAX_DEPTH`).
const MAX_DEPTH: usize = 1000;
const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
const NUMERIC_MAX_FRAC_DIGITS: i64 = 16_383;

struct P<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    depth: usize,
    problems: Problems,
    tokens: u64,
}

/// `JSON.parse(text)`: `None` where it throws.
pub fn json_parse(text: &str) -> Option<Doc> {
    let mut p = P { b: text.as_bytes(), s: text, i: 0, depth: 0, problems: Problems::default(), tokens: 0 };
    p.ws();
    let mut root_members = Vec::new();
    let value = p.value(Some(&mut root_members))?;
    p.ws();
    if p.i != p.b.len() {
        return None;
    }
    if !matches!(value, R::Obj(_)) {
        root_members.clear();
    }
    Some(Doc { value, problems: p.problems, tokens: p.tokens, root_members })
}

impl P<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn value(&mut self, members: Option<&mut Vec<(Vec<u16>, std::ops::Range<usize>)>>) -> Option<R> {
        self.tokens += 1;
        match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    self.problems.too_deep = true;
                }
                let mut out = Vec::new();
                let mut spans = members;
                self.ws();
                if self.eat(b'}').is_none() {
                    loop {
                        self.ws();
                        if self.b.get(self.i) != Some(&b'"') {
                            return None;
                        }
                        self.tokens += 1;
                        let key = self.string()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                        let start = self.i;
                        let v = self.value(None)?;
                        if let Some(spans) = spans.as_deref_mut() {
                            spans.push((key.clone(), start..self.i));
                        }
                        out.push((key, v));
                        self.ws();
                        if self.eat(b',').is_some() {
                            continue;
                        }
                        self.eat(b'}')?;
                        break;
                    }
                }
                self.depth -= 1;
                Some(R::Obj(out))
            }
            b'[' => {
                self.i += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    self.problems.too_deep = true;
                }
                let mut out = Vec::new();
                self.ws();
                if self.eat(b']').is_none() {
                    loop {
                        self.ws();
                        out.push(self.value(None)?);
                        self.ws();
                        if self.eat(b',').is_some() {
                            continue;
                        }
                        self.eat(b']')?;
                        break;
                    }
                }
                self.depth -= 1;
                Some(R::Arr(out))
            }
            b'"' => self.string().map(R::Str),
            b't' => self.word("true", R::Bool(true)),
            b'f' => self.word("false", R::Bool(false)),
            b'n' => self.word("null", R::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, w: &str, v: R) -> Option<R> {
        self.b[self.i..].starts_with(w.as_bytes()).then(|| {
            self.i += w.len();
            v
        })
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Option<R> {
        let start = self.i;
        let _ = self.eat(b'-');
        let int_start = self.i;
        let int = self.digits();
        if int == 0 || (int > 1 && self.b[int_start] == b'0') {
            return None;
        }
        let mut frac = 0;
        if self.eat(b'.').is_some() {
            frac = self.digits();
            if frac == 0 {
                return None;
            }
        }
        let mut exp: i64 = 0;
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            let negative = self.eat(b'-').is_some();
            if !negative {
                let _ = self.eat(b'+');
            }
            let es = self.i;
            if self.digits() == 0 {
                return None;
            }
            exp =
                self.s[es..self.i].bytes().fold(0i64, |a, d| a.saturating_mul(10).saturating_add(i64::from(d - b'0')));
            if negative {
                exp = -exp;
            }
        }
        let (int, frac) = (int as i64, frac as i64);
        if int.saturating_add(exp) > NUMERIC_MAX_INT_DIGITS || frac.saturating_sub(exp) > NUMERIC_MAX_FRAC_DIGITS {
            self.problems.number_out_of_range = true;
        }
        let text = &self.s[start..self.i];
        Some(R::Num(text.parse().ok()?, text.to_owned()))
    }

    fn hex4(&self, at: usize) -> Option<u16> {
        let h = self.b.get(at..at + 4)?;
        let mut v = 0u16;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16)? as u16;
        }
        Some(v)
    }

    /// A string at the opening quote, as UTF-16 code units.
    fn string(&mut self) -> Option<Vec<u16>> {
        self.i += 1;
        let mut out: Vec<u16> = Vec::new();
        loop {
            let c = self.s[self.i..].chars().next()?;
            match c {
                '"' => {
                    self.i += 1;
                    break;
                }
                '\\' => {
                    let e = *self.b.get(self.i + 1)?;
                    self.i += 2;
                    out.push(match e {
                        b'"' => 0x22,
                        b'\\' => 0x5C,
                        b'/' => 0x2F,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => 10,
                        b'r' => 13,
                        b't' => 9,
                        b'u' => {
                            let u = self.hex4(self.i)?;
                            self.i += 4;
                            if u == 0 {
                                self.problems.nul = true;
                            }
                            u
                        }
                        _ => return None,
                    });
                }
                c if (c as u32) < 0x20 => return None,
                c => {
                    let mut buf = [0u16; 2];
                    out.extend_from_slice(c.encode_utf16(&mut buf));
                    self.i += c.len_utf8();
                }
            }
        }
        if has_lone_surrogate(&out) {
            self.problems.lone_surrogate = true;
        }
        Some(out)
    }
}

pub fn has_lone_surrogate(units: &[u16]) -> bool {
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        if (0xD800..=0xDBFF).contains(&u) && units.get(i + 1).is_some_and(|l| (0xDC00..=0xDFFF).contains(l)) {
            i += 2;
        } else if (0xD800..=0xDFFF).contains(&u) {
            return true;
        } else {
            i += 1;
        }
    }
    false
}

/// ECMAScript's CanonicalNumericIndexString for array indices: "0" .. "4294967294".
fn array_index(key: &[u16]) -> Option<u64> {
    if key.is_empty() || key.len() > 10 || !key.iter().all(|u| (0x30..=0x39).contains(u)) {
        return None;
    }
    if key.len() > 1 && key[0] == 0x30 {
        return None;
    }
    let v = key.iter().fold(0u64, |a, u| a * 10 + u64::from(u - 0x30));
    (v <= 4_294_967_294).then_some(v)
}

/// The order of own property keys after the control plane's sort and re-insertion.
fn js_key_order(a: &[u16], b: &[u16]) -> Ordering {
    match (array_index(a), array_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        // Array.prototype.sort's default comparison: UTF-16 code units.
        (None, None) => a.cmp(b),
    }
}

/// `Number.prototype.toString()` (ECMA-262 Number::toString, radix 10); `JSON.stringify` writes
/// non-finite numbers as `null`.
pub fn js_number(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, closest to x.
    let s = format!("{:e}", x.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mut digits: String = mant.chars().filter(|c| *c != '.').collect();
    // Number::toString: of two equally close shortest spellings, the even one (V8 does so).
    if let Some(even) = even_tie(x.abs(), &digits, exp) {
        digits = even;
    }
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let e = n - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if e >= 0 { '+' } else { '-' });
        out.push_str(&e.abs().to_string());
    }
    out
}

/// The even spelling when `x` lies exactly halfway between `digits` (×10^exp, one digit before
/// the point) and a same-length neighbour that also reads back as `x`.
fn even_tie(x: f64, digits: &str, exp: &str) -> Option<String> {
    let last = digits.bytes().last()?.checked_sub(b'0')?;
    if last.is_multiple_of(2) {
        return None;
    }
    let spell = |d: &str| format!("{}.{}e{exp}", &d[..1], &d[1..]);
    // The exact value of x, as decimal digits (a double has at most 767 significant ones).
    let exact = format!("{x:.1100e}");
    let exact_digits: String = exact.split('e').next()?.chars().filter(|c| *c != '.').collect();
    for other in [last - 1, last + 1].into_iter().filter(|d| *d <= 9) {
        let neighbour = format!("{}{}", &digits[..digits.len() - 1], other);
        if spell(&neighbour).parse::<f64>().ok() != Some(x) {
            continue;
        }
        let midpoint = format!("{}{}5", &digits[..digits.len() - 1], last.min(other));
        let rest = exact_digits.strip_prefix(midpoint.as_str())?;
        if rest.bytes().all(|b| b == b'0') {
            return Some(neighbour);
        }
    }
    None
}

/// `JSON.stringify` of a string (well-formed: lone surrogates escaped).
fn js_quote(units: &[u16], out: &mut Vec<u16>) {
    let push = |out: &mut Vec<u16>, s: &str| out.extend(s.encode_utf16());
    out.push(0x22);
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        match u {
            0x22 => push(out, "\\\""),
            0x5C => push(out, "\\\\"),
            8 => push(out, "\\b"),
            12 => push(out, "\\f"),
            10 => push(out, "\\n"),
            13 => push(out, "\\r"),
            9 => push(out, "\\t"),
            u if u < 0x20 => push(out, &format!("\\u{u:04x}")),
            0xD800..=0xDBFF if units.get(i + 1).is_some_and(|l| (0xDC00..=0xDFFF).contains(l)) => {
                out.push(u);
                out.push(units[i + 1]);
                i += 1;
            }
            0xD800..=0xDFFF => push(out, &format!("\\u{u:04x}")),
            u => out.push(u),
        }
        i += 1;
    }
    out.push(0x22);
}

fn canonical_units(v: &R, out: &mut Vec<u16>) {
    match v {
        R::Null => out.extend("null".encode_utf16()),
        R::Bool(b) => out.extend(if *b { "true" } else { "false" }.encode_utf16()),
        R::Num(x, _) => out.extend(js_number(*x).encode_utf16()),
        R::Str(s) => js_quote(s, out),
        R::Arr(items) => {
            out.push(u16::from(b'['));
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(u16::from(b','));
                }
                canonical_units(item, out);
            }
            out.push(u16::from(b']'));
        }
        R::Obj(members) => {
            // JSON.parse: a repeated key keeps its first position and its last value.
            let mut kept: Vec<(&[u16], &R)> = Vec::new();
            // The control plane re-inserts keys with `sorted[k] = value[k]`: for "__proto__" that
            // sets the prototype, and the key is not in its text.
            let proto: Vec<u16> = "__proto__".encode_utf16().collect();
            for (k, val) in members.iter().filter(|(k, _)| *k != proto) {
                match kept.iter_mut().find(|(kk, _)| *kk == k.as_slice()) {
                    Some(slot) => slot.1 = val,
                    None => kept.push((k, val)),
                }
            }
            kept.sort_by(|a, b| js_key_order(a.0, b.0));
            out.push(u16::from(b'{'));
            for (i, (k, val)) in kept.iter().enumerate() {
                if i > 0 {
                    out.push(u16::from(b','));
                }
                js_quote(k, out);
                out.push(u16::from(b':'));
                canonical_units(val, out);
            }
            out.push(u16::from(b'}'));
        }
    }
}

/// The control plane's canonical text of a parsed value.
pub fn canonical(v: &R) -> String {
    let mut units = Vec::new();
    canonical_units(v, &mut units);
    // Lone surrogates were escaped, so the units are well formed.
    String::from_utf16_lossy(&units)
}

/// The reference value of a `JsValue` (numbers get their JavaScript text).
pub fn from_js(v: &JsValue) -> R {
    match v {
        JsValue::Null => R::Null,
        JsValue::Bool(b) => R::Bool(*b),
        JsValue::Number(x) => R::Num(*x, js_number(*x)),
        JsValue::String(s) => R::Str(s.encode_utf16().collect()),
        JsValue::Array(items) => R::Arr(items.iter().map(from_js).collect()),
        JsValue::Object(m) => R::Obj(m.iter().map(|(k, v)| (k.encode_utf16().collect(), from_js(v))).collect()),
    }
}

/// A reference value as a `JsValue` (`None` if a string holds a lone surrogate).
pub fn to_js(v: &R) -> Option<JsValue> {
    Some(match v {
        R::Null => JsValue::Null,
        R::Bool(b) => JsValue::Bool(*b),
        R::Num(x, _) => JsValue::Number(*x),
        R::Str(s) => JsValue::String(String::from_utf16(s).ok()?),
        R::Arr(items) => JsValue::Array(items.iter().map(to_js).collect::<Option<_>>()?),
        R::Obj(m) => JsValue::Object(
            m.iter().map(|(k, v)| Some((String::from_utf16(k).ok()?, to_js(v)?))).collect::<Option<_>>()?,
        ),
    })
}

/// `String.prototype.trim`'s white space (WhiteSpace and LineTerminator, ECMA-262 §12.2-12.3).
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(|c| {
        matches!(
            c,
            '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{feff}' | '\u{2028}' | '\u{2029}'
        ) || (c as u32 >= 0x80 && is_zs(c))
    })
}

/// Unicode category Zs.
fn is_zs(c: char) -> bool {
    matches!(c, '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// A number's exact decimal value: sign, significant digits (no leading or trailing zeros) and
/// the power of ten of the last digit; and `numeric`'s display scale for the text.
#[derive(Debug, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub digits: String,
    pub exp: i64,
    pub dscale: i64,
}

/// What `numeric_in` makes of a JSON number's text.
pub fn decimal_of_text(text: &str) -> Decimal {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let e = exp - frac.len() as i64;
    normalise(negative, &all, e, (frac.len() as i64 - exp).max(0))
}

fn normalise(negative: bool, digits: &str, mut exp: i64, dscale: i64) -> Decimal {
    let d = digits.trim_start_matches('0');
    let trimmed = d.trim_end_matches('0');
    exp += (d.len() - trimmed.len()) as i64;
    if trimmed.is_empty() {
        return Decimal { negative: false, digits: String::new(), exp: 0, dscale };
    }
    Decimal { negative, digits: trimmed.to_owned(), exp, dscale }
}

/// Decodes a `numeric` varlena (4-byte header) as PostgreSQL 15 lays it out, checking its
/// invariants: the short form exactly when it fits, groups below 10000, no leading or trailing
/// zero groups, zero positive with weight 0.
pub fn decimal_of_numeric(v: &[u8]) -> Result<Decimal, String> {
    let u16_at = |i: usize| v.get(i..i + 2).map(|b| u16::from_ne_bytes([b[0], b[1]])).ok_or("truncated numeric");
    let total = v.get(..4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) >> 2).ok_or("no header")? as usize;
    if total != v.len() {
        return Err(format!("numeric header says {total} bytes, has {}", v.len()));
    }
    let h = u16_at(4)?;
    let (negative, dscale, weight, first) = if h & 0xC000 == 0x8000 {
        let w = (h & 0x3F) as i16 | if h & 0x40 != 0 { !0x3F } else { 0 };
        (h & 0x2000 != 0, i64::from((h >> 7) & 0x3F), i64::from(w), 6)
    } else if h & 0xC000 == 0xC000 {
        return Err("special numeric".into());
    } else {
        let w = u16_at(6)? as i16;
        if dscale_fits_short(i64::from(h & 0x3FFF), i64::from(w)) {
            return Err("long form for a numeric the short form holds".into());
        }
        (h & 0x4000 != 0, i64::from(h & 0x3FFF), i64::from(w), 8)
    };
    if first == 6 && !dscale_fits_short(dscale, weight) {
        return Err("short form out of its range".into());
    }
    let groups: Vec<u16> = v[first..].chunks(2).map(|c| u16::from_ne_bytes([c[0], *c.get(1).unwrap_or(&0)])).collect();
    if !(v.len() - first).is_multiple_of(2) {
        return Err("odd digit bytes".into());
    }
    if groups.iter().any(|g| *g >= 10_000) {
        return Err("digit group over 9999".into());
    }
    if groups.first() == Some(&0) || groups.last() == Some(&0) {
        return Err("zero group not stripped".into());
    }
    if groups.is_empty() && (negative || weight != 0) {
        return Err("zero not positive with weight 0".into());
    }
    let digits: String = groups.iter().map(|g| format!("{g:04}")).collect();
    let exp = 4 * (weight - groups.len() as i64 + 1);
    Ok(normalise(negative, &digits, exp, dscale))
}

fn dscale_fits_short(dscale: i64, weight: i64) -> bool {
    dscale <= 63 && (-64..=63).contains(&weight)
}
