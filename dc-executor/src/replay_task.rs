//! The per-node replay thread: runs [`Replayer::step`] over the node's own region in a
//! loop, applying `Committed` entries with [`apply_committed_rows`] and putting the keys of
//! the rows it wrote back into their ordered indexes ([`DcHandle::relink_rows`]), and backs
//! off while idle. An
//! entry it cannot apply (`Apply::Invalid`) is logged as an error and counted
//! ([`ReplayTask::invalid`]); replay goes on past it.

use crate::apply::{apply_committed_rows, Replayed};
use crate::dc::DcHandle;
use crate::record::ThomasRule;
use crate::replay::Replayer;
use redt_proto::NodeId;
use redt_verbs::region::Region;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest sleep of an idle replay thread. Phase 2 applies a committed transaction's cells
/// itself; replay only flushes its entries and applies catch-ups, so an idle node's thread
/// wakes 20 times a second rather than 500, and the first entry after a quiet spell waits at
/// most this long. Any progress brings the thread back to [`BUSY_PAUSE`].
const MAX_IDLE: Duration = Duration::from_millis(50);

/// Pause between passes that made progress (replay needs to keep up, not to be instant).
const BUSY_PAUSE: Duration = Duration::from_micros(200);

/// A running replay thread; [`ReplayTask::stop`] drains what it can and joins it.
pub struct ReplayTask {
    stop: Arc<AtomicBool>,
    applied: Arc<AtomicU64>,
    invalid: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ReplayTask {
    /// Starts replaying `node`'s ring in `region` (the node's own MemStore) with the layout
    /// and tables of `dc`; its log lines name the node `name` (its name in the topology).
    pub fn spawn(region: Arc<Region>, dc: &Arc<DcHandle>, node: NodeId, name: String) -> ReplayTask {
        let stop = Arc::new(AtomicBool::new(false));
        let applied = Arc::new(AtomicU64::new(0));
        let invalid = Arc::new(AtomicU64::new(0));
        let dc = dc.clone();
        let mut replayer = Replayer::new(dc.layout, node);
        let (s, a, bad) = (stop.clone(), applied.clone(), invalid.clone());
        let thread = std::thread::Builder::new()
            .name(format!("replay-{}", node.0))
            .spawn(move || {
                let mut idle = BUSY_PAUSE;
                let mut unsynced = false;
                loop {
                    let stopping = s.load(Ordering::Acquire);
                    let mut out = Replayed::default();
                    let rule = ThomasRule::default();
                    let step =
                        replayer.step(&region, &mut |e| apply_committed_rows(&region, &dc.catalog, e, rule, &mut out));
                    if let Err(e) = dc.relink_rows(node, &out.rows) {
                        tracing::error!(node = %name, "replay could not put a key back into its ordered index: {e}");
                    }
                    a.fetch_add(step.applied, Ordering::Relaxed);
                    if step.unsynced && !unsynced {
                        tracing::error!(node = %name, "replay could not sync the disk image; the ring's head waits");
                    } else if unsynced && !step.unsynced {
                        tracing::warn!(node = %name, "replay synced the disk image again");
                    }
                    unsynced = step.unsynced;
                    if let Some((index, why)) = step.last_invalid {
                        bad.fetch_add(step.invalid, Ordering::Relaxed);
                        tracing::error!(
                            node = %name, index, invalid = step.invalid,
                            "replay skipped a committed redo entry it cannot apply: {why}"
                        );
                    }
                    if step.applied + step.flushed > 0 {
                        idle = BUSY_PAUSE;
                        std::thread::sleep(BUSY_PAUSE);
                    } else if stopping {
                        break;
                    } else {
                        std::thread::sleep(idle);
                        idle = (idle * 2).min(MAX_IDLE);
                    }
                }
            })
            .expect("spawning a thread");
        ReplayTask { stop, applied, invalid, thread: Some(thread) }
    }

    /// Committed entries applied so far.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Committed entries replay could not apply (`Apply::Invalid`: logged as errors, flushed
    /// unapplied) so far.
    pub fn invalid(&self) -> u64 {
        self.invalid.load(Ordering::Relaxed)
    }

    /// Stops the thread once a pass makes no progress, and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ReplayTask {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
