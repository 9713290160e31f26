//! When the worker may index, and what it says when it may not. Pure: the worker gathers the
//! facts, this decides, and remembers what was already logged so a condition that lasts is
//! logged once, not every poll.

use std::collections::HashSet;

use crate::indexer::discovery::Problem;

/// Why the worker is not indexing right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    Disabled,
    InRecovery,
    ExtensionMissing { database: String },
    VersionMismatch { installed: String, library: String },
    SessionsDir { reason: String },
    Catalog { reason: String },
}

impl Wait {
    /// The log line (LOG level) for entering this condition.
    pub fn message(&self) -> String {
        match self {
            Wait::Disabled => "cortex_buffer worker is disabled (cortex_buffer.worker_enabled = off); idling".into(),
            Wait::InRecovery => "cortex_buffer worker is waiting: the server is in recovery (a standby indexes nothing until promoted)".into(),
            Wait::ExtensionMissing { database } => format!(
                "cortex_buffer worker is waiting: extension \"cortex_buffer\" is not installed in database \"{database}\"; run CREATE EXTENSION cortex_buffer there, or set cortex_buffer.database"
            ),
            Wait::VersionMismatch { installed, library } => format!(
                "cortex_buffer worker is waiting: the installed extension is version {installed} but the loaded library is {library}; run ALTER EXTENSION cortex_buffer UPDATE"
            ),
            Wait::SessionsDir { reason } => format!("cortex_buffer worker is waiting: {reason}"),
            Wait::Catalog { reason } => format!("cortex_buffer worker could not read its catalogue: {reason}"),
        }
    }

    /// The short text shown in `pg_stat_activity.query`.
    pub fn activity(&self) -> String {
        match self {
            Wait::Disabled => "disabled (cortex_buffer.worker_enabled = off)".into(),
            Wait::InRecovery => "waiting: server in recovery".into(),
            Wait::ExtensionMissing { database } => format!("waiting: extension not installed in \"{database}\""),
            Wait::VersionMismatch { installed, library } => {
                format!("waiting: extension version {installed} differs from library {library}")
            }
            Wait::SessionsDir { reason } => format!("waiting: {reason}"),
            Wait::Catalog { reason } => format!("waiting: {reason}"),
        }
    }
}

/// The checks that do not involve the sessions directory, in the order they are made.
pub fn assess(
    enabled: bool,
    in_recovery: bool,
    installed: Option<&str>,
    library: &str,
    database: &str,
) -> Option<Wait> {
    if !enabled {
        Some(Wait::Disabled)
    } else if in_recovery {
        Some(Wait::InRecovery)
    } else {
        match installed {
            None => Some(Wait::ExtensionMissing { database: database.to_owned() }),
            Some(v) if v != library => {
                Some(Wait::VersionMismatch { installed: v.to_owned(), library: library.to_owned() })
            }
            Some(_) => None,
        }
    }
}

/// Remembers the condition last logged.
#[derive(Debug, Default)]
pub struct ConditionLog {
    current: Option<Wait>,
}

impl ConditionLog {
    /// Records `wait`; returns true when it differs from what was last logged.
    pub fn enter(&mut self, wait: &Wait) -> bool {
        if self.current.as_ref() == Some(wait) {
            false
        } else {
            self.current = Some(wait.clone());
            true
        }
    }

    /// Records that the worker is indexing again; returns the condition that ended, if any.
    pub fn clear(&mut self) -> Option<Wait> {
        self.current.take()
    }
}

/// Remembers which per-file problems were already logged; forgets those that went away so a
/// problem that comes back is logged again.
#[derive(Debug, Default)]
pub struct ProblemLog {
    seen: HashSet<Problem>,
}

impl ProblemLog {
    /// The problems of a pass over everything that were not reported before: what to log.
    pub fn fresh<'a>(&mut self, current: &'a [Problem]) -> Vec<&'a Problem> {
        self.fresh_within(current, |_| true)
    }

    /// The same for a pass over part of the volume: a remembered problem is forgotten (so it
    /// is news when it comes back) only if the pass `covered` its path and did not report it
    /// again; problems elsewhere, which a pass over some directories cannot see, are kept.
    pub fn fresh_within<'a>(&mut self, current: &'a [Problem], covered: impl Fn(&str) -> bool) -> Vec<&'a Problem> {
        let now: HashSet<&Problem> = current.iter().collect();
        self.seen.retain(|p| now.contains(p) || !covered(&p.path));
        current.iter().filter(|p| self.seen.insert((*p).clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_come_in_order() {
        assert_eq!(assess(false, true, None, "0.1.0", "db"), Some(Wait::Disabled));
        assert_eq!(assess(true, true, None, "0.1.0", "db"), Some(Wait::InRecovery));
        assert_eq!(assess(true, false, None, "0.1.0", "db"), Some(Wait::ExtensionMissing { database: "db".into() }));
        assert_eq!(
            assess(true, false, Some("0.0.9"), "0.1.0", "db"),
            Some(Wait::VersionMismatch { installed: "0.0.9".into(), library: "0.1.0".into() })
        );
        assert_eq!(assess(true, false, Some("0.1.0"), "0.1.0", "db"), None);
    }

    #[test]
    fn a_lasting_condition_is_logged_once_and_again_after_it_clears() {
        let mut log = ConditionLog::default();
        assert!(log.enter(&Wait::InRecovery));
        assert!(!log.enter(&Wait::InRecovery));
        assert!(log.enter(&Wait::Disabled), "a different condition is news");
        assert_eq!(log.clear(), Some(Wait::Disabled));
        assert_eq!(log.clear(), None);
        assert!(log.enter(&Wait::Disabled));
    }

    #[test]
    fn problems_are_logged_once_while_they_last() {
        let a = Problem { path: "/a".into(), reason: "r".into() };
        let b = Problem { path: "/b".into(), reason: "r".into() };
        let mut log = ProblemLog::default();
        assert_eq!(log.fresh(std::slice::from_ref(&a)).len(), 1);
        assert_eq!(log.fresh(&[a.clone(), b.clone()]), vec![&b]);
        assert!(log.fresh(&[a.clone(), b.clone()]).is_empty());
        assert!(log.fresh(std::slice::from_ref(&b)).is_empty());
        assert_eq!(log.fresh(&[a.clone(), b]), vec![&a], "a problem that came back is news again");
    }

    #[test]
    fn a_pass_over_other_directories_does_not_make_a_problem_news_again() {
        let a = Problem { path: "/v/job-a/fifo.jsonl".into(), reason: "r".into() };
        let mut log = ProblemLog::default();
        assert_eq!(log.fresh(std::slice::from_ref(&a)).len(), 1);
        // A pass over job-b only: it cannot see job-a's FIFO, which stays known.
        assert!(log.fresh_within(&[], |p| p.starts_with("/v/job-b/")).is_empty());
        assert!(log.fresh(std::slice::from_ref(&a)).is_empty(), "still the same problem: not logged again");
        // A pass over job-a that no longer finds it forgets it; when it comes back it is news.
        assert!(log.fresh_within(&[], |p| p.starts_with("/v/job-a/")).is_empty());
        assert_eq!(log.fresh(std::slice::from_ref(&a)).len(), 1);
    }

    #[test]
    fn messages_tell_the_operator_what_to_do() {
        assert!(Wait::ExtensionMissing { database: "app".into() }.message().contains("CREATE EXTENSION"));
        assert!(Wait::VersionMismatch { installed: "a".into(), library: "b".into() }
            .message()
            .contains("ALTER EXTENSION"));
        assert!(Wait::Disabled.activity().starts_with("disabled"));
    }
}
