//! `redt`: the command-line entry point.

#![forbid(unsafe_code)]
// The status JSON of one node is a large `json!` object.
#![recursion_limit = "256"]

mod cmd;

/// mimalloc: the many small per-verb and per-message allocations of the data path scale
/// better across threads than with the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Geo-distributed transactions: one-sided RDMA inside data centers, QUIC between them
/// (RedT, PVLDB 16(6), 2023).
#[derive(Parser, Debug)]
#[command(name = "redt", version, about)]
struct Cli {
    /// Log format on standard error: text (human-readable) or json (one JSON object per
    /// line, with the current span and its parents). ANSI colours only when standard error
    /// is a terminal and the format is text. `redt cluster up` passes it to its nodes.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global log subscriber: the `RUST_LOG` filter (default `warn`), on standard
/// error, as `format`, with ANSI colours only for text on a terminal.
fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => b.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => b.json().with_ansi(false).with_current_span(true).with_span_list(true).init(),
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCmd),
    /// A workload's lifecycle against a running cluster: `init` loads its data through the
    /// cluster and records what it loaded there, `run` runs its clients on that data, `check`
    /// checks its invariants any time later (ycsb, tpcc, bank, append).
    #[command(subcommand)]
    Workload(cmd::bench::workload::WorkloadCmd),
    /// Runs one node (one process per host in a real deployment).
    Node(cmd::cluster::NodeArgs),
    /// Starts or stops one node process per node of a topology on this host.
    #[command(subcommand)]
    Cluster(cmd::cluster::ClusterCmd),
    /// Submits transactions (Jepsen micro-op JSON lines on standard input).
    Client(cmd::client::ClientArgs),
    /// Cluster certificates.
    #[command(subcommand)]
    Certs(cmd::cluster::CertsCmd),
    /// WAN emulation: change links while running, print tc commands, measure accuracy.
    #[command(subcommand)]
    Netem(cmd::netem::NetemCmd),
    /// Topology files.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// What every node of a running cluster is doing: answers, undecided entries,
    /// recoveries; `--blocked` lists the transactions waiting on recovery.
    Status(cmd::status::StatusArgs),
    /// The deterministic whole-cluster simulation with faults: replay one seed, or soak.
    Sim(cmd::sim::SimArgs),
    /// Runs a drill plan of scheduled faults against a running cluster (`redt cluster up`):
    /// prints each inject, heal and what the nodes' status shows as it happens, then a
    /// summary (detection, in-flight transactions decided, time to full throughput, heal to
    /// nothing suspected, false suspicions, what was left); `--out DIR` saves the timeline
    /// (CSV, SVG, PNG) and the summary (JSON).
    ///
    /// The plan: events separated by `;`, each a fault, `at T` (since the drill's start) and
    /// an optional heal after `D`, in any order: `kill-dc DC [restart-after D]` (SIGKILL every
    /// node of the DC; start them again), `kill-node NODE [restart-after D]`, `partition
    /// DCS|DCS [heal-after D]` (cut every link between two disjoint comma-separated DC sets,
    /// both ways), `slow-link A B rtt R [for D]` (both directions of one link; then back to the
    /// topology file's RTT). Durations are humantime tokens without spaces (`10s`, `1500ms`).
    /// Example: "kill-dc dc2 at 10s restart-after 30s; partition dc1|dc2,dc3,dc4 at 5s
    /// heal-after 10s; slow-link dc1 dc2 rtt 200ms at 1s for 5s". The commits counted are the
    /// nodes' client answers (from `redt status`); run the same plan under the bench's clients
    /// with `redt bench ycsb --cluster F --drill PLAN` for latency, per-partition unavailability
    /// and the acknowledged-commits check.
    Drill(cmd::drill::DrillCmdArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Loads and validates a topology file (its `timeouts:` with the defaults filled in too)
    /// and prints a summary, each DC's verbs backend and nodes' addresses (refusing `rdma`
    /// when this build has no RDMA), the timeouts a node would run with, the request limits
    /// and where the nodes serve their metrics.
    Check {
        /// The topology file.
        file: PathBuf,
    },
}

fn config_check(file: &std::path::Path) -> Result<()> {
    let t = redt_proto::Topology::load(file)?;
    cmd::check_limits(&file.display().to_string(), &t)?;
    let timeouts = redt_coordinator::NodeTimeouts::resolve(&t, &t.timeouts)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
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
    for dc in &t.dcs {
        let nodes: Vec<String> = dc
            .nodes
            .iter()
            .map(|&n| &t.nodes[usize::from(n.0)])
            .map(|n| {
                if n.advertise.socket_addr() == Some(n.listen) {
                    format!("{} at {}", n.name, n.listen)
                } else {
                    format!("{} listening at {}, advertised as {}", n.name, n.listen, n.advertise)
                }
            })
            .collect();
        println!("{}: in-DC verbs backend {}; {}", dc.name, dc.backend, nodes.join(", "));
    }
    cmd::cluster::check_backends(&t, file)?;
    let d = |d: std::time::Duration| humantime::format_duration(d).to_string();
    let r = &timeouts.recovery;
    println!(
        "timeouts of `redt node` (the file's, else derived from the topology): phase1_timeout {}, \
         clock_skew_bound {}, retry_every {}, retry_max {}, give_up_after {}, lock_wait {}; recovery: own_dc_after {}, \
         other_dc_after {}, turn {}, round_timeout {}, retry_base {}, retry_max {}, scan_every {}, gap_wait {}, \
         catch_up_give_up {}",
        d(timeouts.phase1_timeout),
        d(timeouts.clock_skew_bound),
        d(timeouts.retry_every),
        d(timeouts.retry_max),
        d(timeouts.give_up_after),
        if timeouts.lock_wait.is_zero() { "0 (No-Wait)".to_string() } else { d(timeouts.lock_wait) },
        d(r.own_dc_after),
        d(r.other_dc_after),
        d(r.turn),
        d(r.round_timeout),
        d(r.retry_base),
        d(r.retry_max),
        d(r.scan_every),
        d(r.gap_wait),
        d(r.catch_up_give_up)
    );
    println!("failure detector heartbeats (interval / timeout): {}", timeouts.detector.summary());
    let v = redt_dc_executor::ServerLimits::from_config(&t.verbs);
    println!(
        "in-DC verbs server (the file's `verbs:`, else the defaults): max_connections {}, \
         max_connections_per_peer {}, handshake_timeout {}, first_frame_timeout {}, idle_timeout {}",
        v.max_connections,
        v.max_connections_per_peer,
        d(v.handshake_timeout),
        d(v.first_frame_timeout),
        d(v.idle_timeout)
    );
    let q = &t.transport;
    println!(
        "QUIC transport (the file's `transport:`, else the defaults): max_connections {}, \
         max_connections_per_peer {}, max_streams_per_connection {}, stream_receive_window {} B, \
         connection_receive_window {} B, max_calls_in_flight {}, call_slot_timeout {}, handler_timeout {}, \
         write_timeout {}",
        q.max_connections,
        q.max_connections_per_peer,
        q.max_streams_per_connection,
        q.stream_receive_window_bytes,
        q.connection_receive_window_bytes,
        q.max_calls_in_flight,
        d(q.call_slot_timeout),
        d(q.handler_timeout),
        d(q.write_timeout)
    );
    let l = &t.limits;
    println!(
        "limits (the file's, else the defaults): max_ops_per_txn {}, max_bytes_per_txn {}, max_jsonl_line_bytes {}, \
         max_pending_votes {}, max_accepted_redo {}, max_background_retries {}, max_bulk_percent {}; participant DCs per sub-transaction at \
         most {}",
        l.max_ops_per_txn,
        l.max_bytes_per_txn,
        l.max_jsonl_line_bytes,
        l.max_pending_votes,
        l.max_accepted_redo,
        l.max_background_retries,
        l.max_bulk_percent,
        t.dcs.len()
    );
    let own: Vec<String> = t.nodes.iter().filter_map(|n| n.metrics.map(|a| format!("{} at {a}", n.name))).collect();
    let own =
        if own.is_empty() { String::new() } else { format!(" (nodes with their own address: {})", own.join(", ")) };
    match t.metrics.port {
        Some(port) => println!("metrics: every node serves GET /metrics on its own IP, TCP port {port}{own}"),
        None => println!(
            "metrics: no `metrics.port` (`redt node` serves none unless given --metrics-addr; \
             `redt cluster up` serves them on each node's QUIC port + 1){own}"
        ),
    }
    let m = &t.metrics;
    println!(
        "metrics limits (the file's, else the defaults): max_connections {}, max_connections_per_peer {}, \
         idle_timeout {}, write_timeout {}; {}",
        m.max_connections,
        m.max_connections_per_peer,
        humantime::format_duration(m.idle_timeout),
        humantime::format_duration(m.write_timeout),
        if m.tls { "HTTPS with each node's cluster certificate (tls: true)" } else { "plain HTTP (tls: false)" }
    );
    Ok(())
}

/// Runs the command; an error is printed as one line ([`error_line`]) and exits 1.
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    cmd::cluster::set_log_format(cli.log_format);
    match run(&cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `error: ` and the error's chain joined by `: `, each text once: a cause whose text the
/// line already holds (a library error that prints its source, `transport: {0}`, or an OS
/// error a context already quotes) is left out, so the OS error is not printed twice.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = format!("error: {e}");
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

fn run(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Bench(c) => cmd::bench::run(c),
        Command::Workload(c) => cmd::bench::workload::run(c),
        Command::Node(a) => cmd::cluster::node(a),
        Command::Cluster(c) => cmd::cluster::cluster(c),
        Command::Client(a) => cmd::client::run(a),
        Command::Certs(c) => cmd::cluster::certs(c),
        Command::Netem(c) => cmd::netem::run(c),
        Command::Config(ConfigCmd::Check { file }) => config_check(file),
        Command::Sim(a) => cmd::sim::run_sim(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Drill(a) => cmd::drill::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cause already in the line is not repeated; a new one is added.
    #[test]
    fn an_error_line_holds_each_cause_once() {
        let os = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let quoted = anyhow::Error::new(os()).context(format!("run/config.path: {}", os()));
        assert_eq!(error_line(&quoted), format!("error: run/config.path: {}", os()));
        let wrapped = anyhow::Error::new(os()).context("no run directory");
        assert_eq!(error_line(&wrapped), format!("error: no run directory: {}", os()));
    }
}
