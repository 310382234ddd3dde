//! The client API: submit procedure calls to a running cluster's coordinators over QUIC
//! (mutual TLS with the cluster's client certificate), and operator requests such as
//! changing WAN conditions.

use crate::error::{Error, Result};
use crate::retry::{retrying, Retried, RetryPolicy};
use crate::status::NodeStatus;
use redt_proto::wire::{
    Body, Envelope, NetemSetRequest, OutcomeQueryRequest, ProcedureCall, ReserveTxnRequest, StatusRequest,
    SubmitRequest, VersionedReadRequest,
};
use redt_proto::{Cts, NodeId, Topology, TxnId};
use redt_protocol::machine::{TxnAnswer, TxnStatus};
use redt_protocol::outcome::{next_step, NextStep, OutcomeLookup};
use redt_protocol::stats::AbortCause;
/// One key of [`Client::read_versions`]: a committed image of its cell 0 (wire:
/// `VersionedItemMsg`). `key`; `version`, the cell's raw version word (update counter << 48 |
/// 48-bit commit timestamp; 0 for a key with no record), the operand of a CHECK of the key;
/// `value`, cell 0 as stored, padded back with zero bytes to the table's cell width (the wire
/// drops them; empty when not found); `found`, whether the key holds a value.
pub use redt_protocol::versioned_read::Versioned;
use redt_protocol::Error as ProtocolError;
use redt_transport::NodeIdentity;
use redt_transport::TransportError;
#[cfg(doc)]
use redt_transport::OPERATOR_IDENTITY_NAME;
use redt_transport::{check_identity, load_identity, SocketSpec, Transport, TransportConfig, CLIENT_IDENTITY_NAME};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a node that could not be reached is passed over by [`Client::submit_failover`]
/// and [`Client::outcome`].
const DOWN_FOR: Duration = Duration::from_secs(2);

/// A client of a running cluster.
pub struct Client {
    topology: Arc<Topology>,
    transport: Transport,
    /// Nodes no connection could be set up to, and when ([`Client::submit_failover`]).
    down: Mutex<HashMap<NodeId, Instant>>,
    /// How long one call waits for its answer.
    call_timeout: Duration,
}

/// A transaction id reserved at a coordinator (`Body::ReserveTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The id.
    pub txn: TxnId,
    /// The coordinator's clock when it reserved the id: the transaction starts above it.
    pub start_after: Cts,
    /// How long after `start_after` the coordinator accepts a submission with it, in ms.
    pub valid_for_ms: u64,
    /// The reservation's secret: the submission and the outcome queries show it, so no other
    /// client, even one with the same certificate, can use the id.
    pub token: u64,
}

/// What [`Client::submit_asking`] did and learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitReport {
    /// The coordinator that ran the call last (or the preferred one when none was reachable).
    pub coordinator: NodeId,
    /// What the client is told. After a lost answer: [`TxnStatus::Committed`] when the outcome
    /// query found the commit (with no reads: see `reads_lost`), [`TxnStatus::Unknown`]
    /// naming the transaction id when it found no decision in time, or the answer to the one
    /// resubmission when it found the transaction aborted.
    pub answer: TxnAnswer,
    /// The outcome query's last answer, if one was asked.
    pub asked: Option<OutcomeLookup>,
    /// The transaction whose answer was lost and which was found aborted, when the call was
    /// submitted again (under `answer.txn`).
    pub resubmitted_after: Option<TxnId>,
    /// The commit was learned from the outcome query: the values read were in the lost answer
    /// and are not available (`answer.reads` is empty).
    pub reads_lost: bool,
}

/// How often [`Client::outcome`] asks again while the answer is not final.
pub const OUTCOME_POLL_EVERY: Duration = Duration::from_millis(200);

/// What one outcome query at one node gave.
enum Asked {
    /// Its answer, and the node's bound on looking for a decision, if it said.
    Answer(OutcomeLookup, Option<Duration>),
    /// It has too many queries in flight (`error_code::OVER_LIMIT`); why, as it said.
    Busy(String),
    /// No answer; why.
    Failed(String),
}

/// A submission that reached a coordinator: its answer and the reservation it ran under.
struct Sent {
    node: NodeId,
    answer: TxnAnswer,
    reservation: Option<Reservation>,
}

impl Client {
    /// Connects (lazily) to the cluster of `topology` with the client certificate in
    /// `certs_dir` (as written by `redt certs init` / `redt cluster up`). Must run inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// A missing or unreadable certificate file (named in the error), a socket that cannot
    /// bind.
    pub fn connect(topology: Arc<Topology>, certs_dir: &Path, call_timeout: Duration) -> Result<Client> {
        Client::connect_as(topology, certs_dir, CLIENT_IDENTITY_NAME, call_timeout)
    }

    /// As [`Client::connect`], with the identity `name` of `certs_dir` (`<name>.pem`,
    /// `<name>.key`): [`OPERATOR_IDENTITY_NAME`] for admin requests such as
    /// [`Client::netem_set`]. The certificate is checked first, so an expired one is refused
    /// here, naming its end.
    ///
    /// # Errors
    /// As [`Client::connect`]; [`TransportError::TlsConfig`] for a certificate that expired,
    /// is not valid yet, is not from the directory's CA or does not fit its key.
    pub fn connect_as(topology: Arc<Topology>, certs_dir: &Path, name: &str, call_timeout: Duration) -> Result<Client> {
        let identity = load_identity(certs_dir, name)?;
        check_identity(&identity, std::time::SystemTime::now())?;
        Client::with_identity(topology, &identity, call_timeout)
    }

    /// [`Client::connect`] with an identity already loaded (an embedded cluster's
    /// `certs().client`). Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A socket that cannot bind.
    pub fn with_identity(topology: Arc<Topology>, identity: &NodeIdentity, call_timeout: Duration) -> Result<Client> {
        // The unspecified address: the kernel picks the source address per node, so nodes on
        // other hosts are reachable too (a loopback bind would reach loopback nodes only).
        // IPv6 when a node advertises an IPv6 address; host names are resolved to the family
        // of the socket when connecting.
        let bind: SocketAddr = if topology.nodes.iter().any(|n| n.advertise.ip().is_some_and(|ip| ip.is_ipv6())) {
            "[::]:0".parse().expect("static address")
        } else {
            "0.0.0.0:0".parse().expect("static address")
        };
        let cfg = TransportConfig { call_timeout, ..TransportConfig::default() };
        let transport = Transport::client(cfg, identity, SocketSpec::Bind(bind))?;
        Ok(Client { topology, transport, down: Mutex::new(HashMap::new()), call_timeout })
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    async fn call(&self, node: NodeId, body: Body) -> Result<Body> {
        let n = self
            .topology
            .nodes
            .get(node.0 as usize)
            .ok_or_else(|| Error::topology(format!("no {node} in the topology `{}`", self.topology.name)))?;
        let msg = Envelope { epoch: self.topology.epoch.0, from: u32::MAX, body: Some(body) };
        let reply = self.transport.call_at(&n.advertise, &n.name, msg).await?;
        match reply.body {
            Some(Body::Error(e)) => {
                Err(ProtocolError::Remote { node, name: n.name.clone(), message: e.message }.into())
            }
            Some(b) => Ok(b),
            None => Err(ProtocolError::Unexpected { node, name: n.name.clone() }.into()),
        }
    }

    /// Runs `call` as one transaction with `node` as its coordinator.
    ///
    /// A transport failure after the request may have been delivered gives
    /// [`TxnStatus::Unknown`]; this method never submits the call again (see
    /// [`Client::submit_retrying`] for retries of aborts, which certainly did not commit).
    pub async fn submit(&self, node: NodeId, call: ProcedureCall) -> TxnAnswer {
        answer_of(self.call(node, Body::Submit(SubmitRequest { call: Some(call), txn: None, token: 0 })).await)
    }

    /// Runs `call` as one transaction coordinated by `preferred` or, when no connection to
    /// it can be set up, by the next node of [`failover_order`] that can be reached (a
    /// client whose DC died goes on through another), asking what became of it when the
    /// coordinator's answer is lost. Returns the coordinator that answered and its answer:
    /// [`Client::submit_asking`]'s report, without the details.
    pub async fn submit_failover(&self, preferred: NodeId, call: ProcedureCall) -> (NodeId, TxnAnswer) {
        let r = self.submit_asking(preferred, call).await;
        (r.coordinator, r.answer)
    }

    /// Runs `call` as one transaction ("ask, don't resubmit blindly"):
    ///
    /// 1. reserves a transaction id at `preferred` or, when no connection to it can be set up
    ///    (so nothing was sent), at the next node of [`failover_order`] that can be reached
    ///    (nodes that could not be reached are passed over for 2 s), and submits the call
    ///    there under that id. A node that reserves no id (an older node) is sent the call
    ///    without one, as [`Client::submit`] does;
    /// 2. if the answer is lost ([`TxnStatus::Unknown`]: a timeout, a broken connection, a
    ///    coordinator that stopped), asks what became of the transaction
    ///    ([`Client::outcome`]) at the nearest live node, the coordinator last, again every
    ///    200 ms up to the node's bound (a few seconds: the recoverers' timeouts) while no
    ///    decision is seen;
    /// 3. acts on the answer by [`next_step`]: committed → reported committed, its reads not
    ///    available (`reads_lost`); aborted (it did not happen and never will) → submitted
    ///    once more under a new id, at a live coordinator other than the one that lost the
    ///    answer first; still undecided or unknown → reported [`TxnStatus::Unknown`] with the
    ///    transaction id, never resubmitted (it could run twice).
    ///
    /// Without a reservation (an older node) a lost answer is reported unknown at once.
    pub async fn submit_asking(&self, preferred: NodeId, call: ProcedureCall) -> SubmitReport {
        let mut avoid = None;
        let mut lost: Option<TxnId> = None;
        let mut asked = None;
        loop {
            let Some(sent) = self.send_reserved(preferred, avoid, &call).await else {
                let why = "no coordinator reachable".to_string();
                return SubmitReport {
                    coordinator: preferred,
                    answer: TxnAnswer::refused(TxnId(0), why),
                    asked,
                    resubmitted_after: lost,
                    reads_lost: false,
                };
            };
            let report = |answer, asked, reads_lost| SubmitReport {
                coordinator: sent.node,
                answer,
                asked,
                resubmitted_after: lost,
                reads_lost,
            };
            let (TxnStatus::Unknown(why), Some(res)) = (&sent.answer.status, sent.reservation) else {
                return report(sent.answer, asked, false);
            };
            let lookup = self.outcome(sent.node, &res).await;
            asked = Some(lookup.clone());
            let status = match next_step(&lookup, lost.is_some()) {
                NextStep::ReportCommitted => TxnStatus::Committed,
                NextStep::Resubmit => {
                    lost = Some(res.txn);
                    avoid = Some(sent.node);
                    continue;
                }
                NextStep::ReportAborted => TxnStatus::Aborted(format!("{}: {lookup:?}", res.txn)),
                NextStep::ReportUnknown => TxnStatus::Unknown(format!(
                    "{}: the coordinator's answer was lost ({why}) and no decision was found: {lookup:?}",
                    res.txn
                )),
            };
            let reads_lost = status == TxnStatus::Committed;
            return report(TxnAnswer { txn: res.txn, status, cause: None, reads: vec![] }, asked, reads_lost);
        }
    }

    /// Runs `call` as [`Client::submit_asking`] does, and runs it again, as a new transaction,
    /// after an abort whose cause is retryable ([`AbortCause::is_retryable`]), pausing as
    /// `policy` says ([`RetryPolicy::delay`], drawn from `rng`), at most `policy.retries`
    /// times ([`retrying`]). A commit returns at once; an unknown outcome is returned as it
    /// is, never submitted again (its outcome query already ran and found no decision); an
    /// abort that is not retryable (the procedure's own, a missing record, a refused call,
    /// one without a cause) ends it too. Returns the last attempt's report, the attempts made
    /// and every aborted attempt's cause.
    pub async fn submit_retrying(
        &self,
        preferred: NodeId,
        call: ProcedureCall,
        policy: &RetryPolicy,
        rng: &mut impl rand::Rng,
    ) -> Retried<SubmitReport> {
        retrying(policy, rng, None, || self.submit_asking(preferred, call.clone())).await
    }

    /// Reserves an id and submits `call` under it at the first coordinator of
    /// [`failover_order`] of `preferred` that can be reached (`avoid` last). `None` when none
    /// could be reached.
    async fn send_reserved(&self, preferred: NodeId, avoid: Option<NodeId>, call: &ProcedureCall) -> Option<Sent> {
        let mut order = failover_order(&self.topology, preferred);
        if let Some(a) = avoid {
            order.retain(|&n| n != a);
            order.push(a);
        }
        let now = Instant::now();
        let up: Vec<NodeId> = {
            let down = self.down.lock().unwrap_or_else(|p| p.into_inner());
            order.iter().copied().filter(|n| down.get(n).is_none_or(|t| now.duration_since(*t) >= DOWN_FOR)).collect()
        };
        // Every node passed over: try them all again rather than give up.
        let candidates = if up.is_empty() { order } else { up };
        for node in candidates {
            let reservation = match self.reserve(node).await {
                Ok(r) => r,
                Err(Error::Transport(TransportError::Connect { .. } | TransportError::Tls { .. })) => {
                    self.down.lock().unwrap_or_else(|p| p.into_inner()).insert(node, Instant::now());
                    continue;
                }
                // Nothing was submitted (at most an id reserved and never used): go on.
                Err(e) => {
                    tracing::debug!(node = %self.topology.node_name(node), "no reservation: {e}");
                    continue;
                }
            };
            let body = Body::Submit(SubmitRequest {
                call: Some(call.clone()),
                txn: reservation.map(|r| r.txn.0),
                token: reservation.map_or(0, |r| r.token),
            });
            match self.call(node, body).await {
                Err(Error::Transport(TransportError::Connect { .. } | TransportError::Tls { .. })) => {
                    self.down.lock().unwrap_or_else(|p| p.into_inner()).insert(node, Instant::now());
                }
                reply => {
                    self.down.lock().unwrap_or_else(|p| p.into_inner()).remove(&node);
                    let mut answer = answer_of(reply);
                    if let (0, Some(r)) = (answer.txn.0, reservation) {
                        answer.txn = r.txn;
                    }
                    return Some(Sent { node, answer, reservation });
                }
            }
        }
        None
    }

    /// Runs `call` as one transaction with `node` as its coordinator, under the id reserved
    /// there as `res` ([`Client::reserve`]). A lost answer gives [`TxnStatus::Unknown`] (ask
    /// with [`Client::outcome`]); an id `node` did not reserve, already used, or whose
    /// reservation expired gives [`TxnStatus::Aborted`] naming why (nothing ran).
    pub async fn submit_reserved(&self, node: NodeId, call: ProcedureCall, res: &Reservation) -> TxnAnswer {
        let mut out = answer_of(
            self.call(node, Body::Submit(SubmitRequest { call: Some(call), txn: Some(res.txn.0), token: res.token }))
                .await,
        );
        if out.txn == TxnId(0) {
            out.txn = res.txn;
        }
        out
    }

    /// The read phase of an optimistic transaction (`Body::VersionedRead`, docs/design.md,
    /// "Optimistic transactions: versioned reads and CHECK"): cell 0 of `keys` of the
    /// key/value table `table`, with each cell's version, read at `node` without locks (the
    /// keys its DC holds from its own replicas, the others forwarded to the nearest DC holding
    /// them). One [`Versioned`] per key, in order, each found value padded back to the cell's
    /// width in the client's topology (as a read of a key/value call answers it). Commit
    /// what depends on them with a call
    /// that CHECKs each key at its version (`kv_kind::CHECK`,
    /// `redt_dc_executor::KvOp::Check`): it aborts with `stale_read` if one changed since.
    ///
    /// # Errors
    /// The node is unreachable, or answered an error ([`redt_protocol::Error::Remote`]): an
    /// unknown or not key/value table, more keys than `limits.max_ops_per_txn`, a key busy
    /// (held by a writer) on every replica of the DC read (read again), a node it forwarded to
    /// that did not answer; an answer that does not give one item per key, in order
    /// ([`redt_protocol::Error::Unexpected`]).
    pub async fn read_versions(&self, node: NodeId, table: u32, keys: &[u64]) -> Result<Vec<Versioned>> {
        let body = Body::VersionedRead(VersionedReadRequest { table, keys: keys.to_vec() });
        let unexpected = || ProtocolError::Unexpected { node, name: self.topology.node_name(node) };
        match self.call(node, body).await? {
            Body::VersionedValues(r)
                if r.items.len() == keys.len() && r.items.iter().zip(keys).all(|(i, k)| i.key == *k) =>
            {
                let width = u16::try_from(table)
                    .ok()
                    .and_then(|t| self.topology.table(redt_proto::TableId(t)))
                    .and_then(|t| t.cells.first())
                    .map_or(0, |c| c.bytes as usize);
                Ok(r.items
                    .into_iter()
                    .map(|mut i| {
                        if i.found && i.value.len() < width {
                            i.value.resize(width, 0);
                        }
                        Versioned { key: i.key, version: i.version, value: i.value, found: i.found }
                    })
                    .collect())
            }
            _ => Err(unexpected().into()),
        }
    }

    /// Reserves a transaction id at `node`: `Ok(None)` when the node answered but reserves
    /// none (an older node, or one whose ids are used up: submit without one).
    ///
    /// # Errors
    /// Transport failures (nothing was submitted).
    pub async fn reserve(&self, node: NodeId) -> Result<Option<Reservation>> {
        match self.call(node, Body::ReserveTxn(ReserveTxnRequest {})).await {
            Ok(Body::TxnReserved(r)) => Ok(Some(Reservation {
                txn: TxnId(r.txn),
                start_after: Cts::new(r.start_after),
                valid_for_ms: r.valid_for_ms,
                token: r.token,
            })),
            Ok(_) | Err(Error::Protocol(ProtocolError::Remote { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What became of the transaction reserved as `res` whose coordinator `coordinator` lost
    /// its answer (`Body::OutcomeQuery`, read-only): asked at the nodes of
    /// [`failover_order`] of `coordinator`, its own DC first, `coordinator` itself last,
    /// until one answers. A node answers after one lookup round (only the coordinator waits,
    /// for the identity that reserved the id there), so while the answer is not final
    /// (committed or aborted) the client asks again every [`OUTCOME_POLL_EVERY`] (200 ms),
    /// for up to three quarters of its call timeout and the answering node's own bound (a
    /// few seconds: the recoverers' timeouts), and returns the last answer. A node over its
    /// cap of queries in flight (`error_code::OVER_LIMIT`) is passed over for the next one,
    /// and asked again at the next poll. Never an error: a query nobody answers is
    /// [`OutcomeLookup::Unknown`].
    pub async fn outcome(&self, coordinator: NodeId, res: &Reservation) -> OutcomeLookup {
        let t0 = Instant::now();
        let mut order = failover_order(&self.topology, coordinator);
        order.retain(|&n| n != coordinator);
        order.push(coordinator);
        let wait_ms = (self.call_timeout.as_millis() as u64 * 3 / 4).max(1);
        let mut bound = Duration::from_millis(wait_ms);
        let q = OutcomeQueryRequest {
            txn: res.txn.0,
            start_after: Some(res.start_after.0),
            valid_for_ms: res.valid_for_ms,
            wait_ms,
            token: res.token,
        };
        let mut last = String::from("no node to ask");
        loop {
            let mut answer = None;
            let mut busy = false;
            for &node in &order {
                let down = self.down.lock().unwrap_or_else(|p| p.into_inner()).get(&node).copied();
                if down.is_some_and(|t| t.elapsed() < DOWN_FOR) {
                    continue;
                }
                match self.ask_outcome(node, &q).await {
                    Asked::Answer(a, node_bound) => {
                        bound = bound.min(node_bound.unwrap_or(bound));
                        answer = Some(a);
                        break;
                    }
                    Asked::Busy(why) => {
                        busy = true;
                        last = why;
                    }
                    Asked::Failed(why) => last = why,
                }
            }
            let late = t0.elapsed() + OUTCOME_POLL_EVERY > bound;
            match answer {
                Some(a) if a.is_final() || late => return a,
                Some(_) => {}
                None if busy && !late => {}
                None => {
                    return OutcomeLookup::Unknown(format!(
                        "{}: no node answered the outcome query (last: {last})",
                        res.txn
                    ))
                }
            }
            tokio::time::sleep(OUTCOME_POLL_EVERY).await;
        }
    }

    /// One outcome query `q` at `node`.
    async fn ask_outcome(&self, node: NodeId, q: &OutcomeQueryRequest) -> Asked {
        let name = self.topology.node_name(node);
        let Some(n) = self.topology.nodes.get(node.0 as usize) else {
            return Asked::Failed(format!("no {node} in the topology `{}`", self.topology.name));
        };
        let msg = Envelope { epoch: self.topology.epoch.0, from: u32::MAX, body: Some(Body::OutcomeQuery(q.clone())) };
        match self.transport.call_at(&n.advertise, &n.name, msg).await.map(|r| r.body) {
            Ok(Some(Body::TxnOutcome(r))) => {
                let bound = (r.bound_ms > 0).then(|| Duration::from_millis(r.bound_ms));
                match OutcomeLookup::from_wire(r.state, r.cts, r.detail) {
                    Ok(answer) => Asked::Answer(answer, bound),
                    Err(e) => Asked::Failed(format!("{name}: {e}")),
                }
            }
            Ok(Some(Body::Error(e))) if e.code == redt_proto::error_code::OVER_LIMIT => {
                Asked::Busy(format!("{name} answered: {}", e.message))
            }
            Ok(Some(Body::Error(e))) => Asked::Failed(format!("{name} answered: {}", e.message)),
            Ok(_) => Asked::Failed(format!("{name}: unexpected reply")),
            Err(e) => Asked::Failed(Error::from(e).to_string()),
        }
    }

    /// Sends a `netem set` request to every node; returns the nodes that did not confirm,
    /// with why. The nodes serve it to an operator certificate only (a client's is refused
    /// with a message naming the operator role; see [`Client::connect_as`]).
    pub async fn netem_set(&self, req: NetemSetRequest) -> Vec<(String, String)> {
        let mut failed = Vec::new();
        for n in &self.topology.nodes {
            match self.call(n.id, Body::NetemSet(req.clone())).await {
                Ok(Body::Ack(_)) => {}
                Ok(_) => failed.push((n.name.clone(), "unexpected reply".into())),
                Err(e) => failed.push((n.name.clone(), e.to_string())),
            }
        }
        failed
    }

    /// Asks `node` for its status ([`NodeStatus`]); with `count_locks` it also counts the
    /// records holding a lock (a full scan of its index: slow on a large MemStore), which the
    /// nodes serve to an operator certificate only ([`Client::connect_as`]).
    ///
    /// # Errors
    /// The node is unreachable or answered an error, e.g. a client certificate's
    /// `count_locks` refused naming the operator role; the reply does not decode
    /// ([`redt_protocol::Error::Remote`] names the node).
    pub async fn status(&self, node: NodeId, count_locks: bool) -> Result<NodeStatus> {
        match self.call(node, Body::Status(StatusRequest { count_locks })).await? {
            Body::NodeStatus(r) => NodeStatus::from_wire(&r)
                .map_err(|message| ProtocolError::Remote { node, name: self.topology.node_name(node), message }.into()),
            _ => Err(ProtocolError::Unexpected { node, name: self.topology.node_name(node) }.into()),
        }
    }

    /// The status of each of `nodes`, asked at once, in node order (an unreachable node's
    /// error as text, after the client's call timeout).
    pub async fn status_of(
        self: &Arc<Self>,
        nodes: &[NodeId],
        count_locks: bool,
    ) -> Vec<(NodeId, std::result::Result<NodeStatus, String>)> {
        let mut asks = tokio::task::JoinSet::new();
        for &n in nodes {
            let client = self.clone();
            asks.spawn(async move { (n, client.status(n, count_locks).await.map_err(|e| e.to_string())) });
        }
        let mut all = Vec::new();
        while let Some(r) = asks.join_next().await {
            all.extend(r.ok());
        }
        all.sort_by_key(|(n, _)| *n);
        all
    }
}

/// The reads of an outcome reply, each padded back with zero bytes to its length in `lens`
/// (when given: see `OutcomeReply::read_lens`); an empty read is no read. `None` when `lens`
/// does not fit `reads` (another count, a read longer than its length, a length over 1 MiB).
fn padded_reads(reads: Vec<Vec<u8>>, lens: &[u32]) -> Option<Vec<Option<Vec<u8>>>> {
    const MAX_READ_BYTES: u32 = 1 << 20;
    if lens.is_empty() {
        return Some(reads.into_iter().map(|r| (!r.is_empty()).then_some(r)).collect());
    }
    if lens.len() != reads.len() {
        return None;
    }
    reads
        .into_iter()
        .zip(lens)
        .map(|(mut r, &len)| {
            if r.len() > len as usize || len > MAX_READ_BYTES {
                return None;
            }
            r.resize(len as usize, 0);
            Some((len != 0).then_some(r))
        })
        .collect()
}

/// What a submission's reply tells the client.
fn answer_of(reply: Result<Body>) -> TxnAnswer {
    match reply {
        Ok(Body::Outcome(o)) => {
            let (status, cause) = match o.outcome {
                0 => (TxnStatus::Committed, None),
                // A cause this client does not know (a newer node's) is no cause.
                1 => (TxnStatus::Aborted(o.error), o.abort_cause.as_deref().and_then(AbortCause::from_name)),
                _ => (TxnStatus::Unknown(o.error), None),
            };
            match padded_reads(o.reads, &o.read_lens) {
                Some(reads) => TxnAnswer { txn: TxnId(o.txn), status, cause, reads },
                None => TxnAnswer::unknown(TxnId(o.txn), "a reply whose read lengths do not match its reads"),
            }
        }
        Ok(_) => TxnAnswer::unknown(TxnId(0), "unexpected reply"),
        // The coordinator refused it before running it (bad epoch, malformed).
        Err(Error::Protocol(ProtocolError::Remote { message, .. })) => TxnAnswer::refused(TxnId(0), message),
        Err(e) => TxnAnswer::unknown(TxnId(0), e.to_string()),
    }
}

/// The coordinators [`Client::submit_failover`] tries for `preferred`, in order: itself, the
/// other nodes of its DC, then the other DCs' nodes, nearest DC (by the topology's RTT from
/// `preferred`'s DC) first.
pub fn failover_order(topology: &Topology, preferred: NodeId) -> Vec<NodeId> {
    let Some(home) = topology.nodes.get(preferred.0 as usize).map(|n| n.dc) else { return vec![preferred] };
    let rtt = |n: &redt_proto::NodeEntry| {
        if n.dc == home {
            Duration::ZERO
        } else {
            topology.links[home.0 as usize][n.dc.0 as usize].rtt
        }
    };
    let mut order: Vec<&redt_proto::NodeEntry> = topology.nodes.iter().filter(|n| n.id != preferred).collect();
    order.sort_by_key(|n| (rtt(n), n.dc, n.id));
    std::iter::once(preferred).chain(order.into_iter().map(|n| n.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::wire::OutcomeReply;

    /// Reads cross the wire without their zero padding and come back whole; a reply whose
    /// lengths do not fit its reads is no outcome.
    #[test]
    fn reads_lose_their_padding_on_the_wire_only() {
        let mut cell = vec![0u8; 2048];
        cell[..3].copy_from_slice(&[7, 0, 9]);
        let reads = vec![Some(cell), None, Some(vec![0; 2048]), Some(vec![1; 16])];
        let sent = TxnAnswer { txn: TxnId(5), status: TxnStatus::Committed, cause: None, reads: reads.clone() };
        let msg = crate::answer_to_msg(&sent);
        assert_eq!(msg.reads.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 0, 0, 16], "trailing zeros dropped");
        assert_eq!(msg.read_lens, vec![2048, 0, 2048, 16]);
        let got = answer_of(Ok(Body::Outcome(msg.clone())));
        assert_eq!((got.txn, got.status, got.reads), (TxnId(5), TxnStatus::Committed, reads));
        // A sender that pads nothing away (no lengths) is read as before.
        let whole = OutcomeReply { reads: vec![vec![4, 0], vec![]], read_lens: vec![], ..msg.clone() };
        assert_eq!(answer_of(Ok(Body::Outcome(whole))).reads, vec![Some(vec![4, 0]), None]);
        for bad in [vec![2048, 0, 2048], vec![2, 0, 2048, 16], vec![2048, 0, 2048, u32::MAX]] {
            let bad = OutcomeReply { read_lens: bad, ..msg.clone() };
            assert!(matches!(answer_of(Ok(Body::Outcome(bad))).status, TxnStatus::Unknown(_)));
        }
    }

    /// An abort's cause crosses the wire with it (so the client can tell whether to retry);
    /// an older node's reply without one, or a cause this client does not know, reads as none;
    /// other outcomes carry none.
    #[test]
    fn an_abort_s_cause_reaches_the_client() {
        let sent = TxnAnswer {
            txn: TxnId(5),
            status: TxnStatus::Aborted("dc2 voted abort: lock conflict".into()),
            cause: Some(AbortCause::LockConflict),
            reads: vec![],
        };
        let msg = crate::answer_to_msg(&sent);
        assert_eq!(msg.abort_cause.as_deref(), Some("lock_conflict"));
        assert_eq!(answer_of(Ok(Body::Outcome(msg.clone()))), sent);
        let old = OutcomeReply { abort_cause: None, ..msg.clone() };
        assert_eq!(answer_of(Ok(Body::Outcome(old))).cause, None);
        let newer = OutcomeReply { abort_cause: Some("a cause of a newer node".into()), ..msg.clone() };
        assert_eq!(answer_of(Ok(Body::Outcome(newer))).cause, None);
        let committed = OutcomeReply { outcome: 0, ..msg.clone() };
        assert_eq!(answer_of(Ok(Body::Outcome(committed))).cause, None, "a commit has no cause");
        for status in [TxnStatus::Committed, TxnStatus::Unknown("lost".into())] {
            let odd = TxnAnswer { status, ..sent.clone() };
            assert_eq!(crate::answer_to_msg(&odd).abort_cause, None, "only aborts send a cause");
        }
    }

    #[test]
    fn failover_tries_the_own_dc_first_then_the_nearest() {
        let t = Topology::from_yaml("world-5dc.yaml", include_str!("../../configs/world-5dc.yaml")).expect("valid");
        for n in &t.nodes {
            let order = failover_order(&t, n.id);
            assert_eq!(order[0], n.id);
            assert_eq!(order.len(), t.nodes.len());
            let mut seen: Vec<NodeId> = order.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), t.nodes.len(), "each node once");
            let rtts: Vec<Duration> = order
                .iter()
                .map(|m| {
                    let d = t.nodes[m.0 as usize].dc;
                    if d == n.dc {
                        Duration::ZERO
                    } else {
                        t.links[n.dc.0 as usize][d.0 as usize].rtt
                    }
                })
                .collect();
            assert!(rtts.windows(2).all(|w| w[0] <= w[1]), "nearest first from {}: {rtts:?}", n.name);
        }
    }
}
