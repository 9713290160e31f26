//! Checkpoints: the control plane's canonical JSON and CRC-32 (core in `crc`), exposed to SQL
//! by `sql`.

pub mod crc;
mod sql;
