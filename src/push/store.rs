//! The statements of push ingestion, as `cortex_buffer_definer`: lock (or start) the files a
//! batch of pushes continues, under the row lock the indexer takes on `session_file`; record each
//! file's new offset, its held tail and the shipper's report, in the caller's transaction, so
//! rows and offset commit together. The rules of one push are `apply`'s.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use crate::indexer::event_store::StreamItem;
use crate::indexer::file_row::{self, AlsoRecordMany, Claimed, Finish};
use crate::indexer::settings::Settings;
use crate::pg::spi_util::{prepared, prepared_read, spi};
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::indexer::discovery::Layout;
use cortex_buffer_core::indexer::index_file::{FileRules, Progress};
use cortex_buffer_core::indexer::index_plan::IndexState;
use cortex_buffer_core::indexer::lines::Resume;
use cortex_buffer_core::int::count_i64;
use cortex_buffer_core::push::{held_after, held_write, identity_number, keep_whole, Held, HeldWrite, Stream};
use cortex_buffer_core::recovery::choose::PushedReport;

/// One call of `append_session_bytes`, checked.
pub struct Push<'a> {
    pub source: &'a str,
    pub job: Uuid,
    pub job_dir: String,
    pub relpath: &'a str,
    pub file_name: String,
    pub layout: Layout,
    pub start: u64,
    pub chunk: &'a [u8],
    pub identity: &'a str,
    pub last: bool,
    pub file_size: Option<u64>,
}

/// What a push did: `append_session_bytes`'s row.
pub struct Outcome {
    pub committed: i64,
    pub events: i64,
    pub corrupt: i64,
    pub action: &'static str,
}

impl Outcome {
    /// A push that indexed nothing, with the file committed to `committed`.
    pub(super) fn nothing(committed: u64, action: &'static str) -> Outcome {
        Outcome { committed: count_i64(committed), events: 0, corrupt: 0, action }
    }
}

/// A pushed file as locked.
pub(super) struct Pushed {
    pub(super) file_id: i64,
    pub(super) dialect_decided: bool,
    pub(super) dialect: Option<Dialect>,
    pub(super) head: Vec<u8>,
    /// The head grew in this push (it is written only then).
    pub(super) head_changed: bool,
    pub(super) held: Held,
    /// Where the stored pieces of the held tail start (`pushed_held`), as read.
    pub(super) pieces: Vec<u64>,
    /// The write of the held tail, when this push changed it without indexing.
    pub(super) write: Option<HeldWrite>,
    /// Its `session_file` row as a claim reads it (the push holds the row's lock).
    pub(super) claimed: Claimed,
}

impl Pushed {
    pub(super) fn committed(&self) -> u64 {
        self.claimed.state.offset
    }

    /// Holds `held` from now on (nothing consumed), to be written with the file's record.
    pub(super) fn hold(&mut self, held: Held) {
        self.write = Some(held_write(&self.held, &self.pieces, &held, 0));
        self.held = held;
    }
}

const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
const INT8_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
const UUID: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDOID);

/// The latest file of a job, relpath and identity (given as SQL expressions), both its rows
/// locked, with what a claim of its `session_file` row reads (one statement for both). The held
/// tail's bytes are read after it, by [`read_held`].
pub(super) fn lock_select(job: &str, relpath: &str, identity: &str) -> String {
    format!(
        "SELECT p.file_id, p.dialect_decided, f.dialect, p.head, p.held_len, p.held_reduction, {}
           FROM cortex_buffer.pushed_file p
           JOIN cortex_buffer.session_file f ON f.file_id OPERATOR(pg_catalog.=) p.file_id
          WHERE p.job_id OPERATOR(pg_catalog.=) {job} AND p.relpath OPERATOR(pg_catalog.=) {relpath}
            AND p.identity OPERATOR(pg_catalog.=) {identity}
          ORDER BY p.n DESC LIMIT 1
            FOR UPDATE OF f, p",
        file_row::claim_columns("f")
    )
}

/// The advisory lock key of a job and relpath (given as SQL expressions, the job as text).
pub(super) fn create_lock_key(job: &str, relpath: &str) -> String {
    format!(
        "pg_catalog.hashtextextended('cortex_buffer push ' OPERATOR(pg_catalog.||) {job}::pg_catalog.text
                                     OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) {relpath}, 0)"
    )
}

/// A locked file from a row holding [`lock_select`]'s columns, the first at ordinal `first`.
pub(super) fn pushed_from(
    r: &pgrx::spi::SpiHeapTupleData<'_>,
    ordinals: &file_row::Ordinals,
    first: usize,
) -> Result<Pushed, CbError> {
    let count = |v: Option<i64>| u64::try_from(v.unwrap_or(0)).unwrap_or(0);
    Ok(Pushed {
        file_id: r.get::<i64>(first).map_err(spi)?.unwrap_or(0),
        dialect_decided: r.get::<bool>(first + 1).map_err(spi)?.unwrap_or(false),
        dialect: r.get::<String>(first + 2).map_err(spi)?.as_deref().and_then(Dialect::from_label),
        head: r.get::<Vec<u8>>(first + 3).map_err(spi)?.unwrap_or_default(),
        head_changed: false,
        held: Held {
            bytes: Vec::new(),
            len: count(r.get::<i64>(first + 4).map_err(spi)?),
            reduction: r.get::<Vec<u8>>(first + 5).map_err(spi)?,
        },
        pieces: Vec::new(),
        write: None,
        claimed: file_row::claimed_from(r, ordinals)?,
    })
}

/// Reads the held tails of `files` (locked by the caller): their bytes and where their pieces
/// start. In a statement of its own, after the lock: a push that waited for another's row lock
/// reads the tail that one left (the locking statement re-reads only the locked rows, from its
/// older snapshot, so a tail read there could be the one before).
pub(super) fn read_held(client: &mut SpiClient<'_>, files: &mut [&mut Pushed]) -> Result<(), CbError> {
    // A file holding nothing has no pieces (its length and its pieces change in one statement):
    // the common push, which ends on a line's end, costs no read.
    let ids: Vec<i64> = files.iter().filter(|f| f.held.len > 0).map(|f| f.file_id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let stmt = prepared(client, "push.read_held", || READ_HELD_SQL.to_owned(), &[INT8_ARRAY])?;
    let rows = client.update(&*stmt, None, &[ids.into()]).map_err(spi)?;
    for r in rows {
        let id = r.get::<i64>(1).map_err(spi)?.unwrap_or(0);
        let Some(f) = files.iter_mut().find(|f| f.file_id == id) else { continue };
        f.held.bytes = r.get::<Vec<u8>>(2).map_err(spi)?.unwrap_or_default();
        f.pieces = r
            .get::<Vec<Option<i64>>>(3)
            .map_err(spi)?
            .unwrap_or_default()
            .into_iter()
            .map(|at| u64::try_from(at.unwrap_or(-1)).unwrap_or(u64::MAX))
            .collect();
    }
    for f in files.iter() {
        // Whole, or an over-long line's first bytes: never more than its length.
        if f.held.bytes.len() as u64 > f.held.len {
            return Err(CbError::internal(format!(
                "the held tail of pushed file {} has {} bytes stored for a length of {}",
                f.file_id,
                f.held.bytes.len(),
                f.held.len
            )));
        }
    }
    Ok(())
}

const READ_HELD_SQL: &str = "
    SELECT x.file_id, pg_catalog.string_agg(x.bytes, ''::pg_catalog.bytea ORDER BY x.at),
           pg_catalog.array_agg(x.at ORDER BY x.at)
      FROM cortex_buffer.pushed_held x
     WHERE x.file_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])
     GROUP BY x.file_id";

/// A file replaced by a rewrite will have no more bytes: its last report is what it has.
pub(super) fn settle_report(client: &mut SpiClient<'_>, file_id: i64) -> Result<(), CbError> {
    let stmt = prepared(
        client,
        "push.settle_report",
        || {
            "UPDATE cortex_buffer.pushed_file p SET reported_size = f.indexed_offset OPERATOR(pg_catalog.+) p.held_len
               FROM cortex_buffer.session_file f
              WHERE p.file_id OPERATOR(pg_catalog.=) $1 AND f.file_id OPERATOR(pg_catalog.=) p.file_id"
                .to_owned()
        },
        &[INT8],
    )?;
    client.update(&*stmt, None, &[file_id.into()]).map_err(spi)?;
    Ok(())
}

/// A file just created: nothing held, nothing indexed.
pub(super) fn created(file_id: i64) -> Pushed {
    Pushed {
        file_id,
        dialect_decided: false,
        dialect: None,
        head: Vec::new(),
        head_changed: false,
        held: Held::default(),
        pieces: Vec::new(),
        write: None,
        claimed: Claimed {
            path: String::new(),
            state: IndexState::default(),
            integrity: Default::default(),
            gone: false,
        },
    }
}

/// The gap error: the chunk starts past what the server has.
pub fn gap(relpath: &str, start: u64, expected: u64) -> CbError {
    CbError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("the chunk of \"{relpath}\" starts at offset {start}, after the end of what the server has"),
    )
    .with_detail(format!("expected offset: {expected}"))
    .with_hint("Send again from the expected offset (or from committed_offset: SELECT * FROM cortex_buffer.pushed_offsets(source)).")
}

/// Forgets what was indexed of a file whose unterminated last line, judged when it settled, was
/// continued: the tailer then re-indexes the file from its first byte as a new generation, and
/// so does push, from the shipper's next chunk (it is told to send from 0).
pub(super) fn restart(client: &mut SpiClient<'_>, f: &mut Pushed) -> Result<(), CbError> {
    file_row::delete_rows_from(client, f.file_id, 0)?;
    client
        .update(
            "UPDATE cortex_buffer.session_file
                SET indexed_offset = 0, indexed_lines = 0, generation = generation OPERATOR(pg_catalog.+) 1,
                    tail_unterminated = false, tail_pending = false, total_lines = 0, valid_lines = 0,
                    corrupt_lines = 0, blank_lines = 0, last_failed_parse = false, last_seq = NULL, seq_gaps = 0,
                    seq_first_missing = NULL, seq_resets = 0, first_ts = NULL, last_ts = NULL,
                    session_start_seen = false, session_end_seen = false, schema_version = NULL,
                    foreign_job_lines = 0, crash_cut_lines = 0, cut_pending = false, trusted = true
              WHERE file_id OPERATOR(pg_catalog.=) $1",
            None,
            &[f.file_id.into()],
        )
        .map_err(spi)?;
    f.claimed.state = IndexState { generation: f.claimed.state.generation + 1, ..IndexState::default() };
    f.claimed.integrity = Default::default();
    f.hold(Held::default());
    f.dialect_decided = false;
    Ok(())
}

/// What the tailer's reader and judge take for a push's held tail and new bytes (the stream,
/// where the file stands, its rules), and how many lines that is at most. `resume`: the held
/// over-long line's reducer ([`Held::resume`]), which the new bytes continue.
pub(super) fn stream_of<'a>(
    p: &'a Push<'_>,
    f: &'a Pushed,
    new: &'a [u8],
    settings: &Settings,
    resume: Option<&'a Resume>,
) -> (StreamItem<'a, Stream<'a>>, usize) {
    let old = &f.claimed.state;
    let item = StreamItem {
        file_id: f.file_id,
        reader: if resume.is_some() { Stream::after_held(new) } else { Stream::new(&f.held, new) },
        progress: Progress {
            offset: old.offset,
            lines: old.lines,
            integrity: f.claimed.integrity.clone(),
            tail_unterminated: old.tail_unterminated,
            ..Progress::default()
        },
        rules: FileRules {
            dialect: f.dialect,
            job_dir: &p.job_dir,
            max_line_bytes: settings.max_line_bytes,
            max_line_memory: settings.max_line_memory,
            settled: p.last,
            max_bytes: u64::MAX,
            resume,
        },
    };
    // Every line ends with a newline, but for the last one (judged when final).
    let lines = memchr::memchr_iter(b'\n', new).count() + memchr::memchr_iter(b'\n', &f.held.bytes).count() + 1;
    (item, lines)
}

/// A push's file once its lines are indexed to `progress`: its finish (fenced on the offset and
/// generation the lock read), its record, and what the server holds after the offset.
pub(super) fn concluded(
    p: &Push<'_>,
    f: &Pushed,
    new: &[u8],
    progress: &Progress,
    settings: &Settings,
) -> (Finish, Record, Held) {
    let old = &f.claimed.state;
    let consumed = progress.offset.saturating_sub(old.offset);
    let held =
        held_after(&f.held, new, consumed, keep_whole(settings.max_line_bytes), progress.pending_reduction.clone());
    let write = held_write(&f.held, &f.pieces, &held, consumed);
    let report = progress.integrity.report(settings.max_corruption_ratio, false);
    let state = IndexState {
        offset: progress.offset,
        lines: progress.lines,
        generation: old.generation.max(1),
        device: 0,
        inode: u64::try_from(identity_number(p.identity)).unwrap_or(0),
        mtime_us: cortex_buffer_core::shared::now_us(),
        fingerprint_len: f.head.len() as u64,
        fingerprint: crc32fast::hash(&f.head),
        dialect: f.dialect,
        tail_unterminated: progress.tail_unterminated,
        tail_pending: progress.tail_pending,
        quarantined: false,
    };
    let finish = Finish {
        file_id: f.file_id,
        old_offset: old.offset,
        old_generation: old.generation,
        state,
        integrity: progress.integrity.clone(),
        trusted: report.trusted,
        // A rewritten pushed file is a new file: the old one's rows stay.
        dropped: false,
    };
    (finish, Record::of(p, f, &held, write, progress.offset), held)
}

/// Records every indexed file's new state with its record, in one statement.
pub(super) fn finish_all(client: &mut SpiClient<'_>, finishes: &[Finish], records: &[Record]) -> Result<(), CbError> {
    let also = AlsoRecordMany {
        key: "push.finish_many",
        columns: &RECORD_COLUMNS,
        with: RECORD_WITH,
        sets: RECORD_SETS,
        args: Record::args(records),
    };
    let recorded = file_row::finish_many_with(client, finishes, Some(also))?;
    if recorded.len() != finishes.len() {
        return Err(CbError::internal("a pushed file's offset moved under its lock"));
    }
    Ok(())
}

/// What a push records of its file besides the offset: the pushed file's row and
/// `session_file`'s size, time and dialect (for one push or many).
pub(super) struct Record {
    file_id: i64,
    source: String,
    decided: bool,
    /// The file's first bytes, when this push grew them.
    head: Option<Vec<u8>>,
    held: HeldWrite,
    held_len: i64,
    /// The held over-long line's reducer state.
    reduction: Option<Vec<u8>>,
    reported: Option<i64>,
    size: i64,
    dialect: Option<String>,
}

impl Record {
    /// The record of `f` holding `held` after `committed`, its pieces changed by `write`.
    pub(super) fn of(p: &Push<'_>, f: &Pushed, held: &Held, write: HeldWrite, committed: u64) -> Record {
        Record {
            file_id: f.file_id,
            source: p.source.to_owned(),
            decided: f.dialect_decided,
            head: f.head_changed.then(|| f.head.clone()),
            held: write,
            held_len: count_i64(held.len),
            reduction: held.reduction.clone(),
            reported: p.file_size.map(count_i64),
            size: count_i64(p.file_size.unwrap_or(0).max(committed.saturating_add(held.len))),
            dialect: f.dialect.map(|d| d.label().to_owned()),
        }
    }

    /// The record of a push that indexed nothing: the held tail as the push left it ([`Pushed::hold`]).
    pub(super) fn saved(p: &Push<'_>, f: &Pushed) -> Record {
        let unchanged = HeldWrite { cut: None, at: 0, piece: Vec::new() };
        Record::of(p, f, &f.held, f.write.clone().unwrap_or(unchanged), f.committed())
    }

    /// Bytes the record stores besides the pushed lines' rows: the held tail's new piece and
    /// the over-long line's reducer state (what the rate limit charges beyond the chunk).
    pub(super) fn stored(&self) -> u64 {
        self.held.written().saturating_add(self.reduction.as_ref().map_or(0, |r| r.len() as u64))
    }

    /// One array per column of [`RECORD_COLUMNS`].
    fn args(records: &[Record]) -> Vec<DatumWithOid<'static>> {
        vec![
            records.iter().map(|r| r.source.clone()).collect::<Vec<String>>().into(),
            records.iter().map(|r| r.decided).collect::<Vec<bool>>().into(),
            records.iter().map(|r| r.head.clone()).collect::<Vec<Option<Vec<u8>>>>().into(),
            records.iter().map(|r| r.held.cut.map(count_i64)).collect::<Vec<Option<i64>>>().into(),
            records.iter().map(|r| count_i64(r.held.at)).collect::<Vec<i64>>().into(),
            records.iter().map(|r| r.held.piece.clone()).collect::<Vec<Vec<u8>>>().into(),
            records.iter().map(|r| r.held_len).collect::<Vec<i64>>().into(),
            records.iter().map(|r| r.reduction.clone()).collect::<Vec<Option<Vec<u8>>>>().into(),
            records.iter().map(|r| r.reported).collect::<Vec<Option<i64>>>().into(),
            records.iter().map(|r| r.size).collect::<Vec<i64>>().into(),
            records.iter().map(|r| r.dialect.clone()).collect::<Vec<Option<String>>>().into(),
        ]
    }
}

const RECORD_COLUMNS: [(&str, &str); 11] = [
    ("push_source", "text"),
    ("push_decided", "bool"),
    ("push_head", "bytea"),
    ("push_held_cut", "int8"),
    ("push_held_at", "int8"),
    ("push_held_piece", "bytea"),
    ("push_held_len", "int8"),
    ("push_reduction", "bytea"),
    ("push_reported", "int8"),
    ("push_size", "int8"),
    ("push_dialect", "text"),
];

/// The pushed file's row and the pieces of its held tail, from `u` (one row per file): the
/// pieces from the cut on go but the one at the new piece's place, which the piece overwrites
/// (the two statements touch different rows of the key, so their order does not matter).
const RECORD_WITH: &str = "p AS (
    UPDATE cortex_buffer.pushed_file p
       SET source = u.push_source, dialect_decided = u.push_decided, head = coalesce(u.push_head, p.head),
           held_len = u.push_held_len, held_reduction = u.push_reduction, reported_size = coalesce(u.push_reported, p.reported_size),
           reported_at = CASE WHEN u.push_reported IS NULL THEN p.reported_at ELSE pg_catalog.now() END,
           pushed_at = pg_catalog.now(), pushes = p.pushes OPERATOR(pg_catalog.+) 1
      FROM u WHERE p.file_id OPERATOR(pg_catalog.=) u.id),
    cut AS (
    DELETE FROM cortex_buffer.pushed_held x USING u
     WHERE x.file_id OPERATOR(pg_catalog.=) u.id AND x.at OPERATOR(pg_catalog.>=) u.push_held_cut
       AND NOT (x.at OPERATOR(pg_catalog.=) u.push_held_at
                AND pg_catalog.octet_length(u.push_held_piece) OPERATOR(pg_catalog.>) 0)),
    piece AS (
    INSERT INTO cortex_buffer.pushed_held AS x (file_id, at, bytes)
    SELECT u.id, u.push_held_at, u.push_held_piece FROM u
     WHERE pg_catalog.octet_length(u.push_held_piece) OPERATOR(pg_catalog.>) 0
        ON CONFLICT (file_id, at) DO UPDATE SET bytes = excluded.bytes)";

/// `session_file`'s (as `f`) size, time and dialect, from `u`.
const RECORD_SETS: &str = "dialect = u.push_dialect, size_bytes = GREATEST(f.size_bytes, u.push_size),
    mtime = pg_catalog.now(), last_seen = pg_catalog.now()";

/// Records what the server holds of files a push indexed nothing of (replays, held tails, a
/// restart), in one statement.
pub(super) fn save_many(client: &mut SpiClient<'_>, records: &[Record]) -> Result<(), CbError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut args: Vec<DatumWithOid<'static>> = vec![records.iter().map(|r| r.file_id).collect::<Vec<i64>>().into()];
    args.extend(Record::args(records));
    let types: Vec<PgOid> = args.iter().map(|a| PgOid::from_untagged(a.oid())).collect();
    let stmt = prepared(client, "push.save_many", save_many_sql, &types)?;
    client.update(&*stmt, None, &args).map_err(spi)?;
    Ok(())
}

fn save_many_sql() -> String {
    let unnests: Vec<String> = std::iter::once("int8")
        .chain(RECORD_COLUMNS.iter().map(|(_, t)| *t))
        .enumerate()
        .map(|(k, t)| format!("pg_catalog.unnest(${}::pg_catalog.{t}[])", k + 1))
        .collect();
    let names: Vec<&str> = RECORD_COLUMNS.iter().map(|(c, _)| *c).collect();
    format!(
        "WITH u AS (SELECT * FROM ROWS FROM ({}) AS u(id, {})), {RECORD_WITH}
         UPDATE cortex_buffer.session_file AS f SET {RECORD_SETS} FROM u WHERE f.file_id OPERATOR(pg_catalog.=) u.id",
        unnests.join(", "),
        names.join(", ")
    )
}

const REPORTS_SQL: &str = "
    SELECT p.file_id, p.source, p.reported_size, p.reported_at, p.held_len, p.head, k.confirmed_at
      FROM cortex_buffer.pushed_file p
      LEFT JOIN cortex_buffer.push_confirmation k ON k.source OPERATOR(pg_catalog.=) p.source
     WHERE p.job_id OPERATOR(pg_catalog.=) $1";

/// The shipper's last report of each of the job's pushed files, by file id, with the first bytes
/// the server keeps of it (at most `HEAD_BYTES`: what recognises the file's bytes), as the
/// definer role.
pub fn reports(job: Uuid) -> Result<std::collections::HashMap<i64, (PushedReport, Vec<u8>)>, CbError> {
    crate::pg::privilege::as_definer(|| {
        Spi::connect(|client| {
            // On every plan: prepared once per session.
            let stmt = prepared_read(client, "push.reports", || REPORTS_SQL.to_owned(), &[UUID])?;
            let rows = client.select(&*stmt, None, &[job.into()]).map_err(spi)?;
            let mut out = std::collections::HashMap::new();
            for r in rows {
                let id = r.get::<i64>(1).map_err(spi)?.unwrap_or(0);
                let report = PushedReport {
                    source: r.get::<String>(2).map_err(spi)?.unwrap_or_default(),
                    reported_size: r.get::<i64>(3).map_err(spi)?,
                    reported_at_us: crate::pg::time::unix_us(r.get(4).map_err(spi)?),
                    held_bytes: r.get::<i64>(5).map_err(spi)?.unwrap_or(0),
                    confirmed_at_us: crate::pg::time::unix_us(r.get(7).map_err(spi)?),
                    complete: false,
                };
                out.insert(id, (report, r.get::<Vec<u8>>(6).map_err(spi)?.unwrap_or_default()));
            }
            Ok(out)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_save_of_many_unnests_one_array_per_recorded_column() {
        let sql = save_many_sql();
        assert!(sql.contains("pg_catalog.unnest($12::pg_catalog.text[])") && !sql.contains("$13"));
        assert!(sql.contains("AS u(id, push_source, push_decided,"));
        assert!(sql.contains("UPDATE cortex_buffer.pushed_file p"));
    }
}
