//! Jobs, pure: the column contract a bound job table must meet.

pub mod contract;
