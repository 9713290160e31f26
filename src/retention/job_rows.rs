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

/// Each table's time column: when a row was written (or last changed).
const TIMES: [(&str, &str); 9] = [
    ("usage_ledger", "recorded_at"),
    ("job_usage", "coalesce(last_used_at, first_used_at)"),
    ("crash", "recorded_at"),
    ("circuit_admission", "admitted_at"),
    ("circuit_outcome", "recorded_at"),
    ("budget_reservation", "reserved_at"),
    ("job_wait", "waiting_since"),
    ("checkpoint_history", "created_at"),
    ("checkpoint_mark", "recorded_at"),
];

/// Of `jobs`, those whose newest row in any per-job table is older than `before` (a job with
/// no time anywhere counts as old): a job gone from the job table keeps its rows for the
/// retention period after its last one, like a terminal job after its end.
pub fn quiet_since(jobs: &[pgrx::Uuid], before_us: i64) -> Result<Vec<pgrx::Uuid>, CbError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let union = TIMES
        .iter()
        .map(|(t, c)| {
            format!("SELECT job_id, {c} AS at FROM cortex_buffer.{t} WHERE job_id OPERATOR(pg_catalog.=) ANY ($1)")
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let sql = format!(
        "SELECT job_id FROM ({union}) r GROUP BY job_id
          HAVING pg_catalog.max(at) IS NULL OR pg_catalog.max(at) OPERATOR(pg_catalog.<) $2"
    );
    as_definer(|| {
        Spi::connect(|c| {
            let mut out = Vec::new();
            let before = crate::pg::time::timestamptz(Some(before_us));
            for r in c.select(&sql, None, &[jobs.to_vec().into(), before.into()]).map_err(spi)? {
                if let Some(id) = r.get::<pgrx::Uuid>(1).map_err(spi)? {
                    out.push(id);
                }
            }
            Ok(out)
        })
    })
}

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
