//! The index rows a cleanup removes: `session_file` rows locked as the indexer locks them
//! (`FOR UPDATE SKIP LOCKED`: a file being indexed is skipped, never waited for or deleted),
//! and their `event` and `corrupt_line` rows, deleted (or, in a dry run, counted) in batches of
//! files. Every statement runs as `cortex_buffer_definer`.

use std::collections::{HashMap, HashSet};

use pgrx::prelude::*;

use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::time::unix_us;
use cortex_buffer_core::error::CbError;

/// How many files one DELETE statement covers.
pub const FILES_PER_BATCH: usize = 2_000;

/// A `session_file` row the cleanup holds locked.
#[derive(Debug, Clone)]
pub struct Held {
    pub file_id: i64,
    pub path: String,
    /// The row's mtime and whether it is gone, as locked: what the decision is checked against.
    pub mtime_us: i64,
    pub gone: bool,
}

/// Locks the rows of `paths` (a dry run takes a share lock, which the indexer's claim skips
/// just the same). Returns the rows locked, and the paths that have a row another transaction
/// holds (being indexed). `root`: the volume path the paths are below (`lock_new_paths`).
pub fn lock_paths(paths: &[String], root: &str, dry_run: bool) -> Result<(Vec<Held>, Vec<String>), CbError> {
    if paths.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let lock = if dry_run { "FOR KEY SHARE SKIP LOCKED" } else { "FOR UPDATE SKIP LOCKED" };
    as_definer(|| {
        Spi::connect_mut(|c| {
            let mut held = Vec::new();
            let sql = format!(
                "SELECT file_id, path, mtime, gone_at IS NOT NULL FROM cortex_buffer.session_file
                  WHERE path OPERATOR(pg_catalog.=) ANY ($1) {lock}"
            );
            for r in c.update(&sql, None, &[paths.to_vec().into()]).map_err(spi)? {
                let (Some(file_id), Some(path)) = (r.get::<i64>(1).map_err(spi)?, r.get::<String>(2).map_err(spi)?)
                else {
                    continue;
                };
                let mtime_us = unix_us(r.get(3).map_err(spi)?).unwrap_or(0);
                let gone = r.get::<bool>(4).map_err(spi)?.unwrap_or(false);
                held.push(Held { file_id, path, mtime_us, gone });
            }
            let mut busy = Vec::new();
            let mut rowless = Vec::new();
            if held.len() < paths.len() {
                let got: HashSet<&str> = held.iter().map(|h| h.path.as_str()).collect();
                let rows = c
                    .select(
                        "SELECT path FROM cortex_buffer.session_file WHERE path OPERATOR(pg_catalog.=) ANY ($1)",
                        None,
                        &[paths.to_vec().into()],
                    )
                    .map_err(spi)?;
                let mut with_row = HashSet::new();
                for r in rows {
                    if let Some(p) = r.get::<String>(1).map_err(spi)? {
                        if !got.contains(p.as_str()) {
                            busy.push(p.clone());
                        }
                        with_row.insert(p);
                    }
                }
                rowless = paths.iter().filter(|p| !with_row.contains(p.as_str())).cloned().collect();
            }
            Ok((held, busy, rowless))
        })
    })
    .and_then(|(held, mut busy, rowless)| {
        busy.extend(lock_new_paths(&rowless, root, dry_run)?);
        Ok((held, busy))
    })
}

/// Of `paths` (files on disk that had no `session_file` row when the caller looked), the ones an
/// indexer is recording right now: their new-path locks (`catalog_store::new_path_lock_sql`) are held by
/// another transaction, or a row appeared since (looked for again once the locks are held, so
/// an indexer that committed in between is seen). The other paths' locks are kept to the end of
/// the transaction (shared by a dry run), so no indexer records them before the files are
/// unlinked. Without this, a file whose first indexing has not committed would be deleted under
/// its indexer, which would then commit rows of a file that is gone. `root`: the volume path the
/// paths are below, whose first-level directory picks the key (`catalog_store::new_path_key`);
/// a path not below it (a row's file no longer on this volume) is no indexer's to record.
pub fn lock_new_paths(paths: &[String], root: &str, dry_run: bool) -> Result<HashSet<String>, CbError> {
    if paths.is_empty() {
        return Ok(HashSet::new());
    }
    let locks = crate::indexer::catalog_store::new_path_locks_for(paths.len());
    let sql = format!(
        "SELECT u.path, {} FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.int4[]),
                                           pg_catalog.unnest($3::pg_catalog.int4[])) AS u(path, key, own)",
        crate::indexer::catalog_store::new_path_lock_sql(locks, dry_run, "u.key", "u.own")
    );
    let keys: Vec<i32> = paths
        .iter()
        .map(|p| crate::indexer::catalog_store::new_path_key(cortex_buffer_watch::pass::job_dir_below(root, p), p))
        .collect();
    let own: Vec<i32> = paths.iter().map(|p| cortex_buffer_watch::pass::new_path_path_key(p)).collect();
    as_definer(|| {
        Spi::connect_mut(|c| {
            let mut busy = HashSet::new();
            let mut locked = Vec::new();
            for r in c.update(&sql, None, &[paths.to_vec().into(), keys.into(), own.into()]).map_err(spi)? {
                if let (Some(p), Some(got)) = (r.get::<String>(1).map_err(spi)?, r.get::<bool>(2).map_err(spi)?) {
                    if got {
                        locked.push(p);
                    } else {
                        busy.insert(p);
                    }
                }
            }
            let appeared = c
                .select(
                    "SELECT path FROM cortex_buffer.session_file WHERE path OPERATOR(pg_catalog.=) ANY ($1)",
                    None,
                    &[locked.into()],
                )
                .map_err(spi)?;
            for r in appeared {
                if let Some(p) = r.get::<String>(1).map_err(spi)? {
                    busy.insert(p);
                }
            }
            Ok(busy)
        })
    })
}

/// A directory's rows: those locked here, and the paths of those another transaction holds.
pub type DirRows = (Vec<Held>, Vec<String>);

/// The local (not pushed) rows under each of `job_dirs`: locked as [`lock_paths`] locks, and
/// the paths of those others hold, per directory.
pub fn lock_dirs(job_dirs: &[String], dry_run: bool) -> Result<HashMap<String, DirRows>, CbError> {
    let lock = if dry_run { "FOR KEY SHARE SKIP LOCKED" } else { "FOR UPDATE SKIP LOCKED" };
    let mut out: HashMap<String, DirRows> = HashMap::new();
    if job_dirs.is_empty() {
        return Ok(out);
    }
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|c| {
                let sql = format!(
                    "SELECT file_id, path, job_dir FROM cortex_buffer.session_file
                      WHERE job_dir OPERATOR(pg_catalog.=) ANY ($1) AND path OPERATOR(pg_catalog.!~~) 'push:/%' {lock}"
                );
                for r in c.update(&sql, None, &[job_dirs.to_vec().into()]).map_err(spi)? {
                    let (Some(file_id), Some(path), Some(dir)) = (
                        r.get::<i64>(1).map_err(spi)?,
                        r.get::<String>(2).map_err(spi)?,
                        r.get::<String>(3).map_err(spi)?,
                    ) else {
                        continue;
                    };
                    out.entry(dir).or_default().0.push(Held { file_id, path, mtime_us: 0, gone: false });
                }
                let held: HashSet<i64> = out.values().flat_map(|(h, _)| h.iter().map(|h| h.file_id)).collect();
                let rows = c
                    .select(
                        "SELECT job_dir, path, file_id FROM cortex_buffer.session_file
                          WHERE job_dir OPERATOR(pg_catalog.=) ANY ($1) AND path OPERATOR(pg_catalog.!~~) 'push:/%'",
                        None,
                        &[job_dirs.to_vec().into()],
                    )
                    .map_err(spi)?;
                let mut busy: Vec<(String, String)> = Vec::new();
                for r in rows {
                    let (Some(dir), Some(path), Some(id)) = (
                        r.get::<String>(1).map_err(spi)?,
                        r.get::<String>(2).map_err(spi)?,
                        r.get::<i64>(3).map_err(spi)?,
                    ) else {
                        continue;
                    };
                    if !held.contains(&id) {
                        busy.push((dir, path));
                    }
                }
                for (dir, path) in busy {
                    out.entry(dir).or_default().1.push(path);
                }
                Ok(out)
            })
        })
    })
}

/// A file's row deleted by [`delete_dir_rows`]: its id and path, and the index rows it took
/// (its own plus its counters', as [`remove`] counts them).
#[derive(Debug, Clone)]
pub struct Deleted {
    pub file_id: i64,
    pub path: String,
    pub rows: i64,
}

/// Deletes, in one statement, the local (not pushed) rows under `job_dirs` that no other
/// transaction holds (`FOR UPDATE SKIP LOCKED`, as the indexer's claim: a file being indexed
/// keeps its row, and nothing waits), and with them their `event` and `corrupt_line` rows (the
/// table's trigger). The rows stay locked by the deletion until the end of the transaction.
/// (By `ctid`: a tid scan of the rows just locked, which no one else can move. A row whose newest
/// version is not the statement's to see is locked and not deleted; its file is then taken for
/// one another transaction holds, and the caller takes the general path.) Returns the deleted
/// rows per directory. What [`lock_dirs`] then [`remove`] do in three statements, for the
/// common case where nothing in the directories is kept (the caller runs it in a
/// subtransaction, rolled back if something must be).
pub fn delete_dir_rows(job_dirs: &[String]) -> Result<HashMap<String, Vec<Deleted>>, CbError> {
    let mut out: HashMap<String, Vec<Deleted>> = HashMap::new();
    if job_dirs.is_empty() {
        return Ok(out);
    }
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|c| {
                let rows = c
                    .update(
                        "DELETE FROM cortex_buffer.session_file WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
                             SELECT ctid FROM cortex_buffer.session_file
                              WHERE job_dir OPERATOR(pg_catalog.=) ANY ($1) AND path OPERATOR(pg_catalog.!~~) 'push:/%'
                                FOR UPDATE SKIP LOCKED))
                         RETURNING job_dir, file_id, path,
                                   valid_lines OPERATOR(pg_catalog.+) corrupt_lines OPERATOR(pg_catalog.+) 1",
                        None,
                        &[job_dirs.to_vec().into()],
                    )
                    .map_err(spi)?;
                for r in rows {
                    let (Some(dir), Some(file_id), Some(path), Some(n)) = (
                        r.get::<String>(1).map_err(spi)?,
                        r.get::<i64>(2).map_err(spi)?,
                        r.get::<String>(3).map_err(spi)?,
                        r.get::<i64>(4).map_err(spi)?,
                    ) else {
                        continue;
                    };
                    out.entry(dir).or_default().push(Deleted { file_id, path, rows: n });
                }
                Ok(out)
            })
        })
    })
}

/// The files of $1, each with its index rows (its events, its corrupt lines, and itself), from
/// the counters the indexer keeps with its rows: what a dry run reports.
pub const COUNT_ROWS_SQL: &str =
    "SELECT file_id, valid_lines OPERATOR(pg_catalog.+) corrupt_lines OPERATOR(pg_catalog.+) 1
       FROM cortex_buffer.session_file WHERE file_id OPERATOR(pg_catalog.=) ANY ($1)";
/// `COUNT_ROWS_SQL`, deleting the files' rows (their events and corrupt lines go with them, by
/// the table's trigger, or with their dropped partition).
pub const DELETE_ROWS_SQL: &str = "DELETE FROM cortex_buffer.session_file WHERE file_id OPERATOR(pg_catalog.=) ANY ($1)
      RETURNING file_id, valid_lines OPERATOR(pg_catalog.+) corrupt_lines OPERATOR(pg_catalog.+) 1";

/// Deletes the `session_file` rows of `files` (or, for a dry run, reads them), in batches; the
/// table's statement trigger deletes their `event` and `corrupt_line` rows, by index scans (a
/// batch is a small part of the table). Returns the index rows per file id: the file's own row
/// plus the rows its counters record (`valid_lines + corrupt_lines`, which the indexer changes
/// in the transaction that adds the rows; they are locked, so nothing is added meanwhile).
/// Counting from the counters spares reading back a million deleted rows to count them.
pub fn remove(files: &[i64], dry_run: bool) -> Result<HashMap<i64, i64>, CbError> {
    let mut counts: HashMap<i64, i64> = HashMap::new();
    let sql = if dry_run { COUNT_ROWS_SQL } else { DELETE_ROWS_SQL };
    for batch in files.chunks(FILES_PER_BATCH) {
        with_index_scans(|| {
            as_definer(|| {
                Spi::connect_mut(|c| {
                    for r in c.update(sql, None, &[batch.to_vec().into()]).map_err(spi)? {
                        if let (Some(id), Some(n)) = (r.get::<i64>(1).map_err(spi)?, r.get::<i64>(2).map_err(spi)?) {
                            *counts.entry(id).or_default() += n;
                        }
                    }
                    Ok(())
                })
            })
        })?;
    }
    Ok(counts)
}

/// A row with no file of its own on this server to look at: gone from the volume, or pushed.
#[derive(Debug, Clone)]
pub struct Remote {
    pub file_id: i64,
    pub path: String,
    pub job_id: Option<pgrx::Uuid>,
    pub gone_us: Option<i64>,
    pub mtime_us: i64,
    pub size: i64,
}

/// Rows of files that are gone (since before `gone_before`), and pushed files last changed
/// before `pushed_before`: the candidates of the row-driven retention, by file id after `after`.
pub fn remote_candidates(gone_before: i64, pushed_before: i64, after: i64, limit: i64) -> Result<Vec<Remote>, CbError> {
    as_definer(|| {
        Spi::connect(|c| {
            let rows = c
                .select(
                    "SELECT file_id, path, job_id, gone_at, mtime, size_bytes FROM cortex_buffer.session_file
                      WHERE ((gone_at IS NOT NULL AND gone_at OPERATOR(pg_catalog.<) $1)
                          OR (gone_at IS NULL AND path OPERATOR(pg_catalog.~~) 'push:/%' AND mtime OPERATOR(pg_catalog.<) $2))
                        AND file_id OPERATOR(pg_catalog.>) $4
                      ORDER BY file_id LIMIT $3",
                    None,
                    &[
                        crate::pg::time::timestamptz(Some(gone_before)).into(),
                        crate::pg::time::timestamptz(Some(pushed_before)).into(),
                        limit.into(),
                        after.into(),
                    ],
                )
                .map_err(spi)?;
            let mut out = Vec::new();
            for r in rows {
                let (Some(file_id), Some(path)) = (r.get::<i64>(1).map_err(spi)?, r.get::<String>(2).map_err(spi)?)
                else {
                    continue;
                };
                out.push(Remote {
                    file_id,
                    path,
                    job_id: r.get(3).map_err(spi)?,
                    gone_us: unix_us(r.get(4).map_err(spi)?),
                    mtime_us: unix_us(r.get(5).map_err(spi)?).unwrap_or(0),
                    size: r.get(6).map_err(spi)?.unwrap_or(0),
                });
            }
            Ok(out)
        })
    })
}

/// The job ids of the index's session files.
pub fn indexed_job_ids() -> Result<Vec<pgrx::Uuid>, CbError> {
    ids_of("SELECT DISTINCT job_id FROM cortex_buffer.session_file WHERE job_id IS NOT NULL".to_owned())
}

/// The job ids the extension's per-job tables hold rows of.
pub fn per_job_ids() -> Result<Vec<pgrx::Uuid>, CbError> {
    let sql = super::job_rows::TABLES
        .iter()
        .map(|t| format!("SELECT job_id FROM cortex_buffer.{t}"))
        .collect::<Vec<_>>()
        .join(" UNION ");
    ids_of(sql)
}

fn ids_of(sql: String) -> Result<Vec<pgrx::Uuid>, CbError> {
    as_definer(|| {
        Spi::connect(|c| {
            let mut out = Vec::new();
            for r in c.select(&sql, None, &[]).map_err(spi)? {
                if let Some(id) = r.get::<pgrx::Uuid>(1).map_err(spi)? {
                    out.push(id);
                }
            }
            Ok(out)
        })
    })
}
