//! The transactions whose large phase 1 runs on the executor's side thread
//! (`crate::executor_thread`), and the requests about them that wait meanwhile.
//!
//! The core checks such a phase 1 against what it remembers, the side thread runs it, and
//! the core keeps its vote: three jobs. A decision, a record, a PREPARE or a repeated phase 1
//! of the same transaction reaching the core between the first and the last would find
//! neither a vote nor a fence, and act as if the phase 1 had never come. So each waits here
//! until the vote is kept, then is queued; a request about any other transaction is queued at
//! once. Whether to wait and the queueing happen under one lock, so no request slips in
//! between a phase 1's registration and its first job.

use redt_proto::TxnId;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::watch;

/// The large phase 1s in progress at a node, by transaction.
#[derive(Default)]
pub(crate) struct LargePhase1s {
    running: Mutex<HashMap<TxnId, watch::Receiver<()>>>,
}

/// A large phase 1 in progress: dropping it lets the requests about its transaction go on.
pub(crate) struct Running<'a> {
    txn: TxnId,
    set: &'a LargePhase1s,
    _done: watch::Sender<()>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.set.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.txn);
        // The sender goes with `self`: every waiter's `changed` returns.
    }
}

impl LargePhase1s {
    /// Waits until `txn` has no large phase 1 in progress, then calls `queue` (which queues
    /// the request's job) and returns what it returns. `TxnId(0)` (a request about a ring,
    /// not a transaction) never waits.
    pub(crate) async fn when_free<R>(&self, txn: TxnId, queue: impl FnOnce() -> R) -> R {
        loop {
            let mut wait = {
                let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                match running.get(&txn) {
                    Some(rx) if txn != TxnId(0) => rx.clone(),
                    _ => return queue(),
                }
            };
            // Returns once the phase 1's `Running` is dropped (its sender with it).
            let _ = wait.changed().await;
        }
    }

    /// Waits until `txn` has no large phase 1 in progress (a repeated one waits for the
    /// first), registers one, and calls `queue` (which queues its first job) under the same
    /// lock. Returns what `queue` returns and the registration; drop the latter once the vote
    /// is kept.
    pub(crate) async fn start<R>(&self, txn: TxnId, queue: impl FnOnce() -> R) -> (R, Running<'_>) {
        loop {
            let mut wait = {
                let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                match running.get(&txn) {
                    Some(rx) => rx.clone(),
                    None => {
                        let (done, rx) = watch::channel(());
                        running.insert(txn, rx);
                        return (queue(), Running { txn, set: self, _done: done });
                    }
                }
            };
            let _ = wait.changed().await;
        }
    }

    /// Transactions with a large phase 1 in progress now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_request_about_a_running_phase_1_waits_for_its_end_and_others_do_not() {
        let set = Arc::new(LargePhase1s::default());
        let (first, running) = set.start(TxnId(7), || 1).await;
        assert_eq!((first, set.len()), (1, 1));
        // Another transaction, and a ring's request, go at once.
        assert_eq!(set.when_free(TxnId(8), || 2).await, 2);
        assert_eq!(set.when_free(TxnId(0), || 3).await, 3);
        // The same transaction waits.
        let queued = Arc::new(AtomicUsize::new(0));
        let (s, q) = (set.clone(), queued.clone());
        let decision = tokio::spawn(async move { s.when_free(TxnId(7), || q.fetch_add(1, Ordering::SeqCst)).await });
        let (s, q) = (set.clone(), queued.clone());
        let repeated = tokio::spawn(async move { s.start(TxnId(7), || q.fetch_add(1, Ordering::SeqCst)).await.0 });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(queued.load(Ordering::SeqCst), 0, "queued while the phase 1 was still running");
        drop(running);
        decision.await.expect("the waiter ends");
        repeated.await.expect("the repeated phase 1 starts");
        assert_eq!(queued.load(Ordering::SeqCst), 2);
        assert_eq!(set.len(), 0, "the repeated phase 1's registration was dropped with its task");
    }
}
