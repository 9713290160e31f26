//! `file_integrity(path)`: a session file's current bytes judged on demand, as the control
//! plane's `scanBuffer` judges them, server-side.

use std::path::Path;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use super::file_access::Target;
use super::settings::Settings;
use crate::pg::privilege::as_definer;
use crate::pg::raise::notice;
use crate::pg::spi_util::spi;
use cortex_buffer_core::indexer::dialect::{detect, Dialect};
use cortex_buffer_core::indexer::discovery::{classify, Layout};
use cortex_buffer_core::indexer::index_file::{
    index_file, CorruptRow, EventRow, FileRules, IndexError, Progress, Sink,
};
use cortex_buffer_core::indexer::integrity::Severity;
use cortex_buffer_core::indexer::timestamp::POSTGRES_EPOCH_OFFSET_US;
use cortex_buffer_core::shared::now_us;
use cortex_buffer_watch::scan::{first_object_of, FileStat};
use cortex_buffer_watch::volume::SessionRead;

/// Counts only: `file_integrity()` stores nothing.
struct Discard;

impl Sink for Discard {
    type Error = std::convert::Infallible;
    fn event(&mut self, _: EventRow<'_>) -> Result<(), Self::Error> {
        Ok(())
    }
    fn corrupt(&mut self, _: CorruptRow) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn recorded_dialect(path: &str) -> Option<Dialect> {
    as_definer(|| {
        Spi::get_one_with_args::<String>(
            "SELECT dialect FROM cortex_buffer.session_file WHERE path OPERATOR(pg_catalog.=) $1",
            &[path.into()],
        )
        .map_err(spi)
    })
    .ok()
    .flatten()
    .as_deref()
    .and_then(Dialect::from_label)
}

fn layout_of(rel: Option<&Path>) -> (Layout, String) {
    let parts: Vec<String> =
        rel.map(|p| p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let layout = classify(&parts).unwrap_or(Layout::DirectoryFile);
    (layout, parts.first().map(|s| (*s).to_owned()).unwrap_or_default())
}

fn ts(unix_us: Option<i64>) -> Option<TimestampWithTimeZone> {
    unix_us
        .and_then(|u| u.checked_sub(POSTGRES_EPOCH_OFFSET_US))
        .and_then(|pg| TimestampWithTimeZone::try_from(pg).ok())
}

/// Judges a session file's current bytes as the control plane's `scanBuffer` does and reports
/// its integrity; indexes nothing.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, strict)]
#[search_path(pg_catalog, pg_temp)]
fn file_integrity(
    path: &str,
) -> TableIterator<
    'static,
    (
        name!(total_lines, i64),
        name!(valid_lines, i64),
        name!(corrupt_lines, i64),
        name!(blank_lines, i64),
        name!(tail_truncated, bool),
        name!(tail_pending, bool),
        name!(corruption_ratio, f64),
        name!(severity, String),
        name!(trusted, bool),
        name!(seq_gaps, i64),
        name!(seq_resets, i64),
        name!(dialect, Option<String>),
        name!(seq_first_missing, Option<i64>),
        name!(first_ts, Option<TimestampWithTimeZone>),
        name!(last_ts, Option<TimestampWithTimeZone>),
    ),
> {
    let target = Target::of(path);
    let settings = Settings::current();
    let unreadable = |e: &std::io::Error, dialect: Option<Dialect>| {
        notice(format!("could not read \"{path}\": {e}"), Some("The file is unreadable: do not use it for recovery."));
        TableIterator::once((
            0,
            0,
            0,
            0,
            false,
            false,
            0.0,
            Severity::Unreadable.label().to_owned(),
            false,
            0,
            0,
            dialect.map(|d| d.label().to_owned()),
            None,
            None,
            None,
        ))
    };
    let recorded_as = target.recorded_as(path);
    let file = match target.open(path) {
        Ok(f) => f,
        Err(e) => return unreadable(&e, recorded_dialect(&recorded_as)),
    };
    let (layout, job_dir) = layout_of(target.rel());
    let file_name = Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dialect = recorded_dialect(&recorded_as).or_else(|| match first_object_of(&file) {
        Ok(first) => detect(&file_name, layout, first.as_ref()),
        Err(_) => None,
    });
    let stat = match file.metadata() {
        Ok(m) => FileStat::of(&m),
        Err(e) => return unreadable(&e, dialect),
    };
    let rules = FileRules {
        dialect,
        job_dir: &job_dir,
        max_line_bytes: settings.max_line_bytes,
        max_line_memory: settings.max_line_memory,
        settled: now_us().saturating_sub(stat.mtime_us) >= settings.settle_us,
        max_bytes: u64::MAX,
        resume: None,
    };
    // Read on this thread: every read checks for a cancel or a timeout first, and holes are
    // stepped over, so a huge sparse file costs what its data costs and stays cancellable.
    let reader = SessionRead::new(&file, || {
        pgrx::check_for_interrupts!();
    });
    let progress = match index_file(reader, Progress::default(), &rules, &mut Discard) {
        Ok(p) => p,
        Err(IndexError::Read(e)) => return unreadable(&e, dialect),
        Err(IndexError::Sink(never)) => match never {},
    };
    let i = &progress.integrity;
    let r = i.report(settings.max_corruption_ratio, false);
    TableIterator::once((
        i.total_lines,
        i.valid_lines,
        r.corrupt_lines,
        i.blank_lines,
        r.tail_truncated,
        progress.tail_pending,
        r.corruption_ratio,
        r.severity.label().to_owned(),
        r.trusted,
        i.seq_gaps,
        i.seq_resets,
        dialect.map(|d| d.label().to_owned()),
        i.seq_first_missing,
        ts(i.first_ts_us),
        ts(i.last_ts_us),
    ))
}
