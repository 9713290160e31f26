//! Symbols kept only for the install scripts of earlier versions (VectorChord keeps them in one
//! place the same way). A database still on an older version binds its functions to these
//! names until `ALTER EXTENSION cortex_buffer UPDATE`; each answers with what to do instead of
//! running against a schema this library no longer writes. Never remove one: an old install
//! script would then fail to load.

use pgrx::prelude::*;

use crate::pg::raise::raise;
use cortex_buffer_core::error::{CbError, SqlState};

fn older_than_library() -> ! {
    raise(
        CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the installed cortex_buffer extension is older than its library ({})", env!("CARGO_PKG_VERSION")),
        )
        .with_hint("Run ALTER EXTENSION cortex_buffer UPDATE in this database."),
    )
}

/// `index_sessions(text)` as the install scripts before 0.5.0 bind it (the symbol is
/// `index_sessions_wrapper`). Those scripts declare six result columns; the signature here
/// does not matter to them (`sql = false`), since the function raises before reading an
/// argument or returning a row.
#[pg_extern(sql = false)]
fn index_sessions() -> bool {
    older_than_library()
}
