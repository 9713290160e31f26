//! The session-file catalogue's store: `cortex_buffer.session_file` read and written through
//! SPI for a pass (`indexing` wraps these in the `pass::Catalog` the watch crate drives). Each
//! call is one statement over arrays, never one per file.

use std::collections::BTreeMap;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::pg::spi_util::spi;
use crate::pg::time::{timestamptz, unix_us};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::indexer::index_plan::IndexState;
use cortex_buffer_core::indexer::reconcile::Known;
use cortex_buffer_core::int::{bits_i64, bits_u64};
use cortex_buffer_watch::pass::Row;
use cortex_buffer_watch::scan::FileStat;

const LOAD_SQL: &str = "
    SELECT path, size_bytes, mtime, device, inode, dialect, last_seen, gone_at IS NOT NULL AS gone,
           file_id, job_dir, indexed_offset, indexed_lines, generation, indexed_device, indexed_inode,
           indexed_mtime, fingerprint_len, fingerprint, indexed_dialect, tail_unterminated, tail_pending,
           quarantined_at IS NOT NULL AS quarantined
      FROM cortex_buffer.session_file
     WHERE pg_catalog.starts_with(path, $1)";

const UPSERT_SQL: &str = "
    INSERT INTO cortex_buffer.session_file AS f
           (path, job_dir, dialect, size_bytes, mtime, device, inode, session_ordinal, job_id)
    SELECT u.path, u.job_dir, u.dialect, u.size_bytes, u.mtime, u.device, u.inode, u.ordinal, u.job_id
      FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.int8[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]), pg_catalog.unnest($6::pg_catalog.int8[]), pg_catalog.unnest($7::pg_catalog.int8[]), pg_catalog.unnest($8::pg_catalog.int8[]), pg_catalog.unnest($9::pg_catalog.uuid[]))
           AS u(path, job_dir, dialect, size_bytes, mtime, device, inode, ordinal, job_id)
    ON CONFLICT (path) DO UPDATE
       SET -- A different file at the path ends its predecessor's quarantine.
           failures = CASE WHEN f.device OPERATOR(pg_catalog.<>) excluded.device
                             OR f.inode OPERATOR(pg_catalog.<>) excluded.inode THEN 0 ELSE f.failures END,
           quarantined_at = CASE WHEN f.device OPERATOR(pg_catalog.<>) excluded.device
                                   OR f.inode OPERATOR(pg_catalog.<>) excluded.inode
                                 THEN NULL ELSE f.quarantined_at END,
           job_dir = excluded.job_dir, session_ordinal = excluded.session_ordinal, job_id = excluded.job_id,
           dialect = excluded.dialect, size_bytes = excluded.size_bytes,
           mtime = excluded.mtime, device = excluded.device, inode = excluded.inode,
           last_seen = pg_catalog.now(), gone_at = NULL
    RETURNING path, file_id";

/// The advisory lock key of a path with no `session_file` row yet, an SQL expression over the
/// text column `$col`: every inserter of a tailed file's row (discovery) takes it, and so does a
/// cleanup before it deletes a file that has no row, so neither deletes or records a file the
/// other is recording.
#[macro_export]
macro_rules! new_path_lock_key {
    ($col:literal) => {
        concat!("pg_catalog.hashtextextended('cortex_buffer session_file ' OPERATOR(pg_catalog.||) ", $col, ", 0)")
    };
}

/// A row another transaction holds is left alone, never waited for: the files of `$1` this
/// transaction may write. An existing row is locked here (`SKIP LOCKED`, as the indexer claims
/// files); a path with no row yet takes a transaction-scoped advisory lock on its hash, which
/// every inserter takes, so two passes that discover one new file never queue on the unique
/// index (whose wait is as long as the other transaction: a pod's open transaction around
/// `recovery_plan`, say). What is held is looked at again shortly (`pass::busy`).
const WRITABLE_SQL: &str = concat!(
    "
    WITH held_here AS (
        SELECT f.path FROM cortex_buffer.session_file f
         WHERE f.path OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])
           FOR UPDATE OF f SKIP LOCKED)
    SELECT path FROM held_here
    UNION ALL
    SELECT u.path FROM pg_catalog.unnest($1::pg_catalog.text[]) AS u(path)
     -- CASE, not AND: the lock is taken only for a path with no row (AND may run it first).
     WHERE CASE WHEN EXISTS (SELECT FROM cortex_buffer.session_file f WHERE f.path OPERATOR(pg_catalog.=) u.path)
                THEN false
                ELSE pg_catalog.pg_try_advisory_xact_lock(",
    new_path_lock_key!("u.path"),
    ") END"
);

const GONE_SQL: &str = "
    UPDATE cortex_buffer.session_file SET gone_at = pg_catalog.now()
     WHERE path IN (SELECT f.path FROM cortex_buffer.session_file f
                     WHERE f.path OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]) AND f.gone_at IS NULL
                       FOR UPDATE OF f SKIP LOCKED)";

/// Reads every row under `root_prefix`.
pub fn load(root_prefix: &str) -> Result<BTreeMap<String, Known>, CbError> {
    Spi::connect(|client| {
        let table = client.select(LOAD_SQL, None, &[root_prefix.into()]).map_err(spi)?;
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

/// Upserts `rows` and marks `gone`, in the caller's transaction; returns upserted paths' ids.
/// Rows another transaction holds are neither upserted nor marked (see `WRITABLE_SQL`): their
/// paths are missing from the ids.
pub fn store(rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, CbError> {
    Spi::connect_mut(|client| {
        let mut ids = Vec::with_capacity(rows.len());
        let rows: Vec<&Row> = if rows.is_empty() {
            Vec::new()
        } else {
            let asked: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
            let mut writable = std::collections::HashSet::with_capacity(rows.len());
            for r in client.update(WRITABLE_SQL, None, &[asked.into()]).map_err(spi)? {
                if let Some(path) = r.get::<String>(1).map_err(spi)? {
                    writable.insert(path);
                }
            }
            rows.iter().filter(|r| writable.contains(&r.path)).collect()
        };
        if !rows.is_empty() {
            let paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
            let job_dirs: Vec<String> = rows.iter().map(|r| r.job_dir.clone()).collect();
            let dialects: Vec<Option<String>> = rows.iter().map(|r| r.dialect.map(|d| d.label().to_owned())).collect();
            let sizes: Vec<i64> = rows.iter().map(|r| i64::try_from(r.stat.size).unwrap_or(i64::MAX)).collect();
            let mtimes: Vec<Option<TimestampWithTimeZone>> =
                rows.iter().map(|r| timestamptz(Some(r.stat.mtime_us))).collect();
            let devices: Vec<i64> = rows.iter().map(|r| bits_i64(r.stat.device)).collect();
            let inodes: Vec<i64> = rows.iter().map(|r| bits_i64(r.stat.inode)).collect();
            let ordinals: Vec<Option<i64>> = rows.iter().map(|r| r.ordinal).collect();
            let jobs: Vec<Option<pgrx::Uuid>> = rows.iter().map(|r| r.job_id.map(pgrx::Uuid::from_bytes)).collect();
            let returned = client
                .update(
                    UPSERT_SQL,
                    None,
                    &[
                        paths.into(),
                        job_dirs.into(),
                        dialects.into(),
                        sizes.into(),
                        mtimes.into(),
                        devices.into(),
                        inodes.into(),
                        ordinals.into(),
                        jobs.into(),
                    ],
                )
                .map_err(spi)?;
            for r in returned {
                if let (Some(path), Some(id)) = (r.get::<String>(1).map_err(spi)?, r.get::<i64>(2).map_err(spi)?) {
                    ids.push((path, id));
                }
            }
        }
        if !gone.is_empty() {
            client.update(GONE_SQL, None, &[gone.to_vec().into()]).map_err(spi)?;
        }
        // The partitioned layout: the new files' partitions exist before their rows come.
        let file_ids: Vec<i64> = ids.iter().map(|(_, id)| *id).collect();
        crate::partition::ensure_for(&file_ids)?;
        Ok(ids)
    })
}
