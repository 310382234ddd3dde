//! A request a machine sees through until it is answered: a baseline's decision to a primary
//! or backup, a replication to a secondary, a recoverer's decision to a DC. Retried after a
//! failed attempt (after a pause the caller chooses), given up (and logged) once `give_up` has
//! passed since the first send.

use crate::cost::Cost;
use crate::message::Request;
use redt_proto::{NodeId, TxnId};
use std::time::{Duration, Instant};

/// A back-off pause before retry number `retries` (0 for the first): `base * 2^retries`,
/// capped at `max`, plus up to half of it again as jitter drawn from `salt` (a transaction
/// id) and the retry count — deterministic, so a simulation replays it, and different
/// transactions spread out. Whole microseconds (drivers keep time in µs).
pub(crate) fn backoff(base: Duration, max: Duration, retries: u32, salt: u64) -> Duration {
    let pause = base.saturating_mul(1 << retries.min(16)).min(max);
    let mix = (salt ^ u64::from(retries).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let jitter = pause.mul_f64((mix >> 11) as f64 / (1u64 << 53) as f64 / 2.0);
    Duration::from_micros((pause + jitter).as_micros() as u64)
}

/// One request being delivered.
pub(crate) struct Delivery {
    /// The receiver.
    pub(crate) to: NodeId,
    /// The request (resent as is).
    pub(crate) request: Request,
    first_sent: Instant,
    retry_at: Option<Instant>,
    /// Its cost once answered (the coordinator counts it; a primary does not).
    pub(crate) cost: Option<Cost>,
    /// Answered or given up.
    pub(crate) done: bool,
    /// Failed attempts so far (a caller's back-off grows with it).
    pub(crate) failures: u32,
}

impl Delivery {
    /// A delivery of `request` to `to`, first sent at `now`.
    pub(crate) fn new(to: NodeId, request: Request, now: Instant) -> Delivery {
        Delivery { to, request, first_sent: now, retry_at: None, cost: None, done: false, failures: 0 }
    }

    /// An attempt failed with `error` at `now`: retry `retry` later, or give up once more than
    /// `give_up` has passed since the first send. A delivery already done is left alone.
    pub(crate) fn failed(
        &mut self,
        txn: TxnId,
        peer: &str,
        error: &str,
        now: Instant,
        retry: Duration,
        give_up: Duration,
    ) {
        if self.done {
            return;
        }
        self.failures = self.failures.saturating_add(1);
        if now.duration_since(self.first_sent) > give_up {
            tracing::error!(%txn, %peer, "undelivered, giving up: {error}");
            self.done = true;
        } else {
            tracing::debug!(%txn, %peer, "retry: {error}");
            self.retry_at = Some(now + retry);
        }
    }
}

/// The deliveries of `list` whose retry is due at `now`, as `(index, to, request)`; their retry
/// time is cleared (the caller sends them again).
pub(crate) fn due(list: &mut [Delivery], now: Instant) -> Vec<(usize, NodeId, Request)> {
    let mut out = Vec::new();
    for (i, d) in list.iter_mut().enumerate() {
        if !d.done && d.retry_at.is_some_and(|t| now >= t) {
            d.retry_at = None;
            out.push((i, d.to, d.request.clone()));
        }
    }
    out
}

/// The earliest retry time of the deliveries of `list` not done.
pub(crate) fn next_retry(list: &[Delivery]) -> Option<Instant> {
    list.iter().filter(|d| !d.done).filter_map(|d| d.retry_at).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_doubles_up_to_its_cap_with_at_most_half_again_as_jitter() {
        let (base, max) = (Duration::from_millis(200), Duration::from_secs(5));
        for salt in [1u64, 77, u64::MAX] {
            for retries in 0..40 {
                let pause = base.saturating_mul(1 << retries.min(16)).min(max);
                let b = backoff(base, max, retries, salt);
                assert!(b >= pause && b <= pause + pause / 2, "retry {retries}: {b:?} for {pause:?}");
            }
        }
        assert_eq!(backoff(base, max, 3, 9), backoff(base, max, 3, 9), "deterministic");
        let spread: std::collections::HashSet<Duration> = (0..50).map(|s| backoff(base, max, 2, s)).collect();
        assert!(spread.len() > 40, "transactions spread out: {} distinct pauses", spread.len());
    }
}
