//! A node's failure detection: one [`Detector`] over every other node of the cluster, the
//! nodes of its own DC and those of the other DCs alike, fed by what the node's QUIC
//! transport hears from each of them.
//!
//! - **Configuration** ([`DetectorTimeouts`]): per pair of DCs, the detector's defaults for the
//!   link between them ([`DetectorConfig::for_link`]), or the topology file's
//!   `timeouts.detector` where it sets `interval` or `timeout`. Two nodes of one DC use
//!   [`IN_DC_RTT`] (the topology describes no link inside a DC).
//! - **View** ([`SuspectView`], pure): the nodes this node suspects, the DCs it suspects
//!   (every node of the DC suspected, never its own DC), and the suspicions raised so far,
//!   with the changes each detector action makes to them.
//! - **Driver** (`spawn`, a thin async task on the node's runtime): wakes at the detector's
//!   `poll_timeout`, passes it what the transport heard from and sent to each peer since the
//!   last tick, ticks it, sends the heartbeats it asks for, logs every change of the view
//!   (`warn` for a suspicion, `info` when the node or DC is alive again) and publishes the
//!   view on the node's [`StatusBoard`] (`redt status`).
//!
//! # What counts as hearing from a peer
//!
//! Anything: every request or response frame the transport reads from the peer, and every
//! heartbeat datagram it sends, stamps the peer's link (`Transport::heard_at`). A heartbeat
//! is one QUIC datagram on a connection already open with the peer, sent only when nothing
//! else was sent to the peer for an interval (`Detector::handle_sent`): a link that carries
//! transactions carries no heartbeats, an idle one carries one datagram per interval each
//! way, and the driver wakes once per interval whatever the traffic. Datagrams are not
//! retransmitted, so a lost heartbeat is simply lost; the timeout is ten intervals, so a
//! suspicion needs about ten losses in a row. Heartbeats take the newest connection with
//! the peer, so a restarted node is heard, and hears its peers, on the connection its new
//! process opened.
//!
//! # A busy machine is not a dead peer
//!
//! A driver that wakes a quarter of a peer's timeout or more after its deadline was starved
//! of CPU: what the peers sent meanwhile may still wait unread in this process. It tells the
//! detector how late it woke ([`Detector::handle_stall`]), which then suspects nobody before
//! one more interval has passed, so a stall of this process is not taken for the silence of
//! every peer. Shorter lags (a busy runtime's ordinary timer lag) change nothing, so they
//! never delay the detection of a real failure.

use crate::error::{Error, Result};
use crate::node::{sleep_until_opt, Node};
use crate::status::StatusBoard;
use redt_proto::{DcId, DetectorTimeoutsConfig, NodeId, Topology};
use redt_replication::{Action, Detector, DetectorConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Round-trip time assumed between two nodes of one DC (1 ms; the topology describes no link
/// inside a DC). Any value under 40 ms gives the detector's floor: a heartbeat every 20 ms and
/// a 200 ms timeout.
pub const IN_DC_RTT: Duration = Duration::from_millis(1);

// ---- configuration ------------------------------------------------------------------------

/// The link heartbeats between a node of DC `a` and a node of DC `b` cross, as
/// `(rtt, jitter)`: the larger RTT and jitter of the two directions (so both ends derive the
/// same configuration, and one end's interval is what the other end's timeout waits for); for
/// `a == b`, [`IN_DC_RTT`] and no jitter. A DC outside the topology counts as the same DC.
pub fn link_between(topology: &Topology, a: DcId, b: DcId) -> (Duration, Duration) {
    let one_way = |from: DcId, to: DcId| topology.links.get(from.0 as usize).and_then(|l| l.get(to.0 as usize));
    match (a == b, one_way(a, b), one_way(b, a)) {
        (false, Some(ab), Some(ba)) => (ab.rtt.max(ba.rtt), ab.jitter.max(ba.jitter)),
        _ => (IN_DC_RTT, Duration::ZERO),
    }
}

/// The failure detector's configuration for every pair of DCs of a topology (RTT-scaled
/// defaults, or the topology file's `timeouts.detector`). Symmetric; the diagonal serves the
/// nodes of one DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetectorTimeouts {
    /// `[a][b]`: a node of DC `a` watching a node of DC `b`.
    by_dc: Vec<Vec<DetectorConfig>>,
}

impl DetectorTimeouts {
    /// The defaults of `topology`: [`DetectorConfig::for_link`] of [`link_between`] for every
    /// pair of DCs. At 40 ms RTT and no jitter, and inside a DC: a heartbeat every 20 ms, a
    /// 200 ms timeout.
    pub fn defaults(topology: &Topology) -> DetectorTimeouts {
        Self::with(topology, &DetectorTimeoutsConfig::default())
    }

    /// `set` (the topology file's `timeouts.detector`) over [`DetectorTimeouts::defaults`]: a
    /// set `interval` replaces every pair's, and the timeout it implies is
    /// `10 · interval + 4 · jitter` of the pair's link (the default rule); a set `timeout`
    /// replaces every pair's.
    ///
    /// # Errors
    /// [`Error::BadTimeouts`] when a pair's timeout would not be longer than its interval,
    /// naming the key the file set (`timeouts.detector.interval` when both are set) with both
    /// values and, for a default, the link it belongs to.
    pub fn resolve(topology: &Topology, set: &DetectorTimeoutsConfig) -> Result<DetectorTimeouts> {
        let t = Self::with(topology, set);
        for (a, row) in t.by_dc.iter().enumerate() {
            for (b, c) in row.iter().enumerate() {
                if c.timeout > c.interval {
                    continue;
                }
                let fmt = |d: Duration| humantime::format_duration(d).to_string();
                let dc = |i: usize| topology.dcs.get(i).map_or_else(|| format!("DC {i}"), |d| d.name.clone());
                let link = if a == b { format!("inside {}", dc(a)) } else { format!("{} ↔ {}", dc(a), dc(b)) };
                let problem = match set.interval {
                    Some(_) => {
                        format!("{} must be below timeouts.detector.timeout ({})", fmt(c.interval), fmt(c.timeout))
                    }
                    None => format!(
                        "{} must be above timeouts.detector.interval ({}, the default for the link {link})",
                        fmt(c.timeout),
                        fmt(c.interval)
                    ),
                };
                let key =
                    if set.interval.is_some() { "timeouts.detector.interval" } else { "timeouts.detector.timeout" };
                return Err(Error::BadTimeouts { key: key.into(), problem });
            }
        }
        Ok(t)
    }

    fn with(topology: &Topology, set: &DetectorTimeoutsConfig) -> DetectorTimeouts {
        let dcs = topology.dcs.len();
        let by_dc = (0..dcs)
            .map(|a| {
                (0..dcs)
                    .map(|b| {
                        let (rtt, jitter) = link_between(topology, DcId(a as u16), DcId(b as u16));
                        let mut c = match set.interval {
                            Some(interval) => DetectorConfig::for_interval(interval, jitter),
                            None => DetectorConfig::for_link(rtt, jitter),
                        };
                        if let Some(timeout) = set.timeout {
                            c.timeout = timeout;
                        }
                        c
                    })
                    .collect()
            })
            .collect();
        DetectorTimeouts { by_dc }
    }

    /// The configuration a node of DC `a` uses for a peer in DC `b` (the same as `b` uses for
    /// `a`); `None` for a DC outside the topology.
    pub fn between(&self, a: DcId, b: DcId) -> Option<DetectorConfig> {
        self.by_dc.get(a.0 as usize).and_then(|row| row.get(b.0 as usize)).copied()
    }

    /// One line for operators: the interval and timeout inside a DC and between DCs (their
    /// range when the links differ), e.g. `inside a DC 20ms / 200ms; between DCs 20ms / 200ms`.
    pub fn summary(&self) -> String {
        let fmt = |c: &DetectorConfig| {
            format!("{} / {}", humantime::format_duration(c.interval), humantime::format_duration(c.timeout))
        };
        let inside: BTreeSet<(Duration, Duration)> =
            self.by_dc.iter().enumerate().filter_map(|(a, r)| r.get(a)).map(|c| (c.interval, c.timeout)).collect();
        let between: BTreeSet<(Duration, Duration)> = self
            .by_dc
            .iter()
            .enumerate()
            .flat_map(|(a, r)| r.iter().enumerate().filter(move |(b, _)| *b != a).map(|(_, c)| (c.interval, c.timeout)))
            .collect();
        let range = |s: &BTreeSet<(Duration, Duration)>| {
            let c = |(interval, timeout): (Duration, Duration)| DetectorConfig { interval, timeout };
            match (s.first(), s.last()) {
                (Some(&lo), Some(&hi)) if lo == hi => fmt(&c(lo)),
                (Some(&lo), Some(&hi)) => format!("{} to {}", fmt(&c(lo)), fmt(&c(hi))),
                _ => "-".to_string(),
            }
        };
        format!("inside a DC {}; between DCs {}", range(&inside), range(&between))
    }
}

// ---- the view -----------------------------------------------------------------------------

/// A change of what a node believes of the others, in the order it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The node is now suspected.
    NodeSuspected(NodeId),
    /// The node, suspected for `suspected_for_us` µs, is alive again.
    NodeAlive {
        /// The node.
        node: NodeId,
        /// How long it was suspected, µs.
        suspected_for_us: u64,
    },
    /// Every node of the DC is now suspected.
    DcSuspected(DcId),
    /// A node of the DC, suspected for `suspected_for_us` µs, is alive again.
    DcAlive {
        /// The DC.
        dc: DcId,
        /// How long it was suspected, µs.
        suspected_for_us: u64,
    },
}

/// What one node believes of the others, from its detector's actions: the nodes it
/// suspects, the DCs it suspects (every node of the DC suspected; never its own DC, which it
/// is alive in) and the suspicions of a node it raised so far. Pure: times are passed in (µs).
#[derive(Clone, Debug)]
pub struct SuspectView {
    my_dc: DcId,
    /// DC of each node, by node id.
    dc_of: Vec<DcId>,
    /// Nodes of each DC, by DC id.
    nodes_of: Vec<Vec<NodeId>>,
    /// Suspected nodes, with when they became suspected (µs).
    nodes: BTreeMap<NodeId, u64>,
    /// Suspected DCs, with when they became suspected (µs).
    dcs: BTreeMap<DcId, u64>,
    suspicions_total: u64,
}

impl SuspectView {
    /// The view of node `me` of `topology`, suspecting nobody.
    pub fn new(topology: &Topology, me: NodeId) -> SuspectView {
        let dc_of: Vec<DcId> = topology.nodes.iter().map(|n| n.dc).collect();
        SuspectView {
            my_dc: dc_of.get(me.0 as usize).copied().unwrap_or(DcId(u16::MAX)),
            dc_of,
            nodes_of: topology.dcs.iter().map(|d| d.nodes.clone()).collect(),
            nodes: BTreeMap::new(),
            dcs: BTreeMap::new(),
            suspicions_total: 0,
        }
    }

    /// The detector suspects `node` at `now_us`: returns the changes (the node, then its DC
    /// if every node of it is now suspected). A node already suspected, or outside the
    /// topology, changes nothing.
    pub fn handle_suspect(&mut self, node: NodeId, now_us: u64) -> Vec<Change> {
        let Some(&dc) = self.dc_of.get(node.0 as usize) else { return vec![] };
        if self.nodes.contains_key(&node) {
            return vec![];
        }
        self.nodes.insert(node, now_us);
        self.suspicions_total += 1;
        let mut changes = vec![Change::NodeSuspected(node)];
        let all = self.nodes_of.get(dc.0 as usize).is_some_and(|n| n.iter().all(|n| self.nodes.contains_key(n)));
        if dc != self.my_dc && all && !self.dcs.contains_key(&dc) {
            self.dcs.insert(dc, now_us);
            changes.push(Change::DcSuspected(dc));
        }
        changes
    }

    /// The detector sees `node` alive again at `now_us`: returns the changes (its DC first,
    /// if it was suspected, then the node). A node not suspected changes nothing.
    pub fn handle_alive(&mut self, node: NodeId, now_us: u64) -> Vec<Change> {
        let Some(since) = self.nodes.remove(&node) else { return vec![] };
        let mut changes = vec![];
        if let Some(dc_since) = self.dc_of.get(node.0 as usize).and_then(|dc| self.dcs.remove(dc).map(|s| (*dc, s))) {
            changes.push(Change::DcAlive { dc: dc_since.0, suspected_for_us: now_us.saturating_sub(dc_since.1) });
        }
        changes.push(Change::NodeAlive { node, suspected_for_us: now_us.saturating_sub(since) });
        changes
    }

    /// The suspected nodes, ascending.
    pub fn suspected_nodes(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// The suspected DCs, ascending.
    pub fn suspected_dcs(&self) -> Vec<DcId> {
        self.dcs.keys().copied().collect()
    }

    /// Suspicions of a node raised so far (each time a node went from alive to suspected).
    pub fn suspicions_total(&self) -> u64 {
        self.suspicions_total
    }
}

// ---- the driver ---------------------------------------------------------------------------

/// The driver's clock: µs since the Unix epoch when the driver started, advanced by the
/// monotonic clock since. Monotonic within a process and, unless the wall clock steps back,
/// increasing across restarts.
#[derive(Clone, Copy, Debug)]
struct Clock {
    origin: Instant,
    origin_us: u64,
}

impl Clock {
    fn start() -> Clock {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Clock { origin: Instant::now(), origin_us: u64::try_from(unix.as_micros()).unwrap_or(0) }
    }

    fn us_at(&self, t: Instant) -> u64 {
        let since = u64::try_from(t.saturating_duration_since(self.origin).as_micros()).unwrap_or(u64::MAX);
        self.origin_us.saturating_add(since)
    }

    /// The instant of `us` on this clock (a day from now if that is further or unrepresentable).
    fn instant_at(&self, us: u64) -> Instant {
        let far = Instant::now() + Duration::from_secs(86_400);
        self.origin.checked_add(Duration::from_micros(us.saturating_sub(self.origin_us))).map_or(far, |t| t.min(far))
    }
}

/// Starts `node`'s failure detector on the current Tokio runtime, watching every other node
/// of its topology with `timeouts`. It holds the node weakly and stops once
/// [`Node::shutdown`] is called (at its next tick, within one heartbeat interval) or the node
/// is dropped. A topology with no other node starts nothing.
///
/// # Errors
/// [`Error::Io`] when called outside a Tokio runtime.
pub(crate) fn spawn(node: &Arc<Node>, timeouts: &DetectorTimeouts) -> Result<()> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::Io(std::io::Error::other("a node's failure detector needs a Tokio runtime")))?;
    let topology = &node.topology();
    let Some(my_dc) = topology.nodes.get(node.id.0 as usize).map(|n| n.dc) else { return Ok(()) };
    let clock = Clock::start();
    let now_us = clock.us_at(Instant::now());
    let mut detector = Detector::new();
    for peer in topology.nodes.iter().filter(|n| n.id != node.id) {
        if let Some(config) = timeouts.between(my_dc, peer.dc) {
            detector.add_peer(peer.id, config, now_us);
        }
    }
    if detector.poll_timeout().is_none() {
        return Ok(());
    }
    let view = SuspectView::new(topology, node.id);
    runtime.spawn(run(Arc::downgrade(node), detector, view, clock));
    Ok(())
}

/// The driver loop (module docs): at each tick, reads what the transport heard from and sent
/// to every peer, then ticks the detector and carries out its actions; sleeps until the
/// detector's next deadline.
async fn run(node: Weak<Node>, mut detector: Detector<NodeId>, mut view: SuspectView, clock: Clock) {
    let peers: Vec<NodeId> = detector.peers().collect();
    // The stamps already passed to the detector, by peer.
    let mut heard: BTreeMap<NodeId, Instant> = BTreeMap::new();
    let mut due: Option<Instant> = None;
    loop {
        let Some(n) = node.upgrade().filter(|n| !n.is_closed()) else { return };
        let now = Instant::now();
        let now_us = clock.us_at(now);
        if let Some(late) = due.map(|d| now.saturating_duration_since(d)).filter(|l| !l.is_zero()) {
            if late >= Duration::from_millis(20) {
                tracing::debug!(node = %n.name(), late_ms = late.as_millis() as u64, "failure detector woke late");
            }
            detector.handle_stall(now_us, u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
        }
        let transport = n.transport();
        for &peer in &peers {
            if let Some(at) = transport.heard_at(peer).filter(|at| heard.get(&peer) != Some(at)) {
                heard.insert(peer, at);
                detector.handle_heartbeat(peer, None, clock.us_at(at));
            }
            if let Some(at) = transport.sent_at(peer) {
                detector.handle_sent(peer, clock.us_at(at));
            }
        }
        detector.handle_tick(now_us);
        while let Some(action) = detector.poll_action() {
            match action {
                Action::Heartbeat { to, .. } => transport.send_heartbeat(to),
                Action::Suspect(peer) => {
                    let silent_us = detector.last_heard_us(peer).map_or(0, |t| now_us.saturating_sub(t));
                    let changes = view.handle_suspect(peer, now_us);
                    report(&n, &detector, &changes, silent_us);
                    publish(&n.board, &view);
                }
                Action::Alive(peer) => {
                    let changes = view.handle_alive(peer, now_us);
                    report(&n, &detector, &changes, 0);
                    publish(&n.board, &view);
                }
            }
        }
        drop(n);
        due = detector.poll_timeout().map(|us| clock.instant_at(us));
        sleep_until_opt(due.map(tokio::time::Instant::from_std)).await;
    }
}

/// Publishes `view` on the node's status board.
fn publish(board: &StatusBoard, view: &SuspectView) {
    board.suspects(view.suspected_nodes(), view.suspected_dcs(), view.suspicions_total());
}

/// Logs `changes`: a suspicion at `warn` (a node with how long it was silent, `silent_us`),
/// alive again at `info`.
fn report(node: &Node, detector: &Detector<NodeId>, changes: &[Change], silent_us: u64) {
    let topology = &node.topology();
    let node_name = |n: NodeId| topology.nodes.get(n.0 as usize).map_or_else(|| n.to_string(), |x| x.name.clone());
    let dc_name = |d: DcId| topology.dcs.get(d.0 as usize).map_or_else(|| d.to_string(), |x| x.name.clone());
    let me = node_name(node.id);
    for c in changes {
        match *c {
            Change::NodeSuspected(peer) => {
                let timeout_ms = detector.config(peer).map_or(0, |c| c.timeout.as_millis());
                tracing::warn!(
                    node = %me,
                    "node {} suspected: no heartbeat for {} ms (timeout {timeout_ms} ms)",
                    node_name(peer),
                    silent_us / 1_000
                );
            }
            Change::DcSuspected(dc) => {
                tracing::warn!(node = %me, "DC {} suspected: every node of it is suspected", dc_name(dc));
            }
            Change::NodeAlive { node: peer, suspected_for_us } => tracing::info!(
                node = %me,
                "node {} alive again after {} ms suspected",
                node_name(peer),
                suspected_for_us / 1_000
            ),
            Change::DcAlive { dc, suspected_for_us } => tracing::info!(
                node = %me,
                "DC {} alive again after {} ms suspected",
                dc_name(dc),
                suspected_for_us / 1_000
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(yaml: &str) -> Topology {
        Topology::from_yaml("test.yaml", yaml).expect("a valid topology")
    }

    fn default_yaml() -> Topology {
        topology(include_str!("../../configs/default.yaml"))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// configs/world-5dc.yaml: links of different RTTs, so every pair gets its own defaults.
    fn world() -> Topology {
        topology(include_str!("../../configs/world-5dc.yaml"))
    }

    #[test]
    fn defaults_follow_each_link_and_the_in_dc_floor() {
        let t = default_yaml();
        let d = DetectorTimeouts::defaults(&t);
        let c = |a, b| d.between(DcId(a), DcId(b)).expect("a DC of the topology");
        // 40 ms RTT, no jitter: the detector's floor interval and 10 intervals.
        assert_eq!(c(0, 1), DetectorConfig { interval: ms(20), timeout: ms(200) });
        assert_eq!(c(0, 0), DetectorConfig { interval: ms(20), timeout: ms(200) }, "inside a DC");
        assert_eq!(d.between(DcId(0), DcId(9)), None);
        assert_eq!(d.summary(), "inside a DC 20ms / 200ms; between DCs 20ms / 200ms");
        // Far links scale; both ends of a link derive the same configuration.
        let w = world();
        let d = DetectorTimeouts::defaults(&w);
        for a in 0..w.dcs.len() as u16 {
            for b in 0..w.dcs.len() as u16 {
                let (rtt, jitter) = link_between(&w, DcId(a), DcId(b));
                assert_eq!(d.between(DcId(a), DcId(b)), Some(DetectorConfig::for_link(rtt, jitter)));
                assert_eq!(d.between(DcId(a), DcId(b)), d.between(DcId(b), DcId(a)), "symmetric");
            }
        }
        let far = (0..w.dcs.len() as u16).flat_map(|a| (0..w.dcs.len() as u16).map(move |b| (a, b)));
        let longest = far.filter_map(|(a, b)| d.between(DcId(a), DcId(b))).map(|c| c.interval).max();
        assert!(longest > Some(ms(20)), "world-5dc has links over 40 ms: {longest:?}");
    }

    #[test]
    fn a_link_uses_the_worse_direction() {
        let mut t = default_yaml();
        t.links[0][1].rtt = ms(100);
        t.links[1][0].jitter = ms(5);
        assert_eq!(link_between(&t, DcId(0), DcId(1)), (ms(100), ms(5)));
        assert_eq!(link_between(&t, DcId(1), DcId(0)), (ms(100), ms(5)));
        assert_eq!(link_between(&t, DcId(2), DcId(2)), (IN_DC_RTT, Duration::ZERO));
        assert_eq!(link_between(&t, DcId(0), DcId(40)), (IN_DC_RTT, Duration::ZERO), "unknown DC: no panic");
    }

    #[test]
    fn the_file_replaces_interval_and_timeout_for_every_pair() {
        let mut t = default_yaml();
        t.links[0][1].jitter = ms(10);
        t.links[1][0].jitter = ms(10);
        let set = |interval: Option<u64>, timeout: Option<u64>| DetectorTimeoutsConfig {
            interval: interval.map(ms),
            timeout: timeout.map(ms),
        };
        // An interval alone: the default rule's timeout from it (10 intervals + 4 jitters).
        let d = DetectorTimeouts::resolve(&t, &set(Some(50), None)).unwrap();
        assert_eq!(d.between(DcId(0), DcId(1)), Some(DetectorConfig { interval: ms(50), timeout: ms(540) }));
        assert_eq!(d.between(DcId(2), DcId(3)), Some(DetectorConfig { interval: ms(50), timeout: ms(500) }));
        assert_eq!(d.between(DcId(3), DcId(3)), Some(DetectorConfig { interval: ms(50), timeout: ms(500) }));
        // A timeout alone keeps each link's interval.
        let d = DetectorTimeouts::resolve(&t, &set(None, Some(900))).unwrap();
        assert_eq!(d.between(DcId(0), DcId(1)), Some(DetectorConfig { interval: ms(20), timeout: ms(900) }));
        // Both.
        let d = DetectorTimeouts::resolve(&t, &set(Some(30), Some(300))).unwrap();
        assert_eq!(d.between(DcId(1), DcId(0)), Some(DetectorConfig { interval: ms(30), timeout: ms(300) }));
        // A large interval effectively turns heartbeats off.
        let d = DetectorTimeouts::resolve(&t, &set(Some(3_600_000), None)).unwrap();
        assert_eq!(d.between(DcId(0), DcId(0)).map(|c| c.timeout), Some(ms(36_000_000)));
        // Setting the values the defaults have changes nothing.
        assert_eq!(
            DetectorTimeouts::resolve(&default_yaml(), &set(Some(20), Some(200))).unwrap(),
            DetectorTimeouts::defaults(&default_yaml())
        );
    }

    #[test]
    fn a_timeout_not_above_the_interval_is_refused_naming_the_key() {
        let t = world();
        let err = |interval: Option<u64>, timeout: Option<u64>| {
            let set = DetectorTimeoutsConfig { interval: interval.map(ms), timeout: timeout.map(ms) };
            match DetectorTimeouts::resolve(&t, &set) {
                Err(Error::BadTimeouts { key, problem }) => (key, problem),
                other => panic!("expected BadTimeouts, got {other:?}"),
            }
        };
        let (key, problem) = err(Some(100), Some(100));
        assert_eq!(key, "timeouts.detector.interval");
        assert!(problem.contains("100ms must be below timeouts.detector.timeout (100ms)"), "{problem}");
        // A timeout under a far link's default interval names that link.
        let (key, problem) = err(None, Some(60));
        assert_eq!(key, "timeouts.detector.timeout");
        assert!(problem.contains("60ms must be above timeouts.detector.interval ("), "{problem}");
        assert!(problem.contains("the default for the link"), "{problem}");
        assert!(DetectorTimeouts::resolve(&t, &DetectorTimeoutsConfig { interval: None, timeout: Some(ms(60_000)) })
            .is_ok());
    }

    /// default.yaml: dc1 = {0, 1}, dc2 = {2, 3}, …; the view of node 0.
    #[test]
    fn a_dc_is_suspected_when_every_node_of_it_is() {
        let t = default_yaml();
        let mut v = SuspectView::new(&t, NodeId(0));
        assert_eq!(v.handle_suspect(NodeId(2), 100), vec![Change::NodeSuspected(NodeId(2))]);
        assert_eq!(v.suspected_dcs(), vec![], "one node of two");
        assert_eq!(
            v.handle_suspect(NodeId(3), 150),
            vec![Change::NodeSuspected(NodeId(3)), Change::DcSuspected(DcId(1))]
        );
        assert_eq!(v.suspected_nodes(), vec![NodeId(2), NodeId(3)]);
        assert_eq!(v.suspected_dcs(), vec![DcId(1)]);
        assert_eq!(v.handle_suspect(NodeId(3), 160), vec![], "already suspected");
        assert_eq!(v.suspicions_total(), 2);
        // One node back: the DC is alive again, then the node.
        assert_eq!(
            v.handle_alive(NodeId(2), 400),
            vec![
                Change::DcAlive { dc: DcId(1), suspected_for_us: 250 },
                Change::NodeAlive { node: NodeId(2), suspected_for_us: 300 }
            ]
        );
        assert_eq!(v.suspected_dcs(), vec![]);
        assert_eq!(v.handle_alive(NodeId(2), 500), vec![], "not suspected");
        // Suspected again: counted again, and the DC with it.
        assert_eq!(
            v.handle_suspect(NodeId(2), 600),
            vec![Change::NodeSuspected(NodeId(2)), Change::DcSuspected(DcId(1))]
        );
        assert_eq!(v.suspicions_total(), 3);
    }

    #[test]
    fn the_own_dc_is_never_suspected_and_unknown_nodes_change_nothing() {
        let t = default_yaml();
        let mut v = SuspectView::new(&t, NodeId(0));
        assert_eq!(v.handle_suspect(NodeId(1), 10), vec![Change::NodeSuspected(NodeId(1))]);
        assert_eq!(v.suspected_dcs(), vec![], "node 0 is alive in dc1");
        assert_eq!(v.handle_suspect(NodeId(999), 10), vec![]);
        assert_eq!(v.handle_alive(NodeId(999), 10), vec![]);
        assert_eq!(v.suspicions_total(), 1);
        // A DC of one node (local-fast) is suspected with it; a clock going back never panics.
        let lf = topology(include_str!("../../configs/local-fast.yaml"));
        let mut v = SuspectView::new(&lf, NodeId(0));
        assert_eq!(
            v.handle_suspect(NodeId(2), 50),
            vec![Change::NodeSuspected(NodeId(2)), Change::DcSuspected(DcId(2))]
        );
        assert_eq!(
            v.handle_alive(NodeId(2), 10),
            vec![
                Change::DcAlive { dc: DcId(2), suspected_for_us: 0 },
                Change::NodeAlive { node: NodeId(2), suspected_for_us: 0 }
            ]
        );
    }

    #[test]
    fn the_driver_clock_is_monotonic_and_maps_back_to_instants() {
        let c = Clock::start();
        let a = c.us_at(Instant::now());
        let b = c.us_at(Instant::now());
        assert!(b >= a);
        assert!(a >= c.origin_us);
        let t = c.instant_at(a + 5_000);
        assert_eq!(c.us_at(t), a + 5_000);
        // Far or unrepresentable times clamp to a day ahead instead of overflowing.
        assert!(c.instant_at(u64::MAX) <= Instant::now() + Duration::from_secs(86_401));
        assert_eq!(c.us_at(c.origin), c.origin_us);
        if let Some(before) = c.origin.checked_sub(Duration::from_secs(1)) {
            assert_eq!(c.us_at(before), c.origin_us, "an instant before the start saturates");
        }
    }
}
