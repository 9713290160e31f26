//! Walking `sessions_dir` by the discovery rule, through the volume's handle: every directory
//! is listed and every entry statted from a handle on `sessions_dir`, so a link or a `..` can
//! never take the walk outside it (see [`Volume`]). No Postgres: every problem with a single
//! entry is reported as a [`Problem`] and the walk goes on; only an unusable root is an error.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::{first_object, FirstObject, DETECTION_PREFIX_BYTES};
use cortex_buffer_core::indexer::discovery::{classify, descend_into};
pub use cortex_buffer_core::indexer::discovery::{FileStat, Found, Problem};

use crate::volume::{is_same_file, leaves_volume, Entry, Kind, Volume};

#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<Found>,
    pub problems: Vec<Problem>,
    /// Every directory the walk descended into (the volume itself excluded), with its identity:
    /// what the watcher compares with the directories it watches.
    pub dirs: Vec<DirSeen>,
}

/// A directory a walk descended into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirSeen {
    /// Relative to the volume.
    pub rel: PathBuf,
    pub device: u64,
    pub inode: u64,
}

/// What a walk does with directory listings kept from the walk before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListingMode {
    /// Every directory is listed, and nothing is kept: a walk on its own (`index_sessions()`,
    /// a catch-up), or a volume where modification times cannot be trusted (polling mode, for
    /// network filesystems: their times are the server's clock and attribute cache).
    #[default]
    Off,
    /// Every directory is listed, and the listings are kept for the next walk: a walk after
    /// lost events, which must read everything.
    Refresh,
    /// A directory whose identity, size, modification and change times are those of its kept
    /// listing is not read again; the others are listed and kept. The periodic walk of a watched
    /// volume: its safety net against lost events.
    Trust,
}

/// Directory listings kept from one whole-volume walk to the next, so that the periodic walk of
/// a quiet volume reads no directory whose entries cannot have changed: adding, removing or
/// renaming an entry changes the directory's modification time. Each entry is still looked at
/// (`fstatat`), so a file that grew is seen as before. Reading directories is what a walk
/// spends most on (and nearly all of it once the kernel has dropped them from its cache); a
/// directory whose listing is used is opened `O_PATH`, only to look its entries up.
///
/// A listing is kept only if the directory's modification time was at least
/// [`LISTING_SETTLED_US`] older than the moment it was read: a change in the same tick of the
/// file system's clock as the one before could otherwise leave the time unchanged. At most
/// [`MAX_KEPT_NAMES`] names are kept (about 100 bytes each with their directory's entry);
/// directories beyond that are listed on every walk.
#[derive(Debug, Default)]
pub struct Listings {
    mode: ListingMode,
    /// The last walk's listings, by directory relative to the volume (its bytes: a `Path` hashes
    /// component by component).
    kept: HashMap<OsString, Listing>,
    /// This walk's, which replace `kept` when it ends: a directory no longer walked is forgotten.
    next: HashMap<OsString, Listing>,
    /// Names held in `next`.
    names: usize,
    /// Directories the last walk did not read.
    reused: usize,
}

#[derive(Debug)]
struct Listing {
    stamp: DirStamp,
    /// Sorted, as a walk visits them.
    names: Vec<OsString>,
}

/// What must be unchanged for a kept listing to be used: the change time as well as the
/// modification time, which a restore (`tar x`, `rsync -a`) can set back to what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirStamp {
    device: u64,
    inode: u64,
    size: u64,
    mtime_us: i64,
    ctime_ns: i64,
}

impl DirStamp {
    fn of(entry: &Entry) -> DirStamp {
        let stat = &entry.stat;
        DirStamp {
            device: stat.device,
            inode: stat.inode,
            size: stat.size,
            mtime_us: stat.mtime_us,
            ctime_ns: entry.ctime_ns,
        }
    }
}

/// How much older than its reading a directory's modification time must be for the listing to
/// be kept: longer than any file system's timestamp granularity (FAT's is 2 s).
pub const LISTING_SETTLED_US: i64 = 3_000_000;

/// The most names [`Listings`] holds.
pub const MAX_KEPT_NAMES: usize = 2_000_000;

impl Listings {
    /// Sets what the next walks do; `Off` forgets what is kept.
    pub fn set_mode(&mut self, mode: ListingMode) {
        self.mode = mode;
        match mode {
            ListingMode::Off => self.forget(),
            // Nothing kept is used: let it go before the walk keeps anew (at most one set held).
            ListingMode::Refresh => self.kept = HashMap::new(),
            ListingMode::Trust => {}
        }
    }

    /// Forgets every kept listing (the volume changed); the mode stays.
    pub fn forget(&mut self) {
        self.kept = HashMap::new();
        self.next = HashMap::new();
        self.names = 0;
    }

    /// How many directories the last walk did not read, and how many listings it kept.
    pub fn counts(&self) -> (usize, usize) {
        (self.reused, self.kept.len())
    }

    /// The kept listing of `rel`, taken out, if the directory is unchanged since it was read.
    /// A listing that does not match is dropped at once: this walk lists the directory anew.
    fn take(&mut self, rel: &Path, stamp: &DirStamp) -> Option<Listing> {
        if self.mode != ListingMode::Trust {
            return None;
        }
        self.kept.remove(rel.as_os_str()).filter(|l| l.stamp == *stamp)
    }

    /// Keeps `listing` (taken out, or just read at `read_at_us`) for the next walk.
    fn keep(&mut self, rel: PathBuf, listing: Listing, read_at_us: Option<i64>) {
        if self.mode == ListingMode::Off {
            return;
        }
        let settled = read_at_us.is_none_or(|at| listing.stamp.mtime_us < at.saturating_sub(LISTING_SETTLED_US));
        if settled && self.names.saturating_add(listing.names.len()) <= MAX_KEPT_NAMES {
            self.names += listing.names.len();
            self.next.insert(rel.into_os_string(), listing);
        }
    }

    /// Ends a whole walk: its listings are the ones the next walk may use.
    fn finish(&mut self, reused: usize) {
        self.kept = std::mem::take(&mut self.next);
        self.names = 0;
        self.reused = reused;
    }
}

/// Checks that `dir` can serve as a sessions root and opens it (by its canonical path).
pub fn resolve_root(dir: &str) -> Result<Volume, CbError> {
    let path = Path::new(dir);
    if dir.is_empty() || !path.is_absolute() {
        return Err(CbError::new(
            SqlState::InvalidParameterValue,
            format!("sessions directory \"{dir}\" is not an absolute path"),
        )
        .with_hint("Set cortex_buffer.sessions_dir (or pass dir) to an absolute path."));
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| {
        CbError::io("access sessions directory", dir, &e)
            .with_hint("Create the directory, or point cortex_buffer.sessions_dir at the agents' session volume.")
    })?;
    if canonical.to_str().is_none() {
        return Err(CbError::new(
            SqlState::InvalidParameterValue,
            format!("sessions directory \"{dir}\" resolves to a path that is not valid UTF-8"),
        )
        .with_hint("Session file paths are stored as text: give the sessions directory a UTF-8 path."));
    }
    let meta = std::fs::metadata(&canonical).map_err(|e| {
        CbError::io("stat sessions directory", dir, &e)
            .with_hint("The directory must be searchable by the operating-system user running PostgreSQL.")
    })?;
    if !meta.is_dir() {
        return Err(CbError::new(
            SqlState::InvalidParameterValue,
            format!("sessions directory \"{dir}\" is not a directory"),
        )
        .with_hint("Point cortex_buffer.sessions_dir at a directory."));
    }
    let volume = Volume::open(&canonical).map_err(|e| {
        CbError::io("open sessions directory", dir, &e)
            .with_hint("The directory must be readable and searchable by the operating-system user running PostgreSQL.")
    })?;
    let root = volume.open_dir(Path::new("")).map_err(|e| CbError::io("open sessions directory", dir, &e))?;
    volume.list(&root).map_err(|e| {
        CbError::io("list sessions directory", dir, &e)
            .with_hint("The directory must be readable and searchable by the operating-system user running PostgreSQL.")
    })?;
    Ok(volume)
}

/// Walks the volume and returns every session file.
pub fn scan_root(volume: &Volume) -> Result<Scan, CbError> {
    scan_root_with(volume, &mut Listings::default())
}

/// [`scan_root`], using and keeping directory listings as `listings` says.
pub fn scan_root_with(volume: &Volume, listings: &mut Listings) -> Result<Scan, CbError> {
    let mut scan = Scan::default();
    let shown = volume.path().display().to_string();
    let root = volume.open_dir(Path::new("")).map_err(|e| CbError::io("open sessions directory", &shown, &e))?;
    // The volume's own listing is kept as its directories' are: the periodic walk of a quiet
    // volume neither reads nor sorts its job directories' names again (100 000 of them).
    let stamp = volume.stat_fd(&root).ok().map(|entry| DirStamp::of(&entry));
    let kept = stamp.as_ref().and_then(|stamp| listings.take(Path::new(""), stamp));
    let mut reused = usize::from(kept.is_some());
    let (names, read_at) = match kept {
        Some(kept) => (kept.names, None),
        None => {
            let read_at = cortex_buffer_core::shared::now_us();
            let names = volume.list(&root).map_err(|e| CbError::io("list sessions directory", &shown, &e))?;
            (sorted(names), Some(read_at))
        }
    };
    let mut walker = Walker { volume, scan: &mut scan, listings, reused: 0 };
    walker.walk(Path::new(""), &root, &[], &names);
    reused += walker.reused;
    if let Some(stamp) = stamp {
        listings.keep(PathBuf::new(), Listing { stamp, names }, read_at);
    }
    listings.finish(reused);
    sort_by_path(&mut scan.files);
    Ok(scan)
}

/// Walks one top-level directory of the volume (a job's, or a Claude Code project's) by the
/// same rules as [`scan_root`]: what a call-time catch-up needs, without listing the volume. A
/// directory that does not exist (or is not one) has no files; a name with a `/`, `.` or `..`
/// is no top-level directory at all.
pub fn scan_dir(volume: &Volume, dir_name: &str) -> Scan {
    let mut scan = Scan::default();
    if dir_name.is_empty() || dir_name == "." || dir_name == ".." || dir_name.contains('/') {
        return scan;
    }
    let name = std::ffi::OsStr::new(dir_name);
    // A first-level directory is never a link (see Volume): anything else has no files.
    let Ok(entry) = volume.stat_at(volume.root(), name) else { return scan };
    if entry.kind != Kind::Dir {
        return scan;
    }
    let rel = Path::new(dir_name);
    match volume.open_subdir(volume.root(), name).and_then(|fd| volume.list(&fd).map(|names| (fd, names))) {
        Ok((fd, names)) => {
            scan.dirs.push(DirSeen { rel: rel.to_path_buf(), device: entry.stat.device, inode: entry.stat.inode });
            let mut listings = Listings::default();
            let mut walker = Walker { volume, scan: &mut scan, listings: &mut listings, reused: 0 };
            walker.walk(rel, &fd, &[dir_name], &sorted(names));
        }
        Err(e) => scan.problems.push(problem(&volume.path().join(rel), format!("could not open directory: {e}"))),
    }
    sort_by_path(&mut scan.files);
    scan
}

/// Sorts what a walk found by path. A walk visits each directory's names in order, so the paths
/// come sorted unless a name sorts before its directory's separator (`a-b/` before `a/`): the
/// check saves sorting 100 000 paths on every periodic walk of job directories named by UUID.
fn sort_by_path(files: &mut [Found]) {
    if !files.is_sorted_by(|a, b| a.path <= b.path) {
        files.sort_by(|a, b| a.path.cmp(&b.path));
    }
}

fn sorted(mut names: Vec<OsString>) -> Vec<OsString> {
    names.sort();
    names
}

/// A walk under way: the volume, what it found, and the listings it may use and keeps.
struct Walker<'a> {
    volume: &'a Volume,
    scan: &'a mut Scan,
    listings: &'a mut Listings,
    /// Directories whose kept listing was used.
    reused: usize,
}

impl Walker<'_> {
    /// Walks the entries `names` of the directory `dir` (at `dir_rel`, below `parents`). Each
    /// entry the discovery rule could select is looked at with one `fstatat` in `dir`, which was
    /// itself opened beneath the volume; a subdirectory that is no link is opened from `dir`
    /// with `O_NOFOLLOW`. Only links are resolved from the volume's handle, beneath their
    /// first-level directory, so they are followed exactly as far as [`Volume`] allows.
    /// Entries the rule never selects are not looked at at all.
    fn walk(&mut self, dir_rel: &Path, dir: &OwnedFd, parents: &[&str], names: &[OsString]) {
        let volume = self.volume;
        let depth = parents.len() + 1;
        // The entry's components below the volume: its parents', then its own name (one vector
        // for the directory, not one per entry: a walk of 100 000 directories allocates less).
        let mut components: Vec<&str> = Vec::with_capacity(depth);
        components.extend_from_slice(parents);
        for os_name in names {
            let Some(name) = os_name.to_str() else {
                // Only report names the rule could have selected; others are not ours to judge.
                let lossy = os_name.to_string_lossy().into_owned();
                if depth == 1 || lossy.ends_with(".jsonl") {
                    self.scan.problems.push(problem(
                        &volume.path().join(dir_rel.join(os_name)),
                        "name is not valid UTF-8; skipped".into(),
                    ));
                }
                continue;
            };
            components.truncate(parents.len());
            components.push(name);
            let descend = descend_into(depth, name, parents);
            let layout = classify(&components);
            if !descend && layout.is_none() {
                continue;
            }
            let rel = dir_rel.join(os_name);
            let Some((entry, link)) = entry_of(volume, dir, os_name, &rel, self.scan) else { continue };

            if entry.kind == Kind::Dir {
                if descend {
                    self.descend(dir, os_name, rel, &entry, link, &components);
                }
                continue;
            }

            let Some(layout) = layout else { continue };
            let path = volume.path().join(&rel);
            if entry.kind != Kind::File {
                self.scan
                    .problems
                    .push(problem(&path, format!("not a regular file ({}); skipped", entry.kind.describe())));
                continue;
            }
            let Some(path_str) = path.to_str() else { continue };
            self.scan.files.push(Found {
                path: path_str.to_owned(),
                job_dir: components[0].to_owned(),
                file_name: name.to_owned(),
                layout,
                stat: entry.stat,
            });
        }
    }

    /// Walks the subdirectory `name` of `dir` (at `rel`): with its kept listing when it is
    /// unchanged since (and no link), else listed now (and kept).
    fn descend(
        &mut self,
        dir: &OwnedFd,
        name: &std::ffi::OsStr,
        rel: PathBuf,
        entry: &Entry,
        link: bool,
        components: &[&str],
    ) {
        let volume = self.volume;
        let path = || volume.path().join(&rel);
        let stamp = DirStamp::of(entry);
        let seen = DirSeen { rel: rel.clone(), device: entry.stat.device, inode: entry.stat.inode };
        if let Some(kept) = if link { None } else { self.listings.take(&rel, &stamp) } {
            // Opened by name again: only if it is still the directory the stamp describes (one
            // swapped in since is listed below, as any other).
            match volume.open_subdir_path(dir, name) {
                Ok(fd) if volume.stat_fd(&fd).is_ok_and(|now| DirStamp::of(&now) == stamp) => {
                    self.scan.dirs.push(seen);
                    self.reused += 1;
                    self.walk(&rel, &fd, components, &kept.names);
                    self.listings.keep(rel, kept, None);
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    self.scan.problems.push(problem(&path(), format!("could not open directory: {e}")));
                    return;
                }
            }
        }
        let opened = if link { volume.open_dir(&rel) } else { volume.open_subdir(dir, name) };
        let read_at = cortex_buffer_core::shared::now_us();
        match opened.and_then(|fd| volume.list(&fd).map(|names| (fd, names))) {
            Ok((fd, children)) => {
                self.scan.dirs.push(seen);
                let children = sorted(children);
                self.walk(&rel, &fd, components, &children);
                if !link {
                    self.listings.keep(rel, Listing { stamp, names: children }, Some(read_at));
                }
            }
            Err(e) => self.scan.problems.push(problem(&path(), format!("could not open directory: {e}"))),
        }
    }
}

/// What an entry is, and whether it was reached through a link: a link is followed only while
/// it stays inside its first-level directory.
fn entry_of(
    volume: &Volume,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    rel: &Path,
    scan: &mut Scan,
) -> Option<(Entry, bool)> {
    // Only a problem needs the entry's whole path.
    let path = || volume.path().join(rel);
    match volume.stat_at(dir, name) {
        Ok(entry) if entry.kind != Kind::Symlink => Some((entry, false)),
        Ok(_) => match volume.stat(rel) {
            Ok(m) => Some((Entry::of_metadata(&m), true)),
            Err(e) if leaves_volume(&e) => {
                scan.problems.push(problem(
                    &path(),
                    "symbolic link leads outside the sessions directory or out of its job's directory (or is absolute, or loops); skipped".into(),
                ));
                None
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                scan.problems.push(problem(&path(), "dangling symbolic link; skipped".into()));
                None
            }
            Err(e) => {
                scan.problems.push(problem(&path(), format!("could not stat: {e}")));
                None
            }
        },
        // Removed since the listing: simply gone.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            scan.problems.push(problem(&path(), format!("could not stat: {e}")));
            None
        }
    }
}

fn problem(path: &Path, reason: String) -> Problem {
    Problem { path: path.display().to_string(), reason }
}

/// Opens the regular file `rel`, only if it is still the file the scan saw (`stat`'s device
/// and inode).
pub fn open_scanned(volume: &Volume, rel: &Path, stat: &FileStat) -> io::Result<File> {
    let file = volume.open_file(rel)?;
    if !is_same_file(&file, stat.device, stat.inode)? {
        return Err(io::Error::other("replaced since it was scanned"));
    }
    Ok(file)
}

/// Reads at most `max` bytes from the start of the regular file `rel`, only if it is still
/// the file the scan saw (`stat`'s device and inode); the flag tells whether that was the
/// whole file.
pub fn read_prefix(volume: &Volume, rel: &Path, stat: &FileStat, max: usize) -> io::Result<(Vec<u8>, bool)> {
    read_head(&open_scanned(volume, rel, stat)?, max)
}

/// How much of a file dialect detection reads first; more (up to
/// [`DETECTION_PREFIX_BYTES`]) only when no line in it is an object.
const DETECTION_FIRST_READ: usize = 16 * 1024;

/// The first line of an open file that is a JSON object (see [`first_object`]), looked for in
/// its first [`DETECTION_PREFIX_BYTES`]. Reads little for the usual file, whose first line is
/// one: the first 16 KiB, and the rest of the prefix only when they hold no object. Finds what a
/// search of the whole prefix finds: lines come in order, and a complete line in the short read
/// is a complete line in the long one.
pub fn first_object_of(file: &File) -> io::Result<Option<FirstObject>> {
    let (prefix, whole) = read_head(file, DETECTION_FIRST_READ)?;
    if let Some(found) = first_object(&prefix, whole) {
        return Ok(Some(found));
    }
    if whole {
        return Ok(None);
    }
    let (prefix, whole) = read_head(file, DETECTION_PREFIX_BYTES)?;
    Ok(first_object(&prefix, whole))
}

/// At most `max` bytes from the start of an open file, read with `pread` so that the file's
/// offset does not move (a reader thread may hold it), and whether that was the whole file.
pub fn read_head(file: &File, max: usize) -> io::Result<(Vec<u8>, bool)> {
    // One byte more than asked tells whether the file goes on; the buffer grows as bytes come,
    // so a large `max` costs memory only for a file that large.
    let limit = max.saturating_add(1);
    let mut buf = vec![0u8; limit.min(64 * 1024)];
    let mut read = 0usize;
    loop {
        if read == buf.len() {
            if buf.len() >= limit {
                break;
            }
            buf.resize(limit.min(buf.len().saturating_mul(2)), 0);
        }
        match file.read_at(&mut buf[read..], read as u64) {
            Ok(0) => break,
            Ok(k) => read += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(read);
    let whole = buf.len() <= max;
    buf.truncate(max);
    Ok((buf, whole))
}

/// The volume-relative form of an absolute session-file path.
pub fn relative(volume: &Volume, path: &str) -> io::Result<PathBuf> {
    volume.relative(Path::new(path)).map(Path::to_path_buf).ok_or_else(|| io::Error::from_raw_os_error(libc::EXDEV))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cortex_buffer_core::indexer::discovery::Layout;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn scan_dir(root: &Path) -> Result<Scan, CbError> {
        scan_root(&Volume::open(root).map_err(|e| CbError::io("open", "root", &e))?)
    }

    const SID: &str = "ef958aa1-0e93-49f0-bb71-150f63befcd1";

    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("cb-scan-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
            TempDir(fs::canonicalize(&p).unwrap_or(p))
        }
        fn put(&self, rel: &str, body: &str) {
            let p = self.0.join(rel);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir: {e}"));
            }
            fs::write(&p, body).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn rel_paths(scan: &Scan, root: &Path) -> Vec<String> {
        scan.files
            .iter()
            .map(|f| f.path.strip_prefix(&format!("{}/", root.display())).unwrap_or(&f.path).to_owned())
            .collect()
    }

    #[test]
    fn finds_exactly_what_the_rule_selects() {
        let t = TempDir::new("rule");
        t.put("job-a/session-001.jsonl", "{}\n");
        t.put("job-a/metadata.json", "{}");
        t.put("job-a/screenshots/shot.jsonl", "{}\n");
        t.put("top.jsonl", "{}\n");
        t.put(&format!("proj/{SID}.jsonl"), "{}\n");
        t.put(&format!("proj/{SID}/subagents/agent-1.jsonl"), "{}\n");
        t.put(&format!("proj/{SID}/subagents/agent-1.meta.json"), "{}");
        t.put("proj/not-uuid/subagents/agent-2.jsonl", "{}\n");
        let scan = scan_dir(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            rel_paths(&scan, &t.0),
            vec![
                "job-a/session-001.jsonl".to_string(),
                format!("proj/{SID}.jsonl"),
                format!("proj/{SID}/subagents/agent-1.jsonl"),
            ]
        );
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        let sub = &scan.files[2];
        assert_eq!((sub.job_dir.as_str(), sub.layout), ("proj", Layout::Subagent));
        assert_eq!(scan.files[0].stat.size, 3);
    }

    #[test]
    fn files_come_sorted_by_path_in_whatever_order_the_walk_met_them() {
        let t = TempDir::new("order");
        // The walk meets job-a before job-a-b (its names in order), but by path job-a-b/ comes
        // first ('-' sorts before '/').
        t.put("job-a/session-001.jsonl", "{}\n");
        t.put("job-a-b/session-001.jsonl", "{}\n");
        t.put("job-c/session-002.jsonl", "{}\n");
        t.put("job-c/session-001.jsonl", "{}\n");
        let scan = scan_dir(&t.0).unwrap_or_else(|e| panic!("{e}"));
        let want = [
            "job-a-b/session-001.jsonl",
            "job-a/session-001.jsonl",
            "job-c/session-001.jsonl",
            "job-c/session-002.jsonl",
        ];
        assert_eq!(rel_paths(&scan, &t.0), want);
        // Without job-a-b the walk's order is already the paths' order.
        fs::remove_dir_all(t.0.join("job-a-b")).unwrap_or_else(|e| panic!("rm: {e}"));
        let scan = scan_dir(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rel_paths(&scan, &t.0), want[1..]);
        let volume = Volume::open(&t.0).unwrap_or_else(|e| panic!("open: {e}"));
        let one = super::scan_dir(&volume, "job-c");
        assert_eq!(rel_paths(&one, &t.0), want[2..]);
    }

    #[test]
    fn symlinks_inside_their_job_directory_are_followed_and_others_are_reported() {
        let t = TempDir::new("links");
        let outside = TempDir::new("links-outside");
        outside.put("secret.jsonl", "{}\n");
        t.put("job/real.jsonl", "{}\n");
        t.put("other/theirs.jsonl", "{}\n");
        symlink("real.jsonl", t.0.join("job/alias.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        // Through the volume's root, even back into its own directory: refused.
        symlink("../job/real.jsonl", t.0.join("job/alias2.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        // Another job's file, from inside this job's volume: refused (it would be indexed as this job's).
        symlink("../other/theirs.jsonl", t.0.join("job/steal.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(outside.0.join("secret.jsonl"), t.0.join("job/escape.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(t.0.join("job/real.jsonl"), t.0.join("job/absolute.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink("missing", t.0.join("job/dangling.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(&outside.0, t.0.join("linked-job")).unwrap_or_else(|e| panic!("{e}"));
        // A job directory that is a link to another one: refused.
        symlink("other", t.0.join("alias-job")).unwrap_or_else(|e| panic!("{e}"));
        let scan = scan_dir(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rel_paths(&scan, &t.0), vec!["job/alias.jsonl", "job/real.jsonl", "other/theirs.jsonl"]);
        let mut reasons: Vec<(String, &str)> = scan
            .problems
            .iter()
            .map(|p| (p.path.rsplit('/').next().unwrap_or_default().to_owned(), p.reason.as_str()))
            .collect();
        reasons.sort();
        let names: Vec<&str> = reasons.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "absolute.jsonl",
                "alias-job",
                "alias2.jsonl",
                "dangling.jsonl",
                "escape.jsonl",
                "linked-job",
                "steal.jsonl"
            ],
            "{reasons:?}"
        );
        for (name, reason) in &reasons {
            let expected = if name == "dangling.jsonl" { "dangling" } else { "outside the sessions directory" };
            assert!(reason.contains(expected), "{name}: {reason}");
        }
    }

    #[test]
    fn special_files_are_reported_not_read() {
        let t = TempDir::new("fifo");
        fs::create_dir_all(t.0.join("job")).unwrap_or_else(|e| panic!("{e}"));
        let fifo = t.0.join("job/pipe.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap_or_default()).unwrap_or_default();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        fs::create_dir_all(t.0.join("job/dir.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let scan = scan_dir(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(scan.files.is_empty());
        let reasons: Vec<&str> = scan.problems.iter().map(|p| p.reason.as_str()).collect();
        assert_eq!(reasons, vec!["not a regular file (FIFO); skipped"]);
        let v = Volume::open(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(v.open_file(Path::new("job/pipe.jsonl")).is_err(), "a FIFO must not be read (nor block)");
    }

    #[test]
    fn unreadable_job_directory_is_a_problem_not_an_error() {
        if unsafe { libc::geteuid() } == 0 {
            // Root ignores directory permissions; the end-to-end suite covers this as `postgres`.
            return;
        }
        let t = TempDir::new("perm");
        t.put("locked/a.jsonl", "{}\n");
        t.put("open/b.jsonl", "{}\n");
        fs::set_permissions(t.0.join("locked"), fs::Permissions::from_mode(0o000)).unwrap_or_else(|e| panic!("{e}"));
        let scan = scan_dir(&t.0);
        fs::set_permissions(t.0.join("locked"), fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        let scan = scan.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rel_paths(&scan, &t.0), vec!["open/b.jsonl"]);
        assert_eq!(scan.problems.len(), 1);
    }

    #[test]
    fn resolve_root_explains_unusable_roots() {
        let rel = resolve_root("relative/dir").unwrap_err();
        assert_eq!(rel.state, SqlState::InvalidParameterValue);
        let missing = resolve_root("/nonexistent/cortex-buffer-test").unwrap_err();
        assert_eq!(missing.state, SqlState::UndefinedFile);
        assert!(missing.hint.is_some());
        let t = TempDir::new("root-file");
        t.put("file", "x");
        let not_dir = resolve_root(t.0.join("file").to_str().unwrap_or_default()).unwrap_err();
        assert_eq!(not_dir.state, SqlState::InvalidParameterValue);
        assert_eq!(
            resolve_root(t.0.to_str().unwrap_or_default()).ok().map(|v| v.path().to_path_buf()),
            Some(t.0.clone())
        );
    }

    #[test]
    fn read_prefix_caps_and_reports_whole_files() {
        let t = TempDir::new("prefix");
        t.put("j/a.jsonl", "0123456789");
        let v = Volume::open(&t.0).unwrap_or_else(|e| panic!("{e}"));
        let rel = Path::new("j/a.jsonl");
        let stat = FileStat::of(&fs::metadata(t.0.join(rel)).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(read_prefix(&v, rel, &stat, 4).ok(), Some((b"0123".to_vec(), false)));
        assert_eq!(read_prefix(&v, rel, &stat, 10).ok(), Some((b"0123456789".to_vec(), true)));
        assert_eq!(read_prefix(&v, rel, &stat, 100).ok(), Some((b"0123456789".to_vec(), true)));
        // Another file in its place since the scan is not read.
        let replaced = FileStat { inode: stat.inode + 1, ..stat };
        assert!(read_prefix(&v, rel, &replaced, 100).is_err());
    }

    #[test]
    fn read_head_grows_past_its_first_buffer_and_leaves_the_offset() {
        use std::io::{Seek, SeekFrom};
        let t = TempDir::new("head");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(t.0.join("big"), &bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut f = File::open(t.0.join("big")).unwrap_or_else(|e| panic!("{e}"));
        f.seek(SeekFrom::Start(7)).unwrap_or_else(|e| panic!("{e}"));
        let head = |max| read_head(&f, max).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(head(0), (Vec::new(), false));
        assert_eq!(head(150_000), (bytes[..150_000].to_vec(), false));
        assert_eq!(head(199_999), (bytes[..199_999].to_vec(), false));
        assert_eq!(head(200_000), (bytes.clone(), true));
        assert_eq!(head(usize::MAX), (bytes.clone(), true));
        assert_eq!(f.stream_position().ok(), Some(7));
    }

    /// Sets `rel`'s modification time `secs` seconds back, as if it had not changed since.
    fn age(t: &TempDir, rel: &str, secs: i64) {
        set_times(t, rel, cortex_buffer_core::shared::now_us() / 1_000_000 - secs);
    }

    /// Sets `rel`'s access and modification times to `at` (seconds since the epoch).
    fn set_times(t: &TempDir, rel: &str, at: i64) {
        let c = std::ffi::CString::new(t.0.join(rel).as_os_str().as_encoded_bytes()).unwrap_or_default();
        let at = libc::timespec { tv_sec: at, tv_nsec: 0 };
        // SAFETY: a NUL-terminated path and two valid timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [at, at].as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        assert_eq!(r, 0, "utimensat {rel}");
    }

    fn walk_with(root: &Path, listings: &mut Listings) -> Scan {
        let volume = Volume::open(root).unwrap_or_else(|e| panic!("open: {e}"));
        scan_root_with(&volume, listings).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_kept_listing_spares_reading_an_unchanged_directory_and_still_sees_its_files_grow() {
        let t = TempDir::new("listings");
        t.put("job-a/session-001.jsonl", "{}\n");
        t.put("job-b/session-001.jsonl", "{}\n");
        age(&t, "job-a", 60);
        age(&t, "job-b", 60);
        let mut listings = Listings::default();
        listings.set_mode(ListingMode::Trust);
        let first = walk_with(&t.0, &mut listings);
        assert_eq!(rel_paths(&first, &t.0), vec!["job-a/session-001.jsonl", "job-b/session-001.jsonl"]);
        assert_eq!(listings.counts(), (0, 2), "the first walk reads both and keeps both");

        // Nothing changed in job-a's entries, but its file grew: the listing is used, and the
        // file is still looked at.
        t.put("job-a/session-001.jsonl", "{}\n{}\n");
        let second = walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (2, 2));
        assert_eq!(second.files.iter().map(|f| f.stat.size).collect::<Vec<_>>(), vec![6, 3]);
        assert_eq!(second.dirs.len(), 2, "both directories are still reported as walked");

        // A new entry changes the directory's time: job-b is read again, and its new file found.
        t.put("job-b/session-002.jsonl", "{}\n");
        let third = walk_with(&t.0, &mut listings);
        assert_eq!(
            rel_paths(&third, &t.0),
            vec!["job-a/session-001.jsonl", "job-b/session-001.jsonl", "job-b/session-002.jsonl"]
        );
        assert_eq!(listings.counts(), (1, 1), "job-b changed just now: read, and not kept yet");

        // A removed file too, once the directory has settled.
        age(&t, "job-b", 60);
        walk_with(&t.0, &mut listings);
        fs::remove_file(t.0.join("job-b/session-001.jsonl")).unwrap_or_else(|e| panic!("rm: {e}"));
        let fourth = walk_with(&t.0, &mut listings);
        assert_eq!(rel_paths(&fourth, &t.0), vec!["job-a/session-001.jsonl", "job-b/session-002.jsonl"]);
    }

    #[test]
    fn the_volumes_own_listing_is_kept_too_and_read_again_once_a_directory_appears_in_it() {
        let t = TempDir::new("listings-root");
        t.put("job-a/session-001.jsonl", "{}\n");
        age(&t, "job-a", 60);
        age(&t, "", 60);
        let mut listings = Listings::default();
        listings.set_mode(ListingMode::Trust);
        walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (0, 2), "the volume's listing is kept with job-a's");
        t.put("job-a/session-001.jsonl", "{}\n{}\n");
        let second = walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (2, 2), "neither is read again");
        assert_eq!(
            second.files.iter().map(|f| f.stat.size).collect::<Vec<_>>(),
            vec![6],
            "the file is still looked at"
        );
        t.put("job-b/session-001.jsonl", "{}\n");
        let third = walk_with(&t.0, &mut listings);
        assert_eq!(rel_paths(&third, &t.0), vec!["job-a/session-001.jsonl", "job-b/session-001.jsonl"]);
        assert_eq!(listings.counts(), (1, 1), "the volume changed: read again (and not kept yet); job-a not");
    }

    #[test]
    fn a_directory_whose_time_was_set_back_after_a_change_is_read_again() {
        // A restore (tar x, rsync -a) can set a directory's modification time back to the one
        // its kept listing has; its change time moves on all the same.
        let t = TempDir::new("listings-restored");
        t.put("job-a/session-001.jsonl", "{}\n");
        let old = cortex_buffer_core::shared::now_us() / 1_000_000 - 60;
        set_times(&t, "job-a", old);
        let mut listings = Listings::default();
        listings.set_mode(ListingMode::Trust);
        walk_with(&t.0, &mut listings);
        std::thread::sleep(std::time::Duration::from_millis(20));
        t.put("job-a/session-002.jsonl", "{}\n");
        set_times(&t, "job-a", old);
        let scan = walk_with(&t.0, &mut listings);
        assert_eq!(rel_paths(&scan, &t.0), vec!["job-a/session-001.jsonl", "job-a/session-002.jsonl"]);
        assert_eq!(listings.counts().0, 0, "same mtime, size and inode, but another ctime: read again");
    }

    #[test]
    fn a_directory_replaced_under_the_same_name_and_time_is_read_again() {
        let t = TempDir::new("listings-replaced");
        t.put("job-a/session-001.jsonl", "{}\n");
        age(&t, "job-a", 60);
        let mut listings = Listings::default();
        listings.set_mode(ListingMode::Trust);
        walk_with(&t.0, &mut listings);
        fs::rename(t.0.join("job-a"), t.0.join("old")).unwrap_or_else(|e| panic!("mv: {e}"));
        t.put("job-a/session-007.jsonl", "{}\n");
        age(&t, "job-a", 60);
        let scan = walk_with(&t.0, &mut listings);
        assert_eq!(rel_paths(&scan, &t.0), vec!["job-a/session-007.jsonl", "old/session-001.jsonl"]);
        assert_eq!(listings.counts().0, 0, "job-a is another inode, and old another name: both read");
    }

    #[test]
    fn listings_are_kept_only_when_asked_and_used_only_when_trusted() {
        let t = TempDir::new("listings-modes");
        t.put("job-a/session-001.jsonl", "{}\n");
        age(&t, "job-a", 60);
        let mut listings = Listings::default();
        walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (0, 0), "off by default: nothing kept");
        listings.set_mode(ListingMode::Refresh);
        walk_with(&t.0, &mut listings);
        walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (0, 1), "refresh reads everything, and keeps it");
        listings.set_mode(ListingMode::Trust);
        walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (1, 1));
        listings.set_mode(ListingMode::Refresh);
        assert_eq!(listings.counts().1, 0, "refresh lets what it will not use go before it walks");
        walk_with(&t.0, &mut listings);
        assert_eq!(listings.counts(), (0, 1));
        listings.set_mode(ListingMode::Off);
        assert_eq!(listings.counts().1, 0, "off forgets");
    }
}
