//! Checkpoints' high-water marks: the job's session files (identity and size) at the instant a
//! checkpoint is stored, in `cortex_buffer.checkpoint_mark`. The shipped writer appends
//! synchronously, so every byte after those sizes was written after the checkpoint: recovery
//! places marker-less files without comparing the pod's clock with the server's.
//!
//! `write_checkpoint` records its own mark. A checkpoint the control plane writes itself (a
//! plain `UPDATE` of the job table's `checkpoint`) is marked by the `checkpoint_marked` trigger,
//! which `cortex_buffer.job` has and `install_checkpoint_trigger()` puts on a bound table. The
//! trigger stays quiet while `write_checkpoint` updates the row, so each write is marked once.

use std::cell::Cell;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::pg::guc;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::{prepared, prepared_read, spi};
use crate::pg::time::unix_us;
use cortex_buffer_core::checkpoint::identity::format_uuid;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::discovery::Layout;
use cortex_buffer_core::int::{bits_i64, bits_u64};
use cortex_buffer_core::json::writer::JsonWriter;
use cortex_buffer_core::recovery::choose::{Mark, MarkFile};
use cortex_buffer_core::recovery::keys::relative_to_job_dir;
use cortex_buffer_watch::scan::{resolve_root, scan_dir};

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BOOL: PgOid = PgOid::BuiltIn(PgBuiltInOids::BOOLOID);

thread_local! {
    /// Set while `write_checkpoint` updates the job row: it records the mark itself.
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (write_checkpoint's update of the job row) with the trigger quiet.
pub fn while_writing<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            WRITING.with(|w| w.set(self.0));
        }
    }
    let _reset = Reset(WRITING.with(|w| w.replace(true)));
    f()
}

/// Whether the trigger should record (false while `write_checkpoint` records itself).
pub fn trigger_records() -> bool {
    !WRITING.with(Cell::get)
}

/// The job's session files as the discovery rule sees them now (none when its directory does
/// not exist yet: every file it gets later is written after this checkpoint), or `None` when
/// `sessions_dir` cannot be read from here (the files live where the database cannot see them).
fn job_files(job: Uuid) -> Option<Vec<MarkFile>> {
    let volume = resolve_root(&guc::sessions_dir()).ok()?;
    let dir = format_uuid(job.as_bytes());
    let scan = scan_dir(&volume, &dir);
    if !scan.problems.is_empty() && scan.files.is_empty() {
        // The directory is there but could not be listed: nothing is known of its files.
        return None;
    }
    Some(
        scan.files
            .into_iter()
            .filter(|f| f.layout == Layout::DirectoryFile)
            .map(|f| MarkFile {
                rel_path: f.file_name,
                device: f.stat.device,
                inode: f.stat.inode,
                size: i64::try_from(f.stat.size).unwrap_or(i64::MAX),
                unseen: 0,
            })
            .collect(),
    )
}

/// The job's pushed files as the server holds them now: each at what the server has of it
/// (committed and held), with the bytes its shipper had reported beyond that (`unseen`), as the
/// definer role (pushed_file is the definer's alone).
fn pushed_files(job: Uuid) -> Result<Vec<MarkFile>, CbError> {
    as_definer(|| {
        Spi::connect(|client| {
            let stmt = prepared_read(client, "checkpoint.mark.pushed", || PUSHED_SQL.to_owned(), &[UUID])?;
            let rows = client.select(&*stmt, None, &[job.into()]).map_err(spi)?;
            let mut files = Vec::new();
            for r in rows {
                let path: String = r.get(1).map_err(spi)?.unwrap_or_default();
                let job_dir: String = r.get(2).map_err(spi)?.unwrap_or_default();
                files.push(MarkFile {
                    rel_path: relative_to_job_dir(&path, &job_dir).to_owned(),
                    device: bits_u64(r.get::<i64>(3).map_err(spi)?.unwrap_or(0)),
                    inode: bits_u64(r.get::<i64>(4).map_err(spi)?.unwrap_or(0)),
                    size: r.get::<i64>(5).map_err(spi)?.unwrap_or(0),
                    unseen: r.get::<i64>(6).map_err(spi)?.unwrap_or(0),
                });
            }
            Ok(files)
        })
    })
}

const PUSHED_SQL: &str = "
    SELECT f.path, f.job_dir, f.device, f.inode, f.indexed_offset OPERATOR(pg_catalog.+) p.held_len,
           GREATEST(coalesce(p.reported_size, 0) OPERATOR(pg_catalog.-) (f.indexed_offset OPERATOR(pg_catalog.+) p.held_len), 0)
      FROM cortex_buffer.pushed_file p JOIN cortex_buffer.session_file f ON f.file_id OPERATOR(pg_catalog.=) p.file_id
     WHERE p.job_id OPERATOR(pg_catalog.=) $1";

fn files_json(files: &[MarkFile]) -> String {
    let mut w = JsonWriter::new();
    w.begin_array();
    for f in files {
        w.begin_object();
        w.field_str("file", &f.rel_path);
        w.field_int("device", bits_i64(f.device));
        w.field_int("inode", bits_i64(f.inode));
        w.field_int("size", f.size);
        if f.unseen > 0 {
            w.field_int("unseen", f.unseen);
        }
        w.end_object();
    }
    w.end_array();
    w.finish()
}

const RECORD_SQL: &str = "WITH ins AS (
         INSERT INTO cortex_buffer.checkpoint_mark (job_id, crc, checkpoint_id, recorded_at, source, dir_visible, files)
         VALUES ($1, $2, $3, pg_catalog.clock_timestamp(), $4, $5, $6::pg_catalog.jsonb) RETURNING mark_id
     ), del AS (
         DELETE FROM cortex_buffer.checkpoint_mark
          WHERE mark_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                SELECT mark_id FROM cortex_buffer.checkpoint_mark
                 WHERE job_id OPERATOR(pg_catalog.=) $1 ORDER BY mark_id DESC OFFSET $7 LIMIT 64))
     )
     SELECT mark_id FROM ins";

/// Records the mark of checkpoint `crc` of `job`, as the definer role.
pub fn record(job: Uuid, crc: u32, checkpoint_id: Option<[u8; 16]>, source: &str) -> Result<(), CbError> {
    let mut files = job_files(job);
    // Files pushed from other nodes are marked at what the server has of them. A job whose
    // files all come by push is seen whole even where the server has no sessions directory.
    let pushed = pushed_files(job)?;
    if !pushed.is_empty() {
        files.get_or_insert_with(Vec::new).extend(pushed);
    }
    let visible = files.is_some();
    let json = files_json(files.as_deref().unwrap_or(&[]));
    as_definer(|| {
        Spi::connect_mut(|client| {
            let stmt = prepared(
                client,
                "checkpoint.mark.record",
                || RECORD_SQL.to_owned(),
                &[UUID, INT8, UUID, TEXT, BOOL, TEXT, INT8],
            )?;
            let args = [
                job.into(),
                i64::from(crc).into(),
                checkpoint_id.map(Uuid::from_bytes).into(),
                source.into(),
                visible.into(),
                json.as_str().into(),
                (guc::checkpoint_history_keep() - 1).into(),
            ];
            client.update(&*stmt, None, &args).map_err(spi)?;
            Ok(())
        })
    })
}

const LOOKUP_SQL: &str = "SELECT recorded_at, dir_visible,
            (SELECT pg_catalog.array_agg(f->>'file') FROM pg_catalog.jsonb_array_elements(files) f),
            (SELECT pg_catalog.array_agg((f->>'device')::pg_catalog.int8) FROM pg_catalog.jsonb_array_elements(files) f),
            (SELECT pg_catalog.array_agg((f->>'inode')::pg_catalog.int8) FROM pg_catalog.jsonb_array_elements(files) f),
            (SELECT pg_catalog.array_agg((f->>'size')::pg_catalog.int8) FROM pg_catalog.jsonb_array_elements(files) f),
            (SELECT pg_catalog.array_agg(coalesce((f->>'unseen')::pg_catalog.int8, 0)) FROM pg_catalog.jsonb_array_elements(files) f)
       FROM cortex_buffer.checkpoint_mark
      WHERE job_id OPERATOR(pg_catalog.=) $1 AND crc OPERATOR(pg_catalog.=) $2
      ORDER BY mark_id DESC LIMIT 1";

/// A recorded mark, and whether it saw the job's directory (one that did not still gives the
/// checkpoint's write time).
pub struct Recorded {
    pub recorded_at_us: i64,
    pub visible: bool,
    pub mark: Mark,
}

/// The newest mark of checkpoint `crc` of `job`.
pub fn lookup(client: &SpiClient<'_>, job: Uuid, crc: u32) -> Result<Option<Recorded>, CbError> {
    let stmt = prepared_read(client, "checkpoint.mark.lookup", || LOOKUP_SQL.to_owned(), &[UUID, INT8])?;
    let rows = client.select(&*stmt, Some(1), &[job.into(), i64::from(crc).into()]).map_err(spi)?;
    let Some(row) = rows.into_iter().next() else { return Ok(None) };
    let visible = row.get::<bool>(2).map_err(spi)?.unwrap_or(false);
    let recorded_at_us = unix_us(row.get(1).map_err(spi)?).unwrap_or(0);
    let names: Vec<Option<String>> = row.get(3).map_err(spi)?.unwrap_or_default();
    let devices: Vec<Option<i64>> = row.get(4).map_err(spi)?.unwrap_or_default();
    let inodes: Vec<Option<i64>> = row.get(5).map_err(spi)?.unwrap_or_default();
    let sizes: Vec<Option<i64>> = row.get(6).map_err(spi)?.unwrap_or_default();
    let unseen: Vec<Option<i64>> = row.get(7).map_err(spi)?.unwrap_or_default();
    let files = names
        .into_iter()
        .zip(devices)
        .zip(inodes)
        .zip(sizes)
        .zip(unseen)
        .filter_map(|((((name, device), inode), size), unseen)| {
            Some(MarkFile {
                rel_path: name?,
                device: bits_u64(device?),
                inode: bits_u64(inode?),
                size: size?,
                unseen: unseen.unwrap_or(0),
            })
        })
        .collect();
    Ok(Some(Recorded { recorded_at_us, visible, mark: Mark { recorded_at_us, files } }))
}
