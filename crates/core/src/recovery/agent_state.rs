//! What an agent is doing, from its transcript alone ("JSONL Ground Truth Recovery", made right
//! on real Claude Code files). Pure.
//!
//! States: `idle` (the turn is over; the agent waits for a person), `acting` (a tool call is
//! running), `thinking` (the model's turn: a response is being produced or is due), `unknown`.
//! Confidence: `confirmed` when the bytes up to the deciding line prove the state, `inferred`
//! when they leave two states open and the rule picks the likelier one (the other is named in
//! `detail`). Claude Code writes a response one line per content block as it streams (with
//! `stop_reason: null` from 1.0.10 to 2.1.49), runs hooks around prompts, tools and turn ends,
//! and writes some lines in a burst just before the line that resolves them; so a line proves
//! a state only when nothing Claude Code may still write can turn it into another. The tests
//! (`confirmed_only_where_the_bytes_prove_it`) state what the bytes prove independently of
//! these rules and check them on every line boundary of every real transcript.
//!
//! The reference design's table reads the last line's `stop_reason`; that is wrong on most real
//! files, because of those `stop_reason: null` lines. So the lines are replayed from the last
//! point where the conversation was at rest (an *anchor*: a prompt, a turn end, an interrupt, a
//! local command, a compaction, a synthetic line), tracking the tool calls of the current
//! response and whether that response is known to have ended; the last line that tells
//! anything decides, in the light of what is still open. Each rule below names the real
//! transcript line (in `pgrx-tests/fixtures/claude-code/`) that motivated it, or the Claude
//! Code behaviour where no fixture shows it.
//!
//! | rule | line | state |
//! |---|---|---|
//! | `tool_use` | `assistant` with `tool_use` blocks, or any line of a response while one of its calls has no result, once the response is known to have ended: a line of it has a `stop_reason` (`JSSoundRecorder/7acd37a8…` 204–206: three `tool_use` lines of one `message.id`, all `stop_reason: "tool_use"`; `entireio-cli/ca/…` 56: the last of four lines), or a result, progress or sub-agent line of one of its calls came after its last line (`entireio-cli/10/…` 19: the `Task`'s PreToolUse hook after 17–18) | acting, confirmed |
//! | `tool_use` | the same before that (`entireio-cli/ca/…` 55: an `Edit` with `stop_reason: null`, and the response's next block follows on 56): the model may still be writing blocks. Also when a block comes after a result of its own response (2.1.114 starts tools while the response streams: `agent-a36efb2a…` 5–9) | acting, inferred |
//! | `tool_result_partial` | `user` `tool_result` while other calls of the response are still open (`7acd37a8…` 207–208: results arrive one by one) | acting, confirmed |
//! | `tool_result_partial` | the same after a call of the response was rejected (`7acd37a8…` 53: the rejected `Bash`; 54–55 cancel the other two, which never ran) | acting, inferred |
//! | `tool_result` | `user` `tool_result` closing the last open call: the model's turn | thinking, confirmed |
//! | `tool_rejected` | a rejected call ("…STOP what you are doing and wait for the user…", `sniffly/fed8ce56…` 13–14, `entireio-cli/37/…` 160) or an interrupted one (a result "[Request interrupted by user for tool use]") once no call is open: idle, but a prompt queued while the tool ran is taken in at once (2.1.x writes it even before the interrupted result), and text typed in the rejection dialog goes to the model; with feedback the text differs and `tool_result` applies | idle, inferred |
//! | `stop_reason` | `assistant` with `stop_reason` `end_turn`, `stop_sequence` or `refusal` and no open call (`7acd37a8…` 211) | idle, confirmed |
//! | `stop_reason` | `stop_reason` `max_tokens`: Claude Code may ask the model to resume ("Output token limit hit. Resume directly…") | idle, inferred |
//! | `thinking_block` | `assistant` with only thinking blocks (`entireio-cli/ca/…` 80): the response goes on, or ends on the thinking alone and a turn end follows | thinking, inferred |
//! | `open_response` | `assistant` text with `stop_reason: null` (`sniffly/fed8ce56…` 21): more blocks of the response may follow (four times in five on the real files) or the turn ended without a turn-end line | thinking, inferred |
//! | `synthetic` | `assistant` with model `<synthetic>` reporting an API error that ended the turn (`entireio-cli/b0/…` 23, `isApiErrorMessage`, "API Error: 529…"; the Stop hook and the turn end follow) | idle, confirmed |
//! | `synthetic` | any other synthetic line: "No response requested." is written on resume when the person submits the first prompt, and that prompt follows at once | idle, inferred |
//! | `prompt` | a `user` line a person typed (`entireio-cli/37/…` 163; Claude Code writes it once taken in) | thinking, confirmed |
//! | `prompt` | the same while a `UserPromptSubmit` hook is shown running after it (`progress` `hook_progress`): the hook may block the prompt | thinking, inferred |
//! | `meta_prompt` | `isMeta` text that is input to the model: a slash command's expanded prompt or a skill (`claude-code-viewer/1af7fc5e…` 2); caveats are skipped | thinking, inferred |
//! | `interrupt` | "[Request interrupted by user]": Escape while the model wrote (`entireio-cli/b0/…` 542) | idle, confirmed |
//! | `interrupt` | "[Request interrupted by user for tool use]" (`sniffly/fed8ce56…` 15, `entireio-cli/37/…` 161): after a rejected or stopped call, as `tool_rejected` | idle, inferred |
//! | `slash_command` | `<command-name>` (`claude-code-viewer/1af7fc5e…` 1): `/exit` leaves the agent idle, `/init` expands into a prompt on the next line | idle, inferred |
//! | `local_command` | `<local-command-stdout>`, `<bash-input>`, `<bash-stdout>` (`claude-code-log-sample/326189cf…` 6–7), `system` `local_command`: run at the prompt, not by the model | idle, confirmed |
//! | `hook_stopped` | "Operation stopped by hook: …", or a `system` line "UserPromptSubmit operation blocked by hook": not a prompt, and the turn is over | idle, confirmed |
//! | `task_notification` | `<task-notification>`: not a prompt; delivered to the model, which answers | thinking, inferred |
//! | `turn_end` | `system` `stop_hook_summary` / `turn_duration` (2.1.x, `-experiments-ideas/03eb5929…` 57) | idle, confirmed |
//! | `turn_end` | a `stop_hook_summary` with `hookErrors`: a Stop hook that blocks makes the model go on | idle, inferred |
//! | `stop_hook` | a 1.0.x `system` line without subtype reporting a Stop hook done (`326189cf…` 51: "Stop […] completed successfully") | idle, confirmed |
//! | `stop_hook` | a `system` line "Stop hook feedback…" / "Stop hook error…": the hook blocked the stop and its text goes to the model | thinking, inferred |
//! | `stop_hook` | a Stop hook running: `progress` `hook_progress` with `hookEvent: "Stop"` (`entireio-cli/10/…` 65, `-experiments-ideas/03eb5929…` 56), a 1.0.x "Running Stop…" line: the hook may still block, and the model goes on | idle, inferred |
//! | `api_retry` | `system` `api_error` (`entireio-cli/b0/…`, retryAttempt 1..10): the call is being retried; inferred on the last attempt | thinking |
//! | `compaction` | `system` `compact_boundary` or a `user` `isCompactSummary` line (`entireio-cli/ca/…`): open calls are dropped (compaction can swallow a result); the model usually goes on | thinking, inferred |
//! | `away_summary` | `system` `away_summary` (`-experiments-worktrees/ef958aa1…` 174): written while the person is away | idle, confirmed |
//! | `tool_progress` | `progress` of an open call (`bash_progress`, `agent_progress`, web search, a Pre/PostToolUse `hook_progress`: `entireio-cli/10/…` 19; matched by `toolUseID`/`parentToolUseID`): its tools run, so the response has ended | acting, confirmed (inferred after a rejection) |
//! | `sidechain` | a sub-agent's line in its parent's file (`isSidechain`, 1.0.x, `_excerpts/sidechain.jsonl`) while a call is open | acting, confirmed (inferred after a rejection) |
//! | `result` | `type: "result"` (print mode) | idle, confirmed |
//! | `no_meaningful_line` | nothing above in the file (empty, snapshots or summaries only): the reference design's safe default | idle, inferred |
//!
//! A line of a new response (another `message.id`) drops the calls of an earlier one that
//! have no result: Claude Code calls the model again only once every call has its result, so
//! such a call (left by a failed stream) never runs.
//!
//! Lines of other types (`file-history-snapshot`, `summary`, `queue-operation`, `attachment`:
//! the index does not hand them to this replay), other `progress` (a hook's progress for a call
//! that already has its result), other `system` subtypes, 1.0.x PostToolUse hook lines, and
//! lines that do not parse decide nothing.

use crate::json::parse::{parse, Kind, Value};
use Confidence::{Confirmed, Inferred};

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

/// How a tool result that stopped its call begins: Escape while it ran, or the session ended
/// under it (written on resume).
const INTERRUPTED_RESULTS: [&str; 2] = ["[Request interrupted by user", "[Tool call interrupted"];

/// Whether a tool result's content stops the turn: a rejection without feedback, or an
/// interrupted call.
fn stops_the_turn(result: Value<'_>) -> bool {
    let text = if result.kind == Kind::String {
        result.as_str().map(|s| s.into_owned()).unwrap_or_default()
    } else {
        result.text.to_owned()
    };
    let first = if result.kind == Kind::Array { user_text(Some(result)) } else { text.clone() };
    text.contains(REJECTION) || INTERRUPTED_RESULTS.iter().any(|p| first.trim_start().starts_with(p))
}

/// What Claude Code writes when a UserPromptSubmit hook refuses a prompt.
const PROMPT_BLOCKED: &str = "UserPromptSubmit operation blocked by hook";

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

/// Where a line is: its number, byte offset and time.
type At = (i64, i64, Option<i64>);

/// What the rules read of a line (besides its `type`).
struct Line<'a> {
    at: At,
    is_meta: bool,
    compact_summary: bool,
    api_error: bool,
    subtype: Option<Value<'a>>,
    content: Option<Value<'a>>,
    tool_use_id: Option<Value<'a>>,
    parent_tool_use_id: Option<Value<'a>>,
    retry: Option<Value<'a>>,
    max_retries: Option<Value<'a>>,
    hook_errors: Option<Value<'a>>,
    message: Option<Value<'a>>,
    data: Option<Value<'a>>,
}

/// The rules of one `type` of line: what it tells, moving the tracker.
type LineRule = fn(&mut Tracker, &Line<'_>);

/// The rules, by the line's `type`: a line of any other type tells nothing.
const LINE_RULES: [(&str, LineRule); 5] = [
    ("assistant", Tracker::assistant),
    ("user", Tracker::user),
    ("system", Tracker::system),
    ("progress", Tracker::progress),
    ("result", Tracker::result),
];

fn is_true(v: Option<Value<'_>>) -> bool {
    v.and_then(|v| v.as_bool()).unwrap_or(false)
}

/// Replays a transcript's lines and keeps the verdict of the last line that decides.
#[derive(Debug, Clone)]
pub struct Tracker {
    /// The file is a sub-agent's own transcript (`subagents/agent-*.jsonl`, or a pre-2.1
    /// `agent-*.jsonl`): its sidechain lines are its main conversation.
    subagent_file: bool,
    /// Tool calls of the current response without a result: (id, name).
    open: Vec<(String, Option<String>)>,
    /// The current response's `message.id`.
    response: Option<String>,
    /// A line of the current response has a `stop_reason`: Claude Code fills it in only once
    /// the response has ended.
    response_stopped: bool,
    /// The current response is known to have ended: it has a `stop_reason`, or a line after its
    /// last one shows its tools running (a result, a progress line, a sub-agent's line).
    response_complete: bool,
    /// A call of the current response was rejected ("STOP what you are doing…").
    rejected: bool,
    verdict: Option<Verdict>,
}

/// Whether a file name is a sub-agent's transcript.
pub fn is_subagent_file(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|name| name.starts_with("agent-"))
}

impl Tracker {
    pub fn new(subagent_file: bool) -> Tracker {
        Tracker {
            subagent_file,
            open: Vec::new(),
            response: None,
            response_stopped: false,
            response_complete: false,
            rejected: false,
            verdict: None,
        }
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

    /// The verdict while calls are open: acting, confirmed once the response is known to have
    /// ended (before that the model may still be writing blocks of it).
    fn acting(&mut self, rule: &'static str, at: At, lead: &str) {
        let mut d = format!("{lead}{}", self.open_detail());
        let confidence = if self.rejected {
            d.push_str(
                "; a call of the response was rejected: the others are being cancelled (idle) unless they already run",
            );
            Confidence::Inferred
        } else if self.response_complete {
            Confidence::Confirmed
        } else {
            d.push_str("; the response has no stop_reason yet: more blocks may follow before the tools run (thinking)");
            Confidence::Inferred
        };
        self.decide(State::Acting, confidence, rule, at, d);
    }

    /// A point of rest: nothing from before it is in flight any more (calls, the response).
    fn reset(&mut self) {
        self.open.clear();
        self.response = None;
        self.response_stopped = false;
        self.response_complete = false;
        self.rejected = false;
    }

    /// The turn is over: nothing is in flight any more and the agent is idle, for certain.
    fn turn_over(&mut self, rule: &'static str, at: At, detail: String) {
        self.reset();
        self.decide(State::Idle, Confidence::Confirmed, rule, at, detail);
    }

    /// The turn is probably over, but what follows at once may go on with it.
    fn probably_over(&mut self, rule: &'static str, at: At, detail: String) {
        self.reset();
        self.decide(State::Idle, Confidence::Inferred, rule, at, detail);
    }

    fn decide(&mut self, state: State, confidence: Confidence, rule: &'static str, at: At, detail: String) {
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
    /// skipped; the others go to the rules of their `type` ([`LINE_RULES`]).
    pub fn feed(&mut self, line_no: i64, byte_offset: i64, text: &str) {
        let Ok(p) = parse(text) else { return };
        if p.root.kind != Kind::Object {
            return;
        }
        let ts =
            p.get("timestamp").and_then(|t| t.as_str()).and_then(|t| crate::indexer::timestamp::parse_timestamp(&t));
        let line_type = str_of(p.get("type")).unwrap_or_default();
        let [sidechain, is_meta, compact_summary, subtype, content, tool_use_id, parent_tool_use_id, retry, max_retries, api_error, hook_errors] =
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
                "isApiErrorMessage",
                "hookErrors",
            ]);
        let l = Line {
            at: (line_no, byte_offset, ts),
            is_meta: is_true(is_meta),
            compact_summary: is_true(compact_summary),
            api_error: is_true(api_error),
            subtype,
            content,
            tool_use_id,
            parent_tool_use_id,
            retry,
            max_retries,
            hook_errors,
            message: p.get("message"),
            data: p.get("data"),
        };
        if is_true(sidechain) && !self.subagent_file && matches!(line_type.as_str(), "user" | "assistant") {
            if !self.open.is_empty() {
                // The sub-agent runs only once its Task call runs: the response has ended.
                self.response_complete = true;
                self.acting("sidechain", l.at, "a sub-agent is working for an open call; ");
            }
            return;
        }
        if let Some((_, rule)) = LINE_RULES.iter().find(|(t, _)| *t == line_type) {
            rule(self, &l);
        }
    }

    /// An `assistant` line: a block of the response, its calls, its stop reason.
    fn assistant(&mut self, l: &Line<'_>) {
        let (at, message, api_error) = (l.at, l.message, l.api_error);
        let [model, stop, blocks, id] =
            message.map_or([None; 4], |m| m.pick(["model", "stop_reason", "content", "id"]));
        if str_of(model).as_deref() == Some("<synthetic>") {
            let text = user_text(blocks);
            if api_error || text.trim_start().starts_with("API Error") {
                self.turn_over(
                    "synthetic",
                    at,
                    "a synthetic assistant line reporting an API error: the turn is over".into(),
                );
            } else {
                self.probably_over(
                    "synthetic",
                    at,
                    format!(
                        "a synthetic assistant line ({}): Claude Code writes \"No response requested.\" when the person submits the first prompt after a resume, and that prompt follows (thinking)",
                        text.chars().take(60).collect::<String>()
                    ),
                );
            }
            return;
        }
        // A new response: calls of an earlier one still without a result were left
        // behind (the model is called again only once every call has its result).
        if let Some(id) = str_of(id) {
            if self.response.as_deref() != Some(id.as_str()) {
                self.open.clear();
                self.response = Some(id);
                self.response_stopped = false;
            }
        } else {
            self.response = None;
            self.response_stopped = false;
        }
        self.rejected = false;
        let stop = str_of(stop);
        self.response_stopped |= stop.is_some();
        // A block written after a result of the same response (tools that start while
        // the response streams) shows that the response was still going on.
        self.response_complete = self.response_stopped;
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
            self.acting("tool_use", at, "");
            return;
        }
        match stop.as_deref() {
            Some(s @ ("end_turn" | "stop_sequence" | "refusal")) => {
                self.decide(State::Idle, Confirmed, "stop_reason", at, format!("stop_reason {s}"));
            }
            Some("max_tokens") => {
                self.decide(
                    State::Idle,
                    Inferred,
                    "stop_reason",
                    at,
                    "stop_reason max_tokens: the turn ends (idle), or Claude Code asks the model to resume (thinking)"
                        .into(),
                );
            }
            _ if !kinds.is_empty() && kinds.iter().all(|k| k == "thinking" || k == "redacted_thinking") => {
                self.decide(State::Thinking, Inferred, "thinking_block", at, "a thinking block without stop_reason: the response goes on (thinking), or it ended on the thinking alone (idle, confirmed by a turn end)".into());
            }
            _ => {
                self.decide(State::Thinking, Inferred, "open_response", at, "response text without stop_reason: more blocks may follow (thinking), or the turn ended without a turn-end line (idle)".into());
            }
        }
    }

    /// A `user` line: results of calls, a prompt, a meta line, an interrupt, a command.
    fn user(&mut self, l: &Line<'_>) {
        let (at, message, compact_summary, is_meta) = (l.at, l.message, l.compact_summary, l.is_meta);
        if compact_summary {
            self.reset();
            self.decide(State::Thinking, Inferred, "compaction", at, "the summary after a compaction: the model goes on after an automatic one (thinking), waits after /compact (idle)".into());
            return;
        }
        let content = message.and_then(|m| m.get("content"));
        if self.results(at, content) {
            return;
        }
        let text = user_text(content);
        let text = text.trim_start();
        if is_meta {
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
        if !text.is_empty() {
            self.typed(at, text);
        }
    }

    /// A `user` line's `tool_result` blocks: the calls they close; whether there were any (the
    /// line is then decided).
    fn results(&mut self, at: At, content: Option<Value<'_>>) -> bool {
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
            if result.is_some_and(stops_the_turn) {
                self.rejected = true;
            }
        }
        if results > 0 {
            // Results come once the response has ended, unless a later block of it shows
            // that tools started while it streamed.
            self.response_complete = true;
            if !self.open.is_empty() {
                self.acting("tool_result_partial", at, "");
            } else if self.rejected {
                self.decide(
                    State::Idle,
                    Inferred,
                    "tool_rejected",
                    at,
                    "the person rejected the tool call, or stopped it while it ran, and the model was told to wait (idle); a prompt queued meanwhile, or typed in the rejection dialog, is answered at once (thinking)".into(),
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
            return true;
        }
        false
    }

    /// Text a person typed, or Claude Code wrote for them, at the prompt.
    fn typed(&mut self, at: At, text: &str) {
        if text.starts_with("[Request interrupted by user for tool use") {
            self.probably_over("interrupt", at, "the person stopped a tool call (rejected it, or pressed Escape while it ran): idle, unless a prompt queued meanwhile, or typed in the rejection dialog, is answered at once (thinking)".into());
        } else if text.starts_with("[Request interrupted") {
            self.turn_over("interrupt", at, "the person interrupted the agent".into());
        } else if text.starts_with("<command-name>") || text.starts_with("<command-message>") {
            self.decide(State::Idle, Inferred, "slash_command", at, "a slash command: a local one leaves the agent idle, a prompt command is followed by its expanded prompt".into());
        } else if ["<local-command-stdout>", "<local-command-stderr>", "<bash-input>", "<bash-stdout>", "<bash-stderr>"]
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
            self.reset();
            self.decide(State::Thinking, Confirmed, "prompt", at, "a prompt: the model's turn".into());
        }
    }

    /// A `system` line: a turn end, a retry, a compaction, a hook, a local command.
    fn system(&mut self, l: &Line<'_>) {
        let (at, subtype, content, hook_errors, retry, max_retries) =
            (l.at, l.subtype, l.content, l.hook_errors, l.retry, l.max_retries);
        let subtype = str_of(subtype);
        let text = strip_ansi(&str_of(content).unwrap_or_default());
        if text.starts_with(PROMPT_BLOCKED) {
            self.turn_over("hook_stopped", at, "a UserPromptSubmit hook blocked the prompt".into());
            return;
        }
        match subtype.as_deref() {
            Some("stop_hook_summary")
                if hook_errors.is_some_and(|e| e.kind == Kind::Array && e.items().next().is_some()) =>
            {
                self.probably_over("turn_end", at, "turn end (stop_hook_summary) with hook errors: a Stop hook that blocked makes the model go on (thinking)".into());
            }
            Some("stop_hook_summary") | Some("turn_duration") => {
                self.reset();
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
                    self.decide(State::Thinking, Confirmed, "api_retry", at, "an API call is being retried".into());
                }
            }
            Some("compact_boundary") => {
                self.reset();
                self.decide(
                    State::Thinking,
                    Inferred,
                    "compaction",
                    at,
                    "a compaction: the model goes on after an automatic one (thinking), waits after /compact (idle)"
                        .into(),
                );
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
                if let Some(running) = text.strip_prefix("Running ") {
                    if running.starts_with("Stop") {
                        self.probably_over("stop_hook", at, STOP_HOOK_RUNNING.into());
                    }
                } else if text.starts_with("Stop hook feedback") || text.starts_with("Stop hook error") {
                    self.reset();
                    self.decide(
                        State::Thinking,
                        Inferred,
                        "stop_hook",
                        at,
                        "a Stop hook blocked the stop: the model goes on (thinking), unless the hook also ended the session".into(),
                    );
                } else if text.starts_with("Stop") {
                    self.turn_over("stop_hook", at, "a Stop hook completed: the turn is over".into());
                }
            }
            _ => {}
        }
    }

    /// A `progress` line: a hook or a tool of an open call running.
    fn progress(&mut self, l: &Line<'_>) {
        let (at, tool_use_id, parent_tool_use_id) = (l.at, l.tool_use_id, l.parent_tool_use_id);
        let data = l.data;
        let [kind, event] = data.map_or([None; 2], |d| d.pick(["type", "hookEvent"]));
        let kind = str_of(kind).unwrap_or_default();
        let event = str_of(event);
        if kind == "hook_progress" {
            match event.as_deref() {
                Some("Stop") => {
                    self.probably_over("stop_hook", at, STOP_HOOK_RUNNING.into());
                    return;
                }
                Some("UserPromptSubmit") => {
                    if self.verdict.as_ref().is_some_and(|v| v.rule == "prompt") {
                        self.decide(State::Thinking, Inferred, "prompt", at, "a prompt whose UserPromptSubmit hook is running: the model's turn (thinking), unless the hook blocks the prompt (idle)".into());
                    }
                    return;
                }
                _ => {}
            }
        }
        let tool = str_of(parent_tool_use_id).or_else(|| str_of(tool_use_id));
        if tool.is_some_and(|t| self.open.iter().any(|(o, _)| *o == t)) {
            // Its tool (or the tool's hook) runs: the response has ended, unless a later
            // block of it shows that tools started while it streamed.
            self.response_complete = true;
            let lead = match event {
                Some(e) => format!("{kind} ({e}) of an open call; "),
                None => format!("{kind} of an open call; "),
            };
            self.acting("tool_progress", at, &lead);
        }
    }

    /// The session's `result` line.
    fn result(&mut self, l: &Line<'_>) {
        self.turn_over("result", l.at, "the session's result line".into());
    }
}

/// A Stop hook is running: it may still block, and then the model goes on.
const STOP_HOOK_RUNNING: &str =
    "the Stop hook is running: the turn is over (idle), unless the hook blocks and the model goes on (thinking)";

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
