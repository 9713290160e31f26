//! Job liveness: retry decisions (`retry`) and the per-agent circuit breaker (`circuit`) —
//! both pure — and their SPI sides: heartbeats, the zombie reaper and idle paused jobs
//! (`liveness_store`), the breaker's rows (`circuit_store`), exposed to SQL by `sql`.

mod circuit_store;
pub use cortex_buffer_core::lifecycle::{circuit, retry};
mod liveness_store;
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;
mod sql;
