//! Procedure calls on the wire ↔ the stored procedures the executors run.

use crate::error::{Error, Result};
use redt_dc_executor::{KvOp, KvProcedure, Procedure, YcsbOp, YcsbProcedure};
use redt_proto::wire::{KvCall, KvOpMsg, ProcedureCall, ProcedureKind, YcsbCall, YcsbOpMsg};
use redt_proto::{TableId, Topology};
use std::sync::Arc;

/// Operation kinds of [`KvOpMsg::kind`].
pub mod kv_kind {
    /// Read cell 0.
    pub const READ: u32 = 0;
    /// Overwrite cell 0.
    pub const WRITE: u32 = 1;
    /// Add an i64.
    pub const ADD: u32 = 2;
    /// Append a u64.
    pub const APPEND: u32 = 3;
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
                        k => return Err(bad(format!("unknown key/value operation kind {k}"))),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Arc::new(KvProcedure::new(TableId(table), cell_bytes, ops)))
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
    }
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
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(KvProcedure::new(schema.id, schema.cells[0].bytes, ops))
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
        })
        .collect();
    ProcedureCall { kind: Some(ProcedureKind::Kv(KvCall { table: table.0 as u32, ops })) }
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
