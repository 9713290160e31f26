//! Session buffers: discovering the agents' JSONL session files (`discovery`, `scan`), telling
//! their dialects apart (`dialect`), deciding what changed (`reconcile`), and recording them
//! (`pass`, with `catalog` as the SPI side and `sql` as the SQL functions).

pub mod catalog;
pub mod dialect;
pub mod discovery;
pub mod pass;
pub mod reconcile;
pub mod scan;
mod sql;

pgrx::extension_sql_file!("schema.sql", name = "buffer_schema");
