//! The session-file catalogue's store: `cortex_buffer.session_file` read and written through
//! SPI for a pass (`indexing` wraps these in the `pass::Catalog` the watch crate drives). Each
//! call is one statement over arrays, never one per file.

use std::collections::{BTreeMap, HashMap};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::pg::spi_util::{prepared_read, spi};

const TEXT: pgrx::PgOid = pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TEXTOID);
use crate::pg::time::{timestamptz, unix_us};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::indexer::index_plan::IndexState;
use cortex_buffer_core::indexer::reconcile::Known;
use cortex_buffer_core::int::{bits_i64, bits_u64};
use cortex_buffer_watch::pass::{new_path_path_key, NewPathLocks, Row, Stored};
use cortex_buffer_watch::scan::FileStat;

macro_rules! load_columns {
    () => {
        "SELECT path, size_bytes, mtime, device, inode, dialect, last_seen, gone_at IS NOT NULL AS gone,
                file_id, job_dir, indexed_offset, indexed_lines, generation, indexed_device, indexed_inode,
                indexed_mtime, fingerprint_len, fingerprint, indexed_dialect, tail_unterminated, tail_pending,
                quarantined_at IS NOT NULL AS quarantined
           FROM cortex_buffer.session_file"
    };
}

/// Every row under a prefix: a pass over the whole volume reads them all anyway.
const LOAD_SQL: &str = concat!(load_columns!(), " WHERE pg_catalog.starts_with(path, $1)");

/// One job directory's rows (a job's catch-up, at call time): through `session_file_job_dir_idx`,
/// so its cost follows the job's files, not the catalogue (`starts_with` cannot use the path's
/// btree outside the C collation). The prefix still filters: pushed files share the job_dir.
pub(crate) const LOAD_JOB_SQL: &str =
    concat!(load_columns!(), " WHERE job_dir OPERATOR(pg_catalog.=) $2 AND pg_catalog.starts_with(path, $1)");

/// The columns discovery writes, from nine parallel arrays (`u`).
macro_rules! discovered_rows {
    () => {
        "ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.int8[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]), pg_catalog.unnest($6::pg_catalog.int8[]), pg_catalog.unnest($7::pg_catalog.int8[]), pg_catalog.unnest($8::pg_catalog.int8[]), pg_catalog.unnest($9::pg_catalog.uuid[]))
           AS u(path, job_dir, dialect, size_bytes, mtime, device, inode, ordinal, job_id)"
    };
}

/// Rows this transaction holds (locked by `WRITABLE_SQL`): updated in place.
const UPDATE_SQL: &str = concat!(
    "
    UPDATE cortex_buffer.session_file AS f
       SET -- A different file at the path ends its predecessor's quarantine.
           failures = CASE WHEN f.device OPERATOR(pg_catalog.<>) u.device
                             OR f.inode OPERATOR(pg_catalog.<>) u.inode THEN 0 ELSE f.failures END,
           quarantined_at = CASE WHEN f.device OPERATOR(pg_catalog.<>) u.device
                                   OR f.inode OPERATOR(pg_catalog.<>) u.inode
                                 THEN NULL ELSE f.quarantined_at END,
           job_dir = u.job_dir, session_ordinal = u.ordinal, job_id = u.job_id,
           dialect = u.dialect, size_bytes = u.size_bytes,
           mtime = u.mtime, device = u.device, inode = u.inode,
           last_seen = pg_catalog.now(), gone_at = NULL
      FROM ",
    discovered_rows!(),
    "
     WHERE f.path OPERATOR(pg_catalog.=) u.path
    RETURNING f.path, f.file_id"
);

/// Paths with no row whose new-path lock this transaction holds: inserted. A row another
/// transaction committed since `WRITABLE_SQL` looked is left to it (`DO NOTHING`, which never
/// waits for a committed row): the path is busy this time.
const INSERT_SQL: &str = concat!(
    "
    INSERT INTO cortex_buffer.session_file
           (path, job_dir, dialect, size_bytes, mtime, device, inode, session_ordinal, job_id)
    SELECT u.path, u.job_dir, u.dialect, u.size_bytes, u.mtime, u.device, u.inode, u.ordinal, u.job_id
      FROM ",
    discovered_rows!(),
    "
    ON CONFLICT (path) DO NOTHING
    RETURNING path, file_id"
);

/// The new-path lock guards the recording of a path with no `session_file` row yet: every
/// inserter of a tailed file's row takes it (discovery; `moved_root` for a path it renames a row
/// to), and so does a cleanup before it deletes a file that has no row, so neither deletes or
/// records a file the other is recording. It is tried, never waited for: a path whose lock
/// another transaction holds is busy, looked at again on the next pass. Two levels
/// (`pass::NewPathLocks`): the paths share 128 keys (`pass::new_path_key`, split between the
/// indexer processes, which so never meet), each path also has one of its own
/// (`pass::new_path_path_key`). While a transaction has taken at most
/// `pass::OWN_NEW_PATH_LOCKS_UP_TO` locks of paths' own, a statement of it takes each path's
/// key shared and its own lock exclusive, so such recorders (a catch-up in a pod's open
/// transaction, a pass over what changed) make each other's files busy only on the same path;
/// past that, a statement takes the keys exclusive, so a transaction holds at most 64 + 128
/// locks however many files it records (100 000 locks would not fit in the shared lock table).
///
/// The SQL condition that takes the new-path lock of one path whose keys are in the columns
/// `key` ([`new_path_key`]) and `own` (`pass::new_path_path_key`), as `locks` says
/// (`pass::NewPathLocks`): true when taken. `shared`: a dry run's, which conflicts with every
/// recorder of the path; with locks of paths' own it lets another dry run take them too, but
/// on the shared keys alone it takes them exclusively, as the real run does: in share mode they
/// would not conflict with a small recorder's (which holds its key in share mode). Every
/// recorder of a path (the pass, `moved_root`) and the cleanup, before it deletes a file
/// without a row, take it.
pub fn new_path_lock_sql(locks: NewPathLocks, shared: bool, key: &str, own: &str) -> String {
    let take =
        if shared { "pg_catalog.pg_try_advisory_xact_lock_shared" } else { "pg_catalog.pg_try_advisory_xact_lock" };
    let on_key = |f: &str| format!("{f}(pg_catalog.hashtext('cortex_buffer session_file'), {key})");
    match locks {
        // CASE, not AND: the path's own lock only once its key's is held.
        NewPathLocks::Own => format!(
            "CASE WHEN {} THEN {take}(pg_catalog.hashtext('cortex_buffer session_file path'), {own}) ELSE false END",
            on_key("pg_catalog.pg_try_advisory_xact_lock_shared")
        ),
        NewPathLocks::SharedKeys => on_key("pg_catalog.pg_try_advisory_xact_lock"),
        NewPathLocks::Deferred => "false".to_owned(),
    }
}

thread_local! {
    /// The transaction (`xact::local_xid`) whose locks of paths' own are counted, and how many
    /// of them its statements took.
    static OWN_LOCKS: std::cell::Cell<(u32, usize)> = const { std::cell::Cell::new((0, 0)) };
    /// Set while a lookup's catch-up records paths (`as_catch_up`).
    static CATCH_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` as a lookup's catch-up, in the caller's transaction, which may stay open as long as
/// the caller likes: its statements record new paths only with locks of their own paths
/// (`NewPathLocks::Own`), never the keys other jobs' paths share, and past the transaction's
/// share of those (`pass::OWN_NEW_PATH_LOCKS_UP_TO`) record none (`NewPathLocks::Deferred`),
/// leaving them to the worker.
pub fn as_catch_up<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CATCH_UP.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CATCH_UP.with(|c| c.replace(true)));
    f()
}

/// How a statement of the current transaction that records (or, in a cleanup, deletes) `paths`
/// paths without a row takes their new-path locks (`pass::NewPathLocks::for_paths`): each its
/// own while the transaction stays within `pass::OWN_NEW_PATH_LOCKS_UP_TO` of them, so that a
/// transaction of many small recordings (a pod's lookups) holds a bounded number of locks; past
/// them a lookup's catch-up (`as_catch_up`) records none.
pub fn new_path_locks_for(paths: usize) -> NewPathLocks {
    let lxid = crate::pg::xact::local_xid();
    OWN_LOCKS.with(|c| {
        let (of, taken) = c.get();
        let taken = if of == lxid { taken } else { 0 };
        let locks = match NewPathLocks::for_paths(taken, paths) {
            NewPathLocks::SharedKeys if CATCH_UP.with(std::cell::Cell::get) => NewPathLocks::Deferred,
            locks => locks,
        };
        let taken = if locks == NewPathLocks::Own { taken.saturating_add(paths) } else { taken };
        c.set((lxid, taken));
        locks
    })
}

/// How many more locks of paths' own the current transaction may take.
fn own_locks_left() -> usize {
    let lxid = crate::pg::xact::local_xid();
    let taken = OWN_LOCKS.with(|c| match c.get() {
        (of, taken) if of == lxid => taken,
        _ => 0,
    });
    cortex_buffer_watch::pass::OWN_NEW_PATH_LOCKS_UP_TO.saturating_sub(taken)
}

/// The key of `path`'s new-path lock ([`new_path_lock_sql`]), `job_dir` its first-level
/// directory: the same in every process of this server.
pub fn new_path_key(job_dir: &str, path: &str) -> i32 {
    cortex_buffer_watch::pass::new_path_key(job_dir, path, crate::pg::guc::workers())
}

/// A row another transaction holds is left alone, never waited for: the files of `$1` this
/// transaction may write, and how (`held`: an existing row, now locked here, `SKIP LOCKED` as the
/// indexer claims files; `new`: no row, and the new-path lock taken). Two passes that discover
/// one new file never queue on the unique index, whose wait is as long as the other transaction
/// (a pod's open transaction around `recovery_plan`, say). What is held elsewhere is looked at
/// again shortly (`pass::busy`).
fn writable_sql(locks: NewPathLocks) -> String {
    format!(
        "
    WITH held_here AS (
        SELECT f.path FROM cortex_buffer.session_file f
         WHERE f.path OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])
           FOR UPDATE OF f SKIP LOCKED)
    SELECT path, true FROM held_here
    UNION ALL
    SELECT u.path, false
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.int4[]),
                      pg_catalog.unnest($3::pg_catalog.int4[])) AS u(path, key, own)
     -- CASE, not AND: the lock is taken only for a path with no row (AND may run it first).
     WHERE CASE WHEN EXISTS (SELECT FROM cortex_buffer.session_file f WHERE f.path OPERATOR(pg_catalog.=) u.path)
                THEN false
                ELSE {} END",
        new_path_lock_sql(locks, false, "u.key", "u.own")
    )
}

/// Runs [`writable_sql`] for `rows` with `locks`, adding what it allows to `writable` (the path,
/// and whether it has a row, now locked here).
fn take_writable(
    client: &mut pgrx::spi::SpiClient<'_>,
    rows: &[&Row],
    locks: NewPathLocks,
    writable: &mut HashMap<String, bool>,
) -> Result<(), CbError> {
    let asked: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
    let keys: Vec<i32> = rows.iter().map(|r| new_path_key(&r.job_dir, &r.path)).collect();
    let own: Vec<i32> = rows.iter().map(|r| new_path_path_key(&r.path)).collect();
    for r in client.update(&writable_sql(locks), None, &[asked.into(), keys.into(), own.into()]).map_err(spi)? {
        if let (Some(path), Some(held)) = (r.get::<String>(1).map_err(spi)?, r.get::<bool>(2).map_err(spi)?) {
            writable.insert(path, held);
        }
    }
    Ok(())
}

/// Marks gone the rows of `$1` no other transaction holds; returns those it marked.
const GONE_SQL: &str = "
    UPDATE cortex_buffer.session_file SET gone_at = pg_catalog.now()
     WHERE path IN (SELECT f.path FROM cortex_buffer.session_file f
                     WHERE f.path OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]) AND f.gone_at IS NULL
                       FOR UPDATE OF f SKIP LOCKED)
    RETURNING path";

/// Reads every row under `root_prefix` (only `job_dir`'s, when given: see [`LOAD_JOB_SQL`]).
pub fn load(root_prefix: &str, job_dir: Option<&str>) -> Result<BTreeMap<String, Known>, CbError> {
    Spi::connect(|client| {
        // A job's load runs on every lookup's catch-up: prepared once per session, not planned
        // per call.
        let table = match job_dir {
            Some(dir) => {
                let stmt = prepared_read(client, "catalog.load_job", || LOAD_JOB_SQL.to_owned(), &[TEXT, TEXT])?;
                client.select(&*stmt, None, &[root_prefix.into(), dir.into()])
            }
            None => client.select(LOAD_SQL, None, &[root_prefix.into()]),
        }
        .map_err(spi)?;
        let mut known = BTreeMap::new();
        for row in table {
            let r = |name: &str| -> Result<Option<i64>, CbError> { row.get_by_name::<i64, _>(name).map_err(spi) };
            let flag = |name: &str| -> Result<bool, CbError> {
                Ok(row.get_by_name::<bool, _>(name).map_err(spi)?.unwrap_or(false))
            };
            let time = |name: &str| -> Result<Option<i64>, CbError> {
                Ok(unix_us(row.get_by_name::<TimestampWithTimeZone, _>(name).map_err(spi)?))
            };
            let text =
                |name: &str| -> Result<Option<String>, CbError> { row.get_by_name::<String, _>(name).map_err(spi) };
            let Some(path) = text("path")? else { continue };
            let count = |name: &str| -> Result<u64, CbError> { Ok(u64::try_from(r(name)?.unwrap_or(0)).unwrap_or(0)) };
            let stat = FileStat {
                size: count("size_bytes")?,
                mtime_us: time("mtime")?.unwrap_or(0),
                device: bits_u64(r("device")?.unwrap_or(0)),
                inode: bits_u64(r("inode")?.unwrap_or(0)),
            };
            let index = IndexState {
                offset: count("indexed_offset")?,
                lines: count("indexed_lines")?,
                generation: row.get_by_name::<i32, _>("generation").map_err(spi)?.unwrap_or(0),
                device: bits_u64(r("indexed_device")?.unwrap_or(0)),
                inode: bits_u64(r("indexed_inode")?.unwrap_or(0)),
                mtime_us: time("indexed_mtime")?.unwrap_or(0),
                fingerprint_len: u64::try_from(row.get_by_name::<i32, _>("fingerprint_len").map_err(spi)?.unwrap_or(0))
                    .unwrap_or(0),
                fingerprint: u32::try_from(r("fingerprint")?.unwrap_or(0)).unwrap_or(0),
                dialect: text("indexed_dialect")?.as_deref().and_then(Dialect::from_label),
                tail_unterminated: flag("tail_unterminated")?,
                tail_pending: flag("tail_pending")?,
                quarantined: flag("quarantined")?,
            };
            known.insert(
                path,
                Known {
                    file_id: r("file_id")?.unwrap_or(0),
                    job_dir: text("job_dir")?.unwrap_or_default(),
                    stat,
                    dialect: text("dialect")?.as_deref().and_then(Dialect::from_label),
                    last_seen_us: time("last_seen")?.unwrap_or(0),
                    gone: flag("gone")?,
                    index,
                },
            );
        }
        Ok(known)
    })
}

/// Records `rows` and marks `gone`, in the caller's transaction. Rows and paths another
/// transaction holds are neither recorded nor marked (see `WRITABLE_SQL`, `GONE_SQL`): they are
/// missing from what this returns, and the pass counts them busy.
pub fn store(rows: &[Row], gone: &[String]) -> Result<Stored, CbError> {
    Spi::connect_mut(|client| {
        let mut stored = Stored { ids: Vec::with_capacity(rows.len()), gone: Vec::new() };
        if !rows.is_empty() {
            let mut writable: HashMap<String, bool> = HashMap::with_capacity(rows.len());
            let all: Vec<&Row> = rows.iter().collect();
            let locks = new_path_locks_for(rows.len());
            if locks == NewPathLocks::Deferred {
                // A catch-up past its share: what the share still covers with locks of the paths'
                // own, the rest's existing rows only (their new paths are the worker's).
                let (first, rest) = all.split_at(own_locks_left().min(all.len()));
                if !first.is_empty() {
                    take_writable(client, first, new_path_locks_for(first.len()), &mut writable)?;
                }
                if !rest.is_empty() {
                    take_writable(client, rest, NewPathLocks::Deferred, &mut writable)?;
                }
            } else {
                take_writable(client, &all, locks, &mut writable)?;
            }
            // A key held in share mode elsewhere (a small recorder's open transaction: a pod's
            // catch-up) fails the exclusive take of a big statement for every path on it; those
            // paths try again with locks of their own, as far as the transaction's share of them
            // goes, so that such a transaction delays no other job's new files.
            if locks == NewPathLocks::SharedKeys {
                let left = own_locks_left();
                let busy: Vec<&Row> = rows.iter().filter(|r| !writable.contains_key(&r.path)).take(left).collect();
                if !busy.is_empty() {
                    take_writable(client, &busy, new_path_locks_for(busy.len()), &mut writable)?;
                }
            }
            let held: Vec<&Row> = rows.iter().filter(|r| writable.get(&r.path) == Some(&true)).collect();
            let new: Vec<&Row> = rows.iter().filter(|r| writable.get(&r.path) == Some(&false)).collect();
            for (sql, subset) in [(UPDATE_SQL, held), (INSERT_SQL, new)] {
                if subset.is_empty() {
                    continue;
                }
                for r in client.update(sql, None, &discovered_args(&subset)).map_err(spi)? {
                    if let (Some(path), Some(id)) = (r.get::<String>(1).map_err(spi)?, r.get::<i64>(2).map_err(spi)?) {
                        stored.ids.push((path, id));
                    }
                }
            }
        }
        if !gone.is_empty() {
            for r in client.update(GONE_SQL, None, &[gone.to_vec().into()]).map_err(spi)? {
                if let Some(path) = r.get::<String>(1).map_err(spi)? {
                    stored.gone.push(path);
                }
            }
        }
        // The partitioned layout: the new files' partitions exist before their rows come.
        let file_ids: Vec<i64> = stored.ids.iter().map(|(_, id)| *id).collect();
        crate::partition::ensure_for(&file_ids)?;
        Ok(stored)
    })
}

/// The nine arrays of `discovered_rows!`, for `rows`.
fn discovered_args(rows: &[&Row]) -> Vec<pgrx::datum::DatumWithOid<'static>> {
    let paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
    let job_dirs: Vec<String> = rows.iter().map(|r| r.job_dir.clone()).collect();
    let dialects: Vec<Option<String>> = rows.iter().map(|r| r.dialect.map(|d| d.label().to_owned())).collect();
    let sizes: Vec<i64> = rows.iter().map(|r| i64::try_from(r.stat.size).unwrap_or(i64::MAX)).collect();
    let mtimes: Vec<Option<TimestampWithTimeZone>> = rows.iter().map(|r| timestamptz(Some(r.stat.mtime_us))).collect();
    let devices: Vec<i64> = rows.iter().map(|r| bits_i64(r.stat.device)).collect();
    let inodes: Vec<i64> = rows.iter().map(|r| bits_i64(r.stat.inode)).collect();
    let ordinals: Vec<Option<i64>> = rows.iter().map(|r| r.ordinal).collect();
    let jobs: Vec<Option<pgrx::Uuid>> = rows.iter().map(|r| r.job_id.map(pgrx::Uuid::from_bytes)).collect();
    vec![
        paths.into(),
        job_dirs.into(),
        dialects.into(),
        sizes.into(),
        mtimes.into(),
        devices.into(),
        inodes.into(),
        ordinals.into(),
        jobs.into(),
    ]
}
