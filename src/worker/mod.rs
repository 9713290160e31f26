//! The background workers: registered when the library is preloaded (`cortex_buffer.workers`
//! of them), they index the session files of `cortex_buffer.sessions_dir` into
//! `cortex_buffer.database` as the kernel reports changes (or by polling), and at once when
//! `index_now()` sets their latches.

mod main_loop;
pub mod shared;
mod sql;

use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};

/// `backend_type` and `application_name` of the worker in `pg_stat_activity`.
pub const WORKER_NAME: &str = "cortex_buffer indexer";

/// How long the postmaster waits before restarting the worker after it exits with an error
/// (including a missing database), so a persistent failure never becomes a tight loop.
pub const RESTART_DELAY: Duration = Duration::from_secs(10);

/// The name of worker `n` (from 0) in the log and in `pg_stat_activity.application_name`: the
/// first keeps the plain name, the others are numbered from 2.
pub fn worker_name(n: usize) -> String {
    if n == 0 {
        WORKER_NAME.to_owned()
    } else {
        format!("{WORKER_NAME} {}", n + 1)
    }
}

/// Registers the workers and their shared memory. Only valid from `_PG_init` while
/// `shared_preload_libraries` is being processed.
pub fn register() {
    shared::init();
    for n in 0..crate::pg::guc::workers() {
        BackgroundWorkerBuilder::new(&worker_name(n))
            .set_type(WORKER_NAME)
            .set_library("cortex_buffer")
            .set_function("cortex_buffer_worker_main")
            .set_argument(Some(pgrx::pg_sys::Datum::from(n)))
            .enable_spi_access()
            // Start once the system is consistent so a hot standby's worker can report that it
            // is waiting for promotion instead of not existing at all.
            .set_start_time(BgWorkerStartTime::ConsistentState)
            .set_restart_time(Some(RESTART_DELAY))
            .load();
    }
}
