//! Jepsen list-append through the lifecycle: `init` loads nothing (lists start empty) and
//! records the table; each `run` takes fresh keys (run `r` uses keys from [`FIRST_KEY`] +
//! `r`·2³², the run counted in the record before its first append, so no two runs share a
//! key), runs `redt bench append`'s clients ([`crate::clients::append`]) and writes the history
//! (JSON lines, Elle's format) to `--history FILE`; `check --history FILE` reads that history
//! and the lists of every key it names back from the cluster and checks them
//! ([`redt_checkers::history::check`]). A run without `--history` checks itself at the end (the
//! history kept in memory) and leaves nothing for a later `check`.

use super::meta::{self, Stored};
use super::{measure, require_commits, Meter, Target, WorkloadKind};
use crate::append::{check_fits, AppendConfig};
use crate::clients::Submit;
use crate::report::{CpuCost, Outcomes, Retries};
use redt_checkers::history::{self, read_history, Event, HistoryWriter, Mop};
use redt_dc_executor::{list_items, RecordOp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The first key of the first run (runs are 2³² keys apart).
pub const FIRST_KEY: u64 = 1 << 40;

/// The table the lists live in.
pub const TABLE: &str = "kv";

/// What `init` recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppendInit {
    /// The key/value table of the lists.
    pub table: String,
    /// The first key of run 0.
    pub first_key: u64,
    /// Items a list holds (the table's cell, less the list header).
    pub list_capacity: usize,
}

impl AppendInit {
    /// The first key of run `run`.
    pub fn run_base(&self, run: u64) -> u64 {
        self.first_key + (run << 32)
    }
}

/// `redt workload init append`: records the table (nothing to load: every list starts empty).
/// Refused when the cluster has a record already (its runs' lists would stay).
///
/// # Errors
/// No `kv` table; a record exists; the write did not commit.
pub async fn init(target: &Target) -> Result<AppendInit, String> {
    let schema = target.table(TABLE)?;
    if let Some(old) = meta::read::<AppendInit>(target, WorkloadKind::Append).await? {
        return Err(format!(
            "the cluster was initialised for append already (at {}, {} runs since); its lists stay, and each run \
             takes fresh keys: go on with `redt workload run append`",
            old.initialised_at(),
            old.runs
        ));
    }
    let init = AppendInit {
        table: TABLE.into(),
        first_key: FIRST_KEY,
        list_capacity: (schema.cells[0].bytes as usize).saturating_sub(redt_dc_executor::LIST_HEADER) / 8,
    };
    meta::write(target, &Stored::new(WorkloadKind::Append, "redt workload init", init.clone())).await?;
    Ok(init)
}

/// What a list-append run or check found.
#[derive(Clone, Debug, Serialize)]
pub struct AppendReport {
    /// `append`.
    pub workload: String,
    /// Topology name.
    pub topology: String,
    /// The run (0, 1, …) whose keys the history holds.
    pub run: Option<u64>,
    /// Clients in all (runs only).
    pub clients: usize,
    /// Seconds run (runs only).
    pub duration_s: f64,
    /// The run's transactions: ok and info ones, and aborted attempts (the abort rate is per
    /// attempt; the fail transactions are `failed` below) (runs only; a check counts the
    /// history's ok, fail and info).
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The clients' attempts and retries, the transactions given up (fail) and the aborted
    /// attempts by cause (runs only).
    #[serde(flatten)]
    pub retries: Retries,
    /// The CPU time of the nodes' processes over the run (summed, through their status; an
    /// embedded cluster's: this process's), per ok transaction (runs only).
    #[serde(flatten)]
    pub cpu: CpuCost,
    /// The history file.
    pub history: Option<String>,
    /// History events.
    pub events: u64,
    /// Keys whose lists were read back.
    pub keys: u64,
    /// The check of the history against the lists.
    pub check: history::CheckReport,
    /// The check found no violation.
    pub pass: bool,
}

/// `redt workload run append`: `cfg`'s clients (its keys, lengths, ratio, clients per node,
/// duration, seed; `cfg.history` the history file) on fresh keys, then the history checked
/// against the lists read back.
///
/// # Errors
/// No init record; lists too small for `cfg`; writing the history; no commit at all.
pub async fn run(target: &Target, cfg: &AppendConfig, cluster: &str) -> Result<AppendReport, String> {
    let mut init = meta::read::<AppendInit>(target, WorkloadKind::Append)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Append, cluster))?;
    let schema = target.table(&init.params.table)?.clone();
    let clients = cfg.clients_per_node * target.topo.nodes.len();
    if clients == 0 {
        return Err("--clients-per-node must be at least 1".into());
    }
    check_fits(&schema, cfg, clients)?;
    // The run's keys are reserved before its first append.
    let run = init.runs;
    init.runs += 1;
    meta::write(target, &init).await?;
    let history = HistoryWriter::new(cfg.history.as_deref())?;
    let stop = Arc::new(AtomicBool::new(false));
    let meter = Arc::new(Meter::default());
    let submit = Submit::remote(target.client.clone(), target.topo.clone());
    let running = cfg.clients(schema.id, init.params.run_base(run)).spawn(
        &target.topo,
        &submit,
        &stop,
        history,
        meter.counting(),
    );
    let measured =
        measure(&meter, &stop, &target.cpu_source(), Duration::ZERO, cfg.duration, &cfg.interval, cfg.progress).await;
    stop.store(true, Ordering::Relaxed);
    let events = running.finish().await?.events;
    let measured = measured?;
    let elapsed = measured.elapsed;
    let outcomes = meter.outcomes(elapsed);
    require_commits("the list-append run", &outcomes, elapsed, "see `redt status` and the nodes' logs")?;
    let mut r = check_events(target, &schema, &events).await?;
    r.run = Some(run);
    r.clients = clients;
    r.duration_s = elapsed.as_secs_f64();
    r.outcomes = outcomes;
    r.retries = meter.retries(cfg.retry.retries);
    r.cpu = measured.cpu;
    r.history = cfg.history.as_ref().map(|h| h.display().to_string());
    Ok(r)
}

/// Reads the lists of every key `events` names back and checks the history against them.
async fn check_events(
    target: &Target,
    schema: &redt_proto::TableSchema,
    events: &[Event],
) -> Result<AppendReport, String> {
    let mut keys: Vec<u64> = Vec::new();
    for e in events {
        for m in e.value.as_array().into_iter().flatten() {
            match Mop::from_json(m)? {
                Mop::Append(k, _) | Mop::Read(k, _) => keys.push(k),
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let read =
        target.records(keys.iter().map(|&key| RecordOp::Get { table: schema.id, key }).collect(), &|_| {}).await?;
    let finals: BTreeMap<u64, Vec<u64>> = keys
        .iter()
        .zip(read)
        .map(|(&k, r)| (k, r.and_then(|c| c.into_iter().next()).map(|c| list_items(&c)).unwrap_or_default()))
        .collect();
    let check = history::check(events, &finals)?;
    Ok(AppendReport {
        workload: "append".into(),
        topology: target.topo.name.clone(),
        run: None,
        clients: 0,
        duration_s: 0.0,
        outcomes: Outcomes::default(),
        retries: Retries::default(),
        cpu: CpuCost::default(),
        history: None,
        events: events.len() as u64,
        keys: keys.len() as u64,
        pass: check.valid,
        check,
    })
}

/// `redt workload check append --history FILE`: the history a run wrote, against the lists of
/// every key it names as the cluster holds them now.
///
/// # Errors
/// No init record; an unreadable history; a read that did not commit.
pub async fn check(target: &Target, history: &Path, cluster: &str) -> Result<AppendReport, String> {
    let init = meta::read::<AppendInit>(target, WorkloadKind::Append)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Append, cluster))?;
    let schema = target.table(&init.params.table)?.clone();
    let events = read_history(history)?;
    let mut r = check_events(target, &schema, &events).await?;
    r.history = Some(history.display().to_string());
    r.outcomes = Outcomes { committed: r.check.ok, aborted: r.check.fail, unknown: r.check.info, ..Default::default() };
    Ok(r)
}
