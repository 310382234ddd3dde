//! How a client retries a transaction that aborted: a bounded policy of exponential pauses
//! with jitter, shared by the real clients (`redt_coordinator::retrying`) and the simulated
//! ones (`redt-sim`).

use crate::stats::AbortCause;
use rand::Rng;
use std::time::Duration;

/// How a client retries a transaction that aborted for a retryable cause: at most `retries`
/// times, pausing before retry `k` (1, 2, …) for a time drawn uniformly from
/// `[c/2, c]` ("equal jitter"), where `c = min(first · 2^(k−1), cap)` ([`RetryPolicy::ceiling`]).
/// The pauses spread the retries of transactions that conflicted with each other, so they do
/// not collide again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt: a transaction is attempted at most `retries + 1`
    /// times. 0: never retried.
    pub retries: u32,
    /// The longest pause before the first retry (the pause before retry `k` is at most
    /// `first · 2^(k−1)`).
    pub first: Duration,
    /// The longest pause before any retry.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// [`RetryPolicy::DEFAULT_RETRIES`] retries, pauses from 5–10 ms up to 80–160 ms.
    fn default() -> Self {
        RetryPolicy::with_retries(RetryPolicy::DEFAULT_RETRIES)
    }
}

impl RetryPolicy {
    /// The default number of retries (10): with the default pauses, about 1.3 s of pauses at
    /// most before a transaction is given up.
    pub const DEFAULT_RETRIES: u32 = 10;
    /// The default [`RetryPolicy::first`], 10 ms, and [`RetryPolicy::cap`], 160 ms: the TPC-C
    /// driver's, measured there (a No-Wait lock is held for about one inter-DC round trip, two
    /// when its holder aborts; 20/320 ms and 80/640 ms lost 12% and 23% of tpmC on 4
    /// warehouses × 4 terminals, 2/40 ms 12%).
    pub const DEFAULT_FIRST: Duration = Duration::from_millis(10);
    /// See [`RetryPolicy::DEFAULT_FIRST`].
    pub const DEFAULT_CAP: Duration = Duration::from_millis(160);

    /// No retry: every transaction is attempted once (a client's behaviour without a policy).
    pub const fn none() -> RetryPolicy {
        RetryPolicy::with_retries(0)
    }

    /// `retries` retries with the default pauses ([`RetryPolicy::DEFAULT_FIRST`],
    /// [`RetryPolicy::DEFAULT_CAP`]).
    pub const fn with_retries(retries: u32) -> RetryPolicy {
        RetryPolicy { retries, first: RetryPolicy::DEFAULT_FIRST, cap: RetryPolicy::DEFAULT_CAP }
    }

    /// The longest pause before retry `retry` (1 for the first; 0 is taken as 1):
    /// `first · 2^(retry−1)`, at most [`RetryPolicy::cap`]. Never decreasing in `retry`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.max(1) - 1;
        let grown = if doublings >= 32 { None } else { self.first.checked_mul(1 << doublings) };
        grown.unwrap_or(self.cap).min(self.cap)
    }

    /// The pause before retry `retry` (1 for the first): uniform in `[c/2, c]` with `c` its
    /// [`RetryPolicy::ceiling`], drawn from `rng`.
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        let c = u64::try_from(self.ceiling(retry).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.gen_range(c / 2..=c))
    }

    /// Whether a transaction whose `attempts`-th attempt (1 for the first) aborted for `cause`
    /// is attempted again: the cause is known and retryable ([`AbortCause::is_retryable`]),
    /// and fewer than [`RetryPolicy::retries`] retries were made.
    pub fn retries_after(&self, attempts: u32, cause: Option<AbortCause>) -> bool {
        attempts <= self.retries && cause.is_some_and(AbortCause::is_retryable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_default_is_the_tpcc_driver_s_pauses_with_ten_retries() {
        let p = RetryPolicy::default();
        assert_eq!(p.retries, 10);
        let ceilings: Vec<Duration> = (1..=7).map(|k| p.ceiling(k)).collect();
        assert_eq!(ceilings, [ms(10), ms(20), ms(40), ms(80), ms(160), ms(160), ms(160)]);
        assert_eq!(p.ceiling(0), ms(10), "retry 0 is taken as the first");
        assert_eq!(p.ceiling(u32::MAX), ms(160), "no overflow");
        assert_eq!(RetryPolicy::none().retries, 0);
    }

    #[test]
    fn a_first_pause_above_the_cap_is_capped() {
        let p = RetryPolicy { retries: 3, first: ms(500), cap: ms(100) };
        assert!((1..10).all(|k| p.ceiling(k) == ms(100)));
        let zero = RetryPolicy { retries: 3, first: Duration::ZERO, cap: ms(100) };
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        assert_eq!(zero.delay(4, &mut rng), Duration::ZERO);
    }

    #[test]
    fn only_retryable_causes_are_retried_and_only_while_retries_are_left() {
        let p = RetryPolicy::with_retries(2);
        assert!(p.retries_after(1, Some(AbortCause::LockConflict)));
        assert!(p.retries_after(2, Some(AbortCause::Timeout)));
        assert!(!p.retries_after(3, Some(AbortCause::LockConflict)), "two retries made: 3 attempts");
        assert!(!p.retries_after(1, Some(AbortCause::User)));
        assert!(!p.retries_after(1, Some(AbortCause::NotFound)));
        assert!(!p.retries_after(1, None), "an abort without a cause is not retried");
        assert!(!RetryPolicy::none().retries_after(1, Some(AbortCause::LockConflict)));
    }

    proptest! {
        /// Every pause is within [ceiling/2, ceiling], never above the cap; the ceilings never
        /// decrease and double until the cap.
        #[test]
        fn pauses_stay_within_their_bounds(
            first_us in 0u64..1_000_000,
            cap_us in 0u64..10_000_000,
            seed in any::<u64>(),
            retry in 0u32..100,
        ) {
            let p = RetryPolicy { retries: 5, first: Duration::from_micros(first_us), cap: Duration::from_micros(cap_us) };
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let c = p.ceiling(retry);
            prop_assert!(c <= p.cap);
            prop_assert!(p.ceiling(retry + 1) >= c, "monotone");
            prop_assert!(p.ceiling(retry + 1) <= (c * 2).max(p.ceiling(1)), "at most doubling");
            if (1..=20).contains(&retry) && c < p.cap {
                prop_assert_eq!(c, p.first * (1 << (retry - 1)));
            }
            for _ in 0..20 {
                let d = p.delay(retry, &mut rng);
                prop_assert!(d <= c && d >= c / 2, "{:?} outside [{:?}/2, {:?}]", d, c, c);
            }
        }
    }
}
