//! Recovery lookups, the shell: what a restarted agent, an operator or the control plane asks
//! of the index. The rules (the decision tree, pairing, agent state, usage, LOG-slice checks)
//! are in the core crate (`cortex_buffer_core::recovery`, re-exported as `core`); this layer
//! reads the index through SPI in the caller's rights (`index`), reads transcript tails from
//! disk under the indexer's file rules (`transcript`), and maps SQL to both (`sql`).

pub use cortex_buffer_core::recovery as core;

mod index;
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;
mod plan;
mod sql;
mod transcript;
