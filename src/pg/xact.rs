//! Transactions for the background worker that survive SQL errors.
//!
//! pgrx's `BackgroundWorker::transaction` re-raises an ERROR, which ends the worker. Here the
//! error is caught, the transaction rolled back with `AbortCurrentTransaction` and the failure
//! returned as a value, so the worker logs it and carries on with the next file or poll.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::{PgSqlErrorCode, PgTryBuilder};

use cortex_buffer_core::error::CbError;

/// Why a guarded transaction did not commit.
#[derive(Debug)]
pub enum TxnFailure {
    /// The body returned an error of ours; the transaction was rolled back.
    Refused(CbError),
    /// Postgres (or a panic) raised an error; the transaction was rolled back.
    Raised { sqlstate: String, message: String, hint: Option<String>, detail: Option<String> },
}

impl std::fmt::Display for TxnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxnFailure::Refused(e) => write!(f, "{e} (SQLSTATE {})", e.state.code()),
            TxnFailure::Raised { sqlstate, message, .. } => write!(f, "{message} (SQLSTATE {sqlstate})"),
        }
    }
}

fn describe(err: CaughtError) -> TxnFailure {
    let report = match err {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) | CaughtError::RustPanic { ereport: r, .. } => r,
    };
    TxnFailure::Raised {
        sqlstate: sqlstate_text(report.sql_error_code() as i32),
        message: report.message().to_owned(),
        hint: report.hint().map(str::to_owned),
        detail: report.detail().map(str::to_owned),
    }
}

impl TxnFailure {
    /// The SQLSTATE of the failure.
    pub fn sqlstate(&self) -> String {
        match self {
            TxnFailure::Refused(e) => e.state.code().to_owned(),
            TxnFailure::Raised { sqlstate, .. } => sqlstate.clone(),
        }
    }

    pub fn hint(&self) -> Option<&str> {
        match self {
            TxnFailure::Refused(e) => e.hint.as_deref(),
            TxnFailure::Raised { hint, .. } => hint.as_deref(),
        }
    }

    pub fn detail(&self) -> Option<&str> {
        match self {
            TxnFailure::Refused(e) => e.detail.as_deref(),
            TxnFailure::Raised { detail, .. } => detail.as_deref(),
        }
    }
}

/// This backend's local id of the current transaction: what tells one transaction's
/// bookkeeping in backend memory from the next one's.
pub fn local_xid() -> u32 {
    // SAFETY: MyProc is this backend's PGPROC; lxid is a plain field.
    unsafe { pg_sys::MyProc.as_ref().map_or(0, |p| p.lxid) }
}

/// The five-character SQLSTATE packed into an error code (Postgres' `unpack_sql_state`).
pub fn sqlstate_text(mut code: i32) -> String {
    let mut text = String::with_capacity(5);
    for _ in 0..5 {
        // Each character is stored in six bits, offset from '0'.
        text.push(char::from(b'0' + (code & 0x3f) as u8));
        code >>= 6;
    }
    text
}

/// Runs `body` in its own transaction; commits on `Ok`, rolls back on `Err` or on any error
/// raised inside. Must only be called from a background worker outside a transaction.
pub fn guarded<R>(body: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
    // SAFETY: the worker is connected and no transaction is open (callers' contract).
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let outcome = PgTryBuilder::new(std::panic::AssertUnwindSafe(|| body().map_err(TxnFailure::Refused)))
        .catch_others(|e| Err(describe(e)))
        .execute();
    match outcome {
        Ok(value) => {
            let committed = PgTryBuilder::new(|| unsafe {
                pg_sys::PopActiveSnapshot();
                pg_sys::CommitTransactionCommand();
                Ok(())
            })
            .catch_others(|e| Err(describe(e)))
            .execute();
            match committed {
                Ok(()) => Ok(value),
                Err(failure) => {
                    // SAFETY: the failed commit left the transaction in an aborted state.
                    unsafe { pg_sys::AbortCurrentTransaction() };
                    Err(failure)
                }
            }
        }
        Err(failure) => {
            // SAFETY: rolls back the transaction started above, including its snapshot.
            unsafe { pg_sys::AbortCurrentTransaction() };
            Err(failure)
        }
    }
}

/// Errors that end the statement, not just the work at hand: a cancel (`pg_cancel_backend()`,
/// `statement_timeout`), or the server or an administrator shutting the session down.
fn is_interrupt(err: &CaughtError) -> bool {
    let report = match err {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) | CaughtError::RustPanic { ereport: r, .. } => r,
    };
    matches!(
        report.sql_error_code(),
        PgSqlErrorCode::ERRCODE_QUERY_CANCELED
            | PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN
            | PgSqlErrorCode::ERRCODE_CRASH_SHUTDOWN
            | PgSqlErrorCode::ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT
    )
}

enum Outcome<R> {
    Done(Result<R, TxnFailure>),
    Interrupted(CaughtError),
}

/// Runs `body` in a subtransaction of the current transaction: its effects are kept on `Ok` and
/// rolled back on `Err` or on any error raised inside, leaving the outer transaction usable.
/// An interrupt (a cancel, a statement timeout, a shutdown) is not the body's failure: the
/// subtransaction is rolled back and the interrupt raised again, so the whole statement stops.
pub fn subtransaction<R>(body: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
    // SAFETY: the standard PL pattern (BeginInternalSubTransaction / Release or Rollback),
    // restoring the caller's memory context and resource owner afterwards.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        let outcome =
            PgTryBuilder::new(std::panic::AssertUnwindSafe(|| Outcome::Done(body().map_err(TxnFailure::Refused))))
                .catch_others(
                    |e| if is_interrupt(&e) { Outcome::Interrupted(e) } else { Outcome::Done(Err(describe(e))) },
                )
                .execute();
        if matches!(outcome, Outcome::Done(Ok(_))) {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        match outcome {
            Outcome::Done(result) => result,
            Outcome::Interrupted(e) => e.rethrow(),
        }
    }
}

/// Runs `body` in a subtransaction that is always rolled back: whatever it wrote or locked is
/// undone and released, and only its Rust result comes out (a dry run that must leave nothing
/// behind, not even row locks).
pub fn rolled_back<R>(body: impl FnOnce() -> Result<R, CbError>) -> Result<R, TxnFailure> {
    // SAFETY: as in `subtransaction`, with the rollback unconditional.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        let outcome =
            PgTryBuilder::new(std::panic::AssertUnwindSafe(|| Outcome::Done(body().map_err(TxnFailure::Refused))))
                .catch_others(
                    |e| if is_interrupt(&e) { Outcome::Interrupted(e) } else { Outcome::Done(Err(describe(e))) },
                )
                .execute();
        pg_sys::RollbackAndReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        match outcome {
            Outcome::Done(result) => result,
            Outcome::Interrupted(e) => e.rethrow(),
        }
    }
}

/// Runs `f` on a snapshot taken now, with this transaction's own changes visible: the
/// statements of a lookup that first caught its files up see those rows, and any another
/// indexer committed meanwhile (in READ COMMITTED; under REPEATABLE READ the transaction's
/// snapshot is all there is). On an error the transaction's abort drops the snapshot.
pub fn with_fresh_snapshot<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: inside a transaction; the pushed snapshot is popped below (or by the abort).
    unsafe {
        pg_sys::CommandCounterIncrement();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let result = f();
    // SAFETY: pops the snapshot pushed above.
    unsafe { pg_sys::PopActiveSnapshot() };
    result
}

#[cfg(test)]
mod tests {
    use super::sqlstate_text;
    use pgrx::PgSqlErrorCode;

    #[test]
    fn sqlstates_unpack_to_their_five_characters() {
        assert_eq!(sqlstate_text(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE as i32), "42P01");
        assert_eq!(sqlstate_text(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED as i32), "XX001");
        assert_eq!(sqlstate_text(PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION as i32), "00000");
    }
}
