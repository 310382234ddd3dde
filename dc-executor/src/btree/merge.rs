//! Merges: a node left under a quarter full by a remove is merged with a neighbour under the
//! same parent when the two fit in half a node. The left node absorbs the right one's entries
//! and range, the parent loses the right one's entry, and the right one is published freed
//! and pushed on the tree's free list (`free.rs`) — the deletion half of a B-link tree, as in
//! Lanin and Shasha ("A Symmetric Concurrent B-Tree Algorithm", FJCC 1986), with the left
//! node always the survivor so that no low fence ever moves.
//!
//! Locks: the merger first READs the parent and the pair without locks and goes on only when
//! the pair fits; then it waits for the parent's lock holding none, tries each child's lock
//! once (left, then right) and lets every lock go when one is taken, or when anything fails
//! before it publishes. A lock is only ever waited for by a writer holding none, or holding
//! nodes above the one it waits for (a merger READing the children under the parent's lock)
//! or a node whose split waits for a free-list node (whose holders wait for nothing): waits
//! point down the tree or into the free list, so there is no cycle and no deadlock. Readers
//! that meet a locked node READ it again; those that arrive at the freed node later (a stale
//! cached parent, a descent's path, a scan's sibling pointer) descend again from the root
//! (`traverse.rs`).
//!
//! A merged inner node brings the last child of its left half next to the first child of its
//! right half; they are tried next, and the parent after a merge took an entry out of it, so
//! removes of ascending keys fold whole subtrees into the leftmost nodes.

use super::node::{capacity, Node};
use super::{BTree, Cost};
use crate::error::{Error, Result};
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

/// How a merge under a locked parent ended.
enum Merged {
    /// Merged and published (the parent too, which unlocks it); what to try next.
    Done(Vec<(u8, u64)>),
    /// Nothing merged, nothing changed: the parent is still locked.
    Nothing,
}

/// A merge that failed: before it published (every lock it took is let go but the parent's,
/// which is still held), or while or after it published (the nodes as the failure left them).
enum Failed {
    BeforePublish(Error),
    AfterPublish(Error),
}

/// The positions in `parent` of the left children of the pairs a merge of the child listed
/// for `key` may take: with its left neighbour first, then with its right one.
fn pairs(parent: &Node, key: u64) -> Vec<usize> {
    let i = parent.entries.partition_point(|e| e.0 <= key).saturating_sub(1);
    let mut pairs = Vec::with_capacity(2);
    if i > 0 {
        pairs.push(i - 1);
    }
    if i + 1 < parent.entries.len() {
        pairs.push(i);
    }
    pairs
}

impl BTree {
    /// After a remove left the node of `level` covering `key` with `len` entries: when it is
    /// under a quarter full, merges it with a neighbour (and then what that merge brought
    /// together), at most [`MAX_MERGES_PER_REMOVE`] merges.
    ///
    /// # Errors
    /// [`crate::Error::TreeBusy`], [`crate::Error::TreeCorrupt`] and verbs errors as
    /// [`BTree::lookup`]. A failure before a merge publishes lets its locks go; a verbs error
    /// while it publishes leaves the nodes it had locked as they are.
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
        // A root's level never changes (roots are never freed), and an older root is lower: the
        // handle's last root, from the cache, tells it unless it is too low, then the anchor.
        let known = Offset(self.root.load(std::sync::atomic::Ordering::Acquire));
        if self.fetch(verbs, known, true, cost)?.node.level <= level {
            let root = self.read_root(verbs, cost)?;
            if root == known || self.fetch(verbs, root, true, cost)?.node.level <= level {
                return Ok(None);
            }
        }
        let d = self.descend(verbs, key, level + 1, cost)?;
        // Without locks first: most removes leave nothing that fits, and must not hold the
        // parent (and the splits that wait for it) to find that out. The descent's own image
        // serves unless it came from the cache.
        let seen = if d.at.cached { self.read_node(verbs, d.at.off, cost)? } else { (*d.at.node).clone() };
        if !seen.freed && seen.level == level + 1 && seen.covers(key) && !self.a_pair_fits(verbs, &seen, key, cost)? {
            return Ok(None);
        }
        let Some((parent_at, parent)) = self.lock(verbs, d.at.off, key, level + 1, None, cost)? else {
            self.forget(&d.at);
            return Ok(None);
        };
        match self.merge_children(verbs, parent_at, &parent, key, cost) {
            Ok(Merged::Done(next)) => Ok(Some(next)),
            Ok(Merged::Nothing) => {
                self.unlock_unchanged(verbs, parent_at, parent.version)?;
                Ok(None)
            }
            Err(Failed::BeforePublish(e)) => {
                // Best effort: the error to report is the first one.
                let _ = self.unlock_unchanged(verbs, parent_at, parent.version);
                Err(e)
            }
            Err(Failed::AfterPublish(e)) => Err(e),
        }
    }

    /// Whether a pair `merge_children` would try for `key` under `parent` (an unlocked READ)
    /// fits, as READ now without locks.
    fn a_pair_fits(&self, verbs: &dyn Verbs, parent: &Node, key: u64, cost: &mut Cost) -> Result<bool> {
        let cap = capacity(self.node_bytes);
        for a in pairs(parent, key) {
            let left = self.read_node(verbs, Offset(parent.entries[a].1), cost)?;
            let right = self.read_node(verbs, Offset(parent.entries[a + 1].1), cost)?;
            if fit(left.entries.len(), right.entries.len(), cap) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// With `parent` locked at `parent_at`: merges the child listed for `key` with a
    /// neighbour, publishing the parent (which unlocks it), or leaves everything as it was
    /// and the parent locked.
    fn merge_children(
        &self,
        verbs: &dyn Verbs,
        parent_at: Offset,
        parent: &Node,
        key: u64,
        cost: &mut Cost,
    ) -> std::result::Result<Merged, Failed> {
        let cap = capacity(self.node_bytes);
        let level = parent.level - 1;
        let before = Failed::BeforePublish;
        for a in pairs(parent, key) {
            let (left_at, right_at) = (Offset(parent.entries[a].1), Offset(parent.entries[a + 1].1));
            let left = self.read_node(verbs, left_at, cost).map_err(before)?;
            let right = self.read_node(verbs, right_at, cost).map_err(before)?;
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
            if !self.try_lock(verbs, left_at, &left).map_err(before)? {
                continue;
            }
            let locked_right = match self.try_lock(verbs, right_at, &right) {
                Ok(won) => won,
                Err(e) => {
                    let _ = self.unlock_unchanged(verbs, left_at, left.version);
                    return Err(before(e));
                }
            };
            if !locked_right {
                self.unlock_unchanged(verbs, left_at, left.version).map_err(before)?;
                continue;
            }
            let head = match self.read_free_head(verbs, cost) {
                Ok(head) => head,
                Err(e) => {
                    let _ = self.unlock_unchanged(verbs, right_at, right.version);
                    let _ = self.unlock_unchanged(verbs, left_at, left.version);
                    return Err(before(e));
                }
            };
            let mut merged = left;
            merged.absorb(&right);
            let mut rest = parent.clone();
            rest.entries.remove(a + 1);
            let mut freed = Node::freed(right.version, level, right.low, BTree::first_free(head));
            let mut batch = DoorbellBatch::new();
            self.publish(&mut batch, left_at, &mut merged);
            self.publish(&mut batch, right_at, &mut freed);
            self.publish(&mut batch, parent_at, &mut rest);
            verbs.post_batch(self.node, &mut batch).map_err(|e| Failed::AfterPublish(e.into()))?;
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
            self.push_free(verbs, right_at, freed, cost).map_err(Failed::AfterPublish)?;
            return Ok(Merged::Done(next));
        }
        Ok(Merged::Nothing)
    }
}
