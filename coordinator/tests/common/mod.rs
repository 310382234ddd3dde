//! Helpers shared by the coordinator's integration tests.

use redt_proto::{Dc, DcId, Epoch, LinkConditions, MemStoreConfig, Node, NodeId, Topology};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `configs/local-fast.yaml` with every node on `port` instead of 7100 and the cluster named
/// `name` (unique per test: ports and names must not collide between concurrent tests).
#[allow(dead_code)]
pub fn local_fast(name: &str, port: u16) -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/local-fast.yaml");
    let text = std::fs::read_to_string(path).expect("configs/local-fast.yaml");
    assert!(text.contains(":7100\""), "local-fast.yaml nodes listen on port 7100");
    assert!(text.contains("\nname: local-fast\n"), "local-fast.yaml is named local-fast");
    let text =
        text.replace(":7100\"", &format!(":{port}\"")).replace("\nname: local-fast\n", &format!("\nname: {name}\n"));
    Topology::from_yaml(path, &text).expect("the edited local-fast.yaml is valid")
}

/// `configs/default.yaml` (4 DCs × 2 nodes, n = 3) with every node on `port`, the cluster
/// named `name`, 2 ms links instead of 40 ms and a 64 MiB MemStore per node, so that an
/// embedded cluster of it fits a test. (Each test binary compiles this module; not all use it.)
#[allow(dead_code)]
pub fn two_per_dc(name: &str, port: u16) -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.yaml");
    let text = std::fs::read_to_string(path).expect("configs/default.yaml");
    for needle in
        [":7100\"", "\nname: redt-paper\n", "memstore: { size: 512MiB, index: 16MiB, ring: 16MiB }", "rtt: 40ms"]
    {
        assert!(text.contains(needle), "default.yaml has `{needle}`");
    }
    let text = text
        .replace(":7100\"", &format!(":{port}\""))
        .replace("\nname: redt-paper\n", &format!("\nname: {name}\n"))
        .replace(
            "memstore: { size: 512MiB, index: 16MiB, ring: 16MiB }",
            "memstore: { size: 64MiB, index: 4MiB, ring: 4MiB }",
        )
        .replace("rtt: 40ms", "rtt: 2ms");
    Topology::from_yaml(path, &text).expect("the edited default.yaml is valid")
}

/// A topology named `name` of `n` nodes `dc<i>-n1`, one per DC, with placeholder addresses
/// (set after binding), no tables and no partitions: for transport tests.
#[allow(dead_code)]
pub fn one_node_per_dc(name: &str, n: u16) -> Arc<Topology> {
    let addr = |i: u16| SocketAddr::from(([127, 0, 0, 1], 1 + i));
    Arc::new(Topology {
        name: name.into(),
        epoch: Epoch(1),
        dcs: (0..n)
            .map(|i| Dc {
                id: DcId(i),
                name: format!("dc{}", i + 1),
                nodes: vec![NodeId(i)],
                backend: Default::default(),
            })
            .collect(),
        nodes: (0..n)
            .map(|i| Node {
                id: NodeId(i),
                name: format!("dc{}-n1", i + 1),
                dc: DcId(i),
                listen: addr(i),
                advertise: addr(i).into(),
            })
            .collect(),
        memstore: MemStoreConfig { size_bytes: 1 << 20, index_bytes: 64 << 10, ring_bytes: 64 << 10 },
        tables: vec![],
        partitions: vec![],
        links: vec![vec![LinkConditions::default(); usize::from(n)]; usize::from(n)],
        timeouts: Default::default(),
        verbs: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
        metrics: Default::default(),
        durability: Default::default(),
    })
}

/// Polls `cond` every 10 ms until it holds; fails the test after 10 s.
#[allow(dead_code)]
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}
