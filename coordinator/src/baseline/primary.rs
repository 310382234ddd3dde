//! The primary's side of the replicated baselines (2PC-Paxos, EP-Paxos): execute its part,
//! replicate its redo to its secondaries (Paxos accept, stable leader), and pass the
//! decision on to them. Each round answers once every partition has a majority; the sends
//! still in flight go on (with retries) in the background so every secondary ends up with
//! the redo and its decision.

use super::roles::{self, Replication};
use crate::catch_up::changes_of;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::executor_core::ExecuteArgs;
use crate::node::Node;
use redt_dc_executor::{AbortReason, Decision, EntryRef, ReplicaChange, Vote};
use redt_proto::wire::{AcceptRequest, Body, ChangeMsg, DecideRequest};
use redt_proto::{NodeId, TxnId};
use std::collections::BTreeSet;
use std::sync::Arc;

impl Node {
    /// Runs phase 1 here (the handler of an execute request, or the coordinator's own part)
    /// and, with `replicate` (EP-Paxos), replicates the redo of a commit vote to the
    /// secondaries before answering. A redo that cannot reach a majority turns the vote
    /// into an abort (the local part is rolled back and the secondaries told).
    ///
    /// Returns the vote and the inter-DC cost of the replication.
    ///
    /// # Errors
    /// A malformed call, data-path failures.
    pub(crate) async fn execute_here(self: &Arc<Self>, args: &ExecuteArgs, replicate: bool) -> Result<(Vote, Cost)> {
        let a = args.clone();
        let vote = self.on_executor(move |c, now_ms| c.execute(&a, now_ms)).await?;
        if !replicate || !vote.is_commit() {
            return Ok((vote, Cost::default()));
        }
        let (ok, cost, changes) = self.replicate_redo(args.txn, &vote.entries).await;
        if ok {
            return Ok((vote, cost));
        }
        let (txn, entries) = (args.txn, vote.entries.clone());
        self.on_executor(move |c, _| c.decide(txn, Decision::Abort, &entries)).await?;
        let node = self.clone();
        let txn = args.txn;
        tokio::spawn(async move { node.replicate_decision(txn, Decision::Abort, &changes).await });
        let abort = Vote {
            txn: args.txn,
            abort: Some(AbortReason::User("redo not replicated to a majority of the secondaries".into())),
            items: Vec::new(),
            hlc: vote.hlc,
            entries: Vec::new(),
        };
        Ok((abort, cost))
    }

    /// Replicates the changes of this node's redo `entries` to the secondaries of their
    /// partitions. Returns whether every partition reached its majority, the cost, and the
    /// changes (to pass the decision on later).
    pub(crate) async fn replicate_redo(
        self: &Arc<Self>,
        txn: TxnId,
        entries: &[EntryRef],
    ) -> (bool, Cost, Vec<ReplicaChange>) {
        let held = entries.to_vec();
        let redo = match self.on_executor(move |c, _| c.redo(txn, &held)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%txn, "cannot read its redo to replicate it: {e}");
                return (false, Cost::default(), Vec::new());
            }
        };
        let changes = changes_of(&redo);
        let rep = roles::replication(&self.topology, self.id, &changes);
        let (coordinator, participants) = redo
            .first()
            .map(|e| (e.coordinator.0 as u32, e.participants.iter().map(|d| d.0 as u32).collect::<Vec<u32>>()))
            .unwrap_or_default();
        let bodies = rep
            .per_node
            .iter()
            .map(|(&n, ch)| {
                let req = AcceptRequest {
                    txn: txn.0,
                    ballot: 0,
                    coordinator,
                    participants: participants.clone(),
                    changes: ch
                        .iter()
                        .map(|c| ChangeMsg {
                            table: c.table.0 as u32,
                            key: c.key,
                            cell: c.cell as u32,
                            value: c.value.clone(),
                            seen: c.seen,
                        })
                        .collect(),
                };
                (n, Body::Accept(req))
            })
            .collect();
        let (ok, cost) = self.replication_round(&rep, bodies, |b| matches!(b, Body::Accepted(r) if r.ok)).await;
        (ok, cost, changes)
    }

    /// Applies `decision` to the redo entries this primary still holds for `txn` (the
    /// `entries` the coordinator sends are not trusted: they may be finished already) and
    /// passes it on to the secondaries that were sent the redo. Returns the cost of passing
    /// it on.
    ///
    /// # Errors
    /// Data-path failures.
    pub(crate) async fn decide_as_primary(
        self: &Arc<Self>,
        txn: TxnId,
        decision: Decision,
        entries: &[EntryRef],
    ) -> Result<Cost> {
        // What this node still holds for `txn` is the truth: a retried or duplicate decision,
        // or one for entries already finished (and maybe recycled by replay), finds nothing
        // and only fences the transaction.
        let _ = entries;
        let redo = self
            .on_executor(move |c, _| {
                let Some(entries) = c.take_pending(txn) else {
                    c.decide(txn, decision, &[])?;
                    return Ok(None);
                };
                let redo = c.redo(txn, &entries)?;
                c.decide(txn, decision, &entries)?;
                Ok(Some(redo))
            })
            .await?;
        let Some(redo) = redo else { return Ok(Cost::default()) };
        let changes = changes_of(&redo);
        let (_, cost) = self.replicate_decision(txn, decision, &changes).await;
        Ok(cost)
    }

    /// Passes `decision` on to the secondaries of the partitions `changes` touch.
    pub(crate) async fn replicate_decision(
        self: &Arc<Self>,
        txn: TxnId,
        decision: Decision,
        changes: &[ReplicaChange],
    ) -> (bool, Cost) {
        let rep = roles::replication(&self.topology, self.id, changes);
        let (commit, cts) = match decision {
            Decision::Commit(c) => (true, c.0),
            Decision::Abort => (false, 0),
        };
        let bodies = rep
            .per_node
            .keys()
            .map(|&n| {
                let req = DecideRequest {
                    txn: txn.0,
                    ballot: 0,
                    commit,
                    cts,
                    entries: Vec::new(),
                    replicate: false,
                    secondary: true,
                    catch_up: Vec::new(),
                };
                (n, Body::Decide(req))
            })
            .collect();
        self.replication_round(&rep, bodies, |b| matches!(b, Body::Decided(_))).await
    }

    /// Sends each `(node, body)` (retrying until answered) and waits until `rep` reaches its
    /// majorities with answers `accepted` counts, or the phase-1 timeout passes.
    async fn replication_round(
        self: &Arc<Self>,
        rep: &Replication,
        bodies: Vec<(NodeId, Body)>,
        accepted: fn(&Body) -> bool,
    ) -> (bool, Cost) {
        if rep.is_empty() {
            return (true, Cost::default());
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut cost = Cost::default();
        for (peer, body) in bodies {
            cost = cost.alongside(Cost::rpc(self.is_remote(peer), Cost::default()));
            let node = self.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let ok = node.call_until_answered(peer, body).await.is_some_and(|b| accepted(&b));
                let _ = tx.send((peer, ok));
            });
        }
        drop(tx);
        let deadline = tokio::time::Instant::now() + self.options.phase1_timeout;
        let mut acked = BTreeSet::new();
        while !rep.reached(&acked) {
            tokio::select! {
                r = rx.recv() => match r {
                    Some((peer, true)) => {
                        acked.insert(peer);
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        (rep.reached(&acked), cost)
    }
}

/// A vote's nested cost, as carried in its message.
pub(crate) fn nested_of(body: &Body) -> Cost {
    let (messages, round_trips) = match body {
        Body::Vote(m) => (m.nested_messages, m.nested_round_trips),
        Body::Prepared(m) => (m.nested_messages, m.nested_round_trips),
        Body::Decided(m) => (m.nested_messages, m.nested_round_trips),
        _ => (0, 0),
    };
    Cost { messages, round_trips }
}

/// The error for an answer of the wrong kind.
pub(crate) fn unexpected(node: NodeId) -> Error {
    Error::Unexpected { node }
}
