//! Symbols kept only for the install scripts of earlier versions (VectorChord keeps them in one
//! place the same way). A database still on an older version binds its functions to these
//! names until `ALTER EXTENSION cortex_buffer UPDATE`; each answers with what to do instead of
//! running against a schema this library no longer writes. Never remove one: an old install
//! script would then fail to load.

use pgrx::prelude::*;

use crate::error::{CbError, SqlState};
use crate::pg::raise::raise;

fn older_than_library() -> ! {
    raise(
        CbError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the installed cortex_buffer extension is older than its library ({})", env!("CARGO_PKG_VERSION")),
        )
        .with_hint("Run ALTER EXTENSION cortex_buffer UPDATE in this database."),
    )
}

/// `index_sessions(text)` as the install scripts before 0.5.0 bind it (six result columns,
/// discovery only; the symbol is `index_sessions_wrapper`).
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn index_sessions(
    _dir: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(path, String),
        name!(job_dir, Option<String>),
        name!(dialect, Option<String>),
        name!(size_bytes, Option<i64>),
        name!(action, String),
        name!(detail, Option<String>),
    ),
> {
    older_than_library()
}
