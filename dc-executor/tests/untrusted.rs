//! Input from outside the executor's process never panics it and never leaves the ring
//! stuck: a sub-transaction too large for a redo entry is refused before any ring
//! space is reserved, and a checksummed entry that names an impossible record offset is
//! reported by replay and passed over.

mod common;

use common::{TestDc, T};
use redt_dc_executor::ring::{self, ring_bounds, RingWriter};
use redt_dc_executor::{
    apply_committed, Change, Clock, Decision, DoorbellBatch, EntryStatus, Error, KvOp, KvProcedure, LocalAccess,
    LockIntent, Procedure, RedoEntry, Replayer, SubTxn, SystemClock, Verbs, VoteWord,
};
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, PartitionId, TxnId};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn kv(dc: &TestDc, seq: u64, participants: Vec<DcId>, ops: Vec<KvOp>) -> SubTxn {
    let p: Arc<dyn Procedure> = Arc::new(KvProcedure::new(T, 8, ops));
    let local =
        p.accesses().iter().enumerate().map(|(access, a)| LocalAccess { access, node: dc.node_of(a.key) }).collect();
    SubTxn {
        txn: TxnId::new(NodeId(0), seq),
        epoch: Epoch(1),
        coordinator: NodeId(0),
        start: Cts(0),
        participants,
        partitions: vec![PartitionId(0)],
        procedure: p,
        local,
    }
}

#[test]
fn a_sub_transaction_with_too_many_participants_reserves_nothing() {
    let dc = TestDc::new(common::topology(1, "1MiB"), true);
    let mut ex = dc.executor();
    let node = dc.node_of(1);
    let before = ring_bounds(dc.local.as_ref(), node, &dc.dc.layout).unwrap();
    // 70,000 participants (140 KB of entry, which the 1 MiB ring would reserve): more than a
    // redo entry's 16-bit count holds (the audit's panic
    // after the reservation, which left a hole that stopped replay for good).
    let s = kv(&dc, 1, vec![DcId(0); 70_000], vec![KvOp::Write(1, vec![5; 8])]);
    let err = ex.execute(&s, SystemClock.now_ms()).unwrap_err();
    assert!(matches!(err, Error::InvalidSubTxn { .. }), "{err:?}");
    assert!(err.to_string().contains("70000 participant DCs"), "{err}");
    assert_eq!(ring_bounds(dc.local.as_ref(), node, &dc.dc.layout).unwrap(), before, "nothing reserved");
    // The ring has no hole: a later transaction commits and replay applies it.
    let s = kv(&dc, 2, vec![DcId(0)], vec![KvOp::Write(1, vec![6; 8])]);
    let v = ex.execute(&s, SystemClock.now_ms()).unwrap();
    assert!(v.is_commit(), "{:?}", v.abort);
    ex.finish(s.txn, Decision::Commit(Cts(1000)), &v.entries).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (head, tail) = ring_bounds(dc.local.as_ref(), node, &dc.dc.layout).unwrap();
        if head == tail && tail > before.1 {
            break;
        }
        assert!(Instant::now() < deadline, "replay stuck at {head} of {tail}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(dc.dc.read_record(node, T, 1).unwrap().unwrap().values[0], vec![6; 8]);
}

#[test]
fn check_encodable_refuses_what_the_header_cannot_count() {
    let mut e = RedoEntry::filler();
    e.participants = vec![DcId(1); 65_536];
    assert!(matches!(ring::check_encodable(&e), Err(Error::Unencodable { .. })));
    e.participants = vec![DcId(1); 65_535];
    ring::check_encodable(&e).unwrap();
    let mut e = RedoEntry::filler();
    e.partitions = vec![PartitionId(1); 65_536];
    assert!(matches!(ring::check_encodable(&e), Err(Error::Unencodable { .. })));
    let mut e = RedoEntry::filler();
    e.locks = vec![LockIntent { record: Offset(0), table: T, key: 1, lock_bits: 0, cells: 0b11, versions: vec![1] }];
    assert!(matches!(ring::check_encodable(&e), Err(Error::Unencodable { .. })));
    let mut e = RedoEntry::filler();
    e.changes = vec![Change { record: Offset(0), table: T, key: 1, cell: 0, value: vec![0; 5 << 20] }];
    assert!(matches!(ring::check_encodable(&e), Err(Error::EntryTooLarge { .. })));
}

/// A `Committed` entry of transaction `txn` writing cell 0 of `key` at the record offset
/// `record` (which may be wrong on purpose).
fn committed(txn: u64, record: Offset, key: u64, value: u8) -> RedoEntry {
    RedoEntry {
        txn: TxnId(txn),
        status: EntryStatus::Committed,
        cts: Cts(100 + txn),
        vote: VoteWord::NONE,
        epoch: Epoch(1),
        coordinator: NodeId(0),
        start: Cts(0),
        participants: vec![],
        partitions: vec![],
        locks: vec![LockIntent { record, table: T, key, lock_bits: 0, cells: 1, versions: vec![0] }],
        changes: vec![Change { record, table: T, key, cell: 0, value: vec![value; 8] }],
    }
}

#[test]
fn replay_reports_an_entry_with_an_impossible_record_offset_and_goes_on() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    let node = dc.node_of(3);
    let layout = dc.dc.layout;
    let record = dc.dc.insert_record(node, T, 3, &[&[1; 8]]).unwrap();
    let region = dc.local.region(node).unwrap().clone();
    let mut writer = RingWriter::new(layout, node);
    let still = Instant::now();
    // CRC-valid entries whose record offset is unaligned, beyond the region, or another
    // key's; then a good one.
    let bad = [
        committed(1, Offset(record.0 + 3), 3, 9),
        committed(2, Offset(layout.size + 4096), 3, 9),
        committed(3, Offset(u64::MAX - 7), 3, 9),
        committed(4, record, 4, 9),
    ];
    for e in bad.iter().chain([&committed(5, record, 3, 7)]) {
        let slots = ring::encoded_slots(e);
        let index = writer.reserve(dc.local.as_ref(), slots, Duration::ZERO, &|| still).unwrap();
        let mut batch = DoorbellBatch::new();
        ring::push_write(&mut batch, &layout, index, &ring::encode(e, index));
        dc.local.post_batch(node, &mut batch).unwrap();
    }
    let mut replayer = Replayer::new(layout, node);
    let step = replayer.step(&region, &mut |e| apply_committed(&region, &dc.dc.catalog, e));
    assert_eq!(step.invalid, 4, "{step:?}");
    assert_eq!(step.applied, 1);
    assert_eq!(step.blocked_at, None, "replay went past every bad entry");
    let (head, tail) = ring_bounds(dc.local.as_ref(), node, &layout).unwrap();
    assert_eq!(head, tail);
    let r = dc.dc.read_record(node, T, 3).unwrap().unwrap();
    assert_eq!(r.values[0], vec![7; 8], "only the good entry was applied");
    assert_eq!(r.lock, 0);
}
