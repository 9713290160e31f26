//! Confirmations: a source's word that every file it ships was pushed whole (`confirm_pushed`),
//! and what recovery needs of them. The server cannot look at another node's disk, and a node
//! that died while its shipper was behind reports nothing: the bytes the server lacks are
//! invisible. So a pushed file counts as complete for a recovery plan only when its source
//! confirmed after the job's previous attempt was superseded (`cortex_buffer_core::recovery::
//! files::superseded_at`); otherwise the plan is stale (`remote_unconfirmed`). A pod that plans
//! on another node than its predecessor waits for that confirmation first (`await_sources`).

use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::job::binding::{self, Access};
use crate::pg::privilege::as_definer;
use crate::pg::raise::raise;
use crate::pg::spi_util::{prepared_read, spi};
use crate::pg::time::{interval_us, unix_us};
use crate::pg::xact::with_fresh_snapshot;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::timestamp::format_timestamp;
use cortex_buffer_core::push::check_source;
use cortex_buffer_core::recovery::files::{confirmation_covers, superseded_at};

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);

/// The most a shipper may date its confirmation back (`as_of`): its own scan takes far less.
const MAX_AS_OF_US: i64 = 3_600_000_000;

/// Records that `source` had pushed every file it ships whole, `as_of` ago (the time its scan
/// of the files began, by its own monotonic clock: no wall clocks compared). One row per
/// source, however many files it ships. Never moves a confirmation back.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn confirm_pushed(
    source: Option<&str>,
    as_of: default!(Option<pgrx::datum::Interval>, "'0 seconds'"),
    source_token: default!(Option<&str>, "NULL"),
) -> Option<TimestampWithTimeZone> {
    let source = source.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, "source must not be NULL")
                .with_hint("Pass the source the shipper pushes as."),
        )
    });
    check_source(source)
        .map_err(|why| {
            CbError::new(SqlState::InvalidParameterValue, format!("invalid source: {why}"))
                .with_hint("See docs/api.md, confirm_pushed.")
        })
        .or_raise();
    let as_of_us = interval_us(as_of).unwrap_or(0);
    if !(0..=MAX_AS_OF_US).contains(&as_of_us) {
        raise(
            CbError::new(SqlState::InvalidParameterValue, "invalid as_of: it must be between 0 and 1 hour")
                .with_hint("Pass how long ago the scan that found every file pushed began."),
        );
    }
    super::sql::authorize_source(source, source_token, None).or_raise();
    as_definer(|| {
        Spi::connect_mut(|c| {
            let rows = c
                .update(
                    "INSERT INTO cortex_buffer.push_confirmation AS k (source, confirmed_at)
                     VALUES ($1, pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $2::pg_catalog.float8 OPERATOR(pg_catalog./) 1e6))
                     ON CONFLICT (source) DO UPDATE
                        SET confirmed_at = CASE WHEN excluded.confirmed_at OPERATOR(pg_catalog.>) k.confirmed_at
                                                THEN excluded.confirmed_at ELSE k.confirmed_at END,
                            confirmations = k.confirmations OPERATOR(pg_catalog.+) 1
                     RETURNING confirmed_at",
                    Some(1),
                    &[source.into(), as_of_us.into()],
                )
                .map_err(spi)?;
            Ok::<_, CbError>(rows.into_iter().next().and_then(|r| r.get::<TimestampWithTimeZone>(1).ok().flatten()))
        })
    })
    .or_raise()
}

/// When the job's previous attempt was superseded: from the bound job table's row (read as
/// the caller, as the plan reads it) and the job's last crash record (as the definer role).
pub fn job_superseded_at(job: Uuid) -> Result<Option<i64>, CbError> {
    let b = binding::current()?;
    let row = Spi::connect(|c| {
        let stmt = b.statement(c, "push.superseded", Access::Read, &[UUID], |b| {
            format!(
                "SELECT status::pg_catalog.text, started_at, updated_at FROM {} WHERE id OPERATOR(pg_catalog.=) $1",
                b.table
            )
        })?;
        let rows = c.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
        rows.into_iter()
            .next()
            .map(|r| {
                Ok::<_, CbError>((
                    r.get::<String>(1).map_err(spi)?.unwrap_or_default(),
                    unix_us(r.get(2).map_err(spi)?),
                    unix_us(r.get(3).map_err(spi)?),
                ))
            })
            .transpose()
    })?;
    let Some((status, started, updated)) = row else { return Ok(None) };
    let crashed = as_definer(|| {
        Spi::connect(|c| {
            let stmt = prepared_read(c, "push.last_crash", || LAST_CRASH_SQL.to_owned(), &[UUID])?;
            let rows = c.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
            Ok::<_, CbError>(rows.into_iter().next().and_then(|r| unix_us(r.get(1).ok().flatten())))
        })
    })?;
    Ok(superseded_at(&status, started, updated, crashed))
}

/// The job's last crash record (`crash_job_idx`).
pub(crate) const LAST_CRASH_SQL: &str = "
    SELECT recorded_at FROM cortex_buffer.crash WHERE job_id OPERATOR(pg_catalog.=) $1
     ORDER BY crash_id DESC LIMIT 1";

/// The sources of the job's pushed files that have not confirmed since `after_us`, with their
/// last confirmation (as the definer role: `pushed_file` is its alone).
pub fn unconfirmed_sources(job: Uuid, after_us: Option<i64>) -> Result<Vec<(String, Option<i64>)>, CbError> {
    as_definer(|| {
        Spi::connect(|c| {
            let stmt = prepared_read(c, "push.job_sources", || JOB_SOURCES_SQL.to_owned(), &[UUID])?;
            let mut out = Vec::new();
            for r in c.select(&*stmt, None, &[job.into()]).map_err(spi)? {
                let source = r.get::<String>(1).map_err(spi)?.unwrap_or_default();
                let at = unix_us(r.get(2).map_err(spi)?);
                if !confirmation_covers(at, after_us) {
                    out.push((source, at));
                }
            }
            Ok(out)
        })
    })
}

/// Each source that last pushed a file of the job, with its last confirmation.
pub(crate) const JOB_SOURCES_SQL: &str = "
    SELECT DISTINCT p.source, k.confirmed_at
      FROM cortex_buffer.pushed_file p
      LEFT JOIN cortex_buffer.push_confirmation k ON k.source OPERATOR(pg_catalog.=) p.source
     WHERE p.job_id OPERATOR(pg_catalog.=) $1";

/// How often `await_sources` looks again.
const AWAIT_EVERY: Duration = Duration::from_millis(20);

/// The pod's bounded wait before it plans: until every source that pushed the job's files has
/// confirmed after the previous attempt was superseded, at most `timeout`. True once they all
/// have (or the job has no pushed file); false when the time ran out (the plan will then say
/// `stale`, `remote_unconfirmed`). Checks the job token like every per-job function.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn await_sources(job_id: Option<Uuid>, timeout: default!(Option<pgrx::datum::Interval>, "'5 seconds'")) -> bool {
    let job = job_id.unwrap_or_else(|| {
        raise(CbError::new(SqlState::NullValueNotAllowed, "job_id must not be NULL").with_hint("Pass the job's id."))
    });
    let timeout_us = interval_us(timeout).unwrap_or(5_000_000);
    if !(0..=3_600_000_000).contains(&timeout_us) {
        raise(
            CbError::new(SqlState::InvalidParameterValue, "invalid timeout: it must be between 0 and 1 hour")
                .with_hint("See docs/api.md, await_sources."),
        );
    }
    let deadline = Instant::now() + Duration::from_micros(u64::try_from(timeout_us).unwrap_or(0));
    crate::job::authority::act(job, || loop {
        let behind = with_fresh_snapshot(|| {
            let after = job_superseded_at(job)?;
            unconfirmed_sources(job, after)
        })?;
        if behind.is_empty() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        // SAFETY: pg_usleep and the interrupt check are plain backend calls on the main thread.
        unsafe { pgrx::pg_sys::pg_usleep(i64::try_from(AWAIT_EVERY.as_micros()).unwrap_or(20_000)) };
        pgrx::check_for_interrupts!();
    })
    .or_raise()
}

/// The text a stale plan gives for a pushed file whose source has not confirmed it.
pub fn unconfirmed_detail(
    file: &str,
    source: &str,
    confirmed_us: Option<i64>,
    superseded_us: Option<i64>,
    have: i64,
) -> String {
    let when = |us: Option<i64>| us.map_or_else(|| "never".to_owned(), format_timestamp);
    let since = match superseded_us {
        Some(_) => format!("after the previous attempt was superseded ({})", when(superseded_us)),
        None => {
            "after the previous attempt was superseded (nothing dates it: the job row has no started_at or updated_at)"
                .to_owned()
        }
    };
    format!(
        "{file} is pushed by {source}, which has not confirmed it {since}; last confirmation: {}. The server holds {have} bytes of it; a node that died while its shipper was behind holds more. SELECT cortex_buffer.await_sources(job_id) waits for the confirmation",
        when(confirmed_us)
    )
}

extension_sql!(
    r#"
COMMENT ON FUNCTION cortex_buffer.confirm_pushed(text, interval, text) IS
'A shipper''s word (with its source''s token, source_token), while idle, that every file its source ships had been pushed whole as_of ago (when its look at the files began): one row per source in push_confirmation, never moved back. recovery_plan trusts a pushed file''s bytes as complete only when its source confirmed after the job''s previous attempt was superseded; otherwise the plan is stale (remote_unconfirmed). Returns the recorded confirmation time. Granted to cortex_buffer_pusher.';
COMMENT ON FUNCTION cortex_buffer.await_sources(uuid, interval) IS
'The pod''s bounded wait before it plans: waits (at most timeout) until every source that pushed the job''s files has confirmed them (confirm_pushed) after the job''s previous attempt was superseded; true once they all have (or the job has no pushed file), false when the time ran out (recovery_plan then says stale, remote_unconfirmed). Checks the job token like every per-job function. Granted to cortex_buffer_agent and cortex_buffer_control_plane.';
"#,
    name = "push_confirm_comments",
    requires = ["push_schema", confirm_pushed, await_sources]
);
