//! The driver's own view of each DC's data path: the same MemStores and verbs backend as
//! the cluster's, with the verbs the driver issues itself (reconnaissance READs,
//! pre-allocation inserts) counted apart, so the report can give the verbs of the
//! transactions alone.

use redt_dc_executor::verbs::Result;
use redt_dc_executor::{DcHandle, DoorbellBatch, VerbCounters, VerbCounts, Verbs, WorkRequest};
use redt_proto::{NodeId, Offset, Topology};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Forwards every verb to `inner` (which counts it as usual) and counts it here too.
pub struct Tap {
    inner: Arc<dyn Verbs>,
    counts: [AtomicU64; 7],
}

const READ: usize = 0;
const WRITE: usize = 1;
const CAS: usize = 2;
const FAA: usize = 3;
const MCAS: usize = 4;
const MFAA: usize = 5;
const DOORBELL: usize = 6;

impl Tap {
    fn add(&self, kind: usize) {
        self.counts[kind].fetch_add(1, Relaxed);
    }

    /// Verbs issued through this tap so far (bytes not counted).
    pub fn snapshot(&self) -> VerbCounts {
        let g = |k: usize| self.counts[k].load(Relaxed);
        VerbCounts {
            read: g(READ),
            write: g(WRITE),
            cas: g(CAS),
            faa: g(FAA),
            masked_cas: g(MCAS),
            masked_faa: g(MFAA),
            doorbells: g(DOORBELL),
            ..VerbCounts::default()
        }
    }
}

impl Verbs for Tap {
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()> {
        self.add(READ);
        self.add(DOORBELL);
        self.inner.read(node, offset, buf)
    }
    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()> {
        self.add(WRITE);
        self.add(DOORBELL);
        self.inner.write(node, offset, data)
    }
    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64> {
        self.add(CAS);
        self.add(DOORBELL);
        self.inner.compare_and_swap(node, offset, expected, new)
    }
    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64> {
        self.add(FAA);
        self.add(DOORBELL);
        self.inner.fetch_and_add(node, offset, add)
    }
    fn masked_compare_and_swap(
        &self,
        node: NodeId,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Result<u64> {
        self.add(MCAS);
        self.add(DOORBELL);
        self.inner.masked_compare_and_swap(node, offset, compare, compare_mask, swap, swap_mask)
    }
    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64> {
        self.add(MFAA);
        self.add(DOORBELL);
        self.inner.masked_fetch_and_add(node, offset, add, boundary)
    }
    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()> {
        for wr in batch.requests() {
            self.add(match wr {
                WorkRequest::Read { .. } => READ,
                WorkRequest::Write { .. } => WRITE,
                WorkRequest::CompareAndSwap { .. } => CAS,
                WorkRequest::FetchAndAdd { .. } => FAA,
                WorkRequest::MaskedCompareAndSwap { .. } => MCAS,
                WorkRequest::MaskedFetchAndAdd { .. } => MFAA,
                WorkRequest::Persist => DOORBELL,
            });
        }
        if !batch.is_empty() {
            self.add(DOORBELL);
        }
        self.inner.post_batch(node, batch)
    }
    fn counters(&self) -> &VerbCounters {
        self.inner.counters()
    }
}

/// A data-path handle per DC over the cluster's verbs, each behind a [`Tap`].
pub struct Side {
    /// Handles by DC id.
    pub dcs: Vec<Arc<DcHandle>>,
    taps: Vec<Arc<Tap>>,
}

impl Side {
    /// Taps every DC of `dcs` (the cluster's handles, by DC id).
    pub fn new(topo: &Topology, dcs: &[Arc<DcHandle>]) -> Self {
        let taps: Vec<Arc<Tap>> =
            dcs.iter().map(|h| Arc::new(Tap { inner: h.verbs.clone(), counts: Default::default() })).collect();
        let dcs = taps
            .iter()
            .map(|t| {
                let v: Arc<dyn Verbs> = t.clone();
                Arc::new(DcHandle::new(topo, v))
            })
            .collect();
        Side { dcs, taps }
    }

    /// Verbs issued through every tap so far.
    pub fn counts(&self) -> VerbCounts {
        self.taps.iter().fold(VerbCounts::default(), |acc, t| acc.plus(&t.snapshot()))
    }
}
