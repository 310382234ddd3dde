//! The crate's error type.

use redt_proto::{NodeId, Offset, TableId, Topology, TxnId};

/// Everything that can go wrong on the in-DC data path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A verb, a MemStore region or its disk image failed (`redt_verbs::Error`: an access out
    /// of bounds or unaligned, a node the backend does not reach, the backend, its TLS, I/O).
    #[error(transparent)]
    Verbs(#[from] redt_verbs::Error),
    /// The region does not hold a MemStore of the expected layout.
    #[error("{}", self.plain())]
    BadSuperblock {
        /// Node whose region was checked.
        node: NodeId,
        /// What did not match.
        #[source]
        why: SuperblockMismatch,
    },
    /// The record heap of a node is full.
    #[error("{}", self.plain())]
    HeapFull {
        /// Node whose heap is full.
        node: NodeId,
        /// Bytes requested.
        needed: u64,
    },
    /// The hash index of a node has no free slot within the probe limit.
    #[error("{}", self.plain())]
    IndexFull {
        /// Node whose index is full.
        node: NodeId,
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// An insert found the key already present.
    #[error("{}", self.plain())]
    DuplicateKey {
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// A lookup found no record.
    #[error("{}", self.plain())]
    NotFound {
        /// Node searched.
        node: NodeId,
        /// Table of the key.
        table: TableId,
        /// The key.
        key: u64,
    },
    /// A table id is not in the schema.
    #[error("{}", self.plain())]
    UnknownTable(TableId),
    /// A ring entry failed its checksum or framing: it was torn or half written.
    #[error("{}", self.plain())]
    TornEntry {
        /// Node whose ring holds the entry.
        node: NodeId,
        /// Ring index (monotonic slot number) of the entry.
        index: u64,
        /// What was wrong.
        why: &'static str,
    },
    /// The redo ring stayed full for longer than the back-pressure limit.
    #[error("{}", self.plain())]
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
    /// A topology's `limits:` admit a transaction whose redo entry on one node is larger than
    /// one entry of its ring may be (`ring::check_limits_fit_ring`): the topology is refused.
    #[error("the limits admit a redo entry of {entry_bytes} bytes, more than the ring's {ring_bytes}: {why}")]
    LimitsExceedRing {
        /// The largest entry the limits admit, in bytes (`ring::largest_entry`).
        entry_bytes: u64,
        /// The most one entry of the ring may take, in bytes (`ring::entry_capacity`).
        ring_bytes: u64,
        /// Which limit and table make it, and what to change.
        why: String,
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
    #[error("{}", self.plain())]
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
    #[error("{}", self.plain())]
    TreeCorrupt {
        /// Node whose MemStore holds the tree.
        node: NodeId,
        /// The node or anchor READ.
        offset: Offset,
        /// What was wrong.
        why: &'static str,
    },
    /// Snapshot records received for a rebuild (docs/design.md, "Rebuild") do not fit this
    /// node's schema: a cell beyond its table's, or a value longer than its cell.
    #[error("invalid snapshot record: {why}")]
    InvalidSnapshot {
        /// What is wrong.
        why: String,
    },
}

impl Error {
    /// The error's text naming nodes and tables as `topology` does (`dc2-n1`, `usertable`),
    /// not by their internal ids (`node#1`, `table#0`), as messages to clients and operators
    /// give it. Its `Display` names them by id (no topology at hand).
    pub fn named(&self, topology: &Topology) -> String {
        if let Error::Verbs(e) = self {
            return e.named(topology);
        }
        let table = |t: TableId| topology.table(t).map_or_else(|| t.to_string(), |s| s.name.clone());
        self.text(&|n| topology.node_name(n), &table)
    }

    /// The text naming nodes and tables by their ids (the `Display` of the variants that name
    /// one).
    fn plain(&self) -> String {
        self.text(&|n| n.to_string(), &|t| t.to_string())
    }

    /// The text, with `node` and `table` naming nodes and tables.
    fn text(&self, node: &dyn Fn(NodeId) -> String, table: &dyn Fn(TableId) -> String) -> String {
        match self {
            Error::BadSuperblock { node: n, why } => {
                format!("{}: not a redt MemStore of this layout ({why})", node(*n))
            }
            Error::HeapFull { node: n, needed } => format!("{}: record heap full ({needed} bytes needed)", node(*n)),
            Error::IndexFull { node: n, table: t, key } => {
                format!("{}: index full for {} key {key}", node(*n), table(*t))
            }
            Error::DuplicateKey { table: t, key } => format!("{} key {key} already exists", table(*t)),
            Error::NotFound { node: n, table: t, key } => format!("{} key {key} not found on {}", table(*t), node(*n)),
            Error::UnknownTable(t) => format!("unknown {}", table(*t)),
            Error::TornEntry { node: n, index, why } => {
                format!("{}: redo entry at ring index {index} is torn ({why})", node(*n))
            }
            Error::RingFull { node: n, head, index } => {
                format!("{}: redo ring full (head {head}, wanted slot {index}): replay is not keeping up", node(*n))
            }
            Error::TreeBusy { node: n, offset, attempts } => {
                format!("{}: B+-tree node at {offset} stayed locked or changing for {attempts} attempts", node(*n))
            }
            Error::TreeCorrupt { node: n, offset, why } => format!("{}: B+-tree at {offset}: {why}", node(*n)),
            // Variants that name no node or table: their own `Display`.
            other => other.to_string(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        Topology::load(std::path::Path::new(&path)).expect("config loads")
    }

    /// Names, not internal ids: an error as told to a client or an operator names
    /// the node and the table as the topology file does; its `Display` keeps the ids.
    #[test]
    fn an_error_is_named_by_the_topology() {
        let t = topology();
        let full = Error::IndexFull { node: NodeId(1), table: TableId(1), key: 7 };
        assert_eq!(full.named(&t), "dc2-n1: index full for usertable key 7");
        assert_eq!(full.to_string(), "node#1: index full for table#1 key 7");
        let missing = Error::NotFound { node: NodeId(3), table: TableId(2), key: 9 };
        assert_eq!(missing.named(&t), "kv key 9 not found on dc4-n1");
        let ring = Error::RingFull { node: NodeId(2), head: 4, index: 90 };
        assert_eq!(ring.named(&t), "dc3-n1: redo ring full (head 4, wanted slot 90): replay is not keeping up");
        assert_eq!(
            Error::from(redt_verbs::Error::UnknownNode(NodeId(40))).named(&t),
            "node#40 is not reachable through this verbs backend"
        );
        assert_eq!(
            Error::from(redt_verbs::Error::Backend("x".into())).named(&t),
            "verbs backend: x",
            "a verbs error naming no node"
        );
        assert_eq!(
            Error::from(redt_verbs::Error::UnknownNode(NodeId(1))).named(&t),
            "dc2-n1 is not reachable through this verbs backend",
            "a verbs error names the node as the topology does"
        );
    }
}
