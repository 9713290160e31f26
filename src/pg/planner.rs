//! The settings a cortex_buffer function runs its statements with, scoped to the call exactly
//! as `CREATE FUNCTION ... SET` scopes them, and restored even on error (transaction abort
//! unwinds the GUC stack):
//!
//! - `search_path = pg_catalog, pg_temp`, always. A function running with its caller's rights
//!   must not resolve an operator or function through the caller's path: whoever can create
//!   objects in a schema on it (`public`, or the database owner with `ALTER DATABASE ... SET`)
//!   could otherwise put an overload there — `=(job_status, job_status)`, `*(numeric, integer)`
//!   — that the statement would run as the caller (often a superuser's cron job). Statements
//!   are schema-qualified as well; the pinned path is what makes a missed one harmless.
//! - `enable_seqscan` and `enable_bitmapscan` off, for the statements that are index lookups
//!   on churning tables: `checkpoint_history` loses a job's oldest entry on every write, and a
//!   bitmap index scan visits (and never marks) every dead entry, so a "cheap" bitmap plan
//!   chosen for a small-looking table gets slower with every write. A plain index scan in
//!   `history_id DESC` order stops at the live entries and marks the dead ones it passes.
//! - `plan_cache_mode = force_generic_plan` with them: every statement is a lookup by key that
//!   the index serves whatever the parameters, and a custom plan (which PostgreSQL keeps choosing
//!   for some of them, their subquery making the generic plan look dearer) costs a planning per
//!   call: it was a tenth of `recovery_plan`.
//!   A push's statements run this way too (`push::apply`): they find rows by key and unnest
//!   their batch's arrays. Generic plans alone were tried first (custom plans cost a planning of
//!   each statement per call, half the time of a batch of one): the generic plan, made while
//!   the tables were small and the batch estimated at 10 rows, hash-joined the batch to
//!   sequential scans of `pushed_file`, `pushed_held` and `session_file`, so every push read
//!   every pushed file's rows, 1.3x 0.17.0's time at 1 000 files and growing with the table.
//! - `jit` off, always: the statements are small lookups, and a disabled sequential scan's cost
//!   (10^10) would otherwise cross `jit_above_cost` and spend ~100 ms compiling each one.

use pgrx::pg_sys;

fn set(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // SAFETY: the same call fmgr_security_definer makes for a function's SET clauses; names and
    // values are static NUL-terminated strings; these settings are user-settable.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
}

fn scoped<R>(index_scans_only: bool, f: impl FnOnce() -> R) -> R {
    // SAFETY: pushes a GUC nest level, popped below (or by the transaction's abort).
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    set(c"search_path", c"pg_catalog, pg_temp");
    set(c"jit", c"off");
    if index_scans_only {
        set(c"enable_seqscan", c"off");
        set(c"enable_bitmapscan", c"off");
        set(c"plan_cache_mode", c"force_generic_plan");
    }
    let result = f();
    // SAFETY: pops exactly the nest level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    result
}

/// Runs `f` with `search_path` pinned to `pg_catalog, pg_temp`.
pub fn pinned<R>(f: impl FnOnce() -> R) -> R {
    scoped(false, f)
}

/// Runs `f` with `search_path` pinned and sequential and bitmap scans off.
pub fn with_index_scans<R>(f: impl FnOnce() -> R) -> R {
    scoped(true, f)
}
