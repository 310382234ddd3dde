//! The WAN model: per-link delay, jitter, loss, rate and partitions, with no I/O and no clock.
//!
//! [`WanModel::decide`] takes the current `Instant` and a random number generator from the
//! caller and returns each datagram's [`Fate`]; the socket driver (`socket.rs`) carries it out.
//! This mirrors what `tc qdisc … netem delay … loss … rate …` does per destination in a kernel
//! that has `sch_netem` (docs/design.md §4).

use crate::error::{Error, Result};
use rand::Rng;
use redt_proto::{DcId, LinkConditions, Topology};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What happens to one datagram, as decided by [`WanModel::decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Hand the datagram to the network at `at` (never earlier than the `now` passed in).
    Deliver {
        /// The instant at which the datagram leaves the emulated link.
        at: Instant,
    },
    /// Discard the datagram.
    Drop {
        /// Why the datagram is discarded.
        cause: DropCause,
    },
}

/// Why [`WanModel::decide`] discarded a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The link is partitioned ([`WanModel::set_partitioned`]).
    Partition,
    /// The random loss draw hit ([`LinkConditions::loss`]).
    Loss,
    /// The delivery instant would lie beyond what `Instant` can represent (for example an
    /// `rtt` of `Duration::MAX`); such a datagram could never be delivered.
    Unschedulable,
}

/// State of one directed link `from → to`.
#[derive(Clone, Copy, Debug, Default)]
struct LinkState {
    /// Configured conditions.
    conditions: LinkConditions,
    /// `true` drops every datagram on this link.
    partitioned: bool,
    /// Instant at which the emulated serializer finishes the last accepted datagram.
    free_at: Option<Instant>,
    /// Latest delivery instant handed out on this link (keeps FIFO order when jitter is 0).
    last_delivery: Option<Instant>,
}

/// The emulated WAN between DCs: a square matrix of directed links indexed by [`DcId`], and a
/// map from socket addresses to the DC they belong to.
///
/// Pure state machine: it never reads a clock or a thread-local random number
/// generator; [`WanModel::decide`] takes both from the caller. Share it between sockets as an
/// `Arc<Mutex<WanModel>>`; changing a link through that mutex takes effect for the next
/// datagram sent (docs/design.md §4, "changeable while running").
#[derive(Clone, Debug)]
pub struct WanModel {
    /// Number of DCs: valid ids are `0..dc_count`.
    dc_count: usize,
    /// Directed links `(from, to)` that differ from the zero default or carry queue state.
    links: HashMap<(DcId, DcId), LinkState>,
    /// Exact socket addresses and their DC.
    addrs: HashMap<SocketAddr, DcId>,
    /// IP addresses and their DC (`None`: the IP is used by several DCs, so it says nothing).
    ips: HashMap<IpAddr, Option<DcId>>,
}

impl WanModel {
    /// Returns a model of `dc_count` DCs whose links all have zero delay, no loss, no rate
    /// limit and no partition, and which knows no addresses yet.
    pub fn new(dc_count: usize) -> Self {
        WanModel { dc_count, links: HashMap::new(), addrs: HashMap::new(), ips: HashMap::new() }
    }

    /// Returns a model with the topology's DCs, its `links[from][to]` conditions and every
    /// node's `advertise` address registered when it is an IP (a host name is left to the
    /// caller, who registers what it resolves to: datagrams go to the advertised address),
    /// both the exact address and, through [`WanModel::register_ip`], its IP, so that a
    /// process on a node's IP with another port, e.g. a client, maps to the node's DC.
    pub fn from_topology(topology: &Topology) -> Self {
        let mut model = WanModel::new(topology.dcs.len());
        for (from, row) in topology.links.iter().enumerate().take(model.dc_count) {
            for (to, conditions) in row.iter().enumerate().take(model.dc_count) {
                if from != to && *conditions != LinkConditions::default() {
                    model.links.insert(
                        (DcId(from as u16), DcId(to as u16)),
                        LinkState { conditions: *conditions, ..Default::default() },
                    );
                }
            }
        }
        for node in &topology.nodes {
            // Datagrams go to the advertise address; a host name is registered by whoever
            // resolves it (`redt node` at its start).
            if let Some(addr) = node.advertise.socket_addr() {
                model.register_addr(addr, node.dc);
                model.register_ip(addr.ip(), node.dc);
            }
        }
        model
    }

    /// Returns the number of DCs the model knows.
    pub fn dc_count(&self) -> usize {
        self.dc_count
    }

    /// Maps the exact socket address `addr` to `dc` (replacing an earlier mapping). Exact
    /// addresses take precedence over IPs registered with [`WanModel::register_ip`].
    pub fn register_addr(&mut self, addr: SocketAddr, dc: DcId) {
        self.addrs.insert(addr, dc);
    }

    /// Maps every port of `ip` to `dc`. If `ip` was already registered for another DC it
    /// becomes ambiguous and maps to no DC (register exact addresses for such hosts).
    pub fn register_ip(&mut self, ip: IpAddr, dc: DcId) {
        let entry = self.ips.entry(ip).or_insert(Some(dc));
        if *entry != Some(dc) {
            *entry = None;
        }
    }

    /// Returns the DC of `addr`: its exact registration, else its IP's if unambiguous, else
    /// `None`.
    pub fn dc_of(&self, addr: SocketAddr) -> Option<DcId> {
        self.addrs.get(&addr).copied().or_else(|| self.ips.get(&addr.ip()).copied().flatten())
    }

    /// Returns the conditions of the directed link `from → to`, or `None` if either DC is
    /// outside the model.
    pub fn link(&self, from: DcId, to: DcId) -> Option<LinkConditions> {
        self.index(from, to).map(|k| self.links.get(&k).map_or_else(LinkConditions::default, |l| l.conditions))
    }

    /// Replaces the conditions of the directed link `from → to`; datagrams already decided
    /// keep their fate, datagrams decided later see the new conditions and a fresh link: its
    /// serializer is idle and they are not held behind datagrams decided under the old
    /// conditions (they may overtake those). So a link set back after a long delay or a slow
    /// rate carries new datagrams at once instead of after the last old one (otherwise
    /// a link set to `--rtt 1000000h` and back to 2 ms would stay cut).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownDc`] if `from` or `to` is outside the model.
    pub fn set_link(&mut self, from: DcId, to: DcId, conditions: LinkConditions) -> Result<()> {
        let k = self.checked_index(from, to)?;
        let link = self.links.entry(k).or_default();
        link.conditions = conditions;
        link.free_at = None;
        link.last_delivery = None;
        Ok(())
    }

    /// Returns whether the directed link `from → to` is partitioned (`false` for DCs outside
    /// the model).
    pub fn is_partitioned(&self, from: DcId, to: DcId) -> bool {
        self.index(from, to).and_then(|k| self.links.get(&k)).is_some_and(|l| l.partitioned)
    }

    /// Partitions (`true`: drop every datagram) or heals (`false`) the directed link
    /// `from → to`. Partitioning a DC's link to itself has no effect on traffic (same-DC
    /// traffic never crosses the WAN).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownDc`] if `from` or `to` is outside the model.
    pub fn set_partitioned(&mut self, from: DcId, to: DcId, partitioned: bool) -> Result<()> {
        let k = self.checked_index(from, to)?;
        self.links.entry(k).or_default().partitioned = partitioned;
        Ok(())
    }

    /// Partitions (`true`) or heals (`false`) every link into and out of `dc`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownDc`] if `dc` is outside the model.
    pub fn set_isolated(&mut self, dc: DcId, isolated: bool) -> Result<()> {
        self.checked_index(dc, dc)?;
        for other in 0..self.dc_count {
            let other = DcId(other as u16);
            if other != dc {
                self.set_partitioned(dc, other, isolated)?;
                self.set_partitioned(other, dc, isolated)?;
            }
        }
        Ok(())
    }

    /// Decides the fate of a datagram of `bytes` bytes sent from a socket in `from` to the
    /// address `to` at `now`. An address of no known DC is delivered at once (see
    /// [`WanModel::decide`] for the rest).
    pub fn decide_to_addr(
        &mut self,
        from: DcId,
        to: SocketAddr,
        bytes: usize,
        now: Instant,
        rng: &mut impl Rng,
    ) -> Fate {
        match self.dc_of(to) {
            Some(to) => self.decide(from, to, bytes, now, rng),
            None => Fate::Deliver { at: now },
        }
    }

    /// Decides the fate of a datagram of `bytes` bytes sent on the link `from → to` at `now`,
    /// drawing randomness from `rng` only.
    ///
    /// In order:
    /// 1. `from == to`, or either DC outside the model: deliver at `now`.
    /// 2. Partitioned link: drop ([`DropCause::Partition`]).
    /// 3. With probability `loss` (clamped to `[0, 1]`; NaN counts as 0): drop
    ///    ([`DropCause::Loss`]).
    /// 4. Rate limit (a serialization queue): `departure = max(now, link free) +
    ///    bytes * 8 / rate_bits_per_s`; the link is then free at `departure`. No limit, or a
    ///    rate of 0 bit/s (as in `tc … rate 0`), serializes in zero time.
    /// 5. `at = departure + rtt / 2 + uniform(-jitter, +jitter)`, the one-way delay never
    ///    negative. With zero jitter, `at` is raised to the link's latest delivery so far:
    ///    datagrams on one link never overtake each other while its conditions stay the same,
    ///    even when `now` goes backwards ([`WanModel::set_link`] starts the link afresh).
    ///
    /// A delivery instant beyond the range of `Instant` drops with
    /// [`DropCause::Unschedulable`]. The state of a link changes only when a datagram is
    /// delivered on it.
    pub fn decide(&mut self, from: DcId, to: DcId, bytes: usize, now: Instant, rng: &mut impl Rng) -> Fate {
        if from == to {
            return Fate::Deliver { at: now };
        }
        let Some(k) = self.index(from, to) else {
            return Fate::Deliver { at: now };
        };
        let link = self.links.entry(k).or_default();
        if link.partitioned {
            return Fate::Drop { cause: DropCause::Partition };
        }
        let c = link.conditions;
        let loss = if c.loss.is_nan() { 0.0 } else { c.loss.clamp(0.0, 1.0) };
        if loss > 0.0 && rng.gen::<f64>() < loss {
            return Fate::Drop { cause: DropCause::Loss };
        }
        let start = link.free_at.map_or(now, |free| free.max(now));
        let Some(departure) = start.checked_add(serialization_time(bytes, c.rate_bits_per_s)) else {
            return Fate::Drop { cause: DropCause::Unschedulable };
        };
        let Some(mut at) = departure.checked_add(one_way_delay(c.rtt, c.jitter, rng)) else {
            return Fate::Drop { cause: DropCause::Unschedulable };
        };
        if c.jitter.is_zero() {
            if let Some(last) = link.last_delivery {
                at = at.max(last);
            }
        }
        link.free_at = Some(departure);
        link.last_delivery = Some(link.last_delivery.map_or(at, |last| last.max(at)));
        Fate::Deliver { at }
    }

    /// Returns the key of the link `from → to`, or `None` if either DC is outside the model.
    fn index(&self, from: DcId, to: DcId) -> Option<(DcId, DcId)> {
        ((from.0 as usize) < self.dc_count && (to.0 as usize) < self.dc_count).then_some((from, to))
    }

    /// Like [`WanModel::index`], as an error naming the offending DC.
    fn checked_index(&self, from: DcId, to: DcId) -> Result<(DcId, DcId)> {
        self.index(from, to).ok_or_else(|| {
            let dc = if (from.0 as usize) < self.dc_count { to } else { from };
            Error::UnknownDc { dc, dc_count: self.dc_count }
        })
    }
}

/// Returns the time to put `bytes` bytes on a link of `rate_bits_per_s` (rounded up to whole
/// nanoseconds; zero for no limit or a rate of 0).
fn serialization_time(bytes: usize, rate_bits_per_s: Option<u64>) -> Duration {
    match rate_bits_per_s {
        None | Some(0) => Duration::ZERO,
        Some(rate) => {
            let bits = (bytes as u128).saturating_mul(8);
            let nanos = bits.saturating_mul(1_000_000_000).div_ceil(rate as u128);
            duration_from_nanos(nanos)
        }
    }
}

/// Returns `rtt / 2` plus a uniform draw in `[-jitter, +jitter]`, floored at zero.
fn one_way_delay(rtt: Duration, jitter: Duration, rng: &mut impl Rng) -> Duration {
    let half = rtt / 2;
    if jitter.is_zero() {
        return half;
    }
    // Bounded so that `2 * jitter_ns` fits a u64; ~292 years of jitter is plenty.
    let jitter_ns = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX).min(u64::MAX / 2);
    let draw = rng.gen_range(0..=2 * jitter_ns);
    duration_from_nanos((half.as_nanos() + draw as u128).saturating_sub(jitter_ns as u128))
}

/// Converts nanoseconds to a `Duration`, saturating at `Duration::MAX`.
fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = nanos / 1_000_000_000;
    match u64::try_from(secs) {
        Ok(secs) => Duration::new(secs, (nanos % 1_000_000_000) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const A: DcId = DcId(0);
    const B: DcId = DcId(1);

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn cond(rtt: Duration, jitter: Duration, loss: f64, rate: Option<u64>) -> LinkConditions {
        LinkConditions { rtt, jitter, loss, rate_bits_per_s: rate }
    }

    fn model(c: LinkConditions) -> WanModel {
        let mut m = WanModel::new(2);
        m.set_link(A, B, c).unwrap();
        m.set_link(B, A, c).unwrap();
        m
    }

    fn at(f: Fate) -> Instant {
        match f {
            Fate::Deliver { at } => at,
            Fate::Drop { cause } => panic!("expected delivery, got drop ({cause:?})"),
        }
    }

    #[test]
    fn delay_is_half_the_rtt() {
        let mut m = model(cond(ms(40), Duration::ZERO, 0.0, None));
        let mut rng = StdRng::seed_from_u64(1);
        let now = Instant::now();
        assert_eq!(at(m.decide(A, B, 1200, now, &mut rng)), now + ms(20));
        assert_eq!(at(m.decide(B, A, 1200, now + ms(5), &mut rng)), now + ms(25));
    }

    #[test]
    fn jitter_stays_within_bounds_and_is_never_negative() {
        let mut rng = StdRng::seed_from_u64(2);
        let now = Instant::now();
        let mut m = model(cond(ms(40), ms(5), 0.0, None));
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..10_000 {
            let d = at(m.decide(A, B, 100, now, &mut rng)) - now;
            assert!(d >= ms(15) && d <= ms(25), "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(lo < ms(16) && hi > ms(24), "draws cover the range: {lo:?}..{hi:?}");
        // rtt / 2 = 1 ms < jitter: the delay floors at zero instead of going negative.
        let mut m = model(cond(ms(2), ms(5), 0.0, None));
        let mut zeros = 0;
        for _ in 0..10_000 {
            let d = at(m.decide(A, B, 100, now, &mut rng)) - now;
            assert!(d <= ms(6), "{d:?}");
            zeros += usize::from(d.is_zero());
        }
        assert!(zeros > 0);
    }

    #[test]
    fn loss_ratio_matches_over_100k_draws() {
        let mut m = model(cond(ms(10), Duration::ZERO, 0.1, None));
        let mut rng = StdRng::seed_from_u64(3);
        let now = Instant::now();
        let n = 100_000;
        let dropped = (0..n)
            .filter(|_| matches!(m.decide(A, B, 100, now, &mut rng), Fate::Drop { cause: DropCause::Loss }))
            .count();
        let ratio = dropped as f64 / n as f64;
        // Standard deviation is ~0.00095; 0.005 is over 5 sigma.
        assert!((ratio - 0.1).abs() < 0.005, "ratio {ratio}");
    }

    #[test]
    fn loss_extremes_and_nan() {
        let mut rng = StdRng::seed_from_u64(4);
        let now = Instant::now();
        let mut all = model(cond(ms(10), Duration::ZERO, 1.0, None));
        let mut none = model(cond(ms(10), Duration::ZERO, f64::NAN, None));
        let mut neg = model(cond(ms(10), Duration::ZERO, -3.0, None));
        for _ in 0..1000 {
            assert_eq!(all.decide(A, B, 1, now, &mut rng), Fate::Drop { cause: DropCause::Loss });
            assert_eq!(at(none.decide(A, B, 1, now, &mut rng)), now + ms(5));
            assert_eq!(at(neg.decide(A, B, 1, now, &mut rng)), now + ms(5));
        }
    }

    #[test]
    fn rate_spaces_datagrams_by_serialization_time() {
        // 1 Mbit/s, 1250-byte datagrams: 10 ms each on the wire.
        let mut m = model(cond(ms(40), Duration::ZERO, 0.0, Some(1_000_000)));
        let mut rng = StdRng::seed_from_u64(5);
        let now = Instant::now();
        for k in 1..=5u64 {
            assert_eq!(at(m.decide(A, B, 1250, now, &mut rng)), now + ms(10 * k + 20));
        }
        // The queue drains: once the link is idle, a datagram waits only for itself.
        assert_eq!(at(m.decide(A, B, 1250, now + ms(100), &mut rng)), now + ms(130));
        // The reverse direction is a separate link with its own queue.
        assert_eq!(at(m.decide(B, A, 1250, now, &mut rng)), now + ms(30));
        // Sub-nanosecond serialization rounds up.
        let mut fast = model(cond(Duration::ZERO, Duration::ZERO, 0.0, Some(3)));
        assert_eq!(at(fast.decide(A, B, 1, now, &mut rng)), now + Duration::from_nanos(2_666_666_667));
        // A rate of 0 means unlimited, as in tc.
        let mut zero = model(cond(ms(2), Duration::ZERO, 0.0, Some(0)));
        assert_eq!(at(zero.decide(A, B, 1 << 20, now, &mut rng)), now + ms(1));
    }

    #[test]
    fn partition_drops_everything_until_healed() {
        let mut m = model(cond(ms(40), ms(3), 0.0, None));
        let mut rng = StdRng::seed_from_u64(6);
        let now = Instant::now();
        m.set_partitioned(A, B, true).unwrap();
        assert!(m.is_partitioned(A, B) && !m.is_partitioned(B, A));
        for _ in 0..1000 {
            assert_eq!(m.decide(A, B, 100, now, &mut rng), Fate::Drop { cause: DropCause::Partition });
        }
        assert!(matches!(m.decide(B, A, 100, now, &mut rng), Fate::Deliver { .. }));
        m.set_partitioned(A, B, false).unwrap();
        assert!(matches!(m.decide(A, B, 100, now, &mut rng), Fate::Deliver { .. }));
        m.set_isolated(B, true).unwrap();
        assert!(m.is_partitioned(A, B) && m.is_partitioned(B, A));
        m.set_isolated(B, false).unwrap();
        assert!(!m.is_partitioned(A, B) && !m.is_partitioned(B, A));
    }

    #[test]
    fn fifo_on_one_link_without_jitter() {
        let mut m = model(cond(ms(80), Duration::ZERO, 0.0, Some(10_000_000)));
        let mut rng = StdRng::seed_from_u64(7);
        let base = Instant::now() + ms(1000);
        let mut last = base;
        for k in 0..2000u64 {
            if k == 500 {
                m.set_link(A, B, cond(ms(2), Duration::ZERO, 0.0, None)).unwrap();
                last = base;
            }
            if k == 1000 {
                m.set_link(A, B, cond(ms(30), Duration::ZERO, 0.0, Some(1_000))).unwrap();
                last = base;
            }
            // `now` mostly advances but sometimes steps back.
            let now =
                if k % 7 == 0 { base + Duration::from_micros(k * 50) } else { base + Duration::from_micros(k * 100) };
            let t = at(m.decide(A, B, 100 + (k as usize * 37) % 1300, now, &mut rng));
            assert!(t >= last, "datagram {k} overtook one of the same setting");
            assert!(t >= now);
            last = t;
        }
    }

    /// A link set to a huge delay (or a crawling rate) and set back carries the next
    /// datagram after the new delay, not after the last datagram held under the old one.
    #[test]
    fn a_link_set_back_after_a_huge_delay_or_a_slow_rate_works_at_once() {
        let mut m = model(cond(ms(2), Duration::ZERO, 0.0, None));
        let mut rng = StdRng::seed_from_u64(9);
        let now = Instant::now();
        m.set_link(A, B, cond(Duration::from_secs(60), Duration::ZERO, 0.0, None)).unwrap();
        assert_eq!(at(m.decide(A, B, 1200, now, &mut rng)), now + Duration::from_secs(30));
        m.set_link(A, B, cond(ms(2), Duration::ZERO, 0.0, None)).unwrap();
        let later = now + ms(5);
        assert_eq!(at(m.decide(A, B, 1200, later, &mut rng)), later + ms(1));
        // A rate of 1 bit/s holds its serializer for 9,600 s per 1,200-byte datagram.
        m.set_link(A, B, cond(ms(2), Duration::ZERO, 0.0, Some(1))).unwrap();
        assert!(at(m.decide(A, B, 1200, later, &mut rng)) > later + Duration::from_secs(9000));
        m.set_link(A, B, cond(ms(2), Duration::ZERO, 0.0, None)).unwrap();
        assert_eq!(at(m.decide(A, B, 1200, later, &mut rng)), later + ms(1));
    }

    #[test]
    fn same_dc_unknown_and_out_of_range_deliver_at_once() {
        let mut m = model(cond(ms(40), ms(5), 0.5, Some(1)));
        let mut rng = StdRng::seed_from_u64(8);
        let now = Instant::now();
        assert_eq!(m.decide(A, A, 100, now, &mut rng), Fate::Deliver { at: now });
        assert_eq!(m.decide(A, DcId(9), 100, now, &mut rng), Fate::Deliver { at: now });
        assert_eq!(m.decide(DcId(9), B, 100, now, &mut rng), Fate::Deliver { at: now });
        let unknown: SocketAddr = "10.9.9.9:1".parse().unwrap();
        assert_eq!(m.decide_to_addr(A, unknown, 100, now, &mut rng), Fate::Deliver { at: now });
        assert!(matches!(m.set_link(A, DcId(2), LinkConditions::default()), Err(Error::UnknownDc { dc: DcId(2), .. })));
        assert!(m.set_partitioned(DcId(7), A, true).is_err());
        assert!(m.set_isolated(DcId(7), true).is_err());
        assert_eq!(m.link(A, DcId(2)), None);
    }

    #[test]
    fn huge_values_do_not_panic() {
        let mut rng = StdRng::seed_from_u64(9);
        let now = Instant::now();
        let mut m = model(cond(Duration::MAX, Duration::MAX, 0.0, Some(1)));
        for _ in 0..100 {
            let f = m.decide(A, B, usize::MAX, now, &mut rng);
            assert_eq!(f, Fate::Drop { cause: DropCause::Unschedulable });
        }
        let mut m = model(cond(ms(1), Duration::MAX, 0.0, None));
        for _ in 0..100 {
            let _ = m.decide(A, B, 1, now, &mut rng);
        }
        let _ = WanModel::new(usize::MAX).decide(A, B, 1, now, &mut rng);
    }

    #[test]
    fn from_topology_reads_links_and_addresses() {
        let yaml = r#"
name: t
epoch: 1
memstore: { size: 1MiB, index: 64KiB, ring: 64KiB }
dcs:
  - name: dc1
    nodes: [ { name: dc1-n1, addr: "127.0.1.1:7100" } ]
  - name: dc2
    nodes: [ { name: dc2-n1, addr: "127.0.2.1:7100" } ]
links:
  default: { rtt: 40ms }
  overrides:
    - { from: dc1, to: dc2, rtt: 80ms, jitter: 1ms, loss: 1%, rate: 10mbit, symmetric: false }
tables:
  - { name: t, id: 1, cells: [ { name: f, bytes: 8 } ] }
partitions:
  - { replicas: [dc1-n1, dc2-n1] }
"#;
        let topo = Topology::from_yaml("test", yaml).unwrap();
        let mut m = WanModel::from_topology(&topo);
        assert_eq!(m.dc_count(), 2);
        assert_eq!(m.link(A, B), Some(cond(ms(80), ms(1), 0.01, Some(10_000_000))));
        assert_eq!(m.link(B, A), Some(cond(ms(40), Duration::ZERO, 0.0, None)));
        assert_eq!(m.dc_of("127.0.1.1:7100".parse().unwrap()), Some(A));
        // Another port on a node's IP (a client on that host) maps to the node's DC.
        assert_eq!(m.dc_of("127.0.2.1:5555".parse().unwrap()), Some(B));
        assert_eq!(m.dc_of("127.0.3.1:7100".parse().unwrap()), None);
        // An IP shared by two DCs says nothing; exact addresses still do.
        m.register_ip("127.0.1.1".parse().unwrap(), B);
        assert_eq!(m.dc_of("127.0.1.1:1".parse().unwrap()), None);
        assert_eq!(m.dc_of("127.0.1.1:7100".parse().unwrap()), Some(A));
        m.register_addr("127.0.1.1:1".parse().unwrap(), B);
        assert_eq!(m.dc_of("127.0.1.1:1".parse().unwrap()), Some(B));
    }
}
