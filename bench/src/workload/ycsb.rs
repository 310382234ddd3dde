//! YCSB through the lifecycle: `init` writes `records_per_partition` records in every partition
//! of the YCSB table (the topology's first), every cell one byte repeated (as YCSB's updates
//! write them); `run` is `redt bench ycsb --cluster`'s clients with the record count init
//! recorded; `check` reads every record init wrote back and checks it is there and
//! well-formed.
//!
//! Keys: rank `r` of partition `p` is key `p + r·P` ([`KeySpace`]), as the embedded bench and
//! `redt cluster up --records-per-partition` load them.

use super::meta::{self, Stored};
use super::{require_commits, Target, WorkloadKind};
use crate::cluster::{run_remote_ycsb_on, ClusterConfig, KeySpace, RemoteReport};
use crate::progress::bar;
use redt_dc_executor::RecordOp;
use redt_proto::{PartitionId, TableId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What `init` loaded (the record's parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct YcsbInit {
    /// Records per partition (ranks `0..records_per_partition`).
    pub records_per_partition: u64,
    /// Partitions of the topology when loaded.
    pub partitions: u64,
    /// The YCSB table.
    pub table: String,
    /// Cells per record.
    pub cells: usize,
    /// Bytes per cell.
    pub cell_bytes: usize,
    /// Whether every cell was written (`redt workload init`: one byte repeated per cell) or
    /// the records were created empty (`redt cluster up --records-per-partition`).
    pub cells_written: bool,
    /// Per partition, the rank the next insert takes (workload D's inserts of earlier runs);
    /// empty: none.
    #[serde(default)]
    pub insert_next: Vec<u64>,
}

/// The YCSB table of the target: id, name, cells, bytes per cell.
fn table(target: &Target) -> Result<(TableId, String, usize, usize), String> {
    let t = target.topo.tables.first().ok_or("the topology declares no table")?;
    let bytes = t.cells.iter().map(|c| c.bytes as usize).min().unwrap_or(0);
    if bytes == 0 {
        return Err(format!("the YCSB table `{}` has an empty cell", t.name));
    }
    Ok((t.id, t.name.clone(), t.cells.len(), bytes))
}

/// The byte every cell `cell` of `key` holds after init.
pub fn fill_byte(key: u64, cell: usize) -> u8 {
    (crate::ycsb::fnv(key ^ ((cell as u64) << 56)) & 0xff) as u8
}

/// What `init` did.
#[derive(Clone, Debug, Serialize)]
pub struct InitReport {
    /// The record written.
    pub init: YcsbInit,
    /// Records written.
    pub records: u64,
    /// Seconds the load took.
    pub seconds: f64,
    /// The record this init replaced, if the cluster had one.
    pub replaced: Option<YcsbInit>,
}

/// `redt workload init ycsb`: writes `records_per_partition` records in every partition, every
/// cell written, then the init record.
///
/// # Errors
/// No YCSB or `kv` table; a batch that did not commit.
pub async fn init(target: &Target, records_per_partition: u64, progress: bool) -> Result<InitReport, String> {
    if records_per_partition == 0 {
        return Err("--records-per-partition must be at least 1".into());
    }
    let (tid, name, cells, cell_bytes) = table(target)?;
    let replaced = meta::read::<YcsbInit>(target, WorkloadKind::Ycsb).await?.map(|s| s.params);
    let partitions = target.topo.partitions.len() as u64;
    let keys = KeySpace::new(partitions, records_per_partition);
    let t0 = std::time::Instant::now();
    let mut ops = Vec::with_capacity((partitions * records_per_partition) as usize);
    for p in 0..partitions as u32 {
        for r in 0..records_per_partition {
            let key = keys.key(PartitionId(p), r);
            let values = (0..cells).map(|c| vec![fill_byte(key, c); cell_bytes]).collect();
            ops.push(RecordOp::Put { table: tid, key, cells: values });
        }
    }
    let total = ops.len() as u64;
    let b = bar(progress, total, "load");
    target.records(ops, &|n| b.set_position(n)).await?;
    b.finish_and_clear();
    let init = YcsbInit {
        records_per_partition,
        partitions,
        table: name,
        cells,
        cell_bytes,
        cells_written: true,
        insert_next: Vec::new(),
    };
    meta::write(target, &Stored::new(WorkloadKind::Ycsb, "redt workload init", init.clone())).await?;
    Ok(InitReport { init, records: total, seconds: t0.elapsed().as_secs_f64(), replaced })
}

/// Records that `redt cluster up --records-per-partition N` loaded `N` empty records per
/// partition (straight into the MemStores), so runs and checks know the count.
///
/// # Errors
/// No YCSB or `kv` table; the write did not commit.
pub async fn record_cluster_up_load(target: &Target, records_per_partition: u64) -> Result<(), String> {
    let (_, name, cells, cell_bytes) = table(target)?;
    let init = YcsbInit {
        records_per_partition,
        partitions: target.topo.partitions.len() as u64,
        table: name,
        cells,
        cell_bytes,
        cells_written: false,
        insert_next: Vec::new(),
    };
    meta::write(target, &Stored::new(WorkloadKind::Ycsb, "redt cluster up", init)).await
}

/// Why a run asking for `asked` records per partition cannot run on a cluster initialised
/// with `init`: the two values and the fix. `cluster` is the ` --cluster F` the commands need.
pub fn mismatch(init: &Stored<YcsbInit>, asked: u64, cluster: &str) -> String {
    format!(
        "--records-per-partition {asked} does not match the cluster: it was initialised with {} records per \
         partition (by `{}` at {}). Leave the flag out to run on those, or load {asked} first: `redt workload \
         init ycsb --records-per-partition {asked}{cluster}`",
        init.params.records_per_partition,
        init.loaded_by,
        init.initialised_at()
    )
}

/// Reads the YCSB init record and settles the records per partition a run uses: the record's,
/// refusing an `asked` one that differs ([`mismatch`]). `None` when the cluster has no record.
///
/// # Errors
/// A mismatch; a record for another table shape or partition count; the read failed.
pub async fn settle_records(
    target: &Target,
    asked: Option<u64>,
    cluster: &str,
) -> Result<Option<Stored<YcsbInit>>, String> {
    let Some(init) = meta::read::<YcsbInit>(target, WorkloadKind::Ycsb).await? else { return Ok(None) };
    if let Some(asked) = asked.filter(|&a| a != init.params.records_per_partition) {
        return Err(mismatch(&init, asked, cluster));
    }
    let (_, name, cells, cell_bytes) = table(target)?;
    let p = &init.params;
    if p.partitions != target.topo.partitions.len() as u64
        || p.table != name
        || p.cells != cells
        || p.cell_bytes != cell_bytes
    {
        return Err(format!(
            "the cluster's YCSB init record is for table `{}` of {}×{} B in {} partitions; this topology has `{name}` of \
             {cells}×{cell_bytes} B in {} partitions (another topology file?)",
            p.table,
            p.cells,
            p.cell_bytes,
            p.partitions,
            target.topo.partitions.len()
        ));
    }
    Ok(Some(init))
}

/// `redt workload run ycsb`: the YCSB clients of `cfg` on the records init loaded (`asked`,
/// if given, must match them), then the run counted in the record (and workload D's inserts,
/// so the next run inserts beyond them).
///
/// # Errors
/// No init record; a mismatch; no commit at all; the clients' errors.
pub async fn run(
    target: &Target,
    cfg: &ClusterConfig,
    asked: Option<u64>,
    cluster: &str,
) -> Result<RemoteReport, String> {
    let mut init =
        settle_records(target, asked, cluster).await?.ok_or_else(|| meta::missing(WorkloadKind::Ycsb, cluster))?;
    let rpp = init.params.records_per_partition;
    let cfg = ClusterConfig { records_per_partition: rpp, ..cfg.clone() };
    let keys = Arc::new(KeySpace::resume(init.params.partitions, rpp, &init.params.insert_next));
    let report = run_remote_ycsb_on(target, &cfg, keys.clone()).await?;
    init.runs += 1;
    if keys.inserted() > 0 || !init.params.insert_next.is_empty() {
        init.params.insert_next = keys.next_ranks();
    }
    meta::write(target, &init).await?;
    require_commits(
        "the YCSB run",
        &report.outcomes,
        std::time::Duration::from_secs_f64(report.duration_s),
        "see the abort reasons in the nodes' logs (RUST_LOG=debug) and `redt status`",
    )?;
    Ok(report)
}

/// What `check` found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The init record checked against.
    pub init: YcsbInit,
    /// Records read back.
    pub records: u64,
    /// Records missing.
    pub missing: u64,
    /// Records present whose cells are not each one byte repeated at the cell's width.
    pub malformed: u64,
    /// The first few problems, as text.
    pub problems: Vec<String>,
    /// Seconds the check took.
    pub seconds: f64,
    /// Every record present and well-formed.
    pub pass: bool,
}

/// Whether `cells` is a well-formed YCSB record of `cells_n` cells of `bytes` each: every cell
/// that width, one byte repeated.
pub fn well_formed(cells: &[Vec<u8>], cells_n: usize, bytes: usize) -> bool {
    cells.len() == cells_n && cells.iter().all(|c| c.len() == bytes && c.iter().all(|&b| b == c[0]))
}

/// `redt workload check ycsb`: reads every record init wrote (the count it recorded) and checks
/// each is present and well-formed.
///
/// # Errors
/// No init record; a read that did not commit.
pub async fn check(target: &Target, cluster: &str, progress: bool) -> Result<CheckReport, String> {
    let init =
        settle_records(target, None, cluster).await?.ok_or_else(|| meta::missing(WorkloadKind::Ycsb, cluster))?;
    let p = init.params;
    let (tid, ..) = table(target)?;
    let keys = KeySpace::new(p.partitions, p.records_per_partition);
    let t0 = std::time::Instant::now();
    let all: Vec<u64> = (0..p.partitions as u32)
        .flat_map(|part| (0..p.records_per_partition).map(move |r| (part, r)))
        .map(|(part, r)| keys.key(PartitionId(part), r))
        .collect();
    let b = bar(progress, all.len() as u64, "check");
    let read = target
        .records(all.iter().map(|&key| RecordOp::Get { table: tid, key }).collect(), &|n| b.set_position(n))
        .await?;
    b.finish_and_clear();
    let (mut missing, mut malformed, mut problems) = (0u64, 0u64, Vec::new());
    for (key, r) in all.iter().zip(&read) {
        match r {
            None => {
                missing += 1;
                if problems.len() < 10 {
                    problems.push(format!("key {key}: missing"));
                }
            }
            Some(cells) if !well_formed(cells, p.cells, p.cell_bytes) => {
                malformed += 1;
                if problems.len() < 10 {
                    let lens: Vec<usize> = cells.iter().map(Vec::len).collect();
                    problems.push(format!("key {key}: not one repeated byte per cell (cell lengths {lens:?})"));
                }
            }
            Some(_) => {}
        }
    }
    Ok(CheckReport {
        records: all.len() as u64,
        missing,
        malformed,
        problems,
        seconds: t0.elapsed().as_secs_f64(),
        pass: missing == 0 && malformed == 0,
        init: p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_well_formed_with_one_repeated_byte_per_full_cell() {
        let cells = vec![vec![7u8; 4], vec![0u8; 4]];
        assert!(well_formed(&cells, 2, 4));
        assert!(!well_formed(&cells, 3, 4), "a cell short");
        assert!(!well_formed(&[vec![7, 7, 7, 8], vec![0; 4]], 2, 4), "two bytes in a cell");
        assert!(!well_formed(&[vec![7; 3], vec![0; 4]], 2, 4), "a cell too short");
        assert_ne!(fill_byte(1, 0), fill_byte(1, 1));
    }
}
