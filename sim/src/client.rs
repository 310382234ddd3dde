//! How the simulated clients retry aborted transactions.

use rand::Rng;
use redt_proto::Topology;
use redt_protocol::AbortCause;
use std::time::Duration;

/// How a simulated client retries a transaction that aborted: the semantics of the real
/// clients' `redt_coordinator::RetryPolicy` (this crate runs the sans-IO core and does not
/// depend on the node runtime). Only an abort whose cause says running the call again may
/// commit is retried ([`AbortCause::is_retryable`]), at most `retries` times; an unknown
/// outcome never is (the transaction may have committed). Before retry `k` (1, 2, …) the
/// client pauses for a time drawn uniformly from `[c/2, c]`, `c = min(first · 2^(k−1), cap)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientRetries {
    /// Retries after the first attempt: a transaction is attempted at most `retries + 1`
    /// times. 0: never retried.
    pub retries: u32,
    /// The longest pause before the first retry.
    pub first: Duration,
    /// The longest pause before any retry.
    pub cap: Duration,
}

impl ClientRetries {
    /// Retries of a simulated client (`RetryPolicy::DEFAULT_RETRIES`, 10).
    pub const RETRIES: u32 = 10;

    /// No retry: every transaction is attempted once.
    pub const fn none() -> ClientRetries {
        ClientRetries { retries: 0, first: Duration::ZERO, cap: Duration::ZERO }
    }

    /// The shortest first pause: `RetryPolicy::DEFAULT_FIRST`, 10 ms.
    pub const MIN_FIRST: Duration = Duration::from_millis(10);

    /// The simulation's clients on a topology whose largest link round trip is `rtt`:
    /// [`ClientRetries::RETRIES`] retries, the first pause at most one such round trip (a
    /// No-Wait lock is held about that long, two when its holder aborts) and at least
    /// [`ClientRetries::MIN_FIRST`], the pauses doubling up to 8 times the first.
    pub fn for_rtt(rtt: Duration) -> ClientRetries {
        let first = rtt.max(ClientRetries::MIN_FIRST);
        ClientRetries { retries: ClientRetries::RETRIES, first, cap: first * 8 }
    }

    /// [`ClientRetries::for_rtt`] of the largest link round trip of `topology`.
    pub fn for_topology(topology: &Topology) -> ClientRetries {
        ClientRetries::for_rtt(topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default())
    }

    /// The longest pause before retry `retry` (1 for the first; 0 is taken as 1):
    /// `first · 2^(retry−1)`, at most `cap`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.max(1) - 1;
        let grown = if doublings >= 32 { None } else { self.first.checked_mul(1 << doublings) };
        grown.unwrap_or(self.cap).min(self.cap)
    }

    /// The pause before retry `retry` (1 for the first), µs: uniform in `[c/2, c]` with `c` its
    /// [`ClientRetries::ceiling`], drawn from `rng`.
    pub fn delay_us(&self, retry: u32, rng: &mut impl Rng) -> u64 {
        let c = u64::try_from(self.ceiling(retry).as_micros()).unwrap_or(u64::MAX);
        rng.gen_range(c / 2..=c)
    }

    /// Whether a transaction whose `attempts`-th attempt (1 for the first) aborted for `cause`
    /// is attempted again: the cause is known and retryable, and fewer than `retries` retries
    /// were made.
    pub fn retries_after(&self, attempts: u32, cause: Option<AbortCause>) -> bool {
        attempts <= self.retries && cause.is_some_and(AbortCause::is_retryable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn pauses_double_up_to_the_cap_and_stay_within_their_bounds() {
        let r = ClientRetries::for_rtt(ms(40));
        let ceilings: Vec<Duration> = (1..=6).map(|k| r.ceiling(k)).collect();
        assert_eq!(ceilings, [ms(40), ms(80), ms(160), ms(320), ms(320), ms(320)]);
        assert_eq!(r.ceiling(0), ms(40));
        assert_eq!(r.ceiling(u32::MAX), ms(320));
        assert_eq!(ClientRetries::for_rtt(ms(2)).first, ms(10), "at least RetryPolicy's first pause");
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for k in 1..12 {
            let c = r.ceiling(k).as_micros() as u64;
            let d = r.delay_us(k, &mut rng);
            assert!(d >= c / 2 && d <= c, "{d} outside [{c}/2, {c}]");
        }
        assert_eq!(ClientRetries::none().delay_us(1, &mut rng), 0);
    }

    #[test]
    fn only_retryable_aborts_are_retried_while_retries_are_left() {
        let r = ClientRetries { retries: 2, ..ClientRetries::for_rtt(ms(2)) };
        assert!(r.retries_after(1, Some(AbortCause::LockConflict)));
        assert!(r.retries_after(2, Some(AbortCause::Timeout)));
        assert!(!r.retries_after(3, Some(AbortCause::LockConflict)), "two retries made");
        assert!(!r.retries_after(1, Some(AbortCause::User)));
        assert!(!r.retries_after(1, None), "an abort without a cause is not retried");
        assert!(!ClientRetries::none().retries_after(1, Some(AbortCause::LockConflict)));
    }
}
