//! Failover on a real (embedded, QUIC over loopback) cluster: the membership Raft
//! group elects a leader; when every node of a DC dies, a majority of the voters suspects it,
//! the leader removes it in a new epoch, every survivor adopts it, and the partitions it held
//! (n = 3, Q = 3: nothing could commit on them without it) commit again. Then the rebuild:
//! the leader adds a learner in the DC left without a replica, the learner copies its
//! partition from the voters over QUIC while commits ship it their writes, and is promoted:
//! every partition is back at three voters, and a write needing all three commits.

mod common;
use common::{local_fast, two_per_dc};
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::{DcId, Epoch, NodeId, TableId};
use redt_protocol::call::kv_call;
use std::time::{Duration, Instant};

const KV: TableId = TableId(2);

/// Polls `check` every 20 ms until it holds or `limit` passes; returns how long it took.
async fn until(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !check().await {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t0.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_dc_is_removed_and_its_partitions_commit_again() {
    let options = CoordinatorOptions { failover: true, ..CoordinatorOptions::default() };
    let cluster = EmbeddedCluster::start(local_fast("failover-test-remove", 7710), options).await.expect("starts");
    let t = cluster.topology.clone();
    let survivors: Vec<NodeId> = t.nodes.iter().map(|n| n.id).filter(|n| t.nodes[n.0 as usize].dc != DcId(1)).collect();
    let dead: Vec<NodeId> = t.dcs[1].nodes.clone();
    a_leader_among(&cluster, &survivors).await;
    // A key of a partition with a replica in dc2 (node 1 in local-fast).
    let schema = t.table(KV).expect("kv");
    let key = (0..).find(|&k| t.partitions[t.partition_of(schema, k).0 as usize].replicas.contains(&dead[0])).unwrap();
    let coordinator = survivors[0];
    let out = cluster.node(coordinator).submit(kv_call(KV, &[KvOp::Add(key, 1)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "commits before the failure");

    for &n in &dead {
        cluster.node(n).shutdown();
    }
    let took = until(Duration::from_secs(20), "every survivor past epoch 1", async || {
        survivors.iter().all(|&n| cluster.node(n).epochs().epoch() > t.epoch)
    })
    .await;
    eprintln!("a new epoch everywhere {took:?} after the kill");
    for &n in &survivors {
        let s = cluster.node(n).status(false).await.expect("status");
        assert_eq!(s.removed_dcs, vec![DcId(1)], "{n}");
    }
    // The partition that lost its replica in dc2 commits again, now with n = 2.
    let mut last = None;
    let mut before = Vec::new();
    for _ in 0..50 {
        let out = cluster.node(coordinator).submit(kv_call(KV, &[KvOp::Add(key, 1), KvOp::Read(key)])).await;
        if out.status == TxnStatus::Committed {
            last = None;
            before = out.reads;
            break;
        }
        last = Some(out.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last, None, "a write to the shrunk partition commits in the new epoch");

    // Rebuild: every partition back at its three voters, none in the dead DC.
    let took = until(Duration::from_secs(30), "full replication restored on every survivor", async || {
        survivors.iter().all(|&n| {
            let p = cluster.node(n).placement();
            p.partitions
                .iter()
                .all(|x| x.replicas.len() == 3 && x.learners.is_empty() && x.replicas.iter().all(|r| !dead.contains(r)))
        })
    })
    .await;
    eprintln!("full replication restored {took:?} after the new epoch");
    let p = cluster.node(coordinator).placement();
    assert!(p.epoch > Epoch(t.epoch.0 + 1), "learners were added and promoted in later epochs");
    // A write with n = 3 needs Q = 3 up-to-date votes: the rebuilt replica holds the key's
    // current version, and the value counts every committed add.
    let mut value = None;
    for _ in 0..50 {
        let out = cluster.node(coordinator).submit(kv_call(KV, &[KvOp::Add(key, 1), KvOp::Read(key)])).await;
        if out.status == TxnStatus::Committed {
            value = Some(out.reads);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reads = value.expect("a write to the rebuilt partition commits with all three voters");
    let number = |r: &[Option<Vec<u8>>]| {
        let b = r.last().cloned().flatten().expect("the read returns the value");
        i64::from_le_bytes(b[..8].try_into().expect("an 8-byte counter"))
    };
    assert_eq!(number(&reads), number(&before) + 1, "the rebuilt partition holds every committed add");
    cluster.shutdown();
}

/// Two DCs of four die one after the other (Raft conf changes): the first removal
/// demotes dc2's Raft voter to a learner, so when dc3 dies too the 2 live voters of the 3 left
/// (a minority of the 4 initial ones) still confirm and commit its removal, and a partition
/// whose replicas are all on the survivors commits writes in the newest epoch. dc3 dies once
/// the rebuild has brought every partition back to three voters: before that, its removal
/// would leave partitions that lost a replica in dc2 with one voter, fewer than recovery
/// tolerates, and the membership refuses it (`Refused::TooFewVoters`; the simulation's
/// `a_second_replica_lost_before_the_first_is_rebuilt_is_waited_for`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_dead_dc_of_four_is_removed_too() {
    let options = CoordinatorOptions { failover: true, ..CoordinatorOptions::default() };
    let cluster = EmbeddedCluster::start(local_fast("failover-test-two", 7720), options).await.expect("starts");
    let t = cluster.topology.clone();
    assert_eq!(t.dcs.len(), 4, "local-fast has 4 DCs");
    let (first, second) = (DcId(1), DcId(2));
    let survivors: Vec<NodeId> =
        t.nodes.iter().map(|n| n.id).filter(|n| ![first, second].contains(&t.nodes[n.0 as usize].dc)).collect();
    a_leader_among(&cluster, &survivors).await;
    let t0 = Instant::now();
    for &n in &t.dcs[first.0 as usize].nodes {
        cluster.node(n).shutdown();
    }
    let alive: Vec<NodeId> = t.nodes.iter().map(|n| n.id).filter(|n| t.nodes[n.0 as usize].dc != first).collect();
    until(Duration::from_secs(20), "dc2 removed on every live node", async || {
        for &n in &alive {
            if !cluster.node(n).status(false).await.is_ok_and(|s| s.removed_dcs == vec![first]) {
                return false;
            }
        }
        true
    })
    .await;
    eprintln!("dc2 removed {:?} after its kill", t0.elapsed());
    until(Duration::from_secs(90), "every partition back at three voters", async || {
        for &n in &alive {
            if !cluster
                .node(n)
                .status(false)
                .await
                .is_ok_and(|s| s.under_replicated == 0 && s.removed_dcs == vec![first])
            {
                return false;
            }
        }
        true
    })
    .await;
    eprintln!("rebuilt {:?} after dc2's kill", t0.elapsed());

    let t1 = Instant::now();
    for &n in &t.dcs[second.0 as usize].nodes {
        cluster.node(n).shutdown();
    }
    until(Duration::from_secs(20), "dc3 removed on every survivor", async || {
        for &n in &survivors {
            if !cluster.node(n).status(false).await.is_ok_and(|s| s.removed_dcs == vec![first, second]) {
                return false;
            }
        }
        true
    })
    .await;
    eprintln!("dc3 removed {:?} after its kill", t1.elapsed());

    // A key of a partition with no replica in either dead DC after both removals commits.
    let schema = t.table(KV).expect("kv");
    let p = cluster.node(survivors[0]).placement();
    let key = (0..)
        .find(|&k| {
            let r = &p.partitions[t.partition_of(schema, k).0 as usize].replicas;
            !r.is_empty() && r.iter().all(|n| survivors.contains(n))
        })
        .unwrap();
    let mut last = None;
    for _ in 0..100 {
        let out = cluster.node(survivors[0]).submit(kv_call(KV, &[KvOp::Add(key, 1)])).await;
        if out.status == TxnStatus::Committed {
            last = None;
            break;
        }
        last = Some(out.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last, None, "a write commits after the second removal");
    cluster.shutdown();
}

/// One node dies while the rest of its DC lives (failover at the grain of a node):
/// a majority of the voters suspects it, the leader removes it alone in a new epoch (its DC
/// stays up), the partitions it held (n = 3, Q = 3) commit again, and they are rebuilt back to
/// three voters elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_is_removed_alone_and_its_partitions_commit_again() {
    let options = CoordinatorOptions { failover: true, ..CoordinatorOptions::default() };
    let cluster = EmbeddedCluster::start(two_per_dc("failover-test-node", 7730), options).await.expect("starts");
    let t = cluster.topology.clone();
    // The second node of dc2: not a Raft voter, the primary of one partition.
    let dead = t.dcs[1].nodes[1];
    let survivors: Vec<NodeId> = t.nodes.iter().map(|n| n.id).filter(|&n| n != dead).collect();
    a_leader_among(&cluster, &survivors).await;
    let schema = t.table(KV).expect("kv");
    let key = (0..).find(|&k| t.partitions[t.partition_of(schema, k).0 as usize].replicas.contains(&dead)).unwrap();
    let coordinator = t.dcs[0].nodes[0];
    let out = cluster.node(coordinator).submit(kv_call(KV, &[KvOp::Add(key, 1)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "commits before the failure");

    cluster.node(dead).shutdown();
    let took = until(Duration::from_secs(20), "every survivor past epoch 1", async || {
        survivors.iter().all(|&n| cluster.node(n).epochs().epoch() > t.epoch)
    })
    .await;
    eprintln!("a new epoch everywhere {took:?} after the kill");
    let p = cluster.node(coordinator).placement();
    assert!(p.partitions.iter().all(|x| !x.replicas.contains(&dead)), "{dead} holds no replica now");
    let s = cluster.node(coordinator).status(false).await.expect("status");
    assert!(s.removed_dcs.is_empty(), "its DC stays: {:?}", s.removed_dcs);
    let mut last = None;
    for _ in 0..50 {
        let out = cluster.node(coordinator).submit(kv_call(KV, &[KvOp::Add(key, 1)])).await;
        if out.status == TxnStatus::Committed {
            last = None;
            break;
        }
        last = Some(out.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last, None, "a write to a partition the dead node held commits in the new epoch");
    let took = until(Duration::from_secs(30), "full replication restored on every survivor", async || {
        survivors.iter().all(|&n| {
            let p = cluster.node(n).placement();
            p.partitions.iter().all(|x| x.replicas.len() == 3 && x.learners.is_empty() && !x.replicas.contains(&dead))
        })
    })
    .await;
    eprintln!("full replication restored {took:?} after the new epoch");
    cluster.shutdown();
}

/// Waits (up to 10 s) until one of `nodes` knows a membership leader.
async fn a_leader_among(cluster: &EmbeddedCluster, nodes: &[NodeId]) {
    until(Duration::from_secs(10), "a membership leader", async || {
        for &n in nodes {
            if cluster.node(n).status(false).await.is_ok_and(|s| s.membership_leader.is_some()) {
                return true;
            }
        }
        false
    })
    .await;
}
