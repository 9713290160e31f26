//! R4: fuzzing of the line parser, the over-long line reducer, dialect detection, the `jsonb`
//! writer and canonical JSON, for a time budget per target (`CORTEX_FUZZ_SECONDS`: 2 s in a
//! plain `cargo test`, 10 s from scripts/fuzz.sh, the full setting 120 s).
//!
//! Stable Rust has no `cargo fuzz`; proptest's generators and shrinking drive a time-boxed loop
//! instead (fuzz_support/runner.rs). Inputs are hostile but structured (fuzz_support/gen.rs) and
//! mutations of the corpus in `crates/core/fuzz-corpus/`. The oracles are pure Rust, written from
//! the specifications rather than from the code under test (fuzz_support/reference.rs): a
//! recursive `JSON.parse`, `serde_json`, the control plane's canonical form, `numeric_in`'s
//! decimal value; and the core's own invariants (no panic, determinism, idempotence, the jsonb
//! layout). PostgreSQL's `jsonb_in` and Node's `JSON.parse` are compared on the same corpus by
//! the replay, pgrx-tests/tests/fuzz_replay.rs, which reads what this run saves.
//!
//! `cargo test -p cortex_buffer_core --test fuzz -- --nocapture` (one test per target).

mod fuzz_support;

use std::borrow::Cow;
use std::io::{self, Read};

use proptest::prelude::*;

use cortex_buffer_core::indexer::dialect::{detect, first_object, from_name, session_ordinal, Dialect};
use cortex_buffer_core::indexer::discovery::Layout;
use cortex_buffer_core::indexer::index_file::embedded_new_line;
use cortex_buffer_core::indexer::judge::{decode, judge, preview, Rules, Verdict, PREVIEW_CHARS};
use cortex_buffer_core::indexer::lines::{HoleSkip, LineReader, Piece, OVERSIZE_HEAD_BYTES};
use cortex_buffer_core::json::jsonb_format::Jsonb;
use cortex_buffer_core::json::jsonb_layout::{JB_CMASK, JB_FARRAY, JB_FOBJECT, JB_FSCALAR};
use cortex_buffer_core::json::jsonb_write::{numeric_bytes, to_jsonb_with, Scratch};
use cortex_buffer_core::json::node::JsonNode;
use cortex_buffer_core::json::parse::{js_trim, parse, JsonbProblem, Kind};
use cortex_buffer_core::json::reduce::{reduce, Limits, Reducer, Unreduced};
use cortex_buffer_core::json::{canonical_json, write_canonical, JsValue};
use fuzz_support::reference::{self as rf, R};
use fuzz_support::{gen, runner};

/// Runs a target on a thread with a large stack (the references recurse per nesting level).
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    let t = std::thread::Builder::new().stack_size(512 << 20).spawn(f).unwrap_or_else(|e| panic!("spawn: {e}"));
    if let Err(p) = t.join() {
        std::panic::resume_unwind(p);
    }
}

fn kind_of(r: &R) -> Kind {
    match r {
        R::Null => Kind::Null,
        R::Bool(_) => Kind::Bool,
        R::Num(..) => Kind::Number,
        R::Str(_) => Kind::String,
        R::Arr(_) => Kind::Array,
        R::Obj(_) => Kind::Object,
    }
}

fn units(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

/// Keys whose lookup is checked: slots of the parser, streamed lookups, escaped spellings.
const LOOKUPS: &[&str] =
    &["type", "timestamp", "jobId", "job_id", "message", "uuid", "data", "parentUuid", "a", "0", "", "é", "__type__"];

// ---------------------------------------------------------------------------------------------
// parser: the line judge and JSON.parse-compatible parser.

fn check_parser(bytes: &[u8]) -> Result<(), String> {
    let text = decode(bytes);
    if *text != *String::from_utf8_lossy(bytes) {
        return Err("decode differs from lossy UTF-8".into());
    }
    let t = js_trim(&text);
    if t != rf::js_trim(&text) {
        return Err(format!("js_trim differs from String.prototype.trim: {t:?}"));
    }
    let (a, b) = (parse(t), parse(t));
    if a != b {
        return Err("parse is not deterministic".into());
    }
    let reference = rf::json_parse(t);
    match (&a, &reference) {
        (Err(_), None) => {}
        (Ok(_), None) => return Err("the core accepts what JSON.parse refuses".into()),
        (Err(e), Some(_)) => return Err(format!("the core refuses what JSON.parse accepts: {e:?}")),
        (Ok(p), Some(doc)) => {
            if p.root.kind != kind_of(&doc.value) {
                return Err(format!("root kind {:?}, JSON.parse {:?}", p.root.kind, kind_of(&doc.value)));
            }
            if p.root.text != t.trim_matches([' ', '\t', '\n', '\r']) {
                return Err("root text is not the trimmed line".into());
            }
            if p.tokens != doc.tokens {
                return Err(format!("tokens {} , reference {}", p.tokens, doc.tokens));
            }
            let noted = match p.jsonb_problem {
                None => !doc.problems.any(),
                Some(JsonbProblem::NulEscape) => doc.problems.nul,
                Some(JsonbProblem::LoneSurrogate) => doc.problems.lone_surrogate,
                Some(JsonbProblem::TooDeep) => doc.problems.too_deep,
                Some(JsonbProblem::NumberOutOfRange) => doc.problems.number_out_of_range,
            };
            if !noted {
                return Err(format!("jsonb problem {:?}, reference {:?}", p.jsonb_problem, doc.problems));
            }
            if p.root.kind == Kind::Object {
                for k in LOOKUPS {
                    let want =
                        doc.root_members.iter().rev().find(|(key, _)| *key == units(k)).map(|(_, s)| &t[s.clone()]);
                    let (slot, streamed) = (p.get(k).map(|v| v.text), p.root.get(k).map(|v| v.text));
                    if slot != want || streamed != want {
                        return Err(format!("member {k:?}: slot {slot:?}, streamed {streamed:?}, JSON.parse {want:?}"));
                    }
                }
                let members: Vec<(String, &str)> = p.root.members().map(|(k, v)| (k.into_owned(), v.text)).collect();
                let want: Vec<(String, &str)> =
                    doc.root_members.iter().map(|(k, s)| (String::from_utf16_lossy(k), &t[s.clone()])).collect();
                if members != want {
                    return Err(format!("members {members:?}, JSON.parse {want:?}"));
                }
                let type_span =
                    doc.root_members.iter().rev().find(|(k, _)| *k == units("type")).map(|(_, s)| s.clone());
                if let (Some(v), Some(span)) = (p.get("type"), type_span) {
                    if let Some(R::Str(u)) = rf::json_parse(&t[span]).map(|d| d.value) {
                        if v.as_str().map(Cow::into_owned) != Some(String::from_utf16_lossy(&u)) {
                            return Err("type as_str differs from JSON.parse".into());
                        }
                    }
                }
            }
        }
    }
    // serde_json is stricter (no lone surrogates, no infinite numbers, depth 128), never laxer.
    if serde_json::from_str::<serde_json::Value>(t).is_ok() && a.is_err() {
        return Err("the core refuses what serde_json accepts".into());
    }
    let is_object = matches!(&reference, Some(d) if matches!(d.value, R::Obj(_)));
    let verdict_ok = match judge(&text, Rules::Object) {
        Verdict::Blank => t.is_empty(),
        Verdict::Event(_) => is_object,
        Verdict::NotAnEvent(_) => reference.is_some() && !is_object,
        Verdict::Unparseable(_) => reference.is_none() && !t.is_empty(),
    };
    if !verdict_ok {
        return Err("judge (object rule) disagrees with JSON.parse".into());
    }
    let cortex_event = reference.as_ref().is_some_and(|d| {
        is_object
            && d.root_members.iter().any(|(k, _)| *k == units("type"))
            && d.root_members.iter().any(|(k, _)| *k == units("timestamp"))
    });
    if matches!(judge(&text, Rules::Cortex), Verdict::Event(_)) != cortex_event {
        return Err("judge (cortex rule) disagrees with `\"type\" in o && \"timestamp\" in o`".into());
    }
    let pv = preview(&text);
    if pv.chars().count() > PREVIEW_CHARS || pv.contains('\0') {
        return Err("preview too long or holds NUL".into());
    }
    Ok(())
}

#[test]
fn fuzz_parser() {
    on_big_stack(|| {
        runner::fuzz("parser", gen::line(), &|b: &Vec<u8>| Some(b.clone()), &|b: &Vec<u8>| check_parser(b)).finish();
    });
}

// ---------------------------------------------------------------------------------------------
// jsonb: the binary writer against the reference value and numeric_in's decimal value.

fn compare_tree(j: Jsonb<'_>, r: &R, path: &str) -> Result<(), String> {
    match (j, r) {
        (Jsonb::Null, R::Null) => Ok(()),
        (Jsonb::Bool(a), R::Bool(b)) if a == *b => Ok(()),
        (Jsonb::String(s), R::Str(u)) => match std::str::from_utf8(s) {
            Ok(s) if units(s) == *u => Ok(()),
            _ => Err(format!(
                "{path}: string {:?}, JSON.parse {:?}",
                String::from_utf8_lossy(s),
                String::from_utf16_lossy(u)
            )),
        },
        (Jsonb::Numeric(n), R::Num(_, text)) => {
            let got = rf::decimal_of_numeric(n).map_err(|e| format!("{path}: numeric for {text}: {e}"))?;
            let want = rf::decimal_of_text(text);
            if got == want {
                Ok(())
            } else {
                Err(format!("{path}: numeric {got:?}, numeric_in of {text} is {want:?}"))
            }
        }
        (Jsonb::Container(c), R::Arr(items)) if c.is_array() => {
            let mut children = Vec::new();
            j.children(&mut children).map_err(|e| format!("{path}: {e:?}"))?;
            if children.len() != items.len() {
                return Err(format!("{path}: {} items, JSON.parse {}", children.len(), items.len()));
            }
            for (i, ((_, c), r)) in children.into_iter().zip(items).enumerate() {
                compare_tree(c, r, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Jsonb::Container(c), R::Obj(members)) if c.is_object() => {
            let mut children = Vec::new();
            j.children(&mut children).map_err(|e| format!("{path}: {e:?}"))?;
            // JSON.parse keeps the last value of a repeated key.
            let mut want: Vec<(String, &R)> = Vec::new();
            for (k, v) in members {
                let k = String::from_utf16(k).map_err(|_| format!("{path}: key with a lone surrogate stored"))?;
                match want.iter_mut().find(|(kk, _)| *kk == k) {
                    Some(slot) => slot.1 = v,
                    None => want.push((k, v)),
                }
            }
            // jsonb's order: by length, then bytes.
            want.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
            let keys: Vec<&str> = children.iter().map(|(k, _)| k.unwrap_or("\u{0}<none>")).collect();
            let want_keys: Vec<&str> = want.iter().map(|(k, _)| k.as_str()).collect();
            if keys != want_keys {
                return Err(format!("{path}: keys {keys:?}, expected {want_keys:?}"));
            }
            for ((k, c), (_, r)) in children.into_iter().zip(want) {
                compare_tree(c, r, &format!("{path}.{}", k.unwrap_or("")))?;
            }
            Ok(())
        }
        _ => Err(format!("{path}: jsonb {j:?} is not what JSON.parse built ({:?})", kind_of(r))),
    }
}

fn check_jsonb(bytes: &[u8]) -> Result<(), String> {
    let text = decode(bytes);
    let t = js_trim(&text);
    let Ok(p) = parse(t) else { return Ok(()) };
    let mut scratch = Scratch::default();
    match p.jsonb_problem {
        // Not stored; converting anyway must still not panic (numbers out of range are skipped:
        // their digits are not bounded).
        Some(JsonbProblem::NumberOutOfRange) => return Ok(()),
        Some(_) => {
            let _ = to_jsonb_with(t, p.tokens, &mut Vec::new(), &mut scratch);
            return Ok(());
        }
        None => {}
    }
    let Some(doc) = rf::json_parse(t) else { return Ok(()) };
    let mut out = Vec::new();
    to_jsonb_with(t, p.tokens, &mut out, &mut scratch).map_err(|e| format!("valid line refused: {e:?}"))?;
    let header = out.get(..4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize >> 2);
    if header != Some(out.len()) {
        return Err(format!("varlena header {header:?}, {} bytes", out.len()));
    }
    // The same again with the scratch reused, unknown token count and a 4-byte prefix in `out`.
    let mut again = vec![1, 2, 3, 4];
    to_jsonb_with(t, 0, &mut again, &mut scratch).map_err(|e| format!("second conversion: {e:?}"))?;
    if again[..4] != [1, 2, 3, 4] || again[4..] != out[..] {
        return Err("a second conversion (reused scratch) wrote other bytes".into());
    }
    let root_header = out.get(4..8).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
    let flags_ok = match &doc.value {
        R::Arr(items) => root_header & !JB_CMASK == JB_FARRAY && (root_header & JB_CMASK) as usize == items.len(),
        R::Obj(_) => root_header & !JB_CMASK == JB_FOBJECT,
        _ => root_header == JB_FARRAY | JB_FSCALAR | 1,
    };
    if !flags_ok {
        return Err(format!("root container header {root_header:#x}"));
    }
    let root = Jsonb::root(&out[4..]).map_err(|e| format!("reader refuses the bytes: {e:?}"))?;
    compare_tree(root, &doc.value, "$")?;
    let mut canon = String::new();
    write_canonical(root, &mut canon).map_err(|e| format!("canonical of the jsonb: {e:?}"))?;
    let want = rf::canonical(&doc.value);
    if canon != want {
        return Err(format!("canonical of the jsonb {canon:?}, of JSON.parse {want:?}"));
    }
    Ok(())
}

/// Numbers on their own: `numeric_bytes` against `numeric_in`'s decimal value and layout.
fn check_numeric(text: &str) -> Result<(), String> {
    let Ok(p) = parse(text) else { return Ok(()) };
    if p.root.kind != Kind::Number || p.jsonb_problem.is_some() {
        return Ok(());
    }
    let mut out = Vec::new();
    numeric_bytes(text, &mut out);
    let got = rf::decimal_of_numeric(&out)?;
    let want = rf::decimal_of_text(text);
    if got != want {
        return Err(format!("numeric {got:?}, numeric_in {want:?}"));
    }
    Ok(())
}

#[test]
fn fuzz_jsonb() {
    on_big_stack(|| {
        let numbers: BoxedStrategy<Vec<u8>> = gen::number().prop_map(String::into_bytes).boxed();
        let inputs = prop_oneof![4 => gen::line(), 1 => numbers].boxed();
        runner::fuzz("jsonb", inputs, &|b: &Vec<u8>| Some(b.clone()), &|b: &Vec<u8>| {
            check_jsonb(b)?;
            match std::str::from_utf8(b) {
                Ok(s) => check_numeric(s.trim()),
                Err(_) => Ok(()),
            }
        })
        .finish();
    });
}

// ---------------------------------------------------------------------------------------------
// canonical: the control plane's checkpoint serialisation.

fn check_canonical(v: &JsValue) -> Result<(), String> {
    let c = canonical_json(v);
    let want = rf::canonical(&rf::from_js(v));
    if c != want {
        return Err(format!("canonical {c:?}, reference {want:?}"));
    }
    let doc = rf::json_parse(&c).ok_or_else(|| format!("canonical text is not JSON: {c:?}"))?;
    let v2 = rf::to_js(&doc.value).ok_or("canonical text holds a lone surrogate")?;
    let c2 = canonical_json(&v2);
    if c2 != c {
        return Err(format!("not idempotent: {c:?} then {c2:?}"));
    }
    let p = parse(&c).map_err(|e| format!("the core's parser refuses canonical text: {e:?}"))?;
    if p.jsonb_problem.is_none() {
        let mut out = Vec::new();
        to_jsonb_with(&c, p.tokens, &mut out, &mut Scratch::default()).map_err(|e| format!("{e:?}"))?;
        let root = Jsonb::root(&out[4..]).map_err(|e| format!("{e:?}"))?;
        let mut via = String::new();
        write_canonical(root, &mut via).map_err(|e| format!("{e:?}"))?;
        if via != c {
            return Err(format!("canonical through jsonb {via:?}, direct {c:?}"));
        }
    }
    Ok(())
}

#[test]
fn fuzz_canonical() {
    on_big_stack(|| {
        runner::fuzz(
            "canonical",
            gen::js_value(),
            &|v: &JsValue| Some(canonical_json(v).into_bytes()),
            &check_canonical,
        )
        .finish();
    });
}

// ---------------------------------------------------------------------------------------------
// dialect: detection from a file's first object and name, and the line reader under it.

/// Returns at most `chunk` bytes per read, to exercise the reader's refills.
struct Trickle<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl HoleSkip for Trickle<'_> {}

impl Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.data.len().min(self.chunk).min(out.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

type DialectInput = (Vec<u8>, String, f64, usize, usize);

fn reference_first_object(file: &[u8], whole: bool) -> Option<Vec<u8>> {
    let mut pieces: Vec<&[u8]> = file.split(|b| *b == b'\n').collect();
    let tail = pieces.pop().unwrap_or(&[]);
    if whole && !tail.is_empty() {
        pieces.push(tail);
    }
    pieces
        .into_iter()
        .find(|l| {
            rf::json_parse(rf::js_trim(&String::from_utf8_lossy(l))).is_some_and(|d| matches!(d.value, R::Obj(_)))
        })
        .map(|l| [l, b"\n"].concat())
}

fn check_dialect((file, name, cut, max_line, chunk): &DialectInput) -> Result<(), String> {
    for whole in [false, true] {
        let got = first_object(file, whole);
        let want = reference_first_object(file, whole).and_then(|l| first_object(&l, false));
        if got != want {
            return Err(format!("first_object(whole: {whole}) {got:?}, the first object line gives {want:?}"));
        }
        for layout in [Layout::DirectoryFile, Layout::Subagent] {
            if let Some(d) = detect(name, layout, got.as_ref()) {
                if Dialect::from_label(d.label()) != Some(d) {
                    return Err(format!("label {} does not name {d:?}", d.label()));
                }
            }
        }
    }
    // Reading more of the file never changes an object already found.
    let at = ((file.len() as f64) * cut) as usize;
    if let Some(early) = first_object(&file[..at.min(file.len())], false) {
        if first_object(file, false).as_ref() != Some(&early) {
            return Err(format!("first object changed when the prefix grew past byte {at}"));
        }
    }
    if from_name(name, Layout::Subagent) != Some(Dialect::ClaudeCode) {
        return Err("a subagent file is not claude-code by name".into());
    }
    let ordinal = session_ordinal(name);
    if let Some(n) = name.strip_prefix("session-").and_then(|s| s.strip_suffix(".jsonl")) {
        let want =
            (!n.is_empty() && n.len() <= 18 && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.parse().ok()).flatten();
        if ordinal != want {
            return Err(format!("session_ordinal({name:?}) {ordinal:?}, expected {want:?}"));
        }
    }
    // The line reader: pieces tile the bytes, lines are at most `max_line`, only the last piece
    // may be unterminated.
    let base = 7u64;
    let limits = Limits::for_line_memory(64 << 20);
    let mut reader = LineReader::new(Trickle { data: file, chunk: *chunk }, base, *max_line, limits);
    let mut pos = 0usize;
    let mut unterminated = false;
    while let Some(piece) = reader.next_piece().map_err(|e| e.to_string())? {
        if unterminated {
            return Err("a piece after an unterminated one".into());
        }
        if piece.offset() != base + pos as u64 {
            return Err(format!("piece at {}, expected {}", piece.offset(), base + pos as u64));
        }
        let span = piece.span() as usize;
        let line = file.get(pos..pos + span).ok_or("piece past the end")?;
        let terminated = line.last() == Some(&b'\n');
        if piece.terminated() != terminated {
            return Err(format!("terminated {} at {pos}", piece.terminated()));
        }
        let content = &line[..span - usize::from(terminated)];
        match &piece {
            Piece::Line { bytes, .. } => {
                if *bytes != content || content.len() > *max_line {
                    return Err(format!("line at {pos} is {bytes:?}, file has {content:?}"));
                }
                let text = decode(bytes);
                if let Some(at) = embedded_new_line(&text, Rules::Cortex) {
                    if !matches!(judge(&text[at..], Rules::Cortex), Verdict::Event(_)) {
                        return Err(format!("embedded line at {at} is not an event"));
                    }
                }
            }
            Piece::Oversize { len, head, reduced, .. } => {
                if *len as usize != content.len() || content.len() <= *max_line {
                    return Err(format!("oversize piece of {len} at {pos}, line is {}", content.len()));
                }
                if head.is_empty() || head.len() > OVERSIZE_HEAD_BYTES || !content.starts_with(head) {
                    return Err("oversize head is not the line's start".into());
                }
                // Reduced as it streamed past, in the reader's pieces: as the whole line is.
                if *reduced != reduce(content, limits).ok() {
                    return Err(format!("oversize reduction {reduced:?} differs from the whole line's"));
                }
            }
        }
        unterminated = !terminated;
        pos += span;
    }
    if pos != file.len() {
        return Err(format!("pieces cover {pos} of {} bytes", file.len()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// reducer: an over-long line's streaming validation and summary, against JSON.parse.

type ReducerInput = (Vec<u8>, usize, bool);

fn check_reducer((bytes, chunk, tight): &ReducerInput) -> Result<(), String> {
    let limits = if *tight { Limits::new(8, 4, 1024) } else { Limits::for_line_memory(64 << 20) };
    let whole = reduce(bytes, limits);
    let mut r = Reducer::new(limits);
    for piece in bytes.chunks((*chunk).max(1)) {
        r.feed(piece);
        if r.held_bytes() > limits.max_memory {
            return Err(format!("holds {} bytes, more than {}", r.held_bytes(), limits.max_memory));
        }
    }
    if r.finish() != whole {
        return Err("the reduction depends on how the line is cut into pieces".into());
    }
    // Saved as bytes and read back after every piece (push ingestion's pieces, one call each).
    let mut saved = Reducer::new(limits);
    for piece in bytes.chunks((*chunk).max(1)) {
        saved.feed(piece);
        let state = saved.to_bytes();
        saved = Reducer::from_bytes(&state).ok_or("a saved state does not read back")?;
        if saved.to_bytes() != state {
            return Err("a state read back writes other bytes".into());
        }
    }
    if saved.finish() != whole {
        return Err("the reduction depends on the reducer being saved between pieces".into());
    }
    let text = String::from_utf8_lossy(bytes);
    let reference = rf::json_parse(rf::js_trim(&text));
    match (&reference, &whole) {
        (None, Err(Unreduced::Invalid { .. } | Unreduced::TooLarge)) | (Some(_), Err(Unreduced::TooLarge)) => {}
        (None, Ok(r)) => return Err(format!("reduces what JSON.parse refuses, to {:?}", r.text)),
        (Some(_), Err(e)) => return Err(format!("refuses what JSON.parse accepts: {e:?}")),
        (None, Err(e)) => return Err(format!("refused as {e:?}")),
        (Some(doc), Ok(r)) => {
            let Some(reduced) = rf::json_parse(&r.text) else {
                return Err(format!("the reduced text does not parse: {:?}", r.text));
            };
            if kind_of(&reduced.value) != kind_of(&doc.value) {
                return Err("the reduced root is of another kind".into());
            }
            if !r.truncated() && rf::canonical(&reduced.value) != rf::canonical(&doc.value) {
                return Err(format!("nothing was cut, yet the reduced text {:?} says something else", r.text));
            }
            if r.lossy != std::str::from_utf8(bytes).is_err() {
                return Err("lossy flag".into());
            }
        }
    }
    Ok(())
}

#[test]
fn fuzz_reducer() {
    on_big_stack(|| {
        let inputs = (gen::line(), 1usize..64, any::<bool>()).boxed();
        runner::fuzz("reducer", inputs, &|i: &ReducerInput| Some(i.0.clone()), &check_reducer).finish();
    });
}

#[test]
fn fuzz_dialect() {
    on_big_stack(|| {
        let inputs = (gen::file(), gen::file_name(), 0.0f64..=1.0, 1usize..120, 1usize..40).boxed();
        runner::fuzz("dialect", inputs, &|i: &DialectInput| Some(i.0.clone()), &check_dialect).finish();
    });
}

/// The references agree with the core on known cases (so a finding is the core's, not theirs).
#[test]
fn references_hold_on_known_cases() {
    assert_eq!(rf::js_number(1e21), "1e+21");
    assert_eq!(rf::js_number(1e-7), "1e-7");
    assert_eq!(rf::js_number(123456789.0), "123456789");
    assert_eq!(rf::js_number(0.000001), "0.000001");
    assert_eq!(rf::js_number(-1.5e-9), "-1.5e-9");
    assert_eq!(rf::js_number(5e-324), "5e-324");
    let doc = rf::json_parse(r#"{"b":1,"10":2,"9":3,"a":[1e400,"\ud800"],"b":4}"#).map(|d| rf::canonical(&d.value));
    assert_eq!(doc.as_deref(), Some(r#"{"9":3,"10":2,"a":[null,"\ud800"],"b":4}"#));
    assert!(rf::json_parse("01").is_none() && rf::json_parse("[1,]").is_none() && rf::json_parse("\"\t\"").is_none());
    assert_eq!(rf::decimal_of_text("-0.00").dscale, 2);
    assert_eq!(rf::decimal_of_text("1.50e1"), rf::Decimal { negative: false, digits: "15".into(), exp: 0, dscale: 1 });
    for t in ["0", "-0.00", "1e400", "12345.678", "1e-70", "100", "0.0001"] {
        let mut out = Vec::new();
        numeric_bytes(t, &mut out);
        assert_eq!(rf::decimal_of_numeric(&out), Ok(rf::decimal_of_text(t)), "{t}");
    }
    assert_eq!(check_parser(b"\xef\xbb\xbf{\"type\":1,\"timestamp\":2}\xe2\x80\xa8"), Ok(()));
    assert_eq!(check_jsonb(br#"{"b":[1,2.50,{"":null}],"a":"\u00e9","a":-0}"#), Ok(()));
    assert_eq!(check_canonical(&JsValue::object([("b", JsValue::Number(-0.0)), ("1", JsValue::Null)])), Ok(()));
}
