//! What the plan does with each call the pairing saw: skip it (`completed`), verify it because
//! it was open (`in_flight`), verify it because the bytes cannot settle it (`verify`), or leave
//! it to the checkpoint (`dropped`). Pure.
//!
//! The checkpoint covers exactly the calls that finished before it was stored. Most anchors are
//! positions (a marker, a high-water mark, a file's start), and a call's verdict follows from
//! where its lines lie:
//!
//! - started and finished after the anchor: `completed`; started after, no result: `in_flight`;
//! - started and finished before: the checkpoint's (dropped);
//! - started before, finished after: `verify` (`started_before_anchor`);
//! - its start line was being written when the mark was taken: `verify` (`straddles_anchor`);
//! - started before, no result: `verify` (`open_at_anchor`), unless a later writer had started a
//!   call of its own before the checkpoint was stored: it had resumed and gone past this one
//!   (a pod goes through its replay in order), so the checkpoint covers it.
//!
//! Only the fallback anchor, the checkpoint's write time, needs clocks: the checkpoint's time
//! is the database server's, the events' are the pod's. [`Window`] compares them without
//! trusting either blindly:
//!
//! - Each writer segment gets bounds on its pod's clock offset (server = pod + offset). The
//!   segment that wrote a file's last bytes is measured: the file's mtime (server clock) against
//!   the timestamp of its last line, or of the cut line its crash left (pod clock); the line is
//!   written at most [`WRITE_DELAY_US`] after it is stamped. Other segments are assumed within
//!   `recovery_clock_skew` of the server.
//! - An event is *before* when even its latest possible server time is before the checkpoint,
//!   *after* when even its earliest is after, otherwise *uncertain*.
//! - A file is appended in time order, so an event before every later one in the file is
//!   before too, and one after every earlier one is after: within a file, only the events
//!   between the last certain *before* and the first certain *after* stay uncertain.
//! - A call with its start or result uncertain, or that started before and finished after the
//!   checkpoint, goes to `verify` with the evidence: never skipped, never dropped.
//!
//! Then the keys ([`super::cycles`]): a call the pod cannot match to its own calls (its input
//! unknown, its place in the replay not unique) is verified, never skipped.

pub use super::cycles::FileClock;
use super::cycles::{Facts, KeyContext, KeyStatus, Place, Side};
use super::pairing::{Body, Call, Pos, Verdict, VerifyReason};

/// The most time between a line's timestamp and its write reaching the file (the shipped
/// writer stamps the envelope as it appends it).
pub const WRITE_DELAY_US: i64 = 1_000_000;

/// The checkpoint's write time and how far the pods' clocks may be from the server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// When the checkpoint was written (server clock).
    pub at_us: i64,
    /// Assumed bound on |pod clock - server clock| where nothing measures it.
    pub skew_us: i64,
    /// Per session (index of the plan's files).
    pub clocks: Vec<FileClock>,
}

/// A writer segment's clock: server time = pod time + offset, offset in `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentClock {
    pub segment: u32,
    pub session: usize,
    pub low_us: i64,
    pub high_us: i64,
    /// Measured from the file's mtime (else assumed).
    pub measured: bool,
}

/// What [`settle`] found about time, for the plan's evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeEvidence {
    pub segments: Vec<SegmentClock>,
    /// Per session: the offsets of the uncertain stretch `[from, to]`, if any.
    pub uncertain: Vec<(usize, i64, i64)>,
    /// The writer live when the checkpoint was stored had not gone past its predecessors'
    /// calls, and the index dropped bytes some of those may have been in: the plan cannot be
    /// complete (`bytes_missing`).
    pub bytes_missing: bool,
}

/// Gives every call its verdict and keys, and drops what lies before the checkpoint.
/// `ctx.plan_store` is the plan's checkpoint among `ctx.stores`: where it was stored (a marker,
/// a high-water mark, the origin); with `window` (the clock fallback) its place is worked out
/// here from the clocks.
pub fn settle(body: &mut Body, window: Option<&Window>, ctx: &mut KeyContext) -> TimeEvidence {
    let mut evidence = TimeEvidence::default();
    if let Some(w) = window {
        let (bounds, found) = classify(body, w);
        evidence = found;
        if let Some(store) = ctx.plan_store.and_then(|i| ctx.stores.get_mut(i)) {
            store.place = Place::Time(bounds);
        }
    }
    // Stores whose marks could not place them (they saw none of the job's files): placed by
    // their time, by the same clocks.
    for (i, store) in ctx.stores.iter_mut().enumerate() {
        if Some(i) == ctx.plan_store && window.is_some() {
            continue;
        }
        if store.place == Place::Time(Vec::new()) && store.at_us > i64::MIN && store.at_us < i64::MAX {
            let w = Window { at_us: store.at_us, skew_us: ctx.skew_us, clocks: ctx.clocks.clone() };
            store.place = Place::Time(classify(body, &w).0);
        }
    }
    let clock = window.is_some();
    let place = ctx.plan_store.and_then(|i| ctx.stores.get(i)).map_or(Place::Origin, |s| s.place.clone());
    // The writer live when the checkpoint was stored: its calls still open then are not the
    // checkpoint's; an earlier writer's are (the writer after it resumed and settled them).
    let facts = Facts::new(body, ctx);
    // Dropped bytes are the checkpoint's only if the writer live when it was stored had gone
    // past them.
    evidence.bytes_missing = ctx.dropped_since(i64::MIN) && !facts.settled_past(&place, body);
    let verdicts: Vec<Verdict> = body.calls.iter().map(|c| verdict(c, body, &facts, &place, clock)).collect();
    for (c, v) in body.calls.iter_mut().zip(verdicts) {
        c.verdict = v;
    }
    body.calls.sort_by_key(|c| (c.start.session, c.start.byte_offset));
    super::cycles::resolve(body, ctx, &facts);
    // Per tool over the plan, in file order, the calls the checkpoint does not cover.
    let mut per_tool: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    for c in body.calls.iter_mut() {
        if c.verdict == Verdict::Dropped || !c.start_seen {
            c.tool_ordinal = 0;
            continue;
        }
        let t = per_tool.entry(c.tool_name.clone().unwrap_or_default()).or_insert(0);
        *t += 1;
        c.tool_ordinal = *t;
        c.verdict = by_keys(c);
    }
    if place != Place::Origin {
        // What the checkpoint covers is not the plan's; a marker line is the anchor itself.
        let kept = |p: &Pos| match place.side(p) {
            Side::Before => false,
            Side::Straddles => !matches!(place, Place::Line { .. }),
            Side::After => true,
        };
        body.events.retain(|e| kept(&e.at));
        body.gaps.retain(|g| kept(&g.at));
        body.anomalies.retain(|a| kept(&a.at));
    }
    evidence
}

/// What the checkpoint's place says of a call.
fn verdict(c: &Call, body: &Body, facts: &Facts, place: &Place, clock: bool) -> Verdict {
    if facts.covers(place, c, body) {
        return Verdict::Dropped;
    }
    let side = |p: &Pos| place.side(p);
    let start = side(&c.start);
    let result = c.result.as_ref().map(|r| side(&r.at));
    let unplaced = if clock { VerifyReason::UncertainTime } else { VerifyReason::StraddlesAnchor };
    if !c.start_seen {
        // A result without its start: the call finished after the anchor; verified, never
        // skipped.
        return match result {
            _ if c.started_before => Verdict::Verify(VerifyReason::StartedBeforeAnchor),
            Some(Side::Straddles) if clock => Verdict::Verify(VerifyReason::UncertainTime),
            _ => Verdict::Verify(VerifyReason::StartLost),
        };
    }
    if c.group.is_some() {
        return Verdict::Verify(VerifyReason::AmbiguousPairing);
    }
    match (start, result) {
        (Side::After, None) => Verdict::InFlight,
        (Side::After, Some(Side::After)) => Verdict::Completed,
        // A result placed before its own start: the clocks (or the files) disagree.
        (Side::After, Some(_)) => Verdict::Verify(VerifyReason::UncertainTime),
        (Side::Straddles, _) => Verdict::Verify(unplaced),
        (Side::Before, Some(Side::Straddles)) if clock => Verdict::Verify(VerifyReason::UncertainTime),
        // Finished before the checkpoint, which the control plane stored: its state may have
        // been reported before the call finished.
        (Side::Before, Some(Side::Before)) => Verdict::Verify(VerifyReason::FinishedBeforeAnchor),
        (Side::Before, Some(_)) => Verdict::Verify(VerifyReason::StartedBeforeAnchor),
        // Open when the checkpoint was stored, and no later writer had gone past it.
        (Side::Before, None) => Verdict::Verify(VerifyReason::OpenAtAnchor),
    }
}

/// What the keys add: a call the pod cannot match (its input unknown, or its place in the
/// replay not unique) is never skipped, and one without a key is verified, not "in flight".
fn by_keys(c: &Call) -> Verdict {
    let unknown_input = c.input_hash.is_none();
    match c.verdict {
        Verdict::Completed | Verdict::InFlight if unknown_input => Verdict::Verify(VerifyReason::InputUnknown),
        Verdict::Completed if c.keys.replay_ordinal.is_none() => Verdict::Verify(match c.keys.status {
            KeyStatus::Unknown => VerifyReason::KeyUnknown,
            _ => VerifyReason::KeyAmbiguous,
        }),
        Verdict::InFlight if c.keys.idempotency_key.is_none() || c.keys.replay_ordinal.is_none() => {
            Verdict::Verify(match c.keys.status {
                KeyStatus::Unknown => VerifyReason::KeyUnknown,
                _ => VerifyReason::KeyAmbiguous,
            })
        }
        v => v,
    }
}

/// Per session, the last offset surely before and the first surely after the checkpoint's
/// time, by the writers' clocks.
/// Per session, the last offset surely before and the first surely after.
type Bounds = Vec<(Option<i64>, Option<i64>)>;

fn classify(body: &Body, w: &Window) -> (Bounds, TimeEvidence) {
    let segments = segment_clocks(body, w);
    let clock_of = |seg: u32| segments.iter().find(|s| s.segment == seg);
    let sessions = body.events.iter().map(|e| e.at.session + 1).max().unwrap_or(0);
    let mut bounds: Bounds = vec![(None, None); sessions];
    for e in &body.events {
        let Some(clock) = clock_of(e.segment) else { continue };
        let Some(ts) = e.at.ts_us else { continue };
        let Some(slot) = bounds.get_mut(e.at.session) else { continue };
        if ts.saturating_add(clock.high_us) < w.at_us {
            slot.0 = Some(slot.0.map_or(e.at.byte_offset, |b| b.max(e.at.byte_offset)));
        } else if ts.saturating_add(clock.low_us) > w.at_us {
            slot.1 = Some(slot.1.map_or(e.at.byte_offset, |a| a.min(e.at.byte_offset)));
        }
    }
    let place = Place::Time(bounds);
    let mut uncertain = Vec::new();
    for session in 0..sessions {
        let offsets: Vec<i64> = body
            .events
            .iter()
            .filter(|e| e.at.session == session && place.side(&e.at) == Side::Straddles)
            .map(|e| e.at.byte_offset)
            .collect();
        if let (Some(&from), Some(&to)) = (offsets.first(), offsets.last()) {
            uncertain.push((session, from, to));
        }
    }
    let Place::Time(bounds) = place else {
        return (Vec::new(), TimeEvidence { segments, uncertain, bytes_missing: false });
    };
    (bounds, TimeEvidence { segments, uncertain, bytes_missing: false })
}

/// Bounds on each segment's clock offset: measured for the segment that wrote a file's last
/// bytes, assumed for the others.
fn segment_clocks(body: &Body, w: &Window) -> Vec<SegmentClock> {
    let mut out: Vec<SegmentClock> = Vec::new();
    for e in &body.events {
        if out.iter().any(|s| s.segment == e.segment) {
            continue;
        }
        out.push(SegmentClock {
            segment: e.segment,
            session: e.at.session,
            low_us: w.skew_us.saturating_neg(),
            high_us: w.skew_us,
            measured: false,
        });
    }
    for (session, clock) in w.clocks.iter().enumerate() {
        let Some(last) = body.events.iter().rev().find(|e| e.at.session == session) else { continue };
        let Some(mtime) = clock.mtime_us else { continue };
        let Some(s) = out.iter_mut().find(|s| s.segment == last.segment) else { continue };
        match (clock.tail_pending, clock.tail_ts_us, last.at.ts_us) {
            // The last line written is stamped: the offset is the mtime's distance from it,
            // less up to the write delay.
            (false, _, Some(ts)) | (true, Some(ts), _) => {
                let estimate = mtime.saturating_sub(ts);
                s.high_us = estimate;
                s.low_us = estimate.saturating_sub(WRITE_DELAY_US);
                s.measured = true;
            }
            // A cut line without its timestamp was written at the mtime, some time after the
            // last whole line: the offset is at most the distance from that line, and may be
            // any amount less. Only "before" can be told by the clock.
            (true, None, Some(ts)) => {
                s.high_us = mtime.saturating_sub(ts);
                s.low_us = i64::MIN / 4;
                s.measured = true;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::cycles::{MarkAt, Ref, Resume, SegmentSpan, Store};
    use super::super::keys::NULL_INPUT_HASH;
    use super::super::pairing::{Call, CallResult, EventRef};
    use super::*;

    const S: i64 = 1_000_000;

    /// An event at `off`; the tests' lines are 10 bytes long, so its line number follows.
    fn at(session: usize, off: i64, ts: i64) -> Pos {
        Pos { session, byte_offset: off, line_no: off / 10 + 1, seq: None, ts_us: Some(ts) }
    }

    fn call(start: Pos, result: Option<Pos>, segment: u32) -> Call {
        Call {
            key: format!("k{}", start.byte_offset),
            key_is_id: false,
            tool_name: Some("send_email".into()),
            start,
            input_hash: Some(format!("h{}", start.byte_offset)),
            input: None,
            written_key: None,
            tool_ordinal: 1,
            segment,
            result: result.map(|at| CallResult { at, success: Some(true), result: None, paired_by_order: true }),
            start_seen: true,
            started_before: false,
            group: None,
            verdict: Verdict::InFlight,
            keys: Default::default(),
        }
    }

    /// Events in one segment per entry of `segments` (`(segment, events)`), and the calls.
    fn body(segments: &[(u32, &[Pos])], calls: Vec<Call>) -> Body {
        let mut b = Body { calls, ..Body::default() };
        for (seg, events) in segments {
            b.events.extend(events.iter().map(|p| EventRef { at: *p, event_type: None, segment: *seg }));
            if let (Some(first), Some(last)) = (events.first(), events.last()) {
                b.segments.push(SegmentSpan {
                    segment: *seg,
                    session: first.session,
                    first: *first,
                    last: *last,
                    after_reset: *seg > 0,
                });
            }
        }
        b
    }

    /// The plan's checkpoint (CRC 1) at `place`, stored by the pod itself (its state then:
    /// exact); the job had none before. At the origin: the job has no checkpoint.
    fn ctx(place: Place) -> KeyContext {
        let mut stores = vec![Store { reference: Ref::None, own: false, place: Place::Origin, at_us: 0 }];
        if place != Place::Origin {
            stores.push(Store { reference: Ref::Crc(1), own: true, place, at_us: 0 });
        }
        KeyContext {
            scope: "job".into(),
            plan_store: Some(stores.len() - 1),
            stores,
            origin_known: true,
            read_from: vec![0],
            ..KeyContext::default()
        }
    }

    /// A pod whose clock is `skew` ahead of the server writes a call finished 30 s before the
    /// checkpoint, one 0.3 s before, one 0.3 s after and one 30 s after; the file's mtime is
    /// the last line's server time.
    fn pod(skew: i64, measured: bool) -> Vec<Verdict> {
        let cp = 1_000 * S;
        let server = [cp - 30 * S, cp - S / 3, cp + S / 3, cp + 30 * S];
        let events: Vec<Pos> = server
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let o = i as i64 * 100;
                [at(0, o, t + skew - S / 10), at(0, o + 50, t + skew)]
            })
            .collect();
        let calls = (0..4).map(|i| call(events[2 * i], Some(events[2 * i + 1]), 0)).collect();
        let mut b = body(&[(0, &events)], calls);
        let w = Window {
            at_us: cp,
            skew_us: 5 * S,
            clocks: vec![FileClock { mtime_us: measured.then_some(server[3]), ..FileClock::default() }],
        };
        settle(&mut b, Some(&w), &mut ctx(Place::Time(Vec::new())));
        b.calls.iter().map(|c| c.verdict).collect()
    }

    #[test]
    fn a_measured_clock_settles_all_but_the_calls_next_to_the_checkpoint() {
        for skew in [-60, -10, -3, 0, 3, 10, 60] {
            // The mtime bounds the offset from above, so "before" is certain whenever the
            // latest possible server time is; "after" needs the write delay taken off.
            assert_eq!(
                pod(skew * S, true),
                [Verdict::Dropped, Verdict::Dropped, Verdict::Verify(VerifyReason::UncertainTime), Verdict::Completed],
                "skew {skew} s"
            );
        }
    }

    #[test]
    fn an_unmeasured_clock_within_the_allowance_never_skips_or_drops_wrongly() {
        for skew in [-5, -3, 0, 3, 5] {
            let v = pod(skew * S, false);
            // Calls 0 and 1 finished before the checkpoint, 2 and 3 after it.
            assert_eq!(v[0], Verdict::Dropped, "skew {skew}");
            assert!(matches!(v[1], Verdict::Dropped | Verdict::Verify(_)), "skew {skew}: {:?}", v[1]);
            assert!(matches!(v[2], Verdict::Completed | Verdict::Verify(_)), "skew {skew}: {:?}", v[2]);
            assert_eq!(v[3], Verdict::Completed, "skew {skew}");
        }
    }

    #[test]
    fn file_order_settles_what_a_clock_alone_cannot() {
        // An event with no timestamp between two certain ones takes their side.
        let cp = 1_000 * S;
        let mut events = vec![at(0, 0, cp - 60 * S), at(0, 10, 0), at(0, 20, cp + 60 * S)];
        events[1].ts_us = None;
        let mut b = body(&[(0, &events)], vec![call(events[1], Some(events[2]), 0)]);
        let w = Window { at_us: cp, skew_us: 5 * S, clocks: vec![FileClock::default()] };
        let e = settle(&mut b, Some(&w), &mut ctx(Place::Time(Vec::new())));
        assert_eq!(b.calls[0].verdict, Verdict::Verify(VerifyReason::UncertainTime));
        assert_eq!(e.uncertain, [(0, 10, 10)]);
        assert_eq!(b.events.len(), 2, "the event before the checkpoint is dropped");
    }

    #[test]
    fn a_mark_settles_only_what_finished_before_it() {
        // One writer: a call finished before the mark, one open at it, one whose start line
        // the mark fell inside, one started before and finished after, one after.
        let e: Vec<Pos> = [0, 10, 20, 30, 40, 50, 60, 70].iter().map(|o| at(0, *o, 0)).collect();
        let calls = vec![
            call(e[0], Some(e[1]), 0), // before
            call(e[2], None, 0),       // open at the mark
            call(e[3], Some(e[6]), 0), // started before, finished after
            call(e[4], None, 0),       // its line holds the mark (40..50, mark at 45)
            call(e[7], None, 0),       // after
        ];
        let mut b = body(&[(0, &e)], calls);
        let mut c = ctx(Place::Mark(vec![Some(MarkAt { size: 45, line_start: 40 })]));
        settle(&mut b, None, &mut c);
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(
            v,
            [
                Verdict::Dropped,
                Verdict::Verify(VerifyReason::OpenAtAnchor),
                Verdict::Verify(VerifyReason::StartedBeforeAnchor),
                Verdict::Verify(VerifyReason::StraddlesAnchor),
                Verdict::InFlight,
            ]
        );
    }

    #[test]
    fn a_checkpoint_the_control_plane_stored_covers_surely_only_what_the_one_before_it_does() {
        // The pod stored C1 itself after call a; the control plane stored C2 after b finished:
        // C2's state may have been reported before b finished (it lands late). a is C1's, so
        // C2's; b is listed; c, after C2, is the replay's.
        let e: Vec<Pos> = (0..6).map(|k| at(0, k * 10, 0)).collect();
        let calls = vec![call(e[0], Some(e[1]), 0), call(e[2], Some(e[3]), 0), call(e[4], None, 0)];
        let mut b = body(&[(0, &e)], calls);
        let mut c = ctx(Place::Mark(vec![Some(MarkAt::at(40))]));
        if let Some(s) = c.stores.last_mut() {
            s.own = false;
            s.at_us = 20;
        }
        c.stores.insert(
            1,
            Store { reference: Ref::Crc(9), own: true, place: Place::Mark(vec![Some(MarkAt::at(20))]), at_us: 10 },
        );
        c.plan_store = Some(2);
        c.last_lines = vec![6];
        settle(&mut b, None, &mut c);
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(v, [Verdict::Dropped, Verdict::Verify(VerifyReason::FinishedBeforeAnchor), Verdict::InFlight]);
        // Stored by the pod itself, the same checkpoint is its state then: b is its.
        let calls = vec![call(e[0], Some(e[1]), 0), call(e[2], Some(e[3]), 0), call(e[4], None, 0)];
        let mut b = body(&[(0, &e)], calls);
        let mut c = ctx(Place::Mark(vec![Some(MarkAt::at(40))]));
        c.last_lines = vec![6];
        settle(&mut b, None, &mut c);
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(v, [Verdict::Dropped, Verdict::Dropped, Verdict::InFlight]);
    }

    #[test]
    fn a_line_the_index_does_not_hold_at_the_mark_leaves_the_live_writer_unknown() {
        // Writer 0 died with a call open; writer 1 went past it and started a call; then a line
        // the index does not hold (cut by a crash: perhaps a third writer's first) held the
        // mark. That third writer, resumed from an earlier checkpoint, may be the one whose
        // state the checkpoint holds: writer 0's call is not the checkpoint's.
        let w0 = [at(0, 0, 0), at(0, 10, 0)];
        let w1 = [at(0, 20, 0), at(0, 30, 0)];
        let calls = || vec![call(w0[1], None, 0), call(w1[1], None, 1)];
        let mut b = body(&[(0, &w0), (1, &w1)], calls());
        let mut c = ctx(Place::Mark(vec![Some(MarkAt { size: 45, line_start: 40 })]));
        c.last_lines = vec![4];
        settle(&mut b, None, &mut c);
        assert_eq!(b.calls.first().map(|c| c.verdict), Some(Verdict::Verify(VerifyReason::OpenAtAnchor)));
        // The same mark between lines, after a line the index holds as corrupt (line 5).
        let mut b = body(&[(0, &w0), (1, &w1)], calls());
        let mut c = ctx(Place::Mark(vec![Some(MarkAt::at(50))]));
        c.last_lines = vec![5];
        settle(&mut b, None, &mut c);
        assert_eq!(b.calls.first().map(|c| c.verdict), Some(Verdict::Verify(VerifyReason::OpenAtAnchor)));
        // Writer 1's own line last before the mark, and no pod planned after it: it was live,
        // and had gone past. (Each pod's plan is recorded: its resume.)
        let mut b = body(&[(0, &w0), (1, &w1)], calls());
        let mut c = ctx(Place::Mark(vec![Some(MarkAt::at(40))]));
        c.last_lines = vec![4];
        if let Some(s) = c.stores.last_mut() {
            s.at_us = 10;
        }
        c.resumes = vec![
            Resume { reference: Ref::None, place: Place::Mark(vec![None]), at_us: 1 },
            Resume { reference: Ref::None, place: Place::Mark(vec![Some(MarkAt::at(20))]), at_us: 2 },
        ];
        settle(&mut b, None, &mut c.clone());
        assert_eq!(b.calls.first().map(|c| c.verdict), Some(Verdict::Dropped));
        // A pod that planned after writer 1's last line and before the mark, and wrote
        // nothing: its state may be the checkpoint's, and it had not gone past that call.
        let mut b = body(&[(0, &w0), (1, &w1)], calls());
        c.resumes.push(Resume { reference: Ref::None, place: Place::Mark(vec![Some(MarkAt::at(40))]), at_us: 5 });
        settle(&mut b, None, &mut c);
        assert_eq!(b.calls.first().map(|c| c.verdict), Some(Verdict::Verify(VerifyReason::OpenAtAnchor)));
    }

    #[test]
    fn an_earlier_writers_open_call_is_the_checkpoints_once_a_later_writer_went_past_it() {
        // Writer 0 died with a call open; writer 1 resumed and started a call; the mark came
        // then: writer 1 had settled writer 0's call first, and the checkpoint is its.
        let w0 = [at(0, 0, 0), at(0, 10, 0)];
        let w1 = [at(0, 20, 0), at(0, 30, 0)];
        let mut b = body(&[(0, &w0), (1, &w1)], vec![call(w0[1], None, 0), call(w1[0], None, 1)]);
        settle(&mut b, None, &mut ctx(Place::Mark(vec![Some(MarkAt::at(25))])));
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(v, [Verdict::Dropped, Verdict::Verify(VerifyReason::OpenAtAnchor)]);
        // Writer 1 had only written text by then: it may not have reached that call yet.
        let mut b = body(&[(0, &w0), (1, &w1)], vec![call(w0[1], None, 0), call(w1[1], None, 1)]);
        settle(&mut b, None, &mut ctx(Place::Mark(vec![Some(MarkAt::at(25))])));
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(v[0], Verdict::Verify(VerifyReason::OpenAtAnchor));
        // The mark before writer 1 wrote anything: writer 0 was the last to write. Writer 1's
        // pod was given this checkpoint when it started (its recovery_plan said so).
        let mut b = body(&[(0, &w0), (1, &w1)], vec![call(w0[1], None, 0), call(w1[1], None, 1)]);
        let mark = Place::Mark(vec![Some(MarkAt::at(20))]);
        let mut c = ctx(mark.clone());
        c.resumes = vec![Resume { reference: Ref::Crc(1), place: mark, at_us: 1 }];
        settle(&mut b, None, &mut c);
        let v: Vec<Verdict> = b.calls.iter().map(|c| c.verdict).collect();
        assert_eq!(v, [Verdict::Verify(VerifyReason::OpenAtAnchor), Verdict::InFlight]);
        // Without that, it may have been given the one before, and a pod nothing shows may
        // hold the checkpoint's state: its key is not certain.
        let mut b = body(&[(0, &w0), (1, &w1)], vec![call(w0[1], None, 0), call(w1[1], None, 1)]);
        settle(&mut b, None, &mut ctx(Place::Mark(vec![Some(MarkAt::at(20))])));
        assert!(
            matches!(b.calls[1].verdict, Verdict::Verify(VerifyReason::KeyAmbiguous | VerifyReason::KeyUnknown)),
            "{:?}",
            b.calls[1]
        );
        assert_eq!(b.calls[1].keys.idempotency_key, None);
    }

    #[test]
    fn a_call_whose_input_is_unknown_is_never_skipped() {
        let e = [at(0, 0, 0), at(0, 10, 0), at(0, 20, 0)];
        let mut known = call(e[0], Some(e[1]), 0);
        known.input_hash = Some(NULL_INPUT_HASH.into());
        let mut unknown = call(e[2], None, 0);
        unknown.input_hash = None;
        let mut b = body(&[(0, &e)], vec![known, unknown]);
        settle(&mut b, None, &mut ctx(Place::Origin));
        assert_eq!(b.calls[0].verdict, Verdict::Completed);
        assert_eq!(b.calls[1].verdict, Verdict::Verify(VerifyReason::InputUnknown));
        assert_eq!(b.calls[1].keys.idempotency_key, None);
    }
}
