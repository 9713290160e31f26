//! The per-source rate limit of push ingestion (`cortex_buffer.push_rate_limit`): bytes per
//! one-second window, counted in shared memory so that every backend a source's shipper
//! connects through counts against the same budget. A fixed table of buckets, each source
//! hashed to one (two sources that share a bucket share its budget: with 256 buckets, rare, and
//! it only ever makes the limit stricter). Without the library in `shared_preload_libraries`
//! there is no shared memory and no limit.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::shmem::*;
use pgrx::{pg_shmem_init, PgAtomic};

use cortex_buffer_core::error::{CbError, SqlState};

const BUCKETS: usize = 256;

/// What one call counts for at least (so that the limit bounds calls too).
pub const CALL_BYTES: u64 = 512;

#[derive(Default)]
#[repr(C)]
struct Bucket {
    /// The one-second window counted (Unix seconds).
    window: AtomicI64,
    /// Bytes counted in it.
    bytes: AtomicU64,
}

#[repr(C)]
pub struct Buckets {
    buckets: [Bucket; BUCKETS],
}

impl Default for Buckets {
    fn default() -> Buckets {
        Buckets { buckets: std::array::from_fn(|_| Bucket::default()) }
    }
}

// SAFETY: only atomics, valid at any address and in any process.
unsafe impl PGRXSharedMemory for Buckets {}

static BUCKETS_SHM: PgAtomic<Buckets> = unsafe { PgAtomic::new(c"cortex_buffer_push_rates") };
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Requests the buckets; only valid while `shared_preload_libraries` is being processed.
pub fn init() {
    pg_shmem_init!(BUCKETS_SHM);
    ATTACHED.store(true, Ordering::Relaxed);
}

fn bucket_of(source: &str) -> Option<&'static Bucket> {
    if !ATTACHED.load(Ordering::Relaxed) {
        return None;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    BUCKETS_SHM.get().buckets.get(usize::try_from(h % BUCKETS as u64).unwrap_or(0))
}

/// Counts `bytes` against `source`'s budget for the current second, or refuses them (53400)
/// when they would pass `limit` bytes per second. A chunk larger than the whole budget passes
/// when the window is empty, so a limit below the chunk size slows a source down but never
/// stops it.
pub fn charge(source: &str, bytes: u64, limit: u64, now_s: i64) -> Result<(), CbError> {
    if limit == 0 {
        return Ok(());
    }
    // A call costs at least this much, however short its chunk: empty pushes are not free.
    let bytes = bytes.max(CALL_BYTES);
    let Some(bucket) = bucket_of(source) else { return Ok(()) };
    let window = bucket.window.load(Ordering::Acquire);
    if window != now_s && bucket.window.compare_exchange(window, now_s, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        bucket.bytes.store(0, Ordering::Release);
    }
    let before = bucket.bytes.fetch_add(bytes, Ordering::AcqRel);
    if before > 0 && before.saturating_add(bytes) > limit {
        bucket.bytes.fetch_sub(bytes, Ordering::AcqRel);
        return Err(CbError::new(
            SqlState::ConfigurationLimitExceeded,
            format!("push source \"{source}\" is over cortex_buffer.push_rate_limit ({} kB/s)", limit / 1024),
        )
        .with_detail(format!("{before} bytes were already pushed in this second"))
        .with_hint("Send the chunk again after a moment (the shipper backs off by itself), or raise cortex_buffer.push_rate_limit."));
    }
    Ok(())
}
