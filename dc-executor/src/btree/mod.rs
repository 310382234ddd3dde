//! An ordered index in the MemStore: a B-link B+-tree of fixed-size nodes in one node's
//! record heap, read and changed by the executors of its DC with one-sided verbs only (DEX,
//! Lu et al., PVLDB 17, 2024, §4–5; B-link as in Lehman and Yao,
//! TODS 6(4), 1981, with Sagiv's one-lock-at-a-time splits).
//!
//! See [`BTree`] for the design; the files hold one idea each: `node.rs` the node layout and
//! codec, `cache.rs` the executor-side inner-node cache, `traverse.rs` the descent with
//! optimistic READs and the cache, `insert.rs` inserts with splits and root growth,
//! `remove.rs` deletes, `merge.rs` merges of emptied nodes into their left neighbours,
//! `free.rs` the tree's list of freed nodes, `scan.rs` range scans, `check.rs` the structural
//! check for tests.

mod cache;
mod check;
mod free;
mod insert;
mod merge;
mod node;
mod remove;
mod scan;
mod stats;
mod traverse;

pub use check::TreeShape;
pub use node::{DEFAULT_NODE_BYTES, MAX_NODE_BYTES, MIN_NODE_BYTES};
pub use stats::{BTreeCounts, BTreeStats};

use crate::error::{Error, Result};
use crate::memstore::Layout;
use crate::verbs::{DoorbellBatch, Verbs};
use cache::NodeCache;
use node::{Decoded, Node};
use redt_proto::{NodeId, Offset};
use std::sync::atomic::{AtomicU64, Ordering};

/// `"REDTBT01"` in little-endian: word 0 of a tree's anchor.
const ANCHOR_TAG: u64 = u64::from_le_bytes(*b"REDTBT01");

/// Bytes of a tree's anchor: tag, root offset, node size, the spare word, the free list's
/// head, three reserved words.
const ANCHOR_BYTES: u64 = 64;

/// Byte offset of the root offset in the anchor.
const ANCHOR_ROOT: u64 = 8;

/// Byte offset of the node size in the anchor.
const ANCHOR_NODE_BYTES: u64 = 16;

/// Byte offset of the anchor's spare word ([`BTree::spare_word`]).
const ANCHOR_SPARE: u64 = 24;

/// Byte offset of the head of the tree's free list of nodes (`free.rs`; zero, an empty list,
/// in a tree made before nodes were freed).
const ANCHOR_FREE: u64 = 32;

/// Attempts at one step (a READ finding the node locked or torn, a lock compare-and-swap, a
/// wait for another writer's new root) before giving up with [`Error::TreeBusy`]: a second
/// or two of spinning and yielding, far beyond any lock hold of a live writer.
const MAX_ATTEMPTS: u32 = 1 << 20;

/// How a handle tells a consistent READ of a node from one torn by a concurrent writer
/// (`node.rs` has the argument for each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadCheck {
    /// One READ per node: consistent when its front and rear version words agree and are
    /// even. Correct on backends that move a READ's and a WRITE's bytes in ascending address
    /// order: the in-process, shared-memory and TCP backends.
    #[default]
    Versions,
    /// Three READs per node, one after the other: the front word, the node, the front word
    /// again; consistent when both front words are the same even version. Correct whatever
    /// order a READ moves bytes in: for RDMA NICs, which do not promise one (DEX's READ of a
    /// shared node).
    Bracketed,
}

/// How a [`BTree`] is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BTreeConfig {
    /// Node size in bytes: a multiple of 64 in [`MIN_NODE_BYTES`]..=[`MAX_NODE_BYTES`];
    /// [`DEFAULT_NODE_BYTES`] (1 KiB, 61 entries) unless a test wants deep trees.
    pub node_bytes: u64,
    /// Inner nodes the handle's cache holds; 0 turns the cache off (every descent READs every
    /// level).
    pub cache_nodes: usize,
}

impl Default for BTreeConfig {
    /// 1 KiB nodes and a cache of 4,096 inner nodes (4 MiB): the inner levels of a tree of
    /// about 7 million keys inserted in random order (70% full leaves), 4 million in
    /// ascending order (50%).
    fn default() -> Self {
        BTreeConfig { node_bytes: DEFAULT_NODE_BYTES, cache_nodes: 4096 }
    }
}

/// READ verbs issued by one operation.
#[derive(Debug, Default)]
struct Cost {
    reads: u64,
}

/// A handle on one B+-tree of `u64` keys and `u64` values in the record heap of one node's
/// MemStore (DEX §4–5).
///
/// # Layout
///
/// The tree is named by its **anchor**, 64 bytes from the heap: `"REDTBT01"`, the root's
/// offset, the node size, the head of its free list. Nodes are fixed-size (1 KiB by default,
/// `node.rs` has the byte layout), taken from the tree's free list or else from the heap by
/// fetch-and-add ([`Layout::alloc`]), and never given back to the heap, so no READ ever lands
/// on memory that stopped being a node of this tree. Each node carries its fences
/// `[low, high)` and its right sibling: a B-link tree. A node's low fence never changes while
/// it is in the tree; a split moves the upper half of a node into a new right sibling and
/// shrinks the node's high fence.
///
/// # Merges
///
/// A remove that leaves a node under a quarter full merges it with a neighbour under the same
/// parent when both fit in half a node (`merge.rs`): the left node absorbs the right one's
/// entries and range, the parent loses the right one's entry, and the right one is published
/// freed and pushed on the tree's free list, all under the three nodes' locks. The leftmost
/// node of each level (low fence 0, the old roots among them) is never freed. So a tree's
/// nodes stay proportional to the keys it holds, whatever mix of inserts and removes it sees
/// (ascending keys inserted and removed for good included), and a freed node's memory serves
/// the next split. A READ through a stale pointer (a cached parent, a descent's path, a
/// scan's sibling) may find a freed node, or one reused for another range or level; it
/// descends again from the root.
///
/// # Reads
///
/// A node is READ whole, in one verb; the READ is consistent when the front and rear
/// version words agree and are even (writers publish rear word first, `node.rs`), else it
/// is issued again. On RDMA, whose READs need not move bytes in address order, a handle
/// brackets each node READ by two READs of its front word instead ([`ReadCheck`]). A descent goes from the root down by child pointers; when a node's high
/// fence is at or below the key (it split since its parent was READ) it moves right along
/// the sibling. Inner nodes come from the handle's cache when it holds them; leaves are
/// always READ. A cached copy may be stale, which is safe: a child pointer leads to a node
/// whose low fence is at most the key, whatever the age of the copy it came from. When the
/// child a *cached* node pointed to does not cover the key, the copy is dropped and the
/// descent starts again from the root (DEX's refresh from the root), so a cache that has
/// gone stale is refreshed by the lookups that meet the staleness. A descent that meets a
/// freed node, a node right of the key or one of another level (a pointer older than a merge)
/// starts again from the root as well. A lookup with a warm cache costs one READ; without a
/// cache, one per level.
///
/// # Writes
///
/// A writer locks a node with one compare-and-swap of its front word from the version it
/// READ to that version + 1 (so a won lock also proves the node unchanged since the READ),
/// edits the image locally and publishes it with version + 2 in one doorbell batch of three
/// WRITEs, which also unlocks it. A full node splits: the new right node is written whole
/// (it is unreachable until linked), then the locked node is published with its new high
/// fence and sibling pointer, in the same batch; only then, holding no lock, the writer
/// locks the parent (READ, move right while needed, CAS) and inserts the separator. A
/// reader that arrives between the two steps follows the sibling pointer. When the split
/// node was the root, the writer writes a new root above it and installs it with a
/// compare-and-swap on the anchor's root word. A writer holds one lock at a time, except a
/// merge (parent, then its two children, each child's lock tried once) and a split taking a
/// node from the free list (`merge.rs` has why no wait can close a cycle).
///
/// # Concurrency contract
///
/// Any number of handles (one per executor, each with its own cache) and threads may run
/// lookups, scans, inserts and removes on one tree at once. Each lookup and each leaf of a
/// scan is a consistent READ of one node: a lookup is linearizable; a scan returns, in key
/// order and within its range, what each leaf held when it was READ (not one snapshot of the
/// whole range). A writer that dies holding a lock leaves the node locked: READs of it give
/// up after `MAX_ATTEMPTS` with [`Error::TreeBusy`] (the tree is rebuilt from the redo log,
/// not repaired). A new root that loses its race to another writer's goes on the free list.
#[derive(Debug)]
pub struct BTree {
    layout: Layout,
    node: NodeId,
    anchor: Offset,
    node_bytes: u64,
    /// The last root offset this handle saw on the anchor.
    root: AtomicU64,
    cache: Option<NodeCache>,
    read_check: ReadCheck,
    stats: BTreeStats,
}

impl BTree {
    /// Creates an empty tree in `node`'s record heap: allocates its anchor and an empty root
    /// leaf, writes both, and returns a handle. [`BTree::anchor`] names the tree for
    /// [`BTree::open`].
    ///
    /// # Errors
    /// [`Error::HeapFull`] when the heap has no room for the anchor and a node; verbs errors.
    ///
    /// # Panics
    /// If `config.node_bytes` is not a multiple of 64 in
    /// [`MIN_NODE_BYTES`]..=[`MAX_NODE_BYTES`].
    pub fn create(verbs: &dyn Verbs, node: NodeId, layout: &Layout, config: BTreeConfig) -> Result<BTree> {
        assert!(node::valid_size(config.node_bytes), "node size {} is not a usable size", config.node_bytes);
        let anchor = layout.alloc(verbs, node, ANCHOR_BYTES)?;
        let root = layout.alloc(verbs, node, config.node_bytes)?;
        verbs.write(node, root, &Node::empty(0, 0, None, None).encode(config.node_bytes))?;
        let mut words = [0u8; ANCHOR_BYTES as usize];
        words[ANCHOR_ROOT as usize..][..8].copy_from_slice(&root.0.to_le_bytes());
        words[ANCHOR_NODE_BYTES as usize..][..8].copy_from_slice(&config.node_bytes.to_le_bytes());
        // The tag goes last so a half-written anchor is never taken for a tree.
        verbs.write(node, Offset(anchor.0 + 8), &words[8..])?;
        verbs.write(node, anchor, &ANCHOR_TAG.to_le_bytes())?;
        Ok(BTree::handle(*layout, node, anchor, config.node_bytes, root, config.cache_nodes))
    }

    /// A new handle (with its own, empty cache of `cache_nodes` inner nodes; 0 for none) on
    /// the tree whose anchor is at `anchor` of `node`.
    ///
    /// # Errors
    /// [`Error::TreeCorrupt`] when `anchor` holds no tree anchor; verbs errors.
    pub fn open(verbs: &dyn Verbs, node: NodeId, layout: &Layout, anchor: Offset, cache_nodes: usize) -> Result<BTree> {
        let mut raw = [0u8; ANCHOR_BYTES as usize];
        verbs.read(node, anchor, &mut raw)?;
        let word = |at: u64| u64::from_le_bytes(raw[at as usize..][..8].try_into().expect("an anchor word"));
        let corrupt = |why| Error::TreeCorrupt { node, offset: anchor, why };
        if word(0) != ANCHOR_TAG {
            return Err(corrupt("no tree anchor"));
        }
        let node_bytes = word(ANCHOR_NODE_BYTES);
        if !node::valid_size(node_bytes) {
            return Err(corrupt("the anchor's node size is not a usable size"));
        }
        let root = word(ANCHOR_ROOT);
        if root == 0 || root % 64 != 0 {
            return Err(corrupt("the anchor's root offset is null or unaligned"));
        }
        Ok(BTree::handle(*layout, node, anchor, node_bytes, Offset(root), cache_nodes))
    }

    fn handle(layout: Layout, node: NodeId, anchor: Offset, node_bytes: u64, root: Offset, cache: usize) -> BTree {
        BTree {
            layout,
            node,
            anchor,
            node_bytes,
            root: AtomicU64::new(root.0),
            cache: (cache > 0).then(|| NodeCache::new(cache)),
            read_check: ReadCheck::default(),
            stats: BTreeStats::default(),
        }
    }

    /// Sets how this handle checks its node READs (default [`ReadCheck::Versions`]). Handles
    /// with either check may share a tree: writers publish the same way for both.
    pub fn with_read_check(mut self, check: ReadCheck) -> BTree {
        self.read_check = check;
        self
    }

    /// How this handle checks its node READs.
    pub fn read_check(&self) -> ReadCheck {
        self.read_check
    }

    /// Offset of the tree's anchor: the tree's name for [`BTree::open`].
    pub fn anchor(&self) -> Offset {
        self.anchor
    }

    /// A word of the tree's anchor the tree never reads or writes (word 3, zero when the tree
    /// is made), left to the tree's user: the ordered index keeps the lock word of the gap
    /// past the tree's last key there (`ordered.rs`).
    pub fn spare_word(&self) -> Offset {
        Offset(self.anchor.0 + ANCHOR_SPARE)
    }

    /// The node whose MemStore holds the tree.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Node size in bytes.
    pub fn node_bytes(&self) -> u64 {
        self.node_bytes
    }

    /// Whether this handle caches inner nodes.
    pub fn cache_enabled(&self) -> bool {
        self.cache.is_some()
    }

    /// Inner nodes in this handle's cache now.
    pub fn cached_nodes(&self) -> usize {
        self.cache.as_ref().map_or(0, NodeCache::len)
    }

    /// Empties this handle's cache (the next descents READ every level again).
    pub fn clear_cache(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }

    /// This handle's counters.
    pub fn stats(&self) -> &BTreeStats {
        &self.stats
    }

    /// The value of `key`, or `None` when the tree does not hold it: one READ of the leaf
    /// when the cache holds the inner nodes on the way, one READ per level without a cache
    /// (plus READs again of nodes found locked or torn, and of stale cached paths).
    ///
    /// # Errors
    /// [`Error::TreeBusy`] when a node stays locked past the retry limit;
    /// [`Error::TreeCorrupt`] when a READ finds no valid node where the tree points; verbs
    /// errors.
    pub fn lookup(&self, verbs: &dyn Verbs, key: u64) -> Result<Option<u64>> {
        let mut cost = Cost::default();
        let found = self.descend(verbs, key, 0, &mut cost).map(|d| {
            let leaf = &d.at.node;
            leaf.search(key).ok().map(|i| leaf.entries[i].1)
        });
        self.stats.lookup_reads.fetch_add(cost.reads, Ordering::Relaxed);
        if found.is_ok() {
            self.stats.lookups.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    fn corrupt(&self, offset: Offset, why: &'static str) -> Error {
        Error::TreeCorrupt { node: self.node, offset, why }
    }

    fn busy(&self, offset: Offset) -> Error {
        Error::TreeBusy { node: self.node, offset, attempts: MAX_ATTEMPTS }
    }

    /// READs the node at `offset` until the READ is consistent, by this handle's
    /// [`ReadCheck`].
    fn read_node(&self, verbs: &dyn Verbs, offset: Offset, cost: &mut Cost) -> Result<Node> {
        let mut raw = vec![0u8; self.node_bytes as usize];
        let mut front = [0u8; 8];
        for attempt in 0..MAX_ATTEMPTS {
            let decoded = match self.read_check {
                ReadCheck::Versions => {
                    verbs.read(self.node, offset, &mut raw)?;
                    cost.reads += 1;
                    Node::decode(&raw)
                }
                ReadCheck::Bracketed => {
                    verbs.read(self.node, offset, &mut front)?;
                    let before = u64::from_le_bytes(front);
                    cost.reads += 1;
                    if before & 1 == 1 {
                        Decoded::Busy
                    } else {
                        verbs.read(self.node, offset, &mut raw)?;
                        verbs.read(self.node, offset, &mut front)?;
                        cost.reads += 2;
                        Node::decode_bracketed(before, &raw, u64::from_le_bytes(front))
                    }
                }
            };
            match decoded {
                Decoded::Node(n) => return Ok(n),
                Decoded::Corrupt(why) => return Err(self.corrupt(offset, why)),
                Decoded::Busy => {
                    self.stats.busy_reads.fetch_add(1, Ordering::Relaxed);
                    backoff(attempt);
                }
            }
        }
        Err(self.busy(offset))
    }

    /// READs the root offset from the anchor and remembers it.
    fn read_root(&self, verbs: &dyn Verbs, cost: &mut Cost) -> Result<Offset> {
        let mut raw = [0u8; 8];
        verbs.read(self.node, Offset(self.anchor.0 + ANCHOR_ROOT), &mut raw)?;
        cost.reads += 1;
        let root = u64::from_le_bytes(raw);
        if root == 0 || root % 64 != 0 {
            return Err(self.corrupt(self.anchor, "the anchor's root offset is null or unaligned"));
        }
        self.root.store(root, Ordering::Release);
        Ok(Offset(root))
    }

    /// Locks the node of `level` that covers `key`, starting at `offset` (a node whose low
    /// fence was at most `key` when the caller learnt of it) and moving right as needed: CAS
    /// of its front word from the version READ to version + 1. `seen` is a consistent READ of
    /// `offset` already made. Returns where the locked node is and its image, which the lock
    /// proves current; `None` when the way led to a freed node, to one right of the key or of
    /// another level, or to a sibling that does not start where its left neighbour ended
    /// (freed and maybe reused since): the caller descends again.
    fn lock(
        &self,
        verbs: &dyn Verbs,
        mut offset: Offset,
        key: u64,
        level: u8,
        mut seen: Option<Node>,
        cost: &mut Cost,
    ) -> Result<Option<(Offset, Node)>> {
        // The high fence of the node the last move right left: where the next one must start.
        let mut from: Option<u64> = None;
        for attempt in 0..MAX_ATTEMPTS {
            let node = match seen.take() {
                Some(n) => n,
                None => self.read_node(verbs, offset, cost)?,
            };
            if node.freed || node.level != level || key < node.low || from.is_some_and(|h| h != node.low) {
                self.stats.moved.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            if !node.covers(key) {
                offset = node.sibling.expect("decode checks that a high fence comes with a sibling");
                from = node.high;
                continue;
            }
            from = None;
            if verbs.compare_and_swap(self.node, offset, node.version, node.version + 1)? == node.version {
                return Ok(Some((offset, node)));
            }
            self.stats.lock_conflicts.fetch_add(1, Ordering::Relaxed);
            backoff(attempt);
        }
        Err(self.busy(offset))
    }

    /// Locks the node at `offset` with one compare-and-swap from the version of `seen`, its
    /// READ image; `false` (nothing locked) when the node changed since.
    fn try_lock(&self, verbs: &dyn Verbs, offset: Offset, seen: &Node) -> Result<bool> {
        let won = verbs.compare_and_swap(self.node, offset, seen.version, seen.version + 1)? == seen.version;
        if !won {
            self.stats.lock_conflicts.fetch_add(1, Ordering::Relaxed);
        }
        Ok(won)
    }

    /// Drops the cached copy of a node a descent stopped at, when that copy led a writer to a
    /// node freed since (`lock` found it moved), so the next descent READs it afresh.
    fn forget(&self, seen: &traverse::Seen) {
        if let (true, Some(c)) = (seen.cached, &self.cache) {
            c.drop_stale(seen.off.0, seen.node.version);
        }
    }

    /// Appends to `batch` the three WRITEs publishing `node` (locked by this writer at
    /// version `node.version`) at `offset` as version + 2, which also unlocks it: the rear
    /// word, the body up to the last entry, the front word — in that order (`node.rs`).
    fn publish(&self, batch: &mut DoorbellBatch, offset: Offset, node: &mut Node) {
        for (at, bytes) in node.publish(self.node_bytes) {
            batch.write(Offset(offset.0 + at), bytes);
        }
    }

    /// Unlocks the node at `offset`, locked at `version` and left unchanged, by WRITEing
    /// the version back (its rear word never changed).
    fn unlock_unchanged(&self, verbs: &dyn Verbs, offset: Offset, version: u64) -> Result<()> {
        Ok(verbs.write(self.node, offset, &version.to_le_bytes())?)
    }
}

/// Waits a little before attempt `attempt + 1`: spins first, then yields the core (the
/// writer holding the lock may be waiting for it).
fn backoff(attempt: u32) {
    if attempt < 8 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}
