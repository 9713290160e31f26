//! The worker's slot in shared memory: who it is (so `index_now()` can set its latch) and what
//! it is doing. Exists only when the library is preloaded; a crash restart of the cluster
//! re-creates it zeroed.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic};

/// What the worker is doing, as `index_now()` needs to know it.
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

#[derive(Default)]
#[repr(C)]
pub struct WorkerSlot {
    pid: AtomicI32,
    procno: AtomicI32,
    phase: AtomicU32,
    /// Start of the last pass (microseconds since the Unix epoch) and how long it took.
    last_pass_us: AtomicI64,
    last_pass_duration_us: AtomicI64,
    passes: AtomicU64,
    /// Since the worker started.
    events_indexed: AtomicU64,
    errors: AtomicU64,
}

// SAFETY: only atomics, valid at any address and in any process.
unsafe impl PGRXSharedMemory for WorkerSlot {}

static SLOT: PgAtomic<WorkerSlot> = unsafe { PgAtomic::new(c"cortex_buffer_worker_slot") };

/// Set in `_PG_init` of a preloaded library; inherited by every backend forked afterwards.
static SHMEM_ATTACHED: AtomicBool = AtomicBool::new(false);

/// Requests the slot; only valid while `shared_preload_libraries` is being processed.
pub fn init() {
    pg_shmem_init!(SLOT);
    SHMEM_ATTACHED.store(true, Ordering::Relaxed);
}

fn slot() -> Option<&'static WorkerSlot> {
    SHMEM_ATTACHED.load(Ordering::Relaxed).then(|| SLOT.get())
}

/// Whether the library was preloaded (and so a worker can exist at all).
pub fn preloaded() -> bool {
    slot().is_some()
}

/// Called by the worker at start: records its pid and proc number, and clears them at exit.
pub fn register_self() {
    let Some(slot) = slot() else { return };
    // SAFETY: MyProc is this worker's PGPROC (background workers with shared-memory access get
    // one before their main function runs).
    let procno = unsafe { pgrx::pg_sys::MyProc.as_ref().map(|p| p.pgprocno).unwrap_or(-1) };
    slot.procno.store(procno, Ordering::SeqCst);
    slot.pid.store(unsafe { pgrx::pg_sys::MyProcPid }, Ordering::SeqCst);
    unsafe { pgrx::pg_sys::on_shmem_exit(Some(unregister_self), pgrx::pg_sys::Datum::from(0)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn unregister_self(_code: i32, _arg: pgrx::pg_sys::Datum) {
    if let Some(slot) = slot() {
        slot.phase.store(Phase::Absent as u32, Ordering::SeqCst);
        slot.pid.store(0, Ordering::SeqCst);
        slot.procno.store(-1, Ordering::SeqCst);
    }
}

pub fn set_phase(phase: Phase) {
    if let Some(slot) = slot() {
        slot.phase.store(phase as u32, Ordering::Relaxed);
    }
}

/// The worker's phase as seen from another backend; `None` when the library is not preloaded.
pub fn phase() -> Option<Phase> {
    let slot = slot()?;
    if slot.pid.load(Ordering::SeqCst) == 0 {
        return Some(Phase::Absent);
    }
    Some(Phase::from_u32(slot.phase.load(Ordering::SeqCst)))
}

/// Sets the worker's latch. Returns false when no live worker holds the slot.
pub fn wake() -> bool {
    let Some(slot) = slot() else { return false };
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

/// Records a finished pass (worker only).
pub fn record_pass(started_us: i64, took: std::time::Duration, events: u64) {
    if let Some(slot) = slot() {
        slot.last_pass_us.store(started_us, Ordering::Relaxed);
        slot.last_pass_duration_us.store(i64::try_from(took.as_micros()).unwrap_or(i64::MAX), Ordering::Relaxed);
        slot.passes.fetch_add(1, Ordering::Relaxed);
        slot.events_indexed.fetch_add(events, Ordering::Relaxed);
    }
}

/// Counts a file that failed to index (worker only).
pub fn count_error() {
    if let Some(slot) = slot() {
        slot.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the worker's slot says, for `indexer_status`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub pid: i32,
    pub phase: Option<Phase>,
    pub last_pass_us: i64,
    pub last_pass_duration_us: i64,
    pub passes: u64,
    pub events_indexed: u64,
    pub errors: u64,
}

pub fn stats() -> Stats {
    let Some(slot) = slot() else { return Stats::default() };
    Stats {
        pid: slot.pid.load(Ordering::Relaxed),
        phase: phase(),
        last_pass_us: slot.last_pass_us.load(Ordering::Relaxed),
        last_pass_duration_us: slot.last_pass_duration_us.load(Ordering::Relaxed),
        passes: slot.passes.load(Ordering::Relaxed),
        events_indexed: slot.events_indexed.load(Ordering::Relaxed),
        errors: slot.errors.load(Ordering::Relaxed),
    }
}
