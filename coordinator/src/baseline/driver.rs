//! The coordinator side of the baselines: one async driver per protocol, each a sequence
//! of phases; a phase sends one request to each of a set of nodes in parallel and
//! collects the answers with their measured cost (issue 5; RedT §4.3 Table 1).

use super::primary::{nested_of, unexpected};
use super::roles;
use crate::call;
use crate::codec::{entries_to_msg, vote_from_msg};
use crate::cost::Cost;
use crate::error::Result;
use crate::node::{Node, TxnOutcome, TxnStatus};
use crate::plan::Scope;
use crate::plan::{self, Plan};
use crate::stats::{Class, TxnCost};
use redt_dc_executor::{Decision, Vote};
use redt_proto::wire::{
    Body, DecideRequest, ExecuteRequest, LogDecisionRequest, PrepareRequest, ProcedureCall, RecordRequest,
};
use redt_proto::{Cts, NodeId, TxnId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinSet;

/// How many backups a baseline coordinator replicates its decision to (RedT Table 1's M).
pub const COORDINATOR_BACKUPS: usize = 2;

/// The answers of one phase, by node, and the phase's cost.
struct Phase<T> {
    answers: BTreeMap<NodeId, T>,
    cost: Cost,
}

/// Sends `body(node)` to every node of `targets` in parallel and parses each answer,
/// returning once `enough` answers are in (the rest are left to arrive unheard) or the
/// phase-1 timeout passes; answers that do not come (or fail) are missing. Every request
/// sent counts in the cost, answered or not.
async fn phase<T: Send + 'static>(
    node: &Arc<Node>,
    targets: &[NodeId],
    enough: usize,
    body: impl Fn(NodeId) -> Body,
    parse: fn(NodeId, &Body) -> Result<T>,
) -> Phase<T> {
    let mut set = JoinSet::new();
    for &peer in targets {
        let n = node.clone();
        let b = body(peer);
        set.spawn(async move {
            let answer = n.call_node(peer, b).await.and_then(|b| Ok((parse(peer, &b)?, nested_of(&b))));
            (peer, answer)
        });
    }
    let deadline = tokio::time::Instant::now() + node.options.phase1_timeout;
    let mut out = Phase { answers: BTreeMap::new(), cost: Cost::default() };
    while out.answers.len() < enough {
        tokio::select! {
            r = set.join_next() => match r {
                Some(Ok((peer, Ok((t, nested))))) => {
                    out.cost = out.cost.alongside(Cost::rpc(node.is_remote(peer), nested));
                    out.answers.insert(peer, t);
                }
                Some(Ok((peer, Err(e)))) => tracing::debug!(%peer, "baseline phase: {e}"),
                Some(Err(_)) => {}
                None => break,
            },
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    for &peer in targets.iter().filter(|t| !out.answers.contains_key(t)) {
        out.cost = out.cost.alongside(Cost::rpc(node.is_remote(peer), Cost::default()));
    }
    out
}

fn parse_vote(peer: NodeId, b: &Body) -> Result<Vote> {
    match b {
        Body::Vote(m) => vote_from_msg(peer, m),
        _ => Err(unexpected(peer)),
    }
}

fn parse_ok(peer: NodeId, b: &Body) -> Result<bool> {
    match b {
        Body::Prepared(r) => Ok(r.ok),
        Body::Recorded(r) => Ok(r.ok),
        Body::Decided(_) | Body::Ack(_) => Ok(true),
        _ => Err(unexpected(peer)),
    }
}

/// The commit timestamp: above every executor clock reading and every version the votes
/// report (the same rule as RedT's, over the baseline's votes).
fn commit_cts<'a>(votes: impl IntoIterator<Item = &'a Vote>) -> Cts {
    let max = votes
        .into_iter()
        .flat_map(|v| {
            std::iter::once(v.hlc.0).chain(v.items.iter().flat_map(|i| i.versions.iter().map(|(_, ver)| ver.cts().0)))
        })
        .max()
        .unwrap_or(0);
    Cts(max.saturating_add(1).min(Cts::MASK))
}

/// The common start of a transaction: id, plan, class.
struct Start {
    txn: TxnId,
    plan: Plan,
    class: Class,
    at: Instant,
}

fn start(node: &Node, call: &ProcedureCall) -> std::result::Result<Start, TxnOutcome> {
    let at = Instant::now();
    let txn = node.next_txn();
    let fail = |e: crate::Error| TxnOutcome { txn, status: TxnStatus::Aborted(e.to_string()), reads: vec![] };
    let procedure = call::procedure(&node.topology, call).map_err(fail)?;
    let plan = plan::plan(&node.topology, procedure.as_ref()).map_err(fail)?;
    // The same classes as RedT's, so the rows of a comparison count the same transactions.
    let class = Class { read_write: !plan.read_only, inter_dc: plan.participants.iter().any(|&d| d != node.dc) };
    Ok(Start { txn, plan, class, at })
}

fn execute_body(node: &Node, s: &Start, call: &ProcedureCall, scope: Scope, replicate: bool) -> Body {
    Body::Execute(ExecuteRequest {
        txn: s.txn.0,
        ballot: 0,
        coordinator: node.id.0 as u32,
        participants: s.plan.participants.iter().map(|d| d.0 as u32).collect(),
        call: Some(call.clone()),
        scope: scope.code(),
        replicate,
    })
}

fn decide_body(txn: TxnId, decision: Decision, vote: Option<&Vote>, replicate: bool) -> Body {
    let (commit, cts) = match decision {
        Decision::Commit(c) => (true, c.0),
        Decision::Abort => (false, 0),
    };
    Body::Decide(DecideRequest {
        txn: txn.0,
        ballot: 0,
        commit,
        cts,
        entries: vote.map(|v| entries_to_msg(&v.entries)).unwrap_or_default(),
        replicate,
        secondary: false,
        catch_up: Vec::new(),
    })
}

/// Sends `decision` to every node of `targets` until each answers; returns the cost.
async fn finish(
    node: Arc<Node>,
    txn: TxnId,
    decision: Decision,
    targets: Vec<NodeId>,
    votes: BTreeMap<NodeId, Vote>,
    replicate: bool,
) -> Cost {
    let mut set = JoinSet::new();
    for peer in targets {
        let n = node.clone();
        let body = decide_body(txn, decision, votes.get(&peer), replicate);
        set.spawn(async move { (peer, n.call_until_answered(peer, body).await) });
    }
    let mut cost = Cost::default();
    while let Some(r) = set.join_next().await {
        if let Ok((peer, Some(b))) = r {
            cost = cost.alongside(Cost::rpc(node.is_remote(peer), nested_of(&b)));
        }
    }
    cost
}

/// Aborts: tells every target that did not vote abort (in the background) and answers.
fn abort(
    node: &Arc<Node>,
    s: &Start,
    targets: &[NodeId],
    votes: BTreeMap<NodeId, Vote>,
    replicate: bool,
    why: String,
) -> TxnOutcome {
    let release: Vec<NodeId> = targets.iter().copied().filter(|t| votes.get(t).is_none_or(|v| v.is_commit())).collect();
    tokio::spawn(finish(node.clone(), s.txn, Decision::Abort, release, votes, replicate));
    node.stats.aborted(s.class);
    TxnOutcome { txn: s.txn, status: TxnStatus::Aborted(why), reads: vec![] }
}

fn abort_reason(votes: &BTreeMap<NodeId, Vote>, targets: &[NodeId]) -> String {
    if let Some((n, v)) = votes.iter().find(|(_, v)| !v.is_commit()) {
        let why = v.abort.as_ref().map(crate::codec::reason_text).unwrap_or_default();
        return format!("{n} voted abort: {why}");
    }
    match targets.iter().find(|t| !votes.contains_key(t)) {
        Some(t) => format!("timed out waiting for the vote of {t}"),
        None => "aborted".into(),
    }
}

/// Acknowledges a commit: with early ack, right away (the commit phase goes on in the
/// background and its cost is added when it ends); otherwise after the commit phase.
async fn acknowledge(
    node: &Arc<Node>,
    s: Start,
    cost: Cost,
    commit_phase: impl std::future::Future<Output = Cost> + Send + 'static,
    reads: Vec<Option<Vec<u8>>>,
) -> TxnOutcome {
    let class = s.class;
    if node.options.early_ack {
        let stats = node.stats.clone();
        tokio::spawn(async move {
            let c = commit_phase.await;
            stats.add_cost(class, c.messages, c.round_trips);
        });
        let txn_cost = TxnCost {
            inter_dc_messages: cost.messages,
            round_trips: cost.round_trips,
            client_round_trips: cost.round_trips,
        };
        node.stats.committed(class, txn_cost, s.at.elapsed().as_micros() as u64);
    } else {
        let total = cost.then(commit_phase.await);
        let txn_cost = TxnCost {
            inter_dc_messages: total.messages,
            round_trips: total.round_trips,
            client_round_trips: total.round_trips,
        };
        node.stats.committed(class, txn_cost, s.at.elapsed().as_micros() as u64);
    }
    TxnOutcome { txn: s.txn, status: TxnStatus::Committed, reads }
}

/// Runs `call` with replicated two-phase commit (`early_prepare` false: 2PC-Paxos) or
/// Early Prepare with Paxos replication (`early_prepare` true: EP-Paxos), as its
/// coordinator (RedT §4.3 Table 1).
///
/// 1. Execute at the primaries (No-Wait 2PL); with Early Prepare each primary also
///    replicates its redo to its secondaries before voting.
/// 2. (2PC-Paxos) Prepare: each primary replicates its redo to a majority.
/// 3. Read-write only: the coordinator replicates its decision to a majority of itself and
///    its [`COORDINATOR_BACKUPS`] backups in other DCs. The decision is durable here: with
///    early ack the client is answered now.
/// 4. Commit at the primaries, each of which passes it on to its secondaries.
///
/// Any abort vote, missing vote, failed replication or failed log aborts (presumed abort:
/// nobody can have learned a commit).
pub(crate) async fn submit_2pc_paxos(node: &Arc<Node>, call: ProcedureCall, early_prepare: bool) -> TxnOutcome {
    let s = match start(node, &call) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let primaries = roles::primary_nodes(&s.plan);
    let exe = phase(
        node,
        &primaries,
        primaries.len(),
        |_| execute_body(node, &s, &call, Scope::Primaries, early_prepare),
        parse_vote,
    )
    .await;
    let mut cost = exe.cost;
    let votes = exe.answers;
    if !primaries.iter().all(|p| votes.get(p).is_some_and(|v| v.is_commit())) {
        let why = abort_reason(&votes, &primaries);
        return abort(node, &s, &primaries, votes, early_prepare, why);
    }
    if !early_prepare {
        let prepare = phase(
            node,
            &primaries,
            primaries.len(),
            |p| {
                let entries = votes.get(&p).map(|v| entries_to_msg(&v.entries)).unwrap_or_default();
                Body::Prepare(PrepareRequest { txn: s.txn.0, entries })
            },
            parse_ok,
        )
        .await;
        cost = cost.then(prepare.cost);
        if let Some(p) = primaries.iter().find(|p| prepare.answers.get(p) != Some(&true)) {
            let why = format!("prepare at {p} failed: its redo did not reach a majority of its secondaries");
            return abort(node, &s, &primaries, votes, true, why);
        }
    }
    let cts = commit_cts(votes.values());
    if !s.plan.read_only {
        let backups = roles::backups(&node.topology, node.id, COORDINATOR_BACKUPS);
        let body = |_| {
            Body::LogDecision(LogDecisionRequest {
                txn: s.txn.0,
                commit: true,
                cts: cts.0,
                participants: primaries.iter().map(|n| n.0 as u32).collect(),
            })
        };
        let needed = roles::backup_acks_needed(backups.len());
        let log = phase(node, &backups, needed, body, parse_ok).await;
        cost = cost.then(log.cost);
        if log.answers.len() < needed {
            // Backups that logged the commit learn the abort that replaces it.
            let (n, txn) = (node.clone(), s.txn);
            tokio::spawn(async move {
                for b in backups {
                    let abort = Body::LogDecision(LogDecisionRequest {
                        txn: txn.0,
                        commit: false,
                        cts: 0,
                        participants: vec![],
                    });
                    let _ = n.call_until_answered(b, abort).await;
                }
            });
            let why = "the decision did not reach a majority of the coordinator's backups".to_string();
            return abort(node, &s, &primaries, votes, true, why);
        }
    }
    let reads = crate::txn::reads(&node.topology, &call, &s.plan, &votes.values().collect::<Vec<_>>());
    let commit = finish(node.clone(), s.txn, Decision::Commit(cts), primaries, votes, true);
    acknowledge(node, s, cost, commit, reads).await
}

/// Runs `call` TAPIR-style, as its coordinator (RedT §4.3 Table 1): execute at every
/// replica (each locks and reads its own copy and pre-writes its redo), prepare (recorded
/// in every replica's vote word: the fast quorum of a 3-replica partition is all of it;
/// skipped by read-only transactions), then commit at every replica. With early ack the
/// client is answered after prepare.
pub(crate) async fn submit_tapir(node: &Arc<Node>, call: ProcedureCall) -> TxnOutcome {
    let s = match start(node, &call) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let replicas = roles::replica_nodes(&s.plan);
    let exe =
        phase(node, &replicas, replicas.len(), |_| execute_body(node, &s, &call, Scope::Node, false), parse_vote).await;
    let mut cost = exe.cost;
    let votes = exe.answers;
    if !replicas.iter().all(|p| votes.get(p).is_some_and(|v| v.is_commit())) {
        let why = abort_reason(&votes, &replicas);
        return abort(node, &s, &replicas, votes, false, why);
    }
    // A read-only transaction has nothing to prepare: its shared locks at every replica
    // already order it (RedT Table 1: TAPIR's T_re skips prepare).
    let targets: &[NodeId] = if s.plan.read_only { &[] } else { &replicas };
    let prepare = phase(
        node,
        targets,
        targets.len(),
        |p| {
            Body::Record(RecordRequest {
                txn: s.txn.0,
                ballot: 0,
                commit: true,
                cts: 0,
                entries: votes.get(&p).map(|v| entries_to_msg(&v.entries)).unwrap_or_default(),
            })
        },
        parse_ok,
    )
    .await;
    cost = cost.then(prepare.cost);
    if let Some(p) = targets.iter().find(|p| prepare.answers.get(p) != Some(&true)) {
        let why = format!("prepare at {p} failed: no fast quorum");
        return abort(node, &s, &replicas, votes, false, why);
    }
    let cts = commit_cts(votes.values());
    let reads = crate::txn::reads(&node.topology, &call, &s.plan, &votes.values().collect::<Vec<_>>());
    let commit = finish(node.clone(), s.txn, Decision::Commit(cts), replicas, votes, false);
    acknowledge(node, s, cost, commit, reads).await
}
