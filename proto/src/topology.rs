//! The resolved, validated topology: what every other crate reads.
//!
//! It is built from a YAML file by [`crate::Topology::load`] / [`crate::Topology::from_yaml`]
//! (see `config.rs`), which checks every rule before a `Topology` exists, so code holding one
//! may index `nodes`, `dcs` and `partitions` by their ids without further checks.

use crate::address::HostPort;
use crate::error::LinkError;
use crate::ids::{DcId, Epoch, NodeId, PartitionId, TableId};
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// A whole deployment: DCs, nodes, the MemStore layout, tables, partitions and links.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Human-readable name of the deployment.
    pub name: String,
    /// Placement epoch (≥ 1).
    pub epoch: Epoch,
    /// Data centers, indexed by `DcId`.
    pub dcs: Vec<Dc>,
    /// Nodes, indexed by `NodeId`.
    pub nodes: Vec<NodeEntry>,
    /// MemStore layout, identical on every node.
    pub memstore: MemStoreConfig,
    /// Tables, in declaration order (look up by id with [`Topology::table`]).
    pub tables: Vec<TableSchema>,
    /// Partitions, indexed by `PartitionId`; shared by every table.
    pub partitions: Vec<Partition>,
    /// One-way link conditions, `links[from][to]` by `DcId` (the diagonal is unused).
    pub links: Vec<Vec<LinkConditions>>,
    /// The timeouts the file sets (its optional `timeouts:` section); every one it leaves out
    /// is `None` and takes its topology-derived default where a node resolves them
    /// (`redt_coordinator::NodeTimeouts`).
    pub timeouts: TimeoutsConfig,
    /// The limits of the in-DC verbs servers the file sets (its optional `verbs:` section);
    /// every one it leaves out is `None` and takes its default where a server starts
    /// (`redt_dc_executor::ServerLimits::from_config`).
    pub verbs: VerbsConfig,
    /// The limits on what one client request may ask for (its optional `limits:` section;
    /// [`LimitsConfig::default`] where it leaves a key out).
    pub limits: LimitsConfig,
    /// The caps and deadlines of every node's QUIC transport (its optional `transport:`
    /// section; [`QuicConfig::default`] where it leaves a key out).
    pub transport: QuicConfig,
    /// Where the nodes serve their Prometheus metrics and what their endpoints tolerate (its
    /// optional `metrics:` section; [`MetricsConfig::default`], no port and the default
    /// limits, where it leaves a key out). A node's own `metrics` address
    /// ([`NodeEntry::metrics`]) overrides the port.
    pub metrics: MetricsConfig,
    /// Where the nodes serve the gRPC client API (its optional `grpc:` section; no port
    /// where it leaves it out). A node's own `grpc` address ([`NodeEntry::grpc`]) overrides
    /// the port. The endpoint's caps are the `transport:` section's.
    pub grpc: GrpcConfig,
    /// Whether a committed transaction survives a power loss (its optional `durability:`
    /// key; [`Durability::Memory`] when it is left out).
    pub durability: Durability,
}

/// The `durability:` key of a topology file (`docs/durability.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Every MemStore lives in memory only (`/dev/shm` or the heap): a node survives the
    /// crash of its process, not the loss of its host's memory.
    #[default]
    Memory,
    /// Every MemStore also has a disk image, synced before each vote, recorded decision and
    /// recovery promise and before replay frees ring slots (RedT §5's non-NVM mode: "logs
    /// are persisted in the disk before committing"); a node that lost its memory restores
    /// from the image.
    Disk,
}

impl std::str::FromStr for Durability {
    type Err = String;

    /// `memory` or `disk`.
    fn from_str(s: &str) -> Result<Durability, String> {
        match s {
            "memory" => Ok(Durability::Memory),
            "disk" => Ok(Durability::Disk),
            other => Err(format!("`{other}` is no durability: expected `memory` or `disk`")),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::Memory => "memory",
            Durability::Disk => "disk",
        })
    }
}

/// The `grpc:` section of a topology file: the TCP port on which every node serves the gRPC
/// client API (`redt.v1`; `redt-grpc`), at its own `listen` IP address unless the node gives
/// its own `grpc` address. Its connections and calls have the caps and deadlines of the
/// `transport:` section. The file checks that no two nodes of one host would bind the same
/// gRPC address and that none is a node's QUIC port or metrics address on that host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrpcConfig {
    /// `port`: the TCP port (1 to 65535); `None` when the file gives none (no node serves
    /// gRPC by the file then, but for those with their own `grpc` address).
    pub port: Option<u16>,
}

/// The `metrics:` section of a topology file: the TCP port on which every node serves its
/// Prometheus metrics (`GET /metrics`), at its own `listen` IP address unless the node gives
/// its own `metrics` address, and the limits of every node's metrics endpoint (wherever it
/// listens: `redt node --metrics-addr` and `redt cluster up` too). Every key is optional; a
/// limit left out keeps its default (the `DEFAULT_*` constants). The file checks that no two
/// nodes of one host would bind the same metrics address and that none is a node's QUIC
/// port on that host; counts are 1 to [`MetricsConfig::MAX_CONNECTIONS_CEILING`], the
/// timeouts above zero and at most [`TimeoutsConfig::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `port`: the TCP port (1 to 65535); `None` when the file gives none (no node serves
    /// metrics by the file then, but for those with their own `metrics` address).
    pub port: Option<u16>,
    /// `max_connections`: connections one endpoint holds at once, all clients together; one
    /// more is closed as soon as it is accepted.
    pub max_connections: u64,
    /// `max_connections_per_peer`: connections one endpoint holds at once from one client IP
    /// address; one more is answered 503 and closed as soon as it is accepted, so one client
    /// cannot take the slots of every scraper.
    pub max_connections_per_peer: u64,
    /// `idle_timeout`: the longest a connection waits for the whole headers of its next
    /// request, counted from its opening or from its previous response: an idle keep-alive
    /// connection is closed after it, and so is a client that sends its request too slowly.
    pub idle_timeout: Duration,
    /// `write_timeout`: the longest one write of a response may wait for the client to take
    /// its bytes (the socket's buffers full because the client stops reading); the connection
    /// is closed then, giving back its slots. A client that reads, however slowly, is not cut
    /// off by it (the connection's lifetime still bounds it).
    pub write_timeout: Duration,
    /// `tls`: whether the endpoint serves HTTPS (TLS 1.3) with the node's own certificate of
    /// the cluster PKI (the one its QUIC transport presents), instead of plain HTTP. A
    /// scraper verifies it against the cluster CA (`ca.pem`); no client certificate is asked
    /// for. Off by default.
    pub tls: bool,
}

impl MetricsConfig {
    /// Default `max_connections`: 32.
    pub const DEFAULT_MAX_CONNECTIONS: u64 = 32;
    /// Default `max_connections_per_peer`: 4.
    pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: u64 = 4;
    /// Default `idle_timeout`: 5 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default `write_timeout`: 5 s.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
    /// The largest `max_connections` and `max_connections_per_peer`: 65,536.
    pub const MAX_CONNECTIONS_CEILING: u64 = 65_536;
}

impl Default for MetricsConfig {
    /// No port, the default limits (the `DEFAULT_*` constants), plain HTTP.
    fn default() -> Self {
        MetricsConfig {
            port: None,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: Self::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            write_timeout: Self::DEFAULT_WRITE_TIMEOUT,
            tls: false,
        }
    }
}

/// The `limits:` section of a topology file: how much one transaction may ask of the cluster
/// (docs/security.md). A request over a limit is refused before anything is reserved or
/// written, with an error that names the limit and its value; every node of a cluster reads the
/// same file, so a coordinator and the executors it sends to check the same values. A fourth
/// limit is fixed by the topology rather than set here: a sub-transaction names each
/// participant DC at most once, so at most as many as the topology has DCs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// `max_ops_per_txn`: most operations (key/value or YCSB operations, or the records a
    /// stored procedure plans to touch) in one transaction.
    pub max_ops_per_txn: u64,
    /// `max_bytes_per_txn`: most bytes of keys (8 each) and values one transaction carries.
    pub max_bytes_per_txn: u64,
    /// `max_jsonl_line_bytes`: the longest line `redt client --jsonl` reads, newline
    /// excluded; a longer line is answered with a failure and skipped.
    pub max_jsonl_line_bytes: u64,
    /// `max_pending_votes`: most commit votes an executor remembers while they await their
    /// decision (`ExecutorCore`'s vote memory). Over it the oldest is forgotten, not
    /// refused: its redo entries stay in the ring, where a decision or record naming no entry
    /// finds them; a repeated phase 1 of a forgotten vote is answered an `OVER_LIMIT` error
    /// naming this limit (the coordinator takes it as a DC that could not vote).
    pub max_pending_votes: u64,
    /// `max_accepted_redo`: most (transaction, sender) pairs of replica redo a node remembers
    /// while they await their decision (baselines' secondaries). Over it the oldest is
    /// forgotten: a decision for it finds its `Logged` entries by scanning the node's ring.
    pub max_accepted_redo: u64,
    /// `max_background_retries`: most background retries a node runs at once (catch-up
    /// shipments, the recovery scan's recoverers). One over it waits for a slot; none is
    /// dropped.
    pub max_background_retries: u64,
    /// `max_bulk_percent`: most of an executor thread's time, in percent, one client
    /// identity's large sub-transactions (over 64 operations) may take: after one, the
    /// identity's next waits until its share of the time is back, even on an idle thread.
    pub max_bulk_percent: u64,
    /// `free_deleted_records`: whether a node frees the record of a key a committed delete
    /// emptied, once its grace has passed, every other replica of the key holds the delete and
    /// no replica of its partition may still ship an older catch-up (`redt_dc_executor`'s
    /// `deleted.rs`; docs/design.md, "Records reclaimed"). On by default.
    pub free_deleted_records: bool,
}

impl LimitsConfig {
    /// Default `max_ops_per_txn`: 1,024 operations. Their redo entry on one node fits the
    /// most one ring entry may take (65,535 slots of 64 bytes, 4 MiB − 64 bytes) for records
    /// of up to about 4 KiB of redo per operation (the shipped configs' widest is 2,114
    /// bytes: a 2,048-byte cell). A node loading its topology checks this against the file's
    /// own tables and ring (`redt_dc_executor::ring::check_limits_fit_ring`).
    pub const DEFAULT_MAX_OPS_PER_TXN: u64 = 1024;
    /// Default `max_bytes_per_txn`: 4 MiB.
    pub const DEFAULT_MAX_BYTES_PER_TXN: u64 = 4 << 20;
    /// Default `max_jsonl_line_bytes`: 1 MiB.
    pub const DEFAULT_MAX_JSONL_LINE_BYTES: u64 = 1 << 20;
    /// The largest `max_ops_per_txn` a file may set: 1,048,576 (a redo entry counts its lock
    /// intents in 24 bits, and one transaction's vote must fit a 16 MiB frame).
    pub const MAX_OPS_PER_TXN_CEILING: u64 = 1 << 20;
    /// The largest `max_bytes_per_txn` a file may set: 12 MiB (a request and its vote each
    /// travel in one frame of at most 16 MiB).
    pub const MAX_BYTES_PER_TXN_CEILING: u64 = 12 << 20;
    /// The largest `max_jsonl_line_bytes` a file may set: 64 MiB.
    pub const MAX_JSONL_LINE_BYTES_CEILING: u64 = 64 << 20;
    /// Default `max_pending_votes`: 100,000 (the size of the executors' other memories,
    /// fences and decisions).
    pub const DEFAULT_MAX_PENDING_VOTES: u64 = 100_000;
    /// Default `max_accepted_redo`: 100,000.
    pub const DEFAULT_MAX_ACCEPTED_REDO: u64 = 100_000;
    /// The largest `max_pending_votes` a file may set: 10,000,000.
    pub const MAX_PENDING_VOTES_CEILING: u64 = 10_000_000;
    /// The largest `max_accepted_redo` a file may set: 10,000,000.
    pub const MAX_ACCEPTED_REDO_CEILING: u64 = 10_000_000;
    /// Default `max_background_retries`: 1,024.
    pub const DEFAULT_MAX_BACKGROUND_RETRIES: u64 = 1024;
    /// The largest `max_background_retries` a file may set: 65,536.
    pub const MAX_BACKGROUND_RETRIES_CEILING: u64 = 1 << 16;
    /// Default `max_bulk_percent`: 5% (on a 2-vCPU machine, beside a flood of the largest
    /// calls, what keeps another client's commits at about 80% of its rate alone).
    pub const DEFAULT_MAX_BULK_PERCENT: u64 = 5;
    /// The executor time budgeted per operation of a sub-transaction: 25 µs (a read of an
    /// absent key takes about 8 µs on a 2-vCPU machine, one of a 2 KiB cell a few µs more).
    pub const EXECUTOR_BUDGET_PER_OP: Duration = Duration::from_micros(25);

    /// The most operations a transaction may have under `phase1_timeout`: as many as
    /// [`LimitsConfig::EXECUTOR_BUDGET_PER_OP`] fits in a tenth of it (2,000 at 500 ms), at
    /// least 1. A phase 1 that large then holds an executor thread for a small part of
    /// everyone else's phase-1 timeout.
    pub fn max_ops_for_phase1(phase1_timeout: Duration) -> u64 {
        let us = phase1_timeout.as_micros() / 10 / Self::EXECUTOR_BUDGET_PER_OP.as_micros();
        u64::try_from(us).unwrap_or(u64::MAX).max(1)
    }
}

/// The phase-1 timeout a node uses on a topology whose file does not set one: 10 × the largest
/// link RTT of `links`, at least 500 ms (500 ms at 2 ms and 40 ms RTT, 2.5 s at 250 ms).
pub fn default_phase1_timeout(links: &[Vec<LinkConditions>]) -> Duration {
    let rtt = links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
    (10 * rtt).max(Duration::from_millis(500))
}

/// The lock wait of `--cc wait` when no other is given (`timeouts.lock_wait` itself defaults
/// to No-Wait): the largest link RTT, at least 1 ms and at most 1 s. A
/// lock is held from its holder's phase 1 to its phase 2, about one inter-DC round trip, and a
/// holder already decided releases it within one one-way delay, so a phase 1 that waits this
/// long outlives most holders; a wait that outlives it is more likely a deadlock between two
/// DCs taken in opposite orders, which only the bound breaks.
pub fn default_lock_wait(links: &[Vec<LinkConditions>]) -> Duration {
    let rtt = links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
    rtt.clamp(Duration::from_millis(1), Duration::from_secs(1))
}

impl Default for LimitsConfig {
    /// The defaults: 1,024 operations and 4 MiB per transaction, 1 MiB per JSON line,
    /// 100,000 pending votes and accepted redo remembered, 1,024 background retries at once, 5%
    /// of an executor thread for one identity's large sub-transactions.
    fn default() -> Self {
        LimitsConfig {
            max_ops_per_txn: Self::DEFAULT_MAX_OPS_PER_TXN,
            max_bytes_per_txn: Self::DEFAULT_MAX_BYTES_PER_TXN,
            max_jsonl_line_bytes: Self::DEFAULT_MAX_JSONL_LINE_BYTES,
            max_pending_votes: Self::DEFAULT_MAX_PENDING_VOTES,
            max_accepted_redo: Self::DEFAULT_MAX_ACCEPTED_REDO,
            max_background_retries: Self::DEFAULT_MAX_BACKGROUND_RETRIES,
            max_bulk_percent: Self::DEFAULT_MAX_BULK_PERCENT,
            free_deleted_records: true,
        }
    }
}

/// The `timeouts:` section of a topology file: coordinator timeouts at the top, recovery's
/// under `recovery`. Each is `None` unless the file sets it; each set one is above zero
/// (`clock_skew_bound` may be zero) and at most [`TimeoutsConfig::MAX`]. Every node of a
/// cluster reads the same file, so they all run with the same values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeoutsConfig {
    /// `phase1_timeout`: how long a coordinator waits for phase-1 votes; executors refuse to
    /// vote past it and recovery waits for it.
    pub phase1_timeout: Option<Duration>,
    /// `clock_skew_bound`: the largest difference between two nodes' wall clocks.
    pub clock_skew_bound: Option<Duration>,
    /// `retry_every`: a coordinator's first pause before it retries a phase-2 or abort-record
    /// message.
    pub retry_every: Option<Duration>,
    /// `retry_max`: a coordinator's largest pause between those retries.
    pub retry_max: Option<Duration>,
    /// `give_up_after`: how long a coordinator retries phase 2 (or recording an abort)
    /// before it gives up.
    pub give_up_after: Option<Duration>,
    /// `lock_wait`: how long a phase 1 that meets a lock held by another transaction waits
    /// for it at the executor before it votes abort (unset or 0: No-Wait, abort at once;
    /// [`default_lock_wait`] is the wait `--cc wait` takes when none is given).
    pub lock_wait: Option<Duration>,
    /// The `recovery:` subsection.
    pub recovery: RecoveryTimeoutsConfig,
    /// The `detector:` subsection.
    pub detector: DetectorTimeoutsConfig,
}

impl TimeoutsConfig {
    /// The largest timeout a file may set: 24 hours.
    pub const MAX: Duration = Duration::from_secs(24 * 3600);
}

/// The `timeouts.recovery:` subsection: when and how persistently a node recovers the
/// transactions a dead coordinator left (the fields of `redt_coordinator::RecoveryOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryTimeoutsConfig {
    /// `own_dc_after`: a node of the coordinator's DC recovers this long after the phase-1
    /// deadline (plus the skew bound).
    pub own_dc_after: Option<Duration>,
    /// `other_dc_after`: a node of another DC waits this long instead.
    pub other_dc_after: Option<Duration>,
    /// `turn`: plus this much per participant DC ahead of its own.
    pub turn: Option<Duration>,
    /// `round_timeout`: how long a prepare or record round waits for answers.
    pub round_timeout: Option<Duration>,
    /// `retry_base`: a recoverer's (and a catch-up's) first retry pause.
    pub retry_base: Option<Duration>,
    /// `retry_max`: a recoverer's (and a catch-up's) largest retry pause.
    pub retry_max: Option<Duration>,
    /// `scan_every`: how often a node scans its ring for undecided entries.
    pub scan_every: Option<Duration>,
    /// `gap_wait`: how long a gap at a ring's head waits before the node asks the writers.
    pub gap_wait: Option<Duration>,
    /// `catch_up_give_up`: how long a catch-up keeps retrying a replica before it gives up.
    pub catch_up_give_up: Option<Duration>,
}

/// The `timeouts.detector:` subsection: the failure detector's heartbeats, the same for every
/// peer of a node when set (unset, each peer's are derived from the link to it:
/// `redt_membership::DetectorConfig::for_link`, resolved by `redt_coordinator::NodeTimeouts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetectorTimeoutsConfig {
    /// `interval`: time between two heartbeats a node sends to one peer.
    pub interval: Option<Duration>,
    /// `timeout`: silence after which a peer is suspected; longer than the interval.
    pub timeout: Option<Duration>,
}

/// The `verbs:` section of a topology file: what a node's in-DC verbs server (the `redt-tcp`
/// TCP verbs server, and the RDMA bootstrap's handshakes) tolerates from the connections it
/// accepts. Each is `None` unless the file sets it; a set count is at least 1 and
/// at most [`VerbsConfig::MAX_CONNECTIONS`], a set duration above zero and at most
/// [`TimeoutsConfig::MAX`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerbsConfig {
    /// `max_connections`: connections open at once, all peers together, those still in their
    /// TLS handshake included.
    pub max_connections: Option<u64>,
    /// `max_connections_per_peer`: connections open at once from one peer IP address, those
    /// still in their TLS handshake included.
    pub max_connections_per_peer: Option<u64>,
    /// `handshake_timeout`: from accepting a connection to the end of its TLS handshake.
    pub handshake_timeout: Option<Duration>,
    /// `first_frame_timeout`: from the end of the handshake to the whole first request frame.
    pub first_frame_timeout: Option<Duration>,
    /// `idle_timeout`: the longest wait for each later request frame (and for writing a reply).
    pub idle_timeout: Option<Duration>,
}

impl VerbsConfig {
    /// The largest connection cap a file may set: 65,536.
    pub const MAX_CONNECTIONS: u64 = 65_536;
}

/// The `transport:` section of a topology file: caps and deadlines of every node's QUIC
/// transport between nodes (no client can wedge a node). Over a cap a connection or
/// request is refused with an error that names the key (`transport.KEY`), counted, and the
/// node keeps serving everyone else. Every key is optional; one left out keeps its default
/// (the `DEFAULT_*` constants). Counts are at least 1 and at most their `*_CEILING`, windows
/// from [`QuicConfig::MIN_WINDOW_BYTES`] to [`QuicConfig::MAX_WINDOW_BYTES`] (the connection's
/// at least the stream's), durations above zero and at most [`TimeoutsConfig::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicConfig {
    /// `max_connections`: incoming QUIC connections open at once, all peers together, those
    /// still in their handshake included. One more is refused before its handshake.
    pub max_connections: u64,
    /// `max_connections_per_peer`: incoming QUIC connections open at once from one peer IP
    /// address, those still in their handshake included.
    pub max_connections_per_peer: u64,
    /// `max_streams_per_connection`: bidirectional streams (= RPCs) a peer may have open at
    /// once on one connection to this node; QUIC's stream credit makes the peer's next call
    /// wait for one to finish.
    pub max_streams_per_connection: u64,
    /// `stream_receive_window`: bytes a peer may send on one stream ahead of what this node
    /// has read.
    pub stream_receive_window_bytes: u64,
    /// `connection_receive_window`: bytes a peer may send on all streams of one connection
    /// together ahead of what this node has read.
    pub connection_receive_window_bytes: u64,
    /// `max_calls_in_flight`: outgoing calls of one node in flight at once, over all peers.
    pub max_calls_in_flight: u64,
    /// `call_slot_timeout`: how long an outgoing call waits for one of those slots before it
    /// fails naming `transport.max_calls_in_flight`.
    pub call_slot_timeout: Duration,
    /// `handler_timeout`: how long a node works on one request; past it the work is
    /// cancelled and the caller is answered with a timeout error.
    pub handler_timeout: Duration,
    /// `write_timeout`: how long writing one response may take (a peer that stops reading);
    /// past it that stream alone is reset.
    pub write_timeout: Duration,
}

impl QuicConfig {
    /// Default `max_connections`: 1,024.
    pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
    /// Default `max_connections_per_peer`: 64.
    pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: u64 = 64;
    /// Default `max_streams_per_connection`: 256.
    pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u64 = 256;
    /// Default `stream_receive_window`: 1 MiB.
    pub const DEFAULT_STREAM_RECEIVE_WINDOW_BYTES: u64 = 1 << 20;
    /// Default `connection_receive_window`: 16 MiB.
    pub const DEFAULT_CONNECTION_RECEIVE_WINDOW_BYTES: u64 = 16 << 20;
    /// Default `max_calls_in_flight`: 1,024.
    pub const DEFAULT_MAX_CALLS_IN_FLIGHT: u64 = 1024;
    /// Default `call_slot_timeout`: 5 s.
    pub const DEFAULT_CALL_SLOT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default `handler_timeout`: 30 s.
    pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default `write_timeout`: 10 s.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
    /// The largest `max_connections` and `max_connections_per_peer`: 65,536.
    pub const MAX_CONNECTIONS_CEILING: u64 = 65_536;
    /// The largest `max_streams_per_connection`: 65,536.
    pub const MAX_STREAMS_CEILING: u64 = 65_536;
    /// The largest `max_calls_in_flight`: 1,048,576.
    pub const MAX_CALLS_IN_FLIGHT_CEILING: u64 = 1 << 20;
    /// The smallest receive window: 4 KiB.
    pub const MIN_WINDOW_BYTES: u64 = 4 << 10;
    /// The largest receive window: 1 GiB.
    pub const MAX_WINDOW_BYTES: u64 = 1 << 30;
}

impl Default for QuicConfig {
    /// The defaults: the `DEFAULT_*` constants.
    fn default() -> Self {
        QuicConfig {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: Self::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            max_streams_per_connection: Self::DEFAULT_MAX_STREAMS_PER_CONNECTION,
            stream_receive_window_bytes: Self::DEFAULT_STREAM_RECEIVE_WINDOW_BYTES,
            connection_receive_window_bytes: Self::DEFAULT_CONNECTION_RECEIVE_WINDOW_BYTES,
            max_calls_in_flight: Self::DEFAULT_MAX_CALLS_IN_FLIGHT,
            call_slot_timeout: Self::DEFAULT_CALL_SLOT_TIMEOUT,
            handler_timeout: Self::DEFAULT_HANDLER_TIMEOUT,
            write_timeout: Self::DEFAULT_WRITE_TIMEOUT,
        }
    }
}

/// One data center.
#[derive(Clone, Debug, PartialEq)]
pub struct Dc {
    /// Dense id (index in [`Topology::dcs`]).
    pub id: DcId,
    /// Name as written in the file (`dc1`).
    pub name: String,
    /// Nodes of this DC, in file order.
    pub nodes: Vec<NodeId>,
    /// How the DC's nodes reach each other's MemStores when each runs as its own `redt node`
    /// process (`backend:`; default [`VerbsBackend::Shm`]). The embedded cluster, every node
    /// in one process, shares one in-process backend per DC whatever this says (the TCP
    /// verbs under the `redt-tcp` protocol).
    pub backend: VerbsBackend,
}

/// The in-DC verbs backend of a DC: how its nodes read, write and lock each other's
/// MemStores (a DC's `backend:` key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VerbsBackend {
    /// Shared-memory files (`/dev/shm`) every node of the DC maps: the DC's nodes run on one
    /// host (the file checks it: [`crate::Host::same_machine`] of their `advertise` hosts).
    #[default]
    Shm,
    /// Two-sided requests over TLS on TCP to each node's verbs server, at its `listen` port
    /// (the `redt-tcp` data path, RedT §6.5): any hosts that reach each other.
    Tcp,
    /// One-sided RDMA through an RNIC (`redt` built with `--features rdma`; `docs/rdma.md`),
    /// queue pairs set up over a TLS bootstrap on each node's `listen` TCP port.
    Rdma,
}

impl VerbsBackend {
    /// Every backend, in the order the file's errors list them.
    pub const ALL: [VerbsBackend; 3] = [VerbsBackend::Shm, VerbsBackend::Tcp, VerbsBackend::Rdma];

    /// The name in the file: `shm`, `tcp`, `rdma`.
    pub fn name(self) -> &'static str {
        match self {
            VerbsBackend::Shm => "shm",
            VerbsBackend::Tcp => "tcp",
            VerbsBackend::Rdma => "rdma",
        }
    }
}

impl fmt::Display for VerbsBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VerbsBackend {
    type Err = String;

    /// Parses `shm`, `tcp` or `rdma`.
    fn from_str(s: &str) -> Result<Self, String> {
        VerbsBackend::ALL
            .into_iter()
            .find(|b| b.name() == s.trim())
            .ok_or_else(|| format!("unknown backend `{}` (expected shm, tcp or rdma)", s.trim()))
    }
}

/// One node's entry in the topology (one process in a real deployment; the running node is
/// `redt_coordinator::Node`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeEntry {
    /// Dense id (index in [`Topology::nodes`]).
    pub id: NodeId,
    /// Name as written in the file (`dc1-n1`).
    pub name: String,
    /// The DC this node belongs to.
    pub dc: DcId,
    /// Where the node binds: its QUIC endpoint (UDP) and, at the same port, its in-DC verbs
    /// server (TCP); may be the unspecified address (`0.0.0.0:7100`).
    pub listen: SocketAddr,
    /// Where the other nodes and the clients reach it (an IP address or a host name,
    /// resolved when connecting); the file's `addr` sets `listen` and `advertise` to one
    /// address.
    pub advertise: HostPort,
    /// Where the node serves its Prometheus metrics over HTTP when the file says so (its own
    /// `metrics: IP:PORT` key; e.g. a management network's address, or `127.0.0.1` to keep
    /// them on the host): `None` to follow the `metrics:` section ([`Topology::metrics_addr`]).
    pub metrics: Option<SocketAddr>,
    /// Where the node serves the gRPC client API when the file says so (its own
    /// `grpc: IP:PORT` key): `None` to follow the `grpc:` section ([`Topology::grpc_addr`]).
    pub grpc: Option<SocketAddr>,
}

impl NodeEntry {
    /// Whether `self` and `other` run on one host, judged from their `advertise` hosts
    /// ([`crate::Host::same_machine`]: both loopback, or the same IP or host name).
    pub fn same_host(&self, other: &NodeEntry) -> bool {
        self.advertise.host.same_machine(&other.advertise.host)
    }
}

/// MemStore layout of every node: one flat region of `size_bytes` holding the index
/// buckets (`index_bytes`), the redo ring (`ring_bytes`) and the record heap (the rest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemStoreConfig {
    /// Total region size in bytes.
    pub size_bytes: u64,
    /// Bytes given to hash-index buckets (a multiple of 64).
    pub index_bytes: u64,
    /// Bytes given to the redo ring including its 64-byte head/tail block (a multiple of 64).
    pub ring_bytes: u64,
}

impl MemStoreConfig {
    /// Bytes of the decision log that follows the ring: a 64-byte header and one 32-byte row
    /// per ring slot, rounded up to whole 64-byte lines (docs/design.md §2, recovery: a finished
    /// entry's decision outlives its slot).
    pub fn decision_log_bytes(&self) -> u64 {
        64 + ((self.ring_bytes / 64).saturating_sub(1) * 32).div_ceil(64) * 64
    }

    /// Bytes of the absent-key lock words that follow the decision log: one 8-byte lock word
    /// per 64-byte index bucket, rounded up to whole 64-byte lines. A read of a key that has
    /// no record locks the word of the key's home bucket instead of creating a record
    /// (`redt_dc_executor::Layout::absent_lock`).
    pub fn absent_lock_bytes(&self) -> u64 {
        (self.index_bytes / 64 * 8).div_ceil(64) * 64
    }

    /// Bytes of the promise table that follows the absent-key lock words: one 16-byte row per
    /// four ring slots (at least four rows), rounded up to whole 64-byte lines. A replica
    /// holds there the ballot it promised a recoverer while it held no redo entry of the
    /// transaction to promise in (`redt_dc_executor::promise_table`).
    pub fn promise_table_bytes(&self) -> u64 {
        let rows = ((self.ring_bytes / 64).saturating_sub(1) / 4).max(4);
        (rows * 16).div_ceil(64) * 64
    }
}

/// Lock granularity of a table (CREST §4.2: cell-level by default; record-level where
/// cells are small and always accessed together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locking {
    /// Each cell group has its own exclusive bit and reader count.
    Cell,
    /// The whole record is one lock group.
    Record,
}

/// How a table's keys map to partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioning {
    /// `partition = key % partitions`.
    Modulo,
    /// `partition = (key >> bits) % partitions` (e.g. TPC-C keys with the warehouse in the
    /// high bits).
    Shift {
        /// Number of low key bits ignored.
        bits: u8,
    },
}

/// A table: a fixed list of cells per record.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSchema {
    /// Table id, unique in the topology.
    pub id: TableId,
    /// Table name, unique in the topology.
    pub name: String,
    /// Cells of every record, in order; 1 to 64 cells.
    pub cells: Vec<CellSchema>,
    /// Lock granularity.
    pub locking: Locking,
    /// Key-to-partition mapping.
    pub partitioning: Partitioning,
    /// Whether every replica keeps an ordered index (a B+-tree per partition, DEX) of the
    /// table's keys beside the hash index, so transactions can read key ranges (topology file
    /// key `ordered_index`, default `true`). Off saves the tree's memory (about 24
    /// bytes per key) and its upkeep on every record creation.
    pub ordered: bool,
}

/// One cell (column) of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellSchema {
    /// Cell name, unique within its table.
    pub name: String,
    /// Value size in bytes (fixed; ≥ 1).
    pub bytes: u32,
}

/// A partition and where its replicas live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Dense id (index in [`Topology::partitions`]).
    pub id: PartitionId,
    /// Replica nodes, each in a distinct DC; `replicas[0]` is the primary. These are the
    /// voting replicas: `n = replicas.len()`, and quorums count them only.
    pub replicas: Vec<NodeId>,
    /// Learners: replicas being rebuilt, each on a node of a DC holding no other replica of
    /// the partition. A learner receives every committed write of the partition (as a
    /// replica left behind does: a catch-up) and a snapshot copy; it never votes, holds no
    /// lock and is never read, until a later epoch makes it a voter (docs/design.md,
    /// "Rebuild"). Always empty in a topology file: only membership changes add learners.
    pub learners: Vec<Learner>,
}

impl Partition {
    /// Whether `node` holds a replica of the partition: a voter or a learner.
    pub fn holds(&self, node: NodeId) -> bool {
        self.replicas.contains(&node) || self.learners.iter().any(|l| l.node == node)
    }

    /// The learner on `node`, if there is one.
    pub fn learner(&self, node: NodeId) -> Option<Learner> {
        self.learners.iter().copied().find(|l| l.node == node)
    }
}

/// A replica being rebuilt: it receives the partition's committed writes and a snapshot, but
/// does not vote and holds no locks (docs/design.md, "Rebuild").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Learner {
    /// The node holding the learner.
    pub node: NodeId,
    /// The epoch that added it: its snapshot copy is of what was committed before that epoch,
    /// and its promotion names it, so a promotion planned for an earlier learner on the same
    /// node cannot promote a newer, unfilled one.
    pub added_in: Epoch,
}

/// Conditions of one directed inter-DC link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConditions {
    /// Round-trip time; each direction adds half of it.
    pub rtt: Duration,
    /// Jitter added to each one-way delay (uniform in `±jitter`).
    pub jitter: Duration,
    /// Fraction of datagrams dropped, in `[0, 1]`.
    pub loss: f64,
    /// Rate limit in bits per second; `None` means unlimited.
    pub rate_bits_per_s: Option<u64>,
}

impl LinkConditions {
    /// The largest RTT a link may have: 60 s (the topology file and `redt netem set`).
    pub const MAX_RTT: Duration = Duration::from_secs(60);

    /// Checks the rules every link follows, in the topology file and in `redt netem set`:
    /// RTT at most [`LinkConditions::MAX_RTT`], jitter at most half the RTT, loss from 0 to 1,
    /// a rate (when limited) of at least 1 bit/s.
    ///
    /// # Errors
    /// The first rule broken, as a [`LinkError`] naming its key.
    pub fn check(&self) -> Result<(), LinkError> {
        if self.rtt > Self::MAX_RTT {
            return Err(LinkError::RttTooLarge { rtt: self.rtt, max: Self::MAX_RTT });
        }
        if self.jitter > self.rtt / 2 {
            return Err(LinkError::JitterOverHalfRtt { jitter: self.jitter, rtt: self.rtt });
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(LinkError::LossOutOfRange { loss: self.loss });
        }
        if self.rate_bits_per_s == Some(0) {
            return Err(LinkError::ZeroRate);
        }
        Ok(())
    }
}

impl Default for LinkConditions {
    fn default() -> Self {
        LinkConditions { rtt: Duration::ZERO, jitter: Duration::ZERO, loss: 0.0, rate_bits_per_s: None }
    }
}

impl Topology {
    /// The table with id `id`, if declared.
    pub fn table(&self, id: TableId) -> Option<&TableSchema> {
        self.tables.iter().find(|t| t.id == id)
    }

    /// The table named `name`, if declared.
    pub fn table_by_name(&self, name: &str) -> Option<&TableSchema> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The partition holding `key` of `table` (see [`Partitioning`]).
    pub fn partition_of(&self, table: &TableSchema, key: u64) -> PartitionId {
        let p = self.partitions.len() as u64;
        let k = match table.partitioning {
            Partitioning::Modulo => key,
            Partitioning::Shift { bits } => key.checked_shr(bits as u32).unwrap_or(0),
        };
        PartitionId((k % p) as u32)
    }

    /// The replica of `partition` stored in `dc`, if any (at most one: replicas sit in
    /// distinct DCs).
    pub fn replica_in_dc(&self, partition: PartitionId, dc: DcId) -> Option<NodeId> {
        self.partitions[partition.0 as usize].replicas.iter().copied().find(|n| self.nodes[n.0 as usize].dc == dc)
    }

    /// The node named `name`, if any.
    pub fn node_by_name(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Where `node` serves its Prometheus metrics by the file: its own `metrics` address, else
    /// its `listen` IP at the `metrics:` section's `port`; `None` with neither.
    ///
    /// # Panics
    /// If `node` is not a node of the topology.
    pub fn metrics_addr(&self, node: NodeId) -> Option<SocketAddr> {
        let n = &self.nodes[node.0 as usize];
        n.metrics.or_else(|| Some(SocketAddr::new(n.listen.ip(), self.metrics.port?)))
    }

    /// Where `node` serves the gRPC client API by the file: its own `grpc` address, else its
    /// `listen` IP at the `grpc:` section's `port`; `None` with neither.
    ///
    /// # Panics
    /// If `node` is not a node of the topology.
    pub fn grpc_addr(&self, node: NodeId) -> Option<SocketAddr> {
        let n = &self.nodes[node.0 as usize];
        n.grpc.or_else(|| Some(SocketAddr::new(n.listen.ip(), self.grpc.port?)))
    }

    /// The name of node `id` as the file gives it; `node#N` for an id outside the topology
    /// (an id from a message of another epoch).
    pub fn node_name(&self, id: NodeId) -> String {
        self.nodes.get(usize::from(id.0)).map_or_else(|| id.to_string(), |n| n.name.clone())
    }

    /// The name of DC `id` as the file gives it; `dc#N` for an id outside the topology.
    pub fn dc_name(&self, id: DcId) -> String {
        self.dcs.get(usize::from(id.0)).map_or_else(|| id.to_string(), |d| d.name.clone())
    }
}
