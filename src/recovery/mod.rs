//! Recovery lookups, the shell: what a restarted agent, an operator or the control plane asks
//! of the index. The rules (the decision tree, pairing, agent state, usage, LOG-slice checks)
//! are in `cortex_buffer_core::recovery`; this layer reads the index through SPI in the
//! caller's rights (`index`), places the checkpoints' marks and pods' resumes in the files
//! (`anchors`), reads transcript tails from disk under the indexer's file rules
//! (`transcript`), and maps SQL to both (`sql`).

mod anchors;
mod index;
pub(crate) mod plan;
#[cfg(any(test, feature = "pg_test"))]
mod recovery_pg_tests;
mod sql;
mod transcript;
