//! Jobs, pure: the column contract a bound job table must meet, and the per-job capability
//! tokens that let a pod act on its own job only.

pub mod contract;
pub mod token;
