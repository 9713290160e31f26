//! Checkpoints, the shell: storage in the bound job table and `checkpoint_history`
//! (`store`), each checkpoint's high-water mark of the session files (`marks`), exposed to SQL
//! by `sql`. The canonical JSON, CRC-32 and the identity and fencing
//! rules are in `cortex_buffer_core::checkpoint`.

#[cfg(any(test, feature = "pg_test"))]
mod checkpoint_pg_tests;
pub(crate) mod marks;
mod sql;
pub(crate) mod store;
