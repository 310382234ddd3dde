//! Versioned reads without locks: the read phase of an optimistic transaction (docs/design.md,
//! "Optimistic transactions: versioned reads and CHECK").
//!
//! A key's cell is read the way a snapshot copy reads a record ([`crate::read_snapshot`]):
//! one doorbell batch READs every record image, a second re-READs each record's lock word and
//! update counters after it. Values are written only under the exclusive bits of the cell's
//! lock group (phase 2, replay and catch-ups alike), and every write bumps the group's update
//! counter before the bits are released. So an image whose cell's group was not held
//! exclusively, and whose group is still not held exclusively with the same update counter
//! when re-READ, holds the cell's last committed value and version, and no torn value. Shared
//! (read) locks do not make a cell busy, nor do other groups' locks: readers write nothing.
//! A cell that fails that test is [`CellRead::Busy`]: the caller retries, reads another
//! replica or gives up.

use crate::dc::DcHandle;
use crate::error::Result;
use crate::lock;
use crate::record::{lock_word, COUNTERS, LOCK_WORD};
use crate::verbs::DoorbellBatch;
use redt_proto::{NodeId, TableId};

/// Bytes re-READ after an image: the lock word and the 16 group update counters.
const RECHECK_BYTES: usize = (COUNTERS - LOCK_WORD) as usize + 32;

/// What a versioned read found of one key's cell on one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellRead {
    /// The key has no record on the replica (version 0).
    Missing,
    /// The cell's group was held exclusively, or changed between the image and the re-READ
    /// (a write landed, or the record was retired or reused for another key): read again.
    Busy,
    /// A committed image of the cell.
    Found {
        /// The cell's raw version word ([`crate::CellVersion`]: update counter << 48 |
        /// 48-bit commit timestamp); 0 for a cell never written.
        version: u64,
        /// The cell's value as stored: the cell's width, zero-padded.
        value: Vec<u8>,
    },
}

/// Reads cell 0 (the cell of key/value operations) of every key of `keys` (of `table`) on
/// `node`'s replica without taking a lock: one doorbell batch of index lookups, one of record
/// images, one of re-READs of their headers (see the module docs). One answer per key, in
/// order.
///
/// # Errors
/// [`crate::Error::UnknownTable`] for a table not in the schema; index and verbs errors.
pub fn read_versions(dc: &DcHandle, node: NodeId, table: TableId, keys: &[u64]) -> Result<Vec<CellRead>> {
    let rl = dc.catalog.layout(table)?;
    let cell = 0;
    let verbs = dc.verbs.as_ref();
    let lookups: Vec<(TableId, u64)> = keys.iter().map(|&k| (table, k)).collect();
    let found = dc.index.lookup_many(verbs, node, &lookups)?;
    let mut images = DoorbellBatch::new();
    let mut rechecks = DoorbellBatch::new();
    let reads: Vec<Option<(usize, usize)>> = found
        .iter()
        .map(|at| at.map(|at| (images.read(at, rl.record_bytes as usize), rechecks.read(lock_word(at), RECHECK_BYTES))))
        .collect();
    if reads.iter().any(Option::is_some) {
        // Two posts: every header re-READ starts after every image READ completed.
        verbs.post_batch(node, &mut images)?;
        verbs.post_batch(node, &mut rechecks)?;
    }
    let group = rl.cell_group[cell] as usize;
    let exclusive = lock::exclusive_bits(1 << group);
    Ok(keys
        .iter()
        .zip(reads)
        .map(|(&key, r)| {
            let Some((image, recheck)) = r else { return CellRead::Missing };
            let (image, recheck) = (images.read_result(image), rechecks.read_result(recheck));
            let Some(view) = rl.decode(image).filter(|v| v.key == key) else { return CellRead::Busy };
            let lock_now = u64::from_le_bytes(recheck[..8].try_into().expect("8 bytes"));
            let at = (COUNTERS - LOCK_WORD) as usize + 2 * group;
            let counter_now = u16::from_le_bytes([recheck[at], recheck[at + 1]]);
            let retired = view.lock == crate::free_list::RETIRED || lock_now == crate::free_list::RETIRED;
            if retired
                || view.lock & exclusive != 0
                || lock_now & exclusive != 0
                || counter_now != view.group_counter(group)
            {
                return CellRead::Busy;
            }
            CellRead::Found { version: view.version(cell).0, value: view.value(cell).to_vec() }
        })
        .collect())
}
