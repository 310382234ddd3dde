//! The TCP server of one node's region: accepts connections, authenticates them (TLS with the
//! cluster CA, same-DC node certificates only) and executes the doorbell batches its peers
//! send (the two-sided half of the `redt-tcp` baseline, RedT §6.5).

use super::wire::{
    decode_request, encode_reply, encode_status, read_frame, reply_bytes, Frame, Malformed, MAX_FRAME_BYTES,
};
use crate::error::{Error, Result};
use crate::tls::{handshake_step, send_nonblocking, HandshakeStep, TlsStream, VerbsTls};
use crate::{Completion, DoorbellBatch, LocalVerbs, Verbs};
use redt_proto::{NodeId, VerbsConfig};
use rustls::Connection;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a [`TcpVerbsServer`] tolerates from the connections it accepts. Every field has a
/// key in the topology file's `verbs:` section ([`ServerLimits::from_config`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Most connections open at once, all peers together, those still in their handshake
    /// included (`verbs.max_connections`, default 1,024). One more is refused before its
    /// handshake with a status naming the cap, and closed.
    pub max_connections: usize,
    /// Most connections open at once from one peer IP address, those still in their
    /// handshake included (`verbs.max_connections_per_peer`, default 64). Refused as above.
    pub max_connections_per_peer: usize,
    /// Longest time from accepting a connection to the end of its TLS handshake
    /// (`verbs.handshake_timeout`, default 2 s); a connection still handshaking then is
    /// closed.
    pub handshake_timeout: Duration,
    /// Longest time from the end of the handshake to the whole first request frame
    /// (`verbs.first_frame_timeout`, default 2 s); a connection that has not sent it by then
    /// is closed.
    pub first_frame_timeout: Duration,
    /// Longest wait for each later request frame, and for writing one reply
    /// (`verbs.idle_timeout`, default 120 s; a dead or half-open peer's thread ends then).
    pub idle_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 1024,
            max_connections_per_peer: 64,
            handshake_timeout: Duration::from_secs(2),
            first_frame_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl ServerLimits {
    /// The limits a topology file's `verbs:` section sets, the defaults for the keys it
    /// leaves out.
    pub fn from_config(config: &VerbsConfig) -> ServerLimits {
        let d = ServerLimits::default();
        let count = |v: Option<u64>, default: usize| v.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX));
        ServerLimits {
            max_connections: count(config.max_connections, d.max_connections),
            max_connections_per_peer: count(config.max_connections_per_peer, d.max_connections_per_peer),
            handshake_timeout: config.handshake_timeout.unwrap_or(d.handshake_timeout),
            first_frame_timeout: config.first_frame_timeout.unwrap_or(d.first_frame_timeout),
            idle_timeout: config.idle_timeout.unwrap_or(d.idle_timeout),
        }
    }
}

/// What a [`TcpVerbsServer`] did with the connections it accepted, counted since it started
/// ([`TcpVerbsServer::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// TCP connections accepted (admitted or refused).
    pub accepted: u64,
    /// Connections refused at accept because [`ServerLimits::max_connections`] were open.
    pub refused_total_cap: u64,
    /// Connections refused at accept because [`ServerLimits::max_connections_per_peer`]
    /// were open from the same IP address.
    pub refused_peer_cap: u64,
    /// Handshakes that failed: no or an untrusted certificate, a TLS error, the peer closing.
    pub handshake_failed: u64,
    /// Connections closed because their handshake was not done within
    /// [`ServerLimits::handshake_timeout`].
    pub handshake_timed_out: u64,
    /// Handshakes that succeeded with a certificate that is not a node certificate of this
    /// DC (a client certificate, another DC's node, no identity): refused.
    pub refused_identity: u64,
    /// Connections of an authenticated node of this DC, each then served on its own thread.
    pub authenticated: u64,
    /// Authenticated connections closed because no whole first frame arrived within
    /// [`ServerLimits::first_frame_timeout`].
    pub first_frame_timed_out: u64,
}

/// A handle on a [`TcpVerbsServer`]'s counters that outlives neither nor borrows it: what a
/// node's metrics endpoint reads at each scrape ([`TcpVerbsServer::counts_handle`]).
#[derive(Clone)]
pub struct ServerCountsHandle(Arc<Counters>);

impl ServerCountsHandle {
    /// The server's counts now, as [`TcpVerbsServer::counts`].
    pub fn counts(&self) -> ServerCounts {
        self.0.snapshot()
    }
}

impl std::fmt::Debug for ServerCountsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServerCountsHandle").field(&self.counts()).finish()
    }
}

/// The live counters behind [`ServerCounts`].
#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused_total_cap: AtomicU64,
    refused_peer_cap: AtomicU64,
    handshake_failed: AtomicU64,
    handshake_timed_out: AtomicU64,
    refused_identity: AtomicU64,
    authenticated: AtomicU64,
    first_frame_timed_out: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> ServerCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerCounts {
            accepted: get(&self.accepted),
            refused_total_cap: get(&self.refused_total_cap),
            refused_peer_cap: get(&self.refused_peer_cap),
            handshake_failed: get(&self.handshake_failed),
            handshake_timed_out: get(&self.handshake_timed_out),
            refused_identity: get(&self.refused_identity),
            authenticated: get(&self.authenticated),
            first_frame_timed_out: get(&self.first_frame_timed_out),
        }
    }
}

/// The open connections (handshaking or served), for the caps and for shutdown.
#[derive(Default)]
struct Table {
    /// A clone of each open connection's socket, by connection id, with its peer's IP.
    open: HashMap<u64, (IpAddr, TcpStream)>,
    /// Open connections per peer IP.
    per_peer: HashMap<IpAddr, usize>,
}

/// One open connection's place in the [`Table`]; dropping it frees the place.
struct Slot {
    id: u64,
    ip: IpAddr,
    table: Arc<Mutex<Table>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        t.open.remove(&self.id);
        if let Some(n) = t.per_peer.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.per_peer.remove(&self.ip);
            }
        }
    }
}

/// The TCP server of one node's region: executes the verbs other nodes of its DC send it
/// (the two-sided half of the `redt-tcp` baseline, RedT §6.5), over TLS.
///
/// One std thread accepts connections and runs every TLS handshake itself, on non-blocking
/// sockets it polls, so nothing is spawned for a connection before it is authenticated:
///
/// 1. At accept, a connection over [`ServerLimits::max_connections`] or
///    [`ServerLimits::max_connections_per_peer`] gets a refusal status naming the cap (the
///    `verbs.*` config key) and is closed; everyone else gets an admitted status (see the
///    module docs for the format).
/// 2. The TLS 1.3 handshake (the client must present a certificate of the cluster CA) must
///    end within [`ServerLimits::handshake_timeout`] of the accept.
/// 3. The client certificate must carry the identity of a node of this DC
///    ([`VerbsTls`]); otherwise the connection gets a refusal status over TLS and is closed.
/// 4. Only then does the connection get its own thread, which sends an admitted status and
///    serves it: the first request frame must arrive whole within
///    [`ServerLimits::first_frame_timeout`], each later one within
///    [`ServerLimits::idle_timeout`].
///
/// Each request frame is one doorbell batch for the served node, run with
/// [`Verbs::post_batch`] on the backend, and answered by one reply frame. A request for
/// another node is answered with [`Error::UnknownNode`]; a malformed body gets an error
/// reply and the connection keeps serving; a length prefix above [`MAX_FRAME_BYTES`] gets an
/// error reply and the connection is closed. No input from a peer makes the server panic.
/// Every refusal is counted ([`TcpVerbsServer::counts`]) and logged (at most one warning a
/// second).
///
/// Dropping the server calls [`TcpVerbsServer::shutdown`].
pub struct TcpVerbsServer {
    node: NodeId,
    /// `node`'s name, as logs give it.
    name: String,
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Mutex<Option<JoinHandle<()>>>,
    table: Arc<Mutex<Table>>,
    counters: Arc<Counters>,
}

/// Everything the accept thread and the connection threads share.
struct Shared {
    node: NodeId,
    backend: Arc<LocalVerbs>,
    tls: VerbsTls,
    limits: ServerLimits,
    stop: Arc<AtomicBool>,
    table: Arc<Mutex<Table>>,
    counters: Arc<Counters>,
}

impl TcpVerbsServer {
    /// Binds `addr` (port 0 picks a free port) and starts serving `node`'s region of
    /// `backend` to the nodes `tls` accepts, with the default [`ServerLimits`].
    ///
    /// `backend` may hold other regions too (an embedded cluster shares one backend per
    /// DC); only `node`'s is served.
    ///
    /// # Errors
    /// [`Error::Backend`] when `addr` cannot be bound or the accept thread cannot start.
    pub fn spawn(addr: SocketAddr, node: NodeId, backend: Arc<LocalVerbs>, tls: VerbsTls) -> Result<TcpVerbsServer> {
        Self::spawn_with_limits(addr, node, backend, tls, ServerLimits::default())
    }

    /// [`TcpVerbsServer::spawn`] with `limits` instead of the defaults.
    ///
    /// # Errors
    /// [`Error::Backend`] when `addr` cannot be bound or the accept thread cannot start.
    pub fn spawn_with_limits(
        addr: SocketAddr,
        node: NodeId,
        backend: Arc<LocalVerbs>,
        tls: VerbsTls,
        limits: ServerLimits,
    ) -> Result<TcpVerbsServer> {
        let name = tls.name().to_owned();
        let listener =
            TcpListener::bind(addr).map_err(|e| Error::Backend(format!("{name}: cannot bind {addr}: {e}")))?;
        let local_addr =
            listener.local_addr().map_err(|e| Error::Backend(format!("{name}: address of the listener: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Error::Backend(format!("{name}: a non-blocking listener: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let table = Arc::new(Mutex::new(Table::default()));
        let counters = Arc::new(Counters::default());
        let shared = Arc::new(Shared {
            node,
            backend,
            tls,
            limits,
            stop: stop.clone(),
            table: table.clone(),
            counters: counters.clone(),
        });
        let accept = std::thread::Builder::new()
            .name(format!("tcp-verbs-{}", node.0))
            .spawn(move || accept_loop(listener, &shared))
            .map_err(|e| Error::Backend(format!("{name}: cannot start the accept thread: {e}")))?;
        tracing::debug!(node = %name, %local_addr, "TCP verbs server up");
        Ok(TcpVerbsServer { node, name, local_addr, stop, accept: Mutex::new(Some(accept)), table, counters })
    }

    /// The address the server listens on (with the port picked when bound at port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The node whose region is served.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// What the server did with the connections it accepted so far.
    pub fn counts(&self) -> ServerCounts {
        self.counters.snapshot()
    }

    /// A handle that reads [`TcpVerbsServer::counts`] from elsewhere (a node's metrics).
    pub fn counts_handle(&self) -> ServerCountsHandle {
        ServerCountsHandle(self.counters.clone())
    }

    /// Connections open now (handshaking or served).
    pub fn open_connections(&self) -> usize {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).open.len()
    }

    /// Stops accepting connections and closes the open ones (their threads end at their
    /// next read). Idempotent.
    pub fn shutdown(&self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept thread's poll with a connection of our own; it sees the flag and
        // ends (it also looks at the flag at least every POLL_MAX).
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let handle = self.accept.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        let open = std::mem::take(&mut self.table.lock().unwrap_or_else(PoisonError::into_inner).open);
        for (_, s) in open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        tracing::debug!(node = %self.name, addr = %self.local_addr, "TCP verbs server stopped");
    }
}

impl Drop for TcpVerbsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Longest single wait of the accept thread's poll (it looks at the stop flag after each).
const POLL_MAX: Duration = Duration::from_millis(250);

/// Logs refusals as warnings, at most one a second, with the number left unlogged since.
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn refused(&mut self, node: &str, peer: SocketAddr, why: &str) {
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            self.unlogged += 1;
            tracing::debug!(%node, %peer, "TCP verbs: refused: {why}");
            return;
        }
        let unlogged = std::mem::take(&mut self.unlogged);
        tracing::warn!(%node, %peer, unlogged, "TCP verbs: refused: {why}");
        self.last = Some(now);
    }
}

/// A connection in its TLS handshake, on a non-blocking socket.
struct Handshaking {
    sock: TcpStream,
    conn: Connection,
    peer: SocketAddr,
    deadline: Instant,
    slot: Slot,
}

/// Waits until one of `fds` is ready or `timeout` passes (`poll(2)`); an interrupted wait
/// counts as a timeout.
fn poll_fds(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<()> {
    // Rounded up, so a wait shorter than a millisecond does not spin.
    let ms = libc::c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
    let n = libc::nfds_t::try_from(fds.len()).map_err(|_| io::Error::other("too many descriptors to poll"))?;
    // SAFETY: `fds` is a live, exclusively borrowed slice of `n` pollfd structs for the whole
    // call, which only writes their `revents` fields.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), n, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

fn pollfd(fd: std::os::fd::RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

/// The accept thread: polls the listener and every connection in its handshake, accepts
/// (or refuses over a cap), steps handshakes, closes those past their deadline, and hands
/// authenticated connections to their own threads ([`admit`]). Ends when the stop flag is
/// set.
fn accept_loop(listener: TcpListener, shared: &Arc<Shared>) {
    let mut handshaking: Vec<Handshaking> = Vec::new();
    let mut log = RefusalLog { last: None, unlogged: 0 };
    let mut next_id = 0u64;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let wait = handshaking
            .iter()
            .map(|h| h.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(POLL_MAX)
            .min(POLL_MAX);
        let mut fds = Vec::with_capacity(1 + handshaking.len());
        fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        for h in &handshaking {
            let out = if h.conn.wants_write() { libc::POLLOUT } else { 0 };
            fds.push(pollfd(h.sock.as_raw_fd(), libc::POLLIN | out));
        }
        if let Err(e) = poll_fds(&mut fds, wait) {
            tracing::warn!(node = %shared.tls.name(), "TCP verbs: poll: {e}");
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        // Step the handshakes poll found ready, then those just accepted.
        let ready: Vec<bool> = fds[1..].iter().map(|f| f.revents != 0).collect();
        let known = handshaking.len();
        if fds[0].revents != 0 {
            accept_ready(&listener, shared, &mut handshaking, &mut log, &mut next_id);
        }
        let now = Instant::now();
        let mut pending = Vec::with_capacity(handshaking.len());
        for (index, mut h) in std::mem::take(&mut handshaking).into_iter().enumerate() {
            let step = if index >= known || ready[index] {
                handshake_step(&mut h.conn, &mut h.sock)
            } else {
                HandshakeStep::Pending
            };
            match step {
                HandshakeStep::Pending if now < h.deadline => pending.push(h),
                HandshakeStep::Pending => {
                    bump(&shared.counters.handshake_timed_out);
                    let why = format!(
                        "no TLS handshake within {:?} (verbs.handshake_timeout)",
                        shared.limits.handshake_timeout
                    );
                    log.refused(shared.tls.name(), h.peer, &why);
                    let _ = h.sock.shutdown(Shutdown::Both);
                }
                HandshakeStep::Failed(why) => {
                    bump(&shared.counters.handshake_failed);
                    log.refused(shared.tls.name(), h.peer, &format!("TLS handshake failed: {why}"));
                    let _ = h.sock.shutdown(Shutdown::Both);
                }
                HandshakeStep::Done => admit(h, shared, &mut log),
            }
        }
        handshaking = pending;
    }
}

/// Takes a connection whose handshake is done: refuses it unless its certificate is a node
/// certificate of this DC, else starts its thread.
fn admit(h: Handshaking, shared: &Arc<Shared>, log: &mut RefusalLog) {
    let node = shared.node;
    let Handshaking { mut sock, mut conn, peer, slot, .. } = h;
    let from = match shared.tls.authenticate(&conn) {
        Ok(from) => from,
        Err(why) => {
            bump(&shared.counters.refused_identity);
            log.refused(shared.tls.name(), peer, &format!("not a node of this DC: {why}"));
            // The peer waits for its admission: tell it why (best effort, the socket is
            // still non-blocking and the status fits its buffer), then close.
            let _ = conn.writer().write_all(&encode_status(Some(&format!("refused: {why}"))));
            conn.send_close_notify();
            let _ = send_nonblocking(&mut conn, &mut sock);
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
    };
    bump(&shared.counters.authenticated);
    let stream = match TlsStream::handshaken(conn, sock) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(node = %shared.tls.name(), %peer, "TCP verbs: dropping a connection: {e}");
            return;
        }
    };
    let thread_shared = shared.clone();
    let spawned = std::thread::Builder::new().name(format!("tcp-verbs-{}-c{}", node.0, slot.id)).spawn(move || {
        let _slot = slot;
        if let Err(e) = serve_connection(stream, &thread_shared) {
            let from = thread_shared.tls.node_name(from).map_or_else(|| from.to_string(), str::to_string);
            tracing::debug!(node = %thread_shared.tls.name(), %peer, %from, "TCP verbs connection ended: {e}");
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(node = %shared.tls.name(), "TCP verbs: cannot start a connection thread: {e}");
    }
}

/// Serves one authenticated connection until the peer closes it, an I/O error, a frame
/// deadline, or an oversized frame.
fn serve_connection(mut s: TlsStream, shared: &Shared) -> io::Result<()> {
    let limits = &shared.limits;
    let mut deadline = Instant::now() + limits.first_frame_timeout;
    s.socket().set_write_timeout(Some(limits.idle_timeout))?;
    s.write_all(&encode_status(None))?;
    s.flush()?;
    let mut first = true;
    loop {
        s.set_deadline(Some(deadline));
        let body = match read_frame(&mut s) {
            Ok(Frame::Body(b)) => b,
            Ok(Frame::Closed) => return Ok(()),
            Ok(Frame::TooLarge(len)) => {
                let why = format!("frame of {len} bytes exceeds the {MAX_FRAME_BYTES}-byte limit");
                s.write_all(&encode_reply(&[], Some(&Error::Backend(why.clone()))))?;
                s.flush()?;
                s.close();
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
            Err(e) if first && e.kind() == io::ErrorKind::TimedOut => {
                bump(&shared.counters.first_frame_timed_out);
                s.close();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no first frame within {:?} (verbs.first_frame_timeout)", limits.first_frame_timeout),
                ));
            }
            Err(e) => {
                s.close();
                return Err(e);
            }
        };
        let reply = handle_request(&body, shared.node, &shared.backend);
        s.write_all(&reply)?;
        s.flush()?;
        first = false;
        deadline = Instant::now() + limits.idle_timeout;
    }
}

/// Executes one request body on `backend` and returns the reply frame.
fn handle_request(body: &[u8], node: NodeId, backend: &LocalVerbs) -> Vec<u8> {
    let refuse = |why: String| encode_reply(&[], Some(&Error::Backend(why)));
    let (target, requests) = match decode_request(body) {
        Ok(r) => r,
        Err(Malformed(why)) => return refuse(format!("malformed request: {why}")),
    };
    if target != node {
        return encode_reply(&[], Some(&Error::UnknownNode(target)));
    }
    let reply = reply_bytes(&requests);
    if reply > MAX_FRAME_BYTES {
        return refuse(format!("the reply would take {reply} bytes, above the {MAX_FRAME_BYTES}-byte frame limit"));
    }
    let mut batch = DoorbellBatch::new();
    for wr in requests {
        batch.push(wr);
    }
    let result = backend.post_batch(node, &mut batch);
    let done: Vec<Completion> = (0..batch.len())
        .map(|i| batch.completion(i).clone())
        .take_while(|c| !matches!(c, Completion::Pending))
        .collect();
    encode_reply(&done, result.as_ref().err())
}

/// Accepts every connection waiting on `listener`: refuses those over a cap, starts the
/// handshake of the others.
fn accept_ready(
    listener: &TcpListener,
    shared: &Arc<Shared>,
    handshaking: &mut Vec<Handshaking>,
    log: &mut RefusalLog,
    next_id: &mut u64,
) {
    let limits = &shared.limits;
    loop {
        let (sock, peer) = match listener.accept() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(node = %shared.tls.name(), "TCP verbs accept: {e}");
                // Do not spin on a persistent error (e.g. out of file descriptors).
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        };
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        bump(&shared.counters.accepted);
        let deadline = Instant::now() + limits.handshake_timeout;
        let ip = peer.ip();
        let refusal = {
            let mut t = shared.table.lock().unwrap_or_else(PoisonError::into_inner);
            let from_peer = t.per_peer.get(&ip).copied().unwrap_or(0);
            if t.open.len() >= limits.max_connections {
                bump(&shared.counters.refused_total_cap);
                Some(format!(
                    "too many connections: {} open, at most {} (verbs.max_connections)",
                    t.open.len(),
                    limits.max_connections
                ))
            } else if from_peer >= limits.max_connections_per_peer {
                bump(&shared.counters.refused_peer_cap);
                Some(format!(
                    "too many connections from {ip}: {from_peer} open, at most {} (verbs.max_connections_per_peer)",
                    limits.max_connections_per_peer
                ))
            } else {
                match sock.try_clone() {
                    Ok(clone) => {
                        t.open.insert(*next_id, (ip, clone));
                        *t.per_peer.entry(ip).or_insert(0) += 1;
                        None
                    }
                    Err(e) => Some(format!("cannot track the connection: {e}")),
                }
            }
        };
        let mut sock = sock;
        if let Some(why) = refusal {
            log.refused(shared.tls.name(), peer, &why);
            // Best effort on a fresh socket: the status fits its send buffer.
            let _ = sock.set_nonblocking(true);
            let _ = sock.write_all(&encode_status(Some(&why)));
            let _ = sock.shutdown(Shutdown::Both);
            continue;
        }
        let slot = Slot { id: *next_id, ip, table: shared.table.clone() };
        *next_id += 1;
        let setup = sock.set_nonblocking(true).and_then(|()| sock.set_nodelay(true));
        if let Err(e) = setup {
            tracing::debug!(node = %shared.tls.name(), %peer, "TCP verbs: dropping a connection: {e}");
            continue;
        }
        let conn = match shared.tls.server_connection() {
            Ok(c) => Connection::Server(c),
            Err(e) => {
                tracing::warn!(node = %shared.tls.name(), %peer, "TCP verbs: {e}");
                continue;
            }
        };
        if sock.write_all(&encode_status(None)).is_err() {
            continue;
        }
        handshaking.push(Handshaking { sock, conn, peer, deadline, slot });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::Topology;

    /// The commented `verbs:` example in configs/default.yaml, uncommented, sets every key to
    /// its default: the file documents the defaults truthfully.
    #[test]
    fn the_example_in_default_yaml_spells_out_the_defaults() {
        let text = include_str!("../../../configs/default.yaml");
        let start = text.find("\n# verbs:\n").expect("default.yaml has a commented verbs example") + 1;
        let block: String = text[start..]
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l)))
            .collect();
        let t = Topology::from_yaml("default.yaml", &format!("{text}\n{block}")).expect("the example is valid");
        let v = &t.verbs;
        assert!(v.max_connections.is_some() && v.max_connections_per_peer.is_some(), "{v:?}");
        assert!(v.handshake_timeout.is_some() && v.first_frame_timeout.is_some() && v.idle_timeout.is_some());
        assert_eq!(ServerLimits::from_config(v), ServerLimits::default());
        assert_eq!(ServerLimits::from_config(&VerbsConfig::default()), ServerLimits::default());
    }

    #[test]
    fn each_key_set_replaces_its_default_only() {
        let set = VerbsConfig {
            max_connections_per_peer: Some(3),
            idle_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        let want = ServerLimits {
            max_connections_per_peer: 3,
            idle_timeout: Duration::from_secs(5),
            ..ServerLimits::default()
        };
        assert_eq!(ServerLimits::from_config(&set), want);
    }
}
