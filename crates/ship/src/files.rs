//! What the shipper decides for one file, pure: its identity, and the next push it needs from
//! what is on disk and what the server has.

use std::time::Duration;

/// How many first bytes a file's identity covers at most.
pub const IDENTITY_BYTES: usize = 4096;

// The server's head of a file (what a resumed file is checked against) lies within the bytes
// read for its identity, so one read serves both.
const _: () = assert!(cortex_buffer_core::push::HEAD_BYTES <= IDENTITY_BYTES);

/// A file's identity: `device:inode:fingerprint`, the fingerprint being the CRC-32 of its first
/// line (with its newline), or of its first 4096 bytes when the first line is longer. A file
/// replaced under its name has another inode; one truncated and rewritten with another first
/// line another fingerprint; both are new files to the server. `None` while the first line is
/// not complete (the identity would change as it grows), unless `settled` (the file has been
/// quiet for the settle period: what is there is all there is).
pub fn identity(device: u64, inode: u64, head: &[u8], settled: bool) -> Option<Identity> {
    let covered = match memchr::memchr(b'\n', head) {
        Some(nl) => head.get(..=nl)?,
        None if head.len() >= IDENTITY_BYTES => head.get(..IDENTITY_BYTES)?,
        None if settled && !head.is_empty() => head,
        None => return None,
    };
    let crc = crc32fast::hash(covered);
    Some(Identity { text: format!("{device}:{inode}:{crc:08x}"), covered: covered.len(), crc })
}

/// A file's identity, and what it covers: the shipper reads those bytes again before it sends
/// more, so that a file truncated and rewritten in place between two looks (the same inode,
/// possibly longer than before) is seen as the new file it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub text: String,
    /// How many first bytes the fingerprint covers.
    pub covered: usize,
    pub crc: u32,
}

impl Identity {
    /// Whether `head` (the file's first bytes, as read now) still starts with what the identity
    /// covers.
    pub fn still_covers(&self, head: &[u8]) -> bool {
        head.get(..self.covered).is_some_and(|h| crc32fast::hash(h) == self.crc)
    }
}

/// What the server has of a file, as far as the shipper knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remote {
    /// Bytes the server has (committed and held): the next push starts here.
    pub have: u64,
    /// Of those, committed (every line before it indexed).
    pub committed: u64,
}

/// The next push a file needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// `len` bytes from `start` (`len` may be 0 for a final push of a held tail).
    Push {
        start: u64,
        len: usize,
        last: bool,
    },
}

/// The next push of a file of `size` bytes, quiet for `quiet`, of which the server has
/// `remote`. New bytes go first, `chunk` at a time; a tail the server holds is sent as final
/// once the file has been quiet for `settle` (and only once: `final_sent`). A file shorter than
/// what the server has was truncated: it is sent again from its first byte (the server starts
/// a new file, after the old one).
pub fn next(size: u64, quiet: Duration, remote: Remote, settle: Duration, chunk: usize, final_sent: bool) -> Next {
    if size < remote.have {
        return Next::Push { start: 0, len: usize::try_from(size).unwrap_or(usize::MAX).min(chunk), last: false };
    }
    if size > remote.have {
        let len = usize::try_from(size - remote.have).unwrap_or(usize::MAX).min(chunk);
        // The file's last bytes, quiet for the settle period: they go as final (its
        // unterminated tail, if any, is then judged, as the tailer judges a settled file).
        let last = remote.have + len as u64 == size && quiet >= settle;
        return Next::Push { start: remote.have, len, last };
    }
    if remote.have > remote.committed && quiet >= settle && !final_sent {
        return Next::Push { start: remote.have, len: 0, last: true };
    }
    Next::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(5);

    #[test]
    fn identity_waits_for_the_first_line_and_then_never_changes() {
        assert_eq!(identity(1, 2, b"{\"a\":1", false), None);
        let id = identity(1, 2, b"{\"a\":1}\n", false);
        assert!(id.as_ref().is_some_and(|i| i.text.starts_with("1:2:") && i.covered == 8));
        assert_eq!(identity(1, 2, b"{\"a\":1}\n{\"b\":2}\n", false), id, "later lines do not change it");
        assert_ne!(identity(1, 3, b"{\"a\":1}\n", false), id, "another inode");
        assert_ne!(identity(1, 2, b"{\"a\":2}\n", false), id, "another first line");
        assert!(identity(1, 2, b"{\"a\":1", true).is_some(), "settled: what is there");
        assert!(identity(1, 2, &[b'x'; 5000], false).is_some(), "a first line longer than 4096 bytes");
        assert_eq!(identity(1, 2, b"", true), None);
    }

    #[test]
    fn a_file_rewritten_in_place_no_longer_matches_its_identity() {
        let Some(id) = identity(1, 2, b"{\"a\":1}\n{\"b\":2}\n", false) else { panic!("complete first line") };
        assert!(id.still_covers(b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"), "appended to");
        assert!(!id.still_covers(b"{\"a\":9}\n{\"b\":2}\n{\"c\":3}\n"), "rewritten, longer than before");
        assert!(!id.still_covers(b"{\"a\""), "truncated below its first line");
    }

    #[test]
    fn new_bytes_go_a_chunk_at_a_time_and_a_held_tail_goes_final_once_quiet() {
        let r = |have, committed| Remote { have, committed };
        assert_eq!(next(100, Duration::ZERO, r(0, 0), S, 64, false), Next::Push { start: 0, len: 64, last: false });
        assert_eq!(next(100, Duration::ZERO, r(64, 60), S, 64, false), Next::Push { start: 64, len: 36, last: false });
        assert_eq!(next(100, S, r(64, 60), S, 64, false), Next::Push { start: 64, len: 36, last: true });
        assert_eq!(next(100, Duration::ZERO, r(100, 90), S, 64, false), Next::Nothing, "a tail, not quiet yet");
        assert_eq!(next(100, S, r(100, 90), S, 64, false), Next::Push { start: 100, len: 0, last: true });
        assert_eq!(next(100, S, r(100, 90), S, 64, true), Next::Nothing, "sent final already");
        assert_eq!(next(100, S, r(100, 100), S, 64, false), Next::Nothing, "all committed");
        assert_eq!(next(30, S, r(100, 100), S, 64, false), Next::Push { start: 0, len: 30, last: false }, "truncated");
    }
}
