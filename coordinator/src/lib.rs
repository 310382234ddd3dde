//! The redt node runtime: the thin async drivers that run `redt-protocol`'s state machines on
//! a node ([`Node`]: the executor thread, the driver loop of the coordinators' transactions,
//! the recovery, rebuild, membership and failure-detector tasks; [`Node::start`] starts them
//! all), served over `redt-transport`'s QUIC transport; the node builder both deployments
//! start their nodes with ([`NodeSpec`]); status and metrics; the embedded cluster
//! ([`EmbeddedCluster`]) and the client library ([`Client`]). The protocol's logic lives in
//! `redt-protocol`; the in-DC data path is `redt-dc-executor`'s; WAN conditions are
//! `redt-netem`'s. Clients retry aborts whose cause allows it under a bounded [`RetryPolicy`]
//! ([`retrying`], [`Client::submit_retrying`]).

#![forbid(unsafe_code)]

mod batch_run;
mod builder;
mod busy;
mod client;
mod cluster;
mod error;
mod executor_thread;
mod large_phase1s;
pub mod liveness;
pub mod membership_task;
mod membership_view;
pub mod metrics;
pub mod netem_admin;
mod node;
pub mod outcome_queries;
pub mod process;
mod rebuild_task;
mod rebuilds;
mod reclaim_task;
mod recovery_task;
mod reserved;
mod retry;
mod retry_slots;
mod start;
pub mod status;
mod status_sample;
mod takeover_gate;
mod timeouts;

pub use builder::{BoundNode, MetricsEndpoint, NodeSpec, StartedNode};
pub use client::{failover_order, Client, Reservation, SubmitReport, Versioned, OUTCOME_POLL_EVERY};
pub use cluster::EmbeddedCluster;
pub use error::{Error, Result};
pub use executor_thread::{ExecutorLoadSample, ExecutorThread};
pub use node::{answer_to_msg, Node, NodeParts};
pub use redt_proto::error_code;
pub use redt_protocol::TxnIds;
pub use redt_protocol::{
    AbortCause, Action, AttemptId, Class, ClassReport, CoordinatorMutations, CoordinatorOptions, CoordinatorTxn,
    Epochs, ExecutorCore, ExecutorMutations, Orphan, Recoverer, RecoveryMutations, RecoveryOptions, TxnAnswer, TxnCost,
    TxnMachine, TxnStats, TxnStatus,
};
pub use reserved::{NotReserved, ReservedIds};
pub use retry::{retrying, Attempt, Retried, RetryPolicy};
pub use status::{NodeStatus, StatusBoard, WaitingTxn};
pub use status_sample::SAMPLE_MAX_AGE;
pub use timeouts::NodeTimeouts;
