//! The transport's error type.

use super::frame::FrameError;
use redt_proto::NodeId;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias of the transport module.
pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// Everything that can go wrong in the transport, its certificates and its calls.
///
/// `peer` fields name the far end as `name@addr`.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No response arrived within the call's deadline (the request may or may not have been
    /// delivered and served).
    #[error("call timed out after {after:?}")]
    Timeout {
        /// The deadline that elapsed.
        after: Duration,
    },
    /// No QUIC connection to the peer could be set up (unreachable, bad address, handshake
    /// failure other than TLS).
    #[error("cannot connect to {peer}: {why}")]
    Connect {
        /// The peer, `name@addr`.
        peer: String,
        /// What failed.
        why: String,
    },
    /// The TLS handshake failed: a certificate not from the cluster CA on either side, a
    /// server name that does not match, or no common ALPN. The connection is not used.
    #[error("TLS handshake with {peer} failed: {why}")]
    Tls {
        /// The peer, `name@addr`.
        peer: String,
        /// The TLS alert or error.
        why: String,
    },
    /// A local TLS configuration could not be built from an identity (bad key, bad CA).
    #[error("bad TLS configuration: {0}")]
    TlsConfig(String),
    /// Certificate or key generation failed (rcgen), or a name is not a valid DNS name.
    #[error("certificate generation failed: {0}")]
    CertGen(String),
    /// A certificate or key file does not exist.
    #[error("certificate file {} is missing", path.display())]
    MissingCertFile {
        /// The missing file.
        path: PathBuf,
    },
    /// A certificate or key file could not be read, written or parsed.
    #[error("certificate file {}: {why}", path.display())]
    CertFile {
        /// The file.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// A frame was over the size limit, truncated or undecodable (ours to send or theirs
    /// received).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The connection broke during a call (idle timeout, peer closed or restarted).
    #[error("connection to {peer} lost: {why}")]
    ConnectionLost {
        /// The peer, `name@addr`.
        peer: String,
        /// The QUIC connection error.
        why: String,
    },
    /// The peer stopped or reset the RPC stream with an application error code (see
    /// [`super::StreamCode`]), e.g. because our request frame was malformed.
    #[error("{peer} refused the request (stream error code {code})")]
    Refused {
        /// The peer, `name@addr`.
        peer: String,
        /// The QUIC application error code.
        code: u64,
    },
    /// The call got no in-flight slot within `transport.call_slot_timeout`: `max` calls of
    /// this transport were in flight (`transport.max_calls_in_flight`). Nothing was sent.
    #[error(
        "no call slot within {waited:?}: {max} calls in flight, at most {max} (transport.max_calls_in_flight, \
         transport.call_slot_timeout)"
    )]
    NoCallSlot {
        /// How long the call waited.
        waited: Duration,
        /// The cap on calls in flight.
        max: usize,
    },
    /// The peer refused the connection for being over one of its caps
    /// (`transport.max_connections` or `transport.max_connections_per_peer`); `why` is its
    /// reason, which names the cap, when it gave one.
    #[error("{peer} refused the connection: {why}")]
    PeerOverLimit {
        /// The peer, `name@addr`.
        peer: String,
        /// The peer's reason.
        why: String,
    },
    /// This transport was closed with [`super::Transport::close`].
    #[error("transport is closed")]
    Closed,
    /// The node is not in this transport's topology.
    #[error("{0} is not in the topology")]
    UnknownPeer(NodeId),
    /// [`super::Transport::serve`] was called twice, or on a client-only transport.
    #[error("cannot serve: {0}")]
    Serve(&'static str),
    /// A [`super::TransportConfig`] value is out of range.
    #[error("invalid transport configuration: {0}")]
    InvalidConfig(String),
    /// An error the transport did not expect from a lower layer (a bug if seen).
    #[error("internal transport error: {0}")]
    Internal(String),
    /// The transport was built outside a Tokio runtime.
    #[error("the transport needs a Tokio runtime (build it inside one)")]
    NoRuntime,
    /// The UDP socket could not be bound or used.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}
