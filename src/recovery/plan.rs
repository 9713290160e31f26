//! Builds recovery plans: the job's files caught up first (`indexer::catch_up`), phase 1 from
//! `read_checkpoint`'s rules, phase 2 from the index (and the checkpoint's high-water mark),
//! the document from the core.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::anchors::{self, Anchors, ShellLookup};
use super::index::{self, IndexProbe, Payload, PAIRING_TYPES};
use crate::checkpoint::marks;
use crate::checkpoint::store::{self, Source as StoredSource};
use crate::indexer::catch_up::catch_up;
use crate::indexer::file_access::Target;
use crate::pg::guc;
use crate::pg::planner::with_index_scans;
use crate::pg::xact::with_fresh_snapshot;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::json::jsonb_write::Document;
use cortex_buffer_core::json::reduce::holds_truncation;
use cortex_buffer_core::recovery::choose::{
    choose, read_whole, widen_reads, AnchorKind, Choice, Expectation, Mode, PushedReport, ReadFrom, Reason, SessionFile,
};
use cortex_buffer_core::recovery::cycles::{KeyContext, Place, Ref, Store, READ_EVERYTHING};
use cortex_buffer_core::recovery::pairing::{Body, Pairing, SessionRef};
use cortex_buffer_core::recovery::plan::{render_document, Freshness, Parts, Phase1, Source, Subject};
use cortex_buffer_core::recovery::tail::stamped_at;
use cortex_buffer_core::recovery::verdict::{settle, FileClock, TimeEvidence, Window, WRITE_DELAY_US};
use cortex_buffer_core::shared::format_uuid;

/// The most of a cut line read for its timestamp.
const CUT_LINE_HEAD: usize = 4096;

fn uuid_text(u: &Uuid) -> String {
    format_uuid(u.as_bytes())
}

/// Phase 1: the job's checkpoint as `read_checkpoint` verifies it; "none verifies" is an
/// answer here (`fail_job`), not an error.
fn phase1(job: Uuid) -> Result<Phase1, CbError> {
    match store::read(job) {
        Ok(r) => Ok(Phase1 {
            source: match r.source {
                StoredSource::Current => Source::Current,
                StoredSource::History => Source::History,
                StoredSource::None => Source::None,
            },
            checkpoint_id: r.checkpoint_id.as_ref().map(format_uuid),
            step_index: r.step_index,
            crc_ok: r.crc_ok,
            created_at_us: None,
            crc: r.crc,
            detail: r.detail,
        }),
        Err(e) if e.state == SqlState::DataCorrupted => Ok(Phase1 {
            source: Source::Invalid,
            checkpoint_id: None,
            step_index: None,
            crc_ok: Some(false),
            created_at_us: None,
            crc: None,
            detail: Some(match &e.detail {
                Some(d) => format!("{}: {d}", e.message),
                None => e.message.clone(),
            }),
        }),
        Err(e) => Err(e),
    }
}

/// Reads the chosen sessions into a pairer. A line whose payload the index could not store is
/// read from the file, so its input is hashed as written; so is an over-long line whose stored
/// payload is its reduction, with a value cut, when the file still holds it whole within
/// `max_line_memory` (a pushed file does not: its input stays unknown, and the call is verified).
fn read_events(
    client: &SpiClient<'_>,
    files: &[SessionFile],
    reads: &[ReadFrom],
    segment_only: bool,
) -> Result<Pairing, CbError> {
    let sessions = files
        .iter()
        .map(|f| SessionRef { dialect: f.dialect.unwrap_or(Dialect::CortexSpike), rel_path: f.rel_path.clone() })
        .collect();
    let max = guc::recovery_value_bytes();
    let max_line = guc::max_line_bytes();
    let max_memory = usize::try_from(guc::max_line_memory()).unwrap_or(usize::MAX);
    let mut pairing = Pairing::new(sessions, max, segment_only);
    for read in reads {
        let Some(file) = files.get(read.session) else { continue };
        pairing.begin(read.session, read.baseline);
        let dialect = file.dialect.unwrap_or(Dialect::CortexSpike);
        index::for_each_event(client, file.file_id, read.from_offset, Payload::Facts(dialect), |row| {
            let pairs = row.event_type.as_deref().is_some_and(|t| PAIRING_TYPES.contains(&t));
            let raw = match &row.payload {
                None if pairs => anchors::raw_line(file, row.byte_offset, max_line),
                Some(reduced) if pairs && holds_truncation(reduced) => {
                    anchors::raw_line(file, row.byte_offset, max_memory)
                }
                _ => None,
            };
            let mut view = row.view(read.session);
            if let Some(line) = raw.as_deref().filter(|l| same_line(l, row.event_type.as_deref())) {
                view.payload = Some(line);
            }
            pairing.feed(&view);
            Ok(true)
        })?;
    }
    Ok(pairing)
}

/// Whether a line read back from a file is still the event the index holds (its type).
fn same_line(line: &str, event_type: Option<&str>) -> bool {
    use cortex_buffer_core::json::parse::{js_trim, parse};
    let Ok(p) = parse(js_trim(line)) else { return false };
    p.root.get("type").and_then(|t| t.as_str()).as_deref() == event_type
}

/// Reads the plan's events and settles every call (verdict and keys); reads wider while the
/// keys need earlier writers' lines (a few times at most).
fn read_body(
    client: &SpiClient<'_>,
    files: &[SessionFile],
    choice: &Choice,
    ctx: &mut KeyContext,
    probe: &mut IndexProbe<'_, '_>,
) -> Result<(Body, TimeEvidence), CbError> {
    // A plan that reads nothing after the checkpoint (checkpoint_only) lists nothing.
    if choice.reason.mode() == Mode::CheckpointOnly {
        return Ok((Body::default(), TimeEvidence::default()));
    }
    let mut reads = choice.reads.clone();
    let mut round = 0;
    loop {
        round += 1;
        let pairing = read_events(client, files, &reads, choice.segment_only)?;
        // A result whose start is not in the plan: did the call start before the marker?
        let marker = choice.anchor.as_ref().filter(|a| matches!(a.kind, AnchorKind::Marker(_))).and_then(|a| a.at);
        let earlier: Vec<i64> = match marker {
            Some(m) => files.iter().take(m.session).map(|f| f.file_id).collect(),
            None => Vec::new(),
        };
        let mut body = pairing.finish(|id| match marker {
            Some(m) => {
                let file = files.get(m.session).map_or(0, |f| f.file_id);
                index::started_before(client, id, file, m.byte_offset, &earlier)
            }
            None => Ok(false),
        })?;
        let window = choice.window.map(|w| Window { at_us: w.at_us, skew_us: w.skew_us, clocks: clocks(files) });
        ctx.read_from = (0..files.len())
            .map(|s| reads.iter().find(|r| r.session == s).map_or(i64::MAX, |r| r.from_offset))
            .collect();
        let mut round_ctx = ctx.clone();
        let evidence = settle(&mut body, window.as_ref(), &mut round_ctx);
        let unread = std::mem::take(&mut body.unread);
        let widened = if unread.contains(&READ_EVERYTHING) {
            read_whole(&mut reads, files.len())
        } else if round < MAX_READS {
            widen_reads(&mut reads, &unread, probe)?
        } else {
            // Still short after a few: every file from its start, once.
            round == MAX_READS && !unread.is_empty() && read_whole(&mut reads, files.len())
        };
        if !widened {
            if choice.place == Place::Origin {
                // Whole files from their start: what lies before them was read for the keys.
                let asked: Vec<i64> = (0..files.len())
                    .map(|s| choice.reads.iter().find(|r| r.session == s).map_or(i64::MAX, |r| r.from_offset))
                    .collect();
                body.keep_from(&asked);
            }
            return Ok((body, evidence));
        }
    }
}

/// How many times a plan reads its events (the first, and wider ones for the keys) before it
/// reads every file whole.
const MAX_READS: u32 = 4;

/// What each file tells of its writer's clock: its mtime, and the timestamp of the cut line
/// it ends with, if any.
fn clocks(files: &[SessionFile]) -> Vec<FileClock> {
    files
        .iter()
        .map(|f| FileClock {
            mtime_us: f.mtime_us,
            tail_pending: f.tail_pending,
            tail_ts_us: if f.tail_pending { cut_line_stamp(f) } else { None },
        })
        .collect()
}

/// The timestamp in the unterminated line at the end of `f`, read through the safe opener.
fn cut_line_stamp(f: &SessionFile) -> Option<i64> {
    let target = Target::try_of(&f.path)?;
    let file = target.open(&f.path).ok()?;
    let mut head = vec![0u8; CUT_LINE_HEAD];
    let n = file.read_at(&mut head, u64::try_from(f.indexed_offset).ok()?).ok()?;
    stamped_at(head.get(..n)?)
}

/// How far before the checkpoint's time (a pod's clock) the clock fallback reads: the larger
/// of the allowance and any offset a file measures (mtime against its last event).
fn read_margin(files: &[SessionFile], skew_us: i64) -> i64 {
    let measured = files.iter().filter_map(|f| Some(f.mtime_us?.saturating_sub(f.last_ts_us?))).max().unwrap_or(0);
    skew_us.max(measured).saturating_add(WRITE_DELAY_US)
}

/// When the plan could not catch up, the files' sizes as they are now (through the safe
/// opener), so `unindexed_bytes` says how far behind the index is.
fn measure_now(files: &mut [SessionFile]) {
    for f in files.iter_mut().filter(|f| !f.gone) {
        let Some(target) = Target::try_of(&f.path) else { continue };
        if let Ok(meta) = target.open(&f.path).and_then(|h| h.metadata()) {
            f.size_bytes = i64::try_from(meta.len()).unwrap_or(i64::MAX);
        }
    }
}

/// `recovery_plan()`'s document. A pod's call (with its job token) records its resume.
pub fn job_plan(job: Uuid, checkpoint_id: Option<Uuid>, match_checkpoint: bool) -> Result<Document, CbError> {
    let fresh = catch_up(&uuid_text(&job));
    let p1 = phase1(job)?;
    let text = with_index_scans(|| {
        with_fresh_snapshot(|| {
            Spi::connect(|client| plan_of(client, job, checkpoint_id, match_checkpoint, p1.clone(), fresh.clone()))
        })
    })?;
    if !crate::job::authority::fleet_caller() && p1.source != Source::Invalid {
        record_resume(job, &p1)?;
    }
    Ok(text)
}

/// Records that this session's pod resumes from `p1`'s checkpoint, when the transaction can
/// write (a standby, or a read-only transaction, records nothing: its keys are then inferred).
fn record_resume(job: Uuid, p1: &Phase1) -> Result<(), CbError> {
    // SAFETY: reads of backend-global flags.
    let (read_only, in_recovery) = unsafe { (pgrx::pg_sys::XactReadOnly, pgrx::pg_sys::RecoveryInProgress()) };
    if read_only || in_recovery {
        return Ok(());
    }
    let id = p1.checkpoint_id.as_deref().and_then(cortex_buffer_core::shared::parse_uuid);
    marks::record(job, p1.crc, id, "resume")
}

fn plan_of(
    client: &SpiClient<'_>,
    job: Uuid,
    checkpoint_id: Option<Uuid>,
    match_checkpoint: bool,
    mut p1: Phase1,
    fresh: Freshness,
) -> Result<Document, CbError> {
    if let Some(id) = p1.checkpoint_id.as_deref().and_then(cortex_buffer_core::shared::parse_uuid) {
        p1.created_at_us = index::checkpoint_written_at(client, job, Uuid::from_bytes(id))?;
    }
    let expected = checkpoint_id.as_ref().map(uuid_text).or_else(|| p1.checkpoint_id.clone());
    let mut subject = Subject::Job {
        job_id: uuid_text(&job),
        expected_checkpoint_id: expected.clone(),
        match_checkpoint,
        phase1: p1.clone(),
    };
    if p1.source == Source::Invalid {
        let choice = Choice::checkpoint_only(
            Reason::CheckpointInvalid,
            "no stored checkpoint passes its CRC: fail the job (resuming could repeat or skip side effects)".into(),
            Vec::new(),
        );
        let parts = Parts {
            files: &[],
            choice: &choice,
            body: &Body::default(),
            evidence: &TimeEvidence::default(),
            fresh: &fresh,
        };
        return Ok(render_document(&subject, &parts));
    }
    let listed = index::job_files(client, job)?;
    let prints: Vec<(i64, u32)> = listed.iter().map(|(_, p)| *p).collect();
    let mut files: Vec<SessionFile> = listed.into_iter().map(|(f, _)| f).collect();
    if fresh.stale.is_some() {
        measure_now(&mut files);
    }
    let (fresh, heads) = pushed_freshness(job, &mut files, fresh)?;
    let mut probe = IndexProbe { client, file_ids: files.iter().map(|f| f.file_id).collect() };
    let a = {
        let mut look = ShellLookup { probe: &mut probe, files: &files, prints: &prints, pushed_heads: &heads };
        anchors::anchors(client, job, p1.crc, &mut look)?
    };
    if p1.created_at_us.is_none() {
        p1.created_at_us = a.plan_at_us;
        if let Subject::Job { phase1, .. } = &mut subject {
            phase1.created_at_us = p1.created_at_us;
        }
    }
    // The mark and the time belong to the stored checkpoint: when the caller names another one,
    // neither says anything about it, so that one's own time is used.
    let asked_other = checkpoint_id.is_some() && expected != p1.checkpoint_id;
    let (plan_mark, checkpoint_time_us) = match checkpoint_id {
        Some(asked) if asked_other => (None, index::checkpoint_written_at(client, job, asked)?),
        _ => (a.plan_mark.clone(), p1.created_at_us),
    };
    let skew = guc::recovery_clock_skew_us();
    let e = Expectation {
        match_checkpoint,
        expected_id: expected,
        has_checkpoint: matches!(p1.source, Source::Current | Source::History),
        checkpoint_time_us,
        clock_skew_us: skew,
        mark: plan_mark,
        read_margin_us: read_margin(&files, skew),
    };
    let choice = choose(&files, &e, &mut probe)?;
    let mut ctx = key_context(&a, &choice, &p1, uuid_text(&job), checkpoint_time_us, &files);
    let (body, evidence) = read_body(client, &files, &choice, &mut ctx, &mut probe)?;
    let missing;
    let (choice, body) = if evidence.bytes_missing {
        missing = Choice::checkpoint_only(
            Reason::BytesMissing,
            "the writer that was writing when the checkpoint was stored had not gone past its predecessors' calls, and some of the job's files lost bytes the index had read (replaced, truncated or rewritten since): calls the checkpoint does not cover may be gone, so nothing after it is proven (docs/operations.md: rotating session files)".into(),
            (0..files.len()).collect(),
        );
        (&missing, Body::default())
    } else {
        (&choice, body)
    };
    let parts = Parts { files: &files, choice, body: &body, evidence: &evidence, fresh: &fresh };
    Ok(render_document(&subject, &parts))
}

/// Files pushed from other nodes: what their shippers last said. Bytes a shipper reported and
/// has not pushed make the plan stale: it never resumes silently past bytes it has not seen.
/// Also returns each pushed file's first bytes as the server keeps them (by file id).
fn pushed_freshness(
    job: Uuid,
    files: &mut [SessionFile],
    fresh: Freshness,
) -> Result<(Freshness, HashMap<i64, Vec<u8>>), CbError> {
    let mut reports = crate::push::store::reports(job)?;
    let heads: HashMap<i64, Vec<u8>> = reports.iter_mut().map(|(id, (_, h))| (*id, std::mem::take(h))).collect();
    let reports: HashMap<i64, PushedReport> = reports.into_iter().map(|(id, (r, _))| (id, r)).collect();
    let mut fresh = fresh;
    let all_pushed = !files.is_empty() && files.iter().all(|f| reports.contains_key(&f.file_id));
    if all_pushed && cortex_buffer_watch::scan::resolve_root(&guc::sessions_dir()).is_err() {
        // Every file of the job comes by push and the server has no sessions directory to look
        // in (a push-only deployment): nothing local is behind; the pushed files' own reports
        // say whether the plan is stale.
        fresh = Freshness { caught_up: true, stale: None, reason: None };
    }
    // Dated only when the job has pushed files (it reads the job row and its crash records).
    let superseded = if reports.is_empty() { None } else { crate::push::confirm::job_superseded_at(job)? };
    for f in files.iter_mut() {
        f.pushed = reports.get(&f.file_id).cloned().map(|mut p| {
            p.complete = p.confirmed_after(superseded);
            p
        });
        let Some(p) = &f.pushed else { continue };
        f.size_bytes = f.size_bytes.max(p.reported_size.unwrap_or(0));
        let unpushed = p.unpushed(f.indexed_offset);
        if unpushed > 0 && fresh.stale.is_none() {
            fresh.stale = Some(format!(
                "{} bytes of {} that its shipper ({}) reported have not been pushed yet",
                unpushed, f.rel_path, p.source
            ));
            fresh.reason = Some("unpushed_bytes");
        }
        if !p.complete && fresh.stale.is_none() {
            fresh.stale = Some(crate::push::confirm::unconfirmed_detail(
                &f.rel_path,
                &p.source,
                p.confirmed_at_us,
                superseded,
                f.indexed_offset.saturating_add(p.held_bytes),
            ));
            fresh.reason = Some("remote_unconfirmed");
        }
    }
    Ok((fresh, heads))
}

/// What the keys need: the stores, with the plan's checkpoint where the decision tree placed it.
fn key_context(
    a: &Anchors,
    choice: &Choice,
    p1: &Phase1,
    scope: String,
    time_us: Option<i64>,
    files: &[SessionFile],
) -> KeyContext {
    let mut stores = a.stores.clone();
    let reference = p1.crc.map_or(Ref::None, Ref::Crc);
    let plan_store = match &choice.place {
        Place::Origin => Some(0),
        Place::Mark(_) => a.plan_store,
        place @ (Place::Line { .. } | Place::Time(_)) => {
            // The marker the writer wrote is where it stored the checkpoint: the same store as
            // its mark, placed by the writer's own line. A mark that could not place the
            // checkpoint (taken where the job's files could not be seen) still says who stored
            // it and when: the clocks place it.
            let is_line = matches!(place, Place::Line { .. });
            let unplaced = a.plan_store.filter(|&i| {
                stores.get(i).is_some_and(|s| is_line || matches!(s.place, Place::Unknown | Place::Time(_)))
            });
            match unplaced.and_then(|i| stores.get_mut(i).map(|s| (i, s))) {
                Some((i, s)) => {
                    s.place = place.clone();
                    s.own |= matches!(place, Place::Line { .. });
                    Some(i)
                }
                None => {
                    // Without a mark: a checkpoint in the history was stored by
                    // write_checkpoint, the pod's own; one the writer's marker names, too.
                    let in_history = p1.crc.is_some_and(|c| a.crc_of_id.values().any(|h| *h == c));
                    stores.push(Store {
                        reference,
                        own: in_history || matches!(place, Place::Line { .. }),
                        place: place.clone(),
                        at_us: time_us.unwrap_or(i64::MAX),
                    });
                    Some(stores.len() - 1)
                }
            }
        }
        Place::Unknown => None,
    };
    KeyContext {
        scope,
        stores,
        plan_store,
        origin_known: a.origin_known,
        read_from: Vec::new(),
        crc_of_id: a.crc_of_id.clone(),
        resumes: a.resumes.clone(),
        dropped_at: a.dropped_at.clone(),
        last_lines: files.iter().map(|f| f.total_lines).collect(),
        clocks: clocks(files),
        skew_us: guc::recovery_clock_skew_us(),
    }
}

/// The session id of a Claude Code transcript: its file name without `.jsonl`.
pub fn transcript_session_id(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    name.strip_suffix(".jsonl").map(str::to_owned)
}

/// `session_recovery()`'s document: the whole transcript, same keys.
pub fn transcript_plan(path: &str) -> Result<Document, CbError> {
    let fresh = catch_up_dir_of(path);
    with_index_scans(|| {
        with_fresh_snapshot(|| {
            Spi::connect(|client| {
                let file = indexed_file(client, path)?;
                if file.dialect != Some(Dialect::ClaudeCode) {
                    return Err(CbError::new(
                        SqlState::InvalidParameterValue,
                        format!(
                            "\"{path}\" is not a Claude Code transcript (dialect {})",
                            file.dialect.map_or("unknown", |d| d.label())
                        ),
                    )
                    .with_hint("Use recovery_plan(job_id) for a job's session files."));
                }
                let files = vec![file];
                let choice = Choice {
                    reason: Reason::Transcript,
                    detail: "every event of the transcript; tool calls pair by tool_use id over every content block"
                        .into(),
                    anchor: Some(cortex_buffer_core::recovery::choose::Anchor {
                        kind: AnchorKind::FileStart,
                        session: 0,
                        checkpoint_id: None,
                        at: None,
                        time_us: None,
                        skew_us: None,
                    }),
                    place: Place::Origin,
                    reads: vec![ReadFrom {
                        session: 0,
                        from_offset: 0,
                        baseline: cortex_buffer_core::recovery::pairing::Baseline::FileStart,
                    }],
                    segment_only: false,
                    window: None,
                    examined: vec![0],
                    anomalies: Vec::new(),
                };
                let session_id = transcript_session_id(path);
                // A transcript has no checkpoint: one replay from its start, keyed under none.
                let mut ctx = KeyContext {
                    scope: session_id.clone().unwrap_or_else(|| path.to_owned()),
                    stores: vec![Store { reference: Ref::None, own: false, place: Place::Origin, at_us: i64::MIN }],
                    plan_store: Some(0),
                    origin_known: true,
                    ..KeyContext::default()
                };
                let mut probe = IndexProbe { client, file_ids: files.iter().map(|f| f.file_id).collect() };
                let (body, evidence) = read_body(client, &files, &choice, &mut ctx, &mut probe)?;
                let parts = Parts { files: &files, choice: &choice, body: &body, evidence: &evidence, fresh: &fresh };
                Ok(render_document(&Subject::Transcript { session_id }, &parts))
            })
        })
    })
}

/// Catches up the top-level directory of `sessions_dir` that `path` (absolute) lies in: the
/// file's job or project directory. A path elsewhere cannot be caught up.
pub fn catch_up_dir_of(path: &str) -> Freshness {
    let root = cortex_buffer_watch::scan::resolve_root(&guc::sessions_dir())
        .map(|v| v.path().display().to_string())
        .unwrap_or_else(|_| guc::sessions_dir());
    let dir = path
        .strip_prefix(root.trim_end_matches('/'))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split('/').next())
        .filter(|d| !d.is_empty());
    match dir {
        Some(d) => catch_up(d),
        None => Freshness {
            caught_up: false,
            stale: Some(format!(
                "\"{path}\" is not under cortex_buffer.sessions_dir: the answer holds what the index held"
            )),
            reason: None,
        },
    }
}

/// The indexed `session_file` row of `path` (absolute), or an error saying why there is none.
pub fn indexed_file(client: &SpiClient<'_>, path: &str) -> Result<SessionFile, CbError> {
    match index::file_at(client, path)? {
        Some((f, _)) if f.generation > 0 || f.size_bytes == 0 => Ok(f),
        Some(_) => Err(not_indexed(path)),
        None => Err(CbError::new(SqlState::UndefinedFile, format!("\"{path}\" is not in the index"))
            .with_hint("Pass session_file.path of an indexed file (SELECT path FROM cortex_buffer.session_file), or wait for the indexer: SELECT cortex_buffer.index_now().")),
    }
}

pub fn not_indexed(path: &str) -> CbError {
    CbError::new(SqlState::ObjectNotInPrerequisiteState, format!("\"{path}\" has not been indexed yet"))
        .with_hint("Wait for the indexer (SELECT cortex_buffer.index_now()) and call again.")
}
