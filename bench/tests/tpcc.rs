//! TPC-C end to end on the embedded cluster of configs/tpcc.yaml: a small load, a short
//! run of all five transactions, then the 12 consistency conditions of clause 3.3.2.

use redt_bench::tpcc::{self, check, CheckInput, Scale, TpccConfig};
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster};
use redt_proto::{Protocol, Topology};
use std::time::Duration;

/// Both tests bind the topology's node addresses: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn topology() -> Topology {
    let text = include_str!("../../configs/tpcc.yaml");
    Topology::from_yaml("configs/tpcc.yaml", text).expect("tpcc.yaml loads")
}

/// The freshly loaded database satisfies every condition, condition 11 in its literal form
/// (no Delivery yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_is_consistent() {
    let _serial = SERIAL.lock().await;
    let topo = topology();
    tpcc::schema::check_topology(&topo).unwrap();
    let cluster = EmbeddedCluster::start(topo, CoordinatorOptions::default()).await.unwrap();
    let cfg = tpcc::loader::LoadConfig { warehouses: 2, scale: Scale::SMALL, seed: 7, threads: 2 };
    let loaded = tpcc::loader::load(&cluster, &cfg, &indicatif::ProgressBar::hidden()).unwrap();
    let f = &loaded.footprint;
    assert!(f.heap_bytes_per_warehouse_per_replica > 0.0);
    assert_eq!(
        f.heap_bytes_per_warehouse_per_replica, f.computed_bytes_per_warehouse_per_replica,
        "the heap holds exactly the records loaded"
    );
    let input = CheckInput {
        warehouses: 2,
        scale: Some(Scale::SMALL),
        deliveries: Some(Default::default()),
        ..Default::default()
    };
    let r = check(&cluster, &input);
    for l in r.lines() {
        eprintln!("{l}");
    }
    assert!(r.passed, "a fresh load violates a consistency condition");
    cluster.shutdown();
}

/// A short run: every transaction type commits, and all 12 conditions hold afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run_commits_every_type_and_stays_consistent() {
    let _serial = SERIAL.lock().await;
    let cfg = TpccConfig {
        warehouses: 1,
        scale: Scale::SMALL,
        terminals_per_warehouse: 4,
        duration: Duration::from_secs(8),
        warmup: Duration::from_millis(500),
        check: true,
        seed: 11,
        ..TpccConfig::default()
    };
    let r = tpcc::run_tpcc(topology(), &cfg).await.unwrap();
    eprintln!("{}", r.text());
    for t in &r.types {
        assert!(t.committed > 0, "{} never committed", t.name);
    }
    assert!(r.tpmc > 0.0);
    let c = r.check.expect("the check ran");
    assert!(c.passed, "consistency check failed:\n{}", c.lines().join("\n"));
    assert_eq!(c.conditions.len(), 12);
}

/// Every baseline (and RedT over TCP) runs TPC-C and passes the consistency check: a fast
/// protocol that is wrong proves nothing (issue 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_baseline_passes_the_check() {
    let _serial = SERIAL.lock().await;
    for protocol in [Protocol::TwoPcPaxos, Protocol::EpPaxos, Protocol::Tapir, Protocol::RedtTcp] {
        let cfg = TpccConfig {
            warehouses: 1,
            scale: Scale::SMALL,
            terminals_per_warehouse: 4,
            duration: Duration::from_secs(5),
            warmup: Duration::from_millis(500),
            check: true,
            seed: 13,
            options: CoordinatorOptions { protocol, ..Default::default() },
            ..TpccConfig::default()
        };
        let r = tpcc::run_tpcc(topology(), &cfg).await.unwrap();
        eprintln!("{protocol}: {}", r.text());
        let committed: u64 = r.types.iter().map(|t| t.committed).sum();
        assert!(committed > 10, "{protocol}: only {committed} committed");
        let c = r.check.expect("the check ran");
        assert!(c.passed, "{protocol}: consistency check failed:\n{}", c.lines().join("\n"));
    }
}
