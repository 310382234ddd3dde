//! The redo ring through the in-process verbs backend (RedT §4.2, Algorithm 2 `WriteLog`,
//! `CommitLog`, `ReplayLog`): encoding through real WRITEs, torn entries, the lazy head
//! check under wrap-around stress, back-pressure, fillers and replay's exactly-once apply.

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redt_dc_executor::ring::{
    encode, encode_padded, encoded_slots, push_set_status, push_write, push_write_body, read_entry, vote_offset,
};
use redt_dc_executor::{
    Apply, Change, DoorbellBatch, EntryStatus, Error, Layout, LocalVerbs, LockIntent, RedoEntry, Region, Replayer,
    RingWriter, Verbs, VoteCode, VoteWord, WorkRequest,
};
use redt_proto::{Cts, DcId, Epoch, MemStoreConfig, NodeId, Offset, TableId, TxnId};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const N: NodeId = NodeId(3);

/// Consecutive `RingFull`s (or replay steps without progress) after which a stress test
/// declares the ring wedged and fails instead of hanging.
const WEDGED: u64 = 20_000;

/// Counts a finished (or panicked) writer thread.
struct DoneOnDrop<'a>(&'a AtomicU64);

impl Drop for DoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// A clock that stands still (the ring's `now` in a simulation): with zero patience a
/// reservation makes one head READ, then gives up.
fn still() -> impl Fn() -> Instant {
    let t = Instant::now();
    move || t
}

/// A formatted MemStore whose ring has `slots` slots.
fn memstore(slots: u64) -> (LocalVerbs, Layout, Arc<Region>) {
    let layout =
        Layout::from_config(&MemStoreConfig { size_bytes: 1 << 16, index_bytes: 64, ring_bytes: (slots + 1) * 64 });
    let verbs = LocalVerbs::in_process([N], layout.size);
    let region = verbs.region(N).expect("the node's region").clone();
    layout.format(&region);
    (verbs, layout, region)
}

fn head_tail(layout: &Layout, region: &Region) -> (u64, u64) {
    let mut b = [0u8; 16];
    region.read(layout.ring_off, &mut b);
    (u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..].try_into().unwrap()))
}

fn ring_is_zero(layout: &Layout, region: &Region) -> bool {
    let mut all = vec![0u8; (layout.ring_bytes - 64) as usize];
    region.read(layout.ring_off + 64, &mut all);
    all.iter().all(|&b| b == 0)
}

fn write_entry(verbs: &LocalVerbs, layout: &Layout, index: u64, e: &RedoEntry) -> usize {
    let mut b = DoorbellBatch::new();
    push_write(&mut b, layout, index, &encode(e, index));
    verbs.post_batch(N, &mut b).unwrap();
    b.len()
}

fn set_status(verbs: &LocalVerbs, layout: &Layout, index: u64, status: EntryStatus, cts: Cts) {
    let mut b = DoorbellBatch::new();
    push_set_status(&mut b, layout, index, status, cts);
    assert_eq!(b.len(), 1, "a status change is one WRITE");
    verbs.post_batch(N, &mut b).unwrap();
}

fn bare(txn: TxnId, status: EntryStatus) -> RedoEntry {
    RedoEntry {
        txn,
        status,
        cts: Cts(0),
        vote: VoteWord::NONE,
        epoch: Epoch(2),
        coordinator: txn.coordinator(),
        start: Cts(0),
        participants: Vec::new(),
        partitions: Vec::new(),
        locks: Vec::new(),
        changes: Vec::new(),
    }
}

fn change(txn: TxnId, len: usize) -> Change {
    Change { record: Offset(8192), table: TableId(1), key: txn.0, cell: 2, value: vec![txn.0 as u8; len] }
}

fn lock(txn: TxnId, cells: u64) -> LockIntent {
    LockIntent {
        record: Offset(8192),
        table: TableId(1),
        key: txn.0,
        lock_bits: cells << 1,
        cells,
        versions: (0..cells.count_ones() as u64).map(|i| txn.0 + i).collect(),
    }
}

/// A `Logged` entry of exactly `slots` slots (1 to 3), its contents drawn from `rng`.
fn entry_of_slots(txn: TxnId, slots: u64, rng: &mut StdRng) -> RedoEntry {
    let mut e = bare(txn, EntryStatus::Logged);
    let p: u16 = rng.gen_range(1..=3);
    match slots {
        // Header only.
        1 => {}
        // Body of 1 to 64 bytes.
        2 => {
            e.participants = (0..p).map(DcId).collect();
            if rng.gen_bool(0.5) {
                e.changes.push(change(txn, rng.gen_range(0..=40 - 2 * p as usize)));
            }
        }
        // Body of 65 to 128 bytes.
        _ => {
            e.participants = (0..p).map(DcId).collect();
            let cells = [0b0, 0b100, 0b1010][rng.gen_range(0..3)];
            e.locks.push(lock(txn, cells));
            let base = 2 * p as usize + 34 + 8 * cells.count_ones() as usize + 24;
            e.changes.push(change(txn, rng.gen_range(65usize.saturating_sub(base)..=128 - base)));
        }
    }
    assert_eq!(encoded_slots(&e), slots, "sized to {slots} slots");
    e
}

prop_compose! {
    fn any_entry()(
        txn: u64, cts in 0..=Cts::MASK, epoch: u32, coordinator: u16,
        participants in proptest::collection::vec(any::<u16>(), 0..5),
        participants_p in proptest::collection::vec(any::<u32>(), 0..5),
        locks in proptest::collection::vec((any::<u64>(), any::<u64>(), 0u64..4), 0..4),
        changes in proptest::collection::vec(
            (any::<u64>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..150)), 0..4,
        ),
        status in 0u8..6, vote in 0u64..3,
    ) -> RedoEntry {
        RedoEntry {
            txn: TxnId(txn),
            status: EntryStatus::from_code(status).expect("codes 0..6 exist"),
            cts: Cts(cts),
            vote: VoteWord(vote),
            epoch: Epoch(epoch),
            coordinator: NodeId(coordinator),
            start: Cts(cts / 3),
            participants: participants.into_iter().map(DcId).collect(),
            partitions: participants_p.into_iter().map(redt_proto::PartitionId).collect(),
            locks: locks.into_iter().map(|(key, bits, n)| LockIntent {
                record: Offset(key & 0xfff8), table: TableId(key as u16), key, lock_bits: bits,
                cells: (1u64 << n) - 1, versions: (0..n).map(|v| v ^ key).collect(),
            }).collect(),
            changes: changes.into_iter().map(|(key, cell, value)| Change {
                record: Offset(key >> 3), table: TableId(7), key, cell, value,
            }).collect(),
        }
    }
}

proptest! {
    /// Entries written at any index, wrapping past the last slot or not, read back equal.
    #[test]
    fn entries_round_trip_through_verbs_at_wrapping_indices(e in any_entry(), index in 0u64..10_000) {
        let (verbs, layout, _region) = memstore(16);
        let slots = encoded_slots(&e);
        prop_assume!(slots <= 16);
        let writes = write_entry(&verbs, &layout, index, &e);
        let wraps = index % 16 + slots > 16;
        prop_assert_eq!(writes, if wraps { 2 } else { 1 });
        prop_assert_eq!(read_entry(&verbs, N, &layout, index).unwrap(), e.clone());
        // The same slots seen as another lap are not this entry.
        let other = read_entry(&verbs, N, &layout, index + 16);
        prop_assert!(matches!(other, Err(Error::TornEntry { .. })), "{:?}", other);
    }
}

#[test]
fn a_torn_entry_is_detected() {
    let (verbs, layout, _region) = memstore(16);
    let txn = TxnId::new(NodeId(1), 9);
    let mut e = bare(txn, EntryStatus::Logged);
    e.changes.push(change(txn, 100));
    let index = 15; // wraps: slot 15, then slots 0 and 1
    let bytes = encode(&e, index);
    assert_eq!(bytes.len(), 3 * 64);
    // Only the first slot written (a writer mid-WRITE, or the first of two WRITEs).
    verbs.write(N, Offset(layout.ring_off + 64 + 15 * 64), &bytes[..64]).unwrap();
    let r = read_entry(&verbs, N, &layout, index);
    assert!(matches!(r, Err(Error::TornEntry { index: 15, .. })), "{r:?}");
    // Fully written, it reads back.
    write_entry(&verbs, &layout, index, &e);
    assert_eq!(read_entry(&verbs, N, &layout, index).unwrap(), e);
    // One flipped byte in the body (it sits in slot 0, after the wrap).
    let at = Offset(layout.ring_off + 64 + 10);
    let mut b = [0u8; 1];
    verbs.read(N, at, &mut b).unwrap();
    verbs.write(N, at, &[b[0] ^ 0x40]).unwrap();
    let r = read_entry(&verbs, N, &layout, index);
    assert!(matches!(r, Err(Error::TornEntry { why: "checksum mismatch", .. })), "{r:?}");
}

#[test]
fn rewriting_an_intent_entry_keeps_its_vote_word_and_slot_count() {
    let (verbs, layout, region) = memstore(8);
    let mut w = RingWriter::new(layout, N);
    let txn = TxnId::new(NodeId(2), 1);
    // The reservation is sized for the upper bound (a 100-byte value).
    let mut intent = bare(txn, EntryStatus::Intent);
    intent.locks.push(lock(txn, 0b11));
    intent.changes.push(change(txn, 100));
    let slots = encoded_slots(&intent);
    assert_eq!(slots, 4);
    let index = w.reserve(&verbs, slots, Duration::ZERO, &still()).unwrap();
    write_entry(&verbs, &layout, index, &intent);
    // Phase 1 votes by CAS from none (here, concurrently with the rewrite below).
    let commit = VoteWord::NONE.with_vote(VoteCode::Commit);
    assert_eq!(verbs.compare_and_swap(N, vote_offset(&layout, index), 0, commit.0).unwrap(), 0);
    // The final entry is smaller (no change): it keeps the reservation's slot count.
    let mut logged = bare(txn, EntryStatus::Logged);
    logged.locks.push(lock(txn, 0b11));
    let bytes = encode_padded(&logged, index, slots);
    assert_eq!(bytes.len() as u64, slots * 64);
    let mut b = DoorbellBatch::new();
    push_write_body(&mut b, &layout, index, &bytes);
    // No WRITE touches the status or vote words (bytes 8..24 of the header).
    let (status_at, vote_end) = (vote_offset(&layout, index).0 - 8, vote_offset(&layout, index).0 + 8);
    for r in b.requests() {
        if let WorkRequest::Write { offset, data } = r {
            assert!(offset.0 + data.len() as u64 <= status_at || offset.0 >= vote_end, "{r:?}");
        }
    }
    push_set_status(&mut b, &layout, index, EntryStatus::Logged, Cts(0));
    verbs.post_batch(N, &mut b).unwrap();
    let back = read_entry(&verbs, N, &layout, index).unwrap();
    assert_eq!(back, RedoEntry { vote: commit, ..logged });
    // Replay steps over the whole reservation.
    set_status(&verbs, &layout, index, EntryStatus::Committed, Cts(5));
    let s = Replayer::new(layout, N).step(&region, &mut |_| Apply::Done);
    assert_eq!((s.applied, s.head, s.blocked_at), (1, slots, None));
    assert!(ring_is_zero(&layout, &region));
}

/// Wrap-around stress (RedT Algorithm 2): 4 writers append thousands of 1–3-slot entries to
/// a 16-slot ring through one-sided verbs while the node replays. Every writer reads its
/// entry back intact before deciding it, so no entry was overwritten before it was
/// finished; every committed entry is applied exactly once, no aborted one is, and the ring
/// ends empty and zeroed.
#[test]
fn wrap_stress_applies_every_committed_entry_exactly_once() {
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = 2_000;
    const SEED: u64 = 0x5eed_2023;
    let patience = Duration::from_millis(1);
    let (verbs, layout, region) = memstore(16);
    let done = AtomicU64::new(0);
    let (counts, decided) = std::thread::scope(|s| {
        let replay = s.spawn(|| {
            let mut r = Replayer::new(layout, N);
            let mut counts: HashMap<TxnId, u32> = HashMap::new();
            let mut retried = HashSet::new();
            let mut idle = 0;
            loop {
                let finished = done.load(Ordering::Acquire) == WRITERS;
                let step = r.step(&region, &mut |e| {
                    // A held cell lock, say: offered again on the next step.
                    if e.txn.0 % 5 == 0 && retried.insert(e.txn) {
                        return Apply::Retry;
                    }
                    *counts.entry(e.txn).or_default() += 1;
                    Apply::Done
                });
                if finished && (step.head == head_tail(&layout, &region).1 || idle > WEDGED) {
                    return counts;
                }
                if step.flushed == 0 {
                    idle += u64::from(finished);
                    std::thread::yield_now();
                }
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (verbs, done) = (&verbs, &done);
                s.spawn(move || {
                    let _done = DoneOnDrop(done);
                    let mut rng = StdRng::seed_from_u64(SEED ^ w);
                    let mut ring = RingWriter::new(layout, N);
                    let (mut committed, mut aborted, mut full) = (Vec::new(), Vec::new(), 0u64);
                    for k in 0..PER_WRITER {
                        let txn = TxnId::new(NodeId(w as u16 + 1), k);
                        let slots = rng.gen_range(1..=3);
                        let e = entry_of_slots(txn, slots, &mut rng);
                        let mut in_a_row = 0;
                        let index = loop {
                            match ring.reserve(verbs, slots, patience, &Instant::now) {
                                Ok(i) => break i,
                                Err(Error::RingFull { .. }) if in_a_row < WEDGED => in_a_row += 1,
                                Err(e) => panic!("seed {SEED:#x}: ring wedged? {e}"),
                            }
                        };
                        full += in_a_row;
                        write_entry(verbs, &layout, index, &e);
                        let back = read_entry(verbs, N, &layout, index)
                            .unwrap_or_else(|err| panic!("seed {SEED:#x}: {txn} at {index}: {err}"));
                        assert_eq!(back, e, "seed {SEED:#x}: entry at {index} overwritten before it finished");
                        if rng.gen_bool(0.75) {
                            set_status(verbs, &layout, index, EntryStatus::Committed, Cts::new(k + 1));
                            committed.push(txn);
                        } else {
                            set_status(verbs, &layout, index, EntryStatus::Aborted, Cts(0));
                            aborted.push(txn);
                        }
                    }
                    // Pay any filler still owed so replay can reach the tail.
                    for attempt in 0.. {
                        match ring.settle(verbs, patience, &Instant::now) {
                            Ok(()) => break,
                            Err(Error::RingFull { .. }) if attempt < WEDGED => {}
                            Err(e) => panic!("seed {SEED:#x}: ring wedged? {e}"),
                        }
                    }
                    (committed, aborted, full)
                })
            })
            .collect();
        let decided: Vec<_> = writers.into_iter().map(|h| h.join().expect("writer")).collect();
        (replay.join().expect("replay"), decided)
    });
    let mut committed = 0;
    for (c, a, _) in &decided {
        committed += c.len();
        for t in c {
            assert_eq!(counts.get(t), Some(&1), "seed {SEED:#x}: committed {t} applied once");
        }
        for t in a {
            assert_eq!(counts.get(t), None, "seed {SEED:#x}: aborted {t} never applied");
        }
    }
    assert_eq!(counts.len(), committed);
    let (head, tail) = head_tail(&layout, &region);
    let full: u64 = decided.iter().map(|d| d.2).sum();
    eprintln!("{committed} committed, {tail} slots used ({} laps), {full} RingFull retries", tail / 16);
    assert_eq!(head, tail);
    assert!(ring_is_zero(&layout, &region), "every released slot is zeroed");
}

/// An entry left `Logged` stops the head (RedT Algorithm 2 line 37); once the lap is full a
/// writer gets `RingFull` within its patience and owes a filler for its reservation; marking
/// the entry `Committed` lets replay move on, and the filler lets it reach the tail.
#[test]
fn a_logged_entry_blocks_the_head_until_decided() {
    let (verbs, layout, region) = memstore(16);
    let mut replay = Replayer::new(layout, N);
    let mut counts: HashMap<TxnId, u32> = HashMap::new();
    let mut step = |replay: &mut Replayer| {
        replay.step(&region, &mut |e| {
            *counts.entry(e.txn).or_default() += 1;
            Apply::Done
        })
    };
    let patience = Duration::from_millis(1);
    let mut a = RingWriter::new(layout, N);
    let mut b = RingWriter::new(layout, N);
    let stuck_txn = TxnId::new(NodeId(1), 1);
    let mut stuck = bare(stuck_txn, EntryStatus::Logged);
    stuck.participants = vec![DcId(0), DcId(1)];
    assert_eq!(a.reserve(&verbs, encoded_slots(&stuck), patience, &Instant::now).unwrap(), 0);
    write_entry(&verbs, &layout, 0, &stuck);
    for k in 0..14 {
        let i = b.reserve(&verbs, 1, patience, &Instant::now).unwrap();
        assert_eq!(i, 2 + k);
        write_entry(&verbs, &layout, i, &bare(TxnId::new(NodeId(2), k), EntryStatus::Committed));
    }
    let s = step(&mut replay);
    assert_eq!((s.applied, s.head, s.blocked_at), (14, 0, Some(0)));

    // The lap is full: B gives up and owes a filler for its consumed reservation.
    let r = b.reserve(&verbs, 1, patience, &Instant::now);
    assert!(matches!(r, Err(Error::RingFull { head: 0, index: 16, .. })), "{r:?}");
    assert_eq!(b.owed_fillers(), &[(16, 1)]);
    // While the filler is owed, B reserves nothing more.
    let r = b.reserve(&verbs, 1, patience, &Instant::now);
    assert!(matches!(r, Err(Error::RingFull { index: 16, .. })), "{r:?}");
    assert_eq!(head_tail(&layout, &region), (0, 17));
    // Too large for the ring at all: refused before any fetch-and-add.
    assert!(matches!(
        b.reserve(&verbs, 17, patience, &Instant::now),
        Err(Error::EntryTooLarge { bytes: 1088, ring_bytes: 1024 })
    ));
    assert_eq!(head_tail(&layout, &region), (0, 17));
    let s = step(&mut replay);
    assert_eq!((s.applied, s.head, s.blocked_at), (0, 0, Some(0)));

    // Deciding the stuck entry unblocks the head, up to B's unwritten reservation.
    set_status(&verbs, &layout, 0, EntryStatus::Committed, Cts(77));
    let s = step(&mut replay);
    // The scan ends one lap after the old head …
    assert_eq!((s.applied, s.head, s.blocked_at), (1, 16, None));
    // … and the next one stops at B's unwritten reservation.
    let s = step(&mut replay);
    assert_eq!((s.applied, s.head, s.blocked_at), (0, 16, Some(16)));
    // B's next reservation pays the filler first.
    let i = b.reserve(&verbs, 1, patience, &Instant::now).unwrap();
    assert_eq!(i, 17);
    assert!(b.owed_fillers().is_empty());
    write_entry(&verbs, &layout, i, &bare(TxnId::new(NodeId(2), 99), EntryStatus::Committed));
    let s = step(&mut replay);
    assert_eq!((s.applied, s.flushed, s.head, s.blocked_at), (1, 2, 18, None));
    assert_eq!(head_tail(&layout, &region), (18, 18));
    assert!(ring_is_zero(&layout, &region));
    assert_eq!(counts.len(), 16);
    assert!(counts.values().all(|&n| n == 1));
    assert_eq!(counts[&stuck_txn], 1);
}

proptest! {
    /// The scans that read only the headers of the entries they do not want (the recovery
    /// scan: unfinished or owing entries) find exactly what a scan decoding every entry finds,
    /// torn entries and fillers among them.
    #[test]
    fn a_header_first_scan_finds_what_a_full_scan_finds(
        seed: u64,
        shape in proptest::collection::vec((1u64..=3, 0u8..6, 0u8..4, any::<bool>()), 1..40),
    ) {
        let (verbs, layout, region) = memstore(256);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut index = 0u64;
        for (i, &(slots, status, owed, torn)) in shape.iter().enumerate() {
            let txn = TxnId(1 + (i as u64 % 5));
            let e = entry_of_slots(txn, slots, &mut rng);
            write_entry(&verbs, &layout, index, &e);
            let status = EntryStatus::from_code(status).expect("codes 0..6 exist");
            let mut b = DoorbellBatch::new();
            redt_dc_executor::ring::push_set_status_owed(&mut b, &layout, index, status, Cts(9), owed);
            verbs.post_batch(N, &mut b).unwrap();
            if torn && slots > 1 {
                // A body byte changed after the checksum: the entry no longer decodes.
                let at = layout.ring_off + 64 + (index + 1) * 64;
                let mut byte = [0u8; 1];
                region.read(at, &mut byte);
                region.write(at, &[byte[0] ^ 0xff]);
            }
            index += slots;
        }
        let mut b = DoorbellBatch::new();
        b.write(Offset(layout.ring_off + 8), index.to_le_bytes().to_vec());
        verbs.post_batch(N, &mut b).unwrap();
        let full = redt_dc_executor::ring::ring_entries(&verbs, N, &layout).unwrap();
        let scan = redt_dc_executor::ring::ring_scan(&verbs, N, &layout).unwrap();
        let unfinished: Vec<(u64, RedoEntry)> = full
            .iter()
            .filter(|(_, _, e)| matches!(e.status, EntryStatus::Intent | EntryStatus::Logged))
            .map(|(i, _, e)| (*i, e.clone()))
            .collect();
        prop_assert_eq!(scan.unfinished, unfinished);
        let owed_at: Vec<u64> = scan.owed.iter().map(|o| o.index).collect();
        let owed_want: Vec<u64> = full
            .iter()
            .filter(|(i, _, _)| {
                let mut w = [0u8; 8];
                region.read(layout.ring_off + 64 + (i % 256) * 64 + 8, &mut w);
                redt_dc_executor::EntryStatus::owed_of(u64::from_le_bytes(w)) != 0
            })
            .map(|(i, _, _)| *i)
            .collect();
        prop_assert_eq!(owed_at, owed_want, "full {:?}", full.iter().map(|(i, n, e)| (*i, *n, e.status)).collect::<Vec<_>>());
    }
}
