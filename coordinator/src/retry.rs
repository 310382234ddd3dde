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
pub use redt_protocol::retry_policy::RetryPolicy;
use redt_protocol::stats::AbortCause;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

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
    use rand::SeedableRng;
    use redt_proto::TxnId;
    use std::cell::RefCell;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
