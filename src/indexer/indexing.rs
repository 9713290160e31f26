//! One pass of the indexer, as both the background worker and `index_sessions()` run it:
//! discovery (which session files exist and what changed, recorded in `session_file`), then
//! indexing each file that changed, each isolated so that a bad file rolls back alone, is
//! counted (and quarantined after repeated failures), and never stops the files after it.
//!
//! The two callers differ only in how each step is isolated ([`Mode`]); everything a step does
//! runs as `cortex_buffer_definer`, the role that alone may write the index.

use std::time::Duration;

use super::catalog_store;
use super::event_store;
use super::settings::Settings;
use crate::pg::privilege::as_definer;
use crate::pg::xact::{guarded, subtransaction, TxnFailure};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::reconcile::Known;
use cortex_buffer_watch::pass::{
    index_pass, run_pass, Catalog, FileIndexer, FileOutcome, FileRef, KnownCache, PassError, PassReport, Row, Scope,
};
use cortex_buffer_watch::volume::Volume;

/// How the steps of a pass are isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `index_sessions()`: the catalogue in the caller's transaction, each file in a
    /// subtransaction of it.
    Caller,
    /// The background worker: every step in a transaction of its own.
    Worker,
}

impl Mode {
    fn catalog_step<R>(self, step: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
        match self {
            Mode::Caller => as_definer(step).map_err(TxnFailure::Refused),
            Mode::Worker => guarded(|| as_definer(step)),
        }
    }

    fn file_step<R>(self, step: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
        match self {
            Mode::Caller => subtransaction(|| as_definer(step)),
            Mode::Worker => guarded(|| as_definer(step)),
        }
    }
}

/// The `session_file` catalogue, each read and write isolated as the mode says.
struct IsolatedCatalog(Mode);

impl Catalog for IsolatedCatalog {
    type Error = TxnFailure;
    fn load(&mut self, root_prefix: &str) -> Result<std::collections::HashMap<String, Known>, TxnFailure> {
        self.0.catalog_step(|| catalog_store::load(root_prefix))
    }
    fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, TxnFailure> {
        self.0.catalog_step(|| catalog_store::store(rows, gone))
    }
}

/// Indexes each file isolated as the mode says; a failure is recorded in a step of its own.
struct IsolatedIndexer<'v, 'h> {
    mode: Mode,
    volume: &'v Volume,
    settings: Settings,
    now_us: i64,
    before_file: &'h mut dyn FnMut(&FileRef),
}

impl FileIndexer for IsolatedIndexer<'_, '_> {
    fn index(&mut self, file: &FileRef) -> FileOutcome {
        (self.before_file)(file);
        match self.mode.file_step(|| event_store::index_one(file, self.volume, &self.settings, self.now_us)) {
            Ok(outcome) => outcome,
            // pg_cancel_backend() on the worker: that file's work is rolled back, it is not the
            // file's fault. (In the caller's transaction a cancel ends the whole statement.)
            Err(failure) if failure.sqlstate() == "57014" => FileOutcome::Skipped("cancelled".into()),
            Err(failure) => {
                let error = failure.to_string();
                let quarantined = self
                    .mode
                    .file_step(|| event_store::record_failure(file.file_id, &error, self.settings.quarantine_after))
                    .unwrap_or(false);
                FileOutcome::Failed { error, quarantined }
            }
        }
    }
}

/// What a pass found and did.
pub struct Pass {
    pub report: PassReport,
    pub files: Vec<(String, FileOutcome)>,
}

/// A caller's own pass (`index_sessions()`, a lookup's catch-up): a fresh catalogue, every new
/// byte there is, nothing to watch per file and no stopping early.
pub fn caller_pass(volume: &Volume, scope: Scope<'_>) -> Result<Pass, PassError<TxnFailure>> {
    let mut cache = KnownCache::default();
    pass(
        volume,
        scope,
        &mut cache,
        Duration::ZERO,
        cortex_buffer_watch::pass::now_us(),
        Mode::Caller,
        &mut |_| {},
        |_, _| true,
    )
}

/// Runs one pass over `volume` (or one directory of it). `before_file` sees each file before
/// it is indexed; `keep_going` sees each outcome and may stop the pass (a shutdown).
#[allow(clippy::too_many_arguments)]
pub fn pass(
    volume: &Volume,
    scope: Scope<'_>,
    cache: &mut KnownCache,
    catalog_max_age: Duration,
    now_us: i64,
    mode: Mode,
    before_file: &mut dyn FnMut(&FileRef),
    keep_going: impl FnMut(&str, &FileOutcome) -> bool,
) -> Result<Pass, PassError<TxnFailure>> {
    let report = run_pass(volume, scope, &mut IsolatedCatalog(mode), cache, catalog_max_age, now_us)?;
    let settings = Settings::current();
    let mut indexer = IsolatedIndexer { mode, volume, settings, now_us, before_file };
    // The worker shares each pass fairly between job directories; a caller's own pass
    // (index_sessions(), a lookup's catch-up) takes everything there is.
    let share = match mode {
        Mode::Worker => Some(settings.pass_dir_bytes),
        Mode::Caller => None,
    };
    let files = index_pass(cache, &mut indexer, now_us, settings.settle_us, share, keep_going);
    Ok(Pass { report, files })
}
