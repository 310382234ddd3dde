//! [`Transport`]: the endpoint, the connection cache and the calling side of an RPC.

use super::admission::{Admission, WarnEvery};
use super::counters::TransportCounters;
use super::error::{Result, TransportError};
use super::frame::{self, ReadFailure, StreamCode};
use super::links::{self, Links};
use super::peers::PeerDirectory;
use super::shared::Shared;
use super::tls::{self, NodeIdentity};
use super::{server, Caller, Handler, SocketSpec, TransportConfig};
use quinn::{ConnectError, Connection, ConnectionError, Endpoint, EndpointConfig, RecvStream, SendStream, VarInt};
use redt_proto::wire::Envelope;
use redt_proto::{HostPort, NodeId, Topology};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tower::timeout::Timeout;
use tower::{BoxError, Service, ServiceExt};
use tracing::debug;

/// Connection close code used by [`Transport::close`].
const CLOSE_NORMAL: u32 = 0;

/// At most one warning of each kind (refused connection, cancelled handler, reset write) per
/// this interval; the ones held back are counted in the next.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// Where a call goes: an address (a host name is resolved when a connection is made) and
/// the TLS server name to expect there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Target {
    addr: HostPort,
    name: String,
}

impl Target {
    /// `name@addr`, as errors and logs name the peer.
    fn label(&self) -> String {
        format!("{}@{}", self.name, self.addr)
    }
}

/// One request through the tower stack.
struct RpcRequest {
    target: Target,
    /// The node called, when called by id (its traffic is counted per peer).
    peer: Option<NodeId>,
    msg: Envelope,
}

/// A cached connection slot: the live connection, or the handshake under way.
type ConnSlot = Arc<Mutex<Slot>>;

/// The outcome of a handshake, as every caller waiting for it sees it.
type Handshake = Option<std::result::Result<Connection, Arc<TransportError>>>;

/// What a [`ConnSlot`] holds.
#[derive(Debug, Default)]
struct Slot {
    /// The cached connection (it may have died since; checked on use).
    conn: Option<Connection>,
    /// The handshake under way, run by its own task and shared by every caller: a caller
    /// whose deadline passes stops waiting but leaves the handshake running for the others.
    /// (When each caller ran the handshake itself, callers queued behind a peer's restart
    /// reached it with less time left than a handshake takes at 200 ms RTT, gave up, and
    /// aborted every handshake in turn: the restarted peer was never reached again.)
    connecting: Option<tokio::sync::watch::Receiver<Handshake>>,
    /// Whether the peer is down as far as the log knows, so a dead peer is logged once.
    health: PeerHealth,
}

/// What the log has said about one peer: a lost connection or a failed handshake is logged
/// at WARN once, on the change from reachable (or never tried) to down; the next successful
/// handshake at INFO, once. A peer that stays down logs nothing more, however many calls
/// fail.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct PeerHealth {
    down: bool,
}

impl PeerHealth {
    /// Records a failure; returns `true` when it is the first since the peer was last
    /// reachable (log it).
    fn failed(&mut self) -> bool {
        !std::mem::replace(&mut self.down, true)
    }

    /// Records a successful handshake; returns `true` when the peer was down (log it).
    fn reached(&mut self) -> bool {
        std::mem::replace(&mut self.down, false)
    }
}

/// One QUIC endpoint of a node (server and client) or of a non-node client (client only).
///
/// Cheap to clone (all clones share the endpoint, connections and counters). Dropping the
/// last clone closes the endpoint like [`Transport::close`].
///
/// Connections are opened lazily on the first call to a peer, cached per (address, server
/// name), and opened again after they fail. Each call is one bidirectional stream. A call
/// first takes one of [`TransportConfig::max_in_flight`] slots shared by the whole transport,
/// waiting at most [`TransportConfig::call_slot_timeout`], then runs under a tower
/// [`Timeout`] of its deadline.
#[derive(Clone, Debug)]
pub struct Transport {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cfg: TransportConfig,
    endpoint: Endpoint,
    /// The configuration of new outgoing connections (replaced by [`Transport::set_identity`]).
    client_config: std::sync::RwLock<quinn::ClientConfig>,
    /// The QUIC transport parameters every configuration carries.
    quic: Arc<quinn::TransportConfig>,
    shared: Arc<Shared>,
    conns: Mutex<HashMap<Target, ConnSlot>>,
    in_flight: Arc<Semaphore>,
    runtime: tokio::runtime::Handle,
    server_task: Mutex<Option<JoinHandle<()>>>,
    serves: bool,
    closed: AtomicBool,
}

impl Transport {
    /// Builds the endpoint of a node: it accepts connections (once [`Transport::serve`] is
    /// called) from holders of a certificate of `identity`'s CA, and calls the nodes of
    /// `topology` by `NodeId` at their `addr`, expecting their `name` as TLS server name.
    ///
    /// Must be called inside a Tokio runtime; the endpoint's tasks run on it.
    ///
    /// # Errors
    ///
    /// [`TransportError::TlsConfig`] if `identity`'s certificate is valid for no node of
    /// `topology`, or `identity` is unusable;
    /// [`TransportError::NoRuntime`] outside a Tokio runtime;
    /// [`TransportError::InvalidConfig`] for an unusable `cfg`;
    /// [`TransportError::Io`] if the socket cannot be bound.
    pub fn bind(
        cfg: TransportConfig,
        topology: &Topology,
        identity: &NodeIdentity,
        socket: SocketSpec,
    ) -> Result<Transport> {
        let cert =
            identity.cert_chain.first().ok_or_else(|| TransportError::TlsConfig("empty certificate chain".into()))?;
        if tls::certificate_name(cert, topology.nodes.iter().map(|n| n.name.as_str())).is_none() {
            return Err(TransportError::TlsConfig(format!(
                "the certificate of identity {:?} is valid for no node of topology {:?}",
                identity.name, topology.name
            )));
        }
        Transport::build(cfg, Some(topology), identity, socket, true)
    }

    /// Builds a client-only endpoint (the `redt client` CLI): it never accepts connections,
    /// calls with [`Transport::call_addr`], or by `NodeId` once given a topology with
    /// [`Transport::update_topology`].
    ///
    /// Must be called inside a Tokio runtime; the endpoint's tasks run on it.
    ///
    /// # Errors
    ///
    /// As [`Transport::bind`], except that any identity from the CA is accepted.
    pub fn client(cfg: TransportConfig, identity: &NodeIdentity, socket: SocketSpec) -> Result<Transport> {
        Transport::build(cfg, None, identity, socket, false)
    }

    fn build(
        cfg: TransportConfig,
        topology: Option<&Topology>,
        identity: &NodeIdentity,
        socket: SocketSpec,
        serves: bool,
    ) -> Result<Transport> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| TransportError::NoRuntime)?;
        let quic = Arc::new(quic_transport_config(&cfg)?);
        let server_config = if serves {
            let mut server_config = tls::quic_server_config(identity)?;
            server_config.transport_config(quic.clone());
            Some(server_config)
        } else {
            None
        };
        let mut client_config = tls::quic_client_config(identity)?;
        client_config.transport_config(quic.clone());
        let quinn_runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
        let socket = match socket {
            SocketSpec::Bind(addr) => quinn_runtime.wrap_udp_socket(std::net::UdpSocket::bind(addr)?)?,
            SocketSpec::Custom(socket) => socket,
        };
        let endpoint =
            Endpoint::new_with_abstract_socket(EndpointConfig::default(), server_config, socket, quinn_runtime)?;
        let shared = Arc::new(Shared {
            counters: TransportCounters::with_peers(topology.map_or(0, |t| t.nodes.len())),
            links: Arc::new(Links::new(topology.map_or(0, |t| t.nodes.len()))),
            peers: PeerDirectory::new(topology),
            max_frame_bytes: cfg.max_frame_bytes,
            request_timeout: cfg.call_timeout,
            handler_timeout: cfg.handler_timeout,
            write_timeout: cfg.write_timeout,
            admission: Admission::new(cfg.max_connections, cfg.max_connections_per_peer),
            refusal_warnings: WarnEvery::new(WARN_EVERY),
            handler_warnings: WarnEvery::new(WARN_EVERY),
            write_warnings: WarnEvery::new(WARN_EVERY),
        });
        let in_flight = Arc::new(Semaphore::new(cfg.max_in_flight));
        Ok(Transport {
            inner: Arc::new(Inner {
                cfg,
                endpoint,
                client_config: std::sync::RwLock::new(client_config),
                quic,
                shared,
                conns: Mutex::new(HashMap::new()),
                in_flight,
                runtime,
                server_task: Mutex::new(None),
                serves,
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Replaces the certificate, key and CA certificate this endpoint presents and trusts with
    /// `identity` (certificate rotation): connections set up from now on, both ways,
    /// use it; connections already set up go on with what they were set up with until they
    /// close. The caller checks `identity` first ([`tls::check_identity`]).
    ///
    /// # Errors
    ///
    /// [`TransportError::TlsConfig`] if rustls refuses the material (nothing is replaced then).
    pub fn set_identity(&self, identity: &NodeIdentity) -> Result<()> {
        let inner = &self.inner;
        let mut client_config = tls::quic_client_config(identity)?;
        client_config.transport_config(inner.quic.clone());
        if inner.serves {
            let mut server_config = tls::quic_server_config(identity)?;
            server_config.transport_config(inner.quic.clone());
            inner.endpoint.set_server_config(Some(server_config));
        }
        *inner.client_config.write().unwrap_or_else(PoisonError::into_inner) = client_config;
        Ok(())
    }

    /// Starts serving: spawns the accept loop, which authenticates every incoming connection
    /// (a handshake that fails, e.g. a certificate not from the cluster CA, is logged and
    /// counted in `refused_handshakes`), and for every bidirectional stream reads one request
    /// frame, calls `handler` with the caller's identity and writes its response frame. A
    /// malformed or oversized request frame gets no response: the stream is stopped and reset
    /// with a [`StreamCode`], counted, and the connection keeps serving.
    ///
    /// # Errors
    ///
    /// [`TransportError::Serve`] on a client-only transport or if already serving;
    /// [`TransportError::Closed`] after [`Transport::close`].
    pub fn serve(&self, handler: Arc<dyn Handler>) -> Result<()> {
        let inner = &self.inner;
        if !inner.serves {
            return Err(TransportError::Serve("a client-only transport does not accept connections"));
        }
        let mut task = inner.server_task.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.closed.load(Ordering::Acquire) {
            return Err(TransportError::Closed);
        }
        if task.is_some() {
            return Err(TransportError::Serve("already serving"));
        }
        let accept = server::accept_loop(inner.endpoint.clone(), inner.shared.clone(), handler);
        *task = Some(inner.runtime.spawn(accept));
        Ok(())
    }

    /// Sends `msg` to node `peer` and returns its response, within
    /// [`TransportConfig::call_timeout`] (see [`Transport::call_with_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`Transport::call_with_timeout`].
    pub async fn call(&self, peer: NodeId, msg: Envelope) -> Result<Envelope> {
        self.call_with_timeout(peer, msg, self.inner.cfg.call_timeout).await
    }

    /// Sends `msg` to node `peer` and returns its response, which must arrive within
    /// `deadline` of the call taking an in-flight slot (waiting for a slot is not counted; it
    /// lasts at most [`TransportConfig::call_slot_timeout`]).
    /// A call that fails may or may not have been delivered and served; the transport never
    /// retries one after its request was written.
    ///
    /// # Errors
    ///
    /// - [`TransportError::UnknownPeer`]: `peer` is not in the topology.
    /// - [`TransportError::Timeout`]: no response within `deadline`.
    /// - [`TransportError::NoCallSlot`]: no in-flight slot within the slot timeout (counted);
    ///   nothing was sent.
    /// - [`TransportError::PeerOverLimit`]: the peer refused the connection for being over one
    ///   of its connection caps.
    /// - [`TransportError::Connect`], [`TransportError::Tls`]: no connection could be set up.
    /// - [`TransportError::ConnectionLost`]: the connection broke during the call.
    /// - [`TransportError::Refused`]: the peer stopped or reset the stream.
    /// - [`TransportError::Frame`]: `msg` is over the size limit, or the response is
    ///   malformed (counted).
    /// - [`TransportError::Closed`]: the transport was closed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future abandons the call: its stream is reset with
    /// [`StreamCode::Cancelled`].
    pub async fn call_with_timeout(&self, peer: NodeId, msg: Envelope, deadline: Duration) -> Result<Envelope> {
        let (addr, name) = self.inner.shared.peers.lookup(peer)?;
        self.dispatch(Target { addr, name }, Some(peer), msg, deadline).await
    }

    /// As [`Transport::call_addr`], at `addr`: an IP socket address, or a host name and port
    /// that is resolved (the system resolver, in a blocking task) whenever a new connection
    /// to it is made, so a name that moves is followed at the next connection.
    ///
    /// # Errors
    /// As [`Transport::call_addr`]; a name that does not resolve, or resolves to addresses of
    /// the other IP family than the endpoint's only, is [`TransportError::Connect`] saying
    /// so.
    pub async fn call_at(&self, addr: &HostPort, server_name: &str, msg: Envelope) -> Result<Envelope> {
        let target = Target { addr: addr.clone(), name: server_name.to_string() };
        self.dispatch(target, None, msg, self.inner.cfg.call_timeout).await
    }

    /// Sends `msg` to whatever listens at `addr`, expecting a certificate from the cluster CA
    /// valid for `server_name` (a node name), and returns the response, within
    /// [`TransportConfig::call_timeout`]. This is how a non-node client reaches a node.
    ///
    /// # Errors
    ///
    /// As [`Transport::call_with_timeout`], except `UnknownPeer`.
    pub async fn call_addr(&self, addr: SocketAddr, server_name: &str, msg: Envelope) -> Result<Envelope> {
        let target = Target { addr: addr.into(), name: server_name.to_string() };
        self.dispatch(target, None, msg, self.inner.cfg.call_timeout).await
    }

    async fn dispatch(
        &self,
        target: Target,
        peer: Option<NodeId>,
        msg: Envelope,
        deadline: Duration,
    ) -> Result<Envelope> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(TransportError::Closed);
        }
        let wait = self.inner.cfg.call_slot_timeout;
        let slot = match tokio::time::timeout(wait, self.inner.in_flight.clone().acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            // The semaphore is never closed.
            Ok(Err(_)) => return Err(TransportError::Closed),
            Err(_) => {
                let counters = &self.inner.shared.counters;
                TransportCounters::add(&counters.call_slot_timeouts, 1);
                return Err(TransportError::NoCallSlot { waited: wait, max: self.inner.cfg.max_in_flight });
            }
        };
        let service = Timeout::new(RpcService(self.inner.clone()), deadline);
        let result = service.oneshot(RpcRequest { target, peer, msg }).await.map_err(|e| classify(e, deadline));
        drop(slot);
        result
    }

    /// The local address of the endpoint's socket (the port chosen for a bind to port 0).
    ///
    /// # Errors
    ///
    /// [`TransportError::Io`] if the socket cannot tell.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.inner.endpoint.local_addr()?)
    }

    /// The transport's counters.
    pub fn counters(&self) -> &TransportCounters {
        &self.inner.shared.counters
    }

    /// When something last arrived from node `peer`: a request or a response frame, or a
    /// heartbeat datagram (evidence that it is alive); `None` if nothing has yet.
    pub fn heard_at(&self, peer: NodeId) -> Option<std::time::Instant> {
        self.inner.shared.links.heard_at(peer)
    }

    /// When a frame or heartbeat was last written to node `peer`; `None` if none has been.
    pub fn sent_at(&self, peer: NodeId) -> Option<std::time::Instant> {
        self.inner.shared.links.sent_at(peer)
    }

    /// Sends node `peer` one heartbeat: a QUIC datagram ([`super::HEARTBEAT`]) on the newest
    /// live connection with it, in either direction. With none, sets one up in the background
    /// (at most one attempt per peer at a time) and sends the heartbeat once it is up. Never
    /// waits, never fails: a heartbeat that cannot be sent is a lost heartbeat, which the
    /// failure detector tolerates.
    pub fn send_heartbeat(&self, peer: NodeId) {
        let inner = &self.inner;
        let links = &inner.shared.links;
        if inner.closed.load(Ordering::Acquire) || inner.shared.send_heartbeat(peer) || !links.start_connecting(peer) {
            return;
        }
        let Ok((addr, name)) = inner.shared.peers.lookup(peer) else {
            links.connected(peer);
            return;
        };
        let this = inner.clone();
        inner.runtime.spawn(async move {
            let target = Target { addr, name };
            let label = target.label();
            if this.connection(&target, &label).await.is_ok() {
                this.shared.send_heartbeat(peer);
            }
            this.shared.links.connected(peer);
        });
    }

    /// The round-trip time QUIC measures (its smoothed estimate) on each live connection this
    /// transport opened to a node of its topology, by `NodeId`, ascending; nodes it has no
    /// live connection to are left out. Connections peers opened to it are not included.
    pub fn peer_rtts(&self) -> Vec<(NodeId, Duration)> {
        let slots: Vec<(Target, ConnSlot)> = {
            let conns = self.inner.conns.lock().unwrap_or_else(PoisonError::into_inner);
            conns.iter().map(|(t, s)| (t.clone(), s.clone())).collect()
        };
        let mut rtts: Vec<(NodeId, Duration)> = slots
            .into_iter()
            .filter_map(|(target, slot)| {
                let id = self.inner.shared.peers.id_at(&target.addr, &target.name)?;
                let s = slot.lock().unwrap_or_else(PoisonError::into_inner);
                let conn = s.conn.as_ref().filter(|c| c.close_reason().is_none())?;
                Some((id, conn.rtt()))
            })
            .collect();
        rtts.sort_by_key(|(id, _)| *id);
        rtts
    }

    /// The configuration the transport was built with.
    pub fn config(&self) -> &TransportConfig {
        &self.inner.cfg
    }

    /// Sets the address at which node `peer` is called (e.g. once a peer bound to port 0
    /// knows its port). Existing connections to the old address are left to idle out.
    ///
    /// # Errors
    ///
    /// [`TransportError::UnknownPeer`] if `peer` is not in the topology.
    pub fn set_peer_addr(&self, peer: NodeId, addr: SocketAddr) -> Result<()> {
        self.inner.shared.peers.set_addr(peer, addr)
    }

    /// Who presented `cert`, a client certificate another server of this node verified
    /// against the cluster CA (the gRPC front end's): the caller its QUIC requests would be
    /// served as, by the identity URI it carries and this transport's peer directory.
    pub fn identify(&self, cert: &rustls_pki_types::CertificateDer<'_>) -> Caller {
        self.inner.shared.peers.identify(cert)
    }

    /// Replaces the peer directory with `topology`'s nodes (names, addresses, and the
    /// certificate names that identify callers).
    pub fn update_topology(&self, topology: &Topology) {
        self.inner.shared.peers.replace(topology);
    }

    /// Closes the endpoint: stops accepting, closes every connection (calls in flight fail
    /// with [`TransportError::Closed`] or `ConnectionLost`), and refuses further calls.
    /// Idempotent. Use [`Transport::wait_idle`] to wait until peers were told.
    pub fn close(&self) {
        self.inner.shutdown();
    }

    /// Waits until every connection of the endpoint is fully closed (after
    /// [`Transport::close`]).
    pub async fn wait_idle(&self) {
        self.inner.endpoint.wait_idle().await;
    }
}

impl Inner {
    fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(task) = self.server_task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
        self.endpoint.close(VarInt::from_u32(CLOSE_NORMAL), b"transport closed");
    }

    /// One call: open a stream, write the request frame, finish, read the response frame.
    async fn rpc(&self, req: RpcRequest) -> Result<Envelope> {
        let RpcRequest { target, peer: id, msg } = req;
        let peer = target.label();
        let counters = &self.shared.counters;
        let request = frame::encode_frame(&msg, self.cfg.max_frame_bytes)?;
        let (send, recv) = self.open_stream(&target, &peer).await?;
        let mut call = CallStreams { send, recv, done: false };
        frame::write_frame(&mut call.send, &request).await.map_err(|e| write_error(&peer, e))?;
        // Finishing fails only if the peer already stopped the stream; the read reports it.
        let _ = call.send.finish();
        TransportCounters::add(&counters.rpcs_sent, 1);
        TransportCounters::add(&counters.bytes_sent, request.len() as u64);
        if let Some(id) = id {
            counters.sent_to(id, request.len());
            self.shared.links.sent(id);
        }
        let result = frame::read_frame(&mut call.recv, self.cfg.max_frame_bytes).await;
        call.done = true;
        match result {
            Ok((reply, bytes)) => {
                TransportCounters::add(&counters.bytes_received, bytes as u64);
                if let Some(id) = id {
                    counters.received_from(id, bytes);
                    self.shared.links.heard(id);
                }
                Ok(reply)
            }
            Err(ReadFailure::Frame(e)) => {
                let counter = match e {
                    frame::FrameError::Oversized { .. } => &counters.oversized_frames,
                    _ => &counters.malformed_frames,
                };
                TransportCounters::add(counter, 1);
                let _ = call.recv.stop(StreamCode::for_frame_error(&e).var_int());
                tracing::warn!(%peer, error = %e, "refused a response frame");
                Err(e.into())
            }
            Err(ReadFailure::Stream(e)) => Err(read_error(&peer, e)),
        }
    }

    /// Opens a stream to `target`, reconnecting once if the cached connection turns out dead.
    async fn open_stream(&self, target: &Target, peer: &str) -> Result<(SendStream, RecvStream)> {
        let (conn, fresh) = self.connection(target, peer).await?;
        match conn.open_bi().await {
            Ok(streams) => Ok(streams),
            Err(e) if !fresh => {
                // Nothing was sent yet, so trying a new connection is safe.
                debug!(%peer, error = %e, "cached connection is dead; reconnecting");
                let (conn, _) = self.connection(target, peer).await?;
                conn.open_bi().await.map_err(|e| connection_error(peer, &e, false))
            }
            Err(e) => Err(connection_error(peer, &e, false)),
        }
    }

    /// Returns the cached live connection to `target`, or a new one (`true` if new): it joins
    /// the handshake under way, or starts one in its own task.
    async fn connection(&self, target: &Target, peer: &str) -> Result<(Connection, bool)> {
        let slot = {
            let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
            conns.entry(target.clone()).or_default().clone()
        };
        let live = {
            let s = slot.lock().unwrap_or_else(PoisonError::into_inner);
            s.conn.as_ref().filter(|c| c.close_reason().is_none()).cloned()
        };
        if let Some(conn) = live {
            return Ok((conn, false));
        }
        // No live connection: a host name is resolved for the new one (outside the lock).
        let to = match self.resolve(target).await {
            Ok(to) => to,
            Err(why) => {
                let failed = slot.lock().unwrap_or_else(PoisonError::into_inner).health.failed();
                if failed {
                    tracing::warn!(%peer, error = %why, "peer's address does not resolve");
                }
                return Err(TransportError::Connect { peer: peer.to_string(), why });
            }
        };
        let mut handshake = {
            let mut s = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(conn) = s.conn.as_ref().filter(|c| c.close_reason().is_none()) {
                return Ok((conn.clone(), false));
            }
            if let Some(why) = s.conn.take().and_then(|c| c.close_reason()) {
                if !matches!(why, ConnectionError::LocallyClosed) && s.health.failed() {
                    tracing::warn!(%peer, error = %why, "connection to peer lost; reconnecting");
                }
            }
            match &s.connecting {
                Some(handshake) => handshake.clone(),
                None => {
                    if self.closed.load(Ordering::Acquire) {
                        return Err(TransportError::Closed);
                    }
                    let connecting = self
                        .endpoint
                        .connect_with(
                            self.client_config.read().unwrap_or_else(PoisonError::into_inner).clone(),
                            to,
                            &target.name,
                        )
                        .map_err(|e| match e {
                            ConnectError::EndpointStopping => TransportError::Closed,
                            e => TransportError::Connect { peer: peer.to_string(), why: e.to_string() },
                        })?;
                    let (tx, rx) = tokio::sync::watch::channel(None);
                    s.connecting = Some(rx.clone());
                    let (slot, peer) = (slot.clone(), peer.to_string());
                    let node = self.shared.peers.id_at(&target.addr, &target.name);
                    let links = self.shared.links.clone();
                    let counting = self.shared.clone();
                    self.runtime.spawn(async move {
                        let result = connecting.await.map_err(|e| Arc::new(connection_error(&peer, &e, true)));
                        if let (Ok(conn), Some(id)) = (&result, node) {
                            links.add(id, conn.clone());
                            let count = move || counting.counters.received_from(id, links::HEARTBEAT.len());
                            tokio::spawn(links::read_heartbeats(links.clone(), id, conn.clone(), count));
                        }
                        let changed = {
                            let mut s = slot.lock().unwrap_or_else(PoisonError::into_inner);
                            s.connecting = None;
                            s.conn = result.as_ref().ok().cloned();
                            match &result {
                                Ok(_) => s.health.reached(),
                                Err(e) => !matches!(**e, TransportError::Closed) && s.health.failed(),
                            }
                        };
                        match &result {
                            Ok(_) if changed => tracing::info!(%peer, "peer reachable again"),
                            Ok(_) => debug!(%peer, "connected"),
                            Err(e) if changed => {
                                tracing::warn!(%peer, error = %e, "peer unreachable or refused the connection")
                            }
                            Err(e) => debug!(%peer, error = %e, "handshake failed"),
                        }
                        let _ = tx.send(Some(result));
                    });
                    rx
                }
            }
        };
        let outcome = match handshake.wait_for(Option::is_some).await {
            Ok(done) => done.clone(),
            // The handshake's task is gone without an answer: the runtime is shutting down.
            Err(_) => return Err(TransportError::Closed),
        };
        match outcome {
            Some(Ok(conn)) => Ok((conn, true)),
            Some(Err(e)) => Err(same_error(&e)),
            None => Err(TransportError::Closed),
        }
    }
}

impl Inner {
    /// The socket address to connect to for `target`: its IP address, or what its host name
    /// resolves to (of the endpoint's family), looked up in a blocking task.
    async fn resolve(&self, target: &Target) -> std::result::Result<SocketAddr, String> {
        if let Some(addr) = target.addr.socket_addr() {
            return Ok(addr);
        }
        let local = self.endpoint.local_addr().map_err(|e| format!("the endpoint has no local address: {e}"))?;
        let addr = target.addr.clone();
        match tokio::task::spawn_blocking(move || addr.resolve_for(local)).await {
            Ok(resolved) => resolved.map_err(|e| e.to_string()),
            Err(e) => Err(format!("the name lookup did not finish: {e}")),
        }
    }
}

/// A copy of a handshake's error for one of the callers that waited for it (the errors a
/// handshake yields: [`connection_error`] with `connecting`).
fn same_error(e: &TransportError) -> TransportError {
    match e {
        TransportError::Closed => TransportError::Closed,
        TransportError::Tls { peer, why } => TransportError::Tls { peer: peer.clone(), why: why.clone() },
        TransportError::Connect { peer, why } => TransportError::Connect { peer: peer.clone(), why: why.clone() },
        TransportError::ConnectionLost { peer, why } => {
            TransportError::ConnectionLost { peer: peer.clone(), why: why.clone() }
        }
        TransportError::PeerOverLimit { peer, why } => {
            TransportError::PeerOverLimit { peer: peer.clone(), why: why.clone() }
        }
        other => TransportError::Connect { peer: String::new(), why: other.to_string() },
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The streams of one call; resets them if the call is dropped before its response.
struct CallStreams {
    send: SendStream,
    recv: RecvStream,
    done: bool,
}

impl Drop for CallStreams {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.send.reset(StreamCode::Cancelled.var_int());
            let _ = self.recv.stop(StreamCode::Cancelled.var_int());
        }
    }
}

/// The innermost tower service: one RPC.
#[derive(Clone)]
struct RpcService(Arc<Inner>);

impl Service<RpcRequest> for RpcService {
    type Response = Envelope;
    type Error = TransportError;
    type Future = super::BoxFuture<'static, Result<Envelope>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RpcRequest) -> Self::Future {
        let inner = self.0.clone();
        Box::pin(async move { inner.rpc(req).await })
    }
}

/// Turns an error out of the tower stack back into a [`TransportError`].
fn classify(err: BoxError, deadline: Duration) -> TransportError {
    if err.is::<tower::timeout::error::Elapsed>() {
        return TransportError::Timeout { after: deadline };
    }
    match err.downcast::<TransportError>() {
        Ok(e) => *e,
        Err(e) => TransportError::Internal(e.to_string()),
    }
}

/// Whether a QUIC transport error code is a TLS alert (`CRYPTO_ERROR`, 0x100..=0x1ff).
fn is_crypto(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

/// Maps a connection error; `connecting` tells whether the handshake was under way.
fn connection_error(peer: &str, e: &ConnectionError, connecting: bool) -> TransportError {
    let peer = peer.to_string();
    let why = e.to_string();
    match e {
        ConnectionError::LocallyClosed => TransportError::Closed,
        ConnectionError::ApplicationClosed(close) if close.error_code == VarInt::from_u32(server::CLOSE_OVER_LIMIT) => {
            TransportError::PeerOverLimit { peer, why: String::from_utf8_lossy(&close.reason).into_owned() }
        }
        ConnectionError::ConnectionClosed(close)
            if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED =>
        {
            TransportError::PeerOverLimit {
                peer,
                why: "over its cap of connections (transport.max_connections or transport.max_connections_per_peer)"
                    .into(),
            }
        }
        ConnectionError::TransportError(te) if is_crypto(te.code) => TransportError::Tls { peer, why },
        ConnectionError::ConnectionClosed(close) if is_crypto(close.error_code) => TransportError::Tls { peer, why },
        _ if connecting => TransportError::Connect { peer, why },
        _ => TransportError::ConnectionLost { peer, why },
    }
}

fn read_error(peer: &str, e: quinn::ReadError) -> TransportError {
    match e {
        quinn::ReadError::Reset(code) => TransportError::Refused { peer: peer.to_string(), code: code.into_inner() },
        quinn::ReadError::ConnectionLost(e) => connection_error(peer, &e, false),
        e => TransportError::ConnectionLost { peer: peer.to_string(), why: e.to_string() },
    }
}

fn write_error(peer: &str, e: quinn::WriteError) -> TransportError {
    match e {
        quinn::WriteError::Stopped(code) => TransportError::Refused { peer: peer.to_string(), code: code.into_inner() },
        quinn::WriteError::ConnectionLost(e) => connection_error(peer, &e, false),
        e => TransportError::ConnectionLost { peer: peer.to_string(), why: e.to_string() },
    }
}

/// Returns quinn's transport parameters for `cfg`.
fn quic_transport_config(cfg: &TransportConfig) -> Result<quinn::TransportConfig> {
    let invalid = |why: String| TransportError::InvalidConfig(why);
    if cfg.max_in_flight == 0 || cfg.max_in_flight > Semaphore::MAX_PERMITS {
        return Err(invalid(format!("max_in_flight must be in 1..={}", Semaphore::MAX_PERMITS)));
    }
    if cfg.call_timeout.is_zero() {
        return Err(invalid("call_timeout must be positive".into()));
    }
    if cfg.max_connections == 0 || cfg.max_connections_per_peer == 0 || cfg.max_concurrent_streams == 0 {
        return Err(invalid(
            "max_connections, max_connections_per_peer and max_concurrent_streams must be positive".into(),
        ));
    }
    let window = |name: &str, v: u64| {
        VarInt::from_u64(v).map_err(|_| invalid(format!("{name} of {v} bytes does not fit a QUIC integer")))
    };
    let stream_window = window("stream_receive_window_bytes", cfg.stream_receive_window_bytes)?;
    let connection_window = window("connection_receive_window_bytes", cfg.connection_receive_window_bytes)?;
    if cfg.keep_alive_interval.is_zero() || cfg.keep_alive_interval >= cfg.idle_timeout {
        return Err(invalid(format!(
            "keep_alive_interval ({:?}) must be positive and below idle_timeout ({:?})",
            cfg.keep_alive_interval, cfg.idle_timeout
        )));
    }
    let idle = quinn::IdleTimeout::try_from(cfg.idle_timeout)
        .map_err(|_| invalid(format!("idle_timeout {:?} is too large", cfg.idle_timeout)))?;
    let mut quic = quinn::TransportConfig::default();
    quic.max_concurrent_bidi_streams(VarInt::from_u32(cfg.max_concurrent_streams))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .stream_receive_window(stream_window)
        .receive_window(connection_window)
        .max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(cfg.keep_alive_interval))
        .datagram_receive_buffer_size(Some(links::DATAGRAM_BUFFER_BYTES));
    Ok(quic)
}

#[cfg(test)]
mod tests {
    use super::PeerHealth;

    #[test]
    fn a_dead_peer_is_logged_once_and_its_return_once() {
        let mut h = PeerHealth::default();
        assert!(h.failed(), "the first failure is logged");
        assert!(!h.failed() && !h.failed(), "repeated failures are not");
        assert!(h.reached(), "coming back is logged");
        assert!(!h.reached(), "staying up is not");
        assert!(h.failed(), "a new failure after success is logged again");
    }
}
