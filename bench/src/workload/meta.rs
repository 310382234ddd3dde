//! A workload's init record, kept in the cluster itself: what `redt workload init` loaded
//! (record counts, warehouses, accounts, seeds) and what later runs added, so `run` and
//! `check` know what to expect and refuse a mismatch.
//!
//! The record is JSON in the key/value table [`META_TABLE`], under keys reserved per workload:
//! [`CHUNKS`] consecutive keys from [`key`]`(workload, 0)`, each holding a little-endian
//! `u32` length and that many bytes of the JSON text (the rest of the cell zero); the first
//! empty chunk ends it. A cluster with no record reads empty chunks (missing records).
//! Written and read in one transaction each, so a reader sees a whole record or none.

use super::{Target, WorkloadKind};
use redt_dc_executor::RecordOp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The table the init records live in.
pub const META_TABLE: &str = "kv";

/// The first reserved key: far above the keys the workloads use (bank accounts from 0,
/// list-append lists from [`super::append::FIRST_KEY`]).
pub const KEY_BASE: u64 = 0xFFFF_FFF0_0000_0000;

/// Keys (chunks) one record may span.
pub const CHUNKS: u64 = 16;

/// The version of the record's layout.
pub const FORMAT: u32 = 1;

/// Key of chunk `chunk` of `workload`'s record.
pub fn key(workload: WorkloadKind, chunk: u64) -> u64 {
    let i = WorkloadKind::ALL.iter().position(|w| *w == workload).expect("every kind is in ALL") as u64;
    KEY_BASE + i * CHUNKS + chunk
}

/// A stored init record: who wrote it, when, and the workload's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stored<T> {
    /// The workload.
    pub workload: WorkloadKind,
    /// [`FORMAT`].
    pub format: u32,
    /// What loaded the data: `redt workload init`, `redt cluster up`.
    pub loaded_by: String,
    /// When the record was first written, seconds since the Unix epoch.
    pub initialised_at_unix_s: u64,
    /// Runs recorded since (each `redt workload run` that finished).
    pub runs: u64,
    /// The workload's parameters.
    pub params: T,
}

impl<T> Stored<T> {
    /// A record of `params` for `workload`, loaded by `loaded_by`, now.
    pub fn new(workload: WorkloadKind, loaded_by: &str, params: T) -> Self {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Stored {
            workload,
            format: FORMAT,
            loaded_by: loaded_by.into(),
            initialised_at_unix_s: now.as_secs(),
            runs: 0,
            params,
        }
    }

    /// When it was initialised, as RFC 3339 text.
    pub fn initialised_at(&self) -> String {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.initialised_at_unix_s);
        humantime::format_rfc3339_seconds(t).to_string()
    }
}

/// The `kv` table, or why the topology cannot keep init records.
fn table(target: &Target) -> Result<(redt_proto::TableId, usize), String> {
    let t = target.topo.table_by_name(META_TABLE).ok_or_else(|| {
        format!(
            "the topology `{}` has no table `{META_TABLE}`, where `redt workload` keeps what init loaded; add one \
             (as configs/default.yaml and configs/tpcc.yaml do: `- {{ name: kv, id: N, cells: [ {{ name: value, \
             bytes: 2048 }} ] }}`)",
            target.topo.name
        )
    })?;
    let bytes = t.cells.first().map_or(0, |c| c.bytes as usize);
    if t.cells.len() != 1 || bytes < 64 {
        return Err(format!("table `{META_TABLE}` must have one cell of at least 64 bytes to hold init records"));
    }
    Ok((t.id, bytes))
}

/// Reads `workload`'s record; `None` when the cluster has none.
///
/// # Errors
/// No `kv` table; the read did not commit; a record that is not valid JSON of `T`, or of
/// another format.
pub async fn read<T: DeserializeOwned>(target: &Target, workload: WorkloadKind) -> Result<Option<Stored<T>>, String> {
    let (tid, _) = table(target)?;
    let ops: Vec<RecordOp> = (0..CHUNKS).map(|c| RecordOp::Get { table: tid, key: key(workload, c) }).collect();
    let (_, node) = target.home(tid, key(workload, 0));
    let out = target
        .commit_idempotent(node, redt_protocol::call::records_call(&ops))
        .await
        .map_err(|e| format!("reading the {workload} init record: {e}"))?;
    let mut json = Vec::new();
    for r in &out.reads {
        let cells = redt_protocol::call::decode_record_read(r.as_deref().unwrap_or_default())
            .map_err(|e| format!("reading the {workload} init record: {e}"))?;
        let Some(cell) = cells.and_then(|c| c.into_iter().next()) else { break };
        let Some((len, rest)) = cell.split_first_chunk::<4>() else { break };
        let len = u32::from_le_bytes(*len) as usize;
        if len == 0 {
            break;
        }
        json.extend_from_slice(rest.get(..len).ok_or_else(|| format!("the {workload} init record is truncated"))?);
    }
    if json.is_empty() {
        return Ok(None);
    }
    let head: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("the {workload} init record is not JSON: {e}"))?;
    if head.get("format").and_then(|f| f.as_u64()) != Some(FORMAT as u64) {
        return Err(format!(
            "the {workload} init record has format {}, this redt reads format {FORMAT}",
            head.get("format").map_or("none".to_string(), |f| f.to_string())
        ));
    }
    serde_json::from_value(head).map(Some).map_err(|e| format!("the {workload} init record: {e}"))
}

/// Writes `record` as `workload`'s record, replacing any.
///
/// # Errors
/// No `kv` table; a record too long for [`CHUNKS`] cells; the write did not commit.
pub async fn write<T: Serialize>(target: &Target, record: &Stored<T>) -> Result<(), String> {
    let (tid, cell_bytes) = table(target)?;
    let workload = record.workload;
    let json = serde_json::to_vec(record).map_err(|e| e.to_string())?;
    let per = cell_bytes - 4;
    if json.len() > per * CHUNKS as usize {
        return Err(format!(
            "the {workload} init record takes {} bytes; the `{META_TABLE}` table holds {} in {CHUNKS} cells",
            json.len(),
            per * CHUNKS as usize
        ));
    }
    let mut pieces = json.chunks(per);
    let ops: Vec<RecordOp> = (0..CHUNKS)
        .map(|c| {
            let piece = pieces.next().unwrap_or_default();
            let mut cell = (piece.len() as u32).to_le_bytes().to_vec();
            cell.extend_from_slice(piece);
            RecordOp::Put { table: tid, key: key(workload, c), cells: vec![cell] }
        })
        .collect();
    let (_, node) = target.home(tid, key(workload, 0));
    target
        .commit_idempotent(node, redt_protocol::call::records_call(&ops))
        .await
        .map_err(|e| format!("writing the {workload} init record: {e}"))?;
    Ok(())
}

/// The error a run or check gives a cluster without `workload`'s record: run init first.
pub fn missing(workload: WorkloadKind, cluster: &str) -> String {
    format!(
        "the cluster has no {workload} init record (nothing was loaded for {workload}): run `redt workload init \
         {workload}{cluster}` first"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_its_own_keys() {
        let mut keys = std::collections::BTreeSet::new();
        for w in WorkloadKind::ALL {
            for c in 0..CHUNKS {
                assert!(keys.insert(key(w, c)), "{w} chunk {c}");
            }
        }
        assert!(keys.iter().all(|&k| k >= KEY_BASE));
    }

    #[test]
    fn records_round_trip_through_json() {
        let s = Stored::new(WorkloadKind::Bank, "redt workload init", serde_json::json!({"accounts": 5}));
        let back: Stored<serde_json::Value> = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(s.initialised_at().ends_with('Z'));
    }
}
