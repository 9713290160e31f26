//! Builds recovery plans: phase 1 from `read_checkpoint`'s rules, phase 2 from the index, the
//! document from the core.

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::index::{self, IndexProbe, Payload, PAIRING_TYPES};
use crate::checkpoint::store::{self, Source as StoredSource};
use crate::pg::guc;
use crate::pg::planner::with_index_scans;
use cortex_buffer_core::checkpoint::identity::format_uuid;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::recovery::choose::{choose, AnchorKind, Choice, Expectation, Reason, SessionFile};
use cortex_buffer_core::recovery::pairing::{Body, Pairing, SessionRef};
use cortex_buffer_core::recovery::plan::{render, Phase1, Source, Subject};

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
            detail: r.detail,
        }),
        Err(e) if e.state == SqlState::DataCorrupted => Ok(Phase1 {
            source: Source::Invalid,
            checkpoint_id: None,
            step_index: None,
            crc_ok: Some(false),
            created_at_us: None,
            detail: Some(match &e.detail {
                Some(d) => format!("{}: {d}", e.message),
                None => e.message.clone(),
            }),
        }),
        Err(e) => Err(e),
    }
}

/// Reads the chosen sessions into a pairer and returns what it found.
fn read_body(
    client: &SpiClient<'_>,
    files: &[SessionFile],
    choice: &Choice,
    scope: &str,
    checkpoint_id: Option<&str>,
) -> Result<Body, CbError> {
    let sessions = files
        .iter()
        .map(|f| SessionRef { dialect: f.dialect.unwrap_or(Dialect::CortexSpike), rel_path: f.rel_path.clone() })
        .collect();
    let mut pairing = Pairing::new(sessions, scope, checkpoint_id, guc::recovery_value_bytes(), choice.segment_only);
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
    pairing.finish(|id| match marker {
        Some(m) => {
            let file = files.get(m.session).map_or(0, |f| f.file_id);
            index::started_before(client, id, file, m.byte_offset, &earlier)
        }
        None => Ok(false),
    })
}

/// `recovery_plan()`'s document.
pub fn job_plan(job: Uuid, checkpoint_id: Option<Uuid>, match_checkpoint: bool) -> Result<String, CbError> {
    let mut p1 = phase1(job)?;
    with_index_scans(|| {
        Spi::connect(|client| {
            if let Some(id) = p1.checkpoint_id.as_deref().and_then(cortex_buffer_core::checkpoint::identity::parse_uuid)
            {
                p1.created_at_us = index::checkpoint_written_at(client, job, Uuid::from_bytes(id))?;
            }
            let expected = checkpoint_id.as_ref().map(uuid_text).or_else(|| p1.checkpoint_id.clone());
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
                return Ok(render(&subject, &[], &choice, &Body::default()));
            }
            let files = index::job_files(client, job)?;
            let e = Expectation {
                match_checkpoint,
                expected_id: expected.clone(),
                has_checkpoint: matches!(p1.source, Source::Current | Source::History),
                checkpoint_time_us: p1.created_at_us,
                clock_skew_us: guc::recovery_clock_skew_us(),
            };
            let mut probe = IndexProbe { client, file_ids: files.iter().map(|f| f.file_id).collect() };
            let choice = choose(&files, &e, &mut probe)?;
            let checkpoint_for_keys = choice.anchor.as_ref().and_then(|a| a.checkpoint_id.clone()).or(expected);
            let body = read_body(client, &files, &choice, &uuid_text(&job), checkpoint_for_keys.as_deref())?;
            Ok(render(&subject, &files, &choice, &body))
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
    with_index_scans(|| {
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
                detail: "every event of the transcript; tool calls pair by tool_use id over every content block".into(),
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
                }],
                segment_only: false,
                examined: vec![0],
                anomalies: Vec::new(),
            };
            let session_id = transcript_session_id(path);
            let scope = session_id.clone().unwrap_or_else(|| path.to_owned());
            let body = read_body(client, &files, &choice, &scope, None)?;
            Ok(render(&Subject::Transcript { session_id }, &files, &choice, &body))
        })
    })
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
