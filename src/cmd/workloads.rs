//! `redt bench bank`, `redt bench append`, `redt bench sweep` (a child of `cmd::bench`).

use super::super::{load_topology, runtime};
use super::{check_clients, print_outcomes, print_retries, IdleArgs, KvRunArgs, MixArgs, ShapeArgs, YcsbRunArgs};
use anyhow::{bail, Result};
use clap::Args;
use redt_bench::sweep::parse_param;
use redt_bench::{
    run_append, run_bank, run_sweep, AppendConfig, AppendReport, BankConfig, BankReport, ClusterConfig, SweepConfig,
    Workload,
};
use redt_coordinator::RetryPolicy;
use redt_proto::Protocol;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `redt bench bank`.
#[derive(Args, Debug)]
pub struct BankArgs {
    /// Accounts (keys 0..N of the key/value table).
    #[arg(long, default_value_t = 64)]
    accounts: u64,
    /// Initial balance of every account.
    #[arg(long, default_value_t = 1000)]
    balance: i64,
    /// Largest amount of one transfer.
    #[arg(long, default_value_t = 100)]
    max_transfer: i64,
    /// Fraction of transactions that read every account and check the total (at most 64
    /// accounts). Under No-Wait locking read-alls and transfers starve each other: expect
    /// one kind to dominate.
    #[arg(long, default_value_t = 0.0)]
    read_ratio: f64,
    /// Measured run time.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up excluded from the throughput figures (not from the check).
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    /// The key/value table holding the accounts.
    #[arg(long, default_value = "kv")]
    table: String,
    #[command(flatten)]
    idle: IdleArgs,
    #[command(flatten)]
    run: KvRunArgs,
    #[command(flatten)]
    drill: super::super::drill::EmbeddedDrillArgs,
}

/// Arguments of `redt bench append`.
#[derive(Args, Debug)]
pub struct AppendArgs {
    /// Run time (the history covers all of it).
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Write the history here, in Jepsen's JSON-lines format.
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
    /// The key/value table.
    #[arg(long, default_value = "kv")]
    table: String,
    /// Where a client submits: `home` (its own node) or `key-owner` (the node of the primary
    /// replica of the first key its transaction appends to, else reads), so that the
    /// transactions on a key share a coordinator (for `--cc takeover`). The embedded clients
    /// reach any node in-process: the latency shown leaves out the WAN hop a client would
    /// pay to a coordinator in another DC.
    #[arg(long, value_enum, default_value = "home")]
    route: RouteArg,
    #[command(flatten)]
    run: KvRunArgs,
    #[command(flatten)]
    drill: super::super::drill::EmbeddedDrillArgs,
}

/// `--route` of `redt bench append` ([`redt_bench::append::Routing`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum RouteArg {
    /// Each client's own node.
    Home,
    /// The primary of the transaction's first appended (else read) key.
    KeyOwner,
}

/// Arguments of `redt bench sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The workload: ycsb (the RedT paper's mix) or a YCSB core workload a, b, c, d, f.
    #[arg(long, default_value = "ycsb")]
    workload: String,
    /// The swept parameter and its values, NAME=V1,V2,…: rtt (e.g. 10ms,40ms), theta,
    /// write-ratio, inter-dc-ratio, nodes-per-dc, partitions-per-txn, dcs-per-txn, ops,
    /// clients-per-node (e.g. 4,8,16,32: the load, to find each protocol's saturation point).
    #[arg(long)]
    param: String,
    /// Base topology file (default: configs/default.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Move every node to this port (to run beside another cluster on this host).
    #[arg(long)]
    port: Option<u16>,
    /// Measured time per point.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// Warm-up per point, excluded from the figures.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    warmup: Duration,
    #[command(flatten)]
    idle: IdleArgs,
    #[command(flatten)]
    run: YcsbRunArgs,
    /// Commit protocol of the embedded cluster: redt, 2pc-paxos, ep-paxos, tapir, redt-tcp
    /// (`--protocols` runs the sweep under several).
    #[arg(long, value_name = "NAME", default_value_t = Protocol::Redt, value_parser = clap::value_parser!(Protocol))]
    protocol: Protocol,
    /// Run the whole sweep once per protocol of this comma-separated list (same seed,
    /// topology and points), e.g. redt,2pc-paxos,tapir: one CSV with a `protocol` column
    /// and one chart with a curve per protocol [default: just --protocol].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "protocol",
        value_parser = clap::value_parser!(Protocol)
    )]
    protocols: Vec<Protocol>,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Output directory of the CSV and the charts.
    #[arg(long, default_value = "docs/results")]
    out: PathBuf,
    /// File stem of the outputs [default: sweep-<param>].
    #[arg(long)]
    name: Option<String>,
    /// Draw an earlier sweep's curves beside this one's, LABEL=FILE.csv (a CSV this command
    /// wrote for the same parameter, e.g. by another build); repeatable. Its curves are named
    /// `LABEL protocol`.
    #[arg(long, value_name = "LABEL=CSV")]
    overlay: Vec<String>,
    /// Name this sweep's own curves `LABEL protocol` (e.g. `after`, beside an overlay named
    /// `before`).
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn pass_fail(ok: bool) -> &'static str {
    if ok {
        "pass"
    } else {
        "FAIL"
    }
}

/// `redt bench bank`.
pub fn bank(a: &BankArgs) -> Result<()> {
    let run = &a.run;
    check_clients(run.clients_per_node)?;
    if !(0.0..=1.0).contains(&a.read_ratio) {
        bail!("--read-ratio must be in [0, 1]");
    }
    let topo = load_topology(run.config.as_deref())?;
    let drill = a.drill.plan(&topo, a.duration)?;
    let cfg = BankConfig {
        duration: a.duration,
        warmup: a.warmup,
        accounts: a.accounts,
        initial_balance: a.balance,
        max_transfer: a.max_transfer,
        read_ratio: a.read_ratio,
        clients_per_node: run.clients_per_node,
        table: a.table.clone(),
        options: a.drill.options(run.protocol.options(), &topo),
        seed: run.seed,
        progress: !run.out.json,
        drill,
        interval: run.out.intervals(),
        idle_window: a.idle.window(),
        retry: run.retry(),
    };
    let r = runtime()?.block_on(run_bank(topo, &cfg)).map_err(anyhow::Error::msg)?;
    run.out.emit(serde_json::to_string_pretty(&r)?, || print_bank(&r))?;
    if let Some(d) = &r.drill {
        let title = format!("redt bench bank --drill — {}", r.topology);
        super::super::drill::finish_embedded(d, a.drill.outputs(), &title, !run.out.json)?;
    }
    if !r.pass {
        bail!("bank check failed: total or replicas or read-all totals wrong (see the report)");
    }
    Ok(())
}

fn print_bank(r: &BankReport) {
    println!(
        "redt bench bank — {} ({} DCs, {} nodes, {:.0} ms RTT), protocol {}, {} accounts, {} clients, {:.1} s",
        r.topology, r.dcs, r.nodes, r.rtt_ms, r.protocol, r.accounts, r.clients, r.duration_s
    );
    print_outcomes(&r.outcomes, "");
    print_retries(&r.retries);
    println!("{}", r.cpu.line());
    println!(
        "  whole run                  {} transfers committed ({} unknown), {} read-alls",
        r.transfers_committed, r.transfers_unknown, r.reads_committed
    );
    println!(
        "  total unchanged            {:>10}   (expected {}, per replica set {:?})",
        pass_fail(r.total_ok),
        r.expected_total,
        r.totals_by_replica
    );
    println!(
        "  replicas agree             {:>10}   ({} accounts disagree, {} replicas missing, {} locked)",
        pass_fail(r.replicas_agree),
        r.accounts_disagreeing,
        r.replicas_missing,
        r.replicas_locked
    );
    println!(
        "  read-all totals            {:>10}   ({} of {} wrong)",
        if r.reads_committed == 0 { "none" } else { pass_fail(r.reads_ok) },
        r.reads_wrong_total,
        r.reads_committed
    );
    println!("  bank check                 {:>10}", pass_fail(r.pass));
    if let Some(d) = &r.drill {
        super::super::drill::print_embedded(d);
        println!("  bank total after the drill   {} (on the current placement's replicas)", r.check_line());
    }
}

/// `redt bench append`.
pub fn append(a: &AppendArgs) -> Result<()> {
    let run = &a.run;
    check_clients(run.clients_per_node)?;
    if a.max_txn_len == 0 {
        bail!("--max-txn-len must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.read_ratio) {
        bail!("--read-ratio must be in [0, 1]");
    }
    let topo = load_topology(run.config.as_deref())?;
    let drill = a.drill.plan(&topo, a.duration)?;
    if drill.is_some() && run.out.asked_for_intervals() {
        bail!("--interval / --interval-csv do not apply to a drill: its timeline has the rows (--timeline-csv FILE)");
    }
    let cfg = AppendConfig {
        duration: a.duration,
        keys: a.keys,
        max_writes_per_key: a.max_writes_per_key,
        max_txn_len: a.max_txn_len,
        read_ratio: a.read_ratio,
        clients_per_node: run.clients_per_node,
        table: a.table.clone(),
        history: a.history.clone(),
        options: a.drill.options(run.protocol.options(), &topo),
        seed: run.seed,
        progress: !run.out.json,
        drill,
        interval: run.out.intervals(),
        retry: run.retry(),
        routing: match a.route {
            RouteArg::Home => redt_bench::append::Routing::Home,
            RouteArg::KeyOwner => redt_bench::append::Routing::KeyOwner,
        },
    };
    let r = runtime()?.block_on(run_append(topo, &cfg)).map_err(anyhow::Error::msg)?;
    run.out.emit(serde_json::to_string_pretty(&r)?, || print_append(&r))?;
    if let Some(d) = &r.drill {
        let title = format!("redt bench append --drill — {}", r.topology);
        super::super::drill::finish_embedded(d, a.drill.outputs(), &title, !run.out.json)?;
    }
    if !r.pass {
        bail!("list-append check failed: {} violation kinds (see the report)", r.check.violations_by_kind.len());
    }
    Ok(())
}

fn print_append(r: &AppendReport) {
    let (c, o) = (&r.check, &r.outcomes);
    println!(
        "redt bench append — {} ({} DCs, {} nodes, {:.0} ms RTT), protocol {}, {} clients, {:.1} s",
        r.topology, r.dcs, r.nodes, r.rtt_ms, r.protocol, r.clients, r.duration_s
    );
    // Jepsen's words for the outcomes: ok, fail, info; the abort rate is per attempt.
    let [committed, _, latency] = o.lines();
    println!("{committed}");
    println!(
        "  outcomes                   {:>10}   ok, {} fail, {} info (abort rate {:.4} per attempt: {} aborted)",
        o.committed, r.retries.failed, o.unknown, o.abort_rate, o.aborted
    );
    println!("{latency}");
    print_retries(&r.retries);
    println!("{}", r.cpu.line());
    println!(
        "  history                    {} events{}",
        r.events,
        r.history.as_ref().map(|h| format!(" in {h}")).unwrap_or_default()
    );
    println!(
        "  appends                    {} ok, {} fail, {} info ({} of them visible); {} ok reads; {} keys, {} items",
        c.ok_appends, c.fail_appends, c.info_appends, c.info_appends_visible, c.ok_reads, r.keys_used, c.final_items
    );
    println!(
        "  replicas agree             {:>10}   ({} keys disagree)",
        pass_fail(r.keys_disagreeing == 0),
        r.keys_disagreeing
    );
    println!(
        "  history vs final lists     {:>10}   (ok appends present once, no failed append, reads are prefixes, real-time order)",
        pass_fail(c.valid)
    );
    for (kind, n) in &c.violations_by_kind {
        println!("    {kind}: {n}");
    }
    for v in &c.violations {
        println!("    {v}");
    }
    println!("  list-append check          {:>10}", pass_fail(r.pass));
    if let Some(d) = &r.drill {
        super::super::drill::print_embedded(d);
        println!(
            "  list-append after the drill  {} (lists read on the current placement's replicas)",
            pass_fail(r.pass)
        );
    }
}

/// `redt bench sweep`.
pub fn sweep(a: &SweepArgs) -> Result<()> {
    let workload = Workload::parse(&a.workload).map_err(anyhow::Error::msg)?;
    let (param, values) = parse_param(&a.param).map_err(anyhow::Error::msg)?;
    if !a.protocols.is_empty() {
        redt_bench::compare::check_protocols(&a.protocols).map_err(|e| anyhow::anyhow!("--protocols: {e}"))?;
    }
    check_clients(a.run.clients())?;
    let mut ycsb = a.mix.check(workload)?;
    let mut topo = load_topology(a.config.as_deref())?;
    if let Some(port) = a.port {
        redt_bench::topo::set_port(&mut topo, port);
    }
    a.shape.apply(&mut ycsb, &topo)?;
    a.mix.apply_record_size(&mut topo, a.run.records())?;
    let cfg = SweepConfig {
        param,
        values,
        base: ClusterConfig {
            duration: a.duration,
            warmup: a.warmup,
            clients_per_node: a.run.clients(),
            records_per_partition: a.run.records(),
            ycsb,
            options: a.run.ack.options(a.protocol),
            seed: a.mix.seed,
            progress: !a.json,
            interval: Default::default(),
            idle_window: a.idle.window(),
            // One attempt per transaction, as every sweep before clients retried.
            retry: RetryPolicy::none(),
        },
        protocols: a.protocols.clone(),
        out: a.out.clone(),
        name: a.name.clone().unwrap_or_else(|| format!("sweep-{}", param.name())),
        overlays: a
            .overlay
            .iter()
            .map(|o| {
                let (label, file) =
                    o.split_once('=').filter(|(l, f)| !l.is_empty() && !f.is_empty()).ok_or_else(|| {
                        anyhow::anyhow!("--overlay `{o}` must be LABEL=FILE.csv (e.g. before=sweep-before.csv)")
                    })?;
                let file = PathBuf::from(file);
                if !file.is_file() {
                    anyhow::bail!("--overlay {label}: no file {}", file.display());
                }
                Ok((label.to_string(), file))
            })
            .collect::<Result<_>>()?,
        label: a.label.clone(),
    };
    let quiet = a.json;
    let r = run_sweep(&topo, &cfg, &mut |i, n, protocol, v| {
        if !quiet {
            eprintln!("point {}/{n}: {protocol}, {}={v}", i + 1, param.name());
        }
    })
    .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let names: Vec<&str> = r.protocols.iter().map(|p| p.name()).collect();
    println!(
        "redt bench sweep — {} over {}, protocol{} {}",
        param.name(),
        a.workload,
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    let w = param.name().len().max(10);
    println!(
        "  {:<10} {:>w$} {:>12} {:>10} {:>10} {:>10} {:>10} {:>11} {:>9}",
        "protocol",
        param.name(),
        "committed/s",
        "abort",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "CPU µs/txn",
        "CPU cores"
    );
    for row in &r.rows {
        let (x, o) = (&row.report, &row.report.outcomes);
        let dash = |v: Option<f64>, digits: usize| v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"));
        println!(
            "  {:<10} {:>w$} {:>12.1} {:>10.4} {:>10.1} {:>10.1} {:>10.1} {:>11} {:>9}",
            x.protocol.name(),
            row.value,
            o.committed_per_s,
            o.abort_rate,
            o.latency_ms.p50,
            o.latency_ms.p99,
            o.latency_ms.p999,
            dash(x.cpu.cpu_us_per_committed, 0),
            dash(x.cpu.cpu_cores, 2)
        );
    }
    println!("  CSV   {}", r.csv);
    match (&r.svg, &r.png, &r.chart_error) {
        (Some(s), Some(p), _) => println!("  chart {s}\n  chart {p}"),
        (_, _, Some(e)) => println!("  charts not drawn: {e}"),
        _ => {}
    }
    Ok(())
}
