//! Times as the core counts them (microseconds since the Unix epoch) and as PostgreSQL stores
//! them, converted in Rust: statements read and bind `timestamptz` and `interval` values
//! instead of doing epoch arithmetic in SQL.

use pgrx::datum::{Interval, TimestampWithTimeZone};

use cortex_buffer_core::indexer::timestamp::POSTGRES_EPOCH_OFFSET_US;

/// Microseconds since the Unix epoch as a `timestamptz`.
pub fn timestamptz(unix_us: Option<i64>) -> Option<TimestampWithTimeZone> {
    let pg = unix_us?.checked_sub(POSTGRES_EPOCH_OFFSET_US)?;
    TimestampWithTimeZone::try_from(pg).ok()
}

/// A finite `timestamptz` as microseconds since the Unix epoch.
pub fn unix_us(t: Option<TimestampWithTimeZone>) -> Option<i64> {
    let t = t?;
    if t.is_infinity() || t.is_neg_infinity() {
        return None;
    }
    t.into_inner().checked_add(POSTGRES_EPOCH_OFFSET_US)
}

/// An interval's length in microseconds (a month counted as 30 days, as PostgreSQL's interval
/// arithmetic on timestamps does for whole months' worth of days).
pub fn interval_us(i: Option<Interval>) -> Option<i64> {
    i64::try_from(i?.as_micros()).ok()
}

/// Microseconds as an `interval`.
pub fn interval(us: i64) -> Interval {
    Interval::new(0, 0, us).unwrap_or_else(|_| Interval::from_micros(us))
}
