//! Which key each call of a plan was sent with, and where it stands in the replay of the
//! plan's checkpoint. Pure.
//!
//! A pod keys a call (`keys::call_idempotency_key`) under its *key checkpoint*: the checkpoint
//! it resumed from, or the last one it stored itself (`write_checkpoint`, or a marker line it
//! wrote) before the call started. A checkpoint someone else stores while it runs (the control
//! plane's `UPDATE`) changes nothing for it. Its `call_ordinal` is the call's rank among the
//! calls with the same tool and input in its *replay* since that checkpoint: every call it went
//! through, skipped, verified or run. So every pod that resumes from the same checkpoint gives
//! the same call the same key; a pod that runs again a call an earlier pod keyed under another
//! checkpoint (after checking that one's key) sends its own.
//!
//! From the bytes, this module works out for each call:
//! - its writer's key checkpoint: the stores (checkpoints stored, as positions in the files)
//!   tell which checkpoint was current when the writer started, and which it stored itself;
//! - its place in each replay that concerns it. A *cycle* is the replay from one store: the
//!   calls its live writer had not finished when it was stored (its *base*), then the calls of
//!   every writer that resumed from it. A later writer went through the earlier writers' calls
//!   (skipping or verifying them, writing only what it ran), so a call it wrote may be a repeat
//!   of an earlier one with the same tool and input, or a new one: when the bytes cannot tell,
//!   the call gets every candidate, never a guess.
//!
//! What a plan reports per call: its `replay_ordinal` (for the pod resuming from the plan's
//! checkpoint to match its calls), its `idempotency_key` with the `call_ordinal` and
//! `checkpoint_ref` it was built from, or, when the bytes leave more than one, the candidate
//! pairs; or that the key is unknown.

use std::collections::{BTreeMap, BTreeSet};

use super::keys::{call_idempotency_key, checkpoint_ref};
use super::pairing::{Body, Call, EventRef, Pos};
pub use super::pairing::{CallKeys, KeyCandidate, KeyStatus, SegmentSpan};

/// A checkpoint, as keys name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ref {
    /// No checkpoint (`-`).
    None,
    Crc(u32),
    /// A checkpoint whose content is not known here (its history entry was trimmed).
    Unknown,
}

impl Ref {
    /// `checkpoint_ref` of the key formula, if known.
    pub fn text(self) -> Option<String> {
        match self {
            Ref::None => Some(checkpoint_ref(None)),
            Ref::Crc(c) => Some(checkpoint_ref(Some(c))),
            Ref::Unknown => None,
        }
    }
}

/// Where an event lies against a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Written, whole, before the checkpoint was stored.
    Before,
    /// Its line was being written when the checkpoint was stored (the mark fell inside it), or
    /// the clocks cannot tell.
    Straddles,
    After,
}

/// A high-water mark's place in one file: the size then, and where the line holding the mark
/// began (`line_start == size` when the mark fell between two lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkAt {
    pub size: i64,
    pub line_start: i64,
}

impl MarkAt {
    /// At a line boundary.
    pub fn at(size: i64) -> MarkAt {
        MarkAt { size, line_start: size }
    }
}

/// Where a checkpoint was stored, as positions in the plan's files (sessions in plan order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Before every byte of the files.
    Origin,
    /// A high-water mark: per session, its place, or `None` when the file was not there (it was
    /// created after).
    Mark(Vec<Option<MarkAt>>),
    /// A marker line the writer wrote (`CHECKPOINT`, `CHECKPOINT_WRITTEN`).
    Line { session: usize, offset: i64 },
    /// The clock fallback: per session, the last offset surely before and the first surely
    /// after the checkpoint's time; between them the clocks cannot tell. With no bounds (yet),
    /// nothing is surely on either side: `settle` works them out from the store's time.
    Time(Vec<(Option<i64>, Option<i64>)>),
    /// A checkpoint whose place cannot be told (its mark's files are no longer where the index
    /// has them): nothing is placed by it, and nothing that it could come before is certain.
    Unknown,
}

impl Place {
    pub fn side(&self, p: &Pos) -> Side {
        match self {
            Place::Origin => Side::After,
            Place::Unknown => Side::Straddles,
            Place::Mark(files) => match files.get(p.session).copied().flatten() {
                None => Side::After,
                Some(m) if p.byte_offset < m.line_start => Side::Before,
                Some(m) if p.byte_offset < m.size => Side::Straddles,
                Some(_) => Side::After,
            },
            Place::Line { session, offset } => match p.session.cmp(session) {
                std::cmp::Ordering::Less => Side::Before,
                std::cmp::Ordering::Greater => Side::After,
                std::cmp::Ordering::Equal if p.byte_offset < *offset => Side::Before,
                std::cmp::Ordering::Equal if p.byte_offset == *offset => Side::Straddles,
                std::cmp::Ordering::Equal => Side::After,
            },
            Place::Time(bounds) => {
                // A file is appended in time order: only what lies between the last event
                // surely before and the first surely after stays uncertain.
                let (b, a) = bounds.get(p.session).copied().unwrap_or((None, None));
                let o = p.byte_offset;
                if b.is_some_and(|b| o <= b) && a.is_none_or(|a| o < a) {
                    Side::Before
                } else if a.is_some_and(|a| o >= a) && b.is_none_or(|b| o > b) {
                    Side::After
                } else {
                    Side::Straddles
                }
            }
        }
    }
}

/// What the stores and writers read tell, worked out once per plan: every store (the markers
/// read included) and each writer's key checkpoints.
pub struct Facts {
    pub stores: Vec<Store>,
    timelines: BTreeMap<u32, Timeline>,
    /// Per session, the number of the last line the index holds (`KeyContext::last_lines`).
    last_lines: Vec<i64>,
    resumes: Vec<Resume>,
    /// Some writer read has no resume of its own recorded: pods may plan without a job token,
    /// unseen.
    tokenless: bool,
    /// When the index dropped bytes it holds nowhere else (`KeyContext::dropped_at`).
    dropped_at: Vec<i64>,
}

/// Whose state a checkpoint holds: the pod live when it was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// Writers before this one are earlier ones (segments `< boundary`).
    pub boundary: u32,
    /// The live pod's writer, when it wrote (one that planned and wrote nothing has none).
    pub member: Option<u32>,
    /// It had started a call of its own before the store: it had gone past its predecessors'.
    pub moved_on: bool,
    /// The checkpoints it may have resumed from (stores); empty: unknown.
    pub resume: Vec<usize>,
}

/// Who may have been live when a checkpoint was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveAt {
    /// Nobody had written before it.
    Nobody,
    /// The bytes do not tell.
    Unknown,
    /// One of these.
    Any(Vec<Live>),
}

/// How deep coverage looks back through the checkpoints writers resumed from.
const MAX_DEPTH: u32 = 8;

impl Facts {
    pub fn new(body: &Body, ctx: &KeyContext) -> Facts {
        let mut stores = ctx.stores.clone();
        // Marker lines are stores too, in step with their writer.
        let mut marker_store: BTreeMap<(usize, i64), usize> = BTreeMap::new();
        for m in &body.markers {
            let reference = match &m.checkpoint_id {
                Some(id) => ctx.crc_of_id.get(&id.to_ascii_lowercase()).map_or(Ref::Unknown, |c| Ref::Crc(*c)),
                None => Ref::Unknown,
            };
            let place = Place::Line { session: m.at.session, offset: m.at.byte_offset };
            // The plan's own marker is already a store.
            if let Some(i) = stores.iter().position(|s| s.place == place) {
                if let Some(s) = stores.get_mut(i) {
                    s.own = true;
                    if s.reference == Ref::Unknown {
                        s.reference = reference;
                    }
                }
                marker_store.insert((m.at.session, m.at.byte_offset), i);
                continue;
            }
            marker_store.insert((m.at.session, m.at.byte_offset), stores.len());
            // In step with its writer: no server time needed.
            stores.push(Store { reference, own: true, place, at_us: 0 });
        }
        let timelines = timelines(body, &stores, ctx, &marker_store);
        // A writer that starts (at sequence 0, or after a reset) with no resume recorded
        // between its predecessor's first line and its own.
        let tokenless = body.segments.iter().enumerate().any(|(k, span)| {
            let prev = k.checked_sub(1).and_then(|p| body.segments.get(p));
            let starts = span.after_reset || span.first.seq == Some(0);
            starts
                && !ctx.resumes.iter().any(|r| {
                    r.place.side(&span.first) == Side::After
                        && prev.is_none_or(|p| r.place.side(&p.first) == Side::Before)
                })
        });
        Facts {
            stores,
            timelines,
            last_lines: ctx.last_lines.clone(),
            resumes: ctx.resumes.clone(),
            tokenless,
            dropped_at: ctx.dropped_at.clone(),
        }
    }

    /// When the store at `place` was recorded (the server's clock): its store's.
    fn at_us_of(&self, place: &Place) -> i64 {
        self.stores.iter().find(|s| s.place == *place).map_or(i64::MAX, |s| s.at_us)
    }

    /// Who may have been live when the checkpoint at `place` was stored: whose state it holds.
    /// The last writer with a line before it, when it wrote on after it. A mark after a
    /// writer's last line may also have come after that pod died, when the next pod had made
    /// its plan but not written yet (its state, then, is the checkpoint's): the next writer, or
    /// a pod that never wrote (each resume recorded then), or, where pods plan without a job
    /// token, one nothing shows.
    pub fn live_at(&self, place: &Place, body: &Body) -> LiveAt {
        if !self.live_known(place, body) {
            return LiveAt::Unknown;
        }
        let Some(k) = Facts::live(place, body) else { return LiveAt::Nobody };
        let resume_of = |w: u32| self.timelines.get(&w).map(|t| t.resume.clone()).unwrap_or_default();
        let mut any = vec![Live {
            boundary: k,
            member: Some(k),
            moved_on: Facts::moved_on(place, body, k),
            resume: resume_of(k),
        }];
        let Some(span) = body.segments.iter().find(|s| s.segment == k) else { return LiveAt::Unknown };
        if !matches!(place, Place::Mark(_)) || place.side(&span.last) != Side::Before {
            return LiveAt::Any(any);
        }
        let at_us = self.at_us_of(place);
        let next = body.segments.iter().filter(|s| s.segment > k).min_by_key(|s| s.segment);
        if let Some(n) = next {
            // A resume recorded after the store, before its first line: it planned after.
            let planned_after = self.resumes.iter().any(|r| r.at_us > at_us && r.place.side(&n.first) == Side::After);
            if !planned_after {
                any.push(Live {
                    boundary: n.segment,
                    member: Some(n.segment),
                    moved_on: false,
                    resume: resume_of(n.segment),
                });
            }
        }
        for r in self.resumes.iter().filter(|r| r.at_us < at_us && r.place.side(&span.last) == Side::Before) {
            let resume: Vec<usize> = match r.reference {
                Ref::None => self.stores.iter().position(|s| s.place == Place::Origin).into_iter().collect(),
                reference => self
                    .stores
                    .iter()
                    .rposition(|s| s.reference == reference && s.at_us <= r.at_us)
                    .into_iter()
                    .collect(),
            };
            any.push(Live { boundary: k.saturating_add(1), member: None, moved_on: false, resume });
        }
        if self.tokenless {
            return LiveAt::Unknown;
        }
        LiveAt::Any(any)
    }

    /// Whether the bytes show which writer was live when a mark was taken: the line holding
    /// the mark, or the last line before it, is an event read. A line the index does not hold
    /// there (cut by a crash, or a cut line glued to the next writer's first) may have been
    /// a writer the bytes do not show, started before the mark: then the live writer, and how
    /// far it had gone, are unknown. Other places name their writer (a marker line) or say
    /// nothing certain anyway (the clocks).
    pub fn live_known(&self, place: &Place, body: &Body) -> bool {
        let Place::Mark(files) = place else { return true };
        // The file the mark was live in: its last with bytes then.
        let Some((session, m)) =
            files.iter().enumerate().rev().find_map(|(s, m)| m.filter(|m| m.size > 0).map(|m| (s, m)))
        else {
            return true;
        };
        let in_file = |e: &&EventRef| e.at.session == session;
        let Some(last) = body.events.iter().filter(in_file).rfind(|e| e.at.byte_offset < m.size) else {
            // Bytes before the mark, none of them an event read.
            return false;
        };
        if m.line_start < m.size {
            return last.at.byte_offset == m.line_start;
        }
        // Between lines: no line between the last event before the mark and the next one.
        match body.events.iter().filter(in_file).find(|e| e.at.byte_offset >= m.size) {
            Some(next) => next.at.line_no == last.at.line_no.saturating_add(1),
            None => self.last_lines.get(session) == Some(&last.at.line_no),
        }
    }

    /// The writer live when `place` was stored: the last with an event before it.
    pub fn live(place: &Place, body: &Body) -> Option<u32> {
        body.events.iter().filter(|e| place.side(&e.at) != Side::After).map(|e| e.segment).max()
    }

    /// Whether writer `segment` had started a call before `place` was stored: a pod goes
    /// through its replay in order, so it had settled every call its resume left open.
    pub fn moved_on(place: &Place, body: &Body, segment: u32) -> bool {
        body.calls.iter().any(|c| c.segment == segment && c.start_seen && place.side(&c.start) != Side::After)
    }

    /// Whether the checkpoint stored at `place` surely covers call `c`. A pod's own store
    /// (`write_checkpoint`, a marker line) is its state then: it covers what the bytes say it
    /// covers ([`Facts::covers_by_bytes`]). The control plane's stores a state a pod reported,
    /// which may land after the pod went further: it covers at least what the store before it
    /// covers (the control plane never stores an older state), and what the bytes say only
    /// perhaps.
    pub fn covers(&self, place: &Place, c: &Call, body: &Body) -> bool {
        self.surely_covers(place, c, body, MAX_DEPTH)
    }

    /// Whether the bytes say the checkpoint at `place` covers call `c`, though it may not
    /// (the control plane's state landed late).
    pub fn maybe_covers(&self, place: &Place, c: &Call, body: &Body) -> bool {
        !self.covers(place, c, body) && self.covers_by_bytes(place, c, body, MAX_DEPTH)
    }

    /// The store at `place`, if one of the stores.
    fn store_at(&self, place: &Place) -> Option<&Store> {
        self.stores.iter().find(|s| s.place == *place)
    }

    /// The store before the one at `at_us`, by the server's clock: the state a later store of
    /// the control plane holds at least.
    fn store_before(&self, at_us: i64) -> Option<&Store> {
        self.stores
            .iter()
            .filter(|s| s.at_us < at_us && s.place != Place::Unknown && s.place != Place::Time(Vec::new()))
            .max_by_key(|s| s.at_us)
    }

    fn surely_covers(&self, place: &Place, c: &Call, body: &Body, depth: u32) -> bool {
        match self.store_at(place) {
            Some(s) if !s.own && *place != Place::Origin => {
                depth > 0
                    && self
                        .store_before(s.at_us)
                        .is_some_and(|p| p.place != *place && self.surely_covers(&p.place, c, body, depth - 1))
            }
            _ => self.covers_by_bytes(place, c, body, depth),
        }
    }

    /// Whether every call the checkpoint at `place` covers by the bytes was surely gone past
    /// by the pod whose state it holds: a pod's own store whose pod had moved on, or a later
    /// store of the control plane's holding at least such a state, when no bytes were dropped
    /// since that one.
    pub fn settled_past(&self, place: &Place, body: &Body) -> bool {
        self.settled_past_at(place, body, MAX_DEPTH)
    }

    fn settled_past_at(&self, place: &Place, body: &Body, depth: u32) -> bool {
        match self.store_at(place) {
            Some(s) if !s.own && *place != Place::Origin => {
                depth > 0
                    && self.store_before(s.at_us).is_some_and(|p| {
                        p.place != *place
                            && !self.dropped_at.iter().any(|d| *d > p.at_us)
                            && self.settled_past_at(&p.place, body, depth - 1)
                    })
            }
            _ => matches!(self.live_at(place, body), LiveAt::Any(any) if any.iter().all(|l| l.moved_on)),
        }
    }

    /// Whether the bytes say the checkpoint stored at `place` covers call `c`: what finished
    /// before it (its start and result before it); a call left open before it by a writer that
    /// was no longer live then, when the live pod had gone past it (it had started a call of
    /// its own) or the checkpoint it resumed from covers it; nothing else.
    fn covers_by_bytes(&self, place: &Place, c: &Call, body: &Body, depth: u32) -> bool {
        let side = |p: &Pos| place.side(p);
        let result = c.result.as_ref().map(|r| side(&r.at));
        if !c.start_seen {
            return result == Some(Side::Before);
        }
        let start = side(&c.start);
        if let Some(g) = c.group.and_then(|g| body.groups.get(g)) {
            return start == Side::Before && g.results.iter().all(|r| side(&r.at) == Side::Before);
        }
        match (start, result) {
            (Side::Before, Some(Side::Before)) => true,
            (Side::Before, None) => {
                // Whoever was live, it had gone past the call, or what it resumed from covers it.
                let LiveAt::Any(any) = self.live_at(place, body) else { return false };
                any.iter().all(|live| {
                    if c.segment >= live.boundary {
                        return false;
                    }
                    if live.moved_on {
                        return true;
                    }
                    depth > 0
                        && !live.resume.is_empty()
                        && live.resume.iter().all(|&r| {
                            self.stores
                                .get(r)
                                .is_some_and(|s| s.place != *place && self.surely_covers(&s.place, c, body, depth - 1))
                        })
                })
            }
            _ => false,
        }
    }
}

/// A checkpoint stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub reference: Ref,
    /// Stored by the writer itself, in step with its lines (`write_checkpoint`, a marker line):
    /// its calls after it are keyed under it. A store by anyone else (a plain `UPDATE`) is not.
    pub own: bool,
    pub place: Place,
    /// When (the server's clock), to order it with pods' resumes.
    pub at_us: i64,
}

/// A pod's resume, as its `recovery_plan` recorded it: the checkpoint it was given, where the
/// files stood then, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub reference: Ref,
    pub place: Place,
    pub at_us: i64,
}

/// What the database knows of a file's clock: its modification time (server clock) and, when
/// its last bytes are a cut line, the timestamp read from them (pod clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileClock {
    pub mtime_us: Option<i64>,
    /// The file ends with an unterminated line (a crash mid-append, or a line being written).
    pub tail_pending: bool,
    /// The `timestamp` the unterminated line carries, when it got that far.
    pub tail_ts_us: Option<i64>,
}

/// What the key computation needs besides the pairing's body.
#[derive(Debug, Clone, Default)]
pub struct KeyContext {
    /// The job's UUID (lower case), or a transcript's session id.
    pub scope: String,
    /// Checkpoints stored, oldest first. Marker lines of the files read are added from the body.
    pub stores: Vec<Store>,
    /// The plan's checkpoint, an index into `stores` (or the one [`resolve`] adds).
    pub plan_store: Option<usize>,
    /// The stores begin with the job's first checkpoint: before the first, there was none.
    pub origin_known: bool,
    /// Per session, where reading began (`i64::MAX`: not read).
    pub read_from: Vec<i64>,
    /// Checkpoint ids (lower case) to their CRC, for marker lines.
    pub crc_of_id: BTreeMap<String, u32>,
    /// Pods' resumes, oldest first: the checkpoint a pod was given by its `recovery_plan`, and
    /// where the files stood then (a pod reads its checkpoint before it writes).
    pub resumes: Vec<Resume>,
    /// When the index dropped bytes of the job's files it holds nowhere else (a generation
    /// replaced, truncated or rewritten): a replay those bytes may have been part of cannot be
    /// counted.
    pub dropped_at: Vec<i64>,
    /// Per session, the number of the last line the index holds of the file (its line count:
    /// valid, corrupt and blank lines).
    pub last_lines: Vec<i64>,
    /// Per session, what tells its writers' clocks, and the skew assumed where nothing does:
    /// for the stores placed by their time ([`Place::Time`] with no bounds yet: a mark that
    /// could not see the job's files).
    pub clocks: Vec<FileClock>,
    pub skew_us: i64,
}

impl KeyContext {
    /// Whether bytes were dropped after `at_us` (or at all).
    pub fn dropped_since(&self, at_us: i64) -> bool {
        self.dropped_at.iter().any(|d| *d > at_us)
    }
}

/// A call's place in one cycle: new there, at an ordinal, or a repeat of an earlier call; or
/// perhaps not in it at all (a call the checkpoint may cover).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cand {
    New(u32),
    Rerun(usize),
    Absent,
}

/// The place of a call not in the replay (in place sets: ordinals count from 1).
const ABSENT: u32 = 0;

/// What a call is among the calls of its tool: its input hash, or unknown.
type Content = (String, Option<String>);

fn content_of(c: &Call) -> Content {
    (c.tool_name.clone().unwrap_or_default(), c.input_hash.clone())
}

/// An unread request for every byte of every file: what a replay depends on cannot be told
/// from part of them (a pod the bytes do not show may hold a checkpoint's state).
pub const READ_EVERYTHING: (usize, i64) = (usize::MAX, 0);

/// Whether every file was read from its start.
fn all_read(ctx: &KeyContext) -> bool {
    ctx.read_from.iter().all(|f| *f == 0)
}

/// A replay that cannot be counted: read everything first (every call the checkpoint may not
/// cover must be in the plan), then it stays unknown.
fn unknown_cycle(ctx: &KeyContext) -> Cycle {
    Cycle { places: None, base: BTreeSet::new(), unread: (!all_read(ctx)).then_some(READ_EVERYTHING) }
}

/// The most cycles a plan works out (the plan's own, and its calls' key checkpoints).
const MAX_CYCLES: usize = 16;
/// The most candidates kept per call; beyond it the key is reported unknown.
const MAX_CANDIDATES: usize = 64;

/// Every call's place in one cycle (calls not in it are absent).
#[derive(Debug, Default)]
struct Cycle {
    /// `None` when the cycle's base could not be read: nothing in it is known.
    places: Option<BTreeMap<usize, Vec<Cand>>>,
    /// The calls of its base: their places hold whatever checkpoint their writer keyed under
    /// (the later writers' hold only if they resumed from this one).
    base: BTreeSet<usize>,
    /// Its base lies in bytes not read: reading `(session, from before offset)` would place it.
    unread: Option<(usize, i64)>,
}

/// Per segment: the checkpoints it may have resumed from, and the ones it stored itself.
#[derive(Debug, Clone, Default)]
struct Timeline {
    /// Indices into the stores; empty: unknown.
    resume: Vec<usize>,
    /// `(from, to, store)`: calls starting at or after `to` (in the segment's file) are keyed
    /// under the store; calls starting in `[from, to)` may be (a store placed by the clocks,
    /// whose place among the writer's lines they cannot tell).
    own: Vec<(i64, i64, usize)>,
}

/// Gives every call of `body` its keys. Call after the verdicts: calls the checkpoint covers
/// (`Verdict::Dropped`) still count, since writers went through them.
pub fn resolve(body: &mut Body, ctx: &KeyContext, facts: &Facts) {
    let stores = &facts.stores;
    let timelines = &facts.timelines;
    let key_cycles: Vec<Option<Vec<usize>>> = body.calls.iter().map(|c| key_cycle(c, body, timelines)).collect();

    // The cycles to work out: the plan's, and every key checkpoint of a call.
    let mut wanted: BTreeSet<usize> = ctx.plan_store.into_iter().collect();
    for k in key_cycles.iter().flatten() {
        wanted.extend(k.iter().copied());
    }
    let mut cycles: BTreeMap<usize, Cycle> = BTreeMap::new();
    for x in wanted.into_iter().take(MAX_CYCLES) {
        cycles.insert(x, cycle(x, body, facts, &key_cycles, ctx));
    }

    body.unread = cycles.values().filter_map(|c| c.unread).collect();
    let mut r = Resolver {
        body,
        stores,
        cycles: &cycles,
        key_cycles: &key_cycles,
        plan: ctx.plan_store,
        scope: &ctx.scope,
        places_memo: BTreeMap::new(),
    };
    let out: Vec<CallKeys> = (0..body.calls.len()).map(|i| report(r.pairs(i))).collect();
    let reused = reused_written_keys(body);
    for (c, k) in body.calls.iter_mut().zip(out) {
        c.keys = match &c.written_key {
            Some(w) if !reused.contains(w.as_str()) => written(k, w),
            _ => k,
        };
    }
}

/// Written keys that calls of different tools or inputs share: a pod that writes one key for
/// several calls (a key per step, a stale variable) names none of them, so the plan derives
/// theirs. The same key on the same tool and input is a call and its repeat, and stands.
fn reused_written_keys(body: &Body) -> BTreeSet<String> {
    let mut seen: BTreeMap<&str, (Option<&str>, Option<&str>)> = BTreeMap::new();
    let mut reused = BTreeSet::new();
    for c in &body.calls {
        let Some(w) = c.written_key.as_deref() else { continue };
        let what = (c.tool_name.as_deref(), c.input_hash.as_deref());
        if *seen.entry(w).or_insert(what) != what {
            reused.insert(w.to_owned());
        }
    }
    reused
}

/// A call whose start line carries the key its pod sent: that key, as written. When the formula
/// gives the same key, what it was built from stands; when it matches one of the candidates, it
/// says which one the call was (their place in the replay too, if they agree); otherwise the pod
/// built it its own way, and only the key is known, with the place the bytes give.
fn written(derived: CallKeys, key: &str) -> CallKeys {
    let agrees = derived.idempotency_key.as_deref() == Some(key);
    let matching: Vec<&KeyCandidate> = derived.candidates.iter().filter(|c| c.idempotency_key == key).collect();
    let places: BTreeSet<Option<u32>> = matching.iter().map(|c| c.replay_ordinal).collect();
    let place = match places.len() {
        1 => places.into_iter().next().flatten(),
        _ => None,
    };
    let one = matching.first().filter(|_| matching.len() == 1);
    CallKeys {
        status: KeyStatus::Written,
        replay_ordinal: derived.replay_ordinal.or(place),
        idempotency_key: Some(key.to_owned()),
        call_ordinal: if agrees { derived.call_ordinal } else { one.and_then(|c| c.call_ordinal) },
        checkpoint_ref: if agrees { derived.checkpoint_ref } else { one.map(|c| c.checkpoint_ref.clone()) },
        candidates: Vec::new(),
    }
}

/// `(replay ordinal, call ordinal, ref, key)`.
type Pair = (Option<u32>, u32, Ref, String);

fn report(pairs: Option<BTreeSet<Pair>>) -> CallKeys {
    let Some(pairs) = pairs.filter(|p| !p.is_empty() && p.len() <= MAX_CANDIDATES) else {
        return CallKeys::default();
    };
    let keys: BTreeSet<&String> = pairs.iter().map(|p| &p.3).collect();
    let places: BTreeSet<Option<u32>> = pairs.iter().map(|p| p.0).collect();
    let mut k = CallKeys::default();
    if places.len() == 1 {
        k.replay_ordinal = places.into_iter().next().flatten();
    }
    if keys.len() == 1 {
        if let Some(p) = pairs.iter().next() {
            k.idempotency_key = Some(p.3.clone());
            k.call_ordinal = Some(p.1);
            k.checkpoint_ref = p.2.text();
        }
    }
    if k.idempotency_key.is_some() && k.replay_ordinal.is_some() {
        k.status = KeyStatus::Derived;
    } else {
        k.status = KeyStatus::Ambiguous;
        k.candidates = pairs
            .into_iter()
            .filter_map(|(replay, ordinal, reference, key)| {
                Some(KeyCandidate {
                    replay_ordinal: replay,
                    call_ordinal: Some(ordinal),
                    checkpoint_ref: reference.text()?,
                    idempotency_key: key,
                })
            })
            .collect();
    }
    k
}

/// Works out places and keys from the cycles, memoised per call and cycle.
struct Resolver<'a> {
    body: &'a Body,
    stores: &'a [Store],
    cycles: &'a BTreeMap<usize, Cycle>,
    key_cycles: &'a [Option<Vec<usize>>],
    plan: Option<usize>,
    scope: &'a str,
    places_memo: BTreeMap<(usize, usize), Option<BTreeSet<u32>>>,
}

impl Resolver<'_> {
    /// Call `i`'s places in cycle `x`: the ordinal of the call it is (itself, or the earlier
    /// call it repeats) among the calls of its tool and input in that replay; `None`: unknown.
    fn places_in(&mut self, i: usize, x: usize) -> Option<BTreeSet<u32>> {
        if let Some(p) = self.places_memo.get(&(i, x)) {
            return p.clone();
        }
        let cands: Vec<Cand> = self.cycles.get(&x)?.places.as_ref()?.get(&i)?.clone();
        let mut out = BTreeSet::new();
        let mut known = true;
        for cand in cands {
            match cand {
                Cand::New(o) => {
                    out.insert(o);
                }
                Cand::Absent => {
                    out.insert(ABSENT);
                }
                Cand::Rerun(e) => match self.places_in(e, x) {
                    Some(p) => out.extend(p),
                    None => known = false,
                },
            }
        }
        let found = (known && !out.is_empty()).then_some(out);
        self.places_memo.insert((i, x), found.clone());
        found
    }

    /// Every `(place in the plan's replay, call ordinal, ref, key)` call `i` may be, one set
    /// per checkpoint its writer may have keyed it under. A writer keys a call by the formula
    /// under its key checkpoint, with the call's ordinal in that checkpoint's replay (a repeat
    /// of an earlier call has that call's ordinal). Under the plan's checkpoint, place and key
    /// come together; under another, the place holds only for a call of the plan's base (the
    /// writer live when it was stored), and is unknown otherwise.
    fn pairs(&mut self, i: usize) -> Option<BTreeSet<Pair>> {
        let call = self.body.calls.get(i)?;
        let (tool, hash) = content_of(call);
        let hash = hash?;
        let mut out = BTreeSet::new();
        for x in self.key_cycles.get(i)?.clone()? {
            let reference = self.stores.get(x)?.reference;
            let ref_text = reference.text()?;
            let key = |o: u32| call_idempotency_key(self.scope, &ref_text, o, &tool, &hash);
            if Some(x) == self.plan {
                for o in self.places_in(i, x)?.into_iter().filter(|o| *o != ABSENT) {
                    out.insert((Some(o), o, reference, key(o)));
                }
                continue;
            }
            let in_base = self.plan.and_then(|p| self.cycles.get(&p)).is_some_and(|c| c.base.contains(&i));
            let places: Vec<Option<u32>> =
                match self.plan.and_then(|p| if in_base { self.places_in(i, p) } else { None }) {
                    Some(r) if !r.is_empty() => r.into_iter().map(|o| (o != ABSENT).then_some(o)).collect(),
                    _ => vec![None],
                };
            for o in self.places_in(i, x)?.into_iter().filter(|o| *o != ABSENT) {
                for p in &places {
                    out.insert((*p, o, reference, key(o)));
                }
            }
            if out.len() > MAX_CANDIDATES {
                return None;
            }
        }
        (!out.is_empty() && out.len() <= MAX_CANDIDATES).then_some(out)
    }
}

/// The key checkpoint candidates of a call: the last store its writer made itself before the
/// call started, else what its writer resumed from. `None`: unknown.
fn key_cycle(c: &Call, body: &Body, timelines: &BTreeMap<u32, Timeline>) -> Option<Vec<usize>> {
    if !c.start_seen {
        return None;
    }
    let t = timelines.get(&c.segment)?;
    let span = body.segments.iter().find(|s| s.segment == c.segment)?;
    let mut cands = (!t.resume.is_empty()).then(|| t.resume.clone());
    if c.start.session != span.session {
        return cands;
    }
    let at = c.start.byte_offset;
    for &(from, to, s) in &t.own {
        if at >= to {
            cands = Some(vec![s]);
        } else if at >= from {
            // Perhaps after it, perhaps not: either key.
            cands = cands.map(|mut v| {
                v.push(s);
                v.sort_unstable();
                v.dedup();
                v
            });
        }
    }
    cands
}

/// Each segment's key checkpoints: what it resumed from, and what it stored itself.
fn timelines(
    body: &Body,
    stores: &[Store],
    ctx: &KeyContext,
    marker_store: &BTreeMap<(usize, i64), usize>,
) -> BTreeMap<u32, Timeline> {
    let mut out = BTreeMap::new();
    let origin = stores.iter().position(|s| s.place == Place::Origin);
    for (k, span) in body.segments.iter().enumerate() {
        let prev = k.checked_sub(1).and_then(|p| body.segments.get(p));
        let mut t = Timeline::default();
        // A writer that records which checkpoint it loaded says what it resumed from; so does
        // the plan its pod asked for when it started.
        let loaded = body.loads.iter().find(|l| l.segment == span.segment).map(|l| match &l.checkpoint_id {
            None => Some(Ref::None),
            Some(id) => ctx.crc_of_id.get(&id.to_ascii_lowercase()).map(|c| Ref::Crc(*c)),
        });
        // The last resume before its first line, unless it was the previous writer's (before
        // that one's first line). Checkpoints stored after it, before this writer began, leave
        // it open: the resume was this writer's own (it had read its plan before they were
        // stored) or an earlier pod's that wrote nothing (then this writer, whose own resume
        // was not recorded, read one of them).
        let given = || {
            let r = ctx.resumes.iter().rev().find(|r| {
                r.place.side(&span.first) == Side::After && prev.is_none_or(|p| r.place.side(&p.first) == Side::Before)
            })?;
            let later: Vec<usize> = stores
                .iter()
                .enumerate()
                .filter(|(_, s)| s.at_us > r.at_us && s.place.side(&span.first) == Side::After)
                .map(|(i, _)| i)
                .collect();
            Some((r.reference, later))
        };
        let stores_of = |reference: Option<Ref>| -> Vec<usize> {
            match reference {
                Some(Ref::None) => origin.into_iter().collect(),
                Some(r) => stores
                    .iter()
                    .enumerate()
                    .rfind(|(_, s)| s.reference == r && s.place.side(&span.first) == Side::After)
                    .map(|(i, _)| i)
                    .into_iter()
                    .collect(),
                None => Vec::new(),
            }
        };
        // A writer starts counting at 0. One that begins a file's read at a higher number
        // began before the bytes read, or continued from another file; after a reset, its first
        // lines were lost (a crash-cut line swallows the next writer's first one).
        let continued = !span.after_reset && span.first.seq.is_some_and(|s| s > 0);
        if let Some(reference) = loaded {
            t.resume = stores_of(reference);
        } else if continued {
            // Nothing places it.
        } else if let Some((reference, later)) = given() {
            t.resume = stores_of(Some(reference));
            if !t.resume.is_empty() && !later.is_empty() {
                t.resume.extend(later);
                t.resume.sort_unstable();
                t.resume.dedup();
            }
        } else {
            t.resume = resumed_from(span, prev, stores, ctx, origin);
        }
        // What it stored itself while it wrote.
        for (i, s) in stores.iter().enumerate() {
            if !s.own {
                continue;
            }
            let (from, to) = match &s.place {
                Place::Mark(files) => match files.get(span.session).copied().flatten() {
                    Some(m) if m.size > span.first.byte_offset && m.size <= span.last.byte_offset => (m.size, m.size),
                    _ => continue,
                },
                Place::Line { session, offset }
                    if *session == span.session
                        && *offset >= span.first.byte_offset
                        && *offset <= span.last.byte_offset
                        && marker_store.get(&(*session, *offset)) == Some(&i) =>
                {
                    (offset.saturating_add(1), offset.saturating_add(1))
                }
                // Placed by the clocks: stored while this writer wrote, unless surely before
                // its first line (then it is what it resumed from) or after its last.
                Place::Time(bounds)
                    if s.place.side(&span.first) != Side::After && s.place.side(&span.last) != Side::Before =>
                {
                    let (before, after) = bounds.get(span.session).copied().unwrap_or((None, None));
                    let from =
                        before.map_or(span.first.byte_offset, |b| b.saturating_add(1)).max(span.first.byte_offset);
                    (from, after.unwrap_or(i64::MAX))
                }
                _ => continue,
            };
            t.own.push((from, to, i));
        }
        t.own.sort_unstable();
        out.insert(span.segment, t);
    }
    out
}

/// The checkpoints a writer that started at `span.first` may have resumed from: the last one
/// stored before it started; when some were stored after the previous writer's last line and
/// before this one's first (while nobody wrote), each of those may be the one it read.
fn resumed_from(
    span: &SegmentSpan,
    prev: Option<&SegmentSpan>,
    stores: &[Store],
    ctx: &KeyContext,
    origin: Option<usize>,
) -> Vec<usize> {
    let mut set: Vec<usize> = match origin {
        Some(o) if ctx.origin_known => vec![o],
        _ => Vec::new(),
    };
    // A store that cannot be placed may be the last one before the writer: unless a later one
    // surely is, nothing is certain.
    let mut unplaced = false;
    for (i, s) in stores.iter().enumerate() {
        if s.place == Place::Origin {
            continue;
        }
        if s.place == Place::Unknown {
            unplaced = true;
            continue;
        }
        // Stored before the writer's first line (that line lies after it).
        if s.place.side(&span.first) != Side::After {
            continue;
        }
        // Stored while the previous writer still wrote (its last line was not yet whole), or
        // by a writer itself (pods do not overlap: it had died before this one started): surely
        // before this writer read its checkpoint. Stored while nobody wrote, it may have come
        // between this writer's plan and its first line.
        let during_prev = prev.is_some_and(|p| s.place.side(&p.last) != Side::Before);
        if during_prev || s.own {
            set = vec![i];
            unplaced = false;
        } else {
            set.push(i);
        }
    }
    if unplaced {
        return Vec::new();
    }
    set.dedup();
    set
}

/// What a cycle counts, in file order: calls, and events a sequence gap says were lost (each
/// may have been a call of any tool and input).
#[derive(Debug, Clone, Copy)]
enum Item {
    Call(usize),
    Lost(i64),
}

/// A segment's items in file order.
fn items_of(body: &Body, segment: u32) -> Vec<(Pos, Item)> {
    let mut out: Vec<(Pos, Item)> = body
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.segment == segment)
        .map(|(i, c)| (c.start, Item::Call(i)))
        .collect();
    for g in &body.gaps {
        let in_segment = body.events.iter().any(|e| e.segment == segment && e.at == g.at);
        if in_segment {
            out.push((g.at, Item::Lost(g.missing)));
        }
    }
    out.sort_by_key(|(p, _)| (p.session, p.byte_offset));
    out
}

/// A writer that went through the calls of `snapshot` (writing only what it ran): each call
/// it wrote gets its places (a repeat of an earlier call of its content, or new). Returns the
/// calls written, with their content, and adds to `snapshot`-relative places; calls of
/// unknown input and lost lines widen what follows. `counts(i)`: whether call `i` is the
/// writer's in this cycle.
fn write_member(
    body: &Body,
    segment: u32,
    snapshot: &Tally,
    places: &mut BTreeMap<usize, Vec<Cand>>,
    counts: &mut dyn FnMut(usize) -> bool,
) -> (Vec<(usize, Content)>, i64) {
    let mut seen: BTreeMap<Content, u32> = BTreeMap::new();
    let mut written: Vec<(usize, Content)> = Vec::new();
    // The writer's own lost lines (any call) and calls of unknown input (any input of their
    // tool), before each call: each may have been a call of its content.
    let mut own = Tally::default();
    let mut lost = 0i64;
    for (_, item) in items_of(body, segment) {
        let i = match item {
            Item::Lost(n) => {
                own.lose(n);
                lost = lost.saturating_add(n);
                continue;
            }
            Item::Call(i) => i,
        };
        let Some(c) = body.calls.get(i) else { continue };
        if !counts(i) {
            continue;
        }
        let content = content_of(c);
        if content.1.is_none() {
            own.add(&content, i, true);
            written.push((i, content));
            continue;
        }
        if c.start_seen {
            let j = {
                let n = seen.entry(content.clone()).or_insert(0);
                *n += 1;
                *n
            };
            places.insert(i, snapshot.place_written(&content, j, own.wild_for(&content)));
        }
        written.push((i, content));
    }
    (written, lost)
}

/// The replay from store `x`: its base (the calls it does not cover), then the writers that
/// resumed from it.
fn cycle(x: usize, body: &Body, facts: &Facts, key_cycles: &[Option<Vec<usize>>], ctx: &KeyContext) -> Cycle {
    let Some(store) = facts.stores.get(x) else { return Cycle::default() };
    let place = &store.place;
    if *place == Place::Unknown {
        return Cycle::default();
    }
    // The writer live when it was stored (the last with an event before it) and everything
    // after it must have been read.
    if let Some(at) = unread_replay(place, body, ctx) {
        return Cycle { places: None, base: BTreeSet::new(), unread: Some(at) };
    }
    // Bytes dropped after it was stored may have held calls of its replay; so may bytes
    // dropped before, unless a writer had gone past them.
    let since = if *place == Place::Origin { i64::MIN } else { store.at_us };
    if ctx.dropped_since(since) {
        return Cycle::default();
    }
    if !store.own && *place != Place::Origin {
        return cycle_lagging(x, store, body, facts, key_cycles, ctx);
    }
    let lives: Vec<Option<Live>> = match facts.live_at(place, body) {
        LiveAt::Unknown => return unknown_cycle(ctx),
        LiveAt::Nobody if ctx.dropped_since(i64::MIN) => return Cycle::default(),
        LiveAt::Nobody => vec![None],
        LiveAt::Any(any) => any.into_iter().map(Some).collect(),
    };
    // Whichever pod was live: every place each allows.
    let mut merged: Option<Cycle> = None;
    for live in &lives {
        let c = cycle_under(x, place, live.as_ref(), body, facts, key_cycles, ctx);
        if c.unread.is_some() || c.places.is_none() {
            return c;
        }
        merged = Some(match merged {
            None => c,
            Some(m) => merge_cycles(m, c),
        });
    }
    merged.unwrap_or_default()
}

/// The replay from a store of the control plane's, whose state may have been reported before
/// the bytes it lies after: it starts somewhere between what the store before it covers and
/// its mark. Every call since then that the bytes place before the mark may or may not be in
/// it; the calls after the mark are, as are the later writers' that resumed from it.
fn cycle_lagging(
    x: usize,
    store: &Store,
    body: &Body,
    facts: &Facts,
    key_cycles: &[Option<Vec<usize>>],
    ctx: &KeyContext,
) -> Cycle {
    let place = &store.place;
    // Everything the stores before it do not surely cover must have been read, and none of it
    // in bytes the index dropped.
    if let Some(at) = unread_chain(facts, place, body, ctx, MAX_DEPTH) {
        return Cycle { places: None, base: BTreeSet::new(), unread: Some(at) };
    }
    if facts.live_at(place, body) == LiveAt::Unknown {
        return unknown_cycle(ctx);
    }
    if ctx.dropped_since(i64::MIN) {
        return Cycle::default();
    }
    let mut tally = Tally::default();
    let mut places: BTreeMap<usize, Vec<Cand>> = BTreeMap::new();
    let mut base = BTreeSet::new();
    // The writers with lines before the mark, in order.
    let before: Vec<u32> = body
        .segments
        .iter()
        .filter(|sp| body.events.iter().any(|e| e.segment == sp.segment && place.side(&e.at) != Side::After))
        .map(|sp| sp.segment)
        .collect();
    for &segment in &before {
        for (_, item) in items_of(body, segment) {
            match item {
                // Lost lines may each have been a call of any content (before the mark, perhaps
                // not one of the replay's).
                Item::Lost(n) => tally.lose(n),
                Item::Call(i) => {
                    let Some(c) = body.calls.get(i) else { continue };
                    if facts.covers(place, c, body) {
                        continue;
                    }
                    let content = content_of(c);
                    // Unfinished when it was stored (a pod reports a state once the results it
                    // holds are written): surely not in it. Finished before, or left open (a
                    // pod may have found it done without a line): perhaps.
                    let unfinished = (c.start_seen && place.side(&c.start) == Side::After)
                        || c.result.as_ref().is_some_and(|r| place.side(&r.at) != Side::Before);
                    if c.start_seen {
                        let mut p = tally.place_new(&content);
                        if !unfinished {
                            p.push(Cand::Absent);
                        }
                        places.insert(i, p);
                        base.insert(i);
                    }
                    tally.add(&content, i, unfinished);
                }
            }
        }
    }
    // Later writers that resumed from it, in order.
    let later = |segment: u32| !before.contains(&segment);
    later_writers(x, body, facts, key_cycles, &later, &mut tally, &mut places);
    Cycle { places: Some(places), base, unread: None }
}

/// The writers `later` names that resumed from store `x`, in order, added to its replay: each
/// call a repeat of an earlier one or new; a writer that may have resumed from another
/// checkpoint is counted as possibly absent.
fn later_writers(
    x: usize,
    body: &Body,
    facts: &Facts,
    key_cycles: &[Option<Vec<usize>>],
    later: &dyn Fn(u32) -> bool,
    tally: &mut Tally,
    places: &mut BTreeMap<usize, Vec<Cand>>,
) {
    for span in body.segments.iter().filter(|sp| later(sp.segment)) {
        let Some(t) = facts.timelines.get(&span.segment) else { continue };
        if !t.resume.contains(&x) {
            continue;
        }
        let member = t.resume.len() == 1;
        let snapshot = tally.clone();
        // Only its calls keyed under what it resumed from: after a store of its own, it is in
        // another cycle (or may be: a store the clocks cannot order with the call).
        let mut under_resume = |i: usize| {
            body.calls.get(i).is_some_and(|c| {
                !c.start_seen
                    || key_cycles
                        .get(i)
                        .and_then(|k| k.as_ref())
                        .is_some_and(|k| t.resume.iter().all(|r| k.contains(r)))
            })
        };
        let (written, lost) = write_member(body, span.segment, &snapshot, places, &mut under_resume);
        for (i, content) in written {
            tally.add(&content, i, member);
        }
        tally.lose(lost);
        tally.close_writer(&snapshot, member);
    }
}

/// Two accounts of one replay: a call in one and not the other may be absent.
fn merge_cycles(a: Cycle, b: Cycle) -> Cycle {
    let (Some(pa), Some(pb)) = (a.places, b.places) else { return Cycle::default() };
    let mut places: BTreeMap<usize, Vec<Cand>> = BTreeMap::new();
    for i in pa.keys().chain(pb.keys()) {
        let mut cands: Vec<Cand> = Vec::new();
        for side in [&pa, &pb] {
            match side.get(i) {
                Some(c) => cands.extend(c.iter().copied()),
                None => cands.push(Cand::Absent),
            }
        }
        cands.sort_unstable();
        cands.dedup();
        places.insert(*i, cands);
    }
    Cycle { places: Some(places), base: a.base.union(&b.base).copied().collect(), unread: None }
}

/// One replay's places, with `live` the pod whose state the checkpoint holds (`None`: nobody
/// had written before it).
fn cycle_under(
    x: usize,
    place: &Place,
    live: Option<&Live>,
    body: &Body,
    facts: &Facts,
    key_cycles: &[Option<Vec<usize>>],
    ctx: &KeyContext,
) -> Cycle {
    let mut tally = Tally::default();
    let mut places: BTreeMap<usize, Vec<Cand>> = BTreeMap::new();
    let mut base = BTreeSet::new();

    // The base: the calls the checkpoint does not cover, in replay order. When the live writer
    // had started a call before it was stored, that writer had gone past every earlier one's,
    // and the base is its calls, each new. Otherwise the earlier writers' calls it does not
    // cover come first, and the live writer went through them (writing only what it ran), so
    // each call it wrote after is a repeat of one of them or new, as a later writer's.
    if let Some(l) = live {
        let moved_on = l.moved_on;
        if !moved_on {
            // Its base would be the earlier writers' calls it had not gone past: those the
            // checkpoint it resumed from does not cover, which must all have been read, and
            // none in bytes the index dropped.
            if ctx.dropped_since(i64::MIN) || l.resume.is_empty() {
                return Cycle::default();
            }
            for &r in &l.resume {
                let Some(at) = facts.stores.get(r) else { return Cycle::default() };
                if let Some(unread) = unread_chain(facts, &at.place, body, ctx, MAX_DEPTH) {
                    return Cycle { places: None, base: BTreeSet::new(), unread: Some(unread) };
                }
                // What that checkpoint covers depends on a pod the bytes do not show: which
                // earlier calls are still to do cannot be told.
                if at.place != *place && facts.live_at(&at.place, body) == LiveAt::Unknown {
                    return unknown_cycle(ctx);
                }
            }
        }
        for span in body.segments.iter().filter(|s| s.segment < l.boundary && !moved_on) {
            for (_, item) in items_of(body, span.segment) {
                match item {
                    Item::Lost(n) => tally.lose(n),
                    Item::Call(i) => {
                        let Some(c) = body.calls.get(i) else { continue };
                        if facts.covers(place, c, body) {
                            continue;
                        }
                        // The live writer may have gone past it without writing a line (it
                        // skipped it, or found it done) before the checkpoint was stored: it
                        // may be the checkpoint's.
                        let content = content_of(c);
                        if c.start_seen {
                            let mut p = tally.place_new(&content);
                            p.push(Cand::Absent);
                            places.insert(i, p);
                            base.insert(i);
                        }
                        tally.add(&content, i, false);
                    }
                }
            }
        }
        match l.member {
            Some(w0) if moved_on => {
                for (at, item) in items_of(body, w0) {
                    match item {
                        Item::Lost(n) => {
                            if place.side(&at) != Side::Before {
                                tally.lose(n);
                            }
                        }
                        Item::Call(i) => {
                            let Some(c) = body.calls.get(i) else { continue };
                            if facts.covers(place, c, body) || (place.side(&c.start) == Side::Before && !c.start_seen) {
                                continue;
                            }
                            let content = content_of(c);
                            // Its result line holds the mark, or the control plane's state may
                            // have landed after it finished: the checkpoint may cover it.
                            let maybe_covered = c.result.as_ref().is_some_and(|r| place.side(&r.at) == Side::Straddles)
                                || facts.maybe_covers(place, c, body);
                            if c.start_seen {
                                let mut p = tally.place_new(&content);
                                if maybe_covered {
                                    p.push(Cand::Absent);
                                }
                                places.insert(i, p);
                                base.insert(i);
                            }
                            tally.add(&content, i, !maybe_covered);
                        }
                    }
                }
            }
            Some(w0) => {
                let snapshot = tally.clone();
                let (written, lost) = write_member(body, w0, &snapshot, &mut places, &mut |_| true);
                for (i, content) in written {
                    base.insert(i);
                    tally.add(&content, i, true);
                }
                tally.lose(lost);
                tally.close_writer(&snapshot, true);
            }
            None => {}
        }
    }

    // Later writers that resumed from it, in order.
    let later = |segment: u32| !live.is_some_and(|l| segment < l.boundary || Some(segment) == l.member);
    later_writers(x, body, facts, key_cycles, &later, &mut tally, &mut places);
    Cycle { places: Some(places), base, unread: None }
}

/// Where the replay from a store may lie unread, through the checkpoints it depends on: when
/// the writer live at it had not gone past its predecessors' calls, their calls the checkpoint
/// it resumed from does not cover are part of the replay too.
fn unread_chain(facts: &Facts, place: &Place, body: &Body, ctx: &KeyContext, depth: u32) -> Option<(usize, i64)> {
    if let Some(at) = unread_replay(place, body, ctx) {
        return Some(at);
    }
    if depth == 0 {
        return None;
    }
    // A store of the control plane's surely covers only what the store before it does (none
    // before it: nothing): its replay may reach back as far as that one's.
    if let Some(s) = facts.store_at(place).filter(|s| !s.own && *place != Place::Origin) {
        let floor = facts.store_before(s.at_us).map_or(Place::Origin, |p| p.place.clone());
        return (floor != *place).then(|| unread_chain(facts, &floor, body, ctx, depth - 1)).flatten();
    }
    let any = match facts.live_at(place, body) {
        LiveAt::Any(any) => any,
        LiveAt::Nobody => return None,
        LiveAt::Unknown => return (!all_read(ctx)).then_some(READ_EVERYTHING),
    };
    any.iter().filter(|l| !l.moved_on).flat_map(|l| l.resume.iter()).find_map(|&r| {
        let at = facts.stores.get(r)?;
        (at.place != *place).then(|| unread_chain(facts, &at.place, body, ctx, depth - 1)).flatten()
    })
}

/// Where the replay from a store may lie unread: its live writer's part before it (from that
/// writer's start), and every byte after it. Returns `(session, offset)`: read that file from
/// the start of the writer writing just before `offset`.
fn unread_replay(place: &Place, body: &Body, ctx: &KeyContext) -> Option<(usize, i64)> {
    let from = |s: usize| ctx.read_from.get(s).copied().unwrap_or(i64::MAX);
    let sessions = ctx.read_from.len();
    match place {
        Place::Time(_) | Place::Unknown => None,
        Place::Origin => (0..sessions).find(|&s| from(s) > 0).map(|s| (s, 0)),
        Place::Line { session, offset } => {
            // The marker's writer from its start (unless an event of it before the marker was
            // read), and every later file from its start.
            let read_before = body.events.iter().any(|e| e.at.session == *session && e.at.byte_offset < *offset);
            if from(*session) > *offset || (from(*session) == *offset && *offset > 0 && !read_before) {
                return Some((*session, *offset));
            }
            (session.saturating_add(1)..sessions).find(|&s| from(s) > 0).map(|s| (s, 0))
        }
        Place::Mark(files) => {
            let live = files.iter().enumerate().rev().find(|(_, m)| m.is_some_and(|m| m.size > 0)).map(|(s, _)| s);
            (0..sessions).find_map(|s| {
                let start = files.get(s).copied().flatten().map_or(0, |m| m.line_start);
                let read_before = body.events.iter().any(|e| e.at.session == s && place.side(&e.at) != Side::After);
                let unread = from(s) > start || (Some(s) == live && start > 0 && from(s) == start && !read_before);
                unread.then_some((s, start.max(1)))
            })
        }
    }
}

/// The calls of a cycle so far, per tool and input.
#[derive(Debug, Clone, Default)]
struct Tally {
    /// Per content: its calls, in order.
    slots: BTreeMap<Content, Vec<usize>>,
    /// Per content: how many distinct calls (at least, at most).
    count: BTreeMap<Content, (u32, u32)>,
    /// Per tool: calls whose input is unknown (each may be any input of the tool).
    wild: BTreeMap<String, u32>,
    /// Calls whose tool is unknown too.
    wild_any: u32,
}

impl Tally {
    fn wild_for(&self, c: &Content) -> u32 {
        self.wild.get(&c.0).copied().unwrap_or(0).saturating_add(self.wild_any)
    }

    /// A call surely new to the cycle (a base call): the next ordinal of its content.
    fn place_new(&self, c: &Content) -> Vec<Cand> {
        if c.1.is_none() {
            return Vec::new();
        }
        let (lo, hi) = self.count.get(c).copied().unwrap_or((0, 0));
        let wild = self.wild_for(c);
        (lo.saturating_add(1)..=hi.saturating_add(wild).saturating_add(1)).map(Cand::New).collect()
    }

    /// The `j`-th call of content `c` a later writer wrote, after `own_wild` calls of its own
    /// that may each have been one of `c` (lost lines, calls of unknown input): a repeat of one
    /// of the earlier calls of `c` (in order: its `j`-th at the earliest), or a new one.
    fn place_written(&self, c: &Content, j: u32, own_wild: u32) -> Vec<Cand> {
        if c.1.is_none() {
            return Vec::new();
        }
        let earlier = self.slots.get(c).map(Vec::as_slice).unwrap_or(&[]);
        let n = u32::try_from(earlier.len()).unwrap_or(u32::MAX);
        let (lo, hi) = self.count.get(c).copied().unwrap_or((0, 0));
        let wild = self.wild_for(c).saturating_add(own_wild);
        let mut out: Vec<Cand> = earlier.iter().skip(j.saturating_sub(1) as usize).map(|&e| Cand::Rerun(e)).collect();
        let first_new = lo.saturating_add(j.saturating_sub(n).max(1));
        let last_new = hi.saturating_add(wild).saturating_add(j);
        out.extend((first_new..=last_new).map(Cand::New));
        out
    }

    /// Events lost (a sequence gap): each may have been a call of any tool.
    fn lose(&mut self, n: i64) {
        self.wild_any = self.wild_any.saturating_add(u32::try_from(n.max(0)).unwrap_or(u32::MAX));
    }

    fn add(&mut self, c: &Content, call: usize, sure: bool) {
        if c.1.is_none() {
            if c.0.is_empty() {
                self.wild_any = self.wild_any.saturating_add(1);
            } else {
                let w = self.wild.entry(c.0.clone()).or_insert(0);
                *w = w.saturating_add(1);
            }
            return;
        }
        self.slots.entry(c.clone()).or_default().push(call);
        let e = self.count.entry(c.clone()).or_insert((0, 0));
        if sure {
            e.0 = e.0.saturating_add(1);
        }
        e.1 = e.1.saturating_add(1);
    }

    /// After a later writer: at least the calls it wrote beyond the earlier ones of their
    /// content were new (none, if it may not belong to the cycle); at most, all of them.
    fn close_writer(&mut self, before: &Tally, member: bool) {
        for (c, (lo, _)) in self.count.iter_mut() {
            let (b_lo, _) = before.count.get(c).copied().unwrap_or((0, 0));
            let earlier = before.slots.get(c).map_or(0, Vec::len);
            let now = self.slots.get(c).map_or(0, Vec::len);
            let written = u32::try_from(now.saturating_sub(earlier)).unwrap_or(u32::MAX);
            let n = u32::try_from(earlier).unwrap_or(u32::MAX);
            *lo = if member { b_lo.saturating_add(written.saturating_sub(n)) } else { b_lo };
        }
    }
}

#[cfg(test)]
mod tests;
