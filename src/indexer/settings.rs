//! The limits the indexer runs with, read once per pass from the `cortex_buffer.*` settings.

use crate::pg::guc;

/// The limits indexing runs with (from the settings).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub max_line_bytes: usize,
    pub max_line_memory: u64,
    pub batch_rows: usize,
    pub settle_us: i64,
    pub quarantine_after: i32,
    pub max_corruption_ratio: f64,
    /// The most bytes the worker takes from one job directory in one pass.
    pub pass_dir_bytes: u64,
    /// How long a file that failed or was busy waits before the worker tries it again.
    pub retry_us: i64,
}

impl Settings {
    pub fn current() -> Settings {
        Settings {
            max_line_bytes: guc::max_line_bytes(),
            max_line_memory: guc::max_line_memory(),
            batch_rows: guc::batch_rows(),
            settle_us: guc::settle_period_us(),
            quarantine_after: guc::quarantine_after(),
            max_corruption_ratio: guc::max_corruption_ratio(),
            pass_dir_bytes: guc::pass_dir_bytes(),
            retry_us: i64::try_from(guc::poll_interval().as_micros()).unwrap_or(1_000_000),
        }
    }
}
