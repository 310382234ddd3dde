//! redt across data centers (RedT §4; docs/design.md §1–2, §4): planning a transaction into
//! sub-transactions, the executor side of a node, votes and the ¾-quorum decision, abort
//! recording and phase 2, the QUIC transport, the embedded cluster and the client API.
//!
//! The protocol is sans-IO: the decision ([`decision`]), the recovery rule ([`recovery`]), the
//! plan ([`plan`]) and catch-up ([`catch_up`]) are pure functions; a coordinator's transaction
//! (RedT's [`txn::CoordinatorTxn`], the baselines' [`baseline::BaselineTxn`]), a baseline
//! primary's part of one ([`baseline::PrimaryTxn`]), a recoverer ([`recoverer::Recoverer`]),
//! a ring's gap watch ([`gap_watch::GapWatch`]), a node's view of its suspected peers
//! ([`liveness::SuspectView`], over `redt-replication`'s failure detector) and its executor side
//! ([`executor_core::ExecutorCore`]) are state machines that take [`message`]s and time and
//! return actions; the first four share one shape, [`TxnMachine`]. [`Node`] is the async
//! driver. The in-DC data path is `redt-dc-executor`'s; WAN conditions are `redt-netem`'s.

#![forbid(unsafe_code)]

pub mod baseline;
pub mod call;
pub mod catch_up;
mod client;
mod cluster;
mod codec;
pub mod cost;
pub mod decision;
mod delivery;
pub mod detector_timeouts;
pub mod epochs;
mod error;
pub mod executor_core;
pub mod executor_queue;
mod executor_thread;
pub mod gap_watch;
mod kv_op;
pub mod limits;
pub mod liveness;
pub mod machine;
pub mod membership_task;
pub mod message;
pub mod metrics;
pub mod netem_admin;
mod node;
pub mod outcome;
pub mod outcome_queries;
pub mod plan;
pub mod process;
pub mod rebuild;
mod rebuild_task;
pub mod recoverer;
pub mod recovery;
mod recovery_options;
mod recovery_task;
mod reserved;
mod stats;
pub mod status;
mod status_sample;
pub mod suspect_view;
#[cfg(test)]
mod test_log;
mod timeouts;
pub mod transport;
pub mod txn;
mod txn_ids;

pub use client::{failover_order, Client, Reservation, SubmitReport, OUTCOME_POLL_EVERY};
pub use cluster::EmbeddedCluster;
pub use epochs::Epochs;
pub use error::{Error, Result};
pub use executor_core::{ExecutorCore, ExecutorMutations};
pub use executor_thread::{ExecutorLoadSample, ExecutorThread};
pub use machine::{Action, AttemptId, TxnMachine, TxnOutcome, TxnStatus};
pub use node::{outcome_to_msg, Node, NodeParts};
pub use recoverer::{Orphan, Recoverer, RecoveryOutcome};
pub use recovery_options::{RecoveryMutations, RecoveryOptions};
pub use redt_proto::error_code;
pub use reserved::{NotReserved, ReservedIds};
pub use stats::{AbortCause, Class, ClassReport, TxnCost, TxnStats};
pub use status::{NodeStatus, StatusBoard, WaitingTxn};
pub use status_sample::SAMPLE_MAX_AGE;
pub use timeouts::NodeTimeouts;
pub use txn::{CoordinatorMutations, CoordinatorOptions, CoordinatorTxn};
pub use txn_ids::TxnIds;
