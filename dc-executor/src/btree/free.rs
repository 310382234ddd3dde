//! The tree's free list: nodes freed by merges (`merge.rs`), kept for the tree's next splits
//! and never given back to the record heap, so a stale pointer always leads to a node image
//! of this tree. A lock-free stack (a Treiber stack) reached with one-sided verbs only, as the
//! record heap's free lists are (`free_list.rs`).
//!
//! Its head is the anchor's word 4 ([`ANCHOR_FREE`]): the first free node's offset in 64-byte
//! lines (low 40 bits: 64 TiB) and a tag (high 24 bits) that every push and pop advances, so a pop
//! whose READ of the head went stale (the node popped, reused, freed and pushed again
//! meanwhile) fails its compare-and-swap instead of taking a node twice. A free node is a
//! freed image ([`Node::freed`]) naming the next free node.

use super::node::Node;
use super::{backoff, BTree, Cost, ANCHOR_FREE, MAX_ATTEMPTS};
use crate::error::Result;
use crate::free_list::{head_first, head_next};
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::Offset;
use std::sync::atomic::Ordering;

/// Bits of the head word holding the first free node's offset in lines (64 TiB); the other 24
/// are the tag.
const OFFSET_BITS: u32 = 40;

fn next_head(head: u64, offset: u64) -> u64 {
    head_next(head, offset, OFFSET_BITS)
}

fn first(head: u64) -> u64 {
    head_first(head, OFFSET_BITS)
}

impl BTree {
    fn free_head(&self) -> Offset {
        Offset(self.anchor.0 + ANCHOR_FREE)
    }

    /// READs the free list's head word.
    pub(super) fn read_free_head(&self, verbs: &dyn Verbs, cost: &mut Cost) -> Result<u64> {
        let mut raw = [0u8; 8];
        verbs.read(self.node, self.free_head(), &mut raw)?;
        cost.reads += 1;
        Ok(u64::from_le_bytes(raw))
    }

    /// The offset of the first free node named by `head`, for a freed image's `next_free`.
    pub(super) fn first_free(head: u64) -> u64 {
        first(head)
    }

    /// Pushes the node at `offset` on the free list. `freed` is its image as published, out
    /// of the tree and unlocked; its `next_free` names the node the caller found first on the
    /// list. When the list changed since, the node is locked and published again naming the
    /// new first node, and the push tried again.
    ///
    /// # Errors
    /// [`crate::Error::TreeCorrupt`] when the freed node is found locked (no writer locks a
    /// node out of the tree); [`crate::Error::TreeBusy`] after `MAX_ATTEMPTS` lost races;
    /// verbs errors.
    pub(super) fn push_free(&self, verbs: &dyn Verbs, offset: Offset, mut freed: Node, cost: &mut Cost) -> Result<()> {
        for attempt in 0..MAX_ATTEMPTS {
            let head = self.read_free_head(verbs, cost)?;
            if freed.next_free != first(head) {
                if !self.try_lock(verbs, offset, &freed)? {
                    return Err(self.corrupt(offset, "a freed node locked by another writer"));
                }
                freed.next_free = first(head);
                let mut batch = DoorbellBatch::new();
                self.publish(&mut batch, offset, &mut freed);
                verbs.post_batch(self.node, &mut batch)?;
            }
            if verbs.compare_and_swap(self.node, self.free_head(), head, next_head(head, offset.0))? == head {
                return Ok(());
            }
            backoff(attempt);
        }
        Err(self.busy(self.free_head()))
    }

    /// Takes the first node of the free list and locks it; returns its offset and the version
    /// it was locked at (the caller publishes its new image as that version + 2, above any
    /// version a stale READ or lock attempt could hold). `None` when the list is empty.
    ///
    /// # Errors
    /// As [`BTree::push_free`].
    pub(super) fn pop_free(&self, verbs: &dyn Verbs, cost: &mut Cost) -> Result<Option<(Offset, u64)>> {
        for attempt in 0..MAX_ATTEMPTS {
            let head = self.read_free_head(verbs, cost)?;
            if first(head) == 0 {
                return Ok(None);
            }
            let at = Offset(first(head));
            let node = self.read_node(verbs, at, cost)?;
            let popped = node.freed
                && verbs.compare_and_swap(self.node, self.free_head(), head, next_head(head, node.next_free))? == head;
            if popped {
                // Nobody changes a node while it is on the list: this image is current.
                if !self.try_lock(verbs, at, &node)? {
                    return Err(self.corrupt(at, "a free node locked by another writer"));
                }
                self.stats.reused.fetch_add(1, Ordering::Relaxed);
                return Ok(Some((at, node.version)));
            }
            // The head moved since its READ (the node popped, and maybe reused): again.
            backoff(attempt);
        }
        Err(self.busy(self.free_head()))
    }

    /// The nodes on the free list, walked from its head: for [`BTree::check`] on a quiescent
    /// tree.
    pub(super) fn free_nodes(&self, verbs: &dyn Verbs, cost: &mut Cost) -> Result<u64> {
        let mut at = first(self.read_free_head(verbs, cost)?);
        let mut n = 0u64;
        while at != 0 {
            let node = self.read_node(verbs, Offset(at), cost)?;
            if !node.freed {
                return Err(self.corrupt(Offset(at), "check: a node on the free list that is not freed"));
            }
            n += 1;
            if n > self.layout.size / self.node_bytes {
                return Err(self.corrupt(Offset(at), "check: a free list without end"));
            }
            at = node.next_free;
        }
        Ok(n)
    }
}
