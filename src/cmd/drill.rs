//! Failure drills against a running cluster: `redt drill PLAN` (the plan alone, under whatever
//! load the cluster has) and `redt bench ycsb --cluster F --drill PLAN` (under the bench's
//! clients; `--kill NODE` and `--cut DC` are shorthands for one-event plans). The plan comes
//! from the command line ([`redt_bench::drill_plan`]); its effects are carried out here
//! ([`ProcessDriver`]: SIGKILL and restart through the run directory of `redt cluster up`,
//! netem requests to every node); `redt_bench::drill` measures; this module prints and saves.

use super::{load_topology, runtime};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use redt_bench::drill::{
    self, DownSet, DrillReport, DrillSetup, EffectFuture, FaultDriver, LogLine, Timeline, NO_REBUILD,
};
use redt_bench::drill_embedded::EmbeddedDrillReport;
use redt_bench::drill_plan::{DrillPlan, Effect};
use redt_bench::{ClusterConfig, DrillBenchReport};
use redt_coordinator::Client;
use redt_proto::wire::NetemSetRequest;
use redt_proto::{NodeId, Topology};
use redt_transport::OPERATOR_IDENTITY_NAME;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Carries out a plan's effects on a `redt cluster up` cluster: kills and starts through its
/// run directory (pid files, saved arguments), link changes as netem requests to every node.
pub struct ProcessDriver {
    run_dir: PathBuf,
    topo: Arc<Topology>,
    netem: Arc<Client>,
}

impl ProcessDriver {
    /// A driver for the cluster of `topo` started with `run_dir`, its netem requests signed
    /// with the operator certificate `identity` in `certs` (the nodes refuse them from a
    /// client certificate). Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A missing, expired or unusable operator certificate.
    pub fn new(run_dir: &Path, topo: Arc<Topology>, certs: &Path, identity: &str) -> Result<Self> {
        // A node that is down does not confirm: its request gives up after 1 s.
        let netem = Arc::new(
            Client::connect_as(topo.clone(), certs, identity, Duration::from_secs(1))
                .with_context(|| format!("the operator certificate {identity} in {}", certs.display()))?,
        );
        Ok(ProcessDriver { run_dir: run_dir.to_path_buf(), topo, netem })
    }

    fn node(&self, n: NodeId) -> String {
        self.topo.nodes.get(n.0 as usize).map_or_else(|| n.to_string(), |n| n.name.clone())
    }

    fn dc(&self, d: redt_proto::DcId) -> String {
        self.topo.dcs.get(d.0 as usize).map_or_else(|| d.to_string(), |d| d.name.clone())
    }
}

/// Runs `f` on a blocking thread; its error as text.
async fn blocking(f: impl FnOnce() -> Result<String> + Send + 'static) -> std::result::Result<String, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| format!("{e:#}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Sends `req` to every node; `what` if every node (or some) confirmed, naming those that did
/// not (a node that is down cannot).
async fn netem(client: Arc<Client>, req: NetemSetRequest, what: String) -> std::result::Result<String, String> {
    let failed = client.netem_set(req).await;
    let nodes = client.topology().nodes.len();
    if failed.is_empty() {
        Ok(what)
    } else if failed.len() < nodes {
        let names: Vec<&str> = failed.iter().map(|(n, _)| n.as_str()).collect();
        Ok(format!("{what} (not confirmed by {})", names.join(", ")))
    } else {
        Err(format!("{what}: no node confirmed ({})", failed[0].1))
    }
}

impl FaultDriver for ProcessDriver {
    fn apply(&self, effect: Effect) -> EffectFuture {
        let keep = -1;
        match effect {
            Effect::Kill(n) => {
                let (dir, name) = (self.run_dir.clone(), self.node(n));
                Box::pin(blocking(move || {
                    let pid = super::cluster::kill_node(&dir, &name)?;
                    Ok(format!("killed {name} (pid {pid})"))
                }))
            }
            Effect::Start(n) => {
                let (dir, name) = (self.run_dir.clone(), self.node(n));
                Box::pin(blocking(move || {
                    let pid = super::cluster::start_node(&dir, &name)?;
                    Ok(format!("started {name} again (pid {pid})"))
                }))
            }
            Effect::Cut { a, b, on } => {
                let (a, b) = (self.dc(a), self.dc(b));
                let what = format!("{} {a} <-> {b}", if on { "cut" } else { "healed" });
                let req = NetemSetRequest {
                    from: a,
                    to: b,
                    rtt_us: keep,
                    jitter_us: keep,
                    loss_ppm: keep,
                    rate_bits_per_s: keep,
                    partitioned: Some(on),
                    symmetric: true,
                };
                Box::pin(netem(self.netem.clone(), req, what))
            }
            Effect::SetRtt { from, to, rtt } => {
                let (from, to) = (self.dc(from), self.dc(to));
                let what = format!("rtt {from} -> {to} set to {}", humantime::format_duration(rtt));
                let req = NetemSetRequest {
                    from,
                    to,
                    rtt_us: rtt.as_micros().min(i64::MAX as u128) as i64,
                    jitter_us: keep,
                    loss_ppm: keep,
                    rate_bits_per_s: keep,
                    partitioned: None,
                    symmetric: false,
                };
                Box::pin(netem(self.netem.clone(), req, what))
            }
        }
    }
}

/// Refuses a plan that kills a node `run_dir` has no pid file for (not the run directory of
/// the cluster).
fn check_run_dir(plan: &DrillPlan, run_dir: &Path) -> Result<()> {
    for e in &plan.events {
        for n in e.fault.killed() {
            let name = plan_node_name(e, n);
            let pid = run_dir.join("pids").join(format!("{name}.pid"));
            if !pid.exists() {
                bail!(
                    "`{e}` kills {name}, but {} does not exist: pass the run directory of `redt cluster up` with --run-dir",
                    pid.display()
                );
            }
        }
    }
    Ok(())
}

fn plan_node_name(e: &redt_bench::drill_plan::Event, n: NodeId) -> String {
    use redt_bench::drill_plan::Fault;
    match &e.fault {
        Fault::KillDc { nodes, .. } => nodes.iter().find(|x| x.id == n).map(|x| x.name.clone()),
        Fault::KillNode { node } => Some(node.name.clone()),
        _ => None,
    }
    .unwrap_or_else(|| n.to_string())
}

/// A failure drill during `redt bench ycsb` (the faults of `redt drill`): a plan of scheduled
/// faults while the clients run (`--drill`), or one fault (`--kill`, `--cut`: shorthands for
/// one-event plans). With `--cluster` it drills the running cluster
/// (kills by signal through `--run-dir`); without, the embedded one (kills stop the node
/// in-process, as `redt bench bank --drill`).
#[derive(Args, Debug)]
pub struct DrillArgs {
    /// Drill plan, quoted: events separated by `;`, each a fault, `at T` (after the measured
    /// interval starts) and an optional heal — `kill-dc DC [restart-after D]`, `kill-node NODE
    /// [restart-after D]`, `partition DCS|DCS [heal-after D]`, `slow-link A B rtt R [for D]`;
    /// e.g. "kill-dc dc2 at 10s restart-after 30s" (see `redt drill --help`). Kills of a
    /// running cluster (`--cluster`) need `--run-dir` of `redt cluster up`; on the embedded
    /// cluster a kill stops the node in-process and a restart starts it again on its MemStore.
    #[arg(long, value_name = "PLAN", conflicts_with_all = ["kill", "cut"])]
    pub(crate) drill: Option<String>,
    /// Kill this node's process with SIGKILL during the run, and start it again on its
    /// MemStore `--restart-after` later (the plan `kill-node NODE at T restart-after D`).
    #[arg(long, value_name = "NODE", conflicts_with = "cut")]
    pub(crate) kill: Option<String>,
    /// How long the killed node stays down.
    #[arg(long, default_value = "3s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    pub(crate) restart_after: Duration,
    /// Cut this DC off every other DC (netem partition, both ways) during the run, and heal
    /// it `--cut-for` later (the plan `partition DC|OTHERS at T heal-after D`).
    #[arg(long, value_name = "DC")]
    pub(crate) cut: Option<String>,
    /// How long the cut lasts.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    pub(crate) cut_for: Duration,
    /// When `--kill` or `--cut` starts, after the measured interval starts.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    pub(crate) at: Duration,
    /// Run directory of the cluster (`redt cluster up --run-dir`), for kills.
    #[arg(long, default_value = "run")]
    pub(crate) run_dir: PathBuf,
    /// Embedded cluster only (no `--cluster`), with a drill: run the nodes without the
    /// membership peer (a dead DC stays in the placement and stops the partitions it holds
    /// until it returns). A running cluster's nodes chose at start-up.
    #[arg(long, conflicts_with = "cluster")]
    pub(crate) no_failover: bool,
    /// Write the drill's timeline (one row per 100 ms: committed/s, aborted/s, unknown/s, p99
    /// of the second, undecided entries, replay backlog, suspicions, events) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub(crate) timeline_csv: Option<PathBuf>,
    /// Draw the drill's timeline to this SVG file, and a PNG beside it.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) chart: Option<PathBuf>,
}

/// The plan `redt bench ycsb` asks for: `--drill PLAN`, or `--kill NODE` (`kill-node NODE at
/// T restart-after D`) or `--cut DC` (`partition DC|every other DC at T heal-after D`); `None`
/// without any.
///
/// Without `cluster` (`--cluster`) the plan drills the embedded cluster.
///
/// # Errors
/// A plan that does not parse, kills of a running cluster without its run directory, a plan
/// that does not end within the measured run.
pub fn bench_plan(a: &DrillArgs, cluster: bool, topo: &Topology, duration: Duration) -> Result<Option<DrillPlan>> {
    let fmt = |d: Duration| redt_bench::drill_plan::Compact(d).to_string();
    let text = if let Some(p) = &a.drill {
        p.clone()
    } else if let Some(node) = &a.kill {
        format!("kill-node {node} at {} restart-after {}", fmt(a.at), fmt(a.restart_after))
    } else if let Some(dc) = &a.cut {
        let others: Vec<&str> = topo.dcs.iter().map(|d| d.name.as_str()).filter(|d| d != dc).collect();
        format!("partition {dc}|{} at {} heal-after {}", others.join(","), fmt(a.at), fmt(a.cut_for))
    } else {
        if a.timeline_csv.is_some() || a.chart.is_some() {
            bail!("--timeline-csv and --chart draw a drill's timeline: add --drill PLAN (or --kill / --cut)");
        }
        return Ok(None);
    };
    let flag = if a.drill.is_some() {
        "--drill"
    } else if a.kill.is_some() {
        "--kill"
    } else {
        "--cut"
    };
    let plan = DrillPlan::parse(&text, topo).map_err(|e| anyhow!("{flag}: {e}"))?;
    let plan = plan.expand(duration).map_err(|e| anyhow!("{flag}: {e}"))?;
    if plan.last_action() >= duration {
        bail!(
            "{flag}: the plan's last action comes {} after the start, not within the measured run (--duration {})",
            humantime::format_duration(plan.last_action()),
            humantime::format_duration(duration)
        );
    }
    // The embedded cluster stops and restarts its nodes in-process: no run directory.
    if cluster {
        check_run_dir(&plan, &a.run_dir)?;
    }
    Ok(Some(plan))
}

/// Runs `redt bench ycsb --cluster … --drill`: the bench's clients under `plan` (effects
/// through the run directory `run_dir`), then settles and checks.
///
/// The driver's link changes and the status requests are signed with the operator
/// certificate `identity`.
///
/// # Errors
/// A missing client or operator certificate; what [`redt_bench::run_drill_ycsb`] refuses.
pub async fn run_bench(
    topo: Topology,
    certs: &Path,
    identity: &str,
    cfg: &ClusterConfig,
    plan: DrillPlan,
    run_dir: &Path,
) -> Result<DrillBenchReport> {
    let driver = Arc::new(ProcessDriver::new(run_dir, Arc::new(topo.clone()), certs, identity)?);
    redt_bench::run_drill_ycsb(topo, certs, identity, cfg, plan, driver, Arc::new(|_: &LogLine| {}))
        .await
        .map_err(anyhow::Error::msg)
}

/// Arguments of `redt drill`.
#[derive(Args, Debug)]
pub struct DrillCmdArgs {
    /// The plan, quoted: events separated by `;`, each a fault, `at T`, and an optional heal —
    /// `kill-dc DC [restart-after D]`, `kill-node NODE [restart-after D]`, `partition
    /// DCS|DCS [heal-after D]` (comma-separated DC sets), `slow-link A B rtt R [for D]`. `every
    /// P` repeats an event with period P for as long as the drill lasts (first at `at T`,
    /// default P; it needs a heal shorter than P and --duration). Example: "kill-node dc3-n1 at
    /// 2s restart-after 3s; slow-link dc1 dc2 rtt 200ms at 1s for 5s"; the soak: "kill-dc dc2
    /// every 60s restart-after 30s".
    plan: String,
    /// Topology file of the running cluster [default: the one `redt cluster up` recorded in the
    /// run directory].
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Run directory of the cluster (`redt cluster up --run-dir`): pid files, saved node
    /// arguments, certificates.
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Certificate directory [default: RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// The identity in the certificate directory that signs the link changes and asks the
    /// nodes for their status (`<NAME>.pem`/`.key`): it must be an operator's (`redt certs
    /// issue --role operator`; the nodes count locks for an operator only).
    #[arg(long, value_name = "NAME", default_value = OPERATOR_IDENTITY_NAME)]
    identity: String,
    /// How long to watch from the start [default: the plan's last action + 10 s].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Option<Duration>,
    /// Write timeline.csv, timeline.svg, timeline.png and summary.json into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the timeline (one row per 100 ms) to this CSV file [default with --out:
    /// DIR/timeline.csv].
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the timeline to this SVG file and a PNG beside it [default with --out:
    /// DIR/timeline.svg].
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// Print the summary as JSON (the log lines are not printed as they happen).
    #[arg(long)]
    json: bool,
}

/// The topology file `redt cluster up` recorded in `run_dir`.
fn recorded_config(run_dir: &Path) -> Result<PathBuf> {
    let f = run_dir.join("config.path");
    let text = std::fs::read_to_string(&f)
        .with_context(|| format!("{} (written by `redt cluster up`): pass --cluster FILE", f.display()))?;
    Ok(PathBuf::from(text.trim()))
}

/// Runs `redt drill`.
///
/// # Errors
/// A plan that does not parse, a run directory without the nodes' pid files, a missing
/// certificate, an output file that cannot be written, an effect that failed.
pub fn run(a: &DrillCmdArgs) -> Result<()> {
    let config = match &a.cluster {
        Some(c) => c.clone(),
        None => recorded_config(&a.run_dir)?,
    };
    let topo = load_topology(Some(&config))?;
    let plan = DrillPlan::parse(&a.plan, &topo).map_err(|e| anyhow!("drill plan: {e}"))?;
    if plan.repeats() && a.duration.is_none() {
        bail!("the plan repeats a fault (`every`): give --duration, how long the drill lasts");
    }
    let duration = a.duration.unwrap_or(plan.last_action() + Duration::from_secs(10));
    let plan = plan.expand(duration).map_err(|e| anyhow!("drill plan: {e}"))?;
    check_run_dir(&plan, &a.run_dir)?;
    if plan.last_action() >= duration {
        bail!(
            "the plan's last action comes {} after the start, after --duration {}",
            humantime::format_duration(plan.last_action()),
            humantime::format_duration(duration)
        );
    }
    let certs = a.certs.clone().unwrap_or_else(|| a.run_dir.join("certs"));
    let topo = Arc::new(topo);
    if !a.json {
        println!(
            "redt drill — `{}` ({} DCs, {} nodes), watching {}: {plan}",
            topo.name,
            topo.dcs.len(),
            topo.nodes.len(),
            humantime::format_duration(duration)
        );
    }
    let rt = runtime()?;
    let report = rt.block_on(async {
        // The operator's: settling counts the locks left, which the nodes serve to it only.
        let watcher = Arc::new(
            Client::connect_as(topo.clone(), &certs, &a.identity, Duration::from_millis(500))
                .with_context(|| format!("the operator certificate {} in {}", a.identity, certs.display()))?,
        );
        let driver = Arc::new(ProcessDriver::new(&a.run_dir, topo.clone(), &certs, &a.identity)?);
        let timeline = Arc::new(Timeline::new(0));
        let down = Arc::new(DownSet::default());
        let quiet = a.json;
        let setup = DrillSetup {
            plan,
            topo: topo.clone(),
            driver,
            watcher: watcher.clone(),
            timeline: timeline.clone(),
            down: down.clone(),
            on_log: Arc::new(move |l: &LogLine| {
                if !quiet {
                    println!("{l}");
                }
            }),
            counts_from_status: true,
        };
        let watch = drill::run(&setup, Instant::now(), duration).await;
        let settled = drill::settle(&watcher, &down.snapshot()).await;
        anyhow::Ok(drill::report(&watch, &timeline.snapshot(), duration, &settled, None))
    })?;
    let outputs = Outputs::of(a.out.as_deref(), a.csv.as_deref(), a.chart.as_deref());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("redt drill — summary");
        print(&report, false);
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        let f = dir.join("summary.json");
        std::fs::write(&f, serde_json::to_string_pretty(&report)?).with_context(|| f.display().to_string())?;
        if !a.json {
            println!("  summary written to {}", f.display());
        }
    }
    let saved = outputs.save(&report, &format!("redt drill — {}", topo.name), !a.json);
    verdict(&report)?;
    saved
}

/// Where a drill's timeline goes.
pub struct Outputs {
    csv: Option<PathBuf>,
    chart: Option<PathBuf>,
    /// Whether the chart was asked for by name (`--chart`), not only implied by `--out`.
    chart_asked: bool,
}

impl Outputs {
    /// `--csv`/`--chart`, or their defaults in `--out DIR`.
    pub fn of(out: Option<&Path>, csv: Option<&Path>, chart: Option<&Path>) -> Self {
        Outputs {
            csv: csv.map(Path::to_path_buf).or_else(|| out.map(|d| d.join("timeline.csv"))),
            chart: chart.map(Path::to_path_buf).or_else(|| out.map(|d| d.join("timeline.svg"))),
            chart_asked: chart.is_some(),
        }
    }

    /// Writes the timeline CSV and chart asked for, saying so when `say`.
    ///
    /// # Errors
    /// A file that cannot be written; a chart asked for by `--chart` that cannot be drawn (no
    /// font: one implied by `--out` is then skipped with a warning). The CSV is written first.
    pub fn save(&self, report: &DrillReport, title: &str, say: bool) -> Result<()> {
        if let Some(f) = &self.csv {
            drill::write_timeline_csv(f, report).map_err(anyhow::Error::msg)?;
            if say {
                println!("  timeline written to {} ({} rows of 100 ms)", f.display(), report.buckets.len());
            }
        }
        if let Some(f) = &self.chart {
            match drill::write_timeline_chart(f, report, title) {
                Ok(png) if say => println!("  chart written to {} and {}", f.display(), png.display()),
                Ok(_) => {}
                Err(e) if !self.chart_asked => eprintln!("warning: chart not drawn: {e}"),
                Err(e) => bail!(e),
            }
        }
        Ok(())
    }
}

/// Fails when an effect failed, an acknowledged commit was lost or an aborted write is
/// visible, after everything was printed and saved.
///
/// # Errors
/// As above.
pub fn verdict(r: &DrillReport) -> Result<()> {
    if let Some(l) = r.lost.as_ref().filter(|l| l.lost > 0 || l.aborted_visible > 0) {
        bail!(
            "{} acknowledged commits lost and {} aborted writes visible after the drill (keys {:?})",
            l.lost,
            l.aborted_visible,
            l.lost_keys
        );
    }
    let failed: usize = r.events.iter().map(|e| e.errors.len()).sum();
    if failed > 0 {
        bail!("{failed} drill effects failed (see the log above)");
    }
    Ok(())
}

/// Prints the result of `redt bench ycsb --drill` after the clients' lines, and saves the
/// timeline as `a` asks.
///
/// # Errors
/// As [`Outputs::save`] and [`verdict`].
pub fn finish_bench(r: &DrillBenchReport, a: &DrillArgs, say: bool) -> Result<()> {
    Outputs::of(None, a.timeline_csv.as_deref(), a.chart.as_deref()).save(
        &r.drill,
        &format!("redt bench ycsb --drill — {}", r.run.topology),
        say,
    )?;
    verdict(&r.drill)
}

/// Prints a drill's report: its log (unless `log` is false: it was printed as it happened),
/// each event's figures, the checks, and the timeline per second.
pub fn print(d: &DrillReport, log: bool) {
    let ms = |v: Option<u64>, none: &str| v.map_or_else(|| none.to_string(), |v| format!("{v} ms"));
    let n = |v: Option<u64>| v.map_or_else(|| "unknown (a node did not answer)".to_string(), |v| v.to_string());
    println!("  plan                         {}", d.plan);
    if log {
        println!("  log (s since the start of the measured run)");
        for l in &d.log {
            println!("    {l}");
        }
    }
    match d.pre_fault_committed_per_s {
        Some(r) => println!("  pre-fault throughput         {r:.1} committed/s"),
        None => println!("  pre-fault throughput         - (the first fault comes at once)"),
    }
    for e in &d.events {
        let at = |t: Option<f64>| t.map_or_else(|| "-".to_string(), |t| format!("{t:.3} s"));
        println!(
            "  {}\n    in place at {}, heal started {}, done {}",
            e.event,
            at(e.injected_at_s),
            at(e.heal_started_at_s),
            at(e.healed_at_s)
        );
        let failure = !e.event.starts_with("slow-link");
        if failure {
            println!(
                "    detection                  {} by a first watcher, {} by every watcher (status polled every 100 ms)",
                ms(e.detected_first_ms, "not before the heal"),
                ms(e.detected_all_ms, "not before the heal")
            );
            println!(
                "    in-flight decided          {} at the nodes up, {} everywhere",
                ms(e.decided_at_survivors_ms, "not within the run"),
                ms(e.decided_everywhere_ms, "not within the run")
            );
        }
        println!(
            "    full throughput (≥ 90%)    {}",
            match (e.full_throughput_ms, d.pre_fault_committed_per_s) {
                (Some(v), _) => format!("{v} ms after the fault"),
                (None, Some(r)) if r > 0.0 => "not within the run".to_string(),
                _ => "- (no commits before the first fault)".to_string(),
            }
        );
        if e.unavailable_ms.is_empty() {
            println!("    unavailable per partition  n/a (needs the bench's clients: redt bench ycsb --cluster F --drill PLAN)");
        } else {
            let parts: Vec<String> = e
                .unavailable_ms
                .iter()
                .map(|(p, v)| format!("{p} {}", v.map_or_else(|| "-".to_string(), |v| format!("{v} ms"))))
                .collect();
            println!(
                "    unavailable per partition  {} (to the first commit submitted after the fault)",
                parts.join(", ")
            );
        }
        if e.heal_started_at_s.is_some() {
            println!("    heal → nothing suspected   {}", ms(e.heal_to_unsuspected_ms, "not within the run"));
        }
        for err in &e.errors {
            println!("    FAILED: {err}");
        }
    }
    println!(
        "  false suspicions             {} before the first fault, {} after the last heal (raised while no fault was in force)",
        n(d.false_suspicions_before_first_fault),
        d.false_suspicions_after_last_heal
            .map_or_else(|| "unknown (not quiet after every heal, or a fault was not healed)".to_string(), |v| v.to_string())
    );
    println!(
        "  full replication restored    {}",
        d.replication_restored_ms.map_or_else(|| NO_REBUILD.to_string(), |v| format!("{v} ms after the first fault"))
    );
    println!(
        "  epoch                        {}",
        d.epochs.map_or_else(
            || NO_REBUILD.to_string(),
            |(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo} → {hi}") }
        )
    );
    if let Some(ms) = d.new_epoch_everywhere_ms {
        println!("  new epoch everywhere         {ms} ms after the first fault (every node answering)");
    }
    println!(
        "  left after settling          {} lock words, {} undecided entries (settled in {} ms); recoveries {} started, {} committed, {} aborted",
        n(d.locks_left),
        n(d.undecided_left),
        d.settle_ms,
        d.recoveries[0],
        d.recoveries[1],
        d.recoveries[2]
    );
    if !d.left_down.is_empty() {
        println!(
            "  left down                    {} (no restart in the plan: `redt cluster start --node NAME`)",
            d.left_down.join(", ")
        );
    }
    match &d.lost {
        Some(l) => println!(
            "  acknowledged commits lost    {} (cell 0 of {} keys written, {} read back: {} at an acknowledged write nothing acknowledged follows, {} at a write of unknown outcome, {} unreadable; {} aborted writes visible; writes {} acknowledged, {} unknown, {} aborted)",
            l.lost,
            l.keys_written,
            l.keys_read,
            l.final_acked,
            l.final_unknown,
            l.keys_unreadable,
            l.aborted_visible,
            l.writes_acked,
            l.writes_unknown,
            l.writes_aborted
        ),
        None => println!(
            "  acknowledged commits lost    n/a (needs the YCSB bench's clients: redt bench ycsb --drill PLAN)"
        ),
    }
    println!("  timeline per second: committed, aborted, unknown, p99 ms; injects and heals");
    for s in &d.seconds {
        println!(
            "    {:>4} s {:>7} {:>7} {:>7} {:>8}  {}",
            s.t_s,
            s.committed,
            s.aborted,
            s.unknown,
            s.p99_ms.map_or_else(|| "-".to_string(), |p| format!("{p:.1}")),
            s.events
        );
    }
}

/// `--drill PLAN` of the embedded benches (`redt bench bank`, `redt bench tpcc`): the plan runs
/// over the measured interval on the embedded cluster, then every fault is healed, the cluster
/// settles and the bench's checks run on the current placement.
#[derive(Args, Debug)]
pub struct EmbeddedDrillArgs {
    /// Drill plan, quoted (the grammar of `redt drill --help`): events separated by `;`, each a
    /// fault, `at T` (after the measured interval starts), an optional heal and an optional
    /// `every P` — `kill-dc DC [restart-after D]`, `kill-node NODE [restart-after D]`,
    /// `partition DCS|DCS [heal-after D]`, `slow-link A B rtt R [for D]`; e.g. "kill-dc dc2 at
    /// 10s restart-after 30s" or the soak's "kill-dc dc2 every 60s restart-after 30s". In the
    /// embedded cluster a kill stops the node in-process (its QUIC endpoint closes, its
    /// threads and tasks stop, it answers nothing) and a restart starts a new node on the same
    /// MemStore, address and data directory; the clients of a stopped node submit through the
    /// nearest node up. Turns failover on (see --no-failover).
    #[arg(long, value_name = "PLAN")]
    pub drill: Option<String>,
    /// With --drill: run the nodes without the membership peer (a dead DC stays in the
    /// placement and stops the partitions it holds until it returns).
    #[arg(long, requires = "drill")]
    pub no_failover: bool,
    /// Write the drill's timeline (one row per 100 ms: committed/s, aborted/s, unknown/s, p99
    /// of the second, undecided entries, replay backlog, suspicions, events) to this CSV file.
    #[arg(long, value_name = "FILE", requires = "drill")]
    pub timeline_csv: Option<PathBuf>,
    /// Draw the drill's timeline to this SVG file, and a PNG beside it.
    #[arg(long, value_name = "FILE.svg", requires = "drill")]
    pub chart: Option<PathBuf>,
}

impl EmbeddedDrillArgs {
    /// The plan asked for, checked against `topo` and expanded for a measured run of
    /// `duration`; `None` without `--drill`.
    ///
    /// # Errors
    /// A plan that does not parse, a repeating event with no occurrence within the run, a
    /// last action not within the run.
    pub fn plan(&self, topo: &Topology, duration: Duration) -> Result<Option<DrillPlan>> {
        let Some(text) = &self.drill else { return Ok(None) };
        let plan = DrillPlan::parse(text, topo).map_err(|e| anyhow!("--drill: {e}"))?;
        let plan = plan.expand(duration).map_err(|e| anyhow!("--drill: {e}"))?;
        redt_bench::drill_embedded::check_within(&plan, duration).map_err(|e| anyhow!("--drill: {e}"))?;
        Ok(Some(plan))
    }

    /// `options` for a drill on `topo` under RedT: failover on (unless `--no-failover`) and
    /// the timeouts a real node runs with ([`failover_for_drill`]).
    pub fn options(
        &self,
        options: redt_coordinator::CoordinatorOptions,
        topo: &Topology,
    ) -> redt_coordinator::CoordinatorOptions {
        failover_for_drill(options, self.drill.is_some() && !self.no_failover, topo)
    }

    /// The timeline CSV file and the chart asked for.
    pub fn outputs(&self) -> (Option<&Path>, Option<&Path>) {
        (self.timeline_csv.as_deref(), self.chart.as_deref())
    }
}

/// `options` with failover turned on when `drill` and the protocol is RedT (the other
/// protocols have no failover), and then the timeouts a real node of `topo` runs with
/// (`NodeTimeouts::defaults`: a phase-1 timeout of 10 × the largest RTT, at least 500 ms,
/// where the embedded cluster's default is 2 s), so a drill measures the failover users get.
pub fn failover_for_drill(
    mut options: redt_coordinator::CoordinatorOptions,
    drill: bool,
    topo: &Topology,
) -> redt_coordinator::CoordinatorOptions {
    if drill && options.protocol == redt_proto::Protocol::Redt {
        options.failover = true;
    }
    if drill {
        options = redt_coordinator::NodeTimeouts::defaults(topo).apply(options);
    }
    options
}

/// Prints an embedded bench's drill (its log was printed as it happened): the drill's figures
/// and the heals and settling after it.
pub fn print_embedded(r: &EmbeddedDrillReport) {
    println!("  drill (in-process kills: the node is stopped and started again on its MemStore)");
    print(&r.drill, false);
    let a = &r.after;
    println!("  after the drill              {}", a.healed.join("; "));
    match (a.settled, a.epoch) {
        (true, Some(e)) => println!(
            "  settled after the drill      in {} ms: every node at epoch {e}, nothing undecided, owed or unreplayed, no partition under-replicated",
            a.wait_ms
        ),
        (true, None) => println!("  settled after the drill      in {} ms", a.wait_ms),
        (false, _) => println!(
            "  settled after the drill      NO, gave up after {} ms: {}",
            a.wait_ms,
            a.unsettled.as_deref().unwrap_or("?")
        ),
    }
}

/// Saves an embedded bench's drill timeline to the CSV file and chart asked for and fails when the cluster did not
/// settle or an effect failed (after everything was printed).
///
/// # Errors
/// As [`Outputs::save`] and [`verdict`]; the cluster did not settle after the drill.
pub fn finish_embedded(
    r: &EmbeddedDrillReport,
    (timeline_csv, chart): (Option<&Path>, Option<&Path>),
    title: &str,
    say: bool,
) -> Result<()> {
    Outputs::of(None, timeline_csv, chart).save(&r.drill, title, say)?;
    verdict(&r.drill)?;
    if !r.after.settled {
        bail!(
            "the cluster did not settle within {} s after the drill: {}",
            redt_bench::drill_embedded::SETTLE_PATIENCE.as_secs(),
            r.after.unsettled.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}
