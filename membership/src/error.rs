//! The crate's error type.

use std::path::PathBuf;

use crate::refused::Refused;

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
    /// Reading or writing a file of a Raft storage directory ([`crate::DiskStorage`]) failed;
    /// `path` is the file or directory. A peer whose write failed must be dropped and reopened
    /// from its directory.
    #[error("raft storage {}: {source}", path.display())]
    StorageIo {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file of a Raft storage directory cannot be read back: a wrong magic or version, a
    /// CRC mismatch in the meta or hard-state file, a record that passes its CRC but does not
    /// decode. A torn tail of the entries file is not this error (it is cut off on open).
    #[error("raft storage file {} is corrupt: {reason}", path.display())]
    CorruptStorage {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The files of a Raft storage directory read back but contradict each other or Raft's
    /// rules (a commit index beyond the log, entries that are not consecutive, terms that go
    /// down, a non-empty directory without a meta file), or a write would make them so (an
    /// append that leaves a gap or replaces committed entries).
    #[error("raft storage {} is inconsistent: {reason}", dir.display())]
    InconsistentStorage {
        /// The storage directory.
        dir: PathBuf,
        /// The contradiction.
        reason: String,
    },
    /// A Raft storage directory belongs to another peer or another group: its meta file names
    /// a different Raft id or a different initial voter/learner set than the caller's.
    #[error("raft storage {} belongs to {found}, not to {expected}", dir.display())]
    ForeignStorage {
        /// The storage directory.
        dir: PathBuf,
        /// The Raft id and voter/learner sets recorded in the directory.
        found: String,
        /// The Raft id and voter/learner sets the caller opened it with.
        expected: String,
    },
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
    /// A Raft message from the wire does not decode.
    #[error("undecodable raft message: {0}")]
    MessageCodec(String),
}

/// Result of this crate's fallible calls.
pub type Result<T> = std::result::Result<T, Error>;
