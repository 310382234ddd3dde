//! The node's side of decided-holder takeover ([`redt_protocol::takeover`]): the coordinators
//! of this node hold a new transaction while one of their own that it conflicts with is
//! undecided, and send its phase 1 carrying the decided ones' phase 2s.

use redt_proto::{DcId, TxnId};
use redt_protocol::message::Decide;
use redt_protocol::takeover::{Admission, Footprint, Takeover};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// The takeover queue of one node's coordinators, with the wakers of the transactions that
/// wait in it (one lock over both, so no wake-up is lost between an admission and its wait).
#[derive(Default)]
pub(crate) struct TakeoverGate {
    state: Mutex<(Takeover, HashMap<TxnId, tokio::sync::oneshot::Sender<()>>)>,
}

impl TakeoverGate {
    /// Waits until `txn`, touching `footprint`, may send its phase 1, and returns the phase 2s
    /// it carries per DC. Waits at most `max_wait` in all (the phase-1 timeout): past it the
    /// transaction goes out carrying nothing, as under No-Wait.
    pub(crate) async fn admit(
        &self,
        txn: TxnId,
        footprint: Footprint,
        max_wait: Duration,
    ) -> BTreeMap<DcId, Vec<Decide>> {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let rx = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                match s.0.admit(txn, footprint.clone()) {
                    Admission::Go { carried } => return carried,
                    Admission::Wait { .. } => {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        s.1.insert(txn, tx);
                        rx
                    }
                }
            };
            if tokio::time::timeout_at(deadline, rx).await.is_err() {
                self.state.lock().unwrap_or_else(|p| p.into_inner()).1.remove(&txn);
                tracing::debug!(%txn, "waited the phase-1 timeout for a conflicting transaction; sent as No-Wait");
                return BTreeMap::new();
            }
        }
    }

    /// `txn` is decided and sends `phase2` to each DC: the transactions waiting for it try again.
    pub(crate) fn decided(&self, txn: TxnId, phase2: BTreeMap<DcId, Decide>) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let woken = s.0.decided(txn, phase2);
        Self::wake(&mut s.1, woken);
    }

    /// `txn` is over: nothing needs to carry its decision any more.
    pub(crate) fn finished(&self, txn: TxnId) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let woken = s.0.finished(txn);
        Self::wake(&mut s.1, woken);
    }

    fn wake(wakers: &mut HashMap<TxnId, tokio::sync::oneshot::Sender<()>>, txns: Vec<TxnId>) {
        for t in txns {
            if let Some(w) = wakers.remove(&t) {
                let _ = w.send(());
            }
        }
    }
}
