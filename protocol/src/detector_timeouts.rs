//! The failure detector's configuration for every pair of DCs of a topology: per pair, the
//! detector's defaults for the link between them ([`DetectorConfig::for_link`]), or the
//! topology file's `timeouts.detector` where it sets `interval` or `timeout`. Two nodes of
//! one DC use [`IN_DC_RTT`] (the topology describes no link inside a DC). Pure: read by the
//! node's detector driver (`crate::liveness`) and by `redt node`'s startup checks.

use crate::error::{Error, Result};
use redt_membership::DetectorConfig;
use redt_proto::{DcId, DetectorTimeoutsConfig, Topology};
use std::collections::BTreeSet;
use std::time::Duration;

/// Round-trip time assumed between two nodes of one DC (1 ms; the topology describes no link
/// inside a DC). Any value under 40 ms gives the detector's floor: a heartbeat every 20 ms and
/// a 200 ms timeout.
pub const IN_DC_RTT: Duration = Duration::from_millis(1);

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
}
