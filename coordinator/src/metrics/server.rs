//! The metrics endpoint: HTTP/1.1 (hyper) on one TCP address, plain or over TLS
//! ([`MetricsTls`], `metrics.tls`), answering `GET /metrics` with a fresh [`NodeSample`] of
//! the node its [`NodeSource`] names, in the text format the scraper's `Accept` header asks
//! for. It reads, never writes, and no client can keep the others out: it holds at most
//! `max_connections` connections in all and `max_connections_per_peer` from one client IP
//! address (the topology's `metrics:` section, [`MetricsConfig`]; 32 and 4 by default),
//! answering one more 503 and closing it at once; a connection waiting longer than
//! `idle_timeout` (5 s by default) for the headers of its next request — an idle keep-alive
//! one, or a client sending its request (or, over TLS, its handshake) too slowly — is closed;
//! so is one whose client takes no byte of a response for `write_timeout` (5 s by default: it
//! stopped reading, and the socket's buffers are full); and none is kept longer than
//! [`CONNECTION_LIFETIME`].

use super::encode::{encode, Format};
use super::sample::NodeSample;
use super::tls::MetricsTls;
use super::write_deadline::WriteDeadline;
use crate::error::{Error, Result};
use crate::node::Node;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use redt_proto::MetricsConfig;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// The node a scrape reads: the current one (`None`: no node runs now, answered 503). An
/// embedded cluster's endpoint follows a node across its lives.
pub type NodeSource = Arc<dyn Fn() -> Option<Arc<Node>> + Send + Sync>;

/// The longest a connection is kept, however busy (a keep-alive scraper reconnects after it).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// What a connection over a cap is sent before it is closed (best effort: whatever the
/// socket takes at once).
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
content-length: 45\r\nconnection: close\r\n\r\ntoo many connections to the metrics endpoint\n";

/// A running metrics endpoint; stops when shut down or dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Listens at `addr` (with `SO_REUSEADDR`, so a restarted node gets its port back at
    /// once) and serves the node `source` names, within `limits`' caps and timeouts, over
    /// HTTPS with `tls` when given, else plain HTTP (`limits`' `port` and `tls` are not read:
    /// `addr` says where, and the caller builds `tls` from the node's identity when
    /// `limits.tls` asks for it). Must run inside a Tokio runtime.
    ///
    /// # Errors
    /// [`Error::MetricsBind`] if the address cannot be listened on (in use, not an address
    /// of this host).
    pub fn spawn(
        addr: SocketAddr,
        limits: &MetricsConfig,
        source: NodeSource,
        tls: Option<MetricsTls>,
    ) -> Result<MetricsServer> {
        let bind_error = |error| Error::MetricsBind { addr, error };
        let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(bind_error)?;
        socket.set_reuseaddr(true).map_err(bind_error)?;
        socket.bind(addr).map_err(bind_error)?;
        let listener = socket.listen(64).map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let total = usize::try_from(limits.max_connections).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        let slots = Arc::new(Semaphore::new(total));
        let peers = PeerSlots::new(limits.max_connections_per_peer);
        let (idle_timeout, write_timeout) = (limits.idle_timeout, limits.write_timeout);
        let task = tokio::spawn(async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::debug!(%addr, "metrics: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(peer_slot) = peers.take(peer.ip()) else {
                    tracing::debug!(%addr, %peer, "metrics: too many connections from one address; one closed");
                    refuse(stream);
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::debug!(%addr, %peer, "metrics: too many connections; one closed");
                    refuse(stream);
                    continue;
                };
                let (source, tls) = (source.clone(), tls.clone());
                tokio::spawn(async move {
                    let _slots = (slot, peer_slot);
                    // Under TLS too: the handshake's bytes and the encrypted response's are
                    // what the client must take.
                    let io = WriteDeadline::new(stream, write_timeout);
                    let served = async {
                        let Some(tls) = tls else {
                            return serve(io, source, idle_timeout).await;
                        };
                        match tokio::time::timeout(idle_timeout, tls.acceptor().accept(io)).await {
                            Ok(Ok(io)) => serve(io, source, idle_timeout).await,
                            Ok(Err(e)) => tracing::debug!(%addr, %peer, "metrics: TLS handshake failed: {e}"),
                            Err(_) => {
                                tracing::debug!(%addr, %peer, "metrics: TLS handshake not done in {idle_timeout:?}")
                            }
                        }
                    };
                    let _ = tokio::time::timeout(CONNECTION_LIFETIME, served).await;
                });
            }
        });
        Ok(MetricsServer { addr, task })
    }

    /// The address it listens at (the port chosen for a bind to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting (connections being served end at their next await).
    pub fn shutdown(&self) {
        self.task.abort();
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves HTTP/1.1 requests on `io` until the client closes it, a timeout closes it, or it
/// fails (a write past `write_timeout` among them).
async fn serve<S>(io: S, source: NodeSource, idle_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| respond(req, source.clone()));
    // Hyper's header timer runs from the moment a connection waits for a request's headers,
    // its first or one after a response: it is the idle timeout of a keep-alive connection as
    // well as the request read timeout.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(idle_timeout)
        .serve_connection(TokioIo::new(io), service);
    if let Err(e) = conn.await {
        tracing::debug!("metrics: connection closed: {e}");
    }
}

/// Sends a connection over a cap what the socket takes at once of a 503, and closes it.
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(REFUSED);
}

/// The connections open from each client IP address, under a cap.
#[derive(Clone)]
struct PeerSlots {
    cap: u64,
    open: Arc<Mutex<HashMap<IpAddr, u64>>>,
}

/// One connection's place under its address's cap, given back when dropped.
struct PeerSlot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, u64>>>,
}

impl PeerSlots {
    fn new(cap: u64) -> PeerSlots {
        PeerSlots { cap, open: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// A slot for one more connection from `ip` (an IPv4 address mapped into IPv6 counts as
    /// itself), or `None` when `ip` has the cap's worth open.
    fn take(&self, ip: IpAddr) -> Option<PeerSlot> {
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot { ip, open: self.open.clone() })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The answer to one request: the metrics for `GET /metrics`, 405 for another method there,
/// 404 elsewhere, 503 while the node does not run.
async fn respond(req: Request<Incoming>, source: NodeSource) -> std::result::Result<Response<String>, Infallible> {
    let text = |status: StatusCode, body: String| {
        let mut r = Response::new(body);
        *r.status_mut() = status;
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        r
    };
    if req.uri().path() != "/metrics" {
        return Ok(text(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n".into()));
    }
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
        return Ok(r);
    }
    let format = Format::from_accept(req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()));
    let Some(node) = source() else {
        return Ok(text(StatusCode::SERVICE_UNAVAILABLE, "the node does not run\n".into()));
    };
    match NodeSample::gather(&node).await {
        Ok(sample) => {
            let mut r = Response::new(encode(sample, format));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
            Ok(r)
        }
        Err(e) => Ok(text(StatusCode::SERVICE_UNAVAILABLE, format!("the node cannot be read: {e}\n"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_cap_and_gets_its_slots_back() {
        let slots = PeerSlots::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = slots.take(a).expect("one");
        let second = slots.take(mapped).expect("two: the same address, mapped into IPv6");
        assert!(slots.take(a).is_none(), "over the cap");
        assert!(slots.take(b).is_some(), "another address has its own");
        drop(first);
        let third = slots.take(a).expect("a slot given back");
        drop((second, third));
        assert!(slots.open.lock().unwrap().is_empty(), "no address is remembered without a connection");
    }

    #[test]
    fn the_refusal_is_a_whole_503() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
    }
}
