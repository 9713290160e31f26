//! An indexer process: connect, then index what changed until told to stop. Every condition
//! that keeps it from indexing is logged once and shown in `pg_stat_activity`; every SQL error
//! is caught, logged and retried.
//!
//! The first process (worker 1) learns of changes from the kernel (`cortex_buffer.watch`: a
//! [`Watcher`] on the volume, waited on together with the latch) or by polling, and walks the
//! whole volume as a safety net (at start, after a lost event, every `rescan_interval`). With
//! `cortex_buffer.workers` > 1 it hands each changed job directory to the process that owns it
//! ([`owner`]); the others wait on their latch for what they are handed. Files with work left
//! (a tail waiting to settle, a retry) come back on the cache's timers, so nothing waits for
//! the next rescan.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::shared::{self, Phase, Watching};
use super::worker_name;
use crate::indexer::indexing::{self, Mode};
use crate::pg::guc::{self, WatchMode};
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::xact::guarded;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::readiness::{assess, ConditionLog, ProblemLog, Wait};
use cortex_buffer_core::shared::now_us;
use cortex_buffer_watch::pass::{owner, top_dirs, FileOutcome, FileRef, KnownCache, PassError, Scope};
use cortex_buffer_watch::scan::{resolve_root, DirSeen, ListingMode};
use cortex_buffer_watch::volume::Volume;
use cortex_buffer_watch::watcher::{Rescan, Watcher};

/// How long worker 1 gathers the kernel's reports after the first before it looks (see
/// `index`): bounds the passes per second under a fleet's load, at this much latency.
const COALESCE: Duration = Duration::from_millis(10);

/// Walks that lost events call for come at most this often.
const OVERFLOW_WALK_EVERY: Duration = Duration::from_secs(10);

/// The library's version; the installed extension must match it.
const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cortex_buffer_worker_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let me = arg.value().min(usize::try_from(guc::MAX_WORKERS).unwrap_or(1) - 1);
    let name = worker_name(me);
    shared::register_self(me);
    let database = guc::database();
    log!("{name} starting: connecting to database \"{database}\" (pid {})", unsafe { pg_sys::MyProcPid });
    // A missing database is FATAL here: the process exits and the postmaster restarts it after
    // RESTART_DELAY, so the condition is logged at that pace, never in a tight loop.
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    set_session_settings(&name);

    let mut worker = Worker {
        me,
        name,
        workers: guc::workers(),
        database,
        conditions: ConditionLog::default(),
        problems: ProblemLog::default(),
        cache: {
            let mut cache = KnownCache::default();
            cache.set_partition(me, guc::workers());
            cache
        },
        watch: Watch::Unset,
        next_rescan: Instant::now(),
        last_walk: None,
        deferred_walk: None,
        volume: None,
        checked_at: None,
        waited: false,
    };
    loop {
        if BackgroundWorker::sighup_received() {
            worker.reload_config();
        }
        let next = worker.step();
        if shutdown_requested() || !wait(&next) {
            break;
        }
    }
    log!("{} stopping on request", worker.name);
    // Exit code 1 asks the postmaster to restart us after RESTART_DELAY unless it is shutting
    // down itself: a worker stopped with pg_terminate_backend() comes back. To keep it from
    // indexing, set cortex_buffer.worker_enabled = off instead.
    unsafe { pg_sys::proc_exit(1) };
}

/// What to wait for before the next step.
struct Next {
    timeout: Duration,
    /// The watcher's descriptor, readable when the kernel queued events.
    fd: Option<i32>,
}

/// Waits for the latch, the watcher's descriptor or the timeout; false when the worker must
/// stop (SIGTERM, or the postmaster died).
fn wait(next: &Next) -> bool {
    let timeout = libc::c_long::try_from(next.timeout.as_millis()).unwrap_or(libc::c_long::MAX).max(0);
    let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_POSTMASTER_DEATH;
    let socket = match next.fd {
        Some(fd) => {
            events |= pg_sys::WL_SOCKET_READABLE;
            fd
        }
        None => pg_sys::PGINVALID_SOCKET,
    };
    // SAFETY: the worker's own latch, a descriptor it owns (or none), on the main thread.
    let woke = unsafe {
        let woke =
            pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as i32, socket, timeout, pg_sys::PG_WAIT_EXTENSION);
        pg_sys::ResetLatch(pg_sys::MyLatch);
        woke
    };
    pg_sys::check_for_interrupts!();
    let postmaster_died = woke & pg_sys::WL_POSTMASTER_DEATH as i32 != 0;
    !BackgroundWorker::sigterm_received() && !postmaster_died
}

fn shutdown_requested() -> bool {
    // SAFETY: a sig_atomic_t flag set by the SIGTERM handler; reading it has no side effects.
    unsafe { pg_sys::ShutdownRequestPending != 0 }
}

/// The settings the worker pins for its whole session, whatever `ALTER DATABASE/ROLE ... SET`
/// (the database's owner can run it) or `postgresql.conf` say: each one would otherwise let a
/// database owner stop the worker (a read-only default, a timeout that cancels every pass, a
/// serializable default that makes concurrent indexers fail), change what its statements
/// resolve to, or change how it reads values. Documented in docs/operations.md.
pub const PINNED: [(&std::ffi::CStr, &std::ffi::CStr); 15] = [
    // Which operators and functions its statements resolve to.
    (c"search_path", c"pg_catalog, pg_temp"),
    // What would stop it: read-only transactions, timeouts, isolation, replication role.
    (c"default_transaction_read_only", c"off"),
    (c"default_transaction_isolation", c"read committed"),
    (c"default_transaction_deferrable", c"off"),
    (c"statement_timeout", c"0"),
    (c"lock_timeout", c"0"),
    (c"idle_in_transaction_session_timeout", c"0"),
    (c"idle_session_timeout", c"0"),
    (c"session_replication_role", c"origin"),
    // How it reads and writes values (it binds them, but never depends on the session's style).
    (c"DateStyle", c"ISO, YMD"),
    (c"TimeZone", c"UTC"),
    (c"IntervalStyle", c"postgres"),
    (c"extra_float_digits", c"1"),
    // Small statements: never worth compiling.
    (c"jit", c"off"),
    // Rows and offsets commit together, so a commit lost in a crash is simply indexed again;
    // waiting for each batch's WAL flush would only slow indexing down.
    (c"synchronous_commit", c"off"),
];

fn set_session_settings(name: &str) {
    let name = CString::new(name).unwrap_or_default();
    // SAFETY: NUL-terminated strings, set the way PostgreSQL's own processes set theirs.
    // application_name only names the worker in pg_stat_activity.
    unsafe {
        pg_sys::SetConfigOption(
            c"application_name".as_ptr(),
            name.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        );
    }
    for (name, value) in PINNED {
        // SAFETY: as above; PGC_S_OVERRIDE outranks every database, role and file setting, and
        // the worker is a superuser's connection, so every context allows the set.
        unsafe {
            pg_sys::SetConfigOption(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            );
        }
    }
}

/// Sets `pg_stat_activity.state` and `.query` for this worker.
fn report_activity(state: pg_sys::BackendState::Type, text: &str) {
    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the worker is connected, so its pgstat entry exists; the string is copied.
    unsafe { pg_sys::pgstat_report_activity(state, text.as_ptr()) };
}

/// How worker 1 learns of changes.
enum Watch {
    /// Not set up yet (or torn down by a reload, a wait, or a replaced root).
    Unset,
    /// The kernel tells it.
    Notify(Watcher),
    /// It polls: configured so, or notification could not be set up (`retry_at`: when to try
    /// again).
    Poll { fallback: Option<Instant> },
}

struct Worker {
    /// This process's number (0 for the first, which watches).
    me: usize,
    name: String,
    workers: usize,
    database: String,
    conditions: ConditionLog,
    problems: ProblemLog,
    cache: KnownCache,
    watch: Watch,
    /// When the next walk of the whole volume is due (worker 1 in notify mode).
    next_rescan: Instant,
    /// When the last walk of everything this process owns started.
    last_walk: Option<Instant>,
    /// Why a walk was put off (lost events soon after the last walk).
    deferred_walk: Option<Rescan>,
    /// The sessions directory's handle, kept between readiness checks.
    volume: Option<Volume>,
    /// When readiness was last checked.
    checked_at: Option<Instant>,
    /// Whether the current step had to wait (a pass that failed on the catalogue, say).
    waited: bool,
}

impl Worker {
    fn reload_config(&mut self) {
        // SAFETY: main thread, outside a transaction, as Postgres' own processes do it.
        unsafe {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
        let wanted = guc::database();
        if wanted != self.database {
            log!(
                "{}: cortex_buffer.database changed from \"{}\" to \"{wanted}\"; restarting to reconnect",
                self.name,
                self.database
            );
            unsafe { pg_sys::proc_exit(1) };
        }
        // sessions_dir or watch may have changed: set everything up again.
        self.cache.invalidate();
        self.watch = Watch::Unset;
        self.volume = None;
        self.checked_at = None;
    }

    fn step(&mut self) -> Next {
        match self.readiness() {
            Err(wait) => {
                self.wait(wait);
                Next { timeout: guc::poll_interval(), fd: None }
            }
            Ok(volume) => {
                self.waited = false;
                let next = self.index(&volume);
                if self.waited {
                    // The step failed (the catalogue, the directory): tried again a
                    // poll_interval later, not at once, and the condition stays logged once.
                    return Next { timeout: guc::poll_interval(), fd: None };
                }
                // Said only once a step has gone through, so that a condition that persists
                // is not logged as ended and begun again at every try.
                if let Some(previous) = self.conditions.clear() {
                    log!("{} resumed indexing {} (was {})", self.name, volume.path().display(), previous.activity());
                }
                // Kept (unless a wait dropped what it holds) for the steps until readiness is
                // checked again.
                if self.checked_at.is_some() {
                    self.volume = Some(volume);
                }
                next
            }
        }
    }

    /// What a step needs before it indexes: enabled, out of recovery, the extension at this
    /// library's version, and the sessions directory. Checked at most every poll_interval: a
    /// busy volume wakes the worker far more often, and each check is a transaction and a look
    /// at the directory. Between checks the volume's handle is reused (a reload or a wait drops
    /// it); when the check comes, a directory with the same identity keeps its handle, so the
    /// root's (possibly huge) listing is not read again.
    fn readiness(&mut self) -> Result<Volume, Wait> {
        let fresh = self.checked_at.is_some_and(|at| at.elapsed() < guc::poll_interval());
        if fresh {
            if let Some(volume) = self.volume.take() {
                return Ok(volume);
            }
        }
        let enabled = guc::worker_enabled();
        // SAFETY: plain read of shared recovery state.
        let in_recovery = enabled && unsafe { pg_sys::RecoveryInProgress() };
        let installed = if enabled && !in_recovery {
            guarded(installed_version).map_err(|f| Wait::Catalog { reason: f.to_string() })?
        } else {
            None
        };
        if let Some(wait) = assess(enabled, in_recovery, installed.as_deref(), LIBRARY_VERSION, &self.database) {
            return Err(wait);
        }
        self.checked_at = Some(Instant::now());
        self.released_from_quarantine();
        if let Some(volume) = self.volume.take() {
            if same_directory(&volume, &guc::sessions_dir()) {
                return Ok(volume);
            }
        }
        let configured = guc::sessions_dir();
        let volume = resolve_root(&configured).map_err(|e| Wait::SessionsDir { reason: describe(&e) })?;
        crate::indexer::moved_root::adopt(&volume, crate::indexer::moved_root::Scope::All, false);
        Ok(volume)
    }

    /// Files this worker holds quarantined whose rows no longer say so (`clear_quarantine()`
    /// ran) are looked at again now: checked with the readiness, so at most a poll_interval
    /// after the call, and only when something is quarantined (one lookup by path).
    fn released_from_quarantine(&mut self) {
        let held = self.cache.quarantined();
        if held.is_empty() {
            return;
        }
        let released = guarded(|| {
            as_definer(|| {
                Spi::connect(|c| {
                    let mut out = Vec::new();
                    for r in c
                        .select(
                            "SELECT path FROM cortex_buffer.session_file
                              WHERE path OPERATOR(pg_catalog.=) ANY ($1) AND quarantined_at IS NULL",
                            None,
                            &[held.clone().into()],
                        )
                        .map_err(spi)?
                    {
                        if let Some(p) = r.get::<String>(1).map_err(spi)? {
                            out.push(p);
                        }
                    }
                    Ok(out)
                })
            })
        });
        if let Ok(paths) = released {
            let now = now_us();
            for p in &paths {
                self.cache.release(p, now);
            }
        }
    }

    fn wait(&mut self, wait: Wait) {
        self.waited = true;
        shared::set_phase(if wait == Wait::Disabled { Phase::Disabled } else { Phase::Waiting });
        report_activity(pg_sys::BackendState::STATE_IDLE, &wait.activity());
        if self.conditions.enter(&wait) {
            if matches!(wait, Wait::Catalog { .. }) {
                warning!("{}", wait.message());
            } else {
                log!("{}", wait.message());
            }
        }
        // Whatever made us wait may also have changed the catalogue (extension re-created...),
        // and the volume: nothing from before is trusted.
        self.cache.invalidate();
        self.cache.set_listing_mode(ListingMode::Off);
        self.watch = Watch::Unset;
        self.volume = None;
        self.checked_at = None;
    }

    fn index(&mut self, volume: &Volume) -> Next {
        shared::set_phase(Phase::Active);
        let requested = shared::take_rescan_request();
        if self.me > 0 {
            return self.index_handed(volume, requested);
        }
        let mode = guc::watch_mode();
        if mode == WatchMode::Poll {
            self.watch = Watch::Poll { fallback: None };
            shared::set_watching(Watching::Poll, 0);
        } else {
            self.set_up_watch(volume, mode);
        }
        let Watch::Notify(watcher) = &mut self.watch else {
            // Polling: every step walks everything, and lists every directory (a network
            // volume's modification times are its server's, and its client's cache's).
            self.cache.set_listing_mode(ListingMode::Off);
            self.rescan(volume);
            return Next { timeout: guc::poll_interval(), fd: None };
        };
        let mut changes = watcher.read(volume);
        if !changes.dirs.is_empty() && changes.rescan.is_none() {
            // More changes usually follow the first (an agent writes a line, then another; a
            // fleet writes everywhere at once): gather them for a moment, so that one pass and
            // one transaction take them all instead of one each.
            std::thread::sleep(COALESCE);
            let more = watcher.read(volume);
            changes.dirs.extend(more.dirs);
            changes.rescan = more.rescan;
        }
        shared::set_watching(Watching::Notify, watcher.watches());
        let exhausted = changes.rescan == Some(Rescan::WatchesExhausted);
        let fd = watcher.fd();
        // Lost events call for a walk, but not more often than every OVERFLOW_WALK_EVERY: an agent
        // that floods the queue must not make the worker walk the fleet back to back. Meanwhile
        // the directories it did hear of are looked at as usual.
        let recent_walk = self.last_walk.is_some_and(|at| at.elapsed() < OVERFLOW_WALK_EVERY);
        if changes.rescan == Some(Rescan::Overflow) && recent_walk {
            let soon = self.last_walk.map_or_else(Instant::now, |at| at + OVERFLOW_WALK_EVERY);
            self.next_rescan = self.next_rescan.min(soon);
            self.deferred_walk = Some(Rescan::Overflow);
            changes.rescan = None;
        }
        if requested || changes.rescan.is_some() || Instant::now() >= self.next_rescan {
            let why = changes.rescan.or(self.deferred_walk.take());
            if let Some(why) = why {
                log!("{}: walking the whole sessions directory: {}", self.name, why.describe());
            }
            let events_lost = why.is_some();
            // The routine periodic walk skips reading the directories that cannot have changed;
            // after lost events, or when asked (index_now()), it reads them all.
            let routine = !events_lost && !requested;
            self.cache.set_listing_mode(if routine { ListingMode::Trust } else { ListingMode::Refresh });
            // Worker 1 alone walks the whole volume, and that walk says which directories lack
            // a watch (new ones missed while events were lost): they get one afterwards,
            // without listing anything twice. With several workers its walk covers only its
            // own directories, so it sets the watches on everything first.
            let several = self.workers > 1;
            if exhausted {
                self.fall_back(mode, "the kernel's limit on watches was reached".into());
            } else if let (true, Watch::Notify(watcher)) = (several, &mut self.watch) {
                match watcher.watch_volume(volume) {
                    Ok(w) if w.refused == 0 => shared::set_watching(Watching::Notify, w.watches),
                    Ok(w) => self.fall_back(mode, format!("{} directories could not be watched", w.refused)),
                    Err(e) => self.fall_back(mode, format!("could not watch the sessions directory: {e}")),
                }
            }
            let seen = self.rescan(volume);
            if let (false, Watch::Notify(watcher)) = (several, &mut self.watch) {
                let (added, w) = watcher.watch_missing(volume, &seen, events_lost);
                if w.refused == 0 {
                    shared::set_watching(Watching::Notify, w.watches);
                    // What changed in them between the walk and their watch is looked at now.
                    let now = now_us();
                    for dir in added {
                        self.cache.look_again(&dir, now);
                    }
                } else {
                    self.fall_back(mode, format!("{} directories could not be watched", w.refused));
                }
            }
            self.next_rescan = Instant::now() + guc::rescan_interval();
        } else {
            let mut dirs = changes.dirs;
            if self.workers > 1 {
                self.hand_out(&mut dirs);
            }
            dirs.extend(self.cache.due(now_us()));
            if !dirs.is_empty() {
                self.run(volume, Scope::Dirs(&dirs), false);
            }
        }
        let until_rescan = self.next_rescan.saturating_duration_since(Instant::now());
        let fd = matches!(self.watch, Watch::Notify(_)).then_some(fd);
        // Woken by the kernel, a timer or the rescan; and at least every poll_interval, to see
        // what no file event announces (the extension updated or dropped, the worker
        // disabled): one catalogue read, no walk.
        let timeout = until_rescan.min(self.until_timer()).min(guc::poll_interval());
        Next { timeout, fd }
    }

    /// Sets up change notification when it is not (or no longer) watching this volume, or
    /// when a fallback's time to try again has come.
    fn set_up_watch(&mut self, volume: &Volume, mode: WatchMode) {
        let retry = match &self.watch {
            Watch::Unset => true,
            Watch::Notify(w) => !w.watches_root_of(volume),
            Watch::Poll { fallback: Some(at) } => Instant::now() >= *at,
            Watch::Poll { fallback: None } => true,
        };
        if !retry {
            return;
        }
        let was_fallback = matches!(self.watch, Watch::Poll { fallback: Some(_) });
        let set_up = Watcher::new().and_then(|mut w| w.watch_volume(volume).map(|watched| (w, watched)));
        match set_up {
            Ok((watcher, watched)) if watched.refused == 0 => {
                if was_fallback {
                    log!("{}: change notification works again: watching {} directories", self.name, watched.watches);
                }
                shared::set_watching(Watching::Notify, watched.watches);
                self.watch = Watch::Notify(watcher);
                // A full walk first, reading every directory: what changed before the watches
                // existed.
                self.next_rescan = Instant::now();
                self.cache.set_listing_mode(ListingMode::Off);
                self.cache.invalidate_timers();
            }
            Ok((_, watched)) => self.fall_back(
                mode,
                format!(
                    "{} of {} directories could not be watched",
                    watched.refused,
                    watched.watches + watched.refused
                ),
            ),
            Err(e) => self.fall_back(mode, format!("could not set up change notification: {e}")),
        }
    }

    /// Polls instead of watching, and says so once (a WARNING when notify was asked for).
    fn fall_back(&mut self, mode: WatchMode, why: String) {
        let first = !matches!(self.watch, Watch::Poll { fallback: Some(_) });
        self.watch = Watch::Poll { fallback: Some(Instant::now() + guc::rescan_interval()) };
        shared::set_watching(Watching::Fallback, 0);
        if first {
            let hint = "Raise fs.inotify.max_user_watches (and fs.inotify.max_user_instances) with sysctl, or set cortex_buffer.watch = poll.";
            if mode == WatchMode::Notify {
                warning!(
                    "{}: polling every cortex_buffer.poll_interval instead of watching: {why} (HINT: {hint})",
                    self.name
                );
            } else {
                log!(
                    "{}: polling every cortex_buffer.poll_interval instead of watching: {why} (HINT: {hint})",
                    self.name
                );
            }
        }
    }

    /// Worker 1 with others: hands each directory another process owns to it.
    fn hand_out(&self, dirs: &mut BTreeSet<String>) {
        let mut theirs: Vec<Vec<&str>> = vec![Vec::new(); self.workers];
        for dir in dirs.iter() {
            let o = owner(dir, self.workers);
            if o != self.me {
                if let Some(list) = theirs.get_mut(o) {
                    list.push(dir);
                }
            }
        }
        for (worker, list) in theirs.iter().enumerate() {
            shared::hand(worker, list);
        }
        dirs.retain(|d| owner(d, self.workers) == self.me);
    }

    /// A worker handed its directories by worker 1: indexes them, and walks its whole
    /// partition at start, on request, and when its queue overflowed.
    fn index_handed(&mut self, volume: &Volume, requested: bool) -> Next {
        shared::set_watching(Watching::Handed, 0);
        let (handed, overflowed) = shared::take_handed();
        if requested || overflowed || !self.cache.loaded() {
            self.rescan(volume);
        } else {
            let mut dirs: BTreeSet<String> = handed.into_iter().collect();
            dirs.extend(self.cache.due(now_us()));
            if !dirs.is_empty() {
                self.run(volume, Scope::Dirs(&dirs), false);
            }
        }
        Next { timeout: guc::rescan_interval().min(self.until_timer()).min(guc::poll_interval()), fd: None }
    }

    /// Walks everything this process owns: the whole volume when it is alone; its partition's
    /// directories (on disk, or known to the catalogue) otherwise, asking the others to walk
    /// theirs when it is worker 1.
    /// Returns the directories its walk descended into.
    fn rescan(&mut self, volume: &Volume) -> Vec<DirSeen> {
        self.last_walk = Some(Instant::now());
        if self.workers <= 1 {
            return self.run(volume, Scope::Volume, true);
        }
        if self.me == 0 {
            for w in 1..self.workers {
                shared::request_rescan(w);
            }
        }
        if !self.cache.loaded() {
            // Loads the catalogue (the walk of no directory).
            self.run(volume, Scope::Dirs(&BTreeSet::new()), false);
        }
        let mut dirs: BTreeSet<String> = match top_dirs(volume) {
            Ok(names) => names.into_iter().collect(),
            Err(e) => {
                self.wait(Wait::SessionsDir { reason: describe(&e) });
                return Vec::new();
            }
        };
        dirs.extend(self.cache.dirs());
        dirs.retain(|d| owner(d, self.workers) == self.me);
        self.run(volume, Scope::Dirs(&dirs), true)
    }

    fn until_timer(&self) -> Duration {
        match self.cache.next_timer() {
            Some(at) => Duration::from_micros(u64::try_from(at.saturating_sub(now_us())).unwrap_or(0)),
            None => Duration::MAX,
        }
    }

    /// One pass over `scope`, reported in `pg_stat_activity` and the shared slot; returns the
    /// directories its walk descended into.
    fn run(&mut self, volume: &Volume, scope: Scope<'_>, rescan: bool) -> Vec<DirSeen> {
        let root = volume.path().to_path_buf();
        let what = match scope {
            Scope::Dirs(d) if !rescan => format!("indexing {} changed directories of {}", d.len(), root.display()),
            _ => format!("scanning {}", root.display()),
        };
        report_activity(pg_sys::BackendState::STATE_RUNNING, &what);
        let started = Instant::now();
        let now = now_us();
        let mut events = 0;
        let name = self.name.clone();
        let oversized = guc::oversized_file();
        let mut before_file =
            |file: &FileRef| report_activity(pg_sys::BackendState::STATE_RUNNING, &format!("indexing {}", file.path));
        let each = |path: &str, outcome: &FileOutcome| {
            match outcome {
                FileOutcome::Indexed { events: e, note, state, was_offset, .. } => {
                    events += e;
                    if let Some(note) = note {
                        log!("{name}: \"{path}\" {note}");
                    }
                    // Once per file: when this pass took it over the limit.
                    if *was_offset < oversized && state.offset >= oversized {
                        warning!(
                            "{name}: \"{path}\" has grown past cortex_buffer.oversized_file ({oversized} bytes): {} bytes indexed; see cortex_buffer.oversized_buffers",
                            state.offset
                        );
                    }
                }
                FileOutcome::Skipped(_) => {}
                FileOutcome::Failed { error, quarantined } => {
                    shared::count_error();
                    if *quarantined {
                        warning!("{name}: quarantined \"{path}\" after repeated failures: {error}");
                    } else {
                        warning!("{name}: could not index \"{path}\" (will retry): {error}");
                    }
                }
            }
            !shutdown_requested()
        };
        let problems = &mut self.problems;
        let mut seen = Vec::new();
        match indexing::pass(
            volume,
            scope,
            &mut self.cache,
            now,
            Mode::Worker,
            &mut before_file,
            shutdown_requested,
            each,
        ) {
            Ok(pass) => {
                let walked = volume.path().to_string_lossy();
                let covered = |path: &str| match scope {
                    Scope::Volume => true,
                    Scope::Dir(d) => {
                        path.strip_prefix(walked.as_ref()).is_some_and(|r| r.starts_with(&format!("/{d}/")))
                    }
                    Scope::Dirs(ds) => path
                        .strip_prefix(walked.as_ref())
                        .and_then(|r| r.strip_prefix('/'))
                        .and_then(|r| r.split('/').next())
                        .is_some_and(|d| ds.contains(d)),
                };
                for p in problems.fresh_within(&pass.report.problems, covered) {
                    log!("{}: skipping \"{}\": {}", self.name, p.path, p.reason);
                }
                let mut report = pass.report;
                seen = std::mem::take(&mut report.dirs);
                shared::record_pass(now, started.elapsed(), events, rescan, self.cache.len());
                if report.written > 0 || report.gone > 0 {
                    debug1!(
                        "{}: recorded {} new or changed and {} gone session files",
                        self.name,
                        report.written,
                        report.gone
                    );
                }
                report_activity(
                    pg_sys::BackendState::STATE_IDLE,
                    &format!(
                        "idle: {} session files in {}; last pass {} ms",
                        self.cache.len(),
                        root.display(),
                        started.elapsed().as_millis()
                    ),
                );
            }
            Err(PassError::Root(e)) => self.wait(Wait::SessionsDir { reason: describe(&e) }),
            Err(PassError::Catalog(f)) => self.wait(Wait::Catalog { reason: f.to_string() }),
        }
        if !self.cache.loaded() {
            // The catalogue changed under the cache (a row gone or re-used): walk everything.
            self.next_rescan = Instant::now();
        }
        seen
    }
}

fn describe(e: &CbError) -> String {
    match &e.hint {
        Some(h) => format!("{} ({h})", e.message),
        None => e.message.clone(),
    }
}

/// Whether `dir` still names the directory `volume` holds (same device and inode).
fn same_directory(volume: &Volume, dir: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let held = volume.stat(std::path::Path::new("")).ok().map(|m| (m.dev(), m.ino()));
    let named = std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()));
    // Under the same canonical spelling too: a directory moved and linked back under its name is
    // the same directory with another path, under which its files are recorded from now on
    // (indexer::moved_root).
    held.is_some() && held == named && std::fs::canonicalize(dir).is_ok_and(|c| c == volume.path())
}

fn installed_version() -> Result<Option<String>, CbError> {
    // The one statement the worker runs as itself: a catalogue read, with every name qualified.
    Spi::get_one::<String>(
        "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'cortex_buffer')",
    )
    .map_err(|e| CbError::internal(format!("SPI: {e}")))
}
