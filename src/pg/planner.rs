//! Plans that do not depend on how small a table looks to the planner.
//!
//! `checkpoint_history` churns: every write deletes a job's oldest entry. Dead index entries
//! stay until vacuum, and a bitmap index scan visits (and never marks) every one of them, so a
//! "cheap" bitmap plan chosen for a small-looking table gets slower with every write. A plain
//! index scan in `history_id DESC` order stops at the live entries and marks the dead ones it
//! passes so later scans skip them. Our statements are all index lookups, so their plans are
//! made with sequential and bitmap scans disabled — scoped to the call, exactly as
//! `CREATE FUNCTION ... SET` scopes settings, and restored even on error (transaction abort
//! unwinds the GUC stack).

use pgrx::pg_sys;

/// Runs `f` with `enable_seqscan` and `enable_bitmapscan` off.
pub fn with_index_scans<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: the same calls fmgr_security_definer makes for a function's SET clauses; names
    // and values are static NUL-terminated strings; these settings are user-settable.
    let level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for name in [c"enable_seqscan", c"enable_bitmapscan"] {
            pg_sys::set_config_option(
                name.as_ptr(),
                c"off".as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        level
    };
    let result = f();
    // SAFETY: pops exactly the nest level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    result
}
