//! cortex_buffer's pure core: everything that decides, parses, judges or computes, with no
//! PostgreSQL symbols and no `unsafe` (the compiler enforces both: this crate does not depend on
//! pgrx, and `unsafe_code` is forbidden). The extension crate maps SQL to these functions and
//! does the SPI; `cortex_buffer_watch` does the file-system work.
//!
//! Modules keep the layout of the capabilities they serve: `json` (JavaScript-compatible JSON,
//! binary jsonb), `indexer` (session-file lines, dialects, integrity, what to index),
//! `checkpoint` (canonical JSON CRC, identity and fencing rules), `liveness` (retry and breaker
//! rules), `push` (pushed chunks against what the server holds), `recovery` (the decision tree, pairing, keys, agent state), `retention` (what a cleanup deletes and keeps),
//! `spend` (exact decimals, usage spellings, prices, budgets), `job` (the bound table's
//! column contract), `readiness` (when the worker may index), `error` (errors with SQLSTATE
//! and HINT), `shared` (UUIDs and the wall clock, used everywhere).

pub mod checkpoint;
pub mod error;
pub mod indexer;
pub mod int;
pub mod job;
pub mod json;
pub mod liveness;
pub mod push;
pub mod readiness;
pub mod recovery;
pub mod retention;
pub mod shared;
pub mod spend;
