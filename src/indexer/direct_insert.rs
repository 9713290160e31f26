//! Inserting event rows straight into the heap and its indexes, the way `COPY` does
//! (`heap_multi_insert` with a bulk-insert state, then each index), with no SQL statement, no
//! text to parse and no per-row executor work. Used only while `cortex_buffer.event` is exactly
//! the table the extension ships ([`direct_insert_refusal`]): any constraint, domain, rule,
//! trigger, row security, other access method, partitioning, changed column type or missing
//! privilege sends the rows through SQL instead, so PostgreSQL applies every rule an `INSERT`
//! would.

use std::ffi::CStr;

use pgrx::pg_sys;

use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::event_columns::{
    direct_insert_refusal, positions, Attribute, EventColumn, TableShape,
};

/// One event row's values in [`EventColumn::ALL`] order: a datum and whether it is NULL.
/// Pointer datums must stay valid until the insert that takes them returns.
pub type RowValues = [(pg_sys::Datum, bool); EventColumn::ALL.len()];

/// The event table, open for bulk insertion for one file's indexing.
pub struct EventTable {
    rel: pg_sys::Relation,
    estate: *mut pg_sys::EState,
    rri: *mut pg_sys::ResultRelInfo,
    bistate: pg_sys::BulkInsertState,
    slots: Vec<*mut pg_sys::TupleTableSlot>,
    /// Attribute numbers (0-based) of the columns in [`EventColumn::ALL`] order.
    positions: Vec<usize>,
    natts: usize,
}

/// Tuples handed to `heap_multi_insert` per call.
const SLOTS: usize = 100;

/// How the rows of one file are inserted.
pub enum InsertPath {
    Direct(EventTable),
    /// Through SQL, and why.
    Sql(String),
}

/// What the relation cache says about `rel`.
///
/// # Safety
/// `rel` is an open relation.
unsafe fn shape_of(rel: pg_sys::Relation) -> TableShape {
    // SAFETY: an open relation's relcache entry, its tuple descriptor and its attributes.
    unsafe {
        let form = &*(*rel).rd_rel;
        let desc = (*rel).rd_att;
        let natts = usize::try_from((*desc).natts).unwrap_or(0);
        let attributes = (*desc)
            .attrs
            .as_slice(natts)
            .iter()
            .filter(|a| !a.attisdropped)
            .map(|a| Attribute {
                name: CStr::from_ptr(a.attname.data.as_ptr()).to_string_lossy().into_owned(),
                type_oid: a.atttypid.to_u32(),
                typmod: a.atttypmod,
                collation: a.attcollation.to_u32(),
                not_null: a.attnotnull,
                has_default: a.atthasdef,
                generated: a.attgenerated != 0,
                identity: a.attidentity != 0,
            })
            .collect();
        let constr = (*desc).constr;
        TableShape {
            plain_table: form.relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char,
            partition: form.relispartition,
            heap: form.relam == pg_sys::HEAP_TABLE_AM_OID,
            rules: form.relhasrules || !(*rel).rd_rules.is_null(),
            triggers: !(*rel).trigdesc.is_null(),
            row_security: form.relrowsecurity || form.relforcerowsecurity,
            check_constraints: if constr.is_null() { 0 } else { usize::from((*constr).num_check) },
            may_insert: pg_sys::pg_class_aclcheck(
                (*rel).rd_id,
                pg_sys::GetUserId(),
                pg_sys::AclMode::from(pg_sys::ACL_INSERT),
            ) == pg_sys::AclResult::ACLCHECK_OK,
            attributes,
        }
    }
}

impl EventTable {
    /// Opens `cortex_buffer.event` for direct insertion, or says why its rows must go through
    /// SQL. `batch_rows` slots are made now, in the current memory context: batches are filled
    /// in a shorter-lived one.
    pub fn open(batch_rows: usize) -> Result<InsertPath, CbError> {
        // SAFETY: catalog lookups and relation opening as core code does them, inside a
        // transaction; every error raised here is a Postgres ERROR caught by the caller.
        unsafe {
            let relid = pg_sys::get_relname_relid(
                c"event".as_ptr(),
                pg_sys::get_namespace_oid(c"cortex_buffer".as_ptr(), false),
            );
            if relid == pg_sys::InvalidOid {
                return Err(CbError::internal("cortex_buffer.event does not exist"));
            }
            let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            let shape = shape_of(rel);
            if let Some(why) = direct_insert_refusal(&shape) {
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return Ok(InsertPath::Sql(why));
            }
            let natts = usize::try_from((*(*rel).rd_att).natts).unwrap_or(0);
            // `positions` index the live attributes; the descriptor also holds dropped ones.
            let live: Vec<usize> = (*(*rel).rd_att)
                .attrs
                .as_slice(natts)
                .iter()
                .enumerate()
                .filter(|(_, a)| !a.attisdropped)
                .map(|(i, _)| i)
                .collect();
            let positions = positions(&shape).into_iter().filter_map(|p| live.get(p).copied()).collect();
            let estate = pg_sys::CreateExecutorState();
            let rri = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>()).cast::<pg_sys::ResultRelInfo>();
            pg_sys::InitResultRelInfo(rri, rel, 1, std::ptr::null_mut(), 0);
            pg_sys::ExecOpenIndices(rri, false);
            // heap_multi_insert takes at most this many tuples at a time anyway (MAX_BUFFERED_TUPLES
            // in COPY is 1000); a hundred slots make the per-file setup cheap.
            let slots =
                (0..batch_rows.clamp(1, SLOTS)).map(|_| pg_sys::table_slot_create(rel, std::ptr::null_mut())).collect();
            Ok(InsertPath::Direct(EventTable {
                rel,
                estate,
                rri,
                bistate: pg_sys::GetBulkInsertState(),
                slots,
                positions,
                natts,
            }))
        }
    }

    /// Rows per `heap_multi_insert` call.
    pub fn rows_per_call(&self) -> usize {
        self.slots.len()
    }

    /// Inserts `n` rows, row `i` being `row(i)`, and their index entries, as many at a time as
    /// there are slots.
    pub fn insert(&mut self, n: usize, mut row: impl FnMut(usize) -> RowValues) {
        let per_call = self.slots.len();
        let mut start = 0;
        while start < n {
            let count = per_call.min(n - start);
            self.insert_chunk(start, count, &mut row);
            start += count;
        }
    }

    fn insert_chunk(&mut self, start: usize, count: usize, row: &mut impl FnMut(usize) -> RowValues) {
        // SAFETY: slots were created for this relation's descriptor and live as long as `self`;
        // values/isnull arrays have `natts` entries (`positions` index into them); pointer
        // datums stay valid until this call returns (the caller's contract).
        unsafe {
            for (i, &slot) in self.slots[..count].iter().enumerate() {
                clear(slot);
                let values = std::slice::from_raw_parts_mut((*slot).tts_values, self.natts);
                let isnull = std::slice::from_raw_parts_mut((*slot).tts_isnull, self.natts);
                isnull.fill(true);
                for (&pos, (value, null)) in self.positions.iter().zip(row(start + i)) {
                    values[pos] = value;
                    isnull[pos] = null;
                }
                pg_sys::ExecStoreVirtualTuple(slot);
            }
            let n = i32::try_from(count).unwrap_or(i32::MAX);
            pg_sys::heap_multi_insert(
                self.rel,
                self.slots.as_mut_ptr(),
                n,
                pg_sys::GetCurrentCommandId(true),
                0,
                self.bistate,
            );
            for &slot in &self.slots[..count] {
                pg_sys::ExecInsertIndexTuples(
                    self.rri,
                    slot,
                    self.estate,
                    false,
                    false,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
                let econtext = (*self.estate).es_per_tuple_exprcontext;
                if !econtext.is_null() {
                    pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
                }
                clear(slot);
            }
        }
    }
}

/// `ExecClearTuple` (an inline function in the headers).
unsafe fn clear(slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: a valid slot; its ops table has a clear callback.
    unsafe {
        if let Some(f) = (*(*slot).tts_ops).clear {
            f(slot);
        }
    }
}

impl Drop for EventTable {
    fn drop(&mut self) {
        // After an ERROR the transaction's abort releases all of this (pins, locks, memory);
        // calling back into Postgres while unwinding from one is not safe.
        if std::thread::panicking() {
            return;
        }
        // SAFETY: undoes `open` in reverse; the lock is kept until the end of the transaction,
        // as for any insert.
        unsafe {
            for &slot in &self.slots {
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
            pg_sys::FreeBulkInsertState(self.bistate);
            pg_sys::ExecCloseIndices(self.rri);
            pg_sys::FreeExecutorState(self.estate);
            pg_sys::table_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }
}
