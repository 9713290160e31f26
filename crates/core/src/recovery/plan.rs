//! A recovery plan as the agent receives it: phase 1 (the checkpoint), the phase 2 decision and
//! what pairing found, written as one JSON document. Pure.

use crate::indexer::timestamp::format_timestamp;
use crate::json::jsonb_write::Document;
use crate::json::writer::JsonWriter;

use super::choose::{Anchor, AnchorKind, Choice, SessionFile};
use super::pairing::{AnomalyKind, Body, Call, CallResult, Pos};
use super::verdict::TimeEvidence;

/// Version of the plan's shape (a key `plan_version`): bumped on any incompatible change.
/// 2: `verify`, `call_ordinal`, the v2 idempotency key, `fresh`, `clock`, `checkpoint.ref`.
/// 3: the v3 idempotency key (a call keeps its writer's checkpoint; ordinals count calls of
/// the same tool and input in the replay), `replay_ordinal`, `checkpoint_ref`, `key_status`,
/// `key_candidates`; calls open at the anchor or straddling it are verified.
pub const PLAN_VERSION: i64 = 3;

/// Whether the index held every byte of the plan's files when the plan was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freshness {
    /// The plan's files were brought up to date at call time.
    pub caught_up: bool,
    /// Why they could not be, when they could not (the plan is then `stale`).
    pub stale: Option<String>,
    /// The reason as a code, where one is defined (`remote_unconfirmed`, `unpushed_bytes`).
    pub reason: Option<&'static str>,
}

/// Where phase 1 found the checkpoint (`read_checkpoint`'s `source`, plus `invalid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Current,
    History,
    None,
    /// Checkpoints exist but none passes its CRC (`read_checkpoint` raises XX001).
    Invalid,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Current => "current",
            Source::History => "history",
            Source::None => "none",
            Source::Invalid => "invalid",
        }
    }
}

/// Phase 1: the checkpoint as `read_checkpoint` verifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase1 {
    pub source: Source,
    pub checkpoint_id: Option<String>,
    pub step_index: Option<i32>,
    pub crc_ok: Option<bool>,
    /// When it was written (its `checkpoint_history` row or high-water mark).
    pub created_at_us: Option<i64>,
    /// Its CRC-32 (what idempotency keys name it by).
    pub crc: Option<u32>,
    pub detail: Option<String>,
}

impl Phase1 {
    /// `first_run` (no checkpoint), `fail_job` (none verifies) or `resume`.
    pub fn action(&self) -> &'static str {
        match self.source {
            Source::None => "first_run",
            Source::Invalid => "fail_job",
            Source::Current | Source::History => "resume",
        }
    }

    /// The step to run next: 0 on a first run, the checkpoint's step + 1 on resume, unknown
    /// when the checkpoint names no step (or there is nothing to resume).
    pub fn resume_step(&self) -> Option<i64> {
        match self.source {
            Source::None => Some(0),
            Source::Invalid => None,
            _ => self.step_index.map(|s| i64::from(s) + 1),
        }
    }
}

/// What the plan is about: a job (`recovery_plan`) or a transcript (`session_recovery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Job { job_id: String, expected_checkpoint_id: Option<String>, match_checkpoint: bool, phase1: Phase1 },
    Transcript { session_id: Option<String> },
}

fn ts(w: &mut JsonWriter, key: &str, us: Option<i64>) {
    match us {
        Some(us) => w.field_str(key, &format_timestamp(us)),
        None => w.key(key).null(),
    };
}

fn rel(files: &[SessionFile], session: usize) -> &str {
    files.get(session).map(|f| f.rel_path.as_str()).unwrap_or("")
}

fn write_anchor(w: &mut JsonWriter, files: &[SessionFile], anchor: &Anchor, body: &Body) {
    // Kinds other than a marker start at the first event read.
    let at: Option<Pos> = anchor.at.or(body.segment_start).or_else(|| body.events.first().map(|e| e.at));
    w.begin_object();
    w.field_str("kind", anchor.kind.label());
    w.field_opt_str("checkpoint_id", anchor.checkpoint_id.as_deref());
    w.field_str("session", rel(files, anchor.session));
    w.field_opt_int("byte_offset", at.map(|a| a.byte_offset));
    w.field_opt_int("line_no", at.map(|a| a.line_no).filter(|n| *n > 0));
    w.field_opt_int("seq", at.and_then(|a| a.seq));
    ts(w, "ts", at.and_then(|a| a.ts_us));
    match anchor.kind {
        AnchorKind::CheckpointTime => {
            ts(w, "checkpoint_written_at", anchor.time_us);
            w.field_opt_int("clock_skew_ms", anchor.skew_us.map(|s| s / 1000));
        }
        AnchorKind::HighWaterMark => ts(w, "recorded_at", anchor.time_us),
        _ => {}
    }
    w.end_object();
}

fn write_session(w: &mut JsonWriter, f: &SessionFile, read_from: Option<i64>) {
    w.begin_object();
    w.field_str("path", &f.path);
    w.field_str("file", &f.rel_path);
    w.field_int("file_id", f.file_id);
    w.field_int("generation", i64::from(f.generation));
    w.field_opt_int("session_ordinal", f.session_ordinal);
    w.field_opt_str("dialect", f.dialect.map(|d| d.label()));
    w.field_opt_int("read_from", read_from.filter(|o| *o != i64::MAX));
    w.key("integrity").begin_object();
    w.field_int("total_lines", f.total_lines);
    w.field_int("valid_lines", f.valid_lines);
    w.field_int("corrupt_lines", f.corrupt_lines);
    w.key("corruption_ratio").float(f.corruption_ratio);
    w.field_str("tail_state", &f.tail_state);
    w.field_int("seq_gaps", f.seq_gaps);
    w.field_int("seq_resets", f.seq_resets);
    w.field_int("foreign_job_lines", f.foreign_job_lines);
    w.field_bool("trusted", f.trusted);
    w.end_object();
    w.field_bool("tail_pending", f.tail_pending);
    w.field_int("unindexed_bytes", f.unindexed_bytes());
    w.field_bool("gone", f.gone);
    w.field_bool("quarantined", f.quarantined);
    if let Some(p) = &f.pushed {
        // A pushed file: the server cannot look at it; this is what its shipper last said.
        w.key("pushed").begin_object();
        w.field_str("source", &p.source);
        w.field_opt_int("reported_size", p.reported_size);
        ts(w, "reported_at", p.reported_at_us);
        w.field_int("held_bytes", p.held_bytes);
        w.field_int("unpushed_bytes", p.unpushed(f.indexed_offset));
        ts(w, "confirmed_at", p.confirmed_at_us);
        w.end_object();
    }
    w.end_object();
}

fn write_call_common(w: &mut JsonWriter, files: &[SessionFile], c: &Call) {
    w.field_str("key", &c.key);
    w.field_str("key_source", if c.key_is_id { "id" } else { "derived" });
    w.field_opt_str("tool_name", c.tool_name.as_deref());
    w.field_opt_int("tool_ordinal", (c.tool_ordinal > 0).then_some(i64::from(c.tool_ordinal)));
    w.field_opt_str("input_hash", c.input_hash.as_deref());
    // What a pod matches its calls by, and the key the call was sent with (super::cycles).
    let k = &c.keys;
    w.field_opt_int("replay_ordinal", k.replay_ordinal.map(i64::from));
    w.field_opt_int("call_ordinal", k.call_ordinal.map(i64::from));
    w.field_opt_str("checkpoint_ref", k.checkpoint_ref.as_deref());
    w.field_opt_str("idempotency_key", k.idempotency_key.as_deref());
    w.field_str("key_status", k.status.label());
    w.key("key_candidates").begin_array();
    for cand in &k.candidates {
        w.begin_object();
        w.field_opt_int("replay_ordinal", cand.replay_ordinal.map(i64::from));
        w.field_opt_int("call_ordinal", cand.call_ordinal.map(i64::from));
        w.field_str("checkpoint_ref", &cand.checkpoint_ref);
        w.field_str("idempotency_key", &cand.idempotency_key);
        w.end_object();
    }
    w.end_array();
    ts(w, "started_at", c.start.ts_us);
    w.field_str("start_session", rel(files, c.start.session));
    w.field_int("start_offset", c.start.byte_offset);
}

fn write_result(w: &mut JsonWriter, files: &[SessionFile], r: &CallResult) {
    w.field_opt_bool("success", r.success);
    w.field_opt_str("result", r.result.as_ref().map(|x| x.text.as_str()));
    w.field_bool("result_truncated", r.result.as_ref().is_some_and(|x| x.truncated));
    ts(w, "finished_at", r.at.ts_us);
    w.field_str("result_session", rel(files, r.at.session));
    w.field_int("result_offset", r.at.byte_offset);
}

fn write_input(w: &mut JsonWriter, c: &Call) {
    w.field_opt_str("input", c.input.as_ref().map(|x| x.text.as_str()));
    w.field_bool("input_truncated", c.input.as_ref().is_some_and(|x| x.truncated));
}

fn write_clock(w: &mut JsonWriter, files: &[SessionFile], choice: &Choice, evidence: &TimeEvidence) {
    let Some(window) = choice.window else {
        w.null();
        return;
    };
    w.begin_object();
    ts(w, "checkpoint_written_at", Some(window.at_us));
    w.field_int("assumed_skew_ms", window.skew_us / 1000);
    w.key("segments").begin_array();
    for s in &evidence.segments {
        w.begin_object();
        w.field_int("segment", i64::from(s.segment));
        w.field_str("session", rel(files, s.session));
        w.field_int("offset_ms_low", s.low_us / 1000);
        w.field_int("offset_ms_high", s.high_us / 1000);
        w.field_str("offset_from", if s.measured { "mtime" } else { "assumed" });
        w.end_object();
    }
    w.end_array();
    w.key("uncertain").begin_array();
    for (session, from, to) in &evidence.uncertain {
        w.begin_object();
        w.field_str("session", rel(files, *session));
        w.field_int("from_offset", *from);
        w.field_int("to_offset", *to);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

/// What a plan is made of, besides its subject.
pub struct Parts<'a> {
    pub files: &'a [SessionFile],
    pub choice: &'a Choice,
    pub body: &'a Body,
    pub evidence: &'a TimeEvidence,
    pub fresh: &'a Freshness,
}

/// The plan as JSON text: its subject (a job and its checkpoint, or a transcript), how the
/// resume point was chosen and how fresh the index is, the marker and the sessions read, the
/// calls by what to do with them, what the plan found along the way, the clock and notes.
pub fn render(subject: &Subject, parts: &Parts<'_>) -> String {
    render_document(subject, parts).text
}

/// [`render`], with the nodes of its values: what `jsonb_write::document_to_jsonb` turns into
/// the plan's `jsonb` without parsing its text back.
pub fn render_document(subject: &Subject, parts: &Parts<'_>) -> Document {
    let Parts { files, choice, body, evidence, fresh } = *parts;
    let mut w = JsonWriter::new();
    w.begin_object();
    w.field_int("plan_version", super::plan::PLAN_VERSION);
    write_subject(&mut w, subject);
    w.field_str("mode", choice.reason.mode().label());
    w.field_str("reason", choice.reason.label());
    w.field_str("detail", &choice.detail);
    write_fresh(&mut w, files, choice, fresh);

    w.key("marker");
    match &choice.anchor {
        Some(a) => write_anchor(&mut w, files, a, body),
        None => {
            w.null();
        }
    }

    w.key("sessions").begin_array();
    for &i in &choice.examined {
        if let Some(f) = files.get(i) {
            let read_from = choice.reads.iter().find(|r| r.session == i).map(|r| r.from_offset);
            write_session(&mut w, f, read_from);
        }
    }
    w.end_array();

    write_calls(&mut w, files, body);
    write_findings(&mut w, files, choice, body);

    w.key("clock");
    write_clock(&mut w, files, choice, evidence);

    w.key("notes").begin_array();
    for note in notes(files, choice, body, fresh) {
        w.string(note);
    }
    w.end_array();
    w.end_object();
    w.finish_document()
}

/// `job_id`, `action` and `checkpoint` (a job's), or `session_id` (a transcript's).
fn write_subject(w: &mut JsonWriter, subject: &Subject) {
    match subject {
        Subject::Job { job_id, expected_checkpoint_id, match_checkpoint, phase1 } => {
            w.field_str("job_id", job_id);
            w.field_str("action", phase1.action());
            w.key("checkpoint").begin_object();
            w.field_str("source", phase1.source.label());
            w.field_opt_str("checkpoint_id", phase1.checkpoint_id.as_deref());
            w.field_opt_int("step_index", phase1.step_index.map(i64::from));
            w.field_opt_int("resume_step", phase1.resume_step());
            w.field_opt_bool("crc_ok", phase1.crc_ok);
            w.field_str("ref", &super::keys::checkpoint_ref(phase1.crc));
            ts(w, "written_at", phase1.created_at_us);
            w.field_opt_str("detail", phase1.detail.as_deref());
            w.end_object();
            w.field_opt_str("expected_checkpoint_id", expected_checkpoint_id.as_deref());
            w.field_bool("match_checkpoint", *match_checkpoint);
        }
        Subject::Transcript { session_id } => {
            w.field_opt_str("session_id", session_id.as_deref());
            w.field_str("action", "resume");
            w.key("checkpoint").null();
        }
    }
}

/// `fresh`: whether the index has caught up with the files the plan reads.
fn write_fresh(w: &mut JsonWriter, files: &[SessionFile], choice: &Choice, fresh: &Freshness) {
    w.key("fresh").begin_object();
    w.field_bool("caught_up", fresh.caught_up);
    w.field_bool("stale", fresh.stale.is_some());
    w.field_opt_str("reason", fresh.stale.as_ref().map(|_| fresh.reason.unwrap_or("not_caught_up")));
    w.field_opt_str("detail", fresh.stale.as_deref());
    w.field_int("unindexed_bytes", unindexed(files, choice));
    w.end_object();
}

/// `completed`, `in_flight` and `verify`: the calls by what a resumed agent does with them.
fn write_calls(w: &mut JsonWriter, files: &[SessionFile], body: &Body) {
    w.key("completed").begin_array();
    for c in body.completed() {
        let Some(r) = &c.result else { continue };
        w.begin_object();
        write_call_common(w, files, c);
        write_result(w, files, r);
        w.field_str("paired_by", if r.paired_by_order { "order" } else { "id" });
        w.end_object();
    }
    w.end_array();

    w.key("in_flight").begin_array();
    for c in body.in_flight() {
        w.begin_object();
        write_call_common(w, files, c);
        write_input(w, c);
        // A later writer exists: this call's writer died with the call open.
        w.field_bool("writer_crashed", c.segment < body.last_segment);
        w.end_object();
    }
    w.end_array();

    w.key("verify").begin_array();
    for (c, reason) in body.to_verify() {
        w.begin_object();
        write_call_common(w, files, c);
        write_input(w, c);
        w.field_str("reason", reason.label());
        w.field_bool("writer_crashed", c.segment < body.last_segment);
        w.key("results").begin_array();
        for r in body.results_of(c) {
            w.begin_object();
            write_result(w, files, r);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
}

/// `lost_events`, `anomalies` and `events_after_marker`: what the plan found along the way.
fn write_findings(w: &mut JsonWriter, files: &[SessionFile], choice: &Choice, body: &Body) {
    w.key("lost_events").begin_array();
    for g in &body.gaps {
        w.begin_object();
        w.field_str("session", rel(files, g.at.session));
        w.field_int("byte_offset", g.at.byte_offset);
        w.field_opt_int("after_seq", g.after_seq);
        w.field_int("next_seq", g.next_seq);
        w.field_int("missing", g.missing);
        w.end_object();
    }
    w.end_array();

    w.key("anomalies").begin_array();
    for a in choice.anomalies.iter().chain(body.anomalies.iter()) {
        w.begin_object();
        w.field_str("kind", a.kind.label());
        w.field_str("session", rel(files, a.at.session));
        w.field_int("byte_offset", a.at.byte_offset);
        w.field_opt_str("key", a.key.as_deref());
        w.field_opt_str("tool_name", a.tool_name.as_deref());
        w.field_str("detail", &a.detail);
        w.end_object();
    }
    w.end_array();

    w.key("events_after_marker").begin_array();
    for e in &body.events {
        w.begin_object();
        w.field_opt_int("seq", e.at.seq);
        w.field_opt_str("type", e.event_type.as_deref());
        w.field_int("byte_offset", e.at.byte_offset);
        w.field_str("session", rel(files, e.at.session));
        w.end_object();
    }
    w.end_array();
}

/// Bytes of the plan's files the index does not hold (a pending tail included).
fn unindexed(files: &[SessionFile], choice: &Choice) -> i64 {
    choice.reads.iter().filter_map(|r| files.get(r.session)).map(SessionFile::unindexed_bytes).sum()
}

/// Short codes for what an agent may want to check before trusting the plan.
fn notes(files: &[SessionFile], choice: &Choice, body: &Body, fresh: &Freshness) -> Vec<&'static str> {
    let read = |f: &dyn Fn(&SessionFile) -> bool| choice.reads.iter().any(|r| files.get(r.session).is_some_and(f));
    let mut out = Vec::new();
    if fresh.stale.is_some() {
        out.push("stale");
    }
    if choice.anomalies.iter().any(|a| a.kind == AnomalyKind::ChainBroken) {
        out.push("chain_broken");
    }
    if read(&|f| f.tail_pending) {
        out.push("tail_pending");
    }
    if read(&|f| f.unindexed_bytes() > 0 && !f.tail_pending) {
        out.push("index_behind");
    }
    if !body.gaps.is_empty() {
        out.push("lost_events");
    }
    if body.anomalies.iter().any(|a| a.kind == AnomalyKind::PayloadMissing) {
        out.push("payload_missing");
    }
    if body.anomalies.iter().any(|a| a.kind == AnomalyKind::SeqReset) {
        out.push("writer_restarted");
    }
    if choice.reason == super::choose::Reason::CheckpointTime {
        out.push("time_anchored");
    }
    if body.to_verify().next().is_some() {
        out.push("verify");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::choose::{choose, tests::file, tests::Mem, Expectation, Reason};
    use super::super::cycles::{KeyContext, Place, Ref, Store};
    use super::super::line::Row;
    use super::super::pairing::{Pairing, SessionRef};
    use super::super::verdict::settle;
    use super::*;
    use crate::indexer::dialect::Dialect;

    #[test]
    fn a_whole_plan_as_json() {
        let files = vec![file(0, Dialect::CortexSpike)];
        let c1 = "0193a8b2-0000-7000-8000-000000000001";
        let mut mem =
            Mem { events: vec![vec![(10, "CHECKPOINT_WRITTEN", Some("0193a8b2-0000-7000-8000-000000000001"), 0)]] };
        let e = Expectation {
            match_checkpoint: true,
            expected_id: Some(c1.into()),
            has_checkpoint: true,
            checkpoint_time_us: None,
            clock_skew_us: 0,
            mark: None,
            read_margin_us: 0,
        };
        let choice = choose(&files, &e, &mut mem).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(choice.reason, Reason::MarkerMatched);
        let mut p = Pairing::new(
            vec![SessionRef { dialect: Dialect::CortexSpike, rel_path: "session-001.jsonl".into() }],
            100,
            false,
        );
        p.begin(0, choice.reads[0].baseline);
        p.feed(&Row {
            byte_offset: 10,
            line_no: 2,
            event_type: Some("CHECKPOINT_WRITTEN"),
            checkpoint_id: Some(c1),
            payload: Some("{}"),
            ..Row::default()
        });
        let payload = r#"{"type":"TOOL_START","input_hash":"h"}"#;
        p.feed(&Row {
            byte_offset: 20,
            line_no: 3,
            event_type: Some("TOOL_START"),
            invocation_id: Some("i1"),
            tool_name: Some("t"),
            payload: Some(payload),
            ..Row::default()
        });
        let mut body = p.finish(|_: &str| Ok::<bool, ()>(false)).unwrap_or_default();
        let mut ctx = KeyContext {
            scope: "job".into(),
            stores: vec![
                Store { reference: Ref::None, own: false, place: Place::Origin, at_us: 0 },
                Store { reference: Ref::Crc(9), own: false, place: choice.place.clone(), at_us: 0 },
            ],
            plan_store: Some(1),
            origin_known: true,
            read_from: vec![0],
            ..KeyContext::default()
        };
        let evidence = settle(&mut body, None, &mut ctx);
        let phase1 = Phase1 {
            source: Source::Current,
            checkpoint_id: Some(c1.into()),
            step_index: Some(4),
            crc_ok: Some(true),
            created_at_us: Some(0),
            crc: Some(9),
            detail: None,
        };
        let json = render(
            &Subject::Job {
                job_id: "job".into(),
                expected_checkpoint_id: Some(c1.into()),
                match_checkpoint: true,
                phase1,
            },
            &Parts { files: &files, choice: &choice, body: &body, evidence: &evidence, fresh: &Freshness::default() },
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!(v["action"], "resume");
        assert_eq!(v["checkpoint"]["resume_step"], 5);
        assert_eq!(v["mode"], "buffer");
        assert_eq!(v["marker"]["kind"], "checkpoint_written");
        assert_eq!(v["marker"]["byte_offset"], 10);
        assert_eq!(v["in_flight"][0]["key"], "i1");
        assert_eq!(v["in_flight"][0]["input_hash"], "h");
        assert_eq!(v["sessions"][0]["read_from"], 0, "from its writer's start");
        assert_eq!(v["events_after_marker"][0]["byte_offset"], 20);
        assert_eq!(v["checkpoint"]["written_at"], "1970-01-01T00:00:00.000000Z");
        assert_eq!(v["checkpoint"]["ref"], "crc:9");
        assert_eq!(v["in_flight"][0]["call_ordinal"], 1);
        assert_eq!(
            v["in_flight"][0]["idempotency_key"],
            super::super::keys::call_idempotency_key("job", "crc:9", 1, "t", "h")
        );
        assert_eq!(v["fresh"]["stale"], false);
        assert_eq!(v["verify"], serde_json::json!([]));
        assert_eq!(v["plan_version"], 3);
    }

    #[test]
    fn actions_and_resume_steps() {
        let p = |source, step| Phase1 {
            source,
            checkpoint_id: None,
            step_index: step,
            crc_ok: None,
            created_at_us: None,
            crc: None,
            detail: None,
        };
        assert_eq!((p(Source::None, None).action(), p(Source::None, None).resume_step()), ("first_run", Some(0)));
        assert_eq!((p(Source::Invalid, None).action(), p(Source::Invalid, None).resume_step()), ("fail_job", None));
        assert_eq!(
            (p(Source::History, Some(2)).action(), p(Source::History, Some(2)).resume_step()),
            ("resume", Some(3))
        );
        assert_eq!(p(Source::Current, None).resume_step(), None);
    }
}
