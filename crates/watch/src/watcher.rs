//! Change notification for the sessions volume (inotify), so that an idle volume costs nothing:
//! the indexer looks only at the job directories the kernel says changed, and rescans the whole
//! volume only as a safety net (at start, after the kernel's queue overflowed, when watches run
//! out, and every `rescan_interval`).
//!
//! One watch per directory the discovery rule descends into (the root, each job or project
//! directory, and a project's session and `subagents` directories), each added through a
//! descriptor opened beneath the volume's handle (`/proc/self/fd/N`), so a watch can never be set
//! on something outside it. The kernel reports events by watch; [`Watcher::read`] turns them into
//! the set of first-level directories to look at again, which is all the discovery pass needs:
//! it re-lists such a directory and compares it with the catalogue, so creations, appends,
//! deletions and renames are all handled as a rescan of that directory would handle them.
//!
//! No thread and no PostgreSQL: the caller waits on [`Watcher::fd`] (the worker, together with
//! its latch) and calls [`Watcher::read`], which never blocks. Memory: one map entry per watch
//! (the directory's relative path), bounded by the kernel's `fs.inotify.max_user_watches`; the
//! read buffer is fixed.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use cortex_buffer_core::indexer::discovery::descend_into;

use crate::scan::DirSeen;
use crate::volume::Volume;

/// What a directory's watch reports: entries created, written, removed or renamed, and the
/// directory itself going away. (No `IN_DONT_FOLLOW`: the path given is the `/proc/self/fd`
/// link to a descriptor already opened beneath the volume, which must be followed.)
const DIR_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

/// Bytes read from the queue at a time: room for hundreds of events.
const READ_BUFFER: usize = 64 * 1024;

/// The fixed part of `struct inotify_event`: wd, mask, cookie, len.
const EVENT_HEADER: usize = 16;

/// Why the whole volume must be walked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rescan {
    /// The kernel's event queue overflowed (`IN_Q_OVERFLOW`): events were lost.
    Overflow,
    /// A watch could not be added because the kernel's limit was reached.
    WatchesExhausted,
    /// The sessions directory itself was removed or moved.
    RootChanged,
}

impl Rescan {
    pub fn describe(self) -> &'static str {
        match self {
            Rescan::Overflow => "the kernel's event queue overflowed",
            Rescan::WatchesExhausted => "the kernel's limit on watches was reached",
            Rescan::RootChanged => "the sessions directory was removed or moved",
        }
    }
}

/// What the kernel reported since the last read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// First-level directories (job or project directories) whose contents changed.
    pub dirs: BTreeSet<String>,
    /// Set when events were lost or cannot be trusted: walk the whole volume.
    pub rescan: Option<Rescan>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.rescan.is_none()
    }

    fn need_rescan(&mut self, why: Rescan) {
        // The first reason is kept: it is the one worth logging.
        self.rescan.get_or_insert(why);
    }
}

/// An inotify instance watching one volume.
#[derive(Debug)]
pub struct Watcher {
    fd: OwnedFd,
    /// Watch descriptor to the directory it watches, relative to the volume ("" is the root).
    dirs: HashMap<i32, PathBuf>,
    /// The other way round, with the identity (device, inode) of the directory watched there:
    /// a walk that finds the same directory at the same place adds nothing. An entry whose
    /// watch descriptor no longer maps back to its path is stale and counts as unwatched. Keyed
    /// by the path's bytes: a `Path` hashes and compares component by component, which was a
    /// tenth of a periodic walk's CPU at 100 000 directories.
    by_path: HashMap<OsString, (i32, u64, u64)>,
    /// Set once `inotify_add_watch` failed for lack of watches; cleared by a full re-watch
    /// that succeeds.
    exhausted: bool,
    /// The device and inode of the root watched: a volume opened afresh at the same path may be
    /// another directory (the old one removed or renamed while a descriptor kept it alive, in
    /// which case the kernel reports nothing).
    root: Option<(u64, u64)>,
}

/// What setting the watches did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Watched {
    /// Watches held after the walk.
    pub watches: usize,
    /// Directories that could not be watched for lack of watches (`ENOSPC`).
    pub refused: usize,
}

impl Watcher {
    /// A new, empty inotify instance (non-blocking, closed on exec).
    pub fn new() -> io::Result<Watcher> {
        // SAFETY: plain syscall; the descriptor is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Watcher {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            dirs: HashMap::new(),
            by_path: HashMap::new(),
            exhausted: false,
            root: None,
        })
    }

    /// The descriptor to wait on: readable when events are queued.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Watches held.
    pub fn watches(&self) -> usize {
        self.dirs.len()
    }

    /// Whether this watcher watches `volume`'s root directory (the same device and inode).
    pub fn watches_root_of(&self, volume: &Volume) -> bool {
        self.root.is_some() && self.root == root_identity(volume)
    }

    /// Whether a watch was refused for lack of watches since the last full walk.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Watches the root and every directory under it that the discovery rule descends into.
    /// Directories already watched at the same place keep their watch, and are not asked for
    /// again. An error means the root itself could not be watched.
    pub fn watch_volume(&mut self, volume: &Volume) -> io::Result<Watched> {
        self.exhausted = false;
        let mut refused = 0;
        let root = volume.open_dir(Path::new(""))?;
        self.add(Path::new(""), &root)?;
        self.root = root_identity(volume);
        for name in volume.list(&root)? {
            let Some(name) = name.to_str() else { continue };
            if descend_into(1, name, &[]) {
                refused += self.watch_tree(volume, Path::new(name), &[]);
            }
        }
        Ok(Watched { watches: self.dirs.len(), refused })
    }

    /// Watches the directories a walk of the volume descended into (`seen`) that have no watch
    /// at their place, or whose watch is on another directory, without listing anything: a
    /// periodic walk costs one walk, not two. Returns the first-level directories that got a
    /// watch, which must be looked at again (their files may have changed between the walk and
    /// the watch).
    ///
    /// With `events_lost` (the queue overflowed), every directory is asked for again: a
    /// directory removed and re-created may get its predecessor's inode number, and the event
    /// that said its watch was gone may be among those lost. The kernel answers with the watch
    /// a directory already has, or a new one.
    pub fn watch_missing(
        &mut self,
        volume: &Volume,
        seen: &[DirSeen],
        events_lost: bool,
    ) -> (BTreeSet<String>, Watched) {
        self.exhausted = false;
        let mut added = BTreeSet::new();
        let mut refused = 0;
        for d in seen {
            if !events_lost && self.watching(&d.rel, d.device, d.inode) {
                continue;
            }
            let Ok(fd) = volume.open_dir(&d.rel) else { continue };
            let before = self.by_path.get(d.rel.as_os_str()).map(|(wd, _, _)| *wd);
            let result = if events_lost { self.add_again(&d.rel, &fd) } else { self.add(&d.rel, &fd) };
            match result {
                Ok(()) if before.is_some() && before == self.by_path.get(d.rel.as_os_str()).map(|(wd, _, _)| *wd) => {}
                Ok(()) => {
                    if let Some(first) = d.rel.components().next().and_then(|c| c.as_os_str().to_str()) {
                        added.insert(first.to_owned());
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    self.exhausted = true;
                    refused += 1;
                }
                // Gone or replaced since the walk: the kernel's events, or the next walk, say.
                Err(_) => {}
            }
        }
        (added, Watched { watches: self.dirs.len(), refused })
    }

    /// Whether the directory with this identity is watched at `rel`.
    fn watching(&self, rel: &Path, device: u64, inode: u64) -> bool {
        self.by_path.get(rel.as_os_str()).is_some_and(|(wd, dev, ino)| {
            (*dev, *ino) == (device, inode) && self.dirs.get(wd).is_some_and(|p| p.as_os_str() == rel.as_os_str())
        })
    }

    /// Watches `rel` (a directory at depth `parents.len() + 1`) and the directories under it
    /// that the rule descends into; returns how many were refused for lack of watches.
    fn watch_tree(&mut self, volume: &Volume, rel: &Path, parents: &[&str]) -> usize {
        let Ok(fd) = volume.open_dir(rel) else { return 0 };
        match self.add(rel, &fd) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                self.exhausted = true;
                return 1;
            }
            // Gone, not a directory, a link, unreadable: nothing to watch (the walk reports it).
            Err(_) => return 0,
        }
        let Some(name) = rel.file_name().and_then(|n| n.to_str()) else { return 0 };
        let mut below: Vec<&str> = parents.to_vec();
        below.push(name);
        let depth = below.len() + 1;
        let Ok(names) = volume.list(&fd) else { return 0 };
        let mut refused = 0;
        for child in names {
            let Some(child) = child.to_str() else { continue };
            if descend_into(depth, child, &below) {
                let child_rel = rel.join(child);
                if volume.stat(&child_rel).is_ok_and(|m| m.is_dir()) {
                    refused += self.watch_tree(volume, &child_rel, &below);
                }
            }
        }
        refused
    }

    /// Adds a watch on the directory `rel`, which `dir` holds open beneath the volume: the
    /// kernel resolves `/proc/self/fd/N` to the very directory that descriptor holds. A
    /// directory already watched at that place is left as it is.
    fn add(&mut self, rel: &Path, dir: &OwnedFd) -> io::Result<()> {
        let meta = std::fs::File::from(dir.try_clone()?).metadata()?;
        use std::os::unix::fs::MetadataExt;
        if self.watching(rel, meta.dev(), meta.ino()) {
            return Ok(());
        }
        self.add_again(rel, dir)
    }

    /// Asks the kernel for a watch on `dir` whatever the maps say (see [`add`](Self::add)).
    fn add_again(&mut self, rel: &Path, dir: &OwnedFd) -> io::Result<()> {
        let meta = std::fs::File::from(dir.try_clone()?).metadata()?;
        use std::os::unix::fs::MetadataExt;
        let proc_path = CString::new(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: valid inotify descriptor and NUL-terminated path; `dir` outlives the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), proc_path.as_ptr(), DIR_EVENTS) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        self.dirs.insert(wd, rel.to_path_buf());
        self.by_path.insert(rel.as_os_str().to_owned(), (wd, meta.dev(), meta.ino()));
        Ok(())
    }

    /// Reads every queued event without blocking and says which first-level directories to look
    /// at again. New directories the rule descends into are watched on the way, and looked at
    /// (files may have been written before their watch existed).
    pub fn read(&mut self, volume: &Volume) -> Changes {
        let mut changes = Changes::default();
        let mut buf = vec![0u8; READ_BUFFER];
        loop {
            // SAFETY: reads into a buffer of the given length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    // Anything else means the queue cannot be trusted.
                    _ => {
                        changes.need_rescan(Rescan::Overflow);
                        break;
                    }
                }
            }
            let n = usize::try_from(n).unwrap_or(0);
            if n == 0 {
                break;
            }
            let Some(filled) = buf.get(..n) else { break };
            for event in parse(filled) {
                self.apply(volume, &event, &mut changes);
            }
        }
        changes
    }

    fn apply(&mut self, volume: &Volume, event: &Event, changes: &mut Changes) {
        if event.mask & libc::IN_Q_OVERFLOW != 0 {
            changes.need_rescan(Rescan::Overflow);
            return;
        }
        let Some(dir) = self.dirs.get(&event.wd).cloned() else { return };
        if event.mask & libc::IN_IGNORED != 0 {
            // The watch is gone (its directory was removed): forget it.
            self.forget(event.wd);
            if dir.as_os_str().is_empty() {
                changes.need_rescan(Rescan::RootChanged);
            }
            return;
        }
        if dir.as_os_str().is_empty() && event.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
            changes.need_rescan(Rescan::RootChanged);
            return;
        }
        if event.mask & libc::IN_MOVE_SELF != 0 {
            // A watched directory moved: wherever it went, it is no longer where it was watched
            // (a move within the volume is reported, and watched again, at its new place).
            self.unwatch_under(&dir);
        }
        let entry = match &event.name {
            Some(name) => dir.join(name),
            None => dir.clone(),
        };
        let mut parts = entry.components().filter_map(|c| c.as_os_str().to_str());
        let Some(first) = parts.next() else { return };
        if event.mask & libc::IN_ISDIR != 0 && event.mask & libc::IN_MOVED_FROM != 0 {
            self.unwatch_under(&entry);
        }
        if event.mask & libc::IN_ISDIR != 0 && event.mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
            // A new directory: watch it (and what it already holds) if the rule descends into it.
            let names: Vec<&str> = entry.components().filter_map(|c| c.as_os_str().to_str()).collect();
            if let Some((name, parents)) = names.split_last() {
                if descend_into(names.len(), name, parents) && self.watch_tree(volume, &entry, parents) > 0 {
                    changes.need_rescan(Rescan::WatchesExhausted);
                }
            }
        }
        changes.dirs.insert(first.to_owned());
    }
}

fn root_identity(volume: &Volume) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = volume.stat(Path::new("")).ok()?;
    Some((meta.dev(), meta.ino()))
}

impl Watcher {
    /// Removes the watches on `dir` and on the directories under it: moved out of their place,
    /// they must not keep reporting (or holding watches) under their old names.
    fn unwatch_under(&mut self, dir: &Path) {
        if dir.as_os_str().is_empty() {
            return;
        }
        let gone: Vec<i32> = self.dirs.iter().filter(|(_, p)| p.starts_with(dir)).map(|(wd, _)| *wd).collect();
        for wd in gone {
            // SAFETY: a watch descriptor of this inotify instance; a stale one just fails.
            unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
            self.forget(wd);
        }
    }

    /// Forgets watch `wd` (its path's entry with it, when it is that watch's).
    fn forget(&mut self, wd: i32) {
        if let Some(path) = self.dirs.remove(&wd) {
            if self.by_path.get(path.as_os_str()).is_some_and(|(w, _, _)| *w == wd) {
                self.by_path.remove(path.as_os_str());
            }
        }
    }
}

/// One event as the kernel queued it.
#[derive(Debug, PartialEq, Eq)]
struct Event {
    wd: i32,
    mask: u32,
    name: Option<String>,
}

/// Parses a buffer of `struct inotify_event`s; a truncated record ends the parse. Names that are
/// not UTF-8 are kept as `None` (the directory is still reported; the walk judges the name).
fn parse(buf: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut at = 0usize;
    while let Some(header) = buf.get(at..at.saturating_add(EVENT_HEADER)) {
        let word = |i: usize| -> [u8; 4] {
            let mut w = [0u8; 4];
            if let Some(src) = header.get(i..i + 4) {
                w.copy_from_slice(src);
            }
            w
        };
        let wd = i32::from_ne_bytes(word(0));
        let mask = u32::from_ne_bytes(word(4));
        let len = usize::try_from(u32::from_ne_bytes(word(12))).unwrap_or(usize::MAX);
        let start = at + EVENT_HEADER;
        let Some(raw) = buf.get(start..start.saturating_add(len)) else { break };
        let trimmed = raw.split(|b| *b == 0).next().unwrap_or_default();
        let name = if trimmed.is_empty() { None } else { std::str::from_utf8(trimmed).ok().map(str::to_owned) };
        events.push(Event { wd, mask, name });
        at = start + len;
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;

    struct Root(PathBuf);
    impl Root {
        fn new(tag: &str) -> Root {
            let p = std::env::temp_dir().join(format!("cb-watch-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{e}"));
            Root(fs::canonicalize(&p).unwrap_or(p))
        }
        fn volume(&self) -> Volume {
            Volume::open(&self.0).unwrap_or_else(|e| panic!("{e}"))
        }
    }
    impl Drop for Root {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn dirs(c: &Changes) -> Vec<&str> {
        c.dirs.iter().map(String::as_str).collect()
    }

    #[test]
    fn a_new_job_directory_and_its_files_are_reported_and_watched() {
        let root = Root::new("new-dir");
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")), Watched { watches: 1, refused: 0 });
        assert!(w.read(&volume).is_empty(), "nothing happened yet");

        fs::create_dir(root.0.join("job-a")).unwrap_or_else(|e| panic!("{e}"));
        let c = w.read(&volume);
        assert_eq!((dirs(&c), c.rescan, w.watches()), (vec!["job-a"], None, 2));

        // An append to a file in the new directory is seen through its own watch.
        let mut f = fs::File::create(root.0.join("job-a/session-001.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let _ = w.read(&volume);
        f.write_all(b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["job-a"]);
        assert!(w.read(&volume).is_empty(), "events are consumed once");
    }

    #[test]
    fn deletion_and_rename_report_their_directory_and_an_idle_volume_reports_nothing() {
        let root = Root::new("delete");
        fs::create_dir_all(root.0.join("j1")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir_all(root.0.join("j2")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(root.0.join("j1/a.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        fs::write(root.0.join("j2/b.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches, 3);
        assert!(w.read(&volume).is_empty());
        fs::remove_file(root.0.join("j1/a.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["j1"]);
        fs::rename(root.0.join("j2/b.jsonl"), root.0.join("j2/c.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["j2"]);
        // A whole job directory removed: reported, and its watch forgotten.
        fs::remove_dir_all(root.0.join("j2")).unwrap_or_else(|e| panic!("{e}"));
        let c = w.read(&volume);
        assert_eq!((dirs(&c), c.rescan, w.watches()), (vec!["j2"], None, 2));
    }

    #[test]
    fn a_directory_moved_out_of_the_volume_is_no_longer_watched_and_one_moved_in_is() {
        let root = Root::new("moved");
        let outside = Root::new("moved-outside");
        fs::create_dir_all(root.0.join("job-a")).unwrap_or_else(|e| panic!("{e}"));
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches, 2);
        fs::rename(root.0.join("job-a"), outside.0.join("job-a")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["job-a"]);
        assert_eq!(w.watches(), 1, "its watch is gone");
        fs::write(outside.0.join("job-a/x.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(w.read(&volume).is_empty(), "what happens outside is not reported");
        fs::rename(outside.0.join("job-a"), root.0.join("job-b")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((dirs(&w.read(&volume)), w.watches()), (vec!["job-b"], 2));
    }

    #[test]
    fn the_subagent_layout_is_watched_to_its_depth_and_no_deeper() {
        let root = Root::new("subagents");
        let session = "0b6c2f33-6a56-4d3c-9a51-2a3c7c1e9f10";
        fs::create_dir_all(root.0.join(format!("proj/{session}/subagents"))).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir_all(root.0.join("proj/not-a-uuid")).unwrap_or_else(|e| panic!("{e}"));
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        // root, proj, the session directory and its subagents directory.
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches, 4);
        fs::write(root.0.join(format!("proj/{session}/subagents/agent-1.jsonl")), b"{}\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["proj"]);
    }

    #[test]
    fn a_link_to_a_directory_outside_is_never_watched() {
        let root = Root::new("link");
        let outside = Root::new("link-outside");
        std::os::unix::fs::symlink(&outside.0, root.0.join("job")).unwrap_or_else(|e| panic!("{e}"));
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches, 1, "only the root");
        fs::write(outside.0.join("x.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(w.read(&volume).is_empty());
    }

    #[test]
    fn overflow_and_a_removed_root_ask_for_a_rescan() {
        let root = Root::new("overflow");
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}"));
        let mut overflow = Vec::new();
        overflow.extend_from_slice(&(-1i32).to_ne_bytes());
        overflow.extend_from_slice(&libc::IN_Q_OVERFLOW.to_ne_bytes());
        overflow.extend_from_slice(&0u32.to_ne_bytes());
        overflow.extend_from_slice(&0u32.to_ne_bytes());
        let mut c = Changes::default();
        for e in parse(&overflow) {
            w.apply(&volume, &e, &mut c);
        }
        assert_eq!(c.rescan, Some(Rescan::Overflow));

        assert!(w.watches_root_of(&volume));
        // Renamed away: the kernel says so. Removed while a descriptor holds it: it may not,
        // but a volume opened afresh at the path is not the one watched.
        let moved = root.0.with_extension("moved");
        fs::rename(&root.0, &moved).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.read(&volume).rescan, Some(Rescan::RootChanged));
        fs::create_dir(&root.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(!w.watches_root_of(&root.volume()));
        fs::remove_dir_all(&moved).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn after_a_walk_only_directories_without_a_watch_at_their_place_get_one() {
        let root = Root::new("missing");
        for d in ["j1", "j2"] {
            fs::create_dir_all(root.0.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        let volume = root.volume();
        let mut w = Watcher::new().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches, 3);
        // Nothing changed: a walk adds nothing and asks for no second look.
        let scan = crate::scan::scan_root(&volume).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scan.dirs.len(), 2);
        let (added, watched) = w.watch_missing(&volume, &scan.dirs, false);
        assert_eq!((added.len(), watched), (0, Watched { watches: 3, refused: 0 }));
        let (added, watched) = w.watch_missing(&volume, &scan.dirs, true);
        assert_eq!((added.len(), watched), (0, Watched { watches: 3, refused: 0 }), "asked again: the same watches");
        assert_eq!(
            w.watch_volume(&volume).unwrap_or_else(|e| panic!("{e}")).watches,
            3,
            "a second full walk keeps the same watches"
        );

        // A new directory whose event was not read yet gets its watch from the walk.
        fs::create_dir(root.0.join("j3")).unwrap_or_else(|e| panic!("{e}"));
        let scan = crate::scan::scan_root(&volume).unwrap_or_else(|e| panic!("{e}"));
        let (added, _) = w.watch_missing(&volume, &scan.dirs, false);
        assert_eq!(added.iter().map(String::as_str).collect::<Vec<_>>(), vec!["j3"]);
        // Events lost: one replaced under the same name (perhaps with its predecessor's inode
        // number) is watched again when the walk follows an overflow.
        fs::remove_dir(root.0.join("j2")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir(root.0.join("j2")).unwrap_or_else(|e| panic!("{e}"));
        let scan = crate::scan::scan_root(&volume).unwrap_or_else(|e| panic!("{e}"));
        let (added, _) = w.watch_missing(&volume, &scan.dirs, true);
        assert_eq!(added.iter().map(String::as_str).collect::<Vec<_>>(), vec!["j2"]);
        // The new watches report what happens in them.
        let _ = w.read(&volume);
        fs::write(root.0.join("j2/a.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        fs::write(root.0.join("j3/a.jsonl"), b"{}\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dirs(&w.read(&volume)), vec!["j2", "j3"]);
        assert_eq!(w.watches(), 4, "the removed directory's watch is gone: root, j1, j2, j3");
        let scan = crate::scan::scan_root(&volume).unwrap_or_else(|e| panic!("{e}"));
        assert!(w.watch_missing(&volume, &scan.dirs, false).0.is_empty());
    }

    #[test]
    fn a_truncated_or_hostile_buffer_parses_what_is_whole() {
        let mut buf = Vec::new();
        for (wd, name) in [(1i32, &b"a.jsonl\0\0"[..]), (2, &b"\xff\xfe\0\0"[..])] {
            buf.extend_from_slice(&wd.to_ne_bytes());
            buf.extend_from_slice(&libc::IN_MODIFY.to_ne_bytes());
            buf.extend_from_slice(&0u32.to_ne_bytes());
            buf.extend_from_slice(&u32::try_from(name.len()).unwrap_or(0).to_ne_bytes());
            buf.extend_from_slice(name);
        }
        let events = parse(&buf);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].name.as_deref(), Some("a.jsonl"));
        assert_eq!(events[1].name, None);
        // A length running past the end stops the parse; so does a short header.
        buf.extend_from_slice(&3i32.to_ne_bytes());
        buf.extend_from_slice(&libc::IN_MODIFY.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse(&buf).len(), 2);
        assert_eq!(parse(&buf[..7]).len(), 0);
    }
}
