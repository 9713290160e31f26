//! JSON with JavaScript semantics: the pure core shared by checkpoints (canonical form and CRC)
//! and the session indexer (line validation as the control plane's `JSON.parse` sees it, and the
//! reduction of lines too long to hold: `reduce`).

pub mod canonical;
pub mod canonical_text;
pub mod jsonb_format;
pub mod jsonb_layout;
pub mod jsonb_text;
pub mod jsonb_write;
pub mod node;
pub mod number;
pub mod parse;
pub mod quote;
pub mod reduce;
pub mod utf8_stream;
pub mod value;
pub mod writer;

pub use canonical::{canonical_json, write_canonical};
pub use value::JsValue;
