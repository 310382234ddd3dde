//! `redt node`, `redt cluster up|down`, `redt certs init`: real deployments, one process
//! per node.

use super::{load_topology, node_names, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_coordinator::metrics::MetricsTls;
use redt_coordinator::{CoordinatorOptions, MetricsEndpoint, NodeSpec, NodeTimeouts, TxnStats};
use redt_dc_executor::{
    format_if_new, DcHandle, Layout, LocalVerbs, ServerLimits, TcpVerbs, TcpVerbsServer, Verbs, VerbsTls,
};
use redt_netem::{NetemSocket, WanModel};
use redt_proto::{CertIdentity, NodeId, Protocol, TimeoutsConfig, Topology, VerbsBackend};
use redt_transport::tls::CA_VALIDITY;
use redt_transport::{
    check_identity, default_ca_key_path, find_ca_key, init_cluster_certs, init_cluster_certs_with, load_identity,
    node_ip, verbs_tls, ClusterCa, IdentityWatch, Role, SocketSpec, Transport, Validity, WrittenCert,
};
use rustix::process::Signal;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments of `redt node`.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// Topology file.
    #[arg(long)]
    pub config: PathBuf,
    /// This node's name in the topology.
    #[arg(long)]
    pub node: String,
    /// Certificate directory (from `redt certs init`).
    #[arg(long, default_value = "run/certs")]
    pub certs: PathBuf,
    /// Directory of the shared-memory MemStore files of this host.
    #[arg(long, default_value = "/dev/shm")]
    pub shm_dir: PathBuf,
    /// This node's data directory: the membership's Raft log (`raft/`) lives under it, so a
    /// restarted node rejoins with it (defaults to `run/data/<node>`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Directory of the MemStores' disk images under `durability: disk` (one file per node
    /// of the DC, named like its shared-memory file; docs/durability.md).
    #[arg(long, default_value = "run/disk")]
    pub disk_dir: PathBuf,
    /// Pid file: the node writes its pid there and holds an exclusive lock on it while it
    /// runs, so a second process started for the same node refuses to start, and
    /// `redt cluster` tells a live node from a stale file (`redt cluster up` passes
    /// `RUN_DIR/pids/<node>.pid`).
    #[arg(long)]
    pub pid_file: Option<PathBuf>,
    /// Run without the membership Raft peer: no DC is ever removed from the placement, and a
    /// dead DC stops the partitions it holds until it returns (without this flag, failover is on).
    #[arg(long)]
    pub no_failover: bool,
    /// Records per partition of the first table to load into this node's replicas when its
    /// MemStore is new (0: none).
    #[arg(long, default_value_t = 0)]
    pub records_per_partition: u64,
    /// Acknowledge commits only after phase 2.
    #[arg(long)]
    pub no_early_ack: bool,
    /// Decided-holder takeover at this node's coordinators (as `redt bench --cc takeover`):
    /// a transaction that conflicts with one of this node's own undecided ones waits for its
    /// decision, then its phase 1 carries that decision, which the executors apply first.
    /// Nodes with and without it work together.
    #[arg(long)]
    pub takeover: bool,
    /// With takeover, batches of at most this many transactions (as `redt bench --cc batch`,
    /// 2 to 16; implies `--takeover`): the transaction that goes takes along, as one
    /// transaction, the held ones that conflict with it, each running on what the ones before
    /// it wrote.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=16))]
    pub batch: Option<u64>,
    /// Commit protocol: redt, 2pc-paxos, ep-paxos, tapir or redt-tcp (every node of the
    /// cluster must run the same). With redt-tcp the node serves its MemStore to the other
    /// nodes of its DC over TCP on the port of its QUIC endpoint and reaches theirs the
    /// same way, instead of through the shared-memory files (RedT §6.5).
    #[arg(long, default_value = "redt", value_parser = Protocol::from_str)]
    pub protocol: Protocol,
    /// The largest difference between two nodes' wall clocks, as NTP keeps it (humantime:
    /// `250ms`, `1s`; overrides the topology file's `timeouts.clock_skew_bound`, default
    /// 250 ms). Recovery of a transaction whose coordinator died waits this long past its
    /// phase-1 deadline; every node of the cluster must use the same.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = bounded_duration)]
    pub clock_skew_bound: Option<Duration>,
    /// How long a coordinator waits for the votes of phase 1 before it decides with what it
    /// has (humantime; overrides the topology file's `timeouts.phase1_timeout`, default 10 ×
    /// the topology's largest RTT, at least 500 ms). Executors refuse to vote past it, and
    /// recovery waits for it; every node of the cluster must use the same.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = positive_duration)]
    pub phase1_timeout: Option<Duration>,
    /// Serve Prometheus metrics over HTTP at this address (`GET /metrics`; overrides the
    /// topology file's: the node's own `metrics` address, else `metrics.port` at its own
    /// IP). The file's `metrics:` limits apply wherever it listens.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve the gRPC client API (`redt.v1`) at this address (overrides the topology file's:
    /// the node's own `grpc` address, else `grpc.port` at its own IP). The file's
    /// `transport:` caps and deadlines apply to it.
    #[arg(long, value_name = "IP:PORT")]
    pub grpc_addr: Option<SocketAddr>,
}

/// Bytes a gRPC request message may carry beyond `limits.max_bytes_per_txn` (its framing and
/// the fields around the values).
const GRPC_MESSAGE_SLACK: usize = 64 << 10;

/// A humantime duration of at most 24 h ([`TimeoutsConfig::MAX`], as in the topology file).
fn bounded_duration(s: &str) -> std::result::Result<Duration, String> {
    let d = crate::cmd::duration::span(s)?;
    if d > TimeoutsConfig::MAX {
        return Err(format!("must be at most {}", humantime::format_duration(TimeoutsConfig::MAX)));
    }
    Ok(d)
}

/// A humantime duration above zero and at most 24 h.
fn positive_duration(s: &str) -> std::result::Result<Duration, String> {
    match bounded_duration(s)? {
        d if d.is_zero() => Err("must be above zero".into()),
        d => Ok(d),
    }
}

/// The timeouts a node of `topo` runs with: the file's `timeouts:` section (`config` names it
/// in errors), then the command line's `--clock-skew-bound` and `--phase1-timeout` over it,
/// over the topology-derived defaults ([`NodeTimeouts::resolve`]).
fn node_timeouts(topo: &Topology, config: &Path, timing: &Timing) -> Result<NodeTimeouts> {
    let mut set = topo.timeouts.clone();
    if let Some(bound) = timing.clock_skew_bound {
        set.clock_skew_bound = Some(bound);
    }
    if let Some(t) = timing.phase1_timeout {
        set.phase1_timeout = Some(t);
    }
    NodeTimeouts::resolve(topo, &set).with_context(|| format!("{}: the timeouts", config.display()))
}

/// `redt cluster` subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Starts one `redt node` process per node of the topology on this host.
    Up {
        /// Topology file.
        #[arg(long)]
        config: PathBuf,
        /// Run directory (certificates, logs, pid files).
        #[arg(long, default_value = "run")]
        run_dir: PathBuf,
        /// Records per partition of the first table to load.
        #[arg(long, default_value_t = 16384)]
        records_per_partition: u64,
        /// Directory of the shared-memory MemStore files.
        #[arg(long, default_value = "/dev/shm")]
        shm_dir: PathBuf,
        /// Commit protocol every node runs: redt, 2pc-paxos, ep-paxos, tapir or redt-tcp.
        #[arg(long, default_value = "redt", value_parser = Protocol::from_str)]
        protocol: Protocol,
        /// The largest difference between two nodes' wall clocks (humantime; passed to every
        /// `redt node`; overrides the file's `timeouts.clock_skew_bound`, default 250 ms).
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = bounded_duration)]
        clock_skew_bound: Option<Duration>,
        /// Phase-1 timeout of every coordinator (humantime; passed to every `redt node`;
        /// overrides the file's `timeouts.phase1_timeout`, default 10 × the topology's
        /// largest RTT, at least 500 ms).
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = positive_duration)]
        phase1_timeout: Option<Duration>,
        /// Start every node with `--no-failover`: a dead DC stays in the placement (its
        /// partitions wait for it) instead of being removed in a new epoch.
        #[arg(long)]
        no_failover: bool,
        /// Start every node with `--takeover` (decided-holder takeover at its coordinators).
        #[arg(long)]
        takeover: bool,
        /// Start every node with `--batch N` (takeover with batches of at most N, 2 to 16).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=16))]
        batch: Option<u64>,
        /// TCP port of every node's metrics endpoint, at the node's own IP (its own `metrics`
        /// address's, else its `listen` IP; default: the node's own `metrics` port, else the
        /// file's `metrics.port`, else each node's QUIC port + 1). The endpoints are listed
        /// in `RUN_DIR/metrics-targets.json` (Prometheus file_sd).
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        metrics_port: Option<u16>,
        /// Serve no metrics.
        #[arg(long, conflicts_with = "metrics_port")]
        no_metrics: bool,
        /// TCP port of every node's gRPC endpoint (the `redt.v1` client API), at the node's
        /// own IP (its own `grpc` address's, else its `listen` IP). Default: what the file
        /// says (`grpc.port`, a node's own `grpc` address), else none. The endpoints are
        /// listed in `RUN_DIR/grpc-endpoints.json`.
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        grpc_port: Option<u16>,
    },
    /// Kills one node's process with SIGKILL, as a crash would (for drills; see also
    /// `redt bench ycsb --kill`).
    Kill {
        /// Run directory.
        #[arg(long, default_value = "run")]
        run_dir: PathBuf,
        /// The node's name.
        #[arg(long)]
        node: String,
    },
    /// Starts one node again on its MemStore, as `cluster up` started it, and waits until it
    /// serves.
    Start {
        /// Run directory.
        #[arg(long, default_value = "run")]
        run_dir: PathBuf,
        /// The node's name.
        #[arg(long)]
        node: String,
    },
    /// Stops the processes started by `cluster up` (and removes their MemStore files with
    /// `--wipe`).
    Down {
        /// Run directory.
        #[arg(long, default_value = "run")]
        run_dir: PathBuf,
        /// Also delete the shared-memory MemStore files.
        #[arg(long)]
        wipe: bool,
    },
}

/// `redt certs` subcommands.
#[derive(Subcommand, Debug)]
pub enum CertsCmd {
    /// Makes a cluster CA and one certificate per node, plus `redt-client` (client role) and
    /// `redt-operator` (operator role). The CA key goes beside the directory, not into it.
    Init {
        /// Topology file.
        #[arg(long)]
        config: PathBuf,
        /// Output directory (the one the nodes read: `ca.pem` and `<name>.pem`/`.key`).
        #[arg(long)]
        out: PathBuf,
        /// Where to write the CA's private key [default: OUT-ca/ca.key, beside OUT].
        #[arg(long, value_name = "FILE")]
        ca_key: Option<PathBuf>,
        /// Validity of every certificate issued [default: node 365d, client 365d, operator
        /// 90d; the CA 3650d].
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = validity)]
        valid_for: Option<Duration>,
    },
    /// Issues one certificate of a role with the cluster's CA into the certificate directory
    /// (`NAME.pem`, `NAME.key`, replacing existing ones; a running node picks up its own).
    Issue {
        /// The cluster's CA (a node's DC and address come from its topology file).
        #[command(flatten)]
        ca: CaSource,
        /// node (a node of the topology), client (transactions and status) or operator (also
        /// `netem set` and drills).
        #[arg(long, value_enum)]
        role: RoleArg,
        /// The certificate's name: a node's name for `node`; a DNS-name-shaped name otherwise.
        #[arg(long)]
        name: String,
        /// Validity [default: node 365d, client 365d, operator 90d].
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = validity)]
        valid_for: Option<Duration>,
    },
    /// Issues every node's certificate again, and `redt-client`'s and `redt-operator`'s, with
    /// the same CA: running nodes pick up their new certificate within 2 s (or at SIGHUP) for
    /// new connections; connections already open go on.
    Rotate {
        /// The cluster's CA.
        #[command(flatten)]
        ca: CaSource,
        /// Validity of every certificate issued [default: node 365d, client 365d, operator
        /// 90d].
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = validity)]
        valid_for: Option<Duration>,
    },
}

/// Where `redt certs issue|rotate` find the cluster's CA.
#[derive(Args, Debug)]
pub struct CaSource {
    /// Topology file (its name names the CA).
    #[arg(long)]
    config: PathBuf,
    /// Certificate directory (with `ca.pem`).
    #[arg(long, default_value = "run/certs")]
    certs: PathBuf,
    /// The CA's private key [default: CERTS-ca/ca.key, else CERTS/ca.key].
    #[arg(long, value_name = "FILE")]
    ca_key: Option<PathBuf>,
}

impl CaSource {
    /// The topology and the CA it names, loaded from the certificate directory and the key.
    fn load(&self) -> Result<(Topology, ClusterCa)> {
        let topo = load_topology(Some(&self.config))?;
        let key = find_ca_key(&self.certs, self.ca_key.as_deref());
        let ca = ClusterCa::load(&topo.name, &self.certs, &key)?;
        Ok((topo, ca))
    }
}

/// `redt certs issue --role`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleArg {
    /// A node of the topology.
    Node,
    /// Transactions and status.
    Client,
    /// Transactions, status and admin requests.
    Operator,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::Node => Role::Node,
            RoleArg::Client => Role::Client,
            RoleArg::Operator => Role::Operator,
        }
    }
}

/// A certificate's validity: a humantime duration above zero (`90d`, `12h`) and at most
/// 100 years.
fn validity(s: &str) -> std::result::Result<Duration, String> {
    let d = crate::cmd::duration::span(s)?;
    if d.is_zero() {
        return Err("must be above zero".into());
    }
    if d > Duration::from_secs(36_500 * 86_400) {
        return Err("must be at most 100 years".into());
    }
    Ok(d)
}

fn shm_prefix(topo: &Topology) -> String {
    format!("redt-{}-e{}", topo.name, topo.epoch.0)
}

/// Under `durability: disk`: attaches every mapped MemStore's disk image and, when this
/// node's region holds no MemStore (its shared-memory file is gone: the host lost its
/// memory) while its image holds one, loads the image and restores it (`restore.rs`).
fn restore_from_disk(
    topo: &Topology,
    shm: &LocalVerbs,
    shm_dir: &Path,
    disk_dir: &Path,
    me: NodeId,
    name: &str,
) -> Result<()> {
    let attached = shm
        .attach_disk_images(shm_dir, disk_dir, &shm_prefix(topo))
        .with_context(|| format!("opening the disk images in {}", disk_dir.display()))?;
    let region = shm.region(me).context("own region")?;
    let existed = attached.iter().any(|&(n, e)| n == me && e);
    let persistence = region.persistence().context("own disk image")?.clone();
    let unformatted = region.word(0).load(std::sync::atomic::Ordering::Acquire) == 0;
    if existed && unformatted && persistence.read_word(0)? == redt_dc_executor::MAGIC {
        let started = std::time::Instant::now();
        persistence.load_into(region.as_ref())?;
        let layout = Layout::from_config(&topo.memstore);
        let catalog = redt_dc_executor::Catalog::new(&topo.tables);
        let ordered = redt_dc_executor::OrderedIndex::new(
            layout,
            &topo.tables,
            redt_dc_executor::Partitioner::new(&topo.tables, topo.partitions.len() as u32),
            0,
        );
        let r = redt_dc_executor::restore(&layout, &catalog, &ordered, region, me)?;
        region.sync()?;
        eprintln!(
            "{name}: restored from {} in {} ms: ring [{}, {}), {} entries, {} relocked, {} records lost",
            persistence.name(),
            started.elapsed().as_millis(),
            r.head,
            r.tail,
            r.entries,
            r.relocked,
            r.lost_records
        );
    }
    Ok(())
}

/// Runs one node until SIGINT or SIGTERM.
pub fn node(a: &NodeArgs) -> Result<()> {
    let topo = Arc::new(load_topology(Some(&a.config))?);
    let me = topo
        .node_by_name(&a.node)
        .with_context(|| {
            format!("{}: no node named `{}` (its nodes: {})", a.config.display(), a.node, node_names(&topo))
        })?
        .clone();
    let dc = &topo.dcs[me.dc.0 as usize];
    let timing = Timing { clock_skew_bound: a.clock_skew_bound, phase1_timeout: a.phase1_timeout };
    let timeouts = node_timeouts(&topo, &a.config, &timing)?;
    // Held until the process ends: the kernel releases it however the node stops.
    let _pid_lock = a.pid_file.as_deref().map(super::pidfile::PidLock::acquire).transpose()?;
    let layout = Layout::from_config(&topo.memstore);
    // `redt-tcp` is RedT over the TCP verbs everywhere (RedT §6.5); otherwise each DC's
    // `backend:` says.
    let backend = if a.protocol == Protocol::RedtTcp { VerbsBackend::Tcp } else { dc.backend };
    if backend == VerbsBackend::Rdma {
        check_backends(&topo, &a.config)?;
    }
    let metrics_addr = a.metrics_addr.or_else(|| topo.metrics_addr(me.id));
    let grpc_addr = a.grpc_addr.or_else(|| topo.grpc_addr(me.id));
    let prefix = shm_prefix(&topo);
    // Every backend keeps this node's own MemStore in its own file under --shm-dir (so a
    // restarted node finds it); only `shm` maps the other nodes' files too, and never
    // creates one (two hosts of one DC would each make a copy of the other's).
    std::fs::create_dir_all(&a.shm_dir)
        .with_context(|| format!("creating the MemStore directory {}", a.shm_dir.display()))?;
    let peers_here: Vec<(NodeId, String)> = match backend {
        VerbsBackend::Shm => dc.nodes.iter().filter(|&&n| n != me.id).map(|&n| (n, topo.node_name(n))).collect(),
        VerbsBackend::Tcp | VerbsBackend::Rdma => Vec::new(),
    };
    let (shm, missing) = LocalVerbs::open_dc_shared(&a.shm_dir, &prefix, me.id, peers_here, layout.size)
        .with_context(|| format!("mapping {}'s MemStore file", me.name))?;
    for (peer, name) in &missing {
        println!(
            "{}: {name}'s MemStore file {} is not there yet; it is mapped once {name} has made it \
             (with `backend: shm` every node of {} runs on this host and makes its own; verbs to {name} \
             fail until then)",
            me.name,
            redt_dc_executor::verbs::shared_file(&a.shm_dir, &prefix, *peer).display(),
            dc.name
        );
    }
    let shm = Arc::new(shm);
    let region = shm.region(me.id).context("own region")?.clone();
    if topo.durability == redt_proto::Durability::Disk {
        // Every mapped MemStore gets its disk image (the own one, and under `shm` the DC's
        // others, whose dirty pages this node's writes mark too).
        restore_from_disk(&topo, &shm, &a.shm_dir, &a.disk_dir, me.id, &me.name)?;
    }
    let fresh = format_if_new(&layout, me.id, &region).map_err(|e| anyhow::anyhow!(e.named(&topo)))?;
    if !fresh && dc.nodes.len() == 1 {
        // Started again on the MemStore a killed process left: an `Intent` entry may list
        // locks it never took. Settled from the ring before the node serves; only this
        // process reaches the MemStore of a DC's only node (`relock.rs`).
        let r = redt_dc_executor::relock_after_restart(shm.as_ref(), &layout, me.id)
            .with_context(|| format!("settling the lock words of {}", me.name))?;
        if r.changed > 0 || r.intents_released > 0 {
            tracing::warn!(
                node = %me.name,
                changed = r.changed,
                words = r.words,
                intents = r.intents_released,
                "settled the lock words named by its ring (a killed process left them): its Intent entries release nothing"
            );
        }
    }
    let identity = load_identity(&a.certs, &me.name)?;
    // An expired certificate, one the CA did not sign or a key that does not fit is named
    // here, not in the first peer's handshake.
    check_identity(&identity, std::time::SystemTime::now())
        .with_context(|| format!("the certificate of {} in {}", me.name, a.certs.display()))?;
    let mut server = None;
    let mut verbs_tls_handle = None;
    let peers = || dc.nodes.iter().filter(|&&n| n != me.id).map(|&n| (n, topo.nodes[n.0 as usize].advertise.clone()));
    let verbs: Arc<dyn Verbs> = match backend {
        VerbsBackend::Shm => shm.clone(),
        VerbsBackend::Tcp => {
            // The MemStore is served over TLS to the nodes of this DC only.
            let tls = verbs_tls(&identity, &topo, me.id)
                .with_context(|| format!("the verbs TLS of {} (certificates in {})", me.name, a.certs.display()))?;
            verbs_tls_handle = Some(tls.clone());
            // TCP and UDP ports are separate spaces: the server takes the QUIC endpoint's port.
            let limits = ServerLimits::from_config(&topo.verbs);
            server = Some(
                TcpVerbsServer::spawn_with_limits(me.listen, me.id, shm.clone(), tls.clone(), limits)
                    .with_context(|| format!("serving the MemStore over TCP at {}", me.listen))?,
            );
            // Connections leave from the node's own listen address when it has one: the
            // peers' per-peer caps count this node alone even when the DC's nodes share a
            // host. Peers advertising a host name are resolved at each connection.
            Arc::new(TcpVerbs::new(me.id, shm.clone(), peers(), tls).with_source_ip(me.listen.ip()))
        }
        VerbsBackend::Rdma => rdma_verbs(&identity, &topo, &me, region.clone(), peers().collect())?,
    };
    let handle = Arc::new(DcHandle::new(&topo, verbs));
    if fresh && a.records_per_partition > 0 {
        let table = topo.tables.first().context("the topology declares no table")?;
        let total = a.records_per_partition * topo.partitions.len() as u64;
        let mut n = 0u64;
        for key in 0..total {
            let p = topo.partition_of(table, key);
            if topo.partitions[p.0 as usize].replicas.contains(&me.id) {
                handle.insert_record(me.id, table.id, key, &[])?;
                n += 1;
            }
        }
        eprintln!("{}: loaded {n} records of {}", me.name, table.name);
    }
    let rt = runtime()?;
    rt.block_on(async {
        let wan = Arc::new(Mutex::new(WanModel::from_topology(&topo)));
        register_named_peers(&topo, &wan);
        let socket =
            NetemSocket::bind(me.listen, me.dc, wan.clone()).with_context(|| format!("binding {}", me.listen))?;
        // `metrics.tls`: the endpoint presents this node's certificate, rotated with it.
        let metrics = metrics_addr
            .map(|addr| MetricsEndpoint::new(addr, &topo.metrics, &identity))
            .transpose()
            .with_context(|| format!("the metrics TLS of {} (certificates in {})", me.name, a.certs.display()))?;
        let metrics_tls = metrics.as_ref().and_then(|m| m.tls.clone());
        let options = timeouts.apply(CoordinatorOptions {
            protocol: a.protocol,
            early_ack: !a.no_early_ack,
            takeover: a.takeover || a.batch.is_some(),
            batch: a.batch.unwrap_or(0) as usize,
            // Failover runs the RedT protocol's epochs; the baselines keep their placement.
            failover: !a.no_failover && a.protocol == Protocol::Redt,
            ..CoordinatorOptions::default()
        });
        let data_dir = a.data_dir.clone().unwrap_or_else(|| PathBuf::from("run/data").join(&me.name));
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
        let bound = NodeSpec {
            topology: topo.clone(),
            node: me.id,
            dc: handle,
            region,
            identity: &identity,
            socket: SocketSpec::Custom(socket),
            wan,
            options,
            stats: Arc::new(TxnStats::default()),
            data_dir: Some(data_dir),
            verbs_server: server.as_ref().map(TcpVerbsServer::counts_handle),
            metrics,
        }
        .bind()?;
        let verbs_rotation = verbs_tls_handle.clone().map(|tls| (tls, topo.clone(), me.id));
        let transport = bound.transport().clone();
        let grpc_tls = grpc_addr
            .map(|_| redt_grpc::GrpcTls::new(&identity))
            .transpose()
            .with_context(|| format!("the gRPC TLS of {}", me.name))?;
        let reload =
            spawn_reload(transport.clone(), &a.certs, &me.name, verbs_rotation, metrics_tls.clone(), grpc_tls.clone())?;
        let node = bound.start().map_err(|e| anyhow::anyhow!(e.named(&topo)))?;
        if let Some(server) = &node.metrics {
            let scheme = if metrics_tls.is_some() { "https" } else { "http" };
            println!("{} metrics at {scheme}://{}/metrics", me.name, server.local_addr());
        }
        let grpc = match grpc_addr.zip(grpc_tls) {
            None => None,
            Some((addr, tls)) => {
                let service = redt_grpc::TransactionsService::new(
                    node.node.handler(),
                    (*transport).clone(),
                    topo.clone(),
                    topo.transport.handler_timeout,
                );
                let max_message = usize::try_from(topo.limits.max_bytes_per_txn)
                    .unwrap_or(usize::MAX)
                    .saturating_add(GRPC_MESSAGE_SLACK);
                let server = redt_grpc::GrpcServer::spawn(addr, tls, service, &topo.transport, max_message)
                    .await
                    .with_context(|| format!("the gRPC endpoint of {}", me.name))?;
                println!("{} gRPC at {}", me.name, server.local_addr());
                Some(server)
            }
        };
        println!(
            "{} ready on {} (advertised as {}; dc {}, backend {backend}, protocol {}, pid {})",
            me.name,
            me.listen,
            me.advertise,
            dc.name,
            a.protocol,
            std::process::id()
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        println!("{} stopping", me.name);
        if let Some(g) = &grpc {
            g.shutdown();
        }
        reload.abort();
        node.shutdown();
        if let Some(server) = &server {
            server.shutdown();
        }
        anyhow::Ok(())
    })
}

/// Checks that this `redt` can run every DC's `backend:` of `topo` (read from `config`): an
/// `rdma` DC needs a build with the `rdma` feature.
///
/// # Errors
/// The first DC with `backend: rdma` when this build has no RDMA, saying how to rebuild.
pub fn check_backends(topo: &Topology, config: &Path) -> Result<()> {
    if cfg!(feature = "rdma") {
        return Ok(());
    }
    if let Some(dc) = topo.dcs.iter().find(|d| d.backend == VerbsBackend::Rdma) {
        bail!(
            "{}: {} has `backend: rdma`, but this redt was built without RDMA: rebuild it with \
             `cargo build --release --features rdma` (docs/rdma.md lists the build dependencies)",
            config.display(),
            dc.name
        );
    }
    Ok(())
}

/// Registers in `wan` the addresses the peers advertising a host name resolve to now, so the
/// user-space netem delays datagrams to them too; a name that does not resolve yet is left
/// out (its link is not emulated), with a warning.
fn register_named_peers(topo: &Topology, wan: &Mutex<WanModel>) {
    for n in topo.nodes.iter().filter(|n| n.advertise.ip().is_none()) {
        match n.advertise.resolve() {
            Ok(addrs) => {
                let mut wan = wan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for addr in addrs {
                    wan.register_addr(addr, n.dc);
                    wan.register_ip(addr.ip(), n.dc);
                }
            }
            Err(e) => tracing::warn!(
                node = %n.name,
                error = %e,
                "no emulated WAN link to this peer: its advertise name does not resolve yet"
            ),
        }
    }
}

/// The RDMA verbs of node `me` (`backend: rdma`): its region registered with the RNIC, one
/// queue pair per node of its DC, set up over a TLS bootstrap listening on its `listen` TCP
/// port and dialing the peers' `advertise` addresses (resolved now).
#[cfg(feature = "rdma")]
fn rdma_verbs(
    identity: &redt_transport::NodeIdentity,
    topo: &Topology,
    me: &redt_proto::NodeEntry,
    region: Arc<redt_dc_executor::Region>,
    peers: Vec<(NodeId, redt_proto::HostPort)>,
) -> Result<Arc<dyn Verbs>> {
    use redt_dc_executor::verbs::rdma::RdmaVerbs;
    let tls = verbs_tls(identity, topo, me.id).with_context(|| format!("the verbs TLS of {}", me.name))?;
    let mut resolved = Vec::new();
    for (n, at) in peers {
        let addr = at
            .resolve_for(me.listen)
            .with_context(|| format!("the RDMA bootstrap address of {}", topo.node_name(n)))?;
        resolved.push((n, addr));
    }
    let verbs = RdmaVerbs::connect(me.id, region, &resolved, me.listen, &tls)
        .with_context(|| format!("connecting {}'s RDMA verbs", me.name))?;
    Ok(Arc::new(verbs))
}

/// Without the `rdma` feature `node` refuses `backend: rdma` before it gets here.
#[cfg(not(feature = "rdma"))]
fn rdma_verbs(
    _identity: &redt_transport::NodeIdentity,
    _topo: &Topology,
    me: &redt_proto::NodeEntry,
    _region: Arc<redt_dc_executor::Region>,
    _peers: Vec<(NodeId, redt_proto::HostPort)>,
) -> Result<Arc<dyn Verbs>> {
    bail!("{}: this redt was built without RDMA: rebuild it with `cargo build --release --features rdma`", me.name)
}

/// How often `redt node` looks at its certificate files for a rotation.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// Starts the task that rotates `transport`'s certificate: every [`RELOAD_EVERY`],
/// and at once on SIGHUP, it loads the identity `name` of `certs` again if its files changed
/// (SIGHUP: whether or not) and, if it checks, uses it for new connections. Each reload, and
/// each refusal (the old certificate stays), is printed to the node's log.
/// Watches this node's certificate files (every [`RELOAD_EVERY`] and at SIGHUP) and, when
/// they changed and check, gives the new certificate to the QUIC endpoint, under `redt-tcp`
/// to the in-DC verbs TLS (`verbs`: the TLS, the topology and this node), with
/// `metrics.tls` to the metrics endpoint (`metrics`), and to the gRPC endpoint (`grpc`), so
/// new connections of each use it.
fn spawn_reload(
    transport: Arc<Transport>,
    certs: &Path,
    name: &str,
    verbs: Option<(VerbsTls, Arc<Topology>, NodeId)>,
    metrics: Option<MetricsTls>,
    grpc: Option<redt_grpc::GrpcTls>,
) -> Result<tokio::task::JoinHandle<()>> {
    let certs_dir = certs.to_path_buf();
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut watch = IdentityWatch::new(certs, name);
    let name = name.to_string();
    Ok(tokio::spawn(async move {
        loop {
            let forced = tokio::select! {
                _ = tokio::time::sleep(RELOAD_EVERY) => false,
                _ = hup.recv() => true,
            };
            let now = std::time::SystemTime::now();
            let result = if forced { Some(watch.reload(&transport, now)) } else { watch.poll(&transport, now) };
            match result {
                None => {}
                Some(Ok(s)) => {
                    if let Some((tls, topo, me)) = &verbs {
                        let rotated = load_identity(&certs_dir, &name)
                            .map_err(anyhow::Error::from)
                            .and_then(|id| Ok(verbs_tls(&id, topo, *me)?))
                            .and_then(|new| Ok(tls.rotate(&new)?));
                        if let Err(e) = rotated {
                            tracing::warn!(node = %name, error = %e, "verbs TLS not rotated; it keeps the current certificate");
                        }
                    }
                    if let Some(tls) = &metrics {
                        let rotated = load_identity(&certs_dir, &name)
                            .map_err(anyhow::Error::from)
                            .and_then(|id| Ok(tls.rotate(&id)?));
                        if let Err(e) = rotated {
                            tracing::warn!(node = %name, error = %e, "metrics TLS not rotated; it keeps the current certificate");
                        }
                    }
                    if let Some(tls) = &grpc {
                        let rotated = load_identity(&certs_dir, &name)
                            .map_err(anyhow::Error::from)
                            .and_then(|id| Ok(tls.rotate(&id)?));
                        if let Err(e) = rotated {
                            tracing::warn!(node = %name, error = %e, "gRPC TLS not rotated; it keeps the current certificate");
                        }
                    }
                    tracing::info!(node = %name, serial = %s.serial_hex(), "certificate reloaded");
                    println!(
                        "{name} reloaded its certificate: serial {}, valid until {}; new connections use it",
                        s.serial_hex(),
                        humantime::format_rfc3339_seconds(s.not_after)
                    );
                }
                Some(Err(e)) => {
                    tracing::warn!(node = %name, error = %e, "certificate not reloaded; keeping the current one");
                    println!("{name} did not reload its certificate ({e}); it keeps the current one");
                }
            }
        }
    }))
}

/// Runs a `redt cluster` subcommand.
pub fn cluster(cmd: &ClusterCmd) -> Result<()> {
    match cmd {
        ClusterCmd::Up {
            config,
            run_dir,
            records_per_partition,
            shm_dir,
            protocol,
            clock_skew_bound,
            phase1_timeout,
            no_failover,
            takeover,
            batch,
            metrics_port,
            no_metrics,
            grpc_port,
        } => up(
            config,
            run_dir,
            *records_per_partition,
            shm_dir,
            *protocol,
            Timing { clock_skew_bound: *clock_skew_bound, phase1_timeout: *phase1_timeout },
            NodeFlags { no_failover: *no_failover, takeover: *takeover, batch: *batch },
            if *no_metrics { Metrics::Off } else { Metrics::On(*metrics_port) },
            *grpc_port,
        ),
        ClusterCmd::Down { run_dir, wipe } => down(run_dir, *wipe),
        ClusterCmd::Kill { run_dir, node } => {
            let pid = kill_node(run_dir, node)?;
            println!("killed {node} (pid {pid}); `redt cluster start --node {node}` starts it again");
            Ok(())
        }
        ClusterCmd::Start { run_dir, node } => {
            let pid = start_node(run_dir, node)?;
            println!("{node} started again (pid {pid})");
            Ok(())
        }
    }
}

/// Runs a `redt certs` subcommand.
pub fn certs(cmd: &CertsCmd) -> Result<()> {
    match cmd {
        CertsCmd::Init { config, out, ca_key, valid_for } => {
            let topo = load_topology(Some(config))?;
            let key = ca_key.clone().unwrap_or_else(|| default_ca_key_path(out));
            let written = init_cluster_certs_with(&topo, out, Some(&key), *valid_for)?;
            println!(
                "wrote the cluster CA (certificate {}, valid {}; key {}) and {} certificates to {}:",
                out.join("ca.pem").display(),
                humantime::format_duration(CA_VALIDITY),
                key.display(),
                written.len(),
                out.display()
            );
            print_written(&written);
            println!("keep {} off the nodes: only `redt certs issue|rotate` need it", key.display());
            Ok(())
        }
        CertsCmd::Issue { ca: source, role, name, valid_for } => {
            let (topo, ca) = source.load()?;
            let (config, certs) = (&source.config, &source.certs);
            let role = Role::from(*role);
            let (identity, ip) = match role {
                Role::Node => {
                    let n = topo.node_by_name(name).with_context(|| {
                        format!("{}: no node named `{name}` (its nodes: {})", config.display(), node_names(&topo))
                    })?;
                    let dc = topo.dcs[usize::from(n.dc.0)].name.clone();
                    (CertIdentity::Node { dc, name: name.clone() }, node_ip(n))
                }
                Role::Client => (CertIdentity::Client { name: name.clone() }, None),
                Role::Operator => (CertIdentity::Operator { name: name.clone() }, None),
            };
            if role != Role::Node && topo.node_by_name(name).is_some() {
                bail!(
                    "`{name}` is a node's name: a {role} certificate needs another (the file would replace the node's)"
                );
            }
            let validity = Validity::starting_now(valid_for.unwrap_or_else(|| role.default_validity()));
            let written = ca.write_identity(certs, &identity, ip, validity)?;
            print_written(std::slice::from_ref(&written));
            Ok(())
        }
        CertsCmd::Rotate { ca: source, valid_for } => {
            let (topo, ca) = source.load()?;
            let certs = &source.certs;
            let written = ca.write_all(certs, &topo, *valid_for)?;
            println!("issued again with the CA of {} ({} certificates):", certs.display(), written.len());
            print_written(&written);
            println!("running nodes use theirs for new connections within 2 s (SIGHUP: at once)");
            Ok(())
        }
    }
}

/// Prints one line per certificate written: its file, identity and validity.
fn print_written(written: &[WrittenCert]) {
    for w in written {
        let days = w.validity.not_after.duration_since(w.validity.not_before).unwrap_or_default().as_secs() / 86_400;
        println!(
            "  {}  {}  valid {} to {} (~{days}d)",
            w.cert_path.display(),
            w.identity.to_uri(),
            humantime::format_rfc3339_seconds(w.validity.not_before),
            humantime::format_rfc3339_seconds(w.validity.not_after),
        );
    }
}

/// The timing options `redt cluster up` passes on to every node (unset: the node's default).
struct Timing {
    clock_skew_bound: Option<Duration>,
    phase1_timeout: Option<Duration>,
}

/// Whether `redt cluster up` has its nodes serve metrics, and at which port (`None`: the
/// node's own `metrics` address or the file's port, else each node's QUIC port + 1).
enum Metrics {
    Off,
    On(Option<u16>),
}

/// Where each node of `topo` serves its metrics under `metrics`, by node id (empty when off):
/// at the node's own `metrics` IP, else its `listen` IP; at the `--metrics-port` given, else
/// the node's own `metrics` port, else the file's `metrics.port`, else its QUIC port + 1.
///
/// # Errors
/// A default port past 65535, or two nodes on one IP given the same port.
fn metrics_addrs(topo: &Topology, metrics: &Metrics) -> Result<Vec<SocketAddr>> {
    let Metrics::On(port) = metrics else { return Ok(Vec::new()) };
    let mut addrs = Vec::new();
    for n in &topo.nodes {
        let own = n.metrics;
        let port = match port.or(own.map(|a| a.port())).or(topo.metrics.port) {
            Some(p) => p,
            None => n
                .listen
                .port()
                .checked_add(1)
                .with_context(|| format!("{} listens on port 65535, so its metrics need --metrics-port", n.name))?,
        };
        let addr = SocketAddr::new(own.map_or(n.listen.ip(), |a| a.ip()), port);
        if let Some(other) = addrs.iter().position(|a| *a == addr) {
            bail!(
                "{} and {} would both serve metrics at {addr}: give them distinct IPs or --no-metrics",
                topo.nodes[other].name,
                n.name
            );
        }
        addrs.push(addr);
    }
    Ok(addrs)
}

/// Every node's gRPC address for `cluster up`, by node id: at `port` when given (at the
/// node's own `grpc` IP, else its `listen` IP), else the file's ([`Topology::grpc_addr`]);
/// `None` for a node that serves none.
///
/// # Errors
/// Two nodes given one address, or one that is another node's QUIC or metrics address.
fn grpc_addrs(topo: &Topology, port: Option<u16>) -> Result<Vec<Option<SocketAddr>>> {
    let addrs: Vec<Option<SocketAddr>> = topo
        .nodes
        .iter()
        .map(|n| match port {
            Some(p) => Some(SocketAddr::new(n.grpc.map_or(n.listen.ip(), |a| a.ip()), p)),
            None => topo.grpc_addr(n.id),
        })
        .collect();
    for (i, a) in addrs.iter().enumerate() {
        let Some(a) = a else { continue };
        if let Some(j) = addrs[..i].iter().position(|b| b.as_ref() == Some(a)) {
            bail!(
                "{} and {} would both serve gRPC at {a}: give them distinct IPs",
                topo.nodes[j].name,
                topo.nodes[i].name
            );
        }
        if let Some(n) = topo.nodes.iter().find(|n| n.listen == *a) {
            bail!("{a} is the QUIC port of {}: choose another --grpc-port", n.name);
        }
    }
    Ok(addrs)
}

/// The file listing every node's gRPC endpoint: `[{"node", "dc", "addr"}]` in node order.
fn grpc_endpoints_file(run_dir: &Path) -> PathBuf {
    run_dir.join("grpc-endpoints.json")
}

/// The switches `cluster up` passes to every `redt node`.
#[derive(Clone, Copy, Debug)]
struct NodeFlags {
    /// `--no-failover`.
    no_failover: bool,
    /// `--takeover`.
    takeover: bool,
    /// `--batch N`.
    batch: Option<u64>,
}

/// The file listing every node's metrics endpoint in Prometheus's file_sd format.
fn metrics_targets_file(run_dir: &Path) -> PathBuf {
    run_dir.join("metrics-targets.json")
}

#[allow(clippy::too_many_arguments)]
fn up(
    config: &Path,
    run_dir: &Path,
    rpp: u64,
    shm_dir: &Path,
    protocol: Protocol,
    timing: Timing,
    flags: NodeFlags,
    metrics: Metrics,
    grpc_port: Option<u16>,
) -> Result<()> {
    let topo = load_topology(Some(config))?;
    if protocol != Protocol::RedtTcp {
        check_backends(&topo, config)?;
    }
    // Every node resolves the same timeouts from the same file and flags; a bad combination
    // is refused here, before any node starts.
    node_timeouts(&topo, config, &timing)?;
    let metrics = metrics_addrs(&topo, &metrics)?;
    let grpc = grpc_addrs(&topo, grpc_port)?;
    for (n, g) in topo.nodes.iter().zip(&grpc) {
        if let Some((g, m)) = g.and_then(|g| Some((g, metrics.iter().position(|m| *m == g)?))) {
            bail!(
                "{} would serve gRPC at {g}, where {} serves its metrics: choose another --grpc-port (or --metrics-port)",
                n.name,
                topo.nodes[m].name
            );
        }
    }
    let pids = run_dir.join("pids");
    if pids.is_dir() {
        for e in std::fs::read_dir(&pids)? {
            let path = e?.path();
            if let Some(pid) = super::pidfile::holder(&path) {
                bail!(
                    "{} is held by a running node (pid {pid}): a cluster is up (run `redt cluster down --run-dir {}` first)",
                    path.display(),
                    run_dir.display()
                );
            }
            // A node that ended without `cluster down` left it.
            std::fs::remove_file(&path)?;
        }
    }
    let certs = run_dir.join("certs");
    if !certs.join("ca.pem").exists() {
        init_cluster_certs(&topo, &certs)?;
    }
    let logs = run_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    std::fs::create_dir_all(&pids)?;
    std::fs::write(run_dir.join("config.path"), config.canonicalize()?.display().to_string())?;
    std::fs::create_dir_all(shm_dir)
        .with_context(|| format!("creating the MemStore directory {}", shm_dir.display()))?;
    std::fs::write(run_dir.join("shm.path"), std::path::absolute(shm_dir)?.display().to_string())?;
    std::fs::create_dir_all(run_dir.join("args"))?;
    let mut children = Vec::with_capacity(topo.nodes.len());
    for n in &topo.nodes {
        let mut args: Vec<String> = vec!["node".into(), "--node".into(), n.name.clone()];
        args.extend(["--config".into(), std::path::absolute(config)?.display().to_string()]);
        args.extend(["--certs".into(), std::path::absolute(&certs)?.display().to_string()]);
        args.extend(["--shm-dir".into(), std::path::absolute(shm_dir)?.display().to_string()]);
        let data = std::path::absolute(run_dir.join("data").join(&n.name))?;
        args.extend(["--data-dir".into(), data.display().to_string()]);
        let disk = std::path::absolute(run_dir.join("disk"))?;
        args.extend(["--disk-dir".into(), disk.display().to_string()]);
        args.extend(["--pid-file".into(), std::path::absolute(pid_file(run_dir, &n.name))?.display().to_string()]);
        args.extend(["--records-per-partition".into(), rpp.to_string()]);
        args.extend(["--protocol".into(), protocol.name().into()]);
        if flags.no_failover {
            args.push("--no-failover".into());
        }
        if flags.takeover {
            args.push("--takeover".into());
        }
        if let Some(n) = flags.batch {
            args.extend(["--batch".into(), n.to_string()]);
        }
        if let Some(bound) = timing.clock_skew_bound {
            args.extend(["--clock-skew-bound".into(), humantime::format_duration(bound).to_string()]);
        }
        if let Some(t) = timing.phase1_timeout {
            args.extend(["--phase1-timeout".into(), humantime::format_duration(t).to_string()]);
        }
        if let Some(addr) = metrics.get(n.id.0 as usize) {
            args.extend(["--metrics-addr".into(), addr.to_string()]);
        }
        if let Some(Some(addr)) = grpc.get(n.id.0 as usize) {
            args.extend(["--grpc-addr".into(), addr.to_string()]);
        }
        // The nodes log as `cluster up` was told to (`--log-format`); their log files get
        // no ANSI colours either way (standard error is a file, not a terminal).
        args.extend(["--log-format".into(), log_format().into()]);
        // One argument per line: `cluster start` runs the node again exactly so.
        std::fs::write(args_file(run_dir, &n.name), args.join("\n"))?;
        children.push(spawn_node(run_dir, &n.name, false)?);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for (n, child) in topo.nodes.iter().zip(&mut children) {
        if let Err(e) = wait_ready(run_dir, &n.name, child, deadline) {
            let _ = down(run_dir, false);
            return Err(e);
        }
    }
    println!(
        "cluster `{}` up: {} nodes in {} DCs running {protocol}; logs and pids under {}",
        topo.name,
        topo.nodes.len(),
        topo.dcs.len(),
        run_dir.display()
    );
    if rpp > 0 {
        record_load(&topo, &certs, rpp);
    }
    if !metrics.is_empty() {
        // Prometheus's file_sd format: one group per node (its `node` and `dc` labels come
        // with every sample, so the group adds only the cluster's name, and under
        // `metrics.tls` the scheme: the scrape config gives the CA to trust).
        let labels = if topo.metrics.tls {
            serde_json::json!({ "cluster": topo.name, "__scheme__": "https" })
        } else {
            serde_json::json!({ "cluster": topo.name })
        };
        let groups: Vec<serde_json::Value> =
            metrics.iter().map(|addr| serde_json::json!({ "targets": [addr.to_string()], "labels": labels })).collect();
        let targets = metrics_targets_file(run_dir);
        std::fs::write(&targets, serde_json::to_string_pretty(&groups)? + "\n")?;
        let scheme = if topo.metrics.tls { "https" } else { "http" };
        for (n, addr) in topo.nodes.iter().zip(&metrics) {
            println!("  {} metrics at {scheme}://{addr}/metrics", n.name);
        }
        println!("  (Prometheus file_sd targets: {})", targets.display());
    }
    if grpc.iter().any(Option::is_some) {
        let endpoints: Vec<serde_json::Value> = topo
            .nodes
            .iter()
            .zip(&grpc)
            .filter_map(|(n, a)| {
                let dc = &topo.dcs[n.dc.0 as usize].name;
                a.map(|a| serde_json::json!({ "node": n.name, "dc": dc, "addr": a.to_string() }))
            })
            .collect();
        let file = grpc_endpoints_file(run_dir);
        std::fs::write(&file, serde_json::to_string_pretty(&endpoints)? + "\n")?;
        println!("  gRPC endpoints (redt.v1) listed in {}", file.display());
    }
    std::io::stdout().flush()?;
    Ok(())
}

/// Records in the cluster that its nodes loaded `rpp` YCSB records per partition (the YCSB init
/// record `redt bench ycsb --cluster` and `redt workload run|check ycsb` read), with the client
/// certificate of `certs`; says so when it cannot (a topology without a `kv` table), as a
/// note: the cluster runs either way.
fn record_load(topo: &Topology, certs: &Path, rpp: u64) {
    let done = runtime().map_err(|e| e.to_string()).and_then(|rt| {
        rt.block_on(async {
            let target = redt_bench::workload::Target::connect(topo.clone(), certs)?;
            redt_bench::workload::ycsb::record_cluster_up_load(&target, rpp).await
        })
    });
    match done {
        Ok(()) => println!("  loaded {rpp} YCSB records per partition (recorded in the cluster for `redt workload`)"),
        Err(e) => println!("  note: the YCSB load is not recorded in the cluster: {e}"),
    }
}

/// The `--log-format` this process was started with, as `cluster up` passes it on.
static LOG_FORMAT: std::sync::OnceLock<crate::LogFormat> = std::sync::OnceLock::new();

/// Records the process's `--log-format` (once, at start-up) for the nodes `cluster up`
/// starts.
pub fn set_log_format(format: crate::LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// The `--log-format` value to give the nodes: `text` or `json`.
fn log_format() -> &'static str {
    match LOG_FORMAT.get() {
        Some(crate::LogFormat::Json) => "json",
        _ => "text",
    }
}

/// The file holding the arguments `cluster up` started `node` with, one per line.
fn args_file(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join("args").join(format!("{node}.args"))
}

fn pid_file(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join("pids").join(format!("{node}.pid"))
}

fn log_file(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join("logs").join(format!("{node}.log"))
}

/// The pid of `node`'s process if it runs (it holds its pid file's lock).
fn running_pid(run_dir: &Path, node: &str) -> Option<u32> {
    super::pidfile::holder(&pid_file(run_dir, node))
}

/// `node`'s process, just started, and where its lines begin in its log.
struct Started {
    child: std::process::Child,
    /// The log's length before the start.
    log_from: u64,
}

/// Starts `node`'s process with the arguments `cluster up` saved (its pid file among them),
/// its output going to its log (appended to when `append`, else truncated).
fn spawn_node(run_dir: &Path, node: &str, append: bool) -> Result<Started> {
    let file = args_file(run_dir, node);
    let args =
        std::fs::read_to_string(&file).with_context(|| format!("{} (written by `redt cluster up`)", file.display()))?;
    let log_path = log_file(run_dir, node);
    let log = std::fs::OpenOptions::new().create(true).append(append).write(true).truncate(!append).open(&log_path)?;
    let from = log.metadata()?.len();
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(args.lines()).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().with_context(|| format!("starting {node}"))?;
    Ok(Started { child, log_from: from })
}

/// Waits until `node`'s log says it is ready past where `started` began; fails with the
/// log's last lines if its process exits or `deadline` passes first.
fn wait_ready(run_dir: &Path, node: &str, started: &mut Started, deadline: Instant) -> Result<()> {
    let log = log_file(run_dir, node);
    let from = started.log_from;
    loop {
        let text = std::fs::read(&log).unwrap_or_default();
        let text = String::from_utf8_lossy(text.get(from as usize..).unwrap_or_default());
        if text.contains(" ready on ") {
            return Ok(());
        }
        if started.child.try_wait()?.is_some() || Instant::now() > deadline {
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            bail!(
                "{node} did not start; last lines of {}:\n{}",
                log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills `node`'s process with SIGKILL (no shutdown: what a crash leaves is what recovery
/// must handle) and waits until it is gone. Returns its pid.
///
/// # Errors
/// The node does not run (no live pid under the run directory).
pub fn kill_node(run_dir: &Path, node: &str) -> Result<u32> {
    let pid = running_pid(run_dir, node)
        .with_context(|| format!("{node} does not run (no live pid in {})", pid_file(run_dir, node).display()))?;
    super::pidfile::signal(pid, Signal::KILL).with_context(|| format!("killing {node}"))?;
    let t0 = Instant::now();
    while running_pid(run_dir, node).is_some() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(pid)
}

/// Starts `node` again on its MemStore (as `cluster up` started it; its log is appended to)
/// and waits until it serves. Returns its new pid.
///
/// # Errors
/// The node already runs; the run directory has no saved arguments for it (a cluster started
/// by an older `redt`); the process exits or is not ready within 120 s.
pub fn start_node(run_dir: &Path, node: &str) -> Result<u32> {
    if let Some(pid) = running_pid(run_dir, node) {
        bail!("{node} already runs (pid {pid})");
    }
    let mut started = spawn_node(run_dir, node, true)?;
    wait_ready(run_dir, node, &mut started, Instant::now() + Duration::from_secs(120))?;
    running_pid(run_dir, node).with_context(|| format!("{node} exited right after starting"))
}

fn down(run_dir: &Path, wipe: bool) -> Result<()> {
    // The endpoints it lists are gone with the nodes.
    let _ = std::fs::remove_file(metrics_targets_file(run_dir));
    let _ = std::fs::remove_file(grpc_endpoints_file(run_dir));
    let pids = run_dir.join("pids");
    let mut stopped = 0;
    if pids.is_dir() {
        for e in std::fs::read_dir(&pids)? {
            let path = e?.path();
            if let Some(pid) = super::pidfile::holder(&path) {
                let _ = super::pidfile::signal(pid, Signal::TERM);
                let t0 = Instant::now();
                while super::pidfile::holder(&path).is_some() && t0.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if let Some(pid) = super::pidfile::holder(&path) {
                    let _ = super::pidfile::signal(pid, Signal::KILL);
                }
                stopped += 1;
            }
            std::fs::remove_file(&path)?;
        }
    }
    if wipe {
        if let Ok(cfg) = std::fs::read_to_string(run_dir.join("config.path")) {
            let topo = load_topology(Some(Path::new(cfg.trim())))?;
            let prefix = shm_prefix(&topo);
            // The directory `cluster up` put the MemStore files in (older run dirs: /dev/shm).
            let shm_dir = std::fs::read_to_string(run_dir.join("shm.path"))
                .map(|s| PathBuf::from(s.trim()))
                .unwrap_or_else(|_| PathBuf::from("/dev/shm"));
            for n in &topo.nodes {
                let file = redt_dc_executor::verbs::shared_file(&shm_dir, &prefix, n.id);
                let mut bitmap = file.clone().into_os_string();
                bitmap.push(".dirty");
                let _ = std::fs::remove_file(&file);
                let _ = std::fs::remove_file(bitmap);
            }
        }
        // And their disk images (`durability: disk`).
        let _ = std::fs::remove_dir_all(run_dir.join("disk"));
        // The nodes' data directories (the membership's Raft logs) go with their MemStores.
        let _ = std::fs::remove_dir_all(run_dir.join("data"));
    }
    println!("cluster down: {stopped} node processes stopped");
    Ok(())
}
