//! Lookups over one file or one job beyond the plan: agent state (from the index, and from the
//! file's bytes the index does not hold yet), usage from the buffer, LOG-slice entries and
//! snapshot checks, and a job's timeline.

use std::io::Read;
use std::os::unix::fs::FileExt;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::index::{self, OwnedRow, Payload, INT8, TEXT, UUID};
use super::plan::{catch_up_dir_of, indexed_file};
use crate::indexer::catch_up::catch_up;
use crate::indexer::file_access::{absolute, Target};
use crate::pg::planner::with_index_scans;
use crate::pg::raise::notice;
use crate::pg::spi_util::{prepared_read, spi};
use crate::pg::time::unix_us;
use crate::pg::xact::with_fresh_snapshot;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::recovery::agent_state::{
    cortex_state, is_anchor, is_subagent_file, Confidence, Tracker, Verdict,
};
use cortex_buffer_core::recovery::choose::SessionFile;
use cortex_buffer_core::recovery::log_slice::{self, Check, Line};
use cortex_buffer_core::recovery::session_id::the_one;
use cortex_buffer_core::recovery::tail::lines_of;
use cortex_buffer_core::recovery::timeline::{Entry, Source as TimelineSource, Timeline};
use cortex_buffer_core::recovery::usage::{ModelTotals, Tally};
use cortex_buffer_core::shared::format_uuid;
use cortex_buffer_core::spend::decimal::Decimal;
use cortex_buffer_core::spend::usage::Usage;
use cortex_buffer_watch::volume::SessionRead;

/// Line types agent state reads (everything else decides nothing).
const STATE_TYPES: [&str; 5] = ["user", "assistant", "system", "progress", "result"];
/// Events read back per page while looking for an anchor.
const STATE_PAGE: i64 = 128;
/// The most of a file agent state reads from disk (its unindexed tail, or an unindexed file).
const MAX_TAIL_BYTES: u64 = 64 * 1024 * 1024;
/// The most data read to number the lines of a tail read from disk.
const MAX_COUNT_BYTES: u64 = 1024 * 1024 * 1024;

/// Agent state of the file at `path`.
pub fn agent_state(path: &str) -> Result<Verdict, CbError> {
    let path = absolute(path)?;
    let indexed = with_index_scans(|| Spi::connect(|c| index::file_at(c, &path)))?;
    match indexed {
        Some((file, lines)) if file.generation > 0 => from_index(&path, &file, lines),
        _ => Ok(from_disk(&path)),
    }
}

/// The transcript of Claude Code session `id`: the one file of that name the index holds (below
/// `prefix`, an agent's own job directory, when given), or `58P01`; `21000` when more than one
/// matches (the lookup never picks one: any pod may name a file after another's session).
pub fn transcript_of(id: Uuid, prefix: Option<&str>) -> Result<String, CbError> {
    let matches = with_index_scans(|| Spi::connect(|c| index::transcript_paths(c, id, prefix)))?;
    the_one(&id.to_string(), matches)?.ok_or_else(|| no_transcript(id))
}

/// A session the index does not hold (or, for an agent, holds outside its job's directory).
pub fn no_transcript(id: Uuid) -> CbError {
    CbError::new(SqlState::UndefinedFile, format!("no transcript of session {id} in the index"))
        .with_hint("Claude Code writes <sessions_dir>/<project>/<session id>.jsonl; check that it is there and indexed (SELECT cortex_buffer.index_now()).")
}

fn from_index(path: &str, file: &SessionFile, indexed_lines: i64) -> Result<Verdict, CbError> {
    let sub = is_subagent_file(path);
    if file.dialect != Some(Dialect::ClaudeCode) {
        let last = with_index_scans(|| Spi::connect(|c| index::events_before(c, file.file_id, i64::MAX, 1, &[])))?;
        let last = last.first();
        let (state, confidence) = cortex_state(last.and_then(|r| r.event_type.as_deref()));
        return Ok(Verdict {
            state,
            confidence,
            rule: "last_event",
            line_no: last.map(|r| r.line_no),
            byte_offset: last.map(|r| r.byte_offset),
            ts_us: last.and_then(|r| r.ts_us),
            detail: format!(
                "the last event of a {} file: {}",
                file.dialect.map_or("session", |d| d.label()),
                last.and_then(|r| r.event_type.as_deref()).unwrap_or("none")
            ),
        });
    }
    // Back from the end of the index until a line replay can start at.
    let mut window: Vec<OwnedRow> = Vec::new();
    let mut before = i64::MAX;
    with_index_scans(|| {
        Spi::connect(|c| loop {
            let page = index::events_before(c, file.file_id, before, STATE_PAGE, &STATE_TYPES)?;
            let n = page.len();
            let mut anchored = false;
            for row in page {
                before = row.byte_offset;
                anchored = row.payload.as_deref().is_some_and(|t| is_anchor(t, sub));
                window.push(row);
                if anchored {
                    break;
                }
            }
            if anchored || (n as i64) < STATE_PAGE {
                return Ok::<(), CbError>(());
            }
        })
    })?;
    let mut tracker = Tracker::new(sub);
    for row in window.iter().rev() {
        if let Some(text) = &row.payload {
            tracker.feed(row.line_no, row.byte_offset, text);
        }
    }
    // The bytes after the indexed offset: complete lines the indexer has not taken yet.
    if file.unindexed_bytes() > 0 && !file.gone {
        if let Some(target) = Target::try_of(path) {
            if let Ok(f) = target.open(path) {
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                let start = u64::try_from(file.indexed_offset).unwrap_or(0);
                if len > start && len - start <= MAX_TAIL_BYTES {
                    let mut chunk = vec![0u8; usize::try_from(len - start).unwrap_or(0)];
                    if f.read_exact_at(&mut chunk, start).is_ok() {
                        for l in lines_of(&chunk, file.indexed_offset, true, true) {
                            tracker.feed(indexed_lines + 1 + l.line_index, l.byte_offset, &l.text);
                        }
                    }
                }
            }
        }
    }
    Ok(tracker.verdict())
}

/// Newlines in the first `end` bytes of `f` (its line count there), read in chunks, stepping
/// over holes, cancellable; `None` past [`MAX_COUNT_BYTES`] of data (the line numbers of a
/// tail that far in are then not given).
fn lines_before(f: &std::fs::File, end: u64) -> Option<i64> {
    use cortex_buffer_core::indexer::lines::HoleSkip;
    use std::io::{Read, Seek, SeekFrom};
    let mut handle = f;
    handle.seek(SeekFrom::Start(0)).ok()?;
    let mut reader = SessionRead::new(f, || {
        pgrx::check_for_interrupts!();
    });
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut n, mut data) = (0u64, 0i64, 0u64);
    while at < end {
        at += reader.skip_hole().ok()?;
        if at >= end {
            break;
        }
        let want = usize::try_from((end - at).min(buf.len() as u64)).unwrap_or(0);
        match reader.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                n += memchr::memchr_iter(b'\n', &buf[..k]).count() as i64;
                at += k as u64;
                data += k as u64;
                if data > MAX_COUNT_BYTES {
                    return None;
                }
            }
        }
    }
    Some(n)
}

/// Agent state from the file's own bytes (not indexed): its tail, read back until a line
/// replay can start at.
fn from_disk(path: &str) -> Verdict {
    let target = Target::of(path);
    let mut f = match target.open(path) {
        Ok(f) => f,
        Err(e) => {
            notice(
                format!("could not read \"{path}\": {e}"),
                Some("agent_state() reads the index, or the file itself when the index does not hold it."),
            );
            return Verdict::unknown(format!("the file is not in the index and cannot be read: {e}"));
        }
    };
    let sub = is_subagent_file(path);
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut span = 256 * 1024u64;
    loop {
        pgrx::check_for_interrupts!();
        let start = len.saturating_sub(span);
        let mut chunk = Vec::new();
        let read = if start == 0 {
            f.read_to_end(&mut chunk).map(|_| ())
        } else {
            chunk.resize(usize::try_from(len - start).unwrap_or(0), 0);
            f.read_exact_at(&mut chunk, start)
        };
        if let Err(e) = read {
            return Verdict::unknown(format!("reading the file failed: {e}"));
        }
        let lines = lines_of(&chunk, i64::try_from(start).unwrap_or(0), start == 0, true);
        let anchor = lines.iter().rposition(|l| is_anchor(&l.text, sub));
        if anchor.is_some() || start == 0 || span >= MAX_TAIL_BYTES {
            let counted = if start == 0 { Some(0) } else { lines_before(&f, start).map(|n| n + 1) };
            let first_line = counted.unwrap_or(0) + 1;
            let mut tracker = Tracker::new(sub);
            for l in lines.iter().skip(anchor.unwrap_or(0)) {
                tracker.feed(first_line + l.line_index, l.byte_offset, &l.text);
            }
            let mut v = tracker.verdict();
            if counted.is_none() {
                v.line_no = None;
            }
            if anchor.is_none() && start > 0 {
                v.confidence = Confidence::Inferred;
                v.detail = format!("{} (only the last {} MB were read)", v.detail, MAX_TAIL_BYTES >> 20);
            }
            return v;
        }
        span = span.saturating_mul(4);
    }
}

fn usage_of(row: &OwnedRow) -> Usage {
    let n = |v: Option<i64>| u64::try_from(v.unwrap_or(0)).unwrap_or(0);
    Usage {
        input: n(row.input_tokens),
        output: n(row.output_tokens),
        cache_write_5m: n(row.cache_write_tokens),
        cache_write_1h: 0,
        cache_read: n(row.cache_read_tokens),
    }
}

fn tally_file(client: &SpiClient<'_>, tally: &mut Tally, file: &SessionFile) -> Result<(), CbError> {
    tally.next_file(file.dialect);
    index::for_each_event(client, file.file_id, 0, Payload::Usage, |row| {
        if matches!(row.event_type.as_deref(), Some("assistant" | "LLM_REQUEST" | "LLM_RESPONSE")) {
            tally.feed(&row.view(0), usage_of(row));
        }
        Ok(true)
    })
}

fn priced(client: &SpiClient<'_>, tally: &Tally) -> Result<Vec<ModelTotals>, CbError> {
    tally.totals(|model, ts| match ts {
        Some(ts) => crate::spend::price_cache::price_if_any(client, model, ts),
        None => Ok(None),
    })
}

/// One `session_usage()` row: the file, whether it is a sub-agent's, and a model's totals.
pub struct FileUsage {
    pub path: String,
    pub subagent: bool,
    pub totals: ModelTotals,
}

/// Usage of the transcript at `path` and of its sub-agents' files, per file and model.
pub fn session_usage(path: &str) -> Result<Vec<FileUsage>, CbError> {
    let path = absolute(path)?;
    catch_up_dir_of(&path);
    with_index_scans(|| {
        Spi::connect(|c| {
            let main = indexed_file(c, &path)?;
            let mut files = vec![main];
            if let Some(stem) = path.strip_suffix(".jsonl") {
                // Sub-agents' files lie in the transcript's project directory (their job_dir):
                // looked up through its index, never across the catalogue.
                let project = std::path::Path::new(&path)
                    .parent()
                    .and_then(|p| p.file_name())
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_owned();
                let stmt = prepared_read(c, "recovery.subagent_files", subagent_files_sql, &[TEXT, TEXT])?;
                for r in c.select(&*stmt, None, &[format!("{stem}/subagents/").into(), project.into()]).map_err(spi)? {
                    files.push(index::session_file(&r)?.0);
                }
            }
            let mut out = Vec::new();
            for f in &files {
                let mut tally = Tally::new(f.dialect);
                tally_file(c, &mut tally, f)?;
                let subagent = is_subagent_file(&f.path);
                let totals = priced(c, &tally)?;
                if totals.is_empty() {
                    out.push(FileUsage {
                        path: f.path.clone(),
                        subagent,
                        totals: ModelTotals { cost_usd: Some(Decimal::ZERO), ..ModelTotals::default() },
                    });
                }
                for t in totals {
                    out.push(FileUsage { path: f.path.clone(), subagent, totals: t });
                }
            }
            Ok(out)
        })
    })
}

/// `job_usage_from_buffer()`: the buffer's totals and what `record_usage` recorded.
pub struct JobUsage {
    pub buffer: ModelTotals,
    pub models: Vec<String>,
    pub unpriced_responses: i64,
    pub recorded: Option<Recorded>,
}

pub struct Recorded {
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_creation_input_tokens: i64,
    pub cache_read_input_tokens: i64,
    pub cost_usd: Option<String>,
}

pub fn job_usage(job: Uuid) -> Result<JobUsage, CbError> {
    with_index_scans(|| {
        Spi::connect(|c| {
            let files: Vec<_> = index::job_files(c, job)?.into_iter().map(|(f, _)| f).collect();
            let mut tally = Tally::new(None);
            for f in &files {
                tally_file(c, &mut tally, f)?;
            }
            let per_model = priced(c, &tally)?;
            let mut sum = ModelTotals { cost_usd: Some(Decimal::ZERO), ..ModelTotals::default() };
            let mut unpriced = 0;
            let mut models = Vec::new();
            for m in &per_model {
                sum.responses += m.responses;
                sum.input_tokens += m.input_tokens;
                sum.output_tokens += m.output_tokens;
                sum.cache_creation_input_tokens += m.cache_creation_input_tokens;
                sum.cache_read_input_tokens += m.cache_read_input_tokens;
                sum.cost_usd = match (sum.cost_usd, m.cost_usd) {
                    (Some(a), Some(b)) => Some(a.checked_add(b)?),
                    _ => None,
                };
                if m.cost_usd.is_none() {
                    unpriced += m.responses;
                }
                if let Some(model) = &m.model {
                    models.push(model.clone());
                }
            }
            let stmt = prepared_read(
                c,
                "recovery.recorded_usage",
                || {
                    "SELECT llm_calls, input_tokens, output_tokens,
                            cache_write_tokens OPERATOR(pg_catalog.+) cache_write_1h_tokens, cache_read_tokens,
                            cost_usd::pg_catalog.text
                       FROM cortex_buffer.job_usage WHERE job_id OPERATOR(pg_catalog.=) $1"
                        .to_owned()
                },
                &[UUID],
            )?;
            let recorded = c
                .select(&*stmt, Some(1), &[job.into()])
                .map_err(spi)?
                .next()
                .map(|r| -> Result<Recorded, CbError> {
                    let g = |i: usize| r.get::<i64>(i).map_err(spi).map(Option::unwrap_or_default);
                    Ok(Recorded {
                        calls: g(1)?,
                        input_tokens: g(2)?,
                        output_tokens: g(3)?,
                        cache_creation_input_tokens: g(4)?,
                        cache_read_input_tokens: g(5)?,
                        cost_usd: r.get(6).map_err(spi)?,
                    })
                })
                .transpose()?;
            Ok(JobUsage { buffer: sum, models, unpriced_responses: unpriced, recorded })
        })
    })
}

/// One `log_entries()` row.
pub struct LogEntry {
    pub seq: Option<i64>,
    pub entry_type: Option<String>,
    pub ts: Option<TimestampWithTimeZone>,
    pub line_no: i64,
    pub byte_offset: i64,
    pub entry: Option<crate::pg::jsonb::RawJsonb>,
}

/// A file's entries oldest first: of one `__type__`, within `[start_seq, end_seq)`, the last
/// `last_n`.
pub fn log_entries(
    path: &str,
    entry_type: Option<&str>,
    last_n: Option<i64>,
    start_seq: Option<i64>,
    end_seq: Option<i64>,
) -> Result<Vec<LogEntry>, CbError> {
    if last_n.is_some_and(|n| n < 0) {
        return Err(CbError::new(SqlState::InvalidParameterValue, "last_n must not be negative")
            .with_hint("Pass NULL for every entry, or how many of the last entries to return."));
    }
    let path = absolute(path)?;
    with_index_scans(|| {
        Spi::connect(|c| {
            let file = indexed_file(c, &path)?;
            let stmt = prepared_read(
                c,
                "recovery.log_entries",
                || {
                    "SELECT seq, type, ts, line_no, byte_offset,
                            payload OPERATOR(pg_catalog.-) '{__seq__,__ts__,__type__}'::pg_catalog.text[]
                       FROM (SELECT * FROM cortex_buffer.event
                              WHERE file_id OPERATOR(pg_catalog.=) $1
                                AND ($2::pg_catalog.text IS NULL OR type OPERATOR(pg_catalog.=) $2)
                                AND ($4::pg_catalog.int8 IS NULL OR seq OPERATOR(pg_catalog.>=) $4)
                                AND ($5::pg_catalog.int8 IS NULL OR seq OPERATOR(pg_catalog.<) $5)
                              ORDER BY byte_offset DESC LIMIT $3) last_entries
                      ORDER BY byte_offset"
                        .to_owned()
                },
                &[INT8, TEXT, INT8, INT8, INT8],
            )?;
            let limit = last_n.unwrap_or(i64::MAX);
            let rows = c
                .select(
                    &*stmt,
                    None,
                    &[file.file_id.into(), entry_type.into(), limit.into(), start_seq.into(), end_seq.into()],
                )
                .map_err(spi)?;
            rows.into_iter()
                .map(|r| {
                    Ok(LogEntry {
                        seq: r.get(1).map_err(spi)?,
                        entry_type: r.get(2).map_err(spi)?,
                        ts: r.get(3).map_err(spi)?,
                        line_no: r.get::<i64>(4).map_err(spi)?.unwrap_or(0),
                        byte_offset: r.get::<i64>(5).map_err(spi)?.unwrap_or(0),
                        entry: r.get::<crate::pg::jsonb::RawJsonb>(6).map_err(spi)?.map(|j| j.transfer_out_of_spi()),
                    })
                })
                .collect()
        })
    })
}

/// Whether a LOG-slice snapshot's file reference agrees with the file as indexed.
pub fn check_log_snapshot(
    path: &str,
    last_seq: Option<i64>,
    entry_count: i64,
    entry_type: Option<&str>,
) -> Result<(Check, SessionFile), CbError> {
    if entry_count < 0 {
        return Err(CbError::new(SqlState::InvalidParameterValue, "entry_count must not be negative")
            .with_hint("Pass the snapshot's entry_count."));
    }
    let path = absolute(path)?;
    with_index_scans(|| {
        Spi::connect(|c| {
            let file = indexed_file(c, &path)?;
            let stmt = prepared_read(
                c,
                "recovery.log_lines",
                || {
                    "SELECT byte_offset, seq, type, false FROM cortex_buffer.event
                      WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.>=) $2
                     UNION ALL
                     SELECT byte_offset, NULL, NULL, true FROM cortex_buffer.corrupt_line
                      WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.>=) $2
                     ORDER BY 1 LIMIT $3"
                        .to_owned()
                },
                &[INT8, INT8, INT8],
            )?;
            let mut lines = Vec::new();
            let mut from = 0i64;
            loop {
                let rows = c
                    .select(&*stmt, None, &[file.file_id.into(), from.into(), index::PAGE_ROWS.into()])
                    .map_err(spi)?;
                let n = rows.len() as i64;
                for r in rows {
                    from = r.get::<i64>(1).map_err(spi)?.unwrap_or(0).saturating_add(1);
                    if r.get::<bool>(4).map_err(spi)?.unwrap_or(false) {
                        lines.push(Line::Corrupt);
                    } else {
                        let t: Option<String> = r.get(3).map_err(spi)?;
                        let in_slice = entry_type.is_none_or(|want| t.as_deref() == Some(want));
                        lines.push(Line::Entry { seq: r.get(2).map_err(spi)?, in_slice });
                    }
                }
                if n < index::PAGE_ROWS {
                    break;
                }
            }
            Ok((log_slice::check(lines, last_seq, entry_count), file))
        })
    })
}

fn event_detail(r: &OwnedRow) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(t) = &r.tool_name {
        parts.push(format!("tool {t}"));
    }
    if let Some(i) = &r.invocation_id {
        parts.push(format!("call {i}"));
    }
    if let Some(s) = r.success {
        parts.push(if s { "succeeded".into() } else { "failed".into() });
    }
    if let Some(c) = &r.checkpoint_id {
        parts.push(format!("checkpoint {c}"));
    }
    if let Some(s) = r.step_index {
        parts.push(format!("step {s}"));
    }
    if r.input_tokens.is_some() || r.output_tokens.is_some() {
        parts.push(format!("{} in / {} out tokens", r.input_tokens.unwrap_or(0), r.output_tokens.unwrap_or(0)));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The database's own records of the job, as timeline entries.
fn job_records(c: &SpiClient<'_>, job: Uuid) -> Result<Vec<Entry>, CbError> {
    let stmt = prepared_read(
        c,
        "recovery.timeline_records",
        || {
            "SELECT created_at, 'checkpoint', 'checkpoint_written',
                    pg_catalog.format('checkpoint %s, step %s, %s bytes', checkpoint_id, step_index, size_bytes)
               FROM cortex_buffer.checkpoint_history WHERE job_id OPERATOR(pg_catalog.=) $1
             UNION ALL
             SELECT recorded_at, CASE WHEN reason OPERATOR(pg_catalog.=) 'zombie' THEN 'reaper' ELSE 'crash' END,
                    CASE WHEN reason OPERATOR(pg_catalog.=) 'zombie' THEN 'reaped' ELSE 'crash' END,
                    pg_catalog.concat_ws(', ', 'attempt ' OPERATOR(pg_catalog.||) attempt, 'exit ' OPERATOR(pg_catalog.||) exit_code,
                                         lifecycle_state, 'step ' OPERATOR(pg_catalog.||) step_index, 'last tool ' OPERATOR(pg_catalog.||) last_tool,
                                         error_message)
               FROM cortex_buffer.crash WHERE job_id OPERATOR(pg_catalog.=) $1
             UNION ALL
             SELECT used_at, 'usage', 'llm_usage',
                    pg_catalog.format('%s: %s in, %s out, %s cache write, %s cache read tokens, $%s%s', model, input_tokens, output_tokens,
                                      cache_write_tokens OPERATOR(pg_catalog.+) cache_write_1h_tokens, cache_read_tokens, cost_usd,
                                      CASE WHEN request_id IS NULL THEN '' ELSE ', request ' OPERATOR(pg_catalog.||) request_id END)
               FROM cortex_buffer.usage_ledger WHERE job_id OPERATOR(pg_catalog.=) $1
             UNION ALL
             SELECT admitted_at, 'breaker', CASE WHEN canary THEN 'admitted_as_canary' ELSE 'admitted' END, 'agent ' OPERATOR(pg_catalog.||) agent_id
               FROM cortex_buffer.circuit_admission WHERE job_id OPERATOR(pg_catalog.=) $1
             UNION ALL
             SELECT recorded_at, 'breaker', CASE WHEN success THEN 'outcome_success' ELSE 'outcome_failure' END,
                    'agent ' OPERATOR(pg_catalog.||) agent_id OPERATOR(pg_catalog.||) CASE WHEN counted THEN ', counted towards a trip' ELSE '' END
               FROM cortex_buffer.circuit_outcome WHERE job_id OPERATOR(pg_catalog.=) $1"
                .to_owned()
        },
        &[UUID],
    )?;
    let mut out = Vec::new();
    for r in c.select(&*stmt, None, &[job.into()]).map_err(spi)? {
        let at = unix_us(r.get::<TimestampWithTimeZone>(1).map_err(spi)?).unwrap_or(i64::MIN);
        let source = match r.get::<String>(2).map_err(spi)?.as_deref() {
            Some("checkpoint") => TimelineSource::Checkpoint,
            Some("reaper") => TimelineSource::Reaper,
            Some("crash") => TimelineSource::Crash,
            Some("usage") => TimelineSource::Usage,
            _ => TimelineSource::Breaker,
        };
        let kind: String = r.get(3).map_err(spi)?.unwrap_or_default();
        let detail: String = r.get(4).map_err(spi)?.unwrap_or_default();
        out.push(Entry::record(at, source, kind, detail));
    }
    Ok(out)
}

/// Every event of the job across its sessions in order, with gap and writer-restart rows, the
/// corrupt lines, and the database's records placed among them by time. A stream: it reads a
/// page of events (and of corrupt lines) when the rows before it have been taken, so memory
/// follows a page, not the job.
pub fn job_timeline(job: Uuid) -> Result<TimelineStream, CbError> {
    catch_up(&format_uuid(job.as_bytes()));
    let (records, files) = with_index_scans(|| {
        with_fresh_snapshot(|| {
            Spi::connect(|c| {
                let files: Vec<_> = index::job_files(c, job)?.into_iter().map(|(f, _)| f).collect();
                Ok::<_, CbError>((job_records(c, job)?, files))
            })
        })
    })?;
    Ok(TimelineStream {
        timeline: Some(Timeline::new(records)),
        files: files.into(),
        cursor: None,
        ready: std::collections::VecDeque::new(),
        run_as: crate::pg::privilege::current_user(),
    })
}

/// Where a stream stands in the current file.
struct FileCursor {
    file: SessionFile,
    /// Next event offset to read; `None` once the file's events are done.
    events_from: Option<i64>,
    corrupt_from: i64,
    corrupt: std::collections::VecDeque<(i64, i64, String)>,
    corrupt_done: bool,
}

/// `job_timeline()`'s rows, produced page by page.
pub struct TimelineStream {
    timeline: Option<Timeline>,
    files: std::collections::VecDeque<SessionFile>,
    cursor: Option<FileCursor>,
    ready: std::collections::VecDeque<Entry>,
    /// Who the stream was made as (an agent's call runs as the agent-call role): later pages
    /// are read as that role too, whoever is current when the executor asks for rows.
    run_as: pgrx::pg_sys::Oid,
}

const CORRUPT_PAGE_SQL: &str = "SELECT byte_offset, line_no, reason FROM cortex_buffer.corrupt_line
      WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.>=) $2
      ORDER BY byte_offset LIMIT $3";

fn corrupt_entry(session: &str, (offset, line, reason): (i64, i64, String)) -> Entry {
    Entry {
        ts_us: None,
        source: TimelineSource::CorruptLine,
        kind: "corrupt_line".into(),
        session: Some(session.to_owned()),
        line_no: Some(line),
        byte_offset: Some(offset),
        seq: None,
        detail: Some(reason),
    }
}

impl TimelineStream {
    /// Reads the next page of the current file (or starts the next file); false when done.
    fn advance(&mut self) -> Result<bool, CbError> {
        let Some(timeline) = self.timeline.as_mut() else { return Ok(false) };
        let Some(cur) = self.cursor.as_mut() else {
            match self.files.pop_front() {
                Some(file) => {
                    timeline.begin_file();
                    self.cursor = Some(FileCursor {
                        file,
                        events_from: Some(0),
                        corrupt_from: 0,
                        corrupt: std::collections::VecDeque::new(),
                        corrupt_done: false,
                    });
                }
                None => {
                    if let Some(t) = self.timeline.take() {
                        self.ready.extend(t.finish());
                    }
                }
            }
            return Ok(true);
        };
        crate::pg::privilege::as_user(self.run_as, || {
            with_index_scans(|| {
                Spi::connect(|c| {
                    let corrupt_stmt = prepared_read(
                        c,
                        "recovery.timeline_corrupt",
                        || CORRUPT_PAGE_SQL.to_owned(),
                        &[INT8, INT8, INT8],
                    )?;
                    let refill = |cur: &mut FileCursor| -> Result<(), CbError> {
                        if cur.corrupt.is_empty() && !cur.corrupt_done {
                            let page = c
                                .select(
                                    &*corrupt_stmt,
                                    None,
                                    &[cur.file.file_id.into(), cur.corrupt_from.into(), index::PAGE_ROWS.into()],
                                )
                                .map_err(spi)?;
                            let before = cur.corrupt.len();
                            for r in page {
                                let offset = r.get::<i64>(1).map_err(spi)?.unwrap_or(0);
                                cur.corrupt_from = offset.saturating_add(1);
                                cur.corrupt.push_back((
                                    offset,
                                    r.get::<i64>(2).map_err(spi)?.unwrap_or(0),
                                    r.get::<String>(3).map_err(spi)?.unwrap_or_default(),
                                ));
                            }
                            cur.corrupt_done =
                                (cur.corrupt.len() - before) < usize::try_from(index::PAGE_ROWS).unwrap_or(0);
                        }
                        Ok(())
                    };
                    match cur.events_from {
                        Some(from) => {
                            let page = index::events_page(c, cur.file.file_id, from, Payload::For(&[]))?;
                            if page.len() < usize::try_from(index::PAGE_ROWS).unwrap_or(0) {
                                cur.events_from = None;
                            }
                            for row in &page {
                                cur.events_from = cur.events_from.map(|_| row.byte_offset.saturating_add(1));
                                loop {
                                    refill(cur)?;
                                    match cur.corrupt.front() {
                                        Some((o, ..)) if *o < row.byte_offset => {
                                            if let Some(x) = cur.corrupt.pop_front() {
                                                timeline.line(corrupt_entry(&cur.file.rel_path, x));
                                            }
                                        }
                                        _ => break,
                                    }
                                }
                                timeline.line(Entry {
                                    ts_us: row.ts_us,
                                    source: TimelineSource::Event,
                                    kind: row.event_type.clone().unwrap_or_default(),
                                    session: Some(cur.file.rel_path.clone()),
                                    line_no: Some(row.line_no),
                                    byte_offset: Some(row.byte_offset),
                                    seq: row.seq,
                                    detail: event_detail(row),
                                });
                            }
                        }
                        None => {
                            // The events are done: the corrupt lines after the last one, a page at a time.
                            refill(cur)?;
                            while let Some(x) = cur.corrupt.pop_front() {
                                timeline.line(corrupt_entry(&cur.file.rel_path, x));
                            }
                        }
                    }
                    Ok::<(), CbError>(())
                })
            })
        })?;
        if cur.events_from.is_none() && cur.corrupt_done && cur.corrupt.is_empty() {
            self.cursor = None;
        }
        self.ready.extend(timeline.take_ready());
        Ok(true)
    }
}

impl Iterator for TimelineStream {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            match self.advance() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => crate::pg::raise::raise(e),
            }
        }
    }
}

/// Why recovery will not use a file, if it will not (the decision tree's own rule).
pub fn refusal(file: &SessionFile) -> Option<(&'static str, String)> {
    file.unusable().map(|(r, d)| (r.label(), d))
}

/// A transcript's sub-agents' files: `$1` the prefix `<project>/<session>/subagents/`, `$2` the
/// project directory.
pub(crate) fn subagent_files_sql() -> String {
    format!(
        "SELECT {} FROM cortex_buffer.session_file
          WHERE job_dir OPERATOR(pg_catalog.=) $2 AND pg_catalog.starts_with(path, $1) ORDER BY path COLLATE \"C\"",
        index::FILE_COLUMNS
    )
}
