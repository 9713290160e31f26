//! The circuit breaker through SPI: one row per agent in `cortex_buffer.circuit`, locked for
//! every change; the decisions are the pure `circuit` module's.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use crate::pg::time::{interval_us, timestamptz, unix_us};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::liveness::circuit::{Canary, Circuit, Params, State};

use crate::pg::spi_util::{spi, FirstValue};

/// What `circuit_state()` and `record_outcome()` return.
pub struct Report {
    pub state: State,
    pub failures_in_window: i32,
    pub open_until: Option<TimestampWithTimeZone>,
}

fn params(client: &SpiClient<'_>, agent: Uuid) -> Result<Params, CbError> {
    let mut rows = client
        .select(
            "SELECT failure_threshold, failure_window, cooldown, canary_lease
               FROM cortex_buffer.circuit_config WHERE agent_id OPERATOR(pg_catalog.=) $1",
            Some(1),
            &[agent.into()],
        )
        .map_err(spi)?;
    let Some(r) = rows.next() else { return Ok(Params::default()) };
    let d = Params::default();
    let us = |i: usize| -> Result<Option<i64>, CbError> { Ok(interval_us(r.get::<Interval>(i).map_err(spi)?)) };
    Ok(Params {
        threshold: u32::try_from(r.get::<i32>(1).map_err(spi)?.unwrap_or(3)).unwrap_or(d.threshold),
        window_us: us(2)?.unwrap_or(d.window_us),
        cooldown_us: us(3)?.unwrap_or(d.cooldown_us),
        lease_us: us(4)?.unwrap_or(d.lease_us),
    })
}

/// The transaction's `now()`.
fn now_us(client: &SpiClient<'_>) -> Result<i64, CbError> {
    let now: Option<TimestampWithTimeZone> =
        client.select("SELECT pg_catalog.now()", Some(1), &[]).map_err(spi)?.pipe_first()?;
    unix_us(now).ok_or_else(|| CbError::internal("now() is not a finite time"))
}

/// The agent's breaker and the transaction's `now()`, locked for update when `lock` (created
/// on first use). Locking goes through `update`, which takes SPI out of read-only mode.
fn load(client: &mut SpiClient<'_>, agent: Uuid, lock: bool) -> Result<(Circuit, i64), CbError> {
    let sql = format!(
        "SELECT open, closed_since, open_until, canary_job_id, canary_lease_until, pg_catalog.now()
           FROM cortex_buffer.circuit WHERE agent_id OPERATOR(pg_catalog.=) $1 {}",
        if lock { "FOR UPDATE" } else { "" }
    );
    for attempt in 0..2 {
        let mut rows = if lock {
            client.update(sql.as_str(), Some(1), &[agent.into()]).map_err(spi)?
        } else {
            client.select(sql.as_str(), Some(1), &[agent.into()]).map_err(spi)?
        };
        if let Some(r) = rows.next() {
            let time = |i: usize| -> Result<Option<i64>, CbError> {
                Ok(unix_us(r.get::<TimestampWithTimeZone>(i).map_err(spi)?))
            };
            let now = time(6)?.unwrap_or(0);
            let canary = match (r.get::<Uuid>(4).map_err(spi)?, time(5)?) {
                (Some(job), Some(lease_until_us)) => Some(Canary { job: *job.as_bytes(), lease_until_us }),
                _ => None,
            };
            let c = Circuit {
                open: r.get(1).map_err(spi)?.unwrap_or(false),
                closed_since_us: time(2)?.unwrap_or(now),
                open_until_us: time(3)?,
                canary,
            };
            return Ok((c, now));
        }
        if !lock || attempt > 0 {
            let now = now_us(client)?;
            return Ok((Circuit::closed(now), now));
        }
        client
            .update(
                "INSERT INTO cortex_buffer.circuit (agent_id) VALUES ($1) ON CONFLICT (agent_id) DO NOTHING",
                None,
                &[agent.into()],
            )
            .map_err(spi)?;
    }
    Err(CbError::internal("circuit row vanished while locking it"))
}

fn store(client: &mut SpiClient<'_>, agent: Uuid, before: &Circuit, after: &Circuit) -> Result<(), CbError> {
    if before == after {
        return Ok(());
    }
    // Opening from closed, or re-opening after a failed canary, is a trip.
    let newly_open = after.open && (!before.open || after.open_until_us != before.open_until_us);
    client
        .update(
            "UPDATE cortex_buffer.circuit SET
                    open = $2, closed_since = $3, open_until = $4, canary_job_id = $5, canary_lease_until = $6,
                    trips = trips OPERATOR(pg_catalog.+) $7::pg_catalog.int4, updated_at = pg_catalog.now()
              WHERE agent_id OPERATOR(pg_catalog.=) $1",
            None,
            &[
                agent.into(),
                after.open.into(),
                timestamptz(Some(after.closed_since_us)).into(),
                timestamptz(after.open_until_us).into(),
                after.canary.map(|c| Uuid::from_bytes(c.job)).into(),
                timestamptz(after.canary.map(|c| c.lease_until_us)).into(),
                i32::from(newly_open).into(),
            ],
        )
        .map_err(spi)?;
    Ok(())
}

fn failures_in_window(client: &SpiClient<'_>, agent: Uuid, p: &Params, now: i64) -> Result<i32, CbError> {
    let n: Option<i64> = client
        .select(
            "SELECT pg_catalog.count(*) FROM cortex_buffer.circuit_outcome
              WHERE agent_id OPERATOR(pg_catalog.=) $1 AND counted AND NOT success
                AND recorded_at OPERATOR(pg_catalog.>) $2",
            None,
            &[agent.into(), timestamptz(Some(now.saturating_sub(p.window_us))).into()],
        )
        .map_err(spi)?
        .pipe_first()?;
    Ok(i32::try_from(n.unwrap_or(0)).unwrap_or(i32::MAX))
}

fn report(client: &SpiClient<'_>, agent: Uuid, c: &Circuit, now: i64, p: &Params) -> Result<Report, CbError> {
    let open_until = timestamptz(c.open_until_us.filter(|_| c.open));
    Ok(Report { state: c.state(now), failures_in_window: failures_in_window(client, agent, p, now)?, open_until })
}

/// Whether the agent may start `job` now; records the admission. (The breaker lives in the
/// extension's own tables: all of it runs as the definer role.)
pub fn admit(agent: Uuid, job: Uuid) -> Result<bool, CbError> {
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                let p = params(client, agent)?;
                let (before, now) = load(client, agent, true)?;
                let (admitted, after) = before.admit(now, *job.as_bytes(), &p);
                store(client, agent, &before, &after)?;
                if admitted {
                    let canary = after.canary.is_some_and(|c| c.job == *job.as_bytes());
                    client
                    .update(
                        "INSERT INTO cortex_buffer.circuit_admission AS a (job_id, agent_id, canary) VALUES ($1, $2, $3)
                         ON CONFLICT (job_id) DO UPDATE SET canary = a.canary OR excluded.canary",
                        None,
                        &[job.into(), agent.into(), canary.into()],
                    )
                    .map_err(spi)?;
                }
                Ok(admitted)
            })
        })
    })
}

/// Records a job's outcome and returns the breaker afterwards.
pub fn record_outcome(agent: Uuid, job: Uuid, success: bool) -> Result<Report, CbError> {
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                let p = params(client, agent)?;
                let (before, now) = load(client, agent, true)?;
                // Read after the lock: a fresh snapshot sees every outcome recorded before ours.
                let admitted_at: Option<TimestampWithTimeZone> = client
                .update(
                    "DELETE FROM cortex_buffer.circuit_admission WHERE job_id OPERATOR(pg_catalog.=) $1 RETURNING admitted_at",
                    None,
                    &[job.into()],
                )
                .map_err(spi)?
                .pipe_first()?;
                let admitted_at = unix_us(admitted_at);
                let counted = before.counts(success, admitted_at);
                client
                .update(
                    "INSERT INTO cortex_buffer.circuit_outcome (agent_id, job_id, success, counted) VALUES ($1, $2, $3, $4)",
                    None,
                    &[agent.into(), job.into(), success.into(), counted.into()],
                )
                .map_err(spi)?;
                let failures = failures_in_window(client, agent, &p, now)?;
                let after =
                    before.after_outcome(now, *job.as_bytes(), success, u32::try_from(failures).unwrap_or(0), &p);
                store(client, agent, &before, &after)?;
                // Outcomes older than the window can never count again.
                client
                    .update(
                        "DELETE FROM cortex_buffer.circuit_outcome
                      WHERE agent_id OPERATOR(pg_catalog.=) $1 AND recorded_at OPERATOR(pg_catalog.<) $2",
                        None,
                        &[agent.into(), timestamptz(Some(now.saturating_sub(p.window_us))).into()],
                    )
                    .map_err(spi)?;
                report(client, agent, &after, now, &p)
            })
        })
    })
}

/// The agent's breaker as it stands.
pub fn state(agent: Uuid) -> Result<Report, CbError> {
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                let p = params(client, agent)?;
                let (c, now) = load(client, agent, false)?;
                report(client, agent, &c, now, &p)
            })
        })
    })
}
