//! Pairs the tool calls of the events a plan reads with their results, and collects what the
//! plan reports about them: the skip list, the calls in flight, lost events, anomalies and the
//! events themselves. Pure and streaming: the shell feeds events in file order, a page at a
//! time, so memory follows the calls and events after the marker, never the files.
//!
//! Pairing rules:
//! - A start and a result that carry an id (spike `invocation_id`, Claude Code `tool_use.id` /
//!   `tool_use_id`, a cortex-plane `data.toolCallId`) pair by that id, across writers.
//! - Without ids (the shipped cortex-plane writer), a result pairs with the one unmatched earlier
//!   start of the same tool name, within one writer segment: a `seq` lower than its predecessor
//!   starts a new writer, and a crashed writer's open call is never completed by the next
//!   writer's result. When several calls of that tool are open at once, order cannot tell which
//!   one a result closes: those calls form an *ambiguity group*, none of them is paired, the
//!   group collects the results, and every member goes to the verify list (never guessed).
//! - A result with no start in the plan is an anomaly: `started_before_marker` when the call's
//!   start lies before the marker (it is not a skip: the checkpoint may not cover it), else
//!   `result_without_start`. A second result for a call is `duplicate_result`.

use std::collections::{HashMap, VecDeque};

use crate::indexer::dialect::Dialect;

use super::keys::derived_call_key;
use super::line::{facts, Capped, Facts, Finish, Row, Start, TOOL_TYPES};

/// Where an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub session: usize,
    pub byte_offset: i64,
    pub line_no: i64,
    pub seq: Option<i64>,
    pub ts_us: Option<i64>,
}

impl Pos {
    fn of(row: &Row<'_>) -> Pos {
        Pos { session: row.session, byte_offset: row.byte_offset, line_no: row.line_no, seq: row.seq, ts_us: row.ts_us }
    }
}

/// A tool call the plan saw start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The call's id, or its derived key (`<file relative to the job>@<offset of its start>`).
    pub key: String,
    pub key_is_id: bool,
    pub tool_name: Option<String>,
    pub start: Pos,
    pub input_hash: Option<String>,
    pub input: Option<Capped>,
    /// The key the pod wrote in the call's start line ([`super::line::Start::written_key`]).
    pub written_key: Option<String>,
    /// 1 for the first call of this tool in the plan, 2 for the second...
    pub tool_ordinal: u32,
    /// Writer segment (counted from 0 over the plan).
    pub segment: u32,
    /// The result paired with this call (never set for a member of an ambiguity group).
    pub result: Option<CallResult>,
    /// The call's start line is in the plan. A result whose start is not (lost with a crash-cut
    /// line, or before the anchor) is a call of its own with `start` at the result.
    pub start_seen: bool,
    /// For a result without its start: the start lies before the anchor (an id lookup said so).
    pub started_before: bool,
    /// The ambiguity group this call belongs to (an index into [`Body::groups`]).
    pub group: Option<usize>,
    /// Set by [`super::verdict::settle`]: what the plan does with it, and the key it was sent
    /// with ([`super::cycles`]).
    pub verdict: Verdict,
    pub keys: CallKeys,
}

/// What the plan does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Finished after the anchor: skip it, with its result.
    Completed,
    /// Started after the anchor, no result: verify it with the external system.
    #[default]
    InFlight,
    /// The bytes cannot settle it: verify it, with the evidence.
    Verify(VerifyReason),
    /// Before the anchor: the checkpoint covers it.
    Dropped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyReason {
    /// Several calls of one tool were open when a result came: order cannot tell which it closed.
    AmbiguousPairing,
    /// The call's start or result lies in the time window where the clocks cannot tell whether
    /// it came before or after the checkpoint.
    UncertainTime,
    /// Started before the anchor, finished after it: the checkpoint may not cover it.
    StartedBeforeAnchor,
    /// A result whose start the plan does not have (its line was lost): the call finished, but
    /// neither its input nor its place among the writer's calls is known.
    StartLost,
    /// Started before the anchor and still open when the checkpoint was stored: the checkpoint
    /// cannot cover what had not finished.
    OpenAtAnchor,
    /// Its start line was being written when the checkpoint was stored (the high-water mark
    /// fell inside it).
    StraddlesAnchor,
    /// Its input cannot be read as the writer wrote it (the index holds no payload for the line,
    /// and the file cannot be read here): no key, nothing to match it by.
    InputUnknown,
    /// The bytes leave more than one place (or key) for it among the replay's calls.
    KeyAmbiguous,
    /// Nothing says which checkpoint its writer keyed it under.
    KeyUnknown,
    /// Finished before the checkpoint, which the control plane stored: the state it stored may
    /// have been reported before the call finished, so it may not cover it.
    FinishedBeforeAnchor,
}

impl VerifyReason {
    pub fn label(self) -> &'static str {
        match self {
            VerifyReason::AmbiguousPairing => "ambiguous_pairing",
            VerifyReason::UncertainTime => "uncertain_time",
            VerifyReason::StartedBeforeAnchor => "started_before_anchor",
            VerifyReason::StartLost => "start_lost",
            VerifyReason::OpenAtAnchor => "open_at_anchor",
            VerifyReason::StraddlesAnchor => "straddles_anchor",
            VerifyReason::InputUnknown => "input_unknown",
            VerifyReason::KeyAmbiguous => "key_ambiguous",
            VerifyReason::KeyUnknown => "key_unknown",
            VerifyReason::FinishedBeforeAnchor => "finished_before_anchor",
        }
    }
}

/// Calls of one tool that were open together when a result came, and the results that came
/// while any of them was open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group {
    pub results: Vec<CallResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    pub at: Pos,
    pub success: Option<bool>,
    pub result: Option<Capped>,
    pub paired_by_order: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnomalyKind {
    ResultWithoutStart,
    StartedBeforeMarker,
    DuplicateResult,
    DuplicateStart,
    SeqReset,
    ChainBroken,
    PayloadMissing,
    AmbiguousPairing,
    FileReplaced,
    FileRenamed,
}

impl AnomalyKind {
    pub fn label(self) -> &'static str {
        match self {
            AnomalyKind::ResultWithoutStart => "result_without_start",
            AnomalyKind::StartedBeforeMarker => "started_before_marker",
            AnomalyKind::DuplicateResult => "duplicate_result",
            AnomalyKind::DuplicateStart => "duplicate_start",
            AnomalyKind::SeqReset => "seq_reset",
            AnomalyKind::ChainBroken => "chain_broken",
            AnomalyKind::PayloadMissing => "payload_missing",
            AnomalyKind::AmbiguousPairing => "ambiguous_pairing",
            AnomalyKind::FileReplaced => "file_replaced",
            AnomalyKind::FileRenamed => "file_renamed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub at: Pos,
    pub key: Option<String>,
    pub tool_name: Option<String>,
    pub detail: String,
}

/// Events lost between two sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The event after the gap.
    pub at: Pos,
    /// The last seq before the gap (`None`: the writer's first event, expected to be 0).
    pub after_seq: Option<i64>,
    pub next_seq: i64,
    pub missing: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRef {
    pub at: Pos,
    pub event_type: Option<String>,
    /// The writer segment it belongs to.
    pub segment: u32,
}

/// How a seq follows the previous one of its writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqStep {
    /// The next number (or the first one seen).
    Next,
    /// Numbers skipped: events lost.
    Gap { missing: i64 },
    /// Lower or equal: a new writer restarted the count (a writer never repeats a seq).
    Reset,
}

pub fn seq_step(prev: Option<i64>, seq: i64) -> SeqStep {
    match prev {
        Some(p) if seq <= p => SeqStep::Reset,
        Some(p) if seq > p.saturating_add(1) => SeqStep::Gap { missing: seq - p - 1 },
        _ => SeqStep::Next,
    }
}

/// What the seq of a session's first event read is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// Reading starts at the file's beginning: a writer's first seq is 0.
    FileStart,
    /// Reading starts after the marker, whose seq this is.
    After(Option<i64>),
    /// Reading starts mid-file (a time window): the first seq read is the baseline.
    Unknown,
}

/// A result with an id and no start in the plan, waiting for the shell to say whether its
/// start lies before the marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub id: String,
    pub at: Pos,
    pub tool_name: Option<String>,
}

/// A checkpoint marker line (`CHECKPOINT`, `CHECKPOINT_WRITTEN`) or load
/// (`CHECKPOINT_LOADED`) read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointLine {
    pub at: Pos,
    pub checkpoint_id: Option<String>,
    pub segment: u32,
}

/// One writer's stretch of one file: from its first event to its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    pub segment: u32,
    pub session: usize,
    pub first: Pos,
    pub last: Pos,
    /// It began with its sequence counting again (a new writer, even if its first lines were
    /// lost with the line a crash cut); otherwise it is the first read of its file.
    pub after_reset: bool,
}

/// How well the bytes tell a call's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyStatus {
    /// The key the pod wrote in the call's start line: the one it sent.
    Written,
    /// One key, computed by the formula from what the writer wrote.
    Derived,
    /// More than one candidate: see the candidates.
    Ambiguous,
    /// Nothing to compute it from (the input, or the writer's checkpoint, is unknown).
    #[default]
    Unknown,
}

impl KeyStatus {
    pub fn label(self) -> &'static str {
        match self {
            KeyStatus::Written => "written",
            KeyStatus::Derived => "derived",
            KeyStatus::Ambiguous => "ambiguous",
            KeyStatus::Unknown => "unknown",
        }
    }
}

/// One possible identity of a call: its place in the plan's replay, and the key it was sent
/// with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyCandidate {
    pub replay_ordinal: Option<u32>,
    pub call_ordinal: Option<u32>,
    pub checkpoint_ref: String,
    pub idempotency_key: String,
}

/// What the plan reports of a call's key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallKeys {
    pub status: KeyStatus,
    /// Its place among the calls with its tool and input in the replay from the plan's
    /// checkpoint, when exactly one.
    pub replay_ordinal: Option<u32>,
    /// The key, and what it was built from, when exactly one.
    pub idempotency_key: Option<String>,
    pub call_ordinal: Option<u32>,
    pub checkpoint_ref: Option<String>,
    /// When the key or the place is not unique: every (place, key) the bytes allow.
    pub candidates: Vec<KeyCandidate>,
}

/// Everything the plan reports about the events it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Body {
    pub calls: Vec<Call>,
    pub groups: Vec<Group>,
    pub anomalies: Vec<Anomaly>,
    pub gaps: Vec<Gap>,
    pub events: Vec<EventRef>,
    /// Each writer segment's first and last event, in order.
    pub segments: Vec<SegmentSpan>,
    /// Checkpoint markers the writers wrote, and the checkpoints they said they loaded.
    pub markers: Vec<CheckpointLine>,
    pub loads: Vec<CheckpointLine>,
    /// Set by the keys ([`super::cycles::resolve`]): where a writer the keys depend on lies in
    /// bytes not read, `(session, offset)`: read that file from the writer writing just before
    /// `offset` to place them.
    pub unread: Vec<(usize, i64)>,
    /// The first event of the latest writer segment, when only that segment is kept.
    pub segment_start: Option<Pos>,
    /// The writer segment of the last event read (a call of an earlier one lost its writer).
    pub last_segment: u32,
}

impl Body {
    pub fn completed(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.verdict == Verdict::Completed)
    }

    pub fn in_flight(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.verdict == Verdict::InFlight)
    }

    pub fn to_verify(&self) -> impl Iterator<Item = (&Call, VerifyReason)> {
        self.calls.iter().filter_map(|c| match c.verdict {
            Verdict::Verify(r) => Some((c, r)),
            _ => None,
        })
    }

    /// Keeps only what lies at or after `from[session]` (`i64::MAX`, or no entry: nothing of
    /// that file): a plan over whole files lists what it was asked for, though its keys were
    /// worked out from wider reads. A call is kept by its start, or by its result when its
    /// start was not read.
    pub fn keep_from(&mut self, from: &[i64]) {
        let keep = |p: &Pos| p.byte_offset >= from.get(p.session).copied().unwrap_or(i64::MAX);
        self.calls.retain(
            |c| {
                if c.start_seen {
                    keep(&c.start)
                } else {
                    c.result.as_ref().is_some_and(|r| keep(&r.at))
                }
            },
        );
        self.events.retain(|e| keep(&e.at));
        self.anomalies.retain(|a| keep(&a.at));
        self.gaps.retain(|g| keep(&g.at));
    }

    /// The results a call's entry carries: its own, or its ambiguity group's.
    pub fn results_of<'a>(&'a self, c: &'a Call) -> Vec<&'a CallResult> {
        match c.group.and_then(|g| self.groups.get(g)) {
            Some(g) => g.results.iter().collect(),
            None => c.result.iter().collect(),
        }
    }
}

/// The files a plan reads, by index, with what pairing needs to know of them.
#[derive(Debug, Clone)]
pub struct SessionRef {
    pub dialect: Dialect,
    /// Path relative to the job directory (derived keys are built from it).
    pub rel_path: String,
}

/// The streaming pairer.
pub struct Pairing {
    sessions: Vec<SessionRef>,
    max_bytes: usize,
    segment_only: bool,
    body: Body,
    orphans: Vec<Orphan>,
    open_by_id: HashMap<String, usize>,
    done_by_id: HashMap<String, usize>,
    open_by_tool: HashMap<(u32, String), VecDeque<usize>>,
    /// The ambiguity group of a (segment, tool) queue while it has members open.
    open_group: HashMap<(u32, String), usize>,
    /// Writer segments that lost events (a seq gap): a lost line may have been a call's start,
    /// so order cannot pair a result there.
    lossy: std::collections::HashSet<u32>,
    tool_counts: HashMap<String, u32>,
    segment: u32,
    current: Option<usize>,
    prev_seq: Option<i64>,
    baseline: Baseline,
    /// The next segment begins with a seq reset.
    reset_pending: bool,
}

impl Pairing {
    /// `max_bytes` caps results and inputs; `segment_only` keeps only the latest writer segment
    /// (a seq reset discards what came before it).
    pub fn new(sessions: Vec<SessionRef>, max_bytes: usize, segment_only: bool) -> Pairing {
        Pairing {
            sessions,
            max_bytes,
            segment_only,
            body: Body::default(),
            orphans: Vec::new(),
            open_by_id: HashMap::new(),
            done_by_id: HashMap::new(),
            open_by_tool: HashMap::new(),
            open_group: HashMap::new(),
            lossy: std::collections::HashSet::new(),
            tool_counts: HashMap::new(),
            segment: 0,
            current: None,
            prev_seq: None,
            baseline: Baseline::FileStart,
            reset_pending: false,
        }
    }

    /// Starts reading session `session` (events then follow in file order).
    pub fn begin(&mut self, session: usize, baseline: Baseline) {
        if self.current.is_some() {
            // Another file is another writer.
            self.segment += 1;
        }
        self.current = Some(session);
        self.baseline = baseline;
        self.reset_pending = false;
        self.prev_seq = match baseline {
            Baseline::After(seq) => seq,
            _ => None,
        };
    }

    /// Anything read into the plan before an anchor chosen afterwards is dropped (used when
    /// only the latest writer segment counts).
    fn restart(&mut self) {
        self.body = Body::default();
        self.orphans.clear();
        self.open_by_id.clear();
        self.done_by_id.clear();
        self.open_by_tool.clear();
        self.open_group.clear();
        self.tool_counts.clear();
    }

    fn track_seq(&mut self, row: &Row<'_>) {
        let Some(seq) = row.seq else { return };
        let at = Pos::of(row);
        match (seq_step(self.prev_seq, seq), self.prev_seq, self.baseline) {
            (SeqStep::Reset, Some(prev), _) => {
                self.segment += 1;
                self.reset_pending = true;
                if self.segment_only {
                    self.restart();
                    self.body.segment_start = Some(at);
                }
                self.body.anomalies.push(Anomaly {
                    kind: AnomalyKind::SeqReset,
                    at,
                    key: None,
                    tool_name: None,
                    detail: if self.segment_only {
                        format!("seq {seq} after {prev}: a new writer started here; the plan covers only this writer")
                    } else {
                        format!("seq {seq} after {prev}: a new writer started here")
                    },
                });
                if seq > 0 {
                    self.body.gaps.push(Gap { at, after_seq: None, next_seq: seq, missing: seq });
                    self.lossy.insert(self.segment);
                }
            }
            (SeqStep::Gap { missing }, Some(prev), _) => {
                self.body.gaps.push(Gap { at, after_seq: Some(prev), next_seq: seq, missing });
                self.lossy.insert(self.segment);
            }
            (_, None, Baseline::FileStart) if seq > 0 => {
                self.body.gaps.push(Gap { at, after_seq: None, next_seq: seq, missing: seq });
                self.lossy.insert(self.segment);
            }
            _ => {}
        }
        self.prev_seq = Some(seq);
    }

    /// Feeds the next event of the current session.
    pub fn feed(&mut self, row: &Row<'_>) {
        let Some(session) = self.sessions.get(row.session) else { return };
        let dialect = session.dialect;
        self.track_seq(row);
        if self.segment_only && self.body.segment_start.is_none() {
            self.body.segment_start = Some(Pos::of(row));
        }
        self.body.events.push(EventRef {
            at: Pos::of(row),
            event_type: row.event_type.map(str::to_owned),
            segment: self.segment,
        });
        match self.body.segments.last_mut() {
            Some(span) if span.segment == self.segment => span.last = Pos::of(row),
            _ => self.body.segments.push(SegmentSpan {
                segment: self.segment,
                session: row.session,
                first: Pos::of(row),
                last: Pos::of(row),
                after_reset: std::mem::take(&mut self.reset_pending),
            }),
        }
        if row.payload.is_none() && row.event_type.is_some_and(|t| TOOL_TYPES.contains(&t)) {
            self.body.anomalies.push(Anomaly {
                kind: AnomalyKind::PayloadMissing,
                at: Pos::of(row),
                key: row.invocation_id.map(str::to_owned),
                tool_name: row.tool_name.map(str::to_owned),
                detail: "the index holds no payload for this line (see event.payload_problem): no input or result"
                    .into(),
            });
        }
        match facts(dialect, row, self.max_bytes) {
            Facts::Starts(starts) => {
                for s in starts {
                    self.start(row, s);
                }
            }
            Facts::Finishes(finishes) => {
                for f in finishes {
                    self.finish_call(row, f);
                }
            }
            Facts::Marker { checkpoint_id, .. } => {
                self.body.markers.push(CheckpointLine { at: Pos::of(row), checkpoint_id, segment: self.segment })
            }
            Facts::Loaded { checkpoint_id } => {
                self.body.loads.push(CheckpointLine { at: Pos::of(row), checkpoint_id, segment: self.segment })
            }
            Facts::Other => {}
        }
    }

    fn start(&mut self, row: &Row<'_>, s: Start) {
        let at = Pos::of(row);
        let (key, key_is_id) = match &s.id {
            Some(id) => (id.clone(), true),
            None => {
                let rel = self.sessions.get(row.session).map(|r| r.rel_path.as_str()).unwrap_or("");
                (derived_call_key(rel, row.byte_offset), false)
            }
        };
        if key_is_id && (self.open_by_id.contains_key(&key) || self.done_by_id.contains_key(&key)) {
            self.body.anomalies.push(Anomaly {
                kind: AnomalyKind::DuplicateStart,
                at,
                key: Some(key),
                tool_name: s.tool_name,
                detail: "a second start for a call id already started in the plan; the first one is kept".into(),
            });
            return;
        }
        let tool = s.tool_name.clone().unwrap_or_default();
        let ordinal = {
            let n = self.tool_counts.entry(tool.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let index = self.body.calls.len();
        let queue = (self.segment, tool);
        // A call that starts while its tool's queue is ambiguous joins the ambiguity.
        let group = if key_is_id { None } else { self.open_group.get(&queue).copied() };
        self.body.calls.push(Call {
            key: key.clone(),
            key_is_id,
            tool_name: s.tool_name,
            start: at,
            input_hash: s.input_hash,
            input: s.input,
            written_key: s.written_key,
            tool_ordinal: ordinal,
            segment: self.segment,
            result: None,
            start_seen: true,
            started_before: false,
            group,
            verdict: Verdict::InFlight,
            keys: CallKeys::default(),
        });
        if key_is_id {
            self.open_by_id.insert(key, index);
        } else {
            self.open_by_tool.entry(queue).or_default().push_back(index);
        }
    }

    fn finish_call(&mut self, row: &Row<'_>, f: Finish) {
        let at = Pos::of(row);
        let by_order = f.id.is_none();
        let found = match &f.id {
            Some(id) => {
                if let Some(&done) = self.done_by_id.get(id) {
                    let first = self.body.calls.get(done).and_then(|c| c.result.as_ref()).map(|r| r.at.byte_offset);
                    self.body.anomalies.push(Anomaly {
                        kind: AnomalyKind::DuplicateResult,
                        at,
                        key: Some(id.clone()),
                        tool_name: f.tool_name.or_else(|| self.body.calls.get(done).and_then(|c| c.tool_name.clone())),
                        detail: format!(
                            "a second result for this call; the first one (byte offset {}) is the one in completed",
                            first.unwrap_or(-1)
                        ),
                    });
                    return;
                }
                self.open_by_id.remove(id)
            }
            None => {
                let queue = (self.segment, f.tool_name.clone().unwrap_or_default());
                let open = self.open_by_tool.get(&queue).map_or(0, VecDeque::len);
                let lossy = self.lossy.contains(&self.segment);
                if open >= 2 || (open == 1 && (lossy || self.open_group.contains_key(&queue))) {
                    self.ambiguous_result(queue, at, f);
                    return;
                }
                self.open_by_tool.get_mut(&queue).and_then(|q| q.pop_front())
            }
        };
        match found.and_then(|i| self.body.calls.get_mut(i).map(|c| (i, c))) {
            Some((i, call)) => {
                call.result = Some(CallResult { at, success: f.success, result: f.result, paired_by_order: by_order });
                if call.tool_name.is_none() {
                    call.tool_name = f.tool_name;
                }
                if call.key_is_id {
                    self.done_by_id.insert(call.key.clone(), i);
                }
            }
            None => {
                let tool_name = f.tool_name.clone();
                let key = match &f.id {
                    Some(id) => {
                        self.orphans.push(Orphan { id: id.clone(), at, tool_name: tool_name.clone() });
                        id.clone()
                    }
                    None => {
                        self.body.anomalies.push(Anomaly {
                            kind: AnomalyKind::ResultWithoutStart,
                            at,
                            key: None,
                            tool_name: tool_name.clone(),
                            detail: format!(
                                "no unmatched earlier call of {} in this writer segment: it finished, but its start is not in the plan",
                                tool_name.as_deref().unwrap_or("(no tool name)")
                            ),
                        });
                        let rel = self.sessions.get(at.session).map(|r| r.rel_path.as_str()).unwrap_or("");
                        derived_call_key(rel, at.byte_offset)
                    }
                };
                // The call finished: it goes to verify, never silently away.
                self.body.calls.push(Call {
                    key,
                    key_is_id: f.id.is_some(),
                    tool_name,
                    start: at,
                    input_hash: None,
                    input: None,
                    written_key: None,
                    tool_ordinal: 0,
                    segment: self.segment,
                    result: Some(CallResult { at, success: f.success, result: f.result, paired_by_order: by_order }),
                    start_seen: false,
                    started_before: false,
                    group: None,
                    verdict: Verdict::Verify(VerifyReason::StartLost),
                    keys: CallKeys::default(),
                });
            }
        }
    }

    /// A result of `queue`'s tool while several of its calls are open (or were, since the
    /// queue last emptied): it closes one of them, but order cannot say which. Every open
    /// call joins the queue's ambiguity group, which keeps the result; one member leaves the
    /// queue (the count of open calls stays right), none is paired.
    fn ambiguous_result(&mut self, queue: (u32, String), at: Pos, f: Finish) {
        let group = match self.open_group.get(&queue) {
            Some(&g) => g,
            None => {
                let g = self.body.groups.len();
                self.body.groups.push(Group::default());
                let open = self.open_by_tool.get(&queue).map_or(0, VecDeque::len);
                let tool = f.tool_name.as_deref().unwrap_or("(no tool name)");
                self.body.anomalies.push(Anomaly {
                    kind: AnomalyKind::AmbiguousPairing,
                    at,
                    key: None,
                    tool_name: f.tool_name.clone(),
                    detail: if open >= 2 {
                        format!("{open} calls of {tool} were open when this result came and the writer gives them no ids: none is skipped, all are in verify with the results")
                    } else {
                        format!("this writer lost events before this result of {tool}, and a lost line may have been its call's start: the open call is not skipped, it is in verify with the result")
                    },
                });
                g
            }
        };
        if let Some(q) = self.open_by_tool.get_mut(&queue) {
            for &i in q.iter() {
                if let Some(c) = self.body.calls.get_mut(i) {
                    c.group = Some(group);
                }
            }
            q.pop_front();
            if q.is_empty() {
                self.open_group.remove(&queue);
            } else {
                self.open_group.insert(queue, group);
            }
        }
        if let Some(g) = self.body.groups.get_mut(group) {
            g.results.push(CallResult { at, success: f.success, result: f.result, paired_by_order: true });
        }
    }

    /// The plan's body. `started_before(id)` says whether a call with this id started before
    /// the marker (the shell looks it up in the index).
    pub fn finish<E>(mut self, mut started_before: impl FnMut(&str) -> Result<bool, E>) -> Result<Body, E> {
        for o in std::mem::take(&mut self.orphans) {
            let before = started_before(&o.id)?;
            if let Some(c) = self.body.calls.iter_mut().find(|c| !c.start_seen && c.key == o.id && c.start == o.at) {
                c.started_before = before;
            }
            self.body.anomalies.push(Anomaly {
                kind: if before { AnomalyKind::StartedBeforeMarker } else { AnomalyKind::ResultWithoutStart },
                at: o.at,
                key: Some(o.id),
                tool_name: o.tool_name,
                detail: if before {
                    "the call started before the marker and finished after it: not a skip, the checkpoint may not cover it".into()
                } else {
                    "no start for this call id in the job's files".into()
                },
            });
        }
        self.body.anomalies.sort_by_key(|a| (a.at.session, a.at.byte_offset));
        self.body.last_segment = self.segment;
        Ok(self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::super::cycles::{KeyContext, Place, Ref, Store};
    use super::super::keys::call_idempotency_key;
    use super::super::verdict::settle;
    use super::*;

    fn sessions(d: Dialect, n: usize) -> Vec<SessionRef> {
        (0..n).map(|i| SessionRef { dialect: d, rel_path: format!("session-{:03}.jsonl", i + 1) }).collect()
    }

    fn plane(off: i64, seq: i64, t: &str, tool: &str, data: &str) -> (i64, i64, String, String, String) {
        (off, seq, t.to_owned(), tool.to_owned(), data.to_owned())
    }

    fn feed_plane(p: &mut Pairing, rows: &[(i64, i64, String, String, String)]) {
        for (off, seq, t, tool, data) in rows {
            let payload = format!(r#"{{"type":"{t}","sequence":{seq},"data":{data}}}"#);
            p.feed(&Row {
                session: 0,
                byte_offset: *off,
                line_no: *off,
                event_type: Some(t),
                seq: Some(*seq),
                tool_name: (!tool.is_empty()).then_some(tool.as_str()),
                payload: Some(&payload),
                ..Row::default()
            });
        }
    }

    fn no_lookup(_: &str) -> Result<bool, ()> {
        Ok(false)
    }

    /// Every writer resumed from checkpoint CRC 7, which is the plan's: keys are under it.
    fn keyed_under_7() -> KeyContext {
        KeyContext {
            scope: "job".into(),
            stores: vec![Store { reference: Ref::Crc(7), own: false, place: Place::Origin, at_us: 0 }],
            plan_store: Some(0),
            origin_known: true,
            read_from: vec![0],
            ..KeyContext::default()
        }
    }

    /// The body with every call's verdict, ordinal and key.
    fn settled(p: Pairing, started_before: impl FnMut(&str) -> Result<bool, ()>) -> Body {
        let mut body = p.finish(started_before).unwrap_or_default();
        settle(&mut body, None, &mut keyed_under_7());
        body
    }

    #[test]
    fn shipped_results_pair_in_order_by_tool_name() {
        let mut p = Pairing::new(sessions(Dialect::CortexPlane, 1), 100, false);
        p.begin(0, Baseline::FileStart);
        feed_plane(
            &mut p,
            &[
                plane(0, 0, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{"p":"a"}}"#),
                plane(10, 1, "TOOL_CALL", "exec", r#"{"toolName":"exec","toolInput":{"c":"x"}}"#),
                plane(20, 2, "TOOL_RESULT", "read", r#"{"toolName":"read","output":"A","isError":false}"#),
                plane(30, 3, "TOOL_RESULT", "exec", r#"{"toolName":"exec","output":"X","isError":true}"#),
                plane(40, 4, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{"p":"b"}}"#),
                plane(50, 5, "TOOL_RESULT", "read", r#"{"toolName":"read","output":"B","isError":false}"#),
                plane(60, 6, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{"p":"c"}}"#),
            ],
        );
        let body = settled(p, no_lookup);
        let done: Vec<_> = body
            .completed()
            .map(|c| (c.key.clone(), c.tool_ordinal, c.result.as_ref().and_then(|r| r.result.clone()).map(|r| r.text)))
            .collect();
        assert_eq!(
            done,
            [
                ("session-001.jsonl@0".to_owned(), 1, Some("A".to_owned())),
                ("session-001.jsonl@10".to_owned(), 1, Some("X".to_owned())),
                ("session-001.jsonl@40".to_owned(), 2, Some("B".to_owned())),
            ]
        );
        let open: Vec<_> = body.in_flight().map(|c| (c.key.clone(), c.tool_ordinal, c.keys.call_ordinal)).collect();
        // Its ordinal counts the calls of read with the same input: it is the first.
        assert_eq!(open, [("session-001.jsonl@60".to_owned(), 3, Some(1))]);
        assert!(body.anomalies.is_empty(), "{:?}", body.anomalies);
        assert!(body.completed().all(|c| c.result.as_ref().is_some_and(|r| r.paired_by_order)));
    }

    #[test]
    fn a_whole_file_plan_lists_only_what_it_was_asked_for() {
        let mut p = Pairing::new(sessions(Dialect::CortexPlane, 1), 100, false);
        p.begin(0, Baseline::FileStart);
        feed_plane(
            &mut p,
            &[
                plane(0, 0, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{"p":"a"}}"#),
                plane(10, 1, "TOOL_RESULT", "read", r#"{"toolName":"read","output":"A","isError":false}"#),
                plane(20, 2, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{"p":"a"}}"#),
            ],
        );
        let mut body = settled(p, no_lookup);
        // Keys from the whole read: the second read of a is the second.
        let second = body.calls.iter().find(|c| c.start.byte_offset == 20).map(|c| c.keys.call_ordinal);
        assert_eq!(second, Some(Some(2)));
        body.keep_from(&[15]);
        assert_eq!(
            body.calls.iter().map(|c| (c.start.byte_offset, c.keys.call_ordinal)).collect::<Vec<_>>(),
            [(20, Some(2))]
        );
        assert_eq!(body.events.iter().map(|e| e.at.byte_offset).collect::<Vec<_>>(), [20]);
        body.keep_from(&[]);
        assert!(body.calls.is_empty() && body.events.is_empty());
    }

    #[test]
    fn a_result_that_order_cannot_place_is_never_guessed() {
        let mut p = Pairing::new(sessions(Dialect::CortexPlane, 1), 100, false);
        p.begin(0, Baseline::FileStart);
        feed_plane(
            &mut p,
            &[
                plane(0, 0, "TOOL_CALL", "send_email", r#"{"toolName":"send_email","toolInput":{"to":"a"}}"#),
                plane(10, 1, "TOOL_CALL", "send_email", r#"{"toolName":"send_email","toolInput":{"to":"b"}}"#),
                plane(20, 2, "TOOL_RESULT", "send_email", r#"{"toolName":"send_email","output":"sent"}"#),
                // a third call joins the ambiguity while one of the first two is still open
                plane(30, 3, "TOOL_CALL", "send_email", r#"{"toolName":"send_email","toolInput":{"to":"c"}}"#),
                plane(40, 4, "TOOL_RESULT", "send_email", r#"{"toolName":"send_email","output":"sent 2"}"#),
                // the queue emptied, so this one pairs again
                plane(50, 5, "TOOL_RESULT", "send_email", r#"{"toolName":"send_email","output":"sent 3"}"#),
                plane(60, 6, "TOOL_CALL", "send_email", r#"{"toolName":"send_email","toolInput":{"to":"d"}}"#),
                plane(70, 7, "TOOL_RESULT", "send_email", r#"{"toolName":"send_email","output":"sent 4"}"#),
            ],
        );
        let body = settled(p, no_lookup);
        let verify: Vec<_> = body.to_verify().map(|(c, r)| (c.start.byte_offset, r)).collect();
        assert_eq!(
            verify,
            [
                (0, VerifyReason::AmbiguousPairing),
                (10, VerifyReason::AmbiguousPairing),
                (30, VerifyReason::AmbiguousPairing)
            ]
        );
        let first = body.calls.first().map(|c| body.results_of(c).len());
        assert_eq!(first, Some(3), "the group's three results go with every member");
        assert_eq!(body.completed().map(|c| c.start.byte_offset).collect::<Vec<_>>(), [60]);
        assert_eq!(body.anomalies.iter().map(|a| a.kind).collect::<Vec<_>>(), [AnomalyKind::AmbiguousPairing]);
    }

    #[test]
    fn a_new_writer_never_completes_the_old_writers_call() {
        let mut p = Pairing::new(sessions(Dialect::CortexPlane, 1), 100, false);
        p.begin(0, Baseline::FileStart);
        feed_plane(
            &mut p,
            &[
                plane(0, 0, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{}}"#),
                // crash; the next writer starts at seq 0 in the same file
                plane(10, 0, "TOOL_RESULT", "read", r#"{"toolName":"read","output":"?"}"#),
                plane(20, 1, "TOOL_CALL", "read", r#"{"toolName":"read","toolInput":{}}"#),
            ],
        );
        let body = settled(p, no_lookup);
        assert_eq!(body.completed().count(), 0);
        // The old writer's call stays open; the new writer's read of the same input may be it
        // again or a new one, so which key it was sent with is not certain.
        assert_eq!(body.in_flight().map(|c| c.start.byte_offset).collect::<Vec<_>>(), [0]);
        let verify: Vec<_> = body.to_verify().map(|(c, r)| (c.start.byte_offset, r)).collect();
        assert_eq!(verify, [(10, VerifyReason::StartLost), (20, VerifyReason::KeyAmbiguous)]);
        let kinds: Vec<_> = body.anomalies.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [AnomalyKind::SeqReset, AnomalyKind::ResultWithoutStart]);
    }

    #[test]
    fn segment_only_keeps_the_latest_writer() {
        let mut p = Pairing::new(sessions(Dialect::CortexPlane, 1), 100, true);
        p.begin(0, Baseline::FileStart);
        feed_plane(
            &mut p,
            &[
                plane(0, 0, "TOOL_CALL", "a", r#"{"toolName":"a","toolInput":{}}"#),
                plane(10, 1, "TOOL_RESULT", "a", r#"{"toolName":"a","output":"1"}"#),
                plane(20, 0, "TOOL_CALL", "b", r#"{"toolName":"b","toolInput":{}}"#),
            ],
        );
        let body = settled(p, no_lookup);
        assert_eq!(body.completed().count(), 0);
        assert_eq!(body.in_flight().map(|c| c.key.as_str()).collect::<Vec<_>>(), ["session-001.jsonl@20"]);
        assert_eq!(body.events.len(), 1);
        assert_eq!(body.segment_start.map(|s| s.byte_offset), Some(20));
    }

    #[test]
    fn ids_gaps_duplicates_and_orphans() {
        let mut p = Pairing::new(sessions(Dialect::CortexSpike, 1), 100, false);
        p.begin(0, Baseline::FileStart);
        let rows = [
            (100, 0, "TOOL_START", "i1"),
            (110, 1, "TOOL_RESULT", "i1"),
            (120, 4, "TOOL_RESULT", "i1"),
            (130, 5, "TOOL_RESULT", "i0"),
            (140, 6, "TOOL_RESULT", "i9"),
            (150, 7, "TOOL_START", "i2"),
        ];
        for (off, seq, t, id) in rows {
            p.feed(&Row {
                session: 0,
                byte_offset: off,
                event_type: Some(t),
                seq: Some(seq),
                invocation_id: Some(id),
                tool_name: Some("t"),
                success: Some(true),
                payload: Some("{}"),
                ..Row::default()
            });
        }
        let body = settled(p, |id: &str| Ok::<bool, ()>(id == "i0"));
        assert_eq!(body.completed().map(|c| c.key.as_str()).collect::<Vec<_>>(), ["i1"]);
        let kinds: Vec<_> = body.anomalies.iter().map(|a| (a.kind, a.at.byte_offset)).collect();
        assert_eq!(
            kinds,
            [
                (AnomalyKind::DuplicateResult, 120),
                (AnomalyKind::StartedBeforeMarker, 130),
                (AnomalyKind::ResultWithoutStart, 140)
            ]
        );
        assert_eq!(body.gaps.len(), 1);
        assert_eq!((body.gaps[0].after_seq, body.gaps[0].next_seq, body.gaps[0].missing), (Some(1), 4, 2));
        // The first call of t without input is the first of the replay.
        assert_eq!(
            body.calls.first().and_then(|c| c.keys.idempotency_key.clone()),
            Some(call_idempotency_key("job", "crc:7", 1, "t", super::super::keys::NULL_INPUT_HASH))
        );
        // The results without a start in the plan are verified, never skipped; and the lost
        // lines (the gap, the two starts) may each have been a call of t, so i2's place among
        // the calls of t is not certain.
        let verify: Vec<_> = body.to_verify().map(|(c, r)| (c.key.as_str(), r)).collect();
        assert_eq!(
            verify,
            [
                ("i0", VerifyReason::StartedBeforeAnchor),
                ("i9", VerifyReason::StartLost),
                ("i2", VerifyReason::KeyAmbiguous)
            ]
        );
    }

    #[test]
    fn the_first_event_after_the_marker_may_already_be_a_gap() {
        let mut p = Pairing::new(sessions(Dialect::CortexSpike, 1), 100, false);
        p.begin(0, Baseline::After(Some(4)));
        p.feed(&Row { event_type: Some("LLM_REQUEST"), seq: Some(7), byte_offset: 9, ..Row::default() });
        let body = settled(p, no_lookup);
        assert_eq!(body.gaps.first().map(|g| (g.after_seq, g.missing)), Some((Some(4), 2)));
    }
}
