//! The per-agent circuit breaker (Spike #34 layer 4). Pure: times are microseconds since the
//! epoch, and the shell stores a [`Circuit`] per agent and serialises changes with a row lock.
//!
//! `threshold` failures within `window` open the breaker for `cooldown`. After the cooldown it
//! is half-open: exactly one canary job is admitted, and only that job's outcome closes it
//! (success) or opens it again (failure). A canary that has not reported within `lease` is
//! replaced by the next job asking. Outcomes of jobs admitted before the breaker last closed
//! never count towards a new trip, and no outcome but the canary's changes an open breaker.

/// Breaker parameters of one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub threshold: u32,
    pub window_us: i64,
    pub cooldown_us: i64,
    pub lease_us: i64,
}

pub const MINUTE_US: i64 = 60 * 1_000_000;

impl Default for Params {
    fn default() -> Params {
        Params { threshold: 3, window_us: 15 * MINUTE_US, cooldown_us: 30 * MINUTE_US, lease_us: 10 * MINUTE_US }
    }
}

/// The one job let through a half-open breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canary {
    pub job: [u8; 16],
    pub lease_until_us: i64,
}

/// What is stored per agent. "Half-open" is not stored: it is an open breaker whose cooldown
/// has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Circuit {
    pub open: bool,
    pub closed_since_us: i64,
    pub open_until_us: Option<i64>,
    pub canary: Option<Canary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open,
    HalfOpen,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }
}

impl Circuit {
    /// A breaker that has never tripped.
    pub fn closed(now_us: i64) -> Circuit {
        Circuit { open: false, closed_since_us: now_us, open_until_us: None, canary: None }
    }

    pub fn state(&self, now_us: i64) -> State {
        match (self.open, self.open_until_us) {
            (false, _) => State::Closed,
            (true, Some(until)) if now_us < until => State::Open,
            (true, _) => State::HalfOpen,
        }
    }

    /// Whether `job` may start now, and the breaker afterwards.
    pub fn admit(self, now_us: i64, job: [u8; 16], p: &Params) -> (bool, Circuit) {
        match self.state(now_us) {
            State::Closed => (true, self),
            State::Open => (false, self),
            State::HalfOpen => match self.canary {
                // Asking again for the canary itself is idempotent.
                Some(c) if c.job == job => (true, self),
                Some(c) if now_us < c.lease_until_us => (false, self),
                // No canary yet, or it never reported within its lease: this job replaces it.
                _ => (true, Circuit { canary: Some(Canary { job, lease_until_us: now_us + p.lease_us }), ..self }),
            },
        }
    }

    /// Whether an outcome counts towards tripping: a failure, reported while closed, of a job
    /// admitted since the breaker last closed (or not admitted through `admit_job` at all).
    pub fn counts(&self, success: bool, admitted_at_us: Option<i64>) -> bool {
        !success && !self.open && admitted_at_us.is_none_or(|t| t >= self.closed_since_us)
    }

    /// The breaker after `job` reported, given the counted failures now in the window.
    pub fn after_outcome(
        self,
        now_us: i64,
        job: [u8; 16],
        success: bool,
        failures_in_window: u32,
        p: &Params,
    ) -> Circuit {
        if self.open {
            return match self.canary {
                Some(c) if c.job == job && success => Circuit::closed(now_us),
                Some(c) if c.job == job => {
                    Circuit { open: true, open_until_us: Some(now_us + p.cooldown_us), canary: None, ..self }
                }
                // Late outcomes of other jobs change nothing while open.
                _ => self,
            };
        }
        if !success && failures_in_window >= p.threshold {
            Circuit { open: true, open_until_us: Some(now_us + p.cooldown_us), canary: None, ..self }
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000_000;
    const A: [u8; 16] = [1; 16];
    const B: [u8; 16] = [2; 16];
    const C: [u8; 16] = [3; 16];

    fn tripped(p: &Params) -> Circuit {
        let mut c = Circuit::closed(T0);
        for (i, failures) in (1..=3).enumerate() {
            c = c.after_outcome(T0 + i as i64, [i as u8; 16], false, failures, p);
        }
        c
    }

    #[test]
    fn three_failures_in_the_window_open_the_breaker_for_the_cooldown() {
        let p = Params::default();
        let c = Circuit::closed(T0).after_outcome(T0, A, false, 2, &p);
        assert_eq!(c.state(T0), State::Closed);
        let c = tripped(&p);
        assert_eq!(c.state(T0 + 10), State::Open);
        assert_eq!(c.open_until_us, Some(T0 + 2 + p.cooldown_us));
        assert!(!c.admit(T0 + 10, A, &p).0);
        assert_eq!(c.state(T0 + 2 + p.cooldown_us), State::HalfOpen);
    }

    #[test]
    fn exactly_one_canary_is_admitted_after_the_cooldown() {
        let p = Params::default();
        let later = T0 + p.cooldown_us + MINUTE_US;
        let (first, c) = tripped(&p).admit(later, A, &p);
        let (second, c) = c.admit(later, B, &p);
        let (again, c) = c.admit(later + 1, A, &p);
        assert_eq!((first, second, again), (true, false, true));
        assert_eq!(c.canary.map(|k| k.job), Some(A));
    }

    #[test]
    fn only_the_canary_closes_or_reopens_the_breaker() {
        let p = Params::default();
        let later = T0 + p.cooldown_us + MINUTE_US;
        let (_, c) = tripped(&p).admit(later, A, &p);
        // A late success from a job admitted before the trip changes nothing.
        let c = c.after_outcome(later + 1, B, true, 0, &p);
        assert_eq!(c.state(later + 1), State::HalfOpen);
        let closed = c.after_outcome(later + 2, A, true, 0, &p);
        assert_eq!(closed.state(later + 2), State::Closed);
        assert_eq!(closed.closed_since_us, later + 2);
        let reopened = c.after_outcome(later + 2, A, false, 0, &p);
        assert_eq!(reopened.state(later + 3), State::Open);
        assert_eq!(reopened.open_until_us, Some(later + 2 + p.cooldown_us));
        assert_eq!(reopened.canary, None);
    }

    #[test]
    fn a_canary_that_never_reports_is_replaced_after_its_lease() {
        let p = Params::default();
        let later = T0 + p.cooldown_us + MINUTE_US;
        let (_, c) = tripped(&p).admit(later, A, &p);
        assert!(!c.admit(later + p.lease_us - 1, B, &p).0);
        let (replaced, c) = c.admit(later + p.lease_us, B, &p);
        assert!(replaced);
        assert_eq!(c.canary.map(|k| k.job), Some(B));
        // The old canary reporting late no longer decides anything.
        assert_eq!(
            c.after_outcome(later + p.lease_us + 1, A, true, 0, &p).state(later + p.lease_us + 1),
            State::HalfOpen
        );
        assert_eq!(c.after_outcome(later + p.lease_us + 1, C, false, 0, &p), c);
    }

    #[test]
    fn failures_of_jobs_admitted_before_the_breaker_closed_do_not_count() {
        let p = Params::default();
        let closed = Circuit::closed(T0);
        assert!(closed.counts(false, Some(T0)));
        assert!(closed.counts(false, None), "jobs not admitted through admit_job count");
        assert!(!closed.counts(false, Some(T0 - 1)), "admitted before the breaker last closed");
        assert!(!closed.counts(true, Some(T0)));
        let open = tripped(&p);
        assert!(!open.counts(false, None), "nothing counts while open");
    }
}
