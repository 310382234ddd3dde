//! What a node is doing, for operators (`redt status`) and drills (`redt bench … --kill`):
//! its answers to clients, its recoveries (started, decided, blocked, and which DCs a blocked
//! one waits for), the gaps it filled, and the undecided entries of its ring — those past
//! their phase-1 deadline listed with their locks — and the nodes
//! and DCs its failure detector suspects (`crate::liveness`), and its process's CPU
//! time and resident memory ([`crate::process`]).
//!
//! [`StatusBoard`] holds the counters and the running recoveries; the node updates it as its
//! coordinators answer and its recoverers move, and [`NodeStatus`] is one snapshot of it plus
//! a look at the ring, in the shape the wire carries ([`redt_proto::wire::StatusReply`]). The
//! look at the ring is shared by the status requests and metrics scrapes of one second
//! ([`crate::SAMPLE_MAX_AGE`]; [`crate::Node::status`] says which figures it gives).

use redt_dc_executor::{RedoEntry, LOGICAL_BITS, ORIGIN_UNIX_MS};
use redt_proto::wire::{LinkRttMsg, RebuildMsg, StatusReply, WaitingTxnMsg};
use redt_proto::{DcId, Decision, Epoch, NodeId, Outcome, PartitionId, Topology, TxnId};
use redt_protocol::machine::{Action, AttemptId, TxnMachine};
use redt_protocol::message::Reply;
use redt_protocol::recoverer::Recoverer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most undecided transactions one status reply lists (the oldest first).
pub const MAX_WAITING_LISTED: usize = 100;

/// A node's live counters and its running recoveries (shared by its driver tasks).
#[derive(Debug)]
pub struct StatusBoard {
    started: Instant,
    committed: AtomicU64,
    aborted: AtomicU64,
    unknown: AtomicU64,
    recoveries_started: AtomicU64,
    recoveries_committed: AtomicU64,
    recoveries_aborted: AtomicU64,
    gap_slots_filled: AtomicU64,
    refused_over_limit: AtomicU64,
    refused_role: AtomicU64,
    raft_wrong_sender: AtomicU64,
    heap_full_votes: AtomicU64,
    /// Running recoveries.
    running: Mutex<HashMap<TxnId, Running>>,
    /// What the failure detector suspects now.
    suspects: Mutex<Suspects>,
}

/// The failure detector's view, as the board holds it.
#[derive(Clone, Debug, Default)]
struct Suspects {
    nodes: Vec<NodeId>,
    dcs: Vec<DcId>,
    total: u64,
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard {
            started: Instant::now(),
            committed: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            recoveries_started: AtomicU64::new(0),
            recoveries_committed: AtomicU64::new(0),
            recoveries_aborted: AtomicU64::new(0),
            gap_slots_filled: AtomicU64::new(0),
            refused_over_limit: AtomicU64::new(0),
            refused_role: AtomicU64::new(0),
            raft_wrong_sender: AtomicU64::new(0),
            heap_full_votes: AtomicU64::new(0),
            running: Mutex::new(HashMap::new()),
            suspects: Mutex::new(Suspects::default()),
        }
    }
}

/// A recovery in progress, as the board follows it.
#[derive(Clone, Debug, Default)]
struct Running {
    /// The DCs it waits for (empty while it is not blocked).
    waiting_for: Vec<DcId>,
    /// Its decision is recorded (and counted); phase 2 may still be on its way.
    decided: bool,
}

impl StatusBoard {
    /// Counts one answer to a client of this node's coordinators, by its outcome.
    pub fn answered(&self, outcome: Outcome) {
        match outcome {
            Outcome::Committed => &self.committed,
            Outcome::Aborted => &self.aborted,
            Outcome::Unknown => &self.unknown,
        }
        .fetch_add(1, Relaxed);
    }

    /// Counts one request refused for being over a limit (`redt_protocol::limits`): a client's
    /// transaction at this coordinator, a peer's request at this node's executor side, or an
    /// outcome query over its connection's cap (`crate::outcome_queries::MAX_IN_FLIGHT`).
    pub fn refused_over_limit(&self) {
        self.refused_over_limit.fetch_add(1, Relaxed);
    }

    /// Counts one request refused because the caller's certificate lacks the role it needs:
    /// `netem set`, or a status that counts locks, from a client certificate; a request only
    /// nodes send each other from a client or operator certificate.
    pub fn refused_role(&self) {
        self.refused_role.fetch_add(1, Relaxed);
    }

    /// Counts one Raft message dropped because it named another sender than the node whose
    /// certificate sent it.
    pub fn raft_wrong_sender(&self) {
        self.raft_wrong_sender.fetch_add(1, Relaxed);
    }

    /// Counts one abort vote of this node's executor side because a record heap was full.
    pub fn heap_full_vote(&self) {
        self.heap_full_votes.fetch_add(1, Relaxed);
    }

    /// Counts `slots` ring slots covered with fillers.
    pub fn filled(&self, slots: u64) {
        self.gap_slots_filled.fetch_add(slots, Relaxed);
    }

    /// The failure detector now suspects `nodes` and `dcs` (each ascending) and has raised
    /// `total` suspicions since the node started.
    pub fn suspects(&self, nodes: Vec<NodeId>, dcs: Vec<DcId>, total: u64) {
        *self.suspects.lock().unwrap_or_else(|p| p.into_inner()) = Suspects { nodes, dcs, total };
    }

    /// The DCs the failure detector suspects now (every node of the DC), ascending.
    pub fn suspected_dcs(&self) -> Vec<DcId> {
        self.suspects.lock().unwrap_or_else(|p| p.into_inner()).dcs.clone()
    }

    /// The nodes this node's failure detector suspects now, ascending.
    pub fn suspected_nodes(&self) -> Vec<NodeId> {
        self.suspects.lock().unwrap_or_else(|p| p.into_inner()).nodes.clone()
    }

    /// A recovery of `txn` starts.
    fn recovery_starts(&self, txn: TxnId) {
        self.recoveries_started.fetch_add(1, Relaxed);
        self.lock_running().insert(txn, Running::default());
    }

    /// The recovery of `txn` now waits for `dcs` (empty: not blocked) and has recorded
    /// `recorded` (counted once).
    fn recovery_moves(&self, txn: TxnId, dcs: &[DcId], recorded: Option<Decision>) {
        let mut running = self.lock_running();
        let Some(r) = running.get_mut(&txn) else { return };
        if r.waiting_for.as_slice() != dcs {
            r.waiting_for = dcs.to_vec();
        }
        if let (false, Some(decision)) = (r.decided, recorded) {
            r.decided = true;
            match decision {
                Decision::Commit(_) => self.recoveries_committed.fetch_add(1, Relaxed),
                Decision::Abort => self.recoveries_aborted.fetch_add(1, Relaxed),
            };
        }
    }

    /// The recovery of `txn` ends (decided, or stopped undecided at shutdown).
    fn recovery_ends(&self, txn: TxnId, recorded: Option<Decision>) {
        self.recovery_moves(txn, &[], recorded);
        self.lock_running().remove(&txn);
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<TxnId, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A snapshot of the board with the undecided `entries` of the node's ring (each with
    /// its ring index), read at `now_ms` (ms since `ORIGIN_UNIX_MS`); entries older than
    /// `phase1_timeout_ms` are listed as waiting on recovery. `catch_ups_owed` (entries whose
    /// catch-up mask is set) and `locks_held` are passed through.
    pub fn snapshot(
        &self,
        node: NodeId,
        entries: &[(u64, RedoEntry)],
        now_ms: u64,
        phase1_timeout_ms: u64,
        catch_ups_owed: u64,
        locks_held: Option<u64>,
    ) -> NodeStatus {
        let running = self.lock_running().clone();
        let start_ms = |e: &RedoEntry| e.start.0 >> LOGICAL_BITS;
        let mut waiting: Vec<WaitingTxn> = entries
            .iter()
            .map(|(_, e)| e)
            .filter(|e| now_ms.saturating_sub(start_ms(e)) >= phase1_timeout_ms)
            .map(|e| WaitingTxn {
                txn: e.txn,
                coordinator: e.coordinator,
                age_ms: now_ms.saturating_sub(start_ms(e)),
                partitions: e.partitions.clone(),
                locks: e.locks.len() as u64,
                recovering: running.contains_key(&e.txn),
                waiting_for: running.get(&e.txn).map(|r| r.waiting_for.clone()).unwrap_or_default(),
            })
            .collect();
        waiting.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.txn.0.cmp(&b.txn.0)));
        waiting.dedup_by_key(|w| w.txn);
        waiting.truncate(MAX_WAITING_LISTED);
        let oldest = entries.iter().map(|(_, e)| start_ms(e)).min();
        let suspects = self.suspects.lock().unwrap_or_else(|p| p.into_inner()).clone();
        NodeStatus {
            node,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            committed: self.committed.load(Relaxed),
            aborted: self.aborted.load(Relaxed),
            unknown: self.unknown.load(Relaxed),
            recoveries_started: self.recoveries_started.load(Relaxed),
            recoveries_committed: self.recoveries_committed.load(Relaxed),
            recoveries_aborted: self.recoveries_aborted.load(Relaxed),
            recoveries_blocked: running.values().filter(|r| !r.waiting_for.is_empty()).count() as u64,
            recoveries_running: running.len() as u64,
            gap_slots_filled: self.gap_slots_filled.load(Relaxed),
            undecided_entries: entries.len() as u64,
            oldest_undecided_unix_ms: oldest.map_or(0, |ms| ms + ORIGIN_UNIX_MS),
            catch_ups_owed,
            waiting,
            locks_held,
            suspected_nodes: suspects.nodes,
            suspected_dcs: suspects.dcs,
            suspicions_total: suspects.total,
            replay_backlog_slots: 0,
            record_heap: None,
            executor: Default::default(),
            epoch: Epoch(0),
            membership_leader: None,
            removed_dcs: Vec::new(),
            rebuilds: Vec::new(),
            under_replicated: 0,
            refused_over_limit: self.refused_over_limit.load(Relaxed),
            refused_role: self.refused_role.load(Relaxed),
            raft_wrong_sender: self.raft_wrong_sender.load(Relaxed),
            heap_full_votes: self.heap_full_votes.load(Relaxed),
            replay_invalid_entries: 0,
            pending_votes_forgotten: 0,
            accepted_redo_forgotten: 0,
            deleted_records_freed: 0,
            deleted_records_waiting: 0,
            background_retries_waiting: 0,
            background_retries_waited: 0,
            transport_limits: TransportLimitCounts::default(),
            link_rtts: Vec::new(),
            process_cpu_us: None,
            process_resident_bytes: None,
            ring_read_unix_ms: None,
        }
    }
}

/// An undecided transaction past its phase-1 deadline, as one node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingTxn {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// Ms since its start (the coordinator's clock at start, this node's now).
    pub age_ms: u64,
    /// The partitions it touches.
    pub partitions: Vec<PartitionId>,
    /// Records its entry locks on this node.
    pub locks: u64,
    /// Whether a recoverer on this node is working on it.
    pub recovering: bool,
    /// The DCs that recoverer waits for (empty unless it is blocked).
    pub waiting_for: Vec<DcId>,
}

/// One node's status (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node.
    pub node: NodeId,
    /// Ms since the node started.
    pub uptime_ms: u64,
    /// Client answers of its coordinators since it started: committed.
    pub committed: u64,
    /// … aborted.
    pub aborted: u64,
    /// … unknown.
    pub unknown: u64,
    /// Recoveries it started.
    pub recoveries_started: u64,
    /// … that decided commit.
    pub recoveries_committed: u64,
    /// … that decided abort.
    pub recoveries_aborted: u64,
    /// Recoveries running now that cannot decide.
    pub recoveries_blocked: u64,
    /// Recoveries running now (deciding, blocked, or delivering a recorded decision).
    pub recoveries_running: u64,
    /// Ring slots it covered with fillers for dead writers.
    pub gap_slots_filled: u64,
    /// Undecided phase-1 entries in its ring.
    pub undecided_entries: u64,
    /// Start of the oldest of them, ms since the Unix epoch (0: none).
    pub oldest_undecided_unix_ms: u64,
    /// Entries of its ring still owing a catch-up.
    pub catch_ups_owed: u64,
    /// Those past their phase-1 deadline, oldest first (at most [`MAX_WAITING_LISTED`]).
    pub waiting: Vec<WaitingTxn>,
    /// Records whose lock word is held, when counted.
    pub locks_held: Option<u64>,
    /// The nodes its failure detector suspects now (no heartbeat for their timeout),
    /// ascending.
    pub suspected_nodes: Vec<NodeId>,
    /// The DCs it suspects now (every node of the DC suspected), ascending.
    pub suspected_dcs: Vec<DcId>,
    /// Suspicions of a node it raised since it started.
    pub suspicions_total: u64,
    /// Ring slots between the head and the tail: written or reserved, not yet released by
    /// replay (0 when idle; a gap at the head or an undecided entry holds it up).
    pub replay_backlog_slots: u64,
    /// The record heap: its size, the bytes in use, the bytes of retired records on its free
    /// lists. `None` from a node that does not report it.
    pub record_heap: Option<redt_dc_executor::RecordHeapUsage>,
    /// What its executor thread did since it started: jobs per lane, busy time, the longest
    /// job and the longest wait of a short job (`redt_protocol::executor_queue`). Zero from a node
    /// that does not report it.
    pub executor: crate::ExecutorLoadSample,
    /// The placement epoch the node is at.
    pub epoch: Epoch,
    /// The membership group's leader as the node knows it.
    pub membership_leader: Option<NodeId>,
    /// The DCs the node's current placement has removed, ascending.
    pub removed_dcs: Vec<DcId>,
    /// Its rebuilds, by partition.
    pub rebuilds: Vec<(PartitionId, redt_protocol::rebuild::RebuildState)>,
    /// Partitions its current placement holds below the replication factor (fewer voters
    /// than the topology file gives them, or a learner not yet promoted): 0 once every
    /// rebuild is done.
    pub under_replicated: u32,
    /// Requests it refused for being over a limit since it started (`redt_protocol::limits`, and
    /// outcome queries over `crate::outcome_queries::MAX_IN_FLIGHT`).
    pub refused_over_limit: u64,
    /// Requests it refused because the caller's certificate lacked the role they need, since
    /// it started: admin requests without the operator role, requests only nodes send each
    /// other without a node's.
    pub refused_role: u64,
    /// Raft messages it dropped because they named another sender than the node whose
    /// certificate sent them, since it started.
    pub raft_wrong_sender: u64,
    /// Abort votes its executor side gave because a record heap was full, since it started.
    pub heap_full_votes: u64,
    /// Committed redo entries its replay could not apply (an impossible record offset) and
    /// passed over, since it started.
    pub replay_invalid_entries: u64,
    /// Commit votes its executor side forgot over `limits.max_pending_votes` since it started
    /// (`ExecutorCore::forgotten`).
    pub pending_votes_forgotten: u64,
    /// Accepted replica redo its executor side forgot over `limits.max_accepted_redo` since it
    /// started.
    pub accepted_redo_forgotten: u64,
    /// Records committed deletes emptied that its executor freed once their grace passed, since
    /// it started (`ExecutorCore::deleted_records`).
    pub deleted_records_freed: u64,
    /// Such records waiting for their grace now.
    pub deleted_records_waiting: u64,
    /// Background retries (catch-ups, recoverers) waiting now for a slot under
    /// `limits.max_background_retries`.
    pub background_retries_waiting: u64,
    /// Background retries that had to wait for a slot, since it started.
    pub background_retries_waited: u64,
    /// Its QUIC transport's refusals and cancellations over the `transport:` limits, since
    /// it started.
    pub transport_limits: TransportLimitCounts,
    /// The round-trip time its QUIC connections measure to each other DC (the smallest over
    /// that DC's nodes it is connected to), ascending by DC; a DC it has no connection to is
    /// absent.
    pub link_rtts: Vec<(DcId, Duration)>,
    /// CPU time of its process since it started, in µs: user plus system time of all its
    /// threads ([`crate::process::cpu_time`]; in an embedded cluster, of every node sharing
    /// the process). `None` from a node that does not report it.
    pub process_cpu_us: Option<u64>,
    /// Resident memory of its process, in bytes (`None`: unknown, or not reported).
    pub process_resident_bytes: Option<u64>,
    /// When the figures only its executor thread reads (the undecided entries, those waiting
    /// and their ages, the catch-ups owed, the replay backlog, the forgotten votes and redo)
    /// were read, ms since the Unix epoch by its clock: they come from a sample shared for up
    /// to [`crate::SAMPLE_MAX_AGE`] (1 s; [`crate::Node::status`]). `None` from a node that
    /// does not report it.
    pub ring_read_unix_ms: Option<u64>,
}

/// Per DC, the smallest round-trip time `rtts` (by node, as
/// [`redt_transport::Transport::peer_rtts`] gives them) holds for a node of that DC other
/// than `me`, ascending by DC; DCs with no such node measured are left out.
pub fn link_rtts(topology: &Topology, me: NodeId, rtts: &[(NodeId, Duration)]) -> Vec<(DcId, Duration)> {
    topology
        .dcs
        .iter()
        .filter_map(|dc| {
            let best = rtts.iter().filter(|(n, _)| *n != me && dc.nodes.contains(n)).map(|(_, rtt)| *rtt).min()?;
            Some((dc.id, best))
        })
        .collect()
}

/// A node's QUIC transport's refusals and cancellations over the topology's `transport:`
/// limits, counts since the node started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportLimitCounts {
    /// Incoming connections refused over `transport.max_connections`.
    pub refused_total: u64,
    /// Incoming connections refused over `transport.max_connections_per_peer`.
    pub refused_per_peer: u64,
    /// Handlers cancelled past `transport.handler_timeout`.
    pub handler_timeouts: u64,
    /// Response streams reset past `transport.write_timeout`.
    pub write_timeouts: u64,
    /// Outgoing calls with no slot within `transport.call_slot_timeout`.
    pub call_slot_timeouts: u64,
}

impl TransportLimitCounts {
    /// The counts from a transport's counters.
    pub fn from_counters(c: &redt_transport::CountersSnapshot) -> TransportLimitCounts {
        TransportLimitCounts {
            refused_total: c.refused_connections_total,
            refused_per_peer: c.refused_connections_per_peer,
            handler_timeouts: c.handler_timeouts,
            write_timeouts: c.write_timeouts,
            call_slot_timeouts: c.call_slot_timeouts,
        }
    }

    /// All of them together.
    pub fn sum(&self) -> u64 {
        [self.refused_total, self.refused_per_peer, self.handler_timeouts, self.write_timeouts, self.call_slot_timeouts]
            .iter()
            .fold(0u64, |a, b| a.saturating_add(*b))
    }
}

impl NodeStatus {
    /// The wire form.
    pub fn to_wire(&self) -> StatusReply {
        StatusReply {
            node: u32::from(self.node.0),
            uptime_ms: self.uptime_ms,
            committed: self.committed,
            aborted: self.aborted,
            unknown: self.unknown,
            recoveries_started: self.recoveries_started,
            recoveries_committed: self.recoveries_committed,
            recoveries_aborted: self.recoveries_aborted,
            recoveries_blocked: self.recoveries_blocked,
            recoveries_running: self.recoveries_running,
            gap_slots_filled: self.gap_slots_filled,
            undecided_entries: self.undecided_entries,
            oldest_undecided_unix_ms: self.oldest_undecided_unix_ms,
            catch_ups_owed: self.catch_ups_owed,
            waiting: self
                .waiting
                .iter()
                .map(|w| WaitingTxnMsg {
                    txn: w.txn.0,
                    coordinator: u32::from(w.coordinator.0),
                    age_ms: w.age_ms,
                    partitions: w.partitions.iter().map(|p| p.0).collect(),
                    locks: w.locks,
                    recovering: w.recovering,
                    waiting_for: w.waiting_for.iter().map(|d| u32::from(d.0)).collect(),
                })
                .collect(),
            locks_held: self.locks_held,
            suspected_nodes: self.suspected_nodes.iter().map(|n| u32::from(n.0)).collect(),
            suspected_dcs: self.suspected_dcs.iter().map(|d| u32::from(d.0)).collect(),
            suspicions_total: self.suspicions_total,
            replay_backlog_slots: self.replay_backlog_slots,
            record_heap_bytes: self.record_heap.map(|h| h.size_bytes),
            record_heap_used_bytes: self.record_heap.map(|h| h.used_bytes),
            record_heap_free_bytes: self.record_heap.map(|h| h.free_bytes),
            executor_short_jobs: self.executor.short_jobs,
            executor_bulk_jobs: self.executor.bulk_jobs,
            executor_busy_us: self.executor.busy_us,
            executor_longest_job_us: self.executor.longest_job_us,
            executor_longest_short_wait_us: self.executor.longest_short_wait_us,
            epoch: self.epoch.0,
            membership_leader: self.membership_leader.map_or(0, |n| u32::from(n.0) + 1),
            removed_dcs: self.removed_dcs.iter().map(|d| u32::from(d.0)).collect(),
            rebuilds: self
                .rebuilds
                .iter()
                .map(|(p, s)| RebuildMsg {
                    partition: p.0,
                    added_in: s.added_in.0,
                    records: s.progress.records,
                    bytes: s.progress.bytes,
                    sources_done: s.progress.sources_done as u32,
                    sources: s.progress.sources as u32,
                    purged: s.progress.purged,
                    filled: s.filled,
                    last_error: s.last_error.clone().unwrap_or_default(),
                })
                .collect(),
            under_replicated: self.under_replicated,
            refused_over_limit: self.refused_over_limit,
            refused_role: self.refused_role,
            raft_wrong_sender: self.raft_wrong_sender,
            heap_full_votes: self.heap_full_votes,
            replay_invalid_entries: self.replay_invalid_entries,
            pending_votes_forgotten: self.pending_votes_forgotten,
            accepted_redo_forgotten: self.accepted_redo_forgotten,
            deleted_records_freed: self.deleted_records_freed,
            deleted_records_waiting: self.deleted_records_waiting,
            background_retries_waiting: self.background_retries_waiting,
            background_retries_waited: self.background_retries_waited,
            quic_refused_total: self.transport_limits.refused_total,
            quic_refused_per_peer: self.transport_limits.refused_per_peer,
            quic_handler_timeouts: self.transport_limits.handler_timeouts,
            quic_write_timeouts: self.transport_limits.write_timeouts,
            quic_call_slot_timeouts: self.transport_limits.call_slot_timeouts,
            link_rtts: self
                .link_rtts
                .iter()
                .map(|(d, rtt)| LinkRttMsg {
                    dc: u32::from(d.0),
                    rtt_us: u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX),
                })
                .collect(),
            process_cpu_us: self.process_cpu_us,
            process_resident_bytes: self.process_resident_bytes,
            ring_read_unix_ms: self.ring_read_unix_ms,
        }
    }

    /// Decodes a reply, checking every id fits its type.
    ///
    /// # Errors
    /// A node, coordinator or DC id out of range (a suspected one included), or more than
    /// [`MAX_WAITING_LISTED`] waiting transactions, as text.
    pub fn from_wire(r: &StatusReply) -> std::result::Result<NodeStatus, String> {
        let node_id =
            |v: u32, what: &str| u16::try_from(v).map(NodeId).map_err(|_| format!("{what} id {v} out of range"));
        let dc_id = |v: u32| u16::try_from(v).map(DcId).map_err(|_| format!("DC id {v} out of range"));
        if r.waiting.len() > MAX_WAITING_LISTED {
            return Err(format!("{} waiting transactions listed, at most {MAX_WAITING_LISTED}", r.waiting.len()));
        }
        let waiting = r
            .waiting
            .iter()
            .map(|w| {
                Ok(WaitingTxn {
                    txn: TxnId(w.txn),
                    coordinator: node_id(w.coordinator, "coordinator")?,
                    age_ms: w.age_ms,
                    partitions: w.partitions.iter().map(|&p| PartitionId(p)).collect(),
                    locks: w.locks,
                    recovering: w.recovering,
                    waiting_for: w.waiting_for.iter().map(|&d| dc_id(d)).collect::<Result<_, _>>()?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(NodeStatus {
            node: node_id(r.node, "node")?,
            uptime_ms: r.uptime_ms,
            committed: r.committed,
            aborted: r.aborted,
            unknown: r.unknown,
            recoveries_started: r.recoveries_started,
            recoveries_committed: r.recoveries_committed,
            recoveries_aborted: r.recoveries_aborted,
            recoveries_blocked: r.recoveries_blocked,
            recoveries_running: r.recoveries_running,
            gap_slots_filled: r.gap_slots_filled,
            undecided_entries: r.undecided_entries,
            oldest_undecided_unix_ms: r.oldest_undecided_unix_ms,
            catch_ups_owed: r.catch_ups_owed,
            waiting,
            locks_held: r.locks_held,
            suspected_nodes: r
                .suspected_nodes
                .iter()
                .map(|&n| node_id(n, "suspected node"))
                .collect::<Result<_, _>>()?,
            suspected_dcs: r.suspected_dcs.iter().map(|&d| dc_id(d)).collect::<Result<_, _>>()?,
            suspicions_total: r.suspicions_total,
            replay_backlog_slots: r.replay_backlog_slots,
            record_heap: match (r.record_heap_bytes, r.record_heap_used_bytes, r.record_heap_free_bytes) {
                (Some(size_bytes), Some(used_bytes), Some(free_bytes)) => {
                    Some(redt_dc_executor::RecordHeapUsage { size_bytes, used_bytes, free_bytes })
                }
                _ => None,
            },
            executor: crate::ExecutorLoadSample {
                short_jobs: r.executor_short_jobs,
                bulk_jobs: r.executor_bulk_jobs,
                busy_us: r.executor_busy_us,
                longest_job_us: r.executor_longest_job_us,
                longest_short_wait_us: r.executor_longest_short_wait_us,
            },
            epoch: Epoch(r.epoch),
            membership_leader: match r.membership_leader {
                0 => None,
                n => Some(node_id(n - 1, "membership leader")?),
            },
            removed_dcs: r.removed_dcs.iter().map(|&d| dc_id(d)).collect::<Result<_, _>>()?,
            rebuilds: r
                .rebuilds
                .iter()
                .map(|m| {
                    let progress = redt_protocol::rebuild::RebuildProgress {
                        records: m.records,
                        bytes: m.bytes,
                        sources_done: m.sources_done as usize,
                        sources: m.sources as usize,
                        purged: m.purged,
                    };
                    let last_error = (!m.last_error.is_empty()).then(|| m.last_error.clone());
                    let state = redt_protocol::rebuild::RebuildState {
                        added_in: Epoch(m.added_in),
                        progress,
                        filled: m.filled,
                        last_error,
                    };
                    (PartitionId(m.partition), state)
                })
                .collect(),
            under_replicated: r.under_replicated,
            refused_over_limit: r.refused_over_limit,
            refused_role: r.refused_role,
            raft_wrong_sender: r.raft_wrong_sender,
            heap_full_votes: r.heap_full_votes,
            replay_invalid_entries: r.replay_invalid_entries,
            pending_votes_forgotten: r.pending_votes_forgotten,
            accepted_redo_forgotten: r.accepted_redo_forgotten,
            deleted_records_freed: r.deleted_records_freed,
            deleted_records_waiting: r.deleted_records_waiting,
            background_retries_waiting: r.background_retries_waiting,
            background_retries_waited: r.background_retries_waited,
            transport_limits: TransportLimitCounts {
                refused_total: r.quic_refused_total,
                refused_per_peer: r.quic_refused_per_peer,
                handler_timeouts: r.quic_handler_timeouts,
                write_timeouts: r.quic_write_timeouts,
                call_slot_timeouts: r.quic_call_slot_timeouts,
            },
            link_rtts: r
                .link_rtts
                .iter()
                .map(|l| Ok((dc_id(l.dc)?, Duration::from_micros(l.rtt_us))))
                .collect::<Result<_, String>>()?,
            process_cpu_us: r.process_cpu_us,
            process_resident_bytes: r.process_resident_bytes,
            ring_read_unix_ms: r.ring_read_unix_ms,
        })
    }
}

/// A [`Recoverer`] whose progress the node's [`StatusBoard`] follows: it registers when
/// created, publishes after every input the DCs it waits for and its decision once recorded
/// (counted then, though phase 2 may still wait for a dead DC), and leaves the board when
/// dropped (done, or stopped at shutdown).
pub(crate) struct Watched {
    inner: Recoverer,
    board: Arc<StatusBoard>,
}

impl Watched {
    /// Watches `inner` on `board`.
    pub(crate) fn new(inner: Recoverer, board: Arc<StatusBoard>) -> Self {
        board.recovery_starts(inner.orphan().txn);
        Watched { inner, board }
    }

    /// The recoverer.
    pub(crate) fn recoverer(&self) -> &Recoverer {
        &self.inner
    }

    fn publish(&self) {
        self.board.recovery_moves(self.inner.orphan().txn, self.inner.blocked_on(), self.inner.recorded_decision());
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.board.recovery_ends(self.inner.orphan().txn, self.inner.recorded_decision());
    }
}

impl TxnMachine for Watched {
    fn txn(&self) -> TxnId {
        self.inner.txn()
    }

    fn is_done(&self) -> bool {
        self.inner.is_done()
    }

    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        self.inner.handle_reply(attempt, reply, now);
        self.publish();
    }

    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        self.inner.handle_failure(attempt, error, now);
        self.publish();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
        self.publish();
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.inner.poll_action()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_dc_executor::{EntryStatus, LockIntent};
    use redt_proto::{Cts, Offset, TableId};

    fn entry(txn: u64, start_ms: u64, locks: usize) -> RedoEntry {
        let mut e = RedoEntry::filler();
        e.txn = TxnId::new(NodeId(1), txn);
        e.status = EntryStatus::Logged;
        e.coordinator = NodeId(1);
        e.start = Cts(start_ms << LOGICAL_BITS);
        e.partitions = vec![PartitionId(2)];
        e.locks = (0..locks)
            .map(|k| LockIntent {
                record: Offset(4096),
                table: TableId(1),
                key: k as u64,
                lock_bits: 1,
                cells: 1,
                versions: vec![0],
            })
            .collect();
        e
    }

    #[test]
    fn a_snapshot_counts_and_lists_the_entries_past_their_deadline_oldest_first() {
        let board = StatusBoard::default();
        board.answered(Outcome::Committed);
        board.answered(Outcome::Committed);
        board.answered(Outcome::Unknown);
        board.filled(3);
        let entries = vec![(10, entry(1, 9_000, 2)), (11, entry(2, 5_000, 1)), (12, entry(3, 9_900, 4))];
        let s = board.snapshot(NodeId(0), &entries, 10_000, 500, 2, Some(7));
        assert_eq!((s.committed, s.aborted, s.unknown, s.gap_slots_filled), (2, 0, 1, 3));
        assert_eq!(s.undecided_entries, 3);
        assert_eq!(s.oldest_undecided_unix_ms, 5_000 + ORIGIN_UNIX_MS);
        let listed: Vec<(u64, u64, u64)> =
            s.waiting.iter().map(|w| (w.txn.0 & 0xffff_ffff_ffff, w.age_ms, w.locks)).collect();
        assert_eq!(listed, vec![(2, 5_000, 1), (1, 1_000, 2)], "txn 3 is 100 ms old: not waiting yet");
        assert_eq!((s.catch_ups_owed, s.locks_held), (2, Some(7)));
        assert_eq!((s.suspected_nodes.len(), s.suspected_dcs.len(), s.suspicions_total), (0, 0, 0));
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s));
        board.suspects(vec![NodeId(2), NodeId(3)], vec![DcId(1)], 5);
        let s = board.snapshot(NodeId(0), &entries, 10_000, 500, 2, Some(7));
        assert_eq!(s.suspected_nodes, vec![NodeId(2), NodeId(3)]);
        assert_eq!(s.suspected_dcs, vec![DcId(1)]);
        assert_eq!(s.suspicions_total, 5);
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s.clone()));
        let s = NodeStatus { replay_backlog_slots: 35, ..s };
        assert_eq!(NodeStatus::from_wire(&s.to_wire()).map(|d| d.replay_backlog_slots), Ok(35));
        let s = NodeStatus {
            pending_votes_forgotten: 4,
            accepted_redo_forgotten: 9,
            deleted_records_freed: 12,
            deleted_records_waiting: 3,
            background_retries_waiting: 2,
            background_retries_waited: 11,
            link_rtts: vec![(DcId(1), Duration::from_micros(40_123)), (DcId(3), Duration::from_micros(95_000))],
            ..s
        };
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s.clone()));
        let mut w = s.to_wire();
        w.link_rtts[0].dc = 70_001;
        assert!(NodeStatus::from_wire(&w).unwrap_err().contains("70001"));
        // The process's figures travel as given, and a node that does not send them (an
        // older one) decodes as not reporting them.
        assert_eq!((s.process_cpu_us, s.process_resident_bytes), (None, None), "the board does not read them");
        let s = NodeStatus { process_cpu_us: Some(2_500_001), process_resident_bytes: Some(300 << 20), ..s };
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s.clone()));
        let mut w = s.to_wire();
        (w.process_cpu_us, w.process_resident_bytes) = (None, None);
        let old = NodeStatus::from_wire(&w).unwrap();
        assert_eq!((old.process_cpu_us, old.process_resident_bytes), (None, None));
        // So does the time its ring figures were read.
        let s = NodeStatus { ring_read_unix_ms: Some(1_700_000_000_123), ..s };
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s.clone()));
        let mut w = s.to_wire();
        w.ring_read_unix_ms = None;
        assert_eq!(NodeStatus::from_wire(&w).map(|d| d.ring_read_unix_ms), Ok(None));
        // And the executor thread's load.
        let executor = crate::ExecutorLoadSample {
            short_jobs: 10,
            bulk_jobs: 2,
            busy_us: 12_345,
            longest_job_us: 4_000,
            longest_short_wait_us: 3_999,
        };
        let s = NodeStatus { executor, ..s };
        assert_eq!(NodeStatus::from_wire(&s.to_wire()), Ok(s.clone()));
    }

    #[test]
    fn link_rtts_are_the_smallest_per_dc_leaving_out_the_node_itself() {
        let topo = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("valid");
        let ms = |v: u64| Duration::from_millis(v);
        // dc1 = nodes 0,1; dc2 = nodes 2,3; dc3 = nodes 4,5.
        let rtts =
            [(NodeId(0), ms(1)), (NodeId(1), ms(2)), (NodeId(2), ms(41)), (NodeId(3), ms(40)), (NodeId(5), ms(80))];
        assert_eq!(link_rtts(&topo, NodeId(0), &rtts), vec![(DcId(0), ms(2)), (DcId(1), ms(40)), (DcId(2), ms(80))]);
        assert_eq!(link_rtts(&topo, NodeId(0), &[]), vec![]);
    }

    /// A recovery counts once, when its decision is recorded, though phase 2 may still wait
    /// for a dead DC; blocked while it waits for DCs; gone from the board when it ends.
    #[test]
    fn a_recovery_counts_once_when_recorded_and_is_blocked_while_it_waits() {
        let board = StatusBoard::default();
        let txn = TxnId::new(NodeId(1), 9);
        board.recovery_starts(txn);
        board.recovery_moves(txn, &[DcId(2)], None);
        let entries = vec![(0, entry(9, 0, 3))];
        let s = board.snapshot(NodeId(0), &entries, 10_000, 500, 0, None);
        assert_eq!((s.recoveries_started, s.recoveries_blocked, s.recoveries_running), (1, 1, 1));
        assert!(s.waiting[0].recovering);
        assert_eq!(s.waiting[0].waiting_for, vec![DcId(2)]);
        board.recovery_moves(txn, &[], Some(Decision::Commit(Cts(1))));
        board.recovery_moves(txn, &[], Some(Decision::Commit(Cts(1))));
        let s = board.snapshot(NodeId(0), &[], 10_000, 500, 0, None);
        assert_eq!((s.recoveries_committed, s.recoveries_blocked, s.recoveries_running), (1, 0, 1));
        board.recovery_ends(txn, Some(Decision::Commit(Cts(1))));
        let s = board.snapshot(NodeId(0), &[], 10_000, 500, 0, None);
        assert_eq!((s.recoveries_committed, s.recoveries_aborted, s.recoveries_running), (1, 0, 0));
    }

    #[test]
    fn a_decoded_reply_refuses_ids_out_of_range() {
        let s = StatusBoard::default().snapshot(NodeId(0), &[(0, entry(1, 0, 1))], 10_000, 0, 0, None);
        let mut w = s.to_wire();
        w.waiting[0].waiting_for = vec![70_000];
        assert!(NodeStatus::from_wire(&w).unwrap_err().contains("70000"));
        let mut w = s.to_wire();
        w.node = 1 << 20;
        assert!(NodeStatus::from_wire(&w).is_err());
        let mut w = s.to_wire();
        w.suspected_nodes = vec![1, 65_536];
        assert!(NodeStatus::from_wire(&w).unwrap_err().contains("suspected node id 65536"));
        let mut w = s.to_wire();
        w.suspected_dcs = vec![u32::MAX];
        assert!(NodeStatus::from_wire(&w).unwrap_err().contains(&u32::MAX.to_string()));
    }
}
