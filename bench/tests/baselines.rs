//! Each baseline protocol, run on the local-fast topology (own ports), keeps the bank
//! invariant on every replica: a fast baseline that is wrong proves nothing.

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

/// 2PC-Paxos with one secondary's DC cut off: transactions whose primaries are reachable
/// still commit (a majority of each partition holds the redo), and once the DC is back the
/// retried accepts and decisions bring its replicas up to date.
#[test]
fn two_pc_paxos_commits_without_one_secondary_and_catches_it_up() {
    use redt_coordinator::{EmbeddedCluster, TxnStatus};
    use redt_dc_executor::KvOp;
    use redt_proto::{DcId, NodeId};
    use redt_protocol::call;

    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7470")
        .replace("name: local-fast", "name: local-fast-2pc-partition-test");
    let topo = Topology::from_yaml("local-fast (2pc partition test)", &text).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        let options = CoordinatorOptions {
            protocol: Protocol::TwoPcPaxos,
            retry_every: Duration::from_millis(100),
            ..Default::default()
        };
        let cluster = EmbeddedCluster::start(topo, options).await.unwrap();
        let t = cluster.topology.clone();
        let kv = t.table_by_name("kv").unwrap().clone();
        cluster.load(kv.id, 8, &mut |_| {}).unwrap();
        let dc4 = DcId(3);
        // Keys whose primary is outside dc4 and which dc4 replicates as a secondary.
        let keys: Vec<u64> = (0..32u64)
            .filter(|&k| {
                let replicas = &t.partitions[t.partition_of(&kv, k).0 as usize].replicas;
                let dc = |n: &NodeId| t.nodes[n.0 as usize].dc;
                dc(&replicas[0]) != dc4 && replicas[1..].iter().any(|n| dc(n) == dc4)
            })
            .take(4)
            .collect();
        assert_eq!(keys.len(), 4, "local-fast places such keys");
        cluster.isolate(dc4, true).unwrap();
        let coordinator = cluster.node(NodeId(0)).clone();
        let rounds = 5;
        for _ in 0..rounds {
            for &k in &keys {
                let out = coordinator.submit(call::kv_call(kv.id, &[KvOp::Add(k, 1)])).await;
                assert_eq!(out.status, TxnStatus::Committed, "key {k} with dc4 isolated");
            }
        }
        // The cut is real: dc4's replicas have not seen a single one of the commits.
        let dc4_node = t.dcs[dc4.0 as usize].nodes[0];
        for &k in &keys {
            let img = cluster.dcs[dc4.0 as usize].read_record(dc4_node, kv.id, k).unwrap().unwrap();
            assert_eq!(redt_bench::bank::balance(&img.values[0]), 0, "key {k} reached dc4 while it was cut off");
        }
        cluster.isolate(dc4, false).unwrap();
        let (cells, calm) =
            redt_bench::bank::settled_cells(&cluster, kv.id, &keys, Duration::from_secs(60)).await.unwrap();
        assert!(calm, "replicas never agreed after healing: {cells:?}");
        for (k, reps) in keys.iter().zip(&cells) {
            assert_eq!(reps.len(), 3);
            for (node, value, _) in reps {
                let v = redt_bench::bank::balance(value.as_deref().unwrap_or(&[]));
                assert_eq!(v, rounds, "key {k} on {node}");
            }
        }
        cluster.shutdown();
    });
}
