//! `redt bench …`.

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_bench::{
    run_cluster_ycsb, run_local_ycsb, run_remote_ycsb, ClusterConfig, ClusterReport, LocalConfig, LocalReport,
    YcsbConfig,
};
use redt_coordinator::CoordinatorOptions;
use std::path::PathBuf;
use std::time::Duration;

/// `redt bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// YCSB across DCs on the embedded cluster (the main job).
    Ycsb(YcsbArgs),
    /// One DC, no WAN: the in-DC data path alone.
    Local(LocalArgs),
}

/// The YCSB mix knobs shared by both benches.
#[derive(Args, Debug, Clone)]
pub struct MixArgs {
    /// Operations per transaction.
    #[arg(long, default_value_t = 10)]
    ops: usize,
    /// Zipf skew θ (0 = uniform).
    #[arg(long, default_value_t = 0.2)]
    theta: f64,
    /// Fraction of operations that update a cell.
    #[arg(long, default_value_t = 0.5)]
    write_ratio: f64,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl MixArgs {
    fn check(&self) -> Result<YcsbConfig> {
        if !(0.0..=1.0).contains(&self.write_ratio) {
            bail!("--write-ratio must be in [0, 1], got {}", self.write_ratio);
        }
        if self.theta < 0.0 || !self.theta.is_finite() {
            bail!("--theta must be a finite number ≥ 0, got {}", self.theta);
        }
        if self.ops == 0 {
            bail!("--ops must be at least 1");
        }
        Ok(YcsbConfig { ops_per_txn: self.ops, theta: self.theta, write_ratio: self.write_ratio })
    }
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
    /// Certificate directory of the running cluster (with `--cluster`).
    #[arg(long, default_value = "run/certs")]
    certs: PathBuf,
    /// Measured run time.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Concurrent clients per node (closed loop).
    #[arg(long, default_value_t = 4)]
    clients_per_node: usize,
    /// Records per partition.
    #[arg(long, default_value_t = 16384)]
    records_per_partition: u64,
    /// Acknowledge commits only after phase 2.
    #[arg(long)]
    no_early_ack: bool,
    #[command(flatten)]
    mix: MixArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `redt bench local`.
#[derive(Args, Debug)]
pub struct LocalArgs {
    /// Workload (only `ycsb` for now).
    #[arg(long, default_value = "ycsb")]
    workload: String,
    /// Topology file (defaults to the RedT paper's deployment, configs/default.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// DC to run, by name (defaults to the first DC).
    #[arg(long)]
    dc: Option<String>,
    /// Measured run time, e.g. `10s`.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Warm-up excluded from the figures, e.g. `1s`.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Worker threads, each one executor.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Records per partition (default: what the MemStore was sized for, at most 131072).
    #[arg(long)]
    records_per_partition: Option<u64>,
    #[command(flatten)]
    mix: MixArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs a `redt bench` subcommand.
pub fn run(cmd: &BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Local(a) => local(a),
        BenchCmd::Ycsb(a) => ycsb(a),
    }
}

fn ycsb(a: &YcsbArgs) -> Result<()> {
    let ycsb = a.mix.check()?;
    if a.clients_per_node == 0 {
        bail!("--clients-per-node must be at least 1");
    }
    let topo = load_topology(a.cluster.as_deref().or(a.config.as_deref()))?;
    let cfg = ClusterConfig {
        duration: a.duration,
        warmup: a.warmup,
        clients_per_node: a.clients_per_node,
        records_per_partition: a.records_per_partition,
        ycsb,
        options: CoordinatorOptions { early_ack: !a.no_early_ack, ..Default::default() },
        seed: a.mix.seed,
        progress: !a.json,
    };
    let rt = runtime()?;
    if a.cluster.is_some() {
        let r = rt.block_on(run_remote_ycsb(topo, &a.certs, &cfg)).map_err(anyhow::Error::msg)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            println!("redt bench ycsb --cluster — {}, {} clients, {:.1} s", r.topology, r.clients, r.duration_s);
            println!("  committed/s                {:>10.1}", r.committed_per_s);
            println!(
                "  abort rate                 {:>10.4}   ({} committed, {} aborted, {} unknown)",
                r.abort_rate, r.committed, r.aborted, r.unknown
            );
            println!(
                "  latency p50/p99/p999 ms    {:>6.1} / {:.1} / {:.1}   (as the clients see it)",
                r.latency_ms.p50, r.latency_ms.p99, r.latency_ms.p999
            );
        }
        return Ok(());
    }
    let r = rt.block_on(run_cluster_ycsb(topo, &cfg)).map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_cluster(&r);
    }
    Ok(())
}

fn print_cluster(r: &ClusterReport) {
    println!(
        "redt bench ycsb — {} ({} DCs, {} nodes, {:.0} ms RTT), {} clients, early ack {}, {:.1} s",
        r.topology,
        r.dcs,
        r.nodes,
        r.rtt_ms,
        r.clients,
        if r.early_ack { "on" } else { "off" },
        r.duration_s
    );
    println!("  committed/s                {:>10.1}", r.committed_per_s);
    println!(
        "  abort rate                 {:>10.4}   ({} committed, {} aborted, {} unknown)",
        r.abort_rate, r.committed, r.aborted, r.unknown
    );
    println!(
        "  latency p50/p99/p999 ms    {:>6.1} / {:.1} / {:.1}",
        r.latency_ms.p50, r.latency_ms.p99, r.latency_ms.p999
    );
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
    if a.workload != "ycsb" {
        bail!("unknown workload `{}` for `bench local` (known: ycsb)", a.workload);
    }
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let ycsb = a.mix.check()?;
    let topo = load_topology(a.config.as_deref())?;
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
        progress: !a.json,
    };
    let r = run_local_ycsb(&topo, &cfg).map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_local(&r);
    }
    Ok(())
}

fn print_local(r: &LocalReport) {
    let v = &r.verbs_per_txn;
    println!(
        "redt bench local — {} on {} ({} nodes, {} threads, {:.1} s)",
        r.workload, r.dc, r.nodes, r.threads, r.duration_s
    );
    println!("  committed/s              {:>12.0}", r.committed_per_s);
    println!("  abort rate               {:>12.4}", r.abort_rate);
    println!(
        "  latency p50/p99/p999 µs  {:>6.0} / {:.0} / {:.0}",
        r.latency_us.p50, r.latency_us.p99, r.latency_us.p999
    );
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
