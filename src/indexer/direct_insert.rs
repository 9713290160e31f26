//! Inserting event rows straight into the heap and its indexes, the way `COPY` does
//! (`heap_multi_insert` with a bulk-insert state, then each index), with no SQL statement, no
//! text to parse and no per-row executor work. Used only while `cortex_buffer.event` is exactly
//! the table the extension ships ([`direct_insert_refusal`]): any constraint, domain, rule,
//! trigger, row security, other access method, other partitioning, changed column type or
//! missing privilege sends the rows through SQL instead, so PostgreSQL applies every rule an
//! `INSERT` would.
//!
//! The partitioned layout (`partition_events()`: ranges of `file_id`) is routed here as
//! `INSERT` routes it: each row goes into the leaf whose range holds its file id, found from the
//! bounds in the relation cache ([`RangeBounds`]), and each leaf must itself be a table the
//! direct path accepts. A row no partition takes, or a leaf that is refused, sends the call's
//! rows through SQL, where PostgreSQL routes them and raises what it raises.

use std::ffi::CStr;

use pgrx::pg_sys;

use crate::partition::bounds::{file_id_ranges, table_oid};

use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::event_columns::{
    direct_insert_refusal, positions, Attribute, EventColumn, TableShape,
};
use cortex_buffer_core::indexer::partition_route::RangeBounds;

/// One event row's values in [`EventColumn::ALL`] order: a datum and whether it is NULL.
/// Pointer datums must stay valid until the insert that takes them returns.
pub type RowValues = [(pg_sys::Datum, bool); EventColumn::ALL.len()];

/// The event table, open for bulk insertion: the table itself, or the partitions of the
/// partitioned layout as rows need them.
pub struct EventTable {
    target: Target,
}

enum Target {
    Plain(Leaf),
    Routed(Routed),
}

/// The partitioned layout: the parent's bounds and partitions, and the leaves opened so far.
struct Routed {
    bounds: RangeBounds,
    /// The partition descriptor's OIDs, in its order (what `bounds` indexes).
    oids: Vec<pg_sys::Oid>,
    /// Opened leaves, by position in `oids` (few: a batch's files are numbered close together).
    leaves: Vec<(usize, Leaf)>,
    /// Where the leaves' slots live: the context `open` was called in, which outlives batches.
    context: pg_sys::MemoryContext,
    batch_rows: usize,
}

/// One heap relation open for bulk insertion.
struct Leaf {
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
        let relid = table_oid(c"event");
        if relid == pg_sys::InvalidOid {
            return Err(CbError::internal("cortex_buffer.event does not exist"));
        }
        // SAFETY: opening a relation and reading its relcache entry, inside a transaction; every
        // error raised here is a Postgres ERROR caught by the caller.
        unsafe {
            let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            if (*(*rel).rd_rel).relkind == pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char {
                // The parent's own rules, triggers (statement triggers fire only for statements
                // on it), row security and privileges count as for a plain table; its lack of
                // storage does not.
                let mut shape = shape_of(rel);
                shape.plain_table = true;
                shape.heap = true;
                let routed = match direct_insert_refusal(&shape) {
                    Some(why) => Err(why),
                    None => file_id_ranges(rel),
                };
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return Ok(match routed {
                    Ok((bounds, oids)) => InsertPath::Direct(EventTable {
                        target: Target::Routed(Routed {
                            bounds,
                            oids,
                            leaves: Vec::new(),
                            context: pg_sys::CurrentMemoryContext,
                            batch_rows,
                        }),
                    }),
                    Err(why) => InsertPath::Sql(why),
                });
            }
            Ok(match Leaf::open(rel, batch_rows, false) {
                Ok(leaf) => InsertPath::Direct(EventTable { target: Target::Plain(leaf) }),
                Err(why) => InsertPath::Sql(why),
            })
        }
    }

    /// Rows per `heap_multi_insert` call.
    pub fn rows_per_call(&self) -> usize {
        match &self.target {
            Target::Plain(leaf) => leaf.slots.len(),
            Target::Routed(r) => r.batch_rows.clamp(1, SLOTS),
        }
    }

    /// Inserts `n` rows, row `i` being `row(i)` of file `file_of(i)`, and their index entries.
    /// `Err` says why these rows must go through SQL instead; nothing was inserted then.
    pub fn insert(
        &mut self,
        n: usize,
        file_of: impl Fn(usize) -> i64,
        mut row: impl FnMut(usize) -> RowValues,
    ) -> Result<(), String> {
        match &mut self.target {
            Target::Plain(leaf) => {
                leaf.insert(0..n, &mut row);
                Ok(())
            }
            Target::Routed(r) => {
                // Every row's leaf first, so that a refusal comes before anything is inserted.
                let mut targets = Vec::with_capacity(n);
                for i in 0..n {
                    targets.push(r.leaf_for(file_of(i))?);
                }
                let mut start = 0;
                while start < n {
                    let at = targets[start];
                    let end = targets[start..].iter().position(|t| *t != at).map_or(n, |k| start + k);
                    if let Some((_, leaf)) = r.leaves.get_mut(at) {
                        leaf.insert(start..end, &mut row);
                    }
                    start = end;
                }
                Ok(())
            }
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
impl EventTable {
    /// Why the rows of `file_id` would go through SQL (`None`: straight into their table).
    pub fn refusal_for(&mut self, file_id: i64) -> Option<String> {
        match &mut self.target {
            Target::Plain(_) => None,
            Target::Routed(r) => r.leaf_for(file_id).err(),
        }
    }

    /// Whether the rows go into partitions.
    pub fn is_routed(&self) -> bool {
        matches!(self.target, Target::Routed(_))
    }
}

impl Routed {
    /// The position in `leaves` of the leaf that takes `file_id`, opening it on first use.
    fn leaf_for(&mut self, file_id: i64) -> Result<usize, String> {
        let Some(part) = self.bounds.partition_of(file_id) else {
            return Err(format!("no partition of cortex_buffer.event takes file id {file_id}"));
        };
        if let Some(at) = self.leaves.iter().position(|(p, _)| *p == part) {
            return Ok(at);
        }
        let Some(&oid) = self.oids.get(part) else {
            return Err(format!("partition {part} of cortex_buffer.event is not in its descriptor"));
        };
        let context = self.context;
        let batch_rows = self.batch_rows;
        // SAFETY: opens a partition (locked as an INSERT routed to it would lock it); its slots
        // are made in the context `EventTable::open` ran in, which outlives the batches.
        let leaf = unsafe {
            let rel = pg_sys::table_open(oid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            let previous = pg_sys::MemoryContextSwitchTo(context);
            let leaf = Leaf::open(rel, batch_rows, true);
            pg_sys::MemoryContextSwitchTo(previous);
            leaf
        }
        .map_err(|why| format!("a partition of cortex_buffer.event is refused: {why}"))?;
        self.leaves.push((part, leaf));
        Ok(self.leaves.len() - 1)
    }
}

impl Leaf {
    /// Takes `rel` (open, locked) for direct insertion, or closes it and says why not.
    /// `routed`: `rel` is the partition its rows' range names, so its partition constraint holds.
    ///
    /// # Safety
    /// `rel` is an open relation; called inside a transaction.
    unsafe fn open(rel: pg_sys::Relation, batch_rows: usize, routed: bool) -> Result<Leaf, String> {
        // SAFETY: the caller's contract.
        unsafe {
            let mut shape = shape_of(rel);
            if routed {
                shape.partition = false;
            }
            if let Some(why) = direct_insert_refusal(&shape) {
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return Err(why);
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
            Ok(Leaf { rel, estate, rri, bistate: pg_sys::GetBulkInsertState(), slots, positions, natts })
        }
    }

    /// Inserts rows `rows`, row `i` being `row(i)`, and their index entries, as many at a time
    /// as there are slots.
    fn insert(&mut self, rows: std::ops::Range<usize>, row: &mut impl FnMut(usize) -> RowValues) {
        let per_call = self.slots.len();
        let mut start = rows.start;
        while start < rows.end {
            let count = per_call.min(rows.end - start);
            self.insert_chunk(start, count, row);
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

impl Drop for Leaf {
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
