//! `redt bench compare` (a child of `cmd::bench`): one workload under each commit protocol
//! in turn, one table.

use super::super::tpcc::{parse_scale, TPCC_TOPOLOGY};
use super::super::{load_topology, AckArgs};
use super::{check_clients, MixArgs, ShapeArgs};
use anyhow::Result;
use clap::Args;
use redt_bench::compare::{run_compare, CompareConfig, CompareWorkload};
use redt_bench::tpcc::{Scale, TpccConfig, DEFAULT_TERMINALS};
use redt_bench::{ClusterConfig, Workload};
use redt_proto::{Protocol, Topology};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `redt bench compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The protocols to run, in order, comma-separated (each once): redt, 2pc-paxos,
    /// ep-paxos, tapir, redt-tcp. Ratios are relative to redt, or to the first listed
    /// when redt is not.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "redt,2pc-paxos,ep-paxos,tapir,redt-tcp",
        value_parser = clap::value_parser!(Protocol)
    )]
    protocols: Vec<Protocol>,
    /// Workload: ycsb (the RedT paper's mix; also `paper`), a YCSB core workload a, b, c,
    /// d, f, or tpcc (the `bench tpcc` driver: --warehouses, --terminals, --scale; the
    /// YCSB mix and shape flags and --clients-per-node do not apply).
    #[arg(long, default_value = "ycsb")]
    workload: String,
    /// Topology file of the embedded clusters (default: configs/default.yaml; for tpcc,
    /// configs/tpcc.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Move every node to this port (to run beside another cluster on this host).
    #[arg(long)]
    port: Option<u16>,
    /// Measured run time per protocol.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up per protocol, excluded from the figures.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    idle: super::IdleArgs,
    /// Concurrent clients per node (closed loop; YCSB).
    #[arg(long, default_value_t = 4)]
    clients_per_node: usize,
    /// Records per partition (YCSB).
    #[arg(long, default_value_t = 16384)]
    records_per_partition: u64,
    #[command(flatten)]
    ack: AckArgs,
    /// TPC-C warehouses.
    #[arg(long, default_value_t = 4)]
    warehouses: u32,
    /// TPC-C closed-loop terminals per warehouse [default: 4].
    #[arg(long)]
    terminals: Option<usize>,
    /// TPC-C items, customers per district and new orders per district,
    /// `ITEMS,CUSTOMERS,NEW` (default: the spec's 100000,3000,900, loaded once per protocol).
    #[arg(long)]
    scale: Option<String>,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Print the whole comparison (every run's full report, the rows and their ratios) as
    /// one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Append one row per protocol (figures, ratios, the paper's figures) to this CSV file
    /// (header written when the file is new).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// Runs `redt bench compare`.
pub fn compare(a: &CompareArgs) -> Result<()> {
    redt_bench::compare::check_protocols(&a.protocols).map_err(|e| anyhow::anyhow!("--protocols: {e}"))?;
    let tpcc = a.workload.trim().eq_ignore_ascii_case("tpcc");
    // Each run replaces the protocol with its own.
    let options = a.ack.options(Protocol::default());
    let (mut topo, workload) = if tpcc {
        let topo = match &a.config {
            Some(p) => Topology::load(p)?,
            None => Topology::from_yaml("configs/tpcc.yaml (embedded)", TPCC_TOPOLOGY)?,
        };
        let cfg = TpccConfig {
            warehouses: a.warehouses,
            scale: a.scale.as_deref().map(parse_scale).transpose()?.unwrap_or(Scale::SPEC),
            terminals_per_warehouse: a.terminals.unwrap_or(DEFAULT_TERMINALS),
            duration: a.duration,
            warmup: a.warmup,
            seed: a.mix.seed,
            progress: !a.json,
            options,
            idle_window: a.idle.window(),
            ..TpccConfig::default()
        };
        (topo, CompareWorkload::Tpcc(cfg))
    } else {
        let w = Workload::parse(&a.workload).map_err(|e| anyhow::anyhow!("{e} (or tpcc)"))?;
        let mut ycsb = a.mix.check(w)?;
        check_clients(a.clients_per_node)?;
        let mut topo = load_topology(a.config.as_deref())?;
        a.shape.apply(&mut ycsb, &topo)?;
        a.mix.apply_record_size(&mut topo, a.records_per_partition)?;
        let cfg = ClusterConfig {
            duration: a.duration,
            warmup: a.warmup,
            clients_per_node: a.clients_per_node,
            records_per_partition: a.records_per_partition,
            ycsb,
            options,
            seed: a.mix.seed,
            progress: !a.json,
            interval: Default::default(),
            idle_window: a.idle.window(),
            // One attempt per transaction: the protocols compared as before clients retried.
            retry: redt_coordinator::RetryPolicy::none(),
        };
        (topo, CompareWorkload::Ycsb(cfg))
    };
    if let Some(port) = a.port {
        redt_bench::topo::set_port(&mut topo, port);
    }
    if tpcc {
        redt_bench::tpcc::schema::check_topology(&topo).map_err(anyhow::Error::msg)?;
    }
    let cfg = CompareConfig { protocols: a.protocols.clone(), workload };
    let quiet = a.json;
    let r = run_compare(&topo, &cfg, &mut |i, n, p| {
        if !quiet {
            eprintln!("protocol {}/{n}: {p}", i + 1);
        }
    })
    .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", r.table());
    }
    if let Some(path) = &a.csv {
        r.append_csv(path).map_err(anyhow::Error::msg)?;
        if !a.json {
            println!("  ({} rows appended to {})", r.rows.len(), path.display());
        }
    }
    Ok(())
}
