//! Merges: a node left under a quarter full by a remove is merged with a neighbour under the
//! same parent when the two fit in half a node. The left node absorbs the right one's entries
//! and range, the parent loses the right one's entry, and the right one is published freed
//! and pushed on the tree's free list (`free.rs`) — the deletion half of a B-link tree, as in
//! Lanin and Shasha ("A Symmetric Concurrent B-Tree Algorithm", FJCC 1986), with the left
//! node always the survivor so that no low fence ever moves.
//!
//! Locks: the merger waits for the parent's lock holding none, then tries each child's lock
//! once (left, then right) and lets every lock go when one is taken. Splits and removes
//! hold one lock at a time, so nobody waits while holding a lock a merger waits for, and a
//! merger waits only while it holds nothing: no deadlock. Readers that meet a locked node
//! READ it again; those that arrive at the freed node later (a stale cached parent, a
//! descent's path, a scan's sibling pointer) descend again from the root (`traverse.rs`).
//!
//! A merged inner node brings the last child of its left half next to the first child of its
//! right half; they are tried next, and the parent after a merge took an entry out of it, so
//! removes of ascending keys fold whole subtrees into the leftmost nodes.

use super::node::{capacity, Node};
use super::{BTree, Cost};
use crate::error::Result;
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::Offset;
use std::sync::atomic::Ordering;

/// Most merges one remove makes: its node's, its parent's and the children a parent's merge
/// brought together. Enough to fold a subtree a few levels high; what is left waits for the
/// next remove nearby.
const MAX_MERGES_PER_REMOVE: usize = 16;

/// Whether a node of `len` entries out of `cap` is under a quarter full.
pub(super) fn underfull(len: usize, cap: usize) -> bool {
    len * 4 < cap
}

/// Whether two nodes of `a` and `b` entries fit in half a node of `cap` entries (so the merged
/// node splits again only after as many inserts as it had entries).
fn fit(a: usize, b: usize, cap: usize) -> bool {
    (a + b) * 2 <= cap
}

impl BTree {
    /// After a remove left the node of `level` covering `key` with `len` entries: when it is
    /// under a quarter full, merges it with a neighbour (and then what that merge brought
    /// together), at most [`MAX_MERGES_PER_REMOVE`] merges.
    ///
    /// # Errors
    /// [`crate::Error::TreeBusy`], [`crate::Error::TreeCorrupt`] and verbs errors as
    /// [`BTree::lookup`]; a verbs error while locks are held leaves those nodes locked.
    pub(super) fn compact(&self, verbs: &dyn Verbs, level: u8, key: u64, len: usize, cost: &mut Cost) -> Result<()> {
        if !underfull(len, capacity(self.node_bytes)) {
            return Ok(());
        }
        let mut work = vec![(level, key)];
        let mut merges = 0;
        while let Some((level, key)) = work.pop() {
            if merges == MAX_MERGES_PER_REMOVE {
                break;
            }
            if let Some(next) = self.merge_at(verbs, level, key, cost)? {
                merges += 1;
                work.extend(next);
            }
        }
        Ok(())
    }

    /// Merges the node of `level` listed for `key` by its parent with its left neighbour, or
    /// else its right one, when they fit. Returns what to try next — the parent when it is
    /// under a quarter full now, and for inner nodes the two children the merge brought
    /// together — or `None` when nothing was merged (the tree is lower, the pair does not
    /// fit, or a lock was taken).
    fn merge_at(&self, verbs: &dyn Verbs, level: u8, key: u64, cost: &mut Cost) -> Result<Option<Vec<(u8, u64)>>> {
        let root = self.read_root(verbs, cost)?;
        // A root's level never changes (roots are never freed): a cached copy tells it.
        if self.fetch(verbs, root, true, cost)?.node.level <= level {
            return Ok(None);
        }
        let d = self.descend(verbs, key, level + 1, cost)?;
        let Some((parent_at, parent)) = self.lock(verbs, d.at.off, key, level + 1, None, cost)? else {
            self.forget(&d.at);
            return Ok(None);
        };
        match self.merge_children(verbs, parent_at, &parent, key, cost)? {
            Some(next) => Ok(Some(next)),
            None => {
                self.unlock_unchanged(verbs, parent_at, parent.version)?;
                Ok(None)
            }
        }
    }

    /// With `parent` locked at `parent_at`: merges the child listed for `key` with a
    /// neighbour, publishing the parent (which unlocks it), or leaves everything as it was
    /// and the parent locked (`None`).
    fn merge_children(
        &self,
        verbs: &dyn Verbs,
        parent_at: Offset,
        parent: &Node,
        key: u64,
        cost: &mut Cost,
    ) -> Result<Option<Vec<(u8, u64)>>> {
        let cap = capacity(self.node_bytes);
        let level = parent.level - 1;
        let i = parent.entries.partition_point(|e| e.0 <= key).saturating_sub(1);
        let mut pairs = Vec::with_capacity(2);
        if i > 0 {
            pairs.push(i - 1);
        }
        if i + 1 < parent.entries.len() {
            pairs.push(i);
        }
        for a in pairs {
            let (left_at, right_at) = (Offset(parent.entries[a].1), Offset(parent.entries[a + 1].1));
            let left = self.read_node(verbs, left_at, cost)?;
            let right = self.read_node(verbs, right_at, cost)?;
            // Children a locked parent lists are in the tree; a left child whose split has
            // not reached the parent yet has another sibling, and waits for it.
            let adjacent = left.level == level
                && right.level == level
                && !left.freed
                && !right.freed
                && left.low == parent.entries[a].0
                && right.low == parent.entries[a + 1].0
                && left.sibling == Some(right_at)
                && left.high == Some(right.low);
            if !adjacent || !fit(left.entries.len(), right.entries.len(), cap) {
                continue;
            }
            if !self.try_lock(verbs, left_at, &left)? {
                continue;
            }
            if !self.try_lock(verbs, right_at, &right)? {
                self.unlock_unchanged(verbs, left_at, left.version)?;
                continue;
            }
            let head = self.read_free_head(verbs, cost)?;
            let mut merged = left;
            merged.absorb(&right);
            let mut rest = parent.clone();
            rest.entries.remove(a + 1);
            let mut freed = Node::freed(right.version, level, right.low, BTree::first_free(head));
            let mut batch = DoorbellBatch::new();
            self.publish(&mut batch, left_at, &mut merged);
            self.publish(&mut batch, right_at, &mut freed);
            self.publish(&mut batch, parent_at, &mut rest);
            verbs.post_batch(self.node, &mut batch)?;
            self.stats.merges.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = &self.cache {
                c.drop_stale(right_at.0, freed.version);
            }
            let mut next = Vec::with_capacity(2);
            if underfull(rest.entries.len(), cap) {
                next.push((level + 1, rest.low));
            }
            if level > 0 {
                next.push((level - 1, right.low));
            }
            self.cache_written(left_at, merged);
            self.cache_written(parent_at, rest);
            self.push_free(verbs, right_at, freed, cost)?;
            return Ok(Some(next));
        }
        Ok(None)
    }
}
