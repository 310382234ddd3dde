//! A node: the executor side of its DC and a coordinator for its clients, served over QUIC
//! (RedT §4; DESIGN.md §1–2). This file is the async driver and the dispatcher: the protocol
//! lives in the state machines [`crate::txn::CoordinatorTxn`] (a coordinator's transaction)
//! and [`crate::executor_core::ExecutorCore`] (the executor side, on its own thread); the node
//! moves their messages, timers and answers, and routes each incoming request.

use crate::baseline;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::executor_core::ExecutorCore;
use crate::executor_thread::ExecutorThread;
use crate::message::{DecideRole, Reply, Request};
use crate::stats::TxnStats;
use crate::transport::{BoxFuture, Caller, Handler, Transport};
use crate::txn::{Action, CoordinatorTxn};
pub use crate::txn::{CoordinatorOptions, TxnOutcome, TxnStatus};
use redt_dc_executor::{DcHandle, Hlc, Region, ReplayTask};
use redt_netem::WanModel;
use redt_proto::wire::{
    AckReply, Body, Envelope, ErrorReply, NetemSetRequest, OutcomeReply, PrepareReply, ProcedureCall,
};
use redt_proto::{DcId, Epoch, LinkConditions, NodeId, Protocol, Topology, TxnId};
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
    exec: ExecutorThread,
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
    /// Starts a node: its replay thread, its executor thread and its request handler on
    /// `parts.transport`.
    ///
    /// # Errors
    /// The transport refuses to serve (it is closed or client-only), or the OS refuses a
    /// thread.
    pub fn start(parts: NodeParts) -> Result<Arc<Node>> {
        let replay = ReplayTask::spawn(parts.region.clone(), &parts.dc, parts.node);
        let core = ExecutorCore::new(parts.topology.clone(), parts.node, parts.dc.clone(), Arc::new(Hlc::new()));
        let node = Arc::new(Node {
            dc: parts.topology.nodes[parts.node.0 as usize].dc,
            topology: parts.topology,
            id: parts.node,
            exec: ExecutorThread::spawn(core)?,
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

    /// The executor side, on its own thread (for checks and tests).
    pub fn executor(&self) -> &ExecutorThread {
        &self.exec
    }

    /// Stops the replay thread, the executor thread and the transport.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(r) = self.replay.lock().expect("replay slot").take() {
            r.stop();
        }
        self.transport.close();
        self.exec.stop();
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

    /// Runs `f` on this node's executor core.
    ///
    /// # Errors
    /// [`Error::Unexpected`] when the executor thread has stopped (the node is shutting down).
    pub(crate) async fn on_executor<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ExecutorCore, u64) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.exec.run(f).await.unwrap_or(Err(Error::Unexpected { node: self.id }))
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

    /// Sends a typed request to `peer` (to itself: straight to the executor core) and
    /// decodes its reply.
    async fn call_typed(self: &Arc<Self>, peer: NodeId, request: Request) -> std::result::Result<Reply, String> {
        if peer == self.id {
            let me = self.id;
            return self
                .exec
                .run(move |core, now_ms| core.handle(me, request, now_ms))
                .await
                .map(|h| {
                    let node = self.clone();
                    node.ship(h.ship);
                    h.reply
                })
                .ok_or_else(|| "executor stopped".to_string());
        }
        let reply = self.transport.call(peer, self.envelope(Body::from(request))).await.map_err(|e| e.to_string())?;
        match reply.body {
            Some(b) => Reply::from_wire(peer, b),
            None => Err(format!("{peer} answered with an empty message")),
        }
    }

    /// Delivers catch-up shipments (each until answered) in the background.
    fn ship(self: Arc<Self>, ship: Vec<(NodeId, Request)>) {
        for (peer, request) in ship {
            let node = self.clone();
            tokio::spawn(async move { node.call_until_answered(peer, Body::from(request)).await });
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
        let t = match CoordinatorTxn::start(self.topology.clone(), self.id, txn, call, self.options.clone(), start) {
            Ok(t) => t,
            Err(e) => return TxnOutcome { txn, status: TxnStatus::Aborted(e), reads: vec![] },
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(self.clone().drive(t, tx, start));
        rx.await.unwrap_or(TxnOutcome {
            txn,
            status: TxnStatus::Unknown("the coordinator stopped before answering".into()),
            reads: vec![],
        })
    }

    /// The driver of one [`CoordinatorTxn`]: carries out its actions, feeds it replies,
    /// failures and its timer until it is done.
    async fn drive(
        self: Arc<Self>,
        mut t: CoordinatorTxn,
        answer: tokio::sync::oneshot::Sender<TxnOutcome>,
        start: Instant,
    ) {
        let mut answer = Some(answer);
        let mut inflight: JoinSet<(u64, std::result::Result<Reply, String>)> = JoinSet::new();
        loop {
            while let Some(action) = t.poll_action() {
                match action {
                    Action::Send { attempt, to, request } => {
                        let node = self.clone();
                        inflight.spawn(async move { (attempt, node.call_typed(to, request).await) });
                    }
                    Action::Answer { outcome, class, cost } => {
                        match (&outcome.status, cost) {
                            (TxnStatus::Committed, Some(c)) => {
                                self.stats.committed(class, c, start.elapsed().as_micros() as u64)
                            }
                            (TxnStatus::Committed, None) => {}
                            (TxnStatus::Aborted(_), _) => self.stats.aborted(class),
                            (TxnStatus::Unknown(_), _) => self.stats.unknown(class),
                        }
                        if let Some(tx) = answer.take() {
                            let _ = tx.send(outcome);
                        }
                    }
                    Action::Finished { class, after_answer } => {
                        if let Some(c) = after_answer {
                            self.stats.add_cost(class, c.messages, c.round_trips);
                        }
                    }
                }
            }
            if t.is_done() || self.closed.load(Ordering::SeqCst) {
                break;
            }
            let timer = t.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                Some(r) = inflight.join_next() => {
                    if let Ok((attempt, r)) = r {
                        match r {
                            Ok(reply) => t.handle_reply(attempt, reply, Instant::now()),
                            Err(e) => t.handle_failure(attempt, &e, Instant::now()),
                        }
                    }
                }
                _ = sleep_until_opt(timer), if timer.is_some() => t.handle_timeout(Instant::now()),
                else => {
                    tracing::error!(txn = %t.txn(), "coordinator has nothing to wait for but is not done");
                    break;
                }
            }
        }
        // Records still in flight to unreachable DCs finish (or time out) on their own.
        if !inflight.is_empty() {
            tokio::spawn(async move { while inflight.join_next().await.is_some() {} });
        }
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
        let Some(body) = msg.body else { return err(error_code::MALFORMED, "empty message".into()) };
        match body {
            Body::Execute(_) | Body::Record(_) | Body::Decide(_) | Body::Accept(_) => {
                let Some(peer) = from.node() else {
                    return err(
                        error_code::MALFORMED,
                        format!("protocol messages are accepted from nodes only, not from {from}"),
                    );
                };
                let request = match Request::try_from(body) {
                    Ok(r) => r,
                    Err(e) => return err(error_code::MALFORMED, e),
                };
                if let Err(e) = request.check(&self.topology) {
                    return err(error_code::MALFORMED, e);
                }
                let txn = request.txn();
                let epoch = self.topology.epoch.0;
                let answer = match request {
                    Request::Execute(e) if e.replicate => self.execute_replicated(e).await,
                    Request::Decide(d) if d.role == DecideRole::Primary => {
                        match self.decide_as_primary(d.txn, d.decision, &d.entries).await {
                            Ok(nested) => Reply::Decided(nested),
                            Err(e) => Reply::Error { code: error_code::INTERNAL, message: e.to_string() },
                        }
                    }
                    request => match self.exec.run(move |core, now_ms| core.handle(peer, request, now_ms)).await {
                        Some(h) => {
                            self.clone().ship(h.ship);
                            h.reply
                        }
                        None => Reply::Error { code: error_code::INTERNAL, message: "node shutting down".into() },
                    },
                };
                reply(answer.into_wire(txn, epoch))
            }
            Body::Prepare(req) => {
                if from.node().is_none() {
                    return err(error_code::MALFORMED, format!("prepare is accepted from nodes only, not from {from}"));
                }
                if crate::codec::entries_from_msg(&req.entries).is_err() {
                    return err(error_code::MALFORMED, "entry node out of range".into());
                }
                let txn = TxnId(req.txn);
                // Only what this node still holds for `txn` is replicated: a prepare that
                // arrives after the transaction was finished here (its slots maybe reused)
                // fails instead of shipping another transaction's redo.
                let entries = self.on_executor(move |c, _| Ok(c.pending_entries(txn))).await.unwrap_or_default();
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
            Body::LogDecision(req) => {
                if from.node().is_none() {
                    return err(
                        error_code::MALFORMED,
                        format!("a decision log is accepted from nodes only, not from {from}"),
                    );
                }
                let decision = if req.commit {
                    redt_dc_executor::Decision::Commit(redt_proto::Cts::new(req.cts))
                } else {
                    redt_dc_executor::Decision::Abort
                };
                let txn = TxnId(req.txn);
                let _ = self
                    .on_executor(move |c, _| {
                        c.log_decision(txn, decision);
                        Ok(())
                    })
                    .await;
                reply(Body::Ack(AckReply {}))
            }
            Body::Submit(req) => {
                let Some(call) = req.call else { return err(error_code::MALFORMED, "submit without a call".into()) };
                let out = self.submit(call).await;
                reply(Body::Outcome(outcome_to_msg(&out)))
            }
            Body::NetemSet(req) => match self.apply_netem(&req) {
                Ok(()) => reply(Body::Ack(AckReply {})),
                Err(e) => err(error_code::MALFORMED, e),
            },
            _ => err(error_code::MALFORMED, "unexpected message kind".into()),
        }
    }

    /// Phase 1 of a baseline (EP-Paxos) that replicates its redo before voting.
    async fn execute_replicated(self: &Arc<Self>, e: crate::message::Execute) -> Reply {
        let args = crate::executor_core::ExecuteArgs {
            txn: e.txn,
            coordinator: e.coordinator,
            participants: e.participants,
            call: e.call,
            scope: e.scope,
        };
        match self.execute_here(&args, true).await {
            Ok((vote, nested)) => Reply::Vote { dc: self.dc, vote, nested },
            Err(Error::BadCall(m)) => Reply::Error { code: error_code::MALFORMED, message: m },
            Err(e @ Error::DataPath(redt_dc_executor::Error::InvalidSubTxn { .. })) => {
                Reply::Error { code: error_code::MALFORMED, message: e.to_string() }
            }
            Err(e) => Reply::Error { code: error_code::INTERNAL, message: e.to_string() },
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

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
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
