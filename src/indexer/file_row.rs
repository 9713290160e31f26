//! The `session_file` row of a file being indexed, read and written by column name: the claim
//! (a row lock that says where indexing stands), the compare-and-set that records the new
//! state, the failure count. Timestamps travel as `timestamptz` values, never as arithmetic in
//! SQL, and every operator is schema-qualified.

use std::collections::HashMap;

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiHeapTupleData, SpiTupleTable};
use pgrx::{PgBuiltInOids, PgOid};

use crate::pg::spi_util::{prepared, spi};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::Dialect;
use cortex_buffer_core::indexer::index_plan::IndexState;
use cortex_buffer_core::indexer::integrity::Integrity;
use cortex_buffer_core::int::{bits_i64, bits_u64, count_i64};

use crate::pg::time::{timestamptz, unix_us};

/// The claimed row: the index state and the integrity accumulated so far.
pub struct Claimed {
    /// The path the row records (a cached file id must still be this path's).
    pub path: String,
    pub state: IndexState,
    pub integrity: Integrity,
    pub gone: bool,
}

const CLAIM_SQL: &str = "
    SELECT file_id, path, indexed_offset, indexed_lines, generation, indexed_device, indexed_inode, indexed_mtime,
           fingerprint_len, fingerprint, indexed_dialect, tail_unterminated, tail_pending,
           quarantined_at IS NOT NULL AS quarantined,
           total_lines, valid_lines, corrupt_lines, blank_lines, last_failed_parse,
           last_seq, seq_gaps, seq_first_missing, seq_resets, first_ts, last_ts,
           session_start_seen, session_end_seen, schema_version, foreign_job_lines, crash_cut_lines, cut_pending,
           gone_at IS NOT NULL AS gone
      FROM cortex_buffer.session_file WHERE file_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])
       FOR UPDATE SKIP LOCKED";

/// The claim's select list for a statement of another module that locks a `session_file` row
/// itself (as `alias`) and reads what a claim reads in the same statement; its rows are read
/// with [`claimed_from`].
pub fn claim_columns(alias: &str) -> String {
    let plain = [
        "path",
        "indexed_offset",
        "indexed_lines",
        "generation",
        "indexed_device",
        "indexed_inode",
        "indexed_mtime",
        "fingerprint_len",
        "fingerprint",
        "indexed_dialect",
        "tail_unterminated",
        "tail_pending",
        "total_lines",
        "valid_lines",
        "corrupt_lines",
        "blank_lines",
        "last_failed_parse",
        "last_seq",
        "seq_gaps",
        "seq_first_missing",
        "seq_resets",
        "first_ts",
        "last_ts",
        "session_start_seen",
        "session_end_seen",
        "schema_version",
        "foreign_job_lines",
        "crash_cut_lines",
        "cut_pending",
    ];
    let mut cols: Vec<String> = plain.iter().map(|c| format!("{alias}.{c}")).collect();
    cols.push(format!("{alias}.quarantined_at IS NOT NULL AS quarantined"));
    cols.push(format!("{alias}.gone_at IS NOT NULL AS gone"));
    cols.join(", ")
}

/// A claimed row from a result holding [`claim_columns`].
pub fn claimed_from(row: &SpiHeapTupleData<'_>, ordinals: &Ordinals) -> Result<Claimed, CbError> {
    claimed_of(&Named { row, ordinals })
}

/// The ordinal of each column of a result, by name: looked up once per statement, not once per
/// value (a name lookup scans the row's columns).
pub struct Ordinals(HashMap<String, usize>);

impl Ordinals {
    pub fn of(table: &SpiTupleTable<'_>) -> Result<Ordinals, CbError> {
        let columns = table.columns().map_err(spi)?;
        let mut by_name = HashMap::with_capacity(columns);
        for ordinal in 1..=columns {
            by_name.insert(table.column_name(ordinal).map_err(spi)?, ordinal);
        }
        Ok(Ordinals(by_name))
    }
}

/// A row read by column name.
struct Named<'r> {
    row: &'r SpiHeapTupleData<'r>,
    ordinals: &'r Ordinals,
}

impl Named<'_> {
    fn get<T: IntoDatum + FromDatum>(&self, name: &str) -> Result<Option<T>, CbError> {
        let Ordinals(by_name) = self.ordinals;
        let ordinal = by_name
            .get(name)
            .copied()
            .ok_or_else(|| CbError::internal(format!("the claim's result has no column {name}")))?;
        self.row.get::<T>(ordinal).map_err(spi)
    }
    fn int8(&self, name: &str) -> Result<Option<i64>, CbError> {
        self.get::<i64>(name)
    }
    fn count(&self, name: &str) -> Result<u64, CbError> {
        Ok(u64::try_from(self.int8(name)?.unwrap_or(0)).unwrap_or(0))
    }
    fn flag(&self, name: &str) -> Result<bool, CbError> {
        Ok(self.get::<bool>(name)?.unwrap_or(false))
    }
    fn time(&self, name: &str) -> Result<Option<i64>, CbError> {
        Ok(unix_us(self.get::<TimestampWithTimeZone>(name)?))
    }
}

/// Locks the rows of `file_ids` that no other indexer holds, in one statement; returns each
/// claimed row by file id (the others are busy, or gone from the table).
pub fn claim_many(client: &mut SpiClient<'_>, file_ids: &[i64]) -> Result<HashMap<i64, Claimed>, CbError> {
    let stmt =
        prepared(client, "buffer.claim_many", || CLAIM_SQL.to_owned(), &[PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID)])?;
    let rows = client.update(&*stmt, None, &[file_ids.to_vec().into()]).map_err(spi)?;
    let mut claimed = HashMap::with_capacity(file_ids.len());
    if rows.is_empty() {
        return Ok(claimed);
    }
    let ordinals = Ordinals::of(&rows)?;
    for row in rows {
        let r = Named { row: &row, ordinals: &ordinals };
        if let Some(id) = r.int8("file_id")? {
            claimed.insert(id, claimed_of(&r)?);
        }
    }
    Ok(claimed)
}

fn claimed_of(r: &Named<'_>) -> Result<Claimed, CbError> {
    let state = IndexState {
        offset: r.count("indexed_offset")?,
        lines: r.count("indexed_lines")?,
        generation: r.get::<i32>("generation")?.unwrap_or(0),
        device: bits_u64(r.int8("indexed_device")?.unwrap_or(0)),
        inode: bits_u64(r.int8("indexed_inode")?.unwrap_or(0)),
        mtime_us: r.time("indexed_mtime")?.unwrap_or(0),
        fingerprint_len: u64::try_from(r.get::<i32>("fingerprint_len")?.unwrap_or(0)).unwrap_or(0),
        fingerprint: u32::try_from(r.int8("fingerprint")?.unwrap_or(0)).unwrap_or(0),
        dialect: r.get::<String>("indexed_dialect")?.as_deref().and_then(Dialect::from_label),
        tail_unterminated: r.flag("tail_unterminated")?,
        tail_pending: r.flag("tail_pending")?,
        quarantined: r.flag("quarantined")?,
    };
    let integrity = Integrity {
        total_lines: r.int8("total_lines")?.unwrap_or(0),
        valid_lines: r.int8("valid_lines")?.unwrap_or(0),
        corrupt_lines: r.int8("corrupt_lines")?.unwrap_or(0),
        blank_lines: r.int8("blank_lines")?.unwrap_or(0),
        last_failed_parse: r.flag("last_failed_parse")?,
        last_seq: r.int8("last_seq")?,
        seq_gaps: r.int8("seq_gaps")?.unwrap_or(0),
        seq_first_missing: r.int8("seq_first_missing")?,
        seq_resets: r.int8("seq_resets")?.unwrap_or(0),
        first_ts_us: r.time("first_ts")?,
        last_ts_us: r.time("last_ts")?,
        session_start_seen: r.flag("session_start_seen")?,
        session_end_seen: r.flag("session_end_seen")?,
        schema_version: r.get::<String>("schema_version")?,
        foreign_job_lines: r.int8("foreign_job_lines")?.unwrap_or(0),
        crash_cut_lines: r.int8("crash_cut_lines")?.unwrap_or(0),
        cut_pending: r.flag("cut_pending")?,
    };
    Ok(Claimed { path: r.get::<String>("path")?.unwrap_or_default(), state, integrity, gone: r.flag("gone")? })
}

/// What a finish records when the file's indexed bytes were dropped (`dropped`, NULL when they
/// were not: a time then): when, and the dropped generation's identity and size, read from the
/// row before the update (`f` its alias).
fn dropped_sets(dropped: &str) -> String {
    format!(
        "replaced_at = COALESCE({dropped}, f.replaced_at),
         replaced_device = CASE WHEN {dropped} IS NULL THEN f.replaced_device ELSE f.indexed_device END,
         replaced_inode = CASE WHEN {dropped} IS NULL THEN f.replaced_inode ELSE f.indexed_inode END,
         replaced_size = CASE WHEN {dropped} IS NULL THEN f.replaced_size ELSE f.indexed_offset END"
    )
}

/// When a finish's file had its indexed bytes dropped (replaced, shrunk, rewritten): now.
fn dropped_at(dropped: bool) -> Option<TimestampWithTimeZone> {
    if dropped {
        timestamptz(Some(cortex_buffer_core::shared::now_us()))
    } else {
        None
    }
}

/// Which of `file_ids` have a row, without locking any.
pub fn existing_rows(client: &mut SpiClient<'_>, file_ids: &[i64]) -> Result<Vec<i64>, CbError> {
    if file_ids.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = prepared(
        client,
        "buffer.existing_rows",
        || {
            "SELECT file_id FROM cortex_buffer.session_file
              WHERE file_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])"
                .to_owned()
        },
        &[PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID)],
    )?;
    let mut ids = Vec::new();
    for row in client.update(&*stmt, None, &[file_ids.to_vec().into()]).map_err(spi)? {
        if let Some(id) = row.get::<i64>(1).map_err(spi)? {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// One file's finish in a batch: its claimed offset and generation, and what to record.
pub struct Finish {
    pub file_id: i64,
    pub old_offset: u64,
    pub old_generation: i32,
    pub state: IndexState,
    pub integrity: Integrity,
    pub trusted: bool,
    /// The file's indexed bytes were dropped (it was replaced, shrank, or was rewritten).
    pub dropped: bool,
}

impl Finish {}

/// The columns [`finish_many`] sets, in order, with their array types.
const FINISH_MANY_COLUMNS: [(&str, &str); 29] = [
    ("indexed_offset", "int8"),
    ("indexed_lines", "int8"),
    ("generation", "int4"),
    ("indexed_device", "int8"),
    ("indexed_inode", "int8"),
    ("indexed_mtime", "timestamptz"),
    ("fingerprint_len", "int4"),
    ("fingerprint", "int8"),
    ("indexed_dialect", "text"),
    ("tail_unterminated", "bool"),
    ("tail_pending", "bool"),
    ("total_lines", "int8"),
    ("valid_lines", "int8"),
    ("corrupt_lines", "int8"),
    ("blank_lines", "int8"),
    ("last_failed_parse", "bool"),
    ("last_seq", "int8"),
    ("seq_gaps", "int8"),
    ("seq_first_missing", "int8"),
    ("seq_resets", "int8"),
    ("first_ts", "timestamptz"),
    ("last_ts", "timestamptz"),
    ("session_start_seen", "bool"),
    ("session_end_seen", "bool"),
    ("schema_version", "text"),
    ("foreign_job_lines", "int8"),
    ("crash_cut_lines", "int8"),
    ("cut_pending", "bool"),
    ("trusted", "bool"),
];

/// What a batch records with its finish, in the same statement ([`finish_many_with`]): more
/// arrays, unnested beside the finish's own as more columns of `u` (one row per file, `u.id` its
/// file id), a statement that may read `u` run first (a `WITH` of the finish, on the same
/// snapshot), and more columns of `session_file` (as `f`) set from `u`.
pub struct AlsoRecordMany {
    /// Names the statement: its plan is kept per backend.
    pub key: &'static str,
    /// The more columns of `u` and their array element types.
    pub columns: &'static [(&'static str, &'static str)],
    pub with: &'static str,
    pub sets: &'static str,
    /// One array per column, in `columns`' order.
    pub args: Vec<DatumWithOid<'static>>,
}

/// [`AlsoRecordMany`]'s columns, `WITH` and sets.
type AlsoShape = (&'static [(&'static str, &'static str)], &'static str, &'static str);

/// `UPDATE ... FROM` the unnested arrays: every file of a batch in one statement, each fenced
/// on its claimed offset and generation as [`finish`] is (`$1` ids, `$2` offsets, `$3`
/// generations, `$4` when each file's bytes were dropped, then one array per column of
/// [`FINISH_MANY_COLUMNS`], then `also`'s).
fn finish_many_sql(also: Option<AlsoShape>) -> String {
    let extra = also.map_or(&[][..], |a| a.0);
    let unnests: Vec<String> = ["int8", "int8", "int4", "timestamptz"]
        .iter()
        .chain(FINISH_MANY_COLUMNS.iter().map(|(_, t)| t))
        .chain(extra.iter().map(|(_, t)| t))
        .enumerate()
        .map(|(k, t)| format!("pg_catalog.unnest(${}::pg_catalog.{t}[])", k + 1))
        .collect();
    let names: Vec<&str> = FINISH_MANY_COLUMNS.iter().map(|(c, _)| *c).chain(extra.iter().map(|(c, _)| *c)).collect();
    let mut sets: Vec<String> = FINISH_MANY_COLUMNS.iter().map(|(c, _)| format!("{c} = u.{c}")).collect();
    sets.push(dropped_sets("u.dropped_at"));
    let rows = format!(
        "ROWS FROM ({}) AS u(id, old_offset, old_generation, dropped_at, {})",
        unnests.join(", "),
        names.join(", ")
    );
    let (with, from) = match also {
        None => (String::new(), rows),
        Some((_, with, extra_sets)) => {
            sets.push(extra_sets.to_owned());
            (format!("WITH u AS (SELECT * FROM {rows}), {with} "), "u".to_owned())
        }
    };
    format!(
        "{with}UPDATE cortex_buffer.session_file AS f SET {},
                indexed_at = pg_catalog.now(), failures = 0, last_error = NULL, last_error_at = NULL,
                quarantined_at = NULL
           FROM {from}
          WHERE f.file_id OPERATOR(pg_catalog.=) u.id AND f.indexed_offset OPERATOR(pg_catalog.=) u.old_offset
            AND f.generation OPERATOR(pg_catalog.=) u.old_generation
      RETURNING f.file_id",
        sets.join(", "),
    )
}

/// Records every file's new state in one statement; returns the ids recorded (a file missing
/// from it no longer held its claimed offset, which under the claim's lock means a bug).
pub fn finish_many(client: &mut SpiClient<'_>, files: &[Finish]) -> Result<Vec<i64>, CbError> {
    finish_many_with(client, files, None)
}

/// [`finish_many`], with more recorded in the same statement (push ingestion's batch).
pub fn finish_many_with(
    client: &mut SpiClient<'_>,
    files: &[Finish],
    also: Option<AlsoRecordMany>,
) -> Result<Vec<i64>, CbError> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let i8s =
        |f: &dyn Fn(&Finish) -> i64| -> DatumWithOid<'static> { files.iter().map(f).collect::<Vec<i64>>().into() };
    let oi8s = |f: &dyn Fn(&Finish) -> Option<i64>| -> DatumWithOid<'static> {
        files.iter().map(f).collect::<Vec<Option<i64>>>().into()
    };
    let i4s =
        |f: &dyn Fn(&Finish) -> i32| -> DatumWithOid<'static> { files.iter().map(f).collect::<Vec<i32>>().into() };
    let bools =
        |f: &dyn Fn(&Finish) -> bool| -> DatumWithOid<'static> { files.iter().map(f).collect::<Vec<bool>>().into() };
    let times = |f: &dyn Fn(&Finish) -> Option<i64>| -> DatumWithOid<'static> {
        files.iter().map(|x| timestamptz(f(x))).collect::<Vec<Option<TimestampWithTimeZone>>>().into()
    };
    let texts = |f: &dyn Fn(&Finish) -> Option<String>| -> DatumWithOid<'static> {
        files.iter().map(f).collect::<Vec<Option<String>>>().into()
    };
    let args: Vec<DatumWithOid<'static>> = vec![
        i8s(&|f| f.file_id),
        i8s(&|f| count_i64(f.old_offset)),
        i4s(&|f| f.old_generation),
        files.iter().map(|f| dropped_at(f.dropped)).collect::<Vec<Option<TimestampWithTimeZone>>>().into(),
        i8s(&|f| count_i64(f.state.offset)),
        i8s(&|f| count_i64(f.state.lines)),
        i4s(&|f| f.state.generation),
        i8s(&|f| bits_i64(f.state.device)),
        i8s(&|f| bits_i64(f.state.inode)),
        times(&|f| Some(f.state.mtime_us)),
        i4s(&|f| i32::try_from(f.state.fingerprint_len).unwrap_or(0)),
        i8s(&|f| i64::from(f.state.fingerprint)),
        texts(&|f| f.state.dialect.map(|d| d.label().to_owned())),
        bools(&|f| f.state.tail_unterminated),
        bools(&|f| f.state.tail_pending),
        i8s(&|f| f.integrity.total_lines),
        i8s(&|f| f.integrity.valid_lines),
        i8s(&|f| f.integrity.corrupt_lines),
        i8s(&|f| f.integrity.blank_lines),
        bools(&|f| f.integrity.last_failed_parse),
        oi8s(&|f| f.integrity.last_seq),
        i8s(&|f| f.integrity.seq_gaps),
        oi8s(&|f| f.integrity.seq_first_missing),
        i8s(&|f| f.integrity.seq_resets),
        times(&|f| f.integrity.first_ts_us),
        times(&|f| f.integrity.last_ts_us),
        bools(&|f| f.integrity.session_start_seen),
        bools(&|f| f.integrity.session_end_seen),
        texts(&|f| f.integrity.schema_version.clone()),
        i8s(&|f| f.integrity.foreign_job_lines),
        i8s(&|f| f.integrity.crash_cut_lines),
        bools(&|f| f.integrity.cut_pending),
        bools(&|f| f.trusted),
    ];
    let key = also.as_ref().map_or("buffer.finish_many", |a| a.key);
    let shape = also.as_ref().map(|a| (a.columns, a.with, a.sets));
    let mut args = args;
    if let Some(a) = also {
        args.extend(a.args);
    }
    let types: Vec<PgOid> = args.iter().map(|a| PgOid::from_untagged(a.oid())).collect();
    let stmt = prepared(client, key, || finish_many_sql(shape), &types)?;
    let rows = client.update(&*stmt, None, &args).map_err(spi)?;
    let mut ids = Vec::with_capacity(files.len());
    for r in rows {
        if let Some(id) = r.get::<i64>(1).map_err(spi)? {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Deletes the rows of `file_id` at or after byte `from` (never committed, or replaced by a
/// new generation).
pub fn delete_rows_from(client: &mut SpiClient<'_>, file_id: i64, from: u64) -> Result<(), CbError> {
    let args = [PgOid::BuiltIn(PgBuiltInOids::INT8OID), PgOid::BuiltIn(PgBuiltInOids::INT8OID)];
    for (key, table) in [("buffer.delete_events", "event"), ("buffer.delete_corrupt", "corrupt_line")] {
        let stmt = prepared(
            client,
            key,
            || {
                format!(
                    "DELETE FROM cortex_buffer.{table}
                      WHERE file_id OPERATOR(pg_catalog.=) $1 AND byte_offset OPERATOR(pg_catalog.>=) $2"
                )
            },
            &args,
        )?;
        client.update(&*stmt, None, &[file_id.into(), count_i64(from).into()]).map_err(spi)?;
    }
    Ok(())
}

/// Counts a failed attempt in its own (sub)transaction; quarantines the file after
/// `quarantine_after` consecutive failures. Returns whether it is now quarantined.
pub fn record_failure(file_id: i64, error: &str, quarantine_after: i32) -> Result<bool, CbError> {
    Spi::connect_mut(|client| {
        let rows = client
            .update(
                "UPDATE cortex_buffer.session_file
                    SET failures = failures OPERATOR(pg_catalog.+) 1, last_error = $2, last_error_at = pg_catalog.now(),
                        quarantined_at = CASE WHEN failures OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>=) $3
                                              THEN coalesce(quarantined_at, pg_catalog.now()) END
                  WHERE file_id OPERATOR(pg_catalog.=) $1
              RETURNING quarantined_at IS NOT NULL",
                Some(1),
                &[file_id.into(), error.replace('\0', "\u{fffd}").into(), quarantine_after.into()],
            )
            .map_err(spi)?;
        Ok(rows.into_iter().next().and_then(|r| r.get::<bool>(1).ok().flatten()).unwrap_or(false))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_finish_sets_every_column_from_one_array_each() {
        let sql = finish_many_sql(None);
        assert!(sql.contains("pg_catalog.unnest($4::pg_catalog.timestamptz[])"));
        assert!(sql.contains("pg_catalog.unnest($33::pg_catalog.bool[])") && !sql.contains("$34"));
        assert!(sql.contains("replaced_at = COALESCE(u.dropped_at, f.replaced_at)"));
        assert!(sql.contains("f.indexed_offset OPERATOR(pg_catalog.=) u.old_offset"));
    }
}
