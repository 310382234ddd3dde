//! Doorbell batches: several work requests to one node, posted with one doorbell.

use redt_proto::Offset;

/// One work request of a [`DoorbellBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkRequest {
    /// READ `len` bytes at `offset`.
    Read {
        /// Remote offset.
        offset: Offset,
        /// Bytes to read.
        len: u32,
    },
    /// WRITE `data` at `offset`.
    Write {
        /// Remote offset.
        offset: Offset,
        /// Bytes to write.
        data: Vec<u8>,
    },
    /// Compare-and-swap.
    CompareAndSwap {
        /// Remote offset (8-aligned).
        offset: Offset,
        /// Expected old value.
        expected: u64,
        /// New value.
        new: u64,
    },
    /// Fetch-and-add.
    FetchAndAdd {
        /// Remote offset (8-aligned).
        offset: Offset,
        /// Addend (wrapping).
        add: u64,
    },
    /// Masked compare-and-swap.
    MaskedCompareAndSwap {
        /// Remote offset (8-aligned).
        offset: Offset,
        /// Compare value.
        compare: u64,
        /// Bits compared.
        compare_mask: u64,
        /// Swap value.
        swap: u64,
        /// Bits swapped.
        swap_mask: u64,
    },
    /// Masked fetch-and-add.
    MaskedFetchAndAdd {
        /// Remote offset (8-aligned).
        offset: Offset,
        /// Addend.
        add: u64,
        /// Field boundaries (top bit of each field).
        boundary: u64,
    },
    /// PERSIST: every write to the node's MemStore completed before it (this batch's earlier
    /// requests included) is durable on the node's disk image when it completes
    /// (`durability: disk`, `persist.rs`; the role of RDMA's FLUSH verb, IBTA 1.5).
    /// Completes with [`Completion::Written`]; at once where the MemStore has no disk image.
    Persist,
}

/// The result of one work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Not yet posted.
    Pending,
    /// A READ's bytes.
    Read(Vec<u8>),
    /// A WRITE completed.
    Written,
    /// An atomic's old value.
    Atomic(u64),
}

/// An ordered list of work requests to one node, posted with
/// [`crate::Verbs::post_batch`]; request `i`'s result is `completion(i)` afterwards.
#[derive(Clone, Debug, Default)]
pub struct DoorbellBatch {
    requests: Vec<WorkRequest>,
    completions: Vec<Completion>,
}

impl DoorbellBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a request; returns its index.
    pub fn push(&mut self, wr: WorkRequest) -> usize {
        self.requests.push(wr);
        self.completions.push(Completion::Pending);
        self.requests.len() - 1
    }

    /// Appends a READ of `len` bytes at `offset`; returns its index.
    pub fn read(&mut self, offset: Offset, len: usize) -> usize {
        self.push(WorkRequest::Read { offset, len: len as u32 })
    }

    /// Appends a WRITE of `data` at `offset`; returns its index.
    pub fn write(&mut self, offset: Offset, data: Vec<u8>) -> usize {
        self.push(WorkRequest::Write { offset, data })
    }

    /// Appends a fetch-and-add; returns its index.
    pub fn fetch_and_add(&mut self, offset: Offset, add: u64) -> usize {
        self.push(WorkRequest::FetchAndAdd { offset, add })
    }

    /// Appends a masked compare-and-swap; returns its index.
    pub fn masked_compare_and_swap(
        &mut self,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> usize {
        self.push(WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask })
    }

    /// The requests, in posting order.
    pub fn requests(&self) -> &[WorkRequest] {
        &self.requests
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether the batch has no request.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Records the completion of request `i` (used by backends).
    pub fn complete(&mut self, i: usize, c: Completion) {
        self.completions[i] = c;
    }

    /// The completion of request `i`.
    ///
    /// # Panics
    /// If `i` is not an index returned by this batch.
    pub fn completion(&self, i: usize) -> &Completion {
        &self.completions[i]
    }

    /// The bytes READ by request `i` (empty if it was not a completed READ).
    pub fn read_result(&self, i: usize) -> &[u8] {
        match &self.completions[i] {
            Completion::Read(b) => b,
            _ => &[],
        }
    }

    /// The old value returned by atomic request `i` (0 if it was not a completed atomic).
    pub fn atomic_result(&self, i: usize) -> u64 {
        match self.completions[i] {
            Completion::Atomic(v) => v,
            _ => 0,
        }
    }

    /// Removes every request and result, keeping the allocations.
    pub fn clear(&mut self) {
        self.requests.clear();
        self.completions.clear();
    }
}
