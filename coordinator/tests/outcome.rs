//! "Ask, don't resubmit blindly", on a real (embedded, QUIC over loopback) cluster:
//! a coordinator decides and stops before it answers (the injected fault
//! `CoordinatorMutations::stop_before_answer_at`), so the client's answer is lost after its
//! transaction was sent. The client ([`Client::submit_asking`]) asks another node what became
//! of the transaction: a commit the recoverers finish is reported committed (its reads lost),
//! and a transaction that can never commit is submitted once more at another coordinator.

mod common;
use common::local_fast;
use redt_coordinator::{Client, CoordinatorMutations, CoordinatorOptions, EmbeddedCluster, RecoveryOptions, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::wire::{Body, Envelope, OutcomeQueryRequest};
use redt_proto::{NodeId, TableId};
use redt_protocol::call::kv_call;
use redt_protocol::outcome::OutcomeLookup;
use redt_transport::{Caller, Principal, SocketSpec, Transport, TransportConfig};
use std::time::{Duration, Instant};

const KV: TableId = TableId(2);

/// Coordinators on node 0 lose their answers. Recoverers take turns of 2 s per DC, which
/// lengthens the outcome query's bound (`Node::outcome_wait`, about 11 s here) well past the
/// time the coordinator's own DC needs to recover a transaction (about 2.4 s after its start).
fn options(topology: &redt_proto::Topology) -> CoordinatorOptions {
    let skew = Duration::from_millis(250);
    CoordinatorOptions {
        phase1_timeout: Duration::from_secs(2),
        clock_skew_bound: skew,
        recovery: Some(RecoveryOptions {
            turn: Duration::from_secs(2),
            ..RecoveryOptions::for_topology(topology, skew)
        }),
        mutations: CoordinatorMutations { stop_before_answer_at: Some(NodeId(0)), ..CoordinatorMutations::default() },
        ..CoordinatorOptions::default()
    }
}

/// The value of `key` read in a transaction coordinated by node 1, once one commits (a lock
/// still held by an undecided transaction aborts it under No-Wait).
async fn read(cluster: &EmbeddedCluster, key: u64) -> i64 {
    let t0 = Instant::now();
    loop {
        let out = cluster.node(NodeId(1)).submit(kv_call(KV, &[KvOp::Read(key)])).await;
        if out.status == TxnStatus::Committed {
            let bytes = out.reads.first().cloned().flatten().unwrap_or_default();
            let mut word = [0u8; 8];
            word[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
            return i64::from_le_bytes(word);
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no read of key {key} committed: {out:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_answer_is_learned_from_another_node() {
    let topology = local_fast("outcome-test-commit", 7810);
    let cluster = EmbeddedCluster::start(topology.clone(), options(&topology)).await.expect("starts");
    let client = Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(20))
        .expect("the client binds");
    let key = 11;
    let r = client.submit_asking(NodeId(0), kv_call(KV, &[KvOp::Add(key, 7)])).await;
    assert_eq!(r.answer.status, TxnStatus::Committed, "{r:?}");
    assert!(matches!(r.asked, Some(OutcomeLookup::Committed(_))), "{r:?}");
    assert!(r.reads_lost, "the reads were in the lost answer");
    assert_eq!(r.resubmitted_after, None, "a committed transaction is never resubmitted");
    assert_eq!((r.coordinator, r.answer.txn.coordinator()), (NodeId(0), NodeId(0)), "{r:?}");
    assert_eq!(read(&cluster, key).await, 7, "applied once");
    cluster.shutdown();
}

/// The coordinator is cut off for good after the client sent its transaction (its node shuts
/// down once the answer is lost): the other DCs' recoverers commit the transaction, and the
/// client learns it from the nodes left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outcome_is_learned_when_the_coordinator_is_gone() {
    let topology = local_fast("outcome-test-gone", 7840);
    let cluster = EmbeddedCluster::start(topology.clone(), options(&topology)).await.expect("starts");
    let client = Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(20))
        .expect("the client binds");
    let key = 14;
    let res = client.reserve(NodeId(0)).await.expect("reachable").expect("node 0 reserves ids");
    let out = client.submit_reserved(NodeId(0), kv_call(KV, &[KvOp::Add(key, 9)]), &res).await;
    assert!(matches!(out.status, TxnStatus::Unknown(_)), "the answer is lost: {out:?}");
    cluster.node(NodeId(0)).shutdown();
    let answer = client.outcome(NodeId(0), &res).await;
    assert!(matches!(answer, OutcomeLookup::Committed(_)), "{answer:?}");
    // Node 0 holds a replica of the key (its DC is a participant the query could not see), so
    // no new transaction commits on it now (n = 3, Q = 3, no failover here): the surviving
    // replicas' records show the commit applied once, unlocked.
    let t = cluster.topology.clone();
    let part = t.partition_of(t.table(KV).expect("kv"), key);
    let replicas = t.partitions[part.0 as usize].replicas.clone();
    assert!(replicas.contains(&NodeId(0)), "node 0 holds a replica of key {key}: {replicas:?}");
    let t0 = Instant::now();
    for node in replicas.into_iter().filter(|&n| n != NodeId(0)) {
        let dc = t.nodes[node.0 as usize].dc;
        loop {
            let image = cluster.dcs[dc.0 as usize].read_record(node, KV, key).expect("the record reads");
            let state = image.map(|r| (r.lock, r.values[0].first().copied()));
            if state == Some((0, Some(9))) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{node}: {state:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    cluster.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_abort_answer_is_resubmitted_once_elsewhere() {
    let topology = local_fast("outcome-test-abort", 7820);
    let cluster = EmbeddedCluster::start(topology.clone(), options(&topology)).await.expect("starts");
    let client = Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(20))
        .expect("the client binds");
    let key = 12;
    let out = cluster.node(NodeId(1)).submit(kv_call(KV, &[KvOp::Add(key, 5)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "{out:?}");
    // Appending to a counter (5: not the list tag, 3) aborts at every replica (a user abort): the transaction can never
    // commit, and node 0 stops before it answers or records the abort.
    let r = client.submit_asking(NodeId(0), kv_call(KV, &[KvOp::Append(key, 1)])).await;
    let lost = r.resubmitted_after.unwrap_or_else(|| panic!("the call was submitted again: {r:?}"));
    assert_eq!(lost.coordinator(), NodeId(0));
    assert!(matches!(r.asked, Some(OutcomeLookup::Aborted(_))), "{r:?}");
    assert_ne!(r.coordinator, NodeId(0), "resubmitted at another coordinator: {r:?}");
    assert_ne!(r.answer.txn, lost, "under a new id");
    assert!(matches!(r.answer.status, TxnStatus::Aborted(_)), "the resubmission aborts too, answered: {r:?}");
    assert_eq!(read(&cluster, key).await, 5, "nothing ran");
    cluster.shutdown();
}

/// A coordinator runs a submission under a client's id only if it reserved that id and has not
/// used it: anything else is refused with a clear error and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_id_reserved_here_and_unused_is_accepted() {
    let topology = local_fast("outcome-test-ids", 7830);
    let cluster = EmbeddedCluster::start(topology.clone(), CoordinatorOptions::default()).await.expect("starts");
    let client = Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(10))
        .expect("the client binds");
    // The outcome query's bound with the default options on local-fast (2 ms RTT): phase-1
    // timeout 2 s + skew 250 ms + another DC's wait 500 ms + 4 turns of 200 ms + 2 rounds of
    // 50 ms.
    assert_eq!(cluster.node(NodeId(0)).outcome_wait(), Duration::from_millis(3650));
    let key = 13;
    let add = |v| kv_call(KV, &[KvOp::Add(key, v)]);
    let res = client.reserve(NodeId(1)).await.expect("reachable").expect("node 1 reserves ids");
    assert_eq!(res.txn.coordinator(), NodeId(1));
    let elsewhere = client.submit_reserved(NodeId(2), add(100), &res).await;
    match &elsewhere.status {
        TxnStatus::Aborted(why) => assert!(why.contains("not reserved at this coordinator"), "{why}"),
        other => panic!("another coordinator's id is refused: {other:?}"),
    }
    let first = client.submit_reserved(NodeId(1), add(1), &res).await;
    assert_eq!((first.status, first.txn), (TxnStatus::Committed, res.txn));
    let again = client.submit_reserved(NodeId(1), add(10), &res).await;
    assert!(matches!(again.status, TxnStatus::Aborted(ref why) if why.contains("already used")), "{again:?}");
    let never = redt_proto::TxnId::new(NodeId(1), 12345);
    let me = Caller::Client(Principal::of_identity("redt://client/redt-client"));
    let made_up = cluster.node(NodeId(1)).submit_as(add(1000), me.share(), Some((never, me, 0))).await;
    assert_eq!(made_up.err(), Some(redt_coordinator::NotReserved::Unknown(never)));
    assert_eq!(read(&cluster, key).await, 1, "only the reserved submission ran");
    cluster.shutdown();
}

/// A reservation is its owner's: another client certificate that learns (or guesses) the id
/// can neither submit under it (refused, the id stays reserved) nor ask the coordinator that
/// reserved it for its outcome; nor can another client with the owner's own certificate that
/// lacks the reservation's token; the owner's submission then commits, and the outcome it is
/// told is its own transaction's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_serves_only_the_identity_that_made_it() {
    let topology = local_fast("outcome-test-owner", 7850);
    let cluster = EmbeddedCluster::start(topology.clone(), CoordinatorOptions::default()).await.expect("starts");
    let owner = cluster.client(Duration::from_secs(10)).expect("the owner binds");
    let mallory = cluster.certs().ca.issue_client("mallory").expect("a second client certificate");
    let thief = Client::with_identity(cluster.topology.clone(), &mallory, Duration::from_secs(10)).expect("binds");
    let key = 15;
    let add = |v| kv_call(KV, &[KvOp::Add(key, v)]);
    let res = owner.reserve(NodeId(1)).await.expect("reachable").expect("node 1 reserves ids");

    let stolen = thief.submit_reserved(NodeId(1), add(100), &res).await;
    match &stolen.status {
        TxnStatus::Aborted(why) => assert!(why.contains("reserved by another identity"), "{why}"),
        other => panic!("the thief's submission is refused: {other:?}"),
    }
    let asked = ask_outcome(&cluster, &mallory, NodeId(1), &res).await;
    match asked.body {
        Some(Body::Error(e)) => {
            assert_eq!(e.code, redt_coordinator::error_code::FORBIDDEN, "{e:?}");
            assert!(e.message.contains("reserved by another identity"), "{e:?}");
        }
        other => panic!("the thief's outcome query is refused: {other:?}"),
    }

    let mine = owner.submit_reserved(NodeId(1), add(1), &res).await;
    assert_eq!((mine.status, mine.txn), (TxnStatus::Committed, res.txn), "the refusals left the id reserved");
    let told = owner.outcome(NodeId(1), &res).await;
    let OutcomeLookup::Committed(cts) = told else { panic!("the owner learns its commit: {told:?}") };
    let at_coordinator = ask_outcome(&cluster, &cluster.certs().client, NodeId(1), &res).await;
    match at_coordinator.body {
        Some(Body::TxnOutcome(r)) => {
            let answer = OutcomeLookup::from_wire(r.state, r.cts, r.detail).expect("decodes");
            assert_eq!(answer, OutcomeLookup::Committed(cts), "the coordinator answers its owner");
        }
        other => panic!("the owner's outcome query at the coordinator is answered: {other:?}"),
    }
    // Another client with the owner's own certificate, which learned the id but not the
    // reservation's token: refused as well, and the reservation stays the owner's.
    let sharer = cluster.client(Duration::from_secs(10)).expect("a second client with the same certificate");
    let res2 = owner.reserve(NodeId(1)).await.expect("reachable").expect("node 1 reserves ids");
    for token in [0, res2.token ^ 1] {
        let guessed = redt_coordinator::Reservation { token, ..res2 };
        let out = sharer.submit_reserved(NodeId(1), add(100), &guessed).await;
        match &out.status {
            TxnStatus::Aborted(why) => assert!(why.contains("under another token"), "{why}"),
            other => panic!("a submission without the token is refused: {other:?}"),
        }
    }
    let mine2 = owner.submit_reserved(NodeId(1), add(1), &res2).await;
    assert_eq!((mine2.status, mine2.txn), (TxnStatus::Committed, res2.txn), "the token's holder still can");
    let stolen_again = thief.submit_reserved(NodeId(1), add(1000), &res).await;
    assert!(matches!(stolen_again.status, TxnStatus::Aborted(_)), "{stolen_again:?}");
    assert_eq!(read(&cluster, key).await, 2, "only the owner's transactions ran");
    cluster.shutdown();
}

/// The raw answer of node `at` to an outcome query about `res`, asked with `identity`.
async fn ask_outcome(
    cluster: &EmbeddedCluster,
    identity: &redt_transport::NodeIdentity,
    at: NodeId,
    res: &redt_coordinator::Reservation,
) -> Envelope {
    let any = "127.0.0.1:0".parse().expect("an address");
    let t = Transport::client(TransportConfig::default(), identity, SocketSpec::Bind(any)).expect("binds");
    let n = &cluster.topology.nodes[at.0 as usize];
    let q = OutcomeQueryRequest {
        txn: res.txn.0,
        start_after: Some(res.start_after.0),
        valid_for_ms: res.valid_for_ms,
        wait_ms: 5_000,
        token: res.token,
    };
    let msg = Envelope { epoch: cluster.topology.epoch.0, from: u32::MAX, body: Some(Body::OutcomeQuery(q)) };
    t.call_at(&n.advertise, &n.name, msg).await.expect("the node answers")
}
