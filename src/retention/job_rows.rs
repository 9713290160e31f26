//! The extension's own per-job rows (spend, crashes, the breaker's admissions and outcomes,
//! reservations, waits, checkpoint history and marks): those of jobs gone from the job table,
//! or terminal for longer than `cortex_buffer.job_rows_retention`, are deleted (counted, in a
//! dry run) by the cleanup, one statement per table.

use pgrx::prelude::*;

use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use cortex_buffer_core::error::CbError;

/// The per-job tables, each with a `job_id` column.
pub const TABLES: [&str; 9] = [
    "usage_ledger",
    "job_usage",
    "crash",
    "circuit_admission",
    "circuit_outcome",
    "budget_reservation",
    "job_wait",
    "checkpoint_history",
    "checkpoint_mark",
];

/// Deletes (or counts) the rows of `jobs` in each table: `(table, rows)` for each table that
/// has any.
pub fn remove(jobs: &[pgrx::Uuid], dry_run: bool) -> Result<Vec<(&'static str, i64)>, CbError> {
    let mut out = Vec::new();
    if jobs.is_empty() {
        return Ok(out);
    }
    for table in TABLES {
        let sql = if dry_run {
            format!(
                "SELECT pg_catalog.count(*) FROM cortex_buffer.{table} WHERE job_id OPERATOR(pg_catalog.=) ANY ($1)"
            )
        } else {
            format!(
                "WITH d AS (DELETE FROM cortex_buffer.{table} WHERE job_id OPERATOR(pg_catalog.=) ANY ($1) RETURNING 1)
                 SELECT pg_catalog.count(*) FROM d"
            )
        };
        let n: i64 = as_definer(|| {
            Spi::connect_mut(|c| {
                c.update(&sql, Some(1), &[jobs.to_vec().into()])
                    .map_err(spi)?
                    .first()
                    .get_one::<i64>()
                    .map_err(spi)
                    .map(|n| n.unwrap_or(0))
            })
        })?;
        if n > 0 {
            out.push((table, n));
        }
    }
    Ok(out)
}
