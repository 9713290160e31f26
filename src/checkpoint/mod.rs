//! Checkpoints: the control plane's canonical JSON and CRC-32 (`crc`), the identity and
//! fencing rules of a write (`identity`) — both pure — and their storage in the bound job table
//! and `checkpoint_history` (`store`), exposed to SQL by `sql`.

pub use cortex_buffer_core::checkpoint::{crc, identity};
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;
mod sql;
pub(crate) mod store;
