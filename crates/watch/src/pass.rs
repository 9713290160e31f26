//! One discovery pass: scan the root, compare with the catalogue, detect dialects of new or
//! replaced files, and store the changes in one go. The background worker and
//! `index_sessions()` both run this; they differ only in the [`Catalog`] they pass (the worker
//! wraps each call in its own guarded transaction, the SQL function uses the caller's).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::{self, detect, Dialect};
use cortex_buffer_core::indexer::index_plan::{worth_a_look, IndexState};
use cortex_buffer_core::indexer::normalize::uuid_bytes;
use cortex_buffer_core::indexer::reconcile::{plan, under, Action, Decision, Known};

use super::scan::{
    first_object_of, open_scanned, relative, scan_dir, scan_root_with, DirSeen, FileStat, Found, ListingMode, Listings,
    Problem,
};
use super::volume::Volume;

/// A row to insert or update in `session_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub path: String,
    pub job_dir: String,
    pub dialect: Option<Dialect>,
    pub stat: FileStat,
    /// See [`dialect::session_ordinal`].
    pub ordinal: Option<i64>,
    /// The job directory as a UUID, when it is one.
    pub job_id: Option<[u8; 16]>,
}

/// Where discovery results are kept (the `session_file` table, or a map in tests).
pub trait Catalog {
    type Error: std::fmt::Display;
    /// Everything recorded for paths starting with `root_prefix`; when `job_dir` is given, all
    /// of them are in that directory of the volume (one job's catch-up), and the lookup may use
    /// it to read the job's own rows only.
    fn load(&mut self, root_prefix: &str, job_dir: Option<&str>) -> Result<BTreeMap<String, Known>, Self::Error>;
    /// Upserts `rows` (refreshing `last_seen`) and marks `gone` paths as gone, atomically; says
    /// which it did. What another indexer holds is left out (the pass counts it busy).
    fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Stored, Self::Error>;
}

/// What [`Catalog::store`] recorded.
#[derive(Debug, Default)]
pub struct Stored {
    /// The `file_id` of every upserted path.
    pub ids: Vec<(String, i64)>,
    /// The paths marked gone.
    pub gone: Vec<String>,
}

/// What the catalogue holds, cached between passes of the worker: loaded once (and again only
/// after [`invalidate`](KnownCache::invalidate): a reload of the configuration, a wait), then
/// kept up to date by the passes themselves. Rows others change (`index_sessions()`, a lookup's
/// catch-up) need no reload: indexing claims each file's row and works from what it holds.
#[derive(Debug, Default)]
pub struct KnownCache {
    root_prefix: String,
    entries: BTreeMap<String, Known>,
    loaded: bool,
    /// Passes so far: where the next one starts in its round of directories.
    passes: usize,
    /// `(this process, processes)`: only the directories this process owns ([`owner`]) are
    /// kept from the catalogue, so memory per process is its share of the files.
    partition: Option<(usize, usize)>,
    /// When each job directory with unfinished work must be looked at again (microseconds
    /// since the epoch): a tail waiting to settle, a failure or a busy file to retry, a share
    /// left for the next pass. What keeps such files from waiting for the next full rescan.
    timers: BTreeMap<String, i64>,
    /// Whether an entry may be quarantined: set when the catalogue is read and when a pass
    /// quarantines a file, cleared when a look finds none. The worker asks every poll_interval;
    /// without it each ask walked every entry (12 ms a second at 100 000 files, idle).
    maybe_quarantined: bool,
    /// Directory listings a whole-volume walk keeps for the next one (off unless the worker
    /// turns them on: see [`Listings`]).
    listings: Listings,
}

impl KnownCache {
    fn fresh_for(&self, root_prefix: &str) -> bool {
        self.loaded && self.root_prefix == root_prefix
    }

    pub fn invalidate(&mut self) {
        self.loaded = false;
        self.timers.clear();
    }

    /// What the next whole-volume walks do with directory listings (see [`Listings`]).
    pub fn set_listing_mode(&mut self, mode: ListingMode) {
        self.listings.set_mode(mode);
    }

    /// Keeps only the directories process `me` of `workers` owns (from the next load on).
    pub fn set_partition(&mut self, me: usize, workers: usize) {
        self.partition = (workers > 1).then_some((me, workers));
    }

    /// Asks for job directory `dir` to be looked at again at `at_us` (or sooner, if it already
    /// has an earlier timer).
    pub fn look_again(&mut self, dir: &str, at_us: i64) {
        let t = self.timers.entry(dir.to_owned()).or_insert(at_us);
        *t = (*t).min(at_us);
    }

    /// Forgets the timers (a full walk follows, which sets them again).
    pub fn invalidate_timers(&mut self) {
        self.timers.clear();
    }

    /// Whether the catalogue has been read.
    pub fn loaded(&self) -> bool {
        self.loaded
    }

    pub fn len(&self) -> usize {
        self.entries.values().filter(|k| !k.gone).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The earliest timer, if any.
    pub fn next_timer(&self) -> Option<i64> {
        self.timers.values().copied().min()
    }

    /// The job directories whose timer is due at `now_us`.
    pub fn due(&self, now_us: i64) -> BTreeSet<String> {
        self.timers.iter().filter(|(_, at)| **at <= now_us).map(|(d, _)| d.clone()).collect()
    }

    /// The present files the cache holds quarantined: the worker asks the catalogue now and then
    /// whether `clear_quarantine()` released them.
    pub fn quarantined(&mut self) -> Vec<String> {
        if !self.maybe_quarantined {
            return Vec::new();
        }
        let held: Vec<String> =
            self.entries.iter().filter(|(_, k)| k.index.quarantined && !k.gone).map(|(p, _)| p.clone()).collect();
        self.maybe_quarantined = !held.is_empty();
        held
    }

    /// Forgets that `path` is quarantined (its row says it no longer is) and looks at its
    /// directory at `at_us`.
    pub fn release(&mut self, path: &str, at_us: i64) {
        let dir = match self.entries.get_mut(path) {
            Some(k) => {
                k.index.quarantined = false;
                k.job_dir.clone()
            }
            None => return,
        };
        self.look_again(&dir, at_us);
    }

    /// Directories with a timer (for tests and status).
    pub fn timers(&self) -> usize {
        self.timers.len()
    }

    /// The job directories of the files present in the catalogue.
    pub fn dirs(&self) -> BTreeSet<String> {
        let mut dirs = BTreeSet::new();
        for k in self.entries.values().filter(|k| !k.gone) {
            if !dirs.contains(&k.job_dir) {
                dirs.insert(k.job_dir.clone());
            }
        }
        dirs
    }

    fn dir_prefix(&self, dir: &str) -> String {
        format!("{}{dir}/", self.root_prefix)
    }
}

/// One line of `index_sessions()` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    pub path: String,
    pub job_dir: Option<String>,
    pub dialect: Option<Dialect>,
    pub size_bytes: Option<u64>,
    pub action: Action,
    pub detail: Option<String>,
}

#[derive(Debug, Default)]
pub struct PassReport {
    pub files: Vec<FileReport>,
    pub problems: Vec<Problem>,
    pub written: usize,
    pub gone: usize,
    /// The directories the pass's walk descended into (for the watcher).
    pub dirs: Vec<DirSeen>,
    /// Files whose catalogue rows another transaction held, so the pass could not record them
    /// (path, job directory): they are [`BUSY`], and looked at again.
    pub busy: Vec<(String, String)>,
}

impl PassReport {
    pub fn present(&self) -> usize {
        self.files.iter().filter(|f| !matches!(f.action, Action::Gone | Action::Skipped)).count()
    }
}

#[derive(Debug)]
pub enum PassError<E> {
    /// The root could not be walked at all.
    Root(CbError),
    /// Reading or writing the catalogue failed; nothing was stored.
    Catalog(E),
}

impl<E: std::fmt::Display> std::fmt::Display for PassError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PassError::Root(e) => write!(f, "{e}"),
            PassError::Catalog(e) => write!(f, "{e}"),
        }
    }
}

/// What a pass walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The whole volume.
    Volume,
    /// One top-level directory (a job's), with a catalogue of its own: a call-time catch-up.
    Dir(&'a str),
    /// Some top-level directories of the volume, against the volume's catalogue: what the
    /// watcher (or a timer) says changed.
    Dirs(&'a BTreeSet<String>),
}

/// Runs one pass over the volume (from `scan::resolve_root`), or part of it.
pub fn run_pass<C: Catalog>(
    volume: &Volume,
    scope: Scope<'_>,
    catalog: &mut C,
    cache: &mut KnownCache,
    now_us: i64,
) -> Result<PassReport, PassError<C::Error>> {
    let volume_prefix = format!("{}/", volume.path().display());
    let cache_prefix = match scope {
        Scope::Volume | Scope::Dirs(_) => volume_prefix.clone(),
        Scope::Dir(dir) => format!("{volume_prefix}{dir}/"),
    };
    load_cache(scope, catalog, cache, &cache_prefix)?;
    // Each walked directory with the prefix under which its known files are.
    let walks: Vec<(crate::scan::Scan, String)> = match scope {
        Scope::Volume => vec![(scan_root_with(volume, &mut cache.listings).map_err(PassError::Root)?, volume_prefix)],
        Scope::Dir(dir) => vec![(scan_dir(volume, dir), cache_prefix)],
        Scope::Dirs(dirs) => dirs.iter().map(|d| (scan_dir(volume, d), format!("{volume_prefix}{d}/"))).collect(),
    };

    let mut report = PassReport::default();
    let mut decisions = Vec::new();
    let mut missing = Vec::new();
    for (scan, prefix) in walks {
        report.problems.extend(scan.problems);
        report.dirs.extend(scan.dirs);
        let plan = plan(scan.files, &cache.entries, &prefix);
        decisions.extend(plan.decisions);
        missing.extend(plan.missing);
    }
    let rows = rows_of(volume, decisions, &mut report);
    // A path missing from the walk is only gone if it really no longer exists; an unreadable
    // directory hides files without removing them.
    let gone: Vec<String> =
        missing.into_iter().filter(|p| relative(volume, p).is_ok_and(|rel| volume.is_gone(&rel))).collect();

    let mut stored = Stored::default();
    if !rows.is_empty() || !gone.is_empty() {
        stored = catalog.store(&rows, &gone).map_err(|e| {
            cache.invalidate();
            PassError::Catalog(e)
        })?;
    }
    let ids: HashMap<String, i64> = stored.ids.into_iter().collect();
    remember(cache, &rows, &ids, &mut report, now_us);
    let marked = mark_gone(cache, &gone, &stored.gone, &mut report);
    for p in &report.problems {
        report.files.push(FileReport {
            path: p.path.clone(),
            job_dir: None,
            dialect: None,
            size_bytes: None,
            action: Action::Skipped,
            detail: Some(p.reason.clone()),
        });
    }
    report.written = ids.len();
    report.gone = marked;
    Ok(report)
}

/// Loads the catalogue's rows under `cache_prefix` into the cache, unless it holds them already.
fn load_cache<C: Catalog>(
    scope: Scope<'_>,
    catalog: &mut C,
    cache: &mut KnownCache,
    cache_prefix: &str,
) -> Result<(), PassError<C::Error>> {
    if !cache.fresh_for(cache_prefix) {
        if cache.root_prefix != cache_prefix {
            cache.listings.forget();
        }
        let job_dir = match scope {
            Scope::Dir(dir) => Some(dir),
            Scope::Volume | Scope::Dirs(_) => None,
        };
        cache.entries = catalog.load(cache_prefix, job_dir).map_err(PassError::Catalog)?;
        if let Some((me, workers)) = cache.partition {
            cache.entries.retain(|_, k| owner(&k.job_dir, workers) == me);
        }
        cache.root_prefix = cache_prefix.to_owned();
        cache.loaded = true;
        cache.timers.clear();
        cache.maybe_quarantined = true;
    }
    Ok(())
}

/// The catalogue rows the pass's decisions write (each file's dialect detected where it must
/// be), with every decision reported.
fn rows_of(volume: &Volume, decisions: Vec<Decision>, report: &mut PassReport) -> Vec<Row> {
    let mut rows = Vec::new();
    for mut decision in decisions {
        if decision.detect {
            decision.dialect = detect_dialect(volume, &decision.found, &mut report.problems);
        }
        if decision.write {
            rows.push(Row {
                ordinal: dialect::session_ordinal(&decision.found.file_name),
                job_id: uuid_bytes(&decision.found.job_dir),
                path: decision.found.path.clone(),
                job_dir: decision.found.job_dir.clone(),
                dialect: decision.dialect,
                stat: decision.found.stat,
            });
        }
        report.files.push(FileReport {
            path: decision.found.path,
            job_dir: Some(decision.found.job_dir),
            dialect: decision.dialect,
            size_bytes: Some(decision.found.stat.size),
            action: decision.action,
            detail: decision.detail.map(str::to_owned),
        });
    }
    rows
}

/// Remembers the rows the catalogue stored (`ids`) in the cache; a row it could not store
/// (held by another transaction) is reported busy, so the next pass sees the change again.
fn remember(cache: &mut KnownCache, rows: &[Row], ids: &HashMap<String, i64>, report: &mut PassReport, now_us: i64) {
    let report_at: HashMap<String, usize> = if ids.len() < rows.len() {
        report.files.iter().enumerate().map(|(i, f)| (f.path.clone(), i)).collect()
    } else {
        HashMap::new()
    };
    for row in rows {
        let Some(&file_id) = ids.get(&row.path) else {
            // Another transaction holds the row (or the new path): the cache keeps what it
            // knew, so the next pass sees the change again, and the caller hears it was busy.
            report.busy.push((row.path.clone(), row.job_dir.clone()));
            if let Some(f) = report_at.get(&row.path).and_then(|&i| report.files.get_mut(i)) {
                f.detail = Some(BUSY.to_owned());
            }
            continue;
        };
        cache
            .entries
            .entry(row.path.clone())
            .and_modify(|k| {
                if !k.stat.same_identity(&row.stat) {
                    k.index.quarantined = false;
                }
                k.file_id = file_id;
                k.stat = row.stat;
                k.dialect = row.dialect;
                k.last_seen_us = now_us;
                k.gone = false;
            })
            .or_insert_with(|| Known {
                file_id,
                job_dir: row.job_dir.clone(),
                stat: row.stat,
                dialect: row.dialect,
                last_seen_us: now_us,
                gone: false,
                index: IndexState::default(),
            });
    }
}

/// Marks the files the catalogue marked gone (`marked`) gone in the cache and reports them; the
/// others' rows are held elsewhere (busy). How many were marked.
fn mark_gone(cache: &mut KnownCache, gone: &[String], marked: &[String], report: &mut PassReport) -> usize {
    let marked: std::collections::HashSet<&String> = marked.iter().collect();
    for path in gone {
        if !marked.contains(path) {
            // Its row is held elsewhere: still live in the cache, so a later pass finds it
            // missing again.
            if let Some(k) = cache.entries.get(path) {
                report.busy.push((path.clone(), k.job_dir.clone()));
            }
            continue;
        }
        if let Some(k) = cache.entries.get_mut(path) {
            k.gone = true;
        }
        report.files.push(FileReport {
            path: path.clone(),
            job_dir: None,
            dialect: None,
            size_bytes: None,
            action: Action::Gone,
            detail: None,
        });
    }
    marked.len()
}

fn detect_dialect(volume: &Volume, found: &Found, problems: &mut Vec<Problem>) -> Option<Dialect> {
    let first = relative(volume, &found.path)
        .and_then(|rel| open_scanned(volume, &rel, &found.stat))
        .and_then(|file| first_object_of(&file));
    match first {
        Ok(first) => detect(&found.file_name, found.layout, first.as_ref()),
        Err(e) => {
            problems.push(Problem {
                path: found.path.clone(),
                reason: format!("could not read to detect its dialect: {e}"),
            });
            dialect::from_name(&found.file_name, found.layout)
        }
    }
}

/// A file to index, as the pass hands it to a [`FileIndexer`].
#[derive(Debug, Clone)]
pub struct FileRef {
    pub file_id: i64,
    pub path: String,
    pub job_dir: String,
    pub dialect: Option<Dialect>,
    /// The device and inode the pass saw at the path: what is opened must be this file.
    pub device: u64,
    pub inode: u64,
    /// The most bytes to take from it in this pass (what is left of its directory's share).
    pub budget: u64,
    /// Bytes the pass saw beyond the indexed offset (at most `budget`): what a batch of files
    /// weighs.
    pub pending: u64,
}

/// Why a file was skipped when another indexer holds its row.
pub const BUSY: &str = "being indexed by another session";
/// Why a file was skipped when its catalogue row is gone or records another path: the
/// catalogue changed under the cache (re-created, or rows removed), which must be read again.
pub const STALE: &str = "its catalogue row is gone or records another path; the catalogue is read again";

/// What indexing one file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// Indexed (or found nothing to add): the state as committed.
    Indexed { state: IndexState, events: u64, corrupt: u64, note: Option<String>, was_offset: u64 },
    /// Left alone this time (another indexer holds it, or it vanished).
    Skipped(String),
    /// Failed and rolled back; the failure was counted.
    Failed { error: String, quarantined: bool },
}

/// The files of a pass, handed out one at a time, and where their outcomes go.
pub trait Work {
    /// The next file to index, or `None` when the pass is done (or must stop).
    fn next(&mut self) -> Option<FileRef>;
    /// The outcome of a file, once it is durable in the indexer's terms (its transaction
    /// committed); returns false when the pass must stop (a shutdown).
    fn done(&mut self, file: FileRef, outcome: FileOutcome) -> bool;
}

/// Indexes the files a [`Work`] hands out. The worker groups several files into one
/// transaction, each in a subtransaction, and reports their outcomes after the commit; a SQL
/// caller indexes each in a subtransaction of its own transaction.
pub trait FileIndexer {
    fn run(&mut self, work: &mut dyn Work);
}

/// The indexing half of a pass: every present file that is worth a look (under `dirs` only,
/// when given) is handed to `indexer`, directory by directory, and within one in path order; the
/// cache learns each outcome, and `keep_going` sees it (returning false stops the pass: a
/// shutdown). Afterwards each directory looked at whose files still have work gets a timer
/// (see [`KnownCache::due`]): `retry_us` from now for a file that failed or was busy, the end of
/// its settle period for a tail that waits to settle, and now for a share left for later.
///
/// With `dir_share`, each job directory gets at most that many bytes in this pass (its files
/// take their share in turn; the rest waits for the next pass), and each pass starts one
/// directory further round, so one job's volume delays another's lines by at most one share
/// of each busy directory per pass (docs/operations.md: fairness).
#[allow(clippy::too_many_arguments)]
pub fn index_pass<I: FileIndexer + ?Sized>(
    cache: &mut KnownCache,
    indexer: &mut I,
    now_us: i64,
    settle_us: i64,
    retry_us: i64,
    dir_share: Option<u64>,
    dirs: Option<&BTreeSet<String>>,
    keep_going: impl FnMut(&str, &FileOutcome) -> bool,
) -> Vec<(String, FileOutcome)> {
    let candidates: Vec<(&String, &Known)> = match dirs {
        None => under(&cache.entries, &cache.root_prefix).collect(),
        Some(dirs) => {
            let prefixes: Vec<String> = dirs.iter().map(|d| cache.dir_prefix(d)).collect();
            prefixes.iter().flat_map(|p| under(&cache.entries, p).collect::<Vec<_>>()).collect()
        }
    };
    let mut todo: Vec<(FileRef, u64)> = candidates
        .into_iter()
        .filter(|(_, k)| !k.gone && k.file_id > 0 && worth_a_look(&k.index, &k.stat, k.dialect, now_us, settle_us))
        .map(|(path, k)| {
            let file = FileRef {
                file_id: k.file_id,
                path: path.clone(),
                job_dir: k.job_dir.clone(),
                dialect: k.dialect,
                device: k.stat.device,
                inode: k.stat.inode,
                budget: u64::MAX,
                pending: k.stat.size.saturating_sub(k.index.offset),
            };
            (file, k.index.offset)
        })
        .collect();
    todo.sort_by(|a, b| (&a.0.job_dir, &a.0.path).cmp(&(&b.0.job_dir, &b.0.path)));
    // Round-robin over directories: this pass starts at the `passes`-th one.
    let mut order: Vec<&str> = todo.iter().map(|(f, _)| f.job_dir.as_str()).collect();
    order.dedup();
    let first_dir = order.get(cache.passes % order.len().max(1)).map(|d| (*d).to_owned());
    cache.passes = cache.passes.wrapping_add(1);
    if let Some(first) = first_dir {
        let at = todo.iter().position(|(f, _)| f.job_dir == first).unwrap_or(0);
        todo.rotate_left(at);
    }

    let mut work = PassWork {
        todo: todo.into_iter(),
        dir_share,
        spent: HashMap::new(),
        entries: &mut cache.entries,
        keep_going,
        stopped: false,
        outcomes: Vec::new(),
        left_for_later: BTreeSet::new(),
        retry: BTreeSet::new(),
        capped: BTreeSet::new(),
        stale: false,
        quarantined: false,
    };
    indexer.run(&mut work);
    let PassWork { outcomes, left_for_later, retry, stale, quarantined, .. } = work;
    cache.maybe_quarantined |= quarantined;
    if stale {
        // Read the catalogue again at the next pass (a full walk follows a reload).
        cache.invalidate();
        return outcomes;
    }

    // Timers for the directories looked at.
    let looked_at: Vec<String> = match dirs {
        Some(dirs) => dirs.iter().cloned().collect(),
        None => {
            cache.timers.clear();
            Vec::new()
        }
    };
    for d in &looked_at {
        cache.timers.remove(d);
    }
    let set = |timers: &mut BTreeMap<String, i64>, dir: &str, at: i64| {
        let t = timers.entry(dir.to_owned()).or_insert(at);
        *t = (*t).min(at);
    };
    let scan: Vec<(&String, &Known)> = match dirs {
        None => under(&cache.entries, &cache.root_prefix).collect(),
        Some(_) => {
            let prefixes: Vec<String> = looked_at.iter().map(|d| cache.dir_prefix(d)).collect();
            prefixes.iter().flat_map(|p| under(&cache.entries, p).collect::<Vec<_>>()).collect()
        }
    };
    let mut timers = std::mem::take(&mut cache.timers);
    for (path, k) in scan {
        if k.gone || k.file_id <= 0 || k.index.quarantined {
            continue;
        }
        if left_for_later.contains(path) {
            set(&mut timers, &k.job_dir, now_us);
        } else if retry.contains(path) || worth_a_look(&k.index, &k.stat, k.dialect, now_us, settle_us) {
            set(&mut timers, &k.job_dir, now_us.saturating_add(retry_us));
        } else if k.index.tail_pending && k.stat.mtime_us == k.index.mtime_us {
            set(&mut timers, &k.job_dir, k.stat.mtime_us.saturating_add(settle_us));
        }
    }
    cache.timers = timers;
    outcomes
}

/// The [`Work`] of one [`index_pass`].
struct PassWork<'c, K: FnMut(&str, &FileOutcome) -> bool> {
    todo: std::vec::IntoIter<(FileRef, u64)>,
    dir_share: Option<u64>,
    spent: HashMap<String, u64>,
    entries: &'c mut BTreeMap<String, Known>,
    keep_going: K,
    stopped: bool,
    outcomes: Vec<(String, FileOutcome)>,
    /// Files not handed out because their directory's share was spent.
    left_for_later: BTreeSet<String>,
    /// Files that failed or were skipped: to be tried again after a while.
    retry: BTreeSet<String>,
    /// Files handed out with less than their new bytes (their directory's share): the rest is
    /// for the next pass, at once.
    capped: BTreeSet<String>,
    /// A file's row was gone or re-used: the catalogue must be read again.
    stale: bool,
    /// A file came out of the pass quarantined.
    quarantined: bool,
}

impl<K: FnMut(&str, &FileOutcome) -> bool> Work for PassWork<'_, K> {
    fn next(&mut self) -> Option<FileRef> {
        if self.stopped {
            return None;
        }
        for (mut file, _) in self.todo.by_ref() {
            if let Some(share) = self.dir_share {
                let used = self.spent.get(&file.job_dir).copied().unwrap_or(0);
                if used >= share {
                    self.left_for_later.insert(file.path);
                    continue;
                }
                file.budget = share - used;
                if file.pending > file.budget {
                    self.capped.insert(file.path.clone());
                }
                file.pending = file.pending.min(file.budget);
                // Counted when handed out, so that files of one directory in one batch share it.
                *self.spent.entry(file.job_dir.clone()).or_insert(0) += file.pending.max(1);
            }
            return Some(file);
        }
        None
    }

    fn done(&mut self, file: FileRef, outcome: FileOutcome) -> bool {
        if let Some(k) = self.entries.get_mut(&file.path) {
            match &outcome {
                FileOutcome::Indexed { state, .. } => {
                    k.index = state.clone();
                    self.quarantined |= state.quarantined;
                    if self.capped.contains(&file.path) {
                        self.left_for_later.insert(file.path.clone());
                    }
                }
                FileOutcome::Failed { quarantined, .. } => {
                    k.index.quarantined = *quarantined;
                    self.quarantined |= *quarantined;
                    self.retry.insert(file.path.clone());
                }
                FileOutcome::Skipped(why) => {
                    self.stale |= why == STALE;
                    self.retry.insert(file.path.clone());
                }
            }
        }
        let more = (self.keep_going)(&file.path, &outcome);
        self.outcomes.push((file.path, outcome));
        if !more {
            self.stopped = true;
        }
        more
    }
}

/// Indexes one file at a time with a function (the tests' indexer).
#[cfg(test)]
pub struct EachFile<F: FnMut(&FileRef) -> FileOutcome>(pub F);

#[cfg(test)]
impl<F: FnMut(&FileRef) -> FileOutcome> FileIndexer for EachFile<F> {
    fn run(&mut self, work: &mut dyn Work) {
        while let Some(file) = work.next() {
            let outcome = (self.0)(&file);
            if !work.done(file, outcome) {
                break;
            }
        }
    }
}

/// Which of `workers` indexer processes owns job directory `dir`: a hash of its name (FNV-1a),
/// so every process agrees without asking, and a directory's files are always indexed by the
/// same process.
pub fn owner(dir: &str, workers: usize) -> usize {
    usize::try_from(fnv1a(dir.as_bytes()) % u64::try_from(workers.max(1)).unwrap_or(1)).unwrap_or(0)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// How many advisory-lock keys the new-path locks of all paths share: a transaction recording
/// 100 000 new files holds at most this many locks, which the shared lock table can hold.
pub const NEW_PATH_KEYS: usize = 128;

/// How many paths a transaction may record with a lock of their own each
/// ([`new_path_path_key`]), under a shared lock on their [`new_path_key`]: such small recorders
/// (a catch-up, a pass over what changed) make each other's new files busy only on the same
/// path, however long their transactions last. A statement that would take the transaction past
/// it takes the shared keys themselves, exclusively, so that a transaction holds at most this
/// many own locks and [`NEW_PATH_KEYS`] shared ones, however many files it records; such paths
/// conflict with every recorder of a path with the same key until it ends, as all paths did
/// before.
pub const OWN_NEW_PATH_LOCKS_UP_TO: usize = 64;

/// How a statement takes the new-path locks of the paths it records (or, in a cleanup,
/// deletes): see [`OWN_NEW_PATH_LOCKS_UP_TO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewPathLocks {
    /// Shared on each path's key, exclusive on the path's own.
    Own,
    /// Exclusive on each path's key (one shared by many paths).
    SharedKeys,
    /// None, and no new path recorded: a lookup's catch-up past its share of locks, which in
    /// the caller's transaction must not hold keys other jobs' paths share; the worker records
    /// the rest.
    Deferred,
}

impl NewPathLocks {
    /// For a statement that records `paths` paths in a transaction that already took `own`
    /// locks of paths' own.
    pub fn for_paths(own: usize, paths: usize) -> NewPathLocks {
        if own.saturating_add(paths) <= OWN_NEW_PATH_LOCKS_UP_TO {
            NewPathLocks::Own
        } else {
            NewPathLocks::SharedKeys
        }
    }
}

/// The key of `path`'s own new-path lock (see [`OWN_NEW_PATH_LOCKS_UP_TO`]): a hash of the
/// whole path, so that two paths share one only by a 32-bit collision.
pub fn new_path_path_key(path: &str) -> i32 {
    let h = mix(fnv1a(path.as_bytes())).to_le_bytes();
    i32::from_le_bytes([h[0] ^ h[4], h[1] ^ h[5], h[2] ^ h[6], h[3] ^ h[7]])
}

/// MurmurHash3's 64-bit finaliser: every bit of the result depends on every bit of `h`.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The second key of the new-path lock of `path` (in the first-level directory `job_dir`) with
/// `workers` indexer processes. The keys are split between the processes by [`owner`]: two
/// processes recording their own new files at the same time never meet on a key (with 128
/// keys shared by all, each pass of one made nearly every new path of the other busy, to be
/// retried 100 ms later). Everyone who records or deletes a path without a row computes the
/// same key for it, whatever process it runs in.
pub fn new_path_key(job_dir: &str, path: &str, workers: usize) -> i32 {
    let workers = workers.max(1);
    let per_owner = (NEW_PATH_KEYS / workers).max(1);
    // FNV-1a's low bits depend only on the inputs' low bits: mixed (MurmurHash3's finaliser)
    // before the remainder, so that similar paths spread over the owner's keys.
    let h = mix(fnv1a(path.as_bytes()));
    let slot = usize::try_from(h % u64::try_from(per_owner).unwrap_or(1)).unwrap_or(0);
    i32::try_from(owner(job_dir, workers).saturating_mul(per_owner).saturating_add(slot)).unwrap_or(i32::MAX)
}

/// The first-level directory of `path` below the volume path `root` (the component after
/// it): what [`new_path_key`] takes. Empty for a path not below `root`.
pub fn job_dir_below<'p>(root: &str, path: &'p str) -> &'p str {
    path.strip_prefix(root.trim_end_matches('/'))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("")
}

/// The first-level directory names of the volume (UTF-8 ones: the others hold no session file
/// the walk would index).
pub fn top_dirs(volume: &Volume) -> Result<Vec<String>, CbError> {
    let shown = volume.path().display().to_string();
    let root =
        volume.open_dir(std::path::Path::new("")).map_err(|e| CbError::io("open sessions directory", &shown, &e))?;
    let names = volume.list(&root).map_err(|e| CbError::io("list sessions directory", &shown, &e))?;
    Ok(names.into_iter().filter_map(|n| n.into_string().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cortex_buffer_core::shared::now_us;
    use std::fs;
    use std::path::PathBuf;

    /// The catalogue as a map, recording how often it was touched.
    #[derive(Default)]
    struct MapCatalog {
        rows: BTreeMap<String, Known>,
        loads: usize,
        stores: usize,
        fail_store: bool,
        /// Paths whose rows another transaction holds: neither recorded nor marked gone.
        held: BTreeSet<String>,
    }

    impl Catalog for MapCatalog {
        type Error = String;
        fn load(&mut self, root_prefix: &str, job_dir: Option<&str>) -> Result<BTreeMap<String, Known>, String> {
            self.loads += 1;
            Ok(self
                .rows
                .iter()
                .filter(|(p, k)| p.starts_with(root_prefix) && job_dir.is_none_or(|d| k.job_dir == d))
                .map(|(p, k)| (p.clone(), k.clone()))
                .collect())
        }
        fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Stored, String> {
            if self.fail_store {
                return Err("disk full".into());
            }
            self.stores += 1;
            let mut stored = Stored::default();
            for r in rows.iter().filter(|r| !self.held.contains(&r.path)) {
                let next = self.rows.len() as i64 + 1;
                let file_id = self.rows.get(&r.path).map_or(next, |k| k.file_id);
                self.rows.insert(
                    r.path.clone(),
                    Known {
                        file_id,
                        job_dir: r.job_dir.clone(),
                        stat: r.stat,
                        dialect: r.dialect,
                        last_seen_us: 0,
                        gone: false,
                        index: IndexState::default(),
                    },
                );
                stored.ids.push((r.path.clone(), file_id));
            }
            for g in gone.iter().filter(|g| !self.held.contains(*g)) {
                if let Some(k) = self.rows.get_mut(g) {
                    k.gone = true;
                    stored.gone.push(g.clone());
                }
            }
            Ok(stored)
        }
    }

    struct Root(PathBuf);
    impl Root {
        fn new(tag: &str) -> Root {
            let p = std::env::temp_dir().join(format!("cb-pass-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{e}"));
            Root(fs::canonicalize(&p).unwrap_or(p))
        }
        fn put(&self, rel: &str, body: &str) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap_or(&self.0)).unwrap_or_else(|e| panic!("{e}"));
            fs::write(p, body).unwrap_or_else(|e| panic!("{e}"));
        }
        fn volume(&self) -> Volume {
            Volume::open(&self.0).unwrap_or_else(|e| panic!("{e}"))
        }
        fn path(&self, rel: &str) -> String {
            self.0.join(rel).display().to_string()
        }
    }
    impl Drop for Root {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn actions(r: &PassReport) -> Vec<(String, &'static str)> {
        r.files.iter().map(|f| (f.path.rsplit('/').next().unwrap_or_default().to_owned(), f.action.label())).collect()
    }

    #[test]
    fn first_pass_records_files_with_their_dialects_and_second_pass_writes_nothing() {
        let root = Root::new("two-passes");
        root.put(
            "job1/session-001.jsonl",
            "{\"version\":\"1.0\",\"jobId\":\"j\",\"type\":\"SESSION_START\",\"timestamp\":\"t\"}\n",
        );
        root.put("job2/session_20260101T000000Z_pod.jsonl", "");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        let r1 =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r1.written, 2);
        assert_eq!(cat.rows[&root.path("job1/session-001.jsonl")].dialect, Some(Dialect::CortexPlane));
        assert_eq!(cat.rows[&root.path("job2/session_20260101T000000Z_pod.jsonl")].dialect, Some(Dialect::CortexSpike));

        let r2 =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r2.written, cat.stores, cat.loads), (0, 1, 1), "an idle pass must not touch the catalogue");
        assert_eq!(actions(&r2).iter().map(|a| a.1).collect::<Vec<_>>(), vec!["unchanged", "unchanged"]);
    }

    #[test]
    fn growth_deletion_and_problems_are_reported() {
        let root = Root::new("changes");
        root.put("job/a.jsonl", "{\"__type__\":\"X\"}\n");
        root.put("job/b.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));

        root.put("job/a.jsonl", "{\"__type__\":\"X\"}\n{\"__type__\":\"Y\"}\n");
        fs::remove_file(root.0.join("job/b.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("../../../../../../etc/hostname", root.0.join("job/c.jsonl"))
            .unwrap_or_else(|e| panic!("{e}"));
        let r =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            actions(&r),
            vec![("a.jsonl".into(), "changed"), ("b.jsonl".into(), "gone"), ("c.jsonl".into(), "skipped")]
        );
        assert!(cat.rows[&root.path("job/b.jsonl")].gone);
        assert_eq!(cat.rows[&root.path("job/a.jsonl")].dialect, Some(Dialect::WinkLog));
        assert_eq!(r.present(), 1);
    }

    #[test]
    fn a_failed_store_leaves_the_cache_to_be_reloaded() {
        let root = Root::new("fail");
        root.put("job/a.jsonl", "{}\n");
        let mut cat = MapCatalog { fail_store: true, ..MapCatalog::default() };
        let mut cache = KnownCache::default();
        let err = run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("disk full"));
        cat.fail_store = false;
        let r =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.written, cat.loads), (1, 2), "the file is retried and the catalogue re-read");
    }

    #[test]
    fn rows_another_transaction_holds_are_busy_and_looked_at_again() {
        let root = Root::new("held");
        root.put("job/a.jsonl", "{}\n");
        root.put("job/b.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        // b changes while another transaction holds its row; a is deleted while its row is held.
        root.put("job/b.jsonl", "{}\n{}\n");
        let _ = fs::remove_file(root.0.join("job/a.jsonl"));
        cat.held = [root.path("job/a.jsonl"), root.path("job/b.jsonl")].into_iter().collect();
        let r =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.written, r.gone), (0, 0));
        let mut busy: Vec<&str> = r.busy.iter().map(|(p, _)| p.as_str()).collect();
        busy.sort_unstable();
        assert_eq!(busy, vec![root.path("job/a.jsonl"), root.path("job/b.jsonl")]);
        assert!(!cat.rows[&root.path("job/a.jsonl")].gone);
        // Released: the next pass records both, as if nothing had been in the way.
        cat.held.clear();
        let r =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.written, r.gone, r.busy.len()), (1, 1, 0));
        assert!(cat.rows[&root.path("job/a.jsonl")].gone);
        assert_eq!(cat.rows[&root.path("job/b.jsonl")].stat.size, 6);
    }

    #[test]
    fn a_directory_pass_sees_only_that_directory() {
        let root = Root::new("one-dir");
        root.put("job1/session-001.jsonl", "{}\n");
        root.put("job2/session-001.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let r = run_pass(&root.volume(), Scope::Dir("job2"), &mut cat, &mut KnownCache::default(), now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(actions(&r), vec![("session-001.jsonl".into(), "new")]);
        assert_eq!(cat.rows.keys().cloned().collect::<Vec<_>>(), vec![root.path("job2/session-001.jsonl")]);
        // A file of job1 the catalogue knows is not gone because a pass of job2 did not see it.
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut KnownCache::default(), now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        let r = run_pass(&root.volume(), Scope::Dir("job2"), &mut cat, &mut KnownCache::default(), now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.gone, cat.rows.values().filter(|k| k.gone).count()), (0, 0));
        // No such directory, or a name that is no directory of the volume: nothing.
        for dir in ["nope", "..", "job1/..", ""] {
            let r = run_pass(&root.volume(), Scope::Dir(dir), &mut cat, &mut KnownCache::default(), now_us())
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(r.files.is_empty(), "{dir}");
        }
    }

    #[test]
    fn every_directory_has_one_owner_and_the_owners_spread() {
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            let dir = format!("{i:08x}-0000-4000-8000-000000000000");
            let o = owner(&dir, 4);
            assert_eq!(o, owner(&dir, 4));
            counts[o] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
        assert_eq!(owner("anything", 1), 0);
        assert_eq!(owner("anything", 0), 0);
    }

    #[test]
    fn small_recorders_lock_each_path_on_its_own_key_and_large_ones_only_the_shared_keys() {
        assert_eq!(NewPathLocks::for_paths(0, 1), NewPathLocks::Own);
        assert_eq!(NewPathLocks::for_paths(0, OWN_NEW_PATH_LOCKS_UP_TO), NewPathLocks::Own);
        assert_eq!(NewPathLocks::for_paths(0, OWN_NEW_PATH_LOCKS_UP_TO + 1), NewPathLocks::SharedKeys);
        // What the transaction already took counts: it never holds more than the budget.
        assert_eq!(NewPathLocks::for_paths(OWN_NEW_PATH_LOCKS_UP_TO - 2, 2), NewPathLocks::Own);
        assert_eq!(NewPathLocks::for_paths(OWN_NEW_PATH_LOCKS_UP_TO - 2, 3), NewPathLocks::SharedKeys);
        assert_eq!(NewPathLocks::for_paths(usize::MAX, 1), NewPathLocks::SharedKeys);
        // A path's own key is the same everywhere and, for the paths of a fleet, its own: two of
        // 10 000 that shared one would make each other busy as the shared keys do.
        let mut own = std::collections::HashSet::new();
        for d in 0..2_000 {
            for n in 1..=5 {
                let path = format!("/var/sessions/{d:08x}-0000-4000-8000-000000000000/session-{n:03}.jsonl");
                assert_eq!(new_path_path_key(&path), new_path_path_key(path.as_str()));
                own.insert(new_path_path_key(&path));
            }
        }
        assert_eq!(own.len(), 10_000);
    }

    #[test]
    fn new_path_keys_of_different_owners_never_meet_and_stay_within_the_shared_keys() {
        for workers in [1usize, 2, 3, 4, 8, 64, 128, 200] {
            let mut keys_of: Vec<std::collections::HashSet<i32>> = vec![Default::default(); workers];
            for d in 0..600 {
                let dir = format!("{d:08x}-0000-4000-8000-000000000000");
                for n in 0..5 {
                    let path = format!("/var/sessions/{dir}/session-{n:03}.jsonl");
                    let key = new_path_key(&dir, &path, workers);
                    assert_eq!(key, new_path_key(&dir, &path, workers));
                    assert!(key >= 0);
                    keys_of[owner(&dir, workers)].insert(key);
                }
            }
            let all: usize = keys_of.iter().map(|k| k.len()).sum();
            let union: std::collections::HashSet<i32> = keys_of.iter().flatten().copied().collect();
            assert_eq!(all, union.len(), "{workers} workers: two owners share a key");
            assert!(union.len() <= NEW_PATH_KEYS.max(workers), "{workers} workers: {} keys", union.len());
            if workers <= 4 {
                // Spread over the owner's keys, not piled on one.
                assert!(keys_of.iter().all(|k| k.len() >= NEW_PATH_KEYS / workers / 2), "{workers} workers");
            }
        }
    }

    #[test]
    fn the_job_directory_of_a_path_is_the_component_below_the_root() {
        assert_eq!(job_dir_below("/v/s", "/v/s/job-1/session-001.jsonl"), "job-1");
        assert_eq!(job_dir_below("/v/s", "/v/s/job-1/sub/session-001.jsonl"), "job-1");
        assert_eq!(job_dir_below("/v/s", "/v/sx/job-1/session-001.jsonl"), "");
        assert_eq!(job_dir_below("/v/s", "/elsewhere/job-1/a.jsonl"), "");
        assert_eq!(job_dir_below("/v/s", "/v/s"), "");
        assert_eq!(job_dir_below("/v/s/", "/v/s/job-1/a.jsonl"), "job-1");
        assert_eq!(job_dir_below("/", "/job-1/a.jsonl"), "job-1");
    }

    #[test]
    fn a_partitioned_cache_keeps_only_its_own_directories() {
        let root = Root::new("partition");
        for j in 0..40 {
            root.put(&format!("job-{j}/a.jsonl"), "{}\n");
        }
        let mut cat = MapCatalog::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut KnownCache::default(), now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut sizes = Vec::new();
        for me in 0..2 {
            let mut cache = KnownCache::default();
            cache.set_partition(me, 2);
            run_pass(&root.volume(), Scope::Dirs(&BTreeSet::new()), &mut cat, &mut cache, now_us())
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(cache.dirs().iter().all(|d| owner(d, 2) == me));
            sizes.push(cache.len());
        }
        assert_eq!(sizes.iter().sum::<usize>(), 40);
        assert!(sizes.iter().all(|n| *n > 5), "{sizes:?}");
    }

    #[test]
    fn the_catalogue_is_read_once_until_invalidated() {
        let root = Root::new("stale");
        root.put("job/a.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        for _ in 0..3 {
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(cat.loads, 1, "no periodic reload");
        cache.invalidate();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cat.loads, 2);
    }

    #[test]
    fn a_pass_over_some_directories_sees_and_removes_only_theirs() {
        let root = Root::new("dirs");
        root.put("j1/a.jsonl", "{}\n");
        root.put("j2/b.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now_us()).unwrap_or_else(|e| panic!("{e}"));
        root.put("j1/a.jsonl", "{}\n{}\n");
        root.put("j1/new.jsonl", "{}\n");
        fs::remove_file(root.0.join("j2/b.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let only_j1: BTreeSet<String> = ["j1".to_owned()].into();
        let r = run_pass(&root.volume(), Scope::Dirs(&only_j1), &mut cat, &mut cache, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(actions(&r), vec![("a.jsonl".into(), "changed"), ("new.jsonl".into(), "new")]);
        assert!(!cat.rows[&root.path("j2/b.jsonl")].gone, "j2 was not looked at");
        let only_j2: BTreeSet<String> = ["j2".to_owned()].into();
        let r = run_pass(&root.volume(), Scope::Dirs(&only_j2), &mut cat, &mut cache, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((actions(&r), r.gone), (vec![("b.jsonl".into(), "gone")], 1));
    }

    /// Indexes by recording the file as indexed to its size, or as the test says.
    fn indexer(results: HashMap<String, FileOutcome>) -> EachFile<impl FnMut(&FileRef) -> FileOutcome> {
        EachFile(move |f: &FileRef| {
            let name = f.path.rsplit('/').next().unwrap_or_default().to_owned();
            results.get(&name).cloned().unwrap_or_else(|| FileOutcome::Indexed {
                was_offset: 0,
                state: IndexState {
                    generation: 1,
                    offset: f.pending,
                    device: f.device,
                    inode: f.inode,
                    dialect: f.dialect,
                    mtime_us: fs::metadata(&f.path).map(|m| FileStat::of(&m).mtime_us).unwrap_or(0),
                    ..IndexState::default()
                },
                events: 1,
                corrupt: 0,
                note: None,
            })
        })
    }

    #[test]
    fn files_left_undone_get_a_timer_and_done_ones_do_not() {
        let root = Root::new("timers");
        root.put("ok/a.jsonl", "{}\n");
        root.put("busy/b.jsonl", "{}\n");
        root.put("bad/c.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        let now = now_us();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        let mut results = HashMap::new();
        results.insert("b.jsonl".to_owned(), FileOutcome::Skipped("busy".into()));
        results.insert("c.jsonl".to_owned(), FileOutcome::Failed { error: "x".into(), quarantined: false });
        let mut ix = indexer(results);
        let out = index_pass(&mut cache, &mut ix, now, 0, 1_000, None, None, |_, _| true);
        assert_eq!(out.len(), 3);
        assert_eq!(cache.timers(), 2);
        assert_eq!(cache.next_timer(), Some(now + 1_000));
        assert!(cache.due(now).is_empty());
        let due = cache.due(now + 1_000);
        assert_eq!(due.iter().map(String::as_str).collect::<Vec<_>>(), vec!["bad", "busy"]);

        // Looking at the due directories again, with the files now indexing: no timers left.
        let mut ix = indexer(HashMap::new());
        let out = index_pass(&mut cache, &mut ix, now + 1_000, 0, 1_000, None, Some(&due), |_, _| true);
        assert_eq!(out.len(), 2, "only the due directories");
        assert_eq!(cache.timers(), 0);
    }

    #[test]
    fn quarantined_files_are_found_without_walking_a_cache_that_holds_none() {
        let root = Root::new("quarantine");
        root.put("ok/a.jsonl", "{}\n");
        root.put("bad/c.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        let now = now_us();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        // Read from the catalogue: looked at once, then known to hold none.
        assert!(cache.maybe_quarantined);
        assert!(cache.quarantined().is_empty());
        assert!(!cache.maybe_quarantined);
        // A pass that quarantines a file: found, and found again until released.
        let mut results = HashMap::new();
        results.insert("c.jsonl".to_owned(), FileOutcome::Failed { error: "x".into(), quarantined: true });
        let mut ix = indexer(results);
        index_pass(&mut cache, &mut ix, now, 0, 1_000, None, None, |_, _| true);
        assert_eq!(cache.quarantined(), vec![root.path("bad/c.jsonl")]);
        assert_eq!(cache.quarantined(), vec![root.path("bad/c.jsonl")]);
        cache.release(&root.path("bad/c.jsonl"), now);
        assert!(cache.quarantined().is_empty());
        assert!(!cache.maybe_quarantined);
        // A catalogue read again (a reload) may bring quarantined rows: looked at again.
        cache.invalidate();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        assert!(cache.maybe_quarantined);
    }

    #[test]
    fn a_share_spent_leaves_a_timer_due_at_once() {
        let root = Root::new("share");
        root.put("job/a.jsonl", "{}\n{}\n");
        root.put("job/b.jsonl", "{}\n{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        let now = now_us();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        let mut ix = indexer(HashMap::new());
        let out = index_pass(&mut cache, &mut ix, now, 0, 1_000_000, Some(6), None, |_, _| true);
        assert_eq!(out.len(), 1, "the first file spent the directory's share");
        assert_eq!(cache.next_timer(), Some(now));

        // A file cut short by the share comes back at once too, not after the retry delay.
        let root = Root::new("share-cut");
        root.put("job/big.jsonl", "{}\n{}\n{}\n{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        let mut ix = indexer(HashMap::new());
        let out = index_pass(&mut cache, &mut ix, now, 0, 1_000_000, Some(6), None, |_, _| true);
        assert_eq!(out.len(), 1);
        assert_eq!(cache.next_timer(), Some(now));
    }

    #[test]
    fn a_tail_waiting_to_settle_gets_a_timer_at_the_end_of_its_settle_period() {
        let root = Root::new("settle");
        root.put("job/a.jsonl", "{}\n{");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        let now = now_us();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, now).unwrap_or_else(|e| panic!("{e}"));
        let mtime = cache.entries.values().next().map(|k| k.stat.mtime_us).unwrap_or(0);
        let mut ix = EachFile(|f: &FileRef| FileOutcome::Indexed {
            was_offset: 0,
            state: IndexState {
                generation: 1,
                offset: 3,
                device: f.device,
                inode: f.inode,
                mtime_us: mtime,
                dialect: f.dialect,
                tail_unterminated: true,
                tail_pending: true,
                ..IndexState::default()
            },
            events: 1,
            corrupt: 0,
            note: None,
        });
        index_pass(&mut cache, &mut ix, mtime, 5_000_000, 1_000, None, None, |_, _| true);
        assert_eq!(cache.next_timer(), Some(mtime + 5_000_000));
    }
}
