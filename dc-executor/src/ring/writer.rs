//! The executor side of one node's redo ring: reservations with RedT's lazy head check, and
//! the fillers owed for reservations given up (see "Writers that give up or die" in the
//! `ring` module docs).

use super::codec::encode_filler;
use super::layout::{head_offset, ring_slots, slot_offset, tail_offset};
use super::{MAX_ENTRY_SLOTS, SLOT_BYTES};
use crate::error::{Error, Result};
use crate::memstore::Layout;
use crate::verbs::Verbs;
use redt_proto::{NodeId, Offset};
use std::time::{Duration, Instant};

/// The executor side of one node's redo ring: one per (executor, target node), holding the
/// cached head of RedT's lazy head check (§4.2, Algorithm 2 lines 15–18) and the
/// reservations it still owes a filler. The stateless verb builders of `WriteLog` and
/// `CommitLog` are the free functions of the `ring` module ([`push_write`],
/// [`push_set_status`], …), usable by anyone (recovery too).
///
/// [`push_write`]: super::push_write
/// [`push_set_status`]: super::push_set_status
#[derive(Debug)]
pub struct RingWriter {
    layout: Layout,
    node: NodeId,
    cached_head: u64,
    owed: Vec<(u64, u64)>,
}

impl RingWriter {
    /// A writer to `node`'s ring laid out by `layout`; the cached head starts at 0 (a stale
    /// head is safe: it only makes the writer READ the head sooner).
    ///
    /// # Panics
    /// If `layout` has no ring slot.
    pub fn new(layout: Layout, node: NodeId) -> RingWriter {
        ring_slots(&layout);
        RingWriter { layout, node, cached_head: 0, owed: Vec::new() }
    }

    /// The target node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The head this writer last READ (a lower bound of the real head).
    pub fn cached_head(&self) -> u64 {
        self.cached_head
    }

    /// Reservations `(index, slots)` this writer gave up and still has to cover with a
    /// filler (written by the next [`RingWriter::reserve`] or [`RingWriter::settle`]).
    pub fn owed_fillers(&self) -> &[(u64, u64)] {
        &self.owed
    }

    /// Reserves `slots` consecutive slots and returns the ring index of the first (Algorithm
    /// 2 lines 15–18): pays owed fillers first, then fetch-and-adds the tail by `slots`; if
    /// the reservation may overrun the head by a lap (`index + slots > cached head + S`), it
    /// re-READs the head, yielding the thread between READs, until the reservation fits.
    ///
    /// `patience` bounds each wait (for the new reservation, and for each owed filler); at
    /// least one head READ is made whatever its value. A reservation that runs out of
    /// patience stays consumed: this writer remembers it and covers it with a filler later
    /// (see the module docs). The wait is measured on `now`, the caller's monotonic clock,
    /// read only on that slow path (see "Time" in the module docs): with a clock that stands
    /// still, give zero patience (one head READ, then give up), as any other patience never
    /// runs out.
    ///
    /// # Errors
    /// [`Error::EntryTooLarge`] (nothing reserved) when `slots` exceeds the ring or
    /// [`MAX_ENTRY_SLOTS`]; [`Error::RingFull`] when an owed filler (nothing new reserved) or
    /// the new reservation (consumed, filler owed) still does not fit after `patience`;
    /// verbs errors (a reservation already made is then owed a filler too).
    ///
    /// # Panics
    /// If `slots` is 0.
    pub fn reserve(
        &mut self,
        verbs: &dyn Verbs,
        slots: u64,
        patience: Duration,
        now: &dyn Fn() -> Instant,
    ) -> Result<u64> {
        assert!(slots >= 1, "an entry occupies at least one slot");
        let ring = ring_slots(&self.layout);
        if slots > ring.min(MAX_ENTRY_SLOTS) {
            return Err(Error::EntryTooLarge { bytes: slots * SLOT_BYTES, ring_bytes: ring * SLOT_BYTES });
        }
        self.settle(verbs, patience, now)?;
        let index = verbs.fetch_and_add(self.node, Offset(tail_offset(&self.layout)), slots)?;
        match self.wait_for_space(verbs, index, slots, patience, now) {
            Ok(true) => Ok(index),
            Ok(false) => {
                self.owed.push((index, slots));
                Err(Error::RingFull { node: self.node, head: self.cached_head, index })
            }
            Err(e) => {
                self.owed.push((index, slots));
                Err(e)
            }
        }
    }

    /// Writes a filler over every owed reservation, in index order, waiting up to
    /// `patience` (measured on `now`) for each to be free as [`RingWriter::reserve`] does. A
    /// driver calls it when idle, so replay is not held up by a writer that stopped writing.
    ///
    /// # Errors
    /// [`Error::RingFull`] naming the first owed reservation still not free after
    /// `patience`; verbs errors. Unpaid fillers stay owed.
    pub fn settle(&mut self, verbs: &dyn Verbs, patience: Duration, now: &dyn Fn() -> Instant) -> Result<()> {
        while let Some(&(index, slots)) = self.owed.first() {
            if !self.wait_for_space(verbs, index, slots, patience, now)? {
                return Err(Error::RingFull { node: self.node, head: self.cached_head, index });
            }
            let at = Offset(slot_offset(&self.layout, index));
            verbs.write(self.node, at, &encode_filler(index, slots))?;
            self.owed.remove(0);
        }
        Ok(())
    }

    /// Gives up a reservation `(index, slots)` returned by [`RingWriter::reserve`] that will
    /// not be written: WRITEs a filler over it at once (its slots are free).
    ///
    /// # Errors
    /// Verbs errors; the filler then stays owed.
    ///
    /// # Panics
    /// If `slots` is 0 or above [`MAX_ENTRY_SLOTS`].
    pub fn abandon(&mut self, verbs: &dyn Verbs, index: u64, slots: u64) -> Result<()> {
        let at = Offset(slot_offset(&self.layout, index));
        let r = verbs.write(self.node, at, &encode_filler(index, slots));
        if r.is_err() {
            let pos = self.owed.partition_point(|&(i, _)| i < index);
            self.owed.insert(pos, (index, slots));
        }
        Ok(r?)
    }

    /// Whether `[index, index + slots)` lies within one lap of the head, READing the head
    /// (at least once, then until `patience` has passed on `now`) when the cached head says
    /// no. The ring code's only use of time, and only on this slow path: `now` is read once
    /// before the first head READ and once after each READ that still finds no room.
    fn wait_for_space(
        &mut self,
        verbs: &dyn Verbs,
        index: u64,
        slots: u64,
        patience: Duration,
        now: &dyn Fn() -> Instant,
    ) -> Result<bool> {
        let ring = ring_slots(&self.layout);
        let end = index.saturating_add(slots);
        let fits = |head: u64| end <= head.saturating_add(ring);
        if fits(self.cached_head) {
            return Ok(true);
        }
        let start = now();
        let mut buf = [0u8; 8];
        loop {
            verbs.read(self.node, Offset(head_offset(&self.layout)), &mut buf)?;
            self.cached_head = self.cached_head.max(u64::from_le_bytes(buf));
            if fits(self.cached_head) {
                return Ok(true);
            }
            if now().saturating_duration_since(start) >= patience {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }
}
