//! redt's shared vocabulary: ids and timestamps, a transaction's decision and outcome, the
//! topology/config schema and its validation, a placement (the topology at one epoch), and
//! the wire messages between nodes.
//!
//! This crate owns no behaviour beyond parsing and checking; the data path lives in
//! `redt-dc-executor`, the protocol in `redt-coordinator`.

#![forbid(unsafe_code)]

mod address;
mod config;
mod decision;
mod error;
pub mod error_code;
mod identity;
mod ids;
mod outcome;
mod placement;
mod protocol;
mod quorum;
mod topology;
pub mod wire;

pub use address::{Host, HostPort, ResolveError};
pub use config::{
    parse_duration, parse_loss, parse_rate, parse_size, MAX_NAME_CHARS, MAX_TOPOLOGY_BYTES, MAX_TOPOLOGY_DEPTH,
};
pub use decision::Decision;
pub use error::{ConfigError, LinkError, Result};
pub use identity::CertIdentity;
pub use ids::{Ballot, Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, TxnId};
pub use outcome::Outcome;
pub use placement::Placement;
pub use protocol::{Protocol, UnknownProtocol};
pub use quorum::{majority, quorum};
pub use topology::{
    default_lock_wait, default_phase1_timeout, CellSchema, Dc, DetectorTimeoutsConfig, Durability, GrpcConfig, Learner,
    LimitsConfig, LinkConditions, Locking, MemStoreConfig, MetricsConfig, NodeEntry, Partition, Partitioning,
    QuicConfig, RecoveryTimeoutsConfig, TableSchema, TimeoutsConfig, Topology, VerbsBackend, VerbsConfig,
};
