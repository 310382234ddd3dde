//! A node's failure detection: one [`Detector`] over every other node of the cluster, the
//! nodes of its own DC and those of the other DCs alike, fed by what the node's QUIC
//! transport hears from each of them.
//!
//! - **Configuration** ([`DetectorTimeouts`], `redt_protocol::detector_timeouts`): per pair of DCs,
//!   the detector's interval and timeout.
//! - **View** ([`SuspectView`], `redt_protocol::suspect_view`, pure): the nodes and DCs this node
//!   suspects, with the changes each detector action makes to them.
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
use redt_membership::{Action, Detector};
use redt_proto::{DcId, NodeId};
pub use redt_protocol::detector_timeouts::{link_between, DetectorTimeouts, IN_DC_RTT};
pub use redt_protocol::suspect_view::{Change, SuspectView};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    let topology = &node.placement();
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
    let topology = &node.placement();
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
