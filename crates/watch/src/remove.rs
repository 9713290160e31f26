//! Deleting from the sessions volume, for retention: what a first-level directory holds, and
//! removing it or single files in it. Nothing here ever follows a symbolic link, not even one
//! that stays inside the volume: a link is an entry like any other, unlinked itself, so that an
//! orphan link can never delete the files of the job it points to. Every descent opens the next
//! directory with `O_NOFOLLOW` from its parent's handle, so nothing leaves the volume either.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::volume::{Entry, Kind, Volume};

/// How deep a directory tree may be for the cleanup to walk or remove it; deeper is an error
/// (the discovery rule reads three levels; anything far deeper is not a session buffer).
pub const MAX_DEPTH: usize = 16;

/// One entry found below a first-level directory, links and special files included.
#[derive(Debug, Clone)]
pub struct Found {
    /// Path relative to the volume.
    pub rel: PathBuf,
    pub entry: Entry,
}

/// What a first-level directory holds, every level down, links not followed.
#[derive(Debug, Default, Clone)]
pub struct Survey {
    /// Everything that is not a directory: regular files, links, special files.
    pub found: Vec<Found>,
    /// The newest mtime among its regular files (`None`: none in it).
    pub newest_us: Option<i64>,
    pub bytes: u64,
    /// Directories (relative to the volume, the first-level one included) in which this process
    /// may not delete entries: their deletions would fail, so they are not attempted.
    pub unwritable: Vec<PathBuf>,
    /// The newest mtime among the directories themselves, the first-level one included: what
    /// dates a directory that holds no file yet.
    pub newest_dir_us: Option<i64>,
    /// Subdirectories on another file system (a mount point): never entered, never emptied.
    pub foreign: Vec<PathBuf>,
}

impl Survey {
    /// Whether `rel`'s entry can be unlinked from its directory.
    pub fn can_unlink(&self, rel: &Path) -> bool {
        rel.parent().is_none_or(|p| !self.unwritable.iter().any(|u| u == p))
    }

    /// Whether `later` (the same directory surveyed again) holds an entry this survey did not:
    /// something come since, which nothing decided on this survey covers.
    pub fn gained_entries(&self, later: &Survey) -> bool {
        let seen: std::collections::HashSet<&Path> = self.found.iter().map(|f| f.rel.as_path()).collect();
        later.found.iter().any(|f| !seen.contains(f.rel.as_path()))
    }
}

/// Whether this process may delete entries of the directory `dir` (write and search
/// permission, as the kernel will judge the unlink: effective ids).
pub fn writable(dir: &OwnedFd) -> bool {
    // SAFETY: a directory descriptor we hold and a static NUL-terminated name.
    unsafe { libc::faccessat(dir.as_raw_fd(), c".".as_ptr(), libc::W_OK | libc::X_OK, libc::AT_EACCESS) == 0 }
}

fn single(name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn unlink_at(dir: &OwnedFd, name: &OsStr, flags: libc::c_int) -> io::Result<()> {
    let c = single(name)?;
    // SAFETY: a directory descriptor we hold and a NUL-terminated single name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn too_deep(rel: &Path) -> io::Error {
    io::Error::other(format!("{} is nested more than {MAX_DEPTH} levels deep", rel.display()))
}

/// Lists everything below the first-level directory `name` (its entries, their entries, and so
/// on), each with its own `lstat`.
pub fn survey(volume: &Volume, name: &OsStr) -> io::Result<Survey> {
    let top = volume.stat_at(volume.root(), name)?;
    let dir = volume.open_subdir(volume.root(), name)?;
    let mut out = Survey { newest_dir_us: Some(top.stat.mtime_us), ..Survey::default() };
    walk(volume, &dir, Path::new(name), top.stat.device, 1, &mut out)?;
    Ok(out)
}

fn walk(volume: &Volume, dir: &OwnedFd, rel: &Path, device: u64, depth: usize, out: &mut Survey) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep(rel));
    }
    if !writable(dir) {
        out.unwritable.push(rel.to_path_buf());
    }
    for name in volume.list(dir)? {
        let entry = match volume.stat_at(dir, &name) {
            Ok(e) => e,
            // Deleted between the listing and the look: nothing to keep or delete.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let child = rel.join(&name);
        if entry.kind == Kind::Dir {
            out.newest_dir_us = Some(out.newest_dir_us.map_or(entry.stat.mtime_us, |n| n.max(entry.stat.mtime_us)));
            if entry.stat.device != device {
                out.foreign.push(child);
                continue;
            }
            match volume.open_subdir(dir, &name) {
                Ok(sub) => walk(volume, &sub, &child, device, depth + 1, out)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        // Links and special files are not session files: only regular files date a directory.
        if entry.kind == Kind::File {
            out.newest_us = Some(out.newest_us.map_or(entry.stat.mtime_us, |n| n.max(entry.stat.mtime_us)));
            out.bytes = out.bytes.saturating_add(entry.stat.size);
        }
        out.found.push(Found { rel: child, entry });
    }
    Ok(())
}

/// What the cleanup needs of one first-level entry of the volume before deciding on it: the
/// entry itself (`lstat`) and, for a directory, its [`survey`].
#[derive(Debug)]
pub struct Look {
    pub entry: io::Result<Entry>,
    /// `None` unless the entry is a directory.
    pub survey: Option<io::Result<Survey>>,
}

/// Looks at the first-level entry `name`.
pub fn look(volume: &Volume, name: &OsStr) -> Look {
    let entry = volume.stat_at(volume.root(), name);
    let survey = match &entry {
        Ok(e) if e.kind == Kind::Dir => Some(survey(volume, name)),
        _ => None,
    };
    Look { entry, survey }
}

/// The [`look`]s at `names`, in their order, taken on a helper thread (every signal blocked)
/// while the caller works on the ones before: the file system's part of a cleanup (a `getdents`
/// and an `lstat` per entry) then overlaps its database part. At most `ahead` looks wait to be
/// taken, so memory stays bounded whatever the volume holds. When the thread cannot be started
/// the looks are taken on the caller's thread, one per `next()`. Dropping the iterator stops
/// the helper at its next look.
pub fn look_ahead<'scope, 'env: 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    volume: &'env Volume,
    names: &'env [OsString],
    ahead: usize,
) -> LookAhead<'env> {
    let (tx, rx) = std::sync::mpsc::sync_channel(ahead.max(1));
    let spawned = crate::pipeline::spawn_with_signals_blocked(scope, move || {
        for name in names {
            // The receiver is gone: the caller stopped early.
            if tx.send(look(volume, name)).is_err() {
                return;
            }
        }
    });
    LookAhead { volume, names, next: 0, helper: spawned.is_ok().then_some(rx) }
}

/// The iterator [`look_ahead`] returns.
pub struct LookAhead<'env> {
    volume: &'env Volume,
    names: &'env [OsString],
    next: usize,
    helper: Option<std::sync::mpsc::Receiver<Look>>,
}

impl Iterator for LookAhead<'_> {
    type Item = Look;

    fn next(&mut self) -> Option<Look> {
        let name = self.names.get(self.next)?;
        self.next += 1;
        // A helper that stopped early (it cannot, short of a panic) leaves the rest to this
        // thread, in the same order.
        if let Some(look) = self.helper.as_ref().and_then(|rx| rx.recv().ok()) {
            return Some(look);
        }
        self.helper = None;
        Some(look(self.volume, name))
    }
}

/// What a removal took away, and what it left.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Entries that were not directories (files, links, special files), unlinked.
    pub entries: u64,
    /// Entries left because they are not as the survey saw them (written, replaced or created
    /// since): never deleted unseen.
    pub kept: u64,
}

/// Removes what `seen` (a [`survey`] of the first-level directory `name`) found, exactly: an
/// entry is unlinked only while it is still the same (kind, device, inode, size, mtime), so a
/// file written or created since the survey stays, with its directory. Links are unlinked,
/// never followed; a directory on another file system is never entered. Then every directory
/// left empty is removed, `name` included.
pub fn remove_dir(volume: &Volume, name: &OsStr, seen: &[Found]) -> (Removed, io::Result<()>) {
    let expected: HashMap<&Path, &Entry> = seen.iter().map(|f| (f.rel.as_path(), &f.entry)).collect();
    let mut removed = Removed::default();
    let result = volume.stat_at(volume.root(), name).and_then(|top| {
        let dir = volume.open_subdir(volume.root(), name)?;
        empty(volume, &dir, Path::new(name), top.stat.device, 1, &expected, &mut removed)?;
        match unlink_at(volume.root(), name, libc::AT_REMOVEDIR) {
            Err(e) if removed.kept > 0 && e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(()),
            other => other,
        }
    });
    (removed, result)
}

fn empty(
    volume: &Volume,
    dir: &OwnedFd,
    rel: &Path,
    device: u64,
    depth: usize,
    expected: &HashMap<&Path, &Entry>,
    removed: &mut Removed,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep(rel));
    }
    for name in volume.list(dir)? {
        let now = match volume.stat_at(dir, &name) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let child = rel.join(&name);
        if now.kind == Kind::Dir {
            if now.stat.device != device {
                removed.kept += 1;
                continue;
            }
            let sub = volume.open_subdir(dir, &name)?;
            empty(volume, &sub, &child, device, depth + 1, expected, removed)?;
            // Fails harmlessly (ENOTEMPTY) when something was kept in it.
            match unlink_at(dir, &name, libc::AT_REMOVEDIR) {
                Ok(()) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::ENOENT)) => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        if expected.get(child.as_path()).is_none_or(|seen| **seen != now) {
            removed.kept += 1;
            continue;
        }
        match unlink_at(dir, &name, 0) {
            Ok(()) => removed.entries += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The parent directory of `rel` (relative to the volume), opened with no link followed at any
/// level, and the last component's name.
fn parent_of(volume: &Volume, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
    let name = rel.file_name().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?.to_os_string();
    let mut dir: Option<OwnedFd> = None;
    let parent = rel.parent().unwrap_or(Path::new(""));
    for part in parent.components() {
        let std::path::Component::Normal(part) = part else {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        };
        let next = volume.open_subdir(dir.as_ref().unwrap_or(volume.root()), part)?;
        dir = Some(next);
    }
    let dir = match dir {
        Some(d) => d,
        None => volume.open_dir(Path::new(""))?,
    };
    Ok((dir, name))
}

/// Unlinks the file at `rel` if it is still exactly the one examined (kind, device, inode,
/// size, mtime). `Ok(false)`: it was already gone. A file replaced or written since it was
/// examined is an error, and stays.
pub fn remove_file(volume: &Volume, rel: &Path, seen: &Entry) -> io::Result<bool> {
    let (dir, name) = match parent_of(volume, rel) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let now = match volume.stat_at(&dir, &name) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if now != *seen {
        return Err(io::Error::other(format!("{} changed since it was examined", rel.display())));
    }
    match unlink_at(&dir, &name, 0) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// What `rel` is now (its own `lstat`, no link followed at any level); `None` when it is gone.
pub fn restat(volume: &Volume, rel: &Path) -> io::Result<Option<Entry>> {
    let (dir, name) = match parent_of(volume, rel) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match volume.stat_at(&dir, &name) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes the empty directories below the first-level directory `name`, then `name` itself
/// if it is left empty. Only empty directories are ever removed (`rmdir` refuses any other),
/// so a file written meanwhile is never lost. True when `name` is gone.
pub fn prune(volume: &Volume, name: &OsStr) -> io::Result<bool> {
    match volume.open_subdir(volume.root(), name) {
        Ok(dir) => prune_below(volume, &dir, 1),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    }
    remove_if_empty(volume, name)
}

fn prune_below(volume: &Volume, dir: &OwnedFd, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(names) = volume.list(dir) else { return };
    for name in names {
        if !matches!(volume.stat_at(dir, &name), Ok(e) if e.kind == Kind::Dir) {
            continue;
        }
        if let Ok(sub) = volume.open_subdir(dir, &name) {
            prune_below(volume, &sub, depth + 1);
        }
        // Fails harmlessly (ENOTEMPTY) when something is left in it.
        let _ = unlink_at(dir, &name, libc::AT_REMOVEDIR);
    }
}

/// Removes the first-level directory `name` if it is empty; `Ok(false)` when it is not (or is
/// gone).
pub fn remove_if_empty(volume: &Volume, name: &OsStr) -> io::Result<bool> {
    match unlink_at(volume.root(), name, libc::AT_REMOVEDIR) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST) | Some(libc::ENOENT)) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A volume (`root`) and a directory outside it, removed when dropped.
    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> (Tmp, Volume) {
            let p = std::env::temp_dir().join(format!("cb-remove-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(p.join("root")).unwrap_or_else(|e| panic!("{e}"));
            fs::create_dir_all(p.join("outside")).unwrap_or_else(|e| panic!("{e}"));
            let v = Volume::open(&p.join("root")).unwrap_or_else(|e| panic!("{e}"));
            (Tmp(p), v)
        }
        fn root(&self) -> PathBuf {
            self.0.join("root")
        }
        fn outside(&self) -> PathBuf {
            self.0.join("outside")
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn ok<T>(r: io::Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_later_survey_gained_entries_only_when_something_new_is_in_it() {
        let (t, v) = Tmp::new("gained");
        ok(fs::create_dir_all(t.root().join("job")));
        ok(fs::write(t.root().join("job/a.jsonl"), "abc"));
        let first = ok(survey(&v, OsStr::new("job")));
        ok(fs::write(t.root().join("job/a.jsonl"), "abcdef"));
        let grown = ok(survey(&v, OsStr::new("job")));
        assert!(!first.gained_entries(&grown), "a file written since is no new entry");
        ok(fs::remove_file(t.root().join("job/a.jsonl")));
        let emptied = ok(survey(&v, OsStr::new("job")));
        assert!(!first.gained_entries(&emptied), "a removed file is no new entry");
        ok(fs::write(t.root().join("job/b.jsonl"), "x"));
        let gained = ok(survey(&v, OsStr::new("job")));
        assert!(first.gained_entries(&gained));
    }

    #[test]
    fn a_survey_counts_files_and_links_without_following_them() {
        let (t, v) = Tmp::new("survey");
        ok(fs::write(t.outside().join("secret.jsonl"), "x".repeat(100)));
        ok(fs::create_dir_all(t.root().join("job/sub")));
        ok(fs::write(t.root().join("job/a.jsonl"), "abc"));
        ok(fs::write(t.root().join("job/sub/b.jsonl"), "de"));
        ok(symlink(t.outside(), t.root().join("job/out")));
        let s = ok(survey(&v, OsStr::new("job")));
        assert_eq!(s.bytes, 5, "the link's target is not counted");
        assert_eq!(s.found.len(), 3);
        assert!(s.found.iter().any(|f| f.entry.kind == Kind::Symlink && f.rel == Path::new("job/out")));
    }

    #[test]
    fn removing_a_directory_unlinks_links_and_never_what_they_point_to() {
        let (t, v) = Tmp::new("rmdir");
        ok(fs::write(t.outside().join("keep.jsonl"), "keep"));
        ok(fs::create_dir_all(t.root().join("other")));
        ok(fs::write(t.root().join("other/live.jsonl"), "live"));
        ok(fs::create_dir_all(t.root().join("orphan/deep")));
        ok(fs::write(t.root().join("orphan/deep/x.jsonl"), "xx"));
        ok(symlink(t.outside(), t.root().join("orphan/escape")));
        ok(symlink(t.root().join("other"), t.root().join("orphan/inside")));
        let seen = ok(survey(&v, OsStr::new("orphan"))).found;
        let (removed, r) = remove_dir(&v, OsStr::new("orphan"), &seen);
        ok(r);
        assert_eq!(removed, Removed { entries: 3, kept: 0 });
        assert!(!t.root().join("orphan").exists());
        assert!(t.outside().join("keep.jsonl").exists());
        assert!(t.root().join("other/live.jsonl").exists());
    }

    #[test]
    fn a_first_level_link_is_never_entered() {
        let (t, v) = Tmp::new("link1");
        ok(fs::create_dir_all(t.root().join("real")));
        ok(fs::write(t.root().join("real/a.jsonl"), "a"));
        ok(symlink(t.root().join("real"), t.root().join("link")));
        assert!(survey(&v, OsStr::new("link")).is_err());
        let (_, r) = remove_dir(&v, OsStr::new("link"), &[]);
        assert!(r.is_err());
        assert!(t.root().join("real/a.jsonl").exists());
    }

    #[test]
    fn a_file_is_removed_only_if_it_is_the_one_examined() {
        let (t, v) = Tmp::new("rmfile");
        ok(fs::create_dir_all(t.root().join("job")));
        let p = t.root().join("job/a.jsonl");
        ok(fs::write(&p, "a"));
        let e = ok(survey(&v, OsStr::new("job"))).found.remove(0).entry;
        // Another file under the same name (a different inode: the old one is still linked
        // as held.jsonl, so its number cannot be reused).
        ok(fs::rename(&p, t.root().join("job/held.jsonl")));
        ok(fs::write(&p, "b"));
        assert!(remove_file(&v, Path::new("job/a.jsonl"), &e).is_err());
        assert!(p.exists());
        ok(fs::remove_file(t.root().join("job/held.jsonl")));
        let now = ok(survey(&v, OsStr::new("job"))).found.remove(0).entry;
        // Written since it was examined: it stays.
        ok(fs::write(&p, "bb"));
        assert!(remove_file(&v, Path::new("job/a.jsonl"), &now).is_err());
        let now = ok(survey(&v, OsStr::new("job"))).found.remove(0).entry;
        assert!(ok(remove_file(&v, Path::new("job/a.jsonl"), &now)));
        assert!(!p.exists());
        assert!(!ok(remove_file(&v, Path::new("job/a.jsonl"), &now)));
        assert!(ok(remove_if_empty(&v, OsStr::new("job"))));
    }

    #[test]
    fn a_directory_removal_leaves_what_was_written_or_created_after_the_survey() {
        let (t, v) = Tmp::new("rmseen");
        ok(fs::create_dir_all(t.root().join("job/sub")));
        ok(fs::write(t.root().join("job/a.jsonl"), "a"));
        ok(fs::write(t.root().join("job/b.jsonl"), "b"));
        ok(fs::write(t.root().join("job/sub/c.jsonl"), "c"));
        let seen = ok(survey(&v, OsStr::new("job"))).found;
        ok(fs::write(t.root().join("job/b.jsonl"), "bigger now"));
        ok(fs::write(t.root().join("job/sub/new.jsonl"), "new"));
        let (removed, r) = remove_dir(&v, OsStr::new("job"), &seen);
        ok(r);
        assert_eq!(removed, Removed { entries: 2, kept: 2 });
        assert!(!t.root().join("job/a.jsonl").exists() && !t.root().join("job/sub/c.jsonl").exists());
        assert!(t.root().join("job/b.jsonl").exists() && t.root().join("job/sub/new.jsonl").exists());
        // An empty directory is dated by its own mtime.
        ok(fs::create_dir_all(t.root().join("empty")));
        let s = ok(survey(&v, OsStr::new("empty")));
        assert!(s.newest_us.is_none() && s.newest_dir_us.is_some());
    }

    #[test]
    fn pruning_removes_empty_directories_and_nothing_else() {
        let (t, v) = Tmp::new("prune");
        ok(fs::create_dir_all(t.root().join("p/a/b")));
        ok(fs::create_dir_all(t.root().join("p/c")));
        ok(fs::write(t.root().join("p/c/keep.jsonl"), "k"));
        assert!(!ok(prune(&v, OsStr::new("p"))));
        assert!(!t.root().join("p/a").exists());
        assert!(t.root().join("p/c/keep.jsonl").exists());
        ok(fs::remove_file(t.root().join("p/c/keep.jsonl")));
        assert!(ok(prune(&v, OsStr::new("p"))));
        assert!(!t.root().join("p").exists());
        assert!(ok(restat(&v, Path::new("p/c/keep.jsonl"))).is_none());
    }

    #[test]
    fn a_parent_that_is_a_link_is_refused() {
        let (t, v) = Tmp::new("linkparent");
        ok(fs::create_dir_all(t.root().join("real")));
        ok(fs::write(t.root().join("real/a.jsonl"), "a"));
        ok(symlink(t.root().join("real"), t.root().join("link")));
        let e = ok(survey(&v, OsStr::new("real"))).found.remove(0).entry;
        assert!(remove_file(&v, Path::new("link/a.jsonl"), &e).is_err());
        assert!(t.root().join("real/a.jsonl").exists());
    }

    /// What a look says, in a form two looks can be compared by.
    fn summary(l: &Look) -> String {
        let entry = l.entry.as_ref().map(|e| e.kind).map_err(|e| e.kind());
        let found = l.survey.as_ref().map(|s| {
            s.as_ref()
                .map(|s| {
                    let mut f: Vec<_> = s.found.iter().map(|f| f.rel.clone()).collect();
                    f.sort();
                    (f, s.bytes)
                })
                .map_err(|e| e.kind())
        });
        format!("{entry:?} {found:?}")
    }

    #[test]
    fn looks_ahead_come_in_order_and_match_looks_taken_here() {
        let (t, v) = Tmp::new("ahead");
        let mut names = Vec::new();
        for i in 0..50 {
            let name = format!("job-{i:02}");
            match i % 5 {
                // A file at the top level and a link: looked at, never surveyed.
                0 => ok(fs::write(t.root().join(&name), "top")),
                1 => ok(symlink(t.outside(), t.root().join(&name))),
                _ => {
                    ok(fs::create_dir_all(t.root().join(&name).join("sub")));
                    for n in 0..(i % 4) {
                        ok(fs::write(t.root().join(&name).join(format!("s-{n}.jsonl")), "x".repeat(i)));
                    }
                }
            }
            names.push(OsString::from(name));
        }
        // A name that is gone by the time it is looked at.
        names.push(OsString::from("missing"));
        let here: Vec<String> = names.iter().map(|n| summary(&look(&v, n))).collect();
        for ahead in [1, 3, 1000] {
            let there: Vec<String> =
                std::thread::scope(|s| look_ahead(s, &v, &names, ahead).map(|l| summary(&l)).collect());
            assert_eq!(there, here, "ahead {ahead}");
        }
        assert!(here[0].starts_with("Ok(File) None"), "{}", here[0]);
        assert!(here[1].starts_with("Ok(Symlink) None"), "{}", here[1]);
        assert!(here[2].starts_with("Ok(Dir) Some(Ok("), "{}", here[2]);
        assert!(here[50].starts_with("Err(NotFound)"), "{}", here[50]);
    }

    #[test]
    fn a_caller_that_stops_early_stops_the_helper() {
        let (t, v) = Tmp::new("ahead-stop");
        let names: Vec<OsString> = (0..200).map(|i| OsString::from(format!("d{i}"))).collect();
        for n in &names {
            ok(fs::create_dir_all(t.root().join(n)));
        }
        // The scope returns only once the helper has ended: it must notice the caller is gone.
        let taken = std::thread::scope(|s| look_ahead(s, &v, &names, 2).take(3).count());
        assert_eq!(taken, 3);
    }
}
