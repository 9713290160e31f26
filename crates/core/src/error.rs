//! Errors of the pure core, carried to SQL with a SQLSTATE and a HINT by `pg::raise`.
//!
//! SQLSTATEs are standard ones (pgrx can only raise the codes Postgres defines); each is listed
//! with its meaning in the error table of docs/operations.md#errors. File-access errors follow Postgres' own
//! `errcode_for_file_access()` mapping.

use std::fmt;
use std::io;

/// The SQLSTATEs cortex_buffer raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlState {
    /// 22023: an argument or setting has an unusable value.
    InvalidParameterValue,
    /// 22021: text that is not valid UTF-8.
    CharacterNotInRepertoire,
    /// 42501: the caller lacks a privilege (or the OS refused access to a file).
    InsufficientPrivilege,
    /// 58P01: a file or directory does not exist.
    UndefinedFile,
    /// 58030: any other I/O failure.
    IoError,
    /// 22004: a required argument is NULL.
    NullValueNotAllowed,
    /// 22P02: a malformed identifier (e.g. a checkpoint_id that is not a UUID).
    InvalidTextRepresentation,
    /// 54000: a document larger than a configured limit.
    ProgramLimitExceeded,
    /// P0002: the job does not exist.
    NoDataFound,
    /// 55000: the job is not in a state that allows the operation.
    ObjectNotInPrerequisiteState,
    /// 55006: another writer won (stale fencing token or step regression). Never 40001.
    ObjectInUse,
    /// 42P01: the bound job table does not exist.
    UndefinedTable,
    /// 42P16: the bound job table does not meet the column contract.
    InvalidTableDefinition,
    /// 22003: a number too large (token counts, costs, limits).
    NumericValueOutOfRange,
    /// 42704: a model without a price.
    UndefinedObject,
    /// 53400: a configured rate limit is reached (a push source over `push_rate_limit`).
    ConfigurationLimitExceeded,
    /// 21000: a lookup that must find one thing found several (a session id whose file name is in
    /// more than one directory).
    CardinalityViolation,
    /// XX001: no stored checkpoint passes its CRC.
    DataCorrupted,
    /// XX000: a bug; should never be seen.
    Internal,
}

impl SqlState {
    pub fn code(self) -> &'static str {
        match self {
            SqlState::InvalidParameterValue => "22023",
            SqlState::CharacterNotInRepertoire => "22021",
            SqlState::InsufficientPrivilege => "42501",
            SqlState::UndefinedFile => "58P01",
            SqlState::IoError => "58030",
            SqlState::NullValueNotAllowed => "22004",
            SqlState::InvalidTextRepresentation => "22P02",
            SqlState::ProgramLimitExceeded => "54000",
            SqlState::NoDataFound => "P0002",
            SqlState::ObjectNotInPrerequisiteState => "55000",
            SqlState::ObjectInUse => "55006",
            SqlState::UndefinedTable => "42P01",
            SqlState::InvalidTableDefinition => "42P16",
            SqlState::NumericValueOutOfRange => "22003",
            SqlState::UndefinedObject => "42704",
            SqlState::ConfigurationLimitExceeded => "53400",
            SqlState::CardinalityViolation => "21000",
            SqlState::DataCorrupted => "XX001",
            SqlState::Internal => "XX000",
        }
    }
}

/// An error with everything needed to report it well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbError {
    pub state: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl CbError {
    pub fn new(state: SqlState, message: impl Into<String>) -> CbError {
        CbError { state, message: message.into(), detail: None, hint: None }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> CbError {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> CbError {
        self.detail = Some(detail.into());
        self
    }

    pub fn internal(message: impl Into<String>) -> CbError {
        CbError::new(SqlState::Internal, message)
            .with_hint("This is a bug in cortex_buffer; please report it with the statement that raised it.")
    }

    pub fn not_utf8() -> CbError {
        CbError::new(SqlState::CharacterNotInRepertoire, "text is not valid UTF-8")
            .with_hint("cortex_buffer requires a database with UTF8 encoding.")
    }

    /// An I/O error on `path`, classified as Postgres classifies file-access errors, with a hint
    /// by kind (callers with a better one replace it).
    pub fn io(action: &str, path: &str, err: &io::Error) -> CbError {
        let (state, hint) = match err.kind() {
            io::ErrorKind::NotFound => (SqlState::UndefinedFile, "Check that the path exists."),
            io::ErrorKind::PermissionDenied => (
                SqlState::InsufficientPrivilege,
                "It must be readable by the operating-system user running PostgreSQL.",
            ),
            _ => (SqlState::IoError, "See the server log and the state of the file system."),
        };
        CbError::new(state, format!("could not {action} \"{path}\": {err}")).with_hint(hint)
    }

    /// The hint to report: the error's own, else one for its SQLSTATE, so no error reaches a
    /// user without one.
    pub fn hint_or_default(&self) -> &str {
        if let Some(h) = &self.hint {
            return h;
        }
        match self.state {
            SqlState::InvalidParameterValue => "Check the arguments against the function's entry in docs/api.md.",
            SqlState::CharacterNotInRepertoire => "cortex_buffer requires a database with UTF8 encoding.",
            SqlState::InsufficientPrivilege => "See docs/operations.md, Privileges, for the roles to grant.",
            SqlState::UndefinedFile | SqlState::IoError => "See the server log and the state of the file system.",
            SqlState::NullValueNotAllowed => "Pass a value for every required argument.",
            SqlState::InvalidTextRepresentation => "Check the value's format.",
            SqlState::ProgramLimitExceeded => "See docs/operations.md, Settings, for the limit.",
            SqlState::NoDataFound => "Check the id.",
            SqlState::ObjectNotInPrerequisiteState | SqlState::ObjectInUse => {
                "Re-read the current state and retry if it still applies."
            }
            SqlState::UndefinedTable | SqlState::InvalidTableDefinition => {
                "See docs/control-plane.md, Bind to your job table."
            }
            SqlState::NumericValueOutOfRange => "Counts must be at most 2^53 - 1.",
            SqlState::UndefinedObject => "Check the name.",
            SqlState::ConfigurationLimitExceeded => {
                "Try again in a moment, or raise the limit (docs/operations.md, Settings)."
            }
            SqlState::CardinalityViolation => "Name the one you mean (by its path).",
            SqlState::DataCorrupted => "Fail the job: its stored state cannot be trusted.",
            SqlState::Internal => "This is a bug in cortex_buffer; please report it with the statement that raised it.",
        }
    }
}

impl fmt::Display for CbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

impl std::error::Error for CbError {}

/// Lets code generic over a JSON node's error type use `?` for nodes that cannot fail.
impl From<std::convert::Infallible> for CbError {
    fn from(never: std::convert::Infallible) -> CbError {
        match never {}
    }
}

/// A `jsonb` value whose bytes do not follow the format: never expected from Postgres.
impl From<crate::json::jsonb_format::Malformed> for CbError {
    fn from(e: crate::json::jsonb_format::Malformed) -> CbError {
        CbError::internal(format!("malformed jsonb value: {}", e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_like_errcode_for_file_access() {
        let nf = io::Error::from(io::ErrorKind::NotFound);
        let pd = io::Error::from(io::ErrorKind::PermissionDenied);
        let other = io::Error::other("disk on fire");
        assert_eq!(CbError::io("open directory", "/x", &nf).state.code(), "58P01");
        assert_eq!(CbError::io("open directory", "/x", &pd).state.code(), "42501");
        let e = CbError::io("read", "/x", &other);
        assert_eq!(e.state.code(), "58030");
        assert!(e.hint.is_some(), "file errors carry a hint");
        assert_eq!(e.message, "could not read \"/x\": disk on fire");
    }

    #[test]
    fn every_error_has_a_hint_to_report() {
        let bare = CbError::new(SqlState::NumericValueOutOfRange, "x");
        assert!(!bare.hint_or_default().is_empty());
        let own = CbError::new(SqlState::NumericValueOutOfRange, "x").with_hint("mine");
        assert_eq!(own.hint_or_default(), "mine");
    }

    #[test]
    fn display_includes_detail() {
        let e = CbError::new(SqlState::InvalidParameterValue, "bad").with_detail("why");
        assert_eq!(e.to_string(), "bad (why)");
    }
}
