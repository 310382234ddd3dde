//! The slots of a node's background retries (`limits.max_background_retries`): catch-up
//! shippers and recoverers take one before their machine starts, so a node runs at most that
//! many at once; one over the cap waits for a slot and is counted while it does.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The slots of a node's background retries (`limits.max_background_retries`): a retry
/// over the cap waits for one, and is counted while it does.
#[derive(Debug)]
pub(crate) struct RetrySlots {
    slots: Arc<tokio::sync::Semaphore>,
    waiting: AtomicU64,
    waited: AtomicU64,
}

/// One retry's slot: released when dropped.
pub(crate) type RetrySlot = Option<tokio::sync::OwnedSemaphorePermit>;

impl RetrySlots {
    /// `max` slots (at least one).
    pub(crate) fn new(max: u64) -> Arc<Self> {
        let max = usize::try_from(max).unwrap_or(usize::MAX).clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        Arc::new(RetrySlots {
            slots: Arc::new(tokio::sync::Semaphore::new(max)),
            waiting: AtomicU64::new(0),
            waited: AtomicU64::new(0),
        })
    }

    /// A slot, waiting for one if all are taken (the semaphore is never closed, so this
    /// always ends with a slot).
    pub(crate) async fn acquire(&self) -> RetrySlot {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Some(slot);
        }
        self.waited.fetch_add(1, Relaxed);
        self.waiting.fetch_add(1, Relaxed);
        // Counted down even if the task is dropped while it waits (a runtime shutting down).
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Relaxed);
            }
        }
        let _waiting = Waiting(&self.waiting);
        self.slots.clone().acquire_owned().await.ok()
    }

    /// Retries waiting for a slot now.
    pub(crate) fn waiting(&self) -> u64 {
        self.waiting.load(Relaxed)
    }

    /// Retries that had to wait for a slot, since the node started.
    pub(crate) fn waited(&self) -> u64 {
        self.waited.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use tokio::task::JoinSet;

    /// No more than `limits.max_background_retries` retries run at once, and one
    /// over the cap waits for a slot rather than being dropped (every retry runs).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retries_over_the_cap_wait_for_a_slot_and_all_run() {
        let slots = RetrySlots::new(2);
        let running = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let mut tasks = JoinSet::new();
        for _ in 0..8 {
            let (slots, running, most, mut released) = (slots.clone(), running.clone(), most.clone(), released.clone());
            tasks.spawn(async move {
                let _slot = slots.acquire().await;
                let now = running.fetch_add(1, Relaxed) + 1;
                most.fetch_max(now, Relaxed);
                let _ = released.wait_for(|r| *r).await;
                running.fetch_sub(1, Relaxed);
            });
        }
        // Two hold their slots until released: the six others wait (however slowly they start).
        let t0 = Instant::now();
        while slots.waiting() < 6 && t0.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(slots.waiting(), 6, "retries over the cap wait");
        assert_eq!(running.load(Relaxed), 2);
        release.send(true).expect("tasks listen");
        let mut done = 0;
        while let Some(r) = tasks.join_next().await {
            r.expect("a retry runs to its end");
            done += 1;
        }
        assert_eq!(done, 8, "none dropped");
        assert!(most.load(Relaxed) <= 2, "{} ran at once", most.load(Relaxed));
        assert_eq!(slots.waiting(), 0);
        assert_eq!(slots.waited(), 6);
    }
}
