//! The discovery rule (docs/design.md §Discovery): which paths under `sessions_dir` are session
//! files. It is the only rule; everything else under the root is ignored.
//!
//! - `<root>/<dir>/<file>.jsonl` — a job's session file (cortex dialects) or a Claude Code
//!   project's transcript;
//! - `<root>/<project>/<session-uuid>/subagents/agent-*.jsonl` — a Claude Code sub-agent
//!   transcript.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// What identifies a file's current state on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    /// Modification time, microseconds since the Unix epoch.
    pub mtime_us: i64,
    pub device: u64,
    pub inode: u64,
}

impl FileStat {
    pub fn of(meta: &Metadata) -> FileStat {
        let mtime_us = meta.mtime().saturating_mul(1_000_000).saturating_add(meta.mtime_nsec() / 1_000);
        FileStat { size: meta.len(), mtime_us, device: meta.dev(), inode: meta.ino() }
    }

    /// Same file (device and inode) as `other`.
    pub fn same_identity(&self, other: &FileStat) -> bool {
        self.device == other.device && self.inode == other.inode
    }
}

/// A session file selected by the discovery rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Absolute path: the canonical root joined with the components below it.
    pub path: String,
    /// First component below the root: the job directory (or Claude Code project directory).
    pub job_dir: String,
    pub file_name: String,
    pub layout: Layout,
    pub stat: FileStat,
}

/// An entry the walk had to skip, with a reason fit for a log line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Problem {
    pub path: String,
    pub reason: String,
}

/// How a discovered file sits under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `<root>/<dir>/<file>.jsonl`
    DirectoryFile,
    /// `<root>/<project>/<session-uuid>/subagents/agent-*.jsonl`
    Subagent,
}

/// Directory names that can lead to a session file at `depth` (1 = directly under the root).
/// Used to prune the walk: only these subdirectories are listed.
pub fn descend_into(depth: usize, name: &str, parents: &[&str]) -> bool {
    match depth {
        1 => !name.is_empty(),
        2 => is_uuid(name),
        3 => name == "subagents" && parents.len() == 2 && is_uuid(parents[1]),
        _ => false,
    }
}

/// Classifies a file by its path components relative to the root (directories, then the file
/// name). `None` means the rule does not select it.
pub fn classify(components: &[&str]) -> Option<Layout> {
    match components {
        [dir, file] if !dir.is_empty() && is_jsonl_name(file) => Some(Layout::DirectoryFile),
        [_project, session, subagents, file]
            if *subagents == "subagents" && is_uuid(session) && file.starts_with("agent-") && is_jsonl_name(file) =>
        {
            Some(Layout::Subagent)
        }
        _ => None,
    }
}

fn is_jsonl_name(name: &str) -> bool {
    name.len() > ".jsonl".len() && name.ends_with(".jsonl")
}

/// A UUID in its canonical 8-4-4-4-12 hexadecimal text form (either case).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID: &str = "ef958aa1-0e93-49f0-bb71-150f63befcd1";

    #[test]
    fn files_one_level_down_are_session_files() {
        assert_eq!(classify(&["job", "session-001.jsonl"]), Some(Layout::DirectoryFile));
        assert_eq!(classify(&["-Users-x-proj", &format!("{SID}.jsonl")]), Some(Layout::DirectoryFile));
        assert_eq!(classify(&["job", "session_20260101T000000Z_pod-1.jsonl"]), Some(Layout::DirectoryFile));
    }

    #[test]
    fn other_names_and_depths_are_ignored() {
        assert_eq!(classify(&["job", "metadata.json"]), None);
        assert_eq!(classify(&["job", ".jsonl"]), None);
        assert_eq!(classify(&["job", "notes.jsonl.bak"]), None);
        assert_eq!(classify(&["top-level.jsonl"]), None);
        assert_eq!(classify(&["job", "screenshots", "a.jsonl"]), None);
        assert_eq!(classify(&["a", "b", "c", "d", "e.jsonl"]), None);
    }

    #[test]
    fn subagent_transcripts_need_the_exact_layout() {
        assert_eq!(classify(&["proj", SID, "subagents", "agent-a4ca7529859c158c2.jsonl"]), Some(Layout::Subagent));
        assert_eq!(classify(&["proj", SID, "subagents", "agent-a4ca.meta.json"]), None);
        assert_eq!(classify(&["proj", SID, "subagents", "other.jsonl"]), None);
        assert_eq!(classify(&["proj", "not-a-uuid", "subagents", "agent-1.jsonl"]), None);
        assert_eq!(classify(&["proj", SID, "screenshots", "agent-1.jsonl"]), None);
    }

    #[test]
    fn the_walk_only_descends_where_the_rule_can_match() {
        assert!(descend_into(1, "job", &[]));
        assert!(descend_into(2, SID, &["proj"]));
        assert!(!descend_into(2, "screenshots", &["job"]));
        assert!(descend_into(3, "subagents", &["proj", SID]));
        assert!(!descend_into(3, "other", &["proj", SID]));
        assert!(!descend_into(4, "x", &["proj", SID, "subagents"]));
    }

    #[test]
    fn uuid_recognition() {
        assert!(is_uuid(SID));
        assert!(is_uuid("EF958AA1-0E93-49F0-BB71-150F63BEFCD1"));
        assert!(!is_uuid("ef958aa10e9349f0bb71150f63befcd1"));
        assert!(!is_uuid("ef958aa1-0e93-49f0-bb71-150f63befcdz"));
    }
}
