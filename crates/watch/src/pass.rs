//! One discovery pass: scan the root, compare with the catalogue, detect dialects of new or
//! replaced files, and store the changes in one go. The background worker and
//! `index_sessions()` both run this; they differ only in the [`Catalog`] they pass (the worker
//! wraps each call in its own guarded transaction, the SQL function uses the caller's).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::{self, detect, first_object, Dialect, DETECTION_PREFIX_BYTES};
use cortex_buffer_core::indexer::index_plan::{worth_a_look, IndexState};
use cortex_buffer_core::indexer::normalize::uuid_bytes;
use cortex_buffer_core::indexer::reconcile::{plan, Action, Known};

use super::scan::{read_prefix, relative, scan_dir, scan_root, FileStat, Found, Problem};
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
    /// Everything recorded for paths starting with `root_prefix`.
    fn load(&mut self, root_prefix: &str) -> Result<HashMap<String, Known>, Self::Error>;
    /// Upserts `rows` (refreshing `last_seen`) and marks `gone` paths as gone, atomically;
    /// returns the `file_id` of every upserted path.
    fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, Self::Error>;
}

/// What the catalogue holds, cached between passes of the worker. Reloaded when older than
/// `max_age` so rows changed by others (retention, `index_sessions()`) are picked up.
#[derive(Debug, Default)]
pub struct KnownCache {
    root_prefix: String,
    entries: HashMap<String, Known>,
    loaded_at: Option<Instant>,
    /// Passes so far: where the next one starts in its round of directories.
    passes: usize,
}

impl KnownCache {
    fn fresh_for(&self, root_prefix: &str, max_age: Duration) -> bool {
        self.root_prefix == root_prefix && self.loaded_at.is_some_and(|t| t.elapsed() < max_age)
    }

    pub fn invalidate(&mut self) {
        self.loaded_at = None;
    }

    pub fn len(&self) -> usize {
        self.entries.values().filter(|k| !k.gone).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    /// One top-level directory (a job's): a call-time catch-up.
    Dir(&'a str),
}

/// Runs one pass over the volume (from `scan::resolve_root`), or one directory of it.
pub fn run_pass<C: Catalog>(
    volume: &Volume,
    scope: Scope<'_>,
    catalog: &mut C,
    cache: &mut KnownCache,
    max_cache_age: Duration,
    now_us: i64,
) -> Result<PassReport, PassError<C::Error>> {
    let (scan, root_prefix) = match scope {
        Scope::Volume => (scan_root(volume).map_err(PassError::Root)?, format!("{}/", volume.path().display())),
        Scope::Dir(dir) => (scan_dir(volume, dir), format!("{}/{dir}/", volume.path().display())),
    };
    if !cache.fresh_for(&root_prefix, max_cache_age) {
        cache.entries = catalog.load(&root_prefix).map_err(PassError::Catalog)?;
        cache.root_prefix = root_prefix.clone();
        cache.loaded_at = Some(Instant::now());
    }

    let mut report = PassReport { problems: scan.problems, ..PassReport::default() };
    let plan = plan(scan.files, &cache.entries, &root_prefix, now_us);

    let mut rows = Vec::new();
    for mut decision in plan.decisions {
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
    // A path missing from the walk is only gone if it really no longer exists; an unreadable
    // directory hides files without removing them.
    let gone: Vec<String> =
        plan.missing.into_iter().filter(|p| relative(volume, p).is_ok_and(|rel| volume.is_gone(&rel))).collect();

    let mut ids: HashMap<String, i64> = HashMap::new();
    if !rows.is_empty() || !gone.is_empty() {
        ids = catalog
            .store(&rows, &gone)
            .map_err(|e| {
                cache.invalidate();
                PassError::Catalog(e)
            })?
            .into_iter()
            .collect();
    }
    for row in &rows {
        let file_id = ids.get(&row.path).copied().unwrap_or(0);
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
    for path in &gone {
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
    report.written = rows.len();
    report.gone = gone.len();
    Ok(report)
}

fn detect_dialect(volume: &Volume, found: &Found, problems: &mut Vec<Problem>) -> Option<Dialect> {
    let prefix =
        relative(volume, &found.path).and_then(|rel| read_prefix(volume, &rel, &found.stat, DETECTION_PREFIX_BYTES));
    match prefix {
        Ok((prefix, whole)) => detect(&found.file_name, found.layout, first_object(&prefix, whole).as_ref()),
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
}

/// What indexing one file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// Indexed (or found nothing to add): the state as committed.
    Indexed { state: IndexState, events: u64, corrupt: u64, note: Option<String> },
    /// Left alone this time (another indexer holds it, or it vanished).
    Skipped(String),
    /// Failed and rolled back; the failure was counted.
    Failed { error: String, quarantined: bool },
}

/// Indexes one file in a transaction of its own (worker) or a subtransaction (SQL).
pub trait FileIndexer {
    fn index(&mut self, file: &FileRef) -> FileOutcome;
}

/// The indexing half of a pass: every present file under `root_prefix` that is worth a look
/// is handed to `indexer`, directory by directory, and within one in path order; the cache
/// learns each outcome, and `keep_going` sees it (returning false stops the pass after that
/// file: a shutdown).
///
/// With `dir_share`, each job directory gets at most that many bytes in this pass (its files
/// take their share in turn; the rest waits for the next pass), and each pass starts one
/// directory further round, so one job's volume delays another's lines by at most one share
/// of each busy directory per pass (docs/operations.md: fairness).
pub fn index_pass<I: FileIndexer>(
    cache: &mut KnownCache,
    indexer: &mut I,
    now_us: i64,
    settle_us: i64,
    dir_share: Option<u64>,
    mut keep_going: impl FnMut(&str, &FileOutcome) -> bool,
) -> Vec<(String, FileOutcome)> {
    let mut todo: Vec<(FileRef, u64)> = cache
        .entries
        .iter()
        .filter(|(path, k)| {
            !k.gone
                && k.file_id > 0
                && path.starts_with(&cache.root_prefix)
                && worth_a_look(&k.index, &k.stat, k.dialect, now_us, settle_us)
        })
        .map(|(path, k)| {
            let file = FileRef {
                file_id: k.file_id,
                path: path.clone(),
                job_dir: k.job_dir.clone(),
                dialect: k.dialect,
                device: k.stat.device,
                inode: k.stat.inode,
                budget: u64::MAX,
            };
            (file, k.index.offset)
        })
        .collect();
    todo.sort_by(|a, b| (&a.0.job_dir, &a.0.path).cmp(&(&b.0.job_dir, &b.0.path)));
    // Round-robin over directories: this pass starts at the `passes`-th one.
    let mut dirs: Vec<&str> = todo.iter().map(|(f, _)| f.job_dir.as_str()).collect();
    dirs.dedup();
    let first_dir = dirs.get(cache.passes % dirs.len().max(1)).map(|d| (*d).to_owned());
    cache.passes = cache.passes.wrapping_add(1);
    if let Some(first) = first_dir {
        let at = todo.iter().position(|(f, _)| f.job_dir == first).unwrap_or(0);
        todo.rotate_left(at);
    }
    let mut spent: HashMap<String, u64> = HashMap::new();
    let mut outcomes = Vec::with_capacity(todo.len());
    for (mut file, before) in todo {
        if let Some(share) = dir_share {
            let used = spent.get(&file.job_dir).copied().unwrap_or(0);
            if used >= share {
                continue;
            }
            file.budget = share - used;
        }
        let outcome = indexer.index(&file);
        if let Some(k) = cache.entries.get_mut(&file.path) {
            match &outcome {
                FileOutcome::Indexed { state, .. } => {
                    *spent.entry(file.job_dir.clone()).or_insert(0) += state.offset.saturating_sub(before);
                    k.index = state.clone();
                }
                FileOutcome::Failed { quarantined, .. } => k.index.quarantined = *quarantined,
                FileOutcome::Skipped(_) => {}
            }
        }
        let more = keep_going(&file.path, &outcome);
        outcomes.push((file.path, outcome));
        if !more {
            break;
        }
    }
    outcomes
}

/// Microseconds since the Unix epoch, for `now_us`.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// The catalogue as a map, recording how often it was touched.
    #[derive(Default)]
    struct MapCatalog {
        rows: HashMap<String, Known>,
        loads: usize,
        stores: usize,
        fail_store: bool,
    }

    impl Catalog for MapCatalog {
        type Error = String;
        fn load(&mut self, root_prefix: &str) -> Result<HashMap<String, Known>, String> {
            self.loads += 1;
            Ok(self
                .rows
                .iter()
                .filter(|(p, _)| p.starts_with(root_prefix))
                .map(|(p, k)| (p.clone(), k.clone()))
                .collect())
        }
        fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, String> {
            if self.fail_store {
                return Err("disk full".into());
            }
            self.stores += 1;
            let mut ids = Vec::new();
            for r in rows {
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
                ids.push((r.path.clone(), file_id));
            }
            for g in gone {
                if let Some(k) = self.rows.get_mut(g) {
                    k.gone = true;
                }
            }
            Ok(ids)
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

    const HOUR: Duration = Duration::from_secs(3600);

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
        let r1 = run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r1.written, 2);
        assert_eq!(cat.rows[&root.path("job1/session-001.jsonl")].dialect, Some(Dialect::CortexPlane));
        assert_eq!(cat.rows[&root.path("job2/session_20260101T000000Z_pod.jsonl")].dialect, Some(Dialect::CortexSpike));

        let r2 = run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
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
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us()).unwrap_or_else(|e| panic!("{e}"));

        root.put("job/a.jsonl", "{\"__type__\":\"X\"}\n{\"__type__\":\"Y\"}\n");
        fs::remove_file(root.0.join("job/b.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("../../../../../../etc/hostname", root.0.join("job/c.jsonl"))
            .unwrap_or_else(|e| panic!("{e}"));
        let r = run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
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
        let err =
            run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us()).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("disk full"));
        cat.fail_store = false;
        let r = run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.written, cat.loads), (1, 2), "the file is retried and the catalogue re-read");
    }

    #[test]
    fn a_directory_pass_sees_only_that_directory() {
        let root = Root::new("one-dir");
        root.put("job1/session-001.jsonl", "{}\n");
        root.put("job2/session-001.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let r = run_pass(&root.volume(), Scope::Dir("job2"), &mut cat, &mut KnownCache::default(), HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(actions(&r), vec![("session-001.jsonl".into(), "new")]);
        assert_eq!(cat.rows.keys().cloned().collect::<Vec<_>>(), vec![root.path("job2/session-001.jsonl")]);
        // A file of job1 the catalogue knows is not gone because a pass of job2 did not see it.
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut KnownCache::default(), HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        let r = run_pass(&root.volume(), Scope::Dir("job2"), &mut cat, &mut KnownCache::default(), HOUR, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.gone, cat.rows.values().filter(|k| k.gone).count()), (0, 0));
        // No such directory, or a name that is no directory of the volume: nothing.
        for dir in ["nope", "..", "job1/..", ""] {
            let r = run_pass(&root.volume(), Scope::Dir(dir), &mut cat, &mut KnownCache::default(), HOUR, now_us())
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(r.files.is_empty(), "{dir}");
        }
    }

    #[test]
    fn a_stale_cache_is_reloaded() {
        let root = Root::new("stale");
        root.put("job/a.jsonl", "{}\n");
        let mut cat = MapCatalog::default();
        let mut cache = KnownCache::default();
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, Duration::ZERO, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        run_pass(&root.volume(), Scope::Volume, &mut cat, &mut cache, Duration::ZERO, now_us())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cat.loads, 2);
    }
}
