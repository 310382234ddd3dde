//! The limits on one client request (the topology file's `limits:` section,
//! [`redt_proto::LimitsConfig`]): how many operations and bytes one transaction carries, and
//! how many participant DCs (and partitions) one sub-transaction names.
//!
//! Pure checks over a call or a phase-1 request. A coordinator checks a client's call before
//! it takes a transaction id or plans anything (`redt_coordinator::Node::submit_as`); an executor
//! checks a phase 1 again where it arrives from the network and before it plans or reserves
//! anything ([`crate::message::Request::check`], [`crate::ExecutorCore::execute`]): a peer's
//! request is not trusted to have been checked. Each refusal is an [`OverLimit`] whose text
//! names the limit and its value, and the node counts it (`redt_coordinator::StatusBoard`).
//!
//! The redo entry a call makes is not checked here. A topology `redt` loads is refused when
//! its `limits.max_ops_per_txn` point operations could make a redo entry on one node larger
//! than one entry of its ring (`redt_dc_executor::ring::check_limits_fit_ring`), so a call
//! within these limits cannot. What that bound leaves out: range reads (a scan holds up to
//! 1,000 rows per partition whatever the operation count) and topologies built in code
//! (embedded clusters, simulations) rather than loaded. There the executor of the node whose
//! entry would be too large refuses the sub-transaction before it reserves ring space or
//! takes a lock (`redt_dc_executor::ring::check_encodable`; its range reads and any records
//! its writes create are done by then), and the transaction aborts.

use redt_proto::wire::{ProcedureCall, ProcedureKind};
use redt_proto::{DcId, LimitsConfig, PartitionId, Topology};
use std::collections::BTreeSet;

/// Bytes a key counts for in [`LimitsConfig::max_bytes_per_txn`].
pub const KEY_BYTES: u64 = 8;

/// Which limit a request broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `limits.max_ops_per_txn`.
    OpsPerTxn,
    /// `limits.max_bytes_per_txn`.
    BytesPerTxn,
    /// `limits.max_jsonl_line_bytes` (the client's input, `redt client --jsonl`).
    JsonlLineBytes,
    /// A sub-transaction names more participant DCs than the topology has.
    ParticipantsPerSubTxn,
    /// A sub-transaction names more partitions than the topology has.
    PartitionsPerSubTxn,
    /// `limits.max_pending_votes`: a repeated phase 1 whose commit vote the executor forgot.
    PendingVotes,
    /// The keys of one versioned read (`redt_proto::wire::VersionedReadRequest`): at most
    /// `limits.max_ops_per_txn`, as a transaction's reads.
    ReadKeys,
}

impl Limit {
    /// The limit's name: its key in the topology file (`limits.max_ops_per_txn`), or where its
    /// value comes from.
    pub fn name(self) -> &'static str {
        match self {
            Limit::OpsPerTxn | Limit::ReadKeys => "limits.max_ops_per_txn",
            Limit::BytesPerTxn => "limits.max_bytes_per_txn",
            Limit::JsonlLineBytes => "limits.max_jsonl_line_bytes",
            Limit::ParticipantsPerSubTxn => "the topology's DCs",
            Limit::PartitionsPerSubTxn => "the topology's partitions",
            Limit::PendingVotes => "limits.max_pending_votes",
        }
    }
}

/// A request over a limit: which one, what the request asked for, and the limit's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.text())]
pub struct OverLimit {
    /// The limit.
    pub limit: Limit,
    /// What the request asked for.
    pub got: u64,
    /// The limit's value.
    pub max: u64,
}

impl OverLimit {
    fn text(&self) -> String {
        let (got, max, name) = (self.got, self.max, self.limit.name());
        match self.limit {
            Limit::OpsPerTxn => format!("transaction has {got} operations; the limit is {max} ({name})"),
            Limit::BytesPerTxn => {
                format!("transaction carries {got} bytes of keys and values; the limit is {max} ({name})")
            }
            Limit::JsonlLineBytes => format!("input line has {got} bytes; the limit is {max} ({name})"),
            Limit::ParticipantsPerSubTxn => {
                format!("sub-transaction names {got} participant DCs; the limit is {max} ({name})")
            }
            Limit::PartitionsPerSubTxn => {
                format!("sub-transaction names {got} partitions; the limit is {max} ({name})")
            }
            Limit::ReadKeys => format!("versioned read of {got} keys; the limit is {max} ({name})"),
            Limit::PendingVotes => format!(
                "a repeated phase 1 whose commit vote was forgotten: more than {max} awaited their decision; \
                 the limit is {max} ({name}); its redo entries wait in the ring for the decision"
            ),
        }
    }
}

/// Checks a procedure call's size against `limits` without building anything: its
/// operations (key/value and YCSB calls; a TPC-C call's are checked once planned, with
/// [`check_accesses`]) and its bytes (8 per key plus every value; a TPC-C call's parameters).
///
/// # Errors
/// The first limit the call breaks, operations first.
pub fn check_call(limits: &LimitsConfig, call: &ProcedureCall) -> Result<(), OverLimit> {
    let (ops, bytes) = call_size(call);
    if ops > limits.max_ops_per_txn {
        return Err(OverLimit { limit: Limit::OpsPerTxn, got: ops, max: limits.max_ops_per_txn });
    }
    if bytes > limits.max_bytes_per_txn {
        return Err(OverLimit { limit: Limit::BytesPerTxn, got: bytes, max: limits.max_bytes_per_txn });
    }
    Ok(())
}

/// A call's operations and bytes, as [`check_call`] counts them (a batch: its members').
fn call_size(call: &ProcedureCall) -> (u64, u64) {
    match &call.kind {
        Some(ProcedureKind::Kv(kv)) => {
            let values = kv.ops.iter().map(|o| o.value.len() as u64).fold(0u64, u64::saturating_add);
            (kv.ops.len() as u64, (kv.ops.len() as u64).saturating_mul(KEY_BYTES).saturating_add(values))
        }
        Some(ProcedureKind::Ycsb(y)) => {
            let values = y.ops.iter().map(|o| o.value.len() as u64).fold(0u64, u64::saturating_add);
            (y.ops.len() as u64, (y.ops.len() as u64).saturating_mul(KEY_BYTES).saturating_add(values))
        }
        Some(ProcedureKind::Tpcc(t)) => (0, t.params.len() as u64),
        Some(ProcedureKind::Records(r)) => {
            let values = r.ops.iter().flat_map(|o| &o.cells).map(|c| c.len() as u64).fold(0u64, u64::saturating_add);
            (r.ops.len() as u64, (r.ops.len() as u64).saturating_mul(KEY_BYTES).saturating_add(values))
        }
        Some(ProcedureKind::Batch(b)) => b
            .calls
            .iter()
            .map(call_size)
            .fold((0u64, 0u64), |(o, b), (mo, mb)| (o.saturating_add(mo), b.saturating_add(mb))),
        None => (0, 0),
    }
}

/// How much executor work `call` asks of one node, in operations: its operations, a scan
/// counting its row limit (what [`crate::executor_queue`] calls its weight). A stored
/// procedure's (TPC-C's), whose records are known only once it is built, counts 1.
pub fn call_weight(call: &ProcedureCall) -> u64 {
    let ops = match &call.kind {
        Some(ProcedureKind::Kv(kv)) => kv
            .ops
            .iter()
            .map(|o| match o.kind {
                crate::kv_op::kv_kind::SCAN => crate::kv_op::scan_of(o).map_or(1, |(_, _, limit)| u64::from(limit)),
                _ => 1,
            })
            .fold(0u64, u64::saturating_add),
        Some(ProcedureKind::Ycsb(y)) => y.ops.len() as u64,
        Some(ProcedureKind::Records(r)) => r.ops.len() as u64,
        Some(ProcedureKind::Batch(b)) => b.calls.iter().map(call_weight).fold(0u64, u64::saturating_add),
        Some(ProcedureKind::Tpcc(_)) | None => 1,
    };
    ops.max(1)
}

/// Checks the number of records a built procedure plans to touch against
/// `limits.max_ops_per_txn` (a stored procedure's operations are its accesses).
///
/// # Errors
/// [`Limit::OpsPerTxn`] when it plans more.
pub fn check_accesses(limits: &LimitsConfig, accesses: usize) -> Result<(), OverLimit> {
    let got = accesses as u64;
    if got > limits.max_ops_per_txn {
        return Err(OverLimit { limit: Limit::OpsPerTxn, got, max: limits.max_ops_per_txn });
    }
    Ok(())
}

/// What is wrong with a phase-1 request's participant DCs or partitions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadSubTxn {
    /// More of them than the topology has.
    #[error(transparent)]
    OverLimit(#[from] OverLimit),
    /// One is not in the topology, or is named twice.
    #[error("{0}")]
    Malformed(String),
}

/// Checks the participant DCs and partitions a sub-transaction names against `topology`:
/// each in the topology and named once, so at most as many as it has. A redo entry records
/// both lists, so this bounds what an executor writes into its ring for a request.
///
/// # Errors
/// [`BadSubTxn::OverLimit`] ([`Limit::ParticipantsPerSubTxn`], [`Limit::PartitionsPerSubTxn`])
/// for too many, [`BadSubTxn::Malformed`] for one unknown or repeated.
pub fn check_sub_txn(topology: &Topology, participants: &[DcId], partitions: &[PartitionId]) -> Result<(), BadSubTxn> {
    let dcs = topology.dcs.len() as u64;
    if participants.len() as u64 > dcs {
        return Err(OverLimit { limit: Limit::ParticipantsPerSubTxn, got: participants.len() as u64, max: dcs }.into());
    }
    let known = topology.partitions.len() as u64;
    if partitions.len() as u64 > known {
        return Err(OverLimit { limit: Limit::PartitionsPerSubTxn, got: partitions.len() as u64, max: known }.into());
    }
    let mut seen = BTreeSet::new();
    for d in participants {
        if u64::from(d.0) >= dcs {
            return Err(BadSubTxn::Malformed(format!("participant {d} is not in the topology")));
        }
        if !seen.insert(d.0 as u64) {
            return Err(BadSubTxn::Malformed(format!("participant {} is named twice", topology.dc_name(*d))));
        }
    }
    seen.clear();
    for p in partitions {
        if u64::from(p.0) >= known {
            return Err(BadSubTxn::Malformed(format!("partition {p} is not in the topology")));
        }
        if !seen.insert(u64::from(p.0)) {
            return Err(BadSubTxn::Malformed(format!("partition {p} is named twice")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::kv_call;
    use redt_dc_executor::KvOp;
    use redt_proto::TableId;

    #[test]
    fn a_call_over_a_limit_is_refused_naming_it() {
        let limits = LimitsConfig { max_ops_per_txn: 4, max_bytes_per_txn: 100, ..LimitsConfig::default() };
        let ok = kv_call(TableId(2), &[KvOp::Read(1), KvOp::Write(2, vec![0; 50])]);
        assert_eq!(check_call(&limits, &ok), Ok(()));
        let many = kv_call(TableId(2), &(0..5).map(KvOp::Read).collect::<Vec<_>>());
        let e = check_call(&limits, &many).unwrap_err();
        assert_eq!(e, OverLimit { limit: Limit::OpsPerTxn, got: 5, max: 4 });
        assert_eq!(e.to_string(), "transaction has 5 operations; the limit is 4 (limits.max_ops_per_txn)");
        let big = kv_call(TableId(2), &[KvOp::Write(2, vec![0; 93])]);
        let e = check_call(&limits, &big).unwrap_err();
        assert_eq!(e, OverLimit { limit: Limit::BytesPerTxn, got: 101, max: 100 });
        assert!(e.to_string().ends_with("the limit is 100 (limits.max_bytes_per_txn)"), "{e}");
        assert_eq!(check_accesses(&limits, 4), Ok(()));
        assert_eq!(check_accesses(&limits, 5).unwrap_err().limit, Limit::OpsPerTxn);
    }
}
