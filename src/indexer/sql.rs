//! SQL functions of the session-buffer capability: `index_sessions()` runs the worker's pass
//! synchronously (`indexing::pass`, each file in a subtransaction). The worker's own SQL face
//! (`index_now`, `indexer_worker`) is in `worker::sql`.

use pgrx::prelude::*;

use super::indexing;
use crate::pg::guc;
use crate::pg::planner::pinned;
use crate::pg::privilege::{as_definer, caller_is_superuser};
use crate::pg::raise::raise;
use crate::pg::spi_util::{spi, FirstValue};
use crate::pg::xact::TxnFailure;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_watch::pass::{FileOutcome, PassError, Scope};
use cortex_buffer_watch::scan::resolve_root;

type IndexRow = (String, Option<String>, Option<String>, Option<i64>, String, Option<String>, i64, i64);

/// One synchronous pass: discovery and indexing, as the worker does it.
#[allow(clippy::type_complexity)] // pgrx needs the named tuple spelled out here
#[pg_extern(name = "index_sessions", volatile)]
#[search_path(pg_catalog, pg_temp)]
fn index_sessions_and_events(
    dir: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(path, String),
        name!(job_dir, Option<String>),
        name!(dialect, Option<String>),
        name!(size_bytes, Option<i64>),
        name!(action, String),
        name!(detail, Option<String>),
        name!(events_added, i64),
        name!(corrupt_added, i64),
    ),
> {
    let dir = match dir {
        Some(d) => {
            if !caller_is_superuser() {
                raise(
                    CbError::new(SqlState::InsufficientPrivilege, "only superusers may pass dir to index_sessions()")
                        .with_hint(
                            "Call cortex_buffer.index_sessions() without arguments to scan cortex_buffer.sessions_dir.",
                        ),
                );
            }
            d.to_owned()
        }
        None => guc::sessions_dir(),
    };
    let volume = resolve_root(&dir).or_raise();
    if dir == guc::sessions_dir() {
        super::moved_root::adopt(&volume, super::moved_root::Scope::All, true);
    }
    let pass = match indexing::caller_pass(&volume, Scope::Volume) {
        Ok(p) => p,
        Err(PassError::Root(e) | PassError::Catalog(TxnFailure::Refused(e))) => raise(e),
        Err(PassError::Catalog(failure)) => raise(CbError::internal(failure.to_string())),
    };
    let outcomes: std::collections::HashMap<String, FileOutcome> = pass.files.into_iter().collect();
    let rows: Vec<IndexRow> = pass
        .report
        .files
        .into_iter()
        .map(|f| {
            let (events, corrupt, note) = match outcomes.get(&f.path) {
                Some(FileOutcome::Indexed { events, corrupt, note, state, .. }) => (
                    i64::try_from(*events).unwrap_or(i64::MAX),
                    i64::try_from(*corrupt).unwrap_or(i64::MAX),
                    note.clone().or_else(|| {
                        state.tail_pending.then(|| "last line waits for a newline or the settle period".to_owned())
                    }),
                ),
                Some(FileOutcome::Skipped(why)) => (0, 0, Some(format!("not indexed: {why}"))),
                Some(FileOutcome::Failed { error, quarantined }) => (
                    0,
                    0,
                    Some(if *quarantined {
                        format!("indexing failed and the file is now quarantined: {error}")
                    } else {
                        format!("indexing failed: {error}")
                    }),
                ),
                None => (0, 0, None),
            };
            let detail = match (f.detail, note) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            (
                f.path,
                f.job_dir,
                f.dialect.map(|d| d.label().to_owned()),
                f.size_bytes.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
                f.action.label().to_owned(),
                detail,
                events,
                corrupt,
            )
        })
        .collect();
    TableIterator::new(rows)
}

const CLEAR_QUARANTINE_SQL: &str = "UPDATE cortex_buffer.session_file
        SET quarantined_at = NULL, failures = 0, last_error = NULL, last_error_at = NULL
      WHERE path OPERATOR(pg_catalog.=) $1
  RETURNING true";

/// Lets the indexer try a quarantined file again: clears its quarantine and failure count.
/// True when the file was quarantined; false when it was in the index and not quarantined.
#[pg_extern(volatile, strict)]
#[search_path(pg_catalog, pg_temp)]
fn clear_quarantine(path: &str) -> bool {
    let absolute = super::file_access::absolute(path).or_raise();
    let was = pinned(|| {
        Spi::connect(|c| {
            c.select(
                "SELECT quarantined_at IS NOT NULL FROM cortex_buffer.session_file WHERE path OPERATOR(pg_catalog.=) $1",
                Some(1),
                &[absolute.as_str().into()],
            )
            .map_err(spi)?
            .pipe_first::<bool>()
        })
    })
    .or_raise();
    let Some(was) = was else {
        raise(
            CbError::new(SqlState::UndefinedFile, format!("\"{absolute}\" is not in the index"))
                .with_hint("Pass session_file.path of an indexed file (SELECT path FROM cortex_buffer.session_file WHERE quarantined_at IS NOT NULL)."),
        )
    };
    if was {
        as_definer(|| {
            Spi::connect_mut(|c| {
                c.update(CLEAR_QUARANTINE_SQL, None, &[absolute.as_str().into()]).map(|_| ()).map_err(spi)
            })
        })
        .or_raise();
    }
    was
}

extension_sql_file!("schema.sql", name = "indexer_schema");
extension_sql_file!(
    "api.sql",
    name = "indexer_api",
    requires = ["indexer_schema", "job_api", index_sessions_and_events, status_sql::file_integrity, clear_quarantine]
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use std::fs;

    use pgrx::prelude::*;

    use crate::testing::{sqlstate_of, TempRoot as Root};

    fn actions(dir: &str) -> Vec<(String, String, Option<String>)> {
        let sql = format!(
            "SELECT coalesce(string_agg(substr(path, {}) || '|' || action || '|' || coalesce(dialect, '-'), ',' ORDER BY path), '') \
               FROM cortex_buffer.index_sessions({})",
            dir.len() + 2,
            pgrx::spi::quote_literal(dir)
        );
        let joined = Spi::get_one::<String>(&sql).ok().flatten().unwrap_or_default();
        joined
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let parts: Vec<&str> = s.split('|').collect();
                (parts[0].to_owned(), parts[1].to_owned(), (parts[2] != "-").then(|| parts[2].to_owned()))
            })
            .collect()
    }

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).ok().flatten().unwrap_or(-1)
    }

    #[pg_test]
    fn index_sessions_records_new_changed_unchanged_and_gone_files() {
        let root = Root::new("lifecycle");
        root.put(
            "job-1/session-001.jsonl",
            "{\"version\":\"1.0\",\"jobId\":\"j\",\"type\":\"SESSION_START\",\"timestamp\":\"t\",\"data\":{}}\n",
        );
        root.put(
            "job-2/session_20260223T143022Z_pod-abc.jsonl",
            "{\"type\":\"SESSION_START\",\"timestamp\":\"t\",\"job_id\":\"j\",\"session_id\":\"s\",\"seq\":0}\n",
        );
        root.put("job-2/metadata.json", "{}");
        let dir = root.dir();
        assert_eq!(
            actions(&dir),
            vec![
                ("job-1/session-001.jsonl".into(), "new".into(), Some("cortex-plane".into())),
                ("job-2/session_20260223T143022Z_pod-abc.jsonl".into(), "new".into(), Some("cortex-spike".into())),
            ]
        );
        let prefix = pgrx::spi::quote_literal(format!("{dir}/"));
        assert_eq!(
            count(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE starts_with(path, {prefix})")),
            2
        );
        assert_eq!(
            count(&format!(
                "SELECT size_bytes FROM cortex_buffer.session_file WHERE path = {}",
                pgrx::spi::quote_literal(format!("{dir}/job-1/session-001.jsonl"))
            )),
            i64::try_from(fs::metadata(root.0.join("job-1/session-001.jsonl")).map(|m| m.len()).unwrap_or(0))
                .unwrap_or(0)
        );

        let again = actions(&dir);
        assert!(again.iter().all(|(_, a, _)| a == "unchanged"), "{again:?}");

        root.put("job-1/session-001.jsonl", "{\"version\":\"1.0\",\"jobId\":\"j\",\"type\":\"SESSION_START\",\"timestamp\":\"t\",\"data\":{}}\n{\"x\":1}\n");
        fs::remove_file(root.0.join("job-2/session_20260223T143022Z_pod-abc.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let third = actions(&dir);
        assert_eq!(third[0].1, "changed");
        assert_eq!(third[1].1, "gone");
        assert_eq!(
            count(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE starts_with(path, {prefix}) AND gone_at IS NOT NULL")),
            1
        );
        // Columns the issue requires are all filled in.
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM cortex_buffer.session_file WHERE starts_with(path, {prefix}) AND job_dir IS NOT NULL \
                 AND mtime IS NOT NULL AND device IS NOT NULL AND inode > 0 AND first_seen <= last_seen"
            )),
            2
        );
    }

    #[pg_test]
    fn index_sessions_reports_skipped_entries_and_claude_code_layouts() {
        let root = Root::new("skips");
        let sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
        root.put(&format!("proj/{sid}.jsonl"), "{\"type\":\"summary\",\"summary\":\"s\",\"leafUuid\":\"u\"}\n");
        root.put(
            &format!("proj/{sid}/subagents/agent-a1.jsonl"),
            "{\"parentUuid\":null,\"isSidechain\":true,\"type\":\"user\"}\n",
        );
        root.put(&format!("proj/{sid}/subagents/agent-a1.meta.json"), "{}");
        std::os::unix::fs::symlink("/etc/passwd", root.0.join("proj/escape.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        let got = actions(&root.dir());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], (format!("proj/{sid}.jsonl"), "new".into(), Some("claude-code".into())));
        assert_eq!(got[1], (format!("proj/{sid}/subagents/agent-a1.jsonl"), "new".into(), Some("claude-code".into())));
        assert_eq!(got[2], ("proj/escape.jsonl".into(), "skipped".into(), None));
    }

    #[pg_test]
    fn index_sessions_rejects_unusable_directories_with_sqlstate_and_hint() {
        let (state, hint) = sqlstate_of("SELECT * FROM cortex_buffer.index_sessions('relative/path')");
        assert_eq!(state, "22023");
        assert!(hint.is_some());
        let (state, hint) = sqlstate_of("SELECT * FROM cortex_buffer.index_sessions('/nonexistent/cortex-buffer')");
        assert_eq!(state, "58P01");
        assert!(hint.is_some_and(|h| h.contains("sessions_dir")));
        let (state, _) = sqlstate_of("SELECT * FROM cortex_buffer.index_sessions('/etc/passwd')");
        assert_eq!(state, "22023");
    }

    #[pg_test]
    fn index_sessions_dir_is_superuser_only_and_both_functions_are_revoked_from_public() {
        Spi::run(
            "CREATE ROLE cb_reader NOLOGIN; GRANT cortex_buffer_operator TO cb_reader; CREATE ROLE cb_nobody NOLOGIN",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Spi::run("SET ROLE cb_reader").unwrap_or_else(|e| panic!("{e}"));
        let (state, hint) = sqlstate_of("SELECT * FROM cortex_buffer.index_sessions('/tmp')");
        assert_eq!(state, "42501");
        assert!(hint.is_some());
        Spi::run("RESET ROLE; SET ROLE cb_nobody").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.index_sessions()").0, "42501");
        assert_eq!(sqlstate_of("SELECT cortex_buffer.index_now()").0, "42501");
        assert_eq!(sqlstate_of("SELECT count(*) FROM cortex_buffer.session_file").0, "42501");
        Spi::run("RESET ROLE").unwrap_or_else(|e| panic!("{e}"));
        // pg_read_server_files no longer opens them: the operator role does.
        Spi::run("CREATE ROLE cb_files NOLOGIN; GRANT pg_read_server_files TO cb_files; SET ROLE cb_files")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.index_sessions()").0, "42501");
        Spi::run("RESET ROLE").unwrap_or_else(|e| panic!("{e}"));
    }
}
