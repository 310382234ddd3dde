//! A node: the executor side of its DC and a coordinator for its clients, served over QUIC
//! (RedT §4; docs/design.md §1–2). This file is the async driver and the dispatcher: the protocol
//! lives in the state machines — a coordinator's transaction under any commit protocol
//! ([`redt_protocol::txn::CoordinatorTxn`] for RedT and RedT over TCP, [`redt_protocol::baseline::BaselineTxn`]
//! for 2PC-Paxos, EP-Paxos and TAPIR), a baseline primary's part of a request
//! ([`redt_protocol::baseline::PrimaryTxn`]), all [`TxnMachine`]s driven by the one loop
//! [`Node::drive`], and [`redt_protocol::executor_core::ExecutorCore`] (the executor side, on its own
//! thread); the node moves their messages, timers and answers, and routes each incoming
//! request.

use crate::busy::{Busy, Claim};
use crate::error::{Error, Result};
use crate::executor_thread::ExecutorThread;
use crate::large_phase1s::LargePhase1s;
use crate::membership_view::{MembershipView, RaftInbox};
use crate::metrics::AnswerCounters;
use crate::outcome_queries::{Asker, OutcomeQueries, OutcomeQueryCounts};
use crate::rebuilds::Rebuilds;
use crate::reserved::{NotReserved, ReservedIds};
use crate::retry_slots::RetrySlots;
use crate::status::{NodeStatus, StatusBoard};
use crate::status_sample::{RingSample, SampleCache};
use redt_dc_executor::{AbortReason, Clock, DcHandle, Hlc, Region, ReplayTask, SystemClock};
use redt_netem::WanModel;
use redt_proto::wire::{
    AckReply, Body, Envelope, ErrorReply, OutcomeReply, ProcedureCall, TxnFoundReply, TxnLookupRequest,
    TxnOutcomeReply, TxnReservedReply,
};
use redt_proto::{error_code, Cts, NodeId, Placement, Topology, TxnId};
use redt_protocol::baseline::{self, Baseline, BaselineTxn, PrimaryTxn};
use redt_protocol::catch_up::{CatchUpDebt, Shipper};
use redt_protocol::epochs::Epochs;
use redt_protocol::executor_core::{run_phase1, ExecutorCore, Handled, Phase1};
use redt_protocol::executor_queue::{Lane, BULK_WEIGHT};
use redt_protocol::limits::BadSubTxn;
use redt_protocol::machine::{Action, TxnMachine};
use redt_protocol::machine::{TxnAnswer, TxnStatus};
use redt_protocol::message::{Execute, Reply, Request};
use redt_protocol::outcome::{Deadline, Finding, OutcomeLookup};
use redt_protocol::stats::TxnStats;
use redt_protocol::txn::CoordinatorOptions;
use redt_protocol::TxnIds;
use redt_transport::{BoxFuture, Caller, Handler, Transport, WarnEvery};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tracing::Instrument;

/// Everything a node needs to start.
pub struct NodeParts {
    /// The topology file: the node starts at its placement ([`Placement::initial`]).
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
    /// Its data directory: the membership's Raft log lives in `raft/` under it (`None`: in
    /// memory, lost with the process; embedded clusters).
    pub data_dir: Option<std::path::PathBuf>,
}

/// A running node.
pub struct Node {
    /// The placements this node applied (the current one plans new transactions).
    pub(crate) epochs: Arc<Epochs>,
    pub(crate) id: NodeId,
    pub(crate) exec: ExecutorThread,
    transport: Arc<Transport>,
    wan: Arc<Mutex<WanModel>>,
    pub(crate) options: CoordinatorOptions,
    pub(crate) stats: Arc<TxnStats>,
    /// The ids this node's coordinators take: this start's incarnation, renewed from the
    /// MemStore in `dc` when used up.
    ids: Mutex<TxnIds>,
    /// The ids reserved for clients, with their owners.
    reserved: Mutex<ReservedIds>,
    /// Its DC's data path (for the incarnation counter in its own MemStore).
    dc: Arc<DcHandle>,
    /// The node's hybrid logical clock (shared with its executor core).
    pub(crate) hlc: Arc<Hlc>,
    replay: Mutex<Option<ReplayTask>>,
    /// Set by [`Node::shutdown`]: retry loops stop (and release the node) once it is.
    closed: std::sync::atomic::AtomicBool,
    /// The transactions this node's coordinators and recoverers are running (the recovery
    /// scan leaves them alone).
    pub(crate) busy: Arc<Busy>,
    /// Its counters and running recoveries, for `redt status`.
    pub(crate) board: Arc<StatusBoard>,
    /// Its coordinators' answers, for its metrics (`crate::metrics`).
    answers: Arc<AnswerCounters>,
    /// What its executor thread last read for a status, shared by the status requests and
    /// metrics scrapes of the next second (`crate::status_sample`).
    samples: SampleCache,
    /// Where Raft messages from its peers go: its membership driver, if it runs one
    /// ([`CoordinatorOptions::failover`]).
    raft: Option<RaftInbox>,
    /// The membership as its driver last saw it, for `redt status`.
    pub(crate) membership: Arc<MembershipView>,
    /// Its learners' snapshot copies (`crate::rebuild_task`).
    pub(crate) rebuilds: Rebuilds,
    /// Replicas per partition the topology file gives (the most of any partition): what a
    /// rebuild restores.
    replication_factor: usize,
    /// Its background retries' slots (`limits.max_background_retries`; `crate::recovery_task`).
    pub(crate) retry_slots: Arc<RetrySlots>,
    /// The counters of the TCP verbs server serving its MemStore, when its DC's backend is
    /// `tcp` ([`Node::watch_verbs_server`]), for its metrics.
    verbs_server: std::sync::OnceLock<redt_dc_executor::ServerCountsHandle>,
    /// The WARN lines of requests refused for the caller's role: one per [`WARN_EVERY`].
    role_warnings: WarnEvery,
    /// The WARN lines of Raft messages naming another sender: one per [`WARN_EVERY`].
    raft_warnings: WarnEvery,
    /// Its outcome queries' in-flight places, shared lookup rounds and remembered final lookups.
    outcome_queries: OutcomeQueries,
    /// Decided-holder takeover's queue of this node's coordinators (`CoordinatorOptions::takeover`).
    pub(crate) takeover: crate::takeover_gate::TakeoverGate,
    /// The transactions whose large phase 1 runs on its executor's side thread.
    large_phase1s: LargePhase1s,
    /// Notified whenever a decision was applied on this node: the phase 1s waiting for a
    /// lock try again (`ExecutorCore::with_lock_wait`).
    locks_released: tokio::sync::Notify,
}

/// At most one WARN line per kind of refusal in this interval (each line says how many were
/// not logged since the last), so a flood of refused requests does not flood the log.
const WARN_EVERY: Duration = Duration::from_secs(1);

impl Node {
    /// Builds a node from `parts` without starting anything that runs on its own: its next
    /// incarnation, taken from its MemStore before it issues any transaction id
    /// ([`TxnIds::start`]: ids never repeat across restarts), its replay thread and its
    /// executor thread. Returns it with the receiving end of its Raft inbox, for its
    /// membership driver. `Node::start` (`crate::start`) starts the rest.
    ///
    /// # Errors
    /// The incarnation counter cannot be read or is used up ([`Error::Protocol`],
    /// [`redt_protocol::Error::TxnIdsExhausted`]); the OS refuses a thread ([`Error::Io`]).
    pub(crate) fn assemble(
        parts: NodeParts,
    ) -> Result<(Arc<Node>, tokio::sync::mpsc::Receiver<redt_membership::RaftMessage>)> {
        let ids = TxnIds::start(&parts.dc, parts.node)?;
        let replay =
            ReplayTask::spawn(parts.region.clone(), &parts.dc, parts.node, parts.topology.node_name(parts.node));
        let hlc = Arc::new(Hlc::new());
        let initial = Placement::initial(parts.topology.clone());
        let epochs = Arc::new(Epochs::new(initial.clone()));
        let recovery = parts.options.recovery_options(&parts.topology);
        let grace = parts.topology.limits.free_deleted_records.then(|| recovery.deleted_grace());
        let core = ExecutorCore::new(epochs.clone(), parts.node, parts.dc.clone(), hlc.clone())
            .with_deleted_grace(grace, recovery.clock_skew_bound)
            .with_lock_wait(parts.options.lock_wait_for(&parts.topology));
        let (raft, raft_rx) = RaftInbox::new();
        let failover = parts.options.failover;
        let node = Arc::new(Node {
            epochs,
            id: parts.node,
            exec: ExecutorThread::spawn(core)?,
            transport: parts.transport.clone(),
            wan: parts.wan,
            options: parts.options,
            stats: parts.stats,
            ids: Mutex::new(ids),
            reserved: Mutex::new(ReservedIds::default()),
            dc: parts.dc,
            hlc,
            replay: Mutex::new(Some(replay)),
            closed: std::sync::atomic::AtomicBool::new(false),
            busy: Arc::new(Busy::default()),
            board: Arc::new(StatusBoard::default()),
            answers: Arc::new(AnswerCounters::default()),
            samples: SampleCache::default(),
            raft: failover.then_some(raft),
            membership: Arc::new(MembershipView::default()),
            rebuilds: Rebuilds::new(initial),
            replication_factor: parts.topology.partitions.iter().map(|p| p.replicas.len()).max().unwrap_or(1),
            retry_slots: RetrySlots::new(parts.topology.limits.max_background_retries),
            verbs_server: std::sync::OnceLock::new(),
            role_warnings: WarnEvery::new(WARN_EVERY),
            raft_warnings: WarnEvery::new(WARN_EVERY),
            outcome_queries: OutcomeQueries::default(),
            takeover: Default::default(),
            large_phase1s: LargePhase1s::default(),
            locks_released: tokio::sync::Notify::new(),
        });
        Ok((node, raft_rx))
    }

    /// Delivers the catch-up `debt` on this node's driver loop with a [`Shipper`], then clears its
    /// entries' catch-up masks on the executor thread (delivered, or given up after
    /// [`RecoveryOptions::catch_up_give_up`]), holding `claim` (if any) until then. A node that
    /// shuts down first leaves the masks set: the next life of the process ships again.
    pub(crate) fn pay_catch_up(self: &Arc<Self>, debt: CatchUpDebt, claim: Option<Claim>) {
        let options = self.options.recovery_options(&self.placement());
        let CatchUpDebt { txn, ship, owed } = debt;
        let node = self.clone();
        tokio::spawn(async move {
            let _claim = claim;
            let _slot = node.retry_slots.acquire().await;
            let shipper =
                Shipper::start(txn, ship, &node.placement(), &options, Some(node.epochs.clone()), Instant::now());
            let shipper = node.clone().drive(shipper, |_| {}).await;
            if node.is_closed() {
                return;
            }
            if !shipper.delivered() {
                tracing::error!(node = %node.name(), %txn, behind = ?shipper.undelivered().into_iter().map(|n| node.placement().node_name(n)).collect::<Vec<_>>(), "catch-up given up");
            }
            match node.exec.run(move |core, _| core.clear_owed(txn, &owed)).await {
                Some(Ok(())) | None => {}
                Some(Err(e)) => tracing::warn!(node = %node.name(), %txn, "clearing a paid catch-up failed: {e}"),
            }
        });
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// This node's name in the topology (`dc2-n1`), as logs and errors name it.
    pub fn name(&self) -> String {
        self.placement().node_name(self.id)
    }

    /// The current placement (the topology file's until a placement change is applied).
    pub fn placement(&self) -> Placement {
        self.epochs.current()
    }

    /// The placements this node applied, by epoch.
    pub fn epochs(&self) -> &Arc<Epochs> {
        &self.epochs
    }

    /// Makes `placement` this node's current one if its epoch is newer (docs/design.md, "Failover"):
    /// new transactions are planned in it and phase 1 of any other epoch is refused from now
    /// on. Returns whether it was adopted.
    pub fn adopt(&self, placement: Placement) -> bool {
        let epoch = placement.epoch();
        let adopted = self.epochs.adopt(placement);
        if adopted {
            tracing::info!(node = %self.name(), %epoch, "placement adopted");
        }
        adopted
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

    /// Stops the replay thread, the executor thread and the transport; the recovery task and
    /// the machines' driver loops stop at their next step.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(r) = self.replay.lock().expect("replay slot").take() {
            r.stop();
        }
        self.transport.close();
        self.exec.stop();
    }

    /// This node's status (see [`crate::status`]): its counters, the undecided entries of its
    /// ring, its replay backlog, the recoveries it runs and its process's CPU time and
    /// resident memory ([`crate::process`]); with `count_locks`, also the records holding a
    /// lock (a full scan of its index).
    ///
    /// How old the figures may be: without `count_locks`, what only the executor thread can
    /// read — the undecided entries (their count, the oldest's start, those listed as waiting
    /// and their ages), the catch-ups owed, the replay backlog, the forgotten votes and redo —
    /// comes from a sample shared by every status request and metrics scrape, at most
    /// [`crate::SAMPLE_MAX_AGE`] (1 s) old ([`NodeStatus::ring_read_unix_ms`] says when it
    /// was read; `crate::status_sample`: at most one executor round per second however many
    /// ask); everything else (answers, recoveries, refusals, suspects, epoch, membership,
    /// rebuilds, transport counts, round trips, uptime, the process's CPU time and memory) is
    /// read now. With `count_locks`, every figure is read now, in an executor round of its
    /// own.
    ///
    /// # Errors
    /// [`Error::Io`] once the node is shut down (its shared sample is not read then) or its
    /// executor thread has stopped; verbs failures.
    pub async fn status(&self, count_locks: bool) -> Result<NodeStatus> {
        if self.is_closed() {
            return Err(Error::Io(std::io::Error::other("node shutting down")));
        }
        let (sample, locks) = if count_locks {
            self.samples.counted_round();
            let (sample, locks) = self.ring_round(true).await?;
            let sample = Arc::new(sample);
            self.samples.share(sample.clone());
            (sample, locks)
        } else {
            (self.samples.get(|| async { Ok(self.ring_round(false).await?.0) }).await?, None)
        };
        let p1 = self.options.phase1_timeout.as_millis() as u64;
        let mut status = self.board.snapshot(self.id, &sample.unfinished, sample.now_ms, p1, sample.owed, locks);
        status.replay_backlog_slots = sample.backlog;
        status.record_heap = Some(sample.heap);
        status.executor = self.exec.load();
        (status.pending_votes_forgotten, status.accepted_redo_forgotten) = sample.forgotten;
        (status.deleted_records_freed, status.deleted_records_waiting) = sample.deleted;
        status.background_retries_waiting = self.retry_slots.waiting();
        status.background_retries_waited = self.retry_slots.waited();
        let topology = self.placement();
        status.epoch = topology.epoch;
        status.removed_dcs = redt_protocol::epochs::removed_dcs(&topology);
        status.membership_leader = self.membership.leader();
        status.rebuilds = self.rebuilds.snapshot();
        status.under_replicated = redt_protocol::epochs::under_replicated(&topology, self.replication_factor) as u32;
        status.replay_invalid_entries =
            self.replay.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, |r| r.invalid());
        status.transport_limits =
            crate::status::TransportLimitCounts::from_counters(&self.transport.counters().snapshot());
        status.link_rtts = crate::status::link_rtts(&topology, self.id, &self.transport.peer_rtts());
        status.ring_read_unix_ms = Some(sample.now_ms.saturating_add(redt_dc_executor::ORIGIN_UNIX_MS));
        let usage = crate::process::ProcessUsage::now();
        status.process_cpu_us = Some(u64::try_from(usage.cpu.as_micros()).unwrap_or(u64::MAX));
        status.process_resident_bytes = usage.resident_bytes;
        Ok(status)
    }

    /// One executor round reading what [`Node::status`] needs from the executor thread, and
    /// with `count_locks` the records holding a lock.
    ///
    /// # Errors
    /// [`Error::Io`] once the executor thread has stopped; verbs failures.
    async fn ring_round(&self, count_locks: bool) -> Result<(RingSample, Option<u64>)> {
        let stopped = || Error::Io(std::io::Error::other("node shutting down"));
        let taken = Instant::now();
        // A read of the whole ring (and with `count_locks`, of the whole index): bulk work,
        // in the node's own share.
        let (scan, (backlog, heap, deleted), now_ms, locks, forgotten) = self
            .exec
            .run_in(Lane::Bulk(0), move |core, now_ms| -> Result<_> {
                let scan = core.ring_scan()?;
                let backlog = core.replay_backlog()?;
                let heap = core.record_heap()?;
                let locks = if count_locks { Some(core.locks_held()?) } else { None };
                let (freed, waiting, _) = core.deleted_records();
                Ok((scan, (backlog, heap, (freed, waiting as u64)), now_ms, locks, core.forgotten()))
            })
            .await
            .ok_or_else(stopped)??;
        let sample = RingSample {
            taken,
            now_ms,
            unfinished: scan.unfinished,
            owed: scan.owed.len() as u64,
            backlog,
            heap,
            forgotten,
            deleted,
        };
        Ok((sample, locks))
    }

    /// Executor rounds this node took for its status since it started: at most one per
    /// [`crate::SAMPLE_MAX_AGE`] for the status requests and metrics scrapes that do not count
    /// locks, however many there are, plus one per status that counts locks (for tests and
    /// checks).
    pub fn status_rounds(&self) -> u64 {
        self.samples.rounds()
    }

    /// The node's counters and running recoveries.
    pub fn board(&self) -> &Arc<StatusBoard> {
        &self.board
    }

    /// Lets its metrics report the TCP verbs server that serves its MemStore (the server is
    /// started before the node, by whoever maps the MemStore). Only the first call counts.
    pub fn watch_verbs_server(&self, counts: redt_dc_executor::ServerCountsHandle) {
        let _ = self.verbs_server.set(counts);
    }

    /// The counts of the TCP verbs server serving its MemStore, if one was given
    /// ([`Node::watch_verbs_server`]).
    pub fn verbs_server_counts(&self) -> Option<redt_dc_executor::ServerCounts> {
        self.verbs_server.get().map(|h| h.counts())
    }

    /// The answers its coordinators gave since it started, for its metrics.
    pub fn answers(&self) -> &Arc<AnswerCounters> {
        &self.answers
    }

    /// Its DC's data path (verbs, layout), for its metrics.
    pub(crate) fn data_path(&self) -> &Arc<DcHandle> {
        &self.dc
    }

    /// Whether [`Node::shutdown`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// `body` in an envelope from this node, at its epoch.
    pub(crate) fn envelope(&self, body: Body) -> Envelope {
        Envelope { epoch: self.epochs.epoch().0, from: self.id.0 as u32, body: Some(body) }
    }

    /// A fresh transaction id coordinated by this node ([`TxnIds::issue`]).
    ///
    /// # Errors
    /// As [`TxnIds::issue`], when the current incarnation is used up and no fresh one can be
    /// taken.
    pub(crate) fn next_txn(&self) -> Result<TxnId> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner()).issue(&self.dc).map_err(Error::from)
    }

    /// Sends a typed request to `peer` and decodes its reply; to itself, the request is
    /// served in place (no network), exactly as a peer would serve it. Boxed: serving a
    /// request can drive a machine that calls back here.
    pub(crate) fn call_typed(
        self: &Arc<Self>,
        peer: NodeId,
        request: Request,
    ) -> BoxFuture<'static, std::result::Result<Reply, String>> {
        let node = self.clone();
        Box::pin(async move {
            if peer == node.id {
                return Ok(node.serve(peer, request).await);
            }
            let envelope = node.envelope(Body::from(request));
            let reply = node.transport.call(peer, envelope).await.map_err(|e| e.to_string())?;
            match reply.body {
                Some(b) => Reply::from_wire(peer, b),
                None => Err(format!("{} answered with an empty message", node.placement().node_name(peer))),
            }
        })
    }

    /// Serves one checked request from `from`: a baseline primary's (it needs the
    /// secondaries) through the primary's local step and a [`PrimaryTxn`], anything else on
    /// the executor core.
    async fn serve(self: &Arc<Self>, from: NodeId, request: Request) -> Reply {
        let span = request_span(self.id, from, &request);
        async move {
            let reply = self.serve_in_span(from, request).await;
            tracing::trace!(reply = reply_kind(&reply), "served");
            reply
        }
        .instrument(span)
        .await
    }

    /// [`Node::serve`]'s body, run inside the request's span.
    async fn serve_in_span(self: &Arc<Self>, from: NodeId, request: Request) -> Reply {
        let stopped = || Reply::Error { code: error_code::INTERNAL, message: "node shutting down".into() };
        if baseline::is_primary_request(&request) {
            let txn = request.txn();
            let Some(local) = self.exec.run(move |core, now_ms| baseline::primary::begin(core, request, now_ms)).await
            else {
                return stopped();
            };
            let m = PrimaryTxn::start(self.placement(), self.id, txn, local, self.options.clone(), Instant::now());
            let (tx, rx) = tokio::sync::oneshot::channel();
            let mut tx = Some(tx);
            tokio::spawn(
                self.clone()
                    .drive(m, move |action| {
                        if let (Action::Reply { reply }, Some(tx)) = (action, tx.take()) {
                            let _ = tx.send(reply);
                        }
                    })
                    .instrument(tracing::Span::current()),
            );
            return rx.await.unwrap_or_else(|_| stopped());
        }
        let lane = executor_lane(&request);
        let request = match (request, lane) {
            (Request::Execute(e), Lane::Bulk(_)) if !e.replicate => return self.serve_large_phase1(e, lane).await,
            (request, _) => request,
        };
        let reservations = match &request {
            Request::Reservations(r) => Some(r.ring),
            _ => None,
        };
        let txn = request.txn();
        // A phase 2, or a phase 1 carrying phase 2s, releases locks here.
        let decides = match &request {
            Request::Decide(_) => true,
            Request::Execute(e) => !e.carried.is_empty(),
            _ => false,
        };
        let queued = self
            .large_phase1s
            .when_free(txn, || self.exec.submit(lane, move |core, now_ms| core.handle(from, request, now_ms)));
        let Some(queued) = queued.await else { return stopped() };
        let Ok(mut handled) = queued.await else { return stopped() };
        // A phase 1 waiting for a lock comes back from the core, to be handed to it again.
        while let Some((at_ms, request)) = handled.retry.take() {
            self.wait_for_locks(at_ms).await;
            let Some(h) = self.exec.run_in(lane, move |core, now_ms| core.handle(from, request, now_ms)).await else {
                return stopped();
            };
            // The catch-ups of the phase 2s the first try applied are still owed.
            let owed = std::mem::take(&mut handled.catch_up);
            handled = h;
            handled.catch_up.extend(owed);
        }
        if decides {
            // Phase 2 released locks here: the phase 1s waiting for them try again now.
            self.locks_released.notify_waiters();
        }
        let reply = self.answered(handled);
        match (reservations, reply) {
            // The side thread's executor holds reservations of its own (`large_phase1s`).
            (Some(ring), Reply::Reserved(mut held)) => {
                match self.exec.run_side(Lane::Short, move |side, _| side.reservations(ring)).await {
                    Some(Ok(side)) => {
                        held.extend(side);
                        held.sort_unstable();
                        Reply::Reserved(held)
                    }
                    Some(Err(e)) => Reply::Error { code: error_code::INTERNAL, message: e.to_string() },
                    None => stopped(),
                }
            }
            (_, reply) => reply,
        }
    }

    /// Waits until `at_ms` (the executor thread's clock, `SystemClock`), or until a decision
    /// applied on this node may have released a lock, whichever comes first.
    async fn wait_for_locks(&self, at_ms: u64) {
        let released = self.locks_released.notified();
        let wait = Duration::from_millis(at_ms.saturating_sub(SystemClock.now_ms()));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = released => {}
        }
    }

    /// Serves a phase 1 of more than [`BULK_WEIGHT`] operations: the core checks and plans it,
    /// the executor's side thread runs it in its client's bulk share `lane`, the core keeps its
    /// vote (`crate::executor_thread`); requests about the same transaction wait meanwhile
    /// (`crate::large_phase1s`).
    async fn serve_large_phase1(self: &Arc<Self>, e: Execute, lane: Lane) -> Reply {
        let stopped = || Reply::Error { code: error_code::INTERNAL, message: "node shutting down".into() };
        let (txn, deadline_ms) = (e.txn, e.deadline_ms);
        let mut e = e;
        if !e.carried.is_empty() {
            // The phase 2s it carries first, each paid as its own delivery would be.
            let mut args = Execute { carried: std::mem::take(&mut e.carried), ..e.clone() };
            let applied = self.exec.run(move |core, _| core.apply_carried(&mut args));
            let Some(debts) = applied.await else { return stopped() };
            for debt in debts {
                self.pay_catch_up(debt, None);
            }
        }
        let begin = move |core: &mut ExecutorCore, now_ms| match core.begin_execute(&e, now_ms) {
            Ok(Phase1::Run(sub)) => Ok(sub),
            Ok(Phase1::Answered(vote)) => Err(Box::new(core.answer_vote(Ok(vote)))),
            Err(err) => Err(Box::new(core.answer_vote(Err(err)))),
        };
        let (queued, running) = self.large_phase1s.start(txn, || self.exec.submit(Lane::Short, begin)).await;
        let Some(queued) = queued else { return stopped() };
        let sub = match queued.await {
            Ok(Ok(sub)) => sub,
            Ok(Err(answered)) => return self.answered(*answered),
            Err(_) => return stopped(),
        };
        let Some(vote) =
            self.exec.run_side(lane, move |side, now_ms| run_phase1(side, &sub, deadline_ms, now_ms)).await
        else {
            return stopped();
        };
        let kept = self.exec.run(move |core, _| {
            let vote = core.finish_execute(txn, vote);
            core.answer_vote(vote)
        });
        let Some(handled) = kept.await else { return stopped() };
        drop(running);
        self.answered(handled)
    }

    /// The reply to a request the executor core handled, counted for status, with the
    /// catch-up it owes paid.
    fn answered(self: &Arc<Self>, h: Handled) -> Reply {
        match &h.reply {
            Reply::Vote { vote, .. } if matches!(vote.abort, Some(AbortReason::HeapFull(_))) => {
                self.board.heap_full_vote();
            }
            Reply::Error { code: error_code::OVER_LIMIT, .. } => self.board.refused_over_limit(),
            _ => {}
        }
        for debt in h.catch_up {
            self.pay_catch_up(debt, None);
        }
        h.reply
    }

    /// Runs one transaction as its coordinator under the configured protocol
    /// ([`CoordinatorOptions::protocol`]: RedT, RedT over TCP, or a baseline) and returns what
    /// the client is told (RedT §4.2, §4.3 Table 1; docs/design.md §2). With early ack, a commit
    /// returns right after the decision and the rest continues in the background.
    pub async fn submit(self: &Arc<Self>, call: ProcedureCall) -> TxnAnswer {
        match self.submit_as(call, 0, None).await {
            Ok(o) => o,
            Err(e) => TxnAnswer::refused(TxnId(0), e.to_string()),
        }
    }

    /// Reserves a transaction id for `owner` to submit with later ([`Node::submit_as`]):
    /// returns it, the node's hybrid-logical-clock reading now (the transaction's start will
    /// be above it) and the reservation's token, a random secret. The id is never issued
    /// again; it can be used once, by `owner` showing the token only, within
    /// [`ReservedIds::VALID_FOR`] (2 s).
    ///
    /// # Errors
    /// As [`TxnIds::issue`].
    pub fn reserve_txn(&self, owner: Caller) -> Result<(TxnId, Cts, u64)> {
        let txn = self.next_txn()?;
        let at = self.hlc.tick(SystemClock.now_ms());
        let at_ms = at.0 >> redt_dc_executor::LOGICAL_BITS;
        let token = rand::random::<u64>();
        self.reserved.lock().unwrap_or_else(|p| p.into_inner()).reserve(txn, at_ms, owner, token);
        Ok((txn, at, token))
    }

    /// Whether `caller`, showing `token`, holds the reservation of `txn` at this node
    /// ([`Node::reserve_txn`]), used or not.
    pub fn reservation_held(&self, txn: TxnId, caller: Caller, token: u64) -> bool {
        self.reserved.lock().unwrap_or_else(|p| p.into_inner()).holds(txn, caller, token)
    }

    /// Who reserved `txn` at this node ([`Node::reserve_txn`]), used or not: `None` if this
    /// node, in its current life, did not or has forgotten it (`ReservedIds::KEPT`).
    pub fn reservation_owner(&self, txn: TxnId) -> Option<Caller> {
        self.reserved.lock().unwrap_or_else(|p| p.into_inner()).owner(txn)
    }

    /// [`Node::submit`], under the id of `reserved` if given: `(id, caller, token)`, an id
    /// this node reserved for `caller` with [`Node::reserve_txn`], with the token it gave, and
    /// has not used; else under a fresh id. `share` is the submitter's share of the executors' bulk lane
    /// ([`Caller::share`]; 0 for the node's own submissions).
    ///
    /// A call over the topology's limits ([`redt_protocol::limits::check_call`]) is answered aborted
    /// at once, its text naming the limit, and counted: no id is taken or used (a reserved
    /// one stays reserved), nothing is planned, sent or written.
    ///
    /// # Errors
    /// [`NotReserved`] when the id is not reserved here, already used, its reservation
    /// expired, or it was reserved by another caller or under another token: nothing was run (an expired id is used
    /// up all the same; one refused to another caller stays its owner's).
    pub async fn submit_as(
        self: &Arc<Self>,
        call: ProcedureCall,
        share: u64,
        reserved: Option<(TxnId, Caller, u64)>,
    ) -> std::result::Result<TxnAnswer, NotReserved> {
        if let Err(over) = redt_protocol::limits::check_call(&self.placement().limits, &call) {
            self.board.refused_over_limit();
            tracing::info!(node = %self.name(), "transaction refused: {over}");
            return Ok(TxnAnswer::refused(reserved.map_or(TxnId(0), |(txn, _, _)| txn), over.to_string()));
        }
        let start = Instant::now();
        let ts = self.hlc.tick(SystemClock.now_ms());
        if let Some((txn, caller, token)) = reserved {
            let start_ms = ts.0 >> redt_dc_executor::LOGICAL_BITS;
            self.reserved.lock().unwrap_or_else(|p| p.into_inner()).take(txn, start_ms, caller, token)?;
        }
        let txn = match reserved.map(|(txn, _, _)| Ok(txn)).unwrap_or_else(|| self.next_txn()) {
            Ok(txn) => txn,
            Err(e) => {
                tracing::error!(node = %self.name(), "no transaction id: {e}");
                return Ok(TxnAnswer::refused(TxnId(0), format!("no transaction id: {e}")));
            }
        };
        let (topology, options) = (self.placement(), self.options.clone());
        Ok(match Baseline::of(self.options.protocol) {
            None => {
                let hold = crate::takeover_gate::Hold::of(&options, reserved.is_some());
                self.run_held(txn, call, share, (start, ts), hold).await
            }
            Some(b) => {
                let m = BaselineTxn::start(b, topology, self.id, txn, call, options, start).map_err(Error::from);
                self.coordinate(txn, start, m).await
            }
        })
    }

    /// The longest an outcome query waits for a decision on this node: long enough for the
    /// recoverers of every DC to take their turn at a transaction started now (its phase-1
    /// timeout, the clock-skew bound, another DC's wait, a turn per DC and two rounds:
    /// [`crate::RecoveryOptions::recover_after`]), at most 30 s.
    pub fn outcome_wait(&self) -> Duration {
        let topology = self.placement();
        let r = self.options.recovery_options(&topology);
        let turns = r.turn * topology.dcs.len() as u32;
        (r.recover_after(self.options.phase1_timeout, false) + turns + 2 * r.round_timeout).min(Duration::from_secs(30))
    }

    /// What became of `txn`: asks one node of every DC to look it up in its DC's rings and
    /// decision logs ([`ExecutorCore::lookup_txn`], read-only: nothing is fenced or promised,
    /// no recovery is started) and judges the findings ([`redt_protocol::outcome::judge`]); asks
    /// again every 200 ms until the answer is final (committed or aborted) or `wait` has
    /// passed (at most [`Node::outcome_wait`]; `Duration::ZERO`: one round, answered as it
    /// is): the recoverers decide orphans on their own meanwhile. `start_after` and
    /// `valid_for_ms` are the reservation's (a lower bound of the start, and how long after
    /// it the transaction could start, in ms; never taken below [`ReservedIds::VALID_FOR`]);
    /// without them a transaction that never ran stays unknown. The rule reads RedT's redo
    /// entries: under a baseline protocol the answer is always [`OutcomeLookup::Unknown`].
    ///
    /// Rounds are shared ([`crate::outcome_queries`]): a query joins the round of the same
    /// transaction and start that is running or ended less than 200 ms ago, and a final
    /// answer is remembered (the last 10,000) and given again without a round.
    pub async fn outcome_query(
        self: &Arc<Self>,
        txn: TxnId,
        start_after: Option<Cts>,
        valid_for_ms: u64,
        wait: Duration,
    ) -> OutcomeLookup {
        if Baseline::of(self.options.protocol).is_some() {
            return OutcomeLookup::Unknown(format!(
                "{txn}: outcome queries read RedT's redo entries; this cluster runs {:?}",
                self.options.protocol
            ));
        }
        let t0 = Instant::now();
        let wait = wait.min(self.outcome_wait());
        let valid_for_ms = valid_for_ms.max(ReservedIds::VALID_FOR.as_millis() as u64);
        if let Some(known) = self.outcome_queries.remembered(txn, start_after, valid_for_ms) {
            return known;
        }
        let mut start = start_after;
        loop {
            let findings = self.outcome_queries.findings(txn, start, || self.lookup_everywhere(txn, start)).await;
            let now_ms = SystemClock.now_ms();
            let deadline = Deadline {
                latest_ms: start_after.map(|s| {
                    (s.0 >> redt_dc_executor::LOGICAL_BITS)
                        + valid_for_ms
                        + self.options.phase1_timeout.as_millis() as u64
                }),
                phase1_timeout_ms: self.options.phase1_timeout.as_millis() as u64,
                clock_skew_bound_ms: self.options.clock_skew_bound.as_millis() as u64,
                now_ms,
            };
            let lookup = redt_protocol::outcome::judge(txn, &findings, &self.epochs.all(), &deadline);
            self.outcome_queries.remember(txn, start_after, valid_for_ms, &lookup);
            if lookup.is_final() || t0.elapsed() >= wait || self.is_closed() {
                return lookup;
            }
            // An entry found tells the exact start: the decision-log lookups use it next time.
            if let Some(s) = findings.iter().find_map(|f| match &f.kind {
                redt_protocol::outcome::FindingKind::Found(x) => x.entry.as_ref().map(|e| e.start),
                _ => None,
            }) {
                start = Some(s);
            }
            tokio::time::sleep(Duration::from_millis(200).min(wait.saturating_sub(t0.elapsed()))).await;
        }
    }

    /// What this node's outcome queries cost and saved since it started: queries admitted and
    /// refused over [`crate::outcome_queries::MAX_IN_FLIGHT`], lookup rounds run and shared,
    /// answers given from remembered final lookups, `TxnLookup` requests served to other nodes.
    pub fn outcome_query_counts(&self) -> OutcomeQueryCounts {
        self.outcome_queries.counts()
    }

    /// The findings of one lookup of `txn` in every DC: this node's own DC on its executor
    /// core, every other DC at its nodes in turn until one answers (a DC none of whose nodes
    /// answers gives none: the judge counts its replicas as unseen).
    async fn lookup_everywhere(self: &Arc<Self>, txn: TxnId, start: Option<Cts>) -> Vec<Finding> {
        let topology = self.placement();
        let own = topology.nodes[self.id.0 as usize].dc;
        let per_call = self.options.recovery_options(&topology).round_timeout.max(Duration::from_millis(500));
        let mut asks = JoinSet::new();
        for dc in &topology.dcs {
            let node = self.clone();
            let nodes = dc.nodes.clone();
            let is_own = dc.id == own;
            asks.spawn(async move {
                if is_own {
                    // A full read of the DC's rings: bulk work, in the node's own share.
                let lane = Lane::Bulk(0);
                return node.exec.run_in(lane, move |core, _| core.lookup_txn(txn, start)).await.unwrap_or_default();
                }
                let body = Body::TxnLookup(TxnLookupRequest { txn: txn.0, start_after: start.map(|s| s.0) });
                for peer in nodes {
                    let call = node.transport.call_with_timeout(peer, node.envelope(body.clone()), per_call);
                    let Ok(reply) = call.await else { continue };
                    if let Some(Body::TxnFound(r)) = reply.body {
                        let found: std::result::Result<Vec<Finding>, String> =
                            r.findings.iter().map(Finding::from_wire).collect();
                        match found {
                            Ok(f) => return f,
                            Err(e) => tracing::warn!(peer = %node.placement().node_name(peer), "a malformed lookup answer: {e}"),
                        }
                    }
                }
                Vec::new()
            });
        }
        let mut all = Vec::new();
        while let Some(r) = asks.join_next().await {
            all.extend(r.unwrap_or_default());
        }
        all
    }

    /// Drives a coordinator's transaction `m` (or answers its start-up error as an abort),
    /// recording the counters at its answer and when it finishes.
    pub(crate) async fn coordinate<M: TxnMachine + Send + 'static>(
        self: &Arc<Self>,
        txn: TxnId,
        start: Instant,
        m: Result<M>,
    ) -> TxnAnswer {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                // A call under `check_call`'s limits can still plan more records than
                // `limits.max_ops_per_txn` (a TPC-C call's are known once it is built).
                if matches!(e, Error::Protocol(redt_protocol::Error::OverLimit(_))) {
                    self.board.refused_over_limit();
                    tracing::info!(node = %self.name(), "transaction refused: {e}");
                }
                self.takeover.finished(txn);
                return TxnAnswer::refused(txn, e.to_string());
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut tx = Some(tx);
        let (stats, board, answers) = (self.stats.clone(), self.board.clone(), self.answers.clone());
        // The claim fails only if a recoverer here runs a transaction of the same id, which
        // `TxnIds` rules out (docs/design.md, "Recovery", point 4); the coordinator runs
        // anyway.
        let claim = self.busy.claim(txn);
        let on_action = move |action: Action| match action {
            Action::Answer { answer, class, cost } => {
                answers.record(class, &answer.status, answer.cause, start.elapsed());
                board.answered(answer.status.outcome());
                match (&answer.status, cost) {
                    (TxnStatus::Committed, Some(c)) => stats.committed(class, c, start.elapsed().as_micros() as u64),
                    (TxnStatus::Committed, None) => {}
                    (TxnStatus::Aborted(_), _) => stats.aborted(class),
                    (TxnStatus::Unknown(_), _) => stats.unknown(class),
                }
                if let Some(tx) = tx.take() {
                    let _ = tx.send(answer);
                }
            }
            Action::Finished { class, after_answer: Some(c) } => stats.add_cost(class, c.messages, c.round_trips),
            Action::Finished { .. } | Action::Reply { .. } | Action::Send { .. } => {}
        };
        let node = self.clone();
        // One span per transaction on its coordinator, at debug level: a disabled span costs
        // one callsite check, and its fields are not evaluated.
        let span = tracing::debug_span!("txn", %txn, coordinator = %self.id, protocol = %self.options.protocol);
        tokio::spawn(
            async move {
                let _claim = claim;
                node.clone().drive(m, on_action).await;
                node.takeover.finished(txn);
            }
            .instrument(span),
        );
        rx.await.unwrap_or_else(|_| TxnAnswer::unknown(txn, "the coordinator stopped before answering"))
    }

    /// The one driver loop of every [`TxnMachine`] (see [`redt_protocol::machine`] for the order):
    /// carries each [`Action::Send`] out as a request (to itself: served in place), feeds the
    /// machine its replies, failures and timer until it is done, and hands every other action
    /// to `on_action`. Stops early when the node shuts down. Returns the machine, done or
    /// stopped.
    pub(crate) async fn drive<M: TxnMachine + Send + 'static>(
        self: Arc<Self>,
        mut m: M,
        mut on_action: impl FnMut(Action) + Send,
    ) -> M {
        let mut inflight: JoinSet<(u64, std::result::Result<Reply, String>)> = JoinSet::new();
        let mut phase2_told = !self.options.takeover;
        loop {
            while let Some(action) = m.poll_action() {
                match action {
                    Action::Send { attempt, to, request } => {
                        tracing::trace!(to = %self.placement().node_name(to), attempt, "send");
                        let call = self.call_typed(to, request);
                        inflight.spawn(async move { (attempt, call.await) }.instrument(tracing::Span::current()));
                    }
                    other => on_action(other),
                }
            }
            if !phase2_told {
                if let Some(phase2) = m.phase2() {
                    // Decided: the transactions held behind it go, carrying its phase 2.
                    self.takeover.decided(m.txn(), phase2);
                    phase2_told = true;
                }
            }
            if m.is_done() || self.closed.load(Ordering::SeqCst) {
                break;
            }
            let timer = m.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                Some(r) = inflight.join_next() => {
                    if let Ok((attempt, r)) = r {
                        match r {
                            Ok(reply) => m.handle_reply(attempt, reply, Instant::now()),
                            Err(e) => m.handle_failure(attempt, &e, Instant::now()),
                        }
                    }
                }
                _ = sleep_until_opt(timer), if timer.is_some() => m.handle_timeout(Instant::now()),
                else => {
                    tracing::error!(txn = %m.txn(), "a machine has nothing to wait for but is not done");
                    break;
                }
            }
        }
        // Requests still in flight to unreachable nodes finish (or time out) on their own.
        if !inflight.is_empty() {
            tokio::spawn(async move { while inflight.join_next().await.is_some() {} });
        }
        m
    }

    async fn handle(self: Arc<Self>, from: Caller, msg: Envelope) -> Envelope {
        let reply = |body| self.envelope(body);
        // The envelope's epoch is the sender's current one, for information: a client's comes
        // from its topology file, and a node's requests to finish an old-epoch transaction
        // (decisions, recovery, catch-up) must be served whatever its epoch. The epoch fence
        // is on phase 1 only, by the epoch the transaction was planned in
        // (`ExecutorCore::execute`).
        let err = |code, message: String| {
            self.envelope(Body::Error(ErrorReply { code, message, current_epoch: self.epochs.epoch().0 }))
        };
        let Some(body) = msg.body else { return err(error_code::MALFORMED, "empty message".into()) };
        let node_only = |kind: &str| {
            self.refused_role(from, kind, "node");
            err(error_code::FORBIDDEN, needs_node(kind, from))
        };
        match body {
            Body::Execute(_)
            | Body::Record(_)
            | Body::Decide(_)
            | Body::Accept(_)
            | Body::Prepare(_)
            | Body::LogDecision(_)
            | Body::RecoveryPrepare(_)
            | Body::Reservations(_)
            | Body::SnapshotRead(_)
            | Body::ReclaimCheck(_) => {
                let Some(peer) = from.node() else { return node_only(body_kind(&body)) };
                let request = match Request::try_from(body) {
                    Ok(r) => r,
                    Err(e) => return err(error_code::MALFORMED, e),
                };
                match request.check(&self.placement()) {
                    Ok(()) => {}
                    Err(BadSubTxn::OverLimit(over)) => {
                        self.board.refused_over_limit();
                        tracing::info!(node = %self.name(), peer = %self.placement().node_name(peer), "request refused: {over}");
                        return err(error_code::OVER_LIMIT, over.to_string());
                    }
                    Err(BadSubTxn::Malformed(e)) => return err(error_code::MALFORMED, e),
                }
                let txn = request.txn();
                reply(self.serve(peer, request).await.into_wire(txn, self.epochs.epoch().0))
            }
            Body::Submit(req) => {
                let Some(call) = req.call else { return err(error_code::MALFORMED, "submit without a call".into()) };
                match self.submit_as(call, from.share(), req.txn.map(|t| (TxnId(t), from, req.token))).await {
                    Ok(out) => reply(Body::Outcome(answer_to_msg(&out))),
                    Err(e) => {
                        if matches!(e, NotReserved::OtherOwner(_)) {
                            tracing::info!(node = %self.name(), caller = from.role(), "submission refused: {e}");
                        }
                        err(error_code::NOT_RESERVED, e.to_string())
                    }
                }
            }
            Body::ReserveTxn(_) => match self.reserve_txn(from) {
                Ok((txn, at, token)) => reply(Body::TxnReserved(TxnReservedReply {
                    txn: txn.0,
                    start_after: at.0,
                    valid_for_ms: ReservedIds::VALID_FOR.as_millis() as u64,
                    token,
                })),
                Err(e) => err(error_code::INTERNAL, format!("no transaction id: {e}")),
            },
            Body::OutcomeQuery(q) if self.reservation_owner(TxnId(q.txn)).is_some_and(|owner| owner != from) => {
                let e = NotReserved::OtherOwner(TxnId(q.txn));
                tracing::info!(node = %self.name(), caller = from.role(), "outcome query refused: {e}");
                err(error_code::FORBIDDEN, e.to_string())
            }
            Body::OutcomeQuery(q) => {
                let txn = TxnId(q.txn);
                let asker = redt_transport::current_connection().map_or(Asker::Caller(from), Asker::Connection);
                let _place = match self.outcome_queries.admit(asker) {
                    Ok(place) => place,
                    Err(over) => {
                        self.board.refused_over_limit();
                        tracing::debug!(node = %self.name(), caller = from.role(), "outcome query refused: {over}");
                        return err(error_code::OVER_LIMIT, over.to_string());
                    }
                };
                // Only the identity that reserved the id here is waited for (its queries are
                // as many as its lost answers); anyone else gets one round, and polls.
                let wait = match self.reservation_held(txn, from, q.token) {
                    true if q.wait_ms == 0 => self.outcome_wait(),
                    true => Duration::from_millis(q.wait_ms),
                    false => Duration::ZERO,
                };
                let start_after = q.start_after.map(Cts::new);
                let lookup = self.outcome_query(txn, start_after, q.valid_for_ms, wait).await;
                let (state, cts, detail) = lookup.to_wire();
                let bound_ms = self.outcome_wait().as_millis() as u64;
                reply(Body::TxnOutcome(TxnOutcomeReply { txn: q.txn, state, cts, detail, bound_ms }))
            }
            Body::TxnLookup(q) => {
                if from.node().is_none() {
                    return node_only("txn-lookup");
                }
                let (txn, start) = (TxnId(q.txn), q.start_after.map(Cts::new));
                self.outcome_queries.lookup_served();
                match self.exec.run_in(Lane::Bulk(from.share()), move |core, _| core.lookup_txn(txn, start)).await {
                    Some(found) => {
                        reply(Body::TxnFound(TxnFoundReply { findings: found.iter().map(Finding::to_wire).collect() }))
                    }
                    None => err(error_code::INTERNAL, "node shutting down".into()),
                }
            }
            Body::VersionedRead(req) => match self.versioned_read(from, req.table, req.keys).await {
                Ok(items) => reply(Body::VersionedValues(redt_protocol::message::versioned_to_msg(items))),
                Err((code, message)) => err(code, message),
            },
            Body::NetemSet(_) if !from.is_operator() => {
                self.refused_role(from, "netem set", "operator");
                err(error_code::FORBIDDEN, needs_operator("netem set", from))
            }
            Body::NetemSet(req) => match self
                .wan
                .lock()
                .map_err(|_| "WAN model poisoned".to_string())
                .and_then(|mut wan| crate::netem_admin::apply(&self.placement(), &mut wan, &req))
            {
                Ok(()) => reply(Body::Ack(AckReply {})),
                Err(e) => err(error_code::MALFORMED, e),
            },
            // Counting locks scans the whole index on the executor thread, which every
            // transaction of this node waits for: operators (and nodes) only.
            Body::Status(req) if req.count_locks && matches!(from, Caller::Client(_)) => {
                self.refused_role(from, "status --locks", "operator");
                err(error_code::FORBIDDEN, needs_operator("status --locks", from))
            }
            Body::Status(req) => match self.status(req.count_locks).await {
                Ok(s) => reply(Body::NodeStatus(s.to_wire())),
                Err(e) => err(error_code::INTERNAL, e.named(&self.placement())),
            },
            Body::Heartbeat(hb) => {
                let Some(peer) = from.node() else { return node_only("heartbeat") };
                // The transport took the frame as evidence that `peer` is alive; heartbeats
                // travel as datagrams now, and this answer serves callers that send them as
                // requests.
                let _ = (peer, hb.sent_at_us);
                reply(Body::Ack(AckReply {}))
            }
            Body::Raft(m) => {
                let Some(peer) = from.node() else { return node_only("raft") };
                let m = match redt_membership::decode_message(&m.data) {
                    Ok(m) => m,
                    Err(e) => return err(error_code::MALFORMED, format!("undecodable Raft message: {e}")),
                };
                // Raft believes a message's own `from`: a node may speak for itself only.
                let claimed = redt_membership::node_of(m.from);
                if claimed != Some(peer) {
                    self.board.raft_wrong_sender();
                    let topology = self.placement();
                    let claimed = claimed.map_or_else(|| format!("raft id {}", m.from), |c| topology.node_name(c));
                    if let Some(unlogged) = self.raft_warnings.handle_event(Instant::now()) {
                        tracing::warn!(
                            node = %self.name(),
                            peer = %topology.node_name(peer),
                            claimed = %claimed,
                            unlogged,
                            "dropped a Raft message naming another sender than the node that sent it"
                        );
                    }
                    return err(
                        error_code::FORBIDDEN,
                        format!(
                            "a Raft message from {} names {claimed} as its sender: dropped",
                            topology.node_name(peer)
                        ),
                    );
                }
                match &self.raft {
                    Some(inbox) => {
                        inbox.deliver(m);
                        reply(Body::Ack(AckReply {}))
                    }
                    None => err(error_code::MALFORMED, "this node runs no membership peer (failover is off)".into()),
                }
            }
            _ => err(error_code::MALFORMED, "unexpected message kind".into()),
        }
    }
}

impl Node {
    /// Serves a versioned read of cell 0 of `keys` of `table` for `from` (docs/design.md,
    /// "Optimistic transactions: versioned reads and CHECK"): the keys whose partition has a
    /// replica in this node's DC are read from the DC's replicas without locks, on the
    /// executor thread in `from`'s bulk share; the others are forwarded, one request per
    /// destination, to a replica of the nearest DC holding them
    /// ([`redt_protocol::versioned_read::route`]). Another node's request is read in this DC
    /// only (it forwarded it here). One answer per key, in order.
    ///
    /// # Errors
    /// `(code, message)`: the refusals of [`redt_protocol::versioned_read::ReadRefused`] (an
    /// over-limit one counted), a forwarded read's error as its node answered it (named), a
    /// node that could not be reached (`INTERNAL`), or a malformed answer.
    async fn versioned_read(
        self: &Arc<Self>,
        from: Caller,
        table: u32,
        keys: Vec<u64>,
    ) -> std::result::Result<Vec<redt_protocol::versioned_read::Versioned>, (u32, String)> {
        use redt_protocol::versioned_read::{self as vr, ReadRefused};
        let topology = self.placement();
        let refused = |e: ReadRefused| {
            if matches!(e, ReadRefused::OverLimit(_)) {
                self.board.refused_over_limit();
            }
            (e.code(), e.to_string())
        };
        let id = vr::check(&topology, table, &keys).map_err(refused)?;
        let own = topology.nodes[self.id.0 as usize].dc;
        let route = match from.node() {
            Some(_) => vr::Route { local: (0..keys.len()).collect(), ..vr::Route::default() },
            None => vr::route(&topology, own, id, &keys),
        };
        let mut asks = JoinSet::new();
        for (to, idx) in route.remote {
            let sub: Vec<u64> = idx.iter().map(|&i| keys[i]).collect();
            let call = self.call_typed(to, Request::VersionedRead { table, keys: sub });
            let name = topology.node_name(to);
            asks.spawn(async move { (idx, name, call.await) });
        }
        let mut parts = Vec::new();
        if !route.local.is_empty() {
            let sub: Vec<u64> = route.local.iter().map(|&i| keys[i]).collect();
            let read = self.exec.run_in(Lane::Bulk(from.share()), move |core, _| core.versioned_read(table, &sub));
            match read.await {
                Some(Ok(items)) => parts.push((route.local, items)),
                Some(Err(e)) => return Err(refused(e)),
                None => return Err((error_code::INTERNAL, "node shutting down".into())),
            }
        }
        while let Some(joined) = asks.join_next().await {
            let Ok((idx, name, answer)) = joined else {
                return Err((error_code::INTERNAL, "a forwarded versioned read did not finish".into()));
            };
            match answer {
                Ok(Reply::VersionedValues(items)) => parts.push((idx, items)),
                Ok(Reply::Error { code, message }) => return Err((code, format!("{name}: {message}"))),
                Ok(_) => return Err((error_code::INTERNAL, format!("{name} answered a versioned read unexpectedly"))),
                Err(e) => return Err((error_code::INTERNAL, format!("{name} did not answer a versioned read: {e}"))),
            }
        }
        vr::assemble(&keys, parts)
            .ok_or_else(|| (error_code::INTERNAL, "a forwarded versioned read answered other keys".to_string()))
    }

    /// Counts a request `what` refused because `from`'s certificate lacks role `needs`, and
    /// logs it at WARN, at most one line per [`WARN_EVERY`] (`unlogged`: the refusals not
    /// logged since the line before).
    fn refused_role(&self, from: Caller, what: &str, needs: &str) {
        self.board.refused_role();
        if let Some(unlogged) = self.role_warnings.handle_event(Instant::now()) {
            tracing::warn!(
                node = %self.name(),
                caller = from.role(),
                unlogged,
                "refused `{what}`: it needs the {needs} role"
            );
        }
    }
}

/// The name of a request kind nodes send each other, as refusals and logs name it.
fn body_kind(body: &Body) -> &'static str {
    match body {
        Body::Execute(_) => "execute",
        Body::Record(_) => "record",
        Body::Decide(_) => "decide",
        Body::Accept(_) => "accept",
        Body::Prepare(_) => "prepare",
        Body::LogDecision(_) => "log-decision",
        Body::RecoveryPrepare(_) => "recovery-prepare",
        Body::Reservations(_) => "reservations",
        Body::SnapshotRead(_) => "snapshot-read",
        Body::ReclaimCheck(_) => "reclaim-check",
        _ => "a node's request",
    }
}

/// The refusal of a request `what` only nodes send each other, from `from`, which is none.
fn needs_node(what: &str, from: Caller) -> String {
    format!(
        "`{what}` is accepted from nodes only (a certificate for redt://node/<dc>/<node> of this cluster); \
         this caller's certificate has the {} role",
        from.role()
    )
}

/// The refusal of an admin request `what` from `from`, which lacks the operator role.
fn needs_operator(what: &str, from: Caller) -> String {
    format!(
        "`{what}` needs the operator role (a certificate for redt://operator/<name>: `redt certs issue --role \
         operator`); this caller's certificate has the {} role",
        from.role()
    )
}

/// The span of one request a node serves for a transaction (debug level): `txn` (its
/// Display), `node` (the server), `from` (the sender), `kind` and, where the request carries
/// them, the transaction's `coordinator` and participant `dcs`. Disabled, it costs one
/// callsite check and evaluates none of its fields.
/// The executor lane `request` runs in (`redt_protocol::executor_queue`): a phase 1 heavier than
/// [`BULK_WEIGHT`] operations in its client's bulk share, everything else in the short lane.
fn executor_lane(request: &Request) -> Lane {
    match request {
        Request::Execute(e) if redt_protocol::limits::call_weight(&e.call) > BULK_WEIGHT => Lane::Bulk(e.share),
        _ => Lane::Short,
    }
}

fn request_span(me: NodeId, from: NodeId, request: &Request) -> tracing::Span {
    let (kind, coordinator, dcs): (&str, Option<NodeId>, &[redt_proto::DcId]) = match request {
        Request::Execute(e) => ("execute", Some(e.coordinator), &e.participants),
        Request::Record(_) => ("record", None, &[]),
        Request::Decide(_) => ("decide", None, &[]),
        Request::Accept(a) => ("accept", Some(a.origin.coordinator), &a.origin.participants),
        Request::Prepare(_) => ("prepare", None, &[]),
        Request::LogDecision(_) => ("log-decision", None, &[]),
        Request::RecoveryPrepare(r) => ("recovery-prepare", Some(r.coordinator), &r.participants),
        Request::Reservations(_) => ("reservations", None, &[]),
        Request::SnapshotRead(_) => ("snapshot-read", None, &[]),
        Request::ReclaimCheck(_) => ("reclaim-check", None, &[]),
        Request::VersionedRead { .. } => ("versioned-read", None, &[]),
    };
    tracing::debug_span!(
        "serve",
        txn = %request.txn(),
        node = %me,
        %from,
        kind,
        coordinator = coordinator.map(tracing::field::display),
        dcs = ?dcs
    )
}

/// The name of a reply's kind, for the log.
fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Vote { .. } => "vote",
        Reply::Recorded(_) => "recorded",
        Reply::Decided(_) => "decided",
        Reply::Accepted(_) => "accepted",
        Reply::Prepared { .. } => "prepared",
        Reply::Ack => "ack",
        Reply::Promises(_) => "promises",
        Reply::Reserved(_) => "reserved",
        Reply::Snapshot { .. } => "snapshot",
        Reply::ReclaimChecked(_) => "reclaim-checked",
        Reply::VersionedValues(_) => "versioned-values",
        Reply::Error { .. } => "error",
    }
}

/// Sleeps until `t`, or for ever when there is no deadline (a `select!` arm's timer).
pub(crate) async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Encodes a client's answer for the wire.
pub fn answer_to_msg(o: &TxnAnswer) -> OutcomeReply {
    let (outcome, error) = match &o.status {
        TxnStatus::Committed => (0, String::new()),
        TxnStatus::Aborted(e) => (1, e.clone()),
        TxnStatus::Unknown(e) => (2, e.clone()),
    };
    // A cell's value is zero-padded to the cell's width: a thousand reads of a 2 KiB cell
    // would otherwise send 2 MiB, mostly zeros.
    let (reads, read_lens) = o
        .reads
        .iter()
        .map(|r| {
            let Some(v) = r else { return (Vec::new(), 0) };
            let kept = v.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
            (v[..kept].to_vec(), u32::try_from(v.len()).unwrap_or(u32::MAX))
        })
        .unzip();
    // The cause goes with aborts only (a machine sets none on other answers).
    let abort_cause = match o.status {
        TxnStatus::Aborted(_) => o.cause.map(|c| c.name().to_string()),
        _ => None,
    };
    OutcomeReply { outcome, error, reads, txn: o.txn.0, read_lens, abort_cause }
}

impl Node {
    /// The request handler that serves this node on its transport, and on its gRPC endpoint
    /// (`redt-grpc`); it holds the node weakly: a dropped node answers nothing.
    pub fn handler(self: &Arc<Self>) -> Arc<dyn Handler> {
        Arc::new(NodeHandler(Arc::downgrade(self)))
    }
}

struct NodeHandler(std::sync::Weak<Node>);

impl Handler for NodeHandler {
    fn timed_out(&self, _from: Caller, after: std::time::Duration) -> Envelope {
        match self.0.upgrade() {
            Some(n) => redt_transport::handler_timeout_reply(n.epochs.epoch().0, u32::from(n.id.0), after),
            None => redt_transport::handler_timeout_reply(0, 0, after),
        }
    }

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
