//! Retention in the partitioned layout (`partition_events()`): a file the cleanup deletes keeps
//! its index rows, marked gone (so no recovery plan trusts them), and a partition goes whole,
//! by `DROP TABLE`, once every file of its span qualifies ([`partition_verdict`]). Its files'
//! `session_file` rows go in the same transaction. Each cleanup also makes the partitions the
//! next files need (`premake` of them ahead).
//!
//! A span's `session_file` rows are locked as the indexer locks them (`FOR UPDATE SKIP LOCKED`):
//! a file being indexed keeps its partition. The drop waits at most [`DROP_LOCK_TIMEOUT`] for the
//! readers of `event` (dropping a partition locks its parent); a busy table keeps the partition
//! for a later run, and the rest of the cleanup goes on.

use std::collections::{HashMap, HashSet};

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::Uuid;

use super::state::{plan_paths, Action, Run};
use crate::partition;
use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::time::unix_us;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::partition_route::partition_name;
use cortex_buffer_core::retention::partition::{partition_verdict, PartitionFile, PartitionVerdict};
use cortex_buffer_core::retention::JobClass;

/// How long a partition's drop waits for `event`'s readers and writers before it gives up.
const DROP_LOCK_TIMEOUT: &str = "2s";

/// One session file of a span, locked.
struct SpanFile {
    file_id: i64,
    path: String,
    job_id: Option<Uuid>,
    gone: bool,
    mtime_us: i64,
    /// The index rows the file's counters record (`valid_lines + corrupt_lines`: the indexer
    /// changes them in the transaction that adds the rows).
    rows: i64,
}

/// Marks the files of `files` gone: their index rows stay for their partition's drop. (A dry
/// run marks them too, in the subtransaction it rolls back: its partition verdicts then see
/// what the real run's would.) Returns how many rows it marked.
pub(super) fn mark_gone(files: &[i64]) -> Result<usize, CbError> {
    if files.is_empty() {
        return Ok(0);
    }
    as_definer(|| {
        Spi::connect_mut(|c| {
            let n = c
                .update(
                    "UPDATE cortex_buffer.session_file SET gone_at = pg_catalog.now()
                      WHERE file_id OPERATOR(pg_catalog.=) ANY ($1) AND gone_at IS NULL",
                    None,
                    &[files.to_vec().into()],
                )
                .map_err(spi)?
                .len();
            Ok(n)
        })
    })
}

/// A partition whose files all qualify, waiting for the drops at the end of the run.
struct Doomed {
    at: usize,
    lo: i64,
    hi: i64,
    leaves: Vec<pg_sys::Oid>,
    file_ids: Vec<i64>,
    rows: i64,
}

/// Decides every closed partition, drops those whose files all qualify (last, so that the
/// parents' `ACCESS EXCLUSIVE` lock a drop takes is held for as short a time as the run
/// allows), then makes the partitions ahead of new files (after the drops: a cleanup holding
/// an attach's lock while it waits to drop could deadlock with an indexer).
pub(super) fn maintain(run: &mut Run<'_>) -> Result<(), CbError> {
    let Some((bounds, oids)) = partition::event_bounds() else { return Ok(()) };
    let corrupt = partition::bounds_of(c"corrupt_line");
    let next = partition::next_file_id()?;
    // The drop's last check counts the span's rows with a fresh snapshot: a transaction-wide
    // snapshot could miss a file numbered into the span just before.
    // SAFETY: reads the transaction's isolation level.
    let snapshot_per_statement = unsafe { pg_sys::XactIsoLevel } < pg_sys::XACT_REPEATABLE_READ as i32;
    let mut plans: HashMap<[u8; 16], Option<HashSet<String>>> = HashMap::new();
    let mut doomed = Vec::new();
    for (lo, hi, index) in bounds.spans() {
        if hi > next {
            break;
        }
        let Some(&event_leaf) = oids.get(index) else { continue };
        let shown = format!("cortex_buffer.{}", partition_name("event", lo));
        // A look without locks first: most spans are held by a file still present or young, and
        // need not have their rows locked every run.
        let (all, gone, newest_us) = span_summary(lo, hi)?;
        if gone < all || (all > 0 && !run.policy.file_expired(newest_us)) {
            if gone > 0 {
                let judged: Vec<PartitionFile> = [(all - gone, false, newest_us), (gone, true, newest_us)]
                    .iter()
                    .flat_map(|&(n, g, m)| {
                        (0..n).map(move |_| PartitionFile { gone: g, mtime_us: m, class: None, read_by_plan: false })
                    })
                    .collect();
                if let PartitionVerdict::Keep(reason) = partition_verdict(&run.policy, true, &judged) {
                    let mut a = Action::new("keep", shown, None, reason);
                    a.files = i32::try_from(all).unwrap_or(i32::MAX);
                    run.push(a);
                }
            }
            continue;
        }
        let (files, busy) = lock_span(lo, hi, run.args.dry_run)?;
        if busy > 0 {
            run.push(Action::new(
                "keep",
                shown,
                None,
                format!("{busy} of its files are being indexed right now; a later run drops it"),
            ));
            continue;
        }
        let judged: Vec<PartitionFile> = files
            .iter()
            .map(|f| {
                let class = f.job_id.and_then(|id| run.jobs.get(id.as_bytes()).map(|j| j.class));
                let read_by_plan = matches!(class, Some(JobClass::Live))
                    && f.job_id.is_some_and(|id| {
                        plans
                            .entry(*id.as_bytes())
                            .or_insert_with(|| plan_paths(id).ok().flatten())
                            .as_ref()
                            .is_none_or(|paths| paths.contains(&f.path))
                    });
                PartitionFile { gone: f.gone, mtime_us: f.mtime_us, class, read_by_plan }
            })
            .collect();
        match partition_verdict(&run.policy, true, &judged) {
            // Only a partition some of whose files have gone says why it stays: the others are
            // simply not old yet.
            PartitionVerdict::Keep(reason) if files.iter().any(|f| f.gone) => {
                let mut a = Action::new("keep", shown, None, reason);
                a.files = i32::try_from(files.len()).unwrap_or(i32::MAX);
                run.push(a);
            }
            PartitionVerdict::Keep(_) => {}
            PartitionVerdict::Drop(_) if !snapshot_per_statement => {
                run.push(Action::new(
                    "keep",
                    shown,
                    None,
                    "its files all qualify, but a partition is dropped only in a READ COMMITTED transaction (the last check needs a fresh snapshot)".into(),
                ));
            }
            PartitionVerdict::Drop(reason) => {
                let corrupt_leaf = corrupt.as_ref().and_then(|(b, o)| {
                    b.spans().into_iter().find(|s| s.0 == lo && s.1 == hi).and_then(|s| o.get(s.2).copied())
                });
                let mut a = Action::new("drop_partition", shown, None, reason);
                a.files = i32::try_from(files.len()).unwrap_or(i32::MAX);
                let at = run.push(a);
                doomed.push(Doomed {
                    at,
                    lo,
                    hi,
                    leaves: std::iter::once(event_leaf).chain(corrupt_leaf).collect(),
                    file_ids: files.iter().map(|f| f.file_id).collect(),
                    rows: files.iter().map(|f| f.rows).sum(),
                });
            }
        }
    }
    for d in doomed {
        let outcome = drop_span(&d, run.args.dry_run);
        if let Some(a) = run.actions.get_mut(d.at) {
            match outcome {
                Ok((bytes, files_gone)) => {
                    a.bytes = bytes;
                    a.rows_deleted = d.rows + files_gone;
                }
                Err(e) => {
                    a.action = "keep";
                    a.reason =
                        format!("its files all qualify, but it could not be dropped now ({e}); a later run drops it");
                }
            }
        }
    }
    partition::ensure_ahead()?;
    Ok(())
}

/// The span's files, those of them gone, and the newest one's mtime: read without locks.
fn span_summary(lo: i64, hi: i64) -> Result<(i64, i64, i64), CbError> {
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect(|c| {
                let r = c
                    .select(
                        "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE gone_at IS NOT NULL), pg_catalog.max(mtime)
                           FROM cortex_buffer.session_file
                          WHERE file_id OPERATOR(pg_catalog.>=) $1 AND file_id OPERATOR(pg_catalog.<) $2",
                        None,
                        &[lo.into(), hi.into()],
                    )
                    .map_err(spi)?
                    .next();
                Ok(match r {
                    Some(r) => (
                        r.get::<i64>(1).map_err(spi)?.unwrap_or(0),
                        r.get::<i64>(2).map_err(spi)?.unwrap_or(0),
                        unix_us(r.get(3).map_err(spi)?).unwrap_or(0),
                    ),
                    None => (0, 0, 0),
                })
            })
        })
    })
}

/// Locks the `session_file` rows of `[lo, hi)` as the indexer does; returns them and how many
/// others hold.
fn lock_span(lo: i64, hi: i64, dry_run: bool) -> Result<(Vec<SpanFile>, usize), CbError> {
    let lock = if dry_run { "FOR KEY SHARE SKIP LOCKED" } else { "FOR UPDATE SKIP LOCKED" };
    let range = "file_id OPERATOR(pg_catalog.>=) $1 AND file_id OPERATOR(pg_catalog.<) $2";
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|c| {
                let sql = format!(
                    "SELECT path, job_id, gone_at IS NOT NULL, mtime, valid_lines OPERATOR(pg_catalog.+) corrupt_lines, file_id
                       FROM cortex_buffer.session_file WHERE {range} {lock}"
                );
                let mut files = Vec::new();
                for r in c.update(&sql, None, &[lo.into(), hi.into()]).map_err(spi)? {
                    files.push(SpanFile {
                        path: r.get::<String>(1).map_err(spi)?.unwrap_or_default(),
                        job_id: r.get(2).map_err(spi)?,
                        gone: r.get::<bool>(3).map_err(spi)?.unwrap_or(false),
                        mtime_us: unix_us(r.get(4).map_err(spi)?).unwrap_or(0),
                        rows: r.get::<i64>(5).map_err(spi)?.unwrap_or(0),
                        file_id: r.get::<i64>(6).map_err(spi)?.unwrap_or(0),
                    });
                }
                let all = c
                    .select(
                        &format!("SELECT pg_catalog.count(*) FROM cortex_buffer.session_file WHERE {range}"),
                        None,
                        &[lo.into(), hi.into()],
                    )
                    .map_err(spi)?
                    .next()
                    .and_then(|r| r.get::<i64>(1).ok().flatten())
                    .unwrap_or(0);
                let busy = usize::try_from(all).unwrap_or(0).saturating_sub(files.len());
                Ok((files, busy))
            })
        })
    })
}

/// Drops the span's partitions, in a subtransaction that waits at most [`DROP_LOCK_TIMEOUT`]
/// for the tables (a dry run drops nothing), and deletes the span's `session_file` rows: those
/// locked when it was decided. With the parents locked, no indexer or push holds the tables, so
/// a file numbered into the span meanwhile has committed or rolled back by now; if one is there,
/// the partition stays. Returns the bytes the partitions held and how many `session_file` rows
/// went. (The event rows are not counted by reading them: a week-old partition is rarely in
/// memory, and reading it would cost what the drop saves. The files' counters say how many.)
fn drop_span(d: &Doomed, dry_run: bool) -> Result<(i64, i64), String> {
    let span = "file_id OPERATOR(pg_catalog.>=) $1 AND file_id OPERATOR(pg_catalog.<) $2";
    crate::pg::xact::subtransaction(|| {
        with_index_scans(|| {
            as_definer(|| {
                Spi::connect_mut(|c| {
                    let previous = c
                        .select("SELECT pg_catalog.current_setting('lock_timeout')", None, &[])
                        .map_err(spi)?
                        .next()
                        .and_then(|r| r.get::<String>(1).ok().flatten())
                        .unwrap_or_else(|| "0".into());
                    c.update("SELECT pg_catalog.set_config('lock_timeout', $1, true)", None, &[DROP_LOCK_TIMEOUT.into()])
                        .map_err(spi)?;
                    if !dry_run {
                        c.update("LOCK TABLE cortex_buffer.event, cortex_buffer.corrupt_line IN ACCESS EXCLUSIVE MODE", None, &[])
                            .map_err(spi)?;
                    }
                    let others = c
                        .select(
                            &format!(
                                "SELECT pg_catalog.count(*) FROM cortex_buffer.session_file
                                  WHERE {span} AND file_id OPERATOR(pg_catalog.<>) ALL ($3)"
                            ),
                            None,
                            &[d.lo.into(), d.hi.into(), d.file_ids.clone().into()],
                        )
                        .map_err(spi)?
                        .next()
                        .and_then(|r| r.get::<i64>(1).ok().flatten())
                        .unwrap_or(0);
                    if others > 0 {
                        return Err(CbError::internal(format!(
                            "{others} file(s) were numbered into its span while it was examined"
                        )));
                    }
                    let mut bytes = 0i64;
                    for &leaf in &d.leaves {
                        bytes += c
                            .select("SELECT pg_catalog.pg_total_relation_size($1)", None, &[leaf.into()])
                            .map_err(spi)?
                            .next()
                            .and_then(|r| r.get::<i64>(1).ok().flatten())
                            .unwrap_or(0);
                    }
                    if !dry_run {
                        for &leaf in &d.leaves {
                            c.update("SELECT cortex_buffer.event_partition_drop($1)", None, &[leaf.into()])
                                .map_err(spi)?;
                        }
                    }
                    let sql = if dry_run {
                        "SELECT file_id FROM cortex_buffer.session_file WHERE file_id OPERATOR(pg_catalog.=) ANY ($1)"
                    } else {
                        "DELETE FROM cortex_buffer.session_file WHERE file_id OPERATOR(pg_catalog.=) ANY ($1) RETURNING file_id"
                    };
                    let files = c.update(sql, None, &[d.file_ids.clone().into()]).map_err(spi)?.len();
                    c.update("SELECT pg_catalog.set_config('lock_timeout', $1, true)", None, &[previous.into()])
                        .map_err(spi)?;
                    Ok((bytes, i64::try_from(files).unwrap_or(i64::MAX)))
                })
            })
        })
    })
    .map_err(|f| f.to_string())
}
