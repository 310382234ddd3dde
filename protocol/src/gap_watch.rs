//! When a gap at the head of a ring may be filled (the ring owner's side of
//! `redt_dc_executor`'s gap filling; docs/design.md §2, recovery).
//!
//! Pure: the driver reports what the head looks like ([`GapWatch::observe`], from its
//! periodic recovery scan) and the writers' answers ([`GapWatch::answer`]); the watch says
//! whom to ask and which gap to fill. A gap that stays at the head for `wait` starts a round:
//! every writer of the DC (every node of it, the owner included) is asked which reservations
//! it holds in the ring. When all have answered in the same round, the slots from the head up
//! to the first reservation anyone holds (or the gap's end, seen when the round started) are
//! dead and may be filled. Reservations made after the round started lie past the tail of
//! that moment, so past the gap. A writer that does not answer (down, unreachable) blocks
//! the round; another starts `wait` later. The executor re-checks the ring before it writes
//! ([`redt_dc_executor::Executor::fill_gap`]), so an entry written meanwhile is never covered.

use redt_dc_executor::Gap;
use redt_proto::NodeId;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the driver does for a [`GapWatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GapAction {
    /// Ask `to` for its reservations in the watched ring (a `Reservations` request); hand the
    /// answer back with `round`.
    Ask {
        /// The round the answer belongs to.
        round: u64,
        /// The writer asked.
        to: NodeId,
    },
    /// Fill this gap (`ExecutorCore::fill_gap`).
    Fill(Gap),
}

#[derive(Debug)]
struct Round {
    id: u64,
    gap: Gap,
    started: Instant,
    answers: BTreeMap<NodeId, Vec<(u64, u64)>>,
}

/// The gap watch of one node's ring.
#[derive(Debug)]
pub struct GapWatch {
    writers: Vec<NodeId>,
    wait: Duration,
    /// The gap at the head and when the head was first seen stopped there.
    seen: Option<(Gap, Instant)>,
    round: Option<Round>,
    rounds: u64,
}

impl GapWatch {
    /// A watch whose rounds ask `writers` (every node of the ring owner's DC, itself
    /// included) once a gap has stayed at the head for `wait`, and again every `wait` while a
    /// round is unanswered.
    pub fn new(writers: Vec<NodeId>, wait: Duration) -> GapWatch {
        GapWatch { writers, wait, seen: None, round: None, rounds: 0 }
    }

    /// The gap at the head now (`None`: the head entry is readable, or the ring is empty).
    /// Returns the questions of a new round when one is due.
    pub fn observe(&mut self, gap: Option<Gap>, now: Instant) -> Vec<GapAction> {
        let Some(gap) = gap else {
            self.seen = None;
            self.round = None;
            return Vec::new();
        };
        let since = match self.seen {
            Some((g, t)) if g.from == gap.from => t,
            _ => {
                self.seen = Some((gap, now));
                self.round = None;
                return Vec::new();
            }
        };
        self.seen = Some((gap, since));
        let due = now.saturating_duration_since(since) >= self.wait
            && self.round.as_ref().is_none_or(|r| now.saturating_duration_since(r.started) >= self.wait);
        if !due {
            return Vec::new();
        }
        self.rounds += 1;
        let id = self.rounds;
        self.round = Some(Round { id, gap, started: now, answers: BTreeMap::new() });
        self.writers.iter().map(|&to| GapAction::Ask { round: id, to }).collect()
    }

    /// `from`'s reservations in the ring, answering round `round`. Once every writer has
    /// answered that round, returns the gap to fill, if any slot of it is nobody's.
    pub fn answer(&mut self, round: u64, from: NodeId, reservations: Vec<(u64, u64)>) -> Option<GapAction> {
        let r = self.round.as_mut().filter(|r| r.id == round)?;
        if !self.writers.contains(&from) {
            return None;
        }
        r.answers.insert(from, reservations);
        if r.answers.len() < self.writers.len() {
            return None;
        }
        let r = self.round.take()?;
        self.seen = None;
        let held = r.answers.values().flatten().map(|&(i, _)| i).filter(|&i| i >= r.gap.from).min();
        let to = held.map_or(r.gap.to, |h| h.min(r.gap.to));
        (to > r.gap.from).then_some(GapAction::Fill(Gap { from: r.gap.from, to }))
    }

    /// Whether a round is waiting for answers.
    pub fn asking(&self) -> bool {
        self.round.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(from: u64, to: u64) -> Option<Gap> {
        Some(Gap { from, to })
    }

    fn asks(actions: &[GapAction]) -> Vec<(u64, NodeId)> {
        actions
            .iter()
            .filter_map(|a| match a {
                GapAction::Ask { round, to } => Some((*round, *to)),
                GapAction::Fill(_) => None,
            })
            .collect()
    }

    #[test]
    fn a_gap_is_filled_only_after_it_stayed_and_every_writer_answered() {
        let t0 = Instant::now();
        let ms = |m| t0 + Duration::from_millis(m);
        let mut w = GapWatch::new(vec![NodeId(0), NodeId(1)], Duration::from_millis(100));
        assert!(w.observe(gap(10, 20), ms(0)).is_empty(), "a gap just seen may be a write in flight");
        assert!(w.observe(gap(10, 20), ms(50)).is_empty());
        let a = asks(&w.observe(gap(10, 25), ms(100)));
        assert_eq!(a, vec![(1, NodeId(0)), (1, NodeId(1))]);
        assert!(w.observe(gap(10, 25), ms(150)).is_empty(), "a round is in flight");
        assert_eq!(w.answer(1, NodeId(0), vec![]), None, "one writer has not answered");
        assert_eq!(w.answer(1, NodeId(7), vec![]), None, "not a writer of this DC");
        assert_eq!(w.answer(1, NodeId(1), vec![(40, 3)]), Some(GapAction::Fill(Gap { from: 10, to: 25 })));
        assert!(!w.asking());
    }

    #[test]
    fn a_held_reservation_bounds_the_fill_and_one_at_the_head_prevents_it() {
        let t0 = Instant::now();
        let ms = |m| t0 + Duration::from_millis(m);
        let mut w = GapWatch::new(vec![NodeId(0), NodeId(1)], Duration::from_millis(100));
        w.observe(gap(10, 30), ms(0));
        assert_eq!(asks(&w.observe(gap(10, 30), ms(100))).len(), 2);
        w.answer(1, NodeId(0), vec![(18, 4)]);
        assert_eq!(w.answer(1, NodeId(1), vec![]), Some(GapAction::Fill(Gap { from: 10, to: 18 })));
        // The owed filler sits at the head: nothing to fill, ask again later.
        w.observe(gap(18, 30), ms(200));
        assert_eq!(asks(&w.observe(gap(18, 30), ms(300))), vec![(2, NodeId(0)), (2, NodeId(1))]);
        w.answer(2, NodeId(1), vec![]);
        assert_eq!(w.answer(2, NodeId(0), vec![(18, 4)]), None);
    }

    #[test]
    fn a_silent_writer_blocks_the_round_and_a_new_round_forgets_old_answers() {
        let t0 = Instant::now();
        let ms = |m| t0 + Duration::from_millis(m);
        let mut w = GapWatch::new(vec![NodeId(0), NodeId(1)], Duration::from_millis(100));
        w.observe(gap(5, 9), ms(0));
        w.observe(gap(5, 9), ms(100));
        assert_eq!(w.answer(1, NodeId(0), vec![]), None);
        // Node 1 is down: no fill, ever, until a round gets both answers.
        assert!(w.observe(gap(5, 9), ms(150)).is_empty());
        assert_eq!(asks(&w.observe(gap(5, 9), ms(200))).len(), 2, "a new round after `wait`");
        assert_eq!(w.answer(1, NodeId(1), vec![]), None, "an answer to the old round");
        assert_eq!(w.answer(2, NodeId(1), vec![]), None, "node 0 must answer round 2 again");
        assert_eq!(w.answer(2, NodeId(0), vec![]), Some(GapAction::Fill(Gap { from: 5, to: 9 })));
    }

    #[test]
    fn the_head_moving_or_the_gap_closing_cancels_the_round() {
        let t0 = Instant::now();
        let ms = |m| t0 + Duration::from_millis(m);
        let mut w = GapWatch::new(vec![NodeId(0)], Duration::from_millis(100));
        w.observe(gap(5, 9), ms(0));
        w.observe(gap(5, 9), ms(100));
        assert!(w.observe(None, ms(120)).is_empty());
        assert_eq!(w.answer(1, NodeId(0), vec![]), None, "the gap was written meanwhile");
        w.observe(gap(9, 12), ms(130));
        w.observe(gap(9, 12), ms(230));
        assert!(w.observe(gap(12, 14), ms(240)).is_empty(), "the head moved: the wait starts over");
        assert_eq!(w.answer(2, NodeId(0), vec![]), None);
    }
}
