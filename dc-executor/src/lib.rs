//! Everything that happens inside one data center (docs/design.md §3, RedT §4.2, CREST §4).
//!
//! This crate owns the MemStore layout, the one-sided verbs backends, CREST-style
//! cell-level records and their No-Wait locks, the RDMA-friendly hash index, the B+-tree
//! ordered index (DEX) with one tree per (table, partition) on each node, the redo ring (RedT's pre-write-log, Algorithm 2) with its replay
//! task, and the stateless executor that runs a sub-transaction against the replicas of its
//! DC. It knows nothing of QUIC,
//! other DCs or quorums: the coordinator crate decides, this crate executes.

mod apply;
mod batch;
mod btree;
mod dc;
pub mod decision_log;
mod deleted;
mod error;
mod executor;
pub mod free_list;
mod gap;
mod hlc;
mod index;
pub mod lock;
mod memstore;
mod ordered;
pub use redt_verbs::persist;
mod prepare;
mod procedure;
pub mod promise_table;
mod record;
mod relock;
mod replay;
mod replay_task;
mod replica;
mod restore;
mod retire;
pub mod ring;
mod snapshot;
mod versioned;
pub use redt_verbs as verbs;

pub use apply::{apply_committed, apply_committed_by, apply_committed_rows, Replayed, RowWritten};
pub use batch::{BatchProcedure, MemberRuns, MAX_MEMBERS as MAX_BATCH_MEMBERS};
pub use btree::{
    BTree, BTreeConfig, BTreeCounts, BTreeStats, ReadCheck, TreeShape, DEFAULT_NODE_BYTES, MAX_NODE_BYTES,
    MIN_NODE_BYTES,
};
pub use dc::{format_if_new, Created, DcHandle, RecordImage};
pub use deleted::{DeletedFate, DeletedQueue, DeletedRecord, MAX_DELETED_CANDIDATES};
pub use error::{Error, Result, SuperblockMismatch};
pub use executor::{
    AbortReason, BoundedMap, Decision, EntryRef, Executor, ItemVote, LocalAccess, SubTxn, TxnSet, Vote, DELETED_GRACE,
    MAX_RANGE_ENTRIES,
};
pub use hlc::{Clock, Hlc, SystemClock, LOGICAL_BITS, ORIGIN_UNIX_MS};
pub use index::{Index, IndexStats};
pub use lock::LockConflictKind;
pub use memstore::{Layout, LINE, MAGIC};
pub use ordered::{GapHold, OrderedIndex, Partitioner, GAP_GROUP, MAX_RANGE_ROWS};
pub use prepare::{NodePromise, PreparedTxn, Promise};
pub use procedure::{
    decode_scan, encode_scan, list_items, list_len, Access, KvOp, KvProcedure, Procedure, RangeRead, RangeRow,
    ReadView, RecordOp, RecordsProcedure, UserAbort, VersionCheck, Write, YcsbOp, YcsbProcedure, LIST_HEADER, LIST_TAG,
};
pub use record::lock_word;
pub use record::{encode_cell, Catalog, CellVersion, RecordLayout, RecordView, ThomasRule, HEADER_BYTES};
pub use redt_verbs::{masked_add, Region};
pub use relock::{relock_after_restart, Relocked};
pub use replay::{Apply, ReplayStep, Replayer};
pub use replay_task::ReplayTask;
pub use replica::{ReplicaChange, ReplicaOrigin};
pub use restore::{restore, Restored};
pub use retire::RecordHeapUsage;
pub use ring::{
    head_gap, owed_entries, read_header, ring_entries, ring_scan, unfinished_entries, Change, EntryHeader, EntryStatus,
    Gap, LockIntent, OwedEntry, RedoEntry, RingScan, RingWriter, VoteCode, VoteState, VoteWord,
};
pub use snapshot::{
    apply_snapshot, apply_snapshot_by, purge_records, read_snapshot, SnapshotApplied, SnapshotCell, SnapshotChunk,
    SnapshotRecord,
};
pub use verbs::{
    Completion, DoorbellBatch, LocalVerbs, ServerCounts, ServerCountsHandle, ServerLimits, TcpVerbs, TcpVerbsServer,
    VerbCounters, VerbCounts, Verbs, VerbsTls, WorkRequest,
};
pub use versioned::{read_versions, CellRead};
