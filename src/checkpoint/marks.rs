//! Checkpoints' high-water marks, and pods' resumes, in `cortex_buffer.checkpoint_mark`.
//!
//! A mark is the job's session files at the instant a checkpoint is stored: each file's
//! identity, size, and fingerprints of its first bytes and of the bytes just before that size,
//! with where the line holding the mark began. Recovery places the files after the checkpoint by
//! it (a checkpoint covers what finished before it), and recognises the bytes it covers even
//! after an operator touched the file (`cortex_buffer_core::recovery::marks`).
//!
//! `write_checkpoint` records its own mark (the pod stores it: `source` `write_checkpoint`). A
//! checkpoint the control plane writes itself (a plain `UPDATE` of the job table's `checkpoint`)
//! is marked by the `checkpoint_marked` trigger, which `cortex_buffer.job` has and
//! `install_checkpoint_trigger()` puts on a bound table (`trigger`); the trigger stays quiet
//! while `write_checkpoint` updates the row, so each write is marked once. A pod's
//! `recovery_plan` with its job token records its resume (`resume`): the checkpoint it was given
//! and the files then, so recovery knows which checkpoint that pod keyed its calls under.

use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::pg::guc;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::{prepared, prepared_read, spi};
use crate::pg::time::unix_us;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::discovery::Layout;
use cortex_buffer_core::indexer::index_plan::fingerprint_len;
use cortex_buffer_core::int::{bits_i64, bits_u64};
use cortex_buffer_core::json::writer::JsonWriter;
use cortex_buffer_core::recovery::keys::relative_to_job_dir;
use cortex_buffer_core::recovery::marks::{Fingerprint, Mark, MarkFile};
use cortex_buffer_core::shared::format_uuid;
use cortex_buffer_watch::scan::{resolve_root, scan_dir};

const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BOOL: PgOid = PgOid::BuiltIn(PgBuiltInOids::BOOLOID);

/// How many bytes before the mark its tail fingerprint covers (and where the line holding the
/// mark is looked for): enough to tell the bytes apart, two small reads per file.
pub const TAIL_WINDOW: u64 = 256;

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

/// A file's fingerprints at `size`: its first bytes (as many as the index's own fingerprint
/// covers, so the two compare without reading), the bytes just before `size`, and where the
/// line holding `size` began (`size` itself at a line boundary; `None` for a line that began
/// more than [`LINE_SEARCH_BYTES`] back).
pub fn fingerprints(file: &File, size: u64) -> std::io::Result<(Fingerprint, Fingerprint, Option<i64>)> {
    let head_len = fingerprint_len(size);
    let head = read_exact_at(file, 0, head_len)?;
    let tail_len = size.min(TAIL_WINDOW);
    let tail_from = size.saturating_sub(tail_len);
    let tail = read_exact_at(file, tail_from, tail_len)?;
    let line_start = match tail.last() {
        None => Some(0),
        Some(b'\n') => i64::try_from(size).ok(),
        Some(_) => match memchr::memrchr(b'\n', &tail) {
            Some(at) => i64::try_from(tail_from + at as u64 + 1).ok(),
            None if tail_from == 0 => Some(0),
            None => line_start_before(file, tail_from)?,
        },
    };
    Ok((fingerprint_of(&head), fingerprint_of(&tail), line_start))
}

/// How far back a mark looks for the start of a long line it falls inside.
const LINE_SEARCH_BYTES: u64 = 8 << 20;
const LINE_SEARCH_BLOCK: u64 = 64 << 10;

/// Where the line that goes on at `end` began: the byte after the last newline before `end`
/// (0 at the file's start), looked for back to [`LINE_SEARCH_BYTES`]; `None` beyond that. A
/// line a checkpoint's mark falls inside is a line being written then (a large append seen
/// half-way): knowing where it began tells the plan which event, if any, it is.
fn line_start_before(file: &File, end: u64) -> std::io::Result<Option<i64>> {
    let stop = end.saturating_sub(LINE_SEARCH_BYTES);
    let mut to = end;
    while to > stop {
        let from = to.saturating_sub(LINE_SEARCH_BLOCK).max(stop);
        let block = read_exact_at(file, from, to - from)?;
        if let Some(at) = memchr::memrchr(b'\n', &block) {
            return Ok(i64::try_from(from + at as u64 + 1).ok());
        }
        if from == 0 {
            return Ok(Some(0));
        }
        to = from;
    }
    Ok(None)
}

pub fn fingerprint_of(bytes: &[u8]) -> Fingerprint {
    Fingerprint { len: i64::try_from(bytes.len()).unwrap_or(i64::MAX), crc: crc32fast::hash(bytes) }
}

/// `len` bytes at `at`, or as many as the file has there (a file cut since shows as such).
fn read_exact_at(file: &File, at: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let mut done = 0usize;
    while done < buf.len() {
        let n = file.read_at(buf.get_mut(done..).unwrap_or_default(), at + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

/// Whether a file (opened now) still holds a mark entry's bytes: its head and the bytes before
/// the mark, as fingerprinted then. `None` when the entry has no fingerprints (a mark recorded
/// before they were kept).
pub fn holds(file: &File, m: &MarkFile) -> Option<bool> {
    let (head, tail) = (m.head?, m.tail?);
    let size = u64::try_from(m.size).ok()?;
    let now_head = read_exact_at(file, 0, u64::try_from(head.len).ok()?).ok()?;
    if fingerprint_of(&now_head) != head {
        return Some(false);
    }
    let tail_len = u64::try_from(tail.len).ok()?;
    let now_tail = read_exact_at(file, size.saturating_sub(tail_len), tail_len).ok()?;
    Some(fingerprint_of(&now_tail) == tail)
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
            .map(|f| {
                let size = f.stat.size;
                let opened = volume.open_file(Path::new(&format!("{dir}/{}", f.file_name)));
                let prints = opened.and_then(|h| fingerprints(&h, size)).ok();
                MarkFile {
                    rel_path: f.file_name,
                    pushed_by: None,
                    device: f.stat.device,
                    inode: f.stat.inode,
                    size: i64::try_from(size).unwrap_or(i64::MAX),
                    unseen: 0,
                    flushed: false,
                    head: prints.map(|p| p.0),
                    tail: prints.map(|p| p.1),
                    line_start: prints.and_then(|p| p.2),
                }
            })
            .collect(),
    )
}

/// The job's pushed files as the server holds them now: each at what the server has of it
/// (committed and held), with the bytes its shipper had reported beyond that (`unseen`), as the
/// definer role (pushed_file is the definer's alone). A held tail is a line not finished yet:
/// the mark lies inside it.
fn pushed_files(job: Uuid) -> Result<Vec<MarkFile>, CbError> {
    as_definer(|| {
        Spi::connect(|client| {
            let stmt = prepared_read(client, "checkpoint.mark.pushed", || PUSHED_SQL.to_owned(), &[UUID])?;
            let rows = client.select(&*stmt, None, &[job.into()]).map_err(spi)?;
            let mut files = Vec::new();
            for r in rows {
                let path: String = r.get(1).map_err(spi)?.unwrap_or_default();
                let job_dir: String = r.get(2).map_err(spi)?.unwrap_or_default();
                let committed = r.get::<i64>(5).map_err(spi)?.unwrap_or(0);
                let held = r.get::<i64>(6).map_err(spi)?.unwrap_or(0);
                let head: Vec<u8> = r.get(9).map_err(spi)?.unwrap_or_default();
                let size = committed.saturating_add(held);
                files.push(MarkFile {
                    rel_path: relative_to_job_dir(&path, &job_dir).to_owned(),
                    pushed_by: r.get(8).map_err(spi)?,
                    device: bits_u64(r.get::<i64>(3).map_err(spi)?.unwrap_or(0)),
                    inode: bits_u64(r.get::<i64>(4).map_err(spi)?.unwrap_or(0)),
                    size,
                    unseen: r.get::<i64>(7).map_err(spi)?.unwrap_or(0),
                    flushed: r.get::<bool>(10).map_err(spi)?.unwrap_or(false),
                    head: Some(fingerprint_of(&head)),
                    tail: None,
                    line_start: Some(if held > 0 { committed } else { size }),
                });
            }
            Ok(files)
        })
    })
}

const PUSHED_SQL: &str = "
    SELECT f.path, f.job_dir, f.device, f.inode, f.indexed_offset, p.held_len,
           GREATEST(coalesce(p.reported_size, 0) OPERATOR(pg_catalog.-) (f.indexed_offset OPERATOR(pg_catalog.+) p.held_len), 0),
           p.source, p.head,
           p.flushed_size OPERATOR(pg_catalog.=) (f.indexed_offset OPERATOR(pg_catalog.+) p.held_len)
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
        if let Some(source) = &f.pushed_by {
            w.field_str("pushed_by", source);
            w.field_bool("flushed", f.flushed);
        }
        if let Some(h) = f.head {
            w.field_int("head_len", h.len);
            w.field_int("head_crc", i64::from(h.crc));
        }
        if let Some(t) = f.tail {
            w.field_int("tail_len", t.len);
            w.field_int("tail_crc", i64::from(t.crc));
        }
        w.field_opt_int("line_start", f.line_start);
        w.end_object();
    }
    w.end_array();
    w.finish()
}

/// Records a mark, and keeps the newest `checkpoint_history_keep` of its kind (resumes, or
/// checkpoints' marks) for the job.
const RECORD_SQL: &str = "WITH ins AS (
         INSERT INTO cortex_buffer.checkpoint_mark (job_id, crc, checkpoint_id, recorded_at, source, dir_visible, files)
         VALUES ($1, $2, $3, pg_catalog.clock_timestamp(), $4, $5, $6::pg_catalog.jsonb) RETURNING mark_id
     ), del AS (
         DELETE FROM cortex_buffer.checkpoint_mark
          WHERE mark_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                SELECT mark_id FROM cortex_buffer.checkpoint_mark
                 WHERE job_id OPERATOR(pg_catalog.=) $1
                   AND (source OPERATOR(pg_catalog.=) 'resume') OPERATOR(pg_catalog.=) ($4 OPERATOR(pg_catalog.=) 'resume')
                 ORDER BY mark_id DESC OFFSET $7 LIMIT 64))
     )
     SELECT mark_id FROM ins";

/// Records the mark of checkpoint `crc` of `job` (`source`: `write_checkpoint`, `trigger`), or
/// a pod's resume from it (`resume`; `crc` `None`: the job had none), as the definer role.
pub fn record(job: Uuid, crc: Option<u32>, checkpoint_id: Option<[u8; 16]>, source: &str) -> Result<(), CbError> {
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
                crc.map(i64::from).into(),
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

pub(crate) const LOOKUP_SQL: &str = "SELECT mark_id, crc, source, recorded_at, dir_visible, files::pg_catalog.text
       FROM cortex_buffer.checkpoint_mark
      WHERE job_id OPERATOR(pg_catalog.=) $1
      ORDER BY mark_id";

/// What a recorded mark is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The pod stored the checkpoint (`write_checkpoint`).
    Own,
    /// Someone else did (a plain `UPDATE`, through the trigger).
    Trigger,
    /// A pod resumed from it.
    Resume,
}

/// A recorded mark: the checkpoint it is of (`None`: none, for a resume), what it is, and
/// whether it saw the job's directory (one that did not places nothing).
pub struct Recorded {
    pub crc: Option<u32>,
    pub kind: Kind,
    pub recorded_at_us: i64,
    pub visible: bool,
    pub mark: Mark,
}

/// Every mark of `job`, oldest first.
pub fn lookup_all(client: &SpiClient<'_>, job: Uuid) -> Result<Vec<Recorded>, CbError> {
    let stmt = prepared_read(client, "checkpoint.mark.lookup_all", || LOOKUP_SQL.to_owned(), &[UUID])?;
    let rows = client.select(&*stmt, None, &[job.into()]).map_err(spi)?;
    let mut out = Vec::new();
    for row in rows {
        let crc = row.get::<i64>(2).map_err(spi)?.and_then(|c| u32::try_from(c).ok());
        let kind = match row.get::<String>(3).map_err(spi)?.as_deref() {
            Some("write_checkpoint") => Kind::Own,
            Some("resume") => Kind::Resume,
            _ => Kind::Trigger,
        };
        let recorded_at_us = unix_us(row.get(4).map_err(spi)?).unwrap_or(0);
        let visible = row.get::<bool>(5).map_err(spi)?.unwrap_or(false);
        let text: String = row.get(6).map_err(spi)?.unwrap_or_default();
        let files = parse_files(&text);
        out.push(Recorded { crc, kind, recorded_at_us, visible, mark: Mark { recorded_at_us, files } });
    }
    Ok(out)
}

/// A mark's `files` document (written by [`files_json`]; older releases wrote fewer members).
fn parse_files(text: &str) -> Vec<MarkFile> {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let int = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_i64);
    let print = |v: &serde_json::Value, len: &str, crc: &str| {
        Some(Fingerprint { len: int(v, len)?, crc: u32::try_from(int(v, crc)?).ok()? })
    };
    items
        .iter()
        .filter_map(|v| {
            Some(MarkFile {
                rel_path: v.get("file")?.as_str()?.to_owned(),
                pushed_by: v.get("pushed_by").and_then(serde_json::Value::as_str).map(str::to_owned),
                device: bits_u64(int(v, "device")?),
                inode: bits_u64(int(v, "inode")?),
                size: int(v, "size")?,
                unseen: int(v, "unseen").unwrap_or(0),
                flushed: v.get("flushed").and_then(serde_json::Value::as_bool).unwrap_or(false),
                head: print(v, "head_len", "head_crc"),
                tail: print(v, "tail_len", "tail_crc"),
                line_start: int(v, "line_start"),
            })
        })
        .collect()
}
