//! What one indexed event tells recovery: tool calls started, results, checkpoint markers and
//! loads, by dialect (docs/design.md §JSONL dialects). Pure.
//!
//! | dialect | start | result | marker | loaded |
//! |---|---|---|---|---|
//! | cortex-spike | `TOOL_START` (`invocation_id`, `tool_name`, `input_hash`, `input_summary`) | `TOOL_RESULT` (`invocation_id`, `success`, `result_summary`) | `CHECKPOINT_WRITTEN` (`checkpoint_id`) | `CHECKPOINT_LOADED` (`checkpoint_id`, may be null) |
//! | cortex-plane | `TOOL_CALL` (`data.toolName`, `data.toolInput`; `data.toolCallId` if a writer adds one) | `TOOL_RESULT` (`data.toolName`, `data.output`, `data.isError`) | `CHECKPOINT` (`data.checkpointId`) | — |
//! | claude-code | every `tool_use` block of an `assistant` line | every `tool_result` block of a `user` line | — | — |

use crate::indexer::dialect::Dialect;
use crate::json::jsonb_format::{Jsonb, Malformed};
use crate::json::jsonb_text::{member, write_value};
use crate::json::parse::{parse, Kind, Value};
use crate::json::quote::write_js_string;

use std::borrow::Cow;

use crate::json::reduce::TRUNCATED_KEY;

use super::keys::{canonical_of, capped, stored_input_hash, NULL_INPUT_HASH};

/// Event types that mark a checkpoint written (the spike's and the shipped schema's spelling).
pub const MARKER_TYPES: [&str; 2] = ["CHECKPOINT_WRITTEN", "CHECKPOINT"];
/// The event that says which checkpoint a session resumed from.
pub const LOADED_TYPE: &str = "CHECKPOINT_LOADED";
/// Event types that start or finish a tool call in the cortex dialects.
pub const TOOL_TYPES: [&str; 3] = ["TOOL_START", "TOOL_CALL", "TOOL_RESULT"];

/// One indexed event, as the shell reads it from `cortex_buffer.event`.
#[derive(Debug, Clone, Default)]
pub struct Row<'a> {
    pub session: usize,
    pub byte_offset: i64,
    pub line_no: i64,
    pub event_type: Option<&'a str>,
    pub ts_us: Option<i64>,
    pub seq: Option<i64>,
    pub invocation_id: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    pub checkpoint_id: Option<&'a str>,
    pub step_index: Option<i32>,
    pub success: Option<bool>,
    pub request_id: Option<&'a str>,
    /// The line as JSON text (the stored payload); `None` when the index holds no payload.
    pub payload: Option<&'a str>,
}

/// A text capped to the plan's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub text: String,
    pub truncated: bool,
}

impl Capped {
    pub fn new(s: &str, max_bytes: usize) -> Capped {
        let (text, truncated) = capped(s, max_bytes);
        Capped { text, truncated }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The call's own id, when its dialect writes one.
    pub id: Option<String>,
    pub tool_name: Option<String>,
    /// SHA-256 of the input's canonical JSON (of `null` for a call without one); `None` when
    /// the line's input cannot be read (the index holds no payload for it, or only a reduction
    /// of an over-long line that cut the input: `keys::stored_input_hash`).
    pub input_hash: Option<String>,
    pub input: Option<Capped>,
    /// The idempotency key the pod wrote in the line, the key it sent with the call
    /// (`idempotency_key`, or `data.idempotencyKey` in the control plane's dialect): 64
    /// lower-case hex digits, else ignored. Recovery reports it as written instead of deriving
    /// one (docs/writing-sessions.md).
    pub written_key: Option<String>,
}

/// A written idempotency key: a SHA-256 in lower-case hex, as `call_idempotency_key` gives.
fn written_key(v: Option<Value<'_>>) -> Option<String> {
    let k = string(v)?;
    (k.len() == 64 && k.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some(k)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub id: Option<String>,
    pub tool_name: Option<String>,
    pub success: Option<bool>,
    pub result: Option<Capped>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// cortex-spike `CHECKPOINT_WRITTEN`.
    CheckpointWritten,
    /// cortex-plane `CHECKPOINT`.
    Checkpoint,
}

impl MarkerKind {
    pub fn label(self) -> &'static str {
        match self {
            MarkerKind::CheckpointWritten => "checkpoint_written",
            MarkerKind::Checkpoint => "checkpoint",
        }
    }

    pub fn of(event_type: &str) -> Option<MarkerKind> {
        match event_type {
            "CHECKPOINT_WRITTEN" => Some(MarkerKind::CheckpointWritten),
            "CHECKPOINT" => Some(MarkerKind::Checkpoint),
            _ => None,
        }
    }
}

/// What a line means to recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Facts {
    Starts(Vec<Start>),
    Finishes(Vec<Finish>),
    Marker { kind: MarkerKind, checkpoint_id: Option<String> },
    Loaded { checkpoint_id: Option<String> },
    Other,
}

fn string(v: Option<Value<'_>>) -> Option<String> {
    v.and_then(|v| v.as_str()).map(|s| s.into_owned())
}

/// What an over-long line's reduction left of a value it cut (`json::reduce`): the head of a
/// string (empty for a number or a container), or `None` when `v` is no such sentinel.
fn cut_head(v: Value<'_>) -> Option<String> {
    if v.kind != Kind::Object {
        return None;
    }
    let sentinel = v.get(TRUNCATED_KEY)?;
    Some(sentinel.get("head").and_then(|h| h.as_str()).map(Cow::into_owned).unwrap_or_default())
}

/// A value as text for a plan: strings as they read, anything else as canonical JSON; a value
/// an over-long line's reduction cut, as its head, marked truncated.
fn as_text(v: Value<'_>, max_bytes: usize) -> Capped {
    if let Some(head) = cut_head(v) {
        return Capped { truncated: true, ..Capped::new(&head, max_bytes) };
    }
    match v.kind {
        Kind::String => Capped::new(&v.as_str().unwrap_or_default(), max_bytes),
        _ if v.text.len() > max_bytes.saturating_mul(4).saturating_add(1024) => {
            // Canonicalising a huge value only to cut it: cap the written form instead.
            Capped { text: capped(v.text, max_bytes).0, truncated: true }
        }
        _ => Capped::new(&canonical_of(v), max_bytes),
    }
}

/// Claude Code `tool_result` content: a string, or blocks whose text parts are joined with
/// newlines (other blocks show as `[<type>]`).
fn tool_result_text(content: Value<'_>, max_bytes: usize) -> Capped {
    if content.kind != Kind::Array {
        return as_text(content, max_bytes);
    }
    let mut out = String::new();
    let mut cut = false;
    for block in content.items() {
        if !out.is_empty() {
            out.push('\n');
        }
        let [kind, text] = block.pick(["type", "text"]);
        let text = text.and_then(|t| {
            t.as_str().or_else(|| {
                let head = cut_head(t)?;
                cut = true;
                Some(Cow::Owned(head))
            })
        });
        match (string(kind).as_deref(), text) {
            (Some("text"), Some(t)) => out.push_str(&t),
            (Some(other), _) => {
                out.push('[');
                out.push_str(other);
                out.push(']');
            }
            _ => out.push_str("[?]"),
        }
        if out.len() > max_bytes {
            break;
        }
    }
    let capped = Capped::new(&out, max_bytes);
    Capped { truncated: capped.truncated || cut, ..capped }
}

/// The members of a stored line that [`facts`] reads, by dialect: those of the object under a
/// top-level key, or of the line itself.
fn fact_members(dialect: Dialect) -> (Option<&'static str>, &'static [&'static str]) {
    match dialect {
        Dialect::CortexSpike => {
            (None, &["idempotency_key", "input_hash", "input_summary", "input", "result_summary", "error_code"])
        }
        Dialect::CortexPlane => (Some("data"), &["idempotencyKey", "toolInput", "output"]),
        Dialect::ClaudeCode => (Some("message"), &["content"]),
        Dialect::WinkLog => (None, &[]),
    }
}

/// Appends `"key": value` to an object's text, after a separator when it has members already.
fn put_member(out: &mut String, members: &mut usize, key: &str, v: Jsonb<'_>) -> Result<(), Malformed> {
    if *members > 0 {
        out.push_str(", ");
    }
    *members += 1;
    write_js_string(key, out);
    out.push_str(": ");
    write_value(v, out)
}

/// What [`facts`] reads of a stored line (binary `jsonb`, as SPI hands it over), as the JSON
/// text `facts` takes: the dialect's members (under their key, `{"data": {…}}`), each printed as
/// `jsonb_out` prints it, so a value is the same text it would be in the whole line. Recovery
/// never has PostgreSQL print whole payloads only to read a few members of them.
pub fn facts_text(dialect: Dialect, payload: &[u8]) -> Result<String, Malformed> {
    let root = Jsonb::root(payload)?;
    let (under, keep) = fact_members(dialect);
    let mut out = String::with_capacity(payload.len().min(4096));
    out.push('{');
    let holder = match under {
        Some(key) => member(root, key)?,
        None => Some(root),
    };
    if let Some(obj) = holder {
        if let Some(key) = under {
            write_js_string(key, &mut out);
            out.push_str(": {");
        }
        let mut members = 0;
        let mut values = [None; 8];
        let values = values.get_mut(..keep.len()).ok_or(Malformed("too many members"))?;
        if let Jsonb::Container(c) = obj {
            c.pick_into(keep, values)?;
        }
        for (key, v) in keep.iter().zip(values.iter()) {
            if let Some(v) = *v {
                put_member(&mut out, &mut members, key, v)?;
            }
        }
        if under.is_some() {
            out.push('}');
        }
    }
    out.push('}');
    Ok(out)
}

/// What `row` (an event of a file of `dialect`) tells recovery. `max_bytes` caps results and
/// inputs.
pub fn facts(dialect: Dialect, row: &Row<'_>, max_bytes: usize) -> Facts {
    let parsed = row.payload.and_then(|p| parse(p).ok());
    let root = parsed.as_ref().map(|p| p.root);
    let event_type = row.event_type.unwrap_or("");
    let owned = |s: Option<&str>| s.map(str::to_owned);
    match dialect {
        Dialect::CortexSpike | Dialect::CortexPlane => {
            if let Some(kind) = MarkerKind::of(event_type) {
                return Facts::Marker { kind, checkpoint_id: owned(row.checkpoint_id) };
            }
            if event_type == LOADED_TYPE {
                return Facts::Loaded { checkpoint_id: owned(row.checkpoint_id) };
            }
            let data = if dialect == Dialect::CortexPlane { root.and_then(|r| r.get("data")) } else { root };
            match event_type {
                "TOOL_START" | "TOOL_CALL" => {
                    // Without the line (no payload), the input is unknown; a line without an
                    // input is a call without one (`null`, as the pod hashes `toolInput ?? null`).
                    let written = match dialect {
                        Dialect::CortexSpike => written_key(data.and_then(|d| d.get("idempotency_key"))),
                        _ => written_key(data.and_then(|d| d.get("idempotencyKey"))),
                    };
                    let (hash, input) = match dialect {
                        Dialect::CortexSpike => {
                            let [h, summary, input] =
                                data.map_or([None; 3], |d| d.pick(["input_hash", "input_summary", "input"]));
                            let input_text =
                                summary.filter(|s| s.kind == Kind::String).or(input).map(|v| as_text(v, max_bytes));
                            let hash = match (h, input) {
                                // Written by the agent, unless the reduction cut it.
                                (Some(h), _) if h.kind == Kind::String => string(Some(h)),
                                (Some(h), _) if cut_head(h).is_some() => None,
                                (_, Some(input)) => stored_input_hash(input),
                                (_, None) => root.map(|_| NULL_INPUT_HASH.to_owned()),
                            };
                            (hash, input_text)
                        }
                        _ => {
                            let input = data.and_then(|d| d.get("toolInput"));
                            let hash = match input {
                                Some(input) => stored_input_hash(input),
                                None => root.map(|_| NULL_INPUT_HASH.to_owned()),
                            };
                            (hash, input.map(|v| as_text(v, max_bytes)))
                        }
                    };
                    Facts::Starts(vec![Start {
                        id: owned(row.invocation_id),
                        tool_name: owned(row.tool_name),
                        input_hash: hash,
                        input,
                        written_key: written,
                    }])
                }
                "TOOL_RESULT" => {
                    let result = match dialect {
                        Dialect::CortexSpike => data.and_then(|d| {
                            let [summary, code] = d.pick(["result_summary", "error_code"]);
                            summary.or(code).map(|v| as_text(v, max_bytes))
                        }),
                        _ => data.and_then(|d| d.get("output")).map(|v| as_text(v, max_bytes)),
                    };
                    Facts::Finishes(vec![Finish {
                        id: owned(row.invocation_id),
                        tool_name: owned(row.tool_name),
                        success: row.success,
                        result,
                    }])
                }
                _ => Facts::Other,
            }
        }
        Dialect::ClaudeCode => {
            let Some(content) = root.and_then(|r| r.get("message")).and_then(|m| m.get("content")) else {
                return Facts::Other;
            };
            let mut starts = Vec::new();
            let mut finishes = Vec::new();
            for block in content.items() {
                let [kind, id, name, input, tool_use_id, is_error, result] =
                    block.pick(["type", "id", "name", "input", "tool_use_id", "is_error", "content"]);
                match string(kind).as_deref() {
                    Some("tool_use") if event_type == "assistant" => starts.push(Start {
                        id: string(id),
                        tool_name: string(name),
                        input_hash: input.map_or_else(|| Some(NULL_INPUT_HASH.to_owned()), stored_input_hash),
                        input: input.map(|v| as_text(v, max_bytes)),
                        written_key: None,
                    }),
                    Some("tool_result") if event_type == "user" => finishes.push(Finish {
                        id: string(tool_use_id),
                        tool_name: None,
                        success: Some(!is_error.and_then(|v| v.as_bool()).unwrap_or(false)),
                        result: result.map(|r| tool_result_text(r, max_bytes)),
                    }),
                    _ => {}
                }
            }
            if !starts.is_empty() {
                Facts::Starts(starts)
            } else if !finishes.is_empty() {
                Facts::Finishes(finishes)
            } else {
                Facts::Other
            }
        }
        Dialect::WinkLog => Facts::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `facts` over what recovery reads of a stored line (`facts_text` of its binary form) is
    /// `facts` over the whole line as PostgreSQL prints it, for every dialect and tool event
    /// type, on the fuzz corpus, real Claude Code lines, and lines with reduced (cut) values.
    #[test]
    fn facts_of_the_members_read_are_facts_of_the_whole_line() {
        use crate::json::jsonb_text::write_value;
        use crate::json::jsonb_write::to_jsonb;
        let corpus = concat!(
            include_str!("../../fuzz-corpus/seeds.jsonl"),
            "\n",
            include_str!("../../fuzz-corpus/claude-code-lines.jsonl")
        );
        let made = [
            r#"{"type":"TOOL_START","input_hash":"ab","input_summary":"q","input":{"b":[1.50,2e3],"a":"x\n"},"idempotency_key":"k","seq":1}"#,
            r#"{"type":"TOOL_START","input":{"cortex_buffer:truncated":{"bytes":99,"head":"{\"a\":"}}}"#,
            r#"{"type":"TOOL_RESULT","result_summary":{"cortex_buffer:truncated":{"bytes":9,"head":"abc"}},"error_code":"E"}"#,
            r#"{"type":"TOOL_CALL","data":{"toolName":"t","toolInput":{"z":null,"y":[true,{"q":0.000}]},"idempotencyKey":"k","extra":1}}"#,
            r#"{"type":"TOOL_RESULT","data":{"toolName":"t","output":["x",1e-7],"isError":false}}"#,
            r#"{"type":"TOOL_CALL","data":"not an object"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"i","name":"n","input":{"p":"\u0001"}}],"usage":{}}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"i","is_error":true,"content":[{"type":"text","text":"t"},{"type":"image"}]}]}}"#,
            r#"{"message":[1,2]}"#,
        ];
        let mut compared = 0;
        for line in corpus.lines().chain(made) {
            let mut bytes = Vec::new();
            if parse(line).is_err() || to_jsonb(line, &mut bytes).is_err() {
                continue;
            }
            let Some(stored) = bytes.get(4..) else { continue };
            let Ok(root) = Jsonb::root(stored) else { continue };
            let mut whole = String::new();
            if write_value(root, &mut whole).is_err() {
                continue;
            }
            for dialect in [Dialect::CortexSpike, Dialect::CortexPlane, Dialect::ClaudeCode, Dialect::WinkLog] {
                let read = facts_text(dialect, stored).unwrap_or_else(|e| panic!("{line}: {e:?}"));
                for t in ["TOOL_START", "TOOL_CALL", "TOOL_RESULT", "assistant", "user"] {
                    let a = Row { event_type: Some(t), payload: Some(&whole), ..Row::default() };
                    let b = Row { event_type: Some(t), payload: Some(&read), ..Row::default() };
                    assert_eq!(facts(dialect, &a, 64), facts(dialect, &b, 64), "{dialect:?} {t}: {line}\n{read}");
                    compared += 1;
                }
            }
        }
        assert!(compared > 2000, "{compared}");
    }

    fn row<'a>(t: &'a str, payload: &'a str) -> Row<'a> {
        Row { event_type: Some(t), payload: Some(payload), ..Row::default() }
    }

    #[test]
    fn spike_start_and_result() {
        let r = Row {
            invocation_id: Some("inv1"),
            tool_name: Some("web_search"),
            ..row("TOOL_START", r#"{"type":"TOOL_START","input_hash":"ab","input_summary":"q=rust"}"#)
        };
        assert_eq!(
            facts(Dialect::CortexSpike, &r, 100),
            Facts::Starts(vec![Start {
                id: Some("inv1".into()),
                tool_name: Some("web_search".into()),
                input_hash: Some("ab".into()),
                input: Some(Capped { text: "q=rust".into(), truncated: false }),
                written_key: None,
            }])
        );
        let r = Row {
            invocation_id: Some("inv1"),
            success: Some(true),
            ..row("TOOL_RESULT", r#"{"type":"TOOL_RESULT","result_summary":"5 results found"}"#)
        };
        let Facts::Finishes(f) = facts(Dialect::CortexSpike, &r, 4) else { panic!("not a finish") };
        assert_eq!(f[0].result, Some(Capped { text: "5 re".into(), truncated: true }));
        assert_eq!(f[0].success, Some(true));
    }

    #[test]
    fn shipped_call_hashes_its_canonical_input() {
        let a = Row {
            tool_name: Some("read_file"),
            ..row(
                "TOOL_CALL",
                r#"{"type":"TOOL_CALL","data":{"type":"tool_use","toolName":"read_file","toolInput":{"path":"a","n":1.0}}}"#,
            )
        };
        let Facts::Starts(s) = facts(Dialect::CortexPlane, &a, 100) else { panic!("not a start") };
        assert_eq!(s[0].input.as_ref().map(|c| c.text.as_str()), Some(r#"{"n":1,"path":"a"}"#));
        assert_eq!(s[0].input_hash, Some(super::super::keys::sha256_hex(br#"{"n":1,"path":"a"}"#)));
        assert_eq!(s[0].id, None);
        let r = row(
            "TOOL_RESULT",
            r#"{"type":"TOOL_RESULT","data":{"toolName":"read_file","output":{"lines":3},"isError":false}}"#,
        );
        let Facts::Finishes(f) = facts(Dialect::CortexPlane, &r, 100) else { panic!("not a finish") };
        assert_eq!(f[0].result.as_ref().map(|c| c.text.as_str()), Some(r#"{"lines":3}"#));
    }

    #[test]
    fn claude_code_reads_every_block() {
        let a = row(
            "assistant",
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Read","input":{"f":"a"}},{"type":"tool_use","id":"t2","name":"Bash","input":{"c":"ls"}}]}}"#,
        );
        let Facts::Starts(s) = facts(Dialect::ClaudeCode, &a, 100) else { panic!("not starts") };
        assert_eq!(s.iter().map(|s| s.id.clone().unwrap_or_default()).collect::<Vec<_>>(), ["t1", "t2"]);
        let u = row(
            "user",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"no"},{"type":"image"}]}]}}"#,
        );
        let Facts::Finishes(f) = facts(Dialect::ClaudeCode, &u, 100) else { panic!("not finishes") };
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].success, Some(false));
        assert_eq!(f[1].result.as_ref().map(|c| c.text.as_str()), Some("no\n[image]"));
    }

    #[test]
    fn cut_inputs_have_no_hash_and_cut_results_show_their_head() {
        let cut = r#"{"cortex_buffer:truncated":{"bytes":70000,"head":"first lines"}}"#;
        let spike = |data: &str| {
            let r = row("TOOL_START", &format!(r#"{{"type":"TOOL_START"{data}}}"#)).payload.map(str::to_owned);
            let r = Row { payload: r.as_deref(), ..row("TOOL_START", "") };
            match facts(Dialect::CortexSpike, &r, 100) {
                Facts::Starts(s) => s[0].input_hash.clone(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(spike(&format!(r#","input":{{"path":"a","body":{cut}}}"#)), None);
        assert_eq!(spike(&format!(r#","input_hash":"ab","input":{{"body":{cut}}}"#)), Some("ab".into()));
        assert_eq!(spike(&format!(r#","input_hash":{cut}"#)), None);
        assert_eq!(spike(""), Some(NULL_INPUT_HASH.into()), "no input: null's hash, as before");
        let plane = format!(r#"{{"type":"TOOL_CALL","data":{{"toolName":"write","toolInput":{{"text":{cut}}}}}}}"#);
        let Facts::Starts(s) = facts(Dialect::CortexPlane, &row("TOOL_CALL", &plane), 100) else { panic!() };
        assert_eq!(s[0].input_hash, None);
        let result = format!(r#"{{"type":"TOOL_RESULT","data":{{"toolName":"read","output":{cut}}}}}"#);
        let Facts::Finishes(f) = facts(Dialect::CortexPlane, &row("TOOL_RESULT", &result), 100) else { panic!() };
        assert_eq!(f[0].result, Some(Capped { text: "first lines".into(), truncated: true }));
    }

    /// A Claude Code transcript whose tool call and tool result are each 1.5 MB, through the
    /// indexer and back: both are events, the usage is kept, the call's input is unknown (it
    /// will be verified, not skipped) and the result shows its head.
    #[test]
    fn claude_code_lines_too_long_to_hold_still_tell_recovery_what_it_needs() {
        use crate::indexer::index_file::tests::Collect;
        use crate::indexer::index_file::{index_file, FileRules, Progress};
        let big = "0123456789abcdef".repeat(100_000);
        let assistant = format!(
            r#"{{"type":"assistant","timestamp":"2026-01-01T00:00:00Z","requestId":"req_1","message":{{"usage":{{"input_tokens":12,"output_tokens":34}},"content":[{{"type":"tool_use","id":"toolu_1","name":"Write","input":{{"file_path":"a.txt","content":"{big}"}}}}]}}}}"#
        );
        let user = format!(
            r#"{{"type":"user","timestamp":"2026-01-01T00:00:01Z","message":{{"content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":[{{"type":"text","text":"{big}"}}]}}]}}}}"#
        );
        let data = format!("{assistant}\n{user}\n");
        let rules = FileRules {
            dialect: Some(Dialect::ClaudeCode),
            job_dir: "j",
            max_line_bytes: 1 << 20,
            max_line_memory: 64 << 20,
            settled: true,
            max_bytes: u64::MAX,
            resume: None,
        };
        let mut sink = Collect::default();
        let p = index_file(data.as_bytes(), Progress::default(), &rules, &mut sink).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((p.integrity.valid_lines, p.integrity.corrupt_lines, sink.events.len()), (2, 0, 2));
        let (_, _, cols, payload, _) = &sink.events[0];
        assert_eq!(
            (cols.input_tokens, cols.output_tokens, cols.request_id.as_deref()),
            (Some(12), Some(34), Some("req_1"))
        );
        let r = Row { event_type: Some("assistant"), payload: payload.as_deref(), ..Row::default() };
        let Facts::Starts(s) = facts(Dialect::ClaudeCode, &r, 100) else { panic!("not a start") };
        assert_eq!(
            (s[0].id.as_deref(), s[0].tool_name.as_deref(), s[0].input_hash.as_deref()),
            (Some("toolu_1"), Some("Write"), None)
        );
        let (_, _, _, payload, _) = &sink.events[1];
        let r = Row { event_type: Some("user"), payload: payload.as_deref(), ..Row::default() };
        let Facts::Finishes(f) = facts(Dialect::ClaudeCode, &r, 100) else { panic!("not a finish") };
        assert_eq!(f[0].id.as_deref(), Some("toolu_1"));
        assert_eq!(f[0].result, Some(Capped { text: big[..100].to_owned(), truncated: true }));
    }

    #[test]
    fn markers_and_loads() {
        let m = Row { checkpoint_id: Some("c1"), ..row("CHECKPOINT_WRITTEN", "{}") };
        assert_eq!(
            facts(Dialect::CortexSpike, &m, 10),
            Facts::Marker { kind: MarkerKind::CheckpointWritten, checkpoint_id: Some("c1".into()) }
        );
        let l = row("CHECKPOINT_LOADED", r#"{"checkpoint_id":null}"#);
        assert_eq!(facts(Dialect::CortexSpike, &l, 10), Facts::Loaded { checkpoint_id: None });
        assert_eq!(facts(Dialect::CortexSpike, &row("LLM_REQUEST", "{}"), 10), Facts::Other);
    }

    #[test]
    fn no_payload_still_pairs_by_columns() {
        let r =
            Row { event_type: Some("TOOL_RESULT"), invocation_id: Some("i"), success: Some(false), ..Row::default() };
        let Facts::Finishes(f) = facts(Dialect::CortexSpike, &r, 10) else { panic!("not a finish") };
        assert_eq!((f[0].id.as_deref(), f[0].success, f[0].result.is_none()), (Some("i"), Some(false), true));
    }

    #[test]
    fn a_key_the_pod_wrote_is_read_when_it_is_a_key() {
        let key = "3f".repeat(32);
        let start = |dialect, line: &str| match facts(
            dialect,
            &Row { invocation_id: Some("c1"), ..row("TOOL_START", line) },
            100,
        ) {
            Facts::Starts(s) => s.into_iter().next().and_then(|s| s.written_key),
            other => panic!("not a start: {other:?}"),
        };
        let spike = format!(r#"{{"type":"TOOL_START","input_hash":"ab","idempotency_key":"{key}"}}"#);
        assert_eq!(start(Dialect::CortexSpike, &spike), Some(key.clone()));
        let plane =
            format!(r#"{{"type":"TOOL_CALL","data":{{"toolCallId":"c1","input":{{}},"idempotencyKey":"{key}"}}}}"#);
        assert_eq!(start(Dialect::CortexPlane, &plane.replace("TOOL_CALL", "TOOL_START")), Some(key.clone()));
        // Not a key: upper case, short, a number, or in the other dialect's spelling.
        for bad in [key.to_uppercase(), "ab".into()] {
            let line = format!(r#"{{"type":"TOOL_START","idempotency_key":"{bad}"}}"#);
            assert_eq!(start(Dialect::CortexSpike, &line), None, "{bad}");
        }
        assert_eq!(start(Dialect::CortexSpike, r#"{"type":"TOOL_START","idempotency_key":12}"#), None);
        let camel = format!(r#"{{"type":"TOOL_START","idempotencyKey":"{key}"}}"#);
        assert_eq!(start(Dialect::CortexSpike, &camel), None);
    }
}
