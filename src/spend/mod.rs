//! Spend, the shell: the per-backend price cache (`price_cache`), usage, budgets and
//! reservations through SPI (`store`), and the SQL functions (`sql`). The rules (exact
//! decimals, usage spellings, the cost of a call, budget admission) are in
//! `cortex_buffer_core::spend`.

pub(crate) mod price_cache;
#[cfg(any(test, feature = "pg_test"))]
mod spend_pg_tests;
mod sql;
pub mod store;
