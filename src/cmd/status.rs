//! `redt status`: what every node of a running cluster is doing — its clients' answers, the
//! undecided entries of its ring, its recoveries (started, decided, blocked), the nodes and
//! DCs its failure detector suspects, its process's CPU time and resident memory
//! and, with `--blocked`, the transactions waiting on recovery with their locks and the DCs a
//! blocked recoverer waits for.

use super::{load_topology, print_out, runtime};
use anyhow::{Context, Result};
use clap::Args;
use redt_coordinator::{Client, NodeStatus};
use redt_proto::{NodeId, Topology};
use redt_transport::{CLIENT_IDENTITY_NAME, OPERATOR_IDENTITY_NAME};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `redt status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Run directory of a cluster started by `redt cluster up` (its topology and client
    /// certificate are taken from there unless `--cluster` / `--certs` say otherwise).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Topology file of the running cluster [default: the one `cluster up` used]. `--config`
    /// is accepted for it too.
    #[arg(long, alias = "config")]
    cluster: Option<PathBuf>,
    /// Certificate directory with the client certificate [default: RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// The identity in the certificate directory to ask with (`<NAME>.pem`/`.key`) [default:
    /// the client certificate; with --locks the operator certificate, as the nodes count locks
    /// for an operator only].
    #[arg(long, value_name = "NAME")]
    identity: Option<String>,
    /// Also list every transaction waiting on recovery (past its phase-1 deadline and still
    /// undecided), with its locks and the DCs a blocked recoverer waits for.
    #[arg(long)]
    blocked: bool,
    /// Also count the records holding a lock on each node (reads the whole index: slow on a
    /// large MemStore; an operator certificate's request only).
    #[arg(long)]
    locks: bool,
    /// Print JSON (one object with a `nodes` array) instead of a table.
    #[arg(long)]
    json: bool,
    /// Window over which each node's commit rate and abort rate are measured: two status
    /// calls this far apart; `0s` skips the second call and prints no rates.
    #[arg(long, default_value = "1s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    window: Duration,
    /// How long to wait for each node's answer.
    #[arg(long, default_value = "3s", allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    timeout: Duration,
}

/// The topology file a run directory's cluster was started with.
pub fn run_dir_config(run_dir: &Path) -> Result<PathBuf> {
    let file = run_dir.join("config.path");
    let path = std::fs::read_to_string(&file).with_context(|| {
        format!("{} is not a `redt cluster up` run directory (no {})", run_dir.display(), file.display())
    })?;
    Ok(PathBuf::from(path.trim()))
}

/// Runs `redt status`.
pub fn run(a: &StatusArgs) -> Result<()> {
    let config = match &a.cluster {
        Some(c) => c.clone(),
        None => run_dir_config(&a.run_dir)?,
    };
    let topo = Arc::new(load_topology(Some(&config))?);
    let certs = a.certs.clone().unwrap_or_else(|| a.run_dir.join("certs"));
    let rt = runtime()?;
    let (statuses, rates) = rt.block_on(async {
        let default = if a.locks { OPERATOR_IDENTITY_NAME } else { CLIENT_IDENTITY_NAME };
        let identity = a.identity.as_deref().unwrap_or(default);
        let client = Client::connect_as(topo.clone(), &certs, identity, a.timeout).with_context(|| {
            let why = if a.locks {
                " (--locks needs an operator certificate: `redt certs issue --role operator`)"
            } else {
                ""
            };
            format!("the certificate {identity} in {}{why}", certs.display())
        })?;
        let client = Arc::new(client);
        let all: Vec<NodeId> = topo.nodes.iter().map(|n| n.id).collect();
        if a.window.is_zero() {
            return anyhow::Ok((client.status_of(&all, a.locks).await, Vec::new()));
        }
        let first = client.status_of(&all, false).await;
        tokio::time::sleep(a.window).await;
        let second = client.status_of(&all, a.locks).await;
        let rates = second.iter().map(|(n, s)| (*n, rate_between(&first, *n, s))).collect();
        anyhow::Ok((second, rates))
    })?;
    let rate_of = |n: NodeId| rates.iter().find(|(m, _)| *m == n).and_then(|(_, r)| *r);
    if a.json {
        let nodes: Vec<serde_json::Value> = statuses
            .iter()
            .map(|(n, s)| {
                let mut j = node_json(&topo, *n, s);
                if let (Some(r), Some(obj)) = (rate_of(*n), j.as_object_mut()) {
                    obj.insert("committed_per_s".into(), json!(r.committed_per_s));
                    obj.insert("abort_rate".into(), json!(r.abort_rate));
                    obj.insert("window_ms".into(), json!(r.window.as_millis() as u64));
                    obj.insert("cpu_cores".into(), json!(r.cpu_cores));
                }
                j
            })
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "cluster": topo.name, "nodes": nodes }))?;
        return print_out(&format!("{text}\n"));
    }
    let mut text = table(&topo, &statuses, a.locks);
    if !rates.is_empty() {
        text.push_str(&rates_table(&topo, &rates));
    }
    text.push_str(&rtt_matrix(&topo, &statuses));
    if a.blocked {
        text.push_str(&blocked(&topo, &statuses));
    }
    text.push_str(&rebuilds(&topo, &statuses));
    text.push_str(&refusals(&topo, &statuses));
    print_out(&text)
}

/// One node's commit rate and abort rate over a `redt status --window`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rate {
    /// The node's uptime between its two answers (the window as the node measured it).
    window: Duration,
    /// Client answers "committed" per second.
    committed_per_s: f64,
    /// Aborted answers over all answers in the window (0 when none).
    abort_rate: f64,
    /// CPU seconds the node's process spent per second of the window (`None`: the node does
    /// not report its CPU time). In a process holding several nodes, the whole process's.
    cpu_cores: Option<f64>,
}

/// The rates of node `n` between its answer in `first` and its answer `second`; `None` when
/// either call failed or the node restarted in between (its counters went back).
fn rate_between(
    first: &[(NodeId, Result<NodeStatus, String>)],
    n: NodeId,
    second: &Result<NodeStatus, String>,
) -> Option<Rate> {
    let a = first.iter().find(|(m, _)| *m == n)?.1.as_ref().ok()?;
    let b = second.as_ref().ok()?;
    let ms = b.uptime_ms.checked_sub(a.uptime_ms).filter(|&ms| ms > 0)?;
    let committed = b.committed.checked_sub(a.committed)?;
    let aborted = b.aborted.checked_sub(a.aborted)?;
    let unknown = b.unknown.checked_sub(a.unknown)?;
    let answers = committed + aborted + unknown;
    let cpu_us = b.process_cpu_us.zip(a.process_cpu_us).and_then(|(b, a)| b.checked_sub(a));
    Some(Rate {
        window: Duration::from_millis(ms),
        committed_per_s: committed as f64 * 1e3 / ms as f64,
        abort_rate: if answers == 0 { 0.0 } else { aborted as f64 / answers as f64 },
        cpu_cores: cpu_us.map(|us| us as f64 / 1e3 / ms as f64),
    })
}

/// The per-node rates, one row each; `-` for a node with no rate (unreachable, restarted).
fn rates_table(topo: &Topology, rates: &[(NodeId, Option<Rate>)]) -> String {
    let window = rates.iter().filter_map(|(_, r)| r.map(|r| r.window)).max().unwrap_or_default();
    let mut out = format!(
        "\nrates over the last {:.1} s (client answers of each node's coordinators; CPU of its process):\n\
         {:<12} {:>11} {:>7} {:>9}\n",
        window.as_secs_f64(),
        "node",
        "committed/s",
        "abort%",
        "cpu cores"
    );
    for (n, r) in rates {
        let name = node_name(topo, *n);
        out += &match r {
            Some(r) => {
                let cores = r.cpu_cores.map_or_else(|| "-".to_string(), |c| format!("{c:.2}"));
                format!("{name:<12} {:>11.1} {:>6.1}% {cores:>9}\n", r.committed_per_s, r.abort_rate * 100.0)
            }
            None => format!("{name:<12} {:>11} {:>7} {:>9}\n", "-", "-", "-"),
        };
    }
    out
}

/// A node process's CPU time for the status table: seconds with one decimal (`12.3s`), `-`
/// when the node does not report it.
fn cpu_cell(s: &NodeStatus) -> String {
    s.process_cpu_us.map_or_else(|| "-".into(), |us| format!("{:.1}s", us as f64 / 1e6))
}

/// A resident memory size for the status table: whole MiB below 10 GiB (`245MiB`), GiB with
/// one decimal above (`12.5GiB`), `-` when unknown.
/// The record heap's use as a share of its size ("-" when the node does not report it).
fn heap_cell(heap: Option<redt_dc_executor::RecordHeapUsage>) -> String {
    match heap {
        Some(h) if h.size_bytes > 0 => format!("{:.1}%", h.used_bytes as f64 * 100.0 / h.size_bytes as f64),
        _ => "-".into(),
    }
}

/// The record heap's figures as JSON (`null` when the node does not report them).
fn heap_json(heap: Option<redt_dc_executor::RecordHeapUsage>) -> serde_json::Value {
    heap.map_or(
        serde_json::Value::Null,
        |h| json!({ "size_bytes": h.size_bytes, "used_bytes": h.used_bytes, "free_bytes": h.free_bytes }),
    )
}

fn bytes_cell(bytes: Option<u64>) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    match bytes {
        None => "-".into(),
        Some(b) if b >= 10 << 30 => format!("{:.1}GiB", b as f64 / (MIB * 1024.0)),
        Some(b) => format!("{:.0}MiB", b as f64 / MIB),
    }
}

/// The round-trip times the nodes' QUIC connections measure between DCs, in ms: row the DC
/// measuring (the smallest over its nodes), column the DC measured; `-` where no node of the
/// row's DC has a connection to the column's. Empty when no node measured anything.
fn rtt_matrix(topo: &Topology, statuses: &[(NodeId, Result<NodeStatus, String>)]) -> String {
    let cell = |from: redt_proto::DcId, to: redt_proto::DcId| {
        statuses
            .iter()
            .filter(|(n, _)| topo.nodes.get(n.0 as usize).is_some_and(|x| x.dc == from))
            .filter_map(|(_, s)| s.as_ref().ok())
            .flat_map(|s| s.link_rtts.iter().filter(|(d, _)| *d == to).map(|(_, rtt)| *rtt))
            .min()
    };
    let cells: Vec<Vec<Option<Duration>>> =
        topo.dcs.iter().map(|from| topo.dcs.iter().map(|to| cell(from.id, to.id)).collect()).collect();
    if cells.iter().flatten().all(Option::is_none) {
        return String::new();
    }
    let width = topo.dcs.iter().map(|d| d.name.len()).max().unwrap_or(0).max(8);
    let mut out = format!("\nmeasured RTT ms (QUIC; row: from, column: to):\n{:<width$}", "");
    for d in &topo.dcs {
        out += &format!(" {:>width$}", d.name);
    }
    out.push('\n');
    for (from, row) in topo.dcs.iter().zip(&cells) {
        out += &format!("{:<width$}", from.name);
        for c in row {
            out += &match c {
                Some(rtt) => format!(" {:>width$.1}", rtt.as_secs_f64() * 1e3),
                None => format!(" {:>width$}", "-"),
            };
        }
        out.push('\n');
    }
    out
}

/// The requests refused over a limit, the heap-full abort votes, the redo entries replay
/// passed over, the QUIC transport's refusals and cancellations over its `transport:` limits
/// (`quic`: their sum; `--json` has each) and the admin requests refused for a caller without
/// the operator role (`wrong role`), per node, when any node has one.
fn refusals(topo: &Topology, statuses: &[(NodeId, Result<NodeStatus, String>)]) -> String {
    let rows: Vec<String> = statuses
        .iter()
        .filter_map(|(n, s)| s.as_ref().ok().map(|s| (n, s)))
        .filter(|(_, s)| {
            s.refused_over_limit
                + s.heap_full_votes
                + s.replay_invalid_entries
                + s.transport_limits.sum()
                + s.refused_role
                > 0
        })
        .map(|(n, s)| {
            format!(
                "{:<12} {:>10} {:>15} {:>14} {:>10} {:>10}\n",
                node_name(topo, *n),
                s.refused_over_limit,
                s.heap_full_votes,
                s.replay_invalid_entries,
                s.transport_limits.sum(),
                s.refused_role
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\nrefused and failed since start:\n{:<12} {:>10} {:>15} {:>14} {:>10} {:>10}\n{}",
        "node",
        "over-limit",
        "heap-full votes",
        "replay skipped",
        "quic",
        "wrong role",
        rows.concat()
    )
}

fn node_name(topo: &Topology, n: NodeId) -> String {
    topo.nodes.get(n.0 as usize).map_or_else(|| n.to_string(), |x| x.name.clone())
}

fn dc_name(topo: &Topology, d: redt_proto::DcId) -> String {
    topo.dcs.get(d.0 as usize).map_or_else(|| d.to_string(), |x| x.name.clone())
}

fn age(unix_ms: u64) -> String {
    if unix_ms == 0 {
        return "-".into();
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    format!("{:.1}s", now.saturating_sub(unix_ms) as f64 / 1e3)
}

/// What a node suspects, for the table: each suspected DC by name (`dc2`), then each
/// suspected node outside those DCs (`dc3-n1`), comma-separated; `-` when none.
fn suspects(topo: &Topology, s: &NodeStatus) -> String {
    let in_suspected_dc = |n: &NodeId| topo.nodes.get(n.0 as usize).is_some_and(|x| s.suspected_dcs.contains(&x.dc));
    let names: Vec<String> = s
        .suspected_dcs
        .iter()
        .map(|&d| dc_name(topo, d))
        .chain(s.suspected_nodes.iter().filter(|n| !in_suspected_dc(n)).map(|&n| node_name(topo, n)))
        .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

/// The status table, one row per node.
fn table(topo: &Topology, statuses: &[(NodeId, Result<NodeStatus, String>)], locks: bool) -> String {
    let mut out = format!(
        "{:<12} {:<8} {:>9} {:>9} {:>8} {:>6} {:>10} {:>8} {:>8} {:>9} {:>8} {:>24} {:>6} {:>5} {:>7} {:>5} {:>5}{}  {}\n",
        "node",
        "dc",
        "up",
        "cpu",
        "rss",
        "heap",
        "committed",
        "aborted",
        "unknown",
        "undecided",
        "oldest",
        "recoveries s/c/a/run/blk",
        "filled",
        "owed",
        "backlog",
        "epoch",
        "under",
        if locks { "   locks" } else { "" },
        "suspects"
    );
    for (n, s) in statuses {
        let dc = topo.nodes.get(n.0 as usize).map(|x| dc_name(topo, x.dc)).unwrap_or_default();
        match s {
            Err(e) => out += &format!("{:<12} {:<8} unreachable: {e}\n", node_name(topo, *n), dc),
            Ok(s) => {
                let rec = format!(
                    "{}/{}/{}/{}/{}",
                    s.recoveries_started,
                    s.recoveries_committed,
                    s.recoveries_aborted,
                    s.recoveries_running,
                    s.recoveries_blocked
                );
                out += &format!(
                    "{:<12} {:<8} {:>9} {:>9} {:>8} {:>6} {:>10} {:>8} {:>8} {:>9} {:>8} {:>24} {:>6} {:>5} {:>7} {:>5} {:>5}{}  {}\n",
                    node_name(topo, *n),
                    dc,
                    format!("{:.1}s", s.uptime_ms as f64 / 1e3),
                    cpu_cell(s),
                    bytes_cell(s.process_resident_bytes),
                    heap_cell(s.record_heap),
                    s.committed,
                    s.aborted,
                    s.unknown,
                    s.undecided_entries,
                    age(s.oldest_undecided_unix_ms),
                    rec,
                    s.gap_slots_filled,
                    s.catch_ups_owed,
                    s.replay_backlog_slots,
                    s.epoch.0,
                    s.under_replicated,
                    match (locks, s.locks_held) {
                        (false, _) => String::new(),
                        (true, Some(l)) => format!(" {l:>7}"),
                        (true, None) => format!(" {:>7}", "-"),
                    },
                    suspects(topo, s)
                );
            }
        }
    }
    out
}

/// The rebuilds under way (or filled, waiting for their promotion), per node.
fn rebuilds(topo: &Topology, statuses: &[(NodeId, Result<NodeStatus, String>)]) -> String {
    let mut out = String::new();
    for (n, s) in statuses {
        let Ok(s) = s else { continue };
        for (p, r) in &s.rebuilds {
            if out.is_empty() {
                out += "\nrebuilds (learners copying from the voters):\n";
            }
            let state = if r.filled {
                format!("filled ({} stale rows purged), waiting for its promotion", r.progress.purged)
            } else {
                format!("copying; last error: {}", r.last_error.as_deref().unwrap_or("none"))
            };
            out += &format!(
                "{:<12} p{:<4} added in epoch {:<4} {:>9} records {:>12} bytes  {}/{} voters done  {state}\n",
                node_name(topo, *n),
                p.0,
                r.added_in.0,
                r.progress.records,
                r.progress.bytes,
                r.progress.sources_done,
                r.progress.sources,
            );
        }
    }
    out
}

/// The transactions waiting on recovery, per node.
fn blocked(topo: &Topology, statuses: &[(NodeId, Result<NodeStatus, String>)]) -> String {
    let mut out = String::new();
    let mut any = false;
    for (n, s) in statuses {
        let Ok(s) = s else { continue };
        for w in &s.waiting {
            if !any {
                out += &format!(
                    "\nwaiting on recovery (undecided past the phase-1 deadline):\n{:<12} {:<18} {:<12} {:>8} {:>6}  {:<16} state\n",
                    "node", "transaction", "coordinator", "age", "locks", "partitions"
                );
                any = true;
            }
            let parts: Vec<String> = w.partitions.iter().map(|p| format!("p{}", p.0)).collect();
            let state = if !w.waiting_for.is_empty() {
                let dcs: Vec<String> = w.waiting_for.iter().map(|&d| dc_name(topo, d)).collect();
                format!("recovery blocked, waiting for {}", dcs.join(", "))
            } else if w.recovering {
                "recovering here".into()
            } else {
                "not recovered here (another node's turn, or not due yet)".into()
            };
            out += &format!(
                "{:<12} {:<18} {:<12} {:>7.1}s {:>6}  {:<16} {state}\n",
                node_name(topo, *n),
                w.txn.to_string(),
                node_name(topo, w.coordinator),
                w.age_ms as f64 / 1e3,
                w.locks,
                parts.join(","),
            );
        }
    }
    if !any {
        out += "\nno transaction waits on recovery\n";
    }
    out
}

fn node_json(topo: &Topology, n: NodeId, s: &Result<NodeStatus, String>) -> serde_json::Value {
    match s {
        Err(e) => json!({ "node": node_name(topo, n), "error": e }),
        Ok(s) => with_ring_read(
            s,
            json!({
                "node": node_name(topo, n),
                "uptime_ms": s.uptime_ms,
                "process_cpu_s": s.process_cpu_us.map(|us| us as f64 / 1e6),
                "process_resident_bytes": s.process_resident_bytes,
                "record_heap": heap_json(s.record_heap),
                "executor": json!({
                    "short_jobs": s.executor.short_jobs,
                    "bulk_jobs": s.executor.bulk_jobs,
                    "busy_us": s.executor.busy_us,
                    "longest_job_us": s.executor.longest_job_us,
                    "longest_short_wait_us": s.executor.longest_short_wait_us,
                }),
                "committed": s.committed,
                "aborted": s.aborted,
                "unknown": s.unknown,
                "undecided_entries": s.undecided_entries,
                "oldest_undecided_unix_ms": s.oldest_undecided_unix_ms,
                "catch_ups_owed": s.catch_ups_owed,
                "replay_backlog_slots": s.replay_backlog_slots,
                "epoch": s.epoch.0,
                "removed_dcs": s.removed_dcs.iter().map(|d| dc_name(topo, *d)).collect::<Vec<_>>(),
                "membership_leader": s.membership_leader.map(|l| node_name(topo, l)),
                "under_replicated": s.under_replicated,
                "rebuilds": s.rebuilds.iter().map(|(p, r)| json!({
                    "partition": format!("p{}", p.0),
                    "added_in": r.added_in.0,
                    "records": r.progress.records,
                    "bytes": r.progress.bytes,
                    "sources_done": r.progress.sources_done,
                    "purged": r.progress.purged,
                    "sources": r.progress.sources,
                    "filled": r.filled,
                    "last_error": r.last_error,
                })).collect::<Vec<_>>(),
                "recoveries": {
                    "started": s.recoveries_started,
                    "committed": s.recoveries_committed,
                    "aborted": s.recoveries_aborted,
                    "running": s.recoveries_running,
                    "blocked": s.recoveries_blocked,
                },
                "gap_slots_filled": s.gap_slots_filled,
                "link_rtt_ms": s.link_rtts.iter().map(|(d, rtt)| (dc_name(topo, *d), json!(rtt.as_secs_f64() * 1e3)))
                    .collect::<serde_json::Map<_, _>>(),
                "refused_over_limit": s.refused_over_limit,
                "refused_role": s.refused_role,
                "raft_wrong_sender": s.raft_wrong_sender,
                "heap_full_votes": s.heap_full_votes,
                "replay_invalid_entries": s.replay_invalid_entries,
                "pending_votes_forgotten": s.pending_votes_forgotten,
                "accepted_redo_forgotten": s.accepted_redo_forgotten,
                "deleted_records": { "freed": s.deleted_records_freed, "waiting": s.deleted_records_waiting },
                "background_retries": {
                    "waiting": s.background_retries_waiting,
                    "waited": s.background_retries_waited,
                },
                "transport_over_limit": {
                    "max_connections": s.transport_limits.refused_total,
                    "max_connections_per_peer": s.transport_limits.refused_per_peer,
                    "handler_timeout": s.transport_limits.handler_timeouts,
                    "write_timeout": s.transport_limits.write_timeouts,
                    "call_slot_timeout": s.transport_limits.call_slot_timeouts,
                },
                "locks_held": s.locks_held,
                "suspected_nodes": s.suspected_nodes.iter().map(|&n| node_name(topo, n)).collect::<Vec<_>>(),
                "suspected_dcs": s.suspected_dcs.iter().map(|&d| dc_name(topo, d)).collect::<Vec<_>>(),
                "suspicions_total": s.suspicions_total,
                "waiting": s.waiting.iter().map(|w| json!({
                    "txn": w.txn.to_string(),
                    "coordinator": node_name(topo, w.coordinator),
                    "age_ms": w.age_ms,
                    "partitions": w.partitions.iter().map(|p| p.0).collect::<Vec<_>>(),
                    "locks": w.locks,
                    "recovering": w.recovering,
                    "waiting_for": w.waiting_for.iter().map(|&d| dc_name(topo, d)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }),
        ),
    }
}

/// `node` (a node's JSON object) with the time its ring figures were read
/// (`ring_read_unix_ms`: they may be up to a second old; `null` from a node that does not
/// report it). Added apart: one more key in `node_json`'s `json!` is past the macro's
/// recursion limit.
fn with_ring_read(s: &NodeStatus, mut node: serde_json::Value) -> serde_json::Value {
    if let Some(obj) = node.as_object_mut() {
        obj.insert("ring_read_unix_ms".into(), json!(s.ring_read_unix_ms));
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_coordinator::StatusBoard;
    use redt_proto::DcId;

    #[test]
    fn the_suspects_column_names_whole_dcs_then_single_nodes() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let board = StatusBoard::default();
        let status = |board: &StatusBoard| board.snapshot(NodeId(0), &[], 0, 500, 0, None);
        assert_eq!(suspects(&topo, &status(&board)), "-");
        board.suspects(vec![NodeId(2), NodeId(3), NodeId(5)], vec![DcId(1)], 3);
        assert_eq!(suspects(&topo, &status(&board)), "dc2,dc3-n2");
        let row = table(&topo, &[(NodeId(0), Ok(status(&board)))], false);
        assert!(row.lines().next().is_some_and(|h| h.ends_with("  suspects")), "{row}");
        assert!(row.lines().nth(1).is_some_and(|r| r.ends_with("  dc2,dc3-n2")), "{row}");
        let j = node_json(&topo, NodeId(0), &Ok(status(&board)));
        assert_eq!(j["suspected_nodes"], json!(["dc2-n1", "dc2-n2", "dc3-n2"]));
        assert_eq!(j["suspected_dcs"], json!(["dc2"]));
        assert_eq!(j["suspicions_total"], 3);
    }

    #[test]
    fn the_replay_backlog_is_a_column_and_a_json_field() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let s =
            NodeStatus { replay_backlog_slots: 35, ..StatusBoard::default().snapshot(NodeId(0), &[], 0, 500, 0, None) };
        let t = table(&topo, &[(NodeId(0), Ok(s.clone()))], false);
        let header: Vec<&str> = t.lines().next().unwrap_or_default().split_whitespace().collect();
        let row: Vec<&str> = t.lines().nth(1).unwrap_or_default().split_whitespace().collect();
        let at = header.iter().position(|&h| h == "backlog").expect("a backlog column");
        // The header's "recoveries s/c/a/run/blk" is two words, a row's value one.
        assert_eq!(row.get(at - 1), Some(&"35"), "{t}");
        assert_eq!(node_json(&topo, NodeId(0), &Ok(s.clone()))["replay_backlog_slots"], 35);
        assert_eq!(node_json(&topo, NodeId(0), &Ok(s.clone()))["ring_read_unix_ms"], json!(null));
        let read = NodeStatus { ring_read_unix_ms: Some(1_700_000_000_123), ..s };
        assert_eq!(node_json(&topo, NodeId(0), &Ok(read))["ring_read_unix_ms"], 1_700_000_000_123u64);
    }

    #[test]
    fn admin_requests_refused_for_their_role_show_in_the_refusals_table() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let quiet = StatusBoard::default().snapshot(NodeId(0), &[], 0, 500, 0, None);
        assert_eq!(refusals(&topo, &[(NodeId(0), Ok(quiet.clone()))]), "", "nothing refused, no table");
        let s = NodeStatus { refused_role: 3, ..quiet };
        let t = refusals(&topo, &[(NodeId(0), Ok(s))]);
        let header = t.lines().find(|l| l.starts_with("node")).expect("a header");
        let row = t.lines().find(|l| l.starts_with("dc1-n1")).expect("a row for dc1-n1");
        assert!(header.ends_with("wrong role"), "{t}");
        assert!(row.split_whitespace().last() == Some("3"), "{t}");
    }

    #[test]
    fn rates_come_from_two_answers_and_vanish_when_a_node_restarted() {
        let base = StatusBoard::default().snapshot(NodeId(0), &[], 0, 500, 0, None);
        let a = NodeStatus { uptime_ms: 10_000, committed: 100, aborted: 10, unknown: 0, ..base.clone() };
        let b = NodeStatus { uptime_ms: 12_000, committed: 160, aborted: 30, unknown: 0, ..base.clone() };
        let first = vec![(NodeId(0), Ok(a.clone()))];
        let r = rate_between(&first, NodeId(0), &Ok(b.clone())).expect("a rate");
        assert_eq!(r.window, Duration::from_secs(2));
        assert!((r.committed_per_s - 30.0).abs() < 1e-9, "{r:?}");
        assert!((r.abort_rate - 0.25).abs() < 1e-9, "{r:?}");
        // Restarted in between: its counters went back.
        let restarted = NodeStatus { uptime_ms: 500, committed: 3, ..base.clone() };
        assert_eq!(rate_between(&first, NodeId(0), &Ok(restarted)), None);
        assert_eq!(rate_between(&first, NodeId(0), &Err("unreachable".into())), None);
        assert_eq!(rate_between(&first, NodeId(1), &Ok(b)), None, "no first answer from that node");
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        assert_eq!(r.cpu_cores, None, "neither answer reports the process's CPU time");
        let t = rates_table(&topo, &[(NodeId(0), Some(r)), (NodeId(1), None)]);
        assert!(t.contains("dc1-n1              30.0   25.0%         -"), "{t}");
        assert!(t.contains("dc1-n2                 -       -         -"), "{t}");
        // 3 s of CPU over the 2 s window: 1.5 cores; a process whose CPU went back has none.
        let a = NodeStatus {
            uptime_ms: 10_000,
            committed: 100,
            aborted: 10,
            process_cpu_us: Some(7_000_000),
            ..base.clone()
        };
        let b = NodeStatus {
            uptime_ms: 12_000,
            committed: 160,
            aborted: 30,
            process_cpu_us: Some(10_000_000),
            ..base.clone()
        };
        let first = vec![(NodeId(0), Ok(a))];
        let r = rate_between(&first, NodeId(0), &Ok(b.clone())).expect("a rate");
        assert_eq!(r.cpu_cores, Some(1.5));
        assert!(rates_table(&topo, &[(NodeId(0), Some(r))]).contains("dc1-n1              30.0   25.0%      1.50"));
        let back = NodeStatus { process_cpu_us: Some(6_000_000), ..b };
        assert_eq!(rate_between(&first, NodeId(0), &Ok(back)).map(|r| r.cpu_cores), Some(None));
    }

    #[test]
    fn the_process_cpu_memory_and_record_heap_are_columns_and_json_fields() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let quiet = StatusBoard::default().snapshot(NodeId(0), &[], 0, 500, 0, None);
        let heap = redt_dc_executor::RecordHeapUsage { size_bytes: 1000, used_bytes: 125, free_bytes: 64 };
        let s = NodeStatus {
            process_cpu_us: Some(12_345_678),
            process_resident_bytes: Some(245 << 20),
            record_heap: Some(heap),
            ..quiet.clone()
        };
        let other = NodeStatus { node: NodeId(1), ..quiet.clone() };
        let t = table(&topo, &[(NodeId(0), Ok(s.clone())), (NodeId(1), Ok(other))], false);
        let header: Vec<&str> = t.lines().next().unwrap_or_default().split_whitespace().collect();
        let cell = |line: usize, column: &str| -> String {
            let at = header.iter().position(|&h| h == column).expect("a column");
            t.lines().nth(line).unwrap_or_default().split_whitespace().nth(at).unwrap_or_default().to_string()
        };
        assert_eq!((cell(1, "cpu"), cell(1, "rss")), ("12.3s".into(), "245MiB".into()), "{t}");
        assert_eq!((cell(2, "cpu"), cell(2, "rss")), ("-".into(), "-".into()), "not reported: {t}");
        assert_eq!((cell(1, "heap"), cell(2, "heap")), ("12.5%".into(), "-".into()), "{t}");
        let j = node_json(&topo, NodeId(0), &Ok(s));
        assert_eq!(j["process_cpu_s"], json!(12.345678));
        assert_eq!(j["process_resident_bytes"], json!(245u64 << 20));
        assert_eq!(j["record_heap"], json!({ "size_bytes": 1000, "used_bytes": 125, "free_bytes": 64 }));
        assert_eq!(node_json(&topo, NodeId(1), &Ok(quiet))["process_cpu_s"], json!(null));
        assert_eq!(bytes_cell(Some(12 << 30)), "12.0GiB");
        assert_eq!(bytes_cell(Some(0)), "0MiB");
    }

    #[test]
    fn the_rtt_matrix_takes_the_smallest_of_a_dcs_nodes_and_dashes_what_nobody_measured() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let base = StatusBoard::default().snapshot(NodeId(0), &[], 0, 500, 0, None);
        let ms = |v: u64| Duration::from_micros(v * 100);
        assert_eq!(rtt_matrix(&topo, &[(NodeId(0), Ok(base.clone()))]), "", "nothing measured, no matrix");
        // dc1's two nodes measure dc2 at 41.0 and 40.2 ms; dc2-n1 measures dc1 at 40.5 ms.
        let n0 = NodeStatus { link_rtts: vec![(DcId(1), ms(410)), (DcId(0), ms(2))], ..base.clone() };
        let n1 = NodeStatus { node: NodeId(1), link_rtts: vec![(DcId(1), ms(402))], ..base.clone() };
        let n2 = NodeStatus { node: NodeId(2), link_rtts: vec![(DcId(0), ms(405))], ..base.clone() };
        let statuses = [(NodeId(0), Ok(n0)), (NodeId(1), Ok(n1)), (NodeId(2), Ok(n2)), (NodeId(3), Err("down".into()))];
        let m = rtt_matrix(&topo, &statuses);
        let row = |dc: &str| -> Vec<String> {
            m.lines().find(|l| l.starts_with(dc)).expect("a row").split_whitespace().skip(1).map(String::from).collect()
        };
        assert_eq!(row("dc1"), ["0.2", "40.2", "-", "-"], "{m}");
        assert_eq!(row("dc2"), ["40.5", "-", "-", "-"], "{m}");
        assert_eq!(row("dc4"), ["-", "-", "-", "-"], "{m}");
        let j = node_json(&topo, NodeId(0), &statuses[0].1);
        assert_eq!(j["link_rtt_ms"]["dc2"], json!(41.0));
    }
}
