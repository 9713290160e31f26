//! What recovery reads from the index, through SPI, in the caller's rights: a job's session
//! files, the few lookups of the decision tree (each an index probe), and events in file order,
//! a page at a time. Every statement is schema-qualified and runs with `search_path` pinned
//! and sequential scans off (`planner::with_index_scans`, set by the callers).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::spi::{SpiClient, SpiHeapTupleData, SpiTupleTable};
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::pg::raw_rows::{self, RawRow};
use crate::pg::spi_util::{prepared_read, spi};
use crate::pg::time::{timestamptz, unix_us};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::int::bits_u64;
use cortex_buffer_core::recovery::choose::{LoadedAt, MarkerAt, Probe, Replaced, SessionFile};
use cortex_buffer_core::recovery::keys::relative_to_job_dir;
use cortex_buffer_core::recovery::line::{facts_text, MarkerKind, Row, LOADED_TYPE, MARKER_TYPES, TOOL_TYPES};
use cortex_buffer_core::recovery::session_id::{Match, MAX_LISTED};

pub const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);
pub const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
pub const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
pub const TEXT_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);
pub const INT8_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
pub const TIMESTAMPTZ: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIMESTAMPTZOID);

/// Event types that start a tool call (a Claude Code `assistant` line may).
const CALL_START_TYPES: [&str; 3] = ["TOOL_START", "TOOL_CALL", "assistant"];

/// Events read per page: memory follows the page, not the file.
pub const PAGE_ROWS: i64 = 500;

/// The `session_file` columns a plan reports, in this order.
pub const FILE_COLUMNS: &str = "file_id, path, job_dir, dialect, generation, session_ordinal, size_bytes, indexed_offset,
       total_lines, valid_lines, corrupt_lines, corruption_ratio, tail_state, tail_pending, seq_gaps, seq_resets,
       foreign_job_lines, trusted, gone_at IS NOT NULL AS gone, quarantined_at IS NOT NULL AS quarantined, indexed_lines,
       device, inode, mtime, last_ts, crash_cut_lines, replaced_at, replaced_device, replaced_inode, replaced_size,
       fingerprint_len, fingerprint";

/// The filter that keeps a job's recovery to its own lines: a line that names another job than
/// its directory's (`foreign_job_lines`) is counted by integrity but never taken as this job's
/// marker, call or result. `$file` is the SQL for the line's file id.
macro_rules! own_lines {
    ($file:literal) => {
        concat!(
            " AND (job_id IS NULL OR COALESCE(job_id OPERATOR(pg_catalog.=) (SELECT f.job_id FROM cortex_buffer.session_file f WHERE f.file_id OPERATOR(pg_catalog.=) ",
            $file,
            "), true))"
        )
    };
}

/// `own_lines!` for statements whose `$1` is the one file read.
pub const OWN_LINES: &str = own_lines!("$1");

// The lookups, as statements (a #[pg_test] EXPLAINs each: none scans `event` sequentially).
pub const LAST_MARKER_SQL: &str = concat!(
    "SELECT byte_offset, line_no, type, checkpoint_id, seq, ts FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND type OPERATOR(pg_catalog.=) ANY ($2)
                  ORDER BY byte_offset DESC LIMIT 1"
);

pub const FIRST_LOADED_SQL: &str = concat!(
    "SELECT byte_offset, checkpoint_id FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND type OPERATOR(pg_catalog.=) ANY ($2)
                  ORDER BY byte_offset LIMIT 1"
);

pub const TOOL_BEFORE_SQL: &str = concat!(
    "SELECT 1 FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<) $2
                    AND type OPERATOR(pg_catalog.=) ANY ($3) LIMIT 1"
);

pub const LAST_BEFORE_SQL: &str = concat!(
    "SELECT byte_offset FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND ts OPERATOR(pg_catalog.<) $2
                  ORDER BY byte_offset DESC LIMIT 1"
);

pub const LAST_CALL_BEFORE_SQL: &str = concat!(
    "SELECT byte_offset FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<) $2
                    AND type OPERATOR(pg_catalog.=) ANY ($3)
                  ORDER BY byte_offset DESC LIMIT 1"
);

pub const LAST_EVENT_BEFORE_SQL: &str = concat!(
    "SELECT byte_offset FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<) $2
                  ORDER BY byte_offset DESC LIMIT 1"
);

pub const WRITER_START_SQL: &str = concat!(
    "SELECT byte_offset FROM cortex_buffer.event
                  WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<=) $2
                    AND seq OPERATOR(pg_catalog.=) 0
                  ORDER BY byte_offset DESC LIMIT 1"
);

/// `Probe::read_across_start` in one statement: the last call started before `$2` (of the
/// start types `$3`), the start of the writer that went past it, and the start of the writer
/// before that one (each an index probe backwards from the previous one). Without a call, the
/// probes after it find nothing and the answer is 0, as the stepwise lookups give.
pub const READ_ACROSS_START_SQL: &str = concat!(
    "SELECT COALESCE((SELECT byte_offset FROM cortex_buffer.event
                       WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<=) (w.went_past OPERATOR(pg_catalog.-) 1)
                         AND seq OPERATOR(pg_catalog.=) 0
                       ORDER BY byte_offset DESC LIMIT 1), 0)
       FROM (SELECT COALESCE((SELECT byte_offset FROM cortex_buffer.event
                               WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<=) c.call
                                 AND seq OPERATOR(pg_catalog.=) 0
                               ORDER BY byte_offset DESC LIMIT 1), 0) AS went_past
               FROM (SELECT (SELECT byte_offset FROM cortex_buffer.event
                              WHERE file_id OPERATOR(pg_catalog.=) $1",
    own_lines!("$1"),
    " AND byte_offset OPERATOR(pg_catalog.<) $2
                                AND type OPERATOR(pg_catalog.=) ANY ($3)
                              ORDER BY byte_offset DESC LIMIT 1) AS call) c) w"
);

pub const STARTED_BEFORE_SQL: &str = concat!(
    "SELECT 1 FROM cortex_buffer.event
              WHERE invocation_id OPERATOR(pg_catalog.=) $1
                AND ((file_id OPERATOR(pg_catalog.=) $2 AND byte_offset OPERATOR(pg_catalog.<) $3)
                     OR file_id OPERATOR(pg_catalog.=) ANY ($4))
",
    own_lines!("event.file_id"),
    " LIMIT 1"
);

pub const CHECKPOINT_TIME_SQL: &str = "SELECT created_at FROM cortex_buffer.checkpoint_history
              WHERE job_id OPERATOR(pg_catalog.=) $1 AND checkpoint_id OPERATOR(pg_catalog.=) $2
              ORDER BY history_id DESC LIMIT 1";

/// A `session_file` row as recovery sees it.
pub fn session_file(row: &SpiHeapTupleData<'_>) -> Result<(SessionFile, i64), CbError> {
    let g = |i: usize| row.get::<i64>(i).map_err(spi).map(Option::unwrap_or_default);
    let path: String = row.get(2).map_err(spi)?.unwrap_or_default();
    let job_dir: String = row.get(3).map_err(spi)?.unwrap_or_default();
    let file = SessionFile {
        file_id: g(1)?,
        rel_path: relative_to_job_dir(&path, &job_dir).to_owned(),
        path,
        dialect: row.get::<String>(4).map_err(spi)?.as_deref().and_then(Dialect::from_label),
        generation: row.get::<i32>(5).map_err(spi)?.unwrap_or(0),
        session_ordinal: row.get(6).map_err(spi)?,
        size_bytes: g(7)?,
        indexed_offset: g(8)?,
        total_lines: g(9)?,
        valid_lines: g(10)?,
        corrupt_lines: g(11)?,
        corruption_ratio: row.get::<f64>(12).map_err(spi)?.unwrap_or(0.0),
        tail_state: row.get::<String>(13).map_err(spi)?.unwrap_or_default(),
        tail_pending: row.get::<bool>(14).map_err(spi)?.unwrap_or(false),
        seq_gaps: g(15)?,
        seq_resets: g(16)?,
        foreign_job_lines: g(17)?,
        trusted: row.get::<bool>(18).map_err(spi)?.unwrap_or(false),
        gone: row.get::<bool>(19).map_err(spi)?.unwrap_or(false),
        quarantined: row.get::<bool>(20).map_err(spi)?.unwrap_or(false),
        device: bits_u64(g(22)?),
        inode: bits_u64(g(23)?),
        mtime_us: unix_us(row.get(24).map_err(spi)?),
        last_ts_us: unix_us(row.get(25).map_err(spi)?),
        crash_cut_lines: g(26)?,
        replaced: unix_us(row.get(27).map_err(spi)?).map(|at_us| Replaced {
            at_us,
            device: bits_u64(row.get::<i64>(28).ok().flatten().unwrap_or(0)),
            inode: bits_u64(row.get::<i64>(29).ok().flatten().unwrap_or(0)),
            size: row.get::<i64>(30).ok().flatten().unwrap_or(0),
        }),
        pushed: None,
    };
    Ok((file, g(21)?))
}

/// The index's fingerprint of a file: its first bytes' length and CRC-32.
pub type Fingerprint = (i64, u32);

/// The index's own fingerprint of a `session_file` row read with [`FILE_COLUMNS`].
pub fn index_fingerprint(row: &SpiHeapTupleData<'_>) -> Result<Fingerprint, CbError> {
    let len = row.get::<i32>(31).map_err(spi)?.map_or(0, i64::from);
    let crc = row.get::<i64>(32).map_err(spi)?.and_then(|c| u32::try_from(c).ok()).unwrap_or(0);
    Ok((len, crc))
}

pub fn job_files_sql() -> String {
    format!(
        "SELECT {FILE_COLUMNS} FROM cortex_buffer.session_file
          WHERE job_id OPERATOR(pg_catalog.=) $1
            AND (dialect IS NULL OR dialect OPERATOR(pg_catalog.=) ANY ('{{cortex-spike,cortex-plane}}'::pg_catalog.text[]))
          ORDER BY session_ordinal NULLS FIRST, first_seen, path COLLATE \"C\""
    )
}

/// The job's session files of the cortex dialects (or not identified yet), in
/// `(session_ordinal, first_seen, path)` order: files of the same ordinal (a pod rescheduled to
/// another node starts at session-001 again, and pushes it) in the order they appeared. With
/// each, the index's fingerprint of its first bytes.
pub fn job_files(client: &SpiClient<'_>, job: Uuid) -> Result<Vec<(SessionFile, Fingerprint)>, CbError> {
    let stmt = prepared_read(client, "recovery.job_files", job_files_sql, &[UUID])?;
    let rows = client.select(&*stmt, None, &[job.into()]).map_err(spi)?;
    rows.into_iter().map(|r| Ok((session_file(&r)?.0, index_fingerprint(&r)?))).collect()
}

/// The `session_file` row of `path`, with its indexed line count.
pub fn file_at(client: &SpiClient<'_>, path: &str) -> Result<Option<(SessionFile, i64)>, CbError> {
    let stmt = prepared_read(
        client,
        "recovery.file_at",
        || format!("SELECT {FILE_COLUMNS} FROM cortex_buffer.session_file WHERE path OPERATOR(pg_catalog.=) $1"),
        &[TEXT],
    )?;
    let rows = client.select(&*stmt, Some(1), &[path.into()]).map_err(spi)?;
    rows.into_iter().next().map(|r| session_file(&r)).transpose()
}

/// The files named `<id>.jsonl` (`$1`), through `session_file_name_idx` (the same expression),
/// below the prefix `$2` when it is not NULL (an agent's own job directory), in path order; one
/// more than `session_id::MAX_LISTED`, so an ambiguity can say there are more.
pub fn transcript_paths_sql() -> String {
    format!(
        "SELECT path, gone_at IS NOT NULL FROM cortex_buffer.session_file
          WHERE pg_catalog.right(path, 43) OPERATOR(pg_catalog.=) ('/' OPERATOR(pg_catalog.||) $1 OPERATOR(pg_catalog.||) '.jsonl')
            AND ($2::pg_catalog.text IS NULL OR pg_catalog.starts_with(path, $2))
          ORDER BY path LIMIT {}",
        MAX_LISTED + 1
    )
}

/// The files that may be the Claude Code transcript of session `id` (`<dir>/<id>.jsonl`), below
/// `prefix` when given.
pub fn transcript_paths(client: &SpiClient<'_>, id: Uuid, prefix: Option<&str>) -> Result<Vec<Match>, CbError> {
    let stmt = prepared_read(client, "recovery.transcript_paths", transcript_paths_sql, &[TEXT, TEXT])?;
    let rows = client.select(&*stmt, None, &[id.to_string().into(), prefix.into()]).map_err(spi)?;
    let mut out = Vec::new();
    for r in rows {
        let Some(path) = r.get::<String>(1).map_err(spi)? else { continue };
        out.push(Match { path, gone: r.get::<bool>(2).map_err(spi)?.unwrap_or(false) });
    }
    Ok(out)
}

/// One event as read: owned, so a page can be dropped before the next is read.
#[derive(Debug, Clone, Default)]
pub struct OwnedRow {
    pub byte_offset: i64,
    pub line_no: i64,
    pub event_type: Option<String>,
    pub ts_us: Option<i64>,
    pub seq: Option<i64>,
    pub invocation_id: Option<String>,
    pub tool_name: Option<String>,
    pub checkpoint_id: Option<String>,
    pub step_index: Option<i32>,
    pub success: Option<bool>,
    pub request_id: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub payload: Option<String>,
}

impl OwnedRow {
    pub fn view(&self, session: usize) -> Row<'_> {
        Row {
            session,
            byte_offset: self.byte_offset,
            line_no: self.line_no,
            event_type: self.event_type.as_deref(),
            ts_us: self.ts_us,
            seq: self.seq,
            invocation_id: self.invocation_id.as_deref(),
            tool_name: self.tool_name.as_deref(),
            checkpoint_id: self.checkpoint_id.as_deref(),
            step_index: self.step_index,
            success: self.success,
            request_id: self.request_id.as_deref(),
            payload: self.payload.as_deref(),
        }
    }

    /// The columns' types, in `EVENT_COLUMNS` order, and the payload's text last.
    const TYPES: [pg_sys::Oid; 16] = [
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::TEXTOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::INT8OID,
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::INT4OID,
        pg_sys::BOOLOID,
        pg_sys::TEXTOID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::TEXTOID,
    ];

    fn read(r: &RawRow) -> OwnedRow {
        OwnedRow {
            byte_offset: r.int8(1).unwrap_or(0),
            line_no: r.int8(2).unwrap_or(0),
            event_type: r.text(3),
            ts_us: r.timestamptz_us(4),
            seq: r.int8(5),
            invocation_id: r.text(6),
            tool_name: r.text(7),
            checkpoint_id: r.text(8),
            step_index: r.int4(9),
            success: r.bool(10),
            request_id: r.text(11),
            input_tokens: r.int8(12),
            output_tokens: r.int8(13),
            cache_write_tokens: r.int8(14),
            cache_read_tokens: r.int8(15),
            payload: None,
        }
    }

    /// Every row of the events result `table` (right after its `select`), the payload as
    /// `payload` asked for it.
    fn read_all(table: &SpiTupleTable<'_>, payload: Payload) -> Result<Vec<OwnedRow>, CbError> {
        match payload {
            Payload::Facts(dialect) => {
                let mut types = Self::TYPES;
                types[15] = pg_sys::JSONBOID;
                raw_rows::rows(table, &types, |r| OwnedRow {
                    // A payload the printer cannot read (never expected from PostgreSQL) is
                    // one the index does not hold: the call is verified, not guessed.
                    payload: r.varlena(16, |bytes| facts_text(dialect, bytes).ok()).flatten(),
                    ..OwnedRow::read(r)
                })
            }
            _ => raw_rows::rows(table, &Self::TYPES, |r| OwnedRow { payload: r.text(16), ..OwnedRow::read(r) }),
        }
    }
}

/// What of an event's payload a reader needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// The line, for the types listed (tool events, Claude Code user/assistant lines).
    For(&'static [&'static str]),
    /// A small object with what usage counting reads (`message.{id,model,usage}`, `model`,
    /// `data.{model,tokenUsage}`), for every event.
    Usage,
    /// What line pairing reads of each tool event's line in a file of this dialect
    /// (`line::facts_text`), printed from the stored `jsonb` (for [`PAIRING_TYPES`]).
    Facts(Dialect),
}

/// Event types whose line pairing reads.
pub const PAIRING_TYPES: [&str; 5] = ["TOOL_START", "TOOL_CALL", "TOOL_RESULT", "assistant", "user"];

const EVENT_COLUMNS: &str = "byte_offset, line_no, type, ts, seq, invocation_id, tool_name, checkpoint_id, step_index,
       success, request_id, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens";

/// A page of a file's events from an offset, with the payload as `payload` says.
pub fn events_sql(payload: Payload) -> String {
    let payload_sql = match payload {
        Payload::For(_) => "CASE WHEN type OPERATOR(pg_catalog.=) ANY ($4) THEN payload::pg_catalog.text END",
        Payload::Facts(_) => "CASE WHEN type OPERATOR(pg_catalog.=) ANY ($4) THEN payload END",
        Payload::Usage => {
            "pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                'model', payload OPERATOR(pg_catalog.->) 'model',
                'message', pg_catalog.jsonb_build_object(
                    'id', payload OPERATOR(pg_catalog.#>) '{message,id}',
                    'model', payload OPERATOR(pg_catalog.#>) '{message,model}',
                    'usage', payload OPERATOR(pg_catalog.#>) '{message,usage}'),
                'data', pg_catalog.jsonb_build_object(
                    'model', payload OPERATOR(pg_catalog.#>) '{data,model}',
                    'tokenUsage', payload OPERATOR(pg_catalog.#>) '{data,tokenUsage}')))::pg_catalog.text"
        }
    };
    format!(
        "SELECT {EVENT_COLUMNS}, {payload_sql} FROM cortex_buffer.event
          WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.>=) $2{OWN_LINES}
          ORDER BY byte_offset LIMIT $3"
    )
}

/// One page (`PAGE_ROWS` at most) of `file_id`'s events from `from_offset` (inclusive).
pub fn events_page(
    client: &SpiClient<'_>,
    file_id: i64,
    from_offset: i64,
    payload: Payload,
) -> Result<Vec<OwnedRow>, CbError> {
    let key = match payload {
        Payload::For(_) => "recovery.events",
        Payload::Usage => "recovery.events.usage",
        Payload::Facts(_) => "recovery.events.facts",
    };
    let stmt = prepared_read(client, key, || events_sql(payload), &[INT8, INT8, INT8, TEXT_ARRAY])?;
    let types: Vec<String> = match payload {
        Payload::For(t) => t.iter().map(|s| (*s).to_owned()).collect(),
        Payload::Facts(_) => PAIRING_TYPES.iter().map(|s| (*s).to_owned()).collect(),
        Payload::Usage => Vec::new(),
    };
    let rows = client
        .select(&*stmt, None, &[file_id.into(), from_offset.into(), PAGE_ROWS.into(), types.into()])
        .map_err(spi)?;
    OwnedRow::read_all(&rows, payload)
}

/// Calls `f` with each event of `file_id` from `from_offset` (inclusive) in file order, reading
/// `PAGE_ROWS` at a time; `f` returns false to stop.
pub fn for_each_event(
    client: &SpiClient<'_>,
    file_id: i64,
    from_offset: i64,
    payload: Payload,
    mut f: impl FnMut(&OwnedRow) -> Result<bool, CbError>,
) -> Result<(), CbError> {
    let mut from = from_offset;
    loop {
        let page = events_page(client, file_id, from, payload)?;
        for row in &page {
            from = row.byte_offset.saturating_add(1);
            if !f(row)? {
                return Ok(());
            }
        }
        if (page.len() as i64) < PAGE_ROWS {
            return Ok(());
        }
    }
}

pub fn events_before_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS}, CASE WHEN type OPERATOR(pg_catalog.=) ANY ($4) THEN payload::pg_catalog.text END
           FROM cortex_buffer.event
          WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.<) $2{OWN_LINES}
          ORDER BY byte_offset DESC LIMIT $3"
    )
}

/// The last `n` events of `file_id` before `before` (exclusive), newest first.
pub fn events_before(
    client: &SpiClient<'_>,
    file_id: i64,
    before: i64,
    n: i64,
    payload_types: &[&str],
) -> Result<Vec<OwnedRow>, CbError> {
    let stmt = prepared_read(client, "recovery.events_before", events_before_sql, &[INT8, INT8, INT8, TEXT_ARRAY])?;
    let types: Vec<String> = payload_types.iter().map(|s| (*s).to_owned()).collect();
    let rows = client.select(&*stmt, None, &[file_id.into(), before.into(), n.into(), types.into()]).map_err(spi)?;
    OwnedRow::read_all(&rows, Payload::For(&[]))
}

/// The decision tree's lookups for a job's files.
pub struct IndexProbe<'a, 'c> {
    pub client: &'a SpiClient<'c>,
    pub file_ids: Vec<i64>,
}

fn text_array(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Probe for IndexProbe<'_, '_> {
    fn last_marker(&mut self, session: usize) -> Result<Option<MarkerAt>, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(None) };
        let stmt =
            prepared_read(self.client, "recovery.last_marker", || LAST_MARKER_SQL.to_owned(), &[INT8, TEXT_ARRAY])?;
        let rows =
            self.client.select(&*stmt, Some(1), &[file_id.into(), text_array(&MARKER_TYPES).into()]).map_err(spi)?;
        let Some(r) = rows.into_iter().next() else { return Ok(None) };
        let kind = r.get::<String>(3).map_err(spi)?.as_deref().and_then(MarkerKind::of);
        kind.map(|kind| -> Result<MarkerAt, CbError> {
            Ok(MarkerAt {
                kind,
                checkpoint_id: r.get(4).map_err(spi)?,
                byte_offset: r.get::<i64>(1).map_err(spi)?.unwrap_or(0),
                line_no: r.get::<i64>(2).map_err(spi)?.unwrap_or(0),
                seq: r.get(5).map_err(spi)?,
                ts_us: unix_us(r.get::<TimestampWithTimeZone>(6).map_err(spi)?),
            })
        })
        .transpose()
    }

    fn first_loaded(&mut self, session: usize) -> Result<Option<LoadedAt>, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(None) };
        let stmt =
            prepared_read(self.client, "recovery.first_loaded", || FIRST_LOADED_SQL.to_owned(), &[INT8, TEXT_ARRAY])?;
        let rows =
            self.client.select(&*stmt, Some(1), &[file_id.into(), vec![LOADED_TYPE.to_owned()].into()]).map_err(spi)?;
        rows.into_iter()
            .next()
            .map(|r| {
                Ok(LoadedAt {
                    byte_offset: r.get::<i64>(1).map_err(spi)?.unwrap_or(0),
                    checkpoint_id: r.get(2).map_err(spi)?,
                })
            })
            .transpose()
    }

    fn tool_event_before(&mut self, session: usize, offset: i64) -> Result<bool, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(false) };
        let stmt = prepared_read(
            self.client,
            "recovery.tool_before",
            || TOOL_BEFORE_SQL.to_owned(),
            &[INT8, INT8, TEXT_ARRAY],
        )?;
        let rows = self
            .client
            .select(&*stmt, Some(1), &[file_id.into(), offset.into(), text_array(&TOOL_TYPES).into()])
            .map_err(spi)?;
        Ok(!rows.is_empty())
    }

    fn writer_start(&mut self, session: usize, offset: i64) -> Result<i64, CbError> {
        self.writer_start_at(session, offset)
    }

    fn last_call_before(&mut self, session: usize, offset: i64) -> Result<Option<i64>, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(None) };
        let stmt = prepared_read(
            self.client,
            "recovery.last_call_before",
            || LAST_CALL_BEFORE_SQL.to_owned(),
            &[INT8, INT8, TEXT_ARRAY],
        )?;
        let starts = text_array(&CALL_START_TYPES);
        let rows = self.client.select(&*stmt, Some(1), &[file_id.into(), offset.into(), starts.into()]).map_err(spi)?;
        rows.into_iter().next().map(|r| r.get::<i64>(1).map_err(spi)).transpose().map(Option::flatten)
    }

    fn read_across_start(&mut self, session: usize, anchor_at: i64) -> Result<i64, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(0) };
        let stmt = prepared_read(
            self.client,
            "recovery.read_across_start",
            || READ_ACROSS_START_SQL.to_owned(),
            &[INT8, INT8, TEXT_ARRAY],
        )?;
        let starts = text_array(&CALL_START_TYPES);
        let rows =
            self.client.select(&*stmt, Some(1), &[file_id.into(), anchor_at.into(), starts.into()]).map_err(spi)?;
        Ok(rows.into_iter().next().map(|r| r.get::<i64>(1).map_err(spi)).transpose()?.flatten().unwrap_or(0))
    }

    fn last_offset_before(&mut self, session: usize, since_us: i64) -> Result<Option<i64>, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(None) };
        let stmt =
            prepared_read(self.client, "recovery.last_before", || LAST_BEFORE_SQL.to_owned(), &[INT8, TIMESTAMPTZ])?;
        let rows =
            self.client.select(&*stmt, Some(1), &[file_id.into(), timestamptz(Some(since_us)).into()]).map_err(spi)?;
        rows.into_iter().next().map(|r| r.get::<i64>(1).map_err(spi)).transpose().map(Option::flatten)
    }
}

impl IndexProbe<'_, '_> {
    /// Where the session's last event before `offset` is.
    pub fn last_event_before(&mut self, session: usize, offset: i64) -> Result<Option<i64>, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(None) };
        let stmt = prepared_read(
            self.client,
            "recovery.last_event_before",
            || LAST_EVENT_BEFORE_SQL.to_owned(),
            &[INT8, INT8],
        )?;
        let rows = self.client.select(&*stmt, Some(1), &[file_id.into(), offset.into()]).map_err(spi)?;
        rows.into_iter().next().map(|r| r.get::<i64>(1).map_err(spi)).transpose().map(Option::flatten)
    }

    fn writer_start_at(&mut self, session: usize, offset: i64) -> Result<i64, CbError> {
        let Some(&file_id) = self.file_ids.get(session) else { return Ok(0) };
        let stmt = prepared_read(self.client, "recovery.writer_start", || WRITER_START_SQL.to_owned(), &[INT8, INT8])?;
        let rows = self.client.select(&*stmt, Some(1), &[file_id.into(), offset.into()]).map_err(spi)?;
        Ok(rows.into_iter().next().map(|r| r.get::<i64>(1).map_err(spi)).transpose()?.flatten().unwrap_or(0))
    }
}

/// Whether a call with this id started in the job's files before the marker: in `earlier`
/// files, or in the marker's file before its offset.
pub fn started_before(
    client: &SpiClient<'_>,
    id: &str,
    marker_file: i64,
    marker_offset: i64,
    earlier: &[i64],
) -> Result<bool, CbError> {
    let stmt = prepared_read(
        client,
        "recovery.started_before",
        || STARTED_BEFORE_SQL.to_owned(),
        &[TEXT, INT8, INT8, INT8_ARRAY],
    )?;
    let rows = client
        .select(&*stmt, Some(1), &[id.into(), marker_file.into(), marker_offset.into(), earlier.to_vec().into()])
        .map_err(spi)?;
    Ok(!rows.is_empty())
}

/// When the job's checkpoint `checkpoint_id` was written, from `checkpoint_history`.
pub fn checkpoint_written_at(client: &SpiClient<'_>, job: Uuid, checkpoint_id: Uuid) -> Result<Option<i64>, CbError> {
    let stmt = prepared_read(client, "recovery.checkpoint_time", || CHECKPOINT_TIME_SQL.to_owned(), &[UUID, UUID])?;
    let rows = client.select(&*stmt, Some(1), &[job.into(), checkpoint_id.into()]).map_err(spi)?;
    Ok(rows
        .into_iter()
        .next()
        .map(|r| r.get::<TimestampWithTimeZone>(1).map_err(spi))
        .transpose()?
        .flatten()
        .and_then(|t| unix_us(Some(t))))
}
