//! The redo entry of a node's ring and its parts: status, lock intents, changes (RedT
//! Algorithm 2 `ConstructEntry`; docs/design.md §2). Its byte format is in the `ring` module docs,
//! its encoding in `codec.rs`.

use super::status::EntryStatus;
use super::vote::VoteWord;
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, TxnId};

/// A lock an entry's transaction takes (or will take) on one record of this node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockIntent {
    /// Offset of the record in the node's MemStore.
    pub record: Offset,
    /// Table of the record.
    pub table: TableId,
    /// Key of the record.
    pub key: u64,
    /// The exact bits added to the record's lock word (so a cleaner can subtract them).
    pub lock_bits: u64,
    /// Mask of the cells touched (bit `c` = cell `c`).
    pub cells: u64,
    /// One version per set bit of `cells`, ascending cell order; zero until known.
    pub versions: Vec<u64>,
}

impl LockIntent {
    /// The version recorded for cell `cell` (the one its writer saw), or `None` if the
    /// cell is not in `cells` or its version is still zero.
    pub fn seen_version(&self, cell: u16) -> Option<u64> {
        let below = self.cells & ((1u64 << (cell % 64)) - 1);
        let held = cell < 64 && self.cells >> cell & 1 == 1;
        held.then(|| self.versions.get(below.count_ones() as usize).copied()).flatten().filter(|&v| v != 0)
    }
}

/// A new cell value to apply (Thomas write rule) when the entry commits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Change {
    /// Offset of the record in the node's MemStore.
    pub record: Offset,
    /// Table of the record.
    pub table: TableId,
    /// Key of the record.
    pub key: u64,
    /// Cell index in the record.
    pub cell: u16,
    /// The new value (the cell's full width, as the schema gives it).
    pub value: Vec<u8>,
}

/// A redo entry of a node's ring (RedT Algorithm 2 `ConstructEntry`, extended with the lock
/// intents, vote word and participants that recovery needs; docs/design.md §2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedoEntry {
    /// The transaction.
    pub txn: TxnId,
    /// Where the entry is in its life.
    pub status: EntryStatus,
    /// Commit timestamp (48 bits); meaningful once `Committed`.
    pub cts: Cts,
    /// This replica's vote word.
    pub vote: VoteWord,
    /// Topology epoch the entry was written in.
    pub epoch: Epoch,
    /// The transaction's coordinator node.
    pub coordinator: NodeId,
    /// The coordinator's hybrid-logical-clock reading when it started the transaction (48
    /// bits): the base of its phase-1 deadline, of a recoverer's timeout, and of its commit
    /// timestamp (docs/design.md §2, recovery). Zero in replica and filler entries.
    pub start: Cts,
    /// Every DC the transaction involves.
    pub participants: Vec<DcId>,
    /// Every partition the whole transaction touches, ascending (what a recoverer must hear
    /// from; docs/design.md §2, recovery). Empty in replica and filler entries.
    pub partitions: Vec<PartitionId>,
    /// Locks on records of this node.
    pub locks: Vec<LockIntent>,
    /// Cell writes on records of this node.
    pub changes: Vec<Change>,
}

impl RedoEntry {
    /// A filler: an `Aborted` entry of transaction 0 with no participants, locks or changes,
    /// written over a reservation nobody will use so replay can pass it.
    pub fn filler() -> RedoEntry {
        RedoEntry {
            txn: TxnId(0),
            status: EntryStatus::Aborted,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: Epoch(0),
            coordinator: NodeId(0),
            start: Cts(0),
            participants: Vec::new(),
            partitions: Vec::new(),
            locks: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Whether this is a filler (see [`RedoEntry::filler`]): `Aborted` or `Flushed`, with no
    /// participants, locks or changes.
    pub fn is_filler(&self) -> bool {
        matches!(self.status, EntryStatus::Aborted | EntryStatus::Flushed)
            && self.participants.is_empty()
            && self.partitions.is_empty()
            && self.locks.is_empty()
            && self.changes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::strategies::status;
    use proptest::prelude::*;

    /// `seen_version` finds the version of a cell by its rank among the set bits of
    /// `cells`, and treats zero (not yet known) and cells outside the mask as unknown.
    #[test]
    fn seen_version_by_cell() {
        let l = LockIntent {
            record: Offset(0),
            table: TableId(1),
            key: 7,
            lock_bits: 0,
            cells: 0b1010_0100,
            versions: vec![11, 0, 13],
        };
        assert_eq!(l.seen_version(2), Some(11));
        assert_eq!(l.seen_version(5), None, "recorded as zero");
        assert_eq!(l.seen_version(7), Some(13));
        assert_eq!(l.seen_version(3), None, "not a touched cell");
        assert_eq!(l.seen_version(64), None);
        assert_eq!(l.seen_version(u16::MAX), None);
    }

    proptest! {
        #[test]
        fn status_word_round_trips(s in status(), cts in 0..=Cts::MASK) {
            prop_assert_eq!(EntryStatus::from_word(s.word(Cts(cts))), Some((s, Cts(cts))));
        }
    }

    proptest! {
        #[test]
        fn owed_status_word_round_trips(s in status(), cts in 0..=Cts::MASK, owed in any::<u8>()) {
            let w = s.word_owed(Cts(cts), owed);
            prop_assert_eq!(EntryStatus::from_word(w), Some((s, Cts(cts))));
            prop_assert_eq!(EntryStatus::owed_of(w), owed);
            prop_assert_eq!(EntryStatus::owed_of(s.word(Cts(cts))), 0);
        }
    }

    #[test]
    fn status_word_rejects_unknown_codes() {
        assert_eq!(EntryStatus::from_word(6), None);
        assert_eq!(EntryStatus::from_word(0x1ff), None);
        assert_eq!(EntryStatus::from_word(0x100), Some((EntryStatus::Empty, Cts(0))), "a mask alone is no status");
    }
}
