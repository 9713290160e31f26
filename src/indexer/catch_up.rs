//! Bringing one directory's session files up to date at call time: what the per-job lookups
//! (`recovery_plan`, `session_recovery`, `job_timeline`, `agent_state`, `session_usage`) do
//! before they answer, so a pod that starts right after a crash is told about the lines its
//! predecessor wrote a moment ago, not about the worker's last pass.
//!
//! It is the indexer's own pass (`indexing::pass`) scoped to the directory: discovery of new
//! files (and of the directory itself), then indexing what is new, each file in a
//! subtransaction, under the same row locks and compare-and-set as the worker, so it is exactly
//! once whoever gets there first. Every write runs as `cortex_buffer_definer`; the caller can
//! only cause the directory it asks about to be indexed, never read anything more.
//!
//! A file another indexer holds is waited for, up to `cortex_buffer.catch_up_wait`: its commit
//! is what the lookup needs. The caller's transaction may stay open long after the lookup, so
//! the catch-up holds no lock another job's files need: it records new paths with locks of
//! those paths alone, and past its transaction's share of them leaves new files to the worker,
//! which it asks to look at the directory, and waits for them as for a held file
//! (`catalog_store::as_catch_up`). What cannot be caught up (the wait ran out, a read-only,
//! REPEATABLE READ or SERIALIZABLE transaction, a standby, `catch_up` off, no `sessions_dir`,
//! a failing file) is returned as
//! the reason the answer is stale; the lookup never pretends.

use std::time::{Duration, Instant};

use pgrx::pg_sys;

use super::event_store::BUSY;
use super::indexing;
use crate::pg::guc;
use cortex_buffer_core::recovery::plan::Freshness;
use cortex_buffer_watch::pass::{FileOutcome, Scope};
use cortex_buffer_watch::scan::resolve_root;

/// How often a held file is asked for again.
const RETRY_EVERY: Duration = Duration::from_millis(5);

/// Catches up `dir` (a top-level directory of `sessions_dir`: a job's, or a Claude Code
/// project's).
pub fn catch_up(dir: &str) -> Freshness {
    let stale = |why: String| Freshness { caught_up: false, stale: Some(why), reason: None };
    if !guc::catch_up() {
        return stale("cortex_buffer.catch_up is off: the answer holds what the worker has indexed".into());
    }
    // SAFETY: reads of backend-global flags.
    let (read_only, in_recovery) = unsafe { (pg_sys::XactReadOnly, pg_sys::RecoveryInProgress()) };
    if read_only || in_recovery {
        return stale(
            "a read-only transaction (or a standby) cannot index: the answer holds what the index held".into(),
        );
    }
    // A REPEATABLE READ or SERIALIZABLE transaction reads one snapshot: rows the indexer
    // committed after it would make the catch-up's claim fail with 40001 (aborting the
    // caller's transaction), and its own rows could not show what the snapshot misses anyway.
    // SAFETY: reads a backend-global setting.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return stale(
            "a REPEATABLE READ or SERIALIZABLE transaction reads one snapshot: the answer holds what the index held when it began".into(),
        );
    }
    let configured = guc::sessions_dir();
    let volume = match resolve_root(&configured) {
        Ok(v) => v,
        Err(e) => return stale(format!("the job's files cannot be read from here ({e})")),
    };
    // Every lock it takes lasts as long as the caller's transaction: its own paths' only.
    super::catalog_store::as_catch_up(|| catch_up_in(&volume, dir))
}

fn catch_up_in(volume: &cortex_buffer_watch::volume::Volume, dir: &str) -> Freshness {
    let stale = |why: String| Freshness { caught_up: false, stale: Some(why), reason: None };
    super::moved_root::adopt(volume, super::moved_root::Scope::JobDir(dir), true);
    let deadline = Instant::now() + guc::catch_up_wait();
    let mut handed = false;
    loop {
        let files = match indexing::caller_pass(volume, Scope::Dir(dir)) {
            Ok(p) => p.files,
            Err(e) => return stale(format!("catching up {dir} failed: {e}")),
        };
        if let Some((path, FileOutcome::Failed { error, .. })) =
            files.iter().find(|(_, o)| matches!(o, FileOutcome::Failed { .. }))
        {
            return stale(format!("{path} could not be indexed: {error}"));
        }
        let held = files.iter().filter(|(_, o)| matches!(o, FileOutcome::Skipped(why) if why == BUSY)).count();
        if held == 0 {
            return Freshness { caught_up: true, stale: None, reason: None };
        }
        if Instant::now() >= deadline {
            return stale(format!(
                "{held} file(s) of {dir} were being indexed by another session, or were new files left to the worker, for longer than cortex_buffer.catch_up_wait"
            ));
        }
        // What is busy may be new files this transaction had no share of locks left to record:
        // the worker is asked to look at the directory now rather than at its next pass.
        if !handed {
            // The first worker learns of changes itself (the kernel's notifications, or its poll)
            // and is only woken; the others index what they are handed.
            match cortex_buffer_watch::pass::owner(dir, guc::workers()) {
                0 => {
                    crate::worker::shared::wake(0);
                }
                owner => crate::worker::shared::hand(owner, &[dir]),
            }
            handed = true;
        }
        pause(RETRY_EVERY);
    }
}

/// Sleeps, staying cancellable.
fn pause(d: Duration) {
    // SAFETY: pg_usleep and the interrupt check are plain backend calls on the main thread.
    unsafe {
        pg_sys::pg_usleep(i64::try_from(d.as_micros()).unwrap_or(5000));
    }
    pgrx::check_for_interrupts!();
}
