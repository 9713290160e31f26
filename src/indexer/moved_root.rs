//! A sessions directory whose canonical path changed: the directory was moved and a symbolic
//! link took its name, or it was moved back. Files are recorded under the canonical path, so
//! every file would be recorded again under the new spelling, and every line indexed twice,
//! while the rows under the old spelling, which no pass walks any more, would stay live.
//!
//! Before a pass, live rows recorded under another root whose file is found under the current
//! one, by the same path below its job directory, as the same file (same device and inode), are
//! renamed: they keep their ids, offsets and rows, and the pass finds them unchanged. A row whose
//! file is not that file keeps its path (nothing of another volume, or of a directory
//! `index_sessions(dir)` indexed, is taken for this one, unless it is the very same file, as
//! through a bind mount). A renamed row's new path takes the new-path lock every recorder
//! takes. The worker looks once per root it
//! resolves; `index_sessions()` and a cleanup on every call (they walk everything anyway); a
//! lookup's catch-up only its job's rows, by the job directory's index. Read-only transactions
//! and standbys skip it.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::pg::privilege::as_definer;
use crate::pg::spi_util::{prepared_read, spi};

const INT8: pgrx::PgOid = pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::INT8OID);
const TEXT: pgrx::PgOid = pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TEXTOID);
use crate::pg::xact::{guarded, subtransaction, TxnFailure};
use cortex_buffer_core::error::CbError;
use cortex_buffer_watch::volume::Volume;

/// Rows looked at per statement.
const BATCH: i64 = 1_000;

/// Which rows to look at.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every live row not under the root.
    All,
    /// A job directory's (a lookup's catch-up).
    JobDir(&'a str),
}

/// Renames the rows of files that moved with the root (see the module). `in_transaction`: the
/// caller's transaction (each batch in a subtransaction of it) or, for the worker between
/// transactions, a transaction per batch. Failures are logged, never raised: the pass goes on
/// as before.
pub fn adopt(volume: &Volume, scope: Scope<'_>, in_transaction: bool) {
    let Some(root) = volume.path().to_str() else { return };
    // SAFETY: reads of backend-global flags.
    if in_transaction && unsafe { pg_sys::XactReadOnly || pg_sys::RecoveryInProgress() } {
        return;
    }
    let prefix = format!("{root}/");
    let mut after = 0i64;
    let mut renamed = 0usize;
    loop {
        let batch = match step(in_transaction, || candidates(&prefix, scope, after, volume)) {
            Ok(b) => b,
            Err(e) => {
                warning!("cortex_buffer: could not look for rows recorded under another path than \"{root}\": {e}");
                break;
            }
        };
        after = batch.after;
        if !batch.ids.is_empty() {
            match step(in_transaction, || rename(&batch.ids, &batch.paths, &batch.keys)) {
                Ok(n) => renamed += n,
                Err(e) => warning!("cortex_buffer: could not move rows recorded under another path to \"{root}\": {e}"),
            }
        }
        if batch.seen < BATCH as usize {
            break;
        }
    }
    if renamed > 0 {
        log!(
            "cortex_buffer: {renamed} file(s) recorded under another path are under \"{root}\" now, where the sessions directory resolves (same files, same rows)"
        );
    }
}

/// Runs `work` as the definer: in a subtransaction of the caller's transaction, or (the worker,
/// between transactions) in a transaction of its own.
fn step<R>(in_transaction: bool, work: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
    let run = || as_definer(work);
    if in_transaction {
        subtransaction(run)
    } else {
        guarded(run)
    }
}

/// One batch of rows looked at: the ones whose file is found under the root, and where.
#[derive(Default)]
struct Batch {
    ids: Vec<i64>,
    paths: Vec<String>,
    /// The new paths' new-path lock keys.
    keys: Vec<i32>,
    seen: usize,
    after: i64,
}

/// Where `path` (recorded under some root, its file in `job_dir`) would be under `volume`: a cut
/// of the path just before `<job_dir>/` (every one is tried), whose file there has the identity
/// `device`, `inode`.
fn found_under(volume: &Volume, path: &str, job_dir: &str, device: i64, inode: i64) -> Option<String> {
    let head = format!("{job_dir}/");
    path.match_indices('/')
        .map(|(at, _)| &path[at + 1..])
        .filter(|rel| rel.starts_with(&head))
        .find(|rel| {
            volume.stat(Path::new(rel)).is_ok_and(|m| m.dev().cast_signed() == device && m.ino().cast_signed() == inode)
        })
        .map(str::to_owned)
}

/// Live rows recorded under another root than `$2` (pushed files have no root), in `file_id`
/// order from `$1`, `$3` at a time.
const CANDIDATES_SQL: &str = "
    SELECT file_id, path, job_dir, device, inode FROM cortex_buffer.session_file
     WHERE file_id OPERATOR(pg_catalog.>) $1 AND gone_at IS NULL
       AND NOT pg_catalog.starts_with(path, $2) AND NOT pg_catalog.starts_with(path, 'push:/')
     ORDER BY file_id LIMIT $3";

/// The same, for one job directory (`$4`, a lookup's catch-up): its rows are taken through
/// `session_file_job_dir_idx` first (a materialised CTE, so the `file_id` order cannot lead the
/// planner to walk the primary key across the whole catalogue), which keeps the call's cost with
/// the job's files.
pub(crate) fn job_candidates_sql() -> String {
    "WITH j AS MATERIALIZED (
         SELECT file_id, path, job_dir, device, inode, gone_at FROM cortex_buffer.session_file
          WHERE job_dir OPERATOR(pg_catalog.=) $4)
     SELECT file_id, path, job_dir, device, inode FROM j
      WHERE file_id OPERATOR(pg_catalog.>) $1 AND gone_at IS NULL
        AND NOT pg_catalog.starts_with(path, $2) AND NOT pg_catalog.starts_with(path, 'push:/')
      ORDER BY file_id LIMIT $3"
        .to_owned()
}

/// The next [`BATCH`] live rows by file id after `after`, not under `prefix` (of `scope`),
/// read without locks; those whose file is found under the root, each new path once.
fn candidates(prefix: &str, scope: Scope<'_>, after: i64, volume: &Volume) -> Result<Batch, CbError> {
    let dir = match scope {
        Scope::All => None,
        Scope::JobDir(d) => Some(d.to_owned()),
    };
    let mut args = vec![after.into(), prefix.to_owned().into(), BATCH.into()];
    if let Some(d) = dir.clone() {
        args.push(d.into());
    }
    let mut batch = Batch { after, ..Batch::default() };
    let mut targets = HashSet::new();
    Spi::connect(|c| {
        // The job's form runs on every lookup's catch-up: prepared once per session.
        let rows = match dir {
            Some(_) => {
                let stmt =
                    prepared_read(c, "moved_root.job_candidates", job_candidates_sql, &[INT8, TEXT, INT8, TEXT])?;
                c.select(&*stmt, None, &args)
            }
            None => c.select(CANDIDATES_SQL, None, &args),
        };
        for r in rows.map_err(spi)? {
            batch.seen += 1;
            let Some(id) = r.get::<i64>(1).map_err(spi)? else { continue };
            batch.after = batch.after.max(id);
            let (Some(path), Some(job_dir), Some(device), Some(inode)) = (
                r.get::<String>(2).map_err(spi)?,
                r.get::<String>(3).map_err(spi)?,
                r.get::<i64>(4).map_err(spi)?,
                r.get::<i64>(5).map_err(spi)?,
            ) else {
                continue;
            };
            if let Some(rel) = found_under(volume, &path, &job_dir, device, inode) {
                let target = format!("{prefix}{rel}");
                if targets.insert(target.clone()) {
                    batch.ids.push(id);
                    batch.keys.push(super::catalog_store::new_path_key(&job_dir, &target));
                    batch.paths.push(target);
                }
            }
        }
        Ok(batch)
    })
}

/// Renames the rows `ids` to `paths`: those no other transaction holds, whose new path has no
/// row, and whose new-path lock (`catalog_store::new_path_lock_sql`, which every recorder of a path takes) is
/// free; the rest wait for a later call. Returns how many.
fn rename(ids: &[i64], paths: &[String], keys: &[i32]) -> Result<usize, CbError> {
    let own: Vec<i32> = paths.iter().map(|p| cortex_buffer_watch::pass::new_path_path_key(p)).collect();
    let sql = format!(
        "UPDATE cortex_buffer.session_file f SET path = m.path
           FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.text[]),
                           pg_catalog.unnest($3::pg_catalog.int4[]), pg_catalog.unnest($4::pg_catalog.int4[]))
                AS m(id, path, key, own)
          WHERE f.file_id OPERATOR(pg_catalog.=) m.id
            AND f.file_id IN (SELECT g.file_id FROM cortex_buffer.session_file g
                               WHERE g.file_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]) FOR UPDATE OF g SKIP LOCKED)
            AND CASE WHEN EXISTS (SELECT FROM cortex_buffer.session_file h WHERE h.path OPERATOR(pg_catalog.=) m.path)
                     THEN false
                     ELSE {} END
      RETURNING f.file_id",
        crate::indexer::catalog_store::new_path_lock_sql(
            crate::indexer::catalog_store::new_path_locks_for(paths.len()),
            false,
            "m.key",
            "m.own"
        )
    );
    Spi::connect_mut(|c| {
        Ok(c.update(&sql, None, &[ids.to_vec().into(), paths.to_vec().into(), keys.to_vec().into(), own.into()])
            .map_err(spi)?
            .len())
    })
}
