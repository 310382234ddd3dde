//! Snapshot copy of a node's records, for rebuilding a replica (docs/design.md, "Rebuild").
//!
//! A new replica of a partition (a *learner*) is filled from an up-to-date replica while
//! transactions go on: the source scans its index a few buckets at a time
//! ([`read_snapshot`]) and hands back [`SnapshotChunk`]s of committed cells, which travel to
//! the learner (over QUIC, the coordinator's business) and are applied there
//! ([`apply_snapshot`]). The learner meanwhile receives the writes committed during the copy
//! through the ordinary catch-up path. The two commute because every cell apply follows the
//! **Thomas write rule**: a cell is written only if the incoming version is newer than the
//! cell's, ordered by `(cts, update counter)` ([`crate::ThomasRule`]), so whichever of a
//! snapshot row and a concurrent write arrives last, each cell ends with the newer of the
//! two.
//!
//! Consistency of one record on the source: values are written only under the record's
//! exclusive lock bits, at commit, and every such write bumps its group's update counter
//! before the bits are released. So an image READ while no group is held exclusively, whose
//! lock word and counters are unchanged when re-READ after it, holds committed values only
//! and no torn cell. A record found busy ends the chunk before its bucket; the caller asks
//! again later from that bucket.

use crate::dc::DcHandle;
use crate::error::{Error, Result};
use crate::executor::push_counter_increments;
use crate::lock;
use crate::record::lock_word;
use crate::record::{encode_cell, CellVersion, RecordLayout, ThomasRule, COUNTERS, HEADER_BYTES, LOCK_WORD};
use crate::replica::create_record;
use crate::verbs::DoorbellBatch;
use redt_proto::{NodeId, Offset, TableId};

/// One cell of a [`SnapshotRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotCell {
    /// Cell index within the record (0-based, below the table's cell count).
    pub cell: u16,
    /// The cell's version on the source: a raw [`CellVersion`] word (update counter << 48 |
    /// 48-bit commit timestamp); 0 for a cell never written since the load.
    pub version: u64,
    /// The cell's value, unpadded: the table's cell width in bytes as read (at most that
    /// width on apply; a shorter value is zero-padded).
    pub value: Vec<u8>,
}

/// The cells of one record, as copied by [`read_snapshot`] (docs/design.md, "Rebuild").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// Table of the record.
    pub table: TableId,
    /// Key of the record.
    pub key: u64,
    /// Every cell of the record, in cell order (a loaded cell never written since has
    /// version 0: its value is the load, the same on every replica).
    pub cells: Vec<SnapshotCell>,
}

impl SnapshotRecord {
    /// Size of the record in bytes as a compact encoding would carry it: 12 for the table
    /// (2), key (8) and cell count (2), then per cell 14 for its index (2), version (8) and
    /// value length (4), plus the value. The measure [`read_snapshot`]'s `max_bytes` bounds.
    pub fn encoded_bytes(&self) -> usize {
        12 + self.cells.iter().map(|c| 14 + c.value.len()).sum::<usize>()
    }

    /// Whether the record holds a row: a cell value not all zero bytes (as
    /// [`crate::RecordView::is_absent`] reads a record).
    pub fn holds_row(&self) -> bool {
        self.cells.iter().any(|c| c.value.iter().any(|&b| b != 0))
    }

    /// The newest commit timestamp among its cells' versions (0 if none was written).
    pub fn newest_cts(&self) -> redt_proto::Cts {
        self.cells.iter().map(|c| CellVersion(c.version).cts()).max().unwrap_or_default()
    }
}

/// One piece of a snapshot scan: the records of a run of whole index buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotChunk {
    /// The records found, in bucket order (the entries the caller kept).
    pub records: Vec<SnapshotRecord>,
    /// The index bucket to resume the scan from (pass it as the next `from_bucket`), or
    /// `None` when the scan reached the end of the index. Equal to the `from_bucket` asked
    /// for, with no records, when the first bucket holds a busy record: retry later.
    pub next: Option<u64>,
}

impl SnapshotChunk {
    /// Sum of [`SnapshotRecord::encoded_bytes`] over the records, in bytes.
    pub fn encoded_bytes(&self) -> usize {
        self.records.iter().map(SnapshotRecord::encoded_bytes).sum()
    }
}

/// What [`apply_snapshot`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotApplied {
    /// Records fully handled, from the start of the slice: every one of their cells
    /// written or found newer (or as new). Fewer than given when a record was held: the
    /// caller applies the rest, from this index on, later.
    pub applied: usize,
    /// Cells written (the rest were as new or newer on the destination: Thomas write rule).
    pub cells_written: u64,
}

/// Buckets the scan handles per round of READs (their entries' record images are READ in
/// one doorbell batch, the headers re-READ in a second).
const WINDOW_BUCKETS: u64 = 16;

/// Bytes of the header re-READ after a record image: the lock word and the four
/// update-counter words (w2..w6).
const RECHECK_BYTES: usize = 40;

/// Reads the committed records of `node` whose `(table, key)` satisfies `keep`, from index
/// bucket `from_bucket` on, for a snapshot copy (docs/design.md, "Rebuild").
///
/// Scans at most `max_buckets` buckets (at least one) of `node`'s index, READing each kept
/// entry's whole record (`record_bytes`, in one doorbell batch per window of buckets) and
/// then re-READing its lock word and update counters (header words w2..w6). A record whose
/// header no longer names the entry's table and key (the index's slot-reuse ABA) is
/// skipped, and so are entries of tables unknown to the catalog. A record is *busy* when a
/// lock group is held exclusively in the image or the re-READ words differ from the image's
/// (a commit landed meanwhile): the chunk then ends before that record's bucket, with
/// `next = Some(bucket)`, so the caller retries from there later. Shared (read) locks do
/// not make a record busy: readers write nothing.
///
/// The chunk holds whole buckets only. It stops after the last bucket that keeps
/// [`SnapshotChunk::encoded_bytes`] within `max_bytes` — but always takes the first bucket
/// that has records, so a single bucket may exceed `max_bytes`. Resuming at `next` is
/// exact: entries never move between buckets.
///
/// Each record carries every cell (raw [`CellVersion`] and value as stored), the loaded
/// cells never written since included (version 0).
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
    let verbs = dc.verbs.as_ref();
    let total = dc.layout.index_buckets();
    let end = from_bucket.saturating_add(max_buckets.max(1)).min(total);
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut window = from_bucket;
    while window < end {
        let window_end = (window + WINDOW_BUCKETS).min(end);
        // The kept entries of the window, with their bucket and layout.
        let mut entries: Vec<(u64, u64, Offset, &RecordLayout)> = Vec::new();
        dc.index.scan_buckets(verbs, node, window, window_end - window, |bucket, table, key, at| {
            if keep(table, key) {
                if let Ok(rl) = dc.catalog.layout(table) {
                    entries.push((bucket, key, at, rl));
                }
            }
        })?;
        let mut images = DoorbellBatch::new();
        let image_reads: Vec<usize> =
            entries.iter().map(|&(_, _, at, rl)| images.read(at, rl.record_bytes as usize)).collect();
        let mut rechecks = DoorbellBatch::new();
        let recheck_reads: Vec<usize> =
            entries.iter().map(|&(_, _, at, _)| rechecks.read(lock_word(at), RECHECK_BYTES)).collect();
        if !entries.is_empty() {
            // Two posts: every header re-READ starts after every image READ completed.
            verbs.post_batch(node, &mut images)?;
            verbs.post_batch(node, &mut rechecks)?;
        }
        let mut e = 0;
        for bucket in window..window_end {
            let mut found = Vec::new();
            while e < entries.len() && entries[e].0 == bucket {
                let (_, key, _, rl) = entries[e];
                let image = images.read_result(image_reads[e]);
                let recheck = rechecks.read_result(recheck_reads[e]);
                e += 1;
                match snapshot_of(rl, key, image, recheck) {
                    Seen::Skip => {}
                    Seen::Busy => return Ok(SnapshotChunk { records, next: Some(bucket) }),
                    Seen::Record(r) => found.push(r),
                }
            }
            let add: usize = found.iter().map(SnapshotRecord::encoded_bytes).sum();
            if !records.is_empty() && bytes + add > max_bytes {
                return Ok(SnapshotChunk { records, next: Some(bucket) });
            }
            bytes += add;
            records.extend(found);
            if !records.is_empty() && bytes >= max_bytes && bucket + 1 < end {
                return Ok(SnapshotChunk { records, next: Some(bucket + 1) });
            }
        }
        window = window_end;
    }
    Ok(SnapshotChunk { records, next: (end < total).then_some(end) })
}

/// What one entry's READs say.
enum Seen {
    /// Not a record of this entry (slot reuse) or no committed cell: leave it out.
    Skip,
    /// Held exclusively, or changed between the image and the re-READ: retry later.
    Busy,
    /// A consistent committed image.
    Record(SnapshotRecord),
}

/// Decodes the image of `key`'s record READ as `image`, with `recheck` the lock word and
/// counters re-READ after it.
fn snapshot_of(rl: &RecordLayout, key: u64, image: &[u8], recheck: &[u8]) -> Seen {
    let Some(view) = rl.decode(image).filter(|v| v.key == key) else {
        return Seen::Skip;
    };
    let header = &image[LOCK_WORD as usize..LOCK_WORD as usize + RECHECK_BYTES];
    debug_assert_eq!(COUNTERS, LOCK_WORD + 8);
    debug_assert!(LOCK_WORD as usize + RECHECK_BYTES <= HEADER_BYTES as usize);
    if view.lock & lock::exclusive_bits(u16::MAX) != 0 || header != recheck {
        return Seen::Busy;
    }
    let cells: Vec<SnapshotCell> = (0..rl.cells())
        .map(|i| SnapshotCell { cell: i as u16, version: view.version(i).0, value: view.value(i).to_vec() })
        .collect();
    Seen::Record(SnapshotRecord { table: rl.table, key, cells })
}

/// Checks `r` against its table's layout: every cell in range, every value no longer than
/// its cell.
fn check(dc: &DcHandle, r: &SnapshotRecord) -> Result<()> {
    let rl = dc.catalog.layout(r.table)?;
    for c in &r.cells {
        let cell = c.cell as usize;
        if cell >= rl.cells() {
            return Err(Error::InvalidSnapshot {
                why: format!("{} key {}: cell {} beyond the table's {} cells", r.table, r.key, c.cell, rl.cells()),
            });
        }
        if c.value.len() > rl.cell_bytes[cell] as usize {
            return Err(Error::InvalidSnapshot {
                why: format!(
                    "{} key {} cell {}: {}-byte value for a {}-byte cell",
                    r.table,
                    r.key,
                    c.cell,
                    c.value.len(),
                    rl.cell_bytes[cell]
                ),
            });
        }
    }
    Ok(())
}

/// Applies snapshot `records` (as [`read_snapshot`] returned them on another replica) to
/// `node`'s records, in order, under the Thomas write rule (docs/design.md, "Rebuild").
///
/// Per record: find it in the index, creating it (every cell zero at version 0) if absent;
/// take the exclusive bits of every lock group holding a cell it carries with one masked
/// compare-and-swap on its lock word; READ it; write each cell whose incoming version's
/// commit timestamp is newer than the local cell's, with exactly the incoming version (not
/// advanced) and value (zero-padded to the cell) — or, when neither was ever written
/// (commit timestamp 0 on both sides), the incoming value: the load, the same on every
/// replica, where this one may hold zeros (its record created here since by the catch-up
/// of another cell); bump the update counters of the groups
/// written; release — the writes, increments and release in one doorbell batch. Cells as
/// new or newer locally are left alone, so applying a snapshot twice, or after the
/// catch-up of a later commit, changes nothing.
///
/// Stops at the first record a group of which is held (a transaction, replay or catch-up
/// is using it) and returns how many records it applied before it: the caller retries
/// `records[applied..]` later. Every record is checked before anything is written, so bad
/// input changes nothing.
///
/// # Errors
/// [`Error::UnknownTable`] for a table not in the schema; [`Error::InvalidSnapshot`] for a
/// cell beyond its table's or a value longer than its cell; [`Error::NotFound`] if the
/// index points at a record of another key; heap, index and verbs errors.
pub fn apply_snapshot(dc: &DcHandle, node: NodeId, records: &[SnapshotRecord]) -> Result<SnapshotApplied> {
    apply_snapshot_by(dc, node, records, ThomasRule::default())
}

/// [`apply_snapshot`] under the given [`ThomasRule`] (the simulation's mutant picks the old
/// one).
///
/// # Errors
/// As [`apply_snapshot`].
pub fn apply_snapshot_by(
    dc: &DcHandle,
    node: NodeId,
    records: &[SnapshotRecord],
    rule: ThomasRule,
) -> Result<SnapshotApplied> {
    for r in records {
        check(dc, r)?;
    }
    let verbs = dc.verbs.as_ref();
    let keys: Vec<(TableId, u64)> = records.iter().map(|r| (r.table, r.key)).collect();
    let found = dc.index.lookup_many(verbs, node, &keys)?;
    let mut done = SnapshotApplied::default();
    // Records written a row into: their keys go back into their ordered index after.
    let mut rows = Vec::new();
    for (r, at) in records.iter().zip(found) {
        if r.cells.is_empty() {
            done.applied += 1;
            continue;
        }
        let rl = dc.catalog.layout(r.table)?;
        let record = match at {
            Some(at) => at,
            None => create_record(dc, node, r.table, r.key)?,
        };
        let groups = r.cells.iter().fold(0u16, |g, c| g | 1 << rl.cell_group[c.cell as usize]);
        let cas = lock::plan(0, groups, 0).expect("a zero guess never conflicts");
        let old = verbs.masked_compare_and_swap(node, lock_word(record), cas.compare, cas.mask, cas.swap, cas.mask)?;
        if lock::outcome(&cas, old) != lock::LockOutcome::Acquired {
            if old == crate::free_list::RETIRED {
                // Retired and still indexed: settled now, the next attempt creates anew.
                dc.help_retirement(node, r.table, r.key, record)?;
            }
            dc.relink_rows(node, &rows)?;
            return Ok(done);
        }
        let mut batch = DoorbellBatch::new();
        let mut image = vec![0u8; rl.record_bytes as usize];
        let valid = verbs.read(node, record, &mut image).map_err(Error::from).and_then(|()| match rl.decode(&image) {
            Some(v) if v.key == r.key => Ok(()),
            _ => Err(Error::NotFound { node, table: r.table, key: r.key }),
        });
        if let Err(e) = valid {
            batch.fetch_and_add(lock_word(record), lock::release_operand(cas.added));
            verbs.post_batch(node, &mut batch)?;
            return Err(e);
        }
        let mut written = 0u16;
        let mut cells_written = 0u64;
        for c in &r.cells {
            let cell = c.cell as usize;
            let at = rl.cell_offsets[cell] as usize;
            let cur = CellVersion(u64::from_le_bytes(image[at..at + 8].try_into().expect("8 bytes")));
            let incoming = CellVersion(c.version);
            let never_written = incoming.cts().0 == 0 && cur.cts().0 == 0;
            let differs = image[at + 8..at + 8 + c.value.len()] != c.value[..];
            if !(rule.replaces(incoming, cur) || never_written && differs) {
                continue; // Thomas write rule: the local cell is as new or newer.
            }
            batch.write(Offset(record.0 + at as u64), encode_cell(incoming, &c.value, rl.cell_bytes[cell]));
            // A later copy of the same cell in this record compares with this one.
            image[at..at + 8].copy_from_slice(&incoming.0.to_le_bytes());
            written |= 1 << rl.cell_group[cell];
            cells_written += 1;
        }
        push_counter_increments(&mut batch, record, written);
        batch.fetch_and_add(lock_word(record), lock::release_operand(cas.added));
        verbs.post_batch(node, &mut batch)?;
        done.applied += 1;
        done.cells_written += cells_written;
        if cells_written > 0 && r.holds_row() {
            rows.push((r.table, r.key, record));
        }
    }
    // A row copied into a record whose key a delete took out of the tree (or a record made
    // now) is put back, as replay does for a catch-up's row (`DcHandle::relink_rows`).
    dc.relink_rows(node, &rows)?;
    Ok(done)
}

/// Empties the rows of `keys` (records of `node`) that a rebuilt learner holds but no voter's
/// snapshot copy refreshed (docs/design.md, "Rebuild", "What the copy did not refresh"): a
/// key its voters deleted and freed while this node was away, whose old value would
/// otherwise stay here for good.
///
/// Per key, in order: find its record (a key with none is skipped); take the exclusive bits
/// of every cell group with one masked compare-and-swap on its lock word; READ it; if it
/// still holds a row, write every cell that holds a value as zero bytes, its version raised
/// to `at` (the cell's own advanced to `at` when older, kept when as new or newer), so a
/// write older than `at` that reaches the replica later is turned away by the Thomas write
/// rule, as a delete at `at` would turn it; bump the update counters of the groups written;
/// take the key out of its ordered index, as a committed delete's phase 2 does; release.
///
/// Stops at the first record a group of which is held, returning how many keys it handled
/// before it ([`SnapshotApplied::applied`]; `cells_written` counts the cells emptied): the
/// caller retries the rest later.
///
/// # Errors
/// [`Error::UnknownTable`] for a table not in the schema; [`Error::NotFound`] if the index
/// points at a record of another key; index and verbs errors.
pub fn purge_records(
    dc: &DcHandle,
    node: NodeId,
    keys: &[(TableId, u64)],
    at: redt_proto::Cts,
) -> Result<SnapshotApplied> {
    let verbs = dc.verbs.as_ref();
    let found = dc.index.lookup_many(verbs, node, keys)?;
    let mut done = SnapshotApplied::default();
    for (&(table, key), record) in keys.iter().zip(found) {
        let Some(record) = record else {
            done.applied += 1;
            continue;
        };
        let rl = dc.catalog.layout(table)?;
        let groups = rl.groups_of(rl.all_cells());
        let cas = lock::plan(0, groups, 0).expect("a zero guess never conflicts");
        let old = verbs.masked_compare_and_swap(node, lock_word(record), cas.compare, cas.mask, cas.swap, cas.mask)?;
        if lock::outcome(&cas, old) != lock::LockOutcome::Acquired {
            if old == crate::free_list::RETIRED {
                dc.help_retirement(node, table, key, record)?;
            }
            return Ok(done);
        }
        let release = |result: Result<()>| -> Result<()> {
            verbs.fetch_and_add(node, lock_word(record), lock::release_operand(cas.added))?;
            result
        };
        let mut image = vec![0u8; rl.record_bytes as usize];
        if let Err(e) = verbs.read(node, record, &mut image) {
            return release(Err(e.into())).map(|()| done);
        }
        let view = match rl.decode(&image) {
            Some(v) if v.key == key => v,
            _ => return release(Err(Error::NotFound { node, table, key })).map(|()| done),
        };
        if view.is_absent() {
            release(Ok(()))?;
            done.applied += 1;
            continue;
        }
        let mut batch = DoorbellBatch::new();
        let mut written = 0u16;
        for cell in 0..rl.cells() {
            if view.value(cell).iter().all(|&b| b == 0) {
                continue;
            }
            let cur = view.version(cell);
            let version = if cur.cts() < at { cur.next(at) } else { cur };
            let offset = rl.cell_offsets[cell];
            batch.write(Offset(record.0 + offset), encode_cell(version, &[], rl.cell_bytes[cell]));
            written |= 1 << rl.cell_group[cell];
            done.cells_written += 1;
        }
        push_counter_increments(&mut batch, record, written);
        if let Err(e) = verbs.post_batch(node, &mut batch) {
            return release(Err(e.into())).map(|()| done);
        }
        let unlinked = dc.ordered.unlink(verbs, node, table, key, record, cas.added).map(drop);
        release(unlinked)?;
        done.applied += 1;
    }
    Ok(done)
}
