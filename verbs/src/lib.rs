//! One-sided verbs: the only way an executor touches a MemStore (docs/design.md §3), and the
//! memory they reach: a node's MemStore [`Region`] and, under `durability: disk`, its disk
//! image ([`persist`]).
//!
//! [`Verbs`] is the trait, with the 8-byte atomics of RDMA (compare-and-swap,
//! fetch-and-add, their masked forms) and a [`DoorbellBatch`] that posts several work
//! requests to one node with one doorbell, executed in order as on a reliable-connected
//! queue pair. Every verb is counted in [`VerbCounters`].
//!
//! Backends: [`LocalVerbs`] (in-process heap regions, or `/dev/shm` files mapped by every
//! node process of a DC), [`TcpVerbs`] (two-sided RPCs to a [`TcpVerbsServer`] per node:
//! the `redt-tcp` baseline, RedT §6.5) and, behind the `rdma` feature, `RdmaVerbs` on the
//! verbs C API. The two that cross the network (TCP verbs, the RDMA bootstrap) speak TLS with
//! the cluster CA and accept only node certificates of their own DC ([`VerbsTls`]).

mod batch;
mod counters;
mod error;
mod hook;
mod local;
pub mod persist;
#[cfg(feature = "rdma")]
pub mod rdma;
pub mod region;
mod tcp;
mod tls;

pub use batch::{Completion, DoorbellBatch, WorkRequest};
pub use counters::{VerbCounters, VerbCounts};
pub use hook::BeforeBatch;
pub(crate) use local::open_private_file;
pub use local::{shared_file, LocalVerbs};
pub use tcp::{
    decode_reply_body, decode_request_body, encode_request_body, ServerCounts, ServerCountsHandle, ServerLimits,
    TcpVerbs, TcpVerbsServer, DEFAULT_IO_TIMEOUT, MAX_FRAME_BYTES, POOL_IDLE_FOR, WIRE_VERSION,
};
pub use tls::{cert_identity, VerbsTls, VERBS_ALPN};

pub use error::{Error, Result};
use redt_proto::{NodeId, Offset};
pub use region::{masked_add, Region};

/// One-sided access to the MemStores of one DC.
///
/// Offsets are byte offsets in the target node's region. Atomics operate on an aligned
/// little-endian 8-byte word and return its old value. A verb either completes or returns
/// an error; it never blocks on the remote CPU.
///
/// # Errors
/// Every method fails with [`crate::Error::OutOfBounds`] / [`crate::Error::Unaligned`] on a
/// bad address, [`crate::Error::UnknownNode`] for a node outside the DC, and
/// [`crate::Error::Backend`] when the transport fails.
pub trait Verbs: Send + Sync {
    /// RDMA READ of `buf.len()` bytes at `offset` of `node`.
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()>;
    /// RDMA WRITE of `data` at `offset` of `node`.
    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()>;
    /// 8-byte compare-and-swap; returns the old value (success iff it equals `expected`).
    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64>;
    /// 8-byte fetch-and-add (wrapping; subtract by adding the two's complement).
    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64>;
    /// Masked compare-and-swap: compares only `compare_mask` bits, replaces only
    /// `swap_mask` bits. Where the NIC lacks it, a READ + CAS loop (see the `rdma` backend).
    fn masked_compare_and_swap(
        &self,
        node: NodeId,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Result<u64>;
    /// Masked fetch-and-add: field-wise add, fields ending at the set bits of `boundary`.
    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64>;
    /// Posts every work request of `batch` to `node` with one doorbell and waits for all
    /// completions; results are read back from the batch. Requests run in order.
    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()>;
    /// The backend's verb counters.
    fn counters(&self) -> &VerbCounters;
    /// Makes every write to `node`'s MemStore completed before the call durable on the
    /// node's disk image (`durability: disk`, `persist.rs`; the role of RDMA's FLUSH verb,
    /// IBTA 1.5). Group-committed on the node. Returns at once where the MemStore has no
    /// disk image (`durability: memory`).
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the image cannot be written or synced; transport errors.
    fn persist(&self, node: NodeId) -> Result<()> {
        let mut batch = DoorbellBatch::new();
        batch.push(WorkRequest::Persist);
        self.post_batch(node, &mut batch)
    }
}
