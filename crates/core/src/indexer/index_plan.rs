//! Whether a session file needs indexing, and how: append after the committed offset, or
//! re-index from byte 0 as a new generation (docs/design.md §Line and file rules). Pure.

use super::dialect::Dialect;
use super::discovery::FileStat;

/// A file's identity includes a CRC-32 of its first bytes (up to this many).
pub const FINGERPRINT_BYTES: u64 = 4096;

/// What `session_file` records about a file's indexing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexState {
    /// Bytes consumed: every event and corrupt line before this offset is in the tables.
    pub offset: u64,
    /// Lines consumed (the next line's number is `lines + 1`).
    pub lines: u64,
    /// 0 until first indexed; incremented by every re-index.
    pub generation: i32,
    /// Device and inode when indexed.
    pub device: u64,
    pub inode: u64,
    /// How many leading bytes the fingerprint covers, and their CRC-32.
    pub fingerprint_len: u64,
    pub fingerprint: u32,
    /// The dialect whose rules judged the lines.
    pub dialect: Option<Dialect>,
    /// Modification time when last indexed (microseconds since the Unix epoch).
    pub mtime_us: i64,
    /// The last consumed line had no newline (it was judged after the settle period).
    pub tail_unterminated: bool,
    /// Bytes after `offset` wait for a newline or the settle period.
    pub tail_pending: bool,
    pub quarantined: bool,
}

/// Why a file is re-indexed from byte 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Replaced,
    Shrank,
    Rewritten,
    DialectIdentified,
    TailContinued,
}

impl Reason {
    pub fn describe(self) -> &'static str {
        match self {
            Reason::Replaced => "replaced by another file (device or inode changed)",
            Reason::Shrank => "shrank below its indexed offset",
            Reason::Rewritten => "its first bytes changed",
            Reason::DialectIdentified => "its dialect was identified after indexing began",
            Reason::TailContinued => "its unterminated last line was continued",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Nothing,
    /// Read from the committed offset on.
    Append,
    Reindex(Reason),
}

/// What is known about the file now.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub stat: FileStat,
    pub dialect: Option<Dialect>,
    /// CRC-32 of the file's first `fingerprint_len` bytes now (`None` if unread).
    pub fingerprint: Option<u32>,
}

/// Decides the work for a file that exists.
pub fn decide(ix: &IndexState, now: &Now) -> Work {
    let same_file = ix.device == now.stat.device && ix.inode == now.stat.inode;
    if ix.quarantined {
        return Work::Nothing;
    }
    if ix.generation == 0 {
        return Work::Append;
    }
    if !same_file {
        return Work::Reindex(Reason::Replaced);
    }
    if now.stat.size < ix.offset {
        return Work::Reindex(Reason::Shrank);
    }
    if now.fingerprint.is_some_and(|f| f != ix.fingerprint) {
        return Work::Reindex(Reason::Rewritten);
    }
    if now.dialect != ix.dialect {
        return Work::Reindex(Reason::DialectIdentified);
    }
    if now.stat.size > ix.offset {
        return if ix.tail_unterminated { Work::Reindex(Reason::TailContinued) } else { Work::Append };
    }
    Work::Nothing
}

/// Whether a file is worth opening at all: an idle pass over unchanged files opens none. A
/// file whose only new bytes are an unterminated line is looked at again once it has been
/// quiet for the settle period.
pub fn worth_a_look(ix: &IndexState, stat: &FileStat, dialect: Option<Dialect>, now_us: i64, settle_us: i64) -> bool {
    // Replacing a quarantined file clears the quarantine (discovery sees the new identity).
    if ix.quarantined {
        return false;
    }
    if ix.generation == 0 || ix.device != stat.device || ix.inode != stat.inode {
        return true;
    }
    if ix.tail_pending && stat.mtime_us == ix.mtime_us && dialect == ix.dialect {
        return now_us.saturating_sub(stat.mtime_us) >= settle_us;
    }
    stat.size != ix.offset || stat.mtime_us != ix.mtime_us || dialect != ix.dialect
}

/// How many leading bytes a fingerprint of a file of `size` covers.
pub fn fingerprint_len(size: u64) -> u64 {
    size.min(FINGERPRINT_BYTES)
}

/// Whether a failure to index a file, by its SQLSTATE, is held against the file (counted, and
/// quarantining it after `quarantine_after`). Failures of the server rather than the file are
/// not: insufficient resources (class 53: the disk full, out of memory), a serialization failure
/// or deadlock (class 40), a lock not available (55P03). Such a file is retried as a failed one
/// is, without a count, so freeing the disk lets every file go on by itself.
pub fn counts_against_file(sqlstate: &str) -> bool {
    !(sqlstate.starts_with("53") || sqlstate.starts_with("40") || sqlstate == "55P03")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size: u64, inode: u64) -> FileStat {
        FileStat { size, mtime_us: 0, device: 1, inode }
    }

    fn indexed(offset: u64) -> IndexState {
        IndexState {
            offset,
            lines: 3,
            generation: 1,
            device: 1,
            inode: 7,
            fingerprint_len: 100,
            fingerprint: 42,
            dialect: Some(Dialect::CortexSpike),
            ..IndexState::default()
        }
    }

    fn now(size: u64, inode: u64, fp: Option<u32>, d: Option<Dialect>) -> Now {
        Now { stat: stat(size, inode), dialect: d, fingerprint: fp }
    }

    const SPIKE: Option<Dialect> = Some(Dialect::CortexSpike);

    #[test]
    fn only_the_files_own_failures_count_against_it() {
        for server in ["53100", "53200", "53300", "40001", "40P01", "55P03"] {
            assert!(!counts_against_file(server), "{server}");
        }
        for file in ["22021", "54000", "58030", "XX000", "22P02", "23505"] {
            assert!(counts_against_file(file), "{file}");
        }
    }

    #[test]
    fn growth_appends_and_nothing_changed_is_nothing() {
        assert_eq!(decide(&IndexState::default(), &now(0, 7, None, None)), Work::Append);
        assert_eq!(decide(&indexed(100), &now(150, 7, Some(42), SPIKE)), Work::Append);
        assert_eq!(decide(&indexed(100), &now(100, 7, Some(42), SPIKE)), Work::Nothing);
        assert_eq!(decide(&indexed(100), &now(150, 7, None, SPIKE)), Work::Append);
    }

    #[test]
    fn identity_size_fingerprint_dialect_and_continued_tails_reindex() {
        assert_eq!(decide(&indexed(100), &now(150, 8, Some(42), SPIKE)), Work::Reindex(Reason::Replaced));
        assert_eq!(decide(&indexed(100), &now(99, 7, Some(42), SPIKE)), Work::Reindex(Reason::Shrank));
        assert_eq!(decide(&indexed(100), &now(150, 7, Some(41), SPIKE)), Work::Reindex(Reason::Rewritten));
        assert_eq!(
            decide(&indexed(100), &now(150, 7, Some(42), Some(Dialect::WinkLog))),
            Work::Reindex(Reason::DialectIdentified)
        );
        let tail = IndexState { tail_unterminated: true, ..indexed(100) };
        assert_eq!(decide(&tail, &now(150, 7, Some(42), SPIKE)), Work::Reindex(Reason::TailContinued));
        assert_eq!(decide(&tail, &now(100, 7, Some(42), SPIKE)), Work::Nothing);
    }

    #[test]
    fn idle_files_are_not_opened_and_pending_tails_wait_to_settle() {
        let ix = IndexState { mtime_us: 1_000, ..indexed(100) };
        let unchanged = FileStat { size: 100, mtime_us: 1_000, device: 1, inode: 7 };
        assert!(!worth_a_look(&ix, &unchanged, SPIKE, 10_000_000, 5_000_000));
        assert!(worth_a_look(&ix, &FileStat { size: 120, mtime_us: 2_000, ..unchanged }, SPIKE, 10_000_000, 5_000_000));
        assert!(worth_a_look(&ix, &FileStat { mtime_us: 2_000, ..unchanged }, SPIKE, 10_000_000, 5_000_000));
        assert!(worth_a_look(&ix, &FileStat { inode: 8, ..unchanged }, SPIKE, 10_000_000, 5_000_000));
        assert!(worth_a_look(&ix, &unchanged, Some(Dialect::WinkLog), 10_000_000, 5_000_000));
        assert!(worth_a_look(&IndexState::default(), &unchanged, SPIKE, 0, 0));
        // 20 pending bytes: looked at again only once quiet for the settle period.
        let pending = IndexState { tail_pending: true, ..ix.clone() };
        let grown = FileStat { size: 120, ..unchanged };
        assert!(!worth_a_look(&pending, &grown, SPIKE, 1_000 + 4_999_999, 5_000_000));
        assert!(worth_a_look(&pending, &grown, SPIKE, 1_000 + 5_000_000, 5_000_000));
        let q = IndexState { quarantined: true, ..ix };
        assert!(!worth_a_look(&q, &grown, SPIKE, 0, 0));
        assert!(!worth_a_look(&IndexState { quarantined: true, ..IndexState::default() }, &grown, SPIKE, 0, 0));
    }

    #[test]
    fn quarantine_means_nothing_until_discovery_clears_it() {
        let q = IndexState { quarantined: true, ..indexed(100) };
        assert_eq!(decide(&q, &now(500, 7, Some(42), SPIKE)), Work::Nothing);
        assert_eq!(decide(&q, &now(500, 9, None, SPIKE)), Work::Nothing);
        let cleared = IndexState { quarantined: false, ..q };
        assert_eq!(decide(&cleared, &now(500, 9, None, SPIKE)), Work::Reindex(Reason::Replaced));
    }
}
