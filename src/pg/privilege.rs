//! Whose rights a statement runs with.
//!
//! cortex_buffer's SQL functions run with their caller's rights (statements on a bound job
//! table keep its grants, row security and triggers). Writes to the extension's own tables
//! — the controls the calling roles are governed by: spend, breakers, crash history,
//! checkpoint history, the transcript index — go through [`as_definer`], which switches to
//! `cortex_buffer_definer` (NOLOGIN, not a superuser, holding exactly those tables' privileges)
//! for the statements inside, exactly as a `SECURITY DEFINER` function owned by that role
//! would, so the calling roles need no write privilege on those tables. The background worker
//! runs all its transactions as that role too: it never runs anyone's code as a superuser.
//!
//! The superuser-only cases (`index_sessions(dir)`, `file_integrity()` of a path outside
//! `sessions_dir`) require the current *and* the outer user to be superusers, and refuse
//! inside a security-restricted operation (a `REFRESH MATERIALIZED VIEW` or an expression
//! index's `ANALYZE` run by a superuser executes the view's or index's owner's code).

use std::ffi::CString;

use pgrx::pg_sys;

use cortex_buffer_core::error::{CbError, SqlState};

/// The role the extension's own writes run as.
pub const DEFINER_ROLE: &str = "cortex_buffer_definer";

/// Whether the caller may do what only superusers may.
pub fn caller_is_superuser() -> bool {
    // SAFETY: reads of the backend's current user state.
    unsafe {
        !pg_sys::InSecurityRestrictedOperation()
            && pg_sys::superuser_arg(pg_sys::GetUserId())
            && pg_sys::superuser_arg(pg_sys::GetOuterUserId())
    }
}

/// A role's OID by name, when it exists.
pub fn role_oid(name: &str) -> Option<pg_sys::Oid> {
    let name = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name; missing_ok returns InvalidOid instead of raising.
    let oid = unsafe { pg_sys::get_role_oid(name.as_ptr(), true) };
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// The definer role's OID.
pub fn definer_oid() -> Result<pg_sys::Oid, CbError> {
    role_oid(DEFINER_ROLE).ok_or_else(|| {
        CbError::new(SqlState::UndefinedObject, format!("role \"{DEFINER_ROLE}\" does not exist"))
            .with_hint("CREATE EXTENSION cortex_buffer creates it; it was dropped since. Re-create it (CREATE ROLE cortex_buffer_definer NOLOGIN) and run the extension's grants again, or reinstall the extension.")
    })
}

/// A switched current user: restores the previous user and security context when dropped (also
/// while unwinding: setting them is a plain assignment, safe at any point; a transaction abort
/// would restore them anyway).
#[must_use = "the previous user comes back when the guard is dropped"]
pub struct RoleGuard {
    user: pg_sys::Oid,
    context: i32,
}

impl Drop for RoleGuard {
    fn drop(&mut self) {
        // SAFETY: restores exactly what GetUserIdAndSecContext returned.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

thread_local! {
    /// The extension (by OID) whose installed version was found to be the library's.
    static VERSION_CHECKED: std::cell::Cell<pg_sys::Oid> = const { std::cell::Cell::new(pg_sys::InvalidOid) };
}

/// Refuses to write with a library newer than the installed extension: until `ALTER EXTENSION
/// cortex_buffer UPDATE` runs, the tables (and the definer role's grants) are the old version's.
/// Checked once per backend and extension.
fn check_installed_version() -> Result<(), CbError> {
    // SAFETY: a catalog lookup by name; missing_ok.
    let ext = unsafe { pg_sys::get_extension_oid(c"cortex_buffer".as_ptr(), true) };
    if ext != pg_sys::InvalidOid && VERSION_CHECKED.with(std::cell::Cell::get) == ext {
        return Ok(());
    }
    let installed = pgrx::Spi::get_one::<String>(
        "SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'cortex_buffer'",
    )
    .map_err(|e| CbError::internal(format!("SPI: {e}")))?;
    let library = env!("CARGO_PKG_VERSION");
    match installed {
        Some(v) if v == library => {
            VERSION_CHECKED.with(|c| c.set(ext));
            Ok(())
        }
        Some(v) => Err(CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the installed cortex_buffer extension is version {v}, older than its library ({library})"),
        )
        .with_hint("Run ALTER EXTENSION cortex_buffer UPDATE in this database.")),
        None => Err(CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            "extension cortex_buffer is not installed in this database",
        )
        .with_hint("Run CREATE EXTENSION cortex_buffer.")),
    }
}

/// The role an agent's authorised call runs as: it reads what the lookups read and writes the
/// job table's agent columns, and nothing else (not the token secret, not the spend tables,
/// which its statements reach through `as_definer` like everyone's).
pub const AGENT_CALL_ROLE: &str = "cortex_buffer_agent_call";

/// The agent-call role's OID.
pub fn agent_call_oid() -> Result<pg_sys::Oid, CbError> {
    role_oid(AGENT_CALL_ROLE).ok_or_else(|| {
        CbError::new(SqlState::UndefinedObject, format!("role \"{AGENT_CALL_ROLE}\" does not exist"))
            .with_hint("ALTER EXTENSION cortex_buffer UPDATE (or CREATE EXTENSION) creates it; it was dropped since. Re-create it (CREATE ROLE cortex_buffer_agent_call NOLOGIN) and run the extension's grants again, or reinstall the extension.")
    })
}

/// Makes the agent-call role (see `AGENT_CALL_ROLE`) the current user, switched as `as_definer`
/// does, until the guard returned is dropped: a per-job call then authorises and runs under it in
/// one place (`job::authority::act`).
pub fn agent_call_role() -> Result<RoleGuard, CbError> {
    check_installed_version()?;
    Ok(switch_to(agent_call_oid()?))
}

/// The current user.
pub fn current_user() -> pg_sys::Oid {
    // SAFETY: reads the current user.
    unsafe { pg_sys::GetUserId() }
}

/// Runs `f` with the definer role as the current user (`SECURITY_LOCAL_USERID_CHANGE`, as a
/// `SECURITY DEFINER` function does); the previous user is restored afterwards, also when
/// switches nest.
pub fn as_definer<R>(f: impl FnOnce() -> Result<R, CbError>) -> Result<R, CbError> {
    check_installed_version()?;
    as_user(definer_oid()?, f)
}

/// Runs `f` as `role` (an OID the caller has looked up, such as the role a stream was started
/// as), restoring the previous user and security context afterwards.
pub fn as_user<R>(role: pg_sys::Oid, f: impl FnOnce() -> Result<R, CbError>) -> Result<R, CbError> {
    let _restore = switch_to(role);
    f()
}

/// Makes `role` the current user (`SECURITY_LOCAL_USERID_CHANGE` added to the security context)
/// until the guard returned is dropped.
fn switch_to(role: pg_sys::Oid) -> RoleGuard {
    let mut user = pg_sys::InvalidOid;
    let mut context = 0;
    // SAFETY: reads the current user and security context into locals.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    let restore = RoleGuard { user, context };
    // SAFETY: the role exists (looked up by the caller); the previous state is restored when the
    // guard is dropped.
    unsafe {
        pg_sys::SetUserIdAndSecContext(role, context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    }
    restore
}

/// Whether the current user is the definer role (inside `as_definer`, or a function it owns).
pub fn running_as_definer() -> bool {
    // SAFETY: reads the current user.
    definer_oid().is_ok_and(|role| unsafe { pg_sys::GetUserId() } == role)
}
