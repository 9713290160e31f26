//! Indexing one file through SPI, in the caller's transaction: claim the file's row, read and
//! judge its new lines (the pure `indexer`, on the reader thread of [`cortex_buffer_watch::pipeline`]),
//! insert events and corrupt lines in batches (never one statement per line), and advance the
//! offset by compare-and-set — so rows and offset change together, exactly once, even with
//! several indexers at work.

use std::fs::File;
use std::io::{Seek, SeekFrom};

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgBuiltInOids, PgMemoryContexts, PgOid, Uuid};

use super::direct_insert::{EventTable, InsertPath, RowValues};
use super::file_row::{claim_many, delete_rows_from, existing_rows, finish_many, Claimed, Finish};
use super::settings::Settings;
use crate::pg::jsonb::RawJsonb;
use crate::pg::spi_util::{prepared, spi};
use crate::pg::time::timestamptz;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::event_columns::{insert_sql, EventColumn, SqlType};
use cortex_buffer_core::indexer::index_file::{CorruptRow, FileRules, Progress};
use cortex_buffer_core::indexer::index_plan::{decide, fingerprint_len, IndexState, Now, Reason, Work};
use cortex_buffer_core::int::count_i64;
use cortex_buffer_watch::pass::{FileOutcome, FileRef};
use cortex_buffer_watch::pipeline::{self, Limits, OwnedEvent, PipelineError, Rows};
use cortex_buffer_watch::scan::{read_head, relative, FileStat};
use cortex_buffer_watch::volume::SessionRead;
use cortex_buffer_watch::volume::Volume;

/// A batch is sent once it holds this many bytes, whatever the row count: one SQL statement's
/// worth on the SQL path; on the direct path batches are small (a few slots' worth) so the
/// reader and the inserter overlap from a file's first lines.
const SQL_BATCH_MAX_BYTES: usize = 16 << 20;
const DIRECT_BATCH_MAX_BYTES: usize = 2 << 20;

const INSERT_CORRUPT_SQL: &str = "
    INSERT INTO cortex_buffer.corrupt_line (file_id, byte_offset, line_no, preview, reason)
    SELECT $1, pg_catalog.unnest($2::pg_catalog.int8[]), pg_catalog.unnest($3::pg_catalog.int8[]),
           pg_catalog.unnest($4::pg_catalog.text[]), pg_catalog.unnest($5::pg_catalog.text[])";

fn oid(t: PgBuiltInOids) -> PgOid {
    PgOid::BuiltIn(t)
}

fn opt<T>(v: &Option<T>, f: impl FnOnce(&T) -> pg_sys::Datum) -> (pg_sys::Datum, bool) {
    match v {
        Some(x) => (f(x), false),
        None => (pg_sys::Datum::from(0), true),
    }
}

/// Inserts batches on the backend's thread: straight into the heap and indexes when the table
/// is the one the extension ships, else through SQL.
struct Inserter {
    path: InsertPath,
    /// The file whose rows are being inserted (one inserter serves a whole batch of files).
    file_id: i64,
}

impl Inserter {
    fn new(batch_rows: usize) -> Result<Self, CbError> {
        Ok(Inserter { path: EventTable::open(batch_rows.max(1))?, file_id: 0 })
    }

    /// The most rows and bytes to send at a time: what one call inserts.
    fn limits(&self, batch_rows: usize) -> Limits {
        match &self.path {
            InsertPath::Direct(table) => {
                Limits { max_rows: batch_rows.min(table.rows_per_call()).max(1), max_bytes: DIRECT_BATCH_MAX_BYTES }
            }
            InsertPath::Sql(_) => Limits { max_rows: batch_rows.max(1), max_bytes: SQL_BATCH_MAX_BYTES },
        }
    }

    /// Inserts `rows`; everything allocated for it (datums, arrays, jsonb copies) goes into a
    /// memory context reset afterwards, so memory stays bounded by the batch.
    fn insert(&mut self, client: &mut SpiClient<'_>, rows: &Rows) -> Result<(), CbError> {
        let mut context = PgMemoryContexts::new("cortex_buffer index batch");
        // SAFETY: the context outlives the closure; nothing allocated in it is used afterwards
        // (the SPI results of these INSERTs are not read).
        let result = unsafe { context.switch_to(|_| self.insert_in_context(client, rows)) };
        // SAFETY: no pointer into the context survives the closure.
        unsafe { context.reset() };
        result
    }

    fn insert_in_context(&mut self, client: &mut SpiClient<'_>, rows: &Rows) -> Result<(), CbError> {
        let file_id = self.file_id;
        self.insert_range(client, rows, file_id, 0..rows.events.len(), &rows.corrupt)
    }

    /// Inserts a batch of several files' rows ([`Rows::parts`]), file `i` of the batch being
    /// `file_ids[i]`: the events of all of them in one go on the direct path.
    fn insert_parts(&mut self, client: &mut SpiClient<'_>, rows: &Rows, file_ids: &[i64]) -> Result<(), CbError> {
        let id_of = |file: usize| {
            file_ids
                .get(file)
                .copied()
                .ok_or_else(|| CbError::internal(format!("rows for file {file} of a batch of {}", file_ids.len())))
        };
        let mut context = PgMemoryContexts::new("cortex_buffer index batch");
        // SAFETY: as in `insert`: nothing allocated in the context outlives the closure.
        let result = unsafe {
            context.switch_to(|_| -> Result<(), CbError> {
                if let InsertPath::Direct(table) = &mut self.path {
                    // Each event's file, from the parts, which cover the events in order.
                    let mut ids = Vec::with_capacity(rows.events.len());
                    for part in &rows.parts {
                        let id = id_of(part.file)?;
                        ids.extend(part.events.clone().map(|_| id));
                    }
                    if ids.len() != rows.events.len() {
                        return Err(CbError::internal("a batch's parts do not cover its events"));
                    }
                    let refused = match ids.is_empty() {
                        true => Ok(()),
                        false => {
                            table.insert(rows.events.len(), |i| ids[i], |i| event_values(ids[i], rows, &rows.events[i]))
                        }
                    };
                    match refused {
                        Ok(()) => {
                            for part in rows.parts.iter().filter(|p| !p.corrupt.is_empty()) {
                                let corrupt = rows.corrupt.get(part.corrupt.clone()).unwrap_or_default();
                                insert_corrupt_sql(client, id_of(part.file)?, corrupt)?;
                            }
                            return Ok(());
                        }
                        // Nothing was inserted: the whole batch goes through SQL, as will the
                        // rest of this inserter's.
                        Err(why) => self.path = InsertPath::Sql(why),
                    }
                }
                for part in &rows.parts {
                    let corrupt = rows.corrupt.get(part.corrupt.clone()).unwrap_or_default();
                    self.insert_range(client, rows, id_of(part.file)?, part.events.clone(), corrupt)?;
                }
                Ok(())
            })
        };
        // SAFETY: no pointer into the context survives the closure.
        unsafe { context.reset() };
        result
    }

    /// Inserts the events `events` of `rows` and the corrupt lines `corrupt`, all of one file.
    fn insert_range(
        &mut self,
        client: &mut SpiClient<'_>,
        rows: &Rows,
        file_id: i64,
        events: std::ops::Range<usize>,
        corrupt: &[CorruptRow],
    ) -> Result<(), CbError> {
        if !events.is_empty() {
            let slice = rows.events.get(events.clone()).unwrap_or_default();
            let refused = match &mut self.path {
                InsertPath::Direct(table) => {
                    table.insert(slice.len(), |_| file_id, |i| event_values(file_id, rows, &slice[i])).err()
                }
                InsertPath::Sql(_) => None,
            };
            if let Some(why) = refused {
                self.path = InsertPath::Sql(why);
            }
            if let InsertPath::Sql(_) = self.path {
                insert_events_sql(client, file_id, rows, slice)?;
            }
        }
        if !corrupt.is_empty() {
            insert_corrupt_sql(client, file_id, corrupt)?;
        }
        Ok(())
    }
}

/// A pointer datum into the batch's arena (a ready-made varlena), or NULL.
fn varlena_datum(rows: &Rows, e: &OwnedEvent, col: EventColumn) -> (pg_sys::Datum, bool) {
    match rows.varlena(e, col) {
        // The arena is not touched until the insert that uses the datum has returned.
        Some(v) => (pg_sys::Datum::from(v.as_ptr()), false),
        None => (pg_sys::Datum::from(0), true),
    }
}

/// An event's values as datums, in [`EventColumn::ALL`] order: text and jsonb as pointers
/// into the batch's arena, everything else by value or a pointer into the event itself.
fn event_values(file_id: i64, rows: &Rows, e: &OwnedEvent) -> RowValues {
    let c = &e.columns;
    EventColumn::ALL.map(|col| match (col.sql_type(), col) {
        (SqlType::Text | SqlType::Jsonb, _) => varlena_datum(rows, e, col),
        (_, EventColumn::FileId) => (pg_sys::Datum::from(file_id), false),
        (_, EventColumn::ByteOffset) => (pg_sys::Datum::from(e.offset), false),
        (_, EventColumn::LineNo) => (pg_sys::Datum::from(e.line_no), false),
        (_, EventColumn::Ts) => opt(&timestamptz(c.ts_us), |t| pg_sys::Datum::from(t.into_inner())),
        (_, EventColumn::JobId) => opt(&c.job_id, |u| pg_sys::Datum::from(u.as_ptr())),
        (_, EventColumn::StepIndex) => opt(&c.step_index, |v| pg_sys::Datum::from(*v)),
        (_, EventColumn::Success) => opt(&c.success, |v| pg_sys::Datum::from(*v)),
        (_, col) => opt(&int8_of(c, col), |v| pg_sys::Datum::from(*v)),
    })
}

/// The value of an `int8` column that comes from the event's own fields.
fn int8_of(c: &cortex_buffer_core::indexer::normalize::Columns, col: EventColumn) -> Option<i64> {
    debug_assert_eq!(col.sql_type(), SqlType::Int8, "{col:?} has no int8 value");
    match col {
        EventColumn::Seq => c.seq,
        EventColumn::InputTokens => c.input_tokens,
        EventColumn::OutputTokens => c.output_tokens,
        EventColumn::CacheWriteTokens => c.cache_write_tokens,
        EventColumn::CacheReadTokens => c.cache_read_tokens,
        _ => None,
    }
}

/// One column of `events` (rows of `rows`) as the SQL path's array parameter (`$1` is the file
/// id).
fn column_arg(col: EventColumn, file_id: i64, rows: &Rows, events: &[OwnedEvent]) -> DatumWithOid<'static> {
    match (col.sql_type(), col) {
        (SqlType::Text, _) => {
            events.iter().map(|e| rows.text(e, col).map(str::to_owned)).collect::<Vec<Option<String>>>().into()
        }
        (SqlType::Jsonb, _) => events
            .iter()
            .map(|e| rows.varlena(e, col).map(RawJsonb::from_varlena))
            .collect::<Vec<Option<RawJsonb>>>()
            .into(),
        (_, EventColumn::FileId) => file_id.into(),
        (_, EventColumn::ByteOffset) => events.iter().map(|e| e.offset).collect::<Vec<i64>>().into(),
        (_, EventColumn::LineNo) => events.iter().map(|e| e.line_no).collect::<Vec<i64>>().into(),
        (_, EventColumn::Ts) => events.iter().map(|e| timestamptz(e.columns.ts_us)).collect::<Vec<_>>().into(),
        (_, EventColumn::JobId) => {
            events.iter().map(|e| e.columns.job_id.map(Uuid::from_bytes)).collect::<Vec<_>>().into()
        }
        (_, EventColumn::StepIndex) => events.iter().map(|e| e.columns.step_index).collect::<Vec<_>>().into(),
        (_, EventColumn::Success) => events.iter().map(|e| e.columns.success).collect::<Vec<_>>().into(),
        (_, col) => events.iter().map(|e| int8_of(&e.columns, col)).collect::<Vec<_>>().into(),
    }
}

/// The SQL path: one INSERT of unnested arrays ([`insert_sql`]).
fn insert_events_sql(
    client: &mut SpiClient<'_>,
    file_id: i64,
    rows: &Rows,
    events: &[OwnedEvent],
) -> Result<(), CbError> {
    let types: Vec<PgOid> = EventColumn::ALL
        .iter()
        .map(|c| {
            let t = c.sql_type();
            let oid = if *c == EventColumn::FileId { t.oid() } else { t.array_oid() };
            PgOid::from_untagged(pg_sys::Oid::from(oid))
        })
        .collect();
    let stmt = prepared(client, "buffer.insert_events", insert_sql, &types)?;
    let args: Vec<DatumWithOid<'static>> =
        EventColumn::ALL.iter().map(|c| column_arg(*c, file_id, rows, events)).collect();
    client.update(&*stmt, None, &args).map_err(spi)?;
    Ok(())
}

fn insert_corrupt_sql(client: &mut SpiClient<'_>, file_id: i64, rows: &[CorruptRow]) -> Result<(), CbError> {
    let stmt = prepared(
        client,
        "buffer.insert_corrupt",
        || INSERT_CORRUPT_SQL.to_owned(),
        &[
            oid(PgBuiltInOids::INT8OID),
            oid(PgBuiltInOids::INT8ARRAYOID),
            oid(PgBuiltInOids::INT8ARRAYOID),
            oid(PgBuiltInOids::TEXTARRAYOID),
            oid(PgBuiltInOids::TEXTARRAYOID),
        ],
    )?;
    let o: Vec<i64> = rows.iter().map(|r| count_i64(r.offset)).collect();
    let n: Vec<i64> = rows.iter().map(|r| count_i64(r.line_no)).collect();
    let p: Vec<&str> = rows.iter().map(|r| r.preview.as_str()).collect();
    let why: Vec<&str> = rows.iter().map(|r| r.reason.as_str()).collect();
    client.update(&*stmt, None, &[file_id.into(), o.into(), n.into(), p.into(), why.into()]).map_err(spi)?;
    Ok(())
}

/// Reads and judges the file on the pipeline's helper thread while this thread inserts the
/// batches it sends, checking for interrupts (cancel, statement timeout, termination) between
/// batches and while waiting, so a long file never makes the backend deaf to them.
#[allow(clippy::too_many_arguments)]
fn read_and_insert(
    client: &mut SpiClient<'_>,
    file: &File,
    progress: Progress,
    rules: &FileRules<'_>,
    inserter: &mut Inserter,
    batch_rows: usize,
    path: &str,
    inline: bool,
) -> Result<Progress, CbError> {
    let limits = inserter.limits(batch_rows);
    let interrupts = || {
        pg_sys::check_for_interrupts!();
    };
    // The reading thread steps over holes; the interrupt checks are this thread's (between and
    // while waiting for batches), never the reading thread's.
    let reader = SessionRead::new(file, || {});
    let insert = |rows: &Rows| inserter.insert(client, rows);
    let done = if inline {
        pipeline::run_inline(reader, progress, rules, limits, insert, interrupts)
    } else {
        pipeline::run(reader, progress, rules, limits, insert, interrupts)
    };
    done.map_err(|e| match e {
        PipelineError::Insert(e) => e,
        PipelineError::Read(e) => io_error("read", path, &e),
        PipelineError::Thread(why) => CbError::internal(why),
    })
}

fn crc_of_prefix(file: &File, len: u64) -> std::io::Result<u32> {
    Ok(crc32fast::hash(&read_head(file, usize::try_from(len).unwrap_or(0))?.0))
}

fn io_error(action: &str, path: &str, e: &std::io::Error) -> CbError {
    CbError::io(action, path, e)
}

/// Why a file was skipped when another indexer holds its row.
pub use cortex_buffer_watch::pass::BUSY;
/// Why a file was skipped when its row is gone or now records another path.
pub use cortex_buffer_watch::pass::STALE;

/// A claimed file, opened and judged: nothing to do, or what to read.
enum Prepared {
    Done(FileOutcome),
    Read(Box<ToRead>),
}

struct ToRead {
    handle: File,
    stat: FileStat,
    old: IndexState,
    progress: Progress,
    generation: i32,
    note: Option<String>,
    reindex: bool,
    /// The bytes indexed so far are no longer in the file (replaced, shrunk, rewritten): the
    /// row records it (`session_file.replaced_at`), for recovery.
    dropped: bool,
}

/// Opens a claimed file (beneath the volume, and only if it is still the file the pass saw) and
/// decides what indexing it means.
fn prepare(file: &FileRef, claimed: Claimed, volume: &Volume) -> Result<Prepared, CbError> {
    if claimed.gone {
        return Ok(Prepared::Done(FileOutcome::Skipped("gone".into())));
    }
    // Opened beneath the sessions directory's handle, and only if it is still the file the pass
    // saw: a path swapped for a link (or another file) since is not read.
    let handle = match relative(volume, &file.path).and_then(|rel| volume.open_file(&rel)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Prepared::Done(FileOutcome::Skipped("removed before it could be read".into())));
        }
        Err(e) if cortex_buffer_watch::volume::leaves_volume(&e) => {
            return Ok(Prepared::Done(FileOutcome::Skipped(
                "it became a link leading outside the sessions directory".into(),
            )));
        }
        Err(e) => return Err(io_error("open", &file.path, &e)),
    };
    let meta = handle.metadata().map_err(|e| io_error("stat", &file.path, &e))?;
    let stat = FileStat::of(&meta);
    if (stat.device, stat.inode) != (file.device, file.inode) {
        return Ok(Prepared::Done(FileOutcome::Skipped(
            "replaced since it was scanned; looked at again next pass".into(),
        )));
    }
    let old = claimed.state;
    let fingerprint = if old.generation > 0 && old.fingerprint_len > 0 && stat.size >= old.fingerprint_len {
        Some(crc_of_prefix(&handle, old.fingerprint_len).map_err(|e| io_error("read", &file.path, &e))?)
    } else {
        None
    };
    let work = decide(&old, &Now { stat, dialect: file.dialect, fingerprint });
    let (progress, generation, note) = match &work {
        Work::Nothing => {
            return Ok(Prepared::Done(FileOutcome::Indexed {
                was_offset: old.offset,
                state: IndexState { mtime_us: stat.mtime_us, ..old },
                events: 0,
                corrupt: 0,
                note: None,
            }));
        }
        Work::Append if old.generation > 0 => (
            Progress {
                offset: old.offset,
                lines: old.lines,
                integrity: claimed.integrity,
                tail_unterminated: old.tail_unterminated,
                ..Progress::default()
            },
            old.generation,
            None,
        ),
        Work::Append => (Progress::default(), 1, None),
        Work::Reindex(reason) => {
            (Progress::default(), old.generation + 1, Some(format!("re-indexed: {}", reason.describe())))
        }
    };
    let reindex = matches!(work, Work::Reindex(_));
    let dropped =
        matches!(work, Work::Reindex(Reason::Replaced | Reason::Shrank | Reason::Rewritten)) && old.offset > 0;
    Ok(Prepared::Read(Box::new(ToRead { handle, stat, old, progress, generation, note, reindex, dropped })))
}

/// How a prepared file's lines are judged.
fn rules_of<'f>(file: &'f FileRef, r: &ToRead, settings: &Settings, now_us: i64) -> FileRules<'f> {
    FileRules {
        dialect: file.dialect,
        job_dir: &file.job_dir,
        max_line_bytes: settings.max_line_bytes,
        max_line_memory: settings.max_line_memory,
        settled: now_us.saturating_sub(r.stat.mtime_us) >= settings.settle_us,
        max_bytes: file.budget,
        resume: None,
    }
}

/// Replaces a new generation's rows (an append needs no DELETE: rows beyond the committed
/// offset cannot exist, since rows and offset commit together) and positions the file at the
/// offset where reading starts.
fn begin(client: &mut SpiClient<'_>, file: &FileRef, r: &ToRead) -> Result<(), CbError> {
    if r.reindex {
        delete_rows_from(client, file.file_id, r.progress.offset)?;
    }
    let mut reader = &r.handle;
    reader.seek(SeekFrom::Start(r.progress.offset)).map_err(|e| io_error("seek", &file.path, &e))?;
    Ok(())
}

/// The bytes a prepared file has to read in this pass.
fn to_read(file: &FileRef, r: &ToRead) -> u64 {
    r.stat.size.saturating_sub(r.progress.offset).min(file.budget)
}

/// What to record once a prepared file's lines are in, and the outcome.
fn conclude(
    file: &FileRef,
    r: ToRead,
    progress: Progress,
    settings: &Settings,
) -> Result<(Finish, FileOutcome), CbError> {
    let ToRead { handle, stat, old, generation, note, dropped, .. } = r;
    let fp_len = fingerprint_len(stat.size).max(if generation == old.generation { old.fingerprint_len } else { 0 });
    let fp_len = fp_len.min(stat.size);
    let fp = crc_of_prefix(&handle, fp_len).map_err(|e| io_error("read", &file.path, &e))?;
    let report = progress.integrity.report(settings.max_corruption_ratio, false);
    let state = IndexState {
        offset: progress.offset,
        lines: progress.lines,
        generation,
        device: stat.device,
        inode: stat.inode,
        mtime_us: stat.mtime_us,
        fingerprint_len: fp_len,
        fingerprint: fp,
        dialect: file.dialect,
        tail_unterminated: progress.tail_unterminated,
        tail_pending: progress.tail_pending,
        quarantined: false,
    };
    let outcome = FileOutcome::Indexed {
        was_offset: old.offset,
        state: state.clone(),
        events: progress.events_added,
        corrupt: progress.corrupt_added,
        note,
    };
    let finish = Finish {
        file_id: file.file_id,
        old_offset: old.offset,
        old_generation: old.generation,
        state,
        integrity: progress.integrity,
        trusted: report.trusted,
        dropped,
    };
    Ok((finish, outcome))
}

/// Indexes `file` in the current transaction: a batch of one ([`index_batch`]). Errors leave
/// the transaction to be rolled back by the caller (who then records the failure with
/// [`record_failure`]).
pub fn index_one(file: &FileRef, volume: &Volume, settings: &Settings, now_us: i64) -> Result<FileOutcome, CbError> {
    index_batch(std::slice::from_ref(file), volume, settings, now_us, &mut |_| {})?
        .pop()
        .ok_or_else(|| CbError::internal(format!("{} has no outcome", file.path)))
}

fn moved(path: &str, offset: u64, generation: i32) -> CbError {
    CbError::internal(format!("offset of {path} moved under the lock (expected {offset} in generation {generation})"))
}

/// Indexes `files` in the current transaction with statements shared by all of them: one claim,
/// one opening of the event table and its indexes, one finish. Any error fails the whole batch
/// (the caller then rolls it back and indexes its files one by one, each isolated); a file
/// another indexer holds is skipped. `before_file` sees each file before it is read.
pub fn index_batch(
    files: &[FileRef],
    volume: &Volume,
    settings: &Settings,
    now_us: i64,
    before_file: &mut dyn FnMut(&FileRef),
) -> Result<Vec<FileOutcome>, CbError> {
    Spi::connect_mut(|client| {
        let ids: Vec<i64> = files.iter().map(|f| f.file_id).collect();
        let mut claimed = claim_many(client, &ids)?;
        // A row not claimed is held by another indexer, or no longer there (or no longer this
        // path's: the catalogue was re-created): the pass must then read the catalogue again.
        let unclaimed: Vec<i64> = ids.iter().copied().filter(|id| !claimed.contains_key(id)).collect();
        let present = existing_rows(client, &unclaimed)?;
        // Every file claimed and judged first: what is left is what to read.
        let mut outcomes: Vec<Option<FileOutcome>> = (0..files.len()).map(|_| None).collect();
        let mut items: Vec<(usize, ToRead)> = Vec::new();
        for (k, file) in files.iter().enumerate() {
            before_file(file);
            let Some(c) = claimed.remove(&file.file_id) else {
                let why = if present.contains(&file.file_id) { BUSY } else { STALE };
                outcomes[k] = Some(FileOutcome::Skipped(why.into()));
                continue;
            };
            if c.path != file.path {
                outcomes[k] = Some(FileOutcome::Skipped(STALE.into()));
                continue;
            }
            match prepare(file, c, volume)? {
                Prepared::Done(outcome) => outcomes[k] = Some(outcome),
                Prepared::Read(r) => items.push((k, *r)),
            }
        }
        let mut progress: Vec<Option<Progress>> = vec![None; items.len()];
        if !items.is_empty() {
            for (k, r) in &items {
                begin(client, &files[*k], r)?;
            }
            let reading: Vec<i64> = items.iter().map(|(k, _)| files[*k].file_id).collect();
            crate::partition::ensure_for(&reading)?;
            let mut inserter = Inserter::new(settings.batch_rows)?;
            if let InsertPath::Sql(why) = &inserter.path {
                debug1!("cortex_buffer: the batch's rows go through SQL: {why}");
            }
            let limits = inserter.limits(settings.batch_rows);
            let total: u64 = items.iter().map(|(k, r)| to_read(&files[*k], r)).sum();
            if items.len() > 1 && total > pipeline::INLINE_MAX_BYTES {
                // One reading thread for the whole batch: the next file is read and judged while
                // this thread inserts the last one's rows.
                let item_ids: Vec<i64> = items.iter().map(|(k, _)| files[*k].file_id).collect();
                let inputs: Vec<_> = items
                    .iter()
                    .map(|(k, r)| {
                        (
                            SessionRead::new(&r.handle, || {}),
                            r.progress.clone(),
                            rules_of(&files[*k], r, settings, now_us),
                        )
                    })
                    .collect();
                let insert = |rows: &Rows| inserter.insert_parts(client, rows, &item_ids);
                let done = |i: usize, p: Progress| {
                    if let Some(slot) = progress.get_mut(i) {
                        *slot = Some(p);
                    }
                    Ok(())
                };
                let interrupts = || {
                    pg_sys::check_for_interrupts!();
                };
                pipeline::run_many(inputs, limits, insert, done, interrupts).map_err(|e| match e {
                    PipelineError::Insert(e) => e,
                    PipelineError::Read(e) => io_error("read", "a file of the batch", &e),
                    PipelineError::Thread(why) => CbError::internal(why),
                })?;
            } else {
                for (i, (k, r)) in items.iter().enumerate() {
                    let file = &files[*k];
                    inserter.file_id = file.file_id;
                    let rules = rules_of(file, r, settings, now_us);
                    let p = read_and_insert(
                        client,
                        &r.handle,
                        r.progress.clone(),
                        &rules,
                        &mut inserter,
                        settings.batch_rows,
                        &file.path,
                        to_read(file, r) <= pipeline::INLINE_MAX_BYTES,
                    )?;
                    progress[i] = Some(p);
                }
            }
        }
        let mut finishes = Vec::with_capacity(items.len());
        for ((k, r), p) in items.into_iter().zip(progress) {
            let file = &files[k];
            let p = p.ok_or_else(|| CbError::internal(format!("{} was not read to its end", file.path)))?;
            let (f, outcome) = conclude(file, r, p, settings)?;
            finishes.push(f);
            outcomes[k] = Some(outcome);
        }
        let recorded = finish_many(client, &finishes)?;
        if recorded.len() != finishes.len() {
            let missing = finishes.iter().find(|f| !recorded.contains(&f.file_id));
            let path = missing
                .and_then(|m| files.iter().find(|f| f.file_id == m.file_id))
                .map_or("a file", |f| f.path.as_str());
            return Err(moved(path, missing.map_or(0, |m| m.old_offset), missing.map_or(0, |m| m.old_generation)));
        }
        Ok(outcomes.into_iter().map(|o| o.unwrap_or_else(|| FileOutcome::Skipped("not reached".into()))).collect())
    })
}

pub use super::file_row::record_failure;

/// One file's bytes for [`index_streams`]: what `reader` holds as file `file_id`'s lines from
/// `progress` on, judged under `rules`.
pub struct StreamItem<'a, R> {
    pub file_id: i64,
    pub reader: R,
    pub progress: Progress,
    pub rules: FileRules<'a>,
}

/// Indexes what each item's reader holds as its file's lines from its progress on, on this
/// thread, with the tailer's judge and inserts and one opening of the event table and its
/// indexes: push ingestion's path, whose bytes come from chunks instead of files. Returns each
/// file's progress, in `items`' order; the caller holds the files' rows and records the
/// results. `lines_at_most` bounds the lines of all of them (a few lines need no more tuple
/// slots than they have).
pub fn index_streams<R>(
    client: &mut SpiClient<'_>,
    items: Vec<StreamItem<'_, R>>,
    settings: &Settings,
    lines_at_most: usize,
) -> Result<Vec<Progress>, CbError>
where
    R: std::io::Read + cortex_buffer_core::indexer::lines::HoleSkip,
{
    let ids: Vec<i64> = items.iter().map(|i| i.file_id).collect();
    crate::partition::ensure_for(&ids)?;
    let mut inserter = Inserter::new(settings.batch_rows.min(lines_at_most.max(1)))?;
    let limits = inserter.limits(settings.batch_rows);
    let mut done = Vec::with_capacity(items.len());
    for item in items {
        inserter.file_id = item.file_id;
        let interrupts = || {
            pg_sys::check_for_interrupts!();
        };
        let insert = |rows: &Rows| inserter.insert(client, rows);
        let progress = pipeline::run_inline(item.reader, item.progress, &item.rules, limits, insert, interrupts)
            .map_err(|e| match e {
                PipelineError::Insert(e) => e,
                PipelineError::Read(e) => CbError::internal(format!("reading a pushed chunk: {e}")),
                PipelineError::Thread(why) => CbError::internal(why),
            })?;
        done.push(progress);
    }
    Ok(done)
}
