//! `agent_state` on every real transcript in `pgrx-tests/fixtures/claude-code`, cut at every
//! line boundary. What the agent was doing at a cut is proved by the rest of the real file, by
//! these rules (independent of the tracker's own):
//!
//! - a tool call started at or before the cut whose result comes after it: a tool was running
//!   (`acting`);
//! - otherwise the next line that tells anything:
//!   - an `assistant` line of a new response, a `system` `api_error`: the model was producing
//!     (`thinking`). (Lines of a response already finished with a `stop_reason` at the cut are
//!     the same response being written out, and are passed over);
//!   - a typed prompt, a local command, a turn end, a Stop hook: the agent was waiting (`idle`);
//!   - an interrupt, a compaction, a task notification, a hook stop, or a meta line: it could
//!     have been either, so the cut proves nothing;
//! - nothing after the cut: nothing is proved.
//!
//! `confirmed` verdicts must equal what is proved, every time; `inferred` ones must agree at
//! least nine times in ten over all cuts (they name the alternative in `detail`).

use super::*;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pgrx-tests/fixtures/claude-code")
}

fn transcripts() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![fixtures()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 20, "fixtures missing: {}", fixtures().display());
    out
}

/// A file's lines: (line number, byte offset, text); blank lines dropped.
fn lines(p: &Path) -> Vec<(i64, i64, String)> {
    let bytes = std::fs::read(p).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    let mut offset = 0i64;
    for (i, l) in text.split('\n').enumerate() {
        if !l.trim().is_empty() {
            out.push((i as i64 + 1, offset, l.to_owned()));
        }
        offset += l.len() as i64 + 1;
    }
    out
}

fn json(l: &str) -> Option<serde_json::Value> {
    serde_json::from_str(l).ok()
}

fn text_of(v: &serde_json::Value) -> String {
    match &v["message"]["content"] {
        serde_json::Value::String(s) => s.trim_start().to_owned(),
        serde_json::Value::Array(a) => a
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(" ")
            .trim_start()
            .to_owned(),
        _ => String::new(),
    }
}

/// The tool calls each line starts and answers (main conversation only).
struct Calls {
    uses: Vec<Vec<String>>,
    results: Vec<Vec<String>>,
}

fn calls(all: &[Option<serde_json::Value>], subagent: bool) -> Calls {
    let main = |v: &serde_json::Value| subagent || v["isSidechain"] != true;
    let ids = |v: &Option<serde_json::Value>, ty: &str, key: &str, want: bool| -> Vec<String> {
        let Some(v) = v else { return Vec::new() };
        if !want {
            return Vec::new();
        }
        v["message"]["content"]
            .as_array()
            .map(|a| a.iter().filter(|b| b["type"] == ty).filter_map(|b| b[key].as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    Calls {
        uses: all
            .iter()
            .map(|v| ids(v, "tool_use", "id", v.as_ref().is_some_and(|v| v["type"] == "assistant" && main(v))))
            .collect(),
        results: all.iter().map(|v| ids(v, "tool_result", "tool_use_id", true)).collect(),
    }
}

/// What the rest of the file proves the state was after line index `k` (see the module doc).
fn proved(all: &[Option<serde_json::Value>], c: &Calls, k: usize, subagent: bool) -> Option<State> {
    let main = |v: &serde_json::Value| subagent || v["isSidechain"] != true;
    // Calls started at or before the cut, answered after it.
    let mut started: Vec<&String> = c.uses[..=k].iter().flatten().collect();
    for r in c.results[..=k].iter().flatten() {
        started.retain(|s| *s != r);
    }
    if !started.is_empty() && c.results[k + 1..].iter().flatten().any(|r| started.contains(&r)) {
        return Some(State::Acting);
    }
    // A response already finished at the cut: its remaining lines prove nothing new.
    let finished_response =
        all[..=k].iter().rev().flatten().find(|v| v["type"] == "assistant" || v["type"] == "user").and_then(|v| {
            (v["type"] == "assistant" && !v["message"]["stop_reason"].is_null()).then(|| v["message"]["id"].clone())
        });
    for v in all[k + 1..].iter() {
        let Some(v) = v else { continue };
        if !main(v) {
            continue;
        }
        match v["type"].as_str() {
            Some("assistant") => {
                if finished_response.as_ref().is_some_and(|id| *id == v["message"]["id"]) {
                    continue;
                }
                return Some(State::Thinking);
            }
            Some("user") => {
                if v["isCompactSummary"] == true
                    || v["message"]["content"].as_array().is_some_and(|a| a.iter().any(|b| b["type"] == "tool_result"))
                {
                    return None;
                }
                let t = text_of(v);
                if v["isMeta"] == true {
                    if t.starts_with("<local-command-caveat>") || t.starts_with("Caveat:") {
                        continue;
                    }
                    return None;
                }
                if t.starts_with("[Request interrupted")
                    || t.starts_with("<task-notification>")
                    || t.starts_with("Operation stopped")
                {
                    return None;
                }
                return Some(State::Idle);
            }
            Some("system") => match v["subtype"].as_str() {
                Some("stop_hook_summary" | "turn_duration") => return Some(State::Idle),
                Some("api_error") => return Some(State::Thinking),
                Some("compact_boundary") => return None,
                None => {
                    let c = strip_ansi(v["content"].as_str().unwrap_or(""));
                    if c.trim_start_matches("Running ").starts_with("Stop") {
                        return Some(State::Idle);
                    }
                }
                _ => {}
            },
            Some("progress") if v["data"]["type"] == "hook_progress" && v["data"]["hookEvent"] == "Stop" => {
                return Some(State::Idle);
            }
            _ => {}
        }
    }
    None
}

fn replay(ls: &[(i64, i64, String)], subagent: bool) -> Verdict {
    let mut t = Tracker::new(subagent);
    for (n, o, l) in ls {
        t.feed(*n, *o, l);
    }
    t.verdict()
}

/// Replays from the last anchor at or before `k` only, as tail readers do.
fn replay_tail(ls: &[(i64, i64, String)], anchors: &[bool], k: usize, subagent: bool) -> Verdict {
    let start = anchors[..=k].iter().rposition(|a| *a).unwrap_or(0);
    replay(&ls[start..=k], subagent)
}

#[test]
fn every_cut_of_every_real_transcript() {
    let (mut confirmed, mut inferred, mut agreed, mut unproved) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for path in transcripts() {
        let ls = lines(&path);
        let sub = is_subagent_file(&path.to_string_lossy());
        let all: Vec<_> = ls.iter().map(|(_, _, l)| json(l)).collect();
        let c = calls(&all, sub);
        let anchors: Vec<bool> = ls.iter().map(|(_, _, l)| is_anchor(l, sub)).collect();
        let mut t = Tracker::new(sub);
        for k in 0..ls.len() {
            let (n, o, l) = &ls[k];
            t.feed(*n, *o, l);
            let v = t.verdict();
            // The tail replay must agree with the whole replay (checked at every fifth cut and the
            // last: replaying every window is quadratic).
            if k % 5 == 0 || k + 1 == ls.len() {
                assert_eq!(
                    replay_tail(&ls, &anchors, k, sub),
                    v,
                    "{} cut after line {n}: tail replay differs",
                    path.display()
                );
            }
            let Some(truth) = proved(&all, &c, k, sub) else {
                unproved += 1;
                continue;
            };
            match v.confidence {
                Confidence::Confirmed => {
                    confirmed += 1;
                    if v.state != truth {
                        wrong.push(format!(
                            "{} cut after line {n}: {} by {}, proved {}",
                            path.display(),
                            v.state.label(),
                            v.rule,
                            truth.label()
                        ));
                    }
                }
                Confidence::Inferred => {
                    inferred += 1;
                    agreed += usize::from(v.state == truth);
                }
            }
        }
    }
    assert!(wrong.is_empty(), "confirmed verdicts the file disproves:\n{}", wrong.join("\n"));
    eprintln!("cuts: {confirmed} confirmed (all right), {agreed}/{inferred} inferred agreed, {unproved} unproved");
    assert!(confirmed > 1500, "{confirmed}");
    assert!(agreed * 10 >= inferred * 9, "inferred agreed only {agreed}/{inferred}");
}

fn verdict_after(rel: &str, line: i64) -> Verdict {
    let path = fixtures().join(rel);
    let ls: Vec<_> = lines(&path).into_iter().filter(|(n, ..)| *n <= line).collect();
    replay(&ls, is_subagent_file(rel))
}

fn state_after(rel: &str, line: i64) -> (State, Confidence, &'static str) {
    let v = verdict_after(rel, line);
    (v.state, v.confidence, v.rule)
}

use Confidence::{Confirmed, Inferred};
use State::{Acting, Idle, Thinking};

const RECORDER: &str =
    "claude-code-log/-Users-dain-workspace-JSSoundRecorder/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl";

#[test]
fn several_tool_uses_of_one_response_stay_acting_until_the_last_result() {
    // Lines 204–206: one response (one message.id), three tool_use lines; 207–209 the results.
    assert_eq!(state_after(RECORDER, 204), (Acting, Confirmed, "tool_use"));
    assert_eq!(state_after(RECORDER, 206), (Acting, Confirmed, "tool_use"));
    assert_eq!(state_after(RECORDER, 207), (Acting, Confirmed, "tool_result_partial"));
    assert_eq!(state_after(RECORDER, 208), (Acting, Confirmed, "tool_result_partial"));
    assert_eq!(state_after(RECORDER, 209), (Thinking, Confirmed, "tool_result"));
    // 210–211: a thinking and a text line, both stop_reason end_turn (2.0.42 fills it).
    assert_eq!(state_after(RECORDER, 211), (Idle, Confirmed, "stop_reason"));
}

#[test]
fn a_cut_just_before_a_tool_result_is_acting() {
    // entireio-cli/ca/…: 82 is a Bash tool_use, 83 its result.
    assert_eq!(state_after("entireio-cli/ca/fca7ea73ac/0/full.jsonl", 82).0, Acting);
}

#[test]
fn responses_ending_in_stop_reason_null() {
    // 2.1.42: the last response is a thinking line and a text line, both stop_reason null,
    // then the Stop hook's progress line and a stop_hook_summary.
    let f = "claude-code-log/-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl";
    assert_eq!(state_after(f, 54), (Thinking, Inferred, "thinking_block"));
    assert_eq!(state_after(f, 55), (Thinking, Inferred, "open_response"));
    assert_eq!(state_after(f, 56), (Idle, Confirmed, "stop_hook"));
    assert_eq!(state_after(f, 57), (Idle, Confirmed, "turn_end"));
    // Then /exit: caveat (meta, skipped), the command, its output.
    assert_eq!(state_after(f, 59), (Idle, Confirmed, "turn_end"));
    assert_eq!(state_after(f, 60), (Idle, Inferred, "slash_command"));
    assert_eq!(state_after(f, 61), (Idle, Confirmed, "local_command"));
}

#[test]
fn rejected_tool_calls() {
    // sniffly v1.0.17: 13–14 reject two Bash calls ("STOP what you are doing…"), 15 is the
    // interrupt, 16 the person's "continue".
    let f = "sniffly/fed8ce56-bc79-401f-a83e-af084253362f.jsonl";
    assert_eq!(state_after(f, 13).0, Acting, "the second call is still open");
    assert_eq!(state_after(f, 14), (Idle, Confirmed, "tool_rejected"));
    assert_eq!(state_after(f, 15), (Idle, Confirmed, "interrupt"));
    assert_eq!(state_after(f, 16), (Thinking, Confirmed, "prompt"));
    // entireio-cli/37: one rejected Edit, then the interrupt line.
    assert_eq!(state_after("entireio-cli/37/995ebed6e4/2/full.jsonl", 160), (Idle, Confirmed, "tool_rejected"));
}

#[test]
fn api_errors_and_synthetic_lines() {
    let f = "entireio-cli/b0/2936744f3b/0/full.jsonl";
    let ls = lines(&fixtures().join(f));
    let retry = ls.iter().find(|(_, _, l)| l.contains("\"api_error\"")).map(|(n, ..)| *n).unwrap_or(0);
    assert_eq!(state_after(f, retry), (Thinking, Confirmed, "api_retry"));
    let synthetic = ls.iter().find(|(_, _, l)| l.contains("\"<synthetic>\"")).map(|(n, ..)| *n).unwrap_or(0);
    assert_eq!(state_after(f, synthetic), (Idle, Confirmed, "synthetic"));
}

#[test]
fn compaction_drops_open_calls() {
    let f = "entireio-cli/ca/fca7ea73ac/0/full.jsonl";
    let ls = lines(&fixtures().join(f));
    let boundary = ls.iter().find(|(_, _, l)| l.contains("\"compact_boundary\"")).map(|(n, ..)| *n).unwrap_or(0);
    assert_eq!(state_after(f, boundary), (Thinking, Inferred, "compaction"));
    // A call open at a compaction is forgotten: the result may be swallowed.
    let mut t = Tracker::new(false);
    t.feed(1, 0, r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash"}]}}"#);
    t.feed(2, 1, r#"{"type":"system","subtype":"compact_boundary"}"#);
    t.feed(3, 2, r#"{"type":"user","isCompactSummary":true,"message":{"content":"This session is being continued"}}"#);
    t.feed(
        4,
        3,
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Continuing"}],"stop_reason":"end_turn"}}"#,
    );
    assert_eq!(t.verdict().state, Idle);
}

#[test]
fn user_lines_that_are_not_prompts() {
    let mut t = Tracker::new(false);
    t.feed(1, 0, r#"{"type":"user","message":{"content":"Operation stopped by hook: tests must pass"}}"#);
    assert_eq!((t.verdict().state, t.verdict().rule), (Idle, "hook_stopped"));
    t.feed(
        2,
        1,
        r#"{"type":"user","message":{"content":"<task-notification><task-id>b1</task-id></task-notification>"}}"#,
    );
    assert_eq!((t.verdict().state, t.verdict().confidence), (Thinking, Inferred));
    // No response requested: a synthetic line written on resume after /exit.
    t.feed(3, 2, r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}"#);
    assert_eq!((t.verdict().state, t.verdict().rule), (Idle, "synthetic"));
}

#[test]
fn old_system_lines_without_subtype() {
    // 1.0.51: the response's text (line 50), then Stop hook lines without a subtype.
    let f = "claude-code-log/-Users-dain-workspace-claude-code-log-sample/326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl";
    assert_eq!(state_after(f, 50), (Thinking, Inferred, "open_response"));
    assert_eq!(state_after(f, 51), (Idle, Confirmed, "stop_hook"));
    // PostToolUse hook lines decide nothing.
    assert_eq!(state_after(f, 47).2, state_after(f, 46).2);
}

#[test]
fn sidechain_lines_in_the_parents_file() {
    // The excerpt: line 1 starts a Task; 2–8 are the sub-agent's own lines.
    let f = "claude-code-log/_excerpts/sidechain.jsonl";
    for line in 2..=8 {
        assert_eq!(state_after(f, line).0, Acting, "line {line}");
    }
}

#[test]
fn files_with_nothing_to_tell() {
    for f in [
        "claude-code-log/-Users-dain-workspace-JSSoundRecorder/2c5941bd-b9de-41d6-9414-221d175776f7.jsonl",
        "claude-code-log/-experiments-ideas/a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl",
        "sniffly/ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl",
    ] {
        assert_eq!(state_after(f, i64::MAX), (Idle, Inferred, "no_meaningful_line"), "{f}");
    }
}

#[test]
fn where_every_whole_transcript_ends() {
    // The state at the end of each real file, and why.
    let cases: [(&str, State, &str); 8] = [
        // Ends with /exit's output.
        ("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl", Idle, "local_command"),
        // The sub-agent's last line: end_turn.
        ("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl", Idle, "stop_reason"),
        // The other sub-agent ends on text with stop_reason null.
        ("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a36efb2a1231c41e2.jsonl", Thinking, "open_response"),
        // Ends with the Stop hook's progress lines after the last text.
        ("entireio-cli/10/a740e118e0/0/full.jsonl", Idle, "stop_hook"),
        ("entireio-cli/f9/f6f611b469/0/full.jsonl", Idle, "stop_hook"),
        // A snapshot taken mid-turn: the last response's text, then the Stop hook running.
        ("entireio-cli/37/995ebed6e4/2/full.jsonl", Idle, "stop_hook"),
        // 2.0.42: end_turn.
        (RECORDER, Idle, "stop_reason"),
        // 1.0.17: the last text has stop_reason null and nothing follows.
        ("sniffly/fed8ce56-bc79-401f-a83e-af084253362f.jsonl", Thinking, "open_response"),
    ];
    for (f, state, rule) in cases {
        let v = verdict_after(f, i64::MAX);
        assert_eq!((v.state, v.rule), (state, rule), "{f}: {}", v.detail);
        assert!(v.line_no.is_some() && v.ts_us.is_some(), "{f}");
    }
}

#[test]
fn cortex_sessions() {
    assert_eq!(cortex_state(Some("TOOL_CALL")), (Acting, Confirmed));
    assert_eq!(cortex_state(Some("SESSION_END")), (Idle, Confirmed));
    assert_eq!(cortex_state(Some("LLM_RESPONSE")), (Thinking, Inferred));
    assert_eq!(cortex_state(Some("WHATEVER")), (State::Unknown, Inferred));
}
