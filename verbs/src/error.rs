//! What a verb, a region or a disk image can fail with. `redt_dc_executor::Error` holds it as
//! its `Verbs` variant.

use redt_proto::{NodeId, Offset, Topology};

/// Everything that can go wrong in a verb, a MemStore region or its disk image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A verb addressed bytes outside the target node's region.
    #[error("{}", self.plain())]
    OutOfBounds {
        /// Target node.
        node: NodeId,
        /// First byte addressed.
        offset: Offset,
        /// Bytes addressed.
        len: u64,
        /// Size of the target region in bytes.
        size: u64,
    },
    /// An atomic verb addressed an offset that is not 8-byte aligned.
    #[error("{}", self.plain())]
    Unaligned {
        /// Target node.
        node: NodeId,
        /// The offending offset.
        offset: Offset,
    },
    /// A verb named a node this backend does not reach.
    #[error("{}", self.plain())]
    UnknownNode(NodeId),
    /// The RDMA or shared-memory backend failed (device, registration, mapping, completion).
    #[error("verbs backend: {0}")]
    Backend(String),
    /// The TLS material of an in-DC verbs transport is unusable: a certificate,
    /// key or CA certificate rustls refuses, or an own certificate that does not carry this
    /// node's identity (`redt://node/<dc>/<node>`, written by `redt certs init`).
    #[error("verbs TLS: {0}")]
    TlsConfig(String),
    /// I/O on a shared-memory file failed. The I/O error is part of the message and not also
    /// a `source`, so a report that prints the chain does not print it twice.
    #[error("{path}: {error}")]
    Io {
        /// The file involved.
        path: String,
        /// The underlying error.
        error: std::io::Error,
    },
}

impl Error {
    /// The error's text naming nodes as `topology` does (`dc2-n1`), not by their internal
    /// ids (`node#1`). Its `Display` names them by id (no topology at hand).
    pub fn named(&self, topology: &Topology) -> String {
        self.text(&|n| topology.node_name(n))
    }

    /// The text naming nodes by their ids (the `Display` of the variants that name one).
    fn plain(&self) -> String {
        self.text(&|n| n.to_string())
    }

    /// The text, with `node` naming nodes.
    fn text(&self, node: &dyn Fn(NodeId) -> String) -> String {
        match self {
            Error::OutOfBounds { node: n, offset, len, size } => {
                format!("{}: access [{offset}, +{len}) outside the {size}-byte MemStore", node(*n))
            }
            Error::Unaligned { node: n, offset } => format!("{}: atomic verb at unaligned offset {offset}", node(*n)),
            Error::UnknownNode(n) => format!("{} is not reachable through this verbs backend", node(*n)),
            other => other.to_string(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_node_as_the_topology_does() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let e = Error::OutOfBounds { node: NodeId(1), offset: Offset(64), len: 8, size: 32 };
        assert_eq!(e.named(&t), "dc2-n1: access [+64, +8) outside the 32-byte MemStore");
        assert_eq!(e.to_string(), "node#1: access [+64, +8) outside the 32-byte MemStore");
        assert_eq!(Error::UnknownNode(NodeId(40)).named(&t), "node#40 is not reachable through this verbs backend");
        assert_eq!(Error::Backend("x".into()).named(&t), "verbs backend: x");
    }
}
