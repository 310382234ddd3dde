//! The executor core against a real in-process MemStore: repeated and late phase-1 messages
//! (duplicated or held back on the WAN) never take locks nobody releases (RedT §4.2,
//! docs/design.md §2).

use redt_coordinator::{Epochs, ExecutorCore};
use redt_dc_executor::{DcHandle, Decision, Hlc, KvOp, Layout, LocalVerbs, Verbs};
use redt_proto::{DcId, NodeId, Placement, Topology, TxnId};
use redt_protocol::call::kv_call;
use redt_protocol::message::Execute;
use redt_protocol::outcome::FindingKind;
use redt_protocol::plan::Scope;
use std::sync::Arc;

/// One DC of `configs/local-fast.yaml` (its only node, node 0), formatted.
fn core() -> (ExecutorCore, Arc<DcHandle>, Arc<Topology>) {
    let (core, dc, topology, _) = core_with_region();
    (core, dc, topology)
}

/// [`core`], with node 0's MemStore region (for its replay task).
fn core_with_region() -> (ExecutorCore, Arc<DcHandle>, Arc<Topology>, Arc<redt_dc_executor::Region>) {
    let (core, dc, topology, region, _) = core_with_epochs();
    (core, dc, topology, region)
}

/// [`core_with_region`], with the node's placements (to adopt a new epoch).
#[allow(clippy::type_complexity)]
fn core_with_epochs() -> (ExecutorCore, Arc<DcHandle>, Arc<Topology>, Arc<redt_dc_executor::Region>, Arc<Epochs>) {
    core_with_limits(redt_proto::LimitsConfig::default())
}

/// [`core_with_epochs`] under the topology's `limits:` set to `limits`.
#[allow(clippy::type_complexity)]
fn core_with_limits(
    limits: redt_proto::LimitsConfig,
) -> (ExecutorCore, Arc<DcHandle>, Arc<Topology>, Arc<redt_dc_executor::Region>, Arc<Epochs>) {
    let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
    let mut topology = Topology::load(std::path::Path::new(&path)).expect("config loads");
    topology.limits = limits;
    topology.memstore.size_bytes = 4 << 20;
    topology.memstore.index_bytes = 512 << 10;
    topology.memstore.ring_bytes = 256 << 10;
    let topology = Arc::new(topology);
    let layout = Layout::from_config(&topology.memstore);
    let node = NodeId(0);
    let local = Arc::new(LocalVerbs::in_process([node], layout.size));
    let region = local.region(node).expect("region").clone();
    layout.format(&region);
    let verbs: Arc<dyn Verbs> = local;
    let dc = Arc::new(DcHandle::new(&topology, verbs));
    let epochs = Arc::new(Epochs::new(Placement::initial(topology.clone())));
    let core = ExecutorCore::new(epochs.clone(), node, dc.clone(), Arc::new(Hlc::new()));
    (core, dc, topology, region, epochs)
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
        epoch: topology.epoch,
        share: 0,
        carried: Vec::new(),
    }
}

/// Found by the simulation: a phase 1 that voted abort and then arrives again (a
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

/// Found by the simulation (seed 1313 of a 2000-seed soak): a catch-up replica that got the
/// decision, crashed, and then got the redo (retried by its source) kept it `Logged` for good,
/// its decision lost with the crash. A catch-up accept now carries the decision: the redo is
/// written `Committed` at once, and a copy written twice changes nothing.
#[test]
fn a_decided_accept_is_written_committed() {
    use redt_dc_executor::{ReplicaChange, ReplicaOrigin};
    use redt_proto::Cts;
    use redt_protocol::message::{Accept, Reply, Request};
    let (mut core, dc, topology) = core();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let node = NodeId(0);
    let txn = TxnId::new(NodeId(3), 9);
    let cts = Cts(5_000_000);
    let accept = Request::Accept(Accept {
        origin: ReplicaOrigin { txn, epoch: topology.epoch, coordinator: NodeId(3), participants: vec![DcId(0)] },
        changes: vec![ReplicaChange { table: kv, key: 4, cell: 0, value: vec![7; 8], seen: 0 }],
        decided: Some(Decision::Commit(cts)),
        behind: false,
    });
    for attempt in 0..2 {
        let handled = core.handle(NodeId(2), accept.clone(), 1);
        assert_eq!(handled.reply, Reply::Accepted(true), "attempt {attempt}");
    }
    let layout = dc.layout;
    let unfinished = redt_dc_executor::unfinished_entries(dc.verbs.as_ref(), node, &layout).expect("reads the ring");
    assert!(unfinished.is_empty(), "nothing waits for a decision: {unfinished:?}");
    let entries = redt_dc_executor::ring_entries(dc.verbs.as_ref(), node, &layout).expect("reads the ring");
    let ours: Vec<_> = entries.iter().filter(|(_, _, e)| e.txn == txn).collect();
    assert_eq!(ours.len(), 2, "a retried decided accept writes a second copy");
    for (_, _, e) in ours {
        assert_eq!((e.status, e.cts), (redt_dc_executor::EntryStatus::Committed, cts));
    }
}

/// Found by the simulation (seed 1465 of a 700-seed soak, append on default.yaml): a phase 1
/// repeated after its executor restarted wrote a second entry. The first decision finished the
/// second entry (the one the restarted node remembered); the next decision, naming the first
/// entry, was taken for a repeat and touched nothing, so the first entry kept its lock for good.
#[test]
fn a_repeated_decision_still_finishes_the_entry_it_names() {
    let (mut core, dc, topology) = core();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let t = TxnId::new(NodeId(1), 3);
    // A read: its shared lock lets the repeated phase 1 lock again.
    let a = args(&topology, t, &[KvOp::Read(4)]);
    let before = core.execute(&a, 1).expect("phase 1 runs");
    assert!(before.is_commit());
    // The node restarts: memory is lost, the MemStore is not; the phase 1 arrives again.
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        NodeId(0),
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    let after = core.execute(&a, 2).expect("phase 1 runs again");
    assert!(after.is_commit() && after.entries != before.entries, "a second entry: {after:?}");
    core.decide(t, Decision::Abort, &[]).expect("the decision with no entries named aborts the remembered one");
    core.decide(t, Decision::Abort, &before.entries).expect("the decision naming the first entry aborts it");
    let layout = dc.layout;
    let left = redt_dc_executor::unfinished_entries(dc.verbs.as_ref(), NodeId(0), &layout).expect("reads the ring");
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(dc.read_record(NodeId(0), kv, 4).expect("reads").map(|r| r.lock).unwrap_or(0), 0);
}

/// A PREPARE answers an applied decision, not the vote of a second entry a phase 1 repeated
/// after a restart left beside it: that vote would hide the decision from the recoverer.
#[test]
fn a_prepare_answers_the_applied_decision_over_a_repeated_phase1() {
    use redt_dc_executor::Promise;
    use redt_proto::{Ballot, Cts};
    use redt_protocol::message::{RecoveryPrepare, Reply, Request};
    let (mut core, dc, topology) = core();
    let t = TxnId::new(NodeId(1), 11);
    let mut a = args(&topology, t, &[KvOp::Read(4)]);
    a.start = Cts(1 << 20);
    a.partitions = vec![redt_proto::PartitionId(0)]; // key 4: a replica on node 0
    let first = core.execute(&a, 1).expect("phase 1 runs");
    assert!(first.is_commit());
    let cts = Cts(5_000_000);
    core.decide(t, Decision::Commit(cts), &first.entries).expect("commits");
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        NodeId(0),
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    let again = core.execute(&a, 2).expect("phase 1 runs again");
    assert!(again.is_commit() && again.entries != first.entries, "a second entry: {again:?}");
    let partitions = a.partitions.clone();
    let prepare = Request::RecoveryPrepare(RecoveryPrepare {
        txn: t,
        ballot: Ballot(1 << 10),
        start: a.start,
        partitions,
        epoch: topology.epoch,
        coordinator: NodeId(1),
        participants: vec![DcId(0)],
    });
    match core.handle(NodeId(2), prepare, 3).reply {
        Reply::Promises(p) => {
            let ours: Vec<_> = p.iter().filter(|p| p.node == NodeId(0)).collect();
            assert_eq!(ours.len(), 1, "{p:?}");
            assert_eq!(ours[0].promise, Promise::Applied(Decision::Commit(cts)));
        }
        other => panic!("promises expected, got {other:?}"),
    }
}

/// A `RecoveryPrepare` of `t` at `ballot` for partition 0 on DC 0, coordinated by node 1 (the
/// recovery tests' one-DC transaction).
fn recovery_prepare(t: TxnId, ballot: u32, topology: &redt_proto::Topology) -> redt_protocol::message::Request {
    use redt_protocol::message::{RecoveryPrepare, Request};
    Request::RecoveryPrepare(RecoveryPrepare {
        txn: t,
        ballot: redt_proto::Ballot(ballot),
        start: redt_proto::Cts(1 << 20),
        partitions: vec![redt_proto::PartitionId(0)],
        epoch: topology.epoch,
        coordinator: NodeId(1),
        participants: vec![DcId(0)],
    })
}

/// Fills node 0's ring: every slot reserved, none released.
fn fill_ring(dc: &DcHandle) {
    let slots = dc.layout.ring_slots();
    dc.verbs.fetch_and_add(NodeId(0), redt_proto::Offset(dc.layout.ring_off + 8), slots).expect("FAA on the tail");
}

/// Releases every slot [`fill_ring`] reserved, as replay would: the ring has room again.
fn drain_ring(dc: &DcHandle) {
    let slots = dc.layout.ring_slots();
    dc.verbs.write(NodeId(0), redt_proto::Offset(dc.layout.ring_off), &slots.to_le_bytes()).expect("WRITE of the head");
}

/// Node 0's promise in a reply to [`recovery_prepare`].
fn promise(reply: redt_protocol::message::Reply) -> redt_dc_executor::Promise {
    match reply {
        redt_protocol::message::Reply::Promises(p) => {
            p.into_iter().find(|p| p.node == NodeId(0)).expect("node 0 answers").promise
        }
        other => panic!("promises expected, got {other:?}"),
    }
}

/// A PREPARE at a replica that holds no entry of the transaction writes a fence entry there
/// (docs/design.md §2, recovery): it promises the ballot durably (a lower ballot is refused, even
/// by a new process over the same MemStore), it holds a recorded decision that the next
/// PREPARE reports, and once its decision is applied the replica answers `NoVote` without
/// writing a second one.
#[test]
fn a_prepare_without_an_entry_writes_one_fence_entry_that_holds_a_record() {
    use redt_dc_executor::{EntryStatus, Promise, VoteCode};
    use redt_proto::{Ballot, Cts};
    use redt_protocol::message::{Decide, DecideRole, Record, Reply, Request};
    let (mut core, dc, topology) = core();
    let t = TxnId::new(NodeId(1), 41);
    let prepare = |ballot: u32| recovery_prepare(t, ballot, &topology);
    let fence = match promise(core.handle(NodeId(2), prepare(2 << 10), 1).reply) {
        Promise::Entry { entry, vote, recorded, redo } => {
            assert_eq!((vote, recorded), (VoteCode::Abort, None));
            assert!(redo.locks.is_empty() && redo.changes.is_empty(), "{redo:?}");
            assert_eq!((redo.coordinator, &redo.participants[..]), (NodeId(1), &[DcId(0)][..]));
            entry
        }
        other => panic!("a fence entry expected, got {other:?}"),
    };
    // The promise is in the MemStore: a new process refuses a lower ballot.
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        NodeId(0),
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    assert_eq!(
        promise(core.handle(NodeId(2), prepare(1 << 10), 2).reply),
        Promise::Refused { promised: Ballot(2 << 10) }
    );
    let cts = Cts(7_000_000);
    let record = Request::Record(Record {
        txn: t,
        ballot: Ballot(2 << 10),
        decision: Decision::Commit(cts),
        entries: vec![fence],
    });
    assert_eq!(core.handle(NodeId(2), record, 3).reply, Reply::Recorded(true));
    match promise(core.handle(NodeId(2), prepare(3 << 10), 4).reply) {
        Promise::Entry { entry, recorded, .. } => {
            assert_eq!(entry, fence, "the same entry, not a second one");
            assert_eq!(recorded, Some((VoteCode::Commit, Ballot(2 << 10))));
        }
        other => panic!("the fence entry expected, got {other:?}"),
    }
    // Its DC was behind (it never voted): the recoverer aborts its own entry.
    let decide = Request::Decide(Decide {
        txn: t,
        ballot: Ballot(3 << 10),
        decision: Decision::Abort,
        entries: vec![fence],
        role: DecideRole::Executor,
        catch_up: vec![],
    });
    assert!(matches!(core.handle(NodeId(2), decide, 5).reply, Reply::Decided(_)));
    assert_eq!(promise(core.handle(NodeId(2), prepare(4 << 10), 6).reply), Promise::NoVote);
    let entries = redt_dc_executor::ring_entries(dc.verbs.as_ref(), NodeId(0), &dc.layout).expect("reads the ring");
    let ours: Vec<_> = entries.iter().filter(|(_, _, e)| e.txn == t).map(|(_, _, e)| e.status).collect();
    assert_eq!(ours, vec![EntryStatus::Aborted], "one fence entry, finished");
}

/// A RECORD replaces a decision recorded at a lower ballot, as a Paxos acceptor does
/// (docs/design.md, "Recovery"), and is refused below the promised ballot; the mutant that
/// keeps the first recorded decision (`ExecutorMutations::first_record_stays`) refuses the
/// higher ballot's commit, which left sim seed 50339 undecided.
#[test]
fn a_higher_ballot_record_replaces_a_lower_ones_decision() {
    use redt_dc_executor::{EntryRef, Promise, VoteCode};
    use redt_proto::{Ballot, Cts};
    use redt_protocol::executor_core::ExecutorMutations;
    use redt_protocol::message::{Record, Reply, Request};
    for mutant in [false, true] {
        let (core, _dc, topology) = core();
        let mut core = core.with_mutations(ExecutorMutations { first_record_stays: mutant, ..Default::default() });
        let t = TxnId::new(NodeId(1), 43);
        let prepare = |ballot: u32| recovery_prepare(t, ballot, &topology);
        let record = |ballot: u32, decision: Decision, entry: EntryRef| {
            Request::Record(Record { txn: t, ballot: Ballot(ballot), decision, entries: vec![entry] })
        };
        let fence = match promise(core.handle(NodeId(2), prepare(1 << 10), 1).reply) {
            Promise::Entry { entry, .. } => entry,
            other => panic!("a fence entry expected, got {other:?}"),
        };
        assert_eq!(core.handle(NodeId(2), record(1 << 10, Decision::Abort, fence), 2).reply, Reply::Recorded(true));
        assert!(matches!(promise(core.handle(NodeId(2), prepare(2 << 10), 3).reply), Promise::Entry { .. }));
        let commit = core.handle(NodeId(2), record(2 << 10, Decision::Commit(Cts(9_000_000)), fence), 4).reply;
        let expected = if mutant { (VoteCode::Abort, Ballot(1 << 10)) } else { (VoteCode::Commit, Ballot(2 << 10)) };
        assert_eq!(commit, Reply::Recorded(!mutant), "mutant {mutant}");
        match promise(core.handle(NodeId(2), prepare(3 << 10), 5).reply) {
            Promise::Entry { recorded, .. } => assert_eq!(recorded, Some(expected), "mutant {mutant}"),
            other => panic!("the fence entry expected, got {other:?}"),
        }
        // Below the promised ballot a RECORD changes nothing: refused, or (the mutant's word
        // still holding the abort) answered as already recorded.
        let late = core.handle(NodeId(2), record(2 << 10, Decision::Abort, fence), 6).reply;
        assert_eq!(late, Reply::Recorded(mutant), "mutant {mutant}");
        match promise(core.handle(NodeId(2), prepare(4 << 10), 7).reply) {
            Promise::Entry { recorded, .. } => assert_eq!(recorded, Some(expected), "mutant {mutant}"),
            other => panic!("the fence entry expected, got {other:?}"),
        }
    }
}

/// A replica whose ring has no room for a fence entry answers `NoVote` and keeps the ballot
/// it so promised: a lower ballot is refused, and once the ring has room a PREPARE of a higher
/// ballot writes the fence entry after all, so the replica can hold a record (sim seed 40186:
/// without it a partition whose other replicas were removed never recorded its decision at a
/// majority). With `no_fence_after_full_ring` the replica answers `NoVote` for good.
#[test]
fn a_replica_whose_ring_was_full_gets_its_fence_entry_later() {
    use redt_dc_executor::{Promise, VoteCode};
    use redt_proto::Ballot;
    use redt_protocol::executor_core::ExecutorMutations;
    for mutant in [false, true] {
        let (core, dc, topology) = core();
        let mut core = core
            .with_ring_patience(std::time::Duration::ZERO)
            .with_mutations(ExecutorMutations { no_fence_after_full_ring: mutant, ..Default::default() });
        let t = TxnId::new(NodeId(1), 43);
        let prepare = |ballot: u32| recovery_prepare(t, ballot, &topology);
        fill_ring(&dc);
        assert_eq!(promise(core.handle(NodeId(2), prepare(2 << 10), 1).reply), Promise::NoVote);
        assert_eq!(
            promise(core.handle(NodeId(2), prepare(1 << 10), 2).reply),
            Promise::Refused { promised: Ballot(2 << 10) },
            "mutant {mutant}: a lower ballot is refused"
        );
        drain_ring(&dc);
        match promise(core.handle(NodeId(2), prepare(3 << 10), 3).reply) {
            Promise::Entry { vote, recorded, redo, .. } if !mutant => {
                assert_eq!((vote, recorded), (VoteCode::Abort, None));
                assert!(redo.locks.is_empty() && redo.changes.is_empty(), "{redo:?}");
            }
            Promise::NoVote if mutant => {}
            other => panic!("mutant {mutant}: unexpected {other:?}"),
        }
    }
}

/// The ballot a replica promised by answering `NoVote` for a full ring lives in its node's
/// promise table, not in the answering executor's memory: a restarted executor (or another
/// executor of the DC, which PREPAREs the same ring) refuses a lower ballot once the ring has
/// room. With `ExecutorMutations::no_promise_table` the lower ballot gets a fence entry that
/// then accepts its RECORD, after the higher ballot was promised: two recoverers could each
/// count this replica toward a different decision.
#[test]
fn a_full_rings_promise_outlives_the_executor_that_gave_it() {
    use redt_dc_executor::Promise;
    use redt_proto::{Ballot, Cts};
    use redt_protocol::executor_core::ExecutorMutations;
    use redt_protocol::message::{Record, Reply, Request};
    for mutant in [false, true] {
        let (core, dc, topology) = core();
        let mutations = ExecutorMutations { no_promise_table: mutant, ..Default::default() };
        let mut first = core.with_ring_patience(std::time::Duration::ZERO).with_mutations(mutations);
        let t = TxnId::new(NodeId(1), 44);
        let prepare = |ballot: u32| recovery_prepare(t, ballot, &topology);
        fill_ring(&dc);
        assert_eq!(promise(first.handle(NodeId(2), prepare(2 << 10), 1).reply), Promise::NoVote);
        // Replay released every slot; the executor that answered is gone (a restart, or the
        // next PREPARE reaches another executor of the DC).
        drain_ring(&dc);
        drop(first);
        let mut other = ExecutorCore::new(
            Arc::new(Epochs::new(Placement::initial(topology.clone()))),
            NodeId(0),
            dc.clone(),
            Arc::new(Hlc::new()),
        )
        .with_mutations(mutations);
        let lower = promise(other.handle(NodeId(2), prepare(1 << 10), 2).reply);
        if !mutant {
            assert_eq!(lower, Promise::Refused { promised: Ballot(2 << 10) });
            continue;
        }
        let Promise::Entry { entry, .. } = lower else { panic!("mutant: a fence entry expected, got {lower:?}") };
        let record = Request::Record(Record {
            txn: t,
            ballot: Ballot(1 << 10),
            decision: Decision::Commit(Cts(8_000_000)),
            entries: vec![entry],
        });
        assert_eq!(other.handle(NodeId(2), record, 3).reply, Reply::Recorded(true), "mutant: the lower ballot records");
    }
}

/// A replica whose ring had no room for a fence entry answers `NoVote` and keeps its promise in
/// the transaction's row of its promise table; no PREPARE comes to write the fence entry once
/// the transaction is decided, so a recoverer's decision, which names no entry there, frees the
/// row for the next transaction hashed to it. With
/// `ExecutorMutations::decision_keeps_promise_rows` the row stays held.
#[test]
fn a_recoverers_decision_frees_the_row_a_full_ring_kept() {
    use redt_dc_executor::promise_table;
    use redt_dc_executor::Promise;
    use redt_proto::Ballot;
    use redt_protocol::executor_core::ExecutorMutations;
    use redt_protocol::message::{Decide, DecideRole, Reply, Request};
    for mutant in [false, true] {
        let (core, dc, topology) = core();
        let mutations = ExecutorMutations { decision_keeps_promise_rows: mutant, ..Default::default() };
        let mut core = core.with_ring_patience(std::time::Duration::ZERO).with_mutations(mutations);
        let t = TxnId::new(NodeId(1), 46);
        fill_ring(&dc);
        assert_eq!(promise(core.handle(NodeId(2), recovery_prepare(t, 2 << 10, &topology), 1).reply), Promise::NoVote);
        let held = || promise_table::promised(dc.verbs.as_ref(), NodeId(0), &dc.layout, t).expect("reads the row");
        assert_eq!(held(), Some(Ballot(2 << 10)));
        let decide = Request::Decide(Decide {
            txn: t,
            ballot: Ballot(2 << 10),
            decision: Decision::Abort,
            entries: Vec::new(),
            role: DecideRole::Executor,
            catch_up: Vec::new(),
        });
        assert_eq!(core.handle(NodeId(2), decide, 2).reply, Reply::Decided(Default::default()));
        if mutant {
            assert_eq!(held(), Some(Ballot(2 << 10)), "mutant: the row stays held");
            continue;
        }
        assert_eq!(held(), None, "the decision freed the row");
        // The freed row keeps its ballot: a lower one is still refused.
        let ballot = promise_table::ballot(dc.verbs.as_ref(), NodeId(0), &dc.layout, t).expect("reads the row");
        assert_eq!(ballot, Some(Ballot(2 << 10)));
        let lower = promise(core.handle(NodeId(2), recovery_prepare(t, 1 << 10, &topology), 3).reply);
        assert_eq!(lower, Promise::Refused { promised: Ballot(2 << 10) });
    }
}

/// Two executors of one DC PREPARE the same replica at once and neither finds an entry: the
/// one whose ballot is lower writes its fence entry, but reads the promise table after the
/// write and finds the higher ballot the other raised meanwhile, so it answers `Refused` and
/// promises that ballot in its fence entry, where the lower ballot's RECORD is then refused.
/// With `ExecutorMutations::no_promise_table` it answers the fence entry at its own ballot.
#[test]
fn of_two_executors_fencing_one_replica_at_once_the_lower_ballot_is_refused() {
    use redt_dc_executor::Promise;
    use redt_proto::{Ballot, Cts};
    use redt_protocol::executor_core::ExecutorMutations;
    use redt_protocol::message::{Record, Reply, Request};
    for mutant in [false, true] {
        let (_core, dc, topology) = core();
        let t = TxnId::new(NodeId(1), 45);
        // Raise the row right before the first batch that WRITEs (the fence entry): a second
        // executor of the DC whose PREPARE of a higher ballot raised the row after this one's
        // second ring scan.
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let trigger = armed.clone();
        let layout = dc.layout;
        let spy = redt_dc_executor::verbs::BeforeBatch::new(
            dc.verbs.clone(),
            move |inner: &dyn Verbs, node, batch: &redt_dc_executor::verbs::DoorbellBatch| {
                use redt_dc_executor::promise_table::{raise, Raise};
                use redt_dc_executor::verbs::WorkRequest;
                let writes = batch.requests().iter().any(|r| matches!(r, WorkRequest::Write { .. }));
                if writes && trigger.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    let raised = raise(inner, node, &layout, t, Ballot(2 << 10))
                        .map_err(|e| redt_dc_executor::verbs::Error::Backend(e.to_string()))?;
                    assert!(matches!(raised, Raise::Promised { .. }), "{raised:?}");
                }
                Ok(())
            },
        );
        let spied = Arc::new(DcHandle::new(&topology, Arc::new(spy)));
        let mut lower = ExecutorCore::new(
            Arc::new(Epochs::new(Placement::initial(topology.clone()))),
            NodeId(0),
            spied,
            Arc::new(Hlc::new()),
        )
        .with_mutations(ExecutorMutations { no_promise_table: mutant, ..Default::default() });
        let answer = promise(lower.handle(NodeId(2), recovery_prepare(t, 1 << 10, &topology), 1).reply);
        assert!(!armed.load(std::sync::atomic::Ordering::SeqCst), "the fence entry was written");
        let entries = redt_dc_executor::ring_entries(dc.verbs.as_ref(), NodeId(0), &dc.layout).expect("reads the ring");
        let fence = entries.iter().find(|(_, _, e)| e.txn == t).map(|&(index, slots, _)| redt_dc_executor::EntryRef {
            node: NodeId(0),
            index,
            slots,
        });
        let fence = fence.expect("a fence entry in the ring");
        let record = Request::Record(Record {
            txn: t,
            ballot: Ballot(1 << 10),
            decision: Decision::Commit(Cts(8_000_000)),
            entries: vec![fence],
        });
        let recorded = lower.handle(NodeId(2), record, 2).reply;
        if mutant {
            assert!(matches!(answer, Promise::Entry { .. }), "mutant: {answer:?}");
            assert_eq!(recorded, Reply::Recorded(true), "mutant: the lower ballot records");
        } else {
            assert_eq!(answer, Promise::Refused { promised: Ballot(2 << 10) });
            assert_eq!(recorded, Reply::Recorded(false), "the fence entry holds the higher promise");
        }
    }
}

/// A secondary that restarted between a primary's accept and its decision settles the redo
/// its previous life accepted (found in the ring), instead of leaving it `Logged` for good.
#[test]
fn a_decision_settles_redo_accepted_before_a_restart() {
    use redt_dc_executor::{EntryStatus, ReplicaChange, ReplicaOrigin};
    use redt_proto::{Ballot, Cts};
    use redt_protocol::message::{Accept, Decide, DecideRole, Reply, Request};
    let (mut core, dc, topology) = core();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let txn = TxnId::new(NodeId(3), 21);
    let accept = Request::Accept(Accept {
        origin: ReplicaOrigin { txn, epoch: topology.epoch, coordinator: NodeId(3), participants: vec![DcId(0)] },
        changes: vec![ReplicaChange { table: kv, key: 4, cell: 0, value: vec![9; 8], seen: 0 }],
        decided: None,
        behind: false,
    });
    assert_eq!(core.handle(NodeId(2), accept, 1).reply, Reply::Accepted(true));
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        NodeId(0),
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    let cts = Cts(6_000_000);
    let decide = Request::Decide(Decide {
        txn,
        ballot: Ballot(0),
        decision: Decision::Commit(cts),
        entries: vec![],
        role: DecideRole::Secondary,
        catch_up: vec![],
    });
    assert!(matches!(core.handle(NodeId(2), decide, 2).reply, Reply::Decided(_)));
    let layout = dc.layout;
    let entries = redt_dc_executor::ring_entries(dc.verbs.as_ref(), NodeId(0), &layout).expect("reads the ring");
    let ours: Vec<_> = entries.iter().filter(|(_, _, e)| e.txn == txn).map(|(_, _, e)| (e.status, e.cts)).collect();
    assert_eq!(ours, vec![(EntryStatus::Committed, cts)]);
}

/// An abort record that names no entry, reaching an executor that restarted after voting
/// commit, records the abort in the ring's entry: answering "recorded" without touching it
/// would let the coordinator count this DC toward an abort majority that a recoverer, reading
/// the commit vote, does not see.
#[test]
fn an_abort_record_after_a_restart_lands_in_the_rings_entry() {
    use redt_dc_executor::{Promise, VoteCode};
    use redt_proto::{Ballot, Cts};
    use redt_protocol::message::{RecoveryPrepare, Reply, Request};
    let (mut core, dc, topology) = core();
    let t = TxnId::new(NodeId(1), 31);
    let mut a = args(&topology, t, &[KvOp::Add(4, 1)]);
    a.start = Cts(1 << 20);
    a.partitions = vec![redt_proto::PartitionId(0)];
    let vote = core.execute(&a, 1).expect("phase 1 runs");
    assert!(vote.is_commit());
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        NodeId(0),
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    assert!(core.record(t, Decision::Abort, Ballot(0), &[]).expect("records"));
    let prepare = Request::RecoveryPrepare(RecoveryPrepare {
        txn: t,
        ballot: Ballot(1 << 10),
        start: a.start,
        partitions: a.partitions,
        epoch: topology.epoch,
        coordinator: NodeId(1),
        participants: vec![DcId(0)],
    });
    match core.handle(NodeId(2), prepare, 3).reply {
        Reply::Promises(p) => match &p[0].promise {
            Promise::Entry { vote, recorded, .. } => {
                assert_eq!(*vote, VoteCode::Commit);
                assert_eq!(*recorded, Some((VoteCode::Abort, Ballot(0))), "the abort is in the ring");
            }
            other => panic!("the entry expected, got {other:?}"),
        },
        other => panic!("promises expected, got {other:?}"),
    }
}

/// A coordinator cut off from the DCs past the recovery timeout records its timeout's abort
/// (ballot 0) once healed; a DC where a recoverer has meanwhile committed the transaction, and
/// which the coordinator names no entry of (it never got that DC's vote), must refuse the
/// record: answering "recorded" would count it toward an abort majority, and the coordinator
/// would acknowledge an abort of a committed transaction (seen through the gRPC API: an
/// append a client was told failed, visible). With the record counted (the mutant), it is.
#[test]
fn an_abort_record_after_a_recoverers_commit_is_refused() {
    use redt_proto::{Ballot, Cts};
    use redt_protocol::executor_core::ExecutorMutations;
    for mutant in [false, true] {
        let (core, _dc, topology) = core();
        let mut core =
            core.with_mutations(ExecutorMutations { record_after_decision_counts: mutant, ..Default::default() });
        let t = TxnId::new(NodeId(1), 41);
        let mut a = args(&topology, t, &[KvOp::Add(4, 1)]);
        a.start = Cts(1 << 20);
        a.partitions = vec![redt_proto::PartitionId(0)];
        assert!(core.execute(&a, 1).expect("phase 1 runs").is_commit());
        // The recoverer's decision: commit, applied here.
        core.decide(t, Decision::Commit(Cts(1 << 21)), &[]).expect("applies the commit");
        let recorded = core.record(t, Decision::Abort, Ballot(0), &[]).expect("answers");
        assert_eq!(recorded, mutant, "a DC that applied a commit holds no abort (mutant {mutant})");
        // A DC that voted abort still holds the abort after the decision.
        let t2 = TxnId::new(NodeId(1), 42);
        let mut b = args(&topology, t2, &[KvOp::Add(4, 1)]);
        b.start = Cts(1 << 20);
        b.partitions = vec![redt_proto::PartitionId(0)];
        b.epoch = redt_proto::Epoch(topology.epoch.0 + 7); // another placement's: fenced, votes abort
        assert!(!core.execute(&b, 2).expect("phase 1 answers").is_commit());
        core.decide(t2, Decision::Abort, &[]).expect("applies the abort");
        assert!(core.record(t2, Decision::Abort, Ballot(0), &[]).expect("answers"));
    }
}

/// docs/design.md §2, "a catch-up outlives its source" (sim-20dc seed 2012): a catch-up source
/// decides its redo with a catch-up mask, so after its process restarts (a new core over the
/// same MemStore, nothing in memory) the ring still says what it owes: replay applies the entry
/// but keeps the ring's head before it, the restarted core ships the same values again (to
/// every replica of the partition outside its DC, the left-behind one among them), and only
/// clearing the mask lets the head pass. Fails with the mask off (the bug before).
#[test]
fn a_catch_up_owed_survives_a_restart_and_is_shipped_again() {
    use redt_dc_executor::{apply_committed, EntryStatus, Replayer};
    use redt_proto::{Cts, PartitionId};
    use redt_protocol::catch_up::CatchUpDebt;
    use redt_protocol::message::{Accept, CatchUpTarget, Request};
    let (mut core, dc, topology, region) = core_with_region();
    let node = NodeId(0);
    let key = 4; // partition 0: replicas on nodes 0, 1, 2 (DCs 0, 1, 2)
    let t = TxnId::new(NodeId(1), 11);
    let mut a = args(&topology, t, &[KvOp::Add(key, 5)]);
    a.partitions = vec![PartitionId(0)];
    let vote = core.execute(&a, 1).expect("phase 1 runs");
    assert!(vote.is_commit(), "{:?}", vote.abort);
    let cts = Cts(9_000_000);
    // DC 2 was left behind: this DC ships partition 0 to node 2.
    let targets = [CatchUpTarget { partition: PartitionId(0), nodes: vec![NodeId(2)], cts }];
    let debt = core
        .decide_with_catch_up(t, Decision::Commit(cts), &vote.entries, &targets, true)
        .expect("decides")
        .expect("a source owes a catch-up");
    let CatchUpDebt { txn, ship, owed } = debt;
    assert_eq!(txn, t);
    assert_eq!(ship.len(), 1, "one accept, to the node left behind: {ship:?}");
    assert_eq!(ship[0].0, NodeId(2));
    assert_eq!(owed, vote.entries);

    // The ring holds the debt: the entry is committed and applied, the head stays before it.
    let scan = core.ring_scan().expect("scans");
    assert_eq!(scan.owed.len(), 1, "the source's entry owes the catch-up");
    assert_eq!((scan.owed[0].entry.status, scan.owed[0].owed), (EntryStatus::Committed, 1));
    let mut replay = Replayer::new(dc.layout, node);
    let step = replay.step(&region, &mut |e| apply_committed(&region, &dc.catalog, e));
    assert_eq!(step.applied, 1);
    assert_eq!(step.head, vote.entries[0].index, "the head waits for the catch-up");

    // The shipper's process dies; a new one over the same MemStore finds the debt in the ring.
    drop(core);
    let mut core = ExecutorCore::new(
        Arc::new(Epochs::new(Placement::initial(topology.clone()))),
        node,
        dc.clone(),
        Arc::new(Hlc::new()),
    );
    let scan = core.ring_scan().expect("scans");
    assert_eq!(scan.owed.len(), 1, "the debt survives the restart");
    assert_eq!(scan.owed[0].entry.status, EntryStatus::Flushed, "applied once, mask kept");
    let again = core.reship(&scan.owed[0]);
    assert_eq!(again.txn, t);
    assert_eq!(again.owed, owed);
    let to: Vec<NodeId> = again.ship.iter().map(|s| s.0).collect();
    assert_eq!(to, [NodeId(1), NodeId(2)], "every replica outside the source's DC");
    let first = |r: &Request| match r {
        Request::Accept(Accept { changes, decided, .. }) => (changes.clone(), *decided),
        other => panic!("a catch-up is an accept: {other:?}"),
    };
    assert_eq!(first(&again.ship[1].1), first(&ship[0].1), "the same values, the same commit");

    // Paid: the mask is cleared and the head passes.
    core.clear_owed(t, &again.owed).expect("clears");
    assert!(core.ring_scan().expect("scans").owed.is_empty());
    let step = Replayer::new(dc.layout, node).step(&region, &mut |e| apply_committed(&region, &dc.catalog, e));
    assert_eq!(step.head, vote.entries[0].index + vote.entries[0].slots, "the head passes the paid entry");
}

/// The mutant `catch_up_not_durable` (the bug before): the source's entry owes nothing in the
/// ring, so a restarted source cannot ship the catch-up again.
#[test]
fn without_the_mask_a_restarted_source_owes_nothing() {
    use redt_coordinator::ExecutorMutations;
    use redt_proto::{Cts, PartitionId};
    use redt_protocol::message::CatchUpTarget;
    let (core, _dc, topology) = core();
    let mut core = core.with_mutations(ExecutorMutations { catch_up_not_durable: true, ..Default::default() });
    let t = TxnId::new(NodeId(1), 12);
    let mut a = args(&topology, t, &[KvOp::Add(4, 5)]);
    a.partitions = vec![PartitionId(0)];
    let vote = core.execute(&a, 1).expect("phase 1 runs");
    let cts = Cts(9_000_000);
    let targets = [CatchUpTarget { partition: PartitionId(0), nodes: vec![NodeId(2)], cts }];
    let debt = core.decide_with_catch_up(t, Decision::Commit(cts), &vote.entries, &targets, true).expect("decides");
    assert_eq!(debt.map(|d| d.ship.len()), Some(1), "shipped from memory");
    assert!(core.ring_scan().expect("scans").owed.is_empty(), "but nothing in the ring");
}

/// The epoch fence (docs/design.md, "Failover"): a phase 1 planned in an older epoch than the
/// executor's, or in one it has not applied yet, votes abort and locks nothing; the abort
/// fences the transaction, so a repeat after the executor reaches that epoch votes abort
/// again. A commit vote given before the epoch changed is repeated unchanged, and its decision
/// still applies.
#[test]
fn a_phase1_of_another_epoch_votes_abort_and_locks_nothing() {
    use redt_protocol::epochs::placement;
    let (mut core, dc, topology, _, epochs) = core_with_epochs();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let lock = |key| dc.read_record(NodeId(0), kv, key).expect("reads").map(|r| r.lock).unwrap_or(0);
    let e1 = topology.epoch;
    let e2 = redt_proto::Epoch(e1.0 + 1);
    let e3 = redt_proto::Epoch(e1.0 + 2);
    let at = |e, txn, ops: &[KvOp]| Execute { epoch: e, ..args(&topology, txn, ops) };

    // Voted commit in epoch 1, then the node moves to epoch 2: the repeat gets the same vote.
    let held = TxnId::new(NodeId(1), 1);
    let vote = core.execute(&at(e1, held, &[KvOp::Add(4, 1)]), 1).expect("phase 1 runs");
    assert!(vote.is_commit(), "{:?}", vote.abort);
    assert!(epochs.adopt(placement(&topology, e2, &Default::default())));
    assert_eq!(core.execute(&at(e1, held, &[KvOp::Add(4, 1)]), 2).expect("repeat"), vote);

    // A new phase 1 of epoch 1 is refused now.
    let stale = TxnId::new(NodeId(1), 2);
    let v = core.execute(&at(e1, stale, &[KvOp::Add(5, 1)]), 3).expect("phase 1 answers");
    assert!(!v.is_commit() && v.entries.is_empty(), "{v:?}");
    let why = format!("{:?}", v.abort);
    assert!(why.contains("not in current epoch"), "{why}");
    assert_eq!(lock(5), 0, "nothing locked");

    // One of epoch 3, which this node has not applied, too; and still after it applies it.
    let early = TxnId::new(NodeId(1), 3);
    let v = core.execute(&at(e3, early, &[KvOp::Add(6, 1)]), 4).expect("phase 1 answers");
    assert!(!v.is_commit(), "{v:?}");
    assert!(format!("{:?}", v.abort).contains("not applied here yet"), "{:?}", v.abort);
    assert!(epochs.adopt(placement(&topology, e3, &Default::default())));
    let again = core.execute(&at(e3, early, &[KvOp::Add(6, 1)]), 5).expect("phase 1 answers");
    assert!(!again.is_commit(), "a fenced transaction votes abort again: {again:?}");
    assert_eq!(lock(6), 0, "nothing locked");

    // The epoch-1 commit vote's decision still applies: its lock is released.
    assert_ne!(lock(4), 0, "the epoch-1 vote holds its lock");
    core.decide(held, Decision::Abort, &vote.entries).expect("decides");
    assert_eq!(lock(4), 0);

    // A phase 1 of the current epoch runs.
    let fresh = TxnId::new(NodeId(1), 4);
    let v = core.execute(&at(e3, fresh, &[KvOp::Add(7, 1)]), 6).expect("phase 1 runs");
    assert!(v.is_commit(), "{:?}", v.abort);
}

/// The mutant without the epoch fence runs a phase 1 of an older epoch (what the simulation's
/// epoch mutant test relies on).
#[test]
fn without_the_fence_an_old_epoch_phase1_runs() {
    use redt_coordinator::ExecutorMutations;
    use redt_protocol::epochs::placement;
    let (core, _, topology, _, epochs) = core_with_epochs();
    let mut core = core.with_mutations(ExecutorMutations { accept_other_epoch: true, ..Default::default() });
    let e2 = redt_proto::Epoch(topology.epoch.0 + 1);
    assert!(epochs.adopt(placement(&topology, e2, &Default::default())));
    let v = core.execute(&args(&topology, TxnId::new(NodeId(1), 9), &[KvOp::Add(4, 1)]), 1).expect("runs");
    assert!(v.is_commit(), "{:?}", v.abort);
}

/// Rebuild (docs/design.md, "Rebuild"): a voter serves the first chunk of a snapshot copy only
/// once it has applied the learner's epoch and finished every entry of an older one, and from
/// the first request on its epoch floor turns away a phase 1 of an older epoch written into its
/// ring by an executor of its DC that has not applied the new epoch yet. The mutant
/// `snapshot_without_fence` serves at once and raises no floor.
#[test]
fn a_snapshot_waits_for_older_entries_and_its_floor_fences_a_lagging_executor() {
    use redt_coordinator::ExecutorMutations;
    use redt_protocol::epochs::placement;
    use redt_protocol::message::{Reply, Request, SnapshotRead};
    let (mut core, dc, topology, region, epochs) = core_with_epochs();
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let e1 = topology.epoch;
    let e2 = redt_proto::Epoch(e1.0 + 1);
    let key = 4;
    let partition = topology.partition_of(topology.table(kv).expect("kv"), key);
    let read =
        |from_bucket| Request::SnapshotRead(SnapshotRead { partition, epoch: e2, from_bucket, max_bytes: 1 << 20 });
    let not_ready =
        |r: &Reply| matches!(r, Reply::Error { code, .. } if *code == redt_coordinator::error_code::NOT_READY);

    // An epoch-1 transaction voted commit here and is undecided.
    let held = TxnId::new(NodeId(1), 1);
    let vote = core.execute(&Execute { epoch: e1, ..args(&topology, held, &[KvOp::Add(key, 5)]) }, 1).expect("runs");
    assert!(vote.is_commit(), "{:?}", vote.abort);
    // Not at epoch 2 yet: not ready.
    let h = core.handle(NodeId(3), read(0), 2);
    assert!(not_ready(&h.reply), "{:?}", h.reply);
    assert!(epochs.adopt(placement(&topology, e2, &Default::default())));
    // At epoch 2, with the epoch-1 entry unfinished: not ready either, and the floor is up.
    let h = core.handle(NodeId(3), read(0), 3);
    assert!(not_ready(&h.reply), "{:?}", h.reply);
    assert!(format!("{:?}", h.reply).contains("not finished"), "{:?}", h.reply);

    // An executor of the same DC still at epoch 1 (its own placements) writes a phase 1 of
    // epoch 1 into this node's ring: the floor makes it vote abort, holding nothing.
    let lagging = Arc::new(Epochs::new(Placement::initial(topology.clone())));
    let mut other = ExecutorCore::new(lagging, NodeId(0), dc.clone(), Arc::new(Hlc::new()));
    let late = TxnId::new(NodeId(2), 1);
    let schema = topology.table(kv).expect("kv");
    let other_key = (key + 1..)
        .find(|&k| topology.partitions[topology.partition_of(schema, k).0 as usize].replicas.contains(&NodeId(0)))
        .expect("node 0 holds some partition");
    let v =
        other.execute(&Execute { epoch: e1, ..args(&topology, late, &[KvOp::Add(other_key, 1)]) }, 4).expect("runs");
    assert!(!v.is_commit(), "the floor turns it away: {v:?}");
    assert!(format!("{:?}", v.abort).contains("StaleEpoch"), "{:?}", v.abort);
    let lock = dc.read_record(NodeId(0), kv, other_key).expect("reads").map(|r| r.lock).unwrap_or(0);
    assert_eq!(lock, 0, "nothing locked");
    other.decide(late, Decision::Abort, &v.entries).expect("decides");

    // The epoch-1 transaction commits; once replayed (here: applied by the decision) the copy
    // is served and holds its write.
    core.decide(held, Decision::Commit(redt_proto::Cts(77)), &vote.entries).expect("decides");
    let mut chunk = None;
    let mut replayer = redt_dc_executor::Replayer::new(dc.layout, NodeId(0));
    for _ in 0..100 {
        let h = core.handle(NodeId(3), read(0), 5);
        if let Reply::Snapshot { records, .. } = h.reply {
            chunk = Some(records);
            break;
        }
        assert!(not_ready(&h.reply), "{:?}", h.reply);
        // Replay flushes the committed entry.
        replayer.step(&region, &mut |e| redt_dc_executor::apply_committed(&region, &dc.catalog, e));
    }
    let records = chunk.expect("served once the older entry is finished and applied");
    let mine = records.iter().find(|r| r.table == kv && r.key == key).expect("the committed record is copied");
    assert!(mine.cells.iter().any(|c| redt_dc_executor::CellVersion(c.version).cts().0 == 77), "{mine:?}");

    // The mutant serves at once and raises no floor.
    let (core, _, topology, _, epochs) = core_with_epochs();
    let mut core = core.with_mutations(ExecutorMutations { snapshot_without_fence: true, ..Default::default() });
    let undecided = TxnId::new(NodeId(1), 2);
    let v = core.execute(&args(&topology, undecided, &[KvOp::Add(key, 1)]), 1).expect("runs");
    assert!(v.is_commit());
    assert!(epochs.adopt(placement(&topology, e2, &Default::default())));
    let h = core.handle(NodeId(3), read(0), 2);
    assert!(matches!(h.reply, Reply::Snapshot { .. }), "{:?}", h.reply);
}

/// Node 0's whole MemStore, byte for byte.
fn memstore(dc: &DcHandle) -> Vec<u8> {
    let mut bytes = vec![0u8; dc.layout.size as usize];
    dc.verbs.read(NodeId(0), redt_proto::Offset(0), &mut bytes).expect("node 0's region reads");
    bytes
}

/// Node 0's finding for `txn` (its DC has only node 0).
fn finding(core: &ExecutorCore, txn: TxnId, start_after: Option<redt_proto::Cts>) -> FindingKind {
    let mut f = core.lookup_txn(txn, start_after);
    assert_eq!(f.len(), 1, "one node in node 0's DC: {f:?}");
    let f = f.remove(0);
    assert_eq!(f.node, NodeId(0));
    f.kind
}

/// The outcome query: a lookup reads a transaction's entries (undecided, committed,
/// an abort applied over a commit vote) and changes nothing — no fence, no promise, no vote
/// word, not a byte of the MemStore — so a transaction looked up before its phase 1 still runs
/// and votes commit (a recoverer's PREPARE would have fenced it to abort).
#[test]
fn an_outcome_lookup_reads_entries_and_changes_nothing() {
    let (mut core, dc, topology) = core();
    let key = 4; // partition 0: a replica on node 0
    let kv = |ops: &[KvOp], txn| args(&topology, txn, ops);
    let t1 = TxnId::new(NodeId(1), 1);

    // Looked up before its phase 1: nothing there (its start is after everything evicted).
    let before = memstore(&dc);
    assert_eq!(finding(&core, t1, Some(redt_proto::Cts(1))), FindingKind::Nothing);
    assert_eq!(finding(&core, t1, None), FindingKind::CannotTell, "without a start, absence is not proven");
    assert!(memstore(&dc) == before, "a lookup writes nothing");
    let mut e1 = kv(&[KvOp::Add(key, 1)], t1);
    e1.partitions = vec![redt_proto::PartitionId(0)];
    let v1 = core.execute(&e1, 1).expect("phase 1 runs");
    assert!(v1.is_commit(), "not fenced by the lookup: {:?}", v1.abort);

    // Undecided: an unfinished entry with a commit vote; the lookup leaves it so.
    let before = memstore(&dc);
    match finding(&core, t1, None) {
        FindingKind::Found(f) => {
            assert!(f.commit_vote && f.unfinished && !f.unvoted, "{f:?}");
            assert_eq!(f.committed, None);
            assert_eq!(f.entry.as_ref().map(|e| e.partitions.clone()), Some(vec![redt_proto::PartitionId(0)]));
        }
        other => panic!("{other:?}"),
    }
    assert!(memstore(&dc) == before, "no fence, no promise: the vote words are unchanged");
    let words: Vec<_> = redt_dc_executor::unfinished_entries(dc.verbs.as_ref(), NodeId(0), &dc.layout)
        .expect("ring reads")
        .into_iter()
        .map(|(_, e)| (e.txn, e.vote.unpack()))
        .collect();
    assert_eq!(words.len(), 1);
    let state = words[0].1.expect("a valid vote word");
    assert_eq!((state.vote, state.promised), (redt_dc_executor::VoteCode::Commit, redt_proto::Ballot(0)));

    // Committed.
    let cts = redt_proto::Cts(1 << 20);
    core.decide(t1, Decision::Commit(cts), &v1.entries).expect("t1 commits");
    match finding(&core, t1, None) {
        FindingKind::Found(f) => assert_eq!((f.committed, f.unfinished), (Some(cts), false), "{f:?}"),
        other => panic!("{other:?}"),
    }

    // An abort applied over a commit vote: finished, not committed, the commit vote seen.
    let t2 = TxnId::new(NodeId(1), 2);
    let mut e2 = kv(&[KvOp::Add(key, 2)], t2);
    e2.partitions = vec![redt_proto::PartitionId(0)];
    let v2 = core.execute(&e2, 2).expect("phase 1 runs");
    assert!(v2.is_commit(), "{:?}", v2.abort);
    core.decide(t2, Decision::Abort, &v2.entries).expect("t2 aborts");
    let before = memstore(&dc);
    match finding(&core, t2, None) {
        FindingKind::Found(f) => {
            assert!(f.commit_vote && !f.unfinished && f.committed.is_none(), "{f:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(memstore(&dc) == before, "a lookup writes nothing");
}

/// A catch-up's first shipment to a voter whose DC the commit left behind (sim seed 70117):
/// the replica's own stale redo of the transaction never stands. Unfinished, it is aborted
/// when the catch-up lands (a commit decision that names it later changes nothing); already
/// applied (a recoverer that saw the commit applied elsewhere committed it), the shipped
/// values are written over it at the same commit timestamp. With `apply_stale_redo` the
/// stale values stay in the second case.
#[test]
fn a_behind_catch_up_aborts_the_stale_redo_or_writes_over_it() {
    use redt_dc_executor::{apply_committed, Replayer};
    use redt_dc_executor::{ReplicaChange, ReplicaOrigin};
    use redt_proto::Cts;
    use redt_protocol::executor_core::ExecutorMutations;
    use redt_protocol::message::{Accept, Reply, Request};
    let shipped = vec![0x5d; 8];
    for (applied_first, mutant) in [(false, false), (true, false), (true, true)] {
        let (core, dc, topology, region) = core_with_region();
        let mut core = core.with_mutations(ExecutorMutations { apply_stale_redo: mutant, ..Default::default() });
        let kv = topology.table_by_name("kv").expect("kv table").id;
        let node = NodeId(0);
        let t = TxnId::new(NodeId(1), 70);
        let cts = Cts(9_000_000);
        let mut a = args(&topology, t, &[KvOp::Add(4, 3)]);
        a.partitions = vec![redt_proto::PartitionId(0)];
        let vote = core.execute(&a, 1).expect("phase 1 runs");
        assert!(vote.is_commit());
        if applied_first {
            core.decide(t, Decision::Commit(cts), &vote.entries).expect("the stale redo commits");
        }
        let accept = Request::Accept(Accept {
            origin: ReplicaOrigin {
                txn: t,
                epoch: topology.epoch,
                coordinator: NodeId(1),
                participants: vec![DcId(0)],
            },
            changes: vec![ReplicaChange { table: kv, key: 4, cell: 0, value: shipped.clone(), seen: 0 }],
            decided: Some(Decision::Commit(cts)),
            behind: true,
        });
        assert_eq!(core.handle(NodeId(2), accept, 2).reply, Reply::Accepted(true));
        if !applied_first {
            // The stale entry is finished: a decision naming it changes nothing.
            core.decide(t, Decision::Commit(cts), &vote.entries).expect("decides");
        }
        let mut replay = Replayer::new(dc.layout, node);
        for _ in 0..8 {
            replay.step(&region, &mut |e| apply_committed(&region, &dc.catalog, e));
        }
        let image = dc.read_record(node, kv, 4).expect("reads").expect("the record exists");
        assert_eq!(image.lock, 0, "no lock left");
        let value = &image.values[0][..8];
        if mutant {
            assert_ne!(value, &shipped[..], "the mutant keeps its stale value");
        } else {
            assert_eq!(value, &shipped[..], "applied first: {applied_first}");
            assert_eq!(image.versions[0].cts(), cts);
        }
    }
}

/// The memory of commit votes awaiting their decision holds at most
/// `limits.max_pending_votes`, however many distinct transactions vote; a forgotten vote's
/// decision (naming no entry) still finishes its entry, found in the ring, and a repeated
/// phase 1 of it is refused with `OVER_LIMIT` naming the limit, not run again.
#[test]
fn the_vote_memory_holds_at_most_its_cap_and_a_forgotten_vote_is_still_decided() {
    use redt_protocol::message::{Reply, Request};
    let limits = redt_proto::LimitsConfig { max_pending_votes: 4, ..redt_proto::LimitsConfig::default() };
    let (mut core, dc, topology, _, _) = core_with_limits(limits);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let txns: Vec<TxnId> = (1..=50).map(|i| TxnId::new(NodeId(1), i)).collect();
    for (i, &t) in txns.iter().enumerate() {
        let v = core.execute(&args(&topology, t, &[KvOp::Add(100 + i as u64, 1)]), 1).expect("phase 1 runs");
        assert!(v.is_commit(), "{:?}", v.abort);
        assert!(core.pending() <= 4, "{} votes remembered", core.pending());
    }
    assert_eq!(core.forgotten().0, 46);
    // A repeated phase 1 of a forgotten vote: refused naming the limit, nothing run again.
    let again = core.handle(NodeId(1), Request::Execute(args(&topology, txns[0], &[KvOp::Add(100, 1)])), 2);
    match again.reply {
        Reply::Error { code, message } => {
            assert_eq!(code, redt_coordinator::error_code::OVER_LIMIT);
            assert!(message.contains("limits.max_pending_votes"), "{message}");
        }
        other => panic!("a repeated phase 1 of a forgotten vote was answered {other:?}"),
    }
    // Decisions naming no entry (the coordinator never got the vote) finish every entry,
    // the forgotten ones found in the ring.
    for &t in &txns {
        core.decide(t, Decision::Abort, &[]).expect("decides");
    }
    let layout = dc.layout;
    let left = redt_dc_executor::unfinished_entries(dc.verbs.as_ref(), NodeId(0), &layout).expect("reads the ring");
    assert!(left.is_empty(), "{} entries left undecided", left.len());
    for i in 0..txns.len() as u64 {
        assert_eq!(dc.read_record(NodeId(0), kv, 100 + i).expect("reads").map(|r| r.lock).unwrap_or(0), 0);
    }
    assert_eq!(core.pending(), 0);
}

/// A secondary's memory of accepted redo holds at most `limits.max_accepted_redo`
/// (transaction, sender) pairs; the decision of a forgotten one still settles its entry, found
/// by scanning the ring (the process had already read `accepted_before`, on an earlier miss).
#[test]
fn the_accepted_redo_memory_holds_at_most_its_cap_and_a_forgotten_one_is_still_settled() {
    use redt_dc_executor::{EntryStatus, ReplicaChange, ReplicaOrigin};
    use redt_proto::{Ballot, Cts};
    use redt_protocol::message::{Accept, Decide, DecideRole, Reply, Request};
    let limits = redt_proto::LimitsConfig { max_accepted_redo: 3, ..redt_proto::LimitsConfig::default() };
    let (mut core, dc, topology, _, _) = core_with_limits(limits);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let decide = |txn, cts| {
        Request::Decide(Decide {
            txn,
            ballot: Ballot(0),
            decision: Decision::Commit(cts),
            entries: vec![],
            role: DecideRole::Secondary,
            catch_up: vec![],
        })
    };
    // A first miss: `accepted_before` is read now, from a ring holding nothing.
    let unknown = TxnId::new(NodeId(3), 999);
    assert!(matches!(core.handle(NodeId(2), decide(unknown, Cts(1_000_000)), 1).reply, Reply::Decided(_)));
    let txns: Vec<TxnId> = (1..=20).map(|i| TxnId::new(NodeId(3), i)).collect();
    for (i, &txn) in txns.iter().enumerate() {
        let accept = Request::Accept(Accept {
            origin: ReplicaOrigin { txn, epoch: topology.epoch, coordinator: NodeId(3), participants: vec![DcId(0)] },
            changes: vec![ReplicaChange { table: kv, key: 200 + i as u64, cell: 0, value: vec![9; 8], seen: 0 }],
            decided: None,
            behind: false,
        });
        assert_eq!(core.handle(NodeId(2), accept, 1).reply, Reply::Accepted(true));
        assert!(core.accepted_pending() <= 3, "{} remembered", core.accepted_pending());
    }
    assert_eq!(core.forgotten().1, 17);
    let cts = Cts(6_000_000);
    for &txn in &txns {
        assert!(matches!(core.handle(NodeId(2), decide(txn, cts), 2).reply, Reply::Decided(_)));
    }
    let layout = dc.layout;
    let entries = redt_dc_executor::ring_entries(dc.verbs.as_ref(), NodeId(0), &layout).expect("reads the ring");
    for &txn in &txns {
        let ours: Vec<_> = entries.iter().filter(|(_, _, e)| e.txn == txn).map(|(_, _, e)| (e.status, e.cts)).collect();
        assert_eq!(ours, vec![(EntryStatus::Committed, cts)], "{txn}");
    }
    assert_eq!(core.accepted_pending(), 0);
}

/// The executor thread takes a short job queued behind bulk ones first, and bulk jobs of two
/// shares in turns (`executor_queue`): while a bulk job holds the thread, three large
/// sub-transactions of one client, one of another client and one small phase 1 queue up; once
/// it lets go, the small one runs next (the short lane is owed the time the bulk job took),
/// then the two clients' alternately. Each job is a real
/// phase 1 on the core; the order is read from the votes' transaction ids.
#[test]
fn a_short_phase1_runs_before_queued_bulk_work_and_shares_take_turns() {
    use redt_coordinator::ExecutorThread;
    use redt_protocol::executor_queue::{Lane, BULK_WEIGHT};
    let (core, _dc, topology) = core();
    let exec = Arc::new(ExecutorThread::spawn(core).expect("the executor thread starts"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let (started, is_started) = std::sync::mpsc::channel::<()>();
    rt.block_on(async {
        let blocker = {
            let exec = exec.clone();
            tokio::spawn(async move {
                exec.run_in(Lane::Bulk(8), move |_, _| {
                    started.send(()).unwrap();
                    hold.recv().unwrap();
                })
                .await
            })
        };
        tokio::task::spawn_blocking(move || is_started.recv().unwrap()).await.unwrap();
        let large: Vec<KvOp> = (0..=BULK_WEIGHT).map(|k| KvOp::Read(10_000 + k)).collect();
        let mut jobs = Vec::new();
        let queue = |txn: u64, share: u64, ops: &[KvOp]| {
            let (exec, order) = (exec.clone(), order.clone());
            let args = args(&topology, TxnId(txn), ops);
            let lane = if share == 0 { Lane::Short } else { Lane::Bulk(share) };
            tokio::spawn(async move {
                exec.run_in(lane, move |core, now| {
                    let vote = core.execute(&args, now).expect("phase 1 runs");
                    order.lock().unwrap().push(vote.txn.0);
                })
                .await
            })
        };
        // Queued one after the other: each job is in the queue before the next is made.
        let settle = |want: (usize, usize)| {
            let exec = exec.clone();
            async move {
                while exec.queued() != want {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        };
        for txn in [1, 2, 3] {
            jobs.push(queue(txn, 7, &large));
            settle((0, txn as usize)).await;
        }
        jobs.push(queue(4, 9, &large));
        settle((0, 4)).await;
        jobs.push(queue(5, 0, &[KvOp::Read(1)]));
        settle((1, 4)).await;
        release.send(()).unwrap();
        blocker.await.unwrap().expect("the blocker ran");
        for j in jobs {
            j.await.unwrap().expect("the job ran");
        }
    });
    assert_eq!(*order.lock().unwrap(), vec![5, 1, 4, 2, 3], "short first, then the shares in turns");
    // The thread counts a job once it has returned, just after its caller got the result.
    let mut load = exec.load();
    for _ in 0..1000 {
        if load.short_jobs + load.bulk_jobs == 6 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        load = exec.load();
    }
    assert_eq!((load.short_jobs, load.bulk_jobs), (1, 5), "the small phase 1 was the one short job");
    assert!(load.longest_job_us >= load.longest_short_wait_us, "it waited for the blocker only: {load:?}");
}

/// The side thread runs at a lower priority than the core's (nice 10 against the process's),
/// so large phase 1s yield the CPU to latency-bound work when they compete for it.
#[test]
fn the_side_thread_yields_the_cpu_to_the_core() {
    use redt_coordinator::ExecutorThread;
    let (core, _dc, _topology) = core();
    let node = core.node().0;
    let exec = ExecutorThread::spawn(core).expect("the executor threads start");
    // Both threads have started once each has run a job.
    exec.run_blocking(|_, _| ()).expect("the core runs");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(exec.run_side(redt_protocol::executor_queue::Lane::Short, |_, _| ())).expect("the side thread runs");
    // Field 19 of /proc/self/task/TID/stat, after the command's closing parenthesis: the nice value.
    let nice_of = |name: &str| -> Option<i64> {
        std::fs::read_dir("/proc/self/task").ok()?.flatten().find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            if comm.trim() != name {
                return None;
            }
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            stat[stat.rfind(')')? + 2..].split(' ').nth(16)?.parse().ok()
        })
    };
    let me = nice_of(std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim());
    let core_nice = nice_of(&format!("redt-exec-{node}")).expect("the core's thread is listed");
    let side_nice = nice_of(&format!("redt-bulk-{node}")).expect("the side thread is listed");
    assert_eq!(Some(core_nice), me, "the core's thread keeps the process's priority");
    assert_eq!(side_nice, (core_nice + 10).min(19), "the side thread runs 10 nice levels lower");
}

/// A large phase 1 runs on the side thread between the core's check and the core's keeping
/// of its vote: a short phase 1 runs to its end on the core meanwhile, and the large one's
/// commit vote is then kept (a repeated phase 1 gets it again).
#[test]
fn a_short_phase1_runs_while_a_large_one_is_on_the_side_thread() {
    use redt_coordinator::ExecutorThread;
    use redt_protocol::executor_core::{run_phase1, Phase1};
    use redt_protocol::executor_queue::{Lane, BULK_WEIGHT};
    let (core, _dc, topology) = core();
    let exec = Arc::new(ExecutorThread::spawn(core).expect("the executor threads start"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let large: Vec<KvOp> = (0..=BULK_WEIGHT).map(|k| KvOp::Read(10_000 + k)).collect();
    let large = args(&topology, TxnId(1), &large);
    let short = args(&topology, TxnId(2), &[KvOp::Read(1)]);
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let (started, is_started) = std::sync::mpsc::channel::<()>();
    rt.block_on(async {
        let first = large.clone();
        let begun = exec.run(move |core, now| core.begin_execute(&first, now)).await.expect("the core runs");
        let Ok(Phase1::Run(sub)) = begun else { panic!("a fresh phase 1 is run, not answered: {begun:?}") };
        let side = {
            let exec = exec.clone();
            tokio::spawn(async move {
                exec.run_side(Lane::Bulk(7), move |side, now| {
                    started.send(()).unwrap();
                    hold.recv().unwrap();
                    run_phase1(side, &sub, 0, now)
                })
                .await
            })
        };
        tokio::task::spawn_blocking(move || is_started.recv().unwrap()).await.unwrap();
        // The side thread is held inside the large phase 1: the short one still runs.
        let short = exec.run(move |core, now| core.execute(&short, now));
        let vote = tokio::time::timeout(std::time::Duration::from_secs(10), short)
            .await
            .expect("the short phase 1 ran while the side thread was held")
            .expect("the core runs");
        assert!(vote.expect("phase 1 runs").is_commit(), "the short phase 1 votes commit");
        release.send(()).unwrap();
        let vote = side.await.unwrap().expect("the side thread runs");
        let kept = exec.run(move |core, _| core.finish_execute(TxnId(1), vote)).await.expect("the core runs");
        let kept = kept.expect("phase 1 runs");
        assert!(kept.is_commit(), "the large phase 1 votes commit: {:?}", kept.abort);
        let again = exec.run(move |core, now| core.execute(&large, now)).await.expect("the core runs");
        assert_eq!(again.expect("a repeated phase 1 is answered"), kept, "a repeated phase 1 gets the kept vote");
    });
    // The threads count a job once it has returned, just after its caller got the result.
    let mut load = exec.load();
    for _ in 0..1000 {
        if load.bulk_jobs == 1 && load.short_jobs == 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        load = exec.load();
    }
    assert_eq!((load.short_jobs, load.bulk_jobs), (4, 1), "the side thread's job counts as bulk: {load:?}");
}

/// The grace of the deleted-record tests below.
const DELETED_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A decided catch-up of transaction `seq` writing `value` (empty: a delete) to kv key `key`,
/// committed at `cts`.
fn catch_up(
    topology: &Topology,
    seq: u64,
    key: u64,
    value: Vec<u8>,
    cts: redt_proto::Cts,
) -> redt_protocol::message::Request {
    use redt_dc_executor::{ReplicaChange, ReplicaOrigin};
    use redt_protocol::message::{Accept, Request};
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let txn = TxnId::new(NodeId(3), seq);
    Request::Accept(Accept {
        origin: ReplicaOrigin { txn, epoch: topology.epoch, coordinator: NodeId(3), participants: vec![DcId(0)] },
        changes: vec![ReplicaChange { table: kv, key, cell: 0, value, seen: 0 }],
        decided: Some(Decision::Commit(cts)),
        behind: false,
    })
}

/// One replay pass over node 0's ring.
fn replay_node0(dc: &DcHandle, region: &redt_dc_executor::Region) {
    use redt_dc_executor::{apply_committed, Replayer};
    Replayer::new(dc.layout, NodeId(0)).step(region, &mut |e| apply_committed(region, &dc.catalog, e));
}

/// The physical time (ms) past the grace of a delete committed at `cts`.
fn past_deleted_grace(cts: redt_proto::Cts) -> u64 {
    (cts.0 >> redt_dc_executor::LOGICAL_BITS) + DELETED_GRACE.as_millis() as u64 + 1
}

/// Runs one reclaim round of `core` at `now_ms` with every asked node answering `holds` for
/// every key; returns how many nodes were asked (0: nothing was due).
fn reclaim_round(core: &mut ExecutorCore, now_ms: u64, holds: bool) -> usize {
    let Some(round) = core.take_reclaims(now_ms) else { return 0 };
    let answers: Vec<Option<redt_protocol::message::ReclaimAnswer>> = round
        .asks
        .iter()
        .map(|(_, r)| match r {
            redt_protocol::message::Request::ReclaimCheck(keys) => {
                Some(redt_protocol::message::ReclaimAnswer { holds: vec![holds; keys.len()], floor: None })
            }
            other => panic!("a reclaim round asks only reclaim checks: {other:?}"),
        })
        .collect();
    let asked = answers.len();
    core.finish_reclaims(round, &answers, now_ms);
    asked
}

/// A replica that applies a delete through a catch-up, not its own phase 2, frees the record
/// too, once the delete is applied, its grace has passed and the key's other replicas hold the
/// delete: a replica keeping the delete's versions where the others freed the record would
/// report them where the others report none, and every later transaction on the key would
/// count the others stale.
#[test]
fn a_delete_a_catch_up_brings_is_freed_here_too() {
    let (core, dc, topology, region) = core_with_region();
    let mut core = core.with_deleted_grace(Some(DELETED_GRACE), std::time::Duration::ZERO);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let (wrote, deleted) = (redt_proto::Cts(4_000_000), redt_proto::Cts(5_000_000));
    let reply = core.handle(NodeId(2), catch_up(&topology, 1, 4, vec![7; 8], wrote), 1).reply;
    assert_eq!(reply, redt_protocol::message::Reply::Accepted(true));
    replay_node0(&dc, &region);
    let reply = core.handle(NodeId(2), catch_up(&topology, 2, 4, vec![], deleted), 1).reply;
    assert_eq!(reply, redt_protocol::message::Reply::Accepted(true));
    assert_eq!(core.deleted_records().1, 1, "the shipped delete is remembered");
    let indexed = || dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 4).expect("lookup").is_some();
    // Not replayed yet: the record still holds the row, and waits.
    let mut now = past_deleted_grace(deleted);
    assert_eq!(reclaim_round(&mut core, now, true), 2, "both other replicas of the key are asked");
    assert!(indexed(), "freed before applied");
    assert_eq!(core.deleted_records().1, 1, "kept for another try");
    replay_node0(&dc, &region);
    // Another replica does not hold the delete yet: kept.
    now += 2_000;
    assert_eq!(reclaim_round(&mut core, now, false), 2);
    assert!(indexed(), "freed while another replica holds an older row");
    now += 2_000;
    assert_eq!(reclaim_round(&mut core, now, true), 2);
    assert!(!indexed(), "freed once applied here and held everywhere");
    assert_eq!(core.deleted_records().0, 1);
    assert_eq!(dc.deletion_horizon(NodeId(0), kv, 4).expect("horizon"), deleted);
}

/// A transaction still undecided on a replica may yet make a catch-up older than a delete (a
/// late phase 2 at its source, a late recovery): a delete committed above its start is held
/// back, here and by another replica whose floor it is above, until it is decided; then it is
/// freed. The tries it was held for are not counted.
#[test]
fn a_delete_above_an_undecided_entrys_start_waits_for_its_decision() {
    use redt_protocol::message::{ReclaimAnswer, ReclaimKey, Reply, Request};
    let (core, dc, topology, region) = core_with_region();
    let mut core = core.with_deleted_grace(Some(DELETED_GRACE), std::time::Duration::ZERO);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    for _ in 0..dc.layout.index_buckets().div_ceil(4096) {
        assert!(core.take_reclaims(1).is_none(), "the sweep of a new store finds nothing");
    }
    let (wrote, deleted) = (redt_proto::Cts(4_000_000), redt_proto::Cts(5_000_000));
    core.handle(NodeId(2), catch_up(&topology, 1, 4, vec![7; 8], wrote), 1);
    core.handle(NodeId(2), catch_up(&topology, 2, 4, vec![], deleted), 1);
    replay_node0(&dc, &region);
    // An undecided phase 1 on node 0 that started before the delete.
    let t = TxnId::new(NodeId(1), 9);
    let mut a = args(&topology, t, &[KvOp::Add(6, 1)]);
    a.start = redt_proto::Cts(4_500_000);
    let vote = core.execute(&a, 1).expect("phase 1 runs");
    assert!(vote.is_commit(), "{:?}", vote.abort);
    let indexed = || dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 4).expect("lookup").is_some();
    let floor = |core: &mut ExecutorCore| {
        let keys = vec![ReclaimKey { table: kv, key: 4, cts: deleted }];
        match core.handle(NodeId(1), Request::ReclaimCheck(keys), 1).reply {
            Reply::ReclaimChecked(a) => {
                assert_eq!(a.holds, vec![true], "the record holds the delete");
                a.floor
            }
            other => panic!("{other:?}"),
        }
    };
    let mut now = past_deleted_grace(deleted);
    for _ in 0..10 {
        assert_eq!(reclaim_round(&mut core, now, true), 0, "held back before any replica is asked");
        now += 2_000;
    }
    assert!(indexed(), "freed above an undecided entry's start");
    assert_eq!(floor(&mut core), Some(a.start), "this replica tells another its floor: the entry's start");
    assert_eq!(core.deleted_records(), (0, 1, 0), "still waiting, never forgotten");
    core.decide(t, Decision::Abort, &vote.entries).expect("t aborts");
    assert_eq!(floor(&mut core), None, "decided: the floor is gone");
    // Another replica's floor below the delete holds it back too, without counting a try.
    for _ in 0..10 {
        let round = core.take_reclaims(now).expect("due");
        let answers: Vec<_> = round
            .asks
            .iter()
            .map(|(_, r)| match r {
                Request::ReclaimCheck(keys) => {
                    Some(ReclaimAnswer { holds: vec![true; keys.len()], floor: Some(redt_proto::Cts(deleted.0 - 1)) })
                }
                other => panic!("{other:?}"),
            })
            .collect();
        core.finish_reclaims(round, &answers, now);
        now += 2_000;
    }
    assert!(indexed(), "freed above another replica's floor");
    assert_eq!(core.deleted_records(), (0, 1, 0), "still waiting, never forgotten");
    assert_eq!(reclaim_round(&mut core, now, true), 2);
    assert!(!indexed(), "freed once the entry is decided");
}

/// What a replica answers when another asks whether it holds a delete
/// (`DcHandle::holds_delete`): a deleted record at or after the delete, or a freed key under
/// its slot's horizon, holds it; a row, a key never seen, or an older delete does not.
#[test]
fn a_reclaim_check_says_which_deletes_this_replica_holds() {
    use redt_protocol::message::{ReclaimKey, Reply, Request};
    let (core, dc, topology, region) = core_with_region();
    let mut core = core.with_deleted_grace(Some(DELETED_GRACE), std::time::Duration::ZERO);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let (wrote, deleted) = (redt_proto::Cts(4_000_000), redt_proto::Cts(5_000_000));
    for (seq, key) in [(1, 4), (2, 5)] {
        core.handle(NodeId(2), catch_up(&topology, seq, key, vec![7; 8], wrote), 1);
    }
    core.handle(NodeId(2), catch_up(&topology, 3, 4, vec![], deleted), 1);
    replay_node0(&dc, &region);
    let check = |core: &mut ExecutorCore, key: u64, cts: u64| {
        let keys = vec![ReclaimKey { table: kv, key, cts: redt_proto::Cts(cts) }];
        match core.handle(NodeId(1), Request::ReclaimCheck(keys), 1).reply {
            Reply::ReclaimChecked(a) => a.holds[0],
            other => panic!("{other:?}"),
        }
    };
    assert!(check(&mut core, 4, deleted.0), "a deleted record holds its delete");
    assert!(!check(&mut core, 4, deleted.0 + 1), "not a later one");
    assert!(!check(&mut core, 5, deleted.0), "a row does not");
    assert!(!check(&mut core, 6, deleted.0), "nor a key never seen");
    assert_eq!(reclaim_round(&mut core, past_deleted_grace(deleted), true), 2);
    assert!(dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 4).expect("lookup").is_none(), "freed");
    assert!(check(&mut core, 4, deleted.0), "a freed key under its slot's horizon holds it");
    assert!(!check(&mut core, 4, deleted.0 + 1), "not a later one");
}

/// A started core sweeps its node's records once and frees the deleted records a previous
/// life of the process remembered in memory only; with freeing off it frees nothing.
#[test]
fn a_started_core_sweeps_for_deleted_records_its_last_life_forgot() {
    let (core, dc, topology, region, epochs) = core_with_epochs();
    let mut core = core.with_deleted_grace(None, std::time::Duration::ZERO);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let (wrote, deleted) = (redt_proto::Cts(4_000_000), redt_proto::Cts(5_000_000));
    for (seq, key) in [(1, 4), (3, 5)] {
        core.handle(NodeId(2), catch_up(&topology, seq, key, vec![7; 8], wrote), 1);
    }
    core.handle(NodeId(2), catch_up(&topology, 2, 4, vec![], deleted), 1);
    replay_node0(&dc, &region);
    let later = past_deleted_grace(deleted);
    assert_eq!(reclaim_round(&mut core, later, true), 0, "freeing is off");
    assert!(dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 4).expect("lookup").is_some(), "freeing is off");
    // The process starts again with freeing on.
    let mut core = ExecutorCore::new(epochs, NodeId(0), dc.clone(), Arc::new(Hlc::new()))
        .with_deleted_grace(Some(DELETED_GRACE), std::time::Duration::ZERO);
    assert_eq!(core.deleted_records().1, 0, "nothing remembered before the sweep");
    // Each reclaim round runs a step of the sweep first; the last steps find the record due.
    let mut asked = 0;
    for _ in 0..dc.layout.index_buckets().div_ceil(4096) {
        asked += reclaim_round(&mut core, later, true);
    }
    assert_eq!(asked, 2, "the sweep found the deleted record, and only it: both other replicas asked once");
    assert!(dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 4).expect("lookup").is_none(), "freed");
    assert!(dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, 5).expect("lookup").is_some(), "a row stays");
    assert_eq!(core.deleted_records().0, 1);
}

/// The purge that ends a learner's copy: a row held from before that neither a chunk nor a
/// catch-up refreshed is emptied and freed; a row a chunk brought, one a catch-up wrote since
/// the copy began, and rows of other partitions stay. Without `begin_refresh` nothing is
/// purged. The mutant purges nothing.
#[test]
fn the_purge_after_a_copy_empties_only_what_nothing_refreshed() {
    let (core, dc, topology, region, epochs) = core_with_epochs();
    let mut core = core.with_deleted_grace(Some(DELETED_GRACE), std::time::Duration::ZERO);
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let table = topology.table(kv).expect("kv");
    let p = topology.partition_of(table, 0);
    let ours: Vec<u64> = (0..64).filter(|&k| topology.partition_of(table, k) == p).take(3).collect();
    let other = (0..64).find(|&k| topology.partition_of(table, k) != p).expect("a key of another partition");
    let (stale, copied, caught_up) = (ours[0], ours[1], ours[2]);
    let old = redt_proto::Cts(4_000_000);
    for (seq, key) in [(1, stale), (2, other)] {
        core.handle(NodeId(2), catch_up(&topology, seq, key, vec![7; 8], old), 1);
    }
    replay_node0(&dc, &region);
    let row = |key: u64| {
        dc.read_record(NodeId(0), kv, key)
            .expect("reads")
            .is_some_and(|r| r.values.iter().any(|v| v.iter().any(|&b| b != 0)))
    };
    let purge_all = |core: &mut ExecutorCore| {
        let mut from = 0;
        let mut rows = 0;
        for _ in 0..10_000 {
            match core.purge_unrefreshed(p, from).expect("purges") {
                Ok(step) => {
                    rows += step.rows;
                    match step.next {
                        Some(n) => from = n,
                        None => return Ok(rows),
                    }
                }
                Err(why) => return Err(why),
            }
        }
        panic!("the purge never ends");
    };
    assert!(purge_all(&mut core).is_err(), "no copy under way: nothing to purge after");
    core.begin_refresh(p);
    let chunk = redt_dc_executor::SnapshotRecord {
        table: kv,
        key: copied,
        cells: vec![redt_dc_executor::SnapshotCell { cell: 0, version: old.0, value: vec![9; 8] }],
    };
    assert_eq!(core.apply_snapshot(&[chunk], redt_proto::Cts(0)).expect("applies"), 1);
    core.handle(NodeId(2), catch_up(&topology, 3, caught_up, vec![5; 8], redt_proto::Cts(6_000_000)), 1);
    replay_node0(&dc, &region);
    assert_eq!(purge_all(&mut core), Ok(1), "one row purged");
    assert!(!row(stale), "the row nothing refreshed is emptied");
    assert!(row(copied) && row(caught_up) && row(other), "the refreshed rows and other partitions' stay");
    assert!(dc.index.lookup(dc.verbs.as_ref(), NodeId(0), kv, stale).expect("lookup").is_none(), "and freed at once");
    assert!(purge_all(&mut core).is_err(), "the noted keys are forgotten at the end");

    // The mutant keeps the stale row.
    let (core, dc, _, region, _) = core_with_epochs();
    let mutations = redt_coordinator::ExecutorMutations { keep_unrefreshed: true, ..Default::default() };
    let mut core = core.with_mutations(mutations);
    core.handle(NodeId(2), catch_up(&topology, 1, stale, vec![7; 8], old), 1);
    replay_node0(&dc, &region);
    core.begin_refresh(p);
    assert_eq!(purge_all(&mut core), Ok(0));
    let _ = epochs;
    assert!(dc.read_record(NodeId(0), kv, stale).expect("reads").is_some_and(|r| r.values[0][0] == 7));
}

/// The reply of `core` to phase 1 `a` at `now_ms`, or `None` when it waits for a lock.
fn try_phase1(core: &mut ExecutorCore, a: &Execute, now_ms: u64) -> (Option<redt_dc_executor::Vote>, Option<u64>) {
    let h = core.handle(NodeId(1), redt_protocol::message::Request::Execute(a.clone()), now_ms);
    match (h.retry, h.reply) {
        (Some((at, _)), _) => (None, Some(at)),
        (None, redt_protocol::message::Reply::Vote { vote, .. }) => (Some(vote), None),
        (None, other) => panic!("a phase 1 answers a vote, got {other:?}"),
    }
}

/// With a lock wait, a phase 1 that meets a lock is not answered: it is tried again (1 ms,
/// then doubling) and gets the lock once the holder's decision released it, voting commit.
#[test]
fn a_phase1_that_meets_a_lock_waits_for_it_and_commits_once_it_is_released() {
    let (core, dc, topology) = core();
    let mut core = core.with_lock_wait(std::time::Duration::from_millis(40));
    let kv = topology.table_by_name("kv").expect("kv table").id;
    let (t1, t2) = (TxnId::new(NodeId(1), 1), TxnId::new(NodeId(2), 1));
    let v1 = core.execute(&args(&topology, t1, &[KvOp::Add(4, 1)]), 100).expect("phase 1 runs");
    assert!(v1.is_commit());
    let a2 = args(&topology, t2, &[KvOp::Add(4, 2)]);
    assert_eq!(try_phase1(&mut core, &a2, 100), (None, Some(101)), "waits; tried again 1 ms later");
    assert_eq!(try_phase1(&mut core, &a2, 101), (None, Some(103)), "then 2 ms later");
    core.decide(t1, Decision::Commit(redt_proto::Cts(7 << redt_dc_executor::LOGICAL_BITS)), &v1.entries)
        .expect("t1 commits");
    let (vote, again) = try_phase1(&mut core, &a2, 102);
    let vote = vote.expect("answered once the lock is free");
    assert!(vote.is_commit() && again.is_none(), "{:?}", vote.abort);
    core.decide(t2, Decision::Abort, &vote.entries).expect("t2 aborts");
    assert_eq!(dc.read_record(NodeId(0), kv, 4).expect("reads").map(|r| r.lock).unwrap_or(0), 0);
}

/// A wait is bounded: past the lock wait (or the phase-1 deadline) the phase 1 votes abort, and
/// the abort fences it as any abort vote does. Without a lock wait it is No-Wait.
#[test]
fn a_wait_ends_with_an_abort_vote_at_its_bound_and_no_wait_aborts_at_once() {
    let (core, _dc, topology) = core();
    let mut core = core.with_lock_wait(std::time::Duration::from_millis(8));
    let (t1, t2, t3) = (TxnId::new(NodeId(1), 1), TxnId::new(NodeId(2), 1), TxnId::new(NodeId(2), 2));
    assert!(core.execute(&args(&topology, t1, &[KvOp::Add(4, 1)]), 100).expect("runs").is_commit());
    let a2 = args(&topology, t2, &[KvOp::Add(4, 2)]);
    let mut now = 100;
    let mut tries = 0;
    let vote = loop {
        match try_phase1(&mut core, &a2, now) {
            (None, Some(at)) => {
                assert!(at > now && at <= 108, "every try within the 8 ms wait: {at}");
                now = at;
                tries += 1;
            }
            (Some(v), None) => break v,
            other => panic!("{other:?}"),
        }
    };
    assert!(!vote.is_commit() && tries >= 2, "{tries} tries, then abort: {:?}", vote.abort);
    assert!(!try_phase1(&mut core, &a2, now + 1).0.expect("fenced: answered").is_commit());
    // A phase 1 whose next try would reach its deadline stops waiting there.
    let mut a3 = args(&topology, t3, &[KvOp::Add(4, 3)]);
    a3.deadline_ms = 201;
    assert_eq!(try_phase1(&mut core, &a3, 200).1, None, "the deadline ends the wait");
    // No lock wait: No-Wait.
    let (core, _dc, topology) = self::core();
    let mut core = core.with_lock_wait(std::time::Duration::ZERO);
    assert!(core.execute(&args(&topology, t1, &[KvOp::Add(4, 1)]), 100).expect("runs").is_commit());
    let (vote, again) = try_phase1(&mut core, &args(&topology, t2, &[KvOp::Add(4, 2)]), 100);
    assert!(again.is_none() && !vote.expect("answered at once").is_commit());
}

/// A try that met a lock leaves its redo entry aborted, unvoted; the try after it that gets
/// the lock votes commit in a second entry. A recoverer's PREPARE must answer that commit
/// vote, not the first try's missing one.
#[test]
fn a_prepare_answers_the_commit_vote_of_the_try_after_a_wait() {
    let (core, _dc, topology) = core();
    let mut core = core.with_lock_wait(std::time::Duration::from_millis(40));
    let (t1, t2) = (TxnId::new(NodeId(1), 1), TxnId::new(NodeId(2), 1));
    let v1 = core.execute(&args(&topology, t1, &[KvOp::Add(4, 1)]), 100).expect("phase 1 runs");
    let mut a2 = args(&topology, t2, &[KvOp::Add(4, 2)]);
    a2.start = redt_proto::Cts(1 << 20); // as `recovery_prepare` names it
    a2.partitions = vec![redt_proto::PartitionId(0)]; // key 4: a replica on node 0
    assert_eq!(try_phase1(&mut core, &a2, 100).1, Some(101));
    core.decide(t1, Decision::Abort, &v1.entries).expect("t1 aborts");
    let vote = try_phase1(&mut core, &a2, 101).0.expect("answered");
    assert!(vote.is_commit());
    let reply = core.handle(NodeId(3), recovery_prepare(t2, 1, &topology), 5_000).reply;
    match promise(reply) {
        redt_dc_executor::Promise::Entry { vote, .. } => assert_eq!(vote, redt_dc_executor::VoteCode::Commit),
        other => panic!("the replica's vote is the second try's commit, got {other:?}"),
    }
}
