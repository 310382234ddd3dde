//! `redt bench tpcc`: TPC-C on the embedded cluster of configs/tpcc.yaml.

use super::{runtime, ProtocolArgs};
use anyhow::{bail, Result};
use clap::Args;
use redt_bench::tpcc::{run_tpcc, Scale, TpccConfig, DEFAULT_TERMINALS};
use redt_proto::Topology;
use std::path::PathBuf;
use std::time::Duration;

/// The embedded TPC-C topology (the RedT paper's deployment with the TPC-C tables).
pub const TPCC_TOPOLOGY: &str = include_str!("../../configs/tpcc.yaml");

/// Arguments of `redt bench tpcc`.
#[derive(Args, Debug)]
pub struct TpccArgs {
    /// Warehouses. Warehouse w lives in partition (w - 1) % 8; the first four have their
    /// primaries in dc1..dc4.
    #[arg(long, default_value_t = 4)]
    warehouses: u32,
    /// Measured run time.
    #[arg(long, default_value = "60s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    idle: super::bench_args::IdleArgs,
    /// Closed-loop terminals per warehouse [default: 4; 10, the spec's, with --think].
    /// Without think times every terminal submits back to back, and every Payment of a
    /// warehouse write-locks its W_YTD cell for about one 40 ms inter-DC round trip (two
    /// when it aborts): the warehouse commits at most ~25 Payments/s however many
    /// terminals it has, and terminals beyond ~4 only add No-Wait aborts (measured over
    /// 20 s on 4 warehouses: 2 terminals 2,743 tpmC, 4: 3,223, 10: 3,099 with 87% of the
    /// Payment attempts aborted). The 2 cores are not the limit (the run uses about half).
    #[arg(long)]
    terminals: Option<usize>,
    /// Keying and think times of clause 5.2.5 (New-Order 18 s + 12 s, ...): caps tpmC at
    /// 12.86 per warehouse per 10 terminals.
    #[arg(long)]
    think: bool,
    /// After the run, check the 12 consistency conditions of clause 3.3.2 (exit status 1
    /// if one fails).
    #[arg(long)]
    check: bool,
    /// Items, customers per district and new orders per district, `ITEMS,CUSTOMERS,NEW`
    /// (default: the spec's 100000,3000,900). Smaller scales are for tests.
    #[arg(long)]
    scale: Option<String>,
    /// Topology file (default: the embedded configs/tpcc.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    protocol: ProtocolArgs,
    /// Seed of the loader and the terminals.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    out: super::bench_args::OutArgs,
    #[command(flatten)]
    drill: super::drill::EmbeddedDrillArgs,
}

/// Parses `--scale ITEMS,CUSTOMERS,NEW`.
pub(crate) fn parse_scale(s: &str) -> Result<Scale> {
    let v: Vec<u32> = s.split(',').map(|x| x.trim().parse()).collect::<std::result::Result<_, _>>()?;
    let [items, customers, new_orders] = v[..] else { bail!("--scale wants ITEMS,CUSTOMERS,NEW, got `{s}`") };
    let scale = Scale { items, customers, new_orders };
    scale.validate().map_err(anyhow::Error::msg)?;
    Ok(scale)
}

/// Runs `redt bench tpcc`.
pub fn run(a: &TpccArgs) -> Result<()> {
    let topo = match &a.config {
        Some(p) => Topology::load(p)?,
        None => Topology::from_yaml("configs/tpcc.yaml (embedded)", TPCC_TOPOLOGY)?,
    };
    let drill = a.drill.plan(&topo, a.duration)?;
    if drill.is_some() && a.out.asked_for_intervals() {
        bail!("--interval / --interval-csv do not apply to a drill: its timeline has the rows (--timeline-csv FILE)");
    }
    let json = a.out.json();
    let cfg = TpccConfig {
        warehouses: a.warehouses,
        scale: a.scale.as_deref().map(parse_scale).transpose()?.unwrap_or(Scale::SPEC),
        terminals_per_warehouse: a.terminals.unwrap_or(if a.think { 10 } else { DEFAULT_TERMINALS }),
        duration: a.duration,
        warmup: a.warmup,
        think: a.think,
        check: a.check,
        seed: a.seed,
        progress: !json,
        options: a.drill.options(a.protocol.options(), &topo),
        drill,
        interval: a.out.intervals(),
        idle_window: a.idle.window(),
        ..TpccConfig::default()
    };
    let r = runtime()?.block_on(run_tpcc(topo, &cfg)).map_err(anyhow::Error::msg)?;
    a.out.emit(serde_json::to_string_pretty(&r)?, || print!("{}", r.text()))?;
    if let Some(d) = &r.drill {
        if !json {
            super::drill::print_embedded(d);
            println!("  TPC-C checks after the drill {}", r.checks_after_drill_line());
            for (rank, c) in r.checks_after_drill.iter().enumerate() {
                if !c.passed {
                    println!("    replica {} of each partition:", rank + 1);
                    for l in c.lines() {
                        println!("      {l}");
                    }
                }
            }
        }
        let title = format!("redt bench tpcc --drill — {}", r.topology);
        super::drill::finish_embedded(d, a.drill.outputs(), &title, !json)?;
        if r.checks_after_drill.iter().any(|c| !c.passed) {
            bail!("TPC-C consistency check after the drill failed: {}", r.checks_after_drill_line());
        }
    }
    if r.check.as_ref().is_some_and(|c| !c.passed) {
        bail!("TPC-C consistency check failed");
    }
    Ok(())
}
