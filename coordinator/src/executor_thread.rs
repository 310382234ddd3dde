//! The driver of a node's executor side: one dedicated OS thread owns the node's
//! [`ExecutorCore`] and runs every request on it, so the blocking verbs (spinning on
//! `/dev/shm`, TCP round trips, RDMA completion polling) never run on a tokio worker thread
//! and the core needs no lock. Jobs wait in a [`FairQueue`]: short ones before bulk ones,
//! bulk ones in turns by share (`redt_protocol::executor_queue`).

use redt_dc_executor::{Clock, SystemClock};
use redt_protocol::executor_core::ExecutorCore;
use redt_protocol::executor_queue::{FairQueue, Lane, Next};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce(&mut ExecutorCore, u64) + Send>;

/// The queue the thread takes its jobs from, and whether it may still take new ones.
struct Queue {
    jobs: FairQueue<Job>,
    open: bool,
}

/// What the executor thread has done, for status and metrics.
#[derive(Debug, Default)]
pub struct ExecutorLoad {
    short_jobs: AtomicU64,
    bulk_jobs: AtomicU64,
    busy_us: AtomicU64,
    longest_job_us: AtomicU64,
    longest_short_wait_us: AtomicU64,
}

/// A snapshot of `ExecutorLoad`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutorLoadSample {
    /// Jobs run in the short lane since start.
    pub short_jobs: u64,
    /// Jobs run in the bulk lane since start.
    pub bulk_jobs: u64,
    /// Time spent running jobs since start, µs.
    pub busy_us: u64,
    /// The longest one job ran, µs.
    pub longest_job_us: u64,
    /// The longest a short job waited in the queue before it ran, µs.
    pub longest_short_wait_us: u64,
}

/// A node's executor side on its own thread.
pub struct ExecutorThread {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    load: Arc<ExecutorLoad>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ExecutorThread {
    /// Starts the thread that owns `core`, named `redt-exec-<node>`, its bulk lane under the
    /// topology's `limits.max_bulk_percent`.
    ///
    /// # Errors
    /// The OS refuses to start a thread.
    pub fn spawn(mut core: ExecutorCore) -> std::io::Result<ExecutorThread> {
        let percent = core.epochs().current().limits.max_bulk_percent;
        let queue =
            Arc::new((Mutex::new(Queue { jobs: FairQueue::with_bulk_percent(percent), open: true }), Condvar::new()));
        let load = Arc::new(ExecutorLoad::default());
        let name = format!("redt-exec-{}", core.node().0);
        let (q, l) = (queue.clone(), load.clone());
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let origin = Instant::now();
            let now_us = || origin.elapsed().as_micros() as u64;
            let mut last: Option<(Lane, u64, u64)> = None;
            loop {
                let next = {
                    let (lock, ready) = &*q;
                    let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some((lane, end, us)) = last.take() {
                        guard.jobs.ran(lane, end, us);
                    }
                    loop {
                        match guard.jobs.pop(now_us()) {
                            Next::Run(lane, job) => break Some((lane, job)),
                            // Stopped: what is left is bulk work of resting shares (short
                            // jobs never rest); it is dropped, and its callers get `None`.
                            Next::Idle | Next::WaitUntil(_) if !guard.open => break None,
                            Next::Idle => guard = ready.wait(guard).unwrap_or_else(|p| p.into_inner()),
                            Next::WaitUntil(t) => {
                                let wait = Duration::from_micros(t.saturating_sub(now_us()));
                                guard = ready.wait_timeout(guard, wait).unwrap_or_else(|p| p.into_inner()).0;
                            }
                        }
                    }
                };
                let Some((lane, job)) = next else { return };
                let t0 = Instant::now();
                job(&mut core, SystemClock.now_ms());
                let us = t0.elapsed().as_micros() as u64;
                // Busy time first: a reader that sees this job as the longest sees its time
                // in the busy total too ([`ExecutorThread::load`] reads them the other way).
                l.busy_us.fetch_add(us, Ordering::SeqCst);
                l.longest_job_us.fetch_max(us, Ordering::SeqCst);
                match lane {
                    Lane::Short => l.short_jobs.fetch_add(1, Ordering::Relaxed),
                    Lane::Bulk(_) => l.bulk_jobs.fetch_add(1, Ordering::Relaxed),
                };
                last = Some((lane, now_us(), us));
            }
        })?;
        Ok(ExecutorThread { queue, load, thread: Mutex::new(Some(thread)) })
    }

    /// Queues `job` in `lane`; false once the thread has stopped.
    fn push(&self, lane: Lane, job: Job) -> bool {
        let (lock, ready) = &*self.queue;
        let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        if !guard.open {
            return false;
        }
        guard.jobs.push(lane, job);
        ready.notify_one();
        true
    }

    /// Wraps `f` as a job that runs in the caller's span (a transaction's), notes how long a
    /// short job waited, and sends `f`'s result on `send`.
    fn job<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
        send: impl FnOnce(R) + Send + 'static,
    ) -> Job {
        let span = tracing::Span::current();
        let queued = Instant::now();
        let load = self.load.clone();
        Box::new(move |core, now_ms| {
            if lane == Lane::Short {
                load.longest_short_wait_us.fetch_max(queued.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
            let _entered = span.enter();
            send(f(core, now_ms));
        })
    }

    /// Runs `f` on the executor thread in the short lane, with the core and the wall clock's
    /// reading (ms since `redt_dc_executor::ORIGIN_UNIX_MS`, read when the job starts), and
    /// returns its result. `None` once the thread has stopped.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        self.run_in(Lane::Short, f).await
    }

    /// [`ExecutorThread::run`] in `lane`.
    pub async fn run_in<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = self.job(lane, f, move |r| {
            let _ = tx.send(r);
        });
        if !self.push(lane, job) {
            return None;
        }
        rx.await.ok()
    }

    /// Runs `f` on the executor thread in the short lane and blocks the calling thread until
    /// it returns (for tests and checks outside a runtime). `None` once the thread has
    /// stopped.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = std::sync::mpsc::channel();
        let job = self.job(Lane::Short, f, move |r| {
            let _ = tx.send(r);
        });
        if !self.push(Lane::Short, job) {
            return None;
        }
        rx.recv().ok()
    }

    /// Jobs waiting for the thread now: (short, bulk).
    pub fn queued(&self) -> (usize, usize) {
        self.queue.0.lock().unwrap_or_else(|p| p.into_inner()).jobs.len()
    }

    /// What the thread has done so far.
    pub fn load(&self) -> ExecutorLoadSample {
        let l = &self.load;
        let longest_job_us = l.longest_job_us.load(Ordering::SeqCst);
        ExecutorLoadSample {
            short_jobs: l.short_jobs.load(Ordering::Relaxed),
            bulk_jobs: l.bulk_jobs.load(Ordering::Relaxed),
            busy_us: l.busy_us.load(Ordering::SeqCst),
            longest_job_us,
            longest_short_wait_us: l.longest_short_wait_us.load(Ordering::Relaxed),
        }
    }

    /// Stops the thread and waits for it: the short jobs already queued, and the bulk jobs
    /// whose share is not resting, still run; the rest are dropped (their callers get
    /// `None`), so a stop never waits out a share's rest.
    pub fn stop(&self) {
        {
            let (lock, ready) = &*self.queue;
            lock.lock().unwrap_or_else(|p| p.into_inner()).open = false;
            ready.notify_all();
        }
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for ExecutorThread {
    fn drop(&mut self) {
        self.stop();
    }
}
