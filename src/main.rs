//! `redt`: the command-line entry point.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use redt_bench::{run_local_ycsb, LocalConfig, LocalReport, YcsbConfig};
use redt_proto::Topology;
use std::path::PathBuf;
use std::time::Duration;

/// Geo-distributed transactions: one-sided RDMA inside data centers, QUIC between them
/// (RedT, PVLDB 16(6), 2023).
#[derive(Parser, Debug)]
#[command(name = "redt", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks.
    #[command(subcommand)]
    Bench(Bench),
    /// Topology files.
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// One DC, no WAN: the in-DC data path (executors, verbs, records, index, ring, replay).
    Local(LocalArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Loads and validates a topology file and prints a summary.
    Check {
        /// The topology file.
        file: PathBuf,
    },
}

#[derive(Args, Debug)]
struct LocalArgs {
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
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// The embedded default topology, compiled in so `redt` runs from any directory.
const DEFAULT_TOPOLOGY: &str = include_str!("../configs/default.yaml");

fn load_topology(path: Option<&PathBuf>) -> Result<Topology> {
    Ok(match path {
        Some(p) => Topology::load(p)?,
        None => Topology::from_yaml("configs/default.yaml (embedded)", DEFAULT_TOPOLOGY)?,
    })
}

fn bench_local(a: &LocalArgs) -> Result<()> {
    if a.workload != "ycsb" {
        bail!("unknown workload `{}` for `bench local` (known: ycsb)", a.workload);
    }
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.write_ratio) {
        bail!("--write-ratio must be in [0, 1], got {}", a.write_ratio);
    }
    if a.theta < 0.0 || !a.theta.is_finite() {
        bail!("--theta must be a finite number ≥ 0, got {}", a.theta);
    }
    if a.ops == 0 {
        bail!("--ops must be at least 1");
    }
    let topo = load_topology(a.config.as_ref())?;
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
        ycsb: YcsbConfig { ops_per_txn: a.ops, theta: a.theta, write_ratio: a.write_ratio },
        seed: a.seed,
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

fn config_check(file: &std::path::Path) -> Result<()> {
    let t = Topology::load(file)?;
    println!(
        "{}: ok — `{}`, epoch {}, {} DCs, {} nodes, {} tables, {} partitions × {} replicas",
        file.display(),
        t.name,
        t.epoch.0,
        t.dcs.len(),
        t.nodes.len(),
        t.tables.len(),
        t.partitions.len(),
        t.partitions.first().map_or(0, |p| p.replicas.len())
    );
    Ok(())
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(Bench::Local(a)) => bench_local(&a),
        Command::Config(ConfigCmd::Check { file }) => config_check(&file),
    }
}
