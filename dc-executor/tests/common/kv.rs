//! Key/value sub-transactions on a [`TestDc`]: plan, run phase 1, decide (the range and
//! delete tests share them).

use super::{TestDc, T};
use redt_dc_executor::{Decision, ItemVote, KvOp, KvProcedure, LocalAccess, Partitioner, Procedure, SubTxn, Vote};
use redt_proto::{Cts, DcId, Epoch, NodeId, TxnId};
use std::sync::Arc;

/// How the test table's keys map to partitions.
pub fn partitioner(dc: &TestDc) -> Partitioner {
    Partitioner::new(&dc.topo.tables, dc.topo.partitions.len() as u32)
}

/// The key/value procedure of `ops` on the test table (8-byte cells).
pub fn kv(dc: &TestDc, ops: Vec<KvOp>) -> Arc<KvProcedure> {
    Arc::new(KvProcedure::partitioned(T, 8, ops, &partitioner(dc)))
}

/// The sub-transaction of `p` on the accesses held by `only` (every node when `None`).
pub fn sub(dc: &TestDc, seq: u64, p: Arc<dyn Procedure>, only: Option<NodeId>) -> SubTxn {
    let local = p
        .accesses()
        .iter()
        .enumerate()
        .map(|(access, a)| LocalAccess { access, node: dc.node_of(a.key) })
        .filter(|la| only.is_none_or(|n| la.node == n))
        .collect();
    SubTxn {
        txn: TxnId::new(NodeId(0), seq),
        epoch: Epoch(1),
        coordinator: NodeId(0),
        start: Cts(0),
        participants: vec![DcId(0)],
        partitions: vec![redt_proto::PartitionId(0), redt_proto::PartitionId(1)],
        procedure: p,
        local,
    }
}

/// A commit timestamp above the vote's clock and every version it read.
pub fn cts_of(v: &Vote) -> Cts {
    let seen = v.items.iter().flat_map(|i| i.versions.iter().map(|(_, v)| v.cts())).max().unwrap_or(Cts(0));
    Cts(v.hlc.max(seen).0 + 1)
}

/// Loads `keys`, each with the value `key × 10 + 1` (never zero: a record of zero bytes holds no row) as a little-endian `i64`.
pub fn load(dc: &TestDc, keys: impl IntoIterator<Item = u64>) {
    for k in keys {
        dc.dc.insert_record(dc.node_of(k), T, k, &[&(k as i64 * 10 + 1).to_le_bytes()]).unwrap();
    }
}

/// The keys of the rows the vote's range reads returned, ascending.
pub fn rows(items: &[ItemVote]) -> Vec<u64> {
    let mut keys: Vec<u64> = items.iter().filter_map(|i| i.row).collect();
    keys.sort_unstable();
    keys
}

/// Runs phase 1 of `ops` as transaction `seq` on the accesses `only` holds (all when `None`).
pub fn run(dc: &TestDc, seq: u64, ops: Vec<KvOp>, only: Option<NodeId>) -> (SubTxn, Vote) {
    let s = sub(dc, seq, kv(dc, ops), only);
    let v = dc.executor().execute(&s, 1).expect("phase 1 runs");
    (s, v)
}

/// Runs phase 2 of `s` with `d`.
pub fn decide(dc: &TestDc, s: &SubTxn, v: &Vote, d: Decision) {
    dc.executor().finish(s.txn, d, &v.entries).expect("phase 2 runs");
}
