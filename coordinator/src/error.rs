//! The node runtime's error type: the protocol's errors (`redt_protocol::Error`) and what only
//! a running node meets — the transport, transaction ids, the metrics endpoint, I/O.

use redt_proto::{NodeId, Topology};

/// What can go wrong across DCs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The protocol refused or failed: a malformed call, a limit, a node's error answer or an
    /// unexpected one, the data path, an unusable topology, timeouts out of order
    /// (`redt_protocol::Error`).
    #[error(transparent)]
    Protocol(#[from] redt_protocol::Error),
    /// The transport failed.
    #[error("transport: {0}")]
    Transport(#[from] redt_transport::TransportError),
    /// A node has no transaction id left that it did not issue before: its MemStore's
    /// incarnation counter is 0 (never started) or past [`crate::TxnIds::MAX_INCARNATION`]
    /// (it started, or used up an incarnation's ids, that many times).
    #[error("{}", self.plain())]
    TxnIdsExhausted {
        /// The node.
        node: NodeId,
        /// The incarnation it was to use.
        incarnation: u64,
    },
    /// A node's incarnation counter returned an incarnation no newer than the one it uses:
    /// its ids would repeat (the MemStore's counter was changed behind its back).
    #[error("{}", self.plain())]
    IncarnationWentBack {
        /// The node.
        node: NodeId,
        /// The incarnation in use.
        current: u64,
        /// The one the MemStore gave.
        got: u64,
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

impl Error {
    /// The protocol's [`redt_protocol::Error::Topology`]: the topology is unusable here
    /// (`why` says how).
    pub(crate) fn topology(why: impl Into<String>) -> Error {
        Error::Protocol(redt_protocol::Error::Topology(why.into()))
    }
}

impl Error {
    /// The error's text naming nodes, DCs and tables as `topology` does (`dc2-n1`, not
    /// `node#1`), as the text of an error answer to a client or another node gives it. Its
    /// `Display` names them by id (no topology at hand).
    pub fn named(&self, topology: &Topology) -> String {
        match self {
            Error::Protocol(e) => e.named(topology),
            Error::TxnIdsExhausted { .. } | Error::IncarnationWentBack { .. } => self.text(&|n| topology.node_name(n)),
            other => other.to_string(),
        }
    }

    /// The text naming nodes by their ids (the `Display` of the variants that name one).
    fn plain(&self) -> String {
        self.text(&|n| n.to_string())
    }

    /// The text of a variant that names a node, with `name` naming it.
    fn text(&self, name: &dyn Fn(NodeId) -> String) -> String {
        match self {
            Error::TxnIdsExhausted { node, incarnation } => format!(
                "{}: incarnation {incarnation} is outside 1..={}, so its transaction ids would repeat; the node \
                 cannot coordinate (its MemStore was started or renewed too often)",
                name(*node),
                crate::TxnIds::MAX_INCARNATION
            ),
            Error::IncarnationWentBack { node, current, got } => format!(
                "{}: the incarnation counter went back from {current} to {got}; transaction ids would repeat",
                name(*node)
            ),
            other => other.to_string(),
        }
    }
}

impl From<redt_dc_executor::Error> for Error {
    fn from(e: redt_dc_executor::Error) -> Self {
        Error::Protocol(redt_protocol::Error::DataPath(e))
    }
}

impl From<redt_dc_executor::verbs::Error> for Error {
    fn from(e: redt_dc_executor::verbs::Error) -> Self {
        Error::Protocol(redt_protocol::Error::DataPath(e.into()))
    }
}

impl From<redt_protocol::limits::OverLimit> for Error {
    fn from(over: redt_protocol::limits::OverLimit) -> Self {
        Error::Protocol(redt_protocol::Error::OverLimit(over))
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Names, not internal ids: the text of an error answer names the node as the
    /// topology file does, through a data-path error too; `Display` keeps the ids.
    #[test]
    fn an_error_answer_names_the_node() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let heap = Error::from(redt_dc_executor::Error::HeapFull { node: NodeId(1), needed: 64 });
        assert_eq!(heap.named(&t), "data path: dc2-n1: record heap full (64 bytes needed)");
        assert_eq!(heap.to_string(), "data path: node#1: record heap full (64 bytes needed)");
        let back = Error::IncarnationWentBack { node: NodeId(2), current: 5, got: 4 };
        assert_eq!(
            back.named(&t),
            "dc3-n1: the incarnation counter went back from 5 to 4; transaction ids would repeat"
        );
        let used_up = Error::TxnIdsExhausted { node: NodeId(0), incarnation: 0 };
        assert!(used_up.named(&t).starts_with("dc1-n1: incarnation 0 is outside 1..="), "{}", used_up.named(&t));
        assert!(used_up.to_string().starts_with("node#0: incarnation 0"), "{used_up}");
    }
}
