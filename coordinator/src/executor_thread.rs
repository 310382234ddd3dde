//! The driver of a node's executor side: one dedicated OS thread owns the node's
//! [`ExecutorCore`] and runs every request on it, so the blocking verbs (spinning on
//! `/dev/shm`, TCP round trips, RDMA completion polling) never run on a tokio worker thread
//! and the core needs no lock. Jobs wait in a [`FairQueue`]: short ones before bulk ones,
//! bulk ones in turns by share (`redt_protocol::executor_queue`).
//!
//! A second thread, the *side* thread, runs large phase 1s (more than `BULK_WEIGHT`
//! operations) on an executor of its own ([`ExecutorCore::side_executor`]): the core checks
//! and plans such a phase 1 and keeps its vote, each a short job, and the side thread runs
//! the sub-transaction in between, with its own fair queue of shares and their rest. So a
//! short phase 1 never waits in a queue behind a large one; the two threads share the CPU
//! instead. The node's driver holds back every other request about a transaction while its
//! large phase 1 is on the side thread (`crate::node`).

use redt_dc_executor::{Clock, Executor, SystemClock};
use redt_protocol::executor_core::ExecutorCore;
use redt_protocol::executor_queue::{FairQueue, Lane, Next};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job for a thread that owns an `S`: it gets the state and the wall clock's reading.
type Job<S> = Box<dyn FnOnce(&mut S, u64) + Send>;

/// The queue a thread takes its jobs from, and whether it may still take new ones.
struct Queue<S> {
    jobs: FairQueue<Job<S>>,
    open: bool,
}

/// What the executor threads have done, for status and metrics.
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
    /// Jobs run in the bulk lane since start (the side thread's large phase 1s included).
    pub bulk_jobs: u64,
    /// Time spent running jobs since start, µs, both threads together.
    pub busy_us: u64,
    /// The longest one job ran, µs.
    pub longest_job_us: u64,
    /// The longest a short job waited in the queue before it ran, µs.
    pub longest_short_wait_us: u64,
}

/// One thread that owns an `S` and runs the jobs of its fair queue on it, one at a time.
struct Worker<S> {
    queue: Arc<(Mutex<Queue<S>>, Condvar)>,
    load: Arc<ExecutorLoad>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<S: Send + 'static> Worker<S> {
    /// Starts the thread `name` that owns `state`, its bulk lane under `percent`
    /// (`limits.max_bulk_percent`), counting what it does in `load`, at scheduling priority
    /// `nice` levels below the process's (0: the same; 19 at most).
    fn spawn(name: String, mut state: S, percent: u64, load: Arc<ExecutorLoad>, nice: i32) -> std::io::Result<Self> {
        let queue =
            Arc::new((Mutex::new(Queue { jobs: FairQueue::with_bulk_percent(percent), open: true }), Condvar::new()));
        let (q, l) = (queue.clone(), load.clone());
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            if nice != 0 {
                // On Linux a thread id names the thread alone; a refusal leaves the thread at
                // the process's priority.
                let me = Some(rustix::thread::gettid());
                let now = rustix::process::getpriority_process(me).unwrap_or(0);
                let _ = rustix::process::setpriority_process(me, (now + nice).clamp(-20, 19));
            }
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
                job(&mut state, SystemClock.now_ms());
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
        Ok(Worker { queue, load, thread: Mutex::new(Some(thread)) })
    }

    /// Queues `job` in `lane`; false once the thread has stopped.
    fn push(&self, lane: Lane, job: Job<S>) -> bool {
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
        f: impl FnOnce(&mut S, u64) -> R + Send + 'static,
        send: impl FnOnce(R) + Send + 'static,
    ) -> Job<S> {
        let span = tracing::Span::current();
        let queued = Instant::now();
        let load = self.load.clone();
        Box::new(move |state, now_ms| {
            if lane == Lane::Short {
                load.longest_short_wait_us.fetch_max(queued.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
            let _entered = span.enter();
            send(f(state, now_ms));
        })
    }

    /// Queues `f` in `lane` and returns where its result will arrive; `None` once the thread
    /// has stopped.
    fn submit<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&mut S, u64) -> R + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<R>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = self.job(lane, f, move |r| {
            let _ = tx.send(r);
        });
        self.push(lane, job).then_some(rx)
    }

    /// Jobs waiting now: (short, bulk).
    fn queued(&self) -> (usize, usize) {
        self.queue.0.lock().unwrap_or_else(|p| p.into_inner()).jobs.len()
    }

    /// Stops the thread and waits for it (see [`ExecutorThread::stop`]).
    fn stop(&self) {
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

/// The side thread's nice value: large phase 1s yield the CPU to the node's latency-bound
/// threads (the core's, the runtime's, the delay line) when they compete for it.
const SIDE_NICE: i32 = 10;

/// A node's executor side: the core's thread and the side thread (see the module docs).
pub struct ExecutorThread {
    core: Worker<ExecutorCore>,
    side: Worker<Executor>,
    load: Arc<ExecutorLoad>,
}

impl ExecutorThread {
    /// Starts the thread that owns `core`, named `redt-exec-<node>`, and the side thread
    /// `redt-bulk-<node>` with the core's [`ExecutorCore::side_executor`], each bulk lane
    /// under the topology's `limits.max_bulk_percent`.
    ///
    /// # Errors
    /// The OS refuses to start a thread.
    pub fn spawn(core: ExecutorCore) -> std::io::Result<ExecutorThread> {
        let percent = core.epochs().current().limits.max_bulk_percent;
        let node = core.node().0;
        let side = core.side_executor();
        let load = Arc::new(ExecutorLoad::default());
        let side = Worker::spawn(format!("redt-bulk-{node}"), side, percent, load.clone(), SIDE_NICE)?;
        let core = Worker::spawn(format!("redt-exec-{node}"), core, percent, load.clone(), 0)?;
        Ok(ExecutorThread { core, side, load })
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
        self.core.submit(lane, f)?.await.ok()
    }

    /// Queues `f` on the executor thread in `lane` now, and returns where its result will
    /// arrive: what [`ExecutorThread::run_in`] awaits, for a caller that must queue the job
    /// while it holds a lock of its own. `None` once the thread has stopped.
    pub fn submit<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<R>> {
        self.core.submit(lane, f)
    }

    /// Runs `f` on the side thread in `lane`, with its executor and the wall clock's reading,
    /// and returns its result: a large phase 1 in its client's bulk share, or a question that
    /// must wait for the phase 1 in progress there in the short lane. `None` once the thread
    /// has stopped.
    pub async fn run_side<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&mut Executor, u64) -> R + Send + 'static,
    ) -> Option<R> {
        self.side.submit(lane, f)?.await.ok()
    }

    /// Runs `f` on the executor thread in the short lane and blocks the calling thread until
    /// it returns (for tests and checks outside a runtime). `None` once the thread has
    /// stopped.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = std::sync::mpsc::channel();
        let job = self.core.job(Lane::Short, f, move |r| {
            let _ = tx.send(r);
        });
        if !self.core.push(Lane::Short, job) {
            return None;
        }
        rx.recv().ok()
    }

    /// Jobs waiting for the threads now: (short, bulk).
    pub fn queued(&self) -> (usize, usize) {
        let (a, b) = self.core.queued();
        let (c, d) = self.side.queued();
        (a + c, b + d)
    }

    /// What the threads have done so far.
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

    /// Stops both threads and waits for them: the short jobs already queued, and the bulk
    /// jobs whose share is not resting, still run; the rest are dropped (their callers get
    /// `None`), so a stop never waits out a share's rest. The side thread stops first, so a
    /// phase 1 it ran still has its vote kept by the core.
    pub fn stop(&self) {
        self.side.stop();
        self.core.stop();
    }
}

impl Drop for ExecutorThread {
    fn drop(&mut self) {
        self.stop();
    }
}
