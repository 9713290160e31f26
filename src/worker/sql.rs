//! The background worker's SQL face: `index_now()` wakes it, `indexer_worker()` reads its
//! figures from shared memory (the `indexer_status` view joins them with `session_file`).
//! Arrows run from the worker to the buffer, never back.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use super::shared::{self, Phase};
use crate::pg::raise::notice;
use cortex_buffer_core::indexer::timestamp::POSTGRES_EPOCH_OFFSET_US;

fn ts(unix_us: Option<i64>) -> Option<TimestampWithTimeZone> {
    unix_us
        .and_then(|u| u.checked_sub(POSTGRES_EPOCH_OFFSET_US))
        .and_then(|pg| TimestampWithTimeZone::try_from(pg).ok())
}

/// Wakes the background worker for an immediate pass. False (with a NOTICE saying why) when no
/// worker is there to wake.
#[pg_extern(volatile)]
fn index_now() -> bool {
    let (message, hint) = match shared::phase() {
        None => (
            "cortex_buffer's background worker is not running: the library is not in shared_preload_libraries",
            "Add cortex_buffer to shared_preload_libraries and restart the server, or call cortex_buffer.index_sessions().",
        ),
        Some(Phase::Absent) => (
            "cortex_buffer's background worker is not running (it may be starting or restarting after an error)",
            "See the server log for lines from \"cortex_buffer indexer\".",
        ),
        Some(Phase::Disabled) => (
            "cortex_buffer's background worker is disabled",
            "Set cortex_buffer.worker_enabled = on and reload the configuration.",
        ),
        Some(Phase::Active | Phase::Waiting) => {
            if shared::wake_all_for_rescan(crate::pg::guc::workers()) {
                return true;
            }
            ("cortex_buffer's background worker exited before it could be woken", "Try again in a few seconds.")
        }
    };
    notice(message, Some(hint));
    false
}

/// The indexer processes' own figures (shared memory), one row each, for the `indexer_status`
/// view.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
fn indexer_worker() -> TableIterator<
    'static,
    (
        name!(worker, i32),
        name!(worker_pid, Option<i32>),
        name!(worker_state, String),
        name!(watch_mode, String),
        name!(watches, i64),
        name!(files, i64),
        name!(last_pass_at, Option<TimestampWithTimeZone>),
        name!(last_pass_ms, Option<f64>),
        name!(passes, i64),
        name!(last_rescan_at, Option<TimestampWithTimeZone>),
        name!(rescans, i64),
        name!(events_indexed, i64),
        name!(errors, i64),
    ),
> {
    let count = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let rows: Vec<_> = (0..crate::pg::guc::workers())
        .map(|n| {
            let s = shared::stats(n);
            let state = match s.phase {
                None => "not preloaded",
                Some(shared::Phase::Absent) => "not running",
                Some(shared::Phase::Active) => "indexing",
                Some(shared::Phase::Disabled) => "disabled",
                Some(shared::Phase::Waiting) => "waiting",
            };
            let ran = s.passes > 0;
            (
                i32::try_from(n + 1).unwrap_or(i32::MAX),
                (s.pid != 0).then_some(s.pid),
                state.to_owned(),
                s.watching.label().to_owned(),
                count(s.watches),
                count(s.files),
                if ran { ts(Some(s.last_pass_us)) } else { None },
                ran.then(|| s.last_pass_duration_us as f64 / 1000.0),
                count(s.passes),
                if s.rescans > 0 { ts(Some(s.last_rescan_us)) } else { None },
                count(s.rescans),
                count(s.events_indexed),
                count(s.errors),
            )
        })
        .collect();
    TableIterator::new(rows)
}

extension_sql_file!("api.sql", name = "worker_api", requires = ["indexer_schema", index_now, indexer_worker]);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn index_now_is_false_with_a_notice_when_the_worker_is_disabled() {
        // The test cluster preloads the library with cortex_buffer.worker_enabled = off.
        assert_eq!(Spi::get_one::<bool>("SELECT cortex_buffer.index_now()").ok().flatten(), Some(false));
    }

    #[pg_test]
    fn indexer_worker_reports_the_disabled_worker() {
        assert_eq!(
            Spi::get_one::<String>("SELECT worker_state FROM cortex_buffer.indexer_worker()").ok().flatten().as_deref(),
            Some("disabled")
        );
    }
}
