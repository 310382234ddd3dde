//! Optimistic transactions on the embedded cluster of `configs/local-fast.yaml` over real
//! QUIC (docs/design.md, "Optimistic transactions: versioned reads and CHECK"): a client's
//! versioned read (`Client::read_versions`, `Body::VersionedRead`), local and forwarded keys,
//! then commits that CHECK what it read: one at the version read commits, one whose key was
//! written since aborts with `stale_read`; the refusals of a versioned read.

mod common;
use common::local_fast;
use redt_coordinator::{AbortCause, Client, CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::{list_items, KvOp};
use redt_proto::{NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use std::time::Duration;

/// Table `kv` of local-fast.yaml.
const KV: TableId = TableId(2);

/// Commits `ops` at `node`, trying again while a conflict (a phase 2 still on its way) aborts
/// it.
async fn commit(cluster: &EmbeddedCluster, node: NodeId, ops: &[KvOp]) {
    for _ in 0..100 {
        let out = cluster.node(node).submit(kv_call(KV, ops)).await;
        if out.status == TxnStatus::Committed {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{ops:?} did not commit");
}

/// Keys of `KV` whose partition has no replica in `node`'s DC, and keys whose partition has
/// one, among 0..64.
fn remote_and_local(t: &Topology, node: NodeId) -> (Vec<u64>, Vec<u64>) {
    let schema = t.table(KV).expect("kv");
    let dc = t.nodes[node.0 as usize].dc;
    (0..64u64).partition(|&k| {
        let p = t.partition_of(schema, k);
        t.partitions[p.0 as usize].replicas.iter().all(|n| t.nodes[n.0 as usize].dc != dc)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_checking_its_versioned_read_commits_and_a_stale_one_aborts() {
    let topology = local_fast("versioned-test", 7740);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let client = Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(10))
        .expect("the client binds");
    let node = NodeId(0);
    let (remote, local) = remote_and_local(&cluster.topology, node);
    assert!(!remote.is_empty() && !local.is_empty(), "n = 3 of 4 DCs: some keys are held elsewhere only");
    let (far, near) = (remote[0], local[0]);
    commit(&cluster, NodeId(1), &[KvOp::Append(far, 1)]).await;
    commit(&cluster, NodeId(2), &[KvOp::Append(near, 2)]).await;
    // Phase 2 may still be on its way to a replica, holding its cell (busy): read until both
    // show their lists.
    let missing = 1_000_003;
    let mut read = Vec::new();
    for _ in 0..100 {
        match client.read_versions(node, 2, &[far, near, missing, far]).await {
            Ok(r) if r[0].found && r[1].found => {
                read = r;
                break;
            }
            Ok(_) => {}
            Err(e) => assert!(e.to_string().contains("busy"), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!read.is_empty(), "both keys read");
    assert_eq!(read.iter().map(|v| v.key).collect::<Vec<_>>(), [far, near, missing, far], "in the keys' order");
    assert_eq!(list_items(&read[0].value), [1], "{:?}", read[0]);
    assert_eq!(list_items(&read[1].value), [2]);
    assert_eq!(read[0].value.len(), 2048, "padded back to the cell's width");
    assert!(read[0].version != 0 && read[1].version != 0);
    assert_eq!((read[2].found, read[2].version, read[2].value.len()), (false, 0, 0), "a key with no record");
    assert_eq!(read[3], read[0], "a key asked twice");

    // Checked at the versions read: commits.
    let checked = |v: &[(u64, u64)], append: u64| {
        let mut ops: Vec<KvOp> = v.iter().map(|&(k, ver)| KvOp::Check(k, ver)).collect();
        ops.push(KvOp::Append(far, append));
        kv_call(KV, &ops)
    };
    let versions = [(far, read[0].version), (near, read[1].version), (missing, 0)];
    let mut out = None;
    for _ in 0..50 {
        let o = cluster.node(node).submit(checked(&versions, 3)).await;
        if o.status == TxnStatus::Committed || o.cause == Some(AbortCause::StaleRead) {
            out = Some(o);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = out.expect("an answer that is not a conflict");
    assert_eq!(out.status, TxnStatus::Committed, "{out:?}");
    assert_eq!(out.reads, vec![None, None, None, None], "a CHECK reads nothing into the answer");

    // The same CHECKs again: `far` is at a newer version now, whatever replica a CHECK meets.
    let mut stale = None;
    for _ in 0..50 {
        let o = cluster.node(NodeId(3)).submit(checked(&versions, 4)).await;
        if o.cause == Some(AbortCause::StaleRead) || o.status == TxnStatus::Committed {
            stale = Some(o);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stale = stale.expect("an answer that is not a conflict");
    assert!(matches!(stale.status, TxnStatus::Aborted(_)), "a stale CHECK never commits: {stale:?}");
    assert_eq!(stale.cause, Some(AbortCause::StaleRead), "{stale:?}");
    assert!(stale.cause.is_some_and(AbortCause::is_retryable));
    let TxnStatus::Aborted(text) = &stale.status else { unreachable!() };
    assert!(text.contains("stale read"), "{text}");

    // Read again: the commit's append is there, at a newer version.
    let again = client.read_versions(NodeId(2), 2, &[far]).await.expect("nothing holds the key now");
    assert_eq!(list_items(&again[0].value), [1, 3]);
    assert!(again[0].version > read[0].version);

    // Refusals: a table that is not key/value, an unknown one, too many keys.
    let e = client.read_versions(node, 1, &[1]).await.unwrap_err().to_string();
    assert!(e.contains("not a key/value table"), "{e}");
    let e = client.read_versions(node, 9, &[1]).await.unwrap_err().to_string();
    assert!(e.contains("unknown table id 9"), "{e}");
    let many: Vec<u64> = (0..=cluster.topology.limits.max_ops_per_txn).collect();
    let e = client.read_versions(node, 2, &many).await.unwrap_err().to_string();
    assert!(e.contains("limits.max_ops_per_txn"), "{e}");
    cluster.shutdown();
}
