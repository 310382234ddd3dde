//! The crate's error type.

use redt_proto::{NodeId, Offset, TableId, TxnId};

/// Everything that can go wrong on the in-DC data path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A verb addressed bytes outside the target node's region.
    #[error("{node}: access [{offset}, +{len}) outside the {size}-byte MemStore")]
    OutOfBounds {
        /// Target node.
        node: NodeId,
        /// First byte addressed.
        offset: Offset,
        /// Bytes addressed.
        len: u64,
        /// Size of the target region in bytes.
        size: u64,
    },
    /// An atomic verb addressed an offset that is not 8-byte aligned.
    #[error("{node}: atomic verb at unaligned offset {offset}")]
    Unaligned {
        /// Target node.
        node: NodeId,
        /// The offending offset.
        offset: Offset,
    },
    /// A verb named a node this backend does not reach.
    #[error("{0} is not reachable through this verbs backend")]
    UnknownNode(NodeId),
    /// The RDMA or shared-memory backend failed (device, registration, mapping, completion).
    #[error("verbs backend: {0}")]
    Backend(String),
    /// The TLS material of an in-DC verbs transport is unusable (issue 14): a certificate,
    /// key or CA certificate rustls refuses, or an own certificate that does not carry this
    /// node's identity (`redt://node/<dc>/<node>`, written by `redt certs init`).
    #[error("verbs TLS: {0}")]
    TlsConfig(String),
    /// I/O on a shared-memory file failed. The I/O error is part of the message and not also
    /// a `source`, so a report that prints the chain does not print it twice (issue 16).
    #[error("{path}: {error}")]
    Io {
        /// The file involved.
        path: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The region does not hold a MemStore of the expected layout.
    #[error("{node}: not a redt MemStore of this layout ({why})")]
    BadSuperblock {
        /// Node whose region was checked.
        node: NodeId,
        /// What did not match.
        #[source]
        why: SuperblockMismatch,
    },
    /// The record heap of a node is full.
    #[error("{node}: record heap full ({needed} bytes needed)")]
    HeapFull {
        /// Node whose heap is full.
        node: NodeId,
        /// Bytes requested.
        needed: u64,
    },
    /// The hash index of a node has no free slot within the probe limit.
    #[error("{node}: index full for {table} key {key}")]
    IndexFull {
        /// Node whose index is full.
        node: NodeId,
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// An insert found the key already present.
    #[error("{table} key {key} already exists")]
    DuplicateKey {
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// A lookup found no record.
    #[error("{table} key {key} not found on {node}")]
    NotFound {
        /// Node searched.
        node: NodeId,
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// A table id is not in the schema.
    #[error("unknown {0}")]
    UnknownTable(TableId),
    /// A ring entry failed its checksum or framing: it was torn or half written.
    #[error("{node}: redo entry at ring index {index} is torn ({why})")]
    TornEntry {
        /// Node whose ring holds the entry.
        node: NodeId,
        /// Ring index (monotonic slot number) of the entry.
        index: u64,
        /// What was wrong.
        why: &'static str,
    },
    /// The redo ring stayed full for longer than the back-pressure limit.
    #[error("{node}: redo ring full (head {head}, wanted slot {index}): replay is not keeping up")]
    RingFull {
        /// Node whose ring is full.
        node: NodeId,
        /// Head index seen last.
        head: u64,
        /// Slot index reserved.
        index: u64,
    },
    /// A redo entry does not fit in the ring at all.
    #[error("redo entry of {bytes} bytes exceeds the ring of {ring_bytes} bytes")]
    EntryTooLarge {
        /// Encoded entry size.
        bytes: u64,
        /// Ring capacity.
        ring_bytes: u64,
    },
    /// A redo entry cannot be encoded (a count beyond its header field, a lock intent whose
    /// versions do not match its cells): refused before any ring space is reserved for it
    /// (`ring::check_encodable`).
    #[error("{txn}: redo entry cannot be encoded: {why}")]
    Unencodable {
        /// The transaction.
        txn: TxnId,
        /// What does not fit.
        why: String,
    },
    /// A sub-transaction was malformed (bad cell index, value size, unknown node…).
    #[error("{txn}: invalid sub-transaction: {why}")]
    InvalidSubTxn {
        /// The transaction.
        txn: TxnId,
        /// What is wrong.
        why: String,
    },
    /// A B+-tree node stayed locked, or kept changing under READs, for the retry limit
    /// (`btree`): a writer died holding its lock, or the node is far too hot.
    #[error("{node}: B+-tree node at {offset} stayed locked or changing for {attempts} attempts")]
    TreeBusy {
        /// Node whose MemStore holds the tree.
        node: NodeId,
        /// The node (or the tree's anchor, when waiting for a new root).
        offset: Offset,
        /// Attempts made.
        attempts: u32,
    },
    /// A consistent READ found something else than the B+-tree invariants put there
    /// (`btree`): no anchor, no node, a node on the wrong level or right of the key.
    #[error("{node}: B+-tree at {offset}: {why}")]
    TreeCorrupt {
        /// Node whose MemStore holds the tree.
        node: NodeId,
        /// The node or anchor READ.
        offset: Offset,
        /// What was wrong.
        why: &'static str,
    },
    /// Snapshot records received for a rebuild (notes/failover.md, Rebuild) do not fit this
    /// node's schema: a cell beyond its table's, or a value longer than its cell.
    #[error("invalid snapshot record: {why}")]
    InvalidSnapshot {
        /// What is wrong.
        why: String,
    },
}

/// What made a superblock check fail.
#[derive(Debug, thiserror::Error)]
pub enum SuperblockMismatch {
    /// The magic number is wrong (region never formatted, or not a MemStore).
    #[error("bad magic {0:#x}")]
    Magic(u64),
    /// The region holds a MemStore of another format version, written by another redt
    /// (magics `"REDTMS01"`, `"REDTMS02"`, …): its areas lie elsewhere, so it is neither read
    /// nor formatted over.
    #[error(
        "the MemStore has format {found} (written by another redt version), this redt needs {expected}; \
         remove its file (`redt cluster down --wipe`) to start this node afresh"
    )]
    Format {
        /// The magic found, as text (`"REDTMS02"`).
        found: String,
        /// This build's magic, as text.
        expected: String,
    },
    /// A layout field differs from the configuration.
    #[error("{field} is {found}, config says {expected}")]
    Field {
        /// The field name.
        field: &'static str,
        /// Value in the region.
        found: u64,
        /// Value from the configuration.
        expected: u64,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
