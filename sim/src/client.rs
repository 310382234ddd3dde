//! How the simulated clients retry aborted transactions: the real clients' [`RetryPolicy`]
//! (only an abort whose cause says running the call again may commit is retried, an unknown
//! outcome never is), with pauses scaled to the topology's round trip.

use rand::Rng;
use redt_proto::Topology;
use redt_protocol::retry_policy::RetryPolicy;
use std::time::Duration;

/// The shortest first pause of a simulated client: [`RetryPolicy::DEFAULT_FIRST`], 10 ms.
pub const MIN_FIRST: Duration = RetryPolicy::DEFAULT_FIRST;

/// The simulation's clients on a topology whose largest link round trip is `rtt`:
/// [`RetryPolicy::DEFAULT_RETRIES`] retries, the first pause at most one such round trip (a
/// No-Wait lock is held about that long, two when its holder aborts) and at least
/// [`MIN_FIRST`], the pauses doubling up to 8 times the first.
pub fn for_rtt(rtt: Duration) -> RetryPolicy {
    let first = rtt.max(MIN_FIRST);
    RetryPolicy { retries: RetryPolicy::DEFAULT_RETRIES, first, cap: first * 8 }
}

/// [`for_rtt`] of the largest link round trip of `topology`.
pub fn for_topology(topology: &Topology) -> RetryPolicy {
    for_rtt(topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default())
}

/// The pause before retry `retry` (1 for the first) under `policy`, in the simulator's µs:
/// uniform in `[c/2, c]` with `c` its [`RetryPolicy::ceiling`], drawn from `rng`.
pub fn delay_us(policy: &RetryPolicy, retry: u32, rng: &mut impl Rng) -> u64 {
    let c = u64::try_from(policy.ceiling(retry).as_micros()).unwrap_or(u64::MAX);
    rng.gen_range(c / 2..=c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn pauses_scale_with_the_round_trip_and_stay_within_their_bounds() {
        let r = for_rtt(ms(40));
        let ceilings: Vec<Duration> = (1..=6).map(|k| r.ceiling(k)).collect();
        assert_eq!(ceilings, [ms(40), ms(80), ms(160), ms(320), ms(320), ms(320)]);
        assert_eq!(for_rtt(ms(2)).first, ms(10), "at least RetryPolicy's first pause");
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for k in 1..12 {
            let c = r.ceiling(k).as_micros() as u64;
            let d = delay_us(&r, k, &mut rng);
            assert!(d >= c / 2 && d <= c, "{d} outside [{c}/2, {c}]");
        }
    }
}
