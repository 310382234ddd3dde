//! Placement and epochs replicated by Raft across DCs, and failure detection (RedT recovery
//! and failover; docs/design.md, "Recovery" and "Failover").
//!
//! This crate owns three state machines, none of which reads a clock, sleeps or sends (the
//! only I/O is the Raft peer's fsynced writes to its own log directory):
//! - [`Detector`]: heartbeats between DCs (or between the nodes of one DC) and the suspicion
//!   of a silent peer, with [`false_suspicions`] and [`detection_time`] to measure it on a
//!   simulated link;
//! - [`Membership`]: the epoch, DC and node liveness, and each partition's voters and
//!   learners, changed only by [`Command`]s;
//! - [`RaftMembership`]: a raft-rs peer whose committed log entries are those commands, with
//!   its log, term, vote and commit index durable in a directory ([`DiskStorage`]) or, for
//!   tests and simulation, in memory.
//!
//! It leaves to others: sending heartbeats and Raft messages (the node's QUIC endpoint), the
//! timers that drive them, refusing stale epochs (executor and coordinator), and copying a
//! partition's snapshot to a learner (the data path).

#![forbid(unsafe_code)]

mod detector;
mod detector_sim;
mod error;
mod membership;
mod raft_log;
mod raft_membership;
mod refused;

pub use detector::{Action, Detector, DetectorConfig, Heard, Liveness};
pub use detector_sim::{detection_time, false_suspicions, FalseSuspicions, SimLink};
pub use error::{Error, Result};
pub use membership::{Change, Command, Learner, Membership, PartitionChange, Replicas, Shortfall, Status};
pub use raft::eraftpb::Message as RaftMessage;
pub use raft_log::{DiskStorage, Recovery};
pub use raft_membership::{
    decode_message, encode_message, node_of, raft_id, Applied, AppliedConfChange, RaftMembership, RaftTicks, Role,
    RoleChange,
};
pub use refused::Refused;
