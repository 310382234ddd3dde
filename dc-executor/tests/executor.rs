//! The executor against real in-process MemStores: cell-level conflicts, concurrent
//! transfers that keep their total, and no lock left behind (RedT §4.2; CREST §4.2).

mod common;

use common::{TestDc, T};
use rand::{Rng, SeedableRng};
use redt_dc_executor::{
    lock, AbortReason, Access, Clock, Decision, KvOp, KvProcedure, LockConflictKind, Procedure, ReadView, SubTxn,
    SystemClock, UserAbort, Vote, Write,
};
use redt_proto::{Cts, NodeId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A procedure with explicit accesses and fixed writes.
#[derive(Debug)]
struct Fixed {
    accesses: Vec<Access>,
    writes: Vec<Write>,
}

impl Procedure for Fixed {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }
    fn run(&self, _: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        Ok(self.writes.clone())
    }
}

fn sub(dc: &TestDc, seq: u64, p: Arc<dyn Procedure>) -> SubTxn {
    common::kv::sub(dc, seq, p, None)
}

fn cts_of(v: &Vote) -> Cts {
    let seen = v.items.iter().flat_map(|i| i.versions.iter().map(|(_, v)| v.cts())).max().unwrap_or(Cts(0));
    Cts(v.hlc.max(seen).0 + 1)
}

fn load(dc: &TestDc, keys: impl IntoIterator<Item = u64>, value: i64) {
    for k in keys {
        dc.dc.insert_record(dc.node_of(k), T, k, &[&value.to_le_bytes()]).unwrap();
    }
}

fn balance(dc: &TestDc, k: u64) -> i64 {
    let r = dc.dc.read_record(dc.node_of(k), T, k).unwrap().expect("loaded");
    i64::from_le_bytes(r.values[0][..8].try_into().unwrap())
}

#[test]
fn writes_to_different_cells_of_one_record_both_commit() {
    let dc = TestDc::new(common::topology(4, "64KiB"), false);
    load(&dc, [7], 0);
    let w = |cell: u16, v: u8| -> Arc<dyn Procedure> {
        Arc::new(Fixed {
            accesses: vec![Access { table: T, key: 7, read: 0, write: 1 << cell, upsert: false }],
            writes: vec![Write { access: 0, cell, value: vec![v; 8] }],
        })
    };
    let mut e1 = dc.executor();
    let mut e2 = dc.executor();
    let s1 = sub(&dc, 1, w(0, 0xA1));
    let s2 = sub(&dc, 2, w(3, 0xB2));
    // Both hold their locks at the same time: neither conflicts.
    let v1 = e1.execute(&s1, SystemClock.now_ms()).unwrap();
    let v2 = e2.execute(&s2, SystemClock.now_ms()).unwrap();
    assert!(v1.is_commit(), "{:?}", v1.abort);
    assert!(v2.is_commit(), "{:?}", v2.abort);
    e1.finish(s1.txn, Decision::Commit(cts_of(&v1)), &v1.entries).unwrap();
    e2.finish(s2.txn, Decision::Commit(cts_of(&v2)), &v2.entries).unwrap();
    let r = dc.dc.read_record(dc.node_of(7), T, 7).unwrap().unwrap();
    assert_eq!(r.values[0], vec![0xA1; 8]);
    assert_eq!(r.values[3], vec![0xB2; 8]);
    assert_eq!(r.lock, 0, "every lock released");
    assert_eq!(r.versions[0].cts(), cts_of(&v1));
    assert_eq!(r.versions[0].update_counter(), 1);
    assert_eq!(r.counters[0], 1);
    assert_eq!(r.counters[3], 1);
    assert_eq!(r.counters[1], 0);
}

#[test]
fn a_read_and_a_write_of_one_cell_conflict_either_way() {
    let dc = TestDc::new(common::topology(2, "64KiB"), false);
    load(&dc, [1], 5);
    let read: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: vec![Access { table: T, key: 1, read: 0b01, write: 0, upsert: false }],
        writes: vec![],
    });
    let write: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: vec![Access { table: T, key: 1, read: 0, write: 0b01, upsert: false }],
        writes: vec![Write { access: 0, cell: 0, value: vec![1; 8] }],
    });
    let other_cell: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: vec![Access { table: T, key: 1, read: 0, write: 0b10, upsert: false }],
        writes: vec![Write { access: 0, cell: 1, value: vec![2; 8] }],
    });
    let (mut e1, mut e2) = (dc.executor(), dc.executor());
    for (first, second, kind) in
        [(&read, &write, LockConflictKind::Shared), (&write, &read, LockConflictKind::Exclusive)]
    {
        let s1 = sub(&dc, 10, first.clone());
        let s2 = sub(&dc, 11, second.clone());
        let v1 = e1.execute(&s1, SystemClock.now_ms()).unwrap();
        assert!(v1.is_commit());
        let v2 = e2.execute(&s2, SystemClock.now_ms()).unwrap();
        assert_eq!(v2.abort, Some(AbortReason::LockConflict { access: 0, kind }));
        assert!(v2.entries.is_empty());
        // A write of the other cell goes through meanwhile.
        let s3 = sub(&dc, 12, other_cell.clone());
        let v3 = e2.execute(&s3, SystemClock.now_ms()).unwrap();
        assert!(v3.is_commit());
        e2.finish(s3.txn, Decision::Abort, &v3.entries).unwrap();
        e1.finish(s1.txn, Decision::Abort, &v1.entries).unwrap();
    }
    let r = dc.dc.read_record(dc.node_of(1), T, 1).unwrap().unwrap();
    assert_eq!(r.lock, 0);
    assert_eq!(balance(&dc, 1), 5, "aborted writes left no trace");
}

#[test]
fn readers_share_a_cell_and_block_a_writer() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, [3], 0);
    let read = || -> Arc<dyn Procedure> {
        Arc::new(Fixed {
            accesses: vec![Access { table: T, key: 3, read: 1, write: 0, upsert: false }],
            writes: vec![],
        })
    };
    let mut votes = Vec::new();
    let mut ex = dc.executor();
    for i in 0..lock::MAX_READERS {
        let s = sub(&dc, 100 + i, read());
        let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
        assert!(v.is_commit(), "reader {i}: {:?}", v.abort);
        votes.push((s, v));
    }
    let s = sub(&dc, 200, read());
    assert!(
        matches!(ex.execute(&s, SystemClock.now_ms()).unwrap().abort, Some(AbortReason::LockConflict { .. })),
        "reader limit"
    );
    for (s, v) in votes {
        ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    }
    assert_eq!(dc.dc.read_record(dc.node_of(3), T, 3).unwrap().unwrap().lock, 0);
}

#[test]
fn missing_records_vote_abort_and_upserts_create_them() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let mut ex = dc.executor();
    let p: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: vec![Access { table: T, key: 9, read: 1, write: 0, upsert: false }],
        writes: vec![],
    });
    let v = ex.execute(&sub(&dc, 1, p), SystemClock.now_ms()).unwrap();
    assert_eq!(v.abort, Some(AbortReason::NotFound { access: 0 }));
    let p: Arc<dyn Procedure> = Arc::new(KvProcedure::new(T, 8, vec![KvOp::Add(9, 4), KvOp::Add(9, 3)]));
    let s = sub(&dc, 2, p);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit());
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(balance(&dc, 9), 7);
}

#[test]
fn writes_outside_the_plan_are_refused_and_release_locks() {
    let dc = TestDc::new(common::topology(2, "64KiB"), false);
    load(&dc, [4], 0);
    let mut ex = dc.executor();
    let p: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: vec![Access { table: T, key: 4, read: 0, write: 0b01, upsert: false }],
        writes: vec![Write { access: 0, cell: 1, value: vec![1; 8] }],
    });
    assert!(ex.execute(&sub(&dc, 1, p), SystemClock.now_ms()).is_err());
    assert_eq!(dc.dc.read_record(dc.node_of(4), T, 4).unwrap().unwrap().lock, 0);
}

/// Several executors, each on its own thread, transfer random amounts between random
/// accounts spread over both nodes; replay runs throughout and the ring wraps many times.
/// Commit or abort, the total never changes, and once quiet no lock is held.
#[test]
fn concurrent_transfers_keep_the_total_and_leave_no_lock() {
    let mut dc = TestDc::new(common::topology(1, "16KiB"), true);
    const ACCOUNTS: u64 = 12;
    const START: i64 = 1_000;
    load(&dc, 0..ACCOUNTS, START);
    let dc = Arc::new(std::mem::replace(&mut dc, TestDc::new(common::topology(1, "64KiB"), false)));
    let committed = Arc::new(AtomicU64::new(0));
    let aborted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (dc, committed, aborted) = (dc.clone(), committed.clone(), aborted.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                let mut ex = dc.executor();
                for i in 0..1500u64 {
                    let a = rng.gen_range(0..ACCOUNTS);
                    let mut b = rng.gen_range(0..ACCOUNTS);
                    while b == a {
                        b = rng.gen_range(0..ACCOUNTS);
                    }
                    let amount = rng.gen_range(1..50);
                    let p: Arc<dyn Procedure> =
                        Arc::new(KvProcedure::new(T, 8, vec![KvOp::Add(a, -amount), KvOp::Add(b, amount)]));
                    let s = sub(&dc, (t << 32) | i, p);
                    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
                    if !v.is_commit() {
                        aborted.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    // Decide commit for most, abort some after the pre-write.
                    if rng.gen_bool(0.9) {
                        ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
                        committed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
                        aborted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut dc = Arc::try_unwrap(dc).ok().expect("threads joined");
    dc.stop_replay();
    let total: i64 = (0..ACCOUNTS).map(|k| balance(&dc, k)).sum();
    assert_eq!(total, START * ACCOUNTS as i64);
    for k in 0..ACCOUNTS {
        assert_eq!(dc.dc.read_record(dc.node_of(k), T, k).unwrap().unwrap().lock, 0, "lock left on {k}");
    }
    assert!(committed.load(Ordering::Relaxed) > 1000, "committed {}", committed.load(Ordering::Relaxed));
    assert!(aborted.load(Ordering::Relaxed) > 0, "contention produced no abort");
    // The ring was drained: head caught up with tail on both nodes.
    for n in [NodeId(0), NodeId(1)] {
        let region = dc.local.region(n).unwrap();
        let l = dc.dc.layout;
        let mut ht = [0u8; 16];
        region.read(l.ring_off, &mut ht);
        assert_eq!(ht[..8], ht[8..], "ring of {n} not drained");
        let tail = u64::from_le_bytes(ht[8..].try_into().unwrap());
        assert!(tail > 4 * l.ring_slots(), "the ring of {n} wrapped only {tail} slots");
    }
}

/// Many executors creating the same missing key at the same moment (upsert, released
/// together by a barrier) end with exactly one record per key: every increment lands on it
/// (the insert-lock stripes serialise creation; without them duplicates appear).
#[test]
fn concurrent_upserts_of_one_key_create_one_record() {
    // Replay runs so that aborted attempts do not fill the ring.
    let dc = Arc::new(TestDc::new(common::topology(1, "256KiB"), true));
    const KEYS: u64 = 300;
    const THREADS: u64 = 4;
    let barrier = Arc::new(std::sync::Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dc, barrier) = (dc.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut ex = dc.executor();
                let mut seq = 0;
                for k in 0..KEYS {
                    barrier.wait();
                    loop {
                        seq += 1;
                        let p: Arc<dyn Procedure> = Arc::new(KvProcedure::new(T, 8, vec![KvOp::Add(5000 + k, 1)]));
                        let s = sub(&dc, (t << 40) | seq, p);
                        let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
                        if v.is_commit() {
                            ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for k in 5000..5000 + KEYS {
        assert_eq!(balance(&dc, k), THREADS as i64, "key {k}: increments lost to a duplicate record");
    }
}

/// A RECORD that arrives after its entry was finished and its slots released and reused (a
/// late or repeated message) writes nothing: the vote word it would have swapped now lies in
/// another transaction's entry (found by the simulation, seed 193: a stray abort record
/// corrupted a later entry and stopped replay with its locks held).
#[test]
fn a_late_record_never_writes_into_a_reused_slot() {
    let dc = TestDc::new(common::topology(1, "4KiB"), false);
    let layout = dc.dc.layout;
    load(&dc, [2], 0);
    let node = dc.node_of(2);
    let region = dc.local.region(node).unwrap().clone();
    let mut replayer = redt_dc_executor::Replayer::new(layout, node);
    let write = |v: u8| -> Arc<dyn Procedure> {
        Arc::new(Fixed {
            accesses: vec![Access { table: T, key: 2, read: 0, write: 1, upsert: false }],
            writes: vec![Write { access: 0, cell: 0, value: vec![v; 8] }],
        })
    };
    let mut ex = dc.executor();
    let s1 = sub(&dc, 1, write(1));
    let v1 = ex.execute(&s1, SystemClock.now_ms()).unwrap();
    assert!(v1.is_commit());
    let old = v1.entries[0];
    // Recording into the live entry works, and repeats.
    assert!(ex.record(s1.txn, redt_dc_executor::Decision::Abort, redt_proto::Ballot(0), &v1.entries).unwrap());
    ex.finish(s1.txn, Decision::Abort, &v1.entries).unwrap();
    assert!(ex.record(s1.txn, redt_dc_executor::Decision::Abort, redt_proto::Ballot(0), &v1.entries).unwrap());
    let slots = layout.ring_slots();
    let old_slot = old.index % slots;
    // Abort and release entries until one covers the old entry's first slot on a later lap.
    let mut seq = 2;
    let newer = loop {
        replayer.step(&region, &mut |_| redt_dc_executor::Apply::Done);
        let s = sub(&dc, seq, write(seq as u8));
        seq += 1;
        let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
        assert!(v.is_commit(), "{:?}", v.abort);
        let e = v.entries[0];
        let covers = (0..e.slots).any(|k| (e.index + k) % slots == old_slot);
        if e.index > old.index && covers {
            break (s, v);
        }
        ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
        assert!(seq < 10_000, "the ring laps");
    };
    let before = redt_dc_executor::ring::read_entry(dc.dc.verbs.as_ref(), node, &layout, newer.1.entries[0].index)
        .expect("the newer entry decodes");
    // The late RECORD of the first transaction: refused, nothing written.
    let recorded = ex.record(s1.txn, redt_dc_executor::Decision::Abort, redt_proto::Ballot(0), &v1.entries).unwrap();
    assert!(!recorded, "a released entry records nothing");
    let after = redt_dc_executor::ring::read_entry(dc.dc.verbs.as_ref(), node, &layout, newer.1.entries[0].index)
        .expect("the newer entry still decodes");
    assert_eq!(before, after, "the newer entry is untouched");
    ex.finish(newer.0.txn, Decision::Abort, &newer.1.entries).unwrap();
    assert_eq!(dc.dc.read_record(node, T, 2).unwrap().unwrap().lock, 0);
}

/// `DcHandle::locked_records` (for `redt status --locks`) lists exactly the records a phase 1
/// left locked on each node, and nothing once the decision released them.
#[test]
fn locked_records_lists_what_an_undecided_phase_1_holds() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, 0..40, 0);
    let held = |dc: &TestDc| -> Vec<u64> {
        let mut keys: Vec<u64> = dc
            .topo
            .nodes
            .iter()
            .flat_map(|n| dc.dc.locked_records(n.id).unwrap())
            .map(|(table, key, word)| {
                assert_eq!(table, T);
                assert_ne!(word, 0);
                key
            })
            .collect();
        keys.sort_unstable();
        keys
    };
    assert!(held(&dc).is_empty(), "nothing locked after the load");
    let p: Arc<dyn Procedure> = Arc::new(Fixed {
        accesses: [5u64, 12, 33]
            .iter()
            .map(|&key| Access { table: T, key, read: 0, write: 1, upsert: false })
            .collect(),
        writes: vec![],
    });
    let mut ex = dc.executor();
    let s = sub(&dc, 1, p);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    assert_eq!(held(&dc), vec![5, 12, 33], "both nodes scanned, only the phase 1's records");
    ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
    assert!(held(&dc).is_empty(), "released by the decision");
}
