//! Retention: `cleanup_session_buffers()` deletes the session buffers the policy no longer
//! keeps (job directories, old files, and their index rows, in that transaction, with the files
//! unlinked at its commit) and the extension's per-job rows of jobs long gone;
//! `storage_report()` says what the volume and the index hold and what the next cleanup would
//! free. The rules are `cortex_buffer_core::retention`; the deletions on disk,
//! `cortex_buffer_watch::remove`.

mod at_once;
mod cleanup;
mod index_only;
mod index_rows;
mod job_rows;
mod jobs;
mod partitions;
mod progress;
mod report;
mod sql;
mod state;
mod unlink;

#[cfg(any(test, feature = "pg_test"))]
mod retention_pg_tests;

pgrx::extension_sql_file!(
    "api.sql",
    name = "retention_api",
    requires = ["indexer_schema", sql::cleanup_session_buffers, sql::storage_report]
);
