//! What a plan knows of each session file before it reads its events: the `session_file` row,
//! what the index dropped of its path, and what a pushed file's shipper last said.

use crate::indexer::dialect::Dialect;

/// What the plan knows of a session file before reading its events (from `session_file`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFile {
    pub file_id: i64,
    /// The file's identity as the index last saw it (device, inode).
    pub device: u64,
    pub inode: u64,
    /// Modification time (server clock) as the index last saw it.
    pub mtime_us: Option<i64>,
    /// Timestamp of the file's last event (pod clock).
    pub last_ts_us: Option<i64>,
    /// Corrupt lines that are crash artefacts: a line cut by a writer's crash, directly
    /// followed by a new writer. They count for `scanBuffer` parity, not for `trusted`.
    pub crash_cut_lines: i64,
    pub path: String,
    pub rel_path: String,
    pub dialect: Option<Dialect>,
    pub generation: i32,
    pub session_ordinal: Option<i64>,
    /// The last generation of this path the index dropped (the file replaced, truncated or
    /// rewritten), if any.
    pub replaced: Option<Replaced>,
    pub size_bytes: i64,
    pub indexed_offset: i64,
    pub total_lines: i64,
    pub valid_lines: i64,
    pub corrupt_lines: i64,
    pub corruption_ratio: f64,
    pub tail_state: String,
    pub tail_pending: bool,
    pub seq_gaps: i64,
    pub seq_resets: i64,
    pub foreign_job_lines: i64,
    pub trusted: bool,
    pub gone: bool,
    pub quarantined: bool,
    /// For a file pushed from another node: what its shipper last said (the server cannot look
    /// at the file itself).
    pub pushed: Option<PushedReport>,
}

/// A generation of a file the index dropped: when, which file it was, and how big.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replaced {
    pub at_us: i64,
    pub device: u64,
    pub inode: u64,
    pub size: i64,
}

/// What the server knows of a pushed file beyond its index: its shipper's last report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushedReport {
    pub source: String,
    /// The file's size as the shipper last reported it, and when (server clock).
    pub reported_size: Option<i64>,
    pub reported_at_us: Option<i64>,
    /// Bytes after the committed offset the server holds (an unterminated tail).
    pub held_bytes: i64,
    /// When its source last confirmed that every file it ships was pushed whole
    /// (`confirm_pushed`; server clock). `None`: never.
    pub confirmed_at_us: Option<i64>,
    /// Its source confirmed after the job's previous attempt was superseded
    /// ([`PushedReport::confirmed_after`]): what the server holds of it is all a superseded
    /// writer wrote.
    pub complete: bool,
}

impl PushedReport {
    /// Bytes the shipper reported that the server does not have: not pushed yet.
    pub fn unpushed(&self, indexed_offset: i64) -> i64 {
        self.reported_size.map_or(0, |r| (r - indexed_offset - self.held_bytes).max(0))
    }

    /// Whether the server is known to hold all of the file a superseded attempt wrote: its
    /// source confirmed after `superseded_us` (see [`superseded_at`]). The server cannot look
    /// at another node's disk, and a dead node reports nothing, so the absence of a report
    /// proves nothing; a confirmation before the supersession does not cover what the pod
    /// wrote after it (a pod writes between heartbeats, too).
    pub fn confirmed_after(&self, superseded_us: Option<i64>) -> bool {
        confirmation_covers(self.confirmed_at_us, superseded_us)
    }
}

/// Whether a source's confirmation at `confirmed_us` covers what a writer superseded at
/// `superseded_us` wrote: it came at or after the supersession (neither missing).
pub fn confirmation_covers(confirmed_us: Option<i64>, superseded_us: Option<i64>) -> bool {
    matches!((confirmed_us, superseded_us), (Some(c), Some(s)) if c >= s)
}

/// When the job's previous attempt was superseded, as far as the job row and the crash records
/// say: a live attempt (RUNNING, WAITING_FOR_APPROVAL) started after it (`started_at`; without
/// one, `updated_at`, which is later still: heartbeats bump it); any other status was set after
/// the attempt ended (`updated_at`, which the control plane bumps on every update); a crash
/// record (`record_crash`, the reaper) is written once it ended. The latest of those that
/// apply. `None`: nothing dates it, and no confirmation can be shown to come after it.
pub fn superseded_at(
    status: &str,
    started_us: Option<i64>,
    updated_us: Option<i64>,
    last_crash_us: Option<i64>,
) -> Option<i64> {
    let row = match status {
        "RUNNING" | "WAITING_FOR_APPROVAL" => started_us.or(updated_us),
        _ => updated_us,
    };
    row.max(last_crash_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_file_is_confirmed_only_by_a_confirmation_after_the_supersession() {
        let r = |c| PushedReport { source: "node-b".into(), confirmed_at_us: c, ..PushedReport::default() };
        assert!(r(Some(10)).confirmed_after(Some(10)));
        assert!(r(Some(11)).confirmed_after(Some(10)));
        // Before it: the pod may have written more after the confirmation.
        assert!(!r(Some(9)).confirmed_after(Some(10)));
        // Never confirmed (a dead node reports nothing), or nothing dates the supersession.
        assert!(!r(None).confirmed_after(Some(10)));
        assert!(!r(Some(11)).confirmed_after(None));
    }

    #[test]
    fn the_supersession_is_dated_by_the_row_and_the_crash_records() {
        // A live attempt started after its predecessor ended; a crash record may be later still.
        assert_eq!(superseded_at("RUNNING", Some(50), Some(90), None), Some(50));
        assert_eq!(superseded_at("WAITING_FOR_APPROVAL", Some(50), Some(90), Some(70)), Some(70));
        // Any other status was set once the attempt ended.
        assert_eq!(superseded_at("FAILED", Some(50), Some(90), Some(60)), Some(90));
        assert_eq!(superseded_at("SCHEDULED", None, Some(90), Some(95)), Some(95));
        // No started_at: the last update (a heartbeat, say) is later than the start.
        assert_eq!(superseded_at("RUNNING", None, Some(90), Some(40)), Some(90));
        assert_eq!(superseded_at("RUNNING", None, None, None), None);
        assert_eq!(superseded_at("RETRYING", Some(1), None, None), None);
    }
}
