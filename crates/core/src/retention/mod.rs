//! Retention, pure: which session buffers a cleanup deletes and which it keeps, and why
//! (Spike #31 §Question 5). The shell reads the volume, the bound job table and the index, and
//! asks these rules; it never decides on its own.
//!
//! The policy: a job's buffer is kept for `post_terminal` after the job reaches a terminal
//! state (`keep_failed_for` instead, when longer, for failed and dead-lettered jobs: those are
//! the ones people debug); no file is kept longer than `max_file_age`, except a file a live
//! job's recovery plan reads; a directory named like a job id with no row in the job table is an
//! orphan, deleted once its newest file is older than `post_terminal` (a younger one may belong
//! to a job whose row is not committed yet).

#[cfg(test)]
mod tests;

/// Microseconds, as everywhere in the core.
pub type Micros = i64;

/// What a job's status means for its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobClass {
    /// A job that will run (again), whose next pod asks for a recovery plan: RUNNING,
    /// WAITING_FOR_APPROVAL or RETRYING; SCHEDULED (the next attempt, not started yet); PENDING
    /// with an attempt behind it (re-queued); FAILED or TIMED_OUT with a retry left.
    Live,
    /// Done for good since `ended_us` (`completed_at`, else `updated_at`).
    Terminal { failed: bool, ended_us: Micros },
    /// Anything else: a PENDING job that never ran, a status the contract does not name, a
    /// terminal job that cannot be dated.
    Other,
}

/// Classifies a job from its row. `attempt` is the row's attempt counter (counted up as a pod
/// starts: a PENDING job with one behind it was re-queued, and its next pod recovers from what
/// the last one wrote). `retries` is `retry_decision`'s answer, asked only for FAILED and
/// TIMED_OUT jobs: a failure with a retry left is not terminal either. `ended_us` is
/// `completed_at`, else `updated_at` (`None`: neither; such a job is never taken as terminal).
pub fn job_class(status: &str, attempt: i32, ended_us: Option<Micros>, retries: bool) -> JobClass {
    let terminal = |failed| ended_us.map_or(JobClass::Other, |ended_us| JobClass::Terminal { failed, ended_us });
    match status {
        "RUNNING" | "WAITING_FOR_APPROVAL" | "RETRYING" | "SCHEDULED" => JobClass::Live,
        "PENDING" if attempt > 0 => JobClass::Live,
        "COMPLETED" | "CANCELLED" => terminal(false),
        "DEAD_LETTER" => terminal(true),
        "FAILED" | "TIMED_OUT" if !retries => terminal(true),
        "FAILED" | "TIMED_OUT" => JobClass::Live,
        _ => JobClass::Other,
    }
}

/// Whether the job's status needs `retry_decision` before it can be classified.
pub fn needs_retry_decision(status: &str) -> bool {
    matches!(status, "FAILED" | "TIMED_OUT")
}

/// The retention settings of one run, as microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub now_us: Micros,
    pub post_terminal_us: Micros,
    pub max_file_age_us: Micros,
    pub keep_failed_for_us: Micros,
}

impl Policy {
    /// How long a terminal job's buffer is kept.
    pub fn terminal_window(&self, failed: bool) -> Micros {
        if failed {
            self.post_terminal_us.max(self.keep_failed_for_us)
        } else {
            self.post_terminal_us
        }
    }

    /// Whether something that happened at `at_us` is more than `window` ago.
    fn older_than(&self, at_us: Micros, window: Micros) -> bool {
        self.now_us.saturating_sub(at_us) > window
    }

    /// Whether a file last modified at `mtime_us` is past `max_file_age`.
    pub fn file_expired(&self, mtime_us: Micros) -> bool {
        self.older_than(mtime_us, self.max_file_age_us)
    }
}

/// What a top-level entry of `sessions_dir` is to the cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirKind {
    /// Named like a job id, and the job table has that job.
    Job(JobClass),
    /// Named like a job id, absent from the job table.
    Orphan,
    /// Any other name (Claude Code project folders and the like): only `max_file_age` applies.
    NotJob,
}

/// The verdict on a directory as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirVerdict {
    /// Delete the directory and everything in it.
    Delete(String),
    /// Look at its files one by one; `live` protects the files its recovery plan reads.
    Files { live: bool, note: Option<String> },
}

/// Decides a directory from its kind and its newest file's mtime (`None`: no file in it).
pub fn dir_verdict(policy: &Policy, kind: DirKind, newest_us: Option<Micros>) -> DirVerdict {
    match kind {
        DirKind::Orphan => {
            let window = policy.post_terminal_us;
            match newest_us {
                Some(at) if !policy.older_than(at, window) => DirVerdict::Files {
                    live: false,
                    note: Some(format!(
                        "orphan kept: its newest file is younger than post_terminal ({}), so its job's row may not be committed yet",
                        human(window)
                    )),
                },
                Some(_) => DirVerdict::Delete(format!(
                    "orphan: no row in the job table, and its newest file is older than post_terminal ({})",
                    human(window)
                )),
                None => DirVerdict::Delete("orphan: no row in the job table, and no file in it".into()),
            }
        }
        DirKind::Job(JobClass::Terminal { failed, ended_us }) => {
            let window = policy.terminal_window(failed);
            if policy.older_than(ended_us, window) {
                let setting = if failed && policy.keep_failed_for_us > policy.post_terminal_us {
                    "cortex_buffer.keep_failed_for"
                } else {
                    "post_terminal"
                };
                DirVerdict::Delete(format!("terminal for longer than {setting} ({})", human(window)))
            } else {
                DirVerdict::Files { live: false, note: None }
            }
        }
        DirKind::Job(JobClass::Live) => DirVerdict::Files { live: true, note: None },
        DirKind::Job(JobClass::Other) | DirKind::NotJob => DirVerdict::Files { live: false, note: None },
    }
}

/// The verdict on one file of a directory that is not deleted whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileVerdict {
    /// Young enough: nothing to say.
    Untouched,
    Delete(String),
    /// Past `max_file_age` but held, for the reason given.
    Keep(String),
}

/// Decides a file from its mtime; `in_plan` says a live job's current recovery plan reads it.
pub fn file_verdict(policy: &Policy, mtime_us: Micros, in_plan: bool) -> FileVerdict {
    if !policy.file_expired(mtime_us) {
        return FileVerdict::Untouched;
    }
    if in_plan {
        return FileVerdict::Keep(format!(
            "older than max_file_age ({}), but the live job's recovery plan reads it",
            human(policy.max_file_age_us)
        ));
    }
    FileVerdict::Delete(format!("older than max_file_age ({})", human(policy.max_file_age_us)))
}

/// Index rows of a file whose file is gone (or that was pushed from another node and has no
/// file here): deleted once the retention period has passed. `failed` stretches it to
/// `keep_failed_for`.
pub fn gone_rows_expired(policy: &Policy, gone_us: Micros, gone_retention_us: Micros, failed: bool) -> bool {
    let window = if failed { gone_retention_us.max(policy.keep_failed_for_us) } else { gone_retention_us };
    policy.older_than(gone_us, window)
}

/// Below this many job-id directories the share of orphans says nothing about the table.
pub const MIN_JOB_DIRS_FOR_RATIO: u64 = 4;

/// What the wrong-table check weighs: the job ids of the buffers (directories and indexed
/// files), counted by whether the bound table has a row of each (`known`) and whether the
/// extension's own per-job rows (checkpoints, usage, admissions, reservations...) vouch for it.
/// Only the control plane, or a pod with a token it issued for an existing job, writes those
/// rows, whereas anyone who can push, or create a directory on the volume, can name a buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobIds {
    pub vouched_known: u64,
    pub vouched_unknown: u64,
    pub other_known: u64,
    pub other_unknown: u64,
}

impl JobIds {
    /// Counts one buffer's job id.
    pub fn count(&mut self, vouched: bool, known: bool) {
        let n = match (vouched, known) {
            (true, true) => &mut self.vouched_known,
            (true, false) => &mut self.vouched_unknown,
            (false, true) => &mut self.other_known,
            (false, false) => &mut self.other_unknown,
        };
        *n = n.saturating_add(1);
    }

    /// The ids judged and how many of them the table lacks: the vouched ones when there are
    /// any, else all of them.
    pub fn judged(&self) -> (u64, u64) {
        let vouched = self.vouched_known.saturating_add(self.vouched_unknown);
        if vouched > 0 {
            (vouched, self.vouched_unknown)
        } else {
            (self.other_known.saturating_add(self.other_unknown), self.other_unknown)
        }
    }
}

/// Whether the bound job table looks like the wrong one, so that every buffer would look
/// orphaned. Judged by the ids the extension's per-job rows vouch for: more than
/// `max_unknown_ratio` of them have no row in it. Ids nothing vouches for (a pusher's or a
/// directory's made-up ones) weigh only when nothing is vouched for, and then only when the table
/// knows none of the buffers at all: no one who can merely name a buffer can trip the check
/// while a job the table knows has one. A `max_unknown_ratio` of 1 disables it.
pub fn looks_like_wrong_table(ids: &JobIds, max_unknown_ratio: f64) -> bool {
    let (total, unknown) = ids.judged();
    if total < MIN_JOB_DIRS_FOR_RATIO || max_unknown_ratio >= 1.0 {
        return false;
    }
    if ids.vouched_known.saturating_add(ids.vouched_unknown) == 0 {
        return ids.other_known == 0;
    }
    // Counts stay far below 2^52: exact as f64.
    (unknown as f64) > max_unknown_ratio * (total as f64)
}

/// A job-table-wide age bucket for `storage_report()`, by last modification.
pub fn age_bucket(policy: &Policy, mtime_us: Micros) -> &'static str {
    const HOUR: Micros = 3_600_000_000;
    let age = policy.now_us.saturating_sub(mtime_us);
    if age < HOUR {
        "< 1 hour"
    } else if age < 24 * HOUR {
        "1-24 hours"
    } else if age < 7 * 24 * HOUR {
        "1-7 days"
    } else if age < 30 * 24 * HOUR {
        "7-30 days"
    } else {
        ">= 30 days"
    }
}

/// A duration for a reason text: `24 hours`, `7 days`, `36 hours`, `90 minutes`, `45 seconds`.
pub fn human(us: Micros) -> String {
    let s = us / 1_000_000;
    // Whole days from two on ("7 days"), else hours ("24 hours"), as people write them.
    let (n, unit) = if s >= 2 * 86_400 && s % 86_400 == 0 {
        (s / 86_400, "day")
    } else if s != 0 && s % 3_600 == 0 {
        (s / 3_600, "hour")
    } else if s != 0 && s % 60 == 0 {
        (s / 60, "minute")
    } else {
        (s, "second")
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// One step of a cleanup run, for progress reports and the test hook that stops a run there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Directories examined, nothing changed yet.
    Decided,
    /// Index rows deleted in the calling transaction, not committed.
    RowsDeleted,
    /// Committed; the files are about to be unlinked.
    Committed,
    /// Some files unlinked, not all.
    Unlinking,
}

impl Step {
    pub fn label(self) -> &'static str {
        match self {
            Step::Decided => "decided",
            Step::RowsDeleted => "rows_deleted",
            Step::Committed => "committed",
            Step::Unlinking => "unlinking",
        }
    }

    pub fn parse(s: &str) -> Option<Step> {
        [Step::Decided, Step::RowsDeleted, Step::Committed, Step::Unlinking].into_iter().find(|p| p.label() == s)
    }
}
