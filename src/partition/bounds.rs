//! Where the partitioned layout's partitions are, from the relation cache: the bounds of a
//! table partitioned by ranges of `file_id` (PostgreSQL's `PartitionBoundInfo`, read into the
//! pure [`RangeBounds`]) and its partitions' OIDs, for the direct insert path's routing and for
//! the making and dropping of partitions.

use std::ffi::CStr;

use pgrx::pg_sys;

use cortex_buffer_core::indexer::partition_route::{RangeBounds, RangePoint};

/// The OID of `cortex_buffer.<name>`, if it exists.
pub fn table_oid(name: &CStr) -> pg_sys::Oid {
    // SAFETY: catalog lookups inside a transaction.
    unsafe { pg_sys::get_relname_relid(name.as_ptr(), pg_sys::get_namespace_oid(c"cortex_buffer".as_ptr(), false)) }
}

/// The range bounds and partition OIDs of `rel`, when it is partitioned by ranges of `file_id`
/// alone and every partition is a leaf; else why its rows go through SQL.
///
/// # Safety
/// `rel` is an open, partitioned relation.
pub unsafe fn file_id_ranges(rel: pg_sys::Relation) -> Result<(RangeBounds, Vec<pg_sys::Oid>), String> {
    // SAFETY: the relation cache's partition descriptor and bound info of an open relation,
    // read, never kept past the relation's lock.
    unsafe {
        let key = pg_sys::pg_get_partkeydef_columns((*rel).rd_id, false);
        if key.is_null() || CStr::from_ptr(key).to_bytes() != b"file_id" {
            return Err("it is partitioned by something else than file_id".into());
        }
        let desc = pg_sys::RelationGetPartitionDesc(rel, true);
        if desc.is_null() {
            return Err("its partitions cannot be read".into());
        }
        let nparts = usize::try_from((*desc).nparts).unwrap_or(0);
        let oids = if nparts == 0 { Vec::new() } else { std::slice::from_raw_parts((*desc).oids, nparts).to_vec() };
        if nparts > 0 && std::slice::from_raw_parts((*desc).is_leaf, nparts).iter().any(|leaf| !leaf) {
            return Err("it has partitions that are partitioned again".into());
        }
        let info = (*desc).boundinfo;
        if info.is_null() {
            // No partition at all: no bounds, every value goes nowhere.
            return Ok((RangeBounds { points: Vec::new(), indexes: vec![-1], default_index: -1 }, oids));
        }
        if (*info).strategy != b'r' as std::ffi::c_char {
            return Err("it is not partitioned by ranges".into());
        }
        let ndatums = usize::try_from((*info).ndatums).unwrap_or(0);
        let mut points = Vec::with_capacity(ndatums);
        for i in 0..ndatums {
            let kind = *(*(*info).kind.add(i));
            points.push(match kind {
                pg_sys::PartitionRangeDatumKind::PARTITION_RANGE_DATUM_MINVALUE => RangePoint::MinValue,
                pg_sys::PartitionRangeDatumKind::PARTITION_RANGE_DATUM_MAXVALUE => RangePoint::MaxValue,
                // An int8 bound is passed by value.
                _ => RangePoint::Value((*(*(*info).datums.add(i))).value() as i64),
            });
        }
        let nindexes = usize::try_from((*info).nindexes).unwrap_or(0);
        let indexes = std::slice::from_raw_parts((*info).indexes, nindexes).to_vec();
        Ok((RangeBounds { points, indexes, default_index: (*info).default_index }, oids))
    }
}
