//! cortex_buffer's contact with the kernel, with no PostgreSQL symbols: the walk of the
//! sessions volume by the discovery rule (`scan`), the discovery pass over a catalogue
//! (`pass`), and the reader-thread pipeline that judges a file's lines off the backend's
//! thread (`pipeline`). `unsafe` is allowed here, and only here: each use says why it is sound.

pub mod pass;
pub mod pipeline;
pub mod remove;
pub mod scan;
pub mod volume;
pub mod watcher;
