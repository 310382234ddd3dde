//! The RDMA-friendly hash index: `(table, key)` → record [`Offset`] in one node's MemStore,
//! read and updated remotely with one-sided verbs only (RedT §4.2 / CREST §4.1
//! (RDMA-friendly hash index, as in FaRM/FORD); docs/design.md §3).
//!
//! See [`Index`] for the slot format, the probing scheme and the concurrency contract.

use crate::error::{Error, Result};
use crate::memstore::{Layout, LINE};
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::{NodeId, Offset, TableId};
use std::ops::ControlFlow::{self, Break, Continue};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Slots per 64-byte bucket.
const SLOTS_PER_BUCKET: usize = 4;

/// Bytes per slot: a meta word and a key word.
const SLOT_BYTES: u64 = 16;

/// Meta of an empty slot.
const EMPTY: u64 = 0;

/// Meta of a slot an insert has claimed and is still writing.
const CLAIMED: u64 = 1;

/// Low bits of a tombstone meta (alone, or or-ed into the removed entry's meta).
const TOMBSTONE: u64 = 2;

/// Low bits of a meta that tell an entry from a sentinel (record offsets are 64-aligned).
const STATE_MASK: u64 = LINE - 1;

/// Bits of the meta word that hold the record offset.
const OFFSET_BITS: u32 = 48;

/// Mask of the offset part of a meta word.
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// Largest number of buckets one READ covers.
const MAX_READ_BUCKETS: u64 = 8;

/// Live counters of one [`Index`], updated with relaxed atomics.
///
/// [`IndexStats::snapshot`] takes a detached copy; [`IndexStats::since`] subtracts two
/// copies to count an interval. READs are counted in verbs issued, not bytes.
#[derive(Debug, Default)]
pub struct IndexStats {
    lookups: AtomicU64,
    lookup_reads: AtomicU64,
    lookup_buckets: AtomicU64,
    found: AtomicU64,
    missed: AtomicU64,
    inserts: AtomicU64,
    removes: AtomicU64,
    update_reads: AtomicU64,
    claim_conflicts: AtomicU64,
    reclaimed: AtomicU64,
}

impl IndexStats {
    /// Number of [`Index::lookup`] calls that completed (found or missed).
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Relaxed)
    }

    /// READ verbs issued by lookups.
    pub fn lookup_reads(&self) -> u64 {
        self.lookup_reads.load(Relaxed)
    }

    /// Buckets covered by the READs of lookups (64 bytes each).
    pub fn lookup_buckets(&self) -> u64 {
        self.lookup_buckets.load(Relaxed)
    }

    /// Lookups that found their key.
    pub fn found(&self) -> u64 {
        self.found.load(Relaxed)
    }

    /// Lookups that did not find their key.
    pub fn missed(&self) -> u64 {
        self.missed.load(Relaxed)
    }

    /// Number of [`Index::insert`] calls, whatever their outcome.
    pub fn inserts(&self) -> u64 {
        self.inserts.load(Relaxed)
    }

    /// Number of [`Index::remove`] calls, whatever their outcome.
    pub fn removes(&self) -> u64 {
        self.removes.load(Relaxed)
    }

    /// READ verbs issued by inserts and removes.
    pub fn update_reads(&self) -> u64 {
        self.update_reads.load(Relaxed)
    }

    /// Times an insert or remove lost a race (a compare-and-swap failed, or a claim failed
    /// validation) and started over.
    pub fn claim_conflicts(&self) -> u64 {
        self.claim_conflicts.load(Relaxed)
    }

    /// Tombstones that removes turned back into empty slots.
    pub fn reclaimed(&self) -> u64 {
        self.reclaimed.load(Relaxed)
    }

    /// Mean READ verbs per completed lookup; 0.0 before the first lookup.
    pub fn reads_per_lookup(&self) -> f64 {
        match self.lookups() {
            0 => 0.0,
            n => self.lookup_reads() as f64 / n as f64,
        }
    }

    /// A detached copy of every counter at this instant.
    pub fn snapshot(&self) -> IndexStats {
        self.since(&IndexStats::default())
    }

    /// The counts between `earlier` and `self` (saturating at zero), for one interval.
    pub fn since(&self, earlier: &IndexStats) -> IndexStats {
        let out = IndexStats::default();
        for ((o, a), b) in out.fields().into_iter().zip(self.fields()).zip(earlier.fields()) {
            o.store(a.load(Relaxed).saturating_sub(b.load(Relaxed)), Relaxed);
        }
        out
    }

    fn fields(&self) -> [&AtomicU64; 10] {
        [
            &self.lookups,
            &self.lookup_reads,
            &self.lookup_buckets,
            &self.found,
            &self.missed,
            &self.inserts,
            &self.removes,
            &self.update_reads,
            &self.claim_conflicts,
            &self.reclaimed,
        ]
    }
}

impl Clone for IndexStats {
    /// Same as [`IndexStats::snapshot`].
    fn clone(&self) -> Self {
        self.snapshot()
    }
}

/// One slot as read: where it is, its meta and its key.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Index of the bucket holding the slot.
    bucket: u64,
    /// Offset of the slot's meta word in the region.
    offset: Offset,
    meta: u64,
    key: u64,
}

impl Slot {
    /// Whether the slot holds the published entry of `(table, key)`.
    fn holds(&self, table: TableId, key: u64) -> bool {
        is_entry(self.meta) && meta_table(self.meta) == table && self.key == key
    }
}

/// The slots of one bucket.
type Bucket = [Slot; SLOTS_PER_BUCKET];

/// What a walk along a probe chain found.
#[derive(Debug, Default)]
struct Probe {
    /// The slot holding the key, if any.
    hit: Option<Slot>,
    /// The first empty or tombstone slot before the key or the end of the chain, if any.
    free: Option<Slot>,
}

/// READ verbs issued by one operation and buckets they covered.
#[derive(Debug, Default)]
struct Cost {
    reads: u64,
    buckets: u64,
}

/// Decodes the 64 bytes `raw` of bucket `bucket`, READ from region offset `base`.
fn parse_bucket(raw: &[u8], bucket: u64, base: u64) -> Bucket {
    let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().expect("8-byte word"));
    std::array::from_fn(|j| Slot {
        bucket,
        offset: Offset(base + j as u64 * SLOT_BYTES),
        meta: word(j * SLOT_BYTES as usize),
        key: word(j * SLOT_BYTES as usize + 8),
    })
}

/// Whether `meta` is a published entry.
fn is_entry(meta: u64) -> bool {
    meta != EMPTY && meta & STATE_MASK == 0
}

/// Whether `meta` is empty or a tombstone, i.e. an insert may claim the slot.
fn is_free(meta: u64) -> bool {
    meta == EMPTY || meta & STATE_MASK == TOMBSTONE
}

/// The table id of an entry's meta.
fn meta_table(meta: u64) -> TableId {
    TableId((meta >> OFFSET_BITS) as u16)
}

/// Builds the meta of an entry.
fn encode_meta(table: TableId, offset: Offset) -> u64 {
    (table.0 as u64) << OFFSET_BITS | offset.0
}

/// splitmix64's finalizer (Steele, Lea and Flood, 2014): a bijective 64-bit mix whose every
/// output bit depends on every input bit.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hash of `(table, key)`: the key plus a per-table odd multiple of the golden ratio, mixed,
/// so that equal keys of different tables land in unrelated buckets.
fn hash(table: TableId, key: u64) -> u64 {
    let salt = (table.0 as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    mix64(key.wrapping_add(salt))
}

/// An RDMA-friendly hash index over the index area of one MemStore [`Layout`]
/// (RedT §4.2 / CREST §4.1 (RDMA-friendly hash index, as in FaRM/FORD)).
///
/// The `Index` holds no data: every bucket lives in the target node's region and is reached
/// through the [`Verbs`] passed to each call, so one `Index` serves every node sharing the
/// layout and any number of threads at once. It keeps the layout, the probing parameters and
/// its [`IndexStats`].
///
/// # Layout
///
/// The index area of a [`Layout`] (`index_off`, `index_bytes`) is an array of 64-byte
/// buckets; each bucket holds [`Index::SLOTS_PER_BUCKET`] slots of 16 bytes:
///
/// ```text
/// slot  = [meta: u64][key: u64]            (little-endian words, meta first)
/// meta  = record offset (low 48 bits) | table id << 48       a published entry
///       = 0                                                  empty
///       = 1                                                  CLAIMED: an insert is writing it
///       = 2, or the removed entry's meta | 2                 TOMBSTONE: removed, reusable
/// ```
///
/// Record offsets are at least 64 and 64-byte aligned, so the low six bits of a published
/// meta are clear while those of CLAIMED and TOMBSTONE are not: no record can be mistaken
/// for a sentinel. A tombstone keeps the removed entry's table and offset so that the
/// remove that made it can tell it from a later one in the same slot.
///
/// # Probing
///
/// The home bucket is a 64-bit mix of `(table, key)` modulo the number of buckets. Probing
/// is linear over whole buckets (wrapping at the end of the array) for at most
/// [`Index::max_probe_buckets`] buckets, and a chain ends at the first bucket that has an
/// empty slot. The invariant every operation keeps is: *no entry passes a bucket that has an
/// empty slot* (an entry passes the buckets from its home up to, not including, its own).
/// So a lookup that stops at the first bucket with an empty slot never misses a key.
///
/// Reads go in growing runs of adjacent buckets: the first READ covers
/// [`Index::read_buckets`] buckets (two by default: 128 bytes cost an RDMA READ about the
/// latency of 64), each further READ twice as many, up to 8 (512 bytes); a READ never wraps
/// past the last bucket. READ verbs per lookup, measured by `tests/index.rs` over a 16 MiB
/// index (262,144 buckets, as in `configs/default.yaml`) with dense keys, half hits and half
/// misses:
///
/// | slot load               | first READ 1 bucket | first READ 2 buckets (default)   |
/// |-------------------------|---------------------|----------------------------------|
/// | 0.375 (default config)  | —                   | 1.005 (hits 1.001, misses 1.009) |
/// | 0.50                    | 1.111               | 1.026 (hits 1.007, misses 1.044) |
/// | 0.75                    | 1.476               | 1.238 (hits 1.063, misses 1.414) |
///
/// Under a steady mix of removes and inserts (20 rounds of as many remove + insert pairs as
/// keys) lookups settle at 1.10-1.14 READs at load 0.5, but at 1.3 at 0.6, 1.9 at 0.7 and
/// 2.6 at 0.75: tombstones that a displaced entry passes stay until an insert reuses them.
/// Hence keep the load at most [`Index::RECOMMENDED_MAX_LOAD`] of the slots (`index_bytes`
/// ≥ 32 bytes per key).
///
/// # Updates and concurrency
///
/// - **Insert** scans the chain (refusing a duplicate) and claims its first empty or
///   tombstone slot with a compare-and-swap of the meta (→ CLAIMED). A claim outside the home
///   bucket is then validated by re-READing the buckets it passes: if one of them now has a
///   free slot, the claim is given back as a tombstone and the insert starts over (this is
///   what makes the tombstone reclamation below safe). Finally one doorbell batch WRITEs the
///   key, then the meta.
/// - **Remove** swaps the meta for a tombstone with a compare-and-swap, then READs forward
///   from its bucket: when no entry and no claim passes that bucket, it swaps the tombstone
///   back to empty. Without this, a steady mix of inserts and removes turns every empty slot
///   into a tombstone and every lookup walks the whole probe limit.
///
/// Inserts and removes of *different* keys may therefore run concurrently from any number
/// of clients. Concurrent inserts of the *same* key are not detected (both may pass the
/// duplicate check): the caller serialises them, as the record's lock or the partition owner
/// does in redt. A client that dies (or meets a verbs error) between claiming and publishing
/// leaves a CLAIMED slot behind: it counts as used and stops reclamation of the tombstones
/// its chain passes. The swap of a tombstone back to empty expects the exact tombstone the
/// remove wrote; it would be fooled only if, between the remove's two compare-and-swaps, the
/// same record offset of the same table were inserted into the same slot and removed again.
///
/// A READ loads a slot's words in ascending order and the meta is published last, so a
/// reader that sees a published meta also sees its key. The one torn view left is the ABA
/// of slot reuse: a reader that loads an old meta, then (after a remove and a reuse of the
/// same slot by another key) the new key. As in FaRM, callers validate the record header
/// (key and table) at the offset they get back before trusting it.
#[derive(Debug)]
pub struct Index {
    layout: Layout,
    max_probe_buckets: u64,
    read_buckets: u64,
    stats: IndexStats,
}

impl Index {
    /// Slots per 64-byte bucket (16 bytes each: meta word, key word).
    pub const SLOTS_PER_BUCKET: usize = SLOTS_PER_BUCKET;

    /// Default maximum probe distance in buckets, home bucket included (256 slots, 4 KiB).
    /// With 32, a 16 MiB index filled with dense keys to 75% of its slots already refuses a
    /// few inserts; with 64 it refuses none. The limit only bounds the worst case (10 READs);
    /// a chain normally ends long before it.
    pub const MAX_PROBE_BUCKETS: u64 = 64;

    /// Default number of adjacent buckets the first READ of a walk covers (128 bytes).
    pub const DEFAULT_READ_BUCKETS: usize = 2;

    /// Recommended upper bound on the fraction of slots holding keys. At this load a lookup
    /// takes about 1.03 READs, and about 1.1 under constant insert/remove churn; an
    /// insert-only table stays under 1.6 READs up to about 0.8, but under churn 0.7 already
    /// costs 1.9. Size `index_bytes` as at least 32 bytes per key.
    pub const RECOMMENDED_MAX_LOAD: f64 = 0.5;

    /// An index over the bucket area of `layout`, probing at most
    /// [`Index::MAX_PROBE_BUCKETS`] buckets, with a first READ of
    /// [`Index::DEFAULT_READ_BUCKETS`] buckets. The area must have been zeroed (by
    /// [`Layout::format`]).
    pub fn new(layout: Layout) -> Index {
        Index {
            layout,
            max_probe_buckets: Self::MAX_PROBE_BUCKETS,
            read_buckets: Self::DEFAULT_READ_BUCKETS as u64,
            stats: IndexStats::default(),
        }
    }

    /// Sets how many adjacent buckets the first READ of a walk covers (1 to 8; 64 bytes
    /// each). Each further READ covers twice as many as the one before, up to 8.
    ///
    /// # Panics
    /// If `buckets` is 0 or more than 8.
    pub fn with_read_buckets(mut self, buckets: usize) -> Index {
        assert!((1..=MAX_READ_BUCKETS as usize).contains(&buckets), "read_buckets must be 1..=8, got {buckets}");
        self.read_buckets = buckets as u64;
        self
    }

    /// Sets the maximum probe distance in buckets (home bucket included). Every client of
    /// one MemStore must use the same value, or a lookup may stop before an entry.
    ///
    /// # Panics
    /// If `buckets` is 0.
    pub fn with_max_probe_buckets(mut self, buckets: u64) -> Index {
        assert!(buckets > 0, "max_probe_buckets must be at least 1");
        self.max_probe_buckets = buckets;
        self
    }

    /// The MemStore layout whose index area this index uses.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of slots of the index ([`Index::SLOTS_PER_BUCKET`] per bucket).
    pub fn capacity_slots(&self) -> u64 {
        self.layout.index_buckets() * SLOTS_PER_BUCKET as u64
    }

    /// Maximum number of buckets a probe chain visits: the configured limit, capped at the
    /// number of buckets.
    pub fn max_probe_buckets(&self) -> u64 {
        self.max_probe_buckets.min(self.layout.index_buckets())
    }

    /// Number of adjacent buckets the first READ of a walk covers.
    pub fn read_buckets(&self) -> usize {
        self.read_buckets as usize
    }

    /// The counters of this index.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The home bucket of `(table, key)`: an index in `0..layout.index_buckets()`.
    ///
    /// # Panics
    /// If the layout has no bucket.
    pub fn home_bucket(&self, table: TableId, key: u64) -> u64 {
        let buckets = self.layout.index_buckets();
        assert!(buckets > 0, "index area has no bucket");
        hash(table, key) % buckets
    }

    /// The absent-key lock of `(table, key)`: the lock word of its home bucket
    /// ([`Layout::absent_lock`]) and the lock group in it, `0..16`, taken from other bits of
    /// the key's hash than its bucket, so keys that share a bucket mostly lock different
    /// groups.
    ///
    /// # Panics
    /// If the index area has no bucket (a validated topology always has one).
    pub fn absent_lock(&self, table: TableId, key: u64) -> (Offset, usize) {
        let h = hash(table, key);
        (self.layout.absent_lock(self.home_bucket(table, key)), (h >> 60) as usize)
    }

    /// Looks up the record offset of `(table, key)` on `node`; `None` when the key is absent.
    ///
    /// READs the probe chain in growing runs of adjacent buckets ([`Index::read_buckets`],
    /// then twice as many each time, up to 8 buckets or 512 bytes) and stops at the key, at
    /// the end of the chain (the first bucket with an empty slot) or after
    /// [`Index::max_probe_buckets`] buckets: one READ in the common case. The offset is not
    /// validated: check the key and table in the record header before trusting it (see the
    /// module docs on torn slots).
    ///
    /// # Errors
    /// Verbs errors ([`Error::Verbs`]).
    pub fn lookup(&self, verbs: &dyn Verbs, node: NodeId, table: TableId, key: u64) -> Result<Option<Offset>> {
        let mut cost = Cost::default();
        let probe = self.probe(verbs, node, table, key, &mut cost);
        self.stats.lookup_reads.fetch_add(cost.reads, Relaxed);
        self.stats.lookup_buckets.fetch_add(cost.buckets, Relaxed);
        let hit = probe?.hit;
        self.stats.lookups.fetch_add(1, Relaxed);
        let counter = if hit.is_some() { &self.stats.found } else { &self.stats.missed };
        counter.fetch_add(1, Relaxed);
        Ok(hit.map(|s| Offset(s.meta & OFFSET_MASK)))
    }

    /// Every published entry of `node`'s index as `(table, key, record offset)`, in bucket
    /// order: a full scan of the index area in READs of 256 buckets (16 KiB) — for status
    /// reports and checks, not the transaction path. Entries being inserted or removed while
    /// it runs may or may not appear.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn entries(&self, verbs: &dyn Verbs, node: NodeId) -> Result<Vec<(TableId, u64, Offset)>> {
        Ok(self.entries_in(verbs, node, 0, self.layout.index_buckets())?.0)
    }

    /// The published entries of buckets `first_bucket .. first_bucket + buckets` of
    /// `node`'s index (clipped at the last bucket) as `(table, key, record offset)`, in
    /// bucket order, and the bucket to resume from (equal to [`Layout::index_buckets`]
    /// once the scan has reached the end). The bounded form of [`Index::entries`], for scans
    /// done a piece at a time (a rebuild's snapshot copy, docs/design.md, "Rebuild"):
    /// entries never move between buckets (inserts claim slots, removes leave tombstones),
    /// so a bucket number is a stable cursor. Entries inserted or removed meanwhile may or
    /// may not appear.
    ///
    /// # Errors
    /// Verbs errors.
    #[allow(clippy::type_complexity)]
    pub fn entries_in(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        first_bucket: u64,
        buckets: u64,
    ) -> Result<(Vec<(TableId, u64, Offset)>, u64)> {
        let mut out = Vec::new();
        let next =
            self.scan_buckets(verbs, node, first_bucket, buckets, |_, table, key, at| out.push((table, key, at)))?;
        Ok((out, next))
    }

    /// Calls `f(bucket, table, key, record offset)` for every published entry of buckets
    /// `first_bucket .. first_bucket + buckets` (clipped at the last bucket), in order, READing
    /// the area in pieces of at most 256 buckets (16 KiB). Returns the bucket after the last
    /// one scanned (`first_bucket` if it is past the end).
    pub(crate) fn scan_buckets(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        first_bucket: u64,
        buckets: u64,
        mut f: impl FnMut(u64, TableId, u64, Offset),
    ) -> Result<u64> {
        const CHUNK: u64 = 256;
        let end = first_bucket.saturating_add(buckets).min(self.layout.index_buckets());
        let mut buf = vec![0u8; (CHUNK.min(end.saturating_sub(first_bucket)) * LINE) as usize];
        let mut first = first_bucket;
        while first < end {
            let n = CHUNK.min(end - first);
            let base = self.layout.index_off + first * LINE;
            let raw = &mut buf[..(n * LINE) as usize];
            verbs.read(node, Offset(base), raw)?;
            for (i, chunk) in raw.chunks_exact(LINE as usize).enumerate() {
                let b = first + i as u64;
                for slot in parse_bucket(chunk, b, base + i as u64 * LINE) {
                    if is_entry(slot.meta) {
                        f(b, meta_table(slot.meta), slot.key, Offset(slot.meta & OFFSET_MASK));
                    }
                }
            }
            first += n;
        }
        Ok(first)
    }

    /// Looks up several keys of one node with one doorbell batch: the first READ of every
    /// key's probe chain is posted together, and only a key whose chain goes on past that
    /// first window (rare below [`Index::RECOMMENDED_MAX_LOAD`]) continues alone as in
    /// [`Index::lookup`]. Returns one result per key, in order.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn lookup_many(&self, verbs: &dyn Verbs, node: NodeId, keys: &[(TableId, u64)]) -> Result<Vec<Option<Offset>>> {
        let buckets = self.layout.index_buckets();
        if buckets == 0 || keys.is_empty() {
            return keys.iter().map(|&(t, k)| self.lookup(verbs, node, t, k)).collect();
        }
        let mut batch = crate::verbs::DoorbellBatch::new();
        let mut windows = Vec::with_capacity(keys.len());
        for &(table, key) in keys {
            let home = self.home_bucket(table, key);
            let span = self.read_buckets.min(self.max_probe_buckets()).min(buckets - home);
            let base = self.layout.index_off + home * LINE;
            windows.push((home, span, base, batch.read(Offset(base), (span * LINE) as usize)));
        }
        verbs.post_batch(node, &mut batch)?;
        let mut out = Vec::with_capacity(keys.len());
        for (&(table, key), &(home, span, base, r)) in keys.iter().zip(&windows) {
            let bytes = batch.read_result(r);
            let mut result = None;
            for (i, raw) in bytes.chunks_exact(LINE as usize).enumerate() {
                let bucket = parse_bucket(raw, home + i as u64, base + i as u64 * LINE);
                if let Some(hit) = bucket.iter().find(|s| s.holds(table, key)) {
                    result = Some(Some(Offset(hit.meta & OFFSET_MASK)));
                    break;
                }
                if bucket.iter().any(|s| s.meta == EMPTY) {
                    result = Some(None);
                    break;
                }
            }
            match result {
                Some(found) => {
                    self.stats.lookup_reads.fetch_add(1, Relaxed);
                    self.stats.lookup_buckets.fetch_add(span, Relaxed);
                    self.stats.lookups.fetch_add(1, Relaxed);
                    let counter = if found.is_some() { &self.stats.found } else { &self.stats.missed };
                    counter.fetch_add(1, Relaxed);
                    out.push(found);
                }
                None => {
                    // The chain continues: count the batched READ and walk it alone.
                    self.stats.lookup_reads.fetch_add(1, Relaxed);
                    self.stats.lookup_buckets.fetch_add(span, Relaxed);
                    out.push(self.lookup(verbs, node, table, key)?);
                }
            }
        }
        Ok(out)
    }

    /// Inserts `(table, key)` → `offset` on `node`.
    ///
    /// Walks the probe chain to its end (refusing a duplicate), claims the first empty or
    /// tombstone slot with a compare-and-swap of its meta to CLAIMED, validates a claim
    /// outside the home bucket by re-READing the buckets it passes, then WRITEs the key and
    /// the meta in one doorbell batch (in that order). A lost compare-and-swap or a failed
    /// validation starts over. Typically one READ, one compare-and-swap and one batch of two
    /// WRITEs. Inserts of different keys may run concurrently; inserts of the same key must
    /// be serialised by the caller (the record's lock or partition owner), or both may
    /// succeed.
    ///
    /// # Errors
    /// [`Error::DuplicateKey`] when the key is present; [`Error::IndexFull`] when no empty or
    /// tombstone slot lies within [`Index::max_probe_buckets`] of the home bucket; verbs
    /// errors (a verbs error after the claim leaves the slot CLAIMED).
    ///
    /// # Panics
    /// If `offset` is not a record offset: below 64, not 64-byte aligned, or not below 2^48.
    pub fn insert(&self, verbs: &dyn Verbs, node: NodeId, table: TableId, key: u64, offset: Offset) -> Result<()> {
        assert!(
            offset.0 >= LINE && offset.0 % LINE == 0 && offset.0 <= OFFSET_MASK,
            "index entries point at 64-aligned records in [64, 2^48), got {offset}"
        );
        self.stats.inserts.fetch_add(1, Relaxed);
        let mut cost = Cost::default();
        let done = self.insert_inner(verbs, node, table, key, offset, &mut cost);
        self.stats.update_reads.fetch_add(cost.reads, Relaxed);
        done
    }

    fn insert_inner(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        table: TableId,
        key: u64,
        offset: Offset,
        cost: &mut Cost,
    ) -> Result<()> {
        let full = || Error::IndexFull { node, table, key };
        if self.layout.index_buckets() == 0 {
            return Err(full());
        }
        let home = self.home_bucket(table, key);
        loop {
            let probe = self.probe(verbs, node, table, key, cost)?;
            if probe.hit.is_some() {
                return Err(Error::DuplicateKey { table, key });
            }
            let free = probe.free.ok_or_else(full)?;
            if verbs.compare_and_swap(node, free.offset, free.meta, CLAIMED)? != free.meta {
                self.stats.claim_conflicts.fetch_add(1, Relaxed);
                continue;
            }
            if free.bucket != home && !self.passed_buckets_are_full(verbs, node, home, free.bucket, cost)? {
                // A slot this claim passes was freed since the walk: a remove may be turning
                // it back to empty, which would cut the chain before this slot. Give the
                // claim back as a tombstone (never as empty: an insert may have passed it).
                verbs.compare_and_swap(node, free.offset, CLAIMED, TOMBSTONE)?;
                self.stats.claim_conflicts.fetch_add(1, Relaxed);
                continue;
            }
            let mut batch = DoorbellBatch::new();
            batch.write(Offset(free.offset.0 + 8), key.to_le_bytes().to_vec());
            batch.write(free.offset, encode_meta(table, offset).to_le_bytes().to_vec());
            return Ok(verbs.post_batch(node, &mut batch)?);
        }
    }

    /// Removes `(table, key)` from `node`'s index; returns whether the key was present.
    ///
    /// Swaps the entry's meta for a tombstone with a compare-and-swap, then READs forward
    /// from its bucket and, when no entry or claim passes that bucket, swaps the tombstone
    /// for empty (a second compare-and-swap). Typically two READs and two compare-and-swaps.
    ///
    /// # Errors
    /// Verbs errors (after the first compare-and-swap the key is removed, whatever follows).
    pub fn remove(&self, verbs: &dyn Verbs, node: NodeId, table: TableId, key: u64) -> Result<bool> {
        self.stats.removes.fetch_add(1, Relaxed);
        let mut cost = Cost::default();
        let done = self.remove_inner(verbs, node, table, key, &mut cost);
        self.stats.update_reads.fetch_add(cost.reads, Relaxed);
        done
    }

    fn remove_inner(&self, verbs: &dyn Verbs, node: NodeId, table: TableId, key: u64, cost: &mut Cost) -> Result<bool> {
        loop {
            let Some(hit) = self.probe(verbs, node, table, key, cost)?.hit else {
                return Ok(false);
            };
            let tombstone = hit.meta | TOMBSTONE;
            if verbs.compare_and_swap(node, hit.offset, hit.meta, tombstone)? != hit.meta {
                // The slot changed under us: a concurrent remove of the same key won.
                self.stats.claim_conflicts.fetch_add(1, Relaxed);
                continue;
            }
            // The READ must follow the tombstone: from now on no insert passes this bucket
            // (it would take the tombstone), so only claims already made can pass it, and
            // those the READ sees or their validation catches.
            if !self.anything_passes(verbs, node, hit.bucket, cost)?
                && verbs.compare_and_swap(node, hit.offset, tombstone, EMPTY)? == tombstone
            {
                self.stats.reclaimed.fetch_add(1, Relaxed);
            }
            return Ok(true);
        }
    }

    /// Walks the probe chain of `(table, key)` from its home bucket; stops at the key, at the
    /// end of the chain or at the probe limit, noting on the way the first free slot (where
    /// an insert goes).
    fn probe(&self, verbs: &dyn Verbs, node: NodeId, table: TableId, key: u64, cost: &mut Cost) -> Result<Probe> {
        let mut probe = Probe::default();
        if self.layout.index_buckets() == 0 {
            return Ok(probe);
        }
        let home = self.home_bucket(table, key);
        self.walk(verbs, node, home, self.max_probe_buckets(), cost, |bucket| {
            if let Some(hit) = bucket.iter().find(|s| s.holds(table, key)) {
                probe.hit = Some(*hit);
                return Break(());
            }
            probe.free = probe.free.or_else(|| bucket.iter().find(|s| is_free(s.meta)).copied());
            if bucket.iter().any(|s| s.meta == EMPTY) {
                Break(())
            } else {
                Continue(())
            }
        })?;
        Ok(probe)
    }

    /// Whether the `count`-bucket run from `home` up to (not including) `last` has no free
    /// slot: the validation of a claim in bucket `last`.
    fn passed_buckets_are_full(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        home: u64,
        last: u64,
        cost: &mut Cost,
    ) -> Result<bool> {
        let buckets = self.layout.index_buckets();
        let count = (last + buckets - home) % buckets;
        let mut full = true;
        self.walk(verbs, node, home, count, cost, |bucket| {
            if bucket.iter().any(|s| is_free(s.meta)) {
                full = false;
                Break(())
            } else {
                Continue(())
            }
        })?;
        Ok(full)
    }

    /// Whether any entry or claim may pass bucket `at`: READs forward from `at` until a
    /// bucket with an empty slot (no entry passes it, so none beyond it passes `at`) or the
    /// probe limit (no entry lies further from its home), and reports a published entry
    /// homed before `at` or a CLAIMED slot (key unknown) on the way.
    fn anything_passes(&self, verbs: &dyn Verbs, node: NodeId, at: u64, cost: &mut Cost) -> Result<bool> {
        let buckets = self.layout.index_buckets();
        let mut passes = false;
        self.walk(verbs, node, at, self.max_probe_buckets(), cost, |bucket| {
            let here = bucket[0].bucket;
            if here != at {
                passes = bucket.iter().any(|s| {
                    s.meta == CLAIMED
                        || is_entry(s.meta) && {
                            let home = hash(meta_table(s.meta), s.key) % buckets;
                            (at + buckets - home) % buckets < (here + buckets - home) % buckets
                        }
                });
            }
            if passes || bucket.iter().any(|s| s.meta == EMPTY) {
                Break(())
            } else {
                Continue(())
            }
        })?;
        Ok(passes)
    }

    /// READs `count` buckets from bucket `start` (wrapping) in growing runs — the first of
    /// [`Index::read_buckets`] buckets, each next one twice as long, up to 8, never wrapping
    /// inside one READ — and calls `visit` on each bucket in order until it breaks.
    fn walk(
        &self,
        verbs: &dyn Verbs,
        node: NodeId,
        start: u64,
        count: u64,
        cost: &mut Cost,
        mut visit: impl FnMut(&Bucket) -> ControlFlow<()>,
    ) -> Result<()> {
        let buckets = self.layout.index_buckets();
        let mut buf = [0u8; (MAX_READ_BUCKETS * LINE) as usize];
        let mut window = self.read_buckets;
        let mut done = 0;
        while done < count {
            let first = (start + done) % buckets;
            let span = window.min(count - done).min(buckets - first);
            let bytes = &mut buf[..(span * LINE) as usize];
            let base = self.layout.index_off + first * LINE;
            verbs.read(node, Offset(base), bytes)?;
            cost.reads += 1;
            cost.buckets += span;
            for (i, raw) in bytes.chunks_exact(LINE as usize).enumerate() {
                let slots = parse_bucket(raw, first + i as u64, base + i as u64 * LINE);
                if visit(&slots).is_break() {
                    return Ok(());
                }
            }
            done += span;
            window = (window * 2).min(MAX_READ_BUCKETS);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::{LocalVerbs, VerbCounters};
    use proptest::prelude::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use redt_proto::MemStoreConfig;
    use std::collections::HashMap;
    use std::sync::Mutex;

    const N0: NodeId = NodeId(0);
    const T: TableId = TableId(3);

    /// A formatted single-node MemStore with `buckets` index buckets, and an index over it.
    fn setup(buckets: u64) -> (LocalVerbs, Index) {
        let cfg = MemStoreConfig { size_bytes: 1 << 20, index_bytes: buckets * LINE, ring_bytes: 4096 };
        let layout = Layout::from_config(&cfg);
        let verbs = LocalVerbs::in_process([N0], layout.size);
        layout.format(verbs.region(N0).expect("node 0 was created"));
        (verbs, Index::new(layout))
    }

    fn off(i: u64) -> Offset {
        Offset(LINE * (i + 1))
    }

    /// `n` keys of table `T` whose home bucket is `bucket`.
    fn keys_homed_at(index: &Index, bucket: u64, n: usize) -> Vec<u64> {
        (0..).filter(|&k| index.home_bucket(T, k) == bucket).take(n).collect()
    }

    /// The meta word of slot `slot` of bucket `bucket`, read directly from the region.
    fn meta_at(v: &LocalVerbs, idx: &Index, bucket: u64, slot: u64) -> u64 {
        let at = idx.layout.index_off + bucket * LINE + slot * SLOT_BYTES;
        v.region(N0).unwrap().word(at).load(Relaxed)
    }

    /// Checks the index invariant on the raw region: no published entry passes a bucket with
    /// an empty slot, and none lies beyond the probe limit; no slot is left CLAIMED.
    fn check_invariant(v: &LocalVerbs, idx: &Index) -> std::result::Result<(), String> {
        let n = idx.layout.index_buckets();
        let slot = |b: u64, s: u64| {
            let at = idx.layout.index_off + b * LINE + s * SLOT_BYTES;
            let r = v.region(N0).unwrap();
            (r.word(at).load(Relaxed), r.word(at + 8).load(Relaxed))
        };
        let has_empty = |b: u64| (0..4).any(|s| slot(b, s).0 == EMPTY);
        for b in 0..n {
            for s in 0..4 {
                let (meta, key) = slot(b, s);
                if meta == CLAIMED {
                    return Err(format!("bucket {b} slot {s} left CLAIMED"));
                }
                if !is_entry(meta) {
                    continue;
                }
                let home = idx.home_bucket(meta_table(meta), key);
                let dist = (b + n - home) % n;
                if dist >= idx.max_probe_buckets() {
                    return Err(format!("key {key} in bucket {b} is {dist} buckets from home"));
                }
                if let Some(p) = (0..dist).map(|d| (home + d) % n).find(|&p| has_empty(p)) {
                    return Err(format!(
                        "key {key} (home {home}) in bucket {b} passes bucket {p}, which has an empty slot"
                    ));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn sentinels_are_never_entries() {
        let entry = encode_meta(TableId(7), Offset(128));
        assert!(!is_entry(EMPTY) && !is_entry(CLAIMED) && !is_entry(TOMBSTONE) && !is_entry(entry | TOMBSTONE));
        assert!(is_free(EMPTY) && is_free(TOMBSTONE) && is_free(entry | TOMBSTONE));
        assert!(!is_free(CLAIMED) && !is_free(entry));
        assert!(is_entry(encode_meta(TableId(0), Offset(64))));
        assert!(is_entry(encode_meta(TableId(u16::MAX), Offset(OFFSET_MASK & !63))));
        assert_eq!(meta_table(entry), TableId(7));
    }

    #[test]
    fn insert_lookup_remove() {
        let (v, idx) = setup(16);
        assert_eq!(idx.lookup(&v, N0, T, 42).unwrap(), None);
        idx.insert(&v, N0, T, 42, off(1)).unwrap();
        assert_eq!(idx.lookup(&v, N0, T, 42).unwrap(), Some(off(1)));
        // Same key, other table: a different entry.
        assert_eq!(idx.lookup(&v, N0, TableId(4), 42).unwrap(), None);
        idx.insert(&v, N0, TableId(4), 42, off(2)).unwrap();
        assert_eq!(idx.lookup(&v, N0, TableId(4), 42).unwrap(), Some(off(2)));
        assert!(idx.remove(&v, N0, T, 42).unwrap());
        assert!(!idx.remove(&v, N0, T, 42).unwrap());
        assert_eq!(idx.lookup(&v, N0, T, 42).unwrap(), None);
        assert_eq!(idx.lookup(&v, N0, TableId(4), 42).unwrap(), Some(off(2)));
        let s = idx.stats().snapshot();
        assert_eq!((s.lookups(), s.found(), s.missed()), (6, 3, 3));
        assert_eq!((s.inserts(), s.removes(), s.reclaimed()), (2, 2, 1));
        assert_eq!(s.lookup_reads(), 6);
    }

    #[test]
    fn verbs_per_operation() {
        // An insert into its home bucket: one READ, one CAS, one batch of two WRITEs. A
        // remove: a READ, a CAS to tombstone, a READ from its bucket, a CAS to empty.
        let (v, idx) = setup(16);
        let c0 = v.counters().snapshot();
        idx.insert(&v, N0, T, 9, off(9)).unwrap();
        let c1 = v.counters().snapshot();
        let d = c1.since(&c0);
        assert_eq!((d.read, d.cas, d.write, d.doorbells), (1, 1, 2, 3));
        assert!(idx.remove(&v, N0, T, 9).unwrap());
        let d = v.counters().snapshot().since(&c1);
        assert_eq!((d.read, d.cas, d.write, d.doorbells), (2, 2, 0, 4));
        assert_eq!(idx.stats().update_reads(), 3);
    }

    #[test]
    fn duplicate_is_refused() {
        let (v, idx) = setup(16);
        idx.insert(&v, N0, T, 7, off(1)).unwrap();
        let e = idx.insert(&v, N0, T, 7, off(2)).unwrap_err();
        assert!(matches!(e, Error::DuplicateKey { table: T, key: 7 }), "{e}");
        assert_eq!(idx.lookup(&v, N0, T, 7).unwrap(), Some(off(1)));
    }

    #[test]
    fn displaced_key_keeps_the_tombstone_it_passes() {
        // Bucket 5 full, key #4 displaced to bucket 6. Removing key #0 leaves a tombstone
        // (key #4 passes bucket 5), key #4 stays reachable, and re-inserting it is refused.
        let (v, idx) = setup(16);
        let ks = keys_homed_at(&idx, 5, 6);
        for (i, &k) in ks[..5].iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        assert!(idx.remove(&v, N0, T, ks[0]).unwrap());
        assert_eq!(meta_at(&v, &idx, 5, 0), encode_meta(T, off(0)) | TOMBSTONE);
        assert_eq!(idx.stats().reclaimed(), 0);
        assert_eq!(idx.lookup(&v, N0, T, ks[4]).unwrap(), Some(off(4)));
        assert!(matches!(idx.insert(&v, N0, T, ks[4], off(9)), Err(Error::DuplicateKey { .. })));
        // The next key homed at 5 reuses the tombstone rather than a slot of bucket 6.
        idx.insert(&v, N0, T, ks[5], off(5)).unwrap();
        assert_eq!(meta_at(&v, &idx, 5, 0), encode_meta(T, off(5)));
        assert_eq!(meta_at(&v, &idx, 6, 1), EMPTY);
        // Removing the displaced key frees its slot for good: nothing passes bucket 6.
        assert!(idx.remove(&v, N0, T, ks[4]).unwrap());
        assert_eq!(meta_at(&v, &idx, 6, 0), EMPTY);
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn tombstone_left_behind_a_passer_is_reclaimed_by_the_next_remove_only_if_it_is_its_own() {
        // A tombstone stays until an insert reuses it; removing the passer reclaims only the
        // passer's own slot (reclaiming is per remove, not a sweep).
        let (v, idx) = setup(16);
        let ks = keys_homed_at(&idx, 2, 5);
        for (i, &k) in ks.iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        assert!(idx.remove(&v, N0, T, ks[1]).unwrap());
        assert!(idx.remove(&v, N0, T, ks[4]).unwrap());
        assert_eq!(meta_at(&v, &idx, 2, 1) & STATE_MASK, TOMBSTONE);
        assert_eq!(meta_at(&v, &idx, 3, 0), EMPTY);
        // Bucket 2 now ends the chain through its tombstone? No: a tombstone is not empty, so
        // a miss homed at 2 still reads bucket 3 (in the same first READ).
        let before = idx.stats().snapshot();
        assert_eq!(idx.lookup(&v, N0, T, ks[4]).unwrap(), None);
        assert_eq!(idx.stats().since(&before).lookup_buckets(), 2);
        // Removing a key of bucket 2 again reclaims that one: nothing passes bucket 2 now.
        assert!(idx.remove(&v, N0, T, ks[2]).unwrap());
        assert_eq!(meta_at(&v, &idx, 2, 2), EMPTY);
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn claimed_slot_blocks_reclaiming_and_is_skipped() {
        // A slot left CLAIMED (an insert in flight, or its client died) is neither a hit nor
        // free, does not end a chain, and may hide a key passing the bucket before it.
        let (v, idx) = setup(8);
        let ks = keys_homed_at(&idx, 0, 6);
        for (i, &k) in ks[..4].iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        let region = v.region(N0).unwrap();
        let claimed = idx.layout.index_off + LINE;
        region.write(claimed, &CLAIMED.to_le_bytes());
        region.write(claimed + 8, &ks[4].to_le_bytes());
        assert_eq!(idx.lookup(&v, N0, T, ks[4]).unwrap(), None);
        assert!(idx.remove(&v, N0, T, ks[0]).unwrap());
        assert_eq!(meta_at(&v, &idx, 0, 0) & STATE_MASK, TOMBSTONE);
        idx.insert(&v, N0, T, ks[5], off(5)).unwrap();
        assert_eq!(meta_at(&v, &idx, 0, 0), encode_meta(T, off(5)));
    }

    #[test]
    fn probes_across_buckets_and_wraps() {
        let (v, idx) = setup(8);
        // Nine keys homed at the last bucket: four there, four in bucket 0, one in bucket 1.
        let ks = keys_homed_at(&idx, 7, 9);
        for (i, &k) in ks.iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        assert_eq!(meta_at(&v, &idx, 1, 0), encode_meta(T, off(8)));
        // The first READ stops at the end of the array (bucket 7 alone); the second covers
        // buckets 0 to 3.
        for (i, &k) in ks.iter().enumerate() {
            let before = idx.stats().snapshot();
            assert_eq!(idx.lookup(&v, N0, T, k).unwrap(), Some(off(i as u64)));
            let d = idx.stats().since(&before);
            let want = if i < 4 { (1, 1) } else { (2, 5) };
            assert_eq!((d.lookup_reads(), d.lookup_buckets()), want, "key #{i}");
        }
        // A miss homed at 7 walks to bucket 1, the first with an empty slot.
        let miss = keys_homed_at(&idx, 7, 10)[9];
        let before = idx.stats().snapshot();
        assert_eq!(idx.lookup(&v, N0, T, miss).unwrap(), None);
        assert_eq!(idx.stats().since(&before).lookup_reads(), 2);
        // Removing the wrapped keys of bucket 0 keeps tombstones (key #8 passes bucket 0).
        assert!(idx.remove(&v, N0, T, ks[4]).unwrap());
        assert_eq!(meta_at(&v, &idx, 0, 0) & STATE_MASK, TOMBSTONE);
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn read_window_doubles_along_the_chain() {
        // Thirteen keys homed at bucket 2 fill buckets 2, 3, 4 and one slot of bucket 5.
        let (v, idx) = setup(16);
        let idx = idx.with_read_buckets(1);
        let ks = keys_homed_at(&idx, 2, 13);
        for (i, &k) in ks.iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        // READs cover bucket 2, then 3-4, then 5-8.
        for (i, &k) in ks.iter().enumerate() {
            let before = idx.stats().snapshot();
            assert_eq!(idx.lookup(&v, N0, T, k).unwrap(), Some(off(i as u64)));
            let d = idx.stats().since(&before);
            let want = match i {
                0..4 => (1, 1),
                4..12 => (2, 3),
                _ => (3, 7),
            };
            assert_eq!((d.lookup_reads(), d.lookup_buckets()), want, "key #{i}");
        }
    }

    #[test]
    fn two_bucket_first_read() {
        let (v, idx) = setup(16);
        let ks = keys_homed_at(&idx, 4, 9);
        for (i, &k) in ks.iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        let before = idx.stats().snapshot();
        for &k in &ks {
            assert!(idx.lookup(&v, N0, T, k).unwrap().is_some());
        }
        let d = idx.stats().since(&before);
        // Buckets 4 and 5 in the first READ; key #8 (bucket 6) needs a second, of 6 to 9.
        assert_eq!(d.lookup_reads(), 8 + 2);
        assert_eq!(d.lookup_buckets(), 8 * 2 + 2 + 4);
    }

    #[test]
    fn full_tiny_index() {
        let (v, idx) = setup(2);
        for k in 0..8 {
            idx.insert(&v, N0, T, k, off(k)).unwrap();
        }
        let e = idx.insert(&v, N0, T, 100, off(100)).unwrap_err();
        assert!(matches!(e, Error::IndexFull { node: N0, table: T, key: 100 }), "{e}");
        // A miss on a full index reads every bucket once and stops.
        assert_eq!(idx.lookup(&v, N0, T, 100).unwrap(), None);
        for k in 0..8 {
            assert_eq!(idx.lookup(&v, N0, T, k).unwrap(), Some(off(k)));
        }
        assert!(idx.remove(&v, N0, T, 3).unwrap());
        idx.insert(&v, N0, T, 100, off(100)).unwrap();
        assert_eq!(idx.lookup(&v, N0, T, 100).unwrap(), Some(off(100)));
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn probe_limit_gives_index_full() {
        let (v, idx) = setup(16);
        let idx = idx.with_max_probe_buckets(2);
        let ks = keys_homed_at(&idx, 9, 9);
        for (i, &k) in ks[..8].iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        assert!(matches!(idx.insert(&v, N0, T, ks[8], off(8)), Err(Error::IndexFull { .. })));
    }

    #[test]
    #[should_panic(expected = "64-aligned")]
    fn unaligned_offset_panics() {
        let (v, idx) = setup(4);
        let _ = idx.insert(&v, N0, T, 1, Offset(65));
    }

    #[test]
    fn verbs_errors_propagate() {
        let (v, idx) = setup(4);
        assert!(matches!(
            idx.lookup(&v, NodeId(9), T, 1),
            Err(Error::Verbs(redt_verbs::Error::UnknownNode(NodeId(9))))
        ));
        assert!(matches!(
            idx.insert(&v, NodeId(9), T, 1, off(1)),
            Err(Error::Verbs(redt_verbs::Error::UnknownNode(_)))
        ));
        assert!(matches!(idx.remove(&v, NodeId(9), T, 1), Err(Error::Verbs(redt_verbs::Error::UnknownNode(_)))));
        assert_eq!(idx.stats().lookups(), 0);
    }

    /// Verbs that run a hook (once) right after the first successful claim, to place another
    /// client's steps between an insert's claim and its validation.
    struct ClaimHook<'a> {
        inner: &'a LocalVerbs,
        hook: Mutex<Option<Hook<'a>>>,
    }

    /// Another client's steps, run with direct access to the backend.
    type Hook<'a> = Box<dyn FnOnce(&LocalVerbs) + Send + 'a>;

    impl Verbs for ClaimHook<'_> {
        fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> redt_verbs::Result<()> {
            self.inner.read(node, offset, buf)
        }
        fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> redt_verbs::Result<()> {
            self.inner.write(node, offset, data)
        }
        fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> redt_verbs::Result<u64> {
            let old = self.inner.compare_and_swap(node, offset, expected, new)?;
            if new == CLAIMED && old == expected {
                if let Some(hook) = self.hook.lock().unwrap().take() {
                    hook(self.inner);
                }
            }
            Ok(old)
        }
        fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> redt_verbs::Result<u64> {
            self.inner.fetch_and_add(node, offset, add)
        }
        fn masked_compare_and_swap(
            &self,
            n: NodeId,
            o: Offset,
            c: u64,
            cm: u64,
            s: u64,
            sm: u64,
        ) -> redt_verbs::Result<u64> {
            self.inner.masked_compare_and_swap(n, o, c, cm, s, sm)
        }
        fn masked_fetch_and_add(
            &self,
            node: NodeId,
            offset: Offset,
            add: u64,
            boundary: u64,
        ) -> redt_verbs::Result<u64> {
            self.inner.masked_fetch_and_add(node, offset, add, boundary)
        }
        fn post_batch(&self, node: NodeId, batch: &mut crate::verbs::DoorbellBatch) -> redt_verbs::Result<()> {
            self.inner.post_batch(node, batch)
        }
        fn counters(&self) -> &VerbCounters {
            self.inner.counters()
        }
    }

    #[test]
    fn claim_passing_a_slot_freed_meanwhile_is_given_back() {
        // Bucket 5 full; key #4 walks it, claims a slot of bucket 6, and before it validates,
        // another client removes key #0 from bucket 5. The claim is given back as a
        // tombstone and the insert takes the freed slot in its home bucket instead.
        let (v, idx) = setup(16);
        let ks = keys_homed_at(&idx, 5, 5);
        for (i, &k) in ks[..4].iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        let idx_ref = &idx;
        let k0 = ks[0];
        let hooked = ClaimHook {
            inner: &v,
            hook: Mutex::new(Some(Box::new(move |v: &LocalVerbs| {
                assert!(idx_ref.remove(v, N0, T, k0).unwrap());
            }))),
        };
        idx.insert(&hooked, N0, T, ks[4], off(4)).unwrap();
        // The remove saw the claim in bucket 6 and kept its tombstone; the insert took it.
        assert_eq!(meta_at(&v, &idx, 5, 0), encode_meta(T, off(4)));
        assert_eq!(meta_at(&v, &idx, 6, 0), TOMBSTONE);
        assert_eq!(idx.stats().claim_conflicts(), 1);
        assert_eq!(idx.stats().reclaimed(), 0);
        assert_eq!(idx.lookup(&v, N0, T, ks[4]).unwrap(), Some(off(4)));
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn claim_passing_a_slot_emptied_meanwhile_is_given_back() {
        // As above, but the other client is a remove whose forward READ came before the
        // claim, so it turned its slot straight back to empty: validation catches it.
        let (v, idx) = setup(16);
        let ks = keys_homed_at(&idx, 5, 5);
        for (i, &k) in ks[..4].iter().enumerate() {
            idx.insert(&v, N0, T, k, off(i as u64)).unwrap();
        }
        let slot = idx.layout.index_off + 5 * LINE + 2 * SLOT_BYTES;
        let hooked = ClaimHook {
            inner: &v,
            hook: Mutex::new(Some(Box::new(move |v: &LocalVerbs| {
                v.region(N0).unwrap().write(slot, &EMPTY.to_le_bytes());
            }))),
        };
        idx.insert(&hooked, N0, T, ks[4], off(4)).unwrap();
        assert_eq!(meta_at(&v, &idx, 5, 2), encode_meta(T, off(4)));
        assert_eq!(meta_at(&v, &idx, 6, 0), TOMBSTONE);
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn concurrent_inserts_of_disjoint_keys() {
        // 4 threads × 750 keys in 4096 slots (~73% load) so that threads race for slots.
        let (v, idx) = setup(1024);
        let per_thread = 750u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (v, idx) = (&v, &idx);
                s.spawn(move || {
                    for i in 0..per_thread {
                        let k = i * 4 + t;
                        idx.insert(v, N0, T, k, off(k)).unwrap();
                    }
                });
            }
        });
        for k in 0..4 * per_thread {
            assert_eq!(idx.lookup(&v, N0, T, k).unwrap(), Some(off(k)), "key {k}");
        }
        assert_eq!(idx.stats().found(), 4 * per_thread);
        check_invariant(&v, &idx).unwrap();
    }

    #[test]
    fn concurrent_churn_of_disjoint_keys() {
        // 4 threads insert, remove and look up their own keys (k % 4 == thread) in a crowded
        // 32-bucket index (up to 80 of 128 slots live): every lookup of a thread's own key
        // must agree with that thread's model while the others churn around it.
        let (v, idx) = setup(32);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (v, idx) = (&v, &idx);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t);
                    let mut live: Vec<u64> = Vec::new();
                    let mut next = t;
                    for step in 0..4000 {
                        let grow = live.len() < 10 || (live.len() < 20 && rng.gen_bool(0.5));
                        if grow {
                            idx.insert(v, N0, T, next, off(next)).unwrap();
                            live.push(next);
                            next += 4;
                        } else {
                            let k = live.swap_remove(rng.gen_range(0..live.len()));
                            assert!(idx.remove(v, N0, T, k).unwrap(), "thread {t} step {step}: remove {k}");
                            assert_eq!(idx.lookup(v, N0, T, k).unwrap(), None);
                        }
                        let k = live[rng.gen_range(0..live.len())];
                        assert_eq!(idx.lookup(v, N0, T, k).unwrap(), Some(off(k)), "thread {t} step {step}");
                    }
                    for k in live {
                        assert_eq!(idx.lookup(v, N0, T, k).unwrap(), Some(off(k)));
                    }
                });
            }
        });
        check_invariant(&v, &idx).unwrap();
        assert!(idx.stats().reclaimed() > 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u64, u64),
        Remove(u16, u64),
        Lookup(u16, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let tk = (0u16..3, 0u64..24);
        prop_oneof![
            (tk.clone(), 0u64..1000).prop_map(|((t, k), o)| Op::Insert(t, k, o)),
            tk.clone().prop_map(|(t, k)| Op::Remove(t, k)),
            tk.prop_map(|(t, k)| Op::Lookup(t, k)),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_hashmap(
            ops in proptest::collection::vec(op(), 1..300),
            buckets in 1u64..6,
            window in 1usize..4,
        ) {
            // At most 6 buckets: every chain spans the whole index, so IndexFull happens
            // exactly when every slot holds a key.
            let (v, idx) = setup(buckets);
            let idx = idx.with_read_buckets(window);
            let capacity = idx.capacity_slots() as usize;
            let mut model: HashMap<(u16, u64), Offset> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(t, k, o) => {
                        let got = idx.insert(&v, N0, TableId(t), k, off(o));
                        if model.contains_key(&(t, k)) {
                            prop_assert!(matches!(got, Err(Error::DuplicateKey { .. })), "{:?}", got);
                        } else if model.len() == capacity {
                            prop_assert!(matches!(got, Err(Error::IndexFull { .. })), "{:?}", got);
                        } else {
                            prop_assert!(got.is_ok(), "{:?}", got);
                            model.insert((t, k), off(o));
                        }
                    }
                    Op::Remove(t, k) => {
                        let removed = idx.remove(&v, N0, TableId(t), k).unwrap();
                        prop_assert_eq!(removed, model.remove(&(t, k)).is_some());
                    }
                    Op::Lookup(t, k) => {
                        let got = idx.lookup(&v, N0, TableId(t), k).unwrap();
                        prop_assert_eq!(got, model.get(&(t, k)).copied());
                    }
                }
                if let Err(e) = check_invariant(&v, &idx) {
                    prop_assert!(false, "{}", e);
                }
            }
            for (&(t, k), &o) in &model {
                prop_assert_eq!(idx.lookup(&v, N0, TableId(t), k).unwrap(), Some(o));
            }
        }

        #[test]
        fn matches_a_hashmap_with_a_short_probe_limit(
            ops in proptest::collection::vec(op(), 1..400),
            limit in 1u64..4,
        ) {
            // 16 buckets, probe limit 1-3: IndexFull is possible with free slots elsewhere,
            // so an insert may fail only with IndexFull, and then the model is unchanged.
            let (v, idx) = setup(16);
            let idx = idx.with_max_probe_buckets(limit);
            let mut model: HashMap<(u16, u64), Offset> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(t, k, o) => match idx.insert(&v, N0, TableId(t), k, off(o)) {
                        Ok(()) => prop_assert!(model.insert((t, k), off(o)).is_none()),
                        Err(Error::DuplicateKey { .. }) => prop_assert!(model.contains_key(&(t, k))),
                        Err(Error::IndexFull { .. }) => prop_assert!(!model.contains_key(&(t, k))),
                        Err(e) => prop_assert!(false, "{}", e),
                    },
                    Op::Remove(t, k) => {
                        let removed = idx.remove(&v, N0, TableId(t), k).unwrap();
                        prop_assert_eq!(removed, model.remove(&(t, k)).is_some());
                    }
                    Op::Lookup(t, k) => {
                        let got = idx.lookup(&v, N0, TableId(t), k).unwrap();
                        prop_assert_eq!(got, model.get(&(t, k)).copied());
                    }
                }
                if let Err(e) = check_invariant(&v, &idx) {
                    prop_assert!(false, "{}", e);
                }
            }
        }
    }
}
