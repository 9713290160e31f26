//! Arguments and results every capability's SQL functions convert the same way: a NULL where
//! a value is required, and exact decimals as `numeric`. (Counters become `int8` through
//! `cortex_buffer_core::int::count_i64`.)

use pgrx::AnyNumeric;

use crate::pg::raise::raise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::spend::decimal::Decimal;

/// `value`, or ERROR 22004 naming the argument. Functions that are not `strict` use this so
/// that a NULL is refused with a message instead of returning NULL silently.
pub fn required<T>(value: Option<T>, name: &str) -> T {
    value.unwrap_or_else(|| {
        raise(
            CbError::new(SqlState::NullValueNotAllowed, format!("{name} must not be NULL"))
                .with_hint(format!("Pass a non-NULL {name}.")),
        )
    })
}

/// An exact decimal as `numeric` (through its text form, which both sides read exactly).
pub fn numeric(d: Decimal) -> AnyNumeric {
    AnyNumeric::try_from(d.to_string().as_str())
        .unwrap_or_else(|e| raise(CbError::internal(format!("numeric conversion of {d}: {e}"))))
}
