//! A sessions directory whose canonical path changed: the directory was moved and a symbolic
//! link took its name, or it was moved back. Files are recorded under the canonical path, so
//! every file would be recorded again under the new spelling, and every line indexed twice,
//! while the rows under the old spelling, which no pass walks any more, would stay live.
//!
//! Before a pass, live rows recorded under another root whose file is found under the current
//! one, by the same path below its job directory, as the same file (same device and inode), are
//! renamed: they keep their ids, offsets and rows, and the pass finds them unchanged. A row whose
//! file is not that file keeps its path (nothing of another volume, or of a directory
//! `index_sessions(dir)` indexed, is taken for this one). The worker looks once per root it
//! resolves; `index_sessions()` and a cleanup on every call (they walk everything anyway); a
//! lookup's catch-up only its job's rows, by the job directory's index. Read-only transactions
//! and standbys skip it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::xact::{guarded, subtransaction};
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
/// caller's transaction (a subtransaction of it is used) or, for the worker between
/// transactions, one of its own. Failures are logged, never raised: the pass goes on as before.
pub fn adopt(volume: &Volume, scope: Scope<'_>, in_transaction: bool) {
    let Some(root) = volume.path().to_str() else { return };
    // SAFETY: reads of backend-global flags.
    if in_transaction && unsafe { pg_sys::XactReadOnly || pg_sys::RecoveryInProgress() } {
        return;
    }
    let work = || as_definer(|| rename_rows(root, scope, volume));
    let outcome = if in_transaction { subtransaction(work) } else { guarded(work) };
    match outcome {
        Ok(0) => {}
        Ok(renamed) => log!(
            "cortex_buffer: {renamed} file(s) recorded under another path are under \"{root}\" now, where the sessions directory resolves (same files, same rows)"
        ),
        Err(e) => warning!("cortex_buffer: could not move rows recorded under another path to \"{root}\": {e}"),
    }
}

/// Where `path` (recorded under some root, its file in `job_dir`) would be under `volume`: every
/// spelling that cuts the path at `/<job_dir>/`, whose file there has the identity `device`,
/// `inode`.
fn found_under(volume: &Volume, path: &str, job_dir: &str, device: i64, inode: i64) -> Option<String> {
    let marker = format!("/{job_dir}/");
    path.match_indices(&marker)
        .map(|(at, _)| &path[at + 1..])
        .find(|rel| {
            volume.stat(Path::new(rel)).is_ok_and(|m| m.dev().cast_signed() == device && m.ino().cast_signed() == inode)
        })
        .map(str::to_owned)
}

/// The live rows not under `root/` (of `scope`), in batches of [`BATCH`] by file id; each whose
/// file is found under `root` is renamed, unless a row already holds the new path. Returns how
/// many.
fn rename_rows(root: &str, scope: Scope<'_>, volume: &Volume) -> Result<usize, CbError> {
    let prefix = format!("{root}/");
    let (filter, dir) = match scope {
        Scope::All => ("", None),
        Scope::JobDir(d) => ("AND job_dir OPERATOR(pg_catalog.=) $4", Some(d.to_owned())),
    };
    let select = format!(
        "SELECT file_id, path, job_dir, device, inode FROM cortex_buffer.session_file
          WHERE file_id OPERATOR(pg_catalog.>) $1 AND gone_at IS NULL {filter}
            AND NOT pg_catalog.starts_with(path, $2) AND NOT pg_catalog.starts_with(path, 'push:/')
          ORDER BY file_id LIMIT $3 FOR UPDATE SKIP LOCKED"
    );
    let mut after = 0i64;
    let mut renamed = 0usize;
    Spi::connect_mut(|c| loop {
        let mut ids: Vec<i64> = Vec::new();
        let mut paths: Vec<String> = Vec::new();
        let mut seen = 0;
        let mut args = vec![after.into(), prefix.clone().into(), BATCH.into()];
        if let Some(d) = &dir {
            args.push(d.clone().into());
        }
        for r in c.update(&select, None, &args).map_err(spi)? {
            seen += 1;
            let Some(id) = r.get::<i64>(1).map_err(spi)? else { continue };
            after = after.max(id);
            let (Some(path), Some(job_dir), Some(device), Some(inode)) = (
                r.get::<String>(2).map_err(spi)?,
                r.get::<String>(3).map_err(spi)?,
                r.get::<i64>(4).map_err(spi)?,
                r.get::<i64>(5).map_err(spi)?,
            ) else {
                continue;
            };
            if let Some(rel) = found_under(volume, &path, &job_dir, device, inode) {
                ids.push(id);
                paths.push(format!("{prefix}{rel}"));
            }
        }
        if !ids.is_empty() {
            let moved = c
                .update(
                    "UPDATE cortex_buffer.session_file f SET path = m.path
                       FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.text[])) AS m(id, path)
                      WHERE f.file_id OPERATOR(pg_catalog.=) m.id
                        AND NOT EXISTS (SELECT FROM cortex_buffer.session_file g WHERE g.path OPERATOR(pg_catalog.=) m.path)
                  RETURNING f.file_id",
                    None,
                    &[ids.into(), paths.into()],
                )
                .map_err(spi)?;
            renamed += moved.len();
        }
        if seen < BATCH {
            return Ok(renamed);
        }
    })
}
