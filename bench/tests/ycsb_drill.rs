//! A short YCSB run under a drill on the embedded local-fast cluster (own ports), failover on:
//! dc2's node is stopped in-process at 2 s and started again on its MemStore 3 s later; after
//! the drill the cluster settles and every acknowledged write reads back on the current
//! placement (no acknowledged commit lost, no aborted write visible).

use redt_bench::drill_plan::DrillPlan;
use redt_bench::{run_embedded_drill_ycsb, ClusterConfig, YcsbConfig};
use redt_coordinator::{CoordinatorOptions, RetryPolicy};
use redt_proto::Topology;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_ycsb_drill_kills_and_restarts_a_dc_and_no_acknowledged_write_is_lost() {
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7490")
        .replace("name: local-fast", "name: local-fast-ycsb-drill-test");
    let topo = Topology::from_yaml("local-fast (ycsb drill test)", &text).unwrap();
    let duration = Duration::from_secs(8);
    let plan = DrillPlan::parse("kill-dc dc2 at 2s restart-after 3s", &topo).unwrap().expand(duration).unwrap();
    let cfg = ClusterConfig {
        duration,
        warmup: Duration::from_secs(1),
        clients_per_node: 2,
        records_per_partition: 1000,
        ycsb: YcsbConfig::default(),
        options: CoordinatorOptions { failover: true, ..Default::default() },
        seed: 7,
        progress: false,
        interval: Default::default(),
        idle_window: Duration::ZERO,
        retry: RetryPolicy::none(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run_embedded_drill_ycsb(topo, &cfg, plan, Arc::new(|_| {}))).unwrap();
    let d = &r.drill;
    let e = &d.drill.events[0];
    assert!(e.injected_at_s.is_some() && e.healed_at_s.is_some(), "the kill and the restart happened: {e:?}");
    assert!(e.errors.is_empty(), "no effect failed: {:?}", e.errors);
    let log: Vec<&str> = d.drill.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.contains("stopped dc2-n1")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("started dc2-n1 again")), "{log:?}");
    assert!(d.after.settled, "the cluster settled after the drill: {:?}", d.after);
    assert!(r.run.outcomes.committed > 100, "only {} commits", r.run.outcomes.committed);
    // An embedded drill reads this process's CPU time, restarts or not.
    assert!(r.run.cpu.cpu_us_per_committed.is_some_and(|x| x > 0.0), "{:?}", r.run.cpu);
    let lost = d.drill.lost.as_ref().expect("the acknowledged-writes check ran");
    assert!(lost.writes_acked > 0 && lost.keys_read > 0, "{lost:?}");
    assert_eq!(lost.keys_unreadable, 0, "{lost:?}");
    assert_eq!((lost.lost, lost.aborted_visible), (0, 0), "{lost:?}");
}
