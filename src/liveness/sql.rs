//! SQL functions of the liveness capability.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::Uuid;

use super::{circuit_store, liveness_store};
use crate::job::binding;
use crate::pg::args::required;
use crate::pg::jsonb::RawJsonb;
use crate::pg::raise::raise;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};

fn positive(i: &Interval, name: &str) {
    if i.as_micros() <= 0 {
        raise(
            CbError::new(SqlState::InvalidParameterValue, format!("{name} must be a positive interval"))
                .with_hint(format!("Pass e.g. {name} => '5 minutes'.")),
        );
    }
}

/// Records a heartbeat; true while the job is RUNNING or WAITING_FOR_APPROVAL, false once the
/// agent must stop.
#[pg_extern(volatile, strict)]
fn heartbeat(job_id: Uuid) -> bool {
    crate::job::authority::act_on_row(job_id, |may| liveness_store::heartbeat(job_id, may)).or_raise()
}

/// Transitions RUNNING jobs without a recent heartbeat to FAILED and then RETRYING or
/// DEAD_LETTER; safe to run concurrently (each job is reaped once).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
fn reap_zombies(
    stale_after: default!(Option<Interval>, "'5 minutes'"),
    max_jobs: default!(Option<i32>, 1000),
) -> TableIterator<
    'static,
    (
        name!(job_id, Uuid),
        name!(agent_id, Uuid),
        name!(attempt, i32),
        name!(new_status, String),
        name!(retry_after, Option<Interval>),
        name!(last_heartbeat, Option<TimestampWithTimeZone>),
    ),
> {
    let stale_after = stale_after.unwrap_or_else(|| Interval::from_micros(5 * 60 * 1_000_000));
    positive(&stale_after, "stale_after");
    let max_jobs = max_jobs.unwrap_or(1000);
    if max_jobs < 0 {
        raise(
            CbError::new(SqlState::InvalidParameterValue, "max_jobs must not be negative")
                .with_hint("Pass the most jobs to reap in this call."),
        );
    }
    let rows: Vec<_> = liveness_store::reap(stale_after, max_jobs)
        .or_raise()
        .into_iter()
        .map(|r| (r.job_id, r.agent_id, r.attempt, r.new_status.to_owned(), r.retry_after, r.last_heartbeat))
        .collect();
    TableIterator::new(rows)
}

/// The statement that creates the reaper's partial index on the bound job table (run it once,
/// outside a transaction block: it builds the index concurrently).
#[pg_extern(stable)]
fn reaper_index_sql() -> String {
    binding::current().or_raise().reaper_index_sql()
}

/// Jobs in WAITING_FOR_APPROVAL for longer than `idle_after` (their pods can be scaled to zero).
#[pg_extern(volatile)]
fn idle_paused_jobs(
    idle_after: default!(Option<Interval>, "'30 minutes'"),
) -> TableIterator<'static, (name!(job_id, Uuid), name!(agent_id, Uuid), name!(waiting_since, TimestampWithTimeZone))> {
    let idle_after = idle_after.unwrap_or_else(|| Interval::from_micros(30 * 60 * 1_000_000));
    positive(&idle_after, "idle_after");
    TableIterator::new(liveness_store::idle_paused(idle_after).or_raise())
}

/// Appends a crash record for the job's current attempt; returns its id.
#[pg_extern(volatile)]
fn record_crash(
    job_id: Option<Uuid>,
    exit_code: Option<i32>,
    error_message: Option<String>,
    lifecycle_state: default!(Option<String>, "NULL"),
    step_index: default!(Option<i32>, "NULL"),
    last_tool: default!(Option<String>, "NULL"),
    tokens: default!(Option<RawJsonb>, "NULL"),
) -> i64 {
    let job = required(job_id, "job_id");
    liveness_store::record_crash(
        job,
        liveness_store::CrashReport { exit_code, error_message, lifecycle_state, step_index, last_tool, tokens },
    )
    .or_raise()
}

/// Whether a failed job should be retried, why, how, and after how long (Spike #34 layers 1-3).
#[allow(clippy::type_complexity)]
#[pg_extern(stable, strict)]
fn retry_decision(
    job_id: Uuid,
) -> TableIterator<
    'static,
    (name!(retry, bool), name!(reason, String), name!(strategy, String), name!(delay, Option<Interval>)),
> {
    let d = liveness_store::retry_decision(job_id).or_raise();
    TableIterator::once((
        d.retry,
        d.reason.label().to_owned(),
        d.strategy.label().to_owned(),
        d.delay_seconds.map(|s| Interval::from_micros(s * 1_000_000)),
    ))
}

/// Whether the agent may start `job_id` now: true while its breaker is closed, and for exactly
/// one canary job once an open breaker's cooldown has passed.
#[pg_extern(volatile, strict)]
fn admit_job(agent_id: Uuid, job_id: Uuid) -> bool {
    circuit_store::admit(agent_id, job_id).or_raise()
}

type StateRow = TableIterator<
    'static,
    (name!(state, String), name!(failures_in_window, i32), name!(open_until, Option<TimestampWithTimeZone>)),
>;

fn state_row(r: circuit_store::Report) -> StateRow {
    TableIterator::once((r.state.label().to_owned(), r.failures_in_window, r.open_until))
}

/// Records a job's outcome for the agent's breaker; returns the breaker afterwards.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, strict)]
fn record_outcome(
    agent_id: Uuid,
    job_id: Uuid,
    success: bool,
) -> TableIterator<
    'static,
    (name!(state, String), name!(failures_in_window, i32), name!(open_until, Option<TimestampWithTimeZone>)),
> {
    state_row(circuit_store::record_outcome(agent_id, job_id, success).or_raise())
}

/// The agent's breaker: closed, open (until `open_until`) or half_open.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, strict)]
fn circuit_state(
    agent_id: Uuid,
) -> TableIterator<
    'static,
    (name!(state, String), name!(failures_in_window, i32), name!(open_until, Option<TimestampWithTimeZone>)),
> {
    state_row(circuit_store::state(agent_id).or_raise())
}

extension_sql_file!("schema.sql", name = "liveness_schema", requires = ["job_schema"]);
extension_sql_file!(
    "api.sql",
    name = "liveness_api",
    requires = [
        "liveness_schema",
        heartbeat,
        reap_zombies,
        reaper_index_sql,
        idle_paused_jobs,
        record_crash,
        retry_decision,
        admit_job,
        record_outcome,
        circuit_state
    ]
);
