//! The removal of index rows in the partitioned layout (`partition_events()`): the cleanup
//! decides which files go exactly as in the plain layout, and their rows go by the same step
//! (`cleanup::remove_index_rows`). Only how differs: a partition all of whose `session_file`
//! rows go in this run (or that has none left) is dropped whole, by `DROP TABLE`, instead of
//! having its rows deleted one by one; the files of any other partition go by `DELETE`, as in
//! the plain layout. A partition that new files may still land in is never dropped.
//!
//! The files are locked already (the cleanup locks them as the indexer does, `FOR UPDATE SKIP
//! LOCKED`). The drop waits at most [`DROP_LOCK_TIMEOUT`] for the readers of `event` (dropping
//! a partition locks its parent); a busy table has its files' rows deleted instead, which is
//! the same outcome at the plain layout's cost.

use std::collections::HashMap;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::state::{Action, Run};
use crate::partition;
use crate::pg::planner::with_index_scans;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::partition_route::partition_name;

/// How long a partition's drop waits for `event`'s readers and writers before it gives up.
const DROP_LOCK_TIMEOUT: &str = "2s";

/// A partition whose `session_file` rows all go in this run.
struct Doomed {
    lo: i64,
    hi: i64,
    leaves: Vec<pg_sys::Oid>,
    file_ids: Vec<i64>,
}

/// Drops the partitions whose every file is among `files` (those the cleanup removes), and
/// those that no file holds any more (emptied by earlier runs). Returns the rows each dropped
/// file had (its counters, as `index_rows::remove` returns them): the caller deletes the rest
/// by `DELETE`. Each partition dropped is an action of its own (`drop_partition`, with the
/// bytes it held). Nothing is dropped outside a READ COMMITTED transaction: the last check
/// needs a fresh snapshot.
pub(super) fn drop_whole(run: &mut Run<'_>, files: &[i64]) -> Result<HashMap<i64, i64>, CbError> {
    let mut removed = HashMap::new();
    let Some((bounds, oids)) = partition::event_bounds() else { return Ok(removed) };
    // SAFETY: reads the transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return Ok(removed);
    }
    let corrupt = partition::bounds_of(c"corrupt_line");
    let next = partition::next_file_id()?;
    let mut going: HashMap<usize, Vec<i64>> = HashMap::new();
    for &id in files {
        if let Some(index) = bounds.range_partition_of(id) {
            going.entry(index).or_default().push(id);
        }
    }
    let closed: Vec<(i64, i64, usize)> = bounds.spans().into_iter().take_while(|&(_, hi, _)| hi <= next).collect();
    let held = span_files(&closed)?;
    let corrupt_spans: HashMap<(i64, i64), pg_sys::Oid> = corrupt
        .as_ref()
        .map(|(b, o)| b.spans().into_iter().filter_map(|(lo, hi, i)| Some(((lo, hi), *o.get(i)?))).collect())
        .unwrap_or_default();
    for ((lo, hi, index), files_held) in closed.into_iter().zip(held) {
        let Some(&event_leaf) = oids.get(index) else { continue };
        let in_span = going.remove(&index).unwrap_or_default();
        if files_held != i64::try_from(in_span.len()).unwrap_or(i64::MAX) {
            continue;
        }
        let corrupt_leaf = corrupt_spans.get(&(lo, hi)).copied();
        let d = Doomed { lo, hi, leaves: std::iter::once(event_leaf).chain(corrupt_leaf).collect(), file_ids: in_span };
        let shown = format!("cortex_buffer.{}", partition_name("event", lo));
        match drop_span(&d, run.args.dry_run) {
            Ok((bytes, counts)) => {
                let reason = if d.file_ids.is_empty() {
                    "no file holds it any more".to_owned()
                } else {
                    format!("every one of its {} files goes in this run", d.file_ids.len())
                };
                let mut a = Action::new("drop_partition", shown, None, reason);
                a.files = i32::try_from(d.file_ids.len()).unwrap_or(i32::MAX);
                a.bytes = bytes;
                run.push(a);
                removed.extend(counts);
            }
            // Its files' rows go by DELETE instead, as in the plain layout.
            Err(e) => pgrx::debug1!("cortex_buffer: {shown} not dropped now ({e}); its files' rows are deleted"),
        }
    }
    Ok(removed)
}

/// How many `session_file` rows each span `[lo, hi)` of `spans` has, in their order (one
/// statement for all of them).
fn span_files(spans: &[(i64, i64, usize)]) -> Result<Vec<i64>, CbError> {
    if spans.is_empty() {
        return Ok(Vec::new());
    }
    let lows: Vec<i64> = spans.iter().map(|s| s.0).collect();
    let highs: Vec<i64> = spans.iter().map(|s| s.1).collect();
    with_index_scans(|| {
        as_definer(|| {
            Spi::connect(|c| {
                let rows = c
                    .select(
                        "SELECT (SELECT pg_catalog.count(*) FROM cortex_buffer.session_file f
                                  WHERE f.file_id OPERATOR(pg_catalog.>=) s.lo AND f.file_id OPERATOR(pg_catalog.<) s.hi)
                           FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.int8[]))
                                WITH ORDINALITY AS s(lo, hi, i)
                          ORDER BY s.i",
                        None,
                        &[lows.into(), highs.into()],
                    )
                    .map_err(spi)?;
                let mut out = Vec::with_capacity(spans.len());
                for r in rows {
                    out.push(r.get::<i64>(1).map_err(spi)?.unwrap_or(0));
                }
                if out.len() != spans.len() {
                    return Err(CbError::internal("a partition span was not counted"));
                }
                Ok(out)
            })
        })
    })
}

/// Drops the span's partitions, in a subtransaction that waits at most [`DROP_LOCK_TIMEOUT`]
/// for the tables (a dry run drops nothing), and deletes the span's `session_file` rows: those
/// locked when it was decided. With the parents locked, no indexer or push holds the tables, so
/// a file numbered into the span meanwhile has committed or rolled back by now; if one is there,
/// the partition stays. Returns the bytes the partitions held and each file's rows. (The event
/// rows are not counted by reading them: a week-old partition is rarely in memory, and reading
/// it would cost what the drop saves. The files' counters say how many, as for a `DELETE`.)
fn drop_span(d: &Doomed, dry_run: bool) -> Result<(i64, HashMap<i64, i64>), String> {
    let span = "file_id OPERATOR(pg_catalog.>=) $1 AND file_id OPERATOR(pg_catalog.<) $2";
    crate::pg::xact::subtransaction(|| {
        with_index_scans(|| {
            as_definer(|| {
                Spi::connect_mut(|c| {
                    let previous = c
                        .select("SELECT pg_catalog.current_setting('lock_timeout')", None, &[])
                        .map_err(spi)?
                        .next()
                        .and_then(|r| r.get::<String>(1).ok().flatten())
                        .unwrap_or_else(|| "0".into());
                    c.update(
                        "SELECT pg_catalog.set_config('lock_timeout', $1, true)",
                        None,
                        &[DROP_LOCK_TIMEOUT.into()],
                    )
                    .map_err(spi)?;
                    if !dry_run {
                        c.update(
                            "LOCK TABLE cortex_buffer.event, cortex_buffer.corrupt_line IN ACCESS EXCLUSIVE MODE",
                            None,
                            &[],
                        )
                        .map_err(spi)?;
                    }
                    let others = c
                        .select(
                            &format!(
                                "SELECT pg_catalog.count(*) FROM cortex_buffer.session_file
                                  WHERE {span} AND file_id OPERATOR(pg_catalog.<>) ALL ($3)"
                            ),
                            None,
                            &[d.lo.into(), d.hi.into(), d.file_ids.clone().into()],
                        )
                        .map_err(spi)?
                        .next()
                        .and_then(|r| r.get::<i64>(1).ok().flatten())
                        .unwrap_or(0);
                    if others > 0 {
                        return Err(CbError::internal(format!(
                            "{others} file(s) were numbered into its span while it was examined"
                        )));
                    }
                    let mut bytes = 0i64;
                    for &leaf in &d.leaves {
                        bytes += c
                            .select("SELECT pg_catalog.pg_total_relation_size($1)", None, &[leaf.into()])
                            .map_err(spi)?
                            .next()
                            .and_then(|r| r.get::<i64>(1).ok().flatten())
                            .unwrap_or(0);
                    }
                    if !dry_run {
                        for &leaf in &d.leaves {
                            c.update("SELECT cortex_buffer.event_partition_drop($1)", None, &[leaf.into()])
                                .map_err(spi)?;
                        }
                    }
                    let sql =
                        if dry_run { super::index_rows::COUNT_ROWS_SQL } else { super::index_rows::DELETE_ROWS_SQL };
                    let mut counts = HashMap::new();
                    for r in c.update(sql, None, &[d.file_ids.clone().into()]).map_err(spi)? {
                        if let (Some(id), Some(n)) = (r.get::<i64>(1).map_err(spi)?, r.get::<i64>(2).map_err(spi)?) {
                            counts.insert(id, n);
                        }
                    }
                    c.update("SELECT pg_catalog.set_config('lock_timeout', $1, true)", None, &[previous.into()])
                        .map_err(spi)?;
                    Ok((bytes, counts))
                })
            })
        })
    })
    .map_err(|f| f.to_string())
}
