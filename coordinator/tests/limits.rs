//! The limits on a real cluster (`configs/local-fast.yaml`, real QUIC on loopback): a
//! transaction over a limit is refused by name before anything is reserved or written and the
//! node keeps serving; a phase 1 from a peer is checked again where it arrives; reads of new
//! keys create no records; and a full heap reaches the client's error text as its cause.

mod common;
use common::{local_fast, tpcc_small};
use redt_coordinator::{error_code, CoordinatorOptions, EmbeddedCluster, TxnAnswer, TxnStatus};
use redt_dc_executor::ring::ring_bounds;
use redt_dc_executor::KvOp;
use redt_proto::wire::{Body, Envelope, ExecuteRequest};
use redt_proto::{MemStoreConfig, NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use std::time::{Duration, Instant};

/// Table `kv` of local-fast.yaml: one 2048-byte cell per record.
const KV: TableId = TableId(2);

/// The heap bump pointer of every node: what creating a record moves.
fn heap_pointers(cluster: &EmbeddedCluster) -> Vec<u64> {
    cluster
        .topology
        .nodes
        .iter()
        .map(|n| {
            let dc = &cluster.dcs[n.dc.0 as usize];
            let mut w = [0u8; 8];
            dc.verbs.read(n.id, dc.layout.heap_next_offset(), &mut w).expect("heap pointer");
            u64::from_le_bytes(w)
        })
        .collect()
}

/// The ring bounds `(head, tail)` of `node`.
fn ring(cluster: &EmbeddedCluster, node: NodeId) -> (u64, u64) {
    let dc = &cluster.dcs[cluster.topology.nodes[node.0 as usize].dc.0 as usize];
    ring_bounds(dc.verbs.as_ref(), node, &dc.layout).expect("ring bounds")
}

/// Submits `ops` at `node` until it commits (a No-Wait conflict aborts it), at most 20 times.
async fn commit_eventually(cluster: &EmbeddedCluster, node: NodeId, ops: &[KvOp]) -> TxnAnswer {
    let mut last = None;
    for _ in 0..20 {
        let out = cluster.node(node).submit(kv_call(KV, ops)).await;
        if out.status == TxnStatus::Committed {
            return out;
        }
        last = Some(out.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} ops on {node} never committed; last status {last:?}", ops.len());
}

/// Waits until every node's ring is drained (head at tail) and returns the tails.
async fn drained(cluster: &EmbeddedCluster) -> Vec<u64> {
    let t0 = Instant::now();
    loop {
        let bounds: Vec<(u64, u64)> = cluster.topology.nodes.iter().map(|n| ring(cluster, n.id)).collect();
        if bounds.iter().all(|(h, t)| h == t) {
            return bounds.into_iter().map(|(_, t)| t).collect();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "rings not drained: {bounds:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_over_a_limit_is_refused_by_name_and_the_node_keeps_serving() {
    // A byte limit below what 1,024 writes of a 2 KiB cell carry, so both limits can be met.
    let mut topology = local_fast("limits-test-refused", 7910);
    topology.limits.max_bytes_per_txn = 1 << 20;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let client = cluster.client(Duration::from_secs(10)).expect("client");
    commit_eventually(&cluster, NodeId(0), &[KvOp::Add(1, 1)]).await;
    let tails = drained(&cluster).await;
    let heap = heap_pointers(&cluster);

    // The audit's transaction: 20,000 reads of new keys, from a client over QUIC.
    let reads: Vec<KvOp> = (0..20_000).map(|k| KvOp::Read(1_000_000 + k)).collect();
    let out = client.submit(NodeId(0), kv_call(KV, &reads)).await;
    assert_eq!(
        out.status,
        TxnStatus::Aborted("transaction has 20000 operations; the limit is 1024 (limits.max_ops_per_txn)".into())
    );
    // 1,000 writes of 2,000 bytes: under the operation limit, over the byte limit.
    let writes: Vec<KvOp> = (0..1_000).map(|k| KvOp::Write(2_000_000 + k, vec![7; 2000])).collect();
    let out = client.submit(NodeId(1), kv_call(KV, &writes)).await;
    match &out.status {
        TxnStatus::Aborted(e) => {
            assert!(e.ends_with("the limit is 1048576 (limits.max_bytes_per_txn)"), "{e}");
            assert!(e.contains("2008000 bytes of keys and values"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Nothing was reserved or written anywhere, and each refusal was counted.
    assert_eq!(heap_pointers(&cluster), heap, "a refused transaction created records");
    assert_eq!(drained(&cluster).await, tails, "a refused transaction reserved ring slots");
    assert_eq!(cluster.node(NodeId(0)).status(false).await.unwrap().refused_over_limit, 1);
    assert_eq!(cluster.node(NodeId(1)).status(false).await.unwrap().refused_over_limit, 1);

    // The node keeps serving: a transaction of 1,000 reads of new keys (under the limit)
    // commits and creates no record anywhere (reads never create records).
    let reads: Vec<KvOp> = (0..1_000).map(|k| KvOp::Read(3_000_000 + k)).collect();
    let out = client.submit(NodeId(0), kv_call(KV, &reads)).await;
    assert_eq!(out.status, TxnStatus::Committed);
    assert!(out.reads.iter().all(|r| r.as_deref().is_some_and(|v| v.iter().all(|&b| b == 0))));
    drained(&cluster).await;
    assert_eq!(heap_pointers(&cluster), heap, "reads of new keys created records");
    let out = commit_eventually(&cluster, NodeId(0), &[KvOp::Add(1, 1), KvOp::Read(1)]).await;
    assert_eq!(out.reads[1].as_deref().map(|v| v[0]), Some(2));
    cluster.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_1_from_a_peer_is_checked_again_before_the_ring() {
    let cluster = EmbeddedCluster::start(local_fast("limits-test-peer", 7920), CoordinatorOptions::default())
        .await
        .expect("starts");
    commit_eventually(&cluster, NodeId(0), &[KvOp::Add(1, 1)]).await;
    let tails = drained(&cluster).await;
    let heap = heap_pointers(&cluster);
    let target = cluster.topology.nodes[0].clone();
    let epoch = cluster.topology.epoch.0;
    // Node 1 (a node, so its phase 1 is accepted) sends node 0 phase-1 requests no coordinator
    // of ours would: 70,000 participant DCs (a redo entry counts them in 16 bits), a DC named
    // twice, an unknown partition, 20,000 operations.
    let execute = |participants: Vec<u32>, partitions: Vec<u32>, ops: &[KvOp]| ExecuteRequest {
        txn: 0x77,
        coordinator: 1,
        participants,
        partitions,
        call: Some(kv_call(KV, ops)),
        epoch,
        ..Default::default()
    };
    let write = [KvOp::Write(5, vec![1; 8])];
    let many: Vec<KvOp> = (0..20_000).map(KvOp::Read).collect();
    let cases = [
        (
            execute(vec![0; 70_000], vec![1], &write),
            error_code::OVER_LIMIT,
            "sub-transaction names 70000 participant DCs; the limit is 4 (the topology's DCs)",
        ),
        (execute(vec![0, 0], vec![1], &write), error_code::MALFORMED, "participant dc1 is named twice"),
        (execute(vec![0], vec![9], &write), error_code::MALFORMED, "partition p9 is not in the topology"),
        (
            execute(vec![0], vec![0], &many),
            error_code::OVER_LIMIT,
            "transaction has 20000 operations; the limit is 1024 (limits.max_ops_per_txn)",
        ),
    ];
    let sender = cluster.node(NodeId(1)).transport().clone();
    for (request, code, text) in cases {
        let msg = Envelope { epoch, from: 1, body: Some(Body::Execute(request)) };
        let reply = sender.call(target.id, msg).await.expect("answered");
        match reply.body {
            Some(Body::Error(e)) => {
                assert_eq!(e.code, code, "{}", e.message);
                assert_eq!(e.message, text);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(drained(&cluster).await, tails, "a refused phase 1 reserved ring slots");
    assert_eq!(heap_pointers(&cluster), heap);
    assert_eq!(cluster.node(NodeId(0)).status(false).await.unwrap().refused_over_limit, 2);
    // No hole in the ring: the next transactions commit and replay passes them.
    for k in 0..5 {
        commit_eventually(&cluster, NodeId(0), &[KvOp::Add(k, 1)]).await;
    }
    assert!(drained(&cluster).await.iter().zip(&tails).all(|(now, then)| now >= then));
    cluster.shutdown();
}

/// local-fast with a heap of `records` `kv` records per node.
fn tiny_heap(name: &str, port: u16, records: u64) -> Topology {
    let mut t = local_fast(name, port);
    let mut m = MemStoreConfig { size_bytes: 0, index_bytes: 64 << 10, ring_bytes: 64 << 10 };
    let kv_record = (64 + 8 + 2048u64).div_ceil(64) * 64;
    m.size_bytes = 192
        + m.index_bytes
        + m.ring_bytes
        + m.decision_log_bytes()
        + m.absent_lock_bytes()
        + m.promise_table_bytes()
        + kv_record * records;
    t.memstore = m;
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_heap_aborts_with_its_cause_in_the_clients_error() {
    let cluster = EmbeddedCluster::start(tiny_heap("limits-test-heap", 7930, 4), CoordinatorOptions::default())
        .await
        .expect("starts");
    let client = cluster.client(Duration::from_secs(10)).expect("client");
    // Writes of new keys fill every node's heap (each node holds 3 of the 4 partitions).
    let mut full = None;
    let mut committed = Vec::new();
    for k in 0..64u64 {
        let out = client.submit(NodeId(0), kv_call(KV, &[KvOp::Write(k, vec![1; 8])])).await;
        match out.status {
            TxnStatus::Committed => committed.push(k),
            TxnStatus::Aborted(e) if e.contains("record heap") => {
                full = Some(e);
                break;
            }
            other => panic!("write of key {k}: {other:?}"),
        }
    }
    let e = full.expect("the heap filled");
    // The cause, not "timed out waiting for the votes of partition p0".
    assert!(e.contains("voted abort: record heap of dc") && e.contains("full: no room to create a record"), "{e}");
    assert!(!committed.is_empty());
    let mut votes = 0;
    for n in cluster.nodes() {
        votes += n.status(false).await.unwrap().heap_full_votes;
    }
    assert!(votes >= 1, "heap-full votes counted");
    // The node keeps serving: reads of new keys, and writes of existing ones, commit.
    let out = client.submit(NodeId(0), kv_call(KV, &[KvOp::Read(10_000), KvOp::Read(10_001)])).await;
    assert_eq!(out.status, TxnStatus::Committed);
    let k = committed[0];
    let out = commit_eventually(&cluster, NodeId(0), &[KvOp::Write(k, vec![2; 8]), KvOp::Read(k)]).await;
    assert_eq!(out.reads[1].as_deref().map(|v| v[0]), Some(2));
    cluster.shutdown();
}

/// A New-Order of `lines` order lines for warehouse 1, district 1 (6 + 3 × `lines` records).
fn new_order(lines: u32) -> redt_proto::wire::ProcedureCall {
    use redt_tpcc::procedures::{call, kind, Line, NewOrderParams};
    let lines = (1..=lines).map(|i| Line { i_id: i, supply_w: 1, qty: 1, dist_info: vec![] }).collect();
    call(kind::NEW_ORDER, NewOrderParams { w: 1, d: 1, c: 1, o_id: 1, entry_d: 0, lines }.encode())
}

/// A TPC-C call is a few bytes of parameters: its operations are the records it plans to
/// touch, known only once it is built. Over `limits.max_ops_per_txn` it is refused by name
/// at the coordinator and counted like any other refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_procedure_planning_too_many_records_is_refused_and_counted() {
    // Nothing is loaded: the calls are refused before they read anything.
    let mut topology = tpcc_small("limits-test-tpcc", 7940);
    topology.limits.max_ops_per_txn = 20;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let client = cluster.client(Duration::from_secs(10)).expect("client");
    let out = client.submit(NodeId(0), new_order(6)).await;
    assert_eq!(
        out.status,
        TxnStatus::Aborted("transaction has 24 operations; the limit is 20 (limits.max_ops_per_txn)".into())
    );
    let status = cluster.node(NodeId(0)).status(false).await.unwrap();
    assert_eq!(status.refused_over_limit, 1);
    // A malformed call is an abort too, but not a refusal over a limit.
    let bad = redt_tpcc::procedures::call(redt_tpcc::procedures::kind::NEW_ORDER, vec![0xff]);
    let out = client.submit(NodeId(0), bad).await;
    assert!(matches!(&out.status, TxnStatus::Aborted(e) if e.starts_with("bad procedure call: ")), "{:?}", out.status);
    assert_eq!(cluster.node(NodeId(0)).status(false).await.unwrap().refused_over_limit, 1);
    cluster.shutdown();
}
