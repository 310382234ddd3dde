//! A flat byte region accessed only through 8-byte atomic words.
//!
//! Every MemStore lives in a [`Region`]: on the heap (in-process backend), in a shared
//! memory file mapped by several processes (cross-process backend), or in memory
//! registered with an RDMA NIC. All accesses — byte reads and writes included — are
//! made of relaxed/acquire/release atomic operations on aligned 8-byte words, so
//! concurrent readers and writers never race in the Rust memory model; like RDMA, a
//! multi-word read concurrent with a write may see a mix of old and new words ("torn"),
//! which checksums and versions above this layer detect. Words are little-endian.

use memmap2::MmapMut;
use std::sync::atomic::{AtomicU64, Ordering};

/// Backing storage of a region (kept alive, never read directly).
struct Backing(#[allow(dead_code)] MmapMut);

/// A byte region of `len` bytes (a multiple of 8), 8-byte aligned.
pub struct Region {
    base: *const AtomicU64,
    len: u64,
    _backing: Backing,
    /// The disk image this region's writes are tracked for (`durability: disk`), if any.
    persistence: std::sync::OnceLock<std::sync::Arc<crate::persist::Persistence>>,
}

// SAFETY: the region is only accessed through `AtomicU64` references, which are Sync; the
// backing storage lives as long as the region and never moves.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Allocates a zeroed region of `len` bytes (`len` rounded up to 8, at least 8) in an
    /// anonymous private mapping: page-aligned, and untouched pages cost no memory.
    ///
    /// # Panics
    /// If the mapping cannot be made (out of address space).
    pub fn new_heap(len: u64) -> Region {
        let bytes = (len.max(8).div_ceil(8) * 8) as usize;
        let map = memmap2::MmapMut::map_anon(bytes).expect("anonymous mapping for a MemStore region");
        Region::from_mmap(map)
    }

    /// Wraps a writable shared mapping (from a file under `/dev/shm`, say). Only the first
    /// `len & !7` bytes are used.
    pub fn from_mmap(map: MmapMut) -> Region {
        let len = (map.len() as u64) & !7;
        let base = map.as_ptr() as *const AtomicU64;
        debug_assert_eq!(base as usize % 8, 0, "mmap returns page-aligned memory");
        Region { base, len, _backing: Backing(map), persistence: std::sync::OnceLock::new() }
    }

    /// Region size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tracks this region's writes for `persistence` from now on (`durability: disk`; see
    /// `persist.rs`). Every later write marks its pages dirty, and [`Region::sync`] makes
    /// them durable.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] if a persistence is attached already.
    pub fn attach(&self, persistence: std::sync::Arc<crate::persist::Persistence>) -> crate::Result<()> {
        self.persistence
            .set(persistence)
            .map_err(|p| crate::Error::Backend(format!("{}: the region has a disk image already", p.name())))
    }

    /// The disk image attached with [`Region::attach`], if any.
    pub fn persistence(&self) -> Option<&std::sync::Arc<crate::persist::Persistence>> {
        self.persistence.get()
    }

    /// Makes every write to the region completed before the call durable on its disk image
    /// (group commit, `persist.rs`); nothing to do without one.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the image.
    pub fn sync(&self) -> crate::Result<()> {
        match self.persistence.get() {
            Some(p) => p.sync(self),
            None => Ok(()),
        }
    }

    /// Marks `[offset, offset + len)` dirty for the disk image, after a write to it.
    fn mark(&self, offset: u64, len: u64) {
        if let Some(p) = self.persistence.get() {
            p.mark(offset, len);
        }
    }

    /// Stores `value` in the word at `offset` (release), like a one-word [`Region::write`].
    ///
    /// # Panics
    /// If `offset` is unaligned or out of bounds.
    pub fn store(&self, offset: u64, value: u64) {
        self.word(offset).store(value, Ordering::Release);
        self.mark(offset, 8);
    }

    /// Base address of the region (for memory registration).
    pub fn base_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }

    /// Whether `[offset, offset+len)` lies inside the region.
    pub fn contains(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The word at byte offset `offset`.
    ///
    /// # Panics
    /// If `offset` is unaligned or out of bounds (callers check with [`Region::contains`]).
    pub fn word(&self, offset: u64) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.len, "word {offset} outside region");
        // SAFETY: in bounds and aligned, checked above; the backing outlives `self`.
        unsafe { &*self.base.add((offset / 8) as usize) }
    }

    /// Copies `buf.len()` bytes starting at `offset` into `buf` (word by word, acquire).
    ///
    /// # Panics
    /// If the range is out of bounds.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        assert!(self.contains(offset, buf.len() as u64), "read outside region");
        if buf.is_empty() {
            return;
        }
        let skip = (offset % 8) as usize;
        let words = self.words(offset - skip as u64, (skip + buf.len()).div_ceil(8));
        let (first, rest) = words.split_first().expect("a non-empty read covers a word");
        // The first word: the bytes from `skip` on (all of them for an aligned read that
        // covers it whole).
        let head = (8 - skip).min(buf.len());
        buf[..head].copy_from_slice(&first.load(Ordering::Acquire).to_le_bytes()[skip..skip + head]);
        // Whole words, each one 8-byte copy; then the last word's leading bytes.
        let mut chunks = buf[head..].chunks_exact_mut(8);
        let mut rest = rest.iter();
        for (chunk, word) in (&mut chunks).zip(&mut rest) {
            chunk.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if let Some(word) = rest.next() {
            let n = tail.len();
            tail.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes()[..n]);
        }
    }

    /// The `count` words from the aligned byte offset `offset` on.
    ///
    /// # Panics
    /// If `offset` is unaligned or the words are out of bounds.
    fn words(&self, offset: u64, count: usize) -> &[AtomicU64] {
        let end = (count as u64).checked_mul(8).and_then(|b| b.checked_add(offset));
        assert!(offset % 8 == 0 && end.is_some_and(|e| e <= self.len), "words {offset}+{count} outside region");
        // SAFETY: in bounds and aligned, checked above; the backing outlives `self`.
        unsafe { std::slice::from_raw_parts(self.base.add((offset / 8) as usize), count) }
    }

    /// Copies `data` to `offset` (word by word, release). Partial words at either end are
    /// merged with a compare-and-swap loop so neighbouring bytes are preserved.
    ///
    /// # Panics
    /// If the range is out of bounds.
    pub fn write(&self, offset: u64, data: &[u8]) {
        self.write_untracked(offset, data);
        self.mark(offset, data.len() as u64);
    }

    /// [`Region::write`] without marking the pages dirty (loading the disk image itself).
    ///
    /// # Panics
    /// If the range is out of bounds.
    pub fn write_untracked(&self, offset: u64, data: &[u8]) {
        assert!(self.contains(offset, data.len() as u64), "write outside region");
        let mut pos = 0usize;
        let mut off = offset;
        while pos < data.len() {
            let w = off & !7;
            let skip = (off - w) as usize;
            let n = (8 - skip).min(data.len() - pos);
            let word = self.word(w);
            if n == 8 {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                word.store(u64::from_le_bytes(b), Ordering::Release);
            } else {
                let mut cur = word.load(Ordering::Relaxed);
                loop {
                    let mut b = cur.to_le_bytes();
                    b[skip..skip + n].copy_from_slice(&data[pos..pos + n]);
                    match word.compare_exchange_weak(cur, u64::from_le_bytes(b), Ordering::AcqRel, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(actual) => cur = actual,
                    }
                }
            }
            pos += n;
            off += n as u64;
        }
    }

    /// Atomic compare-and-swap of the word at `offset`; returns the old value.
    pub fn compare_and_swap(&self, offset: u64, expected: u64, new: u64) -> u64 {
        match self.word(offset).compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(v) => {
                self.mark(offset, 8);
                v
            }
            Err(v) => v,
        }
    }

    /// Atomic fetch-and-add (wrapping) of the word at `offset`; returns the old value.
    pub fn fetch_and_add(&self, offset: u64, add: u64) -> u64 {
        let old = self.word(offset).fetch_add(add, Ordering::AcqRel);
        self.mark(offset, 8);
        old
    }

    /// Masked compare-and-swap (Mellanox ExtAtomics semantics): if
    /// `old & compare_mask == compare & compare_mask`, the bits of `swap_mask` are replaced
    /// by those of `swap`. Returns the old value.
    pub fn masked_compare_and_swap(
        &self,
        offset: u64,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> u64 {
        let word = self.word(offset);
        let mut cur = word.load(Ordering::Acquire);
        loop {
            if cur & compare_mask != compare & compare_mask {
                return cur;
            }
            let new = (cur & !swap_mask) | (swap & swap_mask);
            match word.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.mark(offset, 8);
                    return cur;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Masked fetch-and-add (Mellanox ExtAtomics semantics): the word is split into fields
    /// whose most significant bits are the set bits of `boundary` (bit 63 is always a
    /// boundary); `add` is added field by field and a carry out of a field is discarded.
    /// Returns the old value.
    pub fn masked_fetch_and_add(&self, offset: u64, add: u64, boundary: u64) -> u64 {
        let word = self.word(offset);
        let mut cur = word.load(Ordering::Acquire);
        loop {
            let new = masked_add(cur, add, boundary);
            match word.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.mark(offset, 8);
                    return cur;
                }
                Err(actual) => cur = actual,
            }
        }
    }
}

/// Field-wise addition of `a + b` where the set bits of `boundary` (plus bit 63) mark the
/// top bit of each field and carries do not cross them.
pub fn masked_add(a: u64, b: u64, boundary: u64) -> u64 {
    let boundary = boundary | (1 << 63);
    let mut out = 0u64;
    let mut lo = 0u32;
    let mut rest = boundary;
    while rest != 0 {
        let hi = rest.trailing_zeros();
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { ((1u64 << width) - 1) << lo };
        let sum = ((a & mask) >> lo).wrapping_add((b & mask) >> lo);
        out |= (sum << lo) & mask;
        rest &= rest - 1;
        lo = hi + 1;
    }
    out
}

impl crate::persist::Words for Region {
    fn len(&self) -> u64 {
        self.len
    }
    fn word(&self, offset: u64) -> &AtomicU64 {
        Region::word(self, offset)
    }
}

impl crate::persist::ImagedMemory for Region {
    fn read(&self, offset: u64, buf: &mut [u8]) {
        Region::read(self, offset, buf)
    }
    fn write_untracked(&self, offset: u64, data: &[u8]) {
        Region::write_untracked(self, offset, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masked_add_keeps_carries_inside_fields() {
        // Two 4-bit fields at bits 0-3 and 4-7: 0xF + 1 wraps to 0 and leaves field 2 alone.
        assert_eq!(masked_add(0x0F, 0x01, 0x88), 0x00);
        assert_eq!(masked_add(0x1F, 0x11, 0x88), 0x20);
        // Without boundaries it is plain wrapping addition.
        assert_eq!(masked_add(u64::MAX, 2, 0), 1);
    }

    proptest! {
        #[test]
        fn unaligned_write_then_read_round_trips(off in 0u64..200, data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let r = Region::new_heap(512);
            r.write(0, &[0xAA; 512]);
            r.write(off, &data);
            let mut back = vec![0; data.len()];
            r.read(off, &mut back);
            prop_assert_eq!(&back, &data);
            // Neighbouring bytes are untouched.
            let mut all = vec![0; 512];
            r.read(0, &mut all);
            prop_assert!(all[..off as usize].iter().all(|&b| b == 0xAA));
            prop_assert!(all[off as usize + data.len()..].iter().all(|&b| b == 0xAA));
        }

        #[test]
        fn masked_add_equals_per_field_wrapping_add(a: u64, b: u64) {
            // Sixteen 4-bit fields.
            let boundary = 0x8888_8888_8888_8888u64;
            let got = masked_add(a, b, boundary);
            for f in 0..16 {
                let x = (a >> (4 * f)) & 0xF;
                let y = (b >> (4 * f)) & 0xF;
                prop_assert_eq!((got >> (4 * f)) & 0xF, (x + y) & 0xF);
            }
        }
    }
}
