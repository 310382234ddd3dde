//! The vote word of a redo entry (header w2): the per-replica acceptor state of the
//! per-transaction Paxos of docs/design.md §2, and where it lies for compare-and-swap.

use super::layout::{slot_offset, W_VOTE};
use crate::memstore::Layout;
use redt_proto::{Ballot, Decision, Offset};

/// The 2-bit code of one field of a [`VoteWord`]: a replica's phase-1 vote, or the decision
/// recorded at it. The same codes are the vote byte of a decision-log row and the `vote` and
/// `recorded` fields of a PREPARE reply on the wire (`PromiseMsg`); code 3 is unused.
///
/// This is an encoding detail of the ring: the vote word has no room for a commit timestamp,
/// so a recorded commit is only `Commit` here. Decisions themselves are [`Decision`]s
/// (`VoteCode::from(decision)` gives the code one is recorded as).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum VoteCode {
    /// Not voted / no decision recorded.
    #[default]
    None = 0,
    /// Commit.
    Commit = 1,
    /// Abort.
    Abort = 2,
}

impl VoteCode {
    /// Decodes a 2-bit code; `None` for the unused code 3 (and anything wider).
    pub fn from_bits(bits: u64) -> Option<VoteCode> {
        Some(match bits {
            0 => VoteCode::None,
            1 => VoteCode::Commit,
            2 => VoteCode::Abort,
            _ => return None,
        })
    }
}

impl From<Decision> for VoteCode {
    /// The code `decision` is recorded as (a commit's timestamp is not part of it).
    fn from(decision: Decision) -> VoteCode {
        match decision {
            Decision::Commit(_) => VoteCode::Commit,
            Decision::Abort => VoteCode::Abort,
        }
    }
}

/// The unpacked fields of a [`VoteWord`] (docs/design.md §2, recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VoteState {
    /// The replica's phase-1 vote; set once by compare-and-swap from `None`.
    pub vote: VoteCode,
    /// The decision recorded at this replica (`None` until a RECORD).
    pub decision: VoteCode,
    /// Highest ballot promised to a recoverer (30 bits).
    pub promised: Ballot,
    /// Ballot of the recorded decision (30 bits).
    pub recorded: Ballot,
}

impl Default for VoteState {
    fn default() -> Self {
        VoteState { vote: VoteCode::None, decision: VoteCode::None, promised: Ballot(0), recorded: Ballot(0) }
    }
}

/// The 8-byte vote word of a redo entry (header w2): vote (bits 0..2), recorded decision
/// (bits 2..4), promised ballot (bits 4..34) and recorded ballot (bits 34..64). It is the
/// per-replica acceptor state of the per-transaction Paxos of docs/design.md §2; phase 1 and
/// recoverers change it only by compare-and-swap at [`vote_offset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VoteWord(pub u64);

impl VoteWord {
    /// No vote, no decision, ballots 0.
    pub const NONE: VoteWord = VoteWord(0);
    /// Bits of each ballot field.
    pub const BALLOT_BITS: u32 = 30;
    /// The largest ballot a vote word can hold.
    pub const MAX_BALLOT: Ballot = Ballot((1 << Self::BALLOT_BITS) - 1);

    /// Packs `state`; `None` when a ballot exceeds [`VoteWord::MAX_BALLOT`].
    pub fn pack(state: VoteState) -> Option<VoteWord> {
        if state.promised > Self::MAX_BALLOT || state.recorded > Self::MAX_BALLOT {
            return None;
        }
        Some(VoteWord(
            state.vote as u64
                | (state.decision as u64) << 2
                | (state.promised.0 as u64) << 4
                | (state.recorded.0 as u64) << (4 + Self::BALLOT_BITS),
        ))
    }

    /// Unpacks the word; `None` when a 2-bit field holds the unused code 3.
    pub fn unpack(self) -> Option<VoteState> {
        let mask = (1u64 << Self::BALLOT_BITS) - 1;
        Some(VoteState {
            vote: VoteCode::from_bits(self.0 & 3)?,
            decision: VoteCode::from_bits(self.0 >> 2 & 3)?,
            promised: Ballot((self.0 >> 4 & mask) as u32),
            recorded: Ballot((self.0 >> (4 + Self::BALLOT_BITS) & mask) as u32),
        })
    }

    /// This word with its vote field set to `vote` (the other fields kept): phase 1's
    /// compare-and-swap is `NONE` → `NONE.with_vote(VoteCode::Commit)`.
    pub fn with_vote(self, vote: VoteCode) -> VoteWord {
        VoteWord(self.0 & !3 | vote as u64)
    }
}

/// Offset of the vote word (header w2) of the entry at ring index `index`, for
/// compare-and-swap.
pub fn vote_offset(layout: &Layout, index: u64) -> Offset {
    Offset(slot_offset(layout, index) + W_VOTE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::strategies::vote_code;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn vote_word_round_trips(v in vote_code(), d in vote_code(), p in 0u32..1 << 30, r in 0u32..1 << 30) {
            let s = VoteState { vote: v, decision: d, promised: Ballot(p), recorded: Ballot(r) };
            let w = VoteWord::pack(s).unwrap();
            prop_assert_eq!(w.unpack(), Some(s));
        }
    }

    #[test]
    fn vote_word_rejects_big_ballots_and_code_three() {
        let s = VoteState { promised: Ballot(1 << 30), ..VoteState::default() };
        assert_eq!(VoteWord::pack(s), None);
        assert_eq!(VoteWord(3).unpack(), None);
        assert_eq!(VoteWord(3 << 2).unpack(), None);
        assert_eq!(VoteWord::NONE.unpack(), Some(VoteState::default()));
        assert_eq!(VoteWord::NONE.with_vote(VoteCode::Commit).unpack().unwrap().vote, VoteCode::Commit);
        let max = VoteState {
            vote: VoteCode::Abort,
            decision: VoteCode::Commit,
            promised: VoteWord::MAX_BALLOT,
            recorded: VoteWord::MAX_BALLOT,
        };
        assert_eq!(VoteWord::pack(max).unwrap().unpack(), Some(max));
    }

    #[test]
    fn vote_codes_of_decisions() {
        assert_eq!(VoteCode::from(Decision::Commit(redt_proto::Cts(7))), VoteCode::Commit);
        assert_eq!(VoteCode::from(Decision::Abort), VoteCode::Abort);
        assert_eq!(VoteCode::from_bits(3), None);
        for c in [VoteCode::None, VoteCode::Commit, VoteCode::Abort] {
            assert_eq!(VoteCode::from_bits(c as u64), Some(c));
        }
    }
}
