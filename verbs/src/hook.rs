//! [`BeforeBatch`]: verbs that run a hook before each doorbell batch and pass every verb on
//! to another backend unchanged. Tests use it to slip a concurrent writer's step between two
//! of an executor's (a commit during a snapshot scan, a promise raised before a fence entry).

use super::{DoorbellBatch, VerbCounters, Verbs};
use crate::error::Result;
use redt_proto::{NodeId, Offset};
use std::sync::Arc;

/// Verbs over `inner` that call `hook(inner, node, batch)` before posting each batch to
/// `node`; a hook error fails the batch (nothing of it is posted).
pub struct BeforeBatch<F> {
    inner: Arc<dyn Verbs>,
    hook: F,
}

impl<F> BeforeBatch<F>
where
    F: Fn(&dyn Verbs, NodeId, &DoorbellBatch) -> Result<()> + Send + Sync,
{
    /// Wraps `inner` with `hook`.
    pub fn new(inner: Arc<dyn Verbs>, hook: F) -> Self {
        BeforeBatch { inner, hook }
    }
}

impl<F> Verbs for BeforeBatch<F>
where
    F: Fn(&dyn Verbs, NodeId, &DoorbellBatch) -> Result<()> + Send + Sync,
{
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()> {
        self.inner.read(node, offset, buf)
    }
    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()> {
        self.inner.write(node, offset, data)
    }
    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64> {
        self.inner.compare_and_swap(node, offset, expected, new)
    }
    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64> {
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
        self.inner.masked_compare_and_swap(node, offset, compare, compare_mask, swap, swap_mask)
    }
    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64> {
        self.inner.masked_fetch_and_add(node, offset, add, boundary)
    }
    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()> {
        (self.hook)(self.inner.as_ref(), node, batch)?;
        self.inner.post_batch(node, batch)
    }
    fn counters(&self) -> &VerbCounters {
        self.inner.counters()
    }
}
