//! `redt workload init|run|check {ycsb,tpcc,bank,append}` (a child of `cmd::bench`,
//! whose YCSB flags it shares): the workload lifecycle against a running cluster
//! (`--cluster F`), or, for `run` without `--cluster`, init, run and check on an embedded
//! cluster in one process. The work is `redt_bench::workload`'s.

use super::super::{load_topology, runtime};
use super::{
    check_clients, check_record_size, print_mix, print_outcomes, print_retries, ycsb_setup, MixArgs, OutArgs,
    PropsArgs, ShapeArgs, YcsbRunArgs, YCSB_CLIENTS_PER_NODE, YCSB_DURATION, YCSB_RECORDS_PER_PARTITION,
};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use redt_bench::tpcc::{Scale, TpccConfig, DEFAULT_TERMINALS};
use redt_bench::workload::{self as wl, Target};
use redt_bench::{AppendConfig, ClusterConfig};
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster, RetryPolicy};
use redt_proto::Topology;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `redt workload` subcommands.
#[derive(Subcommand, Debug)]
pub enum WorkloadCmd {
    /// Loads a workload's data into a running cluster (`--cluster F`) through the cluster's own
    /// transactions, and records what it loaded in the cluster (the `kv` table, under a key
    /// reserved per workload), so `run` and `check` know it.
    #[command(subcommand)]
    Init(InitCmd),
    /// Runs a workload's clients against the data `init` loaded (refusing flags that do not
    /// match it). Without `--cluster`: starts an embedded cluster, inits, runs and checks it
    /// in one process. Exits non-zero when nothing committed.
    #[command(subcommand)]
    Run(RunCmd),
    /// Checks a workload's invariants on what the cluster holds now (any time after init):
    /// YCSB every record present and well-formed, TPC-C the 12 consistency conditions, bank
    /// the total, list-append the history of a run (`--history FILE`). Exits non-zero on a
    /// violation.
    #[command(subcommand)]
    Check(CheckCmd),
}

/// `redt workload init …`.
#[derive(Subcommand, Debug)]
pub enum InitCmd {
    /// YCSB: records per partition of the topology's first table, every cell written.
    Ycsb(YcsbInitArgs),
    /// TPC-C: the database of N warehouses (clause 4.3), as `redt bench tpcc` loads it.
    Tpcc(TpccInitArgs),
    /// Bank: accounts with an initial balance in the `kv` table.
    Bank(BankInitArgs),
    /// List-append: records the table (lists start empty; each run takes fresh keys).
    Append(ClusterArgs),
}

/// `redt workload run …`.
#[derive(Subcommand, Debug)]
pub enum RunCmd {
    /// YCSB: `redt bench ycsb --cluster`'s clients on the records init loaded.
    Ycsb(Box<YcsbRunCmdArgs>),
    /// TPC-C: `redt bench tpcc`'s terminals on the warehouses init loaded.
    Tpcc(TpccRunArgs),
    /// Bank: transfers between the accounts init loaded.
    Bank(BankRunArgs),
    /// List-append: Jepsen's list-append on fresh keys; `--history FILE` saves the history
    /// for a later `check append --history FILE`.
    Append(AppendRunArgs),
}

/// `redt workload check …`.
#[derive(Subcommand, Debug)]
pub enum CheckCmd {
    /// YCSB: every record init loaded is present, each cell one byte repeated, as many as
    /// init recorded.
    Ycsb(ClusterArgs),
    /// TPC-C: the 12 consistency conditions of clause 3.3.2.
    Tpcc(ClusterArgs),
    /// Bank: the balances add up to accounts × initial balance.
    Bank(ClusterArgs),
    /// List-append: a run's history (`redt workload run append --history FILE`) against the
    /// lists the cluster holds now.
    Append(AppendCheckArgs),
}

/// The running cluster and how to print.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// The running cluster's topology file (`redt cluster up --config F`).
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Run directory of a cluster started by `redt cluster up` (its certificates are taken
    /// from there unless --certs says otherwise).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Certificate directory of the running cluster (its client certificate) [default:
    /// RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl ClusterArgs {
    /// The certificate directory: --certs, else RUN_DIR/certs.
    fn certs(&self) -> PathBuf {
        self.certs.clone().unwrap_or_else(|| self.run_dir.join("certs"))
    }
}

/// Records per partition `redt workload run ycsb` loads into an embedded cluster when neither
/// the flag nor `-P` says: init writes through transactions (about 1,750 records/s on 2 cores
/// at 40 ms RTT), so the bench's 16,384 would take over a minute.
const EMBEDDED_YCSB_RECORDS: u64 = 1000;

/// Where `run` goes: a running cluster, or an embedded one.
#[derive(Args, Debug, Clone)]
pub struct RunTarget {
    /// The running cluster's topology file (`redt cluster up --config F`) [default: an
    /// embedded cluster of --config, initialised (YCSB: 1,000 records per partition unless
    /// --records-per-partition or -P says), run and checked in this process].
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Run directory of a cluster started by `redt cluster up` (its certificates are taken
    /// from there unless --certs says otherwise).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Certificate directory of the running cluster (its client certificate) [default:
    /// RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Without --cluster: the embedded cluster's topology file [default: configs/default.yaml;
    /// configs/tpcc.yaml for tpcc].
    #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
    config: Option<PathBuf>,
}

impl RunTarget {
    /// The certificate directory: --certs, else RUN_DIR/certs.
    fn certs(&self) -> PathBuf {
        self.certs.clone().unwrap_or_else(|| self.run_dir.join("certs"))
    }
}

/// Arguments of `redt workload init ycsb`.
#[derive(Args, Debug)]
pub struct YcsbInitArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Records per partition [default: 16384, or -P's recordcount divided by the partitions].
    #[arg(long)]
    records_per_partition: Option<u64>,
    #[command(flatten)]
    props: PropsArgs,
}

/// Arguments of `redt workload run ycsb`.
#[derive(Args, Debug)]
pub struct YcsbRunCmdArgs {
    #[command(flatten)]
    target: RunTarget,
    /// Measured run time [default: 30s, or -P's maxexecutiontime].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Option<Duration>,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    run: YcsbRunArgs,
    #[command(flatten)]
    props: PropsArgs,
    /// Workload: paper (the RedT paper's mix) or a YCSB core workload a, b, c, d, f
    /// [default: paper, or what -P's proportions make].
    #[arg(long)]
    workload: Option<String>,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms [default: 0: every
    /// transaction is attempted once, as `redt bench ycsb` does by default, so the figures
    /// stay comparable with earlier runs]. The abort rate stays per attempt; the fail rate
    /// counts the transactions given up.
    #[arg(long, value_name = "N", default_value_t = 0)]
    retries: u32,
    #[command(flatten)]
    out: OutArgs,
}

/// Arguments of `redt workload init tpcc`.
#[derive(Args, Debug)]
pub struct TpccInitArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    db: TpccDbArgs,
}

/// The TPC-C database: warehouses, scale, seed.
#[derive(Args, Debug, Clone)]
pub struct TpccDbArgs {
    /// Warehouses [default: 4; with `run --cluster`, the cluster's, and a different value is
    /// refused].
    #[arg(long)]
    warehouses: Option<u32>,
    /// Items, customers per district and new orders per district, `ITEMS,CUSTOMERS,NEW`
    /// (default: the spec's 100000,3000,900; everything goes through transactions, so a
    /// small scale loads much faster).
    #[arg(long)]
    scale: Option<String>,
    /// Seed of the loader (and of the NURand constants runs use).
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl TpccDbArgs {
    fn scale(&self) -> Result<Scale> {
        Ok(self.scale.as_deref().map(super::super::tpcc::parse_scale).transpose()?.unwrap_or(Scale::SPEC))
    }
}

/// Arguments of `redt workload run tpcc`.
#[derive(Args, Debug)]
pub struct TpccRunArgs {
    #[command(flatten)]
    target: RunTarget,
    #[command(flatten)]
    db: TpccDbArgs,
    /// Closed-loop terminals per warehouse [default: 4; 10, the spec's, with --think].
    #[arg(long)]
    terminals: Option<usize>,
    /// Keying and think times of clause 5.2.5.
    #[arg(long)]
    think: bool,
    /// Measured run time.
    #[arg(long, default_value = "60s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    out: OutArgs,
}

/// Arguments of `redt workload init bank`.
#[derive(Args, Debug)]
pub struct BankInitArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    accounts: BankAccountsArgs,
}

/// The bank's accounts.
#[derive(Args, Debug, Clone)]
pub struct BankAccountsArgs {
    /// Accounts (keys 0..N of the `kv` table) [default: 64; with `run --cluster`, the
    /// cluster's, and a different value is refused].
    #[arg(long)]
    accounts: Option<u64>,
    /// Initial balance of every account.
    #[arg(long, default_value_t = 1000)]
    balance: i64,
}

/// Arguments of `redt workload run bank`.
#[derive(Args, Debug)]
pub struct BankRunArgs {
    #[command(flatten)]
    target: RunTarget,
    #[command(flatten)]
    accounts: BankAccountsArgs,
    /// Largest amount of one transfer.
    #[arg(long, default_value_t = 100)]
    max_transfer: i64,
    /// Concurrent clients per node (closed loop).
    #[arg(long, default_value_t = 2)]
    clients_per_node: usize,
    /// Measured run time.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms; 0: every transaction is
    /// attempted once. The clients retry by default, as an application does: under No-Wait
    /// locking most transactions that conflict commit on a later attempt. An unknown outcome
    /// is never submitted again. The abort rate stays per attempt; the fail rate counts the
    /// transactions given up.
    #[arg(long, value_name = "N", default_value_t = RetryPolicy::DEFAULT_RETRIES)]
    retries: u32,
    #[command(flatten)]
    out: OutArgs,
}

/// Arguments of `redt workload run append`.
#[derive(Args, Debug)]
pub struct AppendRunArgs {
    #[command(flatten)]
    target: RunTarget,
    /// Run time (the history covers all of it).
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Write the history here (Jepsen's JSON lines, what Elle reads), for `redt workload check
    /// append --history FILE` later [default: kept in memory, checked at the end of the run
    /// only].
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// Active keys at any time.
    #[arg(long, default_value_t = 16)]
    keys: usize,
    /// Appends after which a key is retired for a fresh one (a list holds 255 items).
    #[arg(long, default_value_t = 128)]
    max_writes_per_key: u32,
    /// Most micro-operations per transaction.
    #[arg(long, default_value_t = 4)]
    max_txn_len: usize,
    /// Fraction of micro-operations that are reads.
    #[arg(long, default_value_t = 0.5)]
    read_ratio: f64,
    /// Concurrent clients per node (closed loop).
    #[arg(long, default_value_t = 2)]
    clients_per_node: usize,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms; 0: every transaction is
    /// attempted once. The clients retry by default, as an application does: under No-Wait
    /// locking most transactions that conflict commit on a later attempt. An unknown outcome
    /// is never submitted again. The abort rate stays per attempt; the fail rate counts the
    /// transactions given up.
    #[arg(long, value_name = "N", default_value_t = RetryPolicy::DEFAULT_RETRIES)]
    retries: u32,
    #[command(flatten)]
    out: OutArgs,
}

/// Arguments of `redt workload check append`.
#[derive(Args, Debug)]
pub struct AppendCheckArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The history a run wrote (`redt workload run append --history FILE`).
    #[arg(long, value_name = "FILE")]
    history: PathBuf,
}

/// Runs a `redt workload` subcommand.
pub fn run(cmd: &WorkloadCmd) -> Result<()> {
    match cmd {
        WorkloadCmd::Init(c) => init(c),
        WorkloadCmd::Run(c) => run_cmd(c),
        WorkloadCmd::Check(c) => check(c),
    }
}

/// ` --cluster F`, as the commands this one suggests need it.
fn flag(cluster: &Path) -> String {
    format!(" --cluster {}", cluster.display())
}

/// The running cluster of `a`, connected; `what` (`init ycsb`) names the command in the
/// error when `--cluster` is missing.
fn connect(a: &ClusterArgs, what: &str) -> Result<(Target, String)> {
    let Some(file) = &a.cluster else {
        bail!(
            "`redt workload {what}` needs --cluster F, the topology file of a running cluster (`redt cluster up \
             --config F`): an embedded cluster lasts one command only, so `redt workload run {}` without --cluster \
             starts one, initialises it, runs and checks it",
            what.split_whitespace().last().unwrap_or_default()
        );
    };
    let topo = load_topology(Some(file))?;
    let target = Target::connect(topo, &a.certs()).map_err(anyhow::Error::msg)?;
    Ok((target, flag(file)))
}

/// `1 run`, `2 runs`.
fn runs(n: u64) -> String {
    format!("{n} run{}", if n == 1 { "" } else { "s" })
}

/// Prints `value` as JSON.
fn print_json(value: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn init(cmd: &InitCmd) -> Result<()> {
    let rt = runtime()?;
    let _guard = rt.enter();
    match cmd {
        InitCmd::Ycsb(a) => {
            let (target, _) = connect(&a.cluster, "init ycsb")?;
            let file = match &a.props.props {
                Some(p) => redt_bench::ycsb_props::load(p).map_err(anyhow::Error::msg)?,
                None => Default::default(),
            };
            let table =
                target.topo.tables.first().map(|t| (t.cells.len(), t.cells.first().map_or(0, |c| c.bytes as usize)));
            check_record_size(file.record_size(table.unwrap_or_default()).as_deref(), &target.topo)?;
            let rpp = a
                .records_per_partition
                .or(file.records_per_partition(target.topo.partitions.len()))
                .unwrap_or(YCSB_RECORDS_PER_PARTITION);
            let r = rt.block_on(wl::ycsb::init(&target, rpp, !a.cluster.json)).map_err(anyhow::Error::msg)?;
            if a.cluster.json {
                return print_json(&serde_json::to_value(&r)?);
            }
            print_ycsb_init(&r, &target.topo);
        }
        InitCmd::Tpcc(a) => {
            let (target, _) = connect(&a.cluster, "init tpcc")?;
            let r = rt
                .block_on(wl::tpcc::init(
                    &target,
                    a.db.warehouses.unwrap_or(4),
                    a.db.scale()?,
                    a.db.seed,
                    !a.cluster.json,
                ))
                .map_err(anyhow::Error::msg)?;
            if a.cluster.json {
                return print_json(&serde_json::to_value(&r)?);
            }
            print_tpcc_init(&r, &target.topo);
        }
        InitCmd::Bank(a) => {
            let (target, _) = connect(&a.cluster, "init bank")?;
            let accounts = a.accounts.accounts.unwrap_or(64);
            let (init, replaced) = rt
                .block_on(wl::bank::init(&target, accounts, a.accounts.balance, !a.cluster.json))
                .map_err(anyhow::Error::msg)?;
            if a.cluster.json {
                return print_json(&serde_json::to_value(&init)?);
            }
            print_bank_init(&init, replaced.as_ref(), &target.topo);
        }
        InitCmd::Append(a) => {
            let (target, _) = connect(a, "init append")?;
            let init = rt.block_on(wl::append::init(&target)).map_err(anyhow::Error::msg)?;
            if a.json {
                return print_json(&serde_json::to_value(&init)?);
            }
            println!(
                "redt workload init append — {}: lists of up to {} items in table `{}`, keys from {:#x} (each run \
                 takes fresh ones)",
                target.topo.name, init.list_capacity, init.table, init.first_key
            );
        }
    }
    Ok(())
}

fn print_ycsb_init(r: &wl::ycsb::InitReport, topo: &Topology) {
    let i = &r.init;
    println!(
        "redt workload init ycsb — {}: {} records ({} per partition × {} partitions, {}×{} B) in {:.1} s",
        topo.name, r.records, i.records_per_partition, i.partitions, i.cells, i.cell_bytes, r.seconds
    );
    if let Some(old) = &r.replaced {
        println!(
            "  replaced the earlier init record ({} records per partition{})",
            old.records_per_partition,
            if old.cells_written { "" } else { ", loaded by `redt cluster up`" }
        );
    }
}

fn print_tpcc_init(r: &wl::tpcc::InitReport, topo: &Topology) {
    let s = r.init.scale;
    println!(
        "redt workload init tpcc — {}: {} warehouses ({} items, {} customers and {} new orders per district), {} rows \
         and {} records created ahead for New-Order in {:.1} s",
        topo.name, r.init.warehouses, s.items, s.customers, s.new_orders, r.rows, r.preallocated, r.seconds
    );
}

fn print_bank_init(i: &wl::bank::BankInit, replaced: Option<&wl::bank::BankInit>, topo: &Topology) {
    println!(
        "redt workload init bank — {}: {} accounts of {} (total {}) in table `{}`",
        topo.name,
        i.accounts,
        i.initial_balance,
        i.expected_total(),
        i.table
    );
    if let Some(old) = replaced {
        println!("  replaced the earlier init record ({} accounts of {})", old.accounts, old.initial_balance);
    }
}

/// Runs `f` on an embedded cluster of `topo`, reached as a running one; the cluster stops
/// after.
fn embedded<T, F>(rt: &tokio::runtime::Runtime, topo: Topology, f: impl FnOnce(Target) -> F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    rt.block_on(async {
        let cluster = EmbeddedCluster::start(topo, CoordinatorOptions::default())
            .await
            .map_err(|e| anyhow::anyhow!("starting the embedded cluster: {e}"))?;
        let target = Target::embedded(&cluster).map_err(anyhow::Error::msg);
        let out = match target {
            Ok(t) => f(t).await,
            Err(e) => Err(e),
        };
        cluster.shutdown();
        out
    })
}

fn run_cmd(cmd: &RunCmd) -> Result<()> {
    let rt = runtime()?;
    let _guard = rt.enter();
    match cmd {
        RunCmd::Ycsb(a) => run_ycsb(&rt, a),
        RunCmd::Bank(a) => run_bank(&rt, a),
        RunCmd::Append(a) => run_append(&rt, a),
        RunCmd::Tpcc(a) => run_tpcc(&rt, a),
    }
}

fn run_ycsb(rt: &tokio::runtime::Runtime, a: &YcsbRunCmdArgs) -> Result<()> {
    let t = &a.target;
    let topo = load_topology(t.cluster.as_deref().or(t.config.as_deref()))?;
    let setup = ycsb_setup(
        &a.props,
        a.workload.as_deref(),
        &a.mix,
        &topo,
        (a.run.records_per_partition, a.run.clients_per_node, a.duration),
    )?;
    check_record_size(setup.record_size.as_deref(), &topo)?;
    let mut ycsb = setup.ycsb;
    a.shape.apply(&mut ycsb, &topo)?;
    let clients_per_node = setup.clients_per_node.unwrap_or(YCSB_CLIENTS_PER_NODE);
    check_clients(clients_per_node)?;
    let cfg = ClusterConfig {
        duration: setup.duration.unwrap_or(YCSB_DURATION),
        warmup: a.warmup,
        clients_per_node,
        records_per_partition: 0,
        ycsb,
        options: a.run.ack.options(Default::default()),
        seed: a.mix.seed,
        progress: !a.out.json,
        interval: a.out.intervals(),
        idle_window: Duration::ZERO,
        retry: RetryPolicy::with_retries(a.retries),
    };
    let print = |r: &redt_bench::RemoteReport, title: &str| {
        a.out.emit(serde_json::to_string_pretty(r)?, || {
            println!("{title} — {}, {} clients, {:.1} s", r.topology, r.clients, r.duration_s);
            print_mix(&r.mix, 0);
            print_outcomes(&r.outcomes, "   (as the clients see it)");
            print_retries(&r.retries);
            println!("{}", cpu_line(&r.cpu, title));
        })
    };
    if let Some(file) = &t.cluster {
        let target = Target::connect(topo, &t.certs()).map_err(anyhow::Error::msg)?;
        let r = rt
            .block_on(wl::ycsb::run(&target, &cfg, setup.records_per_partition, &flag(file)))
            .map_err(anyhow::Error::msg)?;
        return print(&r, "redt workload run ycsb");
    }
    let rpp = setup.records_per_partition.unwrap_or(EMBEDDED_YCSB_RECORDS);
    let quiet = a.out.json;
    let (init, r, check) = embedded(rt, topo, |target| async move {
        let init = wl::ycsb::init(&target, rpp, !quiet).await.map_err(anyhow::Error::msg)?;
        let r = wl::ycsb::run(&target, &cfg, None, "").await.map_err(anyhow::Error::msg)?;
        let check = wl::ycsb::check(&target, "", !quiet).await.map_err(anyhow::Error::msg)?;
        Ok((init, r, check))
    })?;
    if a.out.json {
        return print_json(&serde_json::json!({ "init": init, "run": r, "check": check }));
    }
    println!(
        "embedded cluster: init {} records in {:.1} s; check {}",
        init.records,
        init.seconds,
        ycsb_check_line(&check)
    );
    print(&r, "redt workload run ycsb (embedded)")?;
    if !check.pass {
        bail!("YCSB check failed: {}", ycsb_check_line(&check));
    }
    Ok(())
}

fn ycsb_check_line(c: &wl::ycsb::CheckReport) -> String {
    if c.pass {
        format!(
            "ok ({} records of {}×{} B present and well-formed, {} per partition as init recorded)",
            c.records, c.init.cells, c.init.cell_bytes, c.init.records_per_partition
        )
    } else {
        format!("FAILED ({} of {} records missing, {} malformed)", c.missing, c.records, c.malformed)
    }
}

fn bank_run_cfg(a: &BankRunArgs) -> Result<wl::bank::BankRun> {
    check_clients(a.clients_per_node)?;
    if a.max_transfer < 1 {
        bail!("--max-transfer must be at least 1");
    }
    Ok(wl::bank::BankRun {
        duration: a.duration,
        warmup: a.warmup,
        clients_per_node: a.clients_per_node,
        max_transfer: a.max_transfer,
        seed: a.seed,
        progress: !a.out.json,
        interval: a.out.intervals(),
        retry: RetryPolicy::with_retries(a.retries),
    })
}

fn print_bank_run(out: &OutArgs, r: &wl::bank::RunReport, title: &str) -> Result<()> {
    out.emit(serde_json::to_string_pretty(r)?, || {
        println!("{title} — {}, {} accounts, {} clients, {:.1} s", r.topology, r.accounts, r.clients, r.duration_s);
        print_outcomes(&r.outcomes, "   (as the clients see it)");
        print_retries(&r.retries);
        println!("{}", cpu_line(&r.cpu, title));
    })
}

/// The CPU line of a `redt workload run` report titled `title`: a running cluster's is its
/// nodes' processes' (summed from their status), an embedded one's (`… (embedded)`) this
/// process's.
fn cpu_line(cpu: &redt_bench::report::CpuCost, title: &str) -> String {
    if title.ends_with("(embedded)") {
        cpu.line()
    } else {
        format!("{}   (the nodes' processes)", cpu.line())
    }
}

fn run_bank(rt: &tokio::runtime::Runtime, a: &BankRunArgs) -> Result<()> {
    let cfg = bank_run_cfg(a)?;
    let t = &a.target;
    let topo = load_topology(t.cluster.as_deref().or(t.config.as_deref()))?;
    if let Some(file) = &t.cluster {
        let target = Target::connect(topo, &t.certs()).map_err(anyhow::Error::msg)?;
        if let Some(asked) = a.accounts.accounts {
            let init = rt.block_on(wl::meta::read::<wl::bank::BankInit>(&target, wl::WorkloadKind::Bank));
            if let Some(init) = init.map_err(anyhow::Error::msg)? {
                if init.params.accounts != asked {
                    bail!(
                        "--accounts {asked} does not match the cluster: it was initialised with {} accounts (at {}). \
                         Leave the flag out to run on those, or load {asked}: `redt workload init bank --accounts \
                         {asked}{}`",
                        init.params.accounts,
                        init.initialised_at(),
                        flag(file)
                    );
                }
            }
        }
        let r = rt.block_on(wl::bank::run(&target, &cfg, &flag(file))).map_err(anyhow::Error::msg)?;
        return print_bank_run(&a.out, &r, "redt workload run bank");
    }
    let (accounts, balance) = (a.accounts.accounts.unwrap_or(64), a.accounts.balance);
    let quiet = a.out.json;
    let (r, check) = embedded(rt, topo, |target| async move {
        wl::bank::init(&target, accounts, balance, !quiet).await.map_err(anyhow::Error::msg)?;
        let r = wl::bank::run(&target, &cfg, "").await.map_err(anyhow::Error::msg)?;
        let check = wl::bank::check(&target, "").await.map_err(anyhow::Error::msg)?;
        Ok((r, check))
    })?;
    if a.out.json {
        return print_json(&serde_json::json!({ "run": r, "check": check }));
    }
    print_bank_run(&a.out, &r, "redt workload run bank (embedded)")?;
    println!("  bank check                 {}", check.line());
    if !check.pass {
        bail!("bank check failed: {}", check.line());
    }
    Ok(())
}

fn append_cfg(a: &AppendRunArgs) -> Result<AppendConfig> {
    check_clients(a.clients_per_node)?;
    if a.max_txn_len == 0 {
        bail!("--max-txn-len must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.read_ratio) {
        bail!("--read-ratio must be in [0, 1]");
    }
    Ok(AppendConfig {
        duration: a.duration,
        keys: a.keys,
        max_writes_per_key: a.max_writes_per_key,
        max_txn_len: a.max_txn_len,
        read_ratio: a.read_ratio,
        clients_per_node: a.clients_per_node,
        history: a.history.clone(),
        seed: a.seed,
        progress: !a.out.json,
        interval: a.out.intervals(),
        retry: RetryPolicy::with_retries(a.retries),
        ..AppendConfig::default()
    })
}

fn print_append(r: &wl::append::AppendReport, title: &str) {
    let c = &r.check;
    println!("{title} — {}{}", r.topology, r.run.map(|n| format!(", run {n}")).unwrap_or_default());
    if r.duration_s > 0.0 {
        println!("  clients {}, {:.1} s", r.clients, r.duration_s);
        print_outcomes(&r.outcomes, "");
        print_retries(&r.retries);
        println!("{}", cpu_line(&r.cpu, title));
    }
    println!(
        "  history                    {} events{}; {} keys read back",
        r.events,
        r.history.as_ref().map(|h| format!(" in {h}")).unwrap_or_default(),
        r.keys
    );
    println!(
        "  appends                    {} ok, {} fail, {} info ({} of them visible); {} ok reads",
        c.ok_appends, c.fail_appends, c.info_appends, c.info_appends_visible, c.ok_reads
    );
    for (kind, n) in &c.violations_by_kind {
        println!("    {kind}: {n}");
    }
    for v in &c.violations {
        println!("    {v}");
    }
    println!("  list-append check          {}", if r.pass { "pass" } else { "FAIL" });
}

fn run_append(rt: &tokio::runtime::Runtime, a: &AppendRunArgs) -> Result<()> {
    let cfg = append_cfg(a)?;
    let t = &a.target;
    let topo = load_topology(t.cluster.as_deref().or(t.config.as_deref()))?;
    let r = if let Some(file) = &t.cluster {
        let target = Target::connect(topo, &t.certs()).map_err(anyhow::Error::msg)?;
        rt.block_on(wl::append::run(&target, &cfg, &flag(file))).map_err(anyhow::Error::msg)?
    } else {
        embedded(rt, topo, |target| async move {
            wl::append::init(&target).await.map_err(anyhow::Error::msg)?;
            wl::append::run(&target, &cfg, "").await.map_err(anyhow::Error::msg)
        })?
    };
    let title = if t.cluster.is_some() { "redt workload run append" } else { "redt workload run append (embedded)" };
    a.out.emit(serde_json::to_string_pretty(&r)?, || print_append(&r, title))?;
    if !r.pass {
        bail!("list-append check failed: {} violation kinds (see the report)", r.check.violations_by_kind.len());
    }
    Ok(())
}

fn tpcc_cfg(a: &TpccRunArgs) -> TpccConfig {
    TpccConfig {
        terminals_per_warehouse: a.terminals.unwrap_or(if a.think { 10 } else { DEFAULT_TERMINALS }),
        duration: a.duration,
        warmup: a.warmup,
        think: a.think,
        seed: a.db.seed,
        progress: !a.out.json,
        interval: a.out.intervals(),
        idle_window: Duration::ZERO,
        ..TpccConfig::default()
    }
}

fn print_tpcc_run(out: &OutArgs, r: &wl::tpcc::RunReport, title: &str) -> Result<()> {
    out.emit(serde_json::to_string_pretty(r)?, || {
        println!(
            "{title} — {}, {} warehouses, {} terminals, {:.1} s (+{:.0} s warm-up)",
            r.topology, r.warehouses, r.terminals, r.duration_s, r.warmup_s
        );
        println!("  tpmC (New-Order commits/min)  {:>10.1}", r.tpmc);
        println!("  committed/s                   {:>10.1}   business transactions", r.committed_per_s);
        println!("  abort rate (attempts)         {:>10.4}", r.abort_rate);
        let (cpu_us, cores) = r.cpu.cells();
        let whose = if title.ends_with("(embedded)") { "" } else { "; the nodes' processes" };
        println!("  CPU µs per committed txn      {cpu_us:>10}   (business transactions; {cores}{whose})");
        for l in redt_bench::tpcc::driver::type_table(&r.types) {
            println!("{l}");
        }
    })
}

fn print_tpcc_check(c: &wl::tpcc::CheckOutcome) {
    println!(
        "  consistency (TPC-C 3.3.2): {} — {} records read in {:.1} s ({} warehouses, {} since init)",
        if c.report.passed { "all 12 conditions pass" } else { "FAILED" },
        c.report.records_read,
        c.report.seconds,
        c.init.warehouses,
        runs(c.runs)
    );
    for l in c.report.lines() {
        println!("    {l}");
    }
}

fn run_tpcc(rt: &tokio::runtime::Runtime, a: &TpccRunArgs) -> Result<()> {
    let cfg = tpcc_cfg(a);
    let t = &a.target;
    if let Some(file) = &t.cluster {
        if a.db.scale.is_some() {
            bail!("--scale is init's (`redt workload init tpcc --scale …`): a run uses the scale the cluster was loaded with");
        }
        let topo = load_topology(Some(file))?;
        let target = Target::connect(topo, &t.certs()).map_err(anyhow::Error::msg)?;
        let r = rt.block_on(wl::tpcc::run(&target, &cfg, a.db.warehouses, &flag(file))).map_err(anyhow::Error::msg)?;
        return print_tpcc_run(&a.out, &r, "redt workload run tpcc");
    }
    let topo = match &t.config {
        Some(p) => Topology::load(p)?,
        None => Topology::from_yaml("configs/tpcc.yaml (embedded)", super::super::tpcc::TPCC_TOPOLOGY)?,
    };
    let (warehouses, scale, seed, quiet) = (a.db.warehouses.unwrap_or(4), a.db.scale()?, a.db.seed, a.out.json);
    let (r, check) = embedded(rt, topo, |target| async move {
        wl::tpcc::init(&target, warehouses, scale, seed, !quiet).await.map_err(anyhow::Error::msg)?;
        let r = wl::tpcc::run(&target, &cfg, None, "").await.map_err(anyhow::Error::msg)?;
        let check = wl::tpcc::check(&target, "", !quiet).await.map_err(anyhow::Error::msg)?;
        Ok((r, check))
    })?;
    if a.out.json {
        return print_json(&serde_json::json!({ "run": r, "check": check }));
    }
    print_tpcc_run(&a.out, &r, "redt workload run tpcc (embedded)")?;
    print_tpcc_check(&check);
    if !check.report.passed {
        bail!("TPC-C consistency check failed");
    }
    Ok(())
}

fn check(cmd: &CheckCmd) -> Result<()> {
    let rt = runtime()?;
    let _guard = rt.enter();
    match cmd {
        CheckCmd::Ycsb(a) => {
            let (target, f) = connect(a, "check ycsb")?;
            let c = rt.block_on(wl::ycsb::check(&target, &f, !a.json)).map_err(anyhow::Error::msg)?;
            if a.json {
                print_json(&serde_json::to_value(&c)?)?;
            } else {
                println!("redt workload check ycsb — {}: {}", target.topo.name, ycsb_check_line(&c));
                for p in &c.problems {
                    println!("    {p}");
                }
            }
            if !c.pass {
                bail!("YCSB check failed: {}", ycsb_check_line(&c));
            }
        }
        CheckCmd::Bank(a) => {
            let (target, f) = connect(a, "check bank")?;
            let c = rt.block_on(wl::bank::check(&target, &f)).map_err(anyhow::Error::msg)?;
            if a.json {
                print_json(&serde_json::to_value(&c)?)?;
            } else {
                println!("redt workload check bank — {}: {} ({} since init)", target.topo.name, c.line(), runs(c.runs));
            }
            if !c.pass {
                bail!("bank check failed: {}", c.line());
            }
        }
        CheckCmd::Tpcc(a) => {
            let (target, f) = connect(a, "check tpcc")?;
            let c = rt.block_on(wl::tpcc::check(&target, &f, !a.json)).map_err(anyhow::Error::msg)?;
            if a.json {
                print_json(&serde_json::to_value(&c)?)?;
            } else {
                println!("redt workload check tpcc — {}", target.topo.name);
                print_tpcc_check(&c);
            }
            if !c.report.passed {
                bail!("TPC-C consistency check failed");
            }
        }
        CheckCmd::Append(a) => {
            // A history that is not there is named before any connection is tried.
            std::fs::File::open(&a.history)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", a.history.display()))?;
            let (target, f) = connect(&a.cluster, "check append")?;
            let r = rt.block_on(wl::append::check(&target, &a.history, &f)).map_err(anyhow::Error::msg)?;
            if a.cluster.json {
                print_json(&serde_json::to_value(&r)?)?;
            } else {
                print_append(&r, "redt workload check append");
            }
            if !r.pass {
                bail!(
                    "list-append check failed: {} violation kinds (see the report)",
                    r.check.violations_by_kind.len()
                );
            }
        }
    }
    Ok(())
}
