//! Stable texts a recovery plan hands to an agent: hashes of tool inputs, keys for calls whose
//! dialect gives them no id, and idempotency keys. Pure.
//!
//! Every key is built from what the bytes of the session files say: the job, the checkpoint,
//! ordinals, tool names and inputs (and, for a call's `key`, the file's path relative to its job
//! directory and a byte offset). Never from a `file_id` or an absolute path, so the same files
//! give the same keys however they reached the index (another node, a restored dump, a
//! re-index after a rename of `sessions_dir`).

use sha2::{Digest, Sha256};

use crate::json::canonical_text::{canonical_text, write_canonical_text};
use crate::json::parse::Value;
use crate::json::reduce::holds_truncation;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    let mut out = String::with_capacity(2 * digest.len());
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// The canonical JSON of a validated value: `canonical_json()`'s form (JavaScript
/// `JSON.stringify` with keys sorted recursively) of what `JSON.parse` makes of the text, so an
/// agent computes the same text from the same input with its own `JSON.stringify`.
pub fn canonical_of(v: Value<'_>) -> String {
    canonical_text(v)
}

/// SHA-256 (hex) of the canonical JSON of a tool's input: the documented matching rule for
/// calls of dialects without ids. Exact for every text `JSON.parse` accepts (lone surrogate
/// escapes, any depth), so it equals the hash a pod computes in JavaScript before the call; the
/// text is streamed into the hash, not held.
pub fn input_hash(v: Value<'_>) -> String {
    let mut hasher = Sha256::new();
    let mut buf = String::new();
    write_canonical_text(v, &mut buf, |chunk| {
        hasher.update(chunk.as_bytes());
        chunk.clear();
    });
    hex(&hasher.finalize())
}

/// [`input_hash`] of a tool input read from an indexed payload, or `None` when the payload says
/// less than the file did there: the line was longer than `max_line_bytes` and its reduction cut
/// something inside the input (`json::reduce`'s sentinel or a key it cut). Hashing the cut text
/// would give a key the agent never computed; unknown, the call goes to `verify`
/// (`VerifyReason::InputUnknown`). A real input that holds the text `"cortex_buffer:truncated`
/// goes to `verify` too: the safe side, at the cost of a question the plan need not have asked.
pub fn stored_input_hash(v: Value<'_>) -> Option<String> {
    (!holds_truncation(v.text)).then(|| input_hash(v))
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
/// sha256_hex("cortex_buffer/call/v3\n" + job_id + "\n" + checkpoint_ref + "\n"
///            + call_ordinal + "\n" + tool_name + "\n" + input_hash)
/// ```
///
/// - `job_id`: the job's UUID in lower case (a transcript's session id for `session_recovery`);
/// - `checkpoint_ref`: [`checkpoint_ref`] of the writer's key checkpoint: the one it resumed
///   from (its plan's `checkpoint.ref`), or the last one it stored itself (`write_checkpoint`)
///   before the call started (`crc:` and its unsigned CRC-32, or `-` when there is none). A
///   checkpoint someone else stores while the writer runs does not change it;
/// - `call_ordinal`: the call's rank, from 1, among the calls with the same tool and input in
///   the writer's replay since that checkpoint (every call it went through: skipped, verified
///   or run), in decimal;
/// - `tool_name`: as written (empty when there is none);
/// - `input_hash`: [`input_hash`] of the tool input (`null` when there is none: [`NULL_INPUT_HASH`]).
///
/// Every pod that resumes from the same checkpoint gives the same call the same key, on every
/// node; `super::cycles` works out from the files which key each call was sent with.
pub fn call_idempotency_key(
    job_id: &str,
    checkpoint_ref: &str,
    call_ordinal: u32,
    tool_name: &str,
    input_hash: &str,
) -> String {
    let text = format!("cortex_buffer/call/v3\n{job_id}\n{checkpoint_ref}\n{call_ordinal}\n{tool_name}\n{input_hash}");
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

    // Expected hashes are Node 20's, from the repository root: `examples/node/keys.mjs`'s
    // sha256(canonicalJson(input)) of JSON.parse(text), printed by
    //
    //   hash() { node --input-type=module -e 'import {canonicalJson} from "./examples/node/keys.mjs"; import {createHash} from "node:crypto"; console.log(createHash("sha256").update(Buffer.from(canonicalJson(JSON.parse(process.argv[1])), "utf8")).digest("hex"))' "$1"; }
    //
    // and noted as `hash '<text>'`. Deep inputs overflow Node's default stack: run those under
    // `ulimit -s unlimited` with `node --stack-size=2000000`.

    fn hash_of(text: &str) -> String {
        input_hash(parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}")).root)
    }

    #[test]
    fn deep_inputs_are_hashed_exactly() {
        // Spaces and `1.0` make the text differ from its canonical form, `[[…1…]]`:
        // ulimit -s unlimited; node --stack-size=2000000 --input-type=module -e 'import {canonicalJson} from "./examples/node/keys.mjs"; import {createHash} from "node:crypto"; const n = 200000; console.log(createHash("sha256").update(Buffer.from(canonicalJson(JSON.parse("[ ".repeat(n) + "1.0" + " ]".repeat(n))), "utf8")).digest("hex"))'
        let n = 200_000;
        let deep = format!("{}1.0{}", "[ ".repeat(n), " ]".repeat(n));
        let started = std::time::Instant::now();
        assert_eq!(hash_of(&deep), "371bed2c3a56af914df74f608691cd3f8b04924216f30e1cee70317496ed5e97");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        // Objects to reorder around arrays, a lone surrogate at the bottom:
        // ulimit -s unlimited; node --stack-size=2000000 --input-type=module -e 'import {canonicalJson} from "./examples/node/keys.mjs"; import {createHash} from "node:crypto"; const n = 100000; console.log(createHash("sha256").update(Buffer.from(canonicalJson(JSON.parse("{\"z\":1,\"a\":".repeat(n) + "[".repeat(n) + "\"\\ud800\"" + "]".repeat(n) + "}".repeat(n))), "utf8")).digest("hex"))'
        let n = 100_000;
        let mixed =
            format!("{}{}\"\\ud800\"{}{}", "{\"z\":1,\"a\":".repeat(n), "[".repeat(n), "]".repeat(n), "}".repeat(n));
        assert_eq!(hash_of(&mixed), "33851ef80596941f217815873903f1c7dd5853abe59ef219f7a3f7d5cbeadd58");
    }

    #[test]
    fn lone_surrogates_are_hashed_as_javascript_writes_them() {
        // hash '"\ud83d"'
        assert_eq!(hash_of(r#""\ud83d""#), "2ef39d7e532783c70326bd1414557d41c30b77c9a5293288de1df7eb67575ffc");
        // hash '"a\uD83Db"'
        assert_eq!(hash_of(r#""a\uD83Db""#), "aa66e57af21bd72a3817856a89da4d97cb5ee4a473394907264f3135f1a10a97");
        // hash '"\ude00\ud83d"'
        assert_eq!(hash_of(r#""\ude00\ud83d""#), "cb91344a6d81e322394ff40c42c8ce0564018477448256a47bf611ed63dfe1e9");
        // A lone surrogate is not U+FFFD: hash '"\ufffd"' differs.
        assert_ne!(hash_of(r#""\ud83d""#), hash_of(r#""\ufffd""#));
        // hash '"\ud83d\ude00"' (the pair is the emoji, as UTF-8)
        assert_eq!(hash_of(r#""\ud83d\ude00""#), "7a0c50b92434b015545fe93ab723db2d4b2cdd14a441405624a9ce8be29f1d5a");
        assert_eq!(hash_of("\"😀\""), "7a0c50b92434b015545fe93ab723db2d4b2cdd14a441405624a9ce8be29f1d5a");
        // hash '"\ud800\ud83d\ude00"'
        assert_eq!(
            hash_of(r#""\ud800\ud83d\ude00""#),
            "4badaffc5c51f42c91927d6c7ce743ca1413bfe497d411ff3ceb087e11e41048"
        );
        // Keys, ordered by code units:
        // hash '{"\uffff":1,"\ud83d\ude00":2,"\ud800":3,"\udc00":4,"\ud83d":5,"\ud83dx":6,"\ue000":7,"\ud83d\ue000":8}'
        assert_eq!(
            hash_of(
                r#"{"\uffff":1,"\ud83d\ude00":2,"\ud800":3,"\udc00":4,"\ud83d":5,"\ud83dx":6,"\ue000":7,"\ud83d\ue000":8}"#
            ),
            "4477455027a6e48462a3c645c67e178b28293a6787c6f746d2aa4e89051915ee"
        );
        // hash '{"a":1,"b":2,"a":3,"\u0061":4,"\ud800":1,"\uD800":2}'
        assert_eq!(
            hash_of(r#"{"a":1,"b":2,"a":3,"\u0061":4,"\ud800":1,"\uD800":2}"#),
            "e81fbd0541830b8c6fc5adba026e3ef2e978766ec83b1b620689a200d5e1b3dd"
        );
    }

    #[test]
    fn controls_proto_indices_and_numbers_hash_as_in_javascript() {
        // hash '"\u0000\u001f\b\f\n\r\t\"\\\/\u007f\u2028"'
        assert_eq!(
            hash_of(r#""\u0000\u001f\b\f\n\r\t\"\\\/\u007f\u2028""#),
            "3aa9986b74ea5d9b194a6cb650eb75410b27e8c742bfc6655d0cdda0b5b9cc76"
        );
        // hash '{"\u0000":"\u0000","\u0001":1}'
        assert_eq!(
            hash_of(r#"{"\u0000":"\u0000","\u0001":1}"#),
            "8e7f9b1b0cb6677816c879bccbf7e47d1cb10831f0343de7d3a4715c27be6e34"
        );
        // hash '{"__proto__":{"a":1},"b":2,"\u005f_proto__":3}'
        assert_eq!(
            hash_of(r#"{"__proto__":{"a":1},"b":2,"\u005f_proto__":3}"#),
            "0ab1a6d394cd30195f0642b67ae1180c375ffadf5dd7f39c390668b5fdb6da93"
        );
        // hash '{"b":0,"10":1,"9":2,"01":3,"4294967294":4,"4294967295":5,"-1":6,"\u0031":7}'
        assert_eq!(
            hash_of(r#"{"b":0,"10":1,"9":2,"01":3,"4294967294":4,"4294967295":5,"-1":6,"\u0031":7}"#),
            "d7eb8d7bee4e5d6a11cbaa0baacb118dbff17a1c6ecb925ea9b56c4ba6c00e47"
        );
        // hash '[1.0,1e21,-0,1e400,-1e400,5e-324,1e-7,0.1,123456789012345678901234567890,1284054217024512.25]'
        assert_eq!(
            hash_of("[1.0,1e21,-0,1e400,-1e400,5e-324,1e-7,0.1,123456789012345678901234567890,1284054217024512.25]"),
            "60185c32dde8090ad0be7f68a7e31233b80b3668c1c87198444fbaa9792433fe"
        );
        // hash '[-0]'
        assert_eq!(hash_of("[-0]"), "d0bca111f8628137adc4c16f123496dcdd1d590d06cb5d9acd68b39fe656fb97");
        // hash '1e400' (Infinity is written null)
        assert_eq!(hash_of("1e400"), NULL_INPUT_HASH);
    }

    #[test]
    fn an_input_an_over_long_line_had_cut_has_no_hash() {
        let hash = |text: &str| stored_input_hash(parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}")).root);
        assert_eq!(hash(r#"{"b":1,"a":"s"}"#), Some(sha256_hex(br#"{"a":"s","b":1}"#)));
        assert_eq!(hash(r#"{"path":"a","content":{"cortex_buffer:truncated":{"bytes":70000,"head":"x"}}}"#), None);
        assert_eq!(hash(r#"[{"cortex_buffer:truncated":{"bytes":9}}]"#), None);
        assert_eq!(hash(r#"{"cortex_buffer:truncated(70000 bytes):kkk":1}"#), None);
        // A real input that holds the name at the start of a string: distrusted too (the safe
        // side); further inside a string it is just text.
        assert_eq!(hash(r#"{"note":"cortex_buffer:truncated"}"#), None);
        assert!(hash(r#"{"note":"see cortex_buffer:truncated"}"#).is_some());
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
            sha256_hex(format!("cortex_buffer/call/v3\nj1\ncrc:1\n1\nsend_email\n{NULL_INPUT_HASH}").as_bytes())
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
