//! Counters of one B+-tree handle: operations and the READ verbs they issued.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Live counters of one [`crate::BTree`] handle, updated with relaxed atomics;
        /// [`BTreeStats::snapshot`] takes a [`BTreeCounts`].
        #[derive(Debug, Default)]
        pub struct BTreeStats {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A snapshot of [`BTreeStats`]; subtract two with [`BTreeCounts::since`] to count an
        /// interval. READs are counted in verbs issued (one per node or anchor READ, retries
        /// of torn or locked READs included), not in bytes.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct BTreeCounts {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl BTreeStats {
            /// Takes a snapshot of every counter.
            pub fn snapshot(&self) -> BTreeCounts {
                BTreeCounts { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl BTreeCounts {
            /// Counts between `earlier` and `self` (saturating at zero).
            pub fn since(&self, earlier: &BTreeCounts) -> BTreeCounts {
                BTreeCounts { $($name: self.$name.saturating_sub(earlier.$name),)* }
            }
        }
    };
}

counters! {
    /// Completed [`crate::BTree::lookup`] calls.
    lookups,
    /// READs issued by lookups.
    lookup_reads,
    /// Completed [`crate::BTree::scan`] calls.
    scans,
    /// READs issued by scans (the descent to the first leaf included).
    scan_reads,
    /// Entries returned by scans.
    scan_entries,
    /// [`crate::BTree::insert`] calls, whatever their outcome.
    inserts,
    /// [`crate::BTree::remove`] calls, whatever their outcome.
    removes,
    /// READs issued by inserts and removes (splits included).
    update_reads,
    /// Nodes split (leaves and inner nodes).
    splits,
    /// Times the tree grew a level (a new root installed by compare-and-swap on the anchor).
    root_grows,
    /// READs of a node that found it locked or torn, and were issued again.
    busy_reads,
    /// Lock compare-and-swaps that lost (the node changed since it was READ).
    lock_conflicts,
    /// Descents that found a cached inner node stale (its child did not cover the key),
    /// dropped it and started again from the root.
    stale_cache,
    /// Inner nodes taken from the cache during descents.
    cache_hits,
    /// Inner nodes READ during descents (cache off, cold or dropped).
    cache_misses,
    /// Times a descent, a lock or a scan met a node freed by a merge (or freed and reused
    /// for another range or level) where a pointer older than the merge led, and descended
    /// again from the root.
    moved,
    /// Merges: a node's entries and range taken into its left neighbour, the node freed.
    merges,
    /// Merges a remove tried that failed with an error (the remove itself done).
    merges_failed,
    /// Nodes a split or a new root took from the tree's free list instead of the heap.
    reused,
}

impl BTreeCounts {
    /// Mean READs per lookup; 0.0 before the first.
    pub fn reads_per_lookup(&self) -> f64 {
        ratio(self.lookup_reads, self.lookups)
    }

    /// Mean READs per scan; 0.0 before the first.
    pub fn reads_per_scan(&self) -> f64 {
        ratio(self.scan_reads, self.scans)
    }

    /// Mean entries returned per scan; 0.0 before the first.
    pub fn entries_per_scan(&self) -> f64 {
        ratio(self.scan_entries, self.scans)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
