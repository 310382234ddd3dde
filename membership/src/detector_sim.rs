//! Measures the failure detector on a simulated link: two [`Detector`]s watching each other
//! across a link with a fixed RTT, uniform jitter and independent loss, on a virtual clock
//! driven by a seeded random number generator (no real time, no threads). The same seed gives
//! the same trace.
//!
//! [`false_suspicions`] runs a link whose both ends stay up and counts every suspicion (each
//! is false); [`detection_time`] stops one end and returns how long the other takes to
//! suspect it. The tests, the `detector_fp` example and later `redt bench` call these.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use crate::detector::{micros, Action, Detector, DetectorConfig};

/// The simulated link between the two detectors, the same in both directions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimLink {
    /// Round-trip time; each direction adds half of it.
    pub rtt: Duration,
    /// Jitter added to each one-way delay, uniform in `±jitter` (delays below zero are
    /// clamped to zero).
    pub jitter: Duration,
    /// Probability that a heartbeat is lost, in `[0, 1]`, independently per heartbeat.
    pub loss: f64,
}

/// What [`false_suspicions`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FalseSuspicions {
    /// Simulated time times the number of watching ends (two), hours.
    pub peer_hours: f64,
    /// Heartbeats sent, both directions.
    pub heartbeats: u64,
    /// Heartbeats lost, both directions.
    pub lost: u64,
    /// Suspicions raised while both ends were up: every one is false.
    pub suspicions: u64,
}

/// The two ends of the link.
const A: usize = 0;
const B: usize = 1;

/// A heartbeat in flight: arrival time (µs), a tie-breaking sequence, the receiving end, and
/// the sender's `sent_at_us`.
type InFlight = Reverse<(u64, u64, usize, u64)>;

struct Sim {
    link: SimLink,
    rng: StdRng,
    ends: [Detector<usize>; 2],
    up: [bool; 2],
    in_flight: BinaryHeap<InFlight>,
    seq: u64,
    heartbeats: u64,
    lost: u64,
    /// Every suspicion raised: (time µs, watching end, suspected end).
    suspicions: Vec<(u64, usize, usize)>,
}

impl Sim {
    fn new(link: SimLink, config: DetectorConfig, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ends = [Detector::new(), Detector::new()];
        // The two ends start at different phases of the heartbeat interval.
        let phase_us = rng.gen_range(0..micros(config.interval).max(1));
        ends[A].add_peer(B, config, 0);
        ends[B].add_peer(A, config, phase_us);
        Sim {
            link,
            rng,
            ends,
            up: [true, true],
            in_flight: BinaryHeap::new(),
            seq: 0,
            heartbeats: 0,
            lost: 0,
            suspicions: Vec::new(),
        }
    }

    /// Runs every event up to and including `end_us`, or until `stop` returns true after an
    /// event.
    fn run(&mut self, end_us: u64, mut stop: impl FnMut(&Sim) -> bool) {
        loop {
            let next_arrival = self.in_flight.peek().map(|Reverse((t, ..))| *t);
            let next_tick =
                (0..2).filter(|&e| self.up[e]).filter_map(|e| self.ends[e].poll_timeout().map(|t| (t, e))).min();
            let now = match (next_arrival, next_tick) {
                (Some(a), Some((t, _))) => a.min(t),
                (Some(a), None) => a,
                (None, Some((t, _))) => t,
                (None, None) => return,
            };
            if now > end_us {
                return;
            }
            if next_arrival == Some(now) {
                let Some(Reverse((_, _, to, sent_at_us))) = self.in_flight.pop() else { return };
                if self.up[to] {
                    self.ends[to].handle_heartbeat(1 - to, Some(sent_at_us), now);
                    self.drain(to, now);
                }
            } else if let Some((_, end)) = next_tick {
                self.ends[end].handle_tick(now);
                self.drain(end, now);
            }
            if stop(self) {
                return;
            }
        }
    }

    fn drain(&mut self, end: usize, now: u64) {
        while let Some(action) = self.ends[end].poll_action() {
            match action {
                Action::Heartbeat { to, sent_at_us } => {
                    self.heartbeats += 1;
                    if self.rng.gen_bool(self.link.loss.clamp(0.0, 1.0)) {
                        self.lost += 1;
                        continue;
                    }
                    let one_way = micros(self.link.rtt / 2) as i64;
                    let jitter = micros(self.link.jitter) as i64;
                    let delay = (one_way + self.rng.gen_range(-jitter..=jitter)).max(0) as u64;
                    self.seq += 1;
                    self.in_flight.push(Reverse((now.saturating_add(delay), self.seq, to, sent_at_us)));
                }
                Action::Suspect(peer) => self.suspicions.push((now, end, peer)),
                Action::Alive(_) => {}
            }
        }
    }
}

/// Runs two detectors with `config` across `link` for `duration` of simulated time, both ends
/// up throughout, and counts their suspicions (all false). Deterministic in `seed`.
pub fn false_suspicions(link: SimLink, config: DetectorConfig, duration: Duration, seed: u64) -> FalseSuspicions {
    let mut sim = Sim::new(link, config, seed);
    sim.run(micros(duration), |_| false);
    FalseSuspicions {
        peer_hours: 2.0 * duration.as_secs_f64() / 3600.0,
        heartbeats: sim.heartbeats,
        lost: sim.lost,
        suspicions: sim.suspicions.len() as u64,
    }
}

/// Runs two detectors with `config` across `link` for `warmup` plus a random part of a second,
/// stops one end there (it sends nothing more; heartbeats already in flight still arrive), and
/// returns how long the other end takes to suspect it. Returns `None` if it was suspected
/// falsely during the warmup or not within `10 · timeout` after the stop. Deterministic in
/// `seed`.
pub fn detection_time(link: SimLink, config: DetectorConfig, warmup: Duration, seed: u64) -> Option<Duration> {
    let mut sim = Sim::new(link, config, seed);
    let stop_us = micros(warmup) + sim.rng.gen_range(0..1_000_000);
    sim.run(stop_us, |_| false);
    if !sim.suspicions.is_empty() {
        return None;
    }
    sim.up[B] = false;
    let give_up_us = stop_us.saturating_add(micros(config.timeout).saturating_mul(10));
    sim.run(give_up_us, |s| !s.suspicions.is_empty());
    match sim.suspicions.first() {
        Some(&(at, A, B)) => Some(Duration::from_micros(at - stop_us)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's link: 40 ms RTT, 10 ms jitter, 1% loss.
    const PAPER_LINK: SimLink =
        SimLink { rtt: Duration::from_millis(40), jitter: Duration::from_millis(10), loss: 0.01 };

    fn paper_config() -> DetectorConfig {
        DetectorConfig::for_link(PAPER_LINK.rtt, PAPER_LINK.jitter)
    }

    #[test]
    fn no_false_suspicion_in_an_hour_at_1_percent_loss_and_10ms_jitter() {
        let run = false_suspicions(PAPER_LINK, paper_config(), Duration::from_secs(3600), 0x5eed);
        // Two ends, one heartbeat per 20 ms each: 360 000 heartbeats, about 1% of them lost.
        assert_eq!(run.peer_hours, 2.0);
        assert!((359_990..=360_010).contains(&run.heartbeats), "{run:?}");
        assert!((3_000..=4_200).contains(&run.lost), "{run:?}");
        assert_eq!(run.suspicions, 0, "false suspicions: {run:?}");
    }

    #[test]
    fn a_stopped_peer_is_suspected_within_a_second() {
        let config = paper_config();
        for seed in 0..50 {
            let t = detection_time(PAPER_LINK, config, Duration::from_secs(5), seed)
                .unwrap_or_else(|| panic!("seed {seed}: not suspected, or suspected falsely"));
            // At least the timeout minus the last heartbeat's age, at most timeout + one way
            // + jitter.
            assert!(t <= Duration::from_millis(270), "seed {seed}: detected after {t:?}");
            assert!(t >= Duration::from_millis(180), "seed {seed}: detected after {t:?}");
            assert!(t <= Duration::from_secs(1));
        }
    }

    #[test]
    fn a_lossy_link_with_a_short_timeout_does_suspect() {
        // The measurement can fail: 30% loss with a three-interval timeout must be suspected.
        let link = SimLink { loss: 0.3, ..PAPER_LINK };
        let tight = DetectorConfig::new(Duration::from_millis(20), Duration::from_millis(60)).unwrap();
        let run = false_suspicions(link, tight, Duration::from_secs(60), 1);
        assert!(run.suspicions > 0, "{run:?}");
    }

    #[test]
    fn runs_repeat_with_the_same_seed() {
        let link = SimLink { loss: 0.2, ..PAPER_LINK };
        let tight = DetectorConfig::new(Duration::from_millis(20), Duration::from_millis(70)).unwrap();
        let a = false_suspicions(link, tight, Duration::from_secs(30), 7);
        assert_eq!(a, false_suspicions(link, tight, Duration::from_secs(30), 7));
        assert_ne!(a, false_suspicions(link, tight, Duration::from_secs(30), 8));
        let d = detection_time(PAPER_LINK, paper_config(), Duration::from_secs(1), 3);
        assert_eq!(d, detection_time(PAPER_LINK, paper_config(), Duration::from_secs(1), 3));
    }
}
