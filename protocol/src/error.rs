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
    /// A node's ids would repeat: the incarnation it was to use is 0 (its MemStore's
    /// incarnation counter never started) or past `max`, the largest incarnation an id holds
    /// (it started, or used up an incarnation's ids, that many times).
    #[error("{}", self.text(&|n| n.to_string()))]
    TxnIdsExhausted {
        /// The node.
        node: NodeId,
        /// The incarnation it was to use.
        incarnation: u64,
        /// The largest incarnation a transaction id holds.
        max: u64,
    },
    /// A node's incarnation counter returned an incarnation no newer than the one it uses:
    /// its ids would repeat (the MemStore's counter was changed behind its back).
    #[error("{}", self.text(&|n| n.to_string()))]
    IncarnationWentBack {
        /// The node.
        node: NodeId,
        /// The incarnation in use.
        current: u64,
        /// The one the MemStore gave.
        got: u64,
    },
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
            Error::TxnIdsExhausted { .. } | Error::IncarnationWentBack { .. } => self.text(&|n| topology.node_name(n)),
            other => other.to_string(),
        }
    }

    /// The text of a variant that names a node, with `name` naming it.
    fn text(&self, name: &dyn Fn(NodeId) -> String) -> String {
        match self {
            Error::TxnIdsExhausted { node, incarnation, max } => format!(
                "{}: incarnation {incarnation} is outside 1..={max}, so its transaction ids would repeat; the node \
                 cannot coordinate (its MemStore was started or renewed too often)",
                name(*node),
            ),
            Error::IncarnationWentBack { node, current, got } => format!(
                "{}: the incarnation counter went back from {current} to {got}; transaction ids would repeat",
                name(*node)
            ),
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
        let back = Error::IncarnationWentBack { node: NodeId(2), current: 5, got: 4 };
        assert_eq!(
            back.named(&t),
            "dc3-n1: the incarnation counter went back from 5 to 4; transaction ids would repeat"
        );
        let used_up = Error::TxnIdsExhausted { node: NodeId(0), incarnation: 0, max: 7 };
        assert!(used_up.named(&t).starts_with("dc1-n1: incarnation 0 is outside 1..="), "{}", used_up.named(&t));
        assert!(used_up.to_string().starts_with("node#0: incarnation 0"), "{used_up}");
    }
}
