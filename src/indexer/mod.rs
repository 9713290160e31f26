//! The session indexer, the shell: one indexing pass for the worker and `index_sessions()`
//! (`indexing`), the `session_file` catalogue (`catalog_store`), indexing one file through SPI
//! (`event_store`, with `file_row` for its `session_file` row and `direct_insert` for the heap
//! path), naming a caller's file under the indexer's rules (`file_access`), and the SQL
//! functions (`sql`, `status_sql`). The rules live in `cortex_buffer_core::indexer`, the
//! file-system work in `cortex_buffer_watch`.

pub mod catalog_store;
pub mod catch_up;
pub(crate) mod direct_insert;
pub mod event_store;
pub mod file_access;
pub(crate) mod file_row;
#[cfg(any(test, feature = "pg_test"))]
mod index_pg_tests;
pub mod indexing;
#[cfg(any(test, feature = "pg_test"))]
mod insert_rules_pg_tests;
pub mod moved_root;
pub mod settings;
mod sql;
mod status_sql;
