//! Spend, pure: exact decimals (`decimal`), every usage spelling (`usage`), the cost of a call
//! (`price`), budget rules and reservation admission (`budget`).

pub mod budget;
pub mod decimal;
pub mod price;
pub mod usage;
