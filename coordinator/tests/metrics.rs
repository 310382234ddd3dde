//! The embedded cluster's metrics endpoints (issue 16): with the topology's `metrics:`
//! section every node serves `GET /metrics` at its own IP, counting the answers of its own
//! coordinators, and its endpoint follows it across a kill (503) and a restart.

mod common;
use common::local_fast;
use redt_coordinator::call::kv_call;
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::{NodeId, TableId};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Table `kv` of local-fast.yaml.
const KV: TableId = TableId(2);

/// `GET /metrics` at `addr`: the status code and the body.
async fn scrape(addr: SocketAddr) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the metrics endpoint");
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).await.expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    (status, body.to_string())
}

/// The sum of every sample of `name` in `body` (one value per line after the labels).
fn sum(body: &str, name: &str) -> u64 {
    body.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("an integer value"))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_embedded_node_serves_its_own_counts_across_a_restart() {
    let mut topology = local_fast("metrics-test-embedded", 7950);
    topology.metrics.port = Some(7952);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addrs = cluster.metrics_addrs();
    let expected: Vec<SocketAddr> = (1..=4).map(|dc| format!("127.0.{dc}.1:7952").parse().unwrap()).collect();
    assert_eq!(addrs, expected);
    let client = cluster.client(Duration::from_secs(10)).expect("client");
    let mut ok = [0u64; 2];
    for k in 0..10u64 {
        let node = (k % 2) as usize;
        let out = client.submit(NodeId(node as u16), kv_call(KV, &[KvOp::Write(k, vec![1; 8])])).await;
        if out.status == TxnStatus::Committed {
            ok[node] += 1;
        }
    }
    assert!(ok.iter().all(|&n| n > 0), "commits through both coordinators: {ok:?}");
    // Each node counts its own coordinators' answers (the cluster's TxnStats is shared).
    for (node, &n) in ok.iter().enumerate() {
        let (status, body) = scrape(addrs[node]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(sum(&body, "redt_txn_committed_total"), n, "{body}");
        assert_eq!(sum(&body, "redt_epoch"), 1);
    }
    let (_, body) = scrape(addrs[2]).await;
    assert_eq!(sum(&body, "redt_txn_committed_total"), 0, "dc3-n1 coordinated nothing");

    // A killed node's endpoint stays, answering 503; its next life is served from scratch.
    cluster.kill(NodeId(1)).expect("kill");
    let (status, body) = scrape(addrs[1]).await;
    assert_eq!(status, 503, "{body}");
    cluster.restart(NodeId(1)).expect("restart");
    let (status, body) = scrape(addrs[1]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sum(&body, "redt_txn_committed_total"), 0, "a new life counts from zero");
    cluster.shutdown();
}
