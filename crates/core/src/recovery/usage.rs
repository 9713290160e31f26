//! Token usage as the session files record it, counted once per response. Pure.
//!
//! - Claude Code writes one response as one line per content block, every line repeating
//!   `usage` (only `output_tokens` grows towards the last). A response counts once per
//!   `(message.id, requestId)`, keeping the copy with the largest token total. `<synthetic>`
//!   lines (API errors, "No response requested.") are not responses. Usage embedded in
//!   `progress` lines (a sub-agent's messages) is never added: the sub-agent's own file has it.
//! - The cortex dialects: every `LLM_RESPONSE` counts (`prompt_tokens`/`completion_tokens`, or
//!   the shipped writer's `data.tokenUsage`). Its model is the event's own `model` (or
//!   `data.model`), else that of the file's latest `LLM_REQUEST` before it.
//!
//! Costs use the model's price in force at the response's time; a response whose model has
//! no price (or no model) leaves its group's cost unknown (NULL), never an error.

use std::collections::{BTreeMap, HashMap};

use crate::error::CbError;
use crate::indexer::dialect::Dialect;
use crate::json::parse::parse;
use crate::spend::cost::{cost, Price};
use crate::spend::decimal::Decimal;
use crate::spend::usage::{self, Usage};

use super::line::Row;

/// One response's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub model: Option<String>,
    pub ts_us: Option<i64>,
    pub usage: Usage,
}

fn total(u: &Usage) -> u64 {
    u.input + u.output + u.cache_write() + u.cache_read
}

/// Usage of one file (or one job), grouped by model.
#[derive(Debug, Default)]
pub struct Tally {
    dialect: Option<Dialect>,
    /// Claude Code responses by (message.id, requestId), in first-seen order.
    keyed: HashMap<(String, String), usize>,
    responses: Vec<Response>,
    /// cortex: the model of the file's latest LLM_REQUEST.
    request_model: Option<String>,
}

/// Totals of one model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelTotals {
    pub model: Option<String>,
    pub responses: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    /// `None` when a response has no model or no price in force.
    pub cost_usd: Option<Decimal>,
}

impl Tally {
    pub fn new(dialect: Option<Dialect>) -> Tally {
        Tally { dialect, ..Tally::default() }
    }

    /// Switches to the next file (cortex: the request model does not carry over).
    pub fn next_file(&mut self, dialect: Option<Dialect>) {
        self.dialect = dialect;
        self.request_model = None;
    }

    /// Feeds one event of the current file.
    pub fn feed(&mut self, row: &Row<'_>, columns: Usage) {
        let parsed = row.payload.and_then(|p| parse(p).ok());
        let root = parsed.as_ref().map(|p| p.root);
        match self.dialect {
            Some(Dialect::ClaudeCode) => {
                if row.event_type != Some("assistant") {
                    return;
                }
                let message = root.and_then(|r| r.get("message"));
                let [model, id, u] = message.map_or([None; 3], |m| m.pick(["model", "id", "usage"]));
                let model = model.and_then(|m| m.as_str()).map(|m| m.into_owned());
                if model.as_deref() == Some("<synthetic>") {
                    return;
                }
                let usage = match (root, u) {
                    // An assistant line without usage is no response to count.
                    (Some(_), None) => return,
                    (Some(_), Some(u)) => usage::parse(u).unwrap_or(columns),
                    // No payload in the index: its usage columns.
                    (None, _) => columns,
                };
                let response = Response { model, ts_us: row.ts_us, usage };
                let key =
                    id.and_then(|i| i.as_str()).map(|i| (i.into_owned(), row.request_id.unwrap_or("").to_owned()));
                match key {
                    Some(k) => match self.keyed.get(&k) {
                        Some(&i) => {
                            if let Some(kept) = self.responses.get_mut(i) {
                                if total(&response.usage) > total(&kept.usage) {
                                    *kept = response;
                                }
                            }
                        }
                        None => {
                            self.keyed.insert(k, self.responses.len());
                            self.responses.push(response);
                        }
                    },
                    None => self.responses.push(response),
                }
            }
            Some(Dialect::CortexSpike | Dialect::CortexPlane) => {
                let own_model =
                    root.and_then(|r| r.get("model").or_else(|| r.get("data").and_then(|d| d.get("model"))));
                let own_model = own_model.and_then(|m| m.as_str()).map(|m| m.into_owned());
                match row.event_type {
                    Some("LLM_REQUEST") => self.request_model = own_model,
                    Some("LLM_RESPONSE") => {
                        let data = root.and_then(|r| r.get("data"));
                        let usage = match data.and_then(|d| d.get("tokenUsage")) {
                            Some(u) => usage::parse(u).unwrap_or(columns),
                            // The shipped writer's text and progress responses carry no usage.
                            None if self.dialect == Some(Dialect::CortexPlane) && root.is_some() => return,
                            None => columns,
                        };
                        let model = own_model.or_else(|| self.request_model.clone());
                        self.responses.push(Response { model, ts_us: row.ts_us, usage });
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    pub fn responses(&self) -> &[Response] {
        &self.responses
    }

    /// Totals per model (sorted by model; no model last), priced by `price(model, ts)`.
    pub fn totals(
        &self,
        mut price: impl FnMut(&str, Option<i64>) -> Result<Option<Price>, CbError>,
    ) -> Result<Vec<ModelTotals>, CbError> {
        let mut by_model: BTreeMap<(bool, String), ModelTotals> = BTreeMap::new();
        for r in &self.responses {
            let key = (r.model.is_none(), r.model.clone().unwrap_or_default());
            let t = by_model.entry(key).or_insert_with(|| ModelTotals {
                model: r.model.clone(),
                cost_usd: Some(Decimal::ZERO),
                ..ModelTotals::default()
            });
            t.responses += 1;
            t.input_tokens += r.usage.input;
            t.output_tokens += r.usage.output;
            t.cache_creation_input_tokens += r.usage.cache_write();
            t.cache_read_input_tokens += r.usage.cache_read;
            let priced = match &r.model {
                Some(m) => price(m, r.ts_us)?.map(|p| cost(&r.usage, &p)).transpose()?,
                None => None,
            };
            t.cost_usd = match (t.cost_usd, priced) {
                (Some(sum), Some(c)) => Some(sum.checked_add(c)?),
                _ => None,
            };
        }
        Ok(by_model.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn feed_file(t: &mut Tally, path: &Path) {
        let bytes = std::fs::read(path).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for line in text.split('\n') {
            let Ok(p) = parse(line) else { continue };
            let cols = crate::indexer::normalize::columns(&p, Some(Dialect::ClaudeCode));
            let u = Usage {
                input: cols.input_tokens.unwrap_or(0) as u64,
                output: cols.output_tokens.unwrap_or(0) as u64,
                cache_write_5m: cols.cache_write_tokens.unwrap_or(0) as u64,
                cache_write_1h: 0,
                cache_read: cols.cache_read_tokens.unwrap_or(0) as u64,
            };
            t.feed(
                &Row {
                    event_type: cols.event_type.as_deref(),
                    ts_us: cols.ts_us,
                    request_id: cols.request_id.as_deref(),
                    payload: Some(line),
                    ..Row::default()
                },
                u,
            );
        }
    }

    /// The same rule written independently over serde_json values.
    fn expected(path: &Path) -> (i64, u64, u64, u64, u64) {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
        let mut best: HashMap<(String, String), (u64, u64, u64, u64)> = HashMap::new();
        let mut unkeyed = Vec::new();
        for line in text.split('\n') {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            if v["type"] != "assistant" || v["message"]["model"] == "<synthetic>" || v["message"]["usage"].is_null() {
                continue;
            }
            let u = &v["message"]["usage"];
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            let t =
                (n("input_tokens"), n("output_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens"));
            match v["message"]["id"].as_str() {
                Some(id) => {
                    let k = (id.to_owned(), v["requestId"].as_str().unwrap_or("").to_owned());
                    let e = best.entry(k).or_insert(t);
                    if t.0 + t.1 + t.2 + t.3 > e.0 + e.1 + e.2 + e.3 {
                        *e = t;
                    }
                }
                None => unkeyed.push(t),
            }
        }
        let all: Vec<_> = best.values().chain(unkeyed.iter()).collect();
        (
            all.len() as i64,
            all.iter().map(|t| t.0).sum(),
            all.iter().map(|t| t.1).sum(),
            all.iter().map(|t| t.2).sum(),
            all.iter().map(|t| t.3).sum(),
        )
    }

    #[test]
    fn every_real_transcript_counts_each_response_once() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pgrx-tests/fixtures/claude-code");
        let mut dirs = vec![root];
        let mut checked = 0;
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "jsonl") {
                    continue;
                }
                let mut t = Tally::new(Some(Dialect::ClaudeCode));
                feed_file(&mut t, &p);
                let totals = t.totals(|_, _| Ok(None)).unwrap_or_default();
                let sum = |f: fn(&ModelTotals) -> u64| totals.iter().map(f).sum::<u64>();
                let got = (
                    totals.iter().map(|m| m.responses).sum::<i64>(),
                    sum(|m| m.input_tokens),
                    sum(|m| m.output_tokens),
                    sum(|m| m.cache_creation_input_tokens),
                    sum(|m| m.cache_read_input_tokens),
                );
                assert_eq!(got, expected(&p), "{}", p.display());
                assert!(totals.iter().all(|m| m.cost_usd.is_none()), "no prices given");
                checked += 1;
            }
        }
        assert!(checked >= 20);
    }

    #[test]
    fn split_responses_keep_the_largest_copy_and_skip_synthetic_and_progress() {
        // entireio-cli/ca/…: lines 53-56 are one response over four lines, output_tokens 3, 3, 3, 1104.
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../pgrx-tests/fixtures/claude-code/entireio-cli/ca/fca7ea73ac/0/full.jsonl");
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()).into_owned();
        let lines: Vec<&str> = text.split('\n').collect();
        let mut t = Tally::new(Some(Dialect::ClaudeCode));
        for line in &lines[52..56] {
            let Ok(parsed) = parse(line) else { continue };
            let cols = crate::indexer::normalize::columns(&parsed, Some(Dialect::ClaudeCode));
            t.feed(
                &Row {
                    event_type: Some("assistant"),
                    request_id: cols.request_id.as_deref(),
                    payload: Some(line),
                    ..Row::default()
                },
                Usage::default(),
            );
        }
        assert_eq!(t.responses().len(), 1);
        assert_eq!(t.responses()[0].usage.output, 1104);
        let mut s = Tally::new(Some(Dialect::ClaudeCode));
        s.feed(&Row { event_type: Some("assistant"), payload: Some(r#"{"type":"assistant","message":{"id":"m","model":"<synthetic>","usage":{"input_tokens":1,"output_tokens":1}}}"#), ..Row::default() }, Usage::default());
        s.feed(
            &Row {
                event_type: Some("progress"),
                payload: Some(
                    r#"{"type":"progress","data":{"message":{"message":{"id":"x","usage":{"input_tokens":5}}}}}"#,
                ),
                ..Row::default()
            },
            Usage::default(),
        );
        assert!(s.responses().is_empty());
    }

    #[test]
    fn cortex_responses_take_the_request_model_and_are_priced() {
        let mut t = Tally::new(Some(Dialect::CortexSpike));
        let row = |ty: &'static str, payload: &'static str| Row {
            event_type: Some(ty),
            ts_us: Some(5),
            payload: Some(payload),
            ..Row::default()
        };
        t.feed(&row("LLM_REQUEST", r#"{"type":"LLM_REQUEST","model":"m1"}"#), Usage::default());
        t.feed(
            &row("LLM_RESPONSE", r#"{"type":"LLM_RESPONSE","prompt_tokens":1000,"completion_tokens":10}"#),
            Usage { input: 1000, output: 10, ..Usage::default() },
        );
        t.next_file(Some(Dialect::CortexPlane));
        t.feed(&row("LLM_RESPONSE", r#"{"type":"LLM_RESPONSE","data":{"type":"usage","tokenUsage":{"inputTokens":7,"outputTokens":3,"cacheReadTokens":2,"cacheCreationTokens":1}}}"#), Usage::default());
        t.feed(
            &row("LLM_RESPONSE", r#"{"type":"LLM_RESPONSE","data":{"type":"text","content":"hi"}}"#),
            Usage::default(),
        );
        let d = |s: &str| Decimal::parse(s).unwrap_or(Decimal::ZERO);
        let price = Price {
            input: d("3"),
            output: d("15"),
            cache_write_5m: d("3.75"),
            cache_write_1h: d("6"),
            cache_read: d("0.3"),
        };
        let totals = t.totals(|m, _| Ok((m == "m1").then_some(price))).unwrap_or_default();
        assert_eq!(totals.len(), 2);
        assert_eq!(
            (totals[0].model.as_deref(), totals[0].input_tokens, totals[0].output_tokens),
            (Some("m1"), 1000, 10)
        );
        assert_eq!(totals[0].cost_usd.map(|c| c.to_string()), Some("0.00315".to_owned()));
        assert_eq!(
            (totals[1].model.as_deref(), totals[1].input_tokens, totals[1].cache_read_input_tokens, totals[1].cost_usd),
            (None, 7, 2, None)
        );
    }
}
