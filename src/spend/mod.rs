//! Spend: exact LLM cost from a price table, idempotent usage recording, and budget checks
//! that hold under concurrency. Pure: `decimal` (exact arithmetic), `usage` (every usage
//! spelling), `cost` (the cost of a call), `budget` (Spike #34 budget rules and reservation
//! admission). Shell: `price_cache` (the per-backend price cache), `store` (SPI) and `sql` (the SQL
//! functions).

pub use cortex_buffer_core::spend::{budget, cost, decimal, usage};
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;
pub(crate) mod price_cache;
mod sql;
pub mod store;
