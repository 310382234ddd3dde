//! Reads and deletes of keys that have no record: they create nothing, lock the key's absence
//! instead, and a concurrent creation of the key is still refused until the reader decides;
//! a full heap is an abort vote that names the node (RedT §4.2; `executor.rs` module docs).

mod common;

use common::{TestDc, T};
use redt_dc_executor::{
    AbortReason, Clock, Decision, KvOp, KvProcedure, LockConflictKind, SubTxn, SystemClock, Verbs, Vote,
};
use redt_proto::{Cts, NodeId, Topology};
use std::sync::Arc;

fn kv(dc: &TestDc, seq: u64, ops: Vec<KvOp>) -> SubTxn {
    common::kv::sub(dc, seq, Arc::new(KvProcedure::new(T, 8, ops)), None)
}

fn cts_of(v: &Vote) -> Cts {
    let seen = v.items.iter().flat_map(|i| i.versions.iter().map(|(_, v)| v.cts())).max().unwrap_or(Cts(0));
    Cts(v.hlc.max(seen).0 + 1)
}

/// Every absent-key lock word of every node, non-zero ones only (offset, word).
fn held_absent_locks(dc: &TestDc) -> Vec<(NodeId, u64, u64)> {
    let layout = dc.dc.layout;
    let mut held = Vec::new();
    for n in &dc.topo.nodes {
        let mut buf = vec![0u8; layout.absent_bytes as usize];
        dc.local.read(n.id, redt_proto::Offset(layout.absent_off), &mut buf).unwrap();
        for (i, w) in buf.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(w.try_into().unwrap());
            if w != 0 {
                held.push((n.id, layout.absent_off + 8 * i as u64, w));
            }
        }
    }
    held
}

#[test]
fn reads_of_missing_keys_leave_the_heap_untouched() {
    let dc = TestDc::new(common::topology(1, "256KiB"), false);
    let mut ex = dc.executor();
    let before = dc.heap_pointers();
    // 2,000 reads of keys nobody ever wrote (the audit's 20,000 filled the heap for good).
    let s = kv(&dc, 1, (0..2000).map(|k| KvOp::Read(1_000_000 + k)).collect());
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    assert_eq!(dc.heap_pointers(), before, "a read allocated a record");
    // They read what a fresh record holds: zero at version 0.
    assert_eq!(v.items.len(), 2000);
    assert!(v.items.iter().all(|i| i.values.iter().all(|(_, x)| x.iter().all(|&b| b == 0))));
    assert!(v.items.iter().all(|i| i.versions.iter().all(|(_, ver)| ver.0 == 0)));
    assert!(!held_absent_locks(&dc).is_empty(), "absences are locked until the decision");
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(dc.heap_pointers(), before);
    assert_eq!(held_absent_locks(&dc), vec![], "the decision released every absent-key lock");
    for k in 0..2000 {
        let key = 1_000_000 + k;
        assert_eq!(dc.dc.read_record(dc.node_of(key), T, key).unwrap(), None, "key {key} was created");
    }
    // An abort releases them too.
    let s = kv(&dc, 2, (0..500).map(|k| KvOp::Read(5_000_000 + k)).collect());
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Abort, &v.entries).unwrap();
    assert_eq!(held_absent_locks(&dc), vec![]);
    assert_eq!(dc.heap_pointers(), before);
}

#[test]
fn a_key_read_as_absent_cannot_be_created_until_the_reader_decides() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let (mut reader, mut writer) = (dc.executor(), dc.executor());
    let before = dc.heap_pointers();
    let r = kv(&dc, 1, vec![KvOp::Read(42)]);
    let vr = reader.execute(&r, SystemClock.now_ms()).unwrap();
    assert!(vr.is_commit());
    // A concurrent insert of the key is detected: refused (No-Wait), nothing allocated.
    for op in [KvOp::Write(42, vec![7; 8]), KvOp::Add(42, 1), KvOp::Append(42, 3)] {
        let w = kv(&dc, 2, vec![op]);
        let vw = writer.execute(&w, SystemClock.now_ms()).unwrap();
        assert_eq!(vw.abort, Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Absence }));
        assert!(vw.entries.is_empty());
    }
    assert_eq!(dc.heap_pointers(), before);
    // Another reader of the same absent key shares the lock.
    let r2 = kv(&dc, 3, vec![KvOp::Read(42)]);
    let vr2 = writer.execute(&r2, SystemClock.now_ms()).unwrap();
    assert!(vr2.is_commit(), "{:?}", vr2.abort);
    reader.finish(r.txn, Decision::Commit(cts_of(&vr)), &vr.entries).unwrap();
    let w = kv(&dc, 4, vec![KvOp::Write(42, vec![7; 8])]);
    assert_eq!(
        writer.execute(&w, SystemClock.now_ms()).unwrap().abort,
        Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Absence })
    );
    writer.finish(r2.txn, Decision::Abort, &vr2.entries).unwrap();
    // Both readers decided: the key can be created now.
    let w = kv(&dc, 5, vec![KvOp::Write(42, vec![7; 8])]);
    let vw = writer.execute(&w, SystemClock.now_ms()).unwrap();
    assert!(vw.is_commit(), "{:?}", vw.abort);
    writer.finish(w.txn, Decision::Commit(cts_of(&vw)), &vw.entries).unwrap();
    let rec = dc.dc.read_record(dc.node_of(42), T, 42).unwrap().expect("created by the write");
    assert_eq!(rec.values[0], vec![7; 8]);
    assert_eq!(rec.lock, 0);
    assert_eq!(held_absent_locks(&dc), vec![]);
    // A reader of an existing key locks the record as before, and conflicts with the writer.
    let r = kv(&dc, 6, vec![KvOp::Read(42)]);
    let vr = reader.execute(&r, SystemClock.now_ms()).unwrap();
    assert_eq!(vr.items[0].values[0].1, vec![7; 8]);
    let w = kv(&dc, 7, vec![KvOp::Write(42, vec![8; 8])]);
    assert_eq!(
        writer.execute(&w, SystemClock.now_ms()).unwrap().abort,
        Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Shared })
    );
    reader.finish(r.txn, Decision::Abort, &vr.entries).unwrap();
    assert_eq!(held_absent_locks(&dc), vec![]);
}

#[test]
fn a_key_created_while_its_reader_was_not_looking_is_a_conflict() {
    // The writer holds the new record's lock (undecided) when the reader arrives: the reader
    // finds the record and conflicts on it, as with any record.
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let (mut reader, mut writer) = (dc.executor(), dc.executor());
    let w = kv(&dc, 1, vec![KvOp::Write(9, vec![1; 8])]);
    let vw = writer.execute(&w, SystemClock.now_ms()).unwrap();
    assert!(vw.is_commit());
    let r = kv(&dc, 2, vec![KvOp::Read(9)]);
    assert_eq!(
        reader.execute(&r, SystemClock.now_ms()).unwrap().abort,
        Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Exclusive })
    );
    // The writer aborts: its record, never written, goes back to the heap, and the reader
    // now reads the key as absent.
    writer.finish(w.txn, Decision::Abort, &vw.entries).unwrap();
    assert_eq!(dc.dc.read_record(dc.node_of(9), T, 9).unwrap(), None, "the aborted insert's record was retired");
    let before = dc.heap_pointers();
    let vr = reader.execute(&r, SystemClock.now_ms()).unwrap();
    assert!(vr.is_commit(), "{:?}", vr.abort);
    assert!(vr.items[0].absent);
    assert!(!held_absent_locks(&dc).is_empty(), "the key's absence is locked");
    reader.finish(r.txn, Decision::Commit(cts_of(&vr)), &vr.entries).unwrap();
    assert_eq!(dc.heap_pointers(), before);
    // Created and aborted again: retired again, from the record the free list gave back.
    let vw = writer.execute(&w, SystemClock.now_ms()).unwrap();
    assert!(vw.is_commit());
    writer.finish(w.txn, Decision::Abort, &vw.entries).unwrap();
    assert_eq!(dc.dc.read_record(dc.node_of(9), T, 9).unwrap(), None);
}

/// One DC, one node, 8-byte cells, and a heap that holds exactly `records` records (no
/// ordered index, whose trees would take heap too).
fn tiny_heap(records: u64) -> Topology {
    let cfg = redt_proto::MemStoreConfig { size_bytes: 0, index_bytes: 4096, ring_bytes: 16384 };
    // Superblock, index, ring, decision log and absent-key locks, then 128-byte records.
    let fixed = 192 + 4096 + 16384 + cfg.decision_log_bytes() + cfg.absent_lock_bytes() + cfg.promise_table_bytes();
    let yaml = format!(
        r#"
name: tiny
epoch: 1
memstore: {{ size: {}, index: 4KiB, ring: 16KiB }}
dcs:
  - name: dc1
    nodes: [ {{ name: a, addr: "127.0.0.1:7001" }} ]
tables:
  - {{ name: t, id: 1, ordered_index: false, cells: [ {{ name: c0, bytes: 8 }} ] }}
partitions:
  - {{ replicas: [a] }}
"#,
        fixed + 128 * records
    );
    Topology::from_yaml("tiny.yaml", &yaml).expect("valid")
}

#[test]
fn a_full_heap_is_an_abort_vote_that_names_the_node() {
    let dc = TestDc::new(tiny_heap(3), false);
    let mut ex = dc.executor();
    for k in 0..3 {
        let s = kv(&dc, 10 + k, vec![KvOp::Write(k, vec![1; 8])]);
        let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
        assert!(v.is_commit(), "{:?}", v.abort);
        ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    }
    let s = kv(&dc, 20, vec![KvOp::Write(3, vec![1; 8])]);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert_eq!(v.abort, Some(AbortReason::HeapFull(NodeId(0))));
    assert!(v.entries.is_empty(), "nothing reserved");
    // The node keeps serving: reads of new keys and writes of existing ones still commit.
    let s = kv(&dc, 21, vec![KvOp::Read(99), KvOp::Add(1, 5)]);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(dc.dc.read_record(NodeId(0), T, 99).unwrap(), None);
}

#[test]
fn deletes_and_zero_writes_of_missing_keys_change_nothing() {
    let dc = TestDc::new(common::topology(1, "256KiB"), false);
    let mut ex = dc.executor();
    let before = dc.heap_pointers();
    // 1,000 deletes of keys nobody wrote, and writes that leave a missing key missing.
    let mut ops: Vec<KvOp> = (0..1000).map(|k| KvOp::Delete(2_000_000 + k)).collect();
    ops.extend([KvOp::Write(3_000_000, vec![]), KvOp::Add(3_000_001, 0), KvOp::Add(3_000_002, 4)]);
    ops.push(KvOp::Delete(3_000_002));
    let s = kv(&dc, 1, ops);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    assert!(v.items.iter().all(|i| i.absent), "every key is voted absent");
    assert!(!held_absent_locks(&dc).is_empty(), "the absences are locked until the decision");
    // A concurrent insert of a deleted missing key waits for the decision (No-Wait abort).
    let w = kv(&dc, 2, vec![KvOp::Write(2_000_005, vec![1; 8])]);
    assert_eq!(
        ex.execute(&w, SystemClock.now_ms()).unwrap().abort,
        Some(AbortReason::LockConflict { access: 0, kind: LockConflictKind::Absence })
    );
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(dc.heap_pointers(), before, "a delete of a missing key allocated a record");
    assert_eq!(held_absent_locks(&dc), vec![]);
    for key in [2_000_000, 2_000_999, 3_000_000, 3_000_001, 3_000_002] {
        assert_eq!(dc.dc.read_record(dc.node_of(key), T, key).unwrap(), None, "key {key} was created");
    }
    // A delete then a write of one missing key creates it; a delete of an existing key clears it.
    let s = kv(&dc, 3, vec![KvOp::Delete(7), KvOp::Write(7, vec![5; 8])]);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(dc.dc.read_record(dc.node_of(7), T, 7).unwrap().expect("created").values[0], vec![5; 8]);
    let s = kv(&dc, 4, vec![KvOp::Delete(7)]);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit() && !v.items[0].absent, "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).unwrap();
    assert_eq!(dc.dc.read_record(dc.node_of(7), T, 7).unwrap().expect("kept").values[0], vec![0; 8]);
}
