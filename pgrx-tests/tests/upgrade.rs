//! `ALTER EXTENSION cortex_buffer UPDATE` from every released version yields exactly the schema
//! of a fresh install, and keeps the data.

use std::fs;
use std::path::Path;

use cortex_buffer_e2e::{Cluster, SCHEMA_FINGERPRINT_SQL};

/// Released versions with a frozen install script in sql/released/.
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

#[test]
fn updating_from_each_released_version_matches_a_fresh_install() {
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
