//! Every `cortex_buffer.*` setting, defined in one place so the settings table of docs/operations.md#settings has one
//! source: 20 settings, each one a deployment may need to change. All but `workers` are
//! reloadable (SIGHUP): the worker re-reads them when the configuration is reloaded; a changed
//! `database` makes it restart itself to reconnect. Internal tunables are test knobs: settings
//! only in a test server ([`testing_server`]), their defaults elsewhere.

use std::ffi::{CStr, CString};

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

pub static SESSIONS_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"/data/sessions"));
pub static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));
pub static POLL_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static WORKER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static JOB_TABLE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"cortex_buffer.job"));
pub static CHECKPOINT_MAX_BYTES: GucSetting<i32> = GucSetting::<i32>::new(256 * 1024);
pub static CHECKPOINT_HISTORY_KEEP: GucSetting<i32> = GucSetting::<i32>::new(20);
pub static RESERVATION_TIMEOUT_S: GucSetting<i32> = GucSetting::<i32>::new(600);
pub static SETTLE_PERIOD_MS: GucSetting<i32> = GucSetting::<i32>::new(5000);
pub static MAX_LINE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1 << 20);
/// Test knob. 64 MiB: what one line's conversion to jsonb may take; every line within the
/// default line cap fits, and the budget bounds a backend's memory whatever the line holds.
pub static MAX_LINE_MEMORY_KB: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);
/// Test knob. 1 000 rows per INSERT on the SQL path: past a few hundred, larger batches gain
/// nothing measurable (docs/benchmarks.md), and a batch bounds the memory its rows take.
pub static BATCH_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// Test knob. 5 failures in a row: a file that fails that often fails for a reason of its own,
/// and retrying it every poll would cost every pass.
pub static QUARANTINE_AFTER: GucSetting<i32> = GucSetting::<i32>::new(5);
/// Test knob. 10 % corrupt lines (the reference design's figure): past it a file is not trusted
/// for recovery.
pub static MAX_CORRUPTION_RATIO: GucSetting<f64> = GucSetting::<f64>::new(0.10);
/// Test knob. 4 096 bytes of a tool's result or input in a plan (the reference design's cap on
/// result_summary); a longer one is cut and flagged.
pub static RECOVERY_VALUE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(4096);
pub static RECOVERY_CLOCK_SKEW_MS: GucSetting<i32> = GucSetting::<i32>::new(5000);
/// Test knob. Lookups bring the job's files up to date first; off only to test and benchmark
/// answers from what the worker indexed.
pub static CATCH_UP: GucSetting<bool> = GucSetting::<bool>::new(true);
/// Test knob. 64 MiB of one job directory's new bytes per worker pass: a busy job delays
/// another's lines by at most that much reading.
pub static PASS_DIR_KB: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);
pub static CATCH_UP_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(2000);
pub static JOB_TOKEN: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static WATCH: GucSetting<WatchMode> = GucSetting::<WatchMode>::new(WatchMode::Auto);
/// Test knob. A full walk every 5 minutes in notify mode: the safety net for events the kernel
/// lost, rare enough to cost nothing on an idle volume.
pub static RESCAN_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(300);
pub static WORKERS: GucSetting<i32> = GucSetting::<i32>::new(1);
/// Test knob. 4 MiB per pushed chunk: what the shipper sends per call, and a bound on a call's
/// memory.
pub static PUSH_MAX_CHUNK_KB: GucSetting<i32> = GucSetting::<i32>::new(4096);
pub static PUSH_RATE_LIMIT_KB: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);
pub static GONE_RETENTION_S: GucSetting<i32> = GucSetting::<i32>::new(7 * 86_400);
pub static KEEP_FAILED_FOR_S: GucSetting<i32> = GucSetting::<i32>::new(3 * 86_400);
pub static JOB_ROWS_RETENTION_S: GucSetting<i32> = GucSetting::<i32>::new(30 * 86_400);
pub static OVERSIZED_FILE_KB: GucSetting<i32> = GucSetting::<i32>::new(10 * 1024);
/// Test knob. 1 000 directories per cleanup call when max_dirs is NULL (a call passes its own).
pub static CLEANUP_MAX_DIRS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// Test knob: a crash test's pause inside the cleanup (never set in production).
pub static CLEANUP_PAUSE_AT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// How the worker learns that session files changed (`cortex_buffer.watch`).
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum WatchMode {
    /// Change notification where the kernel gives it; polling where it cannot be set up.
    #[name = c"auto"]
    Auto,
    /// Change notification only (still with the periodic rescan as a safety net).
    #[name = c"notify"]
    Notify,
    /// A full scan every poll_interval, as network file systems need.
    #[name = c"poll"]
    Poll,
}

/// The most indexer processes `cortex_buffer.workers` may ask for.
pub const MAX_WORKERS: i32 = 16;

/// Registers the settings and reserves the `cortex_buffer.` prefix (typos, and settings of
/// earlier versions, become a WARNING at start and an error on `SET`). The test knobs are
/// registered only in a test server ([`testing_server`]).
pub fn define() {
    define_worker();
    define_limits();
    define_recovery();
    define_retention();
    if testing_server() {
        define_test_knobs();
    }
    // SAFETY: called from _PG_init on the main thread with a static NUL-terminated string.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"cortex_buffer".as_ptr()) };
}

/// Whether this server runs the test suites or the benchmarks: a `#[pg_test]` build, or a
/// server started with `CORTEX_BUFFER_TESTING` in its environment (the end-to-end suite, the
/// golden files, the benchmarks). Only there are the test knobs settings; everywhere else
/// they are the constants they default to.
pub fn testing_server() -> bool {
    cfg!(feature = "pg_test") || std::env::var_os("CORTEX_BUFFER_TESTING").is_some()
}

/// The background worker: where the files are, which database, how it learns of changes.
fn define_worker() {
    GucRegistry::define_string_guc(
        c"cortex_buffer.sessions_dir",
        c"Directory the agents write their JSONL session files into.",
        c"Absolute path. Session files are discovered as <dir>/<job or project>/<file>.jsonl and <dir>/<project>/<session-uuid>/subagents/agent-*.jsonl.",
        &SESSIONS_DIR,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"cortex_buffer.database",
        c"Database the background worker connects to.",
        c"The cortex_buffer extension must be installed there. Changing it makes the worker restart and reconnect.",
        &DATABASE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.poll_interval",
        c"How often the background worker scans sessions_dir in poll mode, and retries a file that failed or was busy.",
        c"cortex_buffer.index_now() wakes it between polls. In notify mode a scan happens only when the kernel reports a change.",
        &POLL_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_enum_guc(
        c"cortex_buffer.watch",
        c"How the background worker learns that session files changed: auto, notify or poll.",
        c"notify: the kernel's change notification (inotify), so an idle volume costs nothing; poll: a full scan every poll_interval, for network file systems (NFS) where remote writes raise no notification; auto: notify, falling back to poll (said once in the log and in indexer_status) when watches cannot be set.",
        &WATCH,
        GucContext::Sighup,
        GucFlags::default(),
    );
    // A postmaster setting can only be defined while the postmaster loads the library; a
    // backend that loads it later (not preloaded) has no workers anyway.
    // SAFETY: reading a flag Postgres sets while it loads shared_preload_libraries.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        GucRegistry::define_int_guc(
            c"cortex_buffer.workers",
            c"How many indexer processes split the session files between them.",
            c"Takes effect at server start. The first process watches the volume and hands each job directory to one process (by a hash of its name); each counts against max_worker_processes.",
            &WORKERS,
            1,
            MAX_WORKERS,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    GucRegistry::define_bool_guc(
        c"cortex_buffer.worker_enabled",
        c"Whether the background worker indexes session files.",
        c"When off the worker stays connected but idle; turning it on again takes effect at the next reload.",
        &WORKER_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// The binding and the limits: superuser-only (a role that could raise them could make the
/// extension write elsewhere or store unbounded documents), but the pod's own token and the
/// caller's own reservations.
fn define_limits() {
    GucRegistry::define_string_guc(
        c"cortex_buffer.job_table",
        c"The job table the job functions read and write.",
        c"Default cortex_buffer.job. Point it at the control plane's job table (per database with ALTER DATABASE ... SET); the column contract is checked on first use in each session.",
        &JOB_TABLE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.checkpoint_max_bytes",
        c"Largest checkpoint write_checkpoint accepts, in bytes of canonical JSON.",
        c"The control plane's own limit is 256 kB.",
        &CHECKPOINT_MAX_BYTES,
        2,
        256 * 1024 * 1024,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.checkpoint_history_keep",
        c"How many checkpoints per job checkpoint_history keeps.",
        c"Older entries are deleted by write_checkpoint; read_checkpoint falls back to the newest valid one.",
        &CHECKPOINT_HISTORY_KEEP,
        1,
        100_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.max_line_bytes",
        c"Longest session-file line the indexer holds; a longer line is summarised as it streams past.",
        c"Bounds the indexer's memory: a longer line is never held; if it is valid JSON and an event it is stored with its long strings cut, else recorded as corrupt.",
        &MAX_LINE_BYTES,
        1024,
        256 << 20,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    // A caller may lengthen its own reservations (a long generation); that only holds back its
    // own job's budget, so any role may set it.
    GucRegistry::define_int_guc(
        c"cortex_buffer.reservation_timeout",
        c"How long a reserve_budget() reservation holds budget before it is released.",
        c"Settle (settle_usage) or release (release_reservation) it before then; an expired reservation can still be settled for a day.",
        &RESERVATION_TIMEOUT_S,
        1,
        7 * 24 * 3600,
        GucContext::Userset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.push_rate_limit",
        c"The most chunk bytes one push source may send per second (0: no limit).",
        c"Counted per source in shared memory over one-second windows, replays included; a push over it is refused with 53400 and retried by the shipper. Needs the library in shared_preload_libraries.",
        &PUSH_RATE_LIMIT_KB,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_KB,
    );
    // The pod's capability: per session, set by the pod itself; not in SHOW ALL or the sample
    // file (it is a secret of this session's job).
    GucRegistry::define_string_guc(
        c"cortex_buffer.job_token",
        c"This session's job token: the job an agent pod may act on.",
        c"Issued by the control plane with cortex_buffer.job_token(job_id) for the job's current attempt. Roles with the control-plane or operator role act fleet-wide without one.",
        &JOB_TOKEN,
        GucContext::Userset,
        GucFlags::NO_SHOW_ALL | GucFlags::DISALLOW_IN_FILE,
    );
}

/// What a recovery plan waits for and allows: when a tail is final, how long a catch-up waits,
/// how far the pods' clocks may be off.
fn define_recovery() {
    GucRegistry::define_int_guc(
        c"cortex_buffer.settle_period",
        c"How long a session file must be quiet before its unterminated last line is judged.",
        c"Until then the line may still be being written; afterwards it is indexed if it parses, else recorded as the truncated tail.",
        &SETTLE_PERIOD_MS,
        0,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.catch_up_wait",
        c"How long a lookup's catch-up waits for a file another indexer is indexing.",
        c"Past it the lookup answers with what the index holds and says stale.",
        &CATCH_UP_WAIT_MS,
        0,
        600 * 1000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.recovery_clock_skew",
        c"Clock skew a recovery plan anchored on a checkpoint's write time allows.",
        c"A session file without checkpoint markers is read from the checkpoint's write time (checkpoint_history.created_at, the database's clock) minus this, because the agent's clock stamps its events.",
        &RECOVERY_CLOCK_SKEW_MS,
        0,
        24 * 3600 * 1000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
}

/// Retention (cleanup_session_buffers): superuser-only, since they decide what gets deleted.
fn define_retention() {
    GucRegistry::define_int_guc(
        c"cortex_buffer.gone_retention",
        c"How long the index rows of a session file that is gone are kept.",
        c"A file deleted from the volume, or pushed from another node and no longer kept, loses its session_file, event and corrupt_line rows this long after it went (keep_failed_for instead, when longer, for a failed job's files).",
        &GONE_RETENTION_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.keep_failed_for",
        c"How long the buffers of failed and dead-lettered jobs are kept after the job ended.",
        c"Used by cleanup_session_buffers instead of post_terminal (and of gone_retention) when longer: failed jobs are the ones people debug.",
        &KEEP_FAILED_FOR_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.job_rows_retention",
        c"How long the extension's own per-job rows outlive their job.",
        c"cleanup_session_buffers deletes the usage_ledger, job_usage, crash, circuit, reservation, wait and checkpoint rows of jobs gone from the job table, or terminal for longer than this. Keep it longer than the longest budget window.",
        &JOB_ROWS_RETENTION_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.oversized_file",
        c"A session file larger than this, or a job directory larger than five times it, is listed by oversized_buffers.",
        c"The worker warns once when a file crosses it. A session buffer that grows this large is a runaway agent, or one that needs its own retention.",
        &OVERSIZED_FILE_KB,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_KB,
    );
}

/// The test knobs: internal tunables that only the tests and the benchmarks turn, settings only
/// in a test server. Elsewhere each is the constant it defaults to (the comments of the
/// statics above say why that value).
fn define_test_knobs() {
    GucRegistry::define_int_guc(
        c"cortex_buffer.max_line_memory",
        c"Most memory the indexer may use to convert one line to jsonb.",
        c"Estimated from the line's length and its count of JSON values before converting; a valid line that needs more is still an event, stored with a NULL payload and the reason in payload_problem.",
        &MAX_LINE_MEMORY_KB,
        1024,
        16 * 1024 * 1024,
        GucContext::Suset,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.batch_rows",
        c"Events and corrupt lines the indexer inserts per batch.",
        c"One INSERT statement on the SQL path; the direct heap path takes at most 100 rows per batch.",
        &BATCH_ROWS,
        1,
        100_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.quarantine_after",
        c"Consecutive failed attempts after which the indexer leaves a session file alone.",
        c"A quarantined file is indexed again once it is replaced, or after session_file.quarantined_at and failures are cleared.",
        &QUARANTINE_AFTER,
        1,
        1000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"cortex_buffer.max_corruption_ratio",
        c"Largest share of corrupt lines for a session file to be trusted for recovery.",
        c"Corrupt lines (the truncated tail not counted) over non-blank lines; Spike #31 uses 10%.",
        &MAX_CORRUPTION_RATIO,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.recovery_value_bytes",
        c"Longest tool result or input a recovery plan carries, in bytes.",
        c"Longer ones are cut at a character boundary and flagged result_truncated / input_truncated (the spike caps result_summary at 4096).",
        &RECOVERY_VALUE_BYTES,
        0,
        64 * 1024 * 1024,
        GucContext::Userset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_bool_guc(
        c"cortex_buffer.catch_up",
        c"Whether the per-job lookups bring the job's session files up to date before answering.",
        c"recovery_plan, session_recovery, job_timeline, agent_state and session_usage index what is new in the job's directory first. Off: they answer from what the worker has indexed and say stale.",
        &CATCH_UP,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.pass_dir_bytes",
        c"The most of one job directory's new bytes the worker indexes in one pass.",
        c"The rest waits for the next pass, so one job's volume delays another job's lines by at most this much reading per busy directory per pass. index_sessions() and the lookups' catch-up take everything.",
        &PASS_DIR_KB,
        1024,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.rescan_interval",
        c"How often the worker walks the whole sessions directory when it is notified of changes.",
        c"The safety net of notify mode: besides at start, after the kernel's event queue overflowed and when watches ran out. In poll mode every poll is a full scan.",
        &RESCAN_INTERVAL_S,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.push_max_chunk",
        c"The largest chunk append_session_bytes() accepts.",
        c"A longer chunk is refused (54000); the shipper sends at most this much per call. A line longer than a chunk is held across chunks up to cortex_buffer.max_line_bytes.",
        &PUSH_MAX_CHUNK_KB,
        1,
        1024 * 1024,
        GucContext::Suset,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"cortex_buffer.cleanup_max_dirs",
        c"How many directories one cleanup_session_buffers call deletes from, when max_dirs is NULL.",
        c"Bounds a call, so that a first cleanup of a long-grown volume runs as many short calls (from cron) rather than one long one.",
        &CLEANUP_MAX_DIRS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"cortex_buffer.cleanup_pause_at",
        c"Test hook: the cleanup step at which cleanup_session_buffers stops for 60 seconds.",
        c"decided, rows_deleted, committed or unlinking. For crash tests that kill the backend at each step; empty (the default) in production.",
        &CLEANUP_PAUSE_AT,
        GucContext::Suset,
        GucFlags::NO_SHOW_ALL,
    );
}

fn string_setting(setting: &GucSetting<Option<CString>>) -> String {
    setting.get().as_deref().map(CStr::to_string_lossy).map(|s| s.into_owned()).unwrap_or_default()
}

pub fn sessions_dir() -> String {
    string_setting(&SESSIONS_DIR)
}

pub fn database() -> String {
    string_setting(&DATABASE)
}

pub fn poll_interval() -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(POLL_INTERVAL_MS.get()).unwrap_or(1000).max(10))
}

pub fn watch_mode() -> WatchMode {
    WATCH.get()
}

pub fn rescan_interval() -> std::time::Duration {
    std::time::Duration::from_secs(u64::try_from(RESCAN_INTERVAL_S.get()).unwrap_or(300).max(1))
}

/// `cortex_buffer.workers`, within 1..=MAX_WORKERS.
pub fn workers() -> usize {
    usize::try_from(WORKERS.get().clamp(1, MAX_WORKERS)).unwrap_or(1)
}

pub fn worker_enabled() -> bool {
    WORKER_ENABLED.get()
}

pub fn job_token() -> String {
    string_setting(&JOB_TOKEN)
}

pub fn job_table() -> String {
    string_setting(&JOB_TABLE)
}

pub fn checkpoint_max_bytes() -> usize {
    usize::try_from(CHECKPOINT_MAX_BYTES.get()).unwrap_or(256 * 1024)
}

pub fn checkpoint_history_keep() -> i64 {
    i64::from(CHECKPOINT_HISTORY_KEEP.get().max(1))
}

pub fn reservation_timeout_seconds() -> i64 {
    i64::from(RESERVATION_TIMEOUT_S.get().max(1))
}

pub fn settle_period_us() -> i64 {
    i64::from(SETTLE_PERIOD_MS.get().max(0)) * 1000
}

pub fn max_line_bytes() -> usize {
    usize::try_from(MAX_LINE_BYTES.get()).unwrap_or(1 << 20).max(1024)
}

/// `max_line_memory` in bytes.
pub fn max_line_memory() -> u64 {
    u64::try_from(MAX_LINE_MEMORY_KB.get()).unwrap_or(64 * 1024).max(1024) * 1024
}

pub fn batch_rows() -> usize {
    usize::try_from(BATCH_ROWS.get()).unwrap_or(1000).max(1)
}

pub fn quarantine_after() -> i32 {
    QUARANTINE_AFTER.get().max(1)
}

pub fn max_corruption_ratio() -> f64 {
    let r = MAX_CORRUPTION_RATIO.get();
    if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.1
    }
}

/// `recovery_value_bytes`.
pub fn recovery_value_bytes() -> usize {
    usize::try_from(RECOVERY_VALUE_BYTES.get()).unwrap_or(4096)
}

/// `recovery_clock_skew` in microseconds.
pub fn recovery_clock_skew_us() -> i64 {
    i64::from(RECOVERY_CLOCK_SKEW_MS.get().max(0)) * 1000
}

pub fn catch_up() -> bool {
    CATCH_UP.get()
}

/// `catch_up_wait`.
pub fn catch_up_wait() -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(CATCH_UP_WAIT_MS.get()).unwrap_or(2000))
}

/// `push_max_chunk` in bytes.
pub fn push_max_chunk() -> usize {
    usize::try_from(PUSH_MAX_CHUNK_KB.get()).unwrap_or(4096).max(1) * 1024
}

/// `push_rate_limit` in bytes per second; 0 for none.
pub fn push_rate_limit() -> u64 {
    u64::try_from(PUSH_RATE_LIMIT_KB.get()).unwrap_or(0) * 1024
}

/// `pass_dir_bytes` in bytes.
pub fn pass_dir_bytes() -> u64 {
    u64::try_from(PASS_DIR_KB.get()).unwrap_or(64 * 1024).max(1024) * 1024
}

/// `gone_retention`, `keep_failed_for` and `job_rows_retention` in microseconds.
pub fn retention_us() -> (i64, i64, i64) {
    let us = |s: &GucSetting<i32>| i64::from(s.get().max(0)) * 1_000_000;
    (us(&GONE_RETENTION_S), us(&KEEP_FAILED_FOR_S), us(&JOB_ROWS_RETENTION_S))
}

/// `cleanup_max_dirs`.
pub fn cleanup_max_dirs() -> usize {
    usize::try_from(CLEANUP_MAX_DIRS.get()).unwrap_or(1000).max(1)
}

/// `cleanup_pause_at`, as written.
pub fn cleanup_pause_at() -> String {
    string_setting(&CLEANUP_PAUSE_AT)
}

/// `oversized_file` in bytes.
pub fn oversized_file() -> u64 {
    u64::try_from(OVERSIZED_FILE_KB.get()).unwrap_or(10 * 1024).max(1) * 1024
}
