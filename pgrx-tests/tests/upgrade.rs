//! `ALTER EXTENSION cortex_buffer UPDATE` from the released version in sql/released/ (the one
//! upgrade script shipped: from the last 0.x release to 1.0.0, CONTRIBUTING.md) yields exactly
//! the schema of a fresh install, and keeps the data.

use std::fs;
use std::path::Path;

use cortex_buffer_e2e::{Cluster, SCHEMA_FINGERPRINT_SQL};

/// Released versions with a frozen install script in sql/released/ (one: the release before the
/// current version).
fn released_versions() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sql/released");
    let mut versions: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("cortex_buffer--").and_then(|v| v.strip_suffix(".sql")).map(str::to_owned)
        })
        .filter(|v| !v.contains("--"))
        .collect();
    versions.sort();
    versions
}

/// A pushed file's job in the last release's data.
const PUSH_JOB: &str = "0193a8b2-7c41-7d2e-9f00-00000000aa01";

/// A version's numbers, to order them.
fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

#[test]
fn updating_from_the_released_version_matches_a_fresh_install() {
    let c = Cluster::new("upgrade", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.psql("CREATE DATABASE fresh");
    c.try_psql("fresh", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    let current =
        c.try_psql("fresh", "SELECT extversion FROM pg_extension WHERE extname = 'cortex_buffer'").unwrap_or_default();
    let want = c.try_psql("fresh", SCHEMA_FINGERPRINT_SQL).unwrap_or_else(|e| panic!("{e}"));
    assert!(want.lines().count() > 50, "fingerprint looks empty:\n{want}");

    let versions = released_versions();
    assert!(!versions.is_empty(), "sql/released/ holds no earlier version");
    let last = versions.iter().filter(|v| **v != current).max_by_key(|v| version_key(v)).cloned();
    for v in versions {
        if v == current {
            continue;
        }
        let db = format!("from_{}", v.replace('.', "_"));
        c.psql(&format!("CREATE DATABASE {db}"));
        c.try_psql(&db, &format!("CREATE EXTENSION cortex_buffer VERSION '{v}'"))
            .unwrap_or_else(|e| panic!("install {v}: {e}"));
        // Data recorded by the old version must survive the update. (Its index_sessions() is
        // bound to this newer library, which refuses until the update: write the row directly.)
        c.try_psql(
            &db,
            &format!(
                "INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode)
                 VALUES ('{}/job/old.jsonl', 'job', 3, now(), 1, 2)",
                c.sessions.display()
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // The last release holds a pushed file's unterminated line, in two pieces of its held
        // tail: the update keeps them, and the next push finishes the line.
        if Some(&v) == last.as_ref() {
            c.try_psql(&db, &format!("WITH f AS (
                    INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, job_id)
                    VALUES ('push:/{PUSH_JOB}/session-001.jsonl', '{PUSH_JOB}', 11, now(), 0, 1, '{PUSH_JOB}') RETURNING file_id),
                 p AS (
                    INSERT INTO cortex_buffer.pushed_file (file_id, job_id, relpath, n, identity, first_source, source, held_len)
                    SELECT file_id, '{PUSH_JOB}', '{PUSH_JOB}/session-001.jsonl', 1, '0:1:u', 'node-u', 'node-u', 11 FROM f
                    RETURNING file_id)
                 INSERT INTO cortex_buffer.pushed_held (file_id, at, bytes)
                 SELECT file_id, 0, convert_to('{{\"type\"', 'UTF8') FROM p
                 UNION ALL SELECT file_id, 7, convert_to(':\"X\"', 'UTF8') FROM p;
                 INSERT INTO cortex_buffer.push_source (source, all_jobs) VALUES ('node-u', true)"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let refused = c.try_psql(&db, "SELECT count(*) FROM cortex_buffer.index_sessions()").err().unwrap_or_default();
        assert!(refused.contains("ALTER EXTENSION cortex_buffer UPDATE"), "{refused}");
        c.try_psql(&db, "ALTER EXTENSION cortex_buffer UPDATE").unwrap_or_else(|e| panic!("update from {v}: {e}"));
        assert_eq!(
            c.try_psql(&db, "SELECT extversion FROM pg_extension WHERE extname = 'cortex_buffer'").unwrap_or_default(),
            current
        );
        let got = c.try_psql(&db, SCHEMA_FINGERPRINT_SQL).unwrap_or_else(|e| panic!("{e}"));
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        let missing: Vec<&&str> = w.iter().filter(|l| !g.contains(l)).collect();
        let extra: Vec<&&str> = g.iter().filter(|l| !w.contains(l)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "updating from {v} differs from a fresh install:\nmissing: {missing:#?}\nextra: {extra:#?}"
        );
        if Some(&v) == last.as_ref() {
            assert_eq!(
                c.try_psql(
                    &db,
                    "SELECT encode(string_agg(bytes, ''::bytea ORDER BY at), 'escape') FROM cortex_buffer.pushed_held"
                )
                .unwrap_or_default(),
                "{\"type\":\"X\""
            );
            let pushed = c
                .try_psql(
                    &db,
                    &format!("SELECT concat_ws(' ', committed_offset, action) FROM cortex_buffer.append_session_bytes(
                                'node-u', '{PUSH_JOB}/session-001.jsonl', 11, convert_to('}}' || chr(10), 'UTF8'), '0:1:u')"),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(pushed, "13 appended", "the held line, finished after the update");
            assert_eq!(
                c.try_psql(
                    &db,
                    "SELECT concat_ws(' ', total_lines, held_len, (SELECT count(*) FROM cortex_buffer.pushed_held))
                                   FROM cortex_buffer.session_file JOIN cortex_buffer.pushed_file USING (file_id)"
                )
                .unwrap_or_default(),
                "1 0 0"
            );
            c.try_psql(&db, "DELETE FROM cortex_buffer.session_file WHERE path LIKE 'push:%'")
                .unwrap_or_else(|e| panic!("{e}"));
            c.try_psql(&db, "DELETE FROM cortex_buffer.push_source").unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(c.try_psql(&db, "SELECT count(*) FROM cortex_buffer.session_file").unwrap_or_default(), "1");
        // The old row is indexable, and new rows get ids after it.
        c.put("job/session-001.jsonl", "{\"type\":\"X\",\"timestamp\":\"t\"}\n");
        let indexed = c
            .try_psql(
                &db,
                "SELECT string_agg(action || ':' || events_added, ',' ORDER BY path) FROM cortex_buffer.index_sessions()",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(indexed, "gone:0,new:1");
        assert_eq!(
            c.try_psql(&db, "SELECT min(file_id) < max(file_id) FROM cortex_buffer.session_file").unwrap_or_default(),
            "t"
        );
        // And the new functions work on the updated schema.
        let job = c
            .try_psql(
                &db,
                "INSERT INTO cortex_buffer.job (agent_id, status) VALUES (gen_random_uuid(), 'RUNNING') RETURNING id",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let src = c
            .try_psql(&db, &format!("SELECT cortex_buffer.write_checkpoint('{job}', '{{}}'); SELECT source FROM cortex_buffer.read_checkpoint('{job}')"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(src.ends_with("current"), "{src}");
    }
}
