//! The crate's error type.

use redt_proto::NodeId;

/// What can go wrong across DCs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A procedure call was malformed (unknown table, bad operation kind, missing call).
    #[error("bad procedure call: {0}")]
    BadCall(String),
    /// A request is over one of the limits of the topology file's `limits:` section (or of
    /// the topology itself): refused before anything was reserved or written.
    #[error(transparent)]
    OverLimit(#[from] crate::limits::OverLimit),
    /// A node answered with an error message.
    #[error("{name} answered: {message}")]
    Remote {
        /// The node.
        node: NodeId,
        /// Its name in the topology (its id, `node#N`, where no topology is at hand).
        name: String,
        /// Its message.
        message: String,
    },
    /// A node answered with an unexpected message kind.
    #[error("{name} answered with an unexpected message")]
    Unexpected {
        /// The node.
        node: NodeId,
        /// Its name in the topology.
        name: String,
    },
    /// The transport failed.
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
    /// The in-DC data path failed.
    #[error("data path: {0}")]
    DataPath(#[from] redt_dc_executor::Error),
    /// The topology is unusable here.
    #[error("topology: {0}")]
    Topology(String),
    /// A node has no transaction id left that it did not issue before: its MemStore's
    /// incarnation counter is 0 (never started) or past [`crate::TxnIds::MAX_INCARNATION`]
    /// (it started, or used up an incarnation's ids, that many times).
    #[error(
        "{node}: incarnation {incarnation} is outside 1..={max}, so its transaction ids would repeat; \
         the node cannot coordinate (its MemStore was started or renewed too often)",
        max = crate::TxnIds::MAX_INCARNATION
    )]
    TxnIdsExhausted {
        /// The node.
        node: NodeId,
        /// The incarnation it was to use.
        incarnation: u64,
    },
    /// A node's incarnation counter returned an incarnation no newer than the one it uses:
    /// its ids would repeat (the MemStore's counter was changed behind its back).
    #[error("{node}: the incarnation counter went back from {current} to {got}; transaction ids would repeat")]
    IncarnationWentBack {
        /// The node.
        node: NodeId,
        /// The incarnation in use.
        current: u64,
        /// The one the MemStore gave.
        got: u64,
    },
    /// The timeouts a node resolved from its topology file's `timeouts:` section and the
    /// topology-derived defaults break an ordering (`crate::NodeTimeouts::resolve`).
    #[error("{key}: {problem}")]
    BadTimeouts {
        /// The key at fault, as written in the file (`timeouts.recovery.retry_base`).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The metrics endpoint cannot listen at its address (in use, not an address of this
    /// host).
    #[error("cannot serve metrics at {addr}: {error}")]
    MetricsBind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        error: std::io::Error,
    },
    /// I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
