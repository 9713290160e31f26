//! Job liveness, the shell: heartbeats, the zombie reaper, crash records and idle paused jobs
//! (`liveness_store`), the circuit breaker's rows (`circuit_store`), exposed to SQL by `sql`.
//! The retry and breaker rules are in `cortex_buffer_core::liveness`.

mod circuit_store;
#[cfg(any(test, feature = "pg_test"))]
mod liveness_pg_tests;
pub(crate) mod liveness_store;
mod sql;
