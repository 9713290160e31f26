//! Liveness through SPI on the bound job table: heartbeats, the zombie reaper, idle paused
//! jobs, crash records and retry decisions. Decisions are the pure `retry` module's; this only
//! reads and writes rows, in batches.

use std::collections::HashMap;

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::job::authority::Attempt;
use crate::job::binding::{self, Access, Binding};
use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use crate::pg::raise::notice;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::liveness::retry::{decide, Crash, Decision, JobFacts};

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
const UUID_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDARRAYOID);
const INTERVAL: PgOid = PgOid::BuiltIn(PgBuiltInOids::INTERVALOID);
const INT4: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4OID);
const TEXT_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);

use crate::pg::spi_util::{spi, FirstValue};

/// Records a heartbeat. True while the job is RUNNING or WAITING_FOR_APPROVAL (a paused agent
/// keeps beating); false otherwise: the agent must stop. Also notes when a paused job was first
/// seen waiting, and forgets it once the job runs again.
pub fn heartbeat(job: Uuid, may: Attempt) -> Result<bool, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            // The job row, in the caller's rights (an agent's: the definer's). Its attempt is
            // checked against the agent's token here, on the row the beat wrote: a mismatch
            // raises, which undoes the beat.
            let stmt = b.statement(client, "liveness.heartbeat", Access::Write, &[UUID], |b| {
                format!(
                    "UPDATE {t} SET heartbeat_at = pg_catalog.now()
                      WHERE id OPERATOR(pg_catalog.=) $1
                        AND (status OPERATOR(pg_catalog.=) 'RUNNING' OR status OPERATOR(pg_catalog.=) 'WAITING_FOR_APPROVAL')
                     RETURNING status::pg_catalog.text, attempt",
                    t = b.table
                )
            })?;
            let rows = client.update(&*stmt, None, &[job.into()]).map_err(spi)?;
            let row = match rows.into_iter().next() {
                Some(r) => Some((r.get::<String>(1).map_err(spi)?, r.get::<i32>(2).map_err(spi)?)),
                None => None,
            };
            let Some((Some(status), attempt)) = row else { return Ok(false) };
            // A NULL attempt is 0, as job_token() issues it.
            may.matches(Some(attempt.unwrap_or(0)))?;
            // When it was first seen waiting: the extension's own table, as the definer role.
            let key = if status == "WAITING_FOR_APPROVAL" { "liveness.wait.note" } else { "liveness.wait.forget" };
            let note = b.statement(client, key, Access::Write, &[UUID], |_| {
                if status == "WAITING_FOR_APPROVAL" {
                    "INSERT INTO cortex_buffer.job_wait (job_id, waiting_since) VALUES ($1, pg_catalog.now())
                     ON CONFLICT (job_id) DO NOTHING"
                        .to_owned()
                } else {
                    "DELETE FROM cortex_buffer.job_wait WHERE job_id OPERATOR(pg_catalog.=) $1".to_owned()
                }
            })?;
            as_definer(|| client.update(&*note, None, &[job.into()]).map_err(spi).map(|_| ()))?;
            Ok(true)
        })
    })
}

/// One job the reaper transitioned.
pub struct Reaped {
    pub job_id: Uuid,
    pub agent_id: Uuid,
    pub attempt: i32,
    pub new_status: &'static str,
    pub retry_after: Option<Interval>,
    pub last_heartbeat: Option<TimestampWithTimeZone>,
}

struct Zombie {
    id: Uuid,
    agent_id: Uuid,
    attempt: i32,
    max_attempts: i32,
    last_heartbeat: Option<TimestampWithTimeZone>,
}

fn zombies_from(rows: pgrx::spi::SpiTupleTable<'_>, out: &mut Vec<Zombie>) -> Result<(), CbError> {
    for r in rows {
        let (Some(id), Some(agent_id)) = (r.get::<Uuid>(1).map_err(spi)?, r.get::<Uuid>(2).map_err(spi)?) else {
            continue;
        };
        out.push(Zombie {
            id,
            agent_id,
            attempt: r.get::<i32>(3).map_err(spi)?.unwrap_or(0),
            max_attempts: r.get::<i32>(4).map_err(spi)?.unwrap_or(0),
            last_heartbeat: r.get(5).map_err(spi)?,
        });
    }
    Ok(())
}

/// Crash histories (oldest first) of `jobs`, read after their rows were locked (as the definer
/// role: the calling roles need no privilege on `crash`).
fn crash_histories(client: &SpiClient<'_>, jobs: &[Uuid]) -> Result<HashMap<[u8; 16], Vec<Crash>>, CbError> {
    let mut out: HashMap<[u8; 16], Vec<Crash>> = HashMap::new();
    if jobs.is_empty() {
        return Ok(out);
    }
    let rows = as_definer(|| {
        client
            .select(
                "SELECT job_id, exit_code, error_message FROM cortex_buffer.crash
                  WHERE job_id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY job_id, crash_id",
                None,
                &[jobs.to_vec().into()],
            )
            .map_err(spi)
    })?;
    for r in rows {
        let Some(job) = r.get::<Uuid>(1).map_err(spi)? else { continue };
        out.entry(*job.as_bytes())
            .or_default()
            .push(Crash { exit_code: r.get(2).map_err(spi)?, error_message: r.get(3).map_err(spi)? });
    }
    Ok(out)
}

/// Reaps RUNNING jobs whose heartbeat is older than `stale_after` (or that never beat and
/// started, or were last updated, longer ago): RUNNING → FAILED → RETRYING, or → DEAD_LETTER
/// when the retry decision says so, each job once even with concurrent reapers.
pub fn reap(stale_after: Interval, max_jobs: i32) -> Result<Vec<Reaped>, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            if b.first_time("reaper index") && !b.has_reaper_index(client)? {
                notice(
                    format!(
                        "{} has no index on heartbeat_at for RUNNING jobs: reap_zombies() scans the whole table",
                        b.table
                    ),
                    Some(&format!("Create it once: {}", b.reaper_index_sql())),
                );
            }
            let zombies = find_zombies(client, &b, stale_after, max_jobs)?;
            if zombies.is_empty() {
                return Ok(Vec::new());
            }
            let decisions = decide_all(client, &zombies)?;
            record_reaping(client, &b, &zombies, &decisions)?;
            Ok(zombies
                .into_iter()
                .zip(decisions)
                .map(|(z, d)| Reaped {
                    job_id: z.id,
                    agent_id: z.agent_id,
                    attempt: z.attempt,
                    new_status: if d.retry { "RETRYING" } else { "DEAD_LETTER" },
                    retry_after: d.delay_seconds.map(|s| Interval::from_micros(s * 1_000_000)),
                    last_heartbeat: z.last_heartbeat,
                })
                .collect())
        })
    })
}

/// Up to `max_jobs` zombies, locked (skipping those another reaper holds): stale heartbeats
/// first, then heartbeats in the future, then jobs that never beat.
fn find_zombies(
    client: &mut SpiClient<'_>,
    b: &Binding,
    stale_after: Interval,
    max_jobs: i32,
) -> Result<Vec<Zombie>, CbError> {
    let limit = max_jobs.max(0);
    let mut zombies = Vec::new();
    // The literal `status = 'RUNNING'` matches the partial index's predicate.
    let stale = b.statement(client, "liveness.reap.stale", Access::Write, &[INTERVAL, INT4], |b| {
        format!(
            "SELECT id, agent_id, attempt, max_attempts, heartbeat_at FROM {t}
              WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
                AND heartbeat_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)
              ORDER BY heartbeat_at LIMIT $2 FOR UPDATE SKIP LOCKED",
            t = b.table
        )
    })?;
    zombies_from(client.update(&*stale, None, &[stale_after.into(), limit.into()]).map_err(spi)?, &mut zombies)?;
    // A heartbeat later than the server's clock (beyond the same allowance, for a clock
    // step) was not written by heartbeat(), which takes the server's clock: it must not
    // hide a job from the reaper, infinity included.
    let remaining = limit - i32::try_from(zombies.len()).unwrap_or(limit);
    if remaining > 0 {
        let future = b.statement(client, "liveness.reap.future", Access::Write, &[INTERVAL, INT4], |b| {
            format!(
                "SELECT id, agent_id, attempt, max_attempts, heartbeat_at FROM {t}
                  WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
                    AND heartbeat_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.+) $1)
                  LIMIT $2 FOR UPDATE SKIP LOCKED",
                t = b.table
            )
        })?;
        zombies_from(
            client.update(&*future, None, &[stale_after.into(), remaining.into()]).map_err(spi)?,
            &mut zombies,
        )?;
    }
    let remaining = limit - i32::try_from(zombies.len()).unwrap_or(limit);
    if remaining > 0 {
        // Grace for jobs that never beat: judged by their start or last update.
        let silent = b.statement(client, "liveness.reap.silent", Access::Write, &[INTERVAL, INT4], |b| {
            format!(
                "SELECT id, agent_id, attempt, max_attempts, heartbeat_at FROM {t}
                  WHERE status OPERATOR(pg_catalog.=) 'RUNNING' AND heartbeat_at IS NULL
                    AND greatest(started_at, updated_at) OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)
                  LIMIT $2 FOR UPDATE SKIP LOCKED",
                t = b.table
            )
        })?;
        zombies_from(
            client.update(&*silent, None, &[stale_after.into(), remaining.into()]).map_err(spi)?,
            &mut zombies,
        )?;
    }
    Ok(zombies)
}

/// Each zombie's retry decision (its crash history, this reaping a crash of its own, and its
/// budget), with the reaping recorded as a crash.
fn decide_all(client: &mut SpiClient<'_>, zombies: &[Zombie]) -> Result<Vec<Decision>, CbError> {
    let ids: Vec<Uuid> = zombies.iter().map(|z| z.id).collect();
    let mut histories = crash_histories(client, &ids)?;
    let with_agents: Vec<(Uuid, Uuid)> = zombies.iter().map(|z| (z.id, z.agent_id)).collect();
    let exhausted = as_definer(|| crate::spend::store::exhausted(client, &with_agents))?;
    let mut decisions: Vec<Decision> = Vec::with_capacity(zombies.len());
    for z in zombies {
        let mut crashes = histories.remove(z.id.as_bytes()).unwrap_or_default();
        // This reaping is a crash of its own: a zombie, without message or exit code.
        crashes.push(Crash { exit_code: None, error_message: None });
        decisions.push(decide(&JobFacts {
            attempt: z.attempt,
            max_attempts: z.max_attempts,
            budget_exhausted: exhausted.contains(z.id.as_bytes()),
            crashes,
        }));
    }

    let agents: Vec<Uuid> = zombies.iter().map(|z| z.agent_id).collect();
    let attempts: Vec<i32> = zombies.iter().map(|z| z.attempt).collect();
    as_definer(|| {
        client
            .update(
                "INSERT INTO cortex_buffer.crash (job_id, agent_id, attempt, reason)
                 SELECT j, a, n, 'zombie'
                   FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.uuid[]), pg_catalog.unnest($2::pg_catalog.uuid[]), pg_catalog.unnest($3::pg_catalog.int4[])) AS z(j, a, n)",
                None,
                &[ids.clone().into(), agents.into(), attempts.into()],
            )
            .map_err(spi)
    })?;

    Ok(decisions)
}

/// Marks each zombie FAILED with its decision in `error`, then RETRYING or DEAD_LETTER.
fn record_reaping(
    client: &mut SpiClient<'_>,
    b: &Binding,
    zombies: &[Zombie],
    decisions: &[Decision],
) -> Result<(), CbError> {
    let ids: Vec<Uuid> = zombies.iter().map(|z| z.id).collect();
    let decision_json: Vec<String> = decisions
        .iter()
        .map(|d| {
            format!(
                r#"{{"retry_decision": {{"retry": {}, "reason": "{}", "strategy": "{}", "delay_seconds": {}}}}}"#,
                d.retry,
                d.reason.label(),
                d.strategy.label(),
                d.delay_seconds.map(|s| s.to_string()).unwrap_or_else(|| "null".into())
            )
        })
        .collect();
    let fail = b.statement(client, "liveness.reap.fail", Access::Write, &[UUID_ARRAY, TEXT_ARRAY], |b| {
        format!(
            "UPDATE {t} AS j SET status = 'FAILED',
                    error = CASE WHEN pg_catalog.jsonb_typeof(j.error) OPERATOR(pg_catalog.=) 'object' THEN j.error
                                 WHEN j.error IS NULL THEN '{{}}'::pg_catalog.jsonb
                                 ELSE pg_catalog.jsonb_build_object('previous', j.error) END
                            OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                                   'reason', 'zombie',
                                   'last_heartbeat', j.heartbeat_at,
                                   'stale_for', CASE WHEN j.heartbeat_at OPERATOR(pg_catalog.>) pg_catalog.now() THEN NULL
                                                ELSE (pg_catalog.now() OPERATOR(pg_catalog.-)
                                                      coalesce(j.heartbeat_at, greatest(j.started_at, j.updated_at)))::pg_catalog.text END,
                                   'reaped_at', pg_catalog.now(),
                                   'attempt', j.attempt)
                            OPERATOR(pg_catalog.||) CASE WHEN j.heartbeat_at OPERATOR(pg_catalog.>) pg_catalog.now()
                                 THEN pg_catalog.jsonb_build_object('heartbeat_in_future', true)
                                 ELSE '{{}}'::pg_catalog.jsonb END
                            OPERATOR(pg_catalog.||) d.decision::pg_catalog.jsonb
               FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.uuid[]), pg_catalog.unnest($2::pg_catalog.text[])) AS d(id, decision)
              WHERE j.id OPERATOR(pg_catalog.=) d.id",
            t = b.table
        )
    })?;
    client.update(&*fail, None, &[ids.clone().into(), decision_json.into()]).map_err(spi)?;

    let retry_ids: Vec<Uuid> = ids.iter().zip(decisions).filter(|(_, d)| d.retry).map(|(id, _)| *id).collect();
    let dead_ids: Vec<Uuid> = ids.iter().zip(decisions).filter(|(_, d)| !d.retry).map(|(id, _)| *id).collect();
    // Two steps, as the transition trigger requires: FAILED → RETRYING | DEAD_LETTER.
    if !retry_ids.is_empty() {
        let retry = b.statement(client, "liveness.reap.retry", Access::Write, &[UUID_ARRAY], |b| {
            format!("UPDATE {} SET status = 'RETRYING' WHERE id OPERATOR(pg_catalog.=) ANY ($1)", b.table)
        })?;
        client.update(&*retry, None, &[retry_ids.into()]).map_err(spi)?;
    }
    if !dead_ids.is_empty() {
        let dead = b.statement(client, "liveness.reap.dead", Access::Write, &[UUID_ARRAY], |b| {
            format!(
                "UPDATE {} SET status = 'DEAD_LETTER', completed_at = pg_catalog.now() WHERE id OPERATOR(pg_catalog.=) ANY ($1)",
                b.table
            )
        })?;
        client.update(&*dead, None, &[dead_ids.into()]).map_err(spi)?;
    }

    Ok(())
}

/// Paused jobs waiting longer than `idle_after`, measured from when heartbeat() first saw them
/// waiting (else from `updated_at`). Forgets first-seen times of jobs no longer waiting.
pub fn idle_paused(idle_after: Interval) -> Result<Vec<(Uuid, Uuid, TimestampWithTimeZone)>, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            // The paused jobs, in the caller's rights (the partial index on WAITING_FOR_APPROVAL).
            let stmt = b.statement(client, "liveness.idle", Access::Read, &[], |b| {
                format!(
                    "SELECT id, agent_id, updated_at FROM {t} WHERE status OPERATOR(pg_catalog.=) 'WAITING_FOR_APPROVAL'",
                    t = b.table
                )
            })?;
            let mut waiting: Vec<(Uuid, Uuid, TimestampWithTimeZone)> = Vec::new();
            for r in client.select(&*stmt, None, &[]).map_err(spi)? {
                if let (Some(id), Some(agent), Some(updated)) =
                    (r.get(1).map_err(spi)?, r.get(2).map_err(spi)?, r.get(3).map_err(spi)?)
                {
                    waiting.push((id, agent, updated));
                }
            }
            // When each was first seen waiting; the others are forgotten (definer role).
            let ids: Vec<Uuid> = waiting.iter().map(|w| w.0).collect();
            let seen = b.statement(client, "liveness.idle.seen", Access::Write, &[UUID_ARRAY, INTERVAL], |_| {
                "WITH resumed AS (
                     DELETE FROM cortex_buffer.job_wait WHERE NOT (job_id OPERATOR(pg_catalog.=) ANY ($1))
                 )
                 SELECT job_id, waiting_since, waiting_since OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $2)
                   FROM cortex_buffer.job_wait WHERE job_id OPERATOR(pg_catalog.=) ANY ($1)"
                    .to_owned()
            })?;
            let mut since: HashMap<[u8; 16], (TimestampWithTimeZone, bool)> = HashMap::new();
            let rows = as_definer(|| client.update(&*seen, None, &[ids.into(), idle_after.into()]).map_err(spi))?;
            for r in rows {
                if let (Some(id), Some(at), Some(idle)) = (
                    r.get::<Uuid>(1).map_err(spi)?,
                    r.get::<TimestampWithTimeZone>(2).map_err(spi)?,
                    r.get::<bool>(3).map_err(spi)?,
                ) {
                    since.insert(*id.as_bytes(), (at, idle));
                }
            }
            // Jobs never seen waiting by heartbeat() are measured from updated_at.
            let cutoff = b.statement(client, "liveness.idle.cutoff", Access::Read, &[INTERVAL], |_| {
                "SELECT pg_catalog.now() OPERATOR(pg_catalog.-) $1".to_owned()
            })?;
            let cutoff: Option<TimestampWithTimeZone> =
                client.select(&*cutoff, Some(1), &[idle_after.into()]).map_err(spi)?.pipe_first()?;
            let mut out: Vec<(Uuid, Uuid, TimestampWithTimeZone)> = waiting
                .into_iter()
                .filter_map(|(id, agent, updated)| match since.get(id.as_bytes()) {
                    Some((at, idle)) => idle.then_some((id, agent, *at)),
                    None => cutoff.is_some_and(|c| updated < c).then_some((id, agent, updated)),
                })
                .collect();
            out.sort_by_key(|(_, _, at)| *at);
            Ok(out)
        })
    })
}

/// What the control plane reports about a crashed attempt.
pub struct CrashReport {
    pub exit_code: Option<i32>,
    pub error_message: Option<String>,
    pub lifecycle_state: Option<String>,
    pub step_index: Option<i32>,
    pub last_tool: Option<String>,
    pub tokens: Option<crate::pg::jsonb::RawJsonb>,
}

/// Appends a crash record for the job's current attempt; returns its id.
pub fn record_crash(job: Uuid, c: CrashReport) -> Result<i64, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let stmt = b.statement(
                client,
                "liveness.record_crash",
                Access::Write,
                &[
                    UUID,
                    INT4,
                    PgOid::BuiltIn(PgBuiltInOids::TEXTOID),
                    PgOid::BuiltIn(PgBuiltInOids::TEXTOID),
                    INT4,
                    PgOid::BuiltIn(PgBuiltInOids::TEXTOID),
                    PgOid::BuiltIn(PgBuiltInOids::JSONBOID),
                    UUID,
                    INT4,
                ],
                |_| {
                    "INSERT INTO cortex_buffer.crash
                            (job_id, agent_id, attempt, reason, exit_code, error_message, lifecycle_state, step_index, last_tool, tokens)
                     VALUES ($1, $8, $9, 'crash', $2, $3, $4, $5, $6, $7)
                     RETURNING crash_id"
                        .to_owned()
                },
            )?;
            // The job's agent and attempt, in the caller's rights; the record, as the definer.
            let job_row = b.statement(client, "liveness.crash.job", Access::Read, &[UUID], |b| {
                format!("SELECT agent_id, attempt FROM {} WHERE id OPERATOR(pg_catalog.=) $1", b.table)
            })?;
            let mut rows = client.select(&*job_row, Some(1), &[job.into()]).map_err(spi)?;
            let row = rows.next().ok_or_else(|| b.no_such_job(job))?;
            let agent: Option<Uuid> = row.get(1).map_err(spi)?;
            let attempt: Option<i32> = row.get(2).map_err(spi)?;
            let args = [
                job.into(),
                c.exit_code.into(),
                c.error_message.into(),
                c.lifecycle_state.into(),
                c.step_index.into(),
                c.last_tool.into(),
                c.tokens.into(),
                agent.into(),
                attempt.into(),
            ];
            let id: Option<i64> = as_definer(|| client.update(&*stmt, None, &args).map_err(spi)?.pipe_first())?;
            id.ok_or_else(|| CbError::internal("crash insert returned no id"))
        })
    })
}

/// The retry decision for a job from its attempts, crash history and budget.
pub fn retry_decision(job: Uuid) -> Result<Decision, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect(|client| {
            let stmt = b.statement(client, "liveness.attempts", Access::Read, &[UUID], |b| {
                format!("SELECT attempt, max_attempts, agent_id FROM {} WHERE id OPERATOR(pg_catalog.=) $1", b.table)
            })?;
            let mut rows = client.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
            let row = rows.next().ok_or_else(|| b.no_such_job(job))?;
            let attempt: i32 = row.get(1).map_err(spi)?.unwrap_or(0);
            let max_attempts: i32 = row.get(2).map_err(spi)?.unwrap_or(0);
            let agent: Option<Uuid> = row.get(3).map_err(spi)?;
            let crashes = crash_histories(client, &[job])?.remove(job.as_bytes()).unwrap_or_default();
            let exhausted = match agent {
                Some(agent) => as_definer(|| crate::spend::store::exhausted(client, &[(job, agent)]))?,
                None => Default::default(),
            };
            Ok(decide(&JobFacts {
                attempt,
                max_attempts,
                budget_exhausted: exhausted.contains(job.as_bytes()),
                crashes,
            }))
        })
    })
}
