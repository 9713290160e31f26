//! R7, privileges (docs/operations.md#privileges), on a real cluster with the
//! worker running, as LOGIN roles created here:
//!
//! 1. every function and relation of the schema, found in the catalogue (so new ones are covered
//!    without editing this file), called or read as a role without grants: `42501` for all but
//!    what docs/operations.md names as PUBLIC; and the PUBLIC list of the docs is the catalogue's;
//! 2. every function with a path argument (`path`, `dir`, `relpath`, found by argument name), as
//!    each documented role that may call it: `..`, absolute paths outside `sessions_dir`, a link
//!    to a file outside, a linked directory and a job-named linked directory are all refused with a
//!    documented SQLSTATE, and no byte of the file outside reaches any table or any answer;
//! 3. every function that writes (volatile, not a trigger function, not `indexer_worker`), as each
//!    documented role that may call it: on success, on an error raised inside the definer switch
//!    (a probe trigger on every table of the schema raises there), and on a cancel while inside it
//!    (the probe sleeps into `statement_timeout`; where a function writes nothing, another session
//!    holds locks on the extension's tables and `pg_cancel_backend` cancels the blocked call),
//!    the caller's `current_user`, `session_user` and security context are back afterwards, in the
//!    same transaction (after `ROLLBACK TO SAVEPOINT`) and in the next: `SET ROLE` works (it is
//!    refused inside a security-definer context), temporary tables can be made, and the caller
//!    still cannot read or write the token secret (only the definer role may). The probe also shows that every
//!    write to the extension's tables runs as `cortex_buffer_definer`;
//! 4. each documented role, with exactly its grants, does its job (the calls above and its table
//!    work) and nothing more: every function it holds no EXECUTE on, every relation it holds no
//!    privilege on, and the next role's work, give `42501`; the catalogue's grants are the docs'.
//!
//! pgspot finds nothing in the install and upgrade scripts (scripts/test.sh). The short and the
//! full setting are the same: the whole run is ~1 minute.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{report, wait_for, Cluster};

const J: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f"; // the agent's job
const J2: &str = "0193a8b2-7c41-7d2e-9f00-00000000a002"; // crashes and breaker outcomes
const J3: &str = "0193a8b2-7c41-7d2e-9f00-00000000a003"; // stale: reaped
const JW: &str = "0193a8b2-7c41-7d2e-9f00-00000000a004"; // paused
const JO: &str = "0193a8b2-7c41-7d2e-9f00-00000000a005"; // another pod's job
const JX: &str = "0193a8b2-7c41-7d2e-9f00-00000000a006"; // a job-named directory linked outside
const AGENT: &str = "0193a8b2-7c41-7d2e-9f00-0000000000a1";
const NOJOB: &str = "0193a8b2-7c41-7d2e-9f00-00000000dead";
const S: &str = "11111111-2222-4333-8444-555555555555"; // a Claude Code transcript in J's directory
const SECRET: &str = "R7SECRETMARK";
const MODEL: &str = "claude-sonnet-4-5-20250929";
const USAGE: &str = r#"{"input_tokens": 1000, "output_tokens": 5}"#;

/// The documented roles and the LOGIN role each is granted to here.
const ROLES: [(&str, &str); 4] = [
    ("cortex_buffer_agent", "r7_agent"),
    ("cortex_buffer_control_plane", "r7_cp"),
    ("cortex_buffer_operator", "r7_op"),
    ("cortex_buffer_pusher", "r7_pusher"),
];

fn line(job: &str, seq: usize, t: &str) -> String {
    format!(r#"{{"type":"{t}","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{job}","seq":{seq}}}"#)
}

fn bindir() -> PathBuf {
    let pg_config = std::env::var("PG_CONFIG").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_config".into());
    let out = Command::new(&pg_config).arg("--bindir").output().expect("pg_config");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// One psql session as `user` running `script` from stdin, errors not stopping it: (stdout, stderr).
fn session(c: &Cluster, user: &str, script: &str) -> (String, String) {
    let mut child = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bindir().join("psql"))
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=0", "-h"])
        .arg(&c.socket_dir)
        .args(["-p", &c.port.to_string(), "-d", "postgres", "-U", user, "-f", "-"])
        .env("PGAPPNAME", "r7b")
        .env("PGOPTIONS", "-c statement_timeout=60s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql");
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("script");
    let out = child.wait_with_output().expect("psql output");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The `@@name STATE` lines a script's `\echo @@name :SQLSTATE` printed, in order.
fn marks(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("@@"))
        .filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_owned(), b.trim().to_owned())))
        .collect()
}

fn mark(stdout: &str, name: &str) -> String {
    marks(stdout).into_iter().find(|(n, _)| n == name).map(|(_, s)| s).unwrap_or_else(|| "missing".into())
}

/// Catalogue rows, `|`-separated.
fn rows(c: &Cluster, sql: &str) -> Vec<Vec<String>> {
    c.psql(sql).lines().filter(|l| !l.is_empty()).map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

/// A NULL-free argument of each type the functions take.
fn dummy(ty: &str) -> &'static str {
    match ty {
        "uuid" => "'00000000-0000-0000-0000-000000000000'::uuid",
        "jsonb" => "'{}'::jsonb",
        "text" => "'x'::text",
        "integer" => "0",
        "bigint" => "0::bigint",
        "boolean" => "false",
        "timestamp with time zone" => "now()",
        "interval" => "'1 second'::interval",
        "numeric" => "0::numeric",
        "double precision" => "0::float8",
        "bytea" => "'\\x7b7d'::bytea",
        "regclass" => "'cortex_buffer.job'::regclass",
        "text[]" => "ARRAY['x']::text[]",
        "bigint[]" => "ARRAY[0]::bigint[]",
        "bytea[]" => "ARRAY['\\x7b7d']::bytea[]",
        "boolean[]" => "ARRAY[false]",
        other => panic!("no dummy argument for type {other}: add one"),
    }
}

struct Func {
    sig: String,
    name: String,
    args: Vec<String>,
    argnames: Vec<String>,
    public: bool,
    volatile: bool,
    trigger: bool,
    member: bool,
}

impl Func {
    fn dummy_call(&self) -> String {
        let args: Vec<&str> = self.args.iter().map(|t| dummy(t)).collect();
        format!("SELECT cortex_buffer.{}({})", self.name, args.join(", "))
    }
}

fn functions(c: &Cluster) -> Vec<Func> {
    rows(
        c,
        "SELECT p.oid::regprocedure::text, p.proname,
                coalesce((SELECT string_agg(format_type(t, NULL), ';' ORDER BY o)
                            FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, o)), ''),
                coalesce(array_to_string(p.proargnames[1:p.pronargs], ';'), ''),
                has_function_privilege('public', p.oid, 'EXECUTE'), p.provolatile = 'v',
                p.prorettype = 'trigger'::regtype,
                EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                          AND d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cortex_buffer'))
           FROM pg_proc p WHERE p.pronamespace = 'cortex_buffer'::regnamespace ORDER BY 1",
    )
    .into_iter()
    .map(|r| {
        let split = |s: &str| if s.is_empty() { vec![] } else { s.split(';').map(str::to_owned).collect() };
        Func {
            sig: r[0].clone(),
            name: r[1].clone(),
            args: split(&r[2]),
            argnames: split(&r[3]),
            public: r[4] == "t",
            volatile: r[5] == "t",
            trigger: r[6] == "t",
            member: r[7] == "t",
        }
    })
    .collect()
}

/// (name, relkind, PUBLIC may SELECT) of every relation of the schema but indexes.
fn relations(c: &Cluster) -> Vec<(String, String, bool)> {
    rows(
        c,
        "SELECT c.oid::regclass::text, c.relkind, has_table_privilege('public', c.oid, 'SELECT')
           FROM pg_class c WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind NOT IN ('i', 'I', 'c', 't')
          ORDER BY 1",
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone(), r[2] == "t"))
    .collect()
}

/// The backticked names in docs/operations.md's sentence saying what is PUBLIC.
fn documented_public() -> BTreeSet<String> {
    let ops = include_str!("../../docs/operations.md");
    let start = ops.find("So only the pure").expect("docs/operations.md: the PUBLIC sentence");
    let end = start + ops[start..].find("are PUBLIC").expect("docs/operations.md: '... are PUBLIC'");
    ops[start..end].split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The functions docs/operations.md's role table says each role may call (its "may call" column).
fn documented_calls(role: &str) -> BTreeSet<String> {
    let ops = include_str!("../../docs/operations.md");
    let row = ops.lines().find(|l| l.starts_with(&format!("| `{role}` |"))).expect("docs/operations.md role table");
    let may_call = row.split('|').nth(2).expect("may call column");
    may_call.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The SQLSTATEs (in order) of running each statement as `user` (`prefix` first).
fn states_of(c: &Cluster, user: &str, prefix: &str, stmts: &[String]) -> Vec<String> {
    let mut script = format!("{prefix}\n");
    for (i, s) in stmts.iter().enumerate() {
        script.push_str(&format!("{s};\n\\echo @@{i} :SQLSTATE\n"));
    }
    let (out, err) = session(c, user, &script);
    let m = marks(&out);
    assert_eq!(m.len(), stmts.len(), "{user}: {out}\n{err}");
    m.into_iter().map(|(_, s)| s).collect()
}

fn setup(c: &Cluster) -> (PathBuf, String) {
    c.psql("CREATE ROLE r7_nobody LOGIN");
    for (group, login) in ROLES {
        c.psql(&format!("CREATE ROLE {login} LOGIN; GRANT {group} TO {login}"));
    }
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at, updated_at) VALUES
            ('{J}', '{AGENT}', 'RUNNING', 1, now(), now()),
            ('{J2}', '{AGENT}', 'RUNNING', 1, now(), now()),
            ('{J3}', '{AGENT}', 'RUNNING', 1, now() - interval '2 days', now() - interval '2 days'),
            ('{JW}', '{AGENT}', 'WAITING_FOR_APPROVAL', 1, now() - interval '2 days', now() - interval '2 days'),
            ('{JO}', '{AGENT}', 'RUNNING', 1, now(), now())"
    ));
    c.psql("INSERT INTO cortex_buffer.push_source (source, login) VALUES ('r7-node', 'r7_pusher')");
    let _ = SOURCE_TOKEN.set(c.psql("SELECT cortex_buffer.push_source_token('r7-node')"));
    c.psql("INSERT INTO cortex_buffer.push_source (source) VALUES ('r7-pod-y')");
    c.psql(&format!("INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('r7-node', '{J}')"));
    let body: String = (0..5).map(|i| line(J, i, "A") + "\n").collect();
    c.put(&format!("{J}/session-001.jsonl"), &body);
    c.put(&format!("{JO}/session-001.jsonl"), &(line(JO, 0, "A") + "\n"));
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress/sessions");
    let read = |p: &str| std::fs::read_to_string(fixtures.join(p)).expect("fixture");
    c.put(&format!("{J}/{S}.jsonl"), &read(&format!("proj/{S}.jsonl")));
    c.put(&format!("{J}/tools.jsonl"), &read("logs/tools.jsonl"));
    // Outside sessions_dir: a file with valid session lines, and a job-named directory.
    let outside = c.base.join("outside");
    std::fs::create_dir_all(outside.join(JX)).expect("outside");
    let secret_body: String = (0..5).map(|i| line(J, i, SECRET) + "\n").collect();
    std::fs::write(outside.join("secret.jsonl"), &secret_body).expect("secret");
    std::fs::write(outside.join(format!("{J}.jsonl")), &secret_body).expect("secret");
    std::fs::write(outside.join(format!("{JX}/session-001.jsonl")), &secret_body).expect("secret");
    symlink(outside.join("secret.jsonl"), c.sessions.join(format!("{J}/session-009.jsonl"))).expect("link");
    symlink(&outside, c.sessions.join("linkdir")).expect("dir link");
    symlink(outside.join(JX), c.sessions.join(JX)).expect("job dir link");
    c.psql(&format!("INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES ('{JX}', '{AGENT}', 'RUNNING')"));
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    let token = c.psql(&format!("SELECT cortex_buffer.job_token('{J}')"));
    (outside, token)
}

/// Part 1: a role without grants.
fn no_grants(c: &Cluster, funcs: &[Func], rels: &[(String, String, bool)]) -> (usize, usize, usize) {
    let doc_public = documented_public();
    let cat_public: BTreeSet<String> = funcs
        .iter()
        .filter(|f| f.public)
        .map(|f| f.name.clone())
        .chain(rels.iter().filter(|r| r.2).map(|r| r.0.trim_start_matches("cortex_buffer.").to_owned()))
        .collect();
    assert_eq!(doc_public, cat_public, "docs/operations.md's PUBLIC list and the catalogue disagree");
    let not_members: Vec<&str> = funcs.iter().filter(|f| !f.member).map(|f| f.sig.as_str()).collect();
    assert!(not_members.is_empty(), "functions in the schema that are not the extension's: {not_members:?}");

    let mut stmts: Vec<(String, bool)> = funcs.iter().map(|f| (f.dummy_call(), f.public)).collect();
    for (rel, kind, public) in rels {
        stmts.push((format!("SELECT 1 FROM {rel} LIMIT 0"), *public));
        match kind.as_str() {
            "S" => stmts.push((format!("SELECT nextval('{rel}')"), false)),
            "r" | "p" => {
                stmts.push((format!("DELETE FROM {rel} WHERE false"), false));
                stmts.push((format!("INSERT INTO {rel} DEFAULT VALUES"), false));
            }
            _ => {}
        }
    }
    let sql: Vec<String> = stmts.iter().map(|s| s.0.clone()).collect();
    let states = states_of(c, "r7_nobody", "", &sql);
    for ((stmt, public), state) in stmts.iter().zip(&states) {
        if *public {
            assert_ne!(state, "42501", "PUBLIC may: {stmt}");
        } else {
            assert_eq!(state, "42501", "a role without grants must get 42501: {stmt}");
        }
    }
    let p = funcs.iter().filter(|f| f.public).count() + rels.iter().filter(|r| r.2).count();
    eprintln!(
        "no grants: {} functions, {} relations, {} statements, {p} PUBLIC ({:?})",
        funcs.len(),
        rels.len(),
        stmts.len(),
        cat_public
    );
    (funcs.len(), rels.len(), p)
}

/// A role's session prefix: the agent presents its job's token.
fn prefix(login: &str, token: &str) -> String {
    match login {
        "r7_agent" => format!("SET cortex_buffer.job_token = '{token}';"),
        // The pusher's calls pass r7-node's token as an argument (ST below), read from a setting
        // of the test's own so that the statements stay the same text for every run.
        "r7_pusher" => format!(
            "SELECT set_config('r7.source_token', '{}', false) IS NOT NULL;",
            SOURCE_TOKEN.get().map(String::as_str).unwrap_or_default()
        ),
        _ => String::new(),
    }
}

/// r7-node's source token, made in `setup`.
static SOURCE_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// How a pusher's call passes it.
const ST: &str = "source_token => current_setting('r7.source_token')";

/// Part 2: path escapes.
fn paths(c: &Cluster, funcs: &[Func], token: &str, outside: &std::path::Path) -> usize {
    let sd = c.sessions.display().to_string();
    let od = outside.display().to_string();
    let escapes: Vec<String> = vec![
        format!("{od}/secret.jsonl"),
        format!("{od}/{J}.jsonl"),
        format!("{sd}/../outside/secret.jsonl"),
        format!("{sd}/{J}/../../outside/secret.jsonl"),
        format!("{J}/../../outside/secret.jsonl"),
        "../outside/secret.jsonl".to_owned(),
        format!("{J}/../../../../../../../../..{od}/secret.jsonl"),
        format!("{sd}/{J}/session-009.jsonl"),
        format!("{J}/session-009.jsonl"),
        format!("{sd}/linkdir/secret.jsonl"),
        "linkdir/secret.jsonl".to_owned(),
        format!("{sd}/{JX}/session-001.jsonl"),
        format!("{JX}/session-001.jsonl"),
    ];
    let dirs = [od.clone(), format!("{sd}/linkdir"), format!("{sd}/{JX}"), format!("{sd}/../outside"), sd.clone()];
    // What docs/api.md says each refuses with.
    let documented: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("file_integrity", &["22023", "42501"][..]),
        ("agent_state", &["22023", "42501", "58P01"][..]),
        ("session_recovery", &["22023", "42501", "58P01", "55000"][..]),
        ("session_usage", &["22023", "58P01", "55000"][..]),
        ("log_entries", &["22023", "42501", "58P01", "55000"][..]),
        ("check_log_snapshot", &["22023", "42501", "58P01", "55000"][..]),
        ("clear_quarantine", &["22023", "58P01"][..]),
        ("index_sessions", &["42501"][..]),
        ("append_session_bytes", &["22023", "42501"][..]),
        ("await_pushed", &["22023"][..]),
    ]);
    let path_funcs: Vec<&Func> = funcs
        .iter()
        .filter(|f| {
            f.argnames.iter().zip(&f.args).any(|(n, t)| t == "text" && matches!(n.as_str(), "path" | "dir" | "relpath"))
        })
        .collect();
    let mut refused = 0;
    let mut outputs = String::new();
    for f in &path_funcs {
        let want = documented.get(f.name.as_str()).unwrap_or_else(|| panic!("{}: add its documented refusals", f.sig));
        // A pusher's relpath names the file it sends, not one the server reads: only the
        // lexical escapes apply (a link below sessions_dir is just a name there).
        let lexical: Vec<String> = escapes
            .iter()
            .filter(|p| p.starts_with('/') || p.contains("..") || p.starts_with("linkdir"))
            .cloned()
            .collect();
        let candidates: &[String] = match f.name.as_str() {
            "index_sessions" => &dirs,
            "append_session_bytes" | "await_pushed" => &lexical,
            _ => &escapes,
        };
        for (group, login) in ROLES {
            if c.psql(&format!("SELECT has_function_privilege('{group}', '{}', 'EXECUTE')", f.sig)) != "t" {
                continue;
            }
            let calls: Vec<String> = candidates
                .iter()
                .map(|p| {
                    let args: Vec<String> = f
                        .argnames
                        .iter()
                        .zip(&f.args)
                        .map(|(n, t)| match (n.as_str(), t.as_str()) {
                            ("path" | "dir" | "relpath", _) => format!("'{p}'::text"),
                            ("job_id", _) => format!("'{J}'::uuid"),
                            ("source", _) => "'r7-node'::text".to_owned(),
                            ("file_identity", _) => "'r7:1:1'::text".to_owned(),
                            ("chunk", _) => format!("convert_to('{}' || E'\\n', 'UTF8')", line(J, 0, "PUSHED")),
                            ("timeout", _) => "'0 seconds'::interval".to_owned(),
                            ("source_token", _) => "current_setting('r7.source_token')".to_owned(),
                            (_, ty) => dummy(ty).to_owned(),
                        })
                        .collect();
                    format!("SELECT * FROM cortex_buffer.{}({})", f.name, args.join(", "))
                })
                .collect();
            let mut script = prefix(login, token);
            for (i, s) in calls.iter().enumerate() {
                script.push_str(&format!("\n{s};\n\\echo @@{i} :SQLSTATE\n"));
            }
            let (out, err) = session(c, login, &script);
            outputs.push_str(&out);
            outputs.push_str(&err);
            let states = marks(&out);
            assert_eq!(states.len(), calls.len(), "{out}\n{err}");
            for (call, (_, state)) in calls.iter().zip(&states) {
                assert!(want.contains(&state.as_str()), "{login}: {call} gave {state}, documented {want:?}\n{err}");
                refused += 1;
            }
        }
    }
    // The worker had time to look at the links too; then not a byte of the file outside anywhere.
    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    std::thread::sleep(Duration::from_millis(500));
    let leaked = c.psql(&format!(
        "SELECT coalesce(string_agg(t, ', '), 'none') FROM (
           SELECT c.oid::regclass::text AS t FROM pg_class c
            WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'p')
              AND cortex_buffer_r7_contains(c.oid::regclass, '{SECRET}')) s"
    ));
    assert_eq!(leaked, "none", "the file outside sessions_dir reached these tables");
    assert!(!outputs.contains(SECRET), "an answer showed the file outside sessions_dir");
    let names: Vec<&str> = path_funcs.iter().map(|f| f.sig.as_str()).collect();
    eprintln!("paths: {refused} escapes refused over {} functions: {names:?}", path_funcs.len());
    refused
}

/// What a writing function is called with, per documented role (the same SQL for each).
fn calls() -> BTreeMap<&'static str, (String, Option<String>)> {
    let ok_bad = |ok: String, bad: &str| (ok, Some(bad.to_owned()));
    let file = format!("{J}/session-001.jsonl");
    let transcript = format!("{J}/{S}.jsonl");
    let reserve = format!("(SELECT reservation_id FROM cortex_buffer.reserve_budget('{J}', '{USAGE}', '{MODEL}'))");
    BTreeMap::from([
        ("cortex_buffer.admit_job(uuid,uuid)", ok_bad(format!("SELECT cortex_buffer.admit_job('{AGENT}', '{J2}')"), &format!("SELECT cortex_buffer.admit_job('{AGENT}', '{NOJOB}')"))),
        ("cortex_buffer.agent_state(text)", ok_bad(format!("SELECT state FROM cortex_buffer.agent_state('{transcript}')"), &format!("SELECT state FROM cortex_buffer.agent_state('{J}/../x.jsonl')"))),
        ("cortex_buffer.agent_state(uuid)", ok_bad(format!("SELECT state FROM cortex_buffer.agent_state('{S}'::uuid)"), &format!("SELECT state FROM cortex_buffer.agent_state('{NOJOB}'::uuid)"))),
        ("cortex_buffer.append_session_bytes(text,text,bigint,bytea,text,boolean,bigint,text)", ok_bad(format!("SELECT action FROM cortex_buffer.append_session_bytes('r7-node', '{J}/session-101.jsonl', 0, convert_to('{}' || E'\\n', 'UTF8'), 'r7:1:1', {ST})", line(J, 0, "PUSHED")), &format!("SELECT action FROM cortex_buffer.append_session_bytes('r7-node', '{J}/session-101.jsonl', 999999, '\\x7b7d0a', 'r7:1:1', {ST})"))),
        ("cortex_buffer.append_session_batch(text,text[],bigint[],bytea[],text[],boolean[],bigint[],text)", ok_bad(format!("SELECT string_agg(action, ',') FROM cortex_buffer.append_session_batch('r7-node', ARRAY['{J}/session-102.jsonl', '{J}/session-103.jsonl'], ARRAY[0, 0]::bigint[], ARRAY[convert_to('{0}' || E'\\n', 'UTF8'), convert_to('{0}' || E'\\n', 'UTF8')], ARRAY['r7:1:2', 'r7:1:3'], {ST})", line(J, 0, "PUSHED")), &format!("SELECT string_agg(action, ',') FROM cortex_buffer.append_session_batch('r7-node', ARRAY['{J}/session-102.jsonl'], ARRAY[999999]::bigint[], ARRAY['\\x7b7d0a']::bytea[], ARRAY['r7:1:2'], {ST})"))),
        ("cortex_buffer.authorize_job(uuid)", ok_bad(format!("SELECT cortex_buffer.authorize_job('{J}')"), &format!("SELECT cortex_buffer.authorize_job('{NOJOB}')"))),
        ("cortex_buffer.await_pushed(uuid,text,bigint,interval)", ok_bad(format!("SELECT cortex_buffer.await_pushed('{J}', '{J}/session-101.jsonl', 1, '0 seconds')"), &format!("SELECT cortex_buffer.await_pushed('{J}', '{J}/../x.jsonl', 1, '0 seconds')"))),
        ("cortex_buffer.await_sources(uuid,interval)", ok_bad(format!("SELECT cortex_buffer.await_sources('{J}', '0 seconds')"), &format!("SELECT cortex_buffer.await_sources('{J}', '2 hours')"))),
        ("cortex_buffer.confirm_pushed(text,interval,text)", ok_bad(format!("SELECT cortex_buffer.confirm_pushed('r7-node', {ST}) IS NOT NULL"), &format!("SELECT cortex_buffer.confirm_pushed('r7-node', '-1 second', {ST})"))),
        ("cortex_buffer.drop_push_source(text)", ok_bad("SELECT cortex_buffer.drop_push_source('r7-pod-x')".into(), "SELECT cortex_buffer.drop_push_source('bad name')")),
        ("cortex_buffer.push_source_token(text)", ok_bad("SELECT length(cortex_buffer.push_source_token('r7-node')) > 0".into(), "SELECT cortex_buffer.push_source_token('r7-nosuch')")),
        ("cortex_buffer.register_push_source(text,uuid,boolean,text,text)", ok_bad(format!("SELECT length(cortex_buffer.register_push_source('r7-pod-x', '{J}')) > 0"), "SELECT cortex_buffer.register_push_source('bad name')")),
        ("cortex_buffer.revoke_push_source_token(text)", ok_bad("SELECT length(cortex_buffer.revoke_push_source_token('r7-pod-y')) > 0".into(), "SELECT cortex_buffer.revoke_push_source_token('r7-nosuch')")),
        ("cortex_buffer.cleanup_session_buffers(interval,interval,boolean,integer,double precision)", ok_bad("SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1)".into(), "SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_dirs => 0)")),
        ("cortex_buffer.clear_quarantine(text)", ok_bad(format!("SELECT cortex_buffer.clear_quarantine('{file}')"), "SELECT cortex_buffer.clear_quarantine('nosuch/x.jsonl')")),
        ("cortex_buffer.file_integrity(text)", ok_bad(format!("SELECT severity FROM cortex_buffer.file_integrity(current_setting('cortex_buffer.sessions_dir') || '/{file}')"), "SELECT severity FROM cortex_buffer.file_integrity('relative.jsonl')")),
        ("cortex_buffer.heartbeat(uuid)", ok_bad(format!("SELECT cortex_buffer.heartbeat('{J}')"), &format!("SELECT cortex_buffer.heartbeat('{NOJOB}')"))),
        ("cortex_buffer.idle_paused_jobs(interval)", ok_bad("SELECT count(*) FROM cortex_buffer.idle_paused_jobs('1 hour')".into(), "SELECT count(*) FROM cortex_buffer.idle_paused_jobs(NULL)")),
        ("cortex_buffer.index_now()", ("SELECT cortex_buffer.index_now()".into(), None)),
        ("cortex_buffer.index_sessions(text)", ok_bad("SELECT count(*) FROM cortex_buffer.index_sessions()".into(), "SELECT count(*) FROM cortex_buffer.index_sessions('/')")),
        ("cortex_buffer.install_checkpoint_trigger()", ("SELECT cortex_buffer.install_checkpoint_trigger()".into(), None)),
        ("cortex_buffer.job_timeline(uuid)", ok_bad(format!("SELECT count(*) FROM cortex_buffer.job_timeline('{J}')"), &format!("SELECT count(*) FROM cortex_buffer.job_timeline('{NOJOB}')"))),
        ("cortex_buffer.job_token(uuid)", ok_bad(format!("SELECT length(cortex_buffer.job_token('{J}')) > 0"), &format!("SELECT cortex_buffer.job_token('{NOJOB}')"))),
        ("cortex_buffer.reap_zombies(interval,integer)", ok_bad("SELECT count(*) FROM cortex_buffer.reap_zombies('1 day')".into(), "SELECT count(*) FROM cortex_buffer.reap_zombies('-1 day')")),
        ("cortex_buffer.record_crash(uuid,integer,text,text,integer,text,jsonb)", ok_bad(format!("SELECT cortex_buffer.record_crash('{J2}', 137, 'OOMKilled')"), &format!("SELECT cortex_buffer.record_crash('{NOJOB}', 137, 'OOMKilled')"))),
        ("cortex_buffer.record_outcome(uuid,uuid,boolean)", ok_bad(format!("SELECT state FROM cortex_buffer.record_outcome('{AGENT}', '{J2}', true)"), &format!("SELECT state FROM cortex_buffer.record_outcome('{AGENT}', '{NOJOB}', true)"))),
        ("cortex_buffer.record_usage(uuid,text,jsonb,text,timestamp with time zone)", ok_bad(format!("SELECT duplicate FROM cortex_buffer.record_usage('{J}', '{MODEL}', '{USAGE}', gen_random_uuid()::text)"), &format!("SELECT duplicate FROM cortex_buffer.record_usage('{NOJOB}', '{MODEL}', '{USAGE}')"))),
        ("cortex_buffer.recovery_plan(uuid,uuid,boolean)", ok_bad(format!("SELECT cortex_buffer.recovery_plan('{J}') IS NOT NULL"), &format!("SELECT cortex_buffer.recovery_plan('{NOJOB}')"))),
        ("cortex_buffer.release_reservation(uuid)", ok_bad(format!("SELECT cortex_buffer.release_reservation({reserve})"), &format!("SELECT cortex_buffer.release_reservation('{NOJOB}')"))),
        ("cortex_buffer.reserve_budget(uuid,jsonb,text)", ok_bad(format!("SELECT allowed FROM cortex_buffer.reserve_budget('{J}', '{USAGE}', '{MODEL}')"), &format!("SELECT allowed FROM cortex_buffer.reserve_budget('{NOJOB}', '{USAGE}', '{MODEL}')"))),
        ("cortex_buffer.session_recovery(text)", ok_bad(format!("SELECT cortex_buffer.session_recovery('{transcript}') IS NOT NULL"), "SELECT cortex_buffer.session_recovery('nosuch/x.jsonl')")),
        ("cortex_buffer.session_recovery(uuid)", ok_bad(format!("SELECT cortex_buffer.session_recovery('{S}'::uuid) IS NOT NULL"), &format!("SELECT cortex_buffer.session_recovery('{NOJOB}'::uuid)"))),
        ("cortex_buffer.session_usage(text)", ok_bad(format!("SELECT count(*) FROM cortex_buffer.session_usage('{transcript}')"), "SELECT count(*) FROM cortex_buffer.session_usage('nosuch/x.jsonl')")),
        ("cortex_buffer.set_budget(uuid,bigint,numeric)", ok_bad(format!("SELECT count(*) FROM cortex_buffer.set_budget('{AGENT}', 100000000, 1000)"), &format!("SELECT count(*) FROM cortex_buffer.set_budget('{AGENT}', -1, 1000)"))),
        ("cortex_buffer.settle_usage(uuid,jsonb,text)", ok_bad(format!("SELECT llm_calls FROM cortex_buffer.settle_usage({reserve}, '{USAGE}')"), &format!("SELECT llm_calls FROM cortex_buffer.settle_usage('{NOJOB}', '{USAGE}')"))),
        ("cortex_buffer.storage_report()", ("SELECT count(*) FROM cortex_buffer.storage_report()".into(), None)),
        ("cortex_buffer.write_checkpoint(uuid,jsonb,uuid,boolean)", ok_bad(format!("SELECT step_index FROM cortex_buffer.write_checkpoint('{J}', '{{\"step_index\": 1}}', NULL, true)"), &format!("SELECT step_index FROM cortex_buffer.write_checkpoint('{J}', '{{\"step_index\": -5}}', '{NOJOB}')"))),
    ])
}

/// Runs `sql` as `login` in a transaction, under a SAVEPOINT (rolled back to unless `keep`), then
/// checks the caller's identity and context in the same transaction and in the next. Returns
/// (the call's SQLSTATE, the probe's NOTICEs, the whole stderr).
fn call_and_check(c: &Cluster, login: &str, token: &str, setup: &str, sql: &str, keep: bool) -> (String, String) {
    let checks = |tag: &str| {
        format!(
            "SELECT '@@who{tag} ' || current_user || ',' || session_user || ',' || current_setting('is_superuser');
SAVEPOINT k1; SELECT count(*) FROM cortex_buffer.job_token_key;
\\echo @@secret{tag} :SQLSTATE
ROLLBACK TO SAVEPOINT k1;
SAVEPOINT k2; INSERT INTO cortex_buffer.job_token_key DEFAULT VALUES;
\\echo @@keyins{tag} :SQLSTATE
ROLLBACK TO SAVEPOINT k2;
SAVEPOINT k3; SET LOCAL ROLE NONE;
\\echo @@role{tag} :SQLSTATE
ROLLBACK TO SAVEPOINT k3;
SAVEPOINT k4; CREATE TEMP TABLE r7_tmp (x int);
\\echo @@temp{tag} :SQLSTATE
ROLLBACK TO SAVEPOINT k4;
"
        )
    };
    let rollback = if keep { "RELEASE SAVEPOINT call;" } else { "ROLLBACK TO SAVEPOINT call;" };
    let script = format!(
        "{}\nSET application_name = 'r7b';\nBEGIN;\nSAVEPOINT call;\n{setup}\n{sql};\n\\echo @@call :SQLSTATE\n\\if :ERROR\nROLLBACK TO SAVEPOINT call;\n\\endif\n{}\n{rollback}\n{}COMMIT;\nBEGIN;\n{}COMMIT;\n",
        prefix(login, token),
        if keep { checks("0") } else { String::new() },
        checks("1"),
        checks("2"),
    );
    let (out, err) = session(c, login, &script);
    let tags: &[&str] = if keep { &["0", "1", "2"] } else { &["1", "2"] };
    for tag in tags {
        let who = out.lines().find_map(|l| l.strip_prefix(&format!("@@who{tag} "))).unwrap_or("missing");
        assert_eq!(who, format!("{login},{login},off"), "{login} after {sql} ({tag})\n{out}\n{err}");
        for (what, want) in [("secret", "42501"), ("keyins", "42501"), ("role", "00000"), ("temp", "00000")] {
            assert_eq!(mark(&out, &format!("{what}{tag}")), want, "{login} after {sql}: {what} ({tag})\n{out}\n{err}");
        }
    }
    (mark(&out, "call"), err)
}

/// (table, who) of each probe NOTICE.
fn probes(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter_map(|l| l.split("r7probe ").nth(1))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 4).then(|| (w[1].to_owned(), w[3].to_owned()))
        })
        .collect()
}

const PROBE: &str = r#"
CREATE FUNCTION public.r7_probe() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'r7probe % % as % su=%', TG_OP, TG_TABLE_NAME, current_user, current_setting('is_superuser');
  IF pg_catalog.current_setting('r7.mode', true) = 'fail' THEN
    RAISE EXCEPTION 'r7 failure inside % on %', current_user, TG_TABLE_NAME USING ERRCODE = 'data_exception';
  ELSIF pg_catalog.current_setting('r7.mode', true) = 'sleep' THEN
    PERFORM pg_catalog.pg_sleep(30);
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT c.oid::regclass AS t FROM pg_class c
            WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition LOOP
    EXECUTE format('CREATE TRIGGER r7_probe BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION public.r7_probe()', r.t);
  END LOOP;
END $$;
"#;

#[derive(Default)]
struct SwitchFigures {
    functions: usize,
    pairs: usize,
    wrote: usize,
    errors_inside: usize,
    errors_args: usize,
    cancels_inside: usize,
    cancels_blocked: usize,
    not_cancellable: Vec<String>,
    no_error_path: Vec<String>,
    infeasible: Vec<String>,
    skipped: Vec<String>,
}

/// Part 3: the definer switch on success, error and cancel.
fn definer_switch(c: &Cluster, funcs: &[Func], token: &str) -> SwitchFigures {
    let table = calls();
    let mut fig = SwitchFigures::default();
    let t0 = Instant::now();
    let writers: Vec<&Func> =
        funcs.iter().filter(|f| f.volatile && !f.trigger && f.sig != "cortex_buffer.indexer_worker()").collect();
    let mut lock_needed: Vec<(String, &'static str, String)> = Vec::new();
    for f in &writers {
        let callers: Vec<&(&str, &str)> = ROLES
            .iter()
            .filter(|(g, _)| c.psql(&format!("SELECT has_function_privilege('{g}', '{}', 'EXECUTE')", f.sig)) == "t")
            .collect();
        if callers.is_empty() {
            // copy_table_grants, event_partition_create/drop, partition_events: no documented
            // role may call them (install, the definer role itself, superusers).
            fig.skipped.push(f.sig.clone());
            continue;
        }
        let (ok, bad) = table.get(f.sig.as_str()).unwrap_or_else(|| panic!("{}: add how to call it to calls()", f.sig));
        fig.functions += 1;
        eprintln!("switch: {} ({:.1} s)", f.sig, t0.elapsed().as_secs_f64());
        let mut first = true;
        for (_, login) in callers {
            fig.pairs += 1;
            // Success, its writes seen by the probe.
            let (state, err) = call_and_check(c, login, token, "", ok, true);
            let seen = probes(&err);
            let feasible = state == "00000";
            if !feasible {
                // install_checkpoint_trigger wants the job table's owner: the operator is not.
                assert!(
                    f.name == "install_checkpoint_trigger" && state == "42501",
                    "{login}: {ok} gave {state}\nstderr: {err}"
                );
                fig.infeasible.push(format!("{}:{login}", f.name));
            }
            for (tbl, who) in &seen {
                if tbl == "job" {
                    assert!(who == login || who == "cortex_buffer_agent_call", "{login}: {ok}: job written as {who}");
                } else {
                    assert_eq!(who, "cortex_buffer_definer", "{login}: {ok}: {tbl} written as {who}, not switched");
                }
            }
            let wrote = seen.iter().any(|(t, _)| t != "job");
            if wrote {
                fig.wrote += 1;
            }
            // An error raised inside the switch (the probe fails the write), else bad arguments.
            let (state, err) = call_and_check(c, login, token, "SET LOCAL r7.mode = 'fail';", ok, false);
            if err.contains("r7 failure inside cortex_buffer_") {
                assert_ne!(state, "00000", "{login}: {ok}: the probe failed it, yet it succeeded");
                fig.errors_inside += 1;
            } else if let Some(bad) = bad {
                // (a fleet role may authorise any job id: some bad arguments are not bad for all)
                if call_and_check(c, login, token, "", bad, false).0 != "00000" {
                    fig.errors_args += 1;
                } else {
                    fig.no_error_path.push(format!("{}:{login}", f.name));
                }
            } else if !feasible {
                fig.errors_args += 1; // its success call erred (above), with the checks after it
            } else {
                fig.no_error_path.push(format!("{}:{login}", f.name));
            }
            // A cancel inside the switch: the probe sleeps into statement_timeout.
            if first {
                first = false;
                let (state, err) = call_and_check(
                    c,
                    login,
                    token,
                    "SET LOCAL r7.mode = 'sleep'; SET LOCAL statement_timeout = '300ms';",
                    ok,
                    false,
                );
                if state == "57014" && err.contains("r7probe") {
                    fig.cancels_inside += 1;
                } else {
                    lock_needed.push((f.sig.clone(), login, ok.clone()));
                }
            }
        }
    }
    // The others: blocked on the extension's tables, which another session holds, and cancelled
    // with pg_cancel_backend() from a third. (Not the token secret: the agent's session reads it
    // when it presents its token, before the call.)
    if !lock_needed.is_empty() {
        let locked: String = c.psql(
            "SELECT string_agg(c.oid::regclass::text, ', ') FROM pg_class c
              WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'p')
                AND c.relname NOT IN ('job', 'model_price', 'job_token_key')",
        );
        let holder = {
            let (bin, socket, port) = (bindir(), c.socket_dir.clone(), c.port);
            let script = format!("SET application_name = 'r7lock'; BEGIN; LOCK TABLE {locked} IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);");
            std::thread::spawn(move || {
                Command::new("runuser")
                    .args(["-u", "postgres", "--"])
                    .arg(bin.join("psql"))
                    .args(["-X", "-q", "-h"])
                    .arg(socket)
                    .args(["-p", &port.to_string(), "-d", "postgres", "-c", &script])
                    .output()
            })
        };
        assert!(wait_for(Duration::from_secs(20), || c.psql(
            "SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
              WHERE a.application_name = 'r7lock' AND l.mode = 'AccessExclusiveLock' AND l.granted
                AND l.relation = 'cortex_buffer.event'::regclass"
        ) == "t")
        .is_some());
        for (sig, login, ok) in &lock_needed {
            std::thread::scope(|scope| {
                let call =
                    scope.spawn(|| call_and_check(c, login, token, "SET LOCAL statement_timeout = '20s';", ok, false));
                let mut waited = None;
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(1500) && !call.is_finished() {
                    let r = c.psql(
                        "SELECT l.relation::regclass::text || ',' || l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                          WHERE a.application_name = 'r7b' AND NOT l.granted AND l.relation IS NOT NULL LIMIT 1",
                    );
                    if let Some((rel, pid)) = r.split_once(',') {
                        c.psql(&format!("SELECT pg_cancel_backend({pid})"));
                        waited = Some(rel.to_owned());
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(30));
                }
                if waited.is_none() && !call.is_finished() {
                    // Blocked on something else than a relation: cancel it all the same.
                    c.psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'r7b'");
                    waited = Some("cortex_buffer.job".to_owned());
                }
                let (state, _err) = call.join().expect("call thread");
                match waited {
                    Some(rel) => {
                        assert_eq!(state, "57014", "{login}: {ok}: cancelled while waiting on {rel}");
                        // Waiting on a table the caller may not read: inside a switch.
                        let own = c.psql(&format!("SELECT has_table_privilege('{login}', '{rel}', 'SELECT')"));
                        if own == "t" {
                            fig.cancels_blocked += 1;
                            eprintln!("cancel: {sig} as {login} waited on {rel} with its own rights");
                        } else {
                            fig.cancels_inside += 1;
                        }
                    }
                    None => fig.not_cancellable.push(format!("{sig}:{state}")),
                }
            });
        }
        c.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'r7lock'");
        let _ = holder.join();
    }
    eprintln!(
        "definer switch: {} functions ({} pairs with a role), {} wrote the extension's tables (all as cortex_buffer_definer); errors inside the switch {}, by arguments {}; cancels inside {}, elsewhere {}; not cancellable (touch no locked table) {:?}; no error path {:?}; success infeasible {:?}; not callable by any documented role {:?}",
        fig.functions,
        fig.pairs,
        fig.wrote,
        fig.errors_inside,
        fig.errors_args,
        fig.cancels_inside,
        fig.cancels_blocked,
        fig.not_cancellable,
        fig.no_error_path,
        fig.infeasible,
        fig.skipped
    );
    fig
}

/// Part 4: each role does its job and nothing more.
fn roles(c: &Cluster, funcs: &[Func], rels: &[(String, String, bool)], token: &str) -> usize {
    // The catalogue's grants are the docs' (operations.md, the role table's "may call").
    let public: BTreeSet<&str> = funcs.iter().filter(|f| f.public).map(|f| f.name.as_str()).collect();
    for (group, _) in ROLES {
        let granted: BTreeSet<String> = c
            .psql(&format!(
                "SELECT string_agg(DISTINCT p.proname, ',') FROM pg_proc p
                  WHERE p.pronamespace = 'cortex_buffer'::regnamespace
                    AND has_function_privilege('{group}', p.oid, 'EXECUTE') AND NOT has_function_privilege('public', p.oid, 'EXECUTE')"
            ))
            .split(',')
            .map(str::to_owned)
            .collect();
        let documented: BTreeSet<String> = documented_calls(group)
            .into_iter()
            .filter(|n| funcs.iter().any(|f| &f.name == n) && !public.contains(n.as_str()))
            .collect();
        let undocumented: Vec<&String> = granted.difference(&documented).collect();
        let ungranted: Vec<&String> = documented.difference(&granted).collect();
        eprintln!(
            "{group}: granted, not in the docs' table: {undocumented:?}; in the table, not granted: {ungranted:?}"
        );
        assert!(
            ungranted.is_empty(),
            "{group}: docs/operations.md says it may call {ungranted:?}, the catalogue says not"
        );
        assert!(
            undocumented.is_empty(),
            "{group}: granted but not in docs/operations.md's role table: {undocumented:?}"
        );
    }

    let mut refused = 0;
    // Nothing more: every function without EXECUTE, every relation without the privilege: 42501.
    for (group, login) in ROLES {
        let mut stmts = Vec::new();
        for f in funcs {
            if c.psql(&format!("SELECT has_function_privilege('{group}', '{}', 'EXECUTE')", f.sig)) == "f" {
                stmts.push(f.dummy_call());
            }
        }
        for (rel, kind, _) in rels {
            let can = |p: &str| {
                c.psql(&format!(
                    "SELECT has_{}_privilege('{group}', '{rel}', '{p}')",
                    if kind == "S" { "sequence" } else { "table" }
                )) == "t"
            };
            if kind == "S" {
                if !can("USAGE") {
                    stmts.push(format!("SELECT nextval('{rel}')"));
                }
                continue;
            }
            if !can("SELECT") {
                stmts.push(format!("SELECT 1 FROM {rel} LIMIT 0"));
            }
            if matches!(kind.as_str(), "r" | "p") {
                if !can("DELETE") {
                    stmts.push(format!("DELETE FROM {rel} WHERE false"));
                }
                if !can("UPDATE") && !can("SELECT") {
                    stmts.push(format!("UPDATE {rel} SET {c} = {c} WHERE false", c = first_column(c, rel)));
                }
            }
        }
        let states = states_of(c, login, &prefix(login, token), &stmts);
        for (s, st) in stmts.iter().zip(&states) {
            assert_eq!(st, "42501", "{login} must not: {s}");
        }
        refused += stmts.len();
    }

    // Its job, beyond the calls part 3 made as it (each documented role, success, above).
    let work: [(&str, Vec<String>); 4] = [
        ("r7_agent", vec![
            format!("SELECT * FROM cortex_buffer.read_checkpoint('{J}')"),
            format!("SELECT * FROM cortex_buffer.check_token_budget('{J}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_events('{J}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_usage_from_buffer('{J}')"),
            format!("SELECT count(*) FROM cortex_buffer.log_entries('{J}/tools.jsonl')"),
            format!("SELECT count(*) FROM cortex_buffer.check_log_snapshot('{J}/tools.jsonl', 2, 2)"),
        ]),
        ("r7_cp", vec![
            format!("INSERT INTO cortex_buffer.job (agent_id) VALUES ('{AGENT}')"),
            format!("UPDATE cortex_buffer.job SET attempt = attempt WHERE id = '{JO}'"),
            format!("SELECT * FROM cortex_buffer.retry_decision('{J2}')"),
            format!("SELECT * FROM cortex_buffer.circuit_state('{AGENT}')"),
            "SELECT count(*) FROM cortex_buffer.event".into(),
            "SELECT count(*) FROM cortex_buffer.job_sessions".into(),
            "SELECT count(*) FROM cortex_buffer.untrusted_session_files".into(),
            "INSERT INTO cortex_buffer.push_source (source, login) VALUES ('r7-pod', 'r7_pusher')".into(),
            format!("INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('r7-pod', '{JO}')"),
            "DELETE FROM cortex_buffer.push_grant WHERE source = 'r7-pod'".into(),
            "SELECT cortex_buffer.drop_push_source('r7-pod')".into(),
        ]),
        ("r7_op", vec![
            "SELECT count(*) FROM cortex_buffer.verify_checkpoints()".into(),
            "SELECT cortex_buffer.reaper_index_sql()".into(),
            "SELECT count(*) FROM cortex_buffer.check_binding()".into(),
            format!("SELECT count(*) FROM cortex_buffer.log_entries('{J}/tools.jsonl')"),
            "INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok) VALUES ('r7-model', now(), 1, 2, 3, 4, 5)".into(),
            format!("INSERT INTO cortex_buffer.circuit_config (agent_id, failure_threshold) VALUES ('{AGENT}', 50)"),
            "SELECT count(*) FROM cortex_buffer.indexer_status".into(),
            "SELECT count(*) FROM cortex_buffer.crash".into(),
            "SELECT count(*) FROM cortex_buffer.corrupt_line".into(),
            "SELECT count(*) FROM cortex_buffer.pushed_file".into(),
        ]),
        ("r7_pusher", vec![format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('r7-node', {ST})")]),
    ];
    let mut done = 0;
    for (login, stmts) in &work {
        for (s, st) in stmts.iter().zip(states_of(c, login, &prefix(login, token), stmts)) {
            assert_eq!(st, "00000", "{login} must be able to: {s}");
            done += 1;
        }
    }
    // The next one's work, and the controls it is governed by, by rows its grants do not reach.
    let other_token = c.psql(&format!("SELECT cortex_buffer.job_token('{JO}')"));
    let refusals: [(&str, Vec<String>); 4] = [
        ("r7_agent", vec![
            format!("SELECT cortex_buffer.heartbeat('{JO}')"),
            format!("SELECT * FROM cortex_buffer.read_checkpoint('{JO}')"),
            format!("SELECT count(*) FROM cortex_buffer.job_events('{JO}')"),
            format!("SELECT * FROM cortex_buffer.write_checkpoint('{JO}', '{{\"step_index\": 1}}')"),
            format!("SELECT * FROM cortex_buffer.record_usage('{JO}', '{MODEL}', '{USAGE}')"),
            format!("SELECT state FROM cortex_buffer.agent_state('{JO}/session-001.jsonl')"),
            format!("SELECT cortex_buffer.authorize_job('{JO}')"),
            format!("SELECT cortex_buffer.job_token('{J}')"),
            "SELECT count(*) FROM cortex_buffer.cleanup_session_buffers(dry_run => true)".into(),
            "SELECT count(*) FROM cortex_buffer.reap_zombies('1 day')".into(),
            format!("UPDATE cortex_buffer.job SET heartbeat_at = 'infinity' WHERE id = '{J}'"),
            format!("SET cortex_buffer.job_token = '{other_token}'; SELECT cortex_buffer.heartbeat('{J}')"),
        ]),
        ("r7_cp", vec![
            format!("SELECT cortex_buffer.heartbeat('{J}')"),
            format!("SELECT count(*) FROM cortex_buffer.set_budget('{AGENT}', 1, 1)"),
            "SELECT count(*) FROM cortex_buffer.index_sessions()".into(),
            format!("UPDATE cortex_buffer.job_usage SET cost_usd = 0 WHERE job_id = '{J}'"),
            format!("INSERT INTO cortex_buffer.crash (job_id, reason) VALUES ('{J}', 'x')"),
            "UPDATE cortex_buffer.circuit SET open_until = NULL".into(),
            "DELETE FROM cortex_buffer.job".into(),
            "UPDATE cortex_buffer.push_source SET all_jobs = true".into(),
            "DELETE FROM cortex_buffer.push_source WHERE source = 'r7-node'".into(),
            "INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('r7-all', 'r7_pusher', true)".into(),
        ]),
        ("r7_op", vec![
            format!("UPDATE cortex_buffer.job SET status = 'COMPLETED' WHERE id = '{J}'"),
            format!("SELECT * FROM cortex_buffer.record_crash('{J}', 1, 'x')"),
            format!("SELECT cortex_buffer.heartbeat('{J}')"),
            format!("SELECT * FROM cortex_buffer.file_integrity('{}/outside/secret.jsonl')", c.base.display()),
            "SELECT count(*) FROM cortex_buffer.index_sessions('/tmp')".into(),
            format!("DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '{J}'"),
            "DELETE FROM cortex_buffer.usage_ledger".into(),
        ]),
        ("r7_pusher", vec![
            format!("SELECT * FROM cortex_buffer.append_session_bytes('r7-node', '{JO}/session-001.jsonl', 0, '\\x7b7d0a', 'r7:2:2', {ST})"),
            format!("SELECT count(*) FROM cortex_buffer.pushed_offsets('r7-other', {ST})"),
            "SELECT count(*) FROM cortex_buffer.pushed_offsets('r7-node')".into(),
            "SELECT count(*) FROM cortex_buffer.pushed_file".into(),
            format!("SELECT cortex_buffer.heartbeat('{J}')"),
        ]),
    ];
    c.psql("INSERT INTO cortex_buffer.push_source (source, login) VALUES ('r7-other', 'r7_op')");
    for (login, stmts) in &refusals {
        for (s, st) in stmts.iter().zip(states_of(c, login, &prefix(login, token), stmts)) {
            assert_eq!(st, "42501", "{login} must not: {s}");
            refused += 1;
        }
    }
    eprintln!("roles: {done} more statements of their jobs worked; {refused} outside them refused with 42501");
    refused
}

fn first_column(c: &Cluster, rel: &str) -> String {
    c.psql(&format!(
        "SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = '{rel}'::regclass AND attnum > 0
          AND NOT attisdropped AND attidentity = '' AND attgenerated = '' ORDER BY attnum LIMIT 1"
    ))
}

#[test]
fn privileges() {
    let t = Instant::now();
    let c = Cluster::new("privileges", &["cortex_buffer.settle_period = 0", "cortex_buffer.poll_interval = 100"]);
    c.start();
    c.create_extension();
    // A helper of the test's own (superuser, outside the schema): does any row of `rel` contain `needle`?
    c.psql(
        "CREATE FUNCTION public.cortex_buffer_r7_contains(rel regclass, needle text) RETURNS boolean LANGUAGE plpgsql AS $$
         DECLARE found boolean; BEGIN
           EXECUTE format('SELECT EXISTS (SELECT FROM %s t WHERE t::text LIKE %L)', rel, '%' || needle || '%') INTO found;
           RETURN found; END $$",
    );
    let (outside, token) = setup(&c);
    let funcs = functions(&c);
    let rels = relations(&c);
    let (n, m, p) = no_grants(&c, &funcs, &rels);
    let k = paths(&c, &funcs, &token, &outside);
    c.psql(PROBE);
    let fig = definer_switch(&c, &funcs, &token);
    let refused = roles(&c, &funcs, &rels, &token);
    // The worker lived through it all.
    assert!(c.worker_pid().is_some(), "{}", c.log_tail());
    assert_eq!(c.log_count("PANIC"), 0);
    let w = fig.functions;
    report(
        "R7",
        "privileges",
        &format!(
            "{n} functions and {m} relations checked as a role without grants ({p} PUBLIC), {k} path escapes refused, \
             {w} writing functions restore user and context on success/error/cancel ({} role pairs; {} errors and {} cancels inside the switch), \
             4 roles ({refused} refusals), {:.0} s",
            fig.pairs,
            fig.errors_inside,
            fig.cancels_inside,
            t.elapsed().as_secs_f64()
        ),
    );
}
