//! Drills inside the embedded benches (`redt bench bank|tpcc --drill PLAN`):
//! the [`DrillPlan`] runs against an [`EmbeddedCluster`] while the bench's own clients go on,
//! measured by the same driver and report as a drill of a running cluster ([`crate::drill`]).
//!
//! - [`ClusterDriver`] carries the effects out in-process. A kill is a real stop of the node
//!   ([`EmbeddedCluster::kill`]: its QUIC endpoint closes and its tasks and threads stop, so
//!   it answers nothing) and a restart a new life of it on the same MemStore region, address
//!   and data directory ([`EmbeddedCluster::restart`]), as `redt cluster start --node` starts
//!   a killed process again. Partitions and slow links change the netem model every socket of
//!   the cluster shares.
//! - [`Coordinators`] routes a client to its home node, or while the drill has it down to the
//!   nearest node up (as the clients of `redt bench ycsb --cluster --drill` fail over).
//! - [`TimelineFeed`] takes the clients' answers to the drill's timeline, from the start of the
//!   measured interval on.
//! - [`EmbeddedDrill`] starts the drill at the start of the measured interval and, after it,
//!   heals every fault still in force, waits (bounded) until the cluster has settled — every
//!   node answers at one placement epoch, no undecided entry, catch-up or replay backlog
//!   left, every partition at its replication factor again — and reports; the bench then
//!   runs its checks on the current placement ([`EmbeddedCluster::placement`]).

use crate::drill::{
    self, Counts, DownSet, DrillReport, DrillSetup, EffectFuture, FaultDriver, LogLine, Timeline, Watch,
};
use crate::drill_plan::{DrillPlan, Effect};
use backon::{ExponentialBuilder, Retryable};
use redt_coordinator::{failover_order, Client, EmbeddedCluster, Node, NodeStatus, TxnStatus};
use redt_proto::{NodeId, PartitionId};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a node started again may take to answer a status request.
const SERVE_PATIENCE: Duration = Duration::from_secs(15);

/// How long a node may take to count its lock words after the drill (a scan of its index).
const LOCK_COUNT_PATIENCE: Duration = Duration::from_secs(60);

/// How long [`EmbeddedDrill::finish`] waits for the cluster to settle after the drill.
pub const SETTLE_PATIENCE: Duration = Duration::from_secs(180);

/// Carries out a plan's effects on an embedded cluster (see the module docs).
pub struct ClusterDriver {
    cluster: Arc<EmbeddedCluster>,
    /// Asks a restarted node whether it serves.
    probe: Arc<Client>,
}

impl ClusterDriver {
    /// A driver for `cluster`. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// The probe client's socket cannot bind, as text.
    pub fn new(cluster: Arc<EmbeddedCluster>) -> Result<Self, String> {
        let probe = Arc::new(cluster.client(Duration::from_millis(500)).map_err(|e| e.to_string())?);
        Ok(ClusterDriver { cluster, probe })
    }

    fn name(&self, n: NodeId) -> String {
        self.cluster.topology.nodes.get(n.0 as usize).map_or_else(|| n.to_string(), |x| x.name.clone())
    }

    fn dc(&self, d: redt_proto::DcId) -> String {
        self.cluster.topology.dcs.get(d.0 as usize).map_or_else(|| d.to_string(), |x| x.name.clone())
    }
}

/// Starts node `n` of `cluster` again and waits (up to [`SERVE_PATIENCE`]) until it answers a
/// status request over QUIC through `probe`; returns how long that took.
async fn restart(cluster: &Arc<EmbeddedCluster>, probe: &Arc<Client>, n: NodeId) -> Result<Duration, String> {
    let t0 = Instant::now();
    cluster.restart(n).map_err(|e| e.to_string())?;
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(10))
        // Short enough that the time to serve it reports stays close to the truth.
        .with_max_delay(Duration::from_millis(100))
        .without_max_times()
        .with_total_delay(Some(SERVE_PATIENCE));
    match (|| probe.status(n, false)).retry(backoff).await {
        Ok(_) => Ok(t0.elapsed()),
        Err(e) => Err(format!("started, but not serving: {e}")),
    }
}

impl FaultDriver for ClusterDriver {
    fn apply(&self, effect: Effect) -> EffectFuture {
        let cluster = self.cluster.clone();
        match effect {
            Effect::Kill(n) => {
                let name = self.name(n);
                Box::pin(async move {
                    tokio::task::spawn_blocking(move || cluster.kill(n))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| e.to_string())?;
                    Ok(format!("stopped {name} (endpoint closed, threads and tasks stopped; its MemStore kept)"))
                })
            }
            Effect::Start(n) => {
                let (name, probe) = (self.name(n), self.probe.clone());
                Box::pin(async move {
                    let took = restart(&cluster, &probe, n).await.map_err(|e| format!("{name}: {e}"))?;
                    Ok(format!("started {name} again on its MemStore (serving after {} ms)", took.as_millis()))
                })
            }
            Effect::Cut { a, b, on } => {
                let what = format!("{} {} <-> {}", if on { "cut" } else { "healed" }, self.dc(a), self.dc(b));
                Box::pin(async move { cluster.set_partitioned(a, b, on).map(|()| what).map_err(|e| e.to_string()) })
            }
            Effect::SetRtt { from, to, rtt } => {
                let what =
                    format!("rtt {} -> {} set to {}", self.dc(from), self.dc(to), humantime::format_duration(rtt));
                Box::pin(async move { cluster.set_rtt(from, to, rtt).map(|()| what).map_err(|e| e.to_string()) })
            }
        }
    }
}

/// Where an embedded bench's clients submit: their home node, or while a drill has it down
/// the nearest node up ([`failover_order`]).
#[derive(Clone)]
pub struct Coordinators {
    cluster: Arc<EmbeddedCluster>,
    down: Arc<DownSet>,
}

impl Coordinators {
    /// Routes over `cluster`, avoiding the nodes in `down`.
    pub fn new(cluster: Arc<EmbeddedCluster>, down: Arc<DownSet>) -> Self {
        Coordinators { cluster, down }
    }

    /// The current life of the node a client homed on `home` submits to now; `None` while
    /// every node is down.
    pub fn route(&self, home: NodeId) -> Option<Arc<Node>> {
        if !self.down.contains(home) {
            return Some(self.cluster.node(home));
        }
        failover_order(&self.cluster.topology, home)
            .into_iter()
            .find(|&n| !self.down.contains(n))
            .map(|n| self.cluster.node(n))
    }
}

/// An embedded bench's clients' answers on their way to the drill's timeline
/// ([`EmbeddedDrill::feed`]); the default one, without a drill, counts nothing.
#[derive(Clone, Default)]
pub struct TimelineFeed {
    timeline: Option<Arc<Timeline>>,
    measured_from: Arc<OnceLock<Instant>>,
}

impl TimelineFeed {
    /// Counts an answer of `status`, just received, to a transaction submitted at `submitted`
    /// (a commit with its latency and the data partitions `parts()` its transaction touched);
    /// nothing before the drill started.
    pub fn record(&self, submitted: Instant, status: &TxnStatus, parts: impl FnOnce() -> Vec<PartitionId>) {
        let (Some(t), Some(&from)) = (&self.timeline, self.measured_from.get()) else { return };
        let (s, a) = (submitted.saturating_duration_since(from), from.elapsed());
        match status {
            TxnStatus::Committed => t.committed(s, a, &parts()),
            TxnStatus::Aborted(_) => t.add(a, Counts { aborted: 1, ..Default::default() }),
            TxnStatus::Unknown(_) => t.add(a, Counts { unknown: 1, ..Default::default() }),
        }
    }
}

/// A data directory for the nodes of a drilled embedded cluster (their membership Raft logs,
/// kept across restarts), removed when dropped.
pub struct DataRoot(PathBuf);

impl DataRoot {
    /// A fresh directory under the system's temporary directory.
    ///
    /// # Errors
    /// It cannot be created, as text.
    pub fn new() -> Result<Self, String> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("redt-drill-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(DataRoot(dir))
    }

    /// The directory.
    pub fn path(&self) -> PathBuf {
        self.0.clone()
    }
}

impl Drop for DataRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What happened after the drill's last action: the heals, and how the cluster settled.
#[derive(Clone, Debug, Serialize)]
pub struct AfterDrill {
    /// What was healed after the plan ended (nodes started again, links reset).
    pub healed: Vec<String>,
    /// Whether the cluster settled within [`SETTLE_PATIENCE`].
    pub settled: bool,
    /// How long the wait took, ms.
    pub wait_ms: u64,
    /// The placement epoch every node reported at the end (`None`: they differ or one did not
    /// answer).
    pub epoch: Option<u64>,
    /// Partitions below the replication factor at the end, the most any node reported.
    pub under_replicated: u64,
    /// The last status seen when the wait gave up: why it did not settle.
    pub unsettled: Option<String>,
}

/// A drill's report inside an embedded bench: the drill's figures and what came after it.
#[derive(Clone, Debug, Serialize)]
pub struct EmbeddedDrillReport {
    /// The drill's figures (timeline, detection, …).
    pub drill: DrillReport,
    /// The heals after the plan and the settling.
    pub after: AfterDrill,
}

/// A drill running inside an embedded bench (see the module docs).
pub struct EmbeddedDrill {
    cluster: Arc<EmbeddedCluster>,
    plan: DrillPlan,
    driver: Arc<ClusterDriver>,
    watcher: Arc<Client>,
    /// The timeline the bench's clients count their answers into.
    pub timeline: Arc<Timeline>,
    /// The nodes down, shared with the clients' [`Coordinators`].
    pub down: Arc<DownSet>,
    task: Option<tokio::task::JoinHandle<Watch>>,
    duration: Duration,
    /// Set when the plan starts: the start of the measured interval.
    measured_from: Arc<OnceLock<Instant>>,
}

impl EmbeddedDrill {
    /// A drill of `plan` (already expanded for `duration`: [`DrillPlan::expand`]) on `cluster`
    /// over a measured interval of `duration`. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A plan whose last action is not within `duration`, a client socket that cannot bind;
    /// as text.
    pub fn new(cluster: Arc<EmbeddedCluster>, plan: DrillPlan, duration: Duration) -> Result<Self, String> {
        if plan.repeats() {
            return Err("the plan repeats: expand it for the run's duration first".into());
        }
        check_within(&plan, duration)?;
        let watcher = Arc::new(cluster.client(Duration::from_millis(500)).map_err(|e| e.to_string())?);
        let driver = Arc::new(ClusterDriver::new(cluster.clone())?);
        Ok(EmbeddedDrill {
            timeline: Arc::new(Timeline::new(cluster.topology.partitions.len())),
            down: Arc::new(DownSet::default()),
            cluster,
            plan,
            driver,
            watcher,
            task: None,
            duration,
            measured_from: Default::default(),
        })
    }

    /// The routes of the bench's clients.
    pub fn coordinators(&self) -> Coordinators {
        Coordinators::new(self.cluster.clone(), self.down.clone())
    }

    /// Where the bench's clients count their answers: into the timeline, from the start of
    /// the measured interval on.
    pub fn feed(&self) -> TimelineFeed {
        TimelineFeed { timeline: Some(self.timeline.clone()), measured_from: self.measured_from.clone() }
    }

    /// Starts the plan at `started` (the start of the measured interval); `on_log` gets every
    /// log line as it happens.
    pub fn start(&mut self, started: Instant, on_log: Arc<dyn Fn(&LogLine) + Send + Sync>) {
        let _ = self.measured_from.set(started);
        let setup = DrillSetup {
            plan: self.plan.clone(),
            topo: self.cluster.topology.clone(),
            driver: self.driver.clone(),
            watcher: self.watcher.clone(),
            timeline: self.timeline.clone(),
            down: self.down.clone(),
            on_log,
            counts_from_status: false,
        };
        let until = self.duration;
        self.task = Some(tokio::spawn(async move { drill::run(&setup, started, until).await }));
    }

    /// After the clients stopped: waits for the plan's last action, heals every fault still
    /// in force (starts every node down again, puts every link back to the topology file's),
    /// waits up to [`SETTLE_PATIENCE`] until the cluster has settled (progress on standard
    /// error every 5 s when `progress`), and reports.
    ///
    /// # Errors
    /// The drill was not started or its task failed, as text.
    pub async fn finish(mut self, progress: bool) -> Result<EmbeddedDrillReport, String> {
        let task = self.task.take().ok_or("the drill was never started")?;
        let watch = task.await.map_err(|e| format!("the drill task failed: {e}"))?;
        let mut healed = Vec::new();
        for n in self.down.snapshot() {
            let name = self.driver.name(n);
            match restart(&self.cluster, &self.driver.probe, n).await {
                Ok(t) => healed.push(format!("started {name} again (serving after {} ms)", t.as_millis())),
                Err(e) => healed.push(format!("{name} could not be started again: {e}")),
            }
        }
        self.cluster.reset_links().map_err(|e| e.to_string())?;
        healed.push("every link back to the topology file's conditions".into());
        let (settled, wait_ms, epoch, under, unsettled) = self.wait_settled(progress).await;
        // Counting the lock words scans each node's whole index (seconds on a TPC-C MemStore):
        // a client with a patient call timeout asks for them.
        // The operator's: the nodes count locks for an operator only.
        let counter = Arc::new(self.cluster.operator(LOCK_COUNT_PATIENCE).map_err(|e| e.to_string())?);
        let end = drill::settle(&counter, &Default::default()).await;
        let report = drill::report(&watch, &self.timeline.snapshot(), self.duration, &end, None);
        Ok(EmbeddedDrillReport {
            drill: report,
            after: AfterDrill { healed, settled, wait_ms, epoch, under_replicated: under, unsettled },
        })
    }

    /// Polls every node's status every 100 ms until each answers at one epoch with nothing
    /// undecided, owed or unreplayed and no partition under-replicated, for at most
    /// [`SETTLE_PATIENCE`]. Returns whether it did, the wait in ms, the common epoch, the most
    /// under-replicated partitions any node reported, and the last reason it was not settled.
    async fn wait_settled(&self, progress: bool) -> (bool, u64, Option<u64>, u64, Option<String>) {
        let all: Vec<NodeId> = self.cluster.topology.nodes.iter().map(|n| n.id).collect();
        let t0 = Instant::now();
        let mut said = t0;
        loop {
            let statuses = self.watcher.status_of(&all, false).await;
            let why = unsettled(&self.cluster, &statuses);
            let ok: Vec<&NodeStatus> = statuses.iter().filter_map(|(_, s)| s.as_ref().ok()).collect();
            let epochs: std::collections::BTreeSet<u64> = ok.iter().map(|s| u64::from(s.epoch.0)).collect();
            let epoch = (ok.len() == all.len() && epochs.len() == 1).then(|| epochs.iter().copied().next()).flatten();
            let under = ok.iter().map(|s| u64::from(s.under_replicated)).max().unwrap_or(0);
            let wait_ms = t0.elapsed().as_millis() as u64;
            match why {
                None => return (true, wait_ms, epoch, under, None),
                Some(why) if t0.elapsed() >= SETTLE_PATIENCE => return (false, wait_ms, epoch, under, Some(why)),
                Some(why) => {
                    if progress && said.elapsed() >= Duration::from_secs(5) {
                        said = Instant::now();
                        eprintln!("  settling after the drill ({:.0} s): {why}", t0.elapsed().as_secs_f64());
                    }
                }
            }
            tokio::time::sleep(drill::BUCKET).await;
        }
    }
}

/// Why the cluster has not settled, from every node's status (`None`: it has).
fn unsettled(cluster: &EmbeddedCluster, statuses: &[(NodeId, Result<NodeStatus, String>)]) -> Option<String> {
    let name = |n: NodeId| cluster.topology.nodes.get(n.0 as usize).map_or_else(|| n.to_string(), |x| x.name.clone());
    let mut why = Vec::new();
    let mut epochs = std::collections::BTreeSet::new();
    for (n, s) in statuses {
        match s {
            Err(e) => why.push(format!("{} does not answer ({e})", name(*n))),
            Ok(s) => {
                epochs.insert(s.epoch.0);
                if s.undecided_entries > 0 || s.catch_ups_owed > 0 || s.replay_backlog_slots > 0 {
                    why.push(format!(
                        "{}: {} undecided, {} catch-ups owed, {} backlog slots",
                        name(*n),
                        s.undecided_entries,
                        s.catch_ups_owed,
                        s.replay_backlog_slots
                    ));
                }
                if s.under_replicated > 0 {
                    why.push(format!("{}: {} partitions under-replicated", name(*n), s.under_replicated));
                }
            }
        }
    }
    if statuses.len() < cluster.topology.nodes.len() {
        why.push("not every node answered".into());
    }
    if epochs.len() > 1 {
        why.push(format!("epochs differ ({:?})", epochs));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// An embedded cluster started for a bench, with its drill if it has one.
pub struct DrilledCluster {
    /// The cluster.
    pub cluster: Arc<EmbeddedCluster>,
    /// The drill, not started yet.
    pub drill: Option<EmbeddedDrill>,
    /// Where the bench's clients submit.
    pub routes: Coordinators,
    /// The nodes' data directories (a drill only), removed when dropped: keep it until the
    /// cluster is shut down.
    pub data_root: Option<DataRoot>,
}

/// Starts an embedded cluster of `topo` with `options` for a bench and, with a `plan` (expanded
/// for `duration`), its drill: each node then gets a data directory for its membership log, so
/// that a restarted node keeps it. Must run inside a tokio runtime.
///
/// # Errors
/// The data directory, the cluster or the drill cannot be set up (the cluster is shut down
/// again), as text.
pub async fn start_cluster(
    topo: redt_proto::Topology,
    options: redt_coordinator::CoordinatorOptions,
    plan: Option<DrillPlan>,
    duration: Duration,
) -> Result<DrilledCluster, String> {
    let data_root = match &plan {
        Some(_) => Some(DataRoot::new()?),
        None => None,
    };
    let cluster = Arc::new(
        EmbeddedCluster::start_in(topo, options, data_root.as_ref().map(DataRoot::path))
            .await
            .map_err(|e| format!("starting the cluster: {e}"))?,
    );
    let drill = match plan.map(|p| EmbeddedDrill::new(cluster.clone(), p, duration)).transpose() {
        Ok(d) => d,
        Err(e) => {
            cluster.shutdown();
            return Err(e);
        }
    };
    let routes = match &drill {
        Some(d) => d.coordinators(),
        None => Coordinators::new(cluster.clone(), Default::default()),
    };
    Ok(DrilledCluster { cluster, drill, routes, data_root })
}

/// After the bench's clients stopped: [`EmbeddedDrill::finish`] of `drill`, if any (`None`
/// without one). On an error `cluster` is shut down before it is returned.
///
/// # Errors
/// As [`EmbeddedDrill::finish`].
pub async fn finish_drill(
    drill: Option<EmbeddedDrill>,
    cluster: &EmbeddedCluster,
    progress: bool,
) -> Result<Option<EmbeddedDrillReport>, String> {
    let Some(d) = drill else { return Ok(None) };
    match d.finish(progress).await {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            cluster.shutdown();
            Err(e)
        }
    }
}

/// Where a drill's log lines go as they happen: above the progress bar `bar`, or to standard
/// error when it is hidden (no terminal, `--json`).
pub fn log_to(bar: &indicatif::ProgressBar) -> Arc<dyn Fn(&LogLine) + Send + Sync> {
    let bar = bar.clone();
    Arc::new(move |l: &LogLine| {
        if bar.is_hidden() {
            eprintln!("{l}");
        } else {
            bar.println(l.to_string());
        }
    })
}

/// Refuses a plan whose last action is not within a measured run of `duration`.
///
/// # Errors
/// As text naming both.
pub fn check_within(plan: &DrillPlan, duration: Duration) -> Result<(), String> {
    if plan.last_action() >= duration {
        return Err(format!(
            "the drill's last action comes {} after the start, not within the measured run (--duration {}): \
             lengthen --duration or move the plan earlier",
            humantime::format_duration(plan.last_action()),
            humantime::format_duration(duration)
        ));
    }
    Ok(())
}
