//! One run of `cleanup_session_buffers`: the walk of `sessions_dir`, one directory at a time,
//! then the index rows that have no file here (gone, or pushed from other nodes), then the
//! extension's own per-job rows.
//!
//! **Order, and what a crash leaves.** Everything is decided from the caller's snapshot without
//! locking a job row. A directory or file to delete has its `session_file` rows locked as the
//! indexer locks them (a file being indexed is kept, never waited for; so is a file with no
//! row yet whose first indexing has not committed: the cleanup takes the new-path lock every
//! inserter takes, `index_rows::lock_new_paths`), is looked at again
//! under that lock, and its index rows are deleted in the calling transaction. (Directories to
//! delete go a batch at a time, as the walk finds them (a helper thread reads the file system
//! ahead of the decisions, so the walk overlaps the statements); where everything in a batch
//! goes, which is the usual case, its
//! rows are locked and deleted by one statement and the same checks follow under those locks,
//! in a subtransaction rolled back if anything must be kept after all: `at_once`.) The files
//! themselves are unlinked only once that transaction has committed (a commit callback), so:
//! - a rollback, or a crash before the commit, deletes nothing at all;
//! - a crash after the commit, before or during the unlinks, leaves files whose index rows are
//!   gone: they still qualify, and the next run deletes them. No run ever leaves index rows
//!   that a plan would trust for a file it deleted.
//!
//! Nothing follows a symbolic link (`cortex_buffer_watch::remove`), and only the caller's
//! transaction's fate decides what goes: a dry run locks as gently as the indexer allows and
//! changes nothing.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::Uuid;

use super::index_rows::{self, Held};
use super::jobs::{self, Job};
use super::state::{count_files, plan_paths, Action, Args, DoomedDir, Run, CHANGED, PLAN_SAYS_NOTHING};
use super::unlink::Op;
use super::{index_only, partitions, progress};
use crate::job::binding::Binding;
use crate::pg::guc;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::retention::{
    dir_verdict, file_verdict, DirKind, DirVerdict, FileVerdict, JobIds, Policy, Step,
};
use cortex_buffer_watch::remove::{self as fs_remove, Look, Survey};
use cortex_buffer_watch::scan::resolve_root;
use cortex_buffer_watch::volume::{Kind, Volume};

fn uuid_of(name: &str) -> Option<Uuid> {
    cortex_buffer_core::shared::parse_uuid(name).map(Uuid::from_bytes)
}

/// Runs a cleanup. Refuses (55000) inside a subtransaction, whose rollback would keep rows the
/// commit callback then deletes files of. A dry run runs in a subtransaction that is rolled
/// back: the live jobs' catch-up and the row locks leave nothing behind.
pub fn run(args: Args) -> Result<Vec<Action>, CbError> {
    if !args.dry_run {
        return decide_and_do(args);
    }
    crate::pg::xact::rolled_back(|| decide_and_do(args)).map_err(|f| match f {
        crate::pg::xact::TxnFailure::Refused(e) => e,
        other => CbError::internal(format!("cleanup_session_buffers (dry run): {other}")),
    })
}

fn decide_and_do(args: Args) -> Result<Vec<Action>, CbError> {
    // SAFETY: reads the current transaction's nesting level.
    if !args.dry_run && unsafe { pg_sys::GetCurrentTransactionNestLevel() } > 1 {
        return Err(CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            "cleanup_session_buffers cannot run inside a subtransaction",
        )
        .with_hint("Call it as a statement of its own (a savepoint or a PL/pgSQL EXCEPTION block is a subtransaction), or pass dry_run => true."));
    }
    let binding = jobs::readable_binding()?;
    if !args.dry_run {
        // The files are unlinked once the commit is durable: never for a commit a crash could
        // still undo (synchronous_commit off would leave rows of unlinked files).
        Spi::run("SET LOCAL synchronous_commit = on").map_err(|e| CbError::internal(format!("SPI: {e}")))?;
    }
    let (_, keep_failed_for_us, job_rows_retention_us) = guc::retention_us();
    let policy = Policy {
        now_us: cortex_buffer_core::shared::now_us(),
        post_terminal_us: args.post_terminal_us,
        max_file_age_us: args.max_file_age_us,
        keep_failed_for_us,
    };
    let volume = volume_of(args.dry_run);
    let mut names: Vec<OsString> = match &volume {
        Some(v) => v.list(v.root()).map_err(|e| CbError::io("list sessions directory", &guc::sessions_dir(), &e))?,
        None => Vec::new(),
    };
    names.sort();
    let (jobs, ids) = weigh_jobs(&binding, &names, args.max_unknown_ratio)?;

    let mut run = Run {
        args,
        policy,
        jobs: &jobs,
        actions: Vec::new(),
        rows_of: Vec::new(),
        taken: HashSet::new(),
        ops: Vec::new(),
        doomed_dirs: Vec::new(),
        purge: Vec::new(),
        job_rows_retention_us,
        partitioned: crate::partition::is_partitioned(),
    };
    let mut report = progress::Progress::new(names.len());
    if let Some(volume) = &volume {
        walk(&mut run, volume, &names, &mut report)?;
    }
    index_only::remote_rows(&mut run)?;
    index_only::per_job_rows(&mut run, &ids)?;
    progress::pause_at(Step::Decided);
    remove_index_rows(&mut run)?;
    index_only::per_job_apply(&mut run)?;
    if run.partitioned {
        // The partitions ahead of new files, made after the drops: a cleanup holding an
        // attach's lock while it waits to drop could deadlock with an indexer.
        crate::partition::ensure_ahead()?;
    }
    progress::pause_at(Step::RowsDeleted);
    report.finish();
    if !args.dry_run {
        if let Some(volume) = volume {
            super::unlink::after_commit(volume, std::mem::take(&mut run.ops));
        }
    }
    Ok(run.actions)
}

/// The sessions directory, opened; `None` (with a NOTICE) when it cannot be read, as on a
/// server that only receives pushed files. A real run first adopts the rows of a moved root.
fn volume_of(dry_run: bool) -> Option<Volume> {
    match resolve_root(&guc::sessions_dir()) {
        Ok(v) => {
            // Rows of a moved directory are its files', not index rows without a file.
            if !dry_run {
                crate::indexer::moved_root::adopt(&v, crate::indexer::moved_root::Scope::All, true);
            }
            Some(v)
        }
        Err(e) => {
            crate::pg::raise::notice(
                format!("sessions_dir cannot be read ({e}): only index rows are cleaned up"),
                Some("A server that only receives pushed files has no sessions directory; otherwise check cortex_buffer.sessions_dir."),
            );
            None
        }
    }
}

/// The jobs the buffers belong to (directories, the index and the per-job rows), looked up in
/// the job table, and their ids; refuses when the table seems to be the wrong one.
fn weigh_jobs(
    binding: &Binding,
    names: &[OsString],
    max_unknown_ratio: f64,
) -> Result<(jobs::Jobs, Vec<Uuid>), CbError> {
    // The wrong-table check weighs the jobs of the buffers (directories and the index) that the
    // extension's per-job rows vouch for: a buffer's name is anyone's to choose (a pusher's, or
    // whoever can create a directory), those rows only the control plane's and its pods'.
    let mut buffer_ids: Vec<Uuid> = names.iter().filter_map(|n| n.to_str().and_then(uuid_of)).collect();
    buffer_ids.extend(index_rows::indexed_job_ids()?);
    let mut per_job = index_rows::per_job_ids()?;
    let mut ids = buffer_ids.clone();
    ids.extend(per_job.iter().copied());
    for v in [&mut buffer_ids, &mut ids, &mut per_job] {
        v.sort_unstable_by_key(|u| *u.as_bytes());
        v.dedup_by_key(|u| *u.as_bytes());
    }
    let jobs = jobs::lookup(binding, &ids)?;
    let mut weighed = JobIds::default();
    for id in &buffer_ids {
        let vouched = per_job.binary_search_by_key(id.as_bytes(), |u| *u.as_bytes()).is_ok();
        weighed.count(vouched, jobs.contains_key(id.as_bytes()));
    }
    jobs::refuse_wrong_table(binding, &weighed, max_unknown_ratio)?;

    Ok((jobs, ids))
}

/// Decides and does every first-level entry of the volume, up to `max_dirs` acted on. The file
/// system is read on a helper thread, ahead of the decisions, and the doomed directories are
/// deleted a batch at a time as they come: the walk overlaps the statements instead of
/// preceding them all.
fn walk(
    run: &mut Run<'_>,
    volume: &Volume,
    names: &[OsString],
    report: &mut progress::Progress,
) -> Result<(), CbError> {
    std::thread::scope(|scope| -> Result<(), CbError> {
        let looks = fs_remove::look_ahead(scope, volume, names, LOOK_AHEAD);
        let mut acted = 0usize;
        for (name, look) in names.iter().zip(looks) {
            if acted >= run.args.max_dirs {
                crate::pg::raise::notice(
                    format!(
                        "cleanup_session_buffers stopped after acting on {acted} directories (max_dirs); {} were not examined",
                        names.len().saturating_sub(report.done())
                    ),
                    Some("Call it again (cron does) to go on, or pass a larger max_dirs."),
                );
                break;
            }
            if directory(run, volume, name, look)? {
                acted += 1;
            }
            report.examined(acted);
            if run.doomed_dirs.len() >= DIRS_PER_LOCK {
                delete_dirs(run, volume)?;
            }
        }
        delete_dirs(run, volume)
    })
}

/// The index rows of the files deleted, removed in the calling transaction, the same way in
/// both layouts; in the partitioned one, a partition all of whose files go is dropped whole
/// rather than deleted row by row (`partitions::drop_whole`).
fn remove_index_rows(run: &mut Run<'_>) -> Result<(), CbError> {
    let files: Vec<i64> = run.rows_of.iter().map(|(_, f)| *f).collect();
    let mut counts = if run.partitioned { partitions::drop_whole(run, &files)? } else { HashMap::new() };
    let rest: Vec<i64> = files.iter().copied().filter(|f| !counts.contains_key(f)).collect();
    counts.extend(index_rows::remove(&rest, run.args.dry_run)?);
    for (at, file) in &run.rows_of {
        if let Some(a) = run.actions.get_mut(*at) {
            a.rows_deleted += counts.get(file).copied().unwrap_or(0);
        }
    }
    Ok(())
}

/// Decides and does one first-level entry of the volume. True when something in it is deleted.
fn directory(run: &mut Run<'_>, volume: &Volume, name: &OsString, look: Look) -> Result<bool, CbError> {
    let shown = format!("{}/{}", volume.path().display(), name.to_string_lossy());
    let entry = match look.entry {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            run.push(Action::new("error", shown, None, format!("cannot look at it: {e}")));
            return Ok(false);
        }
    };
    match entry.kind {
        Kind::Dir => {}
        Kind::Symlink => {
            run.push(Action::new(
                "keep",
                shown,
                None,
                "a symbolic link: the cleanup never follows links, nor deletes them at the top level".into(),
            ));
            return Ok(false);
        }
        // A file at the top level is not a session file by the discovery rule: not ours.
        _ => return Ok(false),
    }
    let text = name.to_str();
    let id = text.and_then(uuid_of);
    let job = id.map(|id| (id, run.jobs.get(id.as_bytes())));
    let kind = match job {
        Some((_, Some(j))) => DirKind::Job(j.class),
        Some((_, None)) => DirKind::Orphan,
        None => DirKind::NotJob,
    };
    let survey = match look.survey.unwrap_or_else(|| fs_remove::survey(volume, name)) {
        Ok(s) => s,
        Err(e) => {
            run.push(Action::new("error", shown, job, format!("cannot list it: {e}")));
            return Ok(false);
        }
    };
    match dir_verdict(&run.policy, kind, survey.newest_us.or(survey.newest_dir_us)) {
        DirVerdict::Delete(reason) => {
            if let Some(why) = undeletable(volume, &survey) {
                run.push(Action::new("error", shown, job, why));
                return Ok(false);
            }
            let job = job.map(|(id, j)| (id, j.cloned()));
            run.doomed_dirs.push(DoomedDir { name: name.clone(), shown, job, kind, reason, survey });
            Ok(true)
        }
        DirVerdict::Files { live, note } => {
            if let Some(note) = note {
                let mut a = Action::new("keep", shown.clone(), job, note);
                a.bytes = i64::try_from(survey.bytes).unwrap_or(i64::MAX);
                a.files = count_files(&survey);
                run.push(a);
            }
            delete_files(run, volume, name, &survey, job, live)
        }
    }
}

/// Why a directory cannot be deleted by this process, if it cannot: found before anything is
/// decided, so that the deletions after the commit do not fail for it.
fn undeletable(volume: &Volume, survey: &Survey) -> Option<String> {
    if !fs_remove::writable(volume.root()) {
        return Some(
            "permission denied: the database's operating-system user may not delete entries of sessions_dir".into(),
        );
    }
    if let Some(d) = survey.foreign.first() {
        return Some(format!(
            "another file system is mounted at {}: the cleanup never deletes across file systems",
            volume.path().join(d).display()
        ));
    }
    survey.unwritable.first().map(|d| {
        format!(
            "permission denied: the database's operating-system user may not delete entries of {}",
            volume.path().join(d).display()
        )
    })
}

/// How many directories' rows one locking statement covers.
const DIRS_PER_LOCK: usize = 1_000;

/// How many first-level entries the helper thread may have looked at before the decisions
/// reach them: with the batch waiting for its statement, at most `DIRS_PER_LOCK + LOOK_AHEAD`
/// surveys are held at once.
const LOOK_AHEAD: usize = 1_000;

/// Locks the rows of the directories to delete, in batches, and deletes each whose rows were
/// all free (a file being indexed keeps its directory for a later run). An orphan is looked at
/// again under the lock: a file written meanwhile makes it young.
fn delete_dirs(run: &mut Run<'_>, volume: &Volume) -> Result<(), CbError> {
    let doomed = std::mem::take(&mut run.doomed_dirs);
    for chunk in doomed.chunks(DIRS_PER_LOCK) {
        // The common case (everything in the batch goes) in one statement; in the partitioned
        // layout the rows wait for remove_index_rows, which may drop their partitions whole
        // instead, and a dry run only locks.
        if !run.args.dry_run && !run.partitioned && super::at_once::delete_chunk(run, volume, chunk) {
            continue;
        }
        let names: Vec<String> = chunk.iter().filter_map(|d| d.name.to_str().map(str::to_owned)).collect();
        let mut locked = index_rows::lock_dirs(&names, run.args.dry_run)?;
        // Files on disk with no row yet: one an indexer is recording now keeps its directory.
        let root = volume.path();
        let rowless: Vec<String> = chunk
            .iter()
            .flat_map(|d| {
                // Files with a row, held here or by another transaction.
                let held: HashSet<&str> = d
                    .name
                    .to_str()
                    .and_then(|n| locked.get(n))
                    .map(|(h, busy)| h.iter().map(|h| h.path.as_str()).chain(busy.iter().map(String::as_str)).collect())
                    .unwrap_or_default();
                d.survey
                    .found
                    .iter()
                    .filter_map(|f| f.rel.to_str().map(|_| root.join(&f.rel).to_string_lossy().into_owned()))
                    .filter(|p| !held.contains(p.as_str()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let recording = index_rows::lock_new_paths(&rowless, &root.to_string_lossy(), run.args.dry_run)?;
        for d in chunk {
            let job = d.job.as_ref().map(|(id, j)| (*id, j.as_ref()));
            let (held, busy_rows) = d.name.to_str().and_then(|n| locked.remove(n)).unwrap_or_default();
            let prefix = format!("{}/", root.join(&d.name).to_string_lossy());
            let busy = busy_rows.len() + recording.iter().filter(|p| p.starts_with(&prefix)).count();
            if busy > 0 {
                run.push(Action::new(
                    "keep",
                    d.shown.clone(),
                    job,
                    format!("{busy} of its files are being indexed right now; a later run deletes it"),
                ));
                continue;
            }
            let again = if d.kind == DirKind::Orphan {
                match d.looked_at_again(&run.policy, volume) {
                    Ok(Some(s)) => Some(s),
                    Ok(None) => {
                        run.push(Action::new("keep", d.shown.clone(), job, CHANGED.into()));
                        continue;
                    }
                    Err(e) => {
                        run.push(Action::new("error", d.shown.clone(), job, format!("cannot list it: {e}")));
                        continue;
                    }
                }
            } else {
                None
            };
            let at = run.push_deleted_dir(d, again.as_ref().unwrap_or(&d.survey));
            run.take_rows(at, &held);
        }
    }
    Ok(())
}

fn delete_files(
    run: &mut Run<'_>,
    volume: &Volume,
    name: &OsString,
    survey: &Survey,
    job: Option<(Uuid, Option<&Job>)>,
    live: bool,
) -> Result<bool, CbError> {
    let root = volume.path();
    let expired: Vec<_> = survey
        .found
        .iter()
        .filter(|f| f.entry.kind != Kind::Dir && run.policy.file_expired(f.entry.stat.mtime_us))
        .collect();
    if expired.is_empty() {
        return Ok(false);
    }
    let plan: Result<Option<HashSet<String>>, String> = match (live, job) {
        (true, Some((id, _))) => plan_paths(id).map_err(|e| e.message),
        _ => Ok(Some(HashSet::new())),
    };
    let mut doomed = Vec::new();
    for f in expired {
        let abs = root.join(&f.rel);
        let shown = abs.to_string_lossy().into_owned();
        let in_plan = match &plan {
            Ok(Some(p)) => p.contains(&shown),
            Ok(None) => {
                let mut a = Action::new("keep", shown, job, PLAN_SAYS_NOTHING.into());
                a.bytes = i64::try_from(f.entry.stat.size).unwrap_or(i64::MAX);
                a.files = i32::from(f.entry.kind == Kind::File);
                run.push(a);
                continue;
            }
            Err(e) => {
                run.push(Action::new(
                    "keep",
                    shown,
                    job,
                    format!("the live job's recovery plan could not be computed: {e}"),
                ));
                continue;
            }
        };
        match file_verdict(&run.policy, f.entry.stat.mtime_us, in_plan) {
            FileVerdict::Untouched => {}
            FileVerdict::Keep(reason) => {
                let mut a = Action::new("keep", shown, job, reason);
                a.bytes = i64::try_from(f.entry.stat.size).unwrap_or(i64::MAX);
                a.files = 1;
                run.push(a);
            }
            FileVerdict::Delete(reason) => doomed.push((f, shown, reason)),
        }
    }
    let paths: Vec<String> =
        doomed.iter().filter(|(f, _, _)| f.rel.to_str().is_some()).map(|(_, s, _)| s.clone()).collect();
    let (held, busy) = index_rows::lock_paths(&paths, &volume.path().to_string_lossy(), run.args.dry_run)?;
    let busy: HashSet<String> = busy.into_iter().collect();
    let held: HashMap<String, Held> = held.into_iter().map(|h| (h.path.clone(), h)).collect();
    let mut deleted = 0usize;
    for (f, shown, reason) in doomed {
        if busy.contains(&shown) {
            run.push(Action::new("keep", shown, job, "being indexed right now; a later run deletes it".into()));
            continue;
        }
        if !survey.can_unlink(&f.rel) {
            let why = "permission denied: the database's operating-system user may not delete entries of its directory";
            run.push(Action::new("error", shown, job, why.into()));
            continue;
        }
        // Looked at again under the lock: still the file examined, still past the age.
        let now = match fs_remove::restat(volume, &f.rel) {
            Ok(Some(now))
                if now.stat.inode == f.entry.stat.inode
                    && now.stat.device == f.entry.stat.device
                    && run.policy.file_expired(now.stat.mtime_us) =>
            {
                now
            }
            Ok(None) => continue,
            Ok(Some(_)) => {
                run.push(Action::new("keep", shown, job, CHANGED.into()));
                continue;
            }
            Err(e) => {
                run.push(Action::new("error", shown, job, format!("cannot look at it: {e}")));
                continue;
            }
        };
        let mut a = Action::new("delete_file", shown.clone(), job, reason);
        a.bytes = if f.entry.kind == Kind::File { i64::try_from(f.entry.stat.size).unwrap_or(i64::MAX) } else { 0 };
        a.files = i32::from(f.entry.kind == Kind::File);
        let at = run.push(a);
        if let Some(h) = held.get(&shown) {
            run.take_rows(at, std::slice::from_ref(h));
        }
        run.ops.push(Op::RemoveFile { rel: f.rel.clone(), seen: now });
        deleted += 1;
    }
    // A directory left empty goes too, unless its job is live (its agent may write again).
    if deleted == survey.found.len() && !live {
        run.ops.push(Op::Prune(name.clone()));
    }
    Ok(deleted > 0)
}
