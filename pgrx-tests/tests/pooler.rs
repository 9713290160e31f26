//! Job tokens behind a transaction pooler (docs/agent.md, First: present the job token;
//! docs/operations.md, Per-job authority), through Debian's PgBouncer in transaction mode with
//! `default_pool_size = 1`, so that every client gets the same server connection:
//!
//! - a token presented per transaction (`set_config(…, true)` inside `BEGIN … COMMIT`) works;
//! - after that transaction, the next client on the same server connection can neither act with
//!   the token nor read it (`SHOW`, `current_setting`);
//! - a session-wide token (`set_config(…, false)`), which the docs forbid behind such a pooler,
//!   does stay on the server connection for the next client: the reason for the rule. With
//!   `server_reset_query_always = 1` (the docs' second line of defence) it does not.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-00000000c001";
const AGENT: &str = "0193a8b2-7c41-7d2e-9f00-0000000000c1";

/// A PgBouncer in front of `c`, listening on a socket in its own directory; stopped when dropped.
struct Bouncer {
    dir: PathBuf,
    port: u16,
}

impl Bouncer {
    fn start(c: &Cluster, name: &str, extra: &str) -> Bouncer {
        let dir = c.base.join(name);
        std::fs::create_dir_all(&dir).expect("bouncer dir");
        let port = c.port + 1000;
        std::fs::write(dir.join("userlist.txt"), "\"t_agent\" \"\"\n\"postgres\" \"\"\n").expect("userlist");
        let ini = format!(
            "[databases]\npostgres = host={sock} port={pgport} dbname=postgres\n\n[pgbouncer]\nlisten_addr =\n\
             unix_socket_dir = {dir}\nlisten_port = {port}\nauth_type = trust\nauth_file = {dir}/userlist.txt\n\
             pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 20\nlogfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n{extra}\n",
            sock = c.socket_dir.display(),
            pgport = c.port,
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).expect("ini");
        Command::new("chown").args(["-R", "postgres"]).arg(&dir).status().expect("chown");
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--", "pgbouncer", "-d"])
            .arg(dir.join("pgbouncer.ini"))
            .output()
            .expect("pgbouncer (scripts/lib.sh installs Debian's package)");
        assert!(out.status.success(), "pgbouncer: {}", String::from_utf8_lossy(&out.stderr));
        let b = Bouncer { dir, port };
        let socket = b.dir.join(format!(".s.PGSQL.{port}"));
        wait_for(Duration::from_secs(10), || socket.exists()).expect("pgbouncer listens");
        b
    }

    /// Runs `sql` (one simple query, any number of statements) as `t_agent` through the pooler:
    /// Ok(stdout) or Err((SQLSTATE, stderr)).
    fn run(&self, c: &Cluster, sql: &str) -> Result<String, (String, String)> {
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(c.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", "-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-d", "postgres", "-U", "t_agent", "-c", sql])
            .output()
            .expect("psql");
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned());
        }
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let state = err
            .lines()
            .find_map(|l| l.strip_prefix("ERROR:  ").and_then(|r| r.split_once(':')).map(|(s, _)| s.to_owned()))
            .unwrap_or_default();
        Err((state, err))
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pgbouncer.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// What the next client on the (one) server connection sees: (backend pid, the token as
/// `current_setting` reads it, as `SHOW` reads it, the SQLSTATE of a heartbeat of the job).
fn next_client(b: &Bouncer, c: &Cluster) -> (String, String, String, String) {
    let seen = b
        .run(
            c,
            "SELECT pg_backend_pid() || '|' || coalesce(current_setting('cortex_buffer.job_token', true), '<null>')",
        )
        .expect("the next client connects");
    let (pid, setting) = seen.split_once('|').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap_or_default();
    let shown = b.run(c, "SHOW cortex_buffer.job_token").unwrap_or_else(|e| e.1);
    let acted = match b.run(c, &format!("SELECT cortex_buffer.heartbeat('{JOB}')")) {
        Ok(_) => "00000".to_owned(),
        Err((state, _)) => state,
    };
    (pid, setting, shown, acted)
}

fn pid_of(out: &str) -> String {
    out.lines().last().unwrap_or_default().to_owned()
}

fn cluster() -> (Cluster, String) {
    let c = Cluster::new("pooler", &[]);
    c.start();
    c.create_extension();
    c.psql("CREATE ROLE t_agent LOGIN; GRANT cortex_buffer_agent TO t_agent");
    c.psql(&format!(
        "INSERT INTO cortex_buffer.job (id, agent_id, status, attempt, heartbeat_at, updated_at)
         VALUES ('{JOB}', '{AGENT}', 'RUNNING', 1, now(), now())"
    ));
    let token = c.psql(&format!("SELECT cortex_buffer.job_token('{JOB}')"));
    (c, token)
}

#[test]
fn a_token_presented_per_transaction_never_outlives_it_behind_pgbouncer() {
    let (c, token) = cluster();
    let b = Bouncer::start(&c, "bouncer", "");
    // The pod's transaction: the token for this transaction only.
    let pod = b
        .run(
            &c,
            &format!(
                "BEGIN; SELECT set_config('cortex_buffer.job_token', '{token}', true) IS NOT NULL;
                 SELECT cortex_buffer.heartbeat('{JOB}'); SELECT pg_backend_pid(); COMMIT;"
            ),
        )
        .expect("a token presented per transaction works through the pooler");
    assert!(pod.lines().any(|l| l == "t"), "the heartbeat was taken: {pod}");
    let (pid, setting, shown, acted) = next_client(&b, &c);
    assert_eq!(pid, pid_of(&pod), "the next client has the pod's server connection");
    assert_eq!(setting, "", "current_setting shows the next client nothing");
    assert!(!shown.contains(&token), "SHOW shows the next client nothing: {shown}");
    assert_eq!(acted, "42501", "the next client cannot act with the pod's token");

    // A session-wide token, which the docs forbid here, stays on the server connection.
    let pod = b
        .run(
            &c,
            &format!(
                "SELECT set_config('cortex_buffer.job_token', '{token}', false) IS NOT NULL; SELECT pg_backend_pid()"
            ),
        )
        .expect("a session-wide token");
    let (pid, setting, _, acted) = next_client(&b, &c);
    assert_eq!(pid, pid_of(&pod));
    assert_eq!((setting.as_str(), acted.as_str()), (token.as_str(), "00000"), "the documented hazard is real");
    drop(b);

    // With server_reset_query_always, even a session-wide token is gone after the transaction.
    let b = Bouncer::start(&c, "bouncer-reset", "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1");
    let pod = b
        .run(
            &c,
            &format!(
                "SELECT set_config('cortex_buffer.job_token', '{token}', false) IS NOT NULL; SELECT pg_backend_pid()"
            ),
        )
        .expect("a session-wide token");
    let (pid, setting, _, acted) = next_client(&b, &c);
    assert_eq!(pid, pid_of(&pod));
    assert_eq!((setting.as_str(), acted.as_str()), ("", "42501"), "server_reset_query_always clears the token");
    eprintln!(
        "pooler: a per-transaction token ends with its transaction; a session-wide one stays unless the pooler resets"
    );
}
