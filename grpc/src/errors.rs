//! How the API reports a failure: a gRPC status code with one `google.rpc.ErrorInfo` detail
//! (domain [`ERROR_DOMAIN`]) whose reason a program matches on and whose metadata carries
//! the particulars (the table in `api/proto/redt/v1/redt.proto`, service `Transactions`).

use redt_api::v1::ERROR_DOMAIN;
use redt_proto::error_code;
use redt_proto::wire::{ErrorReply, OutcomeReply};
use std::collections::HashMap;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The reasons of the API's `ErrorInfo` details.
pub mod reason {
    /// The transaction certainly did not commit (`ABORTED`).
    pub const ABORTED: &str = "ABORTED";
    /// The transaction may or may not have committed (`UNKNOWN`).
    pub const OUTCOME_UNKNOWN: &str = "OUTCOME_UNKNOWN";
    /// Over a limit (`RESOURCE_EXHAUSTED`).
    pub const OVER_LIMIT: &str = "OVER_LIMIT";
    /// The certificate lacks a role, or the reservation is another identity's
    /// (`PERMISSION_DENIED`).
    pub const FORBIDDEN: &str = "FORBIDDEN";
    /// A malformed request (`INVALID_ARGUMENT`).
    pub const MALFORMED: &str = "MALFORMED";
    /// A transaction id not reserved here, used, or expired (`FAILED_PRECONDITION`).
    pub const NOT_RESERVED: &str = "NOT_RESERVED";
    /// Not ready to serve it yet (`UNAVAILABLE`).
    pub const NOT_READY: &str = "NOT_READY";
    /// The node is shutting down or failed while serving it (`UNAVAILABLE`, `INTERNAL`).
    pub const INTERNAL: &str = "INTERNAL";
    /// Not served in time (`DEADLINE_EXCEEDED`).
    pub const TIMEOUT: &str = "TIMEOUT";
}

/// The abort cause of a transaction the procedure aborted by its own logic: a retry would
/// abort again (`redt_protocol::stats::AbortCause::User`).
const USER_ABORT: &str = "user";

/// A status with code `code`, text `message` and an `ErrorInfo` of `reason` and `metadata`.
pub fn status(code: Code, message: impl Into<String>, reason: &str, metadata: &[(&str, String)]) -> Status {
    let metadata: HashMap<String, String> = metadata.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
    Status::with_error_details(code, message, ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata))
}

/// A malformed request: `INVALID_ARGUMENT`, reason `MALFORMED`.
pub fn malformed(message: impl Into<String>) -> Status {
    status(Code::InvalidArgument, message, reason::MALFORMED, &[])
}

/// A node's error answer ([`ErrorReply`]) as a status: its stable code mapped to the gRPC
/// code the API documents.
pub fn from_error_reply(e: &ErrorReply) -> Status {
    let (code, reason) = match e.code {
        error_code::MALFORMED => (Code::InvalidArgument, reason::MALFORMED),
        error_code::NOT_READY => (Code::Unavailable, reason::NOT_READY),
        error_code::NOT_RESERVED => (Code::FailedPrecondition, reason::NOT_RESERVED),
        error_code::OVER_LIMIT => (Code::ResourceExhausted, reason::OVER_LIMIT),
        error_code::TIMEOUT => (Code::DeadlineExceeded, reason::TIMEOUT),
        error_code::FORBIDDEN => (Code::PermissionDenied, reason::FORBIDDEN),
        _ => (Code::Internal, reason::INTERNAL),
    };
    status(code, e.message.clone(), reason, &[("code", e.code.to_string())])
}

/// A transaction's outcome that is not a commit (outcome 1 or 2 of [`OutcomeReply`]) as a
/// status: `ABORTED` with its cause and whether a retry may commit, or `UNKNOWN` with its
/// transaction id. `None` for a commit.
pub fn from_outcome(o: &OutcomeReply) -> Option<Status> {
    let txn = ("txn", o.txn.to_string());
    match o.outcome {
        0 => None,
        1 => {
            let cause = o.abort_cause.clone().unwrap_or_else(|| "unknown".into());
            let retryable = cause != USER_ABORT;
            let message = format!("transaction {} aborted ({cause}): {}", o.txn, o.error);
            Some(status(
                Code::Aborted,
                message,
                reason::ABORTED,
                &[txn, ("cause", cause), ("retryable", retryable.to_string())],
            ))
        }
        _ => Some(status(
            Code::Unknown,
            format!(
                "the outcome of transaction {} is unknown: {} (ask its outcome before running it again)",
                o.txn, o.error
            ),
            reason::OUTCOME_UNKNOWN,
            &[txn],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(s: &Status) -> (String, HashMap<String, String>) {
        let d = s.get_error_details();
        let i = d.error_info().expect("an ErrorInfo detail");
        assert_eq!(i.domain, ERROR_DOMAIN);
        (i.reason.clone(), i.metadata.clone())
    }

    #[test]
    fn every_error_code_maps_to_its_documented_status() {
        let cases = [
            (error_code::MALFORMED, Code::InvalidArgument, reason::MALFORMED),
            (error_code::INTERNAL, Code::Internal, reason::INTERNAL),
            (error_code::NOT_READY, Code::Unavailable, reason::NOT_READY),
            (error_code::NOT_RESERVED, Code::FailedPrecondition, reason::NOT_RESERVED),
            (error_code::OVER_LIMIT, Code::ResourceExhausted, reason::OVER_LIMIT),
            (error_code::TIMEOUT, Code::DeadlineExceeded, reason::TIMEOUT),
            (error_code::FORBIDDEN, Code::PermissionDenied, reason::FORBIDDEN),
        ];
        for (wire, code, why) in cases {
            let s = from_error_reply(&ErrorReply { code: wire, message: "m".into(), current_epoch: 1 });
            assert_eq!(s.code(), code, "wire code {wire}");
            assert_eq!(s.message(), "m");
            let (r, meta) = info(&s);
            assert_eq!(r, why);
            assert_eq!(meta.get("code"), Some(&wire.to_string()));
        }
    }

    #[test]
    fn aborts_say_their_cause_and_whether_to_retry_and_unknowns_their_id() {
        let mut o = OutcomeReply { outcome: 0, txn: 42, ..Default::default() };
        assert!(from_outcome(&o).is_none());
        o.outcome = 1;
        o.abort_cause = Some("lock_exclusive".into());
        let s = from_outcome(&o).expect("an abort");
        assert_eq!(s.code(), Code::Aborted);
        let (r, meta) = info(&s);
        assert_eq!(r, reason::ABORTED);
        assert_eq!(meta["cause"], "lock_exclusive");
        assert_eq!(meta["retryable"], "true");
        assert_eq!(meta["txn"], "42");
        o.abort_cause = Some(USER_ABORT.into());
        assert_eq!(info(&from_outcome(&o).expect("an abort")).1["retryable"], "false");
        o.outcome = 2;
        let s = from_outcome(&o).expect("unknown");
        assert_eq!(s.code(), Code::Unknown);
        let (r, meta) = info(&s);
        assert_eq!(r, reason::OUTCOME_UNKNOWN);
        assert_eq!(meta["txn"], "42");
    }
}
