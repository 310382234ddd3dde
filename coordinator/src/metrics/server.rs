//! The metrics endpoint: plain HTTP/1.1 (hyper) on one TCP address, answering
//! `GET /metrics` with a fresh [`NodeSample`] of the node its [`NodeSource`] names, in the
//! text format the scraper's `Accept` header asks for. It reads, never writes, and holds at
//! most [`MAX_CONNECTIONS`] connections, each for at most [`CONNECTION_LIFETIME`].

use super::encode::{encode, Format};
use super::sample::NodeSample;
use crate::error::{Error, Result};
use crate::node::Node;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpSocket;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// The node a scrape reads: the current one (`None`: no node runs now, answered 503). An
/// embedded cluster's endpoint follows a node across its lives.
pub type NodeSource = Arc<dyn Fn() -> Option<Arc<Node>> + Send + Sync>;

/// Most connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 32;

/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a connection is kept (a keep-alive scraper reconnects after it).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// A running metrics endpoint; stops when shut down or dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Listens at `addr` (with `SO_REUSEADDR`, so a restarted node gets its port back at
    /// once) and serves the node `source` names. Must run inside a Tokio runtime.
    ///
    /// # Errors
    /// [`Error::MetricsBind`] if the address cannot be listened on (in use, not an address
    /// of this host).
    pub fn spawn(addr: SocketAddr, source: NodeSource) -> Result<MetricsServer> {
        let bind_error = |error| Error::MetricsBind { addr, error };
        let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(bind_error)?;
        socket.set_reuseaddr(true).map_err(bind_error)?;
        socket.bind(addr).map_err(bind_error)?;
        let listener = socket.listen(64).map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let task = tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::debug!(%addr, "metrics: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::debug!(%addr, "metrics: too many connections; one closed");
                    continue;
                };
                let source = source.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let service = hyper::service::service_fn(move |req| respond(req, source.clone()));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
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
