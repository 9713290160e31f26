//! SQL functions of the spend capability.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::{AnyNumeric, Uuid};

use super::store::{self, Call, Totals};
use crate::pg::args::{numeric, required};
use crate::pg::jsonb::RawJsonb;
use crate::pg::raise::raise;
use crate::pg::OrRaise;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::spend::decimal::Decimal;
use cortex_buffer_core::spend::usage::{self, Usage};

fn parse_usage(doc: &RawJsonb) -> Usage {
    doc.with_root(|root, _| usage::parse(root)).or_raise()
}

fn now() -> TimestampWithTimeZone {
    // SAFETY: reads the transaction start time; no arguments, cannot fail.
    let ts = unsafe { pgrx::pg_sys::GetCurrentTransactionStartTimestamp() };
    TimestampWithTimeZone::try_from(ts).unwrap_or_else(|e| raise(CbError::internal(format!("now(): {e:?}"))))
}

/// The exact cost in USD of one call's `usage` with `model`, at the price in force at `at`.
#[pg_extern(stable, strict)]
fn llm_cost(usage: RawJsonb, model: &str, at: default!(TimestampWithTimeZone, "pg_catalog.now()")) -> AnyNumeric {
    numeric(store::llm_cost(&parse_usage(&usage), model, at).or_raise())
}

/// The totals row (the names are in [`returning_totals`]).
type TotalsRow = TableIterator<'static, (i64, i64, i64, i64, AnyNumeric, i64, bool)>;

/// pgrx reads a function's result columns from the tokens of its signature (a type alias is
/// not understood), so `record_usage` and `settle_usage`, which return the same totals, get
/// that part of their signature from here.
macro_rules! returning_totals {
    ($(#[$attr:meta])* fn $name:ident($($args:tt)*) $body:block) => {
        $(#[$attr])*
        #[allow(clippy::type_complexity)]
        fn $name($($args)*) -> TableIterator<
            'static,
            (
                name!(input_tokens, i64),
                name!(output_tokens, i64),
                name!(cache_write_tokens, i64),
                name!(cache_read_tokens, i64),
                name!(cost_usd, AnyNumeric),
                name!(llm_calls, i64),
                name!(duplicate, bool),
            ),
        > $body
    };
}

fn totals_row(t: Totals) -> TotalsRow {
    TableIterator::once((
        t.input_tokens,
        t.output_tokens,
        t.cache_write_tokens,
        t.cache_read_tokens,
        numeric(t.cost_usd),
        t.llm_calls,
        t.duplicate,
    ))
}

returning_totals! {
    /// Adds one LLM call's tokens and exact cost to the job's totals, once per `request_id`.
    #[pg_extern(volatile)]
    fn record_usage(
        job_id: Option<Uuid>,
        model: Option<&str>,
        usage: Option<RawJsonb>,
        request_id: default!(Option<&str>, "NULL"),
        at: default!(Option<TimestampWithTimeZone>, "pg_catalog.now()"),
    ) {
        let job = required(job_id, "job_id");
        let model = required(model, "model");
        let usage = parse_usage(&required(usage, "usage"));
        let at = at.unwrap_or_else(now);
        let call = Call { job, model, usage, request_id, at, reservation: None };
        totals_row(crate::job::authority::act(job, || store::record(&call)).or_raise())
    }
}

/// Sets an agent's per-job limits: NULL is unlimited, 0 allows nothing.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
fn set_budget(
    agent_id: Option<Uuid>,
    max_input_tokens_per_job: default!(Option<i64>, "NULL"),
    max_cost_usd_per_job: default!(Option<AnyNumeric>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(agent_id, Uuid),
        name!(max_input_tokens_per_job, Option<i64>),
        name!(max_cost_usd_per_job, Option<AnyNumeric>),
        name!(updated_at, TimestampWithTimeZone),
    ),
> {
    let agent = required(agent_id, "agent_id");
    let max_cost = max_cost_usd_per_job.map(|n| Decimal::parse(&n.to_string()).or_raise());
    let (limits, at) = store::set_budget(agent, max_input_tokens_per_job, max_cost).or_raise();
    TableIterator::once((agent, limits.max_input_tokens, limits.max_cost.map(numeric), at))
}

/// Whether the job may make its next LLM call (Spike #34: exhausted when used >= limit).
#[allow(clippy::type_complexity)]
#[pg_extern(stable, strict)]
fn check_token_budget(
    job_id: Uuid,
) -> TableIterator<
    'static,
    (
        name!(allowed, bool),
        name!(reason, String),
        name!(input_tokens, i64),
        name!(max_input_tokens, Option<i64>),
        name!(cost_usd, AnyNumeric),
        name!(max_cost_usd, Option<AnyNumeric>),
    ),
> {
    let r = crate::job::authority::act(job_id, || store::check(job_id)).or_raise();
    TableIterator::once((
        r.verdict.allowed,
        r.verdict.reason.label().to_owned(),
        r.used.input_tokens,
        r.limits.max_input_tokens,
        numeric(r.used.cost),
        r.limits.max_cost.map(numeric),
    ))
}

/// Holds an estimated call against the job's budget if it fits beside what is used and what
/// other open reservations hold.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, strict)]
fn reserve_budget(
    job_id: Uuid,
    estimated_usage: RawJsonb,
    model: &str,
) -> TableIterator<'static, (name!(reservation_id, Option<Uuid>), name!(allowed, bool), name!(reason, String))> {
    let estimate = parse_usage(&estimated_usage);
    let (id, verdict) = crate::job::authority::act(job_id, || store::reserve(job_id, &estimate, model)).or_raise();
    TableIterator::once((id, verdict.allowed, verdict.reason.label().to_owned()))
}

returning_totals! {
    /// Records the call a reservation was made for (once) and closes the reservation.
    #[pg_extern(volatile)]
    fn settle_usage(
        reservation_id: Option<Uuid>,
        actual_usage: Option<RawJsonb>,
        request_id: default!(Option<&str>, "NULL"),
    ) {
        let reservation = required(reservation_id, "reservation_id");
        let usage = parse_usage(&required(actual_usage, "actual_usage"));
        totals_row(store::for_reservation(reservation, || store::settle(reservation, &usage, request_id)).or_raise())
    }
}

/// Gives a reservation's budget back when its call was never made.
#[pg_extern(volatile, strict)]
fn release_reservation(reservation_id: Uuid) -> bool {
    store::for_reservation(reservation_id, || store::release(reservation_id)).or_raise()
}

extension_sql_file!("schema.sql", name = "spend_schema", requires = ["job_schema"]);
extension_sql_file!(
    "api.sql",
    name = "spend_api",
    requires = [
        "spend_schema",
        price_cache::model_price_changed,
        llm_cost,
        record_usage,
        set_budget,
        check_token_budget,
        reserve_budget,
        settle_usage,
        release_reservation
    ]
);
