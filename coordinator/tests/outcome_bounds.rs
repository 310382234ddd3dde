//! Outcome queries are cheap and bounded (`coordinator/src/outcome_queries.rs`), on embedded
//! local-fast clusters (4 DCs of one node: a lookup round is one `TxnLookup` to each of the
//! 3 other nodes): only the identity that reserved an id at a node is waited for there,
//! anyone else is answered after one round; one connection has at most
//! `outcome_queries::MAX_IN_FLIGHT` queries in flight; a final verdict is remembered, and
//! queries that come together share one round. Costs are counted in `TxnLookup` requests
//! served and rounds run, not in time.

mod common;
use common::local_fast;
use redt_coordinator::outcome_queries::{OutcomeQueryCounts, MAX_IN_FLIGHT};
use redt_coordinator::{error_code, CoordinatorOptions, EmbeddedCluster, Reservation, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::wire::{Body, Envelope, OutcomeQueryRequest, ReserveTxnRequest};
use redt_proto::{Cts, NodeId, TableId, TxnId};
use redt_protocol::call::kv_call;
use redt_protocol::outcome::OutcomeLookup;
use redt_transport::{NodeIdentity, SocketSpec, Transport, TransportConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KV: TableId = TableId(2);

/// One QUIC connection to the cluster's nodes (one per node), with `identity`.
struct Connection {
    transport: Transport,
    cluster_epoch: u32,
    nodes: Vec<(redt_proto::HostPort, String)>,
}

impl Connection {
    fn new(cluster: &EmbeddedCluster, identity: &NodeIdentity) -> Connection {
        let any = "127.0.0.1:0".parse().expect("an address");
        let transport = Transport::client(TransportConfig::default(), identity, SocketSpec::Bind(any)).expect("binds");
        let nodes = cluster.topology.nodes.iter().map(|n| (n.advertise.clone(), n.name.clone())).collect();
        Connection { transport, cluster_epoch: cluster.topology.epoch.0, nodes }
    }

    async fn call(&self, at: NodeId, body: Body) -> Body {
        let (addr, name) = &self.nodes[at.0 as usize];
        let msg = Envelope { epoch: self.cluster_epoch, from: u32::MAX, body: Some(body) };
        self.transport.call_at(addr, name, msg).await.expect("the node answers").body.expect("a body")
    }

    /// Reserves an id at `at` for this connection's identity.
    async fn reserve(&self, at: NodeId) -> Reservation {
        match self.call(at, Body::ReserveTxn(ReserveTxnRequest {})).await {
            Body::TxnReserved(r) => Reservation {
                txn: TxnId(r.txn),
                start_after: Cts::new(r.start_after),
                valid_for_ms: r.valid_for_ms,
                token: r.token,
            },
            other => panic!("a reservation: {other:?}"),
        }
    }

    /// The raw answer of `at` to an outcome query about `txn` (with `res`'s bounds, if given),
    /// letting it wait up to `wait_ms`.
    async fn ask(&self, at: NodeId, txn: TxnId, res: Option<&Reservation>, wait_ms: u64) -> Body {
        let q = OutcomeQueryRequest {
            txn: txn.0,
            start_after: res.map(|r| r.start_after.0),
            valid_for_ms: res.map_or(0, |r| r.valid_for_ms),
            wait_ms,
            token: res.map_or(0, |r| r.token),
        };
        self.call(at, Body::OutcomeQuery(q)).await
    }
}

fn answer(body: Body) -> OutcomeLookup {
    match body {
        Body::TxnOutcome(r) => OutcomeLookup::from_wire(r.state, r.cts, r.detail).expect("decodes"),
        other => panic!("an outcome: {other:?}"),
    }
}

/// `TxnLookup` requests served by all the cluster's nodes.
fn lookups_served(cluster: &EmbeddedCluster) -> u64 {
    cluster.topology.nodes.iter().map(|n| cluster.node(n.id).outcome_query_counts().lookups_served).sum()
}

fn counts(cluster: &EmbeddedCluster, at: NodeId) -> OutcomeQueryCounts {
    cluster.node(at).outcome_query_counts()
}

/// The other DCs' nodes a round asks.
const OTHERS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_from_anyone_but_the_owner_gets_one_round() {
    let topology = local_fast("outcome-bounds-once", 7860);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let conn = Connection::new(&cluster, &cluster.certs().client);
    // An id nobody reserved, and one reserved at node 1 asked at node 2 (which does not know
    // the owner): each answered, not final, after one round, whatever wait was asked for.
    let never = TxnId::new(NodeId(1), 4242);
    let before = (lookups_served(&cluster), counts(&cluster, NodeId(1)));
    let told = answer(conn.ask(NodeId(1), never, None, 5_000).await);
    assert!(matches!(told, OutcomeLookup::Unknown(_)), "{told:?}");
    let after = (lookups_served(&cluster), counts(&cluster, NodeId(1)));
    assert_eq!(after.0 - before.0, OTHERS, "one TxnLookup per other DC");
    assert_eq!((after.1.rounds - before.1.rounds, after.1.admitted - before.1.admitted), (1, 1));

    let res = conn.reserve(NodeId(1)).await;
    let before = (lookups_served(&cluster), counts(&cluster, NodeId(2)));
    let told = answer(conn.ask(NodeId(2), res.txn, Some(&res), 5_000).await);
    assert!(!told.is_final(), "reserved 0 s ago and never submitted: {told:?}");
    let after = (lookups_served(&cluster), counts(&cluster, NodeId(2)));
    assert_eq!(after.0 - before.0, OTHERS, "one round at a node that does not know the owner");
    assert_eq!(after.1.rounds - before.1.rounds, 1);
    cluster.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_is_waited_for_and_the_client_polls_elsewhere() {
    let topology = local_fast("outcome-bounds-owner", 7870);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let conn = Connection::new(&cluster, &cluster.certs().client);
    // Reserved by this identity at node 1 and never submitted: node 1 polls for it (no
    // verdict can be final before start_after + 2 s + phase-1 timeout + skew, 4.25 s).
    let res = conn.reserve(NodeId(1)).await;
    let before = (lookups_served(&cluster), counts(&cluster, NodeId(1)));
    let told = answer(conn.ask(NodeId(1), res.txn, Some(&res), 1_000).await);
    assert!(!told.is_final(), "{told:?}");
    let after = (lookups_served(&cluster), counts(&cluster, NodeId(1)));
    let rounds = after.1.rounds - before.1.rounds;
    assert!(rounds >= 3, "the owner's query is asked again every 200 ms for 1 s: {rounds} rounds");
    assert_eq!(after.0 - before.0, OTHERS * rounds, "each round asks every other DC once");

    // `Client::outcome` asks the other nodes first, each answering after one round: the
    // client asks again itself until the answer is final or its bound has passed.
    let client = cluster.client(Duration::from_secs(10)).expect("binds");
    let res = client.reserve(NodeId(1)).await.expect("reachable").expect("node 1 reserves ids");
    let admitted = |c: &EmbeddedCluster| -> u64 {
        c.topology.nodes.iter().map(|n| c.node(n.id).outcome_query_counts().admitted).sum()
    };
    let before = admitted(&cluster);
    let t0 = Instant::now();
    let told = client.outcome(NodeId(1), &res).await;
    let asked = admitted(&cluster) - before;
    assert!(asked >= 3, "the client asked again while no answer was final: {asked} queries, {told:?}");
    // Within its bound (3.65 s here) nothing is final yet for an id never submitted; after
    // it, the client stops.
    assert!(!told.is_final(), "{told:?}");
    assert!(t0.elapsed() < Duration::from_secs(6), "the client stops at the node's bound: {:?}", t0.elapsed());
    cluster.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_has_at_most_the_cap_in_flight() {
    let topology = local_fast("outcome-bounds-cap", 7880);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let conn = Arc::new(Connection::new(&cluster, &cluster.certs().client));
    // The owner's queries at node 1 wait (2 s each): MAX_IN_FLIGHT of them fill the
    // connection's places.
    let res = conn.reserve(NodeId(1)).await;
    let node = cluster.node(NodeId(1));
    let before = (node.outcome_query_counts(), node.status(false).await.expect("status").refused_over_limit);
    let mut waiting = Vec::new();
    for _ in 0..MAX_IN_FLIGHT {
        let conn = conn.clone();
        waiting.push(tokio::spawn(async move { conn.ask(NodeId(1), res.txn, Some(&res), 2_000).await }));
    }
    let t0 = Instant::now();
    while node.outcome_query_counts().admitted - before.0.admitted < MAX_IN_FLIGHT as u64 {
        assert!(t0.elapsed() < Duration::from_secs(5), "the queries arrive");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match conn.ask(NodeId(1), res.txn, Some(&res), 2_000).await {
        Body::Error(e) => {
            assert_eq!(e.code, error_code::OVER_LIMIT, "{e:?}");
            assert!(e.message.contains(&format!("at most {MAX_IN_FLIGHT} outcome queries")), "{e:?}");
        }
        other => panic!("the query over the cap is refused: {other:?}"),
    }
    let after = node.outcome_query_counts();
    assert_eq!(after.refused - before.0.refused, 1);
    let refused = node.status(false).await.expect("status").refused_over_limit;
    assert_eq!(refused - before.1, 1, "counted with the other requests refused over a limit");
    // Another connection (the same identity) has its own places.
    let other = Connection::new(&cluster, &cluster.certs().client);
    assert!(matches!(other.ask(NodeId(2), res.txn, Some(&res), 0).await, Body::TxnOutcome(_)));
    for w in waiting {
        assert!(matches!(w.await.expect("runs"), Body::TxnOutcome(_)), "the queries in flight are answered");
    }
    assert!(matches!(conn.ask(NodeId(1), res.txn, Some(&res), 1).await, Body::TxnOutcome(_)), "places come back");
    cluster.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_verdict_is_remembered_and_concurrent_queries_share_a_round() {
    let topology = local_fast("outcome-bounds-cache", 7890);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let client = cluster.client(Duration::from_secs(10)).expect("binds");
    let res = client.reserve(NodeId(1)).await.expect("reachable").expect("node 1 reserves ids");
    let out = client.submit_reserved(NodeId(1), kv_call(KV, &[KvOp::Add(3, 1)]), &res).await;
    assert_eq!(out.status, TxnStatus::Committed, "{out:?}");
    let conn = Connection::new(&cluster, &cluster.certs().client);

    let before = (lookups_served(&cluster), counts(&cluster, NodeId(2)));
    let first = answer(conn.ask(NodeId(2), res.txn, Some(&res), 0).await);
    assert!(matches!(first, OutcomeLookup::Committed(_)), "{first:?}");
    let mid = (lookups_served(&cluster), counts(&cluster, NodeId(2)));
    assert_eq!((mid.0 - before.0, mid.1.rounds - before.1.rounds), (OTHERS, 1));
    let again = answer(conn.ask(NodeId(2), res.txn, Some(&res), 0).await);
    assert_eq!(again, first);
    let after = (lookups_served(&cluster), counts(&cluster, NodeId(2)));
    assert_eq!(after.0, mid.0, "no lookup for a remembered verdict");
    assert_eq!((after.1.rounds, after.1.remembered - mid.1.remembered), (mid.1.rounds, 1));

    // Four connections ask about the same unknown id at once: one round.
    let conns: Vec<Arc<Connection>> =
        (0..4).map(|_| Arc::new(Connection::new(&cluster, &cluster.certs().client))).collect();
    for c in &conns {
        c.reserve(NodeId(3)).await; // connected
    }
    let never = TxnId::new(NodeId(3), 777);
    let before = (lookups_served(&cluster), counts(&cluster, NodeId(3)));
    let asks: Vec<_> = conns
        .iter()
        .map(|c| {
            let c = c.clone();
            tokio::spawn(async move { c.ask(NodeId(3), never, None, 0).await })
        })
        .collect();
    for a in asks {
        let told = answer(a.await.expect("runs"));
        assert!(matches!(told, OutcomeLookup::Unknown(_)), "{told:?}");
    }
    let after = (lookups_served(&cluster), counts(&cluster, NodeId(3)));
    assert_eq!(
        (after.1.rounds - before.1.rounds, after.1.shared - before.1.shared),
        (1, 3),
        "queries within 200 ms of a round share it"
    );
    assert_eq!(after.0 - before.0, OTHERS);
    cluster.shutdown();
}
