//! The embedded cluster end to end (RedT §4.2; docs/design.md §2 and §4): every node of
//! `configs/local-fast.yaml` (4 DCs × 1 node, 4 partitions × 3 replicas) in this process,
//! real QUIC between them behind the netem socket.
//!
//! Each test runs its own cluster on its own ports and under its own topology name, so the
//! tests of this binary (and the process test of the root package) may run at once.

mod common;
use common::local_fast;
use redt_coordinator::{error_code, CoordinatorMutations, CoordinatorOptions, EmbeddedCluster, TxnAnswer, TxnStatus};
use redt_dc_executor::{Clock, Decision, KvOp, RingWriter, SystemClock};
use redt_proto::wire::{Body, Envelope, ExecuteRequest, SubmitRequest};
use redt_proto::{Cts, DcId, NodeId, PartitionId, TableId, Topology, TxnId};
use redt_protocol::call::kv_call;
use redt_protocol::plan::Scope;
use redt_transport::frame::encode_frame;
use redt_transport::tls::quic_client_config;
use redt_transport::{
    ClusterCa, SocketSpec, StreamCode, Transport, TransportConfig, TransportError, CLIENT_IDENTITY_NAME,
    DEFAULT_MAX_FRAME_BYTES,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Table `kv` of local-fast.yaml: one 2048-byte cell per record.
const KV: TableId = TableId(2);

/// [`local_fast`] with every partition replicated in all 4 DCs: n = 4, Q = ceil(3·4/4) = 3,
/// so a transaction commits while one replica of a partition is behind (docs/design.md §2).
fn local_fast_four_replicas(name: &str, port: u16) -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/local-fast.yaml");
    let mut text = std::fs::read_to_string(path).expect("configs/local-fast.yaml");
    for (three, fourth) in [
        ("[dc1-n1, dc2-n1, dc3-n1]", "dc4-n1"),
        ("[dc2-n1, dc3-n1, dc4-n1]", "dc1-n1"),
        ("[dc3-n1, dc4-n1, dc1-n1]", "dc2-n1"),
        ("[dc4-n1, dc1-n1, dc2-n1]", "dc3-n1"),
    ] {
        assert!(text.contains(three), "local-fast.yaml places a partition on {three}");
        text = text.replace(three, &format!("{}, {fourth}]", three.trim_end_matches(']')));
    }
    let text =
        text.replace(":7100\"", &format!(":{port}\"")).replace("\nname: local-fast\n", &format!("\nname: {name}\n"));
    Topology::from_yaml(path, &text).expect("the 4-replica local-fast.yaml is valid")
}

async fn start(name: &str, port: u16, options: CoordinatorOptions) -> EmbeddedCluster {
    EmbeddedCluster::start(local_fast(name, port), options)
        .await
        .unwrap_or_else(|e| panic!("cluster {name} on port {port} starts: {e}"))
}

/// The partition of `key` in table kv.
fn partition(cluster: &EmbeddedCluster, key: u64) -> PartitionId {
    let schema = cluster.topology.table(KV).expect("table kv");
    cluster.topology.partition_of(schema, key)
}

/// Cell 0 of a kv value read as the little-endian i64 that `KvOp::Add` maintains.
fn balance(value: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    let n = value.len().min(8);
    b[..n].copy_from_slice(&value[..n]);
    i64::from_le_bytes(b)
}

/// What every replica of `key` holds: per replica node, its lock word and its balance
/// (`None` where the record does not exist, i.e. was never accessed there).
fn replicas_of(cluster: &EmbeddedCluster, key: u64) -> Vec<(NodeId, Option<(u64, i64)>)> {
    let p = partition(cluster, key);
    cluster.topology.partitions[p.0 as usize]
        .replicas
        .iter()
        .map(|&node| {
            let dc = cluster.topology.nodes[node.0 as usize].dc;
            let image = cluster.dcs[dc.0 as usize]
                .read_record(node, KV, key)
                .unwrap_or_else(|e| panic!("read_record({node}, kv, {key}): {e}"));
            (node, image.map(|r| (r.lock, balance(&r.values[0]))))
        })
        .collect()
}

/// Every replica of every key unlocked and agreeing on the value, or why not.
fn settled(cluster: &EmbeddedCluster, keys: &[u64]) -> Result<BTreeMap<u64, i64>, String> {
    let mut out = BTreeMap::new();
    for &key in keys {
        let reps = replicas_of(cluster, key);
        let mut value = None;
        for (node, state) in &reps {
            let (lock, v) = state.unwrap_or((0, 0));
            if lock != 0 {
                return Err(format!("key {key} is locked on {node} (lock word {lock:#x})"));
            }
            match value {
                None => value = Some(v),
                Some(w) if w != v => return Err(format!("the replicas of key {key} disagree: {reps:?}")),
                Some(_) => {}
            }
        }
        out.insert(key, value.unwrap_or(0));
    }
    Ok(out)
}

/// Polls until no node has a sub-transaction awaiting its decision and every replica of
/// `keys` is unlocked and agrees; returns the settled values. Panics after `limit`.
async fn wait_settled(cluster: &EmbeddedCluster, keys: &[u64], limit: Duration) -> BTreeMap<u64, i64> {
    let t0 = Instant::now();
    loop {
        let mut pending: Vec<usize> = Vec::new();
        for n in &cluster.nodes() {
            pending.push(n.executor().run(|c, _| c.pending()).await.unwrap_or(0));
        }
        let state = if pending.iter().any(|&p| p > 0) {
            Err(format!("sub-transactions still awaiting a decision per node: {pending:?}"))
        } else {
            settled(cluster, keys)
        };
        match state {
            Ok(values) => return values,
            Err(why) if t0.elapsed() > limit => panic!("not settled after {limit:?}: {why}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Submits `ops` until it commits (a No-Wait lock conflict aborts it), at most `tries` times.
async fn commit_eventually(cluster: &EmbeddedCluster, node: NodeId, ops: &[KvOp], tries: usize) -> TxnAnswer {
    let mut last = None;
    for _ in 0..tries {
        let out = cluster.node(node).submit(kv_call(KV, ops)).await;
        if out.status == TxnStatus::Committed {
            return out;
        }
        last = Some(out.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{ops:?} on {node} never committed in {tries} tries; last status {last:?}");
}

/// RedT §4.2 / docs/design.md §2: concurrent transfers between 32 accounts from every node keep
/// the bank's total, every replica ends up with the same balances and no lock stays held,
/// and a read-only transaction sees the same total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_keeps_its_total() {
    let cluster = Arc::new(start("cluster-test-bank", 7610, CoordinatorOptions::default()).await);
    bank(cluster, Duration::from_secs(10)).await;
}

/// The bank with every partition on 4 replicas (n = 4, Q = 3): transfers commit while one
/// replica voted abort, voted on an older version or did not answer, and that replica is
/// caught up with the quorum's values (docs/design.md §2, phase 2) — so at the end every one of
/// the 4 replicas holds the same balances and the total is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_keeps_its_total_on_four_replicas() {
    let topology = local_fast_four_replicas("cluster-test-bank4", 7720);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("cluster starts");
    bank(Arc::new(cluster), Duration::from_secs(8)).await;
}

/// Concurrent transfers between 32 accounts from every node of `cluster` for `run`, then
/// checks that every replica agrees, the total is kept and reads see it.
async fn bank(cluster: Arc<EmbeddedCluster>, run: Duration) {
    const ACCOUNTS: u64 = 32;
    const FIRST: u64 = 100;
    const FUNDS: i64 = 1000;
    const TASKS: u64 = 8;
    let accounts: Vec<u64> = (FIRST..FIRST + ACCOUNTS).collect();

    // Fund every account in one transaction (it touches every partition, so every DC).
    let funding: Vec<KvOp> = accounts.iter().map(|&k| KvOp::Add(k, FUNDS)).collect();
    let out = commit_eventually(&cluster, NodeId(0), &funding, 5).await;
    assert_eq!(out.reads.len(), funding.len());
    let funded = wait_settled(&cluster, &accounts, Duration::from_secs(10)).await;
    assert!(funded.values().all(|&b| b == FUNDS), "every replica of every account holds {FUNDS}: {funded:?}");

    let (committed, aborted, unknown) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let deadline = Instant::now() + run;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..TASKS {
        let (cluster, committed, aborted, unknown) =
            (cluster.clone(), committed.clone(), aborted.clone(), unknown.clone());
        tasks.spawn(async move {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(0xba4c + t);
            let node = NodeId((t % 4) as u16);
            while Instant::now() < deadline {
                let a = FIRST + rng.gen_range(0..ACCOUNTS);
                let b = loop {
                    let b = FIRST + rng.gen_range(0..ACCOUNTS);
                    if b != a {
                        break b;
                    }
                };
                let x = rng.gen_range(1..=100i64);
                let out = cluster.node(node).submit(kv_call(KV, &[KvOp::Add(a, -x), KvOp::Add(b, x)])).await;
                let counter = match out.status {
                    TxnStatus::Committed => &committed,
                    TxnStatus::Aborted(_) => &aborted,
                    TxnStatus::Unknown(_) => &unknown,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("a transfer task panicked");
    }
    let (c, a, u) =
        (committed.load(Ordering::Relaxed), aborted.load(Ordering::Relaxed), unknown.load(Ordering::Relaxed));
    println!("bank: {c} committed, {a} aborted, {u} unknown in {run:?} ({TASKS} tasks over 4 nodes)");
    assert!(c > 0, "some transfers commit");

    // Phase 2 runs after the early ack: give it time, then every replica must agree.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let balances = wait_settled(&cluster, &accounts, Duration::from_secs(10)).await;
    let total: i64 = balances.values().sum();
    assert_eq!(total, ACCOUNTS as i64 * FUNDS, "the replicas' balances keep the total: {balances:?}");
    assert!(balances.values().any(|&b| b != FUNDS) || c == 0, "committed transfers moved money: {balances:?}");

    // A read-only transaction through a coordinator sees the same total, from every node.
    let reads: Vec<KvOp> = accounts.iter().map(|&k| KvOp::Read(k)).collect();
    for n in 0..4 {
        let out = commit_eventually(&cluster, NodeId(n), &reads, 5).await;
        assert_eq!(out.reads.len(), accounts.len());
        let seen: Vec<i64> =
            out.reads.iter().map(|r| balance(r.as_deref().expect("a read returns the value"))).collect();
        assert_eq!(seen, balances.values().copied().collect::<Vec<_>>(), "node {n} reads what the replicas hold");
        assert_eq!(seen.iter().sum::<i64>(), ACCOUNTS as i64 * FUNDS);
    }
    for class in redt_coordinator::Class::all() {
        println!("bank stats {}: {:?}", class.name(), cluster.stats.report(class));
    }
    cluster.shutdown();
}

/// RedT §4.2 / docs/design.md §2 (every abort is recorded at a majority before it is told): with
/// dc4 cut off, a transaction on the partition dc4 does not hold commits; one on a partition
/// with a replica in dc4 cannot reach its ¾ quorum (3 of 3) and comes back Aborted (its
/// abort recorded at the 2 reachable replicas). After healing, phase 2 reaches dc4, no lock
/// stays held, and every partition commits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_dc() {
    let options = CoordinatorOptions {
        phase1_timeout: Duration::from_millis(300),
        retry_every: Duration::from_millis(50),
        ..CoordinatorOptions::default()
    };
    let cluster = Arc::new(start("cluster-test-partition", 7620, options).await);
    let dc4 = DcId(3);
    // One key per partition: key 400 + p is in partition p (modulo 4).
    let keys: Vec<u64> = (400..404).collect();
    let in_dc4 = |p: PartitionId| {
        cluster.topology.partitions[p.0 as usize]
            .replicas
            .iter()
            .any(|&n| cluster.topology.nodes[n.0 as usize].dc == dc4)
    };
    let outside: Vec<u64> = keys.iter().copied().filter(|&k| !in_dc4(partition(&cluster, k))).collect();
    assert_eq!(outside, vec![400], "only partition p0 has no replica in dc4");

    // Warm up the connections while the network is whole.
    for &k in &keys {
        commit_eventually(&cluster, NodeId(0), &[KvOp::Read(k)], 5).await;
    }
    // Their phase 2 runs after the early ack: let it release every lock before the cut.
    wait_settled(&cluster, &keys, Duration::from_secs(10)).await;

    cluster.isolate(dc4, true).unwrap();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for &k in &keys {
        let cluster = cluster.clone();
        set.spawn(async move { (k, cluster.node(NodeId(0)).submit(kv_call(KV, &[KvOp::Add(k, 1)])).await.status) });
    }
    let mut outcomes = BTreeMap::new();
    while let Some(r) = set.join_next().await {
        let (k, status) = r.unwrap();
        outcomes.insert(k, status);
    }
    println!(
        "with dc4 isolated, after {:?}: {outcomes:?}; {} datagrams dropped",
        t0.elapsed(),
        cluster.dropped_datagrams()
    );
    assert_eq!(outcomes[&400], TxnStatus::Committed, "p0 (dc1, dc2, dc3) does not need dc4");
    for k in 401..404 {
        assert!(
            matches!(&outcomes[&k], TxnStatus::Aborted(_)),
            "p{} has a replica in dc4: its transaction must come back Aborted (abort recorded at 2 of 3), got {:?}",
            k % 4,
            outcomes[&k]
        );
    }
    assert!(cluster.dropped_datagrams() > 0, "netem dropped the datagrams to and from dc4");

    cluster.isolate(dc4, false).unwrap();
    let t0 = Instant::now();
    let values = wait_settled(&cluster, &keys, Duration::from_secs(15)).await;
    println!("settled {:?} after healing", t0.elapsed());
    assert_eq!(values, BTreeMap::from([(400, 1), (401, 0), (402, 0), (403, 0)]), "only the committed add applied");

    // Later transactions on every partition commit, and every replica applies them.
    for &k in &keys {
        commit_eventually(&cluster, NodeId(0), &[KvOp::Add(k, 1)], 20).await;
    }
    commit_eventually(
        &cluster,
        NodeId(3),
        &[KvOp::Add(400, 1), KvOp::Add(401, 1), KvOp::Add(402, 1), KvOp::Add(403, 1)],
        20,
    )
    .await;
    let values = wait_settled(&cluster, &keys, Duration::from_secs(15)).await;
    assert_eq!(values, BTreeMap::from([(400, 3), (401, 2), (402, 2), (403, 2)]));
    cluster.shutdown();
}

/// Writes `bytes` on a new stream of `conn`, finishes it, and returns what came back.
async fn raw_request(conn: &quinn::Connection, bytes: &[u8]) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let (mut send, mut recv) = conn.open_bi().await.expect("open a stream");
    // The server may stop the stream before everything is written; the read reports it.
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    recv.read_to_end(1 << 20).await
}

fn reset_code(result: Result<Vec<u8>, quinn::ReadToEndError>) -> Option<StreamCode> {
    match result {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => StreamCode::from_code(code.into_inner()),
        other => panic!("expected a stream reset, got {other:?}"),
    }
}

fn submit_envelope(epoch: u32, ops: &[KvOp]) -> Envelope {
    Envelope {
        epoch,
        from: u32::MAX,
        body: Some(Body::Submit(SubmitRequest { call: Some(kv_call(KV, ops)), txn: None, token: 0 })),
    }
}

/// docs/design.md §4: a node refuses peers without a cluster certificate, resets a stream that
/// carries garbage or an oversized frame (and counts it), answers a stale epoch with error
/// code 1, refuses phase-1 requests from non-nodes — and keeps serving transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_peers_are_refused_and_the_node_keeps_serving() {
    let cluster = start("cluster-test-badpeers", 7630, CoordinatorOptions::default()).await;
    let node = cluster.node(NodeId(0)).clone();
    let target = cluster.topology.nodes[0].clone();
    let epoch = cluster.topology.epoch.0;
    let any_port = SocketSpec::Bind("127.0.0.1:0".parse().unwrap());
    commit_eventually(&cluster, NodeId(0), &[KvOp::Add(500, 1)], 5).await;
    let before = node.transport().counters().snapshot();
    assert_eq!((before.malformed_frames, before.oversized_frames, before.refused_handshakes), (0, 0, 0));

    // (a) A client of a foreign CA: it trusts no node of ours and no node trusts it.
    let foreign = ClusterCa::generate("foreign").unwrap().issue_client(CLIENT_IDENTITY_NAME).unwrap();
    let stranger = Transport::client(TransportConfig::default(), &foreign, any_port.clone()).unwrap();
    let err = stranger
        .call_addr(target.listen, &target.name, submit_envelope(epoch, &[KvOp::Add(500, 1)]))
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "foreign client: {err}");
    // An impostor: a foreign certificate that trusts our CA, so the node is the one refusing.
    let impostor_id = redt_transport::NodeIdentity { ca_cert: cluster.certs().ca.cert_der(), ..foreign };
    let impostor = Transport::client(TransportConfig::default(), &impostor_id, any_port.clone()).unwrap();
    let err = impostor
        .call_addr(target.listen, &target.name, submit_envelope(epoch, &[KvOp::Add(500, 1)]))
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "impostor: {err}");
    let transport = node.transport().clone();
    common::eventually("both handshakes counted as refused", || {
        transport.counters().snapshot().refused_handshakes >= 2
    })
    .await;

    // (b) A legit client certificate on a raw QUIC connection, sending bad frames.
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let client_cfg = quic_client_config(&cluster.certs().client).unwrap();
    let conn = endpoint.connect_with(client_cfg, target.listen, &target.name).unwrap().await.unwrap();
    // A body that does not decode (field 31 with the invalid wire type 7).
    let mut undecodable = 8u32.to_le_bytes().to_vec();
    undecodable.extend_from_slice(&[0xff; 8]);
    assert_eq!(reset_code(raw_request(&conn, &undecodable).await), Some(StreamCode::Malformed));
    // A length prefix far over the limit.
    let mut huge = u32::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"tiny");
    assert_eq!(reset_code(raw_request(&conn, &huge).await), Some(StreamCode::Oversized));
    // Text garbage: its first 4 bytes read as a length of 542 MB.
    assert_eq!(reset_code(raw_request(&conn, b"GET / HTTP/1.1\r\n\r\n").await), Some(StreamCode::Oversized));
    let after = node.transport().counters().snapshot();
    assert_eq!((after.malformed_frames, after.oversized_frames), (1, 2), "{after:?}");
    // The same connection still carries a well-formed request: a transaction commits.
    let frame =
        encode_frame(&submit_envelope(epoch, &[KvOp::Add(500, 1), KvOp::Read(500)]), DEFAULT_MAX_FRAME_BYTES).unwrap();
    let reply = raw_request(&conn, &frame).await.expect("a well-formed request is answered");
    assert_eq!(u32::from_le_bytes(reply[..4].try_into().unwrap()) as usize, reply.len() - 4);
    let reply = <Envelope as prost::Message>::decode(&reply[4..]).unwrap();
    match reply.body {
        Some(Body::Outcome(o)) => {
            assert_eq!((o.outcome, o.error.as_str()), (0, ""), "committed");
            assert_eq!(balance(&o.reads[1]), 2, "the read sees the setup add and its own");
        }
        other => panic!("expected an outcome, got {other:?}"),
    }

    // (c) A client's envelope epoch is for information only: the node plans the transaction
    // in its own epoch (the epoch fence is on phase 1, by the epoch the coordinator planned
    // it in, and is tested in tests/executor_core.rs), and its reply carries that epoch.
    let client = Transport::client(TransportConfig::default(), &cluster.certs().client, any_port).unwrap();
    for other in [epoch - 1, epoch + 1] {
        // Retried on an abort: the transactions above may still hold key 500's lock (phase 2
        // runs after the early acknowledgement).
        let mut last = None;
        for _ in 0..50 {
            let reply = client
                .call_addr(target.listen, &target.name, submit_envelope(other, &[KvOp::Add(500, 0)]))
                .await
                .unwrap();
            assert_eq!(reply.epoch, epoch, "the reply carries the node's epoch");
            match reply.body {
                Some(Body::Outcome(o)) if o.outcome == 0 => {
                    last = None;
                    break;
                }
                Some(Body::Outcome(o)) => last = Some(o.error),
                other => panic!("expected an outcome, got {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(last, None, "epoch {other}: committed");
    }
    // A phase-1 request from a client (not a node) is refused: only nodes send it.
    let execute = ExecuteRequest {
        txn: 77,
        ballot: 0,
        coordinator: 1,
        participants: vec![0],
        call: Some(kv_call(KV, &[KvOp::Add(500, 100)])),
        ..Default::default()
    };
    let msg = Envelope { epoch, from: 1, body: Some(Body::Execute(execute)) };
    let reply = client.call_addr(target.listen, &target.name, msg).await.unwrap();
    assert!(matches!(&reply.body, Some(Body::Error(e)) if e.code == error_code::FORBIDDEN), "{:?}", reply.body);

    // (d) The node keeps serving: through a client connection and as a coordinator. Retried
    // on a lock conflict only, as above: the last transaction's phase 2 may still hold key
    // 500's lock in a DC (it runs after the early acknowledgement); an aborted add applies
    // nothing, so exactly one add of 1 commits here.
    let mut reply = None;
    for _ in 0..50 {
        let r =
            client.call_addr(target.listen, &target.name, submit_envelope(epoch, &[KvOp::Add(500, 1)])).await.unwrap();
        let conflict = matches!(&r.body, Some(Body::Outcome(o)) if o.outcome != 0 && o.error.contains("lock conflict"));
        reply = Some(r);
        if !conflict {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reply = reply.expect("at least one attempt");
    assert!(matches!(&reply.body, Some(Body::Outcome(o)) if o.outcome == 0), "{:?}", reply.body);
    let out = commit_eventually(&cluster, NodeId(0), &[KvOp::Read(500)], 5).await;
    assert_eq!(balance(out.reads[0].as_deref().unwrap()), 3, "only the three committed adds of 1 applied");
    let values = wait_settled(&cluster, &[500], Duration::from_secs(10)).await;
    assert_eq!(values[&500], 3, "every replica holds the same value");
    endpoint.close(0u32.into(), b"done");
    cluster.shutdown();
}

/// A repeated phase-2 decision (a retry whose first attempt did land) is answered without
/// touching the ring, even after the entries it names were flushed and their slots reused by
/// other transactions; a repeated phase 1 for a decided transaction votes abort and holds
/// nothing. The ring is shrunk to 64 KiB so that a hundred writes wrap it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_decision_after_the_ring_wrapped_is_a_no_op() {
    let mut topology = local_fast("cluster-test-redecide", 7660);
    topology.memstore.ring_bytes = 64 * 1024;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("cluster starts");
    let n0 = NodeId(0);
    let dc0 = cluster.topology.nodes[0].dc;
    let key = (0..).find(|&k| cluster.topology.partitions[partition(&cluster, k).0 as usize].replicas.contains(&n0));
    let key = key.expect("node 0 holds some partition");
    let n0_node = cluster.node(n0);
    let exec = n0_node.executor();
    let txn = TxnId::new(n0, 1 << 40); // far above the ids the node hands out itself
    let args = redt_protocol::message::Execute {
        txn,
        coordinator: n0,
        participants: vec![dc0],
        call: kv_call(KV, &[KvOp::Add(key, 5)]),
        scope: Scope::Dc,
        replicate: false,
        start: redt_proto::Cts(0),
        deadline_ms: 0,
        partitions: vec![],
        epoch: cluster.topology.epoch,
        share: 0,
        carried: Vec::new(),
    };
    let a = args.clone();
    let vote = exec.run(move |c, now| c.execute(&a, now)).await.unwrap().expect("phase 1 runs");
    assert!(vote.is_commit(), "an uncontended add votes commit: {:?}", vote.abort);
    assert!(!vote.entries.is_empty(), "a write leaves redo entries");
    let cts = Cts::new(vote.hlc.0 + 1);
    let e = vote.entries.clone();
    exec.run(move |c, _| c.decide(txn, Decision::Commit(cts), &e)).await.unwrap().expect("the decision applies");

    // Wrap node 0's ring with other transactions' entries until the first slot of this
    // transaction's entry holds something else.
    let dc = &cluster.dcs[dc0.0 as usize];
    let first = vote.entries.iter().find(|e| e.node == n0).expect("an entry on node 0").index;
    let other = (key + 1..).find(|&k| partition(&cluster, k) == partition(&cluster, key)).expect("another key");
    let mut wrapped = false;
    for i in 0..400u32 {
        commit_eventually(&cluster, n0, &[KvOp::Write(other, vec![i as u8; 1500])], 50).await;
        match redt_dc_executor::ring::read_entry(dc.verbs.as_ref(), n0, &dc.layout, first) {
            Ok(e) if e.txn == txn => {}
            _ => {
                wrapped = true;
                break;
            }
        }
    }
    assert!(wrapped, "node 0's ring wrapped past the first transaction's entries");

    let e = vote.entries.clone();
    exec.run(move |c, _| c.decide(txn, Decision::Commit(cts), &e))
        .await
        .unwrap()
        .expect("a repeated decision is answered");
    exec.run(move |c, _| c.decide(txn, Decision::Abort, &[])).await.unwrap().expect("so is one without entries");
    let a = args.clone();
    let again = exec.run(move |c, now| c.execute(&a, now)).await.unwrap().expect("a repeated phase 1 runs");
    assert!(again.abort.is_some(), "a repeated phase 1 of a decided transaction votes abort");
    let left = exec.run(move |c, _| c.pending_entries(txn)).await.unwrap();
    assert!(left.is_empty(), "the repeated phase 1 holds nothing on node 0");
    // Only DC 0 ran this transaction: its replica there holds the add once, unlocked.
    let here = replicas_of(&cluster, key).into_iter().find(|(n, _)| *n == n0).and_then(|(_, s)| s);
    assert_eq!(here, Some((0, 5)), "node 0's replica of key {key}: unlocked, the add applied exactly once");
    cluster.shutdown();
}

/// RedT's Table-2 counters are what its coordinator sent (RedT §4.2, Table 2): a committed
/// read-write transaction over 3 DCs, coordinated in one of them, costs 2 inter-DC round
/// trips and 4 messages per other DC (execute and vote, decision and its reply), with and
/// without early ack (with it, phase 2's share arrives when phase 2 ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redt_counts_the_messages_it_sent() {
    for (early_ack, port) in [(false, 7670), (true, 7680)] {
        let options = CoordinatorOptions { early_ack, ..CoordinatorOptions::default() };
        let cluster = start(&format!("cluster-test-counters-{early_ack}"), port, options).await;
        let n0 = NodeId(0);
        // A key whose 3 replicas include node 0's DC: the other 2 participant DCs are remote.
        let key =
            (0..).find(|&k| cluster.topology.partitions[partition(&cluster, k).0 as usize].replicas.contains(&n0));
        let key = key.expect("node 0 holds some partition");
        commit_eventually(&cluster, n0, &[KvOp::Add(key, 1)], 20).await;
        let rw_inter = redt_coordinator::Class { read_write: true, inter_dc: true };
        let t0 = Instant::now();
        loop {
            let r = cluster.node(n0).stats().report(rw_inter);
            assert_eq!(r.committed, 1, "early ack {early_ack}: one rw-inter commit");
            assert_eq!(r.client_round_trips_per_txn, if early_ack { 1.0 } else { 2.0 }, "{r:?}");
            if (r.inter_dc_messages_per_txn, r.inter_dc_round_trips_per_txn) == (8.0, 2.0) {
                break;
            }
            // With early ack the commit is counted at 1 round trip and 4 messages, and
            // phase 2's share is added when it ends.
            let acked = (r.inter_dc_messages_per_txn, r.inter_dc_round_trips_per_txn) == (4.0, 1.0);
            assert!(
                early_ack && acked && t0.elapsed() < Duration::from_secs(10),
                "early ack {early_ack}: 2 round trips and 8 messages: {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cluster.shutdown();
    }
}

/// docs/design.md §2, phase 2: with 4 replicas (Q = 3) a transaction commits although one DC
/// voted abort (here: a lock held by another sub-transaction there); once that lock is
/// released, the replica it left behind gets the quorum's value too, and all 4 agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_voted_abort_is_caught_up() {
    let topology = local_fast_four_replicas("cluster-test-catch-up", 7690);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("cluster starts");
    let key = 4242;
    let holder = NodeId(3);
    let holder_dc = cluster.topology.nodes[3].dc;
    // A sub-transaction in dc4 that locks the key and waits for a decision that comes later.
    let holder_node = cluster.node(holder);
    let exec = holder_node.executor();
    let blocker = TxnId::new(holder, 1 << 40);
    let args = redt_protocol::message::Execute {
        txn: blocker,
        coordinator: holder,
        participants: vec![holder_dc],
        call: kv_call(KV, &[KvOp::Add(key, 1000)]),
        scope: Scope::Dc,
        replicate: false,
        start: redt_proto::Cts(0),
        deadline_ms: 0,
        partitions: vec![],
        epoch: cluster.topology.epoch,
        share: 0,
        carried: Vec::new(),
    };
    let a = args.clone();
    let held = exec.run(move |c, now| c.execute(&a, now)).await.unwrap().expect("phase 1 in dc4");
    assert!(held.is_commit(), "the blocker takes the lock: {:?}", held.abort);

    // dc4 votes abort on the lock; dc1..dc3 make the quorum of 3.
    let out = cluster.node(NodeId(0)).submit(kv_call(KV, &[KvOp::Add(key, 5)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "3 of 4 up-to-date commit votes commit");
    let e = held.entries.clone();
    exec.run(move |c, _| c.decide(blocker, Decision::Abort, &e)).await.unwrap().expect("the blocker is aborted");

    let values = wait_settled(&cluster, &[key], Duration::from_secs(20)).await;
    assert_eq!(values[&key], 5, "every replica, dc4's included, holds the committed add");
    let reps = replicas_of(&cluster, key);
    assert_eq!(reps.len(), 4, "{reps:?}");
    assert!(reps.iter().all(|(_, s)| *s == Some((0, 5))), "all 4 replicas unlocked at 5: {reps:?}");
    cluster.shutdown();
}

/// Per live node, its ring's undecided entries (`Intent` or `Logged`), as `(node, count)`
/// for the nodes that have any.
async fn undecided(cluster: &EmbeddedCluster) -> Vec<(NodeId, usize)> {
    let mut out = Vec::new();
    for n in &cluster.nodes() {
        if let Some(entries) = n.executor().run(|c, _| c.unfinished_entries()).await {
            let count = entries.unwrap_or_else(|e| panic!("reading {}'s ring: {e}", n.id())).len();
            if count > 0 {
                out.push((n.id(), count));
            }
        }
    }
    out
}

/// Polls until no live node's ring holds an undecided entry. Panics after `limit`.
async fn wait_decided(cluster: &EmbeddedCluster, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let left = undecided(cluster).await;
        if left.is_empty() {
            return;
        }
        assert!(t0.elapsed() <= limit, "undecided entries (node, count) still there after {limit:?}: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// docs/design.md, "Recovery": a coordinator that acknowledged a
/// commit and died before phase 2 leaves its sub-transactions locked and undecided. The
/// recovery scans of the nodes holding them (in other DCs: the coordinator's DC holds no
/// replica, and its node is shut down) start recoverers once the phase-1 deadline, the
/// clock-skew bound and their DC's wait have passed; the acknowledged commit is applied on
/// every replica and the locks are released. A later transaction on the same key then
/// commits; its coordinator (in a DC holding a replica) dies before phase 2 too, and this
/// time the coordinator's own DC recovers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_dies_before_phase_2_is_recovered() {
    // 2 s: the first transaction must gather its 3 commit votes (over fresh connections) in
    // time even when the whole suite loads both cores; with 500 ms it once missed them and
    // aborted.
    let options = CoordinatorOptions {
        phase1_timeout: Duration::from_secs(2),
        clock_skew_bound: Duration::from_secs(1),
        mutations: CoordinatorMutations { stop_before_phase2: true, ..CoordinatorMutations::default() },
        ..CoordinatorOptions::default()
    };
    let cluster = start("cluster-test-recovery", 7740, options.clone()).await;
    let (n0, n1) = (NodeId(0), NodeId(1));
    let dc_of = |n: NodeId| cluster.topology.nodes[n.0 as usize].dc;
    // A key whose partition has no replica in node 0's DC, and one in node 1's.
    let replica_dcs = |k: u64| -> Vec<DcId> {
        cluster.topology.partitions[partition(&cluster, k).0 as usize].replicas.iter().map(|&n| dc_of(n)).collect()
    };
    let key = (600..).find(|&k| !replica_dcs(k).contains(&dc_of(n0))).expect("a partition without node 0's DC");
    assert!(replica_dcs(key).contains(&dc_of(n1)), "node 1's DC holds a replica of key {key}");

    // Node 0 coordinates, acknowledges the commit and dies before phase 2.
    let submitted_ms = SystemClock.now_ms();
    let out = cluster.node(n0).submit(kv_call(KV, &[KvOp::Add(key, 5)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "3 of 3 commit votes, acknowledged early");
    cluster.node(n0).shutdown();
    let left = undecided(&cluster).await;
    let locked = settled(&cluster, &[key]);
    // No node may recover before the transaction's start (at least `submitted_ms`) plus
    // phase 1's timeout, the skew bound and another DC's wait (at least 500 ms): if that
    // moment has not come yet, the fault must still be visible.
    let earliest_ms = submitted_ms + (options.phase1_timeout + options.clock_skew_bound).as_millis() as u64 + 500;
    if SystemClock.now_ms() < earliest_ms {
        assert_eq!(left.len(), 3, "the 3 replicas' entries wait for a decision: {left:?}");
        assert!(locked.is_err(), "the dead coordinator's locks are held: {locked:?}");
    }

    wait_decided(&cluster, Duration::from_secs(15)).await;
    let values = wait_settled(&cluster, &[key], Duration::from_secs(15)).await;
    assert_eq!(values[&key], 5, "the acknowledged commit is applied on every replica");

    // The key is free again: a transaction from node 1 commits on it, and is recovered by
    // node 1's own DC once its coordinator has stopped as well.
    let out = cluster.node(n1).submit(kv_call(KV, &[KvOp::Add(key, 1)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "the recovered transaction released its locks");
    wait_decided(&cluster, Duration::from_secs(15)).await;
    let values = wait_settled(&cluster, &[key], Duration::from_secs(15)).await;
    assert_eq!(values[&key], 6, "both acknowledged commits are applied on every replica");
    cluster.shutdown();
}

/// docs/design.md, "Recovery", point 4: a writer that dies between its fetch-and-add on a ring's
/// tail and its WRITE leaves a gap that replay cannot pass, and every entry behind it stays
/// in the ring. The ring owner's gap watch sees the gap stay at the head, asks its DC's
/// writers for their reservations, finds that none holds the slots, and covers them with
/// fillers; replay then releases the ring up to its tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_gap_at_the_head_of_a_ring_is_filled() {
    let cluster = start("cluster-test-gap", 7750, CoordinatorOptions::default()).await;
    let n0 = NodeId(0);
    let dc = cluster.dcs[cluster.topology.nodes[0].dc.0 as usize].clone();
    let key = (700..).find(|&k| cluster.topology.partitions[partition(&cluster, k).0 as usize].replicas.contains(&n0));
    let key = key.expect("node 0 holds some partition");
    commit_eventually(&cluster, n0, &[KvOp::Add(key, 1)], 5).await;
    wait_settled(&cluster, &[key], Duration::from_secs(10)).await;

    // The dead writer: it reserves 3 slots of node 0's ring and never writes them.
    let mut dead = RingWriter::new(dc.layout, n0);
    let hole = dead.reserve(dc.verbs.as_ref(), 3, Duration::ZERO, &Instant::now).expect("3 slots reserved");
    drop(dead);
    // An entry behind the gap.
    commit_eventually(&cluster, n0, &[KvOp::Add(key, 1)], 5).await;

    let t0 = Instant::now();
    loop {
        let (head, tail) = redt_dc_executor::ring::ring_bounds(dc.verbs.as_ref(), n0, &dc.layout).expect("ring bounds");
        if head > hole {
            break;
        }
        assert!(
            t0.elapsed() <= Duration::from_secs(15),
            "node 0's ring head is stuck at {head} (tail {tail}) before the gap at {hole}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let values = wait_settled(&cluster, &[key], Duration::from_secs(10)).await;
    assert_eq!(values[&key], 2, "both adds are applied on every replica");
    cluster.shutdown();
}

/// Deletes end to end: through the embedded cluster, a committed delete makes the
/// key read as missing and leaves the scan; once every replica settled, no replica holds a
/// row for it and its key is out of every replica's ordered index; a later write brings it
/// back into the scan and the indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_leaves_reads_scans_and_every_replicas_index_and_a_write_brings_it_back() {
    let cluster = start("cluster-test-delete", 7790, CoordinatorOptions::default()).await;
    let node = cluster.topology.nodes[0].id;
    let keys: Vec<u64> = (40..48).collect();
    let writes: Vec<KvOp> = keys.iter().map(|&k| KvOp::Write(k, vec![1, k as u8])).collect();
    commit_eventually(&cluster, node, &writes, 50).await;
    commit_eventually(&cluster, node, &[KvOp::Delete(43)], 50).await;
    let scanned = |out: &TxnAnswer| -> Vec<u64> {
        let rows = out.reads[0].as_deref().and_then(redt_dc_executor::decode_scan).expect("a scan result");
        rows.into_iter().map(|r| r.0).collect()
    };
    let out = commit_eventually(&cluster, node, &[KvOp::Scan(40, 47, 100), KvOp::Read(43)], 50).await;
    assert_eq!(scanned(&out), vec![40, 41, 42, 44, 45, 46, 47]);
    assert!(out.reads[1].as_deref().is_some_and(|v| v.iter().all(|&b| b == 0)), "reads as missing: {:?}", out.reads);
    wait_settled(&cluster, &keys, Duration::from_secs(20)).await;
    let in_index = |key: u64| -> Vec<bool> {
        let p = partition(&cluster, key);
        cluster.topology.partitions[p.0 as usize]
            .replicas
            .iter()
            .map(|&n| {
                let dc = &cluster.dcs[cluster.topology.nodes[n.0 as usize].dc.0 as usize];
                let part = dc.ordered.partitioner().partition_of(KV, key);
                let tree = dc.ordered.tree(dc.verbs.as_ref(), n, KV, part, false).unwrap().expect("a tree");
                tree.lookup(dc.verbs.as_ref(), key).unwrap().is_some()
            })
            .collect()
    };
    assert!(replicas_of(&cluster, 43).iter().all(|(_, s)| s.is_some_and(|(_, v)| v == 0)), "every replica cleared");
    assert_eq!(in_index(43), vec![false; 3], "out of every replica's index");
    assert_eq!(in_index(44), vec![true; 3]);
    commit_eventually(&cluster, node, &[KvOp::Write(43, vec![2, 2])], 50).await;
    let out = commit_eventually(&cluster, node, &[KvOp::Scan(40, 47, 100)], 50).await;
    assert_eq!(scanned(&out), keys);
    wait_settled(&cluster, &keys, Duration::from_secs(20)).await;
    assert_eq!(in_index(43), vec![true; 3], "back in every replica's index");
    cluster.shutdown();
}
