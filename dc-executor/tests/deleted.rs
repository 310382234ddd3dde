//! Deleted records freed: a committed delete's record goes back to the heap once its grace has
//! passed, the next insert takes it, and an older write of the key that arrives after the free
//! is superseded while a newer one lands (`deleted.rs`).

mod common;

use common::kv::{cts_of, kv, load, sub};
use common::{TestDc, T};
use redt_dc_executor::{
    free_list, AbortReason, Decision, Executor, KvOp, Replayer, ReplicaChange, ReplicaOrigin, SubTxn, Vote,
    LOGICAL_BITS,
};
use redt_proto::{Cts, DcId, Epoch, NodeId, TxnId};
use std::time::Duration;

const GRACE: Duration = Duration::from_secs(1);

/// Runs phase 1 of `ops` as transaction `seq` on `exec` at physical time `now_ms`, then phase 2
/// with a commit: the commit timestamp.
fn commit(dc: &TestDc, exec: &mut Executor, seq: u64, ops: Vec<KvOp>, now_ms: u64) -> Cts {
    let (s, v) = phase1(dc, exec, seq, ops, now_ms, now_ms);
    assert!(v.is_commit(), "{:?}", v.abort);
    let cts = cts_of(&v);
    exec.finish(s.txn, Decision::Commit(cts), &v.entries).expect("phase 2 runs");
    cts
}

/// Phase 1 of `ops` as transaction `seq`, started at `start_ms`, run at `now_ms`.
fn phase1(dc: &TestDc, exec: &mut Executor, seq: u64, ops: Vec<KvOp>, start_ms: u64, now_ms: u64) -> (SubTxn, Vote) {
    let mut s = sub(dc, seq, kv(dc, ops), None);
    s.start = Cts(start_ms << LOGICAL_BITS);
    let v = exec.execute(&s, now_ms).expect("phase 1 runs");
    (s, v)
}

/// The physical time at which a delete committed at `cts` is past its grace.
fn past_grace(cts: Cts) -> u64 {
    (cts.0 >> LOGICAL_BITS) + GRACE.as_millis() as u64 + 1
}

/// One replay pass over every node's ring: its entries flushed, they name no record any more.
fn replay(dc: &TestDc) {
    for n in &dc.topo.nodes {
        let region = dc.local.region(n.id).unwrap();
        Replayer::new(dc.dc.layout, n.id)
            .step(region, &mut |e| redt_dc_executor::apply_committed(region, &dc.dc.catalog, e));
    }
}

fn executor(dc: &TestDc) -> Executor {
    let mut e = dc.executor();
    e.set_deleted_grace(Some(GRACE));
    e
}

fn free_bytes(dc: &TestDc) -> u64 {
    dc.topo.nodes.iter().map(|n| free_list::free_bytes(dc.local.as_ref(), n.id, &dc.dc.layout).unwrap()).sum()
}

fn indexed(dc: &TestDc, key: u64) -> bool {
    dc.dc.index.lookup(dc.local.as_ref(), dc.node_of(key), T, key).unwrap().is_some()
}

/// The row `key` holds on its node: `None` when it has no record or only zero bytes.
fn row(dc: &TestDc, key: u64) -> Option<Vec<u8>> {
    let r = dc.dc.read_record(dc.node_of(key), T, key).unwrap()?;
    r.values.iter().any(|v| v.iter().any(|&b| b != 0)).then(|| r.values[0].clone())
}

/// The origin of replica redo of transaction `seq`.
fn origin(seq: u64) -> ReplicaOrigin {
    ReplicaOrigin {
        txn: TxnId::new(NodeId(0), seq),
        epoch: Epoch(1),
        coordinator: NodeId(0),
        participants: vec![DcId(0)],
    }
}

fn change(key: u64, value: u8) -> ReplicaChange {
    ReplicaChange { table: T, key, cell: 0, value: vec![value; 8], seen: 0 }
}

#[test]
fn a_deleted_record_is_freed_after_its_grace_and_inserts_take_it_back() {
    // No ordered index: the records alone are measured (the trees' nodes in tests/btree.rs).
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let record_bytes = dc.dc.catalog.layout(T).unwrap().record_bytes.div_ceil(64) * 64;
    let mut exec = executor(&dc);
    let mut now = 1_000;
    let mut settled = None;
    for round in 0..8u64 {
        let keys: Vec<u64> = (0..40).map(|k| 1_000 * (round + 1) + k).collect();
        commit(&dc, &mut exec, 10 * round + 1, keys.iter().map(|&k| KvOp::Write(k, vec![7; 8])).collect(), now);
        let deleted = commit(&dc, &mut exec, 10 * round + 2, keys.iter().map(|&k| KvOp::Delete(k)).collect(), now);
        assert!(keys.iter().all(|&k| indexed(&dc, k) && row(&dc, k).is_none()), "deleted, not freed yet");
        replay(&dc);
        assert_eq!(exec.retire_deleted_due(now).unwrap(), 0, "round {round}: freed before its grace");
        now = past_grace(deleted);
        assert_eq!(exec.retire_deleted_due(now).unwrap(), 40, "round {round}: one batch frees them all");
        assert!(keys.iter().all(|&k| !indexed(&dc, k)), "round {round}: a freed key left the index");
        assert_eq!(free_bytes(&dc), 40 * record_bytes, "round {round}");
        for &k in &keys {
            assert_eq!(dc.dc.deletion_horizon(dc.node_of(k), T, k).unwrap(), deleted, "round {round}: key {k}");
        }
        // After the first round (which made the free lists' directories) the heap stays put.
        let heap = dc.heap_pointers();
        assert_eq!(*settled.get_or_insert(heap.clone()), heap, "round {round}: the heap grew");
    }
    assert_eq!(exec.deleted_records().freed, 8 * 40);
    assert!(exec.deleted_records().is_empty());
}

#[test]
fn an_older_write_of_a_freed_key_is_superseded_and_a_newer_one_lands() {
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    load(&dc, [7, 8]);
    let written = commit(&dc, &mut exec, 1, vec![KvOp::Write(7, vec![1; 8])], 1_000);
    let deleted = commit(&dc, &mut exec, 2, vec![KvOp::Delete(7)], 1_000);
    assert!(written < deleted);
    replay(&dc);
    assert_eq!(exec.retire_deleted_due(past_grace(deleted)).unwrap(), 1);
    assert!(!indexed(&dc, 7));
    let node = dc.node_of(7);

    // The catch-up of the write before the delete, applied straight to the records: it
    // creates the record (its floor the horizon) and writes nothing.
    assert!(exec.apply_replica_now(node, TxnId::new(NodeId(0), 50), &[change(7, 1)], written).unwrap());
    assert_eq!(row(&dc, 7), None, "an older write brought a freed key back");

    // The same through the ring: accepted, decided, replayed.
    let origin = origin(51);
    let entry = exec.accept_replica(node, &origin, &[change(7, 2)]).unwrap().expect("an entry");
    exec.settle_replica(origin.txn, Decision::Commit(written), &[entry]).unwrap();
    replay(&dc);
    assert_eq!(row(&dc, 7), None, "a replayed older write brought a freed key back");

    // A key never deleted takes an old write as before (its record's floor is 0).
    assert!(exec.apply_replica_now(dc.node_of(8), TxnId::new(NodeId(0), 52), &[change(8, 3)], written).unwrap());
    assert_eq!(row(&dc, 8), Some(vec![3; 8]));

    // A write newer than the delete lands.
    let newer = Cts(deleted.0 + 1);
    assert!(exec.apply_replica_now(node, TxnId::new(NodeId(0), 53), &[change(7, 4)], newer).unwrap());
    assert_eq!(row(&dc, 7), Some(vec![4; 8]));
}

#[test]
fn without_the_horizon_an_older_write_brings_a_freed_key_back() {
    // The mutant the simulation's seed catches, shown on one replica: what the test above
    // rules out happens when freeing does not raise the horizon.
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    exec.set_deletion_horizon(false);
    load(&dc, [7]);
    let written = commit(&dc, &mut exec, 1, vec![KvOp::Write(7, vec![1; 8])], 1_000);
    let deleted = commit(&dc, &mut exec, 2, vec![KvOp::Delete(7)], 1_000);
    replay(&dc);
    assert_eq!(exec.retire_deleted_due(past_grace(deleted)).unwrap(), 1);
    let node = dc.node_of(7);
    assert!(exec.apply_replica_now(node, TxnId::new(NodeId(0), 50), &[change(7, 1)], written).unwrap());
    assert_eq!(row(&dc, 7), Some(vec![1; 8]), "the deleted value came back");
}

#[test]
fn a_record_an_unflushed_entry_names_stays_until_the_entry_is_done() {
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    load(&dc, [7]);
    let deleted = commit(&dc, &mut exec, 1, vec![KvOp::Delete(7)], 1_000);
    let node = dc.node_of(7);
    // A secondary's accepted entry names the record (and pins it), undecided.
    let origin = origin(51);
    let entry = exec.accept_replica(node, &origin, &[change(7, 2)]).unwrap().expect("an entry");
    replay(&dc);
    let now = past_grace(deleted);
    assert_eq!(exec.retire_deleted_due(now).unwrap(), 0);
    assert!(indexed(&dc, 7), "freed under an unflushed entry");
    assert_eq!(dc.dc.read_record(node, T, 7).unwrap().unwrap().lock, 0, "the retirement was undone");
    // Aborted and flushed, the entry names it no more: the next try (a second later) frees it.
    exec.settle_replica(origin.txn, Decision::Abort, &[entry]).unwrap();
    replay(&dc);
    assert_eq!(exec.retire_deleted_due(now + 500).unwrap(), 0, "a busy record waits a second");
    assert_eq!(exec.retire_deleted_due(now + 1_000).unwrap(), 1);
    assert!(!indexed(&dc, 7));
}

#[test]
fn a_row_written_again_before_the_grace_keeps_its_record() {
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    load(&dc, [7]);
    let deleted = commit(&dc, &mut exec, 1, vec![KvOp::Delete(7)], 1_000);
    commit(&dc, &mut exec, 2, vec![KvOp::Write(7, vec![5; 8])], 1_000);
    assert_eq!(exec.retire_deleted_due(past_grace(deleted) + 10_000).unwrap(), 0);
    assert_eq!(row(&dc, 7), Some(vec![5; 8]));
    assert!(exec.deleted_records().is_empty(), "the candidate is dropped, not retried");
}

/// A key deleted, written and deleted again before the first delete's grace passed: the
/// first delete's candidate does not free the record (its checks were made at the older
/// commit timestamp); the second's does, and raises the horizon to it.
#[test]
fn a_key_deleted_again_is_freed_by_its_newest_delete() {
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    load(&dc, [7]);
    let first = commit(&dc, &mut exec, 1, vec![KvOp::Delete(7)], 1_000);
    commit(&dc, &mut exec, 2, vec![KvOp::Write(7, vec![5; 8])], 1_000);
    let second = commit(&dc, &mut exec, 3, vec![KvOp::Delete(7)], 1_000);
    assert!(second > first);
    replay(&dc);
    assert_eq!(exec.deleted_records().len(), 2, "one candidate per delete");
    let now = past_grace(second);
    let batch = exec.take_deleted_due(now);
    let (older, newer): (Vec<_>, Vec<_>) = batch.into_iter().partition(|(_, r)| r.cts == first);
    assert_eq!((older.len(), newer.len()), (1, 1));
    assert_eq!(exec.retire_taken(now, older).unwrap(), 0, "the older delete's candidate frees nothing");
    assert!(indexed(&dc, 7));
    assert_eq!(exec.retire_taken(now, newer).unwrap(), 1, "the newest delete's frees it");
    assert!(!indexed(&dc, 7));
    assert_eq!(dc.dc.deletion_horizon(dc.node_of(7), T, 7).unwrap(), second);
    assert!(exec.deleted_records().is_empty(), "the older candidate is dropped, not retried");
}

#[test]
fn a_phase_1_that_started_before_a_free_does_not_write_the_key_again() {
    // A late copy of a transaction's phase 1 (a duplicate reaching a restarted node, which no
    // longer remembers the decision) meets the key created again after the free: its writes
    // would put the deleted value back, and the versions that turned such a copy away are gone.
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let mut exec = executor(&dc);
    load(&dc, [7]);
    let deleted = commit(&dc, &mut exec, 1, vec![KvOp::Delete(7)], 1_000);
    replay(&dc);
    let now = past_grace(deleted);
    assert_eq!(exec.retire_deleted_due(now).unwrap(), 1);
    let (_, v) = phase1(&dc, &mut exec, 2, vec![KvOp::Write(7, vec![1; 8])], 999, now);
    assert_eq!(v.abort, Some(AbortReason::Superseded { access: 0 }), "{v:?}");
    assert_eq!(row(&dc, 7), None);
    // A transaction that started after the free writes it.
    commit(&dc, &mut exec, 3, vec![KvOp::Write(7, vec![2; 8])], now);
    assert_eq!(row(&dc, 7), Some(vec![2; 8]));
}
