//! TPC-C end to end on the embedded cluster of configs/tpcc.yaml: a small load, a short
//! run of all five transactions, then the 12 consistency conditions of clause 3.3.2.

use redt_bench::tpcc::procedures as px;
use redt_bench::tpcc::{self, check, CheckInput, Scale, TpccConfig};
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster};
use redt_dc_executor::{Clock, Hlc, LocalAccess, SubTxn, SystemClock, Vote};
use redt_proto::{Cts, DcId, Epoch, NodeId, PartitionId, Protocol, Topology, TxnId};
use std::sync::Arc;
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
/// protocol that is wrong proves nothing.
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
            // The idle CPU after the run is not what this test checks.
            idle_window: Duration::ZERO,
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

/// Order-Status's range read of a customer's ORDER_CUSTOMER rows keeps, undecided, a
/// New-Order of that customer from inserting its newer order into the range (a phantom): the
/// insert meets the gap lock and the New-Order votes abort; once the Order-Status is decided
/// it goes through. With gap locks off (the mutant) the phantom gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_status_range_read_blocks_a_newer_order_of_its_customer() {
    let _serial = SERIAL.lock().await;
    let blocked = phantom_blocked(true).await;
    assert!(blocked, "a New-Order inserted into the range of an undecided Order-Status");
    let _ = phantom_blocked(false).await;
}

/// TPC-C call `kind` with `params` as transaction `seq` of node 0 (warehouse 1's primary, in
/// dc1), every access on that node.
fn sub_txn(topo: &Topology, hlc: &Hlc, seq: u64, kind: u32, params: Vec<u8>) -> SubTxn {
    let p = px::build(topo, kind, &params).unwrap();
    let node = NodeId(0);
    let local = (0..p.accesses().len()).map(|access| LocalAccess { access, node }).collect();
    SubTxn {
        txn: TxnId::new(node, seq),
        epoch: Epoch(1),
        coordinator: node,
        start: hlc.tick(SystemClock.now_ms()),
        participants: vec![DcId(0)],
        partitions: vec![PartitionId(0)],
        procedure: p,
        local,
    }
}

/// A commit timestamp above the vote's clock and every version it read.
fn cts_of(v: &Vote) -> Cts {
    let seen = v.items.iter().flat_map(|i| i.versions.iter().map(|(_, x)| x.cts())).max().unwrap_or(Cts(0));
    Cts(v.hlc.max(seen).0 + 1)
}

/// Delivery deletes its district's oldest NEW_ORDER row (clause 2.7.4.2): committed, the
/// record holds no row and its key has left the tree although the Delivery's own range read
/// locked it; the next Delivery's range read from the district's first key finds the next
/// order, and a Delivery planned on any other order aborts as stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_deletes_the_oldest_new_order_row_and_its_key() {
    use redt_bench::tpcc::procedures::{kind, STALE};
    use redt_bench::tpcc::schema::{self as sc, table};
    use redt_dc_executor::{AbortReason, Decision, Executor};

    let _serial = SERIAL.lock().await;
    let topo = topology();
    let cluster = EmbeddedCluster::start(topo.clone(), CoordinatorOptions::default()).await.unwrap();
    let scale = Scale::SMALL;
    let cfg = tpcc::loader::LoadConfig { warehouses: 1, scale, seed: 5, threads: 1 };
    tpcc::loader::load(&cluster, &cfg, &indicatif::ProgressBar::hidden()).unwrap();
    let mut pre = tpcc::loader::Preallocator::new(1, &scale, 4);
    pre.top_up(&topo, &cluster.dcs).unwrap();
    let node = NodeId(0);
    let dc = cluster.dcs[0].clone();
    let (w, d) = (1, 6);
    let read = |t, key| tpcc::loader::read_at(&topo, &cluster.dcs, node, t, key);
    let tree = dc.ordered.tree(dc.verbs.as_ref(), node, table::NEW_ORDER, 0, false).unwrap().unwrap();
    let in_tree = |o| tree.lookup(dc.verbs.as_ref(), sc::new_order_key(w, d, o)).unwrap().is_some();
    let params = |o| {
        let ov = read(table::ORDERS, sc::order_key(w, d, o)).expect("loaded");
        let (c, ol_cnt) = (sc::get(&ov[sc::o::C_ID as usize]) as u32, sc::get(&ov[sc::o::OL_CNT as usize]) as u32);
        px::DeliveryParams { w, d, carrier: 4, date: 1, o_id: o, c, ol_cnt }.encode()
    };
    let hlc = Arc::new(Hlc::new());
    let mut ex = Executor::new(dc.clone(), hlc.clone());
    let mut seq = 1u64 << 40;
    // Runs a Delivery of order `o`: committed when it votes commit; its abort text if not.
    let mut deliver = |o: u64| {
        seq += 1;
        let s = sub_txn(&topo, &hlc, seq, kind::DELIVERY, params(o));
        let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
        let decision = if v.is_commit() { Decision::Commit(cts_of(&v)) } else { Decision::Abort };
        ex.finish(s.txn, decision, &v.entries).unwrap();
        match v.abort {
            None => Ok(()),
            Some(AbortReason::User(why)) => Err(why),
            Some(other) => panic!("Delivery of order {o}: {other:?}"),
        }
    };
    let oldest = scale.delivered() as u64 + 1;
    assert_eq!(read(table::NEW_ORDER, sc::new_order_key(w, d, oldest)), Some(vec![sc::num(1)]));
    assert!(deliver(oldest + 1).unwrap_err().contains(STALE), "an order above the oldest");
    deliver(oldest).unwrap();
    let cells = read(table::NEW_ORDER, sc::new_order_key(w, d, oldest)).expect("the record stays");
    assert!(cells.iter().all(|c| c.iter().all(|&b| b == 0)), "the row is deleted: {cells:?}");
    assert!(!in_tree(oldest), "the delete took the key out of the tree");
    assert!(in_tree(oldest + 1));
    let carrier = read(table::ORDERS, sc::order_key(w, d, oldest)).expect("loaded")[sc::o::CARRIER_ID as usize].clone();
    assert_eq!(carrier, sc::num(4));
    assert!(deliver(oldest).unwrap_err().contains(STALE), "delivered twice");
    deliver(oldest + 1).unwrap();
    assert!(!in_tree(oldest + 1));
    cluster.shutdown();
}

/// Runs the Order-Status and the New-Order of one customer as sub-transactions on warehouse
/// 1's primary (in dc1), the first left undecided; whether the New-Order voted abort for a
/// lock conflict. With `gap_locks` off the New-Order's vote is asserted to commit (the
/// mechanism under test is what blocks it).
async fn phantom_blocked(gap_locks: bool) -> bool {
    use redt_bench::tpcc::procedures::kind;
    use redt_bench::tpcc::schema::{self as sc, table};
    use redt_dc_executor::{AbortReason, Decision, Executor};

    let topo = topology();
    let cluster = EmbeddedCluster::start(topo.clone(), CoordinatorOptions::default()).await.unwrap();
    let scale = Scale::SMALL;
    let cfg = tpcc::loader::LoadConfig { warehouses: 1, scale, seed: 3, threads: 1 };
    tpcc::loader::load(&cluster, &cfg, &indicatif::ProgressBar::hidden()).unwrap();
    let mut pre = tpcc::loader::Preallocator::new(1, &scale, 4);
    pre.top_up(&topo, &cluster.dcs).unwrap();
    let node = NodeId(0);
    let dc = cluster.dcs[0].clone();
    dc.ordered.set_gap_locks(gap_locks);
    let (w, d, c) = (1, 3, 7);
    let read = |t, key| tpcc::loader::read_primary(&topo, &cluster.dcs, t, key).expect("loaded");
    // The customer's last order, from the tree, and its line count.
    let tree = dc.ordered.tree(dc.verbs.as_ref(), node, table::ORDER_CUSTOMER, 0, false).unwrap().unwrap();
    let (from, to) = sc::order_customer_range(w, d, c);
    let first = tree.scan(dc.verbs.as_ref(), from, to, 1).unwrap()[0].0;
    let o_id = sc::order_of_customer_key(first);
    let ol_cnt = sc::get(&read(table::ORDERS, sc::order_key(w, d, o_id))[sc::o::OL_CNT as usize]) as u32;
    let next = sc::get(&read(table::DISTRICT, sc::district_key(w, d))[sc::d::NEXT_O_ID as usize]) as u64;

    let hlc = Arc::new(Hlc::new());
    let mut ex = Executor::new(dc.clone(), hlc.clone());
    let mut seq = 1u64 << 40;
    let mut sub = |kind: u32, params: Vec<u8>| {
        seq += 1;
        sub_txn(&topo, &hlc, seq, kind, params)
    };
    let os = sub(kind::ORDER_STATUS, px::OrderStatusParams { w, d, c, by_name: None, o_id, ol_cnt }.encode());
    let lines = (1..=5).map(|i| px::Line { i_id: i, supply_w: 1, qty: 1, dist_info: vec![] }).collect();
    let no_params = px::NewOrderParams { w, d, c, o_id: next, entry_d: 1, lines };
    let no = sub(kind::NEW_ORDER, no_params.encode());
    let vos = ex.execute(&os, SystemClock.now_ms()).unwrap();
    assert!(vos.is_commit(), "the Order-Status reads: {:?}", vos.abort);
    let vno = ex.execute(&no, SystemClock.now_ms()).unwrap();
    let blocked = matches!(vno.abort, Some(AbortReason::LockConflict { .. }));
    if !gap_locks {
        assert!(vno.is_commit(), "without gap locks nothing else blocks it: {:?}", vno.abort);
    }
    ex.finish(no.txn, Decision::Abort, &vno.entries).unwrap();
    ex.finish(os.txn, Decision::Abort, &vos.entries).unwrap();
    if gap_locks {
        // Decided, the range no longer holds the insert back.
        let again = sub(kind::NEW_ORDER, no_params.encode());
        let v = ex.execute(&again, SystemClock.now_ms()).unwrap();
        assert!(v.is_commit(), "after the Order-Status: {:?}", v.abort);
        ex.finish(again.txn, Decision::Abort, &v.entries).unwrap();
        // The aborted New-Orders gave their fresh ORDER_CUSTOMER record back: it left the
        // customer's range, and the Order-Status's range read (limit 1) finds the last order.
        let fresh = sc::order_customer_key(w, d, c, next);
        assert!(fresh < first);
        assert!(tree.lookup(dc.verbs.as_ref(), fresh).unwrap().is_none(), "the aborted insert's key left the tree");
        let os = sub(kind::ORDER_STATUS, px::OrderStatusParams { w, d, c, by_name: None, o_id, ol_cnt }.encode());
        let v = ex.execute(&os, SystemClock.now_ms()).unwrap();
        assert!(v.is_commit(), "Order-Status past the fresh record: {:?}", v.abort);
        ex.finish(os.txn, Decision::Abort, &v.entries).unwrap();
    }
    cluster.shutdown();
    blocked
}
