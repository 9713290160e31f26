//! The shipper's side of the SQL contract: where its source's files stand
//! (`pushed_offsets`), and pushes (`append_session_bytes`), many in one round trip.

use std::collections::HashMap;

use postgres::{Client, NoTls, Statement};

use crate::conninfo::{Conn, SslMode};
use crate::tls::{self, Tls};

/// What the server holds of one file, by (relpath, identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offset {
    pub committed: u64,
    pub held: u64,
    pub head_len: u64,
    pub head_crc: u32,
}

/// One push.
#[derive(Debug, Clone)]
pub struct Push {
    pub relpath: String,
    pub identity: String,
    pub start: u64,
    pub chunk: Vec<u8>,
    pub last: bool,
    pub file_size: u64,
}

/// The server's answer to a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub committed: u64,
    pub events: i64,
    pub corrupt: i64,
    pub action: String,
}

/// Why a push failed.
#[derive(Debug)]
pub enum Failure {
    /// The chunk starts after what the server has: send from `expected`.
    Gap { expected: u64 },
    /// The source is over its rate limit: try again in a moment.
    RateLimited,
    /// Refused for good (privileges, arguments): `message` says why.
    Refused { sqlstate: String, message: String, hint: Option<String> },
    /// The connection is gone or broken: reconnect and ask where files stand.
    Connection(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Gap { expected } => write!(f, "gap: the server expects offset {expected}"),
            Failure::RateLimited => write!(f, "over the source's rate limit"),
            Failure::Refused { sqlstate, message, hint } => {
                write!(f, "{message} (SQLSTATE {sqlstate})")?;
                if let Some(h) = hint {
                    write!(f, " HINT: {h}")?;
                }
                Ok(())
            }
            Failure::Connection(why) => write!(f, "connection: {why}"),
        }
    }
}

/// An error's text with its causes' (a TLS handshake's says why only in its source).
fn with_causes(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

fn classify(e: &postgres::Error) -> Failure {
    let Some(db) = e.as_db_error() else { return Failure::Connection(with_causes(e)) };
    let code = db.code().code().to_owned();
    if code == "55000" {
        if let Some(expected) =
            db.detail().and_then(|d| d.strip_prefix("expected offset: ")).and_then(|n| n.trim().parse::<u64>().ok())
        {
            return Failure::Gap { expected };
        }
    }
    if code == "53400" {
        return Failure::RateLimited;
    }
    // Class 08 (connection), 57P (shutdown, crash), 53 (resources): the server, not the push.
    if code.starts_with("08") || code.starts_with("57P") || code.starts_with("53") {
        return Failure::Connection(format!("{} (SQLSTATE {code})", db.message()));
    }
    Failure::Refused { sqlstate: code, message: db.message().to_owned(), hint: db.hint().map(str::to_owned) }
}

pub struct Db {
    client: Client,
    source: String,
    /// The source's token, presented with every call (never a session setting).
    token: String,
    /// The server has `append_session_batch` (0.12.0 on); an older one is sent
    /// `append_session_bytes` once per push, in one statement ([`PUSH_EACH_SQL`]).
    batch: bool,
    /// Each push statement, prepared once per connection. Prepared per call, it was planned per
    /// call, as a custom plan (PostgreSQL's choice for a statement's first five executions),
    /// which copies every parameter, each chunk of the batch, into the plan; kept, it gets a
    /// generic plan from its sixth execution on, which reads the chunks where they arrived.
    prepared: HashMap<&'static str, Statement>,
}

const PUSH_SQL: &str = "
    SELECT committed_offset, events_added, corrupt_added, action
      FROM cortex_buffer.append_session_batch($1, $2::pg_catalog.text[], $3::pg_catalog.int8[], $4::pg_catalog.bytea[],
                                              $5::pg_catalog.text[], $6::pg_catalog.bool[], $7::pg_catalog.int8[],
                                              source_token => $8)
     ORDER BY ord";

/// The same pushes for a server older than 0.12.0: `append_session_bytes` once per push.
const PUSH_EACH_SQL: &str = "
    SELECT r.committed_offset, r.events_added, r.corrupt_added, r.action
      FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.int8[]),
                      pg_catalog.unnest($4::pg_catalog.bytea[]), pg_catalog.unnest($5::pg_catalog.text[]),
                      pg_catalog.unnest($6::pg_catalog.bool[]), pg_catalog.unnest($7::pg_catalog.int8[]))
           WITH ORDINALITY AS a(relpath, start_offset, chunk, identity, last, size, i)
     CROSS JOIN LATERAL cortex_buffer.append_session_bytes($1, a.relpath, a.start_offset, a.chunk, a.identity,
                                                           a.last, a.size, source_token => $8) AS r
     ORDER BY a.i";

const CONFIRM_SQL: &str =
    "SELECT cortex_buffer.confirm_pushed($1, pg_catalog.make_interval(secs => $2::pg_catalog.float8), source_token => $3)";

impl Db {
    /// `batch`: send each batch with `append_session_batch` (else, or when the server has none,
    /// as one `append_session_bytes` call per file).
    pub fn connect(
        conn: &Conn,
        source: &str,
        token: &str,
        synchronous_commit: bool,
        batch: bool,
    ) -> Result<Db, Failure> {
        let mut config: postgres::Config =
            conn.dsn.parse().map_err(|e: postgres::Error| Failure::Connection(e.to_string()))?;
        config.application_name("cortex-buffer-ship");
        config.connect_timeout(std::time::Duration::from_secs(10));
        config.ssl_mode(match conn.ssl {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => postgres::config::SslMode::Require,
        });
        let mut client = match tls::connector(conn).map_err(Failure::Connection)? {
            Tls::Plain => config.connect(NoTls),
            Tls::Rustls(tls) => config.connect(*tls),
        }
        .map_err(|e| classify(&e))?;
        if !synchronous_commit {
            // Safe: a push a crash undoes leaves the server short of what the shipper sent, which
            // it learns at reconnect (pushed_offsets) or from the next push (a gap).
            client.batch_execute("SET synchronous_commit = off").map_err(|e| classify(&e))?;
        }
        Ok(Db { client, source: source.to_owned(), token: token.to_owned(), batch, prepared: HashMap::new() })
    }

    /// Where each file this source pushed stands, by (relpath, identity).
    pub fn offsets(&mut self) -> Result<HashMap<(String, String), Offset>, Failure> {
        let rows = self
            .client
            .query(
                "SELECT relpath, file_identity, committed_offset, held_bytes, head_len, head_crc
                   FROM cortex_buffer.pushed_offsets($1, source_token => $2)",
                &[&self.source, &self.token],
            )
            .map_err(|e| classify(&e))?;
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(rows
            .iter()
            .map(|r| {
                (
                    (r.get::<_, String>(0), r.get::<_, String>(1)),
                    Offset {
                        committed: count(r.get(2)),
                        held: count(r.get(3)),
                        head_len: count(r.get(4)),
                        head_crc: u32::try_from(r.get::<_, i64>(5)).unwrap_or(0),
                    },
                )
            })
            .collect())
    }

    /// Sends `pushes` in one statement (one transaction): all apply or none. At most one push per
    /// file per call.
    pub fn push(&mut self, pushes: &[Push]) -> Result<Vec<Reply>, Failure> {
        let rel: Vec<&str> = pushes.iter().map(|p| p.relpath.as_str()).collect();
        let start: Vec<i64> = pushes.iter().map(|p| i64::try_from(p.start).unwrap_or(i64::MAX)).collect();
        let chunk: Vec<&[u8]> = pushes.iter().map(|p| p.chunk.as_slice()).collect();
        let ident: Vec<&str> = pushes.iter().map(|p| p.identity.as_str()).collect();
        let last: Vec<bool> = pushes.iter().map(|p| p.last).collect();
        let size: Vec<i64> = pushes.iter().map(|p| i64::try_from(p.file_size).unwrap_or(i64::MAX)).collect();
        let (source, token) = (self.source.clone(), self.token.clone());
        let args: [&(dyn postgres::types::ToSql + Sync); 8] =
            [&source, &rel, &start, &chunk, &ident, &last, &size, &token];
        let rows = match self.run(if self.batch { PUSH_SQL } else { PUSH_EACH_SQL }, &args) {
            // 42883: no such function; the extension is older than the shipper.
            Err(e) if self.batch && e.code() == Some(&postgres::error::SqlState::UNDEFINED_FUNCTION) => {
                self.batch = false;
                crate::log::info(
                    "the server has no append_session_batch (cortex_buffer before 0.12.0): one call per push",
                    &[],
                );
                self.run(PUSH_EACH_SQL, &args)
            }
            done => done,
        }
        .map_err(|e| classify(&e))?;
        Ok(rows
            .iter()
            .map(|r| Reply {
                committed: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
                events: r.get(1),
                corrupt: r.get(2),
                action: r.get(3),
            })
            .collect())
    }

    /// Confirms that every file of the source was pushed whole `as_of` ago
    /// (`confirm_pushed`). `Ok(false)`: the server has no such function (cortex_buffer before
    /// 0.15.0), so recovery there never asks for one.
    pub fn confirm(&mut self, as_of: std::time::Duration) -> Result<bool, Failure> {
        let (source, token) = (self.source.clone(), self.token.clone());
        let secs = as_of.as_secs_f64();
        match self.run(CONFIRM_SQL, &[&source, &secs, &token]) {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_FUNCTION) => Ok(false),
            Err(e) => Err(classify(&e)),
        }
    }

    /// Runs `sql`, prepared on first use on this connection. A failed statement is prepared
    /// again next time: what it names may have changed (an extension updated, a function
    /// renamed).
    fn run(
        &mut self,
        sql: &'static str,
        args: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        let statement = match self.prepared.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = self.client.prepare(sql)?;
                self.prepared.insert(sql, s.clone());
                s
            }
        };
        let rows = self.client.query(&statement, args);
        if rows.is_err() {
            self.prepared.remove(sql);
        }
        rows
    }
}
