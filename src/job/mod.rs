//! Jobs: the default job table (`schema.sql`), the column contract a bound table must meet
//! (`contract`, pure) and the per-backend binding to whichever table `cortex_buffer.job_table`
//! names (`binding`). Checkpoints, liveness and spend all go through the binding.

pub mod binding;
pub use cortex_buffer_core::job::contract;

pgrx::extension_sql_file!("schema.sql", name = "job_schema");
