//! Which JSONL dialect a session file speaks, from its name and its first line that parses
//! (docs/design.md §JSONL dialects). Content is more specific than a name, so a recognisable first
//! object wins; the name decides while the file has no parseable object yet; any other JSON
//! object stream is `wink-log` (dataclass dumps, optionally with `__type__`/`__seq__`/`__ts__`).

use super::discovery::{is_uuid, Layout};
use super::judge::{decode, judge, Rules, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    CortexSpike,
    CortexPlane,
    ClaudeCode,
    WinkLog,
}

impl Dialect {
    /// The label stored in `session_file.dialect`.
    pub fn label(self) -> &'static str {
        match self {
            Dialect::CortexSpike => "cortex-spike",
            Dialect::CortexPlane => "cortex-plane",
            Dialect::ClaudeCode => "claude-code",
            Dialect::WinkLog => "wink-log",
        }
    }

    pub fn from_label(label: &str) -> Option<Dialect> {
        [Dialect::CortexSpike, Dialect::CortexPlane, Dialect::ClaudeCode, Dialect::WinkLog]
            .into_iter()
            .find(|d| d.label() == label)
    }

    /// Which lines of a file count as events: `scanBuffer`'s rule for the cortex dialects, any
    /// object otherwise (and while a file's dialect is not known yet).
    pub fn rules(d: Option<Dialect>) -> Rules {
        match d {
            Some(Dialect::CortexSpike | Dialect::CortexPlane) => Rules::Cortex,
            _ => Rules::Object,
        }
    }
}

/// Line types Claude Code writes at the top level of its transcripts.
const CLAUDE_CODE_TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "result",
    "attachment",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "last-prompt",
];

/// How many leading bytes of a file dialect detection may read.
pub const DETECTION_PREFIX_BYTES: usize = 256 * 1024;

/// What a file's first object says about its dialect: which of the telling keys it has, and its
/// `type` when that is a string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirstObject {
    job_id_camel: bool,
    job_id_snake: bool,
    has_type: bool,
    wink_keys: bool,
    claude_keys: bool,
    line_type: Option<String>,
}

impl FirstObject {
    fn of(p: &crate::json::parse::Parsed<'_>) -> FirstObject {
        let [parent, leaf, sidechain] = p.root.pick(["parentUuid", "leafUuid", "isSidechain"]);
        FirstObject {
            job_id_camel: p.has("jobId"),
            job_id_snake: p.has("job_id"),
            has_type: p.has("type"),
            wink_keys: p.has("__type__") || p.has("__seq__") || p.has("__ts__"),
            claude_keys: parent.is_some() || leaf.is_some() || sidechain.is_some(),
            line_type: p.get("type").and_then(|t| t.as_str()).map(|t| t.into_owned()),
        }
    }
}

/// Detects the dialect. `first_object` is the file's first line that parses as a JSON object.
pub fn detect(file_name: &str, layout: Layout, first_object: Option<&FirstObject>) -> Option<Dialect> {
    let by_content = first_object.and_then(from_content);
    by_content.or_else(|| from_name(file_name, layout)).or_else(|| first_object.map(|_| Dialect::WinkLog))
}

/// The dialect a file name alone implies, if any.
pub fn from_name(file_name: &str, layout: Layout) -> Option<Dialect> {
    if layout == Layout::Subagent {
        return Some(Dialect::ClaudeCode);
    }
    let stem = file_name.strip_suffix(".jsonl")?;
    if is_spike_stem(stem) {
        Some(Dialect::CortexSpike)
    } else if stem.strip_prefix("session-").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
        Some(Dialect::CortexPlane)
    } else if is_uuid(stem) || stem.starts_with("agent-") {
        Some(Dialect::ClaudeCode)
    } else {
        None
    }
}

/// Where a session file stands among its job's files: the number of `session-NNN.jsonl`, or
/// the start time (seconds since the Unix epoch) of `session_<YYYYMMDDTHHMMSSZ>_<pod>.jsonl`.
/// Compared as numbers, so `session-1000` comes after `session-999` (the control plane sorts
/// the names as strings and would pick 999 as the latest).
pub fn session_ordinal(file_name: &str) -> Option<i64> {
    let stem = file_name.strip_suffix(".jsonl")?;
    if let Some(n) = stem.strip_prefix("session-") {
        return (!n.is_empty() && n.len() <= 18 && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse().ok())
            .flatten();
    }
    if is_spike_stem(stem) {
        let t = &stem["session_".len().."session_".len() + 16];
        let iso = format!("{}-{}-{}T{}:{}:{}Z", &t[0..4], &t[4..6], &t[6..8], &t[9..11], &t[11..13], &t[13..15]);
        return super::timestamp::parse_timestamp(&iso).map(|us| us / 1_000_000);
    }
    None
}

/// `session_<YYYYMMDDTHHMMSSZ>_<pod>`
fn is_spike_stem(stem: &str) -> bool {
    let Some(rest) = stem.strip_prefix("session_") else { return false };
    let b = rest.as_bytes();
    b.len() > 17
        && b[..16].iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            15 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
        && b[16] == b'_'
}

fn from_content(obj: &FirstObject) -> Option<Dialect> {
    let claude_type = obj.line_type.as_deref().is_some_and(|t| CLAUDE_CODE_TYPES.contains(&t));
    if obj.job_id_camel {
        Some(Dialect::CortexPlane)
    } else if obj.job_id_snake && obj.has_type {
        Some(Dialect::CortexSpike)
    } else if obj.wink_keys {
        Some(Dialect::WinkLog)
    } else if obj.claude_keys || claude_type {
        Some(Dialect::ClaudeCode)
    } else {
        None
    }
}

/// The first line in `prefix` that is a JSON object, read exactly as lines are judged (lossy
/// UTF-8, JavaScript trimming, `JSON.parse`'s rules), so detection and judging never disagree
/// about a line. Only newline-terminated lines are considered unless `prefix_is_whole_file`,
/// in which case an unterminated tail counts too.
pub fn first_object(prefix: &[u8], prefix_is_whole_file: bool) -> Option<FirstObject> {
    // Lines are taken one at a time and the search stops at the first object: a file's first
    // line is usually one, and the rest of the prefix is never looked at.
    let mut rest = prefix;
    loop {
        let (line, after, last) = match memchr::memchr(b'\n', rest) {
            Some(at) => (rest.get(..at)?, rest.get(at + 1..)?, false),
            // The piece after the last newline is incomplete unless the file ends there.
            None if prefix_is_whole_file && !rest.is_empty() => (rest, &[][..], true),
            None => return None,
        };
        if let Verdict::Event(p) = judge(&decode(line), Rules::Object) {
            return Some(FirstObject::of(&p));
        }
        if last {
            return None;
        }
        rest = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_files_order_by_number_and_start_time() {
        assert_eq!(session_ordinal("session-999.jsonl"), Some(999));
        assert_eq!(session_ordinal("session-1000.jsonl"), Some(1000));
        assert!(session_ordinal("session-1000.jsonl") > session_ordinal("session-999.jsonl"));
        assert!("session-1000.jsonl" < "session-999.jsonl", "as strings the order is the other way round");
        assert_eq!(session_ordinal("session_20260223T143022Z_pod-abc12.jsonl"), Some(1_771_857_022));
        assert!(
            session_ordinal("session_20260223T144518Z_pod-a.jsonl")
                > session_ordinal("session_20260223T143022Z_pod-z.jsonl")
        );
        for other in ["session-.jsonl", "session-1a.jsonl", "trace.jsonl", "session_20261323T000000Z_p.jsonl", "x"] {
            assert_eq!(session_ordinal(other), None, "{other}");
        }
    }

    fn obj(json: &str) -> FirstObject {
        first_object(json.as_bytes(), true).unwrap_or_else(|| panic!("test fixture is not an object: {json}"))
    }

    #[test]
    fn names_identify_each_dialect() {
        let d = Layout::DirectoryFile;
        assert_eq!(from_name("session_20260223T143022Z_pod-abc12.jsonl", d), Some(Dialect::CortexSpike));
        assert_eq!(from_name("session-001.jsonl", d), Some(Dialect::CortexPlane));
        assert_eq!(from_name("session-1000.jsonl", d), Some(Dialect::CortexPlane));
        assert_eq!(from_name("7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl", d), Some(Dialect::ClaudeCode));
        assert_eq!(from_name("agent-3430b97e.jsonl", d), Some(Dialect::ClaudeCode));
        assert_eq!(from_name("anything.jsonl", Layout::Subagent), Some(Dialect::ClaudeCode));
        assert_eq!(from_name("trace.jsonl", d), None);
        assert_eq!(from_name("session-.jsonl", d), None);
        assert_eq!(from_name("session_2026_pod.jsonl", d), None);
    }

    #[test]
    fn content_identifies_each_dialect() {
        let plane = obj(
            r#"{"version":"1.0","timestamp":"t","jobId":"j","sessionId":"s","agentId":"a","type":"LLM_REQUEST","data":{},"sequence":0}"#,
        );
        let spike = obj(
            r#"{"type":"SESSION_START","timestamp":"t","job_id":"j","session_id":"s","seq":0,"buffer_schema_version":1}"#,
        );
        let cc = obj(r#"{"parentUuid":null,"isSidechain":false,"sessionId":"s","version":"2.1.5","type":"user"}"#);
        let cc_summary = obj(r#"{"type":"summary","summary":"x","leafUuid":"u"}"#);
        let cc_snapshot = obj(r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#);
        let wink = obj(r#"{"__type__":"Step","__seq__":3,"value":1}"#);
        let d = Layout::DirectoryFile;
        assert_eq!(detect("x.jsonl", d, Some(&plane)), Some(Dialect::CortexPlane));
        assert_eq!(detect("x.jsonl", d, Some(&spike)), Some(Dialect::CortexSpike));
        assert_eq!(detect("x.jsonl", d, Some(&cc)), Some(Dialect::ClaudeCode));
        assert_eq!(detect("x.jsonl", d, Some(&cc_summary)), Some(Dialect::ClaudeCode));
        assert_eq!(detect("x.jsonl", d, Some(&cc_snapshot)), Some(Dialect::ClaudeCode));
        assert_eq!(detect("x.jsonl", d, Some(&wink)), Some(Dialect::WinkLog));
    }

    #[test]
    fn content_wins_over_name_and_name_decides_without_content() {
        let spike = obj(r#"{"type":"SESSION_START","timestamp":"t","job_id":"j","session_id":"s"}"#);
        let d = Layout::DirectoryFile;
        assert_eq!(detect("session-001.jsonl", d, Some(&spike)), Some(Dialect::CortexSpike));
        assert_eq!(detect("session-001.jsonl", d, None), Some(Dialect::CortexPlane));
        let plain = obj(r#"{"step":1}"#);
        assert_eq!(detect("session-001.jsonl", d, Some(&plain)), Some(Dialect::CortexPlane));
        assert_eq!(detect("trace.jsonl", d, Some(&plain)), Some(Dialect::WinkLog));
        assert_eq!(detect("trace.jsonl", d, None), None);
    }

    #[test]
    fn first_object_skips_blank_corrupt_and_non_object_lines() {
        let text = b"\n  \n{not json\n[1,2]\n {\"type\":\"summary\",\"leafUuid\":\"u\"} \n";
        let found = first_object(text, false).map(|m| m.claude_keys);
        assert_eq!(found, Some(true));
    }

    #[test]
    fn first_object_ignores_an_unterminated_tail_unless_it_is_the_whole_file() {
        let text = b"{\"a\":1}";
        assert!(first_object(text, false).is_none());
        assert!(first_object(text, true).is_some());
        assert!(first_object(b"", true).is_none());
    }

    #[test]
    fn detection_reads_lines_as_judging_does() {
        // Invalid UTF-8, a BOM and JSON.parse-only forms (1e400, a lone surrogate) do not hide
        // the first object, as they would from a strict parser.
        let spike = b"\xef\xbb\xbf{\"type\":\"\xff\",\"timestamp\":1e400,\"job_id\":\"\\ud800\"}\n";
        assert_eq!(
            detect("session-001.jsonl", Layout::DirectoryFile, first_object(spike, false).as_ref()),
            Some(Dialect::CortexSpike)
        );
    }

    #[test]
    fn labels_round_trip() {
        for d in [Dialect::CortexSpike, Dialect::CortexPlane, Dialect::ClaudeCode, Dialect::WinkLog] {
            assert_eq!(Dialect::from_label(d.label()), Some(d));
        }
        assert_eq!(Dialect::from_label("nope"), None);
    }
}
