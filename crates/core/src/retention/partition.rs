//! Whether a partition of `event` and `corrupt_line` (a span of file ids) may be dropped whole:
//! the opt-in partitioned layout's retention. A partition goes only when every file in it
//! qualifies under the same rules as a file deleted one by one: its file is gone (deleted by a
//! cleanup, by its agent, or never here because it was pushed and has since been retired), it
//! is past `max_file_age`, `keep_failed_for` does not hold its failed job, and no live job's
//! recovery plan reads it. A partition that new files may still land in is never dropped.

use super::{human, JobClass, Micros, Policy};

/// One session file of a partition's span, as the drop decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionFile {
    /// The file is gone (`session_file.gone_at` set).
    pub gone: bool,
    /// The file's last recorded modification.
    pub mtime_us: Micros,
    /// Its job's class (`None`: no job, or a job the table does not have).
    pub class: Option<JobClass>,
    /// A live job's recovery plan reads the file's rows (asked only for live jobs' files).
    pub read_by_plan: bool,
}

/// The decision on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionVerdict {
    Drop(String),
    /// Kept, and why (counts of the files that hold it, by cause).
    Keep(String),
}

/// Decides a partition of `files` (all its span's session files); `closed` says the span lies
/// wholly below the next file id to be handed out.
pub fn partition_verdict(policy: &Policy, closed: bool, files: &[PartitionFile]) -> PartitionVerdict {
    if !closed {
        return PartitionVerdict::Keep("new files may still be numbered into it".into());
    }
    let (mut on_disk, mut young, mut failed, mut planned) = (0usize, 0usize, 0usize, 0usize);
    for f in files {
        if !f.gone {
            on_disk += 1;
        } else if !policy.file_expired(f.mtime_us) {
            young += 1;
        } else if matches!(f.class, Some(JobClass::Terminal { failed: true, ended_us })
            if !policy.older_than(ended_us, policy.keep_failed_for_us))
        {
            failed += 1;
        } else if f.read_by_plan && matches!(f.class, Some(JobClass::Live)) {
            planned += 1;
        }
    }
    let causes: Vec<String> = [
        (on_disk, "still present (the directory rules delete the file first)".to_owned()),
        (young, format!("younger than max_file_age ({})", human(policy.max_file_age_us))),
        (
            failed,
            format!("of failed jobs held by cortex_buffer.keep_failed_for ({})", human(policy.keep_failed_for_us)),
        ),
        (planned, "read by a live job's recovery plan".to_owned()),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {} {why}", if n == 1 { "file" } else { "files" }))
    .collect();
    if causes.is_empty() {
        let n = files.len();
        PartitionVerdict::Drop(format!(
            "all {n} {} of this span of file ids are gone and older than max_file_age ({}): the partition is dropped whole",
            if n == 1 { "file" } else { "files" },
            human(policy.max_file_age_us)
        ))
    } else {
        PartitionVerdict::Keep(format!("kept: {}", causes.join("; ")))
    }
}
