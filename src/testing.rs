//! Helpers shared by the `#[pg_test]`s.

use pgrx::prelude::*;

use crate::pg::xact::subtransaction;
use cortex_buffer_core::error::CbError;

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

/// Tests that change `cortex_buffer.event`'s definition (its DDL, the partitioned layout) take
/// this lock first: they run one at a time, since two that hold the table and wait for each
/// other's other locks would deadlock.
pub fn event_ddl_one_at_a_time() {
    run("SELECT pg_advisory_xact_lock(7431)");
}

/// Inserts a job in `status` into `table` (with an agent row when the table needs one) and
/// returns its id.
pub fn new_job(table: &str, status: &str) -> String {
    insert_job(table, status, "", "")
}

/// Like [`new_job`], with more columns: `cols` and `vals` are appended to the column and value
/// lists (inserting is the only way to put `updated_at` in the past: updates set it to now()).
pub fn new_job_with(table: &str, status: &str, cols: &str, vals: &str) -> String {
    insert_job(table, status, &format!(", {cols}"), &format!(", {vals}"))
}

fn insert_job(table: &str, status: &str, more_cols: &str, more_vals: &str) -> String {
    let agent = if table == "cp.job" {
        one("INSERT INTO cp.agent DEFAULT VALUES RETURNING id::text")
    } else {
        one("SELECT gen_random_uuid()::text")
    };
    one(&format!(
        "INSERT INTO {table} (agent_id, status, payload{more_cols}) VALUES ('{agent}', '{status}', '{{}}'{more_vals}) RETURNING id::text"
    ))
}

/// The spend calls an agent makes for `job`: record a call, check the budget, reserve and
/// settle, reserve and release (Sonnet prices, a small usage).
pub fn spend_calls(job: &str) -> [String; 4] {
    let sonnet = "claude-sonnet-4-5-20250929";
    let usage = r#"{"input_tokens": 1000, "output_tokens": 5}"#;
    [
        format!("SELECT * FROM cortex_buffer.record_usage('{job}', '{sonnet}', '{usage}', 'r1')"),
        format!("SELECT * FROM cortex_buffer.check_token_budget('{job}')"),
        format!(
            "SELECT cortex_buffer.settle_usage(reservation_id, '{usage}') FROM cortex_buffer.reserve_budget('{job}', '{usage}', '{sonnet}')"
        ),
        format!(
            "SELECT cortex_buffer.release_reservation(reservation_id) FROM cortex_buffer.reserve_budget('{job}', '{usage}', '{sonnet}')"
        ),
    ]
}

pub fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The single text value `sql` returns (empty string for NULL).
pub fn one(sql: &str) -> String {
    Spi::get_one::<String>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_default()
}

/// Runs `sql` in a subtransaction; returns the SQLSTATE, HINT and DETAIL of its error, if any.
pub fn error_of(sql: &str) -> Option<(String, Option<String>, Option<String>)> {
    subtransaction(|| Spi::run(sql).map_err(|e| CbError::internal(e.to_string())))
        .err()
        .map(|f| (f.sqlstate(), f.hint().map(str::to_owned), f.detail().map(str::to_owned)))
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

/// A directory of session files for a test, removed when dropped.
pub struct TempRoot(pub std::path::PathBuf);

impl TempRoot {
    pub fn new(tag: &str) -> TempRoot {
        Self::at(std::env::temp_dir().join(format!("cb-pgtest-{tag}-{}", std::process::id())))
    }

    /// A fresh, empty directory at `path`.
    pub fn at(path: impl Into<std::path::PathBuf>) -> TempRoot {
        let p: std::path::PathBuf = path.into();
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{e}"));
        TempRoot(std::fs::canonicalize(&p).unwrap_or(p))
    }

    /// Writes `body` to `rel` (creating directories).
    pub fn put(&self, rel: &str, body: impl AsRef<[u8]>) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(&self.0)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p, body).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Appends `body` to `rel`.
    pub fn append(&self, rel: &str, body: impl AsRef<[u8]>) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.0.join(rel))
            .unwrap_or_else(|e| panic!("{e}"));
        f.write_all(body.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    }

    pub fn path(&self, rel: &str) -> String {
        self.0.join(rel).display().to_string()
    }

    pub fn dir(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Keeps a JSON answer a test got (a plan, a row), so that `schemas/validate.mjs` can check it
/// against the schema `kind` names (`recovery_plan`, `session_recovery`, `agent_state`,
/// `job_timeline`). Written to `answers/pg_test/` in the parent of the test cluster's data
/// directory (`cargo pgrx test` makes it under `--pgdata`: scripts/test.sh validates
/// `.work/pgrx-test/data/answers`); nothing when that directory cannot be made.
pub fn keep_answer(kind: &str, json: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // SAFETY: DataDir is set once at startup, before any backend runs a test.
    let data = unsafe { std::ffi::CStr::from_ptr(pgrx::pg_sys::DataDir) };
    let Some(parent) = std::path::Path::new(&*data.to_string_lossy()).parent().map(|p| p.join("answers/pg_test"))
    else {
        return;
    };
    if std::fs::create_dir_all(&parent).is_err() {
        return;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let _ = std::fs::write(parent.join(format!("{kind}-{}-{n}.json", std::process::id())), json);
}

/// Keeps every row `sql` returns as one JSON answer each (`SELECT row_to_json(r) FROM … r`).
pub fn keep_rows(kind: &str, sql: &str) {
    let rows: Vec<String> = Spi::connect(|c| {
        c.select(&format!("SELECT row_to_json(r)::text FROM ({sql}) r"), None, &[])
            .map(|t| t.filter_map(|r| r.get::<String>(1).ok().flatten()).collect())
            .unwrap_or_default()
    });
    for r in rows {
        keep_answer(kind, &r);
    }
}
