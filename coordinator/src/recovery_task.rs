//! A real node's recovery driver (docs/design.md §2 and "Recovery", the NB variant):
//! every [`RecoveryOptions::scan_every`] it reads the node's own redo ring on the executor
//! thread, starts a [`Recoverer`] on the node's driver loop for every undecided phase-1 entry
//! old enough that nobody on this node is already working on, and feeds the gap at the
//! ring's head to a [`GapWatch`] (asking the DC's writers for their reservations, filling
//! what none of them holds).
//!
//! The same scan lists the ring's entries that still owe a catch-up (docs/design.md §2, "a
//! catch-up outlives its source"): one as old as a recoverable orphan that no machine of this
//! node is paying is shipped again from the entry by a [`Shipper`](redt_protocol::catch_up::Shipper) (`Node::pay_catch_up`, which also
//! delivers the catch-ups the executor core hands out when it applies a decision).
//!
//! Both kinds of background retry (a catch-up's [`Shipper`](redt_protocol::catch_up::Shipper), a scan's [`Recoverer`]) run under
//! [`RetrySlots`]: at most `limits.max_background_retries` at once per node. One over the cap
//! waits for a slot before its machine starts (so its give-up and round clocks start with
//! it); none is dropped, and the claim it holds keeps the scan from starting it twice.
//!
//! A thin driver: what to decide lives in the state machines (the recovery rule
//! in [`Recoverer`], the fill rule in [`GapWatch`], the retries in [`Shipper`](redt_protocol::catch_up::Shipper)) and in the pure
//! [`Orphan::due`]; this file moves their inputs and outputs, as the simulation's `scan`,
//! `watch_gap`, `fill_gap`, `pump_recovery` and `pump_ship` do on a virtual clock
//! (`sim/src/world.rs`).

use crate::busy::Claim;
use crate::error::{Error, Result};
use crate::node::Node;
use crate::status::Watched;
use redt_dc_executor::{Gap, LOGICAL_BITS};
use redt_proto::NodeId;
use redt_protocol::gap_watch::{GapAction, GapWatch};
use redt_protocol::message::{Reply, Request, Reservations};
use redt_protocol::recoverer::{Orphan, Recoverer};
use redt_protocol::RecoveryOptions;
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::task::JoinSet;

/// Starts `node`'s recovery task on the current Tokio runtime. It holds the node weakly and
/// stops at the first scan after [`Node::shutdown`] (or once the node is dropped).
///
/// # Errors
/// [`Error::Io`] when called outside a Tokio runtime.
pub(crate) fn spawn(node: &Arc<Node>) -> Result<()> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::Io(std::io::Error::other("a node's recovery task needs a Tokio runtime")))?;
    let options = node.options.recovery_options(&node.placement());
    let topology = node.placement();
    let writers = topology
        .nodes
        .get(node.id.0 as usize)
        .and_then(|n| topology.dcs.get(n.dc.0 as usize))
        .map(|dc| dc.nodes.clone())
        .unwrap_or_default();
    runtime.spawn(run(Arc::downgrade(node), options, writers));
    Ok(())
}

/// An answer to one of the gap watch's questions: its round, who answered, and the reply.
type Answer = (u64, NodeId, std::result::Result<Reply, String>);

/// The task: a scan and a look at the ring's head every `scan_every`, the writers' answers
/// as they come.
async fn run(node: Weak<Node>, options: RecoveryOptions, writers: Vec<NodeId>) {
    let mut gaps = GapWatch::new(writers, options.gap_wait);
    let mut asks: JoinSet<Answer> = JoinSet::new();
    let mut tick = tokio::time::interval(options.scan_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let Some(node) = node.upgrade().filter(|n| !n.is_closed()) else { return };
                if !scan(&node, &options).await {
                    return;
                }
                watch_gap(&node, &mut gaps, &mut asks).await;
            }
            Some(answer) = asks.join_next() => {
                let Ok((round, from, reply)) = answer else { continue };
                let name = || node.upgrade().map_or_else(|| from.to_string(), |n| n.placement().node_name(from));
                let held = match reply {
                    Ok(Reply::Reserved(held)) => held,
                    Ok(other) => {
                        tracing::debug!(from = %name(), "reservations answered with {other:?}");
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(from = %name(), "reservations not answered: {e}");
                        continue;
                    }
                };
                if let Some(GapAction::Fill(gap)) = gaps.answer(round, from, held) {
                    let Some(node) = node.upgrade().filter(|n| !n.is_closed()) else { return };
                    fill(&node, gap).await;
                }
            }
        }
    }
}

/// One recovery scan of `node`'s ring: a recoverer for every undecided phase-1 entry that is
/// [`Orphan::due`] and not claimed, and a [`Shipper`](redt_protocol::catch_up::Shipper) for every entry owing a catch-up that is
/// as old and not claimed. Returns false once the executor thread has stopped.
async fn scan(node: &Arc<Node>, options: &RecoveryOptions) -> bool {
    // A read of the whole ring: bulk work, in the node's own share.
    let lane = redt_protocol::executor_queue::Lane::Bulk(0);
    let Some(found) = node.exec.run_in(lane, |core, now_ms| core.ring_scan().map(|s| (s, now_ms))).await else {
        return false;
    };
    let (found, now_ms) = match found {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(node = %node.name(), "recovery scan failed: {e}");
            return true;
        }
    };
    let Some(my_dc) = node.placement().nodes.get(node.id.0 as usize).map(|n| n.dc) else { return true };
    // A node removed from the placement (or back, only a learner) drops its old-epoch entries
    // instead of recovering them.
    let removed = !node.epochs.holds_voter(node.id);
    for (_, entry) in found.unfinished {
        let Some(orphan) = Orphan::of(&entry) else { continue };
        let txn = orphan.txn;
        let discard = removed.then(|| node.exec.run(move |core, _| core.discard_if_removed(&entry)));
        let discarded = match discard {
            Some(d) => d.await,
            None => Some(Ok(false)),
        };
        match discarded {
            Some(Ok(true)) => {
                tracing::info!(node = %node.name(), %txn, "undecided entry dropped: this node was removed from the placement");
                continue;
            }
            Some(Ok(false)) => {}
            Some(Err(e)) => {
                tracing::warn!(node = %node.name(), %txn, "dropping an entry of a removed node failed: {e}")
            }
            None => return false,
        }
        if !orphan.due(&node.placement(), my_dc, node.options.phase1_timeout, options, now_ms) {
            continue;
        }
        let Some(claim) = node.busy.claim(orphan.txn) else { continue };
        recover(node, orphan, claim, options.clone(), now_ms);
    }
    for owed in found.owed {
        let Some(orphan) = Orphan::of(&owed.entry) else { continue };
        if !orphan.due(&node.placement(), my_dc, node.options.phase1_timeout, options, now_ms) {
            continue;
        }
        let Some(claim) = node.busy.claim(orphan.txn) else { continue };
        let Some(debt) = node.exec.run(move |core, _| core.reship(&owed)).await else { return false };
        tracing::info!(node = %node.name(), txn = %debt.txn, to = ?debt.ship.iter().map(|s| node.placement().node_name(s.0)).collect::<Vec<_>>(), "catch-up shipped again");
        node.pay_catch_up(debt, Some(claim));
    }
    true
}

/// Runs a recoverer of `orphan` on `node`'s driver loop, holding `claim` until it ends.
fn recover(node: &Arc<Node>, orphan: Orphan, claim: Claim, options: RecoveryOptions, now_ms: u64) {
    let txn = orphan.txn;
    let age_ms = now_ms.saturating_sub(orphan.start.0 >> LOGICAL_BITS);
    tracing::info!(node = %node.name(), %txn, coordinator = %node.placement().node_name(orphan.coordinator), age_ms, "recovery starts");
    // Recovery decides with the replica sets of the epoch the transaction was planned in
    // (docs/design.md, "Failover"); one this node has not applied yet waits for the next scan.
    let Some(topology) = orphan.placement(&node.epochs) else {
        tracing::debug!(node = %node.name(), %txn, epoch = %orphan.epoch, "recovery waits: epoch not applied here");
        return;
    };
    // The recoverer's span (debug level: fields evaluated only when enabled).
    let span = tracing::debug_span!(
        "recover",
        %txn,
        node = %node.name(),
        coordinator = %node.placement().node_name(orphan.coordinator),
        dcs = ?orphan.participants
    );
    let node = node.clone();
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let _claim = claim;
            let _slot = node.retry_slots.acquire().await;
            let r = Recoverer::start(topology, node.id, orphan, options, Instant::now())
                .with_placement(node.epochs.clone());
            let r = Watched::new(r, node.board.clone());
            let t0 = Instant::now();
            let watched = node.clone().drive(r, |_| {}).await;
            let r = watched.recoverer();
            let took_ms = t0.elapsed().as_millis() as u64;
            match r.applied_decision() {
                Some(decision) => tracing::info!(node = %node.name(), %txn, ?decision, took_ms, "recovery ends"),
                None if !r.blocked_on().is_empty() => tracing::warn!(
                    node = %node.name(),
                    %txn,
                    waiting_for = ?r.blocked_on_names(),
                    "recovery stopped blocked (the node is shutting down); locks stay held"
                ),
                None => {
                    tracing::info!(node = %node.name(), %txn, took_ms, "recovery stopped (the node is shutting down)")
                }
            }
        },
        span,
    ));
}

/// Looks at the head of `node`'s ring and carries out what the watch says: each question as
/// a `Reservations` request in the background (its answer comes back through `asks`), each
/// fill on the executor thread.
async fn watch_gap(node: &Arc<Node>, gaps: &mut GapWatch, asks: &mut JoinSet<Answer>) {
    let gap = match node.exec.run(|core, _| core.head_gap()).await {
        Some(Ok(gap)) => gap,
        Some(Err(e)) => return tracing::warn!(node = %node.name(), "reading the ring's head failed: {e}"),
        None => return,
    };
    for action in gaps.observe(gap, Instant::now()) {
        match action {
            GapAction::Ask { round, to } => {
                let call = node.call_typed(to, Request::Reservations(Reservations { ring: node.id }));
                asks.spawn(async move { (round, to, call.await) });
            }
            GapAction::Fill(gap) => fill(node, gap).await,
        }
    }
}

/// Covers `gap` of `node`'s ring with fillers on the executor thread (which re-checks the
/// ring first).
async fn fill(node: &Arc<Node>, gap: Gap) {
    match node.exec.run(move |core, _| core.fill_gap(gap)).await {
        Some(Ok(0)) | None => {}
        Some(Ok(slots)) => {
            node.board.filled(slots);
            tracing::info!(node = %node.name(), from = gap.from, to = gap.to, slots, "filled a dead writer's gap at the ring's head")
        }
        Some(Err(e)) => tracing::warn!(node = %node.name(), from = gap.from, to = gap.to, "filling a gap failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::{Cts, DcId, PartitionId, Topology, TxnId};
    use std::time::Duration;

    fn topology() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default.yaml is valid")
    }

    fn orphan(coordinator: NodeId, start_ms: u64) -> Orphan {
        Orphan {
            txn: TxnId::new(coordinator, 7),
            coordinator,
            start: Cts(start_ms << LOGICAL_BITS | 3),
            participants: vec![DcId(0), DcId(1)],
            partitions: vec![PartitionId(0)],
            epoch: redt_proto::Epoch(1),
        }
    }

    /// docs/design.md "Recovery": a recoverer starts only `phase1_timeout + clock_skew_bound` and
    /// its DC's wait after the transaction's start; the coordinator's DC goes first.
    #[test]
    fn an_entry_is_due_after_the_deadline_the_skew_bound_and_its_dcs_wait() {
        let t = topology();
        let options = RecoveryOptions::for_topology(&t, Duration::from_millis(250));
        let p1 = Duration::from_secs(2);
        // default.yaml: 40 ms RTT, so the coordinator's DC waits 160 ms, the others 500 ms.
        let (own, other) = (2_000 + 250 + 160, 2_000 + 250 + 500);
        let o = orphan(NodeId(0), 1_000_000);
        let dc1 = t.nodes[0].dc;
        let dc2 = t.nodes[2].dc;
        assert_ne!(dc1, dc2);
        assert!(!o.due(&t, dc1, p1, &options, 1_000_000 + own - 1));
        assert!(o.due(&t, dc1, p1, &options, 1_000_000 + own));
        assert!(!o.due(&t, dc2, p1, &options, 1_000_000 + own));
        assert!(!o.due(&t, dc2, p1, &options, 1_000_000 + other - 1));
        assert!(o.due(&t, dc2, p1, &options, 1_000_000 + other));
        // A clock behind the entry's start never underflows.
        assert!(!o.due(&t, dc1, p1, &options, 0));
        // A coordinator outside the topology (a corrupt entry) waits as another DC's.
        let stranger = orphan(NodeId(999), 1_000_000);
        assert!(!stranger.due(&t, dc1, p1, &options, 1_000_000 + own));
        assert!(stranger.due(&t, dc1, p1, &options, 1_000_000 + other));
    }

    /// The DCs other than the coordinator's take turns, in participant order.
    #[test]
    fn the_other_dcs_take_turns_in_participant_order() {
        let t = topology();
        let options = RecoveryOptions::for_topology(&t, Duration::from_millis(250));
        let p1 = Duration::from_secs(2);
        let dc = |n: usize| t.nodes[n].dc;
        let mut o = orphan(NodeId(0), 1_000_000);
        o.participants = vec![dc(0), dc(4), dc(2)];
        let first = 1_000_000 + 2_000 + 250 + 500;
        let turn = options.turn.as_millis() as u64;
        assert_eq!(turn, 640, "16 × 40 ms");
        assert!(o.due(&t, dc(4), p1, &options, first));
        assert!(!o.due(&t, dc(2), p1, &options, first + turn - 1), "second in line");
        assert!(o.due(&t, dc(2), p1, &options, first + turn));
        assert!(!o.due(&t, dc(6), p1, &options, first + 2 * turn - 1), "not a participant: after all of them");
        assert!(o.due(&t, dc(6), p1, &options, first + 3 * turn));
    }
}
