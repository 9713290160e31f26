//! Token usage of one LLM call, from any of the spellings seen in the wild. Pure.
//!
//! - the seed design: `input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens`;
//! - Anthropic's API and Claude Code: `input_tokens, output_tokens, cache_creation_input_tokens,
//!   cache_read_input_tokens`, optionally `cache_creation{ephemeral_5m_input_tokens,
//!   ephemeral_1h_input_tokens}` splitting cache writes by lifetime;
//! - the control plane: `tokenUsage{inputTokens, outputTokens, cacheReadTokens,
//!   cacheCreationTokens}` (camelCase; `...InputTokens` forms are accepted too).
//!
//! An object with no counts of its own may wrap them in `usage` or `tokenUsage` (one level).
//! Counts are JSON numbers that are whole and non-negative (JavaScript reads `15000.0` as 15000)
//! and at most 2^53 - 1; `null` counts as absent. Two spellings of one count must agree.

use crate::error::{CbError, SqlState};
use crate::json::node::{JsonNode, Kind};
use crate::json::number::js_number_to_string;

/// Token counts of one call. Cache writes are split by cache lifetime (priced differently).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub cache_read: u64,
}

impl Usage {
    /// All cache writes, whatever their lifetime.
    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }

    /// Input tokens as budgets count them: uncached input + cache writes + cache reads (every
    /// token the model read). Cannot overflow: each count is below 2^53.
    pub fn budget_input(&self) -> u64 {
        self.input + self.cache_write() + self.cache_read
    }
}

/// JavaScript's `Number.MAX_SAFE_INTEGER`: larger counts cannot be told apart in a double.
pub const MAX_COUNT: u64 = (1 << 53) - 1;

const INPUT: &[&str] = &["input_tokens", "inputTokens"];
const OUTPUT: &[&str] = &["output_tokens", "outputTokens"];
const CACHE_WRITE: &[&str] =
    &["cache_creation_input_tokens", "cache_creation_tokens", "cacheCreationInputTokens", "cacheCreationTokens"];
const CACHE_READ: &[&str] =
    &["cache_read_input_tokens", "cache_read_tokens", "cacheReadInputTokens", "cacheReadTokens"];
const BREAKDOWN: &str = "cache_creation";
const BREAKDOWN_5M: &str = "ephemeral_5m_input_tokens";
const BREAKDOWN_1H: &str = "ephemeral_1h_input_tokens";
const WRAPPERS: &[&str] = &["tokenUsage", "usage"];

const SPELLINGS_HINT: &str = "Pass {\"input_tokens\", \"output_tokens\", \"cache_creation_input_tokens\", \"cache_read_input_tokens\"} (Anthropic), {\"input_tokens\", \"output_tokens\", \"cache_creation_tokens\", \"cache_read_tokens\"}, or {\"tokenUsage\": {\"inputTokens\", \"outputTokens\", \"cacheCreationTokens\", \"cacheReadTokens\"}}.";

fn invalid(message: String) -> CbError {
    CbError::new(SqlState::InvalidParameterValue, message).with_hint(SPELLINGS_HINT)
}

/// An object's members, last occurrence of a key winning (as in JavaScript).
struct Members<'a, N> {
    members: Vec<(Option<&'a str>, N)>,
}

impl<'a, N: JsonNode<'a>> Members<'a, N>
where
    CbError: From<N::Error>,
{
    fn of(node: N) -> Result<Self, CbError> {
        let mut members = Vec::new();
        node.children(&mut members)?;
        Ok(Members { members })
    }

    fn get(&self, key: &str) -> Option<N> {
        self.members.iter().rev().find(|(k, _)| *k == Some(key)).map(|(_, v)| *v)
    }

    /// The present, non-null member among `keys`, with the key it was found under.
    fn present(&self, keys: &[&'static str]) -> Result<Vec<(&'static str, N)>, CbError> {
        let mut out = Vec::new();
        for key in keys {
            if let Some(v) = self.get(key) {
                if v.kind()? != Kind::Null {
                    out.push((*key, v));
                }
            }
        }
        Ok(out)
    }

    /// One count spelled any of `keys`; `None` when absent. Spellings that disagree are an error.
    fn count(&self, keys: &[&'static str]) -> Result<Option<u64>, CbError> {
        let mut found: Option<(&str, u64)> = None;
        for (key, node) in self.present(keys)? {
            let value = count_value(key, node)?;
            match found {
                Some((first, v)) if v != value => {
                    return Err(invalid(format!("usage gives {first} = {v} but {key} = {value}")));
                }
                Some(_) => {}
                None => found = Some((key, value)),
            }
        }
        Ok(found.map(|(_, v)| v))
    }
}

fn count_value<'a, N: JsonNode<'a>>(key: &str, node: N) -> Result<u64, CbError>
where
    CbError: From<N::Error>,
{
    match node.kind()? {
        Kind::Number(x) => {
            let shown = js_number_to_string(x);
            if x.is_nan() {
                Err(invalid(format!("usage {key} is not a number")))
            } else if x < 0.0 {
                Err(invalid(format!("usage {key} is negative ({shown})")))
            } else if x.fract() != 0.0 {
                Err(invalid(format!("usage {key} is not a whole number ({shown})")))
            } else if x > MAX_COUNT as f64 {
                Err(CbError::new(SqlState::NumericValueOutOfRange, format!("usage {key} is too large ({shown})"))
                    .with_hint("Token counts must be at most 9007199254740991 (2^53 - 1)."))
            } else {
                // Whole, non-negative and at most 2^53 - 1: exact in u64.
                Ok(x as u64)
            }
        }
        _ => Err(invalid(format!("usage {key} must be a number"))),
    }
}

fn has_any_count<'a, N: JsonNode<'a>>(m: &Members<'a, N>) -> Result<bool, CbError>
where
    CbError: From<N::Error>,
{
    for keys in [INPUT, OUTPUT, CACHE_WRITE, CACHE_READ, &[BREAKDOWN][..]] {
        if !m.present(keys)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reads one call's usage from `root` (a JSON object in any supported spelling).
pub fn parse<'a, N: JsonNode<'a>>(root: N) -> Result<Usage, CbError>
where
    CbError: From<N::Error>,
{
    if root.kind()? != Kind::Object {
        return Err(invalid("usage must be a JSON object".to_owned()));
    }
    let mut m = Members::of(root)?;
    if !has_any_count(&m)? {
        for wrapper in WRAPPERS {
            if let Some(inner) = m.get(wrapper) {
                if inner.kind()? == Kind::Object {
                    m = Members::of(inner)?;
                    break;
                }
            }
        }
        if !has_any_count(&m)? {
            return Err(invalid("usage has no token counts".to_owned()));
        }
    }

    let input = m.count(INPUT)?;
    let output = m.count(OUTPUT)?;
    let cache_write = m.count(CACHE_WRITE)?;
    let cache_read = m.count(CACHE_READ)?;
    let (cache_write_5m, cache_write_1h) = match m.present(&[BREAKDOWN])?.first() {
        None => (cache_write.unwrap_or(0), 0),
        Some((_, node)) => {
            if node.kind()? != Kind::Object {
                return Err(invalid(format!(
                    "usage {BREAKDOWN} must be an object of {BREAKDOWN_5M} and {BREAKDOWN_1H}"
                )));
            }
            let b = Members::of(*node)?;
            let five = b.count(&[BREAKDOWN_5M])?.unwrap_or(0);
            let hour = b.count(&[BREAKDOWN_1H])?.unwrap_or(0);
            if let Some(total) = cache_write {
                if five + hour != total {
                    return Err(CbError::new(
                        SqlState::InvalidParameterValue,
                        format!("usage {BREAKDOWN} ({five} + {hour}) does not add up to the cache write total ({total})"),
                    )
                    .with_hint("The 5-minute and 1-hour cache writes must sum to cache_creation_input_tokens; pass the usage exactly as the API returned it."));
                }
            }
            (five, hour)
        }
    };
    Ok(Usage {
        input: input.unwrap_or(0),
        output: output.unwrap_or(0),
        cache_write_5m,
        cache_write_1h,
        cache_read: cache_read.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(json: &str) -> Result<Usage, CbError> {
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        parse(&v)
    }

    fn ok(json: &str) -> Usage {
        usage(json).unwrap_or_else(|e| panic!("{json}: {e:?}"))
    }

    fn err(json: &str) -> CbError {
        usage(json).expect_err(json)
    }

    #[test]
    fn reads_the_seed_spelling() {
        let u = ok(
            r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000, "cache_read_tokens": 40}"#,
        );
        assert_eq!(u, Usage { input: 15000, output: 2150, cache_write_5m: 8000, cache_write_1h: 0, cache_read: 40 });
        assert_eq!(u.budget_input(), 23040);
    }

    #[test]
    fn reads_anthropic_usage_with_and_without_the_lifetime_breakdown() {
        let plain = ok(
            r#"{"input_tokens": 3, "output_tokens": 9, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 7000}"#,
        );
        assert_eq!(plain, Usage { input: 3, output: 9, cache_write_5m: 500, cache_write_1h: 0, cache_read: 7000 });
        let split = ok(r#"{"input_tokens": 3, "output_tokens": 9, "cache_creation_input_tokens": 500,
            "cache_read_input_tokens": 7000, "service_tier": "standard",
            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300}}"#);
        assert_eq!(split, Usage { input: 3, output: 9, cache_write_5m: 200, cache_write_1h: 300, cache_read: 7000 });
        assert_eq!(split.cache_write(), 500);
        // The breakdown alone gives the total.
        let only = ok(r#"{"input_tokens": 1, "cache_creation": {"ephemeral_1h_input_tokens": 40}}"#);
        assert_eq!((only.cache_write_5m, only.cache_write_1h), (0, 40));
    }

    #[test]
    fn a_breakdown_that_does_not_add_up_is_refused() {
        let e = err(r#"{"input_tokens": 1, "cache_creation_input_tokens": 500,
            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 299}}"#);
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.message.contains("does not add up"), "{}", e.message);
        assert_eq!(err(r#"{"input_tokens": 1, "cache_creation": 5}"#).state, SqlState::InvalidParameterValue);
        // null breakdown and null counts are absent.
        assert_eq!(ok(r#"{"input_tokens": 1, "cache_creation": null, "output_tokens": null}"#).output, 0);
    }

    #[test]
    fn reads_the_control_planes_camel_case_wrapped_or_not() {
        let expected = Usage { input: 10, output: 20, cache_write_5m: 30, cache_write_1h: 0, cache_read: 40 };
        let inner = r#"{"inputTokens": 10, "outputTokens": 20, "cacheCreationTokens": 30, "cacheReadTokens": 40}"#;
        assert_eq!(ok(inner), expected);
        assert_eq!(ok(&format!(r#"{{"tokenUsage": {inner}, "durationMs": 1200}}"#)), expected);
        // So is a message object carrying Anthropic `usage`.
        let msg = ok(r#"{"id": "msg_1", "model": "m", "usage": {"input_tokens": 5, "output_tokens": 6}}"#);
        assert_eq!((msg.input, msg.output), (5, 6));
        // Only one level of wrapping, and only when the outer object has no counts itself.
        assert_eq!(err(r#"{"a": {"usage": {"input_tokens": 5}}}"#).state, SqlState::InvalidParameterValue);
        let outer = ok(r#"{"input_tokens": 1, "usage": {"input_tokens": 99}}"#);
        assert_eq!(outer.input, 1);
    }

    #[test]
    fn spellings_of_one_count_must_agree() {
        assert_eq!(ok(r#"{"input_tokens": 5, "inputTokens": 5}"#).input, 5);
        let e = err(r#"{"cache_read_tokens": 5, "cache_read_input_tokens": 6}"#);
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.message.contains("cache_read_input_tokens = 6"), "{}", e.message);
    }

    #[test]
    fn counts_must_be_whole_non_negative_safe_integers() {
        assert_eq!(ok(r#"{"input_tokens": 15000.0}"#).input, 15000);
        assert_eq!(ok(r#"{"input_tokens": 1e3}"#).input, 1000);
        assert_eq!(ok(r#"{"input_tokens": -0.0}"#).input, 0);
        assert_eq!(ok(r#"{"input_tokens": 9007199254740991}"#).input, MAX_COUNT);
        for (json, needle) in [
            (r#"{"input_tokens": -1}"#, "negative"),
            (r#"{"output_tokens": 1.5}"#, "whole"),
            (r#"{"output_tokens": "15"}"#, "must be a number"),
            (r#"{"output_tokens": true}"#, "must be a number"),
            (r#"{"output_tokens": [1]}"#, "must be a number"),
        ] {
            let e = err(json);
            assert_eq!(e.state, SqlState::InvalidParameterValue, "{json}");
            assert!(e.message.contains(needle), "{json}: {}", e.message);
            assert!(e.hint.is_some());
        }
        assert_eq!(err(r#"{"input_tokens": 9007199254740993}"#).state, SqlState::NumericValueOutOfRange);
        assert_eq!(err(r#"{"input_tokens": 1e300}"#).state, SqlState::NumericValueOutOfRange);
    }

    #[test]
    fn usage_without_any_count_or_not_an_object_is_refused() {
        for json in [r#"{}"#, r#"{"inputs": 5}"#, r#"{"usage": 5}"#, r#"[1, 2]"#, r#"5"#, r#"null"#] {
            assert_eq!(err(json).state, SqlState::InvalidParameterValue, "{json}");
        }
    }

    #[test]
    fn every_usage_in_the_real_claude_code_transcripts_parses() {
        // One usage object per line, taken from the transcripts in ../shared/data/claude-code
        // (see src/spend/testdata/SOURCES.md).
        let fixture = include_str!("testdata/claude_code_usage.jsonl");
        let mut n = 0;
        for line in fixture.lines().filter(|l| !l.is_empty()) {
            let u = ok(line);
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
            assert_eq!(u.input, field("input_tokens"));
            assert_eq!(u.output, field("output_tokens"));
            assert_eq!(u.cache_write(), field("cache_creation_input_tokens"));
            assert_eq!(u.cache_read, field("cache_read_input_tokens"));
            n += 1;
        }
        assert!(n >= 100, "fixture has {n} lines");
    }
}
