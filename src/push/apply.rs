//! Applying pushes (`append_session_bytes` is a batch of one, `append_session_batch` many): one
//! path. One statement locks every file the batch continues, one creates the new ones, one
//! opening of the event table judges and inserts every file's lines with the tailer's own code
//! (`event_store::index_streams`), and one statement records every file's new state
//! (`store::finish_all`, `store::save_many`), in the caller's transaction.
//!
//! A batch of many takes the common cases: a file continued, replayed, or started. Anything rarer
//! (a rewritten file, an unterminated last line continued, two pushes of one relpath, a relpath
//! being created by another connection) and any failure roll back what the batch did and apply
//! its pushes one at a time, each a batch of one, on the same path. A batch of one handles every
//! case, and a failure to index its file is counted against the file and isolated, as the
//! tailer's is.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid, Uuid};

use super::store::{
    self, concluded, finish_all, gap, pushed_from, restart, save_many, settle_report, stream_of, Outcome, Push, Pushed,
    Record,
};
use crate::indexer::event_store;
use crate::indexer::file_row;
use crate::indexer::settings::Settings;
use crate::pg::planner::with_index_scans;
use crate::pg::spi_util::{prepared, spi};
use crate::pg::xact::subtransaction;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::indexer::dialect::session_ordinal;
use cortex_buffer_core::indexer::index_file::Progress;
use cortex_buffer_core::int::count_i64;
use cortex_buffer_core::push::{decide_dialect, grow_head, identity_number, place, recorded_path, Held, Placement};

/// What applying pushes did: each push's outcome, in order, and the bytes stored beyond the
/// pushed bytes (the held tail's pieces and reducer states), which the rate limit charges too.
pub(super) struct Applied {
    pub(super) outcomes: Vec<Outcome>,
    pub(super) stored: u64,
}

/// Applies `pushes` in the current transaction (as the definer role), in their order: together
/// when it can, else each as a batch of one. Its statements run on their generic plans, by index
/// (`pg::planner`): a custom plan cost a planning per statement and call, and a generic plan left
/// free read whole tables.
pub(super) fn apply_batch(pushes: &[Push<'_>], settings: &Settings) -> Result<Applied, CbError> {
    with_index_scans(|| apply_each(pushes, settings))
}

fn apply_each(pushes: &[Push<'_>], settings: &Settings) -> Result<Applied, CbError> {
    if pushes.len() > 1 && distinct_relpaths(pushes) {
        // Rolled back whole when it hands over: nothing it locked, created or inserted stays.
        match subtransaction(|| apply(pushes, settings)) {
            Ok(applied) => {
                SHARED_BATCHES.with(|n| n.set(n.get() + 1));
                return Ok(applied);
            }
            Err(why) => pgrx::debug1!("cortex_buffer: a batch of {} pushes goes one by one: {why}", pushes.len()),
        }
    }
    let mut all = Applied { outcomes: Vec::with_capacity(pushes.len()), stored: 0 };
    for p in pushes {
        let one = apply(std::slice::from_ref(p), settings)?;
        all.outcomes.extend(one.outcomes);
        all.stored = all.stored.saturating_add(one.stored);
    }
    Ok(all)
}

thread_local! {
    /// Batches of many this backend applied together (tests see which way a batch went).
    static SHARED_BATCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many batches of many this backend applied together.
#[cfg(any(test, feature = "pg_test"))]
pub fn shared_batches() -> u64 {
    SHARED_BATCHES.with(|n| n.get())
}

/// Whether no relpath comes twice: a batch numbers a relpath's new file once.
fn distinct_relpaths(pushes: &[Push<'_>]) -> bool {
    let mut relpaths: Vec<&str> = pushes.iter().map(|p| p.relpath).collect();
    relpaths.sort_unstable();
    relpaths.windows(2).all(|w| w[0] != w[1])
}

/// A batch of many's refusal: a case it leaves to batches of one.
fn one_by_one() -> CbError {
    CbError::internal("left to batches of one")
}

const TEXT_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);
const UUID_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::UUIDARRAYOID);
const INT8_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);

/// A push's file as the batch found or made it.
struct Found {
    file: Pushed,
    started: bool,
}

fn apply(pushes: &[Push<'_>], settings: &Settings) -> Result<Applied, CbError> {
    let alone = pushes.len() == 1;
    Spi::connect_mut(|client| {
        let found = find_or_create(client, pushes, alone)?;
        let mut outcomes: Vec<Option<Outcome>> = (0..pushes.len()).map(|_| None).collect();
        let mut saves: Vec<(usize, Pushed)> = Vec::new();
        let mut reads: Vec<(usize, Pushed, &[u8], bool)> = Vec::new();
        for (k, (p, found)) in pushes.iter().zip(found).enumerate() {
            match place_push(client, p, found, alone)? {
                Step::Done(outcome, f) => {
                    outcomes[k] = Some(outcome);
                    saves.push((k, f));
                }
                Step::Quarantined(outcome) => outcomes[k] = Some(outcome),
                Step::Index(f, new, started) => reads.push((k, f, new, started)),
            }
        }
        let mut stored = 0u64;
        if !reads.is_empty() {
            let indexed = if alone {
                index_alone(pushes, &reads, settings)?
            } else {
                Some(index_and_finish(client, pushes, &reads, settings)?)
            };
            match indexed {
                Some((progress, records)) => {
                    for ((k, f, _, started), progress) in reads.iter().zip(&progress) {
                        outcomes[*k] = Some(indexed_outcome(f, progress, *started));
                    }
                    stored = records.iter().map(Record::stored).sum();
                }
                None => {
                    // Its file's failure, counted and warned of: what the push held stays.
                    for (k, f, _, _) in reads {
                        outcomes[k] = Some(Outcome::nothing(f.committed(), "failed"));
                        saves.push((k, f));
                    }
                }
            }
        }
        let saved: Vec<Record> = saves.iter().map(|(k, f)| Record::saved(&pushes[*k], f)).collect();
        stored = stored.saturating_add(saved.iter().map(Record::stored).sum());
        save_many(client, &saved)?;
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| CbError::internal("a push of the batch has no outcome")))
            .collect::<Result<_, _>>()?;
        Ok(Applied { outcomes, stored })
    })
}

/// Every push's file, locked: the latest of its job, relpath and identity, or one started now.
fn find_or_create(client: &mut SpiClient<'_>, pushes: &[Push<'_>], alone: bool) -> Result<Vec<Found>, CbError> {
    let all: Vec<usize> = (0..pushes.len()).collect();
    let mut files = lock_many(client, pushes, &all)?;
    let mut started = vec![false; pushes.len()];
    let missing: Vec<usize> = all.iter().copied().filter(|&k| files[k].is_none()).collect();
    if !missing.is_empty() {
        // Another connection may be creating the same file right now (overlapping shippers):
        // take the relpaths' locks, then look again, then create what is still missing.
        lock_relpaths(client, pushes, &missing, alone)?;
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
    files.into_iter().zip(started).map(|(f, started)| Ok(Found { file: f.ok_or_else(one_by_one)?, started })).collect()
}

/// Where one push goes once its file is locked.
enum Step<'a> {
    /// Nothing to index: its outcome, and the file to record.
    Done(Outcome, Pushed),
    /// A quarantined file: nothing recorded.
    Quarantined(Outcome),
    /// Its held tail and these new bytes are to be indexed (the file was `started` by it).
    Index(Pushed, &'a [u8], bool),
}

/// Places one push against its file: a replay, a gap, a rewrite (a new file), a continued
/// last line (the file re-indexed), bytes held until the dialect is known, or bytes to index.
/// A batch of many leaves the rare cases to batches of one.
fn place_push<'a>(client: &mut SpiClient<'_>, p: &'a Push<'_>, found: Found, alone: bool) -> Result<Step<'a>, CbError> {
    let Found { file: mut f, mut started } = found;
    if f.claimed.state.quarantined {
        return Ok(Step::Quarantined(Outcome::nothing(f.committed(), "quarantined")));
    }
    let have = f.committed().saturating_add(f.held.len);
    // Its first bytes repeated differently, or the shipper sees it shorter than what the server
    // has: the file was rewritten in place. A new file, after this one, whose rows stay.
    let shrank = p.file_size.is_some_and(|size| size < have);
    if !started && (shrank || place(have, &f.head, p.start, p.chunk) == Placement::Rewritten) {
        if !alone {
            return Err(one_by_one());
        }
        (f, started) = rewritten(client, p, f)?;
    }
    let have = f.committed().saturating_add(f.held.len);
    let new: &[u8] = match place(have, &f.head, p.start, p.chunk) {
        Placement::Gap { expected } => return Err(gap(p.relpath, p.start, expected)),
        Placement::Rewritten => {
            return Err(CbError::internal("a new pushed file already differs from the chunk's first bytes"))
        }
        Placement::Replay if !(p.last && f.held.len > 0) => {
            return Ok(Step::Done(Outcome::nothing(f.committed(), "replayed"), f));
        }
        Placement::Replay => &[],
        Placement::Continue { skip } => p.chunk.get(skip..).unwrap_or_default(),
    };
    if f.claimed.state.tail_unterminated && !new.is_empty() {
        if !alone {
            return Err(one_by_one());
        }
        // The last line, judged unterminated when it settled, goes on: as the tailer, start
        // again from the first byte (a new generation); the shipper sends from 0.
        restart(client, &mut f)?;
        return Ok(Step::Done(Outcome::nothing(0, "reindex"), f));
    }
    let head_before = f.head.len();
    grow_head(&mut f.head, have, new);
    f.head_changed = f.head.len() != head_before;
    if !f.dialect_decided {
        let mut prefix = f.held.bytes.clone();
        prefix.extend_from_slice(new);
        match decide_dialect(&p.file_name, p.layout, &prefix, p.last) {
            None => {
                // Held whole until the dialect is known (at most the detection prefix and a
                // chunk): nothing is judged under rules that could change.
                f.hold(Held { len: prefix.len() as u64, bytes: prefix, reduction: None });
                let action = if started { "new" } else { "held" };
                return Ok(Step::Done(Outcome::nothing(0, action), f));
            }
            Some(d) => {
                f.dialect = d;
                f.dialect_decided = true;
            }
        }
    }
    Ok(Step::Index(f, new, started))
}

/// A push's file was rewritten in place: the file to continue instead (one a concurrent push
/// started for the same rewrite, under the relpath's lock, or a new one), and whether this
/// push started it.
fn rewritten(client: &mut SpiClient<'_>, p: &Push<'_>, f: Pushed) -> Result<(Pushed, bool), CbError> {
    let push = std::slice::from_ref(p);
    lock_relpaths(client, push, &[0], true)?;
    if let Some(Some(again)) = lock_many(client, push, &[0])?.pop() {
        if again.file_id != f.file_id {
            return Ok((again, false));
        }
    }
    // The old file's bytes past what the server has are gone with the rewrite: its report must
    // not keep recovery plans stale.
    settle_report(client, f.file_id)?;
    let (_, created) = create_many(client, push, &[0])?
        .pop()
        .ok_or_else(|| CbError::internal("a pushed file's rows were not created"))?;
    Ok((created, true))
}

/// A push's outcome once its lines were indexed to `progress`.
fn indexed_outcome(f: &Pushed, progress: &Progress, started: bool) -> Outcome {
    let action = if started {
        "new"
    } else if progress.offset > f.committed() {
        "appended"
    } else {
        "held"
    };
    Outcome {
        committed: count_i64(progress.offset),
        events: count_i64(progress.events_added),
        corrupt: count_i64(progress.corrupt_added),
        action,
    }
}

/// Indexes a batch of one's file in a subtransaction: a failure is rolled back alone, counted
/// against the file (quarantined after `quarantine_after`, as a tailed file is) and reported as
/// a WARNING; `None` then.
#[allow(clippy::type_complexity)]
fn index_alone(
    pushes: &[Push<'_>],
    reads: &[(usize, Pushed, &[u8], bool)],
    settings: &Settings,
) -> Result<Option<(Vec<Progress>, Vec<Record>)>, CbError> {
    let done = subtransaction(|| Spi::connect_mut(|client| index_and_finish(client, pushes, reads, settings)));
    match done {
        Ok(done) => Ok(Some(done)),
        Err(failure) => {
            let error = failure.to_string();
            for (k, f, _, _) in reads {
                let p = &pushes[*k];
                let quarantined =
                    subtransaction(|| file_row::record_failure(f.file_id, &error, settings.quarantine_after))
                        .unwrap_or(false);
                pgrx::warning!(
                    "cortex_buffer: could not index the chunk of \"{}\" pushed by \"{}\"{}: {error}",
                    p.relpath,
                    p.source,
                    if quarantined { " (the file is now quarantined)" } else { "" }
                );
            }
            Ok(None)
        }
    }
}

/// Indexes every read and records every file's new state (one statement): each one's progress
/// and record, in `reads`' order.
#[allow(clippy::type_complexity)]
fn index_and_finish(
    client: &mut SpiClient<'_>,
    pushes: &[Push<'_>],
    reads: &[(usize, Pushed, &[u8], bool)],
    settings: &Settings,
) -> Result<(Vec<Progress>, Vec<Record>), CbError> {
    let progress = index_all(client, pushes, reads, settings)?;
    let mut finishes = Vec::with_capacity(reads.len());
    let mut records = Vec::with_capacity(reads.len());
    for ((k, f, new, _), progress) in reads.iter().zip(&progress) {
        let (finish, record, _) = concluded(&pushes[*k], f, new, progress, settings);
        finishes.push(finish);
        records.push(record);
    }
    finish_all(client, &finishes, &records)?;
    Ok((progress, records))
}

/// Judges and inserts every read's held tail and new bytes with one opening of the event table:
/// each one's progress, in `reads`' order.
fn index_all(
    client: &mut SpiClient<'_>,
    pushes: &[Push<'_>],
    reads: &[(usize, Pushed, &[u8], bool)],
    settings: &Settings,
) -> Result<Vec<Progress>, CbError> {
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    let mut lines = 0;
    let mut items = Vec::with_capacity(reads.len());
    // Each held over-long line's reducer, read back once: the readers borrow them.
    let resumes: Vec<_> = reads.iter().map(|(_, f, _, _)| f.held.resume()).collect();
    for ((k, f, new, _), resume) in reads.iter().zip(&resumes) {
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
/// (one statement), then their held tails (another, which sees what a push waited for left): in
/// `at`'s order, `None` where there is none yet.
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
    let mut locked: Vec<&mut Pushed> = found.iter_mut().flatten().collect();
    store::read_held(client, &mut locked)?;
    Ok(at.iter().map(|&k| found[k].take()).collect())
}

/// Takes the advisory lock of each of `pushes[at]`'s job and relpath, to the end of the
/// transaction: what serialises the creation of a relpath's files. A batch of one waits for
/// it. A batch of many takes them only if each is free: one that waited here while holding its
/// other files' row locks could close a cycle with another batch (one that holds a row lock of
/// a file this one just saw created, and waits for one of these), so a busy one hands the batch
/// to batches of one.
fn lock_relpaths(client: &mut SpiClient<'_>, pushes: &[Push<'_>], at: &[usize], wait: bool) -> Result<(), CbError> {
    let jobs: Vec<String> = at.iter().map(|&k| pushes[k].job.to_string()).collect();
    let relpaths: Vec<String> = at.iter().map(|&k| pushes[k].relpath.to_owned()).collect();
    let (key, take) = if wait {
        (
            "push.create_locks_wait",
            "pg_catalog.count(pg_catalog.pg_advisory_xact_lock(k.key)) OPERATOR(pg_catalog.>=) 0",
        )
    } else {
        ("push.create_locks", "pg_catalog.bool_and(pg_catalog.pg_try_advisory_xact_lock(k.key))")
    };
    let stmt = prepared(
        client,
        key,
        || {
            format!(
                "SELECT {take}
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
