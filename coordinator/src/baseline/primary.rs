//! The primary's side of the replicated baselines (2PC-Paxos, EP-Paxos): execute its part,
//! replicate its redo to its secondaries (Paxos accept, stable leader), and pass the
//! decision on to them. Each round answers once every partition has a majority; the sends
//! still in flight go on (with retries) in the background so every secondary ends up with
//! the redo and its decision.

use super::cost::Cost;
use super::roles::{self, Replication};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::service::ExecuteArgs;
use redt_dc_executor::{AbortReason, Decision, EntryRef, RedoEntry, ReplicaChange, ReplicaOrigin, Vote};
use redt_proto::wire::{AcceptRequest, Body, ChangeMsg, DecideRequest};
use redt_proto::{DcId, Epoch, NodeId, TableId, TxnId};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Decodes an accept into the replica's terms.
///
/// # Errors
/// A text naming the malformed field.
pub(crate) fn accept_from_msg(req: &AcceptRequest) -> std::result::Result<(ReplicaOrigin, Vec<ReplicaChange>), String> {
    let coordinator = u16::try_from(req.coordinator).map_err(|_| "coordinator id out of range".to_string())?;
    let participants = req
        .participants
        .iter()
        .map(|&d| u16::try_from(d).map(DcId).map_err(|_| "participant DC out of range".to_string()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let changes = req
        .changes
        .iter()
        .map(|c| {
            Ok(ReplicaChange {
                table: TableId(u16::try_from(c.table).map_err(|_| "table id out of range".to_string())?),
                key: c.key,
                cell: u16::try_from(c.cell).map_err(|_| "cell out of range".to_string())?,
                value: c.value.clone(),
                seen: c.seen,
            })
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok((
        ReplicaOrigin { txn: TxnId(req.txn), epoch: Epoch(0), coordinator: NodeId(coordinator), participants },
        changes,
    ))
}

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
        let vote = self.service.execute(args)?;
        if !replicate || !vote.is_commit() {
            return Ok((vote, Cost::default()));
        }
        let (ok, cost, changes) = self.replicate_redo(args.txn, &vote.entries).await;
        if ok {
            return Ok((vote, cost));
        }
        self.service.decide(args.txn, Decision::Abort, &vote.entries)?;
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
        let redo = match self.service.redo(txn, entries) {
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
        let Some(entries) = self.service.take_pending(txn) else {
            self.service.decide(txn, decision, &[])?;
            return Ok(Cost::default());
        };
        let changes = changes_of(&self.service.redo(txn, &entries)?);
        self.service.decide(txn, decision, &entries)?;
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

/// The cell changes of a primary's redo entries, as sent to its secondaries (and of a
/// RedT DC's redo, as shipped to the replicas a commit left behind).
pub(crate) fn changes_of(redo: &[RedoEntry]) -> Vec<ReplicaChange> {
    redo.iter()
        .flat_map(|e| {
            e.changes.iter().map(|c| {
                // The version the writer saw, from the lock intent of the change's record.
                let seen = e.locks.iter().find(|l| l.record == c.record).and_then(|l| l.seen_version(c.cell));
                ReplicaChange {
                    table: c.table,
                    key: c.key,
                    cell: c.cell,
                    value: c.value.clone(),
                    seen: seen.unwrap_or(0),
                }
            })
        })
        .collect()
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
