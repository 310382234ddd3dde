//! A heartbeat failure detector as a sans-IO state machine: peers are DCs (heartbeats over
//! QUIC between DCs) or nodes of one DC (heartbeats inside the DC); the same code serves both.
//!
//! # Use
//!
//! The driver owns the clock and the wire. It calls [`Detector::handle_heartbeat`] for each
//! heartbeat (or any other message) that arrives, [`Detector::handle_sent`] for each message
//! other than a heartbeat it sends (a link busy with other traffic needs no heartbeats),
//! [`Detector::handle_stall`] when it woke late, and [`Detector::handle_tick`] when
//! [`Detector::poll_timeout`] is due (or more often), then drains [`Detector::poll_action`]:
//! [`Action::Heartbeat`] asks it to send one heartbeat carrying `sent_at_us`,
//! [`Action::Suspect`] and [`Action::Alive`] report a change of a peer's [`Liveness`].
//! Heartbeats leave on a grid of the interval (multiples of it on the driver's clock), so the
//! heartbeats of a node to all its peers, and of the nodes of one host, leave together. Times are microseconds on the driver's monotonic clock
//! (`now_us`); `sent_at_us` is on the sender's clock and is only compared with earlier
//! heartbeats of the same sender. A suspicion is local: the Raft leader's majority side
//! confirms a DC's death before membership removes it (docs/design.md, "Failover").
//!
//! # Rule and defaults
//!
//! Each side sends a heartbeat every `interval`; a peer is suspected when nothing fresh has
//! arrived from it for `timeout`. [`DetectorConfig::for_link`] derives both from the link's
//! round-trip time and jitter:
//!
//! - `interval = clamp(rtt / 2, 20 ms, 500 ms)`: two heartbeats per round trip, at least every
//!   half second, at most 50 per second per peer (about 1.2 kB/s with QUIC framing, negligible
//!   next to the transaction traffic).
//! - `timeout = 10 · interval + 4 · jitter`.
//!
//! Why a fixed timeout and not a phi-accrual estimate: with independent losses the gap after
//! `m` consecutive lost heartbeats is `(m + 1) · interval` plus a jitter difference of at most
//! `2 · jitter`, so it reaches the timeout only after `m ≥ 9 + 2 · jitter / interval` losses
//! (10 at the paper's link, and 11 for half of the cases): the false-suspicion rate per
//! heartbeat is about `loss^11` there, a number that can be stated up front and checked; phi-accrual adapts to the observed arrival distribution, which a lossy link
//! turns into a mixture that its normal model fits badly, and its threshold has no such
//! closed form. A burst of loss longer than the timeout (a real partition) is suspected, as it
//! should be.
//!
//! At the paper's 40 ms RTT with 10 ms jitter: `interval = 20 ms`, `timeout = 240 ms`; the
//! peer is suspected at most `timeout + rtt/2 + jitter` = 270 ms after it stops (plus the
//! driver's tick lag), well inside the 1 s target, which leaves room for the leader's
//! confirmation round trip and the Raft commit of the new epoch. Inside a DC (RTT well under
//! 1 ms) the 20 ms floor applies: a node is suspected after 200 ms plus four jitters.
//! `cargo run --release -p redt-membership --example detector_fp` measures the
//! false-suspicion rate and the detection times (figures in membership/README.md).
//!
//! # Stale heartbeats
//!
//! A heartbeat whose `sent_at_us` is not after the newest one accepted from the same peer is
//! a duplicate or was overtaken; it proves nothing new and is ignored ([`Heard::Stale`]). While
//! a peer is suspected every heartbeat is accepted, so a peer that restarted with a new clock
//! origin is suspected once (for at most `timeout`) and then seen alive again.

use redt_proto::LinkConditions;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::error::{Error, Result};

/// Timing of the heartbeats exchanged with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectorConfig {
    /// Time between two heartbeats sent to the peer.
    pub interval: Duration,
    /// Silence after which the peer is suspected; longer than `interval`.
    pub timeout: Duration,
}

impl DetectorConfig {
    /// Shortest default interval (20 ms): the floor for links with an RTT under 40 ms,
    /// including the links between nodes of one DC.
    pub const MIN_INTERVAL: Duration = Duration::from_millis(20);
    /// Longest default interval (500 ms), reached at 1 s RTT.
    pub const MAX_INTERVAL: Duration = Duration::from_millis(500);
    /// Intervals of silence (before the jitter margin) after which the default timeout fires.
    pub const MISSED_INTERVALS: u32 = 10;
    /// Multiple of the link's jitter added to the default timeout: an arrival gap can exceed
    /// the send gap by twice the jitter; the margin doubles that.
    pub const JITTER_MARGIN: u32 = 4;

    /// Builds a configuration with an explicit interval and timeout.
    ///
    /// # Errors
    ///
    /// [`Error::DetectorConfig`] if `interval` is zero or `timeout` is not longer than
    /// `interval` (one late heartbeat would then be a suspicion).
    pub fn new(interval: Duration, timeout: Duration) -> Result<Self> {
        if interval.is_zero() {
            return Err(Error::DetectorConfig("the heartbeat interval is zero"));
        }
        if timeout <= interval {
            return Err(Error::DetectorConfig("the timeout is not longer than the heartbeat interval"));
        }
        Ok(DetectorConfig { interval, timeout })
    }

    /// Returns the default configuration for a link with round-trip time `rtt` and one-way
    /// jitter `jitter` (uniform in `±jitter`, as in [`LinkConditions`]):
    /// `interval = clamp(rtt / 2, 20 ms, 500 ms)`, `timeout = 10 · interval + 4 · jitter`
    /// (module docs give the reasoning). 40 ms RTT and 10 ms jitter give 20 ms and 240 ms.
    pub fn for_link(rtt: Duration, jitter: Duration) -> Self {
        Self::for_interval((rtt / 2).clamp(Self::MIN_INTERVAL, Self::MAX_INTERVAL), jitter)
    }

    /// Returns the default timeout for heartbeats every `interval` over a link with one-way
    /// jitter `jitter`: `10 · interval + 4 · jitter`.
    pub fn for_interval(interval: Duration, jitter: Duration) -> Self {
        let timeout =
            interval.saturating_mul(Self::MISSED_INTERVALS).saturating_add(jitter.saturating_mul(Self::JITTER_MARGIN));
        DetectorConfig { interval, timeout }
    }

    /// Returns [`DetectorConfig::for_link`] of a topology link (its `rtt` and `jitter`).
    pub fn for_conditions(link: &LinkConditions) -> Self {
        Self::for_link(link.rtt, link.jitter)
    }

    fn interval_us(&self) -> u64 {
        micros(self.interval).max(1)
    }

    fn timeout_us(&self) -> u64 {
        micros(self.timeout)
    }
}

/// Returns the first multiple of `interval_us` (not zero) after `after_us`, saturating.
/// Heartbeats leave on this grid of the driver's clock, µs since the Unix epoch: a node's
/// heartbeats to all its peers leave together, and those of every node of one host (or of
/// hosts whose clocks agree) too, so each wake-up of a sender or receiver serves several.
fn next_slot(after_us: u64, interval_us: u64) -> u64 {
    (after_us / interval_us).saturating_add(1).checked_mul(interval_us).unwrap_or(u64::MAX - u64::MAX % interval_us)
}

/// Returns `d` in whole microseconds, saturating at `u64::MAX`.
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What the detector believes of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// A fresh heartbeat arrived within the timeout (or the peer was added less than a
    /// timeout ago).
    Alive,
    /// Nothing fresh arrived for at least the timeout.
    Suspected,
}

/// An output of the detector, drained with [`Detector::poll_action`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<P> {
    /// Send one heartbeat to `to`, carrying `sent_at_us` (the sender's clock, µs), which the
    /// receiver passes to its [`Detector::handle_heartbeat`].
    Heartbeat {
        /// The peer to send to.
        to: P,
        /// The send time on this side's clock, µs.
        sent_at_us: u64,
    },
    /// The peer went from alive to suspected.
    Suspect(P),
    /// The peer went from suspected to alive (a fresh heartbeat arrived).
    Alive(P),
}

/// How [`Detector::handle_heartbeat`] took a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// It was fresh: the peer's silence timer restarted.
    Fresh,
    /// Its `sent_at_us` is not after the newest accepted one: a duplicate or an overtaken
    /// heartbeat, ignored.
    Stale,
    /// The sender is not a peer of this detector; ignored.
    UnknownPeer,
}

#[derive(Clone, Debug)]
struct PeerState {
    config: DetectorConfig,
    liveness: Liveness,
    /// When the last fresh heartbeat arrived (or when the peer was added), µs.
    last_heard_us: u64,
    /// The newest `sent_at_us` accepted from the peer.
    newest_sent_at_us: Option<u64>,
    /// When the next heartbeat to the peer is due, µs.
    next_send_us: u64,
}

impl PeerState {
    fn suspect_at_us(&self) -> u64 {
        self.last_heard_us.saturating_add(self.config.timeout_us())
    }
}

/// A heartbeat failure detector over peers of type `P` ([`redt_proto::DcId`] between DCs,
/// [`redt_proto::NodeId`] inside a DC). Module docs give the rule and the call order.
#[derive(Clone, Debug)]
pub struct Detector<P> {
    peers: BTreeMap<P, PeerState>,
    actions: VecDeque<Action<P>>,
}

impl<P: Copy + Ord> Default for Detector<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Copy + Ord> Detector<P> {
    /// Returns a detector with no peers.
    pub fn new() -> Self {
        Detector { peers: BTreeMap::new(), actions: VecDeque::new() }
    }

    // ---- inputs ---------------------------------------------------------------------------

    /// Starts watching `peer` at `now_us` (µs): it counts as alive for one timeout from now,
    /// and the first heartbeat to it is due at once. Adding a peer already watched replaces
    /// its configuration and restarts its timers, keeping its liveness.
    pub fn add_peer(&mut self, peer: P, config: DetectorConfig, now_us: u64) {
        let liveness = self.peers.get(&peer).map_or(Liveness::Alive, |p| p.liveness);
        self.peers.insert(
            peer,
            PeerState { config, liveness, last_heard_us: now_us, newest_sent_at_us: None, next_send_us: now_us },
        );
    }

    /// Stops watching `peer` (e.g. its DC was removed from membership); returns whether it was
    /// watched. No action about it is emitted afterwards; actions already queued stay.
    pub fn remove_peer(&mut self, peer: P) -> bool {
        self.peers.remove(&peer).is_some()
    }

    /// Takes a heartbeat from `from` arriving at `now_us` (µs). `sent_at_us` is the value of
    /// the sender's [`Action::Heartbeat`], if the message carries one; without it every
    /// heartbeat counts as fresh. A fresh heartbeat from a suspected peer queues
    /// [`Action::Alive`].
    ///
    /// Never fails: a heartbeat from an unknown sender or an old one is ignored and reported
    /// in the returned [`Heard`].
    pub fn handle_heartbeat(&mut self, from: P, sent_at_us: Option<u64>, now_us: u64) -> Heard {
        let Some(state) = self.peers.get_mut(&from) else {
            return Heard::UnknownPeer;
        };
        if let (Some(sent), Some(newest), Liveness::Alive) = (sent_at_us, state.newest_sent_at_us, state.liveness) {
            if sent <= newest {
                return Heard::Stale;
            }
        }
        if sent_at_us.is_some() {
            state.newest_sent_at_us = sent_at_us;
        }
        state.last_heard_us = state.last_heard_us.max(now_us);
        if state.liveness == Liveness::Suspected {
            state.liveness = Liveness::Alive;
            self.actions.push_back(Action::Alive(from));
        }
        Heard::Fresh
    }

    /// Takes a message other than a heartbeat sent to `peer` at `at_us` (µs): it tells the
    /// peer this side is alive as a heartbeat would, so the next heartbeat to the peer is due
    /// at the first slot of the heartbeat grid at least one interval after it. A link that carries traffic more often than every interval
    /// carries no heartbeats. An unknown peer, or a time before the last one, changes nothing.
    pub fn handle_sent(&mut self, peer: P, at_us: u64) {
        if let Some(state) = self.peers.get_mut(&peer) {
            let interval = state.config.interval_us();
            state.next_send_us = state.next_send_us.max(next_slot(at_us.saturating_add(interval - 1), interval));
        }
    }

    /// Takes that the driver woke at `now_us` (µs), `late_us` after
    /// [`Detector::poll_timeout`] asked it to, e.g. on a machine short of CPU: what peers sent
    /// meanwhile may still wait in this process's buffers, unread. For every alive peer whose
    /// timeout is at most four times `late_us` (a stall of a quarter of the timeout or more;
    /// shorter delays are the timer's ordinary lag), the peer is not suspected before one
    /// interval from `now_us` has passed (its silence deadline moves to at least `now_us +
    /// interval`), so a stall of this side is not taken for a silence of the peer. Suspected
    /// peers are left as they are.
    pub fn handle_stall(&mut self, now_us: u64, late_us: u64) {
        let stalled = |s: &PeerState| late_us.saturating_mul(4) >= s.config.timeout_us();
        for state in self.peers.values_mut().filter(|s| s.liveness == Liveness::Alive && stalled(s)) {
            let floor = now_us.saturating_add(state.config.interval_us()).saturating_sub(state.config.timeout_us());
            state.last_heard_us = state.last_heard_us.max(floor);
        }
    }

    /// Advances the detector to `now_us` (µs): queues the heartbeats that are due and a
    /// [`Action::Suspect`] for every alive peer silent for its timeout. Call it at
    /// [`Detector::poll_timeout`] or more often; calling it late only delays its actions (a
    /// heartbeat that fell more than one interval behind is sent once, not in a burst).
    pub fn handle_tick(&mut self, now_us: u64) {
        for (&peer, state) in self.peers.iter_mut() {
            if state.liveness == Liveness::Alive && now_us >= state.suspect_at_us() {
                state.liveness = Liveness::Suspected;
                self.actions.push_back(Action::Suspect(peer));
            }
            if now_us >= state.next_send_us {
                self.actions.push_back(Action::Heartbeat { to: peer, sent_at_us: now_us });
                state.next_send_us = next_slot(now_us, state.config.interval_us());
            }
        }
    }

    // ---- outputs --------------------------------------------------------------------------

    /// Returns the next queued action, oldest first.
    pub fn poll_action(&mut self) -> Option<Action<P>> {
        self.actions.pop_front()
    }

    /// Returns when [`Detector::handle_tick`] must next be called (µs): the earliest heartbeat
    /// due or suspicion deadline; `None` with no peers.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.peers
            .values()
            .map(|s| match s.liveness {
                Liveness::Alive => s.next_send_us.min(s.suspect_at_us()),
                Liveness::Suspected => s.next_send_us,
            })
            .min()
    }

    // ---- getters --------------------------------------------------------------------------

    /// Returns what the detector believes of `peer`, or `None` if it is not watched.
    pub fn liveness(&self, peer: P) -> Option<Liveness> {
        self.peers.get(&peer).map(|s| s.liveness)
    }

    /// Returns when the last fresh heartbeat of `peer` arrived (µs; the time it was added if
    /// none has), or `None` if it is not watched.
    pub fn last_heard_us(&self, peer: P) -> Option<u64> {
        self.peers.get(&peer).map(|s| s.last_heard_us)
    }

    /// Returns the configuration used for `peer`, or `None` if it is not watched.
    pub fn config(&self, peer: P) -> Option<DetectorConfig> {
        self.peers.get(&peer).map(|s| s.config)
    }

    /// Returns the watched peers in order.
    pub fn peers(&self) -> impl Iterator<Item = P> + '_ {
        self.peers.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::{DcId, NodeId};

    const MS: u64 = 1_000;

    fn drain<P: Copy + Ord>(d: &mut Detector<P>) -> Vec<Action<P>> {
        std::iter::from_fn(|| d.poll_action()).collect()
    }

    fn paper_link() -> DetectorConfig {
        DetectorConfig::for_link(Duration::from_millis(40), Duration::from_millis(10))
    }

    #[test]
    fn defaults_scale_with_rtt_and_jitter() {
        let c = paper_link();
        assert_eq!(c.interval, Duration::from_millis(20));
        assert_eq!(c.timeout, Duration::from_millis(240));
        let far = DetectorConfig::for_link(Duration::from_millis(300), Duration::from_millis(20));
        assert_eq!(far.interval, Duration::from_millis(150));
        assert_eq!(far.timeout, Duration::from_millis(1_580));
        let in_dc = DetectorConfig::for_link(Duration::from_micros(50), Duration::ZERO);
        assert_eq!(in_dc.interval, DetectorConfig::MIN_INTERVAL);
        assert_eq!(in_dc.timeout, Duration::from_millis(200));
        let huge = DetectorConfig::for_link(Duration::MAX, Duration::MAX);
        assert_eq!(huge.interval, DetectorConfig::MAX_INTERVAL);
        assert_eq!(huge.timeout, Duration::MAX);
        let link =
            LinkConditions { rtt: Duration::from_millis(40), jitter: Duration::from_millis(10), ..Default::default() };
        assert_eq!(DetectorConfig::for_conditions(&link), c);
    }

    #[test]
    fn explicit_config_is_checked() {
        assert!(DetectorConfig::new(Duration::ZERO, Duration::from_millis(1)).is_err());
        assert!(DetectorConfig::new(Duration::from_millis(10), Duration::from_millis(10)).is_err());
        let c = DetectorConfig::new(Duration::from_millis(10), Duration::from_millis(11)).unwrap();
        assert_eq!(c.timeout, Duration::from_millis(11));
    }

    #[test]
    fn sends_heartbeats_every_interval_without_bursts() {
        let mut d = Detector::new();
        d.add_peer(DcId(1), paper_link(), 0);
        assert_eq!(d.poll_timeout(), Some(0));
        d.handle_tick(0);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: DcId(1), sent_at_us: 0 }]);
        assert_eq!(d.poll_timeout(), Some(20 * MS));
        d.handle_tick(19 * MS);
        assert_eq!(drain(&mut d), vec![]);
        d.handle_heartbeat(DcId(1), Some(5), 19 * MS);
        d.handle_tick(20 * MS);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: DcId(1), sent_at_us: 20 * MS }]);
        // The driver stalls for 100 ms: one heartbeat, then the cadence restarts from now.
        d.handle_heartbeat(DcId(1), Some(6), 120 * MS);
        d.handle_tick(120 * MS);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: DcId(1), sent_at_us: 120 * MS }]);
        assert_eq!(d.poll_timeout(), Some(140 * MS));
    }

    #[test]
    fn silence_for_the_timeout_is_suspected_once_and_a_heartbeat_revives() {
        let mut d = Detector::new();
        d.add_peer(NodeId(3), paper_link(), 1_000 * MS);
        d.handle_tick(1_000 * MS);
        drain(&mut d);
        assert_eq!(d.handle_heartbeat(NodeId(3), Some(1), 1_010 * MS), Heard::Fresh);
        // Suspicion deadline = last heard + 240 ms.
        d.handle_tick(1_249 * MS);
        assert!(!drain(&mut d).contains(&Action::Suspect(NodeId(3))));
        assert_eq!(d.liveness(NodeId(3)), Some(Liveness::Alive));
        d.handle_tick(1_250 * MS);
        assert!(drain(&mut d).contains(&Action::Suspect(NodeId(3))));
        assert_eq!(d.liveness(NodeId(3)), Some(Liveness::Suspected));
        d.handle_tick(2_000 * MS);
        assert!(!drain(&mut d).contains(&Action::Suspect(NodeId(3))), "suspected only once");
        // Suspected peers still get heartbeats, so they can see us and answer.
        d.handle_tick(2_020 * MS);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: NodeId(3), sent_at_us: 2_020 * MS }]);
        assert_eq!(d.handle_heartbeat(NodeId(3), Some(2), 2_030 * MS), Heard::Fresh);
        assert_eq!(drain(&mut d), vec![Action::Alive(NodeId(3))]);
        assert_eq!(d.liveness(NodeId(3)), Some(Liveness::Alive));
        assert_eq!(d.last_heard_us(NodeId(3)), Some(2_030 * MS));
    }

    #[test]
    fn a_peer_that_never_answers_is_suspected_one_timeout_after_it_was_added() {
        let mut d = Detector::new();
        d.add_peer(DcId(2), paper_link(), 500 * MS);
        assert_eq!(d.liveness(DcId(2)), Some(Liveness::Alive));
        d.handle_tick(739 * MS);
        assert!(!drain(&mut d).contains(&Action::Suspect(DcId(2))));
        d.handle_tick(740 * MS);
        assert!(drain(&mut d).contains(&Action::Suspect(DcId(2))));
    }

    #[test]
    fn stale_duplicate_and_unknown_heartbeats_are_ignored() {
        let mut d = Detector::new();
        d.add_peer(DcId(1), paper_link(), 0);
        assert_eq!(d.handle_heartbeat(DcId(9), Some(1), 10 * MS), Heard::UnknownPeer);
        assert_eq!(d.handle_heartbeat(DcId(1), Some(100), 10 * MS), Heard::Fresh);
        assert_eq!(d.handle_heartbeat(DcId(1), Some(100), 200 * MS), Heard::Stale);
        assert_eq!(d.handle_heartbeat(DcId(1), Some(99), 200 * MS), Heard::Stale);
        assert_eq!(d.last_heard_us(DcId(1)), Some(10 * MS));
        d.handle_tick(250 * MS);
        assert!(drain(&mut d).contains(&Action::Suspect(DcId(1))), "stale heartbeats do not keep a peer alive");
        // Once suspected, a peer that restarted with a new clock origin is accepted again.
        assert_eq!(d.handle_heartbeat(DcId(1), Some(3), 260 * MS), Heard::Fresh);
        assert_eq!(drain(&mut d), vec![Action::Alive(DcId(1))]);
        assert_eq!(d.handle_heartbeat(DcId(1), Some(4), 270 * MS), Heard::Fresh);
        // Heartbeats without a send time always count; a clock going back never panics.
        assert_eq!(d.handle_heartbeat(DcId(1), None, 5 * MS), Heard::Fresh);
        assert_eq!(d.last_heard_us(DcId(1)), Some(270 * MS));
        d.handle_tick(0);
        d.handle_tick(u64::MAX);
        assert!(drain(&mut d).contains(&Action::Suspect(DcId(1))));
        assert!(d.poll_timeout().is_some());
    }

    #[test]
    fn traffic_to_a_peer_replaces_its_heartbeats() {
        let mut d = Detector::new();
        d.add_peer(NodeId(1), paper_link(), 0);
        d.handle_tick(0);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: NodeId(1), sent_at_us: 0 }]);
        // A message at 15 ms: the next heartbeat is due at 40 ms (the first slot of the 20 ms
        // grid at least an interval later), not 20 ms.
        d.handle_sent(NodeId(1), 15 * MS);
        assert_eq!(d.poll_timeout(), Some(40 * MS));
        d.handle_tick(20 * MS);
        assert_eq!(drain(&mut d), vec![]);
        d.handle_sent(NodeId(1), 20 * MS);
        assert_eq!(d.poll_timeout(), Some(40 * MS), "on the grid already");
        // A steady stream of messages: no heartbeat at all.
        for t in (30..200).step_by(10) {
            d.handle_sent(NodeId(1), t * MS);
            d.handle_heartbeat(NodeId(1), None, t * MS);
            d.handle_tick(t * MS);
            assert_eq!(drain(&mut d), vec![], "at {t} ms");
        }
        // An older send time or an unknown peer changes nothing.
        d.handle_sent(NodeId(1), 0);
        d.handle_sent(NodeId(9), 0);
        assert_eq!(d.poll_timeout(), Some(220 * MS));
        d.handle_tick(220 * MS);
        assert_eq!(drain(&mut d), vec![Action::Heartbeat { to: NodeId(1), sent_at_us: 220 * MS }]);
    }

    #[test]
    fn heartbeats_leave_on_a_grid_of_the_interval() {
        assert_eq!(next_slot(0, 20), 20);
        assert_eq!(next_slot(19, 20), 20);
        assert_eq!(next_slot(20, 20), 40);
        assert_eq!(next_slot(u64::MAX, 20), u64::MAX - u64::MAX % 20, "saturates, stays a multiple");
        // Two peers added at different times send together from their second heartbeat on.
        let mut d = Detector::new();
        d.add_peer(NodeId(1), paper_link(), 3 * MS);
        d.handle_tick(3 * MS);
        d.add_peer(NodeId(2), paper_link(), 11 * MS);
        d.handle_tick(11 * MS);
        drain(&mut d);
        d.handle_tick(20 * MS);
        assert_eq!(
            drain(&mut d),
            vec![
                Action::Heartbeat { to: NodeId(1), sent_at_us: 20 * MS },
                Action::Heartbeat { to: NodeId(2), sent_at_us: 20 * MS }
            ]
        );
    }

    #[test]
    fn a_stalled_driver_gives_every_alive_peer_one_more_interval() {
        let mut d = Detector::new();
        d.add_peer(NodeId(1), paper_link(), 0);
        d.add_peer(NodeId(2), paper_link(), 0);
        d.handle_heartbeat(NodeId(2), None, 100 * MS);
        d.handle_tick(0);
        drain(&mut d);
        // A lag under a quarter of the timeout (240 ms) changes nothing.
        d.handle_stall(79 * MS, 59 * MS);
        assert_eq!(d.last_heard_us(NodeId(1)), Some(0));
        // Due at 20 ms, the driver wakes at 600 ms: nobody is suspected on this tick.
        d.handle_stall(600 * MS, 580 * MS);
        d.handle_tick(600 * MS);
        assert!(drain(&mut d).iter().all(|a| matches!(a, Action::Heartbeat { .. })));
        // One interval later, a peer still silent is suspected; one heard meanwhile is not.
        d.handle_heartbeat(NodeId(2), None, 610 * MS);
        d.handle_tick(619 * MS);
        assert!(drain(&mut d).iter().all(|a| !matches!(a, Action::Suspect(_))));
        d.handle_tick(620 * MS);
        assert_eq!(
            drain(&mut d).into_iter().filter(|a| !matches!(a, Action::Heartbeat { .. })).collect::<Vec<_>>(),
            vec![Action::Suspect(NodeId(1))]
        );
        // A stall never brings a suspected peer back, nor moves a deadline earlier.
        d.handle_stall(700 * MS, 600 * MS);
        assert_eq!(d.liveness(NodeId(1)), Some(Liveness::Suspected));
        assert_eq!(d.last_heard_us(NodeId(2)), Some(610 * MS));
    }

    #[test]
    fn peers_are_independent_and_can_be_removed() {
        let mut d = Detector::new();
        let slow = DetectorConfig::new(Duration::from_millis(100), Duration::from_millis(1_000)).unwrap();
        d.add_peer(DcId(1), paper_link(), 0);
        d.add_peer(DcId(2), slow, 0);
        d.handle_tick(300 * MS);
        let actions = drain(&mut d);
        assert!(actions.contains(&Action::Suspect(DcId(1))));
        assert!(!actions.contains(&Action::Suspect(DcId(2))));
        assert!(d.remove_peer(DcId(2)));
        assert!(!d.remove_peer(DcId(2)));
        d.handle_tick(2_000 * MS);
        assert!(drain(&mut d)
            .iter()
            .all(|a| !matches!(a, Action::Suspect(DcId(2)) | Action::Heartbeat { to: DcId(2), .. })));
        assert_eq!(d.peers().collect::<Vec<_>>(), vec![DcId(1)]);
        assert!(d.remove_peer(DcId(1)));
        assert_eq!(d.poll_timeout(), None);
    }
}
