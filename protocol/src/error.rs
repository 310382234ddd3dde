//! The protocol's error type: what a pure state machine or a pure function of the protocol
//! can refuse or fail with. The node runtime's error (`redt_coordinator::Error`) holds it as
//! its `Protocol` variant.

use redt_proto::{NodeId, Topology};

/// What the protocol refuses or fails with.
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
    /// The in-DC data path failed.
    #[error("data path: {0}")]
    DataPath(#[from] redt_dc_executor::Error),
    /// The topology is unusable here.
    #[error("topology: {0}")]
    Topology(String),
    /// Timeouts resolved from a topology file's `timeouts:` section and the topology-derived
    /// defaults break an ordering.
    #[error("{key}: {problem}")]
    BadTimeouts {
        /// The key at fault, as written in the file (`timeouts.recovery.retry_base`).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<redt_dc_executor::verbs::Error> for Error {
    fn from(e: redt_dc_executor::verbs::Error) -> Self {
        Error::DataPath(e.into())
    }
}

impl Error {
    /// The error's text naming nodes, DCs and tables as `topology` does (`dc2-n1`, not
    /// `node#1`), as the text of an error answer to a client or another node gives it. Its
    /// `Display` names them by id (no topology at hand).
    pub fn named(&self, topology: &Topology) -> String {
        match self {
            Error::DataPath(e) => format!("data path: {}", e.named(topology)),
            other => other.to_string(),
        }
    }

    /// The [`redt_proto::error_code`] a request that failed with this error is answered with:
    /// a malformed call or sub-transaction is the sender's fault (`MALFORMED`), a limit
    /// `OVER_LIMIT`, anything else the node's (`INTERNAL`).
    pub fn reply_code(&self) -> u32 {
        use redt_proto::error_code;
        match self {
            Error::OverLimit(_) => error_code::OVER_LIMIT,
            Error::BadCall(_)
            | Error::DataPath(
                redt_dc_executor::Error::InvalidSubTxn { .. }
                | redt_dc_executor::Error::InvalidSnapshot { .. }
                | redt_dc_executor::Error::Unencodable { .. },
            ) => error_code::MALFORMED,
            _ => error_code::INTERNAL,
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_answer_names_the_node_and_takes_the_senders_code() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let heap = Error::DataPath(redt_dc_executor::Error::HeapFull { node: NodeId(1), needed: 64 });
        assert_eq!(heap.named(&t), "data path: dc2-n1: record heap full (64 bytes needed)");
        assert_eq!(heap.to_string(), "data path: node#1: record heap full (64 bytes needed)");
        assert_eq!(heap.reply_code(), redt_proto::error_code::INTERNAL);
        assert_eq!(Error::BadCall("x".into()).reply_code(), redt_proto::error_code::MALFORMED);
    }
}
