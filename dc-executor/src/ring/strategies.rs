//! proptest strategies for ring values, shared by the unit tests of the ring's files.

use super::{Change, EntryStatus, LockIntent, RedoEntry, VoteCode, VoteState, VoteWord};
use proptest::prelude::*;
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, TxnId};

pub(super) fn vote_code() -> impl Strategy<Value = VoteCode> {
    prop_oneof![Just(VoteCode::None), Just(VoteCode::Commit), Just(VoteCode::Abort)]
}

pub(super) fn status() -> impl Strategy<Value = EntryStatus> {
    (0u8..6).prop_map(|c| EntryStatus::from_code(c).expect("codes 0..6 exist"))
}

fn lock() -> impl Strategy<Value = LockIntent> {
    (any::<u64>(), any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(record, table, key, lock_bits, cells, seed)| {
            // Keep entries small: at most 8 touched cells.
            let cells = cells & 0x0101_0101_0101_0101;
            let versions = (0..cells.count_ones() as u64).map(|i| seed.wrapping_mul(i + 1)).collect();
            LockIntent { record: Offset(record), table: TableId(table), key, lock_bits, cells, versions }
        },
    )
}

fn change() -> impl Strategy<Value = Change> {
    (any::<u64>(), any::<u16>(), any::<u64>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..100)).prop_map(
        |(record, table, key, cell, value)| Change { record: Offset(record), table: TableId(table), key, cell, value },
    )
}

prop_compose! {
    pub(super) fn entry()(
        txn: u64, status in status(), cts in 0..=Cts::MASK,
        vote in (vote_code(), vote_code(), 0u32..1 << 30, 0u32..1 << 30),
        epoch: u32, coordinator: u16, start in 0..=Cts::MASK,
        participants in proptest::collection::vec(any::<u16>(), 0..6),
        partitions in proptest::collection::vec(any::<u32>(), 0..6),
        locks in proptest::collection::vec(lock(), 0..4),
        changes in proptest::collection::vec(change(), 0..4),
    ) -> RedoEntry {
        let vote = VoteWord::pack(VoteState {
            vote: vote.0, decision: vote.1, promised: Ballot(vote.2), recorded: Ballot(vote.3),
        }).expect("30-bit ballots fit");
        RedoEntry {
            txn: TxnId(txn), status, cts: Cts(cts), vote, epoch: Epoch(epoch),
            coordinator: NodeId(coordinator), start: Cts(start),
            participants: participants.into_iter().map(DcId).collect(),
            partitions: partitions.into_iter().map(PartitionId).collect(), locks, changes,
        }
    }
}
