//! redt's protocol across data centers as pure state machines and pure functions (RedT §4–5;
//! docs/design.md): planning a transaction into sub-transactions, the executor side of a node,
//! votes and the ¾-quorum decision, abort recording and phase 2, recovery, catch-up, rebuild,
//! and the replicated baselines measured against RedT.
//!
//! Sans-IO: nothing here opens a socket, spawns a task or sleeps, and no async runtime is in
//! this crate's dependency tree. The decision ([`decision`]), the recovery rule ([`recovery`]),
//! the plan ([`plan`]) and catch-up ([`catch_up`]) are pure functions; a coordinator's
//! transaction (RedT's [`txn::CoordinatorTxn`], the baselines' [`baseline::BaselineTxn`]), a
//! baseline primary's part of one ([`baseline::PrimaryTxn`]), a recoverer
//! ([`recoverer::Recoverer`]), a ring's gap watch ([`gap_watch::GapWatch`]), a node's view of
//! its suspected peers ([`suspect_view::SuspectView`]) and its executor side
//! ([`executor_core::ExecutorCore`]) are state machines that take [`message`]s and time and
//! return actions; the first four share one shape, [`TxnMachine`]. The node runtime
//! (`redt-coordinator`) drives them over QUIC; the simulator (`redt-sim`) drives them over a
//! seeded network. The in-DC data path is `redt-dc-executor`'s.
//!
//! The `mutants` feature gives the `*Mutations` structs ([`ExecutorMutations`],
//! [`CoordinatorMutations`], [`RecoveryMutations`], [`failover::FailoverMutations`]) their
//! switches: deliberate bugs that tests turn on to show a broken rule is caught. Without it they
//! have no fields and no code path reads a switch.

#![forbid(unsafe_code)]

// First: its macros are used by the modules below.
#[macro_use]
mod mutants;

pub mod baseline;
pub mod batch;
pub mod call;
pub mod catch_up;
pub mod chain;
mod codec;
pub mod cost;
pub mod decision;
pub mod delivery;
pub mod detector_timeouts;
pub mod epochs;
mod error;
pub mod executor_core;
pub mod executor_queue;
pub mod failover;
pub mod gap_watch;
mod kv_op;
pub mod limits;
pub mod machine;
pub mod message;
pub mod outcome;
pub mod plan;
pub mod rebuild;
pub mod recoverer;
pub mod recovery;
mod recovery_options;
pub mod retry_policy;
pub mod stats;
pub mod suspect_view;
pub mod takeover;
#[cfg(test)]
mod test_log;
pub mod txn;
pub mod txn_ids;
pub mod versioned_read;

pub use epochs::Epochs;
pub use error::{Error, Result};
pub use executor_core::{ExecutorCore, ExecutorMutations, ReclaimRound};
pub use machine::{Action, AttemptId, TxnAnswer, TxnMachine, TxnStatus};
pub use recoverer::{Orphan, Recoverer};
pub use recovery_options::{RecoveryMutations, RecoveryOptions};
pub use stats::{AbortCause, Class, ClassReport, TxnCost, TxnStats};
pub use txn::{CoordinatorMutations, CoordinatorOptions, CoordinatorTxn};
pub use txn_ids::TxnIds;
