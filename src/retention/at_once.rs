//! The common case of a cleanup's directories, in one statement per batch: every file of every
//! directory of the batch goes. [`super::cleanup`]'s general path locks the rows (one statement),
//! reads them again for the ones it could not lock, and deletes them later (more statements):
//! three passes over the same rows, where the `DELETE` alone would lock them as well.
//!
//! Here the rows are locked as the indexer's claim locks them (`SKIP LOCKED`: nothing waits)
//! and deleted, by one statement (`index_rows::delete_dir_rows`), in a subtransaction. Then,
//! under those locks, what the general path checks before deleting is checked after: a file on
//! disk whose row was not deleted is being indexed or recorded right now
//! (`index_rows::lock_new_paths`), and an orphan is looked at again (a file written meanwhile
//! makes it young, and so does a file that came since the first look, which the locks do not
//! cover). If anything in the batch must be kept, or the statement failed, the
//! subtransaction is rolled back (the rows and their locks come back) and the caller takes the
//! general path for the batch, which keeps exactly what must be kept. So the outcome is the
//! general path's; only its cost differs.
//!
//! One difference: a row another transaction holds whose file the survey did not see (gone, or
//! created after the survey) is left, and the directory goes; the general path would keep the
//! directory for it. Its file is gone, or not deleted either (a directory's removal deletes only
//! what its survey saw, and an orphan that gained an entry is kept), and a later run cleans up
//! both.

use std::collections::HashSet;

use super::index_rows;
use super::state::{DoomedDir, Run};
use crate::pg::xact::subtransaction;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::retention::DirKind;
use cortex_buffer_watch::remove::Survey;
use cortex_buffer_watch::volume::Volume;

/// Deletes the rows of every directory of `chunk` and schedules the directories' removal, if
/// nothing in them must be kept. False, with nothing done, when something must: the caller
/// then takes the general path.
pub(super) fn delete_chunk(run: &mut Run<'_>, volume: &Volume, chunk: &[DoomedDir]) -> bool {
    let Some(names) = chunk.iter().map(|d| d.name.to_str().map(str::to_owned)).collect::<Option<Vec<_>>>() else {
        return false;
    };
    let root = volume.path();
    let done = subtransaction(|| {
        let mut deleted = index_rows::delete_dir_rows(&names)?;
        let mut per_dir = Vec::with_capacity(chunk.len());
        let mut rowless = Vec::new();
        for (d, name) in chunk.iter().zip(&names) {
            let rows = deleted.remove(name).unwrap_or_default();
            let with_row: HashSet<&str> = rows.iter().map(|r| r.path.as_str()).collect();
            rowless.extend(
                d.survey
                    .found
                    .iter()
                    .filter_map(|f| f.rel.to_str().map(|_| root.join(&f.rel).to_string_lossy().into_owned()))
                    .filter(|p| !with_row.contains(p.as_str())),
            );
            per_dir.push(rows);
        }
        // A file on disk without a row deleted here is being recorded or indexed right now.
        if !index_rows::lock_new_paths(&rowless, &root.to_string_lossy(), false)?.is_empty() {
            return Err(keep());
        }
        let mut surveys: Vec<Option<Survey>> = Vec::with_capacity(chunk.len());
        for d in chunk {
            if d.kind != DirKind::Orphan {
                surveys.push(None);
                continue;
            }
            // Kept, or not to be listed: the general path says which, and why.
            let again = d.looked_at_again(&run.policy, volume).ok().flatten().ok_or_else(keep)?;
            surveys.push(Some(again));
        }
        Ok((per_dir, surveys))
    });
    let Ok((per_dir, surveys)) = done else { return false };
    for ((d, rows), again) in chunk.iter().zip(per_dir).zip(surveys) {
        let at = run.push_deleted_dir(d, again.as_ref().unwrap_or(&d.survey));
        let taken: i64 = rows.iter().filter(|r| run.taken.insert(r.file_id)).map(|r| r.rows).sum();
        if let Some(a) = run.actions.get_mut(at) {
            a.rows_deleted += taken;
        }
    }
    true
}

/// The subtransaction's way out when something in the batch must be kept: rolled back, and
/// never seen by the caller of the cleanup.
fn keep() -> CbError {
    CbError::new(SqlState::ObjectNotInPrerequisiteState, "a directory of the batch is kept")
}
