//! Phase 2 of recovery (Spike #31 §Question 6): which session files, from where, a plan reads,
//! or why it reads none. Pure: the shell answers the few index lookups through [`Probe`].
//!
//! The decision tree, from the job's latest session file (files in
//! `(session_ordinal, first_seen, path)` order, numbers compared as numbers):
//!
//! 1. No session files: `checkpoint_only`, `no_session_files`.
//! 2. Search backwards, through the latest file and then earlier ones, for the last marker
//!    (`CHECKPOINT_WRITTEN`, or the shipped schema's `CHECKPOINT`). Every file the search passes
//!    must be usable: not quarantined (`quarantined`), trusted (`file_untrusted`), indexed at all
//!    (`not_indexed`), and, if deleted, indexed to its end before it went (`file_gone`).
//! 3. A marker found, and (with `match_checkpoint`) its id equals the expected id (the
//!    `checkpoint_id` argument, else the job's current checkpoint id):
//!    - the plan reads the marker's file after the marker, then the later files;
//!    - a dialect that records which checkpoint a session loaded (the spike's
//!      `CHECKPOINT_LOADED`) chains: each later file must have loaded the marker's checkpoint
//!      before its first tool event, and the first that did not ends the chain (`chain_broken`:
//!      nothing from that file on is used). The shipped writer records no load, so every writer
//!      segment and every later file belongs to the plan.
//!    - `reason` is `marker_matched`, or `marker_unverified` without matching.
//! 4. Otherwise, the checkpoint's high-water mark, when one was recorded as it was stored (its
//!    files' identities and sizes: every byte after them was written after the checkpoint):
//!    each file read from its size then, files created since from their start, a file
//!    replaced since from its start (`file_replaced`). `reason` `high_water_mark`.
//! 5. A marker found that does not match: `marker_without_id`, `checkpoint_without_id` (the
//!    job's checkpoint has no id to compare) or `marker_mismatch`.
//! 6. No marker anywhere:
//!    - without `match_checkpoint`: the latest file, every writer in it (`latest_file`): the
//!      control plane's own `recoverFromBuffer` view;
//!    - the job has no checkpoint: every writer of every file for the shipped dialect, the
//!      latest writer segment of the latest file for the spike's (`no_checkpoint`);
//!    - the shipped cortex-plane dialect, whose writer never writes a marker: every file, with
//!      each event placed before or after the checkpoint's write time by the clocks
//!      (`checkpoint_time`, see `verdict`); `checkpoint_time_unknown` when nothing gives
//!      that time;
//!    - otherwise (a spike writer that lost its marker) `no_marker`.

use crate::error::CbError;
use crate::indexer::dialect::Dialect;
use crate::shared::parse_uuid;

use super::cycles::Place;
pub use super::files::{PushedReport, Replaced, SessionFile};
use super::line::MarkerKind;
use super::marks::Resolved;
use super::pairing::{Anomaly, AnomalyKind, Baseline, Pos};

impl SessionFile {
    /// Bytes of the file the index does not hold yet (a pending tail included).
    pub fn unindexed_bytes(&self) -> i64 {
        (self.size_bytes - self.indexed_offset).max(0)
    }

    /// Why recovery cannot read this file, if it cannot.
    pub fn unusable(&self) -> Option<(Reason, String)> {
        if self.quarantined {
            return Some((Reason::Quarantined, format!("{} is quarantined: the indexer gave up on it", self.rel_path)));
        }
        if self.generation == 0 && self.size_bytes > 0 {
            return Some((Reason::NotIndexed, format!("{} has not been indexed yet", self.rel_path)));
        }
        if !self.trusted {
            return Some((
                Reason::FileUntrusted,
                format!(
                    "{} is not trusted: corruption ratio {:.3} is over 0.10, even without its {} crash-cut line(s)",
                    self.rel_path, self.corruption_ratio, self.crash_cut_lines
                ),
            ));
        }
        if self.gone && (self.unindexed_bytes() > 0 || self.tail_pending) {
            return Some((
                Reason::FileGone,
                format!(
                    "{} was deleted before the index held all of it ({} bytes missing)",
                    self.rel_path,
                    self.unindexed_bytes()
                ),
            ));
        }
        None
    }
}

/// A marker as the index finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerAt {
    pub kind: MarkerKind,
    pub checkpoint_id: Option<String>,
    pub byte_offset: i64,
    pub line_no: i64,
    pub seq: Option<i64>,
    pub ts_us: Option<i64>,
}

/// A `CHECKPOINT_LOADED` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedAt {
    pub checkpoint_id: Option<String>,
    pub byte_offset: i64,
}

/// The index lookups the decision tree needs, per session (by index into the file list).
pub trait Probe {
    /// The session's last marker.
    fn last_marker(&mut self, session: usize) -> Result<Option<MarkerAt>, CbError>;
    /// The session's first `CHECKPOINT_LOADED`.
    fn first_loaded(&mut self, session: usize) -> Result<Option<LoadedAt>, CbError>;
    /// Whether the session has a tool event before `offset`.
    fn tool_event_before(&mut self, session: usize, offset: i64) -> Result<bool, CbError>;
    /// Where the session's last event stamped before `since_us` is (the events after it are
    /// the time window: found from the end, so the cost follows the window).
    fn last_offset_before(&mut self, session: usize, since_us: i64) -> Result<Option<i64>, CbError>;
    /// Where the writer that wrote the session's bytes at `offset` started: its first event
    /// (sequence 0) at or before `offset`, or the file's start.
    fn writer_start(&mut self, session: usize, offset: i64) -> Result<i64, CbError>;
    /// Where the session's last tool call before `offset` started.
    fn last_call_before(&mut self, session: usize, offset: i64) -> Result<Option<i64>, CbError>;
    /// Where [`read_across`] starts reading the session for an anchor at `anchor_at`: the start
    /// of the writer before the one that went past the last call started before the anchor
    /// (0 when there is none). A probe may answer it in one lookup.
    fn read_across_start(&mut self, session: usize, anchor_at: i64) -> Result<i64, CbError> {
        Ok(match self.last_call_before(session, anchor_at)? {
            Some(call) => {
                let went_past = self.writer_start(session, call)?;
                match went_past.checked_sub(1) {
                    Some(before) => self.writer_start(session, before)?,
                    None => 0,
                }
            }
            None => 0,
        })
    }
}

/// How to read a file from an anchor inside it: the events before the anchor are known but not
/// the plan's, read so that
/// - a call still open at the anchor is known (it is verified, and must not lend its result to
///   a later call of its tool): every writer's since the last one that had started a call
///   before the anchor (a pod goes through its replay in order, so that one had settled the
///   calls its predecessors left open);
/// - that writer's keys can be worked out: the writer before it too, whose calls open when it
///   took over were that one's to go through.
fn read_across(probe: &mut dyn Probe, session: usize, anchor_at: i64) -> Result<ReadFrom, CbError> {
    let from = probe.read_across_start(session, anchor_at)?;
    Ok(ReadFrom { session, from_offset: from.min(anchor_at), baseline: Baseline::FileStart })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Buffer,
    CheckpointOnly,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Buffer => "buffer",
            Mode::CheckpointOnly => "checkpoint_only",
        }
    }
}

/// Why the plan is what it is: the documented closed list (docs/api.md#recovery-plans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    // buffer
    MarkerMatched,
    MarkerUnverified,
    HighWaterMark,
    CheckpointTime,
    NoCheckpoint,
    LatestFile,
    Transcript,
    // checkpoint_only
    CheckpointInvalid,
    NoSessionFiles,
    FileGone,
    FileUntrusted,
    Quarantined,
    NotIndexed,
    NoMarker,
    MarkerMismatch,
    MarkerWithoutId,
    CheckpointWithoutId,
    CheckpointTimeUnknown,
    BytesMissing,
}

impl Reason {
    pub const ALL: [Reason; 19] = [
        Reason::MarkerMatched,
        Reason::MarkerUnverified,
        Reason::HighWaterMark,
        Reason::CheckpointTime,
        Reason::NoCheckpoint,
        Reason::LatestFile,
        Reason::Transcript,
        Reason::CheckpointInvalid,
        Reason::NoSessionFiles,
        Reason::FileGone,
        Reason::FileUntrusted,
        Reason::Quarantined,
        Reason::NotIndexed,
        Reason::NoMarker,
        Reason::MarkerMismatch,
        Reason::MarkerWithoutId,
        Reason::CheckpointWithoutId,
        Reason::CheckpointTimeUnknown,
        Reason::BytesMissing,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Reason::MarkerMatched => "marker_matched",
            Reason::MarkerUnverified => "marker_unverified",
            Reason::HighWaterMark => "high_water_mark",
            Reason::CheckpointTime => "checkpoint_time",
            Reason::NoCheckpoint => "no_checkpoint",
            Reason::LatestFile => "latest_file",
            Reason::Transcript => "transcript",
            Reason::CheckpointInvalid => "checkpoint_invalid",
            Reason::NoSessionFiles => "no_session_files",
            Reason::FileGone => "file_gone",
            Reason::FileUntrusted => "file_untrusted",
            Reason::Quarantined => "quarantined",
            Reason::NotIndexed => "not_indexed",
            Reason::NoMarker => "no_marker",
            Reason::MarkerMismatch => "marker_mismatch",
            Reason::MarkerWithoutId => "marker_without_id",
            Reason::CheckpointWithoutId => "checkpoint_without_id",
            Reason::CheckpointTimeUnknown => "checkpoint_time_unknown",
            Reason::BytesMissing => "bytes_missing",
        }
    }

    pub fn mode(self) -> Mode {
        match self {
            Reason::MarkerMatched
            | Reason::MarkerUnverified
            | Reason::HighWaterMark
            | Reason::CheckpointTime
            | Reason::NoCheckpoint
            | Reason::LatestFile
            | Reason::Transcript => Mode::Buffer,
            _ => Mode::CheckpointOnly,
        }
    }
}

/// What the plan starts after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorKind {
    Marker(MarkerKind),
    /// The checkpoint's high-water mark: its files' sizes when it was stored.
    HighWaterMark,
    /// The checkpoint's write time (no marker in a shipped-writer file).
    CheckpointTime,
    /// The first event of the latest writer (no checkpoint).
    WriterStart,
    /// The beginning of the file (no marker, no matching).
    FileStart,
}

impl AnchorKind {
    pub fn label(self) -> &'static str {
        match self {
            AnchorKind::Marker(k) => k.label(),
            AnchorKind::HighWaterMark => "high_water_mark",
            AnchorKind::CheckpointTime => "checkpoint_time",
            AnchorKind::WriterStart => "writer_start",
            AnchorKind::FileStart => "file_start",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub kind: AnchorKind,
    pub session: usize,
    pub checkpoint_id: Option<String>,
    /// The marker's own position; for the other kinds, filled in from the events read.
    pub at: Option<Pos>,
    /// `checkpoint_time`: the checkpoint's write time, and the allowance taken off it.
    pub time_us: Option<i64>,
    pub skew_us: Option<i64>,
}

/// Read one session from `from_offset` (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFrom {
    pub session: usize,
    pub from_offset: i64,
    pub baseline: Baseline,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub reason: Reason,
    pub detail: String,
    pub anchor: Option<Anchor>,
    /// Where the plan's checkpoint was stored, in the files (what settles each call).
    pub place: Place,
    pub reads: Vec<ReadFrom>,
    /// Keep only the latest writer segment of what is read.
    pub segment_only: bool,
    /// Place the events read against the checkpoint's write time (the clock fallback).
    pub window: Option<WindowSpec>,
    /// Sessions the decision looked at, in file order (those read and those that decided).
    pub examined: Vec<usize>,
    pub anomalies: Vec<Anomaly>,
}

impl Choice {
    /// A plan that reads no session file.
    pub fn checkpoint_only(reason: Reason, detail: String, examined: Vec<usize>) -> Choice {
        Choice {
            reason,
            detail,
            anchor: None,
            place: Place::Origin,
            reads: Vec::new(),
            segment_only: false,
            window: None,
            examined,
            anomalies: Vec::new(),
        }
    }

    /// A plan that reads whole session files, `sessions`, from their first byte (`segment_only`:
    /// only the latest writer's part), anchored at the first file's or that writer's start.
    fn whole_files(
        reason: Reason,
        detail: String,
        kind: AnchorKind,
        sessions: std::ops::RangeInclusive<usize>,
        segment_only: bool,
    ) -> Choice {
        let first = *sessions.start();
        let reads: Vec<ReadFrom> = sessions
            .clone()
            .map(|session| ReadFrom { session, from_offset: 0, baseline: Baseline::FileStart })
            .collect();
        Choice {
            reason,
            detail,
            anchor: Some(Anchor { kind, session: first, checkpoint_id: None, at: None, time_us: None, skew_us: None }),
            place: Place::Origin,
            reads,
            segment_only,
            window: None,
            examined: sessions.collect(),
            anomalies: Vec::new(),
        }
    }
}

/// The clock fallback's parameters: the checkpoint's write time (server clock) and the assumed
/// bound on pod clock skew where nothing measures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    pub at_us: i64,
    pub skew_us: i64,
}

/// The current checkpoint's high-water mark, resolved against the files now
/// ([`super::marks::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanMark {
    pub recorded_at_us: i64,
    pub files_marked: usize,
    pub resolved: Resolved,
}

/// What phase 1 decided that phase 2 depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub match_checkpoint: bool,
    /// The id a marker must carry: the `checkpoint_id` argument, else the current checkpoint's.
    pub expected_id: Option<String>,
    /// The job has a (valid) checkpoint.
    pub has_checkpoint: bool,
    /// When the current checkpoint was written (its high-water mark or `checkpoint_history` row).
    pub checkpoint_time_us: Option<i64>,
    pub clock_skew_us: i64,
    /// The current checkpoint's high-water mark, when one was recorded.
    pub mark: Option<PlanMark>,
    /// How far before the checkpoint's time (in a pod's clock) the clock fallback starts
    /// reading: the largest clock offset allowed or measured.
    pub read_margin_us: i64,
}

impl Expectation {
    /// Since when bytes matter: what was written before the checkpoint was stored is its.
    fn since_us(&self) -> i64 {
        match (&self.mark, self.checkpoint_time_us) {
            _ if !self.match_checkpoint || !self.has_checkpoint => i64::MIN,
            (Some(m), _) => m.recorded_at_us,
            (None, Some(t)) => t,
            (None, None) => i64::MIN,
        }
    }
}

/// Whether a dropped generation's bytes are in another file the index holds (it was renamed to
/// a name the indexer reads).
pub fn held_elsewhere(files: &[SessionFile], f: &SessionFile, r: Replaced) -> bool {
    files.iter().any(|g| {
        g.path != f.path && g.device == r.device && g.inode == r.inode && g.size_bytes.max(g.indexed_offset) >= r.size
    })
}

/// Files whose bytes written after `since_us` the index dropped (a generation replaced,
/// truncated or rewritten since), unless those bytes are in another file it holds (a rename).
fn dropped_after(files: &[SessionFile], since_us: i64) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.replaced.is_some_and(|r| r.at_us > since_us && r.size > 0 && !held_elsewhere(files, f, r)))
        .map(|f| f.rel_path.clone())
        .collect()
}

/// Whether two checkpoint ids name the same checkpoint (UUIDs compare by value, any case).
pub fn same_checkpoint(a: &str, b: &str) -> bool {
    match (parse_uuid(a), parse_uuid(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Runs the decision tree over `files` (in order). Files of other dialects than the cortex
/// ones are not the job's buffer and are left out by the caller.
pub fn choose(files: &[SessionFile], e: &Expectation, probe: &mut dyn Probe) -> Result<Choice, CbError> {
    let Some(latest) = files.len().checked_sub(1) else {
        return Ok(Choice::checkpoint_only(
            Reason::NoSessionFiles,
            "the job has no session files in the index".into(),
            Vec::new(),
        ));
    };
    let dropped = dropped_after(files, e.since_us());
    if !dropped.is_empty() {
        return Ok(Choice::checkpoint_only(
            Reason::BytesMissing,
            format!(
                "{} was replaced, truncated or rewritten after the checkpoint, and the index no longer holds what it had: calls written there after the checkpoint cannot be read, so nothing after it is proven (docs/operations.md: rotating session files)",
                dropped.join(", ")
            ),
            (0..=latest).collect(),
        ));
    }
    let mut examined = Vec::new();
    let mut found = None;
    for i in (0..=latest).rev() {
        examined.insert(0, i);
        if let Some((reason, detail)) = files.get(i).and_then(SessionFile::unusable) {
            return Ok(Choice::checkpoint_only(reason, detail, examined));
        }
        if let Some(m) = probe.last_marker(i)? {
            found = Some((i, m));
            break;
        }
    }
    let rel = |i: usize| files.get(i).map(|f| f.rel_path.clone()).unwrap_or_default();

    if let Some((mi, marker)) = &found {
        match refusal(marker, e, &rel(*mi)) {
            None => return from_marker(files, e, probe, *mi, marker),
            Some(refused) => {
                if let Some(mark) = e.mark.as_ref().filter(|_| e.match_checkpoint) {
                    return from_mark(files, mark, e, probe);
                }
                return Ok(Choice::checkpoint_only(refused.0, refused.1, examined));
            }
        }
    }

    without_marker(files, e, probe)
}

/// The decision tree where no session file has a marker: the latest file, every writer, the
/// mark, or the checkpoint's write time, by what the job has.
fn without_marker(files: &[SessionFile], e: &Expectation, probe: &mut dyn Probe) -> Result<Choice, CbError> {
    let latest = files.len().saturating_sub(1);
    let rel = |i: usize| files.get(i).map(|f| f.rel_path.clone()).unwrap_or_default();
    let latest_dialect = files.get(latest).and_then(|f| f.dialect);
    let shipped = latest_dialect == Some(Dialect::CortexPlane);
    if !e.match_checkpoint {
        return Ok(Choice::whole_files(
            Reason::LatestFile,
            format!("no marker in any session file: every event of the latest file, {}", rel(latest)),
            AnchorKind::FileStart,
            latest..=latest,
            false,
        ));
    }
    if !e.has_checkpoint {
        if shipped {
            return Ok(Choice::whole_files(
                Reason::NoCheckpoint,
                format!("the job has no checkpoint: every writer of its {} session file(s)", files.len()),
                AnchorKind::FileStart,
                0..=latest,
                false,
            ));
        }
        return Ok(Choice::whole_files(
            Reason::NoCheckpoint,
            format!("the job has no checkpoint: the latest writer of {}", rel(latest)),
            AnchorKind::WriterStart,
            latest..=latest,
            true,
        ));
    }
    if let Some(mark) = &e.mark {
        return from_mark(files, mark, e, probe);
    }
    if !shipped {
        return Ok(Choice::checkpoint_only(
            Reason::NoMarker,
            "no CHECKPOINT_WRITTEN marker in the job's session files: its writer records one after every checkpoint, so the buffer cannot be placed after the current one".into(),
            vec![latest],
        ));
    }
    let Some(time) = e.checkpoint_time_us else {
        return Ok(Choice::checkpoint_only(
            Reason::CheckpointTimeUnknown,
            "no marker, no high-water mark and no checkpoint_history row give the current checkpoint's place or write time (it was written before cortex_buffer recorded them)".into(),
            vec![latest],
        ));
    };
    by_checkpoint_time(files, e, probe, time)
}

/// Every writer of every file, each event placed before or after the checkpoint's write `time`
/// by the pods' clocks (the shipped writer writes no marker).
fn by_checkpoint_time(
    files: &[SessionFile],
    e: &Expectation,
    probe: &mut dyn Probe,
    time: i64,
) -> Result<Choice, CbError> {
    let latest = files.len().saturating_sub(1);
    let since = time.saturating_sub(e.read_margin_us);
    let mut reads = Vec::new();
    for session in 0..=latest {
        // From the start of the writer that wrote the last event surely before the window: its
        // calls still open then must be known (the clocks place them before the checkpoint).
        let window_from = probe.last_offset_before(session, since)?.map_or(0, |o| o.saturating_add(1));
        let from = probe.writer_start(session, window_from)?.min(window_from);
        reads.push(ReadFrom { session, from_offset: from, baseline: Baseline::FileStart });
    }
    Ok(Choice {
        reason: Reason::CheckpointTime,
        detail: format!(
            "no marker and no high-water mark (the shipped writer writes no marker, and the checkpoint predates the marks): every writer of the job's {} file(s), each event placed before or after the checkpoint's write time by the pods' clocks; what they cannot place is in verify",
            files.len()
        ),
        anchor: Some(Anchor {
            kind: AnchorKind::CheckpointTime,
            session: latest,
            checkpoint_id: e.expected_id.clone(),
            at: None,
            time_us: Some(time),
            skew_us: Some(e.clock_skew_us),
        }),
        place: Place::Time(Vec::new()),
        reads,
        segment_only: false,
        window: Some(WindowSpec { at_us: time, skew_us: e.clock_skew_us }),
        examined: (0..=latest).collect(),
        anomalies: Vec::new(),
    })
}

/// Reads every file from its start (the last resort of a plan whose keys needed more than a
/// few wider reads: with everything read, nothing the keys or the verdicts need is left out).
/// Whether anything changed.
pub fn read_whole(reads: &mut Vec<ReadFrom>, sessions: usize) -> bool {
    let whole: Vec<ReadFrom> =
        (0..sessions).map(|session| ReadFrom { session, from_offset: 0, baseline: Baseline::FileStart }).collect();
    let changed = *reads != whole;
    *reads = whole;
    changed
}

/// Widens `reads` so the keys can be placed ([`super::pairing::Body::unread`]): each file named
/// is read from the start of the writer writing just before the offset given. Whether anything
/// changed (a plan reads again at most a few times).
pub fn widen_reads(reads: &mut Vec<ReadFrom>, unread: &[(usize, i64)], probe: &mut dyn Probe) -> Result<bool, CbError> {
    let mut changed = false;
    // (Everything: the caller reads every file whole, `read_whole`.)
    for &(session, offset) in unread.iter().filter(|u| **u != super::cycles::READ_EVERYTHING) {
        let from = probe.writer_start(session, offset.saturating_sub(1))?.min(offset);
        match reads.iter_mut().find(|r| r.session == session) {
            Some(r) if r.from_offset > from => {
                r.from_offset = from;
                changed = true;
            }
            Some(_) => {}
            None => {
                reads.push(ReadFrom { session, from_offset: from, baseline: Baseline::FileStart });
                reads.sort_by_key(|r| r.session);
                changed = true;
            }
        }
    }
    Ok(changed)
}

/// Why a marker cannot anchor the plan, if it cannot.
fn refusal(marker: &MarkerAt, e: &Expectation, file: &str) -> Option<(Reason, String)> {
    if !e.match_checkpoint {
        return None;
    }
    match (&marker.checkpoint_id, &e.expected_id) {
        (None, _) => Some((Reason::MarkerWithoutId, format!("the last marker ({file} @{}) names no checkpoint", marker.byte_offset))),
        (Some(m), None) if !e.has_checkpoint => Some((
            Reason::MarkerMismatch,
            format!("the last marker names checkpoint {m}, but the job has no checkpoint"),
        )),
        (Some(_), None) => Some((
            Reason::CheckpointWithoutId,
            "the job's checkpoint has no id to compare the marker with".into(),
        )),
        (Some(m), Some(x)) if !same_checkpoint(m, x) => Some((
            Reason::MarkerMismatch,
            format!("the last marker ({file} @{}) names checkpoint {m}, expected {x}: the buffer is from another checkpoint cycle", marker.byte_offset),
        )),
        _ => None,
    }
}

/// The plan after a usable marker in session `mi`.
fn from_marker(
    files: &[SessionFile],
    e: &Expectation,
    probe: &mut dyn Probe,
    mi: usize,
    marker: &MarkerAt,
) -> Result<Choice, CbError> {
    let rel = |i: usize| files.get(i).map(|f| f.rel_path.clone()).unwrap_or_default();
    let mut reads = vec![read_across(probe, mi, marker.byte_offset)?];
    let mut anomalies = Vec::new();
    let mut used = vec![mi];
    for k in mi + 1..files.len() {
        // Only a writer that records the checkpoint it loaded can break the chain.
        let records_loads = files.get(k).and_then(|f| f.dialect) != Some(Dialect::CortexPlane);
        if records_loads {
            if let Some(why) = chain_break(probe, k, marker.checkpoint_id.as_deref())? {
                let at = probe.first_loaded(k)?.map_or(0, |l| l.byte_offset);
                anomalies.push(Anomaly {
                    kind: AnomalyKind::ChainBroken,
                    at: Pos { session: k, byte_offset: at, ..Pos::default() },
                    key: None,
                    tool_name: None,
                    detail: format!(
                        "{} did not resume from the marker's checkpoint {}: {why}; nothing from this file on is used",
                        rel(k),
                        marker.checkpoint_id.as_deref().unwrap_or("(none)")
                    ),
                });
                break;
            }
        }
        reads.push(ReadFrom { session: k, from_offset: 0, baseline: Baseline::FileStart });
        used.push(k);
    }
    let reason = if e.match_checkpoint { Reason::MarkerMatched } else { Reason::MarkerUnverified };
    let detail = format!(
        "the last marker is in {} @{} (checkpoint {}); the plan reads {} session file(s) from it",
        rel(mi),
        marker.byte_offset,
        marker.checkpoint_id.as_deref().unwrap_or("(none)"),
        used.len()
    );
    Ok(Choice {
        reason,
        detail,
        anchor: Some(Anchor {
            kind: AnchorKind::Marker(marker.kind),
            session: mi,
            checkpoint_id: marker.checkpoint_id.clone(),
            at: Some(Pos {
                session: mi,
                byte_offset: marker.byte_offset,
                line_no: marker.line_no,
                seq: marker.seq,
                ts_us: marker.ts_us,
            }),
            time_us: None,
            skew_us: None,
        }),
        place: Place::Line { session: mi, offset: marker.byte_offset },
        reads,
        segment_only: false,
        window: None,
        examined: used,
        anomalies,
    })
}

/// Why session `k` did not resume from checkpoint `id`, if it did not.
fn chain_break(probe: &mut dyn Probe, k: usize, id: Option<&str>) -> Result<Option<String>, CbError> {
    let loaded = probe.first_loaded(k)?;
    let tool_first = match &loaded {
        Some(l) => probe.tool_event_before(k, l.byte_offset)?,
        None => false,
    };
    Ok(match (&loaded, id) {
        (None, _) => Some("it has no CHECKPOINT_LOADED event".to_owned()),
        (Some(_), _) if tool_first => Some("a tool event comes before its CHECKPOINT_LOADED".to_owned()),
        (Some(LoadedAt { checkpoint_id: None, .. }), _) => Some("it loaded no checkpoint (a first run)".to_owned()),
        (Some(LoadedAt { checkpoint_id: Some(l), .. }), Some(m)) if same_checkpoint(l, m) => None,
        (Some(LoadedAt { checkpoint_id: Some(l), .. }), _) => Some(format!("it loaded checkpoint {l}")),
    })
}

/// The plan from the checkpoint's high-water mark: each file from its size when the checkpoint
/// was stored (from the start of the writer then writing it), files created since from their
/// start; nothing when the marked bytes are gone from the files.
fn from_mark(
    files: &[SessionFile],
    mark: &PlanMark,
    e: &Expectation,
    probe: &mut dyn Probe,
) -> Result<Choice, CbError> {
    let r = &mark.resolved;
    let notes = r.notes.iter().map(|(session, kind, detail)| Anomaly {
        kind: *kind,
        at: Pos { session: *session, ..Pos::default() },
        key: None,
        tool_name: None,
        detail: detail.clone(),
    });
    if !r.missing.is_empty() {
        let mut c = Choice::checkpoint_only(
            Reason::BytesMissing,
            format!(
                "the bytes the checkpoint's high-water mark covers in {} are in no file the index holds (rotated to another name, truncated, or deleted and created again since): what was written there after the checkpoint cannot be read, so nothing after the checkpoint is proven",
                r.missing.join(", ")
            ),
            (0..files.len()).collect(),
        );
        c.anomalies = notes.collect();
        return Ok(c);
    }
    let mut reads = Vec::new();
    for session in 0..files.len() {
        reads.push(match r.at.get(session).copied().flatten() {
            Some(m) if m.size > 0 => read_across(probe, session, m.line_start.min(m.size))?,
            _ => ReadFrom { session, from_offset: 0, baseline: Baseline::FileStart },
        });
    }
    let at =
        r.at.iter()
            .enumerate()
            .find_map(|(session, m)| m.map(|m| Pos { session, byte_offset: m.size, ..Pos::default() }));
    Ok(Choice {
        reason: Reason::HighWaterMark,
        detail: format!(
            "the checkpoint's high-water mark (its {} session file(s) and their sizes when it was stored): it covers what finished before it, and every byte after it was written after the checkpoint, by every writer of every file",
            mark.files_marked
        ),
        anchor: Some(Anchor {
            kind: AnchorKind::HighWaterMark,
            session: at.map_or(0, |p| p.session),
            checkpoint_id: e.expected_id.clone(),
            at,
            time_us: Some(mark.recorded_at_us),
            skew_us: None,
        }),
        place: r.place(),
        reads,
        segment_only: false,
        window: None,
        examined: (0..files.len()).collect(),
        anomalies: notes.collect(),
    })
}

#[cfg(test)]
pub mod tests {
    use super::super::cycles::MarkAt;
    use super::*;

    /// One event of the in-memory index: offset, type, checkpoint id, ts.
    pub type MemEvent = (i64, &'static str, Option<&'static str>, i64);

    /// An in-memory index: per session, its events.
    #[derive(Default)]
    pub struct Mem {
        pub events: Vec<Vec<MemEvent>>,
    }

    impl Probe for Mem {
        fn last_marker(&mut self, s: usize) -> Result<Option<MarkerAt>, CbError> {
            Ok(self.events.get(s).and_then(|ev| {
                ev.iter().rev().find_map(|(o, t, c, ts)| {
                    MarkerKind::of(t).map(|kind| MarkerAt {
                        kind,
                        checkpoint_id: c.map(str::to_owned),
                        byte_offset: *o,
                        line_no: 0,
                        seq: None,
                        ts_us: Some(*ts),
                    })
                })
            }))
        }
        fn first_loaded(&mut self, s: usize) -> Result<Option<LoadedAt>, CbError> {
            Ok(self.events.get(s).and_then(|ev| {
                ev.iter()
                    .find(|(_, t, _, _)| *t == "CHECKPOINT_LOADED")
                    .map(|(o, _, c, _)| LoadedAt { checkpoint_id: c.map(str::to_owned), byte_offset: *o })
            }))
        }
        fn tool_event_before(&mut self, s: usize, offset: i64) -> Result<bool, CbError> {
            Ok(self.events.get(s).is_some_and(|ev| {
                ev.iter().any(|(o, t, _, _)| *o < offset && super::super::line::TOOL_TYPES.contains(t))
            }))
        }
        fn last_offset_before(&mut self, s: usize, since: i64) -> Result<Option<i64>, CbError> {
            Ok(self.events.get(s).and_then(|ev| ev.iter().rev().find(|(.., ts)| *ts < since).map(|(o, ..)| *o)))
        }
        fn writer_start(&mut self, _: usize, _: i64) -> Result<i64, CbError> {
            // Without sequence numbers to go by: the file's start (reads more, never less).
            Ok(0)
        }
        fn last_call_before(&mut self, s: usize, offset: i64) -> Result<Option<i64>, CbError> {
            Ok(self.events.get(s).and_then(|ev| {
                ev.iter()
                    .rev()
                    .find(|(o, t, _, _)| *o < offset && matches!(*t, "TOOL_START" | "TOOL_CALL"))
                    .map(|e| e.0)
            }))
        }
    }

    pub fn file(i: usize, d: Dialect) -> SessionFile {
        SessionFile {
            file_id: i as i64 + 1,
            path: format!("/s/j/session-{:03}.jsonl", i + 1),
            rel_path: format!("session-{:03}.jsonl", i + 1),
            dialect: Some(d),
            generation: 1,
            session_ordinal: Some(i as i64 + 1),
            size_bytes: 100,
            indexed_offset: 100,
            tail_state: "complete".into(),
            trusted: true,
            ..SessionFile::default()
        }
    }

    fn expect(id: Option<&str>) -> Expectation {
        Expectation {
            match_checkpoint: true,
            expected_id: id.map(str::to_owned),
            has_checkpoint: id.is_some(),
            checkpoint_time_us: Some(1_000),
            clock_skew_us: 100,
            mark: None,
            read_margin_us: 100,
        }
    }

    const C1: &str = "0193a8b2-0000-7000-8000-000000000001";
    const C2: &str = "0193a8b2-0000-7000-8000-000000000002";

    #[test]
    fn no_files() {
        let c = choose(&[], &expect(Some(C1)), &mut Mem::default()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((c.reason, c.reason.mode()), (Reason::NoSessionFiles, Mode::CheckpointOnly));
    }

    #[test]
    fn marker_in_an_earlier_file_chains_through_files_that_loaded_it() {
        let files = [file(0, Dialect::CortexSpike), file(1, Dialect::CortexSpike), file(2, Dialect::CortexSpike)];
        let mut mem = Mem {
            events: vec![
                vec![
                    (0, "SESSION_START", None, 0),
                    (10, "CHECKPOINT_WRITTEN", Some(C1), 0),
                    (20, "TOOL_START", None, 0),
                ],
                vec![
                    (0, "SESSION_START", None, 0),
                    (10, "CHECKPOINT_LOADED", Some(C1), 0),
                    (20, "TOOL_START", None, 0),
                ],
                vec![(0, "CHECKPOINT_LOADED", Some(C1), 0), (10, "TOOL_START", None, 0)],
            ],
        };
        let c = choose(&files, &expect(Some(C1)), &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reason, Reason::MarkerMatched);
        assert_eq!(c.reads.iter().map(|r| (r.session, r.from_offset)).collect::<Vec<_>>(), [(0, 0), (1, 0), (2, 0)]);
        assert!(c.anomalies.is_empty());
    }

    #[test]
    fn a_file_that_loaded_another_checkpoint_breaks_the_chain() {
        let files = [file(0, Dialect::CortexSpike), file(1, Dialect::CortexSpike), file(2, Dialect::CortexSpike)];
        for (second, third) in [
            (Some(C2), Some(C1)), // a history fallback
            (None, Some(C1)),     // a first run
        ] {
            let mut mem = Mem {
                events: vec![
                    vec![(10, "CHECKPOINT_WRITTEN", Some(C1), 0)],
                    vec![(0, "CHECKPOINT_LOADED", second, 0), (5, "TOOL_START", None, 0)],
                    vec![(0, "CHECKPOINT_LOADED", third, 0)],
                ],
            };
            let c = choose(&files, &expect(Some(C1)), &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(c.reason, Reason::MarkerMatched);
            assert_eq!(c.reads.len(), 1);
            assert_eq!(c.anomalies.first().map(|a| (a.kind, a.at.session)), Some((AnomalyKind::ChainBroken, 1)));
        }
        // Loaded after its first tool event: broken too.
        let mut mem = Mem {
            events: vec![
                vec![(10, "CHECKPOINT_WRITTEN", Some(C1), 0)],
                vec![(0, "TOOL_START", None, 0), (5, "CHECKPOINT_LOADED", Some(C1), 0)],
            ],
        };
        let c = choose(&files[..2], &expect(Some(C1)), &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reads.len(), 1);
        assert_eq!(c.anomalies.len(), 1);
    }

    #[test]
    fn marker_checks() {
        let files = [file(0, Dialect::CortexSpike)];
        let with = |c: Option<&'static str>| Mem { events: vec![vec![(10, "CHECKPOINT_WRITTEN", c, 0)]] };
        let run = |m: &mut Mem, e: &Expectation| choose(&files, e, m).map(|c| c.reason).unwrap_or(Reason::Transcript);
        assert_eq!(run(&mut with(Some(C2)), &expect(Some(C1))), Reason::MarkerMismatch);
        assert_eq!(run(&mut with(None), &expect(Some(C1))), Reason::MarkerWithoutId);
        assert_eq!(run(&mut with(Some(C1)), &expect(None)), Reason::MarkerMismatch);
        let mut no_id = expect(None);
        no_id.has_checkpoint = true;
        assert_eq!(run(&mut with(Some(C1)), &no_id), Reason::CheckpointWithoutId);
        assert_eq!(
            run(&mut with(Some("0193A8B2-0000-7000-8000-000000000001")), &expect(Some(C1))),
            Reason::MarkerMatched
        );
        let mut unmatched = expect(Some(C1));
        unmatched.match_checkpoint = false;
        assert_eq!(run(&mut with(Some(C2)), &unmatched), Reason::MarkerUnverified);
    }

    #[test]
    fn unusable_files_stop_the_search() {
        type Spoil = fn(&mut SessionFile);
        let cases: [(Spoil, Reason); 4] = [
            (|f| f.trusted = false, Reason::FileUntrusted),
            (|f| f.quarantined = true, Reason::Quarantined),
            (|f| f.generation = 0, Reason::NotIndexed),
            (
                |f| {
                    f.gone = true;
                    f.indexed_offset = 50;
                },
                Reason::FileGone,
            ),
        ];
        for (spoil, reason) in cases {
            let mut files = [file(0, Dialect::CortexSpike), file(1, Dialect::CortexSpike)];
            spoil(&mut files[1]);
            let mut mem = Mem { events: vec![vec![(10, "CHECKPOINT_WRITTEN", Some(C1), 0)], vec![]] };
            let c = choose(&files, &expect(Some(C1)), &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(c.reason, reason);
        }
        // A deleted file the index holds to its end is still read.
        let mut files = [file(0, Dialect::CortexSpike)];
        files[0].gone = true;
        let mut mem = Mem { events: vec![vec![(10, "CHECKPOINT_WRITTEN", Some(C1), 0)]] };
        assert_eq!(choose(&files, &expect(Some(C1)), &mut mem).map(|c| c.reason).ok(), Some(Reason::MarkerMatched));
    }

    #[test]
    fn files_without_markers() {
        let spike = [file(0, Dialect::CortexSpike)];
        let plane = [file(0, Dialect::CortexPlane), file(1, Dialect::CortexPlane)];
        let events = || Mem {
            events: vec![
                vec![(0, "TOOL_CALL", None, 500), (10, "TOOL_CALL", None, 950), (20, "TOOL_CALL", None, 1_200)],
                vec![(0, "TOOL_CALL", None, 1_300)],
            ],
        };
        let c = choose(&spike, &expect(Some(C1)), &mut events()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reason, Reason::NoMarker);
        // The shipped writer: every file, from the last event surely before the window.
        let c = choose(&plane, &expect(Some(C1)), &mut events()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reason, Reason::CheckpointTime);
        assert_eq!(c.reads.iter().map(|r| (r.session, r.from_offset)).collect::<Vec<_>>(), [(0, 0), (1, 0)]);
        assert_eq!(c.window, Some(WindowSpec { at_us: 1_000, skew_us: 100 }));
        assert!(!c.segment_only);
        let mut no_time = expect(Some(C1));
        no_time.checkpoint_time_us = None;
        assert_eq!(choose(&plane, &no_time, &mut events()).map(|c| c.reason).ok(), Some(Reason::CheckpointTimeUnknown));
        // No checkpoint: the shipped writer's every writer of every file; the spike's latest writer.
        let c = choose(&plane, &expect(None), &mut events()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((c.reason, c.segment_only, c.reads.len()), (Reason::NoCheckpoint, false, 2));
        let c = choose(&spike, &expect(None), &mut events()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((c.reason, c.segment_only, c.reads.len()), (Reason::NoCheckpoint, true, 1));
        let mut unmatched = expect(Some(C1));
        unmatched.match_checkpoint = false;
        let c = choose(&plane, &unmatched, &mut events()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            (c.reason, c.segment_only, c.reads.iter().map(|r| (r.session, r.from_offset)).collect::<Vec<_>>()),
            (Reason::LatestFile, false, vec![(1, 0)])
        );
    }

    #[test]
    fn a_high_water_mark_places_every_file() {
        let files = [file(0, Dialect::CortexPlane), file(1, Dialect::CortexPlane), file(2, Dialect::CortexPlane)];
        let resolved = Resolved {
            at: vec![Some(MarkAt::at(60)), None, None],
            notes: vec![(1, AnomalyKind::FileReplaced, "replaced".into())],
            missing: Vec::new(),
        };
        let mut e = expect(Some(C1));
        e.mark = Some(PlanMark { recorded_at_us: 5, files_marked: 2, resolved });
        let c =
            choose(&files, &e, &mut Mem { events: vec![vec![], vec![], vec![]] }).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reason, Reason::HighWaterMark);
        // The first file is read from its writer's start (here the file's: the in-memory index
        // has no sequence numbers), what lies before the mark known but not the plan's.
        assert_eq!(c.reads.iter().map(|r| (r.session, r.from_offset)).collect::<Vec<_>>(), [(0, 0), (1, 0), (2, 0)]);
        assert_eq!(c.place, Place::Mark(vec![Some(MarkAt::at(60)), None, None]));
        assert_eq!(
            c.anomalies.iter().map(|a| (a.kind, a.at.session)).collect::<Vec<_>>(),
            [(AnomalyKind::FileReplaced, 1)]
        );
        // A marker of another checkpoint does not hide the mark of the current one.
        let mut mem = Mem { events: vec![vec![(10, "CHECKPOINT", Some(C2), 0)], vec![], vec![]] };
        assert_eq!(choose(&files, &e, &mut mem).map(|c| c.reason).ok(), Some(Reason::HighWaterMark));
        // Bytes the mark covers that no file holds: nothing after the checkpoint is proven.
        let mut gone = e.clone();
        if let Some(m) = gone.mark.as_mut() {
            m.resolved.missing = vec!["session-001.jsonl".into()];
        }
        let c = choose(&files, &gone, &mut Mem { events: vec![vec![], vec![], vec![]] })
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((c.reason, c.reason.mode()), (Reason::BytesMissing, Mode::CheckpointOnly));
    }

    #[test]
    fn the_shipped_writer_keeps_every_later_file_after_a_marker() {
        let files = [file(0, Dialect::CortexPlane), file(1, Dialect::CortexPlane)];
        let mut mem = Mem { events: vec![vec![(10, "CHECKPOINT", Some(C1), 0)], vec![(0, "TOOL_CALL", None, 0)]] };
        let c = choose(&files, &expect(Some(C1)), &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.reason, Reason::MarkerMatched);
        assert_eq!(c.reads.iter().map(|r| (r.session, r.from_offset)).collect::<Vec<_>>(), [(0, 0), (1, 0)]);
        assert_eq!(c.place, Place::Line { session: 0, offset: 10 });
        assert!(c.anomalies.is_empty(), "no CHECKPOINT_LOADED to break a chain");
    }

    #[test]
    fn every_reason_has_a_distinct_label() {
        let mut labels: Vec<_> = Reason::ALL.iter().map(|r| r.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), Reason::ALL.len());
    }
}
