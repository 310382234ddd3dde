//! Deletes: lock the leaf, take the entry out, publish; a leaf left under a quarter full is
//! then merged with a neighbour when they fit (`merge.rs`).

use super::{BTree, Cost};
use crate::error::Result;
use crate::verbs::{DoorbellBatch, Verbs};
use std::sync::atomic::Ordering;

impl BTree {
    /// Removes `key`; returns its value, `None` when the tree did not hold it.
    ///
    /// Descends to the leaf (one READ with a warm cache); an absent key costs nothing more.
    /// Else locks the leaf with one compare-and-swap and publishes it without the entry with
    /// one doorbell batch of three WRITEs. A leaf left under a quarter full is merged with a
    /// neighbour under the same parent when both fit in half a node (`merge.rs`): a few more
    /// READs, three locks and one batch per merge. A merge that fails does not fail the remove
    /// (`merges_failed` counts it).
    ///
    /// # Errors
    /// As [`BTree::lookup`]. A verbs error while the lock is held leaves the leaf locked.
    pub fn remove(&self, verbs: &dyn Verbs, key: u64) -> Result<Option<u64>> {
        self.stats.removes.fetch_add(1, Ordering::Relaxed);
        let mut cost = Cost::default();
        let done = self.remove_inner(verbs, key, &mut cost);
        self.stats.update_reads.fetch_add(cost.reads, Ordering::Relaxed);
        done
    }

    fn remove_inner(&self, verbs: &dyn Verbs, key: u64, cost: &mut Cost) -> Result<Option<u64>> {
        let d = self.descend(verbs, key, 0, cost)?;
        if d.at.node.search(key).is_err() {
            return Ok(None);
        }
        let (_, offset, mut leaf) = self.lock_leaf(verbs, key, Some(d), cost)?;
        let Ok(i) = leaf.search(key) else {
            // Removed by another writer between the READ and the lock.
            self.unlock_unchanged(verbs, offset, leaf.version)?;
            return Ok(None);
        };
        let (_, value) = leaf.entries.remove(i);
        let mut batch = DoorbellBatch::new();
        self.publish(&mut batch, offset, &mut leaf);
        verbs.post_batch(self.node, &mut batch)?;
        // The entry is gone whatever the merges do: one that fails (a node left locked by a
        // dead writer, a verbs error) is counted, and the next remove nearby tries again.
        if let Err(e) = self.compact(verbs, 0, leaf.low, leaf.entries.len(), cost) {
            self.stats.merges_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(node = %self.node, "B+-tree merge after a remove failed: {e}");
        }
        Ok(Some(value))
    }
}
