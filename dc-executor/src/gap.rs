//! Filling the gaps dead writers leave at the head of a ring (docs/design.md §2, recovery).
//!
//! A writer that fetch-and-adds the tail and dies before it WRITEs its entry (or before it
//! pays the filler it owes for a reservation that did not fit) leaves slots nobody will
//! write. Replay cannot read past them, so the head stops there for good and the ring ends
//! up refusing every writer (see "Writers that give up or die" in [`crate::ring`]).
//!
//! Only a writer that is gone may have its slots covered: a filler over the reservation of
//! a live writer that has not written yet would be overwritten later, in slots replay has
//! already released and reused. So the ring's owner asks every process that writes to the
//! ring (every node of its DC) which reservations it still holds there
//! ([`Executor::reservations`]); when every one has answered and none holds a slot of the
//! gap, the gap's slots belong to dead writers, and [`Executor::fill_gap`] covers them with
//! fillers. A process answers for all its reservations at once, because one executor per
//! process makes them, one request at a time, each written (or owed) before the request
//! returns. A restarted process holds none: its previous life's reservations died with it.

use crate::error::Result;
use crate::executor::Executor;
use crate::ring::{encode_filler, head_gap, Gap, MAX_ENTRY_SLOTS};
use crate::ring::{ring_slots, slot_offset};
use redt_proto::{NodeId, Offset};
use std::time::{Duration, Instant};

impl Executor {
    /// The reservations `(ring index, slots)` this executor holds in `node`'s ring and has
    /// not written: the fillers it owes, after paying those whose slots are free now (one
    /// READ of the head, no wait). Empty for a ring it never wrote to.
    ///
    /// # Errors
    /// Verbs failures (the fillers stay owed and are still reported).
    pub fn reservations(&mut self, node: NodeId) -> Result<Vec<(u64, u64)>> {
        let verbs = self.dc().verbs.clone();
        let Some(ring) = self.ring_writer(node) else { return Ok(Vec::new()) };
        match ring.settle(verbs.as_ref(), Duration::ZERO, &Instant::now) {
            Ok(()) | Err(crate::Error::RingFull { .. }) => Ok(ring.owed_fillers().to_vec()),
            Err(e) => Err(e),
        }
    }

    /// Covers `gap` of `node`'s ring with fillers (header-only `Aborted` entries, at most
    /// [`MAX_ENTRY_SLOTS`] and one ring each), after checking that the head still stands at
    /// `gap.from` and that no slot of the gap has become readable since. The caller must know
    /// that no live writer holds a slot of the gap (see the module docs). Returns the slots
    /// covered (0 when the ring moved on).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn fill_gap(&mut self, node: NodeId, gap: Gap) -> Result<u64> {
        let dc = self.dc().clone();
        let now = head_gap(dc.verbs.as_ref(), node, &dc.layout)?;
        if !now.is_some_and(|g| g.from == gap.from && g.to >= gap.to) || gap.to <= gap.from {
            return Ok(0);
        }
        let most = ring_slots(&dc.layout).min(MAX_ENTRY_SLOTS);
        let mut index = gap.from;
        while index < gap.to {
            let slots = (gap.to - index).min(most);
            dc.verbs.write(node, Offset(slot_offset(&dc.layout, index)), &encode_filler(index, slots))?;
            index += slots;
        }
        Ok(gap.to - gap.from)
    }
}
