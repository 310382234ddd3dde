//! Procedure calls on the wire ↔ the stored procedures the executors run.

use crate::error::{Error, Result};
use redt_dc_executor::{
    BatchProcedure, KvOp, KvProcedure, Partitioner, Procedure, RecordOp, RecordsProcedure, YcsbOp, YcsbProcedure,
};
use redt_proto::wire::{
    BatchCall, KvCall, KvOpMsg, ProcedureCall, ProcedureKind, RecordOpMsg, RecordsCall, YcsbCall, YcsbOpMsg,
};
use redt_proto::{TableId, Topology};
use std::sync::Arc;

pub use crate::kv_op::{kv_kind, scan_of};

/// How `topology` maps keys to partitions (for scans).
pub fn partitioner(topology: &Topology) -> Partitioner {
    Partitioner::new(&topology.tables, topology.partitions.len() as u32)
}

/// Operation kinds of [`RecordOpMsg::kind`].
pub mod record_kind {
    /// Read every cell.
    pub const GET: u32 = 0;
    /// Write every cell (creating the record).
    pub const PUT: u32 = 1;
    /// Create the record if missing.
    pub const CREATE: u32 = 2;
}

/// Builds the procedure a call names, checked against `topology`: its limits first
/// ([`crate::limits::check_call`], before anything is built), then its contents, then the
/// number of records the built procedure touches ([`crate::limits::check_accesses`]).
///
/// # Errors
/// [`Error::OverLimit`] for a call over `topology.limits`; [`Error::BadCall`] for a missing
/// call, an unknown table, an unknown operation kind, an out-of-range cell or an oversized
/// value.
pub fn procedure(topology: &Topology, call: &ProcedureCall) -> Result<Arc<dyn Procedure>> {
    crate::limits::check_call(&topology.limits, call)?;
    let p = build(topology, call)?;
    crate::limits::check_accesses(&topology.limits, p.accesses().len())?;
    Ok(p)
}

/// The batch `call` names, its members built and checked as [`procedure`] checks a call.
///
/// # Errors
/// [`Error::BadCall`] for a member that is a batch or a records call, a member that does not
/// build, or members that cannot run as one batch ([`BatchProcedure::new`]).
pub fn batch(topology: &Topology, call: &BatchCall) -> Result<BatchProcedure> {
    let mut members = Vec::with_capacity(call.calls.len());
    for (j, c) in call.calls.iter().enumerate() {
        if !batchable(c) {
            return Err(Error::BadCall(format!("batch member {j} is not a key/value, YCSB or TPC-C call")));
        }
        members.push(build(topology, c)?);
    }
    BatchProcedure::new(members).map_err(Error::BadCall)
}

/// Whether `call` may be a member of a batch: a key/value call without scans (the reads a
/// batch answers are its point reads) or CHECKs (an optimistic transaction's versions are
/// those before any member ran: [`BatchProcedure::new`] refuses them too), a YCSB call or a
/// TPC-C call (whose range reads must still not follow a member that writes into them:
/// [`BatchProcedure::new`]).
pub fn batchable(call: &ProcedureCall) -> bool {
    match &call.kind {
        Some(ProcedureKind::Kv(kv)) => kv.ops.iter().all(|o| o.kind != kv_kind::SCAN && o.kind != kv_kind::CHECK),
        Some(ProcedureKind::Ycsb(_) | ProcedureKind::Tpcc(_)) => true,
        Some(ProcedureKind::Batch(_) | ProcedureKind::Records(_)) | None => false,
    }
}

/// `call` re-planned to run after `committed`, a conflicting call of the same coordinator that
/// committed while `call` was held behind it (decided-holder takeover, docs/design.md): the
/// keys `call` planned from a reconnaissance read its commit made stale are planned again
/// from what it wrote. `None` when nothing changes. Only TPC-C New-Order is re-planned
/// ([`redt_tpcc::procedures::rebase`]); the procedure checks its plan as before, so a wrong
/// one aborts, as a stale reconnaissance does.
pub fn rebase(call: &ProcedureCall, committed: &ProcedureCall) -> Option<ProcedureCall> {
    match (call.kind.as_ref()?, committed.kind.as_ref()?) {
        (ProcedureKind::Tpcc(t), ProcedureKind::Tpcc(prev)) => {
            let params = redt_tpcc::procedures::rebase(t.kind, &t.params, prev.kind, &prev.params)?;
            Some(redt_tpcc::procedures::call(t.kind, params))
        }
        _ => None,
    }
}

fn build(topology: &Topology, call: &ProcedureCall) -> Result<Arc<dyn Procedure>> {
    let bad = |s: String| Error::BadCall(s);
    match call.kind.as_ref().ok_or_else(|| bad("empty procedure call".into()))? {
        ProcedureKind::Kv(kv) => {
            let table = u16::try_from(kv.table).map_err(|_| bad(format!("table id {} out of range", kv.table)))?;
            let schema = topology.table(TableId(table)).ok_or_else(|| bad(format!("unknown table id {table}")))?;
            let cell_bytes = schema.cells[0].bytes;
            if kv.ops.is_empty() {
                return Err(bad("a transaction needs at least one operation".into()));
            }
            let ops = kv
                .ops
                .iter()
                .map(|o| {
                    Ok(match o.kind {
                        kv_kind::READ => KvOp::Read(o.key),
                        kv_kind::WRITE => {
                            if o.value.len() > cell_bytes as usize {
                                return Err(bad(format!(
                                    "value of {} bytes exceeds the {cell_bytes}-byte cell",
                                    o.value.len()
                                )));
                            }
                            KvOp::Write(o.key, o.value.clone())
                        }
                        kv_kind::ADD => KvOp::Add(o.key, o.operand),
                        kv_kind::APPEND => KvOp::Append(o.key, o.operand as u64),
                        kv_kind::DELETE => KvOp::Delete(o.key),
                        kv_kind::CHECK => KvOp::Check(o.key, o.operand as u64),
                        kv_kind::SCAN => {
                            if !schema.ordered {
                                return Err(bad(format!(
                                    "a scan of table `{}`, which has no ordered index (ordered_index: false)",
                                    schema.name
                                )));
                            }
                            let (from, to, limit) = scan_of(o).map_err(bad)?;
                            KvOp::Scan(from, to, limit)
                        }
                        k => return Err(bad(format!("unknown key/value operation kind {k}"))),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Arc::new(KvProcedure::partitioned(TableId(table), cell_bytes, ops, &partitioner(topology))))
        }
        ProcedureKind::Ycsb(y) => {
            let table = u16::try_from(y.table).map_err(|_| bad(format!("table id {} out of range", y.table)))?;
            let schema = topology.table(TableId(table)).ok_or_else(|| bad(format!("unknown table id {table}")))?;
            let cells = schema.cells.len();
            let ops = y
                .ops
                .iter()
                .map(|o| {
                    if !o.update {
                        return Ok(YcsbOp::Read { key: o.key });
                    }
                    let c = o.cell as usize;
                    if c >= cells {
                        return Err(bad(format!("cell {c} out of range ({cells} cells)")));
                    }
                    if o.value.len() > schema.cells[c].bytes as usize {
                        return Err(bad(format!("value of {} bytes exceeds cell {c}", o.value.len())));
                    }
                    Ok(YcsbOp::Update { key: o.key, cell: c as u16, value: o.value.clone() })
                })
                .collect::<Result<Vec<_>>>()?;
            if ops.is_empty() {
                return Err(bad("a transaction needs at least one operation".into()));
            }
            Ok(Arc::new(YcsbProcedure::new(TableId(table), cells, ops)))
        }
        ProcedureKind::Tpcc(t) => redt_tpcc::procedures::build(topology, t.kind, &t.params).map_err(bad),
        ProcedureKind::Batch(b) => Ok(Arc::new(batch(topology, b)?)),
        ProcedureKind::Records(r) => {
            let ops = record_ops(topology, r).map_err(bad)?;
            if ops.is_empty() {
                return Err(bad("a transaction needs at least one operation".into()));
            }
            let cells = |t: TableId| topology.table(t).map_or(0, |s| s.cells.len());
            Ok(Arc::new(RecordsProcedure::new(&ops, cells)))
        }
    }
}

/// The operations of a records call, checked against `topology`: known tables and kinds, a
/// put with one value per cell, each at most its cell's width.
///
/// # Errors
/// What is wrong, as text.
pub fn record_ops(topology: &Topology, call: &RecordsCall) -> std::result::Result<Vec<RecordOp>, String> {
    call.ops
        .iter()
        .map(|o| {
            let table = u16::try_from(o.table).map_err(|_| format!("table id {} out of range", o.table))?;
            let schema = topology.table(TableId(table)).ok_or_else(|| format!("unknown table id {table}"))?;
            let table = TableId(table);
            Ok(match o.kind {
                record_kind::GET => RecordOp::Get { table, key: o.key },
                record_kind::CREATE => RecordOp::Create { table, key: o.key },
                record_kind::PUT => {
                    if o.cells.len() != schema.cells.len() {
                        return Err(format!(
                            "a put on table `{}` needs {} cell values, got {}",
                            schema.name,
                            schema.cells.len(),
                            o.cells.len()
                        ));
                    }
                    if let Some((c, v)) =
                        o.cells.iter().enumerate().find(|(c, v)| v.len() > schema.cells[*c].bytes as usize)
                    {
                        return Err(format!(
                            "value of {} bytes exceeds cell {c} of table `{}` ({} bytes)",
                            v.len(),
                            schema.name,
                            schema.cells[c].bytes
                        ));
                    }
                    RecordOp::Put { table, key: o.key, cells: o.cells.clone() }
                }
                k => return Err(format!("unknown record operation kind {k}")),
            })
        })
        .collect()
}

/// The key/value procedure of a call, if it is one (to fill in read results).
pub fn kv_procedure(topology: &Topology, call: &ProcedureCall) -> Option<KvProcedure> {
    let Some(ProcedureKind::Kv(kv)) = &call.kind else { return None };
    let schema = topology.table(TableId(u16::try_from(kv.table).ok()?))?;
    let ops = kv
        .ops
        .iter()
        .map(|o| match o.kind {
            kv_kind::READ => Some(KvOp::Read(o.key)),
            kv_kind::WRITE => Some(KvOp::Write(o.key, o.value.clone())),
            kv_kind::ADD => Some(KvOp::Add(o.key, o.operand)),
            kv_kind::APPEND => Some(KvOp::Append(o.key, o.operand as u64)),
            kv_kind::DELETE => Some(KvOp::Delete(o.key)),
            kv_kind::CHECK => Some(KvOp::Check(o.key, o.operand as u64)),
            kv_kind::SCAN => scan_of(o).ok().map(|(from, to, limit)| KvOp::Scan(from, to, limit)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(KvProcedure::partitioned(schema.id, schema.cells[0].bytes, ops, &partitioner(topology)))
}

/// A key/value call on `table`.
pub fn kv_call(table: TableId, ops: &[KvOp]) -> ProcedureCall {
    let ops = ops
        .iter()
        .map(|op| match op {
            KvOp::Read(k) => KvOpMsg { kind: kv_kind::READ, key: *k, value: vec![], operand: 0 },
            KvOp::Write(k, v) => KvOpMsg { kind: kv_kind::WRITE, key: *k, value: v.clone(), operand: 0 },
            KvOp::Add(k, d) => KvOpMsg { kind: kv_kind::ADD, key: *k, value: vec![], operand: *d },
            KvOp::Append(k, x) => KvOpMsg { kind: kv_kind::APPEND, key: *k, value: vec![], operand: *x as i64 },
            KvOp::Delete(k) => KvOpMsg { kind: kv_kind::DELETE, key: *k, value: vec![], operand: 0 },
            KvOp::Check(k, version) => {
                KvOpMsg { kind: kv_kind::CHECK, key: *k, value: vec![], operand: *version as i64 }
            }
            KvOp::Scan(from, to, limit) => {
                KvOpMsg { kind: kv_kind::SCAN, key: *from, value: limit.to_le_bytes().to_vec(), operand: *to as i64 }
            }
        })
        .collect();
    ProcedureCall { kind: Some(ProcedureKind::Kv(KvCall { table: table.0 as u32, ops })) }
}

/// A records call ([`RecordOp`]s on any tables, in order).
pub fn records_call(ops: &[RecordOp]) -> ProcedureCall {
    let ops = ops
        .iter()
        .map(|op| {
            let (table, key) = op.target();
            let (kind, cells) = match op {
                RecordOp::Get { .. } => (record_kind::GET, vec![]),
                RecordOp::Put { cells, .. } => (record_kind::PUT, cells.clone()),
                RecordOp::Create { .. } => (record_kind::CREATE, vec![]),
            };
            RecordOpMsg { kind, table: table.0 as u32, key, cells }
        })
        .collect();
    ProcedureCall { kind: Some(ProcedureKind::Records(RecordsCall { ops })) }
}

/// Encodes what a get of a records call read, as [`crate::TxnAnswer::reads`] carries it:
/// the byte 0 for a missing record, else the byte 1 then every cell as a little-endian `u32`
/// length and its bytes (never empty: an empty read is a write's on the wire).
pub fn encode_record_read(cells: Option<&[Vec<u8>]>) -> Vec<u8> {
    let Some(cells) = cells else { return vec![0] };
    let mut out = Vec::with_capacity(1 + cells.iter().map(|c| 4 + c.len()).sum::<usize>());
    out.push(1);
    for c in cells {
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        out.extend_from_slice(c);
    }
    out
}

/// Decodes [`encode_record_read`]: `None` for a missing record, else its cells.
///
/// # Errors
/// [`Error::BadCall`] for bytes that are not such an encoding.
pub fn decode_record_read(bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    let bad = || Error::BadCall("malformed record read".into());
    match bytes.split_first() {
        Some((0, [])) => return Ok(None),
        Some((1, _)) => {}
        _ => return Err(bad()),
    }
    let mut rest = &bytes[1..];
    let mut cells = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(bad());
        }
        cells.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    Ok(Some(cells))
}

/// A YCSB call on `table` (records of `cells` cells).
pub fn ycsb_call(table: TableId, cells: usize, ops: &[YcsbOp]) -> ProcedureCall {
    let ops = ops
        .iter()
        .map(|op| match op {
            YcsbOp::Read { key } => YcsbOpMsg { key: *key, update: false, cell: 0, value: vec![] },
            YcsbOp::Update { key, cell, value } => {
                YcsbOpMsg { key: *key, update: true, cell: *cell as u32, value: value.clone() }
            }
        })
        .collect();
    ProcedureCall { kind: Some(ProcedureKind::Ycsb(YcsbCall { table: table.0 as u32, cells: cells as u32, ops })) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_reads_round_trip_and_garbage_is_refused() {
        let cells = vec![vec![1, 2, 3], vec![], vec![9; 300]];
        assert_eq!(decode_record_read(&encode_record_read(Some(&cells))).unwrap(), Some(cells));
        assert_eq!(decode_record_read(&encode_record_read(None)).unwrap(), None);
        assert_eq!(decode_record_read(&[1]).unwrap(), Some(vec![]));
        assert_eq!(encode_record_read(None), vec![0], "never empty: the wire reads empty as no read");
        for bad in [&[][..], &[2u8][..], &[0, 0], &[1, 5, 0, 0, 0, 1], &[1, 1, 0]] {
            assert!(decode_record_read(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_put_needs_one_value_per_cell_within_its_width() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).unwrap();
        let put = |cells: Vec<Vec<u8>>| records_call(&[RecordOp::Put { table: TableId(1), key: 1, cells }]);
        assert!(procedure(&topo, &put(vec![vec![0; 100]; 10])).is_ok());
        let e = procedure(&topo, &put(vec![vec![0; 100]; 9])).unwrap_err().to_string();
        assert!(e.contains("needs 10 cell values, got 9"), "{e}");
        let mut cells = vec![vec![0; 100]; 10];
        cells[3] = vec![0; 101];
        let e = procedure(&topo, &put(cells)).unwrap_err().to_string();
        assert!(e.contains("exceeds cell 3"), "{e}");
        let e = procedure(&topo, &records_call(&[RecordOp::Get { table: TableId(9), key: 1 }])).unwrap_err();
        assert!(e.to_string().contains("unknown table id 9"), "{e}");
    }
}
