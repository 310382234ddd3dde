//! Micro-benchmarks of the redo ring's hot paths, on the in-process verbs backend: encoding
//! and decoding one redo entry, and the scans that look for one transaction's unfinished
//! entries among many finished ones (a decision or record naming no entry; the recovery
//! scan). `cargo bench -p redt-dc-executor --bench ring`; a regression shows here in
//! numbers before it shows in `redt bench`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use redt_dc_executor::ring::{decode, encode, push_set_status, push_write, ring_entries, ring_scan};
use redt_dc_executor::{
    Change, DoorbellBatch, EntryStatus, Layout, LocalVerbs, LockIntent, RedoEntry, Verbs, VoteWord,
};
use redt_proto::{Cts, DcId, Epoch, MemStoreConfig, NodeId, Offset, PartitionId, TableId, TxnId};

const N: NodeId = NodeId(0);

/// A YCSB-shaped redo entry: ten locked cells with their versions and ten 100-byte writes.
fn entry(txn: u64) -> RedoEntry {
    RedoEntry {
        txn: TxnId(txn),
        status: EntryStatus::Logged,
        cts: Cts(0),
        vote: VoteWord::NONE,
        epoch: Epoch(1),
        coordinator: NodeId(1),
        start: Cts(txn << 16),
        participants: vec![DcId(0), DcId(1), DcId(2)],
        partitions: vec![PartitionId(0), PartitionId(3)],
        locks: (0..10)
            .map(|k| LockIntent {
                record: Offset(4096 + 1216 * k),
                table: TableId(1),
                key: txn * 10 + k,
                lock_bits: 1 << 1,
                cells: 1,
                versions: vec![k],
            })
            .collect(),
        changes: (0..10)
            .map(|k| Change {
                record: Offset(4096 + 1216 * k),
                table: TableId(1),
                key: txn * 10 + k,
                cell: 0,
                value: vec![k as u8; 100],
            })
            .collect(),
    }
}

/// A ring of `entries` YCSB-shaped entries, every one `Committed` but the last (`Logged`):
/// the backlog replay has not flushed yet, with one undecided transaction at its end.
fn ring(entries: u64) -> (LocalVerbs, Layout) {
    let layout =
        Layout::from_config(&MemStoreConfig { size_bytes: 64 << 20, index_bytes: 64 * 64, ring_bytes: 16 << 20 });
    let verbs = LocalVerbs::in_process([N], layout.size);
    layout.format(verbs.region(N).expect("the node's region"));
    let mut index = 0u64;
    for t in 0..entries {
        let e = entry(t + 1);
        let bytes = encode(&e, index);
        let slots = bytes.len() as u64 / 64;
        let mut b = DoorbellBatch::new();
        push_write(&mut b, &layout, index, &bytes);
        if t + 1 < entries {
            push_set_status(&mut b, &layout, index, EntryStatus::Committed, Cts(7));
        }
        verbs.post_batch(N, &mut b).expect("in-process writes");
        index += slots;
    }
    let mut b = DoorbellBatch::new();
    b.write(Offset(layout.ring_off + 8), index.to_le_bytes().to_vec());
    verbs.post_batch(N, &mut b).expect("in-process writes");
    (verbs, layout)
}

fn codec(c: &mut Criterion) {
    let e = entry(42);
    let bytes = encode(&e, 7);
    c.bench_function("redo entry encode (10 locks, 10 x 100 B writes)", |b| b.iter(|| encode(black_box(&e), 7)));
    c.bench_function("redo entry decode (10 locks, 10 x 100 B writes)", |b| {
        b.iter(|| decode(N, 7, black_box(&bytes)).expect("decodes"))
    });
}

fn scans(c: &mut Criterion) {
    let (verbs, layout) = ring(1_000);
    c.bench_function("ring scan, 1000 entries, 1 unfinished: header first (recovery scan)", |b| {
        b.iter(|| {
            let s = ring_scan(&verbs, N, &layout).expect("scans");
            assert_eq!(s.unfinished.len(), 1);
        })
    });
    c.bench_function("ring scan, 1000 entries: every entry decoded", |b| {
        b.iter(|| ring_entries(&verbs, N, &layout).expect("scans").len())
    });
}

criterion_group!(benches, codec, scans);
criterion_main!(benches);
