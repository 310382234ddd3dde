//! Range reads in the coordinator's decision: each row a replica returns is its own
//! item, named by the row's key, so replicas that disagree on which keys are in a range, or on
//! a row's version, disagree on the items, and the ¾ rule (RedT §4.2) treats them as it treats
//! point reads; and the client's scan result comes from an up-to-date replica.

use redt_dc_executor::{decode_scan, CellVersion, ItemVote, KvOp, Vote};
use redt_proto::{Cts, DcId, Decision, NodeId, TableId, Topology, TxnId};
use redt_protocol::call::{kv_call, procedure};
use redt_protocol::decision::{decide, Ruling};
use redt_protocol::plan::{plan, vote_table};
use std::collections::BTreeMap;

fn topology() -> Topology {
    Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid")
}

/// A commit vote of every replica `dc` holds for `plan`'s range accesses, each returning
/// `rows` (key, version) of the range `from..=to` that lie in its partition.
fn vote(topo: &Topology, p: &redt_protocol::plan::Plan, dc: DcId, rows: &[(u64, u64)]) -> Vote {
    let table = topo.table(TableId(1)).unwrap();
    let mut items = Vec::new();
    for la in &p.local[&dc] {
        let part = p.partitions.iter().find(|pp| pp.accesses.contains(&la.access)).unwrap().id;
        for &(key, ver) in rows.iter().filter(|(k, _)| topo.partition_of(table, *k) == part) {
            items.push(ItemVote {
                access: la.access,
                node: la.node,
                versions: vec![(0, CellVersion::new(1, Cts(ver)))],
                values: vec![(0, key.to_le_bytes().to_vec())],
                absent: false,
                row: Some(key),
            });
        }
    }
    Vote { txn: TxnId::new(NodeId(0), 1), abort: None, items, hlc: Cts(1), entries: vec![] }
}

fn ruling(topo: &Topology, per_dc: &[&[(u64, u64)]]) -> (Ruling, Vec<u64>) {
    let call = kv_call(TableId(1), &[KvOp::Scan(8, 20, 100)]);
    let proc = procedure(topo, &call).expect("a scan call builds");
    let p = plan(topo, proc.as_ref()).expect("plans");
    let votes: BTreeMap<DcId, Vote> =
        p.participants.iter().enumerate().map(|(i, &dc)| (dc, vote(topo, &p, dc, per_dc[i % per_dc.len()]))).collect();
    let table = vote_table(&p, &votes, Cts(1));
    let r = decide(&table, false);
    let reads = redt_protocol::txn::reads(topo, &call, &p, &votes.values().collect::<Vec<_>>());
    let keys =
        decode_scan(reads[0].as_deref().unwrap_or_default()).unwrap_or_default().into_iter().map(|r| r.0).collect();
    (r, keys)
}

#[test]
fn replicas_that_agree_on_the_rows_commit_and_the_scan_reads_them() {
    let topo = topology();
    let rows: &[(u64, u64)] = &[(8, 5), (9, 5), (13, 7), (20, 9)];
    let (r, keys) = ruling(&topo, &[rows]);
    assert!(matches!(r, Ruling::Decide { decision: Decision::Commit(_), .. }), "{r:?}");
    assert_eq!(keys, vec![8, 9, 13, 20]);
}

#[test]
fn a_replica_missing_a_row_or_holding_an_older_one_is_stale() {
    let topo = topology();
    let full: &[(u64, u64)] = &[(8, 5), (9, 5), (13, 7), (20, 9)];
    let missing: &[(u64, u64)] = &[(8, 5), (9, 5), (20, 9)];
    let older: &[(u64, u64)] = &[(8, 5), (9, 5), (13, 6), (20, 9)];
    for other in [missing, older] {
        // Every partition has 3 replicas (Q = 3): one stale replica makes commit impossible.
        let (r, _) = ruling(&topo, &[full, other]);
        assert!(matches!(r, Ruling::Decide { decision: Decision::Abort, .. }), "{r:?}");
    }
}
