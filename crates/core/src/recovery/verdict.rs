//! What the plan does with each call the pairing saw: skip it (`completed`), verify it because
//! it was open (`in_flight`), verify it because the bytes cannot settle it (`verify`), or leave
//! it to the checkpoint (`dropped`); and the key an agent sends with the call. Pure.
//!
//! Most anchors are positions: a marker, a checkpoint's high-water mark, a file's start. Every
//! event read after such an anchor is after the checkpoint, and a call's verdict follows from
//! its pairing alone. Only the fallback anchor, the checkpoint's write time, needs clocks: the
//! checkpoint's time is the database server's, the events' are the pod's. [`Window`] compares
//! them without trusting either blindly:
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

use super::keys::call_idempotency_key;
use super::pairing::{Body, Pos, Verdict, VerifyReason};

/// The most time between a line's timestamp and its write reaching the file (the shipped
/// writer stamps the envelope as it appends it).
pub const WRITE_DELAY_US: i64 = 1_000_000;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Before,
    After,
    Uncertain,
}

/// How idempotency keys are scoped: the job (or a transcript's session id) and the checkpoint
/// the agent resumed from (`crc:<its CRC>`, or `-` without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyScope {
    pub scope: String,
    pub checkpoint_ref: String,
}

/// What [`settle`] found about time, for the plan's evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeEvidence {
    pub segments: Vec<SegmentClock>,
    /// Per session: the offsets of the uncertain stretch `[from, to]`, if any.
    pub uncertain: Vec<(usize, i64, i64)>,
}

/// Gives every call its verdict, ordinal and key, and drops what lies before the checkpoint.
/// `anchors`: per session read across its anchor, the anchor's offset (events below it were
/// read only to know the calls still open there); `window`: the clock fallback.
pub fn settle(body: &mut Body, window: Option<&Window>, anchors: &[(usize, i64)], keys: &KeyScope) -> TimeEvidence {
    let (classes, evidence) = match window {
        Some(w) => classify(body, w),
        None => (Classifier::at_offsets(anchors), TimeEvidence::default()),
    };
    let class = |p: &Pos| classes.of(p);

    for c in body.calls.iter_mut() {
        let start = class(&c.start);
        let result = c.result.as_ref().map(|r| class(&r.at));
        if !c.start_seen {
            // A result without its start: the call finished; before the anchor it is the
            // checkpoint's, otherwise it is verified, never skipped.
            c.verdict = match result {
                Some(Class::Before) => Verdict::Dropped,
                _ if c.started_before => Verdict::Verify(VerifyReason::StartedBeforeAnchor),
                _ => Verdict::Verify(VerifyReason::StartLost),
            };
            continue;
        }
        c.verdict = match (start, result) {
            _ if c.group.is_some() => Verdict::Verify(VerifyReason::AmbiguousPairing),
            (Class::Before, None | Some(Class::Before)) => Verdict::Dropped,
            (Class::Before, Some(Class::After)) => Verdict::Verify(VerifyReason::StartedBeforeAnchor),
            (Class::Uncertain, _) | (_, Some(Class::Uncertain)) => Verdict::Verify(VerifyReason::UncertainTime),
            (Class::After, None) => Verdict::InFlight,
            (Class::After, Some(Class::After)) => Verdict::Completed,
            // A result stamped before its own start: the clocks disagree with the file's order.
            (Class::After, Some(Class::Before)) => Verdict::Verify(VerifyReason::UncertainTime),
        };
        // A group whose every result and start lies before the checkpoint is the checkpoint's.
        if c.group.is_some() && start == Class::Before {
            let all_before = c
                .group
                .and_then(|g| body.groups.get(g))
                .is_some_and(|g| g.results.iter().all(|r| class(&r.at) == Class::Before));
            if all_before {
                c.verdict = Verdict::Dropped;
            }
        }
    }
    // Ordinals: per writer segment (and per tool over the plan), in file order, the calls the
    // checkpoint does not cover (a call whose start is lost has no place to count from: 0).
    let mut per_segment: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut per_tool: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    body.calls.sort_by_key(|c| (c.start.session, c.start.byte_offset));
    for c in body.calls.iter_mut() {
        if c.verdict == Verdict::Dropped || !c.start_seen {
            c.tool_ordinal = 0;
            continue;
        }
        let n = per_segment.entry(c.segment).or_insert(0);
        *n += 1;
        c.call_ordinal = *n;
        let t = per_tool.entry(c.tool_name.clone().unwrap_or_default()).or_insert(0);
        *t += 1;
        c.tool_ordinal = *t;
        c.idempotency_key = call_idempotency_key(
            &keys.scope,
            &keys.checkpoint_ref,
            c.call_ordinal,
            c.tool_name.as_deref().unwrap_or(""),
            c.input_hash.as_deref().unwrap_or(super::keys::NULL_INPUT_HASH),
        );
    }
    if classes.active {
        body.events.retain(|e| class(&e.at) != Class::Before);
        body.gaps.retain(|g| class(&g.at) != Class::Before);
        body.anomalies.retain(|a| class(&a.at) != Class::Before);
    }
    evidence
}

/// Per session, the offsets that bound the uncertain stretch.
#[derive(Debug, Default)]
struct Classifier {
    /// Per session: (last certain-before offset, first certain-after offset).
    bounds: Vec<(Option<i64>, Option<i64>)>,
    active: bool,
    /// Sessions without bounds: every event after the anchor (positions), or uncertain (clocks).
    unbounded_after: bool,
}

impl Classifier {
    /// Positions: below a session's anchor, before; at or after it, after.
    fn at_offsets(anchors: &[(usize, i64)]) -> Classifier {
        let mut bounds = Vec::new();
        for &(session, at) in anchors.iter().filter(|(_, at)| *at > 0) {
            if bounds.len() <= session {
                bounds.resize(session + 1, (None, None));
            }
            if let Some(b) = bounds.get_mut(session) {
                *b = (Some(at - 1), Some(at));
            }
        }
        Classifier { active: !bounds.is_empty(), bounds, unbounded_after: true }
    }

    fn of(&self, p: &Pos) -> Class {
        if !self.active {
            return Class::After;
        }
        let (b, a) = self.bounds.get(p.session).copied().unwrap_or((None, None));
        if self.unbounded_after && b.is_none() && a.is_none() {
            return Class::After;
        }
        let o = p.byte_offset;
        let before = b.is_some_and(|b| o <= b) && a.is_none_or(|a| o < a);
        let after = a.is_some_and(|a| o >= a) && b.is_none_or(|b| o > b);
        match (before, after) {
            (true, _) => Class::Before,
            (_, true) => Class::After,
            _ => Class::Uncertain,
        }
    }
}

fn classify(body: &Body, w: &Window) -> (Classifier, TimeEvidence) {
    let segments = segment_clocks(body, w);
    let clock_of = |seg: u32| segments.iter().find(|s| s.segment == seg);
    let sessions = body.events.iter().map(|e| e.at.session + 1).max().unwrap_or(0);
    let mut bounds: Vec<(Option<i64>, Option<i64>)> = vec![(None, None); sessions];
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
    let classifier = Classifier { bounds, active: true, unbounded_after: false };
    let mut uncertain = Vec::new();
    for (session, _) in classifier.bounds.iter().enumerate() {
        let offsets: Vec<i64> = body
            .events
            .iter()
            .filter(|e| e.at.session == session && classifier.of(&e.at) == Class::Uncertain)
            .map(|e| e.at.byte_offset)
            .collect();
        if let (Some(&from), Some(&to)) = (offsets.first(), offsets.last()) {
            uncertain.push((session, from, to));
        }
    }
    (classifier, TimeEvidence { segments, uncertain })
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
    use super::super::pairing::{Call, CallResult, EventRef};
    use super::*;

    const S: i64 = 1_000_000;

    fn at(session: usize, off: i64, ts: i64) -> Pos {
        Pos { session, byte_offset: off, line_no: 0, seq: None, ts_us: Some(ts) }
    }

    fn call(start: Pos, result: Option<Pos>, segment: u32) -> Call {
        Call {
            key: format!("k{}", start.byte_offset),
            key_is_id: false,
            tool_name: Some("send_email".into()),
            start,
            input_hash: None,
            input: None,
            tool_ordinal: 1,
            segment,
            result: result.map(|at| CallResult { at, success: Some(true), result: None, paired_by_order: true }),
            start_seen: true,
            started_before: false,
            group: None,
            call_ordinal: 0,
            idempotency_key: String::new(),
            verdict: Verdict::InFlight,
        }
    }

    fn body(events: &[Pos], calls: Vec<Call>) -> Body {
        Body {
            calls,
            events: events.iter().map(|p| EventRef { at: *p, event_type: None, segment: 0 }).collect(),
            ..Body::default()
        }
    }

    fn scope() -> KeyScope {
        KeyScope { scope: "job".into(), checkpoint_ref: "crc:1".into() }
    }

    /// A pod whose clock is `skew` ahead of the server writes a call finished 30 s before the
    /// checkpoint, one 0.3 s before, one 0.3 s after and one 30 s after; the file's mtime is
    /// the last line's server time.
    fn pod(skew: i64, measured: bool) -> Vec<(Verdict, u32)> {
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
        let mut b = body(&events, calls);
        let w = Window {
            at_us: cp,
            skew_us: 5 * S,
            clocks: vec![FileClock { mtime_us: measured.then_some(server[3]), ..FileClock::default() }],
        };
        settle(&mut b, Some(&w), &[], &scope());
        b.calls.iter().map(|c| (c.verdict, c.call_ordinal)).collect()
    }

    #[test]
    fn a_measured_clock_settles_all_but_the_calls_next_to_the_checkpoint() {
        for skew in [-60, -10, -3, 0, 3, 10, 60] {
            let v: Vec<Verdict> = pod(skew * S, true).into_iter().map(|(v, _)| v).collect();
            // The mtime bounds the offset from above, so "before" is certain whenever the
            // latest possible server time is; "after" needs the write delay taken off.
            assert_eq!(
                v,
                [Verdict::Dropped, Verdict::Dropped, Verdict::Verify(VerifyReason::UncertainTime), Verdict::Completed],
                "skew {skew} s"
            );
        }
    }

    #[test]
    fn an_unmeasured_clock_within_the_allowance_never_skips_or_drops_wrongly() {
        for skew in [-5, -3, 0, 3, 5] {
            let v: Vec<Verdict> = pod(skew * S, false).into_iter().map(|(v, _)| v).collect();
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
        let mut b = body(&events, vec![call(events[1], Some(events[2]), 0)]);
        let w = Window { at_us: cp, skew_us: 5 * S, clocks: vec![FileClock::default()] };
        let e = settle(&mut b, Some(&w), &[], &scope());
        assert_eq!(b.calls[0].verdict, Verdict::Verify(VerifyReason::UncertainTime));
        assert_eq!(e.uncertain, [(0, 10, 10)]);
        assert_eq!(b.events.len(), 2, "the event before the checkpoint is dropped");
    }

    #[test]
    fn ordinals_count_per_writer_and_keys_follow_them() {
        let events = [at(0, 0, 0), at(0, 10, 0), at(0, 20, 0)];
        let mut b = body(&events, vec![call(events[0], None, 0), call(events[1], None, 0), call(events[2], None, 1)]);
        settle(&mut b, None, &[], &scope());
        let ord: Vec<u32> = b.calls.iter().map(|c| c.call_ordinal).collect();
        assert_eq!(ord, [1, 2, 1]);
        assert_eq!(b.calls[0].idempotency_key, b.calls[2].idempotency_key, "same ordinal, tool and input");
        assert_ne!(b.calls[0].idempotency_key, b.calls[1].idempotency_key);
    }
}
