//! Session buffers, pure: the discovery rule, dialects, reading lines in bounded memory,
//! `scanBuffer`'s verdicts, normalised columns, integrity, what changed and whether to append or
//! re-index, indexing a file into a sink, and the event table's columns.

pub mod dialect;
pub mod discovery;
pub mod event_columns;
pub mod index_file;
pub mod index_plan;
pub mod integrity;
pub mod judge;
pub mod lines;
pub mod normalize;
pub mod partition_route;
pub mod reconcile;
pub mod timestamp;
