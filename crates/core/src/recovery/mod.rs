//! Recovery, pure: what a restarted agent is told (Spike #31 §Question 6, extended). Phase 1 is
//! the checkpoint (`plan::Phase1`); phase 2 chooses the session files and the marker the plan
//! starts after (`choose`), pairs tool calls with their results in the events read
//! (`pairing`, with what each line means in `line`), settles each call (`verdict`), works out
//! the key each call was sent with (`cycles`, by the formula in `keys`), and writes the plan
//! (`plan`). Claude Code transcripts get the same plan keys, an agent state
//! (`agent_state`) and de-duplicated usage (`usage`).

pub mod agent_state;
pub mod choose;
pub mod cycles;
pub mod files;
pub mod keys;
pub mod line;
pub mod log_slice;
pub mod marks;
pub mod pairing;
pub mod plan;
#[cfg(test)]
mod property_tests;
pub mod session_id;
pub mod tail;
pub mod timeline;
pub mod usage;
pub mod verdict;
