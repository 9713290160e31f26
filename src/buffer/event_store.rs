//! Indexing one file through SPI, in the caller's transaction: claim the file's row, read and
//! judge its new lines (the pure `indexer`), insert events and corrupt lines in batches (one
//! statement per batch, never one per line), and advance the offset by compare-and-set — so
//! rows and offset change together, exactly once, even with several indexers at work.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::{pg_sys, PgBuiltInOids, PgMemoryContexts, PgOid, Uuid};

use super::catalog::{from_i64, to_i64};
use super::dialect::Dialect;
use super::direct_insert::{EventTable, RowValues};
use super::index_plan::{decide, fingerprint_len, IndexState, Now, Work};
use super::indexer::{index_file, CorruptRow, EventRow, FileRules, IndexError, Progress, Sink};
use super::integrity::Integrity;
use super::normalize::Columns;
use super::pass::{FileOutcome, FileRef};
use super::scan::{open_regular, FileStat};
use super::timestamp::POSTGRES_EPOCH_OFFSET_US;
use crate::error::CbError;
use crate::json::jsonb_write::to_jsonb;
use crate::pg::guc;
use crate::pg::jsonb::RawJsonb;
use crate::pg::spi_util::spi;

/// The limits indexing runs with (from the settings).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub max_line_bytes: usize,
    pub batch_rows: usize,
    pub settle_us: i64,
    pub quarantine_after: i32,
    pub max_corruption_ratio: f64,
}

impl Settings {
    pub fn current() -> Settings {
        Settings {
            max_line_bytes: guc::max_line_bytes(),
            batch_rows: guc::batch_rows(),
            settle_us: guc::settle_period_us(),
            quarantine_after: guc::quarantine_after(),
            max_corruption_ratio: guc::max_corruption_ratio(),
        }
    }
}

/// A batch is sent once it holds this many bytes, whatever the row count: one SQL statement's
/// worth on the SQL path; on the direct path batches are small (a few slots' worth) so the
/// reader and the inserter overlap from a file's first lines.
const SQL_BATCH_MAX_BYTES: usize = 16 << 20;
const DIRECT_BATCH_MAX_BYTES: usize = 2 << 20;
/// Batches queued between the threads (each way).
const QUEUE_DEPTH: usize = 4;

thread_local! {
    /// Prepared statements for the life of the backend (their plans follow table changes).
    static STATEMENTS: RefCell<HashMap<&'static str, std::rc::Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
}

fn oid(t: PgBuiltInOids) -> PgOid {
    PgOid::BuiltIn(t)
}

fn statement(
    client: &SpiClient<'_>,
    key: &'static str,
    sql: &str,
    args: &[PgOid],
) -> Result<std::rc::Rc<OwnedPreparedStatement>, CbError> {
    if let Some(s) = STATEMENTS.with(|m| m.borrow().get(key).cloned()) {
        return Ok(s);
    }
    let prepared =
        client.prepare_mut(sql, args).map_err(|e| CbError::internal(format!("preparing {key}: {e}")))?.keep();
    let prepared = std::rc::Rc::new(prepared);
    STATEMENTS.with(|m| m.borrow_mut().insert(key, std::rc::Rc::clone(&prepared)));
    Ok(prepared)
}

const CLAIM_SQL: &str = "
    SELECT indexed_offset, indexed_lines, generation, indexed_device, indexed_inode,
           (extract(epoch FROM indexed_mtime) * 1000000)::int8, fingerprint_len, fingerprint,
           indexed_dialect, tail_unterminated, tail_pending, quarantined_at IS NOT NULL,
           total_lines, valid_lines, corrupt_lines, blank_lines, last_failed_parse,
           last_seq, seq_gaps, seq_first_missing, seq_resets,
           (extract(epoch FROM first_ts) * 1000000)::int8, (extract(epoch FROM last_ts) * 1000000)::int8,
           session_start_seen, session_end_seen, schema_version, gone_at IS NOT NULL
      FROM cortex_buffer.session_file WHERE file_id = $1
       FOR UPDATE SKIP LOCKED";

const INSERT_EVENTS_SQL: &str = "
    INSERT INTO cortex_buffer.event
           (file_id, byte_offset, line_no, type, ts, job_id, session_id, agent_id, seq, step_index,
            invocation_id, tool_name, checkpoint_id, success, input_tokens, output_tokens,
            cache_write_tokens, cache_read_tokens, request_id, payload, payload_problem)
    SELECT $1, unnest($2::int8[]), unnest($3::int8[]), unnest($4::text[]), unnest($5::timestamptz[]),
           unnest($6::uuid[]), unnest($7::text[]), unnest($8::text[]), unnest($9::int8[]), unnest($10::int4[]),
           unnest($11::text[]), unnest($12::text[]), unnest($13::text[]), unnest($14::bool[]), unnest($15::int8[]),
           unnest($16::int8[]), unnest($17::int8[]), unnest($18::int8[]), unnest($19::text[]),
           unnest($20::jsonb[]), unnest($21::text[])";

const INSERT_CORRUPT_SQL: &str = "
    INSERT INTO cortex_buffer.corrupt_line (file_id, byte_offset, line_no, preview, reason)
    SELECT $1, unnest($2::int8[]), unnest($3::int8[]), unnest($4::text[]), unnest($5::text[])";

const FINISH_SQL: &str = "
    UPDATE cortex_buffer.session_file SET
           indexed_offset = $4, indexed_lines = $5, generation = $6, indexed_device = $7, indexed_inode = $8,
           indexed_mtime = timestamptz 'epoch' + $9 * interval '1 microsecond',
           fingerprint_len = $10, fingerprint = $11, indexed_dialect = $12,
           tail_unterminated = $13, tail_pending = $14,
           total_lines = $15, valid_lines = $16, corrupt_lines = $17, blank_lines = $18, last_failed_parse = $19,
           last_seq = $20, seq_gaps = $21, seq_first_missing = $22, seq_resets = $23,
           first_ts = timestamptz 'epoch' + $24 * interval '1 microsecond',
           last_ts = timestamptz 'epoch' + $25 * interval '1 microsecond',
           session_start_seen = $26, session_end_seen = $27, schema_version = $28, trusted = $29,
           indexed_at = now(), failures = 0, last_error = NULL, last_error_at = NULL, quarantined_at = NULL
     WHERE file_id = $1 AND indexed_offset = $2 AND generation = $3";

/// The text columns an event keeps in its batch's arena, in this order.
const TYPE: usize = 0;
const SESSION: usize = 1;
const AGENT: usize = 2;
const INVOCATION: usize = 3;
const TOOL: usize = 4;
const CHECKPOINT: usize = 5;
const REQUEST: usize = 6;
const PROBLEM: usize = 7;
const TEXTS: usize = 8;

/// One event row as plain Rust data, built off the main thread. Its text columns and its jsonb
/// payload are ready-made varlenas in its batch's arena, so the main thread hands Postgres
/// pointers into it instead of copying each value (`heap_form_tuple` copies them once, as it
/// must).
struct OwnedEvent {
    offset: i64,
    line_no: i64,
    /// Numbers, time and job id (its strings have moved into the arena).
    columns: Columns,
    texts: [Option<u32>; TEXTS],
    payload: Option<u32>,
}

/// Appends a varlena (4-byte header) holding `bytes` at the next 4-byte boundary.
fn push_varlena(arena: &mut Vec<u8>, bytes: &[u8]) -> u32 {
    arena.resize(arena.len().next_multiple_of(4), 0);
    let at = arena.len();
    arena.extend_from_slice(&(((bytes.len() + 4) as u32) << 2).to_ne_bytes());
    arena.extend_from_slice(bytes);
    u32::try_from(at).unwrap_or(0)
}

impl OwnedEvent {
    /// Moves `row`'s strings and payload (as jsonb) into `arena`.
    fn build(row: EventRow<'_>, arena: &mut Vec<u8>) -> OwnedEvent {
        let mut c = row.columns;
        arena.reserve(row.payload.as_ref().map_or(0, |p| p.len() + p.len() / 4) + 256);
        let mut texts = [None; TEXTS];
        let mut put = |k: usize, s: Option<&str>, arena: &mut Vec<u8>| {
            texts[k] = s.map(|s| push_varlena(arena, s.as_bytes()));
        };
        put(TYPE, c.event_type.take().as_deref(), arena);
        put(SESSION, c.session_id.take().as_deref(), arena);
        put(AGENT, c.agent_id.take().as_deref(), arena);
        put(INVOCATION, c.invocation_id.take().as_deref(), arena);
        put(TOOL, c.tool_name.take().as_deref(), arena);
        put(CHECKPOINT, c.checkpoint_id.take().as_deref(), arena);
        put(REQUEST, c.request_id.take().as_deref(), arena);
        let mut problem = row.payload_problem;
        let mut payload = None;
        if let Some(text) = row.payload {
            arena.resize(arena.len().next_multiple_of(4), 0);
            let at = arena.len();
            match to_jsonb(&text, arena) {
                Ok(()) => payload = u32::try_from(at).ok(),
                Err(_) => {
                    arena.truncate(at);
                    problem = Some("larger than jsonb can hold");
                }
            }
        }
        put(PROBLEM, problem, arena);
        OwnedEvent { offset: i64_of(row.offset), line_no: i64_of(row.line_no), columns: c, texts, payload }
    }
}

/// A batch of rows: built on the reading thread, inserted on the main one, then sent back to
/// be refilled, so the steady state allocates (and frees across threads) nothing per row.
#[derive(Default)]
struct Rows {
    events: Vec<OwnedEvent>,
    corrupt: Vec<CorruptRow>,
    /// The events' text and jsonb varlenas, each 4-byte aligned (offsets, not pointers: the
    /// vector grows while the batch fills).
    arena: Vec<u8>,
    corrupt_bytes: usize,
}

/// A returned batch whose arena grew beyond this is dropped rather than kept for reuse.
const RECYCLE_MAX_BYTES: usize = 4 << 20;

impl Rows {
    fn len(&self) -> usize {
        self.events.len() + self.corrupt.len()
    }

    fn bytes(&self) -> usize {
        self.arena.len() + self.corrupt_bytes
    }

    fn clear(&mut self) {
        self.events.clear();
        self.corrupt.clear();
        self.arena.clear();
        self.corrupt_bytes = 0;
    }

    /// The whole varlena stored at `at`.
    fn varlena(&self, at: Option<u32>) -> Option<&[u8]> {
        let at = at? as usize;
        let header = self.arena.get(at..at + 4)?;
        let len = (u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) >> 2) as usize;
        self.arena.get(at..at + len)
    }

    /// A text column (for the SQL path).
    fn text(&self, e: &OwnedEvent, k: usize) -> Option<String> {
        self.varlena(e.texts[k]).map(|v| String::from_utf8_lossy(&v[4..]).into_owned())
    }

    /// A pointer datum into the arena, or NULL.
    fn datum(&self, at: Option<u32>) -> (pg_sys::Datum, bool) {
        match at {
            // SAFETY: `at` is inside the arena (set by `OwnedEvent::build`), which is not
            // touched until the insert that uses the datum has returned.
            Some(at) => (pg_sys::Datum::from(unsafe { self.arena.as_ptr().add(at as usize) }), false),
            None => (pg_sys::Datum::from(0), true),
        }
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The reading thread's sink: judged lines become rows (payloads become jsonb here too) and
/// are sent to the main thread a batch at a time. A closed channel (the main thread stopped on
/// an error) stops the reading.
struct ChannelSink {
    tx: std::sync::mpsc::SyncSender<Rows>,
    /// Batches the main thread has finished with.
    returned: std::sync::mpsc::Receiver<Rows>,
    rows: Rows,
    max_rows: usize,
    max_bytes: usize,
}

/// The main thread went away.
struct Stopped;

impl ChannelSink {
    fn maybe_send(&mut self) -> Result<(), Stopped> {
        if self.rows.len() >= self.max_rows || self.rows.bytes() >= self.max_bytes {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), Stopped> {
        if self.rows.len() > 0 {
            let mut next = self.returned.try_recv().unwrap_or_default();
            next.clear();
            self.tx.send(std::mem::replace(&mut self.rows, next)).map_err(|_| Stopped)?;
        }
        Ok(())
    }
}

impl Sink for ChannelSink {
    type Error = Stopped;

    fn event(&mut self, row: EventRow<'_>) -> Result<(), Stopped> {
        let event = OwnedEvent::build(row, &mut self.rows.arena);
        self.rows.events.push(event);
        self.maybe_send()
    }

    fn corrupt(&mut self, row: CorruptRow) -> Result<(), Stopped> {
        self.rows.corrupt_bytes += row.preview.len() + row.reason.len();
        self.rows.corrupt.push(row);
        self.maybe_send()
    }
}

fn opt<T>(v: &Option<T>, f: impl FnOnce(&T) -> pg_sys::Datum) -> (pg_sys::Datum, bool) {
    match v {
        Some(x) => (f(x), false),
        None => (pg_sys::Datum::from(0), true),
    }
}

fn timestamptz(unix_us: Option<i64>) -> Option<TimestampWithTimeZone> {
    let pg = unix_us?.checked_sub(POSTGRES_EPOCH_OFFSET_US)?;
    TimestampWithTimeZone::try_from(pg).ok()
}

/// Inserts batches on the main thread: straight into the heap and indexes when the table
/// allows it, else through SQL.
struct Inserter<'c, 'conn> {
    client: &'c mut SpiClient<'conn>,
    direct: Option<EventTable>,
    file_id: i64,
}

impl<'c, 'conn> Inserter<'c, 'conn> {
    fn new(client: &'c mut SpiClient<'conn>, file_id: i64, batch_rows: usize) -> Result<Self, CbError> {
        Ok(Inserter { direct: EventTable::open(batch_rows.max(1))?, client, file_id })
    }

    /// The most rows and bytes to send at a time: what one call inserts.
    fn batch_limits(&self, batch_rows: usize) -> (usize, usize) {
        match &self.direct {
            Some(table) => (batch_rows.min(table.rows_per_call()).max(1), DIRECT_BATCH_MAX_BYTES),
            None => (batch_rows.max(1), SQL_BATCH_MAX_BYTES),
        }
    }

    /// Inserts `rows`; everything allocated for it (datums, arrays, jsonb copies) goes into a
    /// memory context reset afterwards, so memory stays bounded by the batch.
    fn insert(&mut self, rows: &Rows) -> Result<(), CbError> {
        let mut context = PgMemoryContexts::new("cortex_buffer index batch");
        // SAFETY: the context outlives the closure; nothing allocated in it is used afterwards
        // (the SPI results of these INSERTs are not read).
        let result = unsafe { context.switch_to(|_| self.insert_in_context(rows)) };
        // SAFETY: no pointer into the context survives the closure.
        unsafe { context.reset() };
        result
    }

    fn insert_in_context(&mut self, rows: &Rows) -> Result<(), CbError> {
        if !rows.events.is_empty() {
            if let Some(table) = self.direct.as_mut() {
                let file_id = self.file_id;
                table.insert(rows.events.len(), |i| event_values(file_id, rows, &rows.events[i]));
            } else {
                insert_events_sql(self.client, self.file_id, rows)?;
            }
        }
        if !rows.corrupt.is_empty() {
            insert_corrupt_sql(self.client, self.file_id, &rows.corrupt)?;
        }
        Ok(())
    }
}

/// An event's values as datums, in `COLUMNS` order: numbers by value, everything else a
/// pointer into the batch's arena or the event itself.
fn event_values(file_id: i64, rows: &Rows, e: &OwnedEvent) -> RowValues {
    let c = &e.columns;
    [
        (pg_sys::Datum::from(file_id), false),
        (pg_sys::Datum::from(e.offset), false),
        (pg_sys::Datum::from(e.line_no), false),
        rows.datum(e.texts[TYPE]),
        opt(&timestamptz(c.ts_us), |t| pg_sys::Datum::from(t.into_inner())),
        opt(&c.job_id, |u| pg_sys::Datum::from(u.as_ptr())),
        rows.datum(e.texts[SESSION]),
        rows.datum(e.texts[AGENT]),
        opt(&c.seq, |v| pg_sys::Datum::from(*v)),
        opt(&c.step_index, |v| pg_sys::Datum::from(*v)),
        rows.datum(e.texts[INVOCATION]),
        rows.datum(e.texts[TOOL]),
        rows.datum(e.texts[CHECKPOINT]),
        opt(&c.success, |v| pg_sys::Datum::from(*v)),
        opt(&c.input_tokens, |v| pg_sys::Datum::from(*v)),
        opt(&c.output_tokens, |v| pg_sys::Datum::from(*v)),
        opt(&c.cache_write_tokens, |v| pg_sys::Datum::from(*v)),
        opt(&c.cache_read_tokens, |v| pg_sys::Datum::from(*v)),
        rows.datum(e.texts[REQUEST]),
        rows.datum(e.payload),
        rows.datum(e.texts[PROBLEM]),
    ]
}

/// The SQL path: one INSERT of unnested arrays (the arrays are unnested in the select list, in
/// lockstep; `FROM unnest(...)` would first materialise every row in a tuplestore).
fn insert_events_sql(client: &mut SpiClient<'_>, file_id: i64, rows: &Rows) -> Result<(), CbError> {
    let events = &rows.events;
    let int8 = oid(PgBuiltInOids::INT8ARRAYOID);
    let text = oid(PgBuiltInOids::TEXTARRAYOID);
    let stmt = statement(
        client,
        "buffer.insert_events",
        INSERT_EVENTS_SQL,
        &[
            oid(PgBuiltInOids::INT8OID),
            int8,
            int8,
            text,
            oid(PgBuiltInOids::TIMESTAMPTZARRAYOID),
            oid(PgBuiltInOids::UUIDARRAYOID),
            text,
            text,
            int8,
            oid(PgBuiltInOids::INT4ARRAYOID),
            text,
            text,
            text,
            oid(PgBuiltInOids::BOOLARRAYOID),
            int8,
            int8,
            int8,
            int8,
            text,
            oid(PgBuiltInOids::JSONBARRAYOID),
            text,
        ],
    )?;
    let col = |k: usize| -> Vec<Option<String>> { events.iter().map(|e| rows.text(e, k)).collect() };
    let num =
        |f: &dyn Fn(&Columns) -> Option<i64>| -> Vec<Option<i64>> { events.iter().map(|e| f(&e.columns)).collect() };
    let args = [
        file_id.into(),
        events.iter().map(|e| e.offset).collect::<Vec<i64>>().into(),
        events.iter().map(|e| e.line_no).collect::<Vec<i64>>().into(),
        col(TYPE).into(),
        events.iter().map(|e| timestamptz(e.columns.ts_us)).collect::<Vec<_>>().into(),
        events.iter().map(|e| e.columns.job_id.map(Uuid::from_bytes)).collect::<Vec<_>>().into(),
        col(SESSION).into(),
        col(AGENT).into(),
        num(&|c| c.seq).into(),
        events.iter().map(|e| e.columns.step_index).collect::<Vec<_>>().into(),
        col(INVOCATION).into(),
        col(TOOL).into(),
        col(CHECKPOINT).into(),
        events.iter().map(|e| e.columns.success).collect::<Vec<_>>().into(),
        num(&|c| c.input_tokens).into(),
        num(&|c| c.output_tokens).into(),
        num(&|c| c.cache_write_tokens).into(),
        num(&|c| c.cache_read_tokens).into(),
        col(REQUEST).into(),
        events
            .iter()
            .map(|e| rows.varlena(e.payload).map(RawJsonb::from_varlena))
            .collect::<Vec<Option<RawJsonb>>>()
            .into(),
        col(PROBLEM).into(),
    ];
    client.update(&*stmt, None, &args).map_err(spi)?;
    Ok(())
}

fn insert_corrupt_sql(client: &mut SpiClient<'_>, file_id: i64, rows: &[CorruptRow]) -> Result<(), CbError> {
    let stmt = statement(
        client,
        "buffer.insert_corrupt",
        INSERT_CORRUPT_SQL,
        &[
            oid(PgBuiltInOids::INT8OID),
            oid(PgBuiltInOids::INT8ARRAYOID),
            oid(PgBuiltInOids::INT8ARRAYOID),
            oid(PgBuiltInOids::TEXTARRAYOID),
            oid(PgBuiltInOids::TEXTARRAYOID),
        ],
    )?;
    let o: Vec<i64> = rows.iter().map(|r| i64_of(r.offset)).collect();
    let n: Vec<i64> = rows.iter().map(|r| i64_of(r.line_no)).collect();
    let p: Vec<String> = rows.iter().map(|r| r.preview.replace('\0', "\u{fffd}")).collect();
    let why: Vec<&str> = rows.iter().map(|r| r.reason.as_str()).collect();
    client.update(&*stmt, None, &[file_id.into(), o.into(), n.into(), p.into(), why.into()]).map_err(spi)?;
    Ok(())
}

/// Blocks every signal in the calling thread: Postgres' handlers must run on the backend's
/// own thread, never on a helper.
fn block_signals() {
    // SAFETY: plain libc calls on a local, fully initialised signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Reads and judges the file on a helper thread (pure Rust: no Postgres calls) while this
/// thread inserts the batches it sends, so parsing overlaps with inserting. Batches queue at
/// most `QUEUE_DEPTH` deep, keeping memory bounded.
fn read_and_insert(
    file: &File,
    progress: Progress,
    rules: &FileRules<'_>,
    inserter: &mut Inserter<'_, '_>,
    batch_rows: usize,
    path: &str,
) -> Result<Progress, CbError> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let (give_back, returned) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let (max_rows, max_bytes) = inserter.batch_limits(batch_rows);
        let reader = scope.spawn(move || {
            block_signals();
            let mut sink = ChannelSink { tx, returned, rows: Rows::default(), max_rows, max_bytes };
            let result = index_file(file, progress, rules, &mut sink);
            match result {
                Ok(p) => sink.send().map(|()| p).map_err(|Stopped| None),
                Err(IndexError::Read(e)) => Err(Some(e)),
                Err(IndexError::Sink(Stopped)) => Err(None),
            }
        });
        for rows in rx.iter() {
            inserter.insert(&rows)?;
            // Full (the reader has spares) or gone: this batch is simply freed.
            if rows.arena.capacity() <= RECYCLE_MAX_BYTES {
                let _ = give_back.try_send(rows);
            }
        }
        match reader.join() {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(Some(e))) => Err(io_error("read", path, &e)),
            Ok(Err(None)) => Err(CbError::internal("the indexing thread stopped early")),
            Err(_) => Err(CbError::internal("the indexing thread panicked")),
        }
    })
}

/// The claimed row: the index state and the integrity accumulated so far.
struct Claimed {
    state: IndexState,
    integrity: Integrity,
    gone: bool,
}

fn claim(client: &mut SpiClient<'_>, file_id: i64) -> Result<Option<Claimed>, CbError> {
    let stmt = statement(client, "buffer.claim", CLAIM_SQL, &[oid(PgBuiltInOids::INT8OID)])?;
    let rows = client.update(&*stmt, Some(1), &[file_id.into()]).map_err(spi)?;
    let Some(r) = rows.into_iter().next() else { return Ok(None) };
    let n = |i: usize| -> Result<Option<i64>, CbError> { r.get::<i64>(i).map_err(spi) };
    let b = |i: usize| -> Result<bool, CbError> { Ok(r.get::<bool>(i).map_err(spi)?.unwrap_or(false)) };
    let state = IndexState {
        offset: u64::try_from(n(1)?.unwrap_or(0)).unwrap_or(0),
        lines: u64::try_from(n(2)?.unwrap_or(0)).unwrap_or(0),
        generation: r.get::<i32>(3).map_err(spi)?.unwrap_or(0),
        device: from_i64(n(4)?.unwrap_or(0)),
        inode: from_i64(n(5)?.unwrap_or(0)),
        mtime_us: n(6)?.unwrap_or(0),
        fingerprint_len: u64::try_from(r.get::<i32>(7).map_err(spi)?.unwrap_or(0)).unwrap_or(0),
        fingerprint: u32::try_from(n(8)?.unwrap_or(0)).unwrap_or(0),
        dialect: r.get::<String>(9).map_err(spi)?.as_deref().and_then(Dialect::from_label),
        tail_unterminated: b(10)?,
        tail_pending: b(11)?,
        quarantined: b(12)?,
    };
    let integrity = Integrity {
        total_lines: n(13)?.unwrap_or(0),
        valid_lines: n(14)?.unwrap_or(0),
        corrupt_lines: n(15)?.unwrap_or(0),
        blank_lines: n(16)?.unwrap_or(0),
        last_failed_parse: b(17)?,
        last_seq: n(18)?,
        seq_gaps: n(19)?.unwrap_or(0),
        seq_first_missing: n(20)?,
        seq_resets: n(21)?.unwrap_or(0),
        first_ts_us: n(22)?,
        last_ts_us: n(23)?,
        session_start_seen: b(24)?,
        session_end_seen: b(25)?,
        schema_version: r.get::<String>(26).map_err(spi)?,
    };
    Ok(Some(Claimed { state, integrity, gone: b(27)? }))
}

fn crc_of_prefix(file: &File, len: u64) -> std::io::Result<u32> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let mut read = 0;
    while read < buf.len() {
        match file.read_at(&mut buf[read..], read as u64)? {
            0 => break,
            k => read += k,
        }
    }
    buf.truncate(read);
    Ok(crc32fast::hash(&buf))
}

fn delete_rows_from(client: &mut SpiClient<'_>, file_id: i64, from: u64) -> Result<(), CbError> {
    let args = [oid(PgBuiltInOids::INT8OID), oid(PgBuiltInOids::INT8OID)];
    let events = statement(
        client,
        "buffer.delete_events",
        "DELETE FROM cortex_buffer.event WHERE file_id = $1 AND byte_offset >= $2",
        &args,
    )?;
    client.update(&*events, None, &[file_id.into(), i64_of(from).into()]).map_err(spi)?;
    let corrupt = statement(
        client,
        "buffer.delete_corrupt",
        "DELETE FROM cortex_buffer.corrupt_line WHERE file_id = $1 AND byte_offset >= $2",
        &args,
    )?;
    client.update(&*corrupt, None, &[file_id.into(), i64_of(from).into()]).map_err(spi)?;
    Ok(())
}

fn io_error(action: &str, path: &str, e: &std::io::Error) -> CbError {
    CbError::io(action, path, e)
}

/// Indexes `file` in the current transaction. Errors leave the transaction to be rolled back
/// by the caller (who then records the failure with [`record_failure`]).
pub fn index_one(file: &FileRef, settings: &Settings, now_us: i64) -> Result<FileOutcome, CbError> {
    Spi::connect_mut(|client| {
        let Some(claimed) = claim(client, file.file_id)? else {
            return Ok(FileOutcome::Skipped("being indexed by another session".into()));
        };
        if claimed.gone {
            return Ok(FileOutcome::Skipped("gone".into()));
        }
        let handle = match open_regular(std::path::Path::new(&file.path)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(FileOutcome::Skipped("removed before it could be read".into()));
            }
            Err(e) => return Err(io_error("open", &file.path, &e)),
        };
        let meta = handle.metadata().map_err(|e| io_error("stat", &file.path, &e))?;
        let stat = FileStat::of(&meta);
        let old = claimed.state;
        let fingerprint = if old.generation > 0 && old.fingerprint_len > 0 && stat.size >= old.fingerprint_len {
            Some(crc_of_prefix(&handle, old.fingerprint_len).map_err(|e| io_error("read", &file.path, &e))?)
        } else {
            None
        };
        let work = decide(&old, &Now { stat, dialect: file.dialect, fingerprint });
        let (mut progress, generation, note) = match work {
            Work::Nothing => {
                return Ok(FileOutcome::Indexed {
                    state: IndexState { mtime_us: stat.mtime_us, ..old },
                    events: 0,
                    corrupt: 0,
                    note: None,
                });
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
        // Rows beyond the starting offset are never committed; a new generation replaces all.
        delete_rows_from(client, file.file_id, progress.offset)?;

        let settled = now_us.saturating_sub(stat.mtime_us) >= settings.settle_us;
        let rules = FileRules {
            dialect: file.dialect,
            job_dir: &file.job_dir,
            max_line_bytes: settings.max_line_bytes,
            settled,
        };
        let mut reader = &handle;
        reader.seek(SeekFrom::Start(progress.offset)).map_err(|e| io_error("seek", &file.path, &e))?;
        progress = {
            let mut inserter = Inserter::new(client, file.file_id, settings.batch_rows)?;
            read_and_insert(&handle, progress, &rules, &mut inserter, settings.batch_rows, &file.path)?
        };

        let fp_len = fingerprint_len(stat.size).max(if generation == old.generation { old.fingerprint_len } else { 0 });
        let fp_len = fp_len.min(stat.size);
        let fp = crc_of_prefix(&handle, fp_len).map_err(|e| io_error("read", &file.path, &e))?;
        let report = progress.integrity.report(settings.max_corruption_ratio, false);
        let i = &progress.integrity;
        let new_state = IndexState {
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
        let finish = statement(
            client,
            "buffer.finish",
            FINISH_SQL,
            &[
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT4OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT4OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT4OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::TEXTOID),
                oid(PgBuiltInOids::BOOLOID),
                oid(PgBuiltInOids::BOOLOID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::BOOLOID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::INT8OID),
                oid(PgBuiltInOids::BOOLOID),
                oid(PgBuiltInOids::BOOLOID),
                oid(PgBuiltInOids::TEXTOID),
                oid(PgBuiltInOids::BOOLOID),
            ],
        )?;
        let updated = client
            .update(
                &*finish,
                None,
                &[
                    file.file_id.into(),
                    i64_of(old.offset).into(),
                    old.generation.into(),
                    i64_of(new_state.offset).into(),
                    i64_of(new_state.lines).into(),
                    new_state.generation.into(),
                    to_i64(new_state.device).into(),
                    to_i64(new_state.inode).into(),
                    new_state.mtime_us.into(),
                    i32::try_from(new_state.fingerprint_len).unwrap_or(0).into(),
                    i64::from(new_state.fingerprint).into(),
                    new_state.dialect.map(|d| d.label()).into(),
                    new_state.tail_unterminated.into(),
                    new_state.tail_pending.into(),
                    i.total_lines.into(),
                    i.valid_lines.into(),
                    i.corrupt_lines.into(),
                    i.blank_lines.into(),
                    i.last_failed_parse.into(),
                    i.last_seq.into(),
                    i.seq_gaps.into(),
                    i.seq_first_missing.into(),
                    i.seq_resets.into(),
                    i.first_ts_us.into(),
                    i.last_ts_us.into(),
                    i.session_start_seen.into(),
                    i.session_end_seen.into(),
                    i.schema_version.clone().into(),
                    report.trusted.into(),
                ],
            )
            .map_err(spi)?;
        if updated.len() != 1 {
            // The row is locked by us, so this means a bug; never commit rows without offset.
            return Err(CbError::internal(format!(
                "offset of {} moved under the lock (expected {} in generation {})",
                file.path, old.offset, old.generation
            )));
        }
        Ok(FileOutcome::Indexed {
            state: new_state,
            events: progress.events_added,
            corrupt: progress.corrupt_added,
            note,
        })
    })
}

/// Counts a failed attempt in its own (sub)transaction; quarantines the file after
/// `quarantine_after` consecutive failures. Returns whether it is now quarantined.
pub fn record_failure(file_id: i64, error: &str, quarantine_after: i32) -> Result<bool, CbError> {
    Spi::connect_mut(|client| {
        let rows = client
            .update(
                "UPDATE cortex_buffer.session_file
                    SET failures = failures + 1, last_error = $2, last_error_at = now(),
                        quarantined_at = CASE WHEN failures + 1 >= $3 THEN coalesce(quarantined_at, now()) END
                  WHERE file_id = $1
              RETURNING quarantined_at IS NOT NULL",
                Some(1),
                &[file_id.into(), error.into(), quarantine_after.into()],
            )
            .map_err(spi)?;
        Ok(rows.into_iter().next().and_then(|r| r.get::<bool>(1).ok().flatten()).unwrap_or(false))
    })
}
