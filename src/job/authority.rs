//! Per-job authority: which job a session may act on.
//!
//! Fleet roles (a superuser, or a role with the privileges of `cortex_buffer_control_plane` or
//! `cortex_buffer_operator`) act on every job, with their own rights, as before. Any other
//! caller of a per-job function (an agent pod) must present the job token of that job's
//! current attempt in `cortex_buffer.job_token`; the call then runs as `cortex_buffer_agent_call`,
//! which holds the job-table and index privileges the agent role no longer has (reads, and the
//! job table's agent columns), while the secret is read as the definer role alone. So a bound
//! table's triggers, which run as the agent-call role during an agent's call, cannot read the
//! secret or write the extension's own tables. So one agent login
//! shared by thousands of pods acts on one job per session, and the pod of an earlier attempt
//! is refused as soon as the job is dispatched again. What a token proves, and the refusals'
//! words, are pure (`cortex_buffer_core::job::token`); this module holds the proof against the
//! job asked about and its row's attempt (`verify`).

use std::path::{Component, Path};

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::Uuid;

use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::job::token::{self, Claims};
use cortex_buffer_core::shared::{format_uuid, parse_uuid};

use crate::job::binding::{self, Access};
use crate::pg::guc;
use crate::pg::planner::pinned;
use crate::pg::privilege::{agent_call_role, as_definer, caller_is_superuser, role_oid, running_as_definer};
use crate::pg::spi_util::{prepared_read, spi};

const FLEET_ROLES: [&str; 2] = ["cortex_buffer_control_plane", "cortex_buffer_operator"];
const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);

/// Whether the caller acts fleet-wide: a superuser, or a role with the privileges of the
/// control-plane or operator role.
pub fn fleet_caller() -> bool {
    // SAFETY: reads the current user.
    caller_is_superuser() || fleet_role(unsafe { pg_sys::GetUserId() })
}

/// Whether `user` has the privileges of a fleet role.
fn fleet_role(user: pg_sys::Oid) -> bool {
    // SAFETY: a membership check of two existing roles.
    FLEET_ROLES.iter().filter_map(|name| role_oid(name)).any(|role| unsafe { pg_sys::has_privs_of_role(user, role) })
}

/// `authorize_job()`: whether this session may act on `job`, for SQL callers (a pod checking
/// its token at start, and `job_events`, which runs as the definer role and so asks about the
/// session's role instead). True, or 42501 with what to do.
pub fn authorize(job: Uuid) -> Result<bool, CbError> {
    // SAFETY: reads the current and outer user.
    let outer_fleet = running_as_definer()
        && unsafe { pg_sys::superuser_arg(pg_sys::GetOuterUserId()) || fleet_role(pg_sys::GetOuterUserId()) };
    if fleet_caller() || outer_fleet {
        return Ok(true);
    }
    act(job, || Ok(true))
}

/// Runs `f` for `job`: as the caller for a fleet role; for anyone else, only with this
/// session's token for the job's current attempt, and then as the agent-call role (the token is
/// checked under it, as the job's row is read with its rights).
pub fn act<R>(job: Uuid, f: impl FnOnce() -> Result<R, CbError>) -> Result<R, CbError> {
    if fleet_caller() {
        return f();
    }
    let _agent_call = agent_call_role()?;
    verify(*job.as_bytes(), true)?;
    f()
}

/// Runs `f` on the session file at `path` (absolute, as `file_access::absolute` makes it): a
/// fleet role as itself; anyone else only for a file in its own job's directory, as `act`.
pub fn act_on_file<R>(path: &str, f: impl FnOnce() -> Result<R, CbError>) -> Result<R, CbError> {
    if fleet_caller() {
        return f();
    }
    let Some(dir_job) = job_of_path(path) else {
        return Err(CbError::new(SqlState::InsufficientPrivilege, format!("\"{path}\" is in no job's directory"))
            .with_hint("An agent session reads its own job's session files only (<sessions_dir>/<job id>/...); other files and transcripts are for the control plane and operators."));
    };
    if token::named_job(&guc::job_token()).is_some_and(|j| j != dir_job) {
        return Err(CbError::new(
            SqlState::InsufficientPrivilege,
            format!("\"{path}\" is not in this session's job directory"),
        )
        .with_hint(
            "A pod may read its own job's session files only: <sessions_dir>/<job id>/..., the job its token names.",
        ));
    }
    // No token, a malformed one, or this directory's job's: checked (and refused) as for the job.
    act(Uuid::from_bytes(dir_job), f)
}

/// Runs a lookup that starts from something other than a job id (a session id, a reservation):
/// a fleet role as itself, unscoped (`f(None)`); anyone else only with a genuine token of its
/// job's current attempt, as the agent-call role, scoped to that job (`f(Some(job))`: what lies
/// outside it is, for this session, not there). A session with no token, or one that is not a
/// token, is refused before anything is looked up, with an error that names no job: the answer
/// is the same whatever it asked about.
pub fn in_own_job<R>(f: impl FnOnce(Option<[u8; 16]>) -> Result<R, CbError>) -> Result<R, CbError> {
    if fleet_caller() {
        return f(None);
    }
    let presented = guc::job_token();
    let Some(job) = token::named_job(&presented).filter(|_| token::well_formed(&presented)) else {
        return Err(token::unscoped_refusal(&presented));
    };
    act(Uuid::from_bytes(job), || f(Some(job)))
}

/// The prefix of the paths of `job`'s files, as the index holds them (`<sessions root>/<job id>/`).
pub fn job_dir_prefix(job: [u8; 16]) -> String {
    format!("{}/{}/", sessions_root().display(), format_uuid(&job))
}

/// `sessions_dir` as the index's paths begin: resolved, as the indexer resolves it.
fn sessions_root() -> std::path::PathBuf {
    cortex_buffer_watch::scan::resolve_root(&guc::sessions_dir())
        .map(|v| v.path().to_path_buf())
        .unwrap_or_else(|_| guc::sessions_dir().into())
}

/// The job whose directory holds `path`: its first component below `sessions_dir`, when that
/// is a job id and no component is `.` or `..`.
fn job_of_path(path: &str) -> Option<[u8; 16]> {
    let root = sessions_root();
    let rel = Path::new(path).strip_prefix(&root).ok()?;
    let mut parts = rel.components();
    let first = match parts.next()? {
        Component::Normal(c) => c.to_str()?,
        _ => return None,
    };
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    parse_uuid(first)
}

/// The whole authorisation of an agent's call on `job`, in one place: this session's token is
/// opened ([`token::open`]: present, shaped like one, its MAC checked once, under the secret,
/// which is read as the definer role alone may, and only for a token shaped like one); it must
/// name `job`, and, when `read_row`, the job row's current attempt (read only for a genuine token
/// of this job) must be the token's. Returns what the token proves, for a call that checks the
/// attempt on the row it reads itself.
fn verify(job: [u8; 16], read_row: bool) -> Result<Claims, CbError> {
    let presented = guc::job_token();
    let secret = if token::well_formed(&presented) { as_definer(|| Spi::connect(key))? } else { None };
    let claims = token::open(secret.as_deref(), &presented)?;
    if claims.job() != job {
        return Err(claims.other_job());
    }
    if read_row {
        claims.current(attempt_of(job)?)?;
    }
    Ok(claims)
}

/// `job`'s current attempt, with the caller's rights (none: no such job; a NULL attempt is 0, as
/// job_token() issues it).
fn attempt_of(job: [u8; 16]) -> Result<Option<i32>, CbError> {
    let b = binding::current()?;
    Spi::connect(|client| {
        let stmt = b.statement(client, "authority.attempt", Access::Read, &[UUID], |b| {
            format!("SELECT attempt FROM {} WHERE id OPERATOR(pg_catalog.=) $1", b.table)
        })?;
        let rows = client.select(&*stmt, Some(1), &[Uuid::from_bytes(job).into()]).map_err(spi)?;
        match rows.into_iter().next() {
            Some(r) => Ok(Some(r.get::<i32>(1).map_err(spi)?.unwrap_or(0))),
            None => Ok(None),
        }
    })
}

/// What a call that reads the job's row itself must check of it: nothing for a fleet role, the
/// attempt its token was issued for for an agent.
#[derive(Clone, Copy)]
pub struct Attempt(Option<Claims>);

impl Attempt {
    /// Ok when the row's attempt (none: no row) is the one the caller may act on; 42501 (the
    /// pod is superseded) otherwise. The caller's statement is then undone with the error.
    pub fn matches(self, row_attempt: Option<i32>) -> Result<(), CbError> {
        match self.0 {
            Some(claims) => claims.current(row_attempt).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// `act` for a call whose own statement returns the job's row: the token is checked first
/// (genuine, this job's), and the attempt by `f` through `Attempt::matches` on the row it reads,
/// which saves reading the row twice on the hottest calls.
pub fn act_on_row<R>(job: Uuid, f: impl FnOnce(Attempt) -> Result<R, CbError>) -> Result<R, CbError> {
    if fleet_caller() {
        return f(Attempt(None));
    }
    let _agent_call = agent_call_role()?;
    let claims = verify(*job.as_bytes(), false)?;
    f(Attempt(Some(claims)))
}

const KEY_SQL: &str = "SELECT secret FROM cortex_buffer.job_token_key";

/// The installation's token secret, if one was made (the caller runs as the definer role).
fn key(client: &SpiClient<'_>) -> Result<Option<Vec<u8>>, CbError> {
    let stmt = prepared_read(client, "authority.key", || KEY_SQL.to_owned(), &[])?;
    let rows = client.select(&*stmt, Some(1), &[]).map_err(spi)?;
    match rows.into_iter().next() {
        Some(r) => r.get::<Vec<u8>>(1).map_err(spi),
        None => Ok(None),
    }
}

/// The token of `job`'s current attempt, making the installation's secret on first use.
/// Fleet roles only.
pub fn issue(job: Uuid) -> Result<String, CbError> {
    if !fleet_caller() {
        return Err(CbError::new(
            SqlState::InsufficientPrivilege,
            "only the control plane or an operator issues job tokens",
        )
        .with_hint("Grant cortex_buffer_control_plane to the role that dispatches jobs."));
    }
    let b = binding::current()?;
    // The attempt with the caller's rights (the control plane reads its job table); the secret
    // as the definer role.
    let attempt = pinned(|| {
        Spi::connect(|client| {
            let stmt = b.statement(client, "authority.attempt", Access::Read, &[UUID], |b| {
                format!("SELECT attempt FROM {} WHERE id OPERATOR(pg_catalog.=) $1", b.table)
            })?;
            let rows = client.select(&*stmt, Some(1), &[job.into()]).map_err(spi)?;
            let Some(row) = rows.into_iter().next() else { return Err(b.no_such_job(job)) };
            Ok(row.get::<i32>(1).map_err(spi)?.unwrap_or(0))
        })
    })?;
    let secret = installation_secret()?;
    Ok(token::issue(&secret, job.as_bytes(), attempt))
}

/// The installation's token secret (job and source tokens), made on first use: read and written
/// as the definer role, which alone may. For issuers only: fleet roles' calls.
pub fn installation_secret() -> Result<Vec<u8>, CbError> {
    pinned(|| {
        as_definer(|| {
            Spi::connect_mut(|client| {
                if let Some(s) = key(client)? {
                    return Ok(s);
                }
                let mut fresh = [0u8; 32];
                // SAFETY: fills the local buffer of the given length.
                if !unsafe { pg_sys::pg_strong_random(fresh.as_mut_ptr().cast(), fresh.len()) } {
                    return Err(CbError::internal("no strong random source for the token secret"));
                }
                // Concurrent first issuers: the first secret stored wins, all use it (the loser's
                // read-write statement sees the winner's committed row).
                let stored = client
                    .update(
                        "INSERT INTO cortex_buffer.job_token_key (secret) VALUES ($1) ON CONFLICT DO NOTHING
                         RETURNING secret",
                        None,
                        &[fresh.to_vec().into()],
                    )
                    .map_err(spi)?;
                match stored.into_iter().next() {
                    Some(r) => r.get::<Vec<u8>>(1).map_err(spi)?,
                    None => client
                        .update(KEY_SQL, Some(1), &[])
                        .map_err(spi)?
                        .next()
                        .map(|r| r.get::<Vec<u8>>(1).map_err(spi))
                        .transpose()?
                        .flatten(),
                }
                .ok_or_else(|| CbError::internal("the token secret was not stored"))
            })
        })
    })
}
