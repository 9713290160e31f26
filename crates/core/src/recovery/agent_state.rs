//! What an agent is doing, from its transcript alone ("JSONL Ground Truth Recovery", made right
//! on real Claude Code files). Pure.
//!
//! States: `idle` (the turn is over; the agent waits for a person), `acting` (a tool call is
//! running), `thinking` (the model's turn: a response is being produced or is due), `unknown`.
//! Confidence: `confirmed` when the deciding line settles it, `inferred` when it cannot decide
//! between two states and the rule picks the likelier one (named in `detail`).
//!
//! The reference design's table reads the last line's `stop_reason`; that is wrong on most real
//! files, because from Claude Code 1.0.10 to 2.1.49 a response's lines end with
//! `stop_reason: null`. So the lines are replayed from the last point where the conversation
//! was at rest (an *anchor*: a prompt, a turn end, an interrupt, a local command, a compaction,
//! a synthetic line), tracking the tool calls of the current response; the last line that
//! tells anything decides, in the light of what is still open. Each rule below names the real
//! transcript line (in `pgrx-tests/fixtures/claude-code/`) that motivated it.
//!
//! | rule | line | state |
//! |---|---|---|
//! | `tool_use` | `assistant` with `tool_use` blocks, or any line of a response while one of its calls has no result (`JSSoundRecorder/7acd37a8…` 204–206: three `tool_use` lines of one `message.id`) | acting, confirmed |
//! | `tool_result_partial` | `user` `tool_result` while other calls of the response are still open (`7acd37a8…` 207–208: results arrive one by one) | acting, confirmed |
//! | `tool_result` | `user` `tool_result` closing the last open call: the model's turn | thinking, confirmed |
//! | `tool_rejected` | a rejected call ("…STOP what you are doing and wait for the user…", `sniffly/fed8ce56…` 13–14, `entireio-cli/37/…` 160) once no call is open; with feedback the text differs and `tool_result` applies | idle, confirmed |
//! | `stop_reason` | `assistant` with `stop_reason` `end_turn`, `stop_sequence`, `max_tokens` or `refusal` and no open call (`7acd37a8…` 211) | idle, confirmed |
//! | `thinking_block` | `assistant` with only thinking blocks (`entireio-cli/ca/…` 80): the response goes on, or ends on the thinking alone and a turn end follows | thinking, inferred |
//! | `open_response` | `assistant` text with `stop_reason: null` (`sniffly/fed8ce56…` 21): more blocks of the response may follow (four times in five on the real files) or the turn ended without a turn-end line | thinking, inferred |
//! | `synthetic` | `assistant` with model `<synthetic>`: an API error that ended the turn (`entireio-cli/b0/…`, `isApiErrorMessage`) or "No response requested." written on resume after `/exit` | idle, confirmed |
//! | `prompt` | a `user` line a person typed (`entireio-cli/37/…` 163) | thinking, confirmed |
//! | `meta_prompt` | `isMeta` text that is input to the model: a slash command's expanded prompt or a skill (`claude-code-viewer/1af7fc5e…` 2); caveats are skipped | thinking, inferred |
//! | `interrupt` | "[Request interrupted by user…]" (`sniffly/fed8ce56…` 15) | idle, confirmed |
//! | `slash_command` | `<command-name>` (`claude-code-viewer/1af7fc5e…` 1): `/exit` leaves the agent idle, `/init` expands into a prompt on the next line | idle, inferred |
//! | `local_command` | `<local-command-stdout>`, `<bash-input>`, `<bash-stdout>` (`claude-code-log-sample/326189cf…` 6–7), `system` `local_command`: run at the prompt, not by the model | idle, confirmed |
//! | `hook_stopped` | "Operation stopped by hook: …": not a prompt, and the turn is over | idle, confirmed |
//! | `task_notification` | `<task-notification>`: not a prompt; delivered to the model, which answers | thinking, inferred |
//! | `turn_end` | `system` `stop_hook_summary` / `turn_duration` (2.1.x, `-experiments-ideas/03eb5929…` 57) | idle, confirmed |
//! | `stop_hook` | `progress` `hook_progress` with `hookEvent: "Stop"` (`entireio-cli/10/…` 65), or a 1.0.x `system` line without subtype reporting the Stop hook (`326189cf…` 51) | idle, confirmed |
//! | `api_retry` | `system` `api_error` (`entireio-cli/b0/…`, retryAttempt 1..10): the call is being retried; inferred on the last attempt | thinking |
//! | `compaction` | `system` `compact_boundary` or a `user` `isCompactSummary` line (`entireio-cli/ca/…`): open calls are dropped (compaction can swallow a result); the model usually goes on | thinking, inferred |
//! | `away_summary` | `system` `away_summary` (`-experiments-worktrees/ef958aa1…` 174): written while the person is away | idle, confirmed |
//! | `tool_progress` | `progress` of an open call (`bash_progress`, `agent_progress`, web search; matched by `toolUseID`/`parentToolUseID`) | acting, confirmed |
//! | `sidechain` | a sub-agent's line in its parent's file (`isSidechain`, 1.0.x, `_excerpts/sidechain.jsonl`) while a call is open | acting, confirmed |
//! | `result` | `type: "result"` (print mode) | idle, confirmed |
//! | `no_meaningful_line` | nothing above in the file (empty, snapshots or summaries only): the reference design's safe default | idle, inferred |
//!
//! Lines of other types (`file-history-snapshot`, `summary`, `queue-operation`, `attachment`,
//! other `progress`, other `system` subtypes, PostToolUse hook lines) and lines that do not
//! parse decide nothing.

use crate::json::parse::{parse, Kind, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Idle,
    Acting,
    Thinking,
    Unknown,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Acting => "acting",
            State::Thinking => "thinking",
            State::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    Confirmed,
    Inferred,
}

impl Confidence {
    pub fn label(self) -> &'static str {
        match self {
            Confidence::Confirmed => "confirmed",
            Confidence::Inferred => "inferred",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub state: State,
    pub confidence: Confidence,
    pub rule: &'static str,
    pub line_no: Option<i64>,
    pub byte_offset: Option<i64>,
    pub ts_us: Option<i64>,
    pub detail: String,
}

impl Verdict {
    pub fn unknown(detail: impl Into<String>) -> Verdict {
        Verdict {
            state: State::Unknown,
            confidence: Confidence::Inferred,
            rule: "unreadable",
            line_no: None,
            byte_offset: None,
            ts_us: None,
            detail: detail.into(),
        }
    }
}

/// A tool result that rejects the call and tells the model to stop (no feedback given).
const REJECTION: &str = "STOP what you are doing and wait for the user";

/// Stop reasons that end a turn.
const TURN_ENDING_STOPS: [&str; 4] = ["end_turn", "stop_sequence", "max_tokens", "refusal"];

/// The text of a `user` line: a string content, or its text blocks joined.
fn user_text(content: Option<Value<'_>>) -> String {
    let Some(c) = content else { return String::new() };
    match c.kind {
        Kind::String => c.as_str().map(|s| s.into_owned()).unwrap_or_default(),
        Kind::Array => {
            let mut out = String::new();
            for b in c.items() {
                let [t, text] = b.pick(["type", "text"]);
                if t.and_then(|t| t.as_str()).as_deref() == Some("text") {
                    if let Some(text) = text.and_then(|t| t.as_str()) {
                        if !out.is_empty() {
                            out.push(' ');
                        }
                        out.push_str(&text);
                    }
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// ANSI SGR sequences removed (1.0.x hook lines are coloured).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn str_of(v: Option<Value<'_>>) -> Option<String> {
    v.and_then(|v| v.as_str()).map(|s| s.into_owned())
}

/// Replays a transcript's lines and keeps the verdict of the last line that decides.
#[derive(Debug, Clone)]
pub struct Tracker {
    /// The file is a sub-agent's own transcript (`subagents/agent-*.jsonl`, or a pre-2.1
    /// `agent-*.jsonl`): its sidechain lines are its main conversation.
    subagent_file: bool,
    /// Tool calls of the current response without a result: (id, name).
    open: Vec<(String, Option<String>)>,
    rejected: bool,
    verdict: Option<Verdict>,
}

/// Whether a file name is a sub-agent's transcript.
pub fn is_subagent_file(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|name| name.starts_with("agent-"))
}

impl Tracker {
    pub fn new(subagent_file: bool) -> Tracker {
        Tracker { subagent_file, open: Vec::new(), rejected: false, verdict: None }
    }

    pub fn verdict(&self) -> Verdict {
        self.verdict.clone().unwrap_or(Verdict {
            state: State::Idle,
            confidence: Confidence::Inferred,
            rule: "no_meaningful_line",
            line_no: None,
            byte_offset: None,
            ts_us: None,
            detail: "no line that tells what the agent is doing: idle, the reference design's safe default".into(),
        })
    }

    fn open_detail(&self) -> String {
        let names: Vec<&str> = self.open.iter().map(|(_, n)| n.as_deref().unwrap_or("?")).collect();
        format!("{} tool call(s) without a result: {}", names.len(), names.join(", "))
    }

    #[allow(clippy::too_many_arguments)]
    /// The turn is over: nothing is in flight any more and the agent is idle, for certain.
    fn turn_over(&mut self, rule: &'static str, at: (i64, i64, Option<i64>), detail: String) {
        self.open.clear();
        self.decide(State::Idle, Confidence::Confirmed, rule, at, detail);
    }

    fn decide(
        &mut self,
        state: State,
        confidence: Confidence,
        rule: &'static str,
        at: (i64, i64, Option<i64>),
        detail: String,
    ) {
        self.verdict = Some(Verdict {
            state,
            confidence,
            rule,
            line_no: Some(at.0),
            byte_offset: Some(at.1),
            ts_us: at.2,
            detail,
        });
    }

    /// Feeds the next line (its number, byte offset and text). Lines that do not parse are
    /// skipped.
    pub fn feed(&mut self, line_no: i64, byte_offset: i64, text: &str) {
        let Ok(p) = parse(text) else { return };
        if p.root.kind != Kind::Object {
            return;
        }
        let ts =
            p.get("timestamp").and_then(|t| t.as_str()).and_then(|t| crate::indexer::timestamp::parse_timestamp(&t));
        let at = (line_no, byte_offset, ts);
        let line_type = str_of(p.get("type")).unwrap_or_default();
        let [sidechain, is_meta, compact_summary, subtype, content, tool_use_id, parent_tool_use_id, retry, max_retries] =
            p.root.pick([
                "isSidechain",
                "isMeta",
                "isCompactSummary",
                "subtype",
                "content",
                "toolUseID",
                "parentToolUseID",
                "retryAttempt",
                "maxRetries",
            ]);
        let is_true = |v: Option<Value<'_>>| v.and_then(|v| v.as_bool()).unwrap_or(false);
        let message = p.get("message");

        if is_true(sidechain) && !self.subagent_file && matches!(line_type.as_str(), "user" | "assistant") {
            if !self.open.is_empty() {
                let d = format!("a sub-agent is working for an open call; {}", self.open_detail());
                self.decide(State::Acting, Confidence::Confirmed, "sidechain", at, d);
            }
            return;
        }
        use Confidence::{Confirmed, Inferred};
        match line_type.as_str() {
            "assistant" => {
                let [model, stop, blocks] = message.map_or([None; 3], |m| m.pick(["model", "stop_reason", "content"]));
                if str_of(model).as_deref() == Some("<synthetic>") {
                    self.turn_over(
                        "synthetic",
                        at,
                        "a synthetic assistant line (API error, or no response requested): the turn is over".into(),
                    );
                    return;
                }
                self.rejected = false;
                let mut kinds = Vec::new();
                for b in blocks.into_iter().flat_map(|b| b.items()) {
                    let [t, id, name] = b.pick(["type", "id", "name"]);
                    let t = str_of(t).unwrap_or_default();
                    if t == "tool_use" {
                        if let Some(id) = str_of(id) {
                            if !self.open.iter().any(|(o, _)| *o == id) {
                                self.open.push((id, str_of(name)));
                            }
                        }
                    }
                    kinds.push(t);
                }
                if !self.open.is_empty() {
                    let d = self.open_detail();
                    self.decide(State::Acting, Confirmed, "tool_use", at, d);
                    return;
                }
                let stop = str_of(stop);
                if stop.as_deref().is_some_and(|s| TURN_ENDING_STOPS.contains(&s)) {
                    let d = format!("stop_reason {}", stop.unwrap_or_default());
                    self.decide(State::Idle, Confirmed, "stop_reason", at, d);
                } else if !kinds.is_empty() && kinds.iter().all(|k| k == "thinking" || k == "redacted_thinking") {
                    self.decide(State::Thinking, Inferred, "thinking_block", at, "a thinking block without stop_reason: the response goes on (thinking), or it ended on the thinking alone (idle, confirmed by a turn end)".into());
                } else {
                    self.decide(State::Thinking, Inferred, "open_response", at, "response text without stop_reason: more blocks may follow (thinking), or the turn ended without a turn-end line (idle)".into());
                }
            }
            "user" => {
                if is_true(compact_summary) {
                    self.open.clear();
                    self.decide(State::Thinking, Inferred, "compaction", at, "the summary after a compaction: the model goes on after an automatic one (thinking), waits after /compact (idle)".into());
                    return;
                }
                let content = message.and_then(|m| m.get("content"));
                let mut results = 0;
                for b in content.into_iter().filter(|c| c.kind == Kind::Array).flat_map(|c| c.items()) {
                    let [t, id, result] = b.pick(["type", "tool_use_id", "content"]);
                    if str_of(t).as_deref() != Some("tool_result") {
                        continue;
                    }
                    results += 1;
                    if let Some(id) = str_of(id) {
                        self.open.retain(|(o, _)| *o != id);
                    }
                    let text = result.map(|r| {
                        if r.kind == Kind::String {
                            r.as_str().map(|s| s.into_owned()).unwrap_or_default()
                        } else {
                            r.text.to_owned()
                        }
                    });
                    if text.is_some_and(|t| t.contains(REJECTION)) {
                        self.rejected = true;
                    }
                }
                if results > 0 {
                    if !self.open.is_empty() {
                        let d = self.open_detail();
                        self.decide(State::Acting, Confirmed, "tool_result_partial", at, d);
                    } else if self.rejected {
                        self.decide(
                            State::Idle,
                            Confirmed,
                            "tool_rejected",
                            at,
                            "the person rejected the tool call and the model was told to wait".into(),
                        );
                    } else {
                        self.decide(
                            State::Thinking,
                            Confirmed,
                            "tool_result",
                            at,
                            "every tool call of the response has its result: the model's turn".into(),
                        );
                    }
                    return;
                }
                let text = user_text(content);
                let text = text.trim_start();
                if is_true(is_meta) {
                    if text.starts_with("<local-command-caveat>") || text.starts_with("Caveat:") || text.is_empty() {
                        return;
                    }
                    self.decide(
                        State::Thinking,
                        Inferred,
                        "meta_prompt",
                        at,
                        "a meta line that is input to the model (an expanded slash command, a skill)".into(),
                    );
                    return;
                }
                if text.is_empty() {
                    return;
                }
                if text.starts_with("[Request interrupted") {
                    self.turn_over("interrupt", at, "the person interrupted the agent".into());
                } else if text.starts_with("<command-name>") || text.starts_with("<command-message>") {
                    self.decide(State::Idle, Inferred, "slash_command", at, "a slash command: a local one leaves the agent idle, a prompt command is followed by its expanded prompt".into());
                } else if [
                    "<local-command-stdout>",
                    "<local-command-stderr>",
                    "<bash-input>",
                    "<bash-stdout>",
                    "<bash-stderr>",
                ]
                .iter()
                .any(|p| text.starts_with(p))
                {
                    self.turn_over("local_command", at, "a command the person ran at the prompt".into());
                } else if text.starts_with("Operation stopped by hook") {
                    self.turn_over("hook_stopped", at, "a hook stopped the turn".into());
                } else if text.starts_with("<task-notification>") {
                    self.decide(
                        State::Thinking,
                        Inferred,
                        "task_notification",
                        at,
                        "a background task's notification, delivered to the model".into(),
                    );
                } else {
                    self.open.clear();
                    self.decide(State::Thinking, Confirmed, "prompt", at, "a prompt: the model's turn".into());
                }
            }
            "system" => {
                let subtype = str_of(subtype);
                match subtype.as_deref() {
                    Some("stop_hook_summary") | Some("turn_duration") => {
                        self.open.clear();
                        let d = format!("turn end ({})", subtype.unwrap_or_default());
                        self.decide(State::Idle, Confirmed, "turn_end", at, d);
                    }
                    Some("api_error") => {
                        let last = matches!((retry.and_then(|r| r.as_i64()), max_retries.and_then(|m| m.as_i64())), (Some(r), Some(m)) if r >= m);
                        if last {
                            self.decide(
                                State::Thinking,
                                Inferred,
                                "api_retry",
                                at,
                                "the last retry of a failing API call: an error line ends the turn if it fails".into(),
                            );
                        } else {
                            self.decide(
                                State::Thinking,
                                Confirmed,
                                "api_retry",
                                at,
                                "an API call is being retried".into(),
                            );
                        }
                    }
                    Some("compact_boundary") => {
                        self.open.clear();
                        self.decide(State::Thinking, Inferred, "compaction", at, "a compaction: the model goes on after an automatic one (thinking), waits after /compact (idle)".into());
                    }
                    Some("away_summary") => {
                        self.decide(
                            State::Idle,
                            Confirmed,
                            "away_summary",
                            at,
                            "a summary written while the person was away".into(),
                        );
                    }
                    Some("local_command") => {
                        self.decide(
                            State::Idle,
                            Confirmed,
                            "local_command",
                            at,
                            "a command the person ran at the prompt".into(),
                        );
                    }
                    None => {
                        let text = strip_ansi(&str_of(content).unwrap_or_default());
                        let text = text.strip_prefix("Running ").unwrap_or(&text);
                        if text.starts_with("Stop") {
                            self.turn_over("stop_hook", at, "the Stop hook ran: the turn is over".into());
                        }
                    }
                    _ => {}
                }
            }
            "progress" => {
                let data = p.get("data");
                let [kind, event] = data.map_or([None; 2], |d| d.pick(["type", "hookEvent"]));
                let kind = str_of(kind).unwrap_or_default();
                if kind == "hook_progress" {
                    if str_of(event).as_deref() == Some("Stop") {
                        self.turn_over("stop_hook", at, "the Stop hook is running: the turn is over".into());
                    }
                    return;
                }
                let tool = str_of(parent_tool_use_id).or_else(|| str_of(tool_use_id));
                if tool.is_some_and(|t| self.open.iter().any(|(o, _)| *o == t)) {
                    let d = format!("{kind} of an open call; {}", self.open_detail());
                    self.decide(State::Acting, Confirmed, "tool_progress", at, d);
                }
            }
            "result" => {
                self.turn_over("result", at, "the session's result line".into());
            }
            _ => {}
        }
    }
}

/// Whether replaying can start at this line with nothing before it: a line after which no
/// earlier line changes the verdict (a prompt, a turn end, an interrupt, a local command, a
/// compaction, a synthetic line). Tail readers read back to one.
pub fn is_anchor(text: &str, subagent_file: bool) -> bool {
    let mut t = Tracker::new(subagent_file);
    // A line that clears every open call and decides on its own.
    t.open.push((String::new(), None));
    t.feed(0, 0, text);
    t.open.is_empty()
        && t.verdict.as_ref().is_some_and(|v| {
            matches!(
                v.rule,
                "prompt"
                    | "turn_end"
                    | "stop_hook"
                    | "interrupt"
                    | "local_command"
                    | "hook_stopped"
                    | "compaction"
                    | "synthetic"
                    | "result"
            )
        })
}

/// The state of a cortex-dialect session from its last event's type: what a job's own files
/// say (`job_sessions`).
pub fn cortex_state(last_event_type: Option<&str>) -> (State, Confidence) {
    use Confidence::{Confirmed, Inferred};
    match last_event_type {
        Some("SESSION_END") => (State::Idle, Confirmed),
        Some("APPROVAL_REQUESTED" | "APPROVAL_REQUEST") => (State::Idle, Confirmed),
        Some("TOOL_START" | "TOOL_CALL") => (State::Acting, Confirmed),
        Some("LLM_REQUEST" | "TOOL_RESULT") => (State::Thinking, Confirmed),
        Some(
            "LLM_RESPONSE" | "CHECKPOINT_WRITTEN" | "CHECKPOINT" | "CHECKPOINT_LOADED" | "SESSION_START"
            | "STATE_TRANSITION" | "STEERING" | "APPROVAL_DECISION",
        ) => (State::Thinking, Inferred),
        None => (State::Idle, Inferred),
        Some(_) => (State::Unknown, Inferred),
    }
}

#[cfg(test)]
mod tests;
