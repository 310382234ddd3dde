//! [`DcHandle`]: everything an executor or a loader of one DC needs to reach that DC's
//! MemStores — the verbs backend, the MemStore layout, the record layouts and the index.

use crate::error::{Error, Result};
use crate::index::Index;
use crate::lock;
use crate::memstore::Layout;
use crate::ordered::{OrderedIndex, Partitioner};
use crate::record::{lock_word, Catalog, CellVersion};
use crate::verbs::Verbs;
use redt_proto::{NodeId, Offset, TableId, Topology};
use redt_verbs::region::Region;
use std::sync::Arc;

/// Shared, immutable handle on one DC's data path.
pub struct DcHandle {
    /// The verbs backend reaching every node of the DC.
    pub verbs: Arc<dyn Verbs>,
    /// MemStore layout (the same on every node).
    pub layout: Layout,
    /// Record layouts by table.
    pub catalog: Catalog,
    /// The hash index (operated through `verbs`).
    pub index: Index,
    /// The ordered index: a B+-tree per (table, partition) on each node (`ordered.rs`).
    pub ordered: OrderedIndex,
    /// Whether the DC's MemStores have disk images to sync before a vote, a recorded
    /// decision or a promise is sent (`durability: disk`, `persist.rs`).
    pub durable: bool,
}

/// What [`DcHandle::create_record`] found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// The record (created now, or found already there).
    Record(Offset),
    /// A reader holds the key's absence: nothing was created.
    AbsenceLocked,
}

/// A record as read back by [`DcHandle::read_record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordImage {
    /// Record offset in its node's MemStore.
    pub offset: Offset,
    /// The lock word.
    pub lock: u64,
    /// Each cell's version.
    pub versions: Vec<CellVersion>,
    /// Each cell's value.
    pub values: Vec<Vec<u8>>,
    /// Each lock group's update counter.
    pub counters: Vec<u16>,
}

impl DcHandle {
    /// A handle over `verbs` for `topology`'s layout and tables.
    pub fn new(topology: &Topology, verbs: Arc<dyn Verbs>) -> Self {
        let layout = Layout::from_config(&topology.memstore);
        DcHandle {
            verbs,
            layout,
            catalog: Catalog::new(&topology.tables),
            index: Index::new(layout),
            ordered: OrderedIndex::new(
                layout,
                &topology.tables,
                Partitioner::new(&topology.tables, topology.partitions.len() as u32),
                crate::BTreeConfig::default().cache_nodes,
            ),
            durable: topology.durability == redt_proto::Durability::Disk,
        }
    }

    /// Makes every write to the MemStores of `nodes` made before the call durable, under
    /// `durability: disk` (one PERSIST per node, group-committed there); nothing otherwise.
    ///
    /// # Errors
    /// Verbs errors, [`crate::Error::Verbs`] naming a disk image that could not be synced.
    pub fn persist(&self, nodes: impl IntoIterator<Item = NodeId>) -> Result<()> {
        if self.durable {
            for node in nodes {
                self.verbs.persist(node)?;
            }
        }
        Ok(())
    }

    /// Inserts a new record of `table` under `key` on `node` with `values` (missing cells
    /// zero, every version 0, its floor the node's deletion horizon): allocate from the heap (FAA), WRITE the record, then publish
    /// it in the hash index and the ordered index (`ordered.rs`; no gap lock: loaders and
    /// replicas left behind create records as they write them, without locks).
    ///
    /// # Errors
    /// [`Error::DuplicateKey`], [`Error::HeapFull`], [`Error::IndexFull`], B+-tree errors,
    /// verbs errors.
    ///
    /// Creations of keys sharing an index home bucket are serialised by that bucket's
    /// insert-lock stripe (a compare-and-swap lease word in the superblock), so two
    /// executors creating the same key at once cannot both publish it: the second sees
    /// [`Error::DuplicateKey`]. A lease older than `INSERT_LEASE_MS` is taken over (its
    /// holder died mid-insert).
    pub fn insert_record(&self, node: NodeId, table: TableId, key: u64, values: &[&[u8]]) -> Result<Offset> {
        let rl = self.catalog.layout(table)?;
        let lock = self.layout.insert_lock(self.index.home_bucket(table, key));
        let verbs = self.verbs.as_ref();
        let held = self.take_insert_lease(node, lock)?;
        let result = (|| {
            if self.index.lookup(verbs, node, table, key)?.is_some() {
                return Err(Error::DuplicateKey { table, key });
            }
            let mut image = rl.encode_new(key, values);
            crate::record::set_floor(&mut image, self.deletion_horizon(node, table, key)?);
            let at = self.alloc_record(node, rl.record_bytes)?;
            verbs.write(node, at, &image)?;
            self.index.insert(verbs, node, table, key, at)?;
            self.ordered.insert(verbs, node, table, key, at)?;
            Ok(at)
        })();
        verbs.compare_and_swap(node, lock, held, 0)?;
        result
    }

    /// Creates the record of `table` under `key` on `node` for a sub-transaction that writes
    /// it (every cell zero, every version 0, its floor the node's deletion horizon), unless a reader holds the key's absence: under
    /// the insert-lock stripe of the key's home bucket (as [`DcHandle::insert_record`]), an
    /// existing record is returned as it is; otherwise the key's absent-key lock group
    /// ([`crate::Index::absent_lock`]) is taken exclusively by one masked compare-and-swap for
    /// as long as the record is allocated, written and published, and released after. A
    /// group held by a reader (a sub-transaction that read the key as absent and is not
    /// decided yet) refuses the creation at once (No-Wait) with [`Created::AbsenceLocked`]:
    /// the key must not appear before that reader's decision. Nothing is allocated then.
    /// For a table with an ordered index it also takes the gap lock of the key's successor
    /// exclusively for as long as it publishes ([`OrderedIndex::lock_gap`]), and refuses the
    /// same way while a range reader holds that gap (phantom protection, `ordered.rs`).
    ///
    /// # Errors
    /// [`Error::HeapFull`], [`Error::IndexFull`], verbs errors (the absent-key lock and the
    /// stripe are released first).
    pub fn create_record(&self, node: NodeId, table: TableId, key: u64) -> Result<Created> {
        let rl = self.catalog.layout(table)?;
        let verbs = self.verbs.as_ref();
        let stripe = self.layout.insert_lock(self.index.home_bucket(table, key));
        let held = self.take_insert_lease(node, stripe)?;
        let (word, group) = self.index.absent_lock(table, key);
        let cas = lock::plan(0, 1 << group, 0).expect("a zero guess never conflicts");
        let result = (|| {
            if let Some(at) = self.index.lookup(verbs, node, table, key)? {
                return Ok(Created::Record(at));
            }
            let old = verbs.masked_compare_and_swap(node, word, cas.compare, cas.mask, cas.swap, cas.mask)?;
            if lock::outcome(&cas, old) != lock::LockOutcome::Acquired {
                return Ok(Created::AbsenceLocked);
            }
            let gap = match self.ordered.lock_gap(verbs, node, table, key) {
                Ok(Some(gap)) => gap,
                Ok(None) => {
                    verbs.fetch_and_add(node, word, lock::release_operand(cas.added))?;
                    return Ok(Created::AbsenceLocked);
                }
                Err(e) => {
                    verbs.fetch_and_add(node, word, lock::release_operand(cas.added))?;
                    return Err(e);
                }
            };
            let published = (|| {
                let mut image = rl.encode_inserted(key);
                crate::record::set_floor(&mut image, self.deletion_horizon(node, table, key)?);
                let at = self.alloc_record(node, rl.record_bytes)?;
                verbs.write(node, at, &image)?;
                self.index.insert(verbs, node, table, key, at)?;
                self.ordered.insert(verbs, node, table, key, at)?;
                Ok(at)
            })();
            if let Some(gap) = gap {
                self.ordered.release_gap(verbs, node, gap)?;
            }
            verbs.fetch_and_add(node, word, lock::release_operand(cas.added))?;
            published.map(Created::Record)
        })();
        verbs.compare_and_swap(node, stripe, held, 0)?;
        result
    }

    /// Takes the insert-lock lease word at `stripe` on `node` (a compare-and-swap from 0 to the
    /// wall-clock time in ms), taking over a lease unchanged for `INSERT_LEASE_MS` (its
    /// holder died mid-insert). Returns the lease value to release it with.
    pub(crate) fn take_insert_lease(&self, node: NodeId, stripe: Offset) -> Result<u64> {
        let verbs = self.verbs.as_ref();
        let mut seen = 0u64;
        let mut seen_since = std::time::Instant::now();
        loop {
            let lease = now_ms().max(1);
            let old = verbs.compare_and_swap(node, stripe, 0, lease)?;
            if old == 0 {
                return Ok(lease);
            }
            if old != seen {
                (seen, seen_since) = (old, std::time::Instant::now());
            } else if seen_since.elapsed().as_millis() as u64 > INSERT_LEASE_MS
                && verbs.compare_and_swap(node, stripe, old, lease)? == old
            {
                return Ok(lease);
            }
            std::thread::yield_now();
        }
    }

    /// Reads a whole record (one index lookup, one READ) — for checks and tools, not the
    /// transaction path.
    ///
    /// # Errors
    /// Verbs errors; [`Error::NotFound`] if the index points at something else.
    pub fn read_record(&self, node: NodeId, table: TableId, key: u64) -> Result<Option<RecordImage>> {
        let rl = self.catalog.layout(table)?;
        let Some(at) = self.index.lookup(self.verbs.as_ref(), node, table, key)? else {
            return Ok(None);
        };
        let mut buf = vec![0u8; rl.record_bytes as usize];
        self.verbs.read(node, at, &mut buf)?;
        let v = rl.decode(&buf).filter(|v| v.key == key).ok_or(Error::NotFound { node, table, key })?;
        Ok(Some(RecordImage {
            offset: at,
            lock: v.lock,
            versions: (0..rl.cells()).map(|i| v.version(i)).collect(),
            values: (0..rl.cells()).map(|i| v.value(i).to_vec()).collect(),
            counters: (0..lock::GROUPS).map(|g| v.group_counter(g)).collect(),
        }))
    }
}

impl DcHandle {
    /// The records of `node` whose lock word is held now, as `(table, key, lock word)`: a
    /// full scan of its index ([`Index::entries`]) and one 8-byte READ per record — for
    /// status reports (`redt status --locks`) and checks, not the transaction path.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn locked_records(&self, node: NodeId) -> Result<Vec<(TableId, u64, u64)>> {
        let mut held = Vec::new();
        let mut word = [0u8; 8];
        for (table, key, at) in self.index.entries(self.verbs.as_ref(), node)? {
            self.verbs.read(node, lock_word(at), &mut word)?;
            let lock = u64::from_le_bytes(word);
            if lock != 0 {
                held.push((table, key, lock));
            }
        }
        Ok(held)
    }
}

/// How long an insert-lock lease may stay unchanged before a waiter takes it over, in ms.
pub const INSERT_LEASE_MS: u64 = 1_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(1)
}

/// Formats `region` as a MemStore of `layout` unless it already holds one of that layout
/// (a restarted node process keeps its data). Returns whether it formatted.
///
/// # Errors
/// [`Error::BadSuperblock`] if the region holds a MemStore of a different layout, or of
/// another format version (`SuperblockMismatch::Format`: a MemStore an older redt wrote is
/// refused, never formatted over).
pub fn format_if_new(layout: &Layout, node: NodeId, region: &Region) -> Result<bool> {
    if Layout::holds_any_format(region) {
        layout.check(node, region)?;
        Ok(false)
    } else {
        layout.format(region);
        Ok(true)
    }
}
