//! MemStore: one flat region per node holding, by offset, a superblock, the hash-index
//! buckets, the redo ring and the record heap (docs/design.md §3).
//!
//! ```text
//! [0, 64)                      superblock: magic, layout, heap bump pointer
//! [64, 128)                    insert-lock stripes (8 words; see `Layout::insert_lock`)
//! [128, 192)                   node line: word 0 the incarnation counter (see
//!                              `Layout::next_incarnation`), word 1 the epoch floor (see
//!                              `Layout::epoch_floor_offset`), word 2 the ordered-index
//!                              directory (`Layout::ordered_directory_offset`), word 3 the
//!                              free-list directory (`Layout::free_directory_offset`),
//!                              word 4 the deletion horizons' block
//!                              (`Layout::deletion_horizons_offset`), words 5..8
//!                              reserved (zero)
//! [192, 192 + index)           index buckets (64 bytes each)
//! [.., + ring)                 redo ring: 64-byte head/tail block, then 64-byte slots
//! [.., + log)                  decision log: 64-byte header, 32-byte rows (`decision_log.rs`)
//! [.., + absent)               absent-key lock words: one per index bucket (`Layout::absent_lock`)
//! [.., + promises)             promise table: 16-byte rows (`promise_table.rs`)
//! [.., size)                   record heap, bump-allocated by fetch-and-add
//! ```

use crate::error::{Error, Result, SuperblockMismatch};
use crate::verbs::Verbs;
use redt_proto::{MemStoreConfig, NodeId, Offset};
use redt_verbs::region::Region;

/// `"REDTMS05"` in little-endian (02: entries carry start and partitions; decision log. 03:
/// the node line with the incarnation counter, so the index starts at 192. 04: the absent-key
/// lock words between the decision log and the heap, so the heap starts later. 05: the
/// promise table after them).
pub const MAGIC: u64 = u64::from_le_bytes(*b"REDTMS05");

/// The first six bytes every MemStore magic starts with (`"REDTMS"`, then a two-digit format
/// version), to tell a MemStore of another format from a region that holds none.
const MAGIC_FAMILY: u64 = u64::from_le_bytes(*b"REDTMS\0\0");

/// Mask of the [`MAGIC_FAMILY`] bytes in a magic word.
const MAGIC_FAMILY_MASK: u64 = 0x0000_ffff_ffff_ffff;

/// Superblock size and alignment unit of every area, in bytes.
pub const LINE: u64 = 64;

/// Bytes of one row of the decision log (`crate::decision_log`).
pub const DECISION_ROW_BYTES: u64 = 32;

/// Byte offset of the heap bump pointer inside the superblock.
const HEAP_NEXT: u64 = 56;

/// Byte offset of the node's incarnation counter: word 0 of the node line, the third line.
const INCARNATION: u64 = 2 * LINE;

/// Byte offset of the node's epoch floor: word 1 of the node line.
const EPOCH_FLOOR: u64 = 2 * LINE + 8;

/// Byte offset of the ordered-index directory pointer: word 2 of the node line.
const ORDERED_DIRECTORY: u64 = 2 * LINE + 16;

/// Byte offset of the free-list directory pointer: word 3 of the node line.
const FREE_DIRECTORY: u64 = 2 * LINE + 24;

/// Byte offset of the deletion horizons' block pointer: word 4 of the node line.
const DELETION_HORIZONS: u64 = 2 * LINE + 32;

/// Bytes before the index: the superblock line, the insert-lock line and the node line.
pub const SUPERBLOCK_BYTES: u64 = 3 * LINE;

/// Insert-lock stripes: words of the second superblock line.
pub const INSERT_LOCK_STRIPES: u64 = LINE / 8;

/// Where each area of a MemStore lives; identical on every node of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Region size in bytes.
    pub size: u64,
    /// First byte of the index buckets.
    pub index_off: u64,
    /// Bytes of index buckets (a multiple of 64).
    pub index_bytes: u64,
    /// First byte of the redo ring (its head/tail block).
    pub ring_off: u64,
    /// Bytes of the ring including its 64-byte head/tail block.
    pub ring_bytes: u64,
    /// First byte of the decision log (its header).
    pub log_off: u64,
    /// Bytes of the decision log including its 64-byte header.
    pub log_bytes: u64,
    /// First byte of the absent-key lock words ([`Layout::absent_lock`]).
    pub absent_off: u64,
    /// Bytes of the absent-key lock words (a multiple of 64).
    pub absent_bytes: u64,
    /// First byte of the promise table (`promise_table.rs`).
    pub promise_off: u64,
    /// Bytes of the promise table (a multiple of 64).
    pub promise_bytes: u64,
    /// First byte of the record heap.
    pub heap_off: u64,
}

impl Layout {
    /// Derives the layout from the topology's MemStore configuration (already validated:
    /// sizes are multiples of 64 and fit).
    pub fn from_config(c: &MemStoreConfig) -> Layout {
        let index_off = SUPERBLOCK_BYTES;
        let ring_off = index_off + c.index_bytes;
        let log_off = ring_off + c.ring_bytes;
        let log_bytes = c.decision_log_bytes();
        let absent_off = log_off + log_bytes;
        let absent_bytes = c.absent_lock_bytes();
        let promise_off = absent_off + absent_bytes;
        let promise_bytes = c.promise_table_bytes();
        Layout {
            size: c.size_bytes,
            index_off,
            index_bytes: c.index_bytes,
            ring_off,
            ring_bytes: c.ring_bytes,
            log_off,
            log_bytes,
            absent_off,
            absent_bytes,
            promise_off,
            promise_bytes,
            heap_off: promise_off + promise_bytes,
        }
    }

    /// Number of 64-byte index buckets.
    pub fn index_buckets(&self) -> u64 {
        self.index_bytes / LINE
    }

    /// Number of 64-byte ring slots (the head/tail block excluded).
    pub fn ring_slots(&self) -> u64 {
        self.ring_bytes / LINE - 1
    }

    /// Offset of the insert-lock word serialising record creation for keys whose index home
    /// bucket is `home_bucket`: two executors creating the same key take the same word, so
    /// the index's duplicate check under it cannot race.
    pub fn insert_lock(&self, home_bucket: u64) -> Offset {
        Offset(LINE + 8 * (home_bucket % INSERT_LOCK_STRIPES))
    }

    /// Offset of the absent-key lock word of the keys whose index home bucket is
    /// `home_bucket` (one word per bucket, in the lock-word format of `lock.rs`).
    ///
    /// A sub-transaction that reads a key with no record does not create one (a read must not
    /// fill the heap): it share-locks the group of this word that
    /// [`crate::Index::absent_lock`] names for as long as it would have held the record's
    /// lock, and an executor that creates a
    /// record takes the same group exclusively while it publishes the key, refusing (No-Wait)
    /// while any reader holds it. So a key read as absent cannot come into existence before
    /// the reader's decision, exactly as a record read-locked by it could not be written
    /// (see `Executor::execute`).
    pub fn absent_lock(&self, home_bucket: u64) -> Offset {
        let words = (self.absent_bytes / 8).max(1);
        Offset(self.absent_off + 8 * (home_bucket % words))
    }

    /// Whether `offset` lies in the absent-key lock words (a lock intent naming one locks no
    /// record).
    pub fn is_absent_lock(&self, offset: Offset) -> bool {
        (self.absent_off..self.absent_off + self.absent_bytes).contains(&offset.0)
    }

    /// Offset of the heap bump pointer word.
    pub fn heap_next_offset(&self) -> Offset {
        Offset(HEAP_NEXT)
    }

    /// Offset of the node's incarnation counter: how many times a node process started on
    /// this MemStore (0 once formatted).
    pub fn incarnation_offset(&self) -> Offset {
        Offset(INCARNATION)
    }

    /// Offset of the node's epoch floor: the oldest placement epoch whose phase 1 may still
    /// write a redo entry into this node's ring (0, never raised: any). A phase 1 READs it in
    /// the doorbell batch that WRITEs its entry and takes its locks, and votes abort when its
    /// transaction's epoch is older (`AbortReason::StaleEpoch`). The node raises it before it
    /// serves a snapshot copy, so that once its ring holds no unfinished entry of an older
    /// epoch, none can appear (docs/design.md, "Rebuild"): executors of its DC that have not
    /// yet applied the new epoch are fenced here, in the replica's own memory.
    pub fn epoch_floor_offset(&self) -> Offset {
        Offset(EPOCH_FLOOR)
    }

    /// Offset of the node's ordered-index directory pointer: 0 until the first B+-tree of a
    /// record table is made on the node, then the heap offset of the directory block that
    /// names each (table, partition) tree (`ordered.rs`). A word of the node line, which
    /// formats before this one kept zero, so their MemStores read as having no trees yet.
    pub fn ordered_directory_offset(&self) -> Offset {
        Offset(ORDERED_DIRECTORY)
    }

    /// Offset of the node's free-list directory pointer: 0 until the first record of the node
    /// is retired, then the heap offset of the directory block holding the free lists' heads
    /// (`free_list.rs`). A word of the node line, which formats before this one kept zero,
    /// so their MemStores read as having no free record.
    pub fn free_directory_offset(&self) -> Offset {
        Offset(FREE_DIRECTORY)
    }

    /// Offset of the node's deletion horizons' block pointer: 0 until the node first frees a
    /// deleted record, then the heap offset of a block of commit timestamps, one per slot of
    /// keys (by hash), each at or above the newest version of every deleted record of its
    /// slot the node has freed. A slot is raised before such a record leaves the indexes;
    /// each record created after carries its slot's horizon as its floor, and a change older
    /// than its record's floor is superseded (`deleted.rs`). A word of the node line, which
    /// formats before this one kept zero.
    pub fn deletion_horizons_offset(&self) -> Offset {
        Offset(DELETION_HORIZONS)
    }

    /// The heap block that the node-line word at `word` names (the ordered-index directory,
    /// the free lists', the deletion horizons'): `None` while the word is 0, unless `create`,
    /// which allocates `bytes` of heap, WRITEs `init` followed by zeros over all of it and
    /// links it by a compare-and-swap of the word from 0. Two makers at once
    /// both allocate; the loser's block stays allocated (once per node and word) and it takes
    /// the winner's.
    ///
    /// # Errors
    /// Verbs errors; [`Error::HeapFull`].
    pub fn linked_block(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        word: Offset,
        bytes: u64,
        init: &[u8],
        create: bool,
    ) -> Result<Option<Offset>> {
        let mut w = [0u8; 8];
        verbs.read(node, word, &mut w)?;
        let at = u64::from_le_bytes(w);
        if at != 0 || !create {
            return Ok((at != 0).then_some(Offset(at)));
        }
        let made = self.alloc(verbs, node, bytes)?;
        let mut image = vec![0u8; bytes as usize];
        let n = init.len().min(image.len());
        image[..n].copy_from_slice(&init[..n]);
        verbs.write(node, made, &image)?;
        let old = verbs.compare_and_swap(node, word, 0, made.0)?;
        Ok(Some(Offset(if old == 0 { made.0 } else { old })))
    }

    /// Starts a new incarnation of `node` on its MemStore: one fetch-and-add of 1 on its
    /// incarnation counter, so the count lives as long as the rest of the MemStore (a
    /// restarted process finds it in the shared-memory file). Returns the new incarnation:
    /// 1 on a freshly formatted MemStore, one more at every call after. A node calls it once
    /// at start, before it issues any transaction id, and again whenever it has used up the
    /// ids of its current incarnation (`redt_coordinator::TxnIds`).
    ///
    /// # Errors
    /// Verbs errors.
    pub fn next_incarnation(&self, verbs: &dyn Verbs, node: NodeId) -> Result<u64> {
        let before = verbs.fetch_and_add(node, self.incarnation_offset(), 1)?;
        Ok(before.wrapping_add(1))
    }

    /// Rows of the decision log.
    pub fn log_rows(&self) -> u64 {
        (self.log_bytes - LINE) / DECISION_ROW_BYTES
    }

    /// Writes a fresh superblock and zeroes the insert-lock stripes, the node line (the
    /// incarnation counter starts at 0) and the index, ring, decision-log and absent-key lock
    /// areas of `region`.
    ///
    /// # Panics
    /// If `region` is smaller than `self.size`.
    pub fn format(&self, region: &Region) {
        assert!(region.len() >= self.size, "region smaller than the MemStore layout");
        let zero = vec![0u8; 1 << 16];
        let mut off = LINE;
        while off < self.heap_off {
            let n = (self.heap_off - off).min(zero.len() as u64);
            region.write(off, &zero[..n as usize]);
            off += n;
        }
        let words = [
            MAGIC,
            self.size,
            self.index_off,
            self.index_bytes,
            self.ring_off,
            self.ring_bytes,
            self.heap_off,
            self.heap_off,
        ];
        // The magic goes last so a half-formatted region is never taken for a MemStore.
        for (i, w) in words.iter().enumerate().skip(1) {
            region.write(i as u64 * 8, &w.to_le_bytes());
        }
        region.write(0, &MAGIC.to_le_bytes());
    }

    /// Checks that `region` holds a MemStore of this layout.
    ///
    /// # Errors
    /// [`Error::BadSuperblock`]: [`SuperblockMismatch::Format`] for a MemStore of another
    /// format version (written by another redt), [`SuperblockMismatch::Magic`] for a region
    /// that holds no MemStore, else naming the first layout field that differs.
    pub fn check(&self, node: NodeId, region: &Region) -> Result<()> {
        let mut sb = [0u8; 64];
        region.read(0, &mut sb);
        let w = |i: usize| u64::from_le_bytes(sb[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let bad = |why| Error::BadSuperblock { node, why };
        if w(0) != MAGIC {
            if Layout::holds_any_format(region) {
                let found = String::from_utf8_lossy(&sb[..8]).into_owned();
                let expected = String::from_utf8_lossy(&MAGIC.to_le_bytes()).into_owned();
                return Err(bad(SuperblockMismatch::Format { found, expected }));
            }
            return Err(bad(SuperblockMismatch::Magic(w(0))));
        }
        let fields = [
            ("size", 1, self.size),
            ("index_off", 2, self.index_off),
            ("index_bytes", 3, self.index_bytes),
            ("ring_off", 4, self.ring_off),
            ("ring_bytes", 5, self.ring_bytes),
            ("heap_off", 6, self.heap_off),
        ];
        for (field, i, expected) in fields {
            if w(i) != expected {
                return Err(bad(SuperblockMismatch::Field { field, found: w(i), expected }));
            }
        }
        Ok(())
    }

    /// Whether `region` already holds a formatted MemStore of this format (any layout).
    pub fn is_formatted(region: &Region) -> bool {
        region.word(0).load(std::sync::atomic::Ordering::Acquire) == MAGIC
    }

    /// Whether `region` holds a MemStore of any format version, this one or another (its
    /// magic starts with `"REDTMS"`).
    pub fn holds_any_format(region: &Region) -> bool {
        region.word(0).load(std::sync::atomic::Ordering::Acquire) & MAGIC_FAMILY_MASK == MAGIC_FAMILY
    }

    /// Allocates `bytes` (rounded up to 64) from `node`'s record heap with one
    /// fetch-and-add on the bump pointer; returns the offset of the allocation.
    ///
    /// # Errors
    /// [`Error::HeapFull`] when the heap is exhausted; verbs errors.
    pub fn alloc(&self, verbs: &dyn Verbs, node: NodeId, bytes: u64) -> Result<Offset> {
        let bytes = bytes.div_ceil(LINE) * LINE;
        let at = verbs.fetch_and_add(node, self.heap_next_offset(), bytes)?;
        if at.checked_add(bytes).is_none_or(|end| end > self.size) {
            return Err(Error::HeapFull { node, needed: bytes });
        }
        Ok(Offset(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::LocalVerbs;

    fn cfg() -> MemStoreConfig {
        MemStoreConfig { size_bytes: 1 << 20, index_bytes: 4096, ring_bytes: 8192 }
    }

    #[test]
    fn format_then_check_and_alloc() {
        let l = Layout::from_config(&cfg());
        let v = LocalVerbs::in_process([NodeId(0)], l.size);
        let r = v.region(NodeId(0)).unwrap();
        assert!(matches!(l.check(NodeId(0), r), Err(Error::BadSuperblock { .. })));
        l.format(r);
        l.check(NodeId(0), r).unwrap();
        let a = l.alloc(&v, NodeId(0), 100).unwrap();
        let b = l.alloc(&v, NodeId(0), 1).unwrap();
        assert_eq!(a.0, l.heap_off);
        assert_eq!(b.0, l.heap_off + 128);
        assert!(matches!(l.alloc(&v, NodeId(0), 1 << 21), Err(Error::HeapFull { .. })));
        let other = Layout { ring_bytes: 4096, ..l };
        assert!(matches!(
            other.check(NodeId(0), r),
            Err(Error::BadSuperblock { why: SuperblockMismatch::Field { field: "ring_bytes", .. }, .. })
        ));
    }

    #[test]
    fn the_incarnation_starts_at_one_and_counts_every_start() {
        let l = Layout::from_config(&cfg());
        let v = LocalVerbs::in_process([NodeId(0), NodeId(1)], l.size);
        for n in [NodeId(0), NodeId(1)] {
            l.format(v.region(n).unwrap());
        }
        assert_eq!(l.incarnation_offset().0, 128);
        assert_eq!(l.index_off, 192, "the node line sits between the insert locks and the index");
        assert_eq!(l.next_incarnation(&v, NodeId(0)).unwrap(), 1, "a fresh MemStore's first start");
        assert_eq!(l.next_incarnation(&v, NodeId(0)).unwrap(), 2);
        assert_eq!(l.next_incarnation(&v, NodeId(1)).unwrap(), 1, "each node counts its own starts");
        // A process that starts again on the same region (the shared-memory file) continues.
        l.check(NodeId(0), v.region(NodeId(0)).unwrap()).unwrap();
        assert_eq!(l.next_incarnation(&v, NodeId(0)).unwrap(), 3);
        // Formatting anew starts over (a new MemStore holds no transaction of an old life).
        l.format(v.region(NodeId(0)).unwrap());
        assert_eq!(l.next_incarnation(&v, NodeId(0)).unwrap(), 1);
    }

    #[test]
    fn a_memstore_of_another_format_is_refused_by_name() {
        let l = Layout::from_config(&cfg());
        let v = LocalVerbs::in_process([NodeId(0)], l.size);
        let r = v.region(NodeId(0)).unwrap();
        l.format(r);
        // What the previous format (no node line) leaves in word 0.
        r.write(0, b"REDTMS02");
        assert!(Layout::holds_any_format(r));
        assert!(!Layout::is_formatted(r));
        let err = l.check(NodeId(0), r).unwrap_err();
        assert!(
            matches!(&err, Error::BadSuperblock { why: SuperblockMismatch::Format { found, .. }, .. } if found == "REDTMS02"),
            "{err:?}"
        );
        assert!(err.to_string().contains("REDTMS02"), "{err}");
        // A restarted node refuses it rather than format over its data.
        assert!(crate::dc::format_if_new(&l, NodeId(0), r).is_err());
        assert_eq!(r.word(0).load(std::sync::atomic::Ordering::Relaxed), u64::from_le_bytes(*b"REDTMS02"));
        // A region that never held a MemStore is not taken for one.
        r.write(0, &7u64.to_le_bytes());
        assert!(!Layout::holds_any_format(r));
        assert!(matches!(l.check(NodeId(0), r), Err(Error::BadSuperblock { why: SuperblockMismatch::Magic(7), .. })));
        assert!(crate::dc::format_if_new(&l, NodeId(0), r).unwrap(), "anything else is formatted");
        l.check(NodeId(0), r).unwrap();
    }
}
