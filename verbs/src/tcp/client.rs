//! The TCP client: verbs of one node, sent to its peers' servers over pooled TLS connections.

use super::wire::{
    decode_reply, encode_request, read_frame, read_status, reply_bytes, Frame, Malformed, RemoteError, MAX_FRAME_BYTES,
    PREFIX_BYTES,
};
use crate::error::{Error, Result};
use crate::tls::{TlsStream, VerbsTls};
use crate::{Completion, DoorbellBatch, LocalVerbs, VerbCounters, Verbs, WorkRequest};
use redt_proto::{HostPort, NodeId, Offset};
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Default limit for connecting to a peer and for each read or write on a connection.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle connections kept per peer; more may be open while busy, the excess is closed.
const POOL_IDLE_MAX: usize = 8;

/// How long a client keeps an idle connection before dropping it instead of reusing it.
/// Shorter than [`ServerLimits::idle_timeout`]'s default, so a client never reuses a
/// connection its server has closed for idleness.
///
/// [`ServerLimits::idle_timeout`]: super::ServerLimits::idle_timeout
pub const POOL_IDLE_FOR: Duration = Duration::from_secs(60);

/// A peer node's server and the idle connections to it.
struct Peer {
    /// Where its server is reached (a host name is resolved at each new connection).
    addr: HostPort,
    /// Idle connections and when each was last used.
    idle: Mutex<Vec<(TlsStream, Instant)>>,
}

impl Peer {
    /// The most recently used idle connection not older than [`POOL_IDLE_FOR`] (older ones
    /// are dropped).
    fn reuse(&self) -> Option<TlsStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|(_, since)| since.elapsed() < POOL_IDLE_FOR);
        idle.pop().map(|(s, _)| s)
    }
}

/// Verbs of one node over TCP: its own region directly, every other node of its DC through
/// that node's [`TcpVerbsServer`] (the `redt-tcp` baseline, RedT §6.5), over TLS.
///
/// Each lone verb to a peer is one request/reply exchange; each
/// [`Verbs::post_batch`] is one exchange carrying the whole batch. Connections are opened
/// lazily, with `TCP_NODELAY`: the server's greeting status is read (a refusal, e.g. over a
/// connection cap, ends the attempt with its reason), the TLS 1.3 handshake presents this
/// node's certificate and checks that the server's is the peer node's of this DC
/// ([`VerbsTls`]), and the server's admission status is read; all within the I/O timeout.
/// Up to a few idle connections are kept per peer, each for at most [`POOL_IDLE_FOR`]. A
/// connection that fails (connect, refusal, handshake, I/O, timeout, malformed reply) is
/// dropped with every idle connection to the same peer, and the verb returns
/// [`Error::Backend`] naming the peer and the cause; a later verb connects again. A verb
/// whose connection broke mid-exchange may or may not have run on the peer.
///
/// Verbs are counted in the backend's own [`VerbCounters`], on this side, for every verb
/// issued (local or remote), with the same rules as [`LocalVerbs`]: a lone verb counts
/// itself and one doorbell when it succeeds; a non-empty batch counts one doorbell, then
/// each request that completed.
///
/// [`TcpVerbsServer`]: super::TcpVerbsServer
pub struct TcpVerbs {
    own: NodeId,
    tls: VerbsTls,
    source: Option<IpAddr>,
    local: Arc<LocalVerbs>,
    peers: HashMap<NodeId, Peer>,
    io_timeout: Duration,
    counters: VerbCounters,
}

impl TcpVerbs {
    /// Verbs for node `own`: verbs to `own` go to its region in `local`, verbs to a node of
    /// `peers` go over TLS to the server at its address (an IP socket address, or a host name
    /// and port, resolved each time a connection is opened), authenticated with `tls` (which
    /// names the peers: a peer it does not know fails each verb with
    /// [`Error::UnknownNode`]). An entry of `peers` for `own` itself is ignored. No
    /// connection is opened here.
    pub fn new<A: Into<HostPort>>(
        own: NodeId,
        local: Arc<LocalVerbs>,
        peers: impl IntoIterator<Item = (NodeId, A)>,
        tls: VerbsTls,
    ) -> TcpVerbs {
        let peers = peers
            .into_iter()
            .filter(|(n, _)| *n != own && tls.node_name(*n).is_some())
            .map(|(n, addr)| (n, Peer { addr: addr.into(), idle: Mutex::new(Vec::new()) }))
            .collect();
        TcpVerbs {
            own,
            tls,
            source: None,
            local,
            peers,
            io_timeout: DEFAULT_IO_TIMEOUT,
            counters: VerbCounters::default(),
        }
    }

    /// Sets the limit on connecting (TCP connect, then greeting, handshake and admission
    /// together) and on each read or write of an exchange (default [`DEFAULT_IO_TIMEOUT`]).
    /// A verb that exceeds it fails with [`Error::Backend`].
    pub fn with_io_timeout(mut self, timeout: Duration) -> TcpVerbs {
        self.io_timeout = timeout;
        self
    }

    /// Opens every connection from `ip` (the node's own address), so the servers count it
    /// against this node's per-peer cap even when several nodes share a host (default: the
    /// address the system picks; an unspecified `ip` changes nothing). A connection fails if
    /// `ip` is not an address of this host.
    pub fn with_source_ip(mut self, ip: IpAddr) -> TcpVerbs {
        self.source = (!ip.is_unspecified()).then_some(ip);
        self
    }

    /// The node these verbs are issued from.
    pub fn own(&self) -> NodeId {
        self.own
    }

    /// The peer of `node`, `None` for the own node.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] for a node that is neither `own` nor a peer.
    fn route(&self, node: NodeId) -> Result<Option<&Peer>> {
        if node == self.own {
            return Ok(None);
        }
        self.peers.get(&node).map(Some).ok_or(Error::UnknownNode(node))
    }

    /// Counts one completed work request.
    fn count(&self, wr: &WorkRequest) {
        match wr {
            WorkRequest::Read { len, .. } => self.counters.read(*len as usize),
            WorkRequest::Write { data, .. } => self.counters.write(data.len()),
            WorkRequest::CompareAndSwap { .. } => self.counters.cas(),
            WorkRequest::FetchAndAdd { .. } => self.counters.faa(),
            WorkRequest::MaskedCompareAndSwap { .. } => self.counters.masked_cas(),
            WorkRequest::MaskedFetchAndAdd { .. } => self.counters.masked_faa(),
            WorkRequest::Persist => self.counters.persist(),
        }
    }

    /// Sends `requests` to `node` at `peer` in one exchange and returns the completions of
    /// the requests that ran, each checked against its request, and the error that stopped
    /// the batch, if any.
    fn exchange(
        &self,
        node: NodeId,
        peer: &Peer,
        requests: &[WorkRequest],
    ) -> Result<(Vec<Completion>, Option<Error>)> {
        let broken = |why: String| Error::Backend(format!("{} at {}: {why}", self.name_of(node), peer.addr));
        let frame = encode_request(node, requests);
        if frame.len() - PREFIX_BYTES > MAX_FRAME_BYTES {
            return Err(broken(format!(
                "request of {} bytes exceeds the {MAX_FRAME_BYTES}-byte frame limit",
                frame.len() - PREFIX_BYTES
            )));
        }
        let reply = reply_bytes(requests);
        if reply > MAX_FRAME_BYTES {
            return Err(broken(format!(
                "the reply would take {reply} bytes, above the {MAX_FRAME_BYTES}-byte frame limit"
            )));
        }
        let mut stream = match peer.reuse() {
            Some(s) => s,
            None => self.connect(node, peer).map_err(broken)?,
        };
        let outcome = round_trip(&mut stream, &frame).map_err(|e| e.to_string()).and_then(|body| {
            let (done, error) = decode_reply(&body).map_err(|Malformed(why)| format!("malformed reply: {why}"))?;
            if done.len() > requests.len() {
                return Err(format!("reply has {} completions for {} requests", done.len(), requests.len()));
            }
            for (i, (wr, c)) in requests.iter().zip(&done).enumerate() {
                if !completion_fits(wr, c) {
                    return Err(format!("completion {i} does not match its request"));
                }
            }
            if error.is_none() && done.len() != requests.len() {
                return Err(format!("reply has {} completions for {} requests", done.len(), requests.len()));
            }
            Ok((done, error))
        });
        match outcome {
            Ok((done, Some(RemoteError::Refused(why)))) => {
                // The server is unhappy with what it got: do not reuse this connection.
                drop(stream);
                Ok((done, Some(broken(format!("request refused: {why}")))))
            }
            Ok((done, verb_error)) => {
                let mut idle = peer.idle.lock().unwrap_or_else(PoisonError::into_inner);
                if idle.len() < POOL_IDLE_MAX {
                    idle.push((stream, Instant::now()));
                }
                let error = verb_error.map(|e| match e {
                    RemoteError::Verb(e) => e,
                    RemoteError::Refused(_) => unreachable!("refusals are handled above"),
                });
                Ok((done, error))
            }
            Err(why) => {
                drop(stream);
                // The peer probably restarted or died: its other idle connections are stale too.
                peer.idle.lock().unwrap_or_else(PoisonError::into_inner).clear();
                Err(broken(why))
            }
        }
    }

    /// `node`'s name in the DC (its id if `tls` does not name it), as errors name it.
    fn name_of(&self, node: NodeId) -> String {
        self.tls.node_name(node).map_or_else(|| node.to_string(), str::to_string)
    }

    /// A TCP connection to `to`, from the source address if one is set: a host name is
    /// resolved here, and its addresses (of the source's family) are tried in order.
    fn dial(&self, to: &HostPort) -> std::result::Result<TcpStream, String> {
        let addrs = to.resolve().map_err(|e| e.to_string())?;
        let mut why = String::new();
        for addr in addrs {
            if self.source.is_some_and(|ip| ip.is_ipv4() != addr.is_ipv4()) {
                why = format!("{addr} is not of the family of the source address");
                continue;
            }
            match self.dial_addr(addr) {
                Ok(s) => return Ok(s),
                Err(e) if to.ip().is_some() => why = e.to_string(),
                Err(e) => why = format!("{addr}: {e}"),
            }
        }
        Err(format!("cannot connect: {why}"))
    }

    /// A TCP connection to `addr`, from the source address if one is set.
    fn dial_addr(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let Some(ip) = self.source else { return TcpStream::connect_timeout(&addr, self.io_timeout) };
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.bind(&SocketAddr::new(ip, 0).into())?;
        socket.connect_timeout(&addr.into(), self.io_timeout)?;
        Ok(socket.into())
    }

    /// Opens an authenticated connection to `node` at `peer`, or says why not.
    fn connect(&self, node: NodeId, peer: &Peer) -> std::result::Result<TlsStream, String> {
        let deadline = Instant::now() + self.io_timeout;
        let mut s = self.dial(&peer.addr)?;
        s.set_nodelay(true).map_err(|e| format!("cannot connect: {e}"))?;
        s.set_read_timeout(Some(self.io_timeout)).map_err(|e| format!("cannot connect: {e}"))?;
        s.set_write_timeout(Some(self.io_timeout)).map_err(|e| format!("cannot connect: {e}"))?;
        match read_status(&mut s) {
            Ok(None) => {}
            Ok(Some(why)) => return Err(format!("the server refused the connection: {why}")),
            Err(e) => return Err(format!("reading the server's greeting: {e}")),
        }
        let conn = self.tls.client_connection(node).map_err(|e| e.to_string())?;
        let mut tls = TlsStream::handshake(conn, s, deadline).map_err(|e| format!("TLS handshake: {e}"))?;
        self.tls
            .authenticate_server(tls.connection(), node)
            .map_err(|why| format!("the server is not the node expected: {why}"))?;
        tls.set_deadline(Some(deadline));
        match read_status(&mut tls) {
            Ok(None) => {}
            Ok(Some(why)) => return Err(format!("the server refused this node: {why}")),
            Err(e) => return Err(format!("reading the server's admission: {e}")),
        }
        tls.set_deadline(None);
        tls.socket().set_read_timeout(Some(self.io_timeout)).map_err(|e| e.to_string())?;
        tls.socket().set_write_timeout(Some(self.io_timeout)).map_err(|e| e.to_string())?;
        Ok(tls)
    }

    /// One lone verb: to the own region through `local_op`, or one exchange with a peer.
    /// Counted as one verb and one doorbell on success.
    fn single(&self, node: NodeId, wr: WorkRequest, local_op: impl FnOnce(&LocalVerbs) -> Result<u64>) -> Result<u64> {
        let v = match self.route(node)? {
            None => local_op(&self.local)?,
            Some(peer) => match self.exchange(node, peer, std::slice::from_ref(&wr))? {
                (_, Some(e)) => return Err(e),
                (done, None) => match done.into_iter().next() {
                    Some(Completion::Atomic(v)) => v,
                    _ => unreachable!("exchange checks that an atomic completes with Atomic"),
                },
            },
        };
        self.count(&wr);
        self.counters.doorbell();
        Ok(v)
    }
}

/// Whether completion `c` is of the kind (and size) request `wr` produces.
fn completion_fits(wr: &WorkRequest, c: &Completion) -> bool {
    match (wr, c) {
        (WorkRequest::Read { len, .. }, Completion::Read(b)) => b.len() == *len as usize,
        (WorkRequest::Write { .. }, Completion::Written) => true,
        (WorkRequest::Persist, Completion::Written) => true,
        (WorkRequest::Read { .. } | WorkRequest::Write { .. } | WorkRequest::Persist, _) => false,
        (_, Completion::Atomic(_)) => true,
        _ => false,
    }
}

/// Writes `frame` and reads the reply body.
fn round_trip(s: &mut TlsStream, frame: &[u8]) -> io::Result<Vec<u8>> {
    s.write_all(frame)?;
    s.flush()?;
    match read_frame(s)? {
        Frame::Body(b) => Ok(b),
        Frame::Closed => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")),
        Frame::TooLarge(len) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("reply of {len} bytes exceeds the {MAX_FRAME_BYTES}-byte limit"),
        )),
    }
}

impl Verbs for TcpVerbs {
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()> {
        let len = u32::try_from(buf.len()).map_err(|_| {
            Error::Backend(format!("{}: a READ of {} bytes does not fit a frame", self.name_of(node), buf.len()))
        })?;
        match self.route(node)? {
            None => self.local.read(node, offset, buf)?,
            Some(peer) => match self.exchange(node, peer, &[WorkRequest::Read { offset, len }])? {
                (_, Some(e)) => return Err(e),
                (done, None) => match done.into_iter().next() {
                    Some(Completion::Read(bytes)) => buf.copy_from_slice(&bytes),
                    _ => unreachable!("exchange checks that a READ completes with its bytes"),
                },
            },
        }
        self.counters.read(buf.len());
        self.counters.doorbell();
        Ok(())
    }

    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()> {
        match self.route(node)? {
            None => self.local.write(node, offset, data)?,
            Some(peer) => {
                if let (_, Some(e)) =
                    self.exchange(node, peer, &[WorkRequest::Write { offset, data: data.to_vec() }])?
                {
                    return Err(e);
                }
            }
        }
        self.counters.write(data.len());
        self.counters.doorbell();
        Ok(())
    }

    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64> {
        self.single(node, WorkRequest::CompareAndSwap { offset, expected, new }, |l| {
            l.compare_and_swap(node, offset, expected, new)
        })
    }

    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64> {
        self.single(node, WorkRequest::FetchAndAdd { offset, add }, |l| l.fetch_and_add(node, offset, add))
    }

    fn masked_compare_and_swap(
        &self,
        node: NodeId,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Result<u64> {
        let wr = WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask };
        self.single(node, wr, |l| l.masked_compare_and_swap(node, offset, compare, compare_mask, swap, swap_mask))
    }

    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64> {
        self.single(node, WorkRequest::MaskedFetchAndAdd { offset, add, boundary }, |l| {
            l.masked_fetch_and_add(node, offset, add, boundary)
        })
    }

    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // Counted before anything can fail, as LocalVerbs does.
        self.counters.doorbell();
        // Results of an earlier posting of the same batch must not pass for new ones.
        for i in 0..batch.len() {
            batch.complete(i, Completion::Pending);
        }
        let peer = self.route(node)?;
        let result = match peer {
            None => self.local.post_batch(node, batch),
            Some(peer) => {
                let (done, error) = self.exchange(node, peer, batch.requests())?;
                for (i, c) in done.into_iter().enumerate() {
                    batch.complete(i, c);
                }
                error.map_or(Ok(()), Err)
            }
        };
        for i in 0..batch.len() {
            if matches!(batch.completion(i), Completion::Pending) {
                break;
            }
            self.count(&batch.requests()[i]);
        }
        result
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }
}
