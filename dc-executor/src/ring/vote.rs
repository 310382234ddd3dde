//! The vote word of a redo entry (header w2): the per-replica acceptor state of the
//! per-transaction Paxos of DESIGN.md §2, and where it lies for compare-and-swap.

use super::codec::W_VOTE;
use super::layout::slot_offset;
use crate::memstore::Layout;
use redt_proto::{Ballot, Offset};

/// One 2-bit field of a [`VoteWord`]: a replica's vote, or a recorded decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Verdict {
    /// Not voted / no decision recorded.
    #[default]
    None = 0,
    /// Commit.
    Commit = 1,
    /// Abort.
    Abort = 2,
}

impl Verdict {
    fn from_bits(bits: u64) -> Option<Verdict> {
        Some(match bits {
            0 => Verdict::None,
            1 => Verdict::Commit,
            2 => Verdict::Abort,
            _ => return None,
        })
    }
}

/// The unpacked fields of a [`VoteWord`] (DESIGN.md §2, recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VoteState {
    /// The replica's phase-1 vote; set once by compare-and-swap from `None`.
    pub vote: Verdict,
    /// The decision recorded at this replica (`None` until a RECORD).
    pub decision: Verdict,
    /// Highest ballot promised to a recoverer (30 bits).
    pub promised: Ballot,
    /// Ballot of the recorded decision (30 bits).
    pub recorded: Ballot,
}

impl Default for VoteState {
    fn default() -> Self {
        VoteState { vote: Verdict::None, decision: Verdict::None, promised: Ballot(0), recorded: Ballot(0) }
    }
}

/// The 8-byte vote word of a redo entry (header w2): vote (bits 0..2), recorded decision
/// (bits 2..4), promised ballot (bits 4..34) and recorded ballot (bits 34..64). It is the
/// per-replica acceptor state of the per-transaction Paxos of DESIGN.md §2; phase 1 and
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
            vote: Verdict::from_bits(self.0 & 3)?,
            decision: Verdict::from_bits(self.0 >> 2 & 3)?,
            promised: Ballot((self.0 >> 4 & mask) as u32),
            recorded: Ballot((self.0 >> (4 + Self::BALLOT_BITS) & mask) as u32),
        })
    }

    /// This word with its vote field set to `vote` (the other fields kept): phase 1's
    /// compare-and-swap is `NONE` → `NONE.with_vote(Verdict::Commit)`.
    pub fn with_vote(self, vote: Verdict) -> VoteWord {
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
    use crate::ring::strategies::verdict;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn vote_word_round_trips(v in verdict(), d in verdict(), p in 0u32..1 << 30, r in 0u32..1 << 30) {
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
        assert_eq!(VoteWord::NONE.with_vote(Verdict::Commit).unpack().unwrap().vote, Verdict::Commit);
        let max = VoteState {
            vote: Verdict::Abort,
            decision: Verdict::Commit,
            promised: VoteWord::MAX_BALLOT,
            recorded: VoteWord::MAX_BALLOT,
        };
        assert_eq!(VoteWord::pack(max).unwrap().unpack(), Some(max));
    }
}
