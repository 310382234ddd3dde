//! The secondary-replica side of the replicated baselines (2PC-Paxos, EP-Paxos):
//! a primary's redo, accepted into a secondary's ring without locks, then settled by the
//! decision and applied by the secondary's replay task under the Thomas write rule.
//!
//! This is the Paxos *accept* of a stable leader (ballot 0): the secondary stores the redo
//! entry `Logged` (so replay will not apply it yet), answers, and later marks it
//! `Committed` with the commit timestamp or `Aborted`. Commits may reach a secondary in
//! any order; replay compares each cell's version with the entry's `cts`, so an older
//! commit arriving late never overwrites a newer value (RedT §4.2 "Asynchronous redo log
//! replay").

use crate::dc::DcHandle;
use crate::error::{Error, Result};
use crate::executor::{cells_of, push_counter_increments, Decision, EntryRef, Executor};
use crate::record::{encode_cell, CellVersion};
use crate::ring::{self, Change, EntryStatus, LockIntent, RedoEntry, VoteWord};
use crate::verbs::DoorbellBatch;
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, TableId, TxnId};
use std::collections::BTreeMap;

/// One new cell value of a replicated redo entry, located by key (the secondary finds the
/// record in its own index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaChange {
    /// Table.
    pub table: TableId,
    /// Key.
    pub key: u64,
    /// Cell index.
    pub cell: u16,
    /// New value (at most the cell's width).
    pub value: Vec<u8>,
    /// The cell's version before this write at the sender's replica (a [`crate::CellVersion`]
    /// word; 0: unknown). Replay writes `seen.next(cts)` where it is known, so every replica
    /// ends with the same version and stays comparable in votes; with 0 it uses the
    /// receiver's own current version.
    pub seen: u64,
}

/// A record a replica entry names: `(table, key, offset)`.
type NamedRecord = (TableId, u64, Offset);

/// Who a replicated redo entry belongs to (recorded in the entry, as for executed ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaOrigin {
    /// The transaction.
    pub txn: TxnId,
    /// Topology epoch.
    pub epoch: Epoch,
    /// Coordinator node.
    pub coordinator: NodeId,
    /// Participant DCs.
    pub participants: Vec<DcId>,
}

impl Executor {
    /// The cells `changes` write, as a mask per distinct record in key order, after checking
    /// each change against its table (cell in range, value no longer than the cell).
    fn cells_by_record(&self, txn: TxnId, changes: &[ReplicaChange]) -> Result<BTreeMap<(TableId, u64), u64>> {
        let invalid = |why: String| Error::InvalidSubTxn { txn, why };
        let mut records: BTreeMap<(TableId, u64), u64> = BTreeMap::new();
        for c in changes {
            let rl = self.dc().catalog.layout(c.table)?;
            let cell = c.cell as usize;
            if cell >= rl.cells() {
                return Err(invalid(format!("cell {} beyond the {} cells of table {}", c.cell, rl.cells(), c.table)));
            }
            if c.value.len() > rl.cell_bytes[cell] as usize {
                return Err(invalid(format!("{}-byte value for a {}-byte cell", c.value.len(), rl.cell_bytes[cell])));
            }
            *records.entry((c.table, c.key)).or_default() |= 1 << cell;
        }
        Ok(records)
    }

    /// Creates the record `(table, key)` on `node` that a replicated change names but the node
    /// lacks, as an upsert would; one created meanwhile by someone else is found instead.
    fn create_record(&self, node: NodeId, table: TableId, key: u64) -> Result<Offset> {
        create_record(self.dc(), node, table, key)
    }

    /// The record of `(table, key)` on `node` for an entry that names it without locking it,
    /// pinned so that it is never retired (`retire.rs`): `found` (the offset a lookup gave),
    /// or a record created now; one retired meanwhile is settled and the key looked up again.
    fn pinned_record(&self, node: NodeId, table: TableId, key: u64, mut found: Option<Offset>) -> Result<Offset> {
        let dc = self.dc();
        // A settle frees the record or puts it back: the second attempt succeeds unless the
        // key is retired again meanwhile, and an index entry naming a record that holds
        // another key (a damaged MemStore) must not loop for ever.
        for _ in 0..PIN_ATTEMPTS {
            let at = match found {
                Some(o) => o,
                None => self.create_record(node, table, key)?,
            };
            if dc.pin_record(node, table, key, at)? {
                return Ok(at);
            }
            // Retired: settled now (freed, or put back if this pin came first), so the next
            // lookup finds the key missing or the record live again.
            dc.help_retirement(node, table, key, at)?;
            found = dc.index.lookup(dc.verbs.as_ref(), node, table, key)?;
        }
        Err(Error::NotFound { node, table, key })
    }

    /// Accepts `changes` of `origin.txn` into `node`'s ring as one `Logged` redo entry with
    /// no locks (creating records the changes name but the node lacks, as an upsert would).
    /// Returns the entry, or `None` when `changes` is empty.
    ///
    /// # Errors
    /// [`Error::InvalidSubTxn`] for an unknown table, a cell beyond the table's or an
    /// oversized value; [`Error::RingFull`] when replay does not free space in time; verbs,
    /// heap and index errors.
    pub fn accept_replica(
        &mut self,
        node: NodeId,
        origin: &ReplicaOrigin,
        changes: &[ReplicaChange],
    ) -> Result<Option<EntryRef>> {
        if changes.is_empty() {
            return Ok(None);
        }
        for _ in 0..PIN_ATTEMPTS {
            let (entry, records) = self.append_replica(node, origin, changes)?;
            // A retirer of deleted records READs the ring after it marks a record retired
            // (`deleted.rs`): either it saw this entry, or this READ sees its mark, and the
            // entry, which names a record that may be freed, is aborted and written again.
            if self.still_pinned(node, &records)? {
                return Ok(Some(entry));
            }
            let dc = self.dc().clone();
            let mut batch = DoorbellBatch::new();
            ring::push_set_status(&mut batch, &dc.layout, entry.index, EntryStatus::Aborted, Cts(0));
            dc.verbs.post_batch(node, &mut batch)?;
        }
        match changes.first() {
            Some(c) => Err(Error::NotFound { node, table: c.table, key: c.key }),
            None => Ok(None),
        }
    }

    /// Whether every record of `records` (`(table, key, offset)` on `node`) still holds its
    /// key and is not retired.
    fn still_pinned(&self, node: NodeId, records: &[NamedRecord]) -> Result<bool> {
        let dc = self.dc();
        let mut header = [0u8; crate::record::HEADER_BYTES as usize];
        for &(table, key, at) in records {
            dc.verbs.read(node, at, &mut header)?;
            let word = |i: usize| u64::from_le_bytes(header[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            if word(0) != key || word(1) as u16 != table.0 || word(2) == crate::free_list::RETIRED {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One attempt of [`Executor::accept_replica`]: the entry written, and the records it
    /// names as `(table, key, offset)`.
    fn append_replica(
        &mut self,
        node: NodeId,
        origin: &ReplicaOrigin,
        changes: &[ReplicaChange],
    ) -> Result<(EntryRef, Vec<NamedRecord>)> {
        // Distinct records, in key order, with their offsets on `node`.
        let records = self.cells_by_record(origin.txn, changes)?;
        let seen: BTreeMap<(TableId, u64, u16), u64> =
            changes.iter().map(|c| ((c.table, c.key, c.cell), c.seen)).collect();
        let keys: Vec<(TableId, u64)> = records.keys().copied().collect();
        let dc = self.dc().clone();
        let found = dc.index.lookup_many(dc.verbs.as_ref(), node, &keys)?;
        let mut offsets = BTreeMap::new();
        for (&(table, key), off) in keys.iter().zip(found) {
            offsets.insert((table, key), self.pinned_record(node, table, key, off)?);
        }
        // Before replay applies the entry.
        ensure_indexed(&dc, node, changes, offsets.iter().map(|(&(t, k), &o)| (t, k, o)))?;
        let locks = records
            .iter()
            .map(|(&(table, key), &cells)| LockIntent {
                record: offsets[&(table, key)],
                table,
                key,
                lock_bits: 0,
                cells,
                versions: cells_of(cells).map(|c| seen.get(&(table, key, c as u16)).copied().unwrap_or(0)).collect(),
            })
            .collect();
        let changes = changes
            .iter()
            .map(|c| {
                let width = dc.catalog.layout(c.table).map(|rl| rl.cell_bytes[c.cell as usize]).unwrap_or(0);
                let mut value = c.value.clone();
                value.resize(width as usize, 0);
                Change { record: offsets[&(c.table, c.key)], table: c.table, key: c.key, cell: c.cell, value }
            })
            .collect();
        let entry = RedoEntry {
            txn: origin.txn,
            status: EntryStatus::Logged,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: origin.epoch,
            coordinator: origin.coordinator,
            // A replica entry is not a phase-1 vote: no start, no partitions (recovery
            // passes over it).
            start: Cts(0),
            participants: origin.participants.clone(),
            partitions: Vec::new(),
            locks,
            changes,
        };
        ring::check_encodable(&entry)?;
        let slots = ring::encoded_slots(&entry);
        let index = self.reserve_slots(node, slots)?;
        let mut batch = DoorbellBatch::new();
        ring::push_write(&mut batch, &dc.layout, index, &ring::encode_padded(&entry, index, slots));
        dc.verbs.post_batch(node, &mut batch)?;
        let named = offsets.iter().map(|(&(t, k), &o)| (t, k, o)).collect();
        Ok((EntryRef { node, index, slots }, named))
    }

    /// Applies the decided `changes` of a catch-up committed at `cts` straight to `node`'s
    /// records, without a ring entry: the fallback of a catch-up whose replica's ring is full
    /// (docs/design.md §2, "a catch-up outlives its source": a source's ring holds its entry until
    /// the catch-up lands, so a catch-up that waited for ring space could wait on a ring held
    /// by the same kind of debt, the other way round). As replay does: per record, the
    /// exclusive bits of the groups written by one masked compare-and-swap on its lock word,
    /// then each cell older than the new version written at the sender's `seen` version
    /// advanced to `cts` (the cell's own where unknown: [`crate::ThomasRule`]), the update
    /// counters bumped,
    /// the bits released. Returns false, having changed nothing, when a group is held (a
    /// transaction is using the record: retry later).
    ///
    /// # Errors
    /// As [`Executor::accept_replica`], less [`Error::RingFull`].
    pub fn apply_replica_now(&mut self, node: NodeId, txn: TxnId, changes: &[ReplicaChange], cts: Cts) -> Result<bool> {
        self.apply_replica_cells(node, txn, changes, cts, false)
    }

    /// [`Executor::apply_replica_now`] that also writes over cells whose version carries `cts`
    /// itself: for a catch-up reaching a replica whose DC was behind but whose own stale redo
    /// of the same transaction was applied anyway (docs/design.md §2; the Thomas write rule keeps
    /// the first of two writes at one timestamp, and the stale one came first). Only the
    /// transaction committed at `cts` wrote a cell at `cts` (a later writer of the cell reads
    /// its version and commits above it), so nothing else is overwritten.
    ///
    /// # Errors
    /// As [`Executor::apply_replica_now`].
    pub fn apply_replica_over_own(
        &mut self,
        node: NodeId,
        txn: TxnId,
        changes: &[ReplicaChange],
        cts: Cts,
    ) -> Result<bool> {
        self.apply_replica_cells(node, txn, changes, cts, true)
    }

    fn apply_replica_cells(
        &mut self,
        node: NodeId,
        txn: TxnId,
        changes: &[ReplicaChange],
        cts: Cts,
        over_same_cts: bool,
    ) -> Result<bool> {
        let dc = self.dc().clone();
        let records = self.cells_by_record(txn, changes)?;
        // Lock every record first (nothing written unless all are free).
        let mut held: Vec<(TableId, u64, Offset, crate::lock::LockCas)> = Vec::new();
        let release = |held: &[(TableId, u64, Offset, crate::lock::LockCas)]| -> Result<()> {
            let mut batch = DoorbellBatch::new();
            for (_, _, record, cas) in held {
                batch.fetch_and_add(crate::record::lock_word(*record), crate::lock::release_operand(cas.added));
            }
            if !held.is_empty() {
                dc.verbs.post_batch(node, &mut batch)?;
            }
            Ok(())
        };
        for (&(table, key), &cells) in &records {
            let rl = dc.catalog.layout(table)?;
            let found = match dc.index.lookup(dc.verbs.as_ref(), node, table, key)? {
                Some(o) => Ok(o),
                None => self.create_record(node, table, key),
            };
            let record = match found {
                Ok(o) => o,
                Err(e) => {
                    release(&held)?;
                    return Err(e);
                }
            };
            let groups = cells_of(cells).fold(0u16, |g, c| g | 1 << rl.cell_group[c]);
            let cas = crate::lock::plan(0, groups, 0).expect("a zero guess never conflicts");
            let old = dc.verbs.masked_compare_and_swap(
                node,
                crate::record::lock_word(record),
                cas.compare,
                cas.mask,
                cas.swap,
                cas.mask,
            )?;
            if crate::lock::outcome(&cas, old) != crate::lock::LockOutcome::Acquired {
                release(&held)?;
                if old == crate::free_list::RETIRED {
                    // Retired and still indexed: settled now, the next attempt creates anew.
                    dc.help_retirement(node, table, key, record)?;
                }
                return Ok(false);
            }
            held.push((table, key, record, cas));
        }
        // While the records are held.
        if let Err(e) = ensure_indexed(&dc, node, changes, held.iter().map(|&(t, k, o, _)| (t, k, o))) {
            release(&held)?;
            return Err(e);
        }
        let mut batch = DoorbellBatch::new();
        for &(table, key, record, _) in &held {
            let rl = dc.catalog.layout(table)?;
            let mut image = vec![0u8; rl.record_bytes as usize];
            dc.verbs.read(node, record, &mut image)?;
            if rl.decode(&image).is_none_or(|v| v.key != key) {
                // Retired and reused for another key since the lookup (`retire.rs`).
                release(&held)?;
                return Ok(false);
            }
            // Older than a delete of the key this node freed since (`deleted.rs`): superseded.
            let superseded = cts <= crate::record::floor_of(&image);
            self.superseded += u64::from(superseded);
            let mut written = 0u16;
            for c in changes.iter().filter(|c| !superseded && c.table == table && c.key == key) {
                let cell = c.cell as usize;
                let at = rl.cell_offsets[cell] as usize;
                let cur = image.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0);
                let cur = CellVersion(cur);
                let seen = (c.seen != 0).then_some(CellVersion(c.seen));
                let version = if over_same_cts && cts == cur.cts() {
                    seen.unwrap_or(cur).next(cts)
                } else {
                    match self.thomas_rule.write(cur, cts, seen) {
                        Some(v) => v,
                        None => continue, // Thomas write rule: a newer write already landed.
                    }
                };
                let img = encode_cell(version, &c.value, rl.cell_bytes[cell]);
                batch.write(Offset(record.0 + rl.cell_offsets[cell]), img);
                written |= 1 << rl.cell_group[cell];
            }
            push_counter_increments(&mut batch, record, written);
        }
        for (_, _, record, cas) in &held {
            batch.fetch_and_add(crate::record::lock_word(*record), crate::lock::release_operand(cas.added));
        }
        dc.verbs.post_batch(node, &mut batch)?;
        Ok(true)
    }

    /// Settles accepted replica entries: `Committed` with the commit timestamp (the replay
    /// task applies them under the Thomas write rule) or `Aborted`. An entry already settled
    /// is left alone.
    ///
    /// # Errors
    /// Verbs failures; [`Error::TornEntry`] if an entry does not decode;
    /// [`Error::InvalidSubTxn`] if an entry belongs to another transaction.
    pub fn settle_replica(&mut self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        let dc = self.dc().clone();
        for e in entries {
            let entry = ring::read_entry_sized(dc.verbs.as_ref(), e.node, &dc.layout, e.index, e.slots)?;
            if entry.txn != txn {
                return Err(Error::InvalidSubTxn {
                    txn,
                    why: format!("ring entry {} on {} belongs to {}", e.index, e.node, entry.txn),
                });
            }
            if entry.status != EntryStatus::Logged {
                continue;
            }
            let (status, cts) = match decision {
                Decision::Commit(cts) => (EntryStatus::Committed, cts),
                Decision::Abort => (EntryStatus::Aborted, Cts(0)),
            };
            let mut batch = DoorbellBatch::new();
            ring::push_set_status(&mut batch, &dc.layout, e.index, status, cts);
            dc.verbs.post_batch(e.node, &mut batch)?;
        }
        Ok(())
    }

    /// Reads back the redo entries `entries` of `txn` (a primary reads its own to replicate
    /// them).
    ///
    /// # Errors
    /// Verbs failures; [`Error::TornEntry`] if an entry does not decode;
    /// [`Error::InvalidSubTxn`] if an entry belongs to another transaction (its slots were
    /// reused).
    pub fn read_entries(&self, txn: TxnId, entries: &[EntryRef]) -> Result<Vec<RedoEntry>> {
        let dc = self.dc();
        entries
            .iter()
            .map(|e| {
                let entry = ring::read_entry_sized(dc.verbs.as_ref(), e.node, &dc.layout, e.index, e.slots)?;
                if entry.txn != txn {
                    return Err(Error::InvalidSubTxn {
                        txn,
                        why: format!("ring entry {} on {} belongs to {}", e.index, e.node, entry.txn),
                    });
                }
                Ok(entry)
            })
            .collect()
    }
}

/// Puts back into its ordered index the key of each record `(table, key, offset)` on `node`
/// that `changes` write a row into, in case a delete took it out (`ordered.rs`, "Deletes");
/// nothing for tables without an ordered index.
fn ensure_indexed(
    dc: &DcHandle,
    node: NodeId,
    changes: &[ReplicaChange],
    records: impl Iterator<Item = (TableId, u64, Offset)>,
) -> Result<()> {
    for (table, key, record) in records {
        if changes.iter().any(|c| c.table == table && c.key == key && c.value.iter().any(|&b| b != 0)) {
            dc.ordered.ensure(dc.verbs.as_ref(), node, table, key, record)?;
        }
    }
    Ok(())
}

/// Attempts [`Executor::pinned_record`] makes before it reports the record not found.
const PIN_ATTEMPTS: u32 = 16;

/// Creates the record `(table, key)` on `node` (every cell zero at version 0), as an upsert
/// would; one created meanwhile by someone else is found instead.
pub(crate) fn create_record(dc: &DcHandle, node: NodeId, table: TableId, key: u64) -> Result<Offset> {
    match dc.insert_record(node, table, key, &[]) {
        Err(Error::DuplicateKey { .. }) => {
            dc.index.lookup(dc.verbs.as_ref(), node, table, key)?.ok_or(Error::NotFound { node, table, key })
        }
        other => other,
    }
}
