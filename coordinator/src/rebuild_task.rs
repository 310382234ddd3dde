//! A real node's rebuild driver (docs/design.md, "Rebuild"): for every partition
//! the node's current placement makes it a learner of, a task drives a [`Rebuild`] — snapshot
//! reads to the partition's voters over the transport, chunks applied on the executor thread —
//! until the copy is complete. The node then reports the learner filled in its status, where
//! the membership's leader finds it and proposes the promotion
//! (`crate::membership_task`). The simulation drives the same machine on its virtual clock
//! (`sim/src/world.rs`, `pump_rebuild`).
//!
//! The same copy repairs a voter: when a placement the node adopts takes a voter away from a
//! partition this node votes in, the node copies that partition from every other voter
//! ([`redt_protocol::epochs::repairs`] says why), with no promotion at the end. Its progress is in the
//! node's log, not in `redt status`.

use crate::node::Node;
use redt_proto::{Epoch, NodeId, PartitionId};
use redt_protocol::rebuild::{Purged, Rebuild, RebuildAction, RebuildOptions, RebuildProgress, RebuildState};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::task::JoinSet;

/// Starts a rebuild task for every partition the node's current placement makes it a learner
/// of that it is not rebuilding yet (called after each placement the node adopts, and at
/// start). Forgets the rebuilds of partitions it is no longer a learner of. Then starts the
/// voter repairs the placement owes since the one this was last called with.
pub(crate) fn start(node: &Arc<Node>) {
    start_learners(node);
    let current = node.epochs.current();
    let mut repairs = node.rebuilds.repairs();
    let before = std::mem::replace(&mut repairs.seen, current.clone());
    for (p, from) in redt_protocol::epochs::repairs(&before, &current, node.id) {
        if from.is_empty() || !repairs.running.insert(p) {
            continue;
        }
        tracing::info!(node = %node.name(), partition = %p, epoch = %current.epoch, from = ?from.iter().map(|&n| node.placement().node_name(n)).collect::<Vec<_>>(), "voter repair started: copying from every other voter");
        tokio::spawn(run(Arc::downgrade(node), p, Role::Repair(current.epoch), from));
    }
}

/// Why a copy runs: a learner being rebuilt (added in that epoch), or a voter repairing at
/// that epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Learner(Epoch),
    Repair(Epoch),
}

fn start_learners(node: &Arc<Node>) {
    let current = node.epochs.current();
    let mut rebuilds = node.rebuilds.lock();
    rebuilds.retain(|p, s| {
        current.partitions.get(p.0 as usize).and_then(|x| x.learner(node.id)).map(|l| l.added_in) == Some(s.added_in)
    });
    for p in &current.partitions {
        let Some(learner) = p.learner(node.id) else { continue };
        if rebuilds.contains_key(&p.id) {
            continue;
        }
        // The partition's voters in the learner's epoch; the current ones if this node applied
        // several changes at once and skipped that epoch (voters removed since are dropped from
        // the copy anyway, and one promoted since holds every commit of its own epoch on).
        let voters = node
            .epochs
            .get(learner.added_in)
            .and_then(|at| at.partitions.get(p.id.0 as usize).map(|x| x.replicas.clone()))
            .unwrap_or_else(|| p.replicas.clone());
        let state = RebuildState {
            added_in: learner.added_in,
            progress: RebuildProgress::default(),
            filled: false,
            last_error: None,
        };
        rebuilds.insert(p.id, state);
        tracing::info!(node = %node.name(), partition = %p.id, epoch = %learner.added_in, voters = ?voters.iter().map(|&n| node.placement().node_name(n)).collect::<Vec<_>>(), "rebuild started: copying from every voter");
        tokio::spawn(run(Arc::downgrade(node), p.id, Role::Learner(learner.added_in), voters));
    }
}

/// What came back for one attempt, apply or purge step.
enum Event {
    Reply(u64, Result<redt_protocol::message::Reply, String>),
    Applied(usize, Result<usize, String>),
    Purged(Result<Purged, String>),
}

async fn run(node: Weak<Node>, partition: PartitionId, role: Role, voters: Vec<NodeId>) {
    run_copy(&node, partition, role, voters).await;
    if let (Role::Repair(_), Some(n)) = (role, node.upgrade()) {
        n.rebuilds.repairs().running.remove(&partition);
    }
}

async fn run_copy(node: &Weak<Node>, partition: PartitionId, role: Role, voters: Vec<NodeId>) {
    let started = Instant::now();
    let (Role::Learner(added_in) | Role::Repair(added_in)) = role;
    let mut machine = match role {
        Role::Learner(_) => {
            // The keys refreshed from here on are noted before the first chunk is applied.
            let Some(n) = node.upgrade() else { return };
            if n.exec.run(move |core, _| core.begin_refresh(partition)).await.is_none() {
                return;
            }
            Rebuild::start(partition, added_in, &voters, RebuildOptions::default(), started)
        }
        Role::Repair(_) => Rebuild::start_repair(partition, added_in, &voters, RebuildOptions::default(), started),
    };
    let mut pending: JoinSet<Event> = JoinSet::new();
    let mut last_log = started;
    loop {
        let Some(n) = node.upgrade().filter(|n| !n.is_closed()) else { return };
        let current = n.epochs.current();
        let part = current.partitions.get(partition.0 as usize);
        let still = match role {
            Role::Learner(_) => part.and_then(|p| p.learner(n.id)).map(|l| l.added_in) == Some(added_in),
            Role::Repair(_) => part.is_some_and(|p| p.replicas.contains(&n.id)),
        };
        if !still {
            // Promoted, or removed with its DC: the task is over.
            return;
        }
        if let Some(p) = part {
            for s in machine.sources() {
                if !p.replicas.contains(&s) {
                    machine.drop_source(s);
                }
            }
        }
        while let Some(action) = machine.poll_action() {
            match action {
                RebuildAction::Send { attempt, to, request } => {
                    let call = n.call_typed(to, request);
                    pending.spawn(async move { Event::Reply(attempt, call.await) });
                }
                RebuildAction::Apply { source, records, horizon } => {
                    let on = n.clone();
                    pending.spawn(async move {
                        let applied = on
                            .exec
                            .run(move |core, _| core.apply_snapshot(&records, horizon).map_err(|e| e.to_string()))
                            .await
                            .unwrap_or_else(|| Err("node shutting down".into()));
                        Event::Applied(source, applied)
                    });
                }
                RebuildAction::Purge { from_bucket } => {
                    let on = n.clone();
                    pending.spawn(async move {
                        let purged = on
                            .exec
                            .run(move |core, _| match core.purge_unrefreshed(partition, from_bucket) {
                                Ok(step) => step,
                                Err(e) => Err(e.to_string()),
                            })
                            .await
                            .unwrap_or_else(|| Err("node shutting down".into()));
                        Event::Purged(purged)
                    });
                }
            }
        }
        let progress = machine.progress();
        let done = machine.is_done();
        if let Role::Repair(epoch) = role {
            if done {
                tracing::info!(
                    node = %n.name(), %partition, %epoch, records = progress.records, bytes = progress.bytes,
                    ms = started.elapsed().as_millis() as u64, "voter repaired"
                );
                return;
            }
        } else if let Some(s) = n.rebuilds.lock().get_mut(&partition) {
            s.progress = progress;
            s.filled = done;
            s.last_error = machine.last_error().map(str::to_string);
        }
        if done {
            tracing::info!(
                node = %n.name(), %partition, epoch = %added_in, records = progress.records, bytes = progress.bytes,
                purged = progress.purged, ms = started.elapsed().as_millis() as u64,
                "rebuild copied: the learner is filled and waits for its promotion"
            );
            return;
        }
        if last_log.elapsed() >= std::time::Duration::from_secs(5) {
            last_log = Instant::now();
            tracing::info!(
                node = %n.name(), %partition, records = progress.records, bytes = progress.bytes,
                sources_done = progress.sources_done, sources = progress.sources,
                last_error = machine.last_error().unwrap_or(""), "rebuild in progress"
            );
        }
        let deadline = machine.poll_timeout().map(tokio::time::Instant::from_std);
        drop(n);
        tokio::select! {
            Some(Ok(event)) = pending.join_next() => match event {
                Event::Reply(attempt, Ok(reply)) => machine.handle_reply(attempt, reply, Instant::now()),
                Event::Reply(attempt, Err(e)) => machine.handle_failure(attempt, &e, Instant::now()),
                Event::Applied(source, result) => machine.applied(source, result, Instant::now()),
                Event::Purged(result) => machine.purged(result, Instant::now()),
            },
            _ = crate::node::sleep_until_opt(deadline) => machine.handle_timeout(Instant::now()),
            // Look at the placement again now and then (a promotion, a removed voter).
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}
