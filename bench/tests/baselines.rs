//! Each baseline protocol, run on the local-fast topology (own ports), keeps the bank
//! invariant on every replica: a fast baseline that is wrong proves nothing (issue 5).

use redt_bench::{run_bank, BankConfig};
use redt_coordinator::CoordinatorOptions;
use redt_proto::{Protocol, Topology};
use std::sync::Mutex;
use std::time::Duration;

/// One embedded cluster at a time: the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn bank(protocol: Protocol, port: u16) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", &format!(":{port}"))
        .replace("name: local-fast", &format!("name: local-fast-{protocol}-test"));
    let topo = Topology::from_yaml("local-fast (baseline test)", &text).unwrap();
    let cfg = BankConfig {
        duration: Duration::from_secs(3),
        warmup: Duration::ZERO,
        accounts: 32,
        read_ratio: 0.2,
        options: CoordinatorOptions { protocol, ..Default::default() },
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run_bank(topo, &cfg)).unwrap();
    assert!(r.transfers_committed > 10, "{protocol}: only {} transfers", r.transfers_committed);
    assert!(r.pass, "{protocol}: {r:?}");
    assert_eq!(r.totals_by_replica, vec![32_000; 3], "{protocol}");
}

#[test]
fn two_pc_paxos_conserves_money_on_every_replica() {
    bank(Protocol::TwoPcPaxos, 7450);
}

#[test]
fn ep_paxos_conserves_money_on_every_replica() {
    bank(Protocol::EpPaxos, 7455);
}

#[test]
fn tapir_conserves_money_on_every_replica() {
    bank(Protocol::Tapir, 7460);
}

#[test]
fn redt_over_tcp_conserves_money_on_every_replica() {
    bank(Protocol::RedtTcp, 7465);
}
