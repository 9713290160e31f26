//! Security on real clusters with the background worker (docs/operations.md#privileges):
//!
//! - the worker, connected to a database whose owner set `search_path = public, pg_catalog`
//!   and where overloads of the operators and functions it uses wait in `public`, never calls
//!   them, and runs its statements as `cortex_buffer_definer`, never as a superuser;
//! - `CREATE EXTENSION` refuses a `cortex_buffer` schema another role created first;
//! - a session file swapped back and forth with a link to a file outside `sessions_dir` while
//!   the worker indexes never puts a byte of that file into the index
//!   (`CORTEX_SWAP_SECONDS`, default 6; 25 for the full run);
//! - whatever default privileges the installing role set, install and update end with exactly
//!   the documented grants.

use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{wait_for, Cluster, SCHEMA_FINGERPRINT_SQL};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";

fn line(seq: usize, t: &str) -> String {
    format!(r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{JOB}","seq":{seq}}}"#)
}

/// Each overload records who ran it and from which kind of backend (the test's own psql
/// sessions, which run under the same hostile path, are told apart from the worker).
const CANARIES: &str = r#"
    CREATE TABLE public.canary (who text, what text, backend text);
    GRANT INSERT ON public.canary TO PUBLIC;
    CREATE FUNCTION public.canary_note(what text) RETURNS void LANGUAGE sql AS $$
        INSERT INTO public.canary
        SELECT current_user, what, backend_type FROM pg_catalog.pg_stat_activity
         WHERE pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() $$;
    CREATE FUNCTION public.canary_mul(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('*(numeric,integer)'); RETURN $1 OPERATOR(pg_catalog.*) $2; END $$;
    CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.canary_mul);
    CREATE FUNCTION public.canary_mul_iv(bigint, interval) RETURNS interval LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('*(bigint,interval)'); RETURN $1 OPERATOR(pg_catalog.*) $2; END $$;
    CREATE OPERATOR public.* (LEFTARG = bigint, RIGHTARG = interval, FUNCTION = public.canary_mul_iv);
    CREATE FUNCTION public.canary_eq8(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('=(bigint)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
    CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.canary_eq8);
    CREATE FUNCTION public.canary_eqt(text, text) RETURNS boolean LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('=(text)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
    CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.canary_eqt);
    CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('unnest(bigint[])'); RETURN QUERY SELECT pg_catalog.unnest($1); END $$;
    CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('now()'); RETURN pg_catalog.now(); END $$;
    CREATE FUNCTION public.starts_with(text, text) RETURNS boolean LANGUAGE plpgsql AS
        $$ BEGIN PERFORM public.canary_note('starts_with'); RETURN pg_catalog.starts_with($1, $2); END $$;
"#;

#[test]
fn the_worker_never_calls_planted_overloads_and_runs_as_the_definer_role() {
    let c = Cluster::new("canary", &["cortex_buffer.poll_interval = 100", "cortex_buffer.settle_period = 100"]);
    c.start();
    c.create_extension();
    c.psql(CANARIES);
    // Who the worker's statements run as: a trigger on event records it (granted its table).
    c.psql("CREATE TABLE public.writer (who text)");
    c.psql("GRANT INSERT ON public.writer TO PUBLIC");
    c.psql("CREATE FUNCTION public.note_writer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.writer VALUES (current_user); RETURN NULL; END $$");
    c.psql("CREATE TRIGGER note_writer AFTER INSERT ON cortex_buffer.event FOR EACH STATEMENT EXECUTE FUNCTION public.note_writer()");
    c.psql("ALTER DATABASE postgres SET search_path = public, pg_catalog");
    // The worker picks the database's setting up when it connects.
    c.stop("fast");
    c.start();
    assert!(wait_for(Duration::from_secs(30), || c.worker_pid().is_some()).is_some());
    let body: String = (0..50).map(|i| line(i, "A") + "\n").collect();
    c.put(&format!("{JOB}/session-001.jsonl"), &body);
    let indexed = |n: &str| {
        wait_for(Duration::from_secs(30), || {
            c.try_psql("postgres", "SELECT count(*) FROM cortex_buffer.event").is_ok_and(|s| s == n)
        })
    };
    assert!(indexed("50").is_some(), "{}", c.log_tail());
    // An append, a new file, and a reload (which re-reads the catalogue).
    let more: String = (50..60).map(|i| line(i, "B") + "\n").collect();
    std::fs::OpenOptions::new()
        .append(true)
        .open(c.sessions.join(format!("{JOB}/session-001.jsonl")))
        .and_then(|mut f| std::io::Write::write_all(&mut f, more.as_bytes()))
        .expect("append");
    c.put(&format!("{JOB}/session-002.jsonl"), &(line(0, "C") + "\n"));
    c.psql("SELECT pg_reload_conf()");
    assert!(indexed("61").is_some(), "{}", c.log_tail());
    c.put(&format!("{JOB}/session-003.jsonl"), &(line(0, "D") + "\n"));
    assert!(indexed("62").is_some(), "{}", c.log_tail());
    assert_eq!(
        c.psql(
            "SELECT coalesce(string_agg(DISTINCT who || ' ran ' || what, '; '), 'nothing') FROM public.canary
              WHERE backend OPERATOR(pg_catalog.=) 'cortex_buffer indexer'"
        ),
        "nothing"
    );
    // The canaries work: the test's own sessions, under the same path, did call them.
    assert_ne!(c.psql("SELECT count(*) FROM public.canary"), "0");
    assert_eq!(c.psql("SELECT string_agg(DISTINCT who, ',') FROM public.writer"), "cortex_buffer_definer");
    assert_eq!(
        c.psql("SELECT setting FROM pg_settings WHERE name = 'search_path'"),
        "public, pg_catalog",
        "the database setting is in force for other sessions"
    );
}

#[test]
fn create_extension_refuses_a_schema_someone_else_prepared() {
    let c = Cluster::new("schema", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.psql("CREATE ROLE mallory NOLOGIN");
    c.psql("GRANT CREATE ON DATABASE postgres TO mallory");
    c.psql_session(
        "postgres",
        &[
            "SET ROLE mallory",
            "CREATE SCHEMA cortex_buffer",
            "CREATE FUNCTION cortex_buffer.nextval(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let err = c
        .psql_session("postgres", &["\\set VERBOSITY verbose", "CREATE EXTENSION cortex_buffer"])
        .err()
        .unwrap_or_default();
    assert!(err.contains("42P06") && err.contains("belongs to role mallory"), "{err}");
    assert!(err.contains("HINT"), "{err}");
    assert_eq!(c.psql("SELECT count(*) FROM pg_extension WHERE extname = 'cortex_buffer'"), "0");
    // A schema of the installer's own, with something in it, is refused too; an empty one is used.
    c.psql("DROP SCHEMA cortex_buffer CASCADE");
    c.psql("CREATE SCHEMA cortex_buffer");
    c.psql("CREATE TABLE cortex_buffer.leftover (x int)");
    let err = c.try_psql("postgres", "CREATE EXTENSION cortex_buffer").err().unwrap_or_default();
    assert!(err.contains("schema cortex_buffer already holds 1 object(s)"), "{err}");
    c.psql("DROP TABLE cortex_buffer.leftover");
    c.psql("CREATE EXTENSION cortex_buffer");
    assert_eq!(c.psql("SELECT extversion IS NOT NULL FROM pg_extension WHERE extname = 'cortex_buffer'"), "t");
}

#[test]
fn a_file_swapped_for_a_link_outside_is_never_read() {
    let seconds: u64 = std::env::var("CORTEX_SWAP_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    let c = Cluster::new("swap", &["cortex_buffer.poll_interval = 10", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    // The secret: valid session lines, world-readable, outside sessions_dir.
    let secret = c.base.join("secret.jsonl");
    let secret_body: String = (0..20).map(|i| line(i, "TOPSECRET") + "\n").collect();
    std::fs::write(&secret, &secret_body).expect("secret");
    let dir = c.sessions.join(JOB);
    std::fs::create_dir_all(&dir).expect("job dir");
    let path = dir.join("session-001.jsonl");
    let real = dir.join(".real");
    let link = dir.join(".link");
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let mut n = 0usize;
            while Instant::now() < deadline {
                // A regular file that grows, then a link to the secret, each put in place
                // atomically: the scan and the open may each see either.
                let body: String = (0..(n % 7 + 1)).map(|i| line(i, "PUBLIC") + "\n").collect();
                let _ = std::fs::write(&real, body);
                let _ = std::fs::rename(&real, &path);
                let _ = std::fs::remove_file(&link);
                let _ = symlink(&secret, &link);
                let _ = std::fs::rename(&link, &path);
                n += 1;
                if n.is_multiple_of(50) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            swaps.store(n, Ordering::SeqCst);
            stop.store(true, Ordering::SeqCst);
        });
        while !stop.load(Ordering::SeqCst) {
            // index_sessions() races the worker too.
            let _ = c.try_psql("postgres", "SELECT count(*) FROM cortex_buffer.index_sessions()");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    // End on the regular file, and let the worker settle.
    std::fs::write(&path, line(0, "PUBLIC") + "\n").expect("final");
    std::thread::sleep(Duration::from_millis(500));
    let leaked = c.psql(
        "SELECT (SELECT count(*) FROM cortex_buffer.event WHERE type = 'TOPSECRET' OR payload::text LIKE '%TOPSECRET%')
              + (SELECT count(*) FROM cortex_buffer.corrupt_line WHERE preview LIKE '%TOPSECRET%')",
    );
    let indexed = c.psql("SELECT count(*) FROM cortex_buffer.event WHERE type = 'PUBLIC'");
    eprintln!("{} swaps in {seconds} s; {indexed} PUBLIC events in the index", swaps.load(Ordering::SeqCst));
    assert_eq!(leaked, "0", "bytes of the file outside sessions_dir reached the index");
    assert!(indexed.parse::<i64>().unwrap_or(0) > 0, "the regular file was indexed at all");
    assert!(c.worker_pid().is_some(), "{}", c.log_tail());
}

#[test]
fn default_privileges_never_reach_the_extensions_objects() {
    let c = Cluster::new("default-acl", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.psql("CREATE ROLE app_rw LOGIN");
    let defaults =
        "ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLES TO app_rw, PUBLIC;
                    ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO app_rw, PUBLIC;
                    ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO app_rw;
                    ALTER DEFAULT PRIVILEGES GRANT USAGE ON TYPES TO app_rw";
    c.psql("CREATE DATABASE plain");
    c.try_psql("plain", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    let want = c.try_psql("plain", SCHEMA_FINGERPRINT_SQL).unwrap_or_else(|e| panic!("{e}"));
    // A fresh install, and an update from the previous release, under the installer's defaults.
    c.psql("CREATE DATABASE installed");
    c.try_psql("installed", defaults).unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("installed", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    c.psql("CREATE DATABASE updated");
    c.try_psql("updated", defaults).unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("updated", "CREATE EXTENSION cortex_buffer VERSION '0.18.0'").unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("updated", "ALTER EXTENSION cortex_buffer UPDATE").unwrap_or_else(|e| panic!("{e}"));
    for db in ["installed", "updated"] {
        let got = c.try_psql(db, SCHEMA_FINGERPRINT_SQL).unwrap_or_else(|e| panic!("{e}"));
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        let missing: Vec<&&str> = w.iter().filter(|l| !g.contains(l)).collect();
        let extra: Vec<&&str> = g.iter().filter(|l| !w.contains(l)).collect();
        assert!(missing.is_empty() && extra.is_empty(), "{db}: missing {missing:#?}\nextra {extra:#?}");
        // The role the defaults favoured can do nothing the documented grants do not allow.
        for attempt in [
            "DELETE FROM cortex_buffer.agent_budget",
            "DELETE FROM cortex_buffer.usage_ledger",
            "SELECT * FROM cortex_buffer.event",
            "SELECT count(*) FROM cortex_buffer.index_sessions()",
            "SELECT nextval('cortex_buffer.usage_ledger_seq')",
        ] {
            let r = c.try_psql(db, &format!("SET ROLE app_rw; {attempt}"));
            assert!(r.as_ref().err().is_some_and(|e| e.contains("permission denied")), "{db}: {attempt}: {r:?}");
        }
    }
}
