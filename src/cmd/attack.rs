//! `redt bench attack`: what a flood of one kind of request that a client certificate may
//! send costs another client, measured on a running cluster (`redt cluster up`).
//!
//! For each attack, the legitimate client (the library [`Client`] with the cluster's client
//! certificate) commits transactions back to back through one node for the phase's length
//! alone, then again beside `--attackers` attackers that send the attack's requests back to
//! back to the same node with the same certificate, each over its own QUIC connection. It
//! reports per attack the commits kept, p50 and p99 beside ÷ alone, what the attackers got
//! (answered, refused with a code, failed), and the node processes' CPU (from `/proc`, when
//! the run directory's pid files name them). docs/security.md, "Attacks measured", has the
//! figures.
//!
//! The attackers run on a runtime of their own whose threads sit at nice +19 ([`ATTACKER_NICE`]),
//! so that on a machine the cluster shares with them their own CPU (making requests, reading
//! answers) yields to the nodes and the legitimate client, as it would on a machine of their
//! own: what is measured is what their requests cost the nodes.

use super::{load_topology, node_names, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use redt_coordinator::{Client, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::wire::{Body, Envelope, OutcomeQueryRequest, StatusRequest};
use redt_proto::{NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use redt_transport::{load_identity, SocketSpec, Transport, TransportConfig, CLIENT_IDENTITY_NAME};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much nicer than the process the attackers' threads run.
const ATTACKER_NICE: i32 = 19;

/// One kind of attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Attack {
    /// Read-only calls of `limits.max_ops_per_txn` reads (at most 1,024) of absent keys,
    /// through every node.
    Bulk,
    /// Outcome queries for ids nobody reserved, four in flight per attacker, each asking to
    /// wait 10 s.
    Outcome,
    /// Status requests (the cached sample).
    Status,
    /// Status requests counting locks (a whole-index scan; refused to clients).
    Locks,
    /// Scrapes of the node's metrics endpoint, one connection each.
    Scrape,
    /// Deletes of 64 keys nobody has (fewer when `limits.max_ops_per_txn` is lower).
    Absent,
}

/// Arguments of `redt bench attack`.
#[derive(Args, Debug)]
pub struct AttackArgs {
    /// Run directory of a cluster started by `redt cluster up` (its topology and client
    /// certificate are taken from there unless `--cluster` / `--certs` say otherwise; its pid
    /// files name the node processes whose CPU is reported).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Topology file of the running cluster [default: the one `cluster up` used].
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Certificate directory [default: RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Attacks to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "bulk,outcome,status,locks,scrape,absent")]
    attacks: Vec<Attack>,
    /// Attackers per attack, each with its own connection.
    #[arg(long, default_value_t = 8)]
    attackers: usize,
    /// Length of each phase (alone, then beside the attack).
    #[arg(long, default_value = "10s", value_parser = crate::cmd::duration::run_time)]
    duration: Duration,
    /// The node the legitimate client commits through and the attacks aim at [default: the
    /// first node].
    #[arg(long)]
    node: Option<String>,
    /// The attacked node's metrics endpoint, for the `scrape` attack [default: the topology
    /// file's, else the node's QUIC port + 1 at its own IP, as `redt cluster up` serves it].
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Table of the legitimate client's and the attackers' keys.
    #[arg(long, default_value = "kv")]
    table: String,
}

/// What one phase of the legitimate client saw.
#[derive(Debug, Default)]
struct Phase {
    committed: u64,
    other: u64,
    /// Latencies of the commits, ms, sorted.
    ms: Vec<f64>,
    /// CPU seconds the node processes used during the phase, if known.
    cpu_s: Option<f64>,
    secs: f64,
}

impl Phase {
    fn quantile(&self, q: f64) -> f64 {
        if self.ms.is_empty() {
            return f64::NAN;
        }
        self.ms[((q * self.ms.len() as f64) as usize).min(self.ms.len() - 1)]
    }
}

/// What the attackers got.
#[derive(Debug, Default)]
struct Tally {
    answered: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    last_refusal: std::sync::Mutex<String>,
}

impl Tally {
    fn refused(&self, why: String) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        *self.last_refusal.lock().unwrap_or_else(|p| p.into_inner()) = why;
    }
}

/// Runs `redt bench attack`.
pub fn run(a: &AttackArgs) -> Result<()> {
    let config = match &a.cluster {
        Some(c) => c.clone(),
        None => super::status::run_dir_config(&a.run_dir)?,
    };
    let topo = Arc::new(load_topology(Some(&config))?);
    let table = topo
        .table_by_name(&a.table)
        .with_context(|| format!("the topology has no table `{}` (use --table)", a.table))?
        .id;
    let node = match &a.node {
        Some(n) => {
            topo.node_by_name(n).with_context(|| format!("no node named `{n}` (its nodes: {})", node_names(&topo)))?.id
        }
        None => NodeId(0),
    };
    if a.attackers == 0 {
        bail!("--attackers must be at least 1");
    }
    let certs = a.certs.clone().unwrap_or_else(|| a.run_dir.join("certs"));
    let pids = node_pids(&a.run_dir.join("pids"));
    let metrics = a.metrics.or_else(|| topo.metrics_addr(node)).unwrap_or_else(|| {
        let listen = topo.nodes[node.0 as usize].listen;
        SocketAddr::new(listen.ip(), listen.port().wrapping_add(1))
    });
    let rt = runtime()?;
    let attackers_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(a.attackers.max(1))
        .thread_name("redt-attacker")
        .on_thread_start(|| {
            // On Linux a thread id names the thread alone; a refusal leaves it as it was.
            let me = Some(rustix::thread::gettid());
            let now = rustix::process::getpriority_process(me).unwrap_or(0);
            let _ = rustix::process::setpriority_process(me, (now + ATTACKER_NICE).clamp(-20, 19));
        })
        .enable_all()
        .build()
        .context("starting the attackers' runtime")?;
    let attackers = attackers_rt.handle().clone();
    rt.block_on(async {
        let client = Arc::new(Client::connect(topo.clone(), &certs, Duration::from_secs(10))?);
        println!(
            "machine: {} CPUs; cluster `{}` ({} nodes; CPU of {} node processes); the legitimate client and the \
             attacks on {}; {} attackers (at nice +{ATTACKER_NICE}); {:?} per phase",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            topo.name,
            topo.nodes.len(),
            pids.len(),
            topo.node_name(node),
            a.attackers,
            a.duration
        );
        println!(
            "| attack | alone: committed/s, p50, p99 ms | beside: committed/s, p50, p99 ms | kept | p99 × | \
             attackers: answered / refused / failed | node CPU cores alone → beside |"
        );
        println!("|---|---|---|---|---|---|---|");
        for &attack in &a.attacks {
            let alone = legitimate(&client, node, table, a.duration, &pids).await;
            let tally = Arc::new(Tally::default());
            let stop = Arc::new(AtomicBool::new(false));
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..a.attackers {
                let ctx = Ctx { topo: topo.clone(), certs: certs.clone(), node, table, i, metrics };
                let (tally, stop) = (tally.clone(), stop.clone());
                tasks.spawn_on(async move { attacker(attack, ctx, tally, stop).await }, &attackers);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let beside = legitimate(&client, node, table, a.duration, &pids).await;
            stop.store(true, Ordering::Relaxed);
            while let Some(done) = tasks.join_next().await {
                done.context("an attacker's task")??;
            }
            let rate = |p: &Phase| p.committed as f64 / p.secs;
            let cores = |p: &Phase| p.cpu_s.map_or("?".to_string(), |c| format!("{:.2}", c / p.secs));
            println!(
                "| {attack:?} | {:.1}, {:.1}, {:.1} | {:.1}, {:.1}, {:.1} | {:.2} | {:.2} | {} / {} / {} | {} → {} |",
                rate(&alone),
                alone.quantile(0.5),
                alone.quantile(0.99),
                rate(&beside),
                beside.quantile(0.5),
                beside.quantile(0.99),
                rate(&beside) / rate(&alone).max(f64::MIN_POSITIVE),
                beside.quantile(0.99) / alone.quantile(0.99),
                tally.answered.load(Ordering::Relaxed),
                tally.refused.load(Ordering::Relaxed),
                tally.failed.load(Ordering::Relaxed),
                cores(&alone),
                cores(&beside),
            );
            let why = tally.last_refusal.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if !why.is_empty() {
                println!("|  | a refusal read: {} | | | | | |", why.replace('|', "/"));
            }
            if beside.other + alone.other > 0 {
                println!(
                    "|  | the legitimate client's failures: {} alone, {} beside | | | | | |",
                    alone.other, beside.other
                );
            }
        }
        Ok(())
    })
}

/// Commits `key += 1, read key 8` back to back through `node` for `length`.
async fn legitimate(client: &Client, node: NodeId, table: TableId, length: Duration, pids: &[u32]) -> Phase {
    let cpu0 = cpu_seconds(pids);
    let t0 = Instant::now();
    let mut p = Phase::default();
    let mut i = 0u64;
    while t0.elapsed() < length {
        i += 1;
        let start = Instant::now();
        let call = kv_call(table, &[KvOp::Add(1_000 + i % 1_000, 1), KvOp::Read(8)]);
        match client.submit(node, call).await.status {
            TxnStatus::Committed => {
                p.committed += 1;
                p.ms.push(start.elapsed().as_secs_f64() * 1e3);
            }
            _ => p.other += 1,
        }
    }
    p.secs = t0.elapsed().as_secs_f64();
    p.cpu_s = cpu0.zip(cpu_seconds(pids)).map(|(a, b)| b - a);
    p.ms.sort_by(f64::total_cmp);
    p
}

/// What an attacker needs.
struct Ctx {
    topo: Arc<Topology>,
    certs: PathBuf,
    node: NodeId,
    table: TableId,
    i: usize,
    metrics: SocketAddr,
}

/// Sends `attack`'s requests back to back until `stop`, counting what came back.
async fn attacker(attack: Attack, ctx: Ctx, tally: Arc<Tally>, stop: Arc<AtomicBool>) -> Result<()> {
    let identity = load_identity(&ctx.certs, CLIENT_IDENTITY_NAME)?;
    let cfg = TransportConfig { call_timeout: Duration::from_secs(15), ..TransportConfig::default() };
    let transport = Arc::new(Transport::client(cfg, &identity, SocketSpec::Bind("0.0.0.0:0".parse()?))?);
    // A client library of its own, on the attackers' runtime.
    let client = Client::with_identity(ctx.topo.clone(), &identity, Duration::from_secs(15))?;
    let target = &ctx.topo.nodes[ctx.node.0 as usize];
    let (addr, name) = (target.advertise.clone(), target.name.clone());
    let epoch = ctx.topo.epoch.0;
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        k += 1;
        match attack {
            Attack::Bulk => {
                let ops = ctx.topo.limits.max_ops_per_txn.min(1_024);
                let base = 10_000_000 + (ctx.i as u64 * 1_000_003 + k * ops) % 50_000_000;
                let reads: Vec<KvOp> = (0..ops).map(|j| KvOp::Read(base + j)).collect();
                let via = NodeId(((ctx.i as u64 + k) % ctx.topo.nodes.len() as u64) as u16);
                count(&tally, &client.submit(via, kv_call(ctx.table, &reads)).await.status);
            }
            Attack::Absent => {
                let n = ctx.topo.limits.max_ops_per_txn.min(64);
                let base = 80_000_000 + (ctx.i as u64 * 1_000_003 + k * n) % 50_000_000;
                let deletes: Vec<KvOp> = (0..n).map(|j| KvOp::Delete(base + j)).collect();
                count(&tally, &client.submit(ctx.node, kv_call(ctx.table, &deletes)).await.status);
            }
            Attack::Outcome => {
                let mut asks = tokio::task::JoinSet::new();
                for j in 0..4u64 {
                    let (transport, addr, name) = (transport.clone(), addr.clone(), name.clone());
                    let q = OutcomeQueryRequest {
                        txn: 1 << 62 | (ctx.i as u64) << 40 | (k * 4 + j),
                        start_after: None,
                        valid_for_ms: 0,
                        wait_ms: 10_000,
                        token: k.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    };
                    let msg = Envelope { epoch, from: u32::MAX, body: Some(Body::OutcomeQuery(q)) };
                    asks.spawn(async move { transport.call_at(&addr, &name, msg).await });
                }
                while let Some(r) = asks.join_next().await {
                    reply(&tally, r.context("an outcome query's task")?.map(|e| e.body));
                }
            }
            Attack::Status | Attack::Locks => {
                let q = StatusRequest { count_locks: attack == Attack::Locks };
                let msg = Envelope { epoch, from: u32::MAX, body: Some(Body::Status(q)) };
                reply(&tally, transport.call_at(&addr, &name, msg).await.map(|e| e.body));
            }
            Attack::Scrape => {
                let at = ctx.metrics;
                let ok = tokio::task::spawn_blocking(move || scrape(at)).await.context("a scrape's task")?;
                match ok {
                    Ok(true) => tally.answered.fetch_add(1, Ordering::Relaxed),
                    Ok(false) => {
                        tally.refused("the endpoint answered without 200".into());
                        0
                    }
                    Err(_) => tally.failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }
    }
    Ok(())
}

/// Counts a transaction's status: committed or aborted is an answer, anything else a failure.
fn count(tally: &Tally, status: &TxnStatus) {
    match status {
        TxnStatus::Committed | TxnStatus::Aborted(_) => tally.answered.fetch_add(1, Ordering::Relaxed),
        _ => tally.failed.fetch_add(1, Ordering::Relaxed),
    };
}

/// Counts a raw request's reply: an error body is a refusal (its message kept), a transport
/// error a failure, anything else an answer.
fn reply<E>(tally: &Tally, r: std::result::Result<Option<Body>, E>) {
    match r {
        Ok(Some(Body::Error(e))) => tally.refused(format!("code {}: {}", e.code, e.message)),
        Ok(_) => {
            tally.answered.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => {
            tally.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One `GET /metrics` over a connection of its own; whether it answered 200.
fn scrape(at: SocketAddr) -> std::io::Result<bool> {
    let mut s = TcpStream::connect_timeout(&at, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: redt\r\nConnection: close\r\n\r\n")?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    Ok(body.starts_with(b"HTTP/1.1 200"))
}

/// The pids of the live node processes of a run directory's `pids/` (none when it has none).
fn node_pids(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok()?.trim().parse().ok())
        .filter(|pid: &u32| Path::new(&format!("/proc/{pid}")).exists())
        .collect()
}

/// CPU seconds (user + system) the processes `pids` used so far; `None` without pids or when
/// one cannot be read.
fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.get(stat.rfind(')')? + 2..)?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
        total += (utime + stime) / ticks;
    }
    Some(total)
}
