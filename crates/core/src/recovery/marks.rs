//! A checkpoint's high-water mark against the files as they are now: where the bytes it
//! covers are, or that they are gone. Pure: the shell answers whether a file still holds a
//! mark's bytes ([`Holds`]), by reading them or by the index's own fingerprints.
//!
//! A mark records, per file, its identity (device, inode; the source for a pushed file), its
//! size when the checkpoint was stored, and fingerprints of its first bytes and of the bytes just
//! before the mark, with where the line holding the mark began. A file is the mark's when it
//! still holds those bytes:
//!
//! - the same identity, holding them: the mark's file (under a new name if it was renamed);
//! - another file holding them (a copy, as `copytruncate` leaves, under a discovered name);
//! - a file of the same identity that no longer holds them (truncated, rewritten, the inode
//!   reused by a new file) is not the mark's: it was rewritten after the mark, so all of it is
//!   read as written after the checkpoint;
//! - a marked file whose bytes no file holds any more (rotated to a name the indexer does not
//!   read, truncated, deleted and recreated): what was written after the mark and before that
//!   is gone from the index, so the plan cannot be complete, and says so.
//!
//! A file in no mark entry was created after the checkpoint (the mark listed the whole
//! directory): all of it is after.

use super::cycles::{MarkAt, Place};
use super::files::SessionFile;
use super::pairing::AnomalyKind;

/// A fingerprint: CRC-32 of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub len: i64,
    pub crc: u32,
}

/// A file as the checkpoint's high-water mark recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarkFile {
    /// Path relative to the job directory.
    pub rel_path: String,
    /// For a pushed file, its source (tailed and pushed files never stand for each other).
    pub pushed_by: Option<String>,
    pub device: u64,
    pub inode: u64,
    pub size: i64,
    /// For a pushed file: bytes its shipper had reported that the server did not have yet when
    /// the mark was taken (0 for a tailed file). Such a size is no high-water mark.
    pub unseen: i64,
    /// For a pushed file: the pod had flushed it to exactly `size` (`await_pushed`) when the
    /// mark was taken, so the size is the file's own, not only what its shipper had pushed.
    pub flushed: bool,
    /// The file's first bytes, and the bytes just before `size`.
    pub head: Option<Fingerprint>,
    pub tail: Option<Fingerprint>,
    /// Where the line holding the mark began: `size` when the mark fell between lines; `None`
    /// when not known (a mark recorded before this was kept, or a line longer than the window).
    pub line_start: Option<i64>,
}

/// The job's session files when the checkpoint was stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mark {
    pub recorded_at_us: i64,
    pub files: Vec<MarkFile>,
}

/// Whether a file still holds a mark entry's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    Yes,
    No,
    /// Nothing to compare with here (a deleted file, fingerprints of another length): its
    /// identity is trusted.
    Unknown,
}

/// A mark resolved against the files as they are now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// Per session (plan order): the mark's place in it; `None`: created after the mark.
    pub at: Vec<Option<MarkAt>>,
    /// How files were matched, for the plan's anomalies: `(session, kind, detail)`.
    pub notes: Vec<(usize, AnomalyKind, String)>,
    /// Marked files whose marked bytes no file holds any more.
    pub missing: Vec<String>,
}

impl Resolved {
    pub fn place(&self) -> Place {
        Place::Mark(self.at.clone())
    }
}

/// Whether the file's bytes now are a generation begun after `at_us` (the path was replaced,
/// truncated or rewritten since): a mark of then says nothing of them.
fn newer_generation(f: &SessionFile, at_us: i64) -> bool {
    f.replaced.is_some_and(|r| r.at_us > at_us)
}

fn same_origin(f: &SessionFile, m: &MarkFile) -> bool {
    f.pushed.as_ref().map(|p| p.source.as_str()) == m.pushed_by.as_deref()
}

/// Whether a mark entry's size was the file's own when the mark was taken (a high-water mark),
/// and not only a lower bound of it. A tailed file's size is what the server read from the file
/// itself. A pushed file's is what its shipper had pushed by then: a shipper behind leaves the
/// file longer on its node. It is the file's own only when the pod had flushed the file to it
/// (`await_pushed`, before storing the checkpoint), or when it is the file's final size: its
/// source confirmed after the writer was superseded and the file has not grown since the mark.
pub fn entry_exact(m: &MarkFile, files: &[SessionFile]) -> bool {
    if m.unseen > 0 {
        return false;
    }
    let Some(source) = &m.pushed_by else { return true };
    if m.flushed {
        return true;
    }
    files.iter().any(|f| {
        f.pushed.as_ref().is_some_and(|p| {
            &p.source == source
                && p.complete
                && f.device == m.device
                && f.inode == m.inode
                && f.indexed_offset.saturating_add(p.held_bytes) == m.size
        })
    })
}

/// The shell's answers about the files now.
pub trait Lookup {
    /// Whether file `session` still holds entry `m`'s bytes (its head, and the bytes before the
    /// mark).
    fn holds(&mut self, session: usize, m: &MarkFile) -> Holds;
    /// The offset of file `session`'s last event before `offset`, if any.
    fn last_event_before(&mut self, session: usize, offset: i64) -> Option<i64>;
}

/// Where the line holding the mark began; when the mark does not say, at the last event before
/// the mark (the conservative side: a call there is taken to straddle it).
fn mark_at(m: &MarkFile, session: usize, look: &mut dyn Lookup) -> MarkAt {
    let line_start = match m.line_start {
        Some(l) => l,
        None => look.last_event_before(session, m.size).unwrap_or(m.size),
    };
    MarkAt { size: m.size, line_start: line_start.clamp(0, m.size) }
}

/// Resolves `mark` against `files`.
pub fn resolve(files: &[SessionFile], mark: &Mark, look: &mut dyn Lookup) -> Resolved {
    let mut r = Resolved { at: vec![None; files.len()], ..Resolved::default() };
    let mut taken = vec![false; files.len()];
    let mut unmatched: Vec<&MarkFile> = Vec::new();
    for m in &mark.files {
        let same = files.iter().enumerate().find(|(i, f)| {
            !taken.get(*i).copied().unwrap_or(true) && same_origin(f, m) && f.device == m.device && f.inode == m.inode
        });
        let Some((i, f)) = same else {
            unmatched.push(m);
            continue;
        };
        let now = f.size_bytes.max(f.indexed_offset);
        let verdict =
            if m.size > now || newer_generation(f, mark.recorded_at_us) { Holds::No } else { look.holds(i, m) };
        if verdict == Holds::No {
            r.notes.push((
                i,
                AnomalyKind::FileReplaced,
                format!(
                    "{} no longer holds the bytes the checkpoint's high-water mark recorded ({} bytes of {}): it was truncated or rewritten since, so all of it is read as written after the checkpoint",
                    f.rel_path, m.size, m.rel_path
                ),
            ));
            unmatched.push(m);
            continue;
        }
        if let Some(slot) = taken.get_mut(i) {
            *slot = true;
        }
        if let Some(slot) = r.at.get_mut(i) {
            *slot = Some(mark_at(m, i, look));
        }
        if f.rel_path != m.rel_path {
            r.notes.push((
                i,
                AnomalyKind::FileRenamed,
                format!(
                    "{} is the file the high-water mark recorded as {} (same identity and bytes): it was renamed since",
                    f.rel_path, m.rel_path
                ),
            ));
        }
    }
    // A marked file not found by identity: a copy of its bytes under another identity?
    for m in unmatched {
        let copy = (0..files.len()).find(|&i| {
            let Some(f) = files.get(i) else { return false };
            !taken.get(i).copied().unwrap_or(true)
                && same_origin(f, m)
                && m.head.is_some()
                && m.size <= f.size_bytes.max(f.indexed_offset)
                && look.holds(i, m) == Holds::Yes
        });
        match copy {
            Some(i) => {
                if let Some(slot) = taken.get_mut(i) {
                    *slot = true;
                }
                if let Some(slot) = r.at.get_mut(i) {
                    *slot = Some(mark_at(m, i, look));
                }
                let name = files.get(i).map(|f| f.rel_path.as_str()).unwrap_or("");
                r.notes.push((
                    i,
                    AnomalyKind::FileRenamed,
                    format!(
                        "{name} holds the bytes the high-water mark recorded for {} (a copy): it is read from the mark",
                        m.rel_path
                    ),
                ));
            }
            None if m.size == 0 => {}
            None => r.missing.push(m.rel_path.clone()),
        }
    }
    // Files of the mark's names that are not the mark's: replaced since.
    for (i, f) in files.iter().enumerate() {
        let replaced = !taken.get(i).copied().unwrap_or(true)
            && mark.files.iter().any(|m| m.rel_path == f.rel_path && same_origin(f, m));
        if replaced && !r.notes.iter().any(|(s, _, _)| *s == i) {
            r.notes.push((
                i,
                AnomalyKind::FileReplaced,
                format!("{} is not the file the checkpoint's high-water mark recorded under that name: it was created since, so all of it is read as written after the checkpoint", f.rel_path),
            ));
        }
    }
    r
}

/// Another mark (an older checkpoint's, a pod's resume) placed by identity, its bytes checked as
/// far as the shell can without reading (`Lookup::holds`): `None` when a marked file's bytes are
/// no longer where the index has them, so the mark cannot be placed.
pub fn place_by_identity(files: &[SessionFile], mark: &Mark, look: &mut dyn Lookup) -> Option<Place> {
    let mut at = vec![None; files.len()];
    for m in &mark.files {
        let i = files.iter().position(|f| same_origin(f, m) && f.device == m.device && f.inode == m.inode);
        let Some((i, f)) = i.and_then(|i| files.get(i).map(|f| (i, f))) else {
            // A file the index no longer has: fine if the mark saw nothing of it.
            if m.size == 0 {
                continue;
            }
            return None;
        };
        // A mark older than the file's current generation says nothing of its bytes.
        if newer_generation(f, mark.recorded_at_us) || m.size > f.size_bytes.max(f.indexed_offset) {
            return None;
        }
        if m.size > 0 && look.holds(i, m) == Holds::No {
            return None;
        }
        if let Some(slot) = at.get_mut(i) {
            *slot = Some(mark_at(m, i, look));
        }
    }
    Some(Place::Mark(at))
}

#[cfg(test)]
mod tests {
    use super::super::choose::tests::file;
    use super::*;
    use crate::indexer::dialect::Dialect;

    /// Answers from a closure, and "no event before" (the mark's own size).
    struct By<F: FnMut(usize) -> Holds>(F);

    impl<F: FnMut(usize) -> Holds> Lookup for By<F> {
        fn holds(&mut self, session: usize, _: &MarkFile) -> Holds {
            (self.0)(session)
        }
        fn last_event_before(&mut self, _: usize, offset: i64) -> Option<i64> {
            Some(offset - 25)
        }
    }

    fn entry(name: &str, inode: u64, size: i64) -> MarkFile {
        MarkFile {
            rel_path: name.into(),
            device: 1,
            inode,
            size,
            head: Some(Fingerprint { len: 10, crc: 7 }),
            tail: Some(Fingerprint { len: 10, crc: 9 }),
            line_start: Some(size),
            ..MarkFile::default()
        }
    }

    fn files(inodes: &[(u64, &str)]) -> Vec<SessionFile> {
        inodes
            .iter()
            .enumerate()
            .map(|(i, (inode, name))| {
                let mut f = file(i, Dialect::CortexPlane);
                f.device = 1;
                f.inode = *inode;
                f.rel_path = (*name).into();
                f
            })
            .collect()
    }

    #[test]
    fn the_same_file_grown_is_the_marks() {
        let fs = files(&[(10, "session-001.jsonl")]);
        let mark = Mark { recorded_at_us: 0, files: vec![entry("session-001.jsonl", 10, 60)] };
        let r = resolve(&fs, &mark, &mut By(|_| Holds::Yes));
        assert_eq!(r.at, vec![Some(MarkAt::at(60))]);
        assert!(r.notes.is_empty() && r.missing.is_empty());
    }

    #[test]
    fn a_rename_is_followed_and_the_new_file_is_after() {
        // session-001.jsonl renamed to old.jsonl; the writer made a new session-001.jsonl.
        let fs = files(&[(11, "session-001.jsonl"), (10, "old.jsonl")]);
        let mark = Mark { recorded_at_us: 0, files: vec![entry("session-001.jsonl", 10, 60)] };
        let r = resolve(&fs, &mark, &mut By(|i| if i == 1 { Holds::Yes } else { Holds::No }));
        assert_eq!(r.at, vec![None, Some(MarkAt::at(60))]);
        assert!(r.missing.is_empty());
        let kinds: Vec<_> = r.notes.iter().map(|(s, k, _)| (*s, *k)).collect();
        assert_eq!(kinds, [(1, AnomalyKind::FileRenamed), (0, AnomalyKind::FileReplaced)]);
    }

    #[test]
    fn copytruncate_leaves_the_marked_bytes_missing() {
        // Same inode, truncated and written again: its head no longer matches.
        let fs = files(&[(10, "session-001.jsonl")]);
        let mark = Mark { recorded_at_us: 0, files: vec![entry("session-001.jsonl", 10, 60)] };
        let r = resolve(&fs, &mark, &mut By(|_| Holds::No));
        assert_eq!(r.at, vec![None]);
        assert_eq!(r.missing, ["session-001.jsonl"]);
        // ... unless the copy is a file the indexer reads: then it is followed.
        let fs = files(&[(10, "session-001.jsonl"), (12, "session-001-20261128.jsonl")]);
        let r = resolve(&fs, &mark, &mut By(|i| if i == 1 { Holds::Yes } else { Holds::No }));
        assert_eq!(r.at, vec![None, Some(MarkAt::at(60))]);
        assert!(r.missing.is_empty());
    }

    #[test]
    fn a_reused_inode_or_a_shrunk_file_is_not_the_marks() {
        let mut fs = files(&[(10, "session-001.jsonl")]);
        fs[0].size_bytes = 20;
        fs[0].indexed_offset = 20;
        let mark = Mark { recorded_at_us: 0, files: vec![entry("session-001.jsonl", 10, 60)] };
        let r = resolve(&fs, &mark, &mut By(|_| Holds::Yes));
        assert_eq!(r.missing, ["session-001.jsonl"], "smaller than the mark: the bytes are gone");
    }

    #[test]
    fn tailed_and_pushed_files_never_stand_for_each_other() {
        let mut fs = files(&[(10, "session-001.jsonl")]);
        fs[0].pushed = Some(super::super::files::PushedReport { source: "node-b".into(), ..Default::default() });
        let mark = Mark { recorded_at_us: 0, files: vec![entry("session-001.jsonl", 10, 60)] };
        let r = resolve(&fs, &mark, &mut By(|_| Holds::Yes));
        assert_eq!(r.at, vec![None]);
        assert_eq!(r.missing, ["session-001.jsonl"]);
    }

    #[test]
    fn a_mark_inside_a_line_says_where_the_line_began() {
        let fs = files(&[(10, "session-001.jsonl")]);
        let mut e = entry("session-001.jsonl", 10, 60);
        e.line_start = Some(40);
        let r = resolve(&fs, &Mark { recorded_at_us: 0, files: vec![e.clone()] }, &mut By(|_| Holds::Unknown));
        assert_eq!(r.at, vec![Some(MarkAt { size: 60, line_start: 40 })]);
        e.line_start = None;
        let r = resolve(&fs, &Mark { recorded_at_us: 0, files: vec![e] }, &mut By(|_| Holds::Unknown));
        assert_eq!(
            r.at,
            vec![Some(MarkAt { size: 60, line_start: 35 })],
            "unknown: the last event before it straddles"
        );
    }

    #[test]
    fn older_marks_place_by_identity() {
        let fs = files(&[(10, "session-001.jsonl")]);
        let mark = Mark { recorded_at_us: 0, files: vec![entry("x.jsonl", 10, 60)] };
        assert_eq!(
            place_by_identity(&fs, &mark, &mut By(|_| Holds::Yes)),
            Some(Place::Mark(vec![Some(MarkAt::at(60))]))
        );
        let gone = Mark { recorded_at_us: 0, files: vec![entry("x.jsonl", 99, 60)] };
        assert_eq!(place_by_identity(&fs, &gone, &mut By(|_| Holds::Yes)), None);
    }
}
