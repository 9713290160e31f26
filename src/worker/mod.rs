//! The background worker: registered when the library is preloaded, it runs the session
//! discovery pass every `cortex_buffer.poll_interval` (or at once when `index_now()` sets its
//! latch) against `cortex_buffer.database`.

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

/// Registers the worker and its shared-memory slot. Only valid from `_PG_init` while
/// `shared_preload_libraries` is being processed.
pub fn register() {
    shared::init();
    BackgroundWorkerBuilder::new(WORKER_NAME)
        .set_type(WORKER_NAME)
        .set_library("cortex_buffer")
        .set_function("cortex_buffer_worker_main")
        .enable_spi_access()
        // Start once the system is consistent so a hot standby's worker can report that it is
        // waiting for promotion instead of not existing at all.
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(RESTART_DELAY))
        .load();
}
