//! The stable error codes of [`crate::wire::ErrorReply::code`]: what a failed request is
//! answered with, the same for every sender and every version of the wire (a code is never
//! reused for another meaning).

// 1 is retired and never reused: an envelope's epoch refuses no message (the epoch fence
// is a phase-1 abort vote of the executor).
/// The message is malformed or of an unexpected kind.
pub const MALFORMED: u32 = 2;
/// The node failed while handling it.
pub const INTERNAL: u32 = 3;
/// The request cannot be served yet (a snapshot copy before its voter finished the older
/// epochs): ask again later.
pub const NOT_READY: u32 = 4;
/// A submission names a transaction id this coordinator did not reserve, one already
/// used or whose reservation expired, or one another certificate identity reserved
/// (`redt_coordinator::NotReserved`): nothing was run.
pub const NOT_RESERVED: u32 = 5;
/// The request is over a limit (`redt_coordinator::limits`: the topology's `limits:`, or more
/// participant DCs than it has; or an outcome query over its connection's
/// `redt_coordinator::outcome_queries::MAX_IN_FLIGHT`): refused before anything was reserved,
/// looked up or written; the message names the limit and its value.
pub const OVER_LIMIT: u32 = 6;
/// The request was not served within the transport's `handler_timeout` and its work was
/// cancelled (it may have partly run, as with any call that fails): the message names the
/// limit (`redt_transport::handler_timeout_reply`).
pub const TIMEOUT: u32 = 7;
/// The caller's certificate lacks the role the request needs (admin requests, and a
/// status that counts locks, need an operator certificate; the messages nodes send each
/// other, a node certificate; the message names the role needed and the caller's), its
/// identity is not the one the request's transaction id was reserved by (an outcome
/// query at the coordinator that reserved it; the message says so), or a Raft message
/// names another sender than the node whose certificate sent it.
pub const FORBIDDEN: u32 = 8;
