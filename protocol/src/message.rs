//! The typed messages of the RedT protocol between nodes, decoded from the wire in one place.
//!
//! A wire [`Body`] becomes a [`Request`] or a [`Reply`] through `TryFrom`, with the same range
//! checks for every kind (ids that do not fit their type are refused, never truncated), and
//! [`Request::check`] adds the checks that need the topology (a participant DC, a coordinator,
//! a catch-up partition or node that does not exist). The state machines ([`crate::txn`],
//! [`crate::executor_core`]) and the simulator speak only these types; the async driver
//! converts at the socket.

use crate::codec::{entries_from_msg, entries_to_msg, promise_from_msg, promise_to_msg, vote_from_msg, vote_to_msg};
use crate::cost::Cost;
use crate::limits::BadSubTxn;
use crate::plan::Scope;
use crate::versioned_read::Versioned;
use redt_dc_executor::{
    Decision, EntryRef, NodePromise, ReplicaChange, ReplicaOrigin, SnapshotCell, SnapshotRecord, Vote,
};
use redt_proto::wire::{
    AcceptReply, AcceptRequest, AckReply, Body, CatchUpMsg, ChangeMsg, DecideReply, DecideRequest, ExecuteRequest,
    LogDecisionRequest, PrepareReply, PrepareRequest, ProcedureCall, PromisesReply, ReclaimCheckRequest,
    ReclaimCheckedReply, ReclaimKeyMsg, RecordReply, RecordRequest, RecoveryPrepareRequest, ReservationMsg,
    ReservationsRequest, ReservedReply, SnapshotCellMsg, SnapshotChunkReply, SnapshotReadRequest, SnapshotRecordMsg,
    VersionedItemMsg, VersionedReadReply, VersionedReadRequest,
};
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, PartitionId, TableId, Topology, TxnId};

/// Phase 1: run a sub-transaction in the receiver's DC (RedT §4.2, Algorithm 1 lines 1–9).
#[derive(Clone, Debug, PartialEq)]
pub struct Execute {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// Every participant DC, ascending (written into the redo entries for recovery).
    pub participants: Vec<DcId>,
    /// The stored procedure and its parameters.
    pub call: ProcedureCall,
    /// Which replicas the receiver runs (RedT: every replica of its DC).
    pub scope: Scope,
    /// Baselines (EP-Paxos): replicate the redo to the secondaries before voting.
    pub replicate: bool,
    /// The coordinator's HLC reading at start (recorded in the redo entries; the base of the
    /// commit timestamp and of recovery timeouts).
    pub start: Cts,
    /// Phase-1 deadline in ms since the HLC origin (`redt_dc_executor::ORIGIN_UNIX_MS`): an
    /// executor whose clock is past it votes abort without taking a lock (docs/design.md §2,
    /// recovery). 0: none (the baselines).
    pub deadline_ms: u64,
    /// Every partition the transaction touches, ascending (recorded for a recoverer).
    pub partitions: Vec<PartitionId>,
    /// The placement epoch the coordinator planned it in (its replica sets, n and Q): an
    /// executor at another epoch votes abort without taking a lock (the epoch fence).
    pub epoch: Epoch,
    /// The share of the executors' bulk lane a large sub-transaction queues in: the submitting
    /// client's (`redt_transport::Caller::share`), 0 when none is known
    /// ([`crate::executor_queue`]).
    pub share: u64,
    /// Phase 2s of this coordinator's earlier transactions that this one conflicts with,
    /// decided but perhaps not yet delivered: the executor applies them, as the phase 2 itself
    /// would, before it runs the phase 1 (decided-holder takeover, [`crate::takeover`]). At
    /// most [`MAX_CARRIED`], each the coordinator's own ([`DecideRole::Executor`], ballot 0).
    pub carried: Vec<Decide>,
}

/// Phase 2s one phase 1 carries at most ([`Execute::carried`]).
pub const MAX_CARRIED: usize = crate::takeover::Takeover::MAX_CARRIED;

/// Records a decision in the vote words of a transaction's redo entries (docs/design.md §2: every
/// abort is recorded at a majority before it is acknowledged or acted on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The transaction.
    pub txn: TxnId,
    /// The ballot it is recorded at (0: the original coordinator).
    pub ballot: Ballot,
    /// The decision.
    pub decision: Decision,
    /// The entries to record it in; empty: those the receiver remembers for `txn`.
    pub entries: Vec<EntryRef>,
}

/// One partition whose new values a catch-up source ships, and the replica nodes it ships
/// them to (docs/design.md §2, phase 2; [`crate::catch_up`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatchUpTarget {
    /// The partition.
    pub partition: PartitionId,
    /// The replica nodes left behind.
    pub nodes: Vec<NodeId>,
    /// The commit timestamp of the transaction.
    pub cts: Cts,
}

/// Who applies a phase-2 decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecideRole {
    /// The executor of the receiver's DC (RedT).
    Executor,
    /// A baseline primary, which passes the decision on to its secondaries.
    Primary,
    /// A baseline secondary (or a replica being caught up), settling redo it accepted from
    /// the sender.
    Secondary,
}

/// Phase 2: apply the decision and release the locks (RedT §4.2, Algorithm 1 lines 10–16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decide {
    /// The transaction.
    pub txn: TxnId,
    /// The ballot of the decision.
    pub ballot: Ballot,
    /// The decision.
    pub decision: Decision,
    /// The entries to apply it to; empty: those the receiver remembers (and, if none, a
    /// fence against a late phase 1).
    pub entries: Vec<EntryRef>,
    /// Who applies it.
    pub role: DecideRole,
    /// Replicas the commit left behind that this DC ships its new values to.
    pub catch_up: Vec<CatchUpTarget>,
}

/// Redo accepted into a replica's own ring without locks: a baseline secondary's Paxos accept,
/// and the new values shipped to a replica a RedT commit left behind (catch-up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accept {
    /// The transaction, its coordinator and participants (the epoch is the receiver's).
    pub origin: ReplicaOrigin,
    /// The cell changes.
    pub changes: Vec<ReplicaChange>,
    /// The transaction's decision when the sender knows it already (a catch-up after the
    /// commit): the replica writes its redo settled, so no later message has to reach it.
    /// `None` for a Paxos accept (baselines), settled by a later [`Decide`].
    pub decided: Option<Decision>,
    /// A catch-up's first shipment to a voter of the transaction's epoch (not a learner, not
    /// a re-shipment): the receiver's DC was behind, so its own redo of the transaction is
    /// not to be applied ([`crate::catch_up`]); the receiver aborts its own entries of it, or,
    /// if one was applied already, lets the shipped values replace it.
    pub behind: bool,
}

/// 2PC-Paxos prepare at a primary: replicate the redo this primary holds for `txn` to a
/// majority of each of its partitions' replicas (RedT §4.3 Table 1; `crate::baseline`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepare {
    /// The transaction.
    pub txn: TxnId,
    /// The primary's redo entries, from its vote (the primary trusts only what it still holds).
    pub entries: Vec<EntryRef>,
}

/// A baseline coordinator's decision, logged at one of its backups (RedT §4.3 Table 1: the
/// coordinator replicates its decision before phase 2; `crate::baseline`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDecision {
    /// The transaction.
    pub txn: TxnId,
    /// The decision (a later abort replaces a commit whose log round failed).
    pub decision: Decision,
    /// The nodes the decision must reach (the primaries), for a recoverer.
    pub participants: Vec<NodeId>,
}

/// A recoverer's PREPARE(ballot) at one DC (docs/design.md §2, recovery): the receiver fences the
/// replicas it holds of `partitions` that have not voted, promises `ballot`, and answers what
/// each holds ([`redt_dc_executor::Promise`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryPrepare {
    /// The transaction.
    pub txn: TxnId,
    /// The recoverer's ballot.
    pub ballot: Ballot,
    /// The transaction's start timestamp (from its redo entries).
    pub start: Cts,
    /// Every partition the transaction touches.
    pub partitions: Vec<PartitionId>,
    /// The placement epoch it was planned in (from its redo entries): the executor PREPAREs
    /// that epoch's replicas.
    pub epoch: Epoch,
    /// Its coordinator (from its redo entries).
    pub coordinator: NodeId,
    /// Every DC it involves (from its redo entries).
    pub participants: Vec<DcId>,
}

/// A ring owner's question to a writer of its DC (gap filling, `redt_dc_executor`'s `gap`
/// module): which reservations do you hold in the ring of `ring`, unwritten?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservations {
    /// The node whose ring is asked about.
    pub ring: NodeId,
}

/// Rebuild: a learner's request for one chunk of a snapshot copy of `partition` from a voter
/// (docs/design.md, "Rebuild"; [`crate::rebuild`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRead {
    /// The partition.
    pub partition: PartitionId,
    /// The epoch that added the learner: the voter serves only once it applied that epoch
    /// and finished every entry of an older one (`ExecutorCore::snapshot_read`).
    pub epoch: Epoch,
    /// The index bucket to scan from (0 starts the copy).
    pub from_bucket: u64,
    /// The most bytes of records wanted; the voter caps it at [`SnapshotRead::MAX_BYTES`].
    pub max_bytes: u32,
}

impl SnapshotRead {
    /// The largest chunk a voter sends (bytes of records): 4 MiB, well inside a frame.
    pub const MAX_BYTES: u32 = 4 << 20;
}

/// One deleted key a replica is about to free: its table, key and the delete's commit
/// timestamp ([`Request::ReclaimCheck`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReclaimKey {
    /// The table.
    pub table: TableId,
    /// The key.
    pub key: u64,
    /// The delete's commit timestamp.
    pub cts: Cts,
}

impl ReclaimKey {
    /// The most keys one [`Request::ReclaimCheck`] may carry.
    pub const MAX_PER_CHECK: usize = 1024;
}

/// A request between nodes: the RedT protocol's, and the baselines' (`crate::baseline`).
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Phase 1.
    Execute(Execute),
    /// Record a decision.
    Record(Record),
    /// Phase 2.
    Decide(Decide),
    /// Redo accepted into a replica's ring (catch-up; baseline secondaries).
    Accept(Accept),
    /// Baselines (2PC-Paxos): a primary replicates its redo.
    Prepare(Prepare),
    /// Baselines: a coordinator's backup logs its decision.
    LogDecision(LogDecision),
    /// Recovery: a recoverer's PREPARE.
    RecoveryPrepare(RecoveryPrepare),
    /// Gap filling: a ring owner asks a writer of its DC for its reservations there.
    Reservations(Reservations),
    /// Rebuild: a learner reads a chunk of a snapshot copy from a voter.
    SnapshotRead(SnapshotRead),
    /// Records reclaimed: before it frees its records of deleted keys, a replica asks each
    /// other replica of their partitions whether it holds the deletes too
    /// (`ExecutorCore::take_reclaims`). Read-only.
    ReclaimCheck(Vec<ReclaimKey>),
    /// A versioned read forwarded by a node of another DC: cell 0 of `keys` of `table`, read
    /// from the receiver's DC only, without locks (`crate::versioned_read`). Read-only.
    VersionedRead {
        /// The key/value table (its id as on the wire: checked by [`Request::check`]).
        table: u32,
        /// The keys.
        keys: Vec<u64>,
    },
}

/// What a replica answers a [`Request::ReclaimCheck`] (docs/design.md, "Records reclaimed").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReclaimAnswer {
    /// Per key asked, in order, whether this replica holds the delete
    /// (`redt_dc_executor::DcHandle::holds_delete`).
    pub holds: Vec<bool>,
    /// This replica's catch-up floor (`redt_dc_executor::DcHandle::catch_up_floor`): no key
    /// whose delete is above it may be freed yet; `None` when no entry of its ring may still
    /// make a catch-up.
    pub floor: Option<Cts>,
}

/// A reply between nodes of the RedT protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The vote of a DC, with the inter-DC cost of work nested in its phase 1 (baselines).
    Vote {
        /// The voting DC.
        dc: DcId,
        /// The vote.
        vote: Vote,
        /// Nested cost.
        nested: Cost,
    },
    /// Whether every entry records the decision.
    Recorded(bool),
    /// The decision is applied, with the nested cost.
    Decided(Cost),
    /// Whether the redo was accepted (false: the transaction was decided abort here).
    Accepted(bool),
    /// Baselines: whether a primary's redo reached a majority of every partition's replicas,
    /// with the inter-DC cost of replicating it.
    Prepared {
        /// Every partition reached its majority.
        ok: bool,
        /// Nested cost.
        nested: Cost,
    },
    /// Baselines: the decision is logged.
    Ack,
    /// Recovery: what each replica node of the DC holds, after the PREPARE.
    Promises(Vec<NodePromise>),
    /// Gap filling: the unwritten reservations `(ring index, slots)` the answering process
    /// holds in the ring asked about, in ring order.
    Reserved(Vec<(u64, u64)>),
    /// Rebuild: one chunk of a snapshot copy, and the index bucket to go on from (`None`: the
    /// copy is complete).
    Snapshot {
        /// The partition's records in the buckets scanned.
        records: Vec<SnapshotRecord>,
        /// The bucket to ask from next.
        next: Option<u64>,
        /// The voter's deletion horizon, READ before the buckets (`redt_dc_executor`'s
        /// `deleted.rs`): the learner raises its own to it before it applies the records.
        horizon: Cts,
    },
    /// Records reclaimed: what this replica answers of the keys asked.
    ReclaimChecked(ReclaimAnswer),
    /// A versioned read: one answer per key asked, in order.
    VersionedValues(Vec<Versioned>),
    /// The request was refused.
    Error {
        /// One of [`redt_proto::error_code`].
        code: u32,
        /// What went wrong.
        message: String,
    },
}

fn node_id(v: u32, what: &str) -> Result<NodeId, String> {
    u16::try_from(v).map(NodeId).map_err(|_| format!("{what} {v} out of range"))
}

fn dc_id(v: u32, what: &str) -> Result<DcId, String> {
    u16::try_from(v).map(DcId).map_err(|_| format!("{what} {v} out of range"))
}

fn ballot(v: u32) -> Ballot {
    Ballot(v)
}

/// Decodes a phase 2; the `Err` text names the malformed field.
fn decide_from_msg(r: DecideRequest) -> Result<Decide, String> {
    Ok(Decide {
        txn: TxnId(r.txn),
        ballot: ballot(r.ballot),
        decision: Decision::from_wire(r.commit, r.cts),
        entries: entries_from_msg(&r.entries).map_err(|()| "entry node out of range".to_string())?,
        role: match (r.replicate, r.secondary) {
            (false, false) => DecideRole::Executor,
            (true, false) => DecideRole::Primary,
            (false, true) => DecideRole::Secondary,
            (true, true) => return Err("a decision cannot be both for a primary and a secondary".into()),
        },
        catch_up: r
            .catch_up
            .iter()
            .map(|c| {
                Ok(CatchUpTarget {
                    partition: PartitionId(c.partition),
                    nodes: c.nodes.iter().map(|&n| node_id(n, "catch-up node")).collect::<Result<_, String>>()?,
                    cts: Cts::new(c.cts),
                })
            })
            .collect::<Result<_, String>>()?,
    })
}

/// Encodes a phase 2.
fn decide_to_msg(d: Decide) -> DecideRequest {
    let (commit, cts) = d.decision.to_wire();
    DecideRequest {
        txn: d.txn.0,
        ballot: d.ballot.0,
        commit,
        cts,
        entries: entries_to_msg(&d.entries),
        replicate: d.role == DecideRole::Primary,
        secondary: d.role == DecideRole::Secondary,
        catch_up: d
            .catch_up
            .iter()
            .map(|c| CatchUpMsg {
                partition: c.partition.0,
                nodes: c.nodes.iter().map(|n| u32::from(n.0)).collect(),
                cts: c.cts.0,
            })
            .collect(),
    }
}

/// Decodes the phase 2s a phase 1 carries: at most [`MAX_CARRIED`], each a coordinator's own
/// phase 2 to an executor.
fn carried_from_msg(carried: Vec<DecideRequest>) -> Result<Vec<Decide>, String> {
    if carried.len() > MAX_CARRIED {
        return Err(format!("a phase 1 carries {} phase 2s, at most {MAX_CARRIED}", carried.len()));
    }
    carried
        .into_iter()
        .map(|m| {
            let d = decide_from_msg(m)?;
            if d.role != DecideRole::Executor || d.ballot != Ballot(0) {
                return Err(format!("a carried phase 2 of {} is not its coordinator's own to an executor", d.txn));
            }
            Ok(d)
        })
        .collect()
}

impl TryFrom<Body> for Request {
    type Error = String;

    /// Decodes a request; the `Err` text names the malformed field.
    fn try_from(body: Body) -> Result<Request, String> {
        match body {
            Body::Execute(r) => Ok(Request::Execute(Execute {
                txn: TxnId(r.txn),
                coordinator: node_id(r.coordinator, "coordinator")?,
                participants: r.participants.iter().map(|&d| dc_id(d, "participant DC")).collect::<Result<_, _>>()?,
                call: r.call.ok_or("phase 1 without a call")?,
                scope: Scope::from_code(r.scope).ok_or_else(|| format!("unknown execution scope {}", r.scope))?,
                replicate: r.replicate,
                start: Cts::new(r.start),
                deadline_ms: r.deadline_ms,
                partitions: r.partitions.iter().copied().map(PartitionId).collect(),
                epoch: Epoch(r.epoch),
                share: r.share,
                carried: carried_from_msg(r.carried)?,
            })),
            Body::Record(r) => Ok(Request::Record(Record {
                txn: TxnId(r.txn),
                ballot: ballot(r.ballot),
                decision: Decision::from_wire(r.commit, r.cts),
                entries: entries_from_msg(&r.entries).map_err(|()| "entry node out of range".to_string())?,
            })),
            Body::Decide(r) => Ok(Request::Decide(decide_from_msg(r)?)),
            Body::Accept(r) => Ok(Request::Accept(Accept {
                origin: ReplicaOrigin {
                    txn: TxnId(r.txn),
                    epoch: Epoch(0),
                    coordinator: node_id(r.coordinator, "coordinator")?,
                    participants: r
                        .participants
                        .iter()
                        .map(|&d| dc_id(d, "participant DC"))
                        .collect::<Result<_, _>>()?,
                },
                changes: r
                    .changes
                    .iter()
                    .map(|c| {
                        Ok(ReplicaChange {
                            table: TableId(
                                u16::try_from(c.table).map_err(|_| format!("table {} out of range", c.table))?,
                            ),
                            key: c.key,
                            cell: u16::try_from(c.cell).map_err(|_| format!("cell {} out of range", c.cell))?,
                            value: c.value.clone(),
                            seen: c.seen,
                        })
                    })
                    .collect::<Result<_, String>>()?,
                decided: r.decided.then(|| Decision::from_wire(r.commit, r.cts)),
                behind: r.behind,
            })),
            Body::Prepare(r) => Ok(Request::Prepare(Prepare {
                txn: TxnId(r.txn),
                entries: entries_from_msg(&r.entries).map_err(|()| "entry node out of range".to_string())?,
            })),
            Body::LogDecision(r) => Ok(Request::LogDecision(LogDecision {
                txn: TxnId(r.txn),
                decision: Decision::from_wire(r.commit, r.cts),
                participants: r.participants.iter().map(|&n| node_id(n, "participant")).collect::<Result<_, _>>()?,
            })),
            Body::RecoveryPrepare(r) => Ok(Request::RecoveryPrepare(RecoveryPrepare {
                txn: TxnId(r.txn),
                ballot: ballot(r.ballot),
                start: Cts::new(r.start),
                partitions: r.partitions.iter().copied().map(PartitionId).collect(),
                epoch: Epoch(r.epoch),
                coordinator: node_id(r.coordinator, "coordinator")?,
                participants: r.participants.iter().map(|&d| dc_id(d, "participant")).collect::<Result<_, _>>()?,
            })),
            Body::Reservations(r) => Ok(Request::Reservations(Reservations { ring: node_id(r.ring, "ring node")? })),
            Body::SnapshotRead(r) => Ok(Request::SnapshotRead(SnapshotRead {
                partition: PartitionId(r.partition),
                epoch: Epoch(r.epoch),
                from_bucket: r.from_bucket,
                max_bytes: r.max_bytes,
            })),
            Body::ReclaimCheck(r) => Ok(Request::ReclaimCheck(
                r.keys
                    .iter()
                    .map(|k| {
                        let table = u16::try_from(k.table)
                            .map(TableId)
                            .map_err(|_| format!("table {} out of range", k.table))?;
                        Ok(ReclaimKey { table, key: k.key, cts: Cts(k.cts & Cts::MASK) })
                    })
                    .collect::<Result<_, String>>()?,
            )),
            Body::VersionedRead(r) => Ok(Request::VersionedRead { table: r.table, keys: r.keys }),
            _ => Err("not a protocol request".into()),
        }
    }
}

impl Request {
    /// The transaction the request is about.
    pub fn txn(&self) -> TxnId {
        match self {
            Request::Execute(e) => e.txn,
            Request::Record(r) => r.txn,
            Request::Decide(d) => d.txn,
            Request::Accept(a) => a.origin.txn,
            Request::Prepare(p) => p.txn,
            Request::LogDecision(l) => l.txn,
            Request::RecoveryPrepare(r) => r.txn,
            // About a ring or a partition, not a transaction.
            Request::Reservations(_)
            | Request::SnapshotRead(_)
            | Request::ReclaimCheck(_)
            | Request::VersionedRead { .. } => TxnId(0),
        }
    }

    /// Checks what needs the topology: the ids (the coordinator, catch-up partitions and
    /// nodes, entry nodes) and, for the requests whose participant DCs and partitions go into
    /// a redo entry (phase 1, an accept, a recoverer's PREPARE), that each is in the topology
    /// and named once ([`crate::limits::check_sub_txn`]); for a phase 1 also that its call is
    /// within the topology's limits ([`crate::limits::check_call`]). A node runs it on every
    /// request that arrives from the network, before anything is reserved or written.
    ///
    /// # Errors
    /// [`BadSubTxn::OverLimit`] naming the limit a request is over; [`BadSubTxn::Malformed`]
    /// naming the first id the topology does not have, or one named twice.
    pub fn check(&self, topology: &Topology) -> Result<(), BadSubTxn> {
        let node = |n: NodeId, what: &str| {
            if (n.0 as usize) < topology.nodes.len() {
                Ok(())
            } else {
                Err(BadSubTxn::Malformed(format!("{what} {n} is not in the topology")))
            }
        };
        let entries = |e: &[EntryRef]| e.iter().try_for_each(|e| node(e.node, "entry node"));
        match self {
            Request::Execute(e) => {
                node(e.coordinator, "coordinator")?;
                crate::limits::check_sub_txn(topology, &e.participants, &e.partitions)?;
                crate::limits::check_call(&topology.limits, &e.call)?;
                Ok(())
            }
            Request::Record(r) => entries(&r.entries),
            Request::Prepare(p) => entries(&p.entries),
            Request::LogDecision(_) => Ok(()),
            Request::Reservations(r) => node(r.ring, "ring node"),
            Request::SnapshotRead(r) => match topology.partitions.get(r.partition.0 as usize) {
                Some(_) => Ok(()),
                None => Err(BadSubTxn::Malformed(format!("partition {} is not in the topology", r.partition))),
            },
            Request::ReclaimCheck(keys) if keys.len() > ReclaimKey::MAX_PER_CHECK => Err(BadSubTxn::Malformed(
                format!("{} keys to check, over the {} a check may carry", keys.len(), ReclaimKey::MAX_PER_CHECK),
            )),
            Request::ReclaimCheck(keys) => match keys.iter().find(|k| topology.table(k.table).is_none()) {
                Some(k) => Err(BadSubTxn::Malformed(format!("table {} is not in the topology", k.table))),
                None => Ok(()),
            },
            Request::RecoveryPrepare(r) => {
                node(r.coordinator, "coordinator")?;
                crate::limits::check_sub_txn(topology, &r.participants, &r.partitions)
            }
            Request::Decide(d) => {
                entries(&d.entries)?;
                for c in &d.catch_up {
                    if c.partition.0 as usize >= topology.partitions.len() {
                        return Err(BadSubTxn::Malformed(format!(
                            "catch-up partition p{} is not in the topology",
                            c.partition.0
                        )));
                    }
                    c.nodes.iter().try_for_each(|&n| node(n, "catch-up node"))?;
                }
                Ok(())
            }
            Request::Accept(a) => {
                node(a.origin.coordinator, "coordinator")?;
                crate::limits::check_sub_txn(topology, &a.origin.participants, &[])
            }
            Request::VersionedRead { table, keys } => match crate::versioned_read::check(topology, *table, keys) {
                Ok(_) => Ok(()),
                Err(crate::versioned_read::ReadRefused::OverLimit(o)) => Err(o.into()),
                Err(e) => Err(BadSubTxn::Malformed(e.to_string())),
            },
        }
    }
}

impl From<Request> for Body {
    fn from(r: Request) -> Body {
        match r {
            Request::Execute(e) => Body::Execute(ExecuteRequest {
                txn: e.txn.0,
                ballot: 0,
                coordinator: u32::from(e.coordinator.0),
                participants: e.participants.iter().map(|d| u32::from(d.0)).collect(),
                call: Some(e.call),
                scope: e.scope.code(),
                replicate: e.replicate,
                start: e.start.0,
                deadline_ms: e.deadline_ms,
                partitions: e.partitions.iter().map(|p| p.0).collect(),
                epoch: e.epoch.0,
                share: e.share,
                carried: e.carried.into_iter().map(decide_to_msg).collect(),
            }),
            Request::Record(r) => {
                let (commit, cts) = r.decision.to_wire();
                Body::Record(RecordRequest {
                    txn: r.txn.0,
                    ballot: r.ballot.0,
                    commit,
                    cts,
                    entries: entries_to_msg(&r.entries),
                })
            }
            Request::Decide(d) => Body::Decide(decide_to_msg(d)),
            Request::Accept(a) => Body::Accept(AcceptRequest {
                txn: a.origin.txn.0,
                ballot: 0,
                coordinator: u32::from(a.origin.coordinator.0),
                participants: a.origin.participants.iter().map(|d| u32::from(d.0)).collect(),
                changes: a
                    .changes
                    .into_iter()
                    .map(|c| ChangeMsg {
                        table: u32::from(c.table.0),
                        key: c.key,
                        cell: u32::from(c.cell),
                        value: c.value,
                        seen: c.seen,
                    })
                    .collect(),
                decided: a.decided.is_some(),
                commit: a.decided.is_some_and(|d| d.to_wire().0),
                cts: a.decided.map_or(0, |d| d.to_wire().1),
                behind: a.behind,
            }),
            Request::Prepare(p) => Body::Prepare(PrepareRequest { txn: p.txn.0, entries: entries_to_msg(&p.entries) }),
            Request::RecoveryPrepare(r) => Body::RecoveryPrepare(RecoveryPrepareRequest {
                txn: r.txn.0,
                ballot: r.ballot.0,
                start: r.start.0,
                partitions: r.partitions.iter().map(|p| p.0).collect(),
                epoch: r.epoch.0,
                coordinator: u32::from(r.coordinator.0),
                participants: r.participants.iter().map(|d| u32::from(d.0)).collect(),
            }),
            Request::Reservations(r) => Body::Reservations(ReservationsRequest { ring: u32::from(r.ring.0) }),
            Request::SnapshotRead(r) => Body::SnapshotRead(SnapshotReadRequest {
                partition: r.partition.0,
                epoch: r.epoch.0,
                from_bucket: r.from_bucket,
                max_bytes: r.max_bytes,
            }),
            Request::ReclaimCheck(keys) => Body::ReclaimCheck(ReclaimCheckRequest {
                keys: keys
                    .iter()
                    .map(|k| ReclaimKeyMsg { table: u32::from(k.table.0), key: k.key, cts: k.cts.0 })
                    .collect(),
            }),
            Request::VersionedRead { table, keys } => Body::VersionedRead(VersionedReadRequest { table, keys }),
            Request::LogDecision(l) => {
                let (commit, cts) = l.decision.to_wire();
                Body::LogDecision(LogDecisionRequest {
                    txn: l.txn.0,
                    commit,
                    cts,
                    participants: l.participants.iter().map(|n| u32::from(n.0)).collect(),
                })
            }
        }
    }
}

impl Reply {
    /// Decodes the reply `from` sent to a RedT request.
    ///
    /// # Errors
    /// A text naming what is malformed, or the kind that was unexpected.
    pub fn from_wire(from: NodeId, body: Body) -> Result<Reply, String> {
        match body {
            Body::Vote(m) => {
                let (dc, nested) = (m.dc, Cost { messages: m.nested_messages, round_trips: m.nested_round_trips });
                let vote = vote_from_msg(from, m).map_err(|e| e.to_string())?;
                Ok(Reply::Vote { dc: dc_id(dc, "voting DC")?, vote, nested })
            }
            Body::Recorded(r) => Ok(Reply::Recorded(r.ok)),
            Body::Decided(r) => {
                Ok(Reply::Decided(Cost { messages: r.nested_messages, round_trips: r.nested_round_trips }))
            }
            Body::Accepted(r) => Ok(Reply::Accepted(r.ok)),
            Body::Prepared(r) => Ok(Reply::Prepared {
                ok: r.ok,
                nested: Cost { messages: r.nested_messages, round_trips: r.nested_round_trips },
            }),
            Body::Ack(_) => Ok(Reply::Ack),
            Body::Promises(r) => {
                Ok(Reply::Promises(r.promises.iter().map(promise_from_msg).collect::<Result<_, String>>()?))
            }
            Body::Reserved(r) => Ok(Reply::Reserved(r.reservations.iter().map(|m| (m.index, m.slots)).collect())),
            Body::SnapshotChunk(c) => Ok(Reply::Snapshot {
                records: c.records.into_iter().map(record_from_msg).collect::<Result<_, String>>()?,
                next: (!c.done).then_some(c.next),
                horizon: Cts(c.deletion_horizon & Cts::MASK),
            }),
            Body::ReclaimChecked(r) => {
                Ok(Reply::ReclaimChecked(ReclaimAnswer { holds: r.holds, floor: r.floor.map(|f| Cts(f & Cts::MASK)) }))
            }
            Body::VersionedValues(r) => Ok(Reply::VersionedValues(
                r.items
                    .into_iter()
                    .map(|i| Versioned { key: i.key, version: i.version, value: i.value, found: i.found })
                    .collect(),
            )),
            Body::Error(e) => Ok(Reply::Error { code: e.code, message: e.message }),
            _ => Err("unexpected reply kind".into()),
        }
    }

    /// Encodes the reply to a request about `txn`; `current_epoch` goes into an error.
    pub fn into_wire(self, txn: TxnId, current_epoch: u32) -> Body {
        match self {
            Reply::Vote { dc, vote, nested } => {
                let mut m = vote_to_msg(dc, vote);
                m.nested_messages = nested.messages;
                m.nested_round_trips = nested.round_trips;
                Body::Vote(m)
            }
            Reply::Recorded(ok) => Body::Recorded(RecordReply { txn: txn.0, ok, error: String::new() }),
            Reply::Decided(nested) => Body::Decided(DecideReply {
                txn: txn.0,
                nested_messages: nested.messages,
                nested_round_trips: nested.round_trips,
            }),
            Reply::Accepted(ok) => Body::Accepted(AcceptReply { txn: txn.0, ok }),
            Reply::Prepared { ok, nested } => Body::Prepared(PrepareReply {
                txn: txn.0,
                ok,
                nested_messages: nested.messages,
                nested_round_trips: nested.round_trips,
            }),
            Reply::Ack => Body::Ack(AckReply {}),
            Reply::Promises(p) => Body::Promises(PromisesReply { promises: p.iter().map(promise_to_msg).collect() }),
            Reply::Reserved(r) => Body::Reserved(ReservedReply {
                reservations: r.into_iter().map(|(index, slots)| ReservationMsg { index, slots }).collect(),
            }),
            Reply::Snapshot { records, next, horizon } => Body::SnapshotChunk(SnapshotChunkReply {
                records: records.into_iter().map(record_to_msg).collect(),
                done: next.is_none(),
                next: next.unwrap_or(0),
                deletion_horizon: horizon.0,
            }),
            Reply::ReclaimChecked(a) => {
                Body::ReclaimChecked(ReclaimCheckedReply { holds: a.holds, floor: a.floor.map(|f| f.0) })
            }
            Reply::VersionedValues(items) => Body::VersionedValues(versioned_to_msg(items)),
            Reply::Error { code, message } => {
                Body::Error(redt_proto::wire::ErrorReply { code, message, current_epoch })
            }
        }
    }
}

/// Encodes a versioned read's answers for the wire ([`VersionedReadReply`]).
pub fn versioned_to_msg(items: Vec<Versioned>) -> VersionedReadReply {
    VersionedReadReply {
        items: items
            .into_iter()
            .map(|i| VersionedItemMsg { key: i.key, version: i.version, value: i.value, found: i.found })
            .collect(),
    }
}

fn record_from_msg(m: SnapshotRecordMsg) -> Result<SnapshotRecord, String> {
    let table = u16::try_from(m.table).map(TableId).map_err(|_| format!("table {} out of range", m.table))?;
    let cells = m
        .cells
        .into_iter()
        .map(|c| {
            let cell = u16::try_from(c.cell).map_err(|_| format!("cell {} out of range", c.cell))?;
            Ok(SnapshotCell { cell, version: c.version, value: c.value })
        })
        .collect::<Result<_, String>>()?;
    Ok(SnapshotRecord { table, key: m.key, cells })
}

fn record_to_msg(r: SnapshotRecord) -> SnapshotRecordMsg {
    SnapshotRecordMsg {
        table: u32::from(r.table.0),
        key: r.key,
        cells: r
            .cells
            .into_iter()
            .map(|c| SnapshotCellMsg { cell: u32::from(c.cell), version: c.version, value: c.value })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_survive_the_wire_and_out_of_range_ids_are_refused() {
        let d = Request::Decide(Decide {
            txn: TxnId(7),
            ballot: Ballot(0),
            decision: Decision::Commit(Cts(99)),
            entries: vec![EntryRef { node: NodeId(3), index: 12, slots: 2 }],
            role: DecideRole::Executor,
            catch_up: vec![CatchUpTarget { partition: PartitionId(1), nodes: vec![NodeId(2)], cts: Cts(99) }],
        });
        assert_eq!(Request::try_from(Body::from(d.clone())), Ok(d));
        let p = Request::Prepare(Prepare {
            txn: TxnId(8),
            entries: vec![EntryRef { node: NodeId(1), index: 4, slots: 1 }],
        });
        assert_eq!(Request::try_from(Body::from(p.clone())), Ok(p));
        let l = Request::LogDecision(LogDecision {
            txn: TxnId(9),
            decision: Decision::Commit(Cts(5)),
            participants: vec![NodeId(0), NodeId(4)],
        });
        assert_eq!(Request::try_from(Body::from(l.clone())), Ok(l));
        let q = Request::Reservations(Reservations { ring: NodeId(5) });
        assert_eq!(Request::try_from(Body::from(q.clone())), Ok(q));
        let far = Body::Reservations(ReservationsRequest { ring: 1 << 20 });
        assert!(Request::try_from(far).unwrap_err().contains("ring node"));
        let held = Reply::Reserved(vec![(40, 3), (90, 35)]);
        assert_eq!(Reply::from_wire(NodeId(1), held.clone().into_wire(TxnId(0), 1)), Ok(held));
        let prepared = Reply::Prepared { ok: true, nested: Cost { messages: 4, round_trips: 1 } };
        assert_eq!(Reply::from_wire(NodeId(1), prepared.clone().into_wire(TxnId(8), 1)), Ok(prepared));
        assert_eq!(Reply::from_wire(NodeId(1), Reply::Ack.into_wire(TxnId(9), 1)), Ok(Reply::Ack));
        let bad = Body::Execute(ExecuteRequest {
            txn: 1,
            ballot: 0,
            coordinator: 70_000,
            participants: vec![0],
            call: Some(ProcedureCall::default()),
            scope: 0,
            replicate: false,
            ..Default::default()
        });
        assert!(Request::try_from(bad).unwrap_err().contains("coordinator"));
        // Carried phase 2s: round trip, too many, or not the coordinator's own to an executor.
        let phase2 = |txn: u64, ballot: u32, role: DecideRole| Decide {
            txn: TxnId(txn),
            ballot: Ballot(ballot),
            decision: Decision::Commit(Cts(77)),
            entries: Vec::new(),
            role,
            catch_up: vec![CatchUpTarget { partition: PartitionId(2), nodes: vec![NodeId(3)], cts: Cts(77) }],
        };
        let execute = |carried: Vec<Decide>| Execute {
            txn: TxnId(5),
            coordinator: NodeId(1),
            participants: vec![DcId(0)],
            call: ProcedureCall::default(),
            scope: Scope::Dc,
            replicate: false,
            start: Cts(10),
            deadline_ms: 0,
            partitions: vec![PartitionId(0)],
            epoch: Epoch(1),
            share: 0,
            carried,
        };
        let two = execute(vec![phase2(3, 0, DecideRole::Executor), phase2(4, 0, DecideRole::Executor)]);
        assert_eq!(Request::try_from(Body::from(Request::Execute(two.clone()))), Ok(Request::Execute(two)));
        let many = execute((0..=MAX_CARRIED as u64).map(|t| phase2(t, 0, DecideRole::Executor)).collect());
        assert!(Request::try_from(Body::from(Request::Execute(many))).unwrap_err().contains("at most"));
        for bad in [phase2(3, 7, DecideRole::Executor), phase2(3, 0, DecideRole::Secondary)] {
            let e = Request::try_from(Body::from(Request::Execute(execute(vec![bad])))).unwrap_err();
            assert!(e.contains("coordinator's own"), "{e}");
        }
        let both = Body::Decide(DecideRequest { replicate: true, secondary: true, ..Default::default() });
        assert!(Request::try_from(both).is_err());
    }
}
