//! Per-job budgets (Spike #34 "Token Budget"): when a job may make its next LLM call. Pure.
//!
//! A budget is exhausted when what was used reaches the limit (`used >= limit`), so a limit of 0
//! allows nothing and `NULL` (no limit) allows everything. The cost limit is checked first, as
//! the spike's `checkTokenBudget` does. Input tokens for budgets are uncached input + cache
//! writes + cache reads.
//!
//! Reservations make the check hold under concurrency: a call is admitted only while what was
//! used plus what open reservations hold plus its own estimate stays within the limit. Settled
//! spend can then exceed a limit only by what admitted calls spent beyond their estimates.

use super::decimal::Decimal;
use crate::error::CbError;

/// An agent's per-job limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_input_tokens: Option<i64>,
    pub max_cost: Option<Decimal>,
}

/// Input tokens (as budgets count them) and cost: used so far, held by reservations, or estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    pub input_tokens: i64,
    pub cost: Decimal,
}

impl Amount {
    pub const ZERO: Amount = Amount { input_tokens: 0, cost: Decimal::ZERO };

    fn plus(self, other: Amount) -> Result<Amount, CbError> {
        Ok(Amount {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            cost: self.cost.checked_add(other.cost)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The agent has no limits.
    NoBudget,
    WithinBudget,
    CostExhausted,
    InputTokensExhausted,
    /// Not exhausted, but this call's estimate does not fit (reservations only).
    CostInsufficient,
    InputTokensInsufficient,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::NoBudget => "no_budget",
            Reason::WithinBudget => "within_budget",
            Reason::CostExhausted => "cost_budget_exhausted",
            Reason::InputTokensExhausted => "input_token_budget_exhausted",
            Reason::CostInsufficient => "cost_budget_insufficient",
            Reason::InputTokensInsufficient => "input_token_budget_insufficient",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: Reason,
}

impl Verdict {
    fn allow(limits: &Limits) -> Verdict {
        let reason = if limits.max_cost.is_none() && limits.max_input_tokens.is_none() {
            Reason::NoBudget
        } else {
            Reason::WithinBudget
        };
        Verdict { allowed: true, reason }
    }

    fn refuse(reason: Reason) -> Verdict {
        Verdict { allowed: false, reason }
    }
}

/// Whether a job that has used `used` may make another call (Spike #34: exhausted when
/// `used >= limit`).
pub fn check(used: &Amount, limits: &Limits) -> Verdict {
    if limits.max_cost.is_some_and(|max| used.cost >= max) {
        return Verdict::refuse(Reason::CostExhausted);
    }
    if limits.max_input_tokens.is_some_and(|max| used.input_tokens >= max) {
        return Verdict::refuse(Reason::InputTokensExhausted);
    }
    Verdict::allow(limits)
}

/// Whether a call estimated at `estimate` may be reserved, given what was used and what open
/// reservations hold: the budget must not be exhausted counting the reservations, and the
/// estimate must fit in what is left.
pub fn admit(used: &Amount, reserved: &Amount, estimate: &Amount, limits: &Limits) -> Result<Verdict, CbError> {
    let committed = used.plus(*reserved)?;
    let verdict = check(&committed, limits);
    if !verdict.allowed {
        return Ok(verdict);
    }
    let after = committed.plus(*estimate)?;
    if limits.max_cost.is_some_and(|max| after.cost > max) {
        return Ok(Verdict::refuse(Reason::CostInsufficient));
    }
    if limits.max_input_tokens.is_some_and(|max| after.input_tokens > max) {
        return Ok(Verdict::refuse(Reason::InputTokensInsufficient));
    }
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn amount(tokens: i64, cost: &str) -> Amount {
        Amount { input_tokens: tokens, cost: d(cost) }
    }

    fn limits(tokens: Option<i64>, cost: Option<&str>) -> Limits {
        Limits { max_input_tokens: tokens, max_cost: cost.map(d) }
    }

    fn labels(v: Verdict) -> (bool, &'static str) {
        (v.allowed, v.reason.label())
    }

    #[test]
    fn exhausted_when_used_reaches_the_limit() {
        let l = limits(Some(500_000), Some("5.00"));
        assert_eq!(labels(check(&amount(0, "0"), &l)), (true, "within_budget"));
        assert_eq!(labels(check(&amount(499_999, "4.999999"), &l)), (true, "within_budget"));
        assert_eq!(labels(check(&amount(10, "5"), &l)), (false, "cost_budget_exhausted"));
        assert_eq!(labels(check(&amount(500_000, "1"), &l)), (false, "input_token_budget_exhausted"));
        // The cost limit is checked first, as the spike does.
        assert_eq!(labels(check(&amount(600_000, "6"), &l)), (false, "cost_budget_exhausted"));
    }

    #[test]
    fn null_is_unlimited_and_zero_allows_nothing() {
        assert_eq!(labels(check(&amount(i64::MAX, "99999999"), &Limits::default())), (true, "no_budget"));
        assert_eq!(labels(check(&amount(0, "0"), &limits(Some(0), None))), (false, "input_token_budget_exhausted"));
        assert_eq!(labels(check(&amount(0, "0"), &limits(None, Some("0")))), (false, "cost_budget_exhausted"));
        assert_eq!(labels(check(&amount(7, "1000"), &limits(Some(8), None))), (true, "within_budget"));
    }

    #[test]
    fn reservations_count_as_spent_and_the_estimate_must_fit() {
        let l = limits(Some(1000), Some("1.00"));
        let used = amount(300, "0.30");
        let reserved = amount(400, "0.40");
        // 300 + 400 + 300 = 1000 fits exactly; one more token does not.
        assert_eq!(labels(admit(&used, &reserved, &amount(300, "0.30"), &l).unwrap()), (true, "within_budget"));
        assert_eq!(
            labels(admit(&used, &reserved, &amount(301, "0.10"), &l).unwrap()),
            (false, "input_token_budget_insufficient")
        );
        assert_eq!(
            labels(admit(&used, &reserved, &amount(10, "0.300001"), &l).unwrap()),
            (false, "cost_budget_insufficient")
        );
        // Used + reserved at the limit: exhausted, whatever the estimate (even zero).
        assert_eq!(
            labels(admit(&used, &amount(700, "0.1"), &Amount::ZERO, &l).unwrap()),
            (false, "input_token_budget_exhausted")
        );
    }

    #[test]
    fn without_limits_everything_is_admitted() {
        let huge = amount(i64::MAX, "1000000000");
        assert_eq!(labels(admit(&huge, &huge, &huge, &Limits::default()).unwrap()), (true, "no_budget"));
    }
}
