//! Session buffers: discovering the agents' JSONL session files (`discovery`, `scan`), telling
//! their dialects apart (`dialect`), deciding what changed (`reconcile`), and recording them
//! (`pass`, with `catalog` as the SPI side and `sql` as the SQL functions).

pub mod catalog;
pub mod dialect;
mod direct_insert;
pub mod discovery;
pub mod event_store;
#[cfg(any(test, feature = "pg_test"))]
mod index_pg_tests;
pub mod index_plan;
pub mod indexer;
pub mod integrity;
pub mod judge;
pub mod lines;
pub mod normalize;
pub mod pass;
pub mod reconcile;
pub mod scan;
mod sql;
mod status_sql;
pub mod timestamp;

pgrx::extension_sql_file!("schema.sql", name = "buffer_schema");
