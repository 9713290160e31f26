//! Walking `sessions_dir` by the discovery rule. Plain `std::fs`, no Postgres: every problem
//! with a single entry is reported as a [`Problem`] and the walk goes on; only an unusable root
//! is an error.

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use cortex_buffer_core::buffer::discovery::{classify, descend_into};
pub use cortex_buffer_core::buffer::discovery::{FileStat, Found, Problem};
use cortex_buffer_core::error::{CbError, SqlState};

#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<Found>,
    pub problems: Vec<Problem>,
}

/// Checks that `dir` can serve as a sessions root and returns its canonical form.
pub fn resolve_root(dir: &str) -> Result<PathBuf, CbError> {
    let path = Path::new(dir);
    if dir.is_empty() || !path.is_absolute() {
        return Err(CbError::new(
            SqlState::InvalidParameterValue,
            format!("sessions directory \"{dir}\" is not an absolute path"),
        )
        .with_hint("Set cortex_buffer.sessions_dir (or pass dir) to an absolute path."));
    }
    let canonical = fs::canonicalize(path).map_err(|e| {
        CbError::io("access sessions directory", dir, &e)
            .with_hint("Create the directory, or point cortex_buffer.sessions_dir at the agents' session volume.")
    })?;
    let meta = fs::metadata(&canonical).map_err(|e| {
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
    fs::read_dir(&canonical).map_err(|e| {
        CbError::io("open sessions directory", dir, &e)
            .with_hint("The directory must be readable and searchable by the operating-system user running PostgreSQL.")
    })?;
    Ok(canonical)
}

/// Walks `root` (already resolved by [`resolve_root`]) and returns every session file.
pub fn scan_root(root: &Path) -> Result<Scan, CbError> {
    let mut scan = Scan::default();
    let root_str = root
        .to_str()
        .ok_or_else(|| CbError::new(SqlState::InvalidParameterValue, "sessions directory path is not valid UTF-8"))?;
    let entries = fs::read_dir(root).map_err(|e| CbError::io("open sessions directory", root_str, &e))?;
    walk(root, &[], sorted(entries, root, &mut scan), &mut scan);
    scan.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(scan)
}

fn sorted(entries: fs::ReadDir, dir: &Path, scan: &mut Scan) -> Vec<fs::DirEntry> {
    let mut out = Vec::new();
    for entry in entries {
        match entry {
            Ok(e) => out.push(e),
            Err(e) => scan.problems.push(problem(dir, format!("could not read directory entry: {e}"))),
        }
    }
    out.sort_by_key(|e| e.file_name());
    out
}

fn walk(root: &Path, parents: &[&str], entries: Vec<fs::DirEntry>, scan: &mut Scan) {
    let depth = parents.len() + 1;
    for entry in entries {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            // Only report names the rule could have selected; others are not ours to judge.
            let lossy = entry.file_name().to_string_lossy().into_owned();
            if depth == 1 || lossy.ends_with(".jsonl") {
                scan.problems.push(problem(&path, "name is not valid UTF-8; skipped".into()));
            }
            continue;
        };
        let Some(meta) = entry_metadata(root, &entry, &path, scan) else { continue };

        if meta.is_dir() {
            if descend_into(depth, &name, parents) {
                match fs::read_dir(&path) {
                    Ok(children) => {
                        let children = sorted(children, &path, scan);
                        let mut next: Vec<&str> = parents.to_vec();
                        next.push(&name);
                        walk(root, &next, children, scan);
                    }
                    Err(e) => scan.problems.push(problem(&path, format!("could not open directory: {e}"))),
                }
            }
            continue;
        }

        let mut components: Vec<&str> = parents.to_vec();
        components.push(&name);
        let Some(layout) = classify(&components) else { continue };
        if !meta.is_file() {
            scan.problems.push(problem(&path, format!("not a regular file ({}); skipped", kind(&meta))));
            continue;
        }
        let Some(path_str) = path.to_str() else { continue };
        scan.files.push(Found {
            path: path_str.to_owned(),
            job_dir: components[0].to_owned(),
            file_name: name.clone(),
            layout,
            stat: FileStat::of(&meta),
        });
    }
}

/// Metadata of an entry, following a symbolic link only when it stays inside the root.
fn entry_metadata(root: &Path, entry: &fs::DirEntry, path: &Path, scan: &mut Scan) -> Option<Metadata> {
    let file_type = match entry.file_type() {
        Ok(t) => t,
        Err(e) => {
            scan.problems.push(problem(path, format!("could not stat: {e}")));
            return None;
        }
    };
    if file_type.is_symlink() {
        match fs::canonicalize(path) {
            Ok(target) if target.starts_with(root) => {}
            Ok(target) => {
                scan.problems.push(problem(
                    path,
                    format!("symbolic link points outside the sessions directory (to {}); skipped", target.display()),
                ));
                return None;
            }
            Err(e) => {
                scan.problems.push(problem(path, format!("dangling or unreadable symbolic link: {e}")));
                return None;
            }
        }
    }
    match fs::metadata(path) {
        Ok(m) => Some(m),
        // Removed between listing and stat: it is simply not there any more.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            scan.problems.push(problem(path, format!("could not stat: {e}")));
            None
        }
    }
}

fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else {
        "special file"
    }
}

fn problem(path: &Path, reason: String) -> Problem {
    Problem { path: path.display().to_string(), reason }
}

/// Reads at most `max` bytes from the start of a regular file; the flag tells whether that was
/// the whole file. Opening with O_NONBLOCK keeps a file swapped for a FIFO from blocking us.
pub fn read_prefix(path: &Path, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let file = open_regular(path)?;
    let mut buf = Vec::with_capacity(max.min(64 * 1024));
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit).read_to_end(&mut buf)?;
    let whole = buf.len() <= max;
    buf.truncate(max);
    Ok((buf, whole))
}

/// Opens `path` for reading only if it is a regular file. Opening never blocks: a FIFO put in
/// a file's place would otherwise hang the reader until something writes to it.
pub fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Whether `path` no longer exists (as opposed to being unreadable for now).
pub fn is_gone(path: &Path) -> bool {
    matches!(fs::symlink_metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cortex_buffer_core::buffer::discovery::Layout;
    use std::os::unix::fs::{symlink, PermissionsExt};

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
        let scan = scan_root(&t.0).unwrap_or_else(|e| panic!("{e}"));
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
    fn symlinks_inside_are_followed_and_outside_are_reported() {
        let t = TempDir::new("links");
        let outside = TempDir::new("links-outside");
        outside.put("secret.jsonl", "{}\n");
        t.put("job/real.jsonl", "{}\n");
        symlink(t.0.join("job/real.jsonl"), t.0.join("job/alias.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(outside.0.join("secret.jsonl"), t.0.join("job/escape.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(t.0.join("job/missing"), t.0.join("job/dangling.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let scan = scan_root(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rel_paths(&scan, &t.0), vec!["job/alias.jsonl", "job/real.jsonl"]);
        let reasons: Vec<&str> = scan.problems.iter().map(|p| p.reason.as_str()).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons.iter().any(|r| r.starts_with("dangling")));
        assert!(reasons.iter().any(|r| r.contains("outside the sessions directory")));
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
        let scan = scan_root(&t.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(scan.files.is_empty());
        let reasons: Vec<&str> = scan.problems.iter().map(|p| p.reason.as_str()).collect();
        assert_eq!(reasons, vec!["not a regular file (FIFO); skipped"]);
        assert!(read_prefix(&fifo, 10).is_err(), "a FIFO must not be read (nor block)");
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
        let scan = scan_root(&t.0);
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
        assert_eq!(resolve_root(t.0.to_str().unwrap_or_default()).ok(), Some(t.0.clone()));
    }

    #[test]
    fn read_prefix_caps_and_reports_whole_files() {
        let t = TempDir::new("prefix");
        t.put("j/a.jsonl", "0123456789");
        let p = t.0.join("j/a.jsonl");
        assert_eq!(read_prefix(&p, 4).ok(), Some((b"0123".to_vec(), false)));
        assert_eq!(read_prefix(&p, 10).ok(), Some((b"0123456789".to_vec(), true)));
        assert_eq!(read_prefix(&p, 100).ok(), Some((b"0123456789".to_vec(), true)));
        assert!(!is_gone(&p));
        assert!(is_gone(&t.0.join("j/nope.jsonl")));
    }
}
