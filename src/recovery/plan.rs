//! Builds recovery plans: the job's files caught up first (`indexer::catch_up`), phase 1 from
//! `read_checkpoint`'s rules, phase 2 from the index (and the checkpoint's high-water mark),
//! the document from the core.

use std::os::unix::fs::FileExt;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::index::{self, IndexProbe, Payload, PAIRING_TYPES};
use crate::checkpoint::marks;
use crate::checkpoint::store::{self, Source as StoredSource};
use crate::indexer::catch_up::catch_up;
use crate::indexer::file_access::Target;
use crate::pg::guc;
use crate::pg::planner::with_index_scans;
use crate::pg::xact::with_fresh_snapshot;
use cortex_buffer_core::checkpoint::identity::format_uuid;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::recovery::choose::{choose, AnchorKind, Choice, Expectation, Reason, SessionFile};
use cortex_buffer_core::recovery::keys::checkpoint_ref;
use cortex_buffer_core::recovery::pairing::{Body, Pairing, SessionRef};
use cortex_buffer_core::recovery::plan::{render, Freshness, Parts, Phase1, Source, Subject};
use cortex_buffer_core::recovery::tail::stamped_at;
use cortex_buffer_core::recovery::verdict::{settle, FileClock, KeyScope, TimeEvidence, Window, WRITE_DELAY_US};

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

/// Reads the chosen sessions into a pairer and returns what it found, settled: every call's
/// verdict, ordinal and key.
fn read_body(
    client: &SpiClient<'_>,
    files: &[SessionFile],
    choice: &Choice,
    keys: &KeyScope,
) -> Result<(Body, TimeEvidence), CbError> {
    let sessions = files
        .iter()
        .map(|f| SessionRef { dialect: f.dialect.unwrap_or(Dialect::CortexSpike), rel_path: f.rel_path.clone() })
        .collect();
    let mut pairing = Pairing::new(sessions, guc::recovery_value_bytes(), choice.segment_only);
    for read in &choice.reads {
        let Some(file) = files.get(read.session) else { continue };
        pairing.begin(read.session, read.baseline);
        index::for_each_event(client, file.file_id, read.from_offset, Payload::For(&PAIRING_TYPES), |row| {
            pairing.feed(&row.view(read.session));
            Ok(true)
        })?;
    }
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
    let anchors: Vec<(usize, i64)> = choice.reads.iter().map(|r| (r.session, r.anchor_at)).collect();
    let evidence = settle(&mut body, window.as_ref(), &anchors, keys);
    Ok((body, evidence))
}

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

/// `recovery_plan()`'s document.
pub fn job_plan(job: Uuid, checkpoint_id: Option<Uuid>, match_checkpoint: bool) -> Result<String, CbError> {
    let fresh = catch_up(&uuid_text(&job));
    let mut p1 = phase1(job)?;
    with_index_scans(|| {
        with_fresh_snapshot(|| {
            Spi::connect(|client| {
                let mark = match p1.crc {
                    Some(crc) => marks::lookup(client, job, crc)?,
                    None => None,
                };
                if let Some(id) =
                    p1.checkpoint_id.as_deref().and_then(cortex_buffer_core::checkpoint::identity::parse_uuid)
                {
                    p1.created_at_us = index::checkpoint_written_at(client, job, Uuid::from_bytes(id))?;
                }
                if p1.created_at_us.is_none() {
                    p1.created_at_us = mark.as_ref().map(|m| m.recorded_at_us);
                }
                let expected = checkpoint_id.as_ref().map(uuid_text).or_else(|| p1.checkpoint_id.clone());
                // The mark and the time belong to the stored checkpoint: when the caller names
                // another one, neither says anything about it, so that one's own time is used.
                let (mark, checkpoint_time_us) = match checkpoint_id {
                    Some(asked) if expected != p1.checkpoint_id => {
                        (None, index::checkpoint_written_at(client, job, asked)?)
                    }
                    _ => (mark, p1.created_at_us),
                };
                let subject = Subject::Job {
                    job_id: uuid_text(&job),
                    expected_checkpoint_id: expected.clone(),
                    match_checkpoint,
                    phase1: p1.clone(),
                };
                if p1.source == Source::Invalid {
                    let choice = Choice::checkpoint_only(
                        Reason::CheckpointInvalid,
                        "no stored checkpoint passes its CRC: fail the job (resuming could repeat or skip side effects)"
                            .into(),
                        Vec::new(),
                    );
                    let parts = Parts {
                        files: &[],
                        choice: &choice,
                        body: &Body::default(),
                        evidence: &TimeEvidence::default(),
                        fresh: &fresh,
                    };
                    return Ok(render(&subject, &parts));
                }
                let mut files = index::job_files(client, job)?;
                if fresh.stale.is_some() {
                    measure_now(&mut files);
                }
                // Files pushed from other nodes: what their shippers last said. Bytes a shipper
                // reported and has not pushed make the plan stale: it never resumes silently
                // past bytes it has not seen.
                let reports = crate::push::store::reports(job)?;
                let mut fresh = fresh.clone();
                let all_pushed = !files.is_empty() && files.iter().all(|f| reports.contains_key(&f.file_id));
                if all_pushed && cortex_buffer_watch::scan::resolve_root(&guc::sessions_dir()).is_err() {
                    // Every file of the job comes by push and the server has no sessions directory
                    // to look in (a push-only deployment): nothing local is behind; the pushed
                    // files' own reports say whether the plan is stale.
                    fresh = Freshness { caught_up: true, stale: None };
                }
                for f in files.iter_mut() {
                    f.pushed = reports.get(&f.file_id).cloned();
                    if let Some(p) = &f.pushed {
                        f.size_bytes = f.size_bytes.max(p.reported_size.unwrap_or(0));
                        let unpushed = p.unpushed(f.indexed_offset);
                        if unpushed > 0 && fresh.stale.is_none() {
                            fresh.stale = Some(format!(
                                "{} bytes of {} that its shipper ({}) reported have not been pushed yet",
                                unpushed, f.rel_path, p.source
                            ));
                        }
                    }
                }
                let skew = guc::recovery_clock_skew_us();
                let e = Expectation {
                    match_checkpoint,
                    expected_id: expected,
                    has_checkpoint: matches!(p1.source, Source::Current | Source::History),
                    checkpoint_time_us,
                    clock_skew_us: skew,
                    // A pushed file whose shipper had reported more than the server had when the
                    // mark was taken has no high-water mark there: the mark is not used.
                    mark: mark.filter(|m| m.visible && m.mark.files.iter().all(|f| f.unseen == 0)).map(|m| m.mark),
                    read_margin_us: read_margin(&files, skew),
                };
                let mut probe = IndexProbe { client, file_ids: files.iter().map(|f| f.file_id).collect() };
                let choice = choose(&files, &e, &mut probe)?;
                let keys = KeyScope { scope: uuid_text(&job), checkpoint_ref: checkpoint_ref(p1.crc) };
                let (body, evidence) = read_body(client, &files, &choice, &keys)?;
                let parts = Parts { files: &files, choice: &choice, body: &body, evidence: &evidence, fresh: &fresh };
                Ok(render(&subject, &parts))
            })
        })
    })
}

/// The session id of a Claude Code transcript: its file name without `.jsonl`.
pub fn transcript_session_id(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    name.strip_suffix(".jsonl").map(str::to_owned)
}

/// `session_recovery()`'s document: the whole transcript, same keys.
pub fn transcript_plan(path: &str) -> Result<String, CbError> {
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
                    reads: vec![cortex_buffer_core::recovery::choose::ReadFrom {
                        session: 0,
                        from_offset: 0,
                        baseline: cortex_buffer_core::recovery::pairing::Baseline::FileStart,
                        anchor_at: 0,
                    }],
                    segment_only: false,
                    window: None,
                    examined: vec![0],
                    anomalies: Vec::new(),
                };
                let session_id = transcript_session_id(path);
                let scope = session_id.clone().unwrap_or_else(|| path.to_owned());
                let keys = KeyScope { scope, checkpoint_ref: checkpoint_ref(None) };
                let (body, evidence) = read_body(client, &files, &choice, &keys)?;
                let parts = Parts { files: &files, choice: &choice, body: &body, evidence: &evidence, fresh: &fresh };
                Ok(render(&Subject::Transcript { session_id }, &parts))
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
