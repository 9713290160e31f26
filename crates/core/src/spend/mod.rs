//! Spend, pure: exact decimals (`decimal`), every usage spelling (`usage`), the cost of a call
//! (`cost`), budget rules and reservation admission (`budget`).

pub mod budget;
pub mod cost;
pub mod decimal;
pub mod usage;
