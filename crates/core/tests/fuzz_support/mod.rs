//! Support for the fuzz harness (tests/fuzz.rs): generators, references, the corpus and the
//! time-boxed runner.

pub mod corpus;
pub mod gen;
pub mod reference;
pub mod runner;
