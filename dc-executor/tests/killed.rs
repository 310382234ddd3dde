//! A node process killed in the middle of a phase 1 and started again on the MemStore it left
//! (docs/design.md §3, "Locks"; `relock.rs`): the kill lands between any two work requests,
//! also between two of one doorbell batch (the WRITE of the `Intent` entry and the lock
//! compare-and-swaps after it, a refused lock and the release of the others). Once the
//! restarted node has settled its lock words and recovery has finished what the kill left,
//! every lock word holds exactly the locks of the transactions still undecided: none is given
//! back that was never taken, none is taken from another transaction, none is left behind.

mod common;

use common::kv::{cts_of, kv, load, sub};
use common::{topology, TestDc, T};
use redt_dc_executor::verbs::{Error as VerbsError, Result as VerbsResult};
use redt_dc_executor::{
    lock, relock_after_restart, DcHandle, Decision, DoorbellBatch, EntryStatus, Executor, KvOp, Verbs, WorkRequest,
};
use redt_proto::{NodeId, Offset};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Verbs over `inner` that die once `budget` work requests have run (each verb and each
/// request of a doorbell batch counts one): the request that would exceed it and every verb
/// after it fail, as they would for a process killed between two of them. A batch cut in its
/// middle has run its first requests only.
struct Dying {
    inner: Arc<dyn Verbs>,
    budget: AtomicU64,
}

impl Dying {
    fn new(inner: Arc<dyn Verbs>, budget: u64) -> Self {
        Dying { inner, budget: AtomicU64::new(budget) }
    }

    /// Takes up to `n` requests from the budget; returns how many it got.
    fn take(&self, n: u64) -> u64 {
        let left = self.budget.load(Ordering::Acquire);
        let got = left.min(n);
        self.budget.store(left - got, Ordering::Release);
        got
    }

    /// The error every verb of a dead process gets.
    fn dead() -> VerbsError {
        VerbsError::Backend("killed".into())
    }

    fn one(&self) -> VerbsResult<()> {
        if self.take(1) == 1 {
            Ok(())
        } else {
            Err(Self::dead())
        }
    }
}

impl Verbs for Dying {
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> VerbsResult<()> {
        self.one()?;
        self.inner.read(node, offset, buf)
    }
    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> VerbsResult<()> {
        self.one()?;
        self.inner.write(node, offset, data)
    }
    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> VerbsResult<u64> {
        self.one()?;
        self.inner.compare_and_swap(node, offset, expected, new)
    }
    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> VerbsResult<u64> {
        self.one()?;
        self.inner.fetch_and_add(node, offset, add)
    }
    fn masked_compare_and_swap(
        &self,
        node: NodeId,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> VerbsResult<u64> {
        self.one()?;
        self.inner.masked_compare_and_swap(node, offset, compare, compare_mask, swap, swap_mask)
    }
    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> VerbsResult<u64> {
        self.one()?;
        self.inner.masked_fetch_and_add(node, offset, add, boundary)
    }
    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> VerbsResult<()> {
        let n = batch.len() as u64;
        let got = self.take(n);
        if got == n {
            return self.inner.post_batch(node, batch);
        }
        // Killed after the first `got` requests: they ran, in order; the rest never will.
        let mut first = DoorbellBatch::new();
        for wr in &batch.requests()[..got as usize] {
            first.push(wr.clone());
        }
        self.inner.post_batch(node, &mut first)?;
        for i in 0..got as usize {
            batch.complete(i, first.completion(i).clone());
        }
        Err(Self::dead())
    }
    fn counters(&self) -> &redt_dc_executor::VerbCounters {
        self.inner.counters()
    }
}

/// The lock word of `key`'s record.
fn lock_of(dc: &TestDc, key: u64) -> u64 {
    dc.dc.read_record(dc.node_of(key), T, key).unwrap().expect("loaded").lock
}

/// Keys of the test table held by node `a` (`NodeId(0)`), the first `n` of them.
fn keys_on_a(dc: &TestDc, n: usize) -> Vec<u64> {
    (0..).filter(|&k| dc.node_of(k) == NodeId(0)).take(n).collect()
}

/// What a restarted node does before it serves, then what recovery does with every entry
/// of `txn` the kill left unfinished: decides abort and finishes them.
fn restart_and_recover(dc: &TestDc, txn: redt_proto::TxnId) {
    let nodes: Vec<NodeId> = dc.topo.nodes.iter().map(|n| n.id).collect();
    for &n in &nodes {
        relock_after_restart(dc.local.as_ref(), &dc.dc.layout, n).expect("settle the lock words");
    }
    let mut restarted = dc.executor();
    let left = restarted.find_entries(txn, &nodes).expect("scan the rings");
    restarted.finish(txn, Decision::Abort, &left).expect("recovery's abort");
    for &n in &nodes {
        let open = redt_dc_executor::unfinished_entries(dc.local.as_ref(), n, &dc.dc.layout).unwrap();
        assert!(open.iter().all(|(_, e)| e.txn != txn), "{txn} left unfinished on {n}");
    }
}

/// An executor whose verbs die after `budget` requests.
fn dying_executor(dc: &TestDc, budget: u64) -> Executor {
    let verbs: Arc<dyn Verbs> = Arc::new(Dying::new(dc.local.clone(), budget));
    Executor::new(Arc::new(DcHandle::new(&dc.topo, verbs)), dc.hlc.clone())
}

/// Every request of the phase 1 of a transfer between two keys of one node, counted: how many
/// there are (the run with an unlimited budget).
fn requests_of_a_phase_1(ops: Vec<KvOp>) -> u64 {
    let dc = TestDc::new(topology(1, "64KiB"), false);
    let keys = keys_on_a(&dc, 3);
    load(&dc, keys.iter().copied());
    let verbs = Arc::new(Dying::new(dc.local.clone(), u64::MAX));
    let dyn_verbs: Arc<dyn Verbs> = verbs.clone();
    let mut ex = Executor::new(Arc::new(DcHandle::new(&dc.topo, dyn_verbs)), dc.hlc.clone());
    let s = sub(&dc, 1, kv(&dc, ops), None);
    ex.execute(&s, 1).expect("phase 1 runs");
    u64::MAX - verbs.budget.load(Ordering::Acquire)
}

/// The kill lands between the WRITE of the `Intent` entry and the lock compare-and-swaps of
/// the same doorbell batch: the entry lists two exclusive locks its transaction never took.
/// Meanwhile another transaction takes one of them. Recovery's abort must give back neither:
/// before the restarted node settled its lock words it gave back both, so the free word went
/// below zero (`0xFFFF_FFFF_FFFF_FFF8`: the exclusive bit of group 0 taken away from nothing)
/// and the other transaction lost its lock to a third one.
#[test]
fn a_phase_1_killed_between_its_intent_and_its_locks_gives_back_no_lock_it_never_took() {
    let dc = TestDc::new(topology(1, "64KiB"), false);
    let keys = keys_on_a(&dc, 2);
    let (k0, k1) = (keys[0], keys[1]);
    load(&dc, [k0, k1]);
    let transfer = vec![KvOp::Add(k0, -5), KvOp::Add(k1, 5)];

    // Die inside the lock batch, right after its WRITEs (the Intent entry): as many requests
    // as the same phase 1 makes on a copy of the DC before its first lock compare-and-swap.
    let budget = {
        let copy = TestDc::new(topology(1, "64KiB"), false);
        load(&copy, [k0, k1]);
        requests_before_first_lock(&copy, transfer.clone())
    };
    let s1 = sub(&dc, 1, kv(&dc, transfer.clone()), None);
    assert!(dying_executor(&dc, budget).execute(&s1, 1).is_err(), "the process dies in phase 1");
    let left = redt_dc_executor::unfinished_entries(dc.local.as_ref(), NodeId(0), &dc.dc.layout).unwrap();
    assert!(
        left.iter().any(|(_, e)| e.txn == s1.txn
            && e.status == EntryStatus::Intent
            && e.locks.iter().all(|l| l.lock_bits == lock::exclusive_bits(1))),
        "the kill leaves an Intent entry listing both exclusive locks: {left:?}"
    );
    assert_eq!((lock_of(&dc, k0), lock_of(&dc, k1)), (0, 0), "no lock was taken");

    // The restarted node settles its locks, then a new transaction takes k0 before recovery
    // finishes the first one.
    let nodes: Vec<NodeId> = dc.topo.nodes.iter().map(|n| n.id).collect();
    for &n in &nodes {
        relock_after_restart(dc.local.as_ref(), &dc.dc.layout, n).unwrap();
    }
    let s2 = sub(&dc, 2, kv(&dc, vec![KvOp::Add(k0, 1)]), None);
    let v2 = dc.executor().execute(&s2, 1).unwrap();
    assert!(v2.is_commit(), "{v2:?}");
    let mut restarted = dc.executor();
    let entries = restarted.find_entries(s1.txn, &nodes).unwrap();
    restarted.finish(s1.txn, Decision::Abort, &entries).unwrap();
    assert_eq!(lock_of(&dc, k1), 0, "a lock never taken is not given back");
    assert_eq!(lock_of(&dc, k0), lock::exclusive_bits(1), "the second transaction keeps its lock");
    let s3 = sub(&dc, 3, kv(&dc, vec![KvOp::Add(k0, 1)]), None);
    let v3 = dc.executor().execute(&s3, 1).unwrap();
    assert!(!v3.is_commit(), "a third transaction meets the second one's lock: {v3:?}");
    dc.executor().finish(s2.txn, Decision::Commit(cts_of(&v2)), &v2.entries).unwrap();
    assert_eq!((lock_of(&dc, k0), lock_of(&dc, k1)), (0, 0));
}

/// How many requests the phase 1 of `ops` on `dc` makes before its first lock
/// compare-and-swap.
fn requests_before_first_lock(dc: &TestDc, ops: Vec<KvOp>) -> u64 {
    let counted = Arc::new(Dying::new(dc.local.clone(), u64::MAX));
    let first = Arc::new(AtomicU64::new(u64::MAX));
    let (seen, counter) = (first.clone(), counted.clone());
    let inner: Arc<dyn Verbs> = counted.clone();
    let hook = move |_: &dyn Verbs, _: NodeId, b: &DoorbellBatch| {
        let cas = b.requests().iter().position(|wr| matches!(wr, WorkRequest::MaskedCompareAndSwap { .. }));
        if let (Some(i), u64::MAX) = (cas, seen.load(Ordering::Acquire)) {
            seen.store(u64::MAX - counter.budget.load(Ordering::Acquire) + i as u64, Ordering::Release);
        }
        Ok(())
    };
    let verbs: Arc<dyn Verbs> = Arc::new(redt_dc_executor::verbs::BeforeBatch::new(inner, hook));
    let mut ex = Executor::new(Arc::new(DcHandle::new(&dc.topo, verbs)), dc.hlc.clone());
    let s = sub(dc, 1, kv(dc, ops), None);
    ex.execute(&s, 1).expect("phase 1 runs");
    first.load(Ordering::Acquire)
}

/// The kill lands between a refused lock (the key is held by another transaction) and the
/// release of the lock the phase 1 did take: its `Intent` entry lists both. Recovery's abort
/// gives back the one taken and leaves the other transaction's alone.
#[test]
fn a_phase_1_killed_after_a_refused_lock_takes_no_lock_from_its_holder() {
    let dc = TestDc::new(topology(1, "64KiB"), false);
    let keys = keys_on_a(&dc, 2);
    let (k0, k1) = (keys[0], keys[1]);
    load(&dc, [k0, k1]);
    let s0 = sub(&dc, 10, kv(&dc, vec![KvOp::Add(k1, 1)]), None);
    let v0 = dc.executor().execute(&s0, 1).unwrap();
    assert!(v0.is_commit());
    // Count the requests of the refused phase 1 up to the end of its lock batch: die right after.
    let transfer = vec![KvOp::Add(k0, -5), KvOp::Add(k1, 5)];
    let budget = {
        let copy = TestDc::new(topology(1, "64KiB"), false);
        load(&copy, [k0, k1]);
        let hold = sub(&copy, 10, kv(&copy, vec![KvOp::Add(k1, 1)]), None);
        assert!(copy.executor().execute(&hold, 1).unwrap().is_commit());
        let counted = Arc::new(Dying::new(copy.local.clone(), u64::MAX));
        let end = Arc::new(AtomicU64::new(u64::MAX));
        let (seen, counter) = (end.clone(), counted.clone());
        let inner: Arc<dyn Verbs> = counted.clone();
        let hook = move |_: &dyn Verbs, _: NodeId, b: &DoorbellBatch| {
            let locks = b.requests().iter().any(|wr| matches!(wr, WorkRequest::MaskedCompareAndSwap { .. }));
            if locks && seen.load(Ordering::Acquire) == u64::MAX {
                seen.store(u64::MAX - counter.budget.load(Ordering::Acquire) + b.len() as u64, Ordering::Release);
            }
            Ok(())
        };
        let verbs: Arc<dyn Verbs> = Arc::new(redt_dc_executor::verbs::BeforeBatch::new(inner, hook));
        let mut ex = Executor::new(Arc::new(DcHandle::new(&copy.topo, verbs)), copy.hlc.clone());
        let v = ex.execute(&sub(&copy, 1, kv(&copy, transfer.clone()), None), 1).unwrap();
        assert!(!v.is_commit(), "k1 is held: {v:?}");
        end.load(Ordering::Acquire)
    };
    let s1 = sub(&dc, 1, kv(&dc, transfer), None);
    assert!(dying_executor(&dc, budget).execute(&s1, 1).is_err(), "the process dies in phase 1");
    assert_eq!(lock_of(&dc, k0), lock::exclusive_bits(1), "the kill left k0 locked");
    restart_and_recover(&dc, s1.txn);
    assert_eq!(lock_of(&dc, k0), 0, "the lock taken is given back");
    assert_eq!(lock_of(&dc, k1), lock::exclusive_bits(1), "the holder keeps its lock");
    dc.executor().finish(s0.txn, Decision::Commit(cts_of(&v0)), &v0.entries).unwrap();
    assert_eq!((lock_of(&dc, k0), lock_of(&dc, k1)), (0, 0));
}

/// A kill after every number of requests of a phase 1, with and without a third key held by
/// another transaction: after the restart and recovery every lock word holds what the
/// undecided transactions hold, and nothing more.
#[test]
fn a_phase_1_killed_anywhere_leaves_every_lock_word_exact_after_recovery() {
    for held in [false, true] {
        let probe = TestDc::new(topology(1, "64KiB"), false);
        let keys = keys_on_a(&probe, 3);
        let k2 = keys[2];
        drop(probe);
        let ops = |held: bool| {
            let mut ops = vec![KvOp::Add(keys[0], -5), KvOp::Add(keys[1], 5)];
            if held {
                ops.push(KvOp::Read(k2));
            }
            ops
        };
        let total = requests_of_a_phase_1(ops(false)) + 8;
        for budget in 0..total {
            let dc = TestDc::new(topology(1, "64KiB"), false);
            load(&dc, keys.iter().copied());
            let holder = held.then(|| {
                let s = sub(&dc, 10, kv(&dc, vec![KvOp::Add(k2, 1)]), None);
                let v = dc.executor().execute(&s, 1).unwrap();
                assert!(v.is_commit());
                (s, v)
            });
            let s1 = sub(&dc, 1, kv(&dc, ops(held)), None);
            let out = dying_executor(&dc, budget).execute(&s1, 1);
            restart_and_recover(&dc, s1.txn);
            let want_k2 = if held { lock::exclusive_bits(1) } else { 0 };
            let words = (lock_of(&dc, keys[0]), lock_of(&dc, keys[1]), lock_of(&dc, k2));
            assert_eq!(words, (0, 0, want_k2), "killed after {budget} requests (held: {held}; phase 1: {out:?})");
            if let Some((s, v)) = holder {
                dc.executor().finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
            }
            let again = sub(&dc, 2, kv(&dc, ops(false)), None);
            let v = dc.executor().execute(&again, 1).unwrap();
            assert!(v.is_commit(), "after a kill at {budget} (held: {held}) the keys are free: {v:?}");
            dc.executor().finish(again.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
            let words = (lock_of(&dc, keys[0]), lock_of(&dc, keys[1]), lock_of(&dc, k2));
            assert_eq!(words, (0, 0, 0));
        }
    }
}

/// A kill after every number of requests of a phase 2 (a commit): the restarted node and the
/// decision's second delivery leave the entries committed (replay applies them) and no lock
/// held, also when the kill cut the finishing batch between the entry's `Committed` status and
/// the release of its locks (a release nobody would make again: the entry reads as finished).
#[test]
fn a_phase_2_killed_anywhere_leaves_no_lock_after_the_restart() {
    let probe = TestDc::new(topology(1, "64KiB"), false);
    let keys = keys_on_a(&probe, 2);
    drop(probe);
    let transfer = vec![KvOp::Add(keys[0], -5), KvOp::Add(keys[1], 5)];
    for budget in 0..16 {
        let dc = TestDc::new(topology(1, "64KiB"), false);
        load(&dc, keys.iter().copied());
        let s = sub(&dc, 1, kv(&dc, transfer.clone()), None);
        let v = dc.executor().execute(&s, 1).unwrap();
        assert!(v.is_commit(), "{v:?}");
        let decision = Decision::Commit(cts_of(&v));
        let _ = dying_executor(&dc, budget).finish(s.txn, decision, &v.entries);
        let nodes: Vec<NodeId> = dc.topo.nodes.iter().map(|n| n.id).collect();
        for &n in &nodes {
            relock_after_restart(dc.local.as_ref(), &dc.dc.layout, n).unwrap();
        }
        dc.executor().finish_again(s.txn, decision, &v.entries).unwrap();
        let words = (lock_of(&dc, keys[0]), lock_of(&dc, keys[1]));
        assert_eq!(words, (0, 0), "phase 2 killed after {budget} requests");
        for &n in &nodes {
            let ring = redt_dc_executor::ring_entries(dc.local.as_ref(), n, &dc.dc.layout).unwrap();
            let mine: Vec<_> = ring.iter().filter(|(_, _, e)| e.txn == s.txn).map(|(_, _, e)| e.status).collect();
            assert!(mine.iter().all(|&st| st == EntryStatus::Committed), "killed after {budget}: {mine:?}");
        }
    }
}
