//! Failure drills against a running cluster (`redt drill`): a
//! [`DrillPlan`] of scheduled faults carried out while the cluster runs — under the clients of
//! `redt bench ycsb --cluster F --drill PLAN` ([`crate::drill_bench`]), or under whatever load
//! the cluster has (`redt drill PLAN`) — and what recovery does, measured:
//!
//! - a timeline in 100 ms buckets of commits, aborts and unknown answers (the bench's clients,
//!   or the nodes' answer counters from `redt status`), the latency p99 per second (bench
//!   only), and from the status polls the undecided entries, replay backlog and suspicions;
//!   every inject and heal is marked;
//! - per fault: detection (the failed nodes suspected by a first and by every surviving node,
//!   from the failure detectors' `suspected_nodes`; for a partition each side suspecting the
//!   other), the transactions in flight at the fault decided at the surviving nodes and then
//!   everywhere, the time to throughput back at ≥ 90% of the pre-fault rate (1 s windows),
//!   the unavailability window of every data partition (bench only: the fault to the first
//!   acknowledged commit of a transaction touching it submitted after the fault), and the heal
//!   to no node suspecting any;
//! - the suspicions raised while no fault was in force (false suspicions), and what was left
//!   once the cluster settled (lock words, undecided entries, recoveries).
//!
//! The structure follows the crate's sans-IO habit: [`Watch`] is the pure core (actions and
//! status polls in, log lines and figures out, time passed in), [`run`] the thin driver that
//! sleeps, polls and calls the [`FaultDriver`] the binary supplies (SIGKILL through the run
//! directory's pid files, `redt cluster start`, netem requests), and [`report`] a pure
//! function of what was seen.

use crate::drill_plan::{Action, DrillPlan, Effect, Event, Fault, Phase};
use redt_checkers::acked_writes::LostReport;
use redt_coordinator::{Client, NodeStatus};
use redt_proto::{NodeId, PartitionId, Topology};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Width of one timeline bucket.
pub const BUCKET: Duration = Duration::from_millis(100);

/// Buckets per second.
const PER_S: usize = 10;

/// The fraction of the pre-fault throughput that counts as full throughput again.
pub const FULL_THROUGHPUT: f64 = 0.9;

/// What the summary says when no placement change happened, or replication was not back at
/// its factor by the end.
pub const NO_REBUILD: &str = "n/a (no placement change, or not restored by the end)";

/// A boxed future of one effect: a line for the log, or why it failed.
pub type EffectFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// Carries out the [`Effect`]s of a plan's actions on a real cluster. Process control and
/// netem requests live in the binary.
pub trait FaultDriver: Send + Sync {
    /// Carries out `effect`; returns a line for the log (`killed dc2-n1 (pid 4242)`) or why it
    /// failed.
    fn apply(&self, effect: Effect) -> EffectFuture;
}

/// The nodes a drill has taken down (killed, or started again and not serving yet): the
/// bench's clients do not submit to them and the status polls skip them.
#[derive(Debug, Default)]
pub struct DownSet(Mutex<BTreeSet<NodeId>>);

impl DownSet {
    /// Whether `node` is down.
    pub fn contains(&self, node: NodeId) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(&node)
    }

    /// The nodes down now.
    pub fn snapshot(&self) -> BTreeSet<NodeId> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn insert(&self, node: NodeId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(node);
    }

    fn remove(&self, node: NodeId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&node);
    }
}

/// Answers counted in one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Committed.
    pub committed: u64,
    /// Aborted.
    pub aborted: u64,
    /// Unknown.
    pub unknown: u64,
}

/// The timeline's data: see [`Timeline`].
#[derive(Clone, Debug, Default)]
pub struct TimelineData {
    /// Answers per [`BUCKET`] since the start.
    pub buckets: Vec<Counts>,
    /// Latencies (µs) of the commits acknowledged in each second since the start.
    pub latencies_us: Vec<Vec<u32>>,
    /// Per data partition, `(submitted, acknowledged)` in µs since the start of every commit of
    /// a transaction touching it; empty when the answers came from the nodes' counters.
    pub partitions: Vec<Vec<(u64, u64)>>,
}

/// The answers over time, in [`BUCKET`]s from the start of the drill (the measured interval
/// of a bench). Shared by the clients (or the status poll) and the report.
#[derive(Debug, Default)]
pub struct Timeline(Mutex<TimelineData>);

fn bucket_of(t: Duration) -> usize {
    (t.as_micros() / BUCKET.as_micros()) as usize
}

fn micros(t: Duration) -> u64 {
    t.as_micros().min(u64::MAX as u128) as u64
}

impl Timeline {
    /// An empty timeline of a topology with `partitions` data partitions (0: the commits'
    /// partitions are not recorded).
    pub fn new(partitions: usize) -> Self {
        Timeline(Mutex::new(TimelineData { partitions: vec![Vec::new(); partitions], ..Default::default() }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut TimelineData) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Adds `counts` to the bucket of `at` (since the start).
    pub fn add(&self, at: Duration, counts: Counts) {
        self.with(|d| {
            let i = bucket_of(at);
            if d.buckets.len() <= i {
                d.buckets.resize(i + 1, Counts::default());
            }
            let b = &mut d.buckets[i];
            b.committed += counts.committed;
            b.aborted += counts.aborted;
            b.unknown += counts.unknown;
        })
    }

    /// Counts a commit submitted at `submitted` and acknowledged at `acked` (since the start;
    /// a submission before the start counts as at the start) of a transaction touching
    /// `partitions`.
    pub fn committed(&self, submitted: Duration, acked: Duration, partitions: &[PartitionId]) {
        self.add(acked, Counts { committed: 1, ..Default::default() });
        self.with(|d| {
            let s = acked.as_secs() as usize;
            if d.latencies_us.len() <= s {
                d.latencies_us.resize(s + 1, Vec::new());
            }
            d.latencies_us[s].push(micros(acked.saturating_sub(submitted)).min(u32::MAX as u64) as u32);
            for p in partitions {
                if let Some(v) = d.partitions.get_mut(p.0 as usize) {
                    v.push((micros(submitted), micros(acked)));
                }
            }
        })
    }

    /// Spreads `counts` evenly over the buckets from the one of `from` to the one of `to`
    /// (the time between two status polls; the remainder goes to the last).
    pub fn add_spread(&self, from: Duration, to: Duration, counts: Counts) {
        let (first, last) = (bucket_of(from.min(to)), bucket_of(to));
        let n = (last - first + 1) as u64;
        for (k, i) in (first..=last).enumerate() {
            let share = |x: u64| x / n + if k as u64 == n - 1 { x % n } else { 0 };
            let c = Counts {
                committed: share(counts.committed),
                aborted: share(counts.aborted),
                unknown: share(counts.unknown),
            };
            self.add(BUCKET * i as u32, c);
        }
    }

    /// The data so far.
    pub fn snapshot(&self) -> TimelineData {
        self.with(|d| d.clone())
    }
}

/// One line of a drill's log: what happened, when.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogLine {
    /// Seconds since the start.
    pub t_s: f64,
    /// What happened.
    pub text: String,
}

impl std::fmt::Display for LogLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>+9.3} s  {}", self.t_s, self.text)
    }
}

/// What a drill reads of one node's status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    /// Client answers of its coordinators since it started: committed, aborted, unknown.
    pub answers: [u64; 3],
    /// Undecided entries in its ring.
    pub undecided: u64,
    /// Start of the oldest, ms since the Unix epoch (0: none).
    pub oldest_undecided_unix_ms: u64,
    /// Ring slots not yet released by replay.
    pub backlog: u64,
    /// Nodes its failure detector suspects.
    pub suspected: Vec<NodeId>,
    /// Suspicions it raised since it started.
    pub suspicions_total: u64,
    /// The placement epoch it runs (see [`status_epoch`]).
    pub epoch: Option<u64>,
    /// Whether it is rebuilding a replica (see [`status_rebuilding`]).
    pub rebuilding: Option<bool>,
}

/// The placement epoch a node reports (`redt status`'s epoch column).
pub fn status_epoch(s: &NodeStatus) -> Option<u64> {
    Some(u64::from(s.epoch.0))
}

/// Whether a node's current placement holds a partition below the replication factor (a
/// replica removed and not rebuilt yet, or a learner not yet promoted).
pub fn status_rebuilding(s: &NodeStatus) -> Option<bool> {
    Some(s.under_replicated > 0)
}

impl NodeView {
    /// The view of `s`.
    pub fn of(s: &NodeStatus) -> Self {
        NodeView {
            answers: [s.committed, s.aborted, s.unknown],
            undecided: s.undecided_entries,
            oldest_undecided_unix_ms: s.oldest_undecided_unix_ms,
            backlog: s.replay_backlog_slots,
            suspected: s.suspected_nodes.clone(),
            suspicions_total: s.suspicions_total,
            epoch: status_epoch(s),
            rebuilding: status_rebuilding(s),
        }
    }
}

/// One status poll, summed over the nodes that answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusSample {
    /// When the poll was sent, since the start.
    pub asked: Duration,
    /// Nodes asked (those not down) and nodes that answered.
    pub asked_nodes: usize,
    /// See `asked_nodes`.
    pub answered: usize,
    /// Undecided entries.
    pub undecided: u64,
    /// Replay backlog slots.
    pub backlog: u64,
    /// (node, suspected node) pairs.
    pub suspected_pairs: u64,
    /// The lowest and highest epoch reported (see [`status_epoch`]).
    pub epochs: Option<(u64, u64)>,
    /// Whether every node answered and none is rebuilding (see [`status_rebuilding`]).
    pub rebuilt: Option<bool>,
}

/// What one event of the plan came to, times since the start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventObs {
    /// When its inject started and when it was in place.
    pub inject_started: Option<Duration>,
    /// See `inject_started`.
    pub injected: Option<Duration>,
    /// `injected` on the wall clock, ms since the Unix epoch (compared with the nodes'
    /// undecided entries).
    pub injected_unix_ms: u64,
    /// When its heal started and when it was done (a restart: the node serves).
    pub heal_started: Option<Duration>,
    /// See `heal_started`.
    pub healed: Option<Duration>,
    /// From `injected` to the first poll in which a watcher suspects every node it should.
    pub first_suspected: Option<Duration>,
    /// … in which every watcher does.
    pub all_suspected: Option<Duration>,
    /// From `injected` to the first poll in which no node up holds an undecided entry older
    /// than the fault.
    pub decided_at_survivors: Option<Duration>,
    /// … every node of the cluster, after the heal.
    pub decided_everywhere: Option<Duration>,
    /// From `heal_started` to the first poll after the heal in which no node suspects any.
    pub unsuspected: Option<Duration>,
    /// Effects that failed.
    pub errors: Vec<String>,
}

/// The pure core of a drill: takes the plan's actions as they start and finish and the status
/// polls, and keeps the log, the samples and each event's figures. It reads no clock: every
/// input carries its time since the start.
#[derive(Clone, Debug)]
pub struct Watch {
    plan: DrillPlan,
    all: Vec<NodeId>,
    dc_nodes: Vec<Vec<NodeId>>,
    names: Vec<String>,
    /// Each event's figures, in plan order.
    pub events: Vec<EventObs>,
    /// The log so far.
    pub log: Vec<LogLine>,
    /// Every status poll.
    pub samples: Vec<StatusSample>,
    last_answers: BTreeMap<NodeId, [u64; 3]>,
    /// Suspicions summed over every node at the first poll every node answered.
    pub suspicions_at_start: Option<u64>,
    /// … at the last poll every node answered before the first inject.
    pub suspicions_before_first_fault: Option<u64>,
    /// The first poll after every event healed in which every node answered and none
    /// suspected any: when, and the suspicions summed then.
    pub quiet_after_heals: Option<(Duration, u64)>,
}

fn secs(t: Duration) -> f64 {
    t.as_secs_f64()
}

impl Watch {
    /// Nothing seen yet of `plan` on `topo`.
    pub fn new(topo: &Topology, plan: &DrillPlan) -> Self {
        Watch {
            plan: plan.clone(),
            all: topo.nodes.iter().map(|n| n.id).collect(),
            dc_nodes: topo.dcs.iter().map(|d| d.nodes.clone()).collect(),
            names: topo.nodes.iter().map(|n| n.name.clone()).collect(),
            events: vec![EventObs::default(); plan.events.len()],
            log: Vec::new(),
            samples: Vec::new(),
            last_answers: BTreeMap::new(),
            suspicions_at_start: None,
            suspicions_before_first_fault: None,
            quiet_after_heals: None,
        }
    }

    /// The plan.
    pub fn plan(&self) -> &DrillPlan {
        &self.plan
    }

    fn say(&mut self, t: Duration, text: String) -> LogLine {
        let l = LogLine { t_s: secs(t), text };
        self.log.push(l.clone());
        l
    }

    fn name(&self, n: NodeId) -> &str {
        self.names.get(n.0 as usize).map_or("?", |s| s.as_str())
    }

    /// `action` starts at `t`.
    pub fn handle_action_started(&mut self, action: Action, t: Duration) -> LogLine {
        let e = &mut self.events[action.event];
        let word = match action.phase {
            Phase::Inject => {
                e.inject_started = Some(t);
                "inject"
            }
            Phase::Heal => {
                e.heal_started = Some(t);
                "heal"
            }
        };
        let text = format!("{word} {}", self.plan.events[action.event]);
        self.say(t, text)
    }

    /// `action`'s effects are done at `t` (`unix_ms` on the wall clock) with `results` (a line
    /// each, or why it failed). Returns the lines to log.
    pub fn handle_action_done(
        &mut self,
        action: Action,
        t: Duration,
        unix_ms: u64,
        results: &[Result<String, String>],
    ) -> Vec<LogLine> {
        let e = &mut self.events[action.event];
        match action.phase {
            Phase::Inject => {
                e.injected = Some(t);
                e.injected_unix_ms = unix_ms;
            }
            Phase::Heal => e.healed = Some(t),
        }
        for r in results {
            if let Err(why) = r {
                e.errors.push(why.clone());
            }
        }
        let mut out = Vec::new();
        for r in results {
            let text = match r {
                Ok(line) => format!("  {line}"),
                Err(why) => format!("  failed: {why}"),
            };
            out.push(self.say(t, text));
        }
        if results.is_empty() {
            let text = format!(
                "  (already in force: nothing to {})",
                if action.phase == Phase::Inject { "do" } else { "undo" }
            );
            out.push(self.say(t, text));
        }
        out
    }

    /// The watchers of `event` among `up` (those that answered are judged) and the nodes
    /// each must suspect: every surviving node for a kill, each side of a partition for the
    /// other; nobody for a slow link.
    fn watchers(&self, event: &Event, up: &BTreeSet<NodeId>) -> Vec<(NodeId, Vec<NodeId>)> {
        let side = |dcs: &[crate::drill_plan::DcRef]| -> Vec<NodeId> {
            dcs.iter().flat_map(|d| self.dc_nodes.get(d.id.0 as usize).cloned().unwrap_or_default()).collect()
        };
        match &event.fault {
            Fault::KillDc { .. } | Fault::KillNode { .. } => {
                let targets = event.fault.killed();
                up.iter().filter(|n| !targets.contains(n)).map(|&n| (n, targets.clone())).collect()
            }
            Fault::Partition { a, b } => {
                let (a, b) = (side(a), side(b));
                let one = a.iter().filter(|n| up.contains(n)).map(|&n| (n, b.clone()));
                let other = b.iter().filter(|n| up.contains(n)).map(|&n| (n, a.clone()));
                one.chain(other).collect()
            }
            Fault::SlowLink { .. } => vec![],
        }
    }

    /// A status poll sent at `asked` and answered by `t` to the nodes not in `down`:
    /// `statuses` holds each asked node's view or error. Returns the lines to log and the
    /// answers the nodes counted since the previous poll (a node started again counts from
    /// zero).
    pub fn handle_status(
        &mut self,
        asked: Duration,
        t: Duration,
        down: &BTreeSet<NodeId>,
        statuses: &[(NodeId, Result<NodeView, String>)],
    ) -> (Vec<LogLine>, Counts) {
        let ok: BTreeMap<NodeId, &NodeView> =
            statuses.iter().filter_map(|(n, s)| s.as_ref().ok().map(|v| (*n, v))).collect();
        let up: BTreeSet<NodeId> = self.all.iter().copied().filter(|n| !down.contains(n)).collect();
        let everyone = ok.len() == self.all.len();
        // Counters.
        let mut counts = Counts::default();
        for (&n, v) in &ok {
            let d = match self.last_answers.get(&n) {
                Some(prev) if v.answers.iter().zip(prev).all(|(a, b)| a >= b) => {
                    [v.answers[0] - prev[0], v.answers[1] - prev[1], v.answers[2] - prev[2]]
                }
                Some(_) => v.answers,
                None => [0; 3],
            };
            counts.committed += d[0];
            counts.aborted += d[1];
            counts.unknown += d[2];
            self.last_answers.insert(n, v.answers);
        }
        let epochs = ok
            .values()
            .filter_map(|v| v.epoch)
            .fold(None, |acc: Option<(u64, u64)>, e| Some(acc.map_or((e, e), |(lo, hi)| (lo.min(e), hi.max(e)))));
        let rebuilt = if !ok.is_empty() && ok.values().all(|v| v.rebuilding.is_some()) {
            Some(ok.values().all(|v| v.rebuilding == Some(false)))
        } else {
            None
        };
        self.samples.push(StatusSample {
            asked,
            asked_nodes: statuses.len(),
            answered: ok.len(),
            undecided: ok.values().map(|v| v.undecided).sum(),
            backlog: ok.values().map(|v| v.backlog).sum(),
            suspected_pairs: ok.values().map(|v| v.suspected.len() as u64).sum(),
            epochs,
            rebuilt,
        });
        let total: Option<u64> = everyone.then(|| ok.values().map(|v| v.suspicions_total).sum());
        let any_started = self.events.iter().any(|e| e.inject_started.is_some());
        if total.is_some() && self.suspicions_at_start.is_none() && !any_started {
            self.suspicions_at_start = total;
        }
        if total.is_some() && !any_started {
            self.suspicions_before_first_fault = total;
        }
        let nobody_suspects = everyone && ok.values().all(|v| v.suspected.is_empty());
        let all_healed =
            self.plan.events.iter().zip(&self.events).all(|(p, e)| p.heal_after.is_some() && e.healed.is_some());
        let mut lines = Vec::new();
        if self.quiet_after_heals.is_none() && all_healed && nobody_suspects {
            let latest = self.events.iter().filter_map(|e| e.healed).max().unwrap_or_default();
            if asked >= latest {
                self.quiet_after_heals = total.map(|s| (t, s));
            }
        }
        let decided = |nodes: &[NodeId], since_unix_ms: u64| {
            nodes.iter().all(|n| {
                ok.get(n).is_some_and(|v| v.oldest_undecided_unix_ms == 0 || v.oldest_undecided_unix_ms > since_unix_ms)
            })
        };
        for i in 0..self.events.len() {
            let event = self.plan.events[i].clone();
            let obs = self.events[i].clone();
            let Some(injected) = obs.injected.filter(|&at| asked >= at) else { continue };
            let since = t.saturating_sub(injected);
            let what = event.fault.to_string();
            let is_failure = !matches!(event.fault, Fault::SlowLink { .. });
            let mut upd = obs.clone();
            if is_failure && obs.heal_started.is_none() && obs.all_suspected.is_none() {
                let watchers = self.watchers(&event, &up);
                let suspecting = watchers
                    .iter()
                    .filter(|(w, targets)| ok.get(w).is_some_and(|v| targets.iter().all(|x| v.suspected.contains(x))))
                    .map(|(w, _)| *w)
                    .collect::<Vec<_>>();
                if !suspecting.is_empty() && obs.first_suspected.is_none() {
                    upd.first_suspected = Some(since);
                    let by = self.name(suspecting[0]).to_string();
                    lines.push(format!(
                        "{what}: detected by {} of {} watchers (first: {by})",
                        suspecting.len(),
                        watchers.len()
                    ));
                }
                if !watchers.is_empty() && suspecting.len() == watchers.len() {
                    upd.all_suspected = Some(since);
                    lines.push(format!("{what}: detected by every watcher ({})", watchers.len()));
                }
            }
            if is_failure
                && obs.decided_at_survivors.is_none()
                && decided(&up.iter().copied().collect::<Vec<_>>(), obs.injected_unix_ms)
            {
                upd.decided_at_survivors = Some(since);
                lines.push(format!(
                    "{what}: every transaction in flight at the fault decided at the {} nodes up",
                    up.len()
                ));
            }
            if let Some(healed) = obs.healed.filter(|&h| asked >= h) {
                if is_failure
                    && obs.decided_everywhere.is_none()
                    && down.is_empty()
                    && decided(&self.all, obs.injected_unix_ms)
                {
                    upd.decided_everywhere = Some(since);
                    lines.push(format!("{what}: every transaction in flight at the fault decided at every node"));
                }
                if obs.unsuspected.is_none() && nobody_suspects {
                    let from = obs.heal_started.unwrap_or(healed);
                    upd.unsuspected = Some(t.saturating_sub(from));
                    lines.push(format!("{what}: healed, no node suspects any"));
                }
            }
            self.events[i] = upd;
        }
        let lines = lines.into_iter().map(|l| self.say(t, l)).collect();
        (lines, counts)
    }
}

/// Every part of a drill run: the plan and cluster, the driver of its effects, the status
/// watcher (a client with a short call timeout), the timeline, the nodes down, and where log
/// lines go as they happen.
pub struct DrillSetup {
    /// The plan.
    pub plan: DrillPlan,
    /// The cluster's topology.
    pub topo: Arc<Topology>,
    /// Carries out the effects.
    pub driver: Arc<dyn FaultDriver>,
    /// Asks the nodes' status every [`BUCKET`].
    pub watcher: Arc<Client>,
    /// The timeline the answers go to.
    pub timeline: Arc<Timeline>,
    /// The nodes down, shared with the clients.
    pub down: Arc<DownSet>,
    /// Called with every log line as it happens.
    pub on_log: Arc<dyn Fn(&LogLine) + Send + Sync>,
    /// Count the nodes' answer counters into the timeline (`redt drill`, which has no clients
    /// of its own).
    pub counts_from_status: bool,
}

/// ms since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Carries out `effects` in stages — the kills together, then the link changes together, then
/// the starts together (a started node leaves `down`), and so on in order — and returns each
/// one's result in order.
async fn execute(
    driver: &Arc<dyn FaultDriver>,
    down: &Arc<DownSet>,
    effects: Vec<Effect>,
) -> Vec<Result<String, String>> {
    let stage = |e: &Effect| match e {
        Effect::Kill(_) => 0,
        Effect::Start(_) => 2,
        Effect::Cut { .. } | Effect::SetRtt { .. } => 1,
    };
    let mut out = Vec::with_capacity(effects.len());
    let mut i = 0;
    while i < effects.len() {
        let mut j = i;
        while j < effects.len() && stage(&effects[j]) == stage(&effects[i]) {
            j += 1;
        }
        let mut set = tokio::task::JoinSet::new();
        for (k, e) in effects[i..j].iter().cloned().enumerate() {
            let f = driver.apply(e.clone());
            set.spawn(async move { (k, e, f.await) });
        }
        let mut done = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok((k, e, r)) => done.push((k, Some(e), r)),
                Err(e) => done.push((usize::MAX, None, Err(format!("effect task: {e}")))),
            }
        }
        done.sort_by_key(|(k, _, _)| *k);
        for (_, e, r) in done {
            if let (Some(Effect::Start(n)), Ok(_)) = (&e, &r) {
                down.remove(*n);
            }
            out.push(r);
        }
        i = j;
    }
    out
}

fn lock(w: &Mutex<Watch>) -> std::sync::MutexGuard<'_, Watch> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the plan of `setup` from `start`: carries each action out at its time (kills mark
/// their nodes down at once), polls the status of every node up every [`BUCKET`] until
/// `until` after `start` (at least until the last action) and every action has finished, and
/// returns what it saw.
pub async fn run(setup: &DrillSetup, start: Instant, until: Duration) -> Watch {
    let watch = Arc::new(Mutex::new(Watch::new(&setup.topo, &setup.plan)));
    let actions = {
        let (plan, topo, driver, down, on_log, watch) = (
            setup.plan.clone(),
            setup.topo.clone(),
            setup.driver.clone(),
            setup.down.clone(),
            setup.on_log.clone(),
            watch.clone(),
        );
        tokio::spawn(async move {
            let mut state = crate::drill_plan::FaultState::new(&topo, &plan);
            let mut running = tokio::task::JoinSet::new();
            for a in plan.actions() {
                tokio::time::sleep_until((start + a.at).into()).await;
                let effects = state.handle(a);
                for e in &effects {
                    if let Effect::Kill(n) = e {
                        down.insert(*n);
                    }
                }
                let line = lock(&watch).handle_action_started(a, start.elapsed());
                on_log(&line);
                let (driver, down, on_log, watch) = (driver.clone(), down.clone(), on_log.clone(), watch.clone());
                running.spawn(async move {
                    let results = execute(&driver, &down, effects).await;
                    let lines = lock(&watch).handle_action_done(a, start.elapsed(), unix_ms(), &results);
                    for l in &lines {
                        on_log(l);
                    }
                });
            }
            while running.join_next().await.is_some() {}
        })
    };
    let until = until.max(setup.plan.last_action());
    let all: Vec<NodeId> = setup.topo.nodes.iter().map(|n| n.id).collect();
    let mut tick = tokio::time::interval(BUCKET);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous = Duration::ZERO;
    loop {
        tick.tick().await;
        let asked = start.elapsed();
        if asked >= until && actions.is_finished() {
            break;
        }
        let down = setup.down.snapshot();
        let up: Vec<NodeId> = all.iter().copied().filter(|n| !down.contains(n)).collect();
        let statuses: Vec<(NodeId, Result<NodeView, String>)> = setup
            .watcher
            .status_of(&up, false)
            .await
            .into_iter()
            .map(|(n, s)| (n, s.map(|s| NodeView::of(&s))))
            .collect();
        let t = start.elapsed();
        let (lines, counts) = lock(&watch).handle_status(asked, t, &down, &statuses);
        if setup.counts_from_status {
            // What the nodes answered since the previous poll, over the time between.
            setup.timeline.add_spread(previous, t, counts);
        }
        previous = t;
        for l in &lines {
            (setup.on_log)(l);
        }
    }
    if let Err(e) = actions.await {
        let line = lock(&watch).say(start.elapsed(), format!("the action task failed: {e}"));
        (setup.on_log)(&line);
    }
    let w = lock(&watch).clone();
    w
}

/// What was left once the cluster settled after a drill.
#[derive(Clone, Debug, Default)]
pub struct Settled {
    /// Lock words held, summed over the nodes up (`None`: one did not answer).
    pub locks: Option<u64>,
    /// Undecided entries, likewise.
    pub undecided: Option<u64>,
    /// How long settling took.
    pub settle_ms: u64,
    /// Recoveries started, committed, aborted, summed (a restarted node counts from its
    /// restart).
    pub recoveries: [u64; 3],
    /// Suspicions raised since each node started, summed (`None`: one did not answer).
    pub suspicions: Option<u64>,
    /// Nodes left down by the plan (a kill without restart).
    pub down: Vec<NodeId>,
}

/// After the load stopped: waits (at most 30 s) until no node up holds an undecided entry or
/// a lock word, owes a catch-up or has a replay backlog, then counts lock words and undecided
/// entries left on the nodes up (those not in `down`). Locks are waited for too: with early
/// acknowledgement a client has its answer before phase 2 releases the locks, so the last
/// transactions' locks may still be on their way out when the load stops; a lock that stays
/// is counted after the 30 s. `client` must hold an operator certificate: the nodes count
/// locks for an operator only (to a client certificate every status is an error).
pub async fn settle(client: &Arc<Client>, down: &BTreeSet<NodeId>) -> Settled {
    let up: Vec<NodeId> = client.topology().nodes.iter().map(|n| n.id).filter(|n| !down.contains(n)).collect();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let s = client.status_of(&up, true).await;
        if s.iter().all(|(_, s)| {
            s.as_ref().is_ok_and(|s| {
                s.undecided_entries == 0
                    && s.catch_ups_owed == 0
                    && s.replay_backlog_slots == 0
                    && s.locks_held.is_none_or(|l| l == 0)
            })
        }) {
            break;
        }
        tokio::time::sleep(BUCKET).await;
    }
    let settle_ms = t0.elapsed().as_millis() as u64;
    let last = client.status_of(&up, true).await;
    let sum = |f: &dyn Fn(&NodeStatus) -> Option<u64>| -> Option<u64> {
        last.iter().map(|(_, s)| s.as_ref().ok().and_then(f)).sum()
    };
    Settled {
        locks: sum(&|s| s.locks_held),
        undecided: sum(&|s| Some(s.undecided_entries)),
        settle_ms,
        recoveries: [
            sum(&|s| Some(s.recoveries_started)).unwrap_or(0),
            sum(&|s| Some(s.recoveries_committed)).unwrap_or(0),
            sum(&|s| Some(s.recoveries_aborted)).unwrap_or(0),
        ],
        suspicions: if down.is_empty() { sum(&|s| Some(s.suspicions_total)) } else { None },
        down: down.iter().copied().collect(),
    }
}

/// What one event of the plan came to.
#[derive(Clone, Debug, Serialize)]
pub struct EventReport {
    /// The event, canonically.
    pub event: String,
    /// When the fault was in place, s since the start.
    pub injected_at_s: Option<f64>,
    /// When its heal started and was done (a restart: serving again), s since the start.
    pub heal_started_at_s: Option<f64>,
    /// See `heal_started_at_s`.
    pub healed_at_s: Option<f64>,
    /// From the fault to the first status poll in which a watcher (a surviving node; for a
    /// partition, a node of either side) suspects every node it should (the killed ones; the
    /// other side), ms; `None`: not before the heal, or not a failure (a slow link). Polled
    /// every 100 ms: an upper bound, to about 100 ms.
    pub detected_first_ms: Option<u64>,
    /// … in which every watcher does.
    pub detected_all_ms: Option<u64>,
    /// From the fault to no undecided entry older than the fault at the nodes up, ms.
    pub decided_at_survivors_ms: Option<u64>,
    /// … at every node, after the heal, ms.
    pub decided_everywhere_ms: Option<u64>,
    /// From the heal's start to no node suspecting any, ms.
    pub heal_to_unsuspected_ms: Option<u64>,
    /// From the fault to the start of the first 1 s window (in 100 ms steps) whose commits
    /// reach 90% of the pre-fault rate, ms (0: the fault never brought a whole second below
    /// it); `None`: not within the run, or no pre-fault rate.
    pub full_throughput_ms: Option<u64>,
    /// Per data partition (`p0`, …), from the fault to the first acknowledged commit of a
    /// transaction touching it submitted after the fault, ms (`None`: none within the run).
    /// Empty without the clients' commits (`redt drill`).
    pub unavailable_ms: Vec<(String, Option<u64>)>,
    /// Effects that failed.
    pub errors: Vec<String>,
}

/// One second of the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct SecondRow {
    /// Seconds since the start (the row covers [t, t + 1)).
    pub t_s: u64,
    /// Commits.
    pub committed: u64,
    /// Aborts.
    pub aborted: u64,
    /// Unknown answers.
    pub unknown: u64,
    /// p99 latency of the commits acknowledged in this second, ms (`None`: none, or no
    /// latencies measured).
    pub p99_ms: Option<f64>,
    /// The injects and heals that started in this second.
    pub events: String,
}

/// One [`BUCKET`] of the timeline, as the CSV holds it.
#[derive(Clone, Debug, Serialize)]
pub struct BucketRow {
    /// Start of the bucket, s since the start.
    pub t_s: f64,
    /// Commits per second in this bucket.
    pub committed_per_s: f64,
    /// Aborts per second.
    pub aborted_per_s: f64,
    /// Unknown answers per second.
    pub unknown_per_s: f64,
    /// The p99 latency of the second the bucket lies in, ms.
    pub p99_ms: Option<f64>,
    /// From the last status poll sent in this bucket: undecided entries, replay backlog slots,
    /// (node, suspected node) pairs, summed over the nodes that answered.
    pub undecided: Option<u64>,
    /// See `undecided`.
    pub backlog: Option<u64>,
    /// See `undecided`.
    pub suspected: Option<u64>,
    /// The injects and heals that started in this bucket.
    pub events: String,
}

/// What a drill measured.
#[derive(Clone, Debug, Serialize)]
pub struct DrillReport {
    /// The plan, canonically.
    pub plan: String,
    /// Seconds the timeline covers.
    pub duration_s: f64,
    /// Commits per second from the start to the first fault (`None`: it starts at once).
    pub pre_fault_committed_per_s: Option<f64>,
    /// Each event's figures.
    pub events: Vec<EventReport>,
    /// Suspicions raised from the start to the first fault: every one is false (`None`: a node
    /// did not answer).
    pub false_suspicions_before_first_fault: Option<u64>,
    /// Suspicions raised from the first poll after every heal in which nothing was suspected
    /// until the cluster settled (`None`: an event has no heal, that poll never came, or a
    /// node did not answer).
    pub false_suspicions_after_last_heal: Option<u64>,
    /// From the first fault to the first poll, after the last heal (if any) and once a new
    /// placement is adopted everywhere, in which every node answering holds every partition
    /// at its replication factor again (removed replicas rebuilt elsewhere and promoted), ms.
    /// `None`: no placement change, or not restored by the end.
    pub replication_restored_ms: Option<u64>,
    /// The lowest and highest placement epoch the nodes reported.
    pub epochs: Option<(u64, u64)>,
    /// From the first fault to the first poll in which every node that answered reports a
    /// newer epoch than at the start (the failover's new placement adopted everywhere), ms.
    pub new_epoch_everywhere_ms: Option<u64>,
    /// After settling: lock words held on the nodes up (`None`: one did not answer).
    pub locks_left: Option<u64>,
    /// … undecided entries.
    pub undecided_left: Option<u64>,
    /// How long settling took, ms.
    pub settle_ms: u64,
    /// Recoveries started, committed, aborted, summed over the nodes at the end.
    pub recoveries: [u64; 3],
    /// Nodes the plan left down (no restart).
    pub left_down: Vec<String>,
    /// The acknowledged-commits check (`None`: no clients of our own, `redt drill`).
    pub lost: Option<LostReport>,
    /// The drill's log.
    pub log: Vec<LogLine>,
    /// Per second.
    pub seconds: Vec<SecondRow>,
    /// Per [`BUCKET`] (in the timeline CSV, not in the JSON).
    #[serde(skip)]
    pub buckets: Vec<BucketRow>,
}

/// The p99 of `v` (µs) in ms, from an hdrhistogram of 3 significant digits (0.1%).
fn p99_ms(v: &[u32]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::from(u32::MAX), 3).ok()?;
    for &us in v {
        h.saturating_record(u64::from(us));
    }
    Some(h.value_at_quantile(0.99) as f64 / 1e3)
}

/// The first bucket `w ≥ from` whose window of `PER_S` buckets holds at least `target`
/// commits (`None` if no full window does).
pub fn first_window_reaching(buckets: &[Counts], from: usize, target: f64) -> Option<usize> {
    (from..(buckets.len() + 1).saturating_sub(PER_S))
        .find(|&i| buckets[i..i + PER_S].iter().map(|b| b.committed).sum::<u64>() as f64 >= target)
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The report of a drill of `duration` from what `watch` saw, the `timeline`, what was left
/// once the cluster settled, and the acknowledged-commits check if any.
pub fn report(
    watch: &Watch,
    timeline: &TimelineData,
    duration: Duration,
    settled: &Settled,
    lost: Option<LostReport>,
) -> DrillReport {
    let plan = watch.plan();
    let end = bucket_of(duration).max(1);
    let mut buckets = timeline.buckets.clone();
    buckets.resize(buckets.len().max(end), Counts::default());
    let first_fault = watch.events.iter().filter_map(|e| e.injected.or(e.inject_started)).min();
    let pre = first_fault.map_or(end, |t| bucket_of(t).min(end));
    let pre_rate = (pre > 0)
        .then(|| buckets[..pre].iter().map(|b| b.committed).sum::<u64>() as f64 / (pre as f64 * BUCKET.as_secs_f64()));
    let events = plan
        .events
        .iter()
        .zip(&watch.events)
        .map(|(e, o)| {
            let injected = o.injected;
            let full_throughput_ms = injected.zip(pre_rate.filter(|&r| r > 0.0)).and_then(|(at, rate)| {
                let from = (at.as_micros().div_ceil(BUCKET.as_micros())) as usize;
                first_window_reaching(&buckets[..end], from, rate * FULL_THROUGHPUT)
                    .map(|w| ms((BUCKET * w as u32).saturating_sub(at)))
            });
            let unavailable_ms = match injected {
                Some(at) if timeline.partitions.iter().any(|p| !p.is_empty()) => {
                    let at_us = micros(at);
                    timeline
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(p, commits)| {
                            let first = commits.iter().filter(|&&(s, _)| s >= at_us).map(|&(_, a)| a).min();
                            (format!("p{p}"), first.map(|a| (a - at_us) / 1000))
                        })
                        .collect()
                }
                _ => vec![],
            };
            EventReport {
                event: e.to_string(),
                injected_at_s: injected.map(secs),
                heal_started_at_s: o.heal_started.map(secs),
                healed_at_s: o.healed.map(secs),
                detected_first_ms: o.first_suspected.map(ms),
                detected_all_ms: o.all_suspected.map(ms),
                decided_at_survivors_ms: o.decided_at_survivors.map(ms),
                decided_everywhere_ms: o.decided_everywhere.map(ms),
                heal_to_unsuspected_ms: o.unsuspected.map(ms),
                full_throughput_ms,
                unavailable_ms,
                errors: o.errors.clone(),
            }
        })
        .collect();
    // The marks: every inject and heal, at its start.
    let marks: Vec<(Duration, String)> = plan
        .events
        .iter()
        .zip(&watch.events)
        .flat_map(|(e, o)| {
            let inject = o.inject_started.map(|t| (t, e.fault.to_string()));
            let heal = o.heal_started.map(|t| (t, format!("heal {}", e.fault)));
            inject.into_iter().chain(heal)
        })
        .collect();
    let marks_in = |from: Duration, to: Duration| {
        marks.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; ")
    };
    let p99s: Vec<Option<f64>> =
        (0..end.div_ceil(PER_S)).map(|s| timeline.latencies_us.get(s).and_then(|v| p99_ms(v))).collect();
    let seconds = buckets[..end]
        .chunks(PER_S)
        .enumerate()
        .map(|(s, c)| SecondRow {
            t_s: s as u64,
            committed: c.iter().map(|b| b.committed).sum(),
            aborted: c.iter().map(|b| b.aborted).sum(),
            unknown: c.iter().map(|b| b.unknown).sum(),
            p99_ms: p99s.get(s).copied().flatten(),
            events: marks_in(Duration::from_secs(s as u64), Duration::from_secs(s as u64 + 1)),
        })
        .collect();
    let rate = 1.0 / BUCKET.as_secs_f64();
    let bucket_rows = buckets[..end]
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let from = BUCKET * i as u32;
            let sample = watch.samples.iter().rev().find(|s| s.asked >= from && s.asked < from + BUCKET);
            BucketRow {
                t_s: from.as_secs_f64(),
                committed_per_s: b.committed as f64 * rate,
                aborted_per_s: b.aborted as f64 * rate,
                unknown_per_s: b.unknown as f64 * rate,
                p99_ms: p99s.get(i / PER_S).copied().flatten(),
                undecided: sample.map(|s| s.undecided),
                backlog: sample.map(|s| s.backlog),
                suspected: sample.map(|s| s.suspected_pairs),
                events: marks_in(from, from + BUCKET),
            }
        })
        .collect();
    let epochs =
        watch.samples.iter().filter_map(|s| s.epochs).fold(None, |acc: Option<(u64, u64)>, (lo, hi)| {
            Some(acc.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))))
        });
    let start_epoch = watch.samples.first().and_then(|s| s.epochs).map(|(lo, _)| lo);
    // Rebuild: from the first fault to the first poll after the last heal (if any), with a
    // new placement everywhere, in which every node answering is at the replication factor.
    let last_heal = watch.events.iter().filter_map(|e| e.healed).max();
    let replication_restored_ms = first_fault.zip(start_epoch).and_then(|(f, e0)| {
        let after = last_heal.map_or(f, |h| h.max(f));
        watch
            .samples
            .iter()
            .find(|s| s.asked >= after && s.epochs.is_some_and(|(lo, _)| lo > e0) && s.rebuilt == Some(true))
            .map(|s| ms(s.asked.saturating_sub(f)))
    });
    let new_epoch_everywhere_ms = first_fault.zip(start_epoch).and_then(|(f, e0)| {
        watch.samples.iter().find(|s| s.asked >= f && s.epochs.is_some_and(|(lo, _)| lo > e0)).map(|s| ms(s.asked - f))
    });
    DrillReport {
        plan: plan.to_string(),
        duration_s: duration.as_secs_f64(),
        pre_fault_committed_per_s: pre_rate,
        events,
        false_suspicions_before_first_fault: watch
            .suspicions_before_first_fault
            .zip(watch.suspicions_at_start)
            .map(|(b, s)| b.saturating_sub(s)),
        false_suspicions_after_last_heal: watch
            .quiet_after_heals
            .zip(settled.suspicions)
            .map(|((_, quiet), end)| end.saturating_sub(quiet)),
        replication_restored_ms,
        epochs,
        new_epoch_everywhere_ms,
        locks_left: settled.locks,
        undecided_left: settled.undecided,
        settle_ms: settled.settle_ms,
        recoveries: settled.recoveries,
        left_down: settled.down.iter().map(|&n| watch.name(n).to_string()).collect(),
        lost,
        log: watch.log.clone(),
        seconds,
        buckets: bucket_rows,
    }
}

/// Writes the report's timeline to `path` as CSV, one row per [`BUCKET`] (the columns of
/// [`BucketRow`]), replacing the file.
///
/// # Errors
/// I/O errors, as text naming the file.
pub fn write_timeline_csv(path: &std::path::Path, report: &DrillReport) -> Result<(), String> {
    let mut text = String::new();
    for (i, row) in report.buckets.iter().enumerate() {
        let cells = crate::csv::flatten(row)?;
        if i == 0 {
            text.push_str(&crate::csv::record(cells.iter().map(|(k, _)| k)));
            text.push('\n');
        }
        text.push_str(&crate::csv::record(cells.iter().map(|(_, v)| v)));
        text.push('\n');
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the report's timeline chart as SVG to `svg` and as PNG beside it (same name,
/// `.png`): commits, aborts and unknown answers per second in 100 ms steps on top, the p99
/// latency per second below, a dashed line at every inject and heal. Returns the PNG's path.
///
/// # Errors
/// No font for the text, a drawing or file error (see [`crate::chart::write_timeline_charts`]).
pub fn write_timeline_chart(
    svg: &std::path::Path,
    report: &DrillReport,
    title: &str,
) -> Result<std::path::PathBuf, String> {
    use crate::chart::{ChartSpec, TimelineSeries};
    let png = svg.with_extension("png");
    let series = TimelineSeries {
        bucket_s: BUCKET.as_secs_f64(),
        committed_per_s: report.buckets.iter().map(|b| b.committed_per_s).collect(),
        aborted_per_s: report.buckets.iter().map(|b| b.aborted_per_s).collect(),
        unknown_per_s: report.buckets.iter().map(|b| b.unknown_per_s).collect(),
        p99_ms: report.seconds.iter().filter_map(|s| s.p99_ms.map(|p| (s.t_s as f64 + 0.5, p))).collect(),
        markers: report
            .events
            .iter()
            .flat_map(|e| {
                let fault = e.event.split(" at ").next().unwrap_or(&e.event).to_string();
                let inject = e.injected_at_s.map(|t| (t, fault.clone()));
                let heal = e.heal_started_at_s.map(|t| (t, format!("heal {fault}")));
                inject.into_iter().chain(heal)
            })
            .collect(),
    };
    let spec = ChartSpec { title: title.to_string(), subtitle: report.plan.clone(), x_label: "time (s)".into() };
    if let Some(dir) = svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::chart::write_timeline_charts(&spec, &series, svg, &png)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::from_yaml("local-fast.yaml", include_str!("../../configs/local-fast.yaml")).expect("valid")
    }

    fn view(suspected: &[u16], oldest: u64, answers: [u64; 3]) -> NodeView {
        NodeView {
            answers,
            oldest_undecided_unix_ms: oldest,
            undecided: u64::from(oldest > 0),
            suspected: suspected.iter().map(|&n| NodeId(n)).collect(),
            suspicions_total: suspected.len() as u64,
            ..Default::default()
        }
    }

    fn ms_(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_first_window_reaching_a_rate_starts_at_or_after_from() {
        let c = |n: &[u64]| n.iter().map(|&committed| Counts { committed, ..Default::default() }).collect::<Vec<_>>();
        let b = c(&[5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9]);
        assert_eq!(first_window_reaching(&b, 0, 50.0), Some(0));
        assert_eq!(first_window_reaching(&b, 1, 50.0), None, "no later window holds 50");
        assert_eq!(first_window_reaching(&b, 3, 10.0), Some(3));
        assert_eq!(first_window_reaching(&b, 11, 10.0), Some(12), "ten ones from 12 on");
        assert_eq!(first_window_reaching(&b, 12, 18.0), Some(14), "nine ones and the 9 at 14..24");
        assert_eq!(first_window_reaching(&b[..5], 0, 0.0), None, "no full window");
    }

    #[test]
    fn a_kill_is_detected_decided_and_healed_from_the_polls() {
        let topo = topo();
        let plan = DrillPlan::parse("kill-node dc3-n1 at 1s restart-after 2s", &topo).unwrap();
        let mut w = Watch::new(&topo, &plan);
        let all: BTreeSet<NodeId> = BTreeSet::new();
        let dead: BTreeSet<NodeId> = [NodeId(2)].into();
        let ups = |vs: [NodeView; 3]| -> Vec<(NodeId, Result<NodeView, String>)> {
            [0u16, 1, 3].iter().zip(vs).map(|(&n, v)| (NodeId(n), Ok(v))).collect()
        };
        // Before the fault: baseline counters, suspicions at the start.
        let every = |v: NodeView| -> Vec<(NodeId, Result<NodeView, String>)> {
            (0..4).map(|n| (NodeId(n), Ok(v.clone()))).collect()
        };
        let (_, c) = w.handle_status(ms_(0), ms_(5), &all, &every(view(&[], 0, [10, 1, 0])));
        assert_eq!(c, Counts::default(), "the first poll sets the baseline");
        let (_, c) = w.handle_status(ms_(100), ms_(105), &all, &every(view(&[], 0, [15, 2, 0])));
        assert_eq!(c, Counts { committed: 20, aborted: 4, unknown: 0 });
        let a = plan.actions();
        w.handle_action_started(a[0], ms_(1000));
        let lines = w.handle_action_done(a[0], ms_(1010), 50_000, &[Ok("killed dc3-n1 (pid 7)".into())]);
        assert_eq!(lines[0].text, "  killed dc3-n1 (pid 7)");
        // A poll sent before the fault was in place is not judged.
        w.handle_status(
            ms_(1000),
            ms_(1020),
            &dead,
            &ups([view(&[2], 40_000, [0; 3]), view(&[], 0, [0; 3]), view(&[], 0, [0; 3])]),
        );
        assert_eq!(w.events[0].first_suspected, None);
        // One survivor suspects it; an entry older than the fault remains at node 0.
        let (lines, _) = w.handle_status(
            ms_(1110),
            ms_(1120),
            &dead,
            &ups([view(&[2], 40_000, [20, 2, 0]), view(&[], 0, [16, 2, 0]), view(&[], 0, [15, 2, 0])]),
        );
        assert_eq!(w.events[0].first_suspected, Some(ms_(110)));
        assert_eq!(w.events[0].all_suspected, None);
        assert_eq!(w.events[0].decided_at_survivors, None);
        assert!(lines[0].text.contains("detected by 1 of 3 watchers (first: dc1-n1)"), "{lines:?}");
        // Every survivor suspects it; the old entry is decided (a newer one remains).
        w.handle_status(
            ms_(1210),
            ms_(1220),
            &dead,
            &ups([view(&[2], 60_000, [20, 2, 0]), view(&[2], 0, [16, 2, 0]), view(&[2], 0, [15, 2, 0])]),
        );
        assert_eq!(w.events[0].all_suspected, Some(ms_(210)));
        assert_eq!(w.events[0].decided_at_survivors, Some(ms_(210)));
        // The heal: the restart is done at 3.5 s; nothing suspected at 3.6 s.
        w.handle_action_started(a[1], ms_(3000));
        w.handle_action_done(a[1], ms_(3500), 52_500, &[Ok("started dc3-n1 again (pid 8)".into())]);
        w.handle_status(ms_(3600), ms_(3610), &all, &every(view(&[], 0, [3, 0, 0])));
        assert_eq!(w.events[0].decided_everywhere, Some(ms_(2600)));
        assert_eq!(w.events[0].unsuspected, Some(ms_(610)));
        assert_eq!(w.quiet_after_heals, Some((ms_(3610), 0)));
        assert_eq!(w.suspicions_at_start, Some(0));
        assert_eq!(w.suspicions_before_first_fault, Some(0));
    }

    #[test]
    fn a_partition_is_detected_when_each_side_suspects_the_other() {
        let topo = topo();
        let plan = DrillPlan::parse("partition dc1|dc2,dc3 at 1s heal-after 1s", &topo).unwrap();
        let mut w = Watch::new(&topo, &plan);
        let a = plan.actions();
        w.handle_action_started(a[0], ms_(1000));
        w.handle_action_done(a[0], ms_(1001), 1, &[Ok("cut".into()), Ok("cut".into())]);
        let none = BTreeSet::new();
        let polled = |v: [&[u16]; 4]| -> Vec<(NodeId, Result<NodeView, String>)> {
            (0..4).map(|n| (NodeId(n), Ok(view(v[n as usize], 0, [0; 3])))).collect()
        };
        w.handle_status(ms_(1100), ms_(1100), &none, &polled([&[1], &[], &[], &[]]));
        assert_eq!(w.events[0].first_suspected, None, "dc1-n1 must suspect both dc2-n1 and dc3-n1");
        w.handle_status(ms_(1200), ms_(1200), &none, &polled([&[1, 2], &[0], &[], &[]]));
        assert_eq!(w.events[0].first_suspected, Some(ms_(199)));
        assert_eq!(w.events[0].all_suspected, None);
        w.handle_status(ms_(1300), ms_(1300), &none, &polled([&[1, 2], &[0], &[0, 3], &[]]));
        assert_eq!(w.events[0].all_suspected, Some(ms_(299)), "dc4 is on neither side: not a watcher");
    }

    #[test]
    fn the_report_measures_throughput_windows_and_partition_windows() {
        let topo = topo();
        let plan = DrillPlan::parse("kill-node dc3-n1 at 2s restart-after 1s", &topo).unwrap();
        let mut w = Watch::new(&topo, &plan);
        let a = plan.actions();
        w.handle_action_started(a[0], ms_(2000));
        w.handle_action_done(a[0], ms_(2000), 1, &[Ok("killed".into())]);
        w.handle_action_started(a[1], ms_(3000));
        w.handle_action_done(a[1], ms_(3300), 2, &[Ok("started".into())]);
        let tl = Timeline::new(2);
        // 10 commits per 100 ms before the fault on p0 and p1; 2 per 100 ms (p0 only) until
        // 3.5 s; 10 per 100 ms (both) from 3.5 s on. Latency 5 ms.
        for i in 0..60u64 {
            let t = ms_(i * 100 + 50);
            let (n, parts): (u64, &[PartitionId]) =
                if (20..35).contains(&i) { (2, &[PartitionId(0)]) } else { (10, &[PartitionId(0), PartitionId(1)]) };
            for _ in 0..n {
                tl.committed(t - ms_(5), t, parts);
            }
        }
        tl.add(ms_(2050), Counts { aborted: 3, ..Default::default() });
        let settled = Settled { locks: Some(0), undecided: Some(0), ..Default::default() };
        let r = report(&w, &tl.snapshot(), Duration::from_secs(6), &settled, None);
        assert_eq!(r.pre_fault_committed_per_s, Some(100.0));
        let e = &r.events[0];
        assert_eq!(e.full_throughput_ms, Some(1400), "3.4–4.4 s holds 2 × 1 + 10 × 9 = 92 commits, 3.3–4.3 s 84");
        assert_eq!(e.unavailable_ms, vec![("p0".to_string(), Some(50)), ("p1".to_string(), Some(1550))]);
        assert_eq!(r.seconds.len(), 6);
        assert_eq!(r.seconds[2].committed, 20);
        assert_eq!(r.seconds[2].aborted, 3);
        assert_eq!(r.seconds[2].events, "kill-node dc3-n1");
        assert_eq!(r.seconds[3].events, "heal kill-node dc3-n1");
        let p99 = r.seconds[0].p99_ms.expect("a p99 in the first second");
        assert!((5.0..5.0 * 1.001).contains(&p99), "5 ms within the histogram's 0.1%: {p99}");
        assert_eq!(r.buckets.len(), 60);
        assert_eq!(r.buckets[20].events, "kill-node dc3-n1");
        assert_eq!(r.buckets[20].aborted_per_s, 30.0);
        assert_eq!(r.replication_restored_ms, None, "the placement never changed");
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("t.csv");
        write_timeline_csv(&csv, &r).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("t_s,committed_per_s,aborted_per_s,unknown_per_s,p99_ms,undecided,backlog,suspected,events")
        );
        assert_eq!(text.lines().count(), 61);
        assert!(text.lines().nth(21).unwrap().ends_with(",kill-node dc3-n1"), "{text}");
    }

    #[test]
    fn counts_between_two_polls_are_spread_over_their_buckets() {
        let tl = Timeline::new(0);
        tl.add_spread(ms_(150), ms_(420), Counts { committed: 10, aborted: 1, unknown: 0 });
        tl.add_spread(ms_(420), ms_(480), Counts { committed: 2, ..Default::default() });
        let b = tl.snapshot().buckets;
        let committed: Vec<u64> = b.iter().map(|c| c.committed).collect();
        assert_eq!(committed, [0, 2, 2, 2, 6], "10 over buckets 1–4 (remainder last), then 2 in bucket 4");
        assert_eq!(b.iter().map(|c| c.aborted).sum::<u64>(), 1);
    }

    #[test]
    fn p99_is_the_rank_ceiling_within_the_histograms_precision() {
        assert_eq!(p99_ms(&[]), None);
        assert_eq!(p99_ms(&[1000]), Some(1.0));
        let v: Vec<u32> = (1..=200).map(|x| x * 1000).collect();
        let p99 = p99_ms(&v).expect("a p99");
        assert!((198.0..198.0 * 1.001).contains(&p99), "the 198th of 200, within 0.1%: {p99}");
    }
}
