//! The key each call was sent with, on small lives whose truth is written out: one writer, a
//! second crash in one step, a checkpoint the control plane stores during a call, one the pod
//! stores itself, one stored while nobody wrote.

use super::super::keys::call_idempotency_key;
use super::super::pairing::{Body, Call, CallResult, EventRef, Pos, Verdict};
use super::super::verdict::settle;
use super::*;

/// A life written line by line: each writer a segment, each line an event.
#[derive(Default)]
struct Life {
    body: Body,
    offset: i64,
    segment: Option<u32>,
}

impl Life {
    /// The next writer starts.
    fn writer(&mut self) {
        self.segment = Some(self.segment.map_or(0, |s| s + 1));
    }

    fn line(&mut self) -> Pos {
        let seg = self.segment.unwrap_or(0);
        let line_no = self.body.events.len() as i64 + 1;
        let at = Pos { session: 0, byte_offset: self.offset, line_no, seq: Some(0), ts_us: None };
        // Only a writer's first line has seq 0: that is how a writer start is told.
        let first = !self.body.segments.iter().any(|s| s.segment == seg);
        let at = Pos { seq: Some(if first { 0 } else { 1 }), ..at };
        self.offset += 10;
        self.body.events.push(EventRef { at, event_type: None, segment: seg });
        match self.body.segments.last_mut() {
            Some(s) if s.segment == seg => s.last = at,
            _ => self.body.segments.push(SegmentSpan {
                segment: seg,
                session: 0,
                first: at,
                last: at,
                after_reset: seg > 0,
            }),
        }
        at
    }

    /// A call of `tool` with input `input` starts; returns its index.
    fn call(&mut self, tool: &str, input: &str) -> usize {
        let at = self.line();
        self.body.calls.push(Call {
            key: format!("k{}", at.byte_offset),
            key_is_id: false,
            tool_name: Some(tool.into()),
            start: at,
            input_hash: Some(input.into()),
            input: None,
            written_key: None,
            tool_ordinal: 0,
            segment: self.segment.unwrap_or(0),
            result: None,
            start_seen: true,
            started_before: false,
            group: None,
            verdict: Verdict::InFlight,
            keys: CallKeys::default(),
        });
        self.body.calls.len() - 1
    }

    fn result(&mut self, call: usize) {
        let at = self.line();
        if let Some(c) = self.body.calls.get_mut(call) {
            c.result = Some(CallResult { at, success: Some(true), result: None, paired_by_order: true });
        }
    }

    /// The file's size now, as a high-water mark would see it.
    fn mark(&self) -> Place {
        Place::Mark(vec![Some(MarkAt::at(self.offset))])
    }

    fn start_of(&self, call: usize) -> i64 {
        self.body.calls.get(call).map_or(-1, |c| c.start.byte_offset)
    }
}

const JOB: &str = "job";

fn key(reference: &str, ordinal: u32, tool: &str, input: &str) -> String {
    call_idempotency_key(JOB, reference, ordinal, tool, input)
}

/// Settles `life` for the plan's checkpoint `stores[plan]`.
fn plan(life: Life, stores: Vec<Store>, plan: usize) -> Body {
    plan_resumed(life, stores, plan, Vec::new())
}

/// [`plan`], with the pods' recorded resumes.
fn plan_resumed(mut life: Life, stores: Vec<Store>, plan: usize, resumes: Vec<Resume>) -> Body {
    let mut ctx = KeyContext {
        resumes,
        scope: JOB.into(),
        stores,
        plan_store: Some(plan),
        origin_known: true,
        read_from: vec![0],
        last_lines: vec![life.body.events.len() as i64],
        ..KeyContext::default()
    };
    settle(&mut life.body, None, &mut ctx);
    life.body
}

fn origin() -> Store {
    Store { reference: Ref::None, own: false, place: Place::Origin, at_us: 0 }
}

fn by_start(body: &Body, offset: i64) -> &Call {
    body.calls.iter().find(|c| c.start.byte_offset == offset).unwrap_or_else(|| panic!("no call at {offset}"))
}

#[test]
fn one_writer_counts_calls_of_the_same_tool_and_input() {
    let mut l = Life::default();
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let b = l.call("send", "y");
    l.result(b);
    let a2 = l.call("read", "x");
    let (sa, sb, sa2) = (l.start_of(a), l.start_of(b), l.start_of(a2));
    let body = plan(l, vec![origin()], 0);
    let k = |o| by_start(&body, o).keys.clone();
    assert_eq!((k(sa).replay_ordinal, k(sa).idempotency_key), (Some(1), Some(key("-", 1, "read", "x"))));
    assert_eq!((k(sb).replay_ordinal, k(sb).idempotency_key), (Some(1), Some(key("-", 1, "send", "y"))));
    assert_eq!((k(sa2).replay_ordinal, k(sa2).idempotency_key), (Some(2), Some(key("-", 2, "read", "x"))));
    assert!(body.calls.iter().all(|c| c.keys.status == KeyStatus::Derived));
}

#[test]
fn a_second_crash_in_one_step_leaves_only_the_repeat_ambiguous() {
    // Pod 1 resumes from C (stored before it wrote), finishes A, dies with B open. Pod 2
    // resumes from C too: skips A (writes nothing), checks B and runs it again (writes B),
    // starts D and dies. The plan cannot tell pod 2's B from a new B; D is certain.
    let mut l = Life::default();
    let c = Store { reference: Ref::Crc(5), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    // Each pod's recovery_plan recorded that it resumed from C.
    let mut resumes = vec![Resume { reference: Ref::Crc(5), place: Place::Mark(vec![None]), at_us: 1 }];
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let b = l.call("charge", "42");
    resumes.push(Resume { reference: Ref::Crc(5), place: l.mark(), at_us: 2 });
    l.writer();
    let b2 = l.call("charge", "42");
    l.result(b2);
    let d = l.call("email", "z");
    let (sa, sb, sb2, sd) = (l.start_of(a), l.start_of(b), l.start_of(b2), l.start_of(d));
    let body = plan_resumed(l, vec![origin(), c], 1, resumes);
    let k = |o| by_start(&body, o).keys.clone();
    assert_eq!(k(sa).idempotency_key, Some(key("crc:5", 1, "read", "x")));
    assert_eq!(k(sb).idempotency_key, Some(key("crc:5", 1, "charge", "42")));
    let repeat = k(sb2);
    assert_eq!((repeat.status, repeat.idempotency_key, repeat.replay_ordinal), (KeyStatus::Ambiguous, None, None));
    let pairs: Vec<(Option<u32>, String)> =
        repeat.candidates.iter().map(|c| (c.replay_ordinal, c.idempotency_key.clone())).collect();
    assert_eq!(pairs, [(Some(1), key("crc:5", 1, "charge", "42")), (Some(2), key("crc:5", 2, "charge", "42"))]);
    assert_eq!(k(sd).idempotency_key, Some(key("crc:5", 1, "email", "z")));
    assert_eq!(k(sd).replay_ordinal, Some(1));
    // The repeat finished, but which call it was is not known: it is verified, not skipped.
    assert_eq!(by_start(&body, sb2).verdict, Verdict::Verify(super::super::pairing::VerifyReason::KeyAmbiguous));
}

#[test]
fn a_checkpoint_the_control_plane_stores_during_a_call_keeps_the_pods_key() {
    // The pod resumed from C1; the control plane stores C2 while B is open (and C3 during it
    // too); B finishes after. B was sent with C1's key, and so is the pod's next call.
    let mut l = Life::default();
    let c1 = Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let b = l.call("charge", "42");
    let c2 = Store { reference: Ref::Crc(2), own: false, place: l.mark(), at_us: 0 };
    l.line();
    let c3 = Store { reference: Ref::Crc(3), own: false, place: l.mark(), at_us: 0 };
    l.result(b);
    let n = l.call("read", "x");
    let (sa, sb, sn) = (l.start_of(a), l.start_of(b), l.start_of(n));
    // The pod's recovery_plan recorded that it resumed from C1.
    let resumed = vec![Resume { reference: Ref::Crc(1), place: Place::Mark(vec![None]), at_us: 1 }];
    let body = plan_resumed(l, vec![origin(), c1, c2, c3], 3, resumed);
    let call_b = by_start(&body, sb);
    assert_eq!(call_b.verdict, Verdict::Verify(super::super::pairing::VerifyReason::StartedBeforeAnchor));
    assert_eq!(call_b.keys.idempotency_key, Some(key("crc:1", 1, "charge", "42")));
    assert_eq!(call_b.keys.checkpoint_ref.as_deref(), Some("crc:1"));
    // In the replay from C3, B is the first charge.
    assert_eq!(call_b.keys.replay_ordinal, Some(1));
    // The next read(x) is the pod's second under C1. In the replay from C3 it is the first, or
    // the second: C3's state, reported by the pod and stored by the control plane, may have
    // been reported before A finished.
    let next = by_start(&body, sn);
    assert_eq!(
        (next.keys.idempotency_key.clone(), next.keys.replay_ordinal),
        (Some(key("crc:1", 2, "read", "x")), None)
    );
    let places: BTreeSet<Option<u32>> = next.keys.candidates.iter().map(|k| k.replay_ordinal).collect();
    assert_eq!(places, [Some(1), Some(2)].into());
    // A finished before C3 was stored, but C3 may not hold it: verified, not dropped.
    assert_eq!(by_start(&body, sa).verdict, Verdict::Verify(super::super::pairing::VerifyReason::FinishedBeforeAnchor));
}

#[test]
fn a_checkpoint_the_pod_stores_itself_starts_its_count_again() {
    let mut l = Life::default();
    let c1 = Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let c2 = Store { reference: Ref::Crc(2), own: true, place: l.mark(), at_us: 0 };
    let b = l.call("read", "x");
    let sb = l.start_of(b);
    let body = plan(l, vec![origin(), c1, c2], 2);
    let call_b = by_start(&body, sb);
    assert_eq!(call_b.keys.idempotency_key, Some(key("crc:2", 1, "read", "x")));
    assert_eq!(call_b.verdict, Verdict::InFlight);
}

#[test]
fn a_checkpoint_the_pod_stored_placed_only_by_the_clocks_names_both_keys_where_they_cannot_tell() {
    // The pod stored C2 itself, but its mark saw no files (the database could not see the
    // job's directory): the clocks place it after call a's result, with call b's start in the
    // stretch they cannot order, and call c surely after.
    let mut l = Life::default();
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let before = l.offset - 10;
    let b = l.call("read", "x");
    let c = l.call("send", "y");
    let (sb, sc) = (l.start_of(b), l.start_of(c));
    let c2 = Store { reference: Ref::Crc(2), own: true, place: Place::Time(vec![(Some(before), Some(sc))]), at_us: 0 };
    let body = plan(l, vec![origin(), c2], 1);
    let call_c = by_start(&body, sc);
    assert_eq!(call_c.keys.idempotency_key, Some(key("crc:2", 1, "send", "y")));
    let call_b = by_start(&body, sb);
    assert_eq!(call_b.keys.status, KeyStatus::Ambiguous);
    let keys: BTreeSet<&str> = call_b.keys.candidates.iter().map(|k| k.idempotency_key.as_str()).collect();
    // Under the origin it is the second read of x; under C2, the first.
    assert!(keys.contains(key("-", 2, "read", "x").as_str()), "{:?}", call_b.keys);
    assert!(keys.contains(key("crc:2", 1, "read", "x").as_str()), "{:?}", call_b.keys);
}

#[test]
fn a_checkpoint_stored_while_nobody_wrote_leaves_the_next_writers_checkpoint_open() {
    // Pod 1 resumed from C1 and died; pod 2 made its plan (given C1); the control plane stored
    // C2 after pod 1's last line and before pod 2's first: pod 2 had its plan already, or the
    // resume recorded was another pod's and pod 2 read C2. The bytes cannot say.
    let mut l = Life::default();
    let c1 = Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    let mut resumes = vec![Resume { reference: Ref::Crc(1), place: Place::Mark(vec![None]), at_us: 1 }];
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    resumes.push(Resume { reference: Ref::Crc(1), place: l.mark(), at_us: 3 });
    let c2 = Store { reference: Ref::Crc(2), own: false, place: l.mark(), at_us: 5 };
    l.writer();
    let b = l.call("send", "y");
    let sb = l.start_of(b);
    let body = plan_resumed(l, vec![origin(), c1, c2], 2, resumes);
    let k = &by_start(&body, sb).keys;
    assert_eq!(k.status, KeyStatus::Ambiguous);
    let keys: BTreeSet<&str> = k.candidates.iter().map(|c| c.idempotency_key.as_str()).collect();
    assert!(
        keys.contains(key("crc:1", 1, "send", "y").as_str()) && keys.contains(key("crc:2", 1, "send", "y").as_str()),
        "{:?}",
        k.candidates
    );
    // Had pod 1 stored C2 itself (write_checkpoint) before it died, pod 2, which planned after,
    // was given it: its calls are surely under it.
    let mut l = Life::default();
    let c1 = Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    let mut resumes = vec![Resume { reference: Ref::Crc(1), place: Place::Mark(vec![None]), at_us: 1 }];
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let c2 = Store { reference: Ref::Crc(2), own: true, place: l.mark(), at_us: 5 };
    resumes.push(Resume { reference: Ref::Crc(2), place: l.mark(), at_us: 6 });
    l.writer();
    let b = l.call("send", "y");
    let sb = l.start_of(b);
    let body = plan_resumed(l, vec![origin(), c1, c2], 2, resumes);
    assert_eq!(by_start(&body, sb).keys.idempotency_key, Some(key("crc:2", 1, "send", "y")));
    // Where pods plan without a job token (pod 2's plan is not recorded), a pod nothing shows
    // may hold the checkpoint's state: the replay from C2 cannot be counted.
    let mut l = Life::default();
    let c1 = Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    let resumes = vec![Resume { reference: Ref::Crc(1), place: Place::Mark(vec![None]), at_us: 1 }];
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let c2 = Store { reference: Ref::Crc(2), own: false, place: l.mark(), at_us: 5 };
    l.writer();
    let b = l.call("send", "y");
    let sb = l.start_of(b);
    let body = plan_resumed(l, vec![origin(), c1, c2], 2, resumes);
    let k = &by_start(&body, sb).keys;
    assert_eq!(k.replay_ordinal, None, "{k:?}");
    assert_ne!(by_start(&body, sb).verdict, Verdict::Completed);
}

#[test]
fn a_call_of_unknown_input_widens_the_places_after_it() {
    let mut l = Life::default();
    l.writer();
    let u = l.call("read", "?");
    if let Some(c) = l.body.calls.get_mut(u) {
        c.input_hash = None;
    }
    let a = l.call("read", "x");
    let sa = l.start_of(a);
    let body = plan(l, vec![origin()], 0);
    let k = &by_start(&body, sa).keys;
    // The unknown call may have been read(x): this one is the first or the second.
    assert_eq!(k.status, KeyStatus::Ambiguous);
    let ordinals: Vec<Option<u32>> = k.candidates.iter().map(|c| c.replay_ordinal).collect();
    assert_eq!(ordinals, [Some(1), Some(2)]);
}

#[test]
fn a_writer_that_did_not_start_at_sequence_zero_is_not_placed() {
    let mut l = Life::default();
    l.writer();
    let a = l.call("read", "x");
    let sa = l.start_of(a);
    if let Some(s) = l.body.segments.first_mut() {
        s.first.seq = Some(7);
    }
    let body = plan(
        l,
        vec![origin(), Store { reference: Ref::Crc(1), own: false, place: Place::Mark(vec![None]), at_us: 0 }],
        1,
    );
    let c = by_start(&body, sa);
    assert_eq!(c.keys.status, KeyStatus::Unknown);
    assert_eq!(c.verdict, Verdict::Verify(super::super::pairing::VerifyReason::KeyUnknown));
}

#[test]
fn a_checkpoint_stored_between_a_pods_plan_and_its_first_line_leaves_its_key_open() {
    // The control plane stores C as the pod starts: after the pod's recovery_plan (which gave
    // it none) or before it, the bytes cannot tell; nor can a resume record that may be
    // another pod's. Both keys are candidates.
    let build = |resumes: Vec<Resume>| {
        let mut l = Life::default();
        let c = Store { reference: Ref::Crc(3), own: false, place: Place::Mark(vec![None]), at_us: 5 };
        l.writer();
        let a = l.call("send", "y");
        let sa = l.start_of(a);
        let body = plan_resumed(l, vec![origin(), c], 1, resumes);
        let keys: BTreeSet<String> =
            by_start(&body, sa).keys.candidates.iter().map(|k| k.idempotency_key.clone()).collect();
        keys
    };
    let both: BTreeSet<String> = [key("-", 1, "send", "y"), key("crc:3", 1, "send", "y")].into();
    assert_eq!(build(Vec::new()), both, "no resume recorded");
    let before = Resume { reference: Ref::None, place: Place::Mark(vec![None]), at_us: 1 };
    assert_eq!(build(vec![before]), both, "a resume recorded before C");
    // Recorded after C was stored: the pod was given C.
    let after = Resume { reference: Ref::Crc(3), place: Place::Mark(vec![None]), at_us: 9 };
    let mut l = Life::default();
    let c = Store { reference: Ref::Crc(3), own: false, place: Place::Mark(vec![None]), at_us: 5 };
    l.writer();
    let a = l.call("send", "y");
    let sa = l.start_of(a);
    let body = plan_resumed(l, vec![origin(), c], 1, vec![after]);
    assert_eq!(by_start(&body, sa).keys.idempotency_key, Some(key("crc:3", 1, "send", "y")));
}

#[test]
fn a_key_the_pod_wrote_settles_which_call_a_repeat_was() {
    // a_second_crash_in_one_step_leaves_only_the_repeat_ambiguous, with the keys written: pod 2
    // wrote its repeat of B with the key of the second charge, so the plan knows it was that
    // one (and it finished: skipped, not verified); D's written key is what its pod numbered
    // its own way, reported as written, in the place the bytes give.
    let mut l = Life::default();
    let c = Store { reference: Ref::Crc(5), own: false, place: Place::Mark(vec![None]), at_us: 0 };
    let mut resumes = vec![Resume { reference: Ref::Crc(5), place: Place::Mark(vec![None]), at_us: 1 }];
    l.writer();
    let a = l.call("read", "x");
    l.result(a);
    let b = l.call("charge", "42");
    resumes.push(Resume { reference: Ref::Crc(5), place: l.mark(), at_us: 2 });
    l.writer();
    let b2 = l.call("charge", "42");
    l.result(b2);
    let d = l.call("email", "z");
    let own = "ab".repeat(32);
    let second = key("crc:5", 2, "charge", "42");
    for (i, k) in [(b2, second.clone()), (d, own.clone())] {
        if let Some(call) = l.body.calls.get_mut(i) {
            call.written_key = Some(k);
        }
    }
    let (sb, sb2, sd) = (l.start_of(b), l.start_of(b2), l.start_of(d));
    let body = plan_resumed(l, vec![origin(), c], 1, resumes);
    let repeat = &by_start(&body, sb2).keys;
    assert_eq!(
        (repeat.status, repeat.idempotency_key.as_deref(), repeat.replay_ordinal, repeat.call_ordinal),
        (KeyStatus::Written, Some(second.as_str()), Some(2), Some(2))
    );
    assert!(repeat.candidates.is_empty());
    assert_eq!(by_start(&body, sb2).verdict, Verdict::Completed);
    let own_key = &by_start(&body, sd).keys;
    assert_eq!(
        (own_key.status, own_key.idempotency_key.as_deref(), own_key.replay_ordinal, own_key.call_ordinal),
        (KeyStatus::Written, Some(own.as_str()), Some(1), None)
    );
    // B wrote no key: derived, as before.
    assert_eq!(by_start(&body, sb).keys.status, KeyStatus::Derived);
}

#[test]
fn a_written_key_on_calls_of_different_inputs_is_ignored() {
    // A pod that wrote one key for two different calls named neither: both keys are derived.
    let mut l = Life::default();
    l.writer();
    let a = l.call("charge", "1");
    l.result(a);
    let b = l.call("charge", "2");
    let shared = "cd".repeat(32);
    for i in [a, b] {
        if let Some(call) = l.body.calls.get_mut(i) {
            call.written_key = Some(shared.clone());
        }
    }
    let (sa, sb) = (l.start_of(a), l.start_of(b));
    let body = plan(l, vec![origin()], 0);
    for (s, input) in [(sa, "1"), (sb, "2")] {
        let k = &by_start(&body, s).keys;
        assert_eq!((k.status, k.idempotency_key.clone()), (KeyStatus::Derived, Some(key("-", 1, "charge", input))));
    }
}
