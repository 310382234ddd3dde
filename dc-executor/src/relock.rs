//! Settling a node's lock words when its process starts again on the MemStore a killed
//! process left (docs/design.md §3, "Locks"; [`crate::restore`] does the same after a power
//! loss, for every lock word).
//!
//! A phase 1 WRITEs its `Intent` entry and then takes the locks the entry lists, in the same
//! doorbell batch, so every lock held names its transaction. Which of the listed locks it
//! holds, though, only its executor knows until the entry turns `Logged` (it holds them all)
//! or `Aborted` (it gave back those it took): a process killed between the WRITE and a lock's
//! compare-and-swap, or between a refused lock and the release of the others, leaves an
//! `Intent` entry listing locks it never took. Recovery decides that transaction (an abort:
//! an `Intent` entry carries no commit vote) and finishing the entry gives back every lock it
//! lists, the ones never taken too: a free lock word went below zero
//! (`0xFFFF_FFFF_FFFF_FFF8`, an exclusive bit given back by nobody), and a lock another
//! transaction took since was taken away from it.
//!
//! So a node whose process was killed settles, before it serves, every lock word an entry
//! of its ring names, from the ring alone: each such word is set to the sum of what its
//! `Logged` entries hold (every lock of a `Logged` entry is held: the entry is written once
//! they are all taken), and every `Intent` entry's lock intents are rewritten to add nothing,
//! so its decision gives nothing back. What the kill left held by an `Intent` entry is let go
//! here instead, and so is a lock whose finished entry's release the kill cut short (its
//! status was written, its fetch-and-adds were not). Words of a retired record
//! ([`crate::free_list::RETIRED`]) are left alone. It is idempotent: a process killed while
//! settling settles again at its next start.
//!
//! Every lock a transaction holds on a node's records, absent-key words and gap words is named
//! by an entry of that node's own ring (the other holders, a record's creation, replay, a
//! catch-up or a snapshot copy, hold theirs for one step of a live process). So the ring tells
//! the whole truth only while nobody else takes or gives back locks there: the caller runs this
//! before the node serves, and only where no other process reaches the node's MemStore
//! meanwhile (its DC has no other node).

use crate::error::Result;
use crate::free_list::RETIRED;
use crate::memstore::Layout;
use crate::record::lock_word;
use crate::ring::{self, EntryStatus};
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::{NodeId, Offset};
use std::collections::BTreeMap;

/// What [`relock_after_restart`] found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Relocked {
    /// Lock words named by a lock intent of an entry of the ring.
    pub words: u64,
    /// Of these, the words that held something else than their `Logged` entries' locks, and
    /// were set to them.
    pub changed: u64,
    /// `Intent` entries whose lock intents were rewritten to add nothing.
    pub intents_released: u64,
}

/// Settles the lock words of `node` from its ring, as the module docs describe: every word a
/// lock intent of an unflushed entry names holds exactly the locks of its `Logged` entries
/// afterwards, and no `Intent` entry lists a lock any more. For a node process started again
/// on its MemStore, before it serves, where nobody else reaches that MemStore meanwhile.
///
/// # Errors
/// Verbs failures (nothing is lost: a second call settles what the first did not).
pub fn relock_after_restart(verbs: &dyn Verbs, layout: &Layout, node: NodeId) -> Result<Relocked> {
    let mut out = Relocked::default();
    let entries = ring::ring_entries(verbs, node, layout)?;
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, _, entry) in &entries {
        if matches!(entry.status, EntryStatus::Empty | EntryStatus::Flushed) {
            continue;
        }
        for l in entry.locks.iter().filter(|l| l.lock_bits != 0) {
            let word = lock_word(l.record).0;
            if word % 8 != 0 || word.checked_add(8).is_none_or(|end| end > layout.size) {
                continue;
            }
            let sum = held.entry(word).or_insert(0);
            if entry.status == EntryStatus::Logged {
                *sum = sum.wrapping_add(l.lock_bits);
            }
        }
    }
    for (&word, &want) in &held {
        out.words += 1;
        let mut now = [0u8; 8];
        verbs.read(node, Offset(word), &mut now)?;
        let now = u64::from_le_bytes(now);
        if now == RETIRED || now == want {
            continue;
        }
        verbs.compare_and_swap(node, Offset(word), now, want)?;
        out.changed += 1;
    }
    for (index, slots, entry) in entries {
        if entry.status != EntryStatus::Intent || entry.locks.iter().all(|l| l.lock_bits == 0) {
            continue;
        }
        let mut e = entry;
        for l in &mut e.locks {
            l.lock_bits = 0;
        }
        // Status and vote words are left as they are (a recoverer's fence may be in them).
        let mut batch = DoorbellBatch::new();
        ring::push_write_body(&mut batch, layout, index, &ring::encode_padded(&e, index, slots));
        verbs.post_batch(node, &mut batch)?;
        out.intents_released += 1;
    }
    Ok(out)
}
