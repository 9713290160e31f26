//! The checkpoints a plan places in the job's files, from their marks
//! (`checkpoint::marks`): where each was stored, checked against the bytes now; the pods'
//! resumes; the checkpoint ids a marker line names; what the index dropped. The rules are the
//! core's (`recovery::marks`, `recovery::cycles`); this module reads what they need.

use std::collections::{BTreeMap, HashMap};

use pgrx::spi::SpiClient;
use pgrx::Uuid;

use super::index::IndexProbe;
use crate::checkpoint::marks::{self, Kind, Recorded};
use crate::indexer::file_access::Target;
use crate::pg::guc;
use crate::pg::spi_util::{prepared_read, spi};
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::recovery::choose::{held_elsewhere, PlanMark, SessionFile};
use cortex_buffer_core::recovery::cycles::{Place, Ref, Resume, Store};
use cortex_buffer_core::recovery::marks::{entry_exact, place_by_identity, resolve, Holds, Lookup, MarkFile};
use cortex_buffer_core::shared::format_uuid;

/// The shell's answers to the mark rules: the bytes now (read through the safe opener), or the
/// index's own fingerprint where the file cannot be read here (pushed, deleted).
pub struct ShellLookup<'p, 'a, 'c> {
    pub probe: &'p mut IndexProbe<'a, 'c>,
    pub files: &'p [SessionFile],
    /// Per file: the index's fingerprint of its first bytes (length, CRC-32).
    pub prints: &'p [(i64, u32)],
    /// Pushed files' first bytes as the server keeps them, by file id.
    pub pushed_heads: &'p HashMap<i64, Vec<u8>>,
}

impl Lookup for ShellLookup<'_, '_, '_> {
    fn holds(&mut self, session: usize, m: &MarkFile) -> Holds {
        let Some(f) = self.files.get(session) else { return Holds::No };
        if f.pushed.is_none() && !f.gone {
            if let Some(file) = Target::try_of(&f.path).and_then(|t| t.open(&f.path).ok()) {
                match marks::holds(&file, m) {
                    Some(true) => return Holds::Yes,
                    Some(false) => return Holds::No,
                    None => {}
                }
            }
        }
        if f.pushed.is_some() {
            // The server keeps a pushed file's first bytes: the marked head is theirs, or not. (A
            // rewrite the shipper reports starts another file: these bytes never change.)
            if let (Some(head), Some(bytes)) = (m.head, self.pushed_heads.get(&f.file_id)) {
                let len = usize::try_from(head.len).unwrap_or(usize::MAX);
                if let Some(prefix) = bytes.get(..len) {
                    return if marks::fingerprint_of(prefix) == head { Holds::Yes } else { Holds::No };
                }
            }
        }
        match (m.head, self.prints.get(session)) {
            // The server keeps a pushed file's first bytes: the same head is the same file.
            (Some(head), Some(&(len, crc))) if head.len == len => {
                if head.crc != crc {
                    Holds::No
                } else if f.pushed.is_some() {
                    Holds::Yes
                } else {
                    Holds::Unknown
                }
            }
            _ => Holds::Unknown,
        }
    }

    fn last_event_before(&mut self, session: usize, offset: i64) -> Option<i64> {
        self.probe.last_event_before(session, offset).ok().flatten()
    }
}

/// What the plan knows of the job's checkpoints and pods.
pub struct Anchors {
    /// The job's origin (no checkpoint) first, then every checkpoint's mark, placed.
    pub stores: Vec<Store>,
    /// The current checkpoint's store: the first of the latest run of its marks.
    pub plan_store: Option<usize>,
    /// Its mark resolved against the files now, for the decision tree.
    pub plan_mark: Option<PlanMark>,
    /// When the current checkpoint's mark was recorded, usable or not (a mark taken where the
    /// job's files could not be seen anchors nothing but the time).
    pub plan_at_us: Option<i64>,
    pub resumes: Vec<Resume>,
    /// Every checkpoint since the job's first is among the stores.
    pub origin_known: bool,
    pub crc_of_id: BTreeMap<String, u32>,
    /// When the index dropped bytes of the job's files it holds nowhere else.
    pub dropped_at: Vec<i64>,
}

pub(crate) const HISTORY_SQL: &str = "SELECT checkpoint_id, crc FROM cortex_buffer.checkpoint_history
      WHERE job_id OPERATOR(pg_catalog.=) $1";

/// Reads the job's marks and places them (`crc`: the current checkpoint's, if any).
pub fn anchors(
    client: &SpiClient<'_>,
    job: Uuid,
    crc: Option<u32>,
    look: &mut ShellLookup<'_, '_, '_>,
) -> Result<Anchors, CbError> {
    let recorded = marks::lookup_all(client, job)?;
    let stmt = prepared_read(client, "recovery.history_ids", || HISTORY_SQL.to_owned(), &[super::index::UUID])?;
    let mut crc_of_id = BTreeMap::new();
    for row in client.select(&*stmt, None, &[job.into()]).map_err(spi)? {
        let id: Option<Uuid> = row.get(1).map_err(spi)?;
        let c = row.get::<i64>(2).map_err(spi)?.and_then(|c| u32::try_from(c).ok());
        if let (Some(id), Some(c)) = (id, c) {
            crc_of_id.insert(format_uuid(id.as_bytes()), c);
        }
    }
    let checkpoints: Vec<&Recorded> = recorded.iter().filter(|r| r.kind != Kind::Resume).collect();
    // The marks kept are the newest: when as many as are kept exist, older ones may be gone; a
    // checkpoint_history entry without a mark is a checkpoint written before marks were kept.
    let keep = usize::try_from(guc::checkpoint_history_keep()).unwrap_or(usize::MAX);
    // Every checkpoint write_checkpoint stored (its history, kept as long) is among the marks,
    // or is the current one (which the plan places by its marker or its time when its mark is
    // gone).
    let known: std::collections::BTreeSet<u32> = checkpoints.iter().filter_map(|r| r.crc).chain(crc).collect();
    let origin_known =
        checkpoints.len() < keep && crc_of_id.len() < keep && crc_of_id.values().all(|c| known.contains(c));
    // The current checkpoint's store: the first of the latest run of marks of its CRC (storing
    // the same document again changes nothing).
    let plan_at = crc.and_then(|c| {
        let last = checkpoints.iter().rposition(|r| r.crc == Some(c))?;
        let mut first = last;
        while first > 0 && checkpoints.get(first - 1).is_some_and(|r| r.crc == Some(c)) {
            first -= 1;
        }
        Some(first)
    });
    let mut stores = vec![Store { reference: Ref::None, own: false, place: Place::Origin, at_us: i64::MIN }];
    let mut plan_store = None;
    let mut plan_mark = None;
    let plan_at_us = plan_at.and_then(|i| checkpoints.get(i)).map(|r| r.recorded_at_us);
    for (i, r) in checkpoints.iter().enumerate() {
        let repeat = i > 0 && checkpoints.get(i - 1).is_some_and(|p| p.crc == r.crc);
        if repeat && r.kind != Kind::Own && Some(i) != plan_at {
            continue;
        }
        // A mark whose pushed files may have been longer than the server had (a shipper behind)
        // is no high-water mark: its time places it instead.
        let usable = r.visible && r.mark.files.iter().all(|m| entry_exact(m, look.files));
        let place = if Some(i) == plan_at && usable {
            let resolved = resolve(look.files, &r.mark, look);
            let place = if resolved.missing.is_empty() { resolved.place() } else { Place::Unknown };
            plan_mark = Some(PlanMark { recorded_at_us: r.recorded_at_us, files_marked: r.mark.files.len(), resolved });
            place
        } else if usable {
            place_by_identity(look.files, &r.mark, look).unwrap_or(Place::Unknown)
        } else {
            // It saw none of the job's files (the database could not see them then, or a
            // shipper had not pushed them yet): its time places it, by the pods' clocks.
            Place::Time(Vec::new())
        };
        if Some(i) == plan_at {
            plan_store = Some(stores.len());
        }
        let reference = r.crc.map_or(Ref::Unknown, Ref::Crc);
        stores.push(Store { reference, own: r.kind == Kind::Own, place, at_us: r.recorded_at_us });
    }
    let resumes = recorded
        .iter()
        .filter(|r| r.kind == Kind::Resume && r.visible)
        .filter_map(|r| {
            Some(Resume {
                reference: r.crc.map_or(Ref::None, Ref::Crc),
                place: place_by_identity(look.files, &r.mark, look)?,
                at_us: r.recorded_at_us,
            })
        })
        .collect();
    let dropped_at = look
        .files
        .iter()
        .filter_map(|f| f.replaced.filter(|r| r.size > 0 && !held_elsewhere(look.files, f, *r)).map(|r| r.at_us))
        .collect();
    Ok(Anchors { stores, plan_store, plan_mark, plan_at_us, resumes, origin_known, crc_of_id, dropped_at })
}

/// The line at `offset` of a session file, read from the file itself (up to `max` bytes): for
/// an event whose payload the index could not store (a `\u0000`, a lone surrogate, nesting too
/// deep), so its input is hashed as the writer wrote it. `None` for a pushed or deleted file, or
/// when the line there is not whole any more.
pub fn raw_line(f: &SessionFile, offset: i64, max: usize) -> Option<String> {
    if f.pushed.is_some() || f.gone {
        return None;
    }
    use std::os::unix::fs::FileExt;
    let file = Target::try_of(&f.path)?.open(&f.path).ok()?;
    // Read a block at a time (the cap can be max_line_memory, far more than most lines), and
    // stop once the line's end is in.
    const BLOCK: usize = 64 << 10;
    let limit = max.saturating_add(1);
    let mut buf: Vec<u8> = Vec::new();
    let at = u64::try_from(offset).ok()?;
    let end = loop {
        let got = buf.len();
        if got >= limit {
            return None;
        }
        buf.resize(got + BLOCK.min(limit - got), 0);
        let n = file.read_at(buf.get_mut(got..)?, at + got as u64).ok()?;
        buf.truncate(got + n);
        if n == 0 {
            return None;
        }
        if let Some(p) = memchr::memchr(b'\n', buf.get(got..)?) {
            break got + p;
        }
    };
    Some(String::from_utf8_lossy(buf.get(..end)?).into_owned())
}
