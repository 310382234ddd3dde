//! A node's gRPC endpoint: a TCP listener, TLS 1.3 with a client certificate of the cluster
//! CA required (the configuration the node's QUIC side uses, with ALPN `h2`), the caps of
//! the topology's `transport:` section, and three services: `redt.v1.Transactions`
//! ([`TransactionsService`]), `grpc.health.v1.Health`, and server reflection (v1 and
//! v1alpha), so stock tools such as `grpcurl` list and call the API.

use crate::service::TransactionsService;
use redt_api::v1::transactions_server::TransactionsServer;
use redt_proto::QuicConfig;
use redt_transport::{NodeIdentity, TransportError};
use rustls::ServerConfig;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

/// The ALPN protocol gRPC runs over: HTTP/2.
const H2_ALPN: &[u8] = b"h2";

/// How long a connection may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections handshaking at once, before they hold one of `transport.max_connections`.
const ACCEPT_QUEUE: usize = 64;

/// What can go wrong starting an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The address cannot be listened on.
    #[error("the gRPC endpoint cannot listen at {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// rustls refuses the node's certificate chain, key or CA.
    #[error("the gRPC endpoint's TLS: {0}")]
    Tls(#[from] TransportError),
}

/// An endpoint's TLS: the node's certificate and key, a client certificate of the cluster CA
/// required, ALPN `h2`. Cloning is cheap and clones share it: [`GrpcTls::rotate`] on one
/// changes what every clone (the [`GrpcServer`] given one) uses for its next connection.
#[derive(Clone)]
pub struct GrpcTls {
    config: Arc<RwLock<Arc<ServerConfig>>>,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls").finish_non_exhaustive()
    }
}

impl GrpcTls {
    /// The TLS of an endpoint presenting `identity` (the node's certificate chain and key,
    /// its cluster CA as the clients' trust anchor).
    ///
    /// # Errors
    /// [`GrpcError::Tls`] if rustls refuses the chain, the key or the CA.
    pub fn new(identity: &NodeIdentity) -> Result<GrpcTls, GrpcError> {
        Ok(GrpcTls { config: Arc::new(RwLock::new(Arc::new(server_config(identity)?))) })
    }

    /// Presents `identity` on every connection accepted from now on (a certificate rotated
    /// without a restart); open connections keep theirs.
    ///
    /// # Errors
    /// As [`GrpcTls::new`]; the current certificate stays then.
    pub fn rotate(&self, identity: &NodeIdentity) -> Result<(), GrpcError> {
        let new = Arc::new(server_config(identity)?);
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = new;
        Ok(())
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().unwrap_or_else(PoisonError::into_inner).clone())
    }
}

/// A running gRPC endpoint; [`GrpcServer::shutdown`] stops it (dropping it does too).
pub struct GrpcServer {
    local_addr: SocketAddr,
    stop: Arc<Notify>,
    accept: JoinHandle<()>,
    serve: JoinHandle<()>,
}

impl GrpcServer {
    /// Serves `service` at `addr` (port 0: one the OS picks) with the TLS `tls`, with the
    /// caps of `limits` (`transport:`): `max_connections` open connections,
    /// `max_connections_per_peer` from one IP address (one more is closed as soon as it is
    /// accepted), `max_streams_per_connection` concurrent calls on one connection (HTTP/2
    /// `MAX_CONCURRENT_STREAMS`), the stream and connection receive windows, and
    /// `max_message_bytes` per request message. Must run inside a Tokio runtime.
    ///
    /// # Errors
    /// [`GrpcError::Bind`] if `addr` cannot be listened on.
    pub async fn spawn(
        addr: SocketAddr,
        tls: GrpcTls,
        service: TransactionsService,
        limits: &QuicConfig,
        max_message_bytes: usize,
    ) -> Result<GrpcServer, GrpcError> {
        let listener = TcpListener::bind(addr).await.map_err(|source| GrpcError::Bind { addr, source })?;
        let local_addr = listener.local_addr().map_err(|source| GrpcError::Bind { addr, source })?;
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        let caps = Caps::new(limits);
        let accept = tokio::spawn(accept_loop(listener, tls, caps, tx));

        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<TransactionsServer<TransactionsService>>().await;
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(redt_api::v1::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_v1 = reflection().build_v1().map_err(reflection_error)?;
        let reflection_v1alpha = reflection().build_v1alpha().map_err(reflection_error)?;
        let window = |b: u64| u32::try_from(b).unwrap_or(u32::MAX);
        let router = tonic::transport::Server::builder()
            .max_concurrent_streams(u32::try_from(limits.max_streams_per_connection).unwrap_or(u32::MAX))
            .initial_stream_window_size(window(limits.stream_receive_window_bytes))
            .initial_connection_window_size(window(limits.connection_receive_window_bytes))
            .add_service(
                TransactionsServer::new(service)
                    .max_decoding_message_size(max_message_bytes)
                    .max_encoding_message_size(max_message_bytes),
            )
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);
        let stop = Arc::new(Notify::new());
        let stopped = stop.clone();
        let incoming = tokio_stream::wrappers::ReceiverStream::new(rx);
        let serve = tokio::spawn(async move {
            if let Err(e) = router.serve_with_incoming_shutdown(incoming, stopped.notified()).await {
                tracing::error!(error = %e, "the gRPC endpoint stopped");
            }
        });
        Ok(GrpcServer { local_addr, stop, accept, serve })
    }

    /// The address the endpoint listens at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting and closes the endpoint (calls in flight are cut).
    pub fn shutdown(&self) {
        self.accept.abort();
        self.stop.notify_one();
        self.serve.abort();
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn reflection_error(e: tonic_reflection::server::Error) -> GrpcError {
    GrpcError::Tls(TransportError::TlsConfig(format!("gRPC reflection: {e}")))
}

/// The node's QUIC server configuration (TLS 1.3, ring, a client certificate of the
/// cluster CA required) with ALPN `h2`.
fn server_config(identity: &NodeIdentity) -> Result<ServerConfig, GrpcError> {
    let mut config = redt_transport::tls::rustls_server_config(identity)?;
    config.alpn_protocols = vec![H2_ALPN.to_vec()];
    Ok(config)
}

/// The connection caps of `transport:`: every connection holds one of `max_connections`
/// permits and counts against its IP address until it closes.
#[derive(Clone)]
struct Caps {
    total: Arc<Semaphore>,
    per_peer: Arc<Mutex<HashMap<IpAddr, u64>>>,
    max_per_peer: u64,
}

impl Caps {
    fn new(limits: &QuicConfig) -> Caps {
        let total = usize::try_from(limits.max_connections).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        Caps {
            total: Arc::new(Semaphore::new(total)),
            per_peer: Arc::new(Mutex::new(HashMap::new())),
            max_per_peer: limits.max_connections_per_peer,
        }
    }

    /// A place for a connection from `ip`, or which cap refuses it.
    fn admit(&self, ip: IpAddr) -> Result<Place, &'static str> {
        let permit = self.total.clone().try_acquire_owned().map_err(|_| "transport.max_connections")?;
        let mut peers = self.per_peer.lock().unwrap_or_else(PoisonError::into_inner);
        let n = peers.entry(ip).or_insert(0);
        if *n >= self.max_per_peer {
            return Err("transport.max_connections_per_peer");
        }
        *n += 1;
        Ok(Place { _permit: permit, ip, per_peer: self.per_peer.clone() })
    }
}

/// A connection's place under the caps, given back when it is dropped.
struct Place {
    _permit: OwnedSemaphorePermit,
    ip: IpAddr,
    per_peer: Arc<Mutex<HashMap<IpAddr, u64>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut peers = self.per_peer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = peers.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                peers.remove(&self.ip);
            }
        }
    }
}

/// Accepts connections, refuses those over a cap, and hands the ones whose handshake
/// succeeds to the server.
async fn accept_loop(listener: TcpListener, tls: GrpcTls, caps: Caps, tx: mpsc::Sender<Result<Conn, io::Error>>) {
    let refused = redt_transport::WarnEvery::new(Duration::from_secs(10));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors and the like: wait, then accept again.
                tracing::warn!(error = %e, "the gRPC endpoint could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let place = match caps.admit(peer.ip()) {
            Ok(p) => p,
            Err(cap) => {
                if let Some(unlogged) = refused.handle_event(std::time::Instant::now()) {
                    tracing::warn!(peer = %peer, unlogged, "gRPC connection refused: over {cap}");
                }
                drop(tcp);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = tls.acceptor();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send(Ok(Conn { stream, _place: place })).await;
                }
                Ok(Err(e)) => tracing::debug!(peer = %peer, error = %e, "gRPC TLS handshake failed"),
                Err(_) => tracing::debug!(peer = %peer, "gRPC TLS handshake timed out"),
            }
        });
    }
}

/// An accepted TLS connection and its place under the caps.
struct Conn {
    stream: TlsStream<TcpStream>,
    _place: Place,
}

impl Connected for Conn {
    type ConnectInfo = TlsConnectInfo<TcpConnectInfo>;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_transport::ClusterCa;
    use std::net::Ipv4Addr;

    #[test]
    fn the_tls_asks_for_h2_and_a_client_certificate_and_rotates_only_to_a_usable_identity() {
        let ca = ClusterCa::generate("t").expect("a CA");
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let a = ca.issue_node("dc1-n1", "dc1", ip).expect("a node certificate");
        let b = ca.issue_node("dc1-n1", "dc1", ip).expect("another");
        let tls = GrpcTls::new(&a).expect("usable");
        let before = tls.acceptor();
        assert_eq!(before.config().alpn_protocols, vec![H2_ALPN.to_vec()]);
        let mismatched = NodeIdentity { key: b.key.clone_key(), ..a.clone() };
        assert!(GrpcTls::new(&mismatched).is_err());
        assert!(tls.rotate(&mismatched).is_err());
        assert!(Arc::ptr_eq(before.config(), tls.acceptor().config()), "a refused rotation keeps the current one");
        tls.rotate(&b).expect("rotated");
        assert!(!Arc::ptr_eq(before.config(), tls.acceptor().config()), "new connections get the new one");
    }

    #[test]
    fn caps_count_connections_and_give_them_back() {
        let limits = QuicConfig { max_connections: 3, max_connections_per_peer: 2, ..QuicConfig::default() };
        let caps = Caps::new(&limits);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let p1 = caps.admit(a).expect("first");
        let p2 = caps.admit(a).expect("second");
        assert_eq!(caps.admit(a).err(), Some("transport.max_connections_per_peer"));
        let p3 = caps.admit(b).expect("another peer");
        assert_eq!(caps.admit(b).err(), Some("transport.max_connections"));
        drop(p1);
        let p4 = caps.admit(a).expect("a place given back");
        drop((p2, p3, p4));
        assert!(caps.per_peer.lock().expect("lock").is_empty());
        assert_eq!(caps.total.available_permits(), 3);
    }
}
