//! The cost of one call: token counts × prices per million tokens, exact. Pure.
//!
//! The seed design rounds each message to cents; at scale that loses (or invents) money, so
//! nothing here rounds. Round only for display.

use super::decimal::Decimal;
use super::usage::Usage;
use crate::error::CbError;

/// A model's prices in USD per million tokens (a `model_price` row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input: Decimal,
    pub output: Decimal,
    /// Cache writes that live 5 minutes (the default lifetime).
    pub cache_write_5m: Decimal,
    /// Cache writes that live 1 hour.
    pub cache_write_1h: Decimal,
    pub cache_read: Decimal,
}

/// A model's prices over time: the price in force at a moment is the newest one whose
/// `effective_from` is not after it. Times are microseconds (PostgreSQL's `timestamptz`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceHistory {
    /// Oldest first.
    entries: Vec<(i64, Price)>,
}

impl PriceHistory {
    pub fn new(mut entries: Vec<(i64, Price)>) -> PriceHistory {
        entries.sort_by_key(|(from, _)| *from);
        PriceHistory { entries }
    }

    /// The price in force at `t`, if any.
    pub fn at(&self, t: i64) -> Option<&Price> {
        let after = self.entries.partition_point(|(from, _)| *from <= t);
        after.checked_sub(1).and_then(|i| self.entries.get(i)).map(|(_, p)| p)
    }

    /// When the model's first price took effect; `None` for a model without prices.
    pub fn first_from(&self) -> Option<i64> {
        self.entries.first().map(|(from, _)| *from)
    }
}

/// USD for `usage` at `price`: Σ tokens × price / 10^6, with no intermediate rounding.
pub fn cost(usage: &Usage, price: &Price) -> Result<Decimal, CbError> {
    let parts = [
        (usage.input, price.input),
        (usage.output, price.output),
        (usage.cache_write_5m, price.cache_write_5m),
        (usage.cache_write_1h, price.cache_write_1h),
        (usage.cache_read, price.cache_read),
    ];
    let mut total = Decimal::ZERO;
    for (tokens, per_mtok) in parts {
        total = total.checked_add(per_mtok.times(tokens)?)?;
    }
    Ok(total.shifted_right(6)?.normalized())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    fn price(input: &str, output: &str, write: &str, write_1h: &str, read: &str) -> Price {
        Price {
            input: d(input),
            output: d(output),
            cache_write_5m: d(write),
            cache_write_1h: d(write_1h),
            cache_read: d(read),
        }
    }

    fn sonnet_4_5() -> Price {
        price("3.00", "15.00", "3.75", "6.00", "0.30")
    }

    fn usage(json: &str) -> Usage {
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        super::super::usage::parse(&v).unwrap_or_else(|e| panic!("{json}: {e:?}"))
    }

    fn cost_of(json: &str, p: &Price) -> String {
        cost(&usage(json), p).map(|c| c.to_string()).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn the_seed_example_costs_exactly_0_10725() {
        let seed = r#"{"input_tokens": 15000, "output_tokens": 2150, "cache_creation_tokens": 8000}"#;
        assert_eq!(cost_of(seed, &sonnet_4_5()), "0.10725");
    }

    #[test]
    fn every_spelling_of_the_same_usage_costs_the_same() {
        // 1000 in, 200 out, 300 cache write, 4000 cache read at Sonnet 4.5:
        // 0.003 + 0.003 + 0.001125 + 0.0012 = 0.008325
        for json in [
            r#"{"input_tokens": 1000, "output_tokens": 200, "cache_creation_tokens": 300, "cache_read_tokens": 4000}"#,
            r#"{"input_tokens": 1000, "output_tokens": 200, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000}"#,
            r#"{"input_tokens": 1000, "output_tokens": 200, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000,
                "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 0}}"#,
            r#"{"tokenUsage": {"inputTokens": 1000, "outputTokens": 200, "cacheCreationTokens": 300, "cacheReadTokens": 4000}}"#,
            r#"{"inputTokens": 1000, "outputTokens": 200, "cacheCreationInputTokens": 300, "cacheReadInputTokens": 4000}"#,
        ] {
            assert_eq!(cost_of(json, &sonnet_4_5()), "0.008325", "{json}");
        }
    }

    #[test]
    fn one_hour_cache_writes_are_priced_separately() {
        // 100 5-minute writes at 3.75 + 200 1-hour writes at 6.00 = 0.000375 + 0.0012
        let split = r#"{"cache_creation_input_tokens": 300,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}}"#;
        assert_eq!(cost_of(split, &sonnet_4_5()), "0.001575");
        // Opus 4.1: 1-hour writes at 2 × input = 30.00.
        let opus = price("15.00", "75.00", "18.75", "30.00", "1.50");
        let hour = r#"{"input_tokens": 10, "cache_creation": {"ephemeral_1h_input_tokens": 1000000}}"#;
        assert_eq!(cost_of(hour, &opus), "30.00015");
    }

    #[test]
    fn tiny_costs_are_not_rounded_away() {
        // One cache-read token of Sonnet: $0.0000003. The seed's per-message rounding makes it 0.
        assert_eq!(cost_of(r#"{"cache_read_input_tokens": 1}"#, &sonnet_4_5()), "0.0000003");
        // A million of them add up to exactly $0.30.
        let one = cost(&usage(r#"{"cache_read_input_tokens": 1}"#), &sonnet_4_5()).unwrap_or(Decimal::ZERO);
        assert_eq!(one.times(1_000_000).map(|t| t.to_string()).ok(), Some("0.3".to_owned()));
        assert_eq!(cost_of(r#"{"input_tokens": 0, "output_tokens": 0}"#, &sonnet_4_5()), "0");
    }

    #[test]
    fn the_price_in_force_is_the_newest_not_after_the_moment() {
        let (old, new) = (sonnet_4_5(), price("1", "1", "1", "1", "1"));
        let h = PriceHistory::new(vec![(200, new), (100, old)]);
        assert_eq!(h.at(99), None);
        assert_eq!(h.at(100), Some(&old));
        assert_eq!(h.at(199), Some(&old));
        assert_eq!(h.at(200), Some(&new));
        assert_eq!(h.at(i64::MAX), Some(&new));
        assert_eq!(h.first_from(), Some(100));
        assert_eq!(PriceHistory::default().at(0), None);
        assert_eq!(PriceHistory::default().first_from(), None);
    }

    #[test]
    fn prices_with_many_decimals_stay_exact() {
        // Checked with Python's decimal module at 60 digits.
        let odd = price("0.123456789012", "0", "0", "0", "0");
        assert_eq!(cost_of(r#"{"input_tokens": 9007199254740991}"#, &odd), "1111999897.981602166594790892");
    }
}
