//! The TCP server of one node's region: accepts connections and executes the doorbell
//! batches its peers send (the two-sided half of the `redt-tcp` baseline, RedT §6.5).

use super::wire::{decode_request, encode_reply, read_frame, reply_bytes, Frame, Malformed, MAX_FRAME_BYTES};
use crate::error::{Error, Result};
use crate::verbs::{Completion, DoorbellBatch, LocalVerbs, Verbs};
use redt_proto::NodeId;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

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
