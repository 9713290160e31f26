//! Crash-aware retry decisions (Spike #34, "CrashLoopBackOff Mitigation", layers 1-3). Pure.

/// One recorded crash of a job, oldest first in a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    /// The process exit code; `None` for a job the zombie reaper found dead.
    pub exit_code: Option<i32>,
    /// `None` for zombies (they carry no message and never count as a deterministic crash).
    pub error_message: Option<String>,
}

impl Crash {
    /// Exit 143 (SIGTERM) is a clean drain, not a failure.
    pub fn is_drain(&self) -> bool {
        self.exit_code == Some(EXIT_DRAINED)
    }
}

pub const EXIT_OOM: i32 = 137;
pub const EXIT_DRAINED: i32 = 143;

/// Escalating backoff for the 1st, 2nd, 3rd and 4th failure; the 5th is a dead letter.
pub const BACKOFF_SECONDS: [i64; 4] = [5, 60, 300, 1800];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Retry,
    Drained,
    TokenBudgetExhausted,
    DeterministicCrash,
    PersistentOom,
    MaxAttempts,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::Retry => "retry",
            Reason::Drained => "drained",
            Reason::TokenBudgetExhausted => "token_budget_exhausted",
            Reason::DeterministicCrash => "deterministic_crash",
            Reason::PersistentOom => "persistent_oom",
            Reason::MaxAttempts => "max_attempts",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    EscalatingBackoff,
    ReducedFootprint,
    Immediate,
    None,
}

impl Strategy {
    pub fn label(self) -> &'static str {
        match self {
            Strategy::EscalatingBackoff => "escalating_backoff",
            Strategy::ReducedFootprint => "reduced_footprint",
            Strategy::Immediate => "immediate",
            Strategy::None => "none",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub retry: bool,
    pub reason: Reason,
    pub strategy: Strategy,
    /// How long to wait before re-enqueueing; `None` when not retrying.
    pub delay_seconds: Option<i64>,
}

impl Decision {
    fn stop(reason: Reason) -> Decision {
        Decision { retry: false, reason, strategy: Strategy::None, delay_seconds: None }
    }
}

/// What the decision needs to know about a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// Attempts started (counted by the dispatcher at SCHEDULED→RUNNING).
    pub attempt: i32,
    pub max_attempts: i32,
    pub budget_exhausted: bool,
    /// Every recorded crash of the job, oldest first.
    pub crashes: Vec<Crash>,
}

/// Decides whether a failed job is retried, and how.
///
/// In order: the retry budget is the hard stop (a retry needs `attempt < max_attempts`, so a job
/// with `max_attempts` 3 runs at most 3 times, drains included); an exhausted token budget stops
/// it; a clean drain (last exit 143) retries at once and is not a failure; the same error
/// message on the last 3 consecutive failures is a deterministic crash; OOM (137) on every
/// failure, at least 2 of them, is persistent; a last exit of 137 retries with a reduced
/// footprint; anything else with escalating backoff. Both backoffs follow
/// [`BACKOFF_SECONDS`] by the number of failures so far; after the 4th the job is dead-lettered.
pub fn decide(job: &JobFacts) -> Decision {
    if job.attempt >= job.max_attempts {
        return Decision::stop(Reason::MaxAttempts);
    }
    if job.budget_exhausted {
        return Decision::stop(Reason::TokenBudgetExhausted);
    }
    if job.crashes.last().is_some_and(Crash::is_drain) {
        return Decision {
            retry: true,
            reason: Reason::Drained,
            strategy: Strategy::Immediate,
            delay_seconds: Some(0),
        };
    }
    let failures: Vec<&Crash> = job.crashes.iter().filter(|c| !c.is_drain()).collect();
    if let [.., a, b, c] = failures.as_slice() {
        if a.error_message.is_some() && a.error_message == b.error_message && b.error_message == c.error_message {
            return Decision::stop(Reason::DeterministicCrash);
        }
    }
    if failures.len() >= 2 && failures.iter().all(|c| c.exit_code == Some(EXIT_OOM)) {
        return Decision::stop(Reason::PersistentOom);
    }
    // The first failure (or a job failed without a crash record) waits 5 s.
    let Some(&delay) = BACKOFF_SECONDS.get(failures.len().max(1) - 1) else {
        return Decision::stop(Reason::MaxAttempts);
    };
    let strategy = if failures.last().is_some_and(|c| c.exit_code == Some(EXIT_OOM)) {
        Strategy::ReducedFootprint
    } else {
        Strategy::EscalatingBackoff
    };
    Decision { retry: true, reason: Reason::Retry, strategy, delay_seconds: Some(delay) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crash(code: i32, msg: &str) -> Crash {
        Crash { exit_code: Some(code), error_message: Some(msg.to_owned()) }
    }

    fn zombie() -> Crash {
        Crash { exit_code: None, error_message: None }
    }

    fn facts(attempt: i32, crashes: Vec<Crash>) -> JobFacts {
        JobFacts { attempt, max_attempts: 10, budget_exhausted: false, crashes }
    }

    fn outcome(d: Decision) -> (bool, &'static str, &'static str, Option<i64>) {
        (d.retry, d.reason.label(), d.strategy.label(), d.delay_seconds)
    }

    #[test]
    fn escalating_backoff_follows_the_schedule_then_dead_letters() {
        let mut crashes = Vec::new();
        let mut delays = Vec::new();
        for i in 0..5 {
            crashes.push(crash(1, &format!("error {i}")));
            let d = decide(&facts(i + 1, crashes.clone()));
            delays.push(outcome(d));
        }
        assert_eq!(
            delays,
            vec![
                (true, "retry", "escalating_backoff", Some(5)),
                (true, "retry", "escalating_backoff", Some(60)),
                (true, "retry", "escalating_backoff", Some(300)),
                (true, "retry", "escalating_backoff", Some(1800)),
                (false, "max_attempts", "none", None),
            ]
        );
    }

    #[test]
    fn max_attempts_is_the_hard_stop() {
        let j = JobFacts { attempt: 3, max_attempts: 3, budget_exhausted: false, crashes: vec![crash(1, "x")] };
        assert_eq!(outcome(decide(&j)), (false, "max_attempts", "none", None));
        // Even a clean drain cannot exceed it: a job with max_attempts 3 runs at most 3 times.
        let drained = JobFacts { crashes: vec![crash(EXIT_DRAINED, "SIGTERM")], ..j.clone() };
        assert_eq!(decide(&drained).reason, Reason::MaxAttempts);
        let below = JobFacts { attempt: 2, ..j };
        assert!(decide(&below).retry);
    }

    #[test]
    fn an_exhausted_budget_stops_retries() {
        let j = JobFacts { budget_exhausted: true, ..facts(1, vec![crash(1, "x")]) };
        assert_eq!(outcome(decide(&j)), (false, "token_budget_exhausted", "none", None));
    }

    #[test]
    fn a_clean_drain_retries_at_once_and_is_not_a_failure() {
        let d = decide(&facts(2, vec![crash(1, "a"), crash(EXIT_DRAINED, "SIGTERM")]));
        assert_eq!(outcome(d), (true, "drained", "immediate", Some(0)));
        // After the drain, the next failure is the second failure, not the third.
        let d = decide(&facts(3, vec![crash(1, "a"), crash(EXIT_DRAINED, "SIGTERM"), crash(1, "b")]));
        assert_eq!(outcome(d), (true, "retry", "escalating_backoff", Some(60)));
    }

    #[test]
    fn the_same_error_three_times_in_a_row_is_deterministic() {
        let same = vec![crash(1, "TypeError: x is undefined"); 3];
        assert_eq!(outcome(decide(&facts(3, same))), (false, "deterministic_crash", "none", None));
        let varied = vec![crash(1, "a"), crash(1, "b"), crash(1, "b")];
        assert!(decide(&facts(3, varied)).retry);
        // Drains between the failures do not break the streak; they are not failures.
        let with_drain = vec![crash(1, "a"), crash(EXIT_DRAINED, "t"), crash(1, "a"), crash(1, "a")];
        assert_eq!(decide(&facts(4, with_drain)).reason, Reason::DeterministicCrash);
    }

    #[test]
    fn zombies_never_count_towards_a_deterministic_crash() {
        let zombies = vec![zombie(), zombie(), zombie()];
        assert_eq!(outcome(decide(&facts(3, zombies))), (true, "retry", "escalating_backoff", Some(300)));
        let mixed = vec![crash(1, "a"), zombie(), crash(1, "a")];
        assert!(decide(&facts(3, mixed)).retry);
    }

    #[test]
    fn oom_retries_smaller_once_and_stops_when_it_persists() {
        assert_eq!(
            outcome(decide(&facts(1, vec![crash(EXIT_OOM, "killed")]))),
            (true, "retry", "reduced_footprint", Some(5))
        );
        let twice = vec![crash(EXIT_OOM, "killed"), crash(EXIT_OOM, "killed again")];
        assert_eq!(outcome(decide(&facts(2, twice))), (false, "persistent_oom", "none", None));
        // OOM after a different failure: reduced footprint, with the second backoff step.
        let after = vec![crash(1, "a"), crash(EXIT_OOM, "killed")];
        assert_eq!(outcome(decide(&facts(2, after))), (true, "retry", "reduced_footprint", Some(60)));
        // Identical OOM messages three times: persistent OOM is checked after determinism.
        let same_oom = vec![crash(EXIT_OOM, "k"), crash(EXIT_OOM, "k"), crash(EXIT_OOM, "k")];
        assert_eq!(decide(&facts(3, same_oom)).reason, Reason::DeterministicCrash);
    }

    #[test]
    fn a_failed_job_without_crash_records_gets_the_first_backoff() {
        assert_eq!(outcome(decide(&facts(1, vec![]))), (true, "retry", "escalating_backoff", Some(5)));
    }
}
