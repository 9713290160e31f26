//! SQL functions of push ingestion: `append_session_bytes` (a shipper's chunk, applied exactly
//! once with the tailer's rules), `pushed_offsets` (where a shipper resumes: its source's files
//! and what the server holds of each), `await_pushed` (the agent's flush before a checkpoint:
//! wait until the server has a file up to the size the agent wrote).

use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::Uuid;

use super::store::Push;
use super::{apply, rate};
use crate::indexer::settings::Settings;
use crate::pg::guc;
use crate::pg::privilege::{as_definer, caller_is_superuser, role_oid};
use crate::pg::raise::raise;
use crate::pg::spi_util::{prepared_read, spi};
use crate::pg::time::interval_us;
use crate::pg::xact::with_fresh_snapshot;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::push::{check_identity, check_relpath, check_source, source_token};

fn required<T>(value: Option<T>, name: &str) -> T {
    value.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, format!("{name} must not be NULL")).with_hint(
                "Pass a value for every argument of append_session_bytes (final and file_size have defaults).",
            ),
        )
    })
}

/// [`required`] for `append_session_batch`'s arguments and array elements.
fn required_in_batch<T>(value: Option<T>, name: &str) -> T {
    value.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, format!("{name} must not be NULL")).with_hint(
                "Pass every argument of append_session_batch and every element of its arrays (finals and file_sizes, and their elements, may be NULL).",
            ),
        )
    })
}

fn invalid(what: &str, why: String) -> CbError {
    CbError::new(SqlState::InvalidParameterValue, format!("invalid {what}: {why}"))
        .with_hint("See docs/api.md, append_session_bytes.")
}

/// What a transaction was already allowed: `(local transaction id, user, [(source, token, job)])`.
type Allowed = (u32, pgrx::pg_sys::Oid, Vec<(String, String, Option<Uuid>)>);

thread_local! {
    /// What this transaction was already allowed. A shipper's batch calls append_session_bytes
    /// many times in one statement; the mapping is read once per transaction, not once per
    /// chunk.
    static ALLOWED: std::cell::RefCell<Allowed> = const { std::cell::RefCell::new((0, pgrx::pg_sys::InvalidOid, Vec::new())) };
}

/// [`check_mapping`] once per transaction for each (source, token, job).
pub(super) fn authorize_source(source: &str, token: Option<&str>, job: Option<Uuid>) -> Result<(), CbError> {
    let lxid = crate::pg::xact::local_xid();
    let token = token.unwrap_or("");
    // SAFETY: reads the current user.
    let user = unsafe { pgrx::pg_sys::GetUserId() };
    let known = ALLOWED.with(|a| {
        let a = a.borrow();
        a.0 == lxid && a.1 == user && a.2.iter().any(|(s, t, j)| s == source && t == token && *j == job)
    });
    if known {
        return Ok(());
    }
    check_mapping(source, token, job)?;
    ALLOWED.with(|a| {
        let mut a = a.borrow_mut();
        if a.0 != lxid || a.1 != user {
            *a = (lxid, user, Vec::new());
        }
        if a.2.len() < 1024 {
            a.2.push((source.to_owned(), token.to_owned(), job));
        }
    });
    Ok(())
}

/// Whether the caller may push as `source`, and (when `job` is given) write that job's files:
/// `token` must be the source's current token (a superuser needs none), the caller a member of
/// the source's login when it has one, and the job granted to the source (or the source
/// trusted with all jobs). 42501 otherwise, saying which.
fn check_mapping(source: &str, token: &str, job: Option<Uuid>) -> Result<(), CbError> {
    let row = as_definer(|| {
        Spi::connect(|c| {
            let stmt = prepared_read(
                c,
                "push.mapping",
                || {
                    "SELECT s.login::pg_catalog.text, s.all_jobs,
                            EXISTS (SELECT 1 FROM cortex_buffer.push_grant g
                                     WHERE g.source OPERATOR(pg_catalog.=) s.source AND g.job_id OPERATOR(pg_catalog.=) $2),
                            s.token_generation, (SELECT k.secret FROM cortex_buffer.job_token_key k), s.token_salt
                       FROM cortex_buffer.push_source s WHERE s.source OPERATOR(pg_catalog.=) $1"
                        .to_owned()
                },
                &[
                    pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TEXTOID),
                    pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::UUIDOID),
                ],
            )?;
            let rows = c.select(&*stmt, Some(1), &[source.into(), job.into()]).map_err(spi)?;
            let Some(r) = rows.into_iter().next() else { return Ok(None) };
            Ok(Some((
                r.get::<String>(1).map_err(spi)?,
                r.get::<bool>(2).map_err(spi)?.unwrap_or(false),
                r.get::<bool>(3).map_err(spi)?.unwrap_or(false),
                r.get::<i32>(4).map_err(spi)?.unwrap_or(1),
                r.get::<Vec<u8>>(5).map_err(spi)?,
                r.get::<Uuid>(6).map_err(spi)?.map(|u| *u.as_bytes()).unwrap_or_default(),
            )))
        })
    })?;
    let Some((login, all_jobs, granted, generation, secret, salt)) = row else {
        return Err(CbError::new(SqlState::InsufficientPrivilege, format!("push source \"{source}\" is not registered"))
            .with_hint("The control plane or an operator registers it and gets its token: SELECT cortex_buffer.register_push_source(<source>, <job>)."));
    };
    if !caller_is_superuser() {
        // No secret yet: no token was ever issued here, so none can verify.
        let check = match &secret {
            Some(secret) => source_token::check(secret, token, source, generation, &salt),
            None if token.is_empty() => source_token::Check::Missing,
            None => source_token::Check::Forged,
        };
        if let Some(refused) = source_token::refusal(check, source) {
            return Err(refused);
        }
        // SAFETY: reads the current user; a membership check of two existing roles.
        let member = |role| unsafe { pgrx::pg_sys::has_privs_of_role(pgrx::pg_sys::GetUserId(), role) };
        if let Some(login) = login.filter(|l| !role_oid(l).is_some_and(member)) {
            return Err(CbError::new(
                SqlState::InsufficientPrivilege,
                format!("this login may not push as source \"{source}\""),
            )
            .with_detail(format!("The source belongs to role \"{login}\"."))
            .with_hint(
                "Connect as that role (or a member of it), or have an operator change cortex_buffer.push_source.",
            ));
        }
    }
    if let Some(job) = job {
        if !all_jobs && !granted {
            return Err(CbError::new(
                SqlState::InsufficientPrivilege,
                format!("push source \"{source}\" may not write job {job}'s files"),
            )
            .with_hint("An operator (or the control plane, at dispatch) grants it: INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES (<source>, <job>)."));
        }
    }
    Ok(())
}

/// One push's arguments checked (SQLSTATE 22023, 54000 or 42501 otherwise), its source allowed
/// to write its job's files.
#[allow(clippy::too_many_arguments)]
fn checked<'a>(
    source: &'a str,
    token: Option<&str>,
    relpath: &'a str,
    start: i64,
    chunk: &'a [u8],
    identity: &'a str,
    last: bool,
    file_size: Option<i64>,
) -> Push<'a> {
    check_source(source).map_err(|why| invalid("source", why)).or_raise();
    check_identity(identity).map_err(|why| invalid("file_identity", why)).or_raise();
    let (job_dir, file_name, layout) =
        check_relpath(relpath).map_err(|why| invalid(&format!("relpath \"{relpath}\""), why)).or_raise();
    let start = u64::try_from(start).map_err(|_| invalid("start_offset", format!("{start} is negative"))).or_raise();
    let file_size =
        file_size.map(|s| u64::try_from(s).map_err(|_| invalid("file_size", format!("{s} is negative"))).or_raise());
    let max_chunk = guc::push_max_chunk();
    if chunk.len() > max_chunk {
        raise(
            CbError::new(
                SqlState::ProgramLimitExceeded,
                format!("the chunk is {} bytes, more than the {} kB a push takes", chunk.len(), max_chunk / 1024),
            )
            .with_hint("Send at most 4 MiB per call (the shipper's --chunk-bytes)."),
        );
    }
    let job = Uuid::from_bytes(cortex_buffer_core::indexer::normalize::uuid_bytes(&job_dir).unwrap_or_default());
    authorize_source(source, token, Some(job)).or_raise();
    Push { source, job, job_dir, relpath, file_name, layout, start, chunk, identity, last, file_size }
}

type PushRow = (i64, i64, i64, String);

/// Appends the bytes a shipper read from a session file on its node, exactly once: see
/// docs/api.md, append_session_bytes. Its SQL declaration is in api.sql: the argument `final`
/// is a Rust keyword, and pgrx would name it `r#final`.
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // SQL's signature, spelled out for pgrx
#[pg_extern(sql = false)]
fn append_session_bytes(
    source: Option<&str>,
    relpath: Option<&str>,
    start_offset: Option<i64>,
    chunk: Option<&[u8]>,
    file_identity: Option<&str>,
    r#final: default!(Option<bool>, "false"),
    file_size: default!(Option<i64>, "NULL"),
    source_token: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (name!(committed_offset, i64), name!(events_added, i64), name!(corrupt_added, i64), name!(action, String)),
> {
    let source = required(source, "source");
    let chunk = required(chunk, "chunk");
    let push = checked(
        source,
        source_token,
        required(relpath, "relpath"),
        required(start_offset, "start_offset"),
        chunk,
        required(file_identity, "file_identity"),
        r#final.unwrap_or(false),
        file_size,
    );
    let now_s = cortex_buffer_core::shared::now_us() / 1_000_000;
    let limit = guc::push_rate_limit();
    rate::charge(source, chunk.len() as u64, limit, now_s).or_raise();
    let settings = Settings::current();
    let applied = as_definer(|| apply::apply_batch(std::slice::from_ref(&push), &settings)).or_raise();
    rate::charge_stored(source, applied.stored.saturating_sub(chunk.len() as u64), limit, now_s);
    let rows: Vec<PushRow> =
        applied.outcomes.into_iter().map(|o| (o.committed, o.events, o.corrupt, o.action.to_owned())).collect();
    TableIterator::new(rows)
}

/// The most pushes one `append_session_batch` call takes.
const MAX_BATCH: usize = 1000;

type BatchRow = (i32, i64, i64, i64, String);

/// A shipper's pushes in one call, applied in the arrays' order with `append_session_bytes`'
/// rules and outcomes (see docs/api.md, append_session_batch): element `i` of each array is
/// one push. All apply or, on an error, none: they share the caller's transaction. Its SQL
/// declaration is in api.sql: it sets `plan_cache_mode`, which pgrx cannot declare.
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // SQL's signature, spelled out for pgrx
#[pg_extern(sql = false)]
fn append_session_batch(
    source: Option<&str>,
    relpaths: Option<Vec<Option<String>>>,
    start_offsets: Option<Vec<Option<i64>>>,
    chunks: Option<pgrx::datum::Array<'_, &[u8]>>,
    file_identities: Option<Vec<Option<String>>>,
    finals: default!(Option<Vec<Option<bool>>>, "NULL"),
    file_sizes: default!(Option<Vec<Option<i64>>>, "NULL"),
    source_token: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(ord, i32),
        name!(committed_offset, i64),
        name!(events_added, i64),
        name!(corrupt_added, i64),
        name!(action, String),
    ),
> {
    let source = required_in_batch(source, "source");
    // The source first, whatever the arrays hold: an empty batch is no way around its checks.
    check_source(source).map_err(|why| invalid("source", why)).or_raise();
    authorize_source(source, source_token, None).or_raise();
    let relpaths = required_in_batch(relpaths, "relpaths");
    let starts = required_in_batch(start_offsets, "start_offsets");
    let chunk_array = required_in_batch(chunks, "chunks");
    let chunks: Vec<Option<&[u8]>> = chunk_array.iter().collect();
    let identities = required_in_batch(file_identities, "file_identities");
    let n = relpaths.len();
    let lengths = [
        ("start_offsets", Some(starts.len())),
        ("chunks", Some(chunks.len())),
        ("file_identities", Some(identities.len())),
        ("finals", finals.as_ref().map(Vec::len)),
        ("file_sizes", file_sizes.as_ref().map(Vec::len)),
    ];
    if let Some((name, Some(len))) = lengths.iter().find(|(_, len)| len.is_some_and(|l| l != n)) {
        raise(
            CbError::new(
                SqlState::InvalidParameterValue,
                format!("the arrays differ in length: relpaths has {n} elements, {name} has {len}"),
            )
            .with_hint("Element i of every array is push i: give each array one element per push (finals and file_sizes may be NULL)."),
        );
    }
    if n > MAX_BATCH {
        raise(
            CbError::new(SqlState::ProgramLimitExceeded, format!("the batch has {n} pushes, more than {MAX_BATCH}"))
                .with_hint(format!("Send at most {MAX_BATCH} pushes per call (the shipper's --batch).")),
        );
    }
    let element = |name: &str, k: usize| format!("{name}[{}]", k + 1);
    let mut pushes = Vec::with_capacity(n);
    let mut bytes: u64 = 0;
    let mut chunk_bytes: u64 = 0;
    for k in 0..n {
        let relpath = required_in_batch(relpaths[k].as_deref(), &element("relpaths", k));
        let start = required_in_batch(starts[k], &element("start_offsets", k));
        let chunk = required_in_batch(chunks[k], &element("chunks", k));
        let identity = required_in_batch(identities[k].as_deref(), &element("file_identities", k));
        let last = finals.as_ref().and_then(|f| f[k]).unwrap_or(false);
        let size = file_sizes.as_ref().and_then(|f| f[k]);
        // Each push costs at least what a call of append_session_bytes costs.
        bytes = bytes.saturating_add((chunk.len() as u64).max(rate::CALL_BYTES));
        chunk_bytes = chunk_bytes.saturating_add(chunk.len() as u64);
        pushes.push(checked(source, source_token, relpath, start, chunk, identity, last, size));
    }
    let now_s = cortex_buffer_core::shared::now_us() / 1_000_000;
    let limit = guc::push_rate_limit();
    rate::charge(source, bytes, limit, now_s).or_raise();
    let settings = Settings::current();
    let applied = as_definer(|| apply::apply_batch(&pushes, &settings)).or_raise();
    rate::charge_stored(source, applied.stored.saturating_sub(chunk_bytes), limit, now_s);
    let rows: Vec<BatchRow> = applied
        .outcomes
        .into_iter()
        .enumerate()
        .map(|(k, o)| (i32::try_from(k + 1).unwrap_or(i32::MAX), o.committed, o.events, o.corrupt, o.action.to_owned()))
        .collect();
    TableIterator::new(rows)
}

type OffsetRow = (String, String, i64, i64, i64, i64, Option<i64>, Option<pgrx::datum::TimestampWithTimeZone>);

/// Where a shipper resumes: every file its source pushed last, with what the server holds.
#[allow(clippy::type_complexity)] // pgrx needs the named tuple spelled out here
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn pushed_offsets(
    source: Option<&str>,
    source_token: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(relpath, String),
        name!(file_identity, String),
        name!(committed_offset, i64),
        name!(held_bytes, i64),
        name!(head_len, i64),
        name!(head_crc, i64),
        name!(reported_size, Option<i64>),
        name!(pushed_at, Option<pgrx::datum::TimestampWithTimeZone>),
    ),
> {
    let source = required(source, "source");
    check_source(source).map_err(|why| invalid("source", why)).or_raise();
    authorize_source(source, source_token, None).or_raise();
    let rows: Vec<OffsetRow> = as_definer(|| {
        Spi::connect(|c| {
            let table = c
                .select(
                    // The latest file of each (job, relpath, identity): the one a push continues.
                    "SELECT DISTINCT ON (p.job_id, p.relpath, p.identity)
                            p.relpath, p.identity, f.indexed_offset, p.held_len, pg_catalog.length(p.head)::pg_catalog.int8,
                            f.fingerprint, p.reported_size, p.pushed_at
                       FROM cortex_buffer.pushed_file p
                       JOIN cortex_buffer.session_file f ON f.file_id OPERATOR(pg_catalog.=) p.file_id
                      WHERE p.source OPERATOR(pg_catalog.=) $1
                      ORDER BY p.job_id, p.relpath, p.identity, p.n DESC",
                    None,
                    &[source.into()],
                )
                .map_err(spi)?;
            let mut out = Vec::new();
            for r in table {
                out.push((
                    r.get::<String>(1).map_err(spi)?.unwrap_or_default(),
                    r.get::<String>(2).map_err(spi)?.unwrap_or_default(),
                    r.get::<i64>(3).map_err(spi)?.unwrap_or(0),
                    r.get::<i64>(4).map_err(spi)?.unwrap_or(0),
                    r.get::<i64>(5).map_err(spi)?.unwrap_or(0),
                    r.get::<i64>(6).map_err(spi)?.unwrap_or(0),
                    r.get::<i64>(7).map_err(spi)?,
                    r.get::<pgrx::datum::TimestampWithTimeZone>(8).map_err(spi)?,
                ));
            }
            Ok(out)
        })
    })
    .or_raise();
    TableIterator::new(rows)
}

/// How often `await_pushed` looks again.
const AWAIT_EVERY: Duration = Duration::from_millis(5);

/// The agent's flush before a checkpoint: waits until the server has the job's pushed file
/// `relpath` up to `size` bytes (committed or held), at most `timeout`. True once it has; false
/// when the time ran out. Clock-free: the agent knows how much it wrote.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn await_pushed(
    job_id: Option<Uuid>,
    relpath: Option<&str>,
    size: Option<i64>,
    timeout: default!(Option<pgrx::datum::Interval>, "'5 seconds'"),
) -> bool {
    let job = job_id.unwrap_or_else(|| {
        raise(CbError::new(SqlState::NullValueNotAllowed, "job_id must not be NULL").with_hint("Pass the job's id."))
    });
    let relpath = relpath.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, "relpath must not be NULL")
                .with_hint("Pass the file's path below the sessions directory (<job_id>/session-001.jsonl)."),
        )
    });
    let size = size.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, "size must not be NULL")
                .with_hint("Pass the file's size as the agent wrote it."),
        )
    });
    let (job_dir, _, _) =
        check_relpath(relpath).map_err(|why| invalid(&format!("relpath \"{relpath}\""), why)).or_raise();
    if job_dir != job.to_string() {
        raise(invalid("relpath", format!("\"{relpath}\" is not a file of job {job}")));
    }
    let timeout_us = interval_us(timeout).unwrap_or(5_000_000);
    if !(0..=3_600_000_000).contains(&timeout_us) {
        raise(invalid("timeout", "it must be between 0 and 1 hour".into()));
    }
    let deadline = Instant::now() + Duration::from_micros(u64::try_from(timeout_us).unwrap_or(0));
    crate::job::authority::act(job, || {
        loop {
            let have = with_fresh_snapshot(|| {
                as_definer(|| {
                    Spi::connect(|c| {
                        let rows = c
                            .select(
                                "SELECT f.indexed_offset OPERATOR(pg_catalog.+) p.held_len, p.file_id
                                   FROM cortex_buffer.pushed_file p
                                   JOIN cortex_buffer.session_file f ON f.file_id OPERATOR(pg_catalog.=) p.file_id
                                  WHERE p.job_id OPERATOR(pg_catalog.=) $1 AND p.relpath OPERATOR(pg_catalog.=) $2
                                  ORDER BY p.n DESC LIMIT 1",
                                Some(1),
                                &[job.into(), relpath.into()],
                            )
                            .map_err(spi)?;
                        Ok(rows
                            .into_iter()
                            .next()
                            .and_then(|r| Some((r.get::<i64>(1).ok().flatten()?, r.get::<i64>(2).ok().flatten()?))))
                    })
                })
            })?;
            if let Some((_, file_id)) = have.filter(|(h, _)| *h >= size) {
                record_flushed(file_id, size)?;
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            // SAFETY: pg_usleep and the interrupt check are plain backend calls on the main thread.
            unsafe { pgrx::pg_sys::pg_usleep(i64::try_from(AWAIT_EVERY.as_micros()).unwrap_or(5000)) };
            pgrx::check_for_interrupts!();
        }
    })
    .or_raise()
}

/// Keeps the pod's word that file `file_id` was `size` bytes long when it flushed it: a
/// checkpoint's high-water mark taken while the server holds exactly that is the file's own
/// (`cortex_buffer_core::recovery::marks::entry_exact`). A read-only transaction records nothing.
fn record_flushed(file_id: i64, size: i64) -> Result<(), CbError> {
    // SAFETY: reads of backend-global flags.
    if unsafe { pgrx::pg_sys::XactReadOnly || pgrx::pg_sys::RecoveryInProgress() } {
        return Ok(());
    }
    as_definer(|| {
        Spi::connect_mut(|c| {
            c.update(
                "UPDATE cortex_buffer.pushed_file SET flushed_size = $2
                  WHERE file_id OPERATOR(pg_catalog.=) $1
                    AND (flushed_size IS NULL OR flushed_size OPERATOR(pg_catalog.<>) $2)",
                None,
                &[file_id.into(), size.into()],
            )
            .map(|_| ())
            .map_err(spi)
        })
    })
}

extension_sql_file!("schema.sql", name = "push_schema", requires = ["indexer_schema"]);
extension_sql_file!("api.sql", name = "push_api", requires = ["push_schema", pushed_offsets, await_pushed]);
