//! Restoring a node's MemStore from its disk image after a power loss (`durability: disk`;
//! `persist.rs`, `docs/durability.md`).
//!
//! The image holds every write some completed sync covered, plus any subset of the sectors
//! written since (a sync cut by the power loss, or the kernel's own writeback). So it is not
//! a state the MemStore was ever in, and [`restore`] reconciles it before anyone uses it:
//!
//! 1. **Ring.** The head becomes the larger of the head and the durable head (replay made
//!    the changes below the durable head durable before it wrote it), the tail at least
//!    that; every slot outside `[head, tail)` is zeroed, as the ring's invariant wants.
//! 2. **Records.** Every index entry whose record does not hold its table and key (the
//!    record's line never reached the disk) is removed; the heap's bump pointer moves past
//!    every record still indexed.
//!    The record heap's free lists are forgotten (`free_list.rs`: their links, and the bump
//!    pointer's advance past a listed record, may not all be on disk).
//!    The ordered index's trees are forgotten and built again from the records kept
//!    (`ordered.rs`); the bump pointer also stays past the old directory and tree anchors,
//!    whose end words lock intents may name.
//! 3. **Locks.** Every lock word is cleared — the insert-lock stripes, the absent-key lock
//!    words, each record's — and then the locks of every `Logged` entry in the ring are
//!    taken again: a `Logged` entry holds all its locks (it is written once they are taken,
//!    and its executor syncs before writing it, so any lock it took over from an earlier
//!    holder comes with that holder's release in the image). An `Intent` entry may or may
//!    not hold its locks, and its transaction cannot have a commit vote from this DC (the
//!    vote is written with the `Logged` entry), so its locks are not taken again, and its
//!    lock intents are rewritten to add nothing, so its eventual decision releases nothing.
//! 4. **Changes.** The image may hold an entry's `Committed` or `Flushed` status without
//!    all of its changes (replay's first sync cut short): every such entry still in the ring
//!    is applied again (the Thomas write rule keeps what is newer). And a cell write cut by
//!    the power loss can leave a cell's version word on disk without its value: where a cell
//!    holds exactly the version such an entry writes, it is written whole again.
//!
//! Steps 3 and 4 found real bugs in earlier versions of this code: the model test
//! `dc-executor/tests/durability.rs` lost acknowledged writes (a `Flushed` status on disk
//! without its changes) and left locks held (a scan that stopped at the first torn entry).
//!
//! The recovery protocol then decides every unfinished entry as it would after an executor
//! crash (docs/design.md §2), and replay applies what commits.

use crate::error::Result;
use crate::index::Index;
use crate::memstore::{Layout, LINE};
use crate::ordered::OrderedIndex;
use crate::record::{encode_cell, Catalog, CellVersion, LOCK_WORD};
use crate::ring::{
    durable_head_offset, encode_padded, head_offset, pieces, read_framed, ring_slots, slot_offset, tail_offset,
    EntryStatus, RedoEntry, SLOT_BYTES,
};
use crate::verbs::LocalVerbs;
use redt_proto::NodeId;
use redt_verbs::region::Region;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`restore`] found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// The ring's head after the restore (the larger of the image's head and durable head).
    pub head: u64,
    /// The ring's tail after the restore.
    pub tail: u64,
    /// Entries in `[head, tail)` that decode.
    pub entries: u64,
    /// `Logged` entries whose locks were taken again.
    pub relocked: u64,
    /// `Intent` entries whose lock intents were rewritten to add nothing.
    pub intents_released: u64,
    /// Index entries removed because their record never reached the disk.
    pub lost_records: u64,
    /// Cells written again because their value was torn.
    pub cells_rewritten: u64,
}

/// Reconciles `region`, just loaded from `node`'s disk image, as the module docs describe.
/// Nothing else may use the region meanwhile.
///
/// # Errors
/// Verbs errors on the region's own index (none are expected on a loaded region).
pub fn restore(
    layout: &Layout,
    catalog: &Catalog,
    ordered: &OrderedIndex,
    region: &Arc<Region>,
    node: NodeId,
) -> Result<Restored> {
    let mut out = Restored::default();
    // 1. Ring bounds.
    let head = region.word(head_offset(layout)).load(Ordering::Acquire);
    let durable = region.word(durable_head_offset(layout)).load(Ordering::Acquire);
    let head = head.max(durable);
    let tail = region.word(tail_offset(layout)).load(Ordering::Acquire).max(head);
    region.store(head_offset(layout), head);
    region.store(durable_head_offset(layout), head);
    region.store(tail_offset(layout), tail);
    out.head = head;
    out.tail = tail;
    let slots = ring_slots(layout);
    if tail - head < slots {
        let zeros = vec![0u8; SLOT_BYTES as usize];
        for i in tail..head + slots {
            region.write(slot_offset(layout, i), &zeros);
        }
    }

    // 2. Records the index names.
    let verbs = LocalVerbs::new([(node, region.clone())]);
    let index = Index::new(*layout);
    let mut heap_end = region.word(layout.heap_next_offset().0).load(Ordering::Acquire);
    let mut records = Vec::new();
    let mut kept = Vec::new();
    for (table, key, at) in index.entries(&verbs, node)? {
        let whole = catalog.layout(table).ok().filter(|rl| {
            let mut header = [0u8; 16];
            at.0 % LINE == 0 && region.contains(at.0, rl.record_bytes) && {
                region.read(at.0, &mut header);
                let k = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
                let meta = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
                k == key && meta as u16 == table.0
            }
        });
        match whole {
            Some(rl) => {
                heap_end = heap_end.max(at.0 + rl.record_bytes);
                records.push(at);
                kept.push((table, key, at));
            }
            None => {
                index.remove(&verbs, node, table, key)?;
                out.lost_records += 1;
            }
        }
    }
    // Lock intents may name the end word of a tree's anchor: the heap never gives its line out
    // again.
    heap_end = heap_end.max(ordered.extent(&verbs, node)?).div_ceil(LINE) * LINE;
    region.store(layout.heap_next_offset().0, heap_end);
    // The free lists' links may not all have reached the disk, nor the bump pointer's advance
    // past a listed record: the lists are forgotten (their records stay allocated, unused).
    region.store(layout.free_directory_offset().0, 0);
    // The trees may hold nodes past the heap end just set (or nodes that never reached the
    // disk): forget them and build them again from the records kept.
    kept.sort_unstable();
    ordered.rebuild(&verbs, node, &kept)?;

    // 3. Locks: clear them all, then take those of `Logged` entries again.
    let zero_range = |from: u64, bytes: u64| {
        let zeros = vec![0u8; 4096];
        let mut off = from;
        while off < from + bytes {
            let n = (from + bytes - off).min(zeros.len() as u64);
            region.write(off, &zeros[..n as usize]);
            off += n;
        }
    };
    zero_range(LINE, LINE);
    zero_range(layout.absent_off, layout.absent_bytes);
    for at in &records {
        region.store(at.0 + LOCK_WORD, 0);
    }
    let mut read = |off: u64, buf: &mut [u8]| {
        region.read(off, buf);
        Ok(())
    };
    // Decodable entries of `[head, tail)`, in ring order.
    let mut entries = Vec::new();
    let mut index_at = head;
    while index_at < tail {
        let Ok((entry, n, _owed)) = read_framed(layout, node, index_at, &mut read) else {
            // Torn or never written (the ring's gap handling fills it later, as after an
            // executor crash): its length is unknown, so look for the next entry slot by
            // slot (an entry's header names its own ring index and is checksummed).
            index_at += 1;
            continue;
        };
        out.entries += 1;
        entries.push((index_at, n, entry));
        index_at += n;
    }
    // Changes first: a `Committed` or `Flushed` entry still in the ring may have its status
    // in the image without all of its changes (replay's first sync cut short), so each is
    // applied again (the Thomas write rule keeps what is newer), and a torn cell is
    // rewritten whole.
    for (_, _, entry) in &entries {
        if matches!(entry.status, EntryStatus::Committed | EntryStatus::Flushed) {
            let mut committed = entry.clone();
            committed.status = EntryStatus::Committed;
            let _ = crate::apply::apply_committed(region, catalog, &committed);
            out.cells_rewritten += rewrite_torn_cells(region, catalog, entry);
        }
    }
    for (index_at, n, entry) in entries {
        match entry.status {
            EntryStatus::Logged => {
                for l in &entry.locks {
                    let word = l.record.0 + LOCK_WORD;
                    if word % 8 == 0 && region.contains(word, 8) && l.lock_bits != 0 {
                        region.fetch_and_add(word, l.lock_bits);
                    }
                }
                out.relocked += 1;
            }
            EntryStatus::Intent if entry.locks.iter().any(|l| l.lock_bits != 0) => {
                let mut e = entry.clone();
                for l in &mut e.locks {
                    l.lock_bits = 0;
                }
                rewrite_body(layout, region, index_at, &encode_padded(&e, index_at, n));
                out.intents_released += 1;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Writes `bytes` (an entry encoded for `index`) over the entry at `index`, except its
/// status and vote words, which keep what the image holds.
fn rewrite_body(layout: &Layout, region: &Region, index: u64, bytes: &[u8]) {
    use crate::ring::layout::{W_INDEX, W_STATUS};
    region.write(slot_offset(layout, index), &bytes[..W_STATUS as usize]);
    let rest = bytes.len() as u64 - W_INDEX;
    for (off, from, len) in pieces(layout, index, W_INDEX, rest) {
        if len > 0 {
            region.write(off, &bytes[from as usize..(from + len) as usize]);
        }
    }
}

/// Writes again, whole, each cell `entry` changes that holds exactly the version the entry
/// writes (its author's version advanced to the commit timestamp); returns how many.
fn rewrite_torn_cells(region: &Region, catalog: &Catalog, entry: &RedoEntry) -> u64 {
    let mut n = 0;
    for l in &entry.locks {
        let Ok(rl) = catalog.layout(l.table) else { continue };
        if l.record.0 % LINE != 0 || !region.contains(l.record.0, rl.record_bytes) {
            continue;
        }
        for ch in entry.changes.iter().filter(|c| c.record == l.record) {
            let c = ch.cell as usize;
            let (Some(&cell_off), Some(&bytes)) = (rl.cell_offsets.get(c), rl.cell_bytes.get(c)) else { continue };
            let Some(seen) = l.seen_version(ch.cell).map(CellVersion) else { continue };
            let target = seen.next(entry.cts);
            let at = l.record.0 + cell_off;
            if region.word(at).load(Ordering::Acquire) == target.0 {
                region.write(at, &encode_cell(target, &ch.value, bytes));
                n += 1;
            }
        }
    }
    n
}
