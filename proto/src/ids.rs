//! Identifier and timestamp newtypes shared by every crate.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Index of a node in the topology's node list (0-based, dense).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u16);

/// Index of a data center in the topology's DC list (0-based, dense).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DcId(pub u16);

/// Table identifier, as declared in the topology (`tables[i].id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableId(pub u16);

/// Partition identifier (0-based, dense, `partitions[i].id == i`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

/// Globally unique transaction id: the coordinator node in the top 16 bits, a per-node
/// sequence number in the low 48 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnId(pub u64);

impl TxnId {
    /// Builds the id of the `seq`-th transaction coordinated by `node` (`seq` is truncated
    /// to 48 bits).
    pub fn new(node: NodeId, seq: u64) -> Self {
        TxnId(((node.0 as u64) << 48) | (seq & Cts::MASK))
    }
    /// The coordinator node encoded in the id.
    pub fn coordinator(self) -> NodeId {
        NodeId((self.0 >> 48) as u16)
    }
}

/// Topology epoch: bumped on every placement change; messages and locks from an older
/// epoch are refused (docs/design.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Epoch(pub u32);

/// Paxos ballot of a per-transaction decision; the original coordinator uses ballot 0
/// (docs/design.md §2 and "Recovery").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Ballot(pub u32);

/// Commit timestamp: 48 bits, as stored in the low 48 bits of a cell version
/// (RedT §4.2; CREST §4.1 `TS_commit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cts(pub u64);

impl Cts {
    /// Number of bits a commit timestamp occupies.
    pub const BITS: u32 = 48;
    /// Mask of the valid bits.
    pub const MASK: u64 = (1 << Self::BITS) - 1;
    /// The largest representable commit timestamp.
    pub const MAX: Cts = Cts(Self::MASK);

    /// Builds a timestamp, truncating to 48 bits.
    pub fn new(v: u64) -> Self {
        Cts(v & Self::MASK)
    }
}

/// Byte offset inside one node's MemStore.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Offset(pub u64);

macro_rules! display_prefixed {
    ($t:ty, $p:literal) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($p, "{}"), self.0)
            }
        }
    };
}
display_prefixed!(NodeId, "node#");
display_prefixed!(DcId, "dc#");
display_prefixed!(TableId, "table#");
display_prefixed!(PartitionId, "p");
display_prefixed!(Epoch, "epoch ");
display_prefixed!(Ballot, "ballot ");
display_prefixed!(Cts, "cts ");
display_prefixed!(Offset, "+");

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "txn {}.{}", self.0 >> 48, self.0 & Cts::MASK)
    }
}
