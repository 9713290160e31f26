//! Walking `sessions_dir` by the discovery rule, through the volume's handle: every directory
//! is listed and every entry statted from a handle on `sessions_dir`, so a link or a `..` can
//! never take the walk outside it (see [`Volume`]). No Postgres: every problem with a single
//! entry is reported as a [`Problem`] and the walk goes on; only an unusable root is an error.

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
    let mut scan = Scan::default();
    let shown = volume.path().display().to_string();
    let root = volume.open_dir(Path::new("")).map_err(|e| CbError::io("open sessions directory", &shown, &e))?;
    let names = volume.list(&root).map_err(|e| CbError::io("list sessions directory", &shown, &e))?;
    walk(volume, Path::new(""), &root, &[], sorted(names), &mut scan);
    scan.files.sort_by(|a, b| a.path.cmp(&b.path));
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
            walk(volume, rel, &fd, &[dir_name], sorted(names), &mut scan);
        }
        Err(e) => scan.problems.push(problem(&volume.path().join(rel), format!("could not open directory: {e}"))),
    }
    scan.files.sort_by(|a, b| a.path.cmp(&b.path));
    scan
}

fn sorted(mut names: Vec<OsString>) -> Vec<OsString> {
    names.sort();
    names
}

/// Walks the entries `names` of the directory `dir` (at `dir_rel`, below `parents`). Each entry
/// the discovery rule could select is looked at with one `fstatat` in `dir`, which was itself
/// opened beneath the volume; a subdirectory that is no link is opened from `dir` with
/// `O_NOFOLLOW`. Only links are resolved from the volume's handle, beneath their first-level
/// directory, so they are followed exactly as far as [`Volume`] allows. Entries the rule never
/// selects are not looked at at all.
fn walk(volume: &Volume, dir_rel: &Path, dir: &OwnedFd, parents: &[&str], names: Vec<OsString>, scan: &mut Scan) {
    let depth = parents.len() + 1;
    for os_name in names {
        let Some(name) = os_name.to_str() else {
            // Only report names the rule could have selected; others are not ours to judge.
            let lossy = os_name.to_string_lossy().into_owned();
            if depth == 1 || lossy.ends_with(".jsonl") {
                scan.problems.push(problem(
                    &volume.path().join(dir_rel.join(&os_name)),
                    "name is not valid UTF-8; skipped".into(),
                ));
            }
            continue;
        };
        let mut components: Vec<&str> = parents.to_vec();
        components.push(name);
        let descend = descend_into(depth, name, parents);
        let layout = classify(&components);
        if !descend && layout.is_none() {
            continue;
        }
        let rel = dir_rel.join(&os_name);
        let path = volume.path().join(&rel);
        let Some((entry, link)) = entry_of(volume, dir, &os_name, &rel, &path, scan) else { continue };

        if entry.kind == Kind::Dir {
            if descend {
                let opened = if link { volume.open_dir(&rel) } else { volume.open_subdir(dir, &os_name) };
                match opened.and_then(|fd| volume.list(&fd).map(|names| (fd, names))) {
                    Ok((fd, children)) => {
                        scan.dirs.push(DirSeen {
                            rel: rel.clone(),
                            device: entry.stat.device,
                            inode: entry.stat.inode,
                        });
                        walk(volume, &rel, &fd, &components, sorted(children), scan);
                    }
                    Err(e) => scan.problems.push(problem(&path, format!("could not open directory: {e}"))),
                }
            }
            continue;
        }

        let Some(layout) = layout else { continue };
        if entry.kind != Kind::File {
            scan.problems.push(problem(&path, format!("not a regular file ({}); skipped", entry.kind.describe())));
            continue;
        }
        let Some(path_str) = path.to_str() else { continue };
        scan.files.push(Found {
            path: path_str.to_owned(),
            job_dir: components[0].to_owned(),
            file_name: name.to_owned(),
            layout,
            stat: entry.stat,
        });
    }
}

/// What an entry is, and whether it was reached through a link: a link is followed only while
/// it stays inside its first-level directory.
fn entry_of(
    volume: &Volume,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    rel: &Path,
    path: &Path,
    scan: &mut Scan,
) -> Option<(Entry, bool)> {
    match volume.stat_at(dir, name) {
        Ok(entry) if entry.kind != Kind::Symlink => Some((entry, false)),
        Ok(_) => match volume.stat(rel) {
            Ok(m) => Some((Entry::of_metadata(&m), true)),
            Err(e) if leaves_volume(&e) => {
                scan.problems.push(problem(
                    path,
                    "symbolic link leads outside the sessions directory or out of its job's directory (or is absolute, or loops); skipped".into(),
                ));
                None
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                scan.problems.push(problem(path, "dangling symbolic link; skipped".into()));
                None
            }
            Err(e) => {
                scan.problems.push(problem(path, format!("could not stat: {e}")));
                None
            }
        },
        // Removed since the listing: simply gone.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            scan.problems.push(problem(path, format!("could not stat: {e}")));
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
}
