//! The descent from the root to the node of a level that covers a key: optimistic READs,
//! moves right along B-link siblings, and the inner-node cache with its staleness check
//! (DEX §5.1, Algorithm 1: "key outside fence keys → refresh from the remote root").

use super::node::Node;
use super::{BTree, Cost, MAX_ATTEMPTS};
use crate::error::Result;
use crate::verbs::Verbs;
use redt_proto::Offset;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Restarts after stale cached nodes before a descent stops using the cache (READs every
/// level, still refilling the cache): bounds the work when other writers keep the cache
/// stale faster than the descent refreshes it.
const MAX_STALE_RESTARTS: u32 = 4;

/// Moves right one descent may make before the sibling chain is taken for a cycle.
const MAX_MOVES: u64 = 1 << 24;

/// A node as a descent saw it.
#[derive(Debug)]
pub(super) struct Seen {
    /// Where it is.
    pub off: Offset,
    /// Its image: a consistent READ, or a cached copy of one.
    pub node: Arc<Node>,
    /// Whether the image came from the cache (and may be stale).
    pub cached: bool,
}

/// Where a descent arrived, and the way it came.
#[derive(Debug)]
pub(super) struct Descent {
    /// The node of the target level covering the key. At level 0 always a fresh READ.
    pub at: Seen,
    /// `path[l]` is the offset of the level-`l` node the descent went down from; 0 at and
    /// below the target level. Its length is the root's level + 1.
    pub path: Vec<u64>,
}

impl BTree {
    /// The node at `offset`: from the cache when `use_cache` and it is there, else READ
    /// (and an inner node so READ, unless freed, is put in the cache, if there is one).
    pub(super) fn fetch(&self, verbs: &dyn Verbs, offset: Offset, use_cache: bool, cost: &mut Cost) -> Result<Seen> {
        if use_cache {
            if let Some(node) = self.cache.as_ref().and_then(|c| c.get(offset.0)) {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Seen { off: offset, node, cached: true });
            }
        }
        let node = Arc::new(self.read_node(verbs, offset, cost)?);
        if !node.is_leaf() && !node.freed {
            self.stats.cache_misses.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = &self.cache {
                c.put(offset.0, node.clone());
            }
        }
        Ok(Seen { off: offset, node, cached: false })
    }

    /// Descends from the root to the node of `level` that covers `key`.
    ///
    /// At each node: when `key` is at or past its high fence, moves right to its sibling —
    /// unless a cached copy of its parent sent it there, in which case that copy is dropped
    /// and the descent starts again from the root; else, at `level`, stops; else goes down
    /// to the child covering `key`. A node that is freed, right of the key, of another level
    /// than the pointer to it promised, or a sibling that does not start where its left
    /// neighbour ended (freed by a merge since the pointer was READ, and maybe reused) starts
    /// the descent again from the root too: so each move right goes to a higher low fence,
    /// and stale images can make no loop. A root READ with a high fence has
    /// split: the anchor is READ once for the new root.
    ///
    /// # Errors
    /// [`crate::Error::TreeCorrupt`] when the tree is lower than `level`, or when descents keep
    /// meeting misplaced nodes past `MAX_ATTEMPTS` restarts; READ errors.
    pub(super) fn descend(&self, verbs: &dyn Verbs, key: u64, level: u8, cost: &mut Cost) -> Result<Descent> {
        let mut restarts = 0;
        let mut root_refreshed = false;
        'descent: loop {
            if restarts > MAX_ATTEMPTS {
                return Err(
                    self.corrupt(Offset(self.root.load(Ordering::Acquire)), "descents that never reach the key")
                );
            }
            let use_cache = self.cache.is_some() && restarts < MAX_STALE_RESTARTS;
            let mut cur = self.fetch(verbs, Offset(self.root.load(Ordering::Acquire)), use_cache, cost)?;
            if cur.node.high.is_some() && !root_refreshed {
                root_refreshed = true;
                if self.read_root(verbs, cost)? != cur.off {
                    continue 'descent;
                }
            }
            if cur.node.level < level {
                return Err(self.corrupt(cur.off, "a descent below the root's level"));
            }
            let mut path = vec![0u64; cur.node.level as usize + 1];
            // The cached copy (offset, version) whose child pointer led to `cur`, if any.
            let mut cached_parent: Option<(Offset, u64)> = None;
            // The level the pointer that led to `cur` promised.
            let mut expected = cur.node.level;
            let mut moves = 0u64;
            loop {
                let misplaced = cur.node.freed || cur.node.level != expected || key < cur.node.low;
                if misplaced || (!cur.node.covers(key) && cached_parent.is_some()) {
                    if let (Some((parent, version)), Some(c)) = (cached_parent, &self.cache) {
                        c.drop_stale(parent.0, version);
                    }
                    if misplaced && cur.cached {
                        if let Some(c) = &self.cache {
                            c.drop_stale(cur.off.0, cur.node.version);
                        }
                    }
                    if misplaced {
                        self.stats.moved.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.stats.stale_cache.fetch_add(1, Ordering::Relaxed);
                    }
                    restarts += 1;
                    continue 'descent;
                }
                if !cur.node.covers(key) {
                    moves += 1;
                    if moves > MAX_MOVES {
                        return Err(self.corrupt(cur.off, "a sibling chain without end"));
                    }
                    let next = cur.node.sibling.expect("decode checks that a high fence comes with a sibling");
                    let high = cur
                        .node
                        .high
                        .expect("a node that does not cover a key at or past its low fence has a high one");
                    cur = self.fetch(verbs, next, use_cache, cost)?;
                    if cur.node.low != high {
                        // Not the node that starts where the last one ended: one of the two
                        // images is older than a merge (and the chain they make may even
                        // loop). From the root again.
                        if cur.cached {
                            if let Some(c) = &self.cache {
                                c.drop_stale(cur.off.0, cur.node.version);
                            }
                        }
                        self.stats.moved.fetch_add(1, Ordering::Relaxed);
                        restarts += 1;
                        continue 'descent;
                    }
                    continue;
                }
                if cur.node.level == level {
                    return Ok(Descent { at: cur, path });
                }
                path[cur.node.level as usize] = cur.off.0;
                let child =
                    cur.node.child_for(key).expect("an inner node covering the key has an entry at or below it");
                cached_parent = cur.cached.then_some((cur.off, cur.node.version));
                expected = cur.node.level - 1;
                cur = self.fetch(verbs, child, use_cache, cost)?;
            }
        }
    }
}
