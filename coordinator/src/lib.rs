//! redt across data centers (RedT §4; DESIGN.md §1–2, §4): planning a transaction into
//! sub-transactions, the executor side of a node, votes and the ¾-quorum decision, abort
//! recording and phase 2, the QUIC transport, the embedded cluster and the client API.
//!
//! The decision ([`decision`]) and the plan ([`plan`]) are pure; [`Node`] is the async
//! driver. The in-DC data path is `redt-dc-executor`'s; WAN conditions are `redt-netem`'s.

pub mod baseline;
pub mod call;
pub mod catch_up;
mod client;
mod cluster;
mod codec;
pub mod decision;
mod error;
mod node;
pub mod plan;
mod service;
mod stats;
pub mod transport;

pub use client::Client;
pub use cluster::EmbeddedCluster;
pub use error::{Error, Result};
pub use node::{error_code, outcome_to_msg, CoordinatorOptions, Node, NodeParts, TxnOutcome, TxnStatus};
pub use service::{ExecuteArgs, ExecutorService};
pub use stats::{Class, ClassReport, TxnCost, TxnStats};
