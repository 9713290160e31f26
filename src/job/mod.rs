//! Jobs: the default job table (`schema.sql`) and the per-backend binding to whichever table
//! `cortex_buffer.job_table` names (`binding`), checked against the column contract in
//! `cortex_buffer_core::job::contract`. Checkpoints, liveness and spend all go through the
//! binding.

pub mod authority;
mod authority_pg_tests;
pub mod binding;
mod sql;

pgrx::extension_sql_file!("schema.sql", name = "job_schema");
