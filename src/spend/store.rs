//! Spend through SPI: prices, the ledger and per-job totals, budgets and reservations. The
//! arithmetic and the decisions are the pure modules'; this reads and writes rows.
//!
//! Locks are always taken in one order, so spend calls never deadlock with each other or with
//! the job functions: a reservation row, then the job row (only when its counter columns are
//! written), then the job's `job_usage` row. The `job_usage` row is the per-job mutex of
//! budgets: record_usage/settle_usage update it and reserve_budget locks it before reading
//! what is used and reserved (in a separate statement, with a fresh snapshot).

use std::collections::HashSet;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiHeapTupleData};
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use super::price_cache::price_at;
use crate::job::binding::{self, Access, Binding};
use crate::pg::guc;
use crate::pg::planner::{pinned, with_index_scans};
use crate::pg::privilege::as_definer;
use crate::pg::raise::notice;
use crate::pg::spi_util::{spi, FirstValue};
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::int::count_i64 as count;
use cortex_buffer_core::spend::budget::{self, Amount, Limits, Verdict};
use cortex_buffer_core::spend::cost::cost;
use cortex_buffer_core::spend::decimal::Decimal;
use cortex_buffer_core::spend::usage::Usage;

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
const TIMESTAMPTZ: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIMESTAMPTZOID);

fn decimal_at(row: &SpiHeapTupleData<'_>, column: usize) -> Result<Option<Decimal>, CbError> {
    row.get::<String>(column).map_err(spi)?.map(|t| Decimal::parse(&t)).transpose()
}

/// `llm_cost()`: the exact cost of `usage` for `model` at `at`.
pub fn llm_cost(usage: &Usage, model: &str, at: TimestampWithTimeZone) -> Result<Decimal, CbError> {
    pinned(|| Spi::connect(|client| cost(usage, &price_at(client, model, at)?)))
}

/// A job's running totals after a call was recorded (or found already counted).
pub struct Totals {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_write_tokens: i64,
    pub cache_read_tokens: i64,
    pub cost_usd: Decimal,
    pub llm_calls: i64,
    pub duplicate: bool,
}

const TOTALS: &str =
    "input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd::pg_catalog.text, llm_calls";

fn totals_from(row: &SpiHeapTupleData<'_>, first: usize, duplicate: bool) -> Result<Totals, CbError> {
    let n = |i: usize| row.get::<i64>(first + i).map_err(spi).map(Option::unwrap_or_default);
    Ok(Totals {
        input_tokens: n(0)?,
        output_tokens: n(1)?,
        cache_write_tokens: n(2)?,
        cache_read_tokens: n(3)?,
        cost_usd: decimal_at(row, first + 4)?.unwrap_or(Decimal::ZERO),
        llm_calls: n(5)?,
        duplicate,
    })
}

/// The job's totals as they are (zeros before its first call), read as the definer role.
fn current_totals(client: &SpiClient<'_>, b: &Binding, job: Uuid, duplicate: bool) -> Result<Totals, CbError> {
    let stmt = b.statement(client, "spend.totals", Access::Read, &[UUID], |_| {
        format!("SELECT {TOTALS} FROM cortex_buffer.job_usage WHERE job_id OPERATOR(pg_catalog.=) $1")
    })?;
    let mut rows = as_definer(|| client.select(&*stmt, Some(1), &[job.into()]).map_err(spi))?;
    match rows.next() {
        Some(r) => totals_from(&r, 1, duplicate),
        None => Ok(Totals {
            input_tokens: 0,
            output_tokens: 0,
            cache_write_tokens: 0,
            cache_read_tokens: 0,
            cost_usd: Decimal::ZERO,
            llm_calls: 0,
            duplicate,
        }),
    }
}

/// `SET` items keeping the bound table's counter columns in step with the exact totals, given
/// as parameters (`$2` input tokens as budgets count them, `$3` output tokens, `$4` the exact
/// cost as text, `$5` calls), each clamped to what its column holds.
fn mirror_assignments(b: &Binding) -> Vec<String> {
    let mut sets = Vec::new();
    let clamp = |column: &str, expr: &str| -> Option<String> {
        let fit = b.shape.fit(column)?;
        let rounded = match fit.scale {
            Some(s) => format!("pg_catalog.round({expr}, {s})"),
            None => expr.to_owned(),
        };
        Some(match fit.max {
            Some(max) => format!("{column} = least({rounded}, {max})"),
            None => format!("{column} = {rounded}"),
        })
    };
    sets.extend(clamp("tokens_in", "$2"));
    sets.extend(clamp("tokens_out", "$3"));
    sets.extend(clamp("cost_usd", "$4::pg_catalog.numeric"));
    sets.extend(clamp("llm_call_count", "$5"));
    sets
}

/// One call to record: what `record_usage()` and `settle_usage()` pass down.
pub struct Call<'a> {
    pub job: Uuid,
    pub model: &'a str,
    pub usage: Usage,
    pub request_id: Option<&'a str>,
    pub at: TimestampWithTimeZone,
    pub reservation: Option<Uuid>,
}

fn record_in(client: &mut SpiClient<'_>, b: &Binding, call: &Call<'_>) -> Result<Totals, CbError> {
    let cost_usd = cost(&call.usage, &price_at(client, call.model, call.at)?)?;
    let mirror = mirror_assignments(b);
    // 1. The job row, in the caller's rights; locked (before job_usage, see the module comment)
    //    only when its counters are written.
    let key = if mirror.is_empty() { "spend.record.job" } else { "spend.record.job.lock" };
    let job_stmt = b.statement(client, key, Access::Write, &[UUID], |b| {
        format!(
            "SELECT id FROM {t} WHERE id OPERATOR(pg_catalog.=) $1 {lock}",
            t = b.table,
            lock = if mirror_assignments(b).is_empty() { "" } else { "FOR NO KEY UPDATE" }
        )
    })?;
    if client.update(&*job_stmt, Some(1), &[call.job.into()]).map_err(spi)?.is_empty() {
        return Err(b.no_such_job(call.job));
    }
    // 2. The ledger and the totals, as the definer role: the calling roles may not write them.
    let stmt = b.statement(
        client,
        "spend.record",
        Access::Write,
        &[UUID, TEXT, TEXT, TIMESTAMPTZ, INT8, INT8, INT8, INT8, INT8, TEXT, UUID],
        |_| {
            format!(
                "WITH counted AS (
                     INSERT INTO cortex_buffer.usage_ledger
                            (job_id, request_id, model, used_at, input_tokens, output_tokens, cache_write_tokens,
                             cache_write_1h_tokens, cache_read_tokens, cost_usd, reservation_id)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::pg_catalog.numeric, $11)
                     ON CONFLICT ON CONSTRAINT usage_ledger_request_key DO NOTHING
                     RETURNING job_id
                 ), totals AS (
                     INSERT INTO cortex_buffer.job_usage AS u
                            (job_id, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
                             cache_read_tokens, cost_usd, llm_calls, first_used_at, last_used_at)
                     SELECT job_id, $5, $6, $7, $8, $9, $10::pg_catalog.numeric, 1, $4, $4 FROM counted
                     ON CONFLICT (job_id) DO UPDATE SET
                         input_tokens = u.input_tokens OPERATOR(pg_catalog.+) excluded.input_tokens,
                         output_tokens = u.output_tokens OPERATOR(pg_catalog.+) excluded.output_tokens,
                         cache_write_tokens = u.cache_write_tokens OPERATOR(pg_catalog.+) excluded.cache_write_tokens,
                         cache_write_1h_tokens = u.cache_write_1h_tokens OPERATOR(pg_catalog.+) excluded.cache_write_1h_tokens,
                         cache_read_tokens = u.cache_read_tokens OPERATOR(pg_catalog.+) excluded.cache_read_tokens,
                         cost_usd = u.cost_usd OPERATOR(pg_catalog.+) excluded.cost_usd,
                         llm_calls = u.llm_calls OPERATOR(pg_catalog.+) 1,
                         first_used_at = least(u.first_used_at, excluded.first_used_at),
                         last_used_at = greatest(u.last_used_at, excluded.last_used_at)
                     RETURNING u.*
                 )
                 SELECT {totals_cols} FROM (SELECT) AS one LEFT JOIN totals ON true",
                totals_cols = TOTALS.split(", ").map(|c| format!("totals.{c}")).collect::<Vec<_>>().join(", "),
            )
        },
    )?;
    let u = &call.usage;
    let args = [
        call.job.into(),
        call.request_id.into(),
        call.model.into(),
        call.at.into(),
        count(u.input).into(),
        count(u.output).into(),
        count(u.cache_write()).into(),
        count(u.cache_write_1h).into(),
        count(u.cache_read).into(),
        cost_usd.to_string().into(),
        call.reservation.into(),
    ];
    let totals = as_definer(|| {
        let rows = client.update(&*stmt, Some(1), &args).map_err(spi)?;
        let Some(row) = rows.into_iter().next() else { return Err(CbError::internal("record_usage returned no row")) };
        if row.get::<i64>(6).map_err(spi)?.is_none() {
            return Ok(None);
        }
        totals_from(&row, 1, false).map(Some)
    })?;
    let Some(totals) = totals else {
        // Already counted: the first recording's transaction has committed (the ledger insert
        // waited for it), so a new snapshot sees its totals.
        return current_totals(client, b, call.job, true);
    };
    // 3. The bound table's counters, in the caller's rights.
    if !mirror.is_empty() {
        let update = b.statement(client, "spend.mirror", Access::Write, &[UUID, INT8, INT8, TEXT, INT8], |b| {
            format!(
                "UPDATE {t} SET {sets} WHERE id OPERATOR(pg_catalog.=) $1",
                t = b.table,
                sets = mirror_assignments(b).join(", ")
            )
        })?;
        let budget_input =
            totals.input_tokens.saturating_add(totals.cache_write_tokens).saturating_add(totals.cache_read_tokens);
        client
            .update(
                &*update,
                None,
                &[
                    call.job.into(),
                    budget_input.into(),
                    totals.output_tokens.into(),
                    totals.cost_usd.to_string().into(),
                    totals.llm_calls.into(),
                ],
            )
            .map_err(spi)?;
    }
    Ok(totals)
}

/// `record_usage()`: counts one call, once per (job, request id).
pub fn record(call: &Call<'_>) -> Result<Totals, CbError> {
    let b = binding::current()?;
    with_index_scans(|| Spi::connect_mut(|client| record_in(client, &b, call)))
}

/// The figures `check_token_budget()` returns.
pub struct BudgetReport {
    pub verdict: Verdict,
    pub used: Amount,
    pub limits: Limits,
}

fn limits_at(row: &SpiHeapTupleData<'_>, first: usize) -> Result<Limits, CbError> {
    Ok(Limits { max_input_tokens: row.get(first).map_err(spi)?, max_cost: decimal_at(row, first + 1)? })
}

/// `check_token_budget()`: whether the job may make its next call.
pub fn check(job: Uuid) -> Result<BudgetReport, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect(|client| {
            let stmt = b.statement(client, "spend.check", Access::Read, &[UUID], |b| {
                format!(
                    "SELECT coalesce(u.input_tokens OPERATOR(pg_catalog.+) u.cache_write_tokens
                                     OPERATOR(pg_catalog.+) u.cache_read_tokens, 0)::pg_catalog.int8,
                            coalesce(u.cost_usd, 0)::pg_catalog.text, a.max_input_tokens_per_job,
                            a.max_cost_usd_per_job::pg_catalog.text
                       FROM {t} AS j
                       LEFT JOIN cortex_buffer.job_usage AS u ON u.job_id OPERATOR(pg_catalog.=) j.id
                       LEFT JOIN cortex_buffer.agent_budget AS a ON a.agent_id OPERATOR(pg_catalog.=) j.agent_id
                      WHERE j.id OPERATOR(pg_catalog.=) $1",
                    t = b.table
                )
            })?;
            let mut rows = client.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
            let r = rows.next().ok_or_else(|| b.no_such_job(job))?;
            let used = Amount {
                input_tokens: r.get(1).map_err(spi)?.unwrap_or(0),
                cost: decimal_at(&r, 2)?.unwrap_or(Decimal::ZERO),
            };
            let limits = limits_at(&r, 3)?;
            Ok(BudgetReport { verdict: budget::check(&used, &limits), used, limits })
        })
    })
}

/// Jobs (with their agents) whose budget is exhausted: the retry decision's Layer 2.
pub fn exhausted(client: &SpiClient<'_>, jobs: &[(Uuid, Uuid)]) -> Result<HashSet<[u8; 16]>, CbError> {
    let mut out = HashSet::new();
    if jobs.is_empty() {
        return Ok(out);
    }
    let ids: Vec<Uuid> = jobs.iter().map(|(j, _)| *j).collect();
    let agents: Vec<Uuid> = jobs.iter().map(|(_, a)| *a).collect();
    let rows = client
        .select(
            "SELECT j.job_id, coalesce(u.input_tokens OPERATOR(pg_catalog.+) u.cache_write_tokens
                                       OPERATOR(pg_catalog.+) u.cache_read_tokens, 0)::pg_catalog.int8,
                    coalesce(u.cost_usd, 0)::pg_catalog.text, a.max_input_tokens_per_job,
                    a.max_cost_usd_per_job::pg_catalog.text
               FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.uuid[]), pg_catalog.unnest($2::pg_catalog.uuid[])) AS j(job_id, agent_id)
               JOIN cortex_buffer.agent_budget AS a ON a.agent_id OPERATOR(pg_catalog.=) j.agent_id
               LEFT JOIN cortex_buffer.job_usage AS u ON u.job_id OPERATOR(pg_catalog.=) j.job_id",
            None,
            &[ids.into(), agents.into()],
        )
        .map_err(spi)?;
    for r in rows {
        let Some(job) = r.get::<Uuid>(1).map_err(spi)? else { continue };
        let used = Amount {
            input_tokens: r.get(2).map_err(spi)?.unwrap_or(0),
            cost: decimal_at(&r, 3)?.unwrap_or(Decimal::ZERO),
        };
        if !budget::check(&used, &limits_at(&r, 4)?).allowed {
            out.insert(*job.as_bytes());
        }
    }
    Ok(out)
}

/// `set_budget()`: the agent's limits (NULL = unlimited), returned as stored.
pub fn set_budget(
    agent: Uuid,
    max_input_tokens: Option<i64>,
    max_cost: Option<Decimal>,
) -> Result<(Limits, TimestampWithTimeZone), CbError> {
    if max_input_tokens.is_some_and(|t| t < 0) || max_cost.is_some_and(|c| c.is_negative()) {
        return Err(CbError::new(SqlState::InvalidParameterValue, "budget limits must not be negative")
            .with_hint("Pass NULL for no limit, 0 to allow nothing."));
    }
    pinned(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                let rows = client
            .update(
                "INSERT INTO cortex_buffer.agent_budget AS a (agent_id, max_input_tokens_per_job, max_cost_usd_per_job)
                 VALUES ($1, $2, $3::pg_catalog.numeric)
                 ON CONFLICT (agent_id) DO UPDATE SET
                     max_input_tokens_per_job = excluded.max_input_tokens_per_job,
                     max_cost_usd_per_job = excluded.max_cost_usd_per_job,
                     updated_at = pg_catalog.now()
                 RETURNING max_input_tokens_per_job, max_cost_usd_per_job::pg_catalog.text, updated_at",
                Some(1),
                &[agent.into(), max_input_tokens.into(), max_cost.map(|c| c.to_string()).into()],
            )
            .map_err(spi)?;
                let r = rows.into_iter().next().ok_or_else(|| CbError::internal("set_budget returned no row"))?;
                let at: Option<TimestampWithTimeZone> = r.get(3).map_err(spi)?;
                Ok((limits_at(&r, 1)?, at.ok_or_else(|| CbError::internal("set_budget: no updated_at"))?))
            })
        })
    })
}

/// Deletes a few reservations past their keeping time: amortised upkeep on every
/// reservation, so the table never needs a cron job.
fn forget_old_reservations(client: &mut SpiClient<'_>, b: &Binding) -> Result<(), CbError> {
    let stmt = b.statement(client, "spend.forget", Access::Write, &[], |_| {
        "DELETE FROM cortex_buffer.budget_reservation WHERE reservation_id OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT reservation_id FROM cortex_buffer.budget_reservation
              WHERE forget_at OPERATOR(pg_catalog.<) pg_catalog.now() ORDER BY forget_at LIMIT 16 FOR UPDATE SKIP LOCKED))"
            .to_owned()
    })?;
    as_definer(|| client.update(&*stmt, None, &[]).map_err(spi).map(|_| ()))
}

/// `reserve_budget()`: holds the estimate against the job's budget if it fits.
pub fn reserve(job: Uuid, estimate: &Usage, model: &str) -> Result<(Option<Uuid>, Verdict), CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let at: TimestampWithTimeZone = client
                .select("SELECT pg_catalog.now()", Some(1), &[])
                .map_err(spi)?
                .pipe_first()?
                .ok_or_else(|| CbError::internal("now() is NULL"))?;
            let estimate_amount = Amount {
                input_tokens: count(estimate.budget_input()),
                cost: cost(estimate, &price_at(client, model, at)?)?,
            };
            let agent_stmt = b.statement(client, "spend.agent", Access::Read, &[UUID], |b| {
                format!("SELECT agent_id FROM {} WHERE id OPERATOR(pg_catalog.=) $1", b.table)
            })?;
            let agent: Uuid = client
                .select(&*agent_stmt, Some(1), &[job.into()])
                .map_err(spi)?
                .pipe_first()?
                .ok_or_else(|| b.no_such_job(job))?;
            forget_old_reservations(client, &b)?;
            as_definer(|| reserve_as_definer(client, &b, job, agent, model, estimate_amount))
        })
    })
}

/// The rest of `reserve_budget()`: the usage row, reservations and budget are the extension's
/// own, written as the definer role.
fn reserve_as_definer(
    client: &mut SpiClient<'_>,
    b: &Binding,
    job: Uuid,
    agent: Uuid,
    model: &str,
    estimate_amount: Amount,
) -> Result<(Option<Uuid>, Verdict), CbError> {
    {
        {
            // Lock the job's usage row (created on first use): reservations of one job queue here.
            let lock = b.statement(client, "spend.lock", Access::Write, &[UUID], |_| {
                "SELECT (input_tokens OPERATOR(pg_catalog.+) cache_write_tokens OPERATOR(pg_catalog.+) cache_read_tokens)::pg_catalog.int8,
                        cost_usd::pg_catalog.text
                   FROM cortex_buffer.job_usage WHERE job_id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE"
                    .to_owned()
            })?;
            let mut used = None;
            for _ in 0..2 {
                let rows = client.update(&*lock, Some(1), &[job.into()]).map_err(spi)?;
                if let Some(r) = rows.into_iter().next() {
                    used = Some(Amount {
                        input_tokens: r.get(1).map_err(spi)?.unwrap_or(0),
                        cost: decimal_at(&r, 2)?.unwrap_or(Decimal::ZERO),
                    });
                    break;
                }
                client
                    .update(
                        "INSERT INTO cortex_buffer.job_usage (job_id) VALUES ($1) ON CONFLICT (job_id) DO NOTHING",
                        None,
                        &[job.into()],
                    )
                    .map_err(spi)?;
            }
            let used = used.ok_or_else(|| CbError::internal("could not lock the job's usage row"))?;

            // A fresh snapshot, taken after the lock: every reservation committed before it.
            let held = b.statement(client, "spend.held", Access::Read, &[UUID, UUID], |_| {
                "SELECT (SELECT max_input_tokens_per_job FROM cortex_buffer.agent_budget WHERE agent_id OPERATOR(pg_catalog.=) $2),
                        (SELECT max_cost_usd_per_job::pg_catalog.text FROM cortex_buffer.agent_budget
                          WHERE agent_id OPERATOR(pg_catalog.=) $2),
                        coalesce(pg_catalog.sum(input_tokens), 0)::pg_catalog.int8,
                        coalesce(pg_catalog.sum(cost_usd), 0)::pg_catalog.text
                   FROM cortex_buffer.budget_reservation
                  WHERE job_id OPERATOR(pg_catalog.=) $1 AND settled_at IS NULL AND released_at IS NULL
                    AND expires_at OPERATOR(pg_catalog.>) pg_catalog.now()"
                    .to_owned()
            })?;
            let rows = client.select(&*held, Some(1), &[job.into(), agent.into()]).map_err(spi)?;
            let r = rows.into_iter().next().ok_or_else(|| CbError::internal("no reservation totals"))?;
            let limits = limits_at(&r, 1)?;
            let reserved = Amount {
                input_tokens: r.get(3).map_err(spi)?.unwrap_or(0),
                cost: decimal_at(&r, 4)?.unwrap_or(Decimal::ZERO),
            };
            let verdict = budget::admit(&used, &reserved, &estimate_amount, &limits)?;
            if !verdict.allowed {
                return Ok((None, verdict));
            }
            let insert =
                b.statement(client, "spend.reserve", Access::Write, &[UUID, UUID, TEXT, INT8, TEXT, INT8], |_| {
                    "INSERT INTO cortex_buffer.budget_reservation
                        (reservation_id, job_id, agent_id, model, input_tokens, cost_usd, expires_at, forget_at)
                 VALUES (pg_catalog.gen_random_uuid(), $1, $2, $3, $4, $5::pg_catalog.numeric,
                         pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6),
                         pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(days => 1, secs => $6))
                 RETURNING reservation_id"
                        .to_owned()
                })?;
            let id: Option<Uuid> = client
                .update(
                    &*insert,
                    Some(1),
                    &[
                        job.into(),
                        agent.into(),
                        model.into(),
                        estimate_amount.input_tokens.into(),
                        estimate_amount.cost.to_string().into(),
                        guc::reservation_timeout_seconds().into(),
                    ],
                )
                .map_err(spi)?
                .pipe_first()?;
            Ok((id, verdict))
        }
    }
}

/// How a reservation stopped holding budget.
enum Closed {
    Settled,
    Released,
}

/// Marks a (locked) reservation closed; it is kept a day for late or repeated settlements.
fn close_reservation(client: &mut SpiClient<'_>, reservation: Uuid, how: Closed) -> Result<(), CbError> {
    let column = match how {
        Closed::Settled => "settled_at",
        Closed::Released => "released_at",
    };
    client
        .update(
            &format!(
                "UPDATE cortex_buffer.budget_reservation
                    SET {column} = pg_catalog.now(), forget_at = pg_catalog.now() OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval
                  WHERE reservation_id OPERATOR(pg_catalog.=) $1"
            ),
            None,
            &[reservation.into()],
        )
        .map_err(spi)?;
    Ok(())
}

fn no_such_reservation(id: Uuid) -> CbError {
    CbError::new(SqlState::NoDataFound, format!("reservation {id} does not exist (or was closed more than a day ago)"))
        .with_hint("Record the call's usage with record_usage(job_id, model, usage, request_id) instead.")
}

/// `settle_usage()`: records the call a reservation was for, once, and closes the reservation.
/// Runs `f` on a reservation with the authority of its job (see `job::authority`): an agent's
/// session may settle or release its own job's reservations only.
pub fn for_reservation<R>(reservation: Uuid, f: impl FnOnce() -> Result<R, CbError>) -> Result<R, CbError> {
    // An agent's session looks the reservation up in its own job only (a token is checked
    // first): another job's is, for it, not there, and the error names no job.
    crate::job::authority::in_own_job(|own| {
        let Some(own) = own else { return f() };
        let job = pinned(|| {
            as_definer(|| {
                Spi::connect(|client| {
                    let rows = client
                        .select(
                            "SELECT job_id FROM cortex_buffer.budget_reservation WHERE reservation_id OPERATOR(pg_catalog.=) $1",
                            Some(1),
                            &[reservation.into()],
                        )
                        .map_err(spi)?;
                    match rows.into_iter().next() {
                        Some(r) => r.get::<Uuid>(1).map_err(spi),
                        None => Ok(None),
                    }
                })
            })
        })?;
        match job {
            Some(job) if *job.as_bytes() == own => f(),
            _ => Err(no_such_reservation(reservation)),
        }
    })
}

pub fn settle(reservation: Uuid, actual: &Usage, request_id: Option<&str>) -> Result<Totals, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let stmt = b.statement(client, "spend.settle.lock", Access::Write, &[UUID], |_| {
                "SELECT job_id, model, settled_at IS NOT NULL, expires_at OPERATOR(pg_catalog.<=) pg_catalog.now(),
                        expires_at::pg_catalog.text, pg_catalog.now()
                   FROM cortex_buffer.budget_reservation WHERE reservation_id OPERATOR(pg_catalog.=) $1 FOR UPDATE"
                    .to_owned()
            })?;
            let rows = as_definer(|| client.update(&*stmt, Some(1), &[reservation.into()]).map_err(spi))?;
            let r = rows.into_iter().next().ok_or_else(|| no_such_reservation(reservation))?;
            let job: Uuid = r.get(1).map_err(spi)?.ok_or_else(|| no_such_reservation(reservation))?;
            let model: String = r.get(2).map_err(spi)?.unwrap_or_default();
            let settled: bool = r.get(3).map_err(spi)?.unwrap_or(false);
            let expired: bool = r.get(4).map_err(spi)?.unwrap_or(false);
            let expires_at: String = r.get(5).map_err(spi)?.unwrap_or_default();
            let now: TimestampWithTimeZone =
                r.get(6).map_err(spi)?.ok_or_else(|| CbError::internal("now() is NULL"))?;
            if settled {
                return current_totals(client, &b, job, true);
            }
            if expired {
                notice(
                    format!("reservation {reservation} expired at {expires_at}; the call is recorded all the same"),
                    Some("Raise cortex_buffer.reservation_timeout if calls take longer than it."),
                );
            }
            let totals = record_in(
                client,
                &b,
                &Call { job, model: &model, usage: *actual, request_id, at: now, reservation: Some(reservation) },
            )?;
            as_definer(|| close_reservation(client, reservation, Closed::Settled))?;
            Ok(totals)
        })
    })
}

/// `release_reservation()`: gives the budget back for a call that was never made. False when
/// the reservation was already settled or released.
pub fn release(reservation: Uuid) -> Result<bool, CbError> {
    pinned(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                let rows = client
                    .update(
                        "SELECT settled_at IS NULL AND released_at IS NULL
                   FROM cortex_buffer.budget_reservation WHERE reservation_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
                        Some(1),
                        &[reservation.into()],
                    )
                    .map_err(spi)?;
                let open: bool = rows
                    .into_iter()
                    .next()
                    .ok_or_else(|| no_such_reservation(reservation))?
                    .get(1)
                    .map_err(spi)?
                    .unwrap_or(false);
                if open {
                    close_reservation(client, reservation, Closed::Released)?;
                }
                Ok(open)
            })
        })
    })
}
