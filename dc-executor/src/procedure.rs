//! Deterministic stored procedures: what a sub-transaction runs (RedT §3; docs/design.md §1).
//!
//! A procedure declares its accesses up front (its *plan*: table, key, cells read, cells
//! written), then computes its writes from the values it read. The executor of each DC
//! runs it on that DC's replicas; a procedure must derive the writes of an item only from
//! items of the same partition and from its parameters, so every DC computes the same
//! writes for the items it holds.

use crate::ordered::Partitioner;
use redt_proto::TableId;
use std::fmt;

/// A read of every key of one table in `from..=to`, at most `limit` rows, in one partition.
/// The access named by `access` routes the piece: its table, a key of the
/// partition ([`Partitioner::anchor_key`]), the cells each row reads (`read`), no writes,
/// `upsert` set. A range over several partitions is one piece (and one access) per partition;
/// the executor of each DC reads the piece of each partition it holds from that partition's
/// B+-tree, locks every row and the gap past the last (next-key locking, `ordered.rs`), and
/// votes one item per row ([`crate::ItemVote::row`]), so the coordinator compares the
/// replicas' rows as it compares point reads. A row is a key whose record holds a cell that
/// is not all zero bytes: a key a point read would read as missing (never written, or
/// deleted) is no row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeRead {
    /// Index of the routing access in [`Procedure::accesses`].
    pub access: usize,
    /// First key, inclusive.
    pub from: u64,
    /// Last key, inclusive.
    pub to: u64,
    /// Most rows read in this partition, at most [`crate::MAX_RANGE_ROWS`]; keys of the tree
    /// without a row are locked but not counted (`executor.rs`, "Range reads").
    pub limit: u32,
}

/// One row a range read returned: its key and the value of every cell of its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeRow {
    /// The key.
    pub key: u64,
    /// The value of every cell.
    pub cells: Vec<Vec<u8>>,
}

/// One planned access to a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// Table of the record.
    pub table: TableId,
    /// Record key.
    pub key: u64,
    /// Cells read (bit i = cell i); they are share-locked until the decision.
    pub read: u64,
    /// Cells written; they are locked exclusively.
    pub write: u64,
    /// A missing record reads as a fresh one (every cell zero, version 0) instead of aborting
    /// the sub-transaction: it is created if the access writes it, and only its absence is
    /// locked if the access only reads it (reads never create records; `executor.rs`).
    pub upsert: bool,
}

/// A CHECK of an optimistic transaction's read (docs/design.md, "Optimistic transactions:
/// versioned reads and CHECK"): cell `cell` of access `access` must still be at `version`.
/// The access share-locks the cell (at least; [`Access::read`] names it), and the executor
/// compares the version it reads under that lock in every local replica with `version`: a
/// replica where they differ, older or newer, votes abort ([`crate::AbortReason::StaleRead`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionCheck {
    /// Index of the access in [`Procedure::accesses`].
    pub access: usize,
    /// Cell index.
    pub cell: u16,
    /// The raw version word expected ([`crate::CellVersion`]: update counter << 48 | 48-bit
    /// commit timestamp); 0 expects a key with no record, or a cell never written.
    pub version: u64,
}

/// One cell write produced by a procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Index of the access in [`Procedure::accesses`].
    pub access: usize,
    /// Cell index.
    pub cell: u16,
    /// New value (at most the cell's size; shorter values are zero-padded).
    pub value: Vec<u8>,
}

/// A procedure's own decision to abort (e.g. TPC-C New-Order's invalid item), as opposed
/// to a lock conflict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAbort(pub String);

impl fmt::Display for UserAbort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The values a sub-transaction read: for each access held in this DC, the value of every
/// cell it reads or writes (the executor READs whole records).
pub struct ReadView<'a> {
    pub(crate) values: &'a [Option<Vec<Vec<u8>>>],
    rows: &'a [Vec<RangeRow>],
}

impl<'a> ReadView<'a> {
    /// Builds a view: `values[access]` is `None` for accesses not held in this DC, else the
    /// value of every cell of the record.
    pub fn new(values: &'a [Option<Vec<Vec<u8>>>]) -> Self {
        ReadView { values, rows: &[] }
    }

    /// A view with range reads: `rows[access]` holds the rows, in key order, of the range read
    /// that `access` routes (empty for other accesses).
    pub fn with_rows(values: &'a [Option<Vec<Vec<u8>>>], rows: &'a [Vec<RangeRow>]) -> Self {
        ReadView { values, rows }
    }

    /// The rows the range read routed by `access` returned (empty when it is not held here).
    pub fn rows(&self, access: usize) -> &'a [RangeRow] {
        self.rows.get(access).map_or(&[], Vec::as_slice)
    }

    /// Whether access `access` is held in this DC.
    pub fn is_local(&self, access: usize) -> bool {
        self.values.get(access).is_some_and(|v| v.is_some())
    }

    /// The value of `cell` of access `access`, if that access is held in this DC.
    pub fn cell(&self, access: usize, cell: usize) -> Option<&'a [u8]> {
        self.values.get(access)?.as_ref()?.get(cell).map(|v| v.as_slice())
    }
}

/// A deterministic stored procedure.
pub trait Procedure: Send + Sync + fmt::Debug {
    /// The plan: every record the procedure touches, in any DC.
    fn accesses(&self) -> &[Access];

    /// The range reads, each routed by one of [`Procedure::accesses`] (none by default).
    fn ranges(&self) -> &[RangeRead] {
        &[]
    }

    /// Whether the writes of `access` (an [`Access::upsert`] one) create its record where the
    /// key has none: true by default. A procedure answers false for an access that leaves a
    /// missing key missing whatever it writes — a delete, or a write of zero bytes — so that
    /// such an access creates nothing: on a missing key it locks the key's absence as a read
    /// does, and its writes, which must then be all zero bytes, change nothing
    /// (`executor.rs`, "Reads of keys that have no record").
    fn creates(&self, access: usize) -> bool {
        let _ = access;
        true
    }

    /// The versions the procedure expects cells it reads to be at ([`VersionCheck`]), checked
    /// by the executor under the read locks before the procedure runs: none by default.
    fn checks(&self) -> &[VersionCheck] {
        &[]
    }

    /// Computes the writes from the values read. Writes to accesses not local to the view
    /// are ignored by the executor; a write must target a cell declared in that access's
    /// `write` mask.
    ///
    /// # Errors
    /// [`UserAbort`] when the procedure's own logic aborts the transaction.
    fn run(&self, view: &ReadView<'_>) -> Result<Vec<Write>, UserAbort>;
}

/// One operation of [`KvProcedure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOp {
    /// Read cell 0 of `key`.
    Read(u64),
    /// Overwrite cell 0 of `key` with the bytes (zero bytes only: a [`KvOp::Delete`]).
    Write(u64, Vec<u8>),
    /// Add to cell 0 of `key`, read as a little-endian `i64` (bank transfers).
    Add(u64, i64),
    /// Append a `u64` to the list in cell 0 of `key` (the byte [`LIST_TAG`], a little-endian
    /// `u32` count, then little-endian `u64` items; Jepsen list-append). Appending to a cell
    /// that holds something else aborts.
    Append(u64, u64),
    /// Read cell 0 of every key in `from..=to` (the first two fields), at most `limit` rows
    /// (the third), in key order: one range read per partition the range touches. It reads
    /// the values before this transaction's own writes; what it observed is
    /// [`encode_scan`]'s encoding.
    Scan(u64, u64, u32),
    /// Delete `key`: clear cell 0 (write zero bytes). Cell 0 is the only cell key/value
    /// operations use, so the key then reads as missing, range reads skip it and its key
    /// leaves the table's ordered index once the commit is applied (`ordered.rs`,
    /// "Deletes"); a later write brings it back. Deleting a missing key changes nothing.
    Delete(u64),
    /// Check that cell 0 of `key` (the first field) is still at the version (the second, a raw
    /// [`crate::CellVersion`] word; 0 for a missing key or a cell never written): the
    /// validation of an optimistic transaction's versioned read ([`VersionCheck`]). A read
    /// access of the key for locks and conflicts (cell 0 share-locked until the decision);
    /// it observes nothing (the caller read the value already) and changes nothing, and a
    /// replica whose version differs votes abort.
    Check(u64, u64),
}

/// Encodes the rows a scan observed: a little-endian `u32` count, then per row its key
/// (`u64`), the length of its value (`u32`) and the value, all little-endian. Never empty.
pub fn encode_scan(rows: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + rows.iter().map(|r| 12 + r.1.len()).sum::<usize>());
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for (k, v) in rows {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Decodes [`encode_scan`]; `None` for bytes that are not such an encoding.
pub fn decode_scan(bytes: &[u8]) -> Option<Vec<(u64, Vec<u8>)>> {
    let (count, mut rest) = bytes.split_first_chunk::<4>()?;
    let count = u32::from_le_bytes(*count) as usize;
    let mut rows = Vec::with_capacity(count.min(bytes.len() / 12));
    for _ in 0..count {
        let (k, tail) = rest.split_first_chunk::<8>()?;
        let (len, tail) = tail.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return None;
        }
        rows.push((u64::from_le_bytes(*k), tail[..len].to_vec()));
        rest = &tail[len..];
    }
    rest.is_empty().then_some(rows)
}

/// The rows of a scan from the range reads of `accesses` in `view`: merged in key order,
/// within `from..=to`, cell 0 of each, the first `limit`.
fn scan_rows(view: &ReadView<'_>, accesses: &[usize], from: u64, to: u64, limit: u32) -> Vec<(u64, Vec<u8>)> {
    let mut rows: Vec<(u64, Vec<u8>)> = accesses
        .iter()
        .flat_map(|&a| view.rows(a))
        .filter(|r| (from..=to).contains(&r.key))
        .map(|r| (r.key, r.cells.first().cloned().unwrap_or_default()))
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.dedup_by_key(|r| r.0);
    rows.truncate(limit as usize);
    rows
}

/// The generic key/value procedure: reads, writes, adds and appends on cell 0 of records
/// of one table; a missing record reads as zero and is created by the first write (a read
/// alone creates nothing). Operations on one key apply in order.
#[derive(Clone, Debug)]
pub struct KvProcedure {
    ops: Vec<KvOp>,
    accesses: Vec<Access>,
    op_access: Vec<usize>,
    /// Per operation: the accesses routing a scan's range reads (empty for other operations).
    op_ranges: Vec<Vec<usize>>,
    ranges: Vec<RangeRead>,
    cell_bytes: u32,
    /// Per access: whether its operations, run on a missing key (cell 0 read as zero), leave
    /// a value that is not all zero bytes ([`Procedure::creates`]).
    creates: Vec<bool>,
    /// The versions its [`KvOp::Check`]s expect, in operation order.
    checks: Vec<VersionCheck>,
}

impl KvProcedure {
    /// Plans `ops` on `table`, whose cell 0 is `cell_bytes` long, with one partition (scans
    /// read one range; [`KvProcedure::partitioned`] plans them for a topology).
    pub fn new(table: TableId, cell_bytes: u32, ops: Vec<KvOp>) -> Self {
        Self::partitioned(table, cell_bytes, ops, &Partitioner::single())
    }

    /// Plans `ops` on `table`, whose cell 0 is `cell_bytes` long; a scan gets one range read
    /// per partition of `partitioner` its range touches.
    pub fn partitioned(table: TableId, cell_bytes: u32, ops: Vec<KvOp>, partitioner: &Partitioner) -> Self {
        let mut accesses: Vec<Access> = Vec::new();
        let mut ranges: Vec<RangeRead> = Vec::new();
        let mut op_access = Vec::with_capacity(ops.len());
        let mut op_ranges = Vec::with_capacity(ops.len());
        let mut checks = Vec::new();
        for op in &ops {
            let (key, writes) = match op {
                KvOp::Read(k) | KvOp::Check(k, _) => (*k, false),
                KvOp::Write(k, _) => (*k, true),
                KvOp::Add(k, _) | KvOp::Append(k, _) | KvOp::Delete(k) => (*k, true),
                KvOp::Scan(from, to, limit) => {
                    let mut routed = Vec::new();
                    for p in partitioner.partitions_for(table, *from, *to) {
                        let key = partitioner.anchor_key(table, p);
                        accesses.push(Access { table, key, read: 1, write: 0, upsert: true });
                        let access = accesses.len() - 1;
                        ranges.push(RangeRead { access, from: *from, to: *to, limit: *limit });
                        routed.push(access);
                    }
                    op_access.push(usize::MAX);
                    op_ranges.push(routed);
                    continue;
                }
            };
            op_ranges.push(Vec::new());
            let i = match (0..accesses.len()).find(|&i| accesses[i].key == key && !ranges.iter().any(|r| r.access == i))
            {
                Some(i) => i,
                None => {
                    accesses.push(Access { table, key, read: 0, write: 0, upsert: true });
                    accesses.len() - 1
                }
            };
            let a = &mut accesses[i];
            a.read |= 1;
            if writes {
                a.write |= 1;
            }
            if let KvOp::Check(_, version) = op {
                checks.push(VersionCheck { access: i, cell: 0, version: *version });
            }
            op_access.push(i);
        }
        let mut p =
            KvProcedure { ops, accesses, op_access, op_ranges, ranges, cell_bytes, creates: Vec::new(), checks };
        // Operations on one key depend only on that key's value, so running them all on
        // missing keys tells, per access, whether a missing key ends with a row.
        let missing: Vec<Option<Vec<Vec<u8>>>> = vec![Some(vec![Vec::new()]); p.accesses.len()];
        let sim = p.simulate(&ReadView::new(&missing));
        // Operations that would abort the procedure leave nothing to judge by: those create
        // as any write does.
        let errs = sim.error.is_some();
        p.creates = sim.values.iter().map(|v| errs || v.as_ref().is_some_and(|v| v.iter().any(|&b| b != 0))).collect();
        p
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[KvOp] {
        &self.ops
    }

    /// The value each operation observed, given the values read (cell 0 of each access):
    /// `Some(bytes)` for reads (after earlier operations of this transaction), `None`
    /// for writes. Used by clients to fill in read results.
    pub fn observed(&self, view: &ReadView<'_>) -> Vec<Option<Vec<u8>>> {
        self.simulate(view).observed
    }

    fn simulate(&self, view: &ReadView<'_>) -> Simulation {
        let mut cur: Vec<Option<Vec<u8>>> =
            (0..self.accesses.len()).map(|a| view.cell(a, 0).map(|v| v.to_vec())).collect();
        let mut observed = Vec::with_capacity(self.ops.len());
        let mut err = None;
        for ((op, &a), routed) in self.ops.iter().zip(&self.op_access).zip(&self.op_ranges) {
            if let KvOp::Scan(from, to, limit) = op {
                observed.push(Some(encode_scan(&scan_rows(view, routed, *from, *to, *limit))));
                continue;
            }
            let Some(v) = cur[a].as_mut() else {
                observed.push(None);
                continue;
            };
            match op {
                KvOp::Read(_) => {
                    observed.push(Some(v.clone()));
                    continue;
                }
                KvOp::Scan(..) | KvOp::Check(..) => {
                    observed.push(None);
                    continue;
                }
                KvOp::Delete(_) => v.clear(),
                KvOp::Write(_, bytes) => {
                    if bytes.len() > self.cell_bytes as usize {
                        err = Some(format!("value of {} bytes exceeds the {}-byte cell", bytes.len(), self.cell_bytes));
                    }
                    *v = bytes.clone();
                }
                KvOp::Add(_, d) => {
                    let mut b = [0u8; 8];
                    let n = v.len().min(8);
                    b[..n].copy_from_slice(&v[..n]);
                    let sum = i64::from_le_bytes(b).wrapping_add(*d);
                    *v = sum.to_le_bytes().to_vec();
                }
                KvOp::Append(_, item) => {
                    let is_list = v.first() == Some(&LIST_TAG);
                    let empty = v.iter().all(|&b| b == 0);
                    let count = list_len(v);
                    let cap = (self.cell_bytes as usize).saturating_sub(LIST_HEADER) / 8;
                    if !is_list && !empty {
                        err = Some("append to a value that is not a list".into());
                    } else if count >= cap {
                        err = Some(format!("list full ({cap} items)"));
                    } else {
                        let end = LIST_HEADER + 8 * (count + 1);
                        v.resize(end.max(v.len()), 0);
                        v[0] = LIST_TAG;
                        v[end - 8..end].copy_from_slice(&item.to_le_bytes());
                        v[1..LIST_HEADER].copy_from_slice(&((count + 1) as u32).to_le_bytes());
                    }
                }
            }
            observed.push(None);
        }
        Simulation { values: cur, observed, error: err }
    }
}

/// The outcome of running a [`KvProcedure`]'s operations on the values read.
struct Simulation {
    /// Final value of cell 0 of each access (`None` where not local).
    values: Vec<Option<Vec<u8>>>,
    /// What each operation observed (reads only).
    observed: Vec<Option<Vec<u8>>>,
    /// Why the procedure aborts, if it does.
    error: Option<String>,
}

/// First byte of a list-append cell value.
pub const LIST_TAG: u8 = 3;
/// Bytes before the first item of a list: the tag and a little-endian `u32` count.
pub const LIST_HEADER: usize = 5;

/// Number of items of a list-append cell value (0 if the value is not a list).
pub fn list_len(v: &[u8]) -> usize {
    if v.len() < LIST_HEADER || v[0] != LIST_TAG {
        return 0;
    }
    let n = u32::from_le_bytes([v[1], v[2], v[3], v[4]]) as usize;
    n.min((v.len() - LIST_HEADER) / 8)
}

/// The items of a list-append cell value.
pub fn list_items(v: &[u8]) -> Vec<u64> {
    (0..list_len(v))
        .map(|i| {
            let at = LIST_HEADER + 8 * i;
            u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"))
        })
        .collect()
}

impl Procedure for KvProcedure {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn creates(&self, access: usize) -> bool {
        self.creates.get(access).copied().unwrap_or(true)
    }

    fn checks(&self) -> &[VersionCheck] {
        &self.checks
    }

    fn run(&self, view: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let sim = self.simulate(view);
        if let Some(e) = sim.error {
            return Err(UserAbort(e));
        }
        Ok(sim
            .values
            .into_iter()
            .enumerate()
            .filter(|(a, v)| v.is_some() && self.accesses[*a].write != 0)
            .map(|(access, v)| Write { access, cell: 0, value: v.expect("filtered on is_some") })
            .collect())
    }
}

/// A YCSB transaction (Cooper et al., SoCC '10, as used by RedT §6): each operation reads
/// every cell of a record or updates one cell with a given value (YCSB's defaults
/// `readallfields=true`, `writeallfields=false`).
#[derive(Clone, Debug)]
pub struct YcsbProcedure {
    accesses: Vec<Access>,
    writes: Vec<Write>,
}

/// One YCSB operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum YcsbOp {
    /// Read every cell of the record.
    Read {
        /// Record key.
        key: u64,
    },
    /// Overwrite one cell.
    Update {
        /// Record key.
        key: u64,
        /// Cell index.
        cell: u16,
        /// New value.
        value: Vec<u8>,
    },
}

impl YcsbProcedure {
    /// Plans `ops` on `table`, whose records have `cells` cells. Operations on one key are
    /// merged into one access.
    pub fn new(table: TableId, cells: usize, ops: Vec<YcsbOp>) -> Self {
        let all = if cells >= 64 { u64::MAX } else { (1u64 << cells) - 1 };
        let mut accesses: Vec<Access> = Vec::new();
        let mut writes = Vec::new();
        for op in ops {
            let key = match &op {
                YcsbOp::Read { key } | YcsbOp::Update { key, .. } => *key,
            };
            let i = match accesses.iter().position(|a| a.key == key) {
                Some(i) => i,
                None => {
                    accesses.push(Access { table, key, read: 0, write: 0, upsert: false });
                    accesses.len() - 1
                }
            };
            match op {
                YcsbOp::Read { .. } => accesses[i].read |= all,
                YcsbOp::Update { cell, value, .. } => {
                    accesses[i].write |= 1 << cell;
                    writes.retain(|w: &Write| !(w.access == i && w.cell == cell));
                    writes.push(Write { access: i, cell, value });
                }
            }
        }
        YcsbProcedure { accesses, writes }
    }
}

impl Procedure for YcsbProcedure {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, _view: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        Ok(self.writes.clone())
    }
}

/// One operation of [`RecordsProcedure`]: a whole record of any table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordOp {
    /// Read every cell of the record. A missing record creates nothing: its absence is
    /// read-locked, and the vote says it is absent ([`crate::ItemVote::absent`]).
    Get {
        /// Table.
        table: TableId,
        /// Record key.
        key: u64,
    },
    /// Write every cell (one value per cell, in order, each at most the cell's width),
    /// creating the record if it is missing.
    Put {
        /// Table.
        table: TableId,
        /// Record key.
        key: u64,
        /// One value per cell.
        cells: Vec<Vec<u8>>,
    },
    /// Create the record (every cell zero) if it is missing; an existing record is locked
    /// and left as it is.
    Create {
        /// Table.
        table: TableId,
        /// Record key.
        key: u64,
    },
}

impl RecordOp {
    /// The table and key the operation names.
    pub fn target(&self) -> (TableId, u64) {
        match self {
            RecordOp::Get { table, key } | RecordOp::Put { table, key, .. } | RecordOp::Create { table, key } => {
                (*table, *key)
            }
        }
    }
}

/// Whole-record reads, writes and creations over any tables (`redt workload`: loading a
/// workload's data and reading it back through the cluster). Operations on one record are
/// merged into one access (its read and write masks joined); a put's values are written as
/// given whatever else the transaction does to the record.
#[derive(Clone, Debug)]
pub struct RecordsProcedure {
    accesses: Vec<Access>,
    writes: Vec<Write>,
}

impl RecordsProcedure {
    /// Plans `ops`; `cells_of(table)` is the number of cells of a table's records (the caller
    /// checked every table exists).
    pub fn new(ops: &[RecordOp], cells_of: impl Fn(TableId) -> usize) -> Self {
        let mut accesses: Vec<Access> = Vec::new();
        let mut writes: Vec<Write> = Vec::new();
        for op in ops {
            let (table, key) = op.target();
            let cells = cells_of(table);
            let all = if cells >= 64 { u64::MAX } else { (1u64 << cells) - 1 };
            let i = match accesses.iter().position(|a| a.table == table && a.key == key) {
                Some(i) => i,
                None => {
                    accesses.push(Access { table, key, read: 0, write: 0, upsert: true });
                    accesses.len() - 1
                }
            };
            match op {
                RecordOp::Get { .. } => accesses[i].read |= all,
                RecordOp::Create { .. } => accesses[i].write |= all,
                RecordOp::Put { cells: values, .. } => {
                    accesses[i].write |= all;
                    writes.retain(|w| w.access != i);
                    for (c, v) in values.iter().enumerate() {
                        writes.push(Write { access: i, cell: c as u16, value: v.clone() });
                    }
                }
            }
        }
        RecordsProcedure { accesses, writes }
    }
}

impl Procedure for RecordsProcedure {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, _view: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        Ok(self.writes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_ops_apply_in_order_per_key() {
        let p = KvProcedure::new(
            TableId(1),
            64,
            vec![KvOp::Add(1, 5), KvOp::Read(1), KvOp::Append(2, 9), KvOp::Append(2, 10), KvOp::Read(2)],
        );
        assert_eq!(p.accesses().len(), 2);
        let start = 10i64.to_le_bytes().to_vec();
        let values = vec![Some(vec![start]), Some(vec![vec![]])];
        let view = ReadView::new(&values);
        let obs = p.observed(&view);
        assert_eq!(obs[1].as_deref(), Some(&15i64.to_le_bytes()[..]));
        assert_eq!(list_items(obs[4].as_ref().unwrap()), vec![9, 10]);
        let w = p.run(&view).unwrap();
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn record_ops_merge_per_record_and_write_every_cell_of_a_put() {
        let ops = [
            RecordOp::Get { table: TableId(1), key: 7 },
            RecordOp::Put { table: TableId(2), key: 7, cells: vec![vec![1], vec![2, 2]] },
            RecordOp::Create { table: TableId(1), key: 7 },
            RecordOp::Put { table: TableId(2), key: 7, cells: vec![vec![3], vec![4]] },
        ];
        let p = RecordsProcedure::new(&ops, |t| if t == TableId(1) { 3 } else { 2 });
        assert_eq!(
            p.accesses(),
            &[
                Access { table: TableId(1), key: 7, read: 0b111, write: 0b111, upsert: true },
                Access { table: TableId(2), key: 7, read: 0, write: 0b11, upsert: true },
            ]
        );
        let w = p.run(&ReadView::new(&[])).unwrap();
        assert_eq!(
            w,
            vec![Write { access: 1, cell: 0, value: vec![3] }, Write { access: 1, cell: 1, value: vec![4] }],
            "the last put of a record wins; a create writes nothing"
        );
    }

    #[test]
    fn append_beyond_capacity_aborts() {
        let p = KvProcedure::new(TableId(1), 13, vec![KvOp::Append(1, 1), KvOp::Append(1, 2)]);
        let values = vec![Some(vec![vec![]])];
        assert!(p.run(&ReadView::new(&values)).is_err());
    }

    #[test]
    fn non_local_accesses_are_skipped() {
        let p = KvProcedure::new(TableId(1), 8, vec![KvOp::Add(1, 1), KvOp::Add(2, -1)]);
        let values = vec![Some(vec![0i64.to_le_bytes().to_vec()]), None];
        let w = p.run(&ReadView::new(&values)).unwrap();
        assert_eq!(w, vec![Write { access: 0, cell: 0, value: 1i64.to_le_bytes().to_vec() }]);
    }
}
