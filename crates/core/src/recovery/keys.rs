//! Stable texts a recovery plan hands to an agent: hashes of tool inputs, keys for calls whose
//! dialect gives them no id, and idempotency keys. Pure.
//!
//! Every key is built from what the bytes of the session files say: the job, the checkpoint,
//! ordinals, tool names and inputs (and, for a call's `key`, the file's path relative to its job
//! directory and a byte offset). Never from a `file_id` or an absolute path, so the same files
//! give the same keys however they reached the index (another node, a restored dump, a
//! re-index after a rename of `sessions_dir`).

use sha2::{Digest, Sha256};

use crate::json::parse::{Value, JSONB_MAX_DEPTH};
use crate::json::{canonical_json, JsValue};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// The canonical JSON of a validated value: `canonical_json()`'s form (JavaScript
/// `JSON.stringify` with keys sorted recursively), so an agent computes the same text from the
/// same input with the SQL function or its own `JSON.stringify`.
pub fn canonical_of(v: Value<'_>) -> String {
    canonical_json(&to_js_value(v))
}

/// SHA-256 (hex) of the canonical JSON of a tool's input: the documented matching rule for
/// calls of dialects without ids. An input nested deeper than `jsonb` allows (1000 levels) is
/// hashed as written instead (it cannot be in the index's payload anyway).
pub fn input_hash(v: Value<'_>) -> String {
    if nesting_depth(v.text) > JSONB_MAX_DEPTH {
        return sha256_hex(v.text.as_bytes());
    }
    sha256_hex(canonical_of(v).as_bytes())
}

/// How deeply a validated JSON text nests (strings skipped).
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A parsed value as a tree (escapes resolved; a lone surrogate escape, which Rust strings
/// cannot hold, becomes U+FFFD). Recursive: callers keep the depth within `jsonb`'s 1000
/// levels ([`nesting_depth`]); deeper containers become `null` rather than use more stack.
pub fn to_js_value(v: Value<'_>) -> JsValue {
    to_js_value_at(v, 0)
}

fn to_js_value_at(v: Value<'_>, depth: usize) -> JsValue {
    use crate::json::parse::Kind;
    match v.kind {
        Kind::Null => JsValue::Null,
        Kind::Bool => JsValue::Bool(v.text == "true"),
        Kind::Number => JsValue::Number(v.as_f64().unwrap_or(f64::NAN)),
        Kind::String => JsValue::String(v.as_str().map(|s| s.into_owned()).unwrap_or_default()),
        _ if depth >= JSONB_MAX_DEPTH => JsValue::Null,
        Kind::Array => JsValue::Array(v.items().map(|i| to_js_value_at(i, depth + 1)).collect()),
        Kind::Object => {
            JsValue::Object(v.members().map(|(k, i)| (k.into_owned(), to_js_value_at(i, depth + 1))).collect())
        }
    }
}

/// The key of a call whose dialect gives it no id: where its start line is, relative to the job
/// directory (`session-001.jsonl@1234`).
pub fn derived_call_key(rel_path: &str, byte_offset: i64) -> String {
    format!("{rel_path}@{byte_offset}")
}

/// The idempotency key of a call, built from what the agent knows when it makes the call, so
/// the pod computes it before the call and the plan reports the same key after a crash:
///
/// ```text
/// sha256_hex("cortex_buffer/call/v2\n" + job_id + "\n" + checkpoint_ref + "\n"
///            + call_ordinal + "\n" + tool_name + "\n" + input_hash)
/// ```
///
/// - `job_id`: the job's UUID in lower case (a transcript's session id for `session_recovery`);
/// - `checkpoint_ref`: [`checkpoint_ref`] of the checkpoint the writer resumed from or wrote
///   last (`crc:` and its unsigned CRC-32, or `-` when there is none);
/// - `call_ordinal`: the call's rank among its writer's tool calls since that checkpoint,
///   from 1, in decimal;
/// - `tool_name`: as written (empty when there is none);
/// - `input_hash`: [`input_hash`] of the tool input (`null` when there is none: [`NULL_INPUT_HASH`]).
///
/// The same call of the same job after the same checkpoint gets the same key on every node;
/// a pod that repeats a step after a crash sends the same key as the pod before it.
pub fn call_idempotency_key(
    job_id: &str,
    checkpoint_ref: &str,
    call_ordinal: u32,
    tool_name: &str,
    input_hash: &str,
) -> String {
    let text = format!("cortex_buffer/call/v2\n{job_id}\n{checkpoint_ref}\n{call_ordinal}\n{tool_name}\n{input_hash}");
    sha256_hex(text.as_bytes())
}

/// [`input_hash`] of `null`: the hash of a call without an input.
pub const NULL_INPUT_HASH: &str = "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b";

/// How an idempotency key names the checkpoint: `crc:<unsigned CRC-32 of its canonical JSON>`,
/// which every party can compute from the document itself (the control plane writes checkpoints
/// without an id), or `-` when the job has none.
pub fn checkpoint_ref(crc: Option<u32>) -> String {
    match crc {
        Some(c) => format!("crc:{c}"),
        None => "-".to_owned(),
    }
}

/// `s` cut to at most `max_bytes` bytes at a character boundary; whether it was cut.
pub fn capped(s: &str, max_bytes: usize) -> (String, bool) {
    if s.len() <= max_bytes {
        return (s.to_owned(), false);
    }
    let mut end = max_bytes;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    (s.get(..end).unwrap_or("").to_owned(), true)
}

/// The path of a session file relative to its job directory: what follows the last component
/// equal to `job_dir` that has at most `max_depth` components after it (the discovery rule puts
/// files one level below a job directory, Claude Code sub-agents three).
pub fn relative_to_job_dir<'a>(path: &'a str, job_dir: &str) -> &'a str {
    const MAX_DEPTH: usize = 3;
    let parts: Vec<(usize, &str)> =
        path.char_indices().filter(|(_, c)| *c == '/').map(|(i, _)| i).zip(path.split('/').skip(1)).collect();
    for (n, (at, part)) in parts.iter().enumerate().rev() {
        let after = parts.len() - n - 1;
        if after > MAX_DEPTH {
            break;
        }
        if *part == job_dir && after >= 1 {
            return path.get(at + 1 + part.len() + 1..).unwrap_or(path);
        }
    }
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse::parse;

    #[test]
    fn sha256_of_known_texts() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn input_hash_ignores_key_order_and_spacing() {
        let a = parse(r#"{"b":[1.0,{"y":"\u0041","x":null}],"a":"s"}"#).unwrap_or_else(|e| panic!("{e:?}"));
        let b = parse(r#"{ "a" : "s", "b" : [ 1, { "x" : null, "y" : "A" } ] }"#).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(canonical_of(a.root), r#"{"a":"s","b":[1,{"x":null,"y":"A"}]}"#);
        assert_eq!(input_hash(a.root), input_hash(b.root));
        assert_eq!(input_hash(a.root), sha256_hex(br#"{"a":"s","b":[1,{"x":null,"y":"A"}]}"#));
    }

    #[test]
    fn deep_inputs_are_hashed_as_written() {
        let deep = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
        let p = parse(&deep).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(nesting_depth(&deep), 200_000);
        assert_eq!(input_hash(p.root), sha256_hex(deep.as_bytes()));
        assert_eq!(nesting_depth(r#"{"a":"[[[[","b":[{"c":"\\\"]"}]}"#), 3);
    }

    #[test]
    fn nested_objects_keep_their_keys() {
        let p = parse(r#"{"a":{"b":{"c":[{"d":1}]}},"e":2}"#).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(canonical_of(p.root), r#"{"a":{"b":{"c":[{"d":1}]}},"e":2}"#);
    }

    #[test]
    fn call_keys_are_stable_and_distinct() {
        let k = call_idempotency_key("j1", "crc:1", 1, "send_email", NULL_INPUT_HASH);
        assert_eq!(k, call_idempotency_key("j1", "crc:1", 1, "send_email", NULL_INPUT_HASH));
        assert_ne!(k, call_idempotency_key("j1", "crc:2", 1, "send_email", NULL_INPUT_HASH));
        assert_ne!(k, call_idempotency_key("j2", "crc:1", 1, "send_email", NULL_INPUT_HASH));
        assert_ne!(k, call_idempotency_key("j1", "crc:1", 2, "send_email", NULL_INPUT_HASH));
        assert_ne!(k, call_idempotency_key("j1", "crc:1", 1, "charge_card", NULL_INPUT_HASH));
        assert_eq!(k.len(), 64);
        // The documented formula, spelled out.
        assert_eq!(
            k,
            sha256_hex(format!("cortex_buffer/call/v2\nj1\ncrc:1\n1\nsend_email\n{NULL_INPUT_HASH}").as_bytes())
        );
        assert_eq!(NULL_INPUT_HASH, sha256_hex(b"null"));
        assert_eq!((checkpoint_ref(Some(42)), checkpoint_ref(None)), ("crc:42".to_owned(), "-".to_owned()));
    }

    #[test]
    fn caps_at_char_boundaries() {
        assert_eq!(capped("héllo", 2), ("h".to_owned(), true));
        assert_eq!(capped("héllo", 3), ("hé".to_owned(), true));
        assert_eq!(capped("hi", 2), ("hi".to_owned(), false));
    }

    #[test]
    fn relative_paths() {
        let j = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";
        assert_eq!(relative_to_job_dir(&format!("/data/s/{j}/session-001.jsonl"), j), "session-001.jsonl");
        assert_eq!(relative_to_job_dir(&format!("/{j}/x/{j}/session-001.jsonl"), j), "session-001.jsonl");
        assert_eq!(relative_to_job_dir("/r/proj/abc/subagents/agent-1.jsonl", "proj"), "abc/subagents/agent-1.jsonl");
        assert_eq!(relative_to_job_dir("/r/other/file.jsonl", "proj"), "file.jsonl");
    }
}
