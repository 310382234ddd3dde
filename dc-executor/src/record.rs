//! CREST-style cell-level records (CREST §4.1; docs/design.md §3).
//!
//! ```text
//! header, 64 bytes (one READ gives every lock and update counter of the record):
//!   w0      key (u64)
//!   w1      table id (u16) | cell count (u8) << 16 | flags (u8) << 24
//!   w2      lock word: 16 lock groups × 4 bits (see `lock.rs`)
//!   w3..w6  update counters: one u16 per lock group (CREST's EN array)
//!   w7      floor: the node's deletion horizon when the record was created (a commit
//!           timestamp; a change committed at or below it is superseded, `retire.rs`); on a
//!           free record, the free list's link (`free_list.rs`)
//! cells, each: version (u64 = update counter << 48 | 48-bit commit timestamp), then the
//!   value padded to a multiple of 8 bytes
//! ```
//! A table with more cells than lock groups maps contiguous cells to one group; a table
//! with record-level locking maps every cell to group 0.

use crate::lock::GROUPS;
use redt_proto::{Cts, Locking, Offset, TableId, TableSchema};

/// Record header size in bytes.
pub const HEADER_BYTES: u64 = 64;
/// Byte offset of the lock word inside the header.
pub const LOCK_WORD: u64 = 16;
/// Byte offset of the first update counter inside the header.
pub const COUNTERS: u64 = 24;
/// Byte offset of the floor word inside the header (see the module docs).
pub const FLOOR_WORD: u64 = 56;
/// Flag bit: the record slot is in use.
pub const FLAG_USED: u8 = 1;
/// Flag bit: a transaction's phase 1 created the record for its writes (an insert) and no
/// transaction that held it exclusively has committed yet (that commit clears the flag), as
/// opposed to a loader, a catch-up or a snapshot copy. Only such a record is retired
/// (`retire.rs`): a loaded record of zero bytes, or one a committed creation left empty, is
/// data.
pub const FLAG_INSERTED: u8 = 2;

/// A cell version: a 16-bit update counter and a 48-bit commit timestamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CellVersion(pub u64);

impl CellVersion {
    /// Builds a version from its parts (`cts` truncated to 48 bits).
    pub fn new(update_counter: u16, cts: Cts) -> Self {
        CellVersion(((update_counter as u64) << Cts::BITS) | (cts.0 & Cts::MASK))
    }
    /// The commit timestamp of the last write.
    pub fn cts(self) -> Cts {
        Cts(self.0 & Cts::MASK)
    }
    /// The number of writes so far (wrapping at 2^16).
    pub fn update_counter(self) -> u16 {
        (self.0 >> Cts::BITS) as u16
    }
    /// The version after a write at `cts`.
    pub fn next(self, cts: Cts) -> Self {
        CellVersion::new(self.update_counter().wrapping_add(1), cts)
    }

    /// The order of versions, `(cts, update counter)`: the counter wraps at 2^16, so the
    /// commit timestamp comes first and the counter only breaks ties. Votes
    /// (`redt_coordinator::decision`) and the [`ThomasRule`] both order by it.
    pub fn rank(self) -> (Cts, u16) {
        (self.cts(), self.update_counter())
    }
}

/// Which write wins when two writes of one cell carry the same commit timestamp (the Thomas
/// write rule's tie; docs/design.md §2, "Catch-up").
///
/// Two writes of a cell at one commit timestamp are two copies of one transaction's write
/// (a later writer of the cell reads its version and commits above it). They differ only
/// when one was computed from a stale version: the redo of a replica whose DC a commit left
/// behind (its vote was stale), applied by a recoverer that could not know it, next to the
/// catch-up carrying the quorum's values (sim seed 70185, world-5dc-n5, bank). Each copy
/// writes the version its writer saw advanced by one, so the copy computed from the newer
/// version carries the higher update counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThomasRule {
    /// Versions are ordered by `(cts, update counter)`, as votes are: at one commit
    /// timestamp the copy computed from the newer version wins, whichever lands first.
    #[default]
    Versions,
    /// Mutant for the simulation's check: the first copy to land wins at one commit timestamp
    /// (the rule before seed 70185), so a stale copy applied first stays.
    FirstWriteAtCts,
}

impl ThomasRule {
    /// The version to write into a cell now at `cur` for a write committed at `cts`, or
    /// `None` if the cell is to keep what it has. `seen` is the version the write's author saw
    /// (then the new version is `seen.next(cts)`, so every replica ends with the author's);
    /// where it is unknown the cell's own version is advanced, and only a newer commit
    /// timestamp writes (an unknown author cannot win a tie). A `seen` at or past `cts`
    /// never writes.
    pub fn write(self, cur: CellVersion, cts: Cts, seen: Option<CellVersion>) -> Option<CellVersion> {
        match seen {
            // A write commits above every version its author read: one "computed" from a
            // version at or past its own commit timestamp is a phase 1 that ran again after
            // the commit was applied (a delayed duplicate reaching a restarted node, sim seed
            // 56, bank, default), and its values are the commit applied twice.
            Some(seen) if seen.cts() >= cts => None,
            Some(seen) => {
                let new = seen.next(cts);
                let wins = match self {
                    ThomasRule::Versions => new.rank() > cur.rank(),
                    ThomasRule::FirstWriteAtCts => cts > cur.cts(),
                };
                wins.then_some(new)
            }
            None => (cts > cur.cts()).then(|| cur.next(cts)),
        }
    }

    /// Whether a copied version `incoming` (a snapshot carries whole versions) replaces `cur`.
    pub fn replaces(self, incoming: CellVersion, cur: CellVersion) -> bool {
        match self {
            ThomasRule::Versions => incoming.rank() > cur.rank(),
            ThomasRule::FirstWriteAtCts => incoming.cts() > cur.cts(),
        }
    }
}

/// Byte layout of one table's records, derived from its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    /// The table.
    pub table: TableId,
    /// Offset of each cell's version word from the record start.
    pub cell_offsets: Vec<u64>,
    /// Value size of each cell in bytes (unpadded).
    pub cell_bytes: Vec<u32>,
    /// Lock group of each cell.
    pub cell_group: Vec<u8>,
    /// Total record size in bytes (header + cells).
    pub record_bytes: u64,
}

impl RecordLayout {
    /// Derives the layout of `schema`'s records.
    pub fn new(schema: &TableSchema) -> Self {
        let n = schema.cells.len();
        let mut off = HEADER_BYTES;
        let mut cell_offsets = Vec::with_capacity(n);
        let mut cell_bytes = Vec::with_capacity(n);
        let mut cell_group = Vec::with_capacity(n);
        for (i, c) in schema.cells.iter().enumerate() {
            cell_offsets.push(off);
            cell_bytes.push(c.bytes);
            off += 8 + (c.bytes as u64).div_ceil(8) * 8;
            let g = match schema.locking {
                Locking::Record => 0,
                Locking::Cell if n <= GROUPS => i,
                Locking::Cell => i * GROUPS / n,
            };
            cell_group.push(g as u8);
        }
        RecordLayout { table: schema.id, cell_offsets, cell_bytes, cell_group, record_bytes: off }
    }

    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.cell_offsets.len()
    }

    /// Total value bytes of a record (the payload, without versions, padding or header).
    pub fn payload_bytes(&self) -> u64 {
        self.cell_bytes.iter().map(|&b| b as u64).sum()
    }

    /// Mask of lock groups covering the cells of `cells` (bit i = cell i).
    pub fn groups_of(&self, cells: u64) -> u16 {
        let mut g = 0u16;
        for (i, &grp) in self.cell_group.iter().enumerate() {
            if cells >> i & 1 == 1 {
                g |= 1 << grp;
            }
        }
        g
    }

    /// Mask of every cell of the record.
    pub fn all_cells(&self) -> u64 {
        if self.cells() == 64 {
            u64::MAX
        } else {
            (1u64 << self.cells()) - 1
        }
    }

    /// Encodes a fresh record (flags USED, lock free, counters 0, every cell at version 0
    /// with `values[i]`, or zeroes where `values` is shorter).
    pub fn encode_new(&self, key: u64, values: &[&[u8]]) -> Vec<u8> {
        self.encode_flagged(key, values, FLAG_USED)
    }

    /// [`RecordLayout::encode_new`] of a record a transaction's phase 1 creates for its
    /// writes, every cell zero (`FLAG_INSERTED`).
    pub fn encode_inserted(&self, key: u64) -> Vec<u8> {
        self.encode_flagged(key, &[], FLAG_USED | FLAG_INSERTED)
    }

    /// The header's meta word (bytes 8..16) of a record in use without the
    /// `FLAG_INSERTED` flag: what a commit writes over the meta of a record its phase 1
    /// created, so the record is kept for good.
    pub fn meta_kept(&self) -> u64 {
        self.meta(FLAG_USED)
    }

    fn meta(&self, flags: u8) -> u64 {
        self.table.0 as u64 | (self.cells() as u64) << 16 | (flags as u64) << 24
    }

    fn encode_flagged(&self, key: u64, values: &[&[u8]], flags: u8) -> Vec<u8> {
        let mut b = vec![0u8; self.record_bytes as usize];
        b[0..8].copy_from_slice(&key.to_le_bytes());
        let meta = self.meta(flags);
        b[8..16].copy_from_slice(&meta.to_le_bytes());
        for (i, v) in values.iter().enumerate().take(self.cells()) {
            let at = self.cell_offsets[i] as usize + 8;
            let n = v.len().min(self.cell_bytes[i] as usize);
            b[at..at + n].copy_from_slice(&v[..n]);
        }
        b
    }

    /// Decodes a record image (as READ whole). Returns `None` if `bytes` is too short or
    /// the header does not belong to this table.
    pub fn decode<'a>(&'a self, bytes: &'a [u8]) -> Option<RecordView<'a>> {
        if (bytes.len() as u64) < self.record_bytes {
            return None;
        }
        let w = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let meta = w(1);
        if meta as u16 != self.table.0 || (meta >> 24) as u8 & FLAG_USED == 0 {
            return None;
        }
        Some(RecordView { layout: self, bytes, key: w(0), lock: w(2) })
    }

    /// Whether the record image `bytes` was created by a transaction's phase 1
    /// (`FLAG_INSERTED`).
    pub fn is_inserted(&self, bytes: &[u8]) -> bool {
        bytes.get(11).is_some_and(|&f| f & FLAG_INSERTED != 0)
    }
}

/// A decoded record image.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    layout: &'a RecordLayout,
    bytes: &'a [u8],
    /// The record key.
    pub key: u64,
    /// The lock word as read.
    pub lock: u64,
}

impl<'a> RecordView<'a> {
    /// The version of cell `i`.
    pub fn version(&self, i: usize) -> CellVersion {
        let o = self.layout.cell_offsets[i] as usize;
        CellVersion(u64::from_le_bytes(self.bytes[o..o + 8].try_into().expect("8 bytes")))
    }
    /// The value of cell `i` (unpadded).
    pub fn value(&self, i: usize) -> &'a [u8] {
        let o = self.layout.cell_offsets[i] as usize + 8;
        &self.bytes[o..o + self.layout.cell_bytes[i] as usize]
    }
    /// Whether the record holds no row: every cell holds zero bytes, whatever its version.
    /// That is what a key never written reads as (a fresh record, or no record at all) and
    /// what a delete leaves (it writes zero to every cell, through the same redo, replay and
    /// Thomas write rule as any write; `ordered.rs`, "Deletes"). A point read reads such a
    /// record as missing and a range read skips it.
    pub fn is_absent(&self) -> bool {
        (0..self.layout.cells()).all(|c| self.value(c).iter().all(|&b| b == 0))
    }
    /// The record's floor: the deletion horizon of its node when it was created (`retire.rs`,
    /// "Deleted records"). A replica change committed at or below it is superseded.
    pub fn floor(&self) -> Cts {
        floor_of(self.bytes)
    }
    /// The newest commit timestamp among the record's cell versions (0 if none was written).
    pub fn newest_cts(&self) -> Cts {
        (0..self.layout.cells()).map(|c| self.version(c).cts()).max().unwrap_or_default()
    }
    /// The update counter of lock group `g`.
    pub fn group_counter(&self, g: usize) -> u16 {
        let o = COUNTERS as usize + 2 * g;
        u16::from_le_bytes([self.bytes[o], self.bytes[o + 1]])
    }
}

/// The floor word of a record image (at least a header long; zero for a shorter one).
pub fn floor_of(bytes: &[u8]) -> Cts {
    let at = FLOOR_WORD as usize;
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(|b| Cts(u64::from_le_bytes(b) & Cts::MASK))
        .unwrap_or_default()
}

/// Sets the floor word of the new record image `bytes` (a header at least) to `floor`.
pub fn set_floor(bytes: &mut [u8], floor: Cts) {
    let at = FLOOR_WORD as usize;
    if let Some(w) = bytes.get_mut(at..at + 8) {
        w.copy_from_slice(&(floor.0 & Cts::MASK).to_le_bytes());
    }
}

/// Record layouts of every table of a topology, by table id.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// By table; Fx-hashed: a lookup per record access, over a handful of fixed keys.
    layouts: rustc_hash::FxHashMap<TableId, RecordLayout>,
}

impl Catalog {
    /// The layouts of `tables`.
    pub fn new<'a>(tables: impl IntoIterator<Item = &'a TableSchema>) -> Self {
        Catalog { layouts: tables.into_iter().map(|t| (t.id, RecordLayout::new(t))).collect() }
    }

    /// The layout of `table`.
    ///
    /// # Errors
    /// [`crate::Error::UnknownTable`] if the table is not in the schema.
    pub fn layout(&self, table: TableId) -> crate::Result<&RecordLayout> {
        self.layouts.get(&table).ok_or(crate::Error::UnknownTable(table))
    }
}

/// Encodes one cell image (version word + padded value) for a single WRITE.
pub fn encode_cell(version: CellVersion, value: &[u8], cell_bytes: u32) -> Vec<u8> {
    let padded = (cell_bytes as usize).div_ceil(8) * 8;
    let mut b = vec![0u8; 8 + padded];
    b[..8].copy_from_slice(&version.0.to_le_bytes());
    let n = value.len().min(cell_bytes as usize);
    b[8..8 + n].copy_from_slice(&value[..n]);
    b
}

/// Offset of the lock word of the record at `record`.
pub fn lock_word(record: Offset) -> Offset {
    Offset(record.0 + LOCK_WORD)
}

/// Offset of the update-counter word holding group `g`'s counter, and the masked-FAA
/// operand and boundary that add one to that counter.
pub fn counter_increment(record: Offset, g: usize) -> (Offset, u64, u64) {
    let word = Offset(record.0 + COUNTERS + 8 * (g as u64 / 4));
    (word, 1u64 << (16 * (g % 4)), COUNTER_BOUNDARY)
}

/// Boundary mask of four 16-bit counters in one word (their top bits).
pub const COUNTER_BOUNDARY: u64 = 0x8000_8000_8000_8000;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redt_proto::{CellSchema, Partitioning};

    fn schema(cells: &[u32], locking: Locking) -> TableSchema {
        TableSchema {
            id: TableId(7),
            name: "t".into(),
            cells: cells.iter().enumerate().map(|(i, &b)| CellSchema { name: format!("c{i}"), bytes: b }).collect(),
            locking,
            partitioning: Partitioning::Modulo,
            ordered: true,
        }
    }

    #[test]
    fn ycsb_record_is_1184_bytes() {
        let l = RecordLayout::new(&schema(&[100; 10], Locking::Cell));
        assert_eq!(l.record_bytes, 64 + 10 * (8 + 104));
        assert_eq!(l.payload_bytes(), 1000);
        assert_eq!(l.groups_of(0b101), 0b101);
    }

    #[test]
    fn grouping_folds_wide_tables_and_record_locking() {
        let wide = RecordLayout::new(&schema(&[8; 21], Locking::Cell));
        assert_eq!(wide.cell_group[0], 0);
        assert_eq!(wide.cell_group[20], 15);
        assert!(wide.cell_group.windows(2).all(|w| w[0] <= w[1]));
        let rec = RecordLayout::new(&schema(&[8; 4], Locking::Record));
        assert_eq!(rec.groups_of(0b1111), 1);
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(
            sizes in proptest::collection::vec(1u32..300, 1..40),
            key: u64,
            seed: u8,
            versions in proptest::collection::vec(any::<u64>(), 40),
        ) {
            let l = RecordLayout::new(&schema(&sizes, Locking::Cell));
            let values: Vec<Vec<u8>> = sizes.iter().enumerate()
                .map(|(i, &n)| (0..n).map(|j| (j as u8) ^ seed ^ (i as u8)).collect())
                .collect();
            let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
            let mut img = l.encode_new(key, &refs);
            for i in 0..sizes.len() {
                let cell = encode_cell(CellVersion(versions[i]), &values[i], sizes[i]);
                let o = l.cell_offsets[i] as usize;
                img[o..o + cell.len()].copy_from_slice(&cell);
            }
            let v = l.decode(&img).expect("own table");
            prop_assert_eq!(v.key, key);
            prop_assert_eq!(v.lock, 0);
            for i in 0..sizes.len() {
                prop_assert_eq!(v.value(i), values[i].as_slice());
                prop_assert_eq!(v.version(i), CellVersion(versions[i]));
            }
            prop_assert_eq!(img.len() as u64 % 8, 0);
        }

        #[test]
        fn version_parts_round_trip(uc: u16, cts in 0u64..(1 << 48)) {
            let v = CellVersion::new(uc, Cts(cts));
            prop_assert_eq!(v.update_counter(), uc);
            prop_assert_eq!(v.cts(), Cts(cts));
            prop_assert_eq!(v.next(Cts(cts)).update_counter(), uc.wrapping_add(1));
        }
    }

    /// Applies writes one after another to a cell, as replay does.
    fn land(rule: ThomasRule, mut cur: CellVersion, writes: &[(Cts, Option<CellVersion>)]) -> CellVersion {
        for &(cts, seen) in writes {
            if let Some(v) = rule.write(cur, cts, seen) {
                cur = v;
            }
        }
        cur
    }

    /// Exhaustive over small versions: two copies of one write at one commit timestamp end
    /// with the copy computed from the newer version in either order; a copy landing twice
    /// changes nothing the second time; an unknown author never wins a tie; an older
    /// commit timestamp never writes; the mutant keeps whichever copy landed first.
    #[test]
    fn the_copy_from_the_newer_version_wins_whatever_the_order() {
        // One cell's history: every write advances the update counter by one, on every
        // replica (each writes its author's version advanced), so counters grow with cts.
        let versions: Vec<CellVersion> =
            [(0u16, 0u64), (1, 3), (2, 4), (3, 6), (4, 7), (5, 7)].map(|(uc, c)| CellVersion::new(uc, Cts(c))).into();
        let cts = Cts(7);
        for &start in &versions {
            for &a in versions.iter().filter(|v| v.cts() < cts) {
                for &b in versions.iter().filter(|v| v.cts() < cts) {
                    let ab = land(ThomasRule::Versions, start, &[(cts, Some(a)), (cts, Some(b))]);
                    let ba = land(ThomasRule::Versions, start, &[(cts, Some(b)), (cts, Some(a))]);
                    assert_eq!(ab, ba, "start {start:?} copies {a:?} {b:?}");
                    if start.cts() < cts {
                        let newer = if a.rank() >= b.rank() { a } else { b };
                        assert_eq!(ab, newer.next(cts), "start {start:?} copies {a:?} {b:?}");
                        let first = land(ThomasRule::FirstWriteAtCts, start, &[(cts, Some(a)), (cts, Some(b))]);
                        assert_eq!(first, a.next(cts), "the mutant keeps the first copy");
                    }
                    assert_eq!(ThomasRule::Versions.write(ab, cts, Some(a)), None, "a copy landing again");
                }
                if start.cts() > Cts(2) {
                    assert_eq!(ThomasRule::Versions.write(start, Cts(2), Some(a)), None, "an older cts");
                }
            }
            let own = CellVersion::new(9, cts);
            assert_eq!(ThomasRule::Versions.write(start, cts, Some(own)), None, "a write that read its own cts");
            let unknown = ThomasRule::Versions.write(start, start.cts(), None);
            assert_eq!(unknown, None, "an unknown author at the cell's own cts");
            assert_eq!(ThomasRule::Versions.write(start, Cts(9), None), Some(start.next(Cts(9))));
        }
    }

    /// A snapshot's whole version replaces the cell's only if it is newer by `(cts, update
    /// counter)`; the mutant compares commit timestamps alone.
    #[test]
    fn a_copied_version_replaces_only_an_older_one() {
        let v = |uc, c| CellVersion::new(uc, Cts(c));
        assert!(ThomasRule::Versions.replaces(v(2, 5), v(1, 5)));
        assert!(!ThomasRule::Versions.replaces(v(1, 5), v(2, 5)));
        assert!(!ThomasRule::Versions.replaces(v(1, 5), v(1, 5)));
        assert!(ThomasRule::Versions.replaces(v(0, 6), v(9, 5)));
        assert!(!ThomasRule::FirstWriteAtCts.replaces(v(2, 5), v(1, 5)));
    }
}
