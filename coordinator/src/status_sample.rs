//! The part of a node's status that only its executor thread can read — the undecided
//! entries of its ring, its replay backlog, the commit votes and replica redo its executor
//! side forgot — sampled at most once per [`SAMPLE_MAX_AGE`] and shared by every status
//! request and metrics scrape in between. The
//! executor thread is the one every transaction of the node waits for, so a flood of status
//! requests or scrapes costs it at most one round per second.
//!
//! Sampled on demand, never in the background (an idle node does no extra work): the first
//! request that finds the sample [`SAMPLE_MAX_AGE`] old or older takes a fresh one, and the
//! requests arriving while it runs wait for it and share it (single flight). A status that
//! counts locks does its own round, and its sample replaces the shared one.

use crate::error::Result;
use redt_dc_executor::RedoEntry;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The oldest a shared sample may be when a status request or a metrics scrape reads it: 1 s.
/// A request finding one this old or older waits for a fresh one.
pub const SAMPLE_MAX_AGE: Duration = Duration::from_secs(1);

/// What one executor round read for a node's status.
#[derive(Debug)]
pub(crate) struct RingSample {
    /// When the round was asked for (its figures were read at or after it).
    pub(crate) taken: Instant,
    /// The executor thread's wall clock when it ran the round, ms since
    /// `redt_dc_executor::ORIGIN_UNIX_MS`.
    pub(crate) now_ms: u64,
    /// `(ring index, entry)` of every undecided (`Intent` or `Logged`) entry of the node's
    /// ring, in ring order.
    pub(crate) unfinished: Vec<(u64, RedoEntry)>,
    /// Entries of the ring still owing a catch-up.
    pub(crate) owed: u64,
    /// Ring slots between the head and the tail.
    pub(crate) backlog: u64,
    /// The record heap's use.
    pub(crate) heap: redt_dc_executor::RecordHeapUsage,
    /// Commit votes and replica redo the executor side forgot over its limits, since the node
    /// started (`ExecutorCore::forgotten`).
    pub(crate) forgotten: (u64, u64),
    /// Deleted records freed since the node started, and waiting for their grace now
    /// (`ExecutorCore::deleted_records`).
    pub(crate) deleted: (u64, u64),
}

/// A node's shared [`RingSample`] and how many rounds it took (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct SampleCache {
    /// The newest sample, if any.
    latest: Mutex<Option<Arc<RingSample>>>,
    /// Held by the one request taking a fresh sample; the others wait here for it.
    flight: tokio::sync::Mutex<()>,
    /// Executor rounds taken for a status since the node started.
    rounds: AtomicU64,
}

impl SampleCache {
    /// The newest sample if it is younger than [`SAMPLE_MAX_AGE`].
    fn fresh(&self) -> Option<Arc<RingSample>> {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        latest.as_ref().filter(|s| s.taken.elapsed() < SAMPLE_MAX_AGE).cloned()
    }

    /// A sample younger than [`SAMPLE_MAX_AGE`]: the shared one, else a fresh one taken by
    /// `take` (one executor round, counted) and shared from then on. While one caller takes
    /// it, the others wait and share it. If that caller is cancelled, the next waiter takes
    /// one.
    ///
    /// # Errors
    /// `take`'s, when a fresh sample was needed and could not be taken (nothing is shared
    /// then; the next call tries again).
    pub(crate) async fn get<F, Fut>(&self, take: F) -> Result<Arc<RingSample>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<RingSample>>,
    {
        if let Some(s) = self.fresh() {
            return Ok(s);
        }
        let _flight = self.flight.lock().await;
        if let Some(s) = self.fresh() {
            return Ok(s);
        }
        self.rounds.fetch_add(1, Relaxed);
        let sample = Arc::new(take().await?);
        self.share(sample.clone());
        Ok(sample)
    }

    /// Counts one executor round taken outside [`SampleCache::get`] (a status that counts
    /// locks).
    pub(crate) fn counted_round(&self) {
        self.rounds.fetch_add(1, Relaxed);
    }

    /// Shares `sample` unless a newer one is shared already (so the figures read through the
    /// cache never go back in time).
    pub(crate) fn share(&self, sample: Arc<RingSample>) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        if latest.as_ref().is_none_or(|l| l.taken <= sample.taken) {
            *latest = Some(sample);
        }
    }

    /// Executor rounds taken for a status since the node started.
    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn sample(taken: Instant, backlog: u64) -> RingSample {
        RingSample {
            taken,
            now_ms: 0,
            unfinished: Vec::new(),
            owed: 0,
            backlog,
            heap: Default::default(),
            forgotten: (0, 0),
            deleted: (0, 0),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_readers_share_one_round_until_it_is_a_second_old() {
        let cache = Arc::new(SampleCache::default());
        let takes = Arc::new(AtomicUsize::new(0));
        let read = |cache: Arc<SampleCache>, takes: Arc<AtomicUsize>| async move {
            cache
                .get(|| async {
                    let n = takes.fetch_add(1, Relaxed) as u64;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(sample(Instant::now(), n))
                })
                .await
                .expect("taken")
                .backlog
        };
        let t0 = Instant::now();
        let readers: Vec<_> = (0..32).map(|_| tokio::spawn(read(cache.clone(), takes.clone()))).collect();
        for r in readers {
            assert_eq!(r.await.unwrap(), 0, "every reader shares the first round");
        }
        assert_eq!((takes.load(Relaxed), cache.rounds()), (1, 1));
        if t0.elapsed() < Duration::from_millis(900) {
            assert_eq!(read(cache.clone(), takes.clone()).await, 0, "still fresh");
            assert_eq!(cache.rounds(), 1);
        }
        tokio::time::sleep(SAMPLE_MAX_AGE).await;
        assert_eq!(read(cache.clone(), takes.clone()).await, 1, "a second later, a new round");
        assert_eq!(cache.rounds(), 2);
    }

    #[tokio::test]
    async fn a_failed_round_is_not_shared_and_an_older_sample_never_replaces_a_newer() {
        let cache = SampleCache::default();
        let failed = cache.get(|| async { Err(crate::Error::Io(std::io::Error::other("stopped"))) }).await;
        assert!(failed.is_err());
        assert!(cache.fresh().is_none());
        let now = Instant::now();
        cache.share(Arc::new(sample(now, 7)));
        cache.share(Arc::new(sample(now - Duration::from_millis(10), 3)));
        assert_eq!(cache.fresh().map(|s| s.backlog), Some(7));
        let got = cache.get(|| async { unreachable!("the shared sample is fresh") }).await.unwrap();
        assert_eq!(got.backlog, 7);
    }
}
