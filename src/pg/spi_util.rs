//! Small SPI conveniences shared by the capabilities.

use pgrx::prelude::*;
use pgrx::spi::{SpiError, SpiTupleTable};

use crate::error::CbError;

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
