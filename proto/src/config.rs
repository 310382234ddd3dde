//! The topology file (YAML) and its resolution into a [`Topology`].
//!
//! # File format
//!
//! ```yaml
//! name: redt-paper                 # a name (below), as every DC, node, table and cell name
//! epoch: 1                         # placement epoch, >= 1
//! memstore:                        # identical on every node
//!   size: 512MiB                   # whole region
//!   index: 16MiB                   # hash-index buckets
//!   ring: 16MiB                    # redo ring incl. its 64-byte head/tail block
//! dcs:                             # DcId = index here
//!   - name: dc1
//!     backend: shm                 # in-DC verbs: shm (default) | tcp | rdma
//!     nodes:                       # NodeId = running index over all DCs in file order
//!       - { name: dc1-n1, addr: "127.0.1.1:7100" }   # listen and advertise at one address
//!   - name: dc2
//!     backend: tcp
//!     nodes:
//!       - { name: dc2-n1, listen: "0.0.0.0:7100", advertise: "dc2-a.example.net:7100" }
//!       - { name: dc2-n2, addr: "10.0.2.2:7100", metrics: "10.9.0.2:9464" }  # optional own
//!                                  #   metrics address (else `metrics.port` at its listen IP)
//! links:                           # optional: everything defaults to 0 / unlimited
//!   default: { rtt: 40ms, jitter: 0ms, loss: 0%, rate: unlimited }
//!   overrides:                     # applied in order, later ones win
//!     - { from: dc1, to: dc2, rtt: 80ms, symmetric: true }
//! tables:
//!   - name: usertable
//!     id: 1                        # 0..=65535, unique
//!     locking: cell                # cell | record            (default cell)
//!     partitioning: modulo         # modulo | { shift: 40 }   (default modulo)
//!     cells: [ { name: f0, bytes: 100 } ]
//!     # or: cells: { count: 10, bytes: 100, prefix: field }  -> field0 .. field9
//! partitions:                      # PartitionId = index here
//!   - { replicas: [dc1-n1, dc2-n1, dc3-n1] }   # node names; the first is the primary
//! timeouts:                        # optional, every key optional: unset ones are derived
//!   phase1_timeout: 500ms          #   from the largest link RTT (redt_coordinator::NodeTimeouts)
//!   clock_skew_bound: 250ms        # may be 0
//!   retry_every: 200ms             # coordinator: phase-2 and abort-record retries
//!   retry_max: 5s
//!   give_up_after: 10m
//!   lock_wait: 40ms                # a phase 1 meeting a lock waits this long at the executor
//!                                  #   (default 0: No-Wait)
//!   recovery: { own_dc_after: 160ms, other_dc_after: 500ms, turn: 640ms, round_timeout: 160ms,
//!               retry_base: 80ms, retry_max: 5s, scan_every: 100ms, gap_wait: 200ms,
//!               catch_up_give_up: 30s }
//!   detector: { interval: 20ms, timeout: 200ms }   # every peer's heartbeats (default: per
//!                                  #   link, redt_membership::DetectorConfig::for_link)
//! verbs:                           # optional, every key optional (defaults shown): the
//!   max_connections: 1024          #   in-DC verbs server (redt-tcp; RDMA bootstrap
//!   max_connections_per_peer: 64   #   handshakes), redt_dc_executor::ServerLimits; caps
//!   handshake_timeout: 2s          #   count connections still in their TLS handshake,
//!   first_frame_timeout: 2s        #   per peer by IP address
//!   idle_timeout: 120s
//! limits:                          # optional, every key optional (defaults shown)
//!   max_ops_per_txn: 1024          # operations of one transaction, 1 to 1048576, at most a tenth of phase1_timeout at 25 µs each
//!   max_bytes_per_txn: 4MiB        # keys (8 bytes each) + values of one transaction, <= 12MiB
//!   max_jsonl_line_bytes: 1MiB     # longest line `redt client --jsonl` reads, <= 64MiB
//!   max_pending_votes: 100000      # commit votes an executor remembers, 1 to 10000000
//!   max_accepted_redo: 100000      # replica redo a secondary remembers, 1 to 10000000
//!   max_background_retries: 1024   # catch-ups and recoverers running at once, 1 to 65536
//! transport:                       # optional, every key optional (defaults shown): each
//!   max_connections: 1024          #   node's QUIC transport; incoming connections in all and
//!   max_connections_per_peer: 64   #   per peer IP address (handshakes included)
//!   max_streams_per_connection: 256 # RPCs a peer has open at once on one connection
//!   stream_receive_window: 1MiB    # bytes a peer may send ahead on one stream
//!   connection_receive_window: 16MiB # … on one connection (>= the stream's)
//!   max_calls_in_flight: 1024      # outgoing calls of a node at once
//!   call_slot_timeout: 5s          # an outgoing call's wait for one of those
//!   handler_timeout: 30s           # work on one request; then cancelled, answered a timeout
//!   write_timeout: 10s             # writing one response; then that stream is reset
//! metrics:                         # optional, every key optional (defaults shown but port)
//!   port: 9464                     # every node serves Prometheus metrics over HTTP
//!                                  #   (`GET /metrics`) at its own `listen` IP, this TCP port
//!   max_connections: 32            # each endpoint's connections at once, all clients
//!   max_connections_per_peer: 4    #   … from one client IP (one more: 503, closed)
//!   idle_timeout: 5s               # wait for a request's headers (idle keep-alive included)
//!   write_timeout: 5s              # wait for a client to take a response's bytes; then closed
//!   tls: false                     # true: HTTPS with the node's cluster certificate
//! durability: memory               # optional: `memory` (default) or `disk`: each MemStore
//!                                  #   imaged on disk and synced before votes (docs/durability.md)
//! ```
//!
//! Value syntax:
//! - **sizes** (read by the `bytesize` crate, here and on the command line): a
//!   number of bytes, or a number with a unit, binary `B`, `KiB`, `MiB`, `GiB`, `TiB` or
//!   decimal `kB`, `MB`, `GB`, `TB`, in any case (a space before the unit is allowed; `1.5KiB`
//!   is 1536). Every MemStore size must be
//!   a multiple of 64 bytes. The record heap is what is left after the superblock, index,
//!   ring, decision log and absent-key locks (one 8-byte word per index bucket).
//! - **limits**: `max_ops_per_txn` and the two memory caps integers, the two byte limits
//!   sizes; each at least 1 and at most its ceiling (`redt_proto::LimitsConfig`). A request
//!   over a limit is refused before anything is reserved or written, with an error naming the
//!   limit (`limits.KEY`) and its value; a sub-transaction may also name each participant DC
//!   only once, so at most as many as `dcs` has. `max_background_retries` makes a retry over
//!   it wait, never dropped. The memory caps (`max_pending_votes`,
//!   `max_accepted_redo`) forget the oldest entry instead of refusing a new one (docs/design.md,
//!   "Limits and untrusted input").
//! - **durations** (`rtt`, `jitter`, every `timeouts` key, the `verbs` and `transport`
//!   timeouts): humantime syntax (`40ms`, `1s 500ms`, `250us`); a plain `0` is zero. A
//!   timeout is above zero (`clock_skew_bound` may be zero) and at most 24 h; a link's `rtt`
//!   is at most 60 s and its `jitter` at most half its `rtt` (`LinkConditions::check`, which
//!   `redt netem set` applies too); orderings (`retry_every` ≤ `retry_max`, the detector's
//!   `interval` < `timeout`, …) are checked once the defaults are filled in
//!   (`redt_coordinator::NodeTimeouts::resolve`).
//! - **loss**: a percentage with a `%` sign, `0%` to `100%` (`0.5%`).
//! - **rate**: `unlimited`, or a number with a unit `bit`, `kbit`, `mbit`, `gbit`, `tbit`
//!   (decimal, as `tc` uses them: `1kbit` = 1000 bit/s; `kibit`, … binary), in any case; a
//!   bare number is bit/s. The number and prefix are read by the sizes' parser.
//! - **names** (the cluster's, each DC's, node's, table's and cell's, and the names
//!   `links.overrides` and `partitions` refer to): 1 to 64 characters ([`MAX_NAME_CHARS`]),
//!   each an ASCII letter, a digit, `.`, `_` or `-`, the first a letter or digit; a cell
//!   `prefix` with the largest cell number too. Anything else is refused naming the field,
//!   the name and the first character refused.
//! - **the file** is at most 1 MiB ([`MAX_TOPOLOGY_BYTES`]) and nests at most 64 levels deep
//!   ([`MAX_TOPOLOGY_DEPTH`]: indentation levels, `- ` entries, `[` and `{`), checked before
//!   it is parsed.
//! - **node addresses**: `listen` is the IP socket address a node binds
//!   (`10.0.0.7:7100`, `[::]:7100`, `0.0.0.0:7100`): its QUIC endpoint on UDP and, at the
//!   same port on TCP, its in-DC verbs server (`tcp` backend) or RDMA bootstrap (`rdma`).
//!   `advertise` is where the other nodes and the clients reach it: an IP address or a host
//!   name (`db1.eu.example.net:7100`, resolved each time a connection is made, never at
//!   load), never an unspecified address. `addr: IP:PORT` is both at once (the older single
//!   key, still accepted). A node gives `addr`, or `listen` and `advertise`; `listen` alone
//!   (a specific IP) is advertised as is; `advertise` alone with an IP is also the listen
//!   address, with a host name `listen` is required. No two nodes advertise the same address,
//!   and two nodes of one host (below) do not bind the same address.
//! - **backend** (of a DC): `shm` (the default) maps the MemStore files of every node of the
//!   DC from the node's `--shm-dir`, so the DC's nodes must share a host: the file refuses
//!   `shm` unless the `advertise` hosts of the DC's nodes are all loopback addresses (or
//!   `localhost`), or all the same IP address or host name (two different names, or a name
//!   and an IP, count as two hosts). `tcp` reaches the other nodes' MemStores over TLS on TCP
//!   and each node maps only its own; `rdma` through an RNIC (needs a `redt` built with
//!   `--features rdma`, which `redt node` checks).
//! - **metrics.port**: a TCP port, 1 to 65535. Each node listens on its own `listen` IP at
//!   that port, or at its own `metrics: IP:PORT` when it gives one (port 1 to 65535); no two
//!   nodes of one host may serve metrics at one port on the same IP (or either on the
//!   unspecified one), and none at the QUIC port of a node of its host on such an IP (the
//!   verbs server takes that port on TCP). Without a port or a node's own address a node
//!   serves metrics only if its command line asks (`redt node --metrics-addr`; `redt cluster
//!   up` serves them by default). The limits apply to every endpoint, wherever it listens:
//!   `max_connections` and `max_connections_per_peer` are 1 to 65,536 (a connection over
//!   either is answered 503 and closed at once), `idle_timeout` and `write_timeout` durations
//!   as above, `tls` `true` or `false`.
//!
//! Links: `links[from][to]` starts as `links.default` for every pair of distinct DCs and as
//! zero conditions on the diagonal (unused: a DC does not talk to itself over the WAN).
//! Each override then sets `from → to` (and `to → from` unless `symmetric: false`) to the
//! default with the fields it gives replaced.
//!
//! Unknown keys are refused everywhere. Rule violations are reported as
//! [`ConfigError::Invalid`] with the YAML path of the offending value; the first violation
//! found is reported.

use crate::address::HostPort;
use crate::error::ConfigError;
use crate::ids::{DcId, Epoch, NodeId, PartitionId, TableId};
use crate::topology::{
    CellSchema, Dc, LinkConditions, Locking, MemStoreConfig, NodeEntry, Partition, Partitioning, TableSchema, Topology,
    VerbsBackend,
};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub use shape::{MAX_TOPOLOGY_BYTES, MAX_TOPOLOGY_DEPTH};

/// Most characters of a name in the topology file: the cluster's, a DC's, a node's, a
/// table's, a cell's (a generated cell's with its number). Each is a letter, a digit, `.`,
/// `_` or `-`, the first a letter or digit.
pub const MAX_NAME_CHARS: usize = 64;

/// Bytes of the MemStore superblock (layout words, insert-lock stripes and the node line
/// with the incarnation counter) that precedes index, ring and heap.
const SUPERBLOCK_BYTES: u64 = 192;
/// MemStore alignment unit (one cache line / one ring slot).
const ALIGN: u64 = 64;
/// Smallest index: one bucket.
const MIN_INDEX_BYTES: u64 = 64;
/// Smallest ring: the 64-byte head/tail block and one 64-byte slot.
const MIN_RING_BYTES: u64 = 128;
/// Most cells a table may have (one bit each in the record lock word).
const MAX_CELLS: usize = 64;
/// Largest cell value.
const MAX_CELL_BYTES: u64 = 65536;
/// Largest `partitioning: { shift }`.
const MAX_SHIFT_BITS: u64 = 63;

// ---------------------------------------------------------------------------------------
// Raw file shape
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    name: String,
    epoch: u32,
    memstore: RawMemStore,
    dcs: Vec<RawDc>,
    #[serde(default)]
    links: RawLinks,
    tables: Vec<RawTable>,
    partitions: Vec<RawPartition>,
    #[serde(default)]
    timeouts: timeouts::RawTimeouts,
    #[serde(default)]
    verbs: verbs::RawVerbs,
    #[serde(default)]
    limits: limits::RawLimits,
    #[serde(default)]
    transport: transport::RawTransport,
    #[serde(default)]
    metrics: Option<metrics::RawMetrics>,
    #[serde(default)]
    grpc: Option<grpc::RawGrpc>,
    #[serde(default)]
    durability: crate::topology::Durability,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemStore {
    size: Text,
    index: Text,
    ring: Text,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDc {
    name: String,
    #[serde(default)]
    backend: Option<Text>,
    nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    #[serde(default)]
    addr: Option<Text>,
    #[serde(default)]
    listen: Option<Text>,
    #[serde(default)]
    advertise: Option<Text>,
    #[serde(default)]
    metrics: Option<Text>,
    #[serde(default)]
    grpc: Option<Text>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLinks {
    #[serde(default)]
    default: RawLinkParams,
    #[serde(default)]
    overrides: Vec<RawOverride>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLinkParams {
    rtt: Option<Text>,
    jitter: Option<Text>,
    loss: Option<Text>,
    rate: Option<Text>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    from: String,
    to: String,
    #[serde(default = "yes")]
    symmetric: bool,
    rtt: Option<Text>,
    jitter: Option<Text>,
    loss: Option<Text>,
    rate: Option<Text>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    id: u16,
    #[serde(default)]
    locking: RawLocking,
    #[serde(default)]
    partitioning: RawPartitioning,
    /// Whether replicas keep a B+-tree of the table's keys; default on.
    #[serde(default = "yes")]
    ordered_index: bool,
    cells: RawCells,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum RawLocking {
    #[default]
    Cell,
    Record,
}

#[derive(Default, Clone, Copy)]
enum RawPartitioning {
    #[default]
    Modulo,
    Shift(u64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShift {
    shift: u64,
}

enum RawCells {
    List(Vec<RawCell>),
    Generated(RawCellGen),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCell {
    name: String,
    bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCellGen {
    count: u64,
    bytes: u64,
    #[serde(default = "default_prefix")]
    prefix: String,
}

fn default_prefix() -> String {
    "field".to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    replicas: Vec<String>,
}

/// A scalar kept as text, whether YAML typed it as a string or a number; parsed (with a
/// field path in the error) during resolution.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Text, E> {
                Ok(Text(v.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawPartitioning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawPartitioning;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`modulo` or `{ shift: BITS }`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
                match v {
                    "modulo" => Ok(RawPartitioning::Modulo),
                    other => Err(E::unknown_variant(other, &["modulo", "shift"])),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
                RawShift::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|s| RawPartitioning::Shift(s.shift))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawCells {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawCells;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list `[{ name, bytes }, ...]` or `{ count, bytes, prefix }`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
                Vec::<RawCell>::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(RawCells::List)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
                RawCellGen::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawCells::Generated)
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------------------
// Value parsers (problem text on error; the caller adds the field path)
// ---------------------------------------------------------------------------------------

/// Parses a byte size with the `bytesize` crate: a number of bytes (`123`), or a number and
/// a unit, binary (`KiB`, `MiB`, `GiB`, `TiB`) or decimal (`kB`, `MB`, `GB`, `TB`), in any
/// case and with an optional space (`16KiB`, `256 MiB`, `1.5GiB`). The one size parser of
/// the topology file and the command line.
///
/// # Errors
/// A negative size, text that is no size, or one that does not fit in 64 bits, as a problem
/// text (`invalid size `…`: …`).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let s = s.trim();
    let bad = |why: &str| {
        format!("invalid size `{s}`: {why}; write a number of bytes, or a number and a unit B, KiB, MiB, GiB, TiB (or kB, MB, GB, TB), e.g. 16MiB")
    };
    if s.starts_with('-') {
        return Err(bad("negative"));
    }
    match s.parse::<bytesize::ByteSize>() {
        // bytesize saturates on overflow.
        Ok(b) if b.as_u64() == u64::MAX => Err(bad("too large for 64 bits")),
        Ok(b) => Ok(b.as_u64()),
        Err(_) if s.is_empty() => Err(bad("empty")),
        Err(e) => Err(bad(&e)),
    }
}

/// Parses a duration with humantime (`40ms`, `1s 500ms`, `2m`, `1h`; a plain `0` is zero).
/// The one duration parser of the topology file and the command line.
///
/// # Errors
/// A negative duration, or text that is no duration, as a problem text (`invalid duration
/// `…`: …` with how to write one).
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let bad =
        |why: String| format!("invalid duration `{s}`: {why}; write a number and a unit, e.g. 30s, 500ms, 2m, 1h");
    if s.starts_with('-') {
        return Err(bad("negative: a duration is a length of time".into()));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| {
        bad(match e {
            humantime::DurationError::Empty => "empty".into(),
            humantime::DurationError::NumberExpected(_) | humantime::DurationError::InvalidCharacter(_) => {
                "not a number and a unit".into()
            }
            humantime::DurationError::UnknownUnit { unit, .. } if unit.is_empty() => "no unit".into(),
            humantime::DurationError::UnknownUnit { unit, .. } => {
                format!("unknown unit `{unit}` (units: ns, us, ms, s, m, h, d)")
            }
            humantime::DurationError::NumberOverflow => "too large".into(),
        })
    })
}

/// Parses a loss percentage (`0%`, `0.5%`, `100%`) into a fraction in `[0, 1]`.
///
/// # Errors
/// Text that is no percentage from 0% to 100%, as a problem text.
pub fn parse_loss(s: &str) -> std::result::Result<f64, String> {
    let s = s.trim();
    let bad = || format!("invalid loss `{s}`: expected a percentage from 0% to 100%, like `0.5%`");
    let num = s.strip_suffix('%').ok_or_else(bad)?.trim();
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let pct: f64 = num.parse().map_err(|_| bad())?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(bad());
    }
    Ok(pct / 100.0)
}

/// Parses a rate in bits per second: `unlimited`, a bare number (bit/s), or a number and
/// `tc`'s unit `bit`, `kbit`, `mbit`, `gbit`, `tbit` (decimal: `1kbit` = 1000 bit/s;
/// `kibit`, `mibit`, … binary), in any case; `None` is unlimited. The number and its prefix
/// are read by [`parse_size`]'s parser (`bytesize`), so sizes and rates agree.
///
/// # Errors
/// Text that is no rate, a rate below 1 bit/s, or one that does not fit in 64 bits, as a
/// problem text.
pub fn parse_rate(s: &str) -> std::result::Result<Option<u64>, String> {
    let s = s.trim();
    if s == "unlimited" {
        return Ok(None);
    }
    let bad = |why: &str| {
        format!("invalid rate `{s}`: {why}; write `unlimited`, or a number and a unit bit, kbit, mbit, gbit or tbit (bits per second, as tc), e.g. 100mbit")
    };
    if s.starts_with('-') {
        return Err(bad("negative"));
    }
    let lower = s.to_ascii_lowercase();
    let prefixed = lower.strip_suffix("bit").unwrap_or(&lower);
    let starts_number = prefixed.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    // After `bit` only an SI or IEC prefix may be left (no byte unit: `mb` is not a rate).
    let unit = prefixed.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').trim();
    let known = ["", "k", "m", "g", "t", "ki", "mi", "gi", "ti"].contains(&unit);
    if !starts_number || !known {
        return Err(bad("not a number and a unit"));
    }
    match prefixed.parse::<bytesize::ByteSize>() {
        Ok(b) if b.as_u64() == u64::MAX => Err(bad("too large for 64 bits")),
        Ok(b) if b.as_u64() == 0 => Err(bad("below 1 bit/s")),
        Ok(b) => Ok(Some(b.as_u64())),
        Err(e) => Err(bad(&e)),
    }
}

// ---------------------------------------------------------------------------------------
// Resolution and validation
// ---------------------------------------------------------------------------------------

impl Topology {
    /// Reads, parses and validates the topology file at `path`.
    ///
    /// The path (as displayed) is used as the file label in every error.
    ///
    /// # Errors
    /// [`ConfigError::Io`] if the file cannot be read; otherwise as [`Topology::from_yaml`].
    pub fn load(path: &Path) -> crate::Result<Topology> {
        use std::io::Read;
        let io = |error| ConfigError::Io { path: path.to_path_buf(), error };
        let label = path.display().to_string();
        let too_large = |bytes| ConfigError::TooLarge { file: label.clone(), bytes, max: MAX_TOPOLOGY_BYTES };
        let file = std::fs::File::open(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        if size > MAX_TOPOLOGY_BYTES as u64 {
            return Err(too_large(size));
        }
        // Not more than the bound even from a file that is not a regular one (a pipe, a
        // device) or that grows while read.
        let mut bytes = Vec::new();
        file.take(MAX_TOPOLOGY_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() > MAX_TOPOLOGY_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())))?;
        Topology::from_yaml(&label, &text)
    }

    /// Parses and validates a topology from YAML `text` (format: the module docs of
    /// `proto/src/config.rs` and the commented `configs/default.yaml`). `file_label` names
    /// the source in errors.
    ///
    /// DC and node ids are dense indices in file order (nodes numbered across DCs in
    /// order), partition ids are indices in `partitions`, and `links[from][to]` is filled
    /// from `links.default` and `links.overrides`.
    ///
    /// Before the YAML parser sees the text it is checked to be at most
    /// [`MAX_TOPOLOGY_BYTES`] (1 MiB) and nested at most [`MAX_TOPOLOGY_DEPTH`] (64) levels
    /// deep.
    ///
    /// # Errors
    /// [`ConfigError::TooLarge`] or [`ConfigError::TooDeep`] for a text over those bounds;
    /// [`ConfigError::Parse`] if the text is not YAML of the file's shape (including any
    /// unknown key); [`ConfigError::Invalid`] with the offending field's path for the first
    /// rule it breaks (a name is 1 to [`MAX_NAME_CHARS`] letters, digits, `.`, `_` and `-`,
    /// the first a letter or digit).
    pub fn from_yaml(file_label: &str, text: &str) -> crate::Result<Topology> {
        if text.len() > MAX_TOPOLOGY_BYTES {
            return Err(ConfigError::TooLarge {
                file: file_label.to_owned(),
                bytes: text.len() as u64,
                max: MAX_TOPOLOGY_BYTES,
            });
        }
        shape::check_depth(text, MAX_TOPOLOGY_DEPTH).map_err(|d| ConfigError::TooDeep {
            file: file_label.to_owned(),
            line: d.line,
            depth: d.depth,
            max: MAX_TOPOLOGY_DEPTH,
        })?;
        let raw: RawTopology = serde_norway::from_str(text)
            .map_err(|e| ConfigError::Parse { file: file_label.to_owned(), message: e.to_string() })?;
        Resolver { file: file_label }.resolve(raw)
    }
}

struct Resolver<'a> {
    file: &'a str,
}

/// Why `name` is no name of the topology file, as a problem text: a name is 1 to
/// [`MAX_NAME_CHARS`] characters, each an ASCII letter, a digit, `.`, `_` or `-`, the first a
/// letter or digit (names become file names, certificate names and metric labels). The text
/// shows the name escaped (at most its first [`MAX_NAME_CHARS`] characters) and the first
/// character refused with its position, from 1.
fn check_name(name: &str) -> std::result::Result<(), String> {
    let rule = || {
        format!(
            "a name is 1 to {MAX_NAME_CHARS} characters, each a letter (A-Z, a-z), a digit, `.`, `_` or `-`, \
             the first a letter or digit"
        )
    };
    let shown = || {
        let mut s: String = name.chars().take(MAX_NAME_CHARS).collect();
        if name.chars().nth(MAX_NAME_CHARS).is_some() {
            s.push('…');
        }
        format!("{s:?}")
    };
    let allowed = |i: usize, c: char| c.is_ascii_alphanumeric() || (i > 0 && matches!(c, '.' | '_' | '-'));
    if let Some((i, c)) = name.chars().enumerate().find(|&(i, c)| !allowed(i, c)) {
        return Err(format!("{} has the character {c:?} at position {}: {}", shown(), i + 1, rule()));
    }
    if name.len() > MAX_NAME_CHARS {
        return Err(format!("{} has {} characters: {}", shown(), name.len(), rule()));
    }
    Ok(())
}

type Res<T> = crate::Result<T>;

impl Resolver<'_> {
    fn invalid(&self, field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { file: self.file.to_owned(), field: field.into(), problem: problem.into() }
    }

    /// Maps a value parser's problem text to an `Invalid` error at `field`.
    fn at<T>(&self, field: impl Fn() -> String, r: std::result::Result<T, String>) -> Res<T> {
        r.map_err(|problem| self.invalid(field(), problem))
    }

    fn non_empty(&self, field: impl Fn() -> String, value: &str) -> Res<()> {
        if value.trim().is_empty() {
            return Err(self.invalid(field(), "must not be empty"));
        }
        Ok(())
    }

    /// Checks the name at `field`: not empty, and as [`check_name`] says.
    fn name(&self, field: impl Fn() -> String, value: &str) -> Res<()> {
        self.non_empty(&field, value)?;
        check_name(value).map_err(|problem| self.invalid(field(), problem))
    }

    fn resolve(&self, raw: RawTopology) -> Res<Topology> {
        self.name(|| "name".into(), &raw.name)?;
        if raw.epoch < 1 {
            return Err(self.invalid("epoch", "must be at least 1"));
        }
        let memstore = self.memstore(&raw.memstore)?;
        let (dcs, nodes) = self.dcs_and_nodes(&raw.dcs)?;
        let links = self.links(&raw.links, &dcs)?;
        let tables = self.tables(&raw.tables)?;
        let partitions = self.partitions(&raw.partitions, &nodes, &dcs)?;
        let timeouts = self.timeouts(&raw.timeouts)?;
        let verbs = self.verbs(&raw.verbs)?;
        let limits = self.limits(&raw.limits)?;
        let phase1 = timeouts.phase1_timeout.unwrap_or_else(|| crate::topology::default_phase1_timeout(&links));
        let limits = self.limits_for_phase1(limits, &raw.limits, phase1)?;
        let transport = self.transport(&raw.transport)?;
        let metrics = self.metrics(&raw.metrics, &dcs, &nodes)?;
        let grpc = self.grpc(&raw.grpc, &dcs, &nodes, &metrics)?;
        Ok(Topology {
            name: raw.name,
            epoch: Epoch(raw.epoch),
            dcs,
            nodes,
            memstore,
            tables,
            partitions,
            links,
            timeouts,
            verbs,
            limits,
            transport,
            metrics,
            grpc,
            durability: raw.durability,
        })
    }

    fn memstore(&self, raw: &RawMemStore) -> Res<MemStoreConfig> {
        let size = |field: &'static str, t: &Text| -> Res<u64> {
            let f = || format!("memstore.{field}");
            let v = self.at(f, parse_size(&t.0))?;
            if v % ALIGN != 0 {
                return Err(self.invalid(f(), format!("must be a multiple of 64 bytes, got {v}")));
            }
            Ok(v)
        };
        let size_bytes = size("size", &raw.size)?;
        let index_bytes = size("index", &raw.index)?;
        let ring_bytes = size("ring", &raw.ring)?;
        if index_bytes < MIN_INDEX_BYTES {
            return Err(self.invalid(
                "memstore.index",
                format!("must be at least {MIN_INDEX_BYTES} bytes (one bucket), got {index_bytes}"),
            ));
        }
        if ring_bytes < MIN_RING_BYTES {
            return Err(self.invalid(
                "memstore.ring",
                format!(
                    "must be at least {MIN_RING_BYTES} bytes (64-byte head/tail block + one 64-byte slot), \
                     got {ring_bytes}"
                ),
            ));
        }
        let config = MemStoreConfig { size_bytes, index_bytes, ring_bytes };
        let (log_bytes, absent_bytes) = (config.decision_log_bytes(), config.absent_lock_bytes());
        let promise_bytes = config.promise_table_bytes();
        let fixed = index_bytes
            .checked_add(ring_bytes)
            .and_then(|v| v.checked_add(SUPERBLOCK_BYTES))
            .and_then(|v| v.checked_add(log_bytes))
            .and_then(|v| v.checked_add(absent_bytes))
            .and_then(|v| v.checked_add(promise_bytes));
        match fixed {
            Some(fixed) if fixed < size_bytes => {}
            _ => {
                return Err(self.invalid(
                    "memstore.size",
                    format!(
                        "too small: index ({index_bytes}) + ring ({ring_bytes}) + decision log ({log_bytes}) + \
                         absent-key locks ({absent_bytes}) + promise table ({promise_bytes}) + superblock \
                         ({SUPERBLOCK_BYTES}) leaves no room for \
                         records in {size_bytes} bytes"
                    ),
                ))
            }
        }
        Ok(MemStoreConfig { size_bytes, index_bytes, ring_bytes })
    }

    fn dcs_and_nodes(&self, raw: &[RawDc]) -> Res<(Vec<Dc>, Vec<NodeEntry>)> {
        if raw.is_empty() {
            return Err(self.invalid("dcs", "at least one DC is required"));
        }
        let mut dcs: Vec<Dc> = Vec::with_capacity(raw.len());
        let mut nodes: Vec<NodeEntry> = Vec::new();
        // Where each node is, as `dcs[d].nodes[i]`, for the errors naming a second one.
        let mut at: Vec<String> = Vec::new();
        let mut dc_names: HashMap<&str, usize> = HashMap::new();
        let mut node_names: HashMap<&str, (usize, usize)> = HashMap::new();
        let mut advertised: HashMap<HostPort, (usize, usize)> = HashMap::new();
        for (d, rdc) in raw.iter().enumerate() {
            self.name(|| format!("dcs[{d}].name"), &rdc.name)?;
            if let Some(prev) = dc_names.insert(rdc.name.as_str(), d) {
                return Err(self.invalid(
                    format!("dcs[{d}].name"),
                    format!("duplicate DC name `{}` (also dcs[{prev}])", rdc.name),
                ));
            }
            let dc_id = DcId(u16::try_from(d).map_err(|_| self.invalid("dcs", "too many DCs (at most 65536)"))?);
            let backend = match &rdc.backend {
                Some(t) => self.at(|| format!("dcs[{d}].backend"), t.0.parse::<VerbsBackend>())?,
                None => VerbsBackend::default(),
            };
            if rdc.nodes.is_empty() {
                return Err(self.invalid(format!("dcs[{d}].nodes"), "a DC needs at least one node"));
            }
            let mut members = Vec::with_capacity(rdc.nodes.len());
            for (i, rn) in rdc.nodes.iter().enumerate() {
                let field = |leaf: &str| format!("dcs[{d}].nodes[{i}].{leaf}");
                self.name(|| field("name"), &rn.name)?;
                if let Some((pd, pi)) = node_names.insert(rn.name.as_str(), (d, i)) {
                    return Err(self.invalid(
                        field("name"),
                        format!("duplicate node name `{}` (also dcs[{pd}].nodes[{pi}])", rn.name),
                    ));
                }
                let (listen, advertise) = self.node_addresses(d, i, rn)?;
                let key = if rn.addr.is_some() { "addr" } else { "advertise" };
                if let Some((pd, pi)) = advertised.insert(advertise.clone(), (d, i)) {
                    let what = if key == "addr" { "address" } else { "advertise address" };
                    return Err(
                        self.invalid(field(key), format!("duplicate {what} {advertise} (also dcs[{pd}].nodes[{pi}])"))
                    );
                }
                let id = NodeId(
                    u16::try_from(nodes.len())
                        .map_err(|_| self.invalid(format!("dcs[{d}].nodes[{i}]"), "too many nodes (at most 65536)"))?,
                );
                let metrics = match &rn.metrics {
                    None => None,
                    Some(t) => Some(self.metrics_listen(&field("metrics"), t)?),
                };
                let grpc = match &rn.grpc {
                    None => None,
                    Some(t) => Some(self.metrics_listen(&field("grpc"), t)?),
                };
                let node = NodeEntry { id, name: rn.name.clone(), dc: dc_id, listen, advertise, metrics, grpc };
                // Two nodes of one host cannot bind one address (an unspecified IP takes
                // every address of its host at that port).
                let clash = nodes.iter().position(|o| {
                    o.same_host(&node)
                        && o.listen.port() == node.listen.port()
                        && (o.listen.ip() == node.listen.ip()
                            || o.listen.ip().is_unspecified()
                            || node.listen.ip().is_unspecified())
                });
                if let Some(o) = clash {
                    let key = if rn.addr.is_some() { "addr" } else { "listen" };
                    return Err(self.invalid(
                        field(key),
                        format!(
                            "{} and {} ({}) are on one host and would both bind {} and {}",
                            node.name, nodes[o].name, at[o], node.listen, nodes[o].listen
                        ),
                    ));
                }
                members.push(id);
                nodes.push(node);
                at.push(format!("dcs[{d}].nodes[{i}]"));
            }
            if backend == VerbsBackend::Shm {
                self.one_host(d, rdc, &nodes[nodes.len() - members.len()..])?;
            }
            dcs.push(Dc { id: dc_id, name: rdc.name.clone(), nodes: members, backend });
        }
        Ok((dcs, nodes))
    }

    /// The `listen` and `advertise` addresses of node `dcs[d].nodes[i]`: its `addr` for both,
    /// or its `listen` and `advertise` (either alone stands for both when it is an IP
    /// address that can be advertised).
    fn node_addresses(&self, d: usize, i: usize, rn: &RawNode) -> Res<(SocketAddr, HostPort)> {
        let field = |leaf: &str| format!("dcs[{d}].nodes[{i}].{leaf}");
        let ip_port = |leaf: &str, t: &Text, hint: &str| -> Res<SocketAddr> {
            let text = t.0.trim();
            text.parse().map_err(|e| {
                self.invalid(field(leaf), format!("invalid socket address `{text}` (expected IP:PORT{hint}): {e}"))
            })
        };
        let advertisable = |leaf: &str, a: &HostPort| -> Res<()> {
            match a.ip() {
                Some(ip) if ip.is_unspecified() => Err(self.invalid(
                    field(leaf),
                    format!(
                        "{ip} cannot be advertised (no peer can connect to it): give `listen: {a}` and \
                         `advertise: HOST:{}` with an address or name of this host its peers reach",
                        a.port
                    ),
                )),
                _ => Ok(()),
            }
        };
        match (&rn.addr, &rn.listen, &rn.advertise) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(self.invalid(
                field("addr"),
                "give either `addr` (one address to listen at and to be reached at) or `listen` and \
                 `advertise`, not both",
            )),
            (Some(addr), None, None) => {
                let addr = ip_port(
                    "addr",
                    addr,
                    "; for a host name give `listen: IP:PORT` and `advertise: NAME:PORT` instead",
                )?;
                let advertise = HostPort::from(addr);
                advertisable("addr", &advertise)?;
                Ok((addr, advertise))
            }
            (None, None, None) => Err(self.invalid(
                format!("dcs[{d}].nodes[{i}]"),
                "needs an address: `addr: IP:PORT`, or `listen: IP:PORT` and `advertise: HOST:PORT`",
            )),
            (None, listen, advertise) => {
                let advertise = match advertise {
                    Some(t) => Some(self.at(|| field("advertise"), t.0.parse::<HostPort>())?),
                    None => None,
                };
                let listen =
                    match listen {
                        Some(t) => ip_port("listen", t, "; a host name goes in `advertise`")?,
                        None => match advertise.as_ref().and_then(HostPort::socket_addr) {
                            Some(addr) => addr,
                            None => return Err(self.invalid(
                                field("listen"),
                                "is required when `advertise` is a host name: the IP:PORT to bind, e.g. `0.0.0.0:7100`",
                            )),
                        },
                    };
                let (advertise, leaf) = match advertise {
                    Some(a) => (a, "advertise"),
                    None => (HostPort::from(listen), "listen"),
                };
                advertisable(leaf, &advertise)?;
                Ok((listen, advertise))
            }
        }
    }

    /// Checks that the nodes of DC `dcs[d]` (backend `shm`) run on one host: their
    /// `advertise` hosts are all loopback, or all the same IP address or host name.
    fn one_host(&self, d: usize, rdc: &RawDc, nodes: &[NodeEntry]) -> Res<()> {
        let Some(first) = nodes.first() else { return Ok(()) };
        let Some(other) = nodes.iter().find(|n| !n.same_host(first)) else { return Ok(()) };
        let how = if rdc.backend.is_some() { "" } else { " (the default)" };
        Err(self.invalid(
            format!("dcs[{d}].backend"),
            format!(
                "backend `shm`{how} needs every node of {} on one host, but {} advertises {} and {} {}: \
                 nodes share a host when their advertise hosts are the same IP address or host name, or \
                 are all loopback; give the DC `backend: tcp` (or `rdma`) to run its nodes on several hosts",
                rdc.name, first.name, first.advertise.host, other.name, other.advertise.host
            ),
        ))
    }

    /// Parses one set of link parameters over `base`; `prefix` is the YAML path of the map.
    fn link_params(
        &self,
        prefix: &str,
        base: LinkConditions,
        rtt: &Option<Text>,
        jitter: &Option<Text>,
        loss: &Option<Text>,
        rate: &Option<Text>,
    ) -> Res<LinkConditions> {
        let mut c = base;
        if let Some(t) = rtt {
            c.rtt = self.at(|| format!("{prefix}.rtt"), parse_duration(&t.0))?;
        }
        if let Some(t) = jitter {
            c.jitter = self.at(|| format!("{prefix}.jitter"), parse_duration(&t.0))?;
        }
        if let Some(t) = loss {
            c.loss = self.at(|| format!("{prefix}.loss"), parse_loss(&t.0))?;
        }
        if let Some(t) = rate {
            c.rate_bits_per_s = self.at(|| format!("{prefix}.rate"), parse_rate(&t.0))?;
        }
        c.check().map_err(|e| self.invalid(format!("{prefix}.{}", e.key()), e.to_string()))?;
        Ok(c)
    }

    fn links(&self, raw: &RawLinks, dcs: &[Dc]) -> Res<Vec<Vec<LinkConditions>>> {
        let d = &raw.default;
        let default =
            self.link_params("links.default", LinkConditions::default(), &d.rtt, &d.jitter, &d.loss, &d.rate)?;
        let n = dcs.len();
        let mut links: Vec<Vec<LinkConditions>> = (0..n)
            .map(|from| (0..n).map(|to| if from == to { LinkConditions::default() } else { default }).collect())
            .collect();
        let dc_index = |name: &str| dcs.iter().position(|dc| dc.name == name);
        for (k, o) in raw.overrides.iter().enumerate() {
            let prefix = format!("links.overrides[{k}]");
            self.name(|| format!("{prefix}.from"), &o.from)?;
            self.name(|| format!("{prefix}.to"), &o.to)?;
            let from = dc_index(&o.from)
                .ok_or_else(|| self.invalid(format!("{prefix}.from"), format!("unknown DC `{}`", o.from)))?;
            let to = dc_index(&o.to)
                .ok_or_else(|| self.invalid(format!("{prefix}.to"), format!("unknown DC `{}`", o.to)))?;
            if from == to {
                return Err(self.invalid(format!("{prefix}.to"), format!("`from` and `to` are the same DC `{}`", o.to)));
            }
            let c = self.link_params(&prefix, default, &o.rtt, &o.jitter, &o.loss, &o.rate)?;
            links[from][to] = c;
            if o.symmetric {
                links[to][from] = c;
            }
        }
        Ok(links)
    }

    fn tables(&self, raw: &[RawTable]) -> Res<Vec<TableSchema>> {
        if raw.is_empty() {
            return Err(self.invalid("tables", "at least one table is required"));
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut ids: HashMap<u16, usize> = HashMap::new();
        let mut tables = Vec::with_capacity(raw.len());
        for (t, rt) in raw.iter().enumerate() {
            self.name(|| format!("tables[{t}].name"), &rt.name)?;
            if let Some(prev) = names.insert(rt.name.as_str(), t) {
                return Err(self.invalid(
                    format!("tables[{t}].name"),
                    format!("duplicate table name `{}` (also tables[{prev}])", rt.name),
                ));
            }
            if let Some(prev) = ids.insert(rt.id, t) {
                return Err(self.invalid(
                    format!("tables[{t}].id"),
                    format!("duplicate table id {} (also tables[{prev}])", rt.id),
                ));
            }
            let partitioning = match rt.partitioning {
                RawPartitioning::Modulo => Partitioning::Modulo,
                RawPartitioning::Shift(bits) => match u8::try_from(bits) {
                    Ok(b) if bits <= MAX_SHIFT_BITS => Partitioning::Shift { bits: b },
                    _ => {
                        return Err(self.invalid(
                            format!("tables[{t}].partitioning.shift"),
                            format!("shift must be at most {MAX_SHIFT_BITS} bits, got {bits}"),
                        ))
                    }
                },
            };
            let locking = match rt.locking {
                RawLocking::Cell => Locking::Cell,
                RawLocking::Record => Locking::Record,
            };
            let cells = self.cells(t, &rt.cells)?;
            tables.push(TableSchema {
                id: TableId(rt.id),
                name: rt.name.clone(),
                cells,
                locking,
                partitioning,
                ordered: rt.ordered_index,
            });
        }
        Ok(tables)
    }

    fn cell_bytes(&self, field: impl Fn() -> String, bytes: u64) -> Res<u32> {
        if !(1..=MAX_CELL_BYTES).contains(&bytes) {
            return Err(self.invalid(field(), format!("cell size must be 1 to {MAX_CELL_BYTES} bytes, got {bytes}")));
        }
        u32::try_from(bytes).map_err(|_| self.invalid(field(), "cell size does not fit 32 bits"))
    }

    fn cells(&self, t: usize, raw: &RawCells) -> Res<Vec<CellSchema>> {
        let count_problem = |n: u64| format!("a table needs 1 to {MAX_CELLS} cells, got {n}");
        match raw {
            RawCells::List(list) => {
                if list.is_empty() || list.len() > MAX_CELLS {
                    return Err(self.invalid(format!("tables[{t}].cells"), count_problem(list.len() as u64)));
                }
                let mut names: HashMap<&str, usize> = HashMap::new();
                let mut cells = Vec::with_capacity(list.len());
                for (c, rc) in list.iter().enumerate() {
                    let field = |leaf: &str| format!("tables[{t}].cells[{c}].{leaf}");
                    self.name(|| field("name"), &rc.name)?;
                    if let Some(prev) = names.insert(rc.name.as_str(), c) {
                        return Err(self.invalid(
                            field("name"),
                            format!("duplicate cell name `{}` (also tables[{t}].cells[{prev}])", rc.name),
                        ));
                    }
                    let bytes = self.cell_bytes(|| field("bytes"), rc.bytes)?;
                    cells.push(CellSchema { name: rc.name.clone(), bytes });
                }
                Ok(cells)
            }
            RawCells::Generated(g) => {
                if g.count < 1 || g.count > MAX_CELLS as u64 {
                    return Err(self.invalid(format!("tables[{t}].cells.count"), count_problem(g.count)));
                }
                self.name(|| format!("tables[{t}].cells.prefix"), &g.prefix)?;
                let longest = g.prefix.len() + (g.count - 1).to_string().len();
                if longest > MAX_NAME_CHARS {
                    return Err(self.invalid(
                        format!("tables[{t}].cells.prefix"),
                        format!(
                            "makes cell names of up to {longest} characters ({}{}), over the {MAX_NAME_CHARS} a name may have",
                            g.prefix,
                            g.count - 1
                        ),
                    ));
                }
                let bytes = self.cell_bytes(|| format!("tables[{t}].cells.bytes"), g.bytes)?;
                Ok((0..g.count).map(|i| CellSchema { name: format!("{}{i}", g.prefix), bytes }).collect())
            }
        }
    }

    fn partitions(&self, raw: &[RawPartition], nodes: &[NodeEntry], dcs: &[Dc]) -> Res<Vec<Partition>> {
        if raw.is_empty() {
            return Err(self.invalid("partitions", "at least one partition is required"));
        }
        let by_name: HashMap<&str, &NodeEntry> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let mut partitions = Vec::with_capacity(raw.len());
        for (p, rp) in raw.iter().enumerate() {
            let field = format!("partitions[{p}].replicas");
            if rp.replicas.is_empty() {
                return Err(self.invalid(field, "a partition needs at least one replica"));
            }
            let mut replicas: Vec<NodeId> = Vec::with_capacity(rp.replicas.len());
            for (r, name) in rp.replicas.iter().enumerate() {
                self.name(|| format!("{field}[{r}]"), name)?;
                let node = by_name
                    .get(name.as_str())
                    .ok_or_else(|| self.invalid(format!("{field}[{r}]"), format!("unknown node `{name}`")))?;
                if replicas.contains(&node.id) {
                    return Err(self.invalid(field, format!("node `{name}` listed twice")));
                }
                if replicas.iter().any(|&other| nodes[other.0 as usize].dc == node.dc) {
                    let dc_name = &dcs[node.dc.0 as usize].name;
                    return Err(self.invalid(field, format!("two replicas in {dc_name}")));
                }
                replicas.push(node.id);
            }
            if let Some(first) = raw.first() {
                if first.replicas.len() != rp.replicas.len() {
                    return Err(self.invalid(
                        field,
                        format!(
                            "has {} replicas but partitions[0] has {}; every partition needs the same replica count",
                            rp.replicas.len(),
                            first.replicas.len()
                        ),
                    ));
                }
            }
            let id = PartitionId(u32::try_from(p).map_err(|_| self.invalid("partitions", "too many partitions"))?);
            partitions.push(Partition { id, replicas, learners: Vec::new() });
        }
        Ok(partitions)
    }
}

mod grpc;
mod limits;
mod metrics;
mod shape;
mod timeouts;
mod transport;
mod verbs;

#[cfg(test)]
mod tests;
