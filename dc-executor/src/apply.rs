//! Applying a `Committed` redo entry to a node's own records — the work of the replay task
//! (RedT §4.2, Algorithm 2 `ReplayLog`, with the Thomas write rule per cell).
//!
//! The replay task runs on the node that owns the region and uses local atomics. It takes
//! the exclusive bits of the groups it writes like any writer (so it never interleaves
//! with an executor holding them); if a group is held it gives up for now and the entry is
//! retried on a later pass. A cell is written only if the version the entry writes is newer
//! than the cell's, ordered by `(cts, update counter)` ([`ThomasRule`]), so replaying an
//! entry whose values the executor already wrote changes nothing, and of two copies of one
//! transaction's write the one computed from the newer version wins.
//! The new version is the one the entry's writer saw advanced to `cts` — the version the
//! executor wrote on every up-to-date replica — or, for an entry that recorded none, the
//! cell's own advanced. A change committed at or below its record's floor is superseded (a
//! delete of its key was freed on this node since, `deleted.rs`).

use crate::dc::DcHandle;
use crate::executor::cells_of;
use crate::lock;
use crate::memstore::LINE;
use crate::record::COUNTER_BOUNDARY;
use crate::record::{encode_cell, Catalog, CellVersion, ThomasRule, COUNTERS, FLOOR_WORD, LOCK_WORD};
use crate::replay::Apply;
use crate::ring::RedoEntry;
use redt_proto::{Cts, NodeId, Offset, TableId};
use redt_verbs::region::Region;

/// Applies the changes of the committed `entry` to `region` (the node's own MemStore).
/// Returns [`Apply::Retry`] if a lock group it needs is held, [`Apply::Done`] otherwise
/// (changes to tables unknown to `catalog` are skipped: they cannot be on this node).
///
/// The entry comes from shared memory that other processes write, so its checksum proves
/// only that it was written whole, not that it is sane: every record it changes is checked
/// first (64-byte aligned, inside the region, its header holding the entry's table and key),
/// and an entry that fails is not applied at all but answered [`Apply::Invalid`] naming why,
/// never a panic.
pub fn apply_committed(region: &Region, catalog: &Catalog, entry: &RedoEntry) -> Apply {
    apply_committed_by(region, catalog, entry, ThomasRule::default())
}

/// [`apply_committed`] under the given [`ThomasRule`] (the simulation's mutant picks the old
/// one).
pub fn apply_committed_by(region: &Region, catalog: &Catalog, entry: &RedoEntry, rule: ThomasRule) -> Apply {
    apply_committed_rows(region, catalog, entry, rule, &mut Replayed::default())
}

/// A record replay wrote a row into: `(table, key, record)`.
pub type RowWritten = (TableId, u64, Offset);

/// What [`apply_committed_rows`] reports beside its [`Apply`], appended entry after entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Each record replay wrote a row into (a cell value not all zero): a delete applied
    /// meanwhile may have taken its key out of its ordered index, which only
    /// [`DcHandle::relink_rows`] puts back.
    pub rows: Vec<RowWritten>,
    /// How many records' changes replay left out as superseded by the record's floor (older
    /// than a freed delete of the key, or of another key of its slot: `deleted.rs`).
    pub superseded: u64,
}

/// [`apply_committed_by`] that also reports the rows it wrote and the keys it left out as
/// superseded ([`Replayed`]).
pub fn apply_committed_rows(
    region: &Region,
    catalog: &Catalog,
    entry: &RedoEntry,
    rule: ThomasRule,
    out: &mut Replayed,
) -> Apply {
    if let Err(why) = check_records(region, catalog, entry) {
        return Apply::Invalid(why);
    }
    let cts = entry.cts;
    for l in &entry.locks {
        let Ok(rl) = catalog.layout(l.table) else { continue };
        let changes: Vec<_> = entry.changes.iter().filter(|c| c.record == l.record).collect();
        if changes.is_empty() {
            continue;
        }
        let mut groups = 0u16;
        for ch in &changes {
            if let Some(&g) = rl.cell_group.get(ch.cell as usize) {
                groups |= 1 << g;
            }
        }
        let cas = lock::plan(0, groups, 0).expect("a zero guess never conflicts");
        let lock_at = l.record.0 + LOCK_WORD;
        if !region.contains(l.record.0, rl.record_bytes) {
            continue;
        }
        let old = region.masked_compare_and_swap(lock_at, cas.compare, cas.mask, cas.swap, cas.mask);
        if lock::outcome(&cas, old) != lock::LockOutcome::Acquired {
            return Apply::Retry;
        }
        // A change committed at or below the record's floor is older than a delete of its key
        // that this node freed: superseded (`deleted.rs`).
        let mut floor = [0u8; 8];
        region.read(l.record.0 + FLOOR_WORD, &mut floor);
        let superseded = cts.0 <= u64::from_le_bytes(floor) & Cts::MASK;
        out.superseded += u64::from(superseded);
        let mut written = 0u16;
        let mut row = false;
        for ch in changes.iter().filter(|_| !superseded) {
            let c = ch.cell as usize;
            if c >= rl.cells() {
                continue;
            }
            let at = l.record.0 + rl.cell_offsets[c];
            let mut v = [0u8; 8];
            region.read(at, &mut v);
            let cur = CellVersion(u64::from_le_bytes(v));
            // The version the entry's writer saw where it recorded one (so a replica that
            // missed writes still ends with the writer's version), else this cell's own.
            if let Some(version) = rule.write(cur, cts, l.seen_version(ch.cell).map(CellVersion)) {
                region.write(at, &encode_cell(version, &ch.value, rl.cell_bytes[c]));
                written |= 1 << rl.cell_group[c];
                row |= ch.value.iter().any(|&b| b != 0);
            }
        }
        for g in cells_of(written as u64) {
            let word = l.record.0 + COUNTERS + 8 * (g as u64 / 4);
            region.masked_fetch_and_add(word, 1u64 << (16 * (g % 4)), COUNTER_BOUNDARY);
        }
        region.fetch_and_add(lock_at, lock::release_operand(cas.added));
        if row {
            out.rows.push((l.table, l.key, l.record));
        }
    }
    Apply::Done
}

impl DcHandle {
    /// Puts back into its ordered index the key of each record of `rows` (on `node`, written
    /// by replay, [`apply_committed_rows`]) that still holds a row and whose key its tree
    /// lacks. Replay applies a catch-up or a secondary's entry after it was accepted, and a
    /// delete committed in between, applied by its own phase 2, takes the key out of the tree
    /// while the record holds no row yet (`ordered.rs`, "Deletes"; sim seed 261, churn,
    /// world-5dc-n5). Without a gap lock, as [`crate::OrderedIndex::ensure`] does for a
    /// catch-up's accept: the row is a committed write's.
    ///
    /// # Errors
    /// Verbs and B+-tree errors.
    pub fn relink_rows(&self, node: NodeId, rows: &[RowWritten]) -> crate::Result<()> {
        let verbs = self.verbs.as_ref();
        for &(table, key, record) in rows {
            if !self.ordered.is_ordered(table) {
                continue;
            }
            let Ok(rl) = self.catalog.layout(table) else { continue };
            let mut image = vec![0u8; rl.record_bytes as usize];
            verbs.read(node, record, &mut image)?;
            if rl.decode(&image).is_some_and(|v| v.key == key && !v.is_absent()) {
                self.ordered.ensure(verbs, node, table, key, record)?;
            }
        }
        Ok(())
    }
}

/// Checks every record `entry` changes: 64-byte aligned (records are allocated in whole
/// lines), inside `region`, and holding the entry's table and key in its header.
fn check_records(region: &Region, catalog: &Catalog, entry: &RedoEntry) -> Result<(), &'static str> {
    for l in &entry.locks {
        let Ok(rl) = catalog.layout(l.table) else { continue };
        if !entry.changes.iter().any(|c| c.record == l.record) {
            continue;
        }
        if l.record.0 % LINE != 0 {
            return Err("a changed record's offset is not 64-byte aligned");
        }
        if !region.contains(l.record.0, rl.record_bytes) {
            return Err("a changed record lies outside the MemStore");
        }
        let mut header = [0u8; 16];
        region.read(l.record.0, &mut header);
        let key = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let meta = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        if key != l.key || meta as u16 != l.table.0 {
            return Err("a changed record's offset holds another key");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Change, EntryStatus, LockIntent, VoteWord};
    use proptest::prelude::*;
    use redt_proto::{CellSchema, Cts, Epoch, Locking, NodeId, Offset, Partitioning, TableId, TableSchema, TxnId};

    fn catalog() -> Catalog {
        let schema = TableSchema {
            id: TableId(1),
            name: "t".into(),
            cells: vec![CellSchema { name: "c".into(), bytes: 8 }, CellSchema { name: "d".into(), bytes: 20 }],
            locking: Locking::Cell,
            partitioning: Partitioning::Modulo,
            ordered: true,
        };
        Catalog::new([&schema])
    }

    proptest! {
        /// A committed entry from shared memory, whatever record offsets, keys, tables, cells
        /// and values it names, is applied or refused, never a panic.
        #[test]
        fn any_committed_entry_is_applied_or_refused_never_a_panic(
            record in prop_oneof![0u64..4096, any::<u64>()],
            key in 0u64..3,
            table in 0u16..3,
            cell in 0u16..4,
            value in proptest::collection::vec(any::<u8>(), 0..40),
            lock_bits: u64,
            cells: u64,
        ) {
            let region = Region::new_heap(4096);
            let rl = catalog().layout(TableId(1)).unwrap().clone();
            region.write(1024, &rl.encode_new(1, &[]));
            let record = Offset(record);
            let versions = vec![0; cells.count_ones() as usize];
            let entry = RedoEntry {
                txn: TxnId(1),
                status: EntryStatus::Committed,
                cts: Cts(5),
                vote: VoteWord::NONE,
                epoch: Epoch(1),
                coordinator: NodeId(0),
                start: Cts(0),
                participants: vec![],
                partitions: vec![],
                locks: vec![LockIntent { record, table: TableId(table), key, lock_bits, cells, versions }],
                changes: vec![Change { record, table: TableId(table), key, cell, value }],
            };
            let applied = apply_committed(&region, &catalog(), &entry);
            if record.0 != 1024 && table == 1 {
                prop_assert!(matches!(applied, Apply::Invalid(_)), "{:?}", applied);
            }
        }
    }
}
