//! The protocols redt is measured against, in the same framework (RedT §4.3
//! Table 1 and §6): the same transport, messages, netem, workloads, data path and
//! counters, so a comparison differs only in the commit protocol.
//!
//! - `2pc-paxos`: execution at the primaries (No-Wait 2PL on their records), prepare (each
//!   primary replicates its redo to its secondaries, majority), the coordinator replicates
//!   its decision to its backups in other DCs (majority), commit to the primaries, each of
//!   which replicates the commit.
//! - `ep-paxos`: Early Prepare — each primary replicates its redo before voting, so the
//!   prepare round is folded into execution.
//! - `tapir`: the coordinator talks to every replica directly: execute (lock and read at
//!   every replica), prepare (recorded at a fast quorum: every replica), commit.
//! - `redt-tcp` is RedT's own coordinator ([`crate::txn::CoordinatorTxn`]) over the TCP verbs
//!   backend; nothing here.
//!
//! Leaders are stable (no election); secondaries apply committed redo through their replay
//! task under the Thomas write rule. Everything here is sans-IO and shares the
//! [`crate::machine::TxnMachine`] shape with RedT's coordinator, so the node drives all of
//! them with one loop: [`roles`] is pure (who does what), [`BaselineTxn`] is a transaction as
//! its coordinator runs it, [`PrimaryTxn`] (after the local step [`primary::begin`]) is a
//! primary serving a request that needs its secondaries.

pub mod primary;
pub mod roles;
mod txn;

pub use primary::{is_primary_request, Local, PrimaryTxn};
pub use txn::{Baseline, BaselineTxn, COORDINATOR_BACKUPS};
