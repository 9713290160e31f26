//! Generators of hostile but structured input: JSON documents with every awkward corner (deep
//! nesting, huge and odd numbers, escapes, lone surrogates, duplicate and array-index keys,
//! JavaScript-only white space), mutations of them and of the corpus seeds (truncation, `}{`
//! splices, invalid UTF-8, NUL, stray bytes), and raw bytes.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::select;

use cortex_buffer_core::json::JsValue;

/// White space `String.prototype.trim` removes (so the indexer strips it around a line).
pub const JS_SPACE: &[&str] = &[
    " ", "\t", "\r", "\u{b}", "\u{c}", "\u{a0}", "\u{1680}", "\u{2000}", "\u{2007}", "\u{200a}", "\u{2028}",
    "\u{2029}", "\u{202f}", "\u{205f}", "\u{3000}", "\u{feff}",
];
/// Look-alikes that are not JavaScript white space.
pub const NOT_SPACE: &[&str] = &["\u{85}", "\u{180e}", "\u{200b}", "\u{1c}", "\u{0}", "\u{7f}", "\u{fffe}"];

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "0.0",
    "-0.0",
    "1",
    "-1",
    "0.1",
    "1e400",
    "-1e400",
    "1E-400",
    "1e-400",
    "4.9e-324",
    "5e-324",
    "2e-324",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "9007199254740993",
    "9007199254740992.5",
    "123456789012345678901",
    "1e21",
    "1e20",
    "1e-6",
    "1e-7",
    "0.000001",
    "1.5e-7",
    "100",
    "1E+5",
    "1e+0",
    "1e-0",
    "-0e-0",
    "0e5",
    "0e-5",
    "0.10000000000000001",
    "2.5e-300",
    "-12345.678",
    "1.50",
    "0.0001",
    "1e63",
    "1e252",
    "1e253",
    "1e-383",
    "1e131071",
    "1e131072",
    "9e131071",
    "1e-16383",
    "1e-16384",
    "0.5e-16383",
    "1.5e-16382",
    "0e131072",
    "0e-16384",
    "-1e-16383",
    "1e999999999999999999999",
    "0e999999999999999999999",
    "1e-999999999999999999999",
    "0.00000000000000000000001",
    "18446744073709551616",
    "-9223372036854775809",
    "1.0000000000000002",
    "0.30000000000000004",
    "5e-1",
    "25e-1",
];
const ESCAPES: &[&str] = &[
    "\\\"",
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0000",
    "\\u001f",
    "\\u0020",
    "\\u00e9",
    "\\u00E9",
    "\\ud800",
    "\\udc00",
    "\\udbff",
    "\\udfff",
    "\\ud83d\\ude00",
    "\\uD83D\\uDE00",
    "\\ud83d",
    "\\ude00",
    "\\ud800\\ud800",
    "\\udc00\\ud800",
    "\\uffff",
    "\\ufeff",
    "\\u2028",
    "\\u2029",
    "\\u0085",
    "\\ue000",
    "\\u007f",
];
const CHARS: &[&str] = &[
    "a",
    "Z",
    " ",
    "é",
    "ü",
    "\u{7f}",
    "\u{80}",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{fffd}",
    "\u{fffe}",
    "\u{ffff}",
    "\u{e000}",
    "\u{f8ff}",
    "\u{ff5e}",
    "😀",
    "\u{10000}",
    "\u{10ffff}",
    "𝄞",
    "中",
    "'",
    "`",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\u{200b}",
    "\u{3000}",
];
/// Keys that matter somewhere: the parser's member slots, dialect detection, array indices
/// (JavaScript orders them first), the prototype's own names, UTF-16 vs code-point order.
pub const KEYS: &[&str] = &[
    "a",
    "b",
    "aa",
    "ab",
    "",
    " ",
    "type",
    "timestamp",
    "jobId",
    "job_id",
    "session_id",
    "sessionId",
    "agent_id",
    "seq",
    "message",
    "data",
    "uuid",
    "requestId",
    "version",
    "__type__",
    "__seq__",
    "__ts__",
    "parentUuid",
    "leafUuid",
    "isSidechain",
    "0",
    "1",
    "2",
    "9",
    "10",
    "01",
    "-1",
    "1.5",
    "4294967294",
    "4294967295",
    "9007199254740993",
    "constructor",
    "toString",
    "hasOwnProperty",
    "é",
    "e\u{301}",
    "\u{e000}",
    "😀",
    "\u{ff5e}",
    "Z",
    "z",
    "A",
    "_",
];

pub fn json_ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just(""), 2 => Just(" "), 1 => Just("\t"), 1 => Just("\n"), 1 => Just("\r"), 1 => Just("  \r\n\t")]
}

pub fn number() -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(NUMBERS).prop_map(str::to_owned),
        4 => (
            any::<bool>(),
            prop_oneof![Just("0".to_owned()), "[1-9][0-9]{0,24}", "[1-9][0-9]{25,400}"],
            prop::option::of("[0-9]{1,30}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{1,6}")),
        )
            .prop_map(|(neg, int, frac, exp)| {
                let mut s = String::new();
                if neg {
                    s.push('-');
                }
                s.push_str(&int);
                if let Some(f) = frac {
                    s.push('.');
                    s.push_str(&f);
                }
                if let Some((e, sign, d)) = exp {
                    s.push_str(&e);
                    s.push_str(&sign);
                    s.push_str(&d);
                }
                s
            }),
    ]
    .boxed()
}

/// A string's contents as written in JSON (escapes unresolved).
pub fn string_body() -> BoxedStrategy<String> {
    prop::collection::vec(
        prop_oneof![
            4 => "[a-zA-Z0-9 _.-]{1,8}",
            2 => select(ESCAPES).prop_map(str::to_owned),
            2 => select(CHARS).prop_map(str::to_owned),
            1 => any::<char>().prop_filter("valid in a JSON string", |c| *c >= ' ' && *c != '"' && *c != '\\')
                .prop_map(String::from),
            1 => "\\\\u[0-9a-fA-F]{4}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
    .boxed()
}

pub fn key() -> BoxedStrategy<String> {
    prop_oneof![3 => select(KEYS).prop_map(str::to_owned), 1 => select(ESCAPES).prop_map(str::to_owned), 2 => string_body()]
        .boxed()
}

pub fn scalar() -> BoxedStrategy<String> {
    prop_oneof![
        3 => number(),
        4 => string_body().prop_map(|s| format!("\"{s}\"")),
        1 => select(&["true", "false", "null"][..]).prop_map(str::to_owned),
    ]
    .boxed()
}

/// A valid JSON document (as `JSON.parse` sees validity), nested up to a few levels.
pub fn document() -> BoxedStrategy<String> {
    scalar()
        .prop_recursive(6, 80, 8, |inner| {
            prop_oneof![
                (prop::collection::vec((json_ws(), inner.clone(), json_ws()), 0..8)).prop_map(|items| {
                    let body: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                    format!("[{}]", body.join(","))
                }),
                (prop::collection::vec((key(), json_ws(), inner), 0..8)).prop_map(|members| {
                    let body: Vec<String> =
                        members.into_iter().map(|(k, ws, v)| format!("\"{k}\"{ws}:{ws}{v}")).collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
        .boxed()
}

/// Nesting around the depth `jsonb` is trusted with (1000) and beyond.
pub fn deep() -> BoxedStrategy<String> {
    (prop_oneof![990usize..1010, 0usize..2000, 2000usize..4000], any::<u64>(), scalar())
        .prop_map(|(depth, pattern, core)| {
            let mut open = String::new();
            let mut close = Vec::new();
            for level in 0..depth {
                if (pattern >> (level % 64)) & 1 == 0 {
                    open.push('[');
                    close.push("]");
                } else {
                    open.push_str("{\"k\":");
                    close.push("}");
                }
            }
            close.reverse();
            format!("{open}{core}{}", close.concat())
        })
        .boxed()
}

/// An object line as the indexer's dialects write them (with hostile values inside).
pub fn event_line() -> BoxedStrategy<String> {
    (select(&["type", "jobId", "job_id", "__type__", "parentUuid"][..]), string_body(), document())
        .prop_map(|(k, t, d)| {
            format!("{{\"{k}\":\"{t}\",\"timestamp\":\"2026-02-23T14:30:22.123Z\",\"uuid\":\"u\",\"data\":{d}}}")
        })
        .boxed()
}

/// Bytes that are not UTF-8 (or are, awkwardly).
const BYTE_SOUP: &[&[u8]] = &[
    b"\xff",
    b"\xfe",
    b"\xc0\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf0\x9f\x98",
    b"\x80",
    b"\xbf",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\r",
    b"\n",
    b"\\",
    b"\"",
    b"}{",
    b"\\u",
    b"\\ud800",
];

#[derive(Debug, Clone)]
pub enum Mutation {
    /// Cut at a fraction of the length.
    Truncate(f64),
    Insert(f64, Vec<u8>),
    Delete(f64, usize),
    Replace(f64, u8),
    /// Duplicate a range (a `}{` splice when the whole document is repeated).
    Repeat(f64, f64),
    Wrap(&'static str, &'static str),
}

fn at(len: usize, f: f64) -> usize {
    ((len as f64) * f).floor().clamp(0.0, len as f64) as usize
}

pub fn apply(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        match m {
            Mutation::Truncate(f) => b.truncate(at(b.len(), *f)),
            Mutation::Insert(f, bytes) => {
                let i = at(b.len(), *f);
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Delete(f, n) => {
                let i = at(b.len(), *f);
                let j = (i + n).min(b.len());
                b.drain(i..j);
            }
            Mutation::Replace(f, byte) => {
                let i = at(b.len(), *f);
                if let Some(x) = b.get_mut(i) {
                    *x = *byte;
                }
            }
            Mutation::Repeat(f, g) => {
                let (i, j) = (at(b.len(), f.min(*g)), at(b.len(), f.max(*g)));
                let piece = b[i..j].to_vec();
                b.splice(j..j, piece);
            }
            Mutation::Wrap(pre, post) => {
                let mut out = pre.as_bytes().to_vec();
                out.extend_from_slice(&b);
                out.extend_from_slice(post.as_bytes());
                b = out;
            }
        }
    }
    b
}

pub fn mutation() -> BoxedStrategy<Mutation> {
    let frac = 0.0f64..=1.0;
    prop_oneof![
        2 => frac.clone().prop_map(Mutation::Truncate),
        3 => (frac.clone(), prop_oneof![
            3 => select(BYTE_SOUP).prop_map(<[u8]>::to_vec),
            2 => select(JS_SPACE).prop_map(|s| s.as_bytes().to_vec()),
            1 => select(NOT_SPACE).prop_map(|s| s.as_bytes().to_vec()),
            2 => prop::collection::vec(any::<u8>(), 1..4),
            2 => scalar().prop_map(String::into_bytes),
        ]).prop_map(|(f, b)| Mutation::Insert(f, b)),
        1 => (frac.clone(), 1usize..6).prop_map(|(f, n)| Mutation::Delete(f, n)),
        2 => (frac.clone(), any::<u8>()).prop_map(|(f, b)| Mutation::Replace(f, b)),
        1 => (frac.clone(), frac).prop_map(|(f, g)| Mutation::Repeat(f, g)),
        2 => (select(JS_SPACE), select(JS_SPACE)).prop_map(|(a, b)| Mutation::Wrap(a, b)),
        1 => (select(NOT_SPACE), select(JS_SPACE)).prop_map(|(a, b)| Mutation::Wrap(a, b)),
    ]
    .boxed()
}

/// The corpus seeds (crates/core/fuzz-corpus), loaded once.
pub fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(super::corpus::load_repository_corpus)
}

/// One line of input: mostly structured, some mutated, some raw.
pub fn line() -> BoxedStrategy<Vec<u8>> {
    let seeds = seeds().to_vec();
    let seed = if seeds.is_empty() { Just(b"{}".to_vec()).boxed() } else { select(seeds).boxed() };
    let spaced = |s: BoxedStrategy<String>| {
        (prop::collection::vec(select(JS_SPACE), 0..2), s, prop::collection::vec(select(JS_SPACE), 0..2))
            .prop_map(|(a, d, b)| format!("{}{d}{}", a.concat(), b.concat()).into_bytes())
    };
    prop_oneof![
        5 => document().prop_map(String::into_bytes),
        2 => spaced(document()),
        3 => event_line().prop_map(String::into_bytes),
        5 => (document().prop_map(String::into_bytes), prop::collection::vec(mutation(), 1..4))
            .prop_map(|(d, m)| apply(d, &m)),
        3 => (seed.clone(), prop::collection::vec(mutation(), 0..4)).prop_map(|(d, m)| apply(d, &m)),
        1 => seed,
        1 => deep().prop_map(String::into_bytes),
        1 => (document(), document()).prop_map(|(a, b)| format!("{a}{b}").into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => prop::collection::vec(select(&b"{}[]\":,0123456789.eE+-truefalsnl\\ \t/"[..]), 0..48),
    ]
    .boxed()
}

/// Several lines as a file prefix: for dialect detection and the line reader.
pub fn file() -> BoxedStrategy<Vec<u8>> {
    (prop::collection::vec(line(), 0..6), prop::collection::vec(0usize..3, 0..6), any::<bool>())
        .prop_map(|(lines, blanks, trailing)| {
            let mut out = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                out.extend(std::iter::repeat_n(b'\n', blanks.get(i).copied().unwrap_or(0)));
                out.extend_from_slice(l);
                if i + 1 < lines.len() || trailing {
                    out.push(b'\n');
                }
            }
            out
        })
        .boxed()
}

pub fn file_name() -> BoxedStrategy<String> {
    prop_oneof![
        "session-[0-9]{0,20}\\.jsonl",
        "session_[0-9]{8}T[0-9]{6}Z_[a-z0-9-]{0,8}\\.jsonl",
        "session_[0-9]{4}[0-9é]{4}T[0-9]{6}Z_p\\.jsonl",
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\.jsonl",
        "agent-[a-z0-9]{0,12}\\.jsonl",
        ".{0,24}",
        "session.{0,20}",
    ]
    .boxed()
}

/// A `JsValue` tree: every double (NaN, infinities, -0, subnormals), every character, repeated
/// and array-index keys.
pub fn js_value() -> BoxedStrategy<JsValue> {
    let number = prop_oneof![
        3 => any::<u64>().prop_map(f64::from_bits),
        2 => select(&[0.0, -0.0, 1.0, -1.0, 0.1, 1e21, 1e-7, 5e-324, f64::MAX, f64::MIN_POSITIVE, f64::INFINITY,
            f64::NEG_INFINITY, f64::NAN, 9007199254740993.0, 123456789.0, 1.5][..]),
        2 => any::<i32>().prop_map(f64::from),
    ];
    let text = prop_oneof![3 => any::<String>(), 2 => select(CHARS).prop_map(str::to_owned), 1 => select(KEYS).prop_map(str::to_owned)];
    let leaf = prop_oneof![
        1 => Just(JsValue::Null),
        1 => any::<bool>().prop_map(JsValue::Bool),
        3 => number.prop_map(JsValue::Number),
        3 => text.prop_map(JsValue::String),
    ];
    let keys = prop_oneof![3 => select(KEYS).prop_map(str::to_owned), 1 => any::<String>(), 1 => select(CHARS).prop_map(str::to_owned)];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(JsValue::Array),
            prop::collection::vec((keys.clone(), inner), 0..8).prop_map(JsValue::Object),
        ]
    })
    .boxed()
}
