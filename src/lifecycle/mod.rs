//! Job liveness: retry decisions (`retry`) and the per-agent circuit breaker (`circuit`) —
//! both pure — and their SPI sides: heartbeats, the zombie reaper and idle paused jobs
//! (`jobs`), the breaker's rows (`breaker`), exposed to SQL by `sql`.

mod breaker;
pub use cortex_buffer_core::lifecycle::{circuit, retry};
mod jobs;
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;
mod sql;
