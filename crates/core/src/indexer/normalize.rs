//! The columns an event row carries, read from its line by dialect (docs/design.md §JSONL
//! dialects). Pure. A field that is missing or of another type is NULL; it never makes the
//! line less of an event.
//!
//! | column | cortex-spike | cortex-plane | claude-code | wink-log |
//! |---|---|---|---|---|
//! | type | `type` | `type` | `type` | `__type__` |
//! | ts | `timestamp` | `timestamp` | `timestamp` | `__ts__` |
//! | job_id | `job_id` | `jobId` | — | — |
//! | session_id | `session_id` | `sessionId` | `sessionId` | — |
//! | agent_id | `agent_id` | `agentId` | `agentId` | — |
//! | seq | `seq` | `sequence` | — | `__seq__` |
//! | step_index | `step_index` | `data.stepIndex` | — | — |
//! | invocation_id | `invocation_id` | `data.toolCallId` | first `tool_use.id` / `tool_result.tool_use_id` in `message.content` | — |
//! | tool_name | `tool_name` | `data.toolName` | that `tool_use.name` | — |
//! | checkpoint_id | `checkpoint_id` | `data.checkpointId` | — | — |
//! | success | `success` | not `data.isError` | not `tool_result.is_error` | — |
//! | tokens | `prompt_tokens`, `completion_tokens` | `data.tokenUsage` | `message.usage` | — |
//! | request_id | — | — | `requestId` | — |
//! | schema_version | `buffer_schema_version` | `version` | `version` | — |
//!
//! `job_id` is the job the line itself names, never its directory's: an agent that can write
//! into another job's directory must not be able to speak for that job (see
//! `integrity::foreign_job_line`, and `session_file.job_id` for the directory's job).
//!
//! Text columns never hold NUL: PostgreSQL's `text` cannot, and a `\u0000` in a JSON string
//! becomes U+FFFD in every text column (the payload of such a line is NULL anyway: `jsonb`
//! cannot store `\u0000` either, and `payload_problem` says so).

use std::borrow::Cow;

use super::dialect::Dialect;
use super::discovery::is_uuid;
use super::timestamp::parse_timestamp;
use crate::json::parse::{Kind, Parsed, Value};
use crate::spend::usage;

/// Everything but the payload of an `event` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Columns {
    pub event_type: Option<String>,
    /// Microseconds since the Unix epoch.
    pub ts_us: Option<i64>,
    pub job_id: Option<[u8; 16]>,
    pub session_id: Option<String>,
    pub agent_id: Option<String>,
    pub seq: Option<i64>,
    pub step_index: Option<i32>,
    pub invocation_id: Option<String>,
    pub tool_name: Option<String>,
    pub checkpoint_id: Option<String>,
    pub success: Option<bool>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub request_id: Option<String>,
    pub schema_version: Option<String>,
}

/// A UUID's 16 bytes from its text form.
pub fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    if !is_uuid(s) {
        return None;
    }
    let nibble = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    let mut out = [0u8; 16];
    let mut hex = s.bytes().filter(|b| *b != b'-');
    for byte in &mut out {
        *byte = (nibble(hex.next()?)? << 4) | nibble(hex.next()?)?;
    }
    Some(out)
}

/// A text column: strings (NUL replaced, see the module comment), and ids written as numbers.
fn text(v: Option<Value<'_>>) -> Option<String> {
    let v = v?;
    match v.kind {
        Kind::String => v.as_str().map(|s| without_nul(s).into_owned()),
        // Ids written as numbers are still ids.
        Kind::Number => Some(v.text.to_owned()),
        _ => None,
    }
}

/// `s` with every NUL replaced by U+FFFD.
pub fn without_nul(s: Cow<'_, str>) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{fffd}"))
    } else {
        s
    }
}

fn int(v: Option<Value<'_>>) -> Option<i64> {
    v?.as_i64()
}

fn int32(v: Option<Value<'_>>) -> Option<i32> {
    int(v).and_then(|i| i32::try_from(i).ok())
}

fn count(v: Option<Value<'_>>) -> Option<i64> {
    int(v).filter(|i| *i >= 0)
}

fn timestamp(v: Option<Value<'_>>) -> Option<i64> {
    v?.as_str().and_then(|s| parse_timestamp(&s))
}

/// A usage object longer than this is not one (real ones are a few hundred bytes): its
/// members are not read, which keeps the work per line bounded.
const MAX_USAGE_BYTES: usize = 64 * 1024;

fn set_usage(c: &mut Columns, v: Option<Value<'_>>) {
    let Some(v) = v.filter(|v| v.kind == Kind::Object && v.text.len() <= MAX_USAGE_BYTES) else { return };
    if let Ok(u) = usage::parse(v) {
        let n = |x: u64| i64::try_from(x).ok();
        c.input_tokens = n(u.input);
        c.output_tokens = n(u.output);
        c.cache_write_tokens = n(u.cache_write());
        c.cache_read_tokens = n(u.cache_read);
    }
}

/// Where a dialect keeps the fields every event line has (`type` and `timestamp` are the same
/// key in all of them; Claude Code lines name no job and carry no sequence number).
struct Envelope {
    job_id: Option<&'static str>,
    session_id: &'static str,
    agent_id: &'static str,
    seq: Option<&'static str>,
    version: &'static str,
}

const SPIKE_ENVELOPE: Envelope = Envelope {
    job_id: Some("job_id"),
    session_id: "session_id",
    agent_id: "agent_id",
    seq: Some("seq"),
    version: "buffer_schema_version",
};
const PLANE_ENVELOPE: Envelope = Envelope {
    job_id: Some("jobId"),
    session_id: "sessionId",
    agent_id: "agentId",
    seq: Some("sequence"),
    version: "version",
};
const CLAUDE_CODE_ENVELOPE: Envelope =
    Envelope { job_id: None, session_id: "sessionId", agent_id: "agentId", seq: None, version: "version" };

fn envelope(c: &mut Columns, p: &Parsed<'_>, keys: &Envelope) {
    c.event_type = text(p.get("type"));
    c.ts_us = timestamp(p.get("timestamp"));
    c.job_id = keys.job_id.and_then(|k| text(p.get(k))).and_then(|s| uuid_bytes(&s));
    c.session_id = text(p.get(keys.session_id));
    c.agent_id = text(p.get(keys.agent_id));
    c.seq = keys.seq.and_then(|k| int(p.get(k)));
    c.schema_version = text(p.get(keys.version));
}

/// The columns of an event line of `dialect`.
pub fn columns(p: &Parsed<'_>, dialect: Option<Dialect>) -> Columns {
    let mut c = Columns::default();
    match dialect {
        Some(Dialect::CortexSpike) => {
            envelope(&mut c, p, &SPIKE_ENVELOPE);
            c.step_index = int32(p.get("step_index"));
            c.invocation_id = text(p.get("invocation_id"));
            c.tool_name = text(p.get("tool_name"));
            c.checkpoint_id = text(p.get("checkpoint_id"));
            c.success = p.get("success").and_then(|v| v.as_bool());
            c.input_tokens = count(p.get("prompt_tokens"));
            c.output_tokens = count(p.get("completion_tokens"));
        }
        Some(Dialect::CortexPlane) => {
            envelope(&mut c, p, &PLANE_ENVELOPE);
            if let Some(data) = p.get("data") {
                let [step, call, tool, checkpoint, is_error, usage] =
                    data.pick(["stepIndex", "toolCallId", "toolName", "checkpointId", "isError", "tokenUsage"]);
                c.step_index = int32(step);
                c.invocation_id = text(call);
                c.tool_name = text(tool);
                c.checkpoint_id = text(checkpoint);
                c.success = is_error.and_then(|v| v.as_bool()).map(|e| !e);
                set_usage(&mut c, usage);
            }
        }
        Some(Dialect::ClaudeCode) => {
            envelope(&mut c, p, &CLAUDE_CODE_ENVELOPE);
            c.request_id = text(p.get("requestId"));
            if let Some(message) = p.get("message") {
                let [usage, content] = message.pick(["usage", "content"]);
                set_usage(&mut c, usage);
                for block in content.into_iter().flat_map(|v| v.items()) {
                    let [kind, id, name, tool_use_id, is_error] =
                        block.pick(["type", "id", "name", "tool_use_id", "is_error"]);
                    match kind.and_then(|t| t.as_str()).as_deref() {
                        Some("tool_use") => {
                            c.invocation_id = text(id);
                            c.tool_name = text(name);
                        }
                        Some("tool_result") => {
                            c.invocation_id = text(tool_use_id);
                            c.success = Some(!is_error.and_then(|v| v.as_bool()).unwrap_or(false));
                        }
                        _ => continue,
                    }
                    break;
                }
            }
        }
        Some(Dialect::WinkLog) | None => {
            c.event_type = text(p.get("__type__")).or_else(|| text(p.get("type")));
            c.ts_us = timestamp(p.get("__ts__")).or_else(|| timestamp(p.get("timestamp")));
            c.seq = int(p.get("__seq__"));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse::parse;

    fn cols(line: &str, d: Dialect) -> Columns {
        columns(&parse(line).unwrap_or_else(|e| panic!("{e:?}")), Some(d))
    }

    const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";

    #[test]
    fn cortex_spike_lines() {
        let c = cols(
            &format!(
                r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:26.100Z","job_id":"{JOB}","session_id":"s1","seq":7,
                   "step_index":0,"invocation_id":"inv_0001","tool_name":"web_search","success":true,"result_summary":"5 results"}}"#
            ),
            Dialect::CortexSpike,
        );
        assert_eq!(c.event_type.as_deref(), Some("TOOL_RESULT"));
        assert_eq!(c.ts_us, parse_timestamp("2026-02-23T14:30:26.100Z"));
        assert_eq!(c.job_id, uuid_bytes(JOB));
        assert_eq!((c.seq, c.step_index), (Some(7), Some(0)));
        assert_eq!(c.invocation_id.as_deref(), Some("inv_0001"));
        assert_eq!(c.tool_name.as_deref(), Some("web_search"));
        assert_eq!(c.success, Some(true));
        let r = cols(
            r#"{"type":"LLM_RESPONSE","timestamp":"x","prompt_tokens":15000,"completion_tokens":2150}"#,
            Dialect::CortexSpike,
        );
        assert_eq!((r.input_tokens, r.output_tokens, r.ts_us), (Some(15000), Some(2150), None));
        let s = cols(
            r#"{"type":"SESSION_START","timestamp":"x","buffer_schema_version":1,"agent_id":"a"}"#,
            Dialect::CortexSpike,
        );
        assert_eq!((s.schema_version.as_deref(), s.agent_id.as_deref()), (Some("1"), Some("a")));
    }

    #[test]
    fn cortex_plane_lines() {
        let c = cols(
            &format!(
                r#"{{"version":"1.0","timestamp":"2026-03-01T09:00:04.480Z","jobId":"{JOB}","sessionId":"s","agentId":"a","sequence":4,
                   "type":"TOOL_RESULT","data":{{"toolCallId":"toolu_01A","toolName":"read_file","isError":false}}}}"#
            ),
            Dialect::CortexPlane,
        );
        assert_eq!(
            (c.seq, c.invocation_id.as_deref(), c.tool_name.as_deref()),
            (Some(4), Some("toolu_01A"), Some("read_file"))
        );
        assert_eq!((c.success, c.schema_version.as_deref()), (Some(true), Some("1.0")));
        let r = cols(
            r#"{"type":"LLM_RESPONSE","timestamp":"t","data":{"tokenUsage":{"inputTokens":1200,"outputTokens":310,"cacheReadTokens":5,"cacheCreationTokens":900}}}"#,
            Dialect::CortexPlane,
        );
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens),
            (Some(1200), Some(310), Some(900), Some(5))
        );
        let k = cols(
            r#"{"type":"CHECKPOINT","timestamp":"t","data":{"checkpointId":"c1","stepIndex":3}}"#,
            Dialect::CortexPlane,
        );
        assert_eq!((k.checkpoint_id.as_deref(), k.step_index), (Some("c1"), Some(3)));
    }

    #[test]
    fn claude_code_lines() {
        let a = cols(
            r#"{"type":"assistant","timestamp":"2025-07-01T10:00:00.000Z","sessionId":"sess","requestId":"req_1","version":"2.1.5",
               "message":{"id":"msg_1","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}],
               "usage":{"input_tokens":3,"output_tokens":9,"cache_creation_input_tokens":500,"cache_read_input_tokens":7000}}}"#,
            Dialect::ClaudeCode,
        );
        assert_eq!((a.invocation_id.as_deref(), a.tool_name.as_deref()), (Some("toolu_1"), Some("Bash")));
        assert_eq!((a.input_tokens, a.cache_write_tokens, a.cache_read_tokens), (Some(3), Some(500), Some(7000)));
        assert_eq!((a.request_id.as_deref(), a.session_id.as_deref()), (Some("req_1"), Some("sess")));
        let u = cols(
            r#"{"type":"user","timestamp":"2025-07-01T10:00:01Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"boom"}]}}"#,
            Dialect::ClaudeCode,
        );
        assert_eq!((u.invocation_id.as_deref(), u.success), (Some("toolu_1"), Some(false)));
        // A user message whose content is a string has no tool ids.
        let s = cols(r#"{"type":"user","message":{"role":"user","content":"hello"}}"#, Dialect::ClaudeCode);
        assert_eq!(s.invocation_id, None);
    }

    #[test]
    fn nul_never_reaches_a_text_column() {
        let c = cols(
            r#"{"type":"TOOL\u0000X","timestamp":"t","session_id":"s\u0000","agent_id":"\u0000","tool_name":"a\u0000\u0000b",
               "invocation_id":"i\u0000","checkpoint_id":"c\u0000","buffer_schema_version":"1\u0000"}"#,
            Dialect::CortexSpike,
        );
        assert_eq!(c.event_type.as_deref(), Some("TOOL\u{fffd}X"));
        assert_eq!(c.session_id.as_deref(), Some("s\u{fffd}"));
        assert_eq!(c.agent_id.as_deref(), Some("\u{fffd}"));
        assert_eq!(c.tool_name.as_deref(), Some("a\u{fffd}\u{fffd}b"));
        assert_eq!(c.invocation_id.as_deref(), Some("i\u{fffd}"));
        assert_eq!(c.checkpoint_id.as_deref(), Some("c\u{fffd}"));
        assert_eq!(c.schema_version.as_deref(), Some("1\u{fffd}"));
        let plane = cols(
            r#"{"type":"T","timestamp":"t","sessionId":"\u0000","version":"\u0000","data":{"toolName":"\u0000"}}"#,
            Dialect::CortexPlane,
        );
        assert_eq!(
            (plane.session_id.as_deref(), plane.schema_version.as_deref()),
            (Some("\u{fffd}"), Some("\u{fffd}"))
        );
        assert_eq!(plane.tool_name.as_deref(), Some("\u{fffd}"));
        let cc = cols(
            r#"{"type":"assistant","requestId":"r\u0000","message":{"content":[{"type":"tool_use","id":"t\u0000","name":"\u0000"}]}}"#,
            Dialect::ClaudeCode,
        );
        assert_eq!((cc.request_id.as_deref(), cc.invocation_id.as_deref()), (Some("r\u{fffd}"), Some("t\u{fffd}")));
        let wink = cols(r#"{"__type__":"\u0000"}"#, Dialect::WinkLog);
        assert_eq!(wink.event_type.as_deref(), Some("\u{fffd}"));
        for s in [&c.event_type, &c.session_id, &plane.tool_name, &cc.request_id, &wink.event_type] {
            assert!(!s.as_deref().unwrap_or_default().contains('\0'));
        }
    }

    #[test]
    fn oversized_usage_objects_are_not_read() {
        let pad: String = (0..10_000).map(|i| format!("\"k{i}\":0,")).collect();
        let c = cols(
            &format!(r#"{{"type":"assistant","message":{{"usage":{{{pad}"input_tokens":3,"output_tokens":4}}}}}}"#),
            Dialect::ClaudeCode,
        );
        assert_eq!((c.input_tokens, c.output_tokens), (None, None));
        let small = cols(
            r#"{"type":"assistant","message":{"usage":{"input_tokens":3,"output_tokens":4}}}"#,
            Dialect::ClaudeCode,
        );
        assert_eq!((small.input_tokens, small.output_tokens), (Some(3), Some(4)));
    }

    #[test]
    fn wink_lines_and_no_job_from_the_directory() {
        let w = columns(
            &parse(r#"{"__type__":"ToolInvoked","__seq__":1,"__ts__":"2026-03-03T12:00:01+00:00"}"#)
                .unwrap_or_else(|e| panic!("{e:?}")),
            Some(Dialect::WinkLog),
        );
        assert_eq!((w.event_type.as_deref(), w.seq, w.job_id), (Some("ToolInvoked"), Some(1), None));
        assert_eq!(w.ts_us, parse_timestamp("2026-03-03T12:00:01Z"));
        // Wrong types are NULL, never an error.
        let odd = cols(r#"{"type":5,"timestamp":[],"seq":"7","job_id":"nope","success":"yes"}"#, Dialect::CortexSpike);
        assert_eq!(
            (odd.event_type.as_deref(), odd.ts_us, odd.seq, odd.job_id, odd.success),
            (Some("5"), None, None, None, None)
        );
    }
}
