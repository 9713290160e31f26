//! Reading a result's rows in one pass each, for the statements that return many rows per call
//! (a recovery plan reads a writer's whole history).
//!
//! pgrx's `SpiHeapTupleData` fetches every column with `SPI_getbinval`, which walks the tuple
//! from its start for each column after a variable-length one, and converts each value through
//! the parent memory context: about a microsecond and a half per row of a plan's events, a
//! seventh of `recovery_plan`. Here each tuple is deformed once (`heap_deform_tuple`) and values
//! are read straight from the datums.

use pgrx::pg_sys;
use pgrx::spi::SpiTupleTable;

use cortex_buffer_core::error::CbError;

/// Columns a row may have here (the widest reader's).
const MAX_COLUMNS: usize = 24;

/// One row's values, by 1-based column number as in SQL. Each accessor expects the column's
/// type to be the one its name says; [`rows`] checks the types before any row is read.
pub struct RawRow {
    values: [pg_sys::Datum; MAX_COLUMNS],
    nulls: [bool; MAX_COLUMNS],
}

impl RawRow {
    fn datum(&self, col: usize) -> Option<pg_sys::Datum> {
        let i = col.checked_sub(1)?;
        match self.nulls.get(i) {
            Some(false) => self.values.get(i).copied(),
            _ => None,
        }
    }

    pub fn int8(&self, col: usize) -> Option<i64> {
        self.datum(col).map(|d| d.value() as i64)
    }

    pub fn int4(&self, col: usize) -> Option<i32> {
        self.datum(col).map(|d| d.value() as i32)
    }

    pub fn bool(&self, col: usize) -> Option<bool> {
        self.datum(col).map(|d| d.value() != 0)
    }

    /// A finite `timestamptz` as microseconds since the Unix epoch.
    pub fn timestamptz_us(&self, col: usize) -> Option<i64> {
        let pg = self.datum(col)?.value() as i64;
        crate::pg::time::unix_us(pgrx::datum::TimestampWithTimeZone::try_from(pg).ok())
    }

    /// `f` on a varlena value's bytes after its header (a `jsonb`'s root container), with its
    /// compression or out-of-line storage undone.
    pub fn varlena<R>(&self, col: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let d = self.datum(col)?;
        // SAFETY: the column is a varlena type (checked in `rows`), so the datum points to a
        // varlena in the result's memory; `pg_detoast_datum_packed` returns it, or a copy with
        // its compression or out-of-line storage undone, in the current memory context, valid
        // while `f` runs.
        let bytes = unsafe {
            let v = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any_exhdr(v);
            std::slice::from_raw_parts(pgrx::varlena::vardata_any(v).cast::<u8>(), len)
        };
        Some(f(bytes))
    }

    /// A `text` value, copied. Bytes that are not UTF-8 (a `SQL_ASCII` database) are replaced,
    /// as a reader of the line would see them.
    pub fn text(&self, col: usize) -> Option<String> {
        self.varlena(col, |bytes| String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Reads every row of `table`, the result the last `select` returned, with `f`. `types` are the
/// result's column types in order (a statement that does not return them is a bug, reported as
/// an internal error). Call it right after the `select`, before any other SPI call.
pub fn rows<R>(
    table: &SpiTupleTable<'_>,
    types: &[pg_sys::Oid],
    mut f: impl FnMut(&RawRow) -> R,
) -> Result<Vec<R>, CbError> {
    let n = table.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `table` is the result of the last SPI call, so `SPI_tuptable` is its table (pgrx
    // clears the global before each call); it lives as long as `table` does.
    let raw = unsafe { pg_sys::SPI_tuptable.as_ref() }
        .ok_or_else(|| CbError::internal("SPI: no tuple table for a result with rows".to_owned()))?;
    if usize::try_from(raw.numvals).ok() != Some(n) || raw.tupdesc.is_null() || raw.vals.is_null() {
        return Err(CbError::internal("SPI: the tuple table is not the result's".to_owned()));
    }
    // SAFETY: tupdesc is non-null and describes the result's columns.
    let natts = usize::try_from(unsafe { (*raw.tupdesc).natts }).unwrap_or(0);
    if natts != types.len() || natts > MAX_COLUMNS {
        return Err(CbError::internal(format!("SPI: {natts} columns where {} were expected", types.len())));
    }
    for (i, expected) in types.iter().enumerate() {
        // SAFETY: 1 <= i + 1 <= natts.
        let oid = unsafe { pg_sys::SPI_gettypeid(raw.tupdesc, (i + 1) as i32) };
        if oid != *expected {
            return Err(CbError::internal(format!("SPI: column {} has type {oid:?}, not {expected:?}", i + 1)));
        }
    }
    // SAFETY: `vals` holds `numvals` tuple pointers.
    let tuples = unsafe { std::slice::from_raw_parts(raw.vals, n) };
    let mut out = Vec::with_capacity(n);
    let mut row = RawRow { values: [pg_sys::Datum::from(0usize); MAX_COLUMNS], nulls: [true; MAX_COLUMNS] };
    for &tuple in tuples {
        // SAFETY: each tuple is a valid heap tuple of `tupdesc`, whose `natts` values fit the
        // arrays (checked above).
        unsafe { pg_sys::heap_deform_tuple(tuple, raw.tupdesc, row.values.as_mut_ptr(), row.nulls.as_mut_ptr()) };
        out.push(f(&row));
    }
    Ok(out)
}
