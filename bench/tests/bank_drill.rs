//! A short bank run under a drill on the local-fast topology (own ports), failover on: dc2's
//! node is stopped in-process at 2 s and started again on its MemStore 3 s later; after the
//! drill the cluster settles and the bank check, on the current placement, passes.

use redt_bench::drill_plan::DrillPlan;
use redt_bench::{run_bank, BankConfig};
use redt_coordinator::CoordinatorOptions;
use redt_proto::Topology;
use std::time::Duration;

#[test]
fn a_bank_drill_kills_and_restarts_a_dc_and_the_total_holds_after_it() {
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7420")
        .replace("name: local-fast", "name: local-fast-bank-drill-test");
    let topo = Topology::from_yaml("local-fast (bank drill test)", &text).unwrap();
    let duration = Duration::from_secs(8);
    let plan = DrillPlan::parse("kill-dc dc2 at 2s restart-after 3s", &topo).unwrap().expand(duration).unwrap();
    let cfg = BankConfig {
        duration,
        warmup: Duration::from_secs(1),
        accounts: 32,
        options: CoordinatorOptions { failover: true, ..Default::default() },
        drill: Some(plan),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run_bank(topo, &cfg)).unwrap();
    let d = r.drill.as_ref().expect("a drill report");
    let e = &d.drill.events[0];
    assert!(e.injected_at_s.is_some() && e.healed_at_s.is_some(), "the kill and the restart happened: {e:?}");
    assert!(e.errors.is_empty(), "no effect failed: {:?}", e.errors);
    let log: Vec<&str> = d.drill.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.contains("stopped dc2-n1")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("started dc2-n1 again")), "{log:?}");
    assert!(d.after.settled, "the cluster settled after the drill: {:?}", d.after);
    let committed: u64 = d.drill.seconds.iter().map(|s| s.committed).sum();
    assert!(committed > 0, "the timeline counted the clients' commits");
    assert!(r.transfers_committed > 10, "only {} transfers", r.transfers_committed);
    assert!(r.pass, "the bank check after the drill: {}", r.check_line());
    assert_eq!(r.totals_by_replica, vec![32_000; 3]);
}
