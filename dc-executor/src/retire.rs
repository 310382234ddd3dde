//! Records reclaimed: a record that never held a committed write and that nobody holds is
//! retired — taken out of the ordered and hash indexes and put on its node's free list
//! (`free_list.rs`) — so an insert that aborts gives its record back (docs/design.md,
//! "Records reclaimed").
//!
//! # Which records, and why that is safe
//!
//! A record is *unused* when a transaction's phase 1 created it for its writes (the
//! [`crate::record::FLAG_INSERTED`] flag: never a loaded record, whose zero bytes are data),
//! its lock word is zero, and every cell version, every update counter and every cell is
//! zero: no transaction holds it, and no commit ever wrote it (a committed write leaves a
//! version above zero and bumps a counter). Such a record is one an insert created whose
//! transaction aborted, or one whose every writer aborted. The executor that releases an aborted sub-transaction's locks tries to retire each
//! record it wrote whose versions it saw at zero ([`DcHandle::retire_if_unused`]):
//!
//! 1. READ the record: it must be unused.
//! 2. Compare-and-swap its lock word from 0 to [`RETIRED`]. From then on every lock attempt
//!    fails (No-Wait: an abort), every replay of a change to it and every catch-up waits, and
//!    no writer can give it a version.
//! 3. Under the insert-lock stripe of its key, if the hash index still maps the key to this
//!    record and it is still retired: READ it again. A version, counter or row that appeared
//!    since the first READ (a writer that locked, wrote and released in between; a replica
//!    entry that pinned it, below) puts the lock word back to 0, and the record stays.
//! 4. Still unused: take the key out of its tree (no range reader holds its gap: the word was
//!    zero) and out of the hash index, then push the record on the free list. The stripe
//!    makes steps 3 and 4 one decision, taken once: anyone who meets a retired record that is
//!    still indexed (a retirer that died after step 2) settles it the same way
//!    ([`DcHandle::help_retirement`]), and a creator of the key under the same stripe finds
//!    the retired record, not a hole.
//!
//! A record is reused only after step 4, so whoever still holds its offset from a lookup made
//! before — a phase 1 between its index READ and its lock, a range reader between its scan and
//! its locks — either fails to lock it ([`RETIRED`], or the new owner's lock) or locks a record
//! whose header names another key, which the executor checks after every lock and treats as a
//! conflict.
//!
//! Writers that reference a record without locking it — a replica entry accepted into a ring,
//! applied by replay once committed — *pin* it first ([`DcHandle::pin_record`]): they add one
//! to an update counter, then READ the header, and use the record only if it still holds their
//! key and is not retired. A retirer READs the counters after its compare-and-swap and a pinner
//! READs the lock word after its add, so at least one of them sees the other (both are atomic
//! verbs on one MemStore, performed in order): a pinned record is never retired, and a pinner
//! that meets a retired record looks the key up again.

use crate::dc::DcHandle;
use crate::error::Result;
use crate::free_list::{self, RETIRED};
use crate::record::RecordLayout;
use crate::record::{counter_increment, lock_word};
use redt_proto::{NodeId, Offset, TableId};

/// Times a retirer finds only the gap group held and tries again.
const GAP_WAITS: u32 = 64;

/// The lock word of `image` if it is `key`'s record, created by an insert and never written
/// (every cell, version and update counter zero): unused when that word is zero too.
fn never_written(rl: &RecordLayout, image: &[u8], key: u64) -> Option<u64> {
    let v = rl.decode(image).filter(|v| v.key == key && rl.is_inserted(image))?;
    let clean = v.is_absent()
        && (0..rl.cells()).all(|c| v.version(c).0 == 0)
        && (0..crate::lock::GROUPS).all(|g| v.group_counter(g) == 0);
    clean.then_some(v.lock)
}

/// How much of a node's record heap is in use (`redt status`, `redt_record_heap_*` metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeapUsage {
    /// Bytes of the record heap: the MemStore past its fixed areas.
    pub size_bytes: u64,
    /// Bytes taken from it: the bump pointer's advance less the free bytes (records, B+-tree
    /// nodes, the directories).
    pub used_bytes: u64,
    /// Bytes of retired records on the free lists, waiting for the next insert of their size.
    pub free_bytes: u64,
}

impl DcHandle {
    /// The record heap's use on `node`: two 8-byte READs (the bump pointer, the free bytes).
    ///
    /// # Errors
    /// Verbs errors.
    pub fn record_heap_usage(&self, node: NodeId) -> Result<RecordHeapUsage> {
        let verbs = self.verbs.as_ref();
        let mut w = [0u8; 8];
        verbs.read(node, self.layout.heap_next_offset(), &mut w)?;
        let next = u64::from_le_bytes(w).min(self.layout.size);
        let free_bytes = free_list::free_bytes(verbs, node, &self.layout)?;
        let taken = next.saturating_sub(self.layout.heap_off);
        Ok(RecordHeapUsage {
            size_bytes: self.layout.size - self.layout.heap_off,
            used_bytes: taken.saturating_sub(free_bytes),
            free_bytes,
        })
    }

    /// The records of `node`'s hash index, and among them those an insert created that are
    /// unused now (see the module docs): what retirement missed, once nothing is in flight. A
    /// full scan of the index and one READ per record — for checks, not the transaction path.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn unused_records(&self, node: NodeId) -> Result<(u64, u64)> {
        let verbs = self.verbs.as_ref();
        let (mut indexed, mut unused_now) = (0, 0);
        for (table, key, at) in self.index.entries(verbs, node)? {
            indexed += 1;
            let Ok(rl) = self.catalog.layout(table) else { continue };
            let mut image = vec![0u8; rl.record_bytes as usize];
            verbs.read(node, at, &mut image)?;
            if never_written(rl, &image, key) == Some(0) {
                unused_now += 1;
            }
        }
        Ok((indexed, unused_now))
    }

    /// Allocates a `bytes`-byte record on `node`: a retired record of that size from the
    /// free list if there is one, else fresh heap (`free_list.rs`). The caller WRITEs the
    /// whole record before it publishes it.
    ///
    /// # Errors
    /// [`crate::Error::HeapFull`]; verbs errors.
    pub fn alloc_record(&self, node: NodeId, bytes: u64) -> Result<Offset> {
        match free_list::pop(self.verbs.as_ref(), node, &self.layout, bytes)? {
            Some(at) => Ok(at),
            None => self.layout.alloc(self.verbs.as_ref(), node, bytes),
        }
    }

    /// Retires the record of `(table, key)` at `record` on `node` if it is unused — never
    /// written by a commit, held by nobody (see the module docs) — and returns whether it
    /// was freed. For the releaser of an aborted sub-transaction, after its locks are released.
    ///
    /// # Errors
    /// Verbs errors; an unknown table.
    pub fn retire_if_unused(&self, node: NodeId, table: TableId, key: u64, record: Offset) -> Result<bool> {
        let rl = self.catalog.layout(table)?;
        let verbs = self.verbs.as_ref();
        // A gap intent may name a tree's end word rather than a record: nothing to retire.
        let inside = record.0 % crate::memstore::LINE == 0
            && record.0 >= self.layout.heap_off
            && record.0.checked_add(rl.record_bytes).is_some_and(|end| end <= self.layout.size);
        if !inside {
            return Ok(false);
        }
        let mut image = vec![0u8; rl.record_bytes as usize];
        verbs.read(node, record, &mut image)?;
        // Only the gap group held: an inserter of a neighbouring key publishing it, or a
        // delete's unlink, holds it for a few verbs (`ordered.rs`); a range reader that holds
        // it longer tries again when it lets go.
        let gap = crate::lock::fields(1 << crate::ordered::GAP_GROUP);
        let mut lock = 0;
        for _ in 0..GAP_WAITS {
            if never_written(rl, &image, key).is_none() {
                return Ok(false);
            }
            lock = verbs.compare_and_swap(node, lock_word(record), 0, RETIRED)?;
            if lock == 0 || lock & !gap != 0 {
                break;
            }
            std::thread::yield_now();
            verbs.read(node, record, &mut image)?;
        }
        if lock != 0 {
            return Ok(false);
        }
        self.help_retirement(node, table, key, record)
    }

    /// Steps 3 and 4 of a retirement, under the key's insert-lock stripe so that exactly one
    /// settler decides: if the hash index still maps the key to `record` and the record is
    /// still retired, READ it; still unused, the key leaves its tree and the hash index and
    /// the record goes on the free list; pinned or written meanwhile, its lock word goes back
    /// to 0. The retirer's own last step, and what anyone does who finds a record
    /// [`RETIRED`] (its retirer may have died before it settled it). Returns whether this
    /// call freed it.
    ///
    /// # Errors
    /// Verbs errors; an unknown table.
    pub fn help_retirement(&self, node: NodeId, table: TableId, key: u64, record: Offset) -> Result<bool> {
        let rl = self.catalog.layout(table)?;
        let verbs = self.verbs.as_ref();
        let stripe = self.layout.insert_lock(self.index.home_bucket(table, key));
        let held = self.take_insert_lease(node, stripe)?;
        let freed = (|| {
            if self.index.lookup(verbs, node, table, key)? != Some(record) {
                return Ok(false);
            }
            let mut image = vec![0u8; rl.record_bytes as usize];
            verbs.read(node, record, &mut image)?;
            if rl.decode(&image).is_none_or(|v| v.key != key || v.lock != RETIRED) {
                return Ok(false);
            }
            if never_written(rl, &image, key).is_none() {
                verbs.compare_and_swap(node, lock_word(record), RETIRED, 0)?;
                return Ok(false);
            }
            self.ordered.remove_retired(verbs, node, table, key, record)?;
            self.index.remove(verbs, node, table, key)
        })();
        verbs.compare_and_swap(node, stripe, held, 0)?;
        if freed? {
            free_list::push(verbs, node, &self.layout, record, rl.record_bytes)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Pins the record of `(table, key)` at `record` on `node` for a writer that references it
    /// without locking it (a replica entry): adds one to its first update counter, then READs
    /// its header. Returns false when the record is retired or holds another key (it was
    /// freed and reused): look the key up again. A pinned record is never retired.
    ///
    /// # Errors
    /// Verbs errors; an unknown table.
    pub fn pin_record(&self, node: NodeId, table: TableId, key: u64, record: Offset) -> Result<bool> {
        let rl = self.catalog.layout(table)?;
        let verbs = self.verbs.as_ref();
        let (word, add, boundary) = counter_increment(record, 0);
        verbs.masked_fetch_and_add(node, word, add, boundary)?;
        let mut image = vec![0u8; rl.record_bytes as usize];
        verbs.read(node, record, &mut image)?;
        // The add must be visible: a reuse that rewrote the record after it would have
        // cleared it, and the record would be unpinned.
        Ok(rl.decode(&image).is_some_and(|v| v.key == key && v.lock != RETIRED && v.group_counter(0) != 0))
    }
}
