//! What the simulation's checks report: a [`Violation`] of a property (a lost or duplicated
//! write, an anomaly, an abort acknowledged before it was recorded, replicas that disagree),
//! and a [`Leftover`] lock or undecided redo entry at the end of a run.

use redt_dc_executor::EntryStatus;
use redt_proto::{DcId, NodeId, PartitionId, TxnId};

/// A lock or undecided redo entry left behind, with what a recoverer needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// The undecided transaction.
    pub txn: TxnId,
    /// The node whose ring holds the entry (and whose records it locks).
    pub node: NodeId,
    /// That node's DC.
    pub dc: DcId,
    /// The entry's status (`Intent` or `Logged`).
    pub status: EntryStatus,
    /// The transaction's coordinator.
    pub coordinator: NodeId,
    /// Its participant DCs (those a recoverer must hear from).
    pub participants: Vec<DcId>,
    /// The keys whose records the entry locks on `node`.
    pub locked_keys: Vec<u64>,
    /// The crash that left it: the crashed node and when (µs).
    pub crash: Option<(NodeId, u64)>,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dcs: Vec<String> = self.participants.iter().map(|d| d.to_string()).collect();
        write!(
            f,
            "{} undecided ({:?}) on {} in {}, coordinator {}, participants [{}], locks keys {:?}",
            self.txn,
            self.status,
            self.node,
            self.dc,
            self.coordinator,
            dcs.join(", "),
            self.locked_keys
        )?;
        if let Some((n, t)) = self.crash {
            write!(f, " (after the crash of {n} at {:.3} ms)", t as f64 / 1000.0)?;
        }
        Ok(())
    }
}

/// Something a check found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A DC or node removed while it was up and reachable from a majority of the voters (the
    /// failover policy's confirmation rule broken).
    UnjustifiedRemoval {
        /// The membership command, as debug-printed.
        command: String,
        /// When it committed, µs.
        at_us: u64,
    },
    /// An abort was acknowledged before a majority of a touched partition held it.
    AbortAckedUnrecorded {
        /// The transaction.
        txn: TxnId,
        /// The partition short of its majority.
        partition: PartitionId,
        /// Replicas holding the abort then.
        have: usize,
        /// The majority.
        need: usize,
    },
    /// An undecided entry (and its locks) left behind after the drain (every node back, every
    /// partition healed, recovery running).
    Stuck(Leftover),
    /// A record locked with no undecided entry of this node listing it.
    OrphanLock {
        /// The node.
        node: NodeId,
        /// The key.
        key: u64,
        /// The lock word found.
        word: u64,
    },
    /// An absent-key lock word held with no undecided entry of this node listing it (a read
    /// of a key with no record whose lock outlived its transaction).
    OrphanAbsentLock {
        /// The node.
        node: NodeId,
        /// Offset of the word in its MemStore.
        offset: u64,
        /// The lock word found.
        word: u64,
    },
    /// Replicas of a key disagree after the run drained.
    Diverged {
        /// The key.
        key: u64,
        /// Each replica's node and value (hex prefix).
        values: Vec<(NodeId, String)>,
    },
    /// The bank's total changed.
    BankTotal {
        /// The total found.
        found: i64,
        /// The total expected.
        expected: i64,
    },
    /// A committed read of every balance saw another total.
    BankRead {
        /// The transaction.
        txn: TxnId,
        /// The total it read.
        found: i64,
    },
    /// The list-append history is not strictly serializable (Elle's anomaly).
    Anomaly(String),
    /// A replica's record holds a row but its table's ordered index lacks the key (a write
    /// that brought a deleted key back did not put it back into the tree).
    Unindexed {
        /// The replica's node.
        node: NodeId,
        /// The key.
        key: u64,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::AbortAckedUnrecorded { txn, partition, have, need } => write!(
                f,
                "{txn}: abort acknowledged while only {have} of the {need} replicas a majority of p{} needs held it",
                partition.0
            ),
            Violation::Stuck(l) => write!(f, "left undecided after the drain: {l}"),
            Violation::UnjustifiedRemoval { command, at_us } => write!(
                f,
                "{command} committed at {:.3} ms while its suspect was up and reached by a majority of the voters",
                *at_us as f64 / 1000.0
            ),
            Violation::OrphanLock { node, key, word } => {
                write!(f, "key {key} locked on {node} (lock word {word:#x}) by no undecided entry")
            }
            Violation::OrphanAbsentLock { node, offset, word } => {
                write!(f, "absent-key lock word +{offset} held on {node} ({word:#x}) by no undecided entry")
            }
            Violation::Diverged { key, values } => write!(f, "replicas of key {key} disagree: {values:?}"),
            Violation::BankTotal { found, expected } => write!(f, "bank total {found}, expected {expected}"),
            Violation::BankRead { txn, found } => write!(f, "{txn} read a bank total of {found}"),
            Violation::Anomaly(a) => write!(f, "list-append: {a}"),
            Violation::Unindexed { node, key } => {
                write!(f, "key {key} holds a row on {node} but is not in its ordered index")
            }
        }
    }
}
