//! Everything that happens inside one data center (DESIGN.md §3, RedT §4.2, CREST §4).
//!
//! This crate owns the MemStore layout, the one-sided verbs backends, CREST-style
//! cell-level records and their No-Wait locks, the RDMA-friendly hash index, the redo ring
//! (RedT's pre-write-log, Algorithm 2) with its replay task, and the stateless executor
//! that runs a sub-transaction against the replicas of its DC. It knows nothing of QUIC,
//! other DCs or quorums: the coordinator crate decides, this crate executes.

mod error;
mod memstore;
mod region;
pub mod verbs;

pub use error::{Error, Result, SuperblockMismatch};
pub use memstore::{Layout, LINE, MAGIC};
pub use region::{masked_add, Region};
pub use verbs::{Completion, DoorbellBatch, LocalVerbs, VerbCounters, VerbCounts, Verbs, WorkRequest};
