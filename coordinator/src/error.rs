//! The node runtime's error type: the protocol's errors (`redt_protocol::Error`) and what only
//! a running node meets — the transport, the metrics endpoint, I/O.

use redt_proto::Topology;

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
        let heap = Error::from(redt_dc_executor::Error::HeapFull { node: redt_proto::NodeId(1), needed: 64 });
        assert_eq!(heap.named(&t), "data path: dc2-n1: record heap full (64 bytes needed)");
        assert_eq!(heap.to_string(), "data path: node#1: record heap full (64 bytes needed)");
    }
}
