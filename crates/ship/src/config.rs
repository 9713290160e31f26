//! The shipper's settings: flags, each with an environment variable of the same meaning (a flag
//! wins), documented by `--help`.

use std::time::Duration;

use crate::conninfo::{self, Conn};

pub const HELP: &str = "\
cortex-buffer-ship: pushes the session files of a node's agents to cortex_buffer.

Tails a sessions directory (<dir>/<job_id>/<file>.jsonl, the indexer's own discovery rule) and
sends every new byte with cortex_buffer.append_session_bytes(), which applies it exactly once
with the tailer's rules. It keeps no local state: at start, and after any error, it asks the
database where each file stands (cortex_buffer.pushed_offsets). Kill it at any moment; start
it again; nothing is lost or indexed twice.

USAGE:
    cortex-buffer-ship --sessions-dir DIR --source NAME [OPTIONS]

OPTIONS (each also read from the environment variable named after it):
    --sessions-dir DIR     CB_SHIP_SESSIONS_DIR   the node's sessions directory (required)
    --source NAME          CB_SHIP_SOURCE         this shipper's source in cortex_buffer.push_source
                                                  (default: the host name)
    --source-token TOKEN   CB_SHIP_SOURCE_TOKEN   the source's token (required), which the control plane or
                                                  an operator gets with register_push_source() or
                                                  push_source_token(): it proves this shipper is the
                                                  source, whatever login it shares. Prefer the
                                                  environment variable: a flag shows in ps
    --dsn CONNINFO         CB_SHIP_DSN            libpq connection string (key=value or URI); without
                                                  it, PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE.
                                                  TLS as libpq: sslmode disable, allow, prefer (the
                                                  default), require, verify-ca or verify-full, with
                                                  sslrootcert=<PEM file> (or PGSSLMODE, PGSSLROOTCERT,
                                                  ~/.postgresql/root.crt). Across a network use
                                                  verify-full: require without a root certificate
                                                  encrypts but cannot tell the server from an impostor
    --chunk-bytes N        CB_SHIP_CHUNK_BYTES    the most bytes per push (default 1048576; at most the
                                                  4 MiB a server takes)
    --batch N              CB_SHIP_BATCH          the most pushes sent in one round trip (default 32, at
                                                  most 1000)
    --settle SECONDS       CB_SHIP_SETTLE         how long a file must be quiet before its unterminated
                                                  last line is sent as final (default 5)
    --watch MODE           CB_SHIP_WATCH          auto, notify or poll: learn of changes from the kernel
                                                  (inotify) or by polling; auto falls back to polling
                                                  when watches cannot be set (default auto)
    --poll-interval MS     CB_SHIP_POLL_INTERVAL  polling period, and the longest wait between looks in
                                                  notify mode (default 1000)
    --rescan-interval S    CB_SHIP_RESCAN         a walk of the whole directory this often in notify
                                                  mode, as a safety net (default 60)
    --confirm-every MS     CB_SHIP_CONFIRM_EVERY  while idle, confirm this often that every file was
                                                  pushed whole (cortex_buffer.confirm_pushed: one row
                                                  per source, whatever the number of files); a
                                                  recovery plan trusts a pushed file only after a
                                                  confirmation (default 1000; 0: never)
    --report-every S       CB_SHIP_REPORT_EVERY   a progress line this often (default 30)
    --once                 CB_SHIP_ONCE=1         push what is there now (as final where the file
                                                  has already settled) and exit 0
    --synchronous-commit B CB_SHIP_SYNC           on or off (default off): whether each push waits for
                                                  its WAL flush. Off is safe: rows and offsets commit
                                                  together, and a push a server crash undoes is found
                                                  missing at reconnect (pushed_offsets) and sent again
    --help                                        this text

FOR BENCHMARKS: CB_SHIP_REPEAT=N sends every batch N times (the repeats are replays, which the
server must recognise as such); CB_SHIP_PER_FILE=1 sends a batch as one append_session_bytes
call per file (as to a server older than 0.12.0) instead of one append_session_batch call.

LOGS: one JSON object per line on standard error: {\"ts\", \"level\", \"msg\", ...}.
EXIT: 0 on SIGTERM/SIGINT or after --once; 1 with --once when the server refuses the session
(pushed_offsets: privileges, an extension not updated); 2 on bad arguments.
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    Auto,
    Notify,
    Poll,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub sessions_dir: String,
    pub source: String,
    /// The source's token (`push_source_token`), passed with every call.
    pub source_token: String,
    /// Where and how to connect (the connection string, its TLS settings read apart).
    pub conn: Conn,
    pub chunk_bytes: usize,
    pub batch: usize,
    pub settle: Duration,
    pub watch: WatchMode,
    pub poll_interval: Duration,
    pub rescan_interval: Duration,
    pub report_every: Duration,
    /// While idle, `confirm_pushed` at most this often (`None`: never).
    pub confirm_every: Option<Duration>,
    pub once: bool,
    pub synchronous_commit: bool,
    /// Every batch is sent this many times (benchmarks of replays).
    pub repeat: usize,
    /// Every batch as one `append_session_bytes` call per file (benchmarks of the batch).
    pub per_file: bool,
}

/// What the command line asks for.
pub enum Parsed {
    Run(Box<Config>),
    Help,
}

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{name}: \"{value}\" is not a number"))
}

/// The most pushes the server takes in one `append_session_batch` call.
const MAX_BATCH: usize = 1000;

/// Parses `args` (without the program name), with `env` for what the flags leave out.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Parsed, String> {
    let mut flags: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    let mut once = env("CB_SHIP_ONCE").is_some_and(|v| v == "1" || v == "true");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.as_str();
        match name {
            "--help" | "-h" => return Ok(Parsed::Help),
            "--once" => once = true,
            "--sessions-dir"
            | "--source"
            | "--source-token"
            | "--dsn"
            | "--chunk-bytes"
            | "--batch"
            | "--settle"
            | "--watch"
            | "--poll-interval"
            | "--rescan-interval"
            | "--report-every"
            | "--confirm-every"
            | "--synchronous-commit" => {
                let v = it.next().ok_or_else(|| format!("{name} needs a value"))?;
                flags.insert(name, v.clone());
            }
            other => return Err(format!("unknown argument \"{other}\" (see --help)")),
        }
    }
    let get = |flag: &str, var: &str| flags.get(flag).cloned().or_else(|| env(var));
    let sessions_dir =
        get("--sessions-dir", "CB_SHIP_SESSIONS_DIR").ok_or("--sessions-dir (or CB_SHIP_SESSIONS_DIR) is required")?;
    let source = match get("--source", "CB_SHIP_SOURCE") {
        Some(s) => s,
        None => hostname().ok_or("--source is required (the host name could not be read)")?,
    };
    cortex_buffer_core::push::check_source(&source).map_err(|why| format!("--source: {why}"))?;
    let source_token = get("--source-token", "CB_SHIP_SOURCE_TOKEN").filter(|t| !t.is_empty()).ok_or(
        "--source-token (or CB_SHIP_SOURCE_TOKEN) is required: the source's token, from cortex_buffer.push_source_token(source)",
    )?;
    match cortex_buffer_core::push::source_token::named_source(&source_token) {
        Some(named) if named == source => {}
        Some(named) => return Err(format!("--source-token is source \"{named}\"'s, not \"{source}\"'s")),
        None => return Err("--source-token is not a source token (cbst1.<generation>.<mac>.<source>)".into()),
    }
    let dsn = get("--dsn", "CB_SHIP_DSN").unwrap_or_else(|| dsn_from_env(env));
    let conn = conninfo::parse(&dsn, env).map_err(|why| format!("--dsn: {why}"))?;
    // A verifying mode whose root certificates cannot be read is a bad argument, said at start.
    crate::tls::connector(&conn).map_err(|why| format!("--dsn: {why}"))?;
    let chunk_bytes = match get("--chunk-bytes", "CB_SHIP_CHUNK_BYTES") {
        Some(v) => number::<usize>("--chunk-bytes", &v)?,
        None => 1 << 20,
    };
    if chunk_bytes == 0 {
        return Err("--chunk-bytes must be at least 1".into());
    }
    let batch = match get("--batch", "CB_SHIP_BATCH") {
        Some(v) => number::<usize>("--batch", &v)?.max(1),
        None => 32,
    };
    if batch > MAX_BATCH {
        return Err(format!("--batch: at most {MAX_BATCH} pushes per call (append_session_batch's limit)"));
    }
    let settle = Duration::from_secs_f64(match get("--settle", "CB_SHIP_SETTLE") {
        Some(v) => number::<f64>("--settle", &v)?.max(0.0),
        None => 5.0,
    });
    let watch = match get("--watch", "CB_SHIP_WATCH").as_deref() {
        None | Some("auto") => WatchMode::Auto,
        Some("notify") => WatchMode::Notify,
        Some("poll") => WatchMode::Poll,
        Some(other) => return Err(format!("--watch: \"{other}\" is not auto, notify or poll")),
    };
    let poll_interval = Duration::from_millis(match get("--poll-interval", "CB_SHIP_POLL_INTERVAL") {
        Some(v) => number::<u64>("--poll-interval", &v)?.max(10),
        None => 1000,
    });
    let rescan_interval = Duration::from_secs(match get("--rescan-interval", "CB_SHIP_RESCAN") {
        Some(v) => number::<u64>("--rescan-interval", &v)?.max(1),
        None => 60,
    });
    let report_every = Duration::from_secs(match get("--report-every", "CB_SHIP_REPORT_EVERY") {
        Some(v) => number::<u64>("--report-every", &v)?.max(1),
        None => 30,
    });
    let confirm_every = match get("--confirm-every", "CB_SHIP_CONFIRM_EVERY") {
        Some(v) => Some(number::<u64>("--confirm-every", &v)?).filter(|ms| *ms > 0).map(Duration::from_millis),
        None => Some(Duration::from_secs(1)),
    };
    let synchronous_commit = match get("--synchronous-commit", "CB_SHIP_SYNC").as_deref() {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => return Err(format!("--synchronous-commit: \"{other}\" is not on or off")),
    };
    let repeat = match env("CB_SHIP_REPEAT") {
        Some(v) => number::<usize>("CB_SHIP_REPEAT", &v)?.clamp(1, 100),
        None => 1,
    };
    let per_file = env("CB_SHIP_PER_FILE").is_some_and(|v| v == "1");
    Ok(Parsed::Run(Box::new(Config {
        sessions_dir,
        source,
        source_token,
        conn,
        chunk_bytes,
        batch,
        settle,
        watch,
        poll_interval,
        rescan_interval,
        report_every,
        confirm_every,
        once,
        synchronous_commit,
        repeat,
        per_file,
    })))
}

/// A key=value connection string from libpq's environment variables.
fn dsn_from_env(env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut parts = Vec::new();
    for (var, key) in [
        ("PGHOST", "host"),
        ("PGPORT", "port"),
        ("PGUSER", "user"),
        ("PGPASSWORD", "password"),
        ("PGDATABASE", "dbname"),
    ] {
        if let Some(v) = env(var) {
            parts.push(format!("{key}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")));
        }
    }
    parts.join(" ")
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().to_owned();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn flags_win_over_the_environment_and_defaults_fill_the_rest() {
        let env = |k: &str| match k {
            "CB_SHIP_SESSIONS_DIR" => Some("/env/dir".to_owned()),
            "CB_SHIP_SOURCE" => Some("env-source".to_owned()),
            "PGHOST" => Some("/run/pg".to_owned()),
            "PGUSER" => Some("o'brien".to_owned()),
            "CB_SHIP_PER_FILE" => Some("1".to_owned()),
            "CB_SHIP_SOURCE_TOKEN" => Some("cbst1.1.00ff.node-1".to_owned()),
            _ => None,
        };
        let Ok(Parsed::Run(c)) = parse(&args(&["--source", "node-1", "--batch", "4", "--watch", "poll"]), &env) else {
            panic!("not parsed")
        };
        assert_eq!((c.sessions_dir.as_str(), c.source.as_str(), c.batch), ("/env/dir", "node-1", 4));
        assert_eq!(c.conn.dsn, "host='/run/pg' user='o\\'brien'");
        assert_eq!((c.chunk_bytes, c.watch, c.settle), (1 << 20, WatchMode::Poll, Duration::from_secs(5)));
        assert!(!c.once);
        assert!(c.per_file && c.repeat == 1, "the benchmarks' settings come from the environment only");
    }

    #[test]
    fn bad_arguments_are_refused_with_a_reason() {
        let none = |_: &str| None;
        let token = |k: &str| (k == "CB_SHIP_SOURCE_TOKEN").then(|| "cbst1.1.00ff.s".to_owned());
        for (a, why) in [
            (vec!["--source", "x"], "required"),
            (vec!["--sessions-dir", "/d", "--source", "bad name"], "--source"),
            (vec!["--sessions-dir", "/d", "--source", "s", "--chunk-bytes", "zero"], "not a number"),
            (vec!["--sessions-dir", "/d", "--source", "s", "--batch", "1001"], "at most 1000"),
            (vec!["--sessions-dir", "/d", "--source", "s", "--watch", "sometimes"], "auto, notify or poll"),
            (vec!["--bogus"], "unknown argument"),
            (vec!["--dsn"], "needs a value"),
        ] {
            let err = parse(&args(&a), &token).err().unwrap_or_default();
            assert!(err.contains(why), "{a:?}: {err}");
        }
        // The token: required, and the source's own.
        for (a, why) in [
            (vec!["--sessions-dir", "/d", "--source", "s"], "--source-token (or CB_SHIP_SOURCE_TOKEN) is required"),
            (vec!["--sessions-dir", "/d", "--source", "s", "--source-token", "cbst1.1.00ff.t"], "source \"t\"'s"),
            (vec!["--sessions-dir", "/d", "--source", "s", "--source-token", "cbjt1.x"], "not a source token"),
        ] {
            let err = parse(&args(&a), &none).err().unwrap_or_default();
            assert!(err.contains(why), "{a:?}: {err}");
        }
        assert!(matches!(parse(&args(&["--help"]), &none), Ok(Parsed::Help)));
    }
}
