//! Bank transfers through the lifecycle: `init` writes `accounts` balances (keys
//! `FIRST_KEY..FIRST_KEY + accounts` of the `kv` table, cell 0 a little-endian `i64`); `run`
//! runs transfers from closed-loop clients on every node (`redt bench bank`'s,
//! [`crate::clients::bank`], without read-alls); `check` reads every account back and checks the total is
//! accounts × the initial balance.

use super::meta::{self, Stored};
use super::{measure, require_commits, Meter, Target, WorkloadKind};
use crate::bank::balance;
use crate::clients::bank::BankClients;
use crate::clients::Submit;
use crate::interval::IntervalOptions;
use crate::progress::bar;
use crate::report::{CpuCost, Outcomes, Retries};
use redt_coordinator::RetryPolicy;
use redt_dc_executor::RecordOp;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first account's key in the `kv` table.
pub const FIRST_KEY: u64 = 0;

/// The table the accounts live in.
pub const TABLE: &str = "kv";

/// What `init` loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BankInit {
    /// Accounts (keys `first_key..first_key + accounts`).
    pub accounts: u64,
    /// Initial balance of each.
    pub initial_balance: i64,
    /// The first account's key.
    pub first_key: u64,
    /// The table.
    pub table: String,
}

impl BankInit {
    /// accounts × initial balance.
    pub fn expected_total(&self) -> i64 {
        self.initial_balance.saturating_mul(self.accounts as i64)
    }

    fn keys(&self) -> Vec<u64> {
        (self.first_key..self.first_key + self.accounts).collect()
    }
}

/// `redt workload init bank`: writes every account's balance, then the init record. Returns
/// the record written and the one it replaced, if any.
///
/// # Errors
/// Fewer than 2 accounts; no `kv` table, or one whose cell holds fewer than 8 bytes; a batch
/// that did not commit.
pub async fn init(
    target: &Target,
    accounts: u64,
    initial_balance: i64,
    progress: bool,
) -> Result<(BankInit, Option<BankInit>), String> {
    if accounts < 2 {
        return Err("--accounts must be at least 2 (a transfer needs two)".into());
    }
    let schema = target.table(TABLE)?;
    if schema.cells[0].bytes < 8 {
        return Err(format!("table `{TABLE}`: cell 0 must hold at least 8 bytes for a balance"));
    }
    let tid = schema.id;
    let replaced = meta::read::<BankInit>(target, WorkloadKind::Bank).await?.map(|s| s.params);
    let init = BankInit { accounts, initial_balance, first_key: FIRST_KEY, table: TABLE.into() };
    let ops = init
        .keys()
        .into_iter()
        .map(|key| RecordOp::Put { table: tid, key, cells: vec![initial_balance.to_le_bytes().to_vec()] })
        .collect();
    let b = bar(progress, accounts, "load");
    target.records(ops, &|n| b.set_position(n)).await?;
    b.finish_and_clear();
    meta::write(target, &Stored::new(WorkloadKind::Bank, "redt workload init", init.clone())).await?;
    Ok((init, replaced))
}

/// Parameters of a bank run.
#[derive(Clone, Debug)]
pub struct BankRun {
    /// Measured run time.
    pub duration: Duration,
    /// Warm-up (transfers run, not counted).
    pub warmup: Duration,
    /// Closed-loop clients per node.
    pub clients_per_node: usize,
    /// Largest transfer.
    pub max_transfer: i64,
    /// Seed of the clients' generators.
    pub seed: u64,
    /// Progress bars.
    pub progress: bool,
    /// Interval rows.
    pub interval: IntervalOptions,
    /// How the clients retry a transfer that aborted for a retryable cause.
    pub retry: RetryPolicy,
}

/// What a bank run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `bank`.
    pub workload: String,
    /// Topology name.
    pub topology: String,
    /// Accounts (from the init record).
    pub accounts: u64,
    /// Clients in all.
    pub clients: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// The transfers of the measured interval, as the clients saw them: committed and
    /// unknown transfers, aborted attempts (the abort rate is per attempt); the latency from
    /// a transfer's first attempt to its commit.
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The clients' attempts and retries, the transfers given up and the aborted attempts by
    /// cause.
    #[serde(flatten)]
    pub retries: Retries,
    /// The CPU time of the nodes' processes over the measured interval (summed, through their
    /// status; an embedded cluster's: this process's).
    #[serde(flatten)]
    pub cpu: CpuCost,
}

/// `redt workload run bank`: transfers between the accounts init loaded.
///
/// # Errors
/// No init record; no commit at all; writing the interval rows.
pub async fn run(target: &Target, cfg: &BankRun, cluster: &str) -> Result<RunReport, String> {
    if cfg.clients_per_node == 0 {
        return Err("--clients-per-node must be at least 1".into());
    }
    let mut init = meta::read::<BankInit>(target, WorkloadKind::Bank)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Bank, cluster))?;
    let tid = target.table(&init.params.table)?.id;
    let stop = Arc::new(AtomicBool::new(false));
    let meter = Arc::new(Meter::default());
    let load = BankClients {
        table: tid,
        accounts: Arc::new(init.params.keys()),
        max_transfer: cfg.max_transfer,
        read_ratio: 0.0,
        per_node: cfg.clients_per_node,
        seed: cfg.seed,
        retry: cfg.retry,
    };
    let submit = Submit::remote(target.client.clone(), target.topo.clone());
    let mut tasks = load.spawn(&target.topo, &submit, &stop, meter.counting());
    let measured =
        measure(&meter, &stop, &target.cpu_source(), cfg.warmup, cfg.duration, &cfg.interval, cfg.progress).await;
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    let measured = measured?;
    let elapsed = measured.elapsed;
    let outcomes = meter.outcomes(elapsed);
    init.runs += 1;
    meta::write(target, &init).await?;
    require_commits("the bank run", &outcomes, elapsed, "see `redt status` and the nodes' logs")?;
    Ok(RunReport {
        workload: "bank".into(),
        topology: target.topo.name.clone(),
        accounts: init.params.accounts,
        clients: cfg.clients_per_node * target.topo.nodes.len(),
        duration_s: elapsed.as_secs_f64(),
        outcomes,
        retries: meter.retries(cfg.retry.retries),
        cpu: measured.cpu,
    })
}

/// What `check` found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The init record.
    pub init: BankInit,
    /// Runs recorded since init.
    pub runs: u64,
    /// accounts × initial balance.
    pub expected_total: i64,
    /// The sum of the balances read.
    pub total: i64,
    /// Accounts missing.
    pub missing: u64,
    /// Seconds the check took.
    pub seconds: f64,
    /// No account missing and the total is the expected one.
    pub pass: bool,
}

impl CheckReport {
    /// The verdict in one line.
    pub fn line(&self) -> String {
        if self.pass {
            format!(
                "ok ({} accounts, total {} = {} × {})",
                self.init.accounts, self.total, self.init.accounts, self.init.initial_balance
            )
        } else {
            format!(
                "FAILED (total {}, expected {} = {} × {}; {} accounts missing)",
                self.total, self.expected_total, self.init.accounts, self.init.initial_balance, self.missing
            )
        }
    }
}

/// `redt workload check bank`: reads every account (in as few transactions as the batch
/// limits allow; run it on a quiescent cluster, as the transfers of a run in progress move
/// money between batches) and checks the total.
///
/// # Errors
/// No init record; a read that did not commit.
pub async fn check(target: &Target, cluster: &str) -> Result<CheckReport, String> {
    let init = meta::read::<BankInit>(target, WorkloadKind::Bank)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Bank, cluster))?;
    let tid = target.table(&init.params.table)?.id;
    let t0 = Instant::now();
    let read = target
        .records(init.params.keys().into_iter().map(|key| RecordOp::Get { table: tid, key }).collect(), &|_| {})
        .await?;
    let missing = read.iter().filter(|r| r.is_none()).count() as u64;
    let total: i64 = read.iter().flatten().map(|cells| cells.first().map_or(0, |c| balance(c))).sum();
    let expected = init.params.expected_total();
    Ok(CheckReport {
        runs: init.runs,
        expected_total: expected,
        total,
        missing,
        seconds: t0.elapsed().as_secs_f64(),
        pass: missing == 0 && total == expected,
        init: init.params,
    })
}
