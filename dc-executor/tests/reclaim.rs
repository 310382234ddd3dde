//! Records reclaimed: an aborted insert's record goes back to the heap and the next insert
//! takes it; the keys leave the hash index and the tree; concurrent inserts, aborts, reads and
//! scans never lose a committed value and keep the heap bounded (`retire.rs`, `free_list.rs`).

mod common;

use common::kv::{cts_of, decide, load, rows, run};
use common::{TestDc, T};
use rand::{Rng, SeedableRng};
use redt_dc_executor::{free_list, AbortReason, Decision, KvOp, Procedure, RecordOp, RecordsProcedure};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

fn free_bytes(dc: &TestDc) -> u64 {
    dc.topo.nodes.iter().map(|n| free_list::free_bytes(dc.local.as_ref(), n.id, &dc.dc.layout).unwrap()).sum()
}

fn indexed(dc: &TestDc, key: u64) -> bool {
    dc.dc.index.lookup(dc.local.as_ref(), dc.node_of(key), T, key).unwrap().is_some()
}

#[test]
fn aborted_inserts_give_their_records_back_and_the_next_inserts_take_them() {
    // No ordered index: a table without trees shows the records alone (the trees are checked
    // below; their nodes' reuse in tests/btree.rs).
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    let record_bytes = dc.dc.catalog.layout(T).unwrap().record_bytes.div_ceil(64) * 64;
    let mut settled = None;
    for round in 0..10u64 {
        let keys: Vec<u64> = (0..300).map(|k| 1_000_000 * (round + 1) + k).collect();
        let (s, v) = run(&dc, round + 1, keys.iter().map(|&k| KvOp::Write(k, vec![7; 8])).collect(), None);
        assert!(v.is_commit(), "{:?}", v.abort);
        assert!(keys.iter().all(|&k| indexed(&dc, k)), "phase 1 created and published them");
        decide(&dc, &s, &v, Decision::Abort);
        for &k in &keys {
            assert!(!indexed(&dc, k), "round {round}: key {k} still in the hash index");
        }
        assert_eq!(free_bytes(&dc), 300 * record_bytes, "round {round}: every record is free");
        // The first round's abort makes the free-list directories; after it the heap never grows.
        let now = dc.heap_pointers();
        assert_eq!(*settled.get_or_insert(now.clone()), now, "round {round}: the heap grew");
    }
    // A committed insert reuses the records and keeps them.
    let keys: Vec<u64> = (0..300).map(|k| 50_000_000 + k).collect();
    let (s, v) = run(&dc, 100, keys.iter().map(|&k| KvOp::Write(k, vec![9; 8])).collect(), None);
    assert!(v.is_commit(), "{:?}", v.abort);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    assert_eq!(free_bytes(&dc), 0);
    assert_eq!(Some(dc.heap_pointers()), settled, "the commit took freed records, not fresh heap");
    for &k in &keys {
        let r = dc.dc.read_record(dc.node_of(k), T, k).unwrap().expect("committed");
        assert_eq!(r.values[0], vec![9; 8]);
        assert_eq!(r.lock, 0);
    }
}

#[test]
fn an_aborted_insert_leaves_the_tree_and_scans() {
    let dc = TestDc::new(common::topology(1, "256KiB"), false);
    load(&dc, [1, 9]);
    let keys: Vec<u64> = (2..9).collect();
    let (s, v) = run(&dc, 1, keys.iter().map(|&k| KvOp::Write(k, vec![7; 8])).collect(), None);
    assert!(v.is_commit(), "{:?}", v.abort);
    assert!(keys.iter().all(|&k| dc.in_tree(k)), "phase 1 put them in the trees");
    decide(&dc, &s, &v, Decision::Abort);
    assert!(keys.iter().all(|&k| !dc.in_tree(k) && !indexed(&dc, k)));
    let (s, v) = run(&dc, 2, vec![KvOp::Scan(0, 20, 100)], None);
    assert_eq!(rows(&v.items), vec![1, 9]);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    // Inserted again and committed, they are back everywhere.
    let (s, v) = run(&dc, 3, keys.iter().map(|&k| KvOp::Write(k, vec![8; 8])).collect(), None);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    let (_, v) = run(&dc, 4, vec![KvOp::Scan(0, 20, 100)], None);
    assert_eq!(rows(&v.items), (1..10).collect::<Vec<_>>());
}

#[test]
fn a_phase_1_that_aborts_after_creating_gives_the_records_back() {
    let dc = TestDc::new(common::topology_with(1, "256KiB", false), false);
    load(&dc, [5]);
    // A holder of key 5 makes every insert that also writes it abort in phase 1, after its
    // records were created.
    let (hold, hv) = run(&dc, 1, vec![KvOp::Write(5, vec![1; 8])], None);
    assert!(hv.is_commit());
    let mut settled = None;
    for round in 0..5u64 {
        let mut ops: Vec<KvOp> = (0..200).map(|k| KvOp::Write(1_000_000 * (round + 1) + k, vec![3; 8])).collect();
        ops.push(KvOp::Write(5, vec![2; 8]));
        let (_, v) = run(&dc, 10 + round, ops, None);
        assert!(matches!(v.abort, Some(AbortReason::LockConflict { .. })), "{:?}", v.abort);
        assert!((0..200).all(|k| !indexed(&dc, 1_000_000 * (round + 1) + k)));
        let now = dc.heap_pointers();
        assert_eq!(*settled.get_or_insert(now.clone()), now, "round {round}: the heap grew");
    }
    decide(&dc, &hold, &hv, Decision::Commit(cts_of(&hv)));
    assert_eq!(dc.dc.read_record(dc.node_of(5), T, 5).unwrap().unwrap().values[0], vec![1; 8]);
}

#[test]
fn committed_and_deleted_records_are_never_retired() {
    let dc = TestDc::new(common::topology(1, "256KiB"), false);
    load(&dc, 0..4);
    // An aborted write of an existing key, an aborted delete, a committed delete then an
    // aborted write of the deleted key: every record stays (they hold versions).
    let (s, v) = run(&dc, 1, vec![KvOp::Write(0, vec![4; 8]), KvOp::Delete(1)], None);
    decide(&dc, &s, &v, Decision::Abort);
    let (s, v) = run(&dc, 2, vec![KvOp::Delete(2)], None);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    let (s, v) = run(&dc, 3, vec![KvOp::Write(2, vec![6; 8])], None);
    decide(&dc, &s, &v, Decision::Abort);
    for k in 0..4 {
        assert!(indexed(&dc, k), "key {k} lost its record");
    }
    assert_eq!(free_bytes(&dc), 0);
    assert_eq!(dc.dc.read_record(dc.node_of(0), T, 0).unwrap().unwrap().values[0], 1i64.to_le_bytes().to_vec());
}

/// Four threads insert fresh keys, write, delete, read and scan a small shared key space and
/// commit or abort at random, with replay running. Every value a key holds at the end is the
/// last one a committed transaction wrote to it (transactions on one key are serialized by
/// their locks, and the test decides each right after its phase 1), no lock is left, and the
/// heap holds no more than the records of committed keys plus what was in flight.
#[test]
fn concurrent_inserts_aborts_and_scans_lose_nothing_and_keep_the_heap_bounded() {
    let mut dc = TestDc::new(common::topology(1, "64KiB"), true);
    let record_bytes = dc.dc.catalog.layout(T).unwrap().record_bytes.div_ceil(64) * 64;
    let start = dc.heap_pointers();
    let dc_arc = Arc::new(std::mem::replace(&mut dc, TestDc::new(common::topology(1, "64KiB"), false)));
    // Per key: the value of its last committed write, in commit order (the lock held until
    // the decision orders writers of one key; the map's lock orders the bookkeeping).
    let last: Arc<Mutex<BTreeMap<u64, Vec<u8>>>> = Arc::default();
    let fresh_committed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (dc, last, fresh_committed) = (dc_arc.clone(), last.clone(), fresh_committed.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                for i in 0..600u64 {
                    let seq = t << 32 | i;
                    let mut ops = Vec::new();
                    let fresh = 10_000_000 + seq;
                    ops.push(KvOp::Write(fresh, seq.to_le_bytes().to_vec()));
                    for _ in 0..rng.gen_range(1..4) {
                        let k = rng.gen_range(0..16u64);
                        ops.push(match rng.gen_range(0..4) {
                            0 => KvOp::Delete(k),
                            1 => KvOp::Read(k),
                            _ => KvOp::Write(k, (seq | 1 << 63).to_le_bytes().to_vec()),
                        });
                    }
                    if rng.gen_bool(0.2) {
                        ops.push(KvOp::Scan(0, 20, 32));
                    }
                    let (s, v) = run(&dc, seq, ops.clone(), None);
                    if !v.is_commit() || rng.gen_bool(0.5) {
                        decide(&dc, &s, &v, Decision::Abort);
                        continue;
                    }
                    let mut l = last.lock().unwrap();
                    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
                    for op in &ops {
                        match op {
                            KvOp::Write(k, bytes) => {
                                l.insert(*k, bytes.clone());
                            }
                            KvOp::Delete(k) => {
                                l.insert(*k, vec![0; 8]);
                            }
                            _ => {}
                        }
                    }
                    fresh_committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut dc = Arc::try_unwrap(dc_arc).ok().expect("threads joined");
    dc.stop_replay();
    let last = last.lock().unwrap();
    for (&k, want) in last.iter() {
        let got = dc.dc.read_record(dc.node_of(k), T, k).unwrap().map(|r| r.values[0].clone()).unwrap_or(vec![0; 8]);
        assert_eq!(&got, want, "key {k}");
    }
    for n in &dc.topo.nodes {
        assert_eq!(dc.dc.locked_records(n.id).unwrap(), vec![], "locks left on {}", n.id);
    }
    // Every fresh key that was not committed is gone from the index.
    let keys: BTreeSet<u64> = (0..4u64).flat_map(|t| (0..600u64).map(move |i| 10_000_000 + (t << 32 | i))).collect();
    let committed_fresh = keys.iter().filter(|&&k| last.contains_key(&k)).count() as u64;
    assert_eq!(committed_fresh, fresh_committed.load(std::sync::atomic::Ordering::Relaxed));
    for &k in keys.iter().filter(|k| !last.contains_key(k)) {
        let r = dc.dc.read_record(dc.node_of(k), T, k).unwrap();
        assert!(r.is_none(), "aborted insert of key {k} still indexed: {r:?}");
    }
    // The heap: the committed fresh keys, the 16 shared keys, a free list of what was in
    // flight at once, the trees and the free-list directories — far below the 2,400 inserts.
    let grown: u64 = dc.heap_pointers().iter().zip(&start).map(|(a, b)| a - b).sum();
    let bound = (committed_fresh + 16 + 64) * record_bytes + 256 * 1024;
    assert!(grown <= bound, "heap grew {grown} bytes, bound {bound} ({committed_fresh} committed inserts)");
}

#[test]
fn a_committed_creation_is_kept_even_empty() {
    let dc = TestDc::new(common::topology(1, "256KiB"), false);
    // An explicit creation (every cell zero) commits: the record is data from then on, and
    // neither an aborted write nor a reader that lets go of it retires it.
    let create: Arc<dyn Procedure> = Arc::new(RecordsProcedure::new(&[RecordOp::Create { table: T, key: 42 }], |_| 1));
    let s = common::kv::sub(&dc, 1, create, None);
    let v = dc.executor().execute(&s, 1).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    assert!(indexed(&dc, 42));
    let (s, v) = run(&dc, 2, vec![KvOp::Write(42, vec![1; 8])], None);
    decide(&dc, &s, &v, Decision::Abort);
    let (s, v) = run(&dc, 3, vec![KvOp::Read(42)], None);
    assert!(!v.items[0].absent, "the read found the record");
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    assert!(indexed(&dc, 42), "a committed creation was retired");
    assert_eq!(free_bytes(&dc), 0);
}
