//! The one safe way into the sessions volume: every directory listed, file statted and file
//! opened is resolved from a handle on `sessions_dir`, with `openat2(RESOLVE_BENEATH)`, so no
//! path — however it is spelled (`..`), and whatever an agent swaps into it (a symbolic link to
//! `server.key`, `pg_hba.conf` or another job's transcript) between a scan and an open — can
//! lead outside the volume, or out of the first-level directory it names. Every file lives in a
//! job's (or project's) directory, and the index and the per-job authority both take the job
//! from that first component; so a path is resolved beneath its own first-level directory, which
//! is itself never a link: a link in job J's volume to job K's file would otherwise pass K's
//! lines off as J's. Symbolic links that stay inside their directory are followed; links that
//! leave it, absolute links and `..` escapes fail with `EXDEV` (reported as "leaves the sessions
//! directory"). Where the kernel has no `openat2` (before Linux 5.6, or a seccomp filter that
//! refuses it) each component is opened with `O_NOFOLLOW` instead, which refuses every link.
//!
//! A file opened here is checked once more on its descriptor: [`open_file`](Volume::open_file)
//! refuses anything but a regular file, and callers compare the descriptor's device and inode
//! with the ones the scan recorded, so a file replaced since the scan is not read in its place.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: not tried yet; 1: openat2 works; 2: use the O_NOFOLLOW walk.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// The sessions directory, held open.
#[derive(Debug)]
pub struct Volume {
    root: OwnedFd,
    path: PathBuf,
}

/// Whether `e` means the path would have left the volume (or met a link the fallback refuses).
pub fn leaves_volume(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ELOOP))
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
fn openat2_beneath(dir: &OwnedFd, rel: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    openat2_resolve(dir, rel, flags, libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS)
}

/// `openat2(dir, rel, flags, resolve)`, retried when a rename raced the lookup.
fn openat2_resolve(dir: &OwnedFd, rel: &CString, flags: libc::c_int, resolve: u64) -> io::Result<OwnedFd> {
    // SAFETY: `open_how` is a plain struct of integers; zeroed is its documented initial state.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::try_from(flags).unwrap_or(0);
    how.resolve = resolve;
    loop {
        // SAFETY: valid fd, NUL-terminated path and an open_how of the size passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                rel.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if r >= 0 {
            return Ok(owned(libc::c_int::try_from(r).unwrap_or(-1)));
        }
        let e = io::Error::last_os_error();
        // openat2 asks the caller to retry when a rename raced the lookup.
        if e.raw_os_error() != Some(libc::EAGAIN) && e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The fallback: each component opened with `O_NOFOLLOW` from its parent's handle; `..`
/// refused outright.
fn open_nofollow(dir: &OwnedFd, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(Ok(p)),
            Component::CurDir => None,
            _ => Some(Err(io::Error::from_raw_os_error(libc::EXDEV))),
        })
        .collect::<io::Result<_>>()?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    };
    let mut current: Option<OwnedFd> = None;
    for part in dirs {
        let name = CString::new(part.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let parent = current.as_ref().unwrap_or(dir);
        // SAFETY: valid fd and NUL-terminated name.
        let fd = check(unsafe {
            libc::openat(
                parent.as_raw_fd(),
                name.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        current = Some(owned(fd));
    }
    let name = CString::new(last.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let parent = current.as_ref().unwrap_or(dir);
    // SAFETY: valid fd and NUL-terminated name.
    let fd = check(unsafe { libc::openat(parent.as_raw_fd(), name.as_ptr(), flags | libc::O_NOFOLLOW) })?;
    Ok(owned(fd))
}

impl Volume {
    /// Opens the sessions directory itself (its own path is configuration, trusted as given).
    pub fn open(root: &Path) -> io::Result<Volume> {
        let c = cstr(root)?;
        // SAFETY: NUL-terminated path.
        let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) })?;
        Ok(Volume { root: owned(fd), path: root.to_path_buf() })
    }

    /// The directory's path as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `abs` relative to the volume, lexically (no file-system access): `None` when it does not
    /// start with the volume's path. The result may still contain `..`, which opening refuses.
    pub fn relative<'a>(&self, abs: &'a Path) -> Option<&'a Path> {
        abs.strip_prefix(&self.path).ok().filter(|r| !r.as_os_str().is_empty())
    }

    /// Opens `rel` (relative to the volume) with `flags`, never leaving the volume.
    fn resolve(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        if rel.is_absolute() {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let flags = flags | libc::O_CLOEXEC;
        if OPENAT2.load(Ordering::Relaxed) != 2 {
            match self.resolve_in_first_dir(rel, flags) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                    OPENAT2.store(2, Ordering::Relaxed);
                }
                other => {
                    OPENAT2.store(1, Ordering::Relaxed);
                    return other;
                }
            }
        }
        open_nofollow(&self.root, rel, flags)
    }

    /// `rel` resolved beneath its first-level directory (see the module's comment), which is
    /// opened without following any link; the volume itself for an empty path.
    fn resolve_in_first_dir(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        let mut parts = rel.components().filter(|c| !matches!(c, Component::CurDir));
        let first = match parts.next() {
            None => return openat2_beneath(&self.root, &cstr(Path::new("."))?, flags),
            Some(Component::Normal(first)) => first,
            Some(_) => return Err(io::Error::from_raw_os_error(libc::EXDEV)),
        };
        let rest: PathBuf = parts.collect();
        let no_links = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
        let first = cstr(Path::new(first))?;
        if rest.as_os_str().is_empty() {
            return openat2_resolve(&self.root, &first, flags, no_links);
        }
        let dir = openat2_resolve(&self.root, &first, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC, no_links)?;
        openat2_beneath(&dir, &cstr(&rest)?, flags)
    }

    /// Opens a regular file for reading, never leaving the volume. It looks before it opens: the
    /// path is resolved to an `O_PATH` handle (which runs no driver and reads nothing), and only a
    /// regular file is then opened for reading, through that same handle; a device node, FIFO or
    /// socket an agent put there is refused without ever being opened.
    pub fn open_file(&self, rel: &Path) -> io::Result<File> {
        reopen_regular(self.resolve(rel, libc::O_PATH)?)
    }

    /// Opens a directory (the volume itself for an empty path) for listing.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        // A fresh open file description (not a dup of the root's), so listings never share a
        // directory offset.
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        self.resolve(rel, libc::O_RDONLY | libc::O_DIRECTORY)
    }

    /// What `rel` is, following links only while they stay inside.
    pub fn stat(&self, rel: &Path) -> io::Result<Metadata> {
        File::from(self.resolve(rel, libc::O_PATH)?).metadata()
    }

    /// Whether `rel` itself (not what it links to) is a symbolic link.
    pub fn is_symlink(&self, dir: &OwnedFd, name: &OsStr) -> bool {
        let Ok(name) = CString::new(name.as_bytes()) else { return false };
        // SAFETY: `stat` is plain data filled by the kernel; valid fd and name.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                && (st.st_mode & libc::S_IFMT) == libc::S_IFLNK
        }
    }

    /// Whether the file `rel` no longer exists (as opposed to being unreadable for now): nothing
    /// is there, or something that is not a regular file (a directory, a FIFO, a link took its
    /// name), which no pass indexes.
    pub fn is_gone(&self, rel: &Path) -> bool {
        let judge = |found: io::Result<Metadata>| match found {
            Ok(m) => !m.file_type().is_file(),
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        match self.resolve(rel, libc::O_PATH | libc::O_NOFOLLOW) {
            // A link (followed by discovery when it stays in its job directory): what it leads
            // to decides; one that cannot be followed for now is not gone.
            Ok(fd) => match File::from(fd).metadata() {
                Ok(m) if m.file_type().is_symlink() => judge(self.stat(rel)),
                found => judge(found),
            },
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }

    /// The names in a directory opened with [`open_dir`](Self::open_dir) (or
    /// [`open_subdir`](Self::open_subdir)), without `.` and `..`, always from the start.
    /// Read straight from the kernel (`getdents64`), with no `DIR` stream to allocate: a walk
    /// of a fleet's volume lists one directory per job.
    pub fn list(&self, dir: &OwnedFd) -> io::Result<Vec<OsString>> {
        // Whoever read the descriptor before, the listing starts at the beginning.
        // SAFETY: lseek on a descriptor we hold.
        if unsafe { libc::lseek(dir.as_raw_fd(), 0, libc::SEEK_SET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = DirentBuf([0u8; DIRENT_BUF]);
        let mut names = Vec::new();
        loop {
            // SAFETY: a valid directory descriptor and a buffer of the length passed, aligned
            // for the `linux_dirent64` records the kernel writes into it.
            let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.as_raw_fd(), buf.0.as_mut_ptr(), buf.0.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let filled = usize::try_from(n).unwrap_or(0);
            if filled == 0 {
                return Ok(names);
            }
            for name in dirent_names(buf.0.get(..filled).unwrap_or_default()) {
                if name != b"." && name != b".." {
                    names.push(OsString::from_vec(name.to_vec()));
                }
            }
        }
    }

    /// What the entry `name` of `dir` (a directory opened beneath the volume) is, without
    /// following it if it is a link: one `fstatat`. A name without a `/`, looked up in a
    /// directory that is itself beneath the volume, cannot lead anywhere else; only a link
    /// needs resolving, by [`stat`](Self::stat).
    pub fn stat_at(&self, dir: &OwnedFd, name: &OsStr) -> io::Result<Entry> {
        let c = single_name(name)?;
        // SAFETY: `stat` is plain data filled by the kernel; valid fd and NUL-terminated name.
        let st = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            check(libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW))?;
            st
        };
        Ok(Entry::of_stat(&st))
    }

    /// Opens the subdirectory `name` of `dir` (a directory opened beneath the volume) for
    /// listing; a link in its place is refused (`O_NOFOLLOW`), so this opens exactly a
    /// directory [`stat_at`](Self::stat_at) found not to be a link. Links are opened by
    /// [`open_dir`](Self::open_dir), which resolves them beneath their first-level directory.
    pub fn open_subdir(&self, dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
        let c = single_name(name)?;
        // SAFETY: valid fd and NUL-terminated name.
        let fd = check(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        Ok(owned(fd))
    }

    /// What the open descriptor `fd` is (`fstat`).
    pub fn stat_fd(&self, fd: &OwnedFd) -> io::Result<Entry> {
        // SAFETY: `stat` is plain data filled by the kernel; a descriptor we hold.
        let st = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            check(libc::fstat(fd.as_raw_fd(), &mut st))?;
            st
        };
        Ok(Entry::of_stat(&st))
    }

    /// [`open_subdir`](Self::open_subdir) for a directory whose entries are already known: a
    /// handle (`O_PATH`) to look entries up beneath, not to list. Cheaper to open, and to
    /// close (no read access is checked, and no close is reported to watchers).
    pub fn open_subdir_path(&self, dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
        let c = single_name(name)?;
        // SAFETY: valid fd and NUL-terminated name.
        let fd = check(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        Ok(owned(fd))
    }

    /// The volume's own directory, for [`stat_at`](Self::stat_at) and
    /// [`open_subdir`](Self::open_subdir) of its first-level entries.
    pub fn root(&self) -> &OwnedFd {
        &self.root
    }
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    BlockDevice,
    CharDevice,
    Other,
}

impl Kind {
    fn of_mode(mode: libc::mode_t) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFBLK => Kind::BlockDevice,
            libc::S_IFCHR => Kind::CharDevice,
            _ => Kind::Other,
        }
    }

    /// A word for a log line.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "regular file",
            Kind::Dir => "directory",
            Kind::Symlink => "symbolic link",
            Kind::Fifo => "FIFO",
            Kind::Socket => "socket",
            Kind::BlockDevice => "block device",
            Kind::CharDevice => "character device",
            Kind::Other => "special file",
        }
    }
}

/// A directory entry's kind and identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub stat: cortex_buffer_core::indexer::discovery::FileStat,
    /// The inode's change time, nanoseconds since the epoch: unlike the modification time, no
    /// one can set it back (`touch -r`, `tar x`, `rsync -a` can the other).
    pub ctime_ns: i64,
}

impl Entry {
    fn of_stat(st: &libc::stat) -> Entry {
        let mtime_us = st.st_mtime.saturating_mul(1_000_000).saturating_add(st.st_mtime_nsec / 1_000);
        Entry {
            ctime_ns: st.st_ctime.saturating_mul(1_000_000_000).saturating_add(st.st_ctime_nsec),
            kind: Kind::of_mode(st.st_mode),
            stat: cortex_buffer_core::indexer::discovery::FileStat {
                size: u64::try_from(st.st_size).unwrap_or(0),
                mtime_us,
                device: st.st_dev,
                inode: st.st_ino,
            },
        }
    }

    /// The entry a link leads to, as [`Volume::stat`] found it.
    pub fn of_metadata(meta: &Metadata) -> Entry {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let kind = if t.is_file() {
            Kind::File
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else if t.is_char_device() {
            Kind::CharDevice
        } else {
            Kind::Other
        };
        use std::os::unix::fs::MetadataExt;
        let ctime_ns = meta.ctime().saturating_mul(1_000_000_000).saturating_add(meta.ctime_nsec());
        Entry { kind, stat: cortex_buffer_core::indexer::discovery::FileStat::of(meta), ctime_ns }
    }
}

/// Room for a few hundred directory entries per `getdents64` call.
const DIRENT_BUF: usize = 16 * 1024;

/// The buffer `getdents64` fills, aligned for its records.
#[repr(C, align(8))]
struct DirentBuf([u8; DIRENT_BUF]);

/// The names in a buffer of `linux_dirent64` records (`d_ino` u64, `d_off` i64, `d_reclen` u16,
/// `d_type` u8, then the NUL-terminated name, padded to `d_reclen`). A malformed record ends
/// the parse rather than being read past.
fn dirent_names(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    const NAME_AT: usize = 19;
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let record = buf.get(at..)?;
        let reclen = usize::from(u16::from_ne_bytes([*record.get(16)?, *record.get(17)?]));
        let body = record.get(NAME_AT..reclen)?;
        at = at.checked_add(reclen)?;
        let end = memchr::memchr(0, body).unwrap_or(body.len());
        body.get(..end)
    })
}

/// A single path component as a C string: no `/`, no NUL, not empty, not `.` or `..`.
fn single_name(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The error for anything but a regular file where a session file is expected.
pub fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

/// Opens the regular file an `O_PATH` handle names for reading, through the handle itself
/// (`/proc/self/fd/N` reopens exactly that inode, whatever now sits at its path). Anything but a
/// regular file is refused before it is opened.
pub fn reopen_regular(handle: OwnedFd) -> io::Result<File> {
    // SAFETY: `stat` is plain data filled by the kernel; `fstat` works on an O_PATH descriptor.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        check(libc::fstat(handle.as_raw_fd(), &mut st))?;
        st
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(not_regular());
    }
    let proc_path = CString::new(format!("/proc/self/fd/{}", handle.as_raw_fd())).map_err(|_| not_regular())?;
    // SAFETY: NUL-terminated path; the descriptor it names stays open until after the call.
    let fd =
        unsafe { libc::open(proc_path.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC) };
    let file = File::from(owned(check(fd)?));
    // Without /proc the open fails above; with it, this is the same inode by construction,
    // checked anyway.
    let again = file.metadata()?;
    if !again.is_file() || (again.dev(), again.ino()) != (st.st_dev, st.st_ino) {
        return Err(not_regular());
    }
    Ok(file)
}

/// Opens a path outside any volume (a superuser's file elsewhere) the same careful way: `O_PATH`
/// first, a regular file only, then reopened through the handle.
pub fn open_regular_path(path: &Path) -> io::Result<File> {
    let c = cstr(path)?;
    // SAFETY: NUL-terminated path.
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    reopen_regular(owned(fd))
}

/// A session file read from its current position, stepping over holes: a sparse file's
/// unwritten ranges read as zeros and hold no newline, so an over-long line's scan moves past
/// them with `lseek(SEEK_DATA)` instead of reading them (a 15 TiB sparse file costs what its
/// data costs). Every `read` also calls `check` first (the shell's interrupt check, for reads on
/// its own thread; a no-op elsewhere), so a long read stays cancellable.
pub struct SessionRead<'f, C: FnMut()> {
    file: &'f File,
    check: C,
}

impl<'f, C: FnMut()> SessionRead<'f, C> {
    pub fn new(file: &'f File, check: C) -> SessionRead<'f, C> {
        SessionRead { file, check }
    }
}

impl<C: FnMut()> io::Read for SessionRead<'_, C> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        (self.check)();
        let mut f = self.file;
        // A read is bounded by the caller's buffer (the line reader's, at most the line cap).
        io::Read::read(&mut f, out)
    }
}

impl<C: FnMut()> cortex_buffer_core::indexer::lines::HoleSkip for SessionRead<'_, C> {
    fn skip_hole(&mut self) -> io::Result<u64> {
        let fd = self.file.as_raw_fd();
        // SAFETY: lseek on a descriptor we hold; SEEK_CUR with 0 only reads the position.
        let here = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
        if here < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above. ENXIO: no data after `here` (a hole to the end of the file).
        let data = unsafe { libc::lseek(fd, here, libc::SEEK_DATA) };
        if data < 0 {
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => {
                    // SAFETY: as above: to the end of the file.
                    let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
                    Ok(u64::try_from(end.saturating_sub(here)).unwrap_or(0))
                }
                // A file system without SEEK_DATA: no hole is known; read on.
                Some(libc::EINVAL) => Ok(0),
                _ => Err(io::Error::last_os_error()),
            };
        }
        Ok(u64::try_from(data.saturating_sub(here)).unwrap_or(0))
    }
}

/// Whether the opened `file` is the one with this device and inode.
pub fn is_same_file(file: &File, device: u64, inode: u64) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok(m.dev() == device && m.ino() == inode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p = std::env::temp_dir().join(format!("cb-volume-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(p.join("root/job")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::create_dir_all(p.join("outside")).unwrap_or_else(|e| panic!("{e}"));
            let p = std::fs::canonicalize(&p).unwrap_or(p);
            std::fs::write(p.join("root/job/in.jsonl"), "inside\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p.join("outside/secret"), "SECRET\n").unwrap_or_else(|e| panic!("{e}"));
            Tmp(p)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn read(v: &Volume, rel: &str) -> io::Result<String> {
        let mut s = String::new();
        v.open_file(Path::new(rel))?.read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn special_files_are_refused_before_they_are_opened() {
        let t = Tmp::new("special");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        // A FIFO: opening it for reading would block until a writer came.
        let fifo = CString::new(t.0.join("root/job/fifo.jsonl").into_os_string().into_vec()).unwrap_or_default();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let e = v.open_file(Path::new("job/fifo.jsonl")).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("not a regular file"));
        // A character device (the controlling tty, whose driver's open answers ENXIO to a
        // process without one): refused as a non-regular file, not by its driver.
        let dev = CString::new(t.0.join("root/job/tty.jsonl").into_os_string().into_vec()).unwrap_or_default();
        // SAFETY: NUL-terminated path; makedev(5, 0) is /dev/tty's number.
        if unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(5, 0)) } == 0 {
            let e = v.open_file(Path::new("job/tty.jsonl")).err().map(|e| e.to_string());
            assert_eq!(e.as_deref(), Some("not a regular file"));
            let e = open_regular_path(&t.0.join("root/job/tty.jsonl")).err().map(|e| e.to_string());
            assert_eq!(e.as_deref(), Some("not a regular file"));
        } else {
            eprintln!("mknod is not allowed here (not root, or the file system refuses): the device case is skipped");
        }
        // A regular file still opens and reads.
        let mut text = String::new();
        v.open_file(Path::new("job/in.jsonl"))
            .and_then(|mut f| f.read_to_string(&mut text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "inside\n");
    }

    #[test]
    fn files_inside_open_and_every_way_out_is_refused() {
        let t = Tmp::new("escape");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&v, "job/in.jsonl").ok().as_deref(), Some("inside\n"));
        symlink("in.jsonl", t.0.join("root/job/alias.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read(&v, "job/alias.jsonl").ok().as_deref(),
            Some("inside\n"),
            "a link that stays inside is followed"
        );
        symlink(t.0.join("outside/secret"), t.0.join("root/job/abs.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink("../../outside/secret", t.0.join("root/job/rel.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(t.0.join("outside"), t.0.join("root/linked-dir")).unwrap_or_else(|e| panic!("{e}"));
        for rel in [
            "job/abs.jsonl",
            "job/rel.jsonl",
            "../outside/secret",
            "job/../../outside/secret",
            "linked-dir/secret",
            "/etc/hostname",
        ] {
            let e = read(&v, rel).err().unwrap_or_else(|| panic!("{rel} was read"));
            assert!(leaves_volume(&e), "{rel}: {e}");
        }
        assert_eq!(read(&v, "job/missing.jsonl").err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
        assert!(v.stat(Path::new("job/abs.jsonl")).is_err());
        assert!(v.stat(Path::new("job/alias.jsonl")).is_ok_and(|m| m.is_file()));
    }

    #[test]
    fn the_fallback_refuses_every_link() {
        let t = Tmp::new("fallback");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        symlink("in.jsonl", t.0.join("root/job/alias.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let open = |rel: &str| open_nofollow(&v.root, Path::new(rel), libc::O_RDONLY | libc::O_CLOEXEC);
        assert!(open("job/in.jsonl").is_ok());
        for rel in ["job/alias.jsonl", "../outside/secret", "job/../../outside/secret"] {
            assert!(open(rel).err().is_some_and(|e| leaves_volume(&e)), "{rel}");
        }
    }

    #[test]
    fn fifos_and_directories_are_not_files() {
        let t = Tmp::new("fifo");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        let fifo = cstr(&t.0.join("root/job/pipe.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(v.open_file(Path::new("job/pipe.jsonl")).is_err(), "a FIFO is refused without blocking");
        assert!(v.open_file(Path::new("job")).is_err());
    }

    #[test]
    fn directory_records_are_parsed_and_a_malformed_one_ends_the_parse() {
        let record = |name: &[u8], reclen: u16| {
            let mut r = vec![0u8; 19];
            r[16..18].copy_from_slice(&reclen.to_ne_bytes());
            r.extend_from_slice(name);
            r.resize(usize::from(reclen).max(r.len()), 0);
            r
        };
        let mut buf = record(b"a.jsonl\0", 32);
        buf.extend(record(b"job\0", 24));
        let names: Vec<&[u8]> = dirent_names(&buf).collect();
        assert_eq!(names, vec![&b"a.jsonl"[..], &b"job"[..]]);
        // A record length of 0, one shorter than its header, or one past the end: no more
        // names, and nothing read past the buffer.
        for bad in [0u16, 10, 400] {
            let mut b = record(b"x\0", 24);
            let mut next = record(b"y\0", 24);
            next[16..18].copy_from_slice(&bad.to_ne_bytes());
            b.extend(next);
            assert_eq!(dirent_names(&b).count(), 1, "reclen {bad}");
        }
        assert_eq!(dirent_names(&buf[..7]).count(), 0);
    }

    #[test]
    fn entries_are_looked_at_without_following_links_and_subdirectories_open_only_when_not_links() {
        let t = Tmp::new("entries");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        symlink("in.jsonl", t.0.join("root/job/alias.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        symlink(t.0.join("outside"), t.0.join("root/job/out")).unwrap_or_else(|e| panic!("{e}"));
        let job = v.open_subdir(v.root(), OsStr::new("job")).unwrap_or_else(|e| panic!("{e}"));
        let kind = |name: &str| v.stat_at(&job, OsStr::new(name)).map(|e| e.kind).ok();
        assert_eq!(kind("in.jsonl"), Some(Kind::File));
        assert_eq!(kind("alias.jsonl"), Some(Kind::Symlink));
        assert_eq!(kind("out"), Some(Kind::Symlink));
        assert_eq!(kind("missing"), None);
        let size = v.stat_at(&job, OsStr::new("in.jsonl")).map(|e| e.stat.size).ok();
        assert_eq!(size, Some(7));
        assert!(v.open_subdir(&job, OsStr::new("out")).is_err(), "a link is never opened as a subdirectory");
        for name in ["", ".", "..", "a/b"] {
            assert!(v.stat_at(&job, OsStr::new(name)).is_err(), "{name:?}");
            assert!(v.open_subdir(&job, OsStr::new(name)).is_err(), "{name:?}");
        }
    }

    #[test]
    fn lists_and_relates_paths() {
        let t = Tmp::new("list");
        let v = Volume::open(&t.0.join("root")).unwrap_or_else(|e| panic!("{e}"));
        let root = v.open_dir(Path::new("")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.list(&root).unwrap_or_default(), vec![OsString::from("job")]);
        assert_eq!(v.list(&root).unwrap_or_default(), vec![OsString::from("job")], "a second listing starts over");
        let again = v.open_dir(Path::new("")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.list(&again).unwrap_or_default(), vec![OsString::from("job")]);
        let job = v.open_dir(Path::new("job")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.list(&job).unwrap_or_default(), vec![OsString::from("in.jsonl")]);
        assert_eq!(v.relative(&t.0.join("root/job/in.jsonl")), Some(Path::new("job/in.jsonl")));
        assert_eq!(v.relative(&t.0.join("rootless/x")), None);
        assert_eq!(v.relative(&t.0.join("root")), None);
        assert!(!v.is_gone(Path::new("job/in.jsonl")));
        assert!(v.is_gone(Path::new("job/nope.jsonl")));
        // A directory that took a file's name: the file is gone (no pass indexes a directory).
        std::fs::create_dir(t.0.join("root/job/was-a-file.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert!(v.is_gone(Path::new("job/was-a-file.jsonl")));
        let f = v.open_file(Path::new("job/in.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(t.0.join("root/job/in.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert!(is_same_file(&f, m.dev(), m.ino()).unwrap_or(false));
        assert!(!is_same_file(&f, m.dev(), m.ino() + 1).unwrap_or(true));
    }
}
