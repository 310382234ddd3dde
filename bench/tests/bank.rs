//! A short bank run on the local-fast topology (own ports): money is conserved and the
//! replicas agree.

use redt_bench::{run_bank, BankConfig};
use redt_proto::Topology;
use std::time::Duration;

#[test]
fn short_bank_run_conserves_the_total() {
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7410")
        .replace("name: local-fast", "name: local-fast-bank-test");
    let topo = Topology::from_yaml("local-fast (bank test)", &text).unwrap();
    let cfg = BankConfig {
        duration: Duration::from_secs(2),
        warmup: Duration::ZERO,
        accounts: 32,
        read_ratio: 0.2,
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run_bank(topo, &cfg)).unwrap();
    assert!(r.transfers_committed > 10, "only {} transfers", r.transfers_committed);
    assert!(r.pass, "{r:?}");
    assert_eq!(r.totals_by_replica, vec![32_000; 3]);
    // The CPU time of the measured interval and of the default idle window before it.
    assert!(r.cpu.cpu_us_per_committed.is_some_and(|x| x > 0.0), "{:?}", r.cpu);
    assert!(r.cpu.idle_cpu_cores.is_some(), "{:?}", r.cpu);
}
