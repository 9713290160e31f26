//! Push ingestion, the shell: agents on nodes whose session volumes the server cannot see ship
//! their files' bytes over SQL (`append_session_bytes`, usually from the `cortex-buffer-ship`
//! sidecar or DaemonSet), and the server applies them with the tailer's own rules: the same
//! line judge and inserts (`indexer::event_store`), the same row lock and compare-and-set
//! (`indexer::file_row`), exactly once. The rules of placing a chunk are pure, in
//! `cortex_buffer_core::push`; `apply` applies them (one path for one push and for many), `store` holds their statements, `rate` is the per-source limit,
//! `sources` registers sources and issues their tokens, `sql` the functions.

pub(crate) mod apply;
pub mod confirm;
#[cfg(any(test, feature = "pg_test"))]
mod push_pg_tests;
pub mod rate;
mod sources;
mod sql;
pub mod store;
