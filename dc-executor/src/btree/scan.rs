//! Range scans: descend to the leaf of the first key, then follow the leaves' sibling
//! pointers (B-link), one READ per leaf.

use super::{BTree, Cost, MAX_ATTEMPTS};
use crate::error::Result;
use crate::verbs::Verbs;
use std::sync::atomic::Ordering;

impl BTree {
    /// The entries with keys in `from..=to`, in key order, at most `limit` of them.
    ///
    /// Descends to the leaf covering `from` (one READ with a warm cache), then READs leaf
    /// after leaf along the sibling pointers until a leaf's high fence passes `to`, the
    /// limit is reached or the level ends: `1 + ⌈entries / fill⌉` READs or so, where a leaf
    /// holds 30–61 entries at 1 KiB. Each leaf is a consistent READ, and each next leaf
    /// starts at the high fence of the one before as it was READ, so the result is sorted,
    /// within the range and holds every key that stayed in the tree throughout the scan; a
    /// key inserted or removed meanwhile may or may not be there. A sibling that does not
    /// start at that high fence (freed by a merge meanwhile) sends the scan down from the
    /// root to the leaf that covers the fence now. Empty when `from > to` or `limit` is 0.
    ///
    /// # Errors
    /// As [`BTree::lookup`].
    pub fn scan(&self, verbs: &dyn Verbs, from: u64, to: u64, limit: usize) -> Result<Vec<(u64, u64)>> {
        let mut cost = Cost::default();
        let found = self.scan_inner(verbs, from, to, limit, &mut cost);
        self.stats.scan_reads.fetch_add(cost.reads, Ordering::Relaxed);
        if let Ok(entries) = &found {
            self.stats.scans.fetch_add(1, Ordering::Relaxed);
            self.stats.scan_entries.fetch_add(entries.len() as u64, Ordering::Relaxed);
        }
        found
    }

    fn scan_inner(
        &self,
        verbs: &dyn Verbs,
        from: u64,
        to: u64,
        limit: usize,
        cost: &mut Cost,
    ) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        if from > to || limit == 0 {
            return Ok(out);
        }
        let d = self.descend(verbs, from, 0, cost)?;
        let mut leaf = std::sync::Arc::unwrap_or_clone(d.at.node);
        let mut from = from;
        let mut restarts = 0u32;
        loop {
            let first = leaf.entries.partition_point(|e| e.0 < from);
            for &(k, v) in &leaf.entries[first..] {
                if k > to {
                    return Ok(out);
                }
                out.push((k, v));
                if out.len() == limit {
                    return Ok(out);
                }
            }
            let (Some(high), Some(next)) = (leaf.high, leaf.sibling) else {
                return Ok(out);
            };
            if high > to {
                return Ok(out);
            }
            leaf = self.read_node(verbs, next, cost)?;
            if leaf.freed || leaf.low != high || !leaf.is_leaf() {
                // Freed by a merge since the leaf before was READ (its range went to that
                // leaf, or a leaf left of it), and maybe reused: go on from its low fence.
                self.stats.moved.fetch_add(1, Ordering::Relaxed);
                restarts += 1;
                if restarts > MAX_ATTEMPTS {
                    return Err(self.corrupt(next, "a scan that never finds the leaf after a high fence"));
                }
                leaf = std::sync::Arc::unwrap_or_clone(self.descend(verbs, high, 0, cost)?.at.node);
                from = from.max(high);
            }
        }
    }
}
