//! What one entry of a ring may take, and the largest entry a topology's `limits:` admit: a
//! topology whose limits admit a transaction whose redo entry on one node is larger than that
//! node's ring takes in one entry is refused when it is loaded ([`check_limits_fit_ring`]),
//! rather than such a transaction being refused by every executor it reaches.
//!
//! The bound counts point operations: `limits.max_ops_per_txn` records, all on one node, each
//! of the table whose records make the largest entry, every cell locked and written at its
//! full width (a records `put` does exactly that; key/value and YCSB operations touch fewer
//! cells), and every DC and partition of the topology named. Range reads (scans) are not
//! bounded by the operation count: one holds up to `crate::executor::MAX_RANGE_ENTRIES` rows
//! per partition, so a transaction with enough of them can still build a larger entry; an
//! executor then refuses it before it reserves any ring space ([`super::check_encodable`],
//! [`super::RingWriter::reserve`]).

use super::codec::EntryShape;
use super::{MAX_ENTRY_SLOTS, SLOT_BYTES};
use crate::error::{Error, Result};
use crate::memstore::Layout;
use crate::record::RecordLayout;
use redt_proto::{TableSchema, Topology};

/// The most bytes one redo entry may take in a ring laid out by `layout`: its slots (all of
/// them but the head/tail block), at most [`MAX_ENTRY_SLOTS`] (the entry format's slot count
/// is 16 bits), of 64 bytes each.
pub fn entry_capacity(layout: &Layout) -> u64 {
    layout.ring_slots().min(MAX_ENTRY_SLOTS).saturating_mul(SLOT_BYTES)
}

/// The shape one point operation on a record of `table` adds to an entry at most: one lock
/// intent with a version per cell, and a change per cell at the cell's full width (as the
/// executor pads a written value: `RecordLayout::cell_bytes`).
pub fn op_shape(table: &TableSchema) -> EntryShape {
    let layout = RecordLayout::new(table);
    let cells = layout.cell_bytes.len() as u64;
    EntryShape {
        locks: 1,
        versions: cells,
        changes: cells,
        value_bytes: layout.cell_bytes.iter().map(|&b| u64::from(b)).sum(),
        ..EntryShape::default()
    }
}

/// The largest redo entry one node's ring may have to hold for a transaction within
/// `topology.limits` (see the module docs for what it counts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LargestEntry {
    /// Its counts; [`EntryShape::bytes`] is its encoded size.
    pub shape: EntryShape,
    /// The table whose records make it largest (`None`: the topology has no table).
    pub table: Option<String>,
    /// Its point operations: `limits.max_ops_per_txn`.
    pub ops: u64,
    /// Bytes one operation adds to it ([`op_shape`] of `table`, encoded).
    pub op_bytes: u64,
}

/// The largest redo entry `topology`'s limits admit on one node (see the module docs).
pub fn largest_entry(topology: &Topology) -> LargestEntry {
    let ops = topology.limits.max_ops_per_txn;
    let widest =
        topology.tables.iter().map(|t| (t, op_shape(t))).max_by_key(|(t, s)| (s.body_bytes(), std::cmp::Reverse(t.id)));
    let per_op = widest.as_ref().map(|(_, s)| *s).unwrap_or_default();
    let shape = EntryShape {
        participants: topology.dcs.len() as u64,
        partitions: topology.partitions.len() as u64,
        locks: per_op.locks.saturating_mul(ops),
        versions: per_op.versions.saturating_mul(ops),
        changes: per_op.changes.saturating_mul(ops),
        value_bytes: per_op.value_bytes.saturating_mul(ops),
    };
    LargestEntry { shape, table: widest.map(|(t, _)| t.name.clone()), ops, op_bytes: per_op.body_bytes() }
}

/// Checks that the largest redo entry `topology`'s limits admit ([`largest_entry`]) fits one
/// entry of its rings ([`entry_capacity`] of `topology.memstore`).
///
/// # Errors
/// [`Error::LimitsExceedRing`], giving both sizes, the table, and the largest
/// `limits.max_ops_per_txn` that fits (or, when not even one operation fits, that the ring or
/// the table's records must change).
pub fn check_limits_fit_ring(topology: &Topology) -> Result<()> {
    let largest = largest_entry(topology);
    let layout = Layout::from_config(&topology.memstore);
    let ring_bytes = entry_capacity(&layout);
    let entry_bytes = largest.shape.bytes();
    if entry_bytes <= ring_bytes {
        return Ok(());
    }
    // The header, the participants and the partitions: what is left is for the operations.
    let fixed = EntryShape {
        participants: largest.shape.participants,
        partitions: largest.shape.partitions,
        ..EntryShape::default()
    }
    .bytes();
    let fits_ops = ring_bytes.saturating_sub(fixed).checked_div(largest.op_bytes).unwrap_or(u64::MAX);
    let table = largest.table.unwrap_or_default();
    let capped_by = if layout.ring_slots() > MAX_ENTRY_SLOTS {
        format!("{MAX_ENTRY_SLOTS} slots of {SLOT_BYTES} bytes, the entry format's most")
    } else {
        "memstore.ring, less its 64-byte head and tail block".to_string()
    };
    let fix = if fits_ops == 0 {
        format!("not even one operation on `{table}` fits: give the table smaller records, or memstore.ring more room")
    } else {
        format!("lower limits.max_ops_per_txn to {fits_ops} or less")
    };
    Err(Error::LimitsExceedRing {
        entry_bytes,
        ring_bytes,
        why: format!(
            "limits.max_ops_per_txn {} on records of table `{table}` ({} bytes of redo each: every cell locked and \
             written); an entry may take {ring_bytes} bytes ({capped_by}); {fix}",
            largest.ops, largest.op_bytes
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{decode, encode, Change, EntryStatus, LockIntent, RedoEntry, VoteWord};
    use proptest::prelude::*;
    use redt_proto::{
        CellSchema, Cts, DcId, Epoch, Locking, NodeId, Offset, PartitionId, Partitioning, TableId, TxnId,
    };

    fn repo_file(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
    }

    fn local_fast() -> Topology {
        Topology::load(&repo_file("configs/local-fast.yaml")).expect("local-fast.yaml loads")
    }

    /// The entry [`largest_entry`] describes, built: `ops` records of `table`, every cell
    /// locked and written at full width, every DC and partition of `topology` named.
    fn build(topology: &Topology, table: &TableSchema, ops: u64) -> RedoEntry {
        let layout = RecordLayout::new(table);
        let all_cells = if layout.cell_bytes.len() == 64 { u64::MAX } else { (1u64 << layout.cell_bytes.len()) - 1 };
        let mut locks = Vec::new();
        let mut changes = Vec::new();
        for key in 0..ops {
            let record = Offset(4096 + key * 64);
            locks.push(LockIntent {
                record,
                table: table.id,
                key,
                lock_bits: 1,
                cells: all_cells,
                versions: vec![7; layout.cell_bytes.len()],
            });
            for (c, &bytes) in layout.cell_bytes.iter().enumerate() {
                changes.push(Change {
                    record,
                    table: table.id,
                    key,
                    cell: c as u16,
                    value: vec![0xab; bytes as usize],
                });
            }
        }
        RedoEntry {
            txn: TxnId(1),
            status: EntryStatus::Logged,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: Epoch(1),
            coordinator: NodeId(0),
            start: Cts(5),
            participants: (0..topology.dcs.len() as u16).map(DcId).collect(),
            partitions: (0..topology.partitions.len() as u32).map(PartitionId).collect(),
            locks,
            changes,
        }
    }

    /// The body length the encoder writes in the header (the low half of word 5), and the
    /// encoded length.
    fn encoded(entry: &RedoEntry) -> (u64, u64) {
        let bytes = encode(entry, 3);
        decode(NodeId(0), 3, &bytes).expect("the built entry decodes");
        (u64::from(u32::from_le_bytes(bytes[40..44].try_into().unwrap())), bytes.len() as u64)
    }

    #[test]
    fn the_bound_is_the_size_the_encoder_writes() {
        let mut t = local_fast();
        t.limits.max_ops_per_txn = 37;
        let largest = largest_entry(&t);
        assert_eq!(largest.table.as_deref(), Some("kv"), "one 2048-byte cell outweighs ten of 100");
        let table = t.tables.iter().find(|x| x.name == "kv").unwrap();
        let entry = build(&t, table, 37);
        assert_eq!(entry.shape(), largest.shape);
        let (body, total) = encoded(&entry);
        assert_eq!(body + SLOT_BYTES, largest.shape.bytes());
        assert_eq!(total, largest.shape.slots() * SLOT_BYTES);
        assert_eq!(largest.op_bytes, 34 + 8 + 24 + 2048);
    }

    /// Every shipped topology's limits fit its rings (and so does the embedded default).
    #[test]
    fn the_shipped_configs_fit_their_rings() {
        let mut files: Vec<_> = ["configs", "deploy"]
            .iter()
            .flat_map(|d| std::fs::read_dir(repo_file(d)).expect("the directory exists"))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        let mut checked = 0;
        for path in files {
            let Ok(t) = Topology::load(&path) else { continue }; // not a topology (lab-links.yaml)
            let largest = largest_entry(&t);
            let fits = check_limits_fit_ring(&t);
            assert!(fits.is_ok(), "{}: {}", path.display(), fits.unwrap_err());
            assert!(largest.shape.bytes() <= entry_capacity(&Layout::from_config(&t.memstore)));
            checked += 1;
        }
        assert!(checked >= 7, "the configs were found: {checked}");
    }

    /// Over the ring, the error gives both sizes and the largest operation count that fits,
    /// and that count does fit.
    #[test]
    fn limits_over_the_ring_are_refused_naming_what_to_lower() {
        let mut t = local_fast();
        t.limits.max_ops_per_txn = 4096;
        let err = check_limits_fit_ring(&t).expect_err("4096 writes of 2048-byte cells pass 4 MiB");
        let Error::LimitsExceedRing { entry_bytes, ring_bytes, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*ring_bytes, MAX_ENTRY_SLOTS * SLOT_BYTES, "an 8 MiB ring: the format's cap");
        assert_eq!(*entry_bytes, largest_entry(&t).shape.bytes());
        let text = err.to_string();
        for part in [entry_bytes.to_string(), ring_bytes.to_string(), "table `kv`".into()] {
            assert!(text.contains(&part), "{part} in {text}");
        }
        let fits: u64 = text
            .split("lower limits.max_ops_per_txn to ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("names the count to lower to: {text}"));
        t.limits.max_ops_per_txn = fits;
        assert!(check_limits_fit_ring(&t).is_ok(), "{fits} operations fit");
        t.limits.max_ops_per_txn = fits + 1;
        assert!(check_limits_fit_ring(&t).is_err(), "{} do not", fits + 1);

        // A ring smaller than the format's cap is named as the cap.
        t.memstore.ring_bytes = 1 << 20;
        let text = check_limits_fit_ring(&t).unwrap_err().to_string();
        assert!(text.contains("memstore.ring") && text.contains(&((1u64 << 20) - 64).to_string()), "{text}");
        // A record larger than the ring: no operation count helps.
        t.memstore.ring_bytes = 2048;
        t.limits.max_ops_per_txn = 1;
        let text = check_limits_fit_ring(&t).unwrap_err().to_string();
        assert!(text.contains("not even one operation"), "{text}");
    }

    proptest! {
        /// For any table shape and operation count, the bound is exactly what the encoder
        /// writes for the entry it describes.
        #[test]
        fn the_bound_matches_the_encoder(
            widths in proptest::collection::vec(1u32..300, 1..12),
            ops in 1u64..40,
        ) {
            let mut t = local_fast();
            t.limits.max_ops_per_txn = ops;
            let cells = widths
                .iter()
                .enumerate()
                .map(|(i, &bytes)| CellSchema { name: format!("c{i}"), bytes })
                .collect();
            let wide = TableSchema {
                id: TableId(99),
                name: "wide".into(),
                cells,
                locking: Locking::Record,
                partitioning: Partitioning::Modulo,
                ordered: false,
            };
            t.tables = vec![wide.clone()];
            let largest = largest_entry(&t);
            let entry = build(&t, &wide, ops);
            prop_assert_eq!(entry.shape(), largest.shape);
            let (body, total) = encoded(&entry);
            prop_assert_eq!(body + SLOT_BYTES, largest.shape.bytes());
            prop_assert_eq!(total, largest.shape.slots() * SLOT_BYTES);
        }
    }
}
