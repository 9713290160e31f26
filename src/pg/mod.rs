//! Shared pieces of the Postgres shell: error reporting, jsonb access, settings and guarded
//! transactions. Capability modules call these; nothing here holds business logic.

pub mod args;
pub mod guc;
pub mod jsonb;
pub mod planner;
pub mod privilege;
pub mod raise;
pub mod raw_rows;
pub mod spi_util;
pub mod time;
pub mod xact;

pub use raise::{raise, OrRaise};
