//! The workers' shared memory: one slot per indexer process (who it is, so `index_now()` can set
//! its latch, and what it is doing), and one queue per process of the job directories the first
//! process (the watcher) hands it. Exists only when the library is preloaded; a crash restart of
//! the cluster re-creates it zeroed.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic, PgLwLock};

use crate::pg::guc::MAX_WORKERS;

const SLOTS: usize = MAX_WORKERS as usize;

/// Job directories a queue holds before it overflows into a rescan of its partition.
pub const QUEUE_LEN: usize = 128;
/// The longest directory name a queue entry holds (`NAME_MAX`); a longer one cannot exist.
const NAME_BYTES: usize = 255;

/// What a worker is doing, as `index_now()` needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No worker process is registered in the slot.
    Absent = 0,
    /// Running and indexing.
    Active = 1,
    /// Running but `cortex_buffer.worker_enabled` is off.
    Disabled = 2,
    /// Running but waiting for a condition (extension missing, recovery, unusable directory).
    Waiting = 3,
}

impl Phase {
    fn from_u32(v: u32) -> Phase {
        match v {
            1 => Phase::Active,
            2 => Phase::Disabled,
            3 => Phase::Waiting,
            _ => Phase::Absent,
        }
    }
}

/// How a worker learns of changes, for `indexer_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watching {
    /// Not decided yet, or not the watcher's business (a worker that is handed directories).
    None = 0,
    /// Kernel notification.
    Notify = 1,
    /// Polling, as configured.
    Poll = 2,
    /// Polling because notification could not be set up (`auto`, or `notify` that failed).
    Fallback = 3,
    /// Handed its directories by the first worker.
    Handed = 4,
}

impl Watching {
    fn from_u32(v: u32) -> Watching {
        match v {
            1 => Watching::Notify,
            2 => Watching::Poll,
            3 => Watching::Fallback,
            4 => Watching::Handed,
            _ => Watching::None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Watching::None => "starting",
            Watching::Notify => "notify",
            Watching::Poll => "poll",
            Watching::Fallback => "poll (fallback)",
            Watching::Handed => "handed by worker 1",
        }
    }
}

#[derive(Default)]
#[repr(C)]
pub struct WorkerSlot {
    pid: AtomicI32,
    procno: AtomicI32,
    phase: AtomicU32,
    watching: AtomicU32,
    /// Start of the last pass (microseconds since the Unix epoch) and how long it took.
    last_pass_us: AtomicI64,
    last_pass_duration_us: AtomicI64,
    passes: AtomicU64,
    /// Start of the last walk of the whole volume (or partition).
    last_rescan_us: AtomicI64,
    rescans: AtomicU64,
    /// Directories watched (the watcher only).
    watches: AtomicU64,
    /// Session files this worker tracks.
    files: AtomicU64,
    /// Since the worker started.
    events_indexed: AtomicU64,
    errors: AtomicU64,
    /// Set by `index_now()` and by the watcher: walk the whole partition at the next wake.
    rescan_requested: AtomicBool,
}

#[derive(Default)]
#[repr(C)]
pub struct Slots {
    slots: [WorkerSlot; SLOTS],
}

// SAFETY: only atomics, valid at any address and in any process.
unsafe impl PGRXSharedMemory for Slots {}

/// One worker's queue of job directories to look at.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct DirQueue {
    len: usize,
    /// Set when a directory did not fit: the worker walks its whole partition instead.
    overflowed: bool,
    lens: [u8; QUEUE_LEN],
    names: [[u8; NAME_BYTES]; QUEUE_LEN],
}

impl Default for DirQueue {
    fn default() -> DirQueue {
        DirQueue { len: 0, overflowed: false, lens: [0; QUEUE_LEN], names: [[0; NAME_BYTES]; QUEUE_LEN] }
    }
}

#[derive(Clone, Copy)]
#[repr(C)]
pub struct DirQueues {
    queues: [DirQueue; SLOTS],
}

impl Default for DirQueues {
    fn default() -> DirQueues {
        DirQueues { queues: [DirQueue::default(); SLOTS] }
    }
}

// SAFETY: plain bytes and integers, valid at any address and in any process.
unsafe impl PGRXSharedMemory for DirQueues {}

static SLOTS_SHM: PgAtomic<Slots> = unsafe { PgAtomic::new(c"cortex_buffer_worker_slots") };
static QUEUES: PgLwLock<DirQueues> = unsafe { PgLwLock::new(c"cortex_buffer_worker_queues") };

/// Set in `_PG_init` of a preloaded library; inherited by every backend forked afterwards.
static SHMEM_ATTACHED: AtomicBool = AtomicBool::new(false);

/// Requests the slots and queues; only valid while `shared_preload_libraries` is being
/// processed.
pub fn init() {
    pg_shmem_init!(SLOTS_SHM);
    pg_shmem_init!(QUEUES);
    SHMEM_ATTACHED.store(true, Ordering::Relaxed);
}

fn slots() -> Option<&'static [WorkerSlot; SLOTS]> {
    SHMEM_ATTACHED.load(Ordering::Relaxed).then(|| &SLOTS_SHM.get().slots)
}

fn slot(worker: usize) -> Option<&'static WorkerSlot> {
    slots()?.get(worker)
}

/// Whether the library was preloaded (and so a worker can exist at all).
pub fn preloaded() -> bool {
    slots().is_some()
}

/// This process's worker number, set by [`register_self`].
static ME: AtomicU32 = AtomicU32::new(0);

fn me() -> usize {
    ME.load(Ordering::Relaxed) as usize
}

/// Called by a worker at start: records its pid and proc number, and clears them at exit.
pub fn register_self(worker: usize) {
    ME.store(u32::try_from(worker).unwrap_or(0), Ordering::Relaxed);
    let Some(slot) = slot(worker) else { return };
    // SAFETY: MyProc is this worker's PGPROC (background workers with shared-memory access get
    // one before their main function runs).
    let procno = unsafe { pgrx::pg_sys::MyProc.as_ref().map(|p| p.pgprocno).unwrap_or(-1) };
    slot.procno.store(procno, Ordering::SeqCst);
    slot.pid.store(unsafe { pgrx::pg_sys::MyProcPid }, Ordering::SeqCst);
    unsafe { pgrx::pg_sys::on_shmem_exit(Some(unregister_self), pgrx::pg_sys::Datum::from(0)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn unregister_self(_code: i32, _arg: pgrx::pg_sys::Datum) {
    if let Some(slot) = slot(me()) {
        slot.phase.store(Phase::Absent as u32, Ordering::SeqCst);
        slot.watching.store(Watching::None as u32, Ordering::SeqCst);
        slot.pid.store(0, Ordering::SeqCst);
        slot.procno.store(-1, Ordering::SeqCst);
    }
}

pub fn set_phase(phase: Phase) {
    if let Some(slot) = slot(me()) {
        slot.phase.store(phase as u32, Ordering::Relaxed);
    }
}

pub fn set_watching(watching: Watching, watches: usize) {
    if let Some(slot) = slot(me()) {
        slot.watching.store(watching as u32, Ordering::Relaxed);
        slot.watches.store(u64::try_from(watches).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The first worker's phase as seen from another backend (the one `index_now()` reports on);
/// `None` when the library is not preloaded.
pub fn phase() -> Option<Phase> {
    let slot = slot(0)?;
    if slot.pid.load(Ordering::SeqCst) == 0 {
        return Some(Phase::Absent);
    }
    Some(Phase::from_u32(slot.phase.load(Ordering::SeqCst)))
}

/// Sets worker `worker`'s latch. Returns false when no live worker holds the slot.
pub fn wake(worker: usize) -> bool {
    let Some(slot) = slot(worker) else { return false };
    let pid = slot.pid.load(Ordering::SeqCst);
    let procno = slot.procno.load(Ordering::SeqCst);
    if pid == 0 || procno < 0 {
        return false;
    }
    // SAFETY: ProcGlobal->allProcs has allProcCount entries for the life of the cluster; the pid
    // check makes sure the slot still belongs to our worker (a reused PGPROC would only get a
    // spurious, harmless wake-up anyway).
    unsafe {
        let Some(global) = pgrx::pg_sys::ProcGlobal.as_ref() else { return false };
        let Ok(index) = u32::try_from(procno) else { return false };
        if index >= global.allProcCount {
            return false;
        }
        let proc_ = global.allProcs.add(index as usize);
        if (*proc_).pid != pid {
            return false;
        }
        pgrx::pg_sys::SetLatch(&raw mut (*proc_).procLatch);
    }
    true
}

/// Asks every worker for a walk of its whole partition and wakes it (`index_now()`); true when
/// the first worker was there to wake.
pub fn wake_all_for_rescan(workers: usize) -> bool {
    let mut first = false;
    for w in 0..workers.min(SLOTS) {
        if let Some(slot) = slot(w) {
            slot.rescan_requested.store(true, Ordering::SeqCst);
        }
        let woke = wake(w);
        if w == 0 {
            first = woke;
        }
    }
    first
}

/// Asks worker `worker` for a walk of its whole partition and wakes it.
pub fn request_rescan(worker: usize) {
    if let Some(slot) = slot(worker) {
        slot.rescan_requested.store(true, Ordering::SeqCst);
    }
    wake(worker);
}

/// Takes this worker's rescan request, if any.
pub fn take_rescan_request() -> bool {
    slot(me()).is_some_and(|s| s.rescan_requested.swap(false, Ordering::SeqCst))
}

/// Hands `dirs` to worker `worker` and wakes it; a full queue makes it walk its partition.
pub fn hand(worker: usize, dirs: &[&str]) {
    if dirs.is_empty() || !preloaded() {
        return;
    }
    {
        let mut queues = QUEUES.exclusive();
        let Some(q) = queues.queues.get_mut(worker) else { return };
        for dir in dirs {
            let bytes = dir.as_bytes();
            // A directory already waiting in the queue needs no second entry.
            let queued = q
                .lens
                .iter()
                .zip(q.names.iter())
                .take(q.len)
                .any(|(len, name)| name.get(..usize::from(*len)).is_some_and(|n| n == bytes));
            if queued {
                continue;
            }
            match (q.names.get_mut(q.len), q.lens.get_mut(q.len), u8::try_from(bytes.len())) {
                (Some(name), Some(len), Ok(n)) if bytes.len() <= NAME_BYTES => {
                    if let Some(dst) = name.get_mut(..bytes.len()) {
                        dst.copy_from_slice(bytes);
                    }
                    *len = n;
                    q.len += 1;
                }
                _ => q.overflowed = true,
            }
        }
    }
    wake(worker);
}

/// What the first worker handed this one: directories, and whether the queue overflowed.
pub fn take_handed() -> (Vec<String>, bool) {
    if !preloaded() {
        return (Vec::new(), false);
    }
    let mut queues = QUEUES.exclusive();
    let Some(q) = queues.queues.get_mut(me()) else { return (Vec::new(), false) };
    let mut dirs = Vec::with_capacity(q.len);
    for i in 0..q.len.min(QUEUE_LEN) {
        let len = usize::from(q.lens.get(i).copied().unwrap_or(0));
        if let Some(name) = q.names.get(i).and_then(|n| n.get(..len)) {
            if let Ok(s) = std::str::from_utf8(name) {
                dirs.push(s.to_owned());
            }
        }
    }
    let overflowed = q.overflowed;
    q.len = 0;
    q.overflowed = false;
    (dirs, overflowed)
}

/// Records a finished pass (worker only); `rescan` when it walked its whole partition.
pub fn record_pass(started_us: i64, took: std::time::Duration, events: u64, rescan: bool, files: usize) {
    if let Some(slot) = slot(me()) {
        slot.last_pass_us.store(started_us, Ordering::Relaxed);
        slot.last_pass_duration_us.store(i64::try_from(took.as_micros()).unwrap_or(i64::MAX), Ordering::Relaxed);
        slot.passes.fetch_add(1, Ordering::Relaxed);
        slot.events_indexed.fetch_add(events, Ordering::Relaxed);
        slot.files.store(u64::try_from(files).unwrap_or(u64::MAX), Ordering::Relaxed);
        if rescan {
            slot.last_rescan_us.store(started_us, Ordering::Relaxed);
            slot.rescans.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts a file that failed to index (worker only).
pub fn count_error() {
    if let Some(slot) = slot(me()) {
        slot.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a worker's slot says, for `indexer_status`.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub pid: i32,
    pub phase: Option<Phase>,
    pub watching: Watching,
    pub watches: u64,
    pub last_pass_us: i64,
    pub last_pass_duration_us: i64,
    pub passes: u64,
    pub last_rescan_us: i64,
    pub rescans: u64,
    pub files: u64,
    pub events_indexed: u64,
    pub errors: u64,
}

/// Worker `worker`'s figures; `phase` is `None` when the library is not preloaded.
pub fn stats(worker: usize) -> Stats {
    let empty = Stats {
        pid: 0,
        phase: None,
        watching: Watching::None,
        watches: 0,
        last_pass_us: 0,
        last_pass_duration_us: 0,
        passes: 0,
        last_rescan_us: 0,
        rescans: 0,
        files: 0,
        events_indexed: 0,
        errors: 0,
    };
    let Some(slot) = slot(worker) else { return empty };
    let pid = slot.pid.load(Ordering::Relaxed);
    Stats {
        pid,
        phase: Some(if pid == 0 { Phase::Absent } else { Phase::from_u32(slot.phase.load(Ordering::Relaxed)) }),
        watching: Watching::from_u32(slot.watching.load(Ordering::Relaxed)),
        watches: slot.watches.load(Ordering::Relaxed),
        last_pass_us: slot.last_pass_us.load(Ordering::Relaxed),
        last_pass_duration_us: slot.last_pass_duration_us.load(Ordering::Relaxed),
        passes: slot.passes.load(Ordering::Relaxed),
        last_rescan_us: slot.last_rescan_us.load(Ordering::Relaxed),
        rescans: slot.rescans.load(Ordering::Relaxed),
        files: slot.files.load(Ordering::Relaxed),
        events_indexed: slot.events_indexed.load(Ordering::Relaxed),
        errors: slot.errors.load(Ordering::Relaxed),
    }
}
