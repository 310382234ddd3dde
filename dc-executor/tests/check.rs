//! Optimistic transactions on the data path (docs/design.md, "Optimistic transactions:
//! versioned reads and CHECK"): a CHECK ([`KvOp::Check`]) votes commit only on replicas whose
//! cell is at the version expected, under a shared lock held until the decision, and votes
//! abort naming the replica whose version is older (it lags) or newer; the versioned read
//! ([`read_versions`]) takes no lock, reads committed images, and is busy only while a writer
//! holds the cell exclusively.

mod common;

use common::{TestDc, T};
use redt_dc_executor::{
    read_versions, AbortReason, CellRead, Decision, Executor, KvOp, LocalAccess, LockConflictKind, Procedure, SubTxn,
    Vote,
};
use redt_proto::{Cts, NodeId};
use std::sync::Arc;

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);

/// Phase 1 of `ops` as transaction `seq`, every access held on each of `nodes` (as if each
/// held a replica of every key: two replicas of one partition in one DC, the executor's
/// "every local replica").
fn run_on(dc: &TestDc, ex: &mut Executor, seq: u64, ops: Vec<KvOp>, nodes: &[NodeId]) -> (SubTxn, Vote) {
    let p = common::kv::kv(dc, ops);
    let mut s = common::kv::sub(dc, seq, p.clone(), None);
    s.local = (0..p.accesses().len())
        .flat_map(|access| nodes.iter().map(move |&node| LocalAccess { access, node }))
        .collect();
    let v = ex.execute(&s, 1).expect("phase 1 runs");
    (s, v)
}

/// Runs and commits `ops` on `nodes`; the vote must be a commit.
fn commit_on(dc: &TestDc, seq: u64, ops: Vec<KvOp>, nodes: &[NodeId]) -> Cts {
    let mut ex = dc.executor();
    let (s, v) = run_on(dc, &mut ex, seq, ops, nodes);
    assert!(v.is_commit(), "{:?}", v.abort);
    let cts = common::kv::cts_of(&v);
    ex.finish(s.txn, Decision::Commit(cts), &v.entries).expect("phase 2 runs");
    cts
}

/// A cell's value as a little-endian `i64` (what [`KvOp::Add`] adds to).
fn int(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
    i64::from_le_bytes(b)
}

/// Cell 0's raw version word of `key` on `node` (0 without a record).
fn version(dc: &TestDc, node: NodeId, key: u64) -> u64 {
    dc.dc.read_record(node, T, key).unwrap().map_or(0, |r| r.versions[0].0)
}

/// Every lock word of `key`'s records on both nodes is free.
fn unlocked(dc: &TestDc, key: u64) -> bool {
    [A, B].iter().all(|&n| dc.dc.read_record(n, T, key).unwrap().is_none_or(|r| r.lock == 0))
}

#[test]
fn a_check_passes_at_the_version_and_fails_on_an_older_or_newer_replica() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let key = 7;
    // Both replicas hold the key at one version; then a commit reaches A only (B lags, as a
    // replica a commit left behind does until its catch-up).
    commit_on(&dc, 1, vec![KvOp::Add(key, 1)], &[A, B]);
    let v1 = version(&dc, A, key);
    assert_eq!(v1, version(&dc, B, key));
    commit_on(&dc, 2, vec![KvOp::Add(key, 2)], &[A]);
    let v2 = version(&dc, A, key);
    assert!(v2 > v1 && version(&dc, B, key) == v1);

    let mut ex = dc.executor();
    // Expecting the newest: A passes, B (older) votes abort, naming B.
    let (_, v) = run_on(&dc, &mut ex, 3, vec![KvOp::Check(key, v2), KvOp::Add(key, 3)], &[A, B]);
    assert_eq!(v.abort, Some(AbortReason::StaleRead { access: 0, node: B }), "{v:?}");
    assert!(v.entries.is_empty() && unlocked(&dc, key), "an abort vote holds nothing");
    // Expecting the older one: B passes, A (newer) votes abort, naming A.
    let (_, v) = run_on(&dc, &mut ex, 4, vec![KvOp::Check(key, v1)], &[A, B]);
    assert_eq!(v.abort, Some(AbortReason::StaleRead { access: 0, node: A }));
    // On the fresh replica alone it passes, and the append it carries commits.
    let (s, v) = run_on(&dc, &mut ex, 5, vec![KvOp::Check(key, v2), KvOp::Add(key, 3)], &[A]);
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(common::kv::cts_of(&v)), &v.entries).unwrap();
    let rec = dc.dc.read_record(A, T, key).unwrap().unwrap();
    assert_eq!(int(&rec.values[0]), 1 + 2 + 3);
    // Nothing else was ever written: the failed CHECKs' adds were not applied.
    assert_eq!(int(&dc.dc.read_record(B, T, key).unwrap().unwrap().values[0]), 1);
    assert!(unlocked(&dc, key));
}

#[test]
fn a_check_holds_a_shared_lock_until_the_decision_and_meets_a_writers_lock() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let key = 11;
    commit_on(&dc, 1, vec![KvOp::Add(key, 1)], &[A]);
    let v1 = version(&dc, A, key);
    let (mut checker, mut writer) = (dc.executor(), dc.executor());
    let (s, v) = run_on(&dc, &mut checker, 2, vec![KvOp::Check(key, v1)], &[A]);
    assert!(v.is_commit(), "{:?}", v.abort);
    assert_eq!(v.items[0].versions, vec![(0, redt_dc_executor::CellVersion(v1))], "a read access of cell 0");
    // A writer cannot slip in between the CHECK and its decision.
    let (_, w) = run_on(&dc, &mut writer, 3, vec![KvOp::Add(key, 2)], &[A]);
    assert_eq!(w.abort, Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Shared }));
    // Another CHECK shares the lock.
    let (s2, v2) = run_on(&dc, &mut writer, 4, vec![KvOp::Check(key, v1)], &[A]);
    assert!(v2.is_commit(), "{:?}", v2.abort);
    checker.finish(s.txn, Decision::Commit(common::kv::cts_of(&v)), &v.entries).unwrap();
    writer.finish(s2.txn, Decision::Abort, &v2.entries).unwrap();
    assert!(unlocked(&dc, key), "both decisions released their locks");
    assert_eq!(version(&dc, A, key), v1, "a CHECK writes nothing");
    // A writer holding the cell: the CHECK meets its exclusive lock (No-Wait).
    let (sw, w) = run_on(&dc, &mut writer, 5, vec![KvOp::Add(key, 2)], &[A]);
    assert!(w.is_commit());
    let (_, c) = run_on(&dc, &mut checker, 6, vec![KvOp::Check(key, v1)], &[A]);
    assert_eq!(c.abort, Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Exclusive }));
    writer.finish(sw.txn, Decision::Commit(common::kv::cts_of(&w)), &w.entries).unwrap();
    // Once it committed, the CHECK of the old version fails on the version itself.
    let (_, c) = run_on(&dc, &mut checker, 7, vec![KvOp::Check(key, v1)], &[A]);
    assert_eq!(c.abort, Some(AbortReason::StaleRead { access: 0, node: A }));
}

#[test]
fn a_check_of_a_missing_key_expects_version_zero_and_creates_nothing() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let before = dc.heap_pointers();
    let mut ex = dc.executor();
    let (s, v) = run_on(&dc, &mut ex, 1, vec![KvOp::Check(99, 0)], &[A, B]);
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(common::kv::cts_of(&v)), &v.entries).unwrap();
    let (_, v) = run_on(&dc, &mut ex, 2, vec![KvOp::Check(99, 5)], &[A]);
    assert_eq!(v.abort, Some(AbortReason::StaleRead { access: 0, node: A }));
    assert_eq!(dc.heap_pointers(), before, "a CHECK of a missing key created a record");
    // Checked absent, then added to: created by the add.
    commit_on(&dc, 3, vec![KvOp::Check(99, 0), KvOp::Add(99, 4)], &[A]);
    assert_eq!(int(&dc.dc.read_record(A, T, 99).unwrap().unwrap().values[0]), 4);
}

#[test]
fn with_version_checks_off_a_stale_check_commits() {
    // The mutant the simulation must catch (`ExecutorMutations::skip_version_checks`): the
    // same stale CHECK that votes abort above votes commit.
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    commit_on(&dc, 1, vec![KvOp::Add(5, 1)], &[A]);
    let mut ex = dc.executor();
    let (_, v) = run_on(&dc, &mut ex, 2, vec![KvOp::Check(5, 12345)], &[A]);
    assert_eq!(v.abort, Some(AbortReason::StaleRead { access: 0, node: A }));
    ex.set_version_checks(false);
    let (_, v) = run_on(&dc, &mut ex, 3, vec![KvOp::Check(5, 12345)], &[A]);
    assert!(v.is_commit(), "{:?}", v.abort);
}

#[test]
fn a_versioned_read_takes_no_lock_and_is_busy_only_under_a_writers_lock() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let key = 21;
    let missing = 22;
    assert_eq!(read_versions(&dc.dc, A, T, &[key, missing]).unwrap(), vec![CellRead::Missing; 2]);
    commit_on(&dc, 1, vec![KvOp::Add(key, 1)], &[A]);
    let v1 = version(&dc, A, key);
    let found = |got: &CellRead| match got {
        CellRead::Found { version, value } => (*version, int(value)),
        other => panic!("not found: {other:?}"),
    };
    let got = read_versions(&dc.dc, A, T, &[key, missing, key]).unwrap();
    assert_eq!(found(&got[0]), (v1, 1));
    assert_eq!(got[1], CellRead::Missing);
    assert_eq!(got[2], got[0]);
    assert!(unlocked(&dc, key), "a versioned read takes no lock");
    // A reader's shared lock does not make the cell busy.
    let mut ex = dc.executor();
    let (s, v) = run_on(&dc, &mut ex, 2, vec![KvOp::Check(key, v1)], &[A]);
    assert!(v.is_commit());
    assert_eq!(found(&read_versions(&dc.dc, A, T, &[key]).unwrap()[0]), (v1, 1));
    ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
    // A writer's exclusive lock does, until its decision; then the new version shows.
    let (s, v) = run_on(&dc, &mut ex, 3, vec![KvOp::Add(key, 2)], &[A]);
    assert!(v.is_commit());
    assert_eq!(read_versions(&dc.dc, A, T, &[key, missing]).unwrap(), vec![CellRead::Busy, CellRead::Missing]);
    ex.finish(s.txn, Decision::Commit(common::kv::cts_of(&v)), &v.entries).unwrap();
    let (v2, list) = found(&read_versions(&dc.dc, A, T, &[key]).unwrap()[0]);
    assert_eq!((v2, list), (version(&dc, A, key), 3));
    assert!(v2 > v1);
    // An aborted writer leaves the committed image.
    let (s, v) = run_on(&dc, &mut ex, 4, vec![KvOp::Add(key, 3)], &[A]);
    assert!(v.is_commit());
    ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
    assert_eq!(found(&read_versions(&dc.dc, A, T, &[key]).unwrap()[0]), (v2, 3));
}

#[test]
fn a_check_never_joins_a_batch() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let p: Arc<dyn Procedure> = common::kv::kv(&dc, vec![KvOp::Check(1, 0), KvOp::Add(1, 1)]);
    let q: Arc<dyn Procedure> = common::kv::kv(&dc, vec![KvOp::Add(2, 1)]);
    let e = redt_dc_executor::BatchProcedure::new(vec![q, p]).unwrap_err();
    assert!(e.contains("batch member 1 checks versions"), "{e}");
}
