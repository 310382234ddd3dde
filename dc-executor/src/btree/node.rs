//! The fixed-size B+-tree node: its byte layout in the MemStore, its codec, and the
//! in-memory edits (insert, remove, split) a writer makes before publishing it (DEX §4;
//! B-link fences and sibling pointers as in Lehman and Yao).
//!
//! ```text
//! [0, 8)                     front word: the version, even when unlocked, odd while a writer
//!                            holds the node (lock = CAS version → version + 1)
//! [8, 16)                    meta: count (bits 0–15), level (16–23, 0 = leaf), flags
//!                            (24–31; bit 24 = has a high fence, bit 25 = freed), tag
//!                            0xB7EE (48–63)
//! [16, 24)                   low fence (inclusive; never changes while the node is in the
//!                            tree)
//! [24, 32)                   high fence (exclusive; meaningless without the flag: +∞)
//! [32, 40)                   right sibling's offset (0: none; set iff the high fence is);
//!                            in a freed node, the next node of the tree's free list
//! [40, 40 + 16 × capacity)   entries (key, value) sorted by key; value = a leaf's payload
//!                            or an inner node's child offset. Inner entry 0's key is the
//!                            node's low fence, and entry i's child has entry i's key as its
//!                            low fence
//! [size − 8, size)           rear word: the version again
//! ```
//!
//! A writer holding the lock publishes a new image of version `v + 2` in one doorbell batch
//! of three WRITEs, **rear word first**, then the body, then the front word. Two checks tell
//! a consistent READ from a torn one ([`ReadCheck`](super::ReadCheck)):
//!
//! - *Versions* (one READ): the front word is even and equals the rear word. This needs READs
//!   and WRITEs to move bytes in ascending address order, as the in-process, shared-memory
//!   and TCP backends do (they copy word by word upwards): a READ that saw any body word of
//!   the new image then loads the rear word after the writer stored `v + 2` there, while its
//!   front word says `v` or odd, and is refused. Writing the rear word last, as Sherman does,
//!   would let a READ that began before the lock see old front and rear words around new body
//!   words. RDMA does not promise the order inside one READ (Ziegler et al., "Design
//!   Guidelines for Correct, Efficient, and Scalable Synchronization using One-Sided RDMA",
//!   SIGMOD 2023, the DEX paper's [46]), so this check is for the backends above.
//! - *Bracketed* (three READs in sequence): the front word, the node, the front word again;
//!   both front words are the same even version. No writer held the lock between the two,
//!   so the node READ saw one image, in whatever order it moved the bytes (DEX's READ of a
//!   shared node, Algorithm 1).
//!
//! A **freed** node (merged into its left neighbour, `merge.rs`) keeps its place as a node of
//! the tree's free list: no entries, no range, the freed flag. Its memory is only ever reused
//! as a node of the same tree, and its version words only ever grow, so a READ through a stale
//! pointer finds a node image (freed, or of another range or level, which the reader detects)
//! and a stale lock attempt fails its compare-and-swap.

use redt_proto::Offset;

/// Default node size in bytes: DEX's and Sherman's 1 KiB (61 entries). With a warm cache a
/// lookup READs one leaf whatever the tree's height, so the node size trades the bytes of that
/// READ, of each update's WRITE and the time a lock is held (all four times larger at 4 KiB)
/// against the cache's footprint and the leaves a scan crosses: a million random keys make
/// 531 inner nodes (531 KiB of cache) and a scan of 100 keys crosses 3.3 leaves at 1 KiB;
/// at 4 KiB 33 inner nodes (132 KiB) and 1.6 leaves (`tests/btree.rs`,
/// `reads_per_lookup_and_scan`, which runs 4 KiB with 300,000 keys: 9 inner nodes). On
/// RDMA a 1 KiB READ costs about the latency of a 64-byte one; 4 KiB starts to cost
/// bandwidth.
pub const DEFAULT_NODE_BYTES: u64 = 1024;

/// Smallest node size (13 entries), for tests that want deep trees from few keys.
pub const MIN_NODE_BYTES: u64 = 256;

/// Largest node size (1,021 entries).
pub const MAX_NODE_BYTES: u64 = 16 << 10;

/// Bytes before the first entry: front, meta, low, high, sibling.
pub const HEADER_BYTES: u64 = 40;

/// Bytes per entry: key and value.
pub const ENTRY_BYTES: u64 = 16;

const META: usize = 8;
const LOW: usize = 16;
const HIGH: usize = 24;
const SIBLING: usize = 32;
const TAG: u64 = 0xB7EE;
const TAG_SHIFT: u32 = 48;
const LEVEL_SHIFT: u32 = 16;
const HAS_HIGH: u64 = 1 << 24;
const FREED: u64 = 1 << 25;

/// Entries a node of `node_bytes` holds.
pub fn capacity(node_bytes: u64) -> usize {
    ((node_bytes - HEADER_BYTES - 8) / ENTRY_BYTES) as usize
}

/// Whether `node_bytes` is a usable node size: a multiple of 64 in
/// [`MIN_NODE_BYTES`]..=[`MAX_NODE_BYTES`].
pub fn valid_size(node_bytes: u64) -> bool {
    node_bytes % 64 == 0 && (MIN_NODE_BYTES..=MAX_NODE_BYTES).contains(&node_bytes)
}

/// One node as a consistent READ saw it, or as a writer is about to publish it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The version (even); a writer publishes `version + 2`.
    pub version: u64,
    /// 0 for a leaf, the height above the leaves for an inner node.
    pub level: u8,
    /// Smallest key this node covers (inclusive).
    pub low: u64,
    /// Key this node's range ends before; `None` for the last node of its level.
    pub high: Option<u64>,
    /// The next node of the same level; `Some` exactly when `high` is.
    pub sibling: Option<Offset>,
    /// `(key, value)` sorted by key; an inner node's values are child offsets.
    pub entries: Vec<(u64, u64)>,
    /// Whether the node was freed (merged away, `merge.rs`): it covers no key, and
    /// [`Node::next_free`] links it into the tree's free list.
    pub freed: bool,
    /// In a freed node, the next node of the free list (0: the last).
    pub next_free: u64,
}

/// What one READ of a node's bytes holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A consistent image.
    Node(Node),
    /// Locked by a writer, or torn by one: READ it again.
    Busy,
    /// A consistent image that is not a valid node (never written as one, or damaged).
    Corrupt(&'static str),
}

fn word(raw: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(raw[at..at + 8].try_into().expect("an 8-byte word inside the node image"))
}

impl Node {
    /// An empty node of `level` covering `[low, high)`, version 0.
    pub fn empty(level: u8, low: u64, high: Option<u64>, sibling: Option<Offset>) -> Node {
        Node { version: 0, level, low, high, sibling, entries: Vec::new(), freed: false, next_free: 0 }
    }

    /// The image a node of `level`, locked by its freer at `version`, is published as once it
    /// is out of the tree: no entries, no range, `next_free` the free list's next node.
    pub fn freed(version: u64, level: u8, low: u64, next_free: u64) -> Node {
        Node { version, freed: true, next_free, ..Node::empty(level, low, None, None) }
    }

    /// Appends the entries and the range of `right`, this node's right sibling, to this node
    /// (the left one absorbs the right one); the caller frees `right`.
    pub fn absorb(&mut self, right: &Node) {
        self.entries.extend_from_slice(&right.entries);
        self.high = right.high;
        self.sibling = right.sibling;
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Whether `key` lies in this node's fences, `[low, high)`; never for a freed node.
    pub fn covers(&self, key: u64) -> bool {
        !self.freed && self.low <= key && self.high.is_none_or(|h| key < h)
    }

    /// The position of `key` among the entries (`Ok`) or where it would go (`Err`).
    pub fn search(&self, key: u64) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&key, |e| e.0)
    }

    /// The child of an inner node whose range holds `key`: the last entry whose key is at
    /// most `key`. `None` when `key` is below the first entry (not covered).
    pub fn child_for(&self, key: u64) -> Option<Offset> {
        let i = self.entries.partition_point(|e| e.0 <= key);
        i.checked_sub(1).map(|i| Offset(self.entries[i].1))
    }

    /// Moves the upper half of the entries into a new right node (version 0) and makes
    /// `self` end where it begins; the caller links `self.sibling` to where it puts the new
    /// node. Returns the new node, whose low fence is the separator to insert in the parent.
    ///
    /// # Panics
    /// If the node has fewer than two entries (a full node has at least 13).
    pub fn split(&mut self) -> Node {
        assert!(self.entries.len() >= 2, "only a node with two entries or more splits");
        let right_entries = self.entries.split_off(self.entries.len() / 2);
        let separator = right_entries[0].0;
        let right = Node {
            version: 0,
            level: self.level,
            low: separator,
            high: self.high,
            sibling: self.sibling,
            entries: right_entries,
            freed: false,
            next_free: 0,
        };
        self.high = Some(separator);
        right
    }

    /// The node's full image of `node_bytes` with front and rear word `self.version`.
    ///
    /// # Panics
    /// If the entries do not fit in `node_bytes` (writers split before they publish).
    pub fn encode(&self, node_bytes: u64) -> Vec<u8> {
        assert!(self.entries.len() <= capacity(node_bytes), "a node is split before it overflows");
        let mut raw = vec![0u8; node_bytes as usize];
        let mut put = |at: usize, w: u64| raw[at..at + 8].copy_from_slice(&w.to_le_bytes());
        put(0, self.version);
        let flags = if self.high.is_some() { HAS_HIGH } else { 0 } | if self.freed { FREED } else { 0 };
        put(META, TAG << TAG_SHIFT | flags | (self.level as u64) << LEVEL_SHIFT | self.entries.len() as u64);
        put(LOW, self.low);
        put(HIGH, self.high.unwrap_or(0));
        put(SIBLING, if self.freed { self.next_free } else { self.sibling.map_or(0, |o| o.0) });
        for (i, &(k, v)) in self.entries.iter().enumerate() {
            let at = (HEADER_BYTES + ENTRY_BYTES * i as u64) as usize;
            put(at, k);
            put(at + 8, v);
        }
        put(node_bytes as usize - 8, self.version);
        raw
    }

    /// Bytes of an image from its start to the end of its last entry: what a writer must
    /// WRITE (bytes after it are never read).
    pub fn used_bytes(&self) -> u64 {
        HEADER_BYTES + ENTRY_BYTES * self.entries.len() as u64
    }

    /// The WRITEs, as (byte offset in the node, bytes), in the order they must be posted,
    /// that publish this node — locked by the writer at `self.version` — as version + 2 and
    /// unlock it: the rear word, the body up to the last entry, the front word (see the
    /// module docs for why the rear word goes first). Sets `self.version` to the new one.
    pub fn publish(&mut self, node_bytes: u64) -> [(u64, Vec<u8>); 3] {
        self.version += 2;
        let image = self.encode(node_bytes);
        let rear = node_bytes - 8;
        [
            (rear, image[rear as usize..].to_vec()),
            (8, image[8..self.used_bytes() as usize].to_vec()),
            (0, image[..8].to_vec()),
        ]
    }

    /// Decodes a READ of a whole node made between two READs of its front word that returned
    /// `before` and `after` (the bracketed check): [`Decoded::Busy`] unless they are the same
    /// even version, else as [`Node::decode`].
    pub fn decode_bracketed(before: u64, raw: &[u8], after: u64) -> Decoded {
        if before & 1 == 1 || before != after {
            return Decoded::Busy;
        }
        Node::decode(raw)
    }

    /// Decodes one READ of a whole node: [`Decoded::Busy`] unless the front word is even and
    /// equal to the rear word, else the node after checking the tag, the count, the order of
    /// the keys, the fences and (for inner nodes) the child offsets.
    pub fn decode(raw: &[u8]) -> Decoded {
        let n = raw.len();
        if n < MIN_NODE_BYTES as usize || n % 8 != 0 {
            return Decoded::Corrupt("image shorter than a node");
        }
        let (front, rear) = (word(raw, 0), word(raw, n - 8));
        if front & 1 == 1 || front != rear {
            return Decoded::Busy;
        }
        let meta = word(raw, META);
        if meta >> TAG_SHIFT != TAG {
            return Decoded::Corrupt("no node tag");
        }
        let count = (meta & 0xFFFF) as usize;
        if count > capacity(n as u64) {
            return Decoded::Corrupt("count beyond the node's capacity");
        }
        let level = (meta >> LEVEL_SHIFT & 0xFF) as u8;
        let has_high = meta & HAS_HIGH != 0;
        let low = word(raw, LOW);
        let high = has_high.then(|| word(raw, HIGH));
        let sibling = word(raw, SIBLING);
        if meta & FREED != 0 {
            if count != 0 || has_high || sibling % 64 != 0 {
                return Decoded::Corrupt("a freed node with entries, a range or an unaligned next");
            }
            return Decoded::Node(Node::freed(front, level, low, sibling));
        }
        if has_high != (sibling != 0) {
            return Decoded::Corrupt("a high fence without a sibling, or a sibling without one");
        }
        if high.is_some_and(|h| h <= low) || sibling % 64 != 0 {
            return Decoded::Corrupt("empty fence range or unaligned sibling");
        }
        let entries: Vec<(u64, u64)> = (0..count)
            .map(|i| {
                let at = (HEADER_BYTES + ENTRY_BYTES * i as u64) as usize;
                (word(raw, at), word(raw, at + 8))
            })
            .collect();
        let node = Node {
            version: front,
            level,
            low,
            high,
            sibling: has_high.then_some(Offset(sibling)),
            entries,
            freed: false,
            next_free: 0,
        };
        if !node.entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return Decoded::Corrupt("keys out of order");
        }
        if node.entries.first().is_some_and(|e| e.0 < low) || node.entries.last().is_some_and(|e| !node.covers(e.0)) {
            return Decoded::Corrupt("a key outside the fences");
        }
        if level > 0 {
            if node.entries.first().is_none_or(|e| e.0 != low) {
                return Decoded::Corrupt("an inner node whose first key is not its low fence");
            }
            if node.entries.iter().any(|e| e.1 == 0 || e.1 % 64 != 0) {
                return Decoded::Corrupt("a child offset that is null or not 64-aligned");
            }
        }
        Decoded::Node(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaf(keys: &[u64]) -> Node {
        Node { entries: keys.iter().map(|&k| (k, k * 10)).collect(), ..Node::empty(0, 0, None, None) }
    }

    #[test]
    fn sizes() {
        assert_eq!(capacity(DEFAULT_NODE_BYTES), 61, "1 KiB: 40-byte header, 61 entries, rear word");
        assert_eq!(HEADER_BYTES + ENTRY_BYTES * 61 + 8, 1024);
        assert_eq!(capacity(MIN_NODE_BYTES), 13);
        assert_eq!(capacity(4096), 253);
        assert!(valid_size(1024) && valid_size(256) && !valid_size(128) && !valid_size(1000));
    }

    #[test]
    fn round_trip() {
        let mut n = Node {
            version: 6,
            level: 2,
            low: 100,
            high: Some(900),
            sibling: Some(Offset(4096)),
            entries: vec![(100, 64), (300, 128), (899, 192)],
            ..Node::empty(0, 0, None, None)
        };
        let raw = n.encode(1024);
        assert_eq!(raw.len(), 1024);
        assert_eq!(Node::decode(&raw), Decoded::Node(n.clone()));
        n.high = None;
        n.sibling = None;
        n.level = 0;
        n.entries.push((u64::MAX, 0));
        assert_eq!(Node::decode(&n.encode(256)), Decoded::Node(n));
    }

    #[test]
    fn locked_or_torn_images_are_busy() {
        let n = Node { version: 8, ..leaf(&[1, 2, 3]) };
        let mut raw = n.encode(256);
        // Locked: the front word is odd (and the rear word still says 8).
        raw[..8].copy_from_slice(&9u64.to_le_bytes());
        assert_eq!(Node::decode(&raw), Decoded::Busy);
        // Torn: a READ that began before the lock sees front 8 and the rear word of version 10.
        raw[..8].copy_from_slice(&8u64.to_le_bytes());
        raw[248..].copy_from_slice(&10u64.to_le_bytes());
        assert_eq!(Node::decode(&raw), Decoded::Busy);
        raw[..8].copy_from_slice(&10u64.to_le_bytes());
        assert!(matches!(Node::decode(&raw), Decoded::Node(m) if m.version == 10));
    }

    #[test]
    fn invalid_images_are_corrupt() {
        assert_eq!(Node::decode(&[0u8; 256]), Decoded::Corrupt("no node tag"), "zeroed memory is no node");
        let n = leaf(&[5, 6]);
        let mut raw = n.encode(256);
        raw[40..48].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(Node::decode(&raw), Decoded::Corrupt("keys out of order"));
        let inner = Node { level: 1, low: 10, entries: vec![(11, 64)], ..Node::empty(1, 10, None, None) };
        assert!(matches!(Node::decode(&inner.encode(256)), Decoded::Corrupt(_)));
        let unaligned = Node { entries: vec![(10, 65)], ..inner };
        assert!(matches!(Node::decode(&unaligned.encode(256)), Decoded::Corrupt(_)));
        let outside = Node { high: Some(6), sibling: Some(Offset(64)), ..leaf(&[5, 6]) };
        assert_eq!(Node::decode(&outside.encode(256)), Decoded::Corrupt("a key outside the fences"));
    }

    #[test]
    fn a_freed_node_round_trips_covers_nothing_and_names_the_next_free_one() {
        let f = Node::freed(12, 1, 500, 4096);
        let raw = f.encode(256);
        assert_eq!(Node::decode(&raw), Decoded::Node(f.clone()));
        assert!(!f.covers(500) && !f.covers(0) && !f.covers(u64::MAX));
        assert_eq!((f.next_free, f.sibling, f.high), (4096, None, None));
        // A freed flag on a node with entries or a range is no valid image.
        let mut bad = Node { entries: vec![(500, 64)], ..f.clone() };
        assert!(matches!(Node::decode(&bad.encode(256)), Decoded::Corrupt(_)));
        bad = Node { high: Some(600), ..f };
        assert!(matches!(Node::decode(&bad.encode(256)), Decoded::Corrupt(_)));
    }

    #[test]
    fn absorbing_the_right_sibling_takes_its_entries_and_range() {
        let mut left = Node { high: Some(10), sibling: Some(Offset(640)), ..leaf(&[1, 2]) };
        let right = Node { low: 10, high: Some(20), sibling: Some(Offset(1280)), ..leaf(&[10, 15]) };
        left.absorb(&right);
        assert_eq!(left.entries.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2, 10, 15]);
        assert_eq!((left.low, left.high, left.sibling), (0, Some(20), Some(Offset(1280))));
        assert!(left.covers(19) && !left.covers(20));
    }

    #[test]
    fn split_moves_the_upper_half_and_sets_the_fences() {
        let mut n = Node { high: Some(1000), sibling: Some(Offset(640)), ..leaf(&[1, 2, 3, 4, 5]) };
        let r = n.split();
        assert_eq!(n.entries.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r.entries.iter().map(|e| e.0).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!((n.high, r.low, r.high, r.sibling), (Some(3), 3, Some(1000), Some(Offset(640))));
        assert!(n.covers(2) && !n.covers(3) && r.covers(3) && r.covers(999) && !r.covers(1000));
    }

    #[test]
    fn child_for_picks_the_last_entry_at_or_below_the_key() {
        let n = Node { entries: vec![(10, 64), (20, 128), (30, 192)], ..Node::empty(1, 10, None, None) };
        assert_eq!(n.child_for(9), None);
        assert_eq!(n.child_for(10), Some(Offset(64)));
        assert_eq!(n.child_for(29), Some(Offset(128)));
        assert_eq!(n.child_for(u64::MAX), Some(Offset(192)));
    }

    /// The word writes a writer makes, in order, to change the node image `old` into `new`:
    /// the lock (front word to version + 1), then each WRITE of [`Node::publish`] word by
    /// word upwards, as the backends copy. Returns the image after each step (`[0]` = `old`).
    fn writer_steps(old: &Node, size: u64) -> (Vec<Vec<u8>>, Node) {
        let mut image = old.encode(size);
        let mut steps = vec![image.clone()];
        image[..8].copy_from_slice(&(old.version + 1).to_le_bytes());
        steps.push(image.clone());
        let mut new = old.clone();
        new.entries.insert(1, (old.entries[0].0 + 1, 7));
        for (at, bytes) in new.publish(size) {
            for (i, w) in bytes.chunks(8).enumerate() {
                image[at as usize + 8 * i..][..8].copy_from_slice(w);
                steps.push(image.clone());
            }
        }
        (steps, new)
    }

    /// Every READ that loads words 0..k while the writer has made `a` steps and words k..
    /// after `b ≥ a` steps (a READ overtaken by the writer once) is refused as busy or yields
    /// the old or the new node, never a mix: the write order of [`Node::publish`] (rear word
    /// first) against READs that load words upwards. Writing the rear word after the body
    /// fails this: a READ that loads the front word before the lock and the rest between
    /// the body's WRITE and the rear word's sees old versions around a new body.
    #[test]
    fn a_read_overtaken_by_a_writer_never_sees_a_mix() {
        let size = MIN_NODE_BYTES;
        let old = Node { version: 4, ..leaf(&[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]) };
        let (steps, new) = writer_steps(&old, size);
        let words = size as usize / 8;
        for a in 0..steps.len() {
            for b in a..steps.len() {
                for k in 0..=words {
                    let mut seen = steps[a][..8 * k].to_vec();
                    seen.extend_from_slice(&steps[b][8 * k..]);
                    match Node::decode(&seen) {
                        Decoded::Busy => {}
                        Decoded::Node(n) => assert!(n == old || n == new, "a torn READ accepted: a={a} b={b} k={k}"),
                        Decoded::Corrupt(why) => {
                            panic!("a torn READ taken for a corrupt node ({why}): a={a} b={b} k={k}")
                        }
                    }
                }
            }
        }
    }

    /// A READ that does not move its bytes upwards (RDMA does not promise to) can fool the
    /// one-READ version check: front and rear words loaded after the writer finished, the
    /// body before it began. The bracketed check refuses the same READ.
    #[test]
    fn the_version_check_needs_ascending_reads_and_the_bracketed_one_does_not() {
        let size = MIN_NODE_BYTES;
        let old = Node { version: 4, ..leaf(&[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]) };
        let (steps, new) = writer_steps(&old, size);
        let (first, last) = (&steps[0], &steps[steps.len() - 1]);
        let mut torn = first.clone();
        torn[..8].copy_from_slice(&last[..8]);
        torn[size as usize - 8..].copy_from_slice(&last[size as usize - 8..]);
        assert!(matches!(Node::decode(&torn), Decoded::Node(n) if n != old && n != new), "accepted, and a mix");
        let front = |image: &[u8]| word(image, 0);
        assert_eq!(Node::decode_bracketed(front(first), &torn, front(last)), Decoded::Busy);
    }

    proptest! {
        /// A bracketed READ — the front word at writer step `s`, every node word at any step
        /// from `s` to `e` in any order, the front word again at step `e` — is busy, old or new.
        #[test]
        fn a_bracketed_read_in_any_order_never_sees_a_mix(
            bounds in (0usize..34, 0usize..34),
            at in proptest::collection::vec(any::<prop::sample::Index>(), 32..=32),
        ) {
            let old = Node { version: 4, ..leaf(&[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]) };
            let (steps, new) = writer_steps(&old, MIN_NODE_BYTES);
            let (s, e) = (bounds.0.min(bounds.1).min(steps.len() - 1), bounds.0.max(bounds.1).min(steps.len() - 1));
            let seen: Vec<u8> = (0..32).flat_map(|w| steps[s + at[w].index(e - s + 1)][8 * w..][..8].to_vec()).collect();
            match Node::decode_bracketed(word(&steps[s], 0), &seen, word(&steps[e], 0)) {
                Decoded::Busy => {}
                Decoded::Node(n) => prop_assert!(n == old || n == new, "a torn READ accepted in [{}, {}]", s, e),
                Decoded::Corrupt(why) => prop_assert!(false, "a torn READ taken for a corrupt node ({})", why),
            }
        }

        /// Any READ that loads the words upwards while the writer goes on (each word at any
        /// writer step, never earlier than the word before it) is busy, old or new.
        #[test]
        fn a_read_interleaved_with_a_writer_anyhow_never_sees_a_mix(
            mut at in proptest::collection::vec(0usize..36, 32..=32),
        ) {
            let old = Node { version: 4, ..leaf(&[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]) };
            let (steps, new) = writer_steps(&old, MIN_NODE_BYTES);
            at.sort_unstable();
            let seen: Vec<u8> = (0..32).flat_map(|w| steps[at[w].min(steps.len() - 1)][8 * w..][..8].to_vec()).collect();
            match Node::decode(&seen) {
                Decoded::Busy => {}
                Decoded::Node(n) => prop_assert!(n == old || n == new, "a torn READ accepted at steps {:?}", at),
                Decoded::Corrupt(why) => prop_assert!(false, "a torn READ taken for a corrupt node ({}) at {:?}", why, at),
            }
        }

        /// Every valid node survives encode/decode at every size it fits in.
        #[test]
        fn encode_decode(
            keys in proptest::collection::btree_set(any::<u64>(), 0..61),
            version in (0u64..u64::MAX / 2).prop_map(|v| v * 2),
            level in 0u8..4,
            size in prop_oneof![Just(256u64), Just(1024), Just(4096)],
        ) {
            let mut entries: Vec<(u64, u64)> = keys.into_iter().map(|k| (k, (k % (1 << 40) + 1) * 64)).collect();
            entries.truncate(capacity(size));
            let low = if level > 0 { entries.first().map_or(0, |e| e.0) } else { entries.first().map_or(0, |e| e.0 / 2) };
            if level > 0 && entries.is_empty() {
                entries.push((0, 64));
            }
            let high = entries.last().and_then(|e| e.0.checked_add(1));
            let n = Node { version, level, low, high, sibling: high.map(|_| Offset(64)), entries, ..Node::empty(0, 0, None, None) };
            prop_assert_eq!(Node::decode(&n.encode(size)), Decoded::Node(n));
        }

        /// Any bytes decode to a node, busy or corrupt, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 256..=256)) {
            let _ = Node::decode(&raw);
        }
    }
}
