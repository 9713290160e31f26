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
}

impl PushedReport {
    /// Bytes the shipper reported that the server does not have: not pushed yet.
    pub fn unpushed(&self, indexed_offset: i64) -> i64 {
        self.reported_size.map_or(0, |r| (r - indexed_offset - self.held_bytes).max(0))
    }
}
