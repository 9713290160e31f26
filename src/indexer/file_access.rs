//! Opening a file a caller names, under the indexer's rules: a path below
//! `cortex_buffer.sessions_dir` is opened beneath a handle on it (never leaving it, whatever
//! its symbolic links say); anything else is for superusers only, and a non-superuser learns
//! nothing about files elsewhere (the decision is lexical, before touching the file system).

use std::path::{Path, PathBuf};

use crate::pg::guc;
use crate::pg::privilege::caller_is_superuser;
use crate::pg::raise::raise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_watch::scan::resolve_root;
use cortex_buffer_watch::volume::{leaves_volume, open_regular_path, Volume};

/// A superuser's file elsewhere: looked at through an `O_PATH` handle first, and opened for
/// reading only if it is a regular file (a device's driver never runs).
fn open_anywhere(path: &Path) -> std::io::Result<std::fs::File> {
    open_regular_path(path)
}

/// Where a named path is read from.
pub enum Target {
    /// Under `sessions_dir`: opened beneath its handle, as the indexer opens files.
    Inside { volume: Volume, rel: PathBuf },
    /// Elsewhere (superusers only): opened by path.
    Anywhere(PathBuf),
}

impl Target {
    /// Decides how `path` may be read, before touching it: a non-superuser's path must lie
    /// lexically under `sessions_dir` (as configured or canonical). Raises 22023 for a relative
    /// path and 42501 for a non-superuser's path elsewhere.
    pub fn of(path: &str) -> Target {
        let p = Path::new(path);
        if !p.is_absolute() {
            raise(
                CbError::new(SqlState::InvalidParameterValue, format!("\"{path}\" is not an absolute path"))
                    .with_hint("Pass the session file's absolute path, as session_file.path holds it."),
            );
        }
        let configured = guc::sessions_dir();
        if let Ok(volume) = resolve_root(&configured) {
            let rel = Path::new(&configured)
                .is_absolute()
                .then(|| p.strip_prefix(&configured).ok())
                .flatten()
                .filter(|r| !r.as_os_str().is_empty())
                .or_else(|| volume.relative(p))
                .map(Path::to_path_buf);
            if let Some(rel) = rel {
                return Target::Inside { volume, rel };
            }
        }
        if caller_is_superuser() {
            return Target::Anywhere(p.to_path_buf());
        }
        raise(outside(path))
    }

    /// [`Target::of`] without raising: `None` for a path this caller may not read.
    pub fn try_of(path: &str) -> Option<Target> {
        let p = Path::new(path);
        if !p.is_absolute() {
            return None;
        }
        let configured = guc::sessions_dir();
        if let Ok(volume) = resolve_root(&configured) {
            let rel =
                volume.relative(p).or_else(|| p.strip_prefix(&configured).ok()).filter(|r| !r.as_os_str().is_empty());
            if let Some(rel) = rel.map(Path::to_path_buf) {
                return Some(Target::Inside { volume, rel });
            }
        }
        caller_is_superuser().then(|| Target::Anywhere(p.to_path_buf()))
    }

    /// The path relative to `sessions_dir`, when it is under it.
    pub fn rel(&self) -> Option<&Path> {
        match self {
            Target::Inside { rel, .. } => Some(rel.as_path()),
            Target::Anywhere(_) => None,
        }
    }

    /// The path as `session_file.path` would record it.
    pub fn recorded_as(&self, path: &str) -> String {
        match self {
            Target::Inside { volume, rel } => volume.path().join(rel).display().to_string(),
            Target::Anywhere(_) => path.to_owned(),
        }
    }

    /// Opens the file. A path under `sessions_dir` whose links lead out of it is refused to
    /// non-superusers (42501) and opened by path for superusers.
    pub fn open(&self, path: &str) -> std::io::Result<std::fs::File> {
        let opened = match self {
            Target::Inside { volume, rel } => volume.open_file(rel),
            Target::Anywhere(p) => return open_anywhere(p),
        };
        match opened {
            Err(e) if leaves_volume(&e) && !caller_is_superuser() => raise(outside(path)),
            Err(e) if leaves_volume(&e) => open_anywhere(Path::new(path)),
            other => other,
        }
    }
}

/// A path as `session_file.path` holds it: absolute as given, or relative to `sessions_dir`.
pub fn absolute(path: &str) -> Result<String, CbError> {
    if path.starts_with('/') {
        return Ok(path.to_owned());
    }
    if path.split('/').any(|c| c == ".." || c == ".") || path.is_empty() {
        return Err(CbError::new(
            SqlState::InvalidParameterValue,
            format!("\"{path}\" is not a path below sessions_dir"),
        )
        .with_hint(
            "Pass an absolute path, or one relative to cortex_buffer.sessions_dir without . or .. components.",
        ));
    }
    let root = cortex_buffer_watch::scan::resolve_root(&guc::sessions_dir())
        .map(|v| v.path().display().to_string())
        .unwrap_or_else(|_| guc::sessions_dir());
    Ok(format!("{}/{path}", root.trim_end_matches('/')))
}

pub fn outside(path: &str) -> CbError {
    CbError::new(SqlState::InsufficientPrivilege, format!("\"{path}\" is not under cortex_buffer.sessions_dir"))
        .with_hint("Only superusers may read files elsewhere; pass a path below cortex_buffer.sessions_dir.")
}
