//! `cortex_buffer.session_file` through SPI: the [`Catalog`] both the worker and
//! `index_sessions()` use. Each call is one statement over arrays, never one per file.

use std::collections::HashMap;

use pgrx::prelude::*;

use super::dialect::Dialect;
use super::index_plan::IndexState;
use super::pass::{Catalog, Row};
use super::reconcile::Known;
use super::scan::FileStat;
use crate::error::CbError;
use crate::pg::spi_util::spi;

const LOAD_SQL: &str = "
    SELECT path, size_bytes,
           (extract(epoch FROM mtime) * 1000000)::int8,
           device, inode, dialect,
           (extract(epoch FROM last_seen) * 1000000)::int8,
           gone_at IS NOT NULL,
           file_id, job_dir,
           indexed_offset, indexed_lines, generation, indexed_device, indexed_inode,
           (extract(epoch FROM indexed_mtime) * 1000000)::int8, fingerprint_len, fingerprint,
           indexed_dialect, tail_unterminated, tail_pending, quarantined_at IS NOT NULL
      FROM cortex_buffer.session_file
     WHERE starts_with(path, $1)";

const UPSERT_SQL: &str = "
    INSERT INTO cortex_buffer.session_file AS f
           (path, job_dir, dialect, size_bytes, mtime, device, inode, session_ordinal, job_id)
    SELECT u.path, u.job_dir, u.dialect, u.size_bytes,
           timestamptz 'epoch' + u.mtime_us * interval '1 microsecond', u.device, u.inode, u.ordinal, u.job_id
      FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::uuid[])
           AS u(path, job_dir, dialect, size_bytes, mtime_us, device, inode, ordinal, job_id)
    ON CONFLICT (path) DO UPDATE
       SET -- A different file at the path ends its predecessor's quarantine.
           failures = CASE WHEN (f.device, f.inode) IS DISTINCT FROM (excluded.device, excluded.inode) THEN 0 ELSE f.failures END,
           quarantined_at = CASE WHEN (f.device, f.inode) IS DISTINCT FROM (excluded.device, excluded.inode)
                                 THEN NULL ELSE f.quarantined_at END,
           job_dir = excluded.job_dir, session_ordinal = excluded.session_ordinal, job_id = excluded.job_id, dialect = excluded.dialect, size_bytes = excluded.size_bytes,
           mtime = excluded.mtime, device = excluded.device, inode = excluded.inode,
           last_seen = now(), gone_at = NULL
    RETURNING path, file_id";

const GONE_SQL: &str = "
    UPDATE cortex_buffer.session_file SET gone_at = now()
     WHERE path = ANY($1::text[]) AND gone_at IS NULL";

/// Device and inode numbers are unsigned 64-bit; `bigint` stores their bit pattern.
pub fn to_i64(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

pub fn from_i64(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
}

/// Reads every row under `root_prefix`.
pub fn load(root_prefix: &str) -> Result<HashMap<String, Known>, CbError> {
    Spi::connect(|client| {
        let table = client.select(LOAD_SQL, None, &[root_prefix.into()]).map_err(spi)?;
        let mut known = HashMap::with_capacity(table.len());
        for row in table {
            let path: Option<String> = row.get(1).map_err(spi)?;
            let Some(path) = path else { continue };
            let dialect: Option<String> = row.get(6).map_err(spi)?;
            let stat = FileStat {
                size: u64::try_from(row.get::<i64>(2).map_err(spi)?.unwrap_or(0)).unwrap_or(0),
                mtime_us: row.get::<i64>(3).map_err(spi)?.unwrap_or(0),
                device: from_i64(row.get::<i64>(4).map_err(spi)?.unwrap_or(0)),
                inode: from_i64(row.get::<i64>(5).map_err(spi)?.unwrap_or(0)),
            };
            let n = |i: usize| -> Result<i64, CbError> { Ok(row.get::<i64>(i).map_err(spi)?.unwrap_or(0)) };
            let index = IndexState {
                offset: u64::try_from(n(11)?).unwrap_or(0),
                lines: u64::try_from(n(12)?).unwrap_or(0),
                generation: row.get::<i32>(13).map_err(spi)?.unwrap_or(0),
                device: from_i64(n(14)?),
                inode: from_i64(n(15)?),
                mtime_us: n(16)?,
                fingerprint_len: u64::try_from(row.get::<i32>(17).map_err(spi)?.unwrap_or(0)).unwrap_or(0),
                fingerprint: u32::try_from(n(18)?).unwrap_or(0),
                dialect: row.get::<String>(19).map_err(spi)?.as_deref().and_then(Dialect::from_label),
                tail_unterminated: row.get::<bool>(20).map_err(spi)?.unwrap_or(false),
                tail_pending: row.get::<bool>(21).map_err(spi)?.unwrap_or(false),
                quarantined: row.get::<bool>(22).map_err(spi)?.unwrap_or(false),
            };
            known.insert(
                path,
                Known {
                    file_id: n(9)?,
                    job_dir: row.get::<String>(10).map_err(spi)?.unwrap_or_default(),
                    stat,
                    dialect: dialect.as_deref().and_then(Dialect::from_label),
                    last_seen_us: n(7)?,
                    gone: row.get::<bool>(8).map_err(spi)?.unwrap_or(false),
                    index,
                },
            );
        }
        Ok(known)
    })
}

/// Upserts `rows` and marks `gone`, in the caller's transaction; returns upserted paths' ids.
pub fn store(rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, CbError> {
    Spi::connect_mut(|client| {
        let mut ids = Vec::with_capacity(rows.len());
        if !rows.is_empty() {
            let paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
            let job_dirs: Vec<String> = rows.iter().map(|r| r.job_dir.clone()).collect();
            let dialects: Vec<Option<String>> = rows.iter().map(|r| r.dialect.map(|d| d.label().to_owned())).collect();
            let sizes: Vec<i64> = rows.iter().map(|r| i64::try_from(r.stat.size).unwrap_or(i64::MAX)).collect();
            let mtimes: Vec<i64> = rows.iter().map(|r| r.stat.mtime_us).collect();
            let devices: Vec<i64> = rows.iter().map(|r| to_i64(r.stat.device)).collect();
            let inodes: Vec<i64> = rows.iter().map(|r| to_i64(r.stat.inode)).collect();
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
        Ok(ids)
    })
}

/// The catalogue in the caller's transaction (for `index_sessions()`).
pub struct InTransaction;

impl Catalog for InTransaction {
    type Error = CbError;
    fn load(&mut self, root_prefix: &str) -> Result<HashMap<String, Known>, CbError> {
        load(root_prefix)
    }
    fn store(&mut self, rows: &[Row], gone: &[String]) -> Result<Vec<(String, i64)>, CbError> {
        store(rows, gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip_through_bigint() {
        for v in [0u64, 1, 64769, u64::from(u32::MAX), 1 << 63, u64::MAX] {
            assert_eq!(from_i64(to_i64(v)), v);
        }
        assert_eq!(to_i64(u64::MAX), -1);
    }
}
