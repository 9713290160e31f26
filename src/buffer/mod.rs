//! Session buffers, the shell: the `session_file` catalogue (`catalog`), indexing one file
//! through SPI (`event_store`, with `file_row` for its `session_file` row and `direct_insert`
//! for the heap path), and the SQL functions (`sql`, `status_sql`). The rules are in the core
//! crate and the file-system work in the watch crate; both are re-exported here under the
//! names the shell uses.

pub use cortex_buffer_core::buffer::{
    dialect, discovery, event_columns, index_plan, indexer, integrity, judge, lines, normalize, reconcile, timestamp,
};
pub use cortex_buffer_watch::{pass, pipeline, scan, volume};

pub mod catalog_store;
mod direct_insert;
pub mod event_store;
pub mod file_access;
mod file_row;
#[cfg(any(test, feature = "pg_test"))]
mod index_pg_tests;
pub mod indexing;
#[cfg(any(test, feature = "pg_test"))]
mod insert_rules_pg_tests;
pub mod settings;
mod sql;
mod status_sql;

pgrx::extension_sql_file!("schema.sql", name = "buffer_schema");
