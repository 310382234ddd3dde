//! QUIC transport between nodes (docs/design.md §4): one `quinn` endpoint per node, TLS 1.3 with
//! mutual certificates from a cluster CA, one bidirectional stream per RPC carrying one
//! length-prefixed [`Envelope`] each way.
//!
//! This module owns the wire below the protocol: certificates ([`tls`]), framing
//! ([`frame`]), connections, the per-call deadline and the in-flight limit (tower layers),
//! and the accept loop that hands each request to a [`Handler`]. It does not look inside an
//! [`Envelope`]: epochs, message kinds and retries of non-idempotent requests are the
//! protocol's business. WAN conditions come from the socket it is given (the netem wrapper
//! is one [`SocketSpec::Custom`]).
//!
//! # Shape of one RPC
//!
//! The caller opens a bidirectional stream, writes one request frame and finishes its send
//! side; the server reads that frame, calls the [`Handler`], writes one response frame and
//! finishes. A frame is a `u32` little-endian length followed by the prost-encoded
//! [`Envelope`] (see [`frame`]). A frame over the size limit, a truncated frame or one that
//! does not decode stops and resets that stream with a [`StreamCode`] and nothing else: the
//! connection and the node keep serving.

mod admission;
pub use admission::WarnEvery;
mod counters;
mod error;
pub mod frame;
mod links;
mod peers;
mod reload;
mod rpc;
mod server;
mod shared;
pub mod tls;
pub mod x509;

use redt_proto::wire::Envelope;
use redt_proto::{NodeId, QuicConfig};
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use counters::{CountersSnapshot, PeerTraffic, TransportCounters};
pub use error::{Result, TransportError};
pub use frame::{FrameError, StreamCode, DEFAULT_MAX_FRAME_BYTES};
pub use links::HEARTBEAT;
pub use reload::IdentityWatch;
pub use rpc::Transport;
pub use server::current_connection;
pub use tls::{
    check_identity, default_ca_key_path, find_ca_key, init_cluster_certs, init_cluster_certs_with, load_identity,
    node_ip, verbs_tls, ClusterCa, ClusterCerts, NodeIdentity, Role, Validity, WrittenCert, ALPN, CLIENT_IDENTITY_NAME,
    OPERATOR_IDENTITY_NAME,
};
pub use x509::CertSummary;

/// A boxed, `Send` future borrowing from `'a` (the shape [`Handler::handle`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Tunables of a [`Transport`]. [`TransportConfig::default`] gives the values below; the
/// caps, windows and deadlines come from the topology file's `transport:` section through
/// [`TransportConfig::from_config`] (defaults: [`QuicConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportConfig {
    /// Deadline of one call, from the moment it holds an in-flight slot until its response
    /// frame is read (connecting included). Default 5 s. The server also gives up reading a
    /// request frame after this long.
    pub call_timeout: Duration,
    /// Calls in flight per transport, over all peers (at least 1); further calls wait for a
    /// slot, at most [`TransportConfig::call_slot_timeout`] (`transport.max_calls_in_flight`,
    /// default 1,024).
    pub max_in_flight: usize,
    /// How long a call waits for an in-flight slot before it fails with
    /// [`TransportError::NoCallSlot`] (`transport.call_slot_timeout`, default 5 s).
    pub call_slot_timeout: Duration,
    /// Largest frame body accepted or sent, in bytes (the 4-byte prefix excluded).
    /// Default [`DEFAULT_MAX_FRAME_BYTES`] (16 MiB).
    pub max_frame_bytes: u32,
    /// Bidirectional streams (= RPCs) a peer may have open at once on one connection to this
    /// endpoint; more wait in the peer's `open_bi` (`transport.max_streams_per_connection`,
    /// default 256).
    pub max_concurrent_streams: u32,
    /// Bytes a peer may send on one stream ahead of what this endpoint has read
    /// (`transport.stream_receive_window`, default 1 MiB).
    pub stream_receive_window_bytes: u64,
    /// Bytes a peer may send on all streams of one connection ahead of what this endpoint has
    /// read (`transport.connection_receive_window`, default 16 MiB).
    pub connection_receive_window_bytes: u64,
    /// Incoming connections open at once, all peers together, those in their handshake
    /// included; one more is refused (`transport.max_connections`, default 1,024).
    pub max_connections: usize,
    /// Incoming connections open at once from one peer IP address
    /// (`transport.max_connections_per_peer`, default 64).
    pub max_connections_per_peer: usize,
    /// How long the server works on one request; past it the handler is cancelled and the
    /// caller answered by [`Handler::timed_out`] (`transport.handler_timeout`, default 30 s).
    pub handler_timeout: Duration,
    /// How long writing one response may take; past it that stream alone is reset with
    /// [`StreamCode::WriteTimeout`] (`transport.write_timeout`, default 10 s).
    pub write_timeout: Duration,
    /// A connection with no traffic for this long is closed. Default 3 s: a peer killed
    /// without closing its connections (kill -9, a lost host) answers no keep-alive, so its
    /// connections die within this and the next call reconnects, to the restarted process if
    /// there is one (its new endpoint cannot reset the old connections).
    pub idle_timeout: Duration,
    /// Keep-alive interval on open connections (must be below `idle_timeout`). Default 1 s.
    pub keep_alive_interval: Duration,
}

impl TransportConfig {
    /// The defaults with the caps, windows and deadlines of a topology file's `transport:`
    /// section (already range-checked by the file's loader).
    pub fn from_config(q: &QuicConfig) -> TransportConfig {
        // The loader caps every count far below usize::MAX and u32::MAX.
        let count = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        TransportConfig {
            max_in_flight: count(q.max_calls_in_flight),
            call_slot_timeout: q.call_slot_timeout,
            max_concurrent_streams: u32::try_from(q.max_streams_per_connection).unwrap_or(u32::MAX),
            stream_receive_window_bytes: q.stream_receive_window_bytes,
            connection_receive_window_bytes: q.connection_receive_window_bytes,
            max_connections: count(q.max_connections),
            max_connections_per_peer: count(q.max_connections_per_peer),
            handler_timeout: q.handler_timeout,
            write_timeout: q.write_timeout,
            call_timeout: Duration::from_secs(5),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            idle_timeout: Duration::from_secs(3),
            keep_alive_interval: Duration::from_secs(1),
        }
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig::from_config(&QuicConfig::default())
    }
}

/// The UDP socket a [`Transport`] runs on.
#[derive(Clone)]
pub enum SocketSpec {
    /// Bind a plain UDP socket to this address (port 0 picks a free port; see
    /// [`Transport::local_addr`]).
    Bind(SocketAddr),
    /// Use this socket, e.g. the netem wrapper that applies WAN conditions per destination.
    Custom(Arc<dyn quinn::AsyncUdpSocket>),
}

impl fmt::Debug for SocketSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketSpec::Bind(addr) => f.debug_tuple("Bind").field(addr).finish(),
            SocketSpec::Custom(socket) => f.debug_tuple("Custom").field(socket).finish(),
        }
    }
}

/// Who sent a request, as proven by the TLS client certificate (issued by the cluster CA):
/// the role its identity URI names ([`redt_proto::CertIdentity`]) and, for a client
/// or an operator, which identity it is ([`Principal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    /// A node of the topology: the certificate carries `redt://node/<dc>/<node>` of that node
    /// (or, a certificate from before identities, no identity and that node's DNS name).
    Node(NodeId),
    /// A certificate carrying `redt://client/<name>`, e.g. the `redt client` CLI
    /// ([`CLIENT_IDENTITY_NAME`]), or one that names no node and has no usable identity:
    /// transactions and plain status only.
    Client(Principal),
    /// A certificate carrying `redt://operator/<name>` ([`OPERATOR_IDENTITY_NAME`]): a client
    /// that may also send admin requests (`redt netem set`, drills) and costly ones (a status
    /// that counts locks).
    Operator(Principal),
}

/// Which client or operator identity sent a request: a 128-bit fingerprint (the first 16
/// bytes of a SHA-256) of its certificate's identity URI (`redt://client/alice`), or, for a
/// certificate without one, of the whole certificate (DER). Two certificates for the same
/// identity URI (a rotated one) are the same principal; any two different URIs differ. A node
/// uses it to tell its clients apart (a reserved transaction id serves only the principal that
/// reserved it: `redt_coordinator::ReservedIds`); it is not sent anywhere.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal([u8; 16]);

impl Principal {
    /// The principal of the identity URI `uri` (as [`redt_proto::CertIdentity::to_uri`]
    /// writes it).
    pub fn of_identity(uri: &str) -> Principal {
        Principal::digest(b"identity\0", uri.as_bytes())
    }

    /// The principal of a certificate that carries no identity URI: its DER bytes.
    pub fn of_certificate(der: &[u8]) -> Principal {
        Principal::digest(b"certificate\0", der)
    }

    fn digest(kind: &[u8], bytes: &[u8]) -> Principal {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(kind);
        ctx.update(bytes);
        let mut fp = [0u8; 16];
        fp.copy_from_slice(&ctx.finish().as_ref()[..16]);
        Principal(fp)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal(")?;
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "…)")
    }
}

impl Caller {
    /// The calling node, or `None` for a client or an operator.
    pub fn node(self) -> Option<NodeId> {
        match self {
            Caller::Node(id) => Some(id),
            Caller::Client(_) | Caller::Operator(_) => None,
        }
    }

    /// The caller's role as identity URIs name it: `node`, `client` or `operator`.
    pub fn role(self) -> &'static str {
        match self {
            Caller::Node(_) => "node",
            Caller::Client(_) => "client",
            Caller::Operator(_) => "operator",
        }
    }

    /// Whether the caller has the operator role.
    pub fn is_operator(self) -> bool {
        matches!(self, Caller::Operator(_))
    }

    /// The caller's share of the executors' bulk lane (`redt_protocol::executor_queue::Lane::Bulk`):
    /// one per client or operator identity (the first 8 bytes of its [`Principal`]'s digest),
    /// one per node (its id, with the top bit set); never 0, the nodes' own background work.
    pub fn share(self) -> u64 {
        match self {
            Caller::Node(id) => (1 << 63) | u64::from(id.0),
            Caller::Client(p) | Caller::Operator(p) => {
                let mut first = [0u8; 8];
                first.copy_from_slice(&p.0[..8]);
                (u64::from_le_bytes(first) & !(1 << 63)).max(1)
            }
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Node(id) => id.fmt(f),
            Caller::Client(_) => f.write_str("client"),
            Caller::Operator(_) => f.write_str("operator"),
        }
    }
}

/// Serves requests: one call per request frame received by [`Transport::serve`].
///
/// The returned envelope is the response; a request the handler refuses is answered with a
/// `Body::Error(ErrorReply)` envelope, never by dropping it. The transport does not check
/// epochs or message kinds.
pub trait Handler: Send + Sync + 'static {
    /// Returns the response to `msg`, sent by `from`.
    fn handle(&self, from: Caller, msg: Envelope) -> BoxFuture<'_, Envelope>;

    /// Returns the response to a request from `from` whose [`Handler::handle`] did not finish
    /// within `after` (the transport's `handler_timeout`) and was cancelled. By default an
    /// `ErrorReply` with code [`redt_proto::error_code::TIMEOUT`] naming the limit, from node 0 at
    /// epoch 0 (a node overrides it with its own).
    fn timed_out(&self, from: Caller, after: Duration) -> Envelope {
        let _ = from;
        handler_timeout_reply(0, 0, after)
    }
}

/// The error answer to a request whose handler was cancelled after `after`
/// (`transport.handler_timeout`), from node `from` at epoch `epoch`.
pub fn handler_timeout_reply(epoch: u32, from: u32, after: Duration) -> Envelope {
    use redt_proto::wire::{Body, ErrorReply};
    let message = format!(
        "the request was not served within {} (transport.handler_timeout); its work was cancelled",
        humantime::format_duration(after)
    );
    Envelope {
        epoch,
        from,
        body: Some(Body::Error(ErrorReply { code: redt_proto::error_code::TIMEOUT, message, current_epoch: epoch })),
    }
}

/// A [`Handler`] made from an async closure; see [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F>(F);

/// Returns a [`Handler`] that calls `f(from, msg)` for every request.
///
/// # Examples
///
/// ```
/// use redt_transport::{handler_fn, Caller, Handler};
/// use redt_proto::wire::Envelope;
/// use std::sync::Arc;
///
/// let echo: Arc<dyn Handler> = Arc::new(handler_fn(|_from: Caller, msg: Envelope| async move { msg }));
/// ```
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(Caller, Envelope) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Envelope> + Send + 'static,
{
    HandlerFn(f)
}

impl<F, Fut> Handler for HandlerFn<F>
where
    F: Fn(Caller, Envelope) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Envelope> + Send + 'static,
{
    fn handle(&self, from: Caller, msg: Envelope) -> BoxFuture<'_, Envelope> {
        Box::pin((self.0)(from, msg))
    }
}
