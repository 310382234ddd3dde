//! Helpers shared by the coordinator's integration tests.

use redt_proto::{Dc, DcId, Epoch, LinkConditions, MemStoreConfig, NodeEntry, NodeId, Topology};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `configs/FILE` with each `(from, to)` of `edits` replaced, checking first that the file
/// has every `from` (so a changed config fails here, by name, rather than later).
fn edited_config(file: &str, edits: &[(&str, String)]) -> Topology {
    let path = format!("{}/../configs/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for (from, to) in edits {
        assert!(text.contains(from), "{file} has `{from}`");
        text = text.replace(from, to);
    }
    Topology::from_yaml(&path, &text).unwrap_or_else(|e| panic!("the edited {file} is invalid: {e}"))
}

/// `configs/local-fast.yaml` with every node on `port` instead of 7100 and the cluster named
/// `name` (unique per test: ports and names must not collide between concurrent tests).
#[allow(dead_code)]
pub fn local_fast(name: &str, port: u16) -> Topology {
    edited_config(
        "local-fast.yaml",
        &[(":7100\"", format!(":{port}\"")), ("\nname: local-fast\n", format!("\nname: {name}\n"))],
    )
}

/// `configs/default.yaml` (4 DCs × 2 nodes, n = 3) with every node on `port`, the cluster
/// named `name`, 2 ms links instead of 40 ms and a 64 MiB MemStore per node, so that an
/// embedded cluster of it fits a test. (Each test binary compiles this module; not all use it.)
#[allow(dead_code)]
pub fn two_per_dc(name: &str, port: u16) -> Topology {
    edited_config(
        "default.yaml",
        &[
            (":7100\"", format!(":{port}\"")),
            ("\nname: redt-paper\n", format!("\nname: {name}\n")),
            (
                "memstore: { size: 512MiB, index: 16MiB, ring: 16MiB }",
                "memstore: { size: 64MiB, index: 4MiB, ring: 4MiB }".into(),
            ),
            ("rtt: 40ms", "rtt: 2ms".into()),
        ],
    )
}

/// `configs/tpcc.yaml` on `port`, named `name`, with 2 ms links and a 16 MiB MemStore per
/// node: room for the TPC-C tables' schema, not for a load.
#[allow(dead_code)]
pub fn tpcc_small(name: &str, port: u16) -> Topology {
    edited_config(
        "tpcc.yaml",
        &[
            (":7100\"", format!(":{port}\"")),
            ("\nname: redt-tpcc\n", format!("\nname: {name}\n")),
            (
                "memstore: { size: 1GiB, index: 128MiB, ring: 32MiB }",
                "memstore: { size: 16MiB, index: 1MiB, ring: 1MiB }".into(),
            ),
            ("rtt: 40ms", "rtt: 2ms".into()),
        ],
    )
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
            .map(|i| NodeEntry {
                id: NodeId(i),
                name: format!("dc{}-n1", i + 1),
                dc: DcId(i),
                listen: addr(i),
                advertise: addr(i).into(),
                metrics: None,
                grpc: None,
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
        grpc: Default::default(),
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
