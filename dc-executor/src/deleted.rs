//! Deleted records freed: the record of a key a committed delete emptied goes back to the heap
//! once no older write of the key can still reach the replica (docs/design.md, "Records
//! reclaimed").
//!
//! # Why a deleted record is kept at all, and for how long
//!
//! A delete writes zero bytes to every cell at its commit timestamp `d`, through the Thomas
//! write rule like any write, and the cells keep the versions at `d`. Those versions are what
//! turns away an older write of the key that reaches this replica after the delete: a
//! catch-up shipped from another replica, or a secondary's accepted entry (both *replica
//! changes*: they name the key, not a lock this replica's executor took). With the record
//! gone, such a write would create the key again.
//!
//! # Deletion horizons and floors
//!
//! Each node keeps [`HORIZON_SLOTS`] *deletion horizons*, one per slot of keys (a key's slot
//! is its hash's; the block is named by [`crate::Layout::deletion_horizons_offset`] and made
//! on the first free): each a commit timestamp at or above the newest version of every
//! deleted record of its slot the node freed. Every record created on the node carries its
//! slot's horizon at its creation as its *floor* ([`crate::record::FLOOR_WORD`]); creations
//! READ it under the key's insert-lock stripe, after the lookup that found the key missing. A
//! replica change committed at or below its record's floor is superseded: replay and the
//! catch-up applied straight to the records leave it out. So an older write of a freed key
//! finds either no record, and the one it creates has a floor at or above `d`, or a record
//! created after the free, whose floor is at or above `d` too: it is turned away as the kept
//! versions would have turned it.
//!
//! A replica change that is not older than its key's delete but is older than its slot's
//! horizon (raised by another key of the slot) is turned away too: the price of 8 KiB per
//! node instead of a word per key. A record is freed only once `d` is at least a *grace* older
//! than the freeing node's clock (twice the catch-up give-up, 60 s by default), so a horizon
//! is always at least a grace old, and only a replica change that reaches the node more than
//! a grace after it was shipped can be turned away (one shipped late is the next section's): a
//! catch-up that outlived every shipper's patience (30 s), which leaves its replica behind for
//! the key until the key's next write reaches it, as a catch-up that gave up does
//! (docs/design.md §2).
//!
//! # A catch-up made late
//!
//! The grace bounds how long a catch-up takes to arrive once it is made, not how long after
//! its commit timestamp it is made: a source DC ships when its phase 2 arrives, which a
//! coordinator retries for minutes, or when a recoverer decides, which may be long after the
//! commit timestamp was chosen. Such a catch-up would meet a horizon another key of its slot
//! raised meanwhile and leave its replica behind for the key. So a record is freed only below
//! every replica's *catch-up floor* ([`DcHandle::catch_up_floor`]): the oldest start, less the
//! clock-skew bound, of the ring entries that may still make a catch-up — undecided ones, and
//! decided ones whose shipments are not all acknowledged. Every replica of the key's
//! partition holds every entry of a transaction that wrote the partition that a source may
//! still ship from, so while any of them may make a catch-up older than the delete, nobody
//! frees the key.
//!
//! A learner being rebuilt gets no freed key from its voter's snapshot; each chunk carries
//! the voter's highest horizon, READ before its buckets, and the learner raises every slot to
//! it before it applies the chunk (`ExecutorCore::apply_snapshot`).
//!
//! # Retiring one
//!
//! [`DcHandle::retire_deleted`] takes the candidates of one node (the executor that applied
//! a delete's phase 2 remembers its records, `Executor::retire_deleted_due`):
//!
//! 1. READ the record: it must still hold its key, hold no row, be unlocked, and its newest
//!    version must be at most the caller's bound (the grace has passed) and no newer than the
//!    candidate's delete (a key deleted again is freed by its newest delete's candidate, whose
//!    checks were made at that delete's commit timestamp).
//! 2. Raise its slot's horizon to that version (a compare-and-swap loop, never lowered).
//! 3. Compare-and-swap the lock word from 0 to [`RETIRED`]: every lock attempt fails from
//!    then on, every apply waits.
//! 4. READ the node's ring from head to tail: an unflushed entry that names the record (a
//!    replay that has not applied an older write, a secondary's accepted entry) puts the
//!    lock word back. A writer of a replica entry READs the record again after it wrote its
//!    entry and starts over if it finds the record retired or reused
//!    (`Executor::accept_replica`): either this READ sees its entry or its READ sees the
//!    retirement.
//! 5. Under the insert-lock stripe, if the hash index still maps the key to the record: READ
//!    it again. Anything but the lock word changed since step 1 (a pin, a write) puts the
//!    lock word back; otherwise the key leaves the ordered and hash indexes and the record
//!    goes on the free list (`free_list.rs`), as an aborted insert's does (`retire.rs`).
//!
//! Whoever meets a retired deleted record still indexed (a retirer that died between steps 3
//! and 5) puts its lock word back ([`DcHandle::help_retirement`]): it is retired again later
//! or stays, never freed by a helper.

use crate::dc::DcHandle;
use crate::error::Result;
use crate::free_list::{self, RETIRED};
use crate::record::lock_word;
use crate::ring;
use redt_proto::{Cts, NodeId, Offset, TableId};
use std::collections::BTreeSet;

/// A record a committed delete left without a row: a candidate to free once its grace passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeletedRecord {
    /// The node holding it.
    pub node: NodeId,
    /// Its table.
    pub table: TableId,
    /// Its key.
    pub key: u64,
    /// Its offset on `node`.
    pub record: Offset,
    /// The delete's commit timestamp.
    pub cts: Cts,
}

/// What [`DcHandle::retire_deleted`] did with one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletedFate {
    /// Freed: out of both indexes, on the free list.
    Freed,
    /// Not a deleted record any more, or not yet old enough: a row came back, a newer write
    /// landed (whose own delete, if any, is a candidate of its own), the key moved. Drop it.
    Kept,
    /// In use now (locked, pinned, named by an unflushed ring entry, retired by someone
    /// else), or its delete not applied here yet (older than the delete, holding a row):
    /// try again later.
    Busy,
}

impl DcHandle {
    /// The block of `node`'s deletion horizons, made now if `create` and none exists yet.
    fn horizons(&self, node: NodeId, create: bool) -> Result<Option<Offset>> {
        let word = self.layout.deletion_horizons_offset();
        self.layout.linked_block(self.verbs.as_ref(), node, word, HORIZON_SLOTS * 8, &[], create)
    }

    /// The offset of the horizon of `(table, key)`'s slot in the block at `block`.
    fn horizon_slot(&self, block: Offset, table: TableId, key: u64) -> Offset {
        Offset(block.0 + 8 * (self.index.home_bucket(table, key) % HORIZON_SLOTS))
    }

    /// The deletion horizon of `(table, key)` on `node` (see the module docs): two 8-byte
    /// READs, one before the first record of the node was freed.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn deletion_horizon(&self, node: NodeId, table: TableId, key: u64) -> Result<Cts> {
        let Some(block) = self.horizons(node, false)? else { return Ok(Cts(0)) };
        let mut w = [0u8; 8];
        self.verbs.read(node, self.horizon_slot(block, table, key), &mut w)?;
        Ok(Cts(u64::from_le_bytes(w) & Cts::MASK))
    }

    /// The highest deletion horizon of `node`, over every slot: what a snapshot copy carries
    /// to a learner. One READ of the block.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn max_deletion_horizon(&self, node: NodeId) -> Result<Cts> {
        let Some(block) = self.horizons(node, false)? else { return Ok(Cts(0)) };
        let mut words = vec![0u8; (HORIZON_SLOTS * 8) as usize];
        self.verbs.read(node, block, &mut words)?;
        let max = words.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).max();
        Ok(Cts(max.unwrap_or(0) & Cts::MASK))
    }

    /// Raises the deletion horizon of `(table, key)` on `node` to at least `to` (never lowers
    /// it).
    ///
    /// # Errors
    /// Verbs errors; [`crate::Error::HeapFull`] when the block cannot be made.
    pub fn raise_deletion_horizon(&self, node: NodeId, table: TableId, key: u64, to: Cts) -> Result<()> {
        let Some(block) = self.horizons(node, to.0 != 0)? else { return Ok(()) };
        self.raise_slot(node, self.horizon_slot(block, table, key), to)
    }

    /// Raises every deletion horizon of `node` to at least `to`: a learner, before it applies
    /// a voter's records, takes the voter's highest (its keys' slots are not known).
    ///
    /// # Errors
    /// Verbs errors; [`crate::Error::HeapFull`] when the block cannot be made.
    pub fn raise_every_deletion_horizon(&self, node: NodeId, to: Cts) -> Result<()> {
        let Some(block) = self.horizons(node, to.0 != 0)? else { return Ok(()) };
        let mut words = vec![0u8; (HORIZON_SLOTS * 8) as usize];
        self.verbs.read(node, block, &mut words)?;
        for (i, w) in words.chunks_exact(8).enumerate() {
            if u64::from_le_bytes(w.try_into().expect("8 bytes")) < to.0 {
                self.raise_slot(node, Offset(block.0 + 8 * i as u64), to)?;
            }
        }
        Ok(())
    }

    /// Whether `node` holds the delete of `(table, key)` committed at `cts`, as another
    /// replica asks before it frees its own record of the key (module docs, "Every replica
    /// holds the delete"): the key has no record and its slot's horizon is at or above `cts`
    /// (freed here), or its record holds no row, no lock, and a version at or above `cts`.
    /// False for a row (stale, or written again since), a record in use, or a key this node
    /// never saw deleted.
    ///
    /// # Errors
    /// Verbs errors; an unknown table.
    pub fn holds_delete(&self, node: NodeId, table: TableId, key: u64, cts: Cts) -> Result<bool> {
        let rl = self.catalog.layout(table)?;
        let Some(record) = self.index.lookup(self.verbs.as_ref(), node, table, key)? else {
            return Ok(self.deletion_horizon(node, table, key)? >= cts);
        };
        let mut image = vec![0u8; rl.record_bytes as usize];
        self.verbs.read(node, record, &mut image)?;
        Ok(rl.decode(&image).is_some_and(|v| {
            v.key == key && v.is_absent() && (v.lock == 0 || v.lock == RETIRED) && v.newest_cts() >= cts
        }))
    }

    /// The catch-up floor of `node` (module docs, "A catch-up made late"): the oldest start
    /// timestamp among the entries of its ring that may still make a catch-up, less
    /// `clock_skew_bound_ms`; `None` when no entry may. Those entries are the undecided ones
    /// (`Intent`, `Logged`: the phase 2 or the recovery still to come makes a source ship) and
    /// those whose catch-up mask says a shipment is not yet acknowledged. Every commit
    /// timestamp such an entry's catch-up can carry is above the floor: it is above an
    /// executor's clock reading at its vote, taken after the transaction's start on a clock
    /// at most the skew bound behind the coordinator's. One pass over the ring (a 64-byte
    /// READ per entry, the wanted ones read whole).
    ///
    /// # Errors
    /// Verbs errors.
    pub fn catch_up_floor(&self, node: NodeId, clock_skew_bound_ms: u64) -> Result<Option<Cts>> {
        let scan = ring::ring_scan(self.verbs.as_ref(), node, &self.layout)?;
        let starts = scan.unfinished.iter().map(|(_, e)| e.start).chain(scan.owed.iter().map(|o| o.entry.start));
        let slack = clock_skew_bound_ms.saturating_mul(1 << crate::LOGICAL_BITS);
        Ok(starts.min().map(|s| Cts(s.0.saturating_sub(slack))))
    }

    fn raise_slot(&self, node: NodeId, at: Offset, to: Cts) -> Result<()> {
        let mut w = [0u8; 8];
        self.verbs.read(node, at, &mut w)?;
        let mut cur = u64::from_le_bytes(w);
        while cur < to.0 {
            let old = self.verbs.compare_and_swap(node, at, cur, to.0)?;
            if old == cur {
                break;
            }
            cur = old;
        }
        Ok(())
    }

    /// Frees those of `candidates` (records of `node`) that still hold no row, are held by
    /// nobody and whose newest version is at most `not_after` (see the module docs). Returns
    /// each candidate's fate, in order. `raise_horizon` is false only as a mutant (the
    /// horizon stays, so an older write brings a freed key back).
    ///
    /// # Errors
    /// Verbs errors; an unknown table.
    pub fn retire_deleted(
        &self,
        node: NodeId,
        candidates: &[DeletedRecord],
        not_after: Cts,
        raise_horizon: bool,
    ) -> Result<Vec<DeletedFate>> {
        let verbs = self.verbs.as_ref();
        let mut fates = vec![DeletedFate::Kept; candidates.len()];
        // Steps 1 to 3: the images READ before each compare-and-swap, by candidate.
        let mut retired: Vec<(usize, Vec<u8>)> = Vec::new();
        // On an error nothing is left half done: the records marked so far are put back.
        let put_back = |retired: &[(usize, Vec<u8>)]| -> Result<()> {
            for &(i, _) in retired {
                verbs.compare_and_swap(node, lock_word(candidates[i].record), RETIRED, 0)?;
            }
            Ok(())
        };
        if let Err(e) = self.mark_deleted(node, candidates, not_after, raise_horizon, &mut fates, &mut retired) {
            put_back(&retired)?;
            return Err(e);
        }
        if retired.is_empty() {
            return Ok(fates);
        }
        // Step 4: one pass over the ring for all of them.
        let offsets: BTreeSet<Offset> = retired.iter().map(|&(i, _)| candidates[i].record).collect();
        let pending = match ring::pending_records(verbs, node, &self.layout, &offsets) {
            Ok(p) => p,
            Err(e) => {
                put_back(&retired)?;
                return Err(e);
            }
        };
        // Step 5.
        for (i, before) in retired {
            let c = &candidates[i];
            fates[i] = if pending.contains(&c.record) {
                verbs.compare_and_swap(node, lock_word(c.record), RETIRED, 0)?;
                DeletedFate::Busy
            } else {
                self.settle_deleted(node, c, &before)?
            };
        }
        Ok(fates)
    }

    /// Steps 1 to 3 of [`DcHandle::retire_deleted`]: each candidate still deleted and due is
    /// marked retired, its image before the mark kept in `retired`; `fates` says which are busy.
    fn mark_deleted(
        &self,
        node: NodeId,
        candidates: &[DeletedRecord],
        not_after: Cts,
        raise_horizon: bool,
        fates: &mut [DeletedFate],
        retired: &mut Vec<(usize, Vec<u8>)>,
    ) -> Result<()> {
        let verbs = self.verbs.as_ref();
        for (i, c) in candidates.iter().enumerate() {
            let rl = self.catalog.layout(c.table)?;
            let inside = c.record.0 % crate::memstore::LINE == 0
                && c.record.0 >= self.layout.heap_off
                && c.record.0.checked_add(rl.record_bytes).is_some_and(|end| end <= self.layout.size);
            if c.node != node || !inside {
                continue;
            }
            let mut image = vec![0u8; rl.record_bytes as usize];
            verbs.read(node, c.record, &mut image)?;
            let Some(v) = rl.decode(&image).filter(|v| v.key == c.key) else { continue };
            let newest = v.newest_cts();
            if v.is_absent() && newest > c.cts {
                // Deleted again since: the newer delete's own candidate frees it, checked at
                // that delete's commit timestamp.
                continue;
            }
            if !v.is_absent() {
                // A delete this node has not applied yet (a catch-up's, waiting for replay):
                // tried again later. A newer write brought the row back: dropped.
                if newest < c.cts {
                    fates[i] = DeletedFate::Busy;
                }
                continue;
            }
            if newest > not_after {
                continue;
            }
            if v.lock != 0 {
                fates[i] = DeletedFate::Busy;
                continue;
            }
            if raise_horizon {
                self.raise_deletion_horizon(node, c.table, c.key, newest)?;
            }
            if verbs.compare_and_swap(node, lock_word(c.record), 0, RETIRED)? != 0 {
                fates[i] = DeletedFate::Busy;
                continue;
            }
            retired.push((i, image));
        }
        Ok(())
    }

    /// Step 5 of [`DcHandle::retire_deleted`] for one retired candidate whose image was
    /// `before` (READ before its compare-and-swap).
    fn settle_deleted(&self, node: NodeId, c: &DeletedRecord, before: &[u8]) -> Result<DeletedFate> {
        let rl = self.catalog.layout(c.table)?;
        let verbs = self.verbs.as_ref();
        let stripe = self.layout.insert_lock(self.index.home_bucket(c.table, c.key));
        let held = self.take_insert_lease(node, stripe)?;
        let lock = crate::record::LOCK_WORD as usize;
        let freed = (|| {
            if self.index.lookup(verbs, node, c.table, c.key)? != Some(c.record) {
                return Ok(false);
            }
            let mut now = vec![0u8; rl.record_bytes as usize];
            verbs.read(node, c.record, &mut now)?;
            let still_retired = rl.decode(&now).is_some_and(|v| v.key == c.key && v.lock == RETIRED);
            let unchanged = now[..lock] == before[..lock] && now[lock + 8..] == before[lock + 8..];
            if !still_retired {
                return Ok(false);
            }
            if !unchanged {
                verbs.compare_and_swap(node, lock_word(c.record), RETIRED, 0)?;
                return Ok(false);
            }
            self.ordered.remove_retired(verbs, node, c.table, c.key, c.record)?;
            self.index.remove(verbs, node, c.table, c.key)
        })();
        verbs.compare_and_swap(node, stripe, held, 0)?;
        if freed? {
            free_list::push(verbs, node, &self.layout, c.record, rl.record_bytes)?;
            return Ok(DeletedFate::Freed);
        }
        Ok(DeletedFate::Busy)
    }
}

/// Deletion horizons per node: one per slot, a key's slot chosen by its hash (8 KiB).
pub const HORIZON_SLOTS: u64 = 1024;

/// Candidates remembered at most ([`DeletedQueue`]): past it the oldest is forgotten (its
/// record stays, as before it was remembered).
pub const MAX_DELETED_CANDIDATES: usize = 1 << 18;

/// Candidates one [`DeletedQueue::due`] hands out at most: one ring READ pass each per node.
const BATCH: usize = 64;

/// How long a busy candidate waits before it is tried again, in ms.
const RETRY_AFTER_MS: u64 = 1_000;

/// Tries a candidate gets before it is forgotten (its record stays).
const ATTEMPTS: u8 = 8;

/// The records an executor saw a committed delete empty, waiting for their grace to pass
/// (see the module docs): in commit order, then the busy ones waiting for another try.
#[derive(Debug)]
pub struct DeletedQueue {
    fresh: std::collections::VecDeque<DeletedRecord>,
    retry: std::collections::VecDeque<(u64, u8, DeletedRecord)>,
    grace_ms: u64,
    /// Records freed so far.
    pub freed: u64,
    /// Candidates forgotten (over [`MAX_DELETED_CANDIDATES`], or busy `ATTEMPTS` times).
    pub forgotten: u64,
}

impl DeletedQueue {
    /// An empty queue whose candidates are due `grace` after their delete's commit timestamp.
    pub fn new(grace: std::time::Duration) -> Self {
        DeletedQueue {
            fresh: Default::default(),
            retry: Default::default(),
            grace_ms: grace.as_millis() as u64,
            freed: 0,
            forgotten: 0,
        }
    }

    /// Sets the grace.
    pub fn set_grace(&mut self, grace: std::time::Duration) {
        self.grace_ms = grace.as_millis() as u64;
    }

    /// Candidates waiting.
    pub fn len(&self) -> usize {
        self.fresh.len() + self.retry.len()
    }

    /// Whether no candidate waits.
    pub fn is_empty(&self) -> bool {
        self.fresh.is_empty() && self.retry.is_empty()
    }

    /// Remembers `r`.
    pub fn push(&mut self, r: DeletedRecord) {
        if self.len() >= MAX_DELETED_CANDIDATES {
            self.fresh.pop_front();
            self.forgotten += 1;
        }
        self.fresh.push_back(r);
    }

    /// The newest version a candidate may have to be freed at physical time `now_ms`.
    pub fn bound(&self, now_ms: u64) -> Cts {
        Cts((now_ms.saturating_sub(self.grace_ms) << crate::LOGICAL_BITS) & Cts::MASK)
    }

    /// Up to one batch of candidates due at `now_ms`, each with the tries it had.
    pub fn due(&mut self, now_ms: u64) -> Vec<(u8, DeletedRecord)> {
        let bound = self.bound(now_ms);
        let mut out = Vec::new();
        while out.len() < BATCH && self.retry.front().is_some_and(|&(at, _, _)| at <= now_ms) {
            if let Some((_, tries, r)) = self.retry.pop_front() {
                out.push((tries, r));
            }
        }
        while out.len() < BATCH && self.fresh.front().is_some_and(|r| r.cts <= bound) {
            if let Some(r) = self.fresh.pop_front() {
                out.push((0, r));
            }
        }
        out
    }

    /// Takes back a candidate whose delete is above a catch-up floor at `now_ms`
    /// ([`DcHandle::catch_up_floor`]): tried again a second later, the try not counted (the
    /// floor rises once the entry holding it is decided and its catch-up acknowledged).
    pub fn hold(&mut self, now_ms: u64, tries: u8, r: DeletedRecord) {
        self.retry.push_back((now_ms + RETRY_AFTER_MS, tries, r));
    }

    /// Takes back a candidate found busy at `now_ms` after `tries` tries.
    pub fn busy(&mut self, now_ms: u64, tries: u8, r: DeletedRecord) {
        if tries + 1 >= ATTEMPTS {
            self.forgotten += 1;
        } else {
            self.retry.push_back((now_ms + RETRY_AFTER_MS, tries + 1, r));
        }
    }
}
