//! cortex_buffer: durable, verifiable execution state for an LLM-agent control plane, inside
//! the PostgreSQL database it already runs.
//!
//! This crate is the thin pgrx shell: SQL functions, tables, settings, SPI and the background
//! worker. Everything that decides, parses or computes is in `cortex_buffer_core`
//! (`crates/core`, pure), and everything that touches the sessions volume is in
//! `cortex_buffer_watch` (`crates/watch`). One module per capability (`checkpoint`,
//! `liveness`, `spend`, `indexer`, `push`, `recovery`, with `job` for the bound job table), each with
//! its SQL functions in `sql`; `pg` holds the shared plumbing (errors, settings, transactions,
//! jsonb access) and knows no capability; `worker` is the background worker process.

use pgrx::prelude::*;

::pgrx::pg_module_magic!(name, version);

pub mod checkpoint;
pub mod indexer;
pub mod job;
pub mod liveness;
pub mod partition;
pub mod pg;
pub mod push;
pub mod recovery;
pub mod retention;
pub mod spend;
pub mod worker;

#[cfg(any(test, feature = "pg_test"))]
mod schema_pg_tests;
#[cfg(any(test, feature = "pg_test"))]
mod security_pg_tests;
#[cfg(any(test, feature = "pg_test"))]
pub mod testing;

extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
// Grants and revokes of every object, once all exist.
extension_sql_file!("../sql/privileges.sql", name = "privileges", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // A panic's message becomes an ERROR; a Rust backtrace must not ride along in its DETAIL to
    // whoever called, whatever RUST_BACKTRACE the postmaster inherited (it names the code and
    // its layout). RUST_LIB_BACKTRACE outranks RUST_BACKTRACE for captured backtraces; set
    // here, before any capture, in the postmaster (inherited by every backend) or the backend.
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    pg::guc::define();
    // SAFETY: reading a flag Postgres sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        worker::register();
        push::rate::init();
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // Preload like production; keep the worker idle so it never races the tests' own
        // index_sessions() calls (the end-to-end suite in pgrx-tests/ exercises it).
        vec![
            "shared_preload_libraries = 'cortex_buffer'",
            "cortex_buffer.worker_enabled = off",
            // Tests that run as non-superusers (who may not pass dir) index this directory.
            "cortex_buffer.sessions_dir = '/tmp/cortex_buffer-pgtest-sessions'",
        ]
    }
}
