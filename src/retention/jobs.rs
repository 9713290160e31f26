//! What the cleanup needs from the bound job table: each job's class (live, terminal since
//! when, other), read as the caller without locking any row, and the refusal when the table
//! cannot be read or looks like the wrong one.

use std::collections::HashMap;

use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid};

use crate::job::binding::{self, Access, Binding};
use crate::liveness::liveness_store;
use crate::pg::spi_util::spi;
use crate::pg::time::unix_us;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::retention::{job_class, looks_like_wrong_table, needs_retry_decision, JobClass, JobIds};

const UUID_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDARRAYOID);

/// A job as the cleanup sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub status: String,
    pub class: JobClass,
}

/// The jobs of the bound table among `ids`, by id bytes. Absent ids have no row.
pub type Jobs = HashMap<[u8; 16], Job>;

/// The bound table, checked to be readable by the caller (42501 with a HINT otherwise).
pub fn readable_binding() -> Result<std::rc::Rc<Binding>, CbError> {
    let b = binding::current()?;
    // Readable, and not filtered by row-level security (which would hide jobs, and hidden jobs
    // would look orphaned): one statement.
    let (readable, filtered) = Spi::connect(|c| {
        let row = c
            .select(
                "SELECT pg_catalog.has_table_privilege($1, 'SELECT'), pg_catalog.row_security_active($1)",
                Some(1),
                &[b.oid.into()],
            )
            .map_err(spi)?;
        if row.is_empty() {
            return Ok::<_, CbError>((None, None));
        }
        let row = row.first();
        Ok((row.get::<bool>(1).map_err(spi)?, row.get::<bool>(2).map_err(spi)?))
    })?;
    if readable != Some(true) {
        return Err(CbError::new(
            SqlState::InsufficientPrivilege,
            format!("cleanup_session_buffers cannot read the job table {}", b.table),
        )
        .with_hint(format!(
            "The cleanup decides from each job's status: GRANT SELECT ON {} to the role that runs it.",
            b.table
        )));
    }
    if filtered == Some(true) {
        return Err(CbError::new(
            SqlState::InsufficientPrivilege,
            format!("row-level security on {} hides jobs from cleanup_session_buffers", b.table),
        )
        .with_hint("Run it as a role that sees every job (the table's owner, or one with BYPASSRLS): a hidden job's buffer would look orphaned."));
    }
    Ok(b)
}

/// Looks up `ids` in the bound table (as the caller, plain reads: no job row is locked), and
/// asks `retry_decision` about each FAILED or TIMED_OUT one.
pub fn lookup(b: &Binding, ids: &[pgrx::Uuid]) -> Result<Jobs, CbError> {
    let mut out = Jobs::new();
    let mut failed = Vec::new();
    for chunk in ids.chunks(10_000) {
        Spi::connect(|client| {
            let stmt = b.statement(client, "retention.jobs", Access::Read, &[UUID_ARRAY], |b| {
                format!(
                    "SELECT id, status::pg_catalog.text, completed_at, updated_at, attempt FROM {}
                      WHERE id OPERATOR(pg_catalog.=) ANY ($1)",
                    b.table
                )
            })?;
            for r in client.select(&*stmt, None, &[chunk.to_vec().into()]).map_err(spi)? {
                let Some(id) = r.get::<pgrx::Uuid>(1).map_err(spi)? else { continue };
                let status: String = r.get(2).map_err(spi)?.unwrap_or_default();
                // With no end time at all, the job cannot be dated: never terminal.
                let ended = unix_us(r.get(3).map_err(spi)?).or(unix_us(r.get(4).map_err(spi)?));
                let attempt = r.get::<i32>(5).map_err(spi)?.unwrap_or(0);
                if needs_retry_decision(&status) {
                    failed.push((id, status.clone(), attempt, ended));
                }
                let class = job_class(&status, attempt, ended, false);
                out.insert(*id.as_bytes(), Job { status, class });
            }
            Ok::<(), CbError>(())
        })?;
    }
    for (id, status, attempt, ended) in failed {
        // A job that cannot be decided on (its row gone meanwhile) is not taken as terminal.
        let class = match liveness_store::retry_decision(id) {
            Ok(d) => job_class(&status, attempt, ended, d.retry),
            Err(_) => JobClass::Other,
        };
        out.insert(*id.as_bytes(), Job { class, status });
    }
    Ok(out)
}

/// Refuses (55000) when most of the job ids the control plane vouched for (see
/// `looks_like_wrong_table`) have no row in the bound table: the table is likely the wrong
/// one, and every directory would look orphaned.
pub fn refuse_wrong_table(b: &Binding, ids: &JobIds, max_unknown_ratio: f64) -> Result<(), CbError> {
    if looks_like_wrong_table(ids, max_unknown_ratio) {
        let (total, unknown) = ids.judged();
        let which = if ids.vouched_known.saturating_add(ids.vouched_unknown) > 0 {
            "job ids with checkpoints, usage or other rows of the extension's"
        } else {
            "buffers' job ids"
        };
        return Err(CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("{unknown} of the {total} {which} have no row in {}: it looks like the wrong job table", b.table),
        )
        .with_detail(format!("More than max_unknown_ratio ({max_unknown_ratio}) of them are unknown; nothing was deleted."))
        .with_hint(
            "Point cortex_buffer.job_table at the control plane's job table. If those jobs really are gone, pass a larger max_unknown_ratio (1 disables the check).",
        ));
    }
    Ok(())
}
