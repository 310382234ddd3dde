//! A real node's driver of deleted-record reclamation (docs/design.md, "Records reclaimed"):
//! with `limits.free_deleted_records` on, once a second it asks the executor thread for a
//! round of deleted records whose grace has passed (`ExecutorCore::take_reclaims`), sends
//! each node the round names its `ReclaimCheck` over the transport, and hands the answers
//! back (`ExecutorCore::finish_reclaims`), which frees the records every other replica holds
//! the delete of. A node that does not answer within the transport's deadline counts as not
//! holding it: those records wait for a later round. The simulation drives the same calls at
//! each recovery scan (`sim/src/world.rs`, `reclaim`).

use crate::error::{Error, Result};
use crate::node::Node;
use redt_protocol::message::{ReclaimAnswer, Reply};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often a round starts (when none is under way).
const EVERY: Duration = Duration::from_secs(1);

/// Starts the driver when the topology turns freeing on.
///
/// # Errors
/// No Tokio runtime ([`Error::Io`]).
pub(crate) fn spawn(node: &Arc<Node>) -> Result<()> {
    if !node.placement().limits.free_deleted_records {
        return Ok(());
    }
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::Io(std::io::Error::other("a node's reclaim task needs a Tokio runtime")))?;
    runtime.spawn(run(Arc::downgrade(node)));
    Ok(())
}

async fn run(node: Weak<Node>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Rounds back to back while records are due, then a pause.
        loop {
            let Some(n) = node.upgrade().filter(|n| !n.is_closed()) else { return };
            if !round(&n).await {
                break;
            }
        }
    }
}

/// One round; whether it found records due.
async fn round(n: &Arc<Node>) -> bool {
    let Some(Some(round)) = n.exec.run(|core, now_ms| core.take_reclaims(now_ms)).await else { return false };
    let mut calls = tokio::task::JoinSet::new();
    for (i, (to, request)) in round.asks.iter().enumerate() {
        let call = n.call_typed(*to, request.clone());
        calls.spawn(async move { (i, call.await) });
    }
    let mut answers: Vec<Option<ReclaimAnswer>> = vec![None; round.asks.len()];
    while let Some(joined) = calls.join_next().await {
        if let Ok((i, Ok(Reply::ReclaimChecked(a)))) = joined {
            answers[i] = Some(a);
        }
    }
    n.exec.run(move |core, now_ms| core.finish_reclaims(round, &answers, now_ms)).await;
    true
}
