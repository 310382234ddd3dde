//! The executor-side cache of inner nodes (DEX §5: compute-side caching with random-sampling
//! replacement that favours the levels near the root).
//!
//! Entries are decoded inner nodes keyed by their offset. Nothing keeps them coherent with
//! the MemStore: a cached copy may be older than the node. That is safe because the leaf READ
//! is always fresh and every node a descent reaches is checked: a child or sibling that is
//! freed (merged away), right of the key, of another level, or does not cover the key makes
//! the descent drop the cached parent that sent it there and start again from the root
//! (`traverse.rs`); a node's memory is only ever reused as a node of the same tree, so a
//! stale pointer always leads to a node image. Freed nodes are never cached.

use super::node::Node;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A bounded map offset → inner node, shared by the threads of one tree handle.
#[derive(Debug)]
pub(crate) struct NodeCache {
    capacity: usize,
    inner: RwLock<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    nodes: Vec<(u64, Arc<Node>)>,
    at: HashMap<u64, usize>,
    /// Draws of the eviction sampler so far.
    draws: u64,
}

/// splitmix64's finalizer: a bijective mix, so consecutive draws land on unrelated slots.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl NodeCache {
    /// An empty cache of at most `capacity` nodes (at least 1).
    pub(crate) fn new(capacity: usize) -> NodeCache {
        NodeCache { capacity: capacity.max(1), inner: RwLock::default() }
    }

    /// The cached copy of the node at `offset`.
    pub(crate) fn get(&self, offset: u64) -> Option<Arc<Node>> {
        let s = self.inner.read().expect("no thread panics holding the cache lock");
        s.at.get(&offset).map(|&i| s.nodes[i].1.clone())
    }

    /// Caches `node` read at `offset`, unless a newer copy is there. When the cache is full
    /// it samples two entries and evicts the one farther from the root (the lower level), or
    /// does not admit `node` when both samples sit above it.
    pub(crate) fn put(&self, offset: u64, node: Arc<Node>) {
        let mut s = self.inner.write().expect("no thread panics holding the cache lock");
        if let Some(&i) = s.at.get(&offset) {
            if s.nodes[i].1.version <= node.version {
                s.nodes[i].1 = node;
            }
            return;
        }
        if s.nodes.len() >= self.capacity {
            let len = s.nodes.len() as u64;
            s.draws += 2;
            let (a, b) = ((mix(s.draws) % len) as usize, (mix(s.draws + 1) % len) as usize);
            let victim = if s.nodes[a].1.level <= s.nodes[b].1.level { a } else { b };
            if s.nodes[victim].1.level > node.level {
                return;
            }
            s.evict(victim);
        }
        let i = s.nodes.len();
        s.nodes.push((offset, node));
        s.at.insert(offset, i);
    }

    /// Drops the copy of the node at `offset`, if it is at most `version` (a newer copy
    /// another thread put meanwhile stays).
    pub(crate) fn drop_stale(&self, offset: u64, version: u64) {
        let mut s = self.inner.write().expect("no thread panics holding the cache lock");
        if let Some(&i) = s.at.get(&offset) {
            if s.nodes[i].1.version <= version {
                s.evict(i);
            }
        }
    }

    /// Number of cached nodes.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().expect("no thread panics holding the cache lock").nodes.len()
    }

    /// Drops every entry.
    pub(crate) fn clear(&self) {
        *self.inner.write().expect("no thread panics holding the cache lock") = Slots::default();
    }
}

impl Slots {
    fn evict(&mut self, i: usize) {
        let (offset, _) = self.nodes.swap_remove(i);
        self.at.remove(&offset);
        if let Some(&(moved, _)) = self.nodes.get(i) {
            self.at.insert(moved, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner(level: u8, version: u64) -> Arc<Node> {
        Arc::new(Node { version, entries: vec![(0, 64)], ..Node::empty(level, 0, None, None) })
    }

    #[test]
    fn newer_copies_replace_older_ones_and_not_the_other_way() {
        let c = NodeCache::new(4);
        c.put(64, inner(1, 4));
        c.put(64, inner(1, 2));
        assert_eq!(c.get(64).unwrap().version, 4);
        c.put(64, inner(1, 6));
        assert_eq!(c.get(64).unwrap().version, 6);
        c.drop_stale(64, 4);
        assert!(c.get(64).is_some(), "a newer copy than the one found stale stays");
        c.drop_stale(64, 6);
        assert!(c.get(64).is_none());
    }

    #[test]
    fn a_full_cache_keeps_the_upper_levels() {
        let c = NodeCache::new(8);
        c.put(64, inner(3, 0));
        for i in 0..200u64 {
            c.put(128 + 64 * i, inner(1, 0));
            assert!(c.len() <= 8);
        }
        assert!(c.get(64).is_some(), "the root is never the lower of two samples");
        for i in 0..20u64 {
            c.put(100_000 + 64 * i, inner(2, 0));
        }
        assert!(c.get(64).is_some());
        let twos = (0..20u64).filter(|i| c.get(100_000 + 64 * i).is_some()).count();
        assert!(twos >= 5, "level-2 nodes displace level-1 ones ({twos} of 20 kept)");
        // Every index entry still points at its own slot after the swaps.
        let s = c.inner.read().unwrap();
        for (&off, &i) in &s.at {
            assert_eq!(s.nodes[i].0, off);
        }
        assert_eq!(s.at.len(), s.nodes.len());
    }
}
