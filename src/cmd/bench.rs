//! `redt bench …`.

use super::bench_args::{IdleArgs, OutArgs};
use super::drill::DrillArgs;
use super::{load_topology, runtime, AckArgs, ProtocolArgs};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_bench::cluster::run_remote_ycsb_on;
use redt_bench::report::{Outcomes, Retries};
use redt_bench::ycsb::parse_record_size;
use redt_bench::{
    run_cluster_ycsb, run_embedded_drill_ycsb, run_local_ycsb, topo, ClusterConfig, ClusterReport, Distribution,
    LocalConfig, LocalReport, Workload, YcsbConfig,
};
use redt_coordinator::RetryPolicy;
use redt_proto::{Durability, Protocol, Topology};
use redt_transport::OPERATOR_IDENTITY_NAME;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[path = "compare.rs"]
mod compare;
#[path = "workload.rs"]
pub mod workload;
#[path = "workloads.rs"]
mod workloads;

/// `redt bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// YCSB across DCs on the embedded cluster (the main job): the RedT paper's mix or a
    /// YCSB core workload (a, b, c, d, f).
    Ycsb(Box<YcsbArgs>),
    /// One DC, no WAN: the in-DC data path alone.
    Local(LocalArgs),
    /// Transfers between accounts; after the run, checks the total is unchanged and the
    /// replicas agree (exit status 1 if not).
    Bank(workloads::BankArgs),
    /// Jepsen list-append: writes the history (JSON lines) and checks it against the final
    /// lists (exit status 1 on a violation).
    Append(workloads::AppendArgs),
    /// Runs YCSB once per value of one parameter; writes a CSV and SVG/PNG charts.
    Sweep(workloads::SweepArgs),
    /// TPC-C (all five transactions) on the embedded TPC-C topology; `--check` verifies
    /// the 12 consistency conditions afterwards.
    Tpcc(super::tpcc::TpccArgs),
    /// Runs one workload under each commit protocol in turn (a fresh embedded cluster
    /// each, same topology, seed, clients and duration) and prints one table: throughput,
    /// abort rate, latency, inter-DC round trips and messages per committed read-write
    /// inter-DC transaction, as ratios to RedT, beside the RedT paper's Table 2.
    Compare(compare::CompareArgs),
    /// A legitimate client beside a flood of one kind of request a client certificate may
    /// send, on a running cluster (`redt cluster up`): commits kept, p50 and p99 ratios, what
    /// the attackers got, the nodes' CPU.
    Attack(super::attack::AttackArgs),
    /// The cost of the gRPC client API against the native QUIC client: the same key/value
    /// transactions through each path in turn on one embedded cluster (committed/s, p50,
    /// p99, CPU per committed transaction, and ratios to the native path).
    Api(ApiArgs),
}

/// `redt bench api`.
#[derive(Args, Debug)]
pub struct ApiArgs {
    /// Topology file of the embedded cluster; it needs a `kv` table (default:
    /// configs/local-fast.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Closed-loop clients per node, for each path.
    #[arg(long, default_value_t = 4)]
    clients_per_node: usize,
    /// Measured time of each path in each round.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Unmeasured time of each path before the first round.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    /// Rounds; each runs every path once (native-quic, grpc, grpc-reserved).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    /// Keys of the `kv` table the transactions draw from (one read, one 16-byte write).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(2..))]
    keys: u64,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    protocol: ProtocolArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn api(a: &ApiArgs) -> Result<()> {
    if a.clients_per_node == 0 {
        bail!("--clients-per-node must be at least 1");
    }
    let config = a.config.clone().unwrap_or_else(|| PathBuf::from("configs/local-fast.yaml"));
    let topo = load_topology(Some(&config))?;
    let cfg = redt_bench::api::ApiConfig {
        clients_per_node: a.clients_per_node,
        duration: a.duration,
        warmup: a.warmup,
        rounds: a.rounds as usize,
        keys: a.keys,
        seed: a.seed,
        options: a.protocol.options(),
        progress: !a.json,
    };
    let r = runtime()?.block_on(redt_bench::api::run_api_compare(topo, &cfg)).map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "redt bench api — {} ({} DCs, {} nodes, {:.0} ms RTT), {} clients per path, {} rounds of {:.0} s per path",
        r.topology, r.dcs, r.nodes, r.rtt_ms, r.clients, r.rounds, r.duration_s
    );
    println!(
        "{:<14} {:>10} {:>8} {:>7} {:>9} {:>9} {:>12} {:>7}   ratios to native: committed/s, p50, CPU/txn",
        "path", "committed", "aborted", "failed", "commit/s", "p50 ms", "CPU µs/txn", "cores"
    );
    let base = r.paths.first().cloned();
    for p in &r.paths {
        let ratio = |x: f64, b: f64| if b > 0.0 { format!("{:.2}", x / b) } else { "-".into() };
        let (tput, p50, cpu) = match &base {
            Some(b) => (
                ratio(p.committed_per_s, b.committed_per_s),
                ratio(p.p50_ms, b.p50_ms),
                ratio(p.cpu_us_per_commit, b.cpu_us_per_commit),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<14} {:>10} {:>8} {:>7} {:>9.1} {:>9.2} {:>12.0} {:>7.2}   {tput}, {p50}, {cpu}",
            p.path, p.committed, p.aborted, p.failed, p.committed_per_s, p.p50_ms, p.cpu_us_per_commit, p.cpu_cores
        );
    }
    Ok(())
}

/// The YCSB mix knobs shared by every YCSB bench.
#[derive(Args, Debug, Clone)]
pub struct MixArgs {
    /// Operations per transaction.
    #[arg(long, default_value_t = 10)]
    ops: usize,
    /// Zipf skew θ (0 = uniform) [default: 0.2 for the paper mix, 0.99 for a–f].
    #[arg(long)]
    theta: Option<f64>,
    /// Fraction of operations of the workload's write kind: updates (paper, a, b), inserts
    /// (d), read-modify-writes (f) [default: the workload's].
    #[arg(long)]
    write_ratio: Option<f64>,
    /// Request distribution: zipfian, uniform, latest [default: latest for d, else zipfian].
    #[arg(long)]
    distribution: Option<String>,
    /// Record size CELLSxBYTES, e.g. 10x100 (the default topology's), 20x50 or 4x1KiB (BYTES
    /// a size as the topology file's); the YCSB table of the topology is resized and the
    /// MemStore grown if needed.
    #[arg(long)]
    record_size: Option<String>,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl MixArgs {
    fn check(&self, workload: Workload) -> Result<YcsbConfig> {
        self.check_onto(YcsbConfig::for_workload(workload))
    }

    /// `c` (a workload's defaults, or a property file's settings) with the flags given over
    /// it.
    fn check_onto(&self, mut c: YcsbConfig) -> Result<YcsbConfig> {
        let workload = c.workload;
        if let Some(w) = self.write_ratio {
            if !(0.0..=1.0).contains(&w) {
                bail!("--write-ratio must be in [0, 1], got {w}");
            }
            if workload == Workload::C && w > 0.0 {
                bail!("workload c is read-only: --write-ratio does not apply (use a or b)");
            }
            c.write_ratio = w;
        }
        if let Some(t) = self.theta {
            if t < 0.0 || !t.is_finite() {
                bail!("--theta must be a finite number ≥ 0, got {t}");
            }
            c.theta = t;
        }
        if let Some(d) = &self.distribution {
            c.distribution = Distribution::parse(d).map_err(anyhow::Error::msg)?;
        }
        if self.ops == 0 {
            bail!("--ops must be at least 1");
        }
        c.ops_per_txn = self.ops;
        Ok(c)
    }

    /// Resizes the YCSB table of `topo` if `--record-size` asks.
    fn apply_record_size(&self, topo: &mut Topology, records_per_partition: u64) -> Result<()> {
        if let Some(rs) = &self.record_size {
            let (cells, bytes) = parse_record_size(rs).map_err(anyhow::Error::msg)?;
            topo::set_record_size(topo, cells, bytes, records_per_partition).map_err(anyhow::Error::msg)?;
        }
        Ok(())
    }
}

/// The shape of a cross-DC YCSB transaction.
#[derive(Args, Debug, Clone)]
pub struct ShapeArgs {
    /// Fraction of transactions whose primaries are in more than one DC (the others touch
    /// only partitions whose primary is in the client's DC).
    #[arg(long, default_value_t = 1.0)]
    inter_dc_ratio: f64,
    /// Distinct partitions per transaction.
    #[arg(long, default_value_t = 2)]
    partitions_per_txn: usize,
    /// DCs holding the primaries of an inter-DC transaction's partitions.
    #[arg(long, default_value_t = 2)]
    dcs_per_txn: usize,
}

impl ShapeArgs {
    fn apply(&self, c: &mut YcsbConfig, topo: &Topology) -> Result<()> {
        if !(0.0..=1.0).contains(&self.inter_dc_ratio) {
            bail!("--inter-dc-ratio must be in [0, 1], got {}", self.inter_dc_ratio);
        }
        if self.partitions_per_txn == 0 || self.partitions_per_txn > topo.partitions.len() {
            bail!("--partitions-per-txn must be 1 to {} (the topology's partitions)", topo.partitions.len());
        }
        if self.partitions_per_txn > c.ops_per_txn {
            bail!("--partitions-per-txn {} needs at least as many --ops", self.partitions_per_txn);
        }
        if self.dcs_per_txn == 0 || self.dcs_per_txn > topo.dcs.len() {
            bail!("--dcs-per-txn must be 1 to {} (the topology's DCs)", topo.dcs.len());
        }
        if self.dcs_per_txn > self.partitions_per_txn {
            bail!("--dcs-per-txn {} exceeds --partitions-per-txn {}", self.dcs_per_txn, self.partitions_per_txn);
        }
        c.inter_dc_ratio = self.inter_dc_ratio;
        c.partitions_per_txn = self.partitions_per_txn;
        c.dcs_per_txn = self.dcs_per_txn;
        Ok(())
    }
}

/// The flags `redt bench bank` and `redt bench append` share: the embedded cluster, its
/// clients and their seed, the commit protocol and the output.
#[derive(Args, Debug)]
pub struct KvRunArgs {
    /// Topology file of the embedded cluster (default: configs/default.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Concurrent clients per node (closed loop).
    #[arg(long, default_value_t = 2)]
    clients_per_node: usize,
    #[command(flatten)]
    protocol: ProtocolArgs,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms; 0: every transaction is
    /// attempted once. The clients retry by default, as an application does: under No-Wait
    /// locking most transactions that conflict commit on a later attempt. The abort rate
    /// stays per attempt; the fail rate counts the transactions given up.
    #[arg(long, value_name = "N", default_value_t = RetryPolicy::DEFAULT_RETRIES)]
    retries: u32,
    #[command(flatten)]
    out: OutArgs,
}

impl KvRunArgs {
    /// `--retries` as a policy.
    fn retry(&self) -> RetryPolicy {
        RetryPolicy::with_retries(self.retries)
    }
}

/// The embedded-cluster flags `redt bench ycsb` and `redt bench sweep` share: the clients,
/// the records and the acknowledgement.
#[derive(Args, Debug)]
pub struct YcsbRunArgs {
    /// Concurrent clients per node (closed loop) [default: 4].
    #[arg(long)]
    clients_per_node: Option<usize>,
    /// Records per partition [default: 16384; with --cluster, what the cluster was loaded
    /// with, as its YCSB init record says (`redt workload init ycsb`, `redt cluster up`), and
    /// a different value is refused].
    #[arg(long)]
    records_per_partition: Option<u64>,
    #[command(flatten)]
    ack: AckArgs,
}

/// Default `--clients-per-node` of the YCSB benches.
const YCSB_CLIENTS_PER_NODE: usize = 4;
/// Default `--records-per-partition` of the YCSB benches.
const YCSB_RECORDS_PER_PARTITION: u64 = 16384;
/// Default `--duration` of `redt bench ycsb`.
const YCSB_DURATION: Duration = Duration::from_secs(30);

impl YcsbRunArgs {
    /// `--clients-per-node`, or the default.
    fn clients(&self) -> usize {
        self.clients_per_node.unwrap_or(YCSB_CLIENTS_PER_NODE)
    }

    /// `--records-per-partition`, or the default.
    fn records(&self) -> u64 {
        self.records_per_partition.unwrap_or(YCSB_RECORDS_PER_PARTITION)
    }
}

/// `-P FILE`: a YCSB property file.
#[derive(Args, Debug, Clone)]
pub struct PropsArgs {
    /// YCSB property file, as YCSB's `workloads/workloada` (Java properties: key=value lines,
    /// `#` comments): recordcount (→ --records-per-partition, divided by the partitions),
    /// readproportion/updateproportion/insertproportion/readmodifywriteproportion (→ the
    /// workload and --write-ratio), scanproportion (0 only), requestdistribution,
    /// zipfianconstant (→ --theta), fieldcount/fieldlength (→ --record-size), threadcount (→
    /// --clients-per-node, divided by the nodes), maxexecutiontime (→ --duration). Flags on the
    /// command line override the file. Other keys are refused naming the key, except common
    /// ones that change nothing here (operationcount, workload, db, readallfields=true, …),
    /// which are noted on standard error.
    #[arg(short = 'P', long = "properties", value_name = "FILE")]
    props: Option<PathBuf>,
}

/// A YCSB run's settings: a property file's under the flags'.
pub(crate) struct YcsbSetup {
    /// The mix.
    pub(crate) ycsb: YcsbConfig,
    /// Records per partition, if the flags or the file say.
    pub(crate) records_per_partition: Option<u64>,
    /// Clients per node, if the flags or the file say.
    pub(crate) clients_per_node: Option<usize>,
    /// The measured run time, if the flags or the file say.
    pub(crate) duration: Option<Duration>,
    /// The record size, if the flags or the file say.
    pub(crate) record_size: Option<String>,
}

impl YcsbArgs {
    /// The running cluster's certificate directory: `--certs`, else RUN_DIR/certs.
    fn certs(&self) -> PathBuf {
        self.certs.clone().unwrap_or_else(|| self.drill.run_dir.join("certs"))
    }
}

/// Reads `-P FILE` (if given) and puts the flags over it: `workload` (`--workload`), `mix`,
/// `records` (`--records-per-partition`), `clients` (`--clients-per-node`), `duration`. The
/// file's counts are divided over `topo`'s partitions and nodes. Its notes go to standard
/// error.
///
/// # Errors
/// The file's ([`redt_bench::ycsb_props::parse`]), an unknown workload, the mix flags'.
pub(crate) fn ycsb_setup(
    props: &PropsArgs,
    workload: Option<&str>,
    mix: &MixArgs,
    topo: &Topology,
    (records, clients, duration): (Option<u64>, Option<usize>, Option<Duration>),
) -> Result<YcsbSetup> {
    let file = match &props.props {
        Some(path) => {
            let p = redt_bench::ycsb_props::load(path).map_err(anyhow::Error::msg)?;
            for w in &p.warnings {
                eprintln!("note: {} {w}", path.display());
            }
            p
        }
        None => Default::default(),
    };
    let flag_workload = workload.map(Workload::parse).transpose().map_err(anyhow::Error::msg)?;
    let mut c = YcsbConfig::for_workload(flag_workload.or(file.workload).unwrap_or(Workload::Paper));
    if flag_workload.is_none() {
        if let Some(r) = file.write_ratio {
            c.write_ratio = r;
        }
    }
    if let Some(d) = file.distribution {
        c.distribution = d;
    }
    if let Some(t) = file.theta {
        c.theta = t;
    }
    let table = topo.tables.first().context("the topology declares no table")?;
    let default_size = (table.cells.len(), table.cells.first().map_or(0, |c| c.bytes as usize));
    Ok(YcsbSetup {
        ycsb: mix.check_onto(c)?,
        records_per_partition: records.or(file.records_per_partition(topo.partitions.len())),
        clients_per_node: clients.or(file.clients_per_node(topo.nodes.len())),
        duration: duration.or(file.max_execution_time),
        record_size: mix.record_size.clone().or(file.record_size(default_size)),
    })
}

/// Refuses a `--record-size` other than the running cluster's YCSB table (it cannot change).
fn check_record_size(record_size: Option<&str>, topo: &Topology) -> Result<()> {
    if let Some(rs) = record_size {
        let (cells, bytes) = parse_record_size(rs).map_err(anyhow::Error::msg)?;
        let t = &topo.tables[0];
        if t.cells.len() != cells || t.cells.iter().any(|c| c.bytes as usize != bytes) {
            bail!(
                "record size {rs} differs from the running cluster's table `{}` ({}x{}); it cannot change",
                t.name,
                t.cells.len(),
                t.cells.first().map_or(0, |c| c.bytes)
            );
        }
    }
    Ok(())
}

/// Refuses a `--clients-per-node` of 0.
fn check_clients(clients_per_node: usize) -> Result<()> {
    if clients_per_node == 0 {
        bail!("--clients-per-node must be at least 1");
    }
    Ok(())
}

/// Arguments of `redt bench ycsb`.
#[derive(Args, Debug)]
pub struct YcsbArgs {
    /// Topology file of the embedded cluster (default: the RedT paper's deployment,
    /// configs/default.yaml).
    #[arg(long, conflicts_with = "cluster")]
    config: Option<PathBuf>,
    /// Drive a running cluster (started with `redt cluster up --config F`) instead of an
    /// embedded one.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Certificate directory of the running cluster (with `--cluster`) [default:
    /// RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Measured run time [default: 30s].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Option<Duration>,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    idle: IdleArgs,
    #[command(flatten)]
    run: YcsbRunArgs,
    #[command(flatten)]
    props: PropsArgs,
    /// Commit protocol of the embedded cluster: redt, 2pc-paxos, ep-paxos, tapir,
    /// redt-tcp [default: redt]. Not with `--cluster`: a running cluster's nodes chose
    /// theirs at start-up (`redt node --protocol`).
    #[arg(long, value_name = "NAME", value_parser = clap::value_parser!(Protocol))]
    protocol: Option<Protocol>,
    /// Durability of the embedded cluster's MemStores: `memory`, `disk` (each MemStore
    /// imaged on disk, synced before votes; docs/durability.md), or a list (`memory,disk`):
    /// one run each, then a side-by-side table [default: the topology file's `durability:`].
    /// Disk images go to a fresh directory under the system's temporary directory.
    #[arg(long, value_name = "MODE", value_delimiter = ',', value_parser = parse_durability)]
    durability: Vec<Durability>,
    /// Workload: paper (the RedT paper's mix), or a YCSB core workload a, b, c, d, e, f (e:
    /// 95% scans through the ordered index, 5% inserts), or a list (`c,e`): one run each on
    /// a fresh embedded cluster, then a side-by-side table, with the ordered index's READs
    /// per lookup and per scan of 100 (cache on and off) when e is among them [default:
    /// paper, or what -P's proportions make].
    #[arg(long)]
    workload: Option<String>,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    drill: DrillArgs,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms [default: 0: every
    /// transaction is attempted once, as before clients retried, so the figures of this main
    /// benchmark stay comparable with earlier runs]. The abort rate stays per attempt; the
    /// fail rate counts the transactions given up.
    #[arg(long, value_name = "N", default_value_t = 0)]
    retries: u32,
    #[command(flatten)]
    out: OutArgs,
}

impl YcsbArgs {
    /// The embedded cluster run these arguments ask for: `duration` (after `--warmup`), with
    /// `clients_per_node` clients on every node driving `ycsb` over `records_per_partition`
    /// records per partition.
    fn cluster_config(
        &self,
        duration: Duration,
        clients_per_node: usize,
        records_per_partition: u64,
        ycsb: YcsbConfig,
    ) -> ClusterConfig {
        ClusterConfig {
            duration,
            warmup: self.warmup,
            clients_per_node,
            records_per_partition,
            ycsb,
            options: self.run.ack.options(self.protocol.unwrap_or_default()),
            seed: self.mix.seed,
            progress: !self.out.json,
            interval: self.out.intervals(),
            idle_window: if self.cluster.is_some() { Duration::ZERO } else { self.idle.window() },
            retry: RetryPolicy::with_retries(self.retries),
        }
    }
}

/// Arguments of `redt bench local`.
#[derive(Args, Debug)]
pub struct LocalArgs {
    /// Workload: ycsb (the RedT paper's mix) or a YCSB core workload a, b, c, f (d needs
    /// inserts across DCs: use `bench ycsb`).
    #[arg(long, default_value = "ycsb")]
    workload: String,
    /// Topology file (defaults to the RedT paper's deployment, configs/default.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// DC to run, by name (defaults to the first DC).
    #[arg(long)]
    dc: Option<String>,
    /// Measured run time, e.g. `10s`.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up excluded from the figures, e.g. `1s`.
    #[arg(long, default_value = "1s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    idle: IdleArgs,
    /// Worker threads, each one executor.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Records per partition (default: what the MemStore was sized for, at most 131072).
    #[arg(long)]
    records_per_partition: Option<u64>,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    out: OutArgs,
}

/// Runs a `redt bench` subcommand.
pub fn run(cmd: &BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Local(a) => local(a),
        BenchCmd::Attack(a) => super::attack::run(a),
        BenchCmd::Api(a) => api(a),
        BenchCmd::Ycsb(a) => ycsb(a),
        BenchCmd::Bank(a) => workloads::bank(a),
        BenchCmd::Append(a) => workloads::append(a),
        BenchCmd::Sweep(a) => workloads::sweep(a),
        BenchCmd::Tpcc(a) => super::tpcc::run(a),
        BenchCmd::Compare(a) => compare::compare(a),
    }
}

fn ycsb(a: &YcsbArgs) -> Result<()> {
    if let Some(list) = a.workload.as_deref().filter(|w| w.contains(',')) {
        return ycsb_workloads(a, list);
    }
    if let (Some(_), Some(p)) = (&a.cluster, a.protocol) {
        bail!(
            "--protocol {p} cannot apply to a running cluster (--cluster): its nodes run the protocol they were \
             started with, chosen by `redt node --protocol NAME` (or `redt cluster up --protocol NAME`)"
        );
    }
    if a.cluster.is_some() && a.idle.given() {
        bail!(
            "--idle-window measures the embedded cluster's idle CPU: with --cluster the CPU comes from the \
             nodes' status over the measured interval, and there is no idle window"
        );
    }
    if a.cluster.is_some() && !a.durability.is_empty() {
        bail!(
            "--durability cannot apply to a running cluster (--cluster): its nodes use the `durability:` of the \
             topology file they were started with"
        );
    }
    let mut topo = load_topology(a.cluster.as_deref().or(a.config.as_deref()))?;
    if let [one] = a.durability[..] {
        topo.durability = one;
    }
    let setup = ycsb_setup(
        &a.props,
        a.workload.as_deref(),
        &a.mix,
        &topo,
        (a.run.records_per_partition, a.run.clients_per_node, a.duration),
    )?;
    let mut ycsb = setup.ycsb;
    let clients_per_node = setup.clients_per_node.unwrap_or(YCSB_CLIENTS_PER_NODE);
    check_clients(clients_per_node)?;
    let duration = setup.duration.unwrap_or(YCSB_DURATION);
    a.shape.apply(&mut ycsb, &topo)?;
    let rt = runtime()?;
    // With --cluster: the records the cluster holds, as its init record says.
    let mut records_per_partition = setup.records_per_partition.unwrap_or(YCSB_RECORDS_PER_PARTITION);
    let mut target = None;
    if let Some(file) = &a.cluster {
        check_record_size(setup.record_size.as_deref(), &topo)?;
        let flag = format!(" --cluster {}", file.display());
        let t = rt.block_on(async { redt_bench::workload::Target::connect(topo.clone(), &a.certs()) });
        let t = t.map_err(anyhow::Error::msg)?;
        let init = rt
            .block_on(redt_bench::workload::ycsb::settle_records(&t, setup.records_per_partition, &flag))
            .map_err(anyhow::Error::msg)?;
        match init {
            Some(init) => records_per_partition = init.params.records_per_partition,
            None => eprintln!(
                "note: the cluster has no YCSB init record; assuming {records_per_partition} records per partition \
                 (`redt workload init ycsb{flag}` loads and records them)"
            ),
        }
        target = Some(t);
    } else if let Some(rs) = &setup.record_size {
        let (cells, bytes) = parse_record_size(rs).map_err(anyhow::Error::msg)?;
        topo::set_record_size(&mut topo, cells, bytes, records_per_partition).map_err(anyhow::Error::msg)?;
    }
    let cfg = a.cluster_config(duration, clients_per_node, records_per_partition, ycsb);
    let drill = super::drill::bench_plan(&a.drill, a.cluster.is_some(), &topo, duration)?;
    if drill.is_some() && a.out.asked_for_intervals() {
        bail!("--interval / --interval-csv do not apply to a drill: its timeline has the rows (--timeline-csv FILE)");
    }
    if a.drill.no_failover && drill.is_none() {
        bail!("--no-failover applies to a drill: add --drill PLAN (or --kill / --cut)");
    }
    if let (Some(plan), None) = (&drill, &a.cluster) {
        let cfg = ClusterConfig {
            options: super::drill::failover_for_drill(cfg.options.clone(), !a.drill.no_failover, &topo),
            ..cfg
        };
        let quiet = Arc::new(|_: &redt_bench::drill::LogLine| {});
        let r = rt.block_on(run_embedded_drill_ycsb(topo, &cfg, plan.clone(), quiet)).map_err(anyhow::Error::msg)?;
        a.out.emit(serde_json::to_string_pretty(&r)?, || {
            let run = &r.run;
            println!(
                "redt bench ycsb --drill — {}, protocol {}, {} clients, {:.1} s",
                run.topology, r.protocol, run.clients, run.duration_s
            );
            print_mix(&run.mix, 0);
            print_outcomes(&run.outcomes, "   (as the clients see it)");
            print_retries(&run.retries);
            println!("{}", run.cpu.line());
            super::drill::print_embedded(&r.drill);
        })?;
        let title = format!("redt bench ycsb --drill — {}", r.run.topology);
        let outputs = (a.drill.timeline_csv.as_deref(), a.drill.chart.as_deref());
        return super::drill::finish_embedded(&r.drill, outputs, &title, !a.out.json);
    }
    if let Some(plan) = drill {
        let r = rt.block_on(super::drill::run_bench(
            topo,
            &a.certs(),
            OPERATOR_IDENTITY_NAME,
            &cfg,
            plan,
            &a.drill.run_dir,
        ))?;
        a.out.emit(serde_json::to_string_pretty(&r)?, || {
            let run = &r.run;
            println!("redt bench ycsb --cluster — {}, {} clients, {:.1} s", run.topology, run.clients, run.duration_s);
            print_mix(&run.mix, 0);
            print_outcomes(&run.outcomes, "   (as the clients see it)");
            print_retries(&run.retries);
            println!("{}   (the nodes' processes; – when one restarted)", run.cpu.line());
            super::drill::print(&r.drill, true);
        })?;
        return super::drill::finish_bench(&r, &a.drill, !a.out.json);
    }
    if let Some(target) = &target {
        let keys = Arc::new(redt_bench::cluster::KeySpace::new(topo.partitions.len() as u64, records_per_partition));
        let r = rt.block_on(run_remote_ycsb_on(target, &cfg, keys)).map_err(anyhow::Error::msg)?;
        a.out.emit(serde_json::to_string_pretty(&r)?, || {
            println!("redt bench ycsb --cluster — {}, {} clients, {:.1} s", r.topology, r.clients, r.duration_s);
            print_mix(&r.mix, 0);
            print_outcomes(&r.outcomes, "   (as the clients see it)");
            print_retries(&r.retries);
            println!("{}   (the nodes' processes)", r.cpu.line());
        })?;
        let hint = format!(
            "a cluster holding fewer than {records_per_partition} records per partition aborts every transaction \
             that names a missing one (`redt workload init ycsb --records-per-partition N` loads N and records it)"
        );
        return redt_bench::workload::require_commits(
            "the YCSB run",
            &r.outcomes,
            Duration::from_secs_f64(r.duration_s),
            &hint,
        )
        .map_err(anyhow::Error::msg);
    }
    if a.durability.len() > 1 {
        if drill.is_some() {
            bail!("--durability with a list compares plain runs: drop --drill, or give one durability");
        }
        let mut runs = Vec::new();
        for &d in &a.durability {
            let mut t = topo.clone();
            t.durability = d;
            let r = rt.block_on(run_cluster_ycsb(t, &cfg)).map_err(anyhow::Error::msg)?;
            runs.push((d, r));
        }
        return a.out.emit(serde_json::to_string_pretty(&durability_json(&runs))?, || print_durability(&runs));
    }
    let r = rt.block_on(run_cluster_ycsb(topo, &cfg)).map_err(anyhow::Error::msg)?;
    a.out.emit(serde_json::to_string_pretty(&r)?, || print_cluster(&r))
}

/// `redt bench ycsb --workload A,B,…`: one plain run per workload on a fresh embedded
/// cluster (same topology, clients, seed and shape), then committed/s side by side; with
/// workload e among them, the ordered index's READ cost ([`redt_bench::dex::measure`]).
fn ycsb_workloads(a: &YcsbArgs, list: &str) -> Result<()> {
    if a.cluster.is_some() || a.drill.drill.is_some() || a.drill.kill.is_some() || a.durability.len() > 1 {
        bail!("--workload with a list compares plain runs of the embedded cluster: drop --cluster, --drill, --kill and a --durability list");
    }
    let mut topo = load_topology(a.config.as_deref())?;
    if let [one] = a.durability[..] {
        topo.durability = one;
    }
    let rt = runtime()?;
    let mut runs = Vec::new();
    let mut dex = None;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let setup = ycsb_setup(
            &a.props,
            Some(name),
            &a.mix,
            &topo,
            (a.run.records_per_partition, a.run.clients_per_node, a.duration),
        )?;
        let mut ycsb = setup.ycsb;
        let clients_per_node = setup.clients_per_node.unwrap_or(YCSB_CLIENTS_PER_NODE);
        check_clients(clients_per_node)?;
        a.shape.apply(&mut ycsb, &topo)?;
        let records_per_partition = setup.records_per_partition.unwrap_or(YCSB_RECORDS_PER_PARTITION);
        let mut t = topo.clone();
        if let Some(rs) = &setup.record_size {
            let (cells, bytes) = parse_record_size(rs).map_err(anyhow::Error::msg)?;
            topo::set_record_size(&mut t, cells, bytes, records_per_partition).map_err(anyhow::Error::msg)?;
        }
        if ycsb.workload == Workload::E && dex.is_none() {
            let d =
                redt_bench::dex::measure(&t, records_per_partition, 10_000, a.mix.seed).map_err(anyhow::Error::msg)?;
            dex = Some(d);
        }
        let cfg =
            a.cluster_config(setup.duration.unwrap_or(YCSB_DURATION), clients_per_node, records_per_partition, ycsb);
        let r = rt.block_on(run_cluster_ycsb(t, &cfg)).map_err(anyhow::Error::msg)?;
        runs.push((name.to_string(), r));
    }
    let json = serde_json::json!({
        "runs": runs.iter().map(|(w, r)| serde_json::json!({ "workload": w, "report": r })).collect::<Vec<_>>(),
        "ordered_index": dex,
    });
    a.out.emit(serde_json::to_string_pretty(&json)?, || {
        for (w, r) in &runs {
            println!("== workload: {w}");
            print_cluster(r);
            println!();
        }
        let base = runs.first().map_or(0.0, |(_, r)| r.outcomes.committed_per_s);
        println!("workload   committed/s   vs first   abort rate   p50 ms   p99 ms   CPU µs/txn");
        for (w, r) in &runs {
            let o = &r.outcomes;
            let ratio = if base > 0.0 { o.committed_per_s / base } else { 0.0 };
            println!(
                "{:<8} {:>13.1} {:>9.2}x {:>11.3} {:>8.1} {:>8.1} {:>12}",
                w,
                o.committed_per_s,
                ratio,
                o.abort_rate,
                o.latency_ms.p50,
                o.latency_ms.p99,
                cpu_us_cell(&r.cpu)
            );
        }
        if let Some(d) = &dex {
            println!();
            println!(
                "ordered index (DEX): partition 0's B+-tree, {} keys, {} levels, {} lookups and {} scans per handle",
                d.keys, d.height, d.samples, d.samples
            );
            println!("  inner-node cache   READs per lookup   READs per scan of 100");
            println!("  on (warm)          {:>16.2}   {:>21.2}", d.cache_on.per_lookup, d.cache_on.per_scan_100);
            println!("  off                {:>16.2}   {:>21.2}", d.cache_off.per_lookup, d.cache_off.per_scan_100);
        }
    })
}

/// `--durability` of `redt bench ycsb`: `memory` or `disk`.
fn parse_durability(s: &str) -> std::result::Result<Durability, String> {
    s.parse()
}

/// The runs of `bench ycsb --durability A,B` as JSON: `[{durability, report}]`.
fn durability_json(runs: &[(Durability, redt_bench::ClusterReport)]) -> serde_json::Value {
    runs.iter().map(|(d, r)| serde_json::json!({ "durability": d.to_string(), "report": r })).collect::<Vec<_>>().into()
}

/// Each run of `bench ycsb --durability A,B`, then committed/s and latency side by side with
/// each run's ratio to the first.
fn print_durability(runs: &[(Durability, redt_bench::ClusterReport)]) {
    for (d, r) in runs {
        println!("== durability: {d}");
        print_cluster(r);
        println!();
    }
    let base = runs.first().map_or(0.0, |(_, r)| r.outcomes.committed_per_s);
    println!("durability   committed/s   vs first   p50 ms   p99 ms   CPU µs/txn");
    for (d, r) in runs {
        let o = &r.outcomes;
        let ratio = if base > 0.0 { o.committed_per_s / base } else { 0.0 };
        println!(
            "{:<10} {:>13.1} {:>9.2}x {:>8.1} {:>8.1} {:>12}",
            d.to_string(),
            o.committed_per_s,
            ratio,
            o.latency_ms.p50,
            o.latency_ms.p99,
            cpu_us_cell(&r.cpu)
        );
    }
}

/// A run's CPU µs per committed transaction for a side-by-side table (`–`: not measured).
fn cpu_us_cell(c: &redt_bench::report::CpuCost) -> String {
    c.cpu_us_per_committed.map_or_else(|| "–".to_string(), |x| format!("{x:.0}"))
}

/// The lines of `o` every cluster report shows (committed/s, abort rate and counts,
/// latency in ms), `latency_note` after the latency.
fn print_outcomes(o: &Outcomes, latency_note: &str) {
    let [committed, aborts, latency] = o.lines();
    println!("{committed}\n{aborts}\n{latency}{latency_note}");
}

/// The lines of `r` every report of clients that may retry shows (the fail rate and the
/// attempts, the aborted attempts by cause), after its outcomes.
fn print_retries(r: &Retries) {
    for line in r.lines() {
        println!("{line}");
    }
}

/// One line describing the mix (and the inserts of workload D).
fn print_mix(m: &redt_bench::ycsb::MixReport, inserted: u64) {
    let what = match m.workload.as_str() {
        "d" => "inserts",
        "e" => "inserts (the rest scans)",
        "f" => "read-modify-writes",
        "c" => "writes",
        _ => "updates",
    };
    println!(
        "  mix                        workload {}: {} ops/txn, {} θ {}, {:.0}% {what}; {} partitions in {} DCs, {:.0}% inter-DC; records {}×{} B{}",
        m.workload,
        m.ops_per_txn,
        m.distribution,
        m.theta,
        m.write_ratio * 100.0,
        m.partitions_per_txn,
        m.dcs_per_txn,
        m.inter_dc_ratio * 100.0,
        m.record_cells,
        m.record_cell_bytes,
        if matches!(m.workload.as_str(), "d" | "e") { format!("; {inserted} inserted") } else { String::new() }
    );
}

fn print_cluster(r: &ClusterReport) {
    println!(
        "redt bench ycsb — {} ({} DCs, {} nodes, {:.0} ms RTT), protocol {}, {} clients, early ack {}, {:.1} s",
        r.topology,
        r.dcs,
        r.nodes,
        r.rtt_ms,
        r.protocol,
        r.clients,
        if r.early_ack { "on" } else { "off" },
        r.duration_s
    );
    print_mix(&r.mix, r.inserted);
    print_outcomes(&r.outcomes, "");
    print_retries(&r.retries);
    println!("{}", r.cpu.line());
    println!("  per committed transaction (RedT Table 2):");
    println!(
        "    {:<9} {:>10} {:>14} {:>16} {:>16}",
        "class", "committed", "inter-DC msgs", "inter-DC RTTs", "client RTTs"
    );
    for (name, c) in &r.classes {
        if c.committed + c.aborted + c.unknown == 0 {
            continue;
        }
        println!(
            "    {:<9} {:>10} {:>14.2} {:>16.2} {:>16.2}",
            name,
            c.committed,
            c.inter_dc_messages_per_txn,
            c.inter_dc_round_trips_per_txn,
            c.client_round_trips_per_txn
        );
    }
    let v = &r.verbs_per_txn;
    println!(
        "  RDMA verbs per txn         {:.1} (read {:.1}, write {:.1}, cas {:.1}, faa {:.1}, masked-cas {:.1}, masked-faa {:.1}; {:.1} doorbells)",
        v.total, v.read, v.write, v.cas, v.faa, v.masked_cas, v.masked_faa, v.doorbells
    );
}

fn local(a: &LocalArgs) -> Result<()> {
    let workload = Workload::parse(&a.workload).map_err(anyhow::Error::msg)?;
    if workload == Workload::D {
        bail!("workload d inserts records, which `bench local` (a fixed key set in one DC) does not do: use `redt bench ycsb --workload d`");
    }
    if workload == Workload::E {
        bail!("workload e scans and inserts, which `bench local` does not do: use `redt bench ycsb --workload e`");
    }
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let ycsb = a.mix.check(workload)?;
    let mut topo = load_topology(a.config.as_deref())?;
    a.mix.apply_record_size(&mut topo, a.records_per_partition.unwrap_or(0))?;
    let dc = match &a.dc {
        Some(name) => topo.dcs.iter().find(|d| &d.name == name).with_context(|| format!("no DC named `{name}`"))?.id,
        None => topo.dcs[0].id,
    };
    let cfg = LocalConfig {
        dc,
        duration: a.duration,
        warmup: a.warmup,
        threads: a.threads,
        records_per_partition: a.records_per_partition,
        ycsb,
        seed: a.mix.seed,
        progress: !a.out.json,
        interval: a.out.intervals(),
        idle_window: a.idle.window(),
    };
    let r = run_local_ycsb(&topo, &cfg).map_err(anyhow::Error::msg)?;
    a.out.emit(serde_json::to_string_pretty(&r)?, || print_local(&r))
}

fn print_local(r: &LocalReport) {
    let v = &r.verbs_per_txn;
    println!(
        "redt bench local — {} on {} ({} nodes, {} threads, {:.1} s)",
        r.workload, r.dc, r.nodes, r.threads, r.duration_s
    );
    print_mix(&r.mix, 0);
    println!("  committed/s              {:>12.0}", r.committed_per_s);
    println!("  abort rate               {:>12.4}", r.abort_rate);
    println!(
        "  latency p50/p99/p999 µs  {:>6.0} / {:.0} / {:.0}",
        r.latency_us.p50, r.latency_us.p99, r.latency_us.p999
    );
    println!("{}", r.cpu.line());
    println!(
        "  verbs per txn            read {:.2}  write {:.2}  cas {:.2}  faa {:.2}  masked-cas {:.2}  masked-faa {:.2}  (doorbells {:.2})",
        v.read, v.write, v.cas, v.faa, v.masked_cas, v.masked_faa, v.doorbells
    );
    println!("  index READs per lookup   {:>12.3}", r.index_reads_per_lookup);
    println!(
        "  MemStore per record      {} B record + {:.1} B index for {} B payload = {:.3} B per payload byte",
        r.memstore.record_bytes,
        r.memstore.index_bytes_per_record,
        r.memstore.payload_bytes,
        r.memstore.bytes_per_payload_byte
    );
    println!("  records loaded           {:>12}", r.records_loaded);
}
