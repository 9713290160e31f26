//! A shipper's pushes applied together (`append_session_batch`): the rules of one push
//! (`store::apply`), with the statements shared by the whole batch. One statement locks every
//! file the batch continues, one creates the new ones, one opening of the event table inserts
//! every file's lines, and one statement records every file's new state. Per push, only the
//! judging and the inserting of its own lines is left.
//!
//! The shared path takes the common cases: a file continued, replayed, or started. Anything
//! rarer (a rewritten file, an unterminated last line continued, two pushes of one relpath) and
//! any failure hand the whole batch to `store::apply`, one push at a time, after rolling back
//! what the shared path did: the one-by-one path is the reference, and isolates a failing file.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use super::store::{
    self, concluded, finish_all, gap, pushed_from, save_many, stream_of, Outcome, Push, Pushed, Record,
};
use crate::indexer::event_store;
use crate::indexer::file_row;
use crate::indexer::settings::Settings;
use crate::pg::spi_util::{prepared, spi};
use crate::pg::xact::subtransaction;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::session_ordinal;
use cortex_buffer_core::indexer::index_file::Progress;
use cortex_buffer_core::int::count_i64;
use cortex_buffer_core::push::{decide_dialect, grow_head, identity_number, place, recorded_path, Held, Placement};

/// Applies `pushes` in the current transaction (as the definer role), in their order: the
/// shared path when it can, else one by one. Each outcome is the one `store::apply` gives.
pub(super) fn apply_batch(pushes: &[Push<'_>], settings: &Settings) -> Result<Vec<Outcome>, CbError> {
    if pushes.len() > 1 && distinct_relpaths(pushes) {
        // Rolled back whole when it hands over: nothing it locked, created or inserted stays.
        match subtransaction(|| together(pushes, settings)) {
            Ok(outcomes) => {
                SHARED_BATCHES.with(|n| n.set(n.get() + 1));
                return Ok(outcomes);
            }
            Err(why) => pgrx::debug1!("cortex_buffer: a batch of {} pushes goes one by one: {why}", pushes.len()),
        }
    }
    pushes.iter().map(|p| store::apply(p, settings)).collect()
}

thread_local! {
    /// Batches this backend applied on the shared path (tests see which path a batch took).
    static SHARED_BATCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many batches this backend applied on the shared path.
#[cfg(any(test, feature = "pg_test"))]
pub fn shared_batches() -> u64 {
    SHARED_BATCHES.with(|n| n.get())
}

/// Whether no relpath comes twice: the shared path numbers a relpath's new file once.
fn distinct_relpaths(pushes: &[Push<'_>]) -> bool {
    let mut relpaths: Vec<&str> = pushes.iter().map(|p| p.relpath).collect();
    relpaths.sort_unstable();
    relpaths.windows(2).all(|w| w[0] != w[1])
}

/// The shared path's refusal: a case it leaves to the one-by-one path.
fn one_by_one() -> CbError {
    CbError::internal("left to the one-by-one path")
}

const TEXT_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);
const UUID_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDARRAYOID);
const INT8_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);

fn together(pushes: &[Push<'_>], settings: &Settings) -> Result<Vec<Outcome>, CbError> {
    Spi::connect_mut(|client| {
        let all: Vec<usize> = (0..pushes.len()).collect();
        let mut files = lock_many(client, pushes, &all)?;
        let mut started = vec![false; pushes.len()];
        let missing: Vec<usize> = all.iter().copied().filter(|&k| files[k].is_none()).collect();
        if !missing.is_empty() {
            // As one push does: the relpaths' locks, then look again, then create what is still
            // missing (a concurrent push may have created it meanwhile).
            lock_relpaths(client, pushes, &missing)?;
            let mut create = Vec::new();
            for (k, f) in missing.iter().zip(lock_many(client, pushes, &missing)?) {
                match f {
                    Some(f) => files[*k] = Some(f),
                    None => create.push(*k),
                }
            }
            for (k, f) in create_many(client, pushes, &create)? {
                files[k] = Some(f);
                started[k] = true;
            }
        }
        let mut outcomes: Vec<Option<Outcome>> = (0..pushes.len()).map(|_| None).collect();
        let mut saves: Vec<(usize, Pushed)> = Vec::new();
        let mut reads: Vec<(usize, Pushed, &[u8])> = Vec::new();
        for (k, (p, f)) in pushes.iter().zip(files).enumerate() {
            let mut f = f.ok_or_else(one_by_one)?;
            let committed = count_i64(f.committed());
            if f.claimed.state.quarantined {
                outcomes[k] = Some(Outcome { committed, events: 0, corrupt: 0, action: "quarantined" });
                continue;
            }
            let have = f.committed().saturating_add(f.held.len);
            let shrank = p.file_size.is_some_and(|size| size < have);
            let new: &[u8] = match place(have, &f.head, p.start, p.chunk) {
                _ if shrank && !started[k] => return Err(one_by_one()),
                Placement::Rewritten => return Err(one_by_one()),
                Placement::Gap { expected } => return Err(gap(p.relpath, p.start, expected)),
                Placement::Replay if !(p.last && f.held.len > 0) => {
                    outcomes[k] = Some(Outcome { committed, events: 0, corrupt: 0, action: "replayed" });
                    saves.push((k, f));
                    continue;
                }
                Placement::Replay => &[],
                Placement::Continue { skip } => p.chunk.get(skip..).unwrap_or_default(),
            };
            if f.claimed.state.tail_unterminated && !new.is_empty() {
                return Err(one_by_one());
            }
            let head_before = f.head.len();
            grow_head(&mut f.head, have, new);
            f.head_changed = f.head.len() != head_before;
            if !f.dialect_decided {
                let mut prefix = f.held.bytes.clone();
                prefix.extend_from_slice(new);
                match decide_dialect(&p.file_name, p.layout, &prefix, p.last) {
                    None => {
                        f.held = Held { len: prefix.len() as u64, bytes: prefix, reduction: None };
                        let action = if started[k] { "new" } else { "held" };
                        outcomes[k] = Some(Outcome { committed: 0, events: 0, corrupt: 0, action });
                        saves.push((k, f));
                        continue;
                    }
                    Some(d) => {
                        f.dialect = d;
                        f.dialect_decided = true;
                    }
                }
            }
            reads.push((k, f, new));
        }
        let progress = index_all(client, pushes, &reads, settings)?;
        let mut finishes = Vec::with_capacity(reads.len());
        let mut records = Vec::with_capacity(reads.len());
        for ((k, f, new), progress) in reads.iter().zip(progress) {
            let (finish, record, _) = concluded(&pushes[*k], f, new, &progress, settings);
            let action = if started[*k] {
                "new"
            } else if progress.offset > f.committed() {
                "appended"
            } else {
                "held"
            };
            outcomes[*k] = Some(Outcome {
                committed: count_i64(progress.offset),
                events: count_i64(progress.events_added),
                corrupt: count_i64(progress.corrupt_added),
                action,
            });
            finishes.push(finish);
            records.push(record);
        }
        finish_all(client, &finishes, &records)?;
        let saved: Vec<Record> =
            saves.iter().map(|(k, f)| Record::of(&pushes[*k], f, &f.held, f.committed())).collect();
        save_many(client, &saved)?;
        outcomes.into_iter().map(|o| o.ok_or_else(|| CbError::internal("a push of the batch has no outcome"))).collect()
    })
}

/// Judges and inserts every read's held tail and new bytes with one opening of the event table:
/// each one's progress, in `reads`' order.
fn index_all(
    client: &mut SpiClient<'_>,
    pushes: &[Push<'_>],
    reads: &[(usize, Pushed, &[u8])],
    settings: &Settings,
) -> Result<Vec<Progress>, CbError> {
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    let mut lines = 0;
    let mut items = Vec::with_capacity(reads.len());
    // Each held over-long line's reducer, read back once: the readers borrow them.
    let resumes: Vec<_> = reads.iter().map(|(_, f, _)| f.held.resume()).collect();
    for ((k, f, new), resume) in reads.iter().zip(&resumes) {
        let (item, at_most) = stream_of(&pushes[*k], f, new, settings, resume.as_ref());
        lines += at_most;
        items.push(item);
    }
    event_store::index_streams(client, items, settings, lines)
}

/// The rows of `pushes[at]` (each at most once), sorted by job, relpath and identity so that
/// batches take their locks in one order, as `(job ids, relpaths, identities, positions)`.
fn keys(pushes: &[Push<'_>], at: &[usize]) -> (Vec<Uuid>, Vec<String>, Vec<String>, Vec<usize>) {
    let mut order = at.to_vec();
    order.sort_by(|&a, &b| {
        let (x, y) = (&pushes[a], &pushes[b]);
        (x.job.as_bytes(), x.relpath, x.identity).cmp(&(y.job.as_bytes(), y.relpath, y.identity))
    });
    let jobs = order.iter().map(|&k| pushes[k].job).collect();
    let relpaths = order.iter().map(|&k| pushes[k].relpath.to_owned()).collect();
    let identities = order.iter().map(|&k| pushes[k].identity.to_owned()).collect();
    (jobs, relpaths, identities, order)
}

/// The latest file of each of `pushes[at]`'s job, relpath and identity, both its rows locked
/// (one statement): in `at`'s order, `None` where there is none yet.
fn lock_many(client: &mut SpiClient<'_>, pushes: &[Push<'_>], at: &[usize]) -> Result<Vec<Option<Pushed>>, CbError> {
    let (jobs, relpaths, identities, order) = keys(pushes, at);
    let stmt = prepared(
        client,
        "push.lock_many",
        || {
            format!(
                "SELECT a.i, x.* FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.uuid[]),
                                                pg_catalog.unnest($2::pg_catalog.text[]),
                                                pg_catalog.unnest($3::pg_catalog.text[]))
                                      WITH ORDINALITY AS a(job, relpath, identity, i)
                  CROSS JOIN LATERAL ({}) AS x",
                store::lock_select("a.job", "a.relpath", "a.identity")
            )
        },
        &[UUID_ARRAY, TEXT_ARRAY, TEXT_ARRAY],
    )?;
    let rows = client.update(&*stmt, None, &[jobs.into(), relpaths.into(), identities.into()]).map_err(spi)?;
    let mut found: Vec<Option<Pushed>> = (0..pushes.len()).map(|_| None).collect();
    if !rows.is_empty() {
        let ordinals = file_row::Ordinals::of(&rows)?;
        for r in rows {
            let i = r.get::<i64>(1).map_err(spi)?.unwrap_or(0);
            let k = usize::try_from(i - 1).ok().and_then(|i| order.get(i).copied());
            let k = k.ok_or_else(|| CbError::internal(format!("a locked pushed file of no push ({i})")))?;
            found[k] = Some(pushed_from(&r, &ordinals, 2)?);
        }
    }
    Ok(at.iter().map(|&k| found[k].take()).collect())
}

/// Takes the advisory lock of each of `pushes[at]`'s job and relpath, to the end of the
/// transaction: what serialises the creation of a relpath's files (as one push takes it). Only
/// if each is free: a batch that waited here while holding its other files' row locks could
/// close a cycle with another batch (one that holds a row lock of a file this one just saw
/// created, and waits for one of these), so a busy one hands the batch to the one-by-one path.
fn lock_relpaths(client: &mut SpiClient<'_>, pushes: &[Push<'_>], at: &[usize]) -> Result<(), CbError> {
    let jobs: Vec<String> = at.iter().map(|&k| pushes[k].job.to_string()).collect();
    let relpaths: Vec<String> = at.iter().map(|&k| pushes[k].relpath.to_owned()).collect();
    let stmt = prepared(
        client,
        "push.create_locks",
        || {
            format!(
                "SELECT pg_catalog.bool_and(pg_catalog.pg_try_advisory_xact_lock(k.key))
                   FROM (SELECT DISTINCT {} AS key
                           FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]),
                                           pg_catalog.unnest($2::pg_catalog.text[])) AS a(job, relpath)
                          ORDER BY 1 OFFSET 0) AS k",
                store::create_lock_key("a.job", "a.relpath")
            )
        },
        &[TEXT_ARRAY, TEXT_ARRAY],
    )?;
    let all_free = client
        .update(&*stmt, Some(1), &[jobs.into(), relpaths.into()])
        .map_err(spi)?
        .first()
        .get_one::<bool>()
        .map_err(spi)?;
    match all_free {
        Some(true) => Ok(()),
        _ => Err(one_by_one()),
    }
}

/// Starts a new file for each of `pushes[at]` (the caller holds their relpaths' locks), numbered
/// as one push numbers it: `(position, file)` for each.
fn create_many(client: &mut SpiClient<'_>, pushes: &[Push<'_>], at: &[usize]) -> Result<Vec<(usize, Pushed)>, CbError> {
    if at.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = prepared(
        client,
        "push.create_many",
        || CREATE_MANY_SQL.to_owned(),
        &[TEXT_ARRAY, TEXT_ARRAY, INT8_ARRAY, UUID_ARRAY, INT8_ARRAY, TEXT_ARRAY, TEXT_ARRAY, TEXT],
    )?;
    let of = |f: &dyn Fn(&Push<'_>) -> String| -> Vec<String> { at.iter().map(|&k| f(&pushes[k])).collect() };
    let args: [DatumWithOid<'_>; 8] = [
        of(&|p| recorded_path(p.relpath)).into(),
        of(&|p| p.job_dir.clone()).into(),
        at.iter().map(|&k| identity_number(pushes[k].identity)).collect::<Vec<i64>>().into(),
        at.iter().map(|&k| pushes[k].job).collect::<Vec<Uuid>>().into(),
        at.iter().map(|&k| session_ordinal(&pushes[k].file_name)).collect::<Vec<Option<i64>>>().into(),
        of(&|p| p.relpath.to_owned()).into(),
        of(&|p| p.identity.to_owned()).into(),
        pushes[at[0]].source.into(),
    ];
    let rows = client.update(&*stmt, None, &args).map_err(spi)?;
    let mut created = Vec::with_capacity(at.len());
    for r in rows {
        let file_id = r.get::<i64>(1).map_err(spi)?.unwrap_or(0);
        let relpath = r.get::<String>(2).map_err(spi)?.unwrap_or_default();
        let k = at
            .iter()
            .copied()
            .find(|&k| pushes[k].relpath == relpath)
            .ok_or_else(|| CbError::internal(format!("a pushed file was created for no push ({relpath})")))?;
        created.push((k, store::created(file_id)));
    }
    if created.len() != at.len() {
        return Err(CbError::internal("a pushed file's rows were not created"));
    }
    let ids: Vec<i64> = created.iter().map(|(_, f)| f.file_id).collect();
    crate::partition::ensure_for(&ids)?;
    Ok(created)
}

/// One push's numbering and rows, for many: each relpath's next number, its recorded path (the
/// first file under its plain path, a later one `#n`, zero-padded to 6 digits), both rows.
const CREATE_MANY_SQL: &str = "
    WITH a AS (
        SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]),
                                 pg_catalog.unnest($3::pg_catalog.int8[]), pg_catalog.unnest($4::pg_catalog.uuid[]),
                                 pg_catalog.unnest($5::pg_catalog.int8[]), pg_catalog.unnest($6::pg_catalog.text[]),
                                 pg_catalog.unnest($7::pg_catalog.text[]))
               WITH ORDINALITY AS a(path, job_dir, inode, job, ordinal, relpath, identity, i)
    ), numbered AS (
        SELECT a.*, coalesce((SELECT pg_catalog.max(p.n) FROM cortex_buffer.pushed_file p
                               WHERE p.job_id OPERATOR(pg_catalog.=) a.job
                                 AND p.relpath OPERATOR(pg_catalog.=) a.relpath), 0) OPERATOR(pg_catalog.+) 1 AS n
          FROM a
    ), r AS (
        SELECT numbered.*,
               CASE WHEN n OPERATOR(pg_catalog.=) 1 THEN path
                    ELSE path OPERATOR(pg_catalog.||) '#' OPERATOR(pg_catalog.||)
                         pg_catalog.lpad(n::pg_catalog.text, GREATEST(6, pg_catalog.length(n::pg_catalog.text)), '0')
               END AS recorded
          FROM numbered
    ), f AS (
        INSERT INTO cortex_buffer.session_file (path, job_dir, size_bytes, mtime, device, inode, job_id, session_ordinal)
        SELECT r.recorded, r.job_dir, 0, pg_catalog.now(), 0, r.inode, r.job, r.ordinal FROM r ORDER BY r.i
        RETURNING file_id, path
    )
    INSERT INTO cortex_buffer.pushed_file (file_id, job_id, relpath, n, identity, first_source, source)
    SELECT f.file_id, r.job, r.relpath, r.n, r.identity, $8, $8 FROM r JOIN f ON f.path OPERATOR(pg_catalog.=) r.recorded
    RETURNING file_id, relpath";
