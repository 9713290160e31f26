//! The rows a cleanup deletes without a file of this server to look at: the index rows of
//! files gone from the volume (after `cortex_buffer.gone_retention`) and of files pushed from
//! other nodes (by the directories' rules), and the extension's own per-job rows of jobs gone
//! or terminal past `cortex_buffer.job_rows_retention`.

use std::collections::{HashMap, HashSet};

use pgrx::Uuid;

use super::index_rows::{self, Held, Remote};
use super::job_rows;
use super::jobs::Job;
use super::state::{plan_paths, Action, Run, CHANGED};
use crate::pg::guc;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::retention::{
    dir_verdict, file_verdict, gone_rows_expired, human, DirKind, DirVerdict, FileVerdict, JobClass,
};

/// How many rows of gone and pushed files one call looks at per `max_dirs`.
const ROWS_PER_DIR: usize = 100;

/// Index rows with no file here to look at: files gone from the volume (after
/// `gone_retention`), and files pushed from other nodes (by the same rules as directories).
pub(super) fn remote_rows(run: &mut Run<'_>) -> Result<(), CbError> {
    let (gone_retention_us, _, _) = guc::retention_us();
    let p = run.policy;
    let pushed_window = p.post_terminal_us.min(p.max_file_age_us);
    // Bounded like the directories: a call looks at most max_dirs × ROWS_PER_DIR such rows (the
    // oldest files first), and says when it stopped.
    let limit = i64::try_from(run.args.max_dirs.saturating_mul(ROWS_PER_DIR)).unwrap_or(i64::MAX);
    let gone_before = p.now_us.saturating_sub(gone_retention_us);
    let pushed_before = p.now_us.saturating_sub(pushed_window);
    let candidates = candidates(run, gone_before, pushed_before, limit)?;
    let mut plans: HashMap<[u8; 16], Option<HashSet<String>>> = HashMap::new();
    // Whether a live job's recovery may read `path`: a plan that cannot say keeps everything.
    let mut read_by_plan = |id: Uuid, path: &str| -> bool {
        plans
            .entry(*id.as_bytes())
            .or_insert_with(|| plan_paths(id).ok().flatten())
            .as_ref()
            .is_none_or(|paths| paths.contains(path))
    };
    let mut doomed = Vec::new();
    for c in candidates {
        let job = c.job_id.map(|id| (id, run.jobs.get(id.as_bytes())));
        let class = job.and_then(|(_, j)| j.map(|j| j.class));
        let failed = matches!(class, Some(JobClass::Terminal { failed: true, .. }));
        let live = matches!(class, Some(JobClass::Live));
        let reason = if let Some(gone_us) = c.gone_us {
            // A gone file indexed to its end is still read by recovery: a live job keeps the
            // rows its plan reads.
            if live && gone_rows_expired(&p, gone_us, gone_retention_us, failed) {
                if let Some(id) = c.job_id.filter(|id| read_by_plan(*id, &c.path)) {
                    let why = "the file is gone, but the live job's recovery plan reads its index rows";
                    run.push(Action::new("keep", c.path.clone(), Some((id, job.and_then(|(_, j)| j))), why.into()));
                    continue;
                }
            }
            gone_rows_expired(&p, gone_us, gone_retention_us, failed).then(|| {
                if failed && p.keep_failed_for_us > gone_retention_us {
                    format!(
                        "the file is gone, for longer than cortex_buffer.keep_failed_for ({})",
                        human(p.keep_failed_for_us)
                    )
                } else {
                    format!(
                        "the file is gone, for longer than cortex_buffer.gone_retention ({})",
                        human(gone_retention_us)
                    )
                }
            })
        } else {
            let kind = match (c.job_id, class) {
                (Some(_), Some(k)) => DirKind::Job(k),
                (Some(_), None) => DirKind::Orphan,
                (None, _) => DirKind::NotJob,
            };
            match dir_verdict(&p, kind, Some(c.mtime_us)) {
                DirVerdict::Delete(r) => Some(format!("pushed file; {r}")),
                DirVerdict::Files { live, .. } => {
                    let in_plan = match (live, c.job_id) {
                        (true, Some(id)) => read_by_plan(id, &c.path),
                        _ => false,
                    };
                    match file_verdict(&p, c.mtime_us, in_plan) {
                        FileVerdict::Delete(r) => Some(format!("pushed file; {r}")),
                        FileVerdict::Keep(r) => {
                            let mut a = Action::new("keep", c.path.clone(), job, format!("pushed file; {r}"));
                            a.bytes = c.size;
                            run.push(a);
                            None
                        }
                        FileVerdict::Untouched => None,
                    }
                }
            }
        };
        if let Some(reason) = reason {
            doomed.push((c, job, reason));
        }
    }
    delete_doomed(run, doomed)
}

/// The index rows of gone and pushed files to look at, oldest first, at most `limit` (with a
/// NOTICE when more are left); rows this run already takes (those of directories it deletes,
/// still there in a dry run, gone already where a batch went at once) do not count.
fn candidates(run: &Run<'_>, gone_before: i64, pushed_before: i64, limit: i64) -> Result<Vec<Remote>, CbError> {
    let mut candidates = Vec::new();
    let mut after = i64::MIN;
    loop {
        let page = index_rows::remote_candidates(gone_before, pushed_before, after, limit)?;
        let full = i64::try_from(page.len()).unwrap_or(i64::MAX) >= limit;
        after = page.last().map_or(after, |c| c.file_id);
        candidates.extend(page.into_iter().filter(|c| !run.taken.contains(&c.file_id)));
        if !full || i64::try_from(candidates.len()).unwrap_or(i64::MAX) >= limit {
            break;
        }
    }
    candidates.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    if i64::try_from(candidates.len()).unwrap_or(i64::MAX) >= limit {
        crate::pg::raise::notice(
            format!("cleanup_session_buffers looked at {limit} index rows of gone and pushed files (max_dirs × {ROWS_PER_DIR}); more are left"),
            Some("Call it again (cron does) to go on, or pass a larger max_dirs."),
        );
    }
    Ok(candidates)
}

/// A row to delete: the file, its job (and what the job table says of it), and why.
type Doomed<'j> = (Remote, Option<(Uuid, Option<&'j Job>)>, String);

/// Deletes the rows of the doomed files, each locked and looked at again: one being indexed, or
/// that changed since it was decided, is kept for a later run.
fn delete_doomed(run: &mut Run<'_>, doomed: Vec<Doomed<'_>>) -> Result<(), CbError> {
    let paths: Vec<String> = doomed.iter().map(|(c, _, _)| c.path.clone()).collect();
    // Rows whose file is not on this volume (gone, or pushed): no indexer records their paths.
    let (held, busy) = index_rows::lock_paths(&paths, "", run.args.dry_run)?;
    let busy: HashSet<String> = busy.into_iter().collect();
    let held: HashMap<String, Held> = held.into_iter().map(|h| (h.path.clone(), h)).collect();
    for (c, job, reason) in doomed {
        if busy.contains(&c.path) {
            run.push(Action::new("keep", c.path, job, "being indexed right now; a later run deletes its rows".into()));
            continue;
        }
        let Some(h) = held.get(&c.path) else { continue };
        // Looked at again under the lock: a pushed file that received bytes, or a gone file
        // that came back, is decided again by a later run.
        if h.mtime_us != c.mtime_us || h.gone != c.gone_us.is_some() {
            run.push(Action::new("keep", c.path, job, CHANGED.into()));
            continue;
        }
        let mut a = Action::new("delete_file", c.path.clone(), job, reason);
        a.bytes = if c.gone_us.is_some() { 0 } else { c.size };
        let at = run.push(a);
        run.take_rows(at, std::slice::from_ref(h));
    }
    Ok(())
}

/// The per-job rows of jobs terminal past `job_rows_retention`, or gone from the job table
/// and quiet for as long (their newest row older than that): decided here, deleted by
/// [`per_job_apply`] with the index rows.
pub(super) fn per_job_rows(run: &mut Run<'_>, ids: &[Uuid]) -> Result<(), CbError> {
    let now = run.policy.now_us;
    let retention_us = run.job_rows_retention_us;
    let absent: Vec<Uuid> = ids.iter().copied().filter(|id| !run.jobs.contains_key(id.as_bytes())).collect();
    let quiet: HashSet<[u8; 16]> =
        job_rows::quiet_since(&absent, now.saturating_sub(retention_us))?.iter().map(|u| *u.as_bytes()).collect();
    run.purge = ids
        .iter()
        .copied()
        .filter(|id| match run.jobs.get(id.as_bytes()) {
            None => quiet.contains(id.as_bytes()),
            Some(j) => {
                matches!(j.class, JobClass::Terminal { ended_us, .. } if now.saturating_sub(ended_us) > retention_us)
            }
        })
        .collect();
    Ok(())
}

pub(super) fn per_job_apply(run: &mut Run<'_>) -> Result<(), CbError> {
    let purge = std::mem::take(&mut run.purge);
    for (table, rows) in job_rows::remove(&purge, run.args.dry_run)? {
        let mut a = Action::new(
            "delete_rows",
            format!("cortex_buffer.{table}"),
            None,
            format!(
                "rows of jobs gone from the job table, or terminal for longer than cortex_buffer.job_rows_retention ({})",
                human(run.job_rows_retention_us)
            ),
        );
        a.rows_deleted = rows;
        run.push(a);
    }
    Ok(())
}
