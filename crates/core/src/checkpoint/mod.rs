//! Checkpoints, pure: the control plane's canonical JSON and CRC-32 (`crc`), and the identity,
//! fencing and step rules of a write (`identity`).

pub mod crc;
pub mod identity;
