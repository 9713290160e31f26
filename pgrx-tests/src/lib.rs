//! Test harness: private PostgreSQL clusters with cortex_buffer preloaded, run as the
//! `postgres` OS user (Postgres refuses to run as root), driven through `psql`.
//!
//! Every cluster lives in its own directory under `$CORTEX_E2E_DIR` (default
//! `/tmp/cortex_buffer-e2e`), which must be reachable by `postgres`; it listens only on a Unix
//! socket in that directory, so clusters never collide. Dropping a [`Cluster`] stops it and
//! removes its directory (set `CORTEX_E2E_KEEP=1` to keep them for inspection).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

pub mod pods;
pub mod writers;

/// The worker's name in `pg_stat_activity.backend_type`.
pub const WORKER: &str = "cortex_buffer indexer";

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

fn e2e_root() -> PathBuf {
    PathBuf::from(std::env::var("CORTEX_E2E_DIR").unwrap_or_else(|_| "/tmp/cortex_buffer-e2e".into()))
}

/// The server binaries: from `$PG_CONFIG` (set by scripts/test.sh), else Debian's PostgreSQL 15.
fn bindir() -> PathBuf {
    let pg_config = std::env::var("PG_CONFIG").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_config".into());
    let out = Command::new(&pg_config).arg("--bindir").output().unwrap_or_else(|e| panic!("{pg_config}: {e}"));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"))
}

fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"]).arg(program);
    c
}

fn chown_postgres(path: &Path) {
    let out = run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(path));
    assert!(out.status.success(), "chown {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
}

pub struct Cluster {
    pub name: String,
    pub base: PathBuf,
    pub pgdata: PathBuf,
    pub socket_dir: PathBuf,
    pub sessions: PathBuf,
    pub log: PathBuf,
    pub port: u16,
    pub bin: PathBuf,
    /// Started as a test server (`CORTEX_BUFFER_TESTING` in its environment): the test knobs
    /// are settings there (src/pg/guc.rs). True but for [`Cluster::production`].
    pub testing: bool,
}

impl Cluster {
    /// A fresh cluster with cortex_buffer preloaded and `extra` lines appended to its
    /// postgresql.conf. Not started.
    pub fn new(name: &str, extra: &[&str]) -> Cluster {
        Self::with_preload(name, true, extra)
    }

    pub fn with_preload(name: &str, preload: bool, extra: &[&str]) -> Cluster {
        let root = e2e_root();
        fs::create_dir_all(&root).expect("create CORTEX_E2E_DIR");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod CORTEX_E2E_DIR");
        let base = root.join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).expect("create cluster dir");
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).expect("chmod cluster dir");
        let port = 55_000 + NEXT_PORT.fetch_add(1, Ordering::SeqCst) + (std::process::id() % 500) as u16 * 10;
        let c = Cluster {
            name: name.to_owned(),
            pgdata: base.join("data"),
            socket_dir: base.join("run"),
            sessions: base.join("sessions"),
            log: base.join("run/postgres.log"),
            base,
            port,
            bin: bindir(),
            testing: true,
        };
        fs::create_dir_all(&c.socket_dir).expect("socket dir");
        chown_postgres(&c.socket_dir);
        fs::create_dir_all(&c.pgdata).expect("pgdata dir");
        chown_postgres(&c.pgdata);
        fs::create_dir_all(&c.sessions).expect("sessions dir");
        fs::set_permissions(&c.sessions, fs::Permissions::from_mode(0o755)).expect("chmod sessions");

        let out = run(as_postgres(&c.bin.join("initdb"))
            .args(["-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "-D"])
            .arg(&c.pgdata));
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));

        let mut conf = vec![
            format!("port = {}", c.port),
            "listen_addresses = ''".to_owned(),
            format!("unix_socket_directories = '{}'", c.socket_dir.display()),
            "fsync = off".to_owned(),
            "log_line_prefix = '%m [%p] %b: '".to_owned(),
            format!("cortex_buffer.sessions_dir = '{}'", c.sessions.display()),
        ];
        if preload {
            conf.push("shared_preload_libraries = 'cortex_buffer'".to_owned());
        }
        // The whole suite runs again in poll mode (scripts/test.sh): CORTEX_E2E_WATCH=poll.
        if let Ok(mode) = std::env::var("CORTEX_E2E_WATCH") {
            conf.push(format!("cortex_buffer.watch = '{mode}'"));
        }
        conf.extend(extra.iter().map(|s| (*s).to_owned()));
        let conf_path = c.pgdata.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf_path).expect("read postgresql.conf");
        text.push_str("\n# cortex_buffer e2e\n");
        text.push_str(&conf.join("\n"));
        text.push('\n');
        fs::write(&conf_path, text).expect("write postgresql.conf");
        c
    }

    /// The cluster started as a production server: without the test knobs.
    pub fn production(mut self) -> Cluster {
        self.testing = false;
        self
    }

    /// A streaming standby of `primary` (which must be running), made with pg_basebackup.
    /// Not started.
    pub fn standby_of(primary: &Cluster, name: &str) -> Cluster {
        let c = Cluster::new(name, &[]);
        fs::remove_dir_all(&c.pgdata).expect("clear standby pgdata");
        fs::create_dir_all(&c.pgdata).expect("standby pgdata");
        chown_postgres(&c.pgdata);
        let out = run(as_postgres(&c.bin.join("pg_basebackup"))
            .arg("-h")
            .arg(&primary.socket_dir)
            .args(["-p", &primary.port.to_string(), "-R", "-X", "stream", "--checkpoint=fast", "-D"])
            .arg(&c.pgdata));
        assert!(out.status.success(), "pg_basebackup failed: {}", String::from_utf8_lossy(&out.stderr));
        // The copied postgresql.conf names the primary's port and directories; later lines win.
        let conf_path = c.pgdata.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf_path).expect("read standby postgresql.conf");
        text.push_str(&format!(
            "\n# standby overrides\nport = {}\nunix_socket_directories = '{}'\ncortex_buffer.sessions_dir = '{}'\n",
            c.port,
            c.socket_dir.display(),
            c.sessions.display()
        ));
        fs::write(&conf_path, text).expect("write standby postgresql.conf");
        fs::set_permissions(&c.pgdata, fs::Permissions::from_mode(0o700)).expect("chmod standby pgdata");
        c
    }

    pub fn start(&self) {
        let mut pg_ctl = as_postgres(&self.bin.join("pg_ctl"));
        if self.testing {
            pg_ctl.env("CORTEX_BUFFER_TESTING", "1");
        }
        let out = run(pg_ctl.args(["start", "-w", "-t", "60", "-D"]).arg(&self.pgdata).arg("-l").arg(&self.log));
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log_text()
        );
    }

    /// Stops the cluster with `mode` (smart, fast, immediate) and returns how long it took.
    pub fn stop(&self, mode: &str) -> Duration {
        let t = Instant::now();
        let out = run(as_postgres(&self.bin.join("pg_ctl"))
            .args(["stop", "-w", "-t", "60", "-m", mode, "-D"])
            .arg(&self.pgdata));
        assert!(out.status.success(), "pg_ctl stop failed: {}", String::from_utf8_lossy(&out.stderr));
        t.elapsed()
    }

    pub fn is_running(&self) -> bool {
        run(as_postgres(&self.bin.join("pg_ctl")).arg("status").arg("-D").arg(&self.pgdata)).status.success()
    }

    /// Runs SQL with psql as the `postgres` role; Ok(stdout) or Err(stderr).
    pub fn try_psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = run(as_postgres(&self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.socket_dir)
            .args(["-p", &self.port.to_string(), "-d", db, "-c", sql]));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Like [`try_psql`](Self::try_psql) but returns stdout and stderr (NOTICEs) together.
    pub fn psql_with_notices(&self, db: &str, sql: &str) -> (String, String) {
        let out = run(as_postgres(&self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.socket_dir)
            .args(["-p", &self.port.to_string(), "-d", db, "-c", sql]));
        (String::from_utf8_lossy(&out.stdout).trim_end().to_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Runs a client program of the server's (`pg_dump`, `pg_restore`, `createdb`...) as
    /// `postgres` against this cluster: `-h <socket> -p <port>` come first, then `args`.
    pub fn client_tool(&self, tool: &str, args: &[&str]) -> Result<String, String> {
        let out = run(as_postgres(&self.bin.join(tool))
            .arg("-h")
            .arg(&self.socket_dir)
            .args(["-p", &self.port.to_string()])
            .args(args));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs `statements` one after another in ONE session, each in its own transaction (one
    /// `-c` each); Ok(stdout of all) or Err(stderr).
    pub fn psql_session(&self, db: &str, statements: &[&str]) -> Result<String, String> {
        let mut cmd = self.psql_command(db);
        for s in statements {
            cmd.args(["-c", s]);
        }
        let out = run(&mut cmd);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// A psql command for `db` as `postgres` (quiet, unaligned, stops at the first error), to
    /// which the caller adds `-c` statements; for sessions a test runs in its own threads.
    pub fn psql_command(&self, db: &str) -> Command {
        let mut cmd = as_postgres(&self.bin.join("psql"));
        cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"]).arg(&self.socket_dir).args([
            "-p",
            &self.port.to_string(),
            "-d",
            db,
        ]);
        cmd
    }

    pub fn psql(&self, sql: &str) -> String {
        self.try_psql("postgres", sql)
            .unwrap_or_else(|e| panic!("psql failed: {sql}\n{e}\n--- server log ---\n{}", self.log_tail()))
    }

    pub fn create_extension(&self) {
        self.psql("CREATE EXTENSION cortex_buffer");
    }

    /// Sets a GUC with ALTER SYSTEM and reloads.
    pub fn set_and_reload(&self, name: &str, value: &str) {
        self.psql(&format!("ALTER SYSTEM SET {name} = '{value}'"));
        self.psql("SELECT pg_reload_conf()");
    }

    pub fn worker_pid(&self) -> Option<i32> {
        self.try_psql("postgres", &format!("SELECT pid FROM pg_stat_activity WHERE backend_type = '{WORKER}'"))
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()))
    }

    /// Every indexer process's pid (`cortex_buffer.workers` of them).
    pub fn worker_pids(&self) -> Vec<i32> {
        self.try_psql(
            "postgres",
            &format!("SELECT pid FROM pg_stat_activity WHERE backend_type = '{WORKER}' ORDER BY pid"),
        )
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
    }

    pub fn worker_activity(&self) -> String {
        self.try_psql("postgres", &format!("SELECT query FROM pg_stat_activity WHERE backend_type = '{WORKER}'"))
            .unwrap_or_default()
    }

    /// Number of `session_file` rows whose path ends with `suffix`.
    pub fn files_recorded(&self, suffix: &str) -> i64 {
        self.try_psql(
            "postgres",
            &format!("SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE '%{suffix}'"),
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    }

    /// Writes a file below the sessions directory (as root; readable by everyone).
    pub fn put(&self, rel: &str, body: &str) {
        let p = self.sessions.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create session subdirectory");
        }
        fs::write(&p, body).expect("write session file");
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// How many log lines contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log_text().lines().filter(|l| l.contains(needle)).count()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.is_running() {
            let _ =
                run(as_postgres(&self.bin.join("pg_ctl")).args(["stop", "-m", "immediate", "-D"]).arg(&self.pgdata));
        }
        if std::env::var_os("CORTEX_E2E_KEEP").is_none() && !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

/// The control plane's job table, as its migrations create it (schema `cp`).
pub const CONTROL_PLANE_FIXTURE: &str = include_str!("../fixtures/control_plane_job.sql");

/// Everything about the `cortex_buffer` schema that an upgrade must reproduce, one line per
/// fact: functions (definition, effective privileges, comment), relations, columns, constraints, indexes,
/// triggers, types, extension members and configuration tables.
pub const SCHEMA_FINGERPRINT_SQL: &str = "
SELECT line FROM (
  SELECT 'function ' || p.oid::regprocedure::text || ' owner=' || p.proowner::regrole::text || ' def=' || md5(pg_get_functiondef(p.oid))
         || ' acl=' || coalesce(p.proacl, acldefault('f', p.proowner))::text || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '') AS line
    FROM pg_proc p WHERE p.pronamespace = 'cortex_buffer'::regnamespace
  UNION ALL
  SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text
         || ' acl=' || coalesce(c.relacl, acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::\"char\", c.relowner))::text
         || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '')
    FROM pg_class c WHERE c.relnamespace = 'cortex_buffer'::regnamespace
  UNION ALL
  SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
         || ' identity=' || a.attidentity::text || ' storage=' || a.attstorage::text
         || ' compression=' || a.attcompression::text || ' comment=' || coalesce(col_description(c.oid, a.attnum), '')
    FROM pg_class c
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
   WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
  UNION ALL
  SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'cortex_buffer'::regnamespace
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'cortex_buffer'::regnamespace
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND NOT t.tgisinternal
  UNION ALL
  SELECT 'type ' || t.typname || ' ' || coalesce((SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder) FROM pg_enum WHERE enumtypid = t.oid), '')
         || ' acl=' || coalesce(t.typacl, acldefault('T', t.typowner))::text
         || ' comment=' || coalesce(obj_description(t.oid, 'pg_type'), '')
    FROM pg_type t WHERE t.typnamespace = 'cortex_buffer'::regnamespace AND t.typrelid = 0 AND t.typelem = 0
  UNION ALL
  SELECT 'config ' || x::regclass::text || ' ' || coalesce(cond, '')
    FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(x, cond) WHERE e.extname = 'cortex_buffer'
  UNION ALL
  SELECT 'seeded price ' || concat_ws(' ', model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok,
                                      cache_write_1h_per_mtok, cache_read_per_mtok)
    FROM cortex_buffer.model_price WHERE seeded
  UNION ALL
  SELECT 'member ' || pg_describe_object(classid, objid, objsubid)
    FROM pg_depend
   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cortex_buffer')
  UNION ALL
  SELECT 'schema acl=' || coalesce(nspacl::text, '') || ' comment=' || coalesce(obj_description(oid, 'pg_namespace'), '')
    FROM pg_namespace WHERE nspname = 'cortex_buffer'
) f ORDER BY line";

/// Runs several SQL scripts at once, each in its own psql session, and returns each one's
/// outcome: Ok(stdout) or Err(stderr) (errors carry their SQLSTATE: VERBOSITY is verbose).
pub fn psql_concurrently(c: &Cluster, db: &str, scripts: Vec<String>) -> Vec<Result<String, String>> {
    let handles: Vec<_> = scripts
        .into_iter()
        .map(|sql| {
            let (bin, socket, port, db) = (c.bin.clone(), c.socket_dir.clone(), c.port, db.to_owned());
            std::thread::spawn(move || {
                let out = run(as_postgres(&bin.join("psql"))
                    .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", "-h"])
                    .arg(&socket)
                    .args(["-p", &port.to_string(), "-d", &db, "-c", &sql]));
                if out.status.success() {
                    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                }
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("psql thread panicked".into()))).collect()
}

/// Polls `check` every 50 ms until it holds or `timeout` passes; returns the time it took.
pub fn wait_for(timeout: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if check() {
            return Some(t.elapsed());
        }
        if t.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `signal` (e.g. "KILL") to `pid`.
pub fn kill(pid: i32, signal: &str) {
    let out = run(Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()));
    assert!(out.status.success(), "kill -{signal} {pid}: {}", String::from_utf8_lossy(&out.stderr));
}

/// xorshift64*: a small, seedable, reproducible generator for the randomised tests (a failing
/// seed is printed by each test and replays the same run).
pub struct Rng(u64);

impl Rng {
    /// Any seed works (zero is mapped away: xorshift would stay at zero).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Milliseconds in `0..n`, for sleeps.
    pub fn millis_below(&mut self, n: u64) -> std::time::Duration {
        std::time::Duration::from_millis(self.next_u64() % n)
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Records one figure line for `scripts/reliability.sh`'s table: appends `row<TAB>what<TAB>figures`
/// to the file `$CORTEX_RELIABILITY_REPORT` names (nothing when it is unset), and prints it.
/// Call it after the test's assertions, so only a run that held reports figures; the script
/// marks a row failed from the test's exit status, not from this line.
pub fn report(row: &str, what: &str, figures: &str) {
    eprintln!("[{row}] {what}: {figures}");
    let Ok(path) = std::env::var("CORTEX_RELIABILITY_REPORT") else { return };
    let line = format!("{row}\t{what}\t{}\n", figures.replace(['\t', '\n'], " "));
    let mut f = fs::OpenOptions::new().create(true).append(true).open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    std::io::Write::write_all(&mut f, line.as_bytes()).unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// A size from the environment (`name`), or `default`: the reliability suite's short setting is
/// the default, the full one is set by hand (scripts/reliability.sh, CORTEX_RELIABILITY=full).
pub fn env_size(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}

/// Keeps a JSON answer a test got (a plan, a row) in `$CORTEX_ANSWERS_DIR/e2e/`, named by the
/// schema that describes it (`recovery_plan`, `session_recovery`, ...): scripts/test.sh checks
/// every kept answer against `schemas/` afterwards. Nothing when the variable is unset.
pub fn keep_answer(kind: &str, json: &str) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Ok(dir) = std::env::var("CORTEX_ANSWERS_DIR") else { return };
    let dir = Path::new(&dir).join("e2e");
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    fs::write(dir.join(format!("{kind}-{}-{n}.json", std::process::id())), json)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}
