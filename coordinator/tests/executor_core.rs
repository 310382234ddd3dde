//! The executor core against a real in-process MemStore: repeated and late phase-1 messages
//! (duplicated or held back on the WAN) never take locks nobody releases (RedT §4.2,
//! DESIGN.md §2).

use redt_coordinator::call::kv_call;
use redt_coordinator::message::Execute;
use redt_coordinator::plan::Scope;
use redt_coordinator::ExecutorCore;
use redt_dc_executor::{DcHandle, Decision, Hlc, KvOp, Layout, LocalVerbs, Verbs};
use redt_proto::{DcId, NodeId, Topology, TxnId};
use std::sync::Arc;

/// One DC of `configs/local-fast.yaml` (its only node, node 0), formatted.
fn core() -> (ExecutorCore, Arc<DcHandle>, Arc<Topology>) {
    let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
    let mut topology = Topology::load(std::path::Path::new(&path)).expect("config loads");
    topology.memstore.size_bytes = 4 << 20;
    topology.memstore.index_bytes = 512 << 10;
    topology.memstore.ring_bytes = 256 << 10;
    let topology = Arc::new(topology);
    let layout = Layout::from_config(&topology.memstore);
    let node = NodeId(0);
    let local = Arc::new(LocalVerbs::in_process([node], layout.size));
    layout.format(local.region(node).expect("region"));
    let verbs: Arc<dyn Verbs> = local;
    let dc = Arc::new(DcHandle::new(&topology, verbs));
    let core = ExecutorCore::new(topology.clone(), node, dc.clone(), Arc::new(Hlc::new()));
    (core, dc, topology)
}

fn args(topology: &Topology, txn: TxnId, ops: &[KvOp]) -> Execute {
    let kv = topology.table_by_name("kv").expect("kv table").id;
    Execute {
        txn,
        coordinator: NodeId(1),
        participants: vec![DcId(0)],
        call: kv_call(kv, ops),
        scope: Scope::Dc,
        replicate: false,
        start: redt_proto::Cts(0),
        deadline_ms: 0,
        partitions: vec![],
    }
}

/// Found by the simulation (issue 11): a phase 1 that voted abort and then arrives again (a
/// duplicate held back past the first) must get the same abort vote. Before the fix it ran
/// again, took its locks once the conflict was gone and voted commit, while the coordinator,
/// having counted the abort, sent this DC no decision: the locks stayed for good.
#[test]
fn a_repeated_phase1_after_an_abort_vote_votes_abort_again_and_locks_nothing() {
    let (mut core, dc, topology) = core();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let key = 4; // partition 0: a replica on node 0
    let t1 = TxnId::new(NodeId(1), 1);
    let t2 = TxnId::new(NodeId(2), 1);
    let v1 = core.execute(&args(&topology, t1, &[KvOp::Add(key, 1)]), 1).expect("phase 1 runs");
    assert!(v1.is_commit(), "{:?}", v1.abort);
    let v2 = core.execute(&args(&topology, t2, &[KvOp::Add(key, 2)]), 1).expect("phase 1 runs");
    assert!(!v2.is_commit(), "the lock held by t1 makes t2 vote abort (No-Wait)");
    core.decide(t1, Decision::Abort, &v1.entries).expect("t1 aborts");
    // The duplicate of t2's phase 1 arrives now that the key is free.
    let again = core.execute(&args(&topology, t2, &[KvOp::Add(key, 2)]), 2).expect("phase 1 runs");
    assert!(!again.is_commit(), "the repeated phase 1 repeats the abort vote");
    assert!(again.entries.is_empty());
    let node = NodeId(0);
    let lock = dc.read_record(node, kv, key).expect("reads").map(|r| r.lock).unwrap_or(0);
    assert_eq!(lock, 0, "no lock left on key {key}");
}

/// A repeated phase 1 of a transaction that voted commit gets the same vote (the same redo
/// entries), and takes nothing twice.
#[test]
fn a_repeated_phase1_after_a_commit_vote_gets_the_same_vote() {
    let (mut core, dc, topology) = core();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let t = TxnId::new(NodeId(1), 7);
    let a = args(&topology, t, &[KvOp::Add(4, 1)]);
    let first = core.execute(&a, 1).expect("phase 1 runs");
    let second = core.execute(&a, 2).expect("phase 1 runs");
    assert!(first.is_commit());
    assert_eq!(first, second);
    core.decide(t, Decision::Abort, &first.entries).expect("aborts");
    assert_eq!(dc.read_record(NodeId(0), kv, 4).expect("reads").map(|r| r.lock).unwrap_or(0), 0);
}
