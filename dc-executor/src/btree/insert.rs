//! Inserts: lock the leaf, edit, publish; a full node splits into a new right sibling (a
//! node of the tree's free list, else new heap), and the separator goes up to the parent
//! under the parent's own lock, one lock at a time (a B-link split, Lehman and Yao §4 with
//! Sagiv's single lock); a split root grows a new root installed by compare-and-swap on the
//! anchor.

use super::node::{capacity, Node};
use super::traverse::Descent;
use super::{backoff, BTree, Cost, ANCHOR_ROOT, MAX_ATTEMPTS};
use crate::error::Result;
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::Offset;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl BTree {
    /// Sets `key` to `value`; returns the value it replaced, `None` for a new key.
    ///
    /// Descends to the leaf (one READ with a warm cache), locks it with one compare-and-swap
    /// (the version it READ, so no second READ when nobody wrote it meanwhile) and publishes
    /// the edited leaf with one doorbell batch of three WRITEs. A full leaf splits: one more
    /// fetch-and-add (the new node), the new node's WRITE joins the batch, then the parent is
    /// READ, locked and published the same way.
    ///
    /// # Errors
    /// [`crate::Error::HeapFull`] when a split finds no room for a new node (the tree is
    /// left as it was); [`crate::Error::TreeBusy`], [`crate::Error::TreeCorrupt`] and verbs
    /// errors as [`BTree::lookup`]. A verbs error while a lock is held leaves that node
    /// locked.
    pub fn insert(&self, verbs: &dyn Verbs, key: u64, value: u64) -> Result<Option<u64>> {
        self.stats.inserts.fetch_add(1, Ordering::Relaxed);
        let mut cost = Cost::default();
        let done = self.insert_inner(verbs, key, value, &mut cost);
        self.stats.update_reads.fetch_add(cost.reads, Ordering::Relaxed);
        done
    }

    fn insert_inner(&self, verbs: &dyn Verbs, key: u64, value: u64, cost: &mut Cost) -> Result<Option<u64>> {
        let (d, offset, mut leaf) = self.lock_leaf(verbs, key, None, cost)?;
        let old = match leaf.search(key) {
            Ok(i) => Some(std::mem::replace(&mut leaf.entries[i].1, value)),
            Err(i) => {
                leaf.entries.insert(i, (key, value));
                None
            }
        };
        self.store(verbs, offset, leaf, &d.path, cost)?;
        Ok(old)
    }

    /// Publishes `node`, locked by this writer at `offset` and edited; when it overflows,
    /// splits it and carries the separator up, level by level, until a node takes it
    /// without splitting or a new root does. `path` is the descent's way down.
    fn store(
        &self,
        verbs: &dyn Verbs,
        mut offset: Offset,
        mut node: Node,
        path: &[u64],
        cost: &mut Cost,
    ) -> Result<()> {
        loop {
            let mut batch = DoorbellBatch::new();
            if node.entries.len() <= capacity(self.node_bytes) {
                self.publish(&mut batch, offset, &mut node);
                verbs.post_batch(self.node, &mut batch)?;
                self.cache_written(offset, node);
                return Ok(());
            }
            let (right_at, reused) = match self.alloc_node(verbs, cost) {
                Ok(at) => at,
                Err(e) => {
                    self.unlock_unchanged(verbs, offset, node.version)?;
                    return Err(e);
                }
            };
            let mut right = node.split();
            node.sibling = Some(right_at);
            match reused {
                // Fresh heap: nobody READs it before it is linked; one WRITE of the image.
                None => {
                    batch.write(right_at, right.encode(self.node_bytes));
                }
                // A freed node, locked at `v`: published above every version it had, for the
                // stale READs and lock attempts that may still reach it.
                Some(v) => {
                    right.version = v;
                    self.publish(&mut batch, right_at, &mut right);
                }
            }
            self.publish(&mut batch, offset, &mut node);
            verbs.post_batch(self.node, &mut batch)?;
            self.stats.splits.fetch_add(1, Ordering::Relaxed);
            let (level, separator) = (node.level + 1, right.low);
            self.cache_written(offset, node);
            self.cache_written(right_at, right);
            let Some((parent_at, mut parent)) =
                self.lock_parent(verbs, level, separator, right_at, offset, path, cost)?
            else {
                return Ok(());
            };
            match parent.search(separator) {
                Err(i) => parent.entries.insert(i, (separator, right_at.0)),
                Ok(_) => {
                    self.unlock_unchanged(verbs, parent_at, parent.version)?;
                    return Err(self.corrupt(parent_at, "a separator already in the parent"));
                }
            }
            (offset, node) = (parent_at, parent);
        }
    }

    /// Locks the leaf covering `key`, from `first` (a descent already made) or a new descent;
    /// descends again while the way leads to a node freed by a merge. Returns the descent,
    /// where the leaf is and its image.
    pub(super) fn lock_leaf(
        &self,
        verbs: &dyn Verbs,
        key: u64,
        mut first: Option<Descent>,
        cost: &mut Cost,
    ) -> Result<(Descent, Offset, Node)> {
        for _ in 0..MAX_ATTEMPTS {
            let d = match first.take() {
                Some(d) => d,
                None => self.descend(verbs, key, 0, cost)?,
            };
            let seen = (*d.at.node).clone();
            if let Some((offset, leaf)) = self.lock(verbs, d.at.off, key, 0, Some(seen), cost)? {
                return Ok((d, offset, leaf));
            }
        }
        Err(self.busy(Offset(self.root.load(Ordering::Acquire))))
    }

    /// A node for a split: the first of the tree's free list, locked, with the version it
    /// was locked at; else a new one from the heap (`None`).
    fn alloc_node(&self, verbs: &dyn Verbs, cost: &mut Cost) -> Result<(Offset, Option<u64>)> {
        if let Some((at, version)) = self.pop_free(verbs, cost)? {
            return Ok((at, Some(version)));
        }
        Ok((self.layout.alloc(verbs, self.node, self.node_bytes)?, None))
    }

    /// Puts a node this writer just published in the cache, if it is an inner node.
    pub(super) fn cache_written(&self, offset: Offset, node: Node) {
        if let (Some(c), false) = (&self.cache, node.is_leaf()) {
            c.put(offset.0, Arc::new(node));
        }
    }

    /// Finds and locks the node of `level` that takes `separator` (the low fence of `right`,
    /// the new right half of `left`), starting from the descent's `path`; when `left` was the
    /// root, installs a new root over `left` and `right` instead and returns `None`.
    #[allow(clippy::too_many_arguments)]
    fn lock_parent(
        &self,
        verbs: &dyn Verbs,
        level: u8,
        separator: u64,
        right: Offset,
        left: Offset,
        path: &[u64],
        cost: &mut Cost,
    ) -> Result<Option<(Offset, Node)>> {
        if let Some(&p) = path.get(level as usize).filter(|&&p| p != 0) {
            if let Some(locked) = self.lock(verbs, Offset(p), separator, level, None, cost)? {
                return Ok(Some(locked));
            }
            // The path's node was freed by a merge since the descent: find the parent anew.
        }
        // `left` was at the top of the descent: the root then, or a node beside it.
        for attempt in 0..MAX_ATTEMPTS {
            let root = self.read_root(verbs, cost)?;
            if root == left {
                if self.grow(verbs, level, separator, left, right)? {
                    return Ok(None);
                }
                continue;
            }
            if self.read_node(verbs, root, cost)?.level < level {
                // Another writer split the root and has not installed its new one yet.
                backoff(attempt);
                continue;
            }
            let d = self.descend(verbs, separator, level, cost)?;
            if let Some(locked) = self.lock(verbs, d.at.off, separator, level, None, cost)? {
                return Ok(Some(locked));
            }
            self.forget(&d.at);
        }
        Err(self.busy(self.anchor))
    }

    /// Writes a new root of `level` over the old root `left` and its new sibling `right`
    /// (separator `separator`) and installs it with a compare-and-swap of the anchor's root
    /// word; returns whether it won (else another writer installed a root first, and this
    /// one's node is never linked).
    fn grow(&self, verbs: &dyn Verbs, level: u8, separator: u64, left: Offset, right: Offset) -> Result<bool> {
        let at = self.layout.alloc(verbs, self.node, self.node_bytes)?;
        let root = Node { entries: vec![(0, left.0), (separator, right.0)], ..Node::empty(level, 0, None, None) };
        verbs.write(self.node, at, &root.encode(self.node_bytes))?;
        let word = Offset(self.anchor.0 + ANCHOR_ROOT);
        if verbs.compare_and_swap(self.node, word, left.0, at.0)? != left.0 {
            // Never linked, so never READ: freed with one WRITE and kept for a later split.
            let freed = Node::freed(0, level, 0, 0);
            verbs.write(self.node, at, &freed.encode(self.node_bytes))?;
            self.push_free(verbs, at, freed, &mut Cost::default())?;
            return Ok(false);
        }
        self.root.store(at.0, Ordering::Release);
        self.stats.root_grows.fetch_add(1, Ordering::Relaxed);
        self.cache_written(at, root);
        Ok(true)
    }
}
