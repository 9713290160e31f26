//! The worker process: connect, then poll until told to stop. Every condition that keeps it
//! from indexing is logged once and shown in `pg_stat_activity`; every SQL error is caught,
//! logged and retried at the next poll.

use std::ffi::CString;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::shared::{self, Phase};
use super::WORKER_NAME;
use crate::indexer::indexing::{self, Mode};
use crate::pg::guc;
use crate::pg::xact::guarded;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::readiness::{assess, ConditionLog, ProblemLog, Wait};
use cortex_buffer_watch::pass::{now_us, FileOutcome, FileRef, KnownCache, PassError, Scope};
use cortex_buffer_watch::scan::resolve_root;
use cortex_buffer_watch::volume::Volume;

/// The library's version; the installed extension must match it.
const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The worker re-reads `session_file` at least this often, to see rows others changed.
const CATALOG_CACHE_MAX_AGE: Duration = Duration::from_secs(60);

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cortex_buffer_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    shared::register_self();
    let database = guc::database();
    log!("{WORKER_NAME} starting: connecting to database \"{database}\" (pid {})", unsafe { pg_sys::MyProcPid });
    // A missing database is FATAL here: the process exits and the postmaster restarts it after
    // RESTART_DELAY, so the condition is logged at that pace, never in a tight loop.
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    set_session_settings();

    let mut worker = Worker {
        database,
        conditions: ConditionLog::default(),
        problems: ProblemLog::default(),
        cache: KnownCache::default(),
    };
    loop {
        if BackgroundWorker::sighup_received() {
            worker.reload_config();
        }
        worker.poll();
        if shutdown_requested() || !BackgroundWorker::wait_latch(Some(guc::poll_interval())) {
            break;
        }
    }
    log!("{WORKER_NAME} stopping on request");
    // Exit code 1 asks the postmaster to restart us after RESTART_DELAY unless it is shutting
    // down itself: a worker stopped with pg_terminate_backend() comes back. To keep it from
    // indexing, set cortex_buffer.worker_enabled = off instead.
    unsafe { pg_sys::proc_exit(1) };
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
pub const PINNED: [(&std::ffi::CStr, &std::ffi::CStr); 14] = [
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
];

fn set_session_settings() {
    // SAFETY: static NUL-terminated strings, set the way PostgreSQL's own processes set theirs.
    // application_name only names the worker in pg_stat_activity.
    unsafe {
        pg_sys::SetConfigOption(
            c"application_name".as_ptr(),
            c"cortex_buffer indexer".as_ptr(),
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

struct Worker {
    database: String,
    conditions: ConditionLog,
    problems: ProblemLog,
    cache: KnownCache,
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
                "{WORKER_NAME}: cortex_buffer.database changed from \"{}\" to \"{wanted}\"; restarting to reconnect",
                self.database
            );
            unsafe { pg_sys::proc_exit(1) };
        }
        self.cache.invalidate();
    }

    fn poll(&mut self) {
        match self.readiness() {
            Err(wait) => self.wait(wait),
            Ok(root) => self.index(root),
        }
    }

    fn readiness(&self) -> Result<Volume, Wait> {
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
        resolve_root(&guc::sessions_dir()).map_err(|e| Wait::SessionsDir { reason: describe(&e) })
    }

    fn wait(&mut self, wait: Wait) {
        shared::set_phase(if wait == Wait::Disabled { Phase::Disabled } else { Phase::Waiting });
        report_activity(pg_sys::BackendState::STATE_IDLE, &wait.activity());
        if self.conditions.enter(&wait) {
            if matches!(wait, Wait::Catalog { .. }) {
                warning!("{}", wait.message());
            } else {
                log!("{}", wait.message());
            }
        }
        // Whatever made us wait may also have changed the catalogue (extension re-created...).
        self.cache.invalidate();
    }

    fn index(&mut self, volume: Volume) {
        let root = volume.path().to_path_buf();
        if let Some(previous) = self.conditions.clear() {
            log!("{WORKER_NAME} resumed indexing {} (was {})", root.display(), previous.activity());
        }
        shared::set_phase(Phase::Active);
        report_activity(pg_sys::BackendState::STATE_RUNNING, &format!("scanning {}", root.display()));
        let started = Instant::now();
        let now = now_us();
        let mut events = 0;
        let mut before_file =
            |file: &FileRef| report_activity(pg_sys::BackendState::STATE_RUNNING, &format!("indexing {}", file.path));
        let each = |path: &str, outcome: &FileOutcome| {
            match outcome {
                FileOutcome::Indexed { events: e, note, .. } => {
                    events += e;
                    if let Some(note) = note {
                        log!("{WORKER_NAME}: \"{path}\" {note}");
                    }
                }
                FileOutcome::Skipped(_) => {}
                FileOutcome::Failed { error, quarantined } => {
                    shared::count_error();
                    if *quarantined {
                        warning!("{WORKER_NAME}: quarantined \"{path}\" after repeated failures: {error}");
                    } else {
                        warning!("{WORKER_NAME}: could not index \"{path}\" (will retry): {error}");
                    }
                }
            }
            !shutdown_requested()
        };
        let problems = &mut self.problems;
        match indexing::pass(
            &volume,
            Scope::Volume,
            &mut self.cache,
            CATALOG_CACHE_MAX_AGE,
            now,
            Mode::Worker,
            &mut before_file,
            each,
        ) {
            Ok(pass) => {
                for p in problems.fresh(&pass.report.problems) {
                    log!("{WORKER_NAME}: skipping \"{}\": {}", p.path, p.reason);
                }
                let report = pass.report;
                shared::record_pass(now, started.elapsed(), events);
                if report.written > 0 || report.gone > 0 {
                    debug1!(
                        "{WORKER_NAME}: recorded {} new or changed and {} gone session files",
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
    }
}

fn describe(e: &CbError) -> String {
    match &e.hint {
        Some(h) => format!("{} ({h})", e.message),
        None => e.message.clone(),
    }
}

fn installed_version() -> Result<Option<String>, CbError> {
    // The one statement the worker runs as itself: a catalogue read, with every name qualified.
    Spi::get_one::<String>(
        "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'cortex_buffer')",
    )
    .map_err(|e| CbError::internal(format!("SPI: {e}")))
}
