//! What a call can end in: the API's error model (`api/proto/redt/v1/redt.proto`, service
//! `Transactions`) as a Rust type.

use redt_api::v1::ERROR_DOMAIN;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transaction certainly did not commit (`ABORTED`).
    #[error("transaction {txn} aborted ({cause}): {message}")]
    Aborted {
        /// Its id.
        txn: u64,
        /// Why, as the node's abort-cause label (`lock_exclusive`, `stale_read`, `timeout`, …).
        cause: String,
        /// Whether running it again may commit (`false` for an abort by the procedure's own
        /// logic).
        retryable: bool,
        /// The node's text.
        message: String,
    },
    /// The transaction may or may not have committed, and asking did not tell in time.
    #[error("the outcome of transaction {txn} is unknown: {message}")]
    OutcomeUnknown {
        /// Its id.
        txn: u64,
        /// Why.
        message: String,
    },
    /// The request was refused before anything ran: malformed, over a limit, a role or
    /// reservation the caller lacks.
    #[error("refused ({reason}): {message}")]
    Refused {
        /// The gRPC status code.
        code: Code,
        /// The `ErrorInfo` reason (`MALFORMED`, `OVER_LIMIT`, `FORBIDDEN`, `NOT_RESERVED`).
        reason: String,
        /// The node's text.
        message: String,
    },
    /// No node could be reached (or every one failed) within the attempts.
    #[error("no node answered: {0}")]
    Unavailable(String),
    /// The client's configuration: an endpoint, a certificate file, an endpoints file.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Whether running the transaction again may commit: a retryable abort.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Aborted { retryable: true, .. })
    }
}

/// The `ErrorInfo` reason of a request to ask again later (a key busy under a writer).
pub(crate) const NOT_READY: &str = "NOT_READY";

/// The `ErrorInfo` of a status: its reason and metadata (empty without one).
pub(crate) fn info(s: &Status) -> (String, std::collections::HashMap<String, String>) {
    match s.get_details_error_info() {
        Some(i) if i.domain == ERROR_DOMAIN => (i.reason, i.metadata),
        _ => (String::new(), Default::default()),
    }
}

/// What a failed call tells about the transaction it carried.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It certainly did not commit.
    Aborted(Error),
    /// Nothing ran (a refusal).
    Refused(Error),
    /// It may have run: its outcome must be asked.
    Unknown(Status),
}

/// Classifies a status answered to a `Run` of transaction `txn`.
pub(crate) fn classify(s: Status, txn: u64) -> Failure {
    let (reason, meta) = info(&s);
    match s.code() {
        Code::Aborted => Failure::Aborted(Error::Aborted {
            txn: meta.get("txn").and_then(|t| t.parse().ok()).unwrap_or(txn),
            cause: meta.get("cause").cloned().unwrap_or_default(),
            retryable: meta.get("retryable").is_some_and(|r| r == "true"),
            message: s.message().to_string(),
        }),
        Code::InvalidArgument
        | Code::ResourceExhausted
        | Code::PermissionDenied
        | Code::FailedPrecondition
        | Code::Unauthenticated => {
            Failure::Refused(Error::Refused { code: s.code(), reason, message: s.message().to_string() })
        }
        _ => Failure::Unknown(s),
    }
}
