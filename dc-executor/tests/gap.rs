//! Gaps a dead writer leaves at the head of a ring, and their filling (docs/design.md §2,
//! recovery): replay stops at a reservation nobody wrote; once every live writer says it
//! holds none of the gap's slots, the executor covers them with fillers and replay goes on.

mod common;

use common::{topology, TestDc};
use redt_dc_executor::ring::{encode, push_write};
use redt_dc_executor::{
    head_gap, read_header, DoorbellBatch, EntryStatus, Executor, Gap, RedoEntry, Replayer, RingWriter, VoteWord,
};
use redt_proto::{Cts, Epoch, NodeId, TxnId};
use std::time::{Duration, Instant};

const A: NodeId = NodeId(0);

fn entry(txn: TxnId) -> RedoEntry {
    RedoEntry {
        txn,
        status: EntryStatus::Aborted,
        cts: Cts(0),
        vote: VoteWord::NONE,
        epoch: Epoch(1),
        coordinator: txn.coordinator(),
        start: Cts(0),
        participants: Vec::new(),
        partitions: Vec::new(),
        locks: Vec::new(),
        changes: Vec::new(),
    }
}

/// Reserves one slot with `w` and writes `txn`'s (aborted, header-only) entry there.
fn write(dc: &TestDc, w: &mut RingWriter, txn: TxnId) -> u64 {
    let index = w.reserve(dc.dc.verbs.as_ref(), 1, Duration::ZERO, &Instant::now).expect("fits");
    let mut b = DoorbellBatch::new();
    push_write(&mut b, &dc.dc.layout, index, &encode(&entry(txn), index));
    dc.dc.verbs.post_batch(A, &mut b).expect("writes");
    index
}

fn head(dc: &TestDc, replayer: &mut Replayer) -> u64 {
    let region = dc.local.region(A).expect("region").clone();
    replayer.step(&region, &mut |_| redt_dc_executor::Apply::Done).head
}

#[test]
fn a_dead_writers_reservation_stops_replay_until_it_is_filled() {
    let dc = TestDc::new(topology(1, "64KiB"), false);
    let layout = dc.dc.layout;
    let mut replayer = Replayer::new(layout, A);
    let mut live = RingWriter::new(layout, A);
    let first = write(&dc, &mut live, TxnId::new(NodeId(1), 1));
    // A writer that dies between its fetch-and-add and its WRITE.
    let mut dead = RingWriter::new(layout, A);
    let hole = dead.reserve(dc.dc.verbs.as_ref(), 3, Duration::ZERO, &Instant::now).expect("fits");
    drop(dead);
    let after = write(&dc, &mut live, TxnId::new(NodeId(1), 2));
    assert_eq!((hole, after), (first + 1, first + 4));

    assert_eq!(head(&dc, &mut replayer), hole, "replay stops at the unwritten reservation");
    let gap = head_gap(dc.dc.verbs.as_ref(), A, &layout).expect("reads");
    assert_eq!(gap, Some(Gap { from: hole, to: after }));

    let mut executor = Executor::new(dc.dc.clone(), dc.hlc.clone());
    assert_eq!(executor.reservations(A).expect("answers"), vec![], "the live executor holds nothing there");
    assert_eq!(executor.fill_gap(A, gap.unwrap()).expect("fills"), 3);
    let filler = read_header(dc.dc.verbs.as_ref(), A, &layout, hole).expect("the filler decodes");
    assert_eq!(filler.status, EntryStatus::Aborted);
    assert_eq!(head(&dc, &mut replayer), after + 1, "replay moves over the filler and the entry after it");
    assert_eq!(head_gap(dc.dc.verbs.as_ref(), A, &layout).expect("reads"), None);
}

#[test]
fn a_gap_written_meanwhile_is_not_filled() {
    let dc = TestDc::new(topology(1, "64KiB"), false);
    let layout = dc.dc.layout;
    let mut slow = RingWriter::new(layout, A);
    let index = slow.reserve(dc.dc.verbs.as_ref(), 1, Duration::ZERO, &Instant::now).expect("fits");
    let gap = head_gap(dc.dc.verbs.as_ref(), A, &layout).expect("reads").expect("a gap: the write is in flight");
    // The writer was alive after all: its entry lands before the fill.
    let txn = TxnId::new(NodeId(1), 5);
    let mut b = DoorbellBatch::new();
    push_write(&mut b, &layout, index, &encode(&entry(txn), index));
    dc.dc.verbs.post_batch(A, &mut b).expect("writes");
    let mut executor = Executor::new(dc.dc.clone(), dc.hlc.clone());
    assert_eq!(executor.fill_gap(A, gap).expect("checks"), 0, "nothing is covered");
    assert_eq!(read_header(dc.dc.verbs.as_ref(), A, &layout, index).expect("decodes").txn, txn);
}
