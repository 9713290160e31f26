//! The per-source rate limit of push ingestion (`cortex_buffer.push_rate_limit`): bytes per
//! one-second window, counted in shared memory so that every backend a source's shipper
//! connects through counts against the same budget. The table and its rules are pure
//! (`cortex_buffer_core::push::rate`: an entry per source pushing in the current second, never
//! one shared with another source); this module keeps it under a lightweight lock. Without the
//! library in `shared_preload_libraries` there is no shared memory and no limit.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::prelude::*;
use pgrx::shmem::*;
use pgrx::{pg_shmem_init, PgLwLock};

use cortex_buffer_core::error::{CbError, SqlState};
pub use cortex_buffer_core::push::rate::CALL_BYTES;
use cortex_buffer_core::push::rate::{self as rules, Charge, Slot, SLOTS};

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Table {
    slots: [Slot; SLOTS],
}

impl Default for Table {
    fn default() -> Table {
        Table { slots: [Slot::default(); SLOTS] }
    }
}

// SAFETY: plain integers and bytes, valid at any address and in any process.
unsafe impl PGRXSharedMemory for Table {}

static TABLE: PgLwLock<Table> = unsafe { PgLwLock::new(c"cortex_buffer_push_rates") };
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Requests the table; only valid while `shared_preload_libraries` is being processed.
pub fn init() {
    pg_shmem_init!(TABLE);
    ATTACHED.store(true, Ordering::Relaxed);
}

/// Counts `bytes` against `source`'s budget for the current second, or refuses them (53400)
/// when they would pass `limit` bytes per second.
pub fn charge(source: &str, bytes: u64, limit: u64, now_s: i64) -> Result<(), CbError> {
    if limit == 0 || !ATTACHED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let verdict = rules::charge(&mut TABLE.exclusive().slots, source, bytes, limit, now_s);
    match verdict {
        // Full: more sources pushed in this second than the table holds around this one's
        // place; it is not counted for the second rather than charged for another's bytes.
        Charge::Counted | Charge::Full => Ok(()),
        Charge::Over { before } => Err(CbError::new(
            SqlState::ConfigurationLimitExceeded,
            format!("push source \"{source}\" is over cortex_buffer.push_rate_limit ({} kB/s)", limit / 1024),
        )
        .with_detail(format!("{before} bytes were already pushed in this second"))
        .with_hint("Send the chunk again after a moment (the shipper backs off by itself), or raise cortex_buffer.push_rate_limit.")),
    }
}

/// Counts `bytes` more against `source`'s budget for the current second, without refusing
/// them: what a push stored beyond its chunk (the held tail's pieces, an over-long line's
/// reducer state). The source's next push pays for them.
pub fn charge_stored(source: &str, bytes: u64, limit: u64, now_s: i64) {
    if bytes == 0 || limit == 0 || !ATTACHED.load(Ordering::Relaxed) {
        return;
    }
    rules::add(&mut TABLE.exclusive().slots, source, bytes, now_s);
}
