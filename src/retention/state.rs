//! The state of one cleanup run, shared by its two halves (`cleanup`: the volume, directory by
//! directory; `index_only`: the rows with no file here and the per-job rows): the arguments, the
//! result rows, the rows and files to delete, and what a live job's recovery plans read.

use std::collections::HashSet;
use std::ffi::OsString;

use pgrx::Uuid;

use super::index_rows::Held;
use super::jobs::{Job, Jobs};
use super::unlink::Op;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::retention::{dir_verdict, DirKind, DirVerdict, Policy};
use cortex_buffer_watch::remove::Survey;
use cortex_buffer_watch::volume::{Kind, Volume};

/// The caller's arguments, checked.
#[derive(Debug, Clone, Copy)]
pub struct Args {
    pub post_terminal_us: i64,
    pub max_file_age_us: i64,
    pub dry_run: bool,
    pub max_dirs: usize,
    pub max_unknown_ratio: f64,
}

/// One row of the result.
#[derive(Debug, Clone)]
pub struct Action {
    pub action: &'static str,
    pub path: String,
    pub job_id: Option<Uuid>,
    pub job_status: Option<String>,
    pub bytes: i64,
    pub files: i32,
    pub rows_deleted: i64,
    pub reason: String,
}

impl Action {
    pub(super) fn new(action: &'static str, path: String, job: Option<(Uuid, Option<&Job>)>, reason: String) -> Action {
        Action {
            action,
            path,
            job_id: job.map(|(id, _)| id),
            job_status: job.and_then(|(_, j)| j.map(|j| j.status.clone())),
            bytes: 0,
            files: 0,
            rows_deleted: 0,
            reason,
        }
    }
}

/// The run's state: the result rows, the files whose index rows go (and the row each counts
/// towards), and the file-system work for after the commit.
pub(super) struct Run<'a> {
    pub(super) args: Args,
    pub(super) policy: Policy,
    pub(super) jobs: &'a Jobs,
    pub(super) actions: Vec<Action>,
    pub(super) rows_of: Vec<(usize, i64)>,
    pub(super) taken: HashSet<i64>,
    pub(super) ops: Vec<Op>,
    pub(super) doomed_dirs: Vec<DoomedDir>,
    /// Jobs whose per-job rows go.
    pub(super) purge: Vec<Uuid>,
    pub(super) job_rows_retention_us: i64,
    /// The partitioned layout: a partition whose files all go is dropped whole (`partitions`).
    pub(super) partitioned: bool,
}

impl Run<'_> {
    pub(super) fn push(&mut self, a: Action) -> usize {
        self.actions.push(a);
        self.actions.len() - 1
    }

    /// The index rows of `held` go with action `at`.
    pub(super) fn take_rows(&mut self, at: usize, held: &[Held]) {
        for h in held {
            if self.taken.insert(h.file_id) {
                self.rows_of.push((at, h.file_id));
            }
        }
    }
}

impl Run<'_> {
    /// Records the deletion of `d` as `survey` (the one its removal goes by) saw it: its result
    /// row, and its removal after the commit. Returns the row's index.
    pub(super) fn push_deleted_dir(&mut self, d: &DoomedDir, survey: &Survey) -> usize {
        let job = d.job.as_ref().map(|(id, j)| (*id, j.as_ref()));
        let mut a = Action::new("delete_dir", d.shown.clone(), job, d.reason.clone());
        a.bytes = i64::try_from(survey.bytes).unwrap_or(i64::MAX);
        a.files = count_files(survey);
        self.ops.push(Op::RemoveDir { name: d.name.clone(), seen: survey.found.clone() });
        self.push(a)
    }
}

/// A directory whose verdict is `Delete`, waiting for its rows to be locked (in batches).
pub(super) struct DoomedDir {
    pub(super) name: OsString,
    pub(super) shown: String,
    pub(super) job: Option<(Uuid, Option<Job>)>,
    pub(super) kind: DirKind,
    pub(super) reason: String,
    pub(super) survey: Survey,
}

impl DoomedDir {
    /// An orphan looked at again once its rows are locked: the survey to remove it by, or
    /// `None` if it must be kept (a file written meanwhile makes it young; an entry come since
    /// the first look is covered by none of the locks, which were taken for that look's files).
    pub(super) fn looked_at_again(&self, policy: &Policy, volume: &Volume) -> std::io::Result<Option<Survey>> {
        let again = cortex_buffer_watch::remove::survey(volume, &self.name)?;
        let still =
            matches!(dir_verdict(policy, self.kind, again.newest_us.or(again.newest_dir_us)), DirVerdict::Delete(_));
        Ok((still && !self.survey.gained_entries(&again)).then_some(again))
    }
}

/// The session files a live job's recovery may read: every session of its plans with and without
/// matching the checkpoint (`recovery_plan`'s default is to match; the control plane may pass
/// either). `None`: keep every file of the job, because a plan that is stale, that fell back to
/// the checkpoint alone or that names no session says nothing about how far back the next one
/// will read.
pub(super) fn plan_paths(job: Uuid) -> Result<Option<HashSet<String>>, CbError> {
    use serde_json::Value;
    let mut out = HashSet::new();
    for matching in [true, false] {
        let plan = crate::recovery::plan::job_plan(job, None, matching)?;
        let v: Value =
            serde_json::from_str(&plan.text).map_err(|e| CbError::internal(format!("reading a recovery plan: {e}")))?;
        let stale = v.get("fresh").and_then(|f| f.get("stale")).and_then(Value::as_bool).unwrap_or(true);
        let buffer = v.get("mode").and_then(Value::as_str) == Some("buffer");
        let sessions: Vec<String> = v
            .get("sessions")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(|f| f.get("path").and_then(Value::as_str).map(str::to_owned)).collect())
            .unwrap_or_default();
        if stale || !buffer || sessions.is_empty() {
            return Ok(None);
        }
        out.extend(sessions);
    }
    Ok(Some(out))
}

/// How many regular files a survey found: a result row's `files`.
pub(super) fn count_files(s: &Survey) -> i32 {
    i32::try_from(s.found.iter().filter(|f| f.entry.kind == Kind::File).count()).unwrap_or(i32::MAX)
}

/// Why something is kept that changed between the decision and its lock.
pub(super) const CHANGED: &str = "it changed while it was examined; a later run looks again";

/// Why a live job keeps a file its plans do not name: they could not say.
pub(super) const PLAN_SAYS_NOTHING: &str =
    "the live job's recovery plan is stale, fell back to its checkpoint or names no session: all its files are kept";
