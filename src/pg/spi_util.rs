//! Small SPI conveniences shared by the capabilities.

use pgrx::prelude::*;
use pgrx::spi::{SpiError, SpiTupleTable};

use cortex_buffer_core::error::CbError;

/// An SPI failure: unexpected, so an internal error with the message.
pub fn spi(e: SpiError) -> CbError {
    CbError::internal(format!("SPI: {e}"))
}

/// The first column of the first row, or `None` when there is no row (or it is NULL).
/// (`first().get_one()` treats an empty result as an error.)
pub fn first_value<T: FromDatum + IntoDatum>(table: SpiTupleTable<'_>) -> Result<Option<T>, CbError> {
    if table.is_empty() {
        return Ok(None);
    }
    table.first().get_one().map_err(spi)
}

/// `rows.pipe_first()` is [`first_value`] in method position, for statement chains.
pub trait FirstValue {
    fn pipe_first<T: FromDatum + IntoDatum>(self) -> Result<Option<T>, CbError>;
}

impl FirstValue for SpiTupleTable<'_> {
    fn pipe_first<T: FromDatum + IntoDatum>(self) -> Result<Option<T>, CbError> {
        first_value(self)
    }
}

thread_local! {
    /// Statements prepared once per backend and kept (their plans follow table changes).
    static PREPARED: std::cell::RefCell<std::collections::HashMap<&'static str, std::rc::Rc<pgrx::spi::OwnedPreparedStatement>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The statement `key`, prepared (read-write) from `sql()` with `args` on first use in this
/// backend and kept.
pub fn prepared(
    client: &pgrx::spi::SpiClient<'_>,
    key: &'static str,
    sql: impl FnOnce() -> String,
    args: &[pgrx::PgOid],
) -> Result<std::rc::Rc<pgrx::spi::OwnedPreparedStatement>, CbError> {
    prepare_kept(client, key, sql, args, true)
}

/// [`prepared`] for a read-only statement: it runs on the caller's snapshot, as a `STABLE`
/// function's statements must.
pub fn prepared_read(
    client: &pgrx::spi::SpiClient<'_>,
    key: &'static str,
    sql: impl FnOnce() -> String,
    args: &[pgrx::PgOid],
) -> Result<std::rc::Rc<pgrx::spi::OwnedPreparedStatement>, CbError> {
    prepare_kept(client, key, sql, args, false)
}

fn prepare_kept(
    client: &pgrx::spi::SpiClient<'_>,
    key: &'static str,
    sql: impl FnOnce() -> String,
    args: &[pgrx::PgOid],
    mutating: bool,
) -> Result<std::rc::Rc<pgrx::spi::OwnedPreparedStatement>, CbError> {
    if let Some(s) = PREPARED.with(|m| m.borrow().get(key).cloned()) {
        return Ok(s);
    }
    let text = sql();
    let statement =
        if mutating { client.prepare_mut(text.as_str(), args) } else { client.prepare(text.as_str(), args) };
    let prepared = statement.map_err(|e| CbError::internal(format!("preparing {key}: {e}")))?.keep();
    let prepared = std::rc::Rc::new(prepared);
    PREPARED.with(|m| m.borrow_mut().insert(key, std::rc::Rc::clone(&prepared)));
    Ok(prepared)
}
