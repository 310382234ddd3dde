//! The record heap's free lists: records retired by an aborted insert go back to the heap
//! and the next record of the same size takes one before it moves the bump pointer
//! (docs/design.md, "Records reclaimed").
//!
//! One lock-free stack (a Treiber stack) per record size, in 64-byte lines from 1 to
//! [`SIZE_CLASSES`], reached with one-sided verbs only: its head word holds the first free
//! record's offset in lines (low 48 bits) and a tag (high 16 bits) that every push and pop
//! advances, so a pop whose READ of the head went stale — the record popped, reused and pushed
//! back meanwhile — fails its compare-and-swap instead of taking a record twice (the ABA
//! problem). A free record keeps [`RETIRED`] in its lock word, so a stale lock attempt fails,
//! and the offset of the next free record in the last word of its header ([`NEXT_WORD`]),
//! which no live record uses.
//!
//! The heads live in a directory block of the heap, made on the first retirement and named by
//! word 3 of the node line ([`crate::Layout::free_directory_offset`]); formats before it kept
//! that word zero, so their MemStores read as having no free record. The directory's first
//! line counts the free bytes ([`free_bytes`]): the record heap's use is the bump pointer's
//! advance less them.

use crate::error::Result;
use crate::memstore::{Layout, LINE};
use crate::verbs::Verbs;
use redt_proto::{NodeId, Offset};

/// The lock word of a retired record: every group exclusive with every reader count full,
/// which no lock holder can produce (an exclusive group has no readers), so every lock
/// attempt on it fails and every apply refuses it.
pub const RETIRED: u64 = u64::MAX;

/// Record sizes with a free list, in 64-byte lines (1 to 64 lines: records up to 4 KiB).
/// Larger records are not reused: their retirement only takes them out of the indexes.
pub const SIZE_CLASSES: u64 = 64;

/// Byte offset, inside a free record, of the word naming the next free record.
pub const NEXT_WORD: u64 = 56;

/// Bytes of the directory block: one line of counters, then one head word per size class.
pub const DIRECTORY_BYTES: u64 = LINE + 8 * SIZE_CLASSES;

/// Bits of a head word holding the first free record's offset in lines.
const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// Compare-and-swap attempts a push or pop makes before it gives up (a pop then takes fresh
/// heap; a push leaves the record retired but unlisted).
const ATTEMPTS: u32 = 1024;

/// The byte offset of the first entry a tagged head word names (0: the list is empty), its
/// low `offset_bits` holding the offset in 64-byte lines. Shared with the B+-trees' lists of
/// freed nodes (`btree/free.rs`), which use a wider tag.
pub(crate) fn head_first(head: u64, offset_bits: u32) -> u64 {
    (head & ((1 << offset_bits) - 1)) * LINE
}

/// The head word that names the entry at byte offset `first` (0: none) with the tag after
/// `head`'s (every push and pop advances it, so a compare-and-swap from a stale head fails).
pub(crate) fn head_next(head: u64, first: u64, offset_bits: u32) -> u64 {
    let tag = (head >> offset_bits).wrapping_add(1) & ((1 << (64 - offset_bits)) - 1);
    tag << offset_bits | (first / LINE)
}

/// The size class of a `bytes`-byte record, if it has a free list.
fn class(bytes: u64) -> Option<u64> {
    let lines = bytes.div_ceil(LINE);
    (1..=SIZE_CLASSES).contains(&lines).then_some(lines - 1)
}

/// The directory of `node`, made now if `create` and none exists yet; `None` if there is none.
fn directory(verbs: &dyn Verbs, node: NodeId, layout: &Layout, create: bool) -> Result<Option<Offset>> {
    layout.linked_block(verbs, node, layout.free_directory_offset(), DIRECTORY_BYTES, &[], create)
}

fn head_at(dir: Offset, class: u64) -> Offset {
    Offset(dir.0 + LINE + 8 * class)
}

fn read_word(verbs: &dyn Verbs, node: NodeId, at: Offset) -> Result<u64> {
    let mut w = [0u8; 8];
    verbs.read(node, at, &mut w)?;
    Ok(u64::from_le_bytes(w))
}

/// Puts the retired `bytes`-byte record at `record` on `node`'s free list of its size. The
/// caller retired it ([`RETIRED`] in its lock word) and took it out of every index, and is
/// the only one to free it. Returns whether it is listed (false for a size without a list).
///
/// # Errors
/// Verbs errors; [`crate::Error::HeapFull`] when the directory cannot be made.
pub fn push(verbs: &dyn Verbs, node: NodeId, layout: &Layout, record: Offset, bytes: u64) -> Result<bool> {
    let Some(class) = class(bytes) else { return Ok(false) };
    let Some(dir) = directory(verbs, node, layout, true)? else { return Ok(false) };
    let head_at = head_at(dir, class);
    let mut head = read_word(verbs, node, head_at)?;
    for _ in 0..ATTEMPTS {
        verbs.write(node, Offset(record.0 + NEXT_WORD), &(head & OFFSET_MASK).to_le_bytes())?;
        let old = verbs.compare_and_swap(node, head_at, head, head_next(head, record.0, OFFSET_BITS))?;
        if old == head {
            verbs.fetch_and_add(node, dir, class.wrapping_add(1) * LINE)?;
            return Ok(true);
        }
        head = old;
    }
    Ok(false)
}

/// Takes a free `bytes`-byte record from `node`'s free list of its size, if any: its offset,
/// still [`RETIRED`] (the caller writes the whole new record over it).
///
/// # Errors
/// Verbs errors.
pub fn pop(verbs: &dyn Verbs, node: NodeId, layout: &Layout, bytes: u64) -> Result<Option<Offset>> {
    let Some(class) = class(bytes) else { return Ok(None) };
    let Some(dir) = directory(verbs, node, layout, false)? else { return Ok(None) };
    let head_at = head_at(dir, class);
    let mut head = read_word(verbs, node, head_at)?;
    for _ in 0..ATTEMPTS {
        let first = head_first(head, OFFSET_BITS);
        if first == 0 {
            return Ok(None);
        }
        // A stale head may name a record reused since: its next word is then garbage, but
        // the compare-and-swap below fails on the head's tag, which moved.
        if first < layout.heap_off || first.checked_add(bytes).is_none_or(|end| end > layout.size) {
            return Ok(None);
        }
        let next = read_word(verbs, node, Offset(first + NEXT_WORD))? & OFFSET_MASK;
        let old = verbs.compare_and_swap(node, head_at, head, head_next(head, next * LINE, OFFSET_BITS))?;
        if old == head {
            verbs.fetch_and_add(node, dir, (class + 1).wrapping_mul(LINE).wrapping_neg())?;
            return Ok(Some(Offset(first)));
        }
        head = old;
    }
    Ok(None)
}

/// Bytes of `node`'s record heap on its free lists (0 before the first retirement).
///
/// # Errors
/// Verbs errors.
pub fn free_bytes(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<u64> {
    match directory(verbs, node, layout, false)? {
        Some(dir) => read_word(verbs, node, dir),
        None => Ok(0),
    }
}

/// Empties every free list of `node`: what a restore does after a power loss, when a list's
/// links may not all have reached the disk (the records listed stay allocated, unused).
///
/// # Errors
/// Verbs errors.
pub fn forget(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<()> {
    if let Some(dir) = directory(verbs, node, layout, false)? {
        verbs.write(node, dir, &vec![0u8; DIRECTORY_BYTES as usize])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::LocalVerbs;
    use redt_proto::MemStoreConfig;
    use std::collections::BTreeSet;

    fn memstore() -> (LocalVerbs, Layout) {
        let cfg = MemStoreConfig { size_bytes: 1 << 20, index_bytes: 4096, ring_bytes: 16384 };
        let layout = Layout::from_config(&cfg);
        let v = LocalVerbs::in_process([NodeId(0)], layout.size);
        layout.format(v.region(NodeId(0)).unwrap());
        (v, layout)
    }

    fn retire(v: &LocalVerbs, at: Offset) {
        v.write(NodeId(0), Offset(at.0 + crate::record::LOCK_WORD), &RETIRED.to_le_bytes()).unwrap();
    }

    #[test]
    fn a_pushed_record_is_popped_once_and_counted_free_meanwhile() {
        let (v, l) = memstore();
        let n = NodeId(0);
        assert_eq!(pop(&v, n, &l, 128).unwrap(), None, "no directory yet");
        assert_eq!(free_bytes(&v, n, &l).unwrap(), 0);
        let recs: Vec<Offset> = (0..3).map(|_| l.alloc(&v, n, 128).unwrap()).collect();
        for &r in &recs {
            retire(&v, r);
            assert!(push(&v, n, &l, r, 128).unwrap());
        }
        assert_eq!(free_bytes(&v, n, &l).unwrap(), 3 * 128);
        assert_eq!(pop(&v, n, &l, 192).unwrap(), None, "another size class");
        let got: BTreeSet<u64> = (0..3).map(|_| pop(&v, n, &l, 128).unwrap().unwrap().0).collect();
        assert_eq!(got, recs.iter().map(|r| r.0).collect());
        assert_eq!(pop(&v, n, &l, 128).unwrap(), None);
        assert_eq!(free_bytes(&v, n, &l).unwrap(), 0);
        // Records beyond the largest class are not listed.
        let big = l.alloc(&v, n, (SIZE_CLASSES + 1) * LINE).unwrap();
        assert!(!push(&v, n, &l, big, (SIZE_CLASSES + 1) * LINE).unwrap());
    }

    #[test]
    fn forgetting_empties_every_list() {
        let (v, l) = memstore();
        let n = NodeId(0);
        let r = l.alloc(&v, n, 256).unwrap();
        retire(&v, r);
        push(&v, n, &l, r, 256).unwrap();
        forget(&v, n, &l).unwrap();
        assert_eq!(pop(&v, n, &l, 256).unwrap(), None);
        assert_eq!(free_bytes(&v, n, &l).unwrap(), 0);
    }

    #[test]
    fn concurrent_pushes_and_pops_never_hand_out_a_record_twice() {
        let (v, l) = memstore();
        let v = std::sync::Arc::new(v);
        let n = NodeId(0);
        let recs: Vec<Offset> = (0..64).map(|_| l.alloc(v.as_ref(), n, 128).unwrap()).collect();
        for &r in &recs {
            retire(&v, r);
            push(v.as_ref(), n, &l, r, 128).unwrap();
        }
        // Four threads each pop a record, own it for a moment (stamping it), push it back.
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let v = v.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let Some(r) = pop(v.as_ref(), n, &l, 128).unwrap() else { continue };
                        let stamp = t << 32 | i;
                        v.write(n, r, &stamp.to_le_bytes()).unwrap();
                        std::thread::yield_now();
                        let mut w = [0u8; 8];
                        v.read(n, r, &mut w).unwrap();
                        assert_eq!(u64::from_le_bytes(w), stamp, "record {r:?} handed out twice");
                        assert!(push(v.as_ref(), n, &l, r, 128).unwrap());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut left = BTreeSet::new();
        while let Some(r) = pop(v.as_ref(), n, &l, 128).unwrap() {
            assert!(left.insert(r.0), "record {r:?} listed twice");
        }
        assert_eq!(left, recs.iter().map(|r| r.0).collect());
    }
}
