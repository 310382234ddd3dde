//! Per-verb counters.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of a verbs backend: one per verb kind, plus doorbells and bytes moved.
/// A batch of `k` requests counts `k` verbs and one doorbell; a lone verb counts one of
/// each.
#[derive(Debug, Default)]
pub struct VerbCounters {
    read: AtomicU64,
    write: AtomicU64,
    cas: AtomicU64,
    faa: AtomicU64,
    masked_cas: AtomicU64,
    masked_faa: AtomicU64,
    persist: AtomicU64,
    doorbells: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// A snapshot of [`VerbCounters`]; subtract two snapshots to count an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerbCounts {
    /// RDMA READs.
    pub read: u64,
    /// RDMA WRITEs.
    pub write: u64,
    /// Compare-and-swaps.
    pub cas: u64,
    /// Fetch-and-adds.
    pub faa: u64,
    /// Masked compare-and-swaps.
    pub masked_cas: u64,
    /// Masked fetch-and-adds.
    pub masked_faa: u64,
    /// PERSISTs that synced a disk image (`durability: disk`; not in [`VerbCounts::total`]).
    pub persist: u64,
    /// Doorbells rung (one per batch or lone verb).
    pub doorbells: u64,
    /// Bytes moved by READs.
    pub bytes_read: u64,
    /// Bytes moved by WRITEs.
    pub bytes_written: u64,
}

impl VerbCounters {
    pub(crate) fn read(&self, bytes: usize) {
        self.read.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn write(&self, bytes: usize) {
        self.write.fetch_add(1, Relaxed);
        self.bytes_written.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn cas(&self) {
        self.cas.fetch_add(1, Relaxed);
    }
    pub(crate) fn faa(&self) {
        self.faa.fetch_add(1, Relaxed);
    }
    pub(crate) fn masked_cas(&self) {
        self.masked_cas.fetch_add(1, Relaxed);
    }
    pub(crate) fn masked_faa(&self) {
        self.masked_faa.fetch_add(1, Relaxed);
    }
    pub(crate) fn persist(&self) {
        self.persist.fetch_add(1, Relaxed);
    }
    pub(crate) fn doorbell(&self) {
        self.doorbells.fetch_add(1, Relaxed);
    }

    /// Takes a snapshot of every counter.
    pub fn snapshot(&self) -> VerbCounts {
        VerbCounts {
            read: self.read.load(Relaxed),
            write: self.write.load(Relaxed),
            cas: self.cas.load(Relaxed),
            faa: self.faa.load(Relaxed),
            masked_cas: self.masked_cas.load(Relaxed),
            masked_faa: self.masked_faa.load(Relaxed),
            persist: self.persist.load(Relaxed),
            doorbells: self.doorbells.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
        }
    }
}

impl VerbCounts {
    /// Counts between `earlier` and `self` (saturating at zero).
    pub fn since(&self, earlier: &VerbCounts) -> VerbCounts {
        VerbCounts {
            read: self.read.saturating_sub(earlier.read),
            write: self.write.saturating_sub(earlier.write),
            cas: self.cas.saturating_sub(earlier.cas),
            faa: self.faa.saturating_sub(earlier.faa),
            masked_cas: self.masked_cas.saturating_sub(earlier.masked_cas),
            masked_faa: self.masked_faa.saturating_sub(earlier.masked_faa),
            persist: self.persist.saturating_sub(earlier.persist),
            doorbells: self.doorbells.saturating_sub(earlier.doorbells),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
        }
    }

    /// Sum of two snapshots.
    pub fn plus(&self, o: &VerbCounts) -> VerbCounts {
        VerbCounts {
            read: self.read + o.read,
            write: self.write + o.write,
            cas: self.cas + o.cas,
            faa: self.faa + o.faa,
            masked_cas: self.masked_cas + o.masked_cas,
            masked_faa: self.masked_faa + o.masked_faa,
            persist: self.persist + o.persist,
            doorbells: self.doorbells + o.doorbells,
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }

    /// Total number of verbs of every kind.
    pub fn total(&self) -> u64 {
        self.read + self.write + self.cas + self.faa + self.masked_cas + self.masked_faa
    }
}
