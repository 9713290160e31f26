//! The circuit breaker through SPI: one row per agent in `cortex_buffer.circuit`, locked for
//! every change; the decisions are the pure `circuit` module's.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::circuit::{Canary, Circuit, Params, State};
use crate::error::CbError;
use crate::pg::planner::with_index_scans;

use crate::pg::spi_util::{spi, FirstValue};

/// What `circuit_state()` and `record_outcome()` return.
pub struct Report {
    pub state: State,
    pub failures_in_window: i32,
    pub open_until: Option<TimestampWithTimeZone>,
}

const US: &str = "(extract(epoch FROM {}) * 1000000)::int8";

fn us(expr: &str) -> String {
    US.replace("{}", expr)
}

fn params(client: &SpiClient<'_>, agent: Uuid) -> Result<Params, CbError> {
    let sql = format!(
        "SELECT failure_threshold, {}, {}, {} FROM cortex_buffer.circuit_config WHERE agent_id = $1",
        us("failure_window"),
        us("cooldown"),
        us("canary_lease")
    );
    let mut rows = client.select(sql.as_str(), Some(1), &[agent.into()]).map_err(spi)?;
    let Some(r) = rows.next() else { return Ok(Params::default()) };
    let d = Params::default();
    Ok(Params {
        threshold: u32::try_from(r.get::<i32>(1).map_err(spi)?.unwrap_or(3)).unwrap_or(d.threshold),
        window_us: r.get(2).map_err(spi)?.unwrap_or(d.window_us),
        cooldown_us: r.get(3).map_err(spi)?.unwrap_or(d.cooldown_us),
        lease_us: r.get(4).map_err(spi)?.unwrap_or(d.lease_us),
    })
}

/// The agent's breaker and the transaction's `now()`, locked for update when `lock` (created
/// on first use). Locking goes through `update`, which takes SPI out of read-only mode.
fn load(client: &mut SpiClient<'_>, agent: Uuid, lock: bool) -> Result<(Circuit, i64), CbError> {
    let sql = format!(
        "SELECT open, {}, {}, canary_job_id, {}, {} FROM cortex_buffer.circuit WHERE agent_id = $1 {}",
        us("closed_since"),
        us("open_until"),
        us("canary_lease_until"),
        us("now()"),
        if lock { "FOR UPDATE" } else { "" }
    );
    for attempt in 0..2 {
        let mut rows = if lock {
            client.update(sql.as_str(), Some(1), &[agent.into()]).map_err(spi)?
        } else {
            client.select(sql.as_str(), Some(1), &[agent.into()]).map_err(spi)?
        };
        if let Some(r) = rows.next() {
            let now: i64 = r.get(6).map_err(spi)?.unwrap_or(0);
            let canary = match (r.get::<Uuid>(4).map_err(spi)?, r.get::<i64>(5).map_err(spi)?) {
                (Some(job), Some(lease_until_us)) => Some(Canary { job: *job.as_bytes(), lease_until_us }),
                _ => None,
            };
            let c = Circuit {
                open: r.get(1).map_err(spi)?.unwrap_or(false),
                closed_since_us: r.get(2).map_err(spi)?.unwrap_or(now),
                open_until_us: r.get(3).map_err(spi)?,
                canary,
            };
            return Ok((c, now));
        }
        if !lock || attempt > 0 {
            let now: Option<i64> =
                client.select(&*format!("SELECT {}", us("now()")), Some(1), &[]).map_err(spi)?.pipe_first()?;
            let now = now.unwrap_or(0);
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
                    open = $2,
                    closed_since = timestamptz 'epoch' + $3 * interval '1 microsecond',
                    open_until = timestamptz 'epoch' + $4 * interval '1 microsecond',
                    canary_job_id = $5,
                    canary_lease_until = timestamptz 'epoch' + $6 * interval '1 microsecond',
                    trips = trips + $7::int,
                    updated_at = now()
              WHERE agent_id = $1",
            None,
            &[
                agent.into(),
                after.open.into(),
                after.closed_since_us.into(),
                after.open_until_us.into(),
                after.canary.map(|c| Uuid::from_bytes(c.job)).into(),
                after.canary.map(|c| c.lease_until_us).into(),
                i32::from(newly_open).into(),
            ],
        )
        .map_err(spi)?;
    Ok(())
}

fn failures_in_window(client: &SpiClient<'_>, agent: Uuid, p: &Params) -> Result<i32, CbError> {
    let n: Option<i64> = client
        .select(
            "SELECT count(*) FROM cortex_buffer.circuit_outcome
              WHERE agent_id = $1 AND counted AND NOT success AND recorded_at > now() - $2 * interval '1 microsecond'",
            None,
            &[agent.into(), p.window_us.into()],
        )
        .map_err(spi)?
        .pipe_first()?;
    Ok(i32::try_from(n.unwrap_or(0)).unwrap_or(i32::MAX))
}

fn report(client: &SpiClient<'_>, agent: Uuid, c: &Circuit, now: i64, p: &Params) -> Result<Report, CbError> {
    let open_until = match c.open_until_us.filter(|_| c.open) {
        Some(us) => client
            .select("SELECT timestamptz 'epoch' + $1 * interval '1 microsecond'", Some(1), &[us.into()])
            .map_err(spi)?
            .pipe_first()?,
        None => None,
    };
    Ok(Report { state: c.state(now), failures_in_window: failures_in_window(client, agent, p)?, open_until })
}

/// Whether the agent may start `job` now; records the admission.
pub fn admit(agent: Uuid, job: Uuid) -> Result<bool, CbError> {
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let p = params(client, agent)?;
            let (before, now) = load(client, agent, true)?;
            let (admitted, after) = before.admit(now, *job.as_bytes(), &p);
            store(client, agent, &before, &after)?;
            if admitted {
                let canary = after.canary.is_some_and(|c| c.job == *job.as_bytes());
                client
                    .update(
                        "INSERT INTO cortex_buffer.circuit_admission (job_id, agent_id, canary) VALUES ($1, $2, $3)
                         ON CONFLICT (job_id) DO UPDATE SET canary = cortex_buffer.circuit_admission.canary OR excluded.canary",
                        None,
                        &[job.into(), agent.into(), canary.into()],
                    )
                    .map_err(spi)?;
            }
            Ok(admitted)
        })
    })
}

/// Records a job's outcome and returns the breaker afterwards.
pub fn record_outcome(agent: Uuid, job: Uuid, success: bool) -> Result<Report, CbError> {
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let p = params(client, agent)?;
            let (before, now) = load(client, agent, true)?;
            // Read after the lock: a fresh snapshot sees every outcome recorded before ours.
            let admitted_at: Option<i64> = client
                .update(
                    &*format!(
                        "DELETE FROM cortex_buffer.circuit_admission WHERE job_id = $1 RETURNING {}",
                        us("admitted_at")
                    ),
                    None,
                    &[job.into()],
                )
                .map_err(spi)?
                .pipe_first()?;
            let counted = before.counts(success, admitted_at);
            client
                .update(
                    "INSERT INTO cortex_buffer.circuit_outcome (agent_id, job_id, success, counted) VALUES ($1, $2, $3, $4)",
                    None,
                    &[agent.into(), job.into(), success.into(), counted.into()],
                )
                .map_err(spi)?;
            let failures = failures_in_window(client, agent, &p)?;
            let after = before.after_outcome(now, *job.as_bytes(), success, u32::try_from(failures).unwrap_or(0), &p);
            store(client, agent, &before, &after)?;
            // Outcomes older than the window can never count again.
            client
                .update(
                    "DELETE FROM cortex_buffer.circuit_outcome WHERE agent_id = $1 AND recorded_at < now() - $2 * interval '1 microsecond'",
                    None,
                    &[agent.into(), p.window_us.into()],
                )
                .map_err(spi)?;
            report(client, agent, &after, now, &p)
        })
    })
}

/// The agent's breaker as it stands.
pub fn state(agent: Uuid) -> Result<Report, CbError> {
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let p = params(client, agent)?;
            let (c, now) = load(client, agent, false)?;
            report(client, agent, &c, now, &p)
        })
    })
}
