//! Reporting core errors to SQL with their SQLSTATE, DETAIL and HINT.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use cortex_buffer_core::error::{CbError, SqlState};

fn pg_code(state: SqlState) -> PgSqlErrorCode {
    match state {
        SqlState::InvalidParameterValue => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        SqlState::CharacterNotInRepertoire => PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
        SqlState::InsufficientPrivilege => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        SqlState::UndefinedFile => PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
        SqlState::IoError => PgSqlErrorCode::ERRCODE_IO_ERROR,
        SqlState::NullValueNotAllowed => PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        SqlState::InvalidTextRepresentation => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        SqlState::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        SqlState::NoDataFound => PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
        SqlState::ObjectNotInPrerequisiteState => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        SqlState::ObjectInUse => PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
        SqlState::UndefinedTable => PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
        SqlState::InvalidTableDefinition => PgSqlErrorCode::ERRCODE_INVALID_TABLE_DEFINITION,
        SqlState::NumericValueOutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        SqlState::UndefinedObject => PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        SqlState::ConfigurationLimitExceeded => PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
        SqlState::CardinalityViolation => PgSqlErrorCode::ERRCODE_CARDINALITY_VIOLATION,
        SqlState::DataCorrupted => PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        SqlState::Internal => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
    }
}

/// Builds the Postgres error report for `err`.
pub fn report_for(err: CbError) -> ErrorReport {
    let hint = err.hint_or_default().to_owned();
    let mut report = ErrorReport::new(pg_code(err.state), err.message, "cortex_buffer");
    if let Some(detail) = err.detail {
        report = report.set_detail(detail);
    }
    report.set_hint(hint)
}

/// Raises `err` as an ERROR. Unwinds (dropping Rust values) before Postgres sees the error.
pub fn raise(err: CbError) -> ! {
    report_for(err).report(PgLogLevel::ERROR);
    unreachable!("ERROR-level reports do not return")
}

/// Sends a NOTICE (with an optional HINT) to the client.
pub fn notice(message: impl Into<String>, hint: Option<&str>) {
    let mut report = ErrorReport::new(PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message.into(), "cortex_buffer");
    if let Some(h) = hint {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::NOTICE);
}

/// Unwraps a core result or raises its error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, CbError> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}
