//! Failure drills during `redt bench ycsb --cluster` (issue 12, "Must show"): kill a node
//! process and start it again (`--kill NODE --at T --restart-after D`), or cut a DC off the
//! WAN and heal it (`--cut DC --at T --for D`), while the clients run, and measure what
//! recovery does:
//!
//! - a timeline in 100 ms buckets of commits of the transactions the fault touches (a
//!   partition with a replica on a failed node, or a failed coordinator) and of the others,
//!   with aborts and unknown answers;
//! - from the heal (restart, or the cut's end) to commits of the touched transactions back at
//!   half their rate before the fault;
//! - from the fault to every transaction in flight at that moment decided at the surviving
//!   nodes (no undecided entry older than the fault in their rings, from `redt status`), and
//!   after the heal at every node;
//! - from the fault to the failed nodes suspected by a first surviving node and by every one
//!   (their failure detectors, issue 13), and from the heal to no node suspecting any;
//! - the suspicions raised while no fault was active (before the fault, and once nothing is
//!   suspected after the heal): false suspicions;
//! - lock words and undecided entries left once the clients stop and the cluster settles.
//!
//! The fault itself (a SIGKILL, a restart, a netem partition) is carried out by callbacks the
//! caller supplies ([`Drill::inject`], [`Drill::heal`]): process control lives in the binary.

use redt_coordinator::{Client, NodeStatus};
use redt_proto::{NodeId, Topology};
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Width of one timeline bucket.
pub const BUCKET: Duration = Duration::from_millis(100);

/// A fault action: returns a line for the log, or why it failed.
pub type FaultAction = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>> + Send + Sync>;

/// A drill: what fails, when, and how to inject and heal it.
pub struct Drill {
    /// What it does, for the report (`kill dc3-n1`, `cut dc1`).
    pub name: String,
    /// The nodes the fault takes away (the killed node; every node of a cut DC).
    pub failed: Vec<NodeId>,
    /// When the fault starts, after the measured interval starts.
    pub at: Duration,
    /// How long it lasts (until the restart, or the cut's end).
    pub heal_after: Duration,
    /// Injects the fault.
    pub inject: FaultAction,
    /// Heals it.
    pub heal: FaultAction,
}

/// Counts per timeline bucket: touched commits, other commits, aborts, unknown answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Commits of transactions the fault touches.
    pub touched: u64,
    /// Commits of the other transactions.
    pub other: u64,
    /// Aborts.
    pub aborted: u64,
    /// Unknown answers.
    pub unknown: u64,
}

/// The clients' answers over time, in [`BUCKET`]s from the start of the measured interval.
#[derive(Debug, Default)]
pub struct Timeline(Mutex<Vec<Bucket>>);

/// What a client was told, for the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Committed; `touched`: the transaction involves a failed node.
    Committed {
        /// See [`Answer::Committed`].
        touched: bool,
    },
    /// Aborted.
    Aborted,
    /// Unknown.
    Unknown,
}

impl Timeline {
    /// Counts `answer`, given `since` the start of the measured interval.
    pub fn count(&self, since: Duration, answer: Answer) {
        let i = (since.as_micros() / BUCKET.as_micros()) as usize;
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() <= i {
            b.resize(i + 1, Bucket::default());
        }
        match answer {
            Answer::Committed { touched: true } => b[i].touched += 1,
            Answer::Committed { touched: false } => b[i].other += 1,
            Answer::Aborted => b[i].aborted += 1,
            Answer::Unknown => b[i].unknown += 1,
        }
    }

    /// The buckets so far.
    pub fn buckets(&self) -> Vec<Bucket> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Whether a transaction over `partitions` coordinated by `coordinator` involves one of
/// `failed`: its coordinator, or a replica of one of its partitions.
pub fn touches(
    topo: &Topology,
    failed: &[NodeId],
    coordinator: NodeId,
    partitions: &[redt_proto::PartitionId],
) -> bool {
    failed.contains(&coordinator)
        || partitions
            .iter()
            .filter_map(|p| topo.partitions.get(p.0 as usize))
            .any(|p| p.replicas.iter().any(|r| failed.contains(r)))
}

/// The first bucket at or after `from` whose window of `window` buckets holds at least
/// `target` touched commits (`None` if no full window does).
pub fn first_window_reaching(buckets: &[Bucket], from: usize, window: usize, target: f64) -> Option<usize> {
    let window = window.max(1);
    (from..buckets.len().saturating_sub(window - 1))
        .find(|&i| buckets[i..i + window].iter().map(|b| b.touched).sum::<u64>() as f64 >= target)
}

/// One second of the timeline, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct Second {
    /// Seconds since the measured interval started (this row covers [t, t + 1)).
    pub t_s: u64,
    /// Commits of touched transactions.
    pub touched: u64,
    /// Commits of the others.
    pub other: u64,
    /// Aborts.
    pub aborted: u64,
    /// Unknown answers.
    pub unknown: u64,
    /// What happened in this second (`kill dc3-n1`, `heal`), if anything.
    pub event: String,
}

/// What a drill measured.
#[derive(Clone, Debug, Serialize)]
pub struct DrillReport {
    /// The drill.
    pub drill: String,
    /// When the fault started and its heal started, in s since the measured interval started.
    pub fault_at_s: f64,
    /// See `fault_at_s`.
    pub healed_at_s: Option<f64>,
    /// Commits/s of touched transactions before the fault.
    pub touched_per_s_before: f64,
    /// Commits/s of the other transactions before the fault and while it lasted.
    pub other_per_s_before: f64,
    /// See `other_per_s_before`.
    pub other_per_s_during: f64,
    /// The fewest commits of other transactions in one whole second while the fault lasted.
    pub other_min_per_s_during: Option<u64>,
    /// From the heal's start (the restart command, the cut's end) to the end of the first
    /// 100 ms in which touched transactions commit at half their rate before the fault;
    /// `None`: not within the run.
    pub heal_to_half_rate_ms: Option<u64>,
    /// From the fault to no undecided entry older than the fault at any surviving node;
    /// `None`: not within the run.
    pub fault_to_decided_at_survivors_ms: Option<u64>,
    /// From the fault to the same at every node, the failed ones back; `None`: not within
    /// the run.
    pub fault_to_decided_everywhere_ms: Option<u64>,
    /// From the fault to the first status poll in which a surviving node suspects every
    /// failed node (a killed node; every node of a cut DC); `None`: not before the heal.
    /// Polled every 100 ms: an upper bound, to about 100 ms.
    pub fault_to_first_suspected_ms: Option<u64>,
    /// From the fault to the first poll in which every surviving node does; `None`: not
    /// before the heal.
    pub fault_to_suspected_by_all_ms: Option<u64>,
    /// From the heal's start to the first poll in which no node suspects any node; `None`:
    /// not within the run.
    pub heal_to_unsuspected_ms: Option<u64>,
    /// Suspicions the nodes raised from the start of the measured interval to the fault: every
    /// one is false (`None`: a node did not answer).
    pub false_suspicions_before_fault: Option<u64>,
    /// Suspicions the nodes raised from the first poll after the heal in which no node
    /// suspected any node until the cluster settled after the run: every one is false
    /// (`None`: that poll never came, or a node did not answer).
    pub false_suspicions_after_heal: Option<u64>,
    /// After the clients stopped and the cluster settled: lock words held, summed over the
    /// nodes (`None`: a node did not answer).
    pub locks_left: Option<u64>,
    /// … undecided entries (`None`: a node did not answer).
    pub undecided_left: Option<u64>,
    /// How long settling took (until no node had an undecided entry, at most 30 s).
    pub settle_ms: u64,
    /// Recoveries the nodes report (started, committed, aborted) at the end, summed (a
    /// restarted node counts from its restart).
    pub recoveries: [u64; 3],
    /// Per second of the measured interval.
    pub timeline: Vec<Second>,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Every node's status, asked at once.
async fn poll(client: &Arc<Client>, count_locks: bool) -> Vec<(NodeId, Result<NodeStatus, String>)> {
    let all: Vec<NodeId> = client.topology().nodes.iter().map(|n| n.id).collect();
    client.status_of(&all, count_locks).await
}

/// Whether every node of `nodes` answered and holds no undecided entry that started at or
/// before `since_unix_ms`.
fn decided(statuses: &[(NodeId, Result<NodeStatus, String>)], nodes: &[NodeId], since_unix_ms: u64) -> bool {
    nodes.iter().all(|n| {
        statuses.iter().any(|(m, s)| {
            m == n
                && s.as_ref()
                    .is_ok_and(|s| s.oldest_undecided_unix_ms == 0 || s.oldest_undecided_unix_ms > since_unix_ms)
        })
    })
}

/// Suspicions raised by `nodes` so far, summed (`None` unless every one of them answered).
fn suspicions(statuses: &[(NodeId, Result<NodeStatus, String>)], nodes: &[NodeId]) -> Option<u64> {
    nodes
        .iter()
        .map(|n| statuses.iter().find(|(m, _)| m == n).and_then(|(_, s)| s.as_ref().ok()).map(|s| s.suspicions_total))
        .sum()
}

/// How many of `nodes` answered and suspect every node of `failed`.
fn suspecting(statuses: &[(NodeId, Result<NodeStatus, String>)], nodes: &[NodeId], failed: &[NodeId]) -> usize {
    statuses
        .iter()
        .filter(|(n, s)| {
            nodes.contains(n) && s.as_ref().is_ok_and(|s| failed.iter().all(|f| s.suspected_nodes.contains(f)))
        })
        .count()
}

/// Whether every node of `nodes` answered and suspects nobody.
fn unsuspected(statuses: &[(NodeId, Result<NodeStatus, String>)], nodes: &[NodeId]) -> bool {
    nodes.iter().all(|n| statuses.iter().any(|(m, s)| m == n && s.as_ref().is_ok_and(|s| s.suspected_nodes.is_empty())))
}

/// What the drill task saw while the clients ran.
#[derive(Debug, Default)]
pub struct Observed {
    fault_at: Option<Duration>,
    healed_at: Option<Duration>,
    decided_at_survivors: Option<Duration>,
    decided_everywhere: Option<Duration>,
    first_suspected: Option<Duration>,
    suspected_by_all: Option<Duration>,
    /// When no node suspected any node any more, after the heal (since the start).
    unsuspected_at: Option<Duration>,
    /// Suspicions summed over the nodes at the start of the measured interval, just before the
    /// fault, and at `unsuspected_at`.
    suspicions_at_start: Option<u64>,
    suspicions_before_fault: Option<u64>,
    suspicions_unsuspected: Option<u64>,
    events: Vec<(Duration, String)>,
}

/// Runs `drill` against the cluster of `client` (a client with a short call timeout: dead
/// nodes are asked every 100 ms) while the clients run: waits until `at` after `start`,
/// injects, polls every node's status every 100 ms, heals after `heal_after`, and goes on
/// polling until everything in flight at the fault is decided everywhere or `until` after
/// `start` has passed.
pub async fn run(drill: &Drill, client: Arc<Client>, start: Instant, until: Duration) -> Observed {
    let mut o = Observed::default();
    let all: Vec<NodeId> = client.topology().nodes.iter().map(|n| n.id).collect();
    let survivors: Vec<NodeId> = all.iter().copied().filter(|n| !drill.failed.contains(n)).collect();
    // A node status poll every 100 ms measures these to about 100 ms (the poll's own time
    // added). The survivors are asked apart from the failed nodes, whose answers take the
    // watcher's call timeout.
    o.suspicions_at_start = suspicions(&client.status_of(&all, false).await, &all);
    tokio::time::sleep_until((start + drill.at).into()).await;
    o.suspicions_before_fault = suspicions(&client.status_of(&all, false).await, &all);
    let line = (drill.inject)().await;
    // In flight at the fault: started before the fault was complete (a cut is applied link
    // by link, on every node in turn).
    let fault_unix = unix_ms();
    let at = start.elapsed();
    o.fault_at = Some(at);
    o.events.push((at, drill.name.clone()));
    match line {
        Ok(l) => tracing::info!("{l}"),
        Err(e) => {
            o.events.push((at, format!("fault failed: {e}")));
            return o;
        }
    }
    let heal_at = at + drill.heal_after;
    let mut healing: Option<tokio::task::JoinHandle<Result<String, String>>> = None;
    let mut tick = tokio::time::interval(BUCKET);
    while start.elapsed() < until {
        tick.tick().await;
        if o.healed_at.is_none() && start.elapsed() >= heal_at {
            let t = start.elapsed();
            o.healed_at = Some(t);
            o.events.push((t, "heal".into()));
            healing = Some(tokio::spawn((drill.heal)()));
        }
        if let Some(h) = healing.as_mut().filter(|h| h.is_finished()) {
            let r = h.await.map_err(|e| e.to_string()).and_then(|r| r);
            let t = start.elapsed();
            o.events.push((t, r.unwrap_or_else(|e| format!("heal failed: {e}"))));
            healing = None;
        }
        let detecting = o.healed_at.is_none() && o.suspected_by_all.is_none();
        if o.decided_at_survivors.is_none() || detecting {
            let statuses = client.status_of(&survivors, false).await;
            let now = start.elapsed() - at;
            if o.decided_at_survivors.is_none() && decided(&statuses, &survivors, fault_unix) {
                o.decided_at_survivors = Some(now);
            }
            if detecting {
                let n = suspecting(&statuses, &survivors, &drill.failed);
                if n > 0 && o.first_suspected.is_none() {
                    o.first_suspected = Some(now);
                }
                if n == survivors.len() {
                    o.suspected_by_all = Some(now);
                }
            }
        }
        if o.healed_at.is_some() && (o.decided_everywhere.is_none() || o.unsuspected_at.is_none()) {
            let statuses = client.status_of(&all, false).await;
            if o.decided_everywhere.is_none() && decided(&statuses, &all, fault_unix) {
                o.decided_everywhere = Some(start.elapsed() - at);
            }
            if o.unsuspected_at.is_none() && healing.is_none() && unsuspected(&statuses, &all) {
                o.unsuspected_at = Some(start.elapsed());
                o.suspicions_unsuspected = suspicions(&statuses, &all);
            }
        }
        if o.decided_everywhere.is_some() && o.decided_at_survivors.is_some() && o.unsuspected_at.is_some() {
            break;
        }
    }
    if let Some(h) = healing {
        // The run ended while healing: wait for it (a restart must not outlive the bench).
        let r = h.await.map_err(|e| e.to_string()).and_then(|r| r);
        o.events.push((start.elapsed(), r.unwrap_or_else(|e| format!("heal failed: {e}"))));
    }
    o
}

/// What was left once the cluster settled after the run.
struct Settled {
    locks: Option<u64>,
    undecided: Option<u64>,
    settle_ms: u64,
    recoveries: [u64; 3],
    suspicions: Option<u64>,
}

/// After the clients stopped: waits (at most 30 s) until no node holds an undecided entry,
/// owes a catch-up or has a replay backlog (its ring's head short of its tail), then counts lock words and undecided entries left; returns them with the
/// time it waited, the recoveries the nodes counted and their suspicions so far.
async fn settle(client: &Arc<Client>) -> Settled {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let s = poll(client, false).await;
        if s.iter().all(|(_, s)| {
            s.as_ref().is_ok_and(|s| s.undecided_entries == 0 && s.catch_ups_owed == 0 && s.replay_backlog_slots == 0)
        }) {
            break;
        }
        tokio::time::sleep(BUCKET).await;
    }
    let settle_ms = t0.elapsed().as_millis() as u64;
    let last = poll(client, true).await;
    let sum = |f: &dyn Fn(&NodeStatus) -> Option<u64>| -> Option<u64> {
        last.iter().map(|(_, s)| s.as_ref().ok().and_then(f)).sum()
    };
    let locks = sum(&|s| s.locks_held);
    let undecided = sum(&|s| Some(s.undecided_entries));
    let recoveries = [
        sum(&|s| Some(s.recoveries_started)).unwrap_or(0),
        sum(&|s| Some(s.recoveries_committed)).unwrap_or(0),
        sum(&|s| Some(s.recoveries_aborted)).unwrap_or(0),
    ];
    let suspicions = sum(&|s| Some(s.suspicions_total));
    Settled { locks, undecided, settle_ms, recoveries, suspicions }
}

/// The report of a drill: the timeline's figures, what the drill task saw, and what was left
/// once the cluster settled (asked of `client` now).
pub async fn report(
    drill: &Drill,
    o: &Observed,
    timeline: &Timeline,
    duration: Duration,
    client: &Arc<Client>,
) -> DrillReport {
    let settled = settle(client).await;
    let buckets = timeline.buckets();
    let per_s = 1_000 / BUCKET.as_millis() as usize;
    let end = ((duration.as_micros() / BUCKET.as_micros()) as usize).min(buckets.len());
    let fault = o.fault_at.map_or(end, |t| ((t.as_micros() / BUCKET.as_micros()) as usize).min(end));
    let healed = o.healed_at.map(|t| ((t.as_micros() / BUCKET.as_micros()) as usize).min(end));
    let rate = |from: usize, to: usize, f: &dyn Fn(&Bucket) -> u64| -> f64 {
        if to <= from {
            return 0.0;
        }
        buckets[from..to].iter().map(f).sum::<u64>() as f64 / ((to - from) as f64 * BUCKET.as_secs_f64())
    };
    let touched_before = rate(0, fault, &|b| b.touched);
    let fault_end = healed.unwrap_or(end);
    // Whole seconds inside the fault.
    let mut other_min = None;
    let mut i = fault;
    while i + per_s <= fault_end {
        let s: u64 = buckets[i..i + per_s].iter().map(|b| b.other).sum();
        other_min = Some(other_min.map_or(s, |m: u64| m.min(s)));
        i += per_s;
    }
    // The end of the first 100 ms bucket after the heal started whose touched commits reach
    // half the rate before the fault (an upper bound, to 100 ms).
    let heal_to_half_rate_ms = healed.and_then(|h| {
        let target = touched_before / 2.0 * BUCKET.as_secs_f64();
        first_window_reaching(&buckets[..end], h, 1, target).map(|i| ((i + 1 - h) as u64) * BUCKET.as_millis() as u64)
    });
    let mut timeline_rows = Vec::new();
    for (s, chunk) in buckets[..end].chunks(per_s).enumerate() {
        let event = o
            .events
            .iter()
            .filter(|(t, _)| t.as_secs() == s as u64)
            .map(|(_, e)| e.clone())
            .collect::<Vec<_>>()
            .join("; ");
        timeline_rows.push(Second {
            t_s: s as u64,
            touched: chunk.iter().map(|b| b.touched).sum(),
            other: chunk.iter().map(|b| b.other).sum(),
            aborted: chunk.iter().map(|b| b.aborted).sum(),
            unknown: chunk.iter().map(|b| b.unknown).sum(),
            event,
        });
    }
    DrillReport {
        drill: drill.name.clone(),
        fault_at_s: o.fault_at.map_or(0.0, |t| t.as_secs_f64()),
        healed_at_s: o.healed_at.map(|t| t.as_secs_f64()),
        touched_per_s_before: touched_before,
        other_per_s_before: rate(0, fault, &|b| b.other),
        other_per_s_during: rate(fault, fault_end, &|b| b.other),
        other_min_per_s_during: other_min,
        heal_to_half_rate_ms,
        fault_to_decided_at_survivors_ms: o.decided_at_survivors.map(|d| d.as_millis() as u64),
        fault_to_decided_everywhere_ms: o.decided_everywhere.map(|d| d.as_millis() as u64),
        fault_to_first_suspected_ms: o.first_suspected.map(|d| d.as_millis() as u64),
        fault_to_suspected_by_all_ms: o.suspected_by_all.map(|d| d.as_millis() as u64),
        heal_to_unsuspected_ms: o.unsuspected_at.zip(o.healed_at).map(|(u, h)| u.saturating_sub(h).as_millis() as u64),
        false_suspicions_before_fault: o
            .suspicions_before_fault
            .zip(o.suspicions_at_start)
            .map(|(b, s)| b.saturating_sub(s)),
        false_suspicions_after_heal: o
            .suspicions_unsuspected
            .zip(settled.suspicions)
            .map(|(u, end)| end.saturating_sub(u)),
        locks_left: settled.locks,
        undecided_left: settled.undecided,
        settle_ms: settled.settle_ms,
        recoveries: settled.recoveries,
        timeline: timeline_rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touched(n: &[u64]) -> Vec<Bucket> {
        n.iter().map(|&t| Bucket { touched: t, ..Default::default() }).collect()
    }

    #[test]
    fn the_first_window_reaching_a_rate_starts_at_or_after_from() {
        let b = touched(&[5, 5, 0, 0, 1, 2, 3, 0]);
        assert_eq!(first_window_reaching(&b, 2, 2, 3.0), Some(4), "1 + 2 = 3 at buckets 4–5");
        assert_eq!(first_window_reaching(&b, 2, 3, 6.0), Some(4));
        assert_eq!(first_window_reaching(&b, 2, 2, 6.0), None, "no window of 2 after 2 holds 6");
        assert_eq!(first_window_reaching(&b, 0, 2, 10.0), Some(0));
        assert_eq!(first_window_reaching(&b, 7, 2, 0.0), None, "no full window left");
        assert_eq!(first_window_reaching(&[], 0, 10, 0.0), None);
    }

    #[test]
    fn a_transaction_is_touched_through_its_coordinator_or_a_replica() {
        let t = Topology::from_yaml("local-fast.yaml", include_str!("../../configs/local-fast.yaml")).expect("valid");
        let dc3 = t.node_by_name("dc3-n1").expect("dc3-n1").id;
        let dc1 = t.node_by_name("dc1-n1").expect("dc1-n1").id;
        let p = |i| redt_proto::PartitionId(i);
        // p3 lives on dc4, dc1, dc2.
        assert!(!touches(&t, &[dc3], dc1, &[p(3)]));
        assert!(touches(&t, &[dc3], dc3, &[p(3)]), "its coordinator failed");
        assert!(touches(&t, &[dc3], dc1, &[p(3), p(0)]), "p0 has a replica on dc3-n1");
    }

    fn status(node: u16, suspected: &[u16], total: u64) -> (NodeId, Result<NodeStatus, String>) {
        let board = redt_coordinator::StatusBoard::default();
        board.suspects(suspected.iter().map(|&n| NodeId(n)).collect(), vec![], total);
        (NodeId(node), Ok(board.snapshot(NodeId(node), &[], 0, 500, 0, None)))
    }

    #[test]
    fn suspicions_are_counted_per_answering_node() {
        let down = (NodeId(2), Err("unreachable".to_string()));
        let nodes = [NodeId(0), NodeId(1), NodeId(3)];
        let polled = vec![status(0, &[2], 1), status(1, &[2, 3], 4), down.clone(), status(3, &[], 0)];
        assert_eq!(suspicions(&polled, &nodes), Some(5));
        assert_eq!(suspicions(&polled, &[NodeId(0), NodeId(2)]), None, "node 2 did not answer");
        assert_eq!(suspecting(&polled, &nodes, &[NodeId(2)]), 2);
        assert_eq!(suspecting(&polled, &nodes, &[NodeId(2), NodeId(3)]), 1, "a cut DC: every node of it");
        assert_eq!(suspecting(&polled, &[NodeId(2)], &[NodeId(2)]), 0, "an error suspects nothing");
        assert!(!unsuspected(&polled, &nodes));
        assert!(unsuspected(&[status(0, &[], 3), status(1, &[], 0)], &[NodeId(0), NodeId(1)]));
        assert!(!unsuspected(&[status(0, &[], 3), down], &[NodeId(0), NodeId(2)]), "every node must answer");
    }

    #[test]
    fn the_timeline_counts_answers_in_their_bucket() {
        let tl = Timeline::default();
        tl.count(Duration::from_millis(50), Answer::Committed { touched: true });
        tl.count(Duration::from_millis(250), Answer::Committed { touched: false });
        tl.count(Duration::from_millis(250), Answer::Aborted);
        tl.count(Duration::from_millis(299), Answer::Unknown);
        let b = tl.buckets();
        assert_eq!(b.len(), 3);
        assert_eq!(b[0], Bucket { touched: 1, ..Default::default() });
        assert_eq!(b[1], Bucket::default());
        assert_eq!(b[2], Bucket { touched: 0, other: 1, aborted: 1, unknown: 1 });
    }
}
