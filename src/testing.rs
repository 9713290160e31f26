//! Helpers shared by the `#[pg_test]`s.

use pgrx::prelude::*;

use crate::error::CbError;
use crate::pg::xact::subtransaction;

/// The control plane's own job table, recreated in schema `cp` (see the file).
pub const CONTROL_PLANE_FIXTURE: &str = include_str!("../pgrx-tests/fixtures/control_plane_job.sql");

/// The two bindings every job-table test runs against.
pub const BINDINGS: [&str; 2] = ["cortex_buffer.job", "cp.job"];

/// Creates the control-plane fixture, then runs `body` once per binding with
/// `cortex_buffer.job_table` set to it.
pub fn with_each_binding(body: impl Fn(&str)) {
    run(CONTROL_PLANE_FIXTURE);
    for table in BINDINGS {
        run(&format!("SET cortex_buffer.job_table = '{table}'"));
        body(table);
    }
    run("RESET cortex_buffer.job_table");
}

/// Inserts a job in `status` into `table` (with an agent row when the table needs one) and
/// returns its id.
pub fn new_job(table: &str, status: &str) -> String {
    let agent = if table == "cp.job" {
        one("INSERT INTO cp.agent DEFAULT VALUES RETURNING id::text")
    } else {
        one("SELECT gen_random_uuid()::text")
    };
    one(&format!(
        "INSERT INTO {table} (agent_id, status, payload) VALUES ('{agent}', '{status}', '{{}}') RETURNING id::text"
    ))
}

/// Like [`new_job`], with more columns: `cols` and `vals` are appended to the column and value
/// lists (inserting is the only way to put `updated_at` in the past: updates set it to now()).
pub fn new_job_with(table: &str, status: &str, cols: &str, vals: &str) -> String {
    let agent = if table == "cp.job" {
        one("INSERT INTO cp.agent DEFAULT VALUES RETURNING id::text")
    } else {
        one("SELECT gen_random_uuid()::text")
    };
    one(&format!(
        "INSERT INTO {table} (agent_id, status, payload, {cols}) VALUES ('{agent}', '{status}', '{{}}', {vals}) RETURNING id::text"
    ))
}

pub fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The single text value `sql` returns (empty string for NULL).
pub fn one(sql: &str) -> String {
    Spi::get_one::<String>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_default()
}

/// Runs `sql` in a subtransaction; returns the SQLSTATE ("00000" on success) and the HINT.
pub fn sqlstate_of(sql: &str) -> (String, Option<String>) {
    match subtransaction(|| Spi::run(sql).map_err(|e| CbError::internal(e.to_string()))) {
        Ok(()) => ("00000".into(), None),
        Err(f) => (f.sqlstate(), f.hint().map(str::to_owned)),
    }
}

/// Asserts that `sql` fails with `state` and a HINT.
pub fn assert_fails(sql: &str, state: &str) {
    let (got, hint) = sqlstate_of(sql);
    assert_eq!(got, state, "SQLSTATE of {sql}");
    assert!(hint.is_some(), "no HINT for {sql}");
}
