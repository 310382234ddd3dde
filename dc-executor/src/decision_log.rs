//! The decision log of a node: what each finished phase-1 redo entry of its ring recorded,
//! kept after replay releases the entry's slots (docs/design.md §2, recovery).
//!
//! A recoverer that PREPAREs a replica must tell "this replica applied a decision and its
//! entry is gone" from "this replica never voted". Counting the first as the second breaks
//! the recovery rule's first property (an acknowledged commit is never aborted;
//! `coordinator/src/recovery.rs`), so the node's replay appends one row here for every
//! phase-1 entry just before it marks the entry `Flushed`, and a lookup answers from the
//! rows, or says it cannot know.
//!
//! ```text
//! log_off + 0    count u64            rows ever appended (the next row is count % rows)
//! log_off + 8    evicted_start u64    largest `start` of any row overwritten so far
//! log_off + 64   rows, 32 bytes each: txn u64 | status u8, vote u8 << 8, cts << 16 | start u64 | flags u64
//! ```
//!
//! `flags` bit 0: the entry was a recoverer's fence entry (no locks, no changes;
//! `prepare.rs`), so a later PREPARE does not write a second one.
//!
//! Only the node's replay writes (one writer per ring, as for the head), with plain stores in
//! this order: `evicted_start` before the row it overwrites, the row's txn word last, `count`
//! after the row. A reader READs the rows first and the header after, so a row overwritten
//! while it reads is covered by the `evicted_start` it reads next: an answer of
//! [`Lookup::Absent`] (no row for a transaction started after every evicted row) is exact,
//! and the log never claims absence it cannot prove.

use crate::error::Result;
use crate::memstore::{Layout, LINE};
use crate::ring::{EntryStatus, RedoEntry, VoteCode};
use crate::verbs::Verbs;
use redt_proto::{Cts, NodeId, Offset, TxnId};
use redt_verbs::region::Region;
use std::sync::atomic::Ordering;

/// Bytes of one row (the MemStore's layout sizes the log in them).
pub use crate::memstore::DECISION_ROW_BYTES as ROW_BYTES;

/// What a finished entry recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The transaction.
    pub txn: TxnId,
    /// `Committed` or `Aborted`.
    pub status: EntryStatus,
    /// The replica's phase-1 vote (`Commit`, or `Abort`/`None` for an abort vote or a fence).
    pub vote: VoteCode,
    /// The commit timestamp (`Committed` only).
    pub cts: Cts,
    /// The coordinator's start timestamp of the transaction.
    pub start: Cts,
    /// Whether the entry was a recoverer's fence entry (no locks, no changes).
    pub fence: bool,
}

/// Bit 0 of a row's flags word: a fence entry.
const FENCE: u64 = 1;

/// The answer of [`lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The transaction's row.
    Found(Row),
    /// No row, and none could have been evicted: no phase-1 entry of the transaction was
    /// ever released on this node.
    Absent,
    /// No row, but rows of transactions started as late as it were evicted: unknown.
    Evicted,
}

fn count_at(layout: &Layout) -> u64 {
    layout.log_off
}

fn evicted_at(layout: &Layout) -> u64 {
    layout.log_off + 8
}

fn row_at(layout: &Layout, i: u64) -> u64 {
    layout.log_off + LINE + (i % layout.log_rows()) * ROW_BYTES
}

/// Appends the row of `entry` (a `Committed` or `Aborted` phase-1 entry about to be marked
/// `Flushed`) to `region`'s decision log. Replica entries and fillers (no partitions) are not
/// logged. Only the node's replay calls it.
pub fn append(layout: &Layout, region: &Region, entry: &RedoEntry) {
    if entry.partitions.is_empty() || layout.log_rows() == 0 {
        return;
    }
    let vote = entry.vote.unpack().map(|s| s.vote).unwrap_or(VoteCode::None);
    let count = region.word(count_at(layout)).load(Ordering::Acquire);
    let at = row_at(layout, count);
    if count >= layout.log_rows() {
        let old_start = region.word(at + 16).load(Ordering::Acquire);
        if old_start > region.word(evicted_at(layout)).load(Ordering::Acquire) {
            region.store(evicted_at(layout), old_start);
        }
    }
    let cts = if entry.status == EntryStatus::Committed { entry.cts } else { Cts(0) };
    region.store(at, 0);
    region.store(at + 8, entry.status as u64 | (vote as u64) << 8 | (cts.0 & Cts::MASK) << 16);
    region.store(at + 16, entry.start.0);
    let fence = entry.locks.is_empty() && entry.changes.is_empty();
    region.store(at + 24, if fence { FENCE } else { 0 });
    region.store(at, entry.txn.0);
    region.store(count_at(layout), count + 1);
}

fn decode_row(bytes: &[u8]) -> Option<Row> {
    let w = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let status = EntryStatus::from_code(w(1) as u8)?;
    let vote = VoteCode::from_bits(w(1) >> 8 & 3)?;
    Some(Row { txn: TxnId(w(0)), status, vote, cts: Cts(w(1) >> 16), start: Cts(w(2)), fence: w(3) & FENCE != 0 })
}

/// Looks up the row of `txn` (started at `start`) in `node`'s decision log with one READ of
/// the rows, then one of the header (see the module docs for why in that order).
///
/// # Errors
/// Verbs failures.
pub fn lookup(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId, start: Cts) -> Result<Lookup> {
    let rows = layout.log_rows();
    if rows == 0 {
        return Ok(Lookup::Evicted);
    }
    let mut buf = vec![0u8; (rows * ROW_BYTES) as usize];
    verbs.read(node, Offset(layout.log_off + LINE), &mut buf)?;
    let mut header = [0u8; 16];
    verbs.read(node, Offset(layout.log_off), &mut header)?;
    let evicted = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    // A transaction can have several rows (a phase 1 repeated after a restart, a fence
    // entry): the most telling one answers (a commit applied, then an abort applied over a
    // commit vote, then any), flagged as a fence if any of them is one.
    let rows: Vec<Row> = buf
        .chunks_exact(ROW_BYTES as usize)
        .filter(|r| r[0..8] == txn.0.to_le_bytes())
        .filter_map(decode_row)
        .filter(|r| r.txn == txn)
        .collect();
    let rank = |r: &Row| match (r.status, r.vote) {
        (EntryStatus::Committed, _) => 0,
        (_, VoteCode::Commit) => 1,
        _ => 2,
    };
    let fence = rows.iter().any(|r| r.fence);
    let found = rows.iter().min_by_key(|r| rank(r)).map(|r| Row { fence, ..*r });
    Ok(match found {
        Some(row) => Lookup::Found(row),
        None if start.0 > evicted => Lookup::Absent,
        None => Lookup::Evicted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::VoteWord;
    use crate::verbs::LocalVerbs;
    use redt_proto::{DcId, MemStoreConfig, PartitionId};

    fn setup(ring_bytes: u64) -> (LocalVerbs, Layout, std::sync::Arc<Region>) {
        let cfg = MemStoreConfig { size_bytes: 1 << 20, index_bytes: 4096, ring_bytes };
        let layout = Layout::from_config(&cfg);
        let verbs = LocalVerbs::in_process([NodeId(0)], layout.size);
        let region = verbs.region(NodeId(0)).unwrap().clone();
        layout.format(&region);
        (verbs, layout, region)
    }

    fn finished(txn: u64, status: EntryStatus, start: u64) -> RedoEntry {
        let mut e = RedoEntry::filler();
        e.txn = TxnId(txn);
        e.status = status;
        e.cts = Cts(start + 5);
        e.start = Cts(start);
        e.participants = vec![DcId(0)];
        e.partitions = vec![PartitionId(3)];
        e.vote = VoteWord::NONE.with_vote(VoteCode::Commit);
        e.locks = vec![crate::ring::LockIntent {
            record: redt_proto::Offset(4096),
            table: redt_proto::TableId(1),
            key: txn,
            lock_bits: 1,
            cells: 1,
            versions: vec![0],
        }];
        e
    }

    #[test]
    fn rows_are_found_until_evicted_and_absence_is_exact() {
        // 5 ring slots: 5 rows, rounded up to whole lines: 6.
        let (verbs, layout, region) = setup(6 * 64);
        assert_eq!(layout.log_rows(), 6);
        append(&layout, &region, &finished(10, EntryStatus::Aborted, 50));
        for t in 1..=5 {
            append(&layout, &region, &finished(t, EntryStatus::Committed, 100 * t));
        }
        let row = lookup(&verbs, NodeId(0), &layout, TxnId(3), Cts(300)).unwrap();
        assert_eq!(
            row,
            Lookup::Found(Row {
                txn: TxnId(3),
                status: EntryStatus::Committed,
                vote: VoteCode::Commit,
                cts: Cts(305),
                start: Cts(300),
                fence: false,
            })
        );
        // Never logged, started after everything evicted (nothing yet): absent.
        assert_eq!(lookup(&verbs, NodeId(0), &layout, TxnId(9), Cts(1)).unwrap(), Lookup::Absent);
        // Three more rows evict transactions 10, 1 and 2 (starts 50, 100, 200).
        append(&layout, &region, &finished(6, EntryStatus::Aborted, 600));
        append(&layout, &region, &finished(7, EntryStatus::Committed, 700));
        append(&layout, &region, &finished(8, EntryStatus::Committed, 800));
        assert_eq!(lookup(&verbs, NodeId(0), &layout, TxnId(1), Cts(100)).unwrap(), Lookup::Evicted);
        assert_eq!(lookup(&verbs, NodeId(0), &layout, TxnId(9), Cts(150)).unwrap(), Lookup::Evicted);
        assert_eq!(lookup(&verbs, NodeId(0), &layout, TxnId(9), Cts(201)).unwrap(), Lookup::Absent);
        match lookup(&verbs, NodeId(0), &layout, TxnId(6), Cts(600)).unwrap() {
            Lookup::Found(r) => assert_eq!((r.status, r.cts), (EntryStatus::Aborted, Cts(0))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_fence_entry_is_flagged_in_its_row() {
        let (verbs, layout, region) = setup(6 * 64);
        let mut e = finished(4, EntryStatus::Aborted, 10);
        e.locks.clear();
        e.vote = VoteWord::NONE.with_vote(VoteCode::Abort);
        append(&layout, &region, &e);
        append(&layout, &region, &finished(5, EntryStatus::Aborted, 20));
        let fence = |t: u64, start: u64| match lookup(&verbs, NodeId(0), &layout, TxnId(t), Cts(start)).unwrap() {
            Lookup::Found(r) => r.fence,
            other => panic!("{other:?}"),
        };
        assert!(fence(4, 10));
        assert!(!fence(5, 20));
        // A second row of transaction 5, its fence entry: the lookup says so whatever the
        // order of the rows, and answers the phase-1 row's commit vote.
        let mut f = finished(5, EntryStatus::Aborted, 20);
        f.locks.clear();
        f.vote = VoteWord::NONE.with_vote(VoteCode::Abort);
        append(&layout, &region, &f);
        match lookup(&verbs, NodeId(0), &layout, TxnId(5), Cts(20)).unwrap() {
            Lookup::Found(r) => assert_eq!((r.fence, r.vote), (true, VoteCode::Commit)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn replica_entries_and_fillers_are_not_logged() {
        let (verbs, layout, region) = setup(6 * 64);
        let mut e = finished(4, EntryStatus::Committed, 10);
        e.partitions.clear();
        append(&layout, &region, &e);
        append(&layout, &region, &RedoEntry::filler());
        assert_eq!(lookup(&verbs, NodeId(0), &layout, TxnId(4), Cts(10)).unwrap(), Lookup::Absent);
        assert_eq!(region.word(count_at(&layout)).load(Ordering::Acquire), 0);
    }
}
