//! The node's side of decided-holder takeover ([`redt_protocol::takeover`]): the coordinators
//! of this node hold a new transaction while one of their own that it conflicts with is
//! undecided, and send its phase 1 carrying the decided ones' phase 2s. With batching, the
//! transaction that goes takes the held ones that conflict with it along, as one transaction
//! (docs/design.md, "Batches of held transactions").

use redt_proto::wire::ProcedureCall;
use redt_proto::{DcId, TxnId};
use redt_protocol::call::{batchable, rebase};
use redt_protocol::message::Decide;
use redt_protocol::takeover::{Admission, Footprint, Takeover};
use redt_protocol::txn::CoordinatorOptions;
use redt_protocol::TxnAnswer;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// The takeover queue of one node's coordinators, with the transactions held in it and the
/// calls of those that went (one lock over all, so no wake-up is lost between an admission
/// and its wait).
#[derive(Default)]
pub(crate) struct TakeoverGate {
    state: Mutex<Gate>,
}

#[derive(Default)]
struct Gate {
    takeover: Takeover,
    /// The transactions held back, by arrival.
    held: BTreeMap<u64, Held>,
    /// Arrival number of each held transaction.
    held_at: HashMap<TxnId, u64>,
    arrivals: u64,
    /// Held transactions a batch took, and where each learns its outcome.
    joined: HashMap<TxnId, oneshot::Receiver<MemberOutcome>>,
    /// The call of every transaction admitted and not finished, as it went out.
    calls: HashMap<TxnId, ProcedureCall>,
}

/// A transaction held back.
struct Held {
    txn: TxnId,
    footprint: Footprint,
    call: ProcedureCall,
    /// Whether a batch may take it.
    batchable: bool,
    /// Wakes it: what it waited for is decided, or a batch took it.
    wake: Arc<Notify>,
}

/// What a member of a batch learns from its leader.
pub(crate) enum MemberOutcome {
    /// The batch's answer, with this member's reads.
    Answer(TxnAnswer),
    /// The batch aborted on a member's own abort: run alone, as this call.
    RunAlone(ProcedureCall),
}

/// A transaction a batch took, for its leader to run and answer.
pub(crate) struct Member {
    /// The id it was submitted under (it runs under its leader's).
    pub(crate) txn: TxnId,
    /// Its call, re-planned after the members before it.
    pub(crate) call: ProcedureCall,
    /// Where its outcome goes.
    pub(crate) outcome: oneshot::Sender<MemberOutcome>,
}

/// How the gate may hold a transaction ([`TakeoverGate::admit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The most transactions a batch it leads takes, itself included (0 or 1: it leads none).
    pub(crate) batch: usize,
    /// Whether another's batch may take it along.
    pub(crate) member: bool,
    /// The longest it waits in all; past it, it goes out as it came, carrying nothing.
    pub(crate) max_wait: Duration,
    /// Whether it keeps the start it was submitted at (else its start is taken when it goes).
    pub(crate) keep_start: bool,
}

impl Hold {
    /// How a transaction submitted to a node whose coordinators run `options` is held. One
    /// under a reserved id (`reserved`: its outcome queries bound its start by the
    /// reservation's window) keeps the start it was submitted at, waits at most half its
    /// phase-1 timeout, and never joins or leads a batch (a member is answered under its
    /// leader's id, which a query of its own could not find). Any other may wait its whole
    /// phase-1 timeout, with a start taken when it goes, and may lead batches of at most
    /// `options.batch` or be taken into one.
    pub(crate) fn of(options: &CoordinatorOptions, reserved: bool) -> Hold {
        if reserved {
            return Hold { batch: 0, member: false, max_wait: options.phase1_timeout / 2, keep_start: true };
        }
        let batch = options.batch.min(redt_dc_executor::MAX_BATCH_MEMBERS);
        Hold { batch, member: batch >= 2, max_wait: options.phase1_timeout, keep_start: false }
    }

    /// How a call that a batch gave back to run alone is held: in no batch.
    pub(crate) fn alone(options: &CoordinatorOptions) -> Hold {
        Hold { batch: 0, member: false, max_wait: options.phase1_timeout, keep_start: false }
    }
}

/// How a transaction leaves the gate.
pub(crate) enum Admitted {
    /// Send it: carrying these phase 2s per DC, as `call` (re-planned after the commits it runs
    /// behind), with `members` after it in one batch when there are any.
    Go {
        /// Phase 2s to carry, per DC.
        carried: BTreeMap<DcId, Vec<Decide>>,
        /// The call as it goes out.
        call: ProcedureCall,
        /// The held transactions it takes along, in order.
        members: Vec<Member>,
    },
    /// A batch took it: its outcome comes here.
    Member(oneshot::Receiver<MemberOutcome>),
}

impl TakeoverGate {
    /// Waits until `txn`, touching `footprint`, may send its phase 1 (see [`Admitted`]).
    /// `call` is re-planned ([`redt_protocol::call::rebase`]) after each conflicting commit it
    /// runs behind, oldest first (its footprint stays the one it was admitted with). With
    /// `hold.batch` at 2 or more, a transaction that goes takes along the held ones a batch may
    /// take ([`Takeover::batch`]), `hold.batch` at most in all; with `hold.member`, a held one
    /// may be taken by another's batch. Waits at most `hold.max_wait` in all: past it the
    /// transaction goes out as it came, carrying nothing, as under No-Wait.
    pub(crate) async fn admit(
        &self,
        txn: TxnId,
        footprint: Footprint,
        mut call: ProcedureCall,
        hold: Hold,
    ) -> Admitted {
        let deadline = tokio::time::Instant::now() + hold.max_wait;
        // Whatever ends this wait (an answer, or the caller dropping it), nothing of `txn`
        // stays held or joined.
        let _leave = Leave { gate: self, txn };
        let batch = hold.batch;
        let may_batch = batch >= 2 && batchable(&call);
        let member = hold.member && batchable(&call);
        let wake = Arc::new(Notify::new());
        let mut arrival = None;
        loop {
            {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let s = &mut *s;
                if let Some(outcome) = s.joined.remove(&txn) {
                    return Admitted::Member(outcome);
                }
                if let Some(at) = s.held_at.remove(&txn) {
                    s.held.remove(&at);
                }
                let held: Vec<(u64, &Footprint)> =
                    s.held.iter().filter(|(_, h)| h.batchable).map(|(&at, h)| (at, &h.footprint)).collect();
                let fps: Vec<&Footprint> = held.iter().map(|(_, f)| *f).collect();
                let max = if may_batch { batch } else { 0 };
                let (admission, picked) = s.takeover.admit_batch(txn, footprint.clone(), &fps, max);
                let joining: Vec<u64> = picked.into_iter().map(|k| held[k].0).collect();
                match admission {
                    Admission::Go { carried, committed } => {
                        let mut before: Vec<ProcedureCall> =
                            committed.iter().filter_map(|c| s.calls.get(c).cloned()).collect();
                        call = rebased(call, &before);
                        before.push(call.clone());
                        let mut members = Vec::with_capacity(joining.len());
                        for at in joining {
                            let h = s.held.remove(&at).expect("picked from the held");
                            s.held_at.remove(&h.txn);
                            let member_call = rebased(h.call, &before);
                            before.push(member_call.clone());
                            let (tx, rx) = oneshot::channel();
                            s.joined.insert(h.txn, rx);
                            h.wake.notify_one();
                            members.push(Member { txn: h.txn, call: member_call, outcome: tx });
                        }
                        s.calls.insert(txn, call.clone());
                        return Admitted::Go { carried, call, members };
                    }
                    Admission::Wait { .. } => {
                        // Held again, in its first place in line.
                        let at = *arrival.get_or_insert_with(|| {
                            s.arrivals += 1;
                            s.arrivals
                        });
                        let held = Held {
                            txn,
                            footprint: footprint.clone(),
                            call: call.clone(),
                            batchable: member,
                            wake: wake.clone(),
                        };
                        s.held.insert(at, held);
                        s.held_at.insert(txn, at);
                    }
                }
            }
            if tokio::time::timeout_at(deadline, wake.notified()).await.is_err() {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(outcome) = s.joined.remove(&txn) {
                    return Admitted::Member(outcome);
                }
                if let Some(at) = s.held_at.remove(&txn) {
                    s.held.remove(&at);
                }
                tracing::debug!(%txn, "waited the phase-1 timeout for a conflicting transaction; sent as No-Wait");
                return Admitted::Go { carried: BTreeMap::new(), call, members: Vec::new() };
            }
        }
    }

    /// `txn` is decided and sends `phase2` to each DC: the transactions waiting for it try again.
    pub(crate) fn decided(&self, txn: TxnId, phase2: BTreeMap<DcId, Decide>) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let woken = s.takeover.decided(txn, phase2);
        Self::wake(&mut s, woken);
    }

    /// `txn` is over: nothing needs to carry its decision any more.
    pub(crate) fn finished(&self, txn: TxnId) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.calls.remove(&txn);
        let woken = s.takeover.finished(txn);
        Self::wake(&mut s, woken);
    }

    /// Wakes `txns` to try again; they stay held, so a batch may still take them first.
    fn wake(s: &mut Gate, txns: Vec<TxnId>) {
        for t in txns {
            if let Some(h) = s.held_at.get(&t).and_then(|at| s.held.get(at)) {
                h.wake.notify_one();
            }
        }
    }
}

/// Takes a transaction out of the gate's held and joined ones when its wait ends.
struct Leave<'a> {
    gate: &'a TakeoverGate,
    txn: TxnId,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut s = self.gate.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = s.held_at.remove(&self.txn) {
            s.held.remove(&at);
        }
        s.joined.remove(&self.txn);
    }
}

/// `call` re-planned after each of `before`, committed (or committing with it in one batch)
/// before it, oldest first.
fn rebased(mut call: ProcedureCall, before: &[ProcedureCall]) -> ProcedureCall {
    for prev in before {
        if let Some(next) = rebase(&call, prev) {
            call = next;
        }
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_dc_executor::{KvOp, KvProcedure};
    use redt_proto::TableId;

    fn call() -> ProcedureCall {
        redt_protocol::call::kv_call(TableId(1), &[KvOp::Add(7, 1)])
    }

    fn footprint() -> Footprint {
        Footprint::of(&KvProcedure::new(TableId(1), 8, vec![KvOp::Add(7, 1)]))
    }

    fn hold(member: bool) -> Hold {
        Hold { batch: 16, member, max_wait: Duration::from_secs(10), keep_start: false }
    }

    fn held(gate: &TakeoverGate) -> usize {
        gate.state.lock().expect("not poisoned").held.len()
    }

    /// Admits `txn` on its own task.
    fn spawn_admit(gate: &Arc<TakeoverGate>, txn: u64, member: bool) -> tokio::task::JoinHandle<Admitted> {
        let gate = gate.clone();
        tokio::spawn(async move { gate.admit(TxnId(txn), footprint(), call(), hold(member)).await })
    }

    async fn until_held(gate: &TakeoverGate, n: usize) {
        while held(gate) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn the_first_held_transaction_to_go_takes_the_others_along() {
        let gate = Arc::new(TakeoverGate::default());
        let first = gate.admit(TxnId(1), footprint(), call(), hold(true)).await;
        assert!(matches!(first, Admitted::Go { ref members, .. } if members.is_empty()));
        let (a, b) = (spawn_admit(&gate, 2, true), spawn_admit(&gate, 3, true));
        until_held(&gate, 2).await;
        gate.decided(TxnId(1), BTreeMap::new());
        let (a, b) = (a.await.expect("runs"), b.await.expect("runs"));
        let leader_took = |x: &Admitted, other: u64| match x {
            Admitted::Go { members, .. } => members.iter().map(|m| m.txn).collect::<Vec<_>>() == vec![TxnId(other)],
            Admitted::Member(_) => false,
        };
        assert!(
            (leader_took(&a, 3) && matches!(b, Admitted::Member(_)))
                || (leader_took(&b, 2) && matches!(a, Admitted::Member(_))),
            "one goes and takes the other along"
        );
        assert_eq!(held(&gate), 0);
        assert!(gate.state.lock().expect("not poisoned").joined.is_empty(), "the member took its outcome");
    }

    #[tokio::test]
    async fn a_transaction_in_no_batch_is_never_taken_along_and_a_dropped_wait_leaves_nothing() {
        let gate = Arc::new(TakeoverGate::default());
        let _ = gate.admit(TxnId(1), footprint(), call(), hold(true)).await;
        let alone = {
            let gate = gate.clone();
            let no_batch = Hold { batch: 0, member: false, ..hold(false) };
            tokio::spawn(async move { gate.admit(TxnId(2), footprint(), call(), no_batch).await })
        };
        until_held(&gate, 1).await;
        let leads = spawn_admit(&gate, 3, true);
        until_held(&gate, 2).await;
        gate.decided(TxnId(1), BTreeMap::new());
        gate.finished(TxnId(1));
        // One of them goes; the other waits for it, then goes too; neither takes the other.
        tokio::time::sleep(Duration::from_millis(20)).await;
        for t in [2, 3] {
            gate.decided(TxnId(t), BTreeMap::new());
            gate.finished(TxnId(t));
        }
        for h in [alone, leads] {
            match h.await.expect("runs") {
                Admitted::Go { members, .. } => assert!(members.is_empty()),
                Admitted::Member(_) => panic!("taken along"),
            }
        }
        // The one that went second was decided above before it went: decided again.
        for t in [2, 3] {
            gate.decided(TxnId(t), BTreeMap::new());
            gate.finished(TxnId(t));
        }
        // A wait dropped before it ends leaves nothing held.
        let _ = gate.admit(TxnId(4), footprint(), call(), hold(true)).await;
        let dropped = spawn_admit(&gate, 5, true);
        until_held(&gate, 1).await;
        dropped.abort();
        let _ = dropped.await;
        assert_eq!(held(&gate), 0);
    }
}
