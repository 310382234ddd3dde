//! A node: the executor side of its DC and a coordinator for its clients, served over QUIC
//! (RedT §4; DESIGN.md §1–2). The protocol decisions are pure functions
//! ([`crate::decision::decide`], [`crate::plan`]); this file is the async driver that moves
//! messages, timers and outcomes.

use crate::baseline::{self, cost::Cost, roles::Scope};
use crate::call;
use crate::catch_up::{self, CatchUp};
use crate::codec::{entries_from_msg, entries_to_msg, vote_from_msg, vote_to_msg};
use crate::decision::{self, decide, majority};
use crate::error::{Error, Result};
use crate::plan::{self, Plan};
use crate::service::{ExecuteArgs, ExecutorService};
use crate::stats::{Class, TxnCost, TxnStats};
use crate::transport::{BoxFuture, Caller, Handler, Transport};
use redt_dc_executor::{DcHandle, EntryRef, Hlc, ReadView, RedoEntry, Region, ReplayTask, Vote};
use redt_netem::WanModel;
use redt_proto::wire::{
    AcceptReply, AcceptRequest, AckReply, Body, CatchUpMsg, ChangeMsg, DecideReply, DecideRequest, Envelope,
    ErrorReply, ExecuteRequest, NetemSetRequest, OutcomeReply, PrepareReply, ProcedureCall, RecordReply, RecordRequest,
};
use redt_proto::{Ballot, Cts, DcId, Epoch, LinkConditions, NodeId, PartitionId, Protocol, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Error codes of [`ErrorReply::code`].
pub mod error_code {
    /// The message's epoch is not ours.
    pub const STALE_EPOCH: u32 = 1;
    /// The message is malformed or of an unexpected kind.
    pub const MALFORMED: u32 = 2;
    /// The node failed while handling it.
    pub const INTERNAL: u32 = 3;
}

/// How a coordinator runs transactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorOptions {
    /// The commit protocol (RedT unless a baseline is being measured).
    pub protocol: Protocol,
    /// Acknowledge a commit as soon as it is decided, before phase 2 (on by default).
    pub early_ack: bool,
    /// How long phase 1 waits for votes before deciding with what it has.
    pub phase1_timeout: Duration,
    /// Pause between retries of a phase-2 or record message to an unreachable DC.
    pub retry_every: Duration,
    /// How long phase 2 keeps retrying before it gives up (and logs the transaction).
    pub give_up_after: Duration,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        CoordinatorOptions {
            protocol: Protocol::Redt,
            early_ack: true,
            phase1_timeout: Duration::from_secs(2),
            retry_every: Duration::from_millis(200),
            give_up_after: Duration::from_secs(600),
        }
    }
}

/// How a transaction ended, as told to its client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Committed.
    Committed,
    /// Certainly not committed.
    Aborted(String),
    /// The outcome is not known (the abort could not be recorded at a majority yet).
    Unknown(String),
}

/// The answer to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOutcome {
    /// The transaction id.
    pub txn: TxnId,
    /// Its status.
    pub status: TxnStatus,
    /// For a committed key/value call: per operation, the value read (`None` for writes).
    pub reads: Vec<Option<Vec<u8>>>,
}

/// Everything a node needs to start.
pub struct NodeParts {
    /// The topology.
    pub topology: Arc<Topology>,
    /// This node.
    pub node: NodeId,
    /// Its DC's data path.
    pub dc: Arc<DcHandle>,
    /// Its own MemStore, for its replay thread.
    pub region: Arc<Region>,
    /// Its QUIC transport (already bound).
    pub transport: Arc<Transport>,
    /// The WAN model its socket applies (changed by `netem set`).
    pub wan: Arc<Mutex<WanModel>>,
    /// Coordinator options.
    pub options: CoordinatorOptions,
    /// Where its counters go (shared by all nodes of an embedded cluster).
    pub stats: Arc<TxnStats>,
}

/// A running node.
pub struct Node {
    pub(crate) topology: Arc<Topology>,
    pub(crate) id: NodeId,
    pub(crate) dc: DcId,
    pub(crate) service: Arc<ExecutorService>,
    transport: Arc<Transport>,
    wan: Arc<Mutex<WanModel>>,
    pub(crate) options: CoordinatorOptions,
    pub(crate) stats: Arc<TxnStats>,
    seq: AtomicU64,
    replay: Mutex<Option<ReplayTask>>,
    /// Set by [`Node::shutdown`]: retry loops stop (and release the node) once it is.
    closed: std::sync::atomic::AtomicBool,
}

impl Node {
    /// Starts a node: its replay thread and its request handler on `parts.transport`.
    ///
    /// # Errors
    /// The transport refuses to serve (it is closed or client-only).
    pub fn start(parts: NodeParts) -> Result<Arc<Node>> {
        let replay = ReplayTask::spawn(parts.region.clone(), &parts.dc, parts.node);
        let service =
            Arc::new(ExecutorService::new(parts.topology.clone(), parts.node, parts.dc.clone(), Arc::new(Hlc::new())));
        let node = Arc::new(Node {
            dc: parts.topology.nodes[parts.node.0 as usize].dc,
            topology: parts.topology,
            id: parts.node,
            service,
            transport: parts.transport.clone(),
            wan: parts.wan,
            options: parts.options,
            stats: parts.stats,
            seq: AtomicU64::new(0),
            replay: Mutex::new(Some(replay)),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        parts.transport.serve(Arc::new(NodeHandler(Arc::downgrade(&node))))?;
        Ok(node)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's counters.
    pub fn stats(&self) -> &Arc<TxnStats> {
        &self.stats
    }

    /// The node's transport.
    pub fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// The executor side (for checks).
    pub fn service(&self) -> &Arc<ExecutorService> {
        &self.service
    }

    /// Stops the replay thread and the transport.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(r) = self.replay.lock().expect("replay slot").take() {
            r.stop();
        }
        self.transport.close();
    }

    fn envelope(&self, body: Body) -> Envelope {
        Envelope { epoch: self.topology.epoch.0, from: self.id.0 as u32, body: Some(body) }
    }

    /// A fresh transaction id coordinated by this node.
    pub(crate) fn next_txn(&self) -> TxnId {
        TxnId::new(self.id, self.seq.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Whether `peer` is in another DC than this node.
    pub(crate) fn is_remote(&self, peer: NodeId) -> bool {
        self.topology.nodes.get(peer.0 as usize).is_some_and(|n| n.dc != self.dc)
    }

    /// Sends `body` to `peer` and returns its answer; to itself, the request is handled in
    /// place (no network), exactly as a peer would handle it.
    pub(crate) async fn call_node(self: &Arc<Self>, peer: NodeId, body: Body) -> Result<Body> {
        if peer != self.id {
            return self.rpc(peer, body).await;
        }
        // Through the type-erased handler, as the transport would call it (this also keeps
        // the handler's future out of its own type: it can call itself).
        let handler: Arc<dyn Handler> = Arc::new(NodeHandler(Arc::downgrade(self)));
        let answer = handler.handle(Caller::Node(self.id), self.envelope(body)).await;
        match answer.body {
            Some(Body::Error(e)) => Err(Error::Remote { node: peer, message: e.message }),
            Some(b) => Ok(b),
            None => Err(Error::Unexpected { node: peer }),
        }
    }

    /// Sends `body` to `peer` until an answer comes back (pausing `retry_every` between
    /// attempts, giving up after `give_up_after`); `None` if it never does.
    pub(crate) async fn call_until_answered(self: &Arc<Self>, peer: NodeId, body: Body) -> Option<Body> {
        let t0 = Instant::now();
        loop {
            match self.call_node(peer, body.clone()).await {
                Ok(b) => return Some(b),
                Err(_) if self.closed.load(Ordering::SeqCst) => return None,
                Err(e) if t0.elapsed() > self.options.give_up_after => {
                    tracing::error!(%peer, "undelivered, giving up: {e}");
                    return None;
                }
                Err(e) => {
                    tracing::debug!(%peer, "retry: {e}");
                    tokio::time::sleep(self.options.retry_every).await;
                }
            }
        }
    }

    async fn rpc(&self, peer: NodeId, body: Body) -> Result<Body> {
        let reply = self.transport.call(peer, self.envelope(body)).await?;
        match reply.body {
            Some(Body::Error(e)) => Err(Error::Remote { node: peer, message: e.message }),
            Some(b) => Ok(b),
            None => Err(Error::Unexpected { node: peer }),
        }
    }

    fn executor_of(&self, plan: &Plan, dc: DcId) -> NodeId {
        let local = plan.local.get(&dc).map(|v| v.as_slice()).unwrap_or(&[]);
        plan::executor_node(&self.topology, dc, local, self.id)
    }

    async fn execute_in(self: &Arc<Self>, dc: DcId, target: NodeId, args: ExecuteArgs) -> Result<Vote> {
        if dc == self.dc {
            let svc = self.service.clone();
            return svc.execute(&args);
        }
        let req = ExecuteRequest {
            txn: args.txn.0,
            ballot: 0,
            coordinator: args.coordinator.0 as u32,
            participants: args.participants.iter().map(|d| d.0 as u32).collect(),
            call: Some(args.call),
            scope: Scope::Dc.code(),
            replicate: false,
        };
        match self.rpc(target, Body::Execute(req)).await? {
            Body::Vote(m) => vote_from_msg(target, &m),
            _ => Err(Error::Unexpected { node: target }),
        }
    }

    async fn record_in(self: &Arc<Self>, dc: DcId, target: NodeId, txn: TxnId, entries: Vec<EntryRef>) -> Result<bool> {
        if dc == self.dc {
            let svc = self.service.clone();
            return svc.record(txn, false, Ballot(0), &entries);
        }
        let req = RecordRequest { txn: txn.0, ballot: 0, commit: false, cts: 0, entries: entries_to_msg(&entries) };
        match self.rpc(target, Body::Record(req)).await? {
            Body::Recorded(r) => Ok(r.ok),
            _ => Err(Error::Unexpected { node: target }),
        }
    }

    async fn decide_in(
        self: &Arc<Self>,
        dc: DcId,
        target: NodeId,
        txn: TxnId,
        decision: redt_dc_executor::Decision,
        entries: Vec<EntryRef>,
        catch_up: Vec<CatchUpMsg>,
    ) -> Result<()> {
        if dc == self.dc {
            return self.decide_here(txn, decision, &entries, &catch_up);
        }
        let (commit, cts) = match decision {
            redt_dc_executor::Decision::Commit(c) => (true, c.0),
            redt_dc_executor::Decision::Abort => (false, 0),
        };
        let req = DecideRequest {
            txn: txn.0,
            ballot: 0,
            commit,
            cts,
            entries: entries_to_msg(&entries),
            replicate: false,
            secondary: false,
            catch_up,
        };
        match self.rpc(target, Body::Decide(req)).await? {
            Body::Decided(_) => Ok(()),
            _ => Err(Error::Unexpected { node: target }),
        }
    }

    /// Runs one transaction as its coordinator (RedT §4.2; DESIGN.md §2) and returns what
    /// the client is told. With early ack, a commit returns right after the decision and
    /// phase 2 continues in the background.
    ///
    /// With a baseline protocol configured ([`CoordinatorOptions::protocol`]), the
    /// transaction runs that protocol instead (`crate::baseline`).
    pub async fn submit(self: &Arc<Self>, call: ProcedureCall) -> TxnOutcome {
        match self.options.protocol {
            Protocol::Redt | Protocol::RedtTcp => self.submit_redt(call).await,
            Protocol::TwoPcPaxos => baseline::driver::submit_2pc_paxos(self, call, false).await,
            Protocol::EpPaxos => baseline::driver::submit_2pc_paxos(self, call, true).await,
            Protocol::Tapir => baseline::driver::submit_tapir(self, call).await,
        }
    }

    async fn submit_redt(self: &Arc<Self>, call: ProcedureCall) -> TxnOutcome {
        let start = Instant::now();
        let txn = self.next_txn();
        let fail = |status| TxnOutcome { txn, status, reads: vec![] };
        let procedure = match call::procedure(&self.topology, &call) {
            Ok(p) => p,
            Err(e) => return fail(TxnStatus::Aborted(e.to_string())),
        };
        let plan = match plan::plan(&self.topology, procedure.as_ref()) {
            Ok(p) => p,
            Err(e) => return fail(TxnStatus::Aborted(e.to_string())),
        };
        let remote = plan.participants.iter().filter(|&&d| d != self.dc).count() as u64;
        let class = Class { read_write: !plan.read_only, inter_dc: remote > 0 };

        // Phase 1: every participant DC in parallel.
        let mut phase1: JoinSet<(DcId, Option<Vote>)> = JoinSet::new();
        for &dc in &plan.participants {
            let args = ExecuteArgs {
                txn,
                coordinator: self.id,
                participants: plan.participants.clone(),
                call: call.clone(),
                scope: Scope::Dc,
            };
            let target = self.executor_of(&plan, dc);
            let node = self.clone();
            phase1.spawn(async move {
                let vote = match node.execute_in(dc, target, args).await {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::debug!(%txn, %dc, "phase 1 failed: {e}");
                        None
                    }
                };
                (dc, vote)
            });
        }
        let deadline = tokio::time::Instant::now() + self.options.phase1_timeout;
        let mut votes: BTreeMap<DcId, Vote> = BTreeMap::new();
        let decision = loop {
            let d = decide(&plan::vote_table(&plan, &votes), false);
            if d != decision::Decision::Wait {
                break d;
            }
            tokio::select! {
                r = phase1.join_next() => match r {
                    Some(Ok((dc, Some(v)))) => { votes.insert(dc, v); }
                    Some(_) => {}
                    None => break decide(&plan::vote_table(&plan, &votes), true),
                },
                _ = tokio::time::sleep_until(deadline) => break decide(&plan::vote_table(&plan, &votes), true),
            }
        };

        // Phase 1 as sent: a request to every other participant DC and a reply from each
        // that voted in time (a late reply is counted by phase 2).
        let answered = votes.keys().filter(|&&dc| dc != self.dc).count() as u64;
        let phase1_cost = Cost { messages: remote + answered, round_trips: u64::from(remote > 0) };
        match decision {
            decision::Decision::Commit { cts } => {
                let reads = self.reads(&call, &plan, &votes.values().collect::<Vec<_>>());
                let node = self.clone();
                let phase2 = node.phase2(txn, redt_dc_executor::Decision::Commit(cts), plan, votes, phase1);
                let counted = if self.options.early_ack {
                    // Acknowledged now; phase 2's cost is added when it ends.
                    let stats = self.stats.clone();
                    tokio::spawn(async move {
                        let c = phase2.await;
                        stats.add_cost(class, c.messages, c.round_trips);
                    });
                    phase1_cost
                } else {
                    phase1_cost.then(phase2.await)
                };
                let cost = TxnCost {
                    inter_dc_messages: counted.messages,
                    round_trips: counted.round_trips,
                    client_round_trips: counted.round_trips,
                };
                self.stats.committed(class, cost, start.elapsed().as_micros() as u64);
                TxnOutcome { txn, status: TxnStatus::Committed, reads }
            }
            decision::Decision::Abort { proven, partition } => {
                let why = abort_reason(&votes, proven, &plan, partition);
                let recorded = self.record_abort(txn, &plan, &votes).await;
                let node = self.clone();
                let phase2 = async move {
                    if !recorded {
                        // Keep trying to record before acting on the abort.
                        let t0 = Instant::now();
                        while !node.record_abort(txn, &plan, &votes).await {
                            if node.closed.load(Ordering::SeqCst) {
                                return;
                            }
                            if t0.elapsed() > node.options.give_up_after {
                                tracing::error!(%txn, "abort never recorded at a majority; locks stay held");
                                return;
                            }
                            tokio::time::sleep(node.options.retry_every).await;
                        }
                    }
                    node.phase2(txn, redt_dc_executor::Decision::Abort, plan, votes, phase1).await;
                };
                tokio::spawn(phase2);
                if recorded {
                    self.stats.aborted(class);
                    fail(TxnStatus::Aborted(why))
                } else {
                    self.stats.unknown(class);
                    fail(TxnStatus::Unknown(format!("{why}; the abort is not yet recorded at a majority")))
                }
            }
            decision::Decision::Wait => unreachable!("the final round never waits"),
        }
    }

    /// Records the abort of `txn` (ballot 0) at every participant DC that could have voted
    /// commit, and returns whether a majority of every touched partition's replicas hold it
    /// (abort voters count: their vote can never become commit).
    async fn record_abort(self: &Arc<Self>, txn: TxnId, plan: &Plan, votes: &BTreeMap<DcId, Vote>) -> bool {
        let mut set = JoinSet::new();
        for &dc in &plan.participants {
            let entries = match votes.get(&dc) {
                Some(v) if !v.is_commit() => continue,
                Some(v) => v.entries.clone(),
                None => Vec::new(),
            };
            let target = self.executor_of(plan, dc);
            let node = self.clone();
            set.spawn(async move { (dc, node.record_in(dc, target, txn, entries).await.unwrap_or(false)) });
        }
        let mut holding: BTreeSet<DcId> = votes.iter().filter(|(_, v)| !v.is_commit()).map(|(&dc, _)| dc).collect();
        let recorded = |holding: &BTreeSet<DcId>| {
            plan.partitions
                .iter()
                .all(|p| p.replicas.iter().filter(|(_, dc)| holding.contains(dc)).count() >= majority(p.replicas.len()))
        };
        while !recorded(&holding) {
            match set.join_next().await {
                Some(Ok((dc, true))) => {
                    holding.insert(dc);
                }
                Some(_) => {}
                None => return false,
            }
        }
        // A majority of every partition holds the abort: answer now, and let the records
        // still in flight (say, to an unreachable DC) finish or time out on their own.
        tokio::spawn(async move { while set.join_next().await.is_some() {} });
        true
    }

    /// Phase 2: the decision to every participant DC (retrying unreachable ones), then to
    /// each DC whose vote arrives after the decision. Returns its inter-DC cost as sent
    /// (late phase-1 replies included).
    async fn phase2(
        self: Arc<Self>,
        txn: TxnId,
        decision: redt_dc_executor::Decision,
        plan: Plan,
        votes: BTreeMap<DcId, Vote>,
        mut stragglers: JoinSet<(DcId, Option<Vote>)>,
    ) -> Cost {
        // A commit's replicas left behind (n ≥ 4): their DCs' redo is aborted and the
        // quorum's values are shipped to them by DCs that were up to date.
        let (cu, cts) = match decision {
            redt_dc_executor::Decision::Commit(cts) => {
                (catch_up::catch_up(&plan, &plan::vote_table(&plan, &votes)), cts)
            }
            redt_dc_executor::Decision::Abort => (CatchUp::default(), Cts(0)),
        };
        let decision_in = |dc: DcId| if cu.behind.contains(&dc) { redt_dc_executor::Decision::Abort } else { decision };
        let mut sends = JoinSet::new();
        for &dc in &plan.participants {
            let entries = match votes.get(&dc) {
                Some(v) if !v.is_commit() => continue,
                Some(v) => v.entries.clone(),
                None => Vec::new(),
            };
            let ship: Vec<CatchUpMsg> = cu
                .sources
                .get(&dc)
                .into_iter()
                .flatten()
                .map(|(p, nodes)| CatchUpMsg {
                    partition: p.0,
                    nodes: nodes.iter().map(|n| u32::from(n.0)).collect(),
                    cts: cts.0,
                })
                .collect();
            let target = self.executor_of(&plan, dc);
            let node = self.clone();
            let d = decision_in(dc);
            sends.spawn(async move { node.decide_until_delivered(dc, target, txn, d, entries, ship).await });
        }
        let mut cost = Cost::default();
        while let Some(r) = sends.join_next().await {
            cost = cost.alongside(r.unwrap_or_default());
        }
        while let Some(r) = stragglers.join_next().await {
            if let Ok((dc, Some(v))) = r {
                let late = Cost { messages: u64::from(dc != self.dc), round_trips: 0 };
                cost = cost.alongside(late);
                if v.is_commit() {
                    let target = self.executor_of(&plan, dc);
                    let d = decision_in(dc);
                    cost = cost.alongside(self.decide_until_delivered(dc, target, txn, d, v.entries, vec![]).await);
                }
            }
        }
        cost
    }

    async fn decide_until_delivered(
        self: &Arc<Self>,
        dc: DcId,
        target: NodeId,
        txn: TxnId,
        decision: redt_dc_executor::Decision,
        entries: Vec<EntryRef>,
        catch_up: Vec<CatchUpMsg>,
    ) -> Cost {
        let t0 = Instant::now();
        let remote = dc != self.dc;
        // Every attempt sent its request; the one that succeeded also got its reply.
        let mut failed = Cost::default();
        loop {
            let Err(e) = self.decide_in(dc, target, txn, decision, entries.clone(), catch_up.clone()).await else {
                return failed.alongside(Cost::rpc(remote, Cost::default()));
            };
            failed.messages += u64::from(remote);
            if self.closed.load(Ordering::SeqCst) {
                return failed;
            }
            if t0.elapsed() > self.options.give_up_after {
                tracing::error!(%txn, %dc, "phase 2 undelivered, giving up: {e}");
                return failed;
            }
            tracing::debug!(%txn, %dc, "phase 2 retry: {e}");
            tokio::time::sleep(self.options.retry_every).await;
        }
    }

    /// Applies a phase-2 decision as this DC's executor. As a catch-up source (`catch_up`
    /// not empty) it first reads the DC's redo of `txn` — its slots may be reused once the
    /// decision is applied — and then ships each listed partition's new values to the
    /// listed replicas in the background (DESIGN.md §2, phase 2). A repeated decision
    /// ships nothing again.
    ///
    /// # Errors
    /// Data-path failures.
    fn decide_here(
        self: &Arc<Self>,
        txn: TxnId,
        decision: redt_dc_executor::Decision,
        entries: &[EntryRef],
        catch_up: &[CatchUpMsg],
    ) -> Result<()> {
        if catch_up.is_empty() || self.service.was_decided(txn) {
            return self.service.decide(txn, decision, entries);
        }
        let held = if entries.is_empty() { self.service.pending_entries(txn) } else { entries.to_vec() };
        let redo = self.service.redo(txn, &held)?;
        self.service.decide(txn, decision, entries)?;
        let node = self.clone();
        let list = catch_up.to_vec();
        tokio::spawn(async move { node.ship_catch_up(txn, redo, list).await });
        Ok(())
    }

    /// Sends each replica of `list` the new values its partition got in `redo`, as the
    /// baselines' secondaries receive redo: an accept (written `Logged` into the replica's
    /// own ring) and a commit decision that settles it (`Committed`; replay then applies it
    /// under the Thomas write rule). Both are sent at once and retried until answered: a
    /// decision that overtakes its redo is remembered by the replica.
    async fn ship_catch_up(self: Arc<Self>, txn: TxnId, redo: Vec<RedoEntry>, list: Vec<CatchUpMsg>) {
        let changes = baseline::primary::changes_of(&redo);
        let (coordinator, participants) = redo
            .first()
            .map(|e| (u32::from(e.coordinator.0), e.participants.iter().map(|d| u32::from(d.0)).collect::<Vec<_>>()))
            .unwrap_or_default();
        // One accept per replica node: a node may hold several of the listed partitions,
        // and its secondary side takes one accept per (transaction, sender).
        let mut per_node: BTreeMap<NodeId, (u64, Vec<ChangeMsg>)> = BTreeMap::new();
        for cu in &list {
            let part = changes.iter().filter(|c| {
                self.topology.table(c.table).map(|t| self.topology.partition_of(t, c.key))
                    == Some(PartitionId(cu.partition))
            });
            for &n in &cu.nodes {
                let (cts, out) = per_node.entry(NodeId(n as u16)).or_insert((cu.cts, Vec::new()));
                *cts = (*cts).max(cu.cts);
                out.extend(part.clone().map(|c| ChangeMsg {
                    table: u32::from(c.table.0),
                    key: c.key,
                    cell: u32::from(c.cell),
                    value: c.value.clone(),
                    seen: c.seen,
                }));
            }
        }
        let mut sends = JoinSet::new();
        for (peer, (cts, changes)) in per_node {
            if changes.is_empty() {
                continue;
            }
            let accept = Body::Accept(AcceptRequest {
                txn: txn.0,
                ballot: 0,
                coordinator,
                participants: participants.clone(),
                changes,
            });
            let settle = Body::Decide(DecideRequest {
                txn: txn.0,
                ballot: 0,
                commit: true,
                cts,
                entries: Vec::new(),
                replicate: false,
                secondary: true,
                catch_up: Vec::new(),
            });
            for body in [accept, settle] {
                let node = self.clone();
                sends.spawn(async move { node.call_until_answered(peer, body).await });
            }
        }
        while sends.join_next().await.is_some() {}
    }

    /// The values each key/value operation read, from an up-to-date vote of each access.
    pub(crate) fn reads(&self, call: &ProcedureCall, plan: &Plan, votes: &[&Vote]) -> Vec<Option<Vec<u8>>> {
        let Some(kv) = call::kv_procedure(&self.topology, call) else { return vec![] };
        let n = redt_dc_executor::Procedure::accesses(&kv).len();
        let mut values: Vec<Option<Vec<Vec<u8>>>> = vec![None; n];
        let mut best: Vec<Cts> = vec![Cts(0); n];
        for p in &plan.partitions {
            for &a in &p.accesses {
                for v in votes.iter().filter(|v| v.is_commit()) {
                    for item in v.items.iter().filter(|i| i.access == a) {
                        let newest = item.versions.iter().map(|(_, ver)| ver.cts()).max().unwrap_or(Cts(0));
                        if values[a].is_none() || newest > best[a] {
                            best[a] = newest;
                            let width = item.values.iter().map(|(c, _)| *c as usize + 1).max().unwrap_or(0);
                            let mut cells = vec![Vec::new(); width];
                            for (c, val) in &item.values {
                                cells[*c as usize] = val.clone();
                            }
                            values[a] = Some(cells);
                        }
                    }
                }
            }
        }
        kv.observed(&ReadView::new(&values))
    }

    async fn handle(self: Arc<Self>, from: Caller, msg: Envelope) -> Envelope {
        let reply = |body| self.envelope(body);
        let err = |code, message: String| {
            self.envelope(Body::Error(ErrorReply { code, message, current_epoch: self.topology.epoch.0 }))
        };
        if msg.epoch != self.topology.epoch.0 {
            let e = Error::StaleEpoch { got: Epoch(msg.epoch), current: self.topology.epoch };
            return err(error_code::STALE_EPOCH, e.to_string());
        }
        let node_only =
            |what: &str| err(error_code::MALFORMED, format!("{what} is accepted from nodes only, not from {from}"));
        match msg.body {
            Some(Body::Execute(req)) => {
                if from.node().is_none() {
                    return node_only("phase 1");
                }
                let Some(call) = req.call else { return err(error_code::MALFORMED, "phase 1 without a call".into()) };
                let Ok(coordinator) = u16::try_from(req.coordinator) else {
                    return err(error_code::MALFORMED, "coordinator id out of range".into());
                };
                let Some(scope) = Scope::from_code(req.scope) else {
                    return err(error_code::MALFORMED, format!("unknown execution scope {}", req.scope));
                };
                let args = ExecuteArgs {
                    txn: TxnId(req.txn),
                    coordinator: NodeId(coordinator),
                    participants: req.participants.iter().map(|&d| DcId(d as u16)).collect(),
                    call,
                    scope,
                };
                match self.execute_here(&args, req.replicate).await {
                    Ok((vote, nested)) => {
                        let mut m = vote_to_msg(self.dc, &vote);
                        m.nested_messages = nested.messages;
                        m.nested_round_trips = nested.round_trips;
                        reply(Body::Vote(m))
                    }
                    Err(Error::BadCall(m)) => err(error_code::MALFORMED, m),
                    Err(e) => err(error_code::INTERNAL, e.to_string()),
                }
            }
            Some(Body::Record(req)) => {
                if from.node().is_none() {
                    return node_only("record");
                }
                let Ok(entries) = entries_from_msg(&req.entries) else {
                    return err(error_code::MALFORMED, "entry node out of range".into());
                };
                let svc = self.service.clone();
                let txn = TxnId(req.txn);
                match svc.record(txn, req.commit, Ballot(req.ballot), &entries) {
                    Ok(ok) => reply(Body::Recorded(RecordReply { txn: txn.0, ok, error: String::new() })),
                    Err(e) => err(error_code::INTERNAL, e.to_string()),
                }
            }
            Some(Body::Decide(req)) => {
                if from.node().is_none() {
                    return node_only("phase 2");
                }
                let Ok(entries) = entries_from_msg(&req.entries) else {
                    return err(error_code::MALFORMED, "entry node out of range".into());
                };
                let decision = if req.commit {
                    redt_dc_executor::Decision::Commit(Cts::new(req.cts))
                } else {
                    redt_dc_executor::Decision::Abort
                };
                let txn = TxnId(req.txn);
                let done = if req.secondary {
                    let Some(primary) = from.node() else { return node_only("phase 2") };
                    self.service.settle(txn, primary, decision).map(|()| Cost::default())
                } else if req.replicate {
                    self.decide_as_primary(txn, decision, &entries).await
                } else {
                    let nodes = self.topology.nodes.len();
                    let partitions = self.topology.partitions.len();
                    if req
                        .catch_up
                        .iter()
                        .any(|c| c.partition as usize >= partitions || c.nodes.iter().any(|&n| n as usize >= nodes))
                    {
                        return err(error_code::MALFORMED, "catch-up names an unknown partition or node".into());
                    }
                    self.decide_here(txn, decision, &entries, &req.catch_up).map(|()| Cost::default())
                };
                match done {
                    Ok(nested) => reply(Body::Decided(DecideReply {
                        txn: txn.0,
                        nested_messages: nested.messages,
                        nested_round_trips: nested.round_trips,
                    })),
                    Err(e) => err(error_code::INTERNAL, e.to_string()),
                }
            }
            Some(Body::Prepare(req)) => {
                if from.node().is_none() {
                    return node_only("prepare");
                }
                if entries_from_msg(&req.entries).is_err() {
                    return err(error_code::MALFORMED, "entry node out of range".into());
                }
                let txn = TxnId(req.txn);
                // Only what this node still holds for `txn` is replicated: a prepare that
                // arrives after the transaction was finished here (its slots maybe reused)
                // fails instead of shipping another transaction's redo.
                let entries = self.service.pending_entries(txn);
                let (ok, nested, _) = if entries.is_empty() {
                    (false, Cost::default(), Vec::new())
                } else {
                    self.replicate_redo(txn, &entries).await
                };
                reply(Body::Prepared(PrepareReply {
                    txn: txn.0,
                    ok,
                    nested_messages: nested.messages,
                    nested_round_trips: nested.round_trips,
                }))
            }
            Some(Body::Accept(req)) => {
                if from.node().is_none() {
                    return node_only("accept");
                }
                let txn = TxnId(req.txn);
                let decoded = baseline::primary::accept_from_msg(&req);
                match decoded {
                    Ok((mut origin, changes)) => {
                        origin.epoch = self.topology.epoch;
                        let accepted = self.service.accept(from.node().unwrap_or(self.id), &origin, &changes);
                        match accepted {
                            Ok(ok) => reply(Body::Accepted(AcceptReply { txn: txn.0, ok })),
                            Err(Error::DataPath(e @ redt_dc_executor::Error::InvalidSubTxn { .. })) => {
                                err(error_code::MALFORMED, e.to_string())
                            }
                            Err(e) => err(error_code::INTERNAL, e.to_string()),
                        }
                    }
                    Err(m) => err(error_code::MALFORMED, m),
                }
            }
            Some(Body::LogDecision(req)) => {
                if from.node().is_none() {
                    return node_only("a decision log");
                }
                let decision = if req.commit {
                    redt_dc_executor::Decision::Commit(Cts::new(req.cts))
                } else {
                    redt_dc_executor::Decision::Abort
                };
                self.service.log_decision(TxnId(req.txn), decision);
                reply(Body::Ack(AckReply {}))
            }
            Some(Body::Submit(req)) => {
                let Some(call) = req.call else { return err(error_code::MALFORMED, "submit without a call".into()) };
                let out = self.submit(call).await;
                reply(Body::Outcome(outcome_to_msg(&out)))
            }
            Some(Body::NetemSet(req)) => match self.apply_netem(&req) {
                Ok(()) => reply(Body::Ack(AckReply {})),
                Err(e) => err(error_code::MALFORMED, e),
            },
            _ => err(error_code::MALFORMED, "unexpected message kind".into()),
        }
    }

    /// Applies a `netem set` request to this node's WAN model.
    fn apply_netem(&self, req: &NetemSetRequest) -> std::result::Result<(), String> {
        let dc = |name: &str| {
            self.topology
                .dcs
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.id)
                .ok_or_else(|| format!("unknown DC `{name}`"))
        };
        let (from, to) = (dc(&req.from)?, dc(&req.to)?);
        if from == to {
            return Err("--from and --to must differ".into());
        }
        let mut wan = self.wan.lock().map_err(|_| "WAN model poisoned".to_string())?;
        let pairs = if req.symmetric { vec![(from, to), (to, from)] } else { vec![(from, to)] };
        for (a, b) in pairs {
            let mut c: LinkConditions = wan.link(a, b).unwrap_or_default();
            if req.rtt_us >= 0 {
                c.rtt = Duration::from_micros(req.rtt_us as u64);
            }
            if req.jitter_us >= 0 {
                c.jitter = Duration::from_micros(req.jitter_us as u64);
            }
            if req.loss_ppm >= 0 {
                c.loss = (req.loss_ppm as f64 / 1e6).clamp(0.0, 1.0);
            }
            if req.rate_bits_per_s >= 0 {
                c.rate_bits_per_s = (req.rate_bits_per_s > 0).then_some(req.rate_bits_per_s as u64);
            }
            wan.set_link(a, b, c).map_err(|e| e.to_string())?;
            if let Some(p) = req.partitioned {
                wan.set_partitioned(a, b, p).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// Encodes an outcome for the wire.
pub fn outcome_to_msg(o: &TxnOutcome) -> OutcomeReply {
    let (outcome, error) = match &o.status {
        TxnStatus::Committed => (0, String::new()),
        TxnStatus::Aborted(e) => (1, e.clone()),
        TxnStatus::Unknown(e) => (2, e.clone()),
    };
    OutcomeReply {
        outcome,
        error,
        reads: o.reads.iter().map(|r| r.clone().unwrap_or_default()).collect(),
        txn: o.txn.0,
    }
}

fn abort_reason(votes: &BTreeMap<DcId, Vote>, proven: bool, plan: &Plan, partition: usize) -> String {
    let pid = plan.partitions.get(partition).map(|p| p.id.0).unwrap_or(0);
    if let Some((dc, v)) = votes.iter().find(|(_, v)| !v.is_commit()) {
        let why = v.abort.as_ref().map(crate::codec::reason_text).unwrap_or_default();
        return format!("{dc} voted abort: {why}");
    }
    if proven {
        format!("partition p{pid} cannot reach its commit quorum (stale replicas)")
    } else {
        format!("timed out waiting for the votes of partition p{pid}")
    }
}

struct NodeHandler(std::sync::Weak<Node>);

impl Handler for NodeHandler {
    fn handle(&self, from: Caller, msg: Envelope) -> BoxFuture<'_, Envelope> {
        let node = self.0.upgrade();
        Box::pin(async move {
            match node {
                Some(n) => n.handle(from, msg).await,
                None => Envelope {
                    epoch: msg.epoch,
                    from: 0,
                    body: Some(Body::Error(ErrorReply {
                        code: error_code::INTERNAL,
                        message: "node shutting down".into(),
                        current_epoch: 0,
                    })),
                },
            }
        })
    }
}
