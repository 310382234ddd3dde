//! Clients retrying aborts (`RetryPolicy`, `Client::submit_retrying`, `retrying`) on the
//! embedded cluster of `configs/local-fast.yaml`: under contention on one key retries turn
//! aborts into commits, and an abort whose cause is not retryable is never run again.

mod common;
use common::local_fast;
use rand::SeedableRng;
use redt_coordinator::{
    retrying, AbortCause, Client, CoordinatorOptions, EmbeddedCluster, Retried, RetryPolicy, SubmitReport, TxnStatus,
};
use redt_dc_executor::KvOp;
use redt_proto::{NodeId, TableId};
use redt_protocol::call::kv_call;
use std::sync::Arc;
use std::time::Duration;

/// Table `kv` of local-fast.yaml.
const KV: TableId = TableId(2);

/// Clients adding to the hot key at once.
const CLIENTS: u64 = 8;
/// Transactions per client.
const PER_CLIENT: u64 = 12;

/// What the contended round came to: transactions committed and given up, aborted attempts
/// and their causes.
#[derive(Debug, Default)]
struct Tally {
    committed: u64,
    failed: u64,
    unknown: u64,
    aborted_attempts: u64,
    causes: Vec<Option<AbortCause>>,
}

/// [`CLIENTS`] clients, one per coordinator in turn, each adding 1 to `key` [`PER_CLIENT`]
/// times through [`Client::submit_retrying`] under `policy`.
async fn contend(client: &Arc<Client>, nodes: u16, key: u64, policy: RetryPolicy) -> Tally {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let client = client.clone();
        tasks.spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c);
            let node = NodeId((c % u64::from(nodes)) as u16);
            let mut out: Vec<Retried<SubmitReport>> = Vec::new();
            for _ in 0..PER_CLIENT {
                out.push(client.submit_retrying(node, kv_call(KV, &[KvOp::Add(key, 1)]), &policy, &mut rng).await);
            }
            out
        });
    }
    let mut t = Tally::default();
    while let Some(done) = tasks.join_next().await {
        for r in done.expect("a client task") {
            match r.answer().status {
                TxnStatus::Committed => t.committed += 1,
                TxnStatus::Aborted(_) => t.failed += 1,
                TxnStatus::Unknown(_) => t.unknown += 1,
            }
            assert!(r.attempts <= policy.retries + 1, "at most retries + 1 attempts: {r:?}");
            assert_eq!(r.aborts.len() as u32, r.attempts - u32::from(!r.failed()), "one cause per aborted attempt");
            t.aborted_attempts += r.aborts.len() as u64;
            t.causes.extend(r.aborts.iter().copied());
        }
    }
    t
}

/// The value of `key` as a committed read sees it.
async fn read(cluster: &EmbeddedCluster, key: u64) -> i64 {
    for _ in 0..100 {
        let out = cluster.node(NodeId(0)).submit(kv_call(KV, &[KvOp::Read(key)])).await;
        if out.status == TxnStatus::Committed {
            let v = out.reads.first().cloned().flatten().unwrap_or_default();
            let mut b = [0u8; 8];
            b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
            return i64::from_le_bytes(b);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("key {key} could not be read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_turn_conflicts_into_commits_and_leave_final_aborts_alone() {
    let topology = local_fast("retry-test", 7600);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let nodes = cluster.topology.nodes.len() as u16;
    let client = Arc::new(
        Client::with_identity(cluster.topology.clone(), &cluster.certs().client, Duration::from_secs(10))
            .expect("the client binds"),
    );

    // One hot key, the same load without retries and then with the default policy. Without
    // retries a No-Wait conflict fails its transaction; run rounds until one did (they
    // almost always do at once).
    let mut once = Tally::default();
    let mut key = 1000;
    for _ in 0..5 {
        key += 1;
        once = contend(&client, nodes, key, RetryPolicy::none()).await;
        if once.failed > 0 {
            break;
        }
    }
    assert!(once.failed > 0, "{CLIENTS} clients on one key conflict: {once:?}");
    assert_eq!(once.failed, once.aborted_attempts, "without retries every abort fails its transaction");
    assert!(once.causes.iter().all(|c| c.is_some_and(AbortCause::is_retryable)), "{once:?}");
    assert_eq!(read(&cluster, key).await, once.committed as i64, "only commits added");

    let retried = contend(&client, nodes, key + 1, RetryPolicy::default()).await;
    assert!(
        retried.failed < once.failed,
        "retries leave fewer transactions failed over the same {} transactions: {retried:?} vs {once:?}",
        CLIENTS * PER_CLIENT
    );
    assert!(retried.aborted_attempts > retried.failed, "some aborted attempts were retried: {retried:?}");
    assert!(retried.causes.iter().all(|c| c.is_some_and(AbortCause::is_retryable)), "{retried:?}");
    assert_eq!(read(&cluster, key + 1).await, retried.committed as i64, "each transaction applied at most once");

    // An abort that is not retryable is not run again: appending to a counter aborts at every
    // replica (the procedure's own abort), through the client and in-process alike.
    let counter = 7;
    let out = cluster.node(NodeId(1)).submit(kv_call(KV, &[KvOp::Add(counter, 5)])).await;
    assert_eq!(out.status, TxnStatus::Committed, "{out:?}");
    // The add's phase 2 may still hold a replica's lock (a retryable conflict): wait it out.
    assert_eq!(read(&cluster, counter).await, 5);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let policy = RetryPolicy::default();
    let r = client.submit_retrying(NodeId(0), kv_call(KV, &[KvOp::Append(counter, 1)]), &policy, &mut rng).await;
    assert!(r.failed(), "{r:?}");
    assert_eq!(r.answer().cause, Some(AbortCause::User), "{r:?}");
    assert_eq!(r.attempts, 1, "the procedure's own abort is not retried: {r:?}");
    assert_eq!(r.aborts, [Some(AbortCause::User)]);
    let node = cluster.node(NodeId(2));
    let call = kv_call(KV, &[KvOp::Append(counter, 1)]);
    let r = retrying(&policy, &mut rng, None, || node.submit(call.clone())).await;
    assert_eq!((r.attempts, r.answer().cause), (1, Some(AbortCause::User)), "in-process too: {r:?}");
    assert_eq!(read(&cluster, counter).await, 5, "nothing ran");
    cluster.shutdown();
}
