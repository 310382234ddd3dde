//! The node-local replay task over the node's own redo ring (RedT §4.2, Algorithm 2
//! `ReplayLog`).
//!
//! [`Replayer::step`] is one scan of the ring, a pure function of the region's contents and
//! the caller's `apply` callback; the caller runs it in a loop (and decides when to sleep).
//! Exactly one replayer runs per ring: it alone moves the head.
//!
//! # One step
//!
//! The scan covers the ring indices `[head, min(tail, head + S))`, entry by entry:
//!
//! - `Committed`: `apply` is called (it applies the changes by the Thomas write rule); on
//!   [`Apply::Done`] the entry is marked `Flushed` (compare-and-swap on its status word, the
//!   commit timestamp kept); on [`Apply::Retry`] it stays `Committed` and is offered again
//!   next step; on [`Apply::Invalid`] (an entry that can never be applied) it is marked
//!   `Flushed` unapplied and counted in [`ReplayStep::invalid`], so one bad entry never stops
//!   replay.
//! - `Aborted` (fillers included): marked `Flushed`.
//! - `Flushed`: skipped; it was applied before, so every entry is applied exactly once
//!   (unless the process dies between `apply` and the mark, when it is applied again, which
//!   the Thomas write rule makes harmless).
//! - `Empty`, `Intent`, `Logged`, or `Committed` with `Retry`: unfinished. The head stops
//!   there, but the header gave the entry's slot count, so the scan goes on past it and still
//!   applies later `Committed` entries (Algorithm 2's `move ← false`; the Thomas write rule
//!   makes the order of applying irrelevant).
//! - An entry that does not decode (index word of another lap or never written, checksum
//!   mismatch: a reservation not yet written, being written, or left by a dead writer): its
//!   slot count is unknown, since a half-written header cannot be trusted, so the next entry
//!   cannot be found and the scan stops there as well as the head. A reservation that is
//!   never written therefore blocks the ring until it is filled (see `ring/mod.rs`, "Writers that
//!   give up or die").
//!
//! - Any of these with a non-zero catch-up mask (a catch-up source whose shipments are not all
//!   acknowledged, [`EntryStatus::owed_of`]): applied and flushed as above, mask kept, but
//!   unfinished for the head until the mask is cleared.
//!
//! The head then moves over the finished (`Flushed`, no catch-up owed) prefix: the released slots are zeroed
//! first, then the new head is stored with release ordering, so a writer that READs the new
//! head only ever finds its slots zero (RedT's `ent.status ← Inited; ++head`).
//!
//! # On a region with a disk image (`durability: disk`)
//!
//! Before it releases any slot, replay makes two syncs (`persist.rs`): the first makes the
//! records it applied durable; then it stores the new head in the ring's *durable head* word
//! and the second sync makes that durable. Only then are the slots zeroed and the head
//! published. So a slot is reused only once the image holds both the changes of the entry it
//! held and a durable head past it: after a power loss, the image's ring, read from the
//! larger of its head and durable head, lacks no entry whose changes the image lacks
//! (`restore.rs`). A sync that fails leaves the head where it was ([`ReplayStep::unsynced`]).

use crate::memstore::Layout;
use crate::ring::{
    head_offset, pieces, read_framed, ring_slots, status_offset, tail_offset, EntryStatus, RedoEntry, SLOT_BYTES,
};
use redt_proto::{Cts, NodeId};
use redt_verbs::region::Region;
use std::sync::atomic::Ordering;

/// What the caller's `apply` did with a `Committed` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// The changes are applied (or were already superseded): mark the entry `Flushed`.
    Done,
    /// The changes cannot be applied now (say, a cell lock is held): leave the entry
    /// `Committed`, stop the head before it, offer it again next step.
    Retry,
    /// The entry can never be applied (it names a record offset that is unaligned, outside
    /// the region or of another key: a CRC-valid entry written wrong): nothing of it is
    /// applied, it is marked `Flushed` so replay goes on past it, and the step reports it
    /// ([`ReplayStep::invalid`]) for the caller to log and count.
    Invalid(&'static str),
}

/// What one [`Replayer::step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStep {
    /// `Committed` entries applied (`apply` returned [`Apply::Done`]).
    pub applied: u64,
    /// Entries marked `Flushed` (applied `Committed` ones and `Aborted` ones).
    pub flushed: u64,
    /// The head after the step (ring index).
    pub head: u64,
    /// The ring index where the head stopped, when an entry there is unfinished or cannot be
    /// read yet; `None` when the head reached the end of the scan (the tail, or one lap).
    pub blocked_at: Option<u64>,
    /// `Committed` entries that could not be applied ([`Apply::Invalid`]) and were flushed
    /// unapplied.
    pub invalid: u64,
    /// The ring index and reason of the last of them.
    pub last_invalid: Option<(u64, &'static str)>,
    /// Whether a sync of the region's disk image failed, so the head was not moved.
    pub unsynced: bool,
}

/// The replay task of one node's ring (RedT Algorithm 2 `ReplayLog`), run by the node itself
/// over its own [`Region`].
#[derive(Debug)]
pub struct Replayer {
    layout: Layout,
    node: NodeId,
    zeros: Vec<u8>,
    /// Slot counts of entries met unfinished (or already flushed) past the head, by ring
    /// index: a later pass reads only their status word until it changes, instead of
    /// decoding every in-flight entry on every pass. Forgotten once the head passes them.
    known: std::collections::BTreeMap<u64, u64>,
    /// Whether the two syncs run before slots are released on a region with a disk image
    /// (off only for the test that shows what they prevent).
    sync_before_release: bool,
}

impl Replayer {
    /// The replayer of `node`'s ring laid out by `layout`.
    ///
    /// # Panics
    /// If `layout` has no ring slot.
    pub fn new(layout: Layout, node: NodeId) -> Replayer {
        let zeros = vec![0; (ring_slots(&layout) * SLOT_BYTES) as usize];
        Replayer { layout, node, zeros, known: std::collections::BTreeMap::new(), sync_before_release: true }
    }

    /// A mutant for tests: releases slots without the two syncs of the module docs, as if
    /// the disk image needed no ordering.
    pub fn without_sync_before_release(mut self) -> Replayer {
        self.sync_before_release = false;
        self
    }

    /// Scans the ring once, applies and flushes what it can, and moves the head over the
    /// finished prefix (see the module docs). `apply` is called once per `Committed` entry
    /// met, in ring order.
    ///
    /// # Panics
    /// If `region` is smaller than the layout's ring area.
    pub fn step(&mut self, region: &Region, apply: &mut dyn FnMut(&RedoEntry) -> Apply) -> ReplayStep {
        let layout = self.layout;
        let head = region.word(head_offset(&layout)).load(Ordering::Acquire);
        let tail = region.word(tail_offset(&layout)).load(Ordering::Acquire);
        let end = tail.min(head.saturating_add(ring_slots(&layout)));
        let mut out = ReplayStep { head, ..ReplayStep::default() };
        let mut movable = true;
        let mut index = head;
        let mut read = |off: u64, buf: &mut [u8]| {
            region.read(off, buf);
            Ok(())
        };
        self.known = self.known.split_off(&head);
        while index < end {
            if let Some(&slots) = self.known.get(&index) {
                let word = region.word(status_offset(&layout, index).0).load(Ordering::Acquire);
                match EntryStatus::from_word(word).map(|(s, _)| s) {
                    Some(EntryStatus::Intent | EntryStatus::Logged) => {
                        if movable {
                            movable = false;
                            out.blocked_at = Some(index);
                        }
                        index += slots;
                        continue;
                    }
                    Some(EntryStatus::Flushed) => {
                        if movable {
                            if EntryStatus::owed_of(word) == 0 {
                                out.head = index + slots;
                            } else {
                                movable = false;
                                out.blocked_at = Some(index);
                            }
                        }
                        index += slots;
                        continue;
                    }
                    _ => {
                        self.known.remove(&index);
                    }
                }
            }
            let (entry, slots, owed) = match read_framed(&layout, self.node, index, &mut read) {
                Ok((e, n, owed)) if index.checked_add(n).is_some_and(|e| e <= end) => (e, n, owed),
                // Torn, not yet written, or (garbage) running past the scan: the slot count
                // cannot be trusted, so neither the head nor the scan can pass.
                _ => {
                    if movable {
                        out.blocked_at = Some(index);
                    }
                    break;
                }
            };
            let flushed = match entry.status {
                EntryStatus::Committed => match apply(&entry) {
                    Apply::Done => {
                        out.applied += 1;
                        self.flush(region, index, &entry, owed, &mut out)
                    }
                    Apply::Retry => false,
                    Apply::Invalid(why) => {
                        out.invalid += 1;
                        out.last_invalid = Some((index, why));
                        self.flush(region, index, &entry, owed, &mut out)
                    }
                },
                EntryStatus::Aborted => self.flush(region, index, &entry, owed, &mut out),
                EntryStatus::Flushed => true,
                EntryStatus::Empty | EntryStatus::Intent | EntryStatus::Logged => false,
            };
            // An entry owing a catch-up is applied and flushed, but holds the head until its
            // mask is cleared (the redo it ships must stay readable; `ring/mod.rs`).
            let finished = flushed && owed == 0;
            if matches!(entry.status, EntryStatus::Intent | EntryStatus::Logged)
                || (flushed && !movable)
                || (flushed && owed != 0)
            {
                self.known.insert(index, slots);
            }
            if movable {
                if finished {
                    out.head = index + slots;
                } else {
                    movable = false;
                    out.blocked_at = Some(index);
                }
            }
            index += slots;
        }
        if out.head > head && self.sync_before_release && region.persistence().is_some() {
            let durable = crate::ring::durable_head_offset(&layout);
            let synced = region.sync().is_ok() && {
                if region.word(durable).load(Ordering::Acquire) < out.head {
                    region.store(durable, out.head);
                }
                region.sync().is_ok()
            };
            if !synced {
                out.unsynced = true;
                out.head = head;
                out.blocked_at = Some(head);
                return out;
            }
        }
        if out.head > head {
            let bytes = (out.head - head) * SLOT_BYTES;
            for (off, _, len) in pieces(&layout, head, 0, bytes) {
                if len > 0 {
                    region.write(off, &self.zeros[..len as usize]);
                }
            }
            region.store(head_offset(&layout), out.head);
        }
        out
    }

    /// Marks the `Committed` or `Aborted` entry at `index`, read with catch-up mask `owed`,
    /// `Flushed` by compare-and-swap on its status word, keeping its commit timestamp and its
    /// mask; returns whether it did (false if the status word changed meanwhile).
    fn flush(&self, region: &Region, index: u64, entry: &RedoEntry, owed: u8, out: &mut ReplayStep) -> bool {
        // Its decision outlives its slots (docs/design.md §2, recovery).
        crate::decision_log::append(&self.layout, region, entry);
        if !entry.partitions.is_empty() && entry.locks.is_empty() && entry.changes.is_empty() {
            // A fence entry: the decision-log row now answers for it (`promise_table.rs`).
            crate::promise_table::free(&self.layout, region, entry.txn);
        }
        let at = status_offset(&self.layout, index).0;
        let cts: Cts = entry.cts;
        let old = entry.status.word_owed(cts, owed);
        let done = region.compare_and_swap(at, old, EntryStatus::Flushed.word_owed(cts, owed)) == old;
        if done {
            out.flushed += 1;
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{encode, encoded_slots, push_set_status, push_write, read_entry, RingWriter, VoteWord};
    use crate::verbs::{DoorbellBatch, LocalVerbs, Verbs};
    use redt_proto::{Epoch, MemStoreConfig, Offset, TableId, TxnId};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const N: NodeId = NodeId(0);

    fn setup() -> (LocalVerbs, Layout, Arc<Region>) {
        let layout = Layout::from_config(&MemStoreConfig { size_bytes: 1 << 16, index_bytes: 64, ring_bytes: 9 * 64 });
        let verbs = LocalVerbs::in_process([N], layout.size);
        let region = verbs.region(N).expect("node 0").clone();
        layout.format(&region);
        (verbs, layout, region)
    }

    fn entry(txn: u64, status: EntryStatus, value_len: usize) -> RedoEntry {
        RedoEntry {
            txn: TxnId(txn),
            status,
            cts: Cts(txn * 10),
            vote: VoteWord::NONE,
            epoch: Epoch(1),
            coordinator: NodeId(0),
            start: Cts(0),
            participants: vec![],
            partitions: vec![],
            locks: vec![],
            changes: if value_len == 0 {
                vec![]
            } else {
                vec![crate::ring::Change {
                    record: Offset(4096),
                    table: TableId(1),
                    key: txn,
                    cell: 0,
                    value: vec![txn as u8; value_len],
                }]
            },
        }
    }

    /// A clock that stands still (the ring's `now` in a simulation): with zero patience a
    /// reservation makes one head READ, then gives up.
    fn still() -> impl Fn() -> Instant {
        let t = Instant::now();
        move || t
    }

    /// Reserves, writes and returns the index of `e`.
    fn append(verbs: &LocalVerbs, w: &mut RingWriter, layout: &Layout, e: &RedoEntry) -> u64 {
        let i = w.reserve(verbs, encoded_slots(e), Duration::ZERO, &still()).unwrap();
        let mut b = DoorbellBatch::new();
        push_write(&mut b, layout, i, &encode(e, i));
        verbs.post_batch(N, &mut b).unwrap();
        i
    }

    fn set(verbs: &LocalVerbs, layout: &Layout, i: u64, s: EntryStatus, cts: Cts) {
        let mut b = DoorbellBatch::new();
        push_set_status(&mut b, layout, i, s, cts);
        verbs.post_batch(N, &mut b).unwrap();
    }

    fn ring_is_zero(layout: &Layout, region: &Region) -> bool {
        let mut all = vec![0u8; (layout.ring_bytes - 64) as usize];
        region.read(layout.ring_off + 64, &mut all);
        all.iter().all(|&b| b == 0)
    }

    #[test]
    fn head_stops_at_logged_but_the_scan_goes_on() {
        let (verbs, layout, region) = setup();
        let mut w = RingWriter::new(layout, N);
        let mut r = Replayer::new(layout, N);
        let a = append(&verbs, &mut w, &layout, &entry(1, EntryStatus::Committed, 0));
        let b = append(&verbs, &mut w, &layout, &entry(2, EntryStatus::Logged, 50));
        let c = append(&verbs, &mut w, &layout, &entry(3, EntryStatus::Committed, 30));
        let d = append(&verbs, &mut w, &layout, &entry(4, EntryStatus::Aborted, 0));
        assert_eq!((a, b, c, d), (0, 1, 4, 6));
        let mut seen = Vec::new();
        let s = r.step(&region, &mut |e| {
            seen.push(e.txn.0);
            Apply::Done
        });
        assert_eq!(seen, [1, 3]);
        assert_eq!(s, ReplayStep { applied: 2, flushed: 3, head: 1, blocked_at: Some(1), ..ReplayStep::default() });
        // Nothing new: nothing applied twice.
        let s = r.step(&region, &mut |_| panic!("already applied"));
        assert_eq!(s, ReplayStep { applied: 0, flushed: 0, head: 1, blocked_at: Some(1), ..ReplayStep::default() });
        set(&verbs, &layout, b, EntryStatus::Committed, Cts(99));
        let s = r.step(&region, &mut |e| {
            assert_eq!((e.txn.0, e.cts), (2, Cts(99)));
            Apply::Done
        });
        assert_eq!(s, ReplayStep { applied: 1, flushed: 1, head: 7, blocked_at: None, ..ReplayStep::default() });
        assert!(ring_is_zero(&layout, &region));
    }

    /// docs/design.md §2, "a catch-up outlives its source": an entry owing a catch-up is applied
    /// and flushed once, keeps its mask, and holds the head (later entries are still applied)
    /// until the mask is cleared; then the head passes it.
    #[test]
    fn an_owed_catch_up_holds_the_head_until_cleared() {
        let (verbs, layout, region) = setup();
        let mut w = RingWriter::new(layout, N);
        let mut r = Replayer::new(layout, N);
        let a = append(&verbs, &mut w, &layout, &entry(1, EntryStatus::Logged, 10));
        let b = append(&verbs, &mut w, &layout, &entry(2, EntryStatus::Committed, 0));
        let mut batch = DoorbellBatch::new();
        crate::ring::push_set_status_owed(&mut batch, &layout, a, EntryStatus::Committed, Cts(77), 0b10);
        verbs.post_batch(N, &mut batch).unwrap();
        let mut seen = Vec::new();
        let s = r.step(&region, &mut |e| {
            seen.push(e.txn.0);
            Apply::Done
        });
        assert_eq!(seen, [1, 2], "both applied");
        assert_eq!(s, ReplayStep { applied: 2, flushed: 2, head: a, blocked_at: Some(a), ..ReplayStep::default() });
        let h = crate::ring::read_header(&verbs, N, &layout, a).unwrap();
        assert_eq!((h.status, h.cts, h.owed), (EntryStatus::Flushed, Cts(77), 0b10), "flushed, mask kept");
        let s = r.step(&region, &mut |_| panic!("applied once"));
        assert_eq!(s, ReplayStep { applied: 0, flushed: 0, head: a, blocked_at: Some(a), ..ReplayStep::default() });
        // A fresh replayer (a restarted process) holds the head there too.
        let s = Replayer::new(layout, N).step(&region, &mut |_| panic!("flushed before the restart"));
        assert_eq!(s.head, a);
        let word = region.word(status_offset(&layout, a).0);
        let old = word.load(Ordering::Acquire);
        word.store(old & !(0xff << crate::ring::OWED_SHIFT), Ordering::Release);
        let s = r.step(&region, &mut |_| panic!("nothing left to apply"));
        assert_eq!(s, ReplayStep { applied: 0, flushed: 0, head: b + 1, blocked_at: None, ..ReplayStep::default() });
        assert!(ring_is_zero(&layout, &region));
    }

    #[test]
    fn retry_keeps_the_entry_committed_and_the_head_still() {
        let (verbs, layout, region) = setup();
        let mut w = RingWriter::new(layout, N);
        let mut r = Replayer::new(layout, N);
        append(&verbs, &mut w, &layout, &entry(1, EntryStatus::Committed, 10));
        let s = r.step(&region, &mut |_| Apply::Retry);
        assert_eq!(s, ReplayStep { applied: 0, flushed: 0, head: 0, blocked_at: Some(0), ..ReplayStep::default() });
        let e = read_entry(&verbs, N, &layout, 0).unwrap();
        assert_eq!(e.status, EntryStatus::Committed);
        let s = r.step(&region, &mut |_| Apply::Done);
        assert_eq!(s, ReplayStep { applied: 1, flushed: 1, head: 2, blocked_at: None, ..ReplayStep::default() });
    }

    #[test]
    fn an_unwritten_reservation_stops_head_and_scan_until_filled() {
        let (verbs, layout, region) = setup();
        let mut w = RingWriter::new(layout, N);
        let mut r = Replayer::new(layout, N);
        // A writer that dies after its fetch-and-add: slots 0..2 reserved, never written.
        let hole = w.reserve(&verbs, 2, Duration::ZERO, &still()).unwrap();
        append(&verbs, &mut w, &layout, &entry(7, EntryStatus::Committed, 0));
        let s = r.step(&region, &mut |_| panic!("the scan cannot pass the hole"));
        assert_eq!(s, ReplayStep { applied: 0, flushed: 0, head: 0, blocked_at: Some(hole), ..ReplayStep::default() });
        // Only the first slot of a two-slot entry written: still torn.
        let full = encode(&entry(8, EntryStatus::Committed, 40), hole);
        assert_eq!(full.len(), 128);
        verbs.write(N, Offset(layout.ring_off + 64), &full[..64]).unwrap();
        let s = r.step(&region, &mut |_| panic!("a torn entry is never applied"));
        assert_eq!(s.blocked_at, Some(hole));
        // Recovery (later) or the writer fills it.
        w.abandon(&verbs, hole, 2).unwrap();
        let s = r.step(&region, &mut |e| {
            assert_eq!(e.txn.0, 7);
            Apply::Done
        });
        assert_eq!(s, ReplayStep { applied: 1, flushed: 2, head: 3, blocked_at: None, ..ReplayStep::default() });
        assert!(ring_is_zero(&layout, &region));
    }
}
