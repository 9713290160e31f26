//! The retention functions: `cleanup_session_buffers` and `storage_report`.

use std::collections::BTreeMap;

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::Uuid;

use super::cleanup;
use super::state::{Action, Args};
use crate::pg::guc;
use crate::pg::raise::raise;
use crate::pg::time::interval_us;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};

fn non_negative(i: Option<Interval>, name: &str, default_us: i64) -> i64 {
    let Some(i) = i else { return default_us };
    match interval_us(Some(i)) {
        Some(us) if us >= 0 => us,
        _ => raise(
            CbError::new(SqlState::InvalidParameterValue, format!("{name} must be a non-negative interval"))
                .with_hint(format!("Pass e.g. {name} => '24 hours'.")),
        ),
    }
}

const DAY_US: i64 = 86_400_000_000;

/// Applies the retention policy to `sessions_dir` and the index: one row per action.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
#[search_path(pg_catalog, pg_temp)]
fn cleanup_session_buffers(
    post_terminal: default!(Option<Interval>, "'24 hours'"),
    max_file_age: default!(Option<Interval>, "'7 days'"),
    dry_run: default!(Option<bool>, false),
    max_dirs: default!(Option<i32>, "NULL"),
    max_unknown_ratio: default!(Option<f64>, 0.5),
) -> TableIterator<
    'static,
    (
        name!(action, String),
        name!(path, String),
        name!(job_id, Option<Uuid>),
        name!(job_status, Option<String>),
        name!(bytes, i64),
        name!(files, i32),
        name!(rows_deleted, i64),
        name!(reason, String),
    ),
> {
    let max_dirs = match max_dirs {
        None => guc::cleanup_max_dirs(),
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
        Some(_) => raise(
            CbError::new(SqlState::InvalidParameterValue, "max_dirs must be positive")
                .with_hint("Pass how many directories one call may delete from, or NULL for 1000."),
        ),
    };
    let ratio = max_unknown_ratio.unwrap_or(0.5);
    if !(0.0..=1.0).contains(&ratio) {
        raise(CbError::new(SqlState::InvalidParameterValue, "max_unknown_ratio must be between 0 and 1").with_hint(
            "It is the share of job ids with no row in the job table above which the cleanup refuses to run.",
        ));
    }
    let args = Args {
        post_terminal_us: non_negative(post_terminal, "post_terminal", DAY_US),
        max_file_age_us: non_negative(max_file_age, "max_file_age", 7 * DAY_US),
        dry_run: dry_run.unwrap_or(false),
        max_dirs,
        max_unknown_ratio: ratio,
    };
    let rows: Vec<_> = cleanup::run(args).or_raise().into_iter().map(row).collect();
    TableIterator::new(rows)
}

fn row(a: Action) -> (String, String, Option<Uuid>, Option<String>, i64, i32, i64, String) {
    (a.action.to_owned(), a.path, a.job_id, a.job_status, a.bytes, a.files, a.rows_deleted, a.reason)
}

/// Bytes and index rows per job state and age bucket, and what a cleanup with the default
/// arguments would free now (its dry run).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
#[search_path(pg_catalog, pg_temp)]
fn storage_report() -> TableIterator<
    'static,
    (
        name!(job_state, String),
        name!(age, String),
        name!(files, i64),
        name!(bytes, i64),
        name!(index_rows, i64),
        name!(next_cleanup_files, i64),
        name!(next_cleanup_bytes, i64),
        name!(next_cleanup_rows, i64),
    ),
> {
    let rows = super::report::report().or_raise();
    let mut out: BTreeMap<(String, String), [i64; 6]> = BTreeMap::new();
    for r in rows {
        let e = out.entry((r.state, r.age)).or_default();
        for (slot, v) in e.iter_mut().zip(r.figures) {
            *slot += v;
        }
    }
    TableIterator::new(out.into_iter().map(|((s, a), f)| (s, a, f[0], f[1], f[2], f[3], f[4], f[5])))
}
