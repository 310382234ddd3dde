//! Verbs as two-sided RPCs over TCP: the data path of the `redt-tcp` baseline (RedT §6.5).
//!
//! Every node runs a [`TcpVerbsServer`] over its own region; a [`TcpVerbs`] client sends
//! each verb (or each doorbell batch) to the target node's server as one request frame and
//! waits for one reply frame. The server's CPU executes the work requests, which is what
//! makes the access two-sided. Verbs to the client's own node skip the network and go
//! straight to its region.
//!
//! # Wire format
//! Every frame is a little-endian `u32` body length followed by the body; a body longer
//! than [`MAX_FRAME_BYTES`] is refused. Integers are little-endian.
//!
//! Request body: `u8` version ([`WIRE_VERSION`]), `u16` node, `u32` request count, then per
//! work request a `u8` op, the `u64` offset and the op's operands:
//! READ `u32 len`; WRITE `u32 len` + bytes; CAS `u64 expected, u64 new`; FAA `u64 add`;
//! masked CAS `u64 compare, compare_mask, swap, swap_mask`; masked FAA `u64 add, boundary`.
//!
//! Reply body: `u8` version, `u32` completion count, the completions of the requests that
//! ran, in order (`u8` tag: READ `u32 len` + bytes, WRITE nothing, atomic `u64` old
//! value), then a `u8` status: 0 for success, or 1 followed by an error (`u8` kind:
//! out-of-bounds `u16 node, u64 offset, u64 len, u64 size`; unaligned `u16 node, u64
//! offset`; unknown node `u16 node`; refused `u32 len` + UTF-8 reason). As with
//! [`super::LocalVerbs`], a batch stops at its first failing request; the completions of
//! the requests before it are still returned.

use super::{Completion, DoorbellBatch, LocalVerbs, VerbCounters, Verbs, WorkRequest};
use crate::error::{Error, Result};
use redt_proto::{NodeId, Offset};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest frame body either side sends or accepts, in bytes (16 MiB).
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// Version byte at the start of every request and reply body.
pub const WIRE_VERSION: u8 = 1;

/// Default limit for connecting to a peer and for each read or write on a connection.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle connections kept per peer; more may be open while busy, the excess is closed.
const POOL_IDLE_MAX: usize = 8;

/// How long a client keeps an idle connection before dropping it instead of reusing it.
/// Shorter than [`ServerLimits::idle_timeout`]'s default, so a client never reuses a
/// connection its server has closed for idleness.
pub const POOL_IDLE_FOR: Duration = Duration::from_secs(60);

/// What a [`TcpVerbsServer`] tolerates from its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Most connections served at once (default 1,024); one more is answered with a refusal
    /// and closed.
    pub max_connections: usize,
    /// A connection with no request for this long is closed (default 120 s; a dead or
    /// half-open peer's thread ends then). Also the limit on writing one reply.
    pub idle_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits { max_connections: 1024, idle_timeout: Duration::from_secs(120) }
    }
}

const OP_READ: u8 = 1;
const OP_WRITE: u8 = 2;
const OP_CAS: u8 = 3;
const OP_FAA: u8 = 4;
const OP_MASKED_CAS: u8 = 5;
const OP_MASKED_FAA: u8 = 6;

const DONE_READ: u8 = 1;
const DONE_WRITTEN: u8 = 2;
const DONE_ATOMIC: u8 = 3;

const STATUS_OK: u8 = 0;
const STATUS_ERR: u8 = 1;

const ERR_OUT_OF_BOUNDS: u8 = 1;
const ERR_UNALIGNED: u8 = 2;
const ERR_UNKNOWN_NODE: u8 = 3;
const ERR_REFUSED: u8 = 4;

/// Bytes of a frame's length prefix.
const PREFIX_BYTES: usize = 4;
/// Reply bytes besides the completions: version, count, status.
const REPLY_FIXED_BYTES: usize = 1 + 4 + 1;
/// Reply bytes of a READ completion besides its data: tag and length.
const READ_DONE_FIXED_BYTES: usize = 1 + 4;
/// The smallest encoded work request (READ, or WRITE of nothing: op, offset, length).
const MIN_REQUEST_BYTES: usize = 1 + 8 + 4;

// ---------------------------------------------------------------------------------------
// Codec
// ---------------------------------------------------------------------------------------

/// A frame body that does not decode.
#[derive(Debug)]
struct Malformed(String);

/// Reads little-endian fields off a frame body.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed(format!("truncated at {what} ({} of {n} bytes left)", self.buf.len())));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> std::result::Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> std::result::Result<u16, Malformed> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> std::result::Result<u32, Malformed> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> std::result::Result<u64, Malformed> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    fn remaining(&self) -> usize {
        self.buf.len()
    }
    fn finish(&self) -> std::result::Result<(), Malformed> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Malformed(format!("{} trailing bytes", self.buf.len())))
        }
    }
}

/// Starts a frame: a placeholder length prefix, patched by [`seal`].
fn frame() -> Vec<u8> {
    vec![0; PREFIX_BYTES]
}

/// Writes the body length into the prefix of `f`.
fn seal(f: &mut [u8]) {
    let body = (f.len() - PREFIX_BYTES) as u32;
    f[..PREFIX_BYTES].copy_from_slice(&body.to_le_bytes());
}

fn put_u16(f: &mut Vec<u8>, v: u16) {
    f.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(f: &mut Vec<u8>, v: u32) {
    f.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(f: &mut Vec<u8>, v: u64) {
    f.extend_from_slice(&v.to_le_bytes());
}

/// Encodes a request frame (prefix included) for `requests` to `node`.
fn encode_request(node: NodeId, requests: &[WorkRequest]) -> Vec<u8> {
    let mut f = frame();
    f.push(WIRE_VERSION);
    put_u16(&mut f, node.0);
    put_u32(&mut f, requests.len() as u32);
    for wr in requests {
        match wr {
            WorkRequest::Read { offset, len } => {
                f.push(OP_READ);
                put_u64(&mut f, offset.0);
                put_u32(&mut f, *len);
            }
            WorkRequest::Write { offset, data } => {
                f.push(OP_WRITE);
                put_u64(&mut f, offset.0);
                put_u32(&mut f, data.len() as u32);
                f.extend_from_slice(data);
            }
            WorkRequest::CompareAndSwap { offset, expected, new } => {
                f.push(OP_CAS);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *expected);
                put_u64(&mut f, *new);
            }
            WorkRequest::FetchAndAdd { offset, add } => {
                f.push(OP_FAA);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *add);
            }
            WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => {
                f.push(OP_MASKED_CAS);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *compare);
                put_u64(&mut f, *compare_mask);
                put_u64(&mut f, *swap);
                put_u64(&mut f, *swap_mask);
            }
            WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => {
                f.push(OP_MASKED_FAA);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *add);
                put_u64(&mut f, *boundary);
            }
        }
    }
    seal(&mut f);
    f
}

/// Decodes a request body into its target node and work requests.
fn decode_request(body: &[u8]) -> std::result::Result<(NodeId, Vec<WorkRequest>), Malformed> {
    let mut c = Cursor { buf: body };
    let version = c.u8("version")?;
    if version != WIRE_VERSION {
        return Err(Malformed(format!("wire version {version}, expected {WIRE_VERSION}")));
    }
    let node = NodeId(c.u16("node")?);
    let count = c.u32("request count")? as usize;
    if count > c.remaining() / MIN_REQUEST_BYTES {
        return Err(Malformed(format!("{count} requests cannot fit in {} bytes", c.remaining())));
    }
    let mut requests = Vec::with_capacity(count);
    for _ in 0..count {
        let op = c.u8("op")?;
        let offset = Offset(c.u64("offset")?);
        requests.push(match op {
            OP_READ => WorkRequest::Read { offset, len: c.u32("read length")? },
            OP_WRITE => {
                let len = c.u32("write length")? as usize;
                WorkRequest::Write { offset, data: c.take(len, "write data")?.to_vec() }
            }
            OP_CAS => WorkRequest::CompareAndSwap { offset, expected: c.u64("expected")?, new: c.u64("new")? },
            OP_FAA => WorkRequest::FetchAndAdd { offset, add: c.u64("add")? },
            OP_MASKED_CAS => WorkRequest::MaskedCompareAndSwap {
                offset,
                compare: c.u64("compare")?,
                compare_mask: c.u64("compare mask")?,
                swap: c.u64("swap")?,
                swap_mask: c.u64("swap mask")?,
            },
            OP_MASKED_FAA => {
                WorkRequest::MaskedFetchAndAdd { offset, add: c.u64("add")?, boundary: c.u64("boundary")? }
            }
            other => return Err(Malformed(format!("unknown op {other}"))),
        });
    }
    c.finish()?;
    Ok((node, requests))
}

/// Encodes a reply frame (prefix included): the completions of the requests that ran and
/// the error that stopped the batch, if any.
fn encode_reply(completions: &[Completion], error: Option<&Error>) -> Vec<u8> {
    let mut f = frame();
    f.push(WIRE_VERSION);
    put_u32(&mut f, completions.len() as u32);
    for c in completions {
        match c {
            Completion::Read(bytes) => {
                f.push(DONE_READ);
                put_u32(&mut f, bytes.len() as u32);
                f.extend_from_slice(bytes);
            }
            Completion::Written => f.push(DONE_WRITTEN),
            Completion::Atomic(v) => {
                f.push(DONE_ATOMIC);
                put_u64(&mut f, *v);
            }
            Completion::Pending => unreachable!("only completed requests are encoded"),
        }
    }
    match error {
        None => f.push(STATUS_OK),
        Some(e) => {
            f.push(STATUS_ERR);
            match *e {
                Error::OutOfBounds { node, offset, len, size } => {
                    f.push(ERR_OUT_OF_BOUNDS);
                    put_u16(&mut f, node.0);
                    put_u64(&mut f, offset.0);
                    put_u64(&mut f, len);
                    put_u64(&mut f, size);
                }
                Error::Unaligned { node, offset } => {
                    f.push(ERR_UNALIGNED);
                    put_u16(&mut f, node.0);
                    put_u64(&mut f, offset.0);
                }
                Error::UnknownNode(node) => {
                    f.push(ERR_UNKNOWN_NODE);
                    put_u16(&mut f, node.0);
                }
                ref other => {
                    let why = match other {
                        Error::Backend(why) => why.clone(),
                        other => other.to_string(),
                    };
                    f.push(ERR_REFUSED);
                    put_u32(&mut f, why.len() as u32);
                    f.extend_from_slice(why.as_bytes());
                }
            }
        }
    }
    seal(&mut f);
    f
}

/// An error reply decoded by the client.
enum RemoteError {
    /// A verbs error the server's backend returned (out of bounds, unaligned, unknown node).
    Verb(Error),
    /// The server refused the request (malformed, too large, backend failure).
    Refused(String),
}

/// Decodes a reply body into completions and an optional error.
fn decode_reply(body: &[u8]) -> std::result::Result<(Vec<Completion>, Option<RemoteError>), Malformed> {
    let mut c = Cursor { buf: body };
    let version = c.u8("version")?;
    if version != WIRE_VERSION {
        return Err(Malformed(format!("wire version {version}, expected {WIRE_VERSION}")));
    }
    let count = c.u32("completion count")? as usize;
    if count > c.remaining() {
        return Err(Malformed(format!("{count} completions cannot fit in {} bytes", c.remaining())));
    }
    let mut completions = Vec::with_capacity(count);
    for _ in 0..count {
        completions.push(match c.u8("completion tag")? {
            DONE_READ => {
                let len = c.u32("read length")? as usize;
                Completion::Read(c.take(len, "read data")?.to_vec())
            }
            DONE_WRITTEN => Completion::Written,
            DONE_ATOMIC => Completion::Atomic(c.u64("old value")?),
            other => return Err(Malformed(format!("unknown completion tag {other}"))),
        });
    }
    let error = match c.u8("status")? {
        STATUS_OK => None,
        STATUS_ERR => Some(match c.u8("error kind")? {
            ERR_OUT_OF_BOUNDS => RemoteError::Verb(Error::OutOfBounds {
                node: NodeId(c.u16("node")?),
                offset: Offset(c.u64("offset")?),
                len: c.u64("length")?,
                size: c.u64("size")?,
            }),
            ERR_UNALIGNED => {
                RemoteError::Verb(Error::Unaligned { node: NodeId(c.u16("node")?), offset: Offset(c.u64("offset")?) })
            }
            ERR_UNKNOWN_NODE => RemoteError::Verb(Error::UnknownNode(NodeId(c.u16("node")?))),
            ERR_REFUSED => {
                let len = c.u32("reason length")? as usize;
                RemoteError::Refused(String::from_utf8_lossy(c.take(len, "reason")?).into_owned())
            }
            other => return Err(Malformed(format!("unknown error kind {other}"))),
        }),
        other => return Err(Malformed(format!("unknown status {other}"))),
    };
    c.finish()?;
    Ok((completions, error))
}

/// Bytes of the reply to `requests` if every one of them completes.
fn reply_bytes(requests: &[WorkRequest]) -> usize {
    requests.iter().fold(REPLY_FIXED_BYTES, |acc, wr| {
        acc + match wr {
            WorkRequest::Read { len, .. } => READ_DONE_FIXED_BYTES + *len as usize,
            WorkRequest::Write { .. } => 1,
            _ => 1 + 8,
        }
    })
}

/// What reading one frame gave.
enum Frame {
    /// A body within the limit.
    Body(Vec<u8>),
    /// The peer closed the connection cleanly between frames.
    Closed,
    /// The length prefix announced a body above [`MAX_FRAME_BYTES`].
    TooLarge(u64),
}

/// Reads one frame from `s`.
fn read_frame(s: &mut TcpStream) -> io::Result<Frame> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut got = 0;
    while got < PREFIX_BYTES {
        match s.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(Frame::Closed),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-prefix")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME_BYTES {
        return Ok(Frame::TooLarge(len as u64));
    }
    // `take` + `read_to_end` grows the buffer as bytes arrive instead of trusting the
    // prefix with an allocation up front.
    let mut body = Vec::new();
    s.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed after {} of {len} body bytes", body.len()),
        ));
    }
    Ok(Frame::Body(body))
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

/// The TCP server of one node's region: executes the verbs other nodes of its DC send it
/// (the two-sided half of the `redt-tcp` baseline, RedT §6.5).
///
/// A std listener thread accepts connections and starts one thread per connection. Each
/// request frame is one doorbell batch for the served node, run with
/// [`Verbs::post_batch`] on the backend, and answered by one reply frame (see the module
/// docs for the format). A request for another node is answered with
/// [`Error::UnknownNode`]; a malformed body gets an error reply and the connection keeps
/// serving; a length prefix above [`MAX_FRAME_BYTES`] gets an error reply and the
/// connection is closed. No input from a peer makes the server panic. [`ServerLimits`]
/// caps the connections served at once and closes idle ones.
///
/// Dropping the server calls [`TcpVerbsServer::shutdown`].
pub struct TcpVerbsServer {
    node: NodeId,
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Mutex<Option<JoinHandle<()>>>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
}

impl TcpVerbsServer {
    /// Binds `addr` (port 0 picks a free port) and starts serving `node`'s region of
    /// `backend` on background threads.
    ///
    /// `backend` may hold other regions too (an embedded cluster shares one backend per
    /// DC); only `node`'s is served.
    ///
    /// # Errors
    /// [`Error::Backend`] when `addr` cannot be bound or the accept thread cannot start.
    pub fn spawn(addr: SocketAddr, node: NodeId, backend: Arc<LocalVerbs>) -> Result<TcpVerbsServer> {
        Self::spawn_with_limits(addr, node, backend, ServerLimits::default())
    }

    /// [`TcpVerbsServer::spawn`] with `limits` instead of the defaults.
    ///
    /// # Errors
    /// [`Error::Backend`] when `addr` cannot be bound or the accept thread cannot start.
    pub fn spawn_with_limits(
        addr: SocketAddr,
        node: NodeId,
        backend: Arc<LocalVerbs>,
        limits: ServerLimits,
    ) -> Result<TcpVerbsServer> {
        let listener =
            TcpListener::bind(addr).map_err(|e| Error::Backend(format!("{node}: cannot bind {addr}: {e}")))?;
        let local_addr =
            listener.local_addr().map_err(|e| Error::Backend(format!("{node}: address of the listener: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(HashMap::new()));
        let accept = {
            let (stop, conns) = (stop.clone(), conns.clone());
            std::thread::Builder::new()
                .name(format!("tcp-verbs-{}", node.0))
                .spawn(move || accept_loop(listener, node, backend, limits, stop, conns))
                .map_err(|e| Error::Backend(format!("{node}: cannot start the accept thread: {e}")))?
        };
        tracing::debug!(%node, %local_addr, "TCP verbs server up");
        Ok(TcpVerbsServer { node, local_addr, stop, accept: Mutex::new(Some(accept)), conns })
    }

    /// The address the server listens on (with the port picked when bound at port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The node whose region is served.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Stops accepting connections and closes the open ones (their threads end at their
    /// next read). Idempotent.
    pub fn shutdown(&self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the blocked `accept` with a connection of our own; it sees the flag and ends.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let woke = TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok();
        let handle = self.accept.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(h) = handle {
            if woke {
                let _ = h.join();
            }
        }
        let conns = std::mem::take(&mut *self.conns.lock().unwrap_or_else(PoisonError::into_inner));
        for s in conns.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        tracing::debug!(node = %self.node, addr = %self.local_addr, "TCP verbs server stopped");
    }
}

impl Drop for TcpVerbsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(
    listener: TcpListener,
    node: NodeId,
    backend: Arc<LocalVerbs>,
    limits: ServerLimits,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
) {
    let next_id = AtomicU64::new(0);
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%node, "TCP verbs accept: {e}");
                // Do not spin on a persistent error (e.g. out of file descriptors).
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(limits.idle_timeout));
        let _ = stream.set_write_timeout(Some(limits.idle_timeout));
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let admitted = {
            let mut open = conns.lock().unwrap_or_else(PoisonError::into_inner);
            if open.len() >= limits.max_connections {
                false
            } else {
                if let Ok(clone) = stream.try_clone() {
                    open.insert(id, clone);
                }
                true
            }
        };
        if !admitted {
            let why = format!("too many connections (at most {})", limits.max_connections);
            tracing::warn!(%node, peer = ?stream.peer_addr().ok(), "TCP verbs: {why}");
            let mut stream = stream;
            let _ = stream.write_all(&encode_reply(&[], Some(&Error::Backend(why))));
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let (backend, conns) = (backend.clone(), conns.clone());
        let spawned = std::thread::Builder::new().name(format!("tcp-verbs-{}-c{id}", node.0)).spawn(move || {
            let peer = stream.peer_addr().ok();
            if let Err(e) = serve_connection(stream, node, &backend) {
                tracing::debug!(%node, ?peer, "TCP verbs connection ended: {e}");
            }
            conns.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        });
        if let Err(e) = spawned {
            tracing::warn!(%node, "TCP verbs: cannot start a connection thread: {e}");
        }
    }
}

/// Serves one connection until the peer closes it, an I/O error (the idle timeout among
/// them), or an oversized frame.
fn serve_connection(mut s: TcpStream, node: NodeId, backend: &LocalVerbs) -> io::Result<()> {
    loop {
        let body = match read_frame(&mut s)? {
            Frame::Body(b) => b,
            Frame::Closed => return Ok(()),
            Frame::TooLarge(len) => {
                let why = format!("frame of {len} bytes exceeds the {MAX_FRAME_BYTES}-byte limit");
                s.write_all(&encode_reply(&[], Some(&Error::Backend(why.clone()))))?;
                let _ = s.shutdown(Shutdown::Both);
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
        };
        let reply = handle_request(&body, node, backend);
        s.write_all(&reply)?;
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

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

/// A peer node's server and the idle connections to it.
struct Peer {
    addr: SocketAddr,
    /// Idle connections and when each was last used.
    idle: Mutex<Vec<(TcpStream, Instant)>>,
}

impl Peer {
    /// The most recently used idle connection not older than [`POOL_IDLE_FOR`] (older ones
    /// are dropped).
    fn reuse(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|(_, since)| since.elapsed() < POOL_IDLE_FOR);
        idle.pop().map(|(s, _)| s)
    }
}

/// Verbs of one node over TCP: its own region directly, every other node of its DC through
/// that node's [`TcpVerbsServer`] (the `redt-tcp` baseline, RedT §6.5).
///
/// Each lone verb to a peer is one request/reply exchange; each
/// [`Verbs::post_batch`] is one exchange carrying the whole batch. Connections are opened
/// lazily, with `TCP_NODELAY`, and up to a few idle ones are kept per peer, each for at most
/// [`POOL_IDLE_FOR`]. A connection
/// that fails (connect, I/O, timeout, malformed reply) is dropped with every idle
/// connection to the same peer, and the verb returns [`Error::Backend`] naming the peer
/// and the cause; a later verb connects again. A verb whose connection broke mid-exchange
/// may or may not have run on the peer.
///
/// Verbs are counted in the backend's own [`VerbCounters`], on this side, for every verb
/// issued (local or remote), with the same rules as [`LocalVerbs`]: a lone verb counts
/// itself and one doorbell when it succeeds; a non-empty batch counts one doorbell, then
/// each request that completed.
pub struct TcpVerbs {
    own: NodeId,
    local: Arc<LocalVerbs>,
    peers: HashMap<NodeId, Peer>,
    io_timeout: Duration,
    counters: VerbCounters,
}

impl TcpVerbs {
    /// Verbs for node `own`: verbs to `own` go to its region in `local`, verbs to a node of
    /// `peers` go over TCP to the server at its address. An entry of `peers` for `own`
    /// itself is ignored. No connection is opened here.
    pub fn new(own: NodeId, local: Arc<LocalVerbs>, peers: HashMap<NodeId, SocketAddr>) -> TcpVerbs {
        let peers = peers
            .into_iter()
            .filter(|&(n, _)| n != own)
            .map(|(n, addr)| (n, Peer { addr, idle: Mutex::new(Vec::new()) }))
            .collect();
        TcpVerbs { own, local, peers, io_timeout: DEFAULT_IO_TIMEOUT, counters: VerbCounters::default() }
    }

    /// Sets the limit on connecting and on each read or write of an exchange (default
    /// [`DEFAULT_IO_TIMEOUT`]). A verb that exceeds it fails with [`Error::Backend`].
    pub fn with_io_timeout(mut self, timeout: Duration) -> TcpVerbs {
        self.io_timeout = timeout;
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
        let broken = |why: String| Error::Backend(format!("{node} at {}: {why}", peer.addr));
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
            None => self.connect(peer).map_err(|e| broken(format!("cannot connect: {e}")))?,
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

    fn connect(&self, peer: &Peer) -> io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&peer.addr, self.io_timeout)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(self.io_timeout))?;
        s.set_write_timeout(Some(self.io_timeout))?;
        Ok(s)
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
        (WorkRequest::Read { .. } | WorkRequest::Write { .. }, _) => false,
        (_, Completion::Atomic(_)) => true,
        _ => false,
    }
}

/// Writes `frame` and reads the reply body.
fn round_trip(s: &mut TcpStream, frame: &[u8]) -> io::Result<Vec<u8>> {
    s.write_all(frame)?;
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
        let len = u32::try_from(buf.len())
            .map_err(|_| Error::Backend(format!("{node}: a READ of {} bytes does not fit a frame", buf.len())))?;
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
