//! Wire messages between nodes (prost; length-prefixed on QUIC streams by the transport).
//!
//! Every message travels in an [`Envelope`] that carries the sender's topology epoch, for
//! information only: a receiver serves a message whatever its envelope's epoch (decisions,
//! recovery and catch-ups of an old epoch's transactions must be served). The epoch fence is
//! on phase 1 alone, by the epoch the transaction was planned in (`ExecuteRequest::epoch`):
//! an executor at another epoch votes abort without locking (docs/design.md, "Failover").
//! Transaction messages carry from the start what recovery will need (docs/design.md §2):
//! the ballot, the participant DCs and the coordinator id.

/// One message between nodes. `body` is one of the request or reply kinds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Envelope {
    /// Topology epoch of the sender.
    #[prost(uint32, tag = "1")]
    pub epoch: u32,
    /// Sending node.
    #[prost(uint32, tag = "2")]
    pub from: u32,
    /// The message.
    #[prost(
        oneof = "Body",
        tags = "10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45"
    )]
    pub body: Option<Body>,
}

/// The kinds of message.
// A node's status reply is the largest variant (about 350 bytes); a message is decoded once
// and moved a few times, so boxing it would buy nothing measurable.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Body {
    /// Phase 1: run a sub-transaction (coordinator → executor).
    #[prost(message, tag = "10")]
    Execute(ExecuteRequest),
    /// Phase 1 reply: the executor's vote.
    #[prost(message, tag = "11")]
    Vote(VoteMsg),
    /// Record a decision in the vote words of the replicas' redo entries.
    #[prost(message, tag = "12")]
    Record(RecordRequest),
    /// Reply to [`Body::Record`].
    #[prost(message, tag = "13")]
    Recorded(RecordReply),
    /// Phase 2: apply the decision and release the locks.
    #[prost(message, tag = "14")]
    Decide(DecideRequest),
    /// Reply to [`Body::Decide`].
    #[prost(message, tag = "15")]
    Decided(DecideReply),
    /// A client's transaction (client → coordinator).
    #[prost(message, tag = "16")]
    Submit(SubmitRequest),
    /// The outcome of a client's transaction.
    #[prost(message, tag = "17")]
    Outcome(OutcomeReply),
    /// Change link conditions while running (operator → node).
    #[prost(message, tag = "18")]
    NetemSet(NetemSetRequest),
    /// An error answer to any request (malformed request, over a limit, not ready, …).
    #[prost(message, tag = "19")]
    Error(ErrorReply),
    /// A generic acknowledgement.
    #[prost(message, tag = "20")]
    Ack(AckReply),
    /// Baselines (2PC-Paxos): prepare at a primary, which replicates its redo entries to its
    /// secondaries before answering.
    #[prost(message, tag = "21")]
    Prepare(PrepareRequest),
    /// Reply to [`Body::Prepare`].
    #[prost(message, tag = "22")]
    Prepared(PrepareReply),
    /// Baselines: a Paxos accept of a primary's redo at a secondary replica.
    #[prost(message, tag = "23")]
    Accept(AcceptRequest),
    /// Reply to [`Body::Accept`].
    #[prost(message, tag = "24")]
    Accepted(AcceptReply),
    /// Baselines: a coordinator's decision, replicated to its backups in other DCs
    /// (answered with [`Body::Ack`]).
    #[prost(message, tag = "25")]
    LogDecision(LogDecisionRequest),
    /// Recovery: a recoverer's PREPARE at one DC (docs/design.md §2, recovery).
    #[prost(message, tag = "26")]
    RecoveryPrepare(RecoveryPrepareRequest),
    /// Reply to [`Body::RecoveryPrepare`]: one promise per replica node.
    #[prost(message, tag = "27")]
    Promises(PromisesReply),
    /// Gap filling: which reservations the receiver still holds in a ring of its DC.
    #[prost(message, tag = "28")]
    Reservations(ReservationsRequest),
    /// Reply to [`Body::Reservations`].
    #[prost(message, tag = "29")]
    Reserved(ReservedReply),
    /// What a node is doing: its counters, undecided entries and recoveries (operator →
    /// node; `redt status`).
    #[prost(message, tag = "30")]
    Status(StatusRequest),
    /// Reply to [`Body::Status`].
    #[prost(message, tag = "31")]
    NodeStatus(StatusReply),
    /// Failure detection: one node's heartbeat to another (node → node, answered with
    /// [`Body::Ack`]; `redt_membership::Detector`).
    #[prost(message, tag = "32")]
    Heartbeat(HeartbeatMsg),
    /// The membership's Raft group: one raft-rs message between two nodes (node → node,
    /// answered with [`Body::Ack`]; `redt_membership::RaftMembership`).
    #[prost(message, tag = "33")]
    Raft(RaftMsg),
    /// Rebuild: a learner asks a voter for one chunk of a partition's snapshot copy (answered
    /// with [`Body::SnapshotChunk`] or [`Body::Error`]).
    #[prost(message, tag = "34")]
    SnapshotRead(SnapshotReadRequest),
    /// Rebuild: one chunk of a snapshot copy.
    #[prost(message, tag = "35")]
    SnapshotChunk(SnapshotChunkReply),
    /// A client asks a coordinator for a transaction id to submit with later (client →
    /// coordinator; answered with [`Body::TxnReserved`]). The client knows its
    /// transaction's id even if the coordinator dies before answering.
    #[prost(message, tag = "36")]
    ReserveTxn(ReserveTxnRequest),
    /// Reply to [`Body::ReserveTxn`].
    #[prost(message, tag = "37")]
    TxnReserved(TxnReservedReply),
    /// A client asks any node what became of a transaction (client → node; answered with
    /// [`Body::TxnOutcome`]). Read-only: nothing is fenced, promised or recovered.
    #[prost(message, tag = "38")]
    OutcomeQuery(OutcomeQueryRequest),
    /// Reply to [`Body::OutcomeQuery`].
    #[prost(message, tag = "39")]
    TxnOutcome(TxnOutcomeReply),
    /// The node answering an outcome query asks one node of a DC what the DC's rings and
    /// decision logs hold of a transaction (node → node; answered with [`Body::TxnFound`]).
    /// Read-only.
    #[prost(message, tag = "40")]
    TxnLookup(TxnLookupRequest),
    /// Reply to [`Body::TxnLookup`]: one finding per node of the DC.
    #[prost(message, tag = "41")]
    TxnFound(TxnFoundReply),
    /// Before it frees its record of a deleted key, a replica asks the key's other replicas
    /// whether they hold the delete too (node → node; answered with [`Body::ReclaimChecked`]).
    /// Read-only.
    #[prost(message, tag = "42")]
    ReclaimCheck(ReclaimCheckRequest),
    /// Reply to [`Body::ReclaimCheck`].
    #[prost(message, tag = "43")]
    ReclaimChecked(ReclaimCheckedReply),
    /// The read phase of an optimistic transaction: cell 0 of some keys of a key/value table
    /// with each cell's version, read without locks (client, operator or node → node; answered
    /// with [`Body::VersionedValues`] or [`Body::Error`]; docs/design.md, "Optimistic
    /// transactions: versioned reads and CHECK"). Read-only. A node reads the keys whose
    /// partition has a replica in its DC from that DC's replicas, and forwards the others to a
    /// node of the nearest DC holding their partition; a node answering another node's request
    /// reads its own DC only.
    #[prost(message, tag = "44")]
    VersionedRead(VersionedReadRequest),
    /// Reply to [`Body::VersionedRead`]: one item per key asked, in order.
    #[prost(message, tag = "45")]
    VersionedValues(VersionedReadReply),
}

/// A versioned read ([`Body::VersionedRead`]): cell 0 of `keys` of `table`, with versions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionedReadRequest {
    /// The key/value table (a table of one cell); another table is a `MALFORMED` error.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// The keys, at most `limits.max_ops_per_txn` of them (else an `OVER_LIMIT` error); a key
    /// may be repeated.
    #[prost(uint64, repeated, tag = "2")]
    pub keys: Vec<u64>,
}

/// Reply to [`Body::VersionedRead`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionedReadReply {
    /// One item per key asked, in the request's order.
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<VersionedItemMsg>,
}

/// One key of a [`VersionedReadReply`]: a committed image of its cell 0.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionedItemMsg {
    /// The key.
    #[prost(uint64, tag = "1")]
    pub key: u64,
    /// The cell's raw version word (update counter << 48 | 48-bit commit timestamp, as
    /// [`ItemVoteMsg::versions`]); 0 for a key with no record or a cell never written. The
    /// operand of a key/value CHECK of the key (`kv_kind::CHECK`, the same bits as an i64).
    #[prost(uint64, tag = "2")]
    pub version: u64,
    /// Cell 0's value without its trailing zero bytes (a cell holds its value zero-padded to
    /// the table's cell width); empty when `found` is false.
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
    /// Whether the key holds a value: its record exists and cell 0 is not all zero bytes. A
    /// deleted key is not found, but keeps its delete's version.
    #[prost(bool, tag = "4")]
    pub found: bool,
}

/// The deleted keys a replica is about to free ([`Body::ReclaimCheck`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReclaimCheckRequest {
    /// The keys, each with its delete's commit timestamp.
    #[prost(message, repeated, tag = "1")]
    pub keys: Vec<ReclaimKeyMsg>,
}

/// One deleted key of a [`ReclaimCheckRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReclaimKeyMsg {
    /// The table.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// The key.
    #[prost(uint64, tag = "2")]
    pub key: u64,
    /// The delete's commit timestamp (48 bits).
    #[prost(uint64, tag = "3")]
    pub cts: u64,
}

/// Reply to [`Body::ReclaimCheck`]: per key, in order, whether the answering node holds the
/// delete (its record holds no row at or after the delete, or it freed the key already), and
/// the node's catch-up floor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReclaimCheckedReply {
    /// One answer per key asked.
    #[prost(bool, repeated, tag = "1")]
    pub holds: Vec<bool>,
    /// The answering node's catch-up floor (a commit timestamp, 48 bits): no key whose delete
    /// is above it may be freed yet. Absent when no entry of its ring may still make a
    /// catch-up.
    #[prost(uint64, optional, tag = "2")]
    pub floor: Option<u64>,
}

/// A client's request for a transaction id ([`Body::ReserveTxn`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReserveTxnRequest {}

/// A reserved transaction id: the coordinator that issued it runs it once if submitted with
/// it within `valid_for_ms`, and never issues it again.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnReservedReply {
    /// The transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// The coordinator's hybrid-logical-clock reading when it reserved the id (a 48-bit
    /// commit-timestamp value): the transaction's start timestamp will be above it.
    #[prost(uint64, tag = "2")]
    pub start_after: u64,
    /// How long the reservation holds, in ms of the coordinator's clock after `start_after`:
    /// a submission that reaches it later is refused.
    #[prost(uint64, tag = "3")]
    pub valid_for_ms: u64,
    /// A random secret only the reserver learns: a submission under the id, and an outcome
    /// query that is to be waited for, must carry it (clients sharing one certificate
    /// identity cannot use each other's reservations).
    #[prost(uint64, tag = "4")]
    pub token: u64,
}

/// A client's question: what became of transaction `txn`?
#[derive(Clone, PartialEq, prost::Message)]
pub struct OutcomeQueryRequest {
    /// The transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// A lower bound of its start timestamp (the reservation's `start_after`), if known:
    /// without it a node cannot tell "never ran" from "forgotten".
    #[prost(uint64, optional, tag = "2")]
    pub start_after: Option<u64>,
    /// How long the reservation was valid for (ms after `start_after`), with `start_after`.
    #[prost(uint64, tag = "3")]
    pub valid_for_ms: u64,
    /// How long the answering node may wait for a decision, in ms (0: its own bound; it
    /// never waits longer than its own bound). Only the caller identity that reserved the
    /// id at the answering node is waited for; anyone else is answered after one lookup
    /// round, with whatever it found, and asks again itself.
    #[prost(uint64, tag = "4")]
    pub wait_ms: u64,
    /// The reservation's token ([`TxnReservedReply::token`]): without it the caller is not
    /// the reserver, and is not waited for.
    #[prost(uint64, tag = "5")]
    pub token: u64,
}

/// What became of a transaction, as far as the rings and decision logs show.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnOutcomeReply {
    /// The transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// 0 = committed, 1 = aborted (decided, or it can never commit), 2 = undecided (entries
    /// exist, no decision visible yet), 3 = unknown (nothing conclusive can be seen).
    #[prost(uint32, tag = "2")]
    pub state: u32,
    /// The commit timestamp (committed only).
    #[prost(uint64, tag = "3")]
    pub cts: u64,
    /// What the answer rests on, for people.
    #[prost(string, tag = "4")]
    pub detail: String,
    /// How long the answering node would look for a decision at most, in ms from the first
    /// query (its bound: the recoverers' timeouts, at most 30 s): a client that asks again
    /// while the answer is not final stops asking once it has passed (0: not told).
    #[prost(uint64, tag = "5")]
    pub bound_ms: u64,
}

/// A lookup of one transaction in the receiver's DC.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnLookupRequest {
    /// The transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// A lower bound of its start timestamp, if known (for the decision-log lookups).
    #[prost(uint64, optional, tag = "2")]
    pub start_after: Option<u64>,
}

/// What one node of a DC holds of a transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnFindingMsg {
    /// The node.
    #[prost(uint32, tag = "1")]
    pub node: u32,
    /// 0 = nothing (no entry, and its decision log proves none was released), 1 = entries or
    /// rows (see the other fields), 2 = cannot tell (no entry, and its decision log cannot
    /// prove there was none), 3 = not trusted (the node holds no voting replica now).
    #[prost(uint32, tag = "2")]
    pub kind: u32,
    /// A commit was applied here, at this commit timestamp (0: none).
    #[prost(uint64, tag = "3")]
    pub committed_cts: u64,
    /// The node's replicas voted commit (in any entry or row of the transaction).
    #[prost(bool, tag = "4")]
    pub commit_vote: bool,
    /// An unfinished phase-1 entry of the transaction is in the node's ring.
    #[prost(bool, tag = "5")]
    pub unfinished: bool,
    /// An unfinished entry whose vote is not set yet (it may still vote commit).
    #[prost(bool, tag = "6")]
    pub unvoted: bool,
    /// A finished entry's decision-log row was evicted: it may have been a commit.
    #[prost(bool, tag = "10")]
    pub forgotten: bool,
    /// The start timestamp, epoch and partitions read from an entry, when one was found.
    #[prost(uint64, optional, tag = "7")]
    pub start: Option<u64>,
    /// See `start`.
    #[prost(uint32, tag = "8")]
    pub epoch: u32,
    /// See `start`.
    #[prost(uint32, repeated, tag = "9")]
    pub partitions: Vec<u32>,
}

/// Reply to a [`TxnLookupRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnFoundReply {
    /// One finding per node of the DC.
    #[prost(message, repeated, tag = "1")]
    pub findings: Vec<TxnFindingMsg>,
}

/// A learner's request for one chunk of a snapshot copy of `partition` (docs/design.md,
/// "Rebuild"; `redt_coordinator::rebuild`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotReadRequest {
    /// The partition.
    #[prost(uint32, tag = "1")]
    pub partition: u32,
    /// The epoch that added the learner: the voter serves once it applied it and finished
    /// every entry of an older epoch.
    #[prost(uint32, tag = "2")]
    pub epoch: u32,
    /// The index bucket to scan from (0: the start of the copy).
    #[prost(uint64, tag = "3")]
    pub from_bucket: u64,
    /// The most bytes of records wanted (the voter caps it).
    #[prost(uint32, tag = "4")]
    pub max_bytes: u32,
}

/// One chunk of a snapshot copy.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotChunkReply {
    /// The partition's records found in the buckets scanned.
    #[prost(message, repeated, tag = "1")]
    pub records: Vec<SnapshotRecordMsg>,
    /// Whether the scan reached the end of the index.
    #[prost(bool, tag = "2")]
    pub done: bool,
    /// The bucket to ask from next (when not `done`).
    #[prost(uint64, tag = "3")]
    pub next: u64,
    /// The voter's deletion horizon (a commit timestamp), READ before the buckets: the
    /// learner raises its own to it before it applies the records.
    #[prost(uint64, tag = "4")]
    pub deletion_horizon: u64,
}

/// One record of a snapshot copy: its committed cells.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotRecordMsg {
    /// Table id.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// Key.
    #[prost(uint64, tag = "2")]
    pub key: u64,
    /// The cells with a committed version.
    #[prost(message, repeated, tag = "3")]
    pub cells: Vec<SnapshotCellMsg>,
}

/// One cell of a snapshot record.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotCellMsg {
    /// Cell index in its table's schema.
    #[prost(uint32, tag = "1")]
    pub cell: u32,
    /// Its version (update counter << 48 | 48-bit commit timestamp).
    #[prost(uint64, tag = "2")]
    pub version: u64,
    /// Its value.
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
}

/// One Raft message of the membership group, as raft-rs encodes it (`eraftpb::Message`,
/// protobuf).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RaftMsg {
    /// The encoded message.
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
}

/// A heartbeat from one node to another: the sender is alive (failure detection).
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeartbeatMsg {
    /// When the sender sent it, in µs on the sender's own clock: the receiver compares it only
    /// with the sender's earlier heartbeats, to ignore a duplicate or an overtaken one.
    #[prost(uint64, tag = "1")]
    pub sent_at_us: u64,
}

/// An operator's question to one node: what is it doing?
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {
    /// Also count the records whose lock word is held (reads the whole index and one word
    /// per record: slow on a large MemStore).
    #[prost(bool, tag = "1")]
    pub count_locks: bool,
}

/// One node's status (reply to [`StatusRequest`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusReply {
    /// The answering node.
    #[prost(uint32, tag = "1")]
    pub node: u32,
    /// Milliseconds since the node process started.
    #[prost(uint64, tag = "2")]
    pub uptime_ms: u64,
    /// Transactions this node coordinated that its clients were told committed, aborted,
    /// or unknown, since it started.
    #[prost(uint64, tag = "3")]
    pub committed: u64,
    /// See `committed`.
    #[prost(uint64, tag = "4")]
    pub aborted: u64,
    /// See `committed`.
    #[prost(uint64, tag = "5")]
    pub unknown: u64,
    /// Recoveries this node started, since it started.
    #[prost(uint64, tag = "6")]
    pub recoveries_started: u64,
    /// Recoveries that decided commit.
    #[prost(uint64, tag = "7")]
    pub recoveries_committed: u64,
    /// Recoveries that decided abort.
    #[prost(uint64, tag = "8")]
    pub recoveries_aborted: u64,
    /// Recoveries running now that cannot decide (too many replicas unreachable).
    #[prost(uint64, tag = "9")]
    pub recoveries_blocked: u64,
    /// Ring slots covered with fillers for dead writers, since it started.
    #[prost(uint64, tag = "10")]
    pub gap_slots_filled: u64,
    /// Undecided phase-1 entries in the node's ring now.
    #[prost(uint64, tag = "11")]
    pub undecided_entries: u64,
    /// Start of the oldest undecided entry, in ms since the Unix epoch (0: none).
    #[prost(uint64, tag = "12")]
    pub oldest_undecided_unix_ms: u64,
    /// The undecided entries past their phase-1 deadline (waiting on recovery), oldest
    /// first, at most 100.
    #[prost(message, repeated, tag = "13")]
    pub waiting: Vec<WaitingTxnMsg>,
    /// Records whose lock word is held, when asked (`count_locks`).
    #[prost(uint64, optional, tag = "14")]
    pub locks_held: Option<u64>,
    /// Recoveries running now (deciding, blocked, or delivering a recorded decision to a DC
    /// that has not answered yet).
    #[prost(uint64, tag = "15")]
    pub recoveries_running: u64,
    /// Entries of the node's ring still owing a catch-up to a replica left behind (they hold
    /// the ring's head until it is delivered or given up).
    #[prost(uint64, tag = "16")]
    pub catch_ups_owed: u64,
    /// The nodes this node suspects now (no heartbeat from them for their timeout), ascending.
    #[prost(uint32, repeated, tag = "17")]
    pub suspected_nodes: Vec<u32>,
    /// The DCs this node suspects now (every node of the DC suspected), ascending; never the
    /// answering node's own DC.
    #[prost(uint32, repeated, tag = "18")]
    pub suspected_dcs: Vec<u32>,
    /// Suspicions of a node this node raised since it started (a node suspected, seen alive
    /// and suspected again counts twice).
    #[prost(uint64, tag = "19")]
    pub suspicions_total: u64,
    /// Slots of the node's ring between its head and its tail: entries written (or slots
    /// reserved) that replay has not released yet. Falls to 0 on an idle node; a gap at the
    /// head (a dead writer's reservation) or an undecided entry holds it up.
    #[prost(uint64, tag = "20")]
    pub replay_backlog_slots: u64,
    /// The placement epoch the node is at.
    #[prost(uint32, tag = "21")]
    pub epoch: u32,
    /// The membership Raft group's leader as the node knows it: its node id plus one (0: none
    /// known).
    #[prost(uint32, tag = "22")]
    pub membership_leader: u32,
    /// The DCs the node's current placement has removed, ascending.
    #[prost(uint32, repeated, tag = "23")]
    pub removed_dcs: Vec<u32>,
    /// The node's rebuilds (learners being filled, or filled and waiting for promotion).
    #[prost(message, repeated, tag = "24")]
    pub rebuilds: Vec<RebuildMsg>,
    /// Partitions the node's current placement holds below the replication factor (fewer
    /// voters than the topology file gives them, or a learner not yet promoted).
    #[prost(uint32, tag = "25")]
    pub under_replicated: u32,
    /// Requests the node refused for being over a limit (the topology's `limits:`, or more
    /// participant DCs than it has) since it started.
    #[prost(uint64, tag = "26")]
    pub refused_over_limit: u64,
    /// Abort votes its executor side gave because a record heap was full, since it started.
    #[prost(uint64, tag = "27")]
    pub heap_full_votes: u64,
    /// Committed redo entries its replay could not apply and passed over, since it started.
    #[prost(uint64, tag = "28")]
    pub replay_invalid_entries: u64,
    /// Incoming QUIC connections its transport refused over `transport.max_connections`.
    #[prost(uint64, tag = "29")]
    pub quic_refused_total: u64,
    /// … over `transport.max_connections_per_peer`.
    #[prost(uint64, tag = "30")]
    pub quic_refused_per_peer: u64,
    /// Requests whose handler it cancelled past `transport.handler_timeout`.
    #[prost(uint64, tag = "31")]
    pub quic_handler_timeouts: u64,
    /// Responses it reset past `transport.write_timeout`.
    #[prost(uint64, tag = "32")]
    pub quic_write_timeouts: u64,
    /// Outgoing calls that got no slot within `transport.call_slot_timeout`.
    #[prost(uint64, tag = "33")]
    pub quic_call_slot_timeouts: u64,
    /// Requests the node refused because the caller's certificate lacked the role they need
    /// (operator for admin requests, node for what nodes send each other), since it started.
    #[prost(uint64, tag = "34")]
    pub refused_role: u64,
    /// Commit votes its executor side forgot over `limits.max_pending_votes`, since it
    /// started (their entries wait in the ring for their decision).
    #[prost(uint64, tag = "35")]
    pub pending_votes_forgotten: u64,
    /// Accepted replica redo its executor side forgot over `limits.max_accepted_redo`, since
    /// it started (a decision finds it by scanning the ring).
    #[prost(uint64, tag = "36")]
    pub accepted_redo_forgotten: u64,
    /// Records committed deletes emptied that its executor freed once their grace passed,
    /// since it started.
    #[prost(uint64, tag = "52")]
    pub deleted_records_freed: u64,
    /// Such records waiting for their grace now.
    #[prost(uint64, tag = "53")]
    pub deleted_records_waiting: u64,
    /// Background retries (catch-ups, recoverers) waiting now for a slot under
    /// `limits.max_background_retries`.
    #[prost(uint64, tag = "37")]
    pub background_retries_waiting: u64,
    /// Background retries that had to wait for a slot, since it started.
    #[prost(uint64, tag = "38")]
    pub background_retries_waited: u64,
    /// The round-trip time its QUIC connections measure to each other DC it has a
    /// connection to: the smallest over that DC's nodes, ascending by DC.
    #[prost(message, repeated, tag = "39")]
    pub link_rtts: Vec<LinkRttMsg>,
    /// CPU time of the node's process since it started, in µs: user plus system time of all
    /// its threads (in an embedded cluster, of every node sharing the process). Absent from a
    /// node that does not report it.
    #[prost(uint64, optional, tag = "40")]
    pub process_cpu_us: Option<u64>,
    /// Resident memory of the node's process, in bytes. Absent where the node cannot read it
    /// (no `/proc/self/statm`) or does not report it.
    #[prost(uint64, optional, tag = "41")]
    pub process_resident_bytes: Option<u64>,
    /// Raft messages the node dropped because they named another sender than the node whose
    /// certificate sent them, since it started.
    #[prost(uint64, tag = "42")]
    pub raft_wrong_sender: u64,
    /// When the node read the figures only its executor thread reads (undecided entries and
    /// those waiting, catch-ups owed, replay backlog, forgotten votes and redo), ms since the
    /// Unix epoch by its clock: a node shares one reading of them for up to a second among the
    /// status requests and metrics scrapes it serves. Absent from a node that does not report
    /// it.
    #[prost(uint64, optional, tag = "43")]
    pub ring_read_unix_ms: Option<u64>,
    /// Bytes of the node's record heap (its MemStore past the fixed areas). Absent from a node
    /// that does not report the heap.
    #[prost(uint64, optional, tag = "44")]
    pub record_heap_bytes: Option<u64>,
    /// Bytes of the record heap in use: records, B+-tree nodes and directories, less the
    /// retired records on its free lists.
    #[prost(uint64, optional, tag = "45")]
    pub record_heap_used_bytes: Option<u64>,
    /// Bytes of retired records on the record heap's free lists, waiting for the next insert of
    /// their size.
    #[prost(uint64, optional, tag = "46")]
    pub record_heap_free_bytes: Option<u64>,
    /// Jobs the node's executor thread ran in its short lane (phase 1 of small
    /// sub-transactions, decisions, records) since it started.
    #[prost(uint64, tag = "47")]
    pub executor_short_jobs: u64,
    /// Jobs it ran in its bulk lane (large sub-transactions, lookups, scans).
    #[prost(uint64, tag = "48")]
    pub executor_bulk_jobs: u64,
    /// Time the executor thread spent running jobs, µs.
    #[prost(uint64, tag = "49")]
    pub executor_busy_us: u64,
    /// The longest one job held the executor thread, µs.
    #[prost(uint64, tag = "50")]
    pub executor_longest_job_us: u64,
    /// The longest a short job waited for the executor thread, µs.
    #[prost(uint64, tag = "51")]
    pub executor_longest_short_wait_us: u64,
}

/// One DC's round-trip time as a node's QUIC connections measure it (quinn's smoothed RTT).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinkRttMsg {
    /// The other DC.
    #[prost(uint32, tag = "1")]
    pub dc: u32,
    /// Round-trip time in µs.
    #[prost(uint64, tag = "2")]
    pub rtt_us: u64,
}

/// One rebuild of a node: a learner's snapshot copy.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RebuildMsg {
    /// The partition.
    #[prost(uint32, tag = "1")]
    pub partition: u32,
    /// The epoch that added the learner.
    #[prost(uint32, tag = "2")]
    pub added_in: u32,
    /// Records applied so far.
    #[prost(uint64, tag = "3")]
    pub records: u64,
    /// Bytes of records applied so far.
    #[prost(uint64, tag = "4")]
    pub bytes: u64,
    /// Voters whose copy is complete.
    #[prost(uint32, tag = "5")]
    pub sources_done: u32,
    /// Voters copied from.
    #[prost(uint32, tag = "6")]
    pub sources: u32,
    /// Whether the copy is complete (the learner waits for its promotion).
    #[prost(bool, tag = "7")]
    pub filled: bool,
    /// Why the last try failed, if one did (empty: none).
    #[prost(string, tag = "8")]
    pub last_error: String,
    /// Rows emptied after the copy because no voter's copy refreshed them.
    #[prost(uint64, tag = "9")]
    pub purged: u64,
}

/// An undecided transaction past its phase-1 deadline, as one node sees it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WaitingTxnMsg {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Its coordinator.
    #[prost(uint32, tag = "2")]
    pub coordinator: u32,
    /// Ms since its start.
    #[prost(uint64, tag = "3")]
    pub age_ms: u64,
    /// Partitions it touches.
    #[prost(uint32, repeated, tag = "4")]
    pub partitions: Vec<u32>,
    /// Records its entry locks on this node.
    #[prost(uint64, tag = "5")]
    pub locks: u64,
    /// Whether a recoverer on this node is working on it.
    #[prost(bool, tag = "6")]
    pub recovering: bool,
    /// The DCs that recoverer waits for (empty unless it is blocked).
    #[prost(uint32, repeated, tag = "7")]
    pub waiting_for: Vec<u32>,
}

/// A ring owner's question to a writer of its DC: which reservations do you hold in my ring?
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReservationsRequest {
    /// The node whose ring is asked about.
    #[prost(uint32, tag = "1")]
    pub ring: u32,
}

/// One unwritten reservation in a ring.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReservationMsg {
    /// Its first slot (ring index).
    #[prost(uint64, tag = "1")]
    pub index: u64,
    /// Its length in slots.
    #[prost(uint64, tag = "2")]
    pub slots: u64,
}

/// Reply to a [`ReservationsRequest`]: every reservation the answering process holds there.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReservedReply {
    /// The reservations, in ring order.
    #[prost(message, repeated, tag = "1")]
    pub reservations: Vec<ReservationMsg>,
}

/// A recoverer's PREPARE(ballot) for one transaction at one DC.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecoveryPrepareRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// The recoverer's ballot.
    #[prost(uint32, tag = "2")]
    pub ballot: u32,
    /// The transaction's start timestamp (from its redo entries).
    #[prost(uint64, tag = "3")]
    pub start: u64,
    /// Every partition the transaction touches.
    #[prost(uint32, repeated, tag = "4")]
    pub partitions: Vec<u32>,
    /// The placement epoch the transaction was planned in.
    #[prost(uint32, tag = "5")]
    pub epoch: u32,
    /// Its coordinator node.
    #[prost(uint32, tag = "6")]
    pub coordinator: u32,
    /// Every DC it involves.
    #[prost(uint32, repeated, tag = "7")]
    pub participants: Vec<u32>,
}

/// One replica node's promise.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PromiseMsg {
    /// The replica node.
    #[prost(uint32, tag = "1")]
    pub node: u32,
    /// 0 entry, 1 applied, 2 no vote, 3 unknown, 4 refused.
    #[prost(uint32, tag = "2")]
    pub kind: u32,
    /// Entry: where it is.
    #[prost(message, optional, tag = "3")]
    pub entry: Option<EntryRefMsg>,
    /// Entry: its vote (1 commit, 2 abort).
    #[prost(uint32, tag = "4")]
    pub vote: u32,
    /// Entry: the recorded decision (0 none, 1 commit, 2 abort) and its ballot.
    #[prost(uint32, tag = "5")]
    pub recorded: u32,
    /// Entry: the recorded ballot; refused: the promised ballot.
    #[prost(uint32, tag = "6")]
    pub ballot: u32,
    /// Entry: the encoded redo entry (the ring's entry format).
    #[prost(bytes = "vec", tag = "7")]
    pub redo: Vec<u8>,
    /// Applied: commit (true) or abort.
    #[prost(bool, tag = "8")]
    pub commit: bool,
    /// Applied commit: its timestamp.
    #[prost(uint64, tag = "9")]
    pub cts: u64,
}

/// Reply to a recoverer's PREPARE.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PromisesReply {
    /// One per replica node of the DC.
    #[prost(message, repeated, tag = "1")]
    pub promises: Vec<PromiseMsg>,
}

/// A procedure call: which stored procedure and its parameters.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcedureCall {
    /// The procedure.
    #[prost(oneof = "ProcedureKind", tags = "1, 2, 3, 4, 60")]
    pub kind: Option<ProcedureKind>,
}

/// The stored procedures a coordinator knows.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ProcedureKind {
    /// The generic key/value procedure.
    #[prost(message, tag = "1")]
    Kv(KvCall),
    /// A YCSB transaction.
    #[prost(message, tag = "2")]
    Ycsb(YcsbCall),
    /// A TPC-C transaction, built from the stored procedures of the `redt-tpcc` crate.
    #[prost(message, tag = "3")]
    Tpcc(TpccCall),
    /// Calls run as one transaction, in order, each on what the ones before it wrote: a batch
    /// a coordinator forms of the transactions it held behind a conflicting one of its own
    /// (`redt_dc_executor::BatchProcedure`). Its members are key/value, YCSB or TPC-C calls.
    #[prost(message, tag = "4")]
    Batch(BatchCall),
    /// Whole records of any tables: reads of every cell, writes of every cell, creations
    /// (`redt workload`: loading and checking a workload's data through the cluster).
    #[prost(message, tag = "60")]
    Records(RecordsCall),
}

/// The members of a batch, in the order they run.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BatchCall {
    /// The member calls (none of them a batch).
    #[prost(message, repeated, tag = "1")]
    pub calls: Vec<ProcedureCall>,
}

/// Whole-record operations on any tables of the topology, in order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecordsCall {
    /// The operations.
    #[prost(message, repeated, tag = "1")]
    pub ops: Vec<RecordOpMsg>,
}

/// One whole-record operation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecordOpMsg {
    /// 0 = get (read every cell; a missing record creates nothing and reads as missing),
    /// 1 = put (write every cell, creating the record if missing), 2 = create (create the
    /// record, every cell zero, if missing; an existing record is left as it is).
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    /// Table id.
    #[prost(uint32, tag = "2")]
    pub table: u32,
    /// Key.
    #[prost(uint64, tag = "3")]
    pub key: u64,
    /// For a put: one value per cell of the table, in cell order, each at most the cell's
    /// width (a shorter one is zero-padded).
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub cells: Vec<Vec<u8>>,
}

/// A TPC-C transaction: its kind and its parameters, both in the registered builder's
/// format (`redt_tpcc::procedures`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TpccCall {
    /// Transaction kind (New-Order, Payment, ...), as the builder numbers them.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    /// Encoded parameters.
    #[prost(bytes = "vec", tag = "2")]
    pub params: Vec<u8>,
}

/// Parameters of the key/value procedure.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KvCall {
    /// Table id.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// Operations in order.
    #[prost(message, repeated, tag = "2")]
    pub ops: Vec<KvOpMsg>,
}

/// One key/value operation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KvOpMsg {
    /// 0 = read, 1 = write, 2 = add, 3 = append.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    /// Key.
    #[prost(uint64, tag = "2")]
    pub key: u64,
    /// Value for write.
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
    /// Operand for add (i64) or append (u64 bits).
    #[prost(int64, tag = "4")]
    pub operand: i64,
}

/// Parameters of a YCSB transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct YcsbCall {
    /// Table id.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// Cells per record.
    #[prost(uint32, tag = "2")]
    pub cells: u32,
    /// Operations in order.
    #[prost(message, repeated, tag = "3")]
    pub ops: Vec<YcsbOpMsg>,
}

/// One YCSB operation: a read of every cell, or an update of one cell.
#[derive(Clone, PartialEq, prost::Message)]
pub struct YcsbOpMsg {
    /// Key.
    #[prost(uint64, tag = "1")]
    pub key: u64,
    /// True for an update.
    #[prost(bool, tag = "2")]
    pub update: bool,
    /// Cell updated.
    #[prost(uint32, tag = "3")]
    pub cell: u32,
    /// New value.
    #[prost(bytes = "vec", tag = "4")]
    pub value: Vec<u8>,
}

/// Phase 1 request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecuteRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Ballot (0 for the original coordinator).
    #[prost(uint32, tag = "2")]
    pub ballot: u32,
    /// Coordinator node.
    #[prost(uint32, tag = "3")]
    pub coordinator: u32,
    /// Participant DCs.
    #[prost(uint32, repeated, tag = "4")]
    pub participants: Vec<u32>,
    /// The procedure call (the executor plans it again and keeps the accesses of its DC).
    #[prost(message, optional, tag = "5")]
    pub call: Option<ProcedureCall>,
    /// Which replicas to run on: 0 = every replica in the receiver's DC (RedT), 1 = the
    /// primary replicas held by the receiver node (2PC-Paxos, EP-Paxos), 2 = every replica
    /// held by the receiver node (TAPIR).
    #[prost(uint32, tag = "6")]
    pub scope: u32,
    /// EP-Paxos: replicate the redo to the secondaries (majority) before voting.
    #[prost(bool, tag = "7")]
    pub replicate: bool,
    /// The coordinator's HLC reading at start (recorded in the redo entries).
    #[prost(uint64, tag = "8")]
    pub start: u64,
    /// Phase-1 deadline, ms since the HLC origin: an executor whose clock is past it votes
    /// abort without locking (so a recoverer can count a missing vote as an abort).
    #[prost(uint64, tag = "9")]
    pub deadline_ms: u64,
    /// Every partition the transaction touches (recorded in the redo entries).
    #[prost(uint32, repeated, tag = "10")]
    pub partitions: Vec<u32>,
    /// The placement epoch the coordinator planned the transaction in: an executor at another
    /// epoch votes abort without locking (the epoch fence).
    #[prost(uint32, tag = "11")]
    pub epoch: u32,
    /// Which share of the executors' bulk lane a large sub-transaction queues in: a digest of
    /// the submitting client's identity; 0 when none is known.
    #[prost(uint64, tag = "12")]
    pub share: u64,
    /// Phase 2s of the coordinator's earlier transactions this one conflicts with, to apply
    /// before running it (decided-holder takeover); at most 16.
    #[prost(message, repeated, tag = "13")]
    pub carried: Vec<DecideRequest>,
}

/// Versions and values of one access in a vote.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ItemVoteMsg {
    /// Access index in the procedure's plan.
    #[prost(uint32, tag = "1")]
    pub access: u32,
    /// Node holding the replica.
    #[prost(uint32, tag = "2")]
    pub node: u32,
    /// Cells, ascending, parallel to `versions`.
    #[prost(uint32, repeated, tag = "3")]
    pub cells: Vec<u32>,
    /// Cell versions (update counter << 48 | cts).
    #[prost(uint64, repeated, tag = "4")]
    pub versions: Vec<u64>,
    /// Cells read, parallel to `values`.
    #[prost(uint32, repeated, tag = "5")]
    pub read_cells: Vec<u32>,
    /// Values read, each without its trailing zero bytes when `value_lens` is given.
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub values: Vec<Vec<u8>>,
    /// Parallel to `values`: each value's length in bytes (its cell's size) before its
    /// trailing zero bytes were dropped for the wire; the receiver pads it back. Empty: the
    /// values are whole.
    #[prost(uint32, repeated, tag = "7")]
    pub value_lens: Vec<u32>,
    /// The key had no record: the values are a fresh record's (every cell zero).
    #[prost(bool, tag = "60")]
    pub absent: bool,
    /// A row of a range read (`access` names the range's routing access): the row's key.
    #[prost(uint64, optional, tag = "70")]
    pub row: Option<u64>,
}

/// Where a redo entry lives.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EntryRefMsg {
    /// Node.
    #[prost(uint32, tag = "1")]
    pub node: u32,
    /// Ring index.
    #[prost(uint64, tag = "2")]
    pub index: u64,
    /// Reserved slots.
    #[prost(uint64, tag = "3")]
    pub slots: u64,
}

/// A DC's vote (phase 1 reply).
#[derive(Clone, PartialEq, prost::Message)]
pub struct VoteMsg {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// DC that voted.
    #[prost(uint32, tag = "2")]
    pub dc: u32,
    /// Commit vote?
    #[prost(bool, tag = "3")]
    pub commit: bool,
    /// Why it aborted (empty for commit), for people.
    #[prost(string, tag = "4")]
    pub abort_reason: String,
    /// Why it aborted, for the coordinator: 0 = only `abort_reason` says (a procedure's own
    /// abort, or a sender that does not set it), 1 = lock conflict on access `abort_value`
    /// (its kind in `abort_node`: `redt_dc_executor::LockConflictKind::code`, 0 = not said),
    /// 2 = record of access `abort_value` not found, 3 = redo ring of `abort_node` full,
    /// 4 = fenced by a recoverer, 5 = `abort_node`'s epoch floor is `abort_value`, 6 = record
    /// heap of `abort_node` full, 7 = hash index of `abort_node` full, 8 = a record access
    /// `abort_value` writes was freed and created again since the transaction started
    /// (superseded), 9 = a CHECK of access `abort_value` failed: cell 0 of its key on
    /// `abort_node` is not at the version the CHECK expects (a stale read).
    #[prost(uint32, tag = "10")]
    pub abort_kind: u32,
    /// The node `abort_kind` names (for a lock conflict: the conflict's kind).
    #[prost(uint32, tag = "11")]
    pub abort_node: u32,
    /// The access or epoch `abort_kind` names.
    #[prost(uint64, tag = "12")]
    pub abort_value: u64,
    /// Per-access versions and values.
    #[prost(message, repeated, tag = "5")]
    pub items: Vec<ItemVoteMsg>,
    /// Executor's hybrid-logical-clock reading.
    #[prost(uint64, tag = "6")]
    pub hlc: u64,
    /// Redo entries written.
    #[prost(message, repeated, tag = "7")]
    pub entries: Vec<EntryRefMsg>,
    /// Inter-DC messages the replying node sent and received for this request before
    /// answering (requests and replies; measured, for the Table-2 counters).
    #[prost(uint64, tag = "8")]
    pub nested_messages: u64,
    /// Inter-DC round trips on the replying node's critical path before answering.
    #[prost(uint64, tag = "9")]
    pub nested_round_trips: u64,
}

/// Record a decision at the replicas of one DC (ballot-guarded; docs/design.md §2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecordRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Ballot of the record.
    #[prost(uint32, tag = "2")]
    pub ballot: u32,
    /// True = commit, false = abort.
    #[prost(bool, tag = "3")]
    pub commit: bool,
    /// Commit timestamp (commit only).
    #[prost(uint64, tag = "4")]
    pub cts: u64,
    /// The DC's redo entries.
    #[prost(message, repeated, tag = "5")]
    pub entries: Vec<EntryRefMsg>,
}

/// Reply to a record request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecordReply {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Whether every entry accepted the record.
    #[prost(bool, tag = "2")]
    pub ok: bool,
    /// Why not, if not.
    #[prost(string, tag = "3")]
    pub error: String,
}

/// Phase 2 request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DecideRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Ballot of the decision.
    #[prost(uint32, tag = "2")]
    pub ballot: u32,
    /// True = commit.
    #[prost(bool, tag = "3")]
    pub commit: bool,
    /// Commit timestamp.
    #[prost(uint64, tag = "4")]
    pub cts: u64,
    /// The DC's redo entries.
    #[prost(message, repeated, tag = "5")]
    pub entries: Vec<EntryRefMsg>,
    /// Baselines: the receiver is a primary and forwards the decision to the secondaries
    /// it replicated the redo to, answering once a majority of each partition has it.
    #[prost(bool, tag = "6")]
    pub replicate: bool,
    /// Baselines: the decision is for the redo this node accepted as a secondary replica
    /// (not for redo entries it executed).
    #[prost(bool, tag = "7")]
    pub secondary: bool,
    /// RedT, to a DC up to date for these partitions: before applying the decision, read
    /// the DC's redo and ship each listed partition's new values to the listed replicas
    /// that the commit left behind (docs/design.md §2, phase 2).
    #[prost(message, repeated, tag = "8")]
    pub catch_up: Vec<CatchUpMsg>,
}

/// Replicas of one partition a commit left behind, to be sent the quorum's values as a
/// fresh `Committed` redo entry (docs/design.md §2, phase 2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CatchUpMsg {
    /// The partition.
    #[prost(uint32, tag = "1")]
    pub partition: u32,
    /// The replica nodes to catch up.
    #[prost(uint32, repeated, tag = "2")]
    pub nodes: Vec<u32>,
    /// The transaction's commit timestamp.
    #[prost(uint64, tag = "3")]
    pub cts: u64,
}

/// Reply to phase 2.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DecideReply {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Inter-DC messages the replying node sent and received for this request before
    /// answering (requests and replies; measured, for the Table-2 counters).
    #[prost(uint64, tag = "2")]
    pub nested_messages: u64,
    /// Inter-DC round trips on the replying node's critical path before answering.
    #[prost(uint64, tag = "3")]
    pub nested_round_trips: u64,
}

/// 2PC-Paxos prepare at a primary.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PrepareRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// The primary's redo entries (from its vote).
    #[prost(message, repeated, tag = "2")]
    pub entries: Vec<EntryRefMsg>,
}

/// Reply to a prepare.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PrepareReply {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Whether a majority of every partition's replicas now holds the redo.
    #[prost(bool, tag = "2")]
    pub ok: bool,
    /// Inter-DC messages the replying node sent and received for this request before
    /// answering (requests and replies; measured, for the Table-2 counters).
    #[prost(uint64, tag = "3")]
    pub nested_messages: u64,
    /// Inter-DC round trips on the replying node's critical path before answering.
    #[prost(uint64, tag = "4")]
    pub nested_round_trips: u64,
}

/// One new cell value of a replicated redo entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangeMsg {
    /// Table id.
    #[prost(uint32, tag = "1")]
    pub table: u32,
    /// Key.
    #[prost(uint64, tag = "2")]
    pub key: u64,
    /// Cell index.
    #[prost(uint32, tag = "3")]
    pub cell: u32,
    /// The new value.
    #[prost(bytes = "vec", tag = "4")]
    pub value: Vec<u8>,
    /// The cell's version before this write at the sender's replica (0: unknown, the
    /// receiver's own is used), so the write gets the same version on every replica.
    #[prost(uint64, tag = "5")]
    pub seen: u64,
}

/// A Paxos accept of a primary's redo at a secondary (stable leaders: ballot 0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AcceptRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Ballot.
    #[prost(uint32, tag = "2")]
    pub ballot: u32,
    /// Coordinator node.
    #[prost(uint32, tag = "3")]
    pub coordinator: u32,
    /// Participant DCs.
    #[prost(uint32, repeated, tag = "4")]
    pub participants: Vec<u32>,
    /// The changes of the partitions this secondary replicates.
    #[prost(message, repeated, tag = "5")]
    pub changes: Vec<ChangeMsg>,
    /// Whether the transaction is already decided (a catch-up): the redo is written settled.
    #[prost(bool, tag = "6")]
    pub decided: bool,
    /// Decided: commit (true) or abort.
    #[prost(bool, tag = "7")]
    pub commit: bool,
    /// Decided commit: its timestamp.
    #[prost(uint64, tag = "8")]
    pub cts: u64,
    /// A catch-up's first shipment to a voter whose DC the commit left behind: its own redo
    /// of the transaction is not to be applied.
    #[prost(bool, tag = "9")]
    pub behind: bool,
}

/// Reply to an accept.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AcceptReply {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// Whether the redo is now in the secondary's ring.
    #[prost(bool, tag = "2")]
    pub ok: bool,
}

/// A coordinator's decision, logged at a backup.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LogDecisionRequest {
    /// Transaction id.
    #[prost(uint64, tag = "1")]
    pub txn: u64,
    /// True = commit.
    #[prost(bool, tag = "2")]
    pub commit: bool,
    /// Commit timestamp.
    #[prost(uint64, tag = "3")]
    pub cts: u64,
    /// The nodes the decision must reach (primaries or replicas).
    #[prost(uint32, repeated, tag = "4")]
    pub participants: Vec<u32>,
}

/// A client's transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SubmitRequest {
    /// The call.
    #[prost(message, optional, tag = "1")]
    pub call: Option<ProcedureCall>,
    /// The id to run it under, reserved at this coordinator with [`Body::ReserveTxn`]
    /// (absent: the coordinator takes a fresh one). An id the coordinator did not reserve,
    /// already used, or whose reservation expired is refused with an error.
    #[prost(uint64, optional, tag = "2")]
    pub txn: Option<u64>,
    /// With `txn`: the reservation's token ([`TxnReservedReply::token`]); a submission without
    /// the right one is refused and the reservation stays its reserver's.
    #[prost(uint64, tag = "3")]
    pub token: u64,
}

/// Outcome of a client's transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OutcomeReply {
    /// 0 = committed, 1 = aborted (certainly not committed), 2 = unknown.
    #[prost(uint32, tag = "1")]
    pub outcome: u32,
    /// Why, when not committed.
    #[prost(string, tag = "2")]
    pub error: String,
    /// For each operation of a key/value call, the value read (empty for non-reads), without
    /// its trailing zero bytes when `read_lens` is given.
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub reads: Vec<Vec<u8>>,
    /// Transaction id.
    #[prost(uint64, tag = "4")]
    pub txn: u64,
    /// One per read: its length in bytes (a cell's width: values are zero-padded to it) before
    /// its trailing zero bytes were dropped for the wire; the receiver pads it back. 0 for a
    /// non-read. Empty: the reads are sent whole.
    #[prost(uint32, repeated, tag = "5")]
    pub read_lens: Vec<u32>,
    /// For an abort the coordinator decided: why, as a cause's label (`lock_conflict`,
    /// `timeout`, …: `redt_protocol::AbortCause::name`), so a client can tell an abort worth
    /// retrying from one that is not. Absent for a commit, an unknown outcome, a call refused
    /// before it ran, and in the replies of nodes that predate the field.
    #[prost(string, optional, tag = "6")]
    pub abort_cause: Option<String>,
}

/// Change one directed link's conditions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetemSetRequest {
    /// From DC name.
    #[prost(string, tag = "1")]
    pub from: String,
    /// To DC name.
    #[prost(string, tag = "2")]
    pub to: String,
    /// Round-trip time in µs (negative: keep).
    #[prost(int64, tag = "3")]
    pub rtt_us: i64,
    /// Jitter in µs (negative: keep).
    #[prost(int64, tag = "4")]
    pub jitter_us: i64,
    /// Loss in parts per million (negative: keep).
    #[prost(int64, tag = "5")]
    pub loss_ppm: i64,
    /// Rate in bit/s (0: unlimited; negative: keep).
    #[prost(int64, tag = "6")]
    pub rate_bits_per_s: i64,
    /// Partition (drop everything) on/off; absent: keep.
    #[prost(bool, optional, tag = "7")]
    pub partitioned: Option<bool>,
    /// Apply to both directions.
    #[prost(bool, tag = "8")]
    pub symmetric: bool,
}

/// An error answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorReply {
    /// Stable error code (`redt_coordinator::error_code`): 2 malformed, 3 internal, 4 not ready,
    /// 5 a submission under a transaction id the coordinator did not reserve (or used).
    #[prost(uint32, tag = "1")]
    pub code: u32,
    /// Human-readable text.
    #[prost(string, tag = "2")]
    pub message: String,
    /// The receiver's current placement epoch (for information).
    #[prost(uint32, tag = "3")]
    pub current_epoch: u32,
}

/// A bare acknowledgement.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AckReply {}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Every body kind survives an envelope's encoding: its tag is in the envelope's `oneof`
    /// list (a kind missing there decodes as an empty message; the membership's Raft
    /// messages once did).
    #[test]
    fn every_body_kind_round_trips_in_an_envelope() {
        let bodies = vec![
            Body::Execute(ExecuteRequest { txn: 1, epoch: 2, ..Default::default() }),
            Body::Ack(AckReply {}),
            Body::Status(StatusRequest { count_locks: true }),
            Body::NodeStatus(StatusReply {
                epoch: 3,
                removed_dcs: vec![1],
                membership_leader: 2,
                process_cpu_us: Some(1_250_000),
                process_resident_bytes: Some(64 << 20),
                ..Default::default()
            }),
            Body::Heartbeat(HeartbeatMsg { sent_at_us: 9 }),
            Body::Raft(RaftMsg { data: vec![1, 2, 3] }),
            Body::SnapshotRead(SnapshotReadRequest { partition: 1, epoch: 3, from_bucket: 7, max_bytes: 9 }),
            Body::SnapshotChunk(SnapshotChunkReply {
                records: vec![SnapshotRecordMsg {
                    table: 1,
                    key: 2,
                    cells: vec![SnapshotCellMsg { cell: 0, version: 5, value: vec![1] }],
                }],
                done: false,
                next: 4,
                deletion_horizon: 6,
            }),
            Body::Submit(SubmitRequest { call: Some(ProcedureCall::default()), txn: Some(7), token: 9 }),
            Body::ReserveTxn(ReserveTxnRequest {}),
            Body::TxnReserved(TxnReservedReply { txn: 7, start_after: 8, valid_for_ms: 9, token: 10 }),
            Body::OutcomeQuery(OutcomeQueryRequest {
                txn: 7,
                start_after: Some(3),
                valid_for_ms: 4,
                wait_ms: 5,
                token: 6,
            }),
            Body::TxnOutcome(TxnOutcomeReply { txn: 7, state: 0, cts: 9, detail: "x".into(), bound_ms: 3650 }),
            Body::TxnLookup(TxnLookupRequest { txn: 7, start_after: None }),
            Body::TxnFound(TxnFoundReply {
                findings: vec![TxnFindingMsg {
                    node: 1,
                    kind: 1,
                    commit_vote: true,
                    start: Some(4),
                    partitions: vec![2],
                    ..Default::default()
                }],
            }),
            Body::ReclaimCheck(ReclaimCheckRequest { keys: vec![ReclaimKeyMsg { table: 2, key: 5, cts: 9 }] }),
            Body::ReclaimChecked(ReclaimCheckedReply { holds: vec![true, false], floor: Some(7) }),
            Body::ReclaimChecked(ReclaimCheckedReply { holds: vec![true], floor: None }),
            Body::VersionedRead(VersionedReadRequest { table: 2, keys: vec![5, 0, u64::MAX] }),
            Body::VersionedValues(VersionedReadReply {
                items: vec![
                    VersionedItemMsg { key: 5, version: 3 << 48 | 77, value: vec![3, 1, 0, 0, 0, 9], found: true },
                    VersionedItemMsg { key: 0, version: 0, value: vec![], found: false },
                ],
            }),
        ];
        for body in bodies {
            let e = Envelope { epoch: 1, from: 2, body: Some(body.clone()) };
            let back = Envelope::decode(e.encode_to_vec().as_slice()).expect("decodes");
            assert_eq!(back.body, Some(body));
        }
    }

    /// The outcome reply as nodes sent it before `abort_cause` (tags 1–5).
    #[derive(Clone, PartialEq, prost::Message)]
    struct OutcomeReplyBeforeCause {
        #[prost(uint32, tag = "1")]
        outcome: u32,
        #[prost(string, tag = "2")]
        error: String,
        #[prost(bytes = "vec", repeated, tag = "3")]
        reads: Vec<Vec<u8>>,
        #[prost(uint64, tag = "4")]
        txn: u64,
        #[prost(uint32, repeated, tag = "5")]
        read_lens: Vec<u32>,
    }

    /// An abort's cause crosses the wire; an older node's reply, without it, reads as no
    /// cause, and an older client reads a newer reply as before (the field is skipped).
    #[test]
    fn the_abort_cause_is_optional_on_the_wire() {
        let aborted = OutcomeReply {
            outcome: 1,
            error: "dc2 voted abort: lock conflict".into(),
            txn: 9,
            abort_cause: Some("lock_conflict".into()),
            ..Default::default()
        };
        let back = OutcomeReply::decode(aborted.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(back, aborted);
        let old = OutcomeReplyBeforeCause {
            outcome: 1,
            error: "dc2 voted abort: lock conflict".into(),
            reads: vec![],
            txn: 9,
            read_lens: vec![],
        };
        let new = OutcomeReply::decode(old.encode_to_vec().as_slice()).expect("an older node's reply decodes");
        assert_eq!(new, OutcomeReply { abort_cause: None, ..aborted.clone() });
        let seen_by_old = OutcomeReplyBeforeCause::decode(aborted.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(seen_by_old, old);
        // A commit carries no cause: the field costs nothing there.
        let committed = OutcomeReply { outcome: 0, txn: 9, ..Default::default() };
        assert_eq!(committed.encode_to_vec(), OutcomeReplyBeforeCause { txn: 9, ..Default::default() }.encode_to_vec());
    }
}
