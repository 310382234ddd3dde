//! The driver of a node's executor side: one dedicated OS thread owns the node's
//! [`ExecutorCore`] and runs every request on it, so the blocking verbs (spinning on
//! `/dev/shm`, TCP round trips, RDMA completion polling) never run on a tokio worker thread
//! and the core needs no lock (STYLE.md §2).

use crate::executor_core::ExecutorCore;
use redt_dc_executor::{Clock, SystemClock};
use std::sync::mpsc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce(&mut ExecutorCore, u64) + Send>;

/// A node's executor side on its own thread.
pub struct ExecutorThread {
    jobs: std::sync::Mutex<Option<mpsc::Sender<Job>>>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl ExecutorThread {
    /// Starts the thread that owns `core`, named `redt-exec-<node>`.
    ///
    /// # Errors
    /// The OS refuses to start a thread.
    pub fn spawn(mut core: ExecutorCore) -> std::io::Result<ExecutorThread> {
        let (tx, rx) = mpsc::channel::<Job>();
        let name = format!("redt-exec-{}", core.node().0);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            while let Ok(job) = rx.recv() {
                job(&mut core, SystemClock.now_ms());
            }
        })?;
        Ok(ExecutorThread { jobs: std::sync::Mutex::new(Some(tx)), thread: std::sync::Mutex::new(Some(thread)) })
    }

    /// Runs `f` on the executor thread with the core and the wall clock's reading (ms since
    /// `redt_dc_executor::ORIGIN_UNIX_MS`, read when the job starts) and returns its result.
    /// `None` once the thread has stopped.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // The caller's span (a transaction's) follows the job onto the executor thread.
        let span = tracing::Span::current();
        let job: Job = Box::new(move |core, now_ms| {
            let _entered = span.enter();
            let _ = tx.send(f(core, now_ms));
        });
        {
            let jobs = self.jobs.lock().ok()?;
            jobs.as_ref()?.send(job).ok()?;
        }
        rx.await.ok()
    }

    /// Runs `f` on the executor thread and blocks the calling thread until it returns (for
    /// tests and checks outside a runtime). `None` once the thread has stopped.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = mpsc::channel();
        // The caller's span (a transaction's) follows the job onto the executor thread.
        let span = tracing::Span::current();
        let job: Job = Box::new(move |core, now_ms| {
            let _entered = span.enter();
            let _ = tx.send(f(core, now_ms));
        });
        {
            let jobs = self.jobs.lock().ok()?;
            jobs.as_ref()?.send(job).ok()?;
        }
        rx.recv().ok()
    }

    /// Stops the thread after the jobs already queued and waits for it.
    pub fn stop(&self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
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
