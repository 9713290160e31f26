//! The bit layout of PostgreSQL's binary `jsonb` (`utils/jsonb.h`), shared by the reader
//! ([`super::jsonb_format`]) and the writer ([`super::jsonb_write`]) so the two cannot drift.

/// Container header: the child count.
pub const JB_CMASK: u32 = 0x0FFF_FFFF;
/// Container header: a raw scalar wrapped in a one-element array.
pub const JB_FSCALAR: u32 = 0x1000_0000;
pub const JB_FOBJECT: u32 = 0x2000_0000;
pub const JB_FARRAY: u32 = 0x4000_0000;
/// Every this many JEntries holds an end offset instead of a length.
pub const JB_OFFSET_STRIDE: usize = 32;

pub const JENTRY_OFFLENMASK: u32 = 0x0FFF_FFFF;
pub const JENTRY_TYPEMASK: u32 = 0x7000_0000;
pub const JENTRY_HAS_OFF: u32 = 0x8000_0000;
pub const JENTRY_ISSTRING: u32 = 0x0000_0000;
pub const JENTRY_ISNUMERIC: u32 = 0x1000_0000;
pub const JENTRY_ISBOOL_FALSE: u32 = 0x2000_0000;
pub const JENTRY_ISBOOL_TRUE: u32 = 0x3000_0000;
pub const JENTRY_ISNULL: u32 = 0x4000_0000;
pub const JENTRY_ISCONTAINER: u32 = 0x5000_0000;
