//! `redt bench compare` end to end: two protocols, ~2 s each, one after another on
//! configs/local-fast.yaml moved to port 7700 (other tests use 7100, 7400, 7410 and
//! 7610–7640), each on a fresh embedded cluster (RedT §6.2.2, Table 2).

use redt_bench::compare::{run_compare, CompareConfig, CompareWorkload};
use redt_bench::{ClusterConfig, YcsbConfig};
use redt_coordinator::RetryPolicy;
use redt_proto::{Protocol, Topology};
use std::time::Duration;

#[test]
fn compares_two_protocols_on_one_topology() {
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7700")
        .replace("name: local-fast", "name: local-fast-compare-test");
    let topo = Topology::from_yaml("local-fast (compare test)", &text).unwrap();
    let cfg = CompareConfig {
        protocols: vec![Protocol::Redt, Protocol::TwoPcPaxos],
        workload: CompareWorkload::Ycsb(ClusterConfig {
            duration: Duration::from_secs(2),
            warmup: Duration::from_millis(500),
            clients_per_node: 2,
            records_per_partition: 2048,
            ycsb: YcsbConfig::default(),
            options: Default::default(),
            seed: 7,
            progress: false,
            interval: Default::default(),
            idle_window: Duration::from_millis(200),
            retry: RetryPolicy::none(),
        }),
    };
    let mut started = Vec::new();
    let r = run_compare(&topo, &cfg, &mut |i, n, p| started.push((i, n, p))).unwrap();
    assert_eq!(started, [(0, 2, Protocol::Redt), (1, 2, Protocol::TwoPcPaxos)]);

    assert_eq!(r.reference, Protocol::Redt);
    assert_eq!(r.setup.topology, "local-fast-compare-test");
    assert_eq!(r.setup.seed, 7);
    assert_eq!(r.rows.len(), 2);
    assert_eq!(r.reports.len(), 2);
    for (row, report) in r.rows.iter().zip(&r.reports) {
        assert_eq!(row.protocol, report.protocol(), "each run used its protocol");
        assert!(row.figures.committed_per_s > 0.0, "{}: nothing committed", row.protocol);
        assert!(row.figures.rw_inter_committed > 0, "{}: no rw-inter commit", row.protocol);
        assert!(row.figures.round_trips_per_txn.is_some_and(|x| x > 0.0), "{row:?}");
        // The process spent CPU on every commit, and the idle cluster was measured first.
        assert!(row.figures.cpu_us_per_committed.is_some_and(|x| x > 0.0), "{row:?}");
        assert!(row.figures.cpu_cores.is_some_and(|x| x > 0.0), "{row:?}");
        let redt_bench::compare::RunReport::Ycsb(c) = report else { panic!("a YCSB comparison") };
        assert!(c.cpu.idle_cpu_cores.is_some_and(|x| x >= 0.0), "{:?}", c.cpu);
    }
    assert_eq!(r.rows[0].protocol, Protocol::Redt);
    assert_eq!(r.rows[1].protocol, Protocol::TwoPcPaxos);
    let redt = &r.rows[0].ratios;
    assert_eq!(redt.committed_per_s, Some(1.0));
    assert_eq!(redt.p50_ms, Some(1.0));
    assert_eq!(redt.round_trips_per_txn, Some(1.0));
    assert_eq!(redt.cpu_us_per_committed, Some(1.0));
    assert!(r.rows[1].ratios.committed_per_s.is_some_and(|x| x > 0.0));
    assert_eq!(r.rows[1].paper.map(|p| p.messages), Some(25.09));

    let table = r.table();
    assert!(table.lines().any(|l| l.starts_with("  redt ")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("  2pc-paxos ")), "{table}");
}
