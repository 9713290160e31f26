//! Progress of a long cleanup, where operators look: the backend's `pg_stat_activity.query`
//! says how far it is (every [`EVERY_ACTIVITY`] directories) and a NOTICE every
//! [`EVERY_NOTICE`]; the statement's own text comes back at the end. And the test hook that
//! stops a run at a step, so that the crash tests can kill it there.

use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

use pgrx::pg_sys;

use crate::pg::guc;
use cortex_buffer_core::retention::Step;

pub const EVERY_ACTIVITY: usize = 100;
pub const EVERY_NOTICE: usize = 1000;

/// How long the test hook stops a run (the test kills the backend meanwhile).
const PAUSE: Duration = Duration::from_secs(60);

pub struct Progress {
    total: usize,
    done: usize,
    reported: bool,
}

fn set_activity(text: &str) {
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a connected backend's pgstat entry exists; the string is copied.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, c.as_ptr()) };
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress { total, done: 0, reported: false }
    }

    /// How many directories have been examined.
    pub fn done(&self) -> usize {
        self.done
    }

    /// One more directory examined (`acted`: how many had something deleted).
    pub fn examined(&mut self, acted: usize) {
        self.done += 1;
        if self.done.is_multiple_of(EVERY_ACTIVITY) {
            self.reported = true;
            set_activity(&format!(
                "cortex_buffer.cleanup_session_buffers: {} of {} directories examined, {acted} with deletions",
                self.done, self.total
            ));
        }
        if self.done.is_multiple_of(EVERY_NOTICE) {
            crate::pg::raise::notice(
                format!(
                    "cleanup_session_buffers: {} of {} directories examined, {acted} with deletions",
                    self.done, self.total
                ),
                None,
            );
        }
    }

    /// Puts the statement's own text back in `pg_stat_activity`.
    pub fn finish(&self) {
        if !self.reported {
            return;
        }
        // SAFETY: debug_query_string is the current statement's text (or NULL) while it runs.
        let query = unsafe { pg_sys::debug_query_string };
        if query.is_null() {
            return;
        }
        // SAFETY: a NUL-terminated string owned by the backend for the statement's duration.
        let text = unsafe { CStr::from_ptr(query) }.to_string_lossy().into_owned();
        set_activity(&text);
    }
}

/// The test hook (`cortex_buffer.cleanup_pause_at`): stops here for a minute when the setting
/// names this step. In the transaction's body it still answers cancel requests; in the commit
/// callback (`committed`, `unlinking`) it only sleeps.
pub fn pause_at(step: Step) {
    if Step::parse(&guc::cleanup_pause_at()) != Some(step) {
        return;
    }
    let in_body = matches!(step, Step::Decided | Step::RowsDeleted);
    let until = Instant::now() + PAUSE;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        if in_body {
            pgrx::check_for_interrupts!();
        }
    }
}
