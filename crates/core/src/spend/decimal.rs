//! Exact decimals for money and prices. Pure.
//!
//! A value is `mantissa × 10^-scale`. Everything stays exact: products of token counts and
//! prices, sums of costs, comparisons with limits. Values cross the SQL boundary as `numeric`
//! text, which never uses exponents. The ranges the schema allows (prices with at most 12
//! decimals below 10^6 per million tokens, counts below 2^53, limits and totals below 10^19 with
//! at most 18 decimals) keep every mantissa far below `i128::MAX`; the arithmetic is checked all
//! the same and reports overflow instead of wrapping.

use std::cmp::Ordering;
use std::fmt;

use crate::error::{CbError, SqlState};

/// Most decimals a value may carry (costs: 12 price decimals + 6 for "per million").
pub const MAX_SCALE: u32 = 18;

#[derive(Debug, Clone, Copy)]
pub struct Decimal {
    mantissa: i128,
    scale: u32,
}

fn out_of_range(what: &str) -> CbError {
    CbError::new(SqlState::NumericValueOutOfRange, format!("{what} is out of range for an exact cost"))
        .with_hint("Costs, prices and limits must stay below 10^19 with at most 18 decimals.")
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Decimal {
    pub const ZERO: Decimal = Decimal { mantissa: 0, scale: 0 };

    pub fn from_int(v: i64) -> Decimal {
        Decimal { mantissa: i128::from(v), scale: 0 }
    }

    /// `-self` (mantissas stay within ±10^37, so this cannot overflow).
    pub fn negated(self) -> Decimal {
        Decimal { mantissa: -self.mantissa, scale: self.scale }
    }

    /// Parses `numeric` text: `[-+]digits[.digits]`. `NaN` and infinities are refused.
    pub fn parse(text: &str) -> Result<Decimal, CbError> {
        let bad = || {
            CbError::new(SqlState::InvalidParameterValue, format!("\"{text}\" is not a finite decimal number"))
                .with_hint("Prices, costs and limits are plain decimals such as 3.75.")
        };
        let t = text.trim();
        let (negative, digits) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (int_part, frac_part) = match digits.split_once('.') {
            Some((i, f)) => (i, f),
            None => (digits, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(bad());
        }
        if !int_part.bytes().chain(frac_part.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        // Trailing zeros carry no value; dropping them keeps scales small.
        let frac_part = frac_part.trim_end_matches('0');
        let scale = u32::try_from(frac_part.len()).map_err(|_| out_of_range(text))?;
        if scale > MAX_SCALE {
            return Err(out_of_range(text));
        }
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(b - b'0')))
                .ok_or_else(|| out_of_range(text))?;
        }
        Ok(Decimal { mantissa: if negative { -mantissa } else { mantissa }, scale })
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Both values with a common scale.
    fn aligned(self, other: Decimal) -> Option<(i128, i128, u32)> {
        let scale = self.scale.max(other.scale);
        let a = self.mantissa.checked_mul(pow10(scale - self.scale)?)?;
        let b = other.mantissa.checked_mul(pow10(scale - other.scale)?)?;
        Some((a, b, scale))
    }

    pub fn checked_add(self, other: Decimal) -> Result<Decimal, CbError> {
        let (a, b, scale) = self.aligned(other).ok_or_else(|| out_of_range("a sum"))?;
        let mantissa = a.checked_add(b).ok_or_else(|| out_of_range("a sum"))?;
        Ok(Decimal { mantissa, scale })
    }

    /// `self × count`, exact.
    pub fn times(self, count: u64) -> Result<Decimal, CbError> {
        let mantissa = self.mantissa.checked_mul(i128::from(count)).ok_or_else(|| out_of_range("a product"))?;
        Ok(Decimal { mantissa, scale: self.scale })
    }

    /// `self / 10^places`, exact (only the scale moves).
    pub fn shifted_right(self, places: u32) -> Result<Decimal, CbError> {
        let scale = self.scale.checked_add(places).filter(|s| *s <= 38).ok_or_else(|| out_of_range("a quotient"))?;
        Ok(Decimal { mantissa: self.mantissa, scale })
    }

    /// The same value without trailing fractional zeros.
    pub fn normalized(self) -> Decimal {
        let mut d = self;
        while d.scale > 0 && d.mantissa % 10 == 0 {
            d.mantissa /= 10;
            d.scale -= 1;
        }
        d
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Decimal) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Decimal {}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match self.aligned(*other) {
            Some((a, b, _)) => a.cmp(&b),
            // Aligning overflowed, so the values are far apart: signs and then magnitude of the
            // integer parts decide (equal integer parts cannot overflow when aligned).
            None => {
                let int = |d: &Decimal| pow10(d.scale).map_or(0, |p| d.mantissa / p);
                int(self).cmp(&int(other)).then(self.mantissa.signum().cmp(&other.mantissa.signum()))
            }
        }
    }
}

/// `numeric` text: no exponent, no trailing fractional zeros.
impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.normalized();
        let digits = d.mantissa.unsigned_abs().to_string();
        let sign = if d.mantissa < 0 { "-" } else { "" };
        let scale = d.scale as usize;
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        if digits.len() > scale {
            let (i, frac) = digits.split_at(digits.len() - scale);
            write!(f, "{sign}{i}.{frac}")
        } else {
            write!(f, "{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    #[test]
    fn parses_and_prints_numeric_text_exactly() {
        for (input, printed) in [
            ("3.00", "3"),
            ("0.30", "0.3"),
            ("18.75", "18.75"),
            ("-0.000001", "-0.000001"),
            ("+12", "12"),
            (".5", "0.5"),
            ("7.", "7"),
            ("0", "0"),
            ("0.000000000000000001", "0.000000000000000001"),
            ("9999999999999999999.999999999999999999", "9999999999999999999.999999999999999999"),
        ] {
            assert_eq!(d(input).to_string(), printed, "{input}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_finite_plain_decimal() {
        for bad in ["", "-", ".", "NaN", "Infinity", "-Infinity", "1e5", "1,5", "0x10", "1.2.3", " 1 2"] {
            let e = Decimal::parse(bad).expect_err(bad);
            assert_eq!(e.state, SqlState::InvalidParameterValue, "{bad}");
        }
        let e = Decimal::parse("0.0000000000000000001").expect_err("19 decimals");
        assert_eq!(e.state, SqlState::NumericValueOutOfRange);
        let e = Decimal::parse(&"9".repeat(40)).expect_err("40 digits");
        assert_eq!(e.state, SqlState::NumericValueOutOfRange);
    }

    #[test]
    fn arithmetic_is_exact() {
        // The seed's example: 15 000 in, 2 150 out, 8 000 cache write at Sonnet 4.5 prices.
        let cost = d("3.00")
            .times(15_000)
            .and_then(|a| d("15.00").times(2_150).and_then(|b| a.checked_add(b)))
            .and_then(|ab| d("3.75").times(8_000).and_then(|c| ab.checked_add(c)))
            .and_then(|t| t.shifted_right(6))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(cost.to_string(), "0.10725");
        assert_eq!(cost, d("0.10725"));
        // A billion calls of a millionth of a cent add up exactly.
        let tiny = d("0.00000001");
        assert_eq!(tiny.times(1_000_000_000).map(|t| t.to_string()).ok(), Some("10".to_owned()));
        assert_eq!(d("0.1").checked_add(d("0.2")).map(|s| s.to_string()).ok(), Some("0.3".to_owned()));
    }

    #[test]
    fn compares_across_scales_and_signs() {
        assert!(d("5") > d("4.999999999999999999"));
        assert!(d("0.1") < d("0.10000000000000001"));
        assert_eq!(d("1.50"), d("1.5"));
        assert!(d("-1") < d("0"));
        assert!(d("-2.5") < d("-2.4"));
        // Alignment that would overflow still orders correctly.
        let big = Decimal { mantissa: i128::MAX / 10, scale: 0 };
        let fine = d("0.000000000000000001");
        assert!(big > fine);
        assert!(fine < big);
        assert!(Decimal { mantissa: -(i128::MAX / 10), scale: 0 } < fine);
    }

    #[test]
    fn overflow_is_reported_not_wrapped() {
        let huge = Decimal { mantissa: i128::MAX / 2 + 1, scale: 0 };
        assert_eq!(huge.times(3).map_err(|e| e.state), Err(SqlState::NumericValueOutOfRange));
        assert_eq!(huge.checked_add(huge).map_err(|e| e.state), Err(SqlState::NumericValueOutOfRange));
        assert!(d("1").shifted_right(40).is_err());
    }
}
