//! Snapshot copies of a partition's records, for rebuilding a replica (notes/failover.md,
//! "Rebuild"; issue 13).
//!
//! A voter serves its records in chunks ([`read_snapshot`]), scanning its own index bucket by
//! bucket: a bucket is a stable cursor, since index entries never move between buckets. A
//! record whose lock word shows an exclusive holder is being written (values change only
//! under the exclusive bits of their group, at commit), so the chunk stops before its bucket
//! and the learner asks again; a record read while a writer came and went is caught by
//! reading its lock word and update counters again after the image.
//!
//! The learner applies each record to its own MemStore ([`apply_snapshot`]) under the Thomas
//! write rule: a cell is written, with exactly the voter's version, only if that version's
//! commit timestamp is newer than its own. A committed write shipped to the learner meanwhile
//! (a catch-up) follows the same rule, so the copy and the catch-ups commute, and copies from
//! several voters merge to the newest value of every cell.

use crate::dc::{lock_word, DcHandle};
use crate::error::{Error, Result};
use crate::executor::push_counter_increments;
use crate::lock::{self, LockOutcome};
use crate::record::{encode_cell, CellVersion, RecordLayout, COUNTERS, LOCK_WORD};
use crate::verbs::DoorbellBatch;
use redt_proto::{NodeId, Offset, TableId};

/// One cell of a snapshot record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotCell {
    /// Cell index in its table's schema.
    pub cell: u16,
    /// Its version as stored (`CellVersion`: update counter << 48 | 48-bit commit timestamp).
    pub version: u64,
    /// Its value, unpadded (the cell's full width).
    pub value: Vec<u8>,
}

/// One record of a snapshot copy: every cell, as stored (a loaded record's cells have
/// version 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// Table id.
    pub table: TableId,
    /// Key.
    pub key: u64,
    /// Its cells, ascending by cell.
    pub cells: Vec<SnapshotCell>,
}

/// One chunk of a snapshot copy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotChunk {
    /// The records found, in index order.
    pub records: Vec<SnapshotRecord>,
    /// The index bucket to go on from; `None` once the scan reached the end of the index.
    pub next: Option<u64>,
}

/// What [`apply_snapshot`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotApplied {
    /// Records applied, in order from the first (fewer than given: the next one is in use).
    pub applied: usize,
    /// Cells written (the others were as new or newer here).
    pub cells_written: u64,
}

/// Bytes of the header words a writer changes: the lock word and the update counters.
const WATCHED: std::ops::Range<usize> = LOCK_WORD as usize..COUNTERS as usize + 32;

/// Reads one chunk of `node`'s records for which `keep(table, key)` holds, scanning at most
/// `max_buckets` index buckets from `from_bucket` and stopping at the first bucket boundary
/// past `max_bytes` of records (one bucket's records may pass it). A record in use (held
/// exclusively, or changed while read) ends the chunk before its bucket, so the caller asks
/// again from there; with nothing before it the chunk is empty and `next` is `from_bucket`.
/// Tables the catalog does not know are skipped.
///
/// # Errors
/// Verbs errors.
pub fn read_snapshot(
    dc: &DcHandle,
    node: NodeId,
    from_bucket: u64,
    max_buckets: u64,
    max_bytes: usize,
    keep: &dyn Fn(TableId, u64) -> bool,
) -> Result<SnapshotChunk> {
    let (entries, end) = dc.index.entries_in(dc.verbs.as_ref(), node, from_bucket, max_buckets.max(1))?;
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut bucket: Option<(u64, usize)> = None;
    for (b, table, key, at) in entries {
        if bucket.is_none_or(|(cur, _)| cur != b) {
            if bucket.is_some() && bytes >= max_bytes {
                return Ok(SnapshotChunk { records, next: Some(b) });
            }
            bucket = Some((b, records.len()));
        }
        if !keep(table, key) {
            continue;
        }
        let Ok(rl) = dc.catalog.layout(table) else { continue };
        match read_record(dc, node, rl, key, at)? {
            Read::Gone => {}
            Read::Busy => {
                let start = bucket.map_or(0, |(_, start)| start);
                records.truncate(start);
                return Ok(SnapshotChunk { records, next: Some(b) });
            }
            Read::Record(cells) => {
                bytes += 16 + cells.iter().map(|c| 12 + c.value.len()).sum::<usize>();
                records.push(SnapshotRecord { table, key, cells });
            }
        }
    }
    let next = (end < dc.index.buckets()).then_some(end);
    Ok(SnapshotChunk { records, next })
}

enum Read {
    Record(Vec<SnapshotCell>),
    /// Held exclusively, or changed while read.
    Busy,
    /// Not this key's record any more (the index slot was reused).
    Gone,
}

fn read_record(dc: &DcHandle, node: NodeId, rl: &RecordLayout, key: u64, at: Offset) -> Result<Read> {
    let mut image = vec![0u8; rl.record_bytes as usize];
    dc.verbs.read(node, at, &mut image)?;
    let Some(view) = rl.decode(&image).filter(|v| v.key == key) else { return Ok(Read::Gone) };
    if view.lock & lock::exclusive_bits(u16::MAX) != 0 {
        return Ok(Read::Busy);
    }
    let mut again = vec![0u8; WATCHED.len()];
    dc.verbs.read(node, Offset(at.0 + WATCHED.start as u64), &mut again)?;
    if again[..] != image[WATCHED] {
        return Ok(Read::Busy);
    }
    let cells = (0..rl.cells())
        .map(|i| SnapshotCell { cell: i as u16, version: view.version(i).0, value: view.value(i).to_vec() })
        .collect();
    Ok(Read::Record(cells))
}

/// Applies `records` (from another node's [`read_snapshot`]) to `node`'s own records, in
/// order: each record is created if missing (as an upsert would), the exclusive bits of the
/// groups of its cells are taken with one masked compare-and-swap, and every cell whose
/// version is newer (by commit timestamp) than the local one is written with exactly that
/// version and value (Thomas write rule; a cell never written on either side, commit
/// timestamp 0, takes the voter's value: the load); the written groups' update counters are bumped and
/// the bits released. Stops at the first record whose groups are held (a transaction or
/// replay is using it) and says how many were applied: the caller tries the rest later.
///
/// # Errors
/// [`Error::UnknownTable`], [`Error::InvalidSnapshot`] (a cell beyond its table's or a value
/// longer than its cell; checked for every record before anything is written), verbs, heap
/// and index errors.
pub fn apply_snapshot(dc: &DcHandle, node: NodeId, records: &[SnapshotRecord]) -> Result<SnapshotApplied> {
    for r in records {
        let rl = dc.catalog.layout(r.table)?;
        for c in &r.cells {
            let i = c.cell as usize;
            if i >= rl.cells() {
                let why = format!("{}/{}: cell {} beyond the {} cells of its table", r.table, r.key, i, rl.cells());
                return Err(Error::InvalidSnapshot(why));
            }
            if c.value.len() > rl.cell_bytes[i] as usize {
                let why =
                    format!("{}/{}: {}-byte value for a {}-byte cell", r.table, r.key, c.value.len(), rl.cell_bytes[i]);
                return Err(Error::InvalidSnapshot(why));
            }
        }
    }
    let mut out = SnapshotApplied::default();
    for r in records {
        let rl = dc.catalog.layout(r.table)?;
        let record = match dc.index.lookup(dc.verbs.as_ref(), node, r.table, r.key)? {
            Some(at) => at,
            None => match dc.insert_record(node, r.table, r.key, &[]) {
                Err(Error::DuplicateKey { .. }) => dc
                    .index
                    .lookup(dc.verbs.as_ref(), node, r.table, r.key)?
                    .ok_or(Error::NotFound { node, table: r.table, key: r.key })?,
                other => other?,
            },
        };
        let groups = r.cells.iter().fold(0u16, |g, c| g | 1 << rl.cell_group[c.cell as usize]);
        let cas = lock::plan(0, groups, 0).expect("a zero guess never conflicts");
        let old =
            dc.verbs.masked_compare_and_swap(node, lock_word(record), cas.compare, cas.mask, cas.swap, cas.mask)?;
        if lock::outcome(&cas, old) != LockOutcome::Acquired {
            return Ok(out);
        }
        let mut image = vec![0u8; rl.record_bytes as usize];
        dc.verbs.read(node, record, &mut image)?;
        let mut batch = DoorbellBatch::new();
        let mut written = 0u16;
        for c in &r.cells {
            let i = c.cell as usize;
            let at = rl.cell_offsets[i] as usize;
            let cur = image.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0);
            let (incoming, cur) = (CellVersion(c.version), CellVersion(cur));
            // Thomas write rule: as new or newer here. Two cells never written (commit
            // timestamp 0) hold the load, the same on every replica, or zeros where the record
            // was created here since (by a catch-up of another cell): the voter's is right.
            let never_written = incoming.cts().0 == 0 && cur.cts().0 == 0;
            if incoming.cts() <= cur.cts() && !never_written {
                continue;
            }
            batch.write(Offset(record.0 + rl.cell_offsets[i]), encode_cell(incoming, &c.value, rl.cell_bytes[i]));
            written |= 1 << rl.cell_group[i];
            out.cells_written += 1;
        }
        push_counter_increments(&mut batch, record, written);
        batch.fetch_and_add(lock_word(record), lock::release_operand(cas.added));
        dc.verbs.post_batch(node, &mut batch)?;
        out.applied += 1;
    }
    Ok(out)
}
