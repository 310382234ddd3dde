//! Every timeout a real node runs with (`redt node`, `redt cluster up`): the topology file's
//! `timeouts:` section ([`TimeoutsConfig`]) over the defaults derived from the topology's
//! largest link RTT, checked as a whole (docs/design.md, "Recovery", timeouts on real nodes).

use crate::error::Result;
use redt_protocol::detector_timeouts::DetectorTimeouts;
use redt_protocol::txn::CoordinatorOptions;
use redt_protocol::RecoveryOptions;

use redt_proto::{LimitsConfig, TimeoutsConfig, Topology};
use std::time::Duration;

/// The resolved timeouts of a node: each one the file's value if it sets it, else the
/// topology-derived default ([`NodeTimeouts::defaults`]). Every node of a cluster reads the
/// same file and topology, so all resolve the same values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTimeouts {
    /// `phase1_timeout` ([`CoordinatorOptions::phase1_timeout`]).
    pub phase1_timeout: Duration,
    /// `clock_skew_bound` ([`CoordinatorOptions::clock_skew_bound`], also the recovery's).
    pub clock_skew_bound: Duration,
    /// `retry_every` ([`CoordinatorOptions::retry_every`]).
    pub retry_every: Duration,
    /// `retry_max` ([`CoordinatorOptions::retry_max`]).
    pub retry_max: Duration,
    /// `give_up_after` ([`CoordinatorOptions::give_up_after`]).
    pub give_up_after: Duration,
    /// `lock_wait`: how long a phase 1 meeting a lock waits for it at this node's executor
    /// (`ExecutorCore::with_lock_wait`; zero: No-Wait).
    pub lock_wait: Duration,
    /// `recovery.*`; its `clock_skew_bound` is the one above.
    pub recovery: RecoveryOptions,
    /// `detector.*`: the failure detector's heartbeat interval and timeout per pair of DCs.
    pub detector: DetectorTimeouts,
}

impl NodeTimeouts {
    /// What a real node runs with when the file sets no timeout: the phase-1 timeout of
    /// [`CoordinatorOptions::phase1_timeout_for`] (10 × the largest link RTT, at least
    /// 500 ms), the clock-skew bound and phase-2 retries of [`CoordinatorOptions::default`]
    /// (250 ms; 200 ms up to 5 s; give up after 600 s), no lock wait (No-Wait),
    /// [`RecoveryOptions::for_topology`] and [`DetectorTimeouts::defaults`].
    pub fn defaults(topology: &Topology) -> NodeTimeouts {
        let d = CoordinatorOptions::default();
        NodeTimeouts {
            phase1_timeout: CoordinatorOptions::phase1_timeout_for(topology),
            clock_skew_bound: d.clock_skew_bound,
            retry_every: d.retry_every,
            retry_max: d.retry_max,
            give_up_after: d.give_up_after,
            lock_wait: Duration::ZERO,
            recovery: RecoveryOptions::for_topology(topology, d.clock_skew_bound),
            detector: DetectorTimeouts::defaults(topology),
        }
    }

    /// The timeouts of `set` (the topology's `timeouts:` section, with any command-line
    /// overrides already written into it) over [`NodeTimeouts::defaults`] of `topology`,
    /// checked: a lock wait may not be above the phase-1 timeout, a retry pause may not start
    /// above its maximum (`retry_every` ≤ `retry_max`,
    /// `recovery.retry_base` ≤ `recovery.retry_max`), and the coordinator's DC recovers
    /// first (`recovery.own_dc_after` ≤ `recovery.other_dc_after`); the failure detector's
    /// `detector.timeout` is longer than its `detector.interval` for every pair of DCs
    /// ([`DetectorTimeouts::resolve`]).
    ///
    /// # Errors
    /// [`redt_protocol::Error::BadTimeouts`] naming the first key that breaks an ordering, with both values
    /// and whether the other one is a default.
    pub fn resolve(topology: &Topology, set: &TimeoutsConfig) -> Result<NodeTimeouts> {
        let mut t = NodeTimeouts::defaults(topology);
        let over = |slot: &mut Duration, v: Option<Duration>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        over(&mut t.phase1_timeout, set.phase1_timeout);
        over(&mut t.clock_skew_bound, set.clock_skew_bound);
        over(&mut t.retry_every, set.retry_every);
        over(&mut t.retry_max, set.retry_max);
        over(&mut t.give_up_after, set.give_up_after);
        over(&mut t.lock_wait, set.lock_wait);
        let (r, s) = (&mut t.recovery, &set.recovery);
        r.clock_skew_bound = t.clock_skew_bound;
        over(&mut r.own_dc_after, s.own_dc_after);
        over(&mut r.other_dc_after, s.other_dc_after);
        over(&mut r.turn, s.turn);
        over(&mut r.round_timeout, s.round_timeout);
        over(&mut r.retry_base, s.retry_base);
        over(&mut r.retry_max, s.retry_max);
        over(&mut r.scan_every, s.scan_every);
        over(&mut r.gap_wait, s.gap_wait);
        over(&mut r.catch_up_give_up, s.catch_up_give_up);
        let rs = &set.recovery;
        let orderings = [
            // A phase 1 waiting for a lock past its coordinator's phase-1 timeout only delays
            // the abort the coordinator has decided by then.
            (("lock_wait", t.lock_wait, set.lock_wait), ("phase1_timeout", t.phase1_timeout, set.phase1_timeout)),
            (("retry_every", t.retry_every, set.retry_every), ("retry_max", t.retry_max, set.retry_max)),
            (
                ("recovery.retry_base", t.recovery.retry_base, rs.retry_base),
                ("recovery.retry_max", t.recovery.retry_max, rs.retry_max),
            ),
            (
                ("recovery.own_dc_after", t.recovery.own_dc_after, rs.own_dc_after),
                ("recovery.other_dc_after", t.recovery.other_dc_after, rs.other_dc_after),
            ),
        ];
        for ((low, lv, lset), (high, hv, hset)) in orderings {
            if lv > hv {
                let shown = |v: Duration, set: Option<Duration>| {
                    let v = humantime::format_duration(v);
                    if set.is_some() {
                        v.to_string()
                    } else {
                        format!("{v}, the default for this topology")
                    }
                };
                // Name the key the file set (the other one is a default), or the first.
                let (key, other) = if lset.is_none() && hset.is_some() { (high, low) } else { (low, high) };
                let relation = if key == low { "above" } else { "below" };
                let (kv, kset, ov, oset) = if key == low { (lv, lset, hv, hset) } else { (hv, hset, lv, lset) };
                return Err(redt_protocol::Error::BadTimeouts {
                    key: format!("timeouts.{key}"),
                    problem: format!(
                        "{} must not be {relation} timeouts.{other} ({})",
                        shown(kv, kset),
                        shown(ov, oset)
                    ),
                }
                .into());
            }
        }
        // The phase-1 timeout (a command line's included) leaves room for the largest phase 1
        // the limits admit (`LimitsConfig::max_ops_for_phase1`).
        let ops = topology.limits.max_ops_per_txn;
        if ops > LimitsConfig::max_ops_for_phase1(t.phase1_timeout) {
            let budget = LimitsConfig::EXECUTOR_BUDGET_PER_OP;
            return Err(redt_protocol::Error::BadTimeouts {
                key: "timeouts.phase1_timeout".into(),
                problem: format!(
                    "{} is too short for limits.max_ops_per_txn {ops}: a phase 1 of {ops} operations may hold an \
                     executor thread about {} ms ({} µs each), and that must stay under a tenth of it; set at \
                     least {}, or lower limits.max_ops_per_txn",
                    humantime::format_duration(t.phase1_timeout),
                    (budget * ops as u32).as_millis(),
                    budget.as_micros(),
                    humantime::format_duration(budget * ops as u32 * 10)
                ),
            }
            .into());
        }
        t.detector = DetectorTimeouts::resolve(topology, &set.detector)?;
        Ok(t)
    }

    /// `options` with these timeouts: phase 1, skew bound, phase-2 retries, the recovery
    /// options its node's recovery task runs with ([`CoordinatorOptions::recovery`]) and its
    /// failure detector's ([`CoordinatorOptions::detector`]).
    pub fn apply(&self, options: CoordinatorOptions) -> CoordinatorOptions {
        CoordinatorOptions {
            phase1_timeout: self.phase1_timeout,
            clock_skew_bound: self.clock_skew_bound,
            retry_every: self.retry_every,
            retry_max: self.retry_max,
            give_up_after: self.give_up_after,
            lock_wait: redt_protocol::txn::LockWait::For(self.lock_wait),
            recovery: Some(self.recovery.clone()),
            detector: Some(self.detector.clone()),
            ..options
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::RecoveryTimeoutsConfig;

    fn topology(rtt: &str) -> Topology {
        let text = include_str!("../../configs/default.yaml");
        let t = Topology::from_yaml("default.yaml", text).expect("default.yaml is valid");
        let max = t.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
        assert_eq!(max, Duration::from_millis(40), "default.yaml's links are 40 ms");
        if rtt == "40ms" {
            return t;
        }
        let mut t = t;
        let rtt = humantime::parse_duration(rtt).unwrap();
        for l in t.links.iter_mut().flatten() {
            if !l.rtt.is_zero() {
                l.rtt = rtt;
            }
        }
        t
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nothing_set_resolves_to_what_a_node_ran_with_before() {
        for rtt in ["40ms", "250ms", "2ms"] {
            let t = topology(rtt);
            let got = NodeTimeouts::resolve(&t, &TimeoutsConfig::default()).unwrap();
            assert_eq!(got, NodeTimeouts::defaults(&t));
            assert_eq!(got.phase1_timeout, CoordinatorOptions::phase1_timeout_for(&t));
            assert_eq!(got.recovery, RecoveryOptions::for_topology(&t, ms(250)));
        }
        // The values themselves at 40 ms (docs/recovery.md, "Timeouts").
        let d = NodeTimeouts::defaults(&topology("40ms"));
        assert_eq!((d.phase1_timeout, d.clock_skew_bound), (ms(500), ms(250)));
        assert_eq!((d.retry_every, d.retry_max, d.give_up_after), (ms(200), ms(5000), ms(600_000)));
        let r = &d.recovery;
        assert_eq!((r.own_dc_after, r.other_dc_after, r.turn), (ms(160), ms(500), ms(640)));
        assert_eq!((r.round_timeout, r.retry_base, r.retry_max), (ms(160), ms(80), ms(5000)));
        assert_eq!((r.scan_every, r.gap_wait, r.catch_up_give_up), (ms(100), ms(200), ms(30_000)));
        assert_eq!(d.detector.summary(), "inside a DC 20ms / 200ms; between DCs 20ms / 200ms");
    }

    /// The commented `timeouts:` example in configs/default.yaml, uncommented, sets every key
    /// to its default at 40 ms: the file documents the defaults truthfully.
    #[test]
    fn the_example_in_default_yaml_spells_out_the_defaults() {
        let text = include_str!("../../configs/default.yaml");
        let start = text.find("\n# timeouts:\n").expect("default.yaml has a commented timeouts example") + 1;
        let block: String = text[start..].lines().map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l))).collect();
        let uncommented = format!("{}{block}", &text[..start]);
        let t = Topology::from_yaml("default.yaml", &uncommented).expect("the uncommented example is valid");
        let set = &t.timeouts;
        assert!(set.phase1_timeout.is_some() && set.give_up_after.is_some(), "{set:?}");
        assert!(set.recovery.own_dc_after.is_some() && set.recovery.catch_up_give_up.is_some(), "{set:?}");
        assert!(set.detector.interval.is_some() && set.detector.timeout.is_some(), "{set:?}");
        assert_eq!(NodeTimeouts::resolve(&t, set).unwrap(), NodeTimeouts::defaults(&topology("40ms")));
    }

    #[test]
    fn each_key_set_replaces_its_default_only() {
        let t = topology("40ms");
        let set = TimeoutsConfig {
            phase1_timeout: Some(ms(900)),
            clock_skew_bound: Some(Duration::ZERO),
            retry_max: Some(ms(1000)),
            recovery: RecoveryTimeoutsConfig { turn: Some(ms(50)), gap_wait: Some(ms(7)), ..Default::default() },
            ..Default::default()
        };
        let got = NodeTimeouts::resolve(&t, &set).unwrap();
        let d = NodeTimeouts::defaults(&t);
        assert_eq!(got.phase1_timeout, ms(900));
        assert_eq!(got.clock_skew_bound, Duration::ZERO);
        assert_eq!(got.recovery.clock_skew_bound, Duration::ZERO, "recovery waits out the same bound");
        assert_eq!(got.retry_max, ms(1000));
        assert_eq!(got.retry_every, d.retry_every);
        assert_eq!(got.recovery.turn, ms(50));
        assert_eq!(got.recovery.gap_wait, ms(7));
        assert_eq!(got.recovery.own_dc_after, d.recovery.own_dc_after);
        assert_eq!(got.recovery.retry_max, d.recovery.retry_max, "the recovery's retry_max is its own key");

        let o = got.apply(CoordinatorOptions { early_ack: false, ..CoordinatorOptions::default() });
        assert!(!o.early_ack, "apply keeps what is not a timeout");
        assert_eq!((o.phase1_timeout, o.clock_skew_bound, o.retry_max), (ms(900), Duration::ZERO, ms(1000)));
        assert_eq!(o.recovery_options(&t), got.recovery);
        assert_eq!(o.detector_timeouts(&t), DetectorTimeouts::defaults(&t), "no detector key set");

        let set = TimeoutsConfig {
            detector: redt_proto::DetectorTimeoutsConfig { interval: Some(ms(50)), timeout: None },
            ..Default::default()
        };
        let got = NodeTimeouts::resolve(&t, &set).unwrap();
        let c = got.detector.between(redt_proto::DcId(0), redt_proto::DcId(1)).expect("a link");
        assert_eq!((c.interval, c.timeout), (ms(50), ms(500)));
        assert_eq!(got.apply(CoordinatorOptions::default()).detector_timeouts(&t), got.detector);
        assert_eq!(got.phase1_timeout, d.phase1_timeout);
    }

    #[test]
    fn orderings_are_checked_with_the_defaults_filled_in() {
        let t = topology("40ms");
        let err = |set: TimeoutsConfig| match NodeTimeouts::resolve(&t, &set) {
            Err(crate::Error::Protocol(redt_protocol::Error::BadTimeouts { key, problem })) => (key, problem),
            other => panic!("expected BadTimeouts, got {other:?}"),
        };
        // Both set.
        let (key, problem) =
            err(TimeoutsConfig { retry_every: Some(ms(300)), retry_max: Some(ms(200)), ..Default::default() });
        assert_eq!(key, "timeouts.retry_every");
        assert!(problem.contains("300ms must not be above timeouts.retry_max (200ms)"), "{problem}");
        // The file's value against a default: the file's key is named.
        let rec = |r: RecoveryTimeoutsConfig| TimeoutsConfig { recovery: r, ..Default::default() };
        let (key, problem) = err(rec(RecoveryTimeoutsConfig { retry_base: Some(ms(6000)), ..Default::default() }));
        assert_eq!(key, "timeouts.recovery.retry_base");
        assert!(problem.contains("above timeouts.recovery.retry_max (5s, the default"), "{problem}");
        let (key, problem) = err(rec(RecoveryTimeoutsConfig { retry_max: Some(ms(10)), ..Default::default() }));
        assert_eq!(key, "timeouts.recovery.retry_max");
        assert!(
            problem.contains("10ms must not be below timeouts.recovery.retry_base (80ms, the default"),
            "{problem}"
        );
        let (key, _) = err(rec(RecoveryTimeoutsConfig { other_dc_after: Some(ms(100)), ..Default::default() }));
        assert_eq!(key, "timeouts.recovery.other_dc_after");
        let (key, _) = err(rec(RecoveryTimeoutsConfig { own_dc_after: Some(ms(600)), ..Default::default() }));
        assert_eq!(key, "timeouts.recovery.own_dc_after");
        // A lock wait longer than the phase-1 timeout (500 ms by default at 40 ms).
        let (key, problem) = err(TimeoutsConfig { lock_wait: Some(ms(800)), ..Default::default() });
        assert_eq!(key, "timeouts.lock_wait");
        assert!(problem.contains("800ms must not be above timeouts.phase1_timeout (500ms, the default"), "{problem}");
        let wait = TimeoutsConfig { lock_wait: Some(ms(40)), ..Default::default() };
        assert_eq!(NodeTimeouts::resolve(&t, &wait).unwrap().lock_wait, ms(40));
        assert_eq!(NodeTimeouts::defaults(&t).lock_wait, Duration::ZERO, "No-Wait unless set");
        // A phase-1 timeout (say from the command line) too short for the limits' largest phase 1.
        let (key, problem) = err(TimeoutsConfig { phase1_timeout: Some(ms(50)), ..Default::default() });
        assert_eq!(key, "timeouts.phase1_timeout");
        assert!(
            problem.contains("50ms is too short for limits.max_ops_per_txn 1024")
                && problem.contains("about 25 ms (25 µs each)")
                && problem.contains("set at least 256ms"),
            "{problem}"
        );
        assert!(
            NodeTimeouts::resolve(&t, &TimeoutsConfig { phase1_timeout: Some(ms(256)), ..Default::default() }).is_ok()
        );
        // The detector's timeout must be longer than its interval.
        let det = |interval: Option<u64>, timeout: Option<u64>| TimeoutsConfig {
            detector: redt_proto::DetectorTimeoutsConfig { interval: interval.map(ms), timeout: timeout.map(ms) },
            ..Default::default()
        };
        let (key, problem) = err(det(None, Some(20)));
        assert_eq!(key, "timeouts.detector.timeout");
        assert!(problem.contains("20ms must be above timeouts.detector.interval (20ms, the default"), "{problem}");
        let (key, _) = err(det(Some(300), Some(200)));
        assert_eq!(key, "timeouts.detector.interval");
        // Equal is fine.
        let same = TimeoutsConfig { retry_every: Some(ms(5000)), ..Default::default() };
        assert_eq!(NodeTimeouts::resolve(&t, &same).unwrap().retry_every, ms(5000));
    }
}
