//! The file-system half of a cleanup, run once the transaction that deleted the index rows has
//! committed: what a rollback undoes is never deleted. A failure is logged as a WARNING and
//! left for the next run (the files still qualify, and have no index rows any more).

use std::ffi::OsString;
use std::path::PathBuf;

use pgrx::{register_xact_callback, PgXactCallbackEvent};

use super::progress::pause_at;
use cortex_buffer_core::retention::Step;
use cortex_buffer_watch::remove::{self, Found};
use cortex_buffer_watch::volume::{Entry, Volume};

/// What is done to the volume once the transaction has committed.
#[derive(Debug, Clone)]
pub enum Op {
    /// The directory and exactly what its survey saw in it.
    RemoveDir { name: OsString, seen: Vec<Found> },
    /// The file, if it is still as examined.
    RemoveFile { rel: PathBuf, seen: Entry },
    /// Remove the directory if nothing is left in it.
    Prune(OsString),
}

/// Schedules `ops` for the commit of the current transaction.
pub fn after_commit(volume: Volume, ops: Vec<Op>) {
    if ops.is_empty() {
        return;
    }
    // A prepared transaction commits in another session (or never): pgrx would keep this
    // callback for this backend's next commit, which is not that one. Refused instead.
    register_xact_callback(PgXactCallbackEvent::PrePrepare, || {
        pgrx::error!(
            "cleanup_session_buffers cannot run in a transaction that is prepared (PREPARE TRANSACTION): run it in a transaction of its own"
        )
    });
    register_xact_callback(PgXactCallbackEvent::Commit, move || apply(&volume, &ops));
}

/// Does `ops`, never raising an error (the transaction has committed).
fn apply(volume: &Volume, ops: &[Op]) {
    pause_at(Step::Committed);
    let mut failed = 0usize;
    for (i, op) in ops.iter().enumerate() {
        let (what, result) = match op {
            Op::RemoveDir { name, seen } => {
                let (removed, result) = remove::remove_dir(volume, name, seen);
                if removed.kept > 0 {
                    pgrx::log!(
                        "cortex_buffer.cleanup_session_buffers: left {} entries of {}/{} that changed or appeared after it was examined",
                        removed.kept,
                        volume.path().display(),
                        name.to_string_lossy()
                    );
                }
                (name.to_string_lossy().into_owned(), result)
            }
            Op::RemoveFile { rel, seen } => {
                (rel.to_string_lossy().into_owned(), remove::remove_file(volume, rel, seen).map(|_| ()))
            }
            Op::Prune(name) => (name.to_string_lossy().into_owned(), remove::prune(volume, name).map(|_| ())),
        };
        // Already gone (another run took it): nothing left to do.
        let result = result.or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) });
        if let Err(e) = result {
            failed += 1;
            pgrx::warning!(
                "cortex_buffer.cleanup_session_buffers: could not delete {}/{what}: {e}; the next run tries again",
                volume.path().display()
            );
        }
        if i == 0 {
            pause_at(Step::Unlinking);
        }
    }
    if failed > 0 {
        pgrx::log!("cortex_buffer.cleanup_session_buffers: {failed} of {} deletions failed after commit", ops.len());
    }
}
