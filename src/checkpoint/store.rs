//! Checkpoints in the bound job table and `cortex_buffer.checkpoint_history`, through SPI with
//! statements prepared once per binding. Each operation is a fixed, small number of statements:
//! a write is one locking read and one statement that updates the job row, appends history and
//! trims it.

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::job::authority::Attempt;
use crate::job::binding::{self, Access, Binding};
use crate::pg::guc;
use crate::pg::jsonb::{malformed, RawJsonb};
use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use cortex_buffer_core::checkpoint::crc::{crc_as_int4, stored_crc, Canonical};
use cortex_buffer_core::checkpoint::identity::{
    doc_identity, may_checkpoint, plan_write, step_index_of, Current, DocIdentity,
};
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::shared::{format_uuid, uuid_v7, UuidBytes};

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
const JSONB: PgOid = PgOid::BuiltIn(PgBuiltInOids::JSONBOID);
const INT4: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4OID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);

use crate::pg::spi_util::{spi, FirstValue};

/// Locks the job row. A separate statement from [`identity_sql`] on purpose: in READ
/// COMMITTED a locking read that had to wait re-checks only the locked row, while a join in the
/// same statement (the history lookup) keeps the statement's old snapshot, so every queued
/// writer would see the winner's predecessor as current. Reading the identity in the next
/// statement takes a fresh snapshot that includes the winner's commit.
fn lock_sql(b: &Binding) -> String {
    format!("SELECT attempt FROM {} WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE", b.table)
}

/// The job row's checkpoint identity columns plus the newest history row matching its CRC.
fn identity_sql(b: &Binding) -> String {
    format!(
        // The document's own members are read only when no history row matched: each `->>`
        // detoasts the whole previous checkpoint.
        "SELECT j.status::pg_catalog.text, j.checkpoint_crc::pg_catalog.int8,
                CASE WHEN h.checkpoint_id IS NULL THEN j.checkpoint OPERATOR(pg_catalog.->>) 'checkpoint_id' END,
                CASE WHEN h.checkpoint_id IS NULL THEN j.checkpoint OPERATOR(pg_catalog.->>) 'step_index' END,
                h.checkpoint_id, h.step_index, j.checkpoint
           FROM {t} j
           LEFT JOIN LATERAL (
                SELECT checkpoint_id, step_index FROM cortex_buffer.checkpoint_history h
                 WHERE h.job_id OPERATOR(pg_catalog.=) j.id
                   AND h.crc OPERATOR(pg_catalog.=) (j.checkpoint_crc::pg_catalog.int8 OPERATOR(pg_catalog.&) 4294967295)
                 ORDER BY h.history_id DESC LIMIT 1) h ON true
          WHERE j.id OPERATOR(pg_catalog.=) $1",
        t = b.table
    )
}

/// Sets the job row's checkpoint (small documents), in the caller's rights.
fn update_job_sql(b: &Binding) -> String {
    format!("UPDATE {t} SET checkpoint = $2, checkpoint_crc = $3 WHERE id OPERATOR(pg_catalog.=) $1", t = b.table)
}

/// Documents at least this large (binary jsonb bytes) are TOAST-compressed when stored. For them
/// the history row is inserted first and the job row then takes its value from it: Postgres
/// copies the already-compressed chunks instead of compressing the document a second time,
/// which saves far more than the extra work costs (see bench/checkpoint.sh). History's `doc`
/// compresses with lz4 where the server has it (src/checkpoint/schema.sql), and the copy keeps
/// that method in the job row.
const SHARE_COMPRESSED_FROM_BYTES: usize = 2048;

/// Appends history and trims it, returning the new row's id; run as the definer role (the
/// calling roles may not write history). The trim deletes by id the rows an ordered index scan
/// finds past the newest `keep - 1` (the new row is not visible to the statement): a range
/// condition on `history_id` would make the planner scan every older index entry of the job,
/// including the dead ones earlier trims left for vacuum. At most 64 rows go per write, so
/// lowering `checkpoint_history_keep` converges within a few writes.
fn insert_history_sql(_: &Binding) -> String {
    "WITH ins AS (
         INSERT INTO cortex_buffer.checkpoint_history (job_id, checkpoint_id, step_index, doc, crc, size_bytes)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING history_id
     ), del AS (
         DELETE FROM cortex_buffer.checkpoint_history
          WHERE history_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                SELECT history_id FROM cortex_buffer.checkpoint_history
                 WHERE job_id OPERATOR(pg_catalog.=) $1 ORDER BY history_id DESC OFFSET $7 LIMIT 64))
     )
     SELECT history_id FROM ins"
        .to_owned()
}

/// Points the job row at the document just stored in history (copying its compressed form).
fn update_from_history_sql(b: &Binding) -> String {
    format!(
        "UPDATE {t} SET checkpoint = h.doc, checkpoint_crc = $2
           FROM cortex_buffer.checkpoint_history h
          WHERE {t}.id OPERATOR(pg_catalog.=) $1 AND h.history_id OPERATOR(pg_catalog.=) $3",
        t = b.table
    )
}

const HISTORY_PAGE_SQL: &str = "
    SELECT history_id, checkpoint_id, step_index, doc, crc, created_at::pg_catalog.text
      FROM cortex_buffer.checkpoint_history
     WHERE job_id OPERATOR(pg_catalog.=) $1 AND history_id OPERATOR(pg_catalog.<) $2
     ORDER BY history_id DESC LIMIT 8";

/// The identity columns read with [`identity_sql`].
struct JobRow {
    status: String,
    stored_crc: Option<i64>,
    current: Current,
    doc: Option<RawJsonb>,
    /// The job's attempt, as the lock read it (only when locked).
    attempt: Option<i32>,
}

/// Reads the job row. With `lock`, first locks it and then reads with a fresh snapshot (SPI in
/// read-write mode), so the values are those of the latest committed writer.
fn read_job_row(client: &SpiClient<'_>, b: &Binding, job: Uuid, lock: bool) -> Result<Option<JobRow>, CbError> {
    let mut attempt = None;
    if lock {
        let stmt = b.statement(client, "checkpoint.lock", Access::Write, &[UUID], lock_sql)?;
        let locked = client.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
        let Some(row) = locked.into_iter().next() else { return Ok(None) };
        // A NULL attempt is 0, as job_token() issues it.
        attempt = Some(row.get::<i32>(1).map_err(spi)?.unwrap_or(0));
    }
    let (key, access) =
        if lock { ("checkpoint.identity.fresh", Access::Write) } else { ("checkpoint.identity", Access::Read) };
    let stmt = b.statement(client, key, access, &[UUID], identity_sql)?;
    let mut rows = client.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
    let Some(row) = rows.next() else { return Ok(None) };
    let own_id: Option<String> = row.get(3).map_err(spi)?;
    let own_step: Option<String> = row.get(4).map_err(spi)?;
    let hist_id: Option<Uuid> = row.get(5).map_err(spi)?;
    let hist_step: Option<i32> = row.get(6).map_err(spi)?;
    let own = DocIdentity {
        checkpoint_id: own_id.as_deref().and_then(cortex_buffer_core::shared::parse_uuid),
        step_index: own_step.as_deref().and_then(|s| s.parse::<f64>().ok()).and_then(step_index_of),
    };
    let history = hist_id.zip(hist_step).map(|(id, step)| (*id.as_bytes(), step));
    Ok(Some(JobRow {
        status: row.get::<String>(1).map_err(spi)?.unwrap_or_default(),
        stored_crc: row.get(2).map_err(spi)?,
        current: Current::resolve(history, own),
        doc: row.get(7).map_err(spi)?,
        attempt,
    }))
}

/// What `write_checkpoint` returns.
pub struct Written {
    pub checkpoint_id: UuidBytes,
    pub step_index: i32,
    pub crc: u32,
    pub size_bytes: usize,
}

fn random_bytes() -> [u8; 10] {
    let mut r = [0u8; 10];
    // SAFETY: writes exactly r.len() bytes into r.
    if !unsafe { pgrx::pg_sys::pg_strong_random(r.as_mut_ptr().cast(), r.len()) } {
        // No strong randomness: fall back to the clock's nanoseconds; uniqueness still rests on
        // the millisecond prefix plus these bits.
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        r.copy_from_slice(&nanos.to_le_bytes()[..10]);
    }
    r
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Validates and writes a checkpoint in the caller's transaction.
pub fn write(
    job: Uuid,
    doc: RawJsonb,
    expected: Option<Uuid>,
    allow_step_regression: bool,
    may: Attempt,
) -> Result<Written, CbError> {
    let (own, canonical, stored_size) = doc.with_root(|root, size| {
        let own = doc_identity(root, malformed)?;
        Ok((own, Canonical::with_capacity(root, size).map_err(malformed)?, size))
    })?;
    let max = guc::checkpoint_max_bytes();
    if canonical.size_bytes() > max {
        return Err(CbError::new(
            SqlState::ProgramLimitExceeded,
            format!(
                "checkpoint is {} bytes of canonical JSON, more than cortex_buffer.checkpoint_max_bytes ({max})",
                canonical.size_bytes()
            ),
        )
        .with_hint("Keep large artefacts out of the checkpoint (store a reference), or have a superuser raise cortex_buffer.checkpoint_max_bytes."));
    }
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect_mut(|client| {
            let row = read_job_row(client, &b, job, true)?.ok_or_else(|| b.no_such_job(job))?;
            // An agent's token must be for the attempt the locked row holds.
            may.matches(row.attempt)?;
            may_checkpoint(&job.to_string(), &row.status)?;
            let planned = plan_write(
                own,
                row.current,
                expected.map(|u| *u.as_bytes()),
                allow_step_regression,
                uuid_v7(unix_ms(), random_bytes()),
            )?;
            let written = Written {
                checkpoint_id: planned.checkpoint_id,
                step_index: planned.step_index,
                crc: canonical.crc,
                size_bytes: canonical.size_bytes(),
            };
            super::marks::while_writing(|| {
                store(client, &b, job, doc, &written, stored_size >= SHARE_COMPRESSED_FROM_BYTES)
            })?;
            super::marks::record(job, Some(written.crc), Some(written.checkpoint_id), "write_checkpoint")?;
            Ok(written)
        })
    })
}

/// The CRC as the bound table's `checkpoint_crc` column stores it.
fn stored_crc_param(b: &Binding, crc: u32) -> (PgOid, pgrx::datum::DatumWithOid<'static>) {
    if b.shape.crc_is_int4 {
        (INT4, crc_as_int4(crc).into())
    } else {
        (INT8, i64::from(crc).into())
    }
}

/// Appends the history row (as the definer role); returns its id.
fn append_history(
    client: &mut SpiClient<'_>,
    b: &Binding,
    job: Uuid,
    doc: &RawJsonb,
    w: &Written,
) -> Result<i64, CbError> {
    let insert = b.statement(
        client,
        "checkpoint.write.history",
        Access::Write,
        &[UUID, UUID, INT4, JSONB, INT8, INT4, INT8],
        insert_history_sql,
    )?;
    let args = [
        job.into(),
        Uuid::from_bytes(w.checkpoint_id).into(),
        w.step_index.into(),
        (*doc).into(),
        i64::from(w.crc).into(),
        i32::try_from(w.size_bytes).unwrap_or(i32::MAX).into(),
        (guc::checkpoint_history_keep() - 1).into(),
    ];
    let history_id: Option<i64> = as_definer(|| client.update(&*insert, None, &args).map_err(spi)?.pipe_first())?;
    history_id.ok_or_else(|| CbError::internal("checkpoint_history insert returned no id"))
}

/// Writes the job row (caller's rights) and appends to history (definer). Small documents: the
/// job row, then history. Large ones (`share_compression`): history first, then the job row
/// takes history's stored value, so the document is compressed once.
fn store(
    client: &mut SpiClient<'_>,
    b: &Binding,
    job: Uuid,
    doc: RawJsonb,
    w: &Written,
    share_compression: bool,
) -> Result<(), CbError> {
    let (crc_type, stored) = stored_crc_param(b, w.crc);
    let int4 = b.shape.crc_is_int4;
    if share_compression {
        let history_id = append_history(client, b, job, &doc, w)?;
        let key = if int4 { "checkpoint.write.job.int4" } else { "checkpoint.write.job.int8" };
        let update = b.statement(client, key, Access::Write, &[UUID, crc_type, INT8], update_from_history_sql)?;
        client.update(&*update, None, &[job.into(), stored, history_id.into()]).map_err(spi)?;
    } else {
        let key = if int4 { "checkpoint.write.int4" } else { "checkpoint.write.int8" };
        let stmt = b.statement(client, key, Access::Write, &[UUID, JSONB, crc_type], update_job_sql)?;
        client.update(&*stmt, None, &[job.into(), doc.into(), stored]).map_err(spi)?;
        append_history(client, b, job, &doc, w)?;
    }
    Ok(())
}

/// Where `read_checkpoint` found a checkpoint that verifies.
pub enum Source {
    Current,
    History,
    None,
}

pub struct Read {
    pub source: Source,
    pub checkpoint_id: Option<UuidBytes>,
    pub step_index: Option<i32>,
    pub doc: Option<RawJsonb>,
    pub crc: Option<u32>,
    /// Whether the job row's own checkpoint passed its CRC.
    pub crc_ok: Option<bool>,
    pub detail: Option<String>,
}

pub(crate) fn crc_of(doc: &RawJsonb) -> Result<u32, CbError> {
    doc.with_root(|root, size| Ok(Canonical::with_capacity(root, size).map_err(malformed)?.crc))
}

/// The CRC of `doc` and the `checkpoint_id` it names (a well-formed uuid string, else none).
pub(crate) fn crc_and_id_of(doc: &RawJsonb) -> Result<(u32, Option<[u8; 16]>), CbError> {
    doc.with_root(|root, size| {
        let crc = Canonical::with_capacity(root, size).map_err(malformed)?.crc;
        let id =
            cortex_buffer_core::checkpoint::identity::doc_identity(root, malformed).ok().and_then(|i| i.checkpoint_id);
        Ok((crc, id))
    })
}

/// Reads and verifies a job's checkpoint, falling back to the newest history entry that
/// verifies. No verifiable checkpoint at all is `data_corrupted` (XX001).
pub fn read(job: Uuid) -> Result<Read, CbError> {
    let b = binding::current()?;
    with_index_scans(|| {
        Spi::connect(|client| {
            let row = read_job_row(client, &b, job, false)?.ok_or_else(|| b.no_such_job(job))?;
            let mut failures: Vec<String> = Vec::new();
            match (&row.doc, row.stored_crc) {
                (Some(doc), stored) => {
                    let computed = crc_of(doc)?;
                    match stored.map(stored_crc) {
                        Some(Some(s)) if s == computed => {
                            return Ok(Read {
                                source: Source::Current,
                                checkpoint_id: row.current.checkpoint_id,
                                step_index: row.current.step_index,
                                doc: Some(doc.transfer_out_of_spi()),
                                crc: Some(computed),
                                crc_ok: Some(true),
                                detail: None,
                            });
                        }
                        Some(Some(s)) => {
                            failures.push(format!("current checkpoint: stored CRC {s}, computed {computed}"))
                        }
                        Some(None) => failures.push(format!(
                            "current checkpoint: stored CRC {} is not a 32-bit value",
                            stored.unwrap_or(0)
                        )),
                        None => failures.push("current checkpoint has no CRC".to_owned()),
                    }
                }
                (None, Some(s)) => failures.push(format!("job row has checkpoint_crc {s} but no checkpoint")),
                (None, None) => {}
            }
            let had_current = !failures.is_empty();

            let page = b.statement(client, "checkpoint.history.page", Access::Read, &[UUID, INT8], |_| {
                HISTORY_PAGE_SQL.to_owned()
            })?;
            let mut before = i64::MAX;
            let mut seen_history = false;
            loop {
                let rows = client.select(&*page, None, &[job.into(), before.into()]).map_err(spi)?;
                if rows.is_empty() {
                    break;
                }
                for r in rows {
                    seen_history = true;
                    let history_id: i64 = r.get(1).map_err(spi)?.unwrap_or(0);
                    before = history_id;
                    let id: Option<Uuid> = r.get(2).map_err(spi)?;
                    let step: Option<i32> = r.get(3).map_err(spi)?;
                    let doc: Option<RawJsonb> = r.get(4).map_err(spi)?;
                    let stored: Option<i64> = r.get(5).map_err(spi)?;
                    let created: Option<String> = r.get(6).map_err(spi)?;
                    let Some(doc) = doc else { continue };
                    let computed = crc_of(&doc)?;
                    if stored.and_then(stored_crc) == Some(computed) {
                        let id = id.map(|u| *u.as_bytes());
                        let what_failed = if failures.is_empty() {
                            "job row has no checkpoint".to_owned()
                        } else {
                            failures.join("; ")
                        };
                        let detail = format!(
                        "{what_failed}; returned checkpoint_history {history_id} (checkpoint {}, step {}, written {})",
                        id.map(|u| format_uuid(&u)).unwrap_or_default(),
                        step.map(|s| s.to_string()).unwrap_or_default(),
                        created.unwrap_or_default()
                    );
                        pgrx::warning!(
                            "cortex_buffer: checkpoint of job {job} failed verification; falling back: {detail}"
                        );
                        return Ok(Read {
                            source: Source::History,
                            checkpoint_id: id,
                            step_index: step,
                            doc: Some(doc.transfer_out_of_spi()),
                            crc: Some(computed),
                            crc_ok: Some(false),
                            detail: Some(detail),
                        });
                    }
                    failures.push(format!(
                        "checkpoint_history {history_id}: stored CRC {}, computed {computed}",
                        stored.unwrap_or(-1)
                    ));
                }
            }

            if !had_current && !seen_history {
                return Ok(Read {
                    source: Source::None,
                    checkpoint_id: None,
                    step_index: None,
                    doc: None,
                    crc: None,
                    crc_ok: None,
                    detail: Some("the job has never been checkpointed".to_owned()),
                });
            }
            Err(CbError::new(SqlState::DataCorrupted, format!("job {job} has no checkpoint that passes its CRC"))
                .with_detail(failures.join("; "))
                .with_hint("Fail the job: resuming from an unverifiable checkpoint could repeat or skip side effects."))
        })
    })
}

/// One stored checkpoint whose CRC does not match.
pub struct Mismatch {
    pub job_id: UuidBytes,
    pub source: &'static str,
    pub history_id: Option<i64>,
    pub checkpoint_id: Option<UuidBytes>,
    pub step_index: Option<i32>,
    pub stored_crc: Option<i64>,
    pub computed_crc: Option<u32>,
    pub detail: String,
}

const VERIFY_PAGE: i64 = 200;

/// Scrubs every current checkpoint of the bound table and every history entry. Pages through
/// both tables (one SPI connection per page, so memory stays bounded by the page).
pub fn verify_all() -> Result<Vec<Mismatch>, CbError> {
    crate::pg::planner::pinned(verify_all_pinned)
}

fn verify_all_pinned() -> Result<Vec<Mismatch>, CbError> {
    let b = binding::current()?;
    let mut out = Vec::new();

    let mut after: Option<Uuid> = None;
    loop {
        let (last, n) = Spi::connect(|client| {
            let stmt = b.statement(client, "checkpoint.verify.current", Access::Read, &[UUID, INT8], |b| {
                format!(
                    "SELECT id, checkpoint, checkpoint_crc::pg_catalog.int8,
                            checkpoint OPERATOR(pg_catalog.->>) 'checkpoint_id', checkpoint OPERATOR(pg_catalog.->>) 'step_index'
                       FROM {} WHERE (checkpoint IS NOT NULL OR checkpoint_crc IS NOT NULL) AND ($1 IS NULL OR id OPERATOR(pg_catalog.>) $1)
                      ORDER BY id LIMIT $2",
                    b.table
                )
            })?;
            let rows = client.select(&*stmt, None, &[after.into(), VERIFY_PAGE.into()]).map_err(spi)?;
            let n = rows.len();
            let mut last = None;
            for r in rows {
                let id: Option<Uuid> = r.get(1).map_err(spi)?;
                let Some(id) = id else { continue };
                last = Some(id);
                let doc: Option<RawJsonb> = r.get(2).map_err(spi)?;
                let stored: Option<i64> = r.get(3).map_err(spi)?;
                let own = DocIdentity {
                    checkpoint_id: r
                        .get::<String>(4)
                        .map_err(spi)?
                        .as_deref()
                        .and_then(cortex_buffer_core::shared::parse_uuid),
                    step_index: r.get::<String>(5).map_err(spi)?.and_then(|s| s.parse().ok()),
                };
                let computed = doc.as_ref().map(crc_of).transpose()?;
                let problem = match (computed, stored) {
                    (Some(c), Some(s)) if stored_crc(s) == Some(c) => None,
                    (Some(c), Some(s)) => Some(format!("stored CRC {s} does not match computed {c}")),
                    (Some(_), None) => Some("checkpoint has no CRC".to_owned()),
                    (None, Some(_)) => Some("checkpoint_crc is set but checkpoint is NULL".to_owned()),
                    (None, None) => None,
                };
                if let Some(detail) = problem {
                    out.push(Mismatch {
                        job_id: *id.as_bytes(),
                        source: "current",
                        history_id: None,
                        checkpoint_id: own.checkpoint_id,
                        step_index: own.step_index,
                        stored_crc: stored,
                        computed_crc: computed,
                        detail,
                    });
                }
            }
            Ok::<_, CbError>((last, n))
        })?;
        if i64::try_from(n).unwrap_or(0) < VERIFY_PAGE {
            break;
        }
        after = last;
    }

    let mut after_id: i64 = 0;
    loop {
        let (last, n) = Spi::connect(|client| {
            let rows = client
                .select(
                    "SELECT history_id, job_id, checkpoint_id, step_index, doc, crc FROM cortex_buffer.checkpoint_history
                      WHERE history_id OPERATOR(pg_catalog.>) $1 ORDER BY history_id LIMIT $2",
                    None,
                    &[after_id.into(), VERIFY_PAGE.into()],
                )
                .map_err(spi)?;
            let n = rows.len();
            let mut last = after_id;
            for r in rows {
                let history_id: i64 = r.get(1).map_err(spi)?.unwrap_or(0);
                last = history_id;
                let job: Option<Uuid> = r.get(2).map_err(spi)?;
                let doc: Option<RawJsonb> = r.get(5).map_err(spi)?;
                let stored: Option<i64> = r.get(6).map_err(spi)?;
                let computed = doc.as_ref().map(crc_of).transpose()?;
                if computed.is_some() && stored.and_then(stored_crc) == computed {
                    continue;
                }
                out.push(Mismatch {
                    job_id: job.map(|u| *u.as_bytes()).unwrap_or_default(),
                    source: "history",
                    history_id: Some(history_id),
                    checkpoint_id: r.get::<Uuid>(3).map_err(spi)?.map(|u| *u.as_bytes()),
                    step_index: r.get(4).map_err(spi)?,
                    stored_crc: stored,
                    computed_crc: computed,
                    detail: format!(
                        "stored CRC {} does not match computed {}",
                        stored.unwrap_or(-1),
                        computed.map(i64::from).unwrap_or(-1)
                    ),
                });
            }
            Ok::<_, CbError>((last, n))
        })?;
        if i64::try_from(n).unwrap_or(0) < VERIFY_PAGE {
            break;
        }
        after_id = last;
    }
    Ok(out)
}
