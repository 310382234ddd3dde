//! A RedT transaction through decided-holder takeover's gate at its coordinator, and the
//! batches the gate forms (docs/design.md, "Decided-holder takeover" and "Batches of held
//! transactions"): held back while one of this node's own conflicting transactions is
//! undecided, then sent carrying the decided ones' phase 2s, alone or leading a batch of the
//! held ones; or taken into another's batch, and answered from it.

use crate::error::Error;
use crate::node::Node;
use crate::takeover_gate::{Admitted, Hold, Member, MemberOutcome};
use redt_dc_executor::SystemClock;
use redt_proto::wire::ProcedureCall;
use redt_proto::{Cts, DcId, TxnId};
use redt_protocol::machine::TxnAnswer;
use redt_protocol::message::Decide;
use redt_protocol::takeover::Footprint;
use redt_protocol::txn::CoordinatorTxn;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use redt_dc_executor::Clock;

impl Node {
    /// Runs `txn` (`call`, first timestamped `ts` at `start`) as its coordinator under RedT:
    /// through the takeover gate as `hold` says when takeover is on, else at once.
    pub(crate) async fn run_held(
        self: &Arc<Self>,
        txn: TxnId,
        call: ProcedureCall,
        share: u64,
        (start, ts): (Instant, Cts),
        hold: Hold,
    ) -> TxnAnswer {
        let (topology, options) = (self.placement(), self.options.clone());
        let footprint = options
            .takeover
            .then(|| redt_protocol::call::procedure(&topology, &call).ok())
            .flatten()
            .map(|p| Footprint::of(p.as_ref()));
        let (ts, carried, call, members) = match footprint {
            Some(f) => match self.takeover.admit(txn, f, call, hold).await {
                Admitted::Member(outcome) => return self.member_answer(txn, outcome, share).await,
                // The start is taken when the phase 1 leaves, so its deadline runs from then;
                // a reserved id's stays the one inside its reservation's window.
                Admitted::Go { carried, call, members } => {
                    let ts = if hold.keep_start { ts } else { self.hlc.tick(SystemClock.now_ms()) };
                    (ts, carried, call, members)
                }
            },
            None => (ts, BTreeMap::new(), call, Vec::new()),
        };
        if members.is_empty() {
            let m = CoordinatorTxn::start(topology, self.id, txn, call, share, options, ts, start, carried)
                .map(|m| m.with_placement(self.epochs.clone()))
                .map_err(Error::from);
            return self.coordinate(txn, start, m).await;
        }
        // Its own task: the members' answers must not depend on the leader's caller waiting.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let node = self.clone();
        tokio::spawn(async move {
            let answer = node.run_batch(txn, call, members, share, ts, start, carried).await;
            let _ = tx.send(answer);
        });
        rx.await.unwrap_or_else(|_| TxnAnswer::unknown(txn, "the batch's coordinator stopped before answering"))
    }

    /// Runs `call` (under `txn`) with `members` after it as one batch, answers each member
    /// from the batch's answer with its own reads, and returns the leader's answer. A batch
    /// aborted by a member's own abort (or refused as a batch) runs every call alone instead,
    /// the leader under a fresh id.
    #[allow(clippy::too_many_arguments)]
    async fn run_batch(
        self: &Arc<Self>,
        txn: TxnId,
        call: ProcedureCall,
        members: Vec<Member>,
        share: u64,
        ts: Cts,
        start: Instant,
        carried: BTreeMap<DcId, Vec<Decide>>,
    ) -> TxnAnswer {
        let topology = self.placement();
        tracing::debug!(%txn, members = ?members.iter().map(|m| m.txn).collect::<Vec<_>>(), "a batch goes");
        let mut calls = Vec::with_capacity(members.len() + 1);
        calls.push(call.clone());
        calls.extend(members.iter().map(|m| m.call.clone()));
        let batch = redt_protocol::batch::call(calls.clone());
        let m = CoordinatorTxn::start(topology, self.id, txn, batch, share, self.options.clone(), ts, start, carried)
            .map(|m| m.with_placement(self.epochs.clone()))
            .map_err(Error::from);
        let answer = self.coordinate(txn, start, m).await;
        if redt_protocol::batch::runs_alone(&answer) {
            tracing::debug!(%txn, members = members.len(), "a batch aborted on a member's own abort; each runs alone");
            for m in members {
                let _ = m.outcome.send(MemberOutcome::RunAlone(m.call));
            }
            return match self.next_txn() {
                Ok(again) => self.alone(again, call, share).await,
                Err(e) => TxnAnswer::refused(TxnId(0), format!("no transaction id: {e}")),
            };
        }
        let mut reads = redt_protocol::batch::split_reads(&calls, answer.reads.clone()).into_iter();
        let own = TxnAnswer { reads: reads.next().unwrap_or_default(), ..answer.clone() };
        for (m, r) in members.into_iter().zip(reads) {
            let _ = m.outcome.send(MemberOutcome::Answer(TxnAnswer { reads: r, ..answer.clone() }));
        }
        own
    }

    /// The answer of held transaction `txn` that a batch took: the batch's, or, when the batch
    /// had every call run alone, its own run.
    async fn member_answer(
        self: &Arc<Self>,
        txn: TxnId,
        outcome: tokio::sync::oneshot::Receiver<MemberOutcome>,
        share: u64,
    ) -> TxnAnswer {
        match outcome.await {
            Ok(MemberOutcome::Answer(a)) => a,
            Ok(MemberOutcome::RunAlone(call)) => self.alone(txn, call, share).await,
            Err(_) => TxnAnswer::unknown(txn, "the batch's coordinator stopped before answering"),
        }
    }

    /// Runs `call` under `txn` through the takeover gate, in no batch.
    fn alone(
        self: &Arc<Self>,
        txn: TxnId,
        call: ProcedureCall,
        share: u64,
    ) -> Pin<Box<dyn Future<Output = TxnAnswer> + Send + '_>> {
        Box::pin(async move {
            let ts = self.hlc.tick(SystemClock.now_ms());
            self.run_held(txn, call, share, (Instant::now(), ts), Hold::alone(&self.options)).await
        })
    }
}
