//! The opt-in partitioned layout of `event` and `corrupt_line` (`partition_events()`): both
//! partitioned by ranges of `file_id`, `files_per_partition` ids a partition. Files are numbered
//! in discovery order, so a partition is a span of time whose files retention can drop whole
//! (`retention::partitions`); every lookup names its files, so it prunes to their partitions.
//!
//! Partitions are made before any row needs them: where `session_file` rows are made (the
//! indexing pass and push), in that transaction, and ahead of the files by every cleanup. They
//! are made empty and attached, which takes only a `SHARE UPDATE EXCLUSIVE` lock on the parents.

use pgrx::pg_sys;
use pgrx::prelude::*;

use self::bounds::{file_id_ranges, table_oid};
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::indexer::partition_route::RangeBounds;

pub mod bounds;
#[cfg(any(test, feature = "pg_test"))]
mod partition_pg_tests;

pgrx::extension_sql_file!("schema.sql", name = "partition_schema", requires = ["indexer_schema"]);
pgrx::extension_sql_file!("api.sql", name = "partition_api", requires = ["partition_schema", "recovery_api"]);

/// The partitioned layout's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub files_per_partition: i64,
    pub premake: i64,
}

/// Whether `cortex_buffer.event` is partitioned (a relation-cache lookup, no statement).
pub fn is_partitioned() -> bool {
    let relid = table_oid(c"event");
    // SAFETY: a syscache lookup inside a transaction.
    relid != pg_sys::InvalidOid
        && unsafe { pg_sys::get_rel_relkind(relid) } == pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char
}

/// The event table's range bounds (`None`: not partitioned by ranges of `file_id`).
pub fn event_bounds() -> Option<(RangeBounds, Vec<pg_sys::Oid>)> {
    bounds_of(c"event")
}

/// `cortex_buffer.<table>`'s range bounds and partitions, when it is partitioned by file id.
pub fn bounds_of(table: &std::ffi::CStr) -> Option<(RangeBounds, Vec<pg_sys::Oid>)> {
    let relid = table_oid(table);
    if relid == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: opens the relation for reading its relcache entry, inside a transaction; the lock
    // is kept to the end of the transaction, as a reader's.
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let partitioned = (*(*rel).rd_rel).relkind == pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char;
        let out = if partitioned { file_id_ranges(rel).ok() } else { None };
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        out
    }
}

/// The layout's settings; when `event_partitioning` has no row (the tables were partitioned by
/// hand or by pg_partman), the defaults.
pub fn layout() -> Result<Layout, CbError> {
    as_definer(|| {
        Spi::connect(|c| {
            let row = c
                .select("SELECT files_per_partition, premake FROM cortex_buffer.event_partitioning", Some(1), &[])
                .map_err(spi)?
                .next();
            Ok(match row {
                Some(r) => Layout {
                    files_per_partition: r.get::<i64>(1).map_err(spi)?.unwrap_or(DEFAULT_FILES).max(1),
                    premake: i64::from(r.get::<i32>(2).map_err(spi)?.unwrap_or(4).max(0)),
                },
                None => Layout { files_per_partition: DEFAULT_FILES, premake: 4 },
            })
        })
    })
}

/// `partition_events()`'s default width.
const DEFAULT_FILES: i64 = 10_000;

/// Makes sure a partition takes every one of `file_ids` (with `premake` more ready above the
/// highest), when the layout is partitioned. Called in the transaction that made the ids' rows.
pub fn ensure_for(file_ids: &[i64]) -> Result<(), CbError> {
    if file_ids.is_empty() || !is_partitioned() {
        return Ok(());
    }
    let Some((bounds, _)) = event_bounds() else { return Ok(()) };
    // A default partition (pg_partman makes one) would take the rows, but retention drops only
    // range partitions: the span is made all the same.
    let missing: Vec<i64> = file_ids.iter().copied().filter(|id| bounds.range_partition_of(*id).is_none()).collect();
    let (Some(&low), Some(&high)) = (missing.iter().min(), missing.iter().max()) else {
        return Ok(());
    };
    let layout = layout()?;
    make_spans(&bounds, &layout, low, high.saturating_add(layout.premake.saturating_mul(layout.files_per_partition)))
        .map(|_| ())
}

/// Makes sure `premake` partitions stand ready above the next file id (cleanup's maintenance).
/// Returns the lower bounds of the partitions made.
pub fn ensure_ahead() -> Result<Vec<i64>, CbError> {
    if !is_partitioned() {
        return Ok(Vec::new());
    }
    let Some((bounds, _)) = event_bounds() else { return Ok(Vec::new()) };
    let layout = layout()?;
    let next = next_file_id()?;
    make_spans(&bounds, &layout, next, next.saturating_add(layout.premake.saturating_mul(layout.files_per_partition)))
}

/// The next file id `session_file_seq` hands out.
pub fn next_file_id() -> Result<i64, CbError> {
    as_definer(|| {
        // NULL until the first id is handed out: then it is 1.
        Spi::get_one::<i64>(
            "SELECT COALESCE(pg_catalog.pg_sequence_last_value('cortex_buffer.session_file_seq'::pg_catalog.regclass), 0)
                    OPERATOR(pg_catalog.+) 1",
        )
        .map_err(spi)
        .map(|v| v.unwrap_or(1))
    })
}

/// Makes partitions for every id from `low` to `high` that no range partition covers, each
/// the gap around the id cut to `files_per_partition` ([`RangeBounds::gap_for`]: never
/// overlapping a partition, never leaving a hole, whatever width made the others).
fn make_spans(bounds: &RangeBounds, layout: &Layout, low: i64, high: i64) -> Result<Vec<i64>, CbError> {
    let width = layout.files_per_partition.max(1);
    let mut made = Vec::new();
    let mut id = low;
    while id <= high {
        let Some((start, end)) = bounds.gap_for(id, width) else {
            // Covered: go on from where its partition ends.
            match bounds.next_point_after(id) {
                Some(next) if next > id => {
                    id = next;
                    continue;
                }
                _ => break,
            }
        };
        // In a subtransaction: a default partition that already holds rows of the span refuses
        // the new one (pg_partman moves such rows out), and then the rows of the span keep
        // going to the default partition, as INSERT would send them.
        let attached = crate::pg::xact::subtransaction(|| {
            as_definer(|| {
                Spi::get_one_with_args::<bool>(
                    "SELECT cortex_buffer.event_partition_create($1, $2)",
                    &[start.into(), end.into()],
                )
                .map_err(spi)
            })
        });
        match attached {
            Ok(_) => made.push(start),
            Err(e) if bounds.default_index >= 0 => {
                pgrx::debug1!("cortex_buffer: partition for file ids [{start}, {end}) not made: {e}");
            }
            Err(e) => {
                return Err(CbError::new(
                    SqlState::ObjectNotInPrerequisiteState,
                    format!("the partition of cortex_buffer.event for file ids [{start}, {end}) could not be made: {e}"),
                )
                .with_hint("Check the partitions of cortex_buffer.event and corrupt_line (a table of the same name that is not one of them stands in the way); cleanup_session_buffers() makes them ahead."));
            }
        }
        id = end;
    }
    Ok(made)
}
