//! The crate's error type.

use crate::membership::Refused;

/// What went wrong in a call into this crate.
///
/// A refused membership command is not an error of the caller's process: [`crate::Membership::apply`]
/// returns it as [`Refused`] (every replica of the Raft log refuses it the same way). It comes
/// in here through `#[from]` for callers that treat it as a failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A detector configuration that cannot work, e.g. a zero interval or a timeout not
    /// longer than the interval.
    #[error("invalid detector config: {0}")]
    DetectorConfig(&'static str),
    /// An initial placement that breaks a membership invariant (an unknown node, two
    /// replicas of a partition in one DC, a partition with no replica, ...).
    #[error("invalid initial membership: {0}")]
    InvalidMembership(String),
    /// A Raft group configuration that breaks the one-voter-per-DC rule or names nodes that
    /// are not members.
    #[error("invalid raft peers: {0}")]
    InvalidRaftPeers(String),
    /// A peer received a Raft snapshot; membership snapshots are not supported yet (the log is
    /// never compacted, so a correct leader never sends one).
    #[error("raft snapshot received, but membership snapshots are not supported yet")]
    SnapshotUnsupported,
    /// A membership command was refused (see [`Refused`]).
    #[error(transparent)]
    Refused(#[from] Refused),
    /// raft-rs returned an error (a proposal dropped because there is no leader, a message
    /// for another group, a storage error, ...).
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// A proposal is refused because this peer is not the Raft leader; `leader` is the
    /// leader this peer knows of (Raft id), if any.
    #[error("not the raft leader (leader: {leader:?})")]
    NotLeader {
        /// Raft id of the known leader, if one is known.
        leader: Option<u64>,
    },
    /// A command could not be encoded, or a committed log entry does not decode as a
    /// membership command.
    #[error("membership command codec: {0}")]
    Codec(#[from] serde_json::Error),
}

/// Result of this crate's fallible calls.
pub type Result<T> = std::result::Result<T, Error>;
