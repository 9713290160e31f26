//! One pass of the indexer, as the background worker, `index_sessions()` and a lookup's
//! catch-up all run it: discovery (which session files exist and what changed, recorded in
//! `session_file`), then indexing each file that changed, each in a subtransaction so that a bad
//! file rolls back alone, is counted (and quarantined after repeated failures), and never stops
//! the files after it.
//!
//! Files are indexed in batches ([`BATCH_FILES`], [`BATCH_BYTES`]) whose statements they share
//! (one claim, one opening of the event table, one finish); a batch that fails is indexed again
//! file by file. The callers differ only in how batches are grouped into transactions
//! ([`Mode`]): a SQL caller's pass runs in its own transaction; the worker gives each batch one,
//! so the commit, not each file, is the fixed cost.
//! Everything a step does runs as `cortex_buffer_definer`, the role that alone may write the
//! index.

use pgrx::debug1;

use super::catalog_store;
use super::event_store;
use super::settings::Settings;
use crate::pg::privilege::as_definer;
use crate::pg::xact::{guarded, subtransaction, TxnFailure};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::index_plan::counts_against_file;
use cortex_buffer_core::indexer::reconcile::Known;
use cortex_buffer_watch::pass::{
    index_pass, run_pass, Catalog, FileIndexer, FileOutcome, FileRef, KnownCache, PassError, PassReport, Row, Scope,
    Stored, Work,
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
}

/// The `session_file` catalogue, each read and write isolated as the mode says.
struct IsolatedCatalog(Mode);

impl Catalog for IsolatedCatalog {
    type Error = TxnFailure;
    fn load(
        &mut self,
        root_prefix: &str,
        job_dir: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, Known>, TxnFailure> {
        self.0.catalog_step(|| catalog_store::load(root_prefix, job_dir))
    }
    fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Stored, TxnFailure> {
        self.0.catalog_step(|| catalog_store::store(rows, gone))
    }
}

/// How soon a file whose catalogue row (or new path) was held at discovery is looked at again,
/// at most: `retry_us` (the poll interval) when that is shorter.
const DISCOVERY_RETRY_US: i64 = 100_000;

/// A worker's batch: this many files, or this many new bytes, share one transaction (each file
/// in a subtransaction of it). Bounds what a crash or a rollback redoes, how long a batch holds
/// its files' row locks, and the memory its outcomes take.
pub const BATCH_FILES: usize = 64;
pub const BATCH_BYTES: u64 = 64 << 20;

/// Indexes each file isolated as the mode says; a failure is recorded in a step of its own.
struct IsolatedIndexer<'v, 'h> {
    mode: Mode,
    volume: &'v Volume,
    settings: Settings,
    now_us: i64,
    before_file: &'h mut dyn FnMut(&FileRef),
    /// Polled between files of a batch: a shutdown ends the batch early (and commits it).
    stop: fn() -> bool,
}

impl IsolatedIndexer<'_, '_> {
    /// One file in a subtransaction of the current transaction.
    fn one(&mut self, file: &FileRef) -> FileOutcome {
        (self.before_file)(file);
        let (volume, settings, now_us) = (self.volume, &self.settings, self.now_us);
        match subtransaction(|| as_definer(|| event_store::index_one(file, volume, settings, now_us))) {
            Ok(outcome) => outcome,
            Err(failure) => {
                let error = failure.to_string();
                if !counts_against_file(&failure.sqlstate()) {
                    // The server's trouble (the disk full, say), not the file's: retried, uncounted.
                    return FileOutcome::Failed { error, quarantined: false };
                }
                let quarantine_after = settings.quarantine_after;
                let quarantined = subtransaction(|| {
                    as_definer(|| event_store::record_failure(file.file_id, &error, quarantine_after))
                })
                .unwrap_or(false);
                FileOutcome::Failed { error, quarantined }
            }
        }
    }

    /// A batch with statements shared by all of its files ([`event_store::index_batch`]), in a
    /// subtransaction; if anything in it fails, it is rolled back and its files are indexed one
    /// by one, each in a subtransaction of its own, so the failure is counted against the file
    /// that caused it and the others still commit.
    fn batch(&mut self, files: &[FileRef]) -> Vec<FileOutcome> {
        let (volume, settings, now_us) = (self.volume, &self.settings, self.now_us);
        let before = &mut *self.before_file;
        match subtransaction(|| as_definer(|| event_store::index_batch(files, volume, settings, now_us, before))) {
            Ok(outcomes) if outcomes.len() == files.len() => outcomes,
            failed => {
                if let Err(e) = failed {
                    debug1!("cortex_buffer: a batch of {} files failed, indexing them one by one: {e}", files.len());
                }
                files.iter().map(|f| self.one(f)).collect()
            }
        }
    }

    /// Files in batches ([`BATCH_FILES`], [`BATCH_BYTES`]). The worker gives each batch a
    /// transaction of its own, whose commit makes all of its files' rows and offsets durable
    /// together, and reports the outcomes only once it has committed, so the pass never
    /// believes in work a failed commit undid. A SQL caller's batches share its transaction.
    fn run_batches(&mut self, work: &mut dyn Work) {
        loop {
            let mut files: Vec<FileRef> = Vec::new();
            let mut bytes = 0u64;
            let mut exhausted = false;
            while files.len() < BATCH_FILES && bytes < BATCH_BYTES && !(self.stop)() {
                let Some(file) = work.next() else {
                    exhausted = true;
                    break;
                };
                bytes = bytes.saturating_add(file.pending);
                files.push(file);
            }
            if files.is_empty() {
                return;
            }
            let outcomes = match self.mode {
                Mode::Caller => self.batch(&files),
                Mode::Worker => match guarded(|| Ok(self.batch(&files))) {
                    Ok(outcomes) => outcomes,
                    // A cancel (pg_cancel_backend() on the worker) or a failed commit: the
                    // batch's work is rolled back, which is no file's fault; all are tried again.
                    Err(failure) => {
                        let why = format!("its batch was rolled back: {failure}");
                        files.iter().map(|_| FileOutcome::Skipped(why.clone())).collect()
                    }
                },
            };
            for (file, outcome) in files.into_iter().zip(outcomes) {
                if !work.done(file, outcome) {
                    return;
                }
            }
            if exhausted || (self.stop)() {
                return;
            }
        }
    }
}

impl FileIndexer for IsolatedIndexer<'_, '_> {
    fn run(&mut self, work: &mut dyn Work) {
        self.run_batches(work);
    }
}

/// What a pass found and did.
pub struct Pass {
    pub report: PassReport,
    pub files: Vec<(String, FileOutcome)>,
}

fn never() -> bool {
    false
}

/// A caller's own pass (`index_sessions()`, a lookup's catch-up): a fresh catalogue, every new
/// byte there is, nothing to watch per file and no stopping early.
pub fn caller_pass(volume: &Volume, scope: Scope<'_>) -> Result<Pass, PassError<TxnFailure>> {
    let mut cache = KnownCache::default();
    pass(volume, scope, &mut cache, cortex_buffer_core::shared::now_us(), Mode::Caller, &mut |_| {}, never, |_, _| true)
}

/// Runs one pass over `volume` (or part of it). `before_file` sees each file before it is
/// indexed; `stop` is polled between files; `keep_going` sees each outcome and may stop the pass
/// (a shutdown).
#[allow(clippy::too_many_arguments)]
pub fn pass(
    volume: &Volume,
    scope: Scope<'_>,
    cache: &mut KnownCache,
    now_us: i64,
    mode: Mode,
    before_file: &mut dyn FnMut(&FileRef),
    stop: fn() -> bool,
    keep_going: impl FnMut(&str, &FileOutcome) -> bool,
) -> Result<Pass, PassError<TxnFailure>> {
    let report = run_pass(volume, scope, &mut IsolatedCatalog(mode), cache, now_us)?;
    let settings = Settings::current();
    let retry_us = settings.retry_us;
    let mut indexer = IsolatedIndexer { mode, volume, settings, now_us, before_file, stop };
    // The worker shares each pass fairly between job directories; a caller's own pass
    // (index_sessions(), a lookup's catch-up) takes everything there is.
    let share = match mode {
        Mode::Worker => Some(settings.pass_dir_bytes),
        Mode::Caller => None,
    };
    let dirs = match scope {
        Scope::Dirs(dirs) => Some(dirs),
        Scope::Volume | Scope::Dir(_) => None,
    };
    let mut files = index_pass(cache, &mut indexer, now_us, settings.settle_us, retry_us, share, dirs, keep_going);
    // Files whose rows another transaction held at discovery are busy as a claimed file is: a
    // catch-up waits for them (up to catch_up_wait), the worker looks at them again.
    let outcomes: std::collections::HashSet<String> =
        if report.busy.is_empty() { Default::default() } else { files.iter().map(|(p, _)| p.clone()).collect() };
    // Soon: what holds a row or a new path at discovery is mostly another pass's catalogue step
    // (two workers recording new files whose paths share a lock key), over in milliseconds.
    let again_us = now_us.saturating_add(retry_us.min(DISCOVERY_RETRY_US));
    for (path, dir) in &report.busy {
        cache.look_again(dir, again_us);
        if !outcomes.contains(path) {
            files.push((path.clone(), FileOutcome::Skipped(cortex_buffer_watch::pass::BUSY.to_owned())));
        }
    }
    Ok(Pass { report, files })
}
