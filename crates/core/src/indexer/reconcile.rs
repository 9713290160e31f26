//! Deciding what a discovery pass must write: pure comparison of what is on disk with what the
//! `session_file` table already records.

use std::collections::BTreeMap;

use super::dialect::Dialect;
use super::discovery::{FileStat, Found};
use super::index_plan::IndexState;

/// What `session_file` records about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub file_id: i64,
    pub job_dir: String,
    pub stat: FileStat,
    pub dialect: Option<Dialect>,
    pub last_seen_us: i64,
    pub gone: bool,
    pub index: IndexState,
}

/// What a pass did with a file (the `action` column of `index_sessions()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    New,
    Changed,
    Unchanged,
    Gone,
    Skipped,
}

impl Action {
    pub fn label(self) -> &'static str {
        match self {
            Action::New => "new",
            Action::Changed => "changed",
            Action::Unchanged => "unchanged",
            Action::Gone => "gone",
            Action::Skipped => "skipped",
        }
    }
}

/// A found file and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub found: Found,
    pub action: Action,
    /// The row must be written (new, changed or reappeared). An unchanged file is never
    /// written, however long it stays so: idle work must not grow with the files.
    pub write: bool,
    /// The dialect must be (re)detected from the file's first bytes.
    pub detect: bool,
    /// The dialect to record when no detection is needed.
    pub dialect: Option<Dialect>,
    pub detail: Option<&'static str>,
}

#[derive(Debug, Default)]
pub struct Plan {
    pub decisions: Vec<Decision>,
    /// Recorded as present under the scanned root but not found by this pass.
    pub missing: Vec<String>,
}

/// The known paths starting with `prefix`, read as a range of the ordered catalogue (so a pass
/// over one directory never visits the others).
pub fn under<'k>(
    known: &'k BTreeMap<String, Known>,
    prefix: &str,
) -> impl Iterator<Item = (&'k String, &'k Known)> + use<'k> {
    let owned = prefix.to_owned();
    known
        .range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
        .take_while(move |(p, _)| p.starts_with(owned.as_str()))
}

/// Compares the scan with the catalogue. `root_prefix` is the scanned directory with a trailing
/// `/`; only known paths below it can be missing.
pub fn plan(found: Vec<Found>, known: &BTreeMap<String, Known>, root_prefix: &str) -> Plan {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::with_capacity(found.len());
    let mut decisions = Vec::with_capacity(found.len());
    for f in &found {
        seen.insert(f.path.as_str());
    }
    let missing: Vec<String> = under(known, root_prefix)
        .filter(|(path, k)| !k.gone && !seen.contains(path.as_str()))
        .map(|(path, _)| path.clone())
        .collect();

    for f in found {
        let decision = match known.get(&f.path) {
            None => Decision { found: f, action: Action::New, write: true, detect: true, dialect: None, detail: None },
            Some(k) => decide_known(f, k),
        };
        decisions.push(decision);
    }
    Plan { decisions, missing }
}

fn decide_known(f: Found, k: &Known) -> Decision {
    let replaced = !f.stat.same_identity(&k.stat);
    let shrank = f.stat.size < k.stat.size;
    let changed = f.stat != k.stat;
    // A file swapped for another or rewritten from scratch may speak another dialect; a file
    // that had no parseable line yet may have one now.
    let detect = replaced || shrank || (k.dialect.is_none() && changed) || k.gone;
    let detail = if k.gone {
        Some("reappeared")
    } else if replaced {
        Some("replaced by another file (device or inode changed)")
    } else if shrank {
        Some("shrank")
    } else {
        None
    };
    let action = if changed || k.gone { Action::Changed } else { Action::Unchanged };
    Decision { found: f, action, write: action == Action::Changed, detect, dialect: k.dialect, detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexer::discovery::Layout;

    fn found(path: &str, size: u64, inode: u64) -> Found {
        Found {
            path: path.to_owned(),
            job_dir: "job".to_owned(),
            file_name: path.rsplit('/').next().unwrap_or_default().to_owned(),
            layout: Layout::DirectoryFile,
            stat: FileStat { size, mtime_us: 100, device: 1, inode },
        }
    }

    fn known(f: &Found, dialect: Option<Dialect>, last_seen_us: i64, gone: bool) -> Known {
        Known {
            file_id: 1,
            job_dir: f.job_dir.clone(),
            stat: f.stat,
            dialect,
            last_seen_us,
            gone,
            index: IndexState::default(),
        }
    }

    const NOW: i64 = 1_000_000_000_000;

    #[test]
    fn new_files_are_written_and_detected() {
        let p = plan(vec![found("/r/job/a.jsonl", 10, 1)], &BTreeMap::new(), "/r/");
        let d = &p.decisions[0];
        assert_eq!((d.action, d.write, d.detect), (Action::New, true, true));
    }

    #[test]
    fn unchanged_files_are_never_written_however_old_their_row() {
        let f = found("/r/job/a.jsonl", 10, 1);
        let mut k = BTreeMap::new();
        for last_seen in [NOW - 1_000, NOW - 86_400_000_000, 0] {
            k.insert(f.path.clone(), known(&f, Some(Dialect::CortexPlane), last_seen, false));
            let p = plan(vec![f.clone()], &k, "/r/");
            assert_eq!((p.decisions[0].action, p.decisions[0].write), (Action::Unchanged, false));
        }
    }

    #[test]
    fn growth_keeps_the_dialect_but_replacement_and_shrinking_redetect() {
        let old = found("/r/job/a.jsonl", 10, 1);
        let mut k = BTreeMap::new();
        k.insert(old.path.clone(), known(&old, Some(Dialect::CortexSpike), NOW, false));

        let grown = plan(vec![found("/r/job/a.jsonl", 20, 1)], &k, "/r/");
        let d = &grown.decisions[0];
        assert_eq!(
            (d.action, d.write, d.detect, d.dialect),
            (Action::Changed, true, false, Some(Dialect::CortexSpike))
        );

        let replaced = plan(vec![found("/r/job/a.jsonl", 20, 2)], &k, "/r/");
        assert!(replaced.decisions[0].detect);
        assert!(replaced.decisions[0].detail.is_some_and(|d| d.contains("inode")));

        let shrunk = plan(vec![found("/r/job/a.jsonl", 5, 1)], &k, "/r/");
        assert_eq!(shrunk.decisions[0].detail, Some("shrank"));
        assert!(shrunk.decisions[0].detect);
    }

    #[test]
    fn undetected_files_retry_detection_when_they_change() {
        let old = found("/r/job/a.jsonl", 0, 1);
        let mut k = BTreeMap::new();
        k.insert(old.path.clone(), known(&old, None, NOW, false));
        let p = plan(vec![found("/r/job/a.jsonl", 30, 1)], &k, "/r/");
        assert!(p.decisions[0].detect);
    }

    #[test]
    fn missing_files_are_only_those_under_the_scanned_root_and_not_already_gone() {
        let a = found("/r/job/a.jsonl", 1, 1);
        let b = found("/r/job/b.jsonl", 1, 2);
        let c = found("/other/job/c.jsonl", 1, 3);
        let d = found("/r/job/d.jsonl", 1, 4);
        let mut k = BTreeMap::new();
        k.insert(a.path.clone(), known(&a, None, NOW, false));
        k.insert(b.path.clone(), known(&b, None, NOW, false));
        k.insert(c.path.clone(), known(&c, None, NOW, false));
        k.insert(d.path.clone(), known(&d, None, NOW, true));
        let p = plan(vec![a.clone()], &k, "/r/");
        assert_eq!(p.missing, vec!["/r/job/b.jsonl".to_owned()]);
        // A pass over one directory: only that directory's paths can be missing.
        let e = found("/r/job2/e.jsonl", 1, 5);
        k.insert(e.path.clone(), known(&e, None, NOW, false));
        assert_eq!(plan(vec![], &k, "/r/job2/").missing, vec!["/r/job2/e.jsonl".to_owned()]);
        assert_eq!(plan(vec![a], &k, "/r/job/").missing, vec!["/r/job/b.jsonl".to_owned()]);
    }

    #[test]
    fn a_gone_file_that_comes_back_is_changed_and_redetected() {
        let f = found("/r/job/a.jsonl", 1, 1);
        let mut k = BTreeMap::new();
        k.insert(f.path.clone(), known(&f, Some(Dialect::WinkLog), NOW, true));
        let p = plan(vec![f], &k, "/r/");
        let d = &p.decisions[0];
        assert_eq!((d.action, d.write, d.detect, d.detail), (Action::Changed, true, true, Some("reappeared")));
    }
}
