//! The crate's error type.

use redt_proto::{Epoch, NodeId};

/// What can go wrong across DCs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A procedure call was malformed (unknown table, bad operation kind, missing call).
    #[error("bad procedure call: {0}")]
    BadCall(String),
    /// A message carried an older (or newer) topology epoch than ours.
    #[error("stale epoch: message has {got}, this node is at {current}")]
    StaleEpoch {
        /// Epoch in the message.
        got: Epoch,
        /// Our epoch.
        current: Epoch,
    },
    /// A node answered with an error message.
    #[error("{node} answered: {message}")]
    Remote {
        /// The node.
        node: NodeId,
        /// Its message.
        message: String,
    },
    /// A node answered with an unexpected message kind.
    #[error("{node} answered with an unexpected message")]
    Unexpected {
        /// The node.
        node: NodeId,
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
    /// I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
