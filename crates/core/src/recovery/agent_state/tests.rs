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
//!
//! `confirmed_only_where_the_bytes_prove_it` asks the other question: what the bytes up to the
//! cut prove (see [`proven_by_prefix`]); a verdict is `confirmed` only there.

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
    // 1706 before tool calls of a response not known to have ended, rejections, interrupts of
    // a tool call and running Stop hooks became inferred (the bytes cannot prove them).
    assert!(confirmed > 1150, "{confirmed}");
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
    // The Stop hook is running: it could still block and make the model go on.
    assert_eq!(state_after(f, 56), (Idle, Inferred, "stop_hook"));
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
    // Idle, but not proved: a prompt queued while the tools ran, or typed in the rejection
    // dialog, would be answered at once.
    assert_eq!(state_after(f, 13), (Acting, Inferred, "tool_result_partial"), "the second call is being cancelled");
    assert_eq!(state_after(f, 14), (Idle, Inferred, "tool_rejected"));
    assert_eq!(state_after(f, 15), (Idle, Inferred, "interrupt"));
    assert_eq!(state_after(f, 16), (Thinking, Confirmed, "prompt"));
    // entireio-cli/37: one rejected Edit, then the interrupt line.
    assert_eq!(state_after("entireio-cli/37/995ebed6e4/2/full.jsonl", 160), (Idle, Inferred, "tool_rejected"));
    assert_eq!(state_after("entireio-cli/37/995ebed6e4/2/full.jsonl", 161), (Idle, Inferred, "interrupt"));
    // A plain interrupt (Escape while the model wrote) proves the turn is over.
    assert_eq!(state_after("entireio-cli/b0/2936744f3b/0/full.jsonl", 542), (Idle, Confirmed, "interrupt"));
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
    // No response requested: a synthetic line written on resume, when the person submits the
    // first prompt; that prompt follows at once, so it proves nothing.
    t.feed(3, 2, r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}"#);
    assert_eq!(state_of(&t), (Idle, Inferred, "synthetic"));
    // A prompt a UserPromptSubmit hook refused.
    t.feed(4, 3, r#"{"type":"user","message":{"content":"deploy it"}}"#);
    t.feed(5, 4, r#"{"type":"system","subtype":"informational","content":"UserPromptSubmit operation blocked by hook:\nno deploys on Friday"}"#);
    assert_eq!(state_of(&t), (Idle, Confirmed, "hook_stopped"));
}

fn state_of(t: &Tracker) -> (State, Confidence, &'static str) {
    let v = t.verdict();
    (v.state, v.confidence, v.rule)
}

#[test]
fn a_tool_call_runs_only_once_its_response_has_ended() {
    // 2.1.5: one response in four lines, stop_reason null, null, null, tool_use. After 55 the
    // model may still be writing (it is: 56 follows); 56 ends the response.
    let f = "entireio-cli/ca/fca7ea73ac/0/full.jsonl";
    assert_eq!(state_after(f, 55), (Acting, Inferred, "tool_use"));
    assert_eq!(state_after(f, 56), (Acting, Confirmed, "tool_use"));
    // 2.1.19: Task and Bash with stop_reason null, then the Task's PreToolUse hook: it runs.
    let f = "entireio-cli/10/a740e118e0/0/full.jsonl";
    assert_eq!(state_after(f, 18), (Acting, Inferred, "tool_use"));
    assert_eq!(state_after(f, 19), (Acting, Confirmed, "tool_progress"));
    // 2.1.114 sub-agent: tools start while the response streams, so a result (6) can come
    // before the response's next block (7, 9): a result does not prove the response ended.
    let f = "claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a36efb2a1231c41e2.jsonl";
    assert_eq!(state_after(f, 5), (Acting, Inferred, "tool_use"));
    assert_eq!(state_after(f, 6), (Thinking, Confirmed, "tool_result"));
    assert_eq!(state_after(f, 7), (Acting, Inferred, "tool_use"));
    assert_eq!(state_after(f, 9), (Acting, Confirmed, "tool_use"));
    // 1.0.98: only the response's last line has its stop_reason.
    let f = "claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl";
    assert_eq!(state_after(f, 17), (Acting, Inferred, "tool_use"));
    assert_eq!(state_after(f, 18), (Acting, Confirmed, "tool_use"));
}

#[test]
fn a_new_response_drops_calls_left_behind() {
    let mut t = Tracker::new(false);
    t.feed(1, 0, r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash"}],"stop_reason":null}}"#);
    assert_eq!(state_of(&t), (Acting, Inferred, "tool_use"));
    // The stream failed and was retried: t1 never runs.
    t.feed(2, 1, r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn"}}"#);
    assert_eq!(state_of(&t), (Idle, Confirmed, "stop_reason"));
}

#[test]
fn lines_that_end_a_turn_unless_claude_code_goes_on() {
    let tool = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"AskUserQuestion"}],"stop_reason":"tool_use"}}"#;
    // Escape while a tool waited: the result says so, then the interrupt line.
    let mut t = Tracker::new(false);
    t.feed(1, 0, tool);
    assert_eq!(state_of(&t), (Acting, Confirmed, "tool_use"));
    t.feed(2, 1, r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"[Request interrupted by user for tool use]","is_error":true}]}}"#);
    assert_eq!(state_of(&t), (Idle, Inferred, "tool_rejected"));
    let interrupt = r#"{"type":"user","message":{"content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]}}"#;
    t.feed(3, 2, interrupt);
    assert_eq!(state_of(&t), (Idle, Inferred, "interrupt"));
    // The output limit: Claude Code may ask the model to resume.
    let mut t = Tracker::new(false);
    t.feed(1, 0, r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"…"}],"stop_reason":"max_tokens"}}"#);
    assert_eq!(state_of(&t), (Idle, Inferred, "stop_reason"));
    // A Stop hook that reported an error may have blocked the stop.
    let summary = r#"{"type":"system","subtype":"stop_hook_summary","hookCount":1,"hookErrors":["tests fail"],"preventedContinuation":false}"#;
    t.feed(2, 1, summary);
    assert_eq!(state_of(&t), (Idle, Inferred, "turn_end"));
    // A UserPromptSubmit hook running after the prompt may still block it.
    let prompt = r#"{"type":"user","message":{"content":"go on"}}"#;
    t.feed(3, 2, prompt);
    assert_eq!(state_of(&t), (Thinking, Confirmed, "prompt"));
    t.feed(
        4,
        3,
        r#"{"type":"progress","data":{"type":"hook_progress","hookEvent":"UserPromptSubmit"},"toolUseID":"h1"}"#,
    );
    assert_eq!(state_of(&t), (Thinking, Inferred, "prompt"));
    // Tail readers still start at these lines: what they decide does not depend on earlier ones.
    let stop_hook = r#"{"type":"progress","data":{"type":"hook_progress","hookEvent":"Stop"},"toolUseID":"h2"}"#;
    for line in [interrupt, summary, prompt, stop_hook] {
        assert!(is_anchor(line, false), "{line}");
    }
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

/// What the bytes of a file up to a cut PROVE the agent is doing, by rules of their own (not
/// the tracker's), derived from the order in which Claude Code writes its lines. `None`: the
/// bytes leave two states open.
///
/// - **acting**: a tool call of the main conversation has no result yet, nothing after it
///   ended the turn or started another response (a prompt, an interrupt, a compaction, a turn
///   end, a synthetic or local line, a line of another response: Claude Code calls the model
///   again only once every call has its result, so a call left behind never runs), and its
///   response is known complete:
///   - a line of the response has a `stop_reason`: Claude Code fills it in only once the
///     response has ended, on every line where it writes them after the end (2.0.42, 2.1.114's
///     main file), on the last one where it writes them as they stream (1.0.98 `1af7fc5e…` 18,
///     2.1.5 `entireio-cli/ca/…` 56, 2.1.114's sub-agents), or
///   - a line after the response's last line so far shows its tools running: a result for one
///     of its calls (up to 2.1.49 a response's tools run only after its last block was
///     written, and its results follow its last line in every real file), a progress line of
///     one of its calls (`bash_progress`, `agent_progress`, a search's progress, a
///     Pre/PostToolUse hook's progress), a sub-agent's sidechain line. A result before the
///     response's last line does not count: 2.1.114 starts tools while the response streams,
///     and a block written after a result (`agent-a36efb2a…` 6–7) shows the model was still
///     writing.
///
///   Without that the model may still be writing blocks of the response (2.x writes one line
///   per block as it streams): nothing is proved. Nor is it after a call of the response was
///   rejected ("STOP what you are doing…"): the other calls are then cancelled, not run.
/// - otherwise the last line that tells anything decides:
///   - **thinking**: a result answering the last open call of a response (Claude Code sends
///     the results to the model at once), unless one of the response's calls was rejected; a
///     typed prompt (Claude Code writes it once taken in: measured on 2.1.284, the record is
///     written after the `UserPromptSubmit` hook passed, and a prompt the hook blocks gets no
///     record but a "UserPromptSubmit operation blocked by hook" line), unless such a hook is
///     shown running after it (`hook_progress`: it may still block the prompt); an
///     `api_error` line before the last attempt (the call is retried);
///   - **idle**: a `stop_reason` of `end_turn`, `stop_sequence` or `refusal`; a synthetic API
///     error reply (`isApiErrorMessage`, "API Error…": the turn ends, the Stop hook runs);
///     "[Request interrupted by user]" (Escape while the model wrote); a local command or
///     bash-mode line; "Operation stopped by hook", "UserPromptSubmit operation blocked by
///     hook"; a `turn_duration`, a `stop_hook_summary` without hook errors, a 1.0.x "Stop […]
///     completed" line; an `away_summary`; a `result` line;
///   - **nothing proved**: a response line with `stop_reason` null (more blocks may follow, or
///     the turn ended without a turn-end line); `max_tokens` (newer versions ask the model to
///     resume); a rejection result or "[Request interrupted by user for tool use]" (a prompt
///     queued while the tool ran is taken in at once — 2.1.284 even writes that prompt's line
///     before the interrupted result — and text typed in the rejection dialog goes to the
///     model); a synthetic reply that is not an error ("No response requested.", written when
///     the person submits the first prompt after a resume, which follows at once); a Stop hook
///     shown running (it may block, and the model goes on); a `stop_hook_summary` with hook
///     errors, a "Stop hook feedback" line (the hook blocked: its text goes to the model); a slash command, a meta line, a task notification, a compaction, the last
///     `api_error` attempt (each can lead either way); no line that tells.
fn proven_by_prefix(all: &[Option<serde_json::Value>], k: usize, subagent: bool) -> Option<State> {
    use serde_json::Value as J;
    let prefix = &all[..=k];
    let main = |v: &J| subagent || v["isSidechain"] != true;
    let blocks = |v: &J, ty: &str| -> Vec<J> {
        v["message"]["content"]
            .as_array()
            .map(|a| a.iter().filter(|b| b["type"] == ty).cloned().collect())
            .unwrap_or_default()
    };
    let result_text = |b: &J| match &b["content"] {
        J::String(s) => s.clone(),
        other => other.to_string(),
    };
    // A result that stops the turn: a rejection without feedback, an interrupted call.
    let is_rejection = |b: &J| {
        let first = match &b["content"] {
            J::Array(a) => a.iter().find_map(|x| x["text"].as_str()).unwrap_or("").to_owned(),
            _ => result_text(b),
        };
        result_text(b).contains("STOP what you are doing and wait for the user")
            || first.trim_start().starts_with("[Request interrupted by user")
            || first.trim_start().starts_with("[Tool call interrupted")
    };
    let user_text = |v: &J| text_of(v);
    // A line after which no earlier call can still run: the turn ended or started anew.
    let ends_calls = |v: &J| -> bool {
        match v["type"].as_str() {
            Some("user") => {
                if v["isCompactSummary"] == true {
                    return true;
                }
                if !blocks(v, "tool_result").is_empty() || v["isMeta"] == true {
                    return false;
                }
                let t = user_text(v);
                !t.is_empty() && !t.starts_with("<task-notification>")
            }
            Some("assistant") => v["message"]["model"] == "<synthetic>",
            Some("system") => {
                matches!(v["subtype"].as_str(), Some("compact_boundary" | "turn_duration" | "stop_hook_summary"))
            }
            _ => false,
        }
    };
    // 1. Calls without a result that can still run.
    let mut any_open = false;
    let mut open_running = false;
    // Calls before the last line that ended the turn are dropped: start after it.
    let since = prefix.iter().rposition(|w| w.as_ref().is_some_and(|w| main(w) && ends_calls(w))).map_or(0, |p| p + 1);
    for (i, v) in prefix.iter().enumerate().skip(since) {
        let Some(v) = v else { continue };
        if v["type"] != "assistant" || !main(v) {
            continue;
        }
        let response = &v["message"]["id"];
        let ids: Vec<String> =
            blocks(v, "tool_use").iter().filter_map(|b| b["id"].as_str().map(str::to_owned)).collect();
        for id in ids {
            // Calls of the same response (all of them, as far as the prefix shows).
            let same =
                |w: &J| w["type"] == "assistant" && main(w) && !response.is_null() && w["message"]["id"] == *response;
            let calls_of_response: Vec<String> = if response.is_null() {
                vec![id.clone()]
            } else {
                prefix
                    .iter()
                    .flatten()
                    .filter(|w| same(w))
                    .flat_map(|w| blocks(w, "tool_use"))
                    .filter_map(|b| b["id"].as_str().map(str::to_owned))
                    .collect()
            };
            let later = prefix[i + 1..].iter().flatten();
            let answered =
                later.clone().any(|w| blocks(w, "tool_result").iter().any(|b| b["tool_use_id"] == id.as_str()));
            let dropped = later.clone().filter(|w| main(w)).any(|w| {
                ends_calls(w)
                    || (w["type"] == "assistant"
                        && !response.is_null()
                        && !w["message"]["id"].is_null()
                        && w["message"]["id"] != *response)
            });
            if answered || dropped {
                continue;
            }
            any_open = true;
            let stop_known = if response.is_null() {
                !v["message"]["stop_reason"].is_null()
            } else {
                prefix.iter().flatten().any(|w| same(w) && !w["message"]["stop_reason"].is_null())
            };
            let of_response = |s: &str| calls_of_response.iter().any(|c| c == s);
            // After the response's last line so far: a block written after a result of the same
            // response (tools that start while it streams) shows it was still going on.
            let last_line = if response.is_null() {
                i
            } else {
                prefix.iter().rposition(|w| w.as_ref().is_some_and(&same)).unwrap_or(i)
            };
            let shown_running = prefix[last_line + 1..].iter().flatten().any(|w| {
                blocks(w, "tool_result").iter().any(|b| b["tool_use_id"].as_str().is_some_and(of_response))
                    || (w["type"] == "progress"
                        && [&w["toolUseID"], &w["parentToolUseID"]].iter().any(|t| t.as_str().is_some_and(of_response)))
                    || (!subagent && w["isSidechain"] == true)
            });
            let rejected = later.clone().any(|w| {
                blocks(w, "tool_result")
                    .iter()
                    .any(|b| b["tool_use_id"].as_str().is_some_and(of_response) && is_rejection(b))
            });
            if (stop_known || shown_running) && !rejected {
                open_running = true;
            }
        }
    }
    if any_open {
        return open_running.then_some(State::Acting);
    }
    // 2. The last line that tells.
    for (i, v) in prefix.iter().enumerate().rev() {
        let Some(v) = v else { continue };
        if !main(v) {
            continue;
        }
        match v["type"].as_str() {
            Some("assistant") => {
                let m = &v["message"];
                if m["model"] == "<synthetic>" {
                    let error = v["isApiErrorMessage"] == true
                        || blocks(v, "text")
                            .iter()
                            .any(|b| b["text"].as_str().is_some_and(|t| t.starts_with("API Error")));
                    return error.then_some(State::Idle);
                }
                return match m["stop_reason"].as_str() {
                    Some("end_turn" | "stop_sequence" | "refusal") => Some(State::Idle),
                    _ => None,
                };
            }
            Some("user") => {
                if v["isCompactSummary"] == true {
                    return None;
                }
                let results = blocks(v, "tool_result");
                if !results.is_empty() {
                    // Rejected calls since the response's last line: the turn is being stopped.
                    let since = prefix[..i]
                        .iter()
                        .rposition(|w| w.as_ref().is_some_and(|w| w["type"] == "assistant" && main(w)))
                        .unwrap_or(0);
                    let rejected =
                        prefix[since..=i].iter().flatten().any(|w| blocks(w, "tool_result").iter().any(&is_rejection));
                    return (!rejected).then_some(State::Thinking);
                }
                let t = user_text(v);
                if v["isMeta"] == true {
                    if t.is_empty() || t.starts_with("<local-command-caveat>") || t.starts_with("Caveat:") {
                        continue;
                    }
                    return None;
                }
                if t.is_empty() {
                    continue;
                }
                if t.starts_with("[Request interrupted by user for tool use]") {
                    return None;
                }
                if t.starts_with("[Request interrupted")
                    || [
                        "<local-command-stdout>",
                        "<local-command-stderr>",
                        "<bash-input>",
                        "<bash-stdout>",
                        "<bash-stderr>",
                        "Operation stopped by hook",
                    ]
                    .iter()
                    .any(|p| t.starts_with(p))
                {
                    return Some(State::Idle);
                }
                if t.starts_with("<command-name>")
                    || t.starts_with("<command-message>")
                    || t.starts_with("<task-notification>")
                {
                    return None;
                }
                // A typed prompt: accepted unless a UserPromptSubmit hook is shown running after it.
                let hook = prefix[i + 1..].iter().flatten().any(|w| {
                    w["type"] == "progress"
                        && w["data"]["type"] == "hook_progress"
                        && w["data"]["hookEvent"] == "UserPromptSubmit"
                });
                return (!hook).then_some(State::Thinking);
            }
            Some("system") => {
                let content = strip_ansi(v["content"].as_str().unwrap_or(""));
                if content.starts_with("UserPromptSubmit operation blocked by hook") {
                    return Some(State::Idle);
                }
                match v["subtype"].as_str() {
                    Some("turn_duration" | "away_summary" | "local_command") => return Some(State::Idle),
                    Some("stop_hook_summary") => {
                        let errors = v["hookErrors"].as_array().is_some_and(|a| !a.is_empty());
                        return (!errors).then_some(State::Idle);
                    }
                    Some("api_error") => {
                        let last = matches!((v["retryAttempt"].as_i64(), v["maxRetries"].as_i64()), (Some(r), Some(m)) if r >= m);
                        return (!last).then_some(State::Thinking);
                    }
                    Some("compact_boundary") => return None,
                    // A blocking Stop hook's feedback goes to the model.
                    None if content.starts_with("Stop hook feedback") || content.starts_with("Stop hook error") => {
                        return None
                    }
                    None if content.starts_with("Stop") => return Some(State::Idle),
                    _ => {}
                }
            }
            Some("progress") if v["data"]["type"] == "hook_progress" => match v["data"]["hookEvent"].as_str() {
                Some("Stop") | Some("UserPromptSubmit") => return None,
                _ => {}
            },
            Some("result") => return Some(State::Idle),
            _ => {}
        }
    }
    None
}

#[test]
fn confirmed_only_where_the_bytes_prove_it() {
    let (mut proven_total, mut proven_right, mut unproven_total, mut unproven_inferred) =
        (0usize, 0usize, 0usize, 0usize);
    let (mut disagree_with_rest, mut both_proved) = (0usize, 0usize);
    let mut wrong_confirmed = Vec::new();
    let mut confirmed_unproven: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let mut samples = Vec::new();
    for path in transcripts() {
        let ls = lines(&path);
        let sub = is_subagent_file(&path.to_string_lossy());
        let all: Vec<_> = ls.iter().map(|(_, _, l)| json(l)).collect();
        let c = calls(&all, sub);
        let mut t = Tracker::new(sub);
        for (k, (n, o, l)) in ls.iter().enumerate() {
            t.feed(*n, *o, l);
            let v = t.verdict();
            let proof = proven_by_prefix(&all, k, sub);
            if let (Some(p), Some(r)) = (proof, proved(&all, &c, k, sub)) {
                both_proved += 1;
                if p != r {
                    disagree_with_rest += 1;
                    samples.push(format!(
                        "{} after line {n}: prefix proves {}, the rest {}",
                        path.display(),
                        p.label(),
                        r.label()
                    ));
                }
            }
            match proof {
                Some(p) => {
                    proven_total += 1;
                    proven_right += usize::from(v.state == p);
                    if v.confidence == Confidence::Confirmed && v.state != p {
                        wrong_confirmed.push(format!(
                            "{} cut after line {n}: {} confirmed by {}, the bytes prove {}",
                            path.display(),
                            v.state.label(),
                            v.rule,
                            p.label()
                        ));
                    }
                }
                None => {
                    unproven_total += 1;
                    if v.confidence == Confidence::Inferred {
                        unproven_inferred += 1;
                    } else {
                        *confirmed_unproven.entry(v.rule).or_default() += 1;
                        samples.push(format!(
                            "{} after line {n}: {} confirmed by {}, not proved",
                            path.display(),
                            v.state.label(),
                            v.rule
                        ));
                    }
                }
            }
        }
    }
    let pct = |a: usize, b: usize| if b == 0 { 100.0 } else { a as f64 * 100.0 / b as f64 };
    eprintln!(
        "proven cuts: {proven_total}, right {proven_right} ({:.1} %); unproven cuts: {unproven_total}, inferred {unproven_inferred} ({:.1} %); confirmed on unproven cuts by rule: {confirmed_unproven:?}; prefix and rest of file both prove {both_proved}, disagree {disagree_with_rest}",
        pct(proven_right, proven_total),
        pct(unproven_inferred, unproven_total)
    );
    for s in samples.iter().take(40) {
        eprintln!("  {s}");
    }
    assert!(wrong_confirmed.is_empty(), "confirmed verdicts the bytes disprove:\n{}", wrong_confirmed.join("\n"));
    assert!(proven_right * 100 >= proven_total * 99, "proven cuts right only {proven_right}/{proven_total}");
    assert!(
        unproven_inferred * 100 >= unproven_total * 95,
        "unproven cuts inferred only {unproven_inferred}/{unproven_total}"
    );
}
