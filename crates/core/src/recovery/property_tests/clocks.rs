//! The recovery plan against the truth, on random lives of a job written the shipped writer's
//! way: pods (writers) that append to one file from sequence 0, each with its own clock; tool
//! calls that overlap and finish in any order; a checkpoint at a random instant; crashes that
//! cut a line, whose bytes swallow the next writer's first line; a last writer killed
//! mid-append. The plan is built as the shell builds it (`choose`, `Pairing`, `settle`), once
//! anchored on the checkpoint's high-water mark and once on its write time (the clock
//! fallback, with the file's mtime as the only evidence), and must:
//!
//! - never skip a call that did not start and finish after the anchor;
//! - never drop a call whose result is in the file after the anchor (it is skipped or verified);
//! - never omit a call started after the anchor whose result is not in the file (in flight or
//!   verified).
//!
//! The pods other than the last keep their clocks within `recovery_clock_skew` of the server's
//! (the documented assumption where nothing measures them); the last one's may be off by a
//! minute, since the mtime measures it.

use std::collections::BTreeMap;

use super::super::choose::tests::{file, Mem, MemEvent};
use super::super::choose::{choose, Expectation, PlanMark};
use super::super::cycles::{KeyContext, MarkAt, Place, Ref, Store};
use super::super::line::Row;
use super::super::marks::Resolved;
use super::super::pairing::{Body, Pairing, SessionRef, Verdict};
use super::super::verdict::{settle, FileClock, Window};
use crate::indexer::dialect::Dialect;

const S: i64 = 1_000_000;
const SKEW: i64 = 5 * S;
const LINE: i64 = 100;

use super::Rng;

/// One line of the file: an event, or the bytes of a cut line.
#[derive(Clone)]
struct Line {
    offset: i64,
    /// `(type, seq, pod ts, payload, tool)`; `None` for a corrupt (cut) line.
    event: Option<(&'static str, i64, i64, String, String)>,
}

/// A tool call as it really happened.
#[derive(Clone, Debug, Default)]
struct Truth {
    tool: String,
    start_offset: Option<i64>,
    start_us: i64,
    result_offset: Option<i64>,
    result_us: Option<i64>,
}

struct Life {
    lines: Vec<Line>,
    calls: Vec<Truth>,
    checkpoint_us: i64,
    mark_size: i64,
    mtime_us: i64,
    /// The file ends with a line a crash cut (no newline), and the timestamp it holds.
    tail: Option<Option<i64>>,
}

fn live(rng: &mut Rng) -> Life {
    let tools = ["send_email", "charge_card", "read_file"];
    let pods = 1 + rng.below(4);
    let checkpoint_after = rng.below(pods * 8);
    let mut life =
        Life { lines: Vec::new(), calls: Vec::new(), checkpoint_us: 0, mark_size: 0, mtime_us: 0, tail: None };
    let mut now = 1_000_000 * S;
    let mut offset = 0i64;
    let mut step = 0u64;
    let mut swallow_next = false;
    for pod in 0..pods {
        let last = pod + 1 == pods;
        let skew =
            if last { rng.below(120 * S as u64) as i64 - 60 * S } else { rng.below(2 * SKEW as u64) as i64 - SKEW };
        let mut open: Vec<usize> = Vec::new();
        for seq in 0..(2 + rng.below(10)) as i64 {
            now += rng.below(3 * S as u64) as i64;
            if step == checkpoint_after && life.checkpoint_us == 0 {
                life.checkpoint_us = now;
                life.mark_size = offset;
                now += rng.below(2 * S as u64) as i64;
            }
            step += 1;
            let ts = now + skew;
            // What the pod writes next: a call, a result, or some text.
            let (kind, call) = match rng.below(3) {
                0 if !open.is_empty() => {
                    let i = open.remove(rng.below(open.len() as u64) as usize);
                    ("TOOL_RESULT", Some(i))
                }
                1 => {
                    let tool = tools[rng.below(3) as usize].to_owned();
                    life.calls.push(Truth { tool, start_us: now, ..Truth::default() });
                    open.push(life.calls.len() - 1);
                    ("TOOL_CALL", Some(life.calls.len() - 1))
                }
                _ => ("LLM_RESPONSE", None),
            };
            let payload = match (kind, call.and_then(|i| life.calls.get(i))) {
                ("TOOL_CALL", Some(c)) => {
                    format!(
                        r#"{{"type":"TOOL_CALL","sequence":{seq},"data":{{"toolName":"{}","toolInput":{{"n":{}}}}}}}"#,
                        c.tool,
                        call.unwrap_or(0)
                    )
                }
                ("TOOL_RESULT", Some(c)) => {
                    format!(
                        r#"{{"type":"TOOL_RESULT","sequence":{seq},"data":{{"toolName":"{}","output":"r{}"}}}}"#,
                        c.tool,
                        call.unwrap_or(0)
                    )
                }
                _ => format!(r#"{{"type":"LLM_RESPONSE","sequence":{seq},"data":{{"type":"text","content":"t"}}}}"#),
            };
            let tool = call.and_then(|i| life.calls.get(i)).map(|c| c.tool.clone()).unwrap_or_default();
            // A crash cut the previous writer's last line: this writer's first line is on the
            // same line, after the cut; the indexer takes it from there. Now and then a line is
            // lost outright (a power cut before it reached the disk): a seq gap.
            let at = if std::mem::take(&mut swallow_next) { offset - LINE + 30 } else { offset };
            let lost = rng.chance(4);
            if let Some(c) = call.and_then(|i| life.calls.get_mut(i)) {
                if kind == "TOOL_CALL" {
                    c.start_offset = (!lost).then_some(at);
                } else {
                    c.result_offset = (!lost).then_some(at);
                    c.result_us = Some(now);
                }
            }
            if !lost {
                life.lines.push(Line { offset: at, event: Some((kind, seq, ts, payload, tool)) });
                if at == offset {
                    offset += LINE;
                }
                // A line lost before it reached the disk took its mtime update with it.
                life.mtime_us = now;
            }
        }
        // The pod dies: a clean exit, or killed mid-append of a line it never finishes.
        if rng.chance(50) {
            now += rng.below(2 * S as u64) as i64;
            life.mtime_us = now;
            if last {
                life.tail = Some(rng.chance(50).then_some(now + skew));
            } else {
                life.lines.push(Line { offset, event: None });
                offset += LINE;
                swallow_next = true;
            }
        }
    }
    if life.checkpoint_us == 0 {
        life.checkpoint_us = now + S;
        life.mark_size = offset;
    }
    life
}

/// The plan's verdicts by call: `(start offset or None, result offsets, verdict)`.
fn plan(life: &Life, by_mark: bool) -> Body {
    let mut f = file(0, Dialect::CortexPlane);
    let end = life.lines.last().map_or(0, |l| l.offset - l.offset % LINE + LINE);
    f.size_bytes = end + i64::from(life.tail.is_some()) * 30;
    f.indexed_offset = end;
    f.tail_pending = life.tail.is_some();
    f.mtime_us = Some(life.mtime_us);
    f.last_ts_us = life.lines.iter().rev().find_map(|l| l.event.as_ref().map(|e| e.2));
    let mem_events: Vec<MemEvent> =
        life.lines.iter().filter_map(|l| l.event.as_ref().map(|e| (l.offset, e.0, None, e.2))).collect();
    let mut mem = Mem { events: vec![mem_events] };
    let e = Expectation {
        match_checkpoint: true,
        expected_id: Some("c".into()),
        has_checkpoint: true,
        checkpoint_time_us: Some(life.checkpoint_us),
        clock_skew_us: SKEW,
        mark: by_mark.then(|| PlanMark {
            recorded_at_us: life.checkpoint_us,
            files_marked: 1,
            resolved: Resolved { at: vec![Some(MarkAt::at(life.mark_size))], ..Resolved::default() },
        }),
        read_margin_us: SKEW.max(f.mtime_us.unwrap_or(0) - f.last_ts_us.unwrap_or(0)) + S,
    };
    let files = [f];
    let choice = choose(&files, &e, &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
    let mut p = Pairing::new(
        vec![SessionRef { dialect: Dialect::CortexPlane, rel_path: "session-001.jsonl".into() }],
        100,
        false,
    );
    for read in &choice.reads {
        p.begin(read.session, read.baseline);
        for l in life.lines.iter().filter(|l| l.offset >= read.from_offset) {
            let Some((t, seq, ts, payload, tool)) = &l.event else { continue };
            p.feed(&Row {
                session: 0,
                byte_offset: l.offset,
                line_no: l.offset / LINE + 1,
                event_type: Some(t),
                ts_us: Some(*ts),
                seq: Some(*seq),
                tool_name: (!tool.is_empty()).then_some(tool.as_str()),
                payload: Some(payload),
                ..Row::default()
            });
        }
    }
    let mut body = p.finish(|_: &str| Ok::<bool, ()>(false)).unwrap_or_default();
    let window = choice.window.map(|w| Window {
        at_us: w.at_us,
        skew_us: w.skew_us,
        clocks: vec![FileClock {
            mtime_us: Some(life.mtime_us),
            tail_pending: life.tail.is_some(),
            tail_ts_us: life.tail.flatten(),
        }],
    });
    let mut ctx = KeyContext {
        scope: "job".into(),
        stores: vec![
            Store { reference: Ref::None, own: false, place: Place::Origin, at_us: 0 },
            Store { reference: Ref::Crc(1), own: false, place: choice.place.clone(), at_us: 0 },
        ],
        plan_store: Some(1),
        origin_known: true,
        read_from: choice.reads.iter().map(|r| r.from_offset).collect(),
        ..KeyContext::default()
    };
    settle(&mut body, window.as_ref(), &mut ctx);
    body
}

fn check(life: &Life, by_mark: bool, seed: u64) {
    let body = plan(life, by_mark);
    let after_offset = |o: i64| o >= life.mark_size;
    let after = |which: (Option<i64>, i64)| match which {
        (Some(o), _) if by_mark => after_offset(o),
        (_, us) => us > life.checkpoint_us,
    };
    let by_start: BTreeMap<i64, &Truth> = life.calls.iter().filter_map(|c| c.start_offset.map(|o| (o, c))).collect();
    let ctx = || {
        let lines: Vec<String> = life
            .lines
            .iter()
            .map(|l| match &l.event {
                Some((t, seq, ts, _, tool)) => format!("{}:{t}/{tool}/seq{seq}/ts{}", l.offset, ts / 1000),
                None => format!("{}:CUT", l.offset),
            })
            .collect();
        let plan: Vec<String> = body
            .calls
            .iter()
            .map(|c| {
                format!("{}:{:?}:{:?}", c.start.byte_offset, c.verdict, c.result.as_ref().map(|r| r.at.byte_offset))
            })
            .collect();
        format!(
            "seed {seed}, {} anchor (mark {}, checkpoint {} ms)\n  file {lines:?}\n  plan {plan:?}",
            if by_mark { "high-water mark" } else { "time" },
            life.mark_size,
            life.checkpoint_us / 1000
        )
    };
    for c in body.calls.iter().filter(|c| c.verdict == Verdict::Completed) {
        let truth = by_start.get(&c.start.byte_offset).unwrap_or_else(|| panic!("{}: a skip with no call", ctx()));
        let finished = truth.result_offset.zip(truth.result_us);
        assert!(
            after((truth.start_offset, truth.start_us)) && finished.is_some_and(|(o, us)| after((Some(o), us))),
            "{}: skipped a call that did not start and finish after the anchor: {truth:?}",
            ctx()
        );
    }
    let kept = |pred: &dyn Fn(&super::super::pairing::Call) -> bool| body.calls.iter().any(pred);
    for truth in &life.calls {
        if let (Some(o), Some(us)) = (truth.result_offset, truth.result_us) {
            if after((Some(o), us)) {
                let listed = kept(&|c| {
                    matches!(c.verdict, Verdict::Completed | Verdict::Verify(_))
                        && (Some(c.start.byte_offset) == truth.start_offset
                            || body.results_of(c).iter().any(|r| r.at.byte_offset == o))
                });
                assert!(listed, "{}: dropped a call that finished after the anchor: {truth:?}", ctx());
            }
        }
        if let (Some(s), None) = (truth.start_offset, truth.result_offset) {
            if after((Some(s), truth.start_us)) {
                let listed =
                    kept(&|c| matches!(c.verdict, Verdict::InFlight | Verdict::Verify(_)) && c.start.byte_offset == s);
                assert!(listed, "{}: omitted a call in flight: {truth:?}", ctx());
            }
        }
    }
}

#[test]
fn plans_never_skip_drop_or_omit_a_call_on_random_lives() {
    for seed in 1..=super::runs(3000) {
        let mut rng = Rng::new(seed);
        let life = live(&mut rng);
        check(&life, true, seed);
        check(&life, false, seed);
    }
}
