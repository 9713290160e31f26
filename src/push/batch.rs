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

use super::store::{self, gap, pushed_from, Outcome, Push, Pushed};
use crate::indexer::event_store::{self, StreamItem};
use crate::indexer::file_row::{self, AlsoRecordMany, Finish};
use crate::indexer::settings::Settings;
use crate::pg::spi_util::{prepared, spi};
use crate::pg::xact::subtransaction;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::session_ordinal;
use cortex_buffer_core::indexer::index_file::{FileRules, Progress};
use cortex_buffer_core::indexer::index_plan::IndexState;
use cortex_buffer_core::int::count_i64;
use cortex_buffer_core::push::{
    decide_dialect, grow_head, held_after, identity_number, keep_whole, place, recorded_path, Held, Placement, Stream,
};

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
                        f.held = Held { len: prefix.len() as u64, bytes: prefix };
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
        let mut records = Vec::with_capacity(reads.len() + saves.len());
        for ((k, f, new), progress) in reads.iter().zip(progress) {
            let p = &pushes[*k];
            let old = &f.claimed.state;
            let held = held_after(
                &f.held,
                new,
                progress.offset.saturating_sub(old.offset),
                keep_whole(settings.max_line_bytes),
            );
            let report = progress.integrity.report(settings.max_corruption_ratio, false);
            let state = IndexState {
                offset: progress.offset,
                lines: progress.lines,
                generation: old.generation.max(1),
                device: 0,
                inode: u64::try_from(identity_number(p.identity)).unwrap_or(0),
                mtime_us: cortex_buffer_watch::pass::now_us(),
                fingerprint_len: f.head.len() as u64,
                fingerprint: crc32fast::hash(&f.head),
                dialect: f.dialect,
                tail_unterminated: progress.tail_unterminated,
                tail_pending: progress.tail_pending,
                quarantined: false,
            };
            let action = if started[*k] {
                "new"
            } else if progress.offset > old.offset {
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
            records.push(Record::of(p, f, &held, progress.offset));
            finishes.push(Finish {
                file_id: f.file_id,
                old_offset: old.offset,
                old_generation: old.generation,
                state,
                integrity: progress.integrity,
                trusted: report.trusted,
            });
        }
        let also = AlsoRecordMany {
            key: "push.finish_many",
            columns: &RECORD_COLUMNS,
            with: RECORD_WITH,
            sets: RECORD_SETS,
            args: Record::args(&records),
        };
        let recorded = file_row::finish_many_with(client, &finishes, Some(also))?;
        if recorded.len() != finishes.len() {
            return Err(CbError::internal("a pushed file's offset moved under its lock"));
        }
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
    for (k, f, new) in reads {
        let p = &pushes[*k];
        let old = &f.claimed.state;
        lines += memchr::memchr_iter(b'\n', new).count() + memchr::memchr_iter(b'\n', &f.held.bytes).count() + 1;
        items.push(StreamItem {
            file_id: f.file_id,
            reader: Stream::new(&f.held, new),
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
            },
        });
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

/// What a push records of its file besides the offset: the pushed file's row and
/// `session_file`'s size, time and dialect (`store::push_finish_sql`, for many).
struct Record {
    file_id: i64,
    source: String,
    decided: bool,
    /// The file's first bytes, when this push grew them.
    head: Option<Vec<u8>>,
    held: Vec<u8>,
    held_len: i64,
    reported: Option<i64>,
    size: i64,
    dialect: Option<String>,
}

impl Record {
    fn of(p: &Push<'_>, f: &Pushed, held: &Held, committed: u64) -> Record {
        Record {
            file_id: f.file_id,
            source: p.source.to_owned(),
            decided: f.dialect_decided,
            head: f.head_changed.then(|| f.head.clone()),
            held: held.bytes.clone(),
            held_len: count_i64(held.len),
            reported: p.file_size.map(count_i64),
            size: count_i64(p.file_size.unwrap_or(0).max(committed.saturating_add(held.len))),
            dialect: f.dialect.map(|d| d.label().to_owned()),
        }
    }

    /// One array per column of [`RECORD_COLUMNS`].
    fn args(records: &[Record]) -> Vec<DatumWithOid<'static>> {
        vec![
            records.iter().map(|r| r.source.clone()).collect::<Vec<String>>().into(),
            records.iter().map(|r| r.decided).collect::<Vec<bool>>().into(),
            records.iter().map(|r| r.head.clone()).collect::<Vec<Option<Vec<u8>>>>().into(),
            records.iter().map(|r| r.held.clone()).collect::<Vec<Vec<u8>>>().into(),
            records.iter().map(|r| r.held_len).collect::<Vec<i64>>().into(),
            records.iter().map(|r| r.reported).collect::<Vec<Option<i64>>>().into(),
            records.iter().map(|r| r.size).collect::<Vec<i64>>().into(),
            records.iter().map(|r| r.dialect.clone()).collect::<Vec<Option<String>>>().into(),
        ]
    }
}

const RECORD_COLUMNS: [(&str, &str); 8] = [
    ("push_source", "text"),
    ("push_decided", "bool"),
    ("push_head", "bytea"),
    ("push_held", "bytea"),
    ("push_held_len", "int8"),
    ("push_reported", "int8"),
    ("push_size", "int8"),
    ("push_dialect", "text"),
];

/// The pushed file's row, from `u` (one row per file).
const RECORD_WITH: &str = "p AS (
    UPDATE cortex_buffer.pushed_file p
       SET source = u.push_source, dialect_decided = u.push_decided, head = coalesce(u.push_head, p.head),
           held = u.push_held, held_len = u.push_held_len, reported_size = coalesce(u.push_reported, p.reported_size),
           reported_at = CASE WHEN u.push_reported IS NULL THEN p.reported_at ELSE pg_catalog.now() END,
           pushed_at = pg_catalog.now(), pushes = p.pushes OPERATOR(pg_catalog.+) 1
      FROM u WHERE p.file_id OPERATOR(pg_catalog.=) u.id)";

/// `session_file`'s (as `f`) size, time and dialect, from `u`.
const RECORD_SETS: &str = "dialect = u.push_dialect, size_bytes = GREATEST(f.size_bytes, u.push_size),
    mtime = pg_catalog.now(), last_seen = pg_catalog.now()";

/// Records what the server holds of files a push indexed nothing of (replays, held tails), in
/// one statement.
fn save_many(client: &mut SpiClient<'_>, records: &[Record]) -> Result<(), CbError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_save_of_many_unnests_one_array_per_recorded_column() {
        let sql = save_many_sql();
        assert!(sql.contains("pg_catalog.unnest($9::pg_catalog.text[])") && !sql.contains("$10"));
        assert!(sql.contains("AS u(id, push_source, push_decided,"));
        assert!(sql.contains("UPDATE cortex_buffer.pushed_file p"));
    }
}
