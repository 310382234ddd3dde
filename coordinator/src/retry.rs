//! Clients retrying aborted transactions: a bounded [`RetryPolicy`] (exponential pauses with
//! jitter) and the one loop every client runs it with ([`retrying`]), whatever submits the
//! attempts (a [`crate::Client`] over QUIC, a [`crate::Node`] in-process).
//!
//! Only an abort is retried, and only one whose cause says running the call again may commit
//! ([`AbortCause::is_retryable`]: a lock conflict, a timeout, … but not the procedure's own
//! abort or a missing record): an abort certainly did not commit, so a new attempt cannot
//! apply the call twice. An unknown outcome is never submitted again (the transaction may have
//! committed): the attempt's own submission already asked what became of it where it could
//! ([`crate::Client::submit_asking`]), and the loop returns it as it is.

use crate::client::SubmitReport;
use rand::Rng;
use redt_protocol::machine::{TxnAnswer, TxnStatus};
use redt_protocol::stats::AbortCause;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// What one attempt of a transaction gives: its answer, and perhaps more
/// ([`SubmitReport`]: the coordinator that ran it, what an outcome query found).
pub trait Attempt {
    /// The attempt's answer.
    fn answer(&self) -> &TxnAnswer;
}

impl Attempt for TxnAnswer {
    fn answer(&self) -> &TxnAnswer {
        self
    }
}

impl Attempt for SubmitReport {
    fn answer(&self) -> &TxnAnswer {
        &self.answer
    }
}

/// What a transaction run under a [`RetryPolicy`] came to ([`retrying`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retried<A = TxnAnswer> {
    /// The last attempt: its answer is the transaction's (a commit, an unknown outcome, or an
    /// abort that was not retried: not retryable, out of retries, or stopped).
    pub last: A,
    /// Attempts made (at least 1).
    pub attempts: u32,
    /// The cause of every aborted attempt, in order, the last attempt's too when it aborted
    /// (`None`: an abort that names no cause, which is not retried).
    pub aborts: Vec<Option<AbortCause>>,
}

impl<A: Attempt> Retried<A> {
    /// The transaction's answer: the last attempt's.
    pub fn answer(&self) -> &TxnAnswer {
        self.last.answer()
    }

    /// Attempts after the first.
    pub fn retries(&self) -> u32 {
        self.attempts.saturating_sub(1)
    }

    /// Whether the transaction was given up: its last attempt aborted too.
    pub fn failed(&self) -> bool {
        matches!(self.answer().status, TxnStatus::Aborted(_))
    }
}

/// Runs a transaction by `once` (one attempt: a submission, with whatever the submitter does
/// about a lost answer) under `policy`: after an abort whose cause is retryable, while retries
/// are left and `stop` (if given) is not set, pauses for [`RetryPolicy::delay`] (drawn from
/// `rng`) and calls `once` again. A commit, an unknown outcome (never resubmitted: it may have
/// committed) or any other abort ends it at once. Returns the last attempt, the attempts made
/// and every aborted attempt's cause.
pub async fn retrying<A, F, Fut, R>(
    policy: &RetryPolicy,
    rng: &mut R,
    stop: Option<&AtomicBool>,
    mut once: F,
) -> Retried<A>
where
    A: Attempt,
    F: FnMut() -> Fut,
    Fut: Future<Output = A>,
    R: Rng,
{
    let mut aborts = Vec::new();
    let mut attempts = 0;
    loop {
        let last = once().await;
        attempts += 1;
        let answer = last.answer();
        if !matches!(answer.status, TxnStatus::Aborted(_)) {
            return Retried { last, attempts, aborts };
        }
        aborts.push(answer.cause);
        let stopped = stop.is_some_and(|s| s.load(Ordering::Relaxed));
        if stopped || !policy.retries_after(attempts, answer.cause) {
            return Retried { last, attempts, aborts };
        }
        tokio::time::sleep(policy.delay(attempts, rng)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use redt_proto::TxnId;
    use std::cell::RefCell;

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

    fn aborted(cause: Option<AbortCause>) -> TxnAnswer {
        TxnAnswer { txn: TxnId(1), status: TxnStatus::Aborted("x".into()), cause, reads: vec![] }
    }

    /// `retries` retries with pauses of at most 2 ms.
    fn quick(retries: u32) -> RetryPolicy {
        RetryPolicy { retries, first: ms(1), cap: ms(2) }
    }

    /// Runs `answers` (one per attempt, the last repeated) through [`retrying`] under `p`.
    fn run(p: RetryPolicy, answers: &[TxnAnswer], stop: Option<&AtomicBool>) -> Retried {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let next = RefCell::new(0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        rt.block_on(retrying(&p, &mut rng, stop, || {
            let i = *next.borrow();
            *next.borrow_mut() += 1;
            let a = answers[i.min(answers.len() - 1)].clone();
            async move { a }
        }))
    }

    #[test]
    fn the_loop_retries_retryable_aborts_until_a_commit_or_the_bound() {
        let p = quick(3);
        let lock = aborted(Some(AbortCause::LockConflict));
        let ok = TxnAnswer { txn: TxnId(2), status: TxnStatus::Committed, cause: None, reads: vec![] };
        let r = run(p, &[lock.clone(), lock.clone(), ok.clone()], None);
        assert_eq!((r.attempts, r.retries(), r.failed()), (3, 2, false));
        assert_eq!(r.aborts, [Some(AbortCause::LockConflict); 2]);
        assert_eq!(r.answer(), &ok);
        // Out of retries: 4 attempts, all aborted.
        let r = run(p, std::slice::from_ref(&lock), None);
        assert_eq!((r.attempts, r.failed()), (4, true));
        assert_eq!(r.aborts.len(), 4, "the last abort's cause too");
        // No policy: once.
        let r = run(RetryPolicy::none(), &[lock.clone(), ok.clone()], None);
        assert_eq!((r.attempts, r.failed()), (1, true));
        // Stopped: no further attempt.
        let r = run(p, &[lock.clone(), ok], Some(&AtomicBool::new(true)));
        assert_eq!(r.attempts, 1);
    }

    #[test]
    fn the_loop_never_retries_an_unknown_outcome_or_a_final_abort() {
        let p = quick(5);
        let unknown = TxnAnswer::unknown(TxnId(3), "the answer was lost");
        let r = run(p, &[aborted(Some(AbortCause::Timeout)), unknown.clone()], None);
        assert_eq!((r.attempts, r.answer()), (2, &unknown), "an unknown outcome ends it");
        for cause in [Some(AbortCause::User), Some(AbortCause::NotFound), Some(AbortCause::HeapFull), None] {
            let r = run(p, &[aborted(cause), aborted(Some(AbortCause::LockConflict))], None);
            assert_eq!((r.attempts, r.aborts.clone()), (1, vec![cause]), "{cause:?} is not retried");
        }
    }
}
